//! The parent's end of the script's tool calls: a Unix socket in a private folder,
//! one JSON line per request (`{"tool", "args", "token"}`), one JSON line per answer
//! (the result string). Each call goes through the registry's normal entry point, so
//! hooks, approvals, restrictions and result budgets apply as to a direct call.

use hermes_runtime::{Registry, ToolCall, ToolContext};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
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

pub struct Server {
    pub calls_made: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    /// Serves `listener` on a thread until [`Server::stop`].
    pub fn start(listener: UnixListener, registry: Arc<Registry>, ctx: ToolContext, limits: Limits) -> std::io::Result<Server> {
        listener.set_nonblocking(true)?;
        let calls_made = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (calls_made, stop) = (Arc::clone(&calls_made), Arc::clone(&stop));
            std::thread::Builder::new().name("execute-code-rpc".into()).spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    match listener.accept() {
                        Ok((stream, _)) => serve_connection(stream, &registry, &ctx, &limits, &calls_made, &stop),
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(10)),
                        Err(_) => return,
                    }
                }
            })?
        };
        Ok(Server { calls_made, stop, thread: Some(thread) })
    }

    pub fn stop(mut self) -> usize {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        self.calls_made.load(Ordering::SeqCst)
    }
}

fn serve_connection(stream: UnixStream, registry: &Registry, ctx: &ToolContext, limits: &Limits, calls_made: &AtomicUsize, stop: &AtomicBool) {
    // A read timeout lets the thread notice `stop` while the script is busy elsewhere.
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
    let Ok(mut writer) = stream.try_clone() else { return };
    let mut reader = BufReader::new(stream);
    let mut line = Vec::new();
    loop {
        match reader.read_until(b'\n', &mut line) {
            Ok(0) => return,
            Ok(_) if line.ends_with(b"\n") => {}
            Ok(_) => continue,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                if stop.load(Ordering::SeqCst) {
                    return;
                }
                continue;
            }
            Err(_) => return,
        }
        let answer = answer(&line, registry, ctx, limits, calls_made);
        line.clear();
        let encoded = serde_json::to_string(&Value::String(answer)).expect("strings serialise") + "\n";
        if writer.write_all(encoded.as_bytes()).is_err() {
            return;
        }
    }
}

fn refuse(message: String) -> String {
    json!({"error": message}).to_string()
}

fn answer(line: &[u8], registry: &Registry, ctx: &ToolContext, limits: &Limits, calls_made: &AtomicUsize) -> String {
    let request: Value = match serde_json::from_slice(line) {
        Ok(request) => request,
        Err(e) => return refuse(format!("Invalid RPC request: {e}")),
    };
    let token = request.get("token").and_then(Value::as_str).unwrap_or_default();
    if !constant_time_eq(token.as_bytes(), limits.token.as_bytes()) {
        return refuse("Unauthorized RPC request".into());
    }
    let tool = request.get("tool").and_then(Value::as_str).unwrap_or_default();
    if !limits.allowed.iter().any(|t| t == tool) {
        return refuse(format!("Tool '{tool}' is not available in execute_code. Available: {}", limits.allowed.join(", ")));
    }
    // Counted before the call runs, so concurrent threads of one script cannot overshoot.
    if calls_made.fetch_add(1, Ordering::SeqCst) >= limits.max_calls {
        calls_made.fetch_sub(1, Ordering::SeqCst);
        return refuse(format!("Tool call limit reached ({}). No more tool calls allowed in this execution.", limits.max_calls));
    }
    let mut args = request.get("args").cloned().unwrap_or_else(|| json!({}));
    if tool == "terminal" {
        if let Some(map) = args.as_object_mut() {
            for key in TERMINAL_BLOCKED {
                map.remove(key);
            }
        }
    }
    registry.handle_function_call(&ToolCall::new(tool, args), ctx)
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
