//! The OS sandbox of the local terminal backend, driven through the binary
//! (`hermes-tools call` and `serve`) as a hostile model would, in the default unattended
//! mode. The workspace and the victims live under Cargo's target tmp dir, outside /tmp
//! (which the sandbox leaves writable); HOME and HERMES_HOME live under /tmp, inside a
//! writable root, to show that protected places stay read-only there too.

use serde_json::{json, Value};
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tempfile::TempDir;

mod common;
use common::host_pids_running;

const SECRET: &str = "sk-canary-7f3e9a1d5b";

struct Fixture {
    workspace: TempDir,
    outside: TempDir,
    home: TempDir,
    hermes_home: TempDir,
}

fn fixture() -> Fixture {
    let target_tmp = env!("CARGO_TARGET_TMPDIR");
    let f = Fixture {
        workspace: tempfile::tempdir_in(target_tmp).unwrap(),
        outside: tempfile::tempdir_in(common::outside_base()).unwrap(),
        home: tempfile::tempdir().unwrap(),
        hermes_home: tempfile::tempdir().unwrap(),
    };
    std::fs::create_dir_all(f.victim()).unwrap();
    std::fs::write(f.victim().join("precious.txt"), "keep me").unwrap();
    std::fs::create_dir_all(f.home.path().join(".ssh")).unwrap();
    std::fs::write(
        f.home.path().join(".ssh/authorized_keys"),
        "ssh-ed25519 AAAA owner\n",
    )
    .unwrap();
    f
}

impl Fixture {
    fn victim(&self) -> PathBuf {
        self.outside.path().join("victim")
    }

    fn assert_victim_intact(&self) {
        let text = std::fs::read_to_string(self.victim().join("precious.txt"));
        assert_eq!(
            text.ok().as_deref(),
            Some("keep me"),
            "the victim outside the workspace was changed"
        );
    }

    fn config(&self, yaml: &str) {
        std::fs::write(self.hermes_home.path().join("config.yaml"), yaml).unwrap();
    }

    fn command(&self, args: &[&str]) -> Command {
        self.command_of(
            std::path::Path::new(env!("CARGO_BIN_EXE_hermes-tools")),
            args,
        )
    }

    /// `program` (a copy of the binary) run as [`Fixture::command`] runs the binary.
    fn command_of(&self, program: &std::path::Path, args: &[&str]) -> Command {
        let mut cmd = Command::new(program);
        cmd.args(args)
            .current_dir(self.workspace.path())
            .env("HOME", self.home.path())
            .env("HERMES_HOME", self.hermes_home.path())
            .env("OPENAI_API_KEY", SECRET)
            .env("HERMES_SANDBOX_TEST_CANARY", SECRET)
            .env_remove("HERMES_INTERACTIVE")
            .env_remove("TERMINAL_ENV")
            .env_remove("TERMINAL_SANDBOX_MODE")
            .env_remove("TERMINAL_SANDBOX_BWRAP");
        cmd
    }

    /// One `hermes-tools call terminal`; `extra_env` is set on the server.
    fn terminal_with(&self, args: Value, extra_env: &[(&str, &str)]) -> Value {
        let mut cmd = self.command(&["call", "terminal", &args.to_string()]);
        cmd.args(["--cwd", self.workspace.path().to_str().unwrap()]);
        cmd.envs(extra_env.iter().copied());
        let out = cmd.output().expect("run hermes-tools call");
        let text = String::from_utf8_lossy(&out.stdout);
        serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
    }

    fn terminal(&self, command: &str) -> Value {
        self.terminal_with(json!({"command": command}), &[])
    }

    fn serve(&self) -> common::ServeSession {
        common::ServeSession::spawn(self.command(&["serve"]), json!({"task_id": "t1"}))
    }
}

fn output(result: &Value) -> &str {
    result["output"]
        .as_str()
        .unwrap_or_else(|| panic!("no output in {result}"))
}

fn base64_encode(text: &str) -> String {
    let mut child = Command::new("base64")
        .arg("-w0")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    String::from_utf8(child.wait_with_output().unwrap().stdout).unwrap()
}

fn base64_decode(text: &str) -> Vec<u8> {
    let mut child = Command::new("base64")
        .arg("-d")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.trim().as_bytes())
        .unwrap();
    child.wait_with_output().unwrap().stdout
}

#[test]
fn indirection_eval_and_tar_leave_the_victim_intact() {
    let f = fixture();
    let victim = f.victim().display().to_string();
    let r = f.terminal(&format!("a=rm; $a -rf {victim}"));
    assert!(output(&r).contains("Read-only file system"), "{r}");
    assert!(
        r["sandbox"]
            .as_str()
            .unwrap()
            .contains("terminal.sandbox.mode"),
        "{r}"
    );
    f.assert_victim_intact();

    let payload = base64_encode(&format!("rm -rf {victim}"));
    let r = f.terminal(&format!("eval \"$(echo {payload} | base64 -d)\""));
    assert_ne!(r["exit_code"], 0, "{r}");
    f.assert_victim_intact();

    let r = f.terminal(&format!(
        "tar --remove-files -cf ./out.tar -C {} victim",
        f.outside.path().display()
    ));
    assert!(output(&r).contains("Read-only file system"), "{r}");
    assert!(
        f.workspace.path().join("out.tar").exists(),
        "tar could write into the workspace"
    );
    f.assert_victim_intact();
}

#[test]
fn a_script_written_with_write_file_cannot_reach_outside() {
    let f = fixture();
    let mut server = f.serve();
    let script = format!("rm -rf {}\n", f.victim().display());
    let w = server.call(
        "write_file",
        json!({"path": "script.sh", "content": script}),
    );
    assert!(w.get("error").is_none_or(Value::is_null), "{w}");
    let r = server.call("terminal", json!({"command": "bash script.sh"}));
    assert!(output(&r).contains("Read-only file system"), "{r}");
    f.assert_victim_intact();
}

#[test]
fn a_pty_shell_fed_by_process_submit_stays_contained() {
    let f = fixture();
    let mut server = f.serve();
    let started = server.call(
        "terminal",
        json!({"command": "bash", "background": true, "pty": true}),
    );
    let id = started["session_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no session: {started}"))
        .to_string();
    let line = format!("rm -rf {}; echo finished-$((40+2))", f.victim().display());
    let submitted = server.call(
        "process",
        json!({"action": "submit", "session_id": id, "data": line}),
    );
    if submitted["status"] == "ok" {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut log = String::new();
        while !log.contains("finished-42") && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
            log = server.call("process", json!({"action": "log", "session_id": id}))["output"]
                .as_str()
                .unwrap_or("")
                .to_string();
        }
        assert!(log.contains("Read-only file system"), "{log}");
    } else {
        // A refused line is a closed door too, but the shell must have been running.
        assert_ne!(submitted["status"], "already_exited", "{submitted}");
    }
    server.call("process", json!({"action": "kill", "session_id": id}));
    f.assert_victim_intact();
}

#[test]
fn protected_places_stay_read_only_inside_writable_roots() {
    let f = fixture();
    let config = f.hermes_home.path().join("config.yaml");
    let keys = f.home.path().join(".ssh/authorized_keys");
    assert!(config.starts_with(std::env::temp_dir()) || keys.starts_with(std::env::temp_dir()));
    let r = f.terminal(&format!(
        "printf 'approvals:\\n  unattended_mode: approve\\n' > {}; echo ssh-ed25519 BBBB intruder >> {}",
        config.display(),
        keys.display()
    ));
    assert_eq!(
        output(&r).matches("Read-only file system").count(),
        2,
        "{r}"
    );
    assert!(!config.exists(), "config.yaml was created");
    assert_eq!(
        std::fs::read_to_string(&keys).unwrap(),
        "ssh-ed25519 AAAA owner\n"
    );
    // The home itself is writable here (it is under /tmp), credential places are not.
    let r = f.terminal(&format!(
        "echo ok > {0}/notes.txt && echo k > {0}/.netrc; cat {0}/notes.txt",
        f.home.path().display()
    ));
    assert!(
        output(&r).contains("ok") && output(&r).contains("Read-only file system"),
        "{r}"
    );
    assert_eq!(
        std::fs::read_to_string(f.home.path().join(".netrc")).unwrap_or_default(),
        ""
    );
}

#[test]
fn protected_places_reached_through_symlinks_stay_read_only() {
    // The credential places of this home lead into the workspace (a writable root): one
    // is a symlink itself, one sits under a symlinked directory, one is a symlink to a
    // place not made yet, and one appears between two commands of a long-lived sandbox.
    let f = fixture();
    let home = tempfile::tempdir().unwrap();
    let work = f.workspace.path();
    for dir in ["keys", "cfg/gh", "aws"] {
        std::fs::create_dir_all(work.join(dir)).unwrap();
    }
    std::fs::write(work.join("keys/authorized_keys"), "owner\n").unwrap();
    std::os::unix::fs::symlink(work.join("keys"), home.path().join(".ssh")).unwrap();
    std::os::unix::fs::symlink(work.join("cfg"), home.path().join(".config")).unwrap();
    std::os::unix::fs::symlink(work.join("gpg"), home.path().join(".gnupg")).unwrap();
    let mut cmd = f.command(&["serve"]);
    cmd.env("HOME", home.path());
    let mut server = common::ServeSession::spawn(cmd, json!({"task_id": "t1"}));
    let attempt = "mkdir -p gpg 2>/dev/null; for target in keys/authorized_keys cfg/gh/hosts.yml gpg/pubring.kbx aws/credentials; do \
        (echo intruder >> \"$target\") 2>/dev/null && echo \"wrote $target\"; done; echo done";
    let r = server.call("terminal", json!({"command": attempt}));
    assert_eq!(output(&r), "wrote aws/credentials\ndone", "{r}");
    std::fs::remove_file(work.join("aws/credentials")).unwrap();
    // The sandbox made an empty directory to hold the missing place; now it leads away.
    let _ = std::fs::remove_dir(home.path().join(".aws"));
    std::os::unix::fs::symlink(work.join("aws"), home.path().join(".aws")).unwrap();
    let r = server.call("terminal", json!({"command": attempt}));
    assert_eq!(output(&r), "done", "{r}");
    assert_eq!(
        std::fs::read_to_string(work.join("keys/authorized_keys")).unwrap(),
        "owner\n"
    );
    assert!(!work.join("cfg/gh/hosts.yml").exists() && !work.join("aws/credentials").exists());
    assert!(!work.join("gpg/pubring.kbx").exists());
}

#[test]
fn protected_places_replaced_on_the_host_between_commands_stay_read_only() {
    // A mount stands on an inode: replacing the place on the host (an editor saving by
    // rename, `rm -rf` and a new directory, a service making its socket again) lifts the
    // cover from a sandbox that is already running, while its options stay the same.
    let f = fixture();
    let home = f.home.path();
    std::fs::write(home.join(".netrc"), "machine a login owner\n").unwrap();
    let socket = home.join("service.sock");
    let mut listening = vec![std::os::unix::net::UnixListener::bind(&socket).unwrap()];
    let mut server = f.serve();
    let attempt = format!(
        "echo intruder >> ~/.ssh/authorized_keys; echo intruder >> ~/.netrc; \
         python3 -c 'import socket; c = socket.socket(socket.AF_UNIX); c.connect(\"{}\"); print(\"connected\")' 2>/dev/null; echo done",
        socket.display()
    );
    for round in 0..6 {
        let r = server.call("terminal", json!({"command": attempt}));
        // ~/.netrc is also on the deny-read list: hidden by an empty read-only file.
        assert_eq!(
            output(&r).matches("Read-only file system").count()
                + output(&r).matches("Permission denied").count(),
            2,
            "round {round}: {r}"
        );
        assert!(!output(&r).contains("connected"), "round {round}: {r}");
        // Between two commands of the task's long-lived sandboxes.
        if round == 2 {
            std::fs::remove_dir_all(home.join(".ssh")).unwrap();
            std::fs::create_dir(home.join(".ssh")).unwrap();
            std::fs::write(
                home.join(".ssh/authorized_keys"),
                "ssh-ed25519 AAAA owner\n",
            )
            .unwrap();
            std::fs::write(home.join(".netrc.new"), "machine b login owner\n").unwrap();
            std::fs::rename(home.join(".netrc.new"), home.join(".netrc")).unwrap();
        }
        if round == 4 {
            listening.clear();
            std::fs::remove_file(&socket).unwrap();
            listening.push(std::os::unix::net::UnixListener::bind(&socket).unwrap());
        }
    }
    assert_eq!(
        std::fs::read_to_string(home.join(".ssh/authorized_keys")).unwrap(),
        "ssh-ed25519 AAAA owner\n"
    );
    assert_eq!(
        std::fs::read_to_string(home.join(".netrc")).unwrap(),
        "machine b login owner\n"
    );
}

#[test]
fn a_missing_hermes_home_cannot_be_created_by_a_command() {
    let f = fixture();
    let fresh = f.hermes_home.path().join("not-yet");
    let r = f.terminal_with(
        json!({"command": format!("mkdir -p {0} && echo 'approvals: {{mode: off}}' > {0}/config.yaml", fresh.display())}),
        &[("HERMES_HOME", fresh.to_str().unwrap())],
    );
    assert_ne!(r["exit_code"], 0, "{r}");
    assert!(!fresh.join("config.yaml").exists());
}

#[test]
fn server_secrets_are_not_readable_back_in_any_encoding() {
    let f = fixture();
    f.config("terminal:\n  env_passthrough: [HERMES_SANDBOX_PASSED]\n");
    for command in [
        "env | base64 -w0",
        "tr '\\0' '\\n' < /proc/$PPID/environ | base64 -w0",
        "for p in /proc/[0-9]*; do cat $p/environ 2>/dev/null; done | base64 -w0",
    ] {
        let r = f.terminal_with(
            json!({"command": command}),
            &[("HERMES_SANDBOX_PASSED", "visible-by-choice")],
        );
        let decoded = String::from_utf8_lossy(&base64_decode(output(&r))).into_owned();
        assert!(
            !decoded.contains(SECRET),
            "{command} leaked the secret: {decoded}"
        );
        if command.starts_with("env") {
            assert!(
                decoded.contains("HERMES_SANDBOX_PASSED=visible-by-choice"),
                "{decoded}"
            );
            assert!(decoded.contains("PATH="), "{decoded}");
        }
    }
    // The server is not even visible: the command's own tree is all there is.
    let r = f.terminal("ls /proc | grep -c '^[0-9]'");
    let count: u32 = output(&r).trim().parse().unwrap_or(999);
    assert!(count < 10, "{r}");
}

#[test]
fn nothing_started_by_a_foreground_call_survives_it() {
    let f = fixture();
    std::fs::write(
        f.workspace.path().join("spawn.sh"),
        "(setsid sleep 3001.25 &)\ncoproc sleep 3002.25\nsleep 0.2\necho running:$(pgrep -fc 'sleep 300[12].25')\n",
    )
    .unwrap();
    let r = f.terminal("bash spawn.sh");
    assert!(
        output(&r).contains("running:2"),
        "the script did not start both: {r}"
    );
    assert_eq!(
        common::survivors("sleep 3001.25"),
        Vec::<u32>::new(),
        "the setsid child outlived the call"
    );
    assert_eq!(
        common::survivors("sleep 3002.25"),
        Vec::<u32>::new(),
        "the coprocess outlived the call"
    );

    std::fs::write(
        f.workspace.path().join("hang.sh"),
        "(setsid sleep 3003.25 &)\nsleep 3004.25\n",
    )
    .unwrap();
    let r = f.terminal_with(json!({"command": "bash hang.sh", "timeout": 2}), &[]);
    assert_eq!(r["exit_code"], 124, "{r}");
    assert_eq!(common::survivors("sleep 3003.25"), Vec::<u32>::new());
    assert_eq!(common::survivors("sleep 3004.25"), Vec::<u32>::new());
}

#[test]
fn ordinary_workspace_work_runs_unattended() {
    let f = fixture();
    for command in [
        "mkdir -p build/obj && touch build/obj/a.o && rm -rf ./build && test ! -e build && echo removed",
        "python3 -c 'print(1)'",
        "git init -q repo && cd repo && git -c user.email=a@b -c user.name=n commit -q --allow-empty -m one \
         && echo x > f && git add f && git -c user.email=a@b -c user.name=n commit -q -m two \
         && git reset -q --hard HEAD~1 && test ! -e f && git log --oneline | wc -l",
    ] {
        let r = f.terminal(command);
        assert_eq!(r["exit_code"], 0, "{command}: {r}");
        assert!(r.get("status").is_none(), "{r}");
    }
}

#[test]
fn a_command_starts_as_a_fresh_child_would() {
    let f = fixture();
    // Through the launcher of a task's sandbox (every call of serve), and started ahead.
    let mut server = f.serve();
    let look = "grep -E '^Sig(Blk|Ign)' /proc/self/status; [ \"$(ps -o sid= -p $$ | tr -d ' ')\" = $$ ] && echo own-session; \
        readlink /proc/self/fd/0; cat; ls /proc/self/fd | tr '\\n' ' '; echo; yes | head -1";
    for round in 0..4 {
        let r = server.call("terminal", json!({"command": look}));
        let lines: Vec<&str> = output(&r).lines().collect();
        assert_eq!(lines.len(), 6, "round {round}: {r}");
        // No signal blocked, and none of 1-31 ignored (the launcher ignores SIGPIPE, as
        // Rust programs do; glibc keeps its own 32 and 33 ignored in what it spawns).
        assert_eq!(lines[0], "SigBlk:\t0000000000000000", "round {round}: {r}");
        let ignored = u64::from_str_radix(lines[1].trim_start_matches("SigIgn:\t"), 16).unwrap();
        assert_eq!(ignored & 0x7fff_ffff, 0, "round {round}: {r}");
        assert_eq!(
            &lines[2..],
            ["own-session", "/dev/null", "0 1 2 3 ", "y"],
            "round {round}: {r}"
        );
        assert_eq!(r["exit_code"], 0, "round {round}: {r}");
    }
}

#[test]
fn shell_state_persists_inside_the_sandbox_in_read_only_mode() {
    let f = fixture();
    f.config("terminal:\n  sandbox:\n    mode: read-only\n");
    std::fs::create_dir(f.workspace.path().join("sub")).unwrap();
    let mut server = f.serve();
    let r = server.call(
        "terminal",
        json!({"command": "cd sub && export GREETING=hello && touch made-here"}),
    );
    assert!(output(&r).contains("Read-only file system"), "{r}");
    let r = server.call(
        "terminal",
        json!({"command": "echo $GREETING in $(basename $PWD)"}),
    );
    assert_eq!(output(&r), "hello in sub", "{r}");
    assert!(!f.workspace.path().join("sub/made-here").exists());
}

#[test]
fn the_wall_comes_with_the_binary() {
    // No bubblewrap is needed (CI has none installed): the sandbox's init is this
    // binary, started as its wall (forked from the binary's zygote, whose command line
    // it keeps, when there is one), and the walls hold.
    let f = fixture();
    let r = f.terminal(
        "tr '\\0' ' ' < /proc/1/cmdline; echo; touch /usr/hermes-probe 2>&1; \
         touch \"$HOME/.bashrc\" 2>&1",
    );
    let text = output(&r);
    let init = text.lines().next().unwrap_or_default();
    assert!(
        (init.contains("__hermes-sandbox-wall") || init.contains("__hermes-sandbox-zygote"))
            && !init.contains("bwrap"),
        "{r}"
    );
    assert_eq!(text.matches("Read-only file system").count(), 2, "{r}");
    // The wall refuses what it does not understand instead of building a weaker sandbox.
    let out = Command::new(env!("CARGO_BIN_EXE_hermes-tools"))
        .args(["__hermes-sandbox-wall", "--share-net", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown option"));
    // Nor do the launcher and the zygote the walls are forked from serve anyone but the
    // server that starts them with their channel.
    for role in ["__hermes-sandbox-launcher", "__hermes-sandbox-zygote"] {
        let out = Command::new(env!("CARGO_BIN_EXE_hermes-tools"))
            .arg(role)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{role}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("is only run by the terminal"),
            "{role}: {out:?}"
        );
    }
}

/// The state letter of a process from `/proc/PID/stat` (`Z` for a zombie).
fn process_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 2..].chars().next()
}

#[test]
fn a_wall_that_ends_is_reaped_while_others_live_on() {
    let f = fixture();
    let mut server = f.serve();
    for task in ["one", "two"] {
        let r = server.call_in(
            &json!({"task_id": task}),
            "terminal",
            json!({"command": "true"}),
        );
        assert_eq!(r["exit_code"], 0, "{r}");
    }
    let zygote = common::descendants(server.pid())
        .into_iter()
        .find(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains("__hermes-sandbox-zygote"))
        })
        .expect("the walls' zygote");
    let walls = || -> Vec<u32> {
        common::descendants(zygote)
            .into_iter()
            .filter(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                    stat[stat.rfind(')').unwrap() + 2..]
                        .split(' ')
                        .nth(1)
                        .is_some_and(|parent| parent == zygote.to_string())
                })
            })
            .collect()
    };
    let before = walls();
    assert!(before.len() >= 2, "a wall per task: {before:?}");
    // One of them ended from outside.
    let ended = before[0];
    // SAFETY: a signal to a process this test's server started.
    assert_eq!(unsafe { libc::kill(ended as i32, libc::SIGKILL) }, 0);
    // Reaped (polled for up to 10 s), and none of the others with it.
    let deadline = Instant::now() + Duration::from_secs(10);
    while process_state(ended).is_some() {
        assert!(
            Instant::now() < deadline,
            "the ended wall is left as {:?}",
            process_state(ended)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let alive = walls();
    assert!(
        alive.iter().all(|pid| process_state(*pid) != Some('Z')),
        "{alive:?}"
    );
    // Each task goes on, the one whose sandbox was ended in a new one.
    for task in ["one", "two"] {
        let r = server.call_in(
            &json!({"task_id": task}),
            "terminal",
            json!({"command": "echo again"}),
        );
        assert_eq!(output(&r), "again", "{task}: {r}");
    }
}

#[test]
fn root_inside_the_sandbox_has_no_capabilities() {
    let f = fixture();
    let r = f.terminal(
        "grep -E '^Cap(Eff|Prm|Bnd|Amb)' /proc/self/status; grep NoNewPrivs /proc/self/status",
    );
    let text = output(&r);
    for cap in ["CapEff", "CapPrm", "CapBnd", "CapAmb"] {
        assert!(
            text.contains(&format!("{cap}:\t0000000000000000")),
            "{cap} not empty: {text}"
        );
    }
    assert!(text.contains("NoNewPrivs:\t1"), "{text}");
    // Writing the value back unchanged: harmless if it were allowed, refused inside.
    let r = f.terminal("cat /proc/sys/kernel/hostname > /proc/sys/kernel/hostname");
    assert!(output(&r).contains("Read-only file system"), "{r}");
    let r = f.terminal("mkdir -p mnt && mount -t tmpfs none mnt");
    assert_ne!(r["exit_code"], 0, "{r}");
    // No new namespaces either (seccomp), while ordinary threads still start.
    let r = f.terminal("grep Seccomp_filters /proc/self/status; unshare -U true");
    // One more filter before Landlock ABI 9: the unix socket guard's.
    let filters = if hermes_sandbox::landlock_abi() < 9 {
        3
    } else {
        2
    };
    assert!(
        output(&r).contains(&format!("Seccomp_filters:\t{filters}"))
            && output(&r).contains("Operation not permitted"),
        "{r}"
    );
    // Nor a seccomp listener of its own, whose answers would come before the guard's
    // (a NULL program: EFAULT if the call got as far as the kernel).
    let r = f.terminal(
        "python3 -c 'import ctypes, os; libc = ctypes.CDLL(None, use_errno=True); \
         nr = {\"x86_64\": 317, \"aarch64\": 277}[os.uname().machine]; \
         print(libc.syscall(nr, 1, 8, None), os.strerror(ctypes.get_errno()))'",
    );
    assert_eq!(output(&r), "-1 Operation not permitted", "{r}");
    let r = f.terminal("python3 -c 'import threading; t = threading.Thread(target=print, args=(\"in a thread\",)); t.start(); t.join()'");
    assert_eq!(output(&r), "in a thread", "{r}");
}

/// The sandbox's root lies over the base it was assembled on (the host's root is
/// detached): no mount beneath the root shows, and neither `chroot` nor taking the root
/// off, the ways back down to the base, is allowed.
#[test]
fn what_lies_beneath_the_sandboxs_root_is_out_of_reach() {
    let f = fixture();
    let r = f.terminal(
        "python3 -c '
ids = {}
for line in open(\"/proc/self/mountinfo\"):
    fields = line.split()
    ids[fields[0]] = (fields[1], fields[4])
root = [parent for own, (parent, point) in ids.items() if point == \"/\"]
print(len(root), any(parent in ids for parent in root))
'",
    );
    assert_eq!(output(&r), "1 False", "{r}");
    for attempt in [
        "chroot / true",
        "umount -l /",
        "python3 -c 'import os; os.chroot(\"/tmp\")'",
    ] {
        let r = f.terminal(attempt);
        assert_ne!(r["exit_code"], 0, "{attempt}: {r}");
        assert!(
            output(&r).contains("Operation not permitted")
                || output(&r).contains("must be superuser"),
            "{attempt}: {r}"
        );
    }
}

#[test]
fn network_can_be_turned_off() {
    let f = fixture();
    let host = std::fs::read_to_string("/proc/net/dev").unwrap();
    let host_links = host.lines().skip(2).count();
    f.config("terminal:\n  sandbox:\n    network: false\n");
    let r = f.terminal("tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '");
    assert_eq!(output(&r), "lo", "{r}");
    assert!(host_links >= 1);
}

#[test]
fn hardline_never_runs_and_off_keeps_the_unattended_refusal() {
    let f = fixture();
    let r = f.terminal("rm -rf /");
    assert_eq!(r["status"], "blocked", "{r}");
    f.config("terminal:\n  sandbox:\n    mode: off\n");
    let r = f.terminal(&format!("a=1; rm -rf {}", f.victim().display()));
    assert_eq!(r["status"], "blocked", "{r}");
    f.assert_victim_intact();
    f.config("terminal:\n  sandbox:\n    mode: sideways\n");
    let r = f.terminal("true");
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .contains("terminal.sandbox.mode 'sideways'"),
        "{r}"
    );
}

#[test]
fn a_standing_grant_escalates_only_where_a_person_is_present() {
    let f = fixture();
    let target = f.outside.path().join("victim");
    let command = format!("rm -rf {}", target.display());
    f.config(&format!("command_allowlist:\n  - '{command}'\n"));
    // Unattended: the grant lets it run, but only inside the sandbox.
    let r = f.terminal(&command);
    assert!(output(&r).contains("Read-only file system"), "{r}");
    f.assert_victim_intact();
    // With a person at the terminal, the standing grant takes it out of the sandbox.
    let r = f.terminal_with(json!({"command": command}), &[("HERMES_INTERACTIVE", "1")]);
    assert_eq!(r["exit_code"], 0, "{r}");
    assert!(
        r["approval"]
            .as_str()
            .unwrap_or("")
            .contains("outside the sandbox"),
        "{r}"
    );
    assert!(
        !target.exists(),
        "the granted command did not run outside the sandbox"
    );
}

#[test]
fn killing_a_background_process_ends_everything_it_started() {
    let f = fixture();
    let mut server = f.serve();
    std::fs::write(
        f.workspace.path().join("daemon.sh"),
        "(setsid sleep 3005.25 &)\nsleep 3006.25\n",
    )
    .unwrap();
    let started = server.call(
        "terminal",
        json!({"command": "bash daemon.sh", "background": true}),
    );
    let id = started["session_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{started}"))
        .to_string();
    let deadline = Instant::now() + Duration::from_secs(10);
    while common::host_pids_running("sleep 3005.25").is_empty()
        || common::host_pids_running("sleep 3006.25").is_empty()
    {
        assert!(
            Instant::now() < deadline,
            "the background script did not start its children"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let r = server.call("process", json!({"action": "kill", "session_id": id}));
    assert_eq!(r["status"], "killed", "{r}");
    assert_eq!(
        common::survivors("sleep 3005.25"),
        Vec::<u32>::new(),
        "the detached child survived the kill"
    );
    assert_eq!(common::survivors("sleep 3006.25"), Vec::<u32>::new());
    let r = server.call("process", json!({"action": "poll", "session_id": id}));
    assert_eq!(r["status"], "exited", "{r}");
    assert_eq!(r["completion_reason"], "killed", "{r}");
}

#[test]
fn host_services_on_socket_files_are_out_of_reach() {
    let f = fixture();
    let socket = f.home.path().join("service.sock");
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let connect = format!(
        "python3 -c 'import socket; c = socket.socket(socket.AF_UNIX); c.connect(\"{}\"); print(\"connected\")'",
        socket.display()
    );
    let r = f.terminal(&connect);
    let refused = ["Connection refused", "Permission denied"]
        .iter()
        .any(|e| output(&r).contains(e));
    assert!(!output(&r).contains("connected") && refused, "{r}");
    // The same command outside the sandbox reaches the service: the refusal is the sandbox's.
    f.config("terminal:\n  sandbox:\n    mode: off\napprovals:\n  unattended_mode: approve\n");
    let r = f.terminal(&connect);
    assert_eq!(output(&r), "connected", "{r}");
    drop(listener);
}

#[test]
fn a_sandbox_that_cannot_start_fails_closed() {
    let f = fixture();
    let marker = f.workspace.path().join("ran-unsandboxed");
    let command = json!({"command": format!("touch {}", marker.display())});
    // No launcher at all.
    let r = f.terminal_with(
        command.clone(),
        &[("TERMINAL_SANDBOX_BWRAP", "/nonexistent/bwrap")],
    );
    let error = r["error"].as_str().unwrap_or_else(|| panic!("{r}"));
    assert!(
        error.contains("bubblewrap (bwrap) was not found")
            && error.contains("terminal.sandbox.mode: off"),
        "{r}"
    );
    // A launcher that cannot set up namespaces (as on a kernel without user namespaces).
    let broken = f.outside.path().join("bwrap");
    std::fs::write(
        &broken,
        "#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n",
    )
    .unwrap();
    std::fs::set_permissions(&broken, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let r = f.terminal_with(
        command,
        &[("TERMINAL_SANDBOX_BWRAP", broken.to_str().unwrap())],
    );
    let error = r["error"].as_str().unwrap_or_else(|| panic!("{r}"));
    assert!(
        error.contains("No permissions to create new namespace")
            && error.contains("terminal.sandbox.mode: off"),
        "{r}"
    );
    assert!(!marker.exists(), "the command ran without its sandbox");
}

#[test]
fn host_abstract_sockets_are_out_of_reach() {
    use std::os::linux::net::SocketAddrExt;
    let f = fixture();
    let name = format!("hermes-sandbox-test-{}", std::process::id());
    let address = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let listener = std::os::unix::net::UnixListener::bind_addr(&address).unwrap();
    let connect = format!(
        "python3 -c 'import socket; c = socket.socket(socket.AF_UNIX); c.connect(\"\\0{name}\"); print(\"connected\")'"
    );
    let r = f.terminal(&connect);
    // Refused: the sandbox's network namespace has its own abstract names (and Landlock
    // scopes it where the kernel can).
    assert!(
        !output(&r).contains("connected")
            && (output(&r).contains("Operation not permitted")
                || output(&r).contains("Connection refused")),
        "{r}"
    );
    f.config("terminal:\n  sandbox:\n    mode: off\napprovals:\n  unattended_mode: approve\n");
    let r = f.terminal(&connect);
    assert_eq!(output(&r), "connected", "{r}");
    drop(listener);
}

#[test]
fn nothing_one_command_starts_is_alive_when_the_next_begins() {
    // Commands of one serve task share a long-lived sandbox: what a command leaves
    // behind must be gone when its call returns, timeouts included.
    let f = fixture();
    let mut server = f.serve();
    std::fs::write(
        f.workspace.path().join("leave.sh"),
        "(setsid sleep 3011.25 &)\ncoproc sleep 3012.25\nsleep 0.2\necho running:$(pgrep -fc 'sleep 301[12].25')\n",
    )
    .unwrap();
    let r = server.call("terminal", json!({"command": "bash leave.sh"}));
    assert!(
        output(&r).contains("running:2"),
        "the script did not start both: {r}"
    );
    assert_eq!(
        host_pids_running("sleep 3011.25"),
        Vec::<u32>::new(),
        "the setsid child outlived its call"
    );
    assert_eq!(
        host_pids_running("sleep 3012.25"),
        Vec::<u32>::new(),
        "the coprocess outlived its call"
    );
    std::fs::write(
        f.workspace.path().join("hang.sh"),
        "(setsid sleep 3013.25 &)\nsleep 3014.25\n",
    )
    .unwrap();
    let r = server.call("terminal", json!({"command": "bash hang.sh", "timeout": 2}));
    assert_eq!(r["exit_code"], 124, "{r}");
    assert_eq!(host_pids_running("sleep 3013.25"), Vec::<u32>::new());
    assert_eq!(host_pids_running("sleep 3014.25"), Vec::<u32>::new());
    // The next command sees no process but its own tree and the sandbox's own: its init,
    // its launcher and, for a task's commands from its second on, the bash they are
    // forked from.
    let r = server.call("terminal", json!({"command": "ps -eo comm="}));
    assert_eq!(r["exit_code"], 0, "{r}");
    let names: Vec<&str> = output(&r).lines().map(str::trim).collect();
    assert!(!names.contains(&"sleep") && names.len() <= 5, "{r}");
}

#[test]
fn the_launcher_between_commands_cannot_be_traced_or_read() {
    let f = fixture();
    let mut server = f.serve();
    let r = server.call("terminal", json!({"command": "cat /proc/$PPID/environ; ls -l /proc/$PPID/fd/ 2>&1 | grep -c -- '->'; \
        python3 -c 'import ctypes, os, sys; c = ctypes.CDLL(None, use_errno=True); \
        print(\"attach\", c.ptrace(16, int(sys.argv[1]), 0, 0), os.strerror(ctypes.get_errno()))' $PPID", "timeout": 20}));
    let text = output(&r);
    assert!(text.contains("environ: Permission denied"), "{r}");
    assert!(text.contains("attach -1 Operation not permitted"), "{r}");
    assert!(
        text.lines().any(|l| l.trim() == "0"),
        "descriptors of the launcher are listed: {r}"
    );
    // A command that kills the launcher ends its own sandbox; the next one gets a new one.
    let r = server.call("terminal", json!({"command": "kill -9 $PPID; sleep 5"}));
    assert_ne!(r["exit_code"], 0, "{r}");
    let victim = f.victim().display().to_string();
    let r = server.call(
        "terminal",
        json!({"command": format!("rm -rf {victim}; echo after")}),
    );
    assert!(
        output(&r).contains("Read-only file system") && output(&r).contains("after"),
        "{r}"
    );
    f.assert_victim_intact();
}

#[test]
fn a_socket_file_that_appears_between_commands_is_covered_too() {
    let f = fixture();
    let mut server = f.serve();
    let r = server.call("terminal", json!({"command": "true"}));
    assert_eq!(r["exit_code"], 0, "{r}");
    // A service starts listening after the task's sandbox was set up.
    let socket = f.home.path().join("late.sock");
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let connect = format!(
        "python3 -c 'import socket; c = socket.socket(socket.AF_UNIX); c.connect(\"{}\"); print(\"connected\")'",
        socket.display()
    );
    let r = server.call("terminal", json!({"command": connect}));
    let refused = ["Connection refused", "Permission denied"]
        .iter()
        .any(|e| output(&r).contains(e));
    assert!(!output(&r).contains("connected") && refused, "{r}");
    drop(listener);
}

#[test]
fn a_command_that_replaces_the_server_binary_changes_nothing_a_later_sandbox_runs() {
    // The server runs from a copy inside its workspace, a root its commands may write.
    let f = fixture();
    let copy = f.workspace.path().join("bin").join("hermes-tools");
    std::fs::create_dir_all(copy.parent().unwrap()).unwrap();
    std::fs::copy(env!("CARGO_BIN_EXE_hermes-tools"), &copy).unwrap();
    let marker = f.workspace.path().join("impostor-ran");
    let mut server =
        common::ServeSession::spawn(f.command_of(&copy, &["serve"]), json!({"task_id": "t1"}));
    let r = server.call("terminal", json!({"command": "true"}));
    assert_eq!(r["exit_code"], 0, "{r}");
    // The command renames a program of its own over the server's file.
    let swap = format!(
        "printf '#!/bin/sh\\ntouch {marker}\\nexit 1\\n' > bin/impostor && chmod +x bin/impostor && mv bin/impostor bin/hermes-tools && echo swapped",
        marker = marker.display()
    );
    let r = server.call("terminal", json!({"command": swap}));
    assert!(output(&r).contains("swapped"), "{r}");
    assert!(
        std::fs::read(&copy).unwrap().starts_with(b"#!/bin/sh"),
        "the copy was not replaced"
    );
    // A fresh task gets a new sandbox, and so does the first task once its launcher is gone.
    // (Its shell's parent is the launcher, pid 2, not a sandbox of the command's own.)
    let r = server.call_in(
        &json!({"task_id": "t2"}),
        "terminal",
        json!({"command": "echo fresh-$PPID"}),
    );
    assert_eq!(output(&r), "fresh-2", "{r}");
    let r = server.call("terminal", json!({"command": "kill -9 $PPID; sleep 5"}));
    assert_ne!(r["exit_code"], 0, "{r}");
    let r = server.call("terminal", json!({"command": "echo again-$PPID"}));
    assert_eq!(output(&r), "again-2", "{r}");
    assert!(
        !marker.exists(),
        "a sandbox started the program a command put in place of the server's"
    );
}

/// Every file under `dir` (recursively) whose name starts with `prefix`.
fn files_named(dir: &std::path::Path, prefix: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(files_named(&path, prefix));
        } else if entry.file_name().to_string_lossy().starts_with(prefix) {
            found.push(path);
        }
    }
    found
}

#[test]
fn the_sandbox_own_files_are_out_of_every_sandbox_and_removed_when_the_server_ends() {
    let f = fixture();
    // The runtime directory lies under /tmp, a writable root of every sandbox: only the
    // sandbox's own hiding keeps its files out of reach.
    let runtime = tempfile::tempdir().unwrap();
    let base = runtime.path().join("hermes-tools");
    for ending in ["end of input", "SIGTERM", "SIGINT"] {
        let token = format!("tok-{}", ending.len() * 7919);
        let mut cmd = f.command(&["serve"]);
        cmd.env("XDG_RUNTIME_DIR", runtime.path());
        let mut server = common::ServeSession::spawn(cmd, json!({"task_id": "a"}));
        let r = server.call(
            "terminal",
            json!({"command": format!("export SECRET_TOKEN={token}; true")}),
        );
        assert_eq!(r["exit_code"], 0, "{r}");
        let snapshots: Vec<PathBuf> = files_named(&base, "hermes-snap-")
            .into_iter()
            .filter(|p| std::fs::read_to_string(p).is_ok_and(|t| t.contains(&token)))
            .collect();
        assert!(
            !snapshots.is_empty(),
            "task a's snapshot is in the server's private directory under {}",
            base.display()
        );
        let programs = files_named(&base, "seccomp-");
        assert_eq!(programs.len(), 2, "{programs:?}");
        let before: Vec<Vec<u8>> = programs.iter().map(|p| std::fs::read(p).unwrap()).collect();
        let overwrite: String = programs
            .iter()
            .map(|p| format!("printf x > {} && echo WROTE; ", p.display()))
            .collect();

        let other = server.call_in(
            &json!({"task_id": "b"}),
            "terminal",
            json!({"command": format!(
                "cat {snap}; grep -rs {token} {base} /tmp/hermes-sandbox-* /dev/shm; {overwrite}",
                snap = snapshots[0].display(),
                base = base.display(),
            )}),
        );
        assert!(!output(&other).contains(&token), "{other}");
        assert!(!output(&other).contains("WROTE"), "{other}");
        let own = server.call("terminal", json!({"command": overwrite}));
        assert!(!output(&own).contains("WROTE"), "{own}");
        let after: Vec<Vec<u8>> = programs.iter().map(|p| std::fs::read(p).unwrap()).collect();
        assert_eq!(
            before, after,
            "a sandboxed command changed a seccomp program"
        );
        // The state still works for the task itself.
        let own = server.call("terminal", json!({"command": "echo $SECRET_TOKEN"}));
        assert_eq!(output(&own), token, "{own}");

        let pid = server.pid();
        let signal = match ending {
            "SIGTERM" => Some(libc::SIGTERM),
            "SIGINT" => Some(libc::SIGINT),
            _ => None,
        };
        if let Some(signal) = signal {
            // SAFETY: kill(2) on the test's own child touches no memory.
            unsafe { libc::kill(pid as i32, signal) };
        }
        drop(server);
        let left: Vec<String> = std::fs::read_dir(&base)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(&format!("srv-{pid}-")))
            .collect();
        assert!(
            left.is_empty(),
            "after {ending}: {left:?} left in {}",
            base.display()
        );
    }
}

/// Starts up to 3,000 processes that each wait `seconds`, waits for them, and prints
/// how many it could start.
const FORKS: &str = "import os, time, sys
started = 0
try:
    for _ in range(3000):
        if os.fork() == 0:
            time.sleep(float(sys.argv[1]))
            os._exit(0)
        started += 1
except OSError as e:
    print('fork refused:', e)
print('started', started)
while True:
    try:
        os.wait()
    except ChildProcessError:
        break
";

fn started_processes(result: &Value) -> u64 {
    output(result)
        .lines()
        .find_map(|l| l.strip_prefix("started "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no count in {result}"))
}

#[test]
fn limits_stop_one_command_and_say_which_while_other_tasks_keep_answering() {
    let f = fixture();
    f.config(
        "terminal:\n  sandbox:\n    limits:\n      max_processes: 200\n      max_memory_mb: 1024\n      \
         max_file_size_mb: 64\n      max_cpu_seconds: 2\n",
    );
    std::fs::write(f.workspace.path().join("forks.py"), FORKS).unwrap();
    let mut server = f.serve();

    // 3,000 processes in one task while another task's calls are answered.
    let bomb = server.send(
        &json!({"task_id": "bomb"}),
        "terminal",
        json!({"command": "python3 forks.py 4"}),
    );
    let mut others_answered = 0;
    for i in 0..3 {
        let echo = server.send(
            &json!({"task_id": "other"}),
            "terminal",
            json!({"command": format!("echo alive-{i}")}),
        );
        let (id, result) = server.next_answer();
        assert_eq!(
            id, echo,
            "the other task's call waited for the bomb: {result}"
        );
        assert_eq!(output(&result), format!("alive-{i}"));
        others_answered += 1;
    }
    let (id, result) = server.next_answer();
    assert_eq!(id, bomb);
    assert_eq!(others_answered, 3);
    assert!(started_processes(&result) < 200, "{result}");
    assert!(
        result["limit"]
            .as_str()
            .unwrap_or("")
            .contains("max_processes"),
        "{result}"
    );

    // 3 GiB of memory.
    let r = server.call(
        "terminal",
        json!({"command": "python3 -c 'b = bytearray(3 << 30); print(len(b))'"}),
    );
    assert!(output(&r).contains("MemoryError"), "{r}");
    assert!(
        r["limit"].as_str().unwrap_or("").contains("max_memory_mb"),
        "{r}"
    );

    // A 3 GiB file.
    let r = server.call(
        "terminal",
        json!({"command": "head -c 3G /dev/zero > big.bin; ls -l big.bin"}),
    );
    assert!(
        r["limit"]
            .as_str()
            .unwrap_or("")
            .contains("max_file_size_mb"),
        "{r}"
    );
    let size = std::fs::metadata(f.workspace.path().join("big.bin"))
        .unwrap()
        .len();
    assert!(size <= 64 << 20, "{size} bytes written");

    // CPU time.
    let r = server.call(
        "terminal",
        json!({"command": "python3 -c 'while True: pass'", "timeout": 60}),
    );
    assert!(
        r["limit"]
            .as_str()
            .unwrap_or("")
            .contains("max_cpu_seconds"),
        "{r}"
    );

    // Ordinary work after all that.
    let r = server.call("terminal", json!({"command": "echo still-here"}));
    assert_eq!(output(&r), "still-here", "{r}");
}

#[test]
fn the_default_limits_stop_a_fork_bomb() {
    let f = fixture();
    std::fs::write(f.workspace.path().join("forks.py"), FORKS).unwrap();
    let r = f.terminal("python3 forks.py 1");
    let started = started_processes(&r);
    assert!(started > 500 && started < 1024, "{r}");
    assert!(
        r["limit"].as_str().unwrap_or("").contains("max_processes"),
        "{r}"
    );
}

#[test]
fn another_task_cannot_reach_an_execute_code_script_while_it_runs() {
    let f = fixture();
    let mut server = f.serve();
    let script =
        "import time\nopen('script-path.txt', 'w').write(__file__)\ntime.sleep(4)\nprint('done')\n";
    let run = server.send(
        &json!({"task_id": "a"}),
        "execute_code",
        json!({"code": script}),
    );
    let probe = server.send(
        &json!({"task_id": "b"}),
        "terminal",
        json!({"command": "for i in $(seq 100); do [ -s script-path.txt ] && break; sleep 0.1; done; \
                            p=$(cat script-path.txt); echo \"path=$p\"; cat \"$p\"; echo 'print(1)' > \"$p\" && echo CHANGED"}),
    );
    let (id, result) = server.next_answer();
    assert_eq!(id, probe, "{result}");
    let shown = output(&result);
    assert!(
        shown.contains("path=/"),
        "the script never started: {result}"
    );
    assert!(!shown.contains("time.sleep"), "{result}");
    assert!(!shown.contains("CHANGED"), "{result}");
    let (id, result) = server.next_answer();
    assert_eq!(id, run);
    assert!(
        result["output"].as_str().unwrap_or("").contains("done"),
        "{result}"
    );
}

/// Runs a command that waits for `socket` and then connects to it, makes the socket
/// (a host service starting to listen) once the command is running, and returns the
/// command's result and the listener.
fn connect_to_a_socket_made_while_the_command_waits(
    f: &Fixture,
    server: &mut common::ServeSession,
    socket: &std::path::Path,
) -> (Value, std::os::unix::net::UnixListener) {
    let connect = format!(
        "python3 -c 'import socket; c = socket.socket(socket.AF_UNIX); c.connect(\"{}\"); print(\"connected\")'",
        socket.display()
    );
    run_while_a_host_socket_appears(f, server, socket, &connect, |path| {
        std::os::unix::net::UnixListener::bind(path).unwrap()
    })
}

/// Runs `then` in a command once `socket` exists, and makes the socket with `make` (a
/// host service starting) only after the command started; the command's result and
/// what `make` returned.
fn run_while_a_host_socket_appears<T>(
    f: &Fixture,
    server: &mut common::ServeSession,
    socket: &std::path::Path,
    then: &str,
    make: impl FnOnce(&std::path::Path) -> T,
) -> (Value, T) {
    let wait_and_run = format!(
        "touch waiting; for i in $(seq 100); do [ -S {s} ] && break; sleep 0.1; done; {then}",
        s = socket.display()
    );
    let waiting = f.workspace.path().join("waiting");
    let _ = std::fs::remove_file(&waiting);
    let id = server.send(
        &json!({"task_id": "t1"}),
        "terminal",
        json!({"command": wait_and_run, "timeout": 120}),
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    while !waiting.exists() {
        assert!(Instant::now() < deadline, "the command never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let made = make(socket);
    let (answered, r) = server.next_answer();
    assert_eq!(answered, id);
    (r, made)
}

#[test]
fn a_service_socket_made_under_run_while_a_command_waits_stays_out_of_reach() {
    let f = fixture();
    // The service's directory is a temp dir of this test under /run, where host
    // services make their sockets.
    let service = tempfile::tempdir_in("/run").unwrap();
    let socket = service.path().join("late.sock");
    let mut server = f.serve();
    let (r, listener) = connect_to_a_socket_made_while_the_command_waits(&f, &mut server, &socket);
    assert!(!output(&r).contains("connected"), "{r}");
    assert!(output(&r).contains("No such file"), "{r}");
    drop(listener);
}

#[test]
fn a_host_socket_made_in_a_shared_root_while_a_command_waits_is_refused() {
    // The workspace and /tmp are shared with the host: a socket file a host service
    // makes there after the command started is not covered by any mount. Landlock ABI 9
    // (RESOLVE_UNIX) refuses it; before, the sandbox's init does, by the same rule.
    let f = fixture();
    let mut server = f.serve();
    let own = "python3 -c 'import socket, os\n\
s = socket.socket(socket.AF_UNIX); s.bind(\"own.sock\"); s.listen(1)\n\
if os.fork() == 0:\n    c = socket.socket(socket.AF_UNIX); c.connect(\"own.sock\"); c.send(b\"hi\"); os._exit(0)\n\
a, _ = s.accept(); print(\"own socket:\", a.recv(2).decode())'";
    let r = server.call("terminal", json!({"command": own}));
    assert!(output(&r).contains("own socket: hi"), "{r}");

    let shared_tmp = tempfile::tempdir().unwrap();
    for socket in [
        f.workspace.path().join("late-host.sock"),
        shared_tmp.path().join("late-host.sock"),
    ] {
        let (r, listener) =
            connect_to_a_socket_made_while_the_command_waits(&f, &mut server, &socket);
        assert!(!output(&r).contains("connected"), "{r}");
        assert!(output(&r).contains("Permission denied"), "{r}");
        listener.set_nonblocking(true).unwrap();
        assert!(
            listener.accept().is_err(),
            "the host socket took a connection"
        );
    }
}

/// A Python function `sendmmsg(sock, path, payloads)` (through ctypes: Python has no
/// sendmmsg) returning the call's result, errno and each message's sent length.
const PYTHON_SENDMMSG: &str = r#"
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
class msghdr(ctypes.Structure):
    _fields_ = [("name", ctypes.c_void_p), ("namelen", ctypes.c_uint32), ("iov", ctypes.POINTER(iovec)),
                ("iovlen", ctypes.c_size_t), ("control", ctypes.c_void_p), ("controllen", ctypes.c_size_t),
                ("flags", ctypes.c_int)]
class mmsghdr(ctypes.Structure):
    _fields_ = [("hdr", msghdr), ("len", ctypes.c_uint)]
def sendmmsg(sock, path, payloads):
    addr = ctypes.create_string_buffer((1).to_bytes(2, "little") + path.encode() + bytes(1))
    bufs = [ctypes.create_string_buffer(p, len(p)) for p in payloads]
    iovs = [iovec(ctypes.cast(b, ctypes.c_void_p), len(p)) for b, p in zip(bufs, payloads)]
    msgs = (mmsghdr * len(payloads))()
    for m, iov in zip(msgs, iovs):
        m.hdr.name = ctypes.cast(addr, ctypes.c_void_p); m.hdr.namelen = len(addr.raw)
        m.hdr.iov = ctypes.pointer(iov); m.hdr.iovlen = 1
    n = libc.sendmmsg(sock.fileno(), msgs, len(payloads), 0)
    return n, os.strerror(ctypes.get_errno()) if n < 0 else "", [m.len for m in msgs]
"#;

#[test]
fn a_host_datagram_socket_made_while_a_command_waits_gets_nothing() {
    let f = fixture();
    let mut server = f.serve();
    let socket = f.workspace.path().join("late-host.dgram");
    std::fs::write(
        f.workspace.path().join("mmsg.py"),
        format!("import os\n{PYTHON_SENDMMSG}"),
    )
    .unwrap();
    let send = format!(
        r#"python3 -c '
import socket
from mmsg import sendmmsg
c = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
print("sendmmsg", *sendmmsg(c, "{s}", [b"x", b"y"])[:2])
for how in ("sendto", "connect"):
    try:
        c.sendto(b"x", "{s}") if how == "sendto" else c.connect("{s}")
        print(how, "reached the host")
    except OSError as e:
        print(how, e.strerror)
'"#,
        s = socket.display()
    );
    let (r, host) = run_while_a_host_socket_appears(&f, &mut server, &socket, &send, |path| {
        std::os::unix::net::UnixDatagram::bind(path).unwrap()
    });
    let shown = output(&r);
    assert!(!shown.contains("reached the host"), "{r}");
    assert!(shown.contains("sendto Permission denied"), "{r}");
    assert!(shown.contains("connect Permission denied"), "{r}");
    assert!(shown.contains("sendmmsg -1 Permission denied"), "{r}");
    host.set_nonblocking(true).unwrap();
    assert!(
        host.recv(&mut [0u8; 8]).is_err(),
        "a datagram reached the host"
    );
}

#[test]
fn sockets_made_inside_a_sandbox_keep_working() {
    // Pathname (absolute, relative, through a symlink, from a thread), abstract and
    // datagram sockets, descriptors passed along, all inside one command.
    let f = fixture();
    let script = r#"
import os, socket, threading, array
here = os.getcwd()
srv = socket.socket(socket.AF_UNIX); srv.bind("own.sock"); srv.listen(16)
os.symlink("own.sock", "link.sock")
def serve():
    while True:
        a, _ = srv.accept(); a.send(b"ok"); a.close()
threading.Thread(target=serve, daemon=True).start()
for name, path in [("relative", "own.sock"), ("absolute", here + "/own.sock"), ("symlink", "link.sock")]:
    c = socket.socket(socket.AF_UNIX); c.connect(path); print(name, c.recv(2).decode()); c.close()
os.mkdir("sub"); os.chdir("sub")
c = socket.socket(socket.AF_UNIX); c.connect("../own.sock"); print("parent", c.recv(2).decode()); c.close()
os.chdir(here)
ab = socket.socket(socket.AF_UNIX); ab.bind("\0hermes-guard-test"); ab.listen(1)
c = socket.socket(socket.AF_UNIX); c.connect("\0hermes-guard-test"); a, _ = ab.accept(); c.send(b"ab"); print("abstract", a.recv(2).decode())
d = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); d.bind("dgram.sock")
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.sendto(b"dg", "dgram.sock"); print("datagram", d.recv(2).decode())
r, w = os.pipe(); os.write(w, b"fd")
s.sendmsg([b"rights"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [r]))], 0, "dgram.sock")
msg, anc, _, _ = d.recvmsg(16, socket.CMSG_SPACE(4))
got = array.array("i"); got.frombytes(anc[0][2]); print("passed", msg.decode(), os.read(got[0], 2).decode())
s.connect("dgram.sock"); s.send(b"cn"); print("connected datagram", d.recv(2).decode())
m = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
n, _, lengths = sendmmsg(m, "dgram.sock", [b"m1", b"m2x"])
print("sendmmsg", n, lengths, d.recv(4).decode(), d.recv(4).decode())
out = []
def threaded():
    c = socket.socket(socket.AF_UNIX); c.connect("own.sock"); out.append(c.recv(2).decode())
    t = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); t.sendto(b"th", "dgram.sock"); out.append(d.recv(2).decode())
ts = [threading.Thread(target=threaded) for _ in range(4)]
[t.start() for t in ts]; [t.join() for t in ts]
print("threads", "".join(sorted(out)))
a, b = socket.socketpair()
a.sendmsg([b"pair"]); print("pair", b.recv(4).decode())
try:
    s.sendto(b"x", "missing.sock")
except OSError as e:
    print("missing", e.strerror)
open("plain", "w").close()
try:
    socket.socket(socket.AF_UNIX).connect("plain")
except OSError as e:
    print("not a socket", e.strerror)
"#;
    std::fs::write(
        f.workspace.path().join("inside.py"),
        format!("{PYTHON_SENDMMSG}{script}"),
    )
    .unwrap();
    let r = f.terminal("python3 inside.py");
    let shown = output(&r);
    for expected in [
        "relative ok",
        "absolute ok",
        "symlink ok",
        "parent ok",
        "abstract ab",
        "datagram dg",
        "passed rights fd",
        "connected datagram cn",
        "sendmmsg 2 [2, 3] m1 m2x",
        "threads okokokokthththth",
        "pair pair",
        "missing No such file or directory",
        "not a socket Connection refused",
    ] {
        assert!(shown.contains(expected), "{expected:?} in {r}");
    }
}

#[test]
fn a_connect_waiting_on_a_full_backlog_holds_up_no_other_connect() {
    // Non-blocking connects to a full backlog say so at once; a blocking one waits
    // until the server accepts, while other connects of the sandbox go on.
    let f = fixture();
    let script = r#"
import socket, threading, time
full = socket.socket(socket.AF_UNIX); full.bind("full.sock"); full.listen(0)
other = socket.socket(socket.AF_UNIX); other.bind("other.sock"); other.listen(8)
held = []
while len(held) < 100:
    c = socket.socket(socket.AF_UNIX); c.setblocking(False)
    try:
        c.connect("full.sock"); held.append(c)
    except BlockingIOError:
        print("backlog full"); break
done = []
def wait_for_room():
    c = socket.socket(socket.AF_UNIX); c.connect("full.sock"); done.append("the waiting connect returned")
waiting = threading.Thread(target=wait_for_room, daemon=True); waiting.start()
time.sleep(0.5)
for i in range(3):
    c = socket.socket(socket.AF_UNIX); c.connect("other.sock")
print("others connect while one waits:", not done)
full.accept()
waiting.join(30)
print(done[0] if done else "still waiting")
"#;
    std::fs::write(f.workspace.path().join("backlog.py"), script).unwrap();
    let r = f.terminal("python3 backlog.py");
    let shown = output(&r);
    for expected in [
        "backlog full",
        "others connect while one waits: True",
        "the waiting connect returned",
    ] {
        assert!(shown.contains(expected), "{expected:?} in {r}");
    }
}

#[test]
fn a_connect_racing_between_an_own_and_a_host_socket_never_reaches_the_host() {
    // One thread flips a symlink, and the bytes of the address being connected to,
    // between the sandbox's own socket and a host socket made while the command runs;
    // another connects in a loop. The host's listener counts what it accepts.
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let f = fixture();
    let mut server = f.serve();
    let host = f.workspace.path().join("host-race.sock");
    let probe = format!(
        r#"python3 -c '
import ctypes, os, socket, threading
libc = ctypes.CDLL(None, use_errno=True)
own = socket.socket(socket.AF_UNIX); own.bind("own-race.sock"); own.listen(4096)
accepted = [0]
def serve():
    while True:
        a, _ = own.accept(); accepted[0] += 1; a.close()
threading.Thread(target=serve, daemon=True).start()
stop = False
def flip_link():
    while not stop:
        for target in ("own-race.sock", "{host}"):
            try:
                os.symlink(target, "flip.tmp"); os.replace("flip.tmp", "flip.sock")
            except OSError:
                pass
def address(path):
    return (ctypes.c_ushort(socket.AF_UNIX).value).to_bytes(2, "little") + path.encode() + bytes(108 - len(path))
mine, theirs = address("own-race.sock"), address("{host}")
buf = ctypes.create_string_buffer(mine, 110)
def flip_bytes():
    while not stop:
        ctypes.memmove(buf, theirs, 110); ctypes.memmove(buf, mine, 110)
threads = [threading.Thread(target=flip_link), threading.Thread(target=flip_bytes)]
[t.start() for t in threads]
reached = 0
for i in range(400):
    for how in ("link", "bytes"):
        c = socket.socket(socket.AF_UNIX)
        if how == "link":
            try:
                c.connect("flip.sock"); reached += 1
            except OSError:
                pass
        elif libc.connect(c.fileno(), buf, 110) == 0:
            reached += 1
        c.close()
stop = True
[t.join() for t in threads]
print("own reached", reached > 0)
'"#,
        host = host.display()
    );
    let accepted = std::sync::Arc::new(AtomicUsize::new(0));
    let done = std::sync::Arc::new(AtomicBool::new(false));
    let (count, finished) = (accepted.clone(), done.clone());
    let (r, counter) = run_while_a_host_socket_appears(&f, &mut server, &host, &probe, |path| {
        let listener = std::os::unix::net::UnixListener::bind(path).unwrap();
        listener.set_nonblocking(true).unwrap();
        std::thread::spawn(move || {
            while !finished.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok(_) => {
                        count.fetch_add(1, Ordering::SeqCst);
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(1)),
                }
            }
        })
    });
    done.store(true, Ordering::SeqCst);
    counter.join().unwrap();
    assert!(output(&r).contains("own reached True"), "{r}");
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        0,
        "the host socket accepted: {r}"
    );
}

#[test]
fn a_limit_that_cannot_be_read_is_a_clear_error_and_runs_nothing() {
    let f = fixture();
    f.config("terminal:\n  sandbox:\n    limits:\n      max_processes: lots\n");
    let r = f.terminal(&format!("touch {}/made", f.workspace.path().display()));
    let error = r["error"].as_str().unwrap_or("");
    assert!(
        error.contains("terminal.sandbox.limits.max_processes") && error.contains("lots"),
        "{r}"
    );
    assert!(!f.workspace.path().join("made").exists());
}

/// An HTTP server on the host's loopback answering `body` to every request, and the
/// number of connections it accepted.
fn host_http_server(body: &'static str) -> (u16, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::Read;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = std::sync::Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            count.fetch_add(1, Ordering::SeqCst);
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
                head.push(byte[0]);
            }
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (port, accepted)
}

fn network_note(result: &Value) -> &str {
    result["network"]
        .as_str()
        .unwrap_or_else(|| panic!("no network note in {result}"))
}

fn connections(count: &std::sync::atomic::AtomicUsize) -> usize {
    count.load(std::sync::atomic::Ordering::SeqCst)
}

/// curl through the proxy settings, then python connecting directly.
fn reach_host_port(port: u16) -> String {
    format!(
        "curl -sS --max-time 10 http://127.0.0.1:{port}/; echo \" curl=$?\"; \
         python3 -c 'import socket\ntry:\n    socket.create_connection((\"127.0.0.1\", {port}), timeout=5); print(\"direct connected\")\nexcept OSError as e:\n    print(\"direct\", e)'"
    )
}

#[test]
fn the_default_keeps_the_hosts_loopback_services_out_of_reach() {
    let f = fixture();
    let (port, accepted) = host_http_server("host-secret-service");
    let probe = reach_host_port(port);
    let r = f.terminal(&probe);
    let out = output(&r);
    assert!(
        !out.contains("host-secret-service") && !out.contains("direct connected"),
        "{r}"
    );
    // 127.0.0.1 inside is the sandbox's own loopback; the result says what the
    // sandbox reaches and which key widens it.
    assert!(out.contains("direct [Errno 111] Connection refused"), "{r}");
    assert!(
        network_note(&r).contains("terminal.sandbox.network in config.yaml"),
        "{r}"
    );
    // Named through the proxy (as a client that resolves the name there would), the
    // proxy refuses it, saying how to open it.
    let r = f.terminal(&format!(
        "curl -sS --max-time 10 --noproxy '' -p http://localhost:{port}/; echo \" curl=$?\""
    ));
    let refusal = "is 127.0.0.1, on the host's loopback or private network";
    assert!(output(&r).contains("curl=56"), "{r}");
    let r = f.terminal(&format!(
        "no_proxy= python3 -c 'import urllib.request\ntry:\n    urllib.request.urlopen(\"http://localhost:{port}/\")\nexcept OSError as e:\n    print(e.read().decode())'"
    ));
    assert!(
        output(&r).contains(refusal)
            && output(&r).contains("terminal.sandbox.network: {allow: [\"*\""),
        "{r}"
    );
    // The same through a serve task's long-lived sandbox, and for execute_code's children.
    let mut server = f.serve();
    let r = server.call("terminal", json!({"command": probe}));
    assert!(!output(&r).contains("host-secret-service"), "{r}");
    assert!(network_note(&r).contains("terminal.sandbox.network"), "{r}");
    assert_eq!(connections(&accepted), 0, "the host's service was reached");
    // The probe itself works: with the sandbox off the service answers.
    f.config("terminal:\n  sandbox:\n    mode: off\n");
    let r = f.terminal(&format!("curl -sS --max-time 10 http://127.0.0.1:{port}/"));
    assert_eq!(output(&r), "host-secret-service", "{r}");
}

#[test]
fn network_off_reaches_nothing_and_the_old_booleans_still_work() {
    let f = fixture();
    let (port, accepted) = host_http_server("host-secret-service");
    for setting in ["off", "false"] {
        f.config(&format!("terminal:\n  sandbox:\n    network: {setting}\n"));
        let r = f.terminal(&format!("env | grep -ci _proxy; {}", reach_host_port(port)));
        let out = output(&r);
        assert!(out.starts_with('0'), "proxy settings under {setting}: {r}");
        assert!(
            out.contains("Connection refused") && !out.contains("direct connected"),
            "{r}"
        );
    }
    // `true` is the default's reach: through the proxy, never to the host's loopback.
    f.config("terminal:\n  sandbox:\n    network: true\n");
    let r = f.terminal(&format!(
        "env | grep -c ^HTTPS_PROXY=; {}",
        reach_host_port(port)
    ));
    assert!(
        output(&r).starts_with('1') && !output(&r).contains("host-secret-service"),
        "{r}"
    );
    assert_eq!(connections(&accepted), 0, "the host's service was reached");
    f.config("terminal:\n  sandbox:\n    network: sideways\n");
    let r = f.terminal("true");
    assert!(
        r["error"]
            .as_str()
            .unwrap_or_default()
            .contains("terminal.sandbox.network 'sideways'"),
        "{r}"
    );
    f.config("terminal:\n  sandbox:\n    network:\n      deny: [pypi.org]\n");
    let r = f.terminal("true");
    let error = r["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("terminal.sandbox.network has no key 'deny'"),
        "{r}"
    );
}

#[test]
fn an_allow_list_lets_only_the_listed_hosts_through() {
    let f = fixture();
    let (listed, listed_seen) = host_http_server("listed-service");
    let (other, other_seen) = host_http_server("unlisted-service");
    f.config(&format!(
        "terminal:\n  sandbox:\n    network:\n      allow: [\"localhost:{listed}\"]\n"
    ));
    // A plain request, a CONNECT tunnel (as HTTPS goes) and Python's urllib.
    let r = f.terminal(&format!(
        "curl -sS --max-time 10 http://localhost:{listed}/; echo; \
         curl -sS --max-time 10 -p http://localhost:{listed}/; echo; \
         python3 -c 'import urllib.request; print(urllib.request.urlopen(\"http://localhost:{listed}/\").read().decode())'"
    ));
    assert_eq!(
        output(&r),
        "listed-service\nlisted-service\nlisted-service",
        "{r}"
    );
    assert_eq!(connections(&listed_seen), 3);
    // Another port, another name, a name never looked up: refused, saying where to add it.
    let r = f.terminal(&format!(
        "curl -sS --max-time 10 --noproxy '' http://127.0.0.1:{other}/; echo; \
         curl -sS --max-time 10 -p http://localhost:{other}/; echo \" curl=$?\"; \
         python3 -c 'import urllib.request\ntry:\n    urllib.request.urlopen(\"https://pypi.invalid/\")\nexcept OSError as e:\n    print(e)'"
    ));
    let out = output(&r);
    assert!(!out.contains("unlisted-service"), "{r}");
    assert!(
        out.contains(&format!(
            "127.0.0.1:{other} is not in terminal.sandbox.network.allow"
        )),
        "{r}"
    );
    assert!(out.contains("curl=56"), "the tunnel was not refused: {r}");
    assert!(
        out.contains("pypi.invalid:443 is not in terminal.sandbox.network.allow"),
        "{r}"
    );
    assert_eq!(
        connections(&other_seen),
        0,
        "an unlisted service was reached"
    );
}

#[test]
fn one_proxy_thread_serves_every_live_sandbox_and_lets_ended_ones_go() {
    let f = fixture();
    let (listed, seen) = host_http_server("listed-service");
    // Sandboxes stay up between commands, then end a second after their last one.
    f.config(&format!(
        "terminal:\n  sandbox:\n    network:\n      allow: [\"localhost:{listed}\"]\n"
    ));
    let mut command = f.command(&["serve"]);
    command.env("TERMINAL_KEEP_WARM_SECONDS", "1");
    let mut server = common::ServeSession::spawn(command, json!({"task_id": "t1"}));
    let fetch = format!("curl -sS --max-time 10 http://localhost:{listed}/");
    let proxy_threads = |pid: u32| {
        common::thread_names(pid)
            .iter()
            .filter(|name| *name == "sandbox-proxy")
            .count()
    };
    let tasks = ["t1", "t2", "t3", "t4"];
    let pid = server.pid();
    let mut fetch_in = |task: &str| {
        let r = server.call_in(
            &json!({"task_id": task}),
            "terminal",
            json!({"command": fetch}),
        );
        assert_eq!(output(&r), "listed-service", "{task}: {r}");
    };
    tasks.iter().for_each(|task| fetch_in(task));
    assert_eq!(connections(&seen), tasks.len());
    assert_eq!(proxy_threads(pid), 1, "one thread for four live sandboxes");
    // Their sandboxes end; new ones, for the same tasks and another, are served as well.
    std::thread::sleep(Duration::from_secs(3));
    fetch_in("t2");
    fetch_in("t5");
    assert_eq!(connections(&seen), tasks.len() + 2);
    assert_eq!(proxy_threads(pid), 1);
}

/// The inotify queue of `pid` with the most watches: its descriptor and its watches.
fn busiest_inotify_queue(pid: u32) -> (String, Vec<String>) {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .flatten()
        .filter(|fd| {
            std::fs::read_link(fd.path()).is_ok_and(|to| to.as_os_str() == "anon_inode:inotify")
        })
        .map(|fd| {
            let name = fd.file_name().to_string_lossy().into_owned();
            let info = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{name}")).unwrap();
            // `inotify wd:N ino:I sdev:D mask:M ...`: the watch, not its mask.
            let watches = info
                .lines()
                .filter(|line| line.starts_with("inotify wd:"))
                .map(|line| line.split(" mask:").next().unwrap().to_string())
                .collect();
            (name, watches)
        })
        .max_by_key(|(_, watches): &(String, Vec<String>)| watches.len())
        .expect("an inotify queue")
}

#[test]
fn a_new_tasks_directory_leaves_the_servers_layout_watches_in_place() {
    let f = fixture();
    let mut server = f.serve();
    let pid = server.pid();
    let mut run_in = |task: &str| {
        let r = server.call_in(
            &json!({"task_id": task}),
            "terminal",
            json!({"command": "true"}),
        );
        assert_eq!(r["exit_code"], 0, "{task}: {r}");
    };
    // From its third layout on, the server watches the directories its layouts read.
    ["t1", "t2", "t3", "t4"].into_iter().for_each(&mut run_in);
    // Each new task's directory is made where an earlier layout looked its name up:
    // the layouts are worked out again, on the same watches. (A mount made on this
    // machine meanwhile rightly drops them, so one round of three may.)
    let kept = (0..3).any(|round| {
        let (queue, watches) = busiest_inotify_queue(pid);
        assert!(watches.len() > 3, "{watches:?}");
        (0..3).for_each(|n| run_in(&format!("r{round}-{n}")));
        let (queue_after, watches_after) = busiest_inotify_queue(pid);
        queue_after == queue && watches.iter().all(|watch| watches_after.contains(watch))
    });
    assert!(
        kept,
        "the watches were dropped and made again in every round"
    );
}

#[test]
fn background_and_pty_processes_keep_the_hosts_loopback_out_of_reach_too() {
    let f = fixture();
    let (port, accepted) = host_http_server("host-secret-service");
    f.config(&format!(
        "terminal:\n  sandbox:\n    network:\n      allow: [\"localhost:{port}\"]\n"
    ));
    let mut server = f.serve();
    // Background processes, on pipes or a pseudo-terminal, go through the proxy like a
    // foreground command: the listed service answers, the rest of the host's loopback
    // does not (the command names the address, bypassing the proxy).
    let probe = format!(
        "curl -sS --max-time 10 http://localhost:{port}/; echo \" curl=$?\"; \
         curl -sS --max-time 5 --noproxy '*' http://127.0.0.1:{port}/; echo \" direct=$?\""
    );
    for pty in [false, true] {
        let expected = "host-secret-service curl=0";
        let started = server.call(
            "terminal",
            json!({"command": probe, "background": true, "pty": pty}),
        );
        let id = started["session_id"]
            .as_str()
            .unwrap_or_else(|| panic!("{started}"))
            .to_string();
        let r = server.call(
            "process",
            json!({"action": "wait", "session_id": id, "timeout": 30}),
        );
        let out = r["output"].as_str().unwrap_or_default();
        assert!(
            out.contains(expected) && out.contains("direct=7"),
            "pty={pty}: {r}"
        );
    }
    assert_eq!(
        connections(&accepted),
        2,
        "each process reached it through the proxy only"
    );
}

/// `command` started with `file` open, without close-on-exec, as descriptors 4 and 7:
/// what a careless caller (a shell's `exec 4<>file`, a pipe left open by a supervisor)
/// hands the server.
fn with_inherited_descriptors(mut command: Command, file: &std::fs::File) -> Command {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    let fd = file.as_raw_fd();
    // SAFETY: dup2 is async-signal-safe; the copies it makes do not close on exec.
    unsafe {
        command.pre_exec(move || {
            for to in [4, 7] {
                if libc::dup2(fd, to) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    command
}

/// Writes through descriptors 4 and 7 and lists what every descriptor of the command
/// leads to.
const USE_INHERITED: &str = "echo changed >&4; echo changed >&7; \
    for fd in /proc/self/fd/*; do readlink \"$fd\"; done; echo listed";

#[test]
fn descriptors_the_servers_caller_left_open_reach_no_command() {
    let f = fixture();
    let victim = f.victim().join("precious.txt");
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&victim)
        .unwrap();
    let reached = |r: &Value| {
        let text = output(r);
        assert!(text.ends_with("listed"), "{r}");
        text.contains("precious")
    };
    for mode in ["workspace-write", "off"] {
        f.config(&format!("terminal:\n  sandbox:\n    mode: {mode}\n"));
        // A task's first command, then the later ones: in its kept sandbox, and in the
        // shells started ahead for them.
        let mut server = common::ServeSession::spawn(
            with_inherited_descriptors(f.command(&["serve"]), &file),
            json!({"task_id": "t1"}),
        );
        for _ in 0..4 {
            let r = server.call("terminal", json!({"command": USE_INHERITED}));
            assert!(
                !reached(&r),
                "sandbox {mode}: serve's command got the file: {r}"
            );
        }
        drop(server);
        let args = json!({"command": USE_INHERITED}).to_string();
        let mut call = f.command(&["call", "terminal", &args]);
        call.args(["--cwd", f.workspace.path().to_str().unwrap()]);
        let out = with_inherited_descriptors(call, &file).output().unwrap();
        let r: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(
            !reached(&r),
            "sandbox {mode}: call's command got the file: {r}"
        );
        f.assert_victim_intact();
    }
}
