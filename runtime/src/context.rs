//! What a handler knows about the call it serves.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use tokio::sync::Notify;

/// Per-call context. Cheap to clone: handlers that spawn work keep a clone.
#[derive(Clone)]
pub struct ToolContext {
    inner: Arc<ContextInner>,
}

struct ContextInner {
    task_id: String,
    session_id: String,
    cwd: PathBuf,
    hermes_home: PathBuf,
    user_task: Option<String>,
    cancel: Cancellation,
    agent_session: Option<Arc<dyn AgentSession>>,
    approver: Option<Arc<dyn crate::approval::ApprovalPrompter>>,
    accepts_images: bool,
    progress: Option<ProgressSink>,
}

/// Where a call reports what it produces while it runs (a terminal command's output,
/// in batches of whole lines, redacted as its result would be), for a caller that
/// shows it: the MCP server sends it as progress notifications.
pub type ProgressSink = Arc<dyn Fn(&str) + Send + Sync>;

/// The seam between the runtime and an agent loop. The tools that need an agent's own
/// state (its todo list, memory, session store, child agents, a way to ask the user)
/// only run when a session is attached to the call's context; without one they are
/// refused with a clear error.
///
/// A session either answers such a tool itself ([`handle`](AgentSession::handle)) or
/// lets the tool's own handler run, which finds the session's state through
/// [`ToolContext::agent_session`] and [`AgentSession::as_any`].
pub trait AgentSession: Send + Sync + 'static {
    /// The result for `tool`, or `None` to run the tool's own handler.
    fn handle(&self, _tool: &str, _args: serde_json::Value, _ctx: &ToolContext) -> Option<String> {
        None
    }

    /// The concrete session, for handlers that downcast to reach its state.
    fn as_any(&self) -> &dyn Any;
}

impl ToolContext {
    pub fn builder() -> ToolContextBuilder {
        ToolContextBuilder::default()
    }

    /// The task this call belongs to; tools keep per-task state under it.
    pub fn task_id(&self) -> &str {
        &self.inner.task_id
    }

    pub fn session_id(&self) -> &str {
        &self.inner.session_id
    }

    /// The task's working directory: relative paths given by the model start here.
    pub fn cwd(&self) -> &Path {
        &self.inner.cwd
    }

    pub fn hermes_home(&self) -> &Path {
        &self.inner.hermes_home
    }

    pub fn user_task(&self) -> Option<&str> {
        self.inner.user_task.as_deref()
    }

    pub fn agent_session(&self) -> Option<&Arc<dyn AgentSession>> {
        self.inner.agent_session.as_ref()
    }

    /// The person who answers approval requests for this call (a terminal prompt, a
    /// client of the JSON-lines or MCP server); `None` when nobody can be asked.
    pub fn approver(&self) -> Option<&Arc<dyn crate::approval::ApprovalPrompter>> {
        self.inner.approver.as_ref()
    }

    /// Whether the caller puts an image a tool returns (the `_multimodal` envelope of
    /// hermes-vision) in front of its model: MCP clients, `serve --images`, an agent
    /// whose model has vision. Tools that can answer either with the image itself or
    /// with a description of it ask this.
    pub fn accepts_images(&self) -> bool {
        self.inner.accepts_images
    }

    /// Whether the caller shows what the call produces while it runs.
    pub fn reports_progress(&self) -> bool {
        self.inner.progress.is_some()
    }

    /// Hands `text` (output produced so far) to the caller, if it shows progress.
    pub fn report_progress(&self, text: &str) {
        if let Some(sink) = &self.inner.progress {
            sink(text);
        }
    }

    /// The attached session as its concrete type, if it is one.
    pub fn agent_session_as<T: AgentSession>(&self) -> Option<&T> {
        self.agent_session()
            .and_then(|s| s.as_any().downcast_ref::<T>())
    }

    /// Set when the caller gave up (timeout, interrupt); long handlers check it.
    pub fn cancellation(&self) -> &Cancellation {
        &self.inner.cancel
    }

    /// Resolves a path argument: `~` is the user's home, relative paths start at [`cwd`].
    ///
    /// [`cwd`]: ToolContext::cwd
    pub fn resolve_path(&self, path: &str) -> PathBuf {
        let expanded = if path == "~" || path.starts_with("~/") {
            match std::env::var_os("HOME") {
                Some(home) => {
                    PathBuf::from(home).join(path.trim_start_matches('~').trim_start_matches('/'))
                }
                None => PathBuf::from(path),
            }
        } else {
            PathBuf::from(path)
        };
        if expanded.is_absolute() {
            expanded
        } else {
            self.cwd().join(expanded)
        }
    }

    /// Changes whenever this task calls a tool other than `read_file`/`search_files`;
    /// their "same call again" guards reset when it changes.
    pub fn activity_epoch(&self) -> u64 {
        let epochs = task_epochs().lock().unwrap_or_else(|p| p.into_inner());
        epochs.get(&epoch_key(self.task_id())).copied().unwrap_or(0)
    }

    /// State a tool keeps for this task across calls (dedup caches, loop guards).
    /// One value per (task, type), created on first use.
    pub fn task_state<T: Default + Send + Sync + 'static>(&self) -> Arc<T> {
        let mut states = task_states()
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let key = (self.inner.task_id.clone(), TypeId::of::<T>());
        let entry = states.entry(key).or_insert_with(|| Arc::new(T::default()));
        Arc::clone(entry)
            .downcast::<T>()
            .expect("task state is keyed by its own type")
    }
}

/// Tools whose repeated identical calls are loop-guarded; any other tool ends a streak.
pub const READ_ONLY_FILE_TOOLS: &[&str] = &["read_file", "search_files"];

type StateMap = HashMap<(String, TypeId), Arc<dyn Any + Send + Sync>>;

fn task_states() -> &'static Mutex<StateMap> {
    static STATES: OnceLock<Mutex<StateMap>> = OnceLock::new();
    STATES.get_or_init(Default::default)
}

/// Drops what tools kept for `task_id` across calls ([`ToolContext::task_state`], the
/// activity epoch), for a front end whose task has ended for good (a closed MCP session).
pub fn forget_task(task_id: &str) {
    task_states()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .retain(|(task, _), _| task != task_id);
    task_epochs()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(&epoch_key(task_id));
}

/// Activity epochs by [`epoch_key`]: a server keeps one for every task it ever saw, and
/// a task's name held as a string would be one allocation each, made by whichever
/// thread ran the call and kept among what the task's other calls freed.
fn task_epochs() -> &'static Mutex<HashMap<u64, u64>> {
    static EPOCHS: OnceLock<Mutex<HashMap<u64, u64>>> = OnceLock::new();
    EPOCHS.get_or_init(Default::default)
}

/// A keyed hash of the task's name. Two tasks of one key would share an epoch, so a
/// call of either would reset the other's repeat guards: the guards would let a repeat
/// through, never stop a call that is not one.
fn epoch_key(task_id: &str) -> u64 {
    use std::hash::BuildHasher;
    static KEYS: OnceLock<std::hash::RandomState> = OnceLock::new();
    KEYS.get_or_init(std::hash::RandomState::new)
        .hash_one(task_id)
}

/// Called by the call entry point for every call: a tool other than the read-only file
/// tools starts a new "epoch" for the task, which resets their repeat counters.
pub fn note_tool_call(task_id: &str, tool: &str) {
    if READ_ONLY_FILE_TOOLS.contains(&tool) {
        return;
    }
    let mut epochs = task_epochs().lock().unwrap_or_else(|p| p.into_inner());
    *epochs.entry(epoch_key(task_id)).or_insert(0) += 1;
}

#[derive(Default)]
pub struct ToolContextBuilder {
    task_id: Option<String>,
    session_id: Option<String>,
    cwd: Option<PathBuf>,
    hermes_home: Option<PathBuf>,
    user_task: Option<String>,
    cancel: Option<Cancellation>,
    agent_session: Option<Arc<dyn AgentSession>>,
    approver: Option<Arc<dyn crate::approval::ApprovalPrompter>>,
    accepts_images: bool,
    progress: Option<ProgressSink>,
}

impl ToolContextBuilder {
    pub fn task_id(mut self, id: impl Into<String>) -> Self {
        self.task_id = Some(id.into());
        self
    }
    pub fn session_id(mut self, id: impl Into<String>) -> Self {
        self.session_id = Some(id.into());
        self
    }
    pub fn cwd(mut self, cwd: impl Into<PathBuf>) -> Self {
        self.cwd = Some(cwd.into());
        self
    }
    pub fn hermes_home(mut self, home: impl Into<PathBuf>) -> Self {
        self.hermes_home = Some(home.into());
        self
    }
    pub fn user_task(mut self, task: impl Into<String>) -> Self {
        self.user_task = Some(task.into());
        self
    }
    pub fn cancellation(mut self, cancel: Cancellation) -> Self {
        self.cancel = Some(cancel);
        self
    }
    pub fn agent_session(mut self, session: Arc<dyn AgentSession>) -> Self {
        self.agent_session = Some(session);
        self
    }
    pub fn approver(mut self, approver: Arc<dyn crate::approval::ApprovalPrompter>) -> Self {
        self.approver = Some(approver);
        self
    }
    /// The caller puts images a tool returns in front of its model (see
    /// [`ToolContext::accepts_images`]).
    pub fn accepts_images(mut self, yes: bool) -> Self {
        self.accepts_images = yes;
        self
    }

    /// The caller shows what the call produces while it runs (see [`ProgressSink`]).
    pub fn progress(mut self, sink: ProgressSink) -> Self {
        self.progress = Some(sink);
        self
    }

    /// Unset fields fall back to the process: task `default`, the current directory,
    /// `$HERMES_HOME` or `~/.hermes`.
    pub fn build(self) -> ToolContext {
        ToolContext {
            inner: Arc::new(ContextInner {
                task_id: self
                    .task_id
                    .filter(|t| !t.is_empty())
                    .unwrap_or_else(|| "default".into()),
                session_id: self.session_id.unwrap_or_default(),
                cwd: self
                    .cwd
                    .or_else(|| std::env::current_dir().ok())
                    .unwrap_or_else(|| PathBuf::from("/")),
                hermes_home: self.hermes_home.unwrap_or_else(default_hermes_home),
                user_task: self.user_task,
                cancel: self.cancel.unwrap_or_default(),
                agent_session: self.agent_session,
                approver: self.approver,
                accepts_images: self.accepts_images || process_accepts_images(),
                progress: self.progress,
            }),
        }
    }
}

static PROCESS_ACCEPTS_IMAGES: AtomicBool = AtomicBool::new(false);

/// Declares that this process's callers put images in front of their model (`mcp`,
/// `serve --images`, an agent whose model has vision): contexts built from now on
/// default to [`ToolContext::accepts_images`], and tools that need no other backend
/// to show an image are offered.
pub fn set_process_accepts_images(yes: bool) {
    PROCESS_ACCEPTS_IMAGES.store(yes, Ordering::Relaxed);
}

/// See [`set_process_accepts_images`].
pub fn process_accepts_images() -> bool {
    PROCESS_ACCEPTS_IMAGES.load(Ordering::Relaxed)
}

/// `$HERMES_HOME`, else `~/.hermes`.
pub fn default_hermes_home() -> PathBuf {
    if let Some(home) = std::env::var_os("HERMES_HOME").filter(|h| !h.is_empty()) {
        return PathBuf::from(home);
    }
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/"))
        .join(".hermes")
}

/// A one-way flag that sync handlers poll and async handlers await.
#[derive(Clone, Default)]
pub struct Cancellation {
    inner: Arc<CancelInner>,
}

#[derive(Default)]
struct CancelInner {
    cancelled: AtomicBool,
    notify: Notify,
}

impl Cancellation {
    pub fn cancel(&self) {
        self.inner.cancelled.store(true, Ordering::SeqCst);
        self.inner.notify.notify_waiters();
    }

    pub fn is_cancelled(&self) -> bool {
        self.inner.cancelled.load(Ordering::SeqCst)
    }

    /// Completes once [`cancel`](Cancellation::cancel) has been called.
    pub async fn cancelled(&self) {
        loop {
            let notified = self.inner.notify.notified();
            if self.is_cancelled() {
                return;
            }
            notified.await;
        }
    }
}
