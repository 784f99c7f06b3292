//! execute_code through the binary: real Python scripts whose `hermes_tools` calls come
//! back over the Unix socket into the registry. The agent test uses a local STAND-IN
//! for the model endpoint (agent/tests/support/mod.rs: a scripted HTTP server on
//! 127.0.0.1, not a model).

#[path = "../agent/tests/support/mod.rs"]
mod support;
mod binary;

use binary::{call, content_of, hermes, serve, serve_call};
use serde_json::{json, Value};
use std::path::Path;

fn run(home: &Path, code: &str, extra: &[&str]) -> Value {
    call(home, "execute_code", &json!({"code": code}), extra)
}

#[test]
fn a_script_reads_a_file_through_hermes_tools() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("notes.txt"), "alpha\nbeta\ngamma\n").unwrap();
    let code = "from hermes_tools import read_file\nr = read_file('notes.txt')\nprint(r['total_lines'], [l.split('|', 1)[1] for l in r['content'].splitlines()])\n";
    let result = run(home.path(), code, &[]);
    assert_eq!(result["status"], "success", "{result}");
    assert_eq!(result["output"], "3 ['alpha', 'beta', 'gamma']\n");
    assert_eq!(result["tool_calls_made"], 1);
    assert!(result["duration_seconds"].as_f64().unwrap() >= 0.0);
    // Writes made by the script land in the working directory, like a direct call's.
    let write = "from hermes_tools import write_file, search_files\nwrite_file('made.txt', 'from the script\\n')\nprint(search_files('from the', target='content')['total_count'])\n";
    let result = run(home.path(), write, &[]);
    assert_eq!(result["status"], "success", "{result}");
    assert_eq!(std::fs::read_to_string(home.path().join("made.txt")).unwrap(), "from the script\n");
    assert_eq!(result["tool_calls_made"], 2);
}

#[test]
fn a_disabled_tool_cannot_be_imported_or_called() {
    let home = tempfile::tempdir().unwrap();
    let selected = ["--toolsets", "code_execution,file"];
    let import = run(home.path(), "from hermes_tools import terminal\n", &selected);
    assert_eq!(import["status"], "error", "{import}");
    assert!(import["error"].as_str().unwrap().contains("ImportError: cannot import name 'terminal'"), "{import}");
    // A script that speaks the protocol by hand is refused by the parent as well.
    let raw = "import hermes_tools\nprint(hermes_tools._call('terminal', {'command': 'touch by-script'}))\n";
    let result = run(home.path(), raw, &selected);
    assert!(result["output"].as_str().unwrap().contains("is not available in execute_code"), "{result}");
    assert!(!home.path().join("by-script").exists());
    assert_eq!(result["tool_calls_made"], 0);
    // With the terminal enabled, the same script's call runs.
    let allowed = run(home.path(), raw, &["--toolsets", "code_execution,file,terminal"]);
    assert_eq!(allowed["tool_calls_made"], 1, "{allowed}");
    assert!(home.path().join("by-script").exists());
}

#[test]
fn calls_from_a_script_go_through_the_approval_gate() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("keep.txt"), "x").unwrap();
    // Nobody can approve in `call`: a dangerous command fails closed, from a script too.
    let code = "from hermes_tools import terminal\nprint(terminal('chmod 777 keep.txt'))\n";
    let result = run(home.path(), code, &[]);
    assert_eq!(result["status"], "success", "{result}");
    let output = result["output"].as_str().unwrap();
    assert!(output.contains("approval") || output.contains("BLOCKED") || output.contains("blocked"), "{output}");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(home.path().join("keep.txt")).unwrap().permissions().mode();
    assert_ne!(mode & 0o777, 0o777, "the refused chmod ran");
}

#[test]
fn the_call_limit_and_the_timeout_are_enforced() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.yaml"), "code_execution:\n  max_tool_calls: 3\n  timeout: 2\n").unwrap();
    std::fs::write(home.path().join("a.txt"), "a\n").unwrap();
    let code = "from hermes_tools import read_file\nfor i in range(5):\n    r = read_file('a.txt', offset=1, limit=i + 1)\n    print(i, 'error' in r and r['error'][:40])\n";
    let result = run(home.path(), code, &[]);
    assert_eq!(result["tool_calls_made"], 3, "{result}");
    let output = result["output"].as_str().unwrap();
    assert!(output.contains("3 Tool call limit reached (3)") && output.contains("4 Tool call limit reached"), "{output}");

    let sleeper = "import time\nprint('started', flush=True)\ntime.sleep(60)\nprint('never')\n";
    let result = run(home.path(), sleeper, &[]);
    assert_eq!(result["status"], "timeout", "{result}");
    assert_eq!(result["error"], "Script timed out after 2s and was killed.");
    let output = result["output"].as_str().unwrap();
    assert!(output.starts_with("started") && !output.contains("never"), "{output}");
}

#[test]
fn large_output_is_capped_and_exit_codes_are_reported() {
    let home = tempfile::tempdir().unwrap();
    let result = run(home.path(), "print('x' * 200000)\nprint('END')\n", &[]);
    assert_eq!(result["stdout_truncated"], true, "{}", result["stdout_bytes_total"]);
    assert_eq!(result["stdout_bytes_total"], 200_005);
    assert!(result["output"].as_str().unwrap().len() < 60_000);
    assert!(result["output"].as_str().unwrap().trim_end().ends_with("END"));
    let failed = run(home.path(), "import sys\nprint('partial')\nsys.exit(3)\n", &[]);
    assert_eq!(failed["status"], "error");
    assert_eq!(failed["exit_code"], 3);
    assert_eq!(failed["error"], "Script exited with code 3");
    let empty = run(home.path(), "  ", &[]);
    assert_eq!(empty["error"], "No code provided.");
}

#[test]
fn the_description_names_only_the_enabled_sandbox_tools() {
    let home = tempfile::tempdir().unwrap();
    let description = |toolsets: &str| -> String {
        let out = hermes(home.path(), &["schema", "--toolsets", toolsets], "");
        let definitions: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
        let tool = definitions.iter().find(|d| d["function"]["name"] == "execute_code").expect("execute_code is offered");
        format!("{}\n{}", tool["function"]["description"].as_str().unwrap(), tool["function"]["parameters"]["properties"]["code"]["description"])
    };
    let files_only = description("code_execution,file");
    assert!(files_only.contains("read_file(path: str") && files_only.contains("patch(path: str"), "{files_only}");
    assert!(!files_only.contains("terminal("), "{files_only}");
    let with_terminal = description("code_execution,file,terminal");
    assert!(with_terminal.contains("terminal(command: str"), "{with_terminal}");
    assert!(with_terminal.contains("from hermes_tools import terminal, ..."), "{with_terminal}");
    let alone = description("code_execution");
    assert!(alone.contains("no tools are enabled for scripts"), "{alone}");
}

#[test]
fn serve_gives_scripts_only_its_own_selection() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("n.txt"), "served\n").unwrap();
    let code = "import hermes_tools\nprint(sorted(n for n in ('read_file', 'terminal', 'write_file') if hasattr(hermes_tools, n)))\nprint(hermes_tools.read_file('n.txt')['content'])\n";
    let answers = serve(home.path(), &["--toolsets", "code_execution,file", "--disabled", "terminal"], &[serve_call("e", "execute_code", &json!({"code": code}))]);
    let result = content_of(&answers, "e");
    assert_eq!(result["output"], "['read_file', 'write_file']\n1|served\n", "{result}");
}

#[test]
fn the_agent_loop_runs_a_script_with_the_sessions_tools() {
    use support::{final_answer, last_message, tool_calls, Reply, ScriptedModel};
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("data.txt"), "42\n").unwrap();
    let code = "from hermes_tools import read_file\nimport hermes_tools\nprint(read_file('data.txt')['content'], hasattr(hermes_tools, 'terminal'))\n";
    let model = ScriptedModel::script(vec![
        Reply::Json(tool_calls(&[("c1", "execute_code", json!({"code": code}))])),
        Reply::Json(final_answer("The file holds 42.")),
    ]);
    let out = hermes(
        home.path(),
        &["agent", "read data.txt with a script", "--toolsets", "code_execution,file", "--base-url", &model.base_url, "--model", "stand-in", "--api-key-env", "HERMES_TEST_NO_SUCH_KEY", "--quiet"],
        "",
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "The file holds 42.");
    let tool_result: Value = serde_json::from_str(&last_message(&model.request(1), "tool").unwrap()).unwrap();
    assert_eq!(tool_result["status"], "success", "{tool_result}");
    assert_eq!(tool_result["output"], "1|42 False\n");
}
