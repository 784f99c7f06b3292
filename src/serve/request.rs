//! Calls as read from a line, and running them.

use super::SessionHub;
use crate::serve_approvals::{ApprovalsMode, ClientApprover};
use hermes_agent::store::NewMessage;
use hermes_agent::AgentSession;
use hermes_runtime::args::json_type_name;
use hermes_runtime::batch::Access;
use hermes_runtime::{Registry, ToolCall, ToolContext};
use serde_json::{json, Value};
use std::sync::Arc;

/// The task of calls that name neither a task nor a session.
pub const DEFAULT_TASK: &str = "default";

/// One call as read from a line, with what the answer must echo.
pub struct IncomingCall {
    pub id: String,
    pub call: ToolCall,
    task_id: Option<String>,
    session_id: Option<String>,
}

impl IncomingCall {
    /// The task whose state (shell, file records, processes) the call uses: its
    /// `task_id`, else its `session_id`, else the default task.
    pub fn task(&self) -> &str {
        self.task_id
            .as_deref()
            .or(self.session_id.as_deref())
            .unwrap_or(DEFAULT_TASK)
    }
}

// A call is moved a few times on its way to a worker; boxing it would add an allocation
// to every call for the sake of the rarer batch.
#[allow(clippy::large_enum_variant)]
pub enum Request {
    One(IncomingCall),
    Batch(Vec<IncomingCall>),
}

impl Request {
    /// The task a request is queued under: a batch runs as one unit, under its first
    /// call's task.
    pub fn task(&self) -> &str {
        match self {
            Request::One(call) => call.task(),
            Request::Batch(calls) => calls.first().map_or(DEFAULT_TASK, IncomingCall::task),
        }
    }

    /// What the request's calls touch, which orders it among the calls of its task.
    pub fn access(&self, registry: &Registry, hub: &SessionHub) -> Vec<Access> {
        let calls = match self {
            Request::One(call) => std::slice::from_ref(call),
            Request::Batch(calls) => calls.as_slice(),
        };
        calls
            .iter()
            .map(|c| registry.access_of_call(&c.call, &hub.paths))
            .collect()
    }

    pub fn ids(&self) -> Vec<String> {
        match self {
            Request::One(call) => vec![call.id.clone()],
            Request::Batch(calls) => calls.iter().map(|c| c.id.clone()).collect(),
        }
    }
}

/// An optional string field, taken out of the call: absent and `null` are `None`, an
/// empty string too; anything but a string is an error.
fn optional_text(
    object: &mut serde_json::Map<String, Value>,
    key: &str,
) -> Result<Option<String>, String> {
    match object.remove(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) if text.is_empty() => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(other) => Err(format!(
            "`{key}` must be a string, got {}",
            json_type_name(&other)
        )),
    }
}

fn read_call(value: Value, line: usize, position: usize) -> Result<IncomingCall, String> {
    let Value::Object(mut object) = value else {
        return Err(format!(
            "a call must be a JSON object with `function`, got {}",
            json_type_name(&value)
        ));
    };
    let id = optional_text(&mut object, "id")?.unwrap_or_else(|| format!("call_{line}_{position}"));
    if let Some(kind) = object.get("type") {
        if kind != "function" {
            return Err(format!(
                "unsupported call type {kind}; only \"function\" calls are served"
            ));
        }
    }
    let mut function = object
        .remove("function")
        .ok_or("a call needs `function`: {\"name\", \"arguments\"}")?;
    let name = match function.get_mut("name") {
        Some(Value::String(name)) if !name.is_empty() => std::mem::take(name),
        _ => return Err("`function.name` must be a non-empty string".into()),
    };
    Ok(IncomingCall {
        call: ToolCall {
            name,
            arguments: function.get_mut("arguments").map(Value::take),
            tool_call_id: Some(id.clone()),
            ..Default::default()
        },
        id,
        task_id: optional_text(&mut object, "task_id")?,
        session_id: optional_text(&mut object, "session_id")?,
    })
}

/// A line's calls, taken out of the parsed line; `Err` says what is wrong with the
/// line (prefixed with the call's position in an array).
pub fn read_request(value: Value, line: usize) -> Result<Request, String> {
    match value {
        Value::Array(calls) if calls.is_empty() => {
            Err("the line is an empty array: there is no call to run".into())
        }
        Value::Array(calls) => calls
            .into_iter()
            .enumerate()
            .map(|(position, call)| {
                read_call(call, line, position)
                    .map_err(|why| format!("call {position} of the array: {why}"))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Request::Batch),
        other => read_call(other, line, 0).map(Request::One),
    }
}

/// An answer line as it is written: the fields in this order, serialised straight
/// from the strings (no JSON map is built for it).
#[derive(serde::Serialize)]
struct Answer<'a> {
    role: &'static str,
    tool_call_id: &'a str,
    content: &'a str,
}

/// `{"role": "tool", "tool_call_id": ID, "content": CONTENT}`. Under `serve --images`
/// a result that carries an image (the multimodal envelope) is answered with
/// `content` as the envelope's OpenAI content array (text and `image_url` parts).
pub fn answer(id: &str, content: String) -> String {
    if hermes_runtime::context::process_accepts_images() && content.starts_with("{\"_multimodal\"")
    {
        if let Ok(envelope) = serde_json::from_str::<serde_json::Value>(&content) {
            if hermes_runtime::dispatch::is_multimodal_envelope(&envelope) {
                return serde_json::json!({
                    "role": "tool",
                    "tool_call_id": id,
                    "content": envelope["content"],
                })
                .to_string();
            }
        }
    }
    serde_json::to_string(&Answer {
        role: "tool",
        tool_call_id: id,
        content: &content,
    })
    .expect("strings always serialise")
}

fn context_for(call: &IncomingCall, hub: &SessionHub) -> (ToolContext, Option<Arc<AgentSession>>) {
    let mut builder = ToolContext::builder().task_id(call.task().to_string());
    if let Some(cwd) = &hub.cwd {
        builder = builder.cwd(cwd.clone());
    }
    if hub.approvals == ApprovalsMode::Client {
        let approver = ClientApprover::new(
            Arc::clone(&hub.clarify),
            call.session_id.clone(),
            Some(call.task().to_string()),
        );
        builder = builder.approver(Arc::new(approver));
    }
    let mut session = None;
    if let Some(id) = call.session_id.as_deref() {
        builder = builder.session_id(id.to_string());
        let found = hub.session(id);
        builder =
            builder.agent_session(Arc::clone(&found) as Arc<dyn hermes_runtime::AgentSession>);
        session = Some(found);
    }
    (builder.build(), session)
}

/// Records one turn's calls (as the assistant's tool calls) and their results.
fn record_turn(session: Option<&AgentSession>, calls: &[IncomingCall], results: &[String]) {
    let Some(session) = session else { return };
    let tool_calls: Vec<Value> = calls
        .iter()
        .map(|c| {
            let arguments = match &c.call.arguments {
                Some(Value::String(text)) => text.clone(),
                Some(other) => other.to_string(),
                None => "{}".into(),
            };
            json!({"id": c.id, "type": "function", "function": {"name": c.call.name, "arguments": arguments}})
        })
        .collect();
    session.record(&NewMessage {
        role: "assistant".into(),
        tool_calls: Some(Value::Array(tool_calls)),
        ..Default::default()
    });
    for (call, result) in calls.iter().zip(results) {
        session.record(&NewMessage {
            role: "tool".into(),
            content: result.clone(),
            tool_call_id: Some(call.id.clone()),
            tool_name: Some(call.call.name.clone()),
            ..Default::default()
        });
    }
}

/// Runs a request on the calling thread; the answer lines, in the request's order.
pub fn run_request(registry: &Registry, hub: &SessionHub, request: Request) -> Vec<String> {
    match request {
        Request::One(incoming) => {
            let (ctx, session) = context_for(&incoming, hub);
            let result = registry.handle_function_call(&incoming.call, &ctx);
            record_turn(
                session.as_deref(),
                std::slice::from_ref(&incoming),
                std::slice::from_ref(&result),
            );
            vec![answer(&incoming.id, result)]
        }
        Request::Batch(calls) => {
            // One context per run of calls of the same task and session; those
            // calls are one turn and share the turn budget.
            let mut answers = Vec::with_capacity(calls.len());
            let mut start = 0;
            while start < calls.len() {
                let key = (calls[start].task(), &calls[start].session_id);
                let end = calls[start..]
                    .iter()
                    .position(|c| (c.task(), &c.session_id) != key)
                    .map_or(calls.len(), |n| start + n);
                let group = &calls[start..end];
                let (ctx, session) = context_for(&group[0], hub);
                let batch: Vec<ToolCall> = group.iter().map(|c| c.call.clone()).collect();
                let results = registry.handle_batch(&batch, &ctx);
                record_turn(session.as_deref(), group, &results);
                answers.extend(group.iter().zip(results).map(|(c, r)| answer(&c.id, r)));
                start = end;
            }
            answers
        }
    }
}
