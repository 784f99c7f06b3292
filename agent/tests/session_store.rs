//! session_search over a database the test fills: discovery, sorting, limits, role
//! filters, browse, read, scroll, hidden sessions and FTS5 syntax errors.

use hermes_agent::store::{NewMessage, NewSession, SearchRequest, SessionStore, SortOrder};
use serde_json::Value;

const DAY: f64 = 86_400.0;
const T0: f64 = 1_700_000_000.0;

fn message(role: &str, content: &str, at: f64) -> NewMessage {
    NewMessage {
        role: role.into(),
        content: content.into(),
        timestamp: Some(at),
        ..Default::default()
    }
}

fn session(
    store: &SessionStore,
    id: &str,
    source: &str,
    title: &str,
    at: f64,
    messages: &[(&str, &str)],
) {
    store
        .ensure_session(&NewSession {
            id,
            source,
            title: Some(title),
            parent_session_id: None,
            started_at: Some(at),
        })
        .unwrap();
    for (n, (role, content)) in messages.iter().enumerate() {
        store
            .append(id, &message(role, content, at + n as f64))
            .unwrap();
    }
}

fn filled() -> (tempfile::TempDir, SessionStore) {
    let home = tempfile::tempdir().unwrap();
    let store = SessionStore::open_in(home.path()).unwrap();
    session(
        &store,
        "old",
        "cli",
        "Deploy script",
        T0,
        &[
            (
                "user",
                "Help me fix the deploy script for the staging cluster",
            ),
            (
                "assistant",
                "The deploy script fails because kubectl is missing",
            ),
            ("tool", "kubectl: command not found (deploy log)"),
        ],
    );
    session(
        &store,
        "mid",
        "cli",
        "Postgres tuning",
        T0 + DAY,
        &[
            ("user", "Why is postgres slow on the reports query"),
            (
                "assistant",
                "Add an index on reports.created_at; then deploy the migration",
            ),
        ],
    );
    session(
        &store,
        "new",
        "serve",
        "Deploy again",
        T0 + 2.0 * DAY,
        &[
            ("user", "The deploy to production failed again"),
            (
                "assistant",
                "Rolled back the deploy; the image tag was wrong",
            ),
        ],
    );
    session(
        &store,
        "child",
        "subagent",
        "A sub-agent",
        T0 + 3.0 * DAY,
        &[("user", "Goal: deploy things")],
    );
    (home, store)
}

fn ids(results: &Value, key: &str) -> Vec<String> {
    results[key]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["session_id"].as_str().unwrap().to_string())
        .collect()
}

fn query(q: &str) -> SearchRequest {
    SearchRequest {
        query: Some(q.into()),
        ..Default::default()
    }
}

#[test]
fn fts5_is_compiled_in() {
    let (_home, store) = filled();
    let r = store.search(&query("kubectl"), "");
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(r["mode"], "discovery");
}

#[test]
fn discovery_ranks_groups_and_limits() {
    let (_home, store) = filled();
    let r = store.search(&query("deploy"), "");
    // Three conversations mention deploy; the sub-agent's session is hidden; default limit 3.
    let mut found = ids(&r, "results");
    assert_eq!(found.len(), 3, "{r}");
    assert_eq!(r["sessions_matched"], 3);
    found.sort();
    assert_eq!(found, ["mid", "new", "old"]);
    let first = &r["results"][0];
    assert!(
        first["snippet"].as_str().unwrap().contains(">>>deploy<<<")
            || first["snippet"].as_str().unwrap().contains(">>>Deploy<<<"),
        "{first}"
    );
    assert!(first["match_message_id"].as_i64().unwrap() > 0);
    assert!(first["bookend_start"].as_array().unwrap().len() <= 3);
    assert!(first["when"].as_str().unwrap().starts_with("2023-11-"));

    let limited = store.search(
        &SearchRequest {
            limit: Some(1),
            ..query("deploy")
        },
        "",
    );
    assert_eq!(limited["count"], 1);
    let capped = store.search(
        &SearchRequest {
            limit: Some(50),
            ..query("deploy")
        },
        "",
    );
    assert_eq!(capped["count"], 3);

    let newest = store.search(
        &SearchRequest {
            sort: SortOrder::Newest,
            ..query("deploy")
        },
        "",
    );
    assert_eq!(ids(&newest, "results"), ["new", "mid", "old"]);
    let oldest = store.search(
        &SearchRequest {
            sort: SortOrder::Oldest,
            ..query("deploy")
        },
        "",
    );
    assert_eq!(ids(&oldest, "results"), ["old", "mid", "new"]);

    // The asking session is left out.
    let r = store.search(
        &SearchRequest {
            sort: SortOrder::Oldest,
            ..query("deploy")
        },
        "old",
    );
    assert_eq!(ids(&r, "results"), ["mid", "new"]);

    // AND by default, OR, prefix, phrase.
    assert_eq!(
        ids(&store.search(&query("deploy production"), ""), "results"),
        ["new"]
    );
    let mut either = ids(&store.search(&query("postgres OR kubectl"), ""), "results");
    either.sort();
    assert_eq!(either, ["mid", "old"]);
    assert_eq!(ids(&store.search(&query("kube*"), ""), "results"), ["old"]);
    assert_eq!(
        ids(&store.search(&query("\"image tag\""), ""), "results"),
        ["new"]
    );

    let none = store.search(&query("nonexistentword"), "");
    assert_eq!(none["count"], 0);
    assert!(none["hint"].as_str().unwrap().contains("Try fewer words"));
}

#[test]
fn role_filter_chooses_what_is_searched() {
    let (_home, store) = filled();
    // "command not found" is only in a tool result, which the default roles skip.
    assert_eq!(store.search(&query("found"), "")["count"], 0);
    let r = store.search(
        &SearchRequest {
            role_filter: Some("tool".into()),
            ..query("found")
        },
        "",
    );
    assert_eq!(ids(&r, "results"), ["old"]);
    assert_eq!(r["results"][0]["match_role"], "tool");
}

#[test]
fn a_query_with_bad_fts5_syntax_is_retried_as_quoted_words() {
    let (_home, store) = filled();
    let r = store.search(&query("deploy AND (kubectl"), "");
    assert_eq!(r["success"], true, "{r}");
    assert!(
        r["query_note"]
            .as_str()
            .unwrap()
            .contains("not valid FTS5 syntax"),
        "{r}"
    );
    assert!(r["query_note"].as_str().unwrap().contains("\"deploy\""));
    // `"AND"` quoted is a plain word now; nothing has it, so no match, but no error.
    assert_eq!(r["count"], 0);
    let r = store.search(&query("kubectl\""), "");
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(ids(&r, "results"), ["old"]);
    let r = store.search(&query("((("), "");
    assert_eq!(r["success"], false);
    assert!(r["hint"].as_str().unwrap().contains("OR"));
}

#[test]
fn browse_read_and_scroll() {
    let (_home, store) = filled();
    let browse = store.search(&SearchRequest::default(), "new");
    assert_eq!(browse["mode"], "browse");
    assert_eq!(ids(&browse, "sessions"), ["mid", "old"]);
    assert_eq!(
        browse["sessions"][0]["preview"],
        "Why is postgres slow on the reports query"
    );

    let read = store.search(
        &SearchRequest {
            session_id: Some("old".into()),
            ..Default::default()
        },
        "",
    );
    assert_eq!(read["mode"], "read");
    assert_eq!(read["title"], "Deploy script");
    assert_eq!(
        read["messages"].as_array().unwrap().len(),
        2,
        "tool result filtered out by default roles"
    );
    let with_tools = store.search(
        &SearchRequest {
            session_id: Some("old".into()),
            role_filter: Some("user,assistant,tool".into()),
            ..Default::default()
        },
        "",
    );
    assert_eq!(with_tools["messages"].as_array().unwrap().len(), 3);

    let unknown = store.search(
        &SearchRequest {
            session_id: Some("nope".into()),
            ..Default::default()
        },
        "",
    );
    assert_eq!(unknown["success"], false);

    // A long session: read shows the first 20 and the last 10.
    let long: Vec<(String, String)> = (0..40)
        .map(|n| ("user".to_string(), format!("line number {n}")))
        .collect();
    let refs: Vec<(&str, &str)> = long.iter().map(|(r, c)| (r.as_str(), c.as_str())).collect();
    session(&store, "long", "cli", "Long", T0 + 4.0 * DAY, &refs);
    let read = store.search(
        &SearchRequest {
            session_id: Some("long".into()),
            ..Default::default()
        },
        "",
    );
    assert_eq!(read["messages"].as_array().unwrap().len(), 20);
    assert_eq!(read["messages_end"].as_array().unwrap().len(), 10);
    assert_eq!(read["messages_omitted"], 10);
    assert_eq!(read["messages_end"][9]["content"], "line number 39");

    // Scroll around message "line number 20", window 2.
    let hit = store.search(&query("\"number 20\""), "");
    let anchor = hit["results"][0]["match_message_id"].as_i64().unwrap();
    let scroll = store.search(
        &SearchRequest {
            session_id: Some("long".into()),
            around_message_id: Some(anchor),
            window: Some(2),
            ..Default::default()
        },
        "",
    );
    assert_eq!(scroll["mode"], "scroll");
    assert_eq!(scroll["message"]["content"], "line number 20");
    let before: Vec<&str> = scroll["messages_before"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    let after: Vec<&str> = scroll["messages_after"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(before, ["line number 18", "line number 19"]);
    assert_eq!(after, ["line number 21", "line number 22"]);
    // Window is clamped to 1..=20; the default is 5.
    let wide = store.search(
        &SearchRequest {
            session_id: Some("long".into()),
            around_message_id: Some(anchor),
            window: Some(500),
            ..Default::default()
        },
        "",
    );
    assert_eq!(wide["window"], 20);
    assert_eq!(wide["messages_before"].as_array().unwrap().len(), 20);
    let default = store.search(
        &SearchRequest {
            session_id: Some("long".into()),
            around_message_id: Some(anchor),
            ..Default::default()
        },
        "",
    );
    assert_eq!(default["messages_after"].as_array().unwrap().len(), 5);
    // An anchor from another session.
    let wrong = store.search(
        &SearchRequest {
            session_id: Some("mid".into()),
            around_message_id: Some(anchor),
            ..Default::default()
        },
        "",
    );
    assert_eq!(wrong["success"], false);
    assert!(wrong["error"]
        .as_str()
        .unwrap()
        .contains("is not in session mid"));
}
