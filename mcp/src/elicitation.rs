//! The MCP client's user as the human in the loop.
//!
//! When the client declared the `elicitation` capability, an approval request becomes
//! an `elicitation/create` (form mode) with one required field, `choice`, whose enum is
//! the grants offered (`once`, `session`, `always`, `deny`). `accept` with a choice is
//! that answer; `decline` and `cancel` deny; no answer within `approvals.timeout`
//! denies as a timeout. A client without elicitation reaches nobody: the unattended
//! policy applies, and the refusal says how to enable approvals.
//!
//! `clarify` questions go the same way: a form with one required string `answer` (the
//! offered choices listed in its description); decline or cancel is reported to the
//! model as no answer, silence as a timeout. Each MCP session gets an agent session for
//! this (its todo list and memory then work over MCP too).
//!
//! Background-process notifications of a session go to its client as
//! `notifications/message` (logger `hermes-tools/process`, level `info`, `data` the
//! event object, with `event` = `completed` | `watch_match` | ...).

#![allow(deprecated)] // rmcp marks MCP logging deprecated (SEP-2577); clients still handle it.

use hermes_agent::clarify::{ClarifyChannel, ClarifyReply, ClarifyRequest};
use hermes_agent::{AgentSession, SessionOptions};
use hermes_runtime::approval::{redact_secrets, ApprovalPrompter, Choice, PromptRequest};
use hermes_runtime::context::{Cancellation, ToolContextBuilder};
use hermes_runtime::Registry;
use rmcp::model::{
    ElicitRequestParams, ElicitationAction, ElicitationSchema, LoggingLevel,
    LoggingMessageNotificationParam,
};
use rmcp::service::Peer;
use rmcp::RoleServer;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// What a refusal says when the client cannot be asked.
pub const NO_ELICITATION: &str =
    "This MCP client did not declare the `elicitation` capability, so its user cannot \
be asked to approve commands; connect with a client that supports elicitation to approve them.";

/// Whether the connected client can show forms to its user.
pub fn client_elicits(peer: &Peer<RoleServer>) -> bool {
    peer.supported_elicitation_modes()
        .contains(&rmcp::service::ElicitationMode::Form)
}

/// The approver for calls of one MCP session.
pub struct ElicitingApprover {
    peer: Peer<RoleServer>,
    runtime: tokio::runtime::Handle,
    elicits: bool,
}

impl ElicitingApprover {
    /// Must be made inside the server's runtime; prompts run on blocking threads.
    pub fn new(peer: Peer<RoleServer>) -> ElicitingApprover {
        let elicits = client_elicits(&peer);
        ElicitingApprover {
            peer,
            runtime: tokio::runtime::Handle::current(),
            elicits,
        }
    }
}

fn message(request: &PromptRequest) -> String {
    let tool = request.tool.as_deref().unwrap_or("terminal");
    let mut text = format!(
        "Approve this {tool} command? It was flagged: {}.\n\n{}\n\nonce: run it this time; session: allow this kind of \
         command for the rest of the session; always: allow it from now on (saved to config.yaml); deny: do not run it.",
        request.description,
        redact_secrets(&request.command)
    );
    if request.smart_denied {
        text.push_str("\nThe smart reviewer judged it dangerous: only once or deny are offered.");
    }
    text
}

fn schema(choices: &[&str]) -> Result<ElicitationSchema, String> {
    serde_json::from_value(json!({
        "type": "object",
        "properties": {"choice": {"type": "string", "title": "Your answer", "enum": choices}},
        "required": ["choice"],
    }))
    .map_err(|e| e.to_string())
}

impl ApprovalPrompter for ElicitingApprover {
    fn prompt(&self, request: &PromptRequest) -> Choice {
        if !self.elicits {
            return Choice::Deny;
        }
        let choices = request.choices();
        let Ok(requested_schema) = schema(&choices) else {
            return Choice::Deny;
        };
        let params = ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: message(request),
            requested_schema,
        };
        let asked = self.runtime.block_on(
            self.peer
                .create_elicitation_with_timeout(params, Some(request.timeout)),
        );
        match asked {
            Ok(result) if result.action == ElicitationAction::Accept => {
                let word = result
                    .content
                    .as_ref()
                    .and_then(|c| c.get("choice"))
                    .and_then(Value::as_str)
                    .unwrap_or("");
                request.choice_from_word(word)
            }
            Ok(_) => Choice::Deny,
            Err(rmcp::ServiceError::Timeout { .. }) => Choice::Timeout,
            Err(_) => Choice::Cancelled,
        }
    }

    fn reachable(&self) -> Result<(), String> {
        if self.elicits {
            Ok(())
        } else {
            Err(NO_ELICITATION.to_string())
        }
    }
}

use crate::caller::Caller;
pub use crate::caller::SessionLevel;

/// Where the notifications of each task go: the client of the session that last ran
/// a call of it, at the level that client asked for.
fn listeners() -> &'static Mutex<HashMap<String, Caller>> {
    static LISTENERS: OnceLock<Mutex<HashMap<String, Caller>>> = OnceLock::new();
    LISTENERS.get_or_init(Default::default)
}

/// Sends one background-process event to the client of `task_id`, if it is connected
/// and its level lets an `info` message through. Returns whether a client took it.
pub fn deliver_notification(task_id: &str, event: &Value) -> bool {
    let target = listeners()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(task_id)
        .cloned();
    let Some(listener) = target else {
        return false;
    };
    if !listener.wants(LoggingLevel::Info) {
        return false;
    }
    let mut data = event.clone();
    let kind = event
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("completion");
    data["event"] = json!(if kind == "completion" {
        "completed"
    } else {
        kind
    });
    data["task_id"] = json!(task_id);
    let param = LoggingMessageNotificationParam::new(LoggingLevel::Info, data)
        .with_logger("hermes-tools/process");
    let peer = listener.peer;
    listener.runtime.spawn(async move {
        let _ = peer.notify_logging_message(param).await;
    });
    true
}

/// Forgets everything kept for `session` (its own task id) once it has ended: where
/// its tasks' notifications went and its agent session.
pub fn forget_session(session: &str) {
    Caller::forget(session);
    listeners()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .retain(|_, listener| listener.session != session);
    let agent_session = agent_sessions()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(session);
    drop(agent_session);
}

/// How many sessions have something kept here (for tests of the cleanup).
pub fn kept_sessions() -> usize {
    agent_sessions()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .len()
}

/// The user behind one session's client as its calls' contexts carry them: the
/// approver, and the session's agent session (whose questions are elicited). Made on
/// the session's first call, inside the server's runtime; the client's capabilities
/// are settled by then.
pub struct User {
    approver: Arc<ElicitingApprover>,
    session: Arc<AgentSession>,
    listener: Caller,
}

impl User {
    /// The user of session `task_id` (the session's own task id).
    pub fn new(
        registry: &Arc<Registry>,
        selection: &crate::server::Selection,
        task_id: &str,
        peer: &Peer<RoleServer>,
        level: SessionLevel,
    ) -> User {
        let listener = Caller::register(task_id, peer, level);
        let user = User {
            approver: Arc::new(ElicitingApprover::new(peer.clone())),
            session: agent_session(registry, selection, task_id, peer, &listener),
            listener,
        };
        user.listen_for(task_id);
        user
    }

    /// Notifications of `task` go to this user from now on (a call named it).
    pub fn listen_for(&self, task: &str) {
        let mut listeners = listeners().lock().unwrap_or_else(|p| p.into_inner());
        let current = listeners.get(task);
        if current.is_none_or(|l| l.session != self.listener.session) {
            listeners.insert(task.to_string(), self.listener.clone());
        }
    }

    /// Puts this user on a call's context.
    pub fn attach(&self, builder: ToolContextBuilder) -> ToolContextBuilder {
        builder
            .approver(Arc::clone(&self.approver) as Arc<dyn ApprovalPrompter>)
            .agent_session(Arc::clone(&self.session) as Arc<dyn hermes_runtime::AgentSession>)
    }
}

/// The agent session of MCP session `task_id`: its questions go to the client's user,
/// and its sub-agents run on the client's model when no model endpoint is set up. Its
/// tools are the served ones, so a sub-agent (or a job it schedules) gets no tool the
/// client could not call itself.
fn agent_session(
    registry: &Arc<Registry>,
    selection: &crate::server::Selection,
    task_id: &str,
    peer: &Peer<RoleServer>,
    client: &Caller,
) -> Arc<AgentSession> {
    let mut sessions = agent_sessions().lock().unwrap_or_else(|p| p.into_inner());
    let session = sessions.entry(task_id.to_string()).or_insert_with(|| {
        let clarify = ElicitingClarify {
            peer: peer.clone(),
            runtime: tokio::runtime::Handle::current(),
        };
        AgentSession::new(
            Arc::clone(registry),
            SessionOptions {
                id: Some(task_id.to_string()),
                source: Some("mcp".into()),
                toolsets: selection.toolsets.clone(),
                disabled_toolsets: selection.disabled.clone().unwrap_or_default(),
                clarify: Some(Arc::new(clarify)),
                borrowed_model: Some(Arc::new(client.clone())),
                ..Default::default()
            },
        )
    });
    Arc::clone(session)
}

fn agent_sessions() -> &'static Mutex<HashMap<String, Arc<AgentSession>>> {
    static AGENT_SESSIONS: OnceLock<Mutex<HashMap<String, Arc<AgentSession>>>> = OnceLock::new();
    AGENT_SESSIONS.get_or_init(Default::default)
}

/// `clarify` through elicitation.
struct ElicitingClarify {
    peer: Peer<RoleServer>,
    runtime: tokio::runtime::Handle,
}

impl ClarifyChannel for ElicitingClarify {
    fn ask(
        &self,
        request: &ClarifyRequest,
        timeout: Duration,
        cancel: &Cancellation,
    ) -> Result<ClarifyReply, String> {
        if !client_elicits(&self.peer) {
            return Err(NO_ELICITATION.replace("approve commands", "answer questions"));
        }
        let mut field = json!({"type": "string", "title": "Your answer"});
        if !request.choices.is_empty() {
            let how = if request.multi_select {
                "one or more of, comma-separated"
            } else {
                "one of"
            };
            field["description"] = json!(format!(
                "{how}: {}; or your own answer",
                request.choices.join(", ")
            ));
        }
        let requested_schema: ElicitationSchema = serde_json::from_value(json!({
            "type": "object",
            "properties": {"answer": field},
            "required": ["answer"],
        }))
        .map_err(|e| e.to_string())?;
        let params = ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: request.question.clone(),
            requested_schema,
        };
        let asked = self.runtime.block_on(async {
            tokio::select! {
                result = self.peer.create_elicitation_with_timeout(params, Some(timeout)) => Some(result),
                _ = cancel.cancelled() => None,
            }
        });
        match asked {
            None => Err("the question was cancelled".into()),
            Some(Ok(result)) if result.action == ElicitationAction::Accept => {
                let text = result
                    .content
                    .as_ref()
                    .and_then(|c| c.get("answer"))
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .trim();
                if !request.multi_select {
                    return Ok(ClarifyReply::Answer(json!(text)));
                }
                let picked: Vec<&str> = text
                    .split(',')
                    .map(str::trim)
                    .filter(|t| !t.is_empty())
                    .collect();
                Ok(ClarifyReply::Answer(json!(picked)))
            }
            Some(Ok(_)) => Err("the user declined to answer".into()),
            Some(Err(rmcp::ServiceError::Timeout { .. })) => Ok(ClarifyReply::TimedOut),
            Some(Err(e)) => Err(format!("the question could not be asked: {e}")),
        }
    }
}
