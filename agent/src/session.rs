//! The agent session: everything the agent-loop tools need, in one value attached to
//! every tool call of the session, plus the loop that talks to the model.

use crate::clarify::{ClarifyChannel, ClarifyReply, ClarifyRequest, NoClarify, NO_ANSWER_TEXT};
use crate::config::AgentConfig;
use crate::llm::{ChatClient, ChatError, ChatModel};
use crate::memory::MemoryStore;
use crate::store::{NewMessage, NewSession, SessionStore};
use crate::todo::TodoStore;
use hermes_runtime::approval::ApprovalPrompter;
use hermes_runtime::context::Cancellation;
use hermes_runtime::{Registry, ToolCall, ToolContext};
use serde_json::{json, Value};
use std::any::Any;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

/// A line of progress for a person watching (tool calls, retries); the CLI prints them
/// on stderr.
pub type ProgressFn = Arc<dyn Fn(&str) + Send + Sync>;

/// How to open a session. `Default` is a top-level session over every toolset, with
/// no way to ask the user and the configuration of `$HERMES_HOME`.
#[derive(Clone, Default)]
pub struct SessionOptions {
    /// A fresh id when `None`.
    pub id: Option<String>,
    /// Where the session comes from: `cli`, `serve`, `subagent`, ...
    pub source: Option<String>,
    pub title: Option<String>,
    /// Toolsets offered to the model; `None` offers all.
    pub toolsets: Option<Vec<String>>,
    pub disabled_toolsets: Vec<String>,
    /// The tools this session can never exceed, whatever its toolsets say: those of
    /// the session that made it (a delegating parent, the author of a cron job).
    /// `None`: no ceiling.
    pub allowed_tools: Option<Vec<String>>,
    pub clarify: Option<Arc<dyn ClarifyChannel>>,
    /// Read from `$HERMES_HOME/config.yaml` when `None`.
    pub config: Option<AgentConfig>,
    /// Opened at `$HERMES_HOME/state.db` when `None`.
    pub store: Option<Arc<SessionStore>>,
    pub depth: u32,
    pub parent_session_id: Option<String>,
    pub cwd: Option<PathBuf>,
    pub cancel: Option<Cancellation>,
    pub memory_read_only: bool,
    /// Overrides the configured iteration budget.
    pub max_iterations: Option<u32>,
    pub progress: Option<ProgressFn>,
    /// Who answers approval requests of this session's tool calls (the terminal prompt);
    /// `None`: nobody, the unattended policy applies.
    pub approver: Option<Arc<dyn ApprovalPrompter>>,
    /// Background-process notifications of a task, taken before each model turn and
    /// shown to the model as messages.
    pub notifications: Option<NotificationSource>,
    /// The model its sub-agents ask when no model endpoint is set up (see
    /// [`BorrowedModel`]).
    pub borrowed_model: Option<Arc<dyn BorrowedModel>>,
    /// The model this session's loop talks to instead of the configured endpoint (a
    /// borrowed model that takes tools).
    pub model: Option<Arc<dyn ChatModel>>,
}

/// A model borrowed from whoever drives the session, for when no model endpoint is set
/// up ([`crate::ModelConfig::set_up`]): over MCP, the client's model, asked through
/// `sampling/createMessage`. A model that takes tools ([`BorrowedModel::with_tools`])
/// runs a sub-agent's whole loop, as a model endpoint would; one that does not answers
/// one message without tools, so a sub-agent on it runs a single turn.
pub trait BorrowedModel: Send + Sync {
    /// Whose model it is, as the result names it.
    fn name(&self) -> String;
    /// The text answer to the user message `prompt` under the system prompt `system`,
    /// or why there is none. Gives up when `cancel` is cancelled.
    fn answer(&self, system: &str, prompt: &str, cancel: &Cancellation) -> Result<String, String>;
    /// The model as the agent loop's model, when it takes tool definitions and answers
    /// with tool calls; `None` when it answers text only.
    fn with_tools(&self) -> Option<Arc<dyn ChatModel>> {
        None
    }
}

/// The system prompt of a sub-agent that runs one turn on a borrowed model.
const SINGLE_TURN_SUB_AGENT: &str = "You are a sub-agent working on one delegated goal. You have no tools and this is your \
     only turn: work from the goal and the context you are given, say plainly what you could not check, and reply with a \
     concise summary of what you found: that summary is all the parent agent will see.";

/// Takes the pending notifications of a task id (oldest first).
pub type NotificationSource = Arc<dyn Fn(&str) -> Vec<Value> + Send + Sync>;

pub struct AgentSession {
    /// This session's own `Arc`, for contexts and child sessions that hold it.
    me: Weak<AgentSession>,
    id: String,
    source: String,
    registry: Arc<Registry>,
    config: AgentConfig,
    todos: TodoStore,
    memory: MemoryStore,
    store: Result<Arc<SessionStore>, String>,
    clarify: Arc<dyn ClarifyChannel>,
    depth: u32,
    parent_session_id: Option<String>,
    toolsets: Option<Vec<String>>,
    disabled_toolsets: Vec<String>,
    allowed_tools: Option<Vec<String>>,
    cwd: Option<PathBuf>,
    cancel: Cancellation,
    max_iterations: u32,
    progress: Option<ProgressFn>,
    approver: Option<Arc<dyn ApprovalPrompter>>,
    notifications: Option<NotificationSource>,
    borrowed_model: Option<Arc<dyn BorrowedModel>>,
    model: Option<Arc<dyn ChatModel>>,
    store_warned: AtomicBool,
    title: Mutex<Option<String>>,
}

impl hermes_runtime::AgentSession for AgentSession {
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// How a run of the loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoopStatus {
    /// The model gave a final answer.
    Completed,
    /// The iteration budget ran out first.
    BudgetExhausted,
    Interrupted,
    /// The endpoint failed (after retries) or sent something unreadable.
    Failed,
}

impl LoopStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            LoopStatus::Completed => "completed",
            LoopStatus::BudgetExhausted => "budget_exhausted",
            LoopStatus::Interrupted => "interrupted",
            LoopStatus::Failed => "failed",
        }
    }
}

#[derive(Debug, Clone)]
pub struct LoopOutcome {
    pub status: LoopStatus,
    pub final_answer: Option<String>,
    pub error: Option<String>,
    /// Requests made to the model.
    pub iterations: u32,
    pub tool_calls: usize,
    /// The whole conversation, system prompt first.
    pub messages: Vec<Value>,
}

/// One goal handed to a child session.
#[derive(Debug, Clone, Default)]
pub struct DelegateSpec {
    pub goal: String,
    pub context: Option<String>,
    pub toolsets: Option<Vec<String>>,
}

fn new_session_id() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    format!(
        "{}_{:06x}{:04x}",
        crate::store::iso8601(now.as_secs_f64())
            .replace([':', '-'], "")
            .trim_end_matches('Z'),
        (now.subsec_nanos() ^ std::process::id()) & 0xff_ffff,
        COUNTER.fetch_add(1, Ordering::Relaxed) & 0xffff
    )
}

impl AgentSession {
    pub fn new(registry: Arc<Registry>, options: SessionOptions) -> Arc<AgentSession> {
        let hermes_home = registry.hermes_home().to_path_buf();
        let config = options
            .config
            .unwrap_or_else(|| AgentConfig::from_config(&registry.config()));
        let store = match options.store {
            Some(store) => Ok(store),
            None => SessionStore::open_in(&hermes_home).map(Arc::new),
        };
        let mut memory = MemoryStore::open(&hermes_home);
        if options.memory_read_only {
            memory = memory.read_only();
        }
        let id = options
            .id
            .filter(|i| !i.trim().is_empty())
            .unwrap_or_else(new_session_id);
        let source = options.source.unwrap_or_else(|| "cli".into());
        let max_iterations = options.max_iterations.unwrap_or(if options.depth == 0 {
            config.max_iterations
        } else {
            config.child_max_iterations
        });
        let session = Arc::new_cyclic(|me| {
            AgentSession {
            me: me.clone(),
            clarify: options
                .clarify
                .unwrap_or_else(|| Arc::new(NoClarify::new("this session has no way to ask the user (no terminal and no client that answers questions); decide yourself and say what you assumed"))),
            id,
            source,
            registry,
            config,
            todos: TodoStore::new(),
            memory,
            store,
            depth: options.depth,
            parent_session_id: options.parent_session_id,
            toolsets: options.toolsets,
            disabled_toolsets: options.disabled_toolsets,
            allowed_tools: options.allowed_tools,
            cwd: options.cwd,
            cancel: options.cancel.unwrap_or_default(),
            max_iterations,
            progress: options.progress,
            approver: options.approver,
            notifications: options.notifications,
            borrowed_model: options.borrowed_model,
            model: options.model,
            store_warned: AtomicBool::new(false),
            title: Mutex::new(options.title.clone()),
        }
        });
        if let Ok(store) = &session.store {
            let result = store.ensure_session(&NewSession {
                id: &session.id,
                source: &session.source,
                title: options.title.as_deref(),
                parent_session_id: session.parent_session_id.as_deref(),
                started_at: None,
            });
            if let Err(e) = result {
                session.warn_store(&e);
            }
        }
        session
    }

    /// This session as an `Arc` (it is only ever created inside one).
    pub fn arc(&self) -> Arc<AgentSession> {
        self.me
            .upgrade()
            .expect("an AgentSession lives in the Arc that AgentSession::new made")
    }

    pub fn id(&self) -> &str {
        &self.id
    }
    pub fn source(&self) -> &str {
        &self.source
    }
    pub fn depth(&self) -> u32 {
        self.depth
    }
    pub fn config(&self) -> &AgentConfig {
        &self.config
    }
    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }
    pub fn todos(&self) -> &TodoStore {
        &self.todos
    }
    pub fn memory(&self) -> &MemoryStore {
        &self.memory
    }
    pub fn cancellation(&self) -> &Cancellation {
        &self.cancel
    }
    pub fn parent_session_id(&self) -> Option<&str> {
        self.parent_session_id.as_deref()
    }

    /// The session database, or why it could not be opened.
    pub fn store(&self) -> Result<&Arc<SessionStore>, &str> {
        self.store.as_ref().map_err(String::as_str)
    }

    /// Whether this session may start child sessions.
    pub fn can_delegate(&self) -> bool {
        self.depth < self.config.max_spawn_depth
    }

    /// Records a message; a failing store is reported once and otherwise ignored.
    pub fn record(&self, message: &NewMessage) {
        if let Ok(store) = &self.store {
            if let Err(e) = store.append(&self.id, message) {
                self.warn_store(&e);
            }
        }
    }

    fn warn_store(&self, error: &str) {
        if !self.store_warned.swap(true, Ordering::SeqCst) {
            eprintln!(
                "warning: session {} is not being recorded: {error}",
                self.id
            );
        }
    }

    fn progress(&self, line: &str) {
        if let Some(progress) = &self.progress {
            progress(line);
        }
    }

    /// Asks the user through the session's channel and shapes the tool's result.
    pub fn ask_user(
        &self,
        question: &str,
        choices: Vec<String>,
        multi_select: bool,
        cancel: &Cancellation,
    ) -> Value {
        let request = ClarifyRequest {
            session_id: self.id.clone(),
            question: question.to_string(),
            choices,
            multi_select,
        };
        match self
            .clarify
            .ask(&request, self.config.clarify_timeout, cancel)
        {
            Ok(ClarifyReply::Answer(answer)) => json!({
                "question": request.question,
                "choices_offered": request.choices,
                "user_response": answer,
            }),
            Ok(ClarifyReply::TimedOut) => json!({
                "question": request.question,
                "choices_offered": request.choices,
                "user_response": NO_ANSWER_TEXT,
                "timed_out": true,
            }),
            Err(why) => json!({"error": format!("clarify is not available: {why}")}),
        }
    }

    /// A context for one of this session's tool calls: this session attached.
    pub fn tool_context(&self) -> ToolContext {
        let mut builder = ToolContext::builder()
            .task_id(self.id.clone())
            .session_id(self.id.clone())
            .hermes_home(self.registry.hermes_home().to_path_buf())
            .cancellation(self.cancel.clone())
            .accepts_images(self.config.model.supports_vision)
            .agent_session(self.arc() as Arc<dyn hermes_runtime::AgentSession>);
        if let Some(cwd) = &self.cwd {
            builder = builder.cwd(cwd.clone());
        }
        if let Some(approver) = &self.approver {
            builder = builder.approver(Arc::clone(approver));
        }
        if let Some(title) = self.title.lock().unwrap_or_else(|p| p.into_inner()).clone() {
            builder = builder.user_task(title);
        }
        builder.build()
    }

    /// The tool definitions this session offers the model.
    pub fn definitions(&self) -> Vec<Value> {
        let mut disabled = self.disabled_toolsets.clone();
        if !self.can_delegate() {
            disabled.push("delegation".into());
        }
        let mut tools = self
            .registry
            .definitions(self.toolsets.as_deref(), Some(&disabled))
            .tools;
        if let Some(allowed) = &self.allowed_tools {
            tools.retain(|t| {
                t["function"]["name"]
                    .as_str()
                    .is_some_and(|name| allowed.iter().any(|a| a == name))
            });
        }
        tools
    }

    /// The names of the tools this session offers its model.
    pub fn tool_names(&self) -> Vec<String> {
        self.definitions()
            .iter()
            .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
            .collect()
    }

    /// The tools that `toolsets` would give beyond this session's own: what a child
    /// or a scheduled job asking for them would gain over its author.
    pub fn tools_beyond_own(&self, toolsets: &[String]) -> Vec<String> {
        let own = self.tool_names();
        self.registry
            .select_tools(Some(toolsets), None)
            .tools
            .into_iter()
            .filter(|name| !own.contains(name))
            .collect()
    }

    pub fn system_prompt(&self) -> String {
        let mut prompt = String::from(
            "You are Hermes, an agent that completes tasks by calling tools. Work step by step; call tools when they help, \
             several at once when they do not depend on each other. When the task is done, answer with the result in plain text \
             and no tool calls.",
        );
        if self.depth > 0 {
            prompt.push_str(
                "\n\nYou are a sub-agent working on one delegated goal. You cannot ask the user questions and cannot write memory. \
                 When you are done, reply with a concise summary of what you did and what you found: that summary is all the \
                 parent agent will see.",
            );
        }
        if let Some(block) = self.memory.snapshot().prompt_block() {
            prompt.push_str("\n\n");
            prompt.push_str(&block);
        }
        prompt
    }

    /// Runs the loop on `task` until a final answer, the iteration budget or an
    /// interrupt ([`cancellation`](Self::cancellation)).
    pub fn run(&self, task: &str) -> LoopOutcome {
        {
            let mut title = self.title.lock().unwrap_or_else(|p| p.into_inner());
            if title.is_none() {
                *title = Some(task.chars().take(80).collect());
                if let Ok(store) = &self.store {
                    let _ = store.ensure_session(&NewSession {
                        id: &self.id,
                        source: &self.source,
                        title: title.as_deref(),
                        parent_session_id: self.parent_session_id.as_deref(),
                        started_at: None,
                    });
                }
            }
        }
        let system = json!({"role": "system", "content": self.system_prompt()});
        let user = json!({"role": "user", "content": task});
        self.record(&NewMessage::new("user", task));
        let mut messages = vec![system, user];
        let tools = self.definitions();
        let offered: BTreeSet<String> = tools
            .iter()
            .filter_map(|t| t["function"]["name"].as_str())
            .map(str::to_owned)
            .collect();
        let client: Arc<dyn ChatModel> = match &self.model {
            Some(model) => Arc::clone(model),
            None => Arc::new(ChatClient::new(self.config.model.clone())),
        };
        let ctx = self.tool_context();
        let mut tool_call_count = 0usize;
        let finish = |status, final_answer, error, iterations, tool_calls, messages| LoopOutcome {
            status,
            final_answer,
            error,
            iterations,
            tool_calls,
            messages,
        };
        for iteration in 1..=self.max_iterations {
            if self.cancel.is_cancelled() {
                return finish(
                    LoopStatus::Interrupted,
                    None,
                    Some("interrupted".into()),
                    iteration - 1,
                    tool_call_count,
                    messages,
                );
            }
            for note in self.take_notifications(ctx.task_id()) {
                self.progress(&format!("🔔 {}", clip_line(&note, 160)));
                self.record(&NewMessage::new("user", &note));
                messages.push(json!({"role": "user", "content": note}));
            }
            let turn = match client.complete(&messages, &tools, &self.cancel) {
                Ok(turn) => turn,
                Err(ChatError::Interrupted) => {
                    return finish(
                        LoopStatus::Interrupted,
                        None,
                        Some("interrupted".into()),
                        iteration,
                        tool_call_count,
                        messages,
                    )
                }
                Err(error) => {
                    return finish(
                        LoopStatus::Failed,
                        None,
                        Some(error.to_string()),
                        iteration,
                        tool_call_count,
                        messages,
                    )
                }
            };
            let assistant = turn.to_message();
            self.record(&NewMessage {
                role: "assistant".into(),
                content: turn.content.clone().unwrap_or_default(),
                tool_calls: assistant.get("tool_calls").cloned(),
                ..Default::default()
            });
            messages.push(assistant);
            if turn.tool_calls.is_empty() {
                let answer = turn.content.unwrap_or_default();
                return finish(
                    LoopStatus::Completed,
                    Some(answer),
                    None,
                    iteration,
                    tool_call_count,
                    messages,
                );
            }
            tool_call_count += turn.tool_calls.len();
            for call in &turn.tool_calls {
                self.progress(&format!(
                    "→ {} {}",
                    call.name,
                    clip_line(&call.arguments, 160)
                ));
            }
            let results = self.run_tool_calls(&turn.tool_calls, &offered, &ctx);
            for (call, result) in turn.tool_calls.iter().zip(results) {
                self.progress(&format!("← {} {}", call.name, clip_line(&result, 160)));
                self.record(&NewMessage {
                    role: "tool".into(),
                    content: result.clone(),
                    tool_call_id: Some(call.id.clone()),
                    tool_name: Some(call.name.clone()),
                    ..Default::default()
                });
                // Web, browser and MCP results reach the model marked as data, not instructions.
                if self.config.model.supports_vision {
                    // An image the tool returned goes to the model as image content.
                    if let Some(parts) = multimodal_parts(&result) {
                        messages.push(
                            json!({"role": "tool", "tool_call_id": call.id, "content": parts}),
                        );
                        continue;
                    }
                }
                let content = hermes_net::wrap_untrusted(&call.name, &result);
                messages.push(json!({"role": "tool", "tool_call_id": call.id, "content": content}));
            }
        }
        let error = format!(
            "the iteration budget of {} model requests ran out before a final answer",
            self.max_iterations
        );
        let last_text = messages
            .iter()
            .rev()
            .filter(|m| m["role"] == "assistant")
            .find_map(|m| {
                m["content"]
                    .as_str()
                    .filter(|t| !t.trim().is_empty())
                    .map(str::to_owned)
            });
        finish(
            LoopStatus::BudgetExhausted,
            last_text,
            Some(error),
            self.max_iterations,
            tool_call_count,
            messages,
        )
    }

    /// The task's background-process notifications, as text for the model.
    fn take_notifications(&self, task_id: &str) -> Vec<String> {
        let Some(source) = &self.notifications else {
            return Vec::new();
        };
        source(task_id)
            .iter()
            .map(crate::notify::notification_text)
            .collect()
    }

    /// Runs one turn's calls through the registry (in parallel where the tools allow);
    /// a tool this session did not offer is refused.
    fn run_tool_calls(
        &self,
        calls: &[crate::llm::ModelToolCall],
        offered: &BTreeSet<String>,
        ctx: &ToolContext,
    ) -> Vec<String> {
        let mut results: Vec<Option<String>> = vec![None; calls.len()];
        let mut allowed = Vec::new();
        let mut positions = Vec::new();
        for (n, call) in calls.iter().enumerate() {
            let canonical = self.registry.canonical_name(&call.name).into_owned();
            if offered.contains(&canonical) || self.registry.get(&canonical).is_none() {
                // Unknown names go through so the model gets the "did you mean" answer.
                allowed.push(ToolCall {
                    name: call.name.clone(),
                    arguments: Some(Value::String(call.arguments.clone())),
                    tool_call_id: Some(call.id.clone()),
                    ..Default::default()
                });
                positions.push(n);
            } else {
                results[n] = Some(hermes_runtime::tool_error(format!(
                    "{} is not available in this session; use only the tools you were given",
                    call.name
                )));
            }
        }
        for (n, result) in positions
            .into_iter()
            .zip(self.registry.handle_batch(&allowed, ctx))
        {
            results[n] = Some(result);
        }
        results.into_iter().map(Option::unwrap_or_default).collect()
    }

    /// Runs each goal in a child session (no clarify, no memory writes, no delegation
    /// past the depth limit), at most `max_concurrent_children` at once, and returns
    /// their summaries in the goals' order.
    pub fn delegate(&self, specs: Vec<DelegateSpec>, cancel: &Cancellation) -> Value {
        if !self.can_delegate() {
            return json!({"error": format!(
                "delegation depth limit reached: this session is at depth {} and delegation.max_spawn_depth is {}; do the work yourself",
                self.depth, self.config.max_spawn_depth
            )});
        }
        if specs.is_empty() {
            return json!({"error": "nothing to delegate: give `goal`, or `tasks` with at least one goal"});
        }
        if let Some(n) = specs.iter().position(|s| s.goal.trim().is_empty()) {
            return json!({"error": format!("task {n} has an empty goal: say what the sub-agent should achieve")});
        }
        for (n, spec) in specs.iter().enumerate() {
            let beyond = spec
                .toolsets
                .as_deref()
                .map(|t| self.tools_beyond_own(t))
                .unwrap_or_default();
            if !beyond.is_empty() {
                return json!({"error": format!(
                    "task {n} asks for tools this session does not have ({}): a sub-agent gets at most its parent's tools. \
                     Leave `toolsets` out to give it yours, or name toolsets within them",
                    beyond.join(", ")
                )});
            }
        }
        let started = Instant::now();
        let workers = self.config.max_concurrent_children.max(1).min(specs.len());
        let next = AtomicUsize::new(0);
        let results: Mutex<Vec<Option<Value>>> = Mutex::new(vec![None; specs.len()]);
        std::thread::scope(|scope| {
            for _ in 0..workers {
                scope.spawn(|| loop {
                    let index = next.fetch_add(1, Ordering::SeqCst);
                    let Some(spec) = specs.get(index) else { break };
                    let result = self.run_child(index, spec, cancel);
                    results.lock().unwrap_or_else(|p| p.into_inner())[index] = Some(result);
                });
            }
        });
        let results: Vec<Value> = results
            .into_inner()
            .unwrap_or_else(|p| p.into_inner())
            .into_iter()
            .flatten()
            .collect();
        json!({
            "results": results,
            "total_duration_seconds": round2(started.elapsed().as_secs_f64()),
        })
    }

    fn run_child(&self, index: usize, spec: &DelegateSpec, cancel: &Cancellation) -> Value {
        let started = Instant::now();
        let borrowed = self
            .borrowed_model
            .as_ref()
            .filter(|_| !self.config.model.set_up());
        let mut on_borrowed = None;
        if let Some(borrowed) = borrowed {
            match borrowed.with_tools() {
                Some(model) => on_borrowed = Some((borrowed.name(), model)),
                None => return self.run_child_on(borrowed.as_ref(), index, spec, cancel),
            }
        }
        let mut disabled = self.disabled_toolsets.clone();
        disabled.extend(["clarify".to_string(), "memory".to_string()]);
        if self.depth + 1 >= self.config.max_spawn_depth {
            disabled.push("delegation".into());
        }
        let child = AgentSession::new(
            Arc::clone(&self.registry),
            SessionOptions {
                id: Some(format!("{}_child{index}_{}", self.id, new_session_id())),
                source: Some("subagent".into()),
                title: Some(spec.goal.chars().take(80).collect()),
                toolsets: spec.toolsets.clone().or_else(|| self.toolsets.clone()),
                disabled_toolsets: disabled,
                allowed_tools: Some(self.tool_names()),
                clarify: Some(Arc::new(NoClarify::new("a delegated sub-agent cannot ask the user; decide yourself and report your assumptions"))),
                config: Some(self.config.clone()),
                store: self.store.as_ref().ok().cloned(),
                depth: self.depth + 1,
                parent_session_id: Some(self.id.clone()),
                cwd: self.cwd.clone(),
                cancel: Some(cancel.clone()),
                memory_read_only: true,
                max_iterations: None,
                progress: self.progress.clone(),
                // A sub-agent's commands are not put to the user: it fails closed.
                approver: None,
                notifications: self.notifications.clone(),
                borrowed_model: self.borrowed_model.clone(),
                model: on_borrowed.as_ref().map(|(_, model)| Arc::clone(model)),
            },
        );
        let task = child_task(spec);
        let on = on_borrowed
            .as_ref()
            .map(|(name, _)| format!(" (on {name})"))
            .unwrap_or_default();
        self.progress(&format!(
            "⇢ sub-agent {index}{on}: {}",
            clip_line(&spec.goal, 120)
        ));
        let outcome = child.run(&task);
        let mut result = json!({
            "task_index": index,
            "status": outcome.status.as_str(),
            "summary": outcome.final_answer,
            "duration_seconds": round2(started.elapsed().as_secs_f64()),
            "goal": spec.goal,
            "session_id": child.id(),
            "iterations": outcome.iterations,
            "tool_calls": outcome.tool_calls,
        });
        if let Some((name, _)) = on_borrowed {
            result["model"] = json!(name);
        }
        if let Some(error) = outcome.error {
            result["error"] = json!(error);
        }
        result
    }
}

impl AgentSession {
    /// A sub-agent of one turn on `model`: the goal and its context in one message, no
    /// tools; its answer is the summary.
    fn run_child_on(
        &self,
        model: &dyn BorrowedModel,
        index: usize,
        spec: &DelegateSpec,
        cancel: &Cancellation,
    ) -> Value {
        let started = Instant::now();
        self.progress(&format!(
            "⇢ sub-agent {index} (one turn, {}): {}",
            model.name(),
            clip_line(&spec.goal, 120)
        ));
        let answered = if cancel.is_cancelled() {
            Err("interrupted".to_string())
        } else {
            model.answer(SINGLE_TURN_SUB_AGENT, &child_task(spec), cancel)
        };
        let status = match &answered {
            Ok(_) => LoopStatus::Completed,
            Err(_) if cancel.is_cancelled() => LoopStatus::Interrupted,
            Err(_) => LoopStatus::Failed,
        };
        let mut result = json!({
            "task_index": index,
            "status": status.as_str(),
            "summary": answered.as_ref().ok(),
            "duration_seconds": round2(started.elapsed().as_secs_f64()),
            "goal": spec.goal,
            "iterations": 1,
            "tool_calls": 0,
            "model": model.name(),
            "note": "no model endpoint is set up (model.*) and the borrowed model does not take tools (an MCP client without `sampling.tools`), so this sub-agent was one answer of it, without tools",
        });
        if let Err(error) = answered {
            result["error"] = json!(error);
        }
        result
    }
}

/// What a sub-agent is told: its goal, and the parent's context for it.
fn child_task(spec: &DelegateSpec) -> String {
    let mut task = format!("Goal: {}", spec.goal.trim());
    if let Some(context) = spec.context.as_deref().filter(|c| !c.trim().is_empty()) {
        task.push_str(&format!(
            "\n\nContext from the parent agent:\n{}",
            context.trim()
        ));
    }
    task
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

fn clip_line(text: &str, max: usize) -> String {
    let flat: String = text
        .chars()
        .map(|c| if c == '\n' { ' ' } else { c })
        .collect();
    if flat.chars().count() <= max {
        flat
    } else {
        format!("{}…", flat.chars().take(max).collect::<String>())
    }
}

/// The OpenAI content parts (text and `image_url`) of a result that carries an image
/// (the runtime's multimodal envelope), else `None`.
fn multimodal_parts(result: &str) -> Option<Value> {
    if !result.starts_with("{\"_multimodal\"") {
        return None;
    }
    let envelope: Value = serde_json::from_str(result).ok()?;
    hermes_runtime::dispatch::is_multimodal_envelope(&envelope).then(|| envelope["content"].clone())
}
