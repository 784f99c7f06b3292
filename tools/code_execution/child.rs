//! Running the script's interpreter on this machine: built by the task's local terminal
//! environment ([`Environment::local_command`]), so it runs inside the same OS sandbox,
//! with the same environment allow-list, as the terminal's commands; its output
//! captured with caps, its whole process tree killed on timeout or cancellation.

use hermes_environments::env::local::{kill_tree, Launch as SandboxLaunch, LocalCommand};
use hermes_environments::env::Environment;
use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant};

pub const MAX_STDOUT_BYTES: usize = 50_000;
/// How often a running script's call asks whether it was cancelled. Its exit is not
/// waited for this way: the kernel reports that when it happens.
const CANCEL_CHECK: Duration = Duration::from_millis(20);
pub const MAX_STDERR_BYTES: usize = 10_000;

/// The descriptor the script finds its end of the tool socket on. Above the ones the
/// sandbox's launcher opens for its seccomp programs (3 and 4), so it passes through it.
pub const RPC_FD: i32 = 63;

/// What the script should run with.
pub struct Launch<'a> {
    pub python: &'a Path,
    pub script: &'a Path,
    pub cwd: &'a Path,
    pub module_dir: &'a Path,
    /// The script's end of the socket pair the tool calls travel on.
    pub socket: OwnedFd,
    pub token: &'a str,
}

/// Starts the interpreter through `env` (the task's local environment): inside its OS
/// sandbox unless `terminal.sandbox.mode` is `off`, in a process group of its own.
/// Every local execute_code child starts here.
pub fn spawn_script(env: &dyn Environment, launch: Launch<'_>) -> Result<Child, String> {
    let argv = vec![
        launch.python.as_os_str().to_owned(),
        launch.script.as_os_str().to_owned(),
    ];
    let command: LocalCommand = match env.local_command(argv, launch.cwd, SandboxLaunch::default())
    {
        Some(built) => built.map_err(|e| e.reason)?,
        None => {
            return Err(format!(
                "the {} environment does not run programs on this machine",
                env.backend()
            ))
        }
    };
    let mut cmd = command.to_command();
    cmd.env("PYTHONPATH", launch.module_dir)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("PYTHONUNBUFFERED", "1")
        .env("HERMES_RPC_FD", RPC_FD.to_string())
        .env("HERMES_RPC_TOKEN", launch.token)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let socket = launch.socket;
    let fd = socket.as_raw_fd();
    // SAFETY: dup2 and fcntl are async-signal-safe; `fd` stays open until after spawn.
    unsafe {
        cmd.pre_exec(move || {
            if fd == RPC_FD {
                let flags = libc::fcntl(fd, libc::F_GETFD);
                if flags < 0 || libc::fcntl(fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            } else if libc::dup2(fd, RPC_FD) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let spawned = command.launch(move || {
        let child = cmd.spawn();
        // The parent's copy of the script's end closes here, so the script's exit is seen.
        drop(socket);
        child
    });
    spawned.map_err(|e| format!("cannot start {}: {e}", launch.python.display()))
}

/// A capped capture: the first 40% and the last 60% of the cap, and the total seen.
#[derive(Default)]
pub struct Captured {
    pub head: Vec<u8>,
    pub tail: Vec<u8>,
    pub total: usize,
}

/// `tee`: where each chunk also goes as it is read (the live view of stdout).
fn capture(mut pipe: impl Read, cap: usize, tee: Option<Sender<Vec<u8>>>) -> Captured {
    let head_cap = cap * 2 / 5;
    let tail_cap = cap - head_cap;
    let mut out = Captured::default();
    let mut buffer = [0u8; 8192];
    loop {
        let n = match pipe.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        out.total += n;
        if let Some(tee) = &tee {
            let _ = tee.send(buffer[..n].to_vec());
        }
        let mut chunk = &buffer[..n];
        if out.head.len() < head_cap {
            let take = (head_cap - out.head.len()).min(chunk.len());
            out.head.extend_from_slice(&chunk[..take]);
            chunk = &chunk[take..];
        }
        out.tail.extend_from_slice(chunk);
        if out.tail.len() > tail_cap {
            let excess = out.tail.len() - tail_cap;
            out.tail.drain(..excess);
        }
    }
    out
}

pub enum Ending {
    Exited(i32),
    TimedOut,
    Cancelled,
}

pub struct Finished {
    pub ending: Ending,
    pub stdout: Captured,
    pub stderr: Captured,
}

/// Waits for the child until it exits, `timeout` passes or `cancelled()` turns true;
/// then its whole process tree is stopped (TERM, a grace period, KILL). With
/// `on_stdout`, what it prints on stdout also goes there as it arrives (decoded; `""`
/// when nothing came for a while), on this thread.
pub fn wait(
    mut child: Child,
    timeout: Duration,
    cancelled: impl Fn() -> bool,
    mut on_stdout: Option<&mut dyn FnMut(&str)>,
) -> Finished {
    // Each reader says when its pipe closed, so the wait for the last output ends then.
    let (closed, pipe_closed) = std::sync::mpsc::channel::<()>();
    let (tee, printed) = std::sync::mpsc::channel::<Vec<u8>>();
    let read_capped = |pipe: Box<dyn Read + Send>, cap: usize, tee: Option<Sender<Vec<u8>>>| {
        let closed = closed.clone();
        std::thread::spawn(move || {
            let captured = capture(pipe, cap, tee);
            let _ = closed.send(());
            captured
        })
    };
    let stdout = child.stdout.take().map(|p| {
        read_capped(
            Box::new(p),
            MAX_STDOUT_BYTES,
            on_stdout.as_ref().map(|_| tee.clone()),
        )
    });
    let stderr = child
        .stderr
        .take()
        .map(|p| read_capped(Box::new(p), MAX_STDERR_BYTES, None));
    drop((closed, tee));
    let mut decoder = hermes_environments::output::Utf8Decoder::new();
    let mut pass_on = |decoder: &mut hermes_environments::output::Utf8Decoder| {
        let Some(on_stdout) = on_stdout.as_mut() else {
            return;
        };
        let mut text = String::new();
        while let Ok(chunk) = printed.try_recv() {
            text.push_str(&decoder.push(&chunk));
        }
        on_stdout(&text);
    };
    let deadline = Instant::now() + timeout;
    // Readable once the child has exited: a wait on it ends at the exit, not at the
    // next tick. Without one (a kernel before 5.3), the wait is a sleep.
    let exited = rustix::process::pidfd_open(
        rustix::process::Pid::from_child(&child),
        rustix::process::PidfdFlags::empty(),
    )
    .ok();
    let ending = loop {
        pass_on(&mut decoder);
        match child.try_wait() {
            Ok(Some(status)) => break Ending::Exited(status.code().unwrap_or(-1)),
            Ok(None) => {}
            Err(_) => break Ending::Exited(-1),
        }
        if cancelled() {
            stop_tree(&mut child);
            break Ending::Cancelled;
        }
        let now = Instant::now();
        if now >= deadline {
            stop_tree(&mut child);
            break Ending::TimedOut;
        }
        let pause = (deadline - now).min(CANCEL_CHECK);
        match (&exited, rustix::event::Timespec::try_from(pause)) {
            (Some(exited), Ok(pause)) => {
                let mut watched = [rustix::event::PollFd::new(
                    exited,
                    rustix::event::PollFlags::IN,
                )];
                let _ = rustix::event::poll(&mut watched, Some(&pause));
            }
            _ => std::thread::sleep(pause),
        }
    };
    // Background children that keep the pipes open would hold the readers: they are
    // still in the group (so its id is not reused), and go with it. (Inside the sandbox
    // they went already: the end of its first process ends its whole PID namespace.)
    let settle = Instant::now() + Duration::from_secs(1);
    let readers = usize::from(stdout.is_some()) + usize::from(stderr.is_some());
    let all_closed = (0..readers).all(|_| {
        let left = settle.saturating_duration_since(Instant::now());
        pipe_closed.recv_timeout(left).is_ok()
    });
    if !all_closed {
        // SAFETY: the group still has members (they hold our pipes), so its id is ours;
        // the child itself is reaped, so its pid alone could name another process now.
        unsafe { libc::killpg(child.id() as i32, libc::SIGKILL) };
    }
    let join = |handle: Option<std::thread::JoinHandle<Captured>>| {
        handle.and_then(|h| h.join().ok()).unwrap_or_default()
    };
    let (stdout, stderr) = (join(stdout), join(stderr));
    pass_on(&mut decoder);
    Finished {
        ending,
        stdout,
        stderr,
    }
}

/// The child's group and every descendant (the sandbox's launcher, the interpreter and
/// what it started), as the terminal stops its commands.
fn stop_tree(child: &mut Child) {
    let pid = child.id();
    kill_tree(pid, Duration::from_secs(2), &mut || {
        let _ = child.try_wait();
    });
    let _ = child.try_wait();
}

/// The interpreter: config `code_execution.python`, else python3 on PATH.
pub fn find_python(configured: Option<&str>) -> Option<PathBuf> {
    if let Some(path) = configured.filter(|p| !p.is_empty()) {
        let path = PathBuf::from(path);
        return path.is_file().then_some(path);
    }
    which::which("python3").ok()
}
