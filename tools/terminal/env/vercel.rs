//! The `vercel_sandbox` backend through Vercel's Sandbox REST API: `POST /v1/sandboxes`
//! (runtime `node24`, `node22` or `python3.13`), commands with
//! `POST /v1/sandboxes/{id}/cmd` (`bash -c <script>`), completion with
//! `GET .../cmd/{cmdId}?wait=true`, output from `GET .../cmd/{cmdId}/logs` (JSON lines of
//! `{stream, data}`), `POST /v1/sandboxes/{id}/stop` on cleanup. Credentials:
//! `VERCEL_TOKEN` (or `VERCEL_OIDC_TOKEN`), optional `VERCEL_TEAM_ID` and `VERCEL_PROJECT_ID`.

use super::http::url_encode;
use super::http::Api;
use super::{EnvError, Environment, Running, ThreadRun};
use crate::tools::terminal::config::TerminalConfig;
use serde_json::{json, Value};
use std::time::Duration;

pub const RUNTIMES: &[&str] = &["node24", "node22", "python3.13"];

pub struct VercelEnv {
    api: Api,
    pub sandbox_id: String,
    team_query: String,
}

fn token(config: &TerminalConfig) -> Option<String> {
    config.secret("VERCEL_TOKEN", "vercel_token").or_else(|| config.secret("VERCEL_OIDC_TOKEN", "vercel_oidc_token"))
}

pub fn availability(config: &TerminalConfig) -> Option<String> {
    if token(config).is_none() {
        return Some("neither VERCEL_TOKEN nor VERCEL_OIDC_TOKEN is set".into());
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
pub fn create_body(config: &TerminalConfig) -> Value {
    let mut body = json!({
        "runtime": config.vercel_runtime,
        "timeout": 45 * 60 * 1000,
        "resources": {"vcpus": (config.container_cpu.ceil() as u64).max(1) * 2},
    });
    if let Some(project) = config.secret("VERCEL_PROJECT_ID", "vercel_project_id") {
        body["projectId"] = json!(project);
    }
    body
}

impl VercelEnv {
    pub fn start(config: &TerminalConfig, _task_id: &str) -> Result<VercelEnv, EnvError> {
        if let Some(missing) = availability(config) {
            return Err(EnvError::new(missing));
        }
        let token = token(config).unwrap_or_default();
        let api = Api::new("Vercel Sandbox", &config.vercel_api_url, &token, Duration::from_secs(config.timeout.max(60) + 30));
        let team_query = config
            .secret("VERCEL_TEAM_ID", "vercel_team_id")
            .map(|t| format!("?teamId={}", url_encode(&t)))
            .unwrap_or_default();
        let created = api.json("POST", &format!("/v1/sandboxes{team_query}"), Some(&create_body(config)))?;
        let sandbox_id = created["sandbox"]["id"]
            .as_str()
            .ok_or_else(|| EnvError::new(format!("Vercel Sandbox API: no sandbox.id in {created}")))?
            .to_string();
        Ok(VercelEnv { api, sandbox_id, team_query })
    }

    fn with_query(&self, path: &str, extra: &str) -> String {
        match (self.team_query.is_empty(), extra.is_empty()) {
            (true, true) => path.to_string(),
            (true, false) => format!("{path}?{extra}"),
            (false, true) => format!("{path}{}", self.team_query),
            (false, false) => format!("{path}{}&{extra}", self.team_query),
        }
    }
}

/// Runs one command: start, wait, collect logs. Returns (merged output, exit code).
fn run_command(api: &Api, sandbox: &str, paths: (String, String, String), body: Value) -> Result<(Vec<u8>, i32), EnvError> {
    let (start_path, wait_tpl, logs_tpl) = paths;
    let started = api.json("POST", &start_path, Some(&body))?;
    let cmd_id = started["command"]["id"]
        .as_str()
        .ok_or_else(|| EnvError::new(format!("Vercel Sandbox API: no command.id for sandbox {sandbox}: {started}")))?
        .to_string();
    let done = api.json("GET", &wait_tpl.replace("{cmd}", &cmd_id), None)?;
    let exit = done["command"]["exitCode"].as_i64().unwrap_or(-1) as i32;
    let (_, logs) = api.send("GET", &logs_tpl.replace("{cmd}", &cmd_id), None)?;
    let mut out = Vec::new();
    for line in String::from_utf8_lossy(&logs).lines() {
        if let Ok(v) = serde_json::from_str::<Value>(line) {
            if let Some(data) = v["data"].as_str() {
                out.extend_from_slice(data.as_bytes());
            }
        }
    }
    Ok((out, exit))
}

impl Environment for VercelEnv {
    fn backend(&self) -> &'static str {
        "vercel_sandbox"
    }

    fn run_bash(&self, script: &str, login: bool, stdin: Option<Vec<u8>>) -> Result<Box<dyn Running>, EnvError> {
        let mut script = script.to_string();
        if let Some(data) = stdin {
            let delimiter = format!("HERMES_STDIN_{}", crate::tools::terminal::output::random_hex(12));
            script = format!("{{ {script}\n}} <<'{delimiter}'\n{}\n{delimiter}", String::from_utf8_lossy(&data));
        }
        let mut args = Vec::new();
        if login {
            args.push("-l".to_string());
        }
        args.extend(["-c".to_string(), script]);
        let body = json!({"command": "bash", "args": args});
        let base = format!("/v1/sandboxes/{}/cmd", self.sandbox_id);
        let paths = (
            self.with_query(&base, ""),
            self.with_query(&format!("{base}/{{cmd}}"), "wait=true"),
            self.with_query(&format!("{base}/{{cmd}}/logs"), ""),
        );
        let api = self.api.clone();
        let sandbox = self.sandbox_id.clone();
        Ok(Box::new(ThreadRun::start(
            move || match run_command(&api, &sandbox, paths, body) {
                Ok(result) => result,
                Err(e) => (format!("[vercel_sandbox error] {e}").into_bytes(), -1),
            },
            None,
        )))
    }

    fn temp_dir(&self) -> String {
        "/tmp".into()
    }

    fn default_cwd(&self) -> String {
        "/vercel/sandbox".into()
    }

    fn fetch_file(&self, path: &str, max_bytes: usize) -> Result<Vec<u8>, EnvError> {
        let (status, bytes) = self.api.send(
            "POST",
            &self.with_query(&format!("/v1/sandboxes/{}/fs/read", self.sandbox_id), ""),
            Some(&json!({"path": path})),
        )?;
        if !(200..300).contains(&status) {
            return Err(EnvError::new(format!("{path}: HTTP {status}")));
        }
        Ok(bytes.into_iter().take(max_bytes).collect())
    }

    fn cleanup(&self) {
        let _ = self.api.send("POST", &self.with_query(&format!("/v1/sandboxes/{}/stop", self.sandbox_id), ""), None);
    }

    fn supports_background(&self) -> bool {
        false
    }

    fn has_host_access(&self) -> bool {
        false
    }
}
