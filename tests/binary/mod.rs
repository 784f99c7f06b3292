//! Runs the `hermes-tools` binary with a `HERMES_HOME` of the test's own.
#![allow(dead_code)]

use serde_json::Value;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

pub fn hermes(home: &Path, args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_hermes-tools"))
        .args(args)
        .env("HERMES_HOME", home)
        .env("HOME", home)
        .current_dir(home)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// `hermes-tools call NAME ARGS [extra...]`, its result parsed.
pub fn call(home: &Path, name: &str, args: &Value, extra: &[&str]) -> Value {
    let text = args.to_string();
    let mut all = vec!["call", name, text.as_str()];
    all.extend_from_slice(extra);
    let out = hermes(home, &all, "");
    assert!(
        out.status.success(),
        "call {name} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{name} printed non-JSON {stdout:?}: {e}"))
}

/// Each line of `serve`'s output, parsed.
pub fn serve(home: &Path, extra: &[&str], lines: &[Value]) -> Vec<Value> {
    let input: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let mut args = vec!["serve"];
    args.extend_from_slice(extra);
    let out = hermes(home, &args, &input);
    assert!(
        out.status.success(),
        "serve failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("serve prints JSON lines"))
        .collect()
}

/// A serve line calling `name` with `args`.
pub fn serve_call(id: &str, name: &str, args: &Value) -> Value {
    serde_json::json!({"id": id, "type": "function", "function": {"name": name, "arguments": args.to_string()}})
}

/// The parsed `content` of serve's answer to `id`.
pub fn content_of(answers: &[Value], id: &str) -> Value {
    let answer = answers
        .iter()
        .find(|a| a["tool_call_id"] == id)
        .unwrap_or_else(|| panic!("no answer to {id} in {answers:?}"));
    serde_json::from_str(answer["content"].as_str().unwrap()).unwrap()
}
