//! Reading a call's JSON arguments into a handler's typed parameters.
//!
//! The generated shims call [`Args::required`] / [`Args::optional`] once per
//! parameter, and the parameter's Rust type picks the deserialiser, so the generated
//! code never has to spell a type.

use crate::output::ToolError;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

pub struct Args {
    tool: &'static str,
    map: Map<String, Value>,
}

impl Args {
    /// `null` counts as no arguments; anything but an object is refused.
    pub fn new(tool: &'static str, value: Value) -> Result<Args, ToolError> {
        match value {
            Value::Null => Ok(Args {
                tool,
                map: Map::new(),
            }),
            Value::Object(map) => Ok(Args { tool, map }),
            other => Err(ToolError::invalid_arguments(format!(
                "{tool}: arguments must be a JSON object, got {}",
                json_type_name(&other)
            ))),
        }
    }

    /// A parameter the schema lists as required; `null` counts as missing.
    pub fn required<T: DeserializeOwned>(&mut self, name: &str) -> Result<T, ToolError> {
        match self.map.remove(name) {
            None | Some(Value::Null) => Err(ToolError::invalid_arguments(format!(
                "{}: missing required argument `{name}`",
                self.tool
            ))),
            Some(value) => self.convert(name, value),
        }
    }

    pub fn optional<T: DeserializeOwned>(&mut self, name: &str) -> Result<Option<T>, ToolError> {
        match self.map.remove(name) {
            None | Some(Value::Null) => Ok(None),
            Some(value) => self.convert(name, value).map(Some),
        }
    }

    fn convert<T: DeserializeOwned>(&self, name: &str, value: Value) -> Result<T, ToolError> {
        serde_json::from_value(value).map_err(|e| {
            ToolError::invalid_arguments(format!("{}: argument `{name}`: {e}", self.tool))
        })
    }
}

pub fn json_type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
