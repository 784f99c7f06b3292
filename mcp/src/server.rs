//! `hermes-tools mcp`: the registry as an MCP server, on stdio or streamable HTTP.
//!
//! `tools/list` answers the definitions of the selected toolsets (the generated
//! schemas as `inputSchema`, JSON Schema keywords kept as they are); `tools/call`
//! goes through [`Registry::handle_function_call`] like any other caller, so
//! argument repair, hooks, approvals and budgets apply; a result whose JSON has an
//! `error` is answered with `isError: true`. A tool outside the selection is an
//! error result too. `logging/setLevel` is accepted and decides which call logs and
//! process events the client gets. Files a result names are attached (`MEDIA:` audio
//! and images) or linked (stored outputs); a call with a progress token gets ticks and
//! what it reports while it runs (terminal output, execute_code steps and stdout) as progress.
//!
//! Prompts, resources, subscriptions and completions come from the server's
//! [`Extras`] (see [`crate::library`]).
//!
//! Over HTTP the server binds loopback by default and refuses requests whose `Host`
//! or `Origin` is not loopback (DNS-rebinding protection) unless the host is allowed
//! with `--allow-host`.

#![allow(deprecated)] // rmcp marks MCP logging deprecated (SEP-2577); clients still call logging/setLevel.

use crate::http_guard::{self, SessionCap, SessionLimits, Token};
use crate::library::{Library, Serving};
use hermes_runtime::availability::CHECK_TTL;
use hermes_runtime::context::Cancellation;
use hermes_runtime::{Registry, ToolCall, ToolContext};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, InitializeResult,
    ListToolsResult, LoggingLevel, PaginatedRequestParams, ProgressNotificationParam,
    ProgressToken, ProtocolVersion, ResultType, ServerCapabilities, SetLevelRequestParams, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Which toolsets are served (`--toolsets`, `--disabled`, as for `schema`).
#[derive(Debug, Clone, Default)]
pub struct Selection {
    pub toolsets: Option<Vec<String>>,
    pub disabled: Option<Vec<String>>,
}

/// What a server offers beside its tools: the libraries of prompts and resources,
/// asked in order.
pub struct Extras {
    pub libraries: Vec<Arc<dyn Library>>,
}

impl Extras {
    /// Skills as prompts and resources, and the outputs tools stored on disk.
    pub fn standard() -> Extras {
        Extras {
            libraries: vec![
                Arc::new(crate::library::Skills),
                Arc::new(crate::library::StoredOutputs),
            ],
        }
    }

    /// These, and `library` after them.
    pub fn with(mut self, library: Arc<dyn Library>) -> Extras {
        self.libraries.push(library);
        self
    }
}

/// The resources a session subscribed to, with the version last seen of each.
#[derive(Default)]
struct Subscriptions {
    uris: HashMap<String, Option<String>>,
    /// A watcher runs (it ends, under this lock, when no URI is left).
    watching: bool,
}

/// Most resources one session may subscribe to.
pub const MAX_SUBSCRIPTIONS: usize = 256;

/// Logger of the messages a call sends about itself.
pub const CALL_LOGGER: &str = "hermes-tools/call";
/// How often subscribed resources are looked at.
pub const SUBSCRIPTION_POLL: std::time::Duration = std::time::Duration::from_secs(1);

/// Whether the client's protocol has audio content (2025-03-26 on).
fn takes_audio(peer: &rmcp::service::Peer<RoleServer>) -> bool {
    peer.peer_info()
        .is_none_or(|info| info.protocol_version.as_str() >= ProtocolVersion::V_2025_03_26.as_str())
}

/// Whether the client's protocol has resource links in results (2025-06-18 on).
fn takes_links(peer: &rmcp::service::Peer<RoleServer>) -> bool {
    peer.peer_info()
        .is_none_or(|info| info.protocol_version.as_str() >= ProtocolVersion::V_2025_06_18.as_str())
}

/// One MCP session's view of the registry.
#[derive(Clone)]
pub struct HermesServer {
    registry: Arc<Registry>,
    selection: Arc<Selection>,
    tools: Arc<ToolCache>,
    task_id: String,
    level: crate::elicitation::SessionLevel,
    /// The client's user, once a call needed them.
    user: Arc<std::sync::OnceLock<crate::elicitation::User>>,
    /// Prompts and resources served beside the tools.
    extras: Arc<Extras>,
    /// URIs the client subscribed to, and whether they are being watched.
    subscribed: Arc<Mutex<Subscriptions>>,
    /// The version of each resource a `subscriptions/listen` stream accepted, kept
    /// from its acceptance until the stream starts watching.
    listened: Arc<Mutex<HashMap<String, String>>>,
    /// Cancelled when the client's input has ended (stdio): the `subscriptions/listen`
    /// streams then end and are answered, rather than holding the exit back.
    input_ended: Cancellation,
    /// Dropped with the session's last clone, when the session has ended.
    _end: Arc<SessionEnd>,
}

/// What ends with a session (a closed or expired HTTP session, the end of stdio, one
/// stateless request): what was kept for its notifications and questions, and the
/// environment of its own task (shell, sandbox, background processes). Tasks its calls
/// named in `_meta.task_id` are the client's to keep.
struct SessionEnd {
    task_id: String,
}

/// Session ends whose environment is still being cleaned up, and a signal when one is done.
static ENDING: (Mutex<usize>, std::sync::Condvar) = (Mutex::new(0), std::sync::Condvar::new());

impl SessionEnd {
    /// Waits (at most `limit`) for the environments of ended sessions to be gone, so
    /// the process does not leave while one is half removed.
    fn wait_for_all(limit: std::time::Duration) {
        let deadline = Instant::now() + limit;
        let mut ending = ENDING.0.lock().unwrap_or_else(|p| p.into_inner());
        while *ending > 0 {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                return;
            };
            ending = ENDING
                .1
                .wait_timeout(ending, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

impl Drop for SessionEnd {
    fn drop(&mut self) {
        crate::elicitation::forget_session(&self.task_id);
        let task = std::mem::take(&mut self.task_id);
        *ENDING.0.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        let done = || {
            *ENDING.0.lock().unwrap_or_else(|p| p.into_inner()) -= 1;
            ENDING.1.notify_all();
        };
        // Ending a shell or a sandbox may wait on processes: not on the runtime's threads.
        let spawned = std::thread::Builder::new()
            .name("hermes-mcp-end".into())
            .spawn(move || {
                hermes_environments::env::cleanup_task(&task);
                hermes_runtime::context::forget_task(&task);
                hermes_runtime::context::forget_task(&library_task(&task));
                done();
            });
        if spawned.is_err() {
            done();
        }
    }
}

/// What a session's library calls (prompts, resources, completions, subscriptions)
/// need: its registry, the tools it serves and its libraries, under the task they run
/// in. The subscription watcher holds this instead of the session.
#[derive(Clone)]
struct LibraryScope {
    registry: Arc<Registry>,
    selection: Arc<Selection>,
    tools: Arc<ToolCache>,
    extras: Arc<Extras>,
    task_id: String,
}

impl LibraryScope {
    /// Runs `work` with the libraries on this thread (which may block).
    fn run<T>(&self, work: impl FnOnce(&[Arc<dyn Library>], &Serving) -> T) -> T {
        let ctx = ToolContext::builder()
            .task_id(library_task(&self.task_id))
            .session_id(self.task_id.clone())
            .build();
        let serves = |tool: &str| {
            let canonical = self.registry.canonical_name(tool);
            self.tools
                .get(&self.registry, &self.selection)
                .names
                .contains(canonical.as_ref())
        };
        let serving = Serving {
            registry: &self.registry,
            ctx: &ctx,
            serves: &serves,
        };
        work(&self.extras.libraries, &serving)
    }

    /// The version of each of `uris` now (`None`: no such resource).
    fn versions(&self, uris: &[String]) -> Vec<Option<String>> {
        self.run(|libraries, serving| {
            uris.iter()
                .map(|uri| libraries.iter().find_map(|l| l.version(uri, serving)))
                .collect()
        })
    }
}

/// The task the libraries' own tool calls (skills_list, skill_view) run in: not the
/// session's, so listing prompts or watching a subscription leaves the model's task
/// (its loop guards, its activity) as it was.
fn library_task(task: &str) -> String {
    format!("{task}-library")
}

/// The served tools as MCP sees them, kept while the registry's generation and
/// config file stay the same (and no longer than availability verdicts live), so a
/// `tools/call` does not rebuild every definition to check one name.
#[derive(Default)]
pub struct ToolCache {
    current: Mutex<Option<Arc<ServedTools>>>,
}

pub struct ServedTools {
    key: (u64, Option<(std::time::SystemTime, u64)>),
    made: Instant,
    /// `tools/list` entries, in order.
    pub listed: Vec<Value>,
    tools: Vec<Tool>,
    names: HashSet<String>,
}

impl ToolCache {
    fn get(&self, registry: &Registry, selection: &Selection) -> Arc<ServedTools> {
        let key = (registry.generation(), registry.config().signature);
        let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(served) = current
            .as_ref()
            .filter(|s| s.key == key && s.made.elapsed() < CHECK_TTL)
        {
            return Arc::clone(served);
        }
        let definitions =
            registry.definitions(selection.toolsets.as_deref(), selection.disabled.as_deref());
        let names = definitions.names().iter().map(|n| n.to_string()).collect();
        let listed: Vec<Value> = definitions.tools.iter().map(mcp_tool).collect();
        let tools = listed
            .iter()
            .filter_map(|t| serde_json::from_value(t.clone()).ok())
            .collect();
        let served = Arc::new(ServedTools {
            key,
            made: Instant::now(),
            listed,
            tools,
            names,
        });
        *current = Some(Arc::clone(&served));
        served
    }
}

/// A registry definition as an MCP tool.
pub(crate) fn mcp_tool(definition: &Value) -> Value {
    let function = &definition["function"];
    let mut schema = match function.get("parameters") {
        Some(Value::Object(p)) => p.clone(),
        _ => Default::default(),
    };
    schema.entry("type").or_insert_with(|| json!("object"));
    json!({
        "name": function["name"],
        "description": function.get("description").cloned().unwrap_or(json!("")),
        "inputSchema": Value::Object(schema),
    })
}

impl HermesServer {
    pub fn new(registry: Arc<Registry>, selection: Arc<Selection>) -> HermesServer {
        HermesServer::with_cache(registry, selection, Arc::default())
    }

    /// A session sharing `tools` with the other sessions of one server.
    pub fn with_cache(
        registry: Arc<Registry>,
        selection: Arc<Selection>,
        tools: Arc<ToolCache>,
    ) -> HermesServer {
        static SESSIONS: AtomicU64 = AtomicU64::new(1);
        let task_id = format!(
            "mcp-{}-{}",
            std::process::id(),
            SESSIONS.fetch_add(1, Ordering::SeqCst)
        );
        HermesServer {
            registry,
            selection,
            tools,
            _end: Arc::new(SessionEnd {
                task_id: task_id.clone(),
            }),
            task_id,
            level: Arc::default(),
            user: Arc::default(),
            extras: Arc::new(Extras::standard()),
            subscribed: Arc::default(),
            listened: Arc::default(),
            input_ended: Cancellation::default(),
        }
    }

    /// The client's input has ended: open `subscriptions/listen` streams end now and
    /// are answered as complete, so the session can close without waiting on them.
    pub fn end_of_input(&self) {
        self.input_ended.cancel();
    }

    /// This session with `extras` as its prompts and resources.
    pub fn with_extras(mut self, extras: Arc<Extras>) -> HermesServer {
        self.extras = extras;
        self
    }

    /// The `tools/list` entries: definitions of the selection as MCP tools.
    pub fn tools(&self) -> Vec<Value> {
        self.served().listed.clone()
    }

    fn served(&self) -> Arc<ServedTools> {
        self.tools.get(&self.registry, &self.selection)
    }

    fn selected(&self, name: &str) -> bool {
        let canonical = self.registry.canonical_name(name);
        self.served().names.contains(canonical.as_ref())
    }

    /// Calls a tool as an MCP client asked and waits for it on this thread; the answer
    /// as an MCP `CallToolResult` (JSON). `task` is the task the client named
    /// (`_meta.task_id`); by default the session's own. With `client`, approval requests
    /// and `clarify` questions go to the user behind it (see [`crate::elicitation`]),
    /// which needs the server's runtime entered on this thread.
    pub fn call_blocking(
        &self,
        request: CallRequest,
        cancel: Cancellation,
        client: Option<&rmcp::service::Peer<RoleServer>>,
    ) -> Value {
        let CallRequest {
            name,
            arguments,
            call_id,
            task,
            progress,
        } = request;
        if !self.selected(&name) {
            let text = hermes_runtime::tool_error(format!(
                "Unknown tool: {name} (not served here; see tools/list)"
            ));
            return crate::convert::result_string_to_mcp(&text);
        }
        let named_task = task.is_some();
        let task = task.unwrap_or_else(|| self.task_id.clone());
        let mut builder = ToolContext::builder()
            .task_id(task.clone())
            .session_id(self.task_id.clone())
            .cancellation(cancel);
        if let Some(peer) = client {
            let user = self.user.get_or_init(|| {
                crate::elicitation::User::new(
                    &self.registry,
                    &self.selection,
                    &self.task_id,
                    peer,
                    Arc::clone(&self.level),
                )
            });
            if named_task {
                user.listen_for(&task);
            }
            builder = user.attach(builder);
        }
        let sent = ProgressCount::default();
        if let Some((token, peer)) = progress.clone().zip(client) {
            builder = builder.progress(output_progress(peer.clone(), token, Arc::clone(&sent)));
        }
        let ctx = builder.build();
        let _reporting = progress
            .zip(client)
            .map(|(token, peer)| report_progress(peer.clone(), token, name.clone(), sent));
        // Only for a client that chose a level: the others never asked for call logs.
        let logging = crate::caller::Caller::of(&ctx).filter(|_| {
            self.level
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .is_some()
        });
        if let Some(caller) = &logging {
            caller.log(
                LoggingLevel::Debug,
                CALL_LOGGER,
                json!({"event": "started", "tool": name, "task_id": task}),
            );
        }
        let started = Instant::now();
        let _serving = crate::caller::CallScope::enter(crate::caller::Caller::of(&ctx));
        let call = ToolCall {
            name: name.clone(),
            arguments: Some(Value::Object(arguments.unwrap_or_default())),
            tool_call_id: Some(call_id),
            ..Default::default()
        };
        let result = self.registry.handle_function_call(&call, &ctx);
        let mut answer = crate::convert::result_string_to_mcp(&result);
        if let Some(content) = answer["content"].as_array_mut() {
            content.extend(attached_files(&result, &ctx, client));
        }
        if let Some(caller) = &logging {
            let failed = answer["isError"] == true;
            caller.log(
                if failed {
                    LoggingLevel::Warning
                } else {
                    LoggingLevel::Info
                },
                CALL_LOGGER,
                json!({
                    "event": if failed { "failed" } else { "finished" },
                    "tool": name,
                    "task_id": task,
                    "duration_ms": started.elapsed().as_millis() as u64,
                }),
            );
        }
        answer
    }

    /// Runs `work` with this session's libraries on a thread that may block (they
    /// read files and call tools).
    async fn with_libraries<T: Send + 'static>(
        &self,
        work: impl FnOnce(&[Arc<dyn Library>], &Serving) -> T + Send + 'static,
    ) -> Result<T, ErrorData> {
        let server = self.clone();
        tokio::task::spawn_blocking(move || server.libraries_here(work))
            .await
            .map_err(internal)
    }

    /// What this session's library calls need, apart from the session.
    fn library_scope(&self) -> LibraryScope {
        LibraryScope {
            registry: Arc::clone(&self.registry),
            selection: Arc::clone(&self.selection),
            tools: Arc::clone(&self.tools),
            extras: Arc::clone(&self.extras),
            task_id: self.task_id.clone(),
        }
    }

    /// Runs `work` with this session's libraries on this thread (which may block).
    fn libraries_here<T>(&self, work: impl FnOnce(&[Arc<dyn Library>], &Serving) -> T) -> T {
        self.library_scope().run(work)
    }

    /// The version of each of `uris` now (`None`: no such resource).
    fn versions_here(&self, uris: &[String]) -> Vec<Option<String>> {
        self.library_scope().versions(uris)
    }

    /// [`HermesServer::versions_here`] from async code.
    async fn versions_now(&self, uris: &[String]) -> Result<Vec<Option<String>>, ErrorData> {
        let (server, uris) = (self.clone(), uris.to_vec());
        tokio::task::spawn_blocking(move || server.versions_here(&uris))
            .await
            .map_err(internal)
    }

    /// What every library lists with `items`, as the list result whose field is `key`.
    async fn listed<T: serde::de::DeserializeOwned>(
        &self,
        key: &str,
        items: fn(&dyn Library, &Serving) -> Vec<Value>,
    ) -> Result<T, ErrorData> {
        let listed = self
            .with_libraries(move |libraries, serving| {
                libraries
                    .iter()
                    .flat_map(|library| items(library.as_ref(), serving))
                    .collect::<Vec<_>>()
            })
            .await?;
        let mut result = serde_json::Map::new();
        result.insert(key.to_string(), Value::Array(listed));
        complete_result(Value::Object(result))
    }

    /// Checks the subscribed resources now and then, and tells the client which ones
    /// changed, until the session ends or has no subscription left.
    fn watch_subscriptions(&self, peer: rmcp::service::Peer<RoleServer>) {
        // The scope, not the session: a closed session's subscriptions are not kept alive.
        let subscribed = Arc::downgrade(&self.subscribed);
        let scope = self.library_scope();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(SUBSCRIPTION_POLL).await;
                let Some(map) = subscribed.upgrade() else {
                    return;
                };
                let (uris, seen): (Vec<String>, Vec<Option<String>>) = {
                    let mut held = map.lock().unwrap_or_else(|p| p.into_inner());
                    if held.uris.is_empty() {
                        held.watching = false;
                        return;
                    }
                    held.uris
                        .iter()
                        .map(|(u, v)| (u.clone(), v.clone()))
                        .unzip()
                };
                drop(map);
                let scope = scope.clone();
                let checked = tokio::task::spawn_blocking(move || {
                    let now = scope.versions(&uris);
                    uris.into_iter()
                        .zip(seen)
                        .zip(now)
                        .map(|((uri, seen), now)| (uri, seen, now))
                        .collect::<Vec<_>>()
                })
                .await
                .unwrap_or_default();
                for (uri, seen, now) in checked {
                    if seen == now {
                        continue;
                    }
                    let Some(map) = subscribed.upgrade() else {
                        return;
                    };
                    if let Some(kept) = map
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .uris
                        .get_mut(&uri)
                    {
                        *kept = now;
                    } else {
                        continue;
                    }
                    let param = rmcp::model::ResourceUpdatedNotificationParam::new(uri);
                    if peer.notify_resource_updated(param).await.is_err() {
                        return;
                    }
                }
            }
        });
    }

    /// [`HermesServer::call_blocking`] from async code: the call may block, so it runs
    /// where it does not hold up the runtime's other tasks.
    pub async fn call_with(
        &self,
        request: CallRequest,
        cancel: Cancellation,
        client: Option<&rmcp::service::Peer<RoleServer>>,
    ) -> Value {
        let multi_thread = tokio::runtime::Handle::current().runtime_flavor()
            == tokio::runtime::RuntimeFlavor::MultiThread;
        if multi_thread {
            // The runtime hands this worker's other tasks to another worker and the
            // call runs here, without a hop to the blocking pool.
            return tokio::task::block_in_place(|| self.call_blocking(request, cancel, client));
        }
        let (server, client) = (self.clone(), client.cloned());
        tokio::task::spawn_blocking(move || server.call_blocking(request, cancel, client.as_ref()))
            .await
            .unwrap_or_else(|e| {
                crate::convert::result_string_to_mcp(&hermes_runtime::tool_error(format!(
                    "the call could not finish: {e}"
                )))
            })
    }
}

/// The content blocks a result's files add: each file named with a `MEDIA:` tag as
/// an audio or image block (audio only for protocols that have it), read as
/// `read_file` would be allowed to read it; and a link to each file under the cache
/// folder the result names (for protocols with resource links).
fn attached_files(
    result: &str,
    ctx: &ToolContext,
    client: Option<&rmcp::service::Peer<RoleServer>>,
) -> Vec<Value> {
    use base64::Engine;
    let mut blocks = Vec::new();
    let audio = client.is_none_or(takes_audio);
    for path in crate::convert::media_paths(result) {
        let mime = crate::library::mime_type(&path);
        let kind = if mime.starts_with("audio/") && audio {
            "audio"
        } else if mime.starts_with("image/") {
            "image"
        } else {
            continue;
        };
        if let Ok(bytes) =
            crate::library::read_for_client(ctx, &path, crate::library::MAX_READ_BYTES)
        {
            let data = base64::engine::general_purpose::STANDARD.encode(bytes);
            blocks.push(json!({"type": kind, "mimeType": mime, "data": data}));
        }
    }
    if client.is_none_or(takes_links) {
        let cache = ctx.hermes_home().join("cache");
        for path in crate::convert::stored_paths(result, &cache) {
            blocks.push(json!({
                "type": "resource_link",
                "uri": crate::library::file_uri(&path),
                "name": path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default(),
                "mimeType": crate::library::mime_type(&path),
                "description": "Stored by the call; read it with resources/read.",
            }));
        }
    }
    blocks
}

/// How often a call whose client asked for progress says that it still runs.
pub const PROGRESS_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// Sends `notifications/progress` for `token` every [`PROGRESS_EVERY`] until the
/// returned guard is dropped (when the call has answered), so a client that resets its
/// timeout on progress waits for a long call and can show that it runs. Needs the
/// server's runtime entered on this thread.
fn report_progress(
    peer: rmcp::service::Peer<RoleServer>,
    token: ProgressToken,
    tool: String,
    sent: ProgressCount,
) -> tokio_util::sync::DropGuard {
    let stop = tokio_util::sync::CancellationToken::new();
    let stopped = stop.clone();
    tokio::runtime::Handle::current().spawn(async move {
        let started = Instant::now();
        loop {
            tokio::select! {
                _ = stopped.cancelled() => return,
                _ = tokio::time::sleep(PROGRESS_EVERY) => {}
            }
            let message = format!("{tool} is running ({} s)", started.elapsed().as_secs());
            if send_progress(&peer, &token, &sent, message).await.is_err() {
                return;
            }
        }
    });
    stop.drop_guard()
}

/// Where a call's output goes while it runs (a terminal command's lines): each batch a
/// `notifications/progress` for `token` with the text as its message, sent before the
/// call goes on, numbered with the ticks of [`report_progress`] (`sent`).
fn output_progress(
    peer: rmcp::service::Peer<RoleServer>,
    token: ProgressToken,
    sent: ProgressCount,
) -> hermes_runtime::context::ProgressSink {
    let runtime = tokio::runtime::Handle::current();
    Arc::new(move |text: &str| {
        let (peer, token, sent, text) =
            (peer.clone(), token.clone(), sent.clone(), text.to_string());
        let sending = runtime.spawn(async move { send_progress(&peer, &token, &sent, text).await });
        let _ = runtime.block_on(sending);
    })
}

/// The progress notifications of one call so far. Each is numbered and sent under its
/// lock, so the client sees the numbers rise whichever path sent them.
type ProgressCount = Arc<tokio::sync::Mutex<u64>>;

async fn send_progress(
    peer: &rmcp::service::Peer<RoleServer>,
    token: &ProgressToken,
    sent: &ProgressCount,
    message: String,
) -> Result<(), rmcp::ServiceError> {
    let mut count = sent.lock().await;
    *count += 1;
    let param = ProgressNotificationParam::new(token.clone(), *count as f64).with_message(message);
    peer.notify_progress(param).await
}

/// One `tools/call` as the server runs it.
#[derive(Debug, Clone)]
pub struct CallRequest {
    pub name: String,
    pub arguments: Option<serde_json::Map<String, Value>>,
    /// The call id the tool sees: `mcp_<JSON-RPC id>`.
    pub call_id: String,
    /// The task the client named in `_meta.task_id`, if any.
    pub task: Option<String>,
    /// The client's `_meta.progressToken`, if it wants progress notifications.
    pub progress: Option<ProgressToken>,
}

impl CallRequest {
    /// The call `params` ask for; `meta` is the request's `_meta` where rmcp moved it.
    pub fn new(
        id: &rmcp::model::RequestId,
        params: CallToolRequestParams,
        meta: Option<&rmcp::model::RequestMetaObject>,
    ) -> CallRequest {
        let call_id = format!(
            "mcp_{}",
            serde_json::to_value(id)
                .map(|v| v.to_string())
                .unwrap_or_default()
                .trim_matches('"')
        );
        let field = |key: &str| {
            params
                .meta
                .as_ref()
                .and_then(|meta| meta.0 .0.get(key))
                .or_else(|| meta.and_then(|meta| meta.0 .0.get(key)))
                .cloned()
        };
        let task = field("task_id")
            .as_ref()
            .and_then(Value::as_str)
            .filter(|task| !task.is_empty())
            .map(str::to_owned);
        let progress = field("progressToken").and_then(|t| serde_json::from_value(t).ok());
        CallRequest {
            name: params.name.into_owned(),
            arguments: params.arguments,
            call_id,
            task,
            progress,
        }
    }
}

/// Where a 2026-07-28 request asks for log messages, and from which level.
const LOG_LEVEL_META_KEY: &str = "io.modelcontextprotocol/logLevel";

/// Whether the request is of protocol 2026-07-28 or newer (no sessions, no setLevel).
fn modern(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

fn internal(why: impl std::fmt::Display) -> ErrorData {
    ErrorData::internal_error(why.to_string(), None)
}

/// A result of MCP's shape from its JSON, marked complete (`resultType`, which rmcp
/// strips for peers of versions before 2026-07-28).
fn complete_result<T: serde::de::DeserializeOwned>(mut result: Value) -> Result<T, ErrorData> {
    result["resultType"] = json!("complete");
    serde_json::from_value(result).map_err(internal)
}

impl ServerHandler for HermesServer {
    fn get_info(&self) -> InitializeResult {
        let capabilities: ServerCapabilities = serde_json::from_value(json!({
            "tools": {},
            "logging": {},
            "prompts": {},
            "resources": {"subscribe": true},
            "completions": {},
        }))
        .unwrap_or_else(|_| {
            ServerCapabilities::builder()
                .enable_tools()
                .enable_logging()
                .build()
        });
        InitializeResult::new(capabilities)
            .with_server_info(Implementation::new("hermes-tools", env!("CARGO_PKG_VERSION")))
            .with_instructions("Tools of the hermes-tools runtime. Every result is a JSON string; failures carry an `error` key and are flagged isError. Skills are offered as prompts and as skill:// resources; files tools stored are file:// resources.")
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        // Made complete (`resultType`); rmcp strips that for peers of older versions.
        Ok(ListToolsResult::with_all_items(self.served().tools.clone()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.served().tools.iter().find(|t| t.name == name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let cancel = Cancellation::default();
        let watcher = {
            let cancel = cancel.clone();
            let token = context.ct.clone();
            tokio::spawn(async move {
                token.cancelled().await;
                cancel.cancel();
            })
        };
        if modern(&context) {
            // 2026-07-28 has no logging/setLevel: a request asks for log messages with
            // `io.modelcontextprotocol/logLevel` in `_meta`, and gets none without it.
            let asked = context
                .meta
                .0
                 .0
                .get(LOG_LEVEL_META_KEY)
                .and_then(|level| serde_json::from_value(level.clone()).ok());
            *self.level.lock().unwrap_or_else(|p| p.into_inner()) =
                Some(asked.unwrap_or(LoggingLevel::Emergency));
        }
        let request = CallRequest::new(&context.id, request, Some(&context.meta));
        let result = self.call_with(request, cancel, Some(&context.peer)).await;
        watcher.abort();
        let mut result: CallToolResult = serde_json::from_value(result).map_err(internal)?;
        // Required from 2026-07-28 on; rmcp strips it for peers of older versions.
        result.result_type = Some(ResultType::COMPLETE);
        Ok(CallToolResponse::Complete(result))
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListPromptsResult, ErrorData> {
        self.listed("prompts", |library, serving| library.prompts(serving))
            .await
    }

    async fn get_prompt(
        &self,
        request: rmcp::model::GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetPromptResponse, ErrorData> {
        let name = request.name.clone();
        let arguments = request.arguments.unwrap_or_default();
        let found = self
            .with_libraries(move |libraries, serving| {
                libraries
                    .iter()
                    .find_map(|l| l.prompt(&name, &arguments, serving))
            })
            .await?;
        match found {
            Some(Ok(prompt)) => Ok(rmcp::model::GetPromptResponse::Complete(complete_result(
                prompt,
            )?)),
            Some(Err(why)) => Err(ErrorData::internal_error(why, None)),
            None => Err(ErrorData::invalid_params(
                format!("Unknown prompt: {} (see prompts/list)", request.name),
                None,
            )),
        }
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourcesResult, ErrorData> {
        self.listed("resources", |library, serving| library.resources(serving))
            .await
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourceTemplatesResult, ErrorData> {
        self.listed("resourceTemplates", |library, serving| {
            library.templates(serving)
        })
        .await
    }

    async fn read_resource(
        &self,
        request: rmcp::model::ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ReadResourceResponse, ErrorData> {
        let uri = request.uri.clone();
        let found = self
            .with_libraries(move |libraries, serving| {
                libraries.iter().find_map(|l| l.read(&uri, serving))
            })
            .await?;
        match found {
            Some(Ok(contents)) => Ok(rmcp::model::ReadResourceResponse::Complete(
                complete_result(json!({"contents": contents}))?,
            )),
            Some(Err(why)) => Err(ErrorData::invalid_params(
                why,
                Some(json!({"uri": request.uri})),
            )),
            None => Err(ErrorData::resource_not_found(
                format!("Resource not found: {}", request.uri),
                Some(json!({"uri": request.uri})),
            )),
        }
    }

    async fn subscribe(
        &self,
        request: rmcp::model::SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let uri = request.uri.clone();
        let version = self
            .with_libraries(move |libraries, serving| {
                libraries.iter().find_map(|l| l.version(&uri, serving))
            })
            .await?;
        let Some(version) = version else {
            return Err(ErrorData::resource_not_found(
                format!("Resource not found: {}", request.uri),
                Some(json!({"uri": request.uri})),
            ));
        };
        let start = {
            let mut subscribed = self.subscribed.lock().unwrap_or_else(|p| p.into_inner());
            if subscribed.uris.len() >= MAX_SUBSCRIPTIONS
                && !subscribed.uris.contains_key(&request.uri)
            {
                return Err(ErrorData::invalid_params(
                    format!("at most {MAX_SUBSCRIPTIONS} subscriptions per session; unsubscribe from one first"),
                    None,
                ));
            }
            subscribed.uris.insert(request.uri, Some(version));
            !std::mem::replace(&mut subscribed.watching, true)
        };
        if start {
            self.watch_subscriptions(context.peer);
        }
        Ok(())
    }

    /// 2026-07-28 `subscriptions/listen`: of what was asked, the resources that exist
    /// (at most [`MAX_SUBSCRIPTIONS`]); the lists are not watched, so no list-changed
    /// category is accepted.
    fn accepted_subscription_filter(
        &self,
        requested: &rmcp::model::SubscriptionFilter,
    ) -> Option<rmcp::model::SubscriptionFilter> {
        let uris = requested.resource_subscriptions.clone().unwrap_or_default();
        let multi_thread = tokio::runtime::Handle::try_current()
            .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
        // Looking a resource up reads files: off the runtime's worker where it can.
        let versions = if multi_thread {
            tokio::task::block_in_place(|| self.versions_here(&uris))
        } else {
            self.versions_here(&uris)
        };
        // The versions the stream starts from: those before the acknowledgment, so a
        // change the client makes once acknowledged is reported.
        let mut baselines = self.listened.lock().unwrap_or_else(|p| p.into_inner());
        let found: Vec<String> = uris
            .into_iter()
            .zip(versions)
            .filter_map(|(uri, version)| version.map(|v| (uri, v)))
            .take(MAX_SUBSCRIPTIONS)
            .map(|(uri, version)| {
                baselines.insert(uri.clone(), version);
                uri
            })
            .collect();
        let mut accepted = rmcp::model::SubscriptionFilter::new();
        accepted.resource_subscriptions = (!found.is_empty()).then_some(found);
        Some(accepted)
    }

    /// One `subscriptions/listen` stream: the accepted resources are looked at every
    /// [`SUBSCRIPTION_POLL`], and each change (or removal) is sent on the stream as
    /// `notifications/resources/updated`, until the client cancels the request, its
    /// input ends (the stream is then answered as complete) or the session ends.
    async fn listen(&self, context: rmcp::service::SubscriptionContext) -> Result<(), ErrorData> {
        let uris = context
            .accepted()
            .resource_subscriptions
            .clone()
            .unwrap_or_default();
        if uris.is_empty() {
            tokio::select! {
                _ = context.cancelled() => {}
                _ = self.input_ended.cancelled() => {}
            }
            return Ok(());
        }
        let kept: Vec<Option<String>> = {
            let mut baselines = self.listened.lock().unwrap_or_else(|p| p.into_inner());
            uris.iter().map(|uri| baselines.remove(uri)).collect()
        };
        // A version another stream of the same resource took is looked up again.
        let mut seen = if kept.iter().all(Option::is_some) {
            kept
        } else {
            self.versions_now(&uris).await?
        };
        loop {
            tokio::select! {
                _ = context.cancelled() => return Ok(()),
                _ = self.input_ended.cancelled() => return Ok(()),
                _ = tokio::time::sleep(SUBSCRIPTION_POLL) => {}
            }
            let now = self.versions_now(&uris).await?;
            for ((uri, before), after) in uris.iter().zip(&seen).zip(&now) {
                if before != after
                    && context
                        .sink()
                        .notify_resource_updated(uri.clone())
                        .await
                        .is_err()
                {
                    return Ok(());
                }
            }
            seen = now;
        }
    }

    async fn unsubscribe(
        &self,
        request: rmcp::model::UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.subscribed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .uris
            .remove(&request.uri);
        Ok(())
    }

    async fn complete(
        &self,
        request: rmcp::model::CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CompleteResult, ErrorData> {
        let request = serde_json::to_value(&request).map_err(internal)?;
        let values = self
            .with_libraries(move |libraries, serving| {
                let context = request["context"]["arguments"]
                    .as_object()
                    .cloned()
                    .unwrap_or_default();
                libraries.iter().find_map(|l| {
                    l.complete(
                        &request["ref"],
                        request["argument"]["name"].as_str().unwrap_or_default(),
                        request["argument"]["value"].as_str().unwrap_or_default(),
                        &context,
                        serving,
                    )
                })
            })
            .await?
            .unwrap_or_default();
        let total = values.len();
        let shown: Vec<String> = values
            .into_iter()
            .take(rmcp::model::CompletionInfo::MAX_VALUES)
            .collect();
        let has_more = total > shown.len();
        complete_result(
            json!({"completion": {"values": shown, "total": total, "hasMore": has_more}}),
        )
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        // 2026-07-28 has no logging/setLevel (a request names its level in `_meta`).
        if modern(&context) {
            return Err(ErrorData::method_not_found::<
                rmcp::model::SetLevelRequestMethod,
            >());
        }
        *self.level.lock().unwrap_or_else(|p| p.into_inner()) = Some(request.level);
        Ok(())
    }
}

/// Serves one session on stdin/stdout until the client closes it (see [`crate::stdio`]).
pub async fn serve_stdio(
    registry: Arc<Registry>,
    selection: Selection,
    extras: Arc<Extras>,
) -> std::io::Result<()> {
    crate::stdio::serve(HermesServer::new(registry, Arc::new(selection)).with_extras(extras)).await
}

/// Options of the HTTP transport.
#[derive(Debug, Clone, Default)]
pub struct HttpOptions {
    /// Extra `Host` names (or `host:port`) to accept besides loopback.
    pub allowed_hosts: Vec<String>,
    /// Extra browser origins (`scheme://host[:port]`) to accept besides loopback.
    pub allowed_origins: Vec<String>,
}

pub const LOOPBACK_HOSTS: &[&str] = &["localhost", "127.0.0.1", "::1", "[::1]"];

fn http_config(options: &HttpOptions) -> StreamableHttpServerConfig {
    let mut hosts: Vec<String> = LOOPBACK_HOSTS.iter().map(|h| h.to_string()).collect();
    hosts.extend(options.allowed_hosts.iter().cloned());
    let mut origins: Vec<String> = Vec::new();
    for scheme in ["http", "https"] {
        for host in ["localhost", "127.0.0.1", "[::1]"] {
            origins.push(format!("{scheme}://{host}:*"));
        }
        for host in &options.allowed_hosts {
            if !host.contains(':') {
                origins.push(format!("{scheme}://{host}:*"));
            }
        }
    }
    origins.extend(options.allowed_origins.iter().cloned());
    StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .with_allowed_origins(origins)
        .enforce_origin_validation()
}

/// Binds `addr` and serves streamable HTTP (any path; `/mcp` by convention) until
/// the process ends. `on_ready` gets the bound address (port 0 picks one).
pub async fn serve_http(
    registry: Arc<Registry>,
    selection: Selection,
    extras: Arc<Extras>,
    addr: SocketAddr,
    options: HttpOptions,
    on_ready: impl FnOnce(SocketAddr),
) -> std::io::Result<()> {
    let config = registry.config();
    let token = Token::for_listener(
        registry.hermes_home(),
        config.get("mcp_server.token").and_then(|v| v.as_str()),
        addr,
    )?;
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    if !local.ip().is_loopback() {
        eprintln!("warning: hermes-tools mcp listens on {local}, beyond this machine; only loopback Host headers are accepted unless allowed with --allow-host");
    }
    if let Some(path) = &token.generated_into {
        eprintln!(
            "hermes-tools mcp: bearer token {} (saved in {})",
            token.secret,
            path.display()
        );
    }
    let limits = SessionLimits::from_config(&config);
    let mut manager = LocalSessionManager::default();
    manager.session_config.keep_alive = Some(limits.idle);
    let manager = Arc::new(manager);
    let selection = Arc::new(selection);
    let tools = Arc::new(ToolCache::default());
    let service = StreamableHttpService::new(
        move || {
            Ok(HermesServer::with_cache(
                Arc::clone(&registry),
                Arc::clone(&selection),
                Arc::clone(&tools),
            )
            .with_extras(Arc::clone(&extras)))
        },
        Arc::clone(&manager),
        http_config(&options),
    );
    let guard = Arc::new((token, SessionCap::new(manager, limits.max_sessions), limits));
    let expiry = Arc::clone(&guard);
    tokio::spawn(async move { expiry.1.expire_idle(limits.idle).await });
    on_ready(local);
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                eprintln!("warning: accept failed: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        // Answers go out in several writes (SSE frames): without this, Nagle's algorithm
        // holds each answer's tail until the client's delayed ACK, ~40 ms per request.
        let _ = stream.set_nodelay(true);
        let (service, guard) = (service.clone(), Arc::clone(&guard));
        let guarded = hyper::service::service_fn(move |request| {
            let (service, guard) = (service.clone(), Arc::clone(&guard));
            async move {
                let (token, sessions, limits) = &*guard;
                let response =
                    http_guard::guard(token, sessions, limits, request, |request| async move {
                        service.handle(request).await
                    })
                    .await;
                Ok::<_, std::convert::Infallible>(response)
            }
        });
        tokio::spawn(async move {
            let builder =
                hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new());
            if let Err(e) = builder
                .serve_connection(hyper_util::rt::TokioIo::new(stream), guarded)
                .await
            {
                let text = e.to_string();
                if !text.contains("connection closed") && !text.contains("reset") {
                    eprintln!("debug: HTTP connection ended: {text}");
                }
            }
        });
    }
}

/// The address `--http` means: `PORT`, `HOST:PORT`, or empty for 127.0.0.1:8765.
pub fn parse_http_addr(text: &str) -> Result<SocketAddr, String> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(SocketAddr::from(([127, 0, 0, 1], DEFAULT_HTTP_PORT)));
    }
    if let Ok(port) = text.parse::<u16>() {
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Ok(addr);
    }
    if let Some(port) = text
        .strip_prefix("localhost:")
        .and_then(|p| p.parse::<u16>().ok())
    {
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    Err(format!(
        "--http wants PORT or IP:PORT (e.g. 127.0.0.1:{DEFAULT_HTTP_PORT}), got {text:?}"
    ))
}

pub const DEFAULT_HTTP_PORT: u16 = 8765;

/// Resolves on the first SIGINT or SIGTERM.
async fn stop_signal() -> std::io::Result<&'static str> {
    use tokio::signal::unix::{signal, SignalKind};
    // The binary's process-wide handler (remove the sandboxes' private directory, then
    // die by the signal) would race this graceful stop, and tokio's handler calls the
    // one it replaces. Back to the default first: the normal exit that follows the
    // stop removes the directory anyway.
    for stop in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: restoring a default disposition touches no memory of ours.
        unsafe { libc::signal(stop, libc::SIG_DFL) };
    }
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    Ok(tokio::select! {
        _ = interrupt.recv() => "SIGINT",
        _ = terminate.recv() => "SIGTERM",
    })
}

/// How long calls still running at a stop signal may take before the process leaves.
const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// The blocking entry point of `hermes-tools mcp`: attaches MCP servers and plugins,
/// then serves stdio (no `http`) or streamable HTTP. SIGINT and SIGTERM stop it the
/// way the end of input does, so the process exits normally and its at-exit cleanup
/// removes the tasks' environments (shells, sandboxes and their directories).
pub fn run(
    registry: Arc<Registry>,
    selection: Selection,
    http: Option<SocketAddr>,
    options: HttpOptions,
) -> std::io::Result<()> {
    run_with(registry, selection, http, options, Extras::standard())
}

/// [`run`] with `extras` as the prompts and resources served.
pub fn run_with(
    registry: Arc<Registry>,
    selection: Selection,
    http: Option<SocketAddr>,
    options: HttpOptions,
    extras: Extras,
) -> std::io::Result<()> {
    let extras = Arc::new(extras);
    crate::review::install(registry.hermes_home());
    std::thread::spawn(hermes_command_guard::warm_up);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("hermes-mcp")
        .build()?;
    let result = runtime.block_on(async move {
        let report = crate::attach_async(&registry).await;
        for line in report.to_string().lines() {
            eprintln!("{line}");
        }
        let serving = async {
            match http {
                None => serve_stdio(Arc::clone(&registry), selection, extras).await,
                Some(addr) => {
                    serve_http(Arc::clone(&registry), selection, extras, addr, options, |local| {
                        eprintln!("hermes-tools mcp: streamable HTTP on http://{local}/mcp");
                    })
                    .await
                }
            }
        };
        let result = tokio::select! {
            result = serving => result,
            stopped = stop_signal() => stopped.map(|signal| eprintln!("hermes-tools mcp: stopped by {signal}")),
        };
        report.clients.shutdown();
        result
    });
    // Calls blocked in a tool would hold the runtime's drop; the at-exit cleanup ends them.
    runtime.shutdown_timeout(STOP_GRACE);
    SessionEnd::wait_for_all(STOP_GRACE);
    result
}
