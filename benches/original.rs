//! hermes-tools side by side with the original (hermes-agent 0.19.0 from PyPI): the same
//! calls through the same kind of pipe, one at a time, in one run.
//!
//! - read_file of a 3-line file (a different file each call, so every call really
//!   reads): `hermes-tools serve` against the original's `handle_function_call` behind a
//!   JSON-lines loop of the same shape (benches/original_lines.py);
//! - terminal `true`, the same way (local backend; ours with its default OS sandbox);
//! - read_file of a page (500 lines) of a 50 MB file, a different page each call, and a
//!   patch (mode replace) of one line of a 5 MB file, a different line each call;
//! - an MCP `tools/call` of `skills_list` (no skills installed) over stdio:
//!   `hermes-tools mcp --toolsets skills` against the original's own MCP server
//!   (`python -m agent.transports.hermes_tools_mcp_server`, which needs `mcp` below 2).
//!
//! HERMES_BENCH_ORIGINAL_PYTHON=/tmp/hermes-original/bin/python cargo bench --bench original
//! (the venv: `python3 -m venv /tmp/hermes-original && /tmp/hermes-original/bin/pip install
//! hermes-agent==0.19.0 'mcp<2'`). Without that variable only our side runs.

#[path = "support/line_peer.rs"]
mod line_peer;

use line_peer::{mcp_initialize, mcp_line, median_round_trip, Peer};
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const READS: usize = 2_000;
const COMMANDS: usize = 300;
const MCP_CALLS: usize = 2_000;
const BIG_CALLS: usize = 12;
/// Lines of the 50 MB file (26 bytes each) and of the 5 MB file.
const BIG_LINES: usize = 2_000_000;
const EDITED_LINES: usize = 200_000;

fn numbered_line(n: usize) -> String {
    format!("line {n:>12} of the file\n")
}

fn call_line(n: usize, name: &str, args: Value) -> String {
    format!(
        "{}\n",
        json!({"id": format!("c{n}"), "type": "function", "function": {"name": name, "arguments": args.to_string()}, "task_id": "bench"})
    )
}

/// The tool result inside an answer line, which must not be an error.
fn tool_result(answer: &str) -> Value {
    let line: Value =
        serde_json::from_str(answer).unwrap_or_else(|e| panic!("not JSON ({e}): {answer}"));
    let content = line["content"]
        .as_str()
        .unwrap_or_else(|| panic!("no content: {answer}"));
    let result: Value = serde_json::from_str(content)
        .unwrap_or_else(|e| panic!("content not JSON ({e}): {content}"));
    assert!(
        result.get("error").is_none_or(Value::is_null),
        "the call failed: {result}"
    );
    result
}

fn read_calls() -> Vec<String> {
    (0..READS)
        .map(|n| call_line(n, "read_file", json!({"path": format!("f{n}.txt")})))
        .collect()
}

fn terminal_calls() -> Vec<String> {
    (0..COMMANDS)
        .map(|n| call_line(n, "terminal", json!({"command": "true"})))
        .collect()
}

fn big_read_calls() -> Vec<String> {
    (0..BIG_CALLS)
        .map(|n| {
            call_line(
                n,
                "read_file",
                json!({"path": "big.txt", "offset": 1 + n * 150_000, "limit": 500}),
            )
        })
        .collect()
}

fn patch_calls() -> Vec<String> {
    (0..BIG_CALLS)
        .map(|n| {
            let line = 1 + n * 15_000;
            let old = numbered_line(line);
            let new = old.replace("of the file", "of the edit");
            call_line(n, "patch", json!({"mode": "replace", "path": "edited.txt", "old_string": old, "new_string": new}))
        })
        .collect()
}

fn mcp_calls() -> Vec<String> {
    (0..MCP_CALLS as u64)
        .map(|n| {
            mcp_line(
                1 + n,
                "tools/call",
                json!({"name": "skills_list", "arguments": {}}),
            )
        })
        .collect()
}

fn check_read(answer: &str) {
    let result = tool_result(answer);
    assert!(
        result["content"]
            .as_str()
            .is_some_and(|c| c.contains("one")),
        "not the file's text: {result}"
    );
}

fn check_page(answer: &str) {
    let result = tool_result(answer);
    assert!(
        result["content"]
            .as_str()
            .is_some_and(|c| c.lines().count() >= 500),
        "not a page: {:.300}",
        result.to_string()
    );
}

fn check_patch(answer: &str) {
    let result = tool_result(answer);
    assert_ne!(result["success"], false, "{result}");
}

fn check_terminal(answer: &str) {
    assert_eq!(tool_result(answer)["exit_code"], 0, "{answer}");
}

fn check_mcp(answer: &str) {
    let reply: Value =
        serde_json::from_str(answer).unwrap_or_else(|e| panic!("not JSON ({e}): {answer}"));
    assert!(
        !reply["result"]["isError"].as_bool().unwrap_or(false),
        "{answer}"
    );
    let text = reply["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text: {answer}"));
    assert!(text.contains("\"skills\""), "{text}");
}

/// One side's home and working directory: the files read_file reads, nothing else.
struct Place {
    home: tempfile::TempDir,
    work: tempfile::TempDir,
}

impl Place {
    fn new() -> Place {
        let place = Place {
            home: tempfile::tempdir().unwrap(),
            work: tempfile::tempdir().unwrap(),
        };
        for n in 0..READS {
            std::fs::write(
                place.work.path().join(format!("f{n}.txt")),
                "one\ntwo\nthree\n",
            )
            .unwrap();
        }
        let big: String = (1..=BIG_LINES).map(numbered_line).collect();
        std::fs::write(place.work.path().join("big.txt"), big).unwrap();
        let edited: String = (1..=EDITED_LINES).map(numbered_line).collect();
        std::fs::write(place.work.path().join("edited.txt"), edited).unwrap();
        place
    }

    fn command(&self, program: &Path, args: &[&str]) -> Command {
        let mut command = Command::new(program);
        command
            .args(args)
            .env("HERMES_HOME", self.home.path())
            .env("TERMINAL_CWD", self.work.path())
            .current_dir(self.work.path());
        command
    }
}

struct Figures {
    read: Duration,
    page: Duration,
    patch: Duration,
    terminal: Duration,
    mcp: Duration,
}

/// The medians of one side: `lines` starts its JSON-lines server, `mcp` its MCP server;
/// `reads` of the small files are timed (the original takes about 0.1 s for each).
fn measure(mut lines: Command, mut mcp: Command, reads: usize) -> Figures {
    let mut server = Peer::start(&mut lines);
    let read = median_round_trip(
        &mut server,
        &read_calls()[..reads + 20],
        20,
        reads,
        check_read,
    );
    let page = median_round_trip(&mut server, &big_read_calls(), 2, BIG_CALLS - 2, check_page);
    let patch = median_round_trip(&mut server, &patch_calls(), 2, BIG_CALLS - 2, check_patch);
    let terminal = median_round_trip(&mut server, &terminal_calls(), 20, COMMANDS, check_terminal);
    server.finish();
    let mut server = Peer::start(&mut mcp);
    mcp_initialize(&mut server);
    let mcp = median_round_trip(&mut server, &mcp_calls(), 100, MCP_CALLS - 100, check_mcp);
    server.finish();
    Figures {
        read,
        page,
        patch,
        terminal,
        mcp,
    }
}

fn main() {
    let binary = Path::new(env!("CARGO_BIN_EXE_hermes-tools"));
    let ours_place = Place::new();
    let ours = measure(
        ours_place.command(binary, &["serve"]),
        ours_place.command(binary, &["mcp", "--toolsets", "skills"]),
        READS - 20,
    );
    let original = std::env::var_os("HERMES_BENCH_ORIGINAL_PYTHON").map(|python| {
        let place = Place::new();
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/original_lines.py");
        let python = Path::new(&python);
        measure(
            place.command(python, &[script]),
            place.command(python, &["-m", "agent.transports.hermes_tools_mcp_server"]),
            100,
        )
    });
    println!(
        "{:<52} {:>11} {:>11} {:>9}",
        "one call at a time", "ours", "original", "ratio"
    );
    let row = |label: &str, ours: Duration, theirs: Option<Duration>| {
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        match theirs {
            Some(theirs) => println!(
                "{label:<52} {:>9.1}µs {:>9.1}µs {:>8.4}x",
                us(ours),
                us(theirs),
                ours.as_secs_f64() / theirs.as_secs_f64()
            ),
            None => println!("{label:<52} {:>9.1}µs {:>11} {:>9}", us(ours), "-", "-"),
        }
    };
    row(
        "read_file of a 3-line file, JSON lines",
        ours.read,
        original.as_ref().map(|o| o.read),
    );
    row(
        "read_file, a 500-line page of a 50 MB file",
        ours.page,
        original.as_ref().map(|o| o.page),
    );
    row(
        "patch (replace) of one line of a 5 MB file",
        ours.patch,
        original.as_ref().map(|o| o.patch),
    );
    row(
        "terminal `true`, JSON lines",
        ours.terminal,
        original.as_ref().map(|o| o.terminal),
    );
    row(
        "MCP tools/call skills_list, stdio",
        ours.mcp,
        original.as_ref().map(|o| o.mcp),
    );
    if original.is_none() {
        println!("(set HERMES_BENCH_ORIGINAL_PYTHON to a Python with hermes-agent==0.19.0 and 'mcp<2' for the original's side)");
    }
}
