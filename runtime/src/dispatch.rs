//! Calling tools: the registry's dispatch (error layer 1) and the call entry point
//! (error layer 2). Every path returns a JSON string; nothing panics out.

use crate::availability::panic_message;
use crate::bridge::{block_on_bridge, BridgeError, DEFAULT_ASYNC_TIMEOUT};
use crate::catalog::{Catalog, Handler};
use crate::context::ToolContext;
use crate::output::{bound_error_text, tool_error, tool_error_with, ToolError, ToolOutput, ToolResult, ERROR_CAP_CHARS};
use serde_json::Value;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;
use std::time::Duration;

/// Tools that need an agent's own state (its todo list, memory, session store, child
/// agents); without an agent session attached they are refused.
pub const AGENT_LOOP_TOOLS: &[&str] = &["todo", "memory", "session_search", "delegate_task"];

/// Level 1: looks the tool up (aliases included) and runs its handler. Handler errors
/// and panics become `[TOOL_ERROR] Tool execution failed: <kind>: <message>`.
pub fn dispatch(catalog: &Catalog, name: &str, args: Value, ctx: &ToolContext) -> String {
    dispatch_with_timeout(catalog, name, args, ctx, DEFAULT_ASYNC_TIMEOUT)
}

pub fn dispatch_with_timeout(
    catalog: &Catalog,
    name: &str,
    args: Value,
    ctx: &ToolContext,
    timeout: Duration,
) -> String {
    let Some(entry) = catalog.tool(name) else {
        return unknown_tool_error(catalog, name);
    };
    let outcome = catch_unwind(AssertUnwindSafe(|| match entry.handler {
        Handler::Sync(handler) => handler(ctx, args),
        Handler::Async(handler) => {
            let future = handler(ctx.clone(), args);
            match block_on_bridge(future, timeout, ctx.cancellation()) {
                Ok(result) => result,
                Err(BridgeError::TimedOut(limit)) => Err(ToolError::new(
                    "Timeout",
                    format!("{} did not finish within {} s and was cancelled", entry.name, limit.as_secs_f64()),
                )),
                Err(BridgeError::Lost(why)) => Err(ToolError::new("panic", why)),
            }
        }
    }));
    let result: ToolResult = match outcome {
        Ok(result) => result,
        Err(payload) => Err(ToolError::new("panic", panic_message(&*payload))),
    };
    normalise_result(entry.name, result)
}

/// Turns a handler's result into the model's string.
pub fn normalise_result(tool: &str, result: ToolResult) -> String {
    match result {
        Ok(ToolOutput::Text(text)) => bound_oversized_error(text),
        Ok(ToolOutput::Multimodal(envelope)) => {
            if is_multimodal_envelope(&envelope) {
                envelope.to_string()
            } else {
                contract_error(tool, &envelope)
            }
        }
        Err(error) => {
            eprintln!("error: tool {tool} failed: {}", bound_log_text(&error.to_string()));
            tool_error(sanitize_error_text(&format!("Tool execution failed: {error}")))
        }
    }
}

/// `{"_multimodal": true, "content": [...]}` and nothing looser.
pub fn is_multimodal_envelope(value: &Value) -> bool {
    value.get("_multimodal") == Some(&Value::Bool(true))
        && value.get("content").is_some_and(Value::is_array)
}

/// A result that is neither text nor an envelope: reported, never passed on.
pub fn contract_error(tool: &str, value: &Value) -> String {
    let type_name = match value {
        Value::Object(_) => "dict",
        Value::Null => "NoneType",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "int",
        Value::Array(_) => "list",
        Value::Bool(_) => "bool",
        Value::String(_) => "str",
    };
    eprintln!("error: tool {tool} returned an unsupported result type {type_name}");
    tool_error_with(
        format!("Tool handler returned unsupported result type: {type_name}"),
        &[
            ("error_type", Value::from("tool_result_contract")),
            ("tool", Value::from(tool)),
            ("result_type", Value::from(type_name)),
        ],
    )
}

/// A long text result whose `error` field alone passes the cap gets that field cut.
fn bound_oversized_error(text: String) -> String {
    if text.len() <= ERROR_CAP_CHARS || !text.contains("error") {
        return text;
    }
    let Ok(Value::Object(mut object)) = serde_json::from_str::<Value>(&text) else {
        return text;
    };
    match object.get("error") {
        Some(Value::String(error)) if error.chars().count() > ERROR_CAP_CHARS => {
            let bounded = bound_error_text(error);
            object.insert("error".into(), Value::String(bounded));
            Value::Object(object).to_string()
        }
        _ => text,
    }
}

fn unknown_tool_error(catalog: &Catalog, name: &str) -> String {
    let mut candidates: Vec<(f64, &str)> = catalog
        .tools
        .iter()
        .flat_map(|t| std::iter::once(t.name).chain(t.aliases.iter().copied()))
        .map(|known| (strsim::jaro_winkler(name, known), known))
        .filter(|(score, _)| *score >= 0.8)
        .collect();
    candidates.sort_by(|a, b| b.0.total_cmp(&a.0));
    let suggestions: Vec<&str> = candidates.iter().take(3).map(|(_, n)| *n).collect();
    if suggestions.is_empty() {
        tool_error(format!("Unknown tool: {name}"))
    } else {
        tool_error(format!("Unknown tool: {name}. Did you mean: {}?", suggestions.join(", ")))
    }
}

/// The log gets more of an error than the model does, but not an unbounded amount.
fn bound_log_text(text: &str) -> &str {
    match text.char_indices().nth(8192) {
        Some((cut, _)) => &text[..cut],
        None => text,
    }
}

/// Error texts come from handlers and may echo model input. Strip what could read as
/// a protocol frame (role tags, code fences, CDATA), cap it, and mark it as a tool
/// error so the model does not take it for its own output.
pub fn sanitize_error_text(text: &str) -> String {
    static PATTERNS: OnceLock<[regex::Regex; 4]> = OnceLock::new();
    let [tags, open_fence, close_fence, cdata] = PATTERNS.get_or_init(|| {
        [
            regex::Regex::new(r"(?i)</?(?:tool_call|function_call|result|response|output|input|system|assistant|user)>").unwrap(),
            regex::Regex::new(r"(?m)^```(?:json|xml|html|markdown)?").unwrap(),
            regex::Regex::new(r"(?m)```$").unwrap(),
            regex::Regex::new(r"(?s)<!\[CDATA\[.*?\]\]>").unwrap(),
        ]
    });
    let mut cleaned = cdata.replace_all(text, "").into_owned();
    for pattern in [tags, open_fence, close_fence] {
        cleaned = pattern.replace_all(&cleaned, "").into_owned();
    }
    if cleaned.chars().count() > ERROR_CAP_CHARS {
        let cut = cleaned.char_indices().nth(ERROR_CAP_CHARS - 3).map_or(cleaned.len(), |(i, _)| i);
        cleaned = format!("{}...", &cleaned[..cut]);
    }
    format!("[TOOL_ERROR] {cleaned}")
}

/// One tool call as a model emits it.
#[derive(Debug, Clone, Default)]
pub struct ToolCall {
    pub name: String,
    /// The `arguments` text or value; `None`, `null` and `""` mean no arguments.
    pub arguments: Option<Value>,
    pub task_id: Option<String>,
    pub session_id: Option<String>,
    pub tool_call_id: Option<String>,
}

/// Level 2: the entry point an agent loop calls. Maps aliases, parses arguments,
/// refuses agent-loop tools, dispatches; anything that escapes becomes
/// `[TOOL_ERROR] Error executing <name>: <message>`.
pub fn handle_function_call(catalog: &Catalog, call: &ToolCall, ctx: &ToolContext) -> String {
    let outcome = catch_unwind(AssertUnwindSafe(|| -> Result<String, ToolError> {
        let name = catalog.tool(&call.name).map_or(call.name.as_str(), |entry| entry.name);
        if AGENT_LOOP_TOOLS.contains(&name) {
            return Ok(tool_error(format!("{name} must be handled by the agent loop")));
        }
        let args = parse_arguments(call.arguments.as_ref())?;
        crate::context::note_tool_call(ctx.task_id(), name);
        Ok(dispatch(catalog, name, args, ctx))
    }));
    let error = match outcome {
        Ok(Ok(result)) => return result,
        Ok(Err(error)) => error.to_string(),
        Err(payload) => format!("panic: {}", panic_message(&*payload)),
    };
    eprintln!("error: executing {} failed: {}", call.name, bound_log_text(&error));
    tool_error(sanitize_error_text(&format!("Error executing {}: {error}", call.name)))
}

/// Arguments arrive as a JSON string (OpenAI shape) or an already parsed value.
pub fn parse_arguments(arguments: Option<&Value>) -> Result<Value, ToolError> {
    match arguments {
        None | Some(Value::Null) => Ok(Value::Object(Default::default())),
        Some(Value::String(text)) if text.trim().is_empty() => Ok(Value::Object(Default::default())),
        Some(Value::String(text)) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Null) => Ok(Value::Object(Default::default())),
            Ok(value @ Value::Object(_)) => Ok(value),
            Ok(other) => Err(ToolError::invalid_arguments(format!(
                "arguments must be a JSON object, got {}",
                crate::args::json_type_name(&other)
            ))),
            Err(e) => Err(ToolError::invalid_arguments(format!("arguments are not valid JSON: {e}"))),
        },
        Some(value @ Value::Object(_)) => Ok(value.clone()),
        Some(other) => Err(ToolError::invalid_arguments(format!(
            "arguments must be a JSON object, got {}",
            crate::args::json_type_name(other)
        ))),
    }
}
