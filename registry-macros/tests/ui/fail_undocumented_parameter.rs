use hermes_runtime::prelude::*;

/// Greets.
#[tool(toolset = "demo")]
pub fn greet(
    /// Who.
    name: String,
    loudly: bool,
) -> ToolResult {
    Ok(json!({ "name": name, "loudly": loudly }).into())
}

fn main() {}
