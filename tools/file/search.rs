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
    /// The search stopped before the end (at its cap, or at [`MAX_COLLECTED`] matches):
    /// more matches may exist.
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
    /// name, byte for byte), up to the find at which `cap` is reached (by the finds'
    /// weights or by their number), and whether anything after that find was left out
    /// (a find dropped, a file or folder not visited). `state` makes each thread's own
    /// state.
    ///
    /// The result is the one a walk on one thread in that order would give: once the
    /// cap is reached, the files after the one it was reached at are not visited, and
    /// what was found in them before is dropped.
    fn collect<T: Send, S: Send>(
        &self,
        real_root: &Path,
        cap: Cap,
        state: impl Fn() -> S + Sync,
        visit: impl Fn(&mut S, &Path) -> Option<(T, usize)> + Sync,
    ) -> Result<(Vec<(PathBuf, T)>, bool), SearchError> {
        // The places a file of this walk could fall in, known before it starts: the
        // deny-read places inside the root (or around it), and the device and kernel
        // trees when the root holds them. Usually none, and no file needs a check.
        let denied: Vec<&ProtectedPlace> = self
            .access
            .iter()
            .flat_map(|access| access.deny_read())
            .filter(|place| place.path.starts_with(real_root) || real_root.starts_with(&place.path))
            .collect();
        let devices = ["/dev", "/proc", "/sys"]
            .iter()
            .any(|root| Path::new(root).starts_with(real_root) || real_root.starts_with(root));
        let frontier = Mutex::new(Frontier::new(cap));
        let capped = AtomicBool::new(false);
        let passed = AtomicBool::new(false);
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
            let (frontier, capped, passed) = (&frontier, &capped, &passed);
            let (cancelled, found) = (&cancelled, &found);
            let (visit, denied) = (&visit, &denied);
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
                    passed.store(true, Ordering::Relaxed);
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
                    if weight > 0 && lock(frontier).add(entry.path(), weight) {
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
        let all = found.len();
        found.retain(|(path, _)| !frontier.is_past(path));
        found.sort_by(|a, b| a.0.cmp(&b.0));
        let left_out = passed.into_inner() || frontier.dropped || found.len() < all;
        Ok((found, left_out))
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// Where a walk may stop: once the finds before a file weigh `weight` in all, or
/// number `finds`.
#[derive(Clone, Copy)]
pub struct Cap {
    weight: usize,
    finds: usize,
}

impl Cap {
    /// Every find, up to [`MAX_COLLECTED`] matches.
    pub const ALL: Cap = Cap {
        weight: MAX_COLLECTED,
        finds: usize::MAX,
    };

    /// Up to the file at which `count` matches are found.
    pub fn matches(count: usize) -> Cap {
        Cap {
            weight: count.clamp(1, MAX_COLLECTED),
            finds: usize::MAX,
        }
    }

    /// Up to the `count`th file with a match (and no more than [`MAX_COLLECTED`]
    /// matches).
    pub fn files(count: usize) -> Cap {
        Cap {
            finds: count.max(1),
            ..Cap::ALL
        }
    }
}

/// The weighted finds of a capped walk so far, in walk order, and once they reach the
/// cap, the file they reach it at: nothing after it can count.
struct Frontier {
    cap: Cap,
    weights: BTreeMap<PathBuf, usize>,
    total: usize,
    bound: Option<PathBuf>,
    /// A find came after the bound, or was dropped when the bound moved before it.
    dropped: bool,
}

impl Frontier {
    fn new(cap: Cap) -> Frontier {
        Frontier {
            cap,
            weights: BTreeMap::new(),
            total: 0,
            bound: None,
            dropped: false,
        }
    }

    /// Whether `path` (a file or a folder) comes after the file the cap was reached at.
    fn is_past(&self, path: &Path) -> bool {
        self.bound.as_deref().is_some_and(|bound| path > bound)
    }

    fn reached(&self, total: usize, finds: usize) -> bool {
        total >= self.cap.weight || finds >= self.cap.finds
    }

    /// Records a find; true once the cap is reached.
    fn add(&mut self, path: &Path, weight: usize) -> bool {
        if self.is_past(path) {
            self.dropped = true;
            return true;
        }
        self.weights.insert(path.to_path_buf(), weight);
        self.total += weight;
        // Paths order as the walk visits them (by component, each level by name): the
        // finds at the end go while those before them still reach the cap.
        while let Some((_, &last)) = self.weights.last_key_value() {
            if !self.reached(self.total - last, self.weights.len() - 1) {
                break;
            }
            self.weights.pop_last();
            self.total -= last;
            self.dropped = true;
        }
        if self.reached(self.total, self.weights.len()) {
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
    let real_root = hermes_runtime::protected_paths::resolve(&scope.root);
    // Newest first needs every match: the walk stops only at the most it collects.
    let (files, _) = scope.collect(
        &real_root,
        Cap::ALL,
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
/// those whose name matches `file_glob`), with `context` lines around each, in walk
/// order up to the file at which `cap` is reached. With `first_only`, each file is
/// searched up to its first match (for the list of files that match: their hits and
/// counts are then one each).
pub fn search_content(
    scope: &Scope<'_>,
    pattern: &str,
    file_glob: Option<&str>,
    context: usize,
    first_only: bool,
    cap: Cap,
) -> Result<ContentResults, SearchError> {
    let matcher = matcher(pattern)?;
    let glob = file_glob
        .filter(|g| !g.trim().is_empty())
        .map(NameGlob::new)
        .transpose()?;
    let per_file_cap = if first_only { 1 } else { MAX_COLLECTED };
    let real_root = hermes_runtime::protected_paths::resolve(&scope.root);
    let opener = Opener::new(&scope.root, &real_root);
    let reading = || Reading {
        searcher: SearcherBuilder::new()
            .line_number(true)
            .binary_detection(BinaryDetection::quit(b'\x00'))
            .before_context(context)
            .after_context(context)
            .build(),
        filesystems: Vec::new(),
        head: vec![0; HEAD_BYTES + 1].into_boxed_slice(),
    };
    let (files, left_out) = scope.collect(&real_root, cap, reading, |reading, path| {
        if let Some(glob) = &glob {
            if !glob.matches(scope.relative_for_glob(path)) {
                return None;
            }
        }
        let mut sink = Collector {
            hits: Vec::new(),
            pending: Vec::new(),
            cap: per_file_cap,
        };
        // Devices, FIFOs and kernel files are never read, and skipped; so are
        // unreadable files (permissions, vanished), as ripgrep does.
        if !opener.search(reading, path, scope.relative(path), &matcher, &mut sink)
            || sink.hits.is_empty()
        {
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
        lower_bound: left_out,
    };
    for (_, (shown, mut hits)) in files {
        let room = MAX_COLLECTED - results.hits.len();
        let full = hits.len() >= room;
        if full {
            hits.truncate(room);
            if let Some(last) = hits.last_mut() {
                last.after.clear();
            }
            results.lower_bound = true;
        }
        results.files.push((shown, hits.len() as u64));
        results.hits.append(&mut hits);
        if full {
            break;
        }
    }
    Ok(results)
}

/// Bytes of a file read before it is searched: a file that fits is searched in memory
/// (as ripgrep searches a memory map: binary when a NUL is among its first
/// [`HEAD_BYTES`]), a longer one streamed on from there. The searcher's own buffer.
const HEAD_BYTES: usize = 64 << 10;

/// What one walking thread keeps from file to file.
struct Reading {
    searcher: grep_searcher::Searcher,
    /// [`super::paths::open_walked`]'s answers: for each device, whether the kernel
    /// synthesises its files.
    filesystems: Vec<(u64, bool)>,
    /// The first [`HEAD_BYTES`] of the file (and one more, to tell whether it ends there).
    head: Box<[u8]>,
}

/// Opens the files of a walk for reading below its root, in two system calls a file
/// where [`super::paths::open_walked`] takes four, with the same promise: nothing but
/// a regular file on an ordinary filesystem is ever read, and nothing blocks.
///
/// A file is opened with `openat2` beneath a descriptor of the root (the one the
/// policy's places were checked against), on the relative path the walk found it at,
/// with no symlink followed on the way (`RESOLVE_NO_SYMLINKS`: a folder swapped for a
/// link to `/dev` or `/proc` mid-walk fails the open) and no mount point crossed
/// (`RESOLVE_NO_XDEV`: the file is on the root's own filesystem, whose kind is asked
/// once), non-blocking and without becoming a controlling terminal; `fstat` then
/// checks it is a regular file on that device before a byte is read. The walk saw a
/// regular file there, so only a device node put in its place between the walk's
/// `getdents` and the open (which takes the right to make device nodes) could be
/// opened, and it is closed unread. Anything else (another mount, another device, an
/// error, a kernel without `openat2`, a root that is a file) takes `open_walked`.
struct Opener {
    /// The root's descriptor and device, when files may be opened beneath it.
    root: Option<(std::os::fd::OwnedFd, u64)>,
    /// `openat2` refused as unknown (kernels before 5.6, a seccomp filter).
    unsupported: AtomicBool,
}

impl Opener {
    fn new(root: &Path, real_root: &Path) -> Opener {
        use rustix::fs::{Mode, OFlags};
        let opened = rustix::fs::open(
            root,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .ok()
        // The root the walk's places were checked against, not one swapped in since.
        .filter(|fd| hermes_runtime::access::fd_path(fd).as_deref() == Some(real_root))
        .and_then(|fd| {
            let dev = rustix::fs::fstat(&fd).ok()?.st_dev;
            Some((fd, dev))
        });
        Opener {
            root: opened,
            unsupported: AtomicBool::new(false),
        }
    }

    /// Searches the file at `path` (`relative` below the root) with `sink`; false when
    /// it is skipped (not a regular file on an ordinary filesystem, unreadable) or the
    /// search failed.
    fn search(
        &self,
        reading: &mut Reading,
        path: &Path,
        relative: &Path,
        matcher: &grep_regex::RegexMatcher,
        sink: &mut Collector,
    ) -> bool {
        let (mut file, size) = match self.open(relative, &reading.filesystems) {
            Beneath::Opened(file, size) => (file, Some(size)),
            Beneath::Skip => return false,
            Beneath::Elsewhere => match super::paths::open_walked(path, &mut reading.filesystems) {
                Some(file) => (file, None),
                None => return false,
            },
        };
        let Ok((len, whole)) = read_head(&mut file, size, &mut reading.head) else {
            return false;
        };
        let head = &reading.head[..len];
        let searched = if whole {
            drop(file);
            reading.searcher.search_slice(matcher, head, sink)
        } else {
            reading
                .searcher
                .search_reader(matcher, std::io::Read::chain(head, file), sink)
        };
        searched.is_ok()
    }

    fn open(&self, relative: &Path, filesystems: &[(u64, bool)]) -> Beneath {
        use rustix::fs::{FileType, Mode, OFlags, ResolveFlags};
        let Some((root, root_dev)) = &self.root else {
            return Beneath::Elsewhere;
        };
        // The root's filesystem not yet known as an ordinary one (`open_walked` asks),
        // or the root is the file itself.
        if !filesystems.contains(&(*root_dev, false))
            || relative.as_os_str().is_empty()
            || self.unsupported.load(Ordering::Relaxed)
        {
            return Beneath::Elsewhere;
        }
        let opened = rustix::fs::openat2(
            root,
            relative,
            OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
            ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_XDEV,
        );
        let fd = match opened {
            Ok(fd) => fd,
            Err(rustix::io::Errno::NOSYS | rustix::io::Errno::PERM) => {
                self.unsupported.store(true, Ordering::Relaxed);
                return Beneath::Elsewhere;
            }
            Err(_) => return Beneath::Elsewhere,
        };
        let Ok(stat) = rustix::fs::fstat(&fd) else {
            return Beneath::Skip;
        };
        if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
            return Beneath::Skip;
        }
        // Another device on the same mount (a btrfs subvolume): known, or asked.
        if stat.st_dev != *root_dev && !filesystems.contains(&(stat.st_dev, false)) {
            return Beneath::Elsewhere;
        }
        Beneath::Opened(std::fs::File::from(fd), stat.st_size as u64)
    }
}

/// Where a file of the walk was found, for [`Opener::open`].
enum Beneath {
    /// Open for reading, a regular file of this size on an ordinary filesystem.
    Opened(std::fs::File, u64),
    /// Not a regular file: skipped, never read.
    Skip,
    /// Not opened here: [`super::paths::open_walked`] decides.
    Elsewhere,
}

/// Reads the start of `file` into `head`: how many bytes, and whether that is all of it
/// (the end was read, or as many bytes as `size`, its size when opened, which spares
/// the read that would return nothing).
fn read_head(
    file: &mut std::fs::File,
    size: Option<u64>,
    head: &mut [u8],
) -> std::io::Result<(usize, bool)> {
    use std::io::Read;
    let mut len = 0;
    loop {
        match file.read(&mut head[len..]) {
            Ok(0) => return Ok((len, true)),
            Ok(n) => {
                len += n;
                if len == head.len() {
                    return Ok((len, false));
                }
                if size == Some(len as u64) {
                    return Ok((len, true));
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
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

    fn search_in(root: &Path, pattern: &str) -> Vec<(String, u64)> {
        let cancel = Cancellation::default();
        let scope = Scope {
            root: root.to_path_buf(),
            shown_root: ".".into(),
            cancel: &cancel,
            access: None,
        };
        let found = search_content(&scope, pattern, None, 0, false, Cap::ALL).unwrap();
        found.hits.into_iter().map(|h| (h.path, h.line)).collect()
    }

    #[test]
    fn files_longer_than_the_head_are_searched_to_their_end() {
        let dir = tempfile::tempdir().unwrap();
        let mut text = "x\n".repeat(HEAD_BYTES);
        text.push_str("needle at the end\n");
        std::fs::write(dir.path().join("long.txt"), &text).unwrap();
        // Exactly the head, and one byte more, with the match on their last line.
        let mut edge = "y".repeat(HEAD_BYTES - 7);
        edge.push_str("\nneedle");
        assert_eq!(edge.len(), HEAD_BYTES);
        std::fs::write(dir.path().join("edge.txt"), &edge).unwrap();
        std::fs::write(dir.path().join("edge1.txt"), format!("{edge}\n")).unwrap();
        std::fs::write(dir.path().join("short.txt"), "needle").unwrap();
        assert_eq!(
            search_in(dir.path(), "needle"),
            vec![
                ("edge.txt".to_string(), 2),
                ("edge1.txt".to_string(), 2),
                ("long.txt".to_string(), HEAD_BYTES as u64 + 1),
                ("short.txt".to_string(), 1),
            ]
        );
    }

    #[test]
    fn a_file_is_opened_beneath_the_root_only_without_symlinks_on_the_way() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir_all(root.join("real")).unwrap();
        std::fs::write(root.join("real/a.txt"), "a").unwrap();
        std::os::unix::fs::symlink(root.join("real"), root.join("link")).unwrap();
        let fifo = root.join("real/pipe");
        let c_fifo = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c_fifo.as_ptr(), 0o600) }, 0);
        let real_root = hermes_runtime::protected_paths::resolve(&root);
        let opener = Opener::new(&root, &real_root);
        let (_, dev) = opener.root.as_ref().expect("the root opens");
        // Until the root's filesystem is known to be ordinary, open_walked decides.
        assert!(matches!(
            opener.open(Path::new("real/a.txt"), &[]),
            Beneath::Elsewhere
        ));
        let known = [(*dev, false)];
        assert!(matches!(
            opener.open(Path::new("real/a.txt"), &known),
            Beneath::Opened(_, 1)
        ));
        // A folder that became a symlink is not followed; open_walked then decides.
        assert!(matches!(
            opener.open(Path::new("link/a.txt"), &known),
            Beneath::Elsewhere
        ));
        // A FIFO is opened without waiting for a writer, and never read.
        assert!(matches!(
            opener.open(Path::new("real/pipe"), &known),
            Beneath::Skip
        ));
        // On a kernel filesystem, nothing is opened here.
        assert!(matches!(
            opener.open(Path::new("real/a.txt"), &[(*dev, true)]),
            Beneath::Elsewhere
        ));
        // A root swapped since its places were checked is not opened beneath.
        assert!(Opener::new(&root, Path::new("/elsewhere")).root.is_none());
    }
}
