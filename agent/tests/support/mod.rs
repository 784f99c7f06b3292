//! A STAND-IN for a model endpoint, for tests only.
//!
//! `ScriptedModel` is a tiny HTTP/1.1 server on 127.0.0.1 (std's TcpListener, one
//! thread per connection) that answers `POST /v1/chat/completions` the way an
//! OpenAI-compatible endpoint does, with replies the test scripts: tool calls, a
//! final answer, a malformed body, an HTTP 500, or a reply slower than the client's
//! timeout. It is not a model and decides nothing by itself.
//!
//! To run the loop against a real endpoint instead, point it there: set
//! `model.base_url` (e.g. `https://openrouter.ai/api/v1`, or a local llama.cpp /
//! vLLM / Ollama server's `http://127.0.0.1:8080/v1`), `model.name` and
//! `model.api_key_env` in `$HERMES_HOME/config.yaml`, or pass `--base-url`, `--model`
//! and `--api-key-env` to `hermes-tools agent`.
#![allow(dead_code)]

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the stand-in sends back for one request.
#[derive(Clone, Debug)]
pub enum Reply {
    /// 200 with this JSON body.
    Json(Value),
    /// This status with this body.
    Status(u16, String),
    /// 200 with this text as the body (e.g. not JSON at all).
    Raw(String),
    /// Waits, then sends the inner reply.
    Delayed(Duration, Box<Reply>),
}

type Responder = dyn Fn(&Value, usize) -> Reply + Send + Sync;

pub struct ScriptedModel {
    pub base_url: String,
    /// Every request body received, in arrival order.
    pub requests: Arc<Mutex<Vec<Value>>>,
    stop: Arc<AtomicBool>,
    address: std::net::SocketAddr,
}

impl ScriptedModel {
    /// Replies in order; past the end of the script, a final answer "script exhausted".
    pub fn script(replies: Vec<Reply>) -> ScriptedModel {
        ScriptedModel::respond(move |_, n| {
            replies
                .get(n)
                .cloned()
                .unwrap_or_else(|| Reply::Json(final_answer("script exhausted")))
        })
    }

    /// `responder(request_body, request_number)` decides each reply.
    pub fn respond(
        responder: impl Fn(&Value, usize) -> Reply + Send + Sync + 'static,
    ) -> ScriptedModel {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let address = listener.local_addr().unwrap();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let responder: Arc<Responder> = Arc::new(responder);
        let counter = Arc::new(AtomicUsize::new(0));
        {
            let requests = Arc::clone(&requests);
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    let requests = Arc::clone(&requests);
                    let responder = Arc::clone(&responder);
                    let counter = Arc::clone(&counter);
                    std::thread::spawn(move || serve_one(stream, &requests, &*responder, &counter));
                }
            });
        }
        ScriptedModel {
            base_url: format!("http://{address}/v1"),
            requests,
            stop,
            address,
        }
    }

    pub fn request_count(&self) -> usize {
        self.requests.lock().unwrap().len()
    }

    pub fn request(&self, n: usize) -> Value {
        self.requests.lock().unwrap()[n].clone()
    }
}

impl Drop for ScriptedModel {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop so it sees the flag.
        let _ = TcpStream::connect_timeout(&self.address, Duration::from_millis(200));
    }
}

fn serve_one(
    stream: TcpStream,
    requests: &Mutex<Vec<Value>>,
    responder: &Responder,
    counter: &AtomicUsize,
) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
        return;
    }
    let mut length = 0usize;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).unwrap_or(0) == 0 {
            return;
        }
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().unwrap_or(0);
            }
        }
    }
    let mut body = vec![0u8; length];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let parsed: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let reply = {
        let mut log = requests.lock().unwrap();
        log.push(parsed.clone());
        let n = counter.fetch_add(1, Ordering::SeqCst);
        drop(log);
        responder(&parsed, n)
    };
    write_reply(stream, reply);
}

fn write_reply(mut stream: TcpStream, reply: Reply) {
    let (status, body) = match reply {
        Reply::Json(value) => (200, value.to_string()),
        Reply::Status(status, body) => (status, body),
        Reply::Raw(text) => (200, text),
        Reply::Delayed(wait, inner) => {
            std::thread::sleep(wait);
            return write_reply(stream, *inner);
        }
    };
    let reason = match status {
        200 => "OK",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        _ => "Status",
    };
    let head = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = stream
        .write_all(head.as_bytes())
        .and_then(|_| stream.write_all(body.as_bytes()))
        .and_then(|_| stream.flush());
}

/// A completion whose message is a final answer.
pub fn final_answer(text: &str) -> Value {
    json!({
        "id": "cmpl-test",
        "object": "chat.completion",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
    })
}

/// A completion whose message calls tools: `(id, name, arguments)`.
pub fn tool_calls(calls: &[(&str, &str, Value)]) -> Value {
    let calls: Vec<Value> = calls
        .iter()
        .map(|(id, name, args)| json!({"id": id, "type": "function", "function": {"name": name, "arguments": args.to_string()}}))
        .collect();
    json!({
        "id": "cmpl-test",
        "object": "chat.completion",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null, "tool_calls": calls}}],
    })
}

/// The text of the last message of a request with this role.
pub fn last_message(request: &Value, role: &str) -> Option<String> {
    request["messages"]
        .as_array()?
        .iter()
        .rev()
        .find(|m| m["role"] == role)
        .and_then(|m| m["content"].as_str().map(str::to_owned))
}

/// The names of the tools a request offered.
pub fn offered_tools(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["function"]["name"].as_str())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}
