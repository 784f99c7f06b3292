//! What stands between the network and the MCP server over HTTP: a bearer token on
//! every request, JSON-RPC errors for malformed bodies, and a cap on live sessions.
//!
//! The token is `HERMES_MCP_SERVER_TOKEN`, else `mcp_server.token` in config.yaml,
//! else one made at start, saved to `$HERMES_HOME/mcp_server_token` (mode 0600) and
//! printed on stderr. A request without `Authorization: Bearer <token>` is answered
//! 401 before anything else looks at it. Only a configured token lets the server
//! listen beyond loopback.
//!
//! Sessions: at most `mcp_server.max_sessions` (default 64) live at once; an
//! `initialize` beyond that closes the session idle the longest. A session with no
//! request for `mcp_server.session_idle_seconds` (default 300) is closed, and so is one
//! the client ends with `DELETE` (answered 200; a request naming a session that is not
//! live is answered 404). A closed session lets go of everything it held.
//!
//! Long calls (SEP-1699 polling): with `mcp_server.sse_poll_seconds` set, the SSE
//! stream of a `tools/call` still running after that long is closed once its priming
//! event (an id and a `retry` hint) went out. The session keeps what the call sends
//! next; the client reconnects with `GET` and `Last-Event-ID` and receives the rest
//! there, so no connection stays open for the length of a call (proxies with idle
//! timeouts, clients that hold few connections).

use bytes::Bytes;
use http::{header, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::SessionManager;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub const TOKEN_ENV: &str = "HERMES_MCP_SERVER_TOKEN";
pub const TOKEN_FILE: &str = "mcp_server_token";
pub const DEFAULT_MAX_SESSIONS: usize = 64;
pub const DEFAULT_SESSION_IDLE: Duration = Duration::from_secs(300);
pub const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;
const SESSION_HEADER: &str = "mcp-session-id";

pub type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

/// The bearer token and where it came from.
#[derive(Clone)]
pub struct Token {
    pub secret: String,
    /// `None` when configured (environment or config.yaml); the file it was saved
    /// to when made at start.
    pub generated_into: Option<PathBuf>,
}

impl Token {
    /// The token for a server listening on `addr`: the configured one, else a new
    /// one saved under `hermes_home`, which only a loopback address may use.
    pub fn for_listener(
        hermes_home: &Path,
        configured: Option<&str>,
        addr: SocketAddr,
    ) -> std::io::Result<Token> {
        let from_env = std::env::var(TOKEN_ENV).ok();
        if let Some(secret) = from_env
            .as_deref()
            .or(configured)
            .map(str::trim)
            .filter(|t| !t.is_empty())
        {
            return Ok(Token {
                secret: secret.to_string(),
                generated_into: None,
            });
        }
        if !addr.ip().is_loopback() {
            return Err(std::io::Error::other(format!(
                "refusing to listen on {addr}, beyond this machine, without a configured token: \
                 set {TOKEN_ENV} or mcp_server.token in config.yaml (or listen on 127.0.0.1)"
            )));
        }
        let secret = hermes_runtime::random::try_random_hex(64)?;
        let path = hermes_home.join(TOKEN_FILE);
        write_private(&path, &secret)?;
        Ok(Token {
            secret,
            generated_into: Some(path),
        })
    }

    fn admits(&self, request: &Request<Incoming>) -> bool {
        let Some(value) = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
        else {
            return false;
        };
        let Some((scheme, presented)) = value.trim().split_once(' ') else {
            return false;
        };
        scheme.eq_ignore_ascii_case("bearer")
            && same_secret(presented.trim().as_bytes(), self.secret.as_bytes())
    }
}

/// Compares in time that depends on the length only, not on where bytes differ.
fn same_secret(presented: &[u8], secret: &[u8]) -> bool {
    presented.len() == secret.len()
        && presented
            .iter()
            .zip(secret)
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let temporary = path.with_extension(format!("tmp{}", std::process::id()));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&temporary)?;
    file.write_all(text.as_bytes())?;
    file.sync_all()?;
    std::fs::rename(&temporary, path)
}

/// Session limits, from `mcp_server.*` in config.yaml.
#[derive(Debug, Clone, Copy)]
pub struct SessionLimits {
    pub max_sessions: usize,
    pub idle: Duration,
    /// `mcp_server.sse_poll_seconds`: when a call's stream is closed for polling.
    pub poll_after: Option<Duration>,
}

impl SessionLimits {
    pub fn from_config(config: &hermes_runtime::config::Config) -> SessionLimits {
        SessionLimits {
            max_sessions: config
                .positive_usize("mcp_server.max_sessions")
                .unwrap_or(DEFAULT_MAX_SESSIONS),
            idle: config
                .positive_usize("mcp_server.session_idle_seconds")
                .map_or(DEFAULT_SESSION_IDLE, |s| Duration::from_secs(s as u64)),
            poll_after: config
                .get("mcp_server.sse_poll_seconds")
                .and_then(Value::as_f64)
                .filter(|s| s.is_finite() && *s > 0.0)
                .map(Duration::from_secs_f64),
        }
    }
}

/// Last request time of each session, to pick the one to close at the cap.
pub struct SessionCap {
    manager: Arc<LocalSessionManager>,
    max_sessions: usize,
    last_seen: Mutex<HashMap<String, Instant>>,
}

impl SessionCap {
    pub fn new(manager: Arc<LocalSessionManager>, max_sessions: usize) -> SessionCap {
        SessionCap {
            manager,
            max_sessions: max_sessions.max(1),
            last_seen: Mutex::default(),
        }
    }

    fn seen(&self, id: &str) {
        self.last_seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id.to_string(), Instant::now());
    }

    async fn live(&self, id: &str) -> bool {
        let id: rmcp::transport::streamable_http_server::SessionId = id.to_string().into();
        self.manager.sessions.read().await.contains_key(&id)
    }

    /// Closes session `id`: its worker ends, which drops its server and with it
    /// everything the session held.
    async fn close(&self, id: &str) {
        self.last_seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id);
        let id: rmcp::transport::streamable_http_server::SessionId = id.to_string().into();
        if self.manager.close_session(&id).await.is_err() {
            // Gone already; the map no longer has it either.
            self.manager.sessions.write().await.remove(&id);
        }
    }

    /// Closes the sessions without a request for `idle`, now and then, until the
    /// process ends. rmcp ends an idle session's worker by itself but keeps its entry.
    pub async fn expire_idle(&self, idle: Duration) {
        let period = (idle / 4).clamp(Duration::from_millis(100), Duration::from_secs(30));
        loop {
            tokio::time::sleep(period).await;
            let expired: Vec<String> = self
                .last_seen
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .iter()
                .filter(|(_, at)| at.elapsed() >= idle)
                .map(|(id, _)| id.clone())
                .collect();
            for id in expired {
                self.close(&id).await;
            }
        }
    }

    /// Before a new session: closes the longest idle ones until there is room.
    async fn make_room(&self) {
        loop {
            let live: Vec<String> = self
                .manager
                .sessions
                .read()
                .await
                .keys()
                .map(|id| id.to_string())
                .collect();
            if live.len() < self.max_sessions {
                let mut seen = self.last_seen.lock().unwrap_or_else(|p| p.into_inner());
                seen.retain(|id, _| live.contains(id));
                return;
            }
            let oldest = {
                let seen = self.last_seen.lock().unwrap_or_else(|p| p.into_inner());
                live.iter()
                    .min_by_key(|id| seen.get(id.as_str()).copied())
                    .cloned()
            };
            let Some(oldest) = oldest else { return };
            self.close(&oldest).await;
        }
    }
}

fn json_response(status: StatusCode, body: &Value) -> Response<Body> {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(body.to_string())).boxed())
        .expect("a valid response")
}

fn rpc_error(
    status: StatusCode,
    id: Value,
    code: i64,
    message: impl Into<String>,
) -> Response<Body> {
    json_response(
        status,
        &json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message.into()}}),
    )
}

fn unauthorized() -> Response<Body> {
    let mut response = rpc_error(
        StatusCode::UNAUTHORIZED,
        Value::Null,
        -32001,
        "unauthorized: send Authorization: Bearer <token> (the token hermes-tools mcp printed, or the one configured)",
    );
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        http::HeaderValue::from_static("Bearer realm=\"hermes-tools\""),
    );
    response
}

/// The JSON-RPC error a message deserves before it reaches the server, if any.
fn check_message(message: &Value) -> Result<(), (i64, Value, String)> {
    let Value::Object(object) = message else {
        return Err((
            -32600,
            Value::Null,
            "Invalid Request: a JSON-RPC message is an object".into(),
        ));
    };
    let id = object.get("id").cloned().unwrap_or(Value::Null);
    if !matches!(id, Value::Null | Value::String(_) | Value::Number(_)) {
        return Err((
            -32600,
            Value::Null,
            "Invalid Request: `id` must be a string or a number".into(),
        ));
    }
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err((
            -32600,
            id,
            "Invalid Request: `jsonrpc` must be \"2.0\"".into(),
        ));
    }
    let Some(method) = object.get("method") else {
        // A response to a request of the server (elicitation, ping).
        return match object.contains_key("result") || object.contains_key("error") {
            true => Ok(()),
            false => Err((
                -32600,
                id,
                "Invalid Request: neither `method` nor `result`/`error`".into(),
            )),
        };
    };
    let Some(method) = method.as_str() else {
        return Err((
            -32600,
            id,
            "Invalid Request: `method` must be a string".into(),
        ));
    };
    let params = object.get("params");
    if !matches!(params, None | Some(Value::Object(_))) {
        return Err((
            -32602,
            id,
            format!("Invalid params: `params` of {method} must be an object"),
        ));
    }
    match method {
        "tools/call" => {
            let params = params.and_then(Value::as_object);
            if !params
                .and_then(|p| p.get("name"))
                .is_some_and(Value::is_string)
            {
                return Err((
                    -32602,
                    id,
                    "Invalid params: tools/call needs `name`, a string".into(),
                ));
            }
            if !matches!(
                params.and_then(|p| p.get("arguments")),
                None | Some(Value::Null) | Some(Value::Object(_))
            ) {
                return Err((
                    -32602,
                    id,
                    "Invalid params: tools/call `arguments` must be an object".into(),
                ));
            }
        }
        "initialize" if params.is_none() => {
            return Err((-32602, id, "Invalid params: initialize needs `params` (protocolVersion, capabilities, clientInfo)".into()));
        }
        _ => {}
    }
    Ok(())
}

/// An SSE answer that ends at `deadline` once it has sent something (the priming
/// event), unless it ended before.
struct PollingBody {
    inner: Body,
    deadline: std::pin::Pin<Box<tokio::time::Sleep>>,
    sent: bool,
}

impl hyper::body::Body for PollingBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Infallible>>> {
        use std::task::Poll;
        let this = &mut *self;
        if this.sent && this.deadline.as_mut().poll(cx).is_ready() {
            return Poll::Ready(None);
        }
        let frame = std::pin::Pin::new(&mut this.inner).poll_frame(cx);
        if let Poll::Ready(Some(_)) = &frame {
            this.sent = true;
            // The deadline may have passed while nothing was sent: look again.
            if this.deadline.as_mut().poll(cx).is_ready() {
                cx.waker().wake_by_ref();
            }
        }
        frame
    }
}

/// Closes a call's SSE stream after `after` (see the module's polling note).
fn poll_after(response: Response<Body>, after: Duration) -> Response<Body> {
    let streams = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("text/event-stream"));
    if !streams {
        return response;
    }
    response.map(|inner| {
        PollingBody {
            inner,
            deadline: Box::pin(tokio::time::sleep(after)),
            sent: false,
        }
        .boxed()
    })
}

/// Guards one request, then hands it to `inner` (the MCP service).
pub async fn guard<F, Fut>(
    token: &Token,
    sessions: &SessionCap,
    limits: &SessionLimits,
    request: Request<Incoming>,
    inner: F,
) -> Response<Body>
where
    F: FnOnce(Request<Full<Bytes>>) -> Fut,
    Fut: std::future::Future<Output = Response<Body>>,
{
    if !token.admits(&request) {
        return unauthorized();
    }
    let session = request
        .headers()
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    if let Some(id) = &session {
        if !sessions.live(id).await {
            // The spec's answer for a session that ended or never was: 404, so the
            // client starts a new one.
            return rpc_error(
                StatusCode::NOT_FOUND,
                Value::Null,
                -32001,
                "Session not found: it was closed or has expired; start a new one with initialize",
            );
        }
        if request.method() == http::Method::DELETE {
            sessions.close(id).await;
            return Response::builder()
                .status(StatusCode::OK)
                .body(Full::new(Bytes::new()).boxed())
                .expect("a valid response");
        }
        sessions.seen(id);
    }
    let (parts, body) = request.into_parts();
    let bytes = match Limited::new(body, MAX_BODY_BYTES).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) => {
            return rpc_error(StatusCode::PAYLOAD_TOO_LARGE, Value::Null, -32600, format!("Invalid Request: the body could not be read (at most {MAX_BODY_BYTES} bytes): {e}"));
        }
    };
    let mut opens_session = false;
    let mut calls = false;
    if parts.method == http::Method::POST {
        let message: Value = match serde_json::from_slice(&bytes) {
            Ok(message) => message,
            Err(e) => {
                return rpc_error(
                    StatusCode::BAD_REQUEST,
                    Value::Null,
                    -32700,
                    format!("Parse error: {e}"),
                )
            }
        };
        let messages = match &message {
            Value::Array(items) if items.is_empty() => {
                return rpc_error(
                    StatusCode::BAD_REQUEST,
                    Value::Null,
                    -32600,
                    "Invalid Request: an empty batch",
                );
            }
            Value::Array(items) => items.iter().collect(),
            single => vec![single],
        };
        for message in &messages {
            if let Err((code, id, why)) = check_message(message) {
                let status = if code == -32602 {
                    StatusCode::OK
                } else {
                    StatusCode::BAD_REQUEST
                };
                return rpc_error(status, id, code, why);
            }
        }
        opens_session = session.is_none()
            && messages
                .iter()
                .any(|m| m.get("method").and_then(Value::as_str) == Some("initialize"));
        calls = messages
            .iter()
            .any(|m| m.get("method").and_then(Value::as_str) == Some("tools/call"));
    }
    if opens_session {
        sessions.make_room().await;
    }
    let response = inner(Request::from_parts(parts, Full::new(bytes))).await;
    if let Some(id) = response
        .headers()
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
    {
        sessions.seen(id);
    }
    match limits.poll_after {
        // Only a session's call can be resumed: its events are kept by the session.
        Some(after) if calls && session.is_some() => poll_after(response, after),
        _ => response,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_compare_whole() {
        assert!(same_secret(b"abc", b"abc"));
        assert!(!same_secret(b"abd", b"abc"));
        assert!(!same_secret(b"ab", b"abc"));
    }

    #[test]
    fn malformed_messages_get_their_codes() {
        let code = |m: Value| check_message(&m).err().map(|(c, _, _)| c);
        assert_eq!(code(json!(3)), Some(-32600));
        assert_eq!(
            code(json!({"jsonrpc": "1.0", "id": 1, "method": "ping"})),
            Some(-32600)
        );
        assert_eq!(
            code(json!({"jsonrpc": "2.0", "id": {}, "method": "ping"})),
            Some(-32600)
        );
        assert_eq!(
            code(
                json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"arguments": {}}})
            ),
            Some(-32602)
        );
        assert_eq!(
            code(
                json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x", "arguments": [1]}})
            ),
            Some(-32602)
        );
        assert_eq!(
            code(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": 5})),
            Some(-32602)
        );
        assert_eq!(
            code(
                json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x"}})
            ),
            None
        );
        assert_eq!(code(json!({"jsonrpc": "2.0", "id": 1, "result": {}})), None);
    }
}
