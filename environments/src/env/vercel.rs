//! The `vercel_sandbox` backend through Vercel's Sandbox REST API, the v2 routes its
//! official SDK (`@vercel/sandbox` 3.x) speaks, under `VERCEL_API_URL` (default
//! `https://vercel.com/api`), every request with `?teamId=`:
//!
//! - `POST /v2/sandboxes` (`projectId`, runtime `node22` / `node24` / `python3.13`,
//!   `resources.vcpus` from the container CPU setting clamped to 1..=8, a timeout) gives
//!   a session; `GET /v2/sandboxes/sessions/{id}` is polled until it is `running`;
//! - a command is `POST .../sessions/{id}/cmd` with `wait` and `logs`, answered as an
//!   `application/x-ndjson` stream: the command, its log lines, the finished command with
//!   its exit code. It carries a server-side timeout; the terminal's own timeout or a
//!   cancellation kills the command's process group (a second command) and the command
//!   itself (`.../cmd/{cmdId}/kill`);
//! - files come from `POST .../fs/read`; `POST .../stop` at cleanup.
//!
//! Credentials: `VERCEL_TOKEN` with `VERCEL_TEAM_ID` and `VERCEL_PROJECT_ID`, or a
//! `VERCEL_OIDC_TOKEN`, whose `owner_id` and `project_id` claims give the team and
//! project when those are not set.

use super::http::{url_encode, wrapped_script, Api};
use super::{remote_kill_script, EnvError, Environment, Running, ThreadRun};
use crate::config::TerminalConfig;
use crate::output::run_id;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub const RUNTIMES: &[&str] = &["node24", "node22", "python3.13"];
/// The most vCPUs a sandbox can have (2048 MB of memory come with each).
pub const MAX_VCPUS: u64 = 8;
/// The sandbox's lifetime, in milliseconds.
const SANDBOX_TIMEOUT_MS: u64 = 45 * 60 * 1000;
const START_WAIT: Duration = Duration::from_secs(300);
const NDJSON: &str = "application/x-ndjson";

/// The token and the team and project it acts for.
#[derive(Debug, Clone, PartialEq)]
pub struct Credentials {
    pub token: String,
    pub team_id: String,
    pub project_id: String,
}

/// The `owner_id` (team) and `project_id` claims of a Vercel OIDC token.
pub fn oidc_claims(token: &str) -> Result<(String, String), String> {
    use base64::Engine;
    let payload = token
        .split('.')
        .nth(1)
        .ok_or("it is not a JWT (header.payload.signature)")?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .map_err(|e| format!("its payload is not base64url: {e}"))?;
    let claims: Value =
        serde_json::from_slice(&bytes).map_err(|e| format!("its payload is not JSON: {e}"))?;
    let claim = |name: &str| {
        claims[name]
            .as_str()
            .map(str::to_owned)
            .ok_or(format!("it has no {name} claim"))
    };
    Ok((claim("owner_id")?, claim("project_id")?))
}

/// The credentials from the environment / config, or what is missing.
pub fn credentials(config: &TerminalConfig) -> Result<Credentials, String> {
    let team = config.secret("VERCEL_TEAM_ID", "vercel_team_id");
    let project = config.secret("VERCEL_PROJECT_ID", "vercel_project_id");
    if let Some(token) = config.secret("VERCEL_TOKEN", "vercel_token") {
        return match (team, project) {
            (Some(team_id), Some(project_id)) => Ok(Credentials { token, team_id, project_id }),
            (team, _) => Err(format!(
                "{} not set: an access token (VERCEL_TOKEN) needs both VERCEL_TEAM_ID and VERCEL_PROJECT_ID \
                 (a VERCEL_OIDC_TOKEN carries them)",
                if team.is_none() { "VERCEL_TEAM_ID is" } else { "VERCEL_PROJECT_ID is" }
            )),
        };
    }
    let Some(token) = config.secret("VERCEL_OIDC_TOKEN", "vercel_oidc_token") else {
        return Err("neither VERCEL_TOKEN nor VERCEL_OIDC_TOKEN is set".into());
    };
    let (team_id, project_id) = match (team, project) {
        (Some(team), Some(project)) => (team, project),
        (team, project) => {
            let (owner, claimed_project) = oidc_claims(&token)
                .map_err(|e| format!("VERCEL_OIDC_TOKEN cannot be read: {e}"))?;
            (team.unwrap_or(owner), project.unwrap_or(claimed_project))
        }
    };
    Ok(Credentials {
        token,
        team_id,
        project_id,
    })
}

pub fn availability(config: &TerminalConfig) -> Option<String> {
    if let Err(missing) = credentials(config) {
        return Some(missing);
    }
    if !RUNTIMES.contains(&config.vercel_runtime.as_str()) {
        return Some(format!(
            "TERMINAL_VERCEL_RUNTIME '{}' is not one of {}",
            config.vercel_runtime,
            RUNTIMES.join(", ")
        ));
    }
    None
}

/// The sandbox creation body.
pub fn create_body(config: &TerminalConfig, project_id: &str) -> Value {
    json!({
        "projectId": project_id,
        "runtime": config.vercel_runtime,
        "timeout": SANDBOX_TIMEOUT_MS,
        "resources": {"vcpus": (config.container_cpu.ceil() as u64).clamp(1, MAX_VCPUS)},
        "ports": [],
    })
}

pub struct VercelEnv {
    api: Api,
    pub session_id: String,
    team_query: String,
    /// The server-side bound of one command, in milliseconds.
    exec_timeout_ms: u64,
    counter: AtomicU64,
    cleaned: AtomicBool,
}

impl VercelEnv {
    pub fn start(config: &TerminalConfig, _task_id: &str) -> Result<VercelEnv, EnvError> {
        if let Some(missing) = availability(config) {
            return Err(EnvError::new(missing));
        }
        let creds = credentials(config).map_err(EnvError::new)?;
        let exec_timeout = config.max_foreground_timeout.max(config.timeout) + 60;
        let api = Api::new(
            "Vercel Sandbox",
            &config.vercel_api_url,
            &creds.token,
            Duration::from_secs(exec_timeout + 30),
        );
        let team_query = format!("teamId={}", url_encode(&creds.team_id));
        let created = api.json(
            "POST",
            &format!("/v2/sandboxes?{team_query}"),
            Some(&create_body(config, &creds.project_id)),
        )?;
        let session_id = created["session"]["id"]
            .as_str()
            .ok_or_else(|| {
                EnvError::new(format!("Vercel Sandbox API: no session.id in {created}"))
            })?
            .to_string();
        let env = VercelEnv {
            api,
            session_id,
            team_query,
            exec_timeout_ms: exec_timeout * 1000,
            counter: AtomicU64::new(0),
            cleaned: AtomicBool::new(false),
        };
        if let Err(e) =
            env.wait_until_running(created["session"]["status"].as_str().unwrap_or("pending"))
        {
            env.cleanup();
            return Err(e);
        }
        Ok(env)
    }

    fn path(&self, tail: &str) -> String {
        format!(
            "/v2/sandboxes/sessions/{}{tail}?{}",
            self.session_id, self.team_query
        )
    }

    fn wait_until_running(&self, first: &str) -> Result<(), EnvError> {
        let deadline = Instant::now() + START_WAIT;
        let mut status = first.to_string();
        let mut pause = Duration::from_millis(100);
        loop {
            match status.as_str() {
                "running" => return Ok(()),
                "pending" => {}
                other => {
                    return Err(EnvError::new(format!(
                        "Vercel sandbox {} is {other}, not running",
                        self.session_id
                    ))
                    .hint("retry; check the project's sandbox quota"))
                }
            }
            if Instant::now() >= deadline {
                return Err(EnvError::new(format!(
                    "Vercel sandbox {} is still pending after {}s",
                    self.session_id,
                    START_WAIT.as_secs()
                )));
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_secs(2));
            status = self.api.json("GET", &self.path(""), None)?["session"]["status"]
                .as_str()
                .unwrap_or("")
                .to_string();
        }
    }
}

/// Runs one command to its end through the x-ndjson stream: (stdout+stderr, exit code).
/// The command's id is published in `cmd_id` as soon as the first line names it.
fn run_streamed(
    api: &Api,
    path: &str,
    body: &Value,
    cmd_id: &Mutex<Option<String>>,
) -> Result<(Vec<u8>, i32), EnvError> {
    let (status, reader) = api.open("POST", path, Some(body), NDJSON)?;
    if !(200..300).contains(&status) {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut std::io::Read::take(reader, 2000), &mut text);
        return Err(EnvError::new(format!(
            "Vercel Sandbox API: the command was refused with HTTP {status}: {text}"
        )));
    }
    let mut output = Vec::new();
    for line in BufReader::new(reader).lines() {
        let line = line.map_err(|e| {
            EnvError::new(format!("Vercel Sandbox API: the command stream broke: {e}"))
        })?;
        let Ok(item) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        if let Some(command) = item.get("command") {
            if let Some(code) = command["exitCode"].as_i64() {
                return Ok((output, code as i32));
            }
            if let Some(id) = command["id"].as_str() {
                *cmd_id.lock().unwrap_or_else(|p| p.into_inner()) = Some(id.to_string());
            }
            continue;
        }
        match item["stream"].as_str() {
            Some("stdout" | "stderr") => {
                output.extend_from_slice(item["data"].as_str().unwrap_or("").as_bytes())
            }
            Some("error") => {
                return Err(EnvError::new(format!(
                    "Vercel Sandbox API: the command failed: {}",
                    item["data"]["message"].as_str().unwrap_or("no message")
                )))
            }
            _ => {}
        }
    }
    Err(EnvError::new(
        "Vercel Sandbox API: the command stream ended before the command finished",
    ))
}

fn command_body(script: String, timeout_ms: u64) -> Value {
    json!({"command": "bash", "args": ["-c", script], "env": {}, "sudo": false, "wait": true, "logs": true, "timeout": timeout_ms})
}

impl Environment for VercelEnv {
    fn backend(&self) -> &'static str {
        "vercel_sandbox"
    }

    fn run_bash(
        &self,
        script: &str,
        login: bool,
        stdin: Option<Vec<u8>>,
    ) -> Result<Box<dyn Running>, EnvError> {
        let rid = run_id(&self.counter);
        let body = command_body(
            wrapped_script(script, login, stdin.as_deref(), &rid),
            self.exec_timeout_ms,
        );
        let cmd_id: Arc<Mutex<Option<String>>> = Arc::default();
        let (api, killer) = (self.api.clone(), self.api.clone());
        let (run_path, published) = (self.path("/cmd"), Arc::clone(&cmd_id));
        let kill_command_path = self.path("/cmd");
        let session = self.session_id.clone();
        let team_query = self.team_query.clone();
        let cancel = move || {
            let kill_group = command_body(
                remote_kill_script("/tmp", &rid, Duration::from_secs(1)),
                30_000,
            );
            let _ = run_streamed(&killer, &kill_command_path, &kill_group, &Mutex::new(None));
            if let Some(id) = cmd_id.lock().unwrap_or_else(|p| p.into_inner()).clone() {
                let path = format!("/v2/sandboxes/sessions/{session}/cmd/{id}/kill?{team_query}");
                let _ = killer.send("POST", &path, Some(&json!({"signal": 9})));
            }
        };
        Ok(Box::new(ThreadRun::start(
            move || match run_streamed(&api, &run_path, &body, &published) {
                Ok(result) => result,
                Err(e) => (format!("[vercel_sandbox error] {e}").into_bytes(), -1),
            },
            Some(Box::new(cancel)),
        )))
    }

    fn temp_dir(&self) -> String {
        "/tmp".into()
    }

    fn default_cwd(&self) -> String {
        "/vercel/sandbox".into()
    }

    fn fetch_file(&self, path: &str, max_bytes: usize) -> Result<Vec<u8>, EnvError> {
        let (status, bytes) = self.api.send_accepting(
            "POST",
            &self.path("/fs/read"),
            Some(&json!({"path": path})),
            "application/octet-stream",
        )?;
        if !(200..300).contains(&status) {
            return Err(EnvError::new(format!(
                "{path}: HTTP {status}: {}",
                String::from_utf8_lossy(&bytes)
            )));
        }
        Ok(bytes.into_iter().take(max_bytes).collect())
    }

    fn cleanup(&self) {
        if !self.cleaned.swap(true, Ordering::SeqCst) {
            let _ = self.api.send("POST", &self.path("/stop"), None);
        }
    }

    fn supports_background(&self) -> bool {
        false
    }

    fn stdin_in_command_line(&self) -> bool {
        true
    }

    fn has_host_access(&self) -> bool {
        false
    }
}
