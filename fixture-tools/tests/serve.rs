//! `serve` as a process: JSON lines in, answers out, concurrently, and it keeps
//! serving whatever it is sent.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn server() -> (Child, tempfile::TempDir) {
    let home = tempfile::tempdir().unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_hermes-fixture-tools"))
        .arg("serve")
        .env("HERMES_HOME", home.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    (child, home)
}

fn call_line(id: &str, name: &str, args: Value) -> String {
    json!({"id": id, "type": "function", "function": {"name": name, "arguments": args.to_string()}})
        .to_string()
}

/// Sends every line, closes stdin, and collects the answers until the server exits.
fn exchange(lines: &[String]) -> (Vec<Value>, Duration) {
    let raw: Vec<Vec<u8>> = lines.iter().map(|l| l.as_bytes().to_vec()).collect();
    exchange_bytes(&raw)
}

fn exchange_bytes(lines: &[Vec<u8>]) -> (Vec<Value>, Duration) {
    let (mut child, _home) = server();
    let started = Instant::now();
    let mut stdin = child.stdin.take().unwrap();
    for line in lines {
        stdin.write_all(line).unwrap();
        stdin.write_all(b"\n").unwrap();
    }
    drop(stdin);
    let answers: Vec<Value> = BufReader::new(child.stdout.take().unwrap())
        .lines()
        .map(|l| serde_json::from_str(&l.unwrap()).unwrap())
        .collect();
    let status = child.wait().unwrap();
    assert!(status.success(), "the server ends cleanly at end of input");
    (answers, started.elapsed())
}

fn content(answer: &Value) -> Value {
    serde_json::from_str(answer["content"].as_str().unwrap()).unwrap()
}

fn by_id<'a>(answers: &'a [Value], id: &str) -> &'a Value {
    answers
        .iter()
        .find(|a| a["tool_call_id"] == id)
        .unwrap_or_else(|| panic!("no answer for {id} in {answers:?}"))
}

#[test]
fn fifty_slow_calls_run_concurrently() {
    // Each call sleeps 1 s: one after another would take 50 s. The bound is loose on
    // purpose; it only separates "concurrent" from "serial".
    let lines: Vec<String> = (0..50)
        .map(|i| call_line(&format!("slow-{i}"), "fx_sleep", json!({"millis": 1000})))
        .collect();
    let (answers, elapsed) = exchange(&lines);
    assert_eq!(answers.len(), 50);
    for i in 0..50 {
        let answer = by_id(&answers, &format!("slow-{i}"));
        assert_eq!(answer["role"], "tool");
        assert_eq!(content(answer)["slept_ms"], 1000);
    }
    assert!(
        elapsed < Duration::from_secs(15),
        "50 one-second calls took {elapsed:?}"
    );
}

#[test]
fn bad_input_gets_json_errors_and_the_server_keeps_serving() {
    let lines = vec![
        "this is not json".to_string(),
        json!({"id": "no-function"}).to_string(),
        json!({"id": "bad-args", "type": "function", "function": {"name": "fx_echo", "arguments": "{broken"}}).to_string(),
        call_line("unknown", "fx_nope", json!({})),
        call_line("panic", "fx_panic", json!({"message": "handler exploded"})),
        call_line("garbage-args", "fx_big", json!({"chars": "many"})),
        json!({"id": "object-args", "type": "function", "function": {"name": "fx_echo", "arguments": {"text": "as object"}}, "task_id": "t1"}).to_string(),
        call_line("after", "fx_echo", json!({"text": "still here"})),
    ];
    let (answers, _) = exchange(&lines);
    let line_errors: Vec<&Value> = answers.iter().filter(|a| a.get("line").is_some()).collect();
    assert_eq!(line_errors.len(), 2, "{answers:?}");
    assert!(line_errors
        .iter()
        .any(|e| e["line"] == 1 && e["error"].as_str().unwrap().contains("not valid JSON")));
    assert!(line_errors
        .iter()
        .any(|e| e["line"] == 2 && e["error"].as_str().unwrap().contains("function")));
    assert!(content(by_id(&answers, "bad-args"))["error"]
        .as_str()
        .unwrap()
        .contains("not valid JSON"));
    assert!(content(by_id(&answers, "unknown"))["error"]
        .as_str()
        .unwrap()
        .starts_with("Unknown tool: fx_nope"));
    assert_eq!(
        content(by_id(&answers, "panic"))["error"],
        "[TOOL_ERROR] Tool execution failed: panic: handler exploded"
    );
    assert!(content(by_id(&answers, "garbage-args"))["error"]
        .as_str()
        .unwrap()
        .contains("argument `chars`"));
    assert_eq!(content(by_id(&answers, "object-args"))["text"], "as object");
    assert_eq!(content(by_id(&answers, "after"))["text"], "still here");
}

#[test]
fn a_batch_line_answers_in_order_and_end_of_input_waits_for_running_calls() {
    let batch = json!([
        {"id": "b1", "type": "function", "function": {"name": "fx_sleep", "arguments": "{\"millis\": 300}"}},
        {"id": "b2", "type": "function", "function": {"name": "fx_echo", "arguments": "{\"text\": \"second\"}"}},
        {"id": "b3", "type": "function", "function": {"name": "fx_noop", "arguments": ""}},
    ])
    .to_string();
    let lines = vec![
        call_line("slow-last", "fx_sleep", json!({"millis": 500})),
        batch,
    ];
    let (answers, _) = exchange(&lines);
    let ids: Vec<&str> = answers
        .iter()
        .map(|a| a["tool_call_id"].as_str().unwrap())
        .collect();
    let batch_ids: Vec<&str> = ids
        .iter()
        .copied()
        .filter(|id| id.starts_with('b'))
        .collect();
    assert_eq!(batch_ids, ["b1", "b2", "b3"]);
    assert!(
        ids.contains(&"slow-last"),
        "a call still running at end of input is answered"
    );
    assert_eq!(content(by_id(&answers, "b2"))["text"], "second");
}

#[test]
fn a_line_that_is_not_utf8_is_reported_and_the_next_line_served() {
    let lines = vec![
        b"{\"id\": \"x\xff\xfe\"}".to_vec(),
        call_line("after-bytes", "fx_echo", json!({"text": "ok"})).into_bytes(),
    ];
    let (answers, _) = exchange_bytes(&lines);
    assert_eq!(answers.len(), 2, "{answers:?}");
    let error = answers.iter().find(|a| a.get("line").is_some()).unwrap();
    assert_eq!(error["line"], 1);
    assert!(error["error"].as_str().unwrap().contains("not valid UTF-8"));
    assert_eq!(content(by_id(&answers, "after-bytes"))["text"], "ok");
}
