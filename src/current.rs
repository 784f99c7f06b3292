//! What the running command is, for tools that need more than their call's context:
//! the process's registry (cronjob runs agent sessions over it) and the kind of
//! session the command serves (cronjob is offered in interactive, serve and cron
//! sessions only), and the toolsets it was started with (execute_code gives scripts
//! only the sandbox tools of that selection).

use crate::restrict::ToolSelection;
use hermes_runtime::Registry;
use std::sync::{Arc, OnceLock};

/// The kind of session a command runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionKind {
    /// `hermes-tools agent`: a person at a terminal.
    Interactive,
    /// `hermes-tools serve`: a client drives the calls.
    Serve,
    /// `hermes-tools cron`: scheduled runs.
    Cron,
}

static REGISTRY: OnceLock<Arc<Registry>> = OnceLock::new();
static KIND: OnceLock<SessionKind> = OnceLock::new();
static SELECTION: OnceLock<ToolSelection> = OnceLock::new();

/// Called once by the command line before any tool runs.
pub fn set(registry: &Arc<Registry>, kind: Option<SessionKind>) {
    let _ = REGISTRY.set(Arc::clone(registry));
    if let Some(kind) = kind {
        let _ = KIND.set(kind);
    }
}

/// The `--toolsets` / `--disabled` selection of `call`, `serve` or `mcp`.
pub fn set_selection(selection: ToolSelection) {
    let _ = SELECTION.set(selection);
}

/// The command's selection; unrestricted when none was given.
pub fn selection() -> ToolSelection {
    SELECTION.get().cloned().unwrap_or_default()
}

pub fn registry() -> Option<Arc<Registry>> {
    REGISTRY.get().cloned()
}

/// The registry a call runs over: its agent session's, else the process's.
pub fn registry_for(ctx: &hermes_runtime::ToolContext) -> Option<Arc<Registry>> {
    ctx.agent_session_as::<hermes_agent::AgentSession>()
        .map(|s| Arc::clone(s.registry()))
        .or_else(registry)
}

/// The tools the session making this call may use: its agent session's offer, within
/// the command's selection. `None` when nothing restricts it. Work a session derives
/// (a cron job, a script) gets no tool beyond these.
pub fn session_tools(ctx: &hermes_runtime::ToolContext) -> Option<Vec<String>> {
    let selection = selection();
    let registry = registry_for(ctx)?;
    let selected = selection
        .is_restricted()
        .then(|| selection.allowed(&registry));
    match ctx.agent_session_as::<hermes_agent::AgentSession>() {
        Some(session) => {
            let mut names = session.tool_names();
            if let Some(selected) = &selected {
                names.retain(|n| selected.contains(n));
            }
            Some(names)
        }
        None => selected,
    }
}

pub fn session_kind() -> Option<SessionKind> {
    KIND.get().copied()
}
