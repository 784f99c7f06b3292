//! The MCP server (`hermes-mcp-fixture serve`, the same code as `hermes-tools mcp`)
//! driven by the Python `mcp` package's client: list tools, call a tool, get an
//! error result.

mod common;

use common::*;
use serde_json::{json, Value};

fn python_client(home: &std::path::Path, calls: Value) -> Value {
    let output = std::process::Command::new(python())
        .arg(fixture("py_client.py"))
        .arg(env!("CARGO_BIN_EXE_hermes-mcp-fixture"))
        .arg("serve")
        .arg("--")
        .arg(calls.to_string())
        .env("HERMES_HOME", home)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "client failed: {}\n{stdout}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

#[test]
fn python_client_lists_calls_and_sees_errors() {
    let home = home_with_config("");
    let dir = home.path().join("plugins/calc");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("plugin.yaml"),
        "tools:\n  - name: add\n    description: Adds a and b.\n    parameters:\n      type: object\n      properties: {a: {type: integer}, b: {type: integer}}\n      required: [a, b]\n    command: [python3, -c, \"import json,sys; a=json.load(sys.stdin); print(json.dumps({'sum': a['a'] + a['b']}))\"]\n  - name: broken\n    command: [sh, -c, \"echo bad >&2; exit 1\"]\n",
    )
    .unwrap();
    let out = python_client(
        home.path(),
        json!([
            {"name": "add", "arguments": {"a": 2, "b": "3"}},
            {"name": "broken", "arguments": {}},
            {"name": "no_such_tool", "arguments": {}},
        ]),
    );
    assert_eq!(out["server"], "hermes-tools");
    let tools: Vec<&str> = out["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools, vec!["add", "broken"]);
    let add = &out["tools"][0]["inputSchema"];
    assert_eq!(add["required"], json!(["a", "b"]));
    let calls = out["calls"].as_array().unwrap();
    assert_eq!(calls[0]["isError"], false);
    assert_eq!(
        serde_json::from_str::<Value>(calls[0]["text"].as_str().unwrap()).unwrap(),
        json!({"sum": 5})
    );
    assert_eq!(calls[1]["isError"], true);
    assert!(
        calls[1]["text"].as_str().unwrap().contains("bad"),
        "{}",
        calls[1]
    );
    assert_eq!(calls[2]["isError"], true);
    assert!(calls[2]["text"].as_str().unwrap().contains("Unknown tool"));
}

#[test]
fn chained_python_client_to_server_everything() {
    // Python client → hermes MCP server → hermes MCP client → server-everything.
    let home = home_with_config(&format!(
        "mcp_servers:\n  everything:\n    command: {}\n    args: [stdio]\n",
        node_bin("mcp-server-everything").display()
    ));
    let out = python_client(
        home.path(),
        json!([{"name": "mcp_everything_echo", "arguments": {"message": "through two hops"}}]),
    );
    assert!(out["tools"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["name"] == "mcp_everything_get_tiny_image"));
    assert_eq!(out["calls"][0]["isError"], false);
    assert_eq!(
        out["calls"][0]["text"],
        r#"{"result":"Echo: through two hops"}"#
    );
}
