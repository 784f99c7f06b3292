//! MCP client: every enabled server under `mcp_servers` in config.yaml becomes a set
//! of tools in the registry.
//!
//! ```yaml
//! mcp_servers:
//!   files:                       # stdio: a command started as a child process
//!     command: npx
//!     args: ["-y", "@modelcontextprotocol/server-filesystem", "/srv/data"]
//!     env: {LOG_LEVEL: warn}
//!     timeout: 120               # seconds per tool call (default 120)
//!     connect_timeout: 60        # seconds to connect and list tools (default 60)
//!   search:                      # streamable HTTP
//!     url: https://mcp.example.com/mcp
//!     headers: {Authorization: "Bearer ..."}
//!     tools:
//!       include: ["search_*"]    # the server's tool names (or their sanitised form), exact or
//!                                # globs; include wins; [] registers nothing
//!       exclude: ["debug"]
//!   old:
//!     command: ./old-server
//!     enabled: false
//! ```
//!
//! Each tool `t` of server `s` is registered as `mcp_<s>_<t>` (each part sanitised to
//! `[A-Za-z0-9_]`) in toolset `mcp-<s>`, with the alias `s` → `mcp-s`. A name another
//! toolset owns is skipped with a warning. Calls are forwarded with the server's
//! timeout; a server that dies answers its tools' calls with an error while a
//! reconnect is attempted in the background; `notifications/tools/list_changed`
//! re-lists and re-registers (vanished tools are removed).

use crate::names::{mcp_tool_name, mcp_toolset, Pattern, ToolFilter};
use hermes_runtime::catalog::Concurrency;
use hermes_runtime::registry::{DynamicCheck, Registration};
use hermes_runtime::{Caller, DynamicHandler, DynamicTool, Registry};
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation, ProtocolVersion,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(120);
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(60);
/// Reconnect attempts after a server dies, with doubling delays from one second.
pub const RECONNECT_ATTEMPTS: u32 = 5;

/// How to reach a server.
#[derive(Debug, Clone, PartialEq)]
pub enum Transport {
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
        cwd: Option<PathBuf>,
    },
    Http {
        url: String,
        headers: BTreeMap<String, String>,
    },
}

/// One entry of `mcp_servers`.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub name: String,
    pub transport: Transport,
    pub enabled: bool,
    pub filter: ToolFilter,
    pub call_timeout: Duration,
    pub connect_timeout: Duration,
}

fn string_map(value: Option<&Value>) -> Result<BTreeMap<String, String>, String> {
    match value {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Object(map)) => map
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), s.clone())),
                Value::Number(_) | Value::Bool(_) => Ok((k.clone(), v.to_string())),
                _ => Err(format!("`{k}` must be a string")),
            })
            .collect(),
        Some(_) => Err("must be a mapping of strings".into()),
    }
}

fn patterns(value: Option<&Value>, key: &str) -> Result<Option<Vec<Pattern>>, String> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| {
                item.as_str()
                    .map(Pattern::new)
                    .ok_or_else(|| format!("tools.{key} must list strings"))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(Value::String(one)) => Ok(Some(vec![Pattern::new(one)])),
        Some(_) => Err(format!("tools.{key} must be a list of names or globs")),
    }
}

fn seconds(value: Option<&Value>, default: Duration) -> Duration {
    value
        .and_then(Value::as_f64)
        .filter(|s| *s > 0.0)
        .map_or(default, Duration::from_secs_f64)
}

impl ServerConfig {
    /// Reads one `mcp_servers.<name>` entry.
    pub fn parse(name: &str, value: &Value) -> Result<ServerConfig, String> {
        let Value::Object(entry) = value else {
            return Err("the entry must be a mapping".into());
        };
        let transport = match (
            entry.get("command").and_then(Value::as_str),
            entry.get("url").and_then(Value::as_str),
        ) {
            (Some(command), None) => Transport::Stdio {
                command: command.to_string(),
                args: match entry.get("args") {
                    None | Some(Value::Null) => Vec::new(),
                    Some(Value::Array(args)) => args
                        .iter()
                        .map(|a| match a {
                            Value::String(s) => Ok(s.clone()),
                            Value::Number(_) | Value::Bool(_) => Ok(a.to_string()),
                            _ => Err("args must be a list of strings".to_string()),
                        })
                        .collect::<Result<_, _>>()?,
                    Some(_) => return Err("args must be a list of strings".into()),
                },
                env: string_map(entry.get("env")).map_err(|e| format!("env: {e}"))?,
                cwd: entry.get("cwd").and_then(Value::as_str).map(PathBuf::from),
            },
            (None, Some(url)) => Transport::Http {
                url: url.to_string(),
                headers: string_map(entry.get("headers")).map_err(|e| format!("headers: {e}"))?,
            },
            (Some(_), Some(_)) => {
                return Err("give either `command` (stdio) or `url` (HTTP), not both".into())
            }
            (None, None) => return Err("needs `command` (stdio) or `url` (streamable HTTP)".into()),
        };
        let tools = entry.get("tools");
        let filter = ToolFilter {
            include: patterns(tools.and_then(|t| t.get("include")), "include")?,
            exclude: patterns(tools.and_then(|t| t.get("exclude")), "exclude")?.unwrap_or_default(),
        };
        Ok(ServerConfig {
            name: name.to_string(),
            transport,
            enabled: entry.get("enabled") != Some(&Value::Bool(false)),
            filter,
            call_timeout: seconds(entry.get("timeout"), DEFAULT_CALL_TIMEOUT),
            connect_timeout: seconds(entry.get("connect_timeout"), DEFAULT_CONNECT_TIMEOUT),
        })
    }
}

/// What happened to one server at start.
#[derive(Debug, Clone, Default)]
pub struct ServerReport {
    pub name: String,
    pub enabled: bool,
    /// Registered tool names.
    pub tools: Vec<String>,
    /// Tools the server offers that were not registered, with the reason.
    pub skipped_tools: Vec<(String, String)>,
    /// Why the server is not connected (bad config, connect failure, timeout).
    pub error: Option<String>,
}

impl std::fmt::Display for ServerReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if !self.enabled {
            return write!(f, "mcp server {}: disabled", self.name);
        }
        match &self.error {
            Some(error) => write!(f, "mcp server {}: not connected: {error}", self.name),
            None => write!(
                f,
                "mcp server {}: {} tool(s): {}",
                self.name,
                self.tools.len(),
                self.tools.join(", ")
            ),
        }
    }
}

type Session = RunningService<RoleClient, Handler>;

/// One server: its config, the live session (if any) and what it registered.
pub struct ServerConn {
    pub config: ServerConfig,
    registry: Weak<Registry>,
    hermes_home: PathBuf,
    session: Mutex<Option<Arc<Session>>>,
    /// Why the last session ended or failed, for error results.
    last_error: Mutex<Option<String>>,
    registered: Mutex<BTreeSet<String>>,
    skipped: Mutex<Vec<(String, String)>>,
    reconnecting: AtomicBool,
    closed: AtomicBool,
    /// Bumped per session, so a watcher of an old session never tears down a new one.
    epoch: AtomicU64,
    refresh_lock: tokio::sync::Mutex<()>,
}

/// The client side of one session: refreshes the tools when the server says they changed.
pub struct Handler {
    conn: Weak<ServerConn>,
}

impl ClientHandler for Handler {
    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl std::future::Future<Output = ()> + Send + '_ {
        let conn = self.conn.clone();
        async move {
            if let Some(conn) = conn.upgrade() {
                // Not awaited here: the refresh sends requests on this very session.
                tokio::spawn(async move {
                    if let Err(e) = conn.refresh_tools().await {
                        eprintln!(
                            "warning: mcp server {}: refreshing tools failed: {e}",
                            conn.config.name
                        );
                    }
                });
            }
        }
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("hermes-tools", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::V_2025_11_25)
    }
}

/// The live connections made by [`connect_configured`].
#[derive(Default, Clone)]
pub struct McpClients {
    pub servers: Vec<Arc<ServerConn>>,
}

impl McpClients {
    pub fn get(&self, name: &str) -> Option<&Arc<ServerConn>> {
        self.servers.iter().find(|s| s.config.name == name)
    }

    /// Deregisters every server's tools and alias and closes the sessions.
    pub fn shutdown(&self) {
        for server in &self.servers {
            server.shutdown();
        }
    }
}

fn stderr_log(hermes_home: &std::path::Path, server: &str) -> std::process::Stdio {
    let dir = hermes_home.join("logs");
    let file = std::fs::create_dir_all(&dir).and_then(|_| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join(format!("mcp-{}.log", crate::names::sanitize(server))))
    });
    match file {
        Ok(file) => file.into(),
        Err(_) => std::process::Stdio::null(),
    }
}

impl ServerConn {
    pub fn new(config: ServerConfig, registry: &Arc<Registry>) -> Arc<ServerConn> {
        Arc::new(ServerConn {
            config,
            registry: Arc::downgrade(registry),
            hermes_home: registry.hermes_home().to_path_buf(),
            session: Mutex::new(None),
            last_error: Mutex::new(None),
            registered: Mutex::new(BTreeSet::new()),
            skipped: Mutex::new(Vec::new()),
            reconnecting: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            epoch: AtomicU64::new(0),
            refresh_lock: tokio::sync::Mutex::new(()),
        })
    }

    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// Whether a session is up.
    pub fn is_connected(&self) -> bool {
        self.session
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .is_some_and(|s| !s.is_transport_closed())
    }

    /// Registered tool names, sorted.
    pub fn registered_tools(&self) -> Vec<String> {
        self.registered
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .cloned()
            .collect()
    }

    fn current(&self) -> Option<Arc<Session>> {
        self.session
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .filter(|s| !s.is_transport_closed())
    }

    async fn open(self: &Arc<Self>) -> Result<Session, String> {
        let handler = Handler {
            conn: Arc::downgrade(self),
        };
        match &self.config.transport {
            Transport::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                let mut cmd = tokio::process::Command::new(command);
                cmd.args(args).envs(env);
                if let Some(cwd) = cwd {
                    cmd.current_dir(cwd);
                }
                let (child, _) = TokioChildProcess::builder(cmd)
                    .stderr(stderr_log(&self.hermes_home, &self.config.name))
                    .spawn()
                    .map_err(|e| format!("cannot start `{command}`: {e}"))?;
                handler
                    .serve(child)
                    .await
                    .map_err(|e| format!("initialize failed: {e}"))
            }
            Transport::Http { url, headers } => {
                let mut custom = std::collections::HashMap::new();
                for (key, value) in headers {
                    let name = http::HeaderName::try_from(key.as_str())
                        .map_err(|e| format!("header {key}: {e}"))?;
                    let value = http::HeaderValue::try_from(value.as_str())
                        .map_err(|e| format!("header {key}: {e}"))?;
                    custom.insert(name, value);
                }
                let config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                    .custom_headers(custom);
                let transport = StreamableHttpClientTransport::from_config(config);
                handler
                    .serve(transport)
                    .await
                    .map_err(|e| format!("initialize failed: {e}"))
            }
        }
    }

    /// Connects, lists and registers the tools, all within the connect timeout.
    pub async fn connect(self: &Arc<Self>) -> Result<(), String> {
        let attempt = async {
            let session = Arc::new(self.open().await?);
            let epoch = self.epoch.fetch_add(1, Ordering::SeqCst) + 1;
            *self.session.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::clone(&session));
            *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) = None;
            self.watch(epoch, &session);
            self.refresh_tools().await
        };
        match tokio::time::timeout(self.config.connect_timeout, attempt).await {
            Ok(result) => result,
            Err(_) => Err(format!(
                "no answer within {} s",
                self.config.connect_timeout.as_secs_f64()
            )),
        }
    }

    /// Notices when the session ends and starts a reconnect.
    fn watch(self: &Arc<Self>, epoch: u64, session: &Arc<Session>) {
        let weak = Arc::downgrade(self);
        let session = Arc::downgrade(session);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(250)).await;
                match session.upgrade() {
                    Some(s) if !s.is_transport_closed() && !s.is_closed() => continue,
                    _ => break,
                }
            }
            let Some(conn) = weak.upgrade() else { return };
            if conn.closed.load(Ordering::SeqCst) || conn.epoch.load(Ordering::SeqCst) != epoch {
                return;
            }
            conn.session_lost("the server closed the connection".into());
        });
    }

    fn session_lost(self: &Arc<Self>, why: String) {
        eprintln!(
            "warning: mcp server {}: {why}; reconnecting",
            self.config.name
        );
        *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(why);
        *self.session.lock().unwrap_or_else(|p| p.into_inner()) = None;
        self.spawn_reconnect();
    }

    fn spawn_reconnect(self: &Arc<Self>) {
        if self.closed.load(Ordering::SeqCst) || self.reconnecting.swap(true, Ordering::SeqCst) {
            return;
        }
        let conn = Arc::clone(self);
        tokio::spawn(async move {
            let mut delay = Duration::from_secs(1);
            for attempt in 1..=RECONNECT_ATTEMPTS {
                tokio::time::sleep(delay).await;
                if conn.closed.load(Ordering::SeqCst) {
                    break;
                }
                match conn.connect().await {
                    Ok(()) => {
                        eprintln!("info: mcp server {}: reconnected", conn.config.name);
                        break;
                    }
                    Err(e) => {
                        eprintln!("warning: mcp server {}: reconnect {attempt}/{RECONNECT_ATTEMPTS} failed: {e}", conn.config.name);
                        *conn.last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                    }
                }
                delay *= 2;
            }
            conn.reconnecting.store(false, Ordering::SeqCst);
        });
    }

    /// Lists the server's tools and makes the registry match: new and changed tools
    /// registered (same-toolset replacement), vanished ones removed.
    pub async fn refresh_tools(self: &Arc<Self>) -> Result<(), String> {
        let _serial = self.refresh_lock.lock().await;
        let session = self.current().ok_or("not connected")?;
        let tools = session
            .peer()
            .list_all_tools()
            .await
            .map_err(|e| format!("tools/list failed: {e}"))?;
        let Some(registry) = self.registry.upgrade() else {
            return Ok(());
        };
        let toolset = mcp_toolset(&self.config.name);
        let mut wanted = BTreeSet::new();
        let mut skipped = Vec::new();
        for tool in tools {
            let raw = serde_json::to_value(&tool).unwrap_or(Value::Null);
            let original = tool.name.to_string();
            if !self.config.filter.allows_either(&original) {
                continue;
            }
            let name = mcp_tool_name(&self.config.name, &original);
            if !wanted.insert(name.clone()) {
                skipped.push((
                    original,
                    format!("its name {name} collides with another tool of this server"),
                ));
                continue;
            }
            if let Some(owner) = registry
                .get(&name)
                .map(|t| t.toolset().to_string())
                .filter(|ts| *ts != toolset)
            {
                skipped.push((
                    original,
                    format!("{name} is already provided by toolset {owner}"),
                ));
                wanted.remove(&name);
                continue;
            }
            let description = raw
                .get("description")
                .and_then(Value::as_str)
                .filter(|d| !d.trim().is_empty())
                .map(str::to_owned)
                .unwrap_or_else(|| format!("MCP tool {original} from server {}", self.config.name));
            let parameters = match raw.get("inputSchema") {
                Some(Value::Object(schema)) if !schema.is_empty() => {
                    let mut schema = schema.clone();
                    schema.entry("type").or_insert_with(|| json!("object"));
                    if schema.get("type") == Some(&json!("object")) {
                        schema.entry("properties").or_insert_with(|| json!({}));
                    }
                    Value::Object(schema)
                }
                _ => json!({"type": "object", "properties": {}}),
            };
            let schema =
                json!({"name": name, "description": description, "parameters": parameters});
            let mut dynamic = DynamicTool::new(
                name.clone(),
                toolset.clone(),
                schema,
                self.handler_for(original.clone()),
            );
            let weak = Arc::downgrade(self);
            let check: DynamicCheck =
                Arc::new(move || weak.upgrade().is_some_and(|c| c.is_connected()));
            dynamic.check = Some(check);
            dynamic.emoji = "🔌".into();
            dynamic.concurrency = Concurrency::Exclusive;
            match registry.register(dynamic, &Caller::Host, false) {
                Ok(Registration::Stored)
                    if registry.get(&name).is_some_and(|t| t.toolset() == toolset) => {}
                Ok(_) => {
                    skipped.push((original, format!("{name} is provided by another toolset")));
                    wanted.remove(&name);
                }
                Err(e) => {
                    skipped.push((original, e.to_string()));
                    wanted.remove(&name);
                }
            }
        }
        let previous = std::mem::replace(
            &mut *self.registered.lock().unwrap_or_else(|p| p.into_inner()),
            wanted.clone(),
        );
        for gone in previous.difference(&wanted) {
            if registry.get(gone).is_some_and(|t| t.toolset() == toolset) {
                let _ = registry.deregister(gone, &Caller::Host);
            }
        }
        if !wanted.is_empty()
            && registry.toolset_alias_target(&self.config.name).as_deref() != Some(toolset.as_str())
        {
            registry.register_toolset_alias(&self.config.name, &toolset);
        }
        *self.skipped.lock().unwrap_or_else(|p| p.into_inner()) = skipped;
        Ok(())
    }

    fn handler_for(self: &Arc<Self>, tool: String) -> DynamicHandler {
        let weak = Arc::downgrade(self);
        DynamicHandler::Async(Arc::new(move |args, _ctx| {
            let weak = weak.clone();
            let tool = tool.clone();
            Box::pin(async move {
                let Some(conn) = weak.upgrade() else {
                    return Ok(Value::String(hermes_runtime::tool_error(
                        "the MCP server of this tool was shut down",
                    )));
                };
                Ok(conn.call(&tool, args).await)
            })
        }))
    }

    /// Calls `tool` on the server; every failure is an `{"error": ...}` result.
    pub async fn call(self: &Arc<Self>, tool: &str, args: Value) -> Value {
        let name = &self.config.name;
        let Some(session) = self.current() else {
            let why = self
                .last_error
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone()
                .unwrap_or_else(|| "not connected".into());
            self.spawn_reconnect();
            return Value::String(hermes_runtime::tool_error(format!(
                "MCP server '{name}' is not connected ({why}); a reconnect is being attempted, try again shortly"
            )));
        };
        let arguments: Map<String, Value> = match args {
            Value::Object(map) => map,
            _ => Map::new(),
        };
        let request = CallToolRequestParams::new(tool.to_string()).with_arguments(arguments);
        let timeout = self.config.call_timeout;
        match tokio::time::timeout(timeout, session.peer().call_tool(request)).await {
            Err(_) => Value::String(hermes_runtime::tool_error(format!(
                "MCP tool {tool} on server '{name}' did not answer within {} s",
                timeout.as_secs_f64()
            ))),
            Ok(Ok(result)) => crate::convert::mcp_result_to_value(
                &serde_json::to_value(&result).unwrap_or(Value::Null),
            ),
            Ok(Err(error)) => {
                let text = error.to_string();
                if session.is_transport_closed() {
                    self.session_lost(format!("connection lost: {text}"));
                    Value::String(hermes_runtime::tool_error(format!(
                        "MCP server '{name}' died during the call to {tool} ({text}); a reconnect is being attempted"
                    )))
                } else {
                    Value::String(hermes_runtime::tool_error(format!(
                        "MCP tool {tool} on server '{name}' failed: {text}"
                    )))
                }
            }
        }
    }

    /// Deregisters this server's tools and alias and closes the session.
    pub fn shutdown(&self) {
        self.closed.store(true, Ordering::SeqCst);
        if let Some(registry) = self.registry.upgrade() {
            let toolset = mcp_toolset(&self.config.name);
            for name in
                std::mem::take(&mut *self.registered.lock().unwrap_or_else(|p| p.into_inner()))
            {
                if registry.get(&name).is_some_and(|t| t.toolset() == toolset) {
                    let _ = registry.deregister(&name, &Caller::Host);
                }
            }
        }
        if let Some(session) = self
            .session
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            session.cancellation_token().cancel();
        }
    }

    fn report(&self, error: Option<String>) -> ServerReport {
        ServerReport {
            name: self.config.name.clone(),
            enabled: true,
            tools: self.registered_tools(),
            skipped_tools: self
                .skipped
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
            error,
        }
    }
}

/// The `mcp_servers` entries of the registry's config, in name order; entries that
/// cannot be read come back as errors.
pub fn configured_servers(registry: &Registry) -> Vec<(String, Result<ServerConfig, String>)> {
    let config = registry.config();
    let Some(servers) = config.get("mcp_servers") else {
        return Vec::new();
    };
    let Value::Object(servers) = servers else {
        return vec![(
            "mcp_servers".into(),
            Err("mcp_servers must be a mapping of server names".into()),
        )];
    };
    let mut out: Vec<_> = servers
        .iter()
        .map(|(name, value)| (name.clone(), ServerConfig::parse(name, value)))
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// Connects every configured server concurrently (each within its connect timeout)
/// on the process-wide runtime the registry's async handlers run on.
pub fn connect_configured(registry: &Arc<Registry>) -> (Vec<ServerReport>, McpClients) {
    // Nothing configured: no runtime to start, no threads (keeps `list` and `schema`
    // as fast as starting a process).
    if configured_servers(registry).is_empty() {
        return Default::default();
    }
    let registry = Arc::clone(registry);
    let work = async move { connect_all(&registry).await };
    let handle = hermes_runtime::bridge::bridge_runtime().spawn(work);
    let wait = move || hermes_runtime::bridge::bridge_runtime().block_on(handle);
    let joined = match tokio::runtime::Handle::try_current() {
        // Inside a runtime: block on another thread, never on this runtime's worker.
        Ok(_) => std::thread::spawn(wait)
            .join()
            .unwrap_or_else(|_| Ok(Default::default())),
        Err(_) => wait(),
    };
    joined.unwrap_or_default()
}

/// [`connect_configured`] for async callers.
pub async fn connect_configured_async(registry: &Arc<Registry>) -> (Vec<ServerReport>, McpClients) {
    let registry = Arc::clone(registry);
    hermes_runtime::bridge::bridge_runtime()
        .spawn(async move { connect_all(&registry).await })
        .await
        .unwrap_or_default()
}

async fn connect_all(registry: &Arc<Registry>) -> (Vec<ServerReport>, McpClients) {
    let mut reports = Vec::new();
    let mut pending = tokio::task::JoinSet::new();
    for (name, config) in configured_servers(registry) {
        match config {
            Err(e) => reports.push(ServerReport {
                name,
                enabled: true,
                error: Some(format!("bad config: {e}")),
                ..Default::default()
            }),
            Ok(config) if !config.enabled => reports.push(ServerReport {
                name,
                enabled: false,
                ..Default::default()
            }),
            Ok(config) => {
                let conn = ServerConn::new(config, registry);
                pending.spawn(async move {
                    let result = conn.connect().await;
                    (conn, result)
                });
            }
        }
    }
    let mut clients = McpClients::default();
    while let Some(joined) = pending.join_next().await {
        let Ok((conn, result)) = joined else { continue };
        let error = result.err();
        if let Some(e) = &error {
            *conn.last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.clone());
        }
        reports.push(conn.report(error));
        clients.servers.push(conn);
    }
    reports.sort_by(|a, b| a.name.cmp(&b.name));
    clients
        .servers
        .sort_by(|a, b| a.config.name.cmp(&b.config.name));
    (reports, clients)
}
