//! `hermes-tools serve`: tool calls as JSON lines on stdin, answers on stdout.
//!
//! A line is one call or an array of calls in the OpenAI shape
//! (`{"id", "type": "function", "function": {"name", "arguments"}}`, `arguments` a
//! JSON string), optionally with `task_id` and `session_id` (strings). Each call is
//! answered by one line `{"role": "tool", "tool_call_id": ID, "content": STRING}`; an
//! array's answers come together, in its order. Every other line (not JSON, not
//! UTF-8, empty, an empty array, a field of the wrong type, longer than
//! `serve.max_line_bytes`) gets `{"error": ..., "line": N}` and the server keeps
//! going; at end of input it finishes the calls still running, then exits.
//!
//! A call's task is its `task_id`, else its `session_id`, else `default`: the task
//! owns the shell state, the file tools' records and the background processes.
//! Calls are queued per task and served round-robin across tasks (see
//! [`scheduler`]); within a task, a call waits for the earlier ones it could touch
//! (the turn rules of an array, across lines). A call that exceeds the queue bounds
//! is answered at once with an error result.
//!
//! Calls that carry a `session_id` belong to an agent session, created on the first
//! call of that id and kept until the server exits: its todo list, memory store,
//! session database and clarify channel answer `todo`, `memory`, `session_search`,
//! `clarify` and `delegate_task`, and every call and result of the session is recorded
//! in `$HERMES_HOME/state.db`. Calls without a `session_id` get no session; those five
//! tools then answer that they must be handled by the agent loop.
//!
//! `clarify` asks the client. The server writes a request line and the call waits for
//! the answer (other lines keep running meanwhile):
//!
//! ```text
//! <- {"type": "clarify_request", "id": "clarify_1", "session_id": "s1", "question": "Which branch?", "choices": ["main", "dev"], "multi_select": false}
//! -> {"type": "clarify_response", "id": "clarify_1", "answer": "dev"}
//! ```
//!
//! `answer` is a string (a list of strings when `multi_select` is true); a response with
//! `"error": "..."` instead declines the question, and the tool reports it. With no
//! answer within `clarify.timeout_seconds` (300) the tool tells the model to use its
//! best judgement and the server writes `{"type": "clarify_timeout", "id": ...}`. A
//! response whose id is not waiting gets an error line. At end of input every waiting
//! question fails at once.
//!
//! Every line the server writes (answers, requests such as `clarify_request`,
//! notifications) goes through [`output::Output::send`]; every line that answers the
//! server rather than calling a tool is routed by its `type` in
//! `Server::route_message`.

mod lines;
mod output;
mod reading;
mod request;
mod scheduler;

use crate::serve_approvals::{notification_line, ApprovalsMode};
use hermes_agent::clarify::{ClarifyChannel, ClarifyReply, ClarifyRequest};
use hermes_agent::store::SessionStore;
use hermes_agent::{AgentConfig, AgentSession, SessionOptions};
use hermes_runtime::context::Cancellation;
use hermes_runtime::Registry;
use lines::BoundedLines;
use output::Output;
use request::{answer, read_request, run_request};
use scheduler::{Limits, Scheduler};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The agent sessions of one server, by `session_id`, and the questions they wait on.
pub struct SessionHub {
    registry: Arc<Registry>,
    config: AgentConfig,
    store: OnceLock<Option<Arc<SessionStore>>>,
    sessions: Mutex<HashMap<String, Arc<AgentSession>>>,
    clarify: Arc<ClarifyHub>,
    approvals: ApprovalsMode,
    /// The server's working directory, where every call's relative paths start (the
    /// server never changes it, so it is asked once, not per call).
    cwd: Option<std::path::PathBuf>,
    /// A context that resolves paths as the calls' do, to work out what a call touches.
    paths: hermes_runtime::ToolContext,
}

impl SessionHub {
    fn new(
        registry: Arc<Registry>,
        clarify: Arc<ClarifyHub>,
        approvals: ApprovalsMode,
    ) -> SessionHub {
        let config = AgentConfig::from_config(&registry.config());
        let cwd = std::env::current_dir().ok();
        let mut paths = hermes_runtime::ToolContext::builder();
        if let Some(cwd) = &cwd {
            paths = paths.cwd(cwd.clone());
        }
        let paths = paths.build();
        SessionHub {
            paths,
            registry,
            config,
            store: OnceLock::new(),
            sessions: Mutex::new(HashMap::new()),
            clarify,
            approvals,
            cwd,
        }
    }

    /// The session for `id`, created on first use.
    fn session(&self, id: &str) -> Arc<AgentSession> {
        let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(existing) = sessions.get(id) {
            return Arc::clone(existing);
        }
        let store = self
            .store
            .get_or_init(
                || match SessionStore::open_in(self.registry.hermes_home()) {
                    Ok(store) => Some(Arc::new(store)),
                    Err(e) => {
                        eprintln!("warning: sessions are not recorded: {e}");
                        None
                    }
                },
            )
            .clone();
        let session = AgentSession::new(
            Arc::clone(&self.registry),
            SessionOptions {
                id: Some(id.to_string()),
                source: Some("serve".into()),
                clarify: Some(Arc::new(ServeClarify {
                    hub: Arc::clone(&self.clarify),
                })),
                config: Some(self.config.clone()),
                store,
                ..Default::default()
            },
        );
        sessions.insert(id.to_string(), Arc::clone(&session));
        session
    }
}

/// Questions waiting for a `clarify_response` line, by request id.
pub struct ClarifyHub {
    output: Arc<Output>,
    pending: Mutex<HashMap<String, std::sync::mpsc::Sender<Value>>>,
    next: AtomicU64,
    closed: AtomicBool,
}

impl ClarifyHub {
    /// Hands a response line to the question waiting on its id; `Err` when none is.
    fn resolve(&self, response: &Value, kind: &str) -> Result<(), String> {
        let id = match response.get("id") {
            Some(Value::String(id)) => id.clone(),
            Some(Value::Number(n)) => n.to_string(),
            _ => {
                return Err(format!(
                    "a {kind}_response needs the `id` of its {kind}_request"
                ))
            }
        };
        if !id.starts_with(&format!("{kind}_")) {
            return Err(format!("{id:?} is not the id of a {kind}_request"));
        }
        let waiting = self
            .pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id);
        match waiting {
            Some(sender) => {
                let _ = sender.send(response.clone());
                Ok(())
            }
            None => Err(format!("no {kind} request is waiting with id {id:?} (answered already, timed out, or never asked)")),
        }
    }

    /// End of input: nobody can answer any more.
    fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }
}

/// A session's questions, asked as request lines on the server's output.
struct ServeClarify {
    hub: Arc<ClarifyHub>,
}

impl ClarifyChannel for ServeClarify {
    fn ask(
        &self,
        request: &ClarifyRequest,
        timeout: Duration,
        cancel: &Cancellation,
    ) -> Result<ClarifyReply, String> {
        let id = self.hub.next_id("clarify");
        let line = json!({
            "type": "clarify_request",
            "id": id,
            "session_id": request.session_id,
            "question": request.question,
            "choices": request.choices,
            "multi_select": request.multi_select,
        });
        match self
            .hub
            .ask(&id, line, "clarify_timeout", timeout, cancel)?
        {
            Some(response) => read_clarify_response(&response, request),
            None => Ok(ClarifyReply::TimedOut),
        }
    }
}

impl ClarifyHub {
    /// A fresh request id, `<kind>_<n>`.
    pub(crate) fn next_id(&self, kind: &str) -> String {
        format!("{kind}_{}", self.next.fetch_add(1, Ordering::SeqCst) + 1)
    }

    /// Writes `line` and waits for the response line with the same `id`: `Ok(None)` when
    /// none came within `timeout` (a `{"type": timeout_type, "id"}` line is written then).
    pub(crate) fn ask(
        &self,
        id: &str,
        line: Value,
        timeout_type: &str,
        timeout: Duration,
        cancel: &Cancellation,
    ) -> Result<Option<Value>, String> {
        if self.closed.load(Ordering::SeqCst) {
            return Err("the client has closed its input, so nobody can answer".into());
        }
        let (sender, receiver) = std::sync::mpsc::channel();
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id.to_string(), sender);
        let forget = || {
            self.pending
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(id);
        };
        self.output.send_one(line.to_string());
        let deadline = Instant::now() + timeout;
        loop {
            if cancel.is_cancelled() {
                forget();
                return Err("the question was cancelled".into());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                forget();
                self.output
                    .send_one(json!({"type": timeout_type, "id": id}).to_string());
                return Ok(None);
            }
            match receiver.recv_timeout(left.min(Duration::from_millis(100))) {
                Ok(response) => return Ok(Some(response)),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => continue,
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    return Err("the client closed its input before answering".into())
                }
            }
        }
    }
}

fn read_clarify_response(
    response: &Value,
    request: &ClarifyRequest,
) -> Result<ClarifyReply, String> {
    if let Some(error) = response.get("error").filter(|e| !e.is_null()) {
        let why = error
            .as_str()
            .map(str::to_owned)
            .unwrap_or_else(|| error.to_string());
        return Err(format!("the client did not ask the user: {why}"));
    }
    match response.get("answer") {
        Some(Value::String(text)) if request.multi_select => {
            Ok(ClarifyReply::Answer(json!([text])))
        }
        Some(Value::String(text)) => Ok(ClarifyReply::Answer(json!(text))),
        Some(Value::Array(items)) if items.iter().all(Value::is_string) => {
            if request.multi_select {
                Ok(ClarifyReply::Answer(Value::Array(items.clone())))
            } else {
                let joined: Vec<&str> = items.iter().filter_map(Value::as_str).collect();
                Ok(ClarifyReply::Answer(json!(joined.join(", "))))
            }
        }
        _ => Err("the client's clarify_response had no `answer` string".into()),
    }
}

/// Bounds of one server, from `serve.*` in config.yaml.
struct ServeLimits {
    max_line_bytes: usize,
    scheduler: Limits,
}

pub const DEFAULT_MAX_LINE_BYTES: usize = 4 * 1024 * 1024;

impl ServeLimits {
    fn from_config(config: &hermes_runtime::config::Config) -> ServeLimits {
        let key = |name: &str, default: usize| {
            config
                .positive_usize(&format!("serve.{name}"))
                .unwrap_or(default)
        };
        ServeLimits {
            max_line_bytes: key("max_line_bytes", DEFAULT_MAX_LINE_BYTES),
            scheduler: Limits {
                total: key("max_in_flight", 32),
                per_task: key("max_in_flight_per_task", 4),
                queued_per_task: key("max_queued_per_task", 1000),
                queued: key("max_queued", 10_000),
                queued_bytes: key("max_queued_bytes", 64 * 1024 * 1024),
            },
        }
    }
}

fn line_error(why: impl Into<String>, line: usize) -> String {
    json!({"error": why.into(), "line": line}).to_string()
}

/// What the server shares with its calls.
struct Server {
    registry: Arc<Registry>,
    hub: Arc<SessionHub>,
    clarify: Arc<ClarifyHub>,
    output: Arc<Output>,
    scheduler: Arc<Scheduler>,
    input: reading::Input,
}

/// A call that could start at once, to be run by the thread that read it.
struct Started<'a> {
    slot: scheduler::Slot,
    request: request::Request,
    inline: reading::InlineCall<'a>,
}

impl Server {
    /// Answers one input line: a call, an array of calls, or a message for a call
    /// that waits on the client. A call that can start at once, while no other runs
    /// that way, is handed back to be run by the reading thread; any other call is
    /// queued.
    fn take_line(self: &Arc<Self>, bytes: &[u8], number: usize) -> Option<Started<'_>> {
        let text = match std::str::from_utf8(bytes) {
            Ok(text) => text,
            Err(e) => {
                self.output.send_one(line_error(
                    format!("the line is not valid UTF-8: {e}"),
                    number,
                ));
                return None;
            }
        };
        if text.trim().is_empty() {
            self.output.send_one(line_error(
                "the line is empty; send one JSON call or an array of calls",
                number,
            ));
            return None;
        }
        let value: Value = match serde_json::from_str(text) {
            Ok(value) => value,
            Err(e) => {
                self.output.send_one(line_error(
                    format!("the line is not valid JSON: {e}"),
                    number,
                ));
                return None;
            }
        };
        if let Some(kind) = message_type(&value) {
            if let Err(why) = self.route_message(kind, &value) {
                self.output.send_one(line_error(why, number));
            }
            return None;
        }
        let request = match read_request(value, number) {
            Ok(request) => request,
            Err(why) => {
                self.output.send_one(line_error(why, number));
                return None;
            }
        };
        let access = request.access(&self.registry, &self.hub);
        if let Some(inline) = self.input.claim_inline() {
            if let Some(slot) = self.scheduler.start_now(request.task(), &access) {
                return Some(Started {
                    slot,
                    request,
                    inline,
                });
            }
        }
        let task = request.task().to_string();
        let ids = request.ids();
        let (registry, hub, output) = (
            Arc::clone(&self.registry),
            Arc::clone(&self.hub),
            Arc::clone(&self.output),
        );
        let job = Box::new(move || output.send(&run_request(&registry, &hub, request)));
        if let Err(why) = self.scheduler.submit(&task, bytes.len(), access, job) {
            let refusal = hermes_runtime::tool_error(format!("refused: {why}"));
            let answers: Vec<String> = ids.iter().map(|id| answer(id, refusal.clone())).collect();
            self.output.send(&answers);
        }
        None
    }

    /// Runs a call [`Server::take_line`] handed back, on this thread.
    fn run_started(self: &Arc<Self>, started: Started<'_>) {
        let Started {
            slot,
            request,
            inline,
        } = started;
        // A panicking call must not take its slot with it (nor this thread's reading).
        let answers = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            run_request(&self.registry, &self.hub, request)
        }));
        // The call is over before its answer leaves: a client that sends its next line
        // as soon as it has the answer finds no call running on a reading thread, and a
        // call of another task runs on the thread that reads it instead of waking (or
        // starting) a worker. One of the same task still waits for the slot below.
        drop(inline);
        if let Ok(answers) = answers {
            self.output.send(&answers);
        }
        self.scheduler.done(&slot);
    }

    /// Lines that answer the server rather than call a tool, by their `type`.
    fn route_message(&self, kind: &str, value: &Value) -> Result<(), String> {
        match kind {
            "clarify_response" => self.clarify.resolve(value, "clarify"),
            "approval_response" => self.clarify.resolve(value, "approval"),
            other => Err(format!(
                "unknown message type {other:?}; a call has \"type\": \"function\""
            )),
        }
    }
}

/// The `type` of a line that is a message to the server, not a call.
fn message_type(value: &Value) -> Option<&str> {
    value
        .get("type")
        .and_then(Value::as_str)
        .filter(|kind| *kind != "function")
}

/// Serves `input` until it ends, writing answers to `output`; returns when every
/// call has been answered. With [`ApprovalsMode::Client`] the client is asked to
/// approve commands (see [`crate::serve_approvals`]).
pub fn serve(
    registry: Arc<Registry>,
    approvals: ApprovalsMode,
    input: Box<dyn Read + Send>,
    output: Box<dyn Write + Send>,
) -> std::io::Result<()> {
    let limits = ServeLimits::from_config(&registry.config());
    let output = Arc::new(Output::new(output));
    let clarify = Arc::new(ClarifyHub {
        output: Arc::clone(&output),
        pending: Mutex::new(HashMap::new()),
        next: AtomicU64::new(0),
        closed: AtomicBool::new(false),
    });
    let hub = Arc::new(SessionHub::new(
        Arc::clone(&registry),
        Arc::clone(&clarify),
        approvals,
    ));
    let notifications = Arc::clone(&output);
    crate::tools::terminal::set_event_sink(Some(Arc::new(move |task: &str, event: &Value| {
        notifications.send_one(notification_line(task, event).to_string());
    })));
    let server = Arc::new(Server {
        registry,
        hub,
        clarify,
        output: Arc::clone(&output),
        scheduler: Scheduler::new(limits.scheduler),
        input: reading::Input::new(
            BoundedLines::new(input, limits.max_line_bytes),
            limits.max_line_bytes,
        ),
    });
    let failure = reading::read_until_end(&server);
    server.clarify.close();
    server.scheduler.finish();
    crate::tools::terminal::set_event_sink(None);
    output.flush();
    match failure {
        Some(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e),
        _ => Ok(()),
    }
}

/// The blocking entry point of the CLI: the calling thread reads stdin (and another
/// takes the reading over when a call it runs itself takes long); calls run on the
/// threads that read them or on the server's worker threads (async handlers through the
/// runtime's bridge).
pub fn serve_stdio(registry: Arc<Registry>, approvals: ApprovalsMode) -> std::io::Result<()> {
    std::thread::spawn(hermes_command_guard::warm_up);
    serve(
        registry,
        approvals,
        Box::new(std::io::stdin()),
        Box::new(std::io::stdout()),
    )
}
