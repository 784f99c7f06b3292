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
/// Largest model catalog read from DeepInfra.
const MAX_CATALOG_BYTES: u64 = 32 * 1024 * 1024;
const CATALOG_TIMEOUT: Duration = Duration::from_secs(10);

const OPENROUTER_BASE: &str = "https://openrouter.ai/api/v1";
const OPENROUTER_MODEL: &str = "google/gemini-3-flash-preview";
const OPENAI_BASE: &str = "https://api.openai.com/v1";
const OPENAI_MODEL: &str = "gpt-4o-mini";
const DEEPINFRA_BASE: &str = "https://api.deepinfra.com/v1/openai";

/// The main model's settings when config.yaml leaves them out (the agent's defaults).
const MAIN_BASE: &str = OPENROUTER_BASE;
const MAIN_MODEL: &str = "anthropic/claude-sonnet-4";
const MAIN_KEY_ENV: &str = "OPENROUTER_API_KEY";

/// DeepInfra's catalog tags that say what a model is for; a model with none of them
/// is judged by its id.
const DEEPINFRA_SURFACES: &[&str] = &["chat", "embed", "image-gen", "tts", "stt", "video-gen"];
const DEEPINFRA_NOT_CHAT: &[&str] = &[
    "embed",
    "rerank",
    "whisper",
    "stable-diffusion",
    "flux",
    "sdxl",
    "tts",
    "bark",
    "speech",
    "image-gen",
    "clip",
    "vit-",
    "dpt-",
];

/// One OpenAI-compatible chat-completions endpoint with a vision model.
#[derive(Clone)]
struct Endpoint {
    /// `main`, `openrouter`, `deepinfra`, `openai` or `custom` (or the label
    /// `auxiliary.vision.provider` gives a custom `base_url`).
    provider: String,
    /// Without the trailing `/chat/completions`.
    base_url: String,
    /// `None`: chosen from the provider's catalog on first use (DeepInfra).
    model: Option<String>,
    api_key: Option<String>,
}

/// The resolved vision model: one endpoint, or, with `auxiliary.vision.provider: auto`,
/// the chain of endpoints tried in order. `Debug` never shows a key.
#[derive(Clone)]
pub struct AuxVision {
    /// The provider of the first endpoint (the one tried first).
    pub provider: String,
    /// The first endpoint's base URL.
    pub base_url: String,
    /// The first endpoint's model (empty when it is chosen from a catalog at call time).
    pub model: String,
    endpoints: Vec<Endpoint>,
    /// Whether a failure that another endpoint may not have (a refused key, no
    /// credits, rate limits, an unreachable host) moves on to the next endpoint.
    fall_back: bool,
    pub timeout: Duration,
    pub temperature: f64,
}

impl fmt::Debug for AuxVision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let chain: Vec<String> = self
            .endpoints
            .iter()
            .map(|e| {
                format!(
                    "{} {} {} key={}",
                    e.provider,
                    e.base_url,
                    e.model.as_deref().unwrap_or("(catalog)"),
                    if e.api_key.is_some() { "***" } else { "none" }
                )
            })
            .collect();
        f.debug_struct("AuxVision")
            .field("endpoints", &chain)
            .field("fall_back", &self.fall_back)
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

impl AuxError {
    /// The endpoint refused the image for its size (so a smaller one may pass).
    pub fn is_image_too_large(&self) -> bool {
        match self {
            AuxError::Http { status: 413, .. } => true,
            AuxError::Http { body, .. } => {
                let body = body.to_lowercase();
                [
                    "too large",
                    "too big",
                    "exceeds",
                    "size limit",
                    "content_too_large",
                    "request_too_large",
                    "payload",
                ]
                .iter()
                .any(|hint| body.contains(hint))
            }
            _ => false,
        }
    }

    /// A failure of this endpoint that another one may not share: a refused key, no
    /// credits, a rate limit, a model it does not serve or that takes no images, an
    /// unreachable host or an unusable answer.
    fn worth_another_endpoint(&self) -> bool {
        match self {
            AuxError::Transport(_) | AuxError::Malformed(_) => true,
            AuxError::Http { status, body } => {
                let body = body.to_lowercase();
                matches!(status, 401 | 402 | 403 | 404 | 429)
                    || [
                        "credits",
                        "insufficient",
                        "payment required",
                        "billing",
                        "quota",
                        "does not support",
                        "not support image",
                        "image input",
                        "multimodal",
                    ]
                    .iter()
                    .any(|hint| body.contains(hint))
            }
        }
    }
}

/// A successful analysis and who gave it.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub text: String,
    /// The provider, endpoint and model that answered.
    pub provider: String,
    pub base_url: String,
    pub model: String,
    /// The size of the smaller image sent after the endpoint refused the first as
    /// too large.
    pub shrunk_to: Option<(u32, u32)>,
}

/// A failed analysis: the last error and the model it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    pub error: AuxError,
    /// The model of the endpoint that failed last (empty if none was chosen).
    pub model: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.error.fmt(f)
    }
}

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

/// The main model's endpoint (`model.*`), when config.yaml says it reads images
/// (`model.supports_vision: true`) and it can be called: with its key, or without one
/// on an endpoint of the operator's own (`model.base_url`; local servers need none).
fn main_endpoint(config: &Config) -> Option<Endpoint> {
    if config.get("model.supports_vision").and_then(Value::as_bool) != Some(true) {
        return None;
    }
    let configured_base = as_text(config.get("model.base_url"));
    let model = as_text(config.get("model.name"))
        .or_else(|| as_text(config.get("model.default")))
        .or_else(|| {
            config
                .get("model")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .unwrap_or_else(|| MAIN_MODEL.into());
    let key_env = as_text(config.get("model.api_key_env")).unwrap_or_else(|| MAIN_KEY_ENV.into());
    let api_key = env(&key_env);
    if api_key.is_none() && configured_base.is_none() {
        return None;
    }
    Some(Endpoint {
        provider: "main".into(),
        base_url: configured_base.unwrap_or_else(|| MAIN_BASE.into()),
        model: Some(model),
        api_key,
    })
}

fn openrouter(key: Option<String>, model: Option<String>) -> Option<Endpoint> {
    Some(Endpoint {
        provider: "openrouter".into(),
        base_url: env("OPENROUTER_BASE_URL").unwrap_or_else(|| OPENROUTER_BASE.into()),
        model: Some(model.unwrap_or_else(|| OPENROUTER_MODEL.into())),
        api_key: Some(key.or_else(|| env("OPENROUTER_API_KEY"))?),
    })
}

fn deepinfra(key: Option<String>, model: Option<String>) -> Option<Endpoint> {
    Some(Endpoint {
        provider: "deepinfra".into(),
        base_url: env("DEEPINFRA_BASE_URL").unwrap_or_else(|| DEEPINFRA_BASE.into()),
        model,
        api_key: Some(key.or_else(|| env("DEEPINFRA_API_KEY"))?),
    })
}

impl AuxVision {
    /// The endpoint config.yaml and the environment give, or why there is none.
    ///
    /// - `auxiliary.vision.base_url` set: that endpoint (`provider` is then only a
    ///   label), with `auxiliary.vision.api_key` if any (local servers need none) and
    ///   `auxiliary.vision.model`, which is required there.
    /// - `provider: auto` (the default): a chain, tried in order, of the main model
    ///   (`model.*`, only with `model.supports_vision: true`), OpenRouter
    ///   (`OPENROUTER_API_KEY`, `google/gemini-3-flash-preview`) and DeepInfra
    ///   (`DEEPINFRA_API_KEY`, the first vision chat model of its catalog). A refused
    ///   key, no credits, a rate limit, a model that takes no images or an unreachable
    ///   host moves on to the next.
    /// - `provider: openrouter`, `deepinfra` or `openai` (`OPENAI_BASE_URL` or
    ///   api.openai.com with `OPENAI_API_KEY`, `gpt-4o-mini`): that provider alone.
    ///
    /// `auxiliary.vision.model` (or `AUXILIARY_VISION_MODEL`) names the model on
    /// whichever endpoint is used; `auxiliary.vision.api_key` replaces a named
    /// provider's key.
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
        let make = |endpoints: Vec<Endpoint>, fall_back: bool| {
            let endpoints: Vec<Endpoint> = endpoints
                .into_iter()
                .map(|mut e| {
                    e.base_url = e.base_url.trim_end_matches('/').to_string();
                    e
                })
                .collect();
            let first = &endpoints[0];
            AuxVision {
                provider: first.provider.clone(),
                base_url: first.base_url.clone(),
                model: first.model.clone().unwrap_or_default(),
                fall_back,
                endpoints,
                timeout,
                temperature,
            }
        };
        if let Some(base) = as_text(config.get("auxiliary.vision.base_url")) {
            let label = if provider == "auto" {
                "custom".to_string()
            } else {
                provider
            };
            let model = model.ok_or(
                "auxiliary.vision.base_url is set but auxiliary.vision.model is not: name the \
                 vision model the endpoint serves",
            )?;
            return Ok(make(
                vec![Endpoint {
                    provider: label,
                    base_url: base,
                    model: Some(model),
                    api_key: configured_key,
                }],
                false,
            ));
        }
        match provider.as_str() {
            "auto" => {
                let chain: Vec<Endpoint> = [
                    main_endpoint(config).map(|mut e| {
                        if let Some(m) = &model {
                            e.model = Some(m.clone());
                        }
                        e
                    }),
                    openrouter(None, model.clone()),
                    deepinfra(None, model.clone()),
                ]
                .into_iter()
                .flatten()
                .collect();
                if chain.is_empty() {
                    return Err("no auxiliary vision model: set auxiliary.vision.base_url (any \
                                OpenAI-compatible endpoint with a vision model), OPENROUTER_API_KEY \
                                or DEEPINFRA_API_KEY, or model.supports_vision: true for a main \
                                model that reads images"
                        .into());
                }
                Ok(make(chain, true))
            }
            "openrouter" => openrouter(configured_key, model)
                .map(|e| make(vec![e], false))
                .ok_or_else(|| {
                    "auxiliary.vision.provider is openrouter but OPENROUTER_API_KEY is not set"
                        .into()
                }),
            "deepinfra" => deepinfra(configured_key, model)
                .map(|e| make(vec![e], false))
                .ok_or_else(|| {
                    "auxiliary.vision.provider is deepinfra but DEEPINFRA_API_KEY is not set".into()
                }),
            "openai" => {
                let key = configured_key
                    .or_else(|| env("OPENAI_API_KEY"))
                    .ok_or("auxiliary.vision.provider is openai but OPENAI_API_KEY is not set")?;
                Ok(make(
                    vec![Endpoint {
                        provider: "openai".into(),
                        base_url: env("OPENAI_BASE_URL").unwrap_or_else(|| OPENAI_BASE.into()),
                        model: Some(model.unwrap_or_else(|| OPENAI_MODEL.into())),
                        api_key: Some(key),
                    }],
                    false,
                ))
            }
            "custom" => Err(
                "auxiliary.vision.provider is custom but auxiliary.vision.base_url is not set"
                    .into(),
            ),
            other => Err(format!(
                "auxiliary.vision.provider '{other}' is not one this runtime knows (auto, \
                 openrouter, deepinfra, openai, custom)"
            )),
        }
    }

    /// The providers tried, in order.
    pub fn chain(&self) -> Vec<&str> {
        self.endpoints.iter().map(|e| e.provider.as_str()).collect()
    }

    /// Asks the model about one image (`image_url` is a data URL or an https URL the
    /// provider fetches itself). Returns the answer's text, or its reasoning when the
    /// content is empty. See [`AuxVision::ask`].
    pub fn analyze(&self, prompt: &str, image_url: &str) -> Result<String, AuxError> {
        self.ask(prompt, image_url)
            .map(|a| a.text)
            .map_err(|f| f.error)
    }

    /// [`AuxVision::analyze`] with who answered. An empty answer is asked for once
    /// more; an endpoint that refuses a data-URL image as too large is sent it once
    /// more at half its longest side (and at most half its size); with the `auto`
    /// chain, failures another endpoint may not share move on to the next.
    pub fn ask(&self, prompt: &str, image_url: &str) -> Result<Answer, Failure> {
        let mut last = Failure {
            error: AuxError::Malformed("no endpoint was tried".into()),
            model: String::new(),
        };
        for (i, endpoint) in self.endpoints.iter().enumerate() {
            let more = self.fall_back && i + 1 < self.endpoints.len();
            let model = match &endpoint.model {
                Some(model) => model.clone(),
                None => match self.catalog_vision_model(endpoint) {
                    Ok(model) => model,
                    Err(error) => {
                        last = Failure {
                            error,
                            model: String::new(),
                        };
                        if more {
                            continue;
                        }
                        return Err(last);
                    }
                },
            };
            match self.ask_one(endpoint, &model, prompt, image_url) {
                Ok(answer) => return Ok(answer),
                Err(error) => {
                    let next = more && error.worth_another_endpoint();
                    last = Failure { error, model };
                    if !next {
                        return Err(last);
                    }
                }
            }
        }
        Err(last)
    }

    fn ask_one(
        &self,
        endpoint: &Endpoint,
        model: &str,
        prompt: &str,
        image_url: &str,
    ) -> Result<Answer, AuxError> {
        let body = |url: &str| {
            json!({
                "model": model,
                "messages": [{
                    "role": "user",
                    "content": [
                        {"type": "text", "text": prompt},
                        {"type": "image_url", "image_url": {"url": url}},
                    ],
                }],
                "temperature": self.temperature,
                "max_tokens": MAX_TOKENS,
            })
        };
        let mut shrunk_to = None;
        let mut request = body(image_url);
        let first = match self.complete(endpoint, &request) {
            Err(error) if error.is_image_too_large() => {
                let Some(smaller) = smaller_image(image_url) else {
                    return Err(error);
                };
                shrunk_to = Some((smaller.width, smaller.height));
                request = body(&smaller.data_url());
                self.complete(endpoint, &request)?
            }
            other => other?,
        };
        let text = if first.trim().is_empty() {
            let second = self.complete(endpoint, &request)?;
            if second.trim().is_empty() {
                return Err(AuxError::Malformed("the answer had no text".into()));
            }
            second
        } else {
            first
        };
        Ok(Answer {
            text,
            provider: endpoint.provider.clone(),
            base_url: endpoint.base_url.clone(),
            model: model.to_string(),
            shrunk_to,
        })
    }

    fn complete(&self, endpoint: &Endpoint, body: &Value) -> Result<String, AuxError> {
        let agent = hermes_net::operator_agent(self.timeout);
        let url = format!("{}/chat/completions", endpoint.base_url);
        let mut request = agent.post(&url).header("Content-Type", "application/json");
        if let Some(key) = &endpoint.api_key {
            request = request.header("Authorization", &format!("Bearer {key}"));
        }
        let text = self.body_of(request.send(body.to_string()), MAX_ANSWER_BYTES)?;
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

    /// The first chat model with the `vision` tag in the provider's catalog
    /// (`GET {base_url}/models?filter=true&sort_by=hermes`, DeepInfra's).
    fn catalog_vision_model(&self, endpoint: &Endpoint) -> Result<String, AuxError> {
        let agent = hermes_net::operator_agent(CATALOG_TIMEOUT.min(self.timeout));
        let url = format!("{}/models?filter=true&sort_by=hermes", endpoint.base_url);
        let mut request = agent.get(&url);
        if let Some(key) = &endpoint.api_key {
            request = request.header("Authorization", &format!("Bearer {key}"));
        }
        let text = self.body_of(request.call(), MAX_CATALOG_BYTES)?;
        let catalog: Value = serde_json::from_str(&text)
            .map_err(|e| AuxError::Malformed(format!("the model catalog is not JSON: {e}")))?;
        let items = catalog
            .get("data")
            .and_then(Value::as_array)
            .ok_or_else(|| AuxError::Malformed("the model catalog has no data list".into()))?;
        items
            .iter()
            .find_map(|item| {
                let id = item.get("id").and_then(Value::as_str)?;
                let tags: Vec<&str> = item
                    .pointer("/metadata/tags")
                    .and_then(Value::as_array)
                    .map(|t| t.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                let chat = if tags.iter().any(|t| DEEPINFRA_SURFACES.contains(t)) {
                    tags.contains(&"chat")
                } else {
                    let lower = id.to_lowercase();
                    !DEEPINFRA_NOT_CHAT.iter().any(|n| lower.contains(n))
                };
                (chat && tags.contains(&"vision")).then(|| id.to_string())
            })
            .ok_or_else(|| {
                AuxError::Malformed("the model catalog lists no chat model with vision".into())
            })
    }

    /// The body of a 2xx answer (at most `limit` bytes); any other status is
    /// [`AuxError::Http`] with the body clipped, no answer [`AuxError::Transport`].
    fn body_of(
        &self,
        sent: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
        limit: u64,
    ) -> Result<String, AuxError> {
        let mut response = sent.map_err(|e| AuxError::Transport(self.scrub(&e.to_string())))?;
        let status = response.status().as_u16();
        let text = response
            .body_mut()
            .with_config()
            .limit(limit)
            .read_to_string()
            .map_err(|e| AuxError::Transport(self.scrub(&e.to_string())))?;
        if !(200..300).contains(&status) {
            let clipped: String = text.chars().take(500).collect();
            return Err(AuxError::Http {
                status,
                body: self.scrub(&clipped),
            });
        }
        Ok(text)
    }

    /// `text` with every key and anything else secret-looking masked.
    fn scrub(&self, text: &str) -> String {
        let mut text = text.to_string();
        for key in self.endpoints.iter().filter_map(|e| e.api_key.as_deref()) {
            if key.len() >= 4 {
                text = text.replace(key, "***");
            }
        }
        hermes_runtime::redact::redact_secrets(&text)
    }
}

/// The image of a base64 data URL at half its longest side and at most half its
/// size, or `None` when it is no data URL or cannot get smaller.
fn smaller_image(image_url: &str) -> Option<crate::PreparedImage> {
    let (bytes, _) = crate::decode_data_url(image_url).ok()?;
    let (width, height) = crate::prepare::dimensions(&bytes, crate::ImageType::sniff(&bytes)?)?;
    let longest = width.max(height);
    if longest <= 64 {
        return None;
    }
    let caps = crate::Caps {
        max_side: (longest / 2).max(64),
        max_data_url_bytes: image_url.len() / 2,
        ..crate::Caps::default()
    };
    crate::prepare(&bytes, &caps).ok()
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
    fn size_refusals_and_handovers_are_told_apart() {
        let http = |status, body: &str| AuxError::Http {
            status,
            body: body.into(),
        };
        assert!(http(413, "").is_image_too_large());
        assert!(http(400, "image exceeds 5 MB maximum").is_image_too_large());
        assert!(http(400, "Request Too Large").is_image_too_large());
        // OpenAI's error type names every bad request: not a size refusal by itself.
        assert!(!http(
            400,
            r#"{"type": "invalid_request_error", "message": "bad model"}"#
        )
        .is_image_too_large());
        assert!(!AuxError::Transport("refused".into()).is_image_too_large());

        for (status, body) in [
            (401, "bad key"),
            (402, ""),
            (429, "slow down"),
            (404, "no such model"),
            (400, "this model does not support image input"),
            (403, "Insufficient credits"),
        ] {
            assert!(
                http(status, body).worth_another_endpoint(),
                "{status} {body}"
            );
        }
        assert!(AuxError::Transport("timed out".into()).worth_another_endpoint());
        assert!(!http(400, "image exceeds 5 MB maximum").worth_another_endpoint());
        assert!(!http(500, "oops").worth_another_endpoint());
    }

    #[test]
    fn unknown_providers_are_named() {
        let (_d, c) = config("auxiliary:\n  vision:\n    provider: nope\n");
        assert!(AuxVision::resolve(&c).unwrap_err().contains("'nope'"));
        let (_d, c) = config("auxiliary:\n  vision:\n    provider: custom\n");
        assert!(AuxVision::resolve(&c).unwrap_err().contains("base_url"));
    }
}
