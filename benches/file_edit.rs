//! The patch tool's cost on a large file against the floor of any safe edit (read,
//! replace the text, write a temp file, fsync, rename), in the same run; and the
//! time of edits whose size used to make matching blow up, against the floor of
//! those (the same safe edit, plus the Python compile of the syntax check).
//!
//! cargo bench --bench file_edit
//!
//! Each round times the floor and every kind of patch once, one after the other, so a
//! machine that gets busier or quieter during the run moves them all alike; the
//! figures are medians over the rounds.

use hermes_runtime::{Registry, ToolCall, ToolContext};
use serde_json::{json, Value};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const ROUNDS: usize = 15;
/// Rounds of the edits that spawn a Python compile each.
const PYTHON_ROUNDS: usize = 5;
/// Hunks of the spread-out V4A patch.
const SPREAD_HUNKS: usize = 10;

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn timed(f: impl FnOnce()) -> Duration {
    let started = Instant::now();
    f();
    started.elapsed()
}

/// True when a patch result says it succeeded. A result too large to return whole
/// (the diff of a big edit) is saved to a file and answered with its preview.
fn succeeded(result: &str) -> bool {
    let value: Value = serde_json::from_str(result).unwrap();
    match value.get("preview").and_then(Value::as_str) {
        Some(preview) if value["persisted_output"] == true => {
            preview.starts_with("{\"success\":true")
        }
        _ => value["success"] == true,
    }
}

/// Read, replace one occurrence, write a temp file beside it, fsync, rename.
fn floor_edit(path: &Path, old: &str, new: &str) {
    let text = std::fs::read_to_string(path).unwrap();
    let updated = text.replacen(old, new, 1);
    // Every edit of the bench changes the length: a cheap proof that it happened.
    assert_ne!(
        updated.len(),
        text.len(),
        "the floor's edit must change the file"
    );
    let temp = path.with_extension("floor-tmp");
    let mut file = std::fs::File::create(&temp).unwrap();
    file.write_all(updated.as_bytes()).unwrap();
    file.sync_all().unwrap();
    drop(file);
    std::fs::rename(&temp, path).unwrap();
}

/// What the Python syntax check cannot do without: one interpreter compiling the text.
fn python_compile(text: &str) {
    let mut child = Command::new("python3")
        .args(["-I", "-c", "import sys\ncompile(sys.stdin.buffer.read(), '<edited file>', 'exec', dont_inherit=True)"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("python3 runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    assert!(child.wait().unwrap().success());
}

/// The lines of a file the bench patches, kept in step with it so every hunk's
/// context is what the file holds.
struct Model {
    lines: Vec<String>,
}

impl Model {
    fn new(text: &str) -> Model {
        Model {
            lines: text.lines().map(str::to_string).collect(),
        }
    }

    /// A hunk changing line `at` (`compute` and `calculate` swapped), with three lines of
    /// context each side, and the model updated as the file will be.
    fn hunk(&mut self, at: usize) -> String {
        let mut hunk = String::new();
        for line in &self.lines[at - 3..at] {
            hunk.push_str(&format!(" {line}\n"));
        }
        let old = self.lines[at].clone();
        let new = if old.contains("compute") {
            old.replace("compute", "calculate")
        } else {
            old.replace("calculate", "compute")
        };
        hunk.push_str(&format!("-{old}\n+{new}\n"));
        for line in &self.lines[at + 1..at + 4] {
            hunk.push_str(&format!(" {line}\n"));
        }
        self.lines[at] = new;
        hunk
    }
}

fn main() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let registry = Registry::with_home(&hermes_tools::CATALOG, home.path().to_path_buf());
    let ctx = ToolContext::builder()
        .task_id("bench-file-edit")
        .cwd(work.path())
        .hermes_home(home.path())
        .build();
    let patch = |args: Value| {
        let result = registry.handle_function_call(&ToolCall::new("patch", args), &ctx);
        assert!(succeeded(&result), "{}", &result[..result.len().min(400)]);
    };

    // 5 MB of code-like lines, one copy per kind of edit; each round edits other lines.
    let lines = 100_000;
    let text: String = (0..lines)
        .map(|i| format!("    let value_{i:06} = compute(\"row {i}\", {i});\n"))
        .collect();
    assert!(text.len() > 5_000_000);
    for name in [
        "floor.rs",
        "replace.rs",
        "one.rs",
        "spread.rs",
        "anchored.rs",
    ] {
        std::fs::write(work.path().join(name), &text).unwrap();
    }
    let floor_file = work.path().join("floor.rs");
    let mut spread = Model::new(&text);
    let mut anchored = Model::new(&text);
    let mut samples: [Vec<Duration>; 5] = Default::default();
    for round in 0..ROUNDS {
        let old = format!("let value_{:06} = compute", lines / 2 + round);
        let new = old.replace("compute", "calculate");
        samples[0].push(timed(|| floor_edit(&floor_file, &old, &new)));
        samples[1].push(timed(|| {
            patch(json!({"path": "replace.rs", "old_string": old, "new_string": new}))
        }));

        let line = lines / 3 + round;
        let old = format!("    let value_{line:06} = compute(\"row {line}\", {line});");
        let one = format!(
            "*** Begin Patch\n*** Update File: one.rs\n-{old}\n+{}\n*** End Patch",
            old.replace("compute", "calculate")
        );
        samples[2].push(timed(|| patch(json!({"mode": "patch", "patch": one}))));

        // Hunks from the first tenth of the file to its end, 7 lines apart per round.
        let mut text = String::from("*** Begin Patch\n*** Update File: spread.rs\n");
        for hunk in 0..SPREAD_HUNKS {
            text.push_str("@@\n");
            text.push_str(
                &spread.hunk(lines / 10 + hunk * (lines * 8 / 10 / SPREAD_HUNKS) + round * 7),
            );
        }
        text.push_str("*** End Patch");
        samples[3].push(timed(|| patch(json!({"mode": "patch", "patch": text}))));

        // An `@@` anchor (a line of its own) near the end, the change a few lines after it.
        let anchor_line = lines - 1000 + round * 10;
        let anchor = anchored.lines[anchor_line].clone();
        let hunk = anchored.hunk(anchor_line + 4);
        let text = format!(
            "*** Begin Patch\n*** Update File: anchored.rs\n@@ {}\n{hunk}*** End Patch",
            anchor.trim()
        );
        samples[4].push(timed(|| patch(json!({"mode": "patch", "patch": text}))));
    }
    assert_eq!(
        std::fs::read_to_string(work.path().join("spread.rs")).unwrap(),
        spread.lines.join("\n") + "\n"
    );
    assert_eq!(
        std::fs::read_to_string(work.path().join("anchored.rs")).unwrap(),
        anchored.lines.join("\n") + "\n"
    );
    let [floor, replace, one, spread, anchored] = samples.map(median);
    let against_floor = |label: &str, d: Duration| {
        println!(
            "{label:<60} {:>8.2}ms  ({:.2}x floor)",
            ms(d),
            d.as_secs_f64() / floor.as_secs_f64()
        );
    };
    let label = format!(
        "operation ({:.1} MB file, {ROUNDS} rounds)",
        text.len() as f64 / 1e6
    );
    println!("{label:<60} {:>10}", "median");
    println!(
        "{:<60} {:>8.2}ms",
        "read + replace + write + fsync + rename (floor)",
        ms(floor)
    );
    against_floor("patch, mode replace, one line", replace);
    against_floor("patch, mode patch (V4A), one hunk", one);
    against_floor(
        &format!("patch, mode patch (V4A), {SPREAD_HUNKS} hunks spread over the file"),
        spread,
    );
    against_floor(
        "patch, mode patch (V4A), `@@` anchor near the end",
        anchored,
    );

    // Large old_strings in a 3 000-line Python file: found at once (every line changes,
    // is diffed and compiled), and not found (every fallback tried).
    let body: String = (0..3000)
        .map(|i| format!("    value_{i} = compute({i})\n"))
        .collect();
    let changed = body.replace("compute(", "calc(");
    let mid = work.path().join("mid.py");
    let mid_floor = work.path().join("mid_floor.py");
    let source = format!("def f():\n{body}    return 0\n");
    std::fs::write(&mid, &source).unwrap();
    std::fs::write(&mid_floor, &source).unwrap();
    let off: String = (0..3000)
        .map(|i| format!("value_{i} = compute({})\n", i + 1))
        .collect();
    let close: String = (0..300)
        .map(|i| format!("    value_{i} = compute({})\n", i + 1))
        .collect();
    let mut samples: [Vec<Duration>; 4] = Default::default();
    for round in 0..PYTHON_ROUNDS {
        let (from, to) = if round % 2 == 0 {
            (&body, &changed)
        } else {
            (&changed, &body)
        };
        samples[0].push(timed(|| {
            floor_edit(&mid_floor, from, to);
            python_compile(&std::fs::read_to_string(&mid_floor).unwrap());
        }));
        samples[1].push(timed(|| {
            patch(json!({"path": "mid.py", "old_string": from, "new_string": to}))
        }));
        for (index, old) in [(2, &off), (3, &close)] {
            samples[index].push(timed(|| {
                let result = registry.handle_function_call(
                    &ToolCall::new(
                        "patch",
                        json!({"path": "mid.py", "old_string": old, "new_string": "x"}),
                    ),
                    &ctx,
                );
                assert!(!succeeded(&result));
            }));
        }
    }
    let [python_floor, verbatim, nowhere, near_miss] = samples.map(median);
    println!(
        "{:<60} {:>8.2}ms",
        "floor: read + replace + write + fsync + rename + python compile",
        ms(python_floor)
    );
    println!(
        "{:<60} {:>8.2}ms  ({:.2}x floor)",
        "patch, 90 KB old_string found verbatim (3 000 lines changed)",
        ms(verbatim),
        verbatim.as_secs_f64() / python_floor.as_secs_f64()
    );
    println!(
        "{:<60} {:>8.2}ms",
        "patch, 90 KB old_string found nowhere",
        ms(nowhere)
    );
    println!(
        "{:<60} {:>8.2}ms",
        "patch, 300 near-miss lines (similarity search)",
        ms(near_miss)
    );
}
