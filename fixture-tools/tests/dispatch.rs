//! Dispatch, the two error layers, coercion, aliases, agent-loop tools, hooks and
//! budgets, on fixture tools generated like the real ones.

use hermes_fixture_tools::CATALOG;
use hermes_runtime::hooks::{ApprovalGate, CallStatus, PostCall, PreCall, PreDecision, ToolHooks};
use hermes_runtime::{AgentSession, Registry, ToolCall, ToolContext};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};

fn registry() -> (Registry, tempfile::TempDir) {
    let home = tempfile::tempdir().unwrap();
    (
        Registry::with_home(&CATALOG, home.path().to_path_buf()),
        home,
    )
}

fn ctx() -> ToolContext {
    ToolContext::builder().task_id("dispatch-tests").build()
}

fn call(registry: &Registry, name: &str, args: Value) -> Value {
    let text = registry.handle_function_call(&ToolCall::new(name, args), &ctx());
    serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text}"))
}

#[test]
fn handlers_answer_and_errors_are_wrapped_at_level_one() {
    let (registry, _home) = registry();
    assert_eq!(
        call(&registry, "fx_echo", json!({"text": "hi"}))["text"],
        "hi"
    );
    assert_eq!(
        call(&registry, "fx_fail", json!({"message": "boom"}))["error"],
        "[TOOL_ERROR] Tool execution failed: RuntimeError: boom"
    );
    assert_eq!(
        call(&registry, "fx_panic", json!({"message": "kaboom"}))["error"],
        "[TOOL_ERROR] Tool execution failed: panic: kaboom"
    );
    // The registry keeps serving after a panic.
    assert_eq!(call(&registry, "fx_echo", json!({"count": 1}))["count"], 1);
}

#[test]
fn bad_arguments_are_json_errors() {
    let (registry, _home) = registry();
    let missing = call(&registry, "fx_panic", json!({}));
    assert!(
        missing["error"]
            .as_str()
            .unwrap()
            .contains("missing required argument `message`"),
        "{missing}"
    );
    let wrong = call(&registry, "fx_big", json!({"chars": "lots"}));
    assert!(
        wrong["error"]
            .as_str()
            .unwrap()
            .contains("argument `chars`"),
        "{wrong}"
    );
    let not_json = call(&registry, "fx_echo", json!("{not json"));
    assert!(
        not_json["error"]
            .as_str()
            .unwrap()
            .starts_with("[TOOL_ERROR] Error executing fx_echo:"),
        "{not_json}"
    );
    let array = call(&registry, "fx_echo", json!("[1]"));
    assert!(
        array["error"]
            .as_str()
            .unwrap()
            .contains("must be a JSON object"),
        "{array}"
    );
    // null, "" and no arguments all mean {}.
    for empty in [Value::Null, json!(""), json!("null")] {
        assert_eq!(call(&registry, "fx_noop", empty), json!({}));
    }
}

#[test]
fn unknown_tools_get_suggestions() {
    let (registry, _home) = registry();
    let result = call(&registry, "fx_ecko", json!({}));
    assert_eq!(
        result["error"],
        "Unknown tool: fx_ecko. Did you mean: fx_echo?"
    );
    assert_eq!(
        call(&registry, "zzzz", json!({}))["error"],
        "Unknown tool: zzzz"
    );
}

#[test]
fn arguments_are_coerced_against_the_schema() {
    let (registry, _home) = registry();
    let result = call(
        &registry,
        "fx_echo",
        json!({"count": "3", "flag": " TRUE ", "names": "solo"}),
    );
    assert_eq!(
        result,
        json!({"text": null, "count": 3, "flag": true, "names": ["solo"]})
    );
    let kept = call(&registry, "fx_echo", json!({"count": "3.5"}));
    assert!(
        kept["error"].as_str().unwrap().contains("argument `count`"),
        "a fractional count is not silently cut: {kept}"
    );
}

#[test]
fn aliases_run_the_canonical_tool_and_hooks_see_its_name() {
    let (registry, _home) = registry();
    let seen = Arc::new(Mutex::new(Vec::new()));
    struct Recorder(Arc<Mutex<Vec<String>>>);
    impl ToolHooks for Recorder {
        fn pre_tool_call(&self, call: &PreCall<'_>) -> PreDecision {
            self.0.lock().unwrap().push(call.tool_name.to_string());
            PreDecision::Continue
        }
    }
    registry.add_hooks(Arc::new(Recorder(Arc::clone(&seen))));
    assert_eq!(
        call(&registry, "fx_echo_old", json!({"text": "old"}))["text"],
        "old"
    );
    assert_eq!(*seen.lock().unwrap(), vec!["fx_echo".to_string()]);
}

#[test]
fn agent_loop_tools_need_an_agent_session() {
    let (registry, _home) = registry();
    for tool in [
        "todo",
        "memory",
        "session_search",
        "delegate_task",
        "clarify",
    ] {
        let result = call(&registry, tool, json!({}));
        assert!(
            result["error"]
                .as_str()
                .unwrap()
                .starts_with(&format!("{tool} must be handled by the agent loop")),
            "{result}"
        );
    }
    struct Session;
    impl AgentSession for Session {
        fn handle(&self, tool: &str, args: Value, _ctx: &ToolContext) -> Option<String> {
            (tool == "todo").then(|| json!({"todos": [], "args": args}).to_string())
        }
        fn as_any(&self) -> &dyn std::any::Any {
            self
        }
    }
    let ctx = ToolContext::builder()
        .agent_session(Arc::new(Session))
        .build();
    let todo: Value = serde_json::from_str(
        &registry.handle_function_call(&ToolCall::new("todo", json!({"merge": true})), &ctx),
    )
    .unwrap();
    assert_eq!(todo, json!({"todos": [], "args": {"merge": true}}));
    let memory: Value = serde_json::from_str(
        &registry.handle_function_call(&ToolCall::new("memory", json!({})), &ctx),
    )
    .unwrap();
    assert!(memory["error"]
        .as_str()
        .unwrap()
        .contains("not provided by the attached agent session or by any tool"));
}

#[test]
fn error_texts_are_bounded_and_keep_non_ascii() {
    let (registry, _home) = registry();
    let long = "é".repeat(5000);
    let raw = json!({"error": long, "detail": 1}).to_string();
    let result = call(&registry, "fx_raw", json!({"text": raw}));
    let error = result["error"].as_str().unwrap();
    assert_eq!(
        error.chars().count(),
        2048 + "… [truncated]".chars().count()
    );
    assert!(error.ends_with("… [truncated]"));
    assert_eq!(result["detail"], 1);
    let text = hermes_runtime::tool_error("café");
    assert_eq!(text, r#"{"error":"café"}"#);
    let failure = call(&registry, "fx_fail", json!({"message": "x".repeat(3000)}));
    // The sanitiser cuts to 2045 + "...", the prefix pushes it past the cap again, and
    // the final bound marks the cut.
    assert!(failure["error"]
        .as_str()
        .unwrap()
        .ends_with("… [truncated]"));
    assert!(
        failure["error"].as_str().unwrap().chars().count()
            <= 2048 + "… [truncated]".chars().count()
    );
}

#[test]
fn error_sanitiser_strips_protocol_frames() {
    let text = hermes_runtime::dispatch::sanitize_error_text(
        "<tool_call>```json\n{\"a\":1}\n```</tool_call><![CDATA[x]]>",
    );
    assert_eq!(text, "[TOOL_ERROR] \n{\"a\":1}\n");
    let long = hermes_runtime::dispatch::sanitize_error_text(&"y".repeat(3000));
    assert_eq!(long.len(), "[TOOL_ERROR] ".len() + 2045 + 3);
}

/// What a post-call hook saw: tool, status, error text, generation.
type PostRecord = (String, CallStatus, Option<String>, u64);

struct Policy {
    decision: PreDecision,
    posts: Mutex<Vec<PostRecord>>,
    transforms: Mutex<Vec<u64>>,
    replace_with: Option<String>,
}

impl Policy {
    fn new(decision: PreDecision) -> Arc<Policy> {
        Arc::new(Policy {
            decision,
            posts: Mutex::new(Vec::new()),
            transforms: Mutex::new(Vec::new()),
            replace_with: None,
        })
    }
}

impl ToolHooks for Policy {
    fn pre_tool_call(&self, _call: &PreCall<'_>) -> PreDecision {
        self.decision.clone()
    }
    fn post_tool_call(&self, call: &PostCall<'_>) {
        self.posts.lock().unwrap().push((
            call.tool_name.to_string(),
            call.status,
            call.error_type.clone(),
            call.duration_ms,
        ));
    }
    fn transform_result(&self, call: &PostCall<'_>) -> Option<String> {
        self.transforms.lock().unwrap().push(call.duration_ms);
        self.replace_with.clone()
    }
}

#[test]
fn a_blocking_hook_stops_the_call_before_dispatch() {
    let (registry, _home) = registry();
    let policy = Policy::new(PreDecision::Block("Blocked by policy".into()));
    registry.add_hooks(policy.clone());
    let text = registry.handle_function_call(
        &ToolCall::new("fx_panic", json!({"message": "must not run"})),
        &ctx(),
    );
    assert_eq!(text, r#"{"error":"Blocked by policy"}"#);
    let posts = policy.posts.lock().unwrap();
    assert_eq!(posts.len(), 1);
    assert_eq!(posts[0].1, CallStatus::Blocked);
    assert_eq!(posts[0].2.as_deref(), Some("plugin_block"));
    assert!(
        policy.transforms.lock().unwrap().is_empty(),
        "no transform after a block"
    );
}

#[test]
fn blocks_without_a_message_are_ignored_and_block_beats_approve() {
    let (registry, _home) = registry();
    registry.add_hooks(Policy::new(PreDecision::Block("   ".into())));
    assert_eq!(
        call(&registry, "fx_echo", json!({"text": "ran"}))["text"],
        "ran"
    );
    for order in [0, 1] {
        let (registry, _home) = self::registry();
        let approve = Policy::new(PreDecision::Approve {
            message: "ok?".into(),
            rule_key: None,
        });
        let block = Policy::new(PreDecision::Block("no".into()));
        if order == 0 {
            registry.add_hooks(approve);
            registry.add_hooks(block);
        } else {
            registry.add_hooks(block);
            registry.add_hooks(approve);
        }
        assert_eq!(call(&registry, "fx_echo", json!({}))["error"], "no");
    }
}

#[test]
fn modifications_merge_and_approvals_go_through_the_gate() {
    let (registry, _home) = registry();
    let mut changes = serde_json::Map::new();
    changes.insert("text".into(), json!("rewritten"));
    registry.add_hooks(Policy::new(PreDecision::Modify(changes)));
    let result = call(
        &registry,
        "fx_echo",
        json!({"text": "original", "count": 2}),
    );
    assert_eq!(
        (result["text"].clone(), result["count"].clone()),
        (json!("rewritten"), json!(2))
    );

    struct Gate(Result<bool, String>, Mutex<Vec<String>>);
    impl ApprovalGate for Gate {
        fn approve(&self, _tool: &str, _message: &str, rule_key: &str) -> Result<bool, String> {
            self.1.lock().unwrap().push(rule_key.to_string());
            self.0.clone()
        }
    }
    for (answer, expected) in [
        (Ok(true), None),
        (
            Ok(false),
            Some("BLOCKED: plugin approval required for fx_echo: confirm?"),
        ),
        (
            Err("ui gone".to_string()),
            Some("BLOCKED: plugin approval gate failed for fx_echo"),
        ),
    ] {
        let (registry, _home) = self::registry();
        registry.add_hooks(Policy::new(PreDecision::Approve {
            message: "confirm?".into(),
            rule_key: Some("echo-rule".into()),
        }));
        let gate = Arc::new(Gate(answer, Mutex::new(Vec::new())));
        registry.set_approval_gate(Some(gate.clone()));
        let result = call(&registry, "fx_echo", json!({"text": "x"}));
        match expected {
            None => assert_eq!(result["text"], "x"),
            Some(message) => assert_eq!(result["error"], message),
        }
        assert_eq!(*gate.1.lock().unwrap(), vec!["echo-rule".to_string()]);
    }
}

#[test]
fn post_and_transform_hooks_see_one_duration_and_transform_replaces() {
    let (registry, _home) = registry();
    let policy = Arc::new(Policy {
        decision: PreDecision::Continue,
        posts: Mutex::new(Vec::new()),
        transforms: Mutex::new(Vec::new()),
        replace_with: Some("{\"replaced\":true}".into()),
    });
    registry.add_hooks(policy.clone());
    assert_eq!(
        call(&registry, "fx_sleep", json!({"millis": 20})),
        json!({"replaced": true})
    );
    let posts = policy.posts.lock().unwrap();
    assert_eq!(posts[0].1, CallStatus::Ok);
    assert!(posts[0].3 >= 20);
    assert_eq!(*policy.transforms.lock().unwrap(), vec![posts[0].3]);
    drop(posts);
    call(&registry, "fx_fail", json!({"message": "x"}));
    let posts = policy.posts.lock().unwrap();
    assert_eq!(
        (posts[1].1, posts[1].2.as_deref()),
        (CallStatus::Error, Some("tool_error"))
    );
}

#[test]
fn panicking_hooks_are_ignored() {
    struct Broken;
    impl ToolHooks for Broken {
        fn pre_tool_call(&self, _: &PreCall<'_>) -> PreDecision {
            panic!("hook bug")
        }
        fn post_tool_call(&self, _: &PostCall<'_>) {
            panic!("hook bug")
        }
    }
    let (registry, _home) = registry();
    registry.add_hooks(Arc::new(Broken));
    assert_eq!(
        call(&registry, "fx_echo", json!({"text": "fine"}))["text"],
        "fine"
    );
}

#[test]
fn the_thread_whitelist_applies_to_its_thread_only() {
    let (registry, _home) = registry();
    let denied = hermes_runtime::hooks::with_tool_whitelist(["fx_noop".to_string()], || {
        assert_eq!(call(&registry, "fx_noop", json!({})), json!({}));
        std::thread::scope(|s| {
            s.spawn(|| {
                assert_eq!(
                    call(&registry, "fx_echo", json!({"text": "other thread"}))["text"],
                    "other thread"
                )
            });
        });
        call(&registry, "fx_echo", json!({}))
    });
    assert!(
        denied["error"]
            .as_str()
            .unwrap()
            .starts_with("Tool 'fx_echo' denied"),
        "{denied}"
    );
    assert_eq!(
        call(&registry, "fx_echo", json!({"text": "after"}))["text"],
        "after"
    );
}

#[test]
fn oversized_results_are_saved_and_previewed() {
    let (registry, home) = registry();
    let text = registry.handle_function_call(
        &ToolCall {
            tool_call_id: Some("call/7".into()),
            ..ToolCall::new("fx_big", json!({"chars": 5000}))
        },
        &ctx(),
    );
    let spilled: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
    assert_eq!(spilled["persisted_output"], true, "{spilled}");
    assert_eq!(spilled["original_chars"], 5000);
    assert!(
        spilled["hint"]
            .as_str()
            .unwrap()
            .contains("5000 characters"),
        "{spilled}"
    );
    assert_eq!(spilled["preview_truncated"], true);
    assert!(
        spilled["preview"].as_str().unwrap().starts_with("xxx"),
        "{spilled}"
    );
    let path = spilled["path"].as_str().unwrap();
    assert!(
        path.starts_with(home.path().join("cache/spillover").to_str().unwrap()),
        "{path}"
    );
    assert_eq!(std::fs::read_to_string(path).unwrap(), "x".repeat(5000));
    assert!(text.len() < 2500);
    let small =
        registry.handle_function_call(&ToolCall::new("fx_big", json!({"chars": 900})), &ctx());
    assert_eq!(small, "x".repeat(900));
}

#[test]
fn budget_thresholds_follow_the_priority_rules() {
    use hermes_runtime::budget::result_threshold;
    let home = tempfile::tempdir().unwrap();
    let config = hermes_runtime::config::Config::load(home.path());
    assert_eq!(result_threshold("read_file", Some(10), &config), usize::MAX);
    assert_eq!(
        result_threshold("terminal", Some(500_000), &config),
        100_000
    );
    assert_eq!(result_threshold("terminal", Some(1_500), &config), 1_500);
    assert_eq!(result_threshold("mcp_github_search", None, &config), 50_000);
    assert_eq!(result_threshold("other", None, &config), 100_000);
    std::fs::write(
        home.path().join("config.yaml"),
        "tool_budget:\n  mcp_result_size_chars: 7000\n  per_tool:\n    terminal: 1234\n",
    )
    .unwrap();
    let config = hermes_runtime::config::Config::load(home.path());
    assert_eq!(result_threshold("mcp_github_search", None, &config), 7_000);
    assert_eq!(result_threshold("terminal", Some(100_000), &config), 1_234);
}

#[test]
fn contract_errors_for_values_that_are_not_results() {
    use hermes_runtime::{Caller, DynamicHandler, DynamicTool};
    let (registry, _home) = registry();
    for (name, value, type_name) in [
        ("dyn_object", json!({"a": 1}), "dict"),
        ("dyn_null", Value::Null, "NoneType"),
        ("dyn_int", json!(42), "int"),
        ("dyn_list", json!([1]), "list"),
    ] {
        let returned = value.clone();
        let handler = DynamicHandler::Sync(Arc::new(move |_args, _ctx| Ok(returned.clone())));
        let tool = DynamicTool::new(
            name,
            "dyn",
            json!({"description": "returns a value", "parameters": {"type": "object", "properties": {}}}),
            handler,
        );
        registry.register(tool, &Caller::Host, false).unwrap();
        let result = call(&registry, name, json!({}));
        assert_eq!(result["error_type"], "tool_result_contract");
        assert_eq!(result["tool"], name);
        assert_eq!(result["result_type"], type_name);
        assert!(result["error"]
            .as_str()
            .unwrap()
            .contains("unsupported result type"));
        // The contract error is itself a JSON document that nests cleanly.
        let wrapped = json!({"content": result.to_string()}).to_string();
        assert!(serde_json::from_str::<Value>(&wrapped).is_ok());
    }
    let envelope = json!({"_multimodal": true, "content": [{"type": "text", "text": "hi"}]});
    let returned = envelope.clone();
    let handler = DynamicHandler::Sync(Arc::new(move |_args, _ctx| Ok(returned.clone())));
    registry
        .register(
            DynamicTool::new("dyn_image", "dyn", json!({"description": "image"}), handler),
            &Caller::Host,
            false,
        )
        .unwrap();
    assert_eq!(call(&registry, "dyn_image", json!({})), envelope);
    // An image far over any text budget is still attached, not spilled as text.
    let big = json!({"_multimodal": true, "content": [{"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{}", "A".repeat(300_000))}}]});
    let returned = big.clone();
    let handler = DynamicHandler::Sync(Arc::new(move |_args, _ctx| Ok(returned.clone())));
    registry
        .register(
            DynamicTool::new(
                "mcp_cam_snapshot",
                "mcp-cam",
                json!({"description": "image"}),
                handler,
            ),
            &Caller::Host,
            false,
        )
        .unwrap();
    assert_eq!(call(&registry, "mcp_cam_snapshot", json!({})), big);
}
