//! What handlers return, and the bounded `{"error": ...}` shape every failure takes.

use serde::Serialize;
use serde_json::Value;
use std::fmt;

/// The longest `error` text the model sees before it is cut.
pub const ERROR_CAP_CHARS: usize = 2048;
/// Appended to an `error` text that was cut.
pub const TRUNCATION_MARKER: &str = "… [truncated]";

/// A handler's successful answer.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolOutput {
    /// A JSON document (normally an object) as text, passed to the model as is.
    Text(String),
    /// `{"_multimodal": true, "content": [...], "text_summary"?}`: attached natively by
    /// hosts that support images, passed through untouched.
    Multimodal(Value),
}

impl ToolOutput {
    /// Serialises any value as the result text.
    pub fn json(value: &impl Serialize) -> ToolOutput {
        match serde_json::to_string(value) {
            Ok(text) => ToolOutput::Text(text),
            Err(e) => ToolOutput::Text(tool_error(format!("result could not be serialised: {e}"))),
        }
    }

    /// A model-facing failure that is still a normal result (`{"error": ...}`),
    /// e.g. "file not found". Use [`ToolError`] for failures of the tool itself.
    pub fn error(message: impl fmt::Display) -> ToolOutput {
        ToolOutput::Text(tool_error(message))
    }

    /// The text the model receives.
    pub fn into_text(self) -> String {
        match self {
            ToolOutput::Text(text) => text,
            ToolOutput::Multimodal(value) => value.to_string(),
        }
    }

    pub fn as_text(&self) -> Option<&str> {
        match self {
            ToolOutput::Text(text) => Some(text),
            ToolOutput::Multimodal(_) => None,
        }
    }
}

impl From<Value> for ToolOutput {
    fn from(value: Value) -> Self {
        ToolOutput::Text(value.to_string())
    }
}

/// A failure of the tool itself (I/O it did not expect, a bug): dispatch wraps it as
/// `[TOOL_ERROR] Tool execution failed: <kind>: <message>`.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolError {
    /// A short type name, e.g. `IoError`, `InvalidArguments`.
    pub kind: String,
    pub message: String,
}

impl ToolError {
    pub fn new(kind: impl Into<String>, message: impl fmt::Display) -> Self {
        ToolError {
            kind: kind.into(),
            message: message.to_string(),
        }
    }

    pub fn invalid_arguments(message: impl fmt::Display) -> Self {
        ToolError::new("InvalidArguments", message)
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)
    }
}

impl std::error::Error for ToolError {}

impl From<std::io::Error> for ToolError {
    fn from(e: std::io::Error) -> Self {
        ToolError::new("IoError", e)
    }
}

impl From<serde_json::Error> for ToolError {
    fn from(e: serde_json::Error) -> Self {
        ToolError::new("JsonError", e)
    }
}

pub type ToolResult = Result<ToolOutput, ToolError>;

/// `{"error": message}` with the message bounded to [`ERROR_CAP_CHARS`].
pub fn tool_error(message: impl fmt::Display) -> String {
    tool_error_with(message, &[])
}

/// `{"error": message, ...extra}`: `error` first, then the extra keys in order.
pub fn tool_error_with(message: impl fmt::Display, extra: &[(&str, Value)]) -> String {
    let mut object = serde_json::Map::new();
    object.insert(
        "error".into(),
        Value::String(bound_error_text(&message.to_string())),
    );
    for (key, value) in extra {
        object.insert((*key).to_string(), value.clone());
    }
    Value::Object(object).to_string()
}

/// Cuts `text` to [`ERROR_CAP_CHARS`] characters plus the marker.
pub fn bound_error_text(text: &str) -> String {
    match text.char_indices().nth(ERROR_CAP_CHARS) {
        None => text.to_string(),
        Some((cut, _)) => format!("{}{}", &text[..cut], TRUNCATION_MARKER),
    }
}
