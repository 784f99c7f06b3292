//! `hermes-tools serve`: tool calls as JSON lines on stdin, answers on stdout.
//!
//! A line is one call or an array of calls in the OpenAI shape
//! (`{"id", "type": "function", "function": {"name", "arguments"}}`, `arguments` a
//! JSON string), optionally with `task_id` and `session_id`. Each call is answered by
//! one line `{"role": "tool", "tool_call_id": ID, "content": STRING}`; an array's
//! answers come together, in its order. Lines run concurrently. A line that cannot be
//! read gets `{"error": ..., "line": N}` and the server keeps going; at end of input
//! it finishes the calls still running, then exits.

use hermes_runtime::{Registry, ToolCall, ToolContext};
use serde_json::{json, Value};
use std::sync::Arc;
use tokio::io::{AsyncBufReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

/// One call as read from a line, with what the answer must echo.
struct IncomingCall {
    id: String,
    call: ToolCall,
    task_id: Option<String>,
    session_id: Option<String>,
}

enum Request {
    One(IncomingCall),
    Batch(Vec<IncomingCall>),
}

fn read_call(value: &Value, line: usize, position: usize, inherited: &Value) -> Result<IncomingCall, String> {
    let Value::Object(object) = value else {
        return Err("a call must be a JSON object with `function`".into());
    };
    let id = match object.get("id") {
        Some(Value::String(id)) => id.clone(),
        Some(Value::Number(n)) => n.to_string(),
        None | Some(Value::Null) => format!("call_{line}_{position}"),
        Some(_) => return Err("`id` must be a string".into()),
    };
    if let Some(kind) = object.get("type") {
        if kind != "function" {
            return Err(format!("unsupported call type {kind}; only \"function\" calls are served"));
        }
    }
    let function = object.get("function").ok_or("a call needs `function`: {\"name\", \"arguments\"}")?;
    let name = function
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or("`function.name` must be a non-empty string")?;
    let text_field = |key: &str| {
        object
            .get(key)
            .or_else(|| inherited.get(key))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    Ok(IncomingCall {
        call: ToolCall {
            name: name.to_string(),
            arguments: function.get("arguments").cloned(),
            tool_call_id: Some(id.clone()),
            ..Default::default()
        },
        id,
        task_id: text_field("task_id"),
        session_id: text_field("session_id"),
    })
}

fn read_request(text: &str, line: usize) -> Result<Request, String> {
    let value: Value = serde_json::from_str(text).map_err(|e| format!("the line is not valid JSON: {e}"))?;
    match &value {
        Value::Array(calls) => calls
            .iter()
            .enumerate()
            .map(|(position, call)| read_call(call, line, position, &Value::Null))
            .collect::<Result<Vec<_>, _>>()
            .map(Request::Batch),
        other => read_call(other, line, 0, &Value::Null).map(Request::One),
    }
}

fn answer(id: &str, content: String) -> String {
    json!({"role": "tool", "tool_call_id": id, "content": content}).to_string()
}

fn context_for(call: &IncomingCall) -> ToolContext {
    let mut builder = ToolContext::builder();
    if let Some(task) = &call.task_id {
        builder = builder.task_id(task.clone());
    }
    if let Some(session) = &call.session_id {
        builder = builder.session_id(session.clone());
    }
    builder.build()
}

/// Runs a request on the blocking pool: handlers may block (files, processes), and
/// async handlers are bridged from there without tying up the reader.
async fn run_request(registry: Arc<Registry>, request: Request) -> Vec<String> {
    let work = tokio::task::spawn_blocking(move || match request {
        Request::One(incoming) => {
            let ctx = context_for(&incoming);
            vec![answer(&incoming.id, registry.handle_function_call(&incoming.call, &ctx))]
        }
        Request::Batch(calls) => {
            // One context per task in the batch; calls of one task share its state.
            let mut answers = Vec::with_capacity(calls.len());
            let mut start = 0;
            while start < calls.len() {
                let task = (&calls[start].task_id, &calls[start].session_id);
                let end = calls[start..].iter().position(|c| (&c.task_id, &c.session_id) != task).map_or(calls.len(), |n| start + n);
                let ctx = context_for(&calls[start]);
                let batch: Vec<ToolCall> = calls[start..end].iter().map(|c| c.call.clone()).collect();
                let results = registry.handle_batch(&batch, &ctx);
                answers.extend(calls[start..end].iter().zip(results).map(|(c, r)| answer(&c.id, r)));
                start = end;
            }
            answers
        }
    });
    work.await.unwrap_or_else(|e| vec![json!({"error": format!("the call could not finish: {e}")}).to_string()])
}

/// Serves `input` until it ends, writing answers to `output`.
pub async fn serve<R, W>(registry: Arc<Registry>, input: R, mut output: W) -> std::io::Result<()>
where
    R: tokio::io::AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (sender, mut receiver) = mpsc::unbounded_channel::<Vec<String>>();
    // One writer, so answers never interleave within a line.
    let writer = tokio::spawn(async move {
        while let Some(lines) = receiver.recv().await {
            let mut block = String::new();
            for line in lines {
                block.push_str(&line);
                block.push('\n');
            }
            output.write_all(block.as_bytes()).await?;
            output.flush().await?;
        }
        Ok::<_, std::io::Error>(())
    });
    let mut running = JoinSet::new();
    let mut lines = BufReader::new(input).lines();
    let mut number = 0usize;
    loop {
        let next = match lines.next_line().await {
            Ok(next) => next,
            Err(e) => {
                // Invalid UTF-8 or a read error: report it; the stream may still go on.
                number += 1;
                let _ = sender.send(vec![json!({"error": format!("cannot read line: {e}"), "line": number}).to_string()]);
                if e.kind() == std::io::ErrorKind::InvalidData {
                    continue;
                }
                break;
            }
        };
        let Some(text) = next else { break };
        number += 1;
        if text.trim().is_empty() {
            continue;
        }
        match read_request(&text, number) {
            Ok(request) => {
                let registry = Arc::clone(&registry);
                let sender = sender.clone();
                running.spawn(async move {
                    let answers = run_request(registry, request).await;
                    let _ = sender.send(answers);
                });
            }
            Err(why) => {
                let _ = sender.send(vec![json!({"error": why, "line": number}).to_string()]);
            }
        }
    }
    while running.join_next().await.is_some() {}
    drop(sender);
    writer.await.map_err(std::io::Error::other)?
}

/// The blocking entry point of the CLI: a multi-thread runtime for the server's own
/// I/O; tool handlers run on the blocking pool and the async bridge.
pub fn serve_stdio(registry: Registry) -> std::io::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("hermes-serve")
        .build()?;
    runtime.block_on(serve(Arc::new(registry), tokio::io::stdin(), tokio::io::stdout()))
}
