//! The session store: every session's messages and tool calls in SQLite
//! (`$HERMES_HOME/state.db`), with an FTS5 index over message text for
//! `session_search`.
//!
//! Tables: `sessions` (id, source, title, parent, times, message count), `messages`
//! (role, content, tool_call_id, tool_name, tool_calls, timestamp) and `messages_fts`,
//! an external-content FTS5 table kept in step by triggers. WAL mode and a busy
//! timeout let several processes (a server, a CLI agent) share the file.

use rusqlite::{params, params_from_iter, Connection, OptionalExtension};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

pub const DEFAULT_SEARCH_LIMIT: usize = 3;
pub const MAX_SEARCH_LIMIT: usize = 10;
pub const DEFAULT_BROWSE_LIMIT: usize = 10;
pub const DEFAULT_WINDOW: usize = 5;
pub const MAX_WINDOW: usize = 20;
pub const DEFAULT_ROLES: &str = "user,assistant";
/// Sessions that are not conversations with a person; hidden from search and browse.
pub const HIDDEN_SOURCES: &[&str] = &["subagent", "tool"];
/// A session read whole shows at most this many messages: the first and the last ones.
const READ_HEAD: usize = 20;
const READ_TAIL: usize = 10;

const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    source TEXT NOT NULL DEFAULT 'cli',
    title TEXT,
    parent_session_id TEXT,
    started_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    message_count INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL REFERENCES sessions(id),
    role TEXT NOT NULL,
    content TEXT NOT NULL DEFAULT '',
    tool_call_id TEXT,
    tool_name TEXT,
    tool_calls TEXT,
    timestamp REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS messages_by_session ON messages(session_id, id);
CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts USING fts5(content, content='messages', content_rowid='id');
CREATE TRIGGER IF NOT EXISTS messages_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
END;
CREATE TRIGGER IF NOT EXISTS messages_fts_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
END;
CREATE TRIGGER IF NOT EXISTS messages_fts_update AFTER UPDATE ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
    INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
END;
"#;

/// A message to record.
#[derive(Debug, Clone, Default)]
pub struct NewMessage {
    pub role: String,
    pub content: String,
    pub tool_call_id: Option<String>,
    pub tool_name: Option<String>,
    /// The assistant's tool calls, as the model sent them.
    pub tool_calls: Option<Value>,
    /// Seconds since the epoch; now when `None`.
    pub timestamp: Option<f64>,
}

impl NewMessage {
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> NewMessage {
        NewMessage {
            role: role.into(),
            content: content.into(),
            ..Default::default()
        }
    }
}

/// A new session's row.
#[derive(Debug, Clone, Default)]
pub struct NewSession<'a> {
    pub id: &'a str,
    pub source: &'a str,
    pub title: Option<&'a str>,
    pub parent_session_id: Option<&'a str>,
    pub started_at: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SortOrder {
    #[default]
    Relevance,
    Newest,
    Oldest,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Detail {
    #[default]
    Adaptive,
    Full,
}

/// What `session_search` was asked; the shape follows from which fields are set.
#[derive(Debug, Clone, Default)]
pub struct SearchRequest {
    pub query: Option<String>,
    pub limit: Option<usize>,
    pub sort: SortOrder,
    pub detail: Detail,
    pub session_id: Option<String>,
    pub around_message_id: Option<i64>,
    pub window: Option<usize>,
    pub role_filter: Option<String>,
}

pub struct SessionStore {
    path: PathBuf,
    conn: Mutex<Connection>,
}

pub fn now_seconds() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

impl SessionStore {
    /// `<hermes_home>/state.db`, created with its folder when missing.
    pub fn open_in(hermes_home: &Path) -> Result<SessionStore, String> {
        SessionStore::open(&hermes_home.join("state.db"))
    }

    pub fn open(path: &Path) -> Result<SessionStore, String> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
        }
        let conn =
            Connection::open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        conn.busy_timeout(std::time::Duration::from_secs(10))
            .map_err(|e| e.to_string())?;
        // WAL lets readers and one writer share the file; a failure (e.g. a read-only
        // folder) leaves the default journal, which still works.
        let _ = conn.pragma_update(None, "journal_mode", "WAL");
        let _ = conn.pragma_update(None, "synchronous", "NORMAL");
        conn.execute_batch(SCHEMA)
            .map_err(|e| format!("cannot create the tables of {}: {e}", path.display()))?;
        Ok(SessionStore {
            path: path.to_path_buf(),
            conn: Mutex::new(conn),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Creates the session's row if it has none; an existing row keeps its fields,
    /// except a missing title, which is filled in.
    pub fn ensure_session(&self, session: &NewSession<'_>) -> Result<(), String> {
        let at = session.started_at.unwrap_or_else(now_seconds);
        let conn = self.conn();
        conn.execute(
            "INSERT INTO sessions (id, source, title, parent_session_id, started_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?5)
             ON CONFLICT(id) DO UPDATE SET title = COALESCE(sessions.title, excluded.title)",
            params![session.id, session.source, session.title, session.parent_session_id, at],
        )
        .map_err(|e| format!("cannot record session {}: {e}", session.id))?;
        Ok(())
    }

    /// Appends a message (creating the session's row if needed) and returns its id.
    pub fn append(&self, session_id: &str, message: &NewMessage) -> Result<i64, String> {
        let at = message.timestamp.unwrap_or_else(now_seconds);
        let mut conn = self.conn();
        let tx = conn.transaction().map_err(|e| e.to_string())?;
        tx.execute(
            "INSERT INTO sessions (id, started_at, updated_at) VALUES (?1, ?2, ?2) ON CONFLICT(id) DO NOTHING",
            params![session_id, at],
        )
        .map_err(|e| e.to_string())?;
        tx.execute(
            "INSERT INTO messages (session_id, role, content, tool_call_id, tool_name, tool_calls, timestamp) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                session_id,
                message.role,
                message.content,
                message.tool_call_id,
                message.tool_name,
                message.tool_calls.as_ref().map(Value::to_string),
                at
            ],
        )
        .map_err(|e| e.to_string())?;
        let id = tx.last_insert_rowid();
        tx.execute(
            "UPDATE sessions SET updated_at = MAX(updated_at, ?2), message_count = message_count + 1 WHERE id = ?1",
            params![session_id, at],
        )
        .map_err(|e| e.to_string())?;
        tx.commit()
            .map_err(|e| format!("cannot record a message of {session_id}: {e}"))?;
        Ok(id)
    }

    pub fn message_count(&self, session_id: &str) -> usize {
        self.conn()
            .query_row(
                "SELECT COUNT(*) FROM messages WHERE session_id = ?1",
                [session_id],
                |r| r.get::<_, i64>(0),
            )
            .map(|n| n as usize)
            .unwrap_or(0)
    }

    /// Answers `session_search` over every session. `current` is the asking session,
    /// left out of discovery and browse (it is already in the model's context).
    pub fn search(&self, request: &SearchRequest, current: &str) -> Value {
        self.search_scoped(request, current, false)
    }

    /// [`SessionStore::search`], with `own_only`: only the sessions of the asking
    /// session's origin (its source, a sub-agent's taken from its top-level parent:
    /// `cli` sees `cli` sessions, `cron` sees cron runs) are found, listed or read.
    pub fn search_scoped(&self, request: &SearchRequest, current: &str, own_only: bool) -> Value {
        let owner = if own_only {
            Some(self.origin_of(current))
        } else {
            None
        };
        let scope = owner.as_deref();
        let roles = parse_roles(request.role_filter.as_deref());
        let result = match (&request.query, &request.session_id) {
            (Some(query), _) if !query.trim().is_empty() => {
                self.discover(query.trim(), request, &roles, current, scope)
            }
            (_, Some(session)) if !session.trim().is_empty() => {
                match self.find_session(session.trim()) {
                    Ok(Some(meta)) if scope.is_some_and(|s| self.origin_of(&meta.id) != s) => {
                        Ok(unknown_session(session.trim()))
                    }
                    _ => match request.around_message_id {
                        Some(anchor) => self.scroll(session.trim(), anchor, request.window, &roles),
                        None => self.read(session.trim(), &roles),
                    },
                }
            }
            _ => {
                if request.around_message_id.is_some() {
                    return json!({"success": false, "error": "around_message_id needs session_id: the session the message belongs to"});
                }
                self.browse(request.limit, current, scope)
            }
        };
        result.unwrap_or_else(|e| json!({"success": false, "error": format!("the session store could not be searched: {e}")}))
    }

    /// The source of the session's top-level ancestor (`cli`, `serve`, `cron`, ...).
    fn origin_of(&self, session: &str) -> String {
        let mut id = session.to_string();
        for _ in 0..32 {
            match self.find_session(&id) {
                Ok(Some(meta)) => match meta.parent.clone() {
                    Some(parent) if !parent.is_empty() => id = parent,
                    _ => return meta.source,
                },
                _ => break,
            }
        }
        String::new()
    }

    fn discover(
        &self,
        query: &str,
        request: &SearchRequest,
        roles: &[String],
        current: &str,
        scope: Option<&str>,
    ) -> Result<Value, String> {
        let limit = request
            .limit
            .unwrap_or(DEFAULT_SEARCH_LIMIT)
            .clamp(1, MAX_SEARCH_LIMIT);
        let (hits, note) = match self.match_messages(query, roles, current, scope) {
            Ok(hits) => (hits, None),
            Err(MatchError::Query(error)) => {
                let quoted = quote_terms(query);
                if quoted.is_empty() {
                    return Ok(
                        json!({"success": false, "error": format!("the query {query:?} has no words to search for"), "hint": FTS_HINT}),
                    );
                }
                match self.match_messages(&quoted, roles, current, scope) {
                    Ok(hits) => (
                        hits,
                        Some(format!(
                            "Your query was not valid FTS5 syntax ({}); it was searched as the quoted words {quoted}.",
                            clean_fts_error(&error)
                        )),
                    ),
                    Err(second) => {
                        return Ok(json!({
                            "success": false,
                            "error": format!("the query {query:?} is not valid FTS5 syntax: {}", clean_fts_error(&second.to_string())),
                            "hint": FTS_HINT,
                        }))
                    }
                }
            }
            Err(MatchError::Store(error)) => return Err(error),
        };
        // Hits come best first; a session is ranked by its best hit.
        let mut sessions: Vec<(String, Vec<Hit>)> = Vec::new();
        for hit in hits {
            match sessions.iter_mut().find(|(id, _)| *id == hit.session_id) {
                Some((_, list)) => list.push(hit),
                None => sessions.push((hit.session_id.clone(), vec![hit])),
            }
        }
        let mut rows = Vec::new();
        for (id, hits) in sessions {
            let meta = self.session_meta(&id)?;
            rows.push((meta, hits));
        }
        match request.sort {
            SortOrder::Relevance => {}
            SortOrder::Newest => rows.sort_by(|a, b| b.0.updated_at.total_cmp(&a.0.updated_at)),
            SortOrder::Oldest => rows.sort_by(|a, b| a.0.started_at.total_cmp(&b.0.started_at)),
        }
        let total_sessions = rows.len();
        let clip = if request.detail == Detail::Full {
            2000
        } else {
            300
        };
        let mut results = Vec::new();
        for (meta, hits) in rows.into_iter().take(limit) {
            let best = &hits[0];
            let messages = self.filtered_messages(&meta.id, roles)?;
            let bookend_start: Vec<Value> =
                messages.iter().take(3).map(|m| m.to_json(clip)).collect();
            let bookend_end: Vec<Value> = messages
                .iter()
                .rev()
                .take(3)
                .rev()
                .map(|m| m.to_json(clip))
                .collect();
            let mut item = meta.to_json();
            item["match_message_id"] = json!(best.message_id);
            item["match_role"] = json!(best.role);
            item["match_count"] = json!(hits.len());
            item["snippet"] = json!(best.snippet);
            item["bookend_start"] = json!(bookend_start);
            item["bookend_end"] = json!(bookend_end);
            results.push(item);
        }
        let mut out = json!({
            "success": true,
            "mode": "discovery",
            "query": query,
            "count": results.len(),
            "sessions_matched": total_sessions,
            "results": results,
        });
        if out["count"] == 0 {
            out["hint"] = json!("No past session matched. Try fewer words, OR between alternatives, or a prefix such as deploy*.");
        } else {
            out["hint"] = json!("To read around a match, call session_search with its session_id and around_message_id = match_message_id.");
        }
        if let Some(note) = note {
            out["query_note"] = json!(note);
        }
        Ok(out)
    }

    fn match_messages(
        &self,
        query: &str,
        roles: &[String],
        current: &str,
        scope: Option<&str>,
    ) -> Result<Vec<Hit>, MatchError> {
        let conn = self.conn();
        let role_marks = placeholders(3, roles.len());
        let hidden_marks = placeholders(3 + roles.len(), HIDDEN_SOURCES.len());
        let sql = format!(
            "SELECT m.id, m.session_id, m.role, snippet(messages_fts, 0, '>>>', '<<<', '…', 16)
             FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid JOIN sessions s ON s.id = m.session_id
             WHERE messages_fts MATCH ?1 AND m.session_id != ?2 AND m.role IN ({role_marks}) AND s.source NOT IN ({hidden_marks})
             {scoped}
             ORDER BY bm25(messages_fts), m.id DESC LIMIT 500",
            // Sessions that are not hidden are top-level: their source is their origin.
            scoped = if scope.is_some() {
                format!("AND s.source = ?{}", 3 + roles.len() + HIDDEN_SOURCES.len())
            } else {
                String::new()
            },
        );
        let mut statement = conn
            .prepare(&sql)
            .map_err(|e| MatchError::Store(e.to_string()))?;
        let mut values: Vec<String> = vec![query.to_string(), current.to_string()];
        values.extend(roles.iter().cloned());
        values.extend(HIDDEN_SOURCES.iter().map(|s| s.to_string()));
        values.extend(scope.map(str::to_owned));
        let rows = statement
            .query_map(params_from_iter(values.iter()), |r| {
                Ok(Hit {
                    message_id: r.get(0)?,
                    session_id: r.get(1)?,
                    role: r.get(2)?,
                    snippet: r.get(3)?,
                })
            })
            .map_err(MatchError::from_running)?;
        rows.collect::<Result<Vec<_>, _>>()
            .map_err(MatchError::from_running)
    }

    fn session_meta(&self, id: &str) -> Result<SessionMeta, String> {
        self.conn()
            .query_row(
                "SELECT id, source, title, parent_session_id, started_at, updated_at, message_count FROM sessions WHERE id = ?1",
                [id],
                SessionMeta::from_row,
            )
            .map_err(|e| e.to_string())
    }

    fn browse(
        &self,
        limit: Option<usize>,
        current: &str,
        scope: Option<&str>,
    ) -> Result<Value, String> {
        let limit = limit
            .unwrap_or(DEFAULT_BROWSE_LIMIT)
            .clamp(1, MAX_SEARCH_LIMIT);
        let metas: Vec<SessionMeta> = {
            let conn = self.conn();
            let hidden_marks = placeholders(3, HIDDEN_SOURCES.len());
            let sql = format!(
                "SELECT id, source, title, parent_session_id, started_at, updated_at, message_count FROM sessions
                 WHERE id != ?1 AND message_count > 0 AND source NOT IN ({hidden_marks})
                 {scoped}
                 ORDER BY updated_at DESC LIMIT ?2",
                scoped = if scope.is_some() {
                    format!("AND source = ?{}", 3 + HIDDEN_SOURCES.len())
                } else {
                    String::new()
                },
            );
            let mut statement = conn.prepare(&sql).map_err(|e| e.to_string())?;
            let mut params: Vec<Box<dyn rusqlite::ToSql>> =
                vec![Box::new(current.to_string()), Box::new(limit as i64)];
            params.extend(
                HIDDEN_SOURCES
                    .iter()
                    .map(|s| Box::new(s.to_string()) as Box<dyn rusqlite::ToSql>),
            );
            params.extend(scope.map(|s| Box::new(s.to_string()) as Box<dyn rusqlite::ToSql>));
            let rows = statement
                .query_map(
                    rusqlite::params_from_iter(params.iter()),
                    SessionMeta::from_row,
                )
                .map_err(|e| e.to_string())?;
            rows.collect::<Result<Vec<_>, _>>()
                .map_err(|e| e.to_string())?
        };
        let mut sessions = Vec::new();
        for meta in metas {
            let first_user = self
                .filtered_messages(&meta.id, &["user".to_string()])?
                .into_iter()
                .next()
                .map(|m| clip(&m.content, 200));
            let mut item = meta.to_json();
            item["preview"] = json!(first_user);
            sessions.push(item);
        }
        Ok(json!({
            "success": true,
            "mode": "browse",
            "count": sessions.len(),
            "sessions": sessions,
            "hint": "Pass a query to search these sessions, or a session_id to read one.",
        }))
    }

    fn read(&self, session: &str, roles: &[String]) -> Result<Value, String> {
        let Some(meta) = self.find_session(session)? else {
            return Ok(unknown_session(session));
        };
        let messages = self.filtered_messages(session, roles)?;
        let total = messages.len();
        let mut out = meta.to_json();
        out["success"] = json!(true);
        out["mode"] = json!("read");
        out["total_messages"] = json!(total);
        if total > READ_HEAD + READ_TAIL {
            let head: Vec<Value> = messages[..READ_HEAD]
                .iter()
                .map(|m| m.to_json(4000))
                .collect();
            let tail: Vec<Value> = messages[total - READ_TAIL..]
                .iter()
                .map(|m| m.to_json(4000))
                .collect();
            out["messages"] = json!(head);
            out["messages_omitted"] = json!(total - READ_HEAD - READ_TAIL);
            out["messages_end"] = json!(tail);
            out["hint"] = json!(format!(
                "The middle {} messages are left out; scroll with around_message_id to read them.",
                total - READ_HEAD - READ_TAIL
            ));
        } else {
            out["messages"] = json!(messages.iter().map(|m| m.to_json(4000)).collect::<Vec<_>>());
        }
        Ok(out)
    }

    fn scroll(
        &self,
        session: &str,
        anchor: i64,
        window: Option<usize>,
        roles: &[String],
    ) -> Result<Value, String> {
        let window = window.unwrap_or(DEFAULT_WINDOW).clamp(1, MAX_WINDOW);
        let Some(meta) = self.find_session(session)? else {
            return Ok(unknown_session(session));
        };
        let all = self.all_messages(session)?;
        let Some(position) = all.iter().position(|m| m.id == anchor) else {
            return Ok(json!({
                "success": false,
                "error": format!("message {anchor} is not in session {session}; use a match_message_id from a search of this session"),
            }));
        };
        let keep = |m: &&StoredMessage| roles.contains(&m.role);
        let before: Vec<&StoredMessage> = all[..position]
            .iter()
            .rev()
            .filter(keep)
            .take(window)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        let after: Vec<&StoredMessage> = all[position + 1..]
            .iter()
            .filter(keep)
            .take(window)
            .collect();
        let mut out = meta.to_json();
        out["success"] = json!(true);
        out["mode"] = json!("scroll");
        out["around_message_id"] = json!(anchor);
        out["window"] = json!(window);
        out["messages_before"] = json!(before.iter().map(|m| m.to_json(4000)).collect::<Vec<_>>());
        out["message"] = all[position].to_json(4000);
        out["messages_after"] = json!(after.iter().map(|m| m.to_json(4000)).collect::<Vec<_>>());
        out["has_more_before"] = json!(all[..position].iter().filter(keep).count() > before.len());
        out["has_more_after"] =
            json!(all[position + 1..].iter().filter(keep).count() > after.len());
        Ok(out)
    }

    fn find_session(&self, id: &str) -> Result<Option<SessionMeta>, String> {
        self.conn()
            .query_row(
                "SELECT id, source, title, parent_session_id, started_at, updated_at, message_count FROM sessions WHERE id = ?1",
                [id],
                SessionMeta::from_row,
            )
            .optional()
            .map_err(|e| e.to_string())
    }

    fn all_messages(&self, session: &str) -> Result<Vec<StoredMessage>, String> {
        let conn = self.conn();
        let mut statement = conn
            .prepare("SELECT id, role, content, tool_call_id, tool_name, timestamp FROM messages WHERE session_id = ?1 ORDER BY id")
            .map_err(|e| e.to_string())?;
        let rows = statement
            .query_map([session], StoredMessage::from_row)
            .map_err(|e| e.to_string())?;
        rows.collect::<Result<Vec<_>, _>>()
            .map_err(|e| e.to_string())
    }

    fn filtered_messages(
        &self,
        session: &str,
        roles: &[String],
    ) -> Result<Vec<StoredMessage>, String> {
        Ok(self
            .all_messages(session)?
            .into_iter()
            .filter(|m| roles.contains(&m.role))
            .collect())
    }
}

const FTS_HINT: &str = "Search words are ANDed; use OR between alternatives, \"double quotes\" for a phrase, NOT to exclude, and word* for a prefix.";

fn unknown_session(session: &str) -> Value {
    json!({"success": false, "error": format!("no session {session:?} in the store; browse recent sessions by calling session_search with no arguments")})
}

fn placeholders(first: usize, count: usize) -> String {
    if count == 0 {
        return "NULL".into();
    }
    (first..first + count)
        .map(|n| format!("?{n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn parse_roles(filter: Option<&str>) -> Vec<String> {
    let roles: Vec<String> = filter
        .unwrap_or(DEFAULT_ROLES)
        .split(',')
        .map(|r| r.trim().to_ascii_lowercase())
        .filter(|r| !r.is_empty())
        .collect();
    if roles.is_empty() {
        parse_roles(None)
    } else {
        roles
    }
}

/// Why a search of the messages failed.
enum MatchError {
    /// The model's MATCH expression is not valid FTS5: the statement itself is ours and
    /// prepared fine, so an SQL error while it runs can only come from the expression.
    Query(String),
    /// The store failed (busy, I/O, a damaged database).
    Store(String),
}

impl MatchError {
    fn from_running(e: rusqlite::Error) -> MatchError {
        match &e {
            rusqlite::Error::SqliteFailure(failure, _)
                if failure.code == rusqlite::ErrorCode::Unknown =>
            {
                MatchError::Query(e.to_string())
            }
            _ => MatchError::Store(e.to_string()),
        }
    }
}

impl std::fmt::Display for MatchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MatchError::Query(e) | MatchError::Store(e) => f.write_str(e),
        }
    }
}

fn clean_fts_error(error: &str) -> String {
    error.trim().to_string()
}

/// Each word of `query` as a quoted FTS5 string, so no character is read as syntax.
pub fn quote_terms(query: &str) -> String {
    query
        .split_whitespace()
        .map(|word| word.replace('"', ""))
        .filter(|word| word.chars().any(char::is_alphanumeric))
        .map(|word| format!("\"{word}\""))
        .collect::<Vec<_>>()
        .join(" ")
}

fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let cut: String = text.chars().take(max).collect();
    format!("{cut}…")
}

struct Hit {
    message_id: i64,
    session_id: String,
    role: String,
    snippet: String,
}

struct SessionMeta {
    id: String,
    source: String,
    title: Option<String>,
    parent: Option<String>,
    started_at: f64,
    updated_at: f64,
    message_count: i64,
}

impl SessionMeta {
    fn from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<SessionMeta> {
        Ok(SessionMeta {
            id: r.get(0)?,
            source: r.get(1)?,
            title: r.get(2)?,
            parent: r.get(3)?,
            started_at: r.get(4)?,
            updated_at: r.get(5)?,
            message_count: r.get(6)?,
        })
    }

    fn to_json(&self) -> Value {
        let mut out = json!({
            "session_id": self.id,
            "title": self.title,
            "when": iso8601(self.started_at),
            "last_active": iso8601(self.updated_at),
            "source": self.source,
            "message_count": self.message_count,
            "link": format!("@session:default/{}", self.id),
        });
        if let Some(parent) = &self.parent {
            out["parent_session_id"] = json!(parent);
        }
        out
    }
}

struct StoredMessage {
    id: i64,
    role: String,
    content: String,
    tool_call_id: Option<String>,
    tool_name: Option<String>,
    timestamp: f64,
}

impl StoredMessage {
    fn from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<StoredMessage> {
        Ok(StoredMessage {
            id: r.get(0)?,
            role: r.get(1)?,
            content: r.get(2)?,
            tool_call_id: r.get(3)?,
            tool_name: r.get(4)?,
            timestamp: r.get(5)?,
        })
    }

    fn to_json(&self, max_chars: usize) -> Value {
        let mut out = json!({
            "id": self.id,
            "role": self.role,
            "content": clip(&self.content, max_chars),
            "when": iso8601(self.timestamp),
        });
        if let Some(name) = &self.tool_name {
            out["tool_name"] = json!(name);
        }
        if let Some(id) = &self.tool_call_id {
            out["tool_call_id"] = json!(id);
        }
        out
    }
}

/// `2026-05-01T12:34:56Z` for seconds since the epoch (UTC, proleptic Gregorian).
pub fn iso8601(seconds: f64) -> String {
    let total = seconds.max(0.0).floor() as i64;
    let (days, rest) = (total.div_euclid(86_400), total.rem_euclid(86_400));
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_iso8601() {
        assert_eq!(iso8601(0.0), "1970-01-01T00:00:00Z");
        assert_eq!(iso8601(1_700_000_000.0), "2023-11-14T22:13:20Z");
    }

    #[test]
    fn quoting_keeps_words_and_drops_syntax() {
        assert_eq!(
            quote_terms("foo AND (bar \"baz"),
            "\"foo\" \"AND\" \"(bar\" \"baz\""
        );
        assert_eq!(quote_terms("(( ))"), "");
    }
}
