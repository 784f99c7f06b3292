//! The approval settings read from `$HERMES_HOME/config.yaml` (reference §6), with the
//! original's coercions. Reading never fails: a bad value falls back to its default and
//! leaves a warning in [`ApprovalPolicy::warnings`].

use crate::config::Config;
use serde_json::Value;
use std::time::Duration;

/// `approvals.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ApprovalMode {
    /// A human decides every flagged command.
    Manual,
    /// An auxiliary model reviews first; it can approve, deny or hand over to a human.
    Smart,
    /// No approval at all (the floors still apply).
    Off,
}

impl ApprovalMode {
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalMode::Manual => "manual",
            ApprovalMode::Smart => "smart",
            ApprovalMode::Off => "off",
        }
    }
}

/// What a context without a human does with a flagged command
/// (`approvals.cron_mode`, `single_query_mode`, `unattended_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NoHumanMode {
    Deny,
    Approve,
}

/// Where an auxiliary model for `approvals.mode: smart` is reached: an OpenAI-compatible
/// endpoint (`approvals.smart.base_url`, e.g. `http://127.0.0.1:8080/v1`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SmartEndpoint {
    pub base_url: String,
    pub model: String,
    /// The name of the environment variable holding the API key (`approvals.smart.api_key_env`).
    pub api_key_env: Option<String>,
    /// Seconds for the whole request (`approvals.smart.timeout`, default 30).
    pub timeout: Duration,
}

/// Every `approvals.*` key this module reads, plus the top-level `command_allowlist`.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalPolicy {
    pub mode: ApprovalMode,
    /// Prompt and gateway wait (`approvals.timeout`, default 300 s).
    pub timeout: Duration,
    pub cron_mode: NoHumanMode,
    pub single_query_mode: NoHumanMode,
    pub unattended_mode: NoHumanMode,
    /// `approvals.deny` globs (floor, even on isolated backends).
    pub deny: Vec<String>,
    /// Consecutive smart denials before the breaker notice; `<= 0` disables it.
    pub denial_breaker_threshold: i64,
    /// `approvals.smart_policy`: extra rules appended to the reviewer's system prompt.
    pub smart_policy: String,
    /// `None` when `approvals.smart.base_url` or `model` is missing (smart then escalates).
    pub smart: Option<SmartEndpoint>,
    /// `security.tirith_fail_open` (default true): an unavailable external scanner is ignored.
    pub scanner_fail_open: bool,
    /// Top-level `command_allowlist`.
    pub command_allowlist: Vec<String>,
    /// What was wrong with the configuration (already printed once to stderr).
    pub warnings: Vec<String>,
}

pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);
pub const DEFAULT_BREAKER_THRESHOLD: i64 = 3;

impl Default for ApprovalPolicy {
    fn default() -> Self {
        ApprovalPolicy {
            mode: ApprovalMode::Manual,
            timeout: DEFAULT_TIMEOUT,
            cron_mode: NoHumanMode::Deny,
            single_query_mode: NoHumanMode::Deny,
            unattended_mode: NoHumanMode::Deny,
            deny: Vec::new(),
            denial_breaker_threshold: DEFAULT_BREAKER_THRESHOLD,
            smart_policy: String::new(),
            smart: None,
            scanner_fail_open: true,
            command_allowlist: Vec::new(),
            warnings: Vec::new(),
        }
    }
}

impl ApprovalPolicy {
    /// Reads `config.yaml` of `hermes_home`; a missing or broken file gives the defaults.
    pub fn load(hermes_home: &std::path::Path) -> ApprovalPolicy {
        ApprovalPolicy::from_config(&Config::load(hermes_home))
    }

    pub fn from_config(config: &Config) -> ApprovalPolicy {
        let mut warnings = Vec::new();
        let (mode, warning) = parse_mode(config.get("approvals.mode"));
        warnings.extend(warning);
        let timeout = match config.get("approvals.timeout") {
            None | Some(Value::Null) => DEFAULT_TIMEOUT,
            Some(value) => match value.as_f64().filter(|s| s.is_finite() && *s > 0.0) {
                Some(secs) => Duration::from_secs_f64(secs.min(7.0 * 24.0 * 3600.0)),
                None => {
                    warnings.push(format!("approvals.timeout must be a positive number of seconds, got {value}; using 300"));
                    DEFAULT_TIMEOUT
                }
            },
        };
        let denial_breaker_threshold = match config.get("approvals.denial_breaker_threshold") {
            None | Some(Value::Null) => DEFAULT_BREAKER_THRESHOLD,
            Some(value) => match value.as_i64().or_else(|| value.as_f64().map(|f| f as i64)) {
                Some(n) => n,
                None => {
                    warnings.push(format!("approvals.denial_breaker_threshold must be an integer, got {value}; using 3"));
                    DEFAULT_BREAKER_THRESHOLD
                }
            },
        };
        let deny = match config.get("approvals.deny") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::String(s)) if !s.trim().is_empty() => vec![s.clone()],
            Some(Value::Array(items)) => items
                .iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .filter(|s| !s.trim().is_empty())
                .collect(),
            Some(other) => {
                warnings.push(format!(
                    "approvals.deny must be a list of globs, got {other}; ignored"
                ));
                Vec::new()
            }
        };
        let smart = {
            let text = |key: &str| config.text(key);
            match (
                text("approvals.smart.base_url"),
                text("approvals.smart.model"),
            ) {
                (Some(base_url), Some(model)) => Some(SmartEndpoint {
                    base_url,
                    model,
                    api_key_env: text("approvals.smart.api_key_env"),
                    timeout: config
                        .get("approvals.smart.timeout")
                        .and_then(Value::as_f64)
                        .filter(|s| s.is_finite() && *s > 0.0)
                        .map(Duration::from_secs_f64)
                        .unwrap_or(Duration::from_secs(30)),
                }),
                _ => None,
            }
        };
        let (command_allowlist, warning) = parse_allowlist(config.get("command_allowlist"));
        warnings.extend(warning);
        for warning in &warnings {
            eprintln!("warning: {warning} (see {})", crate::config::SETTINGS_PAGE);
        }
        ApprovalPolicy {
            mode,
            timeout,
            cron_mode: parse_no_human_mode(config.get("approvals.cron_mode")),
            single_query_mode: parse_no_human_mode(config.get("approvals.single_query_mode")),
            unattended_mode: parse_no_human_mode(config.get("approvals.unattended_mode")),
            deny,
            denial_breaker_threshold,
            smart_policy: config
                .get("approvals.smart_policy")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            smart,
            scanner_fail_open: config
                .get("security.tirith_fail_open")
                .and_then(Value::as_bool)
                .unwrap_or(true),
            command_allowlist,
            warnings,
        }
    }

    /// The breaker threshold when enabled.
    pub fn breaker_threshold(&self) -> Option<u32> {
        (self.denial_breaker_threshold > 0)
            .then(|| self.denial_breaker_threshold.min(u32::MAX as i64) as u32)
    }
}

/// `approvals.mode` with the original's coercions: `false` -> off, `true` -> manual,
/// absent/empty -> manual, an unknown word -> manual with a warning.
pub fn parse_mode(value: Option<&Value>) -> (ApprovalMode, Option<String>) {
    match value {
        None | Some(Value::Null) => (ApprovalMode::Manual, None),
        Some(Value::Bool(false)) => (ApprovalMode::Off, None),
        Some(Value::Bool(true)) => (ApprovalMode::Manual, None),
        Some(Value::String(s)) => match s.trim().to_ascii_lowercase().as_str() {
            "off" => (ApprovalMode::Off, None),
            "smart" => (ApprovalMode::Smart, None),
            "manual" | "" => (ApprovalMode::Manual, None),
            other => (
                ApprovalMode::Manual,
                Some(format!(
                    "approvals.mode '{other}' is not one of manual, smart, off; using manual"
                )),
            ),
        },
        Some(other) => (
            ApprovalMode::Manual,
            Some(format!(
                "approvals.mode must be manual, smart or off, got {other}; using manual"
            )),
        ),
    }
}

/// `approve`, `off`, `allow`, `yes` (and YAML `true`) approve; anything else denies.
pub fn parse_no_human_mode(value: Option<&Value>) -> NoHumanMode {
    match value {
        Some(Value::Bool(true)) => NoHumanMode::Approve,
        Some(Value::String(s))
            if matches!(
                s.trim().to_ascii_lowercase().as_str(),
                "approve" | "off" | "allow" | "yes"
            ) =>
        {
            NoHumanMode::Approve
        }
        _ => NoHumanMode::Deny,
    }
}

/// Top-level `command_allowlist`: a list of strings. A legacy scalar is parsed as YAML
/// (with a warning); any other type is ignored (with a warning).
pub fn parse_allowlist(value: Option<&Value>) -> (Vec<String>, Option<String>) {
    fn strings(items: &[Value]) -> Vec<String> {
        items
            .iter()
            .filter_map(|v| match v {
                Value::String(s) => Some(s.trim().to_string()),
                Value::Number(n) => Some(n.to_string()),
                _ => None,
            })
            .filter(|s| !s.is_empty())
            .collect()
    }
    match value {
        None | Some(Value::Null) => (Vec::new(), None),
        Some(Value::Array(items)) => (strings(items), None),
        Some(Value::String(text)) => {
            let warning = Some("command_allowlist should be a YAML list of strings; a single string was read as YAML".to_string());
            match serde_yaml_ng::from_str::<Value>(text) {
                Ok(Value::Array(items)) => (strings(&items), warning),
                Ok(Value::String(s)) if !s.trim().is_empty() => {
                    (vec![s.trim().to_string()], warning)
                }
                _ if !text.trim().is_empty() => (vec![text.trim().to_string()], warning),
                _ => (Vec::new(), warning),
            }
        }
        Some(other) => (
            Vec::new(),
            Some(format!(
                "command_allowlist must be a list of strings, got {other}; ignored"
            )),
        ),
    }
}
