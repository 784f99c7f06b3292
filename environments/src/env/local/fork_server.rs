//! Without the sandbox, a task's foreground commands (from its fourth on) are forked from
//! one bash that stays for the task and never runs anything itself: a fork of a bash
//! that has already started costs a fraction of starting one (exec, dynamic linking,
//! locale, start-up), and the waiting shell costs nothing between commands.
//!
//! Each command's shell is a subshell of that bash, in a process group of its own (the
//! waiting bash has job control on), so it is stopped as a tree as before. It sources
//! the task's snapshot itself: the waiting bash keeps no state, so nothing a command
//! removed can come back from it. The differences from a shell started for the command:
//! `$$` is the waiting bash's pid (`$BASHPID` the command's), the same for every command
//! of the task, and a command killed by a signal reports 128 + the signal, as bash does.
//!
//! Each command writes into a FIFO of its own, made in a private directory, so output of
//! processes a command left behind never reaches the next command. The FIFO's path and
//! the script travel in a memory file (descriptor 3), a line on a pipe (descriptor 4)
//! says they are there, and the waiting bash answers `pid N` and `exit N` on another
//! pipe (descriptor 5). The snapshot, made lighter for a shell in the waiting bash's
//! environment, is in a second memory file (descriptor 6) that the command's shell
//! sources and closes before the command runs.

use super::super::{ReadEvent, Running};
use super::spawn::{spawn, Spawned};
use hermes_sandbox::launcher::{poll_readable, read_ready, Output};
use std::ffi::OsString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the waiting bash runs. It stops when the pipe of descriptor 4 closes (never at
/// a `TMOUT` passed through to it: its wait names its own limit).
const LOOP: &str = "exec >/dev/null 2>&1\nset -m\n\
    while builtin read -t 2147483647 -r __hermes_fifo <&4 && builtin read -r __hermes_fifo <&3 && IFS= builtin read -r -d '' __hermes_body <&3; do\n\
    ( exec 3<&- 4<&- 5>&- >\"$__hermes_fifo\" 2>&1 && builtin eval \"$__hermes_body\" ) &\n\
    builtin printf 'pid %s\\n' \"$!\" >&5\n\
    builtin wait \"$!\"\n\
    builtin printf 'exit %s\\n' \"$?\" >&5\n\
    done\n";

/// Where a task's waiting bash is kept between commands.
pub(super) type Slot = Arc<Mutex<Option<ForkServer>>>;

pub(super) struct ForkServer {
    env: Vec<(OsString, OsString)>,
    shell: Spawned,
    /// The shell's descriptor 3.
    script: std::fs::File,
    /// The shell's descriptor 6: what the next command's shell sources to restore.
    restore: std::fs::File,
    /// The write end of its descriptor 4 (non-blocking).
    go: OwnedFd,
    /// The read end of its descriptor 5.
    replies: OwnedFd,
    /// Reply bytes not yet read as a line.
    pending: Vec<u8>,
    /// The private directory of the FIFOs; removed with the server.
    fifo_dir: PathBuf,
    commands: u64,
}

/// What a reply line said.
enum Reply {
    Pid(u32),
    Exit(i32),
}

impl ForkServer {
    /// Starts the waiting bash `bash` in `cwd` with exactly `env`.
    pub(super) fn start(
        bash: &Path,
        env: Vec<(OsString, OsString)>,
        cwd: &Path,
    ) -> std::io::Result<ForkServer> {
        let fifo_dir =
            hermes_sandbox::run_dir::private_dir("shell").map_err(std::io::Error::other)?;
        let started = (|| {
            let channel = super::ready::Channel::new()?;
            let (replies, reply_end) = super::super::pipe()?;
            let argv: Vec<OsString> = vec![bash.into(), "-c".into(), LOOP.into()];
            let script_end = OwnedFd::from(channel.script.try_clone()?);
            let restore = super::ready::memory_file(b"")?;
            let restore_end = OwnedFd::from(restore.try_clone()?);
            let shell = spawn(
                &argv,
                &env,
                cwd,
                &[&script_end, &channel.go_read, &reply_end, &restore_end],
            )?;
            let (script, go) = channel.into_kept();
            Ok(ForkServer {
                env: env.clone(),
                shell,
                script,
                restore,
                go,
                replies,
                pending: Vec::new(),
                fifo_dir: fifo_dir.clone(),
                commands: 0,
            })
        })();
        if started.is_err() {
            let _ = std::fs::remove_dir_all(&fifo_dir);
        }
        started
    }

    /// Whether this bash still waits, in `env`.
    pub(super) fn fits(&mut self, env: &[(OsString, OsString)]) -> bool {
        self.env == env && self.shell.try_wait().is_none()
    }

    /// Forks a shell that restores the task's state, from `lighter` (the snapshot made
    /// lighter for this bash's environment) or else by running `restore`, then runs
    /// `body`; the server back when it cannot (it is gone, or the script holds a NUL), to
    /// be dropped (which ends it). `home` gets the server back once the command has ended
    /// cleanly.
    pub(super) fn run(
        mut self,
        lighter: Option<&[u8]>,
        restore: &str,
        body: &str,
        home: &Slot,
    ) -> Result<Forked, ForkServer> {
        use std::io::{Seek, SeekFrom};
        use std::os::unix::fs::FileExt;
        if body.contains('\0') || restore.contains('\0') || self.shell.try_wait().is_some() {
            return Err(self);
        }
        // The command before has ended and nothing it started has descriptor 6 open.
        let restore_step = match lighter {
            Some(text)
                if self.restore.set_len(0).is_ok()
                    && self.restore.write_all_at(text, 0).is_ok() =>
            {
                "builtin source /proc/self/fd/6 >/dev/null 2>&1\n"
            }
            _ => restore,
        };
        let script = format!("{restore_step}command exec 6<&-\n{body}");
        self.commands += 1;
        let fifo_path = self.fifo_dir.join(self.commands.to_string());
        let Ok(output) = make_fifo(&fifo_path) else {
            return Err(self);
        };
        let message = format!(
            "{}\nbuiltin unset __hermes_body __hermes_fifo\n{script}\0",
            fifo_path.display()
        );
        // The shell reads from the shared offset and leaves it after the NUL: back to 0.
        let written = self.script.write_all_at(message.as_bytes(), 0).is_ok()
            && self.script.seek(SeekFrom::Start(0)).is_ok();
        if !written || !super::ready::write_without_waiting(&self.go, b"\n") {
            let _ = std::fs::remove_file(&fifo_path);
            return Err(self);
        }
        Ok(Forked {
            server: Some(self),
            home: Arc::clone(home),
            output: Some(output),
            fifo_path,
            pid: None,
            exit: None,
        })
    }

    /// Reads what the shell has answered, waiting at most `wait` for a first byte.
    fn next_reply(&mut self, wait: Duration) -> Option<Result<Reply, ()>> {
        loop {
            if let Some(end) = self.pending.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.pending.drain(..=end).collect();
                let line = String::from_utf8_lossy(&line[..end]).into_owned();
                let number = |prefix: &str| {
                    line.strip_prefix(prefix)
                        .and_then(|n| n.trim().parse::<i64>().ok())
                };
                if let Some(pid) = number("pid ").and_then(|p| u32::try_from(p).ok()) {
                    return Some(Ok(Reply::Pid(pid)));
                }
                if let Some(code) = number("exit ") {
                    return Some(Ok(Reply::Exit(code as i32)));
                }
                continue;
            }
            if wait > Duration::ZERO && poll_readable(self.replies.as_raw_fd(), wait) <= 0 {
                return None;
            }
            match read_ready(&self.replies, Duration::ZERO) {
                Output::Data(bytes) => self.pending.extend_from_slice(&bytes),
                Output::Idle => return None,
                Output::Eof => return Some(Err(())),
            }
        }
    }
}

impl Drop for ForkServer {
    fn drop(&mut self) {
        if self.shell.try_wait().is_none() {
            self.shell.kill(Duration::from_millis(100));
        }
        let _ = std::fs::remove_dir_all(&self.fifo_dir);
    }
}

/// One command forked from a [`ForkServer`].
pub(super) struct Forked {
    server: Option<ForkServer>,
    home: Slot,
    output: Option<OwnedFd>,
    fifo_path: PathBuf,
    pid: Option<u32>,
    exit: Option<i32>,
}

impl Forked {
    /// Takes the shell's answers in, waiting at most `wait` for the first.
    fn take_replies(&mut self, wait: Duration) {
        let mut wait = wait;
        while self.exit.is_none() {
            let Some(server) = self.server.as_mut() else {
                return;
            };
            match server.next_reply(wait) {
                Some(Ok(Reply::Pid(pid))) => self.pid = Some(pid),
                Some(Ok(Reply::Exit(code))) => self.exit = Some(code),
                // The waiting bash is gone (a command can kill it): the command's status
                // is unknown once it has ended too.
                Some(Err(())) => {
                    if self.pid.is_none_or(|pid| !super::is_alive(pid)) {
                        self.exit = Some(-1);
                    }
                    return;
                }
                None => return,
            }
            wait = Duration::ZERO;
        }
    }

    /// The command shell's pid, waiting up to a second for the answer that names it.
    fn known_pid(&mut self) -> Option<u32> {
        let deadline = Instant::now() + Duration::from_secs(1);
        while self.pid.is_none() && self.exit.is_none() && Instant::now() < deadline {
            self.take_replies(Duration::from_millis(10));
        }
        self.pid
    }
}

impl Running for Forked {
    fn pid(&self) -> Option<u32> {
        self.pid
    }

    fn read(&mut self, wait: Duration) -> ReadEvent {
        super::spawn::read_output(&mut self.output, wait)
    }

    fn try_wait(&mut self) -> Option<i32> {
        self.take_replies(Duration::ZERO);
        self.exit
    }

    fn wait_exit(&mut self, wait: Duration) -> Option<i32> {
        self.take_replies(wait);
        self.exit
    }

    fn kill(&mut self, grace: Duration) -> Vec<u32> {
        if self.exit.is_some() {
            return Vec::new();
        }
        let Some(pid) = self.known_pid() else {
            return Vec::new();
        };
        let survivors = super::kill_tree(pid, grace, &mut || {});
        // The waiting bash reports the end; it is then free for the next command.
        let deadline = Instant::now() + Duration::from_secs(1);
        while self.exit.is_none() && Instant::now() < deadline {
            self.take_replies(Duration::from_millis(10));
        }
        survivors
    }
}

impl Drop for Forked {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.fifo_path);
        let Some(server) = self.server.take() else {
            return;
        };
        // Only a shell whose command has ended and been answered for takes the next one.
        if self.exit.is_some() && server.pending.is_empty() {
            let mut home = self.home.lock().unwrap_or_else(|p| p.into_inner());
            if home.is_none() {
                *home = Some(server);
                return;
            }
        }
        drop(server);
    }
}

/// Makes a FIFO at `path` and opens its reading end without waiting for a writer.
fn make_fifo(path: &Path) -> std::io::Result<OwnedFd> {
    use std::os::fd::FromRawFd;
    use std::os::unix::ffi::OsStrExt;
    let name = std::ffi::CString::new(path.as_os_str().as_bytes())?;
    // SAFETY: a valid NUL-terminated path.
    if unsafe { libc::mkfifo(name.as_ptr(), 0o600) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: as above; open returns a new descriptor or -1.
    let fd = unsafe {
        libc::open(
            name.as_ptr(),
            libc::O_RDONLY | libc::O_NONBLOCK | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        let e = std::io::Error::last_os_error();
        let _ = std::fs::remove_file(path);
        return Err(e);
    }
    // SAFETY: a fresh descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}
