//! A Chrome DevTools Protocol connection: commands with ids answered by their
//! responses, and events handed to listeners. Two transports carry the same JSON
//! messages: Chromium's own pipe (descriptors 3 and 4, messages ended by NUL) for a
//! browser this process started, and a WebSocket for one the operator already runs.
//!
//! One reader thread owns the receiving side. Listeners run on that thread, so they
//! must not wait for a command's answer; they use [`Connection::notify`] (send and
//! forget) or hand work to a thread of their own.

use serde_json::{json, Value};
use std::collections::HashMap;
use std::fmt;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A failed command: the browser's error, a timeout, or a lost connection.
#[derive(Debug, Clone)]
pub enum CdpError {
    /// The browser answered with an error object.
    Protocol {
        code: i64,
        message: String,
    },
    Timeout {
        method: String,
        after: Duration,
    },
    Closed,
    Io(String),
}

impl fmt::Display for CdpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CdpError::Protocol { code, message } => write!(f, "{message} (code {code})"),
            CdpError::Timeout { method, after } => {
                write!(f, "{method} got no answer within {}s", after.as_secs())
            }
            CdpError::Closed => f.write_str("the browser connection is closed"),
            CdpError::Io(why) => write!(f, "browser connection error: {why}"),
        }
    }
}

impl std::error::Error for CdpError {}

/// An event the browser sent: `method`, `params`, and the session it belongs to
/// (`None` for the browser itself).
#[derive(Debug)]
pub struct Event {
    pub method: String,
    pub params: Value,
    pub session_id: Option<String>,
}

pub type Listener = Arc<dyn Fn(&Event) + Send + Sync>;

/// Sends one message.
pub trait Outgoing: Send {
    fn send(&mut self, text: &str) -> io::Result<()>;
}

/// Receives one message; `Ok(None)` at the end of the stream.
pub trait Incoming: Send {
    fn receive(&mut self) -> io::Result<Option<String>>;
}

type Pending = HashMap<u64, mpsc::Sender<Result<Value, CdpError>>>;

pub struct Connection {
    outgoing: Mutex<Box<dyn Outgoing>>,
    pending: Mutex<Pending>,
    listeners: Mutex<Vec<(u64, Listener)>>,
    next_id: AtomicU64,
    closed: AtomicBool,
}

impl Connection {
    /// Starts the reader thread over `incoming`.
    pub fn start(outgoing: Box<dyn Outgoing>, mut incoming: Box<dyn Incoming>) -> Arc<Connection> {
        let connection = Arc::new(Connection {
            outgoing: Mutex::new(outgoing),
            pending: Mutex::new(HashMap::new()),
            listeners: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(1),
            closed: AtomicBool::new(false),
        });
        let reader = Arc::downgrade(&connection);
        std::thread::Builder::new()
            .name("cdp-reader".into())
            .spawn(move || loop {
                let message = incoming.receive();
                let Some(connection) = reader.upgrade() else {
                    return;
                };
                match message {
                    Ok(Some(text)) => connection.dispatch(&text),
                    Ok(None) | Err(_) => {
                        connection.close_all();
                        return;
                    }
                }
            })
            .expect("a thread can be started");
        connection
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    fn close_all(&self) {
        self.closed.store(true, Ordering::SeqCst);
        let waiting: Vec<_> = lock(&self.pending).drain().collect();
        for (_, tx) in waiting {
            let _ = tx.send(Err(CdpError::Closed));
        }
    }

    fn dispatch(&self, text: &str) {
        let Ok(mut message) = serde_json::from_str::<Value>(text) else {
            return;
        };
        if let Some(id) = message.get("id").and_then(Value::as_u64) {
            let Some(tx) = lock(&self.pending).remove(&id) else {
                return;
            };
            let answer = match message.get_mut("error") {
                Some(error) => Err(CdpError::Protocol {
                    code: error["code"].as_i64().unwrap_or(0),
                    message: error["message"].as_str().unwrap_or("error").to_string(),
                }),
                None => Ok(message
                    .get_mut("result")
                    .map(Value::take)
                    .unwrap_or(Value::Null)),
            };
            let _ = tx.send(answer);
            return;
        }
        let Some(method) = message.get("method").and_then(Value::as_str) else {
            return;
        };
        let event = Event {
            method: method.to_string(),
            session_id: message
                .get("sessionId")
                .and_then(Value::as_str)
                .map(str::to_string),
            params: message
                .get_mut("params")
                .map(Value::take)
                .unwrap_or(Value::Null),
        };
        let listeners: Vec<Listener> = lock(&self.listeners)
            .iter()
            .map(|(_, l)| Arc::clone(l))
            .collect();
        for listener in listeners {
            listener(&event);
        }
    }

    /// Adds a listener; the id removes it.
    pub fn listen(&self, listener: Listener) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        lock(&self.listeners).push((id, listener));
        id
    }

    pub fn unlisten(&self, id: u64) {
        lock(&self.listeners).retain(|(i, _)| *i != id);
    }

    fn message(&self, id: u64, method: &str, params: Value, session: Option<&str>) -> String {
        let mut message = json!({"id": id, "method": method, "params": params});
        if let Some(session) = session {
            message["sessionId"] = json!(session);
        }
        message.to_string()
    }

    /// Sends a command and waits for its answer.
    pub fn call(
        &self,
        method: &str,
        params: Value,
        session: Option<&str>,
        timeout: Duration,
    ) -> Result<Value, CdpError> {
        if self.is_closed() {
            return Err(CdpError::Closed);
        }
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let (tx, rx) = mpsc::channel();
        lock(&self.pending).insert(id, tx);
        let text = self.message(id, method, params, session);
        if let Err(e) = lock(&self.outgoing).send(&text) {
            lock(&self.pending).remove(&id);
            return Err(CdpError::Io(e.to_string()));
        }
        match rx.recv_timeout(timeout) {
            Ok(answer) => answer,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                lock(&self.pending).remove(&id);
                Err(CdpError::Timeout {
                    method: method.to_string(),
                    after: timeout,
                })
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(CdpError::Closed),
        }
    }

    /// Sends a command whose answer nobody waits for (from a listener).
    pub fn notify(&self, method: &str, params: Value, session: Option<&str>) {
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let text = self.message(id, method, params, session);
        let _ = lock(&self.outgoing).send(&text);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// Chromium's `--remote-debugging-pipe`: JSON messages ended by a NUL byte.
pub struct PipeOut(pub std::fs::File);

impl Outgoing for PipeOut {
    fn send(&mut self, text: &str) -> io::Result<()> {
        let mut framed = Vec::with_capacity(text.len() + 1);
        framed.extend_from_slice(text.as_bytes());
        framed.push(0);
        self.0.write_all(&framed)
    }
}

pub struct PipeIn(pub BufReader<std::fs::File>);

impl Incoming for PipeIn {
    fn receive(&mut self) -> io::Result<Option<String>> {
        let mut buffer = Vec::new();
        let read = self.0.read_until(0, &mut buffer)?;
        if read == 0 {
            return Ok(None);
        }
        if buffer.last() == Some(&0) {
            buffer.pop();
        }
        String::from_utf8(buffer)
            .map(Some)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }
}

/// The largest message taken from a WebSocket: a full accessibility tree of a big
/// page is tens of megabytes.
const MAX_MESSAGE: usize = 512 << 20;

pub struct SocketOut(tungstenite::WebSocket<std::net::TcpStream>);
pub struct SocketIn(tungstenite::WebSocket<std::net::TcpStream>);

impl Outgoing for SocketOut {
    fn send(&mut self, text: &str) -> io::Result<()> {
        self.0
            .send(tungstenite::Message::Text(text.to_string().into()))
            .map_err(io::Error::other)
    }
}

impl Incoming for SocketIn {
    fn receive(&mut self) -> io::Result<Option<String>> {
        loop {
            match self.0.read() {
                Ok(tungstenite::Message::Text(text)) => return Ok(Some(text.to_string())),
                Ok(tungstenite::Message::Binary(bytes)) => {
                    return Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
                }
                Ok(tungstenite::Message::Close(_)) => return Ok(None),
                Ok(_) => continue,
                Err(tungstenite::Error::ConnectionClosed | tungstenite::Error::AlreadyClosed) => {
                    return Ok(None)
                }
                Err(e) => return Err(io::Error::other(e)),
            }
        }
    }
}

/// Opens a `ws://host:port/devtools/browser/<id>` WebSocket: the handshaken socket
/// reads, a second one over a clone of the same TCP stream writes.
pub fn connect_websocket(address: &str, timeout: Duration) -> Result<Arc<Connection>, String> {
    let parsed = url::Url::parse(address).map_err(|e| format!("invalid CDP URL {address}: {e}"))?;
    if parsed.scheme() != "ws" {
        return Err(format!(
            "only ws:// DevTools endpoints are supported, not {}://",
            parsed.scheme()
        ));
    }
    let host = parsed.host_str().ok_or("the CDP URL names no host")?;
    let port = parsed.port_or_known_default().unwrap_or(80);
    let addresses: Vec<_> = std::net::ToSocketAddrs::to_socket_addrs(&(host, port))
        .map_err(|e| format!("cannot resolve {host}: {e}"))?
        .collect();
    let mut last = None;
    let mut stream = None;
    for address in addresses {
        match std::net::TcpStream::connect_timeout(&address, timeout) {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => last = Some(e),
        }
    }
    let stream = stream.ok_or_else(|| {
        format!(
            "cannot connect to {host}:{port}: {}",
            last.map_or("no address".to_string(), |e| e.to_string())
        )
    })?;
    stream
        .set_read_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    let mut config = tungstenite::protocol::WebSocketConfig::default();
    config.max_message_size = Some(MAX_MESSAGE);
    config.max_frame_size = Some(MAX_MESSAGE);
    let (socket, _) = tungstenite::client::client_with_config(address, stream, Some(config))
        .map_err(|e| format!("WebSocket handshake with {address} failed: {e}"))?;
    socket
        .get_ref()
        .set_read_timeout(None)
        .map_err(|e| e.to_string())?;
    let writer_stream = socket.get_ref().try_clone().map_err(|e| e.to_string())?;
    let writer = tungstenite::WebSocket::from_raw_socket(
        writer_stream,
        tungstenite::protocol::Role::Client,
        Some(config),
    );
    Ok(Connection::start(
        Box::new(SocketOut(writer)),
        Box::new(SocketIn(socket)),
    ))
}

/// Reads everything a reader holds (launch diagnostics).
pub fn read_all(mut reader: impl Read) -> String {
    let mut text = String::new();
    let _ = reader.read_to_string(&mut text);
    text
}
