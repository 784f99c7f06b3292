//! Whether config.yaml may have changed, asked of the kernel instead of the file: an
//! inotify watch on its directory. Every call checks the configuration, and a `stat`
//! of the file walks its whole path each time; reading an empty inotify queue does
//! not. The kernel queues an event before the write that caused it returns, so a
//! change made before a call was sent is seen by that call.
//!
//! The watch is used only where it sees every change: the directory named without a
//! symlink on the way, on a local filesystem, and config.yaml not a symlink (a change
//! of its target would not show in this directory). When the directory is moved or
//! deleted, the queue overflows or config.yaml becomes a symlink, the watch gives up
//! for good and every check looks at the file again.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

/// Filesystems whose changes all pass through this kernel.
const LOCAL_FILESYSTEMS: &[u64] = &[
    0xef53,      // ext2/3/4
    0x5846_5342, // xfs
    0x9123_683e, // btrfs
    0x0102_1994, // tmpfs
    0xf2f5_2010, // f2fs
];

pub struct ConfigWatch {
    queue: OwnedFd,
    config: PathBuf,
    file_name: Vec<u8>,
    /// Still sees every change (see the module's conditions).
    trusted: AtomicBool,
    /// Batches of events that concerned config.yaml, so far.
    changes: AtomicU64,
    /// One reader of the queue at a time, so no thread takes another's events.
    reading: Mutex<()>,
}

impl ConfigWatch {
    /// A watch for `config` (a path like `$HERMES_HOME/config.yaml`), or `None` where
    /// one would not see every change.
    pub fn new(config: &Path) -> Option<ConfigWatch> {
        let directory = config.parent()?;
        let file_name = config.file_name()?.as_encoded_bytes().to_vec();
        if std::fs::canonicalize(directory).ok()? != directory || !on_local_filesystem(directory) {
            return None;
        }
        // SAFETY: no pointers; the result is checked.
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        if fd < 0 {
            return None;
        }
        // SAFETY: `inotify_init1` has just returned this descriptor, owned by nobody else.
        let queue = unsafe { OwnedFd::from_raw_fd(fd) };
        let events = libc::IN_CREATE
            | libc::IN_DELETE
            | libc::IN_MODIFY
            | libc::IN_ATTRIB
            | libc::IN_CLOSE_WRITE
            | libc::IN_MOVED_FROM
            | libc::IN_MOVED_TO
            | libc::IN_DELETE_SELF
            | libc::IN_MOVE_SELF
            | libc::IN_ONLYDIR;
        let directory_c = std::ffi::CString::new(directory.as_os_str().as_encoded_bytes()).ok()?;
        // SAFETY: a valid inotify descriptor and a NUL-terminated path.
        if unsafe { libc::inotify_add_watch(queue.as_raw_fd(), directory_c.as_ptr(), events) } < 0 {
            return None;
        }
        let watch = ConfigWatch {
            queue,
            config: config.to_path_buf(),
            file_name,
            trusted: AtomicBool::new(true),
            changes: AtomicU64::new(0),
            reading: Mutex::new(()),
        };
        watch.check_not_a_link();
        watch.trusted.load(Ordering::SeqCst).then_some(watch)
    }

    /// How many times config.yaml may have changed since the watch started: a caller
    /// that looked at the file when this count was `n` need not look again while it is
    /// still `n`. `None` once the watch cannot be trusted (then look every time).
    pub fn changes(&self) -> Option<u64> {
        if !self.trusted.load(Ordering::SeqCst) {
            return None;
        }
        let _reading = self.reading.lock().unwrap_or_else(|p| p.into_inner());
        if self.drain() {
            self.check_not_a_link();
            self.changes.fetch_add(1, Ordering::SeqCst);
        }
        self.trusted
            .load(Ordering::SeqCst)
            .then(|| self.changes.load(Ordering::SeqCst))
    }

    /// Reads every queued event; whether one concerned config.yaml (or the watch itself).
    fn drain(&self) -> bool {
        let mut touched = false;
        let mut buffer = [0u8; 4096];
        loop {
            // SAFETY: a valid descriptor and a buffer of the length passed.
            let n = unsafe {
                libc::read(
                    self.queue.as_raw_fd(),
                    buffer.as_mut_ptr().cast(),
                    buffer.len(),
                )
            };
            if n <= 0 {
                if n < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EAGAIN) {
                    self.trusted.store(false, Ordering::SeqCst);
                }
                return touched;
            }
            touched |= self.concerns_config(&buffer[..n as usize]);
        }
    }

    /// Whether any event of the batch is about config.yaml or ends the watch.
    fn concerns_config(&self, mut events: &[u8]) -> bool {
        const HEADER: usize = std::mem::size_of::<libc::inotify_event>();
        let mut concerned = false;
        while events.len() >= HEADER {
            // SAFETY: at least a header's bytes; read unaligned from the byte buffer.
            let event: libc::inotify_event =
                unsafe { std::ptr::read_unaligned(events.as_ptr().cast()) };
            let end = (HEADER + event.len as usize).min(events.len());
            let name = &events[HEADER..end];
            let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
            let gone =
                libc::IN_IGNORED | libc::IN_DELETE_SELF | libc::IN_MOVE_SELF | libc::IN_Q_OVERFLOW;
            if event.mask & gone != 0 {
                self.trusted.store(false, Ordering::SeqCst);
                concerned = true;
            }
            concerned |= name == self.file_name.as_slice();
            events = &events[end..];
        }
        concerned
    }

    fn check_not_a_link(&self) {
        if std::fs::symlink_metadata(&self.config).is_ok_and(|m| m.file_type().is_symlink()) {
            self.trusted.store(false, Ordering::SeqCst);
        }
    }
}

fn on_local_filesystem(directory: &Path) -> bool {
    let Ok(path) = std::ffi::CString::new(directory.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    // SAFETY: statfs is plain data, valid when zeroed.
    let mut stat: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a zeroed out-buffer of the right type.
    let rc = unsafe { libc::statfs(path.as_ptr(), &mut stat) };
    rc == 0 && LOCAL_FILESYSTEMS.contains(&((stat.f_type as u64) & 0xffff_ffff))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A caller as the registry is one: looks at the file when the count moved.
    struct Caller<'a> {
        watch: &'a ConfigWatch,
        looked_at: Option<u64>,
    }

    impl Caller<'_> {
        /// Whether this question needs a look at the file.
        fn must_look(&mut self) -> bool {
            let now = self.watch.changes();
            let look = now.is_none() || now != self.looked_at;
            self.looked_at = now;
            look
        }
    }

    #[test]
    fn every_kind_of_change_to_the_file_is_seen_and_others_are_not() {
        let home = tempfile::tempdir().unwrap();
        let home_path = std::fs::canonicalize(home.path()).unwrap();
        let config = home_path.join("config.yaml");
        let Some(watch) = ConfigWatch::new(&config) else {
            eprintln!(
                "no inotify watch possible here (filesystem of {}); nothing to test",
                home_path.display()
            );
            return;
        };
        let mut caller = Caller {
            watch: &watch,
            looked_at: None,
        };
        assert!(
            caller.must_look(),
            "the first question must look at the file"
        );
        assert!(!caller.must_look());
        std::fs::write(&config, "a: 1\n").unwrap();
        assert!(caller.must_look(), "creation");
        assert!(!caller.must_look());
        std::fs::write(home_path.join("state.db"), "other").unwrap();
        assert!(!caller.must_look(), "another file of the directory");
        std::fs::OpenOptions::new()
            .append(true)
            .open(&config)
            .unwrap();
        assert!(caller.must_look(), "opened for writing and closed");
        std::fs::write(home_path.join("next.yaml"), "a: 2\n").unwrap();
        assert!(!caller.must_look());
        std::fs::rename(home_path.join("next.yaml"), &config).unwrap();
        assert!(caller.must_look(), "replaced by a rename");
        std::fs::remove_file(&config).unwrap();
        assert!(caller.must_look(), "deleted");
        std::os::unix::fs::symlink(home_path.join("elsewhere.yaml"), &config).unwrap();
        assert!(caller.must_look(), "became a symlink");
        assert!(
            caller.must_look(),
            "a symlinked config is looked at on every call"
        );
    }

    #[test]
    fn a_change_another_caller_drained_is_still_seen() {
        let home = tempfile::tempdir().unwrap();
        let home_path = std::fs::canonicalize(home.path()).unwrap();
        let Some(watch) = ConfigWatch::new(&home_path.join("config.yaml")) else {
            return;
        };
        let mut first = Caller {
            watch: &watch,
            looked_at: None,
        };
        let mut second = Caller {
            watch: &watch,
            looked_at: None,
        };
        assert!(first.must_look() && second.must_look());
        std::fs::write(home_path.join("config.yaml"), "a: 1\n").unwrap();
        assert!(first.must_look(), "the first caller drains the event");
        assert!(
            second.must_look(),
            "the second still sees that it must look"
        );
        assert!(!first.must_look() && !second.must_look());
    }

    #[test]
    fn a_moved_directory_ends_the_watch() {
        let parent = tempfile::tempdir().unwrap();
        let parent = std::fs::canonicalize(parent.path()).unwrap();
        let home = parent.join("home");
        std::fs::create_dir(&home).unwrap();
        let Some(watch) = ConfigWatch::new(&home.join("config.yaml")) else {
            return;
        };
        let mut caller = Caller {
            watch: &watch,
            looked_at: None,
        };
        assert!(caller.must_look());
        assert!(!caller.must_look());
        std::fs::rename(&home, parent.join("moved")).unwrap();
        std::fs::create_dir(&home).unwrap();
        assert!(caller.must_look(), "moved away");
        std::fs::write(home.join("config.yaml"), "a: 1\n").unwrap();
        assert!(
            caller.must_look(),
            "the new directory is not watched: look at the file"
        );
        assert!(watch.changes().is_none());
    }

    #[test]
    fn a_path_through_a_symlink_is_not_watched() {
        let parent = tempfile::tempdir().unwrap();
        let parent = std::fs::canonicalize(parent.path()).unwrap();
        std::fs::create_dir(parent.join("real")).unwrap();
        std::os::unix::fs::symlink(parent.join("real"), parent.join("link")).unwrap();
        assert!(ConfigWatch::new(&parent.join("link").join("config.yaml")).is_none());
    }
}
