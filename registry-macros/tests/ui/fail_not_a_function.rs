use hermes_runtime::prelude::*;

#[tool(toolset = "demo")]
pub struct Settings;

fn main() {}
