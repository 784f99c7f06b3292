//! The patch tool's cost on a large file against the floor of any safe edit (read,
//! replace the text, write a temp file, fsync, rename), in the same run; and the
//! time of edits whose size used to make matching blow up.
//!
//! cargo bench --bench file_edit

use hermes_runtime::{Registry, ToolCall, ToolContext};
use serde_json::{json, Value};
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

const RUNS: usize = 15;

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// True when a patch result says it succeeded. A result too large to return whole
/// (the diff of a big edit) is saved to a file and answered with its preview.
fn succeeded(result: &str) -> bool {
    let value: Value = serde_json::from_str(result).unwrap();
    match value.get("preview").and_then(Value::as_str) {
        Some(preview) if value["persisted_output"] == true => preview.starts_with("{\"success\":true"),
        _ => value["success"] == true,
    }
}

/// Read, replace one occurrence, write a temp file beside it, fsync, rename.
fn floor_edit(path: &Path, old: &str, new: &str) {
    let text = std::fs::read_to_string(path).unwrap();
    let updated = text.replacen(old, new, 1);
    let temp = path.with_extension("floor-tmp");
    let mut file = std::fs::File::create(&temp).unwrap();
    file.write_all(updated.as_bytes()).unwrap();
    file.sync_all().unwrap();
    drop(file);
    std::fs::rename(&temp, path).unwrap();
}

fn main() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let registry = Registry::with_home(&hermes_tools::CATALOG, home.path().to_path_buf());
    let ctx = ToolContext::builder().task_id("bench-file-edit").cwd(work.path()).hermes_home(home.path()).build();
    let patch = |args: Value| {
        let result = registry.handle_function_call(&ToolCall::new("patch", args), &ctx);
        assert!(succeeded(&result), "{}", &result[..result.len().min(400)]);
    };

    // 5 MB of code-like lines; each run edits a different line in the middle.
    let lines = 100_000;
    let text: String = (0..lines).map(|i| format!("    let value_{i:06} = compute(\"row {i}\", {i});\n")).collect();
    assert!(text.len() > 5_000_000);
    let big = work.path().join("big.rs");
    let floor_file = work.path().join("floor.rs");
    std::fs::write(&big, &text).unwrap();
    std::fs::write(&floor_file, &text).unwrap();
    let target = |run: usize| format!("let value_{:06} = compute", lines / 2 + run);

    let mut floor = Vec::new();
    let mut ours = Vec::new();
    for run in 0..RUNS {
        let old = target(run);
        let new = old.replace("compute", "calculate");
        let started = Instant::now();
        floor_edit(&floor_file, &old, &new);
        floor.push(started.elapsed());
        let started = Instant::now();
        patch(json!({"path": "big.rs", "old_string": old, "new_string": new}));
        ours.push(started.elapsed());
    }
    let floor = median(floor);
    let ours = median(ours);
    let label = format!("operation ({:.1} MB file, one-line edit)", text.len() as f64 / 1e6);
    println!("{label:<56} {:>10}", "median");
    println!("{:<56} {:>8.2}ms", "read + replace + write + fsync + rename (floor)", ms(floor));
    println!(
        "{:<56} {:>8.2}ms  ({:.2}x floor)",
        "patch, mode replace",
        ms(ours),
        ours.as_secs_f64() / floor.as_secs_f64()
    );

    // A one-hunk V4A patch on the same file.
    let mut v4a = Vec::new();
    for run in 0..RUNS {
        let line = lines / 3 + run;
        let old = format!("    let value_{line:06} = compute(\"row {line}\", {line});");
        let new = old.replace("compute", "calculate");
        let text = format!("*** Begin Patch\n*** Update File: big.rs\n-{old}\n+{new}\n*** End Patch");
        let started = Instant::now();
        patch(json!({"mode": "patch", "patch": text}));
        v4a.push(started.elapsed());
    }
    let v4a = median(v4a);
    println!(
        "{:<56} {:>8.2}ms  ({:.2}x floor)",
        "patch, mode patch (V4A, one hunk)",
        ms(v4a),
        v4a.as_secs_f64() / floor.as_secs_f64()
    );

    // Large old_strings: found at once, and not found (every fallback tried).
    let body: String = (0..3000).map(|i| format!("    value_{i} = compute({i})\n")).collect();
    std::fs::write(work.path().join("mid.py"), format!("def f():\n{body}    return 0\n")).unwrap();
    let started = Instant::now();
    patch(json!({"path": "mid.py", "old_string": body, "new_string": body.replace("compute(", "calc(")}));
    println!("{:<56} {:>8.2}ms", "patch, 90 KB old_string found verbatim", ms(started.elapsed()));
    let off: String = (0..3000).map(|i| format!("value_{i} = compute({})\n", i + 1)).collect();
    let started = Instant::now();
    let result = registry.handle_function_call(
        &ToolCall::new("patch", json!({"path": "mid.py", "old_string": off, "new_string": "x"})),
        &ctx,
    );
    assert!(!succeeded(&result));
    println!("{:<56} {:>8.2}ms", "patch, 90 KB old_string found nowhere", ms(started.elapsed()));
    let close: String = (0..300).map(|i| format!("    value_{i} = compute({})\n", i + 1)).collect();
    let started = Instant::now();
    let _ = registry.handle_function_call(
        &ToolCall::new("patch", json!({"path": "mid.py", "old_string": close, "new_string": "x"})),
        &ctx,
    );
    println!("{:<56} {:>8.2}ms", "patch, 300 near-miss lines (similarity search)", ms(started.elapsed()));
}
