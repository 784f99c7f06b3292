//! The MCP client behind a running call, for code that serves the call: log messages
//! to it (at the level it asked for with `logging/setLevel`), ask its model
//! (`sampling/createMessage`) or its user (`elicitation/create`).
//!
//! A call's [`ToolContext`] names its MCP session (`session_id`); [`Caller::of`] finds
//! the client of that session while the session lives. Outside an MCP session there
//! is no caller, and code that wanted one answers as it would without a client.
//!
//! The methods wait for the client: call them from the thread the call runs on (a
//! handler), never from async code on the server's runtime.

#![allow(deprecated)] // rmcp marks logging and sampling deprecated (SEP-2577); clients still offer both.

use hermes_runtime::context::Cancellation;
use hermes_runtime::ToolContext;
use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
use rmcp::service::Peer;
use rmcp::RoleServer;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// A session's `logging/setLevel`: messages below it are not sent (none set: all are).
pub type SessionLevel = Arc<Mutex<Option<LoggingLevel>>>;

/// The client of one MCP session.
#[derive(Clone)]
pub struct Caller {
    pub(crate) session: String,
    pub(crate) peer: Peer<RoleServer>,
    pub(crate) runtime: tokio::runtime::Handle,
    pub(crate) level: SessionLevel,
}

thread_local! {
    /// The client of the call this thread runs, for code that is not handed the
    /// call's context (the smart approval reviewer).
    static SERVING: std::cell::RefCell<Option<Caller>> = const { std::cell::RefCell::new(None) };
}

/// While alive, [`Caller::serving`] on this thread is the caller it was made with.
pub(crate) struct CallScope(Option<Caller>);

impl CallScope {
    pub(crate) fn enter(caller: Option<Caller>) -> CallScope {
        CallScope(SERVING.with(|serving| serving.replace(caller)))
    }
}

impl Drop for CallScope {
    fn drop(&mut self) {
        let previous = self.0.take();
        SERVING.with(|serving| *serving.borrow_mut() = previous);
    }
}

fn callers() -> &'static Mutex<HashMap<String, Caller>> {
    static CALLERS: OnceLock<Mutex<HashMap<String, Caller>>> = OnceLock::new();
    CALLERS.get_or_init(Default::default)
}

/// Why `sampling/createMessage` brought no answer.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum SampleError {
    /// The request could not be made, or the client refused it (its reason).
    NotAsked(String),
    TimedOut(Duration),
    /// The call that asked was cancelled first.
    Interrupted,
    SessionEnded,
}

impl std::fmt::Display for SampleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SampleError::NotAsked(why) => {
                write!(f, "the MCP client's model was not reached: {why}")
            }
            SampleError::TimedOut(timeout) => write!(
                f,
                "the MCP client's model did not answer within {} s",
                timeout.as_secs()
            ),
            SampleError::Interrupted => {
                write!(f, "interrupted while the MCP client's model was asked")
            }
            SampleError::SessionEnded => {
                write!(f, "the MCP session ended while its model was asked")
            }
        }
    }
}

/// What a client answered to `elicitation/create`.
#[derive(Debug, Clone, PartialEq)]
pub struct Elicited {
    /// `accept`, `decline` or `cancel`.
    pub action: String,
    /// The form's values when accepted.
    pub content: Option<Value>,
}

impl Caller {
    /// Made inside the server's runtime, on a session's first call; kept until
    /// [`Caller::forget`] when the session ends.
    pub(crate) fn register(session: &str, peer: &Peer<RoleServer>, level: SessionLevel) -> Caller {
        let caller = Caller {
            session: session.to_string(),
            peer: peer.clone(),
            runtime: tokio::runtime::Handle::current(),
            level,
        };
        callers()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(session.to_string(), caller.clone());
        caller
    }

    pub(crate) fn forget(session: &str) {
        let gone = callers()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(session);
        drop(gone);
    }

    /// The client of the MCP session `ctx`'s call belongs to, while it is connected.
    pub fn of(ctx: &ToolContext) -> Option<Caller> {
        callers()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(ctx.session_id())
            .cloned()
    }

    /// The client of the call running on this thread, if an MCP call runs here.
    pub fn serving() -> Option<Caller> {
        SERVING.with(|serving| serving.borrow().clone())
    }

    /// Whether a message of `level` passes the level the client set.
    pub fn wants(&self, level: LoggingLevel) -> bool {
        let wanted = *self.level.lock().unwrap_or_else(|p| p.into_inner());
        wanted.is_none_or(|wanted| (level as u8) >= (wanted as u8))
    }

    /// Sends `notifications/message` unless the client's level is above `level`.
    /// Returns whether it was sent. Sent in order: a message is on its way when this
    /// returns.
    pub fn log(&self, level: LoggingLevel, logger: &str, data: Value) -> bool {
        if !self.wants(level) {
            return false;
        }
        let param = LoggingMessageNotificationParam::new(level, data).with_logger(logger);
        let peer = self.peer.clone();
        let sent = self
            .runtime
            .spawn(async move { peer.notify_logging_message(param).await.is_ok() });
        futures_block_on(&self.runtime, sent).unwrap_or(false)
    }

    /// Whether the client declared the `sampling` capability.
    pub fn samples(&self) -> bool {
        self.peer
            .peer_info()
            .is_some_and(|info| info.capabilities.sampling.is_some())
    }

    /// Asks the client's model (`sampling/createMessage`): one user message `prompt`,
    /// with `system` as the system prompt. Returns the text of its answer. `Err` is a
    /// sentence: the client cannot sample, refused, gave no text, or `cancel` was
    /// cancelled first (the call that asked is over).
    pub fn sample(
        &self,
        system: Option<&str>,
        prompt: &str,
        max_tokens: u32,
        timeout: Duration,
        cancel: Option<&Cancellation>,
    ) -> Result<String, String> {
        if !self.samples() {
            return Err("the MCP client did not declare the `sampling` capability, so its model cannot be asked".into());
        }
        let mut params = json!({
            "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
            "maxTokens": max_tokens,
        });
        if let Some(system) = system {
            params["systemPrompt"] = json!(system);
        }
        let answer = self
            .create_message(params, timeout, cancel)
            .map_err(|e| e.to_string())?;
        let answer = serde_json::to_value(&answer).unwrap_or_default();
        let texts: Vec<&str> = match &answer["content"] {
            Value::Array(blocks) => blocks.iter().filter_map(|b| b["text"].as_str()).collect(),
            block => block["text"].as_str().into_iter().collect(),
        };
        if texts.is_empty() {
            return Err("the MCP client's model answered without text".into());
        }
        Ok(texts.join("\n"))
    }

    /// Sends `sampling/createMessage` with `params` (its JSON) and waits for the answer
    /// (as JSON), at most `timeout`, giving up when `cancel` is cancelled.
    pub(crate) fn create_message(
        &self,
        params: Value,
        timeout: Duration,
        cancel: Option<&Cancellation>,
    ) -> Result<Value, SampleError> {
        let params: rmcp::model::CreateMessageRequestParams =
            serde_json::from_value(params).map_err(|e| SampleError::NotAsked(e.to_string()))?;
        let peer = self.peer.clone();
        let cancel = cancel.cloned().unwrap_or_default();
        let asked = self.runtime.spawn(async move {
            tokio::select! {
                answer = tokio::time::timeout(timeout, peer.create_message(params)) => Some(answer),
                _ = cancel.cancelled() => None,
            }
        });
        match futures_block_on(&self.runtime, asked) {
            Some(Some(Ok(Ok(answer)))) => Ok(serde_json::to_value(&answer).unwrap_or_default()),
            Some(Some(Ok(Err(e)))) => Err(SampleError::NotAsked(e.to_string())),
            Some(Some(Err(_))) => Err(SampleError::TimedOut(timeout)),
            Some(None) => Err(SampleError::Interrupted),
            None => Err(SampleError::SessionEnded),
        }
    }

    /// Whether the client can show forms to its user.
    pub fn elicits(&self) -> bool {
        crate::elicitation::client_elicits(&self.peer)
    }

    /// Asks the client's user to fill a form (`elicitation/create`, form mode) whose
    /// fields `schema` describes (a JSON Schema object of primitive, enum and
    /// multi-select fields).
    pub fn elicit(
        &self,
        message: &str,
        schema: Value,
        timeout: Duration,
    ) -> Result<Elicited, String> {
        if !self.elicits() {
            return Err("the MCP client did not declare the `elicitation` capability, so its user cannot be asked".into());
        }
        let requested_schema = serde_json::from_value(schema)
            .map_err(|e| format!("the form cannot be asked for: {e}"))?;
        let params = rmcp::model::ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: message.to_string(),
            requested_schema,
        };
        let peer = self.peer.clone();
        let asked = self.runtime.spawn(async move {
            peer.create_elicitation_with_timeout(params, Some(timeout))
                .await
        });
        match futures_block_on(&self.runtime, asked) {
            Some(Ok(result)) => {
                let result = serde_json::to_value(&result).unwrap_or_default();
                Ok(Elicited {
                    action: result["action"].as_str().unwrap_or("cancel").to_string(),
                    content: result.get("content").filter(|c| !c.is_null()).cloned(),
                })
            }
            Some(Err(e)) => Err(format!("the MCP client's user was not reached: {e}")),
            None => Err("the MCP session ended while its user was asked".into()),
        }
    }
}

/// The client's model as the model of `delegate_task`'s sub-agents when no model
/// endpoint is set up: with `sampling.tools` each sub-agent runs the agent loop on it
/// (see [`crate::sampling`]); without, each is one `sampling/createMessage`, without
/// tools.
impl hermes_agent::BorrowedModel for Caller {
    fn name(&self) -> String {
        "the MCP client's model (sampling)".into()
    }

    fn answer(&self, system: &str, prompt: &str, cancel: &Cancellation) -> Result<String, String> {
        if !self.samples() {
            return Err("no model endpoint is set up (model.* in config.yaml, and its key) and the MCP client did not declare the `sampling` capability, so no model can run the sub-agent".into());
        }
        self.sample(
            Some(system),
            prompt,
            crate::sampling::TURN_MAX_TOKENS,
            crate::sampling::TURN_TIMEOUT,
            Some(cancel),
        )
    }

    fn with_tools(&self) -> Option<Arc<dyn hermes_agent::ChatModel>> {
        self.samples_with_tools()
            .then(|| Arc::new(self.clone()) as Arc<dyn hermes_agent::ChatModel>)
    }
}

/// Waits for a task of the server's runtime from the blocking thread a call runs on
/// (as approvals do); `None` when the task was dropped (the runtime is stopping).
fn futures_block_on<T: Send + 'static>(
    runtime: &tokio::runtime::Handle,
    task: tokio::task::JoinHandle<T>,
) -> Option<T> {
    runtime.block_on(task).ok()
}
