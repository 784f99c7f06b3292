//! The permanent allowlist in `config.yaml` (reference §2.5): read at start, merged and
//! written back after an `always` approval without disturbing the rest of the file.
//!
//! The file is edited as text: only the top-level `command_allowlist:` block is replaced
//! (or appended), so the user's comments and formatting elsewhere survive. The result is
//! parsed again before it is written; if it would not read back as the intended list the
//! file is left alone.

use super::policy::parse_allowlist;
use serde_json::Value;
use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Saves in this process one at a time; [`FileLock`] orders them across processes.
static SAVE_LOCK: Mutex<()> = Mutex::new(());

/// An exclusive `flock` on `.<name>.lock` beside the config path (in the Hermes home,
/// also when config.yaml is a link elsewhere), held while the file is
/// re-read, merged and replaced, so concurrent savers in other processes never write
/// over each other's entries. Released when dropped (the descriptor closes).
struct FileLock {
    _file: std::fs::File,
}

impl FileLock {
    fn exclusive(target: &Path) -> Result<FileLock, String> {
        let name = target
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "config.yaml".into());
        let path = target.with_file_name(format!(".{name}.lock"));
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("{}: cannot create: {e}", dir.display()))?;
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| format!("{}: cannot open the lock file: {e}", path.display()))?;
        #[cfg(unix)]
        {
            use std::os::fd::AsRawFd;
            loop {
                // SAFETY: flock on a descriptor this function owns.
                if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } == 0 {
                    break;
                }
                let err = std::io::Error::last_os_error();
                if err.kind() != std::io::ErrorKind::Interrupted {
                    return Err(format!("{}: cannot lock: {err}", path.display()));
                }
            }
        }
        Ok(FileLock { _file: file })
    }
}

/// The list on disk as this process honours it (entries added since start-up other
/// than by approvals are held back, see [`crate::config`]); `None` when the file
/// exists but cannot be read or parsed.
pub fn read_allowlist(config_path: &Path) -> Option<Vec<String>> {
    let home = config_path.parent().unwrap_or(Path::new("."));
    let config = crate::config::Config::load(home);
    match config.state {
        crate::config::ConfigState::Missing => Some(Vec::new()),
        crate::config::ConfigState::Broken(_) => None,
        crate::config::ConfigState::Loaded(_) => {
            Some(parse_allowlist(config.get("command_allowlist")).0)
        }
    }
}

fn parse_allowlist_text(text: &str) -> Option<Vec<String>> {
    if text.trim().is_empty() {
        return Some(Vec::new());
    }
    match serde_yaml_ng::from_str::<Value>(text) {
        Ok(Value::Null) => Some(Vec::new()),
        Ok(root @ Value::Object(_)) => Some(parse_allowlist(root.get("command_allowlist")).0),
        _ => None,
    }
}

/// Writes `on_disk ∪ (memory − baseline)`, sorted, and returns the part of it this
/// process honours (entries put in the file since start-up other than by approvals
/// stay in the file but are not returned; see [`crate::config`]).
/// Entries another process added stay (they are on disk); entries someone removed by hand
/// stay removed (they are in the baseline, not in `memory − baseline`).
pub fn save_allowlist(
    config_path: &Path,
    memory: &BTreeSet<String>,
    baseline: &BTreeSet<String>,
) -> Result<BTreeSet<String>, String> {
    let _guard = SAVE_LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let target = resolve_symlinks(config_path);
    let _file_lock = FileLock::exclusive(config_path)?;
    let text = crate::config::read_config_text(&target)?.unwrap_or_default();
    let on_disk = parse_allowlist_text(&text)
        .ok_or_else(|| format!("{}: not valid YAML, allowlist not saved", target.display()))?;
    let honoured = read_allowlist(config_path).unwrap_or_default();
    let granted: Vec<String> = memory.difference(baseline).cloned().collect();
    let mut merged: BTreeSet<String> = on_disk.into_iter().collect();
    merged.extend(granted.iter().cloned());
    let mut kept: BTreeSet<String> = honoured.into_iter().collect();
    kept.extend(granted.iter().cloned());
    let new_text = replace_allowlist_block(&text, &merged);
    let wanted: Vec<String> = merged.iter().cloned().collect();
    if parse_allowlist_text(&new_text).as_ref() != Some(&wanted) {
        return Err(format!(
            "{}: could not place command_allowlist without changing other keys; not saved",
            target.display()
        ));
    }
    if new_text != text {
        // Recorded first, so a process that sees the new file also accepts the entries.
        let home = config_path.parent().unwrap_or(Path::new("."));
        crate::config::record_runtime_grants(home, &granted)
            .map_err(|e| format!("{}: cannot record the approval: {e}", home.display()))?;
        atomic_write(&target, new_text.as_bytes())?;
    }
    Ok(kept)
}

/// `text` with its top-level `command_allowlist:` block replaced by `entries` (appended
/// when there is none).
pub fn replace_allowlist_block(text: &str, entries: &BTreeSet<String>) -> String {
    let mut block = String::from("command_allowlist:");
    if entries.is_empty() {
        block.push_str(" []\n");
    } else {
        block.push('\n');
        for entry in entries {
            // A JSON string is a valid YAML double-quoted scalar.
            block.push_str("  - ");
            block.push_str(&serde_json::to_string(entry).unwrap_or_default());
            block.push('\n');
        }
    }
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let is_key_line = |line: &str| {
        line.strip_prefix("command_allowlist")
            .is_some_and(|rest| rest.trim_start_matches([' ', '\t']).starts_with(':'))
    };
    let Some(start) = lines.iter().position(|l| is_key_line(l)) else {
        let mut out = text.to_string();
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&block);
        return out;
    };
    // The block goes on while lines are indented or sequence items at column 0; blank and
    // comment lines belong to it only when more block lines follow.
    let mut end = start + 1;
    let mut scan = start + 1;
    while scan < lines.len() {
        let line = lines[scan];
        let trimmed = line.trim();
        if trimmed.is_empty() || (trimmed.starts_with('#') && !line.starts_with([' ', '\t'])) {
            scan += 1;
            continue;
        }
        if line.starts_with([' ', '\t']) || line.starts_with("- ") || trimmed == "-" {
            scan += 1;
            end = scan;
            continue;
        }
        break;
    }
    let mut out: String = lines[..start].concat();
    out.push_str(&block);
    out.push_str(&lines[end..].concat());
    out
}

/// The file a path finally names, following symlinks (also dangling ones, so the link is
/// kept and its target created).
pub fn resolve_symlinks(path: &Path) -> PathBuf {
    let mut current = path.to_path_buf();
    for _ in 0..40 {
        match std::fs::symlink_metadata(&current) {
            Ok(meta) if meta.file_type().is_symlink() => match std::fs::read_link(&current) {
                Ok(link) => {
                    current = if link.is_absolute() {
                        link
                    } else {
                        current.parent().unwrap_or(Path::new(".")).join(link)
                    };
                }
                Err(_) => break,
            },
            _ => break,
        }
    }
    current
}

/// Temp file `.<stem>_<random>.tmp` beside the target, fsync, rename over it; the target's
/// permission bits are kept.
pub fn atomic_write(target: &Path, bytes: &[u8]) -> Result<(), String> {
    let dir = target
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: cannot create: {e}", dir.display()))?;
    let stem = target
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("config");
    let permissions = std::fs::metadata(target).ok().map(|m| m.permissions());
    let (tmp_path, mut file) = {
        let mut attempt = 0;
        loop {
            let candidate = dir.join(format!(".{stem}_{}.tmp", crate::random::random_hex(16)));
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&candidate)
            {
                Ok(file) => break (candidate, file),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && attempt < 16 => {
                    attempt += 1
                }
                Err(e) => return Err(format!("{}: cannot create temp file: {e}", dir.display())),
            }
        }
    };
    let result = (|| {
        file.write_all(bytes)?;
        if let Some(permissions) = permissions {
            file.set_permissions(permissions)?;
        }
        file.sync_all()?;
        drop(file);
        std::fs::rename(&tmp_path, target)?;
        if let Ok(dir_handle) = std::fs::File::open(dir) {
            let _ = dir_handle.sync_all();
        }
        Ok::<(), std::io::Error>(())
    })();
    result.map_err(|e| {
        let _ = std::fs::remove_file(&tmp_path);
        format!("{}: cannot write: {e}", target.display())
    })
}
