//! Long calls of `hermes-tools mcp` report progress to a client that sent a
//! `progressToken`, on stdio and over HTTP, and a client's cancellation ends the call
//! (its command is killed, no answer is sent).

mod mcp_support;

use mcp_support::*;
use serde_json::{json, Value};

fn long_call(id: i64, command: &str, token: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": "terminal", "arguments": {"command": command}, "_meta": {"progressToken": token}}})
}

fn progress_of<'a>(seen: &'a [Value], token: &str) -> Vec<&'a Value> {
    seen.iter()
        .filter(|m| {
            m["method"] == "notifications/progress" && m["params"]["progressToken"] == token
        })
        .collect()
}

/// Progress must increase.
fn assert_rising(notes: &[&Value]) {
    let steps: Vec<f64> = notes
        .iter()
        .map(|n| n["params"]["progress"].as_f64().unwrap())
        .collect();
    assert!(
        steps.windows(2).all(|w| w[0] < w[1]),
        "progress must increase: {steps:?}"
    );
}

/// `hermes-tools mcp --toolsets terminal` on stdio, past the handshake.
fn initialized(home: &std::path::Path) -> StdioSession {
    let mut session = StdioSession::start(home, &["--toolsets", "terminal"]);
    session.request(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}));
    session.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    session
}

#[test]
fn a_long_call_reports_progress_on_stdio_and_can_be_cancelled() {
    let home = home();
    let marker = home.path().join("finished");
    let mut session = initialized(home.path());

    // A call that ends by itself: progress while it runs, increasing, then its answer.
    let answered = session.request(&long_call(2, "sleep 2.5; echo all-done", "p-2"));
    assert!(
        answered["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("all-done"),
        "{answered}"
    );
    let notes = progress_of(&session.seen, "p-2");
    assert!(
        !notes.is_empty(),
        "no progress for a 2.5 s call: {:?}",
        session.seen
    );
    assert_rising(&notes);
    assert!(
        notes[0]["params"]["message"]
            .as_str()
            .unwrap()
            .contains("terminal"),
        "{}",
        notes[0]
    );

    // A call cancelled after its first progress: its command dies, nobody answers it.
    session.send(&long_call(
        3,
        &format!("sleep 3; touch {}", marker.display()),
        "p-3",
    ));
    session.wait_for(|seen| !progress_of(seen, "p-3").is_empty());
    session.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}}),
    );
    session.listen(std::time::Duration::from_secs(4));
    assert!(
        answer(&session.seen, 3).is_none(),
        "a cancelled call was answered: {:?}",
        session.seen
    );
    assert!(!marker.exists(), "the cancelled command kept running");
    let after_cancel = progress_of(&session.seen, "p-3").len();
    session.listen(std::time::Duration::from_millis(1500));
    assert_eq!(
        progress_of(&session.seen, "p-3").len(),
        after_cancel,
        "progress went on after the cancel"
    );
}

#[test]
fn a_long_call_reports_progress_over_http() {
    let home = home();
    let server = HttpServer::start(home.path(), home.path(), &["--toolsets", "terminal"]);
    let session = server.open_session();
    let answered = server.request(
        "POST",
        Some(&session),
        &long_call(2, "sleep 2.5; echo all-done", "h-2").to_string(),
    );
    let messages = answered.messages();
    let notes = progress_of(&messages, "h-2");
    assert!(
        !notes.is_empty(),
        "no progress over HTTP: {}",
        answered.body
    );
    let result = answer(&messages, 2).expect("the call's answer");
    assert!(
        result["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("all-done"),
        "{result}"
    );
    // The progress came before the answer, on the call's stream.
    let at = |m: &Value| messages.iter().position(|x| x == m).unwrap();
    assert!(at(notes[0]) < at(result));
}

#[test]
fn terminal_output_arrives_as_progress_while_the_command_runs() {
    let home = home();
    let gate = home.path().join("go");
    let mut session = initialized(home.path());
    // The command prints, then waits until the test has seen that output as progress.
    let command = format!(
        "echo first-line; echo key sk-live0123456789abcdef; while [ ! -e {} ]; do sleep 0.1; done; echo last-line",
        gate.display()
    );
    session.send(&long_call(2, &command, "out-2"));
    session.wait_for(|seen| {
        progress_of(seen, "out-2").iter().any(|n| {
            n["params"]["message"]
                .as_str()
                .unwrap_or("")
                .contains("first-line")
        })
    });
    assert!(
        answer(&session.seen, 2).is_none(),
        "the output came only with the answer: {:?}",
        session.seen
    );
    std::fs::write(&gate, "").unwrap();
    let answered = session.request(&json!({"jsonrpc": "2.0", "id": 3, "method": "ping"}));
    assert!(answered.get("result").is_some());
    session.wait_for(|seen| answer(seen, 2).is_some());
    let notes = progress_of(&session.seen, "out-2");
    let streamed: String = notes
        .iter()
        .filter_map(|n| n["params"]["message"].as_str())
        .filter(|m| !m.contains("is running ("))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(streamed.contains("first-line"), "{streamed}");
    assert!(streamed.contains("last-line"), "{streamed}");
    // Redacted as the result is, and without the shell's own bookkeeping.
    assert!(!streamed.contains("sk-live0123456789abcdef"), "{streamed}");
    assert!(streamed.contains("sk-***"), "{streamed}");
    assert_eq!(streamed.lines().count(), 3, "{streamed}");
    assert_rising(&notes);
    let result = answer(&session.seen, 2).unwrap();
    let text = result["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("first-line") && text.contains("last-line"),
        "{text}"
    );
}

/// `GET /mcp` with `Last-Event-ID`, read until the answer to `id` has come (or 30 s).
fn resume(port: u16, session: &str, last_event_id: &str, id: i64) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_millis(200)))
        .unwrap();
    write!(
        stream,
        "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\nAccept: text/event-stream\r\n\
         Mcp-Session-Id: {session}\r\nMcp-Protocol-Version: 2025-06-18\r\nLast-Event-ID: {last_event_id}\r\n\r\n"
    )
    .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut seen = Vec::new();
    let mut buffer = [0u8; 8192];
    while std::time::Instant::now() < deadline {
        match stream.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => seen.extend_from_slice(&buffer[..n]),
            Err(_) => {}
        }
        if String::from_utf8_lossy(&seen).contains(&format!("\"id\":{id},\"result\"")) {
            break;
        }
    }
    String::from_utf8_lossy(&seen).into_owned()
}

#[test]
fn a_long_calls_stream_is_closed_for_polling_and_resumed_with_last_event_id() {
    let home = home_with("mcp_server:\n  sse_poll_seconds: 0.5\n");
    let server = HttpServer::start(home.path(), home.path(), &["--toolsets", "terminal"]);
    let session = server.open_session();
    // The POST's stream ends after its priming event, long before the command does.
    let posted = server.request(
        "POST",
        Some(&session),
        &long_call(2, "sleep 2; echo polled-answer", "r-2").to_string(),
    );
    assert!(
        answer(&posted.messages(), 2).is_none(),
        "answered on the first stream: {}",
        posted.body
    );
    let primed = posted
        .body
        .lines()
        .find_map(|l| l.strip_prefix("id:"))
        .map(str::trim)
        .expect("a priming event with an id")
        .to_string();
    assert!(posted.body.contains("retry:"), "{}", posted.body);
    // The rest comes on a GET that names the last event seen.
    let resumed = resume(server.port, &session, &primed, 2);
    let messages: Vec<Value> = resumed
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str(d.trim()).ok())
        .collect();
    let result =
        answer(&messages, 2).unwrap_or_else(|| panic!("no answer after resuming: {resumed}"));
    assert!(result["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("polled-answer"));
    assert!(!progress_of(&messages, "r-2").is_empty(), "{resumed}");
}
