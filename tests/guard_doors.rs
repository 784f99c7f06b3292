//! The dangerous-command detector through the binary: every line of the category corpus via
//! `check-command --json`, and the doors that bypassed it (scripts run by path, input
//! submitted to a shell in a PTY, variable indirection) through `call terminal` and `serve`.
//! Nobody can approve here (no interactive terminal), so a flagged command is refused; every
//! victim is a file in a temp dir, and each test checks it survived.

mod common;
#[path = "../command-guard/tests/corpus/mod.rs"]
mod corpus;

use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;
use std::time::Duration;
use tempfile::TempDir;

const BIN: &str = env!("CARGO_BIN_EXE_hermes-tools");

/// A command with no way to ask anyone and no bypass from the environment.
fn hermes(home: &Path) -> Command {
    let mut command = Command::new(BIN);
    command.env("HERMES_HOME", home);
    for name in [
        "HERMES_INTERACTIVE",
        "HERMES_YOLO",
        "HERMES_YOLO_MODE",
        "HERMES_GATEWAY_SESSION",
        "HERMES_EXEC_ASK",
    ] {
        command.env_remove(name);
    }
    command
}

#[test]
fn check_command_gives_every_corpus_line_its_verdict() {
    let home = TempDir::new().unwrap();
    let cases = corpus::load();
    let failures: Vec<String> = std::thread::scope(|scope| {
        let workers: Vec<_> = cases
            .chunks(cases.len().div_ceil(4))
            .map(|chunk| {
                let home = home.path();
                scope.spawn(move || {
                    chunk
                        .iter()
                        .filter_map(|case| {
                            let output = hermes(home)
                                .env("HOME", "/home/alice")
                                .args(["check-command", "--json", "--", &case.command])
                                .output()
                                .unwrap();
                            assert!(
                                output.status.success(),
                                "{}: check-command failed",
                                case.origin
                            );
                            let verdict: Value = serde_json::from_slice(&output.stdout).unwrap();
                            (verdict["verdict"] != case.expected.as_str()).then(|| {
                                format!(
                                    "{} [{}] expected {}, got {verdict}: {:?}",
                                    case.origin, case.category, case.expected, case.command
                                )
                            })
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect()
    });
    assert!(cases.len() > 200);
    assert!(
        failures.is_empty(),
        "{} corpus lines differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// A workspace, a Hermes home, and a victim directory outside the workspace.
struct Site {
    work: TempDir,
    home: TempDir,
    outside: TempDir,
}

impl Site {
    fn new() -> Site {
        let site = Site {
            work: TempDir::new().unwrap(),
            home: TempDir::new().unwrap(),
            outside: TempDir::new().unwrap(),
        };
        std::fs::write(site.victim().join("keep.txt"), "precious").unwrap();
        // These tests are of the approval guard alone, so the OS sandbox (the other wall,
        // tested in terminal_sandbox.rs) is off: a command the guard lets through runs
        // with the server's rights, and the victims under /tmp would be reachable.
        std::fs::write(
            site.home.path().join("config.yaml"),
            "terminal:\n  sandbox:\n    mode: \"off\"\n",
        )
        .unwrap();
        site
    }

    fn victim(&self) -> std::path::PathBuf {
        let dir = self.outside.path().join("victim");
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn victim_alive(&self) -> bool {
        self.outside.path().join("victim/keep.txt").exists()
    }

    fn write(&self, name: &str, text: &str) {
        std::fs::write(self.work.path().join(name), text).unwrap();
    }

    fn terminal(&self, command: &str) -> Value {
        let args = json!({"command": command}).to_string();
        let output = hermes(self.home.path())
            .args([
                "call",
                "terminal",
                &args,
                "--cwd",
                self.work.path().to_str().unwrap(),
            ])
            .output()
            .unwrap();
        serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
            panic!(
                "not JSON ({e}): {}",
                String::from_utf8_lossy(&output.stdout)
            )
        })
    }
}

fn assert_refused(site: &Site, result: &Value, what: &str) {
    assert_eq!(result["status"], "blocked", "{what}: {result}");
    assert!(site.victim_alive(), "{what}: the victim was deleted");
}

#[test]
fn scripts_run_by_path_are_checked_like_commands() {
    let site = Site::new();
    let victim = site.victim();
    let victim = victim.display();
    site.write("clean.sh", &format!("echo cleaning\nrm -rf {victim}\n"));
    site.write(
        "clean.py",
        &format!("import os\nos.system('rm -rf {victim}')\n"),
    );
    site.write("run", &format!("#!/bin/sh\nrm -rf {victim}\n"));
    site.write("outer.sh", "bash ./clean.sh\n");
    std::fs::set_permissions(
        site.work.path().join("run"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    for command in [
        "bash clean.sh",
        "sh ./clean.sh",
        "source clean.sh",
        ". ./clean.sh",
        "bash < clean.sh",
        "python3 clean.py",
        "./run",
        "cd . && ./run",
        "bash outer.sh",
    ] {
        let result = site.terminal(command);
        assert_refused(&site, &result, command);
        assert!(
            result["script"].is_string(),
            "{command}: the refusal names the script: {result}"
        );
    }

    // Look-alikes: harmless scripts run as usual.
    site.write("hello.sh", "echo hello from a script\n");
    site.write("hello.py", "print('hello from python')\n");
    assert_eq!(
        site.terminal("bash hello.sh")["output"],
        "hello from a script"
    );
    assert_eq!(
        site.terminal("python3 hello.py")["output"],
        "hello from python"
    );
    assert!(site.victim_alive());
}

#[test]
fn scripts_that_cannot_be_checked_are_refused() {
    let site = Site::new();
    let victim = site.victim();
    // Written by the same command: what is on disk now is not what would run.
    let result = site.terminal(&format!(
        "echo 'rm -rf {}' > fresh.sh; bash fresh.sh",
        victim.display()
    ));
    assert_refused(&site, &result, "script written by the same command");
    // Missing, named by a variable, a FIFO (must not hang), a directory.
    assert_refused(&site, &site.terminal("bash missing.sh"), "missing script");
    assert_refused(
        &site,
        &site.terminal("f=clean.sh; bash \"$f\""),
        "script named by a variable",
    );
    let fifo = site.work.path().join("pipe.sh");
    let status = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(status.success());
    assert_refused(&site, &site.terminal("bash pipe.sh"), "FIFO script");
    std::fs::create_dir(site.work.path().join("dir.sh")).unwrap();
    assert_refused(&site, &site.terminal("bash dir.sh"), "directory as script");
}

#[test]
fn indirection_and_archive_deletes_are_refused_unattended() {
    let site = Site::new();
    let victim = site.victim();
    let victim = victim.display();
    for command in [
        format!("a=rm; $a -rf {victim}"),
        format!("m=rm; ${{m}} -rf {victim}"),
        format!("eval \"$(echo cm0gLXJm | base64 -d) {victim}\""),
        format!("$(echo rm) -rf {victim}"),
        format!("tar --remove-files -cf {victim}.tar {victim}"),
        format!("find {victim} -delete"),
        format!("echo 'rm -rf {victim}' | sh"),
    ] {
        assert_refused(&site, &site.terminal(&command), &command);
    }
    // A variable that resolves to a harmless program runs.
    assert_eq!(site.terminal("a=echo; $a resolved")["output"], "resolved");
}

#[test]
fn the_oversized_command_refusal_suggests_no_way_around_itself() {
    let site = Site::new();
    let command = format!("echo {}", "x".repeat(5_000));
    let result = site.terminal(&command);
    assert_eq!(result["status"], "blocked", "{result}");
    let message = result["error"].as_str().unwrap();
    assert!(message.contains("hardline"), "{message}");
    assert!(
        !message.contains("bash "),
        "the refusal must not suggest running the saved script: {message}"
    );
    assert!(!message.to_lowercase().contains("script file"), "{message}");
}

/// `hermes-tools serve` on a fresh home, with nobody to ask.
struct Server;

impl Server {
    fn start(site: &Site) -> common::ServeSession {
        let mut command = hermes(site.home.path());
        command.arg("serve").current_dir(site.work.path());
        common::ServeSession::spawn(command, json!({"session_id": "s1"}))
    }
}

#[test]
fn lines_submitted_to_a_shell_in_a_pty_are_checked_like_commands() {
    let site = Site::new();
    let victim = site.victim();
    let victim = victim.display();
    let mut server = Server::start(&site);
    let started = server.call(
        "terminal",
        json!({"command": "bash --norc --noprofile", "background": true, "pty": true}),
    );
    let id = started["session_id"]
        .as_str()
        .unwrap_or_else(|| panic!("started: {started}"))
        .to_string();

    let refused = server.call(
        "process",
        json!({"action": "submit", "session_id": id, "data": format!("rm -rf {victim}")}),
    );
    assert_refused(&site, &refused, "submitted rm -rf");
    assert!(refused["input_line"].is_string(), "{refused}");

    // Typed in pieces, or edited with backspace, the line is the same line.
    let first = server.call(
        "process",
        json!({"action": "write", "session_id": id, "data": "rm "}),
    );
    assert_eq!(first["status"], "ok", "{first}");
    let second = server.call(
        "process",
        json!({"action": "write", "session_id": id, "data": format!("-rf {victim}\n")}),
    );
    assert_refused(&site, &second, "rm -rf typed in two writes");
    server.call(
        "process",
        json!({"action": "write", "session_id": id, "data": "\u{15}"}),
    );
    let edited = server.call("process", json!({"action": "submit", "session_id": id, "data": format!("echo rm -rf {victim}\u{8}\u{8}x; a=rm; $a -rf {victim}")}));
    assert_refused(&site, &edited, "indirection in a submitted line");
    let alias = server.call(
        "process",
        json!({"action": "submit", "session_id": id, "data": "alias gone=rm"}),
    );
    assert_refused(&site, &alias, "an alias renaming rm for a later line");
    let arrows = server.call(
        "process",
        json!({"action": "submit", "session_id": id, "data": "\u{1b}[A"}),
    );
    assert_refused(&site, &arrows, "history recall");

    // Look-alike: an ordinary line runs in the shell.
    let ok = server.call(
        "process",
        json!({"action": "submit", "session_id": id, "data": "\u{15}echo submitted-$((20+22))"}),
    );
    assert_eq!(ok["status"], "ok", "{ok}");
    let mut seen = String::new();
    for _ in 0..100 {
        let log = server.call("process", json!({"action": "log", "session_id": id}));
        seen = log["output"].as_str().unwrap_or("").to_string();
        if seen.contains("submitted-42") {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        seen.contains("submitted-42"),
        "the shell ran the line: {seen}"
    );
    server.call("process", json!({"action": "kill", "session_id": id}));
    assert!(site.victim_alive());
}
