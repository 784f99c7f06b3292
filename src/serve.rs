//! `hermes-tools serve`: tool calls as JSON lines on stdin, answers on stdout.
//!
//! A line is one call or an array of calls in the OpenAI shape
//! (`{"id", "type": "function", "function": {"name", "arguments"}}`, `arguments` a
//! JSON string), optionally with `task_id` and `session_id`. Each call is answered by
//! one line `{"role": "tool", "tool_call_id": ID, "content": STRING}`; an array's
//! answers come together, in its order. Lines run concurrently. A line that cannot be
//! read gets `{"error": ..., "line": N}` and the server keeps going; at end of input
//! it finishes the calls still running, then exits.
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

use hermes_agent::clarify::{ClarifyChannel, ClarifyReply, ClarifyRequest};
use hermes_agent::store::{NewMessage, SessionStore};
use crate::serve_approvals::{notification_line, ApprovalsMode, ClientApprover};
use hermes_agent::{AgentConfig, AgentSession, SessionOptions};
use hermes_runtime::context::Cancellation;
use hermes_runtime::{Registry, ToolCall, ToolContext};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

/// One call as read from a line, with what the answer must echo.
struct IncomingCall {
    id: String,
    call: ToolCall,
    task_id: Option<String>,
    session_id: Option<String>,
}

enum Request {
    One(IncomingCall),
    Batch(Vec<IncomingCall>),
}

fn read_call(value: &Value, line: usize, position: usize, inherited: &Value) -> Result<IncomingCall, String> {
    let Value::Object(object) = value else {
        return Err("a call must be a JSON object with `function`".into());
    };
    let id = match object.get("id") {
        Some(Value::String(id)) => id.clone(),
        Some(Value::Number(n)) => n.to_string(),
        None | Some(Value::Null) => format!("call_{line}_{position}"),
        Some(_) => return Err("`id` must be a string".into()),
    };
    if let Some(kind) = object.get("type") {
        if kind != "function" {
            return Err(format!("unsupported call type {kind}; only \"function\" calls are served"));
        }
    }
    let function = object.get("function").ok_or("a call needs `function`: {\"name\", \"arguments\"}")?;
    let name = function
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or("`function.name` must be a non-empty string")?;
    let text_field = |key: &str| {
        object
            .get(key)
            .or_else(|| inherited.get(key))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    Ok(IncomingCall {
        call: ToolCall {
            name: name.to_string(),
            arguments: function.get("arguments").cloned(),
            tool_call_id: Some(id.clone()),
            ..Default::default()
        },
        id,
        task_id: text_field("task_id"),
        session_id: text_field("session_id"),
    })
}

fn read_request(value: &Value, line: usize) -> Result<Request, String> {
    match value {
        Value::Array(calls) => calls
            .iter()
            .enumerate()
            .map(|(position, call)| read_call(call, line, position, &Value::Null))
            .collect::<Result<Vec<_>, _>>()
            .map(Request::Batch),
        other => read_call(other, line, 0, &Value::Null).map(Request::One),
    }
}

fn answer(id: &str, content: String) -> String {
    json!({"role": "tool", "tool_call_id": id, "content": content}).to_string()
}

fn context_for(call: &IncomingCall, hub: &SessionHub) -> (ToolContext, Option<Arc<AgentSession>>) {
    let mut builder = ToolContext::builder();
    if let Some(task) = &call.task_id {
        builder = builder.task_id(task.clone());
    }
    if hub.approvals == ApprovalsMode::Client {
        let approver = ClientApprover::new(Arc::clone(&hub.clarify), call.session_id.clone(), call.task_id.clone());
        builder = builder.approver(Arc::new(approver));
    }
    let mut session = None;
    if let Some(id) = call.session_id.as_deref().filter(|id| !id.is_empty()) {
        builder = builder.session_id(id.to_string());
        let found = hub.session(id);
        builder = builder.agent_session(Arc::clone(&found) as Arc<dyn hermes_runtime::AgentSession>);
        session = Some(found);
    }
    (builder.build(), session)
}

/// Records one turn's calls (as the assistant's tool calls) and their results.
fn record_turn(session: Option<&AgentSession>, calls: &[&IncomingCall], results: &[String]) {
    let Some(session) = session else { return };
    let tool_calls: Vec<Value> = calls
        .iter()
        .map(|c| {
            let arguments = match &c.call.arguments {
                Some(Value::String(text)) => text.clone(),
                Some(other) => other.to_string(),
                None => "{}".into(),
            };
            json!({"id": c.id, "type": "function", "function": {"name": c.call.name, "arguments": arguments}})
        })
        .collect();
    session.record(&NewMessage { role: "assistant".into(), tool_calls: Some(Value::Array(tool_calls)), ..Default::default() });
    for (call, result) in calls.iter().zip(results) {
        session.record(&NewMessage {
            role: "tool".into(),
            content: result.clone(),
            tool_call_id: Some(call.id.clone()),
            tool_name: Some(call.call.name.clone()),
            ..Default::default()
        });
    }
}

/// Runs a request on the blocking pool: handlers may block (files, processes, a
/// question to the client), and async handlers are bridged from there without tying
/// up the reader.
async fn run_request(registry: Arc<Registry>, hub: Arc<SessionHub>, request: Request) -> Vec<String> {
    let work = tokio::task::spawn_blocking(move || match request {
        Request::One(incoming) => {
            let (ctx, session) = context_for(&incoming, &hub);
            let result = registry.handle_function_call(&incoming.call, &ctx);
            record_turn(session.as_deref(), &[&incoming], std::slice::from_ref(&result));
            vec![answer(&incoming.id, result)]
        }
        Request::Batch(calls) => {
            // One context per task in the batch; calls of one task share its state.
            let mut answers = Vec::with_capacity(calls.len());
            let mut start = 0;
            while start < calls.len() {
                let task = (&calls[start].task_id, &calls[start].session_id);
                let end = calls[start..].iter().position(|c| (&c.task_id, &c.session_id) != task).map_or(calls.len(), |n| start + n);
                let (ctx, session) = context_for(&calls[start], &hub);
                let batch: Vec<ToolCall> = calls[start..end].iter().map(|c| c.call.clone()).collect();
                let results = registry.handle_batch(&batch, &ctx);
                let group: Vec<&IncomingCall> = calls[start..end].iter().collect();
                record_turn(session.as_deref(), &group, &results);
                answers.extend(calls[start..end].iter().zip(results).map(|(c, r)| answer(&c.id, r)));
                start = end;
            }
            answers
        }
    });
    work.await.unwrap_or_else(|e| vec![json!({"error": format!("the call could not finish: {e}")}).to_string()])
}

/// The agent sessions of one server, by `session_id`, and the questions they wait on.
pub struct SessionHub {
    registry: Arc<Registry>,
    config: AgentConfig,
    store: OnceLock<Option<Arc<SessionStore>>>,
    sessions: Mutex<HashMap<String, Arc<AgentSession>>>,
    clarify: Arc<ClarifyHub>,
    approvals: ApprovalsMode,
}

impl SessionHub {
    fn new(registry: Arc<Registry>, clarify: Arc<ClarifyHub>, approvals: ApprovalsMode) -> SessionHub {
        let config = AgentConfig::from_config(&registry.config());
        SessionHub { registry, config, store: OnceLock::new(), sessions: Mutex::new(HashMap::new()), clarify, approvals }
    }

    /// The session for `id`, created on first use.
    fn session(&self, id: &str) -> Arc<AgentSession> {
        let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(existing) = sessions.get(id) {
            return Arc::clone(existing);
        }
        let store = self
            .store
            .get_or_init(|| match SessionStore::open_in(self.registry.hermes_home()) {
                Ok(store) => Some(Arc::new(store)),
                Err(e) => {
                    eprintln!("warning: sessions are not recorded: {e}");
                    None
                }
            })
            .clone();
        let session = AgentSession::new(
            Arc::clone(&self.registry),
            SessionOptions {
                id: Some(id.to_string()),
                source: Some("serve".into()),
                clarify: Some(Arc::new(ServeClarify { hub: Arc::clone(&self.clarify) })),
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
    lines: tokio::sync::mpsc::UnboundedSender<Vec<String>>,
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
            _ => return Err(format!("a {kind}_response needs the `id` of its {kind}_request")),
        };
        if !id.starts_with(&format!("{kind}_")) {
            return Err(format!("{id:?} is not the id of a {kind}_request"));
        }
        let waiting = self.pending.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
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
        self.pending.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }
}

/// A session's questions, asked as request lines on the server's output.
struct ServeClarify {
    hub: Arc<ClarifyHub>,
}

impl ClarifyChannel for ServeClarify {
    fn ask(&self, request: &ClarifyRequest, timeout: Duration, cancel: &Cancellation) -> Result<ClarifyReply, String> {
        let id = self.hub.next_id("clarify");
        let line = json!({
            "type": "clarify_request",
            "id": id,
            "session_id": request.session_id,
            "question": request.question,
            "choices": request.choices,
            "multi_select": request.multi_select,
        });
        match self.hub.ask(&id, line, "clarify_timeout", timeout, cancel)? {
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
        self.pending.lock().unwrap_or_else(|p| p.into_inner()).insert(id.to_string(), sender);
        let forget = || {
            self.pending.lock().unwrap_or_else(|p| p.into_inner()).remove(id);
        };
        if self.lines.send(vec![line.to_string()]).is_err() {
            forget();
            return Err("the server's output is closed".into());
        }
        let deadline = Instant::now() + timeout;
        loop {
            if cancel.is_cancelled() {
                forget();
                return Err("the question was cancelled".into());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                forget();
                let _ = self.lines.send(vec![json!({"type": timeout_type, "id": id}).to_string()]);
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

fn read_clarify_response(response: &Value, request: &ClarifyRequest) -> Result<ClarifyReply, String> {
    if let Some(error) = response.get("error").filter(|e| !e.is_null()) {
        let why = error.as_str().map(str::to_owned).unwrap_or_else(|| error.to_string());
        return Err(format!("the client did not ask the user: {why}"));
    }
    match response.get("answer") {
        Some(Value::String(text)) if request.multi_select => Ok(ClarifyReply::Answer(json!([text]))),
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

/// Serves `input` until it ends, writing answers to `output`; nobody is asked to approve.
pub async fn serve<R, W>(registry: Arc<Registry>, input: R, output: W) -> std::io::Result<()>
where
    R: tokio::io::AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    serve_with(registry, ApprovalsMode::default(), input, output).await
}

/// [`serve`] with the client as the approver when `approvals` says so.
pub async fn serve_with<R, W>(registry: Arc<Registry>, approvals: ApprovalsMode, input: R, mut output: W) -> std::io::Result<()>
where
    R: tokio::io::AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (sender, mut receiver) = mpsc::unbounded_channel::<Vec<String>>();
    let clarify = Arc::new(ClarifyHub {
        lines: sender.clone(),
        pending: Mutex::new(HashMap::new()),
        next: AtomicU64::new(0),
        closed: AtomicBool::new(false),
    });
    let hub = Arc::new(SessionHub::new(Arc::clone(&registry), Arc::clone(&clarify), approvals));
    let notifications = sender.clone();
    crate::tools::terminal::set_event_sink(Some(Arc::new(move |task: &str, event: &Value| {
        let _ = notifications.send(vec![notification_line(task, event).to_string()]);
    })));
    // One writer, so answers never interleave within a line.
    let writer = tokio::spawn(async move {
        while let Some(lines) = receiver.recv().await {
            let mut block = String::new();
            for line in lines {
                block.push_str(&line);
                block.push('\n');
            }
            output.write_all(block.as_bytes()).await?;
            output.flush().await?;
        }
        Ok::<_, std::io::Error>(())
    });
    let mut running = JoinSet::new();
    let mut reader = BufReader::new(input);
    let mut raw = Vec::new();
    let mut number = 0usize;
    loop {
        raw.clear();
        // Read bytes, not text: a line that is not UTF-8 is reported and skipped
        // without losing the lines after it.
        match reader.read_until(b'\n', &mut raw).await {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                let _ = sender.send(vec![json!({"error": format!("cannot read input: {e}"), "line": number + 1}).to_string()]);
                break;
            }
        }
        number += 1;
        let text = match std::str::from_utf8(&raw) {
            Ok(text) => text.trim_end_matches(['\n', '\r']).to_string(),
            Err(e) => {
                let _ = sender.send(vec![json!({"error": format!("the line is not valid UTF-8: {e}"), "line": number}).to_string()]);
                continue;
            }
        };
        if text.trim().is_empty() {
            continue;
        }
        let value: Value = match serde_json::from_str(&text) {
            Ok(value) => value,
            Err(e) => {
                let _ = sender.send(vec![json!({"error": format!("the line is not valid JSON: {e}"), "line": number}).to_string()]);
                continue;
            }
        };
        let response_kind = match value.get("type").and_then(Value::as_str) {
            Some("clarify_response") => Some("clarify"),
            Some("approval_response") => Some("approval"),
            _ => None,
        };
        if let Some(kind) = response_kind {
            if let Err(why) = clarify.resolve(&value, kind) {
                let _ = sender.send(vec![json!({"error": why, "line": number}).to_string()]);
            }
            continue;
        }
        match read_request(&value, number) {
            Ok(request) => {
                let registry = Arc::clone(&registry);
                let hub = Arc::clone(&hub);
                let sender = sender.clone();
                running.spawn(async move {
                    let answers = run_request(registry, hub, request).await;
                    let _ = sender.send(answers);
                });
            }
            Err(why) => {
                let _ = sender.send(vec![json!({"error": why, "line": number}).to_string()]);
            }
        }
    }
    clarify.close();
    while running.join_next().await.is_some() {}
    crate::tools::terminal::set_event_sink(None);
    drop(sender);
    // The sessions (and through them the hub) hold senders of the output channel.
    drop(hub);
    drop(clarify);
    writer.await.map_err(std::io::Error::other)?
}

/// The blocking entry point of the CLI: a multi-thread runtime for the server's own
/// I/O; tool handlers run on the blocking pool and the async bridge.
pub fn serve_stdio(registry: Arc<Registry>, approvals: ApprovalsMode) -> std::io::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("hermes-serve")
        .build()?;
    runtime.block_on(serve_with(registry, approvals, tokio::io::stdin(), tokio::io::stdout()))
}
