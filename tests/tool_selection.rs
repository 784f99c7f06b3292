//! `call` and `serve` with `--toolsets` / `--disabled`: tools outside the selection are
//! refused with a clear error; tools inside it run.

mod binary;

use binary::{call, content_of, serve, serve_call};
use serde_json::json;

#[test]
fn call_refuses_a_tool_outside_the_toolsets() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("note.txt"), "hello\n").unwrap();
    let refused = call(
        home.path(),
        "terminal",
        &json!({"command": "touch made-by-terminal"}),
        &["--toolsets", "file"],
    );
    let error = refused["error"].as_str().unwrap();
    assert!(
        error.contains("terminal is not enabled") && error.contains("--toolsets file"),
        "{error}"
    );
    assert!(
        !home.path().join("made-by-terminal").exists(),
        "the refused command ran"
    );
    let read = call(
        home.path(),
        "read_file",
        &json!({"path": "note.txt"}),
        &["--toolsets", "file"],
    );
    assert!(
        read["content"].as_str().unwrap().contains("hello"),
        "{read}"
    );
}

#[test]
fn serve_refuses_disabled_tools_and_runs_the_rest() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("note.txt"), "hello\n").unwrap();
    let answers = serve(
        home.path(),
        &["--toolsets", "file,terminal", "--disabled", "terminal"],
        &[
            serve_call(
                "t",
                "terminal",
                &json!({"command": "touch made-by-terminal"}),
            ),
            // The alias of `process` is refused as the tool it names.
            serve_call("p", "process_manage", &json!({"action": "list"})),
            serve_call("r", "read_file", &json!({"path": "note.txt"})),
            serve_call("u", "no_such_tool", &json!({})),
        ],
    );
    for id in ["t", "p"] {
        let error = content_of(&answers, id)["error"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(
            error.contains("is not enabled here") && error.contains("--disabled terminal"),
            "{error}"
        );
    }
    assert!(!home.path().join("made-by-terminal").exists());
    assert!(content_of(&answers, "r")["content"]
        .as_str()
        .unwrap()
        .contains("hello"));
    assert!(content_of(&answers, "u")["error"]
        .as_str()
        .unwrap()
        .starts_with("Unknown tool"));
}

#[test]
fn without_a_selection_everything_is_served() {
    let home = tempfile::tempdir().unwrap();
    let answers = serve(
        home.path(),
        &[],
        &[serve_call("t", "terminal", &json!({"command": "echo ran"}))],
    );
    assert!(
        content_of(&answers, "t")["output"]
            .as_str()
            .unwrap()
            .contains("ran"),
        "{answers:?}"
    );
}
