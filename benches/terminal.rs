//! The terminal tool's overhead on the local backend: one `true` through the tool
//! against the same command run with `bash -c` directly, in the same run; and 100
//! short commands in one task.
//!
//! cargo bench --bench terminal

use hermes_runtime::{Registry, ToolCall, ToolContext};
use serde_json::json;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const RUNS: usize = 100;

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn main() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let registry = Registry::with_home(&hermes_tools::CATALOG, home.path().to_path_buf());
    let ctx = ToolContext::builder().task_id("bench-terminal").cwd(work.path()).build();
    let run = |command: &str| {
        let result = registry.handle_function_call(&ToolCall::new("terminal", json!({ "command": command })), &ctx);
        let value: serde_json::Value = serde_json::from_str(&result).unwrap();
        assert_eq!(value["exit_code"], 0, "{result}");
    };
    // The first call starts the task's shell session (snapshot); measure the steady state.
    run("true");

    let direct = median(
        (0..RUNS)
            .map(|_| {
                let started = Instant::now();
                let status = Command::new("bash").args(["-c", "true"]).stdout(Stdio::null()).status().unwrap();
                assert!(status.success());
                started.elapsed()
            })
            .collect(),
    );
    let through_tool = median(
        (0..RUNS)
            .map(|_| {
                let started = Instant::now();
                run("true");
                started.elapsed()
            })
            .collect(),
    );
    println!("{:<48} {:>10}", "operation", "median");
    println!("{:<48} {:>8.2}ms", "bash -c true (baseline)", direct.as_secs_f64() * 1e3);
    println!(
        "{:<48} {:>8.2}ms  ({:.2}x baseline)",
        "terminal tool, `true`, local backend",
        through_tool.as_secs_f64() * 1e3,
        through_tool.as_secs_f64() / direct.as_secs_f64()
    );

    let started = Instant::now();
    for i in 0..100 {
        run(&format!("echo step {i} > /dev/null"));
    }
    let hundred = started.elapsed();
    println!(
        "{:<48} {:>8.2}ms  ({:.2} ms per command)",
        "100 short commands in one task",
        hundred.as_secs_f64() * 1e3,
        hundred.as_secs_f64() * 10.0
    );
}
