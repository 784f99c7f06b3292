//! `hermes-tools mcp --http`: a bearer token on every request, JSON-RPC errors for
//! malformed bodies, a cap on sessions. All traffic stays on 127.0.0.1.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

struct McpServer {
    child: Child,
    port: u16,
    stderr: Vec<String>,
}

impl Drop for McpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts the server on a loopback port and waits for its "listening" line.
fn start(home: &std::path::Path, token_env: Option<&str>) -> McpServer {
    let port = free_port();
    let mut command = Command::new(env!("CARGO_BIN_EXE_hermes-tools"));
    command
        .args([
            "mcp",
            "--toolsets",
            "file,terminal",
            "--http",
            &format!("127.0.0.1:{port}"),
        ])
        .env("HERMES_HOME", home)
        .env_remove("HERMES_MCP_SERVER_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if let Some(token) = token_env {
        command.env("HERMES_MCP_SERVER_TOKEN", token);
    }
    // Owned by the guard from the start, so a failed start still kills the server.
    let mut server = McpServer {
        child: command.spawn().unwrap(),
        port,
        stderr: Vec::new(),
    };
    let mut reader = BufReader::new(server.child.stderr.take().unwrap());
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap() == 0 {
            break;
        }
        let listening = line.contains("streamable HTTP on");
        server.stderr.push(line);
        if listening {
            // Keep draining so the server never blocks on a full stderr pipe.
            std::thread::spawn(move || std::io::copy(&mut reader, &mut std::io::sink()));
            return server;
        }
    }
    panic!("the MCP server did not start: {:?}", server.stderr);
}

struct Answer {
    status: u16,
    head: String,
    body: String,
}

impl Answer {
    /// The JSON-RPC message of the body (plain JSON or the last SSE `data:` line).
    fn message(&self) -> Value {
        let text = self
            .body
            .lines()
            .filter_map(|l| l.strip_prefix("data: ").or_else(|| l.strip_prefix("data:")))
            .rfind(|d| d.trim_start().starts_with('{'))
            .unwrap_or(&self.body);
        serde_json::from_str(text.trim())
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}\n{}", self.head, self.body))
    }

    fn header(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|l| {
            let (key, value) = l.split_once(':')?;
            key.eq_ignore_ascii_case(name)
                .then(|| value.trim().to_string())
        })
    }
}

fn post(port: u16, headers: &[(&str, &str)], body: &str) -> Answer {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut request = format!(
        "POST /mcp HTTP/1.1\r\nHost: localhost:{port}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream.write_all(request.as_bytes()).unwrap();
    let mut raw = String::new();
    let _ = stream.read_to_string(&mut raw);
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    Answer {
        status,
        head: head.to_string(),
        body: body.to_string(),
    }
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

#[test]
fn requests_without_the_generated_token_are_refused() {
    let home = tempfile::tempdir().unwrap();
    let server = start(home.path(), None);
    let path = home.path().join("mcp_server_token");
    let token = std::fs::read_to_string(&path).unwrap();
    assert_eq!(token.len(), 64, "{token}");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert!(
        server.stderr.iter().any(|l| l.contains(&token)),
        "the token is printed on stderr: {:?}",
        server.stderr
    );

    let missing = post(server.port, &[], INITIALIZE);
    assert_eq!(missing.status, 401, "{}", missing.head);
    assert!(
        missing
            .header("www-authenticate")
            .is_some_and(|v| v.starts_with("Bearer")),
        "{}",
        missing.head
    );
    assert!(missing.message()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("Authorization"));
    // One character off: the last one changed to something it is not.
    let last = if token.ends_with('0') { '1' } else { '0' };
    let wrong = post(
        server.port,
        &[("Authorization", &bearer(&format!("{}{last}", &token[..63])))],
        INITIALIZE,
    );
    assert_eq!(wrong.status, 401, "{}", wrong.head);
    let basic = post(
        server.port,
        &[("Authorization", &format!("Basic {token}"))],
        INITIALIZE,
    );
    assert_eq!(basic.status, 401, "{}", basic.head);

    let good = post(
        server.port,
        &[("Authorization", &bearer(&token))],
        INITIALIZE,
    );
    assert_eq!(good.status, 200, "{}\n{}", good.head, good.body);
    assert_eq!(
        good.message()["result"]["serverInfo"]["name"],
        "hermes-tools"
    );
    let session = good.header("mcp-session-id").expect("a session id");
    // A tool call without the token never runs, even inside a live session.
    let call = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"pwned.txt","content":"x"}}}"#;
    let sneaky = post(server.port, &[("Mcp-Session-Id", &session)], call);
    assert_eq!(sneaky.status, 401);
    assert!(!home.path().join("pwned.txt").exists());
}

#[test]
fn a_configured_token_is_used_from_the_environment_or_config() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.yaml"),
        "mcp_server:\n  token: from-config-yaml\n",
    )
    .unwrap();
    let server = start(home.path(), None);
    assert!(
        !home.path().join("mcp_server_token").exists(),
        "a configured token is not replaced"
    );
    assert_eq!(
        post(
            server.port,
            &[("Authorization", "Bearer from-config-yaml")],
            INITIALIZE
        )
        .status,
        200
    );
    drop(server);
    let server = start(home.path(), Some("from-the-environment"));
    assert_eq!(
        post(
            server.port,
            &[("Authorization", "Bearer from-config-yaml")],
            INITIALIZE
        )
        .status,
        401
    );
    assert_eq!(
        post(
            server.port,
            &[("Authorization", "Bearer from-the-environment")],
            INITIALIZE
        )
        .status,
        200
    );
}

#[test]
fn listening_beyond_loopback_needs_a_configured_token() {
    let home = tempfile::tempdir().unwrap();
    // Only to see it refuse: without a configured token nothing is bound.
    let output = Command::new(env!("CARGO_BIN_EXE_hermes-tools"))
        .args(["mcp", "--http", "0.0.0.0:0"])
        .env("HERMES_HOME", home.path())
        .env_remove("HERMES_MCP_SERVER_TOKEN")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains("refusing to listen on 0.0.0.0"), "{stderr}");
    assert!(stderr.contains("HERMES_MCP_SERVER_TOKEN"), "{stderr}");
    assert!(!home.path().join("mcp_server_token").exists());
}

#[test]
fn malformed_bodies_get_json_rpc_errors() {
    let home = tempfile::tempdir().unwrap();
    let server = start(home.path(), Some("t0ken"));
    let auth = [("Authorization", "Bearer t0ken")];
    let code = |body: &str| {
        let answer = post(server.port, &auth, body);
        (answer.status, answer.message()["error"]["code"].as_i64())
    };
    assert_eq!(code("{not json"), (400, Some(-32700)));
    assert_eq!(code("[]"), (400, Some(-32600)));
    assert_eq!(code("42"), (400, Some(-32600)));
    assert_eq!(
        code(r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#),
        (400, Some(-32600))
    );
    assert_eq!(
        code(r#"{"jsonrpc":"2.0","id":[1],"method":"ping"}"#),
        (400, Some(-32600))
    );
    assert_eq!(
        code(r#"{"jsonrpc":"2.0","id":1,"method":7}"#),
        (400, Some(-32600))
    );
    assert_eq!(
        code(r#"{"jsonrpc":"2.0","id":1,"method":"initialize"}"#).1,
        Some(-32602)
    );
    assert_eq!(
        code(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{}}}"#).1,
        Some(-32602)
    );
    assert_eq!(code(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file","arguments":"x"}}"#).1, Some(-32602));
    // The server still serves.
    assert_eq!(post(server.port, &auth, INITIALIZE).status, 200);
}

fn rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .unwrap()
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn sessions_are_capped_and_the_longest_idle_is_closed_first() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.yaml"),
        "mcp_server:\n  max_sessions: 3\n",
    )
    .unwrap();
    let server = start(home.path(), Some("t0ken"));
    let auth = ("Authorization", "Bearer t0ken");
    let open = || {
        post(server.port, &[auth], INITIALIZE)
            .header("mcp-session-id")
            .expect("a session id")
    };
    let list = |session: &str| {
        post(
            server.port,
            &[
                auth,
                ("Mcp-Session-Id", session),
                ("Mcp-Protocol-Version", "2025-06-18"),
            ],
            r#"{"jsonrpc":"2.0","id":5,"method":"tools/list"}"#,
        )
    };
    let first = open();
    let second = open();
    let third = open();
    assert_eq!(
        list(&first).status,
        200,
        "first is used, so second is now the longest idle"
    );
    let fourth = open();
    assert_eq!(
        list(&second).status,
        404,
        "the longest idle session was closed"
    );
    for live in [&first, &third, &fourth] {
        let answer = list(live);
        assert_eq!(answer.status, 200, "{}", answer.body);
        assert!(answer.message()["result"]["tools"]
            .as_array()
            .is_some_and(|t| !t.is_empty()));
    }
}

#[test]
fn thousands_of_initialize_requests_leave_memory_bounded() {
    let home = tempfile::tempdir().unwrap();
    let server = start(home.path(), Some("t0ken"));
    let auth = [("Authorization", "Bearer t0ken")];
    let pid = server.child.id();
    for _ in 0..200 {
        assert_eq!(post(server.port, &auth, INITIALIZE).status, 200);
    }
    let before = rss_kb(pid);
    for _ in 0..2_000 {
        assert_eq!(post(server.port, &auth, INITIALIZE).status, 200);
    }
    let after = rss_kb(pid);
    assert!(
        after < before + 20 * 1024,
        "RSS went from {before} kB to {after} kB over 2,000 sessions"
    );
    let answer = post(
        server.port,
        &auth,
        &json!({"jsonrpc": "2.0", "id": 9, "method": "ping"}).to_string(),
    );
    assert_ne!(answer.status, 401);
}

#[test]
fn each_session_is_its_own_task_unless_a_call_names_one() {
    let home = tempfile::tempdir().unwrap();
    let server = start(home.path(), Some("t0ken"));
    let auth = ("Authorization", "Bearer t0ken");
    let open = || {
        let session = post(server.port, &[auth], INITIALIZE)
            .header("mcp-session-id")
            .expect("a session id");
        let headers = [
            auth,
            ("Mcp-Session-Id", session.as_str()),
            ("Mcp-Protocol-Version", "2025-06-18"),
        ];
        assert_eq!(
            post(
                server.port,
                &headers,
                r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#
            )
            .status,
            202
        );
        session
    };
    let terminal = |session: &str, command: &str, meta: Value| {
        let body = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                          "params": {"name": "terminal", "arguments": {"command": command}, "_meta": meta}});
        let answer = post(
            server.port,
            &[
                auth,
                ("Mcp-Session-Id", session),
                ("Mcp-Protocol-Version", "2025-06-18"),
            ],
            &body.to_string(),
        );
        let text = answer.message()["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("{}", answer.body))
            .to_string();
        serde_json::from_str::<Value>(&text).unwrap()["output"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let (alpha, beta) = (open(), open());
    terminal(&alpha, "export MARK=alpha-was-here", json!({}));
    assert_eq!(
        terminal(&alpha, "echo \"[$MARK]\"", json!({})),
        "[alpha-was-here]"
    );
    assert_eq!(
        terminal(&beta, "echo \"[$MARK]\"", json!({})),
        "[]",
        "another session is another task"
    );
    terminal(
        &beta,
        "export MARK=shared",
        json!({"task_id": "shared-task"}),
    );
    assert_eq!(
        terminal(
            &alpha,
            "echo \"[$MARK]\"",
            json!({"task_id": "shared-task"})
        ),
        "[shared]",
        "a named task is shared"
    );
    assert_eq!(
        terminal(&alpha, "echo \"[$MARK]\"", json!({})),
        "[alpha-was-here]"
    );
}
