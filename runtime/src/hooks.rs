//! Hooks around every tool call: `pre_tool_call` may block, rewrite arguments or ask a
//! human; `post_tool_call` observes; `transform_result` may replace the result text.

use serde_json::{Map, Value};
use std::cell::RefCell;
use std::collections::BTreeSet;

/// Identity of a call, passed to every hook (`""` when unknown).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallIds {
    pub task_id: String,
    pub session_id: String,
    pub tool_call_id: String,
    pub turn_id: String,
    pub api_request_id: String,
}

#[derive(Debug, Clone)]
pub struct PreCall<'a> {
    pub tool_name: &'a str,
    pub args: &'a Value,
    pub ids: &'a CallIds,
}

/// What a pre-call hook wants. Several hooks run in one pass and their answers are
/// read together: any usable block wins, modifications merge, the first approval
/// request is asked.
#[derive(Debug, Clone, PartialEq)]
pub enum PreDecision {
    Continue,
    /// Shallow-merged into the arguments; an empty map changes nothing.
    Modify(Map<String, Value>),
    /// The message becomes the result `{"error": message}`; an empty one is ignored.
    Block(String),
    /// Ask the approval gate; `rule_key` is the grain of "always allow".
    Approve {
        message: String,
        rule_key: Option<String>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallStatus {
    Ok,
    Error,
    Blocked,
}

impl CallStatus {
    pub fn as_str(&self) -> &'static str {
        match self {
            CallStatus::Ok => "ok",
            CallStatus::Error => "error",
            CallStatus::Blocked => "blocked",
        }
    }
}

#[derive(Debug, Clone)]
pub struct PostCall<'a> {
    pub tool_name: &'a str,
    pub args: &'a Value,
    pub result: &'a str,
    pub ids: &'a CallIds,
    pub duration_ms: u64,
    pub status: CallStatus,
    pub error_type: Option<String>,
    pub error_message: Option<String>,
}

/// Implement what you need; every method has a do-nothing default.
pub trait ToolHooks: Send + Sync {
    fn pre_tool_call(&self, _call: &PreCall<'_>) -> PreDecision {
        PreDecision::Continue
    }
    fn post_tool_call(&self, _call: &PostCall<'_>) {}
    /// `Some(text)` replaces the result; the first hook to answer wins.
    fn transform_result(&self, _call: &PostCall<'_>) -> Option<String> {
        None
    }
}

/// Asks a human (or a policy) whether a hook-flagged call may run.
pub trait ApprovalGate: Send + Sync {
    /// `Ok(true)` approves; `Ok(false)` declines; `Err` means the gate itself failed.
    fn approve(&self, tool: &str, message: &str, rule_key: &str) -> Result<bool, String>;
}

/// The combined verdict of all pre-call hooks.
#[derive(Debug, Clone, PartialEq)]
pub enum PreVerdict {
    Run(Value),
    Blocked(String),
}

/// Runs every hook once and combines the answers.
pub fn run_pre_hooks(
    hooks: &[std::sync::Arc<dyn ToolHooks>],
    gate: Option<&dyn ApprovalGate>,
    tool: &str,
    args: Value,
    ids: &CallIds,
) -> PreVerdict {
    let mut merged = match &args {
        Value::Object(map) => map.clone(),
        _ => Map::new(),
    };
    let mut block: Option<String> = None;
    let mut approval: Option<(String, Option<String>)> = None;
    let mut modified = false;
    for hook in hooks {
        let decision = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            hook.pre_tool_call(&PreCall {
                tool_name: tool,
                args: &args,
                ids,
            })
        }));
        match decision {
            Ok(PreDecision::Modify(changes)) if !changes.is_empty() => {
                merged.extend(changes);
                modified = true;
            }
            Ok(PreDecision::Block(message)) if !message.trim().is_empty() => {
                block.get_or_insert(message);
            }
            Ok(PreDecision::Approve { message, rule_key }) => {
                approval.get_or_insert((message, rule_key));
            }
            Ok(_) => {}
            Err(_) => {
                eprintln!("warning: a pre_tool_call hook panicked while checking {tool}; ignored")
            }
        }
    }
    if let Some(message) = block {
        return PreVerdict::Blocked(message);
    }
    if let Some((message, rule_key)) = approval {
        let rule_key = rule_key.unwrap_or_else(|| tool.to_string());
        let answer = match gate {
            Some(gate) => std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                gate.approve(tool, &message, &rule_key)
            }))
            .unwrap_or_else(|_| Err("the approval gate panicked".into())),
            None => Ok(false),
        };
        match answer {
            Ok(true) => {}
            Ok(false) => {
                let refusal = if message.trim().is_empty() {
                    format!("BLOCKED: plugin approval required for {tool}")
                } else {
                    format!("BLOCKED: plugin approval required for {tool}: {message}")
                };
                return PreVerdict::Blocked(refusal);
            }
            Err(_) => {
                return PreVerdict::Blocked(format!(
                    "BLOCKED: plugin approval gate failed for {tool}"
                ))
            }
        }
    }
    if modified {
        PreVerdict::Run(Value::Object(merged))
    } else {
        PreVerdict::Run(args)
    }
}

thread_local! {
    static THREAD_TOOL_WHITELIST: RefCell<Option<BTreeSet<String>>> = const { RefCell::new(None) };
}

/// Runs `work` with only `tools` callable from this thread; other threads are not
/// affected. Nested calls replace the list for their duration.
pub fn with_tool_whitelist<T>(
    tools: impl IntoIterator<Item = String>,
    work: impl FnOnce() -> T,
) -> T {
    let previous = THREAD_TOOL_WHITELIST.with(|w| w.replace(Some(tools.into_iter().collect())));
    struct Restore(Option<BTreeSet<String>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0.take();
            THREAD_TOOL_WHITELIST.with(|w| *w.borrow_mut() = previous);
        }
    }
    let _restore = Restore(previous);
    work()
}

/// The refusal for a tool outside this thread's whitelist, if one is set.
pub fn whitelist_refusal(tool: &str) -> Option<String> {
    THREAD_TOOL_WHITELIST.with(|w| match &*w.borrow() {
        Some(allowed) if !allowed.contains(tool) => Some(format!(
            "Tool '{tool}' denied: this context may only call {}",
            allowed.iter().cloned().collect::<Vec<_>>().join(", ")
        )),
        _ => None,
    })
}

/// Status of a result the handler returned normally: `{"error": ...}` counts as error.
pub fn derive_status(result: &str) -> (CallStatus, Option<String>, Option<String>) {
    if let Ok(Value::Object(object)) = serde_json::from_str::<Value>(result) {
        match object.get("error") {
            Some(Value::Null) | Some(Value::Bool(false)) | None => {}
            Some(Value::String(s)) if s.is_empty() => {}
            Some(error) => {
                let message = error
                    .as_str()
                    .map(str::to_owned)
                    .unwrap_or_else(|| error.to_string());
                return (CallStatus::Error, Some("tool_error".into()), Some(message));
            }
        }
    }
    (CallStatus::Ok, None, None)
}
