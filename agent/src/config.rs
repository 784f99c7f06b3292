//! The agent's settings: the model endpoint and the delegation limits, read from
//! `$HERMES_HOME/config.yaml` over embedded defaults.
//!
//! ```yaml
//! model:
//!   base_url: http://127.0.0.1:8080/v1   # any OpenAI-compatible endpoint
//!   name: my-model                       # `model.default` is read too
//!   api_key_env: MY_API_KEY              # the variable that holds the key
//!   timeout_seconds: 120                 # per request
//!   max_retries: 2                       # on 5xx, 429 and timeouts
//! agent:
//!   max_iterations: 90
//! delegation:
//!   max_concurrent_children: 3
//!   max_spawn_depth: 1
//!   max_iterations: 50
//! clarify:
//!   timeout_seconds: 300
//! ```

use hermes_runtime::config::Config;
use serde_json::Value;
use std::time::Duration;

pub const DEFAULT_BASE_URL: &str = "https://openrouter.ai/api/v1";
pub const DEFAULT_MODEL: &str = "anthropic/claude-sonnet-4";
pub const DEFAULT_API_KEY_ENV: &str = "OPENROUTER_API_KEY";
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
pub const DEFAULT_MAX_RETRIES: u32 = 2;
pub const DEFAULT_MAX_ITERATIONS: u32 = 90;
pub const DEFAULT_CHILD_MAX_ITERATIONS: u32 = 50;
pub const DEFAULT_MAX_CONCURRENT_CHILDREN: usize = 3;
pub const DEFAULT_MAX_SPAWN_DEPTH: u32 = 1;
pub const DEFAULT_CLARIFY_TIMEOUT: Duration = Duration::from_secs(300);

/// Where the model is and how to talk to it.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelConfig {
    /// Up to but not including `/chat/completions`.
    pub base_url: String,
    pub model: String,
    /// The environment variable holding the API key; unset or empty sends no key.
    pub api_key_env: String,
    pub timeout: Duration,
    pub max_retries: u32,
    /// The model reads images: a tool result that carries one (vision_analyze) is put
    /// in front of it as image content instead of being described by the auxiliary
    /// vision model.
    pub supports_vision: bool,
}

impl ModelConfig {
    /// The key from the environment, if the variable is set and not empty.
    pub fn api_key(&self) -> Option<String> {
        std::env::var(&self.api_key_env)
            .ok()
            .filter(|k| !k.trim().is_empty())
    }

    /// Whether a model endpoint is set up: a key for it, or an endpoint of the
    /// operator's own (which may need none). The default endpoint without its key is not.
    pub fn set_up(&self) -> bool {
        self.api_key().is_some() || self.base_url.trim_end_matches('/') != DEFAULT_BASE_URL
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct AgentConfig {
    pub model: ModelConfig,
    pub max_iterations: u32,
    pub child_max_iterations: u32,
    pub max_concurrent_children: usize,
    /// Sessions at this depth cannot delegate; the top session is depth 0.
    pub max_spawn_depth: u32,
    pub clarify_timeout: Duration,
}

impl Default for AgentConfig {
    fn default() -> Self {
        AgentConfig {
            model: ModelConfig {
                base_url: DEFAULT_BASE_URL.into(),
                model: DEFAULT_MODEL.into(),
                api_key_env: DEFAULT_API_KEY_ENV.into(),
                timeout: DEFAULT_TIMEOUT,
                max_retries: DEFAULT_MAX_RETRIES,
                supports_vision: false,
            },
            max_iterations: DEFAULT_MAX_ITERATIONS,
            child_max_iterations: DEFAULT_CHILD_MAX_ITERATIONS,
            max_concurrent_children: DEFAULT_MAX_CONCURRENT_CHILDREN,
            max_spawn_depth: DEFAULT_MAX_SPAWN_DEPTH,
            clarify_timeout: DEFAULT_CLARIFY_TIMEOUT,
        }
    }
}

impl AgentConfig {
    /// The defaults with whatever `config` sets on top; wrong types are ignored.
    pub fn from_config(config: &Config) -> AgentConfig {
        let mut out = AgentConfig::default();
        let text = |key: &str| config.text(key);
        let number = |key: &str| {
            config
                .get(key)
                .and_then(Value::as_f64)
                .filter(|n| n.is_finite() && *n >= 0.0)
        };
        if let Some(url) = text("model.base_url") {
            out.model.base_url = url;
        }
        if let Some(name) = text("model.name").or_else(|| text("model.default")) {
            out.model.model = name;
        } else if let Some(name) = config.get("model").and_then(Value::as_str) {
            // `model: some/name` as a plain string.
            out.model.model = name.to_string();
        }
        if let Some(env) = text("model.api_key_env") {
            out.model.api_key_env = env;
        }
        if let Some(seconds) = number("model.timeout_seconds").filter(|s| *s > 0.0) {
            out.model.timeout = Duration::from_secs_f64(seconds);
        }
        if let Some(retries) = number("model.max_retries") {
            out.model.max_retries = retries as u32;
        }
        if let Some(yes) = config.get("model.supports_vision").and_then(Value::as_bool) {
            out.model.supports_vision = yes;
        }
        if let Some(n) = number("agent.max_iterations").filter(|n| *n >= 1.0) {
            out.max_iterations = n as u32;
        }
        if let Some(n) = number("delegation.max_iterations").filter(|n| *n >= 1.0) {
            out.child_max_iterations = n as u32;
        }
        if let Some(n) = number("delegation.max_concurrent_children").filter(|n| *n >= 1.0) {
            out.max_concurrent_children = n as usize;
        }
        if let Some(n) = number("delegation.max_spawn_depth") {
            out.max_spawn_depth = n as u32;
        }
        if let Some(seconds) = number("clarify.timeout_seconds").filter(|s| *s > 0.0) {
            out.clarify_timeout = Duration::from_secs_f64(seconds);
        }
        out
    }

    pub fn load(hermes_home: &std::path::Path) -> AgentConfig {
        AgentConfig::from_config(&Config::load(hermes_home))
    }
}
