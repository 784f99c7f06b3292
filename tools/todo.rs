//! `todo`: the session's task list, kept by the agent session (hermes-agent).

use hermes_agent::{AgentSession, TodoInput};
use hermes_runtime::prelude::*;

/// One item of the task list.
#[derive(Deserialize)]
pub struct TodoItem {
    /// A short stable id you choose ("1", "tests"); merge mode finds items by it.
    id: String,
    /// What the step is, in a line. Needed for a new item; in merge mode leave it out to change only the status.
    content: Option<String>,
    /// Where the step stands. Default `pending` for a new item.
    status: Option<TodoStatus>,
}

/// Where a step stands.
#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    Pending,
    InProgress,
    Completed,
    Cancelled,
}

/// Keep a task list for the current job: call it with no arguments to read the list, with `todos` to write it. Use it for any task of 3 or more steps, and when the user gives you several things to do; skip it for a single quick action. Put the items in priority order. Keep EXACTLY ONE item `in_progress` at a time, and mark an item `completed` as soon as it is done, not in batches at the end. When a step fails or stops making sense, mark it `cancelled` and add a revised item instead. Every call returns the whole list with counts per status.
///
/// The list lives in the agent session (one per session), capped at 256 items of 4000
/// characters. With several items in progress the first keeps that status and the
/// others go back to pending, with a `_warning` saying so.
#[tool(toolset = "todo", emoji = "📋", aliases = ["todo_list"])]
pub fn todo(
    /// The items to write, in priority order. Leave this out to read the list.
    todos: Option<Vec<TodoItem>>,
    /// true: update the items whose id you give and append new ones, leaving the rest. false (default): replace the whole list with `todos`.
    merge: Option<bool>,
    ctx: &ToolContext,
) -> ToolResult {
    let Some(session) = ctx.agent_session_as::<AgentSession>() else {
        return Ok(ToolOutput::error(
            "the todo store is not initialised: todo needs the agent session of hermes-agent",
        ));
    };
    let inputs = todos.map(|items| {
        items
            .into_iter()
            .map(|item| TodoInput {
                id: item.id,
                content: item.content,
                status: item.status.map(|s| {
                    match s {
                        TodoStatus::Pending => "pending",
                        TodoStatus::InProgress => "in_progress",
                        TodoStatus::Completed => "completed",
                        TodoStatus::Cancelled => "cancelled",
                    }
                    .to_string()
                }),
            })
            .collect()
    });
    Ok(session.todos().apply(inputs, merge.unwrap_or(false)).into())
}
