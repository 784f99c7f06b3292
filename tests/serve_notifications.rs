//! Background-process notifications over `hermes-tools serve`: a completion and a
//! watch-pattern match arrive as `process_notification` lines while the server runs.

#[path = "serve_client/mod.rs"]
mod serve_client;

use serde_json::json;
use serve_client::{content, terminal, Client};

#[test]
fn completion_and_watch_match_are_pushed_to_the_client() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let mut client = Client::start(home.path(), work.path(), &[]);

    client.send(&terminal(
        "bg",
        json!({"command": "echo first line; echo done-marker; exit 3", "background": true, "notify_on_complete": true}),
        "s1",
        "t-complete",
    ));
    let started = content(&client.next());
    let process = started["session_id"]
        .as_str()
        .expect("a process id")
        .to_string();
    assert!(process.starts_with("proc_"), "{started}");
    let note = client.next();
    assert_eq!(note["type"], "process_notification", "{note}");
    assert_eq!(note["event"], "completed");
    assert_eq!(note["session_id"], process.as_str());
    assert_eq!(note["task_id"], "t-complete");
    assert_eq!(note["exit_code"], 3);
    assert!(
        note["output_tail"]
            .as_str()
            .unwrap()
            .contains("done-marker"),
        "{note}"
    );

    // The pattern is printed only after the call has answered, so the notice comes later.
    client.send(&terminal(
        "watch",
        json!({
            "command": "sleep 1; echo booting; echo server READY on 8080; sleep 1; echo READY again",
            "background": true,
            "watch_patterns": ["READY"],
        }),
        "s1",
        "t-watch",
    ));
    let started = content(&client.next());
    let process = started["session_id"].as_str().unwrap().to_string();
    assert_eq!(started["watch_patterns"], json!(["READY"]));
    let note = client.next();
    assert_eq!(note["type"], "process_notification", "{note}");
    assert_eq!(note["event"], "watch_match");
    assert_eq!(note["session_id"], process.as_str());
    assert_eq!(note["task_id"], "t-watch");
    assert_eq!(note["pattern"], "READY");
    assert_eq!(note["line"], "server READY on 8080");
    // Let the process finish: the second match falls inside the 15 s spacing and is
    // dropped, so nothing else is written.
    client.send(&terminal(
        "wait",
        json!({"command": "sleep 3; echo waited"}),
        "s1",
        "t-other",
    ));
    let waited = client.next();
    assert_eq!(waited["tool_call_id"], "wait", "{waited}");
    let rest = client.finish();
    assert!(
        rest.is_empty(),
        "the rate limit drops the second match: {rest:?}"
    );
}
