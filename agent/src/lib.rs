//! hermes-agent: the state behind the agent-loop tools (`todo`, `memory`,
//! `session_search`, `clarify`, `delegate_task`) and a loop that drives a model
//! ([`ChatModel`]): an OpenAI-compatible chat-completions endpoint, or a model borrowed
//! from whoever drives the session ([`BorrowedModel`]) that takes tools.
//!
//! An [`AgentSession`] owns a session id, its todo list, the memory store (with the
//! snapshot frozen when the session opened), the session database, the channel for
//! questions to the user and the delegation runner. It implements
//! [`hermes_runtime::AgentSession`], so attaching it to a [`hermes_runtime::ToolContext`]
//! lets the tools in `tools/` reach its state with
//! `ctx.agent_session_as::<hermes_agent::AgentSession>()`.
//!
//! This crate depends on the runtime only; the tools depend on it, never the reverse.

pub mod clarify;
pub mod config;
pub mod llm;
pub mod memory;
pub mod notify;
pub mod session;
pub mod store;
pub mod todo;

pub use clarify::{ClarifyChannel, ClarifyReply, ClarifyRequest, NoClarify, TerminalClarify};
pub use config::{AgentConfig, ModelConfig};
pub use llm::{AssistantTurn, ChatError, ChatModel, ModelToolCall};
pub use memory::{MemoryAction, MemoryOp, MemoryStore, MemoryTarget};
pub use session::{
    AgentSession, BorrowedModel, DelegateSpec, LoopOutcome, LoopStatus, NotificationSource,
    ProgressFn, SessionOptions,
};
pub use store::{NewMessage, SearchRequest, SessionStore};
pub use todo::{TodoInput, TodoStore};
