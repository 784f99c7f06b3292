//! `@modelcontextprotocol/conformance` (run with the Node 22 of mcp/tests/node):
//! every server scenario against the MCP server over streamable HTTP (the fixture
//! binary: the server with the tools, prompts and resources the scenarios name),
//! client scenarios against the MCP client.

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
    description: Runs long enough for the server to report its progress at least three times, with a margin for a loaded machine.
    command: [sh, -c, "sleep 4.5; echo done"]
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

/// Every server scenario of the suite, with what its verbose report must show so that
/// it cannot pass by accident (the suite takes an "unknown tool" error as a pass of
/// tools-call-error, any text for simple-text, and several scenarios check only shapes).
const SERVER_SCENARIOS: &[(&str, &[&str])] = &[
    ("server-initialize", &[]),
    ("ping", &[]),
    ("tools-list", &[]),
    ("logging-set-level", &[]),
    ("json-schema-2020-12", &[]),
    ("dns-rebinding-protection", &[]),
    (
        "tools-call-simple-text",
        &["simple text response for testing"],
    ),
    ("tools-call-error", &["intentionally returns an error"]),
    ("tools-call-with-progress", &[]),
    ("server-sse-multiple-streams", &[]),
    ("tools-call-image", &["\"hasData\": true"]),
    // The tone the tool wrote, read back through the access policy from its MEDIA: tag.
    ("tools-call-audio", &["\"hasAudioContent\": true"]),
    (
        "tools-call-embedded-resource",
        &["\"resourceUri\": \"test://embedded-resource\""],
    ),
    ("tools-call-mixed-content", &["\"contentCount\": 3"]),
    (
        "tools-call-with-logging",
        &["Tool processing data", "hermes-tools/call"],
    ),
    (
        "tools-call-sampling",
        &["LLM response: This is a test response from the client"],
    ),
    (
        "tools-call-elicitation",
        &["Elicitation completed: action=accept"],
    ),
    ("elicitation-sep1034-defaults", &["John Doe"]),
    ("elicitation-sep1330-enums", &["First Choice", "enumNames"]),
    // The stream is closed by the server's polling limit and the answer comes after
    // a GET with Last-Event-ID.
    (
        "server-sse-polling",
        &[
            "resumes after client reconnects with Last-Event-ID",
            "\"receivedToolResponse\": false",
        ],
    ),
    ("resources-list", &["test://static-text", "file://"]),
    ("resources-read-text", &["\"hasText\": true"]),
    ("resources-read-binary", &["\"hasBlob\": true"]),
    ("resources-templates-read", &["Data for ID: 123"]),
    ("resources-subscribe", &[]),
    ("resources-unsubscribe", &[]),
    ("prompts-list", &["test_prompt_with_arguments"]),
    ("prompts-get-simple", &["\"messageCount\": 1"]),
    (
        "prompts-get-with-args",
        &["arg1='testValue1', arg2='testValue2'"],
    ),
    (
        "prompts-get-embedded-resource",
        &["Embedded resource content for testing."],
    ),
    ("prompts-get-with-image", &["\"messageCount\": 2"]),
    ("completion-complete", &["\"testing\""]),
];

#[test]
fn server_scenarios_over_http() {
    // Calls running past half a second have their stream closed and resumed (SEP-1699
    // polling): every scenario runs with it, server-sse-polling depends on it.
    let home = home_with_config("mcp_server:\n  sse_poll_seconds: 0.5\n");
    let dir = home.path().join("plugins/conformance");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("plugin.yaml"), JSON_SCHEMA_PLUGIN).unwrap();
    let port = free_port();
    let _server = ChildGuard(
        Command::new(env!("CARGO_BIN_EXE_hermes-mcp-fixture"))
            .args([
                "serve",
                "--conformance",
                "--http",
                &format!("127.0.0.1:{port}"),
            ])
            .env("HERMES_HOME", home.path())
            .env("HERMES_MCP_SERVER_TOKEN", "conformance-token")
            .current_dir(home.path())
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
    for (scenario, shown) in SERVER_SCENARIOS {
        let (ok, text) = conformance(&["server", "--url", &url, "--scenario", scenario]);
        if !ok || !text.contains("0 failed") || !text.contains("0 warnings") {
            failures.push(format!("{scenario}:\n{text}"));
        }
        if !shown.is_empty() {
            let (_, verbose) =
                conformance(&["server", "--url", &url, "--scenario", scenario, "--verbose"]);
            for expected in *shown {
                if !verbose.contains(expected) {
                    failures.push(format!(
                        "{scenario}: the report lacks {expected:?}:\n{verbose}"
                    ));
                }
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
