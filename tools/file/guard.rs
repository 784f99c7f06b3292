//! Per-task memory of the file tools: what was read (and when), the dedup cache of
//! identical reads, the streak of identical consecutive read/search calls, and the
//! count of consecutive failed patches per file.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::SystemTime;

/// Repeated identical consecutive calls: the third gets a warning, the fourth is refused.
pub const WARN_AT: u32 = 3;
pub const BLOCK_AT: u32 = 4;
/// Dedup stubs handed out for one unchanged region before reads of it are refused.
pub const MAX_DEDUP_STUBS: u32 = 2;

/// What a file looked like on disk: enough to notice that it changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    pub mtime: Option<SystemTime>,
    pub len: u64,
}

impl Stamp {
    pub fn of(meta: &std::fs::Metadata) -> Stamp {
        Stamp {
            mtime: meta.modified().ok(),
            len: meta.len(),
        }
    }

    /// The file's stamp now, or `None` when it cannot be looked at.
    pub fn current(path: &Path) -> Option<Stamp> {
        std::fs::metadata(path).ok().map(|meta| Stamp::of(&meta))
    }
}

/// The answer of the dedup cache for a read.
pub enum Dedup {
    /// Read it (never read with these arguments, or the file changed).
    Read,
    /// Same region, file unchanged: answer with a stub; `n` stubs so far, this one included.
    Stub,
    /// Too many stubs already: refuse.
    Blocked(u32),
}

#[derive(Default)]
pub struct FileState {
    inner: Mutex<Inner>,
}

/// (offset, limit) of a region read -> the file's stamp then, and the stubs handed out since.
type RegionsRead = HashMap<(u64, u64), (Stamp, u32)>;

#[derive(Default)]
struct Inner {
    /// Path -> how it looked when this task last read (or wrote) it.
    seen: HashMap<PathBuf, Stamp>,
    /// Path -> (offset, limit) of each region read -> stamp at read time and stubs
    /// handed out since. Looked up by the path as borrowed, with no copy of it.
    dedup: HashMap<PathBuf, RegionsRead>,
    /// The last read/search call: its key, the activity epoch it ran in, how many in a row.
    streak: Option<(String, u64, u32)>,
    /// Consecutive failed patches per file.
    patch_failures: HashMap<PathBuf, u32>,
}

impl FileState {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Notes one read/search call and returns how many identical calls in a row this
    /// makes (1 for a new one). The streak ends when the key or the epoch changes.
    pub fn note_call(&self, key: String, epoch: u64) -> u32 {
        let mut inner = self.lock();
        let count = match &inner.streak {
            Some((last, last_epoch, count)) if *last == key && *last_epoch == epoch => count + 1,
            _ => 1,
        };
        inner.streak = Some((key, epoch, count));
        count
    }

    /// Whether a read of this region may be answered with the dedup stub.
    pub fn dedup(&self, path: &Path, offset: u64, limit: u64, now: Stamp) -> Dedup {
        let mut inner = self.lock();
        match inner
            .dedup
            .get_mut(path)
            .and_then(|regions| regions.get_mut(&(offset, limit)))
        {
            Some((stamp, stubs)) if *stamp == now => {
                *stubs += 1;
                if *stubs > MAX_DEDUP_STUBS {
                    Dedup::Blocked(*stubs)
                } else {
                    Dedup::Stub
                }
            }
            _ => Dedup::Read,
        }
    }

    /// Records a full read of a region.
    pub fn record_read(&self, path: &Path, offset: u64, limit: u64, stamp: Stamp) {
        let mut inner = self.lock();
        match inner.seen.get_mut(path) {
            Some(seen) => *seen = stamp,
            None => {
                inner.seen.insert(path.to_path_buf(), stamp);
            }
        }
        let region = ((offset, limit), (stamp, 0));
        match inner.dedup.get_mut(path) {
            Some(regions) => {
                regions.insert(region.0, region.1);
            }
            None => {
                inner
                    .dedup
                    .insert(path.to_path_buf(), HashMap::from([region]));
            }
        }
    }

    /// How the file looked when this task last read or wrote it.
    pub fn last_seen(&self, path: &Path) -> Option<Stamp> {
        self.lock().seen.get(path).copied()
    }

    /// Records a write by this task: its own change is not "changed since read", and
    /// cached reads of the file are void.
    pub fn record_write(&self, path: &Path, stamp: Option<Stamp>) {
        let mut inner = self.lock();
        match stamp {
            Some(stamp) => {
                inner.seen.insert(path.to_path_buf(), stamp);
            }
            None => {
                inner.seen.remove(path);
            }
        }
        inner.dedup.remove(path);
    }

    /// Counts a failed patch of `path`; returns the consecutive failures so far.
    pub fn patch_failed(&self, path: &Path) -> u32 {
        let mut inner = self.lock();
        let count = inner.patch_failures.entry(path.to_path_buf()).or_insert(0);
        *count += 1;
        *count
    }

    pub fn patch_succeeded(&self, path: &Path) {
        self.lock().patch_failures.remove(path);
    }
}
/// The path task state is keyed by: the real path when the file exists.
pub fn state_key(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| crate::file_access::normalize(path))
}
