//! `hermes-tools serve --approvals client`: the client answers approval requests for
//! dangerous commands (deny, once, session, always, silence), and `always` is saved to
//! config.yaml where other processes honour it. Real shell, real files, real processes.

#[path = "serve_client/mod.rs"]
mod serve_client;

use serde_json::{json, Value};
use serve_client::{content, terminal, Client};
use std::path::Path;

/// The approval channel is what is tested here: with the OS sandbox on (the default),
/// an unattended command would run contained instead of being refused, and a granted
/// one would be noted as leaving the sandbox.
const SANDBOX_OFF: &str = "terminal:\n  sandbox:\n    mode: \"off\"\n";

fn home_with_timeout(seconds: u32) -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.yaml"),
        format!("approvals:\n  timeout: {seconds}\n{SANDBOX_OFF}"),
    )
    .unwrap();
    home
}

fn workdir(dirs: &[&str]) -> tempfile::TempDir {
    let work = tempfile::tempdir().unwrap();
    for dir in dirs {
        std::fs::create_dir_all(work.path().join(dir).join("inner")).unwrap();
    }
    work
}

fn rm(id: &str, dir: &str, session: &str) -> Value {
    terminal(
        id,
        json!({"command": format!("rm -rf {dir}")}),
        session,
        &format!("task-{session}"),
    )
}

fn answer(client: &mut Client, request: &Value, choice: &str) {
    client.send(&json!({"type": "approval_response", "id": request["id"], "choice": choice}));
}

fn expect_request(client: &Client, command: &str, session: &str) -> Value {
    let request = client.next();
    assert_eq!(request["type"], "approval_request", "{request}");
    assert_eq!(request["command"], command);
    assert_eq!(request["session_id"], session);
    assert_eq!(request["task_id"], format!("task-{session}"));
    assert_eq!(request["tool"], "terminal");
    assert_eq!(request["description"], "recursive delete");
    assert_eq!(
        request["choices"],
        json!(["once", "session", "always", "deny"])
    );
    assert!(
        request["id"].as_str().unwrap().starts_with("approval_"),
        "{request}"
    );
    request
}

/// An answer to a request that is not waiting any more is an error line that loses
/// nothing; then the server ends cleanly with nothing else to say.
fn answer_too_late(mut client: Client, request: &Value) {
    answer(&mut client, request, "once");
    let late = client.next();
    assert!(
        late["error"]
            .as_str()
            .unwrap()
            .contains("no approval request is waiting"),
        "{late}"
    );
    let rest = client.finish();
    assert!(rest.is_empty(), "{rest:?}");
}

fn allowlist(home: &Path) -> String {
    std::fs::read_to_string(home.join("config.yaml")).unwrap()
}

#[test]
fn deny_once_and_session() {
    let home = home_with_timeout(300);
    let work = workdir(&["a", "b", "c", "d"]);
    let mut client = Client::start(home.path(), work.path(), &["--approvals", "client"]);

    // deny: nothing runs, and other lines are answered while the request waits.
    client.send(&rm("1", "a", "s1"));
    let request = expect_request(&client, "rm -rf a", "s1");
    client.send(&terminal(
        "echo",
        json!({"command": "echo still-serving"}),
        "s1",
        "other-task",
    ));
    let echoed = client.next();
    assert_eq!(echoed["tool_call_id"], "echo");
    assert!(content(&echoed)["output"]
        .as_str()
        .unwrap()
        .contains("still-serving"));
    answer(&mut client, &request, "deny");
    let denied = client.next();
    assert_eq!(denied["tool_call_id"], "1");
    let result = content(&denied);
    assert_eq!(result["status"], "blocked", "{result}");
    assert_eq!(result["outcome"], "denied");
    assert_eq!(result["user_consent"], false);
    assert!(
        result["error"]
            .as_str()
            .unwrap()
            .contains("the user denied"),
        "{result}"
    );
    assert!(work.path().join("a").exists());

    // once: runs this time only.
    client.send(&rm("2", "a", "s1"));
    let request = expect_request(&client, "rm -rf a", "s1");
    answer(&mut client, &request, "once");
    let ran = content(&client.next());
    assert_eq!(ran["exit_code"], 0, "{ran}");
    assert_eq!(ran["approval"], "granted by the user");
    assert!(!work.path().join("a").exists());

    // session: this kind of command runs in s1 without asking again...
    client.send(&rm("3", "b", "s1"));
    let request = expect_request(&client, "rm -rf b", "s1");
    answer(&mut client, &request, "session");
    assert_eq!(content(&client.next())["exit_code"], 0);
    client.send(&rm("4", "c", "s1"));
    let unasked = client.next();
    assert_eq!(
        unasked["tool_call_id"], "4",
        "no second request in the same session: {unasked}"
    );
    assert_eq!(content(&unasked)["exit_code"], 0);
    assert!(!work.path().join("b").exists() && !work.path().join("c").exists());

    // ...but not in another session.
    client.send(&rm("5", "d", "s2"));
    let request = expect_request(&client, "rm -rf d", "s2");
    answer(&mut client, &request, "deny");
    assert_eq!(content(&client.next())["outcome"], "denied");
    assert!(work.path().join("d").exists());

    answer_too_late(client, &request);
    assert!(
        !allowlist(home.path()).contains("command_allowlist"),
        "session and once grants are not saved"
    );
}

#[test]
fn silence_denies_after_the_timeout() {
    let home = home_with_timeout(1);
    let work = workdir(&["d"]);
    let mut client = Client::start(home.path(), work.path(), &["--approvals", "client"]);
    client.send(&rm("5", "d", "s2"));
    let request = expect_request(&client, "rm -rf d", "s2");
    let timeout = client.next();
    assert_eq!(
        timeout,
        json!({"type": "approval_timeout", "id": request["id"]})
    );
    let silent = content(&client.next());
    assert_eq!(silent["status"], "blocked");
    assert_eq!(silent["outcome"], "timeout");
    assert!(
        silent["error"]
            .as_str()
            .unwrap()
            .contains("Silence does not count as consent"),
        "{silent}"
    );
    assert!(work.path().join("d").exists());

    answer_too_late(client, &request);
}

#[test]
fn a_choice_that_was_not_offered_denies() {
    let home = home_with_timeout(300);
    let work = workdir(&["a"]);
    let mut client = Client::start(home.path(), work.path(), &["--approvals", "client"]);
    client.send(&rm("1", "a", "s1"));
    let request = expect_request(&client, "rm -rf a", "s1");
    answer(&mut client, &request, "yes please");
    assert_eq!(content(&client.next())["outcome"], "denied");
    assert!(work.path().join("a").exists());
    client.finish();
}

#[test]
fn always_is_saved_and_another_process_honours_it() {
    let home = home_with_timeout(300);
    let work = workdir(&["a", "b", "c"]);
    // Both servers run before the grant: the second one sees the saved file.
    let mut first = Client::start(home.path(), work.path(), &["--approvals", "client"]);
    let mut second = Client::start(home.path(), work.path(), &["--approvals", "client"]);

    first.send(&rm("1", "a", "s1"));
    let request = expect_request(&first, "rm -rf a", "s1");
    answer(&mut first, &request, "always");
    let ran = content(&first.next());
    assert_eq!(ran["exit_code"], 0, "{ran}");
    let saved = allowlist(home.path());
    assert!(
        saved.contains("command_allowlist:") && saved.contains("\"recursive delete\""),
        "{saved}"
    );
    assert!(
        saved.contains("approvals:\n  timeout: 300"),
        "the rest of the file is kept: {saved}"
    );

    second.send(&rm("2", "b", "another-session"));
    let unasked = second.next();
    assert_eq!(
        unasked["tool_call_id"], "2",
        "the saved grant applies without asking: {unasked}"
    );
    assert_eq!(content(&unasked)["exit_code"], 0);
    assert!(!work.path().join("b").exists());

    // A fresh approving process too.
    let mut third = Client::start(home.path(), work.path(), &["--approvals", "client"]);
    third.send(&rm("3", "c", "s3"));
    assert_eq!(content(&third.next())["exit_code"], 0);
    first.finish();
    second.finish();
    third.finish();
}

#[test]
fn grants_saved_at_once_by_several_processes_are_all_kept() {
    let home = home_with_timeout(300);
    let work = tempfile::tempdir().unwrap();
    let commands = [
        "chmod 777 f1",
        "rm -rf d2",
        "find . -name nothing-here -delete",
        "bash -c 'echo hi'",
    ];
    std::fs::write(work.path().join("f1"), "x").unwrap();
    let mut clients: Vec<Client> = commands
        .iter()
        .map(|_| Client::start(home.path(), work.path(), &["--approvals", "client"]))
        .collect();
    let mut requests = Vec::new();
    for (n, (client, command)) in clients.iter_mut().zip(commands).enumerate() {
        client.send(&terminal(
            &n.to_string(),
            json!({"command": command}),
            "s",
            "t",
        ));
        let request = client.next();
        assert_eq!(request["type"], "approval_request", "{request}");
        requests.push(request);
    }
    // All answers go out before any result is read, so the saves overlap.
    for (client, request) in clients.iter_mut().zip(&requests) {
        answer(client, request, "always");
    }
    let results: Vec<serde_json::Value> = clients
        .iter()
        .map(|client| content(&client.next()))
        .collect();
    let saved = allowlist(home.path());
    for request in &requests {
        let key = request["description"].as_str().unwrap();
        assert!(
            saved.contains(&format!("\"{key}\"")),
            "{key} missing from {saved}\nresults: {results:?}"
        );
    }
    for client in clients {
        client.finish();
    }
}

#[test]
fn without_the_flag_nobody_is_asked() {
    let home = home_with_timeout(300);
    let work = workdir(&["a"]);
    let mut client = Client::start(home.path(), work.path(), &[]);
    client.send(&rm("1", "a", "s1"));
    let answer = client.next();
    assert_eq!(answer["tool_call_id"], "1", "no request line: {answer}");
    let result = content(&answer);
    assert_eq!(result["status"], "blocked");
    let error = result["error"].as_str().unwrap();
    assert!(
        error.contains("nobody can approve") && !error.contains("has been asked"),
        "{error}"
    );
    assert!(work.path().join("a").exists());
    client.finish();
}

#[test]
fn an_unknown_approvals_mode_is_a_usage_error() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hermes-tools"))
        .args(["serve", "--approvals", "everyone"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("client"));
}

#[test]
fn a_plugin_hook_that_answers_approve_asks_the_client() {
    let home = home_with_timeout(300);
    let plugin = home.path().join("plugins/guard");
    std::fs::create_dir_all(&plugin).unwrap();
    std::fs::write(
        plugin.join("plugin.yaml"),
        "hooks:\n  pre_tool_call: [python3, -c, \"import json,sys; e=json.load(sys.stdin); print(json.dumps({'action': 'approve', 'message': 'guarded ' + e['tool_name']}) if e['tool_name'] == 'write_file' else '')\"]\n",
    )
    .unwrap();
    let work = tempfile::tempdir().unwrap();
    let mut client = Client::start(home.path(), work.path(), &["--approvals", "client"]);
    let write = |id: &str, name: &str| {
        json!({"id": id, "type": "function", "session_id": "s", "task_id": "t",
               "function": {"name": "write_file", "arguments": json!({"path": name, "content": "hello"}).to_string()}})
    };

    client.send(&write("1", "refused.txt"));
    let request = client.next();
    assert_eq!(request["type"], "approval_request", "{request}");
    assert_eq!(request["tool"], "write_file");
    assert_eq!(request["description"], "guarded write_file");
    answer(&mut client, &request, "deny");
    let refused = content(&client.next());
    assert!(
        refused["error"].as_str().unwrap().contains("BLOCKED"),
        "{refused}"
    );
    assert!(!work.path().join("refused.txt").exists());

    client.send(&write("2", "granted.txt"));
    let request = client.next();
    assert_eq!(request["tool"], "write_file");
    answer(&mut client, &request, "once");
    let granted = content(&client.next());
    assert!(granted.get("error").is_none(), "{granted}");
    assert_eq!(
        std::fs::read_to_string(work.path().join("granted.txt")).unwrap(),
        "hello"
    );
    client.finish();
}

/// A folder outside every writable root of the sandbox (the workspace and /tmp), so only
/// a command that left the sandbox can change it.
fn outside_the_sandbox() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

/// A home with the OS sandbox on (the default).
fn sandboxed_home() -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.yaml"),
        "approvals:\n  timeout: 300\n",
    )
    .unwrap();
    home
}

fn call(id: &str, command: &str) -> Value {
    terminal(id, json!({"command": command}), "s1", "task-s1")
}

fn approval_request(client: &Client) -> Value {
    let request = client.next();
    assert_eq!(request["type"], "approval_request", "{request}");
    request
}

#[test]
fn an_approved_command_runs_in_a_clean_shell_not_in_the_state_the_model_planted() {
    let home = sandboxed_home();
    let work = workdir(&[]);
    let outside = outside_the_sandbox();
    let victim = outside.path().join("victim");
    std::fs::create_dir_all(&victim).unwrap();
    let pwned = outside.path().join("pwned");
    let mut client = Client::start(home.path(), work.path(), &["--approvals", "client"]);
    // Inside the sandbox the model plants a fake `rm` on PATH, an `rm` function and
    // BASH_ENV: each would run with the server's rights in its shell state.
    let fake = format!("#!/bin/sh\ntouch {}\n", pwned.display());
    let plant = format!(
        "mkdir -p evil && printf '%s' '{fake}' > evil/rm && chmod +x evil/rm && cp evil/rm evil/env.sh && \
         export PATH=$PWD/evil:$PATH BASH_ENV=$PWD/evil/env.sh && rm() {{ touch {p}; }} && \
         export PLANTED=yes",
        p = pwned.display()
    );
    client.send(&call("plant", &plant));
    let planted = content(&client.next());
    assert_eq!(planted["exit_code"], 0, "{planted}");
    // From a task's second command on, the next command's shell waits with the state
    // restored: the approved command must not run in it either.
    client.send(&call("warm", "true"));
    assert_eq!(content(&client.next())["exit_code"], 0);

    let command = format!("rm -rf {} && export ESCALATED=yes", victim.display());
    client.send(&call("approved", &command));
    let request = approval_request(&client);
    assert_eq!(request["command"], command.as_str());
    answer(&mut client, &request, "once");
    let ran = content(&client.next());
    assert_eq!(ran["exit_code"], 0, "{ran}");
    assert!(
        ran["approval"]
            .as_str()
            .unwrap()
            .contains("outside the sandbox"),
        "{ran}"
    );
    assert!(!victim.exists(), "the approved command did not run: {ran}");
    assert!(
        !pwned.exists(),
        "the approved command ran what the model planted in its shell state"
    );
    // The task's state is still there for the commands after it, in the sandbox, with
    // what the approved command changed laid over it.
    client.send(&call("after", "echo $PLANTED $ESCALATED"));
    assert_eq!(content(&client.next())["output"], "yes yes");
    client.finish();
}

#[test]
fn a_grant_covers_exactly_the_command_shown_never_its_kind() {
    let home = sandboxed_home();
    let work = workdir(&[]);
    let outside = outside_the_sandbox();
    for dir in ["a", "b", "c", "d"] {
        std::fs::create_dir_all(outside.path().join(dir)).unwrap();
    }
    let path = |dir: &str| outside.path().join(dir).display().to_string();
    let mut client = Client::start(home.path(), work.path(), &["--approvals", "client"]);

    // `session` for `rm -rf A`: the same command again runs outside unasked...
    let granted = format!("rm -rf {}", path("a"));
    client.send(&call("1", &granted));
    let request = approval_request(&client);
    answer(&mut client, &request, "session");
    assert_eq!(content(&client.next())["exit_code"], 0);
    assert!(!outside.path().join("a").exists());
    std::fs::create_dir_all(outside.path().join("a")).unwrap();
    client.send(&call("2", &granted));
    let again = client.next();
    assert_eq!(again["tool_call_id"], "2", "asked again: {again}");
    assert!(content(&again)["approval"]
        .as_str()
        .unwrap()
        .contains("outside the sandbox"));
    assert!(!outside.path().join("a").exists());

    // ...but not in another directory, which the person sees with the command...
    let elsewhere = workdir(&["sub"]);
    std::fs::create_dir_all(outside.path().join("a")).unwrap();
    client.send(&terminal(
        "2b",
        json!({"command": granted, "workdir": elsewhere.path().join("sub")}),
        "s1",
        "task-s1",
    ));
    let request = approval_request(&client);
    assert_eq!(
        request["cwd"],
        elsewhere.path().join("sub").display().to_string(),
        "{request}"
    );
    answer(&mut client, &request, "deny");
    assert_eq!(content(&client.next())["status"], "blocked");
    assert!(outside.path().join("a").exists());

    // ...and `rm -rf A B` is another command: the person is asked, and a denial holds.
    let wider = format!("rm -rf {} {}", path("a"), path("b"));
    client.send(&call("3", &wider));
    let request = approval_request(&client);
    assert_eq!(request["command"], wider.as_str());
    assert_eq!(
        request["cwd"],
        work.path().display().to_string(),
        "{request}"
    );
    answer(&mut client, &request, "deny");
    assert_eq!(content(&client.next())["status"], "blocked");
    assert!(outside.path().join("b").exists(), "B was deleted unasked");

    // `always` in one process: another process runs exactly that command unasked, and
    // asks for any other.
    let always = format!("rm -rf {}", path("c"));
    client.send(&call("4", &always));
    let request = approval_request(&client);
    answer(&mut client, &request, "always");
    assert_eq!(content(&client.next())["exit_code"], 0);
    client.finish();
    std::fs::create_dir_all(outside.path().join("c")).unwrap();
    let mut other = Client::start(home.path(), work.path(), &["--approvals", "client"]);
    other.send(&call("5", &always));
    let unasked = other.next();
    assert_eq!(unasked["tool_call_id"], "5", "asked again: {unasked}");
    assert!(!outside.path().join("c").exists());
    let other_command = format!("rm -rf {} {}", path("c"), path("d"));
    other.send(&call("6", &other_command));
    let request = approval_request(&other);
    assert_eq!(request["command"], other_command.as_str());
    answer(&mut other, &request, "deny");
    assert_eq!(content(&other.next())["status"], "blocked");
    assert!(outside.path().join("d").exists(), "D was deleted unasked");
    other.finish();
}

#[test]
fn the_person_sees_the_command_unmasked_with_control_characters_visible() {
    let home = sandboxed_home();
    let work = workdir(&[]);
    let outside = outside_the_sandbox();
    let mut client = Client::start(home.path(), work.path(), &["--approvals", "client"]);
    let command = format!(
        "export API_KEY=$(rm${{IFS}}-rf {}) #\u{1b}[2K\r\u{1b}[1Aecho fine",
        outside.path().display()
    );
    client.send(&call("1", &command));
    let request = approval_request(&client);
    let shown = request["command"].as_str().unwrap();
    assert!(shown.contains("rm${IFS}-rf"), "{shown}");
    assert!(!shown.contains("***"), "{shown}");
    assert!(shown.contains("\\x1b[2K\\r\\x1b[1A"), "{shown}");
    assert!(!shown.contains(['\u{1b}', '\r']), "{shown}");
    answer(&mut client, &request, "deny");
    assert_eq!(content(&client.next())["status"], "blocked");
    assert!(outside.path().exists());
    client.finish();
}

/// The task's snapshot files under the server's run directory in `runtime`.
fn snapshots_under(runtime: &Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let mut dirs = vec![runtime.join("hermes-tools")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                dirs.push(path);
            } else if entry
                .file_name()
                .to_string_lossy()
                .starts_with("hermes-snap-")
            {
                found.push(path);
            }
        }
    }
    found
}

#[test]
fn a_link_planted_as_the_snapshot_is_never_followed_with_the_server_rights() {
    let home = sandboxed_home();
    let work = workdir(&[]);
    let outside = outside_the_sandbox();
    let victim = outside.path().join("bashrc");
    std::fs::write(&victim, "# the person's start-up file\n").unwrap();
    std::fs::create_dir_all(outside.path().join("x")).unwrap();
    // The run directory lies under /tmp here, so the test can find the task's files.
    let runtime = tempfile::tempdir().unwrap();
    // A file no sandbox can read (the run directory's base is hidden in every one).
    let secret = runtime
        .path()
        .join("hermes-tools")
        .join("only-the-server-reads");
    std::fs::create_dir_all(secret.parent().unwrap()).unwrap();
    std::fs::write(&secret, "export STOLEN=server-only-secret\n").unwrap();
    let mut client = Client::start_with(
        home.path(),
        work.path(),
        &["--approvals", "client"],
        &[("XDG_RUNTIME_DIR", runtime.path())],
    );
    for id in ["1", "2"] {
        client.send(&call(id, "true"));
        assert_eq!(content(&client.next())["exit_code"], 0);
    }
    let snapshot = snapshots_under(runtime.path()).pop().expect("a snapshot");
    // Inside its sandbox the task replaces its snapshot with a link to a file outside.
    client.send(&call(
        "plant",
        &format!("ln -sf {} {}", victim.display(), snapshot.display()),
    ));
    assert_eq!(content(&client.next())["exit_code"], 0);
    let command = format!("rm -rf {}", outside.path().join("x").display());
    client.send(&call("approved", &command));
    let request = approval_request(&client);
    answer(&mut client, &request, "once");
    assert_eq!(content(&client.next())["exit_code"], 0);
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "# the person's start-up file\n",
        "the server wrote through the planted link"
    );
    // A link to a file only the server may read is not read for the task either.
    client.send(&call(
        "plant-read",
        &format!("ln -sf {} {}", secret.display(), snapshot.display()),
    ));
    assert_eq!(content(&client.next())["exit_code"], 0);
    for id in ["3", "4"] {
        client.send(&call(id, "echo ${STOLEN-none}"));
        let shown = content(&client.next())["output"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(!shown.contains("server-only-secret"), "{shown}");
    }
    client.finish();
}
