//! A task's foreground commands (all but a first one that runs the login shell) are
//! forked from one bash that stays for the task and never runs anything itself: a fork
//! of a bash that has already started costs a fraction of starting one (exec, dynamic
//! linking, locale, start-up), and the waiting shell costs nothing between commands.
//!
//! Each command's shell is a subshell of that bash, in a process group of its own (the
//! waiting bash has job control on), so it is stopped as a tree as before. The
//! differences from a shell started for the command: `$$` is the waiting bash's pid
//! (`$BASHPID` the command's), the same for every command of the task, and a command
//! killed by a signal reports 128 + the signal, as bash does.
//!
//! The script travels in a memory file (descriptor 3), a line on a pipe (descriptor 4)
//! says it is there, the command's shell reads it after the fork, and the waiting bash
//! answers `pid N` and `exit N` on another pipe (descriptor 5). The snapshot, made
//! lighter for a shell in the waiting bash's environment, is cut in two
//! ([`split_restore`]): what the waiting bash holds for every command (most exports,
//! the functions and aliases), which it sources from a third memory file (descriptor 7)
//! only when that part changed, after undoing what it held before; and the few lines
//! each command's shell still sources from a fourth (descriptor 6) and closes before
//! the command runs. So a command's shell starts where a shell of its own that sourced
//! the whole snapshot would, without parsing every definition again.
//!
//! Where the waiting bash lives decides how output stays each command's own:
//! - Sandbox off, on this machine: each command writes into a FIFO of its own, made in
//!   a private directory, whose path comes with the script; output of processes a
//!   command left behind never reaches the next command.
//! - In the task's sandbox, kept there by its launcher (`Launcher::keep`): every command
//!   writes into one pipe (descriptor 9), and once the waiting bash has answered for a
//!   command the launcher ends every other process in the sandbox, as it does after any
//!   command; only then is the command over and what is left in the pipe its last
//!   output. The waiting bash runs from a copy of bash its user cannot read, so it is
//!   not dumpable: no command can trace it, read its memory or take its descriptors.

use super::super::{sh_quote, ReadEvent, Running};
use super::spawn::{spawn, Spawned};
use crate::snapshot::{split_restore, Standing};
use hermes_sandbox::launcher::{
    poll_any_readable, poll_readable, read_ready, KeptProcess, Launcher, Output,
};
use std::ffi::OsString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the waiting bash runs, its command shells' output sent to `output` (a
/// redirection). It stops when the pipe of descriptor 4 closes (never at a `TMOUT`
/// passed through to it: its wait names its own limit). `first` runs before all else.
/// A line `a` on descriptor 4 has it first run what the server sent for itself
/// (changing what it holds for the task's commands); every step goes through `builtin`
/// or is `exec` (which keeps its redirections only when called by that name), and no
/// function of either name is ever held, so none of its functions takes a step over.
///
/// The command's shell reads its own script after the fork: whatever the waiting bash
/// writes between two forks breaks the sharing of a page with the command running
/// (the kernel copies it), and each page it writes after the command ended costs a
/// fault again, so it reads and parses as little as it can.
fn waiting_loop(first: &str, output: &str) -> String {
    format!(
        "{first}exec >/dev/null 2>&1\nset -m\n\
         while builtin read -u 4 -t 2147483647 -r __hermes_go; do\n\
         case $__hermes_go in a) IFS= builtin read -u 3 -r -d '' __hermes_apply && builtin eval \"$__hermes_apply\";; esac\n\
         ( builtin read -u 3 -r __hermes_fifo && IFS= builtin read -u 3 -r -d '' __hermes_body && exec 3<&- 4<&- 5>&- 7<&- {output} && builtin eval \"$__hermes_body\" ) &\n\
         builtin printf 'pid %s\\n' \"$!\" >&5\n\
         builtin wait \"$!\"\n\
         builtin printf 'exit %s\\n' \"$?\" >&5\n\
         done\n"
    )
}

/// Where a task's waiting bash is kept between commands.
pub(super) type Slot = Arc<Mutex<Option<ForkServer>>>;

pub(super) struct ForkServer {
    env: Vec<(OsString, OsString)>,
    place: Place,
    /// The shell's descriptor 3.
    script: std::fs::File,
    /// The shell's descriptor 6: what the next command's shell sources to restore.
    restore: std::fs::File,
    /// The shell's descriptor 7: what it sources itself to hold, and what it holds.
    standing_file: std::fs::File,
    standing: Standing,
    /// The write end of its descriptor 4 (non-blocking).
    go: OwnedFd,
    /// The read end of its descriptor 5.
    replies: OwnedFd,
    /// Reply bytes not yet read as a line.
    pending: Vec<u8>,
    /// What each command's shell runs first.
    prologue: String,
    commands: u64,
    /// The snapshot the last command's shell restored from, and what it sourced for it
    /// (descriptor 6 still holds the rest): most commands change nothing, and the same
    /// snapshot needs neither cutting nor writing again.
    restored_from: Option<(Vec<u8>, &'static str)>,
}

enum Place {
    /// Sandbox off: a bash of this machine, and the private directory of the FIFOs
    /// (removed with the server).
    Host { shell: Spawned, fifo_dir: PathBuf },
    /// Kept in the task's sandbox, with the read end of the pipe all its commands write to.
    Sandbox { kept: KeptProcess, output: OwnedFd },
}

/// What a reply line said.
enum Reply {
    Pid(u32),
    Exit(i32),
}

/// The shell's ends of the channel, and the server's.
struct Ends {
    script: std::fs::File,
    go: OwnedFd,
    replies: OwnedFd,
    restore: std::fs::File,
    standing: std::fs::File,
    /// Descriptors 3, 4, 5, 6 and 7 of the shell.
    theirs: [OwnedFd; 5],
}

fn channel_ends() -> std::io::Result<Ends> {
    let channel = super::ready::Channel::new()?;
    let (replies, reply_end) = super::super::pipe()?;
    let script_end = OwnedFd::from(channel.script.try_clone()?);
    let restore = super::ready::memory_file(b"")?;
    let restore_end = OwnedFd::from(restore.try_clone()?);
    let standing = super::ready::memory_file(b"")?;
    let standing_end = OwnedFd::from(standing.try_clone()?);
    let go_read = channel.go_read.try_clone()?;
    let (script, go) = channel.into_kept();
    Ok(Ends {
        script,
        go,
        replies,
        restore,
        standing,
        theirs: [script_end, go_read, reply_end, restore_end, standing_end],
    })
}

impl ForkServer {
    fn new(env: Vec<(OsString, OsString)>, place: Place, ends: Ends, prologue: String) -> Self {
        ForkServer {
            env,
            place,
            script: ends.script,
            restore: ends.restore,
            standing_file: ends.standing,
            standing: Standing::default(),
            go: ends.go,
            replies: ends.replies,
            pending: Vec::new(),
            prologue,
            commands: 0,
            restored_from: None,
        }
    }

    /// Starts the waiting bash `bash` on this machine, in `cwd` with exactly `env`.
    pub(super) fn start(
        bash: &Path,
        env: Vec<(OsString, OsString)>,
        cwd: &Path,
    ) -> std::io::Result<ForkServer> {
        let fifo_dir =
            hermes_sandbox::run_dir::private_dir("shell").map_err(std::io::Error::other)?;
        let started = (|| {
            let ends = channel_ends()?;
            let script = waiting_loop("", ">\"$__hermes_fifo\" 2>&1");
            let argv: Vec<OsString> = vec![bash.into(), "-c".into(), script.into()];
            let shell = spawn(&argv, &env, cwd, &ends.theirs.iter().collect::<Vec<_>>())?;
            let place = Place::Host {
                shell,
                fifo_dir: fifo_dir.clone(),
            };
            Ok(ForkServer::new(env, place, ends, String::new()))
        })();
        if started.is_err() {
            let _ = std::fs::remove_dir_all(&fifo_dir);
        }
        started
    }

    /// Starts the waiting bash `bash` in the task's sandbox (see [`Launcher::keep`]);
    /// `None` when the task can have none.
    pub(super) fn start_in_sandbox(
        launcher: &Launcher,
        bash: &Path,
        env: Vec<(OsString, OsString)>,
        cwd: &Path,
    ) -> Option<ForkServer> {
        let ends = channel_ends().ok()?;
        let (output, output_end) = super::super::pipe().ok()?;
        // Descriptor 8 is the copy of bash it runs from, whose number is also the name
        // the process got: named as a bash started for a command is, where it may.
        // Its commands' output goes to 9.
        let name = bash
            .file_name()
            .map_or_else(|| "bash".into(), |n| n.to_string_lossy());
        let first = format!(
            "exec 8<&- 9>&1 >/dev/null 2>&1\nbuiltin printf %s {} >/proc/self/comm\n",
            sh_quote(&name)
        );
        let script = waiting_loop(&first, ">&9 2>&1 9>&-");
        let args: Vec<OsString> = vec!["-c".into(), script.into()];
        let theirs: Vec<&OwnedFd> = ends.theirs.iter().collect();
        let kept = launcher.keep(bash, &args, &env, cwd, &output_end, &theirs)?;
        // A command's shell names bash by its path, as one started for the command does,
        // not by the copy the waiting bash runs from.
        let path = sh_quote(&bash.to_string_lossy());
        let prologue = format!("BASH={path} BASH_ARGV0={path}\n");
        let place = Place::Sandbox { kept, output };
        Some(ForkServer::new(env, place, ends, prologue))
    }

    /// Whether this bash still waits, in `env`, (in the sandbox) behind the walls a
    /// fresh command would get.
    pub(super) fn fits(&mut self, env: &[(OsString, OsString)], launcher: &Launcher) -> bool {
        if self.env != env {
            return false;
        }
        match &mut self.place {
            Place::Host { shell, .. } => shell.try_wait().is_none(),
            // Nothing is due on the replies between commands: readable means it is gone.
            Place::Sandbox { kept, .. } => {
                poll_readable(self.replies.as_raw_fd(), Duration::ZERO) == 0
                    && launcher.is_current_for(kept)
            }
        }
    }

    fn is_gone(&mut self) -> bool {
        match &mut self.place {
            Place::Host { shell, .. } => shell.try_wait().is_some(),
            Place::Sandbox { .. } => false,
        }
    }

    /// Forks a shell that restores the task's state, from `snapshot` (made lighter for
    /// this bash's environment) or else by running `restore`, then runs `body`; the
    /// server back when it cannot (it is gone, or the script holds a NUL), to be dropped
    /// (which ends it). `home` gets the server back once the command has ended cleanly.
    // The server handed back is the rare path, and moving it once costs nothing beside
    // the start it saves.
    #[allow(clippy::result_large_err)]
    pub(super) fn run(
        mut self,
        snapshot: Option<Vec<u8>>,
        restore: &str,
        body: &str,
        home: &Slot,
    ) -> Result<Forked, ForkServer> {
        use std::io::{Seek, SeekFrom};
        use std::os::unix::fs::FileExt;
        if body.contains('\0') || restore.contains('\0') || self.is_gone() {
            return Err(self);
        }
        let Ok((restore_step, apply)) = self.restore_steps(snapshot, restore) else {
            return Err(self);
        };
        if apply.contains(&0) {
            return Err(self);
        }
        let script = format!("{}{restore_step}command exec 6<&-\n{body}", self.prologue);
        self.commands += 1;
        let (output, fifo_path) = match &self.place {
            Place::Host { fifo_dir, .. } => {
                let path = fifo_dir.join(self.commands.to_string());
                match make_fifo(&path) {
                    Ok(output) => (output, Some(path)),
                    Err(_) => return Err(self),
                }
            }
            Place::Sandbox { output, .. } => match output.try_clone() {
                Ok(output) => (output, None),
                Err(_) => return Err(self),
            },
        };
        let fifo_line = fifo_path
            .as_ref()
            .map_or_else(|| "-".to_string(), |p| p.display().to_string());
        // What the waiting bash reads itself (only when it has something to run), then
        // what the command's shell reads after the fork.
        let mut message = Vec::new();
        if !apply.is_empty() {
            message.extend_from_slice(&apply);
            message.push(0);
        }
        message.extend_from_slice(
            format!(
                "{fifo_line}\n\\builtin unset __hermes_body __hermes_fifo __hermes_apply __hermes_go\n{script}\0"
            )
            .as_bytes(),
        );
        let go: &[u8] = if apply.is_empty() { b"\n" } else { b"a\n" };
        // The shell reads from the shared offset and leaves it after the NUL: back to 0.
        let written = self.script.write_all_at(&message, 0).is_ok()
            && self.script.seek(SeekFrom::Start(0)).is_ok();
        if !written || !super::ready::write_without_waiting(&self.go, go) {
            if let Some(path) = &fifo_path {
                let _ = std::fs::remove_file(path);
            }
            return Err(self);
        }
        Ok(Forked {
            server: Some(self),
            home: Arc::clone(home),
            output: Some(output),
            fifo_path,
            pid: None,
            exit: None,
            swept: false,
        })
    }

    /// What the command's shell sources first to restore `snapshot` (made lighter for
    /// this bash's environment; `restore` when there is none), and what the waiting bash
    /// runs itself before the fork; `Err` when a memory file cannot be written.
    fn restore_steps<'a>(
        &mut self,
        snapshot: Option<Vec<u8>>,
        restore: &'a str,
    ) -> Result<(&'a str, Vec<u8>), ()> {
        use std::os::unix::fs::FileExt;
        // The command before changed nothing: this bash holds what it should, and
        // descriptor 6 what the command's shell sources.
        if let (Some(now), Some((before, step))) = (&snapshot, &self.restored_from) {
            if now == before {
                return Ok((step, Vec::new()));
            }
        }
        self.restored_from = None;
        let (standing, each_command) = match &snapshot {
            Some(snapshot) => {
                let lighter = crate::snapshot::lighter_snapshot(snapshot, &self.env, false).1;
                let (standing, each_command) = split_restore(&lighter);
                (standing, Some(each_command))
            }
            None => (Standing::default(), None),
        };
        // What the waiting bash runs itself before the fork: only when what it holds
        // changes (a command exported, defined or removed something), undoing what it held
        // and sourcing the new part. No command runs meanwhile, so descriptor 7 is free to
        // rewrite.
        let mut apply = Vec::new();
        if standing != self.standing {
            apply = self.standing.undo(&self.env);
            if !standing.script.is_empty() {
                let written = self.standing_file.set_len(0).is_ok()
                    && self.standing_file.write_all_at(&standing.script, 0).is_ok();
                if !written {
                    return Err(());
                }
                apply.extend_from_slice(b"\\builtin source /proc/self/fd/7 >/dev/null 2>&1\n");
            }
            self.standing = standing;
        }
        // The command before has ended and nothing it started has descriptor 6 open.
        let step = match each_command {
            Some(text) if text.is_empty() => "",
            Some(text)
                if self.restore.set_len(0).is_ok()
                    && self.restore.write_all_at(&text, 0).is_ok() =>
            {
                "\\builtin source /proc/self/fd/6 >/dev/null 2>&1\n"
            }
            // Sourced over what the waiting bash holds (a part of the same snapshot), it
            // ends in the same state.
            _ => return Ok((restore, apply)),
        };
        self.restored_from = snapshot.map(|snapshot| (snapshot, step));
        Ok((step, apply))
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
        // In the sandbox, dropping the kept process ends the sandbox and all in it.
        if let Place::Host { shell, fifo_dir } = &mut self.place {
            if shell.try_wait().is_none() {
                shell.kill(Duration::from_millis(100));
            }
            let _ = std::fs::remove_dir_all(&*fifo_dir);
        }
    }
}

/// One command forked from a [`ForkServer`].
pub(super) struct Forked {
    /// `None` once the server was given up (the sandbox with it).
    server: Option<ForkServer>,
    home: Slot,
    output: Option<OwnedFd>,
    /// Sandbox off: the command's FIFO.
    fifo_path: Option<PathBuf>,
    pid: Option<u32>,
    exit: Option<i32>,
    /// In the sandbox: everything but the waiting bash has ended since the command did,
    /// so nothing writes to the output any more.
    swept: bool,
}

impl Forked {
    fn in_sandbox(&self) -> bool {
        matches!(
            self.server.as_ref().map(|s| &s.place),
            Some(Place::Sandbox { .. })
        )
    }

    /// Takes the shell's answers in, waiting at most `wait` for the first; in the
    /// sandbox, once the command has ended, the sandbox is swept.
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
                // is unknown once it has ended too. In the sandbox it is ended now, with
                // the sandbox.
                Some(Err(())) => {
                    if self.in_sandbox() {
                        self.give_up();
                        self.exit = Some(-1);
                    } else if self.pid.is_none_or(|pid| !super::is_alive(pid)) {
                        self.exit = Some(-1);
                    }
                    return;
                }
                None => return,
            }
            wait = Duration::ZERO;
        }
        if self.exit.is_some() && !self.swept && self.in_sandbox() {
            self.swept = match self.server.as_mut().map(|s| &mut s.place) {
                Some(Place::Sandbox { kept, .. }) => kept.sweep(),
                _ => false,
            };
            if !self.swept {
                self.give_up();
            }
        }
    }

    /// Ends the server and the sandbox it is in: whatever still wrote to the output
    /// is gone with it.
    fn give_up(&mut self) {
        self.server = None;
    }

    /// Whether the command is over: its status known and, in the sandbox, swept (or the
    /// sandbox ended).
    fn over(&self) -> bool {
        self.exit.is_some() && (self.swept || !self.in_sandbox())
    }

    /// The command shell's pid, waiting up to a second for the answer that names it.
    fn known_pid(&mut self) -> Option<u32> {
        let deadline = Instant::now() + Duration::from_secs(1);
        while self.pid.is_none() && self.exit.is_none() && Instant::now() < deadline {
            self.take_replies(Duration::from_millis(10));
        }
        self.pid
    }

    /// In the sandbox the output pipe never ends by itself (the waiting bash holds it):
    /// output is read until the command is over and nothing is left in the pipe.
    fn read_in_sandbox(&mut self, wait: Duration) -> ReadEvent {
        let Some(output) = self.output.as_ref() else {
            return ReadEvent::Eof;
        };
        if !self.over() {
            let ready = match self.server.as_ref() {
                Some(server) => {
                    poll_any_readable([output.as_raw_fd(), server.replies.as_raw_fd()], wait)
                }
                None => poll_readable(output.as_raw_fd(), wait),
            };
            if ready <= 0 {
                return ReadEvent::Idle;
            }
            self.take_replies(Duration::ZERO);
        }
        let over = self.over();
        let Some(output) = self.output.as_ref() else {
            return ReadEvent::Eof;
        };
        match read_ready(output, Duration::ZERO) {
            Output::Data(bytes) => ReadEvent::Data(bytes),
            Output::Idle if !over => ReadEvent::Idle,
            _ => {
                self.output = None;
                ReadEvent::Eof
            }
        }
    }
}

impl Running for Forked {
    fn pid(&self) -> Option<u32> {
        if self.fifo_path.is_some() {
            return self.pid;
        }
        // Commands in the sandbox are known here by their sandbox, as the launcher's are
        // (the pid the waiting bash names is one of the sandbox's own namespace).
        match self.server.as_ref().map(|s| &s.place) {
            Some(Place::Sandbox { kept, .. }) => Some(kept.pid()),
            _ => None,
        }
    }

    fn read(&mut self, wait: Duration) -> ReadEvent {
        if self.fifo_path.is_some() {
            return super::spawn::read_output(&mut self.output, wait);
        }
        self.read_in_sandbox(wait)
    }

    fn try_wait(&mut self) -> Option<i32> {
        self.take_replies(Duration::ZERO);
        self.exit.filter(|_| self.over())
    }

    fn wait_exit(&mut self, wait: Duration) -> Option<i32> {
        self.take_replies(wait);
        self.exit.filter(|_| self.over())
    }

    fn kill(&mut self, grace: Duration) -> Vec<u32> {
        if self.exit.is_some() {
            self.take_replies(Duration::ZERO);
            return Vec::new();
        }
        let survivors = match self.server.as_mut().map(|s| &mut s.place) {
            Some(Place::Sandbox { kept, .. }) => {
                if !kept.stop_others(grace) {
                    self.give_up();
                    self.exit = Some(-libc::SIGKILL);
                    return Vec::new();
                }
                Vec::new()
            }
            _ => {
                let Some(pid) = self.known_pid() else {
                    return Vec::new();
                };
                super::kill_tree(pid, grace, &mut || {})
            }
        };
        // The waiting bash reports the end; it is then free for the next command.
        let deadline = Instant::now() + Duration::from_secs(1);
        while self.exit.is_none() && Instant::now() < deadline {
            self.take_replies(Duration::from_millis(10));
        }
        if self.exit.is_none() && self.in_sandbox() {
            self.give_up();
            self.exit = Some(-libc::SIGKILL);
        }
        survivors
    }
}

impl Drop for Forked {
    fn drop(&mut self) {
        if let Some(path) = &self.fifo_path {
            let _ = std::fs::remove_file(path);
        }
        let over = self.over();
        let Some(server) = self.server.take() else {
            return;
        };
        // Only a shell whose command is over and answered for takes the next one.
        if over && server.pending.is_empty() {
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
