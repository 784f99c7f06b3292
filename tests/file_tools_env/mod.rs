//! The file tools on a task whose terminal runs elsewhere, through `hermes-tools serve`:
//! what `terminal` writes there `read_file` reads, what `write_file` and `patch` write
//! there `terminal` sees, `search_files` finds it, the guards hold, and the directory
//! the server runs in on this machine is left alone.
#![allow(dead_code)]

#[path = "../serve_client/mod.rs"]
mod serve_client;

use serde_json::{json, Value};
use std::path::Path;

/// Whatever sends tool calls to a server and returns their parsed results.
pub trait ToolCalls {
    fn call(&mut self, tool: &str, args: Value) -> Value;
}

pub struct Session {
    client: serve_client::Client,
    task: String,
    calls: usize,
}

impl Session {
    /// A server with `HERMES_HOME=home` (its config.yaml names the backend), run in `cwd`.
    pub fn start(home: &Path, cwd: &Path, task: &str) -> Session {
        Session {
            client: serve_client::Client::start(home, cwd, &[]),
            task: task.to_string(),
            calls: 0,
        }
    }

    pub fn finish(self) {
        self.client.finish();
    }

    /// Sends one call as `task` without waiting; returns its id.
    pub fn send_as(&mut self, task: &str, tool: &str, args: Value) -> String {
        self.calls += 1;
        let id = format!("call-{}", self.calls);
        self.client.send(&json!({
            "id": id,
            "type": "function",
            "function": {"name": tool, "arguments": args.to_string()},
            "session_id": "files",
            "task_id": task,
        }));
        id
    }

    /// The results of the calls `ids`, in that order, whatever order they finish in.
    pub fn answers(&mut self, ids: &[String]) -> Vec<Value> {
        let mut got = std::collections::HashMap::new();
        while got.len() < ids.len() {
            let line = self.client.next();
            if let Some(id) = line["tool_call_id"]
                .as_str()
                .filter(|id| ids.iter().any(|i| i == id))
            {
                got.insert(id.to_string(), serve_client::content(&line));
            }
        }
        ids.iter().map(|id| got.remove(id).unwrap()).collect()
    }
}

impl ToolCalls for Session {
    fn call(&mut self, tool: &str, args: Value) -> Value {
        let task = self.task.clone();
        let id = self.send_as(&task, tool, args);
        self.answers(&[id]).remove(0)
    }
}

/// `edits` tasks patch one file of the environment (`path`, absolute) at once, each its
/// own line: every edit lands, none is lost to another.
pub fn concurrent_edits(s: &mut Session, path: &str, edits: usize) {
    let text: String = (0..edits).map(|i| format!("slot-{i}\n")).collect();
    let r = s.call("write_file", json!({"path": path, "content": text}));
    assert_eq!(r["verified"], true, "{r}");
    let ids: Vec<String> = (0..edits)
        .map(|i| {
            let task = format!("{}-edit-{i}", s.task);
            s.send_as(&task, "patch", json!({"path": path, "old_string": format!("slot-{i}\n"), "new_string": format!("done-{i}\n")}))
        })
        .collect();
    for r in s.answers(&ids) {
        assert_eq!(r["success"], true, "{r}");
    }
    let r = s.call("read_file", json!({"path": path}));
    let expected: Vec<String> = (0..edits).map(|i| format!("{}|done-{i}", i + 1)).collect();
    assert_eq!(r["content"], expected.join("\n"), "{r}");
}

/// The scenario, in `dir` (an absolute directory inside the environment that does not
/// exist yet). `host_cwd` is where the server runs on this machine: nothing may appear
/// there.
pub fn exercise(s: &mut impl ToolCalls, dir: &str, host_cwd: &Path) {
    let r = s.call("terminal", json!({"command": format!("mkdir -p {dir} && cd {dir} && printf 'alpha\\nbeta\\ngamma\\n' > made_by_terminal.txt && pwd")}));
    assert_eq!(r["exit_code"], 0, "{r}");
    assert_eq!(r["cwd"], dir, "{r}");

    // Relative paths start from the terminal's directory in the environment.
    let r = s.call("read_file", json!({"path": "made_by_terminal.txt"}));
    assert_eq!(r["content"], "1|alpha\n2|beta\n3|gamma", "{r}");
    assert_eq!(r["total_lines"], 3);
    assert_eq!(r["file_size"], 17);
    let r = s.call(
        "read_file",
        json!({"path": format!("{dir}/made_by_terminal.txt"), "offset": 2, "limit": 1}),
    );
    assert_eq!(r["content"], "2|beta", "{r}");
    assert_eq!(r["truncated"], true);
    assert_eq!(r["next_offset"], 3);
    // The same region again, unchanged: the dedup stub, as on local.
    let r = s.call("read_file", json!({"path": "made_by_terminal.txt"}));
    assert_eq!(r["status"], "unchanged", "{r}");

    let r = s.call(
        "write_file",
        json!({"path": "sub/written.py", "content": "x = 1\nprint(x)\n"}),
    );
    assert_eq!(r["bytes_written"], 15, "{r}");
    assert_eq!(r["dirs_created"], 1, "{r}");
    assert_eq!(r["verified"], true, "{r}");
    assert_eq!(r["lint"]["status"], "ok", "{r}");
    let r = s.call("terminal", json!({"command": "cat sub/written.py"}));
    assert_eq!(r["output"], "x = 1\nprint(x)", "{r}");

    let r = s.call(
        "patch",
        json!({"path": "sub/written.py", "old_string": "x = 1", "new_string": "x = 2"}),
    );
    assert_eq!(r["success"], true, "{r}");
    assert!(r["diff"].as_str().unwrap().contains("+x = 2"), "{r}");
    // Fuzzy matching works there too: indentation differs from the file's.
    let r = s.call("patch", json!({"path": "sub/written.py", "old_string": "    print(x)", "new_string": "print(x, x)"}));
    assert_eq!(r["success"], true, "{r}");
    let r = s.call("terminal", json!({"command": "cat sub/written.py"}));
    assert_eq!(r["output"], "x = 2\nprint(x, x)", "{r}");

    // Structured data that would not parse is refused and the file is left as it was.
    let r = s.call(
        "write_file",
        json!({"path": "conf.json", "content": "{\"a\": 1}\n"}),
    );
    assert_eq!(r["verified"], true, "{r}");
    let r = s.call(
        "patch",
        json!({"path": "conf.json", "old_string": "1}", "new_string": "1"}),
    );
    assert_eq!(r["success"], false, "{r}");
    assert_eq!(r["lint"]["status"], "error", "{r}");
    let r = s.call("terminal", json!({"command": "cat conf.json"}));
    assert_eq!(r["output"], "{\"a\": 1}", "{r}");

    let v4a = "*** Begin Patch\n*** Update File: sub/written.py\n@@\n-x = 2\n+x = 3\n print(x, x)\n*** Add File: notes.md\n+# notes\n+made by patch\n*** End Patch\n";
    let r = s.call("patch", json!({"mode": "patch", "patch": v4a}));
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(r["files_modified"], json!(["sub/written.py"]), "{r}");
    assert_eq!(r["files_created"], json!(["notes.md"]), "{r}");
    let r = s.call(
        "terminal",
        json!({"command": "cat sub/written.py notes.md"}),
    );
    assert_eq!(
        r["output"], "x = 3\nprint(x, x)\n# notes\nmade by patch",
        "{r}"
    );
    // A V4A path that climbs out is refused before anything is written.
    let r = s.call("patch", json!({"mode": "patch", "patch": "*** Begin Patch\n*** Add File: ../escape.txt\n+no\n*** End Patch\n"}));
    assert_eq!(r["success"], false, "{r}");
    assert!(r["error"].as_str().unwrap().contains("`..`"), "{r}");

    let r = s.call("search_files", json!({"pattern": "gamma|x = 3"}));
    assert_eq!(r["total_count"], 2, "{r}");
    assert_eq!(
        r["matches"][0],
        json!({"path": "made_by_terminal.txt", "line": 3, "content": "gamma"}),
        "{r}"
    );
    assert_eq!(
        r["matches"][1],
        json!({"path": "sub/written.py", "line": 1, "content": "x = 3"}),
        "{r}"
    );
    let r = s.call(
        "search_files",
        json!({"pattern": "beta", "context": 1, "path": dir}),
    );
    assert_eq!(
        r["matches"][0]["before"],
        json!([{"line": 1, "content": "alpha"}]),
        "{r}"
    );
    assert_eq!(
        r["matches"][0]["after"],
        json!([{"line": 3, "content": "gamma"}]),
        "{r}"
    );
    assert_eq!(
        r["matches"][0]["path"],
        format!("{dir}/made_by_terminal.txt"),
        "{r}"
    );
    let r = s.call(
        "search_files",
        json!({"pattern": "*.py", "target": "files"}),
    );
    assert_eq!(r["files"], json!(["sub/written.py"]), "{r}");
    let r = s.call(
        "search_files",
        json!({"pattern": "x", "output_mode": "count"}),
    );
    assert_eq!(r["counts"]["sub/written.py"], 2, "{r}");
    let r = s.call("search_files", json!({"pattern": "(unclosed"}));
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .starts_with("Invalid regex pattern"),
        "{r}"
    );

    // The guards, there as here.
    let r = s.call("terminal", json!({"command": "printf 'a\\0b' > blob.txt"}));
    assert_eq!(r["exit_code"], 0, "{r}");
    let r = s.call("read_file", json!({"path": "blob.txt"}));
    assert_eq!(r["is_binary"], true, "{r}");
    let r = s.call("read_file", json!({"path": "/proc/self/environ"}));
    assert!(
        r["error"].as_str().unwrap().starts_with("Refusing to read"),
        "{r}"
    );
    // Larger than one read through an environment carries: refused, saying so.
    let r = s.call(
        "terminal",
        json!({"command": "head -c 17000000 /dev/zero | tr '\\0' a > large.txt"}),
    );
    assert_eq!(r["exit_code"], 0, "{r}");
    let r = s.call("read_file", json!({"path": "large.txt"}));
    let error = r["error"].as_str().unwrap();
    assert!(
        error.contains("it is 17000000 bytes; the file tools read at most 16 MiB"),
        "{r}"
    );
    let r = s.call("read_file", json!({"path": "sub"}));
    assert!(
        r["error"].as_str().unwrap().contains("is a directory"),
        "{r}"
    );
    let r = s.call("read_file", json!({"path": "made_by_terminl.txt"}));
    assert_eq!(r["similar_files"], json!(["made_by_terminal.txt"]), "{r}");
    let r = s.call(
        "write_file",
        json!({"path": "~/.ssh/authorized_keys", "content": "ssh-ed25519 AAAA"}),
    );
    assert!(r["error"].as_str().unwrap().contains("denied"), "{r}");
    let r = s.call(
        "write_file",
        json!({"path": "/proc/version", "content": "x"}),
    );
    assert!(r["error"].as_str().unwrap().contains("kernel file"), "{r}");

    // Changed behind the tools' back since the last read: written, with the warning.
    let r = s.call("read_file", json!({"path": "notes.md"}));
    assert_eq!(r["total_lines"], 2, "{r}");
    let r = s.call(
        "terminal",
        json!({"command": "sleep 1; echo extra >> notes.md"}),
    );
    assert_eq!(r["exit_code"], 0, "{r}");
    let r = s.call(
        "write_file",
        json!({"path": "notes.md", "content": "# replaced\n"}),
    );
    assert!(
        r["warning"].as_str().unwrap().contains("changed on disk"),
        "{r}"
    );
    let r = s.call("terminal", json!({"command": "cat notes.md"}));
    assert_eq!(r["output"], "# replaced", "{r}");

    // A V4A move with an edit, and a deletion, in one step.
    let v4a = "*** Begin Patch\n*** Update File: notes.md\n*** Move to: moved/notes.md\n@@\n-# replaced\n+# moved\n\
               *** Delete File: conf.json\n*** End Patch\n";
    let r = s.call("patch", json!({"mode": "patch", "patch": v4a}));
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(r["files_deleted"], json!(["conf.json"]), "{r}");
    assert_eq!(
        r["files_moved"],
        json!([{"from": "notes.md", "to": "moved/notes.md"}]),
        "{r}"
    );
    let r = s.call("terminal", json!({"command": "cat moved/notes.md; test -e notes.md || test -e conf.json || echo both-gone"}));
    assert_eq!(r["output"], "# moved\nboth-gone", "{r}");

    // This machine's copy of the server's directory saw none of it.
    for name in [
        "made_by_terminal.txt",
        "sub",
        "notes.md",
        "blob.txt",
        "conf.json",
        "moved",
        "large.txt",
    ] {
        assert!(
            !host_cwd.join(name).exists(),
            "{name} appeared on this machine in {}",
            host_cwd.display()
        );
    }
}
