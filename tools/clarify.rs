//! `clarify`: a question to the user through the agent session's channel (a terminal
//! prompt, or a request line of the JSON-lines server).

use hermes_agent::clarify::MAX_CHOICES;
use hermes_agent::AgentSession;
use hermes_runtime::prelude::*;

/// Ask the user a question when you cannot go on well without their answer: the request is ambiguous, a choice has real consequences they should make, or you need information only they have. Do not ask what you can find out yourself with other tools, and do not ask for permission on routine steps. Put only the question in `question`; offer up to 4 short `choices` when the likely answers are known (the user can always type something else), or leave them out for a free-text answer. The result holds the user's answer in `user_response`.
#[tool(toolset = "clarify", emoji = "❓")]
pub fn clarify(
    /// The question itself, without the options.
    question: String,
    /// Up to 4 short answers to pick from; leave out for a free-text question.
    choices: Option<Vec<String>>,
    /// true lets the user pick several choices; the answer is then a list. Default false.
    multi_select: Option<bool>,
    ctx: &ToolContext,
) -> ToolResult {
    let Some(session) = ctx.agent_session_as::<AgentSession>() else {
        return Ok(ToolOutput::error(
            "clarify is not available: no agent session is attached, so there is no user to ask",
        ));
    };
    if question.trim().is_empty() {
        return Ok(ToolOutput::error(
            "question is empty: write the question to ask the user",
        ));
    }
    let mut choices: Vec<String> = choices
        .unwrap_or_default()
        .into_iter()
        .map(|c| c.trim().to_string())
        .filter(|c| !c.is_empty())
        .collect();
    let dropped = choices.len().saturating_sub(MAX_CHOICES);
    choices.truncate(MAX_CHOICES);
    let mut result = session.ask_user(
        question.trim(),
        choices,
        multi_select.unwrap_or(false),
        ctx.cancellation(),
    );
    if dropped > 0 && result.get("error").is_none() {
        result["_warning"] = json!(format!(
            "only the first {MAX_CHOICES} choices were shown; {dropped} more were dropped"
        ));
    }
    Ok(result.into())
}
