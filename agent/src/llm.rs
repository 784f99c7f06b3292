//! A client of an OpenAI-compatible `POST {base_url}/chat/completions` endpoint with
//! tool calls: timeouts, retries on transient failures, and cancellation while a
//! request is in flight.

use crate::config::ModelConfig;
use hermes_runtime::context::Cancellation;
use serde_json::{json, Value};
use std::sync::mpsc;
use std::time::Duration;

#[derive(Debug, Clone, PartialEq)]
pub enum ChatError {
    /// The endpoint answered with a non-success status.
    Http {
        status: u16,
        body: String,
    },
    TimedOut(String),
    /// No answer: connection refused, reset, DNS.
    Transport(String),
    /// An answer that is not a chat completion.
    Malformed(String),
    /// A model that is not an endpoint (a borrowed one) failed; the sentence says how.
    Model(String),
    Interrupted,
}

impl ChatError {
    pub fn is_retryable(&self) -> bool {
        match self {
            ChatError::Http { status, .. } => *status == 429 || *status >= 500,
            ChatError::TimedOut(_) | ChatError::Transport(_) => true,
            ChatError::Malformed(_) | ChatError::Model(_) | ChatError::Interrupted => false,
        }
    }
}

impl std::fmt::Display for ChatError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChatError::Http { status, body } => write!(
                f,
                "the model endpoint answered HTTP {status}: {}",
                clip(body, 500)
            ),
            ChatError::TimedOut(what) => {
                write!(f, "the model endpoint did not answer in time: {what}")
            }
            ChatError::Transport(what) => write!(f, "cannot reach the model endpoint: {what}"),
            ChatError::Malformed(what) => {
                write!(f, "the model endpoint sent a malformed reply: {what}")
            }
            ChatError::Model(what) => write!(f, "{what}"),
            ChatError::Interrupted => write!(f, "interrupted"),
        }
    }
}

/// One tool call of an assistant turn.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelToolCall {
    pub id: String,
    pub name: String,
    /// The arguments as JSON text.
    pub arguments: String,
}

/// The assistant's reply.
#[derive(Debug, Clone, PartialEq)]
pub struct AssistantTurn {
    pub content: Option<String>,
    pub tool_calls: Vec<ModelToolCall>,
    pub finish_reason: Option<String>,
}

impl AssistantTurn {
    /// The message to append to the conversation.
    pub fn to_message(&self) -> Value {
        let mut message = json!({"role": "assistant", "content": self.content});
        if !self.tool_calls.is_empty() {
            message["tool_calls"] = Value::Array(
                self.tool_calls
                    .iter()
                    .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
                    .collect(),
            );
        }
        message
    }
}

/// A model the agent loop talks to: the conversation (chat-completions messages, system
/// prompt first) and the tool definitions (chat-completions `function` tools) go in,
/// the assistant's turn comes out. A model endpoint ([`ChatClient`]) is one; a model
/// borrowed from whoever drives the session (over MCP, the client's model asked with
/// tools through `sampling/createMessage`) is another.
pub trait ChatModel: Send + Sync {
    /// The next assistant turn, or why there is none. Gives up with
    /// [`ChatError::Interrupted`] when `cancel` is cancelled.
    fn complete(
        &self,
        messages: &[Value],
        tools: &[Value],
        cancel: &Cancellation,
    ) -> Result<AssistantTurn, ChatError>;
}

impl ChatModel for ChatClient {
    fn complete(
        &self,
        messages: &[Value],
        tools: &[Value],
        cancel: &Cancellation,
    ) -> Result<AssistantTurn, ChatError> {
        ChatClient::complete(self, messages, tools, cancel)
    }
}

pub struct ChatClient {
    config: ModelConfig,
    agent: ureq::Agent,
    /// First wait between retries; doubled each time, at most 8 s.
    pub retry_backoff: Duration,
}

impl ChatClient {
    pub fn new(config: ModelConfig) -> ChatClient {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(config.timeout))
            .timeout_connect(Some(config.timeout.min(Duration::from_secs(30))))
            .http_status_as_error(false)
            .tls_config(hermes_runtime::tls_trust::tls_config())
            .build()
            .into();
        ChatClient {
            config,
            agent,
            retry_backoff: Duration::from_millis(250),
        }
    }

    pub fn url(&self) -> String {
        format!(
            "{}/chat/completions",
            self.config.base_url.trim_end_matches('/')
        )
    }

    /// Sends the conversation and tool definitions; retries transient failures up to
    /// `max_retries` times.
    pub fn complete(
        &self,
        messages: &[Value],
        tools: &[Value],
        cancel: &Cancellation,
    ) -> Result<AssistantTurn, ChatError> {
        let mut body = json!({"model": self.config.model, "messages": messages});
        if !tools.is_empty() {
            body["tools"] = json!(tools);
            body["tool_choice"] = json!("auto");
        }
        let body = body.to_string();
        let mut attempt = 0u32;
        loop {
            let outcome = self.send_once(&body, cancel);
            match outcome {
                Err(error) if error.is_retryable() && attempt < self.config.max_retries => {
                    let wait = self
                        .retry_backoff
                        .saturating_mul(1 << attempt.min(5))
                        .min(Duration::from_secs(8));
                    eprintln!("warning: {error}; retrying in {:.1} s", wait.as_secs_f64());
                    if sleep_unless_cancelled(wait, cancel) {
                        return Err(ChatError::Interrupted);
                    }
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    fn send_once(&self, body: &str, cancel: &Cancellation) -> Result<AssistantTurn, ChatError> {
        if cancel.is_cancelled() {
            return Err(ChatError::Interrupted);
        }
        let mut request = self
            .agent
            .post(&self.url())
            .header("Content-Type", "application/json");
        if let Some(key) = self.config.api_key() {
            request = request.header("Authorization", format!("Bearer {key}"));
        }
        let body = body.to_string();
        let (sender, receiver) = mpsc::channel();
        // The request runs on its own thread so an interrupt need not wait for it.
        std::thread::spawn(move || {
            let result = match request.send(body.as_str()) {
                Ok(mut response) => {
                    let status = response.status().as_u16();
                    match response.body_mut().read_to_string() {
                        Ok(text) if (200..300).contains(&status) => Ok(text),
                        Ok(text) => Err(ChatError::Http { status, body: text }),
                        Err(e) => Err(classify_error(e)),
                    }
                }
                Err(e) => Err(classify_error(e)),
            };
            let _ = sender.send(result);
        });
        let text = loop {
            match receiver.recv_timeout(Duration::from_millis(50)) {
                Ok(result) => break result?,
                Err(mpsc::RecvTimeoutError::Timeout) if cancel.is_cancelled() => {
                    return Err(ChatError::Interrupted)
                }
                Err(mpsc::RecvTimeoutError::Timeout) => continue,
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(ChatError::Transport("the request thread died".into()))
                }
            }
        };
        parse_completion(&text)
    }
}

fn sleep_unless_cancelled(wait: Duration, cancel: &Cancellation) -> bool {
    let deadline = std::time::Instant::now() + wait;
    while std::time::Instant::now() < deadline {
        if cancel.is_cancelled() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    cancel.is_cancelled()
}

fn classify_error(error: ureq::Error) -> ChatError {
    match error {
        ureq::Error::Timeout(what) => ChatError::TimedOut(format!("timed out ({what})")),
        ureq::Error::Io(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
            ) =>
        {
            ChatError::TimedOut(e.to_string())
        }
        ureq::Error::StatusCode(status) => ChatError::Http {
            status,
            body: String::new(),
        },
        other => ChatError::Transport(other.to_string()),
    }
}

/// Reads a chat completion: `choices[0].message` with `content` and `tool_calls`.
pub fn parse_completion(text: &str) -> Result<AssistantTurn, ChatError> {
    let value: Value = serde_json::from_str(text)
        .map_err(|e| ChatError::Malformed(format!("not JSON ({e}): {}", clip(text, 200))))?;
    if let Some(error) = value.get("error").filter(|e| !e.is_null()) {
        let message = error
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .unwrap_or_else(|| error.to_string());
        return Err(ChatError::Malformed(format!(
            "the endpoint reported an error: {}",
            clip(&message, 500)
        )));
    }
    let choice = value
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
        .ok_or_else(|| ChatError::Malformed(format!("no `choices` in {}", clip(text, 200))))?;
    let message = choice
        .get("message")
        .filter(|m| m.is_object())
        .ok_or_else(|| {
            ChatError::Malformed(format!(
                "the first choice has no `message`: {}",
                clip(text, 200)
            ))
        })?;
    let content = match message.get("content") {
        Some(Value::String(text)) => Some(text.clone()),
        // Some servers send content as a list of parts.
        Some(Value::Array(parts)) => Some(
            parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str).or_else(|| p.as_str()))
                .collect::<Vec<_>>()
                .join(""),
        ),
        _ => None,
    };
    let mut tool_calls = Vec::new();
    for (n, call) in message
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let function = call
            .get("function")
            .ok_or_else(|| ChatError::Malformed(format!("tool call {n} has no `function`")))?;
        let name = function
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| ChatError::Malformed(format!("tool call {n} has no function name")))?;
        let arguments = match function.get("arguments") {
            None | Some(Value::Null) => "{}".to_string(),
            Some(Value::String(text)) => text.clone(),
            Some(other) => other.to_string(),
        };
        let id = call
            .get("id")
            .and_then(Value::as_str)
            .filter(|i| !i.is_empty())
            .map(str::to_owned)
            .unwrap_or_else(|| format!("call_{n}"));
        tool_calls.push(ModelToolCall {
            id,
            name: name.to_string(),
            arguments,
        });
    }
    Ok(AssistantTurn {
        content,
        tool_calls,
        finish_reason: choice
            .get("finish_reason")
            .and_then(Value::as_str)
            .map(str::to_owned),
    })
}

fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_string()
    } else {
        format!("{}…", text.chars().take(max).collect::<String>())
    }
}
