//! The five agent-loop tools through `handle_function_call`, with and without an agent
//! session attached: their actions and their answers to bad input.

use hermes_agent::clarify::{ClarifyChannel, ClarifyReply, ClarifyRequest};
use hermes_agent::{AgentSession, SessionOptions};
use hermes_runtime::context::Cancellation;
use hermes_runtime::{Registry, ToolCall, ToolContext};
use hermes_tools::CATALOG;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::Duration;

struct Env {
    home: tempfile::TempDir,
    registry: Arc<Registry>,
}

fn env() -> Env {
    let home = tempfile::tempdir().unwrap();
    let registry = Arc::new(Registry::with_home(&CATALOG, home.path().to_path_buf()));
    Env { home, registry }
}

fn session(env: &Env, options: SessionOptions) -> Arc<AgentSession> {
    AgentSession::new(Arc::clone(&env.registry), options)
}

fn call(env: &Env, session: Option<&Arc<AgentSession>>, name: &str, args: Value) -> Value {
    let ctx = match session {
        Some(s) => s.tool_context(),
        None => ToolContext::builder().hermes_home(env.home.path()).build(),
    };
    let text = env
        .registry
        .handle_function_call(&ToolCall::new(name, Value::String(args.to_string())), &ctx);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name} returned non-JSON {text:?}: {e}"))
}

#[test]
fn without_a_session_the_agent_tools_are_refused() {
    let env = env();
    for name in [
        "todo",
        "todo_list",
        "memory",
        "session_search",
        "delegate_task",
        "clarify",
    ] {
        let result = call(&env, None, name, json!({}));
        let error = result["error"].as_str().unwrap_or_default();
        assert!(error.contains("agent loop"), "{name}: {result}");
    }
}

#[test]
fn todo_reads_writes_merges_and_counts() {
    let env = env();
    let s = session(&env, SessionOptions::default());
    let empty = call(&env, Some(&s), "todo", json!({}));
    assert_eq!(empty["todos"], json!([]));
    assert_eq!(empty["summary"]["total"], 0);

    let written = call(
        &env,
        Some(&s),
        "todo",
        json!({"todos": [
            {"id": "1", "content": "Read the code", "status": "completed"},
            {"id": "2", "content": "Write the fix", "status": "pending"},
            {"id": "3", "content": "Run the tests", "status": "in_progress"},
        ]}),
    );
    assert_eq!(
        written["summary"],
        json!({"total": 3, "pending": 1, "in_progress": 1, "completed": 1, "cancelled": 0})
    );
    // The item in progress is lifted ahead of the pending one before it.
    let order: Vec<&str> = written["todos"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    assert_eq!(order, ["1", "3", "2"]);

    // Merge: update by id (status only), append new, keep the rest. The alias works too.
    let merged = call(
        &env,
        Some(&s),
        "todo_list",
        json!({"merge": true, "todos": [
            {"id": "3", "status": "completed"},
            {"id": "4", "content": "Open a pull request"},
        ]}),
    );
    assert_eq!(
        merged["summary"],
        json!({"total": 4, "pending": 2, "in_progress": 0, "completed": 2, "cancelled": 0})
    );
    assert_eq!(
        merged["todos"][3],
        json!({"id": "4", "content": "Open a pull request", "status": "pending"})
    );
    assert!(merged["revision"].as_u64().unwrap() >= 2);

    // Two in progress: the first keeps it, the other is set back, with a warning.
    let two = call(
        &env,
        Some(&s),
        "todo",
        json!({"merge": true, "todos": [
            {"id": "2", "status": "in_progress"}, {"id": "4", "status": "in_progress"},
        ]}),
    );
    assert_eq!(two["summary"]["in_progress"], 1);
    assert!(
        two["_warning"]
            .as_str()
            .unwrap()
            .contains("only one item may be in progress"),
        "{two}"
    );

    // Replace (merge false) drops items not listed; duplicate ids keep the last.
    let replaced = call(
        &env,
        Some(&s),
        "todo",
        json!({"todos": [
            {"id": "a", "content": "first", "status": "pending"},
            {"id": "a", "content": "second", "status": "cancelled"},
        ]}),
    );
    assert_eq!(
        replaced["todos"],
        json!([{"id": "a", "content": "second", "status": "cancelled"}])
    );
    assert_eq!(replaced["summary"]["cancelled"], 1);

    // Bad input: unknown status (schema), empty id, new item without content, too many.
    let bad_status = call(
        &env,
        Some(&s),
        "todo",
        json!({"todos": [{"id": "x", "content": "c", "status": "done"}]}),
    );
    assert!(bad_status["error"].is_string(), "{bad_status}");
    let no_id = call(
        &env,
        Some(&s),
        "todo",
        json!({"todos": [{"id": " ", "content": "c"}]}),
    );
    assert!(no_id["error"].as_str().unwrap().contains("non-empty `id`"));
    assert_eq!(
        no_id["todos"].as_array().unwrap().len(),
        1,
        "a bad write changes nothing and shows the list"
    );
    let no_content = call(
        &env,
        Some(&s),
        "todo",
        json!({"merge": true, "todos": [{"id": "new"}]}),
    );
    assert!(
        no_content["error"]
            .as_str()
            .unwrap()
            .contains("needs `content`")
            || no_content["error"].as_str().unwrap().contains("no content")
    );
    let many: Vec<Value> = (0..257)
        .map(|n| json!({"id": n.to_string(), "content": "step"}))
        .collect();
    let too_many = call(&env, Some(&s), "todo", json!({"todos": many}));
    assert!(
        too_many["error"].as_str().unwrap().contains("at most 256"),
        "{too_many}"
    );
    let long = call(
        &env,
        Some(&s),
        "todo",
        json!({"todos": [{"id": "l", "content": "x".repeat(5000)}]}),
    );
    assert_eq!(long["todos"][0]["content"].as_str().unwrap().len(), 4000);
    assert!(long["_warning"].as_str().unwrap().contains("4000"));

    // Each session has its own list.
    let other = session(&env, SessionOptions::default());
    assert_eq!(
        call(&env, Some(&other), "todo", json!({}))["summary"]["total"],
        0
    );
}

#[test]
fn memory_tool_actions_and_bad_input() {
    let env = env();
    let s = session(&env, SessionOptions::default());
    let added = call(
        &env,
        Some(&s),
        "memory",
        json!({"target": "memory", "action": "add", "content": "Uses cargo nextest"}),
    );
    assert_eq!(added["success"], true, "{added}");
    let user = call(
        &env,
        Some(&s),
        "memory",
        json!({"target": "user", "action": "add", "content": "Likes terse answers"}),
    );
    assert_eq!(user["success"], true);
    assert!(env.home.path().join("memories/USER.md").exists());
    let batch = call(
        &env,
        Some(&s),
        "memory",
        json!({"target": "memory", "operations": [
            {"action": "add", "content": "CI runs .ci/run"},
            {"action": "replace", "old_text": "nextest", "content": "Uses cargo test"},
        ]}),
    );
    assert_eq!(batch["success"], true, "{batch}");
    assert_eq!(batch["entry_count"], 2);
    let removed = call(
        &env,
        Some(&s),
        "memory",
        json!({"target": "memory", "action": "remove", "old_text": "CI runs"}),
    );
    assert_eq!(removed["entry_count"], 1);

    let full = call(
        &env,
        Some(&s),
        "memory",
        json!({"target": "memory", "action": "add", "content": "z".repeat(2300)}),
    );
    assert_eq!(full["success"], false);
    assert!(full["error"].as_str().unwrap().contains("2200"), "{full}");
    assert!(full["usage"].as_str().unwrap().contains("/2200 chars"));

    let both = call(
        &env,
        Some(&s),
        "memory",
        json!({"target": "memory", "action": "add", "content": "x", "operations": []}),
    );
    assert!(both["error"].as_str().unwrap().contains("not both"));
    let neither = call(&env, Some(&s), "memory", json!({"target": "memory"}));
    assert!(neither["error"].as_str().unwrap().contains("nothing to do"));
    let bad_target = call(
        &env,
        Some(&s),
        "memory",
        json!({"target": "notes", "action": "add", "content": "x"}),
    );
    assert!(bad_target["error"].is_string(), "{bad_target}");
}

#[test]
fn session_search_reads_the_sessions_store() {
    let env = env();
    let past = session(
        &env,
        SessionOptions {
            id: Some("past".into()),
            title: Some("Fixing the flaky test".into()),
            ..Default::default()
        },
    );
    past.record(&hermes_agent::NewMessage::new(
        "user",
        "The websocket test is flaky on CI",
    ));
    past.record(&hermes_agent::NewMessage::new(
        "assistant",
        "It races the server start; added a readiness wait",
    ));
    let now = session(
        &env,
        SessionOptions {
            id: Some("now".into()),
            ..Default::default()
        },
    );
    now.record(&hermes_agent::NewMessage::new(
        "user",
        "is the websocket test fixed?",
    ));

    let found = call(
        &env,
        Some(&now),
        "session_search",
        json!({"query": "websocket"}),
    );
    assert_eq!(
        found["count"], 1,
        "the current session is not searched: {found}"
    );
    assert_eq!(found["results"][0]["session_id"], "past");
    assert_eq!(found["results"][0]["title"], "Fixing the flaky test");
    let anchor = found["results"][0]["match_message_id"].as_i64().unwrap();
    let scrolled = call(
        &env,
        Some(&now),
        "session_search",
        json!({"session_id": "past", "around_message_id": anchor, "window": 1}),
    );
    assert_eq!(scrolled["mode"], "scroll");
    assert_eq!(
        scrolled["messages_after"][0]["content"],
        "It races the server start; added a readiness wait"
    );
    let browse = call(&env, Some(&now), "session_search", json!({}));
    assert_eq!(browse["mode"], "browse");
    assert_eq!(browse["sessions"][0]["session_id"], "past");
    let bad = call(
        &env,
        Some(&now),
        "session_search",
        json!({"query": "websocket AND ("}),
    );
    assert_eq!(bad["success"], true);
    assert!(bad["query_note"].is_string(), "{bad}");
    let no_session = call(
        &env,
        Some(&now),
        "session_search",
        json!({"around_message_id": 3}),
    );
    assert_eq!(no_session["success"], false);
    let wrong_type = call(&env, Some(&now), "session_search", json!({"limit": "many"}));
    assert!(wrong_type["error"].is_string(), "{wrong_type}");
}

/// A channel that answers from a script and remembers what it was asked.
struct Scripted {
    asked: Mutex<Vec<ClarifyRequest>>,
    reply: Result<ClarifyReply, String>,
}

impl ClarifyChannel for Scripted {
    fn ask(
        &self,
        request: &ClarifyRequest,
        _timeout: Duration,
        _cancel: &Cancellation,
    ) -> Result<ClarifyReply, String> {
        self.asked.lock().unwrap().push(request.clone());
        self.reply.clone()
    }
}

#[test]
fn clarify_asks_through_the_sessions_channel() {
    let env = env();
    let channel = Arc::new(Scripted {
        asked: Mutex::new(Vec::new()),
        reply: Ok(ClarifyReply::Answer(json!("staging"))),
    });
    let s = session(
        &env,
        SessionOptions {
            clarify: Some(channel.clone()),
            ..Default::default()
        },
    );
    let result = call(
        &env,
        Some(&s),
        "clarify",
        json!({"question": "Which environment?", "choices": ["staging", "production"]}),
    );
    assert_eq!(
        result,
        json!({"question": "Which environment?", "choices_offered": ["staging", "production"], "user_response": "staging"})
    );
    assert_eq!(channel.asked.lock().unwrap()[0].session_id, s.id());

    let five = call(
        &env,
        Some(&s),
        "clarify",
        json!({"question": "Pick", "choices": ["a", "b", "c", "d", "e"]}),
    );
    assert_eq!(five["choices_offered"].as_array().unwrap().len(), 4);
    assert!(five["_warning"].as_str().unwrap().contains("dropped"));
    let empty = call(&env, Some(&s), "clarify", json!({"question": "  "}));
    assert!(empty["error"]
        .as_str()
        .unwrap()
        .contains("question is empty"));
    let missing = call(&env, Some(&s), "clarify", json!({}));
    assert!(missing["error"].is_string());

    let timed_out = Arc::new(Scripted {
        asked: Mutex::new(Vec::new()),
        reply: Ok(ClarifyReply::TimedOut),
    });
    let s = session(
        &env,
        SessionOptions {
            clarify: Some(timed_out),
            ..Default::default()
        },
    );
    let result = call(
        &env,
        Some(&s),
        "clarify",
        json!({"question": "Still there?"}),
    );
    assert_eq!(result["timed_out"], true);
    assert!(result["user_response"]
        .as_str()
        .unwrap()
        .contains("best judgement"));

    // No way to ask (the default): a clear error.
    let headless = session(&env, SessionOptions::default());
    let result = call(
        &env,
        Some(&headless),
        "clarify",
        json!({"question": "Anyone?"}),
    );
    assert!(
        result["error"]
            .as_str()
            .unwrap()
            .contains("clarify is not available"),
        "{result}"
    );
}

#[test]
fn delegate_task_refuses_bad_input_and_the_depth_limit() {
    let env = env();
    let s = session(&env, SessionOptions::default());
    let neither = call(&env, Some(&s), "delegate_task", json!({}));
    assert!(neither["error"]
        .as_str()
        .unwrap()
        .contains("nothing to delegate"));
    let both = call(
        &env,
        Some(&s),
        "delegate_task",
        json!({"goal": "a", "tasks": [{"goal": "b"}]}),
    );
    assert!(both["error"].as_str().unwrap().contains("not both"));
    let empty = call(
        &env,
        Some(&s),
        "delegate_task",
        json!({"tasks": [{"goal": "ok"}, {"goal": " "}]}),
    );
    assert!(
        empty["error"]
            .as_str()
            .unwrap()
            .contains("task 1 has an empty goal"),
        "{empty}"
    );
    let many: Vec<Value> = (0..11).map(|n| json!({"goal": format!("g{n}")})).collect();
    let too_many = call(&env, Some(&s), "delegate_task", json!({"tasks": many}));
    assert!(too_many["error"].as_str().unwrap().contains("at most 10"));

    // A session at the depth limit (a child) cannot delegate.
    let child = session(
        &env,
        SessionOptions {
            depth: 1,
            ..Default::default()
        },
    );
    let refused = call(&env, Some(&child), "delegate_task", json!({"goal": "more"}));
    assert!(
        refused["error"].as_str().unwrap().contains("depth limit"),
        "{refused}"
    );
    assert!(!child
        .definitions()
        .iter()
        .any(|d| d["function"]["name"] == "delegate_task"));
    assert!(s
        .definitions()
        .iter()
        .any(|d| d["function"]["name"] == "delegate_task"));
}
