//! execute_code, the skills tools and text_to_speech over `hermes-tools mcp`, driven by
//! the Python `mcp` package's client (installed by .ci/setup.d/30-mcp.sh).

use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::Command;

#[test]
fn scripts_skills_and_speech_over_mcp_stdio() {
    let python = hermes_test_peers::python_with(&["mcp.client.stdio", "mcp.server.fastmcp"]);
    let client = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("mcp/tests/fixtures/py_client.py");
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("data.txt"), "over mcp\n").unwrap();
    // Nobody can approve a script over MCP; the operator allows them here.
    std::fs::write(
        home.path().join("config.yaml"),
        "approvals:\n  unattended_mode: approve\n",
    )
    .unwrap();
    let skill = "---\nname: mcp-skill\ndescription: Made over MCP\n---\nSteps.\n";
    let calls = json!([
        {"name": "execute_code", "arguments": {"code": "from hermes_tools import read_file\nimport hermes_tools\nprint(read_file('data.txt')['content'], hasattr(hermes_tools, 'terminal'))"}},
        {"name": "skill_manage", "arguments": {"action": "create", "name": "mcp-skill", "content": skill}},
        {"name": "skills_list", "arguments": {}},
        {"name": "text_to_speech", "arguments": {"text": "Hello over MCP", "output_path": "hello.wav"}},
    ]);
    let output = Command::new(python)
        .arg(client)
        .arg(env!("CARGO_BIN_EXE_hermes-tools"))
        .args(["mcp", "--toolsets", "code_execution,file,skills,tts"])
        .arg("--")
        .arg(calls.to_string())
        .env("HERMES_HOME", home.path())
        .current_dir(home.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "client failed: {}\n{stdout}",
        String::from_utf8_lossy(&output.stderr)
    );
    let out: Value = serde_json::from_str(stdout.trim()).unwrap();
    let tools: Vec<&str> = out["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    for name in [
        "execute_code",
        "skill_manage",
        "skill_view",
        "skills_list",
        "text_to_speech",
        "read_file",
    ] {
        assert!(tools.contains(&name), "{name} missing from {tools:?}");
    }
    assert!(
        !tools.contains(&"terminal") && !tools.contains(&"cronjob"),
        "{tools:?}"
    );
    let results: Vec<Value> = out["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| serde_json::from_str(c["text"].as_str().unwrap()).unwrap())
        .collect();
    assert_eq!(results[0]["output"], "1|over mcp False\n", "{}", results[0]);
    assert_eq!(results[1]["success"], true, "{}", results[1]);
    assert_eq!(results[2]["skills"][0]["name"], "mcp-skill");
    assert_eq!(results[3]["success"], true, "{}", results[3]);
    assert!(
        std::fs::metadata(home.path().join("hello.wav"))
            .unwrap()
            .len()
            > 44
    );
}
