//! The `ssh` backend against a real sshd (tests/common/sshd.rs): the test starts its own daemon on 127.0.0.1 on
//! a free port, with a host key, a user key and an sshd_config generated into a temp dir
//! (`UsePAM no`, `StrictModes no`, running as the current user). `.ci/setup.d/20-terminal.sh`
//! installs openssh-server; without `sshd` this test FAILS instead of passing silently.

use hermes_runtime::{Registry, ToolCall, ToolContext};
use hermes_tools::tools::terminal;
use serde_json::{json, Value};
use std::process::Command;
use std::time::{Duration, Instant};
use tempfile::TempDir;

mod file_tools_env;
use file_tools_env::ToolCalls;

#[path = "common/sshd.rs"]
mod sshd;
use sshd::{current_user, start_sshd, start_sshd_with, Sshd};

struct Client {
    ctx: ToolContext,
    registry: Registry,
    task: String,
    _home: TempDir,
}

/// A Hermes home whose config.yaml runs the terminal over ssh to `sshd`.
fn ssh_home(sshd: &Sshd) -> TempDir {
    let home = TempDir::new().unwrap();
    let d = sshd.dir.path().display();
    std::fs::write(
        home.path().join("config.yaml"),
        format!(
            "terminal:\n  backend: ssh\n  ssh_host: 127.0.0.1\n  ssh_user: {user}\n  ssh_port: {port}\n  \
             ssh_key: {d}/user_key\n  ssh_known_hosts: {d}/known_hosts\n",
            user = current_user(),
            port = sshd.port
        ),
    )
    .unwrap();
    home
}

impl Client {
    fn new(sshd: &Sshd, task: &str) -> Client {
        let home = ssh_home(sshd);
        let task = format!("{task}-{}", std::process::id());
        let ctx = ToolContext::builder()
            .task_id(&task)
            .hermes_home(home.path())
            .build();
        let registry = Registry::with_home(&hermes_tools::CATALOG, home.path().to_path_buf());
        Client {
            ctx,
            registry,
            task,
            _home: home,
        }
    }

    fn call(&self, tool: &str, args: Value) -> Value {
        let raw = self
            .registry
            .handle_function_call(&ToolCall::new(tool, args), &self.ctx);
        serde_json::from_str(&raw).unwrap_or_else(|e| panic!("not JSON ({e}): {raw}"))
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        terminal::cleanup_task(&self.task);
    }
}

fn sleepers(tag: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let zombie = stat
            .rfind(')')
            .is_some_and(|i| stat[i + 2..].starts_with('Z'));
        if !zombie
            && String::from_utf8_lossy(&cmdline).replace('\0', " ").trim() == format!("sleep {tag}")
        {
            out.push(pid);
        }
    }
    out
}

#[test]
fn ssh_backend_runs_commands_keeps_state_and_kills_remote_trees() {
    let sshd = start_sshd();
    let c = Client::new(&sshd, "terminal-ssh");

    let r = c.call(
        "terminal",
        json!({"command": "echo hi; echo err >&2; whoami"}),
    );
    assert_eq!(r["output"], format!("hi\nerr\n{}", current_user()), "{r}");
    assert_eq!(r["exit_code"], 0);
    let home = std::env::var("HOME").unwrap_or_default();
    assert_eq!(
        r["cwd"],
        std::fs::canonicalize(&home)
            .unwrap()
            .to_string_lossy()
            .as_ref()
    );

    let r = c.call(
        "terminal",
        json!({"command": "cd /tmp && export HERMES_SSH_VAR=via-ssh; exit 3"}),
    );
    assert_eq!(r["exit_code"], 3);
    // `exit` skips the state save: nothing changed.
    let r = c.call(
        "terminal",
        json!({"command": "cd /tmp && export HERMES_SSH_VAR=via-ssh"}),
    );
    assert_eq!(r["cwd"], "/tmp");
    let r = c.call("terminal", json!({"command": "pwd; echo $HERMES_SSH_VAR"}));
    assert_eq!(r["output"], "/tmp\nvia-ssh");

    // Timeout: exit 124 and the remote tree is gone.
    let r = c.call("terminal", json!({"command": "sleep 4711", "timeout": 2}));
    assert_eq!(r["exit_code"], 124, "{r}");
    assert!(r["output"]
        .as_str()
        .unwrap()
        .ends_with("[Command timed out after 2s]"));
    let start = Instant::now();
    while !sleepers("4711").is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "remote sleep survived: {:?}",
            sleepers("4711")
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    // Background through the same connection, then kill.
    let r = c.call(
        "terminal",
        json!({"command": "echo bg-ok; sleep 4712", "background": true}),
    );
    let id = r["session_id"].as_str().unwrap().to_string();
    let start = Instant::now();
    while sleepers("4712").is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "remote background process did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let r = c.call("process", json!({"action": "kill", "session_id": id}));
    assert_eq!(r["status"], "killed", "{r}");
    let start = Instant::now();
    while !sleepers("4712").is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "remote background sleep survived"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let r = c.call("process", json!({"action": "log", "session_id": id}));
    assert_eq!(r["output"], "bg-ok");

    // A second task gets its own connection and its own cwd.
    let c2 = Client::new(&sshd, "terminal-ssh-2");
    let r = c2.call("terminal", json!({"command": "pwd"}));
    assert_eq!(
        r["output"],
        std::fs::canonicalize(&home)
            .unwrap()
            .to_string_lossy()
            .as_ref()
    );
}

#[test]
fn file_tools_work_on_the_remote_side() {
    // The remote user's home is a directory of its own (sshd's SetEnv), so `~` and
    // relative paths there are not this process's.
    // search_files goes through rg on this side (the container test covers grep and find).
    assert!(
        Command::new("sh")
            .args(["-c", "command -v rg"])
            .output()
            .unwrap()
            .status
            .success(),
        "rg was not found: run .ci/setup.d/20-terminal.sh (installs ripgrep) before this test"
    );
    let remote_home = TempDir::new().unwrap();
    let sshd = start_sshd_with(&format!("SetEnv HOME={}\n", remote_home.path().display()));
    let home = ssh_home(&sshd);
    let host_cwd = TempDir::new().unwrap();
    let task = format!("files-ssh-{}", std::process::id());
    let mut session = file_tools_env::Session::start(home.path(), host_cwd.path(), &task);
    let r = session.call("terminal", json!({"command": "pwd"}));
    let remote_home_real = std::fs::canonicalize(remote_home.path()).unwrap();
    assert_eq!(
        r["output"],
        remote_home_real.to_string_lossy().as_ref(),
        "{r}"
    );
    let dir = remote_home_real.join("work");
    file_tools_env::exercise(&mut session, &dir.to_string_lossy(), host_cwd.path());
    // Tasks of their own (each its own connection) editing one remote file at once.
    file_tools_env::concurrent_edits(&mut session, &dir.join("race.txt").to_string_lossy(), 6);
    // `~` in the file tools is the remote user's home.
    let r = session.call(
        "write_file",
        json!({"path": "~/from-write-file.txt", "content": "remote home\n"}),
    );
    assert_eq!(r["verified"], true, "{r}");
    session.finish();
    assert_eq!(
        std::fs::read_to_string(remote_home_real.join("from-write-file.txt")).unwrap(),
        "remote home\n"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("sub/written.py")).unwrap(),
        "x = 3\nprint(x, x)\n"
    );
}

#[test]
fn ssh_connection_failure_is_degraded_with_a_reason() {
    let home = TempDir::new().unwrap();
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    std::fs::write(
        home.path().join("config.yaml"),
        format!("terminal:\n  backend: ssh\n  ssh_host: 127.0.0.1\n  ssh_port: {port}\n"),
    )
    .unwrap();
    let ctx = ToolContext::builder()
        .task_id("terminal-ssh-down")
        .hermes_home(home.path())
        .build();
    let registry = Registry::with_home(&hermes_tools::CATALOG, home.path().to_path_buf());
    let raw = registry.handle_function_call(
        &ToolCall::new("terminal", json!({"command": "echo x"})),
        &ctx,
    );
    let r: Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(r["status"], "degraded", "{r}");
    assert!(
        r["reason"]
            .as_str()
            .unwrap()
            .contains("ssh connection to 127.0.0.1"),
        "{r}"
    );
    assert!(r["retry_hint"].as_str().is_some());
}
