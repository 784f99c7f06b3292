//! The `singularity` backend, through the `apptainer` (or `singularity`) CLI: one
//! instance per task, commands through `exec instance://<name>`, `instance stop` on
//! cleanup.
//!
//! The container sees none of the host's environment (`--cleanenv`, on start and on
//! every exec) except an allow-list handed over as `APPTAINERENV_*` / `SINGULARITYENV_*`
//! variables (the CLI's documented way past `--cleanenv`): a container PATH, LANG, TERM
//! and the `terminal.env_passthrough` names; HOME is the container's own (the CLI sets it
//! and refuses to have it overridden that way); the task's own exports travel in its
//! shell snapshot. The root filesystem is read-only with a tmpfs overlay
//! (`--writable-tmpfs`), the instance gets `--cpus` / `--memory` from the container
//! settings, and a remote image (`docker://...`, `library://...`) is converted to a SIF
//! once, cached under `$HERMES_HOME/cache/singularity/`.

use super::{remote_kill_script, remote_wrap, ChildRun, EnvError, Environment, Running};
use crate::config::TerminalConfig;
use crate::output::{random_hex, run_id};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::AtomicU64;
use std::time::Duration;

/// The PATH inside the container (the host's would name host directories).
pub const CONTAINER_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

pub struct SingularityEnv {
    binary: String,
    pub instance: String,
    env: Vec<(String, String)>,
    counter: AtomicU64,
}

/// `TERMINAL_SINGULARITY_BINARY`, else `apptainer`, else `singularity`.
pub fn binary(config: &TerminalConfig) -> Option<String> {
    super::configured_or_on_path(
        config.singularity_binary.as_deref(),
        &["apptainer", "singularity"],
    )
}

pub fn availability(config: &TerminalConfig) -> Option<String> {
    match binary(config) {
        None => Some("neither apptainer nor singularity was found on PATH (or set TERMINAL_SINGULARITY_BINARY)".into()),
        Some(b) if !b.contains('/') && which::which(&b).is_err() => Some(format!("'{b}' was not found on PATH")),
        Some(b) if b.contains('/') && !std::path::Path::new(&b).is_file() => {
            Some(format!("{b} (TERMINAL_SINGULARITY_BINARY) does not exist"))
        }
        Some(_) => None,
    }
}

/// The variables the container may see: `(name, value)` from the allow-list, read from
/// `host` (the host's environment).
pub fn allowed_env(
    host: &dyn Fn(&str) -> Option<String>,
    passthrough: &[String],
) -> Vec<(String, String)> {
    let mut env = vec![("PATH".to_string(), CONTAINER_PATH.to_string())];
    for name in ["LANG", "TERM"]
        .iter()
        .map(|n| n.to_string())
        .chain(passthrough.iter().cloned())
    {
        if env.iter().any(|(n, _)| *n == name) || !is_env_name(&name) {
            continue;
        }
        if let Some(value) = host(&name) {
            env.push((name, value));
        }
    }
    env
}

fn is_env_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The allow-list as the CLI's environment: both prefixes, for either binary.
fn cli_env(env: &[(String, String)]) -> Vec<(String, String)> {
    env.iter()
        .flat_map(|(k, v)| {
            [
                (format!("APPTAINERENV_{k}"), v.clone()),
                (format!("SINGULARITYENV_{k}"), v.clone()),
            ]
        })
        .collect()
}

/// `instance start` arguments.
pub fn start_args(image: &str, instance: &str, cpus: f64, memory_mb: u64) -> Vec<String> {
    let mut args: Vec<String> = [
        "instance",
        "start",
        "--containall",
        "--no-home",
        "--cleanenv",
        "--writable-tmpfs",
    ]
    .map(String::from)
    .into();
    if cpus > 0.0 {
        args.extend(["--cpus".into(), format!("{cpus}")]);
    }
    if memory_mb > 0 {
        args.extend(["--memory".into(), format!("{memory_mb}M")]);
    }
    args.extend([image.to_string(), instance.to_string()]);
    args
}

/// `exec` arguments running `bash -c script` in the instance.
pub fn exec_args(instance: &str, script: &str) -> Vec<String> {
    vec![
        "exec".into(),
        "--cleanenv".into(),
        format!("instance://{instance}"),
        "bash".into(),
        "-c".into(),
        script.into(),
    ]
}

/// `instance stop` arguments.
pub fn stop_args(instance: &str) -> Vec<String> {
    vec!["instance".into(), "stop".into(), instance.into()]
}

/// Whether the image must be converted (a URI rather than a local SIF or directory).
pub fn is_remote_image(image: &str) -> bool {
    image.contains("://") && !Path::new(image).exists()
}

/// Where the SIF converted from `image` is kept.
pub fn sif_path(hermes_home: &Path, image: &str) -> PathBuf {
    let name: String = image
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    hermes_home
        .join("cache/singularity")
        .join(format!("{name}.sif"))
}

/// The image to start: a local path as is, a remote one converted to a cached SIF once.
fn local_image(binary: &str, config: &TerminalConfig) -> Result<String, EnvError> {
    let image = &config.singularity_image;
    if !is_remote_image(image) {
        return Ok(image.clone());
    }
    let sif = sif_path(&config.hermes_home, image);
    if sif.is_file() {
        return Ok(sif.display().to_string());
    }
    let dir = sif.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)
        .map_err(|e| EnvError::new(format!("cannot create {}: {e}", dir.display())))?;
    // Built under a temporary name so a failed or concurrent build never leaves a partial
    // SIF where the next start would use it.
    let partial = dir.join(format!(".{}.{}.partial", random_hex(8), std::process::id()));
    let out = Command::new(binary)
        .args(["build", "--force"])
        .arg(&partial)
        .arg(image)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| EnvError::new(format!("cannot run {binary}: {e}")))?;
    if !out.status.success() {
        let _ = std::fs::remove_file(&partial);
        return Err(EnvError::new(format!(
            "{binary} build of {image} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
        .hint("check the image name and the network, then retry"));
    }
    std::fs::rename(&partial, &sif)
        .map_err(|e| EnvError::new(format!("cannot store {}: {e}", sif.display())))?;
    Ok(sif.display().to_string())
}

impl SingularityEnv {
    pub fn start(config: &TerminalConfig) -> Result<SingularityEnv, EnvError> {
        if let Some(missing) = availability(config) {
            return Err(EnvError::new(missing));
        }
        let binary = binary(config).unwrap_or_default();
        let image = local_image(&binary, config)?;
        let env = allowed_env(&|name| std::env::var(name).ok(), &config.env_passthrough);
        let instance = format!("hermes-{}", random_hex(8));
        let out = Command::new(&binary)
            .args(start_args(
                &image,
                &instance,
                config.container_cpu,
                config.container_memory_mb,
            ))
            .envs(cli_env(&env))
            .stdin(Stdio::null())
            .output()
            .map_err(|e| EnvError::new(format!("cannot run {binary}: {e}")))?;
        if !out.status.success() {
            return Err(EnvError::new(format!(
                "{binary} instance start failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(SingularityEnv {
            binary,
            instance,
            env,
            counter: AtomicU64::new(0),
        })
    }

    fn exec(&self, script: &str) -> Command {
        exec_command(&self.binary, &self.instance, &self.env, script)
    }
}

fn exec_command(binary: &str, instance: &str, env: &[(String, String)], script: &str) -> Command {
    let mut cmd = Command::new(binary);
    cmd.args(exec_args(instance, script)).envs(cli_env(env));
    cmd
}

impl Environment for SingularityEnv {
    fn backend(&self) -> &'static str {
        "singularity"
    }

    fn run_bash(
        &self,
        script: &str,
        login: bool,
        stdin: Option<Vec<u8>>,
    ) -> Result<Box<dyn Running>, EnvError> {
        let rid = run_id(&self.counter);
        let wrapped = remote_wrap(script, login, "/tmp", &rid);
        let run = ChildRun::spawn(self.exec(&wrapped), stdin, false)
            .map_err(|e| EnvError::new(format!("cannot run {}: {e}", self.binary)))?;
        let (binary, instance, env) =
            (self.binary.clone(), self.instance.clone(), self.env.clone());
        Ok(Box::new(run.with_remote_kill(Box::new(
            move |grace: Duration| {
                let _ = exec_command(
                    &binary,
                    &instance,
                    &env,
                    &remote_kill_script("/tmp", &rid, grace),
                )
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
            },
        ))))
    }

    fn temp_dir(&self) -> String {
        "/tmp".into()
    }

    fn default_cwd(&self) -> String {
        "/tmp".into()
    }

    fn fetch_file(&self, path: &str, max_bytes: usize) -> Result<Vec<u8>, EnvError> {
        let out = self
            .exec(&format!("head -c {max_bytes} -- {}", super::sh_quote(path)))
            .stdin(Stdio::null())
            .output()
            .map_err(|e| EnvError::new(e.to_string()))?;
        super::fetched(out, path)
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
