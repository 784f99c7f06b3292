//! The auxiliary vision model: an OpenAI-compatible chat-completions endpoint that
//! describes an image in text, for callers whose model cannot take the image itself.

use hermes_runtime::config::Config;
use serde_json::{json, Value};
use std::fmt;
use std::time::Duration;

/// `auxiliary.vision.timeout` when unset: local vision models can take a while.
pub const DEFAULT_TIMEOUT_SECS: u64 = 120;
const DEFAULT_TEMPERATURE: f64 = 0.1;
const MAX_TOKENS: u64 = 2000;
/// Largest answer read from the endpoint.
const MAX_ANSWER_BYTES: u64 = 16 * 1024 * 1024;

const OPENROUTER_BASE: &str = "https://openrouter.ai/api/v1";
const OPENROUTER_MODEL: &str = "google/gemini-3-flash-preview";
const OPENAI_BASE: &str = "https://api.openai.com/v1";
const OPENAI_MODEL: &str = "gpt-4o-mini";

/// A resolved vision endpoint. `Debug` never shows the key.
#[derive(Clone)]
pub struct AuxVision {
    /// `openrouter`, `openai` or `custom`.
    pub provider: String,
    /// Without the trailing `/chat/completions`.
    pub base_url: String,
    pub model: String,
    api_key: Option<String>,
    pub timeout: Duration,
    pub temperature: f64,
}

impl fmt::Debug for AuxVision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuxVision")
            .field("provider", &self.provider)
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "***"))
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// Why an analysis failed. The texts never contain the API key.
#[derive(Debug, Clone, PartialEq)]
pub enum AuxError {
    /// A non-2xx answer (the body clipped and redacted).
    Http { status: u16, body: String },
    /// No answer: connection refused, timeout, TLS.
    Transport(String),
    /// An answer that is not a chat completion, or has no text.
    Malformed(String),
}

impl fmt::Display for AuxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AuxError::Http { status, body } => {
                write!(
                    f,
                    "the vision model endpoint answered HTTP {status}: {body}"
                )
            }
            AuxError::Transport(why) => write!(f, "cannot reach the vision model endpoint: {why}"),
            AuxError::Malformed(why) => {
                write!(
                    f,
                    "the vision model endpoint sent an unusable answer: {why}"
                )
            }
        }
    }
}

impl std::error::Error for AuxError {}

fn env(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

fn as_text(value: Option<&Value>) -> Option<String> {
    value
        .and_then(|v| match v {
            Value::String(s) => Some(s.trim().to_string()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        })
        .filter(|s| !s.is_empty())
}

fn as_number(value: Option<&Value>) -> Option<f64> {
    value.and_then(|v| match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    })
}

impl AuxVision {
    /// The endpoint config.yaml and the environment give, or why there is none.
    ///
    /// - `auxiliary.vision.base_url` set: that endpoint (`provider` is then only a
    ///   label), with `auxiliary.vision.api_key` if any (local servers need none) and
    ///   `auxiliary.vision.model`, which is required there.
    /// - `provider: openrouter` (or `auto`, the default, with `OPENROUTER_API_KEY` set):
    ///   OpenRouter with `google/gemini-3-flash-preview` unless `model` says otherwise.
    /// - `provider: openai`: `OPENAI_BASE_URL` or api.openai.com with `OPENAI_API_KEY`,
    ///   model `gpt-4o-mini` unless set.
    ///
    /// `AUXILIARY_VISION_MODEL` is read when `auxiliary.vision.model` is unset.
    pub fn resolve(config: &Config) -> Result<AuxVision, String> {
        let provider = as_text(config.get("auxiliary.vision.provider"))
            .map(|p| p.to_ascii_lowercase())
            .unwrap_or_else(|| "auto".into());
        let model =
            as_text(config.get("auxiliary.vision.model")).or_else(|| env("AUXILIARY_VISION_MODEL"));
        let timeout = as_number(config.get("auxiliary.vision.timeout"))
            .filter(|t| t.is_finite() && *t > 0.0)
            .map(Duration::from_secs_f64)
            .unwrap_or(Duration::from_secs(DEFAULT_TIMEOUT_SECS));
        let temperature = as_number(config.get("auxiliary.vision.temperature"))
            .filter(|t| t.is_finite())
            .unwrap_or(DEFAULT_TEMPERATURE);
        let configured_key = as_text(config.get("auxiliary.vision.api_key"));
        let make = |provider: &str, base: String, model: String, key: Option<String>| AuxVision {
            provider: provider.to_string(),
            base_url: base.trim_end_matches('/').to_string(),
            model,
            api_key: key,
            timeout,
            temperature,
        };
        if let Some(base) = as_text(config.get("auxiliary.vision.base_url")) {
            let label = if provider == "auto" {
                "custom"
            } else {
                &provider
            };
            let model = model.ok_or(
                "auxiliary.vision.base_url is set but auxiliary.vision.model is not: name the \
                 vision model the endpoint serves",
            )?;
            return Ok(make(label, base, model, configured_key));
        }
        match provider.as_str() {
            "auto" | "openrouter" => {
                let key = configured_key.or_else(|| env("OPENROUTER_API_KEY")).ok_or(
                    "no auxiliary vision model: set auxiliary.vision.base_url (any \
                     OpenAI-compatible endpoint with a vision model) or OPENROUTER_API_KEY",
                )?;
                let base = env("OPENROUTER_BASE_URL").unwrap_or_else(|| OPENROUTER_BASE.into());
                let model = model.unwrap_or_else(|| OPENROUTER_MODEL.into());
                Ok(make("openrouter", base, model, Some(key)))
            }
            "openai" => {
                let key = configured_key
                    .or_else(|| env("OPENAI_API_KEY"))
                    .ok_or("auxiliary.vision.provider is openai but OPENAI_API_KEY is not set")?;
                let base = env("OPENAI_BASE_URL").unwrap_or_else(|| OPENAI_BASE.into());
                let model = model.unwrap_or_else(|| OPENAI_MODEL.into());
                Ok(make("openai", base, model, Some(key)))
            }
            "custom" => Err(
                "auxiliary.vision.provider is custom but auxiliary.vision.base_url is not set"
                    .into(),
            ),
            other => Err(format!(
                "auxiliary.vision.provider '{other}' is not one this runtime knows (auto, \
                 openrouter, openai, custom)"
            )),
        }
    }

    /// Asks the model about one image (`image_url` is a data URL or an https URL the
    /// provider fetches itself). Returns the answer's text, or its reasoning when the
    /// content is empty; an empty answer is asked for once more.
    pub fn analyze(&self, prompt: &str, image_url: &str) -> Result<String, AuxError> {
        let body = json!({
            "model": self.model,
            "messages": [{
                "role": "user",
                "content": [
                    {"type": "text", "text": prompt},
                    {"type": "image_url", "image_url": {"url": image_url}},
                ],
            }],
            "temperature": self.temperature,
            "max_tokens": MAX_TOKENS,
        });
        let first = self.complete(&body)?;
        if !first.trim().is_empty() {
            return Ok(first);
        }
        let second = self.complete(&body)?;
        if second.trim().is_empty() {
            return Err(AuxError::Malformed("the answer had no text".into()));
        }
        Ok(second)
    }

    fn complete(&self, body: &Value) -> Result<String, AuxError> {
        let agent = hermes_net::operator_agent(self.timeout);
        let url = format!("{}/chat/completions", self.base_url);
        let mut request = agent.post(&url).header("Content-Type", "application/json");
        if let Some(key) = &self.api_key {
            request = request.header("Authorization", &format!("Bearer {key}"));
        }
        let mut response = request
            .send(body.to_string())
            .map_err(|e| AuxError::Transport(self.scrub(&e.to_string())))?;
        let status = response.status().as_u16();
        let text = response
            .body_mut()
            .with_config()
            .limit(MAX_ANSWER_BYTES)
            .read_to_string()
            .map_err(|e| AuxError::Transport(self.scrub(&e.to_string())))?;
        if !(200..300).contains(&status) {
            let clipped: String = text.chars().take(500).collect();
            return Err(AuxError::Http {
                status,
                body: self.scrub(&clipped),
            });
        }
        let answer: Value = serde_json::from_str(&text)
            .map_err(|e| AuxError::Malformed(format!("not JSON: {e}")))?;
        let message = answer
            .pointer("/choices/0/message")
            .ok_or_else(|| AuxError::Malformed("no choices[0].message".into()))?;
        let content = match message.get("content") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Array(parts)) => parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
            _ => String::new(),
        };
        if !content.trim().is_empty() {
            return Ok(content);
        }
        Ok(["reasoning", "reasoning_content"]
            .iter()
            .find_map(|k| message.get(*k).and_then(Value::as_str))
            .unwrap_or("")
            .to_string())
    }

    /// `text` with the key and anything else secret-looking masked.
    fn scrub(&self, text: &str) -> String {
        let mut text = text.to_string();
        if let Some(key) = self.api_key.as_deref().filter(|k| k.len() >= 4) {
            text = text.replace(key, "***");
        }
        hermes_runtime::redact::redact_secrets(&text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(yaml: &str) -> (tempfile::TempDir, Config) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config.yaml"), yaml).unwrap();
        let config = Config::load(dir.path());
        (dir, config)
    }

    #[test]
    fn a_base_url_needs_a_model_and_takes_an_optional_key() {
        let (_d, c) = config("auxiliary:\n  vision:\n    base_url: http://127.0.0.1:9/v1/\n");
        assert!(AuxVision::resolve(&c)
            .unwrap_err()
            .contains("auxiliary.vision.model"));
        let (_d, c) = config(
            "auxiliary:\n  vision:\n    base_url: http://127.0.0.1:9/v1/\n    model: m\n    api_key: sk-secret-123456\n    timeout: 7\n",
        );
        let aux = AuxVision::resolve(&c).unwrap();
        assert_eq!(aux.base_url, "http://127.0.0.1:9/v1");
        assert_eq!(aux.provider, "custom");
        assert_eq!(aux.timeout, Duration::from_secs(7));
        assert!(!format!("{aux:?}").contains("sk-secret"));
    }

    #[test]
    fn unknown_providers_are_named() {
        let (_d, c) = config("auxiliary:\n  vision:\n    provider: nope\n");
        assert!(AuxVision::resolve(&c).unwrap_err().contains("'nope'"));
        let (_d, c) = config("auxiliary:\n  vision:\n    provider: custom\n");
        assert!(AuxVision::resolve(&c).unwrap_err().contains("base_url"));
    }
}
