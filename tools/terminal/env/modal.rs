//! The `modal` backend. Modal's own client protocol is gRPC inside its SDK, with no public
//! REST API; this backend speaks JSON over HTTPS to a sandbox gateway in front of Modal
//! (the "managed" mode: `MODAL_API_URL`, default `https://api.modal.com`), with
//! `Authorization: Bearer <MODAL_TOKEN_ID>:<MODAL_TOKEN_SECRET>`:
//! `POST /v1/sandboxes {image, timeout, cpu, memory, app_name}` -> `{sandbox_id}`,
//! `POST /v1/sandboxes/{id}/exec {command: [..], timeout}` -> `{stdout, stderr, returncode}`,
//! `GET /v1/sandboxes/{id}/files?path=` (file bytes), `DELETE /v1/sandboxes/{id}`.

use super::http::url_encode;
use super::http::Api;
use super::{EnvError, Environment, Running, ThreadRun};
use crate::tools::terminal::config::TerminalConfig;
use serde_json::{json, Value};
use std::time::Duration;

pub struct ModalEnv {
    api: Api,
    pub sandbox_id: String,
    timeout: u64,
}

fn credentials(config: &TerminalConfig) -> Result<String, String> {
    let id = config.secret("MODAL_TOKEN_ID", "modal_token_id");
    let secret = config.secret("MODAL_TOKEN_SECRET", "modal_token_secret");
    match (id, secret) {
        (Some(id), Some(secret)) => Ok(format!("{id}:{secret}")),
        (None, Some(_)) => Err("MODAL_TOKEN_ID is not set".into()),
        (Some(_), None) => Err("MODAL_TOKEN_SECRET is not set".into()),
        (None, None) => Err("MODAL_TOKEN_ID and MODAL_TOKEN_SECRET are not set (run `modal token new` or set them)".into()),
    }
}

pub fn availability(config: &TerminalConfig) -> Option<String> {
    credentials(config).err()
}

pub fn create_body(config: &TerminalConfig, task_id: &str) -> Value {
    json!({
        "image": config.modal_image,
        "app_name": "hermes-agent",
        "name": format!("hermes-{}", task_id.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '-').take(40).collect::<String>()),
        "timeout": 3600,
        "cpu": config.container_cpu,
        "memory": config.container_memory_mb,
    })
}

impl ModalEnv {
    pub fn start(config: &TerminalConfig, task_id: &str) -> Result<ModalEnv, EnvError> {
        let bearer = credentials(config).map_err(EnvError::new)?;
        let api = Api::new("Modal", &config.modal_api_url, &bearer, Duration::from_secs(config.timeout.max(60) + 30));
        let created = api.json("POST", "/v1/sandboxes", Some(&create_body(config, task_id)))?;
        let sandbox_id = created["sandbox_id"]
            .as_str()
            .ok_or_else(|| EnvError::new(format!("Modal API: no sandbox_id in {created}")))?
            .to_string();
        Ok(ModalEnv { api, sandbox_id, timeout: config.timeout })
    }
}

impl Environment for ModalEnv {
    fn backend(&self) -> &'static str {
        "modal"
    }

    fn run_bash(&self, script: &str, login: bool, stdin: Option<Vec<u8>>) -> Result<Box<dyn Running>, EnvError> {
        let mut command = vec!["bash".to_string()];
        if login {
            command.push("-l".into());
        }
        command.extend(["-c".to_string(), script.to_string()]);
        let mut body = json!({"command": command, "timeout": self.timeout});
        if let Some(data) = stdin {
            body["stdin"] = json!(String::from_utf8_lossy(&data));
        }
        let api = self.api.clone();
        let path = format!("/v1/sandboxes/{}/exec", self.sandbox_id);
        Ok(Box::new(ThreadRun::start(
            move || match api.json("POST", &path, Some(&body)) {
                Ok(v) => {
                    let mut out = v["stdout"].as_str().unwrap_or("").to_string();
                    out.push_str(v["stderr"].as_str().unwrap_or(""));
                    (out.into_bytes(), v["returncode"].as_i64().unwrap_or(-1) as i32)
                }
                Err(e) => (format!("[modal error] {e}").into_bytes(), -1),
            },
            None,
        )))
    }

    fn temp_dir(&self) -> String {
        "/tmp".into()
    }

    fn default_cwd(&self) -> String {
        "/root".into()
    }

    fn fetch_file(&self, path: &str, max_bytes: usize) -> Result<Vec<u8>, EnvError> {
        let (status, bytes) =
            self.api.send("GET", &format!("/v1/sandboxes/{}/files?path={}", self.sandbox_id, url_encode(path)), None)?;
        if !(200..300).contains(&status) {
            return Err(EnvError::new(format!("{path}: HTTP {status}")));
        }
        Ok(bytes.into_iter().take(max_bytes).collect())
    }

    fn cleanup(&self) {
        let _ = self.api.send("DELETE", &format!("/v1/sandboxes/{}", self.sandbox_id), None);
    }

    fn supports_background(&self) -> bool {
        false
    }

    fn has_host_access(&self) -> bool {
        false
    }
}
