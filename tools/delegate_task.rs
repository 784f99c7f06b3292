//! `delegate_task`: child agent sessions for separate goals, run by the agent session
//! (hermes-agent) with their own model loops.

use hermes_agent::{AgentSession, DelegateSpec};
use hermes_runtime::prelude::*;

/// Most goals one call may hand out.
const MAX_TASKS: usize = 10;

/// One goal for a sub-agent.
#[derive(Deserialize)]
pub struct DelegateTaskItem {
    /// What the sub-agent should achieve, stated so that someone new to the task could do it.
    goal: String,
    /// Everything the sub-agent needs to know: paths, findings so far, constraints. It sees nothing of your conversation.
    context: Option<String>,
    /// Toolsets the sub-agent may use. Default: yours, without clarify and memory.
    toolsets: Option<Vec<String>>,
}

/// Hand work to sub-agents that run with their own context and return only a summary: use it for independent pieces of a bigger task (research several things at once, check several files, try alternatives), or to keep a long side investigation out of your context. Give one `goal` (with `context`), or a batch in `tasks`, which run in parallel. A sub-agent sees nothing of your conversation, so put every fact it needs in `context`. Sub-agents cannot ask the user, cannot write memory and cannot delegate further. The result lists each task's status and summary; check the summaries before you rely on them.
///
/// Children run at most `delegation.max_concurrent_children` (3) at a time; sessions at
/// `delegation.max_spawn_depth` (1) get no delegate_task.
#[tool(toolset = "delegation", emoji = "🔀")]
pub fn delegate_task(
    /// One goal for one sub-agent. Use `tasks` instead for several.
    goal: Option<String>,
    /// With `goal`: what the sub-agent needs to know (paths, findings, constraints).
    context: Option<String>,
    /// With `goal`: toolsets the sub-agent may use. Default: yours, without clarify and memory.
    toolsets: Option<Vec<String>>,
    /// Several goals, run in parallel, at most 10.
    tasks: Option<Vec<DelegateTaskItem>>,
    ctx: &ToolContext,
) -> ToolResult {
    let Some(session) = ctx.agent_session_as::<AgentSession>() else {
        return Ok(ToolOutput::error(
            "delegate_task needs the agent session of hermes-agent",
        ));
    };
    let specs: Vec<DelegateSpec> = match (goal, tasks) {
        (Some(_), Some(_)) => {
            return Ok(ToolOutput::error(
                "give either `goal` (one task) or `tasks` (a batch), not both",
            ))
        }
        (None, None) => {
            return Ok(ToolOutput::error(
                "nothing to delegate: give `goal`, or `tasks` with at least one goal",
            ))
        }
        (Some(goal), None) => vec![DelegateSpec {
            goal,
            context,
            toolsets,
        }],
        (None, Some(tasks)) => {
            if tasks.len() > MAX_TASKS {
                return Ok(ToolOutput::error(format!(
                    "{} tasks is too many for one call: give at most {MAX_TASKS}, or group related goals",
                    tasks.len()
                )));
            }
            tasks
                .into_iter()
                .map(|t| DelegateSpec {
                    goal: t.goal,
                    context: t.context,
                    toolsets: t.toolsets,
                })
                .collect()
        }
    };
    Ok(session.delegate(specs, ctx.cancellation()).into())
}
