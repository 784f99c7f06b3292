//! A sandbox kept for a task's commands, with a small launcher inside it, so a command
//! costs a spawn (`posix_spawn`) rather than a new bubblewrap with its namespaces and mounts.
//!
//! The walls are the ones [`Policy::wrap`] builds (the launcher runs under the same
//! bubblewrap arguments, seccomp programs and Landlock scopes), and what a command may
//! leave behind is the same as with a sandbox per command: the launcher runs one command
//! at a time and, when the command's first process ends (or is killed at its timeout),
//! kills every other process in the sandbox before it answers, so no process survives
//! into the next command. The launcher itself cannot be traced or have its descriptors
//! taken (it is not dumpable, and nobody inside has capabilities).
//!
//! The sandbox is started again whenever the arguments a fresh sandbox would get have
//! changed (a protected place or a host socket file appeared, a writable root was
//! created) or a place one of its mounts stands on is another file now (see
//! `bwrap::Layout`), so each command sees the walls a sandbox of its own would have.
//!
//! A task keeps one such sandbox, or two when work for its next command is to be started
//! while a command runs ([`Launcher::run_if_idle`], [`Launcher::warm_up`]): the caller
//! asks for the second only when it pays off. Each has its own user and PID namespaces:
//! a command sees no process of the other sandbox, so it can neither signal, trace nor
//! read what waits there, and each sandbox is still swept after every command it ran.
//!
//! The launcher is a program that calls [`serve_if_requested`] first thing in `main`
//! (the `hermes-tools` binary does); [`set_program`] opens it once, and every sandbox
//! starts it from that descriptor (`/proc/self/fd/N`), never by its path: a command that
//! renames another program over the file (it may lie in a writable root) changes
//! nothing that later sandboxes run. Without one, or while a task's sandbox is busy,
//! [`Launcher::run`] says so and the caller wraps the command in a sandbox of its own.

mod inside;
pub(crate) mod protocol;
mod zygote;

pub use zygote::end as end_zygote;

pub use inside::status_code;

use crate::bwrap::Layout;
use crate::policy::{Policy, WrapOptions};
use std::ffi::{OsStr, OsString};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The argument that turns a program into the launcher.
pub const LAUNCHER_ARG: &str = "__hermes-sandbox-launcher";
/// Where the launcher finds its end of the channel.
const CONTROL_FD: RawFd = 9;
/// Where bubblewrap finds the launcher's executable (below [`CONTROL_FD`], above the
/// seccomp programs' descriptors from 3).
const PROGRAM_FD: RawFd = 8;
const OPTIONS: WrapOptions<'static> = WrapOptions {
    new_session: true,
    tty: None,
    proxied: true,
};

fn program_slot() -> &'static Mutex<Option<Arc<OwnedFd>>> {
    static PROGRAM: OnceLock<Mutex<Option<Arc<OwnedFd>>>> = OnceLock::new();
    PROGRAM.get_or_init(Default::default)
}

/// Opens the program that serves as the launcher (one that calls
/// [`serve_if_requested`] at the start of `main`; `/proc/self/exe` for the running
/// program's own image). What is opened now is what every later sandbox runs, whatever
/// becomes of the path. An error leaves no launcher: each command then gets a sandbox
/// of its own.
pub fn set_program(path: impl AsRef<Path>) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_CLOEXEC)
        .open(path.as_ref());
    let mut slot = program_slot().lock().unwrap_or_else(|p| p.into_inner());
    *slot = None;
    let opened = OwnedFd::from(opened?);
    // Far above the descriptors spawns place (output, extra descriptors from 3, the
    // launcher's 8 and 9), so the copy a child inherits is still there when it executes
    // the wall through it.
    // SAFETY: F_DUPFD_CLOEXEC on a descriptor we own; the copy is ours.
    let high = unsafe {
        libc::fcntl(
            opened.as_raw_fd(),
            libc::F_DUPFD_CLOEXEC,
            PROGRAM_COPY_FLOOR,
        )
    };
    let program = if high >= 0 {
        // SAFETY: a fresh descriptor nobody else owns.
        unsafe { OwnedFd::from_raw_fd(high) }
    } else {
        opened
    };
    *slot = Some(Arc::new(program));
    Ok(())
}

const PROGRAM_COPY_FLOOR: RawFd = 100;

/// The program [`set_program`] opened, as a path a child of this process executes
/// between its fork and its exec (while it still holds the close-on-exec descriptor):
/// the file opened, whatever became of its name. Another process, even a child, may not
/// open this process's descriptors once it is in a namespace or Landlock domain of its
/// own, so the path is good only for the spawned program itself.
pub(crate) fn program_path() -> Option<std::path::PathBuf> {
    let program = program()?;
    Some(format!("/proc/self/fd/{}", program.as_raw_fd()).into())
}

fn program() -> Option<Arc<OwnedFd>> {
    program_slot()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone()
}

/// When this process was started as the launcher or as the sandbox's wall
/// ([`crate::wall`]), serves and exits; otherwise returns at once. Call it before
/// anything else in `main` (it must run single-threaded).
pub fn serve_if_requested() {
    crate::wall::serve_if_requested();
    let mut args = std::env::args_os();
    let first = args.nth(1);
    if args.next().is_some() {
        return;
    }
    if first.as_deref() == Some(OsStr::new(LAUNCHER_ARG)) {
        std::process::exit(inside::serve(CONTROL_FD));
    }
    if first.as_deref() == Some(OsStr::new(zygote::ZYGOTE_ARG)) {
        std::process::exit(zygote::serve());
    }
}

/// Whether `argv` starts the launcher from the very file this process was started
/// from: the built-in wall, started from the descriptor [`set_program`] opened, whose
/// command is the launcher from the same descriptor. Its command process then serves
/// as the launcher itself ([`serve_in_this_process`]) instead of executing the program
/// again: the same code, under the same namespaces, seccomp programs, capabilities
/// and limits, without a second exec, dynamic linking and start of a large binary.
pub(crate) fn is_own_launcher(argv: &[OsString]) -> bool {
    let [program, arg] = argv else {
        return false;
    };
    if arg != LAUNCHER_ARG || *program != *format!("/proc/self/fd/{PROGRAM_FD}") {
        return false;
    }
    // SAFETY: fstat and stat into zeroed structures; the path is NUL-terminated.
    unsafe {
        let (mut given, mut running): (libc::stat, libc::stat) =
            (std::mem::zeroed(), std::mem::zeroed());
        libc::fstat(PROGRAM_FD, &mut given) == 0
            && libc::stat(c"/proc/self/exe".as_ptr(), &mut running) == 0
            && (given.st_dev, given.st_ino) == (running.st_dev, running.st_ino)
    }
}

/// The launcher's loop, in the process [`is_own_launcher`] approved; its exit status.
pub(crate) fn serve_in_this_process() -> i32 {
    inside::serve(CONTROL_FD)
}

/// What a read of a command's output found ([`LaunchedRun::read`], [`read_ready`]).
#[derive(Debug)]
pub enum Output {
    Data(Vec<u8>),
    /// Nothing arrived within the wait.
    Idle,
    /// Every writer is gone.
    Eof,
}

/// Waits at most `wait` for `fd` (the read end of a pipe) to be readable, then reads
/// what is there, 64 KiB at most; `Eof` once every writer is gone.
pub fn read_ready(fd: &OwnedFd, wait: Duration) -> Output {
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    if unsafe { libc::poll(&mut pfd, 1, wait.as_millis().min(i32::MAX as u128) as i32) } <= 0 {
        return Output::Idle;
    }
    crate::read_buffer::with(|buffer| {
        // SAFETY: reading at most as many bytes as `fill` makes room for.
        let got = crate::read_buffer::fill(buffer, |at, room| unsafe {
            libc::read(fd.as_raw_fd(), at, room)
        });
        // Taken before anything else can set errno.
        let error = std::io::Error::last_os_error();
        if got > 0 {
            Output::Data(buffer.clone())
        } else if got < 0
            && matches!(
                error.kind(),
                std::io::ErrorKind::Interrupted | std::io::ErrorKind::WouldBlock
            )
        {
            Output::Idle
        } else {
            Output::Eof
        }
    })
}

/// A running bubblewrap with the launcher inside.
struct Sandbox {
    child: Process,
    control: OwnedFd,
    /// The bubblewrap arguments it was started with, and what its mounts stand on.
    layout: Layout,
    /// Answer bytes received but not yet read as a line.
    pending: Vec<u8>,
}

/// Where the built-in wall finds the proxy's channel (see [`crate::network`]).
const PROXY_FD: RawFd = 7;

impl Sandbox {
    fn start(policy: &Policy, program: &Arc<OwnedFd>, layout: Layout) -> Result<Sandbox, String> {
        // Inside the sandbox `/proc/self/fd/N` is bubblewrap's inherited descriptor: the
        // file opened by `set_program`, wherever its path now leads.
        let executable = format!("/proc/self/fd/{PROGRAM_FD}");
        let argv = policy
            .wrap_in(&[executable.into(), LAUNCHER_ARG.into()], &layout)
            .map_err(|e| e.0)?;
        let (ours, theirs) = protocol::socket_pair().map_err(|e| e.to_string())?;
        let child = if crate::wall::is_wall(&argv) {
            spawn_wall(policy, argv, theirs, program)
        } else {
            spawn_forked(policy, argv, theirs, program)
        }
        .map_err(|e| e.to_string())?;
        let mut sandbox = Sandbox {
            child,
            control: ours,
            layout,
            pending: Vec::new(),
        };
        match sandbox.next_line(Duration::from_secs(10)) {
            Ok(Some(line)) if line == "ready" => Ok(sandbox),
            _ => Err("the launcher inside the sandbox did not start".into()),
        }
    }

    /// The next answer line within `wait`; `Ok(None)` when none came, `Err` when the
    /// launcher is gone.
    fn next_line(&mut self, wait: Duration) -> std::io::Result<Option<String>> {
        let deadline = Instant::now() + wait;
        loop {
            if let Some(end) = self.pending.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.pending.drain(..=end).collect();
                return Ok(Some(String::from_utf8_lossy(&line[..end]).into_owned()));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            let ready = poll_readable(self.control.as_raw_fd(), left);
            if ready <= 0 {
                if left.is_zero() || ready == 0 {
                    return Ok(None);
                }
                continue;
            }
            let mut buf = [0u8; 256];
            // SAFETY: reading into a stack buffer.
            let n = unsafe {
                libc::recv(
                    self.control.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            match n {
                0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
                n if n > 0 => self.pending.extend_from_slice(&buf[..n as usize]),
                _ => {
                    let e = std::io::Error::last_os_error();
                    if !matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
                    ) {
                        return Err(e);
                    }
                }
            }
        }
    }

    fn alive(&mut self) -> bool {
        self.child.alive()
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        // Closing the channel makes the launcher end everything and exit; bubblewrap
        // follows. SIGKILL to bubblewrap ends the sandbox's init, and with it every
        // process inside, should it not.
        // SAFETY: shutting down our own socket.
        unsafe { libc::shutdown(self.control.as_raw_fd(), libc::SHUT_RDWR) };
        self.child.end_within(Duration::from_millis(500));
    }
}

/// A sandbox's first process on this machine (bubblewrap or the wall): our child, reaped
/// by its [`Sandbox`] alone, or a wall the zygote forked, watched through a pidfd (the
/// zygote reaps it).
struct Process {
    pid: libc::pid_t,
    pidfd: Option<OwnedFd>,
    ended: bool,
}

impl Drop for Process {
    fn drop(&mut self) {
        if self.pidfd.is_some() {
            zygote::wall_ended();
        }
    }
}

impl Process {
    fn child(pid: libc::pid_t) -> Process {
        Process {
            pid,
            pidfd: None,
            ended: false,
        }
    }

    fn alive(&mut self) -> bool {
        if !self.ended {
            self.ended = match &self.pidfd {
                // Readable once the process has ended.
                Some(pidfd) => poll_readable(pidfd.as_raw_fd(), Duration::ZERO) != 0,
                None => {
                    let mut raw = 0;
                    // SAFETY: waitpid on our own child, which nobody else reaps.
                    let got = unsafe { libc::waitpid(self.pid, &mut raw, libc::WNOHANG) };
                    got == self.pid || got < 0
                }
            };
        }
        !self.ended
    }

    /// Waits up to `grace` for the process to end (it was asked to), then kills it.
    fn end_within(&mut self, grace: Duration) {
        let deadline = Instant::now() + grace;
        while self.alive() {
            if Instant::now() >= deadline {
                self.kill_and_reap();
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    fn kill_and_reap(&mut self) {
        if self.ended {
            return;
        }
        match &self.pidfd {
            Some(pidfd) => {
                // SAFETY: a signal through a pidfd reaches that process or none.
                unsafe {
                    libc::syscall(
                        libc::SYS_pidfd_send_signal,
                        pidfd.as_raw_fd(),
                        libc::SIGKILL,
                        std::ptr::null::<libc::siginfo_t>(),
                        0,
                    )
                };
                poll_readable(pidfd.as_raw_fd(), Duration::from_secs(5));
            }
            None => {
                let mut raw = 0;
                // SAFETY: signal and reap our own child, not reaped yet (its pid is still ours).
                unsafe {
                    libc::kill(self.pid, libc::SIGKILL);
                    libc::waitpid(self.pid, &mut raw, 0);
                }
            }
        }
        self.ended = true;
    }
}

/// The built-in wall with the launcher, started by `posix_spawn` (the C library's
/// vfork-style clone): no copy of the server's page tables, whose size grows with
/// the server, and no pre-exec code, so the network namespace and the proxy's
/// listener are made by the wall itself
/// ([`crate::network::set_up_in_this_process`]) before its own namespaces. Started on a
/// long-lived launcher thread, whose end is the wall's parent-death signal.
fn spawn_wall(
    policy: &Policy,
    mut argv: Vec<OsString>,
    control: OwnedFd,
    program: &Arc<OwnedFd>,
) -> std::io::Result<Process> {
    let proxied = policy.network != crate::Network::Off && !crate::wall::confined_only();
    let mut placements = vec![(control, CONTROL_FD), (copy_fd(program)?, PROGRAM_FD)];
    let mut proxy = None;
    if proxied {
        let (ours, theirs) = protocol::socket_pair()?;
        placements.push((theirs, PROXY_FD));
        proxy = Some(ours);
        // Right after the wall's own argument: an option of the wall, not of the command.
        argv.splice(
            2..2,
            [
                crate::wall::PROXY_CHANNEL_ARG.into(),
                PROXY_FD.to_string().into(),
            ],
        );
    }
    let argv: Vec<std::ffi::CString> = argv
        .into_iter()
        .map(|a| std::ffi::CString::new(a.into_vec()))
        .collect::<Result<_, _>>()
        .map_err(|_| std::io::Error::other("an argument holds a NUL byte"))?;
    let process = match zygote::fork_wall(program, &argv[1..], &placements) {
        Ok(forked) => Process {
            pid: forked.pid,
            pidfd: Some(forked.pidfd),
            ended: false,
        },
        // Without a zygote the wall is started as a program of its own.
        Err(_) => Process::child(spawn_program(argv, placements)?),
    };
    if let Some(ours) = proxy {
        crate::proxy::serve(ours, Arc::new(policy.network.clone()));
    }
    Ok(process)
}

/// `argv` (program first) started with `posix_spawn` on a launcher thread (see
/// [`crate::spawn_scoped`]), with no environment, its standard streams on /dev/null and
/// `placements` at the numbers given; its pid.
fn spawn_program(
    argv: Vec<std::ffi::CString>,
    placements: Vec<(OwnedFd, RawFd)>,
) -> std::io::Result<libc::pid_t> {
    let floor = placements.iter().map(|(_, to)| *to).max().unwrap_or(2) + 1;
    crate::spawn_scoped(move || {
        // Copied above every target first, so no placement overwrites another's source.
        let copies: Vec<(OwnedFd, RawFd)> = placements
            .iter()
            .map(|(fd, to)| Ok((copy_above(fd, floor)?, *to)))
            .collect::<std::io::Result<_>>()?;
        let mut actions = inside::SpawnActions::new()?;
        actions.open_null(0, libc::O_RDONLY)?;
        actions.open_null(1, libc::O_WRONLY)?;
        actions.open_null(2, libc::O_WRONLY)?;
        for (copy, to) in &copies {
            actions.dup2(copy, *to)?;
        }
        let attributes = inside::SpawnAttributes::new(false)?;
        let pointers: Vec<*mut libc::c_char> = argv
            .iter()
            .map(|a| a.as_ptr().cast_mut())
            .chain([std::ptr::null_mut()])
            .collect();
        let no_env: [*mut libc::c_char; 1] = [std::ptr::null_mut()];
        // SAFETY: NUL-terminated argv and envp arrays of valid strings.
        unsafe { inside::spawn(&pointers, &no_env, &actions, &attributes) }
    })
}

/// bubblewrap (and the shell that sets its limits), forked from the server, the
/// network prepared between the fork and the exec ([`crate::network::attach`]).
fn spawn_forked(
    policy: &Policy,
    argv: Vec<OsString>,
    theirs: OwnedFd,
    program: &Arc<OwnedFd>,
) -> std::io::Result<Process> {
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if policy.network != crate::Network::Off {
        crate::network::attach(&mut cmd, &policy.network);
    }
    let placements = [
        (theirs.as_raw_fd(), CONTROL_FD),
        (program.as_raw_fd(), PROGRAM_FD),
    ];
    use std::os::unix::process::CommandExt;
    // SAFETY: dup2 and fcntl are async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            // Copied above both targets first, so neither placement overwrites the
            // other's source; dup2 leaves the targets open across the exec.
            let mut copies = [0; 2];
            for (copy, (from, _)) in copies.iter_mut().zip(placements) {
                *copy = libc::fcntl(from, libc::F_DUPFD_CLOEXEC, CONTROL_FD + 1);
                if *copy < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            for (copy, (_, to)) in copies.into_iter().zip(placements) {
                if libc::dup2(copy, to) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    let child = crate::spawn_scoped(move || cmd.spawn())?;
    drop(theirs);
    // Reaped by pid from here on (dropping the handle neither waits nor kills).
    Ok(Process::child(child.id() as libc::pid_t))
}

fn copy_fd(fd: &OwnedFd) -> std::io::Result<OwnedFd> {
    copy_above(fd, 0)
}

/// A close-on-exec copy of `fd` numbered `floor` or above.
fn copy_above(fd: &OwnedFd, floor: RawFd) -> std::io::Result<OwnedFd> {
    // SAFETY: F_DUPFD_CLOEXEC returns a new descriptor or -1.
    let copy = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, floor) };
    if copy < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(copy) })
}

/// Waits at most `wait` (to the microsecond: a command's exit is often that close) for
/// `fd` to be readable; poll's answer (1 readable, 0 not yet, -1 failed).
pub fn poll_readable(fd: RawFd, wait: Duration) -> i32 {
    poll_any_readable([fd], wait)
}

/// As [`poll_readable`], until the first of `fds` is readable; poll's answer (how many
/// are, 0 none yet, -1 failed).
pub fn poll_any_readable<const N: usize>(fds: [RawFd; N], wait: Duration) -> i32 {
    let mut pfds = fds.map(|fd| libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    });
    let timeout = libc::timespec {
        tv_sec: wait.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: wait.subsec_nanos() as libc::c_long,
    };
    // SAFETY: valid pollfds and a valid timeout; no signal mask change.
    unsafe {
        libc::ppoll(
            pfds.as_mut_ptr(),
            N as libc::nfds_t,
            &timeout,
            std::ptr::null(),
        )
    }
}

/// How many idle sandboxes a task keeps: the one its last command ran in, and one for
/// the shell of the command after it.
const KEPT_SANDBOXES: usize = 2;

/// A task's idle sandboxes.
#[derive(Default)]
struct Pool {
    idle: Vec<Sandbox>,
    /// A sandbox is being started in the background ([`Launcher::warm_up`]).
    warming: bool,
    /// None is kept any more ([`Launcher::shutdown`]).
    closed: bool,
}

type SharedPool = Arc<Mutex<Pool>>;

fn lock(pool: &SharedPool) -> std::sync::MutexGuard<'_, Pool> {
    pool.lock().unwrap_or_else(|p| p.into_inner())
}

/// Keeps `sandbox` idle in `pool` when there is room and the task is not shut down;
/// else ends it, once the pool is free again (ending one waits for it).
fn keep_idle(pool: &SharedPool, sandbox: Sandbox) {
    let mut state = lock(pool);
    if !state.closed && state.idle.len() < KEPT_SANDBOXES {
        state.idle.push(sandbox);
        return;
    }
    drop(state);
    drop(sandbox);
}

/// A task's long-lived sandboxes, started on first use.
pub struct Launcher {
    policy: Arc<Policy>,
    program: Option<Arc<OwnedFd>>,
    pool: SharedPool,
    /// The layout's part that depends on the places looked up (see `layout_watch`).
    fixed_layout: Mutex<Option<Remembered>>,
}

/// A layout's part that depends on the places looked up, the generation of changes it
/// was last known current in, and the names it looked up (by `layout_watch`'s keys):
/// a change of a name only another task looked up (its own directory made) leaves it.
struct Remembered {
    generation: u64,
    keys: Vec<u64>,
    layout: Layout,
}

impl Launcher {
    pub fn new(policy: Arc<Policy>) -> Launcher {
        let program = program().filter(|_| policy.is_active());
        Launcher {
            policy,
            program,
            pool: Arc::default(),
            fixed_layout: Mutex::default(),
        }
    }

    /// The bubblewrap arguments a fresh sandbox would get now, and what they stand on.
    /// The part that depends on the places looked up is remembered while none of the
    /// names it was looked up from has changed; the host's socket files are looked at
    /// every time (a look shared for a few milliseconds, see `bwrap::finish_layout`).
    fn layout(&self) -> Layout {
        let mut layout = self.fixed_layout();
        crate::bwrap::finish_layout(&self.policy, Path::new("/"), &mut layout);
        layout
    }

    fn fixed_layout(&self) -> Layout {
        use crate::{bwrap::fixed_layout, layout_watch, real_paths::RealPaths};
        let mut remembered = self.fixed_layout.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(known) = remembered.as_mut() {
            if let Some(now) = layout_watch::unchanged_since(known.generation, &known.keys) {
                known.generation = now;
                return known.layout.clone();
            }
        }
        *remembered = None;
        let mut real_paths = RealPaths::default();
        let mut layout = fixed_layout(&self.policy, OPTIONS, &mut real_paths);
        if !layout_watch::worth_watching() {
            return layout;
        }
        // Remembered only when worked out again once every name it read is watched, with
        // nothing changed meanwhile: a change made before the watches shows in that look.
        for _ in 0..3 {
            let Some(generation) = real_paths.lookups().and_then(layout_watch::watch) else {
                break;
            };
            real_paths = RealPaths::default();
            layout = fixed_layout(&self.policy, OPTIONS, &mut real_paths);
            let Some(keys) = real_paths.lookups().and_then(layout_watch::covering_keys) else {
                break;
            };
            if layout_watch::generation() == Some(generation) {
                *remembered = Some(Remembered {
                    generation,
                    keys,
                    layout: layout.clone(),
                });
                break;
            }
        }
        layout
    }

    /// Starts `argv` (program first, an absolute path) in `cwd` with exactly `env`,
    /// output and errors on one pipe, no input, `extra` as descriptors 3, 4, ....
    /// `None` when there is no sandbox to run it in: no launcher program, the task's
    /// sandbox is busy, or it could not start; the caller then wraps the command in a
    /// sandbox of its own.
    pub fn run(
        &self,
        argv: &[OsString],
        env: &[(OsString, OsString)],
        cwd: &Path,
        extra: &[&OwnedFd],
    ) -> Option<LaunchedRun> {
        self.run_in(argv, env, cwd, extra, true)
    }

    /// As [`Launcher::run`], but only in a sandbox that is already up and idle (`None`
    /// otherwise): for work started ahead, which is not worth a new sandbox. Its walls are
    /// not compared with a fresh sandbox's here: [`Launcher::is_current`] does that when
    /// the work is used.
    pub fn run_if_idle(
        &self,
        argv: &[OsString],
        env: &[(OsString, OsString)],
        cwd: &Path,
        extra: &[&OwnedFd],
    ) -> Option<LaunchedRun> {
        self.run_in(argv, env, cwd, extra, false)
    }

    /// Starts a sandbox in the background when none is idle, for [`Launcher::run_if_idle`]
    /// to find later (a task keeps two at most). Nobody waits for it.
    pub fn warm_up(&self) {
        let Some(program) = self.program.clone() else {
            return;
        };
        {
            let mut pool = lock(&self.pool);
            if pool.closed || pool.warming || !pool.idle.is_empty() {
                return;
            }
            pool.warming = true;
        }
        let (policy, pool) = (self.policy.clone(), Arc::clone(&self.pool));
        let started = std::thread::Builder::new()
            .name("sandbox-warm-up".into())
            .spawn(move || {
                let sandbox = Sandbox::start(
                    &policy,
                    &program,
                    crate::bwrap::layout(&policy, Path::new("/"), OPTIONS),
                );
                lock(&pool).warming = false;
                if let Ok(sandbox) = sandbox {
                    keep_idle(&pool, sandbox);
                }
            });
        if started.is_err() {
            lock(&self.pool).warming = false;
        }
    }

    fn run_in(
        &self,
        argv: &[OsString],
        env: &[(OsString, OsString)],
        cwd: &Path,
        extra: &[&OwnedFd],
        may_start: bool,
    ) -> Option<LaunchedRun> {
        let take = if may_start {
            Take::CurrentOrNew
        } else {
            Take::Idle
        };
        let sandbox = self.take_sandbox(take)?;
        let (read_end, write_end) = pipe().ok()?;
        send_start(&sandbox, b"run", argv, env, cwd, &write_end, extra).ok()?;
        drop(write_end);
        Some(LaunchedRun {
            sandbox: Some(sandbox),
            home: Arc::clone(&self.pool),
            output: Some(read_end),
            exit: None,
        })
    }

    /// An idle sandbox of the task, as `take` allows.
    fn take_sandbox(&self, take: Take) -> Option<Sandbox> {
        let program = self.program.as_ref()?;
        let layout = (take != Take::Idle).then(|| self.layout());
        // Sandboxes whose launcher is gone, or (unless any will do) whose walls
        // a fresh sandbox would no longer get, are ended once the pool is free again.
        let mut stale = Vec::new();
        let mut chosen = None;
        let mut pool = lock(&self.pool);
        while let Some(mut sandbox) = pool.idle.pop() {
            if !sandbox.alive()
                || layout
                    .as_ref()
                    .is_some_and(|layout| sandbox.layout != *layout)
            {
                stale.push(sandbox);
            } else {
                chosen = Some(sandbox);
                break;
            }
        }
        drop(pool);
        drop(stale);
        match (chosen, layout) {
            (Some(sandbox), _) => Some(sandbox),
            (None, Some(layout)) => Sandbox::start(&self.policy, program, layout).ok(),
            _ => None,
        }
    }

    /// Starts `program` with `args` (in `cwd`, with exactly `env`, output and errors on
    /// `output`, no input, `extra` as descriptors 3, 4, ...) to be kept in one of the
    /// task's sandboxes, which it then has to itself: the launcher spares it in the
    /// sweep that follows each command it forks ([`KeptProcess::sweep`]).
    ///
    /// It runs from a sealed copy of `program` that its user may execute but not read,
    /// so the kernel makes it not dumpable: a command (same user, no capabilities) can
    /// neither trace it, read its memory or environment, nor take its descriptors, and
    /// so cannot plant anything in what it forks next. The copy is its descriptor
    /// `3 + extra.len()`, which it should close first thing.
    ///
    /// In a sandbox of the task that is idle now and whose walls are current, or else in
    /// one started now for it; `None` when none can be had.
    pub fn keep(
        &self,
        program: &Path,
        args: &[OsString],
        env: &[(OsString, OsString)],
        cwd: &Path,
        output: &OwnedFd,
        extra: &[&OwnedFd],
    ) -> Option<KeptProcess> {
        let copy = exec_only_copy(program)?;
        let mut sandbox = self.take_sandbox(Take::CurrentOrNew)?;
        let copy_fd = 3 + extra.len();
        let mut argv: Vec<OsString> = vec![format!("/proc/self/fd/{copy_fd}").into()];
        argv.extend(args.iter().cloned());
        let mut fds = extra.to_vec();
        fds.push(&copy);
        send_start(&sandbox, b"keep", &argv, env, cwd, output, &fds).ok()?;
        match sandbox.next_line(Duration::from_secs(5)) {
            Ok(Some(line)) if line.starts_with("kept ") => Some(KeptProcess { sandbox }),
            _ => None,
        }
    }

    /// Whether `kept` still waits in a sandbox a fresh command would get (its launcher
    /// alive, the walls unchanged).
    pub fn is_current_for(&self, kept: &mut KeptProcess) -> bool {
        kept.sandbox.alive() && kept.sandbox.layout == self.layout()
    }

    /// Whether `run` still runs in the sandbox a fresh command would get (its launcher
    /// alive, the walls unchanged): a command started ahead is used only then.
    pub fn is_current(&self, run: &mut LaunchedRun) -> bool {
        let layout = self.layout();
        run.sandbox
            .as_mut()
            .is_some_and(|sandbox| sandbox.layout == layout && sandbox.alive())
    }

    /// Ends the idle sandboxes (and everything in them) and forgets the layout worked
    /// out for them; the next command starts a sandbox again.
    pub fn end_idle(&self) {
        let idle = std::mem::take(&mut lock(&self.pool).idle);
        drop(idle);
        *self.fixed_layout.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// Ends the idle sandboxes (and everything in them); none is kept idle after this.
    pub fn shutdown(&self) {
        let idle = {
            let mut pool = lock(&self.pool);
            pool.closed = true;
            std::mem::take(&mut pool.idle)
        };
        drop(idle);
    }
}

/// Which sandbox [`Launcher::take_sandbox`] may hand out.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Take {
    /// An idle one that is alive, whatever its walls.
    Idle,
    /// An idle one whose walls are what a fresh sandbox would get (those whose walls
    /// are not are ended), else a new one.
    CurrentOrNew,
}

/// Sends a request to start `argv` (`kind`: `run` or `keep`).
fn send_start(
    sandbox: &Sandbox,
    kind: &[u8],
    argv: &[OsString],
    env: &[(OsString, OsString)],
    cwd: &Path,
    output: &OwnedFd,
    extra: &[&OwnedFd],
) -> std::io::Result<()> {
    let argc = argv.len().to_string();
    let env: Vec<Vec<u8>> = env
        .iter()
        .map(|(k, v)| [k.as_bytes(), b"=", v.as_bytes()].concat())
        .collect();
    let mut fields: Vec<&[u8]> = vec![kind, cwd.as_os_str().as_bytes(), argc.as_bytes()];
    fields.extend(argv.iter().map(|a| a.as_bytes()));
    fields.extend(env.iter().map(Vec::as_slice));
    let fds: Vec<RawFd> = [output]
        .into_iter()
        .chain(extra.iter().copied())
        .map(|fd| fd.as_raw_fd())
        .collect();
    protocol::send(&sandbox.control, &fields, &fds)
}

/// A sealed copy of `program` in memory, mode 0111 (see [`Launcher::keep`]), made once
/// per program for the whole process.
fn exec_only_copy(program: &Path) -> Option<Arc<OwnedFd>> {
    type Copies = Mutex<Vec<(std::path::PathBuf, Arc<OwnedFd>)>>;
    static COPIES: OnceLock<Copies> = OnceLock::new();
    let mut copies = COPIES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    if let Some((_, copy)) = copies.iter().find(|(path, _)| path == program) {
        return Some(Arc::clone(copy));
    }
    let copy = Arc::new(make_exec_only_copy(program).ok()?);
    copies.push((program.to_path_buf(), Arc::clone(&copy)));
    Some(copy)
}

fn make_exec_only_copy(program: &Path) -> std::io::Result<OwnedFd> {
    use std::os::unix::fs::PermissionsExt;
    const MFD_EXEC: libc::c_uint = 0x10;
    let flags = libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING;
    // SAFETY: a static name; memfd_create returns a new descriptor or -1. Kernels
    // before 6.3 do not know MFD_EXEC (their memory files are executable anyway).
    let mut fd = unsafe { libc::memfd_create(c"kept".as_ptr(), flags | MFD_EXEC) };
    if fd < 0 {
        // SAFETY: as above.
        fd = unsafe { libc::memfd_create(c"kept".as_ptr(), flags) };
    }
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor owned by nobody else.
    let copy = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    std::io::copy(&mut std::fs::File::open(program)?, &mut &copy)?;
    copy.set_permissions(std::fs::Permissions::from_mode(0o111))?;
    let seals = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_WRITE | libc::F_SEAL_SEAL;
    // SAFETY: fcntl on our own descriptor.
    if unsafe { libc::fcntl(copy.as_raw_fd(), libc::F_ADD_SEALS, seals) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(OwnedFd::from(copy))
}

/// A process kept in a task's sandbox ([`Launcher::keep`]). Dropping it ends the
/// sandbox, and everything in it.
pub struct KeptProcess {
    sandbox: Sandbox,
}

/// How long the launcher has to answer a sweep before its sandbox is given up.
const SWEEP_ANSWER_WITHIN: Duration = Duration::from_secs(5);

impl KeptProcess {
    /// Ends every process in the sandbox but the kept one (after each command it
    /// forked: nothing a command started outlives it). `false` when the sandbox no
    /// longer keeps it, or did not answer: then drop this.
    pub fn sweep(&mut self) -> bool {
        protocol::send(&self.sandbox.control, &[b"sweep"], &[]).is_ok()
            && self.swept(SWEEP_ANSWER_WITHIN)
    }

    /// As [`KeptProcess::sweep`], after SIGTERM to each of those processes and up to
    /// `grace` for them to end.
    pub fn stop_others(&mut self, grace: Duration) -> bool {
        let ms = grace.as_millis().to_string();
        protocol::send(&self.sandbox.control, &[b"kill", ms.as_bytes()], &[]).is_ok()
            && self.swept(grace + SWEEP_ANSWER_WITHIN)
    }

    fn swept(&mut self, wait: Duration) -> bool {
        matches!(self.sandbox.next_line(wait), Ok(Some(line)) if line == "swept")
    }

    /// Bubblewrap's pid on this machine.
    pub fn pid(&self) -> u32 {
        self.sandbox.child.pid as u32
    }
}

/// A command started by a [`Launcher`].
pub struct LaunchedRun {
    /// Held while the command runs; handed back to the task once it has ended.
    sandbox: Option<Sandbox>,
    home: SharedPool,
    output: Option<OwnedFd>,
    exit: Option<i32>,
}

impl LaunchedRun {
    /// Bubblewrap's pid on this machine.
    pub fn pid(&self) -> Option<u32> {
        self.sandbox.as_ref().map(|s| s.child.pid as u32)
    }

    /// Waits at most `wait` for output.
    pub fn read(&mut self, wait: Duration) -> Output {
        let Some(fd) = self.output.as_ref() else {
            return Output::Eof;
        };
        let output = read_ready(fd, wait);
        if let Output::Eof = output {
            self.output = None;
        }
        output
    }

    /// The command's status once it and everything it started have ended (`-N`: signal N).
    pub fn try_wait(&mut self) -> Option<i32> {
        self.wait_exit(Duration::ZERO)
    }

    /// As [`LaunchedRun::try_wait`], waiting at most `wait` for the status.
    pub fn wait_exit(&mut self, wait: Duration) -> Option<i32> {
        if self.exit.is_none() {
            self.await_exit(wait);
        }
        self.exit
    }

    fn await_exit(&mut self, wait: Duration) {
        let Some(sandbox) = self.sandbox.as_mut() else {
            return;
        };
        match sandbox.next_line(wait) {
            Ok(Some(line)) => {
                if let Some(code) = line.strip_prefix("exit ").and_then(|c| c.parse().ok()) {
                    self.exit = Some(code);
                    self.hand_back();
                }
            }
            Ok(None) => {}
            Err(_) => {
                // The launcher died (a command can kill it): so did everything in its sandbox.
                self.exit = Some(-libc::SIGKILL);
                self.sandbox = None;
            }
        }
    }

    fn hand_back(&mut self) {
        if let Some(sandbox) = self.sandbox.take() {
            keep_idle(&self.home, sandbox);
        }
    }

    /// Stops the command and everything it started: SIGTERM, up to `grace`, SIGKILL.
    /// Returns the pids on this machine that survived (none: the sandbox is ended
    /// outright when its launcher does not answer).
    pub fn kill(&mut self, grace: Duration) -> Vec<u32> {
        if self.exit.is_some() {
            return Vec::new();
        }
        let Some(sandbox) = self.sandbox.as_ref() else {
            return Vec::new();
        };
        let ms = grace.as_millis().to_string();
        if protocol::send(&sandbox.control, &[b"kill", ms.as_bytes()], &[]).is_ok() {
            self.await_exit(grace + Duration::from_secs(2));
        }
        if self.exit.is_none() {
            self.exit = Some(-libc::SIGKILL);
            self.sandbox = None;
        }
        Vec::new()
    }
}

impl Drop for LaunchedRun {
    fn drop(&mut self) {
        // A command abandoned before its end takes its sandbox with it.
        if self.exit.is_none() {
            self.sandbox = None;
        }
    }
}

fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    use std::os::fd::FromRawFd;
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills two descriptors on success.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fresh descriptors owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}
