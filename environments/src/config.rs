//! The terminal's settings: `terminal.*` / `tool_output.*` in config.yaml, overridden by
//! the `TERMINAL_*` environment variables (reference §6).

use hermes_runtime::config::Config;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Everything the backends and the tool read, resolved once per call.
#[derive(Debug, Clone, PartialEq)]
pub struct TerminalConfig {
    pub backend: String,
    /// `TERMINAL_CWD` / `terminal.cwd`: where a task starts (backend default when unset).
    pub cwd: Option<String>,
    pub timeout: u64,
    pub max_foreground_timeout: u64,
    pub max_output_chars: usize,
    pub term_grace_seconds: f64,
    // ssh
    pub ssh_host: Option<String>,
    pub ssh_user: Option<String>,
    pub ssh_port: u16,
    pub ssh_key: Option<String>,
    pub ssh_known_hosts: Option<String>,
    // containers
    pub docker_binary: Option<String>,
    pub docker_global_args: Vec<String>,
    pub docker_run_args: Vec<String>,
    pub docker_image: String,
    pub docker_volumes: Result<Vec<String>, String>,
    pub docker_forward_env: Vec<String>,
    pub docker_mount_cwd: bool,
    pub container_cpu: f64,
    pub container_memory_mb: u64,
    pub container_disk_mb: u64,
    pub singularity_binary: Option<String>,
    pub singularity_image: String,
    // HTTP backends
    pub modal_image: String,
    /// `TERMINAL_MODAL_PYTHON`: an interpreter that already has the `modal` package
    /// (otherwise one is installed into `$HERMES_HOME/modal/venv` on first use).
    pub modal_python: Option<String>,
    pub daytona_image: String,
    /// `TERMINAL_DAYTONA_SNAPSHOT`: create from this snapshot instead of building the image.
    pub daytona_snapshot: Option<String>,
    pub daytona_api_url: String,
    pub vercel_runtime: String,
    pub vercel_api_url: String,
    /// `terminal.kubernetes_*` (with the container limits and the image).
    pub kubernetes: hermes_kubernetes::Settings,
    /// A `terminal.kubernetes_*` value that could not be read, reported when the
    /// kubernetes backend is used.
    pub kubernetes_error: Result<(), String>,
    pub hermes_home: std::path::PathBuf,
    /// The OS sandbox around local commands (`terminal.sandbox.*`).
    pub sandbox: SandboxSettings,
    /// `terminal.env_passthrough` / `TERMINAL_ENV_PASSTHROUGH`: extra variable names a
    /// local command inherits from the server (everything else but the allow-list is
    /// dropped).
    pub env_passthrough: Vec<String>,
}

/// `terminal.sandbox.mode` (default `workspace-write`), `.writable_roots`, `.network`
/// (default `loopback-off`, see [`network_settings`]), `.deny_read` (paths added to
/// the deny-read list).
#[derive(Debug, Clone, PartialEq)]
pub struct SandboxSettings {
    pub mode: hermes_sandbox::Mode,
    pub writable_roots: Vec<String>,
    pub network: hermes_sandbox::Network,
    /// `terminal.sandbox.limits.*` (see [`limits_settings`]).
    pub limits: hermes_sandbox::Limits,
    pub deny_read: Vec<String>,
}

pub const DEFAULT_IMAGE: &str = "nikolaik/python-nodejs:python3.11-nodejs20";

/// A setting: the environment variable wins, else `terminal.<key>` from config.yaml.
struct Source<'a> {
    config: &'a Config,
}

impl Source<'_> {
    fn string(&self, env: &str, key: &str) -> Option<String> {
        if let Ok(v) = std::env::var(env) {
            if !v.trim().is_empty() {
                return Some(v.trim().to_string());
            }
        }
        match self.config.get(&format!("terminal.{key}"))? {
            Value::String(s) if !s.trim().is_empty() => Some(s.trim().to_string()),
            Value::Number(n) => Some(n.to_string()),
            Value::Bool(b) => Some(b.to_string()),
            _ => None,
        }
    }

    fn list(&self, env: &str, key: &str) -> Result<Vec<String>, String> {
        if let Ok(v) = std::env::var(env) {
            if !v.trim().is_empty() {
                let v = v.trim();
                if v.starts_with('[') {
                    return serde_json::from_str::<Vec<String>>(v)
                        .map_err(|e| format!("{env} must be a JSON list of strings: {e}"));
                }
                return Ok(v
                    .split(',')
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty())
                    .collect());
            }
        }
        match self.config.get(&format!("terminal.{key}")) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(items)) => Ok(items
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()),
            Some(Value::String(s)) => Ok(s
                .split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect()),
            Some(_) => Err(format!("terminal.{key} must be a list of strings")),
        }
    }

    /// Whitespace-separated words (env) or a list (config).
    fn words(&self, env: &str, key: &str) -> Vec<String> {
        if let Ok(v) = std::env::var(env) {
            return v.split_whitespace().map(str::to_owned).collect();
        }
        match self.config.get(&format!("terminal.{key}")) {
            Some(Value::Array(items)) => items
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
            Some(Value::String(s)) => s.split_whitespace().map(str::to_owned).collect(),
            _ => Vec::new(),
        }
    }
}

fn number<T: std::str::FromStr>(raw: Option<String>, env: &str, default: T) -> Result<T, String> {
    match raw {
        None => Ok(default),
        Some(v) => v.parse().map_err(|_| {
            format!("{env} (or terminal config) has an invalid value '{v}': expected a number")
        }),
    }
}

impl TerminalConfig {
    /// The terminal's settings from `$HERMES_HOME/config.yaml` and the `TERMINAL_*`
    /// environment. An error names the key, what it takes, and the manual page that
    /// explains every key ([`hermes_runtime::config::SETTINGS_PAGE`]).
    pub fn load(hermes_home: &Path) -> Result<TerminalConfig, String> {
        TerminalConfig::read(hermes_home)
            .map_err(|e| format!("{e} (see {})", hermes_runtime::config::SETTINGS_PAGE))
    }

    fn read(hermes_home: &Path) -> Result<TerminalConfig, String> {
        let config = Config::load(hermes_home);
        let src = Source { config: &config };
        let backend = src
            .string("TERMINAL_ENV", "backend")
            .unwrap_or_else(|| "local".into())
            .to_lowercase();
        let backend = if backend == "vercel" {
            "vercel_sandbox".to_string()
        } else {
            backend
        };
        let max_output_chars = config
            .get("tool_output.max_bytes")
            .and_then(Value::as_u64)
            .filter(|n| *n > 0)
            .map(|n| n as usize)
            .unwrap_or(super::output::DEFAULT_MAX_OUTPUT);
        let term_grace_seconds = config
            .get("terminal.daemon_term_grace_seconds")
            .and_then(Value::as_f64)
            .filter(|n| *n >= 0.0)
            .unwrap_or(2.0);
        let image = src.string("TERMINAL_DOCKER_IMAGE", "docker_image");
        let docker_mount_cwd = src
            .string(
                "TERMINAL_DOCKER_MOUNT_CWD_TO_WORKSPACE",
                "docker_mount_cwd_to_workspace",
            )
            .is_some_and(|v| matches!(v.to_lowercase().as_str(), "1" | "true" | "yes"));
        let sandbox = sandbox_settings(&src)?;
        let container_cpu = number(
            src.string("TERMINAL_CONTAINER_CPU", "container_cpu"),
            "TERMINAL_CONTAINER_CPU",
            1.0,
        )?;
        let container_memory_mb = number(
            src.string("TERMINAL_CONTAINER_MEMORY", "container_memory"),
            "TERMINAL_CONTAINER_MEMORY",
            5120,
        )?;
        let container_disk_mb = number(
            src.string("TERMINAL_CONTAINER_DISK", "container_disk"),
            "TERMINAL_CONTAINER_DISK",
            51200,
        )?;
        let (kubernetes, kubernetes_error) = match kubernetes_settings(
            &src,
            image.clone().unwrap_or_else(|| DEFAULT_IMAGE.into()),
            (container_cpu, container_memory_mb, container_disk_mb),
        ) {
            Ok(k) => (k, Ok(())),
            Err(e) => (hermes_kubernetes::Settings::default(), Err(e)),
        };
        let env_passthrough = src.list("TERMINAL_ENV_PASSTHROUGH", "env_passthrough")?;
        Ok(TerminalConfig {
            sandbox,
            env_passthrough,
            cwd: src.string("TERMINAL_CWD", "cwd"),
            timeout: number(
                src.string("TERMINAL_TIMEOUT", "timeout"),
                "TERMINAL_TIMEOUT",
                180,
            )?,
            max_foreground_timeout: number(
                src.string("TERMINAL_MAX_FOREGROUND_TIMEOUT", "max_foreground_timeout"),
                "TERMINAL_MAX_FOREGROUND_TIMEOUT",
                600,
            )?,
            max_output_chars,
            term_grace_seconds,
            ssh_host: src.string("TERMINAL_SSH_HOST", "ssh_host"),
            ssh_user: src.string("TERMINAL_SSH_USER", "ssh_user"),
            ssh_port: number(
                src.string("TERMINAL_SSH_PORT", "ssh_port"),
                "TERMINAL_SSH_PORT",
                22,
            )?,
            ssh_key: src.string("TERMINAL_SSH_KEY", "ssh_key"),
            ssh_known_hosts: src.string("TERMINAL_SSH_KNOWN_HOSTS", "ssh_known_hosts"),
            docker_binary: src.string("TERMINAL_DOCKER_BINARY", "docker_binary"),
            docker_global_args: src.words("TERMINAL_DOCKER_GLOBAL_ARGS", "docker_global_args"),
            docker_run_args: src.words("TERMINAL_DOCKER_RUN_ARGS", "docker_run_args"),
            docker_image: image.clone().unwrap_or_else(|| DEFAULT_IMAGE.into()),
            docker_volumes: src.list("TERMINAL_DOCKER_VOLUMES", "docker_volumes"),
            docker_forward_env: src
                .list("TERMINAL_DOCKER_FORWARD_ENV", "docker_forward_env")
                .unwrap_or_default(),
            docker_mount_cwd,
            container_cpu,
            container_memory_mb,
            container_disk_mb,
            singularity_binary: src.string("TERMINAL_SINGULARITY_BINARY", "singularity_binary"),
            singularity_image: src
                .string("TERMINAL_SINGULARITY_IMAGE", "singularity_image")
                .unwrap_or_else(|| {
                    format!(
                        "docker://{}",
                        image.clone().unwrap_or_else(|| DEFAULT_IMAGE.into())
                    )
                }),
            modal_image: src
                .string("TERMINAL_MODAL_IMAGE", "modal_image")
                .unwrap_or_else(|| DEFAULT_IMAGE.into()),
            modal_python: src.string("TERMINAL_MODAL_PYTHON", "modal_python"),
            daytona_image: src
                .string("TERMINAL_DAYTONA_IMAGE", "daytona_image")
                .unwrap_or_else(|| DEFAULT_IMAGE.into()),
            daytona_snapshot: src.string("TERMINAL_DAYTONA_SNAPSHOT", "daytona_snapshot"),
            daytona_api_url: src
                .string("DAYTONA_API_URL", "daytona_api_url")
                .unwrap_or_else(|| "https://app.daytona.io/api".into()),
            vercel_runtime: src
                .string("TERMINAL_VERCEL_RUNTIME", "vercel_runtime")
                .unwrap_or_else(|| "node22".into()),
            vercel_api_url: src
                .string("VERCEL_API_URL", "vercel_api_url")
                .unwrap_or_else(|| "https://vercel.com/api".into()),
            kubernetes,
            kubernetes_error,
            hermes_home: hermes_home.to_path_buf(),
            backend,
        })
    }

    /// Two configurations that would build different environments differ here.
    pub fn fingerprint(&self) -> String {
        let mut copy = self.clone();
        copy.timeout = 0;
        copy.max_foreground_timeout = 0;
        copy.max_output_chars = 0;
        copy.term_grace_seconds = 0.0;
        format!("{copy:?}")
    }

    /// A secret from the environment, else `terminal.<key>` in config.yaml.
    pub fn secret(&self, env: &str, key: &str) -> Option<String> {
        let config = Config::load(&self.hermes_home);
        Source { config: &config }.string(env, key)
    }
}

/// The `terminal.kubernetes_*` keys; `image` is `docker_image` (or its default) and
/// `limits` the container cpu, memory and disk, used unless the kubernetes keys say
/// otherwise. A value that cannot be read is an error naming the key.
fn kubernetes_settings(
    src: &Source<'_>,
    image: String,
    limits: (f64, u64, u64),
) -> Result<hermes_kubernetes::Settings, String> {
    // A structured value: JSON in the variable `env` (read as `from_env`), else the
    // config.yaml value.
    let structured = |env: &str,
                      from_env: Result<String, std::env::VarError>,
                      configured: Option<&Value>|
     -> Result<Option<Value>, String> {
        if let Ok(v) = from_env {
            if !v.trim().is_empty() {
                return serde_json::from_str(v.trim())
                    .map(Some)
                    .map_err(|e| format!("{env} must be JSON: {e}"));
            }
        }
        Ok(configured.filter(|v| !v.is_null()).cloned())
    };
    let mut node_selector = std::collections::BTreeMap::new();
    match structured(
        "TERMINAL_KUBERNETES_NODE_SELECTOR",
        std::env::var("TERMINAL_KUBERNETES_NODE_SELECTOR"),
        src.config.get("terminal.kubernetes_node_selector"),
    )? {
        None => {}
        Some(Value::Object(map)) => {
            for (k, v) in map {
                let v = match v {
                    Value::String(s) => s,
                    Value::Number(_) | Value::Bool(_) => v.to_string(),
                    _ => {
                        return Err(format!(
                            "terminal.kubernetes_node_selector.{k} must be a string"
                        ))
                    }
                };
                node_selector.insert(k, v);
            }
        }
        Some(_) => {
            return Err(
                "terminal.kubernetes_node_selector must be a mapping of label to value".into(),
            )
        }
    }
    let tolerations = match structured(
        "TERMINAL_KUBERNETES_TOLERATIONS",
        std::env::var("TERMINAL_KUBERNETES_TOLERATIONS"),
        src.config.get("terminal.kubernetes_tolerations"),
    )? {
        None => Vec::new(),
        Some(Value::Array(items)) if items.iter().all(Value::is_object) => items,
        Some(_) => {
            return Err("terminal.kubernetes_tolerations must be a list of mappings (key, operator, value, effect)".into())
        }
    };
    let seconds = |raw: Option<String>, key: &str, default: u64| -> Result<u64, String> {
        match raw {
            None => Ok(default),
            Some(v) => v.parse().map_err(|_| {
                format!("terminal.{key} must be a whole number of seconds; got '{v}'")
            }),
        }
    };
    Ok(hermes_kubernetes::Settings {
        kubeconfig: src
            .string("TERMINAL_KUBERNETES_KUBECONFIG", "kubernetes_kubeconfig")
            .map(|p| expand_home(&p, home_dir().as_deref())),
        context: src.string("TERMINAL_KUBERNETES_CONTEXT", "kubernetes_context"),
        namespace: src.string("TERMINAL_KUBERNETES_NAMESPACE", "kubernetes_namespace"),
        image: src
            .string("TERMINAL_KUBERNETES_IMAGE", "kubernetes_image")
            .unwrap_or(image),
        runtime_class: src.string(
            "TERMINAL_KUBERNETES_RUNTIME_CLASS",
            "kubernetes_runtime_class",
        ),
        cpu: limits.0,
        memory_mb: limits.1,
        disk_mb: limits.2,
        node_selector,
        tolerations,
        image_pull_secret: src.string(
            "TERMINAL_KUBERNETES_IMAGE_PULL_SECRET",
            "kubernetes_image_pull_secret",
        ),
        pod_lifetime_secs: seconds(
            src.string(
                "TERMINAL_KUBERNETES_POD_LIFETIME",
                "kubernetes_pod_lifetime",
            ),
            "kubernetes_pod_lifetime",
            21600,
        )?,
        start_timeout_secs: seconds(
            src.string(
                "TERMINAL_KUBERNETES_START_TIMEOUT",
                "kubernetes_start_timeout",
            ),
            "kubernetes_start_timeout",
            120,
        )?,
        warm_pool: src.string("TERMINAL_KUBERNETES_WARM_POOL", "kubernetes_warm_pool"),
    })
}

/// The sandbox keys. A value that cannot be read is an error, never a silent `off`.
fn sandbox_settings(src: &Source<'_>) -> Result<SandboxSettings, String> {
    let mode = match src.string("TERMINAL_SANDBOX_MODE", "sandbox.mode") {
        None => hermes_sandbox::Mode::WorkspaceWrite,
        Some(word) => hermes_sandbox::Mode::parse(&word)?,
    };
    let network = network_settings(src)?;
    let writable_roots = src.list("TERMINAL_SANDBOX_WRITABLE_ROOTS", "sandbox.writable_roots")?;
    let deny_read = src.list("TERMINAL_SANDBOX_DENY_READ", "sandbox.deny_read")?;
    Ok(SandboxSettings {
        mode,
        writable_roots,
        network,
        limits: limits_settings(src)?,
        deny_read,
    })
}

/// `terminal.sandbox.network`: `off`, `loopback-off` (the default), `true`/`false`
/// (the same two), or a mapping `{allow: [host, "*.domain", "host:port"]}`
/// (`TERMINAL_SANDBOX_NETWORK_ALLOW`, comma-separated, for the list).
fn network_settings(src: &Source<'_>) -> Result<hermes_sandbox::Network, String> {
    use hermes_sandbox::Network;
    let set = |name: &str| std::env::var(name).is_ok_and(|v| !v.trim().is_empty());
    let word_from_env = set("TERMINAL_SANDBOX_NETWORK");
    let configured = src.config.get("terminal.sandbox.network");
    let mapping = match configured {
        Some(Value::Object(keys)) if !word_from_env => {
            if let Some(other) = keys.keys().find(|k| k.as_str() != "allow") {
                return Err(format!(
                    "terminal.sandbox.network has no key '{other}': it is {}",
                    Network::FORMS
                ));
            }
            true
        }
        _ => false,
    };
    if mapping || set("TERMINAL_SANDBOX_NETWORK_ALLOW") {
        let allow = src.list("TERMINAL_SANDBOX_NETWORK_ALLOW", "sandbox.network.allow")?;
        return Ok(Network::Proxied { allow });
    }
    match src.string("TERMINAL_SANDBOX_NETWORK", "sandbox.network") {
        Some(word) => Network::parse(&word),
        None if configured.is_some_and(|v| v.is_array() || v.is_object()) => Err(format!(
            "terminal.sandbox.network must be {}",
            Network::FORMS
        )),
        None => Ok(Network::default()),
    }
}

/// `terminal.sandbox.limits.max_processes`, `.max_memory_mb`, `.max_file_size_mb`,
/// `.max_cpu_seconds` (or `TERMINAL_SANDBOX_MAX_PROCESSES`, ...): a whole number, or
/// 0 / `unlimited` for none; absent keys keep the defaults of [`hermes_sandbox::Limits`].
fn limits_settings(src: &Source<'_>) -> Result<hermes_sandbox::Limits, String> {
    let defaults = hermes_sandbox::Limits::default();
    let read = |name: &str, default: Option<u64>| -> Result<Option<u64>, String> {
        let env = format!("TERMINAL_SANDBOX_{}", name.to_ascii_uppercase());
        match src.string(&env, &format!("sandbox.limits.{name}")) {
            None => Ok(default),
            Some(v) if v == "unlimited" || v == "0" => Ok(None),
            Some(v) => v.parse().map(Some).map_err(|_| {
                format!(
                    "terminal.sandbox.limits.{name} (or {env}) must be a whole number, or 0 or 'unlimited' for no \
                     limit; got '{v}'"
                )
            }),
        }
    };
    Ok(hermes_sandbox::Limits {
        max_processes: read("max_processes", defaults.max_processes)?,
        max_memory_mb: read("max_memory_mb", defaults.max_memory_mb)?,
        max_file_size_mb: read("max_file_size_mb", defaults.max_file_size_mb)?,
        max_cpu_seconds: read("max_cpu_seconds", defaults.max_cpu_seconds)?,
    })
}

/// `$HOME`, when set.
fn home_dir() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}

/// `~` and `~/...` against the home directory.
fn expand_home(path: &str, home: Option<&Path>) -> PathBuf {
    match (path.strip_prefix("~/"), home) {
        (Some(rest), Some(home)) => home.join(rest),
        (None, Some(home)) if path == "~" => home.to_path_buf(),
        _ => PathBuf::from(path),
    }
}

impl TerminalConfig {
    /// The places a local command may write under `workspace-write`, for a task whose
    /// working directory is `cwd`: `cwd`, the temp directory, `/tmp`, an absolute
    /// `terminal.cwd`, and `terminal.sandbox.writable_roots`.
    pub fn writable_roots(&self, cwd: &Path) -> Vec<PathBuf> {
        let home = home_dir();
        let mut roots = vec![
            cwd.to_path_buf(),
            PathBuf::from(crate::env::local::local_temp_dir()),
            PathBuf::from("/tmp"),
        ];
        roots.extend(
            self.cwd
                .as_deref()
                .filter(|c| c.starts_with('/') || c.starts_with('~'))
                .map(|c| expand_home(c, home.as_deref())),
        );
        roots.extend(
            self.sandbox
                .writable_roots
                .iter()
                .map(|r| expand_home(r, home.as_deref())),
        );
        roots
    }

    /// The access policy of a task whose working directory is `cwd`: what every door
    /// (the sandbox, the file tools, text_to_speech, skills, cron) allows the model to
    /// write and read. Writes are bounded by [`TerminalConfig::writable_roots`] (none
    /// under `read-only`; unbounded, but for the protected places, under `off`).
    pub fn access_policy(&self, cwd: &Path) -> hermes_runtime::access::AccessPolicy {
        let home = home_dir().unwrap_or_else(|| PathBuf::from("/"));
        let roots = match self.sandbox.mode {
            hermes_sandbox::Mode::WorkspaceWrite => Some(self.writable_roots(cwd)),
            hermes_sandbox::Mode::ReadOnly => Some(Vec::new()),
            hermes_sandbox::Mode::Off => None,
        };
        let extra: Vec<PathBuf> = self
            .sandbox
            .deny_read
            .iter()
            .map(|p| expand_home(p, Some(&home)))
            .collect();
        hermes_runtime::access::AccessPolicy::new(&home, &self.hermes_home)
            .with_writable_roots(roots)
            .with_deny_read(&extra)
            .with_safe_roots(std::env::var_os("HERMES_WRITE_SAFE_ROOT"))
    }
}

/// `TERMINAL_KEEP_WARM_SECONDS` (30): an idle local task's sandbox and waiting shell
/// are ended after this (see `Environment::cool`); its state stays for its next command.
pub fn keep_warm_seconds() -> u64 {
    std::env::var("TERMINAL_KEEP_WARM_SECONDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30)
}

/// `TERMINAL_LIFETIME_SECONDS` (300): idle environments are reaped after this.
pub fn lifetime_seconds() -> u64 {
    std::env::var("TERMINAL_LIFETIME_SECONDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300)
}
