use hermes_runtime::prelude::*;

/// Does a thing.
#[tool(toolset = "demo", colour = "red")]
pub fn thing() -> ToolResult {
    Ok(json!({}).into())
}

fn main() {}
