//! The client of `hermes-tools serve` as the human in the loop.
//!
//! With `--approvals client`, a command that needs approval becomes a request line, and
//! the call waits for the client's answer while other lines keep running:
//!
//! ```text
//! <- {"type": "approval_request", "id": "approval_1", "session_id": "s1", "task_id": "t1", "tool": "terminal", "command": "rm -rf build", "description": "recursive delete", "choices": ["once", "session", "always", "deny"]}
//! -> {"type": "approval_response", "id": "approval_1", "choice": "once"}
//! ```
//!
//! A choice that was not offered, or any other word, denies. No answer within
//! `approvals.timeout` denies and writes `{"type": "approval_timeout", "id": ...}`.
//!
//! Background-process notifications are pushed as they happen:
//! `{"type": "process_notification", "session_id": <process id>, "task_id": ..., "event": "completed" | "watch_match" | ..., ...}`.

use crate::serve::ClarifyHub;
use hermes_runtime::approval::{shown_command, ApprovalPrompter, Choice, PromptRequest};
use hermes_runtime::context::Cancellation;
use serde_json::{json, Value};
use std::sync::Arc;

/// Who answers approval requests in `serve`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ApprovalsMode {
    /// Nobody: the unattended policy (`approvals.unattended_mode`) applies.
    #[default]
    Unattended,
    /// The client, through `approval_request` / `approval_response` lines.
    Client,
}

impl std::str::FromStr for ApprovalsMode {
    type Err = String;
    fn from_str(text: &str) -> Result<ApprovalsMode, String> {
        match text.trim() {
            "client" => Ok(ApprovalsMode::Client),
            "none" | "unattended" => Ok(ApprovalsMode::Unattended),
            other => Err(format!(
                "unknown approvals mode {other:?}: use `client` (the client answers) or `none`"
            )),
        }
    }
}

/// Asks the client on behalf of one call.
pub struct ClientApprover {
    hub: Arc<ClarifyHub>,
    session_id: Option<String>,
    task_id: Option<String>,
}

impl ClientApprover {
    pub(crate) fn new(
        hub: Arc<ClarifyHub>,
        session_id: Option<String>,
        task_id: Option<String>,
    ) -> ClientApprover {
        ClientApprover {
            hub,
            session_id,
            task_id,
        }
    }
}

impl ApprovalPrompter for ClientApprover {
    fn prompt(&self, request: &PromptRequest) -> Choice {
        let id = self.hub.next_id("approval");
        let choices = request.choices();
        let mut line = json!({
            "type": "approval_request",
            "id": id,
            "session_id": self.session_id,
            "task_id": self.task_id,
            "tool": request.tool.as_deref().unwrap_or("terminal"),
            "command": shown_command(&request.command),
            "description": request.description,
            "choices": choices,
        });
        if request.smart_denied {
            line["smart_denied"] = json!(true);
        }
        if let Some(dir) = &request.working_directory {
            line["cwd"] = json!(shown_command(dir));
        }
        // Nothing here is cancelled from outside: the approval timeout bounds the wait.
        match self.hub.ask(
            &id,
            line,
            "approval_timeout",
            request.timeout,
            &Cancellation::default(),
        ) {
            Ok(Some(response)) => request
                .choice_from_word(response.get("choice").and_then(Value::as_str).unwrap_or("")),
            Ok(None) => Choice::Timeout,
            Err(_) => Choice::Cancelled,
        }
    }
}

/// A background-process event as a `process_notification` line.
pub fn notification_line(task_id: &str, event: &Value) -> Value {
    let mut line = json!({"type": "process_notification"});
    let kind = event
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("completion");
    line["session_id"] = event.get("session_id").cloned().unwrap_or(Value::Null);
    line["task_id"] = json!(task_id);
    line["event"] = json!(if kind == "completion" {
        "completed"
    } else {
        kind
    });
    if let Value::Object(fields) = event {
        for (key, value) in fields {
            if key != "type" && key != "session_id" {
                line[key.as_str()] = value.clone();
            }
        }
    }
    line
}
