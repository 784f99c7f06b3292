//! File tools through long-running `hermes-tools serve` processes: concurrent edits
//! of one file from many tasks and several processes (no edit reported as done is
//! missing), relative paths that follow the task's terminal directory, read_file's
//! dedup stub refused as content, and permission settings edited while running held
//! back until a restart.
//!
//! HOME and HERMES_HOME of every child are temp dirs.

use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::Duration;
use tempfile::TempDir;

struct Dirs {
    _root: TempDir,
    home: PathBuf,
    hermes: PathBuf,
    work: PathBuf,
}

fn dirs() -> Dirs {
    let root = TempDir::new().unwrap();
    let make = |name: &str| {
        let path = root.path().join(name);
        std::fs::create_dir_all(&path).unwrap();
        path.canonicalize().unwrap()
    };
    let (home, hermes, work) = (make("home"), make("hermes"), make("work"));
    Dirs {
        _root: root,
        home,
        hermes,
        work,
    }
}

/// One `serve` process; answers are matched to calls by id.
struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    answers: Receiver<Value>,
    stderr: Receiver<String>,
    next_id: u64,
}

impl Server {
    fn start(dirs: &Dirs) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_hermes-tools"))
            .arg("serve")
            .current_dir(&dirs.work)
            .env("HOME", &dirs.home)
            .env("HERMES_HOME", &dirs.hermes)
            .env_remove("HERMES_WRITE_SAFE_ROOT")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, answers) = channel();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                if let Ok(value) = serde_json::from_str::<Value>(&line) {
                    let _ = tx.send(value);
                }
            }
        });
        let (tx, stderr) = channel();
        let err = BufReader::new(child.stderr.take().unwrap());
        std::thread::spawn(move || {
            for line in err.lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let stdin = child.stdin.take();
        Server {
            child,
            stdin,
            answers,
            stderr,
            next_id: 0,
        }
    }

    /// Sends one call; returns its id.
    fn send(&mut self, tool: &str, args: Value, task: &str) -> String {
        self.next_id += 1;
        let id = format!("c{}", self.next_id);
        let line = json!({"id": id, "type": "function", "function": {"name": tool, "arguments": args.to_string()}, "task_id": task});
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
        id
    }

    /// Waits for the answers to `ids`, each parsed from its `content` string.
    fn collect(&mut self, ids: &[String]) -> HashMap<String, Value> {
        let mut got = HashMap::new();
        while got.len() < ids.len() {
            let answer = self
                .answers
                .recv_timeout(Duration::from_secs(120))
                .unwrap_or_else(|_| panic!("no answer after {} of {} calls", got.len(), ids.len()));
            let Some(id) = answer["tool_call_id"].as_str() else {
                continue;
            };
            let content = answer["content"].as_str().unwrap_or_default();
            let json_part = content.split("\n\n[").next().unwrap();
            let value = serde_json::from_str(json_part)
                .unwrap_or_else(|e| panic!("not JSON ({e}): {content}"));
            got.insert(id.to_string(), value);
        }
        got
    }

    fn call(&mut self, tool: &str, args: Value, task: &str) -> Value {
        let id = self.send(tool, args, task);
        self.collect(std::slice::from_ref(&id)).remove(&id).unwrap()
    }

    /// Everything the process wrote on stderr (call after it exited).
    fn stderr_text(&self) -> String {
        let mut lines = Vec::new();
        while let Ok(line) = self.stderr.recv_timeout(Duration::from_secs(10)) {
            lines.push(line);
        }
        lines.join("\n")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}

const LINES: usize = 100;

fn numbered_file(path: &Path) {
    let text: String = (0..LINES).map(|i| format!("line {i} original\n")).collect();
    std::fs::write(path, text).unwrap();
}

/// Sends the patch of line `i` for each `i` in `lines` at once, each from its own task.
fn send_patches(server: &mut Server, lines: impl Iterator<Item = usize>) -> Vec<(usize, String)> {
    lines
        .map(|i| {
            let args = json!({"path": "shared.txt", "old_string": format!("line {i} original\n"), "new_string": format!("line {i} edited\n")});
            (i, server.send("patch", args, &format!("task-{i}")))
        })
        .collect()
}

/// Every patch reported as a success is in the file; none was reported as done
/// without being there.
fn check_no_lost_edit(path: &Path, reported: &[(usize, Value)]) -> usize {
    let text = std::fs::read_to_string(path).unwrap();
    let mut succeeded = 0;
    for (i, result) in reported {
        if result["success"] == true {
            succeeded += 1;
            assert!(
                text.contains(&format!("line {i} edited\n")),
                "edit {i} was reported done but is not in the file"
            );
        } else {
            assert!(
                result["error"].is_string(),
                "a failure must say why: {result}"
            );
        }
    }
    succeeded
}

#[test]
fn a_hundred_concurrent_patches_through_one_server_lose_nothing() {
    let dirs = dirs();
    let file = dirs.work.join("shared.txt");
    numbered_file(&file);
    let mut server = Server::start(&dirs);
    let sent = send_patches(&mut server, 0..LINES);
    let ids: Vec<String> = sent.iter().map(|(_, id)| id.clone()).collect();
    let mut answers = server.collect(&ids);
    let reported: Vec<(usize, Value)> = sent
        .into_iter()
        .map(|(i, id)| (i, answers.remove(&id).unwrap()))
        .collect();
    // Each patch changes its own line, so with edits serialised every one applies.
    assert_eq!(check_no_lost_edit(&file, &reported), LINES);
}

#[test]
fn concurrent_patches_from_several_processes_lose_nothing() {
    let dirs = dirs();
    let file = dirs.work.join("shared.txt");
    numbered_file(&file);
    const PROCESSES: usize = 4;
    let mut servers: Vec<Server> = (0..PROCESSES).map(|_| Server::start(&dirs)).collect();
    let mut sent = Vec::new();
    for (n, server) in servers.iter_mut().enumerate() {
        sent.push(send_patches(server, (n..LINES).step_by(PROCESSES)));
    }
    let mut reported = Vec::new();
    for (server, sent) in servers.iter_mut().zip(sent) {
        let ids: Vec<String> = sent.iter().map(|(_, id)| id.clone()).collect();
        let mut answers = server.collect(&ids);
        reported.extend(
            sent.into_iter()
                .map(|(i, id)| (i, answers.remove(&id).unwrap())),
        );
    }
    assert_eq!(reported.len(), LINES);
    assert_eq!(check_no_lost_edit(&file, &reported), LINES);
}

#[test]
fn relative_paths_follow_the_terminal_directory() {
    let dirs = dirs();
    std::fs::create_dir_all(dirs.work.join("sub")).unwrap();
    std::fs::write(dirs.work.join("sub/inner.txt"), "inside sub\n").unwrap();
    std::fs::write(dirs.work.join("inner.txt"), "top level\n").unwrap();
    let mut server = Server::start(&dirs);
    let r = server.call("read_file", json!({"path": "inner.txt"}), "t1");
    assert_eq!(r["content"], "1|top level", "{r}");
    let r = server.call("terminal", json!({"command": "cd sub"}), "t1");
    assert_eq!(r["exit_code"], 0, "{r}");
    let r = server.call("read_file", json!({"path": "inner.txt"}), "t1");
    assert_eq!(r["content"], "1|inside sub", "{r}");
    let r = server.call(
        "write_file",
        json!({"path": "made.txt", "content": "here\n"}),
        "t1",
    );
    assert_eq!(r["verified"], true, "{r}");
    assert!(dirs.work.join("sub/made.txt").exists());
    let r = server.call("search_files", json!({"pattern": "inside"}), "t1");
    assert_eq!(r["matches"][0]["path"], "inner.txt", "{r}");
    // Another task has its own terminal directory.
    let r = server.call("read_file", json!({"path": "inner.txt"}), "t2");
    assert_eq!(r["content"], "1|top level", "{r}");
}

#[test]
fn the_dedup_stub_is_refused_as_content() {
    let dirs = dirs();
    std::fs::write(dirs.work.join("a.txt"), "real text\n").unwrap();
    let mut server = Server::start(&dirs);
    let first = server.call("read_file", json!({"path": "a.txt"}), "t");
    assert_eq!(first["content"], "1|real text");
    let stub = server.call("read_file", json!({"path": "a.txt"}), "t");
    assert_eq!(stub["dedup"], true, "{stub}");
    let r = server.call(
        "write_file",
        json!({"path": "a.txt", "content": stub.to_string()}),
        "t",
    );
    assert!(r["error"].as_str().unwrap().contains("unchanged"), "{r}");
    assert_eq!(
        std::fs::read_to_string(dirs.work.join("a.txt")).unwrap(),
        "real text\n"
    );
}

/// A setting that grants nothing takes effect on the very next call, however the file
/// was changed: written in place, renamed over (as editors save), deleted.
#[test]
fn other_settings_edited_while_running_apply_to_the_next_call() {
    let dirs = dirs();
    let config = dirs.hermes.join("config.yaml");
    let small_budget = "tool_budget:\n  per_tool:\n    search_files: 50\n";
    for n in 0..5 {
        std::fs::write(
            dirs.work.join(format!("page{n}.txt")),
            format!("word{n} {}\n", "text ".repeat(40)),
        )
        .unwrap();
    }
    let mut server = Server::start(&dirs);
    let mut search = |n: usize| {
        server.call(
            "search_files",
            json!({"pattern": format!("word{n}"), "path": "."}),
            "t",
        )
    };
    let spilled = |answer: &Value| answer["persisted_output"] == true;
    let r = search(0);
    assert!(
        !spilled(&r) && r.to_string().contains("word0 text"),
        "the default budget: {r}"
    );
    std::fs::write(&config, small_budget).unwrap();
    let r = search(1);
    assert!(spilled(&r), "written in place: {r}");
    std::fs::write(
        dirs.hermes.join("next.yaml"),
        "tool_budget:\n  default_result_chars: 100000\n",
    )
    .unwrap();
    std::fs::rename(dirs.hermes.join("next.yaml"), &config).unwrap();
    let r = search(2);
    assert!(!spilled(&r), "renamed over: {r}");
    std::fs::write(&config, small_budget).unwrap();
    let r = search(3);
    assert!(spilled(&r), "written in place again: {r}");
    std::fs::remove_file(&config).unwrap();
    let r = search(4);
    assert!(!spilled(&r), "deleted, so the default: {r}");
}

#[test]
fn permission_settings_edited_while_running_apply_only_after_a_restart() {
    let dirs = dirs();
    let victim = dirs.work.join("victim");
    std::fs::create_dir_all(victim.join("inner")).unwrap();
    let command = format!("rm -rf {}", victim.join("inner").display());
    // Without the OS sandbox an unattended dangerous command is refused; with it, it
    // would run contained in the workspace.
    std::fs::write(
        dirs.hermes.join("config.yaml"),
        "terminal:\n  sandbox:\n    mode: \"off\"\n",
    )
    .unwrap();
    let mut server = Server::start(&dirs);
    let r = server.call("terminal", json!({"command": command}), "t");
    assert_eq!(r["status"], "blocked", "{r}");
    // Something other than the runtime (a shell, an editor) grants itself approval.
    std::fs::write(
        dirs.hermes.join("config.yaml"),
        "approvals:\n  unattended_mode: approve\n",
    )
    .unwrap();
    let r = server.call("terminal", json!({"command": command}), "t");
    assert_eq!(r["status"], "blocked", "{r}");
    assert!(victim.join("inner").exists());
    drop(server.stdin.take());
    let _ = server.child.wait();
    let stderr = server.stderr_text();
    assert!(
        stderr.contains("`approvals` changed since start-up"),
        "{stderr}"
    );
    assert_eq!(
        stderr.matches("`approvals` changed since start-up").count(),
        1,
        "reported once: {stderr}"
    );
}
