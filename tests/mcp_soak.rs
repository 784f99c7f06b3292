//! Sessions of `hermes-tools mcp --http` opened, used and closed one after another
//! leave the server's open descriptors and resident memory where they were.
//!
//! The client is the Python `mcp` package's (each session: initialize, a `read_file`
//! call, every tenth session a `terminal` call too, then DELETE). CI runs a modest
//! count; the figure in docs/mcp.md was measured with
//! `HERMES_MCP_SOAK_SESSIONS=10000 cargo test --release --test mcp_soak -- --nocapture`.

mod mcp_support;

use mcp_support::{fixture, usage, HttpServer, TOKEN};
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// Runs `count` sessions through the Python client; every tenth also runs a terminal
/// command (a shell for the session's task, ended with the session).
fn sessions(server: &HttpServer, count: usize, work: &Path) {
    let python = hermes_test_peers::python_with(&["mcp.client.streamable_http"]);
    let read = json!({"name": "read_file", "arguments": {"path": work.join("notes.txt")}});
    let shell = json!({"name": "terminal", "arguments": {"command": "echo soak"}});
    let mut plans = vec![json!([read]); 9];
    plans.push(json!([read, shell]));
    let output = Command::new(&python)
        .arg(fixture("py_soak_client.py"))
        .args([
            &server.url(),
            TOKEN,
            &count.to_string(),
            &Value::from(plans).to_string(),
        ])
        .output()
        .unwrap();
    let report = mcp_support::client_report(&output);
    assert_eq!(report["failed"], 0, "{report}");
    assert_eq!(report["sessions"], count);
}

/// Descriptors and memory once the sessions' environments are gone (their cleanup
/// runs on threads of its own): the lowest descriptor count seen within a few seconds.
fn settled(pid: u32) -> (usize, u64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut best = usage(pid);
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
        let now = usage(pid);
        if now.0 <= best.0 {
            best = now;
        }
    }
    best
}

#[test]
fn closed_sessions_leave_descriptors_and_memory_flat() {
    let count: usize = std::env::var("HERMES_MCP_SOAK_SESSIONS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(200);
    let home = mcp_support::home();
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("notes.txt"), "soak\n").unwrap();
    let server = HttpServer::start(home.path(), work.path(), &["--toolsets", "file,terminal"]);
    // Warm up: lazily made things (thread pools, caches, the first shell) exist after.
    sessions(&server, 40, work.path());
    let before = settled(server.pid());
    let started = Instant::now();
    sessions(&server, count, work.path());
    let took = started.elapsed();
    let after = settled(server.pid());
    eprintln!(
        "{count} sessions in {:.1} s: descriptors {} -> {}, RSS {} kB -> {} kB ({:+} kB)",
        took.as_secs_f64(),
        before.0,
        after.0,
        before.1,
        after.1,
        after.1 as i64 - before.1 as i64
    );
    assert!(
        after.0 <= before.0 + 2,
        "descriptors grew from {} to {} over {count} sessions",
        before.0,
        after.0
    );
    // A leak of the size closed sessions used to keep (~100 kB each) shows over a few
    // hundred sessions; the allocator's own slack stays well under this.
    let allowed = 16 * 1024 + 8 * count as u64;
    assert!(
        after.1 <= before.1 + allowed,
        "RSS grew from {} kB to {} kB over {count} sessions (allowed {allowed} kB)",
        before.1,
        after.1
    );
}
