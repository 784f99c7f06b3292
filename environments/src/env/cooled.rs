//! The tasks folded when they cooled down, packed side by side.
//!
//! A folded task is kept for as long as the server lives, while everything around it
//! comes and goes. Small allocations made one per task when it cools land in whatever
//! holes the heap has then, among the memory of the task being folded; once that is
//! freed, each of them keeps a page of it that would otherwise go back to the system.
//! So the records' text lives in one buffer, and the index in one table, each a single
//! allocation that grows by doubling.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What is left of a task that cooled down with an environment that can be made again
/// ([`super::Environment::resumable_dir`]), taken out of [`CooledTasks`].
pub(super) struct Cooled {
    pub fingerprint: Arc<str>,
    /// The directory with the task's state.
    pub state_dir: String,
    /// The shell session's name.
    pub sid: String,
    /// The shell session's working directory.
    pub cwd: String,
    pub snapshot_ready: bool,
}

impl Cooled {
    /// Removes what the task left on disk (what [`super::evict`] does for a live one).
    pub fn remove_files(&self) {
        let _ = std::fs::remove_dir_all(&self.state_dir);
    }
}

struct Entry {
    /// Where the record's text starts in [`CooledTasks::text`], and its length.
    at: usize,
    len: usize,
    fingerprint: Arc<str>,
    snapshot_ready: bool,
    last_used: Instant,
}

/// Folded tasks by name. A record's text is the task's name, its state directory, the
/// session's name and its directory, each ended by a NUL (which no path holds).
#[derive(Default)]
pub(super) struct CooledTasks {
    text: String,
    /// Bytes of `text` whose records were taken out since it was last compacted.
    unused: usize,
    /// By a keyed hash of the task's name: the record's own name tells a collision.
    entries: HashMap<u64, Entry>,
    keys: std::hash::RandomState,
}

/// The fields of a record's text.
fn fields(record: &str) -> [&str; 4] {
    let mut parts = record.split('\0');
    std::array::from_fn(|_| parts.next().unwrap_or_default())
}

impl CooledTasks {
    fn key(&self, task: &str) -> u64 {
        self.keys.hash_one(task)
    }

    fn record(&self, entry: &Entry) -> [&str; 4] {
        fields(&self.text[entry.at..entry.at + entry.len])
    }

    /// The entry of `task`, if it was folded.
    fn entry(&self, task: &str) -> Option<(u64, &Entry)> {
        let key = self.key(task);
        let entry = self.entries.get(&key)?;
        (self.record(entry)[0] == task).then_some((key, entry))
    }

    /// Keeps a task's record; false when it cannot be kept (a string holds a NUL, or
    /// another task's name has the same hash), and the task should stay as it is.
    pub fn insert(
        &mut self,
        task: &str,
        [state_dir, sid, cwd]: [&str; 3],
        fingerprint: Arc<str>,
        snapshot_ready: bool,
        last_used: Instant,
    ) -> bool {
        let strings = [task, state_dir, sid, cwd];
        if strings.iter().any(|s| s.contains('\0')) {
            return false;
        }
        let key = self.key(task);
        if let Some(entry) = self.entries.get(&key) {
            if self.record(entry)[0] != task {
                return false;
            }
            self.take(key);
        }
        let at = self.text.len();
        for s in strings {
            self.text.push_str(s);
            self.text.push('\0');
        }
        let entry = Entry {
            at,
            len: self.text.len() - at,
            fingerprint,
            snapshot_ready,
            last_used,
        };
        self.entries.insert(key, entry);
        true
    }

    /// The working directory of a folded task.
    pub fn cwd(&self, task: &str) -> Option<&str> {
        let (_, entry) = self.entry(task)?;
        Some(self.record(entry)[3])
    }

    /// Takes a task's record out.
    pub fn remove(&mut self, task: &str) -> Option<Cooled> {
        let (key, _) = self.entry(task)?;
        self.take(key)
    }

    /// Takes out the records of the tasks last used longer than `max_idle` ago, with
    /// their names.
    pub fn remove_idle_for(&mut self, max_idle: Duration) -> Vec<(String, Cooled)> {
        let keys: Vec<u64> = self
            .entries
            .iter()
            .filter(|(_, entry)| entry.last_used.elapsed() > max_idle)
            .map(|(key, _)| *key)
            .collect();
        keys.into_iter()
            .filter_map(|key| {
                let task = self.record(self.entries.get(&key)?)[0].to_string();
                Some((task, self.take(key)?))
            })
            .collect()
    }

    /// Takes every record out.
    pub fn drain(&mut self) -> Vec<Cooled> {
        let entries = std::mem::take(&mut self.entries);
        let taken = entries.into_values().map(|e| self.cooled(e)).collect();
        self.text = String::new();
        self.unused = 0;
        taken
    }

    fn take(&mut self, key: u64) -> Option<Cooled> {
        let entry = self.entries.remove(&key)?;
        self.unused += entry.len;
        let taken = self.cooled(entry);
        if self.entries.is_empty() {
            self.text = String::new();
            self.unused = 0;
        } else if self.unused > self.text.len() / 2 {
            self.compact();
        }
        Some(taken)
    }

    /// The record of an entry taken out of the table.
    fn cooled(&self, entry: Entry) -> Cooled {
        let [_, state_dir, sid, cwd] = self.record(&entry).map(str::to_string);
        Cooled {
            fingerprint: entry.fingerprint,
            state_dir,
            sid,
            cwd,
            snapshot_ready: entry.snapshot_ready,
        }
    }

    /// Copies the records still kept into a buffer of their own size.
    fn compact(&mut self) {
        let mut text = String::with_capacity(self.text.len() - self.unused);
        for entry in self.entries.values_mut() {
            let at = text.len();
            text.push_str(&self.text[entry.at..entry.at + entry.len]);
            entry.at = at;
        }
        self.text = text;
        self.unused = 0;
        self.entries.shrink_to_fit();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn insert(tasks: &mut CooledTasks, task: &str, n: usize) -> bool {
        insert_used(tasks, task, n, Instant::now())
    }

    fn insert_used(tasks: &mut CooledTasks, task: &str, n: usize, last_used: Instant) -> bool {
        tasks.insert(
            task,
            [
                &format!("/state/{n}"),
                &format!("sid{n}"),
                &format!("/cwd/{n}"),
            ],
            Arc::from("fingerprint"),
            n.is_multiple_of(2),
            last_used,
        )
    }

    #[test]
    fn records_are_found_by_name_and_survive_compaction() {
        let mut tasks = CooledTasks::default();
        for n in 0..100 {
            assert!(insert(&mut tasks, &format!("task{n}"), n));
        }
        assert_eq!(tasks.cwd("task7"), Some("/cwd/7"));
        assert_eq!(tasks.cwd("task"), None);
        // Taking most out compacts the buffer more than once; the rest stay whole.
        for n in (0..100usize).filter(|n| n % 10 != 3) {
            let cooled = tasks.remove(&format!("task{n}")).unwrap();
            assert_eq!(
                (
                    cooled.state_dir.as_str(),
                    cooled.sid.as_str(),
                    cooled.cwd.as_str()
                ),
                (
                    format!("/state/{n}").as_str(),
                    format!("sid{n}").as_str(),
                    format!("/cwd/{n}").as_str()
                )
            );
            assert_eq!(cooled.snapshot_ready, n.is_multiple_of(2));
        }
        assert!(tasks.text.len() < 10 * 40, "{}", tasks.text.len());
        for n in (3..100).step_by(10) {
            assert_eq!(
                tasks.cwd(&format!("task{n}")),
                Some(format!("/cwd/{n}").as_str())
            );
        }
        assert!(tasks.remove("task4").is_none());
        assert_eq!(tasks.drain().len(), 10);
        assert!(tasks.text.is_empty());
    }

    #[test]
    fn a_task_folded_again_replaces_its_record() {
        let mut tasks = CooledTasks::default();
        assert!(insert(&mut tasks, "t", 1));
        assert!(insert(&mut tasks, "t", 2));
        assert_eq!(tasks.cwd("t"), Some("/cwd/2"));
        assert_eq!(tasks.drain().len(), 1);
    }

    #[test]
    fn a_string_with_a_nul_is_not_kept() {
        let mut tasks = CooledTasks::default();
        assert!(!insert(&mut tasks, "t\0u", 1));
        assert!(tasks.cwd("t").is_none());
    }

    #[test]
    fn records_idle_too_long_are_taken_out_with_their_names() {
        let mut tasks = CooledTasks::default();
        assert!(insert(&mut tasks, "old", 1));
        // Used "later than now": never idle at all.
        let later = Instant::now() + Duration::from_secs(3600);
        assert!(insert_used(&mut tasks, "new", 2, later));
        std::thread::sleep(Duration::from_millis(1));
        let taken = tasks.remove_idle_for(Duration::ZERO);
        assert_eq!(taken.len(), 1);
        assert_eq!(taken[0].0, "old");
        assert_eq!(tasks.cwd("new"), Some("/cwd/2"));
    }
}
