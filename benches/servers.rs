//! The long-running servers against their floors, measured in the same run:
//!
//! - a `serve` call, one at a time, against the same JSON line sent round trip through
//!   `cat`: a trivial call (`process` `list`, answered from memory: the runtime's own
//!   cost), and a read_file of a three-line file that the task has not read before (one
//!   file per call, so every call reads and pages a file instead of answering with the
//!   repeated-read stub);
//! - an MCP `tools/call` over stdio (`hermes-tools mcp`), one at a time, against a
//!   server that answers every request with a fixed reply (this binary, re-run as
//!   `--fixed-reply-server`): the same trivial call, and read_file calls, also made
//!   through the registry in this process (the tool's own cost), to tell the protocol's
//!   share from the tool's;
//! - serve's RSS after 1k, 10k and 100k calls (pipelined), and the growth per 10k.
//!
//! cargo bench --bench servers

#[path = "support/line_peer.rs"]
mod line_peer;

use line_peer::{mcp_initialize, mcp_line, rss_kb, Peer};
use serde_json::{json, Value};
use std::io::{BufRead, Write};
use std::process::{ChildStdin, Command};
use std::time::{Duration, Instant};

const ROUND_TRIPS: usize = 5_000;
const WARM_UP: usize = 200;

/// Median time of one round trip: the first [`WARM_UP`] lines warm up, the next
/// [`ROUND_TRIPS`] (cycling when there are fewer) are timed.
fn median_round_trip(peer: &mut Peer, lines: &[String]) -> Duration {
    line_peer::median_round_trip(peer, lines, WARM_UP, ROUND_TRIPS, |_| {})
}

fn serve_calls(count: usize, from: usize) -> Vec<String> {
    (from..from + count)
        .map(|n| {
            let args = json!({"path": "small.txt", "offset": 1 + n % 3}).to_string();
            format!("{}\n", json!({"id": format!("c{n}"), "type": "function", "function": {"name": "read_file", "arguments": args}, "task_id": format!("t{}", n % 8)}))
        })
        .collect()
}

/// Calls the runtime answers from memory: the task's background processes (none).
fn trivial_calls(count: usize) -> Vec<String> {
    let args = json!({"action": "list"}).to_string();
    (0..count)
        .map(|n| format!("{}\n", json!({"id": format!("c{n}"), "type": "function", "function": {"name": "process", "arguments": args}, "task_id": format!("t{}", n % 8)})))
        .collect()
}

/// One first read per call: `count` three-line files, `fresh/N.txt`, each read once.
fn fresh_read_calls(work: &std::path::Path, count: usize) -> Vec<String> {
    let dir = work.join("fresh");
    std::fs::create_dir_all(&dir).unwrap();
    (0..count)
        .map(|n| {
            let name = format!("fresh/{n}.txt");
            std::fs::write(work.join(&name), format!("one {n}\ntwo\nthree\n")).unwrap();
            let args = json!({"path": name}).to_string();
            format!("{}\n", json!({"id": format!("c{n}"), "type": "function", "function": {"name": "read_file", "arguments": args}, "task_id": format!("t{}", n % 8)}))
        })
        .collect()
}

fn serve_command(binary: &str, home: &std::path::Path, work: &std::path::Path) -> Command {
    let mut command = Command::new(binary);
    command
        .arg("serve")
        .env("HERMES_HOME", home)
        .current_dir(work);
    command
}

/// Sends `count` calls pipelined (a writer thread) and reads every answer.
fn pipelined(peer: &mut Peer, count: usize, from: usize) {
    let lines = serve_calls(count, from);
    let mut stdin = peer.stdin.try_clone_handle();
    let writer = std::thread::spawn(move || {
        for chunk in lines.chunks(256) {
            stdin.write_all(chunk.concat().as_bytes()).unwrap();
        }
        stdin.flush().unwrap();
    });
    for _ in 0..count {
        peer.line.clear();
        peer.stdout.read_line(&mut peer.line).unwrap();
    }
    writer.join().unwrap();
}

trait CloneHandle {
    fn try_clone_handle(&self) -> std::fs::File;
}

impl CloneHandle for ChildStdin {
    fn try_clone_handle(&self) -> std::fs::File {
        use std::os::fd::{AsFd, OwnedFd};
        let fd: OwnedFd = self.as_fd().try_clone_to_owned().unwrap();
        std::fs::File::from(fd)
    }
}

/// The floor for an MCP round trip: parse the request, answer a fixed result.
fn fixed_reply_server() {
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        let Ok(request) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let Some(id) = request.get("id") else {
            continue;
        };
        let reply = json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": "{\"content\": \"1|one\\n\"}"}], "isError": false}});
        writeln!(stdout, "{reply}").unwrap();
        stdout.flush().unwrap();
    }
}

fn mcp_calls(from: u64) -> Vec<String> {
    (0..64).map(|n| mcp_line(from + n, "tools/call", json!({"name": "read_file", "arguments": {"path": "small.txt", "offset": 1 + n % 3}}))).collect()
}

/// Median time of the calls of [`mcp_calls`] made in this process: the same task for
/// all, as the MCP session's, so the file tool answers as it does over MCP.
fn in_process_median(home: &std::path::Path, work: &std::path::Path) -> Duration {
    use hermes_tools::runtime::{Registry, ToolCall, ToolContext};
    let registry = Registry::with_home(&hermes_tools::CATALOG, home.to_path_buf());
    let ctx = ToolContext::builder()
        .task_id("bench-in-process")
        .cwd(work)
        .build();
    let calls: Vec<ToolCall> = (0..64)
        .map(|n| {
            ToolCall::new(
                "read_file",
                json!({"path": "small.txt", "offset": 1 + n % 3}),
            )
        })
        .collect();
    for call in calls.iter().take(200) {
        registry.handle_function_call(call, &ctx);
    }
    let mut samples = Vec::with_capacity(ROUND_TRIPS);
    for call in calls.iter().cycle().take(ROUND_TRIPS) {
        let started = Instant::now();
        std::hint::black_box(registry.handle_function_call(call, &ctx));
        samples.push(started.elapsed());
    }
    samples.sort();
    samples[ROUND_TRIPS / 2]
}

fn main() {
    if std::env::args().any(|a| a == "--fixed-reply-server") {
        return fixed_reply_server();
    }
    let binary = env!("CARGO_BIN_EXE_hermes-tools");
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("small.txt"), "one\ntwo\nthree\n").unwrap();
    // One more than are timed: the first checks that the answer is a real read.
    let calls = fresh_read_calls(work.path(), 1 + WARM_UP + ROUND_TRIPS);

    let trivial = trivial_calls(WARM_UP + ROUND_TRIPS);
    let mut cat = Peer::start(&mut Command::new("cat"));
    let cat_median = median_round_trip(&mut cat, &calls[1..]);
    let cat_trivial_median = median_round_trip(&mut cat, &trivial);
    cat.finish();
    let mut serve = Peer::start(&mut serve_command(binary, home.path(), work.path()));
    let serve_trivial_median = median_round_trip(&mut serve, &trivial);
    assert!(
        serve.line.contains(r#"\"processes\":[]"#),
        "the trivial call is answered: {}",
        serve.line
    );
    serve.finish();
    let mut serve = Peer::start(&mut serve_command(binary, home.path(), work.path()));
    let first_answer = serve.round_trip(&calls[0]).to_string();
    assert!(
        first_answer.contains(r#"\"content\":\"1|one 0\\n2|two"#),
        "read_file reads the file: {first_answer}"
    );
    let serve_median = median_round_trip(&mut serve, &calls[1..]);
    assert!(
        serve.line.contains(r#"\"content\":\"1|one "#),
        "the last timed call read its file too: {}",
        serve.line
    );
    serve.finish();
    println!("trivial: `process` `list` (from memory); read_file: a 3-line file this task has not read before, one file per call (task t0..t7)");
    println!(
        "{:<46} {:>10} {:>10} {:>8}",
        "one call at a time", "median", "floor", "ratio"
    );
    let report = |label: &str, ours: Duration, floor: Duration| {
        println!(
            "{:<46} {:>8.1}µs {:>8.1}µs {:>7.2}x",
            label,
            ours.as_secs_f64() * 1e6,
            floor.as_secs_f64() * 1e6,
            ours.as_secs_f64() / floor.as_secs_f64()
        );
    };
    report(
        "serve trivial call vs the line through cat",
        serve_trivial_median,
        cat_trivial_median,
    );
    report(
        "serve read_file vs the line through cat",
        serve_median,
        cat_median,
    );

    let me = std::env::current_exe().unwrap();
    let mut fixed = Peer::start(Command::new(&me).arg("--fixed-reply-server"));
    mcp_initialize(&mut fixed);
    let fixed_median = median_round_trip(&mut fixed, &mcp_calls(1));
    fixed.finish();
    let mut mcp = Peer::start(
        Command::new(binary)
            .args(["mcp", "--toolsets", "file,terminal"])
            .env("HERMES_HOME", home.path())
            .current_dir(work.path()),
    );
    mcp_initialize(&mut mcp);
    let mcp_trivial: Vec<String> = (1..65)
        .map(|n| {
            mcp_line(
                n,
                "tools/call",
                json!({"name": "process", "arguments": {"action": "list"}}),
            )
        })
        .collect();
    let mcp_trivial_median = median_round_trip(&mut mcp, &mcp_trivial);
    assert!(
        mcp.line.contains(r#"\"processes\":[]"#),
        "the trivial call is answered: {}",
        mcp.line
    );
    let mcp_median = median_round_trip(&mut mcp, &mcp_calls(1));
    mcp.finish();
    report(
        "mcp trivial tools/call vs a fixed-reply server",
        mcp_trivial_median,
        fixed_median,
    );
    report(
        "mcp read_file tools/call vs a fixed-reply server",
        mcp_median,
        fixed_median,
    );
    let tool_median = in_process_median(home.path(), work.path());
    println!(
        "{:<46} {:>8.1}µs",
        "the same read_file in process (the tool)",
        tool_median.as_secs_f64() * 1e6
    );
    report(
        "mcp tools/call less the tool vs fixed reply",
        mcp_median.saturating_sub(tool_median),
        fixed_median,
    );

    let mut serve = Peer::start(&mut serve_command(binary, home.path(), work.path()));
    pipelined(&mut serve, 1_000, 0);
    let at_1k = rss_kb(&serve);
    pipelined(&mut serve, 9_000, 1_000);
    let at_10k = rss_kb(&serve);
    pipelined(&mut serve, 90_000, 10_000);
    let at_100k = rss_kb(&serve);
    serve.finish();
    println!();
    println!("serve RSS after 1k calls {at_1k} kB, 10k {at_10k} kB, 100k {at_100k} kB");
    println!(
        "growth 1k→100k: {} kB ({:.1} kB per 10k calls); target: within 10 MB",
        at_100k as i64 - at_1k as i64,
        (at_100k as f64 - at_1k as f64) / 9.9
    );
}
