//! search_files on a tree of 20 000 files against ripgrep (`rg`) on the same tree, in
//! the same run: content search (`rg -n`) and the paths of matching files (`rg -l`),
//! each as one call through the registry (what `serve` and `mcp` do per call) and as a
//! whole `hermes-tools call` process, against a whole `rg` process.
//!
//! cargo bench --bench file_search
//!
//! Each round times every kind once, one after the other, so a machine that gets
//! busier or quieter during the run moves them all alike; the figures are medians.
//! Without `rg` on PATH the bench says so and stops.
//!
//! With `HERMES_BENCH_ORIGINAL_PYTHON` naming a Python that has hermes-agent 0.19.0, the
//! same searches also go through `hermes-tools serve` and through the original behind
//! the same JSON-lines loop (benches/original_lines.py), at the default `limit` and
//! with every match asked for.

use hermes_runtime::{Registry, ToolCall, ToolContext};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const ROUNDS: usize = 11;
const DIRS: usize = 200;
const FILES_PER_DIR: usize = 100;
/// One file in this many holds the needle.
const NEEDLE_EVERY: usize = 20;
const PATTERN: &str = "needle_[0-9]+";

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// 20 000 source-like files of about 3 KB in 200 folders (a few binary ones, a
/// .gitignore'd folder and a hidden one, as a checkout has), every 20th with a match;
/// returns how many text files match.
fn make_tree(root: &Path) -> usize {
    let mut with_needle = 0;
    for d in 0..DIRS {
        let dir = root.join(format!("pkg{d:03}/src"));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..FILES_PER_DIR {
            let n = d * FILES_PER_DIR + f;
            let mut text = String::with_capacity(3200);
            for line in 0..60 {
                text.push_str(&format!(
                    "    let value_{line:02} = compute(\"row {n} {line}\", {});\n",
                    n * 31 + line
                ));
            }
            // Binary files are skipped by both: a match in one does not count.
            let name = if n.is_multiple_of(997) {
                "blob.bin"
            } else {
                "mod.rs"
            };
            if n.is_multiple_of(NEEDLE_EVERY) {
                text.push_str(&format!("    // needle_{n} is here\n"));
                with_needle += usize::from(name == "mod.rs");
            }
            let path = dir.join(format!("{f:03}_{name}"));
            if name == "blob.bin" {
                let mut bytes = text.into_bytes();
                bytes[10] = 0;
                std::fs::write(path, bytes).unwrap();
            } else {
                std::fs::write(path, text).unwrap();
            }
        }
    }
    // Not searched by either: ignored and hidden places, each with a match.
    std::fs::write(root.join(".gitignore"), "target/\n").unwrap();
    for skipped in ["target", ".cache"] {
        std::fs::create_dir_all(root.join(skipped)).unwrap();
        std::fs::write(root.join(skipped).join("x.rs"), "needle_1\n").unwrap();
    }
    with_needle
}

fn rg(args: &[&str], root: &Path) -> Duration {
    let started = Instant::now();
    let status = Command::new("rg")
        .args(args)
        .arg(PATTERN)
        .arg(root)
        .stdout(Stdio::null())
        .status()
        .expect("rg runs");
    let elapsed = started.elapsed();
    assert!(status.success(), "rg {args:?} found nothing");
    elapsed
}

fn main() {
    if Command::new("rg").arg("--version").output().is_err() {
        eprintln!("rg is not on PATH (apt-get install ripgrep): nothing to compare with");
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let root = work.path();
    let with_needle = make_tree(root);
    let registry = Registry::with_home(&hermes_tools::CATALOG, home.path().to_path_buf());
    let search = |mode: &str, round: usize| {
        // A task per call: the repeat guard would refuse a fourth identical search.
        let ctx = ToolContext::builder()
            .task_id(format!("bench-search-{mode}-{round}"))
            .cwd(root)
            .hermes_home(home.path())
            .build();
        let args = json!({"pattern": PATTERN, "output_mode": mode, "limit": 1000});
        let started = Instant::now();
        let result = registry.handle_function_call(&ToolCall::new("search_files", args), &ctx);
        let elapsed = started.elapsed();
        let value: Value = serde_json::from_str(result.split("\n\n[").next().unwrap())
            .unwrap_or_else(|_| panic!("{}", &result[..result.len().min(400)]));
        let total = value["total_count"].as_u64().unwrap_or(0) as usize;
        let expected = with_needle; // one line per matching file
        assert_eq!(
            total,
            expected,
            "{mode}: {}",
            &result[..result.len().min(400)]
        );
        elapsed
    };
    let binary = env!("CARGO_BIN_EXE_hermes-tools");
    let process = |mode: &str, round: usize| {
        let args = json!({"pattern": PATTERN, "output_mode": mode, "limit": 1000}).to_string();
        let started = Instant::now();
        let out = Command::new(binary)
            .args(["call", "search_files", &args, "--task-id"])
            .arg(format!("bench-process-{mode}-{round}"))
            .current_dir(root)
            .env("HERMES_HOME", home.path())
            .stderr(Stdio::null())
            .output()
            .expect("hermes-tools runs");
        let elapsed = started.elapsed();
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("total_count"),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
        elapsed
    };

    let kinds = [
        "rg -n (content)",
        "search_files content, one call",
        "hermes-tools call search_files content",
        "rg -l (files with matches)",
        "search_files files_only, one call",
        "hermes-tools call search_files files_only",
    ];
    let mut samples: Vec<Vec<Duration>> = vec![Vec::new(); kinds.len()];
    // One warm-up round fills the page cache and the policy cache.
    for round in 0..=ROUNDS {
        let times = [
            rg(&["-n"], root),
            search("content", round),
            process("content", round),
            rg(&["-l"], root),
            search("files_only", round),
            process("files_only", round),
        ];
        if round > 0 {
            for (sample, time) in samples.iter_mut().zip(times) {
                sample.push(time);
            }
        }
    }
    let medians: Vec<Duration> = samples.into_iter().map(median).collect();
    println!(
        "{} files, {with_needle} with a match; {ROUNDS} rounds, medians",
        DIRS * FILES_PER_DIR
    );
    println!("{:<44} {:>10} {:>10}", "", "median", "x rg");
    for (i, kind) in kinds.iter().enumerate() {
        let floor = if i < 3 { medians[0] } else { medians[3] };
        println!(
            "{kind:<44} {:>8.1}ms {:>9.2}x",
            ms(medians[i]),
            medians[i].as_secs_f64() / floor.as_secs_f64()
        );
    }
    if let Some(python) = std::env::var_os("HERMES_BENCH_ORIGINAL_PYTHON") {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/original_lines.py");
        println!("\nthrough JSON lines, one call at a time ({ROUNDS} calls, medians)");
        println!(
            "{:<44} {:>10} {:>10} {:>9}",
            "", "ours", "original", "ratio"
        );
        for (mode, limit) in [
            ("content", 50),
            ("files_only", 50),
            ("content", 1000),
            ("files_only", 1000),
        ] {
            let args =
                json!({"pattern": PATTERN, "path": root, "output_mode": mode, "limit": limit});
            let mut ours = Command::new(binary);
            ours.arg("serve").env("HERMES_HOME", home.path());
            let mut original = Command::new(&python);
            original
                .arg(script)
                .env("HERMES_HOME", work.path().join("original-home"))
                .env("TERMINAL_CWD", root);
            let ours = median(json_lines(ours, root, &args));
            let theirs = median(json_lines(original, root, &args));
            println!(
                "{:<44} {:>8.1}ms {:>8.1}ms {:>8.2}x",
                format!("search_files {mode}, limit {limit}"),
                ms(ours),
                ms(theirs),
                ours.as_secs_f64() / theirs.as_secs_f64()
            );
        }
    }
}

/// `ROUNDS` calls of search_files with `args` (each in a task of its own: the repeat
/// guard) through a JSON-lines loop started by `command`, one at a time after one
/// warm-up call; the time of each.
fn json_lines(mut command: Command, root: &Path, args: &Value) -> Vec<Duration> {
    let mut child = command
        .current_dir(root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the JSON-lines loop starts");
    let mut input = child.stdin.take().unwrap();
    let mut output = BufReader::new(child.stdout.take().unwrap());
    let mut times = Vec::new();
    for call in 0..=ROUNDS {
        let line = json!({
            "id": format!("c{call}"),
            "task_id": format!("bench-lines-{call}"),
            "function": {"name": "search_files", "arguments": args.to_string()},
        });
        let started = Instant::now();
        writeln!(input, "{line}").unwrap();
        input.flush().unwrap();
        let mut answer = String::new();
        output.read_line(&mut answer).unwrap();
        let elapsed = started.elapsed();
        assert!(answer.contains("total_count"), "{answer}");
        if call > 0 {
            times.push(elapsed);
        }
    }
    drop(input);
    let _ = child.wait();
    times
}
