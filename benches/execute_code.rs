//! What a tool call from an execute_code script costs, against the same call made
//! directly through the registry, measured in the same run.
//!
//! cargo bench --bench execute_code
//!
//! A script with no calls gives the fixed cost of a run (interpreter start, module,
//! socket); a script with CALLS read_file calls gives that plus the calls; the
//! difference divided by CALLS is the cost of one call over the socket, reported next
//! to one direct `handle_function_call` of the same read.
//!
//! And a whole short script, SHORT_CALLS read_file calls, against its floor: a Python
//! process that reads the same files itself.

use hermes_runtime::{Registry, ToolCall, ToolContext};
use hermes_tools::CATALOG;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};

const CALLS: usize = 1000;
const RUNS: usize = 5;
const SHORT_CALLS: usize = 20;
const SHORT_RUNS: usize = 21;

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn main() {
    // The sandbox launcher is the binary's job; an embedder names it.
    hermes_sandbox::launcher::set_program(env!("CARGO_BIN_EXE_hermes-tools"))
        .expect("the launcher program opens");
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.yaml"),
        format!(
            "approvals:\n  unattended_mode: approve\ncode_execution:\n  max_tool_calls: {}\n",
            CALLS * 2
        ),
    )
    .unwrap();
    for n in 0..CALLS {
        std::fs::write(home.path().join(format!("f{n}.txt")), format!("line {n}\n")).unwrap();
    }
    let registry = Arc::new(Registry::with_home(&CATALOG, home.path().to_path_buf()));
    hermes_tools::current::set(&registry, None);
    let run_script = |code: &str, task: &str| -> Duration {
        let ctx = ToolContext::builder()
            .hermes_home(home.path())
            .cwd(home.path())
            .task_id(task.to_string())
            .build();
        let started = Instant::now();
        let result = registry
            .handle_function_call(&ToolCall::new("execute_code", json!({"code": code})), &ctx);
        let elapsed = started.elapsed();
        let parsed: Value = serde_json::from_str(&result).unwrap();
        assert_eq!(parsed["status"], "success", "{parsed}");
        elapsed
    };
    // Each run on a task of its own (read_file answers a second read of an unchanged
    // file in a task differently); its terminal environment (the sandbox's state, the
    // shell snapshot) is made by a first script, not measured, as a session's later
    // scripts find it made.
    let loop_code = format!("from hermes_tools import read_file\nfor n in range({CALLS}):\n    assert 'line' in read_file(f'f{{n}}.txt')['content']\n");
    let (mut empties, mut loops) = (Vec::new(), Vec::new());
    for r in 0..RUNS {
        let task = format!("run-{r}");
        run_script("pass", &task);
        empties.push(run_script("pass", &task));
        loops.push(run_script(&loop_code, &task));
    }
    let (empty, with_calls) = (median(empties), median(loops));
    let direct = median(
        (0..RUNS)
            .map(|r| {
                let ctx = ToolContext::builder()
                    .hermes_home(home.path())
                    .cwd(home.path())
                    .task_id(format!("direct-{r}"))
                    .build();
                let started = Instant::now();
                for n in 0..CALLS {
                    let result = registry.handle_function_call(
                        &ToolCall::new("read_file", json!({"path": format!("f{n}.txt")})),
                        &ctx,
                    );
                    assert!(result.contains("line"));
                }
                started.elapsed()
            })
            .collect(),
    );
    let per_rpc = with_calls.saturating_sub(empty).as_secs_f64() / CALLS as f64;
    let per_direct = direct.as_secs_f64() / CALLS as f64;
    println!(
        "execute_code run with no calls (fixed cost): {:>9.2} ms",
        empty.as_secs_f64() * 1e3
    );
    println!(
        "execute_code run with {CALLS} read_file calls: {:>9.2} ms",
        with_calls.as_secs_f64() * 1e3
    );
    println!(
        "one read_file from a script (over the socket): {:>8.1} us",
        per_rpc * 1e6
    );
    println!(
        "one read_file called directly (baseline):      {:>8.1} us",
        per_direct * 1e6
    );
    println!("script call / direct call: {:.1}x", per_rpc / per_direct);

    // The short script and its floor, alternating, each run on a task of its own.
    let short_code = format!("from hermes_tools import read_file\nfor n in range({SHORT_CALLS}):\n    assert 'line' in read_file(f'f{{n}}.txt')['content']\n");
    let floor_code = format!(
        "for n in range({SHORT_CALLS}):\n    assert 'line' in open(f'f{{n}}.txt').read()\n"
    );
    let (mut shorts, mut floors) = (Vec::new(), Vec::new());
    for r in 0..SHORT_RUNS {
        let task = format!("short-{r}");
        run_script("pass", &task);
        shorts.push(run_script(&short_code, &task));
        let started = Instant::now();
        let status = std::process::Command::new("python3")
            .args(["-c", &floor_code])
            .current_dir(home.path())
            .status()
            .expect("python3 runs");
        floors.push(started.elapsed());
        assert!(status.success());
    }
    let (short, floor) = (median(shorts), median(floors));
    println!(
        "execute_code, {SHORT_CALLS} read_file calls:          {:>9.2} ms",
        short.as_secs_f64() * 1e3
    );
    println!(
        "python3 reading the same {SHORT_CALLS} files (floor):   {:>9.2} ms",
        floor.as_secs_f64() * 1e3
    );
    println!(
        "execute_code / floor: {:.2}x",
        short.as_secs_f64() / floor.as_secs_f64()
    );
}
