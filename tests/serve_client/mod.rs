//! A client of `hermes-tools serve` for tests: writes lines to the real binary's stdin
//! and reads its output lines as they come.
#![allow(dead_code)]

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

pub struct Client {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
}

impl Client {
    /// `hermes-tools serve ARGS` with `HERMES_HOME=home`, running in `cwd`.
    pub fn start(home: &Path, cwd: &Path, args: &[&str]) -> Client {
        let mut child = Command::new(env!("CARGO_BIN_EXE_hermes-tools"))
            .arg("serve")
            .args(args)
            .current_dir(cwd)
            .env("HERMES_HOME", home)
            .env_remove("HERMES_INTERACTIVE")
            .env_remove("HERMES_YOLO_MODE")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start hermes-tools serve");
        let stdout = child.stdout.take().unwrap();
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        Client { child, stdin, lines }
    }

    pub fn send(&mut self, value: &Value) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{value}").unwrap();
        stdin.flush().unwrap();
    }

    /// The next line (a guard against hangs, not a timing assertion).
    pub fn next(&self) -> Value {
        let line = self.lines.recv_timeout(Duration::from_secs(30)).expect("a line from the server within 30 s");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON: {line}: {e}"))
    }

    /// Closes input and waits for the server to exit; the lines written meanwhile.
    pub fn finish(mut self) -> Vec<Value> {
        drop(self.stdin.take());
        let status = self.child.wait().unwrap();
        assert!(status.success());
        self.lines.try_iter().map(|l| serde_json::from_str(&l).unwrap()).collect()
    }
}

/// A terminal call with ids for the answer and the approval request.
pub fn terminal(id: &str, args: Value, session: &str, task: &str) -> Value {
    json!({
        "id": id,
        "type": "function",
        "function": {"name": "terminal", "arguments": args.to_string()},
        "session_id": session,
        "task_id": task,
    })
}

/// The parsed result string of an answer line.
pub fn content(answer: &Value) -> Value {
    serde_json::from_str(answer["content"].as_str().expect("an answer line")).unwrap()
}
