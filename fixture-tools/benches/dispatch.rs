//! Dispatch overhead and definitions cost, each against a baseline measured in the
//! same run.
//!
//! cargo bench -p hermes-fixture-tools --bench dispatch

use hermes_fixture_tools::CATALOG;
use hermes_runtime::{Registry, ToolCall, ToolContext};
use serde_json::json;
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Median time per iteration over several rounds.
fn measure(iterations: u32, mut work: impl FnMut()) -> Duration {
    let mut rounds: Vec<Duration> = (0..7)
        .map(|_| {
            let started = Instant::now();
            for _ in 0..iterations {
                work();
            }
            started.elapsed() / iterations
        })
        .collect();
    rounds.sort();
    rounds[rounds.len() / 2]
}

fn report(label: &str, time: Duration, baseline: Duration) {
    println!(
        "{label:<58} {:>10.3} µs {:>10.1}x",
        time.as_secs_f64() * 1e6,
        time.as_secs_f64() / baseline.as_secs_f64()
    );
}

fn main() {
    // Fixture probes and schema producers panic on purpose; keep the report readable.
    std::panic::set_hook(Box::new(|_| {}));
    let home = tempfile::tempdir().unwrap();
    let registry = Registry::with_home(&CATALOG, home.path().to_path_buf());
    let ctx = ToolContext::builder().task_id("bench").build();
    let args = json!({"text": "hello", "count": "3", "flag": "true", "names": "solo"});

    // Baseline: what any dispatcher pays at least, parsing the arguments JSON text.
    let arguments_text = args.to_string();
    let baseline = measure(100_000, || {
        black_box(serde_json::from_str::<serde_json::Value>(black_box(&arguments_text)).unwrap());
    });
    println!("{:<58} {:>13} {:>11}", "operation", "time", "x baseline");
    report("baseline: parse the arguments JSON", baseline, baseline);

    let noop = ToolCall::new("fx_noop", json!("{}"));
    report(
        "handle_function_call, no-op sync tool",
        measure(100_000, || {
            black_box(registry.handle_function_call(&noop, &ctx));
        }),
        baseline,
    );

    let echo = ToolCall::new("fx_echo", json!(arguments_text));
    report(
        "handle_function_call, sync tool, 4 args coerced",
        measure(50_000, || {
            black_box(registry.handle_function_call(&echo, &ctx));
        }),
        baseline,
    );

    struct Observer;
    impl hermes_runtime::hooks::ToolHooks for Observer {
        fn post_tool_call(&self, call: &hermes_runtime::hooks::PostCall<'_>) {
            black_box(call.duration_ms);
        }
    }
    let hooked = Registry::with_home(&CATALOG, home.path().to_path_buf());
    hooked.add_hooks(std::sync::Arc::new(Observer));
    report(
        "handle_function_call, no-op sync tool, with a hook",
        measure(100_000, || {
            black_box(hooked.handle_function_call(&noop, &ctx));
        }),
        baseline,
    );

    let async_noop = ToolCall::new("fx_async_noop", json!("{}"));
    report(
        "handle_function_call, no-op async tool, sync caller",
        measure(20_000, || {
            black_box(registry.handle_function_call(&async_noop, &ctx));
        }),
        baseline,
    );

    let caller_runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let from_async = caller_runtime.block_on(async {
        measure(20_000, || {
            black_box(registry.handle_function_call(&async_noop, &ctx));
        })
    });
    report(
        "handle_function_call, no-op async tool, inside a runtime",
        from_async,
        baseline,
    );

    report(
        "definitions, all toolsets, cached",
        measure(5_000, || {
            black_box(registry.definitions::<&str>(None, None));
        }),
        baseline,
    );
    report(
        "definitions, all toolsets, uncached",
        measure(2_000, || {
            registry.invalidate_caches();
            black_box(registry.definitions::<&str>(None, None));
        }),
        baseline,
    );
}
