//! search_files' work: where the search starts and whether it may (the repeat guard,
//! devices, missing paths, the deny-read list), the search itself on this machine or in
//! the task's environment, and the page of results with its hints.

use super::guard::{FileState, BLOCK_AT, WARN_AT};
use super::replies::error_with;
use super::search::{self, Cap, ContentResults, Scope, SearchError};
use super::{paths, remote, remote_search, OutputMode, SearchTarget};
use hermes_runtime::access::AccessPolicy;
use hermes_runtime::prelude::*;
use serde_json::Map;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

/// One search_files call, its defaults applied and its bounds enforced.
pub(super) struct Request {
    pub pattern: String,
    pub target: SearchTarget,
    /// The path as the caller wrote it (`.` when none was given).
    pub shown_root: String,
    pub file_glob: Option<String>,
    pub limit: usize,
    pub offset: usize,
    pub output_mode: OutputMode,
    pub context: usize,
}

/// The page of results for `request`, or the refusal.
pub(super) fn search_files(request: &Request, ctx: &ToolContext) -> ToolResult {
    let state = ctx.task_state::<FileState>();
    let remote = match remote::for_task(ctx) {
        Some(Ok(remote)) => Some(remote),
        Some(Err(e)) => return Ok(ToolOutput::error(e)),
        None => None,
    };
    let shown_root = &request.shown_root;
    let probe = match &remote {
        Some(remote) => match remote.probe(shown_root, false) {
            Ok(probe) => Some(probe),
            Err(e) => {
                return Ok(ToolOutput::error(format!(
                    "Cannot search {shown_root}: {e}"
                )))
            }
        },
        None => None,
    };
    let root = match &probe {
        Some(probe) => PathBuf::from(&probe.real),
        None => paths::locate(ctx, shown_root),
    };
    let streak = match repeat_streak(&state, request, &root, ctx) {
        Ok(streak) => streak,
        Err(blocked) => return Ok(blocked),
    };
    let (device, exists) = match &probe {
        Some(probe) => (
            remote::is_device_path(&probe.real),
            probe.kind != remote::Kind::Missing,
        ),
        None => (crate::file_access::is_device_path(&root), root.exists()),
    };
    if device {
        return Ok(ToolOutput::error(format!(
            "Refusing to search {shown_root}: devices and kernel files (/dev, /proc, /sys) can block, stream without end or expose memory."
        )));
    }
    if !exists {
        return Ok(ToolOutput::error(format!("Path not found: {shown_root}")));
    }
    let access = match &remote {
        Some(_) => None,
        None => match local_access(ctx, &root, shown_root) {
            Ok(access) => Some(access),
            Err(refusal) => return Ok(refusal),
        },
    };
    let scope = Scope {
        root,
        shown_root: shown_root.clone(),
        cancel: ctx.cancellation(),
        access,
    };
    let found = match run(remote.as_ref(), &scope, request) {
        Ok(found) => found,
        Err(failure) => return Ok(failure),
    };
    Ok(page(found, request, streak))
}

/// Counts an identical search in a row: the count, or the refusal from the fourth.
fn repeat_streak(
    state: &FileState,
    request: &Request,
    root: &std::path::Path,
    ctx: &ToolContext,
) -> Result<u32, ToolOutput> {
    let Request {
        pattern,
        target,
        file_glob,
        limit,
        offset,
        output_mode,
        context,
        ..
    } = request;
    let key = format!(
        "search_files\0{pattern}\0{target:?}\0{}\0{}\0{limit}\0{offset}\0{output_mode:?}\0{context}",
        root.display(),
        file_glob.as_deref().unwrap_or("")
    );
    let streak = state.note_call(key, ctx.activity_epoch());
    if streak >= BLOCK_AT {
        return Err(error_with(
            format!(
                "BLOCKED: this is the same search {streak} times in a row and the results have not changed. \
                 Do NOT repeat it: use the results you have, or search for something else."
            ),
            &[("already_searched", json!(streak))],
        ));
    }
    Ok(streak)
}

/// The access policy a search on this machine walks under, unless it refuses the root.
fn local_access(
    ctx: &ToolContext,
    root: &std::path::Path,
    shown_root: &str,
) -> Result<Arc<AccessPolicy>, ToolOutput> {
    let access = crate::file_access::policy(ctx)
        .map_err(|e| ToolOutput::error(format!("Search denied: {e}")))?;
    match access.check_read(root) {
        Some(refusal) => Err(ToolOutput::error(refusal.message("Search", shown_root))),
        None => Ok(access),
    }
}

/// What a search found, before paging.
enum Found {
    Files(Vec<(String, SystemTime)>),
    Content(ContentResults),
}

/// The search itself, in the task's environment when it has one, else on this machine.
fn run(
    remote: Option<&remote::Remote>,
    scope: &Scope<'_>,
    request: &Request,
) -> Result<Found, ToolOutput> {
    let pattern = &request.pattern;
    let in_env = |failure: remote_search::Failure| match failure {
        remote_search::Failure::Search(e) => search_error(e, pattern),
        remote_search::Failure::Env(e) => {
            ToolOutput::error(format!("Cannot search {}: {e}", scope.shown_root))
        }
    };
    let glob = request.file_glob.as_deref();
    match (request.target, remote) {
        (SearchTarget::Files, Some(remote)) => remote_search::find_files(remote, scope, pattern)
            .map(Found::Files)
            .map_err(in_env),
        (SearchTarget::Files, None) => search::find_files(scope, pattern)
            .map(Found::Files)
            .map_err(|e| search_error(e, pattern)),
        (SearchTarget::Content, Some(remote)) => {
            remote_search::search_content(remote, scope, pattern, glob, request.context)
                .map(Found::Content)
                .map_err(in_env)
        }
        (SearchTarget::Content, None) => {
            // The list of matching files needs one match a file.
            let first_only = request.output_mode == OutputMode::FilesOnly;
            // The walk goes as far as the page and one result more, which tells
            // whether more follow, in the page's unit: matches, or files.
            let past_page = request
                .offset
                .saturating_add(request.limit)
                .saturating_add(1);
            let cap = match request.output_mode {
                OutputMode::Content => Cap::matches(past_page),
                OutputMode::FilesOnly | OutputMode::Count => Cap::files(past_page),
            };
            search::search_content(scope, pattern, glob, request.context, first_only, cap)
                .map(Found::Content)
                .map_err(|e| search_error(e, pattern))
        }
    }
}

/// The page of `found` the request asks for, with the total, the hints and, when more
/// results follow, the line that says how to get them.
fn page(found: Found, request: &Request, streak: u32) -> ToolOutput {
    let offset = request.offset;
    let mut result = Map::new();
    let (total, shown) = match found {
        Found::Files(found) => paths_page(found, request, &mut result),
        Found::Content(found) => content_page(found, request, &mut result),
    };
    let of_total = if result.contains_key("total_count_is_lower_bound") {
        format!("at least {total}")
    } else {
        total.to_string()
    };
    let truncated = offset + shown < total;
    if truncated {
        result.insert("truncated".into(), json!(true));
    }
    if total == 0 {
        result.insert(
            "hint".into(),
            json!(match request.target {
                SearchTarget::Files => "No file name matched. Try a looser glob such as `*name*`, or another path.",
                SearchTarget::Content => "No line matched. Check the regex, widen path or file_glob, or try target \"files\".",
            }),
        );
    } else if shown == 0 {
        result.insert(
            "hint".into(),
            json!(format!(
                "offset {offset} is past the last of {of_total} results."
            )),
        );
    }
    if streak == WARN_AT {
        result.insert(
            "_warning".into(),
            json!(format!(
                "You have run this exact search {streak} times in a row. The next identical search will be refused."
            )),
        );
    }
    let mut text = Value::Object(result).to_string();
    if truncated {
        let unit = if request.target == SearchTarget::Content
            && request.output_mode != OutputMode::Content
        {
            "files"
        } else {
            "results"
        };
        text.push_str(&format!(
            "\n\n[Showing {unit} {}-{} of {of_total}. Use offset={} to see more.]",
            offset + 1,
            offset + shown,
            offset + shown
        ));
    }
    ToolOutput::Text(text)
}

/// A content search's page into `result` in the requested output mode: the total it
/// pages over and how many it shows.
fn content_page(
    found: ContentResults,
    request: &Request,
    result: &mut Map<String, Value>,
) -> (usize, usize) {
    let (offset, limit) = (request.offset, request.limit);
    if found.lower_bound {
        result.insert("total_count_is_lower_bound".into(), json!(true));
    }
    match request.output_mode {
        OutputMode::Content => {
            let total = found.hits.len();
            let page: Vec<Value> = found
                .hits
                .into_iter()
                .skip(offset)
                .take(limit)
                .map(|hit| {
                    let mut item =
                        json!({"path": hit.path, "line": hit.line, "content": hit.content});
                    if !hit.before.is_empty() {
                        item["before"] = context_lines(hit.before);
                    }
                    if !hit.after.is_empty() {
                        item["after"] = context_lines(hit.after);
                    }
                    item
                })
                .collect();
            let shown = page.len();
            result.insert("total_count".into(), json!(total));
            result.insert("matches".into(), Value::Array(page));
            (total, shown)
        }
        OutputMode::FilesOnly => paths_page(found.files, request, result),
        OutputMode::Count => {
            let matches: u64 = found.files.iter().map(|(_, n)| n).sum();
            let total = found.files.len();
            let mut counts = Map::new();
            for (p, n) in found.files.into_iter().skip(offset).take(limit) {
                counts.insert(p, json!(n));
            }
            let shown = counts.len();
            result.insert("total_count".into(), json!(matches));
            result.insert("files_with_matches".into(), json!(total));
            result.insert("counts".into(), Value::Object(counts));
            (total, shown)
        }
    }
}

/// A page of paths (each with what was found for it) into `result` as `files`: the
/// total it pages over and how many it shows.
fn paths_page<T>(
    found: Vec<(String, T)>,
    request: &Request,
    result: &mut Map<String, Value>,
) -> (usize, usize) {
    let total = found.len();
    let page: Vec<String> = found
        .into_iter()
        .skip(request.offset)
        .take(request.limit)
        .map(|(p, _)| p)
        .collect();
    let shown = page.len();
    result.insert("total_count".into(), json!(total));
    result.insert("files".into(), json!(page));
    (total, shown)
}

fn context_lines(lines: Vec<(u64, String)>) -> Value {
    Value::Array(
        lines
            .into_iter()
            .map(|(line, content)| json!({"line": line, "content": content}))
            .collect(),
    )
}

fn search_error(error: SearchError, pattern: &str) -> ToolOutput {
    match error {
        SearchError::BadPattern(why) => error_with(
            format!("Invalid regex pattern `{pattern}`: {why}"),
            &[(
                "hint",
                json!("Escape regex characters such as ( ) [ ] { } . * + ? | \\ with a backslash to match them literally."),
            )],
        ),
        SearchError::PatternTooLarge => error_with(
            format!(
                "Regex pattern is too large: it compiles to more than {} MB. Use a shorter pattern or smaller repetition counts.",
                search::MAX_REGEX_BYTES >> 20
            ),
            &[("hint", json!("Replace large `{n}` repetitions with `+` or `*`, or search for a shorter distinctive piece."))],
        ),
        SearchError::BadGlob(why) => ToolOutput::error(why),
        SearchError::Cancelled => ToolOutput::error("search cancelled"),
    }
}
