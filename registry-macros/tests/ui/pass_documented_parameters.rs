use hermes_runtime::prelude::*;

/// Parameter doc comments are not valid Rust on their own; the attribute strips them.
#[tool(toolset = "demo", emoji = "🧪")]
pub fn documented(
    /// A name.
    name: String,
    /// How many.
    count: Option<u32>,
    ctx: &ToolContext,
) -> ToolResult {
    let _ = (count, ctx);
    Ok(json!({ "name": name }).into())
}

/// Async handlers are fine too.
#[tool(toolset = "demo")]
pub async fn later(
    /// What to wait for.
    what: String,
) -> ToolResult {
    Ok(json!({ "what": what }).into())
}

fn main() {}
