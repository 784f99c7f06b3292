//! search_files' engine: ripgrep's walker (.gitignore-aware, hidden files skipped) on
//! as many threads as the machine has, its searcher and its regex matcher; results in
//! the walk's sorted order whatever thread found them.

use grep_regex::RegexMatcherBuilder;
use grep_searcher::{
    BinaryDetection, SearcherBuilder, Sink, SinkContext, SinkContextKind, SinkMatch,
};
use hermes_runtime::context::Cancellation;
use ignore::WalkState;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::SystemTime;

use crate::file_access::under_device_roots;
use hermes_runtime::protected_paths::ProtectedPlace;

/// Most matches collected before the walk stops (the count is then a lower bound).
pub const MAX_COLLECTED: usize = 10_000;
/// Longest matched line shown before it is clipped.
pub const MAX_MATCH_LINE_CHARS: usize = 500;
/// Compiled size of a pattern, and memory of its lazy DFA: a pattern such as
/// `[\s\S]{65535}` would otherwise take seconds and a gigabyte to build.
pub const MAX_REGEX_BYTES: usize = 8 << 20;
pub const MAX_DFA_BYTES: usize = 32 << 20;

pub struct Scope<'a> {
    /// Where the search starts (a directory or one file).
    pub root: PathBuf,
    /// `root` as the caller wrote it, prefixed to every result path.
    pub shown_root: String,
    pub cancel: &'a Cancellation,
    /// The access policy on this machine: files on its deny-read list are skipped.
    pub access: Option<std::sync::Arc<hermes_runtime::access::AccessPolicy>>,
}

#[derive(Debug)]
pub enum SearchError {
    BadPattern(String),
    /// The pattern compiles to more than [`MAX_REGEX_BYTES`].
    PatternTooLarge,
    BadGlob(String),
    Cancelled,
}

pub struct Hit {
    pub path: String,
    pub line: u64,
    pub content: String,
    pub before: Vec<(u64, String)>,
    pub after: Vec<(u64, String)>,
}

pub struct ContentResults {
    pub hits: Vec<Hit>,
    /// Files with matches, in walk order, with their match counts.
    pub files: Vec<(String, u64)>,
    /// Stopped at [`MAX_COLLECTED`]: more matches may exist.
    pub lower_bound: bool,
}

/// A glob that matches file names, or relative paths when it contains `/`.
pub(super) struct NameGlob {
    matcher: globset::GlobMatcher,
    on_path: bool,
}

impl NameGlob {
    pub(super) fn new(pattern: &str) -> Result<NameGlob, SearchError> {
        let glob = globset::GlobBuilder::new(pattern)
            .literal_separator(true)
            .build()
            .map_err(|e| SearchError::BadGlob(format!("invalid glob `{pattern}`: {e}")))?;
        Ok(NameGlob {
            matcher: glob.compile_matcher(),
            on_path: pattern.contains('/'),
        })
    }

    pub(super) fn matches(&self, relative: &Path) -> bool {
        if self.on_path {
            self.matcher.is_match(relative)
        } else {
            relative
                .file_name()
                .is_some_and(|name| self.matcher.is_match(name))
        }
    }
}

impl Scope<'_> {
    /// Relative path under the root (empty when the root is the file itself).
    pub(super) fn relative<'p>(&self, path: &'p Path) -> &'p Path {
        path.strip_prefix(&self.root).unwrap_or(path)
    }

    /// The path the glob rules see: relative to the root, or the file name when the
    /// root is the file itself.
    pub(super) fn relative_for_glob<'p>(&self, path: &'p Path) -> &'p Path {
        let relative = self.relative(path);
        if relative.as_os_str().is_empty() {
            path.file_name().map(Path::new).unwrap_or(path)
        } else {
            relative
        }
    }

    pub(super) fn shown(&self, path: &Path) -> String {
        let relative = self.relative(path);
        if relative.as_os_str().is_empty() {
            return self.shown_root.clone();
        }
        let root = self.shown_root.trim_end_matches('/');
        if root.is_empty() || root == "." {
            relative.to_string_lossy().into_owned()
        } else {
            format!("{root}/{}", relative.to_string_lossy())
        }
    }

    /// Runs `visit` on every file of the walk (.gitignore-aware, hidden files skipped,
    /// no symlink followed, the deny-read list applied) on as many threads as the
    /// machine has, and returns what it found, in walk order (each folder's entries by
    /// name, byte for byte), up to the file at which the weights of the finds reach
    /// `cap`; the flag says whether they did. `state` makes each thread's own state.
    ///
    /// The result is the one a walk on one thread in that order would give: once the
    /// cap is reached, the files after the one it was reached at are not visited, and
    /// what was found in them before is dropped.
    fn collect<T: Send, S: Send>(
        &self,
        cap: usize,
        state: impl Fn() -> S + Sync,
        visit: impl Fn(&mut S, &Path) -> Option<(T, usize)> + Sync,
    ) -> Result<(Vec<(PathBuf, T)>, bool), SearchError> {
        let real_root = hermes_runtime::protected_paths::resolve(&self.root);
        // The places a file of this walk could fall in, known before it starts: the
        // deny-read places inside the root (or around it), and the device and kernel
        // trees when the root holds them. Usually none, and no file needs a check.
        let denied: Vec<&ProtectedPlace> = self
            .access
            .iter()
            .flat_map(|access| access.deny_read())
            .filter(|place| {
                place.path.starts_with(&real_root) || real_root.starts_with(&place.path)
            })
            .collect();
        let devices = ["/dev", "/proc", "/sys"]
            .iter()
            .any(|root| Path::new(root).starts_with(&real_root) || real_root.starts_with(root));
        let frontier = Mutex::new(Frontier::default());
        let capped = AtomicBool::new(false);
        let cancelled = AtomicBool::new(false);
        let found = Mutex::new(Vec::new());
        let walk = ignore::WalkBuilder::new(&self.root)
            .hidden(true)
            .git_ignore(true)
            .git_exclude(true)
            .ignore(true)
            .parents(true)
            // .gitignore counts even outside a git checkout: the task dir may not be one.
            .require_git(false)
            .build_parallel();
        walk.run(|| {
            let (frontier, capped, cancelled, found) = (&frontier, &capped, &cancelled, &found);
            let (visit, real_root, denied) = (&visit, &real_root, &denied);
            let mut thread_state = state();
            Box::new(move |entry| {
                if self.cancel.is_cancelled() {
                    cancelled.store(true, Ordering::Relaxed);
                    return WalkState::Quit;
                }
                let Ok(entry) = entry else {
                    return WalkState::Continue;
                };
                // Past the file the cap was reached at, nothing counts: not this entry,
                // and (for a folder) nothing below it either.
                if capped.load(Ordering::Relaxed) && lock(frontier).is_past(entry.path()) {
                    return WalkState::Skip;
                }
                if !entry.file_type().is_some_and(|t| t.is_file()) {
                    return WalkState::Continue;
                }
                if devices || !denied.is_empty() {
                    // The walk follows no symlink: below the real root, a path is real.
                    let real = real_root.join(self.relative(entry.path()));
                    if (devices && under_device_roots(&real))
                        || denied.iter().any(|place| place.covers(&real))
                    {
                        return WalkState::Continue;
                    }
                }
                if let Some((value, weight)) = visit(&mut thread_state, entry.path()) {
                    if weight > 0 && lock(frontier).add(entry.path(), weight, cap) {
                        capped.store(true, Ordering::Relaxed);
                    }
                    lock(found).push((entry.into_path(), value));
                }
                WalkState::Continue
            })
        });
        if cancelled.load(Ordering::Relaxed) {
            return Err(SearchError::Cancelled);
        }
        let mut found = found.into_inner().unwrap_or_else(|p| p.into_inner());
        let frontier = frontier.into_inner().unwrap_or_else(|p| p.into_inner());
        found.retain(|(path, _)| !frontier.is_past(path));
        found.sort_by(|a, b| a.0.cmp(&b.0));
        Ok((found, frontier.bound.is_some()))
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// The weighted finds of a capped walk so far, in walk order, and once their weights
/// reach the cap, the file they reach it at: nothing after it can count.
#[derive(Default)]
struct Frontier {
    weights: BTreeMap<PathBuf, usize>,
    total: usize,
    bound: Option<PathBuf>,
}

impl Frontier {
    /// Whether `path` (a file or a folder) comes after the file the cap was reached at.
    fn is_past(&self, path: &Path) -> bool {
        self.bound.as_deref().is_some_and(|bound| path > bound)
    }

    /// Records a find; true once the cap is reached.
    fn add(&mut self, path: &Path, weight: usize, cap: usize) -> bool {
        if self.is_past(path) {
            return true;
        }
        self.weights.insert(path.to_path_buf(), weight);
        self.total += weight;
        // Paths order as the walk visits them (by component, each level by name): the
        // finds at the end go while those before them still reach the cap.
        while let Some((_, &last)) = self.weights.last_key_value() {
            if self.total - last < cap {
                break;
            }
            self.weights.pop_last();
            self.total -= last;
        }
        if self.total >= cap {
            self.bound = self.weights.last_key_value().map(|(path, _)| path.clone());
        }
        self.bound.is_some()
    }
}

/// Files whose name (or relative path) matches `pattern`, newest first.
/// A pattern without glob characters matches names containing it.
pub fn find_files(
    scope: &Scope<'_>,
    pattern: &str,
) -> Result<Vec<(String, SystemTime)>, SearchError> {
    let pattern = if pattern.contains(['*', '?', '[', '{']) {
        pattern.to_string()
    } else {
        format!("*{pattern}*")
    };
    let glob = NameGlob::new(&pattern)?;
    let (files, _) = scope.collect(
        MAX_COLLECTED,
        || (),
        |_, path| {
            if !glob.matches(scope.relative_for_glob(path)) {
                return None;
            }
            let mtime = std::fs::metadata(path)
                .and_then(|m| m.modified())
                .unwrap_or(SystemTime::UNIX_EPOCH);
            Some((mtime, 1))
        },
    )?;
    let mut found: Vec<(String, SystemTime)> = files
        .into_iter()
        .map(|(path, mtime)| (scope.shown(&path), mtime))
        .collect();
    found.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    Ok(found)
}

/// Lines matching the regex `pattern` in the files under the scope (optionally only
/// those whose name matches `file_glob`), with `context` lines around each. With
/// `first_only`, each file is searched up to its first match (for the list of files
/// that match: their hits and counts are then one each).
pub fn search_content(
    scope: &Scope<'_>,
    pattern: &str,
    file_glob: Option<&str>,
    context: usize,
    first_only: bool,
) -> Result<ContentResults, SearchError> {
    let matcher = matcher(pattern)?;
    let glob = file_glob
        .filter(|g| !g.trim().is_empty())
        .map(NameGlob::new)
        .transpose()?;
    let per_file_cap = if first_only { 1 } else { MAX_COLLECTED };
    let searcher = || {
        let searcher = SearcherBuilder::new()
            .line_number(true)
            .binary_detection(BinaryDetection::quit(b'\x00'))
            .before_context(context)
            .after_context(context)
            .build();
        (searcher, Vec::new())
    };
    let (files, _) = scope.collect(MAX_COLLECTED, searcher, |(searcher, filesystems), path| {
        if let Some(glob) = &glob {
            if !glob.matches(scope.relative_for_glob(path)) {
                return None;
            }
        }
        // Devices, FIFOs and kernel files are never opened, and skipped; so are
        // unreadable files (permissions, vanished), as ripgrep does.
        let file = super::paths::open_walked(path, filesystems)?;
        let mut sink = Collector {
            hits: Vec::new(),
            pending: Vec::new(),
            cap: per_file_cap,
        };
        if searcher.search_file(&matcher, &file, &mut sink).is_err() || sink.hits.is_empty() {
            return None;
        }
        // Most files have no match: their shown path is never made.
        let shown = scope.shown(path);
        let mut hits = sink.hits;
        for hit in &mut hits {
            hit.path.clone_from(&shown);
        }
        let weight = hits.len();
        Some(((shown, hits), weight))
    })?;
    // The files in walk order, cut where the matches reach the cap, as a walk on one
    // thread that stopped there would have them: the last match without the lines
    // after it.
    let mut results = ContentResults {
        hits: Vec::new(),
        files: Vec::new(),
        lower_bound: false,
    };
    for (_, (shown, mut hits)) in files {
        let room = MAX_COLLECTED - results.hits.len();
        if hits.len() >= room {
            hits.truncate(room);
            if let Some(last) = hits.last_mut() {
                last.after.clear();
            }
            results.lower_bound = true;
        }
        results.files.push((shown, hits.len() as u64));
        results.hits.append(&mut hits);
        if results.lower_bound {
            break;
        }
    }
    Ok(results)
}

/// The compiled `pattern`, or why it is refused.
pub(super) fn matcher(pattern: &str) -> Result<grep_regex::RegexMatcher, SearchError> {
    RegexMatcherBuilder::new()
        .size_limit(MAX_REGEX_BYTES)
        .dfa_size_limit(MAX_DFA_BYTES)
        .build(pattern)
        .map_err(|e| {
            // grep-regex reports every refusal as text; the regex crate under it says
            // by its error's kind whether the size was the reason.
            let too_big = matches!(
                regex::RegexBuilder::new(pattern)
                    .size_limit(MAX_REGEX_BYTES)
                    .dfa_size_limit(MAX_DFA_BYTES)
                    .build(),
                Err(regex::Error::CompiledTooBig(_))
            );
            if too_big {
                SearchError::PatternTooLarge
            } else {
                SearchError::BadPattern(e.to_string())
            }
        })
}

/// The matches of one file, with their context lines, up to `cap` (their `path` is
/// filled in afterwards).
struct Collector {
    hits: Vec<Hit>,
    pending: Vec<(u64, String)>,
    cap: usize,
}

pub(super) fn line_text(bytes: &[u8]) -> String {
    let mut bytes = bytes;
    while let Some(rest) = bytes
        .strip_suffix(b"\n")
        .or_else(|| bytes.strip_suffix(b"\r"))
    {
        bytes = rest;
    }
    let text = String::from_utf8_lossy(bytes);
    match text.char_indices().nth(MAX_MATCH_LINE_CHARS) {
        Some((cut, _)) => format!("{}{}", &text[..cut], super::read::LINE_CLIP_MARKER),
        None => text.into_owned(),
    }
}

impl Sink for Collector {
    type Error = std::io::Error;

    fn matched(
        &mut self,
        _searcher: &grep_searcher::Searcher,
        mat: &SinkMatch<'_>,
    ) -> Result<bool, Self::Error> {
        self.hits.push(Hit {
            path: String::new(),
            line: mat.line_number().unwrap_or(0),
            content: line_text(mat.bytes()),
            before: std::mem::take(&mut self.pending),
            after: Vec::new(),
        });
        Ok(self.hits.len() < self.cap)
    }

    fn context(
        &mut self,
        _searcher: &grep_searcher::Searcher,
        context: &SinkContext<'_>,
    ) -> Result<bool, Self::Error> {
        let line = (
            context.line_number().unwrap_or(0),
            line_text(context.bytes()),
        );
        match context.kind() {
            SinkContextKind::Before => self.pending.push(line),
            SinkContextKind::After => match self.hits.last_mut() {
                Some(hit) => hit.after.push(line),
                None => self.pending.push(line),
            },
            SinkContextKind::Other => {}
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pattern_too_large_is_told_apart_from_a_bad_one() {
        assert!(matches!(
            matcher(r"\w{1000}{1000}"),
            Err(SearchError::PatternTooLarge)
        ));
        assert!(matches!(
            matcher("(unclosed"),
            Err(SearchError::BadPattern(_))
        ));
        assert!(matcher(r"fn \w+\(").is_ok());
    }
}
