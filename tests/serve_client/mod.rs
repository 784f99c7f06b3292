//! A client of `hermes-tools serve` for tests: writes lines to the real binary's stdin
//! and reads its output lines as they come.
#![allow(dead_code)]

// Its own copy, so this module works in test binaries that do not include `common`.
#[allow(clippy::duplicate_mod)]
#[path = "../common/serve_process.rs"]
mod serve_process;

use serde_json::{json, Value};
use serve_process::{serve_command, ServeProcess};
use std::io::Write;
use std::path::Path;
use std::process::{Child, ChildStdin, Stdio};
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
        Client::start_with(home, cwd, args, &[])
    }

    /// As [`Client::start`], with `envs` set on the server.
    pub fn start_with(home: &Path, cwd: &Path, args: &[&str], envs: &[(&str, &Path)]) -> Client {
        let ServeProcess {
            child,
            stdin,
            lines,
        } = ServeProcess::spawn(
            serve_command(home)
                .args(args)
                .current_dir(cwd)
                .env_remove("HERMES_INTERACTIVE")
                .env_remove("HERMES_YOLO_MODE")
                .envs(envs.iter().copied())
                .stderr(Stdio::null()),
        );
        Client {
            child,
            stdin,
            lines,
        }
    }

    pub fn send(&mut self, value: &Value) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{value}").unwrap();
        stdin.flush().unwrap();
    }

    /// The next line (a guard against hangs, not a timing assertion: generous, since a
    /// call may start a pod or a container on a machine busy with other builds).
    pub fn next(&self) -> Value {
        let line = self
            .lines
            .recv_timeout(Duration::from_secs(120))
            .expect("a line from the server within 120 s");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON: {line}: {e}"))
    }

    /// Closes input and waits for the server to exit; the lines written meanwhile.
    pub fn finish(mut self) -> Vec<Value> {
        drop(self.stdin.take());
        let status = self.child.wait().unwrap();
        assert!(status.success());
        self.lines
            .try_iter()
            .map(|l| serde_json::from_str(&l).unwrap())
            .collect()
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
