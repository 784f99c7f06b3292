//! `hermes-tools mcp`: the real binary and its built-in tools, driven by the Python
//! `mcp` package's client (installed by .ci/setup.d/30-mcp.sh), plus plugins replacing
//! a built-in under the operator's grant, and the HTTP transport's Host check.

mod mcp_support;

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The test venv's `python3`, with the `mcp` package 1.x (installed by .ci/setup.d).
fn python() -> PathBuf {
    hermes_test_peers::python_with(&["mcp.client.stdio", "mcp.server.fastmcp"])
}

fn py_client() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("mcp/tests/fixtures/py_client.py")
}

fn run_client(home: &Path, cwd: &Path, server_args: &[&str], calls: Value) -> Value {
    let output = Command::new(python())
        .arg(py_client())
        .arg(env!("CARGO_BIN_EXE_hermes-tools"))
        .args(server_args)
        .arg("--")
        .arg(calls.to_string())
        .env("HERMES_HOME", home)
        .current_dir(cwd)
        .output()
        .unwrap();
    mcp_support::client_report(&output)
}

fn names(out: &Value) -> Vec<String> {
    out["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn builtin_tools_over_mcp_stdio() {
    let home = tempfile::tempdir().unwrap();
    // The approval answer is what is tested here; inside the OS sandbox (on by default)
    // the command would run contained instead, and the victim lies in the workspace.
    std::fs::write(
        home.path().join("config.yaml"),
        "terminal:\n  sandbox:\n    mode: \"off\"\n",
    )
    .unwrap();
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("notes.txt"), "alpha\nbeta\n").unwrap();
    let victim = work.path().join("keep");
    std::fs::create_dir_all(&victim).unwrap();
    std::fs::write(victim.join("precious.txt"), "x").unwrap();
    let out = run_client(
        home.path(),
        work.path(),
        &["mcp", "--toolsets", "file,terminal"],
        json!([
            {"name": "read_file", "arguments": {"path": work.path().join("notes.txt")}},
            {"name": "read_file", "arguments": {"path": "/nonexistent/file.txt"}},
            {"name": "terminal", "arguments": {"command": format!("rm -rf {}/*", victim.display())}},
            {"name": "web_search", "arguments": {"query": "x"}},
        ]),
    );
    let tools = names(&out);
    assert!(
        tools.contains(&"read_file".to_string()) && tools.contains(&"terminal".to_string()),
        "{tools:?}"
    );
    assert!(
        !tools.contains(&"web_search".to_string()),
        "--toolsets ignored: {tools:?}"
    );
    // The generated schema is the inputSchema.
    let read_file = out["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "read_file")
        .unwrap();
    assert_eq!(read_file["inputSchema"]["type"], "object");
    assert!(read_file["inputSchema"]["properties"]["path"].is_object());
    let calls = out["calls"].as_array().unwrap();
    assert_eq!(calls[0]["isError"], false, "{}", calls[0]);
    assert!(calls[0]["text"].as_str().unwrap().contains("alpha"));
    assert_eq!(calls[1]["isError"], true, "{}", calls[1]);
    // A dangerous command does not run: the runtime's approval answer comes back.
    let terminal = calls[2]["text"].as_str().unwrap().to_lowercase();
    assert!(
        terminal.contains("approv") || terminal.contains("block"),
        "{terminal}"
    );
    assert!(
        victim.join("precious.txt").exists(),
        "the dangerous command ran"
    );
    assert_eq!(calls[3]["isError"], true);
}

#[test]
fn a_plugin_replaces_a_builtin_only_with_the_grant() {
    for granted in [false, true] {
        let home = tempfile::tempdir().unwrap();
        if granted {
            std::fs::write(
                home.path().join("config.yaml"),
                "plugins:\n  entries:\n    mine: {allow_tool_override: true}\n",
            )
            .unwrap();
        }
        let dir = home.path().join("plugins/mine");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("plugin.yaml"),
            "tools:\n  - name: mine_hello\n    command: [echo, '{\"hello\": 1}']\n  - name: read_file\n    toolset: mine\n    override: true\n    command: [echo, '{\"replaced\": true}']\n",
        )
        .unwrap();
        let out = run_client(
            home.path(),
            home.path(),
            &["mcp", "--toolsets", "file,mine"],
            json!([{"name": "read_file", "arguments": {"path": "/etc/hostname"}}]),
        );
        let replaced = out["calls"][0]["text"] == r#"{"replaced": true}"#;
        assert_eq!(replaced, granted, "{out}");
        // Without the grant the whole plugin is skipped, its other tool included.
        assert_eq!(
            names(&out).contains(&"mine_hello".to_string()),
            granted,
            "{out}"
        );
    }
}

#[test]
fn http_transport_refuses_foreign_hosts() {
    let home = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_hermes-tools"))
        .args(["mcp", "--toolsets", "file", "--http", &port.to_string()])
        .env("HERMES_HOME", home.path())
        .env("HERMES_MCP_SERVER_TOKEN", "host-check-token")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let post = |host: &str| -> String {
        use std::io::{Read, Write};
        let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        write!(
            stream,
            "POST /mcp HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer host-check-token\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer);
        answer
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err()
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let good = post(&format!("localhost:{port}"));
    let evil = post("evil.example.com");
    let _ = child.kill();
    let _ = child.wait();
    assert!(good.starts_with("HTTP/1.1 200"), "{good}");
    assert!(
        evil.starts_with("HTTP/1.1 403")
            || evil.starts_with("HTTP/1.1 421")
            || evil.starts_with("HTTP/1.1 400"),
        "{evil}"
    );
}
