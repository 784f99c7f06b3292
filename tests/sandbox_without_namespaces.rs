//! The command sandbox where the kernel refuses user namespaces (as Ubuntu's AppArmor
//! policy does): the binary falls back to Landlock and seccomp alone, says so once, and
//! still keeps writes inside the writable roots, secrets unreadable and the network
//! closed. The refusal is made real: the binary runs in a user namespace of the test's
//! own whose `user.max_user_namespaces` is 0, so no namespace can be made below it.

mod common;

use serde_json::{json, Value};
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// `hermes-tools ARGS` where no user namespace can be made, with `home` as HOME.
fn without_namespaces(home: &Path, work: &Path, args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new("unshare")
        .args(["--user", "--map-root-user", "--", "sh", "-c"])
        .arg("echo 0 > /proc/sys/user/max_user_namespaces && exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_hermes-tools"))
        .args(args)
        .env("HOME", home)
        .env("HERMES_HOME", home.join(".hermes"))
        .current_dir(work)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("unshare (util-linux) runs");
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn fixture() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let root = tempfile::tempdir().unwrap();
    let home = root.path().join("home");
    let work = root.path().join("work");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(home.join(".ssh/id_ed25519"), "PRIVATE KEY\n").unwrap();
    std::fs::write(home.join("notes.txt"), "plain notes\n").unwrap();
    (root, home, work)
}

#[test]
fn commands_are_confined_by_landlock_and_seccomp_and_told_so() {
    let (_root, home, work) = fixture();
    let probe = "echo made > here.txt && cat here.txt; cat ~/notes.txt; \
                 cat ~/.ssh/id_ed25519 2>&1; echo x > ~/planted 2>&1; \
                 (exec 3<>/dev/tcp/127.0.0.1/9) 2>&1; echo done";
    let out = without_namespaces(
        &home,
        &work,
        &["call", "terminal", &json!({"command": probe}).to_string()],
        "",
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    let output = result["output"].as_str().unwrap();
    assert!(output.starts_with("made\nplain notes\n"), "{result}");
    assert!(!output.contains("PRIVATE"), "{result}");
    assert!(
        output.matches("Permission denied").count() >= 3,
        "the key, the home and the socket are refused: {result}"
    );
    assert!(output.ends_with("done"), "{result}");
    assert_eq!(
        std::fs::read_to_string(work.join("here.txt")).unwrap(),
        "made\n"
    );
    assert!(!home.join("planted").exists());
    assert!(
        stderr.contains("refuses user namespaces") && stderr.contains("Landlock and seccomp"),
        "the weaker wall is announced: {stderr}"
    );
}

/// A task's shell state lasts across calls, background processes are tracked, and
/// nothing of the task outlives the server.
#[test]
fn a_task_keeps_its_state_and_leaves_nothing_behind() {
    let (_root, home, work) = fixture();
    let needle = format!("sleep 3{}.5", std::process::id() % 10);
    let call = |id: &str, args: Value| {
        json!({"id": id, "type": "function", "task_id": "t1",
               "function": {"name": "terminal", "arguments": args.to_string()}})
        .to_string()
    };
    let input = [
        call(
            "a",
            json!({"command": "mkdir -p sub && cd sub && export GREETING=hello"}),
        ),
        call("b", json!({"command": "pwd; echo $GREETING"})),
        call("c", json!({"command": needle, "background": true})),
        call("d", json!({"command": "echo still here"})),
    ]
    .join("\n")
        + "\n";
    let out = without_namespaces(&home, &work, &["serve", "--toolsets", "terminal"], &input);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let answers: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|a| a["tool_call_id"].is_string())
        .collect();
    let content = |id: &str| -> Value {
        let answer = answers
            .iter()
            .find(|a| a["tool_call_id"] == id)
            .unwrap_or_else(|| panic!("no answer to {id}: {answers:?}"));
        serde_json::from_str(answer["content"].as_str().unwrap()).unwrap()
    };
    let b = content("b");
    assert_eq!(
        b["output"],
        format!("{}\nhello", work.join("sub").display()),
        "{b}"
    );
    assert!(content("c")["session_id"].is_string(), "{}", content("c"));
    assert_eq!(content("d")["output"], "still here");
    assert!(
        common::survivors(&needle).is_empty(),
        "the background process ended with the server"
    );
}
