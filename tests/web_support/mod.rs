//! A small HTTP/1.1 server on loopback for the web tool tests: each request is
//! answered by a closure of the test (pages, redirects, slow or huge bodies, the
//! provider fakes).
#![allow(dead_code)]

pub mod fakes;

use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};

#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    /// Path and query, as sent.
    pub target: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    pub fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or("")
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Option<Value> {
        serde_json::from_slice(&self.body).ok()
    }

    pub fn query(&self, name: &str) -> Option<String> {
        let query = self.target.split_once('?')?.1;
        url_decoded_pairs(query)
            .into_iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v)
    }
}

fn url_decoded_pairs(query: &str) -> Vec<(String, String)> {
    let decode = |s: &str| {
        let s = s.replace('+', " ");
        let bytes = s.as_bytes();
        let mut out = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'%' && i + 2 < bytes.len() {
                if let Ok(b) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                    out.push(b);
                    i += 3;
                    continue;
                }
            }
            out.push(bytes[i]);
            i += 1;
        }
        String::from_utf8_lossy(&out).into_owned()
    };
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (n, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(n), decode(v))
        })
        .collect()
}

/// What the server writes back.
pub type Reply = Box<dyn FnOnce(&mut TcpStream) + Send>;

pub fn respond(status: u16, content_type: &str, body: impl Into<Vec<u8>>) -> Reply {
    let body = body.into();
    let content_type = content_type.to_string();
    Box::new(move |stream| {
        let head = format!(
            "HTTP/1.1 {status} X\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        let _ = stream.write_all(head.as_bytes());
        let _ = stream.write_all(&body);
    })
}

pub fn json_reply(status: u16, body: &Value) -> Reply {
    respond(status, "application/json", body.to_string())
}

pub fn redirect(to: &str) -> Reply {
    let to = to.to_string();
    Box::new(move |stream| {
        let _ = stream.write_all(
            format!("HTTP/1.1 302 Found\r\nLocation: {to}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        );
    })
}

/// A server on a free loopback port; every request is recorded.
pub struct Server {
    pub port: u16,
    pub requests: Arc<Mutex<Vec<Request>>>,
    ip: String,
}

impl Server {
    pub fn url(&self, path: &str) -> String {
        format!("http://{}:{}{path}", self.ip, self.port)
    }

    pub fn start(route: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> Server {
        Server::start_at("127.0.0.1", route)
    }

    /// A server on a free port of `ip`, an address of this machine (or namespace).
    pub fn start_at(ip: &str, route: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> Server {
        let listener = TcpListener::bind((ip, 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (route, seen) = (Arc::new(route), Arc::clone(&requests));
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let (route, seen) = (Arc::clone(&route), Arc::clone(&seen));
                std::thread::spawn(move || {
                    let Some(request) = read_request(&mut stream) else {
                        return;
                    };
                    seen.lock().unwrap().push(request.clone());
                    route(&request)(&mut stream);
                });
            }
        });
        Server {
            port,
            requests,
            ip: ip.to_string(),
        }
    }
}

fn read_request(stream: &mut TcpStream) -> Option<Request> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let (method, target) = (parts.next()?.to_string(), parts.next()?.to_string());
    let mut headers = Vec::new();
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).ok()?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            headers.push((name.trim().to_string(), value.trim().to_string()));
        }
    }
    let length: usize = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(Request {
        method,
        target,
        headers,
        body,
    })
}

/// The binary with `HERMES_HOME` and `HOME` set to `home`, extra variables, stdin.
pub fn run(home: &Path, args: &[&str], envs: &[(&str, &str)], stdin: &str) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_hermes-tools"));
    command
        .args(args)
        .env("HERMES_HOME", home)
        .env("HOME", home)
        .current_dir(home)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for var in [
        "HERMES_ALLOW_PRIVATE_URLS",
        "SEARXNG_URL",
        "TAVILY_API_KEY",
        "EXA_API_KEY",
        "PARALLEL_API_KEY",
        "FIRECRAWL_API_KEY",
        "FIRECRAWL_API_URL",
        "BRAVE_SEARCH_API_KEY",
    ] {
        command.env_remove(var);
    }
    for (name, value) in envs {
        command.env(name, value);
    }
    let mut child = command.spawn().expect("the binary starts");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// `hermes-tools call NAME ARGS` with `envs`, its result parsed.
pub fn call(home: &Path, name: &str, args: &Value, envs: &[(&str, &str)]) -> Value {
    let out = run(home, &["call", name, &args.to_string()], envs, "");
    assert!(
        out.status.success(),
        "call {name} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{name} printed non-JSON {stdout:?}: {e}"))
}

/// A HERMES_HOME whose config.yaml is `yaml`.
pub fn home_with(yaml: &str) -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.yaml"), yaml).unwrap();
    home
}

pub const OPEN_LOOPBACK: &str = "security:\n  allow_private_urls: true\n";

/// A certificate authority and a `localhost` certificate it signed, made with openssl in
/// `dir`: (the authority's PEM, the server's certificate, the server's key).
pub fn test_authority(
    dir: &std::path::Path,
) -> (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf) {
    let openssl = |args: &[&str]| {
        let out = std::process::Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("openssl runs (.ci/setup.d/50-web.sh installs it)");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=hermes test authority",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
    ]);
    openssl(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=localhost",
    ]);
    std::fs::write(
        dir.join("server.ext"),
        "subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\n\
         keyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    openssl(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.pem",
        "-days",
        "2",
        "-extfile",
        "server.ext",
    ]);
    (
        dir.join("ca.pem"),
        dir.join("server.pem"),
        dir.join("server.key"),
    )
}

/// A free TCP port on loopback.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `hermes-tools mcp --toolsets TOOLSETS` on stdio: one `tools/call` of `tool` with a
/// `progressToken`; the progress messages that came before its answer (the server's
/// periodic "is running" notes left out) and the answer's text.
pub fn mcp_call_with_progress(
    home: &Path,
    toolsets: &str,
    tool: &str,
    args: &serde_json::Value,
) -> (Vec<String>, String) {
    use std::io::{BufRead, Write};
    let mut child = Command::new(env!("CARGO_BIN_EXE_hermes-tools"))
        .args(["mcp", "--toolsets", toolsets])
        .env("HERMES_HOME", home)
        .env("HOME", home)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the binary starts");
    let mut stdin = child.stdin.take().unwrap();
    for line in [
        serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}),
        serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": tool, "arguments": args, "_meta": {"progressToken": "steps"}}}),
    ] {
        writeln!(stdin, "{line}").unwrap();
    }
    stdin.flush().unwrap();
    let mut steps = Vec::new();
    let mut answer = String::new();
    for line in std::io::BufReader::new(child.stdout.take().unwrap()).lines() {
        let message: serde_json::Value = serde_json::from_str(&line.unwrap()).unwrap();
        if message["method"] == "notifications/progress" {
            let text = message["params"]["message"].as_str().unwrap_or("");
            if !text.contains("is running (") {
                steps.push(text.to_string());
            }
        }
        if message["id"] == 2 {
            answer = message["result"]["content"][0]["text"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            break;
        }
    }
    drop(stdin);
    let _ = child.wait();
    (steps, answer)
}
