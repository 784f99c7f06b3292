//! The parent's end of the script's tool calls: one JSON line per request
//! (`{"tool", "args", "token"}`, plus `"id"` where answers travel apart from requests),
//! one JSON line per answer (the result string). Each call goes through the registry's
//! normal entry point, so hooks, approvals, restrictions and result budgets apply as to a
//! direct call. How the lines travel (a socket pair on this machine, the child's output
//! and files in a remote environment) is the caller's business.

use hermes_runtime::{Registry, ToolCall, ToolContext};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Terminal arguments a script may not use: its calls are foreground only.
const TERMINAL_BLOCKED: [&str; 4] = ["background", "pty", "notify_on_complete", "watch_patterns"];

pub struct Limits {
    pub allowed: Vec<String>,
    pub max_calls: usize,
    pub token: String,
}

/// Answers requests of one script run and counts them.
pub struct Dispatcher {
    registry: Arc<Registry>,
    ctx: ToolContext,
    limits: Limits,
    calls_made: AtomicUsize,
}

impl Dispatcher {
    pub fn new(registry: Arc<Registry>, ctx: ToolContext, limits: Limits) -> Dispatcher {
        Dispatcher {
            registry,
            ctx,
            limits,
            calls_made: AtomicUsize::new(0),
        }
    }

    pub fn calls_made(&self) -> usize {
        self.calls_made.load(Ordering::SeqCst)
    }

    /// The answer line (a JSON string, newline-terminated) to one request line.
    pub fn answer_line(&self, request: &[u8]) -> String {
        serde_json::to_string(&Value::String(self.answer(request))).expect("strings serialise")
            + "\n"
    }

    fn answer(&self, line: &[u8]) -> String {
        let request: Value = match serde_json::from_slice(line) {
            Ok(request) => request,
            Err(e) => return refuse(format!("Invalid RPC request: {e}")),
        };
        let token = request
            .get("token")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !constant_time_eq(token.as_bytes(), self.limits.token.as_bytes()) {
            return refuse("Unauthorized RPC request".into());
        }
        let tool = request
            .get("tool")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let allowed = &self.limits.allowed;
        if !allowed.iter().any(|t| t == tool) {
            return refuse(format!(
                "Tool '{tool}' is not available in execute_code. Available: {}",
                allowed.join(", ")
            ));
        }
        // Counted before the call runs, so concurrent threads of one script cannot overshoot.
        let made = self.calls_made.fetch_add(1, Ordering::SeqCst);
        if made >= self.limits.max_calls {
            self.calls_made.fetch_sub(1, Ordering::SeqCst);
            return refuse(format!(
                "Tool call limit reached ({}). No more tool calls allowed in this execution.",
                self.limits.max_calls
            ));
        }
        // A caller that shows progress sees each call as a step of the script.
        self.ctx.report_progress(&format!(
            "execute_code: tool call {} of at most {}: {tool}",
            made + 1,
            self.limits.max_calls
        ));
        let mut args = request.get("args").cloned().unwrap_or_else(|| json!({}));
        if tool == "terminal" {
            if let Some(map) = args.as_object_mut() {
                for key in TERMINAL_BLOCKED {
                    map.remove(key);
                }
            }
        }
        self.registry
            .handle_function_call(&ToolCall::new(tool, args), &self.ctx)
    }
}

/// Serves the parent's end of a socket pair on a thread until [`Server::stop`].
pub struct Server {
    dispatcher: Arc<Dispatcher>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    pub fn start(stream: UnixStream, dispatcher: Arc<Dispatcher>) -> std::io::Result<Server> {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (dispatcher, stop) = (Arc::clone(&dispatcher), Arc::clone(&stop));
            std::thread::Builder::new()
                .name("execute-code-rpc".into())
                .spawn(move || serve_connection(stream, &dispatcher, &stop))?
        };
        Ok(Server {
            dispatcher,
            stop,
            thread: Some(thread),
        })
    }

    /// Stops serving (after the call under way, if any) and returns the calls made.
    pub fn stop(mut self) -> usize {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        self.dispatcher.calls_made()
    }
}

fn serve_connection(stream: UnixStream, dispatcher: &Dispatcher, stop: &AtomicBool) {
    // A read timeout lets the thread notice `stop` while the script is busy elsewhere (or
    // a process it started still holds its end of the pair).
    let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    let mut line = Vec::new();
    loop {
        match reader.read_until(b'\n', &mut line) {
            Ok(0) => return,
            Ok(_) if line.ends_with(b"\n") => {}
            Ok(_) => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                if stop.load(Ordering::SeqCst) {
                    return;
                }
                continue;
            }
            Err(_) => return,
        }
        let encoded = dispatcher.answer_line(&line);
        line.clear();
        if writer.write_all(encoded.as_bytes()).is_err() {
            return;
        }
    }
}

fn refuse(message: String) -> String {
    json!({"error": message}).to_string()
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
