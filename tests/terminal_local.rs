//! The `terminal` and `process` tools on the `local` backend: real bash, real process
//! trees, calls through the registry's entry point (and `run_terminal` where a test needs
//! `force`). Time bounds here only separate "hung" from "finished".

use hermes_runtime::{Registry, ToolCall, ToolContext};
use hermes_tools::tools::terminal::{self, run_terminal, TerminalRequest};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tempfile::TempDir;

struct T {
    dir: TempDir,
    home: TempDir,
    ctx: ToolContext,
    registry: Registry,
    task: String,
}

fn t() -> T {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    // Foreground commands run in the task's long-lived sandbox, through the binary's launcher.
    hermes_sandbox::launcher::set_program(env!("CARGO_BIN_EXE_hermes-tools"))
        .expect("the launcher program opens");
    let dir = TempDir::new().unwrap();
    let home = TempDir::new().unwrap();
    let task = format!(
        "terminal-local-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    let ctx = ToolContext::builder()
        .cwd(dir.path())
        .task_id(&task)
        .hermes_home(home.path())
        .build();
    let registry = Registry::with_home(&hermes_tools::CATALOG, home.path().to_path_buf());
    T {
        dir,
        home,
        ctx,
        registry,
        task,
    }
}

impl T {
    fn call(&self, tool: &str, args: Value) -> Value {
        let raw = self
            .registry
            .handle_function_call(&ToolCall::new(tool, args), &self.ctx);
        serde_json::from_str(&raw).unwrap_or_else(|e| panic!("not JSON ({e}): {raw}"))
    }
    fn sh(&self, command: &str) -> Value {
        self.call("terminal", json!({"command": command}))
    }
    fn forced(&self, command: &str) -> Value {
        run_terminal(&TerminalRequest::new(command), &self.ctx, true)
    }
    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }
    fn real(&self) -> String {
        std::fs::canonicalize(self.dir.path())
            .unwrap()
            .to_string_lossy()
            .into_owned()
    }
    fn process(&self, args: Value) -> Value {
        self.call("process", args)
    }
}

impl Drop for T {
    fn drop(&mut self) {
        terminal::cleanup_task(&self.task);
    }
}

/// Turns the OS sandbox off for a test of behaviour outside it: pids the script records
/// with `$$` / `$!` inside the sandbox's PID namespace are not host pids, and the
/// unattended refusal only applies where no sandbox contains the command.
fn unsandboxed(t: &T, extra_yaml: &str) {
    std::fs::write(
        t.home.path().join("config.yaml"),
        format!("terminal:\n  sandbox:\n    mode: off\n{extra_yaml}"),
    )
    .unwrap();
}

/// The operator's settings as a (re)start reads them: permission settings changed
/// while a process runs are held back until then.
fn restart_with(t: &T, extra_yaml: &str) {
    unsandboxed(t, extra_yaml);
    hermes_runtime::config::reload_permissions(t.home.path());
}

fn keys(v: &Value) -> Vec<String> {
    v.as_object().unwrap().keys().cloned().collect()
}

/// Alive = exists and is not a zombie.
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat[stat.rfind(')').unwrap() + 2..].chars().next().unwrap();
            state != 'Z' && state != 'X'
        }
        Err(_) => false,
    }
}

fn wait_for(what: &str, limit: Duration, mut ok: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ok() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn read_pid(path: &Path) -> u32 {
    std::fs::read_to_string(path)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// A script that starts a child `sleep` and waits for it, recording both pids.
fn tree_script(t: &T) -> PathBuf {
    let script = t.path("tree.sh");
    std::fs::write(
        &script,
        format!(
            "echo $$ > {dir}/parent.pid\nsleep 300 &\necho $! > {dir}/child.pid\necho started\nwait\n",
            dir = t.dir.path().display()
        ),
    )
    .unwrap();
    script
}

// ---------------------------------------------------------------- basics

#[test]
fn echo_exit_codes_and_result_shape() {
    let t = t();
    let r = t.sh("echo hello");
    assert_eq!(keys(&r), ["output", "exit_code", "error", "cwd"]);
    assert_eq!(r["output"], "hello");
    assert_eq!(r["exit_code"], 0);
    assert_eq!(r["error"], Value::Null);
    assert_eq!(r["cwd"], t.real());

    let r = t.sh("echo bye; exit 7");
    assert_eq!(r["output"], "bye");
    assert_eq!(r["exit_code"], 7);
    assert!(r.get("exit_code_meaning").is_none());

    let r = t.sh("grep needle /dev/null");
    assert_eq!(r["exit_code"], 1);
    assert!(
        r["exit_code_meaning"]
            .as_str()
            .unwrap()
            .contains("no matches"),
        "{r}"
    );

    let r = t.sh("printf 'caf\\303\\251 ✓ 日本\\n'");
    assert_eq!(r["output"], "café ✓ 日本");
}

#[test]
fn stderr_is_merged_and_ansi_stripped() {
    let t = t();
    let r = t.sh("echo out; echo err >&2; printf '\\033[31mred\\033[0m\\n'");
    assert_eq!(r["output"], "out\nerr\nred");
}

#[test]
fn secrets_are_redacted() {
    let t = t();
    let r = t.sh("echo key=sk-abcdefghijklmnopqrstuvwxyz123456");
    let out = r["output"].as_str().unwrap();
    assert!(!out.contains("abcdefghijklmnopqrstuvwxyz"), "{out}");
    assert!(out.starts_with("key=sk-***"), "{out}");
    let r = t.sh("export HERMES_TEST_TOKEN=supersecret123; env | grep HERMES_TEST_TOKEN");
    assert_eq!(r["output"], "HERMES_TEST_TOKEN=***");
}

#[test]
fn invalid_utf8_and_split_multibyte_chars() {
    let t = t();
    let r = t.sh("printf 'a\\377b\\n'");
    assert_eq!(r["output"], "a\u{FFFD}b");
    // The two bytes of é arrive in different reads.
    let r = t.sh("printf 'caf\\303'; sleep 0.3; printf '\\251 ok\\n'");
    assert_eq!(r["output"], "café ok");
    // A truncated sequence at the very end is one replacement character.
    let r = t.sh("printf 'x\\342\\202'");
    assert_eq!(r["output"], "x\u{FFFD}");
}

// ---------------------------------------------------------------- timeouts and hangs

#[test]
fn timeout_reports_124_and_kills_the_tree() {
    let t = t();
    restart_with(&t, "");
    let script = tree_script(&t);
    let start = Instant::now();
    let r = t.call(
        "terminal",
        json!({"command": format!("bash {}", script.display()), "timeout": 2}),
    );
    assert!(start.elapsed() < Duration::from_secs(30), "the call hung");
    assert_eq!(r["exit_code"], 124, "{r}");
    let out = r["output"].as_str().unwrap();
    assert!(out.starts_with("started"), "{out}");
    assert!(out.ends_with("[Command timed out after 2s]"), "{out}");
    let parent = read_pid(&t.path("parent.pid"));
    let child = read_pid(&t.path("child.pid"));
    wait_for("the tree to die", Duration::from_secs(5), || {
        !alive(parent) && !alive(child)
    });
}

#[test]
fn backgrounded_grandchild_does_not_hang_the_call() {
    let t = t();
    let script = t.path("bg.sh");
    std::fs::write(
        &script,
        format!(
            "sleep 30 &\necho $! > {}/sleeper.pid\n( sleep 30 ) &\ndisown\n",
            t.dir.path().display()
        ),
    )
    .unwrap();
    let start = Instant::now();
    let r = t.sh(&format!("bash {}; echo finished", script.display()));
    assert!(
        start.elapsed() < Duration::from_secs(15),
        "the call hung on the inherited pipe"
    );
    assert_eq!(r["output"], "finished");
    assert_eq!(r["exit_code"], 0);
    let pid = read_pid(&t.path("sleeper.pid"));
    // SAFETY: kill(2) on a pid read from the test's own file touches no memory.
    unsafe {
        libc_kill(pid);
    }
}

unsafe fn libc_kill(pid: u32) {
    let _ = std::process::Command::new("kill")
        .arg(pid.to_string())
        .status();
}

// ---------------------------------------------------------------- big output

#[test]
fn ten_megabytes_stay_bounded_and_spill_to_a_private_file() {
    let t = t();
    let r = t.sh("yes abcdefghi | head -c 10000000");
    assert_eq!(r["exit_code"], 0);
    let out = r["output"].as_str().unwrap();
    assert!(
        out.chars().count() < 51_000,
        "output not bounded: {}",
        out.len()
    );
    assert!(out.starts_with("abcdefghi\nabcdefghi\n"));
    assert!(
        out.contains("characters omitted of 10000000 total"),
        "{}",
        &out[19_900..20_400]
    );
    assert_eq!(r["output_total_chars"], 10_000_000);
    let path = PathBuf::from(r["full_output_path"].as_str().unwrap());
    assert!(
        path.starts_with(t.home.path().join("cache/terminal-output")),
        "{}",
        path.display()
    );
    assert!(r["truncation_note"]
        .as_str()
        .unwrap()
        .contains(&path.display().to_string()));
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    // The spill file keeps the first 5 000 000 characters (the reference's cap).
    let saved = std::fs::read_to_string(&path).unwrap();
    assert_eq!(saved.len(), 5_000_000);
    assert_eq!(saved, "abcdefghi\n".repeat(500_000));
    let keys = keys(&r);
    assert_eq!(
        keys,
        [
            "output",
            "exit_code",
            "error",
            "cwd",
            "output_total_chars",
            "full_output_path",
            "truncation_note"
        ]
    );
}

#[test]
fn overflowing_output_is_saved_whole() {
    let t = t();
    let r = t.sh("seq 1 300000");
    let path = PathBuf::from(r["full_output_path"].as_str().unwrap());
    let expected: String = (1..=300_000).map(|n| format!("{n}\n")).collect();
    assert_eq!(r["output_total_chars"], expected.chars().count());
    assert_eq!(std::fs::read_to_string(&path).unwrap(), expected);
    let out = r["output"].as_str().unwrap();
    assert!(out.starts_with("1\n2\n3\n"));
    assert!(out.ends_with("299999\n300000"));
}

// ---------------------------------------------------------------- shell state

#[test]
fn cd_and_export_persist_within_a_task() {
    let t = t();
    std::fs::create_dir(t.path("sub")).unwrap();
    let r = t.sh("cd sub && export HERMES_PERSIST=42 && alias hello='echo aliased'");
    assert_eq!(r["output"], "");
    assert_eq!(r["cwd"], format!("{}/sub", t.real()));
    let r = t.sh("pwd; echo $HERMES_PERSIST; hello");
    assert_eq!(r["output"], format!("{}/sub\n42\naliased", t.real()));
    // workdir is for one call only.
    let r = t.call("terminal", json!({"command": "pwd", "workdir": "/"}));
    assert_eq!(r["output"], "/");
    let r = t.sh("pwd");
    assert_eq!(r["output"], format!("{}/sub", t.real()));
    // A missing working directory is exit 126 with a hint.
    let r = t.call(
        "terminal",
        json!({"command": "pwd", "workdir": "/no/such/dir"}),
    );
    assert_eq!(r["exit_code"], 126);
    assert!(r["hint"].as_str().unwrap().contains("/no/such/dir"));
}

#[test]
fn a_new_task_starts_from_the_login_shell_not_from_another_task() {
    // Tasks alike share the first login shell's snapshot, taken before any command ran.
    let a = t();
    std::fs::create_dir(a.path("sub")).unwrap();
    let r = a.sh("cd sub && export HERMES_LEAK_CHECK=from-a && alias leaked='echo leaked'");
    assert_eq!(r["exit_code"], 0, "{r}");
    let other = format!("{}-other", a.task);
    let ctx = ToolContext::builder()
        .cwd(a.dir.path())
        .task_id(&other)
        .hermes_home(a.home.path())
        .build();
    let raw = a.registry.handle_function_call(
        &ToolCall::new("terminal", json!({"command": "echo ${HERMES_LEAK_CHECK:-unset}; pwd; type leaked 2>&1 | head -c 0; alias | grep -c leaked"})),
        &ctx,
    );
    terminal::cleanup_task(&other);
    let r: Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(r["output"], format!("unset\n{}\n0", a.real()), "{r}");
}

#[test]
fn two_tasks_at_once_keep_their_own_cwd() {
    let a = t();
    let b = t();
    std::fs::create_dir(a.path("alpha")).unwrap();
    std::fs::create_dir(b.path("beta")).unwrap();
    std::thread::scope(|s| {
        let ha = s.spawn(|| {
            a.sh("cd alpha");
            a.sh("sleep 0.5; pwd")
        });
        let hb = s.spawn(|| {
            b.sh("cd beta");
            b.sh("sleep 0.5; pwd")
        });
        let ra = ha.join().unwrap();
        let rb = hb.join().unwrap();
        assert_eq!(ra["output"], format!("{}/alpha", a.real()));
        assert_eq!(rb["output"], format!("{}/beta", b.real()));
    });
}

// ---------------------------------------------------------------- background + process

fn start_bg(t: &T, args: Value) -> String {
    let r = t.call("terminal", args);
    assert_eq!(r["exit_code"], 0, "{r}");
    assert_eq!(r["error"], Value::Null);
    let id = r["session_id"].as_str().unwrap().to_string();
    assert!(id.starts_with("proc_") && id.len() == 17, "{id}");
    assert!(r["pid"].as_u64().unwrap() > 0);
    id
}

#[test]
fn background_poll_log_wait_list() {
    let t = t();
    let id = start_bg(
        &t,
        json!({"command": "for i in 1 2 3; do echo tick $i; sleep 0.2; done", "background": true}),
    );
    let r = t.process(json!({"action": "wait", "session_id": id, "timeout": 30}));
    assert_eq!(r["status"], "exited", "{r}");
    assert_eq!(r["exit_code"], 0);
    assert_eq!(r["output"], "tick 1\ntick 2\ntick 3\n");
    let r = t.process(json!({"action": "poll", "session_id": id}));
    assert_eq!(r["status"], "exited");
    assert_eq!(r["exit_code"], 0);
    assert_eq!(r["output_preview"], "tick 1\ntick 2\ntick 3\n");
    let r = t.process(json!({"action": "log", "session_id": id, "limit": 2}));
    assert_eq!(r["output"], "tick 2\ntick 3");
    assert_eq!(r["total_lines"], 3);
    assert_eq!(r["showing"], "2 lines");
    let r = t.process(json!({"action": "log", "session_id": id, "offset": 0, "limit": 1}));
    assert_eq!(r["output"], "tick 1");
    // A unique prefix without `proc_` works.
    let r = t.process(json!({"action": "poll", "session_id": &id[5..11]}));
    assert_eq!(r["session_id"], id);
    let r = t.process(json!({"action": "list"}));
    let row = r["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["session_id"] == id)
        .unwrap()
        .clone();
    assert_eq!(row["status"], "exited");
    assert_eq!(row["owner_task_id"], t.task);
    // Errors.
    let r = t.process(json!({"action": "poll"}));
    assert!(r["error"].as_str().unwrap().contains("'poll'"), "{r}");
    let r = t.process(json!({"action": "poll", "session_id": "proc_000000000000"}));
    assert_eq!(r["status"], "not_found");
    let r = t.process(json!({"action": "kill", "session_id": id}));
    assert_eq!(r["status"], "already_exited");
}

#[test]
fn wait_times_out_without_error_and_kill_stops_the_tree() {
    let t = t();
    restart_with(&t, "");
    let script = tree_script(&t);
    let id = start_bg(
        &t,
        json!({"command": format!("bash {}", script.display()), "background": true}),
    );
    wait_for("the child pid", Duration::from_secs(10), || {
        t.path("child.pid").exists() && t.path("parent.pid").exists()
    });
    std::thread::sleep(Duration::from_millis(100));
    let parent = read_pid(&t.path("parent.pid"));
    let child = read_pid(&t.path("child.pid"));
    assert!(alive(parent) && alive(child));
    let r = t.process(json!({"action": "wait", "session_id": id, "timeout": 1}));
    assert_eq!(r["status"], "timeout", "{r}");
    assert_eq!(r["process_running"], true);
    let start = Instant::now();
    let r = t.process(json!({"action": "kill", "session_id": id}));
    // A liveness bound (the kill escalates and confirms), not a speed check.
    assert!(
        start.elapsed() < Duration::from_secs(120),
        "kill took {:?}",
        start.elapsed()
    );
    assert_eq!(
        r,
        json!({"status": "killed", "session_id": id, "completion_reason": "killed", "termination_source": "process.kill"})
    );
    assert!(!alive(parent), "parent {parent} survived");
    assert!(!alive(child), "child {child} survived");
    let r = t.process(json!({"action": "poll", "session_id": id}));
    assert_eq!(r["status"], "exited");
    assert_eq!(r["exit_code"], -15);
    assert_eq!(r["completion_reason"], "killed");
}

#[test]
fn write_needs_a_pty() {
    let t = t();
    let id = start_bg(&t, json!({"command": "sleep 5", "background": true}));
    let r = t.process(json!({"action": "write", "session_id": id, "data": "x"}));
    assert_eq!(r["status"], "error");
    assert!(r["error"].as_str().unwrap().contains("pty=true"), "{r}");
    t.process(json!({"action": "kill", "session_id": id}));
}

#[test]
fn pty_mode_write_submit_close() {
    let t = t();
    let id = start_bg(
        &t,
        json!({"command": "tty; read -r line; echo \"got:$line\"; cat", "background": true, "pty": true}),
    );
    // Input typed before the program reads is echoed early by the terminal: wait for it.
    wait_for("the tty line", Duration::from_secs(10), || {
        t.process(json!({"action": "log", "session_id": id}))["output"]
            .as_str()
            .unwrap()
            .contains("/dev/pts/")
    });
    let r = t.process(json!({"action": "submit", "session_id": id, "data": "hello"}));
    assert_eq!(r, json!({"status": "ok", "bytes_written": 6}));
    wait_for("the echo", Duration::from_secs(10), || {
        t.process(json!({"action": "log", "session_id": id}))["output"]
            .as_str()
            .unwrap()
            .contains("got:hello")
    });
    let r = t.process(json!({"action": "write", "session_id": id, "data": "abc\n"}));
    assert_eq!(r["bytes_written"], 4);
    wait_for("cat's copy", Duration::from_secs(10), || {
        t.process(json!({"action": "log", "session_id": id}))["output"]
            .as_str()
            .unwrap()
            .matches("abc")
            .count()
            >= 2
    });
    let r = t.process(json!({"action": "close", "session_id": id}));
    assert_eq!(r["status"], "ok");
    let r = t.process(json!({"action": "wait", "session_id": id, "timeout": 20}));
    assert_eq!(r["status"], "exited", "{r}");
    assert_eq!(r["exit_code"], 0);
    let log = t.process(json!({"action": "log", "session_id": id}))["output"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(log.starts_with("/dev/pts/"), "stdin is a terminal: {log}");
}

#[test]
fn notify_on_complete_queues_one_event() {
    let t = t();
    let id = start_bg(
        &t,
        json!({"command": "echo done-now", "background": true, "notify_on_complete": true, "watch_patterns": ["x"]}),
    );
    let mut events = Vec::new();
    wait_for("the completion event", Duration::from_secs(10), || {
        events.extend(terminal::drain_events(&t.task));
        !events.is_empty()
    });
    assert_eq!(events.len(), 1, "{events:?}");
    let e = &events[0];
    assert_eq!(e["type"], "completion");
    assert_eq!(e["session_id"], id);
    assert_eq!(e["exit_code"], 0);
    assert_eq!(e["command"], "echo done-now");
    assert_eq!(e["output_tail"], "done-now\n");
    assert!(terminal::drain_events(&t.task).is_empty());
}

#[test]
fn watch_patterns_queue_matches() {
    let t = t();
    let r = t.call(
        "terminal",
        json!({"command": "echo starting; sleep 0.2; echo 'server listening on 8080'", "background": true, "watch_patterns": ["listening on"]}),
    );
    assert_eq!(r["watch_patterns"], json!(["listening on"]));
    let mut events = Vec::new();
    wait_for("the watch event", Duration::from_secs(10), || {
        events.extend(terminal::drain_events(&t.task));
        !events.is_empty()
    });
    assert_eq!(events[0]["type"], "watch_match");
    assert_eq!(events[0]["pattern"], "listening on");
    assert_eq!(events[0]["output"], "server listening on 8080");
}

// ---------------------------------------------------------------- refusals

#[test]
fn workdir_rejections() {
    let t = t();
    for bad in ["/tmp; rm -rf /", "/tmp$(whoami)", "/tmp\nx", "/tmp/`id`"] {
        let r = t.call(
            "terminal",
            json!({"command": "touch workdir-marker", "workdir": bad}),
        );
        assert_eq!(r["status"], "blocked", "{bad}: {r}");
        assert!(r["error"].as_str().unwrap().starts_with("Blocked:"), "{r}");
        assert_eq!(r["exit_code"], -1);
    }
    assert!(!t.path("workdir-marker").exists());
    let r = t.call("terminal", json!({"command": "pwd", "workdir": "/tmp"}));
    assert_eq!(r["exit_code"], 0);
}

#[test]
fn foreground_guidance_vectors() {
    let t = t();
    for cmd in [
        "sleep 5 &",
        "python3 server.py &",
        "cmd1 & cmd2",
        "cat <<EOF\nhi\nEOF\nsleep 5 &",
    ] {
        let r = t.sh(cmd);
        assert_eq!(r["status"], "error", "{cmd}: {r}");
        assert!(
            r["error"].as_str().unwrap().contains("background=true"),
            "{cmd}: {r}"
        );
    }
    for cmd in ["nohup make test", "nohup ./worker.sh > /dev/null 2>&1"] {
        let r = t.sh(cmd);
        assert_eq!(r["status"], "error", "{cmd}");
        assert!(
            r["error"]
                .as_str()
                .unwrap()
                .contains("notify_on_complete=true"),
            "{r}"
        );
    }
    let r = t.sh("npm run dev");
    assert_eq!(r["status"], "error");
    assert_eq!(t.sh("echo hello")["output"], "hello");
    // Not guidance (the `&` is inside a here-document body); the detector still wants
    // approval for a script fed to an interpreter, so this runs forced.
    let r = t.forced("python3 - <<PY\nprint(oct(0o755 & 0o7777))\nPY");
    assert_eq!(r["output"], "0o755", "{r}");
}

#[test]
fn hardline_is_refused_even_with_force() {
    let t = t();
    let marker = t.path("hardline-ran");
    let cmd = format!("touch {} && rm -rf /", marker.display());
    let r = t.sh(&cmd);
    assert_eq!(r["status"], "blocked", "{r}");
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .starts_with("BLOCKED (hardline):"),
        "{r}"
    );
    let r = t.forced(&cmd);
    assert_eq!(r["status"], "blocked");
    assert!(!marker.exists(), "the command ran");
}

#[test]
fn dangerous_needs_approval_unless_forced() {
    let t = t();
    std::fs::create_dir(t.path("victim")).unwrap();
    let marker = t.path("dangerous-ran");
    restart_with(&t, "");
    let cmd = format!(
        "touch {} && rm -rf {}",
        marker.display(),
        t.path("victim").display()
    );
    // Nobody can be asked here (no terminal, gateway or ask session): refused, and the
    // message names the setting that would allow it.
    let r = t.sh(&cmd);
    assert_eq!(r["status"], "blocked", "{r}");
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .contains("approvals.unattended_mode"),
        "{r}"
    );
    assert_eq!(r["exit_code"], -1);
    assert!(r["pattern_key"].as_str().is_some_and(|k| !k.is_empty()));
    assert_eq!(keys(&r)[..4], ["output", "exit_code", "error", "status"]);
    assert!(!marker.exists() && t.path("victim").exists());
    // Permission settings changed while running (by anyone: a model with a shell could
    // have done it) are held back until a restart.
    unsandboxed(&t, "approvals:\n  unattended_mode: approve\n");
    let r = t.sh(&format!(
        "rm -rf {}",
        t.path("victim").join("missing").display()
    ));
    assert_eq!(r["status"], "blocked", "{r}");
    unsandboxed(&t, "");
    let r = t.forced(&cmd);
    assert_eq!(r["exit_code"], 0, "{r}");
    assert!(marker.exists() && !t.path("victim").exists());
}

#[test]
fn bad_arguments_and_unknown_backend() {
    let t = t();
    let r = t.call("terminal", json!({"command": "true", "timeout": 0}));
    assert_eq!(r["status"], "error");
    let r = t.sh("   ");
    assert_eq!(r["status"], "error");
    std::fs::write(
        t.home.path().join("config.yaml"),
        "terminal:\n  backend: nope\n",
    )
    .unwrap();
    let r = t.sh("echo x");
    let err = r["error"].as_str().unwrap();
    assert!(err.contains("unknown terminal backend 'nope'"), "{err}");
    assert!(
        err.contains("local, ssh, docker, singularity, modal, daytona, vercel_sandbox"),
        "{err}"
    );
    assert_eq!(terminal::availability_problem(t.home.path()).unwrap(), err);
}

#[test]
fn availability_says_what_is_missing() {
    let t = t();
    std::fs::write(
        t.home.path().join("config.yaml"),
        "terminal:\n  backend: ssh\n",
    )
    .unwrap();
    let missing = terminal::availability_problem(t.home.path()).unwrap();
    assert!(missing.contains("TERMINAL_SSH_HOST"), "{missing}");
    std::fs::write(
        t.home.path().join("config.yaml"),
        "terminal:\n  backend: daytona\n",
    )
    .unwrap();
    if std::env::var_os("DAYTONA_API_KEY").is_none() {
        assert!(terminal::availability_problem(t.home.path())
            .unwrap()
            .contains("DAYTONA_API_KEY"));
    }
    std::fs::write(
        t.home.path().join("config.yaml"),
        "terminal:\n  backend: singularity\n  singularity_binary: /nonexistent/apptainer\n",
    )
    .unwrap();
    let missing = terminal::availability_problem(t.home.path()).unwrap();
    assert_eq!(
        missing,
        "/nonexistent/apptainer (TERMINAL_SINGULARITY_BINARY) does not exist"
    );
    let r = t.sh("echo x");
    assert_eq!(r["status"], "disabled", "{r}");
    assert!(r["error"].as_str().unwrap().contains(&missing));
}
