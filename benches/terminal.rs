//! The terminal tool's per-call overhead on each backend that runs here, each against a
//! baseline measured in the same run:
//!
//! - local: one `true` through the tool against `bash -c true`, with the OS sandbox on
//!   (`workspace-write`, the default) and off, and 100 short commands; 50 fresh tasks
//!   running `sleep 1` at once, against the same run by the original (hermes-agent on
//!   PyPI) when `HERMES_BENCH_ORIGINAL_PYTHON` names a Python that has it installed;
//! - docker (through podman, with an image imported from the host's binaries): the tool
//!   against `podman exec <container> bash -c true` on the same container;
//! - daytona and vercel_sandbox against their fakes (tests/fakes/): the tool against one
//!   raw API request that runs `true` the cheapest way the API allows;
//! - modal through its SDK bridge and the stand-in SDK module (tests/fakes/modal_standin):
//!   the tool against `bash -c true`.
//!
//! On local and docker also the file tools' per-call cost there: read_file (one line of
//! a 1000-line file, a different line each call so no read is answered from the dedup
//! cache) and write_file of 10 KB, against the terminal tool's `true` in the same task.
//!
//! The remote backends need what `.ci/setup.d/` installs (podman, the test venv); a
//! backend whose peer is missing is reported as skipped.
//!
//! cargo bench --bench terminal [-- local fresh docker daytona vercel_sandbox modal]
//! (or `cargo bench --bench terminal --profile dev` to reuse the test build)

use hermes_runtime::{Registry, ToolCall, ToolContext};
use serde_json::{json, Value};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "support/original_python.rs"]
mod original_python;
#[path = "../tests/sandbox_fakes/mod.rs"]
mod sandbox_fakes;

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn sample(runs: usize, f: impl FnMut()) -> Duration {
    median(timed(runs, f))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// A task of its own on a Hermes home holding `config`.
struct Tool {
    registry: Registry,
    ctx: ToolContext,
    task: String,
    _home: tempfile::TempDir,
}

impl Tool {
    fn new(task: &str, config: &str, cwd: Option<&std::path::Path>) -> Tool {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join("config.yaml"), config).unwrap();
        let registry = Registry::with_home(&hermes_tools::CATALOG, home.path().to_path_buf());
        let mut ctx = ToolContext::builder()
            .task_id(task)
            .hermes_home(home.path());
        if let Some(cwd) = cwd {
            ctx = ctx.cwd(cwd);
        }
        Tool {
            registry,
            ctx: ctx.build(),
            task: task.to_string(),
            _home: home,
        }
    }

    fn call(&self, tool: &str, args: Value) -> Value {
        let result = self
            .registry
            .handle_function_call(&ToolCall::new(tool, args), &self.ctx);
        let value: Value = serde_json::from_str(&result).unwrap();
        assert!(value.get("error").is_none_or(Value::is_null), "{result}");
        value
    }

    fn run(&self, command: &str) -> Value {
        let result = self.registry.handle_function_call(
            &ToolCall::new("terminal", json!({ "command": command })),
            &self.ctx,
        );
        let value: Value = serde_json::from_str(&result).unwrap();
        assert_eq!(value["exit_code"], 0, "{result}");
        value
    }
}

impl Drop for Tool {
    fn drop(&mut self) {
        hermes_tools::tools::terminal::cleanup_task(&self.task);
    }
}

fn report(name: &str, baseline_name: &str, baseline: Duration, tool: Duration) {
    println!("{:<58} {:>9.2}ms", baseline_name, ms(baseline));
    println!(
        "{:<58} {:>9.2}ms  ({:.2}x baseline, +{:.2} ms per call)",
        name,
        ms(tool),
        tool.as_secs_f64() / baseline.as_secs_f64(),
        ms(tool.saturating_sub(baseline))
    );
}

/// Samples `direct` and `true` through the tool, `runs` times each, and reports both.
/// The two alternate in blocks of `BLOCK` calls, so a change in the machine's load
/// during the run weighs on both alike, while within a block the calls still come back
/// to back (the first call of a tool block, after a pause, is one sample in `BLOCK`).
fn compare(tool: &Tool, runs: usize, name: &str, baseline_name: &str, mut direct: impl FnMut()) {
    const BLOCK: usize = 20;
    let (mut baseline, mut through_tool) = (Vec::with_capacity(runs), Vec::with_capacity(runs));
    while baseline.len() < runs {
        let block = BLOCK.min(runs - baseline.len());
        baseline.extend(timed(block, &mut direct));
        through_tool.extend(timed(block, || {
            tool.run("true");
        }));
    }
    report(name, baseline_name, median(baseline), median(through_tool));
}

/// As [`compare`], but each call comes after a pause, as an agent's calls do (the model
/// answers in between): the task's next shell is ready when the call comes.
fn compare_settled(
    tool: &Tool,
    runs: usize,
    name: &str,
    baseline_name: &str,
    mut direct: impl FnMut(),
) {
    const PAUSE: Duration = Duration::from_millis(20);
    let (mut baseline, mut through_tool) = (Vec::with_capacity(runs), Vec::with_capacity(runs));
    for _ in 0..runs {
        std::thread::sleep(PAUSE);
        baseline.extend(timed(1, &mut direct));
        std::thread::sleep(PAUSE);
        through_tool.extend(timed(1, || {
            tool.run("true");
        }));
    }
    report(name, baseline_name, median(baseline), median(through_tool));
}

fn timed(runs: usize, mut f: impl FnMut()) -> Vec<Duration> {
    (0..runs)
        .map(|_| {
            let started = Instant::now();
            f();
            started.elapsed()
        })
        .collect()
}

/// One raw API request to a fake, whose answer must report exit code 0.
fn raw_request(url: &str, token: &str, accept: &str, body: Value) {
    let answer = ureq::post(url)
        .header("Authorization", &format!("Bearer {token}"))
        .header("Accept", accept)
        .send_json(body)
        .unwrap()
        .body_mut()
        .read_to_string()
        .unwrap();
    assert!(answer.contains("\"exitCode\": 0"), "{answer}");
}

/// read_file and write_file in `dir` of the task's environment, against the terminal
/// tool's `true` in the same task.
fn file_tools(tool: &Tool, runs: usize, backend: &str, dir: &str) {
    let lines: String = (0..1000).map(|i| format!("line {i}\n")).collect();
    tool.call(
        "write_file",
        json!({"path": format!("{dir}/bench.txt"), "content": lines}),
    );
    let terminal = sample(runs, || {
        tool.run("true");
    });
    let mut line = 0;
    let read = sample(runs, || {
        line += 1;
        let r = tool.call(
            "read_file",
            json!({"path": format!("{dir}/bench.txt"), "offset": line, "limit": 1}),
        );
        assert_eq!(r["content"], format!("{line}|line {}", line - 1));
    });
    let ten_kb = "x".repeat(10 * 1024);
    let write = sample(runs, || {
        tool.call(
            "write_file",
            json!({"path": format!("{dir}/bench-write.txt"), "content": ten_kb}),
        );
    });
    report(
        &format!("read_file, one line, {backend}"),
        &format!("terminal tool, `true`, {backend} (baseline)"),
        terminal,
        read,
    );
    report(
        &format!("write_file, 10 KB, {backend}"),
        &format!("terminal tool, `true`, {backend} (baseline)"),
        terminal,
        write,
    );
}

fn bash_true() {
    let status = Command::new("bash")
        .args(["-c", "true"])
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
}

/// `terminal.sandbox.mode` values measured on the local backend, with their config.
const LOCAL_MODES: [(&str, &str); 2] = [
    ("workspace-write", ""),
    ("off", "terminal:\n  sandbox:\n    mode: off\n"),
];

fn local() {
    for (mode, config) in LOCAL_MODES {
        let work = tempfile::tempdir().unwrap();
        let tool = Tool::new(&format!("bench-local-{mode}"), config, Some(work.path()));
        // The first call starts the task's shell session (snapshot); measure the steady state.
        tool.run("true");
        compare(
            &tool,
            200,
            &format!("terminal tool, `true`, local, sandbox {mode}"),
            "bash -c true (baseline)",
            bash_true,
        );
        compare_settled(
            &tool,
            60,
            &format!("terminal tool, `true`, sandbox {mode}, 20 ms apart"),
            "bash -c true, 20 ms apart (baseline)",
            bash_true,
        );
        let started = Instant::now();
        for i in 0..100 {
            tool.run(&format!("echo step {i} > /dev/null"));
        }
        let hundred = started.elapsed();
        let name = format!("100 short commands in one task, sandbox {mode}");
        println!(
            "{:<58} {:>9.2}ms  ({:.2} ms per command)",
            name,
            ms(hundred),
            ms(hundred) / 100.0
        );
        if mode == "workspace-write" {
            file_tools(&tool, 100, "local", &work.path().to_string_lossy());
        }
    }
}

const FRESH_TASKS: usize = 50;

/// `FRESH_TASKS` tasks never used before, each running `sleep 1` at the same moment.
fn fresh_tasks(config: &str) -> Duration {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.yaml"), config).unwrap();
    let registry = Registry::with_home(&hermes_tools::CATALOG, home.path().to_path_buf());
    // One call first, so one-time costs of the process (detector rules, sandbox probe)
    // stay out of the figure, as the original's warm-up call keeps its imports out.
    let warm = ToolContext::builder()
        .task_id("bench-fresh-warm")
        .hermes_home(home.path())
        .cwd(work.path())
        .build();
    registry.handle_function_call(
        &ToolCall::new("terminal", json!({ "command": "true" })),
        &warm,
    );
    hermes_tools::tools::terminal::cleanup_task("bench-fresh-warm");
    let started = Instant::now();
    std::thread::scope(|scope| {
        for i in 0..FRESH_TASKS {
            let (registry, home, work) = (&registry, home.path(), work.path());
            scope.spawn(move || {
                let task = format!("bench-fresh-{i}");
                let ctx = ToolContext::builder()
                    .task_id(&task)
                    .hermes_home(home)
                    .cwd(work)
                    .build();
                let result = registry.handle_function_call(
                    &ToolCall::new("terminal", json!({ "command": "sleep 1" })),
                    &ctx,
                );
                let value: Value = serde_json::from_str(&result).unwrap();
                assert_eq!(value["exit_code"], 0, "{result}");
            });
        }
    });
    let elapsed = started.elapsed();
    for i in 0..FRESH_TASKS {
        hermes_tools::tools::terminal::cleanup_task(&format!("bench-fresh-{i}"));
    }
    elapsed
}

/// The original's time for the same run, from benches/original_fresh_tasks.py, with its
/// tasks `shared` on one environment (its default) or `isolated`.
fn original_fresh_tasks(layout: &str) -> Result<Duration, String> {
    let line = original_python::last_line(
        "original_fresh_tasks.py",
        &[FRESH_TASKS.to_string(), layout.to_string()],
    )?;
    let seconds: f64 = line
        .parse()
        .map_err(|_| format!("no time printed: {line}"))?;
    Ok(Duration::from_secs_f64(seconds))
}

fn fresh() {
    let originals: Vec<(&str, Result<Duration, String>)> = ["shared", "isolated"]
        .into_iter()
        .map(|layout| (layout, original_fresh_tasks(layout)))
        .collect();
    for (layout, original) in &originals {
        let name = format!("original, {FRESH_TASKS} fresh tasks, `sleep 1`, {layout} env");
        match original {
            Ok(theirs) => println!("{:<58} {:>9.2}ms", name, ms(*theirs)),
            Err(why) => println!("{name}: skipped ({why})"),
        }
    }
    for (mode, config) in LOCAL_MODES {
        let ours = fresh_tasks(config);
        let name = format!("{FRESH_TASKS} fresh tasks, `sleep 1` at once, sandbox {mode}");
        let ratios: Vec<String> = originals
            .iter()
            .filter_map(|(layout, original)| original.as_ref().ok().map(|t| (layout, t)))
            .map(|(layout, theirs)| {
                format!(
                    "{:.2}x original {layout}",
                    ours.as_secs_f64() / theirs.as_secs_f64()
                )
            })
            .collect();
        println!(
            "{:<58} {:>9.2}ms  ({:.2}x the 1 s floor; {})",
            name,
            ms(ours),
            ours.as_secs_f64(),
            ratios.join(", ")
        );
    }
}

const IMAGE: &str = "localhost/hermes-terminal-bench:latest";

fn docker() -> Result<(), String> {
    let podman = common::which("podman").ok_or("podman not found")?;
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("containers.conf");
    std::fs::write(&conf, "[containers]\ndefault_ulimits = []\n").unwrap();
    std::env::set_var("CONTAINERS_CONF", &conf);
    let rootfs = dir.path().join("rootfs");
    common::build_rootfs(
        &rootfs,
        &[
            "bash",
            "sleep",
            "cat",
            "rm",
            "mkdir",
            "head",
            "env",
            "realpath",
            "stat",
            "dirname",
            "ls",
            "tr",
            "base64",
            "sha256sum",
            "mv",
            "chmod",
            "flock",
        ],
    );
    let import = format!(
        "tar -C {r} -cf {d}/rootfs.tar . && {podman} import {d}/rootfs.tar {IMAGE} >/dev/null",
        r = rootfs.display(),
        d = dir.path().display()
    );
    let out = Command::new("bash")
        .arg("-c")
        .arg(&import)
        .output()
        .unwrap();
    if !out.status.success() {
        return Err(format!(
            "image import failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let tool = Tool::new(
        "bench-docker",
        &format!(
            "terminal:\n  backend: docker\n  docker_binary: {podman}\n  docker_global_args: [\"--runtime\", \"runc\"]\n  \
             docker_run_args: [\"--ulimit\", \"host\"]\n  docker_image: {IMAGE}\n  container_memory: 512\n"
        ),
        None,
    );
    tool.run("true");
    let listed = Command::new(&podman)
        .args(["ps", "-q", "--filter", &format!("ancestor={IMAGE}")])
        .output()
        .unwrap();
    let container = String::from_utf8_lossy(&listed.stdout)
        .lines()
        .next()
        .ok_or("the backend's container is not listed")?
        .to_string();
    compare(
        &tool,
        20,
        "terminal tool, `true`, docker backend (podman)",
        "podman exec <container> bash -c true (baseline)",
        || {
            let status = Command::new(&podman)
                .args([
                    "--runtime",
                    "runc",
                    "exec",
                    &container,
                    "bash",
                    "-c",
                    "true",
                ])
                .stdout(Stdio::null())
                .status()
                .unwrap();
            assert!(status.success());
        },
    );
    file_tools(&tool, 20, "docker", "/tmp");
    drop(tool);
    let _ = Command::new(&podman)
        .args(["rmi", "-f", IMAGE])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    Ok(())
}

fn daytona() -> Result<(), String> {
    let fake = sandbox_fakes::Fake::start("daytona_api.py", &["bench-key"]);
    let tool = Tool::new(
        "bench-daytona",
        &format!("terminal:\n  backend: daytona\n  daytona_api_url: {}/api\n  daytona_api_key: bench-key\n", fake.url),
        None,
    );
    tool.run("true");
    let id = fake.sandboxes()[0]["id"]
        .as_str()
        .ok_or("no sandbox")?
        .to_string();
    let url = format!("{}/toolbox/{id}/process/execute", fake.url);
    let body = json!({"command": "true", "timeout": 30});
    compare(
        &tool,
        20,
        "terminal tool, `true`, daytona backend (fake API)",
        "one raw process/execute of `true` (baseline)",
        || raw_request(&url, "bench-key", "application/json", body.clone()),
    );
    Ok(())
}

fn vercel() -> Result<(), String> {
    let fake = sandbox_fakes::Fake::start("vercel_api.py", &["bench-token", "team_b"]);
    let tool = Tool::new(
        "bench-vercel",
        &format!(
            "terminal:\n  backend: vercel_sandbox\n  vercel_api_url: {}/api\n  vercel_token: bench-token\n  \
             vercel_team_id: team_b\n  vercel_project_id: prj_b\n  cwd: /tmp\n",
            fake.url
        ),
        None,
    );
    tool.run("true");
    let session = fake.sandboxes()[0]["id"]
        .as_str()
        .ok_or("no sandbox")?
        .to_string();
    let url = format!(
        "{}/api/v2/sandboxes/sessions/{session}/cmd?teamId=team_b",
        fake.url
    );
    let body = json!({"command": "true", "args": [], "wait": true, "logs": true, "timeout": 30000});
    compare(
        &tool,
        20,
        "terminal tool, `true`, vercel_sandbox backend (fake API)",
        "one raw waited cmd of `true` (baseline)",
        || raw_request(&url, "bench-token", "application/x-ndjson", body.clone()),
    );
    Ok(())
}

fn modal() -> Result<(), String> {
    let python = hermes_test_peers::venv_dir().join("bin/python3");
    if !python.is_file() {
        return Err(format!("{} missing", python.display()));
    }
    let state = tempfile::tempdir().unwrap();
    std::env::set_var(
        "PYTHONPATH",
        sandbox_fakes::fakes_dir().join("modal_standin"),
    );
    std::env::set_var("MODAL_STANDIN_STATE", state.path());
    let tool = Tool::new(
        "bench-modal",
        &format!(
            "terminal:\n  backend: modal\n  modal_python: {}\n  modal_token_id: ak\n  modal_token_secret: as\n",
            python.display()
        ),
        None,
    );
    tool.run("true");
    compare(
        &tool,
        20,
        "terminal tool, `true`, modal backend (bridge + stand-in SDK)",
        "bash -c true (baseline)",
        bash_true,
    );
    Ok(())
}

fn main() {
    // The sandbox launcher is the binary's job; an embedder names it.
    hermes_sandbox::launcher::set_program(env!("CARGO_BIN_EXE_hermes-tools"))
        .expect("the launcher program opens");
    // `cargo bench --bench terminal -- local fresh` runs only those sections.
    let chosen: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let wanted = |name: &str| chosen.is_empty() || chosen.iter().any(|c| c == name);
    println!("{:<58} {:>11}", "operation", "median");
    if wanted("local") {
        local();
    }
    if wanted("fresh") {
        fresh();
    }
    for (name, bench) in [
        ("docker", docker as fn() -> Result<(), String>),
        ("daytona", daytona),
        ("vercel_sandbox", vercel),
        ("modal", modal),
    ] {
        if !wanted(name) {
            continue;
        }
        if let Err(why) = bench() {
            println!("{name}: skipped ({why})");
        }
    }
}
