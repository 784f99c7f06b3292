//! The local backend runs a task's foreground commands (all but one that runs the login
//! shell) in shells forked from one bash that waits for the task (in its sandbox, or on this machine
//! with the sandbox off); where none can be kept, inside the sandbox the next command's
//! shell is started as soon as the command before has ended (or, when commands come
//! back to back, while it runs, in the task's second sandbox). An idle task cools down:
//! its sandbox ends, its state stays. Driven through `hermes-tools serve`: the next
//! command runs in that shell, state carries over exactly as with a shell started for
//! the command, scripts of any length arrive whole, and a shell that is gone leaves
//! the next command a working one.

use serde_json::{json, Value};

mod common;

fn fixture(config: &str) -> common::ServeFixture {
    let f = common::ServeFixture::new(config);
    std::fs::create_dir(f.workspace.path().join("sub")).unwrap();
    f
}

fn output(result: &Value) -> &str {
    result["output"]
        .as_str()
        .unwrap_or_else(|| panic!("no output in {result}"))
}

const SANDBOX_ON: &str = "terminal:\n  sandbox:\n    mode: workspace-write\n";
// Without the sandbox, commands the detector flags need a yes; here nobody is asked.
const SANDBOX_OFF: &str =
    "terminal:\n  sandbox:\n    mode: off\napprovals:\n  unattended_mode: approve\n";

/// Whether the shell running the call had the command's text on its own command line
/// (started for it) or not (started ahead, the text sent to it afterwards).
const STARTED_FOR_IT: &str =
    "case \"$BASH_EXECUTION_STRING\" in *STARTED_FOR_IT*) echo for-it;; *) echo ahead;; esac";

/// A task's first command, which starts its sandbox and its waiting bash.
fn run_the_first_command(server: &mut common::ServeSession) {
    let r = server.call("terminal", json!({"command": "true"}));
    assert_eq!(r["exit_code"], 0, "{r}");
}

fn state_carries_through_shells_started_ahead(config: &str) {
    let f = fixture(config);
    let mut server = f.serve();
    // The server's login shell has left its snapshot by the time a task's first command
    // comes: that command, like every later one, is forked from the task's waiting bash.
    let r = server.call("terminal", json!({"command": STARTED_FOR_IT}));
    assert_eq!(output(&r), "ahead", "{r}");
    let r = server.call(
        "terminal",
        json!({"command": "cd sub && export AHEAD_VAR=kept && alias ahead_alias='echo from-alias' && ahead_fn() { echo from-fn; }"}),
    );
    assert_eq!(r["exit_code"], 0, "{r}");
    for round in 0..3 {
        let r = server.call("terminal", json!({"command": format!("{STARTED_FOR_IT}; echo $AHEAD_VAR $(basename $PWD); ahead_alias; ahead_fn")}));
        assert_eq!(
            output(&r),
            "ahead\nkept sub\nfrom-alias\nfrom-fn",
            "round {round}: {r}"
        );
        assert_eq!(
            r["cwd"],
            f.workspace
                .path()
                .join("sub")
                .canonicalize()
                .unwrap()
                .display()
                .to_string(),
            "{r}"
        );
    }
    // The status, a failed command's, and one that exits the shell itself.
    let r = server.call("terminal", json!({"command": "false"}));
    assert_eq!(r["exit_code"], 1, "{r}");
    let r = server.call("terminal", json!({"command": "echo bye; exit 7"}));
    assert_eq!(
        (output(&r), r["exit_code"].as_i64()),
        ("bye", Some(7)),
        "{r}"
    );
    // Nor are the descriptors the script and the signals came on.
    let r = server.call("terminal", json!({"command": "for fd in 3 4 5 6; do [ -e /proc/$BASHPID/fd/$fd ] && echo open-$fd; done; echo checked"}));
    assert_eq!(output(&r), "checked", "{r}");
    // The shell's own scratch variable is not left to the command.
    let r = server.call(
        "terminal",
        json!({"command": "echo \"[${__hermes_body-unset}]\"; unset AHEAD_VAR; cd .."}),
    );
    assert_eq!(output(&r), "[unset]", "{r}");
    let r = server.call(
        "terminal",
        json!({"command": "echo \"[${AHEAD_VAR-gone}]\" $(basename $PWD)"}),
    );
    let workspace_name = f
        .workspace
        .path()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert_eq!(output(&r), format!("[gone] {workspace_name}"), "{r}");
    // The snapshot is rewritten in place: after a long one, a short one is read alone.
    let body = (0..400)
        .map(|i| format!("echo line-{i};"))
        .collect::<String>();
    let r = server.call(
        "terminal",
        json!({"command": format!("big_fn() {{ {body} }}; big_fn | tail -1")}),
    );
    assert_eq!(output(&r), "line-399", "{r}");
    let r = server.call(
        "terminal",
        json!({"command": "unset -f big_fn ahead_fn; unalias ahead_alias; export SHORT=1"}),
    );
    assert_eq!(r["exit_code"], 0, "{r}");
    let r = server.call("terminal", json!({"command": "type big_fn ahead_fn ahead_alias 2>&1 | grep -c 'not found'; echo $SHORT"}));
    assert_eq!(output(&r), "3\n1", "{r}");
}

#[test]
fn state_carries_through_shells_started_ahead_in_the_sandbox() {
    state_carries_through_shells_started_ahead(SANDBOX_ON);
}

#[test]
fn state_carries_through_shells_started_ahead_without_the_sandbox() {
    state_carries_through_shells_started_ahead(SANDBOX_OFF);
}

fn exported_values_of_every_kind_carry_through_shells_started_ahead(config: &str) {
    let f = fixture(config);
    let mut server = f.serve();
    let home = f.home.path().display().to_string();
    run_the_first_command(&mut server);
    // Values bash writes back with every kind of quoting, a readonly export, and an
    // inherited variable changed (the next shell starts from the server's environment).
    let r = server.call(
        "terminal",
        json!({"command": "export Q1='a\"b$c`d\\e' Q2=$'line1\\nline2\\ttab\\001' Q3= HOME=/elsewhere; declare -rx RO=1"}),
    );
    assert_eq!(r["exit_code"], 0, "{r}");
    let show =
        "printf '%q\\n' \"$Q1\" \"$Q2\" \"$Q3\" \"$HOME\"; declare -p RO; env | grep -c '^Q[123]='";
    let expected =
        "a\\\"b\\$c\\`d\\\\e\n$'line1\\nline2\\ttab\\001'\n''\n/elsewhere\ndeclare -rx RO=\"1\"\n3";
    for round in 0..2 {
        let r = server.call(
            "terminal",
            json!({"command": format!("{STARTED_FOR_IT}; {show}")}),
        );
        assert_eq!(
            output(&r),
            format!("ahead\n{expected}"),
            "round {round}: {r}"
        );
    }
    // Set back to the value the environment has, and gone again.
    let r = server.call(
        "terminal",
        json!({"command": format!("export HOME={home}; unset Q1")}),
    );
    assert_eq!(r["exit_code"], 0, "{r}");
    let r = server.call(
        "terminal",
        json!({"command": "echo \"$HOME [${Q1-unset}]\""}),
    );
    assert_eq!(output(&r), format!("{home} [unset]"), "{r}");
}

#[test]
fn exported_values_of_every_kind_carry_through_shells_started_ahead_in_the_sandbox() {
    exported_values_of_every_kind_carry_through_shells_started_ahead(SANDBOX_ON);
}

#[test]
fn exported_values_of_every_kind_carry_through_shells_started_ahead_without_the_sandbox() {
    exported_values_of_every_kind_carry_through_shells_started_ahead(SANDBOX_OFF);
}

fn a_large_script_reaches_the_waiting_shell_whole(config: &str) {
    let f = fixture(config);
    let mut server = f.serve();
    for _ in 0..2 {
        let r = server.call("terminal", json!({"command": "export BIG_VAR=before"}));
        assert_eq!(r["exit_code"], 0, "{r}");
    }
    // Far more than a pipe holds, with the command's last word at its very end.
    let padding = "x".repeat(100_000);
    let big = format!(
        "{STARTED_FOR_IT}; echo $BIG_VAR; export BIG_VAR=after; : {padding}; echo end-of-script"
    );
    let r = server.call("terminal", json!({"command": big}));
    assert_eq!(output(&r), "ahead\nbefore\nend-of-script", "{r}");
    let r = server.call(
        "terminal",
        json!({"command": format!("{STARTED_FOR_IT}; echo $BIG_VAR")}),
    );
    assert_eq!(output(&r), "ahead\nafter", "{r}");
}

#[test]
fn a_large_script_reaches_the_waiting_shell_whole_in_the_sandbox() {
    a_large_script_reaches_the_waiting_shell_whole(SANDBOX_ON);
}

#[test]
fn a_large_script_reaches_the_waiting_shell_whole_without_the_sandbox() {
    a_large_script_reaches_the_waiting_shell_whole(SANDBOX_OFF);
}

/// Each command names its sandbox (its PID namespace) and looks, after a pause, for any
/// other shell waiting for a script.
const LOOK: &str = "readlink /proc/self/ns/pid; sleep 0.3; for p in /proc/[0-9]*; do case \"${p#/proc/}\" in \"$$\"|\"$BASHPID\") continue;; esac; \
    mapfile -d '' argv < $p/cmdline 2>/dev/null || continue; case \"${argv[*]}\" in *__hermes_body*) echo \"in sight: ${p#/proc/}\";; esac; done";

/// The sandbox (PID namespace) each of `rounds` commands ran in, `pause` after the last
/// answer; every command ran in a shell started ahead, and none saw a waiting shell.
fn sandboxes_of_commands(
    server: &mut common::ServeSession,
    rounds: usize,
    pause: std::time::Duration,
) -> Vec<String> {
    (0..rounds)
        .map(|round| {
            std::thread::sleep(pause);
            let r = server.call(
                "terminal",
                json!({"command": format!("{STARTED_FOR_IT}; {LOOK}")}),
            );
            let lines: Vec<&str> = output(&r).lines().collect();
            assert!(
                matches!(lines.as_slice(), ["ahead", ns] if ns.starts_with("pid:[")),
                "round {round}: {r}"
            );
            lines[1].to_string()
        })
        .collect()
}

fn distinct(sandboxes: &[String]) -> usize {
    let mut distinct = sandboxes.to_vec();
    distinct.sort();
    distinct.dedup();
    distinct.len()
}

#[test]
fn commands_with_a_pause_between_them_keep_one_sandbox_per_task() {
    let f = fixture(SANDBOX_ON);
    let mut server = f.serve();
    run_the_first_command(&mut server);
    // As an agent's calls come: the next shell is ready before the next command, so
    // it is started in the sandbox the command before ran in, once that one has ended.
    let sandboxes = sandboxes_of_commands(&mut server, 5, std::time::Duration::from_millis(200));
    assert_eq!(distinct(&sandboxes), 1, "{sandboxes:?}");
}

#[test]
fn back_to_back_commands_get_their_shell_from_a_second_sandbox_out_of_sight() {
    let f = fixture(SANDBOX_ON);
    let mut server = f.serve();
    run_the_first_command(&mut server);
    // Sent as soon as the answer is in, a command may find its shell still starting;
    // the task then gets a second sandbox, where the next command's shell starts while
    // a command runs. Either way no waiting shell is in sight of a command, and a task
    // never has more than two sandboxes.
    let sandboxes = sandboxes_of_commands(&mut server, 6, std::time::Duration::ZERO);
    assert!(distinct(&sandboxes) <= 2, "{sandboxes:?}");
}

#[test]
fn an_idle_task_cools_down_and_its_next_command_keeps_its_state() {
    let f = fixture(SANDBOX_ON);
    let mut server = f.serve_with(&[("TERMINAL_KEEP_WARM_SECONDS", "1")]);
    let r = server.call("terminal", json!({"command": "true"}));
    assert_eq!(r["exit_code"], 0, "{r}");
    let r = server.call(
        "terminal",
        json!({"command": "cd sub && echo in-sub > cooled.txt && export COOLED=kept && cooled_fn() { echo from-fn; }; echo $(readlink /proc/$$/ns/pid) $(cut -d' ' -f22 /proc/1/stat)"}),
    );
    let warm_sandbox = output(&r).to_string();
    assert!(
        !common::descendants(server.pid()).is_empty(),
        "a warm task keeps its sandbox"
    );
    // Cooled within a second of its keep-warm time (polled for up to 10 s): with no
    // sandbox left, the zygote the walls were forked from ends too.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !common::descendants(server.pid()).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the idle task's processes are still there: {:?}",
            common::descendants(server.pid())
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    // A cooled task is held as a record of its directory and session: the file tools
    // still resolve a relative path against the directory its shell was left in.
    let r = server.call("read_file", json!({"path": "cooled.txt"}));
    assert!(
        r["content"].as_str().is_some_and(|c| c.contains("in-sub")),
        "{r}"
    );
    let r = server.call(
        "terminal",
        json!({"command": "echo $COOLED $(basename $PWD); cooled_fn; echo $(readlink /proc/$$/ns/pid) $(cut -d' ' -f22 /proc/1/stat)"}),
    );
    let lines: Vec<&str> = output(&r).lines().collect();
    assert_eq!(lines[..2], ["kept sub", "from-fn"], "{r}");
    // A namespace's number may be reused once it is freed: its init's start time tells.
    assert_ne!(lines[2], warm_sandbox, "a new sandbox: {r}");
}

#[test]
fn a_restored_tmout_does_not_end_the_shell_waiting_for_the_next_command() {
    let f = fixture(SANDBOX_ON);
    let mut server = f.serve();
    run_the_first_command(&mut server);
    // bash's `read` takes TMOUT as its default timeout: the waiting shell restores it
    // before it waits for the script.
    let r = server.call("terminal", json!({"command": "export TMOUT=1"}));
    assert_eq!(r["exit_code"], 0, "{r}");
    std::thread::sleep(std::time::Duration::from_millis(2500));
    let r = server.call(
        "terminal",
        json!({"command": format!("{STARTED_FOR_IT}; echo $TMOUT")}),
    );
    assert_eq!(output(&r), "ahead\n1", "{r}");
}

#[test]
fn a_timeout_or_a_killed_launcher_leaves_the_next_command_a_working_shell() {
    let f = fixture(SANDBOX_ON);
    let mut server = f.serve();
    let r = server.call("terminal", json!({"command": "true"}));
    assert_eq!(r["exit_code"], 0, "{r}");
    let r = server.call(
        "terminal",
        json!({"command": "export KEPT=1; sleep 30", "timeout": 1}),
    );
    assert_eq!(r["exit_code"], 124, "{r}");
    let r = server.call(
        "terminal",
        json!({"command": format!("{STARTED_FOR_IT}; echo ${{KEPT-no}}")}),
    );
    assert_eq!(
        output(&r),
        "ahead\nno",
        "a timed-out command saves no state: {r}"
    );
    let r = server.call("terminal", json!({"command": "kill -9 $PPID; sleep 5"}));
    assert_ne!(r["exit_code"], 0, "{r}");
    let r = server.call("terminal", json!({"command": "echo alive-$PPID"}));
    assert_eq!(output(&r), "alive-2", "{r}");
}

/// The pid of the process the command's shell was forked from, and that process's name.
const FORKED_FROM: &str =
    "b=$BASHPID; p=$(cut -d' ' -f4 /proc/$b/stat); echo from-$(cat /proc/$p/comm)-$p";

#[test]
fn without_the_sandbox_commands_are_forked_from_one_waiting_bash_per_task() {
    let f = fixture(SANDBOX_OFF);
    let mut server = f.serve();
    for _ in 0..3 {
        let r = server.call("terminal", json!({"command": "export STEP=set"}));
        assert_eq!(r["exit_code"], 0, "{r}");
    }
    let r = server.call("terminal", json!({"command": format!("{STARTED_FOR_IT}; {FORKED_FROM}; echo $STEP; export STEP=next")}));
    let text = output(&r).to_string();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        (lines.len(), lines[0], lines[2]),
        (3, "ahead", "set"),
        "{r}"
    );
    let forked_from = lines[1].to_string();
    assert!(forked_from.starts_with("from-bash-"), "{r}");
    // The same bash for the next command, which sees the state this one left.
    let r = server.call(
        "terminal",
        json!({"command": format!("{FORKED_FROM}; echo $STEP")}),
    );
    assert_eq!(output(&r), format!("{forked_from}\nnext"), "{r}");
    // A timed-out command's tree is stopped; the waiting bash stays and serves the next.
    let r = server.call(
        "terminal",
        json!({"command": "export STEP=lost; sleep 30", "timeout": 1}),
    );
    assert_eq!(r["exit_code"], 124, "{r}");
    let r = server.call(
        "terminal",
        json!({"command": format!("{FORKED_FROM}; echo $STEP")}),
    );
    assert_eq!(
        output(&r),
        format!("{forked_from}\nnext"),
        "a timed-out command saves no state: {r}"
    );
    // A command that kills the waiting bash ends with it gone; the next one still runs.
    let r = server.call(
        "terminal",
        json!({"command": "kill -9 $$; echo still-here"}),
    );
    assert_eq!(
        (output(&r), r["exit_code"].as_i64()),
        ("still-here", Some(-1)),
        "its status is unknown: {r}"
    );
    let r = server.call("terminal", json!({"command": "echo $STEP"}));
    assert_eq!(output(&r), "next", "{r}");
}

/// Whether `pid` has an inotify watch on the directory `dir` (from its descriptors'
/// `fdinfo`, which names each watched inode and its device as the kernel numbers it).
fn watches(pid: u32, dir: &std::path::Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(dir).unwrap();
    let (major, minor) = (libc::major(meta.dev()), libc::minor(meta.dev()));
    let wanted = format!("ino:{:x} sdev:{:x}", meta.ino(), (major << 20) | minor);
    std::fs::read_dir(format!("/proc/{pid}/fdinfo"))
        .unwrap()
        .filter_map(|entry| std::fs::read_to_string(entry.ok()?.path()).ok())
        .any(|info| {
            info.lines()
                .any(|line| line.starts_with("inotify") && line.contains(&wanted))
        })
}

/// Watching the places the sandbox's walls are worked out from makes the kernel walk
/// each watched directory's cached entries, so a server starts watching only once it
/// keeps working the walls out: a task's first command (what a one-shot `call` runs,
/// login shell included) adds no watch, its later ones are checked against one.
#[test]
fn the_walls_are_watched_only_once_the_server_keeps_working_them_out() {
    let root = std::path::Path::new("/");
    // SAFETY: a NUL-terminated path and a zeroed buffer the call fills.
    let root_type = unsafe {
        let mut fs: libc::statfs = std::mem::zeroed();
        libc::statfs(c"/".as_ptr(), &mut fs);
        fs.f_type as i64
    };
    // Only directories of local filesystems are watched (ext4, xfs, btrfs, tmpfs, f2fs).
    if ![0xef53, 0x5846_5342, 0x9123_683e, 0x0102_1994, 0xf2f5_2010].contains(&root_type) {
        return eprintln!("/ is on a filesystem no watch is trusted on: skipped");
    }
    let f = fixture(SANDBOX_ON);
    let mut server = f.serve();
    let r = server.call("terminal", json!({"command": "true"}));
    assert_eq!(r["exit_code"], 0, "{r}");
    assert!(!watches(server.pid(), root), "watched after one command");
    for _ in 0..3 {
        let r = server.call("terminal", json!({"command": "true"}));
        assert_eq!(r["exit_code"], 0, "{r}");
    }
    assert!(
        watches(server.pid(), root),
        "not watched after four commands"
    );
}
