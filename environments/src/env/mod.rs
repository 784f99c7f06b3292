//! Execution environments: where a task's shell commands run.
//!
//! Every backend implements [`Environment`]: start a bash script (optionally as a login
//! shell, with stdin), report its temp dir, fetch a file, clean up. A started script is a
//! [`Running`] value the caller reads output from, polls and kills. Backends that drive a
//! local client program (`ssh`, `docker exec`, `apptainer exec`) share
//! [`ChildRun`]; the HTTP backends run each command as one request and hand the result
//! back through [`ThreadRun`].
//!
//! Environments are cached per task ([`get_or_create`]), reaped when idle and cleaned up
//! at exit ([`cleanup_all_environments`]).

pub mod daytona;
pub mod docker;
pub mod http;
pub mod kubernetes;
pub mod local;
pub mod modal;
pub mod singularity;
pub mod ssh;
pub mod vercel;

mod cooled;

use crate::config::TerminalConfig;
use std::collections::HashMap;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The backend names `TERMINAL_ENV` / `terminal.backend` accept.
pub const BACKENDS: &[&str] = &[
    "local",
    "ssh",
    "docker",
    "singularity",
    "modal",
    "daytona",
    "vercel_sandbox",
    "kubernetes",
];

/// A failure to reach or build the environment (not a failure of the command).
#[derive(Debug, Clone, PartialEq)]
pub struct EnvError {
    pub reason: String,
    pub retry_hint: Option<String>,
}

impl EnvError {
    pub fn new(reason: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
            retry_hint: None,
        }
    }
    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.retry_hint = Some(hint.into());
        self
    }
}

impl std::fmt::Display for EnvError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason)
    }
}

/// One chunk of progress from a running script.
#[derive(Debug)]
pub enum ReadEvent {
    Data(Vec<u8>),
    /// Nothing arrived within the wait.
    Idle,
    /// The output stream is closed.
    Eof,
}

/// A started script.
pub trait Running: Send {
    /// The local process id (client program or the script itself), if any.
    fn pid(&self) -> Option<u32>;
    /// Waits at most `wait` for output.
    fn read(&mut self, wait: Duration) -> ReadEvent;
    /// The exit code once the script finished (`-N` when killed by signal N).
    fn try_wait(&mut self) -> Option<i32>;
    /// As [`Running::try_wait`], waiting at most `wait` for the exit (its output ended,
    /// so it is usually exiting this very moment).
    fn wait_exit(&mut self, wait: Duration) -> Option<i32> {
        std::thread::sleep(wait);
        self.try_wait()
    }
    /// Stops the whole process tree; returns the pids that survived (empty = all gone).
    fn kill(&mut self, grace: Duration) -> Vec<u32>;
    /// Sends bytes to the script's stdin.
    fn write_stdin(&mut self, _data: &[u8]) -> io::Result<usize> {
        Err(io::Error::other(
            "this process has no stdin (start it with pty=true to interact with it)",
        ))
    }
    /// Closes stdin (end of input).
    fn close_stdin(&mut self) -> io::Result<()> {
        Err(io::Error::other(
            "this process has no stdin (start it with pty=true to interact with it)",
        ))
    }
}

/// Where commands run.
pub trait Environment: Send + Sync {
    /// The backend name (`local`, `ssh`, ...).
    fn backend(&self) -> &'static str;
    /// Starts `bash -c script` (`bash -l -c` when `login`), stdout and stderr merged.
    fn run_bash(
        &self,
        script: &str,
        login: bool,
        stdin: Option<Vec<u8>>,
    ) -> Result<Box<dyn Running>, EnvError>;
    /// The environment's temp directory (`/tmp` or an absolute `TMPDIR`).
    fn temp_dir(&self) -> String;
    /// The working directory a task starts in.
    fn default_cwd(&self) -> String;
    /// Reads at most `max_bytes` of a file inside the environment.
    fn fetch_file(&self, path: &str, max_bytes: usize) -> Result<Vec<u8>, EnvError>;
    /// Releases everything (containers, connections, sandboxes). Idempotent.
    fn cleanup(&self);
    /// Ends what is kept running between the task's commands only so that the next one
    /// starts sooner (a local task's sandbox, the shell waiting in it, the bash commands
    /// are forked from); the next command starts them again. Called once the task has
    /// been idle for [`crate::config::keep_warm_seconds`], with no command running.
    fn cool(&self) {}
    /// The private directory that holds all a cooled task needs besides its shell
    /// session, for backends that can be made again around it on the task's next
    /// command; `None` keeps the environment itself while the task is idle.
    fn resumable_dir(&self) -> Option<&std::path::Path> {
        None
    }
    /// Whether background processes can be started (HTTP backends run one request per
    /// command and cannot).
    fn supports_background(&self) -> bool {
        true
    }
    /// Whether stdin given to [`Environment::run_bash`] travels inside the command line
    /// (the HTTP backends' one-shot execute routes), which bounds its size.
    fn stdin_in_command_line(&self) -> bool {
        false
    }
    /// Whether the environment can touch the host's files (local, ssh, docker with host
    /// mounts); the approval gate applies its full rules only there.
    fn has_host_access(&self) -> bool {
        true
    }
    /// Starts a foreground command of the task (or its first snapshot), as
    /// [`Environment::run_bash`] without stdin. A task's foreground commands come one at a
    /// time, so a backend may keep a launcher for them.
    fn run_foreground(&self, script: &str, login: bool) -> Result<Box<dyn Running>, EnvError> {
        self.run_bash(script, login, None)
    }
    /// Starts a foreground command whose script is `session`'s restore step (which
    /// brings back the task's shell state) followed by `body`. A backend may have a shell
    /// waiting that has already restored it (see [`Environment::prepare_foreground`]).
    fn run_foreground_restored(
        &self,
        session: &crate::snapshot::ShellSession,
        body: &str,
    ) -> Result<Box<dyn Running>, EnvError> {
        self.run_foreground(&format!("{}{body}", session.restore()), false)
    }
    /// Called once a foreground command has ended: a backend may start the next
    /// command's shell now and have it restore `session`'s state, so that work is done
    /// before the next command arrives.
    fn prepare_foreground(&self, _session: &crate::snapshot::ShellSession) {}
    /// Runs a script a person approved outside the OS sandbox (local backend only; the
    /// others have no sandbox of this program's and run it as [`Environment::run_bash`]).
    fn run_bash_escalated(
        &self,
        script: &str,
        login: bool,
        stdin: Option<Vec<u8>>,
    ) -> Result<Box<dyn Running>, EnvError> {
        self.run_bash(script, login, stdin)
    }
    /// For launchers of local children other than bash on pipes (pseudo-terminals, code
    /// runners): `argv` wrapped the way this environment runs its commands. `None` when the
    /// environment is not on this machine.
    fn local_command(
        &self,
        _argv: Vec<std::ffi::OsString>,
        _cwd: &std::path::Path,
        _launch: local::Launch,
    ) -> Option<Result<local::LocalCommand, EnvError>> {
        None
    }
    /// The OS sandbox commands run in (`None`: this backend has none of this program's).
    fn sandbox_mode(&self) -> Option<hermes_sandbox::Mode> {
        None
    }
    /// Set once when a lost environment was rebuilt; read (and cleared) by the next result.
    fn take_recreated(&self) -> bool {
        false
    }
}

/// What `head -c` printed of `path` through a client program, or its error output as
/// the reason.
pub(crate) fn fetched(out: std::process::Output, path: &str) -> Result<Vec<u8>, EnvError> {
    if !out.status.success() {
        return Err(EnvError::new(format!(
            "{path}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(out.stdout)
}

/// The client program to run: the one configured, else the first of `candidates` found
/// on PATH.
pub(crate) fn configured_or_on_path(
    configured: Option<&str>,
    candidates: &[&str],
) -> Option<String> {
    if let Some(program) = configured {
        return Some(program.to_string());
    }
    candidates
        .iter()
        .find(|program| which::which(program).is_ok())
        .map(|program| program.to_string())
}

/// Quotes a string for a POSIX shell, with shlex's quoting (single quotes, double quotes
/// where a quote or backslash needs them). A NUL byte, which no shell word can carry, is
/// let through as it is, as every other byte: the shell decides, not the quoting.
pub fn sh_quote(s: &str) -> String {
    shlex::Quoter::new()
        .allow_nul(true)
        .quote(s)
        .expect("with NUL bytes allowed, quoting has no error left to report")
        .into_owned()
}

/// [`sh_quote`] for bytes that need not be UTF-8 (a variable's value, a function's name).
pub fn sh_quote_bytes(bytes: &[u8]) -> Vec<u8> {
    shlex::bytes::Quoter::new()
        .allow_nul(true)
        .quote(bytes)
        .expect("with NUL bytes allowed, quoting has no error left to report")
        .into_owned()
}

// ------------------------------------------------------------------ local child runs

/// A pipe whose both ends close on exec.
pub fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills two fds on success.
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both fds are fresh and owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// How a [`ChildRun`] stops the work it started on the other side (remote process tree).
pub type RemoteKill = Box<dyn FnMut(Duration) + Send>;

/// A local child process (bash, or a client such as ssh / docker exec) in its own
/// session, stdout and stderr merged into one pipe read without blocking.
pub struct ChildRun {
    child: Child,
    reader: Option<OwnedFd>,
    stdin: Option<std::process::ChildStdin>,
    exit: Option<i32>,
    remote_kill: Option<RemoteKill>,
}

impl ChildRun {
    /// Spawns `cmd` in a new session with merged output; `stdin` is written by a helper
    /// thread and then closed.
    pub fn spawn(
        mut cmd: Command,
        stdin: Option<Vec<u8>>,
        keep_stdin_open: bool,
    ) -> io::Result<ChildRun> {
        let (read_end, write_end) = pipe()?;
        let write_clone = write_end.try_clone()?;
        cmd.stdout(Stdio::from(write_end))
            .stderr(Stdio::from(write_clone));
        if stdin.is_some() || keep_stdin_open {
            cmd.stdin(Stdio::piped());
        } else {
            cmd.stdin(Stdio::null());
        }
        use std::os::unix::process::CommandExt;
        // SAFETY: setsid is async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() < 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = cmd.spawn()?;
        // The command's copies of the write end are closed when `cmd` is dropped here.
        drop(cmd);
        let mut child_stdin = child.stdin.take();
        if let (Some(data), Some(mut pipe_in)) = (stdin, child_stdin.take()) {
            std::thread::spawn(move || {
                use std::io::Write;
                let _ = pipe_in.write_all(&data);
            });
        }
        Ok(ChildRun {
            child,
            reader: Some(read_end),
            stdin: child_stdin,
            exit: None,
            remote_kill: None,
        })
    }

    pub fn with_remote_kill(mut self, kill: RemoteKill) -> Self {
        self.remote_kill = Some(kill);
        self
    }
}

/// Waits at most `wait` for output on a child's pipe; `Eof` once it is closed (or broken).
pub(crate) fn read_pipe(fd: &OwnedFd, wait: Duration) -> ReadEvent {
    hermes_sandbox::launcher::read_ready(fd, wait).into()
}

impl From<hermes_sandbox::launcher::Output> for ReadEvent {
    fn from(output: hermes_sandbox::launcher::Output) -> ReadEvent {
        use hermes_sandbox::launcher::Output;
        match output {
            Output::Data(bytes) => ReadEvent::Data(bytes),
            Output::Idle => ReadEvent::Idle,
            Output::Eof => ReadEvent::Eof,
        }
    }
}

fn status_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => code,
        (None, Some(sig)) => -sig,
        _ => -1,
    }
}

impl Running for ChildRun {
    fn pid(&self) -> Option<u32> {
        Some(self.child.id())
    }

    fn read(&mut self, wait: Duration) -> ReadEvent {
        let Some(fd) = self.reader.as_ref() else {
            return ReadEvent::Eof;
        };
        let event = read_pipe(fd, wait);
        if let ReadEvent::Eof = event {
            self.reader = None;
        }
        event
    }

    fn try_wait(&mut self) -> Option<i32> {
        if self.exit.is_none() {
            if let Ok(Some(status)) = self.child.try_wait() {
                self.exit = Some(status_code(status));
            }
        }
        self.exit
    }

    fn kill(&mut self, grace: Duration) -> Vec<u32> {
        if let Some(remote) = self.remote_kill.as_mut() {
            remote(grace);
        }
        let pid = self.child.id();
        let child = &mut self.child;
        let exit = &mut self.exit;
        local::kill_tree(pid, grace, &mut || {
            if exit.is_none() {
                if let Ok(Some(status)) = child.try_wait() {
                    *exit = Some(status_code(status));
                }
            }
        })
    }

    fn write_stdin(&mut self, data: &[u8]) -> io::Result<usize> {
        use std::io::Write;
        match self.stdin.as_mut() {
            Some(pipe_in) => {
                pipe_in.write_all(data)?;
                pipe_in.flush()?;
                Ok(data.len())
            }
            None => Err(io::Error::other(
                "this process has no stdin (start it with pty=true to interact with it)",
            )),
        }
    }

    fn close_stdin(&mut self) -> io::Result<()> {
        match self.stdin.take() {
            Some(_) => Ok(()),
            None => Err(io::Error::other(
                "stdin is already closed or was never open",
            )),
        }
    }
}

impl Drop for ChildRun {
    fn drop(&mut self) {
        // Reap if finished; never block.
        let _ = self.child.try_wait();
    }
}

/// A command executed elsewhere as one request (HTTP backends): the result arrives all at
/// once from a helper thread.
pub struct ThreadRun {
    rx: std::sync::mpsc::Receiver<(Vec<u8>, i32)>,
    pending_exit: Option<i32>,
    data: Option<Vec<u8>>,
    done: bool,
    cancel: Option<Box<dyn FnMut() + Send>>,
}

impl ThreadRun {
    pub fn start(
        work: impl FnOnce() -> (Vec<u8>, i32) + Send + 'static,
        cancel: Option<Box<dyn FnMut() + Send>>,
    ) -> Self {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(work());
        });
        ThreadRun {
            rx,
            pending_exit: None,
            data: None,
            done: false,
            cancel,
        }
    }
}

impl Running for ThreadRun {
    fn pid(&self) -> Option<u32> {
        None
    }
    fn read(&mut self, wait: Duration) -> ReadEvent {
        if let Some(data) = self.data.take() {
            return ReadEvent::Data(data);
        }
        if self.done {
            return ReadEvent::Eof;
        }
        match self.rx.recv_timeout(wait) {
            Ok((data, code)) => {
                self.done = true;
                self.pending_exit = Some(code);
                if data.is_empty() {
                    ReadEvent::Eof
                } else {
                    ReadEvent::Data(data)
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => ReadEvent::Idle,
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                self.done = true;
                self.pending_exit.get_or_insert(-1);
                ReadEvent::Eof
            }
        }
    }
    fn try_wait(&mut self) -> Option<i32> {
        if !self.done {
            if let Ok((data, code)) = self.rx.try_recv() {
                self.done = true;
                self.pending_exit = Some(code);
                if !data.is_empty() {
                    self.data = Some(data);
                }
            }
        }
        self.pending_exit
    }
    fn kill(&mut self, _grace: Duration) -> Vec<u32> {
        if let Some(cancel) = self.cancel.as_mut() {
            cancel();
        }
        self.done = true;
        self.pending_exit.get_or_insert(-15);
        Vec::new()
    }
}

// ------------------------------------------------------------------ remote wrapper

/// Wraps a script for a backend that runs it through a client program: stderr is merged
/// into stdout on the far side (so the order of the two survives transports that carry them
/// separately, like ssh), the script runs as its own process group whose leader's pid is written to `<tmp>/hermes-run-<rid>.pid`,
/// so [`remote_kill_script`] can stop the whole tree on the other side.
pub fn remote_wrap(script: &str, login: bool, tmp: &str, rid: &str) -> String {
    let shell = if login { "bash -l -c" } else { "bash -c" };
    let pidfile = format!("{tmp}/hermes-run-{rid}.pid");
    format!(
        "exec 2>/dev/null; set -m; {shell} {script} 2>&1 & __hermes_p=$!; \
         printf '%s' \"$__hermes_p\" > {pid}; wait \"$__hermes_p\"; __hermes_e=$?; rm -f {pid}; exit $__hermes_e",
        script = sh_quote(script),
        pid = sh_quote(&pidfile),
    )
}

/// The script that stops a run started by [`remote_wrap`]: SIGTERM to its group, a grace
/// period, SIGKILL.
pub fn remote_kill_script(tmp: &str, rid: &str, grace: Duration) -> String {
    let pidfile = sh_quote(&format!("{tmp}/hermes-run-{rid}.pid"));
    let secs = grace.as_secs_f64().max(0.1);
    format!(
        "p=$(cat {pidfile} 2>/dev/null); [ -n \"$p\" ] || exit 0; kill -TERM -- -\"$p\" 2>/dev/null || kill -TERM \"$p\" 2>/dev/null; \
         i=0; while kill -0 -- -\"$p\" 2>/dev/null && [ $i -lt {ticks} ]; do sleep 0.1; i=$((i+1)); done; \
         kill -KILL -- -\"$p\" 2>/dev/null; rm -f {pidfile}; exit 0",
        ticks = (secs * 10.0).ceil() as u64,
    )
}

// ------------------------------------------------------------------ selection and cache

/// Builds the environment the configuration names.
pub fn create(
    config: &TerminalConfig,
    task_id: &str,
    local_cwd: &std::path::Path,
) -> Result<Arc<dyn Environment>, EnvError> {
    match config.backend.as_str() {
        "local" => Ok(Arc::new(local::LocalEnv::new(
            config,
            local_cwd.to_path_buf(),
        )?)),
        "ssh" => Ok(Arc::new(ssh::SshEnv::connect(config)?)),
        "docker" => Ok(Arc::new(docker::DockerEnv::start(
            config, task_id, local_cwd,
        )?)),
        "singularity" => Ok(Arc::new(singularity::SingularityEnv::start(config)?)),
        "modal" => Ok(Arc::new(modal::ModalEnv::start(config, task_id)?)),
        "daytona" => Ok(Arc::new(daytona::DaytonaEnv::start(config, task_id)?)),
        "vercel_sandbox" => Ok(Arc::new(vercel::VercelEnv::start(config, task_id)?)),
        "kubernetes" => Ok(Arc::new(kubernetes::KubernetesEnv::start(config, task_id)?)),
        other => Err(unknown_backend(other)),
    }
}

pub fn unknown_backend(name: &str) -> EnvError {
    EnvError::new(format!(
        "unknown terminal backend '{name}' (from TERMINAL_ENV or terminal.backend); valid backends: {}",
        BACKENDS.join(", ")
    ))
}

/// What is missing for a backend to work, or `None` when it can be tried.
pub fn availability(config: &TerminalConfig) -> Option<String> {
    match config.backend.as_str() {
        "local" => local::availability(),
        "ssh" => ssh::availability(config),
        "docker" => docker::availability(config),
        "singularity" => singularity::availability(config),
        "modal" => modal::availability(config),
        "daytona" => daytona::availability(config),
        "vercel_sandbox" => vercel::availability(config),
        "kubernetes" => kubernetes::availability(config),
        other => Some(unknown_backend(other).reason),
    }
}

/// `value`, or the copy kept in `last` when that one is equal: what every task of a
/// server gets alike (its configuration, the places its sandbox keeps read-only) is
/// then held once, not once per task. Only the last value is kept, so a server whose
/// tasks differ holds one more copy at most.
pub(crate) fn one_copy<T: ?Sized + PartialEq>(
    last: &Mutex<Option<Arc<T>>>,
    value: Arc<T>,
) -> Arc<T> {
    let mut last = last.lock().unwrap_or_else(|p| p.into_inner());
    match last.as_ref() {
        Some(kept) if **kept == *value => Arc::clone(kept),
        _ => {
            *last = Some(Arc::clone(&value));
            value
        }
    }
}

/// `config`'s fingerprint, the one made last when its configuration is the same: what
/// every call of a server reads is mostly the same, and comparing two costs a fraction
/// of writing one out. The tasks of a server alike share one copy.
fn fingerprint_of(config: &TerminalConfig) -> Arc<str> {
    static LAST: Mutex<Option<(TerminalConfig, Arc<str>)>> = Mutex::new(None);
    let mut last = LAST.lock().unwrap_or_else(|p| p.into_inner());
    match last.as_ref() {
        Some((seen, fingerprint)) if seen == config => Arc::clone(fingerprint),
        _ => {
            let fingerprint: Arc<str> = config.fingerprint().into();
            let fingerprint = match last.as_ref() {
                Some((_, kept)) if *kept == fingerprint => Arc::clone(kept),
                _ => fingerprint,
            };
            *last = Some((config.clone(), Arc::clone(&fingerprint)));
            fingerprint
        }
    }
}

/// A cached environment and the task's shell state in it.
pub struct Slot {
    pub env: Arc<dyn Environment>,
    /// The configuration the environment was made with (see
    /// [`TerminalConfig::fingerprint`](crate::config::TerminalConfig::fingerprint)).
    pub fingerprint: Arc<str>,
    pub session: crate::snapshot::ShellSession,
    pub last_used: Mutex<Instant>,
    /// Serialises foreground commands of one task (cwd and snapshot are per task).
    pub run_lock: Mutex<()>,
    /// `last_used` as it was when the environment was last cooled ([`cool_idle`]).
    cooled_after: Mutex<Option<Instant>>,
}

fn slots() -> &'static Mutex<HashMap<String, Arc<Slot>>> {
    static SLOTS: OnceLock<Mutex<HashMap<String, Arc<Slot>>>> = OnceLock::new();
    SLOTS.get_or_init(Default::default)
}

/// Per-task creation locks, so two calls of one task never build two environments.
fn creation_locks() -> std::sync::MutexGuard<'static, HashMap<String, Arc<Mutex<()>>>> {
    static LOCKS: OnceLock<Mutex<HashMap<String, Arc<Mutex<()>>>>> = OnceLock::new();
    LOCKS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

fn creation_lock(key: &str) -> Arc<Mutex<()>> {
    Arc::clone(creation_locks().entry(key.to_string()).or_default())
}

/// Drops the creation locks nobody holds, which would otherwise stay for the server's
/// life, one for every task it ever saw. Locks are handed out under the map's own lock,
/// so one held nowhere else cannot be in the middle of being taken; a later call of the
/// task gets a fresh one.
fn forget_unheld_creation_locks() {
    creation_locks().retain(|_, lock| Arc::strong_count(lock) > 1);
}

fn cooled_tasks() -> std::sync::MutexGuard<'static, cooled::CooledTasks> {
    static COOLED: OnceLock<Mutex<cooled::CooledTasks>> = OnceLock::new();
    COOLED
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

/// Folds a cooled task's slot into a record ([`cooled::CooledTasks`]) when nothing else
/// holds the slot or its environment, the task runs no background process and its
/// environment can be made again; the caller holds the task's creation and run locks.
fn fold(task: &str, slot: Arc<Slot>) {
    let Some(dir) = slot.env.resumable_dir().and_then(std::path::Path::to_str) else {
        return;
    };
    if crate::process_registry::task_has_running(task) {
        return;
    }
    let cwd = slot.session.cwd();
    let mut live = slots().lock().unwrap_or_else(|p| p.into_inner());
    // The map's and ours: no call has the slot, no process the environment.
    if Arc::strong_count(&slot) != 2 || Arc::strong_count(&slot.env) != 1 {
        return;
    }
    if !live.contains_key(task) {
        return;
    }
    let kept = cooled_tasks().insert(
        task,
        [dir, &slot.session.sid, &cwd],
        Arc::clone(&slot.fingerprint),
        slot.session.snapshot_ready(),
        last_used(&slot),
    );
    if kept {
        live.remove(task);
    }
}

/// The environment and session of a folded task, made again around its state; `None`
/// when it cannot be (its directory is gone), after removing what is left.
fn unfold(
    cooled: cooled::Cooled,
    config: &TerminalConfig,
    local_cwd: &std::path::Path,
) -> Option<(Arc<dyn Environment>, crate::snapshot::ShellSession)> {
    let env = match config.backend.as_str() {
        "local" => local::LocalEnv::resume(
            config,
            local_cwd.to_path_buf(),
            cooled.state_dir.clone().into(),
        ),
        other => Err(unknown_backend(other)),
    };
    let Ok(env) = env else {
        cooled.remove_files();
        return None;
    };
    let session = crate::snapshot::ShellSession::resumed(
        &cooled.state_dir,
        cooled.sid,
        cooled.cwd,
        cooled.snapshot_ready,
    );
    Some((Arc::new(env), session))
}

/// The task's environment, created on first use (or when the configuration changed).
pub fn get_or_create(
    config: &TerminalConfig,
    task_id: &str,
    local_cwd: &std::path::Path,
) -> Result<Arc<Slot>, EnvError> {
    start_reaper();
    let fingerprint = fingerprint_of(config);
    let lock = creation_lock(task_id);
    let _guard = lock.lock().unwrap_or_else(|p| p.into_inner());
    let existing = slots()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(task_id)
        .cloned();
    if let Some(slot) = existing {
        if slot.fingerprint == fingerprint {
            *slot.last_used.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
            return Ok(slot);
        }
        slots()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(task_id);
        slot.env.cleanup();
    }
    let cooled = cooled_tasks().remove(task_id);
    let resumed = cooled.and_then(|cooled| {
        if cooled.fingerprint == fingerprint {
            unfold(cooled, config, local_cwd)
        } else {
            cooled.remove_files();
            None
        }
    });
    let (env, session) = match resumed {
        Some(resumed) => resumed,
        None => {
            let env = create(config, task_id, local_cwd)?;
            let default_cwd = match config.cwd.clone() {
                Some(cwd) => cwd,
                None => env.default_cwd(),
            };
            let session = crate::snapshot::ShellSession::new(env.temp_dir(), default_cwd);
            (env, session)
        }
    };
    if !session.snapshot_ready() {
        // Local tasks alike start from one login shell: same settings, server
        // environment and directory give the same start-up files the same input.
        let shared_as = (env.backend() == "local").then(|| {
            format!(
                "{fingerprint}|{}|{:?}",
                local_cwd.display(),
                local::child_env(&config.env_passthrough)
            )
        });
        session.init(env.as_ref(), shared_as);
    }
    let slot = Arc::new(Slot {
        env,
        fingerprint,
        session,
        last_used: Mutex::new(Instant::now()),
        run_lock: Mutex::new(()),
        cooled_after: Mutex::new(None),
    });
    slots()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(task_id.to_string(), Arc::clone(&slot));
    Ok(slot)
}

/// The directory the task's shell is in, when its commands run on this machine: the
/// file tools resolve relative paths against it, so `cd sub` then `read_file x` reads
/// `sub/x`. `None` before the task's first command or on a remote backend.
pub fn local_task_cwd(task_id: &str) -> Option<std::path::PathBuf> {
    let live = slots().lock().unwrap_or_else(|p| p.into_inner());
    let cwd = match live.get(task_id) {
        Some(slot) if slot.env.backend() != "local" => return None,
        Some(slot) => std::path::PathBuf::from(slot.session.cwd()),
        // Only local environments are folded; the live map's lock, held here, is held
        // while a task is folded, so the task is found in one of the two.
        None => std::path::PathBuf::from(cooled_tasks().cwd(task_id)?),
    };
    drop(live);
    cwd.is_absolute().then_some(cwd)
}

/// Drops a task's environment (e.g. after an infrastructure failure) and cleans it up.
pub fn evict(task_id: &str) {
    let slot = slots()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(task_id);
    if let Some(slot) = slot {
        slot.session.remove_files(slot.env.as_ref());
        slot.env.cleanup();
    }
    if let Some(cooled) = cooled_tasks().remove(task_id) {
        cooled.remove_files();
    }
}

/// Cleans up one task's environment (`cleanup_vm`).
pub fn cleanup_task(task_id: &str) {
    crate::process_registry::kill_task_processes(task_id);
    evict(task_id);
}

/// Cleans up every environment; registered to run at process exit.
pub fn cleanup_all_environments() {
    let all: Vec<(String, Arc<Slot>)> = slots()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .drain()
        .collect();
    crate::process_registry::kill_all_processes();
    for (_, slot) in all {
        slot.session.remove_files(slot.env.as_ref());
        slot.env.cleanup();
    }
    let cooled = cooled_tasks().drain();
    for cooled in cooled {
        cooled.remove_files();
    }
}

extern "C" fn cleanup_at_exit() {
    // Never panic across the FFI boundary.
    let _ = std::panic::catch_unwind(|| {
        cleanup_all_environments();
        hermes_sandbox::launcher::end_zygote();
        // Registered before the run directory was made, so this runs after its own
        // handler: once the sandboxes are gone their cgroups can go too.
        hermes_sandbox::run_dir::remove_server_dir();
    });
}

/// Every 60 s, drops environments idle longer than `TERMINAL_LIFETIME_SECONDS` whose task
/// has no running background process; more often, cools those idle longer than
/// `TERMINAL_KEEP_WARM_SECONDS`. Also registers the at-exit cleanup.
fn start_reaper() {
    static STARTED: OnceLock<()> = OnceLock::new();
    STARTED.get_or_init(|| {
        // SAFETY: registering a plain extern "C" fn.
        unsafe {
            libc::atexit(cleanup_at_exit);
        }
        std::thread::Builder::new()
            .name("terminal-env-reaper".into())
            .spawn(|| {
                const REAP_EVERY: Duration = Duration::from_secs(60);
                let mut last_reap = Instant::now();
                loop {
                    let keep_warm = Duration::from_secs(crate::config::keep_warm_seconds());
                    // A task cools at most half its keep-warm time late.
                    let tick = (keep_warm / 2).clamp(Duration::from_secs(1), REAP_EVERY);
                    std::thread::sleep(tick);
                    cool_idle(keep_warm);
                    forget_unheld_creation_locks();
                    if last_reap.elapsed() >= REAP_EVERY {
                        last_reap = Instant::now();
                        reap_idle(Duration::from_secs(crate::config::lifetime_seconds()));
                    }
                }
            })
            .ok();
    });
}

fn all_slots() -> Vec<(String, Arc<Slot>)> {
    slots()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .map(|(k, v)| (k.clone(), Arc::clone(v)))
        .collect()
}

fn last_used(slot: &Slot) -> Instant {
    *slot.last_used.lock().unwrap_or_else(|p| p.into_inner())
}

fn idle_for(slot: &Slot) -> Duration {
    last_used(slot).elapsed()
}

/// Cools the environments idle longer than `max_idle` whose task runs no foreground
/// command now (see [`Environment::cool`]), each once per idle spell, and folds those
/// that can be made again into a record ([`cooled::CooledTasks`]).
pub fn cool_idle(max_idle: Duration) {
    let mut cooled_any = false;
    for (task, slot) in all_slots() {
        let used = last_used(&slot);
        {
            let mut cooled_after = slot.cooled_after.lock().unwrap_or_else(|p| p.into_inner());
            if used.elapsed() <= max_idle || *cooled_after == Some(used) {
                continue;
            }
            // Held while cooling, so no command of the task starts meanwhile.
            let Ok(_serial) = slot.run_lock.try_lock() else {
                continue;
            };
            slot.env.cool();
            *cooled_after = Some(used);
            cooled_any = true;
        }
        // A call of the task now finding the slot gone makes it again from the record:
        // its creation lock orders the two.
        let creation = creation_lock(&task);
        let creating = creation.try_lock();
        if creating.is_ok() {
            fold(&task, slot);
        }
        drop(creating);
    }
    if cooled_any {
        give_freed_memory_back();
    }
}

/// Returns the heap's free pages to the system: what cooled tasks freed would otherwise
/// stay counted against this process until the allocator happens to reuse it.
fn give_freed_memory_back() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory of glibc's own heaps.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Drops environments idle longer than `max_idle`; returns the tasks reaped.
pub fn reap_idle(max_idle: Duration) -> Vec<String> {
    let mut reaped = Vec::new();
    for (task, slot) in all_slots() {
        if idle_for(&slot) > max_idle && !crate::process_registry::task_has_running(&task) {
            evict(&task);
            reaped.push(task);
        }
    }
    let expired = cooled_tasks().remove_idle_for(max_idle);
    for (task, record) in expired {
        record.remove_files();
        reaped.push(task);
    }
    reaped
}

#[cfg(test)]
mod tests {
    use super::sh_quote;

    /// A task's creation lock stays while someone holds it and is dropped after.
    #[test]
    fn creation_locks_held_by_nobody_are_dropped() {
        let task = "creation-lock-test-task";
        let held = super::creation_lock(task);
        let in_map = || super::creation_locks().contains_key(task);
        super::forget_unheld_creation_locks();
        assert!(in_map(), "dropped while held");
        let again = super::creation_lock(task);
        assert!(
            std::sync::Arc::ptr_eq(&held, &again),
            "a second lock while held"
        );
        drop((held, again));
        super::forget_unheld_creation_locks();
        assert!(!in_map(), "kept with nobody holding it");
    }

    /// What a real shell reads back from each quoted word is the word itself.
    #[test]
    fn sh_quote_round_trips_through_sh_and_bash() {
        let words = [
            "",
            "plain-word_1.txt",
            "two words",
            "it's",
            "'",
            "\"double\" and \\backslash\\",
            "$HOME `id` $(id) ${x}",
            "~/not-home",
            "a*b?c[d]",
            "semi;colon|pipe&amp>gt<lt",
            "line one\nline two\ttab",
            "^caret and !bang",
            "ünïcødé ✓",
            "=starts-with-equals",
            "#not a comment",
        ];
        for shell in ["sh", "bash"] {
            for word in words {
                let out = std::process::Command::new(shell)
                    .arg("-c")
                    .arg(format!("printf '%s' {}", sh_quote(word)))
                    .output()
                    .expect("the shell runs");
                assert!(
                    out.status.success(),
                    "{shell} rejected {:?}",
                    sh_quote(word)
                );
                assert_eq!(
                    String::from_utf8_lossy(&out.stdout),
                    word,
                    "{shell}, quoted as {}",
                    sh_quote(word)
                );
            }
        }
    }
}
