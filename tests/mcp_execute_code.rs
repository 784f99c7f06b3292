//! `execute_code` over `hermes-tools mcp`, driven by the Python `mcp` package's
//! `ClientSession` (mcp/tests/fixtures/py_library_client.py) on stdio: a call with a
//! progress token sees the script's stdout and each of its tool calls as progress while
//! the script runs, and `notifications/cancelled` stops the script with everything it
//! started, as it stops a terminal command.

mod mcp_support;

use mcp_support::{home_with, walk};
use serde_json::{json, Value};

/// Scripts run on this machine outside the OS sandbox (the protocol is what is tested),
/// which the operator allows for callers nobody can ask.
const CONFIG: &str = "approvals:\n  unattended_mode: approve\n";
const TOOLSETS: &[&str] = &["--toolsets", "code_execution,file,terminal"];

fn messages(progress: &Value) -> Vec<String> {
    progress
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["message"].as_str().map(str::to_owned))
        .collect()
}

/// Where the first message containing `needle` is.
fn at(messages: &[String], needle: &str) -> usize {
    messages
        .iter()
        .position(|m| m.contains(needle))
        .unwrap_or_else(|| panic!("no progress with {needle:?}: {messages:#?}"))
}

#[test]
fn a_scripts_output_and_tool_calls_arrive_as_progress_while_it_runs() {
    let home = home_with(CONFIG);
    std::fs::write(home.path().join("notes.txt"), "a note\n").unwrap();
    // Pauses longer than a batch of output, so each part has gone before the next starts.
    let code = "import time\n\
                from hermes_tools import read_file, terminal\n\
                print('before the calls', flush=True)\n\
                time.sleep(0.6)\n\
                read_file('notes.txt')\n\
                terminal('echo said-by-terminal')\n\
                time.sleep(0.6)\n\
                print('after the calls key sk-live0123456789abcdef', flush=True)\n";
    let out = walk(
        home.path(),
        TOOLSETS,
        json!([{"op": "call_with_progress", "name": "execute_code", "arguments": {"code": code}}]),
        &[],
    );
    let step = &out["steps"][0];
    assert_eq!(step["isError"], false, "{out}");
    let result: Value = serde_json::from_str(step["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(result["status"], "success", "{result}");
    assert_eq!(result["tool_calls_made"], 2, "{result}");

    let said = messages(&step["progress"]);
    let before = at(&said, "before the calls");
    let read = at(&said, "tool call 1 of at most 50: read_file");
    let terminal = at(&said, "tool call 2 of at most 50: terminal");
    let from_terminal = at(&said, "said-by-terminal");
    let after = at(&said, "after the calls");
    // In the order the script did them: the output came while the script ran, not
    // with its answer.
    assert!(
        before < read && read < terminal && terminal < from_terminal && from_terminal < after,
        "{said:#?}"
    );
    // Masked as the result is.
    assert!(
        !said[after].contains("sk-live0123456789abcdef"),
        "{}",
        said[after]
    );
    let values: Vec<f64> = step["progress"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["progress"].as_f64().unwrap())
        .collect();
    assert!(values.windows(2).all(|w| w[0] < w[1]), "{values:?}");
}

#[test]
fn a_cancelled_script_is_stopped_with_what_it_started() {
    let home = home_with(CONFIG);
    let script_marker = home.path().join("script-finished");
    let child_marker = home.path().join("child-finished");
    // The script starts a process of its own, then both would leave a mark in 2 s.
    let code = format!(
        "import subprocess, time\n\
         subprocess.Popen(['sh', '-c', 'sleep 2; touch {child}'])\n\
         print('script-started', flush=True)\n\
         time.sleep(2)\n\
         open({script:?}, 'w').write('done')\n",
        child = child_marker.display(),
        script = script_marker.display().to_string(),
    );
    let out = walk(
        home.path(),
        TOOLSETS,
        json!([
            {"op": "cancel_on_progress", "name": "execute_code", "arguments": {"code": code},
             "cancel_on": "script-started", "wait": 3, "quiet": 1},
            // The session still serves calls afterwards.
            {"op": "call_tool", "name": "read_file", "arguments": {"path": "config.yaml"}},
        ]),
        &[],
    );
    let cancelled = &out["steps"][0];
    assert_eq!(cancelled["seen"], true, "{out}");
    assert_eq!(
        cancelled["answered"], false,
        "a cancelled call was answered: {out}"
    );
    assert!(!script_marker.exists(), "the cancelled script kept running");
    assert!(
        !child_marker.exists(),
        "a process the cancelled script started kept running"
    );
    assert_eq!(
        cancelled["progress_after_wait"], cancelled["progress_in_the_end"],
        "progress went on after the cancel: {out}"
    );
    assert_eq!(out["steps"][1]["isError"], false, "{out}");
}
