//! `execute_code` over `hermes-tools mcp`, driven by the Python `mcp` package's
//! `ClientSession` (mcp/tests/fixtures/py_library_client.py) on stdio: a call with a
//! progress token sees the script's stdout and each of its tool calls as progress while
//! the script runs, and `notifications/cancelled` stops the script with everything it
//! started, as it stops a terminal command. The same holds on the ssh backend, against
//! a real sshd of the test's own on loopback (tests/common/sshd.rs).

mod mcp_support;
#[path = "common/sshd.rs"]
mod sshd;

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

/// Runs `code` with execute_code over `hermes-tools mcp` in `home`, with a progress
/// token: the step (answer and progress) and the tool's result, which succeeded.
fn run_with_progress(home: &std::path::Path, code: &str) -> (Value, Value) {
    let out = walk(
        home,
        TOOLSETS,
        json!([{"op": "call_with_progress", "name": "execute_code", "arguments": {"code": code}}]),
        &[],
    );
    let step = out["steps"][0].clone();
    assert_eq!(step["isError"], false, "{out}");
    let result: Value = serde_json::from_str(step["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(result["status"], "success", "{result}");
    (step, result)
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
    let (step, result) = run_with_progress(home.path(), code);
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

#[test]
fn on_the_ssh_backend_a_scripts_output_arrives_as_progress_while_it_runs() {
    let sshd = sshd::start_sshd();
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.yaml"),
        format!(
            "{CONFIG}terminal:\n  backend: ssh\n  ssh_host: 127.0.0.1\n  ssh_user: {user}\n  ssh_port: {port}\n  \
             ssh_key: {d}/user_key\n  ssh_known_hosts: {d}/known_hosts\n",
            user = sshd::current_user(),
            port = sshd.port,
            d = sshd.dir.path().display(),
        ),
    )
    .unwrap();
    let code = "import os, time\n\
                from hermes_tools import terminal\n\
                print('before the call', flush=True)\n\
                time.sleep(0.6)\n\
                terminal('echo said-by-terminal')\n\
                time.sleep(0.6)\n\
                print('after the call key sk-live0123456789abcdef', flush=True)\n\
                print('runs in', os.environ.get('SSH_CONNECTION', 'no ssh session').split()[2:3], flush=True)\n";
    let (step, result) = run_with_progress(home.path(), code);
    assert_eq!(result["tool_calls_made"], 1, "{result}");
    // It ran over ssh: the script's environment is an ssh session to the loopback sshd.
    let output = result["output"].as_str().unwrap();
    assert!(output.contains("runs in ['127.0.0.1']"), "{output}");
    assert!(output.contains("before the call"), "{output}");

    let said = messages(&step["progress"]);
    let before = at(&said, "before the call");
    let call = at(&said, "tool call 1 of at most 50: terminal");
    let from_terminal = at(&said, "said-by-terminal");
    let after = at(&said, "after the call");
    assert!(
        before < call && call < from_terminal && from_terminal < after,
        "{said:#?}"
    );
    assert!(
        !said[after].contains("sk-live0123456789abcdef"),
        "{}",
        said[after]
    );
    // Whole lines, each once: the frames of the output and of the tool call shared
    // the stream without mixing.
    let shown: Vec<&str> = said
        .iter()
        .flat_map(|m| m.lines())
        .filter(|l| l.contains("before the call") || l.contains("after the call"))
        .collect();
    assert_eq!(shown.len(), 2, "{said:#?}");
    assert!(
        said.iter()
            .all(|m| !m.contains("hermes-out:") && !m.contains("hermes-rpc:")),
        "{said:#?}"
    );
}
