//! A child process spoken to in lines over pipes, for the benches that time round trips.
#![allow(dead_code)] // each bench uses a part

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Peer {
    child: Child,
    pub stdin: ChildStdin,
    pub stdout: BufReader<ChildStdout>,
    pub line: String,
}

impl Peer {
    pub fn start(command: &mut Command) -> Peer {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the peer starts");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Peer {
            child,
            stdin,
            stdout,
            line: String::new(),
        }
    }

    /// Sends one line and waits for one line back.
    pub fn round_trip(&mut self, line: &str) -> &str {
        self.stdin.write_all(line.as_bytes()).unwrap();
        self.stdin.flush().unwrap();
        self.line.clear();
        self.stdout.read_line(&mut self.line).unwrap();
        assert!(!self.line.is_empty(), "the peer closed its output");
        &self.line
    }

    pub fn finish(mut self) {
        drop(self.stdin);
        let _ = self.child.wait();
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

/// Median time of one round trip: `lines` taken in turn (cycling when there are fewer),
/// the first `warm_up` untimed, the next `runs` timed; each answer goes to `check`.
pub fn median_round_trip(
    peer: &mut Peer,
    lines: &[String],
    warm_up: usize,
    runs: usize,
    mut check: impl FnMut(&str),
) -> Duration {
    for line in lines.iter().cycle().take(warm_up) {
        check(peer.round_trip(line));
    }
    let mut samples: Vec<Duration> = lines
        .iter()
        .cycle()
        .skip(warm_up)
        .take(runs)
        .map(|line| {
            let started = Instant::now();
            let answer = peer.round_trip(line);
            let elapsed = started.elapsed();
            check(answer);
            elapsed
        })
        .collect();
    samples.sort();
    samples[samples.len() / 2]
}

/// The peer's resident memory, in kB.
pub fn rss_kb(peer: &Peer) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", peer.pid())).unwrap();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .unwrap()
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap()
}

/// An MCP JSON-RPC request line.
pub fn mcp_line(id: u64, method: &str, params: serde_json::Value) -> String {
    format!(
        "{}\n",
        serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
    )
}

/// The MCP handshake: `initialize`, then the `initialized` notification.
pub fn mcp_initialize(peer: &mut Peer) {
    let init = mcp_line(
        0,
        "initialize",
        serde_json::json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}),
    );
    peer.round_trip(&init);
    peer.stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
        .unwrap();
}
