//! `session_search`: past sessions from the session store (SQLite + FTS5) of the
//! agent session (hermes-agent).

use hermes_agent::store::{Detail, SearchRequest, SortOrder};
use hermes_agent::AgentSession;
use hermes_runtime::prelude::*;

/// How matching sessions are ordered.
#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SessionSort {
    Relevance,
    Newest,
    Oldest,
}

/// How much of each matching session to show.
#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SessionDetail {
    Adaptive,
    Full,
}

/// Search and read your past sessions with the user: use it when the user refers to earlier work ("like last time", "that bug we fixed"), or before redoing something that may have been done before. Four ways to call it: `query` searches message text (words are ANDed; OR, "exact phrases", NOT and prefix* work) and returns the best sessions with a snippet, the id of the matching message and the first and last messages; no arguments lists recent sessions; `session_id` alone reads one session; `session_id` with `around_message_id` shows the messages around that one. The current session is not searched: it is already in your context.
///
/// A query that is not valid FTS5 syntax is retried as quoted words and the result says
/// so. Delegated sub-agent sessions are hidden, and only sessions of the caller's own
/// origin are seen unless config.yaml says `session_search.scope: all`.
#[tool(toolset = "session_search", emoji = "🔎", concurrency = "read_only")]
pub fn session_search(
    /// Words to search for. Leave out to list recent sessions or to read one by `session_id`.
    query: Option<String>,
    /// How many sessions to return. Default 3, at most 10.
    limit: Option<u64>,
    /// Order of the matching sessions. Default relevance.
    sort: Option<SessionSort>,
    /// adaptive (default) clips the messages shown; full shows them longer.
    detail: Option<SessionDetail>,
    /// A session to read, or to scroll in with `around_message_id`.
    session_id: Option<String>,
    /// With `session_id`: show the messages around this message id (a `match_message_id` from a search).
    around_message_id: Option<i64>,
    /// With `around_message_id`: messages to show on each side. Default 5, from 1 to 20.
    window: Option<u64>,
    /// Comma-separated roles to search and show. Default "user,assistant"; add "tool" to include tool results.
    role_filter: Option<String>,
    ctx: &ToolContext,
) -> ToolResult {
    let Some(session) = ctx.agent_session_as::<AgentSession>() else {
        return Ok(json!({"success": false, "error": "the session database is unavailable: session_search needs the agent session of hermes-agent"}).into());
    };
    let store = match session.store() {
        Ok(store) => store,
        Err(why) => return Ok(json!({"success": false, "error": format!("the session database is unavailable: {why}")}).into()),
    };
    let request = SearchRequest {
        query,
        limit: limit.map(|n| n.min(1000) as usize),
        sort: match sort {
            None | Some(SessionSort::Relevance) => SortOrder::Relevance,
            Some(SessionSort::Newest) => SortOrder::Newest,
            Some(SessionSort::Oldest) => SortOrder::Oldest,
        },
        detail: match detail {
            Some(SessionDetail::Full) => Detail::Full,
            _ => Detail::Adaptive,
        },
        session_id,
        around_message_id,
        window: window.map(|n| n.min(1000) as usize),
        role_filter,
    };
    // Only this session's origin (cli, serve, cron, ...) unless the operator opens all
    // of them with `session_search.scope: all`.
    let own_only = !matches!(
        session
            .registry()
            .config()
            .get("session_search.scope")
            .and_then(Value::as_str),
        Some("all")
    );
    Ok(store.search_scoped(&request, session.id(), own_only).into())
}
