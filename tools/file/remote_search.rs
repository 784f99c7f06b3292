//! search_files in the task's environment: `rg` (else GNU grep and find) runs there,
//! and its rows are shaped here into the results the local search gives: the same
//! pattern checks, glob rules, shown paths, context split and bounds.

use super::search::{self, ContentResults, Hit, NameGlob, Scope, SearchError, MAX_COLLECTED};
use hermes_environments::files::{parse_listing, Remote};
use std::path::Path;
use std::time::SystemTime;

/// Rows of grep output read at most (matches and context lines).
const MAX_ROWS: usize = MAX_COLLECTED * 4;

/// Why a search in the environment failed.
pub enum Failure {
    Search(SearchError),
    Env(String),
}

/// [`search::find_files`] in the environment.
pub fn find_files(
    remote: &Remote,
    scope: &Scope<'_>,
    pattern: &str,
) -> Result<Vec<(String, SystemTime)>, Failure> {
    let pattern = if pattern.contains(['*', '?', '[', '{']) {
        pattern.to_string()
    } else {
        format!("*{pattern}*")
    };
    let glob = NameGlob::new(&pattern).map_err(Failure::Search)?;
    let rows = remote
        .list_files(&scope.root.to_string_lossy(), MAX_ROWS)
        .map_err(Failure::Env)?;
    let mut found: Vec<(String, SystemTime)> = parse_listing(&rows)
        .into_iter()
        .filter(|(path, _)| glob.matches(scope.relative_for_glob(Path::new(path))))
        .take(MAX_COLLECTED)
        .map(|(path, mtime)| (scope.shown(Path::new(&path)), mtime))
        .collect();
    found.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    Ok(found)
}

/// [`search::search_content`] in the environment.
pub fn search_content(
    remote: &Remote,
    scope: &Scope<'_>,
    pattern: &str,
    file_glob: Option<&str>,
    context: usize,
) -> Result<ContentResults, Failure> {
    // The same refusals as on local, before anything runs there.
    search::matcher(pattern).map_err(Failure::Search)?;
    let glob = file_glob
        .filter(|g| !g.trim().is_empty())
        .map(NameGlob::new)
        .transpose()
        .map_err(Failure::Search)?;
    let rows = remote
        .grep(&scope.root.to_string_lossy(), pattern, context, MAX_ROWS)
        .map_err(Failure::Env)?;
    let mut results = ContentResults {
        hits: Vec::new(),
        files: Vec::new(),
        lower_bound: false,
    };
    let mut pending: Vec<(u64, String)> = Vec::new();
    let mut pending_path = String::new();
    for row in rows.split(|b| *b == b'\n') {
        // `path\0N:line` for a match, `path\0N-line` for context, `--` between groups.
        let Some(nul) = memchr::memchr(0, row) else {
            continue;
        };
        let path = String::from_utf8_lossy(&row[..nul]);
        // grep inside the root names files relative to it.
        let path = if path.starts_with('/') {
            path.into_owned()
        } else {
            scope.root.join(&*path).to_string_lossy().into_owned()
        };
        let rest = &row[nul + 1..];
        let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        let Ok(line) = std::str::from_utf8(&rest[..digits])
            .unwrap_or("")
            .parse::<u64>()
        else {
            continue;
        };
        let Some(&kind) = rest.get(digits) else {
            continue;
        };
        if let Some(glob) = &glob {
            if !glob.matches(scope.relative_for_glob(Path::new(&path))) {
                continue;
            }
        }
        let shown = scope.shown(Path::new(&path));
        let text = search::line_text(&rest[digits + 1..]);
        if pending_path != shown {
            pending.clear();
            pending_path = shown.clone();
        }
        match kind {
            b':' => {
                if results.hits.len() >= MAX_COLLECTED {
                    results.lower_bound = true;
                    break;
                }
                match results.files.last_mut() {
                    Some((file, count)) if *file == shown => *count += 1,
                    _ => results.files.push((shown.clone(), 1)),
                }
                results.hits.push(Hit {
                    path: shown,
                    line,
                    content: text,
                    before: std::mem::take(&mut pending),
                    after: Vec::new(),
                });
            }
            b'-' => match results.hits.last_mut() {
                // Within the previous match's after-context: its line, as the local searcher reports it.
                Some(hit)
                    if hit.path == shown
                        && line <= hit.line + context as u64
                        && hit.after.len() < context =>
                {
                    hit.after.push((line, text))
                }
                _ => pending.push((line, text)),
            },
            _ => {}
        }
    }
    if rows.iter().filter(|b| **b == b'\n').count() >= MAX_ROWS {
        results.lower_bound = true;
    }
    Ok(results)
}
