//! The client's model as the agent loop's model: `sampling/createMessage` with tools
//! (MCP 2025-11-25, for a client that declared `sampling.tools`).
//!
//! The loop keeps its conversation in chat-completions shape; each turn it is turned
//! into sampling messages (the system prompt as `systemPrompt`, an assistant's tool
//! calls as `tool_use` blocks, the results of one turn as one user message of
//! `tool_result` blocks) and the tool definitions into MCP tools; the answer's
//! `tool_use` blocks come back as the turn's tool calls, which the loop runs through
//! the registry like any model's.

#![allow(deprecated)] // rmcp marks sampling deprecated (SEP-2577); clients still offer it.

use crate::caller::{Caller, SampleError};
use hermes_agent::{AssistantTurn, ChatError, ChatModel, ModelToolCall};
use hermes_runtime::context::Cancellation;
use serde_json::{json, Map, Value};
use std::time::Duration;

/// How long the client's model may take for one turn of a sub-agent.
pub(crate) const TURN_TIMEOUT: Duration = Duration::from_secs(300);
/// Room for one turn's answer.
pub(crate) const TURN_MAX_TOKENS: u32 = 4096;

impl Caller {
    /// Whether the client declared `sampling.tools`: its model takes tool definitions
    /// and answers with `tool_use`.
    pub fn samples_with_tools(&self) -> bool {
        self.peer.supports_sampling_tools()
    }
}

impl ChatModel for Caller {
    fn complete(
        &self,
        messages: &[Value],
        tools: &[Value],
        cancel: &Cancellation,
    ) -> Result<AssistantTurn, ChatError> {
        if !self.samples_with_tools() {
            return Err(ChatError::Model(
                "the MCP client did not declare `sampling.tools`, so its model cannot be given tools".into(),
            ));
        }
        let params = request(messages, tools, TURN_MAX_TOKENS);
        let answer = self
            .create_message(params, TURN_TIMEOUT, Some(cancel))
            .map_err(|error| match error {
                SampleError::Interrupted => ChatError::Interrupted,
                error => ChatError::Model(error.to_string()),
            })?;
        assistant_turn(&answer)
    }
}

/// The `sampling/createMessage` params for a chat-completions conversation and its
/// tool definitions.
pub(crate) fn request(messages: &[Value], tools: &[Value], max_tokens: u32) -> Value {
    let mut system = Vec::new();
    let mut sampled: Vec<Value> = Vec::new();
    for message in messages {
        match message["role"].as_str().unwrap_or_default() {
            "system" => system.push(text_of(&message["content"])),
            "assistant" => {
                let mut blocks = Vec::new();
                let text = text_of(&message["content"]);
                if !text.is_empty() {
                    blocks.push(json!({"type": "text", "text": text}));
                }
                for call in message["tool_calls"].as_array().into_iter().flatten() {
                    blocks.push(json!({
                        "type": "tool_use",
                        "id": call["id"],
                        "name": call["function"]["name"],
                        "input": arguments_object(&call["function"]["arguments"]),
                    }));
                }
                if blocks.is_empty() {
                    blocks.push(json!({"type": "text", "text": ""}));
                }
                sampled.push(json!({"role": "assistant", "content": blocks}));
            }
            "tool" => {
                let result = tool_result(message);
                // The results of one turn are one user message of tool_result blocks
                // only (the spec allows nothing else beside them).
                match sampled.last_mut() {
                    Some(last) if last["role"] == "user" && is_tool_results(last) => {
                        if let Some(blocks) = last["content"].as_array_mut() {
                            blocks.push(result);
                        }
                    }
                    _ => sampled.push(json!({"role": "user", "content": [result]})),
                }
            }
            _ => sampled.push(json!({
                "role": "user",
                "content": {"type": "text", "text": text_of(&message["content"])},
            })),
        }
    }
    let mut params = json!({"messages": sampled, "maxTokens": max_tokens});
    if !system.is_empty() {
        params["systemPrompt"] = json!(system.join("\n\n"));
    }
    if !tools.is_empty() {
        params["tools"] = Value::Array(tools.iter().map(crate::server::mcp_tool).collect());
        params["toolChoice"] = json!({"mode": "auto"});
    }
    params
}

fn is_tool_results(message: &Value) -> bool {
    message["content"]
        .as_array()
        .is_some_and(|blocks| blocks.iter().all(|b| b["type"] == "tool_result"))
}

/// A tool message as a `tool_result` block, with the content blocks and the error
/// judgement a `tools/call` of the same result gets.
fn tool_result(message: &Value) -> Value {
    let converted = match &message["content"] {
        Value::Array(parts) => json!({
            "content": parts.iter().map(crate::convert::content_part).collect::<Vec<_>>(),
        }),
        other => crate::convert::result_string_to_mcp(&text_of(other)),
    };
    let mut block = json!({
        "type": "tool_result",
        "toolUseId": message["tool_call_id"],
        "content": converted["content"],
    });
    if converted["isError"] == true {
        block["isError"] = json!(true);
    }
    block
}

/// A tool call's arguments (JSON text) as the object `tool_use.input` must be.
fn arguments_object(arguments: &Value) -> Value {
    let parsed = match arguments {
        Value::String(text) => serde_json::from_str(text).unwrap_or(Value::Null),
        other => other.clone(),
    };
    match parsed {
        Value::Object(object) => Value::Object(object),
        _ => Value::Object(Map::new()),
    }
}

fn text_of(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// A `CreateMessageResult` as the loop's assistant turn: its text, and its `tool_use`
/// blocks as tool calls.
pub(crate) fn assistant_turn(answer: &Value) -> Result<AssistantTurn, ChatError> {
    let blocks: Vec<&Value> = match &answer["content"] {
        Value::Array(blocks) => blocks.iter().collect(),
        Value::Null => Vec::new(),
        block => vec![block],
    };
    let mut texts = Vec::new();
    let mut tool_calls = Vec::new();
    for (n, block) in blocks.into_iter().enumerate() {
        match block["type"].as_str() {
            Some("text") => texts.extend(block["text"].as_str()),
            Some("tool_use") => {
                let name = block["name"]
                    .as_str()
                    .filter(|name| !name.is_empty())
                    .ok_or_else(|| {
                        ChatError::Model(format!(
                            "the MCP client's model answered tool_use block {n} without a name"
                        ))
                    })?;
                let id = block["id"]
                    .as_str()
                    .filter(|id| !id.is_empty())
                    .map(str::to_owned)
                    .unwrap_or_else(|| format!("call_{n}"));
                let input = match &block["input"] {
                    Value::Null => json!({}),
                    input => input.clone(),
                };
                tool_calls.push(ModelToolCall {
                    id,
                    name: name.to_string(),
                    arguments: input.to_string(),
                });
            }
            _ => {}
        }
    }
    if texts.is_empty() && tool_calls.is_empty() {
        return Err(ChatError::Model(
            "the MCP client's model answered without text or tool_use".into(),
        ));
    }
    Ok(AssistantTurn {
        content: (!texts.is_empty()).then(|| texts.join("\n")),
        tool_calls,
        finish_reason: answer["stopReason"].as_str().map(str::to_owned),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_of_tool_calls_and_its_results_become_tool_use_and_one_tool_result_message() {
        let messages = vec![
            json!({"role": "system", "content": "Be brief."}),
            json!({"role": "user", "content": "Goal: read it"}),
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"x\"}"}},
                {"id": "b", "type": "function", "function": {"name": "terminal", "arguments": "{\"command\":\"ls\"}"}},
            ]}),
            json!({"role": "tool", "tool_call_id": "a", "content": "{\"content\":\"1|hi\"}"}),
            json!({"role": "tool", "tool_call_id": "b", "content": "{\"error\":\"no\"}"}),
        ];
        let tools = vec![json!({"type": "function", "function": {
            "name": "read_file", "description": "Reads.", "parameters": {"properties": {}}}})];
        let params = request(&messages, &tools, 100);
        assert_eq!(params["systemPrompt"], "Be brief.");
        let sampled = params["messages"].as_array().unwrap();
        assert_eq!(sampled.len(), 3, "{params}");
        assert_eq!(sampled[1]["content"][0]["type"], "tool_use");
        assert_eq!(sampled[1]["content"][0]["input"], json!({"path": "x"}));
        let results = sampled[2]["content"].as_array().unwrap();
        assert_eq!(results.len(), 2);
        assert_eq!(results[0]["toolUseId"], "a");
        assert!(results[0].get("isError").is_none());
        assert_eq!(results[1]["isError"], true);
        assert_eq!(params["tools"][0]["name"], "read_file");
        assert_eq!(params["tools"][0]["inputSchema"]["type"], "object");
        assert_eq!(params["toolChoice"], json!({"mode": "auto"}));
        let checked: rmcp::model::CreateMessageRequestParams =
            serde_json::from_value(params).unwrap();
        checked.validate().unwrap();
    }

    #[test]
    fn tool_use_blocks_become_the_turns_tool_calls() {
        let turn = assistant_turn(&json!({
            "role": "assistant", "model": "m", "stopReason": "toolUse",
            "content": [{"type": "tool_use", "id": "t1", "name": "terminal", "input": {"command": "pwd"}}],
        }))
        .unwrap();
        assert_eq!(turn.content, None);
        assert_eq!(turn.tool_calls[0].id, "t1");
        assert_eq!(turn.tool_calls[0].arguments, "{\"command\":\"pwd\"}");
        assert!(assistant_turn(&json!({"role": "assistant", "content": []})).is_err());
    }
}
