//! Helpers shared by the terminal backend tests.
//! Not every test binary that includes this module uses every helper.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Where `program` is on PATH.
pub fn which(program: &str) -> Option<String> {
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {program}"))
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// A minimal root file system made of the host's `binaries` and the libraries they
/// link, for container and sandbox images (no registry is reachable here).
pub fn build_rootfs(root: &Path, binaries: &[&str]) {
    let script = format!(
        r#"set -e
mkdir -p {r}/bin {r}/tmp {r}/root {r}/etc
chmod 1777 {r}/tmp
for b in {list}; do
  p=$(type -P $b)
  cp "$p" {r}/bin/
  for l in $(ldd "$p" | grep -o '/[^ ]*'); do mkdir -p {r}$(dirname $l); cp -n $l {r}$l; done
done
echo 'root:x:0:0:root:/root:/bin/bash' > {r}/etc/passwd
"#,
        r = root.display(),
        list = binaries.join(" "),
    );
    let out = Command::new("bash")
        .arg("-c")
        .arg(&script)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "building the root file system failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

pub mod serve_process;
#[allow(unused_imports)] // not every test binary that includes this module serves lines
pub use serve_process::line_channel;

/// Where victims live: a place no sandboxed command may write, so not under /tmp or
/// `$TMPDIR` (always writable inside the sandbox). The build's own temp folder is,
/// unless the checkout itself lies under /tmp; then /var/tmp.
pub fn outside_base() -> std::path::PathBuf {
    let writable: Vec<std::path::PathBuf> =
        ["/tmp".into(), std::env::var("TMPDIR").unwrap_or_default()]
            .into_iter()
            .filter(|p: &String| !p.is_empty())
            .filter_map(|p| std::fs::canonicalize(p).ok())
            .collect();
    [env!("CARGO_TARGET_TMPDIR"), "/var/tmp"]
        .into_iter()
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .find(|p| !writable.iter().any(|w| p.starts_with(w)))
        .expect("a temp folder outside /tmp and $TMPDIR (the build's, or /var/tmp)")
}

/// Host pids whose command line contains `needle`.
pub fn host_pids_running(needle: &str) -> Vec<u32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let state = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let zombie = state
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z'));
        if !zombie
            && String::from_utf8_lossy(&cmdline)
                .replace('\0', " ")
                .contains(needle)
        {
            pids.push(pid);
        }
    }
    pids
}

/// The processes below `pid`: its children, theirs, and so on.
pub fn descendants(pid: u32) -> Vec<u32> {
    let parents: Vec<(u32, u32)> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| {
            let child: u32 = entry.ok()?.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{child}/stat")).ok()?;
            let parent = stat[stat.rfind(')')? + 2..]
                .split(' ')
                .nth(1)?
                .parse()
                .ok()?;
            Some((child, parent))
        })
        .collect();
    let mut found = vec![pid];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(
            parents
                .iter()
                .filter(|(_, p)| *p == parent)
                .map(|(c, _)| *c),
        );
        i += 1;
    }
    found.remove(0);
    found
}

/// Waits (bounded) for every process matching `needle` to be gone; returns survivors.
pub fn survivors(needle: &str) -> Vec<u32> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let alive = host_pids_running(needle);
        if alive.is_empty() || Instant::now() >= deadline {
            return alive;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The names of the threads of process `pid` (as the kernel keeps them: 15 bytes).
pub fn thread_names(pid: u32) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("comm")).ok())
        .map(|name| name.trim_end().to_string())
        .collect()
}

/// A workspace, a home and a `HERMES_HOME` holding `config` as its config.yaml, each a
/// temporary directory, for `serve`s started in them.
pub struct ServeFixture {
    pub workspace: tempfile::TempDir,
    pub home: tempfile::TempDir,
    pub hermes_home: tempfile::TempDir,
}

impl ServeFixture {
    pub fn new(config: &str) -> ServeFixture {
        let fixture = ServeFixture {
            // Under the target directory: the system's temp dir may be one the sandbox
            // keeps apart from the workspace.
            workspace: tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap(),
            home: tempfile::tempdir().unwrap(),
            hermes_home: tempfile::tempdir().unwrap(),
        };
        std::fs::write(fixture.hermes_home.path().join("config.yaml"), config).unwrap();
        fixture
    }

    /// `hermes-tools serve` in the workspace, with none of the caller's settings that
    /// would override the config.yaml's terminal settings or make approvals ask.
    pub fn command(&self) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_hermes-tools"));
        command
            .arg("serve")
            .current_dir(self.workspace.path())
            .env("HOME", self.home.path())
            .env("HERMES_HOME", self.hermes_home.path())
            .env_remove("HERMES_INTERACTIVE")
            .env_remove("TERMINAL_ENV")
            .env_remove("TERMINAL_SANDBOX_MODE")
            .env_remove("TERMINAL_SANDBOX_BWRAP");
        command
    }

    /// [`ServeFixture::command`] with `env` set, as a session of task `t1`.
    pub fn serve_with(&self, env: &[(&str, &str)]) -> ServeSession {
        let mut command = self.command();
        command.envs(env.iter().copied());
        ServeSession::spawn(command, serde_json::json!({"task_id": "t1"}))
    }

    pub fn serve(&self) -> ServeSession {
        self.serve_with(&[])
    }
}

/// A `hermes-tools serve` whose calls go one at a time, each after the answer to the last,
/// so a later call sees what an earlier one left behind. `scope` (a JSON object such as
/// `{"task_id": "t1"}`) is merged into every request.
pub struct ServeSession {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    answers: std::sync::mpsc::Receiver<String>,
    sent: u32,
    scope: serde_json::Value,
}

impl ServeSession {
    /// Starts `command` (the binary with `serve` and its settings) on pipes.
    pub fn spawn(mut command: Command, scope: serde_json::Value) -> ServeSession {
        let serve_process::ServeProcess {
            child,
            stdin,
            lines,
        } = serve_process::ServeProcess::spawn(command.stderr(Stdio::null()));
        ServeSession {
            stdin,
            child,
            answers: lines,
            sent: 0,
            scope,
        }
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// One call; its decoded result.
    pub fn call(&mut self, tool: &str, args: serde_json::Value) -> serde_json::Value {
        let scope = self.scope.clone();
        self.call_in(&scope, tool, args)
    }

    /// One call with `scope` in place of the session's own.
    pub fn call_in(
        &mut self,
        scope: &serde_json::Value,
        tool: &str,
        args: serde_json::Value,
    ) -> serde_json::Value {
        let id = self.send(scope, tool, args);
        loop {
            let (answered, result) = self.next_answer();
            if answered == id {
                return result;
            }
        }
    }

    /// Sends one call without waiting; its id.
    pub fn send(
        &mut self,
        scope: &serde_json::Value,
        tool: &str,
        args: serde_json::Value,
    ) -> String {
        use std::io::Write;
        self.sent += 1;
        let id = format!("c{}", self.sent);
        let mut request = serde_json::json!({"id": id, "type": "function", "function": {"name": tool, "arguments": args.to_string()}});
        for (key, value) in scope.as_object().into_iter().flatten() {
            request[key.as_str()] = value.clone();
        }
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{request}").unwrap();
        stdin.flush().unwrap();
        id
    }

    /// The next answer to arrive: its call id and decoded result (a guard against
    /// hangs, not a timing assertion).
    pub fn next_answer(&mut self) -> (String, serde_json::Value) {
        loop {
            let raw = self
                .answers
                .recv_timeout(Duration::from_secs(120))
                .expect("an answer from serve");
            let answer: serde_json::Value = serde_json::from_str(&raw).unwrap();
            if let Some(id) = answer["tool_call_id"].as_str() {
                let result = serde_json::from_str(answer["content"].as_str().unwrap()).unwrap();
                return (id.to_string(), result);
            }
        }
    }
}

impl Drop for ServeSession {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}
