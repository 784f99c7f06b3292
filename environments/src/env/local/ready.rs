//! A task's next foreground shell, started as soon as the previous command has ended: it
//! has already sourced the task's snapshot and waits for the rest of its script. So the
//! fork and exec of bash and the restoring of the shell state are done between commands,
//! not on the way to the next command's result.
//!
//! The script is written into a memory file (descriptor 3), then one line on a pipe
//! (descriptor 4) says it is there. bash reads a pipe a byte at a time but a seekable file
//! in blocks, so the script costs a few reads whatever its length.
//!
//! A waiting shell is used only when it is what a fresh start would be: the same
//! restore step, the same environment, and (inside the sandbox) a sandbox whose walls a
//! fresh one would still get. Anything else retires it and the command starts as usual.

use super::super::{ReadEvent, Running};
use std::ffi::OsString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

/// Where a waiting shell runs.
pub(super) enum Waiting {
    /// In the task's long-lived sandbox, started by its launcher.
    Launched(super::Launched),
    /// A child of this process (sandbox `off`).
    Child(super::spawn::Spawned),
}

impl Waiting {
    fn into_running(self) -> Box<dyn Running> {
        match self {
            Waiting::Launched(run) => Box::new(run),
            Waiting::Child(run) => Box::new(run),
        }
    }

    fn running(&mut self) -> &mut dyn Running {
        match self {
            Waiting::Launched(run) => run,
            Waiting::Child(run) => run,
        }
    }
}

pub(super) struct ReadyShell {
    restore: String,
    env: Vec<(OsString, OsString)>,
    /// The shell's descriptor 3, where its script goes.
    script: std::fs::File,
    /// The write end of the shell's descriptor 4: a line there says the script is in.
    go: OwnedFd,
    pub(super) waiting: Waiting,
}

/// What a waiting shell runs: the restore step, then, once a line arrives on descriptor
/// 4, the rest of its script, read up to a NUL from descriptor 3. Without the line (the
/// pipe closed first) or the NUL, it runs nothing: the shell exits 125.
pub(super) fn prelude(restore: &str) -> String {
    format!(
        "{restore}builtin read -r __hermes_body <&4 && IFS= builtin read -r -d '' __hermes_body <&3 || builtin exit 125\n\
         builtin exec 3<&- 4<&-\nbuiltin eval \"$__hermes_body\"\n"
    )
}

/// The descriptors a waiting shell gets as 3 and 4, and the ends of them kept here.
pub(super) struct Channel {
    pub(super) script: std::fs::File,
    pub(super) go_read: OwnedFd,
    go_write: OwnedFd,
}

impl Channel {
    pub(super) fn new() -> std::io::Result<Channel> {
        // SAFETY: memfd_create returns a new descriptor or -1.
        let fd = unsafe { libc::memfd_create(c"hermes-script".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor owned by nobody else.
        let script = std::fs::File::from(unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) });
        let (go_read, go_write) = super::super::pipe()?;
        Ok(Channel { script, go_read, go_write })
    }
}

impl ReadyShell {
    /// `channel`'s shell ends (its descriptors 3 and 4) are dropped here: the shell has them.
    pub(super) fn new(restore: &str, env: Vec<(OsString, OsString)>, channel: Channel, waiting: Waiting) -> ReadyShell {
        let Channel { script, go_write, .. } = channel;
        ReadyShell { restore: restore.to_string(), env, script, go: go_write, waiting }
    }

    /// Whether this shell ran `restore` in `env`.
    pub(super) fn matches(&self, restore: &str, env: &[(OsString, OsString)]) -> bool {
        self.restore == restore && self.env == env
    }

    /// Gives the shell `body` to run; the shell back when it cannot take it (it is gone,
    /// or the body holds a NUL), for [`ReadyShell::retire`].
    pub(super) fn hand_over(mut self, body: &str) -> Result<Box<dyn Running>, ReadyShell> {
        use std::os::unix::fs::FileExt;
        if body.contains('\0') || self.waiting.running().try_wait().is_some() {
            return Err(self);
        }
        // At offset 0 without moving the shared offset, which the shell reads from.
        let message = format!("builtin unset __hermes_body\n{body}\0");
        if self.script.write_all_at(message.as_bytes(), 0).is_err() || !write_without_waiting(&self.go, b"\n") {
            return Err(self);
        }
        Ok(self.waiting.into_running())
    }

    /// Ends a shell that will not be used: with its pipe closed it exits without running
    /// anything (and is killed should it not, within a second).
    pub(super) fn retire(self) {
        let ReadyShell { go, mut waiting, .. } = self;
        drop(go);
        let run = waiting.running();
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

/// Writes all of `bytes` if the pipe takes them without blocking; false otherwise.
fn write_without_waiting(pipe: &OwnedFd, bytes: &[u8]) -> bool {
    let fd = pipe.as_raw_fd();
    // SAFETY: fcntl on a descriptor we own.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags < 0 || libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) < 0 {
            return false;
        }
    }
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
