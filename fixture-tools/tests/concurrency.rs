//! The async bridge from every kind of caller, timeouts that cancel, and batches that
//! run what may overlap at once and keep the rest in order.

use hermes_fixture_tools::tools::fixtures::SLOW_CALL_DROPPED;
use hermes_fixture_tools::CATALOG;
use hermes_runtime::{Registry, ToolCall, ToolContext};
use serde_json::{json, Value};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

fn registry() -> (Arc<Registry>, tempfile::TempDir) {
    let home = tempfile::tempdir().unwrap();
    (
        Arc::new(Registry::with_home(&CATALOG, home.path().to_path_buf())),
        home,
    )
}

fn sleep_call(millis: u64) -> ToolCall {
    ToolCall::new("fx_sleep", json!({ "millis": millis }))
}

fn parse(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| panic!("not JSON: {text}"))
}

#[test]
fn async_tools_run_from_a_plain_thread_and_from_worker_threads() {
    let (registry, _home) = registry();
    let ctx = ToolContext::builder().build();
    assert_eq!(
        parse(&registry.handle_function_call(&sleep_call(1), &ctx))["slept_ms"],
        1
    );
    let workers: Vec<_> = (0..3)
        .map(|i| {
            let registry = Arc::clone(&registry);
            std::thread::spawn(move || {
                let ctx = ToolContext::builder()
                    .task_id(format!("worker-{i}"))
                    .build();
                (0..5)
                    .map(|_| {
                        parse(&registry.handle_function_call(&sleep_call(2), &ctx))["slept_ms"]
                            .clone()
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    for worker in workers {
        assert_eq!(worker.join().unwrap(), vec![json!(2); 5]);
    }
}

#[test]
fn async_tools_run_from_inside_a_runtime_of_either_flavour() {
    let (registry, _home) = registry();
    let ctx = ToolContext::builder().build();
    let multi = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let result = multi.block_on(async { registry.handle_function_call(&sleep_call(5), &ctx) });
    assert_eq!(parse(&result)["slept_ms"], 5);
    let current = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let result = current.block_on(async { registry.handle_function_call(&sleep_call(5), &ctx) });
    assert_eq!(parse(&result)["slept_ms"], 5);
}

#[test]
fn a_timeout_returns_an_error_and_cancels_the_handler() {
    let (registry, _home) = registry();
    let ctx = ToolContext::builder().build();
    SLOW_CALL_DROPPED.store(false, Ordering::SeqCst);
    let result = registry.dispatch_with_timeout(
        "fx_sleep",
        json!({"millis": 60_000}),
        &ctx,
        Duration::from_millis(100),
    );
    let error = parse(&result)["error"].as_str().unwrap().to_string();
    assert!(
        error.starts_with(
            "[TOOL_ERROR] Tool execution failed: Timeout: fx_sleep did not finish within 0.1 s"
        ),
        "{error}"
    );
    assert!(
        ctx.cancellation().is_cancelled(),
        "the context's cancellation is raised"
    );
    // The future is dropped on the bridge runtime right after the timeout.
    for _ in 0..100 {
        if SLOW_CALL_DROPPED.load(Ordering::SeqCst) {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        SLOW_CALL_DROPPED.load(Ordering::SeqCst),
        "cancellation reached the handler"
    );
}

#[test]
fn a_batch_runs_reads_together_and_keeps_result_order() {
    let (registry, _home) = registry();
    let ctx = ToolContext::builder().build();
    let calls: Vec<ToolCall> = (0..4)
        .map(|i| {
            ToolCall::new(
                "fx_rendezvous",
                json!({"group": "batch-a", "size": 4, "tag": i}),
            )
        })
        .chain([ToolCall::new("fx_echo", json!({"text": "last"}))])
        .collect();
    let results = registry.handle_batch(&calls, &ctx);
    for result in &results[..4] {
        assert_eq!(
            parse(result)["met"],
            true,
            "all four were inside at once: {result}"
        );
    }
    assert_eq!(parse(&results[4])["text"], "last");
}

#[test]
fn a_batch_serialises_writes_to_one_path_and_exclusive_tools() {
    let (registry, _home) = registry();
    let dir = tempfile::tempdir().unwrap();
    let ctx = ToolContext::builder().cwd(dir.path()).build();
    let calls = vec![
        ToolCall::new("fx_append", json!({"path": "log.txt", "text": "aaaa"})),
        ToolCall::new("fx_append", json!({"path": "./log.txt", "text": "bbbb"})),
        ToolCall::new("fx_append", json!({"path": "other.txt", "text": "cccc"})),
        // An exclusive tool between two rendezvous calls splits them: neither meets.
        ToolCall::new(
            "fx_rendezvous",
            json!({"group": "split", "size": 2, "wait_ms": 300}),
        ),
        ToolCall::new("fx_noop", json!({})),
        ToolCall::new(
            "fx_rendezvous",
            json!({"group": "split", "size": 3, "wait_ms": 300}),
        ),
    ];
    let results = registry.handle_batch(&calls, &ctx);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("log.txt")).unwrap(),
        "aaaabbbb"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("other.txt")).unwrap(),
        "cccc"
    );
    assert_eq!(parse(&results[3])["met"], false);
    assert_eq!(parse(&results[5])["met"], false);
}
