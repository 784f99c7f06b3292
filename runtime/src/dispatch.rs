//! Calling tools: the registry's dispatch (error layer 1) and the call entry point
//! (error layer 2, hooks, budgets). Every path returns a JSON string; nothing panics
//! out, whatever the handler, the hooks or the arguments do.

use crate::availability::panic_message;
use crate::bridge::{block_on_bridge, BridgeError, DEFAULT_ASYNC_TIMEOUT};
use crate::catalog::{BoxFuture, Handler};
use crate::context::ToolContext;
use crate::hooks::{
    derive_status, run_pre_hooks, whitelist_refusal, CallIds, CallStatus, PostCall, PreVerdict,
};
use crate::output::{
    bound_error_text, tool_error, tool_error_with, ToolError, ToolOutput, ToolResult,
    ERROR_CAP_CHARS,
};
use crate::registry::{DynamicHandler, Registry, ToolRef};
use serde_json::Value;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Tools that need an agent's own state; answered by the context's agent session, or
/// refused when none is attached.
pub const AGENT_LOOP_TOOLS: &[&str] = &[
    "todo",
    "memory",
    "session_search",
    "delegate_task",
    "clarify",
];

/// One tool call as a model emits it.
#[derive(Debug, Clone, Default)]
pub struct ToolCall {
    pub name: String,
    /// The `arguments` text or value; `None`, `null` and `""` mean no arguments.
    pub arguments: Option<Value>,
    pub tool_call_id: Option<String>,
    pub turn_id: Option<String>,
    pub api_request_id: Option<String>,
    /// Set by a caller that already ran the pre-call hooks for this call.
    pub skip_pre_hook: bool,
}

impl ToolCall {
    pub fn new(name: impl Into<String>, arguments: Value) -> ToolCall {
        ToolCall {
            name: name.into(),
            arguments: Some(arguments),
            ..Default::default()
        }
    }
}

impl Registry {
    /// Level 1: looks the tool up (aliases included) and runs its handler. Handler
    /// errors and panics become `[TOOL_ERROR] Tool execution failed: <kind>: <msg>`.
    pub fn dispatch(&self, name: &str, args: Value, ctx: &ToolContext) -> String {
        self.dispatch_with_timeout(name, args, ctx, DEFAULT_ASYNC_TIMEOUT)
    }

    pub fn dispatch_with_timeout(
        &self,
        name: &str,
        args: Value,
        ctx: &ToolContext,
        timeout: Duration,
    ) -> String {
        let Some(tool) = self.get(name) else {
            return self.unknown_tool_error(name);
        };
        let tool_name = tool.name().to_string();
        let outcome = catch_unwind(AssertUnwindSafe(|| run_handler(&tool, args, ctx, timeout)));
        match outcome {
            Ok(result) => normalise_result(&tool_name, result),
            Err(payload) => normalise_result(
                &tool_name,
                Err(ToolError::new("panic", panic_message(&*payload))),
            ),
        }
    }

    fn unknown_tool_error(&self, name: &str) -> String {
        let mut known = self.tool_names();
        known.extend(
            self.catalog()
                .tools
                .iter()
                .flat_map(|t| t.aliases.iter().map(|a| a.to_string())),
        );
        let mut candidates: Vec<(f64, String)> = known
            .into_iter()
            .map(|k| (strsim::normalized_damerau_levenshtein(name, &k), k))
            .filter(|(similarity, _)| *similarity >= 0.6)
            .collect();
        candidates.sort_by(|a, b| b.0.total_cmp(&a.0));
        let suggestions: Vec<String> = candidates.into_iter().take(3).map(|(_, n)| n).collect();
        if suggestions.is_empty() {
            tool_error(format!("Unknown tool: {name}"))
        } else {
            tool_error(format!(
                "Unknown tool: {name}. Did you mean: {}?",
                suggestions.join(", ")
            ))
        }
    }

    /// Level 2: the entry point an agent loop calls. Maps aliases, parses and coerces
    /// arguments, answers agent-loop tools through the context's session, runs the
    /// hooks, dispatches, applies the result budget. Anything that escapes becomes
    /// `[TOOL_ERROR] Error executing <name>: <message>`.
    pub fn handle_function_call(&self, call: &ToolCall, ctx: &ToolContext) -> String {
        let name = self.canonical_name(&call.name).into_owned();
        let ids = CallIds {
            task_id: ctx.task_id().to_string(),
            session_id: ctx.session_id().to_string(),
            tool_call_id: call.tool_call_id.clone().unwrap_or_default(),
            turn_id: call.turn_id.clone().unwrap_or_default(),
            api_request_id: call.api_request_id.clone().unwrap_or_default(),
        };
        let started = Instant::now();
        let mut seen_args = Value::Object(Default::default());
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            self.guarded_call(&name, call, ctx, &ids, started, &mut seen_args)
        }));
        let error = match outcome {
            Ok(Ok(result)) => return result,
            Ok(Err(error)) => (error.kind.clone(), error.message.clone()),
            Err(payload) => ("panic".to_string(), panic_message(&*payload)),
        };
        let message = format!("{}: {}", error.0, error.1);
        eprintln!(
            "error: executing {name} failed: {}",
            bound_log_text(&message)
        );
        let result = tool_error(sanitize_error_text(&format!(
            "Error executing {name}: {message}"
        )));
        let post = PostCall {
            tool_name: &name,
            args: &seen_args,
            result: &result,
            ids: &ids,
            duration_ms: started.elapsed().as_millis() as u64,
            status: CallStatus::Error,
            error_type: Some(error.0),
            error_message: Some(error.1),
        };
        self.run_post_hooks(&post);
        result
    }

    fn guarded_call(
        &self,
        name: &str,
        call: &ToolCall,
        ctx: &ToolContext,
        ids: &CallIds,
        started: Instant,
        seen_args: &mut Value,
    ) -> Result<String, ToolError> {
        // One look at the configuration per call, which every part of the call then uses.
        let config = self.config();
        let _call_config = crate::config::enter_call(std::sync::Arc::clone(&config));
        let mut args = parse_arguments(call.arguments.as_ref())?;
        let tool = self.get(name);
        if let Some(tool) = &tool {
            args = crate::coerce::coerce_arguments(args, &tool.parameters());
        }
        // Only hooks look at the arguments after the call; without any, nothing is kept.
        let observed = self.has_hooks();
        if observed {
            *seen_args = args.clone();
        }
        let is_agent_tool = AGENT_LOOP_TOOLS.contains(&name)
            && tool
                .as_ref()
                .is_none_or(|t| matches!(t, ToolRef::Static(_)));
        if is_agent_tool && ctx.agent_session().is_none() {
            return Ok(tool_error(format!(
                "{name} must be handled by the agent loop: it needs an agent session (its todo list, memory, session store or user channel), and none is attached to this call"
            )));
        }
        if let Some(refusal) = whitelist_refusal(name) {
            return Ok(tool_error(refusal));
        }
        if !call.skip_pre_hook {
            let hooks = self.hooks();
            if !hooks.is_empty() {
                let gate = self.approval_gate().unwrap_or_else(|| {
                    std::sync::Arc::new(crate::approval::CallApprovalGate::for_call(ctx))
                        as std::sync::Arc<dyn crate::hooks::ApprovalGate>
                });
                match run_pre_hooks(&hooks, Some(gate.as_ref()), name, args, ids) {
                    PreVerdict::Run(new_args) => args = new_args,
                    PreVerdict::Blocked(message) => {
                        let result = tool_error(&message);
                        self.run_post_hooks(&PostCall {
                            tool_name: name,
                            args: seen_args,
                            result: &result,
                            ids,
                            duration_ms: started.elapsed().as_millis() as u64,
                            status: CallStatus::Blocked,
                            error_type: Some("plugin_block".into()),
                            error_message: Some(message),
                        });
                        return Ok(result);
                    }
                }
                *seen_args = args.clone();
            }
        }
        crate::context::note_tool_call(ctx.task_id(), name);
        let answered_by_session = match (is_agent_tool, ctx.agent_session()) {
            (true, Some(session)) => {
                catch_unwind(AssertUnwindSafe(|| session.handle(name, args.clone(), ctx)))
                    .unwrap_or_else(|payload| {
                        Some(tool_error(sanitize_error_text(&format!(
                            "Tool execution failed: panic: {}",
                            panic_message(&*payload)
                        ))))
                    })
            }
            _ => None,
        };
        let mut result = match answered_by_session {
            Some(result) => result,
            None if tool.is_none() && is_agent_tool => tool_error(format!(
                "{name} is not provided by the attached agent session or by any tool"
            )),
            None if observed => self.dispatch(name, args.clone(), ctx),
            None => self.dispatch(name, std::mem::take(&mut args), ctx),
        };
        if observed {
            // The status is read back from the result only for the hooks.
            let (status, error_type, error_message) = derive_status(&result);
            let post = PostCall {
                tool_name: name,
                args: &args,
                result: &result,
                ids,
                duration_ms: started.elapsed().as_millis() as u64,
                status,
                error_type,
                error_message,
            };
            self.run_post_hooks(&post);
            if let Some(replacement) = self.run_transform_hooks(&post) {
                result = replacement;
            }
        }
        if is_multimodal_text(&result) {
            // Images are attached natively by the host; their base64 is not text the
            // model reads, so it does not count against the budget.
            return Ok(result);
        }
        let threshold = crate::budget::result_threshold(
            name,
            tool.as_ref().and_then(ToolRef::max_result_chars),
            &config,
        );
        let call_id = if ids.tool_call_id.is_empty() {
            name
        } else {
            &ids.tool_call_id
        };
        Ok(crate::budget::apply_budget(
            result,
            threshold,
            self.hermes_home(),
            call_id,
        ))
    }

    fn run_post_hooks(&self, post: &PostCall<'_>) {
        for hook in self.hooks() {
            if catch_unwind(AssertUnwindSafe(|| hook.post_tool_call(post))).is_err() {
                eprintln!("warning: a post_tool_call hook panicked; ignored");
            }
        }
    }

    fn run_transform_hooks(&self, post: &PostCall<'_>) -> Option<String> {
        self.hooks().iter().find_map(|hook| {
            catch_unwind(AssertUnwindSafe(|| hook.transform_result(post)))
                .ok()
                .flatten()
        })
    }
}

fn run_handler(tool: &ToolRef, args: Value, ctx: &ToolContext, timeout: Duration) -> ToolResult {
    match tool {
        ToolRef::Static(entry) => match entry.handler {
            Handler::Sync(handler) => handler(ctx, args),
            Handler::Async(handler) => bridge(entry.name, handler(ctx.clone(), args), ctx, timeout),
        },
        ToolRef::Dynamic(dynamic) => match &dynamic.handler {
            DynamicHandler::Sync(handler) => {
                handler(args, ctx).map(|value| value_output(&dynamic.name, value))
            }
            DynamicHandler::Async(handler) => {
                let future = handler(args, ctx.clone());
                let name = dynamic.name.clone();
                let mapped: BoxFuture<ToolResult> =
                    Box::pin(async move { future.await.map(|v| value_output(&name, v)) });
                bridge(&dynamic.name, mapped, ctx, timeout)
            }
        },
    }
}

fn bridge(
    name: &str,
    future: BoxFuture<ToolResult>,
    ctx: &ToolContext,
    timeout: Duration,
) -> ToolResult {
    match block_on_bridge(future, timeout, ctx.cancellation()) {
        Ok(result) => result,
        Err(BridgeError::TimedOut(limit)) => Err(ToolError::new(
            "Timeout",
            format!(
                "{name} did not finish within {} s and was cancelled",
                limit.as_secs_f64()
            ),
        )),
        Err(BridgeError::Lost(why)) => Err(ToolError::new("panic", why)),
    }
}

/// The adapter contract for handlers that answer with JSON values.
fn value_output(tool: &str, value: Value) -> ToolOutput {
    match value {
        Value::String(text) => ToolOutput::Text(text),
        envelope if is_multimodal_envelope(&envelope) => ToolOutput::Multimodal(envelope),
        other => ToolOutput::Text(contract_error(tool, &other)),
    }
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
            eprintln!(
                "error: tool {tool} failed: {}",
                bound_log_text(&error.to_string())
            );
            tool_error(sanitize_error_text(&format!(
                "Tool execution failed: {error}"
            )))
        }
    }
}

/// `{"_multimodal": true, "content": [...]}` and nothing looser.
pub fn is_multimodal_envelope(value: &Value) -> bool {
    value.get("_multimodal") == Some(&Value::Bool(true))
        && value.get("content").is_some_and(Value::is_array)
}

/// Whether a result string is a serialised multimodal envelope (cheap prefix check
/// first: envelopes are written with `_multimodal` as their first key).
fn is_multimodal_text(result: &str) -> bool {
    result.starts_with("{\"_multimodal\"")
        && serde_json::from_str::<Value>(result).is_ok_and(|value| is_multimodal_envelope(&value))
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
        let cut = cleaned
            .char_indices()
            .nth(ERROR_CAP_CHARS - 3)
            .map_or(cleaned.len(), |(i, _)| i);
        cleaned = format!("{}...", &cleaned[..cut]);
    }
    format!("[TOOL_ERROR] {cleaned}")
}

/// Arguments arrive as a JSON string (OpenAI shape) or an already parsed value.
pub fn parse_arguments(arguments: Option<&Value>) -> Result<Value, ToolError> {
    let empty = || Value::Object(Default::default());
    match arguments {
        None | Some(Value::Null) => Ok(empty()),
        Some(Value::String(text)) if text.trim().is_empty() => Ok(empty()),
        Some(Value::String(text)) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Null) => Ok(empty()),
            Ok(value @ Value::Object(_)) => Ok(value),
            Ok(other) => Err(ToolError::invalid_arguments(format!(
                "arguments must be a JSON object, got {}",
                crate::args::json_type_name(&other)
            ))),
            Err(e) => Err(ToolError::invalid_arguments(format!(
                "arguments are not valid JSON: {e}"
            ))),
        },
        Some(value @ Value::Object(_)) => Ok(value.clone()),
        Some(other) => Err(ToolError::invalid_arguments(format!(
            "arguments must be a JSON object, got {}",
            crate::args::json_type_name(other)
        ))),
    }
}
