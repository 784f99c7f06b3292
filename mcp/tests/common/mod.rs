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
    let path = manifest_dir().join("tests/node/node_modules/.bin").join(name);
    assert!(path.exists(), "{} is missing: run {SETUP} (it installs the npm packages the MCP tests use)", path.display());
    path
}

/// PATH with Node 22 from mcp/tests/node first (the conformance suite needs it).
pub fn node_path_env() -> String {
    let node = node_bin("node");
    let bin = node.parent().unwrap().to_path_buf();
    format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default())
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
    Arc::new(Registry::with_home(&hermes_mcp::testing::EMPTY_CATALOG, home.to_path_buf()))
}

pub fn call(registry: &Registry, name: &str, args: Value) -> String {
    registry.handle_function_call(&ToolCall::new(name, args), &ToolContext::builder().task_id("test").build())
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
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
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
    wait_for(seconds, || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok())
}
