//! The `daytona` backend through Daytona's REST API, as its published OpenAPI definition
//! (and the clients generated from it) describes it:
//!
//! - `POST /sandbox` creates the task's sandbox, either from a snapshot
//!   (`TERMINAL_DAYTONA_SNAPSHOT`; no resources may be given then, the API refuses them) or
//!   from the image (`buildInfo.dockerfileContent` = `FROM <image>`, with cpu / memory /
//!   disk clamped to the default per-sandbox limits);
//! - `GET /sandbox/{id}` is polled until the state is `started` (through `pending_build`,
//!   `building_snapshot`, `creating`, `starting`); `error` / `build_failed` end the wait
//!   with the API's reason and the sandbox is deleted;
//! - commands go to the sandbox's toolbox proxy: `POST {toolboxProxyUrl}/{id}/process/execute`
//!   with a server-side `timeout`, wrapped so that their process group can be killed by a
//!   second execute when the terminal's timeout or a cancellation stops them;
//! - files come from `GET {toolboxProxyUrl}/{id}/files/download?path=`;
//! - `DELETE /sandbox/{id}` at cleanup.
//!
//! Credentials: `DAYTONA_API_KEY`; base URL `DAYTONA_API_URL` (default
//! `https://app.daytona.io/api`); optional `DAYTONA_ORGANIZATION_ID`.

use super::http::{url_encode, wrapped_script, Api};
use super::{remote_kill_script, sh_quote, EnvError, Environment, Running, ThreadRun};
use crate::config::TerminalConfig;
use crate::output::run_id;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The default organisation tier's per-sandbox limits: vCPU, GiB of memory, GiB of disk.
/// Larger requests are refused with 403, so the container settings are clamped to them.
pub const MAX_CPU: u64 = 4;
pub const MAX_MEMORY_GIB: u64 = 8;
pub const MAX_DISK_GIB: u64 = 10;

/// How long a new sandbox may take to reach `started` (an image build included).
const START_WAIT: Duration = Duration::from_secs(600);

/// States on the way to `started`; anything else ends the wait.
const TRANSIENT_STATES: &[&str] = &[
    "creating",
    "starting",
    "pending_build",
    "building_snapshot",
    "pulling_snapshot",
    "restoring",
    "unknown",
];

pub struct DaytonaEnv {
    api: Api,
    toolbox: Api,
    pub sandbox_id: String,
    /// The server-side bound of one command, above the longest foreground timeout.
    exec_timeout: u64,
    counter: AtomicU64,
    cleaned: AtomicBool,
}

const MISSING_KEY: &str = "DAYTONA_API_KEY is not set (environment or terminal.daytona_api_key)";

pub fn availability(config: &TerminalConfig) -> Option<String> {
    config
        .secret("DAYTONA_API_KEY", "daytona_api_key")
        .is_none()
        .then(|| MISSING_KEY.to_string())
}

fn gib(mb: u64) -> u64 {
    mb.div_ceil(1024)
}

/// The sandbox creation body (`CreateSandbox`).
pub fn create_body(config: &TerminalConfig, task_id: &str) -> Value {
    let mut body = json!({
        "labels": {"hermes-agent": "1", "hermes-task": format!("hermes-{task_id}")},
        "autoStopInterval": 30,
    });
    match &config.daytona_snapshot {
        Some(snapshot) => body["snapshot"] = json!(snapshot),
        None => {
            body["buildInfo"] =
                json!({"dockerfileContent": format!("FROM {}\n", config.daytona_image)});
            body["cpu"] = json!((config.container_cpu.ceil() as u64).clamp(1, MAX_CPU));
            body["memory"] = json!(gib(config.container_memory_mb).clamp(1, MAX_MEMORY_GIB));
            body["disk"] = json!(gib(config.container_disk_mb).clamp(1, MAX_DISK_GIB));
        }
    }
    body
}

/// The command line sent to `process/execute`: bash running the wrapped script, whatever
/// shell (or none) the toolbox daemon puts in front of it.
pub fn execute_command(script: &str, login: bool, stdin: Option<&[u8]>, rid: &str) -> String {
    format!(
        "bash -c {}",
        sh_quote(&wrapped_script(script, login, stdin, rid))
    )
}

impl DaytonaEnv {
    pub fn start(config: &TerminalConfig, task_id: &str) -> Result<DaytonaEnv, EnvError> {
        let key = config
            .secret("DAYTONA_API_KEY", "daytona_api_key")
            .ok_or_else(|| EnvError::new(MISSING_KEY))?;
        let exec_timeout = config.max_foreground_timeout.max(config.timeout) + 60;
        let http_timeout = Duration::from_secs(exec_timeout + 30);
        let org = config.secret("DAYTONA_ORGANIZATION_ID", "daytona_organization_id");
        let with_org = |api: Api| match &org {
            Some(org) => api.header("X-Daytona-Organization-ID", org),
            None => api,
        };
        let api = with_org(Api::new(
            "Daytona",
            &config.daytona_api_url,
            &key,
            http_timeout,
        ));
        let created = api.json("POST", "/sandbox", Some(&create_body(config, task_id)))?;
        let sandbox_id = created["id"]
            .as_str()
            .ok_or_else(|| {
                EnvError::new(format!(
                    "Daytona API: the created sandbox has no id: {created}"
                ))
            })?
            .to_string();
        let started = match wait_until_started(&api, &sandbox_id, created) {
            Ok(started) => started,
            Err(e) => {
                let _ = api.send("DELETE", &format!("/sandbox/{sandbox_id}"), None);
                return Err(e);
            }
        };
        let proxy = match started["toolboxProxyUrl"]
            .as_str()
            .filter(|u| !u.is_empty())
        {
            Some(url) => url.to_string(),
            None => api.json(
                "GET",
                &format!("/sandbox/{sandbox_id}/toolbox-proxy-url"),
                None,
            )?["url"]
                .as_str()
                .ok_or_else(|| EnvError::new("Daytona API: no toolbox proxy URL for the sandbox"))?
                .to_string(),
        };
        let toolbox = with_org(Api::new(
            "Daytona toolbox",
            &format!("{}/{sandbox_id}", proxy.trim_end_matches('/')),
            &key,
            http_timeout,
        ));
        Ok(DaytonaEnv {
            api,
            toolbox,
            sandbox_id,
            exec_timeout,
            counter: AtomicU64::new(0),
            cleaned: AtomicBool::new(false),
        })
    }
}

/// Polls the sandbox until it is `started`; returns its last description.
fn wait_until_started(api: &Api, id: &str, mut sandbox: Value) -> Result<Value, EnvError> {
    let deadline = Instant::now() + START_WAIT;
    let mut pause = Duration::from_millis(100);
    loop {
        let state = sandbox["state"].as_str().unwrap_or("unknown").to_string();
        if state == "started" {
            return Ok(sandbox);
        }
        if !TRANSIENT_STATES.contains(&state.as_str()) {
            let reason = sandbox["errorReason"].as_str().unwrap_or("no reason given");
            return Err(EnvError::new(format!(
                "Daytona sandbox {id} did not start: state {state} ({reason})"
            ))
            .hint("check the image or snapshot and the organisation's quota, then retry"));
        }
        if Instant::now() >= deadline {
            return Err(EnvError::new(format!(
                "Daytona sandbox {id} is still {state} after {}s",
                START_WAIT.as_secs()
            ))
            .hint("the build or the provider is slow: retry later"));
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_secs(2));
        sandbox = api.json("GET", &format!("/sandbox/{id}"), None)?;
    }
}

impl Environment for DaytonaEnv {
    fn backend(&self) -> &'static str {
        "daytona"
    }

    fn run_bash(
        &self,
        script: &str,
        login: bool,
        stdin: Option<Vec<u8>>,
    ) -> Result<Box<dyn Running>, EnvError> {
        let rid = run_id(&self.counter);
        let command = execute_command(script, login, stdin.as_deref(), &rid);
        let body = json!({"command": command, "timeout": self.exec_timeout});
        let toolbox = self.toolbox.clone();
        let killer = self.toolbox.clone();
        let cancel = move || {
            let kill = format!(
                "bash -c {}",
                sh_quote(&remote_kill_script("/tmp", &rid, Duration::from_secs(1)))
            );
            let _ = killer.json(
                "POST",
                "/process/execute",
                Some(&json!({"command": kill, "timeout": 30})),
            );
        };
        Ok(Box::new(ThreadRun::start(
            move || match toolbox.send("POST", "/process/execute", Some(&body)) {
                Ok((200, bytes)) => match serde_json::from_slice::<Value>(&bytes) {
                    Ok(v) => (
                        v["result"].as_str().unwrap_or("").as_bytes().to_vec(),
                        v["exitCode"].as_i64().unwrap_or(-1) as i32,
                    ),
                    Err(e) => (
                        format!("[daytona error] the execute answer is not JSON: {e}").into_bytes(),
                        -1,
                    ),
                },
                Ok((status, bytes)) => {
                    let text = String::from_utf8_lossy(&bytes);
                    let code = if status == 408 { 124 } else { -1 };
                    (
                        format!("[daytona error] process/execute answered HTTP {status}: {text}")
                            .into_bytes(),
                        code,
                    )
                }
                Err(e) => (format!("[daytona error] {e}").into_bytes(), -1),
            },
            Some(Box::new(cancel)),
        )))
    }

    fn temp_dir(&self) -> String {
        "/tmp".into()
    }

    fn default_cwd(&self) -> String {
        "~".into()
    }

    fn fetch_file(&self, path: &str, max_bytes: usize) -> Result<Vec<u8>, EnvError> {
        let (status, bytes) = self.toolbox.send(
            "GET",
            &format!("/files/download?path={}", url_encode(path)),
            None,
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
            let _ = self
                .api
                .send("DELETE", &format!("/sandbox/{}", self.sandbox_id), None);
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
