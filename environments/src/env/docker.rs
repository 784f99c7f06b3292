//! The `docker` backend, through the docker CLI or podman: one container per task
//! (`run -d ... sleep infinity`), commands through `exec`, resource limits, volumes, env
//! vars forwarded by name only, removal on cleanup.

use super::{remote_kill_script, remote_wrap, sh_quote, ChildRun, EnvError, Environment, Running};
use crate::config::TerminalConfig;
use crate::output::{random_hex, run_id};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

pub struct DockerEnv {
    binary: String,
    global_args: Vec<String>,
    run_args: Vec<String>,
    forward_env: Vec<String>,
    pub name: String,
    container: Mutex<String>,
    counter: AtomicU64,
    recreated: AtomicBool,
    host_access: bool,
    spec: RunSpec,
}

/// Everything `docker run` needs, kept to rebuild a lost container.
#[derive(Clone, Debug)]
struct RunSpec {
    image: String,
    cpu: f64,
    memory_mb: u64,
    volumes: Vec<String>,
    /// Mounts over what the volumes would show of the deny-read list.
    covers: Vec<String>,
    task_id: String,
}

/// The docker-compatible binary: `TERMINAL_DOCKER_BINARY` / `terminal.docker_binary`,
/// else `docker`, else `podman`.
pub fn binary(config: &TerminalConfig) -> Option<String> {
    super::configured_or_on_path(config.docker_binary.as_deref(), &["docker", "podman"])
}

pub fn availability(config: &TerminalConfig) -> Option<String> {
    let Some(bin) = binary(config) else {
        return Some(
            "neither docker nor podman was found on PATH (or set TERMINAL_DOCKER_BINARY)".into(),
        );
    };
    if !bin.contains('/') && which::which(&bin).is_err() {
        return Some(format!(
            "the container CLI '{bin}' (TERMINAL_DOCKER_BINARY) was not found on PATH"
        ));
    }
    if bin.contains('/') && !std::path::Path::new(&bin).is_file() {
        return Some(format!("{bin} (TERMINAL_DOCKER_BINARY) does not exist"));
    }
    if let Err(e) = &config.docker_volumes {
        return Some(e.clone());
    }
    None
}

/// The `run` arguments (after the binary and its global args) for a new container.
pub fn run_args(
    name: &str,
    image: &str,
    cpu: f64,
    memory_mb: u64,
    volumes: &[String],
    task_id: &str,
    extra: &[String],
) -> Vec<String> {
    let mut args: Vec<String> = vec![
        "run".into(),
        "-d".into(),
        "--name".into(),
        name.into(),
        "--label".into(),
        "hermes-agent=1".into(),
        "--label".into(),
        format!(
            "hermes-task={}",
            task_id
                .chars()
                .filter(|c| c.is_ascii_alphanumeric() || "-_.".contains(*c))
                .collect::<String>()
        ),
        "--cap-drop".into(),
        "ALL".into(),
        "--security-opt".into(),
        "no-new-privileges".into(),
        "--pids-limit".into(),
        "256".into(),
    ];
    if cpu > 0.0 {
        args.extend(["--cpus".into(), format!("{cpu}")]);
    }
    if memory_mb > 0 {
        args.extend(["--memory".into(), format!("{memory_mb}m")]);
    }
    for v in volumes {
        args.extend(["-v".into(), v.clone()]);
    }
    args.extend(extra.iter().cloned());
    args.extend([image.to_string(), "sleep".into(), "infinity".into()]);
    args
}

/// The `exec` arguments running `bash -c script`; env vars are passed by name only.
pub fn exec_args(
    container: &str,
    forward_env: &[String],
    interactive: bool,
    script: &str,
) -> Vec<String> {
    let mut args = vec!["exec".to_string()];
    if interactive {
        args.push("-i".into());
    }
    for name in forward_env {
        if std::env::var_os(name).is_some() {
            args.extend(["-e".into(), name.clone()]);
        }
    }
    args.extend([
        container.to_string(),
        "bash".into(),
        "-c".into(),
        script.to_string(),
    ]);
    args
}

/// Whether a volume's host side reaches the host's files (`/`, `~`, `./`, `../`, a drive).
/// Mounts that hide, inside the container, the places of the deny-read list a host
/// volume would show (`~/.ssh` of a home shared as `/home/me`): an empty directory or
/// file bound read-only over it (binds, which engines order by place, so each lands on
/// the volume it is inside; a tmpfs may be mounted first and end up beneath it). A volume that is itself inside such a
/// place is refused: it shares nothing but the secret.
fn deny_read_covers(
    volumes: &[String],
    deny: &[hermes_runtime::protected_paths::ProtectedPlace],
    (empty_file, empty_dir): &(std::path::PathBuf, std::path::PathBuf),
) -> Result<Vec<String>, EnvError> {
    use hermes_runtime::protected_paths::Extent;
    let mut covers = Vec::new();
    for volume in volumes.iter().filter(|v| is_host_volume(v)) {
        let mut parts = volume.splitn(3, ':');
        let (Some(source), Some(target)) = (parts.next(), parts.next()) else {
            continue;
        };
        let source = expand_home(source);
        let source = std::fs::canonicalize(&source).unwrap_or(source);
        let target = std::path::Path::new(target);
        for place in deny {
            let place_path = std::fs::canonicalize(&place.path).unwrap_or(place.path.clone());
            if source.starts_with(&place_path) {
                return Err(EnvError::new(format!(
                    "terminal.docker_volumes shares {}, which is on the deny-read list ({}): no tool or command reads it",
                    source.display(),
                    place.path.display()
                )));
            }
            let Ok(inside) = place_path.strip_prefix(&source) else {
                continue;
            };
            let inside = target.join(inside);
            let cover = match (place.extent, std::fs::metadata(&place_path)) {
                (Extent::Tree, Ok(meta)) if meta.is_dir() => empty_dir,
                (_, Ok(meta)) if meta.is_file() => empty_file,
                _ => continue,
            };
            covers.push(format!(
                "--mount=type=bind,source={},destination={},ro",
                cover.display(),
                inside.display()
            ));
        }
    }
    Ok(covers)
}

fn expand_home(path: &str) -> std::path::PathBuf {
    match (path.strip_prefix('~'), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => {
            std::path::PathBuf::from(home).join(rest.trim_start_matches('/'))
        }
        _ => std::path::PathBuf::from(path),
    }
}

fn is_host_volume(volume: &str) -> bool {
    let host = volume.split(':').next().unwrap_or("");
    host.starts_with('/')
        || host.starts_with('~')
        || host.starts_with("./")
        || host.starts_with("../")
        || (host.len() >= 2 && host.as_bytes()[1] == b':')
}

impl DockerEnv {
    pub fn start(
        config: &TerminalConfig,
        task_id: &str,
        local_cwd: &std::path::Path,
    ) -> Result<DockerEnv, EnvError> {
        let binary = binary(config).ok_or_else(|| {
            EnvError::new(
                "neither docker nor podman was found on PATH (or set TERMINAL_DOCKER_BINARY)",
            )
        })?;
        let mut volumes = match &config.docker_volumes {
            Ok(v) => v.clone(),
            Err(e) => return Err(EnvError::new(e.clone())),
        };
        if config.docker_mount_cwd {
            volumes.push(format!("{}:/workspace", local_cwd.display()));
        }
        // What the host shares into the container is read under the host's rules.
        let deny = config.access_policy(local_cwd);
        let empty = (
            hermes_sandbox::run_dir::empty_file().map_err(EnvError::new)?,
            hermes_sandbox::run_dir::empty_dir().map_err(EnvError::new)?,
        );
        let covers = deny_read_covers(&volumes, deny.deny_read(), &empty)?;
        let host_access = volumes.iter().any(|v| is_host_volume(v));
        let env = DockerEnv {
            binary,
            global_args: config.docker_global_args.clone(),
            run_args: config.docker_run_args.clone(),
            forward_env: config.docker_forward_env.clone(),
            name: format!("hermes-{}", random_hex(8)),
            container: Mutex::new(String::new()),
            counter: AtomicU64::new(0),
            recreated: AtomicBool::new(false),
            host_access,
            spec: RunSpec {
                image: config.docker_image.clone(),
                cpu: config.container_cpu,
                memory_mb: config.container_memory_mb,
                volumes,
                covers,
                task_id: task_id.to_string(),
            },
        };
        env.create_container()?;
        Ok(env)
    }

    fn cli(&self) -> Command {
        let mut cmd = Command::new(&self.binary);
        cmd.args(&self.global_args);
        cmd
    }

    fn create_container(&self) -> Result<(), EnvError> {
        let args = run_args(
            &self.name,
            &self.spec.image,
            self.spec.cpu,
            self.spec.memory_mb,
            &self.spec.volumes,
            &self.spec.task_id,
            &[self.spec.covers.clone(), self.run_args.clone()].concat(),
        );
        let out = self
            .cli()
            .args(&args)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| EnvError::new(format!("cannot run {}: {e}", self.binary)))?;
        if !out.status.success() {
            return Err(EnvError::new(format!(
                "{} run failed: {}",
                self.binary,
                String::from_utf8_lossy(&out.stderr).trim()
            ))
            .hint("check that the image exists locally or can be pulled, and that the container engine runs"));
        }
        let id = String::from_utf8_lossy(&out.stdout)
            .trim()
            .lines()
            .last()
            .unwrap_or("")
            .to_string();
        *self.container.lock().unwrap_or_else(|p| p.into_inner()) =
            if id.is_empty() { self.name.clone() } else { id };
        Ok(())
    }

    pub fn container_id(&self) -> String {
        self.container
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn is_running(&self) -> bool {
        self.cli()
            .args(["inspect", "-f", "{{.State.Running}}", &self.container_id()])
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "true")
            .unwrap_or(false)
    }
}

impl Environment for DockerEnv {
    fn backend(&self) -> &'static str {
        "docker"
    }

    fn run_bash(
        &self,
        script: &str,
        login: bool,
        stdin: Option<Vec<u8>>,
    ) -> Result<Box<dyn Running>, EnvError> {
        if !self.is_running() {
            // The container is gone (removed or crashed): build a new one.
            let _ = self
                .cli()
                .args(["rm", "-f", &self.container_id()])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
            self.create_container()?;
            self.recreated.store(true, Ordering::SeqCst);
        }
        let rid = run_id(&self.counter);
        let wrapped = remote_wrap(script, login, "/tmp", &rid);
        let container = self.container_id();
        let mut cmd = self.cli();
        cmd.args(exec_args(
            &container,
            &self.forward_env,
            stdin.is_some(),
            &wrapped,
        ));
        let run = ChildRun::spawn(cmd, stdin, false)
            .map_err(|e| EnvError::new(format!("cannot run {}: {e}", self.binary)))?;
        let binary = self.binary.clone();
        let global = self.global_args.clone();
        let run = run.with_remote_kill(Box::new(move |grace: Duration| {
            let _ = Command::new(&binary)
                .args(&global)
                .args([
                    "exec",
                    &container,
                    "bash",
                    "-c",
                    &remote_kill_script("/tmp", &rid, grace),
                ])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }));
        Ok(Box::new(run))
    }

    fn temp_dir(&self) -> String {
        "/tmp".into()
    }

    fn default_cwd(&self) -> String {
        if self
            .spec
            .volumes
            .iter()
            .any(|v| v.split(':').nth(1) == Some("/workspace"))
        {
            "/workspace".into()
        } else {
            "/root".into()
        }
    }

    fn fetch_file(&self, path: &str, max_bytes: usize) -> Result<Vec<u8>, EnvError> {
        let out = self
            .cli()
            .args([
                "exec",
                &self.container_id(),
                "bash",
                "-c",
                &format!("head -c {max_bytes} -- {}", sh_quote(path)),
            ])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| EnvError::new(format!("cannot run {}: {e}", self.binary)))?;
        super::fetched(out, path)
    }

    fn cleanup(&self) {
        // `kill` first: podman's `rm -f` would wait 10 s for `sleep` (PID 1) to stop.
        let _ = self
            .cli()
            .args(["kill", &self.container_id()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let _ = self
            .cli()
            .args(["rm", "-f", &self.container_id()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }

    fn has_host_access(&self) -> bool {
        self.host_access
    }

    fn take_recreated(&self) -> bool {
        self.recreated.swap(false, Ordering::SeqCst)
    }
}
