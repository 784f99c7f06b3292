//! delegate_task and `hermes-tools agent` against a local STAND-IN for a model endpoint
//! (agent/tests/support/mod.rs: a scripted HTTP server on 127.0.0.1, not a model).
//! A real endpoint is used by setting `model.base_url`, `model.name` and
//! `model.api_key_env` in `$HERMES_HOME/config.yaml`, or `--base-url`/`--model`/
//! `--api-key-env` on the command line.

#[path = "../agent/tests/support/mod.rs"]
mod support;

use hermes_agent::{AgentConfig, AgentSession, LoopStatus, SessionOptions};
use hermes_runtime::Registry;
use hermes_tools::CATALOG;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::{final_answer, last_message, offered_tools, tool_calls, Reply, ScriptedModel};

fn is_child(request: &Value) -> bool {
    request["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .contains("sub-agent")
}

fn has_tool_result(request: &Value) -> bool {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["role"] == "tool")
}

fn config(model: &ScriptedModel) -> AgentConfig {
    let mut config = AgentConfig::default();
    config.model.base_url = model.base_url.clone();
    config.model.model = "stand-in".into();
    config.model.api_key_env = "HERMES_TEST_NO_SUCH_KEY".into();
    config.model.timeout = Duration::from_secs(10);
    config.model.max_retries = 0;
    config.max_iterations = 6;
    config.child_max_iterations = 4;
    config.max_concurrent_children = 2;
    config
}

#[test]
fn delegate_task_runs_children_with_restricted_tools_and_a_concurrency_limit() {
    let home = tempfile::tempdir().unwrap();
    let registry = Arc::new(Registry::with_home(&CATALOG, home.path().to_path_buf()));
    let in_flight = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let child_tools = Arc::new(Mutex::new(Vec::<Vec<String>>::new()));
    let parent_tools = Arc::new(Mutex::new(Vec::<String>::new()));
    let model = {
        let (in_flight, peak, child_tools, parent_tools) = (
            in_flight.clone(),
            peak.clone(),
            child_tools.clone(),
            parent_tools.clone(),
        );
        ScriptedModel::respond(move |request, _| {
            if is_child(request) {
                child_tools.lock().unwrap().push(offered_tools(request));
                let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(now, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(300));
                in_flight.fetch_sub(1, Ordering::SeqCst);
                let goal = last_message(request, "user").unwrap();
                if goal.contains("pears") {
                    return Reply::Status(500, "child endpoint broke".into());
                }
                return Reply::Json(final_answer(&format!(
                    "summary of [{}]",
                    goal.lines().next().unwrap()
                )));
            }
            *parent_tools.lock().unwrap() = offered_tools(request);
            if !has_tool_result(request) {
                let tasks = json!([
                    {"goal": "count apples", "context": "in the basket"},
                    {"goal": "count pears"},
                    {"goal": "count plums"},
                    {"goal": "count figs"},
                ]);
                return Reply::Json(tool_calls(&[(
                    "d1",
                    "delegate_task",
                    json!({"tasks": tasks}),
                )]));
            }
            Reply::Json(final_answer("The parent is done."))
        })
    };
    let session = AgentSession::new(
        Arc::clone(&registry),
        SessionOptions {
            config: Some(config(&model)),
            ..Default::default()
        },
    );
    let outcome = session.run("Count the fruit.");
    assert_eq!(outcome.status, LoopStatus::Completed, "{outcome:?}");
    assert_eq!(outcome.final_answer.as_deref(), Some("The parent is done."));

    // The parent was offered delegate_task, clarify and memory; children none of them.
    let parent = parent_tools.lock().unwrap().clone();
    for tool in ["delegate_task", "clarify", "memory", "todo"] {
        assert!(
            parent.contains(&tool.to_string()),
            "parent lacks {tool}: {parent:?}"
        );
    }
    let children = child_tools.lock().unwrap().clone();
    assert_eq!(children.len(), 4);
    for offered in &children {
        for tool in ["delegate_task", "clarify", "memory"] {
            assert!(
                !offered.contains(&tool.to_string()),
                "a child was offered {tool}: {offered:?}"
            );
        }
        assert!(offered.contains(&"todo".to_string()), "{offered:?}");
    }
    assert!(
        peak.load(Ordering::SeqCst) <= 2,
        "more than 2 children at once"
    );
    assert_eq!(peak.load(Ordering::SeqCst), 2, "children ran in parallel");

    // The tool result the parent got: one entry per task, in order.
    let result: Value = outcome
        .messages
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == "d1")
        .map(|m| serde_json::from_str(m["content"].as_str().unwrap()).unwrap())
        .unwrap();
    let results = result["results"].as_array().unwrap();
    assert_eq!(results.len(), 4);
    for (n, item) in results.iter().enumerate() {
        assert_eq!(item["task_index"], n);
        assert!(item["duration_seconds"].as_f64().unwrap() >= 0.3, "{item}");
    }
    assert_eq!(results[0]["status"], "completed");
    assert_eq!(results[0]["summary"], "summary of [Goal: count apples]");
    assert_eq!(results[1]["status"], "failed");
    assert!(
        results[1]["error"].as_str().unwrap().contains("HTTP 500"),
        "{}",
        results[1]
    );
    assert_eq!(results[1]["summary"], Value::Null);
    assert_eq!(results[3]["summary"], "summary of [Goal: count figs]");
    // 4 children of 0.3 s, 2 at a time: at least 0.6 s in all.
    assert!(
        result["total_duration_seconds"].as_f64().unwrap() >= 0.6,
        "{result}"
    );

    // Child sessions are recorded under their parent and hidden from search.
    let child_id = results[0]["session_id"].as_str().unwrap();
    assert!(child_id.starts_with(session.id()));
    let store = session.store().unwrap();
    assert!(store.message_count(child_id) >= 2);
    let other = AgentSession::new(
        Arc::clone(&registry),
        SessionOptions {
            config: Some(config(&model)),
            ..Default::default()
        },
    );
    let search = store.search(
        &hermes_agent::SearchRequest {
            query: Some("apples".into()),
            ..Default::default()
        },
        other.id(),
    );
    assert_eq!(
        search["count"], 0,
        "sub-agent sessions are hidden: {search}"
    );
}

#[test]
fn a_child_that_calls_a_tool_it_was_not_given_is_refused() {
    let home = tempfile::tempdir().unwrap();
    let registry = Arc::new(Registry::with_home(&CATALOG, home.path().to_path_buf()));
    let model = ScriptedModel::respond(|request, _| {
        if is_child(request) {
            if has_tool_result(request) {
                let refusal = last_message(request, "tool").unwrap();
                return Reply::Json(final_answer(&format!("child saw: {refusal}")));
            }
            return Reply::Json(tool_calls(&[(
                "m1",
                "memory",
                json!({"target": "memory", "action": "add", "content": "x"}),
            )]));
        }
        if has_tool_result(request) {
            return Reply::Json(final_answer(&last_message(request, "tool").unwrap()));
        }
        Reply::Json(tool_calls(&[(
            "d1",
            "delegate_task",
            json!({"goal": "try to write memory"}),
        )]))
    });
    let session = AgentSession::new(
        Arc::clone(&registry),
        SessionOptions {
            config: Some(config(&model)),
            ..Default::default()
        },
    );
    let outcome = session.run("go");
    let result: Value = serde_json::from_str(outcome.final_answer.as_deref().unwrap()).unwrap();
    let summary = result["results"][0]["summary"].as_str().unwrap();
    assert!(
        summary.contains("memory is not available in this session"),
        "{summary}"
    );
    assert!(!home.path().join("memories/MEMORY.md").exists());
}

fn agent_command(home: &std::path::Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_hermes-tools"))
        .arg("agent")
        .args(args)
        .env("HERMES_HOME", home)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn the_agent_command_prints_the_final_answer() {
    let home = tempfile::tempdir().unwrap();
    let model = ScriptedModel::script(vec![
        Reply::Json(tool_calls(&[(
            "t1",
            "todo",
            json!({"todos": [{"id": "1", "content": "answer", "status": "in_progress"}]}),
        )])),
        Reply::Json(final_answer("42")),
    ]);
    let output = agent_command(
        home.path(),
        &[
            "What is six times seven?",
            "--base-url",
            &model.base_url,
            "--model",
            "stand-in",
            "--toolsets",
            "todo",
        ],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "42\n");
    assert!(stderr.contains("→ todo"), "progress on stderr: {stderr}");
    // Only the requested toolset was offered.
    assert_eq!(offered_tools(&model.request(0)), ["todo"]);
    assert_eq!(model.request(0)["model"], "stand-in");
    let todo_result = last_message(&model.request(1), "tool").unwrap();
    assert!(todo_result.contains("\"in_progress\":1"), "{todo_result}");

    // The endpoint from config.yaml, and --json output.
    let model = ScriptedModel::script(vec![Reply::Json(final_answer("from config"))]);
    std::fs::write(
        home.path().join("config.yaml"),
        format!(
            "model:\n  base_url: {}\n  name: configured\n",
            model.base_url
        ),
    )
    .unwrap();
    let output = agent_command(home.path(), &["hello", "--json", "--quiet"]);
    assert!(output.status.success());
    let out: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(out["status"], "completed");
    assert_eq!(out["final_answer"], "from config");
    assert_eq!(model.request(0)["model"], "configured");

    // A malformed reply: exit 1 and the reason on stderr.
    let model = ScriptedModel::script(vec![Reply::Raw("garbage".into())]);
    let output = agent_command(
        home.path(),
        &["hello", "--base-url", &model.base_url, "--quiet"],
    );
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("malformed reply"));
    assert!(output.stdout.is_empty());
}
