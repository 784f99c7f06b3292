//! The launcher's side inside the sandbox: a loop that starts one command at a time and,
//! when the command's first process ends, kills everything else in the sandbox before
//! it answers — so, as with a sandbox per command, nothing a command started outlives it.

use super::protocol::{self, Request};
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

/// Serves requests on `control` until the server closes it; returns the exit status.
pub fn serve(control: RawFd) -> i32 {
    // SAFETY: plain syscalls on our own process and on a descriptor we were handed.
    unsafe {
        // The sweep signals every process this one may signal: only ever inside a
        // sandbox's own PID namespace, where bubblewrap's init is 1 and we are 2, and
        // only when started with the channel a server set up.
        if libc::getpid() != 2 || !protocol::is_socket(control) {
            eprintln!(
                "{} is only run by the terminal inside its sandbox",
                super::LAUNCHER_ARG
            );
            return 2;
        }
        if libc::fcntl(control, libc::F_SETFD, libc::FD_CLOEXEC) != 0 {
            return 2;
        }
        // Not dumpable: a command (same uid, no capabilities) can neither ptrace this
        // process nor take its descriptors (pidfd_getfd) or read its memory, so no
        // command reaches the next command's request.
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
        // Orphans of a command become our children, so the sweep can wait for all of them.
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        // Descriptors the server happened to pass down are no business of the commands.
        libc::syscall(libc::SYS_close_range, 3u32, (control - 1) as u32, 0u32);
        libc::syscall(libc::SYS_close_range, (control + 1) as u32, u32::MAX, 0u32);
    }
    // SAFETY: the descriptor is ours from here on.
    let control = unsafe { OwnedFd::from_raw_fd(control) };
    if protocol::send_line(&control, "ready").is_err() {
        return 2;
    }
    let mut kept = Kept::default();
    loop {
        kept.wait_for_request(&control);
        match protocol::receive(&control) {
            Ok(Some(Request::Run {
                keep,
                cwd,
                argv,
                env,
                output,
                extra,
            })) => {
                // A command started the usual way has the sandbox to itself, and a new
                // kept process replaces the one before.
                kept.end();
                let answer = if keep {
                    match start_kept(&cwd, &argv, &env, &output, &extra) {
                        Ok(pid) => {
                            kept.pid = Some(pid);
                            format!("kept {pid}")
                        }
                        Err(e) => format!("not kept {e}"),
                    }
                } else {
                    format!("exit {}", run(&control, &cwd, &argv, &env, output, extra))
                };
                if protocol::send_line(&control, &answer).is_err() {
                    return 0;
                }
            }
            // A command forked by the kept process is to stop (its timeout): everything
            // but the kept process is asked to end, then made to.
            Ok(Some(Request::Kill { grace })) if kept.pid.is_some() => {
                kept.terminate_others(grace);
                kept.sweep_others();
                if protocol::send_line(&control, "swept").is_err() {
                    return 0;
                }
            }
            // After a command it forked, or a kill that came once its command had ended.
            Ok(Some(Request::Kill { .. })) => {}
            Ok(Some(Request::Sweep)) => {
                kept.sweep_others();
                if protocol::send_line(&control, "swept").is_err() {
                    return 0;
                }
            }
            // The server closed the channel (or sent garbage): end everything and go.
            Ok(None) | Err(_) => {
                sweep(None, &mut None);
                return 0;
            }
        }
    }
}

/// Starts a process to keep: as a command, but nobody waits for it here.
fn start_kept(
    cwd: &[u8],
    argv: &[Vec<u8>],
    env: &[Vec<u8>],
    output: &OwnedFd,
    extra: &[OwnedFd],
) -> std::io::Result<libc::pid_t> {
    Exec::new(cwd, argv, env)
        .ok_or_else(|| std::io::Error::other("an empty or malformed command"))?
        .spawn(output, extra)
}

/// The process a server keeps in this sandbox between commands (a shell that forks
/// each command of the task): our child, spared by the sweep after each command it
/// forked. Its pid is never another process's while this holds it: an ended child stays
/// a zombie, its pid taken, until we reap it, and reaping it forgets it.
///
/// The sweep sends each other process of the namespace its own signal then, since
/// `kill(-1)` would reach the kept one too; when that does not leave the sandbox empty
/// within [`SWEEP_SPARING_FOR`] (processes forking as fast as they are killed, or a
/// listing that cannot be read), `kill(-1)` ends everything, the kept process too, and
/// the server starts the next command the usual way.
///
/// A command may stop the kept process (`kill -STOP $$`); it would then never answer
/// for the command. Its stop reaches us as its parent (`SIGCHLD`, read from a signalfd
/// while we wait for the server), and we let it go on at once.
#[derive(Default)]
struct Kept {
    pid: Option<libc::pid_t>,
    /// Where our children's `SIGCHLD` is read, once a process is kept.
    child_signals: Option<OwnedFd>,
}

const SWEEP_SPARING_FOR: Duration = Duration::from_millis(250);

impl Kept {
    /// Returns once `control` is readable; meanwhile the kept process, if stopped, is
    /// continued.
    fn wait_for_request(&mut self, control: &OwnedFd) {
        let Some(pid) = self.pid else {
            return;
        };
        let Some(child_signals) = self.child_signals() else {
            return;
        };
        loop {
            let mut fds = [control.as_raw_fd(), child_signals].map(|fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            });
            // SAFETY: valid pollfds.
            if unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) } < 0 {
                continue;
            }
            if fds[1].revents != 0 {
                let mut info = [0u8; std::mem::size_of::<libc::signalfd_siginfo>()];
                // SAFETY: draining a non-blocking signalfd into a buffer of its record size.
                while unsafe { libc::read(child_signals, info.as_mut_ptr().cast(), info.len()) } > 0
                {
                }
                let mut raw = 0;
                // SAFETY: waitpid on our own child; a stopped child is reported, not reaped.
                let got = unsafe { libc::waitpid(pid, &mut raw, libc::WNOHANG | libc::WUNTRACED) };
                if got == pid && libc::WIFSTOPPED(raw) {
                    // SAFETY: a signal to our own child.
                    unsafe { libc::kill(pid, libc::SIGCONT) };
                } else if got == pid {
                    self.pid = None;
                    return;
                }
            }
            if fds[0].revents != 0 {
                return;
            }
        }
    }

    /// The signalfd that reads our children's `SIGCHLD`, made on first use (the signal
    /// is blocked from then on; commands start with no signal blocked regardless).
    fn child_signals(&mut self) -> Option<RawFd> {
        if self.child_signals.is_none() {
            // SAFETY: a signal set built and used on the stack; signalfd returns a new
            // descriptor or -1.
            unsafe {
                let mut set: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut set);
                libc::sigaddset(&mut set, libc::SIGCHLD);
                libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
                let fd = libc::signalfd(-1, &set, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK);
                if fd >= 0 {
                    self.child_signals = Some(OwnedFd::from_raw_fd(fd));
                }
            }
        }
        self.child_signals.as_ref().map(|fd| fd.as_raw_fd())
    }

    /// Ends the kept process, if any, and everything it forked.
    fn end(&mut self) {
        if self.pid.take().is_some() {
            sweep(None, &mut None);
        }
    }

    /// Reaps every child that has ended, forgetting the kept process once it has.
    fn reap(&mut self) {
        loop {
            let mut raw = 0;
            // SAFETY: waitpid on our own children.
            let pid = unsafe { libc::waitpid(-1, &mut raw, libc::WNOHANG) };
            if pid <= 0 {
                return;
            }
            if Some(pid) == self.pid {
                self.pid = None;
            }
        }
    }

    /// The processes of this namespace but its init, us and the kept one; `None` when
    /// the listing cannot be read.
    fn others(&self) -> Option<Vec<libc::pid_t>> {
        let mut others = Vec::new();
        for entry in std::fs::read_dir("/proc").ok()? {
            let name = entry.ok()?.file_name();
            if let Some(pid) = name.to_str().and_then(|n| n.parse::<libc::pid_t>().ok()) {
                if pid > 2 && Some(pid) != self.pid {
                    others.push(pid);
                }
            }
        }
        Some(others)
    }

    /// SIGTERM (and SIGCONT) to every process but the kept one, up to `grace` for them
    /// to end.
    fn terminate_others(&mut self, grace: Duration) {
        let deadline = Instant::now() + grace;
        let mut signalled = false;
        loop {
            self.reap();
            if self.pid.is_none() {
                return;
            }
            let Some(others) = self.others() else {
                return;
            };
            if others.is_empty() || Instant::now() >= deadline {
                return;
            }
            if !signalled {
                for pid in others {
                    // SAFETY: a signal to a process of this namespace.
                    unsafe {
                        libc::kill(pid, libc::SIGTERM);
                        libc::kill(pid, libc::SIGCONT);
                    }
                }
                signalled = true;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// SIGKILL to every process but the kept one until none is left (see [`Kept`]).
    fn sweep_others(&mut self) {
        let deadline = Instant::now() + SWEEP_SPARING_FOR;
        let mut pause = Duration::from_micros(20);
        loop {
            self.reap();
            if self.pid.is_none() {
                sweep(None, &mut None);
                return;
            }
            match self.others() {
                Some(others) if others.is_empty() => return,
                Some(others) if Instant::now() < deadline => {
                    for pid in others {
                        // SAFETY: a signal to a process of this namespace.
                        unsafe { libc::kill(pid, libc::SIGKILL) };
                    }
                }
                _ => {
                    self.pid = None;
                    sweep(None, &mut None);
                    return;
                }
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(5));
        }
    }
}

/// Starts one command and waits for it (and for a kill request); everything it left
/// behind is killed before this returns the command's status (`-N` for signal N).
fn run(
    control: &OwnedFd,
    cwd: &[u8],
    argv: &[Vec<u8>],
    env: &[Vec<u8>],
    output: OwnedFd,
    extra: Vec<OwnedFd>,
) -> i32 {
    let Some(exec) = Exec::new(cwd, argv, env) else {
        let _ = write_all(
            &output,
            b"the sandbox launcher got an empty or malformed command\n",
        );
        return 126;
    };
    let pid = match exec.spawn(&output, &extra) {
        Ok(pid) => pid,
        Err(e) => {
            let _ = write_all(
                &output,
                format!("cannot start {}: {e}\n", String::from_utf8_lossy(&argv[0])).as_bytes(),
            );
            return 127;
        }
    };
    drop(output);
    drop(extra);
    let mut status = None;
    let pidfd = pidfd_open(pid);
    loop {
        reap(pid, &mut status);
        if status.is_some() {
            break;
        }
        let mut fds = vec![libc::pollfd {
            fd: control.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }];
        if let Some(fd) = &pidfd {
            fds.push(libc::pollfd {
                fd: fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            });
        }
        // Without a pidfd (old kernels) the exit is noticed by polling.
        let wait = if pidfd.is_some() { -1 } else { 5 };
        // SAFETY: valid pollfds.
        unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, wait) };
        if fds[0].revents != 0 {
            match protocol::receive(control) {
                Ok(Some(Request::Kill { grace })) => {
                    terminate(pid, grace, &mut status);
                    break;
                }
                Ok(Some(Request::Run { .. } | Request::Sweep)) => {}
                Ok(None) | Err(_) => {
                    sweep(Some(pid), &mut status);
                    std::process::exit(0);
                }
            }
        }
    }
    sweep(Some(pid), &mut status);
    status.unwrap_or(-libc::SIGKILL)
}

/// What the child needs for execve, built before the fork.
struct Exec {
    cwd: CString,
    argv: Vec<CString>,
    env: Vec<CString>,
}

impl Exec {
    fn new(cwd: &[u8], argv: &[Vec<u8>], env: &[Vec<u8>]) -> Option<Exec> {
        let c = |bytes: &[u8]| CString::new(bytes.to_vec()).ok();
        let argv: Vec<CString> = argv.iter().map(|a| c(a)).collect::<Option<_>>()?;
        let env: Vec<CString> = env.iter().map(|e| c(e)).collect::<Option<_>>()?;
        (!argv.is_empty()).then_some(Exec {
            cwd: c(cwd)?,
            argv,
            env,
        })
    }

    /// Starts the command with `posix_spawn` (the C library's vfork-style clone: no copy
    /// of this process's page tables, which a fork made for every command): its own
    /// session, every signal at its default and none blocked (Rust ignores SIGPIPE here;
    /// `yes | head` must end quietly; glibc leaves its two internal signals, 32 and 33,
    /// ignored, as in every program it spawns), output and errors on the pipe, no input,
    /// `extra` as descriptors 3, 4, .... A working directory that is gone falls back to `/`.
    fn spawn(&self, output: &OwnedFd, extra: &[OwnedFd]) -> std::io::Result<libc::pid_t> {
        let argv: Vec<*mut libc::c_char> = self
            .argv
            .iter()
            .map(|a| a.as_ptr().cast_mut())
            .chain([std::ptr::null_mut()])
            .collect();
        let env: Vec<*mut libc::c_char> = self
            .env
            .iter()
            .map(|e| e.as_ptr().cast_mut())
            .chain([std::ptr::null_mut()])
            .collect();
        // Copied above every target first, so no placement overwrites the source of
        // another (the copies close on exec, and here when dropped).
        let lowest_copy = 3 + extra.len() as libc::c_int;
        let copies: Vec<OwnedFd> = extra
            .iter()
            .map(|fd| {
                // SAFETY: F_DUPFD_CLOEXEC returns a new descriptor or -1.
                let copy =
                    unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, lowest_copy) };
                if copy < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // SAFETY: a fresh descriptor owned by nobody else.
                Ok(unsafe { OwnedFd::from_raw_fd(copy) })
            })
            .collect::<std::io::Result<_>>()?;
        let attempt = |cwd: &CString| -> std::io::Result<libc::pid_t> {
            let mut actions = SpawnActions::new()?;
            actions.dup2(output, 1)?;
            actions.dup2(output, 2)?;
            actions.open_null(0, libc::O_RDONLY)?;
            for (target, copy) in (3..).zip(&copies) {
                actions.dup2(copy, target)?;
            }
            actions.chdir(cwd)?;
            let attributes = SpawnAttributes::new(true)?;
            // SAFETY: NUL-terminated argv and envp arrays of valid strings.
            unsafe { spawn(&argv, &env, &actions, &attributes) }
        };
        attempt(&self.cwd).or_else(|first| {
            if self.cwd.as_bytes() == b"/" {
                Err(first)
            } else {
                attempt(&CString::from(c"/")).map_err(|_| first)
            }
        })
    }
}

/// `posix_spawn` of `argv[0]`; the new process's pid.
///
/// # Safety
/// `argv` and `env` are arrays of pointers to NUL-terminated strings, each array ending
/// with a null pointer, all alive for the call.
pub(super) unsafe fn spawn(
    argv: &[*mut libc::c_char],
    env: &[*mut libc::c_char],
    actions: &SpawnActions,
    attributes: &SpawnAttributes,
) -> std::io::Result<libc::pid_t> {
    let mut pid = 0;
    // SAFETY: as the caller promises; actions and attributes are initialised.
    checked(unsafe {
        libc::posix_spawn(
            &mut pid,
            argv[0],
            &actions.0,
            &attributes.0,
            argv.as_ptr(),
            env.as_ptr(),
        )
    })?;
    Ok(pid)
}

/// `posix_spawn` file actions, destroyed when dropped.
pub(super) struct SpawnActions(pub(super) libc::posix_spawn_file_actions_t);

impl SpawnActions {
    pub(super) fn new() -> std::io::Result<SpawnActions> {
        // SAFETY: zeroed storage, initialised by the call before any other use.
        let mut actions = SpawnActions(unsafe { std::mem::zeroed() });
        // SAFETY: the storage is owned and of the type the call initialises.
        let init = unsafe { libc::posix_spawn_file_actions_init(&mut actions.0) };
        if let Err(e) = checked(init) {
            std::mem::forget(actions);
            return Err(e);
        }
        Ok(actions)
    }

    pub(super) fn dup2(&mut self, from: &OwnedFd, to: RawFd) -> std::io::Result<()> {
        // SAFETY: initialised actions; the descriptor is open for as long as they are used.
        checked(unsafe {
            libc::posix_spawn_file_actions_adddup2(&mut self.0, from.as_raw_fd(), to)
        })
    }

    /// `/dev/null` opened as `fd` with `flags`.
    pub(super) fn open_null(&mut self, fd: RawFd, flags: libc::c_int) -> std::io::Result<()> {
        // SAFETY: initialised actions and a static path (the C library copies it).
        checked(unsafe {
            libc::posix_spawn_file_actions_addopen(&mut self.0, fd, c"/dev/null".as_ptr(), flags, 0)
        })
    }

    fn chdir(&mut self, dir: &CString) -> std::io::Result<()> {
        // SAFETY: initialised actions and a NUL-terminated path (the C library copies it).
        checked(unsafe { libc::posix_spawn_file_actions_addchdir_np(&mut self.0, dir.as_ptr()) })
    }
}

impl Drop for SpawnActions {
    fn drop(&mut self) {
        // SAFETY: initialised in `new`.
        unsafe { libc::posix_spawn_file_actions_destroy(&mut self.0) };
    }
}

/// A `posix_spawn*` call's answer (0, or the error number) as a result.
fn checked(failed: libc::c_int) -> std::io::Result<()> {
    if failed == 0 {
        Ok(())
    } else {
        Err(std::io::Error::from_raw_os_error(failed))
    }
}

/// `posix_spawn` attributes: a new session when `setsid`, every signal at its default
/// (SIGKILL and SIGSTOP cannot be changed) and an empty signal mask.
pub(super) struct SpawnAttributes(pub(super) libc::posix_spawnattr_t);

impl SpawnAttributes {
    pub(super) fn new(setsid: bool) -> std::io::Result<SpawnAttributes> {
        // SAFETY: zeroed storage initialised by the call before any use; the signal sets
        // are filled by sigfillset and sigemptyset before they are read.
        unsafe {
            let mut attributes = SpawnAttributes(std::mem::zeroed());
            if let Err(e) = checked(libc::posix_spawnattr_init(&mut attributes.0)) {
                std::mem::forget(attributes);
                return Err(e);
            }
            let mut defaults: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut defaults);
            libc::sigdelset(&mut defaults, libc::SIGKILL);
            libc::sigdelset(&mut defaults, libc::SIGSTOP);
            let mut none: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut none);
            checked(libc::posix_spawnattr_setsigdefault(
                &mut attributes.0,
                &defaults,
            ))?;
            checked(libc::posix_spawnattr_setsigmask(&mut attributes.0, &none))?;
            let mut flags = libc::POSIX_SPAWN_SETSIGDEF | libc::POSIX_SPAWN_SETSIGMASK;
            if setsid {
                flags |= libc::POSIX_SPAWN_SETSID as libc::c_int;
            }
            checked(libc::posix_spawnattr_setflags(
                &mut attributes.0,
                flags as libc::c_short,
            ))?;
            Ok(attributes)
        }
    }
}

impl Drop for SpawnAttributes {
    fn drop(&mut self) {
        // SAFETY: initialised in `new`.
        unsafe { libc::posix_spawnattr_destroy(&mut self.0) };
    }
}

fn pidfd_open(pid: libc::pid_t) -> Option<OwnedFd> {
    // SAFETY: pidfd_open returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    // SAFETY: a fresh descriptor owned by nobody else.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// A `waitpid` status as the terminal reports it: the exit code, or `-N` for signal N.
pub fn status_code(raw: libc::c_int) -> i32 {
    if libc::WIFEXITED(raw) {
        libc::WEXITSTATUS(raw)
    } else if libc::WIFSIGNALED(raw) {
        -libc::WTERMSIG(raw)
    } else {
        -1
    }
}

/// Reaps every child that has ended, noting the command's own status. Returns false
/// once no child is left at all.
pub(super) fn reap(main: libc::pid_t, status: &mut Option<i32>) -> bool {
    loop {
        let mut raw = 0;
        // SAFETY: waitpid on our own children.
        let pid = unsafe { libc::waitpid(-1, &mut raw, libc::WNOHANG) };
        // The error first: `main` is -1 when there is no command (the final sweep).
        if pid < 0 {
            return std::io::Error::last_os_error().raw_os_error() != Some(libc::ECHILD);
        } else if pid == 0 {
            return true;
        } else if pid == main {
            *status = Some(status_code(raw));
        }
    }
}

/// SIGTERM (and SIGCONT) to everything in the sandbox, up to `grace` for it to end.
fn terminate(main: libc::pid_t, grace: Duration, status: &mut Option<i32>) {
    // SAFETY: kill(-1) reaches every process of this PID namespace but us and its init.
    unsafe {
        libc::kill(-1, libc::SIGTERM);
        libc::kill(-1, libc::SIGCONT);
    }
    let deadline = Instant::now() + grace;
    while reap(main, status) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// SIGKILL to everything in the sandbox but us and its init, until no process of ours is
/// left (a process forking while the signal went round is caught on the next round).
///
/// The sandbox's own `/proc` is looked at first: `kill(-1)` walks every process of the
/// machine, however few are in this namespace, so with many sandboxes alive it cost each
/// command more the more there were; the listing walks this namespace's processes only.
/// Most commands leave nothing behind, and then no signal is sent at all.
fn sweep(main: Option<libc::pid_t>, status: &mut Option<i32>) {
    let main = main.unwrap_or(-1);
    let mut pause = Duration::from_micros(20);
    loop {
        let children_left = reap(main, status);
        // Unreadable, the listing proves nothing: the signal goes round regardless.
        if !children_left && others_in_namespace() == Some(false) {
            return;
        }
        // SAFETY: as in `terminate`.
        let signalled = unsafe { libc::kill(-1, libc::SIGKILL) } == 0;
        if !signalled && !reap(main, status) {
            return;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(5));
    }
}

/// Whether this PID namespace's `/proc` lists a process besides its init (1) and this
/// launcher (2); `None` when it cannot be read. A process being forked is listed once
/// it can run, and its parent is listed until then.
fn others_in_namespace() -> Option<bool> {
    for entry in std::fs::read_dir("/proc").ok()? {
        let name = entry.ok()?.file_name();
        if name
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
            .is_some_and(|pid| pid > 2)
        {
            return Some(true);
        }
    }
    Some(false)
}

fn write_all(fd: &OwnedFd, mut bytes: &[u8]) -> std::io::Result<()> {
    while !bytes.is_empty() {
        // SAFETY: writing from a valid buffer.
        let n = unsafe { libc::write(fd.as_raw_fd(), bytes.as_ptr().cast(), bytes.len()) };
        if n < 0 {
            return Err(std::io::Error::last_os_error());
        }
        bytes = &bytes[n as usize..];
    }
    Ok(())
}
