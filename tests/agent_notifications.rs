//! Background-process notifications reach the model in `hermes-tools agent`: the loop
//! puts them in the conversation before the next model request. The model is the
//! scripted STAND-IN of agent/tests/support (it replays tool calls; it is not a model).

#[path = "../agent/tests/support/mod.rs"]
mod support;

use serde_json::{json, Value};
use support::{final_answer, tool_calls, Reply, ScriptedModel};

fn notification_in(request: &Value) -> Option<String> {
    request["messages"].as_array()?.iter().find_map(|m| {
        let text = m["content"].as_str()?;
        (m["role"] == "user" && text.starts_with("[IMPORTANT: Background process"))
            .then(|| text.to_string())
    })
}

#[test]
fn a_finished_background_process_is_reported_before_the_next_turn() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let model = ScriptedModel::respond(|request, n| {
        if n == 0 {
            return Reply::Json(tool_calls(&[(
                "bg",
                "terminal",
                json!({"command": "echo bg-output-line; exit 7", "background": true, "notify_on_complete": true}),
            )]));
        }
        match notification_in(request) {
            Some(note) => Reply::Json(final_answer(&format!("NOTIFIED {note}"))),
            // Not there yet: keep the loop busy with a short foreground command.
            None => Reply::Json(tool_calls(&[(
                &format!("w{n}"),
                "terminal",
                json!({"command": "sleep 0.5"}),
            )])),
        }
    });
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_hermes-tools"))
        .args([
            "agent",
            "start it",
            "--toolsets",
            "terminal",
            "--base-url",
            &model.base_url,
            "--quiet",
            "--max-iterations",
            "40",
        ])
        .current_dir(work.path())
        .env("HERMES_HOME", home.path())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.starts_with("NOTIFIED [IMPORTANT: Background process proc_"),
        "{stdout}"
    );
    assert!(
        stdout.contains("exited with code 7") && stdout.contains("bg-output-line"),
        "{stdout}"
    );
    // Delivered once: the request after it has no second copy.
    let last = model.request(model.request_count() - 1);
    let copies = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| {
            m["content"]
                .as_str()
                .is_some_and(|t| t.starts_with("[IMPORTANT:"))
        })
        .count();
    assert_eq!(copies, 1);
}
