//! A task's next foreground shell inside the sandbox, started as soon as the command
//! before it has ended (a sandbox's launcher runs one command at a time), or, for a task
//! whose commands come back to back, while the command before it runs, in the task's
//! second sandbox (see `LocalEnv::back_to_back`): it waits for a first line, then
//! sources the task's snapshot, then waits for the rest of its script. So the fork and
//! exec of bash and the restoring of the shell state are done beside or between
//! commands, not on the way to the next command's result. (Without the sandbox commands
//! are forked from a waiting bash instead: see `fork_server.rs`.)
//!
//! A shell started after the command before it knows the final snapshot: the exports it
//! changed come in its environment and the rest is in descriptor 5 from the start. One
//! started beside the command gets descriptor 5 empty, and the snapshot (made lighter
//! for the environment it started in) is written there before the first line is sent.
//!
//! The script is written into a memory file (descriptor 3); lines on a pipe (descriptor
//! 4) say when to restore and that the script is there. bash reads a pipe a byte at a
//! time but a seekable file in blocks, so the script costs a few reads whatever its
//! length.
//!
//! A waiting shell is used only when it is what a fresh start would be: the same
//! restore step, the same environment, and a sandbox whose walls a fresh one would
//! still get. Anything else retires it and the command starts as usual.

use super::super::{ReadEvent, Running};
use std::ffi::OsString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

pub(super) struct ReadyShell {
    restore: String,
    env: Vec<(OsString, OsString)>,
    /// The shell's descriptor 3, where its script goes.
    script: std::fs::File,
    /// The write end of the shell's descriptor 4: a first line says the snapshot may be
    /// sourced, a second that the script is in.
    go: OwnedFd,
    /// Whether the first line was sent.
    restoring: bool,
    /// The shell's descriptor 5, when what it sources to restore is written there only
    /// once it is told to restore (it was started while the command before it still ran).
    restore_later: Option<std::fs::File>,
    pub(super) waiting: super::Launched,
}

/// What a waiting shell runs: once a line arrives on descriptor 4, the restore step;
/// after a second line, the rest of its script, read up to a NUL from descriptor 3.
/// Without the lines (the pipe closed first) or the NUL, it runs nothing: the shell
/// exits 125. (`command exec`, unlike `builtin exec`, closes the descriptors for good.)
/// The waits name their own limit: a `TMOUT` the snapshot restores is the command's,
/// not a bound on how long the shell waits for it.
pub(super) fn prelude(restore: &str) -> String {
    format!(
        "builtin read -t {WAIT_LIMIT} -r __hermes_body <&4 || builtin exit 125\n\
         {restore}builtin read -t {WAIT_LIMIT} -r __hermes_body <&4 && IFS= builtin read -r -d '' __hermes_body <&3 || builtin exit 125\n\
         command exec 3<&- 4<&- 5<&-\nbuiltin eval \"$__hermes_body\"\n"
    )
}

/// Seconds: as good as no limit (the shell is retired when it is not used).
const WAIT_LIMIT: u32 = i32::MAX as u32;

/// The restore step of a waiting shell given the snapshot as its descriptor 5.
pub(super) const SOURCE_FD_5: &str = "builtin source /proc/self/fd/5 >/dev/null 2>&1\n";

/// A close-on-exec memory file holding `contents`.
pub(super) fn memory_file(contents: &[u8]) -> std::io::Result<std::fs::File> {
    use std::io::Write;
    let mut file = new_memory_file()?;
    file.write_all(contents)?;
    Ok(file)
}

fn new_memory_file() -> std::io::Result<std::fs::File> {
    // SAFETY: memfd_create returns a new descriptor or -1.
    let fd = unsafe { libc::memfd_create(c"hermes-script".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor owned by nobody else.
    Ok(std::fs::File::from(unsafe {
        <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd)
    }))
}

/// The descriptors a waiting shell gets as 3 and 4, and the ends of them kept here.
pub(super) struct Channel {
    pub(super) script: std::fs::File,
    pub(super) go_read: OwnedFd,
    go_write: OwnedFd,
}

impl Channel {
    pub(super) fn new() -> std::io::Result<Channel> {
        let script = new_memory_file()?;
        let (go_read, go_write) = super::super::pipe()?;
        // Never wait on the shell: a full pipe means it is not reading, and it is retired.
        // SAFETY: fcntl on a descriptor owned here.
        if unsafe { libc::fcntl(go_write.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Channel {
            script,
            go_read,
            go_write,
        })
    }

    /// The ends kept here once the shell has its own: the script file and the go pipe.
    pub(super) fn into_kept(self) -> (std::fs::File, OwnedFd) {
        (self.script, self.go_write)
    }
}

impl ReadyShell {
    /// `channel`'s shell ends (its descriptors 3 and 4) are dropped here: the shell has them.
    /// `restore_later`: the shell's descriptor 5, to be filled by [`ReadyShell::restore_now`].
    pub(super) fn new(
        restore: &str,
        env: Vec<(OsString, OsString)>,
        channel: Channel,
        restore_later: Option<std::fs::File>,
        waiting: super::Launched,
    ) -> ReadyShell {
        let (script, go_write) = channel.into_kept();
        ReadyShell {
            restore: restore.to_string(),
            env,
            script,
            go: go_write,
            restoring: false,
            restore_later,
            waiting,
        }
    }

    /// Whether this shell ran `restore` in `env`.
    pub(super) fn matches(&self, restore: &str, env: &[(OsString, OsString)]) -> bool {
        self.restore == restore && self.env == env
    }

    /// Lets the shell source the snapshot: to be called only once the command before it
    /// has ended (it wrote the snapshot last). `text` gives, for the environment the
    /// shell started in, what a shell started with a descriptor 5 to fill sources. False
    /// when the shell cannot be told (it is to be retired).
    pub(super) fn restore_now(
        &mut self,
        text: impl FnOnce(&[(OsString, OsString)]) -> Vec<u8>,
    ) -> bool {
        use std::os::unix::fs::FileExt;
        if self.restoring {
            return true;
        }
        if let Some(file) = &self.restore_later {
            if file.write_all_at(&text(&self.env), 0).is_err() {
                return false;
            }
        }
        self.restoring = write_without_waiting(&self.go, b"\n");
        self.restoring
    }

    /// Whether the shell has not yet read the line that lets it restore: it is still
    /// starting, so a command handed over now waits for it.
    pub(super) fn still_starting(&self) -> bool {
        let mut unread: libc::c_int = 0;
        // SAFETY: FIONREAD on a pipe we own stores the bytes not yet read into `unread`.
        let asked = unsafe { libc::ioctl(self.go.as_raw_fd(), libc::FIONREAD, &mut unread) };
        asked == 0 && unread > 0
    }

    /// Gives the shell `body` to run once it was told to restore; the shell back when it
    /// cannot take it (it is gone, or the body holds a NUL), for [`ReadyShell::retire`].
    // The shell handed back is the rare path, and moving it once costs nothing beside
    // the spawn it saves.
    #[allow(clippy::result_large_err)]
    pub(super) fn hand_over(mut self, body: &str) -> Result<Box<dyn Running>, ReadyShell> {
        use std::os::unix::fs::FileExt;
        if !self.restoring || body.contains('\0') || self.waiting.try_wait().is_some() {
            return Err(self);
        }
        // At offset 0 without moving the shared offset, which the shell reads from.
        let message = format!("builtin unset __hermes_body\n{body}\0");
        if self.script.write_all_at(message.as_bytes(), 0).is_err()
            || !write_without_waiting(&self.go, b"\n")
        {
            return Err(self);
        }
        Ok(Box::new(self.waiting))
    }

    /// Ends a shell that will not be used: with its pipe closed it exits without running
    /// anything (and is killed should it not, within a second).
    pub(super) fn retire(self) {
        let ReadyShell {
            go, mut waiting, ..
        } = self;
        drop(go);
        let run = &mut waiting;
        let deadline = Instant::now() + Duration::from_secs(1);
        while run.try_wait().is_none() {
            if Instant::now() >= deadline {
                run.kill(Duration::from_millis(100));
                return;
            }
            if let ReadEvent::Eof = run.read(Duration::from_millis(5)) {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
    }
}

/// Writes all of `bytes` if the (non-blocking) pipe takes them; false otherwise.
pub(super) fn write_without_waiting(pipe: &OwnedFd, bytes: &[u8]) -> bool {
    let fd = pipe.as_raw_fd();
    let mut rest = bytes;
    while !rest.is_empty() {
        // SAFETY: writing from a valid buffer.
        let n = unsafe { libc::write(fd, rest.as_ptr().cast(), rest.len()) };
        if n < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return false;
        }
        rest = &rest[n as usize..];
    }
    true
}
