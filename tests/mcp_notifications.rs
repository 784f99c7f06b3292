//! `hermes-tools mcp` on the raw wire: background-process notifications reach the
//! client for calls that name their task in `_meta.task_id`, `logging/setLevel` holds
//! back messages below the level, and a `tools/call` without a name is invalid params
//! on stdio as on HTTP.

mod mcp_support;

use mcp_support::*;
use serde_json::{json, Value};

fn opening() -> Vec<Value> {
    vec![
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    ]
}

fn background(id: i64, marker: &str, task: Option<&str>) -> Value {
    let mut params = json!({"name": "terminal", "arguments": {
        "command": format!("echo {marker}"), "background": true, "notify_on_complete": true}});
    if let Some(task) = task {
        params["_meta"] = json!({"task_id": task});
    }
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
}

fn notifications_with<'a>(seen: &'a [Value], marker: &str) -> Vec<&'a Value> {
    seen.iter()
        .filter(|m| {
            m["method"] == "notifications/message"
                && m["params"]["data"].to_string().contains(marker)
        })
        .collect()
}

#[test]
fn a_call_naming_its_task_gets_that_tasks_notifications() {
    let home = home();
    let mut lines = opening();
    lines.push(background(2, "named-task-done", Some("client-task-7")));
    let seen = stdio_exchange(home.path(), &["--toolsets", "terminal"], &lines, |seen| {
        !notifications_with(seen, "named-task-done").is_empty()
    });
    assert_eq!(
        answer(&seen, 2).map(|a| a["result"]["isError"].clone()),
        Some(json!(false)),
        "{seen:?}"
    );
    let notes = notifications_with(&seen, "named-task-done");
    assert_eq!(
        notes.len(),
        1,
        "no notification for the named task: {seen:?}"
    );
    assert_eq!(
        notes[0]["params"]["data"]["task_id"], "client-task-7",
        "{}",
        notes[0]
    );
    assert_eq!(notes[0]["params"]["logger"], "hermes-tools/process");
}

#[test]
fn set_level_holds_back_messages_below_it() {
    let home = home();
    let mut session = StdioSession::start(home.path(), &["--toolsets", "terminal"]);
    session.request(&opening()[0]);
    session.send(&opening()[1]);
    let set = session.request(&json!({"jsonrpc": "2.0", "id": 2, "method": "logging/setLevel", "params": {"level": "warning"}}));
    assert!(set.get("result").is_some(), "{set}");
    let started = session.request(&background(3, "held-back-marker", None));
    let text = started["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    let process: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {started}"));
    let process_id = process["session_id"].clone();
    assert!(process_id.is_string(), "{process}");
    let waited = session.request(
        &json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {
        "name": "process", "arguments": {"action": "wait", "session_id": process_id}}}),
    );
    assert_eq!(waited["result"]["isError"], false, "{waited}");
    // The process has ended: its event is sent now, if it is sent at all.
    session.listen(std::time::Duration::from_secs(2));
    session.request(&json!({"jsonrpc": "2.0", "id": 5, "method": "logging/setLevel", "params": {"level": "info"}}));
    session.send(&background(6, "let-through-marker", None));
    let seen = session.wait_for(|seen| !notifications_with(seen, "let-through-marker").is_empty());
    assert_eq!(
        notifications_with(seen, "let-through-marker").len(),
        1,
        "{seen:?}"
    );
    assert!(
        notifications_with(seen, "held-back-marker").is_empty(),
        "an info message was sent below the level warning: {seen:?}"
    );
}

#[test]
fn tools_call_without_a_name_is_invalid_params_on_stdio_and_http() {
    let home = home();
    let nameless =
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"arguments": {}}});
    let mut lines = opening();
    lines.push(nameless.clone());
    let seen = stdio_exchange(home.path(), &["--toolsets", "file"], &lines, |seen| {
        answer(seen, 2).is_some()
    });
    let on_stdio = answer(&seen, 2).expect("an answer on stdio")["error"]["code"].clone();

    let server = HttpServer::start(home.path(), home.path(), &["--toolsets", "file"]);
    let opened = server.request("POST", None, &opening()[0].to_string());
    let session = opened.header("mcp-session-id").expect("a session");
    server.request("POST", Some(&session), &opening()[1].to_string());
    let answered = server.request("POST", Some(&session), &nameless.to_string());
    let on_http =
        answered.messages().first().expect("an answer over HTTP")["error"]["code"].clone();
    assert_eq!(on_stdio, json!(-32602), "stdio: {seen:?}");
    assert_eq!(on_http, json!(-32602), "HTTP: {}", answered.body);
}

/// `_meta` of a 2026-07-28 request, with a log level when given.
fn modern_meta(log_level: Option<&str>) -> Value {
    let mut meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    if let Some(level) = log_level {
        meta["io.modelcontextprotocol/logLevel"] = json!(level);
    }
    meta
}

#[test]
fn on_2026_07_28_only_calls_that_ask_for_a_log_level_get_messages() {
    let home = home();
    let mut session = StdioSession::start(home.path(), &["--toolsets", "terminal"]);
    let mut silent = background(1, "unasked-marker", None);
    silent["params"]["_meta"] = modern_meta(None);
    let started = session.request(&silent);
    assert_eq!(started["result"]["resultType"], "complete", "{started}");
    let text = started["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    let process: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {started}"));
    let waited = session.request(
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "process", "arguments": {"action": "wait", "session_id": process["session_id"]},
        "_meta": modern_meta(None)}}),
    );
    assert_eq!(waited["result"]["isError"], false, "{waited}");
    session.listen(std::time::Duration::from_secs(2));
    let mut asking = background(3, "asked-marker", None);
    asking["params"]["_meta"] = modern_meta(Some("info"));
    session.send(&asking);
    let seen = session.wait_for(|seen| !notifications_with(seen, "asked-marker").is_empty());
    assert_eq!(
        notifications_with(seen, "asked-marker").len(),
        1,
        "{seen:?}"
    );
    assert!(
        notifications_with(seen, "unasked-marker").is_empty(),
        "a message for a call that asked for none: {seen:?}"
    );
}

fn updates_of<'a>(seen: &'a [Value], uri: &str) -> Vec<&'a Value> {
    seen.iter()
        .filter(|m| m["method"] == "notifications/resources/updated" && m["params"]["uri"] == uri)
        .collect()
}

#[test]
fn on_2026_07_28_subscriptions_listen_streams_updates_of_the_resources_it_accepted() {
    let home = home();
    let stored = home.path().join("cache/spillover/listened.txt");
    std::fs::create_dir_all(stored.parent().unwrap()).unwrap();
    std::fs::write(&stored, "first\n").unwrap();
    let uri = hermes_mcp::library::file_uri(&stored);
    let missing = hermes_mcp::library::file_uri(&home.path().join("cache/spillover/none.txt"));
    let mut session = StdioSession::start(home.path(), &["--toolsets", "file"]);
    session.send(
        &json!({"jsonrpc": "2.0", "id": 7, "method": "subscriptions/listen", "params": {
        "_meta": modern_meta(None),
        "notifications": {"resourceSubscriptions": [uri, missing], "toolsListChanged": true}}}),
    );
    session.wait_for(|seen| {
        seen.iter()
            .any(|m| m["method"] == "notifications/subscriptions/acknowledged")
    });
    let ack = session
        .seen
        .iter()
        .find(|m| m["method"] == "notifications/subscriptions/acknowledged")
        .unwrap_or_else(|| panic!("no acknowledgment: {:?}", session.seen))
        .clone();
    // What exists, and nothing the server does not watch.
    assert_eq!(
        ack["params"]["notifications"],
        json!({"resourceSubscriptions": [uri]}),
        "{ack}"
    );
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], 7,
        "{ack}"
    );

    std::fs::write(&stored, "second, longer\n").unwrap();
    session.wait_for(|seen| !updates_of(seen, &uri).is_empty());
    let update = updates_of(&session.seen, &uri)
        .first()
        .map(|u| (*u).clone())
        .unwrap_or_else(|| panic!("no update: {:?}", session.seen));
    assert_eq!(
        update["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], 7,
        "on the listen stream: {update}"
    );

    // Cancelling the listen request ends the stream.
    session.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 7}}),
    );
    session.listen(std::time::Duration::from_millis(300));
    let before = updates_of(&session.seen, &uri).len();
    std::fs::write(&stored, "third, longer still\n").unwrap();
    session.listen(std::time::Duration::from_millis(2500));
    assert_eq!(
        updates_of(&session.seen, &uri).len(),
        before,
        "updates after the cancel: {:?}",
        session.seen
    );
    // The stream's answer was not sent for the cancelled request.
    assert!(answer(&session.seen, 7).is_none(), "{:?}", session.seen);
}

#[test]
fn at_the_end_of_input_an_open_listen_stream_ends_and_is_answered() {
    let home = home();
    let stored = home.path().join("cache/spillover/watched.txt");
    std::fs::create_dir_all(stored.parent().unwrap()).unwrap();
    std::fs::write(&stored, "watched\n").unwrap();
    let uri = hermes_mcp::library::file_uri(&stored);
    let mut session = StdioSession::start(home.path(), &["--toolsets", "file"]);
    for (id, uris) in [(7, json!([uri])), (8, json!([]))] {
        session.send(
            &json!({"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen", "params": {
            "_meta": modern_meta(None),
            "notifications": {"resourceSubscriptions": uris}}}),
        );
    }
    session.wait_for(|seen| {
        seen.iter()
            .filter(|m| m["method"] == "notifications/subscriptions/acknowledged")
            .count()
            == 2
    });
    let exit = session.close_and_read_to_end();
    assert!(exit.success(), "{exit:?}: {:?}", session.seen);
    // Each stream got its final result before the server went: the end of input
    // ended them, rather than the session's teardown cutting them off unanswered.
    for id in [7, 8] {
        let end = answer(&session.seen, id)
            .unwrap_or_else(|| panic!("listen {id} was not answered: {:?}", session.seen));
        assert_eq!(end["result"]["resultType"], "complete", "{end}");
    }
}
