//! `modal`, `daytona` and `vercel_sandbox` against local stand-ins.
//!
//! modal: through `hermes-tools serve` and the SDK bridge (tools/terminal/env/modal_bridge.py)
//! with a STAND-IN `modal` module first on the bridge's PYTHONPATH
//! (tests/fakes/modal_standin: the SDK's public synchronous API with its published
//! signatures; Modal's service cannot be reached from here). `live_modal` uses the real
//! SDK and service when `MODAL_TOKEN_ID` is set (ignored otherwise).
//!
//! daytona: end to end through `hermes-tools serve`, against tests/fakes/daytona_api.py
//! (the real service cannot be reached from here). The fake is written from Daytona's
//! published API definition and is strict; Daytona's own Python SDK runs against the same
//! fake in `the_official_daytona_sdk_passes_the_fake`, so a fake that drifts from the
//! real API fails there. `live_daytona` runs against the real service when
//! `DAYTONA_API_KEY` is set (ignored otherwise).
//!
//! These servers are STAND-INS (fakes), not the providers: the real APIs cannot be reached
//! from here. Each fake follows the request/response shapes the backend implements
//! (Daytona's sandbox + toolbox REST API, Vercel's Sandbox REST API, and the JSON sandbox
//! gateway the modal backend speaks) and "executes" a command by running it with the
//! local bash, so the whole path (wrapping, shell state, output handling) is exercised.

use hermes_runtime::{Registry, ToolCall, ToolContext};
use hermes_tools::tools::terminal;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use tempfile::TempDir;

mod sandbox_fakes;
use sandbox_fakes::{Fake, Serve};

#[derive(Debug, Clone)]
struct Request {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: Value,
}

impl Request {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

type Handler = Arc<dyn Fn(&Request) -> (u16, String) + Send + Sync>;

struct InlineFake {
    url: String,
    log: Arc<Mutex<Vec<Request>>>,
}

fn serve(handler: Handler) -> InlineFake {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let log = Arc::new(Mutex::new(Vec::new()));
    let log2 = Arc::clone(&log);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let handler = Arc::clone(&handler);
            let log = Arc::clone(&log2);
            std::thread::spawn(move || connection(stream, handler, log));
        }
    });
    InlineFake { url, log }
}

fn connection(stream: TcpStream, handler: Handler, log: Arc<Mutex<Vec<Request>>>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let method = parts.next().unwrap_or("").to_string();
        let path = parts.next().unwrap_or("").to_string();
        let mut headers = Vec::new();
        let mut length = 0usize;
        loop {
            let mut h = String::new();
            reader.read_line(&mut h).unwrap();
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            let (k, v) = h.split_once(':').unwrap();
            if k.eq_ignore_ascii_case("content-length") {
                length = v.trim().parse().unwrap();
            }
            headers.push((k.trim().to_string(), v.trim().to_string()));
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        let body = if body.is_empty() { Value::Null } else { serde_json::from_slice(&body).unwrap_or(Value::Null) };
        let req = Request { method, path, headers, body };
        log.lock().unwrap().push(req.clone());
        let (status, text) = handler(&req);
        let response = format!(
            "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{text}",
            text.len()
        );
        if writer.write_all(response.as_bytes()).is_err() {
            return;
        }
    }
}

/// Runs an argument vector: (stdout, stderr, exit code).
fn argv(cmd: &str, args: &[Value]) -> (String, String, i32) {
    let out = std::process::Command::new(cmd).args(args.iter().map(|a| a.as_str().unwrap())).output().unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code().unwrap_or(-1),
    )
}

struct Client {
    ctx: ToolContext,
    registry: Registry,
    task: String,
    _home: TempDir,
}

fn client(config: &str, task: &str) -> Client {
    let home = TempDir::new().unwrap();
    std::fs::write(home.path().join("config.yaml"), config).unwrap();
    let task = format!("{task}-{}", std::process::id());
    let ctx = ToolContext::builder().task_id(&task).hermes_home(home.path()).build();
    let registry = Registry::with_home(&hermes_tools::CATALOG, home.path().to_path_buf());
    Client { ctx, registry, task, _home: home }
}

impl Client {
    fn call(&self, args: Value) -> Value {
        let raw = self.registry.handle_function_call(&ToolCall::new("terminal", args), &self.ctx);
        serde_json::from_str(&raw).unwrap_or_else(|e| panic!("not JSON ({e}): {raw}"))
    }
}

/// The common checks: output, exit code, cwd + export persistence, no background.
fn exercise(c: &Client) {
    let r = c.call(json!({"command": "echo hello; echo oops >&2; exit 5"}));
    assert_eq!(r["output"], "hello\noops", "{r}");
    assert_eq!(r["exit_code"], 5);
    let r = c.call(json!({"command": "cd /tmp && export VIA_HTTP=yes"}));
    assert_eq!(r["cwd"], "/tmp", "{r}");
    let r = c.call(json!({"command": "pwd; echo $VIA_HTTP"}));
    assert_eq!(r["output"], "/tmp\nyes");
    let r = c.call(json!({"command": "sleep 1", "background": true}));
    assert_eq!(r["status"], "error");
    assert!(r["error"].as_str().unwrap().contains("not supported"), "{r}");
    // Isolated backend: dangerous commands need no approval, only deny rules apply.
    let r = c.call(json!({"command": "rm -rf /tmp/hermes-http-fake-nonexistent-dir"}));
    assert_eq!(r["exit_code"], 0, "{r}");
}

#[test]
fn vercel_sandbox_against_a_fake_api() {
    let results: Arc<Mutex<Vec<(String, i32)>>> = Arc::default();
    let r2 = Arc::clone(&results);
    let fake = serve(Arc::new(move |req: &Request| {
        let path = req.path.split('?').next().unwrap().to_string();
        let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        match (req.method.as_str(), parts.as_slice()) {
            ("POST", ["v1", "sandboxes"]) => (200, json!({"sandbox": {"id": "sbx_42", "status": "running"}}).to_string()),
            ("POST", ["v1", "sandboxes", "sbx_42", "cmd"]) => {
                let (out, err, code) = argv(req.body["command"].as_str().unwrap(), req.body["args"].as_array().unwrap());
                let mut all = r2.lock().unwrap();
                all.push((out + &err, code));
                (200, json!({"command": {"id": format!("cmd_{}", all.len() - 1), "sandboxId": "sbx_42"}}).to_string())
            }
            ("GET", ["v1", "sandboxes", "sbx_42", "cmd", id]) => {
                let n: usize = id.trim_start_matches("cmd_").parse().unwrap();
                let code = r2.lock().unwrap()[n].1;
                (200, json!({"command": {"id": id, "exitCode": code}}).to_string())
            }
            ("GET", ["v1", "sandboxes", "sbx_42", "cmd", id, "logs"]) => {
                let n: usize = id.trim_start_matches("cmd_").parse().unwrap();
                let out = r2.lock().unwrap()[n].0.clone();
                let lines: Vec<String> = out
                    .split_inclusive('\n')
                    .map(|chunk| json!({"stream": "stdout", "data": chunk}).to_string())
                    .collect();
                (200, lines.join("\n"))
            }
            ("POST", ["v1", "sandboxes", "sbx_42", "stop"]) => (200, json!({"sandbox": {"id": "sbx_42"}}).to_string()),
            _ => (404, json!({"error": {"code": "not_found"}}).to_string()),
        }
    }));
    let c = client(
        &format!(
            "terminal:\n  backend: vercel_sandbox\n  vercel_api_url: {}\n  vercel_token: vt-test\n  vercel_team_id: team_7\n  vercel_runtime: python3.13\n  cwd: /tmp\n",
            fake.url
        ),
        "terminal-vercel",
    );
    exercise(&c);
    terminal::cleanup_task(&c.task);
    let log = fake.log.lock().unwrap().clone();
    assert_eq!(log[0].path, "/v1/sandboxes?teamId=team_7");
    assert_eq!(log[0].header("authorization"), Some("Bearer vt-test"));
    assert_eq!(log[0].body["runtime"], "python3.13");
    let cmd = log.iter().find(|r| r.path.starts_with("/v1/sandboxes/sbx_42/cmd?")).unwrap();
    assert_eq!(cmd.body["command"], "bash");
    assert!(log.iter().any(|r| r.method == "GET" && r.path.contains("wait=true") && r.path.contains("teamId=team_7")));
    assert_eq!(log.last().unwrap().path, "/v1/sandboxes/sbx_42/stop?teamId=team_7");
}

// ------------------------------------------------------------------ daytona

fn daytona_config(fake: &Fake, key: &str, extra: &str) -> String {
    format!(
        "terminal:\n  backend: daytona\n  daytona_api_url: {}/api\n  daytona_api_key: {key}\n  daytona_image: img:9\n{extra}",
        fake.url
    )
}

#[test]
fn daytona_runs_commands_in_a_sandbox_and_deletes_it() {
    let fake = Fake::start("daytona_api.py", &["dtn-test-key"]);
    let mut serve = Serve::start(&daytona_config(&fake, "dtn-test-key", ""));
    let r = serve.terminal(json!({"command": "echo hello; echo oops >&2; exit 5"}));
    assert_eq!(r["output"], "hello\noops", "{r}");
    assert_eq!(r["exit_code"], 5);
    let r = serve.terminal(json!({"command": "mkdir -p /tmp/work && cd /tmp/work && export VIA_HTTP=yes"}));
    assert_eq!(r["cwd"], "/tmp/work", "{r}");
    let r = serve.terminal(json!({"command": "pwd; echo $VIA_HTTP"}));
    assert_eq!(r["output"], "/tmp/work\nyes", "{r}");
    let r = serve.terminal(json!({"command": "sleep 1", "background": true}));
    assert_eq!(r["status"], "error");
    assert!(r["error"].as_str().unwrap().contains("not supported"), "{r}");

    sandbox_fakes::assert_timeout_kills_the_remote_command(&mut serve);

    let sandboxes = fake.sandboxes();
    assert_eq!(sandboxes.len(), 1, "{sandboxes:?}");
    let create = &sandboxes[0]["create"];
    assert_eq!(create["buildInfo"]["dockerfileContent"], "FROM img:9\n");
    assert!(create.get("image").is_none() && create.get("snapshot").is_none(), "{create}");
    // The default disk setting (50 GB) is clamped to the default per-sandbox limit.
    assert_eq!(create["disk"], 10);
    assert_eq!(create["cpu"], 1);
    assert!(create["labels"]["hermes-task"].as_str().unwrap().starts_with("hermes-"));
    let executes: Vec<Value> =
        fake.requests().into_iter().filter(|r| r["path"].as_str().unwrap().ends_with("/process/execute")).collect();
    let first: Value = serde_json::from_str(executes[0]["body"].as_str().unwrap()).unwrap();
    assert!(first["timeout"].as_u64().unwrap() > 0, "a real server-side timeout: {first}");
    assert!(executes.iter().all(|r| r["path"].as_str().unwrap().starts_with("/toolbox/")), "{executes:?}");

    serve.finish();
    let sandboxes = fake.sandboxes();
    assert_eq!(sandboxes[0]["state"], "destroyed", "the sandbox is deleted at exit: {sandboxes:?}");
}

#[test]
fn daytona_from_a_snapshot_sends_no_resources() {
    let fake = Fake::start("daytona_api.py", &["dtn-key-2"]);
    let mut serve = Serve::start(&daytona_config(&fake, "dtn-key-2", "  daytona_snapshot: daytona-small\n"));
    let r = serve.terminal(json!({"command": "echo from-snapshot"}));
    assert_eq!(r["output"], "from-snapshot", "{r}");
    serve.finish();
    let sandboxes = fake.sandboxes();
    let create = &sandboxes[0]["create"];
    assert_eq!(create["snapshot"], "daytona-small");
    for field in ["cpu", "memory", "disk", "buildInfo"] {
        assert!(create.get(field).is_none(), "{field} sent with a snapshot: {create}");
    }
    assert_eq!(sandboxes[0]["state"], "destroyed");
}

#[test]
fn daytona_refused_credentials_are_degraded_with_a_hint() {
    let fake = Fake::start("daytona_api.py", &["the-right-key"]);
    let mut serve = Serve::start(&daytona_config(&fake, "wrong", ""));
    let r = serve.terminal(json!({"command": "echo x"}));
    sandbox_fakes::assert_refused_credentials(&r, "HTTP 401");
    serve.finish();
}

#[test]
fn the_official_daytona_sdk_passes_the_fake() {
    let fake = Fake::start("daytona_api.py", &["sdk-key"]);
    let python = hermes_test_peers::python_with(&["daytona", "daytona_api_client"]);
    let out = std::process::Command::new(python)
        .arg(sandbox_fakes::fakes_dir().join("daytona_sdk_check.py"))
        .args([format!("{}/api", fake.url), "sdk-key".to_string()])
        // The SDK's event stream (socket.io) has no stand-in; it falls back to polling.
        .env("DAYTONA_USE_DEPRECATED_POLLING", "true")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && stdout.contains("sdk ok"), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
#[ignore = "talks to the real Daytona service: set DAYTONA_API_KEY and run with --ignored"]
fn live_daytona() {
    let key = std::env::var("DAYTONA_API_KEY").expect("DAYTONA_API_KEY");
    sandbox_fakes::live_round(Serve::start(&format!(
        "terminal:\n  backend: daytona\n  daytona_api_key: {key}\n  daytona_image: debian:12-slim\n"
    )));
}

// ------------------------------------------------------------------ modal

fn modal_config(python: &str, extra: &str) -> String {
    format!("terminal:\n  backend: modal\n  modal_python: {python}\n  modal_image: python:3.11-slim\n{extra}")
}

#[test]
fn modal_runs_commands_through_the_sdk_bridge() {
    let state = TempDir::new().unwrap();
    let python = hermes_test_peers::python_with(&[]);
    let standin = sandbox_fakes::fakes_dir().join("modal_standin");
    let mut serve = Serve::start_with_env(
        &modal_config(python.to_str().unwrap(), "  modal_token_id: ak-1\n  modal_token_secret: as-2\n"),
        &[("PYTHONPATH", standin.to_str().unwrap()), ("MODAL_STANDIN_STATE", state.path().to_str().unwrap())],
    );
    let r = serve.terminal(json!({"command": "echo hello; echo oops >&2; exit 5"}));
    assert_eq!(r["output"], "hello\noops", "{r}");
    assert_eq!(r["exit_code"], 5);
    let r = serve.terminal(json!({"command": "mkdir -p /tmp/m && cd /tmp/m && export VIA_SDK=yes"}));
    assert_eq!(r["cwd"], "/tmp/m", "{r}");
    let r = serve.terminal(json!({"command": "pwd; echo $VIA_SDK"}));
    assert_eq!(r["output"], "/tmp/m\nyes", "{r}");
    sandbox_fakes::assert_timeout_kills_the_remote_command(&mut serve);
    serve.finish();

    let calls: Vec<Value> = std::fs::read_to_string(state.path().join("calls.log"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let names: Vec<&str> = calls.iter().map(|c| c["call"].as_str().unwrap()).collect();
    assert_eq!(&names[..3], ["App.lookup", "Image.from_registry", "Sandbox.create"], "{names:?}");
    assert_eq!(calls[0]["name"], "hermes-agent");
    assert_eq!(calls[0]["create_if_missing"], true);
    assert_eq!(calls[1]["tag"], "python:3.11-slim");
    assert_eq!(calls[2]["timeout"], 3600);
    assert_eq!(names.last(), Some(&"Sandbox.terminate"), "the sandbox is terminated at exit: {names:?}");
    let exec = calls.iter().find(|c| c["call"] == "Sandbox.exec").unwrap();
    assert_eq!(exec["argv"][0], "bash");
    assert!(exec["timeout"].as_u64().unwrap() > 0, "{exec}");
}

#[test]
fn modal_availability_names_what_is_missing() {
    let empty_home = TempDir::new().unwrap();
    let home = empty_home.path().to_str().unwrap();
    let mut serve =
        Serve::start_with_env(&modal_config("/nonexistent/python3", ""), &[("HOME", home), ("MODAL_TOKEN_ID", "")]);
    let r = serve.terminal(json!({"command": "true"}));
    assert_eq!(r["status"], "disabled", "{r}");
    let error = r["error"].as_str().unwrap();
    assert!(error.contains("TERMINAL_MODAL_PYTHON /nonexistent/python3 does not exist"), "{error}");
    assert!(error.contains("MODAL_TOKEN_ID and MODAL_TOKEN_SECRET"), "{error}");
    assert!(error.contains(&format!("{home}/.modal.toml")), "{error}");
    serve.finish();

    // A ~/.modal.toml is enough for the credentials.
    std::fs::write(empty_home.path().join(".modal.toml"), "[default]\ntoken_id = \"ak\"\ntoken_secret = \"as\"\n").unwrap();
    let mut serve = Serve::start_with_env(&modal_config("/nonexistent/python3", ""), &[("HOME", home)]);
    let r = serve.terminal(json!({"command": "true"}));
    let error = r["error"].as_str().unwrap();
    assert!(!error.contains("MODAL_TOKEN_ID"), "{error}");
    serve.finish();
}

#[test]
fn modal_refused_credentials_come_back_with_a_hint() {
    let state = TempDir::new().unwrap();
    let python = hermes_test_peers::python_with(&[]);
    let standin = sandbox_fakes::fakes_dir().join("modal_standin");
    let mut serve = Serve::start_with_env(
        &modal_config(python.to_str().unwrap(), "  modal_token_id: ak-wrong\n  modal_token_secret: as-2\n"),
        &[
            ("PYTHONPATH", standin.to_str().unwrap()),
            ("MODAL_STANDIN_STATE", state.path().to_str().unwrap()),
            ("MODAL_STANDIN_ACCEPTED_TOKEN_ID", "ak-1"),
        ],
    );
    let r = serve.terminal(json!({"command": "true"}));
    sandbox_fakes::assert_refused_credentials(&r, "AuthError");
    serve.finish();
}

#[test]
#[ignore = "talks to the real Modal service (and installs the modal package into the Hermes home): set MODAL_TOKEN_ID and MODAL_TOKEN_SECRET and run with --ignored"]
fn live_modal() {
    std::env::var("MODAL_TOKEN_ID").expect("MODAL_TOKEN_ID");
    sandbox_fakes::live_round(Serve::start("terminal:\n  backend: modal\n  modal_image: python:3.11-slim\n"));
}
