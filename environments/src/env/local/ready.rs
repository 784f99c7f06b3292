//! A task's next foreground shell, started as soon as the previous command has ended: it
//! has already sourced the task's snapshot and waits on descriptor 3 for the rest of its
//! script. So the fork and exec of bash and the restoring of the shell state are done
//! between commands, not on the way to the next command's result.
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

/// The largest script handed to a waiting shell: a page, what every pipe holds, so the
/// write never depends on how fast the shell reads. bash reads a pipe a byte at a time,
/// so a longer script is quicker on a fresh shell's command line anyway.
const MOST_BODY_BYTES: usize = 4096;

pub(super) struct ReadyShell {
    restore: String,
    env: Vec<(OsString, OsString)>,
    /// The write end of the shell's descriptor 3.
    script: OwnedFd,
    pub(super) waiting: Waiting,
}

/// What a waiting shell runs: the restore step, then the rest of its script, read up to a
/// NUL from descriptor 3. A script that never arrives whole (the pipe closed first) runs
/// nothing: the shell exits 125.
pub(super) fn prelude(restore: &str) -> String {
    format!(
        "{restore}IFS= builtin read -r -d '' __hermes_body <&3 || builtin exit 125\n\
         builtin exec 3<&-\nbuiltin eval \"$__hermes_body\"\n"
    )
}

impl ReadyShell {
    pub(super) fn new(restore: &str, env: Vec<(OsString, OsString)>, script: OwnedFd, waiting: Waiting) -> ReadyShell {
        ReadyShell { restore: restore.to_string(), env, script, waiting }
    }

    /// Whether this shell ran `restore` in `env`.
    pub(super) fn matches(&self, restore: &str, env: &[(OsString, OsString)]) -> bool {
        self.restore == restore && self.env == env
    }

    /// Gives the shell `body` to run; the shell back when it cannot take it whole at once
    /// (it is gone, the body holds a NUL or is larger than [`MOST_BODY_BYTES`], or the
    /// pipe is full), for [`ReadyShell::retire`].
    pub(super) fn hand_over(mut self, body: &str) -> Result<Box<dyn Running>, ReadyShell> {
        if body.len() > MOST_BODY_BYTES || body.contains('\0') || self.waiting.running().try_wait().is_some() {
            return Err(self);
        }
        let message = format!("builtin unset __hermes_body\n{body}\0");
        if !write_without_waiting(&self.script, message.as_bytes()) {
            return Err(self);
        }
        Ok(self.waiting.into_running())
    }

    /// Ends a shell that will not be used: with its pipe closed it exits without running
    /// anything (and is killed should it not, within a second).
    pub(super) fn retire(self) {
        let ReadyShell { script, mut waiting, .. } = self;
        drop(script);
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

/// Writes all of `bytes` if the pipe takes them without blocking; false otherwise (what
/// was written stays incomplete: no NUL arrived, so the shell runs none of it).
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
