//! The `browser.*` settings of config.yaml and `BROWSER_CDP_URL`.

use hermes_runtime::config::Config;
use serde_json::Value;
use std::time::Duration;

/// What a dialog does when it opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DialogPolicy {
    /// Kept open for `browser_dialog`, dismissed after `dialog_timeout`.
    MustRespond,
    AutoDismiss,
    AutoAccept,
}

#[derive(Debug, Clone)]
pub struct Settings {
    /// `browser.executable`: a path or a name on PATH.
    pub executable: Option<String>,
    /// `BROWSER_CDP_URL`, else `browser.cdp_url`.
    pub cdp_url: Option<String>,
    /// `browser.inactivity_timeout` (seconds, default 120).
    pub inactivity_timeout: Duration,
    /// `browser.allow_file_urls`: `file://` pages, each checked by the access policy.
    pub allow_file_urls: bool,
    /// `browser.restrict_evaluate`: refuse cookie, storage and network APIs in
    /// `browser_console` expressions.
    pub restrict_evaluate: bool,
    /// `browser.allow_unsafe_evaluate`: overrides `restrict_evaluate`.
    pub allow_unsafe_evaluate: bool,
    pub dialog_policy: DialogPolicy,
    /// `browser.dialog_timeout_s` (default 300).
    pub dialog_timeout: Duration,
    /// `browser.command_timeout` (seconds, default 30): a navigation's wait for load.
    pub command_timeout: Duration,
    /// The OS sandbox a launched Chromium runs in (the policy the task's commands run
    /// under, given by the caller; the browser's profile directory is added to its
    /// state directories). `None`: `terminal.sandbox.mode: off`, or not given.
    pub sandbox: Option<hermes_sandbox::Policy>,
}

fn truthy(value: Option<&Value>) -> bool {
    match value {
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => matches!(
            s.trim().to_lowercase().as_str(),
            "true" | "1" | "yes" | "on"
        ),
        Some(Value::Number(n)) => n.as_i64() == Some(1),
        _ => false,
    }
}

fn seconds(value: Option<&Value>) -> Option<Duration> {
    let n = match value? {
        Value::Number(n) => n.as_f64()?,
        Value::String(s) => s.trim().parse().ok()?,
        _ => return None,
    };
    (n.is_finite() && n > 0.0).then(|| Duration::from_secs_f64(n))
}

/// Whether `url` answers, the answer kept for [`ANSWER_KEPT`]: the availability checks
/// of the browser tools, of `browser_cdp` and `list`'s reasons all ask at once, and a
/// dead remote endpoint costs the whole timeout each time; a browser the operator
/// starts later is seen within that time.
fn endpoint_answers_once(url: &str) -> Result<(), String> {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    use std::time::Instant;
    type Answers = HashMap<String, (Instant, Result<(), String>)>;
    static ASKED: OnceLock<Mutex<Answers>> = OnceLock::new();
    let asked = ASKED.get_or_init(Default::default);
    if let Some((at, known)) = asked.lock().unwrap_or_else(|p| p.into_inner()).get(url) {
        if at.elapsed() < ANSWER_KEPT {
            return known.clone();
        }
    }
    let answer = crate::launch::endpoint_answers(url, Duration::from_secs(2));
    asked
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(url.to_string(), (Instant::now(), answer.clone()));
    answer
}

/// How long an endpoint's answer is taken as still true.
const ANSWER_KEPT: Duration = Duration::from_secs(10);

impl Settings {
    pub fn from_config(config: &Config) -> Settings {
        let cdp_url = std::env::var("BROWSER_CDP_URL")
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .or_else(|| config.text("browser.cdp_url"));
        // With a CDP endpoint, browser_dialog is offered and dialogs wait for it;
        // without one nothing could answer them, so they are dismissed.
        let default_policy = if cdp_url.is_some() {
            DialogPolicy::MustRespond
        } else {
            DialogPolicy::AutoDismiss
        };
        let dialog_policy = match config.text("browser.dialog_policy").as_deref() {
            Some("must_respond") => DialogPolicy::MustRespond,
            Some("auto_dismiss") => DialogPolicy::AutoDismiss,
            Some("auto_accept") => DialogPolicy::AutoAccept,
            _ => default_policy,
        };
        Settings {
            executable: config.text("browser.executable"),
            cdp_url,
            inactivity_timeout: seconds(config.get("browser.inactivity_timeout"))
                .unwrap_or(Duration::from_secs(120)),
            allow_file_urls: truthy(config.get("browser.allow_file_urls")),
            restrict_evaluate: truthy(config.get("browser.restrict_evaluate")),
            allow_unsafe_evaluate: truthy(config.get("browser.allow_unsafe_evaluate")),
            dialog_policy,
            dialog_timeout: seconds(config.get("browser.dialog_timeout_s"))
                .unwrap_or(Duration::from_secs(300)),
            command_timeout: seconds(config.get("browser.command_timeout"))
                .unwrap_or(Duration::from_secs(30)),
            sandbox: None,
        }
    }

    /// Whether a browser could be had: a configured endpoint that answers, or a
    /// program found. `Err` says what is missing.
    pub fn availability(&self) -> Result<(), String> {
        if let Some(url) = &self.cdp_url {
            return endpoint_answers_once(url).map_err(|why| {
                format!(
                    "the browser at {url} (BROWSER_CDP_URL or browser.cdp_url) does not answer: {why}"
                )
            });
        }
        match crate::launch::find_executable(self.executable.as_deref()) {
            Some(_) => Ok(()),
            None => Err(match &self.executable {
                Some(chosen) => format!("browser.executable {chosen} was not found"),
                None => format!(
                    "no browser: install Chromium ({} on PATH), or set browser.executable, browser.cdp_url or BROWSER_CDP_URL",
                    crate::launch::EXECUTABLE_NAMES.join(", ")
                ),
            }),
        }
    }
}
