//! execute_code through the binary: real Python scripts whose `hermes_tools` calls come
//! back over a Unix socket pair into the registry, run inside the terminal's OS sandbox
//! (bubblewrap; `.ci/setup.d/25-sandbox.sh`) in the default configuration. Victims of
//! the containment tests live outside /tmp (writable inside the sandbox). The agent test
//! uses a local STAND-IN for the model endpoint (agent/tests/support/mod.rs: a scripted
//! HTTP server on 127.0.0.1, not a model).

mod binary;
mod common;
#[path = "../agent/tests/support/mod.rs"]
mod support;

use binary::{call, content_of, hermes, serve, serve_call};
use serde_json::{json, Value};
use std::path::Path;

/// The operator's opt-in that lets scripts outside the OS sandbox run where nobody can
/// approve them (`call`, `serve`), plus `extra` config lines.
fn allow_scripts(home: &Path, extra: &str) {
    std::fs::write(
        home.join("config.yaml"),
        format!("approvals:\n  unattended_mode: approve\n{extra}"),
    )
    .unwrap();
}

fn configure(home: &Path, yaml: &str) {
    std::fs::write(home.join("config.yaml"), yaml).unwrap();
}

const SECRET: &str = "sk-canary-51d0c3e8a2";

/// `hermes-tools call execute_code` unattended in `workspace` (not HERMES_HOME, which
/// is read-only inside the sandbox), with a provider key in the server's environment.
fn run_in(home: &Path, workspace: &Path, code: &str) -> Value {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hermes-tools"))
        .args([
            "call",
            "execute_code",
            &json!({"code": code}).to_string(),
            "--cwd",
            workspace.to_str().unwrap(),
        ])
        .env("HERMES_HOME", home)
        .env("HOME", home)
        .env("OPENAI_API_KEY", SECRET)
        .env_remove("HERMES_INTERACTIVE")
        .env_remove("TERMINAL_ENV")
        .env_remove("TERMINAL_SANDBOX_MODE")
        .current_dir(workspace)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.trim()).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {text} {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

#[test]
fn a_contained_script_cannot_write_outside_its_roots_nor_reach_secrets() {
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir_in(common::outside_base()).unwrap();
    let victim = outside.path().join("precious.txt");
    std::fs::write(&victim, "keep me").unwrap();
    configure(
        home.path(),
        "terminal:\n  env_passthrough: [HERMES_NOTHING_HERE]\n",
    );
    let config = home.path().join("config.yaml");
    std::fs::create_dir(home.path().join(".ssh")).unwrap();
    let keys = home.path().join(".ssh/authorized_keys");
    std::fs::write(&keys, "ssh-ed25519 AAAA owner\n").unwrap();
    let code = format!(
        r#"import os
open("made-inside.txt", "w").write("ok")
for target in ({victim:?}, {config:?}, {keys:?}):
    try:
        open(target, "a").write("approvals: {{unattended_mode: approve}}\n")
        print("wrote", target)
    except OSError as e:
        print("refused", e.strerror)
print("env has it:", any({SECRET:?} in v for v in os.environ.values()))
leaked = False
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        leaked = leaked or {SECRET:?}.encode() in open("/proc/%s/environ" % pid, "rb").read()
    except OSError:
        pass
print("proc has it:", leaked)
"#
    );
    let result = run_in(home.path(), workspace.path(), &code);
    assert_eq!(result["status"], "success", "{result}");
    let output = result["output"].as_str().unwrap();
    assert_eq!(
        output.matches("refused Read-only file system").count(),
        3,
        "{output}"
    );
    assert!(!output.contains("wrote"), "{output}");
    assert!(
        output.contains("env has it: False") && output.contains("proc has it: False"),
        "{output}"
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me");
    assert_eq!(
        std::fs::read_to_string(&config).unwrap(),
        "terminal:\n  env_passthrough: [HERMES_NOTHING_HERE]\n"
    );
    assert_eq!(
        std::fs::read_to_string(&keys).unwrap(),
        "ssh-ed25519 AAAA owner\n"
    );
    // The working directory is a writable root, as for terminal commands.
    assert_eq!(
        std::fs::read_to_string(workspace.path().join("made-inside.txt")).unwrap(),
        "ok"
    );
    assert!(
        result["sandbox"].is_null(),
        "a script that succeeded gets no sandbox note: {result}"
    );
    // A script that fails on the wall is told which settings govern it.
    let failed = run_in(
        home.path(),
        workspace.path(),
        &format!("open({victim:?}, 'w').write('x')\n"),
    );
    assert_eq!(failed["status"], "error", "{failed}");
    assert!(
        failed["sandbox"]
            .as_str()
            .unwrap_or_default()
            .contains("terminal.sandbox.writable_roots"),
        "{failed}"
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me");
}

#[test]
fn a_contained_script_reaches_no_host_loopback_service() {
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let code = format!(
        "import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), timeout=5).close()\n    print('connected')\nexcept OSError as e:\n    print('refused', e)\n"
    );
    configure(home.path(), "terminal:\n  sandbox:\n    network: false\n");
    let result = run_in(home.path(), workspace.path(), &code);
    let output = result["output"].as_str().unwrap();
    assert!(output.starts_with("refused"), "{result}");
    // The default keeps the host's loopback out of reach too.
    configure(home.path(), "");
    let result = run_in(home.path(), workspace.path(), &code);
    let output = result["output"].as_str().unwrap();
    assert!(output.starts_with("refused"), "{result}");
    // Without the sandbox the same script reaches the host's listener.
    configure(
        home.path(),
        "terminal:\n  sandbox:\n    mode: off\napprovals:\n  unattended_mode: approve\n",
    );
    let result = run_in(home.path(), workspace.path(), &code);
    assert_eq!(result["output"], "connected\n", "{result}");
    drop(listener);
}

#[test]
fn a_floor_in_a_script_refuses_it_before_it_runs() {
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let code = "open('ran.txt', 'w').write('x')\nimport os\nos.system('rm -rf /')\n";
    let result = run_in(home.path(), workspace.path(), code);
    assert_eq!(result["status"], "error", "{result}");
    assert!(
        result["error"].as_str().unwrap().contains("BLOCKED"),
        "{result}"
    );
    assert_eq!(result["tool_calls_made"], 0);
    assert!(
        !workspace.path().join("ran.txt").exists(),
        "the refused script ran"
    );
}

#[test]
fn nothing_a_contained_script_started_survives_its_timeout() {
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    configure(home.path(), "code_execution:\n  timeout: 3\n");
    let code = "import subprocess, time\nsubprocess.Popen(['sleep', '3021.25'])\nsubprocess.Popen(['setsid', 'sleep', '3022.25'])\nprint('started', flush=True)\ntime.sleep(600)\nprint('never')\n";
    let result = run_in(home.path(), workspace.path(), code);
    assert_eq!(result["status"], "timeout", "{result}");
    assert_eq!(result["error"], "Script timed out after 3s and was killed.");
    assert!(
        result["output"].as_str().unwrap().starts_with("started"),
        "{result}"
    );
    assert!(
        !result["output"].as_str().unwrap().contains("never"),
        "{result}"
    );
    assert_eq!(
        common::survivors("sleep 3021.25"),
        Vec::<u32>::new(),
        "the script's child outlived the timeout"
    );
    assert_eq!(
        common::survivors("sleep 3022.25"),
        Vec::<u32>::new(),
        "the detached child outlived the timeout"
    );
}

fn run(home: &Path, code: &str, extra: &[&str]) -> Value {
    call(home, "execute_code", &json!({"code": code}), extra)
}

#[test]
fn with_the_sandbox_off_a_script_without_an_approver_is_refused_before_it_runs() {
    let home = tempfile::tempdir().unwrap();
    configure(home.path(), "terminal:\n  sandbox:\n    mode: off\n");
    let result = run(home.path(), "open('ran.txt', 'w').write('x')\n", &[]);
    assert_eq!(result["status"], "error", "{result}");
    let error = result["error"].as_str().unwrap();
    assert!(
        error.contains("BLOCKED") && error.contains("approvals.unattended_mode"),
        "{error}"
    );
    assert_eq!(result["tool_calls_made"], 0);
    assert!(
        !home.path().join("ran.txt").exists(),
        "the refused script ran"
    );
    // Scheduled runs answer to approvals.cron_mode instead (deny by default).
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hermes-tools"))
        .args([
            "call",
            "execute_code",
            &json!({"code": "open('ran.txt', 'w').write('x')"}).to_string(),
        ])
        .env("HERMES_HOME", home.path())
        .env("HERMES_CRON_SESSION", "1")
        .current_dir(home.path())
        .output()
        .unwrap();
    let cron: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        cron["error"]
            .as_str()
            .unwrap()
            .contains("approvals.cron_mode"),
        "{cron}"
    );
    assert!(!home.path().join("ran.txt").exists());
    // With the operator's opt-in it runs with the server's rights: HERMES_HOME, read-only
    // inside the sandbox, is writable to it.
    configure(
        home.path(),
        "terminal:\n  sandbox:\n    mode: off\napprovals:\n  unattended_mode: approve\n",
    );
    let result = run(home.path(), "open('ran.txt', 'w').write('x')\n", &[]);
    assert_eq!(result["status"], "success", "{result}");
    assert!(home.path().join("ran.txt").exists());
}

#[test]
fn a_script_reads_a_file_through_hermes_tools() {
    // No approval settings: the script runs contained, unattended.
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
    assert_eq!(
        std::fs::read_to_string(home.path().join("made.txt")).unwrap(),
        "from the script\n"
    );
    assert_eq!(result["tool_calls_made"], 2);
}

#[test]
fn a_disabled_tool_cannot_be_imported_or_called() {
    let home = tempfile::tempdir().unwrap();
    allow_scripts(home.path(), "");
    let selected = ["--toolsets", "code_execution,file"];
    let import = run(
        home.path(),
        "from hermes_tools import terminal\n",
        &selected,
    );
    assert_eq!(import["status"], "error", "{import}");
    assert!(
        import["error"]
            .as_str()
            .unwrap()
            .contains("ImportError: cannot import name 'terminal'"),
        "{import}"
    );
    // A script that speaks the protocol by hand is refused by the parent as well. The
    // marker lies outside HERMES_HOME, which commands may not write (the OS sandbox).
    let workspace = tempfile::tempdir().unwrap();
    let marker = workspace.path().join("by-script");
    let raw = format!(
        "import hermes_tools\nprint(hermes_tools._call('terminal', {{'command': 'touch {}'}}))\n",
        marker.display()
    );
    let raw = raw.as_str();
    let result = run(home.path(), raw, &selected);
    assert!(
        result["output"]
            .as_str()
            .unwrap()
            .contains("is not available in execute_code"),
        "{result}"
    );
    assert!(!marker.exists());
    assert_eq!(result["tool_calls_made"], 0);
    // With the terminal enabled, the same script's call runs.
    let allowed = run(
        home.path(),
        raw,
        &["--toolsets", "code_execution,file,terminal"],
    );
    assert_eq!(allowed["tool_calls_made"], 1, "{allowed}");
    assert!(marker.exists());
}

#[test]
fn calls_from_a_script_go_through_the_approval_gate() {
    let home = tempfile::tempdir().unwrap();
    // Scripts may run, but the operator's deny rule still stops the command a script sends.
    allow_scripts(home.path(), "  deny: ['chmod 777*']\n");
    std::fs::write(home.path().join("keep.txt"), "x").unwrap();
    // The command is put together at run time, so the script's own text does not show it
    // (a literal would be refused with the whole script, see below).
    let code =
        "from hermes_tools import terminal\nprint(terminal('chmod ' + str(777) + ' keep.txt'))\n";
    let result = run(home.path(), code, &[]);
    assert_eq!(result["status"], "success", "{result}");
    let output = result["output"].as_str().unwrap();
    assert!(
        output.contains("BLOCKED") && output.contains("chmod 777"),
        "{output}"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(home.path().join("keep.txt"))
        .unwrap()
        .permissions()
        .mode();
    assert_ne!(mode & 0o777, 0o777, "the refused chmod ran");
    // A literal the rule names refuses the script before it runs, as for a script the
    // terminal runs in its sandbox.
    let literal = run(
        home.path(),
        "from hermes_tools import terminal\nprint(terminal('chmod 777 keep.txt'))\n",
        &[],
    );
    assert!(
        literal["error"]
            .as_str()
            .unwrap()
            .contains("deny rule 'chmod 777*'"),
        "{literal}"
    );
    assert_eq!(literal["tool_calls_made"], 0);
}

#[test]
fn the_call_limit_is_enforced() {
    let home = tempfile::tempdir().unwrap();
    allow_scripts(home.path(), "code_execution:\n  max_tool_calls: 3\n");
    std::fs::write(home.path().join("a.txt"), "a\n").unwrap();
    let code = "from hermes_tools import read_file\nfor i in range(5):\n    r = read_file('a.txt', offset=1, limit=i + 1)\n    print(i, 'error' in r and r['error'][:40])\n";
    let result = run(home.path(), code, &[]);
    assert_eq!(result["status"], "success", "{result}");
    assert_eq!(result["tool_calls_made"], 3, "{result}");
    let output = result["output"].as_str().unwrap();
    assert!(
        output.contains("3 Tool call limit reached (3)")
            && output.contains("4 Tool call limit reached"),
        "{output}"
    );
}

#[test]
fn large_output_is_capped_and_exit_codes_are_reported() {
    let home = tempfile::tempdir().unwrap();
    allow_scripts(home.path(), "");
    let result = run(home.path(), "print('x' * 200000)\nprint('END')\n", &[]);
    assert_eq!(
        result["stdout_truncated"], true,
        "{}",
        result["stdout_bytes_total"]
    );
    assert_eq!(result["stdout_bytes_total"], 200_005);
    assert!(result["output"].as_str().unwrap().len() < 60_000);
    assert!(result["output"]
        .as_str()
        .unwrap()
        .trim_end()
        .ends_with("END"));
    let failed = run(
        home.path(),
        "import sys\nprint('partial')\nsys.exit(3)\n",
        &[],
    );
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
        let tool = definitions
            .iter()
            .find(|d| d["function"]["name"] == "execute_code")
            .expect("execute_code is offered");
        format!(
            "{}\n{}",
            tool["function"]["description"].as_str().unwrap(),
            tool["function"]["parameters"]["properties"]["code"]["description"]
        )
    };
    let files_only = description("code_execution,file");
    assert!(
        files_only.contains("read_file(path: str") && files_only.contains("patch(path: str"),
        "{files_only}"
    );
    assert!(!files_only.contains("terminal("), "{files_only}");
    let with_terminal = description("code_execution,file,terminal");
    assert!(
        with_terminal.contains("terminal(command: str"),
        "{with_terminal}"
    );
    assert!(
        with_terminal.contains("from hermes_tools import terminal, ..."),
        "{with_terminal}"
    );
    let alone = description("code_execution");
    assert!(
        alone.contains("no tools are enabled for scripts"),
        "{alone}"
    );
}

#[test]
fn serve_gives_scripts_only_its_own_selection() {
    let home = tempfile::tempdir().unwrap();
    allow_scripts(home.path(), "");
    std::fs::write(home.path().join("n.txt"), "served\n").unwrap();
    let code = "import hermes_tools\nprint(sorted(n for n in ('read_file', 'terminal', 'write_file') if hasattr(hermes_tools, n)))\nprint(hermes_tools.read_file('n.txt')['content'])\n";
    let answers = serve(
        home.path(),
        &[
            "--toolsets",
            "code_execution,file",
            "--disabled",
            "terminal",
        ],
        &[serve_call("e", "execute_code", &json!({"code": code}))],
    );
    let result = content_of(&answers, "e");
    assert_eq!(
        result["output"], "['read_file', 'write_file']\n1|served\n",
        "{result}"
    );
}

#[test]
fn the_agent_loop_runs_a_script_with_the_sessions_tools() {
    use support::{final_answer, last_message, tool_calls, Reply, ScriptedModel};
    let home = tempfile::tempdir().unwrap();
    allow_scripts(home.path(), "");
    std::fs::write(home.path().join("data.txt"), "42\n").unwrap();
    let code = "from hermes_tools import read_file\nimport hermes_tools\nprint(read_file('data.txt')['content'], hasattr(hermes_tools, 'terminal'))\n";
    let model = ScriptedModel::script(vec![
        Reply::Json(tool_calls(&[("c1", "execute_code", json!({"code": code}))])),
        Reply::Json(final_answer("The file holds 42.")),
    ]);
    let out = hermes(
        home.path(),
        &[
            "agent",
            "read data.txt with a script",
            "--toolsets",
            "code_execution,file",
            "--base-url",
            &model.base_url,
            "--model",
            "stand-in",
            "--api-key-env",
            "HERMES_TEST_NO_SUCH_KEY",
            "--quiet",
        ],
        "",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "The file holds 42."
    );
    let tool_result: Value =
        serde_json::from_str(&last_message(&model.request(1), "tool").unwrap()).unwrap();
    assert_eq!(tool_result["status"], "success", "{tool_result}");
    assert_eq!(tool_result["output"], "1|42 False\n");
}

// ------------------------------------------------------------------ remote backends

/// A `hermes-tools serve` of one task in `workspace`, its calls made one at a time.
fn serve_session(
    home: &Path,
    workspace: &Path,
    env: &[(&str, &std::ffi::OsStr)],
) -> common::ServeSession {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_hermes-tools"));
    command
        .arg("serve")
        .env("HERMES_HOME", home)
        .env("HOME", home)
        .env_remove("HERMES_INTERACTIVE")
        .env_remove("TERMINAL_ENV")
        .envs(env.iter().map(|(k, v)| (*k, *v)))
        .current_dir(workspace);
    common::ServeSession::spawn(command, json!({"task_id": "remote"}))
}

/// The script of the remote tests: where it runs, a file it writes, and the terminal's
/// view of that file from inside the same environment.
const WHERE_AM_I: &str = "import os\nfrom hermes_tools import terminal\nopen('made-by-script.txt', 'w').write('written by the script\\n')\n\
print(os.getcwd(), bool(os.environ.get('SSH_CONNECTION')))\nprint(terminal('cat made-by-script.txt')['output'])\n";

/// podman (the docker backend, as tests/terminal_docker.rs drives it) with an image that
/// holds bash, coreutils and the host's Debian Python 3 with its standard library. No
/// registry is reachable, so the image is imported from a tarball built here;
/// `.ci/setup.d/20-terminal.sh` installs podman, runc and Python.
fn python_image() -> &'static (tempfile::TempDir, String) {
    static SETUP: std::sync::OnceLock<(tempfile::TempDir, String)> = std::sync::OnceLock::new();
    SETUP.get_or_init(|| {
        let podman = common::which("podman").expect("podman was not found: run .ci/setup.d/20-terminal.sh");
        let python = std::fs::canonicalize("/usr/bin/python3").expect("/usr/bin/python3 is missing: run .ci/setup.d/20-terminal.sh");
        let version = python.file_name().unwrap().to_string_lossy().into_owned();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("containers.conf"), "[containers]\ndefault_ulimits = []\n").unwrap();
        let rootfs = dir.path().join("rootfs");
        common::build_rootfs(&rootfs, &["bash", "cat", "mv", "rm", "mkdir", "head", "sleep", "ls"]);
        let build = format!(
            "set -e; r={r}; mkdir -p $r/usr/bin $r/usr/lib; cp {py} $r/usr/bin/; ln -s {v} $r/usr/bin/python3
             for l in $(ldd {py} | grep -o '/[^ ]*'); do mkdir -p $r$(dirname $l); cp -n $l $r$l; done
             tar -C /usr/lib --exclude='__pycache__' --exclude={v}/test --exclude={v}/idlelib --exclude={v}/tkinter \
               --exclude={v}/ensurepip --exclude={v}/lib2to3 -cf - {v} | tar -C $r/usr/lib -xf -
             tar -C $r -cf {d}/rootfs.tar . && CONTAINERS_CONF={d}/containers.conf {podman} import {d}/rootfs.tar {EXEC_IMAGE} >/dev/null",
            r = rootfs.display(),
            py = python.display(),
            v = version,
            d = dir.path().display(),
        );
        let out = std::process::Command::new("bash").arg("-c").arg(&build).stdin(std::process::Stdio::null()).output().unwrap();
        assert!(out.status.success(), "building the test image failed: {}", String::from_utf8_lossy(&out.stderr));
        (dir, podman)
    })
}

const EXEC_IMAGE: &str = "localhost/hermes-execute-code-test:latest";

#[test]
fn in_a_podman_container_the_script_runs_where_the_terminal_runs() {
    let (dir, podman) = python_image();
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    configure(
        home.path(),
        &format!(
            "terminal:\n  backend: docker\n  docker_binary: {podman}\n  docker_global_args: [\"--runtime\", \"runc\"]\n  \
             docker_run_args: [\"--ulimit\", \"host\"]\n  docker_image: {EXEC_IMAGE}\n  container_memory: 512\n\
             code_execution:\n  timeout: 20\n"
        ),
    );
    let conf = dir.path().join("containers.conf");
    let mut session = serve_session(
        home.path(),
        workspace.path(),
        &[("CONTAINERS_CONF", conf.as_os_str())],
    );
    let moved = session.call(
        "terminal",
        json!({"command": "mkdir -p /root/work && cd /root/work"}),
    );
    assert_eq!(moved["exit_code"], 0, "{moved}");
    // Unattended and without any approval setting: a container without host mounts is
    // isolated, as for its terminal commands.
    let result = session.call("execute_code", json!({"code": WHERE_AM_I}));
    assert_eq!(result["status"], "success", "{result}");
    assert_eq!(
        result["output"], "/root/work False\nwritten by the script\n",
        "{result}"
    );
    assert_eq!(result["tool_calls_made"], 1);
    let seen = session.call(
        "terminal",
        json!({"command": "cat made-by-script.txt; cat /etc/passwd"}),
    );
    assert_eq!(
        seen["output"], "written by the script\nroot:x:0:0:root:/root:/bin/bash",
        "{seen}"
    );
    assert!(
        !workspace.path().join("made-by-script.txt").exists(),
        "the script ran on the host"
    );
    // The timeout stops what the script started inside the container (its processes are
    // host processes too, under the container's PID namespace).
    let sleeper = "import subprocess, time\nsubprocess.Popen(['sleep', '3031.25'])\nprint('started', flush=True)\ntime.sleep(600)\n";
    configure(
        home.path(),
        &std::fs::read_to_string(home.path().join("config.yaml"))
            .unwrap()
            .replace("timeout: 20", "timeout: 3"),
    );
    let timed_out = session.call("execute_code", json!({"code": sleeper}));
    assert_eq!(timed_out["status"], "timeout", "{timed_out}");
    assert_eq!(
        timed_out["output"].as_str().unwrap().lines().next(),
        Some("started"),
        "{timed_out}"
    );
    assert_eq!(
        common::survivors("sleep 3031.25"),
        Vec::<u32>::new(),
        "the script's child outlived the timeout"
    );
}

#[path = "common/sshd.rs"]
mod sshd;

#[test]
fn over_ssh_the_script_runs_in_the_remote_shell() {
    let daemon = sshd::start_sshd();
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    // On the loopback the remote's file system is this machine's: the remote working
    // directory is a temp dir of its own, apart from the server's.
    let remote = tempfile::tempdir().unwrap();
    let remote_cwd = std::fs::canonicalize(remote.path()).unwrap();
    let d = daemon.dir.path().display();
    let ssh = format!(
        "terminal:\n  backend: ssh\n  ssh_host: 127.0.0.1\n  ssh_user: {user}\n  ssh_port: {port}\n  ssh_key: {d}/user_key\n  \
         ssh_known_hosts: {d}/known_hosts\n  cwd: {cwd}\n",
        user = sshd::current_user(),
        port = daemon.port,
        cwd = remote_cwd.display(),
    );
    // ssh reaches a real machine with the user's rights: as for its terminal commands,
    // a script is refused where nobody can approve it, unless the operator opted in.
    configure(home.path(), &ssh);
    let mut session = serve_session(home.path(), workspace.path(), &[]);
    let refused = session.call("execute_code", json!({"code": WHERE_AM_I}));
    assert!(
        refused["error"]
            .as_str()
            .unwrap_or_default()
            .contains("approvals.unattended_mode"),
        "{refused}"
    );
    drop(session);
    configure(
        home.path(),
        &format!("{ssh}approvals:\n  unattended_mode: approve\n"),
    );
    let mut session = serve_session(home.path(), workspace.path(), &[]);
    let result = session.call("execute_code", json!({"code": WHERE_AM_I}));
    assert_eq!(result["status"], "success", "{result}");
    assert_eq!(
        result["output"],
        format!("{} True\nwritten by the script\n", remote_cwd.display()),
        "{result}"
    );
    let seen = session.call("terminal", json!({"command": "cat made-by-script.txt"}));
    assert_eq!(seen["output"], "written by the script", "{seen}");
    assert!(remote_cwd.join("made-by-script.txt").exists());
    assert!(
        !workspace.path().join("made-by-script.txt").exists(),
        "the script ran in the server's directory"
    );
}

/// Singularity through the stand-in for the `apptainer` CLI (tests/fakes/apptainer: no
/// apptainer package exists for the test machines; it runs the host's bash and Python in
/// a private mount namespace with the instance's own /tmp and /root, following
/// apptainer's `--cleanenv` rules). The script, its `hermes_tools` calls and their
/// answers travel through `apptainer exec` like the terminal's commands.
fn singularity_session(state: &Path, home: &Path, workspace: &Path) -> common::ServeSession {
    let standin = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fakes/apptainer");
    configure(
        home,
        &format!(
            "terminal:\n  backend: singularity\n  singularity_binary: {}\n  singularity_image: docker://debian:12-slim\n\
             code_execution:\n  timeout: 20\n",
            standin.display()
        ),
    );
    serve_session(
        home,
        workspace,
        &[("APPTAINER_STANDIN_STATE", state.as_os_str())],
    )
}

#[test]
fn in_a_singularity_instance_the_script_runs_where_the_terminal_runs() {
    let state = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let mut session = singularity_session(state.path(), home.path(), workspace.path());
    let moved = session.call(
        "terminal",
        json!({"command": "mkdir -p /tmp/work && cd /tmp/work"}),
    );
    assert_eq!(moved["exit_code"], 0, "{moved}");
    let result = session.call("execute_code", json!({"code": WHERE_AM_I}));
    assert_eq!(result["status"], "success", "{result}");
    assert_eq!(
        result["output"], "/tmp/work False\nwritten by the script\n",
        "{result}"
    );
    assert_eq!(result["tool_calls_made"], 1);
    let seen = session.call("terminal", json!({"command": "cat made-by-script.txt"}));
    assert_eq!(seen["output"], "written by the script", "{seen}");
    assert!(
        !workspace.path().join("made-by-script.txt").exists(),
        "the script ran in the server's directory"
    );
    let instances: Vec<_> = std::fs::read_dir(state.path().join("instances"))
        .unwrap()
        .flatten()
        .collect();
    assert_eq!(instances.len(), 1);
    assert!(
        instances[0]
            .path()
            .join("tmp/work/made-by-script.txt")
            .is_file(),
        "not in the instance's own /tmp"
    );
    drop(session);
    let calls = std::fs::read_to_string(state.path().join("calls.log")).unwrap();
    assert!(
        calls.contains("/script.py"),
        "the script did not go through the CLI:\n{calls}"
    );
    assert!(
        calls
            .lines()
            .filter(|l| l.starts_with("exec "))
            .all(|l| l.starts_with("exec --cleanenv instance://")),
        "{calls}"
    );
}

/// A script that prints far more than is kept takes no more room than the cap in the
/// remote environment while it runs, and its head, tail and total still come back.
#[test]
fn a_remote_script_that_prints_without_end_keeps_only_the_cap_on_the_remote_disk() {
    let state = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let mut session = singularity_session(state.path(), home.path(), workspace.path());
    let code = "import os, sys, time\nprint('first line')\nchunk = 'x' * 1023 + '\\n'\n\
                for _ in range(20 * 1024):\n    sys.stdout.write(chunk)\n\
                sys.stderr.write('e' * 300000)\nsys.stdout.flush(); sys.stderr.flush(); time.sleep(0.5)\n\
                d = os.environ['HERMES_RPC_DIR']\n\
                used = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d) if f.startswith(('stdout', 'stderr')))\n\
                print('bytes on disk', used)\nprint('last line')\n";
    let result = session.call("execute_code", json!({"code": code}));
    assert_eq!(result["status"], "success", "{result}");
    let output = result["output"].as_str().unwrap();
    assert!(output.starts_with("first line\nxxx"), "{output:.200}");
    assert!(
        output.ends_with("last line\n"),
        "{}",
        &output[output.len().saturating_sub(200)..]
    );
    let used: usize = output
        .lines()
        .find_map(|l| l.strip_prefix("bytes on disk "))
        .expect("the script measured its files")
        .parse()
        .unwrap();
    assert!(
        used <= 50_000 + 10_000 + 16,
        "the outputs took {used} bytes on the remote disk"
    );
    assert!(output.contains("bytes omitted out of"), "{output:.300}");
    assert!(
        result["stdout_bytes_total"].as_u64().unwrap() > 20 * 1024 * 1024,
        "{}",
        result["stdout_bytes_total"]
    );
}

#[test]
fn backends_that_cannot_carry_the_calls_say_so_instead_of_running_on_the_host() {
    let home = tempfile::tempdir().unwrap();
    for backend in ["modal", "daytona", "vercel_sandbox"] {
        configure(home.path(), &format!("terminal:\n  backend: {backend}\n"));
        let result = run(home.path(), "open('ran.txt', 'w').write('x')\n", &[]);
        let error = result["error"]
            .as_str()
            .unwrap_or_else(|| panic!("{result}"));
        assert!(
            error.contains(&format!(
                "cannot run scripts on the {backend} terminal backend"
            )),
            "{error}"
        );
        assert!(!home.path().join("ran.txt").exists());
    }
}
