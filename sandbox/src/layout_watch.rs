//! Whether any name a sandbox layout was worked out from may have changed since, asked
//! of the kernel in one system call instead of looking every place up again.
//!
//! A long-lived sandbox is compared with the walls a fresh one would get before each of
//! its commands: about 70 places, most of them missing, each an `lstat` in its parent's
//! real directory, 0.1–0.2 ms on the way to every command. Each of those answers depends
//! on one name in one directory (and, through the parent, on the names above it). Every
//! such directory is watched with inotify, and a change counts when it concerns a name
//! looked up there (created, removed, renamed or its attributes changed), the directory
//! itself (its attributes, a move, its removal), or cannot be told (a queue overflow, a
//! watch gone). So does a change of this process's mount table (`/proc/self/mountinfo`
//! then polls as changed). The kernel queues an event before the call that caused it
//! returns, so a change made before a command is checked is seen by that check.
//!
//! Watching is not free: adding a watch makes the kernel walk every entry of the
//! directory it has cached (negative ones included), which on a machine that has run a
//! while takes milliseconds per directory, 14 ms for one `call` here. A process starts
//! watching only once it works a layout out for the third time ([`worth_watching`]):
//! a one-shot `call` works out two (the login shell's and the command's), a server
//! many. For the same reason a change drops the watches only when a watched path may
//! now lead elsewhere (an entry removed, replaced or moved): a new task's directory,
//! made in a watched directory after a layout looked its name up, moves the generation
//! on and keeps every watch. Each name remembers the generation it last changed in, so
//! that directory puts out of date only the layouts that looked its name up: with many
//! tasks starting, the others' layouts are not worked out again for each new one.
//!
//! The watch is trusted only where it sees every change: directories on a local
//! filesystem (a change made on another host of a network filesystem raises no event
//! here), and layouts reached without a symlink (a symlink's target lies in directories
//! the lookups did not read). A layout outside that is worked out again every time.

use std::collections::{HashMap, HashSet};
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::{Mutex, OnceLock};

/// Filesystems whose changes all pass through this kernel.
const LOCAL_FILESYSTEMS: &[i64] = &[
    0xef53,      // ext2/3/4
    0x5846_5342, // xfs
    0x9123_683e, // btrfs
    0x0102_1994, // tmpfs
    0xf2f5_2010, // f2fs
];

const EVENTS: u32 = libc::IN_CREATE
    | libc::IN_DELETE
    | libc::IN_MOVED_FROM
    | libc::IN_MOVED_TO
    | libc::IN_ATTRIB
    | libc::IN_DELETE_SELF
    | libc::IN_MOVE_SELF
    | libc::IN_ONLYDIR;

/// Events that say something was lost, or that a watch is gone.
const UNKNOWABLE: u32 = libc::IN_Q_OVERFLOW | libc::IN_IGNORED | libc::IN_UNMOUNT;

/// Events after which a path may lead elsewhere than it did: an entry removed or
/// replaced, a watched directory moved or removed. A name created where there was
/// none, or attributes changed, leave every existing path where it led.
const REDIRECTING: u32 = libc::IN_DELETE
    | libc::IN_MOVED_FROM
    | libc::IN_MOVED_TO
    | libc::IN_DELETE_SELF
    | libc::IN_MOVE_SELF;

/// What a change means for the layouts worked out before it, least first.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Change {
    /// Nothing any layout looked up.
    None,
    /// A name some layout looked up: layouts are worked out again, on the same watches.
    Names,
    /// A path may lead elsewhere: the watches go too.
    Paths,
}

/// A name looked up in a real directory, both as bytes.
pub(crate) type Lookup = (Vec<u8>, Vec<u8>);

struct Watch {
    queue: OwnedFd,
    mounts: std::fs::File,
    /// Watched directories by watch descriptor, and the other way round.
    by_descriptor: HashMap<i32, Vec<u8>>,
    descriptors: HashMap<Vec<u8>, i32>,
    /// The names whose change counts, in every layout watched so far, by a keyed hash
    /// of directory and name ([`Watch::name_key`]): each task's layout looks up its own
    /// state directory, and a name held as bytes would cost an allocation for every
    /// task the server ever had. Two names of one key make a change of either count for
    /// both: the layout is worked out once more than needed, never once less.
    names: HashSet<u64>,
    keys: std::hash::RandomState,
    /// Moves on with every change that counts.
    generation: u64,
    /// The generation each name (by key) last changed in: a layout that did not look it
    /// up stays as it was when another task's name changes.
    changed_in: HashMap<u64, u64>,
    /// The last generation whose change every layout depends on: a watched directory's
    /// own, a path that may lead elsewhere, events lost.
    all_changed_in: u64,
}

/// One queue for the whole process (inotify instances are few per user).
fn slot() -> &'static Mutex<Option<Watch>> {
    static WATCH: OnceLock<Mutex<Option<Watch>>> = OnceLock::new();
    WATCH.get_or_init(|| Mutex::new(Watch::new()))
}

impl Watch {
    fn new() -> Option<Watch> {
        let mounts = std::fs::File::open("/proc/self/mountinfo").ok()?;
        // SAFETY: no pointers; the result is checked.
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        if fd < 0 {
            return None;
        }
        // SAFETY: a fresh descriptor owned by nobody else.
        let queue = unsafe { OwnedFd::from_raw_fd(fd) };
        Some(Watch {
            queue,
            mounts,
            by_descriptor: HashMap::new(),
            descriptors: HashMap::new(),
            names: HashSet::new(),
            keys: std::hash::RandomState::new(),
            generation: 0,
            changed_in: HashMap::new(),
            all_changed_in: 0,
        })
    }

    /// Takes in what happened since the last look.
    fn take_events(&mut self) {
        let mut fds = [
            libc::pollfd {
                fd: self.queue.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: self.mounts.as_raw_fd(),
                events: libc::POLLPRI,
                revents: 0,
            },
        ];
        // SAFETY: two valid pollfds; no waiting.
        if unsafe { libc::poll(fds.as_mut_ptr(), 2, 0) } <= 0 {
            return;
        }
        let mut change = if fds[1].revents != 0 {
            Change::Paths
        } else {
            Change::None
        };
        let mut changed_names = Vec::new();
        if fds[0].revents != 0 {
            change = change.max(self.read_queue(&mut changed_names));
        }
        if change == Change::None {
            return;
        }
        self.generation += 1;
        let generation = self.generation;
        // `None` stands for a change every layout depends on.
        if change == Change::Paths || changed_names.contains(&None) {
            self.all_changed_in = generation;
        }
        for key in changed_names.into_iter().flatten() {
            self.changed_in.insert(key, generation);
        }
        if change == Change::Paths {
            self.forget_watches();
        }
    }

    /// After a change that can make a watched path lead to another directory than the
    /// one its watch is on (a directory above it was moved, say), every watch is
    /// dropped, with its queue, and the next layout adds them again.
    fn forget_watches(&mut self) {
        // SAFETY: no pointers; the result is checked.
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        if fd >= 0 {
            // SAFETY: a fresh descriptor owned by nobody else; the old queue closes
            // with its watches.
            self.queue = unsafe { OwnedFd::from_raw_fd(fd) };
        }
        self.by_descriptor.clear();
        self.descriptors.clear();
    }

    /// Empties the queue; the most any event changed. The names that changed go to
    /// `changed` by key, `None` for the directory itself.
    fn read_queue(&mut self, changed: &mut Vec<Option<u64>>) -> Change {
        const HEADER: usize = std::mem::size_of::<libc::inotify_event>();
        let mut counts = Change::None;
        // Aligned for the event headers read out of it.
        let mut buf = vec![0u64; 1024];
        loop {
            // SAFETY: reading into an owned buffer of that many bytes.
            let got = unsafe {
                libc::read(
                    self.queue.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len() * 8,
                )
            };
            if got <= 0 {
                return counts;
            }
            // SAFETY: the buffer's bytes, as many as were read.
            let bytes =
                unsafe { std::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), got as usize) };
            let mut at = 0;
            while at + HEADER <= bytes.len() {
                // SAFETY: a whole header lies at `at` (the kernel writes whole events).
                let event = unsafe {
                    std::ptr::read_unaligned(bytes[at..].as_ptr().cast::<libc::inotify_event>())
                };
                let name_bytes = bytes
                    .get(at + HEADER..at + HEADER + event.len as usize)
                    .unwrap_or_default();
                let name = name_bytes.split(|b| *b == 0).next().unwrap_or_default();
                let (change, key) = self.counts(event.wd, event.mask, name);
                if change > Change::None {
                    changed.push(key);
                }
                counts = counts.max(change);
                at += HEADER + event.len as usize;
            }
        }
    }

    /// What an event changed, and the key of the name it concerns (`None`: the
    /// directory itself, or no telling).
    fn counts(&self, wd: i32, mask: u32, name: &[u8]) -> (Change, Option<u64>) {
        if mask & UNKNOWABLE != 0 {
            return (Change::Paths, None);
        }
        let key = match self.by_descriptor.get(&wd) {
            Some(_) if name.is_empty() => None,
            Some(dir) => {
                let key = self.name_key(dir, name);
                if !self.names.contains(&key) {
                    return (Change::None, None);
                }
                Some(key)
            }
            None => return (Change::Paths, None),
        };
        if mask & REDIRECTING != 0 {
            (Change::Paths, key)
        } else {
            (Change::Names, key)
        }
    }

    fn name_key(&self, dir: &[u8], name: &[u8]) -> u64 {
        use std::hash::BuildHasher;
        self.keys.hash_one((dir, name))
    }

    /// Watches `dir`; false when it cannot be watched or is not on a local filesystem.
    fn add(&mut self, dir: &[u8]) -> bool {
        if self.descriptors.contains_key(dir) {
            return true;
        }
        let Ok(name) = CString::new(dir) else {
            return false;
        };
        // SAFETY: a NUL-terminated path and a zeroed buffer the call fills.
        let local = unsafe {
            let mut fs: libc::statfs = std::mem::zeroed();
            libc::statfs(name.as_ptr(), &mut fs) == 0
                && LOCAL_FILESYSTEMS.contains(&(fs.f_type as i64))
        };
        if !local {
            return false;
        }
        // SAFETY: a valid inotify descriptor and a NUL-terminated path.
        let wd = unsafe { libc::inotify_add_watch(self.queue.as_raw_fd(), name.as_ptr(), EVENTS) };
        if wd < 0 {
            return false;
        }
        self.by_descriptor.insert(wd, dir.to_vec());
        self.descriptors.insert(dir.to_vec(), wd);
        true
    }
}

/// How many layouts this process works out before it starts watching.
const WATCH_FROM_LAYOUT: u32 = 3;

/// Counts one more layout worked out; whether the process has worked out enough of
/// them for a watch to pay for itself (it is then always worth it).
pub(crate) fn worth_watching() -> bool {
    use std::sync::atomic::{AtomicU32, Ordering};
    static WORKED_OUT: AtomicU32 = AtomicU32::new(0);
    WORKED_OUT
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
            (n < WATCH_FROM_LAYOUT).then_some(n + 1)
        })
        .is_err()
}

/// The current generation of changes; `None` when this machine offers no watch.
pub(crate) fn generation() -> Option<u64> {
    let mut slot = slot().lock().unwrap_or_else(|p| p.into_inner());
    let watch = slot.as_mut()?;
    watch.take_events();
    Some(watch.generation)
}

/// Watches every directory of `lookups` for a change of its name; the generation to
/// compare later with when all are watched, `None` when one cannot be. Lookups made
/// before this call may predate a change the watch did not see: a layout is trusted only
/// from lookups made after it.
pub(crate) fn watch(lookups: &[Lookup]) -> Option<u64> {
    let mut slot = slot().lock().unwrap_or_else(|p| p.into_inner());
    let watch = slot.as_mut()?;
    let dirs: HashSet<&[u8]> = lookups.iter().map(|(dir, _)| dir.as_slice()).collect();
    if !dirs.into_iter().all(|dir| watch.add(dir)) {
        return None;
    }
    let keys: Vec<u64> = lookups
        .iter()
        .map(|(dir, name)| watch.name_key(dir, name))
        .collect();
    watch.names.extend(keys);
    watch.take_events();
    Some(watch.generation)
}

/// The keys of the names of `lookups`, when every directory of them is watched for the
/// names looked up there; for [`unchanged_since`].
pub(crate) fn covering_keys(lookups: &[Lookup]) -> Option<Vec<u64>> {
    let slot = slot().lock().unwrap_or_else(|p| p.into_inner());
    let watch = slot.as_ref()?;
    lookups
        .iter()
        .map(|(dir, name)| {
            let key = watch.name_key(dir, name);
            (watch.descriptors.contains_key(dir) && watch.names.contains(&key)).then_some(key)
        })
        .collect()
}

/// Whether none of the names behind `keys` (from [`covering_keys`]) has changed since
/// generation `since`, nor anything every layout depends on; the generation now when
/// so, to be asked about next time.
pub(crate) fn unchanged_since(since: u64, keys: &[u64]) -> Option<u64> {
    let mut slot = slot().lock().unwrap_or_else(|p| p.into_inner());
    let watch = slot.as_mut()?;
    watch.take_events();
    let unchanged = watch.generation == since
        || (watch.all_changed_in <= since
            && keys
                .iter()
                .all(|key| watch.changed_in.get(key).is_none_or(|&g| g <= since)));
    unchanged.then_some(watch.generation)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;

    fn lookup(dir: &std::path::Path, name: &str) -> Lookup {
        (
            dir.as_os_str().as_bytes().to_vec(),
            name.as_bytes().to_vec(),
        )
    }

    /// The watch is one for the process: tests that count its changes take turns.
    fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
        static TURN: Mutex<()> = Mutex::new(());
        TURN.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What a change leaves of the watches.
    #[derive(PartialEq, Eq, Debug)]
    enum Kept {
        Watches,
        Nothing,
    }

    #[test]
    fn only_changes_of_the_names_looked_up_count() {
        let _turn = one_at_a_time();
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir(base.join("home")).unwrap();
        let home = base.join("home");
        let lookups = vec![
            lookup(&base, "home"),
            lookup(&home, ".ssh"),
            lookup(&home, ".bashrc"),
        ];
        let Some(start) = watch(&lookups) else {
            return eprintln!("no watch on this machine: skipped");
        };
        assert!(covering_keys(&lookups).is_some());
        assert!(covering_keys(&[lookup(&home, ".aws")]).is_none());
        // Other names in a watched directory do not count.
        std::fs::write(home.join("notes.txt"), b"x").unwrap();
        std::fs::create_dir(home.join("project")).unwrap();
        std::fs::rename(home.join("notes.txt"), home.join("todo.txt")).unwrap();
        assert_eq!(generation(), Some(start));
        let mut last = start;
        // Each change counts once. A name created or an attribute changed keeps the
        // watches; after a removal or a move nothing is taken as watched until watched
        // again.
        let seen = |last: &mut u64, what: &str, kept: Kept| {
            assert_ne!(generation().unwrap(), *last, "{what} was not seen");
            assert_eq!(
                covering_keys(&lookups).is_some(),
                kept == Kept::Watches,
                "{what}"
            );
            *last = watch(&lookups).unwrap();
            assert!(covering_keys(&lookups).is_some());
        };
        let mut changed = |what: &str, kept: Kept| seen(&mut last, what, kept);
        std::fs::create_dir(home.join(".ssh")).unwrap();
        changed("a looked-up name created", Kept::Watches);
        std::fs::rename(home.join("todo.txt"), home.join(".bashrc")).unwrap();
        changed("a file renamed to a looked-up name", Kept::Nothing);
        std::fs::set_permissions(
            home.join(".ssh"),
            std::os::unix::fs::PermissionsExt::from_mode(0o700),
        )
        .unwrap();
        changed("a looked-up name's attributes", Kept::Watches);
        std::fs::set_permissions(&home, std::os::unix::fs::PermissionsExt::from_mode(0o750))
            .unwrap();
        changed("the watched directory's attributes", Kept::Watches);
        std::fs::remove_file(home.join(".bashrc")).unwrap();
        changed("a looked-up name removed", Kept::Nothing);
        std::fs::rename(&home, base.join("elsewhere")).unwrap();
        assert_ne!(generation(), Some(last), "the watched directory moved");
        // A directory made where the moved one was is watched by its path, afresh.
        std::fs::create_dir(&home).unwrap();
        let mut last = watch(&lookups).unwrap();
        std::fs::create_dir(home.join(".ssh")).unwrap();
        seen(
            &mut last,
            "a looked-up name created in the new directory",
            Kept::Watches,
        );
        std::fs::write(base.join("elsewhere/.bashrc"), b"").unwrap();
        assert_eq!(
            generation(),
            Some(last),
            "the moved directory is no longer watched"
        );
    }

    #[test]
    fn a_change_of_one_layouts_name_leaves_the_others_current() {
        let _turn = one_at_a_time();
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let first = vec![lookup(&base, "task-a"), lookup(&base, ".ssh")];
        let second = vec![lookup(&base, "task-b"), lookup(&base, ".ssh")];
        let Some(start) = watch(&first) else {
            return eprintln!("no watch on this machine: skipped");
        };
        assert_eq!(watch(&second), Some(start));
        let first_keys = covering_keys(&first).unwrap();
        let second_keys = covering_keys(&second).unwrap();
        // The second task's directory made: only its layout is out of date.
        std::fs::create_dir(base.join("task-b")).unwrap();
        let now = unchanged_since(start, &first_keys).expect("the first layout stays current");
        assert_ne!(now, start, "the change was seen");
        assert_eq!(unchanged_since(start, &second_keys), None);
        assert_eq!(unchanged_since(now, &second_keys), Some(now));
        // A name both looked up: neither stays.
        std::fs::create_dir(base.join(".ssh")).unwrap();
        assert_eq!(unchanged_since(now, &first_keys), None);
        assert_eq!(unchanged_since(now, &second_keys), None);
        // A path that may lead elsewhere: no layout stays, whatever it looked up.
        let later = generation().unwrap();
        std::fs::remove_dir(base.join("task-b")).unwrap();
        assert_eq!(unchanged_since(later, &first_keys), None);
    }
}
