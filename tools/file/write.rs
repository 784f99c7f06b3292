//! What edits of whole files keep and check: the original's line endings and BOM,
//! edits of one file serialised across threads and processes, and never written over
//! a base that changed. The write itself goes through `crate::file_access`.

use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::shared::find_replace::split_gutter;

const BOM: &str = "\u{feff}";

/// How the existing file was written: kept when new text is written over it.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct Style {
    pub crlf: bool,
    pub bom: bool,
}

impl Style {
    /// CRLF when most line breaks of `bytes` are CRLF; BOM when it starts with one.
    pub fn detect(bytes: &[u8]) -> Style {
        // Most files have no carriage return at all: one SIMD scan settles it, and the
        // line breaks need counting only when there is one.
        let crlf = memchr::memchr(b'\r', bytes).is_some_and(|first| {
            memchr::memmem::find_iter(&bytes[first..], b"\r\n").count() * 2
                > bytecount::count(bytes, b'\n')
        });
        Style {
            crlf,
            bom: bytes.starts_with(BOM.as_bytes()),
        }
    }

    /// Text as the model sees it: BOM dropped, CRLF as LF.
    pub fn to_model(self, text: &str) -> String {
        let text = text.strip_prefix(BOM).unwrap_or(text);
        if self.crlf {
            text.replace("\r\n", "\n")
        } else {
            text.to_string()
        }
    }

    /// Text as it goes to disk: LF turned into CRLF (when the file used CRLF and the
    /// text brings none of its own), BOM put back.
    pub fn to_disk(self, text: &str) -> String {
        let mut out = String::with_capacity(text.len() + 16);
        if self.bom && !text.starts_with(BOM) {
            out.push_str(BOM);
        }
        if self.crlf && !text.contains("\r\n") {
            out.push_str(&text.replace('\n', "\r\n"));
        } else {
            out.push_str(text);
        }
        out
    }
}

/// Longest wait for another edit of the same file to finish.
const LOCK_WAIT: Duration = Duration::from_secs(60);

/// An exclusive, cross-process lock on the edits of one file, held until dropped.
///
/// The lock is an `flock` on the file itself (on the nearest existing directory when
/// the file does not exist yet), so no lock files are left beside the user's files.
/// Because every edit replaces the file by a rename, a waiter that wakes up holding
/// the lock of a replaced inode notices and locks the new one.
pub struct EditLock {
    _held: std::fs::File,
}

/// Takes the edit lock of `target` (a resolved path), waiting for other edits.
pub fn lock_for_edit(target: &Path) -> Result<EditLock, String> {
    let mut locks = lock_all_for_edit(&[target.to_path_buf()])?;
    Ok(locks.pop().expect("one lock for one target"))
}

/// What holds the lock of `target`: the file itself, or the nearest existing directory
/// when it does not exist yet.
fn lock_holder(target: &Path) -> PathBuf {
    if std::fs::symlink_metadata(target).is_ok() {
        return target.to_path_buf();
    }
    target
        .ancestors()
        .skip(1)
        .find(|dir| dir.is_dir())
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("/"))
}

/// Takes the edit locks of every target (a multi-file patch), in one global order so
/// two patches never wait for each other; targets sharing a holder share one lock.
pub fn lock_all_for_edit(targets: &[PathBuf]) -> Result<Vec<EditLock>, String> {
    let deadline = Instant::now() + LOCK_WAIT;
    'attempt: loop {
        let mut holders: Vec<PathBuf> = targets.iter().map(|t| lock_holder(t)).collect();
        holders.sort();
        holders.dedup();
        let mut held = Vec::with_capacity(holders.len());
        for holder in &holders {
            match lock_one(holder, deadline) {
                Ok(Some(file)) => held.push(EditLock { _held: file }),
                // Gone between the look and the open: look again.
                Ok(None) => continue 'attempt,
                Err(e) => return Err(e),
            }
        }
        // Every target still has the holder it was locked by: a file was not replaced
        // while we waited, a new file was not created by someone else meanwhile.
        if holders == {
            let mut now: Vec<PathBuf> = targets.iter().map(|t| lock_holder(t)).collect();
            now.sort();
            now.dedup();
            now
        } && held
            .iter()
            .zip(&holders)
            .all(|(lock, holder)| same_inode(&lock._held, holder))
        {
            return Ok(held);
        }
        if Instant::now() >= deadline {
            return Err("the files of this edit kept changing while waiting for other edits; nothing was changed, try again".into());
        }
    }
}

fn same_inode(file: &std::fs::File, path: &Path) -> bool {
    match (file.metadata(), std::fs::symlink_metadata(path)) {
        (Ok(held), Ok(now)) => held.dev() == now.dev() && held.ino() == now.ino(),
        _ => false,
    }
}

/// Opens and flocks one holder, waiting until `deadline`; `Ok(None)` when it vanished.
fn lock_one(holder: &Path, deadline: Instant) -> Result<Option<std::fs::File>, String> {
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_NOCTTY)
        .open(holder)
    {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && Instant::now() < deadline => {
            return Ok(None)
        }
        Err(e) => return Err(format!("cannot lock {} for editing: {e}", holder.display())),
    };
    let mut pause = Duration::from_millis(1);
    loop {
        // SAFETY: flock on a descriptor this function owns.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            return Ok(Some(file));
        }
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EWOULDBLOCK) {
            return Err(format!(
                "cannot lock {} for editing: {err}",
                holder.display()
            ));
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "another edit of {} has been in progress for over {} s; nothing was changed, try again",
                holder.display(),
                LOCK_WAIT.as_secs()
            ));
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

/// Why a checked replace did not happen.
#[derive(Debug, thiserror::Error)]
pub enum ReplaceError {
    /// The file no longer holds what the edit was computed from.
    #[error(
        "the file changed on disk while the edit was being made (another process wrote it); nothing was \
         written. Read it again and redo the edit"
    )]
    BaseChanged,
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// `path` opened for reading: `None` when it does not exist. Never blocks on a FIFO.
fn open_existing(path: &Path) -> std::io::Result<Option<(std::fs::File, std::fs::Metadata)>> {
    match super::paths::open_regular(path) {
        Ok(opened) => Ok(Some(opened)),
        Err(super::paths::OpenError::NotFound) => Ok(None),
        Err(super::paths::OpenError::Io(e)) => Err(e),
        Err(super::paths::OpenError::Directory) => Err(std::io::Error::other("it is a directory")),
        Err(super::paths::OpenError::NotRegular(what)) => {
            Err(std::io::Error::other(format!("it is {what}")))
        }
    }
}

/// What `path` holds now: `None` when it does not exist. Never blocks on a FIFO.
pub fn current_bytes(path: &Path) -> std::io::Result<Option<Vec<u8>>> {
    let Some((mut file, meta)) = open_existing(path)? else {
        return Ok(None);
    };
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.read_to_end(&mut bytes)?;
    Ok(Some(bytes))
}

/// Bytes compared at a time by [`holds`].
const COMPARE_BLOCK: usize = 1 << 20;

/// True when `path` holds exactly `base` (`None`: does not exist). The file is
/// compared block by block, so checking a large file costs no copy of it. The common
/// check before every edit's write, made with the edit lock held: an edit computed from
/// an old base is never written.
pub fn holds(path: &Path, base: Option<&[u8]>) -> std::io::Result<bool> {
    let Some((mut file, meta)) = open_existing(path)? else {
        return Ok(base.is_none());
    };
    let Some(base) = base else { return Ok(false) };
    if meta.len() != base.len() as u64 {
        return Ok(false);
    }
    let mut block = vec![0u8; COMPARE_BLOCK.min(base.len() + 1)];
    let mut at = 0;
    loop {
        let n = match file.read(&mut block) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if n == 0 {
            return Ok(at == base.len());
        }
        if base.len() - at < n || block[..n] != base[at..at + n] {
            return Ok(false);
        }
        at += n;
    }
}

/// True when `content` looks like read_file's `N|line` display pasted back: at least
/// two lines, most non-empty lines carry the gutter, and its numbers count up by one.
pub fn looks_like_numbered_display(content: &str) -> bool {
    let lines: Vec<&str> = content.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.len() < 2 {
        return false;
    }
    let numbers: Vec<u64> = lines
        .iter()
        .filter_map(|line| split_gutter(line)?.0.parse().ok())
        .collect();
    if numbers.len() < 2 || numbers.len() * 2 <= lines.len() {
        return false;
    }
    let ascending = numbers.windows(2).filter(|w| w[1] == w[0] + 1).count();
    ascending * 2 >= numbers.len() - 1
}

/// True when `content` is read_file's "unchanged" stub rather than file text.
pub fn looks_like_dedup_stub(content: &str) -> bool {
    let trimmed = content.trim();
    if let Ok(serde_json::Value::Object(map)) = serde_json::from_str::<serde_json::Value>(trimmed) {
        return map.get("dedup") == Some(&serde_json::Value::Bool(true))
            || map.get("content_returned") == Some(&serde_json::Value::Bool(false));
    }
    trimmed.len() < 2000
        && trimmed.contains("\"content_returned\"")
        && trimmed.contains("\"dedup\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbered_display() {
        assert!(looks_like_numbered_display("1|a\n2|b\n3|c"));
        assert!(looks_like_numbered_display("10|fn main() {\n11|}\n"));
        assert!(!looks_like_numbered_display("a|b\nc|d"));
        assert!(!looks_like_numbered_display("1|only one"));
        assert!(!looks_like_numbered_display("5|x\n1|y\n9|z"));
    }

    #[test]
    fn base_check_compares_every_byte() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.txt");
        assert!(holds(&path, None).unwrap());
        // Over one comparison block, differing only near the end.
        let base: Vec<u8> = (0..COMPARE_BLOCK * 2 + 7)
            .map(|i| b'a' + (i % 26) as u8)
            .collect();
        std::fs::write(&path, &base).unwrap();
        assert!(holds(&path, Some(&base)).unwrap());
        assert!(!holds(&path, None).unwrap());
        let mut other = base.clone();
        *other.last_mut().unwrap() = b'!';
        assert!(!holds(&path, Some(&other)).unwrap());
        assert!(!holds(&path, Some(&base[..base.len() - 1])).unwrap());
    }

    #[test]
    fn styles() {
        let style = Style::detect(b"a\r\nb\r\n");
        assert!(style.crlf && !style.bom);
        assert_eq!(style.to_disk("x\ny\n"), "x\r\ny\r\n");
        let bom = Style::detect("\u{feff}hi\n".as_bytes());
        assert!(bom.bom && !bom.crlf);
        assert_eq!(bom.to_disk("hi\n"), "\u{feff}hi\n");
        assert_eq!(bom.to_model("\u{feff}hi\n"), "hi\n");
    }
}
