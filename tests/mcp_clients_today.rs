//! `hermes-tools mcp` as the clients installed today speak to it: the Python SDK 2.x
//! (`mcp.Client` with its defaults, which speaks protocol 2026-07-28, the same client
//! pinned to the initialize handshake, and the classic `ClientSession`), the OpenAI
//! Agents SDK's MCP client and the TypeScript SDK's client, over stdio and streamable
//! HTTP. Also the raw wire: results of
//! 2026-07-28 carry `resultType`, results of older versions do not.

mod mcp_support;

use mcp_support::*;
use serde_json::{json, Value};
use std::process::Command;

const KINDS: &[&str] = &["client", "legacy", "classic", "agents", "typescript"];

/// Node 22 and the TypeScript SDK from mcp/tests/node (installed by .ci/setup.d/30-mcp.sh).
fn node() -> std::path::PathBuf {
    let node_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp/tests/node");
    let node = node_dir.join("node_modules/.bin/node");
    assert!(
        node.exists()
            && node_dir
                .join("node_modules/@modelcontextprotocol/sdk/package.json")
                .exists(),
        "Node 22 or the TypeScript MCP SDK is missing from {}: run `bash .ci/setup.d/30-mcp.sh`",
        node_dir.display()
    );
    node
}

fn run_client(
    kind: &str,
    target: &[String],
    cwd: &std::path::Path,
    home: &std::path::Path,
    calls: &Value,
) -> Value {
    let mut command = if kind == "typescript" {
        let mut command = Command::new(node());
        command.arg(fixture("ts_client.mjs"));
        command
    } else {
        let mut command = Command::new(newest_python());
        command.arg(fixture("py_newest_client.py")).arg(kind);
        command
    };
    let output = command
        .args(target)
        .arg("--")
        .arg(calls.to_string())
        .env("HERMES_HOME", home)
        .env("HERMES_MCP_SERVER_TOKEN", TOKEN)
        .current_dir(cwd)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{kind} client failed: {}\n{stdout}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(stdout.lines().next_back().unwrap_or(""))
        .unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

/// Writes a file through the client and reads it back; every kind of client, on `target`.
fn check_every_client(
    target: impl Fn() -> Vec<String>,
    work: &std::path::Path,
    home: &std::path::Path,
) {
    for kind in KINDS {
        let file = work.join(format!("from-{kind}.txt"));
        let calls = json!([
            {"name": "write_file", "arguments": {"path": file, "content": format!("written by {kind}\n")}},
            {"name": "read_file", "arguments": {"path": file}},
            {"name": "read_file", "arguments": {"path": work.join("missing.txt")}},
        ]);
        let out = run_client(kind, &target(), work, home, &calls);
        let tools: Vec<&str> = out["tools"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert!(
            tools.contains(&"read_file") && tools.contains(&"write_file"),
            "{kind}: {tools:?}"
        );
        assert!(
            !tools.contains(&"terminal"),
            "{kind}: --toolsets ignored: {tools:?}"
        );
        let calls = out["calls"].as_array().unwrap();
        assert_eq!(calls[0]["isError"], false, "{kind}: {out}");
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            format!("written by {kind}\n")
        );
        assert!(
            calls[1]["text"]
                .as_str()
                .unwrap()
                .contains(&format!("written by {kind}")),
            "{kind}: {out}"
        );
        assert_eq!(
            calls[2]["isError"], true,
            "{kind}: a missing file is an error result: {out}"
        );
        if matches!(*kind, "client" | "legacy") {
            // The skill as a prompt and a resource, in both protocols.
            assert_eq!(out["prompts"], json!(["deploy-check"]), "{kind}: {out}");
            let prompt = out["prompt"].as_str().unwrap_or_default();
            assert!(
                prompt.contains("Run the smoke tests") && prompt.contains("a check"),
                "{kind}: {out}"
            );
            assert_eq!(out["resources"][0], "skill://deploy-check", "{kind}: {out}");
            assert!(out["read"]
                .as_str()
                .unwrap_or_default()
                .contains("Run the smoke tests"));
        }
        match *kind {
            "client" => assert_eq!(out["protocol"], "2026-07-28", "{out}"),
            "legacy" | "classic" => assert_eq!(out["protocol"], "2025-11-25", "{out}"),
            // Its stdio transport does not say; over HTTP it is the newest it speaks.
            "typescript" if out["protocol"].is_string() => {
                assert_eq!(out["protocol"], "2025-11-25", "{out}")
            }
            _ => {}
        }
    }
}

#[test]
fn todays_clients_list_and_call_tools_over_stdio() {
    let home = home_with_skill();
    let work = tempfile::tempdir().unwrap();
    let server = || {
        [BIN, "mcp", "--toolsets", "file,skills"]
            .iter()
            .map(|s| s.to_string())
            .fold(vec!["--server".to_string()], |mut v, s| {
                v.push(s);
                v
            })
    };
    check_every_client(server, work.path(), home.path());
}

#[test]
fn todays_clients_list_and_call_tools_over_http() {
    let home = home_with_skill();
    let work = tempfile::tempdir().unwrap();
    let server = HttpServer::start(home.path(), work.path(), &["--toolsets", "file,skills"]);
    let url = server.url();
    check_every_client(|| vec![url.clone()], work.path(), home.path());
}

fn modern_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    })
}

#[test]
fn results_carry_result_type_on_2026_07_28_only() {
    let home = home();
    std::fs::write(home.path().join("note.txt"), "hello\n").unwrap();
    let modern = stdio_exchange(
        home.path(),
        &["--toolsets", "file"],
        &[
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": modern_meta()}}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                "name": "read_file", "arguments": {"path": home.path().join("note.txt")}, "_meta": modern_meta()}}),
        ],
        |seen| answer(seen, 1).is_some() && answer(seen, 2).is_some(),
    );
    let listed = &answer(&modern, 1).expect("tools/list answered")["result"];
    assert_eq!(listed["resultType"], "complete", "{listed}");
    assert!(
        listed["ttlMs"].is_u64() && listed["cacheScope"].is_string(),
        "{listed}"
    );
    let called = &answer(&modern, 2).expect("tools/call answered")["result"];
    assert_eq!(called["resultType"], "complete", "{called}");
    assert!(
        called["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("hello"),
        "{called}"
    );

    // A client of 2025-06-18 negotiates down and gets the shapes of its version.
    let older = stdio_exchange(
        home.path(),
        &["--toolsets", "file"],
        &[
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
                "name": "read_file", "arguments": {"path": home.path().join("note.txt")}}}),
        ],
        |seen| answer(seen, 2).is_some() && answer(seen, 3).is_some(),
    );
    assert_eq!(
        answer(&older, 1).unwrap()["result"]["protocolVersion"],
        "2025-06-18"
    );
    for id in [2, 3] {
        let result = &answer(&older, id).unwrap()["result"];
        assert!(result.get("resultType").is_none(), "{result}");
        assert!(result.get("ttlMs").is_none(), "{result}");
    }
}
