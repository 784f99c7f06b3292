//! `hermes-tools mcp` on stdio: `tools/call` answered on the thread that read it,
//! everything else through rmcp.
//!
//! rmcp runs every request as a task of its own and answers through its writer task,
//! a handful of thread wake-ups per request. For `tools/call`, the request a client
//! sends over and over, that was most of the cost of a call. So the line is read here
//! (blocking, on a plain thread), a call is parsed and run on that thread, and its
//! answer is written under the same lock as every other message going out. Every
//! other line (`initialize`, `tools/list`, `ping`, `logging/setLevel`, notifications,
//! the client's answers to elicitation requests, anything malformed) goes as it came
//! through a pipe to rmcp's service, which keeps the rest of the protocol: the
//! handshake and its state rules, errors, server-to-client requests.
//!
//! A call is taken here only in a session opened with `initialize` (the peer is then
//! known, for approvals and `clarify` over elicitation) and only when it carries
//! nothing rmcp treats specially (protocol metadata in `_meta`, input responses,
//! request state); otherwise rmcp answers it as before. `notifications/cancelled` for
//! a call running here cancels it and its answer is dropped, as rmcp does.
//!
//! While a call runs, its thread does not read. A watchdog ticks while calls are in
//! flight (and for a moment after): when the same call has been running for a whole
//! tick and nobody reads, it starts another reader, so pings, cancellations and
//! elicitation answers are read within a few milliseconds whatever a call does, and
//! calls still run concurrently. A reader that finishes its call while another one
//! reads ends, so one thread reads at a time and nothing wakes per call.

use crate::server::{CallRequest, HermesServer};
use hermes_runtime::context::Cancellation;
use rmcp::model::{
    CallToolRequestParams, CancelledNotificationParam, ErrorData, RequestId, ServerJsonRpcMessage,
};
use rmcp::service::Peer;
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::{RoleServer, ServiceExt};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::io::{self, BufRead, BufReader, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// How long a call may keep the only reader busy before another one starts.
const TICK: Duration = Duration::from_millis(2);
/// Ticks without any call before the watchdog sleeps until the next call.
const IDLE_TICKS: u32 = 50;
/// Longest line accepted, as rmcp's stdio transport: a longer one is dropped.
const MAX_LINE: usize = rmcp::transport::async_rw::DEFAULT_MAX_LINE_LENGTH;
/// How long calls in flight at end of input may take to answer, as rmcp waits for its own.
const DRAIN: Duration = Duration::from_secs(5);

/// Serves one session on stdin/stdout until the client closes its end.
pub async fn serve(server: HermesServer) -> io::Result<()> {
    let output = Arc::new(Output::stdout()?);
    let listens = Arc::new(OpenListens::default());
    let (from_front, to_rmcp) = io::pipe()?;
    let rmcp_input = tokio::net::unix::pipe::Receiver::from_owned_fd(OwnedFd::from(from_front))?;
    let transport = AsyncRwTransport::new_server(
        rmcp_input,
        LinesOut {
            output: Arc::clone(&output),
            pending: Vec::new(),
            listens: Arc::clone(&listens),
        },
    );
    let front = Front::start(server.clone(), output, to_rmcp, listens)?;
    let running = server.serve(transport).await.map_err(io::Error::other)?;
    if running.peer().peer_info().is_some() {
        let _ = front.peer.set(running.peer().clone());
    }
    let quit = running.waiting().await;
    let front_done = Arc::clone(&front);
    tokio::task::spawn_blocking(move || front_done.drain())
        .await
        .map_err(io::Error::other)?;
    quit.map_err(io::Error::other)?;
    Ok(())
}

/// Standard output, one whole line per write, shared by this front and rmcp.
struct Output {
    out: Mutex<std::fs::File>,
}

impl Output {
    fn stdout() -> io::Result<Output> {
        let fd = io::stdout().as_fd().try_clone_to_owned()?;
        Ok(Output {
            out: Mutex::new(std::fs::File::from(fd)),
        })
    }

    fn write_lines(&self, lines: &[u8]) -> io::Result<()> {
        self.out
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .write_all(lines)
    }
}

/// rmcp's side of [`Output`]: bytes are held until a line is whole, so its messages
/// never interleave with answers written by a reader.
struct LinesOut {
    output: Arc<Output>,
    pending: Vec<u8>,
    listens: Arc<OpenListens>,
}

/// The `subscriptions/listen` requests handed to rmcp and not yet answered. At the end
/// of input their streams are ended, and rmcp's input is closed only once their final
/// answers are written: closed earlier, rmcp's teardown cancels a stream that has not
/// answered yet, and a cancelled request gets no answer.
#[derive(Default)]
struct OpenListens {
    ids: Mutex<std::collections::HashSet<String>>,
    answered: Condvar,
}

/// Just the parts of a message that say what it is.
#[derive(Deserialize)]
struct MessageHead {
    method: Option<String>,
    id: Option<serde_json::Value>,
    params: Option<serde_json::Value>,
}

impl OpenListens {
    /// Notes a line going to rmcp: a listen request opens, a cancellation closes one.
    fn forwarded(&self, line: &[u8]) {
        let mentions = |what: &[u8]| line.windows(what.len()).any(|w| w == what);
        if !mentions(b"subscriptions/listen") && !mentions(b"notifications/cancelled") {
            return;
        }
        let Ok(head) = serde_json::from_slice::<MessageHead>(line) else {
            return;
        };
        match (head.method.as_deref(), head.id) {
            (Some("subscriptions/listen"), Some(id)) => {
                self.ids
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(id.to_string());
            }
            (Some("notifications/cancelled"), None) => {
                if let Some(id) = head.params.as_ref().and_then(|p| p.get("requestId")) {
                    self.close(&id.to_string());
                }
            }
            _ => {}
        }
    }

    /// Notes lines rmcp wrote: an answer to an open listen closes it.
    fn written(&self, lines: &[u8]) {
        // rmcp writes few messages (call results go out elsewhere): a look is cheap.
        if self
            .ids
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_empty()
        {
            return;
        }
        for line in lines.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            if let Ok(MessageHead {
                method: None,
                id: Some(id),
                ..
            }) = serde_json::from_slice::<MessageHead>(line)
            {
                self.close(&id.to_string());
            }
        }
    }

    fn close(&self, id: &str) {
        let mut ids = self.ids.lock().unwrap_or_else(|p| p.into_inner());
        if ids.remove(id) {
            self.answered.notify_all();
        }
    }

    /// Waits until every open listen has its answer written, or `deadline`.
    fn wait_answered(&self, deadline: Instant) {
        let mut ids = self.ids.lock().unwrap_or_else(|p| p.into_inner());
        while !ids.is_empty() {
            let now = Instant::now();
            if now >= deadline {
                return;
            }
            ids = self
                .answered
                .wait_timeout(ids, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

impl tokio::io::AsyncWrite for LinesOut {
    // A write to the client's pipe blocks only while the client does not read; rmcp
    // writes few messages (everything but call results), so they are written in place.
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.pending.extend_from_slice(buf);
        if let Some(end) = this.pending.iter().rposition(|b| *b == b'\n') {
            let written = this.output.write_lines(&this.pending[..=end]);
            this.listens.written(&this.pending[..=end]);
            this.pending.drain(..=end);
            written?;
        }
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// Standard input, a line at a time, with rmcp's bound on a line's length.
struct Lines {
    input: BufReader<std::fs::File>,
    /// Inside a line too long to keep, until its end.
    discarding: bool,
}

impl Lines {
    /// The next non-empty line without its end, or `None` at end of input (an
    /// unterminated last line is dropped, as rmcp drops it).
    fn next(&mut self) -> io::Result<Option<Vec<u8>>> {
        let mut line = Vec::new();
        loop {
            let available = match self.input.fill_buf() {
                Ok(available) => available,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // A client may hand over a non-blocking pipe: wait until it has data.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    use std::os::fd::AsRawFd;
                    let mut ready = libc::pollfd {
                        fd: self.input.get_ref().as_raw_fd(),
                        events: libc::POLLIN,
                        revents: 0,
                    };
                    // SAFETY: one valid pollfd, for the duration of the call.
                    unsafe { libc::poll(&mut ready, 1, -1) };
                    continue;
                }
                Err(e) => return Err(e),
            };
            if available.is_empty() {
                return Ok(None);
            }
            let newline = memchr::memchr(b'\n', available);
            let take = newline.map_or(available.len(), |at| at + 1);
            if !self.discarding && line.len() + take > MAX_LINE {
                eprintln!("warning: an incoming MCP message is longer than {MAX_LINE} bytes; it is dropped");
                line = Vec::new();
                self.discarding = true;
            }
            if !self.discarding {
                line.extend_from_slice(&available[..newline.unwrap_or(available.len())]);
            }
            self.input.consume(take);
            if newline.is_some() {
                if std::mem::take(&mut self.discarding) {
                    continue;
                }
                while line.last() == Some(&b'\r') {
                    line.pop();
                }
                if line.iter().all(u8::is_ascii_whitespace) {
                    line.clear();
                    continue;
                }
                return Ok(Some(line));
            }
        }
    }
}

/// A `tools/call` request as this front takes it; anything else goes to rmcp.
#[derive(Deserialize)]
struct CallLine {
    jsonrpc: String,
    id: RequestId,
    method: String,
    params: CallToolRequestParams,
}

#[derive(Deserialize)]
struct CancelLine {
    method: String,
    params: CancelledNotificationParam,
}

/// A call's answer, as rmcp writes a response.
#[derive(Serialize)]
struct Answer<'a> {
    jsonrpc: &'static str,
    id: &'a RequestId,
    result: &'a serde_json::Value,
}

/// Keys of `_meta` that change nothing in how rmcp would answer a call.
const PLAIN_META: &[&str] = &["task_id", "progressToken"];

struct Front {
    server: HermesServer,
    runtime: tokio::runtime::Handle,
    input: Mutex<Lines>,
    /// A reader holds the input (or is about to).
    reading: AtomicBool,
    output: Arc<Output>,
    /// The pipe rmcp reads; closed at end of input.
    to_rmcp: Mutex<Option<io::PipeWriter>>,
    /// The client, once it opened the session with `initialize`.
    peer: OnceLock<Peer<RoleServer>>,
    /// Calls running here, and how to cancel each; a call no longer listed was cancelled.
    calls: Mutex<HashMap<RequestId, Cancellation>>,
    running: AtomicUsize,
    started: AtomicU64,
    /// When the input ended.
    ended: OnceLock<Instant>,
    idle: (Mutex<()>, Condvar),
    watchdog: OnceLock<std::thread::Thread>,
    watchdog_asleep: AtomicBool,
    listens: Arc<OpenListens>,
}

impl Front {
    fn start(
        server: HermesServer,
        output: Arc<Output>,
        to_rmcp: io::PipeWriter,
        listens: Arc<OpenListens>,
    ) -> io::Result<Arc<Front>> {
        let input = std::fs::File::from(io::stdin().as_fd().try_clone_to_owned()?);
        let front = Arc::new(Front {
            server,
            runtime: tokio::runtime::Handle::current(),
            input: Mutex::new(Lines {
                input: BufReader::with_capacity(64 * 1024, input),
                discarding: false,
            }),
            reading: AtomicBool::new(false),
            output,
            to_rmcp: Mutex::new(Some(to_rmcp)),
            peer: OnceLock::new(),
            calls: Mutex::default(),
            running: AtomicUsize::new(0),
            started: AtomicU64::new(0),
            ended: OnceLock::new(),
            idle: Default::default(),
            watchdog: OnceLock::new(),
            watchdog_asleep: AtomicBool::new(false),
            listens,
        });
        let watched = Arc::clone(&front);
        let watchdog = std::thread::Builder::new()
            .name("hermes-mcp-watch".into())
            .spawn(move || watched.watch())?;
        let _ = front.watchdog.set(watchdog.thread().clone());
        front.add_reader()?;
        Ok(front)
    }

    fn add_reader(self: &Arc<Self>) -> io::Result<()> {
        let front = Arc::clone(self);
        std::thread::Builder::new()
            .name("hermes-mcp-stdio".into())
            .spawn(move || front.read_and_answer())
            .map(drop)
    }

    /// Reads lines and handles each, until the input ends or another reader holds it.
    fn read_and_answer(self: Arc<Self>) {
        let _runtime = self.runtime.enter();
        while self.ended.get().is_none() {
            if self
                .reading
                .compare_exchange(false, true, SeqCst, SeqCst)
                .is_err()
            {
                return;
            }
            let line = self.input.lock().unwrap_or_else(|p| p.into_inner()).next();
            self.reading.store(false, SeqCst);
            match line {
                Ok(Some(line)) => self.handle(line),
                Ok(None) => self.close_input(),
                Err(e) => {
                    eprintln!("warning: reading MCP input failed: {e}");
                    self.close_input();
                }
            }
        }
    }

    fn handle(self: &Arc<Self>, line: Vec<u8>) {
        let peer = self.peer.get();
        match serde_json::from_slice::<CallLine>(&line) {
            Ok(call) => {
                if let Some(peer) = peer.filter(|_| plain_call(&call)) {
                    return self.call(call, peer);
                }
            }
            // Only a line that is not a whole call is looked at again.
            Err(_) => {
                if let Some(malformed) = malformed_call(&line) {
                    return self.write_answer(malformed);
                }
                if peer.is_some() {
                    if let Ok(cancel) = serde_json::from_slice::<CancelLine>(&line) {
                        if cancel.method == "notifications/cancelled"
                            && self.cancel(cancel.params.request_id.as_ref())
                        {
                            return;
                        }
                    }
                }
            }
        }
        self.forward(line);
    }

    fn forward(&self, mut line: Vec<u8>) {
        self.listens.forwarded(&line);
        line.push(b'\n');
        if let Some(pipe) = self
            .to_rmcp
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_mut()
        {
            // rmcp stops reading only when it stops serving, which ends the process.
            let _ = pipe.write_all(&line);
        }
    }

    /// Cancels the call `id` if it runs here.
    fn cancel(&self, id: Option<&RequestId>) -> bool {
        let Some(id) = id else { return false };
        let Some(cancel) = self
            .calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id)
        else {
            return false;
        };
        cancel.cancel();
        true
    }

    fn call(&self, call: CallLine, peer: &Peer<RoleServer>) {
        let CallLine { id, params, .. } = call;
        let cancel = Cancellation::default();
        self.calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id.clone(), cancel.clone());
        self.running.fetch_add(1, SeqCst);
        self.started.fetch_add(1, SeqCst);
        if self.watchdog_asleep.load(SeqCst) && self.watchdog_asleep.swap(false, SeqCst) {
            if let Some(watchdog) = self.watchdog.get() {
                watchdog.unpark();
            }
        }
        let request = CallRequest::new(&id, params, None);
        let answered = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.server.call_blocking(request, cancel, Some(peer))
        }));
        let wanted = self
            .calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id)
            .is_some();
        if wanted {
            let line = match answered {
                // The result is the `CallToolResult` rmcp would have sent, already as JSON.
                Ok(result) => serde_json::to_vec(&Answer {
                    jsonrpc: "2.0",
                    id: &id,
                    result: &result,
                }),
                Err(_) => serde_json::to_vec(&ServerJsonRpcMessage::error(
                    ErrorData::internal_error("the call panicked", None),
                    Some(id),
                )),
            }
            .unwrap_or_default();
            self.write_answer(line);
        }
        if self.running.fetch_sub(1, SeqCst) == 1 && self.ended.get().is_some() {
            let _guard = self.idle.0.lock().unwrap_or_else(|p| p.into_inner());
            self.idle.1.notify_all();
        }
    }

    fn write_answer(&self, mut line: Vec<u8>) {
        line.push(b'\n');
        // A client gone leaves nobody to tell.
        let _ = self.output.write_lines(&line);
    }

    /// End of input: rmcp's input closes too, so it finishes its own requests and stops.
    fn close_input(&self) {
        let ended = *self.ended.get_or_init(Instant::now);
        // Before rmcp sees the end: its drain would otherwise wait on the streams, and
        // its teardown would cancel those that had not answered yet.
        self.server.end_of_input();
        self.listens.wait_answered(ended + DRAIN);
        self.to_rmcp
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(watchdog) = self.watchdog.get() {
            watchdog.unpark();
        }
    }

    /// Waits for the calls still running here to answer (for [`DRAIN`] after the end of
    /// input), then cancels what is left.
    fn drain(&self) {
        let deadline = *self.ended.get_or_init(Instant::now) + DRAIN;
        let mut guard = self.idle.0.lock().unwrap_or_else(|p| p.into_inner());
        while self.running.load(SeqCst) > 0 {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            guard = self
                .idle
                .1
                .wait_timeout(guard, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        drop(guard);
        for (_, cancel) in self.calls.lock().unwrap_or_else(|p| p.into_inner()).drain() {
            cancel.cancel();
        }
    }

    /// Starts a reader when a call has kept every reader busy for a tick.
    fn watch(self: Arc<Self>) {
        let (mut last_started, mut quiet_ticks, mut stuck_ticks) = (u64::MAX, 0u32, 0u32);
        while self.ended.get().is_none() {
            std::thread::sleep(TICK);
            let started = self.started.load(SeqCst);
            let running = self.running.load(SeqCst);
            let nobody_reads = running > 0 && !self.reading.load(SeqCst);
            stuck_ticks = if nobody_reads && started == last_started {
                stuck_ticks + 1
            } else {
                0
            };
            if stuck_ticks >= 1 {
                stuck_ticks = 0;
                if let Err(e) = self.add_reader() {
                    eprintln!("warning: could not start an MCP reader: {e}");
                }
            }
            quiet_ticks = if running == 0 && started == last_started {
                quiet_ticks + 1
            } else {
                0
            };
            last_started = started;
            if quiet_ticks >= IDLE_TICKS {
                self.watchdog_asleep.store(true, SeqCst);
                // A call that started meanwhile saw the flag down, or will see it up.
                if self.started.load(SeqCst) == last_started && self.running.load(SeqCst) == 0 {
                    while self.watchdog_asleep.load(SeqCst) && self.ended.get().is_none() {
                        std::thread::park();
                    }
                }
                self.watchdog_asleep.store(false, SeqCst);
                quiet_ticks = 0;
            }
        }
    }
}

/// A `tools/call` request whose params are not a call (no `name`, wrong types): the
/// invalid-params error for it, as the HTTP transport answers. rmcp's stdio transport
/// would answer such a line "method not found".
fn malformed_call(line: &[u8]) -> Option<Vec<u8>> {
    #[derive(Deserialize)]
    struct Request {
        id: RequestId,
        method: String,
        #[serde(default)]
        params: serde_json::Value,
    }
    let request: Request = serde_json::from_slice(line).ok()?;
    if request.method != "tools/call" {
        return None;
    }
    let why = serde_json::from_value::<CallToolRequestParams>(request.params).err()?;
    let error = ErrorData::invalid_params(format!("invalid tools/call params: {why}"), None);
    serde_json::to_vec(&ServerJsonRpcMessage::error(error, Some(request.id))).ok()
}

/// Whether rmcp would answer this call exactly as [`Front::call`] does.
fn plain_call(call: &CallLine) -> bool {
    let meta_plain = call.params.meta.as_ref().is_none_or(|meta| {
        meta.0
             .0
            .keys()
            .all(|key| PLAIN_META.contains(&key.as_str()))
    });
    call.jsonrpc == "2.0"
        && call.method == "tools/call"
        && meta_plain
        && call.params.input_responses.is_none()
        && call.params.request_state.is_none()
}
