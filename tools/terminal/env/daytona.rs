//! The `daytona` backend through Daytona's REST API: a sandbox per task
//! (`POST /sandbox`, labelled `hermes-<task>`), commands through the toolbox
//! (`POST /toolbox/{id}/toolbox/process/execute` -> `{exitCode, result}`), removal with
//! `DELETE /sandbox/{id}`. Credentials: `DAYTONA_API_KEY`; base URL `DAYTONA_API_URL`
//! (default `https://app.daytona.io/api`); optional `DAYTONA_ORGANIZATION_ID`.

use super::http::Api;
use super::{sh_quote, EnvError, Environment, Running, ThreadRun};
use crate::tools::terminal::config::TerminalConfig;
use serde_json::{json, Value};
use std::time::Duration;

pub struct DaytonaEnv {
    api: Api,
    pub sandbox_id: String,
}

pub fn availability(config: &TerminalConfig) -> Option<String> {
    if config.secret("DAYTONA_API_KEY", "daytona_api_key").is_none() {
        return Some("DAYTONA_API_KEY is not set (environment or terminal.daytona_api_key)".into());
    }
    None
}

/// The sandbox creation body.
pub fn create_body(config: &TerminalConfig, task_id: &str) -> Value {
    json!({
        "image": config.daytona_image,
        "labels": {"hermes-agent": "1", "hermes-task": format!("hermes-{task_id}")},
        "cpu": config.container_cpu.ceil() as u64,
        "memory": (config.container_memory_mb as f64 / 1024.0).ceil() as u64,
        "disk": (config.container_disk_mb as f64 / 1024.0).ceil() as u64,
        "autoStopInterval": 30,
    })
}

impl DaytonaEnv {
    pub fn start(config: &TerminalConfig, task_id: &str) -> Result<DaytonaEnv, EnvError> {
        let key = config
            .secret("DAYTONA_API_KEY", "daytona_api_key")
            .ok_or_else(|| EnvError::new("DAYTONA_API_KEY is not set (environment or terminal.daytona_api_key)"))?;
        let mut api = Api::new("Daytona", &config.daytona_api_url, &key, Duration::from_secs(config.timeout.max(60) + 30));
        if let Some(org) = config.secret("DAYTONA_ORGANIZATION_ID", "daytona_organization_id") {
            api = api.header("X-Daytona-Organization-ID", &org);
        }
        let created = api.json("POST", "/sandbox", Some(&create_body(config, task_id)))?;
        let sandbox_id = created["id"]
            .as_str()
            .ok_or_else(|| EnvError::new(format!("Daytona API: the created sandbox has no id: {created}")))?
            .to_string();
        Ok(DaytonaEnv { api, sandbox_id })
    }
}

impl Environment for DaytonaEnv {
    fn backend(&self) -> &'static str {
        "daytona"
    }

    fn run_bash(&self, script: &str, login: bool, stdin: Option<Vec<u8>>) -> Result<Box<dyn Running>, EnvError> {
        let mut command = format!("bash {}-c {}", if login { "-l " } else { "" }, sh_quote(script));
        if let Some(data) = stdin {
            let delimiter = format!("HERMES_STDIN_{}", crate::tools::terminal::output::random_hex(12));
            command = format!("{command} <<'{delimiter}'\n{}\n{delimiter}", String::from_utf8_lossy(&data));
        }
        let api = self.api.clone();
        let path = format!("/toolbox/{}/toolbox/process/execute", self.sandbox_id);
        Ok(Box::new(ThreadRun::start(
            move || match api.json("POST", &path, Some(&json!({"command": command, "timeout": 0}))) {
                Ok(v) => (
                    v["result"].as_str().unwrap_or("").as_bytes().to_vec(),
                    v["exitCode"].as_i64().unwrap_or(-1) as i32,
                ),
                Err(e) => (format!("[daytona error] {e}").into_bytes(), -1),
            },
            None,
        )))
    }

    fn temp_dir(&self) -> String {
        "/tmp".into()
    }

    fn default_cwd(&self) -> String {
        "~".into()
    }

    fn fetch_file(&self, path: &str, max_bytes: usize) -> Result<Vec<u8>, EnvError> {
        let (status, bytes) = self.api.send(
            "GET",
            &format!("/toolbox/{}/toolbox/files/download?path={}", self.sandbox_id, url_encode(path)),
            None,
        )?;
        if !(200..300).contains(&status) {
            return Err(EnvError::new(format!("{path}: HTTP {status}")));
        }
        Ok(bytes.into_iter().take(max_bytes).collect())
    }

    fn cleanup(&self) {
        let _ = self.api.send("DELETE", &format!("/sandbox/{}", self.sandbox_id), None);
    }

    fn supports_background(&self) -> bool {
        false
    }

    fn has_host_access(&self) -> bool {
        false
    }
}

pub fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}
