//! Two small stores of notes that outlive a session: `MEMORY.md` (the agent's own
//! notes) and `USER.md` (what it knows about its user), under `$HERMES_HOME/memories/`.
//!
//! Entries are separated by a line holding only `§`. Every change takes an exclusive
//! `flock` on `memories/.lock`, re-reads the file under the lock, applies the whole
//! batch, checks the budget on the result and replaces the file atomically (temp file,
//! fsync, rename, fsync of the folder). So two sessions (threads or processes) writing
//! at once never lose each other's entries, and a reader never sees half a file.
//!
//! The snapshot taken when the session opens goes into its system prompt and does not
//! change for the rest of the session; writes reach the disk at once.

use serde_json::{json, Value};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

pub const SEPARATOR: &str = "§";
pub const MEMORY_LIMIT: usize = 2200;
pub const USER_LIMIT: usize = 1375;
/// Failed writes for lack of room after which the result tells the model to stop.
const MAX_BUDGET_FAILURES: u32 = 3;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryTarget {
    Memory,
    User,
}

impl MemoryTarget {
    pub fn parse(text: &str) -> Option<MemoryTarget> {
        match text.trim().to_ascii_lowercase().as_str() {
            "memory" => Some(MemoryTarget::Memory),
            "user" => Some(MemoryTarget::User),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            MemoryTarget::Memory => "memory",
            MemoryTarget::User => "user",
        }
    }

    pub fn file_name(self) -> &'static str {
        match self {
            MemoryTarget::Memory => "MEMORY.md",
            MemoryTarget::User => "USER.md",
        }
    }

    pub fn limit(self) -> usize {
        match self {
            MemoryTarget::Memory => MEMORY_LIMIT,
            MemoryTarget::User => USER_LIMIT,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryAction {
    Add,
    Replace,
    Remove,
}

impl MemoryAction {
    pub fn parse(text: &str) -> Option<MemoryAction> {
        match text.trim().to_ascii_lowercase().as_str() {
            "add" => Some(MemoryAction::Add),
            "replace" => Some(MemoryAction::Replace),
            "remove" => Some(MemoryAction::Remove),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryOp {
    pub action: MemoryAction,
    pub content: Option<String>,
    pub old_text: Option<String>,
}

/// Both stores as they were when the session opened.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemorySnapshot {
    pub memory: Vec<String>,
    pub user: Vec<String>,
}

impl MemorySnapshot {
    /// The block for the system prompt; `None` when both stores are empty.
    pub fn prompt_block(&self) -> Option<String> {
        if self.memory.is_empty() && self.user.is_empty() {
            return None;
        }
        let mut out = String::new();
        for (target, entries) in [
            (MemoryTarget::Memory, &self.memory),
            (MemoryTarget::User, &self.user),
        ] {
            if entries.is_empty() {
                continue;
            }
            let title = match target {
                MemoryTarget::Memory => "MEMORY (your notes from earlier sessions)",
                MemoryTarget::User => "USER PROFILE (what you know about the user)",
            };
            out.push_str(&format!(
                "{title} [{}]\n",
                usage_text(joined_len(entries), target.limit())
            ));
            for entry in entries {
                let shown = if looks_injected(entry) {
                    "[BLOCKED: this entry looks like an injected instruction and is not shown]"
                        .to_string()
                } else {
                    entry.clone()
                };
                out.push_str(&shown);
                out.push_str(&format!("\n{SEPARATOR}\n"));
            }
        }
        Some(
            out.trim_end()
                .trim_end_matches(SEPARATOR)
                .trim_end()
                .to_string(),
        )
    }
}

pub struct MemoryStore {
    dir: PathBuf,
    snapshot: MemorySnapshot,
    read_only: bool,
    budget_failures: AtomicU32,
}

impl MemoryStore {
    /// Opens `<hermes_home>/memories` and freezes the snapshot.
    pub fn open(hermes_home: &Path) -> MemoryStore {
        MemoryStore::open_dir(hermes_home.join("memories"))
    }

    pub fn open_dir(dir: PathBuf) -> MemoryStore {
        let snapshot = MemorySnapshot {
            memory: read_entries(&dir.join(MemoryTarget::Memory.file_name())).unwrap_or_default(),
            user: read_entries(&dir.join(MemoryTarget::User.file_name())).unwrap_or_default(),
        };
        MemoryStore {
            dir,
            snapshot,
            read_only: false,
            budget_failures: AtomicU32::new(0),
        }
    }

    /// A store that refuses writes (for child agents).
    pub fn read_only(mut self) -> MemoryStore {
        self.read_only = true;
        self
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn snapshot(&self) -> &MemorySnapshot {
        &self.snapshot
    }

    /// The entries on disk now.
    pub fn entries(&self, target: MemoryTarget) -> Vec<String> {
        read_entries(&self.dir.join(target.file_name())).unwrap_or_default()
    }

    /// Applies `ops` to `target` as one change: all of them or none.
    pub fn apply(&self, target: MemoryTarget, ops: &[MemoryOp]) -> Value {
        if self.read_only {
            return json!({"success": false, "error": "memory is read-only in this session (a delegated sub-agent cannot write memory); report what should be remembered in your summary instead"});
        }
        if ops.is_empty() {
            return json!({"success": false, "error": "nothing to do: give `action` with `content`/`old_text`, or a non-empty `operations` list"});
        }
        match self.apply_locked(target, ops) {
            Ok(result) => result,
            Err(e) => {
                json!({"success": false, "error": format!("memory could not be written: {e}")})
            }
        }
    }

    fn apply_locked(&self, target: MemoryTarget, ops: &[MemoryOp]) -> std::io::Result<Value> {
        std::fs::create_dir_all(&self.dir)?;
        let _lock = FileLock::exclusive(&self.dir.join(".lock"))?;
        let path = self.dir.join(target.file_name());
        let before = read_entries(&path)?;
        let mut entries = before.clone();
        let mut messages = Vec::new();
        for (index, op) in ops.iter().enumerate() {
            let prefix = if ops.len() > 1 {
                format!("operation {index}: ")
            } else {
                String::new()
            };
            match apply_one(&mut entries, op) {
                Ok(message) => messages.push(message),
                Err(mut failure) => {
                    failure.error = format!(
                        "{prefix}{}{}",
                        failure.error,
                        if ops.len() > 1 {
                            " Nothing was changed."
                        } else {
                            ""
                        }
                    );
                    return Ok(failure.into_value(&before, target));
                }
            }
        }
        let used = joined_len(&entries);
        if used > target.limit() {
            let failures = self.budget_failures.fetch_add(1, Ordering::SeqCst) + 1;
            let mut out = json!({
                "success": false,
                "error": format!(
                    "{} memory is full: this change would use {used} of {} characters. Nothing was changed. Remove or shorten entries (replace several with one summary) and try again.",
                    target.as_str(), target.limit()
                ),
                "usage": usage_text(joined_len(&before), target.limit()),
                "current_entries": before,
            });
            if failures >= MAX_BUDGET_FAILURES {
                out["error"] = json!(format!(
                    "{} Writes to memory have failed {failures} times for lack of room: STOP retrying memory now and go on with the task.",
                    out["error"].as_str().unwrap_or_default()
                ));
            }
            return Ok(out);
        }
        if entries != before {
            write_entries_atomically(&path, &entries)?;
        }
        Ok(json!({
            "success": true,
            "done": true,
            "target": target.as_str(),
            "usage": usage_text(used, target.limit()),
            "entry_count": entries.len(),
            "message": messages.join(" "),
            "note": "The write is complete and saved; do not repeat it. It shows in the memory block of the next session's prompt, not this one's.",
        }))
    }
}

struct Failure {
    error: String,
    matches: Option<Vec<String>>,
}

impl Failure {
    fn new(error: impl Into<String>) -> Failure {
        Failure {
            error: error.into(),
            matches: None,
        }
    }

    fn into_value(self, entries: &[String], target: MemoryTarget) -> Value {
        let mut out = json!({
            "success": false,
            "error": self.error,
            "usage": usage_text(joined_len(entries), target.limit()),
            "current_entries": entries,
        });
        if let Some(matches) = self.matches {
            out["matches"] = json!(matches);
        }
        out
    }
}

fn apply_one(entries: &mut Vec<String>, op: &MemoryOp) -> Result<String, Failure> {
    let content = op
        .content
        .as_deref()
        .map(str::trim)
        .filter(|c| !c.is_empty());
    let old_text = op
        .old_text
        .as_deref()
        .map(str::trim)
        .filter(|c| !c.is_empty());
    if let Some(content) = content {
        if content.lines().any(|line| line.trim() == SEPARATOR) {
            return Err(Failure::new(format!("content must not contain a line holding only {SEPARATOR}: that line separates entries")));
        }
        if looks_injected(content) {
            return Err(Failure::new("content looks like an instruction to override your rules or leak secrets; it was not saved"));
        }
    }
    match op.action {
        MemoryAction::Add => {
            let content =
                content.ok_or_else(|| Failure::new("add needs `content`: the entry to save"))?;
            if entries.iter().any(|e| e == content) {
                return Ok("That entry was already saved; nothing added.".into());
            }
            entries.push(content.to_string());
            Ok("Entry added.".into())
        }
        MemoryAction::Replace | MemoryAction::Remove => {
            let verb = if op.action == MemoryAction::Replace {
                "replace"
            } else {
                "remove"
            };
            let old_text = old_text.ok_or_else(|| Failure::new(format!("{verb} needs `old_text`: a short piece of the entry that appears in no other entry")))?;
            let matches: Vec<usize> = entries
                .iter()
                .enumerate()
                .filter(|(_, e)| e.contains(old_text))
                .map(|(n, _)| n)
                .collect();
            let index = match matches.as_slice() {
                [] => return Err(Failure::new(format!("no entry contains {old_text:?}; check current_entries for the exact text"))),
                [one] => *one,
                [first, rest @ ..] if rest.iter().all(|n| entries[*n] == entries[*first]) => *first,
                several => {
                    return Err(Failure {
                        error: format!("{old_text:?} appears in {} entries; give a longer piece that only one contains", several.len()),
                        matches: Some(several.iter().map(|n| entries[*n].clone()).collect()),
                    })
                }
            };
            if op.action == MemoryAction::Remove {
                entries.remove(index);
                return Ok("Entry removed.".into());
            }
            let content = content.ok_or_else(|| {
                Failure::new("replace needs `content`: the new text of the entry")
            })?;
            entries[index] = content.to_string();
            Ok("Entry replaced.".into())
        }
    }
}

/// Characters the stored file spends on these entries (separators included).
pub fn joined_len(entries: &[String]) -> usize {
    let text: usize = entries.iter().map(|e| e.chars().count()).sum();
    text + entries.len().saturating_sub(1) * (SEPARATOR.chars().count() + 2)
}

pub fn usage_text(used: usize, limit: usize) -> String {
    let percent = (used * 100).checked_div(limit).unwrap_or(100);
    format!("{percent}% — {used}/{limit} chars")
}

pub fn parse_entries(text: &str) -> Vec<String> {
    let mut entries = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    for line in text.lines() {
        if line.trim() == SEPARATOR {
            entries.push(current.join("\n"));
            current.clear();
        } else {
            current.push(line);
        }
    }
    entries.push(current.join("\n"));
    entries
        .into_iter()
        .map(|e| e.trim().to_string())
        .filter(|e| !e.is_empty())
        .collect()
}

pub fn render_entries(entries: &[String]) -> String {
    if entries.is_empty() {
        return String::new();
    }
    format!("{}\n", entries.join(&format!("\n{SEPARATOR}\n")))
}

fn read_entries(path: &Path) -> std::io::Result<Vec<String>> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(parse_entries(&text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

/// Temp file beside the target, fsync, rename over it, fsync the folder.
pub fn write_entries_atomically(path: &Path, entries: &[String]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("memory");
    let temp = dir.join(
        format!(
            ".{name}.{}.{:?}.tmp",
            std::process::id(),
            std::thread::current().id()
        )
        .replace(['(', ')'], ""),
    );
    let result = (|| {
        let mut file = File::create(&temp)?;
        file.write_all(render_entries(entries).as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&temp, path)?;
        if let Ok(folder) = File::open(dir) {
            let _ = folder.sync_all();
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}

/// An exclusive `flock` held until dropped (closing the file releases it).
pub struct FileLock {
    _file: File,
}

impl FileLock {
    pub fn exclusive(path: &Path) -> std::io::Result<FileLock> {
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(path)?;
        lock_exclusive(&file)?;
        Ok(FileLock { _file: file })
    }
}

#[cfg(unix)]
fn lock_exclusive(file: &File) -> std::io::Result<()> {
    use std::os::unix::io::AsRawFd;
    loop {
        // SAFETY: flock on a descriptor this function borrows; no memory is shared.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
        if rc == 0 {
            return Ok(());
        }
        let error = std::io::Error::last_os_error();
        if error.kind() != std::io::ErrorKind::Interrupted {
            return Err(error);
        }
    }
}

#[cfg(not(unix))]
fn lock_exclusive(_file: &File) -> std::io::Result<()> {
    Ok(())
}

/// Entries that try to steer the model (prompt injection, exfiltration) are not saved
/// and are hidden from the prompt.
pub fn looks_injected(text: &str) -> bool {
    static PATTERNS: OnceLock<regex::Regex> = OnceLock::new();
    let pattern = PATTERNS.get_or_init(|| {
        regex::Regex::new(
            r"(?i)(ignore\s+(all\s+|any\s+)?(previous|prior|above|earlier)\s+(instructions|rules|messages)|disregard\s+(your|the|all)\s+(system\s+prompt|instructions|rules)|you\s+are\s+now\s+(in\s+)?(developer|dan|jailbreak)|<\s*/?\s*system\s*>|(curl|wget)\s+[^\n]*\$\{?[A-Z_]*(KEY|TOKEN|SECRET))",
        )
        .expect("valid pattern")
    });
    pattern.is_match(text) || text.chars().any(|c| matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_through_the_file_format() {
        let entries = vec!["one".to_string(), "two\nlines".to_string()];
        assert_eq!(render_entries(&entries), "one\n§\ntwo\nlines\n");
        assert_eq!(parse_entries(&render_entries(&entries)), entries);
        assert_eq!(joined_len(&entries), 3 + 9 + 3);
    }
}
