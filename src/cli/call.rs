//! `call`: one tool call from the command line, its result string printed.

use super::{terminal_prompter, SelectionArgs};
use hermes_runtime::{Registry, ToolCall, ToolContext};
use serde_json::Value;
use std::io::Read;
use std::sync::Arc;

pub(super) fn call(
    registry: &Arc<Registry>,
    name: String,
    args: Option<String>,
    task_id: Option<String>,
    cwd: Option<std::path::PathBuf>,
    selection: &SelectionArgs,
) -> Result<String, String> {
    selection.restriction().enforce_on(registry);
    let text = match args.as_deref() {
        Some("-") => {
            let mut buffer = String::new();
            std::io::stdin()
                .read_to_string(&mut buffer)
                .map_err(|e| format!("cannot read arguments from stdin: {e}"))?;
            buffer
        }
        Some(text) => text.to_string(),
        None => String::new(),
    };
    let mut builder = ToolContext::builder();
    if let Some(task_id) = task_id {
        builder = builder.task_id(task_id);
    }
    if let Some(cwd) = cwd {
        builder = builder.cwd(cwd);
    }
    if let Some(prompter) = terminal_prompter() {
        builder = builder.approver(prompter);
    }
    let call = ToolCall::new(name, Value::String(text));
    let result = registry.handle_function_call(&call, &builder.build());
    Ok(format!("{result}\n"))
}
