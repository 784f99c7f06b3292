//! `hermes-tools mcp` asks the MCP client's user through `elicitation/create` before a
//! dangerous command (accept, decline, cancel), falls back to the unattended policy for
//! a client without elicitation, and sends background-process notifications as
//! `notifications/message`. The client is the Python `mcp` package's (test venv).

mod mcp_support;

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;

fn python() -> PathBuf {
    hermes_test_peers::python_with(&["mcp.client.stdio"])
}

fn run(answer: &str, home: &Path, cwd: &Path, calls: Value, notifications: usize) -> Value {
    run_toolsets(answer, home, cwd, "terminal", calls, notifications)
}

fn run_toolsets(
    answer: &str,
    home: &Path,
    cwd: &Path,
    toolsets: &str,
    calls: Value,
    notifications: usize,
) -> Value {
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("mcp/tests/fixtures/py_elicit_client.py");
    let output = Command::new(python())
        .arg(script)
        .arg(answer)
        .arg(env!("CARGO_BIN_EXE_hermes-tools"))
        .args(["mcp", "--toolsets", toolsets])
        .arg("--")
        .arg(calls.to_string())
        .arg(notifications.to_string())
        .env("HERMES_HOME", home)
        .env_remove("HERMES_INTERACTIVE")
        .env_remove("HERMES_YOLO_MODE")
        .current_dir(cwd)
        .output()
        .unwrap();
    mcp_support::client_report(&output)
}

fn rm_victim() -> Value {
    json!([{"name": "terminal", "arguments": {"command": "rm -rf victim"}}])
}

fn setup() -> (tempfile::TempDir, tempfile::TempDir) {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(work.path().join("victim/inner")).unwrap();
    // The approval channel is what is tested here; with the OS sandbox on (the default)
    // an unanswered command would run contained in the workspace instead of being refused.
    std::fs::write(
        home.path().join("config.yaml"),
        "terminal:\n  sandbox:\n    mode: \"off\"\n",
    )
    .unwrap();
    (home, work)
}

fn result(out: &Value) -> Value {
    serde_json::from_str(out["calls"][0]["text"].as_str().unwrap()).unwrap()
}

#[test]
fn accept_runs_the_command_the_user_chose() {
    let (home, work) = setup();
    let out = run("accept:once", home.path(), work.path(), rm_victim(), 0);
    let asked = &out["elicitations"][0];
    let message = asked["message"].as_str().unwrap();
    assert!(
        message.contains("rm -rf victim") && message.contains("recursive delete"),
        "{message}"
    );
    assert_eq!(
        asked["schema"]["properties"]["choice"]["enum"],
        json!(["once", "session", "always", "deny"])
    );
    assert_eq!(asked["schema"]["required"], json!(["choice"]));
    let result = result(&out);
    assert_eq!(result["exit_code"], 0, "{result}");
    assert_eq!(result["approval"], "granted by the user");
    assert!(!work.path().join("victim").exists());
}

#[test]
fn always_is_saved_to_the_config() {
    let (home, work) = setup();
    let out = run("accept:always", home.path(), work.path(), rm_victim(), 0);
    assert_eq!(result(&out)["exit_code"], 0);
    let config = std::fs::read_to_string(home.path().join("config.yaml")).unwrap();
    assert!(config.contains("\"recursive delete\""), "{config}");
}

#[test]
fn decline_and_cancel_deny() {
    for answer in ["decline", "cancel", "accept:maybe"] {
        let (home, work) = setup();
        let out = run(answer, home.path(), work.path(), rm_victim(), 0);
        assert_eq!(out["elicitations"].as_array().unwrap().len(), 1, "{answer}");
        let result = result(&out);
        assert_eq!(result["status"], "blocked", "{answer}: {result}");
        assert_eq!(result["user_consent"], false);
        assert!(work.path().join("victim").exists(), "{answer}");
    }
}

#[test]
fn a_client_without_elicitation_gets_the_unattended_policy_and_how_to_enable_it() {
    let (home, work) = setup();
    let out = run("none", home.path(), work.path(), rm_victim(), 0);
    assert!(out["elicitations"].as_array().unwrap().is_empty());
    let result = result(&out);
    assert_eq!(result["status"], "blocked");
    let error = result["error"].as_str().unwrap();
    assert!(
        error.contains("elicitation") && error.contains("approvals.unattended_mode"),
        "{error}"
    );
    assert!(!error.contains("has been asked"), "{error}");
    assert!(work.path().join("victim").exists());
}

#[test]
fn background_completion_is_a_logging_notification() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let calls = json!([{"name": "terminal", "arguments": {
        "command": "sleep 0.5; echo finished-here; exit 4", "background": true, "notify_on_complete": true,
    }}]);
    let out = run("none", home.path(), work.path(), calls, 1);
    let started = result(&out);
    let note = &out["notifications"][0];
    assert_eq!(note["event"], "completed", "{out}");
    assert_eq!(note["session_id"], started["session_id"]);
    assert_eq!(note["exit_code"], 4);
    assert!(
        note["output_tail"]
            .as_str()
            .unwrap()
            .contains("finished-here"),
        "{note}"
    );
}

#[test]
fn clarify_is_elicited_too() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let ask = json!([{"name": "clarify", "arguments": {"question": "Which branch?", "choices": ["main", "dev"]}}]);
    let out = run_toolsets(
        "accept:dev",
        home.path(),
        work.path(),
        "clarify",
        ask.clone(),
        0,
    );
    assert_eq!(out["elicitations"][0]["message"], "Which branch?");
    assert!(
        out["elicitations"][0]["schema"]["properties"]["answer"]["description"]
            .as_str()
            .unwrap()
            .contains("main, dev")
    );
    let answered = result(&out);
    assert_eq!(answered["user_response"], "dev", "{answered}");

    let out = run_toolsets(
        "decline",
        home.path(),
        work.path(),
        "clarify",
        ask.clone(),
        0,
    );
    assert!(
        result(&out)["error"].as_str().unwrap().contains("declined"),
        "{out}"
    );

    let out = run_toolsets("none", home.path(), work.path(), "clarify", ask, 0);
    assert!(
        result(&out)["error"]
            .as_str()
            .unwrap()
            .contains("elicitation"),
        "{out}"
    );
}
