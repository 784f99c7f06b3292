//! search_files' engine: ripgrep's walker (.gitignore-aware, hidden files skipped),
//! searcher and regex matcher.

use grep_regex::RegexMatcherBuilder;
use grep_searcher::{
    BinaryDetection, SearcherBuilder, Sink, SinkContext, SinkContextKind, SinkMatch,
};
use hermes_runtime::context::Cancellation;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

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
    fn walk(&self) -> ignore::Walk {
        ignore::WalkBuilder::new(&self.root)
            .hidden(true)
            .git_ignore(true)
            .git_exclude(true)
            .ignore(true)
            .parents(true)
            // .gitignore counts even outside a git checkout: the task dir may not be one.
            .require_git(false)
            .sort_by_file_name(|a, b| a.cmp(b))
            .build()
    }

    /// Relative path under the root (empty when the root is the file itself).
    pub(super) fn relative<'p>(&self, path: &'p Path) -> &'p Path {
        path.strip_prefix(&self.root).unwrap_or(path)
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

    /// Files in the walk, as (full path, path relative to the root).
    fn files(&self) -> impl Iterator<Item = Result<PathBuf, SearchError>> + '_ {
        let real_root = match &self.access {
            Some(_) => hermes_runtime::protected_paths::resolve(&self.root),
            None => PathBuf::new(),
        };
        self.walk().filter_map(move |entry| {
            if self.cancel.is_cancelled() {
                return Some(Err(SearchError::Cancelled));
            }
            let entry = entry.ok()?;
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                return None;
            }
            if let Some(access) = &self.access {
                // The walk follows no symlink: below the real root, a path is real.
                let real = real_root.join(self.relative(entry.path()));
                if access.read_refusal(&real).is_some() {
                    return None;
                }
            }
            Some(Ok(entry.into_path()))
        })
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
    let mut found = Vec::new();
    for path in scope.files() {
        let path = path?;
        let relative = scope.relative(&path);
        let relative = if relative.as_os_str().is_empty() {
            path.file_name().map(Path::new).unwrap_or(&path)
        } else {
            relative
        };
        if glob.matches(relative) {
            let mtime = std::fs::metadata(&path)
                .and_then(|m| m.modified())
                .unwrap_or(SystemTime::UNIX_EPOCH);
            found.push((scope.shown(&path), mtime));
            if found.len() >= MAX_COLLECTED {
                break;
            }
        }
    }
    found.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    Ok(found)
}

/// Lines matching the regex `pattern` in the files under the scope (optionally only
/// those whose name matches `file_glob`), with `context` lines around each.
pub fn search_content(
    scope: &Scope<'_>,
    pattern: &str,
    file_glob: Option<&str>,
    context: usize,
) -> Result<ContentResults, SearchError> {
    let matcher = matcher(pattern)?;
    let glob = file_glob
        .filter(|g| !g.trim().is_empty())
        .map(NameGlob::new)
        .transpose()?;
    let mut searcher = SearcherBuilder::new()
        .line_number(true)
        .binary_detection(BinaryDetection::quit(b'\x00'))
        .before_context(context)
        .after_context(context)
        .build();
    let mut results = ContentResults {
        hits: Vec::new(),
        files: Vec::new(),
        lower_bound: false,
    };
    for path in scope.files() {
        let path = path?;
        if let Some(glob) = &glob {
            let relative = scope.relative(&path);
            let relative = if relative.as_os_str().is_empty() {
                path.file_name().map(Path::new).unwrap_or(&path)
            } else {
                relative
            };
            if !glob.matches(relative) {
                continue;
            }
        }
        // Devices, FIFOs and kernel files are never opened in a way that blocks, and
        // skipped; so are unreadable files (permissions, vanished), as ripgrep does.
        let Ok((file, _)) = super::paths::open_regular(&path) else {
            continue;
        };
        let shown = scope.shown(&path);
        let before_count = results.hits.len();
        let mut sink = Collector {
            path: &shown,
            hits: &mut results.hits,
            pending: Vec::new(),
        };
        if searcher.search_file(&matcher, &file, &mut sink).is_err() {
            results.hits.truncate(before_count);
            continue;
        }
        let count = (results.hits.len() - before_count) as u64;
        if count > 0 {
            results.files.push((shown, count));
        }
        if results.hits.len() >= MAX_COLLECTED {
            results.lower_bound = true;
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

struct Collector<'a> {
    path: &'a str,
    hits: &'a mut Vec<Hit>,
    pending: Vec<(u64, String)>,
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

impl Sink for Collector<'_> {
    type Error = std::io::Error;

    fn matched(
        &mut self,
        _searcher: &grep_searcher::Searcher,
        mat: &SinkMatch<'_>,
    ) -> Result<bool, Self::Error> {
        self.hits.push(Hit {
            path: self.path.to_string(),
            line: mat.line_number().unwrap_or(0),
            content: line_text(mat.bytes()),
            before: std::mem::take(&mut self.pending),
            after: Vec::new(),
        });
        Ok(self.hits.len() < MAX_COLLECTED)
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
                Some(hit) if hit.path == self.path => hit.after.push(line),
                _ => self.pending.push(line),
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
