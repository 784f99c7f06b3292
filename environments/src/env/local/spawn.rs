//! Starting a shell outside the sandbox with `posix_spawn`, which glibc does with
//! `clone(CLONE_VM | CLONE_VFORK)`: the server (large, multi-threaded) is not forked, so
//! its page tables are not copied and its next writes take no copy-on-write faults.
//! The child gets what a child of `ChildRun` gets: a session of its own, every signal at
//! its default and none blocked, output and errors on one pipe, no input, and here
//! descriptors of the caller's from 3 on.

use super::super::{pipe, ReadEvent, Running};
use std::ffi::{CString, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::Duration;

/// A shell started by [`spawn`].
pub(super) struct Spawned {
    pid: libc::pid_t,
    /// Readable once the shell has exited (`None` on kernels without pidfds).
    pidfd: Option<OwnedFd>,
    reader: Option<OwnedFd>,
    exit: Option<i32>,
}

fn c_string(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "a NUL byte in a command argument",
        )
    })
}

/// A close-on-exec copy of `fd` numbered 10 or above, so no placement below overwrites
/// another's source and a source already at its target still loses close-on-exec.
fn high_copy(fd: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: fcntl returns a new descriptor or -1.
    let copy = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 10) };
    if copy < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(copy) })
}

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(rc))
    }
}

/// Starts `argv` (program first, an absolute path) in `cwd` with exactly `env` and
/// `extra` as its descriptors 3, 4, ....
pub(super) fn spawn(
    argv: &[OsString],
    env: &[(OsString, OsString)],
    cwd: &Path,
    extra: &[&OwnedFd],
) -> io::Result<Spawned> {
    let args: Vec<CString> = argv
        .iter()
        .map(|a| c_string(a.as_bytes()))
        .collect::<io::Result<_>>()?;
    let vars: Vec<CString> = env
        .iter()
        .map(|(k, v)| c_string(&[k.as_bytes(), b"=", v.as_bytes()].concat()))
        .collect::<io::Result<_>>()?;
    let dir = c_string(cwd.as_os_str().as_bytes())?;
    let program = args
        .first()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no command to run"))?;
    let arg_ptrs: Vec<*mut libc::c_char> = args
        .iter()
        .map(|a| a.as_ptr() as *mut _)
        .chain([std::ptr::null_mut()])
        .collect();
    let env_ptrs: Vec<*mut libc::c_char> = vars
        .iter()
        .map(|v| v.as_ptr() as *mut _)
        .chain([std::ptr::null_mut()])
        .collect();
    let (read_end, write_end) = pipe()?;
    let output = high_copy(write_end.as_raw_fd())?;
    drop(write_end);
    let extra: Vec<OwnedFd> = extra
        .iter()
        .map(|fd| high_copy(fd.as_raw_fd()))
        .collect::<io::Result<_>>()?;
    // SAFETY: the attribute and file-action objects are initialised before use and
    // destroyed on every path; every pointer handed to posix_spawn outlives the call.
    unsafe {
        let mut actions: libc::posix_spawn_file_actions_t = std::mem::zeroed();
        let mut attr: libc::posix_spawnattr_t = std::mem::zeroed();
        check(libc::posix_spawn_file_actions_init(&mut actions))?;
        if let Err(e) = check(libc::posix_spawnattr_init(&mut attr)) {
            libc::posix_spawn_file_actions_destroy(&mut actions);
            return Err(e);
        }
        let result = (|| -> io::Result<libc::pid_t> {
            check(libc::posix_spawn_file_actions_adddup2(
                &mut actions,
                output.as_raw_fd(),
                1,
            ))?;
            check(libc::posix_spawn_file_actions_adddup2(
                &mut actions,
                output.as_raw_fd(),
                2,
            ))?;
            for (target, fd) in (3..).zip(&extra) {
                check(libc::posix_spawn_file_actions_adddup2(
                    &mut actions,
                    fd.as_raw_fd(),
                    target,
                ))?;
            }
            check(libc::posix_spawn_file_actions_addopen(
                &mut actions,
                0,
                c"/dev/null".as_ptr(),
                libc::O_RDONLY,
                0,
            ))?;
            check(libc::posix_spawn_file_actions_addchdir_np(
                &mut actions,
                dir.as_ptr(),
            ))?;
            let mut all: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut all);
            let mut none: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut none);
            check(libc::posix_spawnattr_setsigdefault(&mut attr, &all))?;
            check(libc::posix_spawnattr_setsigmask(&mut attr, &none))?;
            let flags = libc::POSIX_SPAWN_SETSID as libc::c_int
                | libc::POSIX_SPAWN_SETSIGDEF
                | libc::POSIX_SPAWN_SETSIGMASK;
            check(libc::posix_spawnattr_setflags(
                &mut attr,
                flags as libc::c_short,
            ))?;
            let mut pid: libc::pid_t = 0;
            check(libc::posix_spawn(
                &mut pid,
                program.as_ptr(),
                &actions,
                &attr,
                arg_ptrs.as_ptr(),
                env_ptrs.as_ptr(),
            ))?;
            Ok(pid)
        })();
        libc::posix_spawn_file_actions_destroy(&mut actions);
        libc::posix_spawnattr_destroy(&mut attr);
        let pid = result?;
        let pidfd = libc::syscall(libc::SYS_pidfd_open, pid, 0);
        let pidfd = (pidfd >= 0).then(|| OwnedFd::from_raw_fd(pidfd as RawFd));
        Ok(Spawned {
            pid,
            pidfd,
            reader: Some(read_end),
            exit: None,
        })
    }
}

impl Spawned {
    fn reap(&mut self) {
        if self.exit.is_none() {
            let mut raw = 0;
            // SAFETY: waitpid on our own child, without blocking.
            if unsafe { libc::waitpid(self.pid, &mut raw, libc::WNOHANG) } == self.pid {
                self.exit = Some(hermes_sandbox::launcher::status_code(raw));
            }
        }
    }
}

/// Reads `output` (waiting at most `wait`), closing it at its end.
pub(super) fn read_output(output: &mut Option<OwnedFd>, wait: Duration) -> ReadEvent {
    let Some(fd) = output.as_ref() else {
        return ReadEvent::Eof;
    };
    let event = super::super::read_pipe(fd, wait);
    if let ReadEvent::Eof = event {
        *output = None;
    }
    event
}

impl Running for Spawned {
    fn pid(&self) -> Option<u32> {
        Some(self.pid as u32)
    }

    fn read(&mut self, wait: Duration) -> ReadEvent {
        read_output(&mut self.reader, wait)
    }

    fn try_wait(&mut self) -> Option<i32> {
        self.reap();
        self.exit
    }

    fn wait_exit(&mut self, wait: Duration) -> Option<i32> {
        self.reap();
        if self.exit.is_none() {
            match &self.pidfd {
                Some(fd) => {
                    hermes_sandbox::launcher::poll_readable(fd.as_raw_fd(), wait);
                }
                None => std::thread::sleep(wait),
            }
            self.reap();
        }
        self.exit
    }

    fn kill(&mut self, grace: Duration) -> Vec<u32> {
        let pid = self.pid as u32;
        super::kill_tree(pid, grace, &mut || self.reap())
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        // Reap if finished; never block.
        self.reap();
    }
}
