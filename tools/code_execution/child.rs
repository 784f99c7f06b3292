//! Running the script's interpreter: the one place the child is spawned, so an OS
//! sandbox of the local terminal backend can wrap it; its output captured with caps,
//! its process group killed on timeout or cancellation.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const MAX_STDOUT_BYTES: usize = 50_000;
pub const MAX_STDERR_BYTES: usize = 10_000;

/// Environment variables a script keeps; everything else (keys, tokens) stays out.
const PASSED_ENV: [&str; 9] = ["PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TERM", "TZ", "VIRTUAL_ENV"];

/// What the script should run with.
pub struct Launch<'a> {
    pub python: &'a Path,
    pub script: &'a Path,
    pub cwd: &'a Path,
    pub module_dir: &'a Path,
    pub socket: &'a Path,
    pub token: &'a str,
}

/// Spawns the interpreter in a process group of its own with a scrubbed environment.
/// Every execute_code child starts here.
pub fn spawn_script(launch: &Launch<'_>) -> std::io::Result<Child> {
    let mut command = Command::new(launch.python);
    command.arg(launch.script).current_dir(launch.cwd).env_clear();
    for name in PASSED_ENV {
        if let Some(value) = std::env::var_os(name) {
            command.env(name, value);
        }
    }
    for (name, value) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("LC_") {
            command.env(name, value);
        }
    }
    command
        .env("PYTHONPATH", launch.module_dir)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("PYTHONUNBUFFERED", "1")
        .env("HERMES_RPC_SOCKET", launch.socket)
        .env("HERMES_RPC_TOKEN", launch.token)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    command.spawn()
}

/// A capped capture: the first 40% and the last 60% of the cap, and the total seen.
#[derive(Default)]
pub struct Captured {
    pub head: Vec<u8>,
    pub tail: Vec<u8>,
    pub total: usize,
}

fn capture(mut pipe: impl Read, cap: usize) -> Captured {
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
/// then the whole process group is stopped (TERM, then KILL).
pub fn wait(mut child: Child, timeout: Duration, cancelled: impl Fn() -> bool) -> Finished {
    let stdout = child.stdout.take().map(|p| std::thread::spawn(move || capture(p, MAX_STDOUT_BYTES)));
    let stderr = child.stderr.take().map(|p| std::thread::spawn(move || capture(p, MAX_STDERR_BYTES)));
    let deadline = Instant::now() + timeout;
    let group = child.id() as i32;
    let ending = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Ending::Exited(status.code().unwrap_or(-1)),
            Ok(None) => {}
            Err(_) => break Ending::Exited(-1),
        }
        if cancelled() {
            kill_group(group, &mut child);
            break Ending::Cancelled;
        }
        if Instant::now() >= deadline {
            kill_group(group, &mut child);
            break Ending::TimedOut;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // Background children that keep the pipes open would hold the readers: they are
    // still in the group (so its id is not reused), and go with it.
    let settle = Instant::now() + Duration::from_secs(1);
    let open = || stdout.as_ref().is_some_and(|h| !h.is_finished()) || stderr.as_ref().is_some_and(|h| !h.is_finished());
    while open() && Instant::now() < settle {
        std::thread::sleep(Duration::from_millis(10));
    }
    if open() {
        kill_group_quietly(group);
    }
    let join = |handle: Option<std::thread::JoinHandle<Captured>>| handle.and_then(|h| h.join().ok()).unwrap_or_default();
    Finished { ending, stdout: join(stdout), stderr: join(stderr) }
}

fn kill_group(group: i32, child: &mut Child) {
    // SAFETY: signals to the process group the child leads.
    unsafe { libc::killpg(group, libc::SIGTERM) };
    let grace = Instant::now() + Duration::from_secs(2);
    while Instant::now() < grace {
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: as above.
    unsafe { libc::killpg(group, libc::SIGKILL) };
    let _ = child.wait();
}

fn kill_group_quietly(group: i32) {
    // SAFETY: the group still has members (they hold our pipes), so the id is ours.
    unsafe { libc::killpg(group, libc::SIGKILL) };
}

/// The interpreter: config `code_execution.python`, else python3 on PATH.
pub fn find_python(configured: Option<&str>) -> Option<PathBuf> {
    if let Some(path) = configured.filter(|p| !p.is_empty()) {
        let path = PathBuf::from(path);
        return path.is_file().then_some(path);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join("python3")).find(|p| p.is_file())
}
