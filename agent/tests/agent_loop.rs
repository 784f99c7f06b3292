//! The agent loop against a local stand-in for a model endpoint (see support/mod.rs:
//! the server is a scripted fake on 127.0.0.1, not a model). Real endpoints are set
//! with `model.base_url`, `model.name` and `model.api_key_env` in config.yaml.

mod support;

use hermes_agent::{AgentConfig, AgentSession, LoopStatus, SessionOptions};
use hermes_runtime::context::Cancellation;
use hermes_runtime::registry::DynamicTool;
use hermes_runtime::{Caller, Catalog, DynamicHandler, Registry};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{final_answer, tool_calls, Reply, ScriptedModel};

fn no_index(_: &str) -> Option<usize> {
    None
}

/// No static tools: the tests register what they need in the dynamic layer.
static EMPTY: Catalog = Catalog {
    tools: &[],
    checks: &[],
    toolsets: &[],
    legacy_toolsets: &[],
    core_tools: &[],
    tool_index: no_index,
    toolset_index: no_index,
};

struct Fixture {
    _home: tempfile::TempDir,
    registry: Arc<Registry>,
    echo_calls: Arc<AtomicUsize>,
}

fn fixture() -> Fixture {
    let home = tempfile::tempdir().unwrap();
    let registry = Registry::with_home(&EMPTY, home.path().to_path_buf());
    let echo_calls = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&echo_calls);
    let handler = DynamicHandler::Sync(Arc::new(
        move |args: Value, _ctx: &hermes_runtime::ToolContext| {
            counter.fetch_add(1, Ordering::SeqCst);
            Ok(Value::String(json!({"echo": args["text"]}).to_string()))
        },
    ));
    let schema = json!({
        "description": "Echo the text back.",
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    });
    registry
        .register(
            DynamicTool::new("echo", "testing", schema, handler),
            &Caller::Host,
            false,
        )
        .unwrap();
    Fixture {
        _home: home,
        registry: Arc::new(registry),
        echo_calls,
    }
}

fn config(model: &ScriptedModel, timeout: Duration, retries: u32) -> AgentConfig {
    let mut config = AgentConfig::default();
    config.model.base_url = model.base_url.clone();
    config.model.model = "stand-in".into();
    config.model.api_key_env = "HERMES_TEST_NO_SUCH_KEY".into();
    config.model.timeout = timeout;
    config.model.max_retries = retries;
    config.max_iterations = 5;
    config
}

fn session(f: &Fixture, config: AgentConfig) -> Arc<AgentSession> {
    AgentSession::new(
        Arc::clone(&f.registry),
        SessionOptions {
            config: Some(config),
            ..Default::default()
        },
    )
}

#[test]
fn tool_calls_then_a_final_answer() {
    let f = fixture();
    let model = ScriptedModel::script(vec![
        Reply::Json(tool_calls(&[
            ("c1", "echo", json!({"text": "one"})),
            ("c2", "echo", json!({"text": "two"})),
        ])),
        Reply::Json(final_answer("Both echoes came back.")),
    ]);
    let s = session(&f, config(&model, Duration::from_secs(10), 0));
    let outcome = s.run("Echo one and two.");
    assert_eq!(outcome.status, LoopStatus::Completed, "{outcome:?}");
    assert_eq!(
        outcome.final_answer.as_deref(),
        Some("Both echoes came back.")
    );
    assert_eq!(outcome.iterations, 2);
    assert_eq!(outcome.tool_calls, 2);
    assert_eq!(f.echo_calls.load(Ordering::SeqCst), 2);

    // The first request carried the task, the model name and the tool definitions.
    let first = model.request(0);
    assert_eq!(first["model"], "stand-in");
    assert_eq!(
        support::last_message(&first, "user").as_deref(),
        Some("Echo one and two.")
    );
    assert!(support::offered_tools(&first).contains(&"echo".to_string()));
    // The second carried both results, in the calls' order, after the assistant turn.
    let second = model.request(1);
    let messages = second["messages"].as_array().unwrap();
    let n = messages.len();
    assert_eq!(messages[n - 3]["role"], "assistant");
    assert_eq!(messages[n - 3]["tool_calls"][0]["function"]["name"], "echo");
    assert_eq!(messages[n - 2]["tool_call_id"], "c1");
    assert_eq!(
        messages[n - 2]["content"],
        json!({"echo": "one"}).to_string()
    );
    assert_eq!(messages[n - 1]["tool_call_id"], "c2");
    assert_eq!(
        messages[n - 1]["content"],
        json!({"echo": "two"}).to_string()
    );

    // The whole exchange is in the session store.
    assert_eq!(s.store().unwrap().message_count(s.id()), 5);
}

#[test]
fn unknown_tools_and_bad_arguments_become_results_the_model_reads() {
    let f = fixture();
    let model = ScriptedModel::script(vec![
        Reply::Json(tool_calls(&[("c1", "ecko", json!({"text": "x"}))])),
        Reply::Json(
            json!({"choices": [{"message": {"role": "assistant", "tool_calls": [
                {"id": "c2", "type": "function", "function": {"name": "echo", "arguments": "{not json"}}
            ]}}]}),
        ),
        Reply::Json(final_answer("done")),
    ]);
    let s = session(&f, config(&model, Duration::from_secs(10), 0));
    let outcome = s.run("try");
    assert_eq!(outcome.status, LoopStatus::Completed);
    let unknown = support::last_message(&model.request(1), "tool").unwrap();
    assert!(unknown.contains("Unknown tool: ecko"), "{unknown}");
    assert!(
        unknown.contains("echo"),
        "suggests the close name: {unknown}"
    );
    let bad = support::last_message(&model.request(2), "tool").unwrap();
    assert!(bad.contains("not valid JSON"), "{bad}");
    assert_eq!(f.echo_calls.load(Ordering::SeqCst), 0);
}

#[test]
fn a_malformed_reply_stops_the_loop_with_a_clear_error() {
    let f = fixture();
    let model = ScriptedModel::script(vec![Reply::Raw(
        "<html>this is not a completion</html>".into(),
    )]);
    let outcome = session(&f, config(&model, Duration::from_secs(10), 2)).run("anything");
    assert_eq!(outcome.status, LoopStatus::Failed);
    let error = outcome.error.unwrap();
    assert!(
        error.contains("malformed reply") && error.contains("not JSON"),
        "{error}"
    );
    // Malformed replies are not retried.
    assert_eq!(model.request_count(), 1);

    let model = ScriptedModel::script(vec![Reply::Json(json!({"id": "x", "choices": []}))]);
    let outcome = session(&f, config(&model, Duration::from_secs(10), 0)).run("anything");
    assert_eq!(outcome.status, LoopStatus::Failed);
    assert!(outcome.error.unwrap().contains("no `choices`"));
}

#[test]
fn a_500_is_retried_and_then_reported() {
    let f = fixture();
    // One 500, then a good reply: the retry recovers.
    let model = ScriptedModel::script(vec![
        Reply::Status(
            500,
            r#"{"error": {"message": "upstream overloaded"}}"#.into(),
        ),
        Reply::Json(final_answer("recovered")),
    ]);
    let outcome = session(&f, config(&model, Duration::from_secs(10), 2)).run("x");
    assert_eq!(outcome.status, LoopStatus::Completed, "{outcome:?}");
    assert_eq!(outcome.final_answer.as_deref(), Some("recovered"));
    assert_eq!(model.request_count(), 2);

    // Always 500: after 1 + max_retries attempts the loop fails and says why.
    let model = ScriptedModel::respond(|_, _| Reply::Status(500, "internal error".into()));
    let outcome = session(&f, config(&model, Duration::from_secs(10), 1)).run("x");
    assert_eq!(outcome.status, LoopStatus::Failed);
    let error = outcome.error.unwrap();
    assert!(
        error.contains("HTTP 500") && error.contains("internal error"),
        "{error}"
    );
    assert_eq!(model.request_count(), 2);

    // A 400 is the caller's fault: no retry.
    let model = ScriptedModel::respond(|_, _| Reply::Status(400, "bad request".into()));
    let outcome = session(&f, config(&model, Duration::from_secs(10), 3)).run("x");
    assert_eq!(outcome.status, LoopStatus::Failed);
    assert_eq!(model.request_count(), 1);
}

#[test]
fn a_reply_slower_than_the_timeout_fails_in_time() {
    let f = fixture();
    let model = ScriptedModel::respond(|_, _| {
        Reply::Delayed(
            Duration::from_secs(5),
            Box::new(Reply::Json(final_answer("late"))),
        )
    });
    let started = Instant::now();
    let outcome = session(&f, config(&model, Duration::from_millis(500), 0)).run("x");
    assert_eq!(outcome.status, LoopStatus::Failed);
    assert!(
        outcome
            .error
            .as_deref()
            .unwrap()
            .contains("did not answer in time"),
        "{outcome:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "took {:?}",
        started.elapsed()
    );
}

#[test]
fn the_iteration_budget_ends_a_loop_that_never_answers() {
    let f = fixture();
    let model = ScriptedModel::respond(|_, n| {
        Reply::Json(tool_calls(&[(
            &format!("c{n}"),
            "echo",
            json!({"text": "again"}),
        )]))
    });
    let outcome = session(&f, config(&model, Duration::from_secs(10), 0)).run("loop forever");
    assert_eq!(outcome.status, LoopStatus::BudgetExhausted);
    assert_eq!(outcome.iterations, 5);
    assert_eq!(model.request_count(), 5);
    assert!(outcome.error.unwrap().contains("iteration budget of 5"));
}

#[test]
fn an_interrupt_stops_the_loop_during_a_slow_request() {
    let f = fixture();
    let model = ScriptedModel::respond(|_, _| {
        Reply::Delayed(
            Duration::from_secs(5),
            Box::new(Reply::Json(final_answer("late"))),
        )
    });
    let cancel = Cancellation::default();
    let s = AgentSession::new(
        Arc::clone(&f.registry),
        SessionOptions {
            config: Some(config(&model, Duration::from_secs(30), 0)),
            cancel: Some(cancel.clone()),
            ..Default::default()
        },
    );
    let canceller = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        cancel.cancel();
    });
    let started = Instant::now();
    let outcome = s.run("x");
    canceller.join().unwrap();
    assert_eq!(outcome.status, LoopStatus::Interrupted);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "took {:?}",
        started.elapsed()
    );
}

#[test]
fn config_yaml_points_the_loop_at_an_endpoint() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.yaml"),
        "model:\n  base_url: http://127.0.0.1:9/v1\n  name: local-model\n  api_key_env: MY_KEY\n  timeout_seconds: 7\ndelegation:\n  max_concurrent_children: 5\n  max_spawn_depth: 2\n",
    )
    .unwrap();
    let config = AgentConfig::load(home.path());
    assert_eq!(config.model.base_url, "http://127.0.0.1:9/v1");
    assert_eq!(config.model.model, "local-model");
    assert_eq!(config.model.api_key_env, "MY_KEY");
    assert_eq!(config.model.timeout, Duration::from_secs(7));
    assert_eq!(config.max_concurrent_children, 5);
    assert_eq!(config.max_spawn_depth, 2);
    // Missing file: the embedded defaults.
    let defaults = AgentConfig::load(tempfile::tempdir().unwrap().path());
    assert_eq!(defaults, AgentConfig::default());
    assert_eq!(defaults.max_concurrent_children, 3);
    assert_eq!(defaults.max_spawn_depth, 1);
}

#[test]
fn the_api_key_is_sent_as_a_bearer_token() {
    // The stand-in does not record headers; this checks where the key comes from.
    let mut config = AgentConfig::default();
    config.model.api_key_env = "HERMES_AGENT_TEST_KEY_VAR".into();
    std::env::set_var("HERMES_AGENT_TEST_KEY_VAR", "sk-test");
    assert_eq!(config.model.api_key().as_deref(), Some("sk-test"));
    std::env::set_var("HERMES_AGENT_TEST_KEY_VAR", "  ");
    assert_eq!(config.model.api_key(), None);
}
