//! `memory`: notes kept across sessions in `$HERMES_HOME/memories/`, through the
//! agent session's memory store (hermes-agent).

use hermes_agent::{AgentSession, MemoryAction, MemoryOp, MemoryTarget};
use hermes_runtime::prelude::*;

/// Which store a memory write goes to.
#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MemoryStoreName {
    Memory,
    User,
}

/// What a memory write does.
#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MemoryEdit {
    Add,
    Replace,
    Remove,
}

/// One step of a batch of memory changes.
#[derive(Deserialize)]
pub struct MemoryOperation {
    /// add, replace or remove.
    action: MemoryEdit,
    /// The new entry text (add, replace).
    content: Option<String>,
    /// A short piece of the existing entry that no other entry contains (replace, remove).
    old_text: Option<String>,
}

/// Save durable notes that will be in your prompt in every later session. `target` `memory` is for your own notes (facts about the environment, conventions, lessons learned); `user` is for what you learn about the user (preferences, role, how they like to work). Save only what will still matter in future sessions, never task progress or temporary state. Actions: `add` a new entry (`content`), `replace` an entry (`old_text` + `content`), `remove` an entry (`old_text`); `old_text` is a short piece of exactly one entry. To change several entries at once, pass `operations`: they apply together or not at all. Space is small (memory 2200 characters, user 1375): when a write fails for room, consolidate existing entries into fewer, shorter ones. Writes are saved at once but only show in the next session's prompt, so do not repeat a successful write.
///
/// Entries are separated by a line holding only `§`; every write takes the store's
/// lock, re-reads the file and replaces it atomically, so concurrent sessions never
/// lose an entry.
#[tool(toolset = "memory", emoji = "🧠")]
pub fn memory(
    /// The store: `memory` (your notes, MEMORY.md) or `user` (the user's profile, USER.md).
    target: MemoryStoreName,
    /// A single change: add, replace or remove. Leave out when you pass `operations`.
    action: Option<MemoryEdit>,
    /// The entry text for add and replace.
    content: Option<String>,
    /// For replace and remove: a short piece of the entry that no other entry contains.
    old_text: Option<String>,
    /// Several changes applied as one: all or none, with the size limit checked on the result.
    operations: Option<Vec<MemoryOperation>>,
    ctx: &ToolContext,
) -> ToolResult {
    let Some(session) = ctx.agent_session_as::<AgentSession>() else {
        return Ok(json!({"success": false, "error": "memory is unavailable: it needs the agent session of hermes-agent"}).into());
    };
    let target = match target {
        MemoryStoreName::Memory => MemoryTarget::Memory,
        MemoryStoreName::User => MemoryTarget::User,
    };
    let convert = |edit: MemoryEdit| match edit {
        MemoryEdit::Add => MemoryAction::Add,
        MemoryEdit::Replace => MemoryAction::Replace,
        MemoryEdit::Remove => MemoryAction::Remove,
    };
    let ops: Vec<MemoryOp> = match (action, operations) {
        (Some(_), Some(_)) => {
            return Ok(json!({"success": false, "error": "give either `action` (one change) or `operations` (a batch), not both"}).into())
        }
        (None, None) => {
            return Ok(json!({"success": false, "error": "nothing to do: give `action` with `content`/`old_text`, or `operations`"}).into())
        }
        (Some(action), None) => vec![MemoryOp { action: convert(action), content, old_text }],
        (None, Some(operations)) => {
            if content.is_some() || old_text.is_some() {
                return Ok(json!({"success": false, "error": "with `operations`, put `content` and `old_text` inside each operation"}).into());
            }
            operations
                .into_iter()
                .map(|op| MemoryOp { action: convert(op.action), content: op.content, old_text: op.old_text })
                .collect()
        }
    };
    Ok(session.memory().apply(target, &ops).into())
}
