//! read_file's first page of a 50 MB file against `wc -l` (which must read and count
//! the whole file, as read_file does for `total_lines`) and `head` (which stops after
//! the page), measured in the same run.
//!
//! cargo bench --bench file_read

use hermes_runtime::{Registry, ToolCall, ToolContext};
use serde_json::json;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const RUNS: usize = 30;
const FILE_BYTES: usize = 50 << 20;

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn time(mut run: impl FnMut()) -> Duration {
    run();
    median(
        (0..RUNS)
            .map(|_| {
                let started = Instant::now();
                run();
                started.elapsed()
            })
            .collect(),
    )
}

fn main() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let path = work.path().join("big.txt");
    let mut file = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    let mut written = 0;
    let mut n = 0u64;
    while written < FILE_BYTES {
        let line = format!(
            "{n:>8} the quick brown fox jumps over the lazy dog {}\n",
            n % 977
        );
        written += line.len();
        file.write_all(line.as_bytes()).unwrap();
        n += 1;
    }
    drop(file);

    let registry = Registry::with_home(&hermes_tools::CATALOG, home.path().to_path_buf());
    let mut task = 0u64;
    let ours = time(|| {
        // A fresh task each time: the same task's repeated read would get the dedup stub.
        task += 1;
        let ctx = ToolContext::builder()
            .task_id(format!("bench-read-{task}"))
            .cwd(work.path())
            .build();
        let result = registry.handle_function_call(
            &ToolCall::new("read_file", json!({"path": "big.txt"})),
            &ctx,
        );
        let value: serde_json::Value = serde_json::from_str(&result).unwrap();
        assert_eq!(value["total_lines"], n, "{result}");
    });
    let command = |program: &str, args: &[&str]| {
        time(|| {
            // Its output is taken through a pipe, as read_file's is taken by its caller.
            let output = Command::new(program)
                .args(args)
                .arg(&path)
                .stderr(Stdio::inherit())
                .output()
                .unwrap();
            assert!(output.status.success());
        })
    };
    let wc = command("wc", &["-l"]);
    let head = command("head", &["-n", "500"]);
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "first page (500 lines) of a {} MB file, {n} lines; median of {RUNS}",
        FILE_BYTES >> 20
    );
    println!("{:<40} {:>9.2}ms", "wc -l (baseline)", ms(wc));
    println!(
        "{:<40} {:>9.2}ms  ({:.2}x wc -l)",
        "head -n 500",
        ms(head),
        ms(head) / ms(wc)
    );
    println!(
        "{:<40} {:>9.2}ms  ({:.2}x wc -l, {:.1}x head)",
        "read_file (in process)",
        ms(ours),
        ms(ours) / ms(wc),
        ms(ours) / ms(head)
    );
}
