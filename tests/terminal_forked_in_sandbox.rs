//! Inside the sandbox, a task's commands are forked from one bash the task's sandbox
//! launcher keeps waiting (all but one that runs the login shell, when the server has
//! no snapshot of it yet). Driven through `hermes-tools serve`: the
//! commands are forked (`$$` stays, `$BASHPID` changes), the waiting bash is out of
//! every command's reach (it cannot be read, traced, have its descriptors taken or be
//! held stopped), nothing a command starts outlives it, and a command that kills the
//! waiting bash or runs into its timeout leaves the next command a working shell. What a
//! command leaves of the shell's state, or removes, is what the next finds (with the
//! sandbox off too, where the waiting bash is the host's).

use serde_json::{json, Value};
use std::time::{Duration, Instant};

mod common;

fn fixture() -> common::ServeFixture {
    common::ServeFixture::new("terminal:\n  sandbox:\n    mode: workspace-write\n")
}

fn output(result: &Value) -> &str {
    result["output"]
        .as_str()
        .unwrap_or_else(|| panic!("no output in {result}"))
}

fn run(server: &mut common::ServeSession, command: &str) -> Value {
    server.call("terminal", json!({ "command": command }))
}

/// `$$` and `$BASHPID` of a command.
fn shell_pids(server: &mut common::ServeSession) -> (String, String) {
    let r = run(server, "echo $$ $BASHPID");
    let text = output(&r);
    let (dollar, own) = text
        .split_once(' ')
        .unwrap_or_else(|| panic!("two pids expected: {r}"));
    (dollar.to_string(), own.to_string())
}

/// Runs the task's first command, which starts the waiting bash and is forked from it
/// (the server's login shell left its snapshot before); returns the waiting bash's pid
/// (`$$` of the commands forked from it).
fn start_forking(server: &mut common::ServeSession) -> String {
    let (waiting, own) = shell_pids(server);
    assert_ne!(waiting, own, "the first command is forked");
    waiting
}

fn python3_present() -> bool {
    common::which("python3").is_some()
}

#[test]
fn a_tasks_commands_are_forked_from_one_waiting_bash() {
    let f = fixture();
    let mut server = f.serve();
    let waiting = start_forking(&mut server);
    let mut own_pids = Vec::new();
    for _ in 0..4 {
        let (dollar, own) = shell_pids(&mut server);
        assert_eq!(dollar, waiting, "every forked command has the same $$");
        own_pids.push(own);
    }
    own_pids.dedup();
    assert_eq!(own_pids.len(), 4, "each command is a shell of its own");
    // The shell names bash by its path, as one started for the command does.
    let r = run(&mut server, "echo \"$BASH|$0\"; \"$BASH\" -c 'echo nested'");
    let lines: Vec<&str> = output(&r).lines().collect();
    assert!(
        matches!(lines.as_slice(), [names, "nested"] if names.starts_with('/') && !names.contains("/proc/")),
        "{r}"
    );
    // Status, errors and a long output arrive as from a shell started for the command.
    let r = run(&mut server, "echo to-err >&2; exit 7");
    assert_eq!((output(&r), r["exit_code"].as_i64()), ("to-err", Some(7)));
    let r = run(
        &mut server,
        "head -c 300000 /dev/zero | tr '\\0' x; echo; echo end",
    );
    assert!(output(&r).ends_with("end"), "{r}");
    assert_eq!(r["output_total_chars"], 300_005, "{r}");
}

#[test]
fn the_waiting_bash_is_out_of_a_commands_reach() {
    if !python3_present() {
        eprintln!("skipped: python3 is needed to trace and take descriptors");
        return;
    }
    let f = fixture();
    let mut server = f.serve();
    let waiting = start_forking(&mut server);
    // Each way in, tried against the waiting bash and, as a control that shows the
    // probe works, against a process the command started itself.
    let probe = r#"
import ctypes, os, subprocess, sys
libc = ctypes.CDLL(None, use_errno=True)
def attempt(pid):
    out = []
    for name in ("environ", "mem", "maps"):
        try:
            open(f"/proc/{pid}/{name}", "rb").close()
            out.append(name + ":open")
        except PermissionError:
            out.append(name + ":denied")
    try:
        os.readlink(f"/proc/{pid}/fd/0")
        out.append("fd:open")
    except PermissionError:
        out.append("fd:denied")
    try:
        pidfd = os.pidfd_open(pid)
        got = libc.syscall(438, pidfd, 0, 0)
        out.append("getfd:" + ("open" if got >= 0 else "denied"))
    except OSError:
        out.append("getfd:denied")
    if libc.ptrace(16, pid, 0, 0) == 0:
        out.append("trace:open")
        os.waitpid(pid, 0)
        libc.ptrace(17, pid, 0, 0)
    else:
        out.append("trace:denied")
    return " ".join(out)
control = subprocess.Popen(["sleep", "30"])
print("waiting", attempt(int(sys.argv[1])))
print("control", attempt(control.pid))
control.kill()
"#;
    let r = run(
        &mut server,
        &format!("python3 -c '{}' $$", probe.replace('\'', "'\\''")),
    );
    let text = output(&r);
    assert!(
        text.contains(
            "waiting environ:denied mem:denied maps:denied fd:denied getfd:denied trace:denied"
        ),
        "{r}"
    );
    assert!(
        text.contains("control environ:open mem:open maps:open fd:open getfd:open trace:open"),
        "{r}"
    );
    // Stopped by a command, it is let go at once: the command's answer comes.
    let started = Instant::now();
    let r = run(&mut server, "kill -STOP $$; sleep 0.2; echo after-stop");
    assert_eq!(output(&r), "after-stop", "{r}");
    assert!(started.elapsed() < Duration::from_secs(30), "{r}");
    let (dollar, _) = shell_pids(&mut server);
    assert_eq!(dollar, waiting, "the same waiting bash serves on");
}

#[test]
fn nothing_a_forked_command_starts_outlives_it() {
    if !python3_present() {
        eprintln!("skipped: python3 is needed to leave processes behind");
        return;
    }
    let f = fixture();
    let mut server = f.serve();
    let waiting = start_forking(&mut server);
    // A process left behind, detached, and one that keeps forking children until it
    // is killed: the sweep after the command must catch up with it.
    let leave = r#"
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        while True:
            if os.fork() == 0:
                time.sleep(60)
                os._exit(0)
            time.sleep(0.001)
    time.sleep(60)
    os._exit(0)
time.sleep(0.2)
print("left")
"#;
    let r = run(
        &mut server,
        &format!("python3 -c '{}'", leave.replace('\'', "'\\''")),
    );
    assert_eq!(output(&r), "left", "{r}");
    let r = run(
        &mut server,
        "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done | grep -c -e '[p]ython3' -e '[s]leep 60'",
    );
    assert_eq!(output(&r), "0", "{r}");
    // The sweep may have had to end the waiting bash too (it forked too fast to catch
    // otherwise); either way the next commands work.
    let (dollar, own) = shell_pids(&mut server);
    assert!(dollar == waiting || dollar == own, "{dollar} {own}");
    let r = run(&mut server, "echo still-working");
    assert_eq!(output(&r), "still-working", "{r}");
}

#[test]
fn a_command_that_kills_the_waiting_bash_or_times_out_leaves_a_working_shell() {
    let f = fixture();
    let mut server = f.serve();
    let waiting = start_forking(&mut server);
    // At its timeout the command, and what it started, end; the waiting bash stays.
    let started = Instant::now();
    let r = server.call(
        "terminal",
        json!({"command": "echo begun; sleep 30; echo never", "timeout": 1}),
    );
    assert_eq!(r["exit_code"], 124, "{r}");
    assert!(output(&r).starts_with("begun"), "{r}");
    assert!(started.elapsed() < Duration::from_secs(20), "{r}");
    let r = run(&mut server, "pgrep -c -x sleep || true");
    assert_eq!(output(&r), "0", "{r}");
    let (dollar, _) = shell_pids(&mut server);
    assert_eq!(dollar, waiting, "the waiting bash outlived the timeout");
    // Killed by a command: that command ends with it, the output it wrote kept, and the
    // next command finds a working shell.
    let r = run(
        &mut server,
        "echo before-kill; kill -KILL $$; sleep 5; echo not-reached",
    );
    assert_eq!(output(&r), "before-kill", "{r}");
    let r = run(&mut server, "export AFTER=kill-survived; echo ok");
    assert_eq!(output(&r), "ok", "{r}");
    let r = run(&mut server, "echo $AFTER");
    assert_eq!(output(&r), "kill-survived", "{r}");
}

/// Exports, functions and aliases a forked command leaves reach the next one, and so
/// does their removal (the waiting bash holds them for its commands, and undoes what it
/// held when they change); functions named after the waiting bash's own steps take none
/// of them over. With the sandbox on, and off (where the waiting bash is the host's).
#[test]
fn what_a_forked_command_leaves_or_removes_is_what_the_next_one_finds() {
    for config in [
        "terminal:\n  sandbox:\n    mode: workspace-write\n",
        "terminal:\n  sandbox:\n    mode: \"off\"\napprovals:\n  unattended_mode: approve\n",
    ] {
        let f = common::ServeFixture::new(config);
        let mut server = f.serve();
        let waiting = start_forking(&mut server);
        let steps = [
            (
                "export FOO=bar; f() { echo f-here; }; alias hi='echo hi-alias'",
                "",
            ),
            ("echo FOO=$FOO; f; type -t hi", "FOO=bar\nf-here\nalias"),
            ("unset FOO; unset -f f; unalias hi; export PATH=/usr/bin:/bin", ""),
            (
                "echo \"FOO=${FOO-unset}\"; type -t f || echo no-f; type -t hi || echo no-hi; echo \"$PATH\"",
                "FOO=unset\nno-f\nno-hi\n/usr/bin:/bin",
            ),
            (
                "builtin() { command builtin \"$@\"; }; exec() { echo taken; }; export BAR=\"it's \\\"q\\\"\"",
                "",
            ),
            (
                "type -t builtin; type -t exec; echo \"$BAR\"",
                "function\nfunction\nit's \"q\"",
            ),
            ("unset -f builtin exec; unset BAR", ""),
            (
                "type -t builtin; type -t exec; echo \"${BAR-unset}\"",
                "builtin\nbuiltin\nunset",
            ),
            // Commands that change nothing: the next shell restores from what the
            // waiting bash and its descriptors already hold for the same snapshot.
            // (A value with a newline is one the command's shell sources itself.)
            ("export KEEP=1 LINES_OF=$'a\\nb'", ""),
            ("true", ""),
            ("echo \"$KEEP $LINES_OF\"", "1 a\nb"),
            ("echo \"$KEEP $LINES_OF\"", "1 a\nb"),
            // A command of programs leaves the snapshot as it is, unless a name it runs
            // is a function or an alias of the task's, which may change what it holds.
            (
                "ls() { export BY_FUNCTION=1; }; alias cat='export BY_ALIAS=2; true'",
                "",
            ),
            ("ls -la", ""),
            ("cat", ""),
            ("unset -f ls; unalias cat; ls -d /", "/"),
            ("echo \"$BY_FUNCTION $BY_ALIAS\"; type -t ls", "1 2\nfile"),
        ];
        for (command, expected) in steps {
            let r = run(&mut server, command);
            assert_eq!(output(&r), expected, "{config}{command}: {r}");
            assert_eq!(r["exit_code"], 0, "{config}{command}: {r}");
        }
        let (dollar, _) = shell_pids(&mut server);
        assert_eq!(
            dollar, waiting,
            "{config}: one waiting bash served every step"
        );
    }
}

/// A task whose commands so far were programs has its snapshot as its login shell left
/// it (no command wrote it again); a background process still gets the exports every
/// foreground command gets.
#[test]
fn a_background_process_gets_what_a_foreground_command_gets() {
    let f = fixture();
    let mut server = f.serve();
    // A command with a `$` writes the snapshot: the first one here may not.
    let r = run(&mut server, "true");
    assert_eq!(r["exit_code"], 0, "{r}");
    let shown = "echo \"$AI_AGENT $HERMES_AGENT $GIT_PAGER $PAGER\"";
    let r = server.call(
        "terminal",
        json!({ "command": format!("{shown} > seen-in-background.txt"), "background": true }),
    );
    assert!(r["session_id"].is_string(), "{r}");
    let r = run(
        &mut server,
        "for _ in $(seq 100); do [ -s seen-in-background.txt ] && break; sleep 0.05; done; \
         cat seen-in-background.txt",
    );
    let foreground = run(&mut server, shown);
    assert_eq!(output(&r), output(&foreground), "{r}");
    assert!(
        output(&foreground).starts_with("hermes-agent true "),
        "{foreground}"
    );
}
