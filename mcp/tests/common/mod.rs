//! Shared by hermes-mcp's integration tests: where the third-party servers and
//! clients are (installed by .ci/setup.d/30-mcp.sh), and registries over a temp home.
#![allow(dead_code)]

use hermes_runtime::{Registry, ToolCall, ToolContext};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub const SETUP: &str = ".ci/setup.d/30-mcp.sh";

pub fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A binary of the npm packages in mcp/tests/node; fails the test when missing.
pub fn node_bin(name: &str) -> PathBuf {
    let path = manifest_dir()
        .join("tests/node/node_modules/.bin")
        .join(name);
    assert!(
        path.exists(),
        "{} is missing: run {SETUP} (it installs the npm packages the MCP tests use)",
        path.display()
    );
    path
}

/// PATH with Node 22 from mcp/tests/node first (the conformance suite needs it).
pub fn node_path_env() -> String {
    let node = node_bin("node");
    let bin = node.parent().unwrap().to_path_buf();
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// The test venv's `python3`, with the `mcp` package 1.x; fails the test when missing.
pub fn python() -> PathBuf {
    hermes_test_peers::python_with(&["mcp.client.stdio", "mcp.server.fastmcp"])
}

pub fn fixture(name: &str) -> PathBuf {
    manifest_dir().join("tests/fixtures").join(name)
}

/// A temp HERMES_HOME with `config` (YAML text) as config.yaml.
pub fn home_with_config(config: &str) -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.yaml"), config).unwrap();
    home
}

pub fn registry(home: &Path) -> Arc<Registry> {
    Arc::new(Registry::with_home(
        &hermes_mcp::testing::EMPTY_CATALOG,
        home.to_path_buf(),
    ))
}

pub fn call(registry: &Registry, name: &str, args: Value) -> String {
    registry.handle_function_call(
        &ToolCall::new(name, args),
        &ToolContext::builder().task_id("test").build(),
    )
}

pub fn call_json(registry: &Registry, name: &str, args: Value) -> Value {
    let text = call(registry, name, args);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name} answered non-JSON ({e}): {text}"))
}

/// Waits until `check` holds, up to `seconds`.
pub fn wait_for(seconds: u64, mut check: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(seconds);
    while std::time::Instant::now() < deadline {
        if check() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    check()
}

/// A free TCP port on 127.0.0.1.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Kills the child when dropped.
pub struct ChildGuard(pub std::process::Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn wait_for_port(port: u16, seconds: u64) -> bool {
    wait_for(seconds, || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    })
}

/// A loopback port that forwards HTTP/1.1 to `target`, adding `header` (a whole
/// `Name: value` line) to every request: for clients that cannot send the MCP
/// server's bearer token themselves.
pub fn header_proxy(target: u16, header: &str) -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let header = format!("{header}\r\n");
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let Ok(server) = std::net::TcpStream::connect(("127.0.0.1", target)) else {
                continue;
            };
            let (mut back_from, mut back_to) =
                (server.try_clone().unwrap(), client.try_clone().unwrap());
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut back_from, &mut back_to);
                let _ = back_to.shutdown(std::net::Shutdown::Write);
            });
            let header = header.clone();
            std::thread::spawn(move || {
                let _ = forward_requests(client, &server, &header);
                let _ = server.shutdown(std::net::Shutdown::Write);
            });
        }
    });
    port
}

fn forward_requests(
    client: std::net::TcpStream,
    mut server: &std::net::TcpStream,
    header: &str,
) -> std::io::Result<()> {
    use std::io::{BufRead, Read, Write};
    let mut reader = std::io::BufReader::new(client);
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line)? == 0 {
            return Ok(());
        }
        let mut head = request_line.clone() + header;
        let mut length = 0usize;
        let mut chunked = false;
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line)? == 0 {
                return Ok(());
            }
            let lower = line.to_ascii_lowercase();
            if let Some(value) = lower.strip_prefix("content-length:") {
                length = value.trim().parse().unwrap_or(0);
            }
            chunked |= lower.starts_with("transfer-encoding:") && lower.contains("chunked");
            head.push_str(&line);
            if line == "\r\n" {
                break;
            }
        }
        server.write_all(head.as_bytes())?;
        if chunked {
            // Not parsed further: the rest of the connection passes as it is.
            std::io::copy(&mut reader, &mut server)?;
            return Ok(());
        }
        let mut body = vec![0u8; length];
        reader.read_exact(&mut body)?;
        server.write_all(&body)?;
    }
}
