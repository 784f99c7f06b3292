//! What the tests of `hermes-tools mcp` share: the newest clients' venv, a server on
//! stdio or on loopback HTTP, and raw JSON-RPC lines.

#![allow(dead_code)] // each test binary uses its own part of this

use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_hermes-tools");
pub const TOKEN: &str = "test-token-for-loopback";

/// The venv with mcp 2.x and openai-agents (made by .ci/setup.d/10-python.sh).
pub fn newest_python() -> PathBuf {
    let venv = std::env::var_os("HERMES_TEST_VENV_NEWEST")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into()))
                .join(".cache/hermes-tools/test-venv-newest")
        });
    let python = venv.join("bin/python3");
    let probe = Command::new(&python)
        .args(["-c", "from mcp import Client; import agents.mcp"])
        .output();
    assert!(
        probe.as_ref().is_ok_and(|o| o.status.success()),
        "{} cannot import mcp 2.x and openai-agents: run `bash .ci/setup.d/10-python.sh`",
        python.display()
    );
    python
}

/// The JSON object a test client printed, after checking that it succeeded.
pub fn client_report(output: &std::process::Output) -> Value {
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "client failed: {}\n{stdout}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

/// Open descriptors and resident memory (kB) of process `pid`.
pub fn usage(pid: u32) -> (usize, u64) {
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let rss = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    (fds, rss)
}

/// Runs the Python client (mcp/tests/fixtures/py_library_client.py) against
/// `hermes-tools mcp ARGS` on stdio in `home`, with `steps`; its report.
pub fn walk(home: &Path, args: &[&str], steps: Value, envs: &[(&str, &str)]) -> Value {
    let mut target = vec![BIN, "mcp"];
    target.extend(args);
    walk_to(home, &target, steps, envs)
}

/// Runs the Python client against `target` (a command line, or a URL), with `steps`.
pub fn walk_to(home: &Path, target: &[&str], steps: Value, envs: &[(&str, &str)]) -> Value {
    let python = hermes_test_peers::python_with(&["mcp.client.stdio"]);
    let mut command = Command::new(python);
    command
        .arg(fixture("py_library_client.py"))
        .args(target)
        .arg("--")
        .arg(steps.to_string())
        .env("HERMES_HOME", home)
        .current_dir(home);
    for (key, value) in envs {
        command.env(key, value);
    }
    let output = command.output().unwrap();
    client_report(&output)
}

pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("mcp/tests/fixtures")
        .join(name)
}

/// [`home`] with `more` (YAML of other top-level keys) in its config.
pub fn home_with(more: &str) -> tempfile::TempDir {
    let home = home();
    let path = home.path().join("config.yaml");
    let mut config = std::fs::read_to_string(&path).unwrap();
    config.push_str(more);
    std::fs::write(path, config).unwrap();
    home
}

/// A home whose config keeps the OS sandbox off, so what is tested is the protocol.
pub fn home() -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.yaml"),
        "terminal:\n  sandbox:\n    mode: \"off\"\n",
    )
    .unwrap();
    home
}

const SKILL: &str = "---\nname: deploy-check\ndescription: Checks a deployment before it goes out.\n---\n# Deploy check\n\n1. Run the smoke tests.\n2. Read references/steps.md.\n";

/// A home with one skill (and a file of it), the OS sandbox off.
pub fn home_with_skill() -> tempfile::TempDir {
    let home = home();
    let skill = home.path().join("skills/devops/deploy-check");
    std::fs::create_dir_all(skill.join("references")).unwrap();
    std::fs::write(skill.join("SKILL.md"), SKILL).unwrap();
    std::fs::write(
        skill.join("references/steps.md"),
        "Roll back with `deploy --undo`.\n",
    )
    .unwrap();
    home
}

pub const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"elicitation":{}},"clientInfo":{"name":"soak","version":"1"}}}"#;
pub const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

/// `hermes-tools mcp --http` on a free loopback port, until dropped.
pub struct HttpServer {
    pub child: Child,
    pub port: u16,
    pub stderr: std::sync::Arc<std::sync::Mutex<String>>,
}

impl HttpServer {
    pub fn start(home: &Path, cwd: &Path, args: &[&str]) -> HttpServer {
        HttpServer::start_with(home, cwd, args, &[])
    }

    /// [`HttpServer::start`] with more environment variables.
    pub fn start_with(
        home: &Path,
        cwd: &Path,
        args: &[&str],
        envs: &[(&str, &Path)],
    ) -> HttpServer {
        let mut child = Command::new(BIN)
            .envs(envs.iter().copied())
            .arg("mcp")
            .args(args)
            .args(["--http", "127.0.0.1:0"])
            .env("HERMES_HOME", home)
            .env("HERMES_MCP_SERVER_TOKEN", TOKEN)
            .current_dir(cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap());
        let mut seen = String::new();
        let deadline = Instant::now() + Duration::from_secs(60);
        let port = loop {
            let mut line = String::new();
            if lines.read_line(&mut line).unwrap_or(0) == 0 || Instant::now() > deadline {
                let _ = child.kill();
                panic!("the server did not start: {seen}");
            }
            seen.push_str(&line);
            if let Some(rest) = line.split("http://127.0.0.1:").nth(1) {
                break rest
                    .trim_end_matches(|c: char| !c.is_ascii_digit())
                    .split('/')
                    .next()
                    .unwrap()
                    .parse()
                    .unwrap();
            }
        };
        let stderr = std::sync::Arc::new(std::sync::Mutex::new(seen));
        let sink = std::sync::Arc::clone(&stderr);
        std::thread::spawn(move || {
            let mut rest = String::new();
            for line in lines.lines().map_while(Result::ok) {
                rest.push_str(&line);
                rest.push('\n');
                sink.lock().unwrap().push_str(&format!("{line}\n"));
            }
        });
        HttpServer {
            child,
            port,
            stderr,
        }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// A new session, past `initialize` (with the elicitation capability) and
    /// `notifications/initialized`; its id.
    pub fn open_session(&self) -> String {
        let answer = self.request("POST", None, INITIALIZE);
        assert_eq!(answer.status, 200, "{} {}", answer.head, answer.body);
        let id = answer.header("mcp-session-id").expect("a session id");
        let notified = self.request("POST", Some(&id), INITIALIZED);
        assert_eq!(notified.status, 202, "{}", notified.head);
        id
    }

    /// One HTTP request on a fresh connection: the status code, the headers and the body.
    pub fn request(&self, method: &str, session: Option<&str>, body: &str) -> HttpAnswer {
        http_request(self.port, method, session, body)
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub struct HttpAnswer {
    pub status: u16,
    pub head: String,
    pub body: String,
}

impl HttpAnswer {
    pub fn header(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.trim()
                .eq_ignore_ascii_case(name)
                .then(|| value.trim().to_string())
        })
    }

    /// The JSON-RPC messages in the body (plain JSON or SSE `data:` lines).
    pub fn messages(&self) -> Vec<Value> {
        if let Ok(value) = serde_json::from_str(self.body.trim()) {
            return vec![value];
        }
        self.body
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str(d.trim()).ok())
            .collect()
    }
}

pub fn http_request(port: u16, method: &str, session: Option<&str>, body: &str) -> HttpAnswer {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let session = session
        .map(|s| format!("Mcp-Session-Id: {s}\r\nMcp-Protocol-Version: 2025-06-18\r\n"))
        .unwrap_or_default();
    write!(
        stream,
        "{method} /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n{session}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_string()
    };
    HttpAnswer {
        status,
        head: head.to_string(),
        body,
    }
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if size == 0 || rest.len() < size {
            break;
        }
        out.push_str(&rest[..size]);
        body = rest[size..].trim_start_matches("\r\n");
    }
    out
}

/// `hermes-tools mcp ARGS` on stdio, driven a line at a time; ended when dropped.
pub struct StdioSession {
    child: Child,
    stdin: Option<std::process::ChildStdin>,
    received: std::sync::mpsc::Receiver<Value>,
    /// Every message the server wrote so far, in order.
    pub seen: Vec<Value>,
}

impl StdioSession {
    pub fn start(home: &Path, args: &[&str]) -> StdioSession {
        let mut child = Command::new(BIN)
            .arg("mcp")
            .args(args)
            .env("HERMES_HOME", home)
            .current_dir(home)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let (sender, received) = std::sync::mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Ok(value) = serde_json::from_str::<Value>(&line) {
                    if sender.send(value).is_err() {
                        break;
                    }
                }
            }
        });
        StdioSession {
            child,
            stdin,
            received,
            seen: Vec::new(),
        }
    }

    pub fn send(&mut self, line: &Value) {
        let stdin = self.stdin.as_mut().expect("input still open");
        writeln!(stdin, "{line}").unwrap();
    }

    /// Collects what the server writes until `done` says enough (or 60 s pass).
    pub fn wait_for(&mut self, done: impl Fn(&[Value]) -> bool) -> &[Value] {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !done(&self.seen) && Instant::now() < deadline {
            if let Ok(value) = self.received.recv_timeout(Duration::from_millis(50)) {
                self.seen.push(value);
            }
        }
        &self.seen
    }

    /// Collects what the server writes for `how_long`.
    pub fn listen(&mut self, how_long: Duration) {
        let until = Instant::now() + how_long;
        while let Some(left) = until.checked_duration_since(Instant::now()) {
            if let Ok(value) = self.received.recv_timeout(left) {
                self.seen.push(value);
            }
        }
    }

    /// Closes the server's input and collects what it writes until its output ends
    /// (or 60 s pass); how the process exited.
    pub fn close_and_read_to_end(&mut self) -> std::process::ExitStatus {
        self.stdin.take();
        let deadline = Instant::now() + Duration::from_secs(60);
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.received.recv_timeout(left) {
                Ok(value) => self.seen.push(value),
                Err(_) => break,
            }
        }
        self.child.wait().unwrap()
    }

    /// Sends a request and waits for its answer.
    pub fn request(&mut self, line: &Value) -> Value {
        self.send(line);
        let id = line["id"].as_i64().expect("a request with a numeric id");
        self.wait_for(|seen| answer(seen, id).is_some());
        answer(&self.seen, id)
            .cloned()
            .unwrap_or_else(|| panic!("no answer to {line}: {:?}", self.seen))
    }
}

impl Drop for StdioSession {
    fn drop(&mut self) {
        self.stdin.take();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `hermes-tools mcp ARGS` on stdio, writes `lines` and collects every line it
/// answers until `done` says enough (or 60 s pass).
pub fn stdio_exchange(
    home: &Path,
    args: &[&str],
    lines: &[Value],
    done: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    let mut session = StdioSession::start(home, args);
    for line in lines {
        session.send(line);
    }
    session.wait_for(done).to_vec()
}

/// The answer to request `id` among `messages`.
pub fn answer(messages: &[Value], id: i64) -> Option<&Value> {
    messages
        .iter()
        .find(|m| m["id"] == id && (m.get("result").is_some() || m.get("error").is_some()))
}
