//! Calls `hermes-tools call patch ...` in a temp working directory with a temp
//! `HERMES_HOME`, as a user would.

// Each test binary uses a different part of this module.
#![allow(dead_code)]

use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use tempfile::TempDir;

pub struct Workspace {
    pub dir: TempDir,
    pub home: TempDir,
    /// PATH for the tool process; `None` keeps the test's own.
    pub path_env: Option<String>,
}

impl Workspace {
    pub fn new() -> Workspace {
        Workspace {
            dir: TempDir::new().unwrap(),
            home: TempDir::new().unwrap(),
            path_env: None,
        }
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    pub fn put(&self, rel: &str, content: impl AsRef<[u8]>) {
        let path = self.path(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }

    pub fn get(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
    }

    pub fn config(&self, yaml: &str) {
        std::fs::write(self.home.path().join("config.yaml"), yaml).unwrap();
    }

    /// One `hermes-tools call TOOL -` with `args` on stdin; the result as JSON.
    pub fn call(&self, tool: &str, args: Value) -> Value {
        let mut command = Command::new(env!("CARGO_BIN_EXE_hermes-tools"));
        command
            .args(["call", tool, "-", "--cwd"])
            .arg(self.dir.path())
            .env("HERMES_HOME", self.home.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(path) = &self.path_env {
            command.env("PATH", path);
        }
        let mut child = command.spawn().unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(args.to_string().as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "exit {:?}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let mut text = String::from_utf8(out.stdout).unwrap();
        // A result too large for one message is spilled to a file the message names.
        if text.starts_with("<persisted-output>") {
            let saved = text
                .split("saved at ")
                .nth(1)
                .and_then(|rest| rest.split(".txt").next())
                .unwrap();
            text = std::fs::read_to_string(format!("{saved}.txt")).unwrap();
        }
        let json_part = text.trim_end().split("\n\n[").next().unwrap();
        serde_json::from_str(json_part).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
    }

    pub fn replace(&self, path: &str, old: &str, new: &str) -> Value {
        self.call(
            "patch",
            serde_json::json!({"path": path, "old_string": old, "new_string": new}),
        )
    }

    pub fn v4a(&self, patch: &str) -> Value {
        self.call(
            "patch",
            serde_json::json!({"mode": "patch", "patch": patch}),
        )
    }
}

pub fn error_of(v: &Value) -> &str {
    v["error"]
        .as_str()
        .unwrap_or_else(|| panic!("expected an error, got {v}"))
}

/// Asserts success; a result too big for the reply (spilled to a file) is read back.
pub fn ok(v: &Value) {
    if v["persisted_output"] == true {
        let text =
            std::fs::read_to_string(v["path"].as_str().expect("a spilled result names its file"))
                .unwrap();
        let whole: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("spilled result is not JSON: {e}"));
        return ok(&whole);
    }
    assert_eq!(v["success"], true, "{v}");
}

/// Every file under `dir`, relative, sorted.
pub fn tree(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let rel = path
                    .strip_prefix(dir)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                out.push((rel, std::fs::read(&path).unwrap()));
            }
        }
    }
    out.sort();
    out
}
