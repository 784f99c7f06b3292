//! A client of `hermes-tools serve` for the tests: raw bytes in, answer lines out.

#![allow(dead_code)]

// Its own copy, so this module works in test binaries that do not include `common`.
#[allow(clippy::duplicate_mod)]
#[path = "../common/serve_process.rs"]
mod serve_process;

use serde_json::{json, Value};
use serve_process::{serve_command, ServeProcess};
use std::io::Write;
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc;
use std::time::Duration;

pub struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
}

impl Server {
    pub fn start(home: &std::path::Path, cwd: &std::path::Path) -> Server {
        let ServeProcess {
            child,
            stdin,
            lines,
        } = ServeProcess::spawn(serve_command(home).current_dir(cwd).stderr(Stdio::null()));
        Server {
            child,
            stdin,
            lines,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(bytes).unwrap();
        stdin.flush().unwrap();
    }

    pub fn send(&mut self, value: &Value) {
        self.send_raw(format!("{value}\n").as_bytes());
    }

    /// The next line, which must be JSON.
    pub fn next(&self) -> Value {
        let line = self
            .lines
            .recv_timeout(Duration::from_secs(60))
            .expect("a line from the server within 60 s");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON: {line}: {e}"))
    }

    /// Sends a call and returns its answer's content, parsed.
    pub fn call(&mut self, id: &str, name: &str, args: Value, ids: Value) -> Value {
        self.send(&call(id, name, args, ids));
        let answer = self.next();
        assert_eq!(answer["tool_call_id"], id, "{answer}");
        content(&answer)
    }

    /// A line of `/proc/PID/status` in kB (`VmRSS`, `VmHWM`).
    pub fn memory_kb(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        let line = status
            .lines()
            .find(|l| l.starts_with(field))
            .unwrap_or_else(|| panic!("no {field} in {status}"));
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    /// Closes input, waits for the server to exit, and returns the lines still unread.
    pub fn finish(mut self) -> Vec<Value> {
        drop(self.stdin.take());
        let status = self.child.wait().unwrap();
        assert!(status.success());
        self.lines
            .iter()
            .map(|l| serde_json::from_str(&l).unwrap_or_else(|e| panic!("not JSON: {l}: {e}")))
            .collect()
    }
}

/// A call line; `ids` holds its `task_id` / `session_id` (or other extra fields).
pub fn call(id: &str, name: &str, args: Value, ids: Value) -> Value {
    let mut line = json!({"id": id, "type": "function", "function": {"name": name, "arguments": args.to_string()}});
    if let Value::Object(extra) = ids {
        line.as_object_mut().unwrap().extend(extra);
    }
    line
}

pub fn content(answer: &Value) -> Value {
    let text = answer["content"]
        .as_str()
        .unwrap_or_else(|| panic!("no content: {answer}"));
    serde_json::from_str(text).unwrap_or_else(|e| panic!("content is not JSON: {text}: {e}"))
}
