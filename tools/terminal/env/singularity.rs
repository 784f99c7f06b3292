//! The `singularity` backend, through the `apptainer` (or `singularity`) CLI: one
//! instance per task started with `instance start --containall --no-home`, commands
//! through `exec instance://<name>`, `instance stop` on cleanup.

use super::ssh::which;
use super::{remote_kill_script, remote_wrap, ChildRun, EnvError, Environment, Running};
use crate::tools::terminal::config::TerminalConfig;
use crate::tools::terminal::output::random_hex;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

pub struct SingularityEnv {
    binary: String,
    pub instance: String,
    counter: AtomicU64,
}

/// `TERMINAL_SINGULARITY_BINARY`, else `apptainer`, else `singularity`.
pub fn binary(config: &TerminalConfig) -> Option<String> {
    if let Some(b) = &config.singularity_binary {
        return Some(b.clone());
    }
    ["apptainer", "singularity"].iter().find(|b| which(b).is_some()).map(|b| b.to_string())
}

pub fn availability(config: &TerminalConfig) -> Option<String> {
    match binary(config) {
        None => Some("neither apptainer nor singularity was found on PATH (or set TERMINAL_SINGULARITY_BINARY)".into()),
        Some(b) if !b.contains('/') && which(&b).is_none() => Some(format!("'{b}' was not found on PATH")),
        Some(b) if b.contains('/') && !std::path::Path::new(&b).is_file() => {
            Some(format!("{b} (TERMINAL_SINGULARITY_BINARY) does not exist"))
        }
        Some(_) => None,
    }
}

/// `instance start` arguments.
pub fn start_args(image: &str, instance: &str) -> Vec<String> {
    ["instance", "start", "--containall", "--no-home", image, instance].iter().map(|s| s.to_string()).collect()
}

/// `exec` arguments running `bash -c script` in the instance.
pub fn exec_args(instance: &str, script: &str) -> Vec<String> {
    vec!["exec".into(), format!("instance://{instance}"), "bash".into(), "-c".into(), script.into()]
}

/// `instance stop` arguments.
pub fn stop_args(instance: &str) -> Vec<String> {
    vec!["instance".into(), "stop".into(), instance.into()]
}

impl SingularityEnv {
    pub fn start(config: &TerminalConfig) -> Result<SingularityEnv, EnvError> {
        if let Some(missing) = availability(config) {
            return Err(EnvError::new(missing));
        }
        let binary = binary(config).unwrap_or_default();
        let instance = format!("hermes-{}", random_hex(8));
        let out = Command::new(&binary)
            .args(start_args(&config.singularity_image, &instance))
            .stdin(Stdio::null())
            .output()
            .map_err(|e| EnvError::new(format!("cannot run {binary}: {e}")))?;
        if !out.status.success() {
            return Err(EnvError::new(format!(
                "{binary} instance start failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(SingularityEnv { binary, instance, counter: AtomicU64::new(0) })
    }
}

impl Environment for SingularityEnv {
    fn backend(&self) -> &'static str {
        "singularity"
    }

    fn run_bash(&self, script: &str, login: bool, stdin: Option<Vec<u8>>) -> Result<Box<dyn Running>, EnvError> {
        let rid = format!("{}-{}", random_hex(8), self.counter.fetch_add(1, Ordering::Relaxed));
        let wrapped = remote_wrap(script, login, "/tmp", &rid);
        let mut cmd = Command::new(&self.binary);
        cmd.args(exec_args(&self.instance, &wrapped));
        let run = ChildRun::spawn(cmd, stdin, false).map_err(|e| EnvError::new(format!("cannot run {}: {e}", self.binary)))?;
        let binary = self.binary.clone();
        let instance = self.instance.clone();
        Ok(Box::new(run.with_remote_kill(Box::new(move |grace: Duration| {
            let _ = Command::new(&binary)
                .args(exec_args(&instance, &remote_kill_script("/tmp", &rid, grace)))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }))))
    }

    fn temp_dir(&self) -> String {
        "/tmp".into()
    }

    fn default_cwd(&self) -> String {
        "/tmp".into()
    }

    fn fetch_file(&self, path: &str, max_bytes: usize) -> Result<Vec<u8>, EnvError> {
        let out = Command::new(&self.binary)
            .args(exec_args(&self.instance, &format!("head -c {max_bytes} -- {}", super::sh_quote(path))))
            .stdin(Stdio::null())
            .output()
            .map_err(|e| EnvError::new(e.to_string()))?;
        if !out.status.success() {
            return Err(EnvError::new(format!("{path}: {}", String::from_utf8_lossy(&out.stderr).trim())));
        }
        Ok(out.stdout)
    }

    fn cleanup(&self) {
        let _ = Command::new(&self.binary)
            .args(stop_args(&self.instance))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }

    fn has_host_access(&self) -> bool {
        false
    }
}
