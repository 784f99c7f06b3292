//! The `ssh` backend: one ControlMaster connection per task, `BatchMode=yes`, each
//! command as `bash -c '<script>'` on the remote host.

use super::{remote_kill_script, remote_wrap, sh_quote, ChildRun, EnvError, Environment, Running};
use crate::config::TerminalConfig;
use crate::output::{random_hex, run_id};
use std::process::{Command, Stdio};
use std::sync::atomic::AtomicU64;
use std::time::Duration;

pub struct SshEnv {
    target: String,
    port: u16,
    key: Option<String>,
    known_hosts: Option<String>,
    control_path: String,
    counter: AtomicU64,
    remote_tmp: String,
}

pub fn availability(config: &TerminalConfig) -> Option<String> {
    if which::which("ssh").is_err() {
        return Some("the ssh client was not found on PATH (install openssh-client)".into());
    }
    if config.ssh_host.is_none() {
        return Some(
            "no ssh host: set TERMINAL_SSH_HOST or terminal.ssh_host in config.yaml".into(),
        );
    }
    if let Some(key) = &config.ssh_key {
        if !std::path::Path::new(&expand_home(key)).is_file() {
            return Some(format!(
                "the ssh key {key} (TERMINAL_SSH_KEY / terminal.ssh_key) does not exist"
            ));
        }
    }
    None
}

fn expand_home(path: &str) -> String {
    match (path.strip_prefix("~/"), std::env::var("HOME")) {
        (Some(rest), Ok(home)) => format!("{home}/{rest}"),
        _ => path.to_string(),
    }
}

impl SshEnv {
    /// Opens the master connection (10 s connect timeout) and checks that bash runs.
    pub fn connect(config: &TerminalConfig) -> Result<SshEnv, EnvError> {
        if let Some(missing) = availability(config) {
            return Err(EnvError::new(missing));
        }
        let host = config.ssh_host.clone().unwrap_or_default();
        let target = match &config.ssh_user {
            Some(user) => format!("{user}@{host}"),
            None => host,
        };
        // Unix socket paths are short (108 bytes): keep it in /tmp.
        let control_path = format!("/tmp/hermes-ssh-{}.sock", random_hex(10));
        let env = SshEnv {
            target,
            port: config.ssh_port,
            key: config.ssh_key.as_deref().map(expand_home),
            known_hosts: config.ssh_known_hosts.as_deref().map(expand_home),
            control_path,
            counter: AtomicU64::new(0),
            remote_tmp: "/tmp".into(),
        };
        let out = env
            .command(&[
                "-o",
                "ControlMaster=yes",
                "-o",
                "ControlPersist=600",
                "-f",
                "-N",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .map_err(|e| EnvError::new(format!("cannot run ssh: {e}")))?;
        if !out.status.success() {
            return Err(EnvError::new(format!(
                "ssh connection to {} (port {}) failed: {}",
                env.target,
                env.port,
                String::from_utf8_lossy(&out.stderr).trim()
            ))
            .hint("check TERMINAL_SSH_HOST/_USER/_PORT/_KEY and that the host accepts the key without a password"));
        }
        Ok(env)
    }

    /// `ssh` with the connection options and the target; `extra` goes before the target.
    pub fn command(&self, extra: &[&str]) -> Command {
        let mut cmd = Command::new("ssh");
        cmd.args(self.base_args());
        cmd.args(extra);
        cmd.arg(&self.target);
        cmd
    }

    /// The options every ssh call uses.
    pub fn base_args(&self) -> Vec<String> {
        let mut args: Vec<String> = [
            "-o",
            "BatchMode=yes",
            "-o",
            "ConnectTimeout=10",
            "-o",
            "ServerAliveInterval=30",
            "-o",
            "StrictHostKeyChecking=accept-new",
            "-o",
            "LogLevel=ERROR",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(["-o".into(), format!("ControlPath={}", self.control_path)]);
        args.extend(["-p".into(), self.port.to_string()]);
        if let Some(key) = &self.key {
            args.extend([
                "-i".into(),
                key.clone(),
                "-o".into(),
                "IdentitiesOnly=yes".into(),
            ]);
        }
        if let Some(kh) = &self.known_hosts {
            args.extend(["-o".into(), format!("UserKnownHostsFile={kh}")]);
        }
        args
    }

    fn remote(&self, remote_command: &str) -> Command {
        let mut cmd = self.command(&["-o", "ControlMaster=no"]);
        cmd.arg("--").arg(remote_command);
        cmd
    }
}

impl Environment for SshEnv {
    fn backend(&self) -> &'static str {
        "ssh"
    }

    fn run_bash(
        &self,
        script: &str,
        login: bool,
        stdin: Option<Vec<u8>>,
    ) -> Result<Box<dyn Running>, EnvError> {
        let rid = run_id(&self.counter);
        let wrapped = remote_wrap(script, login, &self.remote_tmp, &rid);
        let cmd = self.remote(&format!("bash -c {}", sh_quote(&wrapped)));
        let run = ChildRun::spawn(cmd, stdin, false)
            .map_err(|e| EnvError::new(format!("cannot run ssh: {e}")))?;
        let killer_args = self.base_args();
        let target = self.target.clone();
        let tmp = self.remote_tmp.clone();
        let run = run.with_remote_kill(Box::new(move |grace: Duration| {
            let _ = Command::new("ssh")
                .args(&killer_args)
                .args(["-o", "ControlMaster=no"])
                .arg(&target)
                .arg("--")
                .arg(format!(
                    "bash -c {}",
                    sh_quote(&remote_kill_script(&tmp, &rid, grace))
                ))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }));
        Ok(Box::new(run))
    }

    fn temp_dir(&self) -> String {
        self.remote_tmp.clone()
    }

    fn default_cwd(&self) -> String {
        "~".into()
    }

    fn fetch_file(&self, path: &str, max_bytes: usize) -> Result<Vec<u8>, EnvError> {
        let out = self
            .remote(&format!("head -c {max_bytes} -- {}", sh_quote(path)))
            .stdin(Stdio::null())
            .output()
            .map_err(|e| EnvError::new(format!("cannot run ssh: {e}")))?;
        super::fetched(out, path)
    }

    fn cleanup(&self) {
        let _ = Command::new("ssh")
            .args(self.base_args())
            .args(["-O", "exit"])
            .arg(&self.target)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let _ = std::fs::remove_file(&self.control_path);
    }
}
