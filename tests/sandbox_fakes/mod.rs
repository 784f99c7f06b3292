//! Starting the provider fakes of tests/fakes/ and driving `hermes-tools serve` against
//! them.

#![allow(dead_code)]

// Its own copy, so this module works in test binaries that do not include `common`.
#[allow(clippy::duplicate_mod)]
#[path = "../common/serve_process.rs"]
mod serve_process;

use serde_json::{json, Value};
use serve_process::{serve_command, ServeProcess};
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// Prints `gone` unless the process whose pid is in /tmp/sleeper.pid still runs
/// (a zombie counts as gone).
pub const PROCESS_ALIVE_PROBE: &str = "p=$(cat /tmp/sleeper.pid); \
     if [ -d /proc/$p ] && ! grep -q '^State:.*Z' /proc/$p/status 2>/dev/null; then echo alive; else echo gone; fi";

pub fn fakes_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fakes")
}

/// A fake provider API: a Python process serving on 127.0.0.1 until its stdin closes.
pub struct Fake {
    pub url: String,
    child: Child,
    _stdin: ChildStdin,
    _root: tempfile::TempDir,
}

impl Fake {
    /// `python3 tests/fakes/<script> <args..> <root dir>`.
    pub fn start(script: &str, args: &[&str]) -> Fake {
        let root = tempfile::tempdir().unwrap();
        let python = hermes_test_peers::python_with(&[]);
        let mut child = Command::new(python)
            .arg(fakes_dir().join(script))
            .args(args)
            .arg(root.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the fake");
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        let url = first
            .trim()
            .strip_prefix("listening ")
            .unwrap_or_else(|| panic!("the fake {script} did not start: {first:?}"))
            .to_string();
        let stdin = child.stdin.take().unwrap();
        Fake {
            url,
            child,
            _stdin: stdin,
            _root: root,
        }
    }

    pub fn get(&self, path: &str) -> Value {
        let body = ureq::get(&format!("{}{path}", self.url))
            .call()
            .unwrap()
            .body_mut()
            .read_to_string()
            .unwrap();
        serde_json::from_str(&body).unwrap()
    }

    /// The fake's sandboxes: `[{id, state, create}]`.
    pub fn sandboxes(&self) -> Vec<Value> {
        self.get("/_fake/sandboxes").as_array().unwrap().clone()
    }

    /// Every request the fake received: `[{method, path, query, headers, body}]`.
    pub fn requests(&self) -> Vec<Value> {
        self.get("/_fake/requests").as_array().unwrap().clone()
    }
}

impl Drop for Fake {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `hermes-tools serve` with a Hermes home holding `config.yaml`.
pub struct Serve {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    next_id: usize,
    _home: Option<tempfile::TempDir>,
}

impl Serve {
    pub fn start(config: &str) -> Serve {
        Serve::start_with_env(config, &[])
    }

    pub fn start_with_env(config: &str, env: &[(&str, &str)]) -> Serve {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join("config.yaml"), config).unwrap();
        let mut serve = Serve::start_in(home.path(), env);
        serve._home = Some(home);
        serve
    }

    /// A server on an existing Hermes home (its config.yaml already written).
    pub fn start_in(home: &std::path::Path, env: &[(&str, &str)]) -> Serve {
        let ServeProcess {
            child,
            stdin,
            lines,
        } = ServeProcess::spawn(
            serve_command(home)
                .envs(env.iter().copied())
                .stderr(Stdio::inherit()),
        );
        Serve {
            child,
            stdin,
            lines,
            next_id: 0,
            _home: None,
        }
    }

    /// One tool call; returns the tool's parsed JSON result.
    pub fn call(&mut self, tool: &str, args: Value) -> Value {
        self.next_id += 1;
        let id = format!("c{}", self.next_id);
        let line = json!({"id": id, "type": "function", "task_id": "t1",
                          "function": {"name": tool, "arguments": args.to_string()}});
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
        let answer = self
            .lines
            .recv_timeout(Duration::from_secs(120))
            .expect("an answer within 120 s");
        let answer: Value =
            serde_json::from_str(&answer).unwrap_or_else(|e| panic!("not JSON: {answer}: {e}"));
        assert_eq!(answer["tool_call_id"], id.as_str(), "{answer}");
        let content = answer["content"].as_str().unwrap();
        serde_json::from_str(content)
            .unwrap_or_else(|e| panic!("content not JSON ({e}): {content}"))
    }

    pub fn terminal(&mut self, args: Value) -> Value {
        self.call("terminal", args)
    }

    /// Closes input and waits for the server to exit (it cleans up its environments).
    pub fn finish(mut self) {
        drop(self.stdin.take());
        let status = self.child.wait().unwrap();
        assert!(status.success(), "hermes-tools serve exited with {status}");
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}

/// A refused credential: the call is degraded, names `reason` and hints at credentials.
pub fn assert_refused_credentials(r: &Value, reason: &str) {
    assert_eq!(r["status"], "degraded", "{r}");
    assert!(r["reason"].as_str().unwrap().contains(reason), "{r}");
    assert!(
        r["retry_hint"].as_str().unwrap().contains("credentials"),
        "{r}"
    );
}

/// The terminal's timeout stops the command inside the sandbox, not just the wait for it.
pub fn assert_timeout_kills_the_remote_command(serve: &mut Serve) {
    let r = serve
        .terminal(json!({"command": "echo $$ > /tmp/sleeper.pid; exec sleep 120", "timeout": 2}));
    assert_eq!(r["exit_code"], 124, "{r}");
    let r = serve.terminal(json!({"command": PROCESS_ALIVE_PROBE}));
    assert_eq!(r["output"], "gone", "the command outlived its timeout: {r}");
}

/// The checks a live test runs against a real provider: output and exit code, cwd
/// persistence, a timeout.
pub fn live_round(mut serve: Serve) {
    let r = serve.terminal(json!({"command": "cd /tmp && echo live; exit 3"}));
    assert_eq!(
        (r["output"].as_str(), r["exit_code"].as_i64()),
        (Some("live"), Some(3)),
        "{r}"
    );
    let r = serve.terminal(json!({"command": "pwd"}));
    assert_eq!(r["output"], "/tmp", "{r}");
    let r = serve.terminal(json!({"command": "sleep 60", "timeout": 2}));
    assert_eq!(r["exit_code"], 124, "{r}");
    serve.finish();
}

/// Node 22 from the MCP test setup when present, else `node` on PATH.
pub fn node() -> PathBuf {
    let bundled =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("mcp/tests/node/node_modules/.bin/node");
    if bundled.exists() {
        bundled
    } else {
        PathBuf::from("node")
    }
}
