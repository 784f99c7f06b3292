//! The JSON-lines server with agent sessions: clarify as a request line the client
//! answers, one session per `session_id`, and every call recorded for session_search.

#[path = "serve_client/mod.rs"]
mod serve_client;

use serde_json::{json, Value};
use serve_client::{content, Client};

/// `hermes-tools serve` with `HERMES_HOME=home`, running there.
fn start_server(home: &std::path::Path) -> Client {
    Client::start(home, home, &[])
}

fn call(id: &str, name: &str, args: Value, session: &str) -> Value {
    json!({"id": id, "type": "function", "function": {"name": name, "arguments": args.to_string()}, "session_id": session})
}

#[test]
fn clarify_is_a_request_line_the_client_answers() {
    let home = tempfile::tempdir().unwrap();
    let mut server = start_server(home.path());
    server.send(&call(
        "c1",
        "clarify",
        json!({"question": "Which branch?", "choices": ["main", "dev"]}),
        "s1",
    ));
    let request = server.next();
    assert_eq!(request["type"], "clarify_request");
    assert_eq!(request["session_id"], "s1");
    assert_eq!(request["question"], "Which branch?");
    assert_eq!(request["choices"], json!(["main", "dev"]));
    assert_eq!(request["multi_select"], false);
    let id = request["id"].as_str().unwrap().to_string();

    // Other tasks' calls keep running while the question waits. (A later call of the
    // question's own task waits for its answer: a task's calls keep their order.)
    server.send(&call("c2", "todo", json!({}), "s2"));
    let todo = server.next();
    assert_eq!(todo["tool_call_id"], "c2");
    assert_eq!(content(&todo)["summary"]["total"], 0);

    // A response for a question nobody asked is an error line.
    server.send(&json!({"type": "clarify_response", "id": "clarify_999", "answer": "x"}));
    let error = server.next();
    assert!(
        error["error"]
            .as_str()
            .unwrap()
            .contains("no clarify request is waiting"),
        "{error}"
    );

    server.send(&json!({"type": "clarify_response", "id": id, "answer": "dev"}));
    let answer = server.next();
    assert_eq!(answer["role"], "tool");
    assert_eq!(answer["tool_call_id"], "c1");
    assert_eq!(
        content(&answer),
        json!({"question": "Which branch?", "choices_offered": ["main", "dev"], "user_response": "dev"})
    );

    // Multi-select answers are lists; a declined question is reported as an error.
    server.send(&call(
        "c3",
        "clarify",
        json!({"question": "Which?", "choices": ["a", "b", "c"], "multi_select": true}),
        "s1",
    ));
    let request = server.next();
    server.send(&json!({"type": "clarify_response", "id": request["id"], "answer": ["a", "c"]}));
    assert_eq!(content(&server.next())["user_response"], json!(["a", "c"]));
    server.send(&call(
        "c4",
        "clarify",
        json!({"question": "Free text?"}),
        "s1",
    ));
    let request = server.next();
    assert_eq!(request["choices"], json!([]));
    server.send(&json!({"type": "clarify_response", "id": request["id"], "error": "no user at the keyboard"}));
    let declined = content(&server.next());
    assert!(
        declined["error"]
            .as_str()
            .unwrap()
            .contains("no user at the keyboard"),
        "{declined}"
    );

    // A question still waiting at end of input fails at once instead of hanging.
    server.send(&call(
        "c5",
        "clarify",
        json!({"question": "Last one?"}),
        "s1",
    ));
    assert_eq!(server.next()["type"], "clarify_request");
    let rest = server.finish();
    let last = rest
        .iter()
        .find(|l| l["tool_call_id"] == "c5")
        .expect("c5 answered");
    assert!(
        content(last)["error"]
            .as_str()
            .unwrap()
            .contains("closed its input"),
        "{last}"
    );
}

#[test]
fn sessions_are_per_id_and_recorded_for_session_search() {
    let home = tempfile::tempdir().unwrap();
    let mut server = start_server(home.path());
    server.send(&call(
        "a1",
        "todo",
        json!({"todos": [{"id": "1", "content": "tune the zeppelin engine"}]}),
        "alpha",
    ));
    assert_eq!(content(&server.next())["summary"]["total"], 1);
    // Another session has its own list.
    server.send(&call("b1", "todo", json!({}), "beta"));
    assert_eq!(content(&server.next())["summary"]["total"], 0);
    // The same session keeps its list across lines.
    server.send(&call("a2", "todo", json!({}), "alpha"));
    assert_eq!(content(&server.next())["summary"]["total"], 1);
    // Calls of alpha were recorded; beta finds them (tool results are searched with role_filter).
    server.send(&call(
        "b2",
        "session_search",
        json!({"query": "zeppelin", "role_filter": "assistant,tool"}),
        "beta",
    ));
    let found = content(&server.next());
    assert_eq!(found["count"], 1, "{found}");
    assert_eq!(found["results"][0]["session_id"], "alpha");
    assert_eq!(found["results"][0]["source"], "serve");
    // A call without session_id gets no session.
    server.send(&json!({"id": "n1", "function": {"name": "todo", "arguments": "{}"}}));
    assert!(content(&server.next())["error"]
        .as_str()
        .unwrap()
        .contains("agent loop"));
    server.finish();
    assert!(home.path().join("state.db").exists());
}
