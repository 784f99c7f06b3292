//! `@modelcontextprotocol/conformance` (run with the Node 22 of mcp/tests/node):
//! server scenarios against the MCP server over streamable HTTP, client scenarios
//! against the MCP client.

mod common;

use common::*;
use std::process::Command;

const JSON_SCHEMA_PLUGIN: &str = r##"description: Tools the conformance scenarios look for
tools:
  - name: json_schema_2020_12_tool
    toolset: conformance
    description: A tool whose schema uses JSON Schema 2020-12 keywords.
    command: [cat]
    parameters:
      $schema: https://json-schema.org/draft/2020-12/schema
      type: object
      $defs:
        address:
          type: object
          properties: {street: {type: string}, city: {type: string}}
      properties:
        name: {type: string}
        address: {$ref: "#/$defs/address"}
      additionalProperties: false
  - name: test_simple_text
    toolset: conformance
    description: Answers with text.
    command: [echo, "This is a simple text response for testing."]
  - name: test_error_handling
    toolset: conformance
    description: Fails, so the answer is an error result.
    command: [sh, -c, "echo 'This tool intentionally returns an error for testing' >&2; exit 1"]
  - name: test_tool_with_progress
    toolset: conformance
    description: Runs long enough for the server to report its progress three times.
    command: [sh, -c, "sleep 3.5; echo done"]
"##;

fn conformance(args: &[&str]) -> (bool, String) {
    let output = Command::new(node_bin("node"))
        .arg(node_bin("conformance"))
        .args(args)
        .env("PATH", node_path_env())
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success() && !text.contains("FAILURE"), text)
}

#[test]
fn server_scenarios_over_http() {
    let home = home_with_config("");
    let dir = home.path().join("plugins/conformance");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("plugin.yaml"), JSON_SCHEMA_PLUGIN).unwrap();
    let port = free_port();
    let _server = ChildGuard(
        Command::new(env!("CARGO_BIN_EXE_hermes-mcp-fixture"))
            .args(["serve", "--http", &format!("127.0.0.1:{port}")])
            .env("HERMES_HOME", home.path())
            .env("HERMES_MCP_SERVER_TOKEN", "conformance-token")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    assert!(wait_for_port(port, 30), "the MCP server did not start");
    // The suite sends no Authorization header; the proxy adds the server's token.
    let proxy = header_proxy(port, "Authorization: Bearer conformance-token");
    let url = format!("http://localhost:{proxy}/mcp");
    let mut failures = Vec::new();
    // With what the verbose report must show the tool answered: the suite takes an
    // "unknown tool" error as a pass of tools-call-error, and any text for simple-text.
    for (scenario, answered) in [
        ("server-initialize", None),
        ("ping", None),
        ("tools-list", None),
        ("logging-set-level", None),
        ("json-schema-2020-12", None),
        ("dns-rebinding-protection", None),
        (
            "tools-call-simple-text",
            Some("simple text response for testing"),
        ),
        ("tools-call-error", Some("intentionally returns an error")),
        ("tools-call-with-progress", None),
        ("server-sse-multiple-streams", None),
    ] {
        let (ok, text) = conformance(&["server", "--url", &url, "--scenario", scenario]);
        if !ok || !text.contains("0 failed") {
            failures.push(format!("{scenario}:\n{text}"));
        }
        if let Some(answered) = answered {
            let (_, verbose) =
                conformance(&["server", "--url", &url, "--scenario", scenario, "--verbose"]);
            if !verbose.contains(answered) {
                failures.push(format!("{scenario}: not answered by its tool:\n{verbose}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn client_scenarios() {
    let client = format!(
        "{} conformance-client",
        env!("CARGO_BIN_EXE_hermes-mcp-fixture")
    );
    let mut failures = Vec::new();
    for scenario in ["initialize", "tools_call", "sse-retry"] {
        let (ok, text) = conformance(&[
            "client",
            "--command",
            &client,
            "--scenario",
            scenario,
            "--timeout",
            "60000",
        ]);
        if !ok || !text.contains("OVERALL: PASSED") {
            failures.push(format!("{scenario}:\n{text}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
