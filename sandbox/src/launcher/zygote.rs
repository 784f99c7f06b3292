//! One process, started once from the launcher program, that forks each new sandbox's
//! wall, so a start costs a fork of a small process instead of an exec of the whole
//! program.
//!
//! The program is large (about 55 MB, 86 000 relative relocations): every exec made the
//! dynamic linker rewrite 1.6 MB of it, which took a good share of a sandbox start's
//! CPU time and stayed as private memory in every sandbox (about 1.9 MB each). A wall
//! forked from the zygote shares the relocated pages with it and with every other wall.
//!
//! The zygote runs nothing else: it is single-threaded (a fork copies only the calling
//! thread, so it must not hold another thread's locks), has no environment and no
//! descriptors but its channel, and each child it forks becomes the wall exactly as an
//! exec would have made it (the same program image, started from the same file, the
//! same descriptors at the same numbers). It ends when the server's end of the channel
//! closes, which the server does once no wall it forked is left (or at exit); the walls
//! it forked set their parent-death signal on it, so none outlives it.
//!
//! A request carries the wall's arguments and its descriptors (the launcher's channel,
//! the program, and the proxy's channel when there is one); the answer carries the
//! wall's pid and a pidfd, through which the server watches and signals it. The zygote
//! reaps its children; a pidfd shows an exit before the reaping.

use super::protocol;
use std::ffi::{CString, OsString};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStringExt;
use std::sync::{Arc, Mutex};

/// The argument that turns the program into the zygote.
pub(crate) const ZYGOTE_ARG: &str = "__hermes-sandbox-zygote";
/// Where the zygote finds its channel.
const CHANNEL_FD: RawFd = 3;

/// A wall started by the zygote: its pid on this machine and a pidfd for it.
pub(super) struct Forked {
    pub(super) pid: libc::pid_t,
    pub(super) pidfd: OwnedFd,
}

/// A running zygote, our child.
struct Zygote {
    /// The descriptor of the program it was started from.
    program: RawFd,
    channel: OwnedFd,
    process: super::Process,
}

impl Drop for Zygote {
    /// Closes the channel, which ends the zygote once its walls have ended, and reaps it
    /// (after at most a few seconds, by force).
    fn drop(&mut self) {
        // SAFETY: shutting down our own socket; the descriptor closes after this.
        unsafe { libc::shutdown(self.channel.as_raw_fd(), libc::SHUT_RDWR) };
        self.process.end_within(std::time::Duration::from_secs(3));
    }
}

/// The zygote, and how many walls it forked are still watched by a [`super::Sandbox`].
struct State {
    zygote: Option<Zygote>,
    walls: usize,
}

fn state() -> std::sync::MutexGuard<'static, State> {
    static STATE: Mutex<State> = Mutex::new(State {
        zygote: None,
        walls: 0,
    });
    STATE.lock().unwrap_or_else(|p| p.into_inner())
}

/// Ends the zygote, once the walls it forked have ended, and reaps it (for a process
/// that is about to exit and has ended its sandboxes). A later start begins a new one.
pub fn end() {
    let zygote = state().zygote.take();
    drop(zygote);
}

/// A wall the zygote forked has ended. With none left the zygote ends too: a server
/// whose tasks are all idle (cooled down) or gone holds no process for them; the next
/// start begins a new zygote.
pub(super) fn wall_ended() {
    let zygote = {
        let mut state = state();
        state.walls = state.walls.saturating_sub(1);
        if state.walls > 0 {
            return;
        }
        state.zygote.take()
    };
    drop(zygote);
}

/// Has the zygote (started now if need be) fork a wall with `args` (those after the
/// program's path) and `fds` placed at the numbers given. An error leaves no zygote
/// behind (the next start tries a new one); the caller then starts the wall itself.
pub(super) fn fork_wall(
    program: &Arc<OwnedFd>,
    args: &[CString],
    fds: &[(OwnedFd, RawFd)],
) -> std::io::Result<Forked> {
    let mut state = state();
    if state
        .zygote
        .as_ref()
        .is_none_or(|running| running.program != program.as_raw_fd())
    {
        state.zygote = None;
        state.zygote = Some(start(program)?);
    }
    let running = state.zygote.as_ref().expect("started above");
    match ask(&running.channel, args, fds) {
        Ok(answer) => {
            if answer.is_ok() {
                state.walls += 1;
            }
            answer
        }
        Err(broken) => {
            // It has ended (it may have just seen its last wall end), or it is of no
            // use: its walls go with it (their parent-death signal).
            state.zygote = None;
            Err(broken)
        }
    }
}

/// The zygote's answer (an error when it could not fork this wall); an error of its
/// own when the channel is broken.
fn ask(
    channel: &OwnedFd,
    args: &[CString],
    fds: &[(OwnedFd, RawFd)],
) -> std::io::Result<std::io::Result<Forked>> {
    let targets = fds
        .iter()
        .map(|(_, to)| to.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let mut fields: Vec<&[u8]> = vec![targets.as_bytes()];
    fields.extend(args.iter().map(|a| a.as_bytes()));
    let raw: Vec<RawFd> = fds.iter().map(|(fd, _)| fd.as_raw_fd()).collect();
    protocol::send(channel, &fields, &raw)?;
    let (fields, mut fds) = protocol::receive_fields(channel)?
        .ok_or_else(|| std::io::Error::other("the sandbox zygote ended"))?;
    let pid = fields
        .first()
        .and_then(|f| std::str::from_utf8(f).ok()?.parse().ok());
    Ok(match (pid, fds.pop()) {
        (Some(pid), Some(pidfd)) => Ok(Forked { pid, pidfd }),
        _ => Err(std::io::Error::other(
            "the sandbox zygote could not fork a wall",
        )),
    })
}

/// Starts the zygote from the launcher program, on a long-lived launcher thread (see
/// [`crate::spawn_scoped`]).
fn start(program: &Arc<OwnedFd>) -> std::io::Result<Zygote> {
    let (ours, theirs) = protocol::socket_pair()?;
    let argv = [
        format!("/proc/self/fd/{}", program.as_raw_fd()),
        ZYGOTE_ARG.to_string(),
    ]
    .map(|arg| CString::new(arg).expect("no NUL"));
    let pid = super::spawn_program(argv.into(), vec![(theirs, CHANNEL_FD)])?;
    Ok(Zygote {
        program: program.as_raw_fd(),
        channel: ours,
        process: super::Process::child(pid),
    })
}

/// The zygote's loop, in a process started with [`ZYGOTE_ARG`]; its exit status.
pub(crate) fn serve() -> i32 {
    // Only a server starts the zygote, with the channel in place.
    if !protocol::is_socket(CHANNEL_FD) {
        eprintln!("{ZYGOTE_ARG} is only run by the terminal's sandbox launcher");
        return 2;
    }
    // SAFETY: the descriptor was placed there by the server; ours from here on.
    let channel = unsafe { OwnedFd::from_raw_fd(CHANNEL_FD) };
    let ends = WallEnds::watch();
    loop {
        if ends.as_ref().is_none_or(WallEnds::seen) {
            super::inside::reap(-1, &mut None);
        }
        // Woken at least once a second, so no ended wall stays a zombie for long should
        // an end go unseen.
        let woken = match &ends {
            Some(ends) => super::poll_any_readable([CHANNEL_FD, ends.fd.as_raw_fd()], SECOND),
            None => super::poll_readable(CHANNEL_FD, SECOND),
        };
        if woken == 0 {
            if let Some(ends) = &ends {
                ends.missed.set(true);
            }
            continue;
        }
        if super::poll_readable(CHANNEL_FD, std::time::Duration::ZERO) <= 0 {
            continue;
        }
        match protocol::receive_fields(&channel) {
            Ok(Some((fields, fds))) => {
                let answer = fork_one(&channel, ends.as_ref(), fields, fds);
                let sent = match &answer {
                    Some(forked) => protocol::send(
                        &channel,
                        &[forked.pid.to_string().as_bytes()],
                        &[forked.pidfd.as_raw_fd()],
                    ),
                    None => protocol::send(&channel, &[b"failed"], &[]),
                };
                if sent.is_err() {
                    return 0;
                }
            }
            // The server is done, or gone: its sandboxes end with their channels. Their
            // ends are waited for (and their CPU time counted in ours) for a while; the
            // parent-death signal takes whatever is left when we go.
            Ok(None) | Err(_) => {
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
                while super::inside::reap(-1, &mut None) && std::time::Instant::now() < deadline {
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
                return 0;
            }
        }
    }
}

const SECOND: std::time::Duration = std::time::Duration::from_secs(1);

/// The zygote learns of its walls' ends from a signalfd (SIGCHLD blocked) and reaps only
/// then: a wait for any child walks the list of every child, so reaping at each start
/// made a start cost more the more walls were alive.
struct WallEnds {
    fd: OwnedFd,
    /// The signal mask before SIGCHLD was blocked, which each wall gets back.
    before: libc::sigset_t,
    /// The once-a-second wake-up came: reap then as well.
    missed: std::cell::Cell<bool>,
}

impl WallEnds {
    /// `None` when the signalfd cannot be made: then the zygote reaps at every wake-up.
    fn watch() -> Option<WallEnds> {
        // SAFETY: signal sets built in place; this process is single-threaded, so the
        // mask it changes is the only one.
        unsafe {
            let mut child_ended: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut child_ended);
            libc::sigaddset(&mut child_ended, libc::SIGCHLD);
            let mut before: libc::sigset_t = std::mem::zeroed();
            if libc::sigprocmask(libc::SIG_BLOCK, &child_ended, &mut before) != 0 {
                return None;
            }
            let fd = libc::signalfd(-1, &child_ended, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK);
            if fd < 0 {
                libc::sigprocmask(libc::SIG_SETMASK, &before, std::ptr::null_mut());
                return None;
            }
            Some(WallEnds {
                fd: OwnedFd::from_raw_fd(fd),
                before,
                missed: std::cell::Cell::new(false),
            })
        }
    }

    /// Whether a wall ended (or may have) since the last call; the signals read.
    fn seen(&self) -> bool {
        let mut seen = self.missed.replace(false);
        let mut info = std::mem::MaybeUninit::<libc::signalfd_siginfo>::uninit();
        let size = std::mem::size_of::<libc::signalfd_siginfo>();
        // SAFETY: reading whole records into a buffer of one record's size.
        while unsafe { libc::read(self.fd.as_raw_fd(), info.as_mut_ptr().cast(), size) }
            == size as isize
        {
            seen = true;
        }
        seen
    }

    /// In a forked wall: the signal mask as it was, the signalfd closed.
    fn leave(&self) {
        // SAFETY: restoring a mask saved above; closing our copy of the signalfd.
        unsafe {
            libc::sigprocmask(libc::SIG_SETMASK, &self.before, std::ptr::null_mut());
            libc::close(self.fd.as_raw_fd());
        }
    }
}

/// Forks the wall a request describes: the first field names the descriptor numbers the
/// attached descriptors take, the rest are the wall's arguments.
fn fork_one(
    channel: &OwnedFd,
    ends: Option<&WallEnds>,
    mut fields: Vec<Vec<u8>>,
    fds: Vec<OwnedFd>,
) -> Option<Forked> {
    if fields.is_empty() {
        return None;
    }
    let targets: Vec<RawFd> = String::from_utf8(fields.remove(0))
        .ok()?
        .split(',')
        .filter(|t| !t.is_empty())
        .map(|t| t.parse().ok())
        .collect::<Option<_>>()?;
    if targets.len() != fds.len() {
        return None;
    }
    let args: Vec<OsString> = fields.into_iter().map(OsString::from_vec).collect();
    if args.first().is_none_or(|a| *a != crate::wall::WALL_ARG) {
        return None;
    }
    // SAFETY: this process is single-threaded, so the child may run ordinary code.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return None;
    }
    if pid == 0 {
        // The child: the descriptors where the wall expects them, nothing else of ours.
        if let Some(ends) = ends {
            ends.leave();
        }
        if !place(channel, fds, &targets) {
            // SAFETY: ending the child without running the parent's exit handlers.
            unsafe { libc::_exit(127) };
        }
        let code = crate::wall::serve_args(args.into_iter().skip(1));
        // SAFETY: as above; the wall has flushed what it printed.
        unsafe { libc::_exit(code) };
    }
    drop(fds);
    // SAFETY: pidfd_open on our own child, which is not reaped before this answer.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if pidfd < 0 {
        // SAFETY: our own child, which must not run without the server watching it.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        return None;
    }
    Some(Forked {
        pid,
        // SAFETY: a fresh descriptor owned by nobody else.
        pidfd: unsafe { OwnedFd::from_raw_fd(pidfd as RawFd) },
    })
}

/// In the forked child: `fds` at `targets` (left open for the wall's own exec, should it
/// make one), the zygote's channel and the descriptors as received closed. Those were
/// received at whatever numbers were free here, which may be a target's: they are
/// closed before anything is placed, never after.
fn place(channel: &OwnedFd, fds: Vec<OwnedFd>, targets: &[RawFd]) -> bool {
    let floor = targets.iter().copied().max().unwrap_or(0) + 1;
    // Copied above every target first, so no placement overwrites another's source.
    let mut copies = Vec::new();
    for fd in &fds {
        match super::copy_above(fd, floor) {
            Ok(copy) => copies.push(copy),
            Err(_) => return false,
        }
    }
    drop(fds);
    // SAFETY: closing our copy of the channel; the parent keeps its own.
    unsafe { libc::close(channel.as_raw_fd()) };
    for (copy, to) in copies.iter().zip(targets) {
        // SAFETY: dup2 onto a number we own from here on.
        if unsafe { libc::dup2(copy.as_raw_fd(), *to) } < 0 {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    fn inode(fd: RawFd) -> Option<u64> {
        // SAFETY: fstat into a zeroed structure; a closed descriptor is an error.
        unsafe {
            let mut stat: libc::stat = std::mem::zeroed();
            (libc::fstat(fd, &mut stat) == 0).then_some(stat.st_ino)
        }
    }

    /// Descriptors received at a number a placement targets (as when the zygote holds
    /// one more descriptor than usual) still end up where the wall expects them.
    #[test]
    fn a_descriptor_received_at_a_target_number_is_placed_all_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let files: Vec<std::fs::File> = (0..3)
            .map(|i| std::fs::File::create(dir.path().join(i.to_string())).unwrap())
            .collect();
        let inodes: Vec<u64> = files.iter().map(|f| f.metadata().unwrap().ino()).collect();
        // The received descriptors take numbers 940, 941 and 942 (far above what other
        // tests open meanwhile), and the wall wants the first at 944, the second at 943 and
        // the third at 940: where the first was received.
        let received: Vec<OwnedFd> = files
            .into_iter()
            .zip(940..)
            .map(|(file, at)| {
                // SAFETY: dup3 onto a number this test owns; the copy is ours.
                let fd = unsafe { libc::dup3(file.as_raw_fd(), at, libc::O_CLOEXEC) };
                assert_eq!(fd, at);
                // SAFETY: a fresh descriptor owned by nobody else.
                unsafe { OwnedFd::from_raw_fd(fd) }
            })
            .collect();
        let targets = [944, 943, 940];
        let (channel, _other) = protocol::socket_pair().unwrap();
        // SAFETY: the child runs fcntl, dup2, close and fstat (and glibc's allocator, which
        // its fork leaves usable) before _exit.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            let placed = place(&channel, received, &targets);
            let right = targets
                .iter()
                .zip(&inodes)
                .all(|(to, ino)| inode(*to) == Some(*ino));
            let gone = [941, 942].iter().all(|fd| inode(*fd).is_none());
            // SAFETY: ends the forked child without the parent's exit handlers.
            unsafe {
                libc::_exit(if !placed {
                    1
                } else if !right {
                    2
                } else if !gone {
                    3
                } else {
                    0
                })
            };
        }
        let mut status = 0;
        // SAFETY: waiting for our own child.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(libc::WIFEXITED(status));
        let code = libc::WEXITSTATUS(status);
        assert_eq!(
            code, 0,
            "1: placing failed, 2: a target holds another file, 3: a received copy stayed open"
        );
    }
}
