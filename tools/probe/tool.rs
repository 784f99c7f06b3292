use hermes_runtime::prelude::*;
mod helper;

/// Echo test.
#[tool(toolset = "probe", emoji = "🔁")]
pub fn probe_echo(
    /// Text to echo.
    text: String,
    /// How many times.
    times: Option<u32>,
    ctx: &ToolContext,
) -> ToolResult {
    let _ = ctx;
    Ok(json!({"echo": helper::repeat(&text, times.unwrap_or(1))}).into())
}

/// Async echo.
#[tool(toolset = "probe")]
pub async fn probe_async(
    /// Text.
    text: String,
) -> ToolResult {
    tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    Ok(json!({"echo": text}).into())
}
