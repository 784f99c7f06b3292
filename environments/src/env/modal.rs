//! The `modal` backend, through Modal's official Python SDK. Modal has no REST API for
//! sandboxes (its SDKs speak gRPC), so each environment runs a small bridge process,
//! `modal_bridge.py` (shipped inside the binary, written to `$HERMES_HOME/modal/`),
//! that speaks JSON lines over stdio: `create` (`App.lookup` + `Sandbox.create`), `exec`
//! (with stdin, waited for), `terminate`.
//!
//! The interpreter is `TERMINAL_MODAL_PYTHON` when set (it must import `modal`), else
//! `$HERMES_HOME/modal/venv/bin/python3`: on first use that venv is created with
//! `python3 -m venv` and `pip install 'modal>=1,<2'`. Credentials: `MODAL_TOKEN_ID` and
//! `MODAL_TOKEN_SECRET` (environment or `terminal.modal_token_id` / `modal_token_secret`),
//! else the SDK's own `~/.modal.toml` (`MODAL_CONFIG_PATH`).
//!
//! Commands are wrapped ([`remote_wrap`]) so the terminal's timeout or a cancellation
//! kills their process group with a second exec; each exec also carries a server-side
//! timeout above the longest foreground timeout.

use super::{remote_kill_script, remote_wrap, EnvError, Environment, Running, ThreadRun};
use crate::config::TerminalConfig;
use crate::output::run_id;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The bridge script, written next to the venv at first use.
pub const BRIDGE_SOURCE: &str = include_str!("modal_bridge.py");
/// The SDK versions the bridge is written for.
pub const MODAL_REQUIREMENT: &str = "modal>=1,<2";
const BRIDGE_STARTUP: Duration = Duration::from_secs(120);
/// How long sandbox creation may take (image pulls included).
const CREATE_WAIT: Duration = Duration::from_secs(900);

fn modal_dir(config: &TerminalConfig) -> PathBuf {
    config.hermes_home.join("modal")
}

/// The venv the modal package is installed into on demand.
pub fn venv_dir(config: &TerminalConfig) -> PathBuf {
    modal_dir(config).join("venv")
}

/// Whether the venv has the package (a cheap look at site-packages, no interpreter run).
fn venv_has_modal(venv: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(venv.join("lib")) else {
        return false;
    };
    entries
        .flatten()
        .any(|e| e.path().join("site-packages/modal/__init__.py").is_file())
}

fn token_pair(config: &TerminalConfig) -> (Option<String>, Option<String>) {
    (
        config.secret("MODAL_TOKEN_ID", "modal_token_id"),
        config.secret("MODAL_TOKEN_SECRET", "modal_token_secret"),
    )
}

/// The SDK's own credentials file.
fn modal_toml() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("MODAL_CONFIG_PATH").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(path));
    }
    std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".modal.toml"))
}

/// What is missing for the backend, each piece named; `None` when it can be tried (the
/// package alone missing is not a blocker: it is installed on first use).
pub fn availability(config: &TerminalConfig) -> Option<String> {
    let mut missing = Vec::new();
    match &config.modal_python {
        Some(python) if python.contains('/') && !Path::new(python).is_file() => {
            missing.push(format!("TERMINAL_MODAL_PYTHON {python} does not exist"))
        }
        Some(python) if !python.contains('/') && which::which(python).is_err() => {
            missing.push(format!("TERMINAL_MODAL_PYTHON '{python}' was not found on PATH"))
        }
        Some(_) => {}
        None if venv_has_modal(&venv_dir(config)) => {}
        None if which::which("python3").is_err() => missing.push(format!(
            "the modal Python package: it is installed into {} on first use, but python3 was not found on PATH \
             (or set TERMINAL_MODAL_PYTHON to an interpreter that has `modal`)",
            venv_dir(config).display()
        )),
        None => {}
    }
    match token_pair(config) {
        (Some(_), Some(_)) => {}
        (Some(_), None) => missing.push("MODAL_TOKEN_SECRET is not set (MODAL_TOKEN_ID is)".into()),
        (None, Some(_)) => missing.push("MODAL_TOKEN_ID is not set (MODAL_TOKEN_SECRET is)".into()),
        (None, None) if modal_toml().is_some_and(|p| p.is_file()) => {}
        (None, None) => missing.push(format!(
            "Modal credentials: set MODAL_TOKEN_ID and MODAL_TOKEN_SECRET (or terminal.modal_token_id / \
             modal_token_secret), or run `modal token new` to write {}",
            modal_toml().map(|p| p.display().to_string()).unwrap_or_else(|| "~/.modal.toml".into())
        )),
    }
    (!missing.is_empty()).then(|| format!("missing {}", missing.join("; ")))
}

/// One installation at a time in this process.
static INSTALL: Mutex<()> = Mutex::new(());

/// The interpreter that runs the bridge, installing the package when needed.
fn bridge_python(config: &TerminalConfig) -> Result<PathBuf, EnvError> {
    if let Some(python) = &config.modal_python {
        return Ok(PathBuf::from(python));
    }
    let venv = venv_dir(config);
    let python = venv.join("bin/python3");
    let _guard = INSTALL.lock().unwrap_or_else(|p| p.into_inner());
    if python.is_file() && venv_has_modal(&venv) {
        return Ok(python);
    }
    let run = |cmd: &mut Command, what: &str| -> Result<(), EnvError> {
        let out = cmd
            .stdin(Stdio::null())
            .output()
            .map_err(|e| EnvError::new(format!("{what}: {e}")))?;
        if out.status.success() {
            return Ok(());
        }
        Err(EnvError::new(format!(
            "{what} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
        .hint("install the package by hand into that venv, or set TERMINAL_MODAL_PYTHON"))
    };
    if !python.is_file() {
        run(
            Command::new("python3").arg("-m").arg("venv").arg(&venv),
            &format!("creating the modal venv at {}", venv.display()),
        )?;
    }
    run(
        Command::new(&python).args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            MODAL_REQUIREMENT,
        ]),
        &format!("pip install '{MODAL_REQUIREMENT}' into {}", venv.display()),
    )?;
    Ok(python)
}

type Pending = Arc<Mutex<HashMap<u64, Sender<Value>>>>;

/// The running bridge process: requests by id, answers routed back by a reader thread.
struct Bridge {
    child: Mutex<Child>,
    stdin: Mutex<Option<ChildStdin>>,
    pending: Pending,
    next_id: AtomicU64,
    stderr_tail: Arc<Mutex<String>>,
}

impl Bridge {
    fn start(config: &TerminalConfig) -> Result<Bridge, EnvError> {
        let python = bridge_python(config)?;
        let dir = modal_dir(config);
        std::fs::create_dir_all(&dir)
            .map_err(|e| EnvError::new(format!("cannot create {}: {e}", dir.display())))?;
        let script = dir.join("modal_bridge.py");
        if std::fs::read_to_string(&script).ok().as_deref() != Some(BRIDGE_SOURCE) {
            std::fs::write(&script, BRIDGE_SOURCE)
                .map_err(|e| EnvError::new(format!("cannot write {}: {e}", script.display())))?;
        }
        let mut cmd = Command::new(&python);
        cmd.arg(&script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let (Some(id), Some(secret)) = token_pair(config) {
            cmd.env("MODAL_TOKEN_ID", id)
                .env("MODAL_TOKEN_SECRET", secret);
        }
        let mut child = cmd.spawn().map_err(|e| {
            EnvError::new(format!(
                "cannot start the modal bridge with {}: {e}",
                python.display()
            ))
        })?;
        let pending: Pending = Arc::default();
        let stderr_tail: Arc<Mutex<String>> = Arc::default();
        let (ready_tx, ready_rx) = channel();
        pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(0, ready_tx);
        let stdout = child.stdout.take().expect("piped stdout");
        let routes = Arc::clone(&pending);
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let Ok(answer) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                let Some(id) = answer["id"].as_u64() else {
                    continue;
                };
                if let Some(tx) = routes.lock().unwrap_or_else(|p| p.into_inner()).remove(&id) {
                    let _ = tx.send(answer);
                }
            }
            // The bridge is gone: every waiter sees its channel close.
            routes.lock().unwrap_or_else(|p| p.into_inner()).clear();
        });
        let stderr = child.stderr.take().expect("piped stderr");
        let tail = Arc::clone(&stderr_tail);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                let mut tail = tail.lock().unwrap_or_else(|p| p.into_inner());
                tail.push_str(&line);
                tail.push('\n');
                if tail.len() > 4000 {
                    let cut = tail.len() - 4000;
                    let cut = (cut..tail.len())
                        .find(|i| tail.is_char_boundary(*i))
                        .unwrap_or(0);
                    tail.drain(..cut);
                }
            }
        });
        let stdin = child.stdin.take();
        let bridge = Bridge {
            child: Mutex::new(child),
            stdin: Mutex::new(stdin),
            pending,
            next_id: AtomicU64::new(1),
            stderr_tail,
        };
        let ready = bridge.wait(ready_rx, BRIDGE_STARTUP, "start")?;
        if ready["ready"] != true {
            bridge.stop();
            return Err(bridge.failure("start", &ready));
        }
        Ok(bridge)
    }

    /// Sends a request; the answer arrives on the returned channel.
    fn request(&self, mut request: Value) -> Result<Receiver<Value>, EnvError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        request["id"] = json!(id);
        let (tx, rx) = channel();
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, tx);
        let mut stdin = self.stdin.lock().unwrap_or_else(|p| p.into_inner());
        let sent = match stdin.as_mut() {
            Some(pipe) => writeln!(pipe, "{request}")
                .and_then(|_| pipe.flush())
                .is_ok(),
            None => false,
        };
        if !sent {
            self.pending
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&id);
            return Err(EnvError::new(format!(
                "the modal bridge is not running{}",
                self.stderr_note()
            )));
        }
        Ok(rx)
    }

    fn wait(&self, rx: Receiver<Value>, limit: Duration, op: &str) -> Result<Value, EnvError> {
        match rx.recv_timeout(limit) {
            Ok(answer) if answer.get("error").is_some() => Err(self.failure(op, &answer)),
            Ok(answer) => Ok(answer),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => Err(EnvError::new(format!(
                "the modal bridge did not answer {op} within {}s",
                limit.as_secs()
            ))),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => Err(EnvError::new(format!(
                "the modal bridge exited during {op}{}",
                self.stderr_note()
            ))),
        }
    }

    fn call(&self, request: Value, limit: Duration) -> Result<Value, EnvError> {
        let op = request["op"].as_str().unwrap_or("request").to_string();
        let rx = self.request(request)?;
        self.wait(rx, limit, &op)
    }

    fn failure(&self, op: &str, answer: &Value) -> EnvError {
        let kind = answer["kind"].as_str().unwrap_or("Error");
        let message = answer["error"].as_str().unwrap_or("no message");
        let hint = match kind {
            "AuthError" => "Modal refused the credentials: check MODAL_TOKEN_ID / MODAL_TOKEN_SECRET or ~/.modal.toml",
            "ImportError" => "the bridge's interpreter cannot import modal: reinstall it or set TERMINAL_MODAL_PYTHON",
            _ => "retry; if it persists, check the image and Modal's status",
        };
        EnvError::new(format!("Modal {op} failed: {kind}: {message}")).hint(hint)
    }

    fn stderr_note(&self) -> String {
        let tail = self.stderr_tail.lock().unwrap_or_else(|p| p.into_inner());
        if tail.trim().is_empty() {
            String::new()
        } else {
            format!(": {}", tail.trim())
        }
    }

    /// Closes the bridge's input (it terminates the sandbox and exits) and reaps it.
    fn stop(&self) {
        drop(self.stdin.lock().unwrap_or_else(|p| p.into_inner()).take());
        let mut child = self.child.lock().unwrap_or_else(|p| p.into_inner());
        for _ in 0..100 {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

pub struct ModalEnv {
    bridge: Arc<Bridge>,
    pub sandbox_id: String,
    exec_timeout: u64,
    counter: AtomicU64,
    cleaned: AtomicBool,
}

/// The `create` request.
pub fn create_request(config: &TerminalConfig) -> Value {
    json!({
        "op": "create",
        "app": "hermes-agent",
        "image": config.modal_image,
        "timeout": 3600,
        "cpu": config.container_cpu,
        "memory": config.container_memory_mb,
    })
}

impl ModalEnv {
    pub fn start(config: &TerminalConfig, _task_id: &str) -> Result<ModalEnv, EnvError> {
        if let Some(missing) = availability(config) {
            return Err(EnvError::new(missing));
        }
        let bridge = Arc::new(Bridge::start(config)?);
        let created = match bridge.call(create_request(config), CREATE_WAIT) {
            Ok(created) => created,
            Err(e) => {
                bridge.stop();
                return Err(e);
            }
        };
        let sandbox_id = created["sandbox_id"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        Ok(ModalEnv {
            bridge,
            sandbox_id,
            exec_timeout: config.max_foreground_timeout.max(config.timeout) + 60,
            counter: AtomicU64::new(0),
            cleaned: AtomicBool::new(false),
        })
    }
}

impl Environment for ModalEnv {
    fn backend(&self) -> &'static str {
        "modal"
    }

    fn run_bash(
        &self,
        script: &str,
        login: bool,
        stdin: Option<Vec<u8>>,
    ) -> Result<Box<dyn Running>, EnvError> {
        let rid = run_id(&self.counter);
        let request = json!({
            "op": "exec",
            "argv": ["bash", "-c", remote_wrap(script, login, "/tmp", &rid)],
            "stdin": stdin.map(|data| String::from_utf8_lossy(&data).into_owned()),
            "timeout": self.exec_timeout,
        });
        let rx = self.bridge.request(request)?;
        let (bridge, killer) = (Arc::clone(&self.bridge), Arc::clone(&self.bridge));
        let limit = Duration::from_secs(self.exec_timeout + 30);
        let cancel = move || {
            let kill = json!({
                "op": "exec",
                "argv": ["bash", "-c", remote_kill_script("/tmp", &rid, Duration::from_secs(1))],
                "timeout": 30,
            });
            let _ = killer.call(kill, Duration::from_secs(40));
        };
        Ok(Box::new(ThreadRun::start(
            move || match bridge.wait(rx, limit, "exec") {
                Ok(answer) => (
                    answer["output"].as_str().unwrap_or("").as_bytes().to_vec(),
                    answer["exit_code"].as_i64().unwrap_or(-1) as i32,
                ),
                Err(e) => (format!("[modal error] {e}").into_bytes(), -1),
            },
            Some(Box::new(cancel)),
        )))
    }

    fn temp_dir(&self) -> String {
        "/tmp".into()
    }

    fn default_cwd(&self) -> String {
        "/root".into()
    }

    fn fetch_file(&self, path: &str, max_bytes: usize) -> Result<Vec<u8>, EnvError> {
        let script = format!("head -c {max_bytes} -- {}", super::sh_quote(path));
        let answer = self.bridge.call(
            json!({"op": "exec", "argv": ["bash", "-c", script], "timeout": 60}),
            Duration::from_secs(90),
        )?;
        if answer["exit_code"] != 0 {
            return Err(EnvError::new(format!(
                "{path}: {}",
                answer["output"].as_str().unwrap_or("").trim()
            )));
        }
        Ok(answer["output"].as_str().unwrap_or("").as_bytes().to_vec())
    }

    fn cleanup(&self) {
        if !self.cleaned.swap(true, Ordering::SeqCst) {
            let _ = self
                .bridge
                .call(json!({"op": "terminate"}), Duration::from_secs(60));
            self.bridge.stop();
        }
    }

    fn supports_background(&self) -> bool {
        false
    }

    fn has_host_access(&self) -> bool {
        false
    }
}
