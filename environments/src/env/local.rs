//! The `local` backend: bash on this machine, each command in a new session inside the
//! OS sandbox of `terminal.sandbox.*` (crate `hermes-sandbox`), with an allow-listed
//! environment; and the process-tree kill every local child uses.

mod fork_server;
mod ready;
mod spawn;

use super::{ChildRun, EnvError, Environment, ReadEvent, Running};
use crate::config::TerminalConfig;
use crate::snapshot::ShellSession;
use hermes_sandbox::{Mode, Policy, WrapOptions};
use ready::ReadyShell;
use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub struct LocalEnv {
    cwd: PathBuf,
    /// Shared with the task's launcher.
    policy: Arc<Policy>,
    /// A private directory for the task's shell snapshot in the server's run directory
    /// (see `hermes_sandbox::run_dir`): inside the sandbox only this task's commands
    /// see it, writable in every mode (so `cd` and `export` persist under `read-only`
    /// too); removed at cleanup.
    state_dir: PathBuf,
    passthrough: Vec<String>,
    /// The task's long-lived sandbox for foreground commands.
    launcher: hermes_sandbox::launcher::Launcher,
    /// The next foreground command's shell, started ahead (in the sandbox).
    ready: Mutex<Option<ReadyShell>>,
    /// Set (with `ready` locked) once the task is cleaned up: no shell is started ahead
    /// after that.
    closed: std::sync::atomic::AtomicBool,
    /// The bash foreground commands are forked from (on this machine with the sandbox
    /// off, else kept in the task's sandbox).
    forks: fork_server::Slot,
    /// Foreground commands run so far (shells are started ahead from the second on).
    foreground_runs: std::sync::atomic::AtomicUsize,
    /// A command of the task came while the shell started for it after the command
    /// before was still starting: from then on (until the task cools down) the next
    /// command's shell is started while a command runs, which takes a second sandbox.
    /// Tasks whose commands come with a pause between them (an agent's turns, or many
    /// tasks sharing the machine) never pay for one.
    back_to_back: std::sync::atomic::AtomicBool,
}

/// How a local child is launched.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Launch {
    /// Outside the sandbox: only for a command a person approved.
    pub escalate: bool,
    /// In a pseudo-terminal (keeps the session the terminal set up).
    pub pty: bool,
    /// The pseudo-terminal's device, shown inside the sandbox under its own name.
    pub tty: Option<PathBuf>,
}

/// A child command ready to spawn: the argv (sandbox launcher first, unless off or
/// escalated), its whole environment and its working directory.
#[derive(Debug, Clone)]
pub struct LocalCommand {
    pub argv: Vec<OsString>,
    pub env: Vec<(OsString, OsString)>,
    pub cwd: PathBuf,
    /// Sandboxed: the launch happens under Landlock scopes.
    pub scoped: bool,
    /// The sandbox's way out through the runtime's proxy, prepared at the spawn
    /// ([`hermes_sandbox::network::attach`]); `None` for every other launch.
    pub proxied: Option<hermes_sandbox::Network>,
}

impl LocalCommand {
    /// Runs `start` (which spawns this command) so that the child inherits the sandbox's
    /// Landlock scopes.
    pub fn launch<T: Send + 'static>(
        &self,
        start: impl FnOnce() -> std::io::Result<T> + Send + 'static,
    ) -> std::io::Result<T> {
        if self.scoped {
            hermes_sandbox::spawn_scoped(start)
        } else {
            start()
        }
    }

    pub fn to_command(&self) -> Command {
        let mut cmd = Command::new(&self.argv[0]);
        cmd.args(&self.argv[1..])
            .env_clear()
            .envs(self.env.iter().cloned())
            .current_dir(&self.cwd);
        if let Some(network) = &self.proxied {
            hermes_sandbox::network::attach(&mut cmd, network);
        }
        cmd
    }
}

impl LocalEnv {
    pub fn new(config: &TerminalConfig, cwd: PathBuf) -> Result<Self, EnvError> {
        let state_dir = hermes_sandbox::run_dir::private_dir("task").map_err(EnvError::new)?;
        Self::around(config, cwd, state_dir)
    }

    /// The environment of a task that cooled down with its state in `state_dir` (see
    /// [`Environment::resumable_dir`]); an error when that directory is gone or is not
    /// the private directory this server made.
    pub fn resume(
        config: &TerminalConfig,
        cwd: PathBuf,
        state_dir: PathBuf,
    ) -> Result<Self, EnvError> {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::symlink_metadata(&state_dir)
            .map_err(|e| EnvError::new(format!("{}: {e}", state_dir.display())))?;
        // SAFETY: geteuid has no preconditions.
        let own = meta.uid() == unsafe { libc::geteuid() };
        if !meta.is_dir() || !own || meta.mode() & 0o077 != 0 {
            return Err(EnvError::new(format!(
                "{}: no longer this task's private directory",
                state_dir.display()
            )));
        }
        Self::around(config, cwd, state_dir)
    }

    fn around(config: &TerminalConfig, cwd: PathBuf, state_dir: PathBuf) -> Result<Self, EnvError> {
        let settings = &config.sandbox;
        let policy = sandbox_policy(
            config,
            Confined {
                mode: settings.mode,
                access_from: &cwd,
                writable_roots: config.writable_roots(&cwd),
                state_dirs: vec![state_dir.clone()],
                network: settings.network.clone(),
            },
        )?;
        let policy = Arc::new(policy);
        let launcher = hermes_sandbox::launcher::Launcher::new(Arc::clone(&policy));
        Ok(Self {
            cwd,
            policy,
            state_dir,
            passthrough: config.env_passthrough.clone(),
            launcher,
            ready: Mutex::default(),
            closed: Default::default(),
            forks: Default::default(),
            foreground_runs: Default::default(),
            back_to_back: Default::default(),
        })
    }

    /// The environment of a command run by the task's sandbox launcher (whose spawn is
    /// prepared for the proxy).
    fn launcher_env(&self) -> Vec<(OsString, OsString)> {
        self.command_env(self.policy.is_active())
    }

    /// The allow-listed environment, and the proxy settings when `proxied`.
    fn command_env(&self, proxied: bool) -> Vec<(OsString, OsString)> {
        let mut env = child_env(&self.passthrough);
        if proxied {
            env.extend(proxy_env(&self.policy.network));
        }
        env
    }

    /// The one place a local child is built: `argv` run in `cwd` inside the sandbox
    /// (outside it only when `launch.escalate`), with the allow-listed environment. An
    /// error when the sandbox cannot start here (it never falls back to no sandbox).
    pub fn command_line(
        &self,
        argv: Vec<OsString>,
        cwd: &Path,
        launch: Launch,
    ) -> Result<LocalCommand, EnvError> {
        let cwd = nearest_existing(cwd);
        let proxied = (!launch.escalate
            && self.policy.is_active()
            && self.policy.network != hermes_sandbox::Network::Off)
            .then(|| self.policy.network.clone());
        let argv = if launch.escalate {
            argv
        } else {
            self.policy
                .wrap(
                    &argv,
                    &cwd,
                    WrapOptions {
                        new_session: !launch.pty,
                        tty: launch.tty.as_deref(),
                        proxied: proxied.is_some(),
                    },
                )
                .map_err(|e| EnvError::new(e.0))?
        };
        let scoped = !launch.escalate && self.policy.is_active();
        Ok(LocalCommand {
            argv,
            env: self.command_env(proxied.is_some()),
            cwd,
            scoped,
            proxied,
        })
    }

    fn start(
        &self,
        script: &str,
        login: bool,
        stdin: Option<Vec<u8>>,
        escalate: bool,
    ) -> Result<Box<dyn Running>, EnvError> {
        let argv = bash_argv(script, login)?;
        let launch = self.command_line(
            argv,
            &self.cwd,
            Launch {
                escalate,
                ..Launch::default()
            },
        )?;
        let cmd = launch.to_command();
        let run = launch
            .launch(move || ChildRun::spawn(cmd, stdin, false))
            .map_err(|e| EnvError::new(format!("cannot start bash: {e}")))?;
        Ok(Box::new(run))
    }

    fn take_ready(&self) -> Option<ReadyShell> {
        self.ready.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    /// A shell for the next command in one of the task's sandboxes, when it has one idle
    /// (never a new sandbox for it), that will restore `session`'s state once told, in
    /// `env` (a child's environment). `ended`: the command before it has ended, so the
    /// snapshot is final. `None` when it cannot be started that way.
    fn start_ready(
        &self,
        session: &ShellSession,
        env: Vec<(OsString, OsString)>,
        ended: bool,
    ) -> Option<ReadyShell> {
        if !self.policy.is_active() {
            return None;
        }
        let restore = session.restore();
        let mut start_env = env.clone();
        let mut restore_later = None;
        let restore_file = if ended {
            // The snapshot's exports go into the shell's environment and the rest is
            // sourced from descriptor 5.
            lighter_restore(session, &env, true).and_then(|(moved, text)| {
                let file = ready::memory_file(&text).ok()?;
                start_env.retain(|(k, _)| !moved.iter().any(|(m, _)| m == k));
                start_env.extend(moved);
                Some(OwnedFd::from(file))
            })
        } else {
            // The snapshot is written into descriptor 5 once the command before has ended.
            let file = ready::memory_file(b"").ok()?;
            let shell_end = OwnedFd::from(file.try_clone().ok()?);
            restore_later = Some(file);
            Some(shell_end)
        };
        let argv = bash_argv(
            &ready::prelude(if restore_file.is_some() {
                ready::SOURCE_FD_5
            } else {
                &restore
            }),
            false,
        )
        .ok()?;
        let channel = ready::Channel::new().ok()?;
        let script_end = OwnedFd::from(channel.script.try_clone().ok()?);
        let shell_ends: Vec<&OwnedFd> = [
            Some(&script_end),
            Some(&channel.go_read),
            restore_file.as_ref(),
        ]
        .into_iter()
        .flatten()
        .collect();
        let Some(run) =
            self.launcher
                .run_if_idle(&argv, &start_env, &nearest_existing(&self.cwd), &shell_ends)
        else {
            // Beside a running command: the next time, a second sandbox waits for it.
            if !ended {
                self.launcher.warm_up();
            }
            return None;
        };
        Some(ReadyShell::new(
            &restore,
            env,
            channel,
            restore_later,
            Launched(run),
        ))
    }

    /// Lets the waiting shell restore `session`'s state: the command before it has ended.
    fn restore_in(&self, shell: &mut ReadyShell, session: &ShellSession) -> bool {
        shell.restore_now(|env| match lighter_restore(session, env, false) {
            Some((_, text)) => text,
            None => session.restore().into_bytes(),
        })
    }

    /// `session`'s state restored, then `body`, in the shell waiting for it when that one
    /// still fits; from the task's second such command on, the shell for the next one is
    /// started meanwhile.
    fn run_restored(
        &self,
        session: &ShellSession,
        body: &str,
        runs: usize,
    ) -> Result<Box<dyn Running>, EnvError> {
        let restore = session.restore();
        let env = self.launcher_env();
        if let Some(run) = self.fork(session, &restore, body, &env) {
            return Ok(run);
        }
        if let Some(mut shell) = self.take_ready() {
            if shell.still_starting() {
                self.back_to_back
                    .store(true, std::sync::atomic::Ordering::Relaxed);
            }
            let fits =
                shell.matches(&restore, &env) && self.launcher.is_current(&mut shell.waiting.0);
            if fits && self.restore_in(&mut shell, session) {
                match shell.hand_over(body) {
                    Ok(run) => {
                        self.start_ready_beside(session, env);
                        return Ok(run);
                    }
                    Err(shell) => shell.retire(),
                }
            } else {
                shell.retire();
            }
        }
        let run = self.run_foreground(&format!("{restore}{body}"), false);
        if run.is_ok() && runs >= 2 {
            self.start_ready_beside(session, env);
        }
        run
    }

    /// Forked from the task's waiting bash (in its sandbox, or on this machine with the
    /// sandbox off) when it has one that still fits, or else from one started now for
    /// it: a start that takes the place of the one the command would get. Started with a
    /// task's first command too: a fork costs a fraction of a second bash start, which
    /// every task that runs a second command would pay. `None` when neither can be had;
    /// the command then runs as before.
    fn fork(
        &self,
        session: &ShellSession,
        restore: &str,
        body: &str,
        env: &[(OsString, OsString)],
    ) -> Option<Box<dyn Running>> {
        let mut waiting = self.forks.lock().unwrap_or_else(|p| p.into_inner()).take();
        let server = match waiting.take_if(|server| server.fits(env, &self.launcher)) {
            Some(server) => server,
            None => {
                // One that no longer fits ends here (in the sandbox, with its sandbox).
                drop(waiting);
                self.start_fork_server(env)?
            }
        };
        let snapshot = snapshot_to_source(session);
        let run = server.run(snapshot, restore, body, &self.forks).ok()?;
        Some(Box::new(run))
    }

    fn start_fork_server(&self, env: &[(OsString, OsString)]) -> Option<fork_server::ForkServer> {
        if self.closed.load(std::sync::atomic::Ordering::SeqCst) {
            return None;
        }
        let bash = find_bash()?;
        let cwd = nearest_existing(&self.cwd);
        if !self.policy.is_active() {
            return fork_server::ForkServer::start(&bash, env.to_vec(), &cwd).ok();
        }
        // It takes an idle sandbox of the task, which a shell started ahead may hold.
        if let Some(shell) = self.take_ready() {
            shell.retire();
        }
        fork_server::ForkServer::start_in_sandbox(&self.launcher, &bash, env.to_vec(), &cwd)
    }

    /// Starts the next command's shell (in `env`) while this one runs, in the task's
    /// other sandbox, when the task's commands come back to back.
    fn start_ready_beside(&self, session: &ShellSession, env: Vec<(OsString, OsString)>) {
        if !self.back_to_back.load(std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        let mut slot = self.ready.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() && !self.closed.load(std::sync::atomic::Ordering::SeqCst) {
            *slot = self.start_ready(session, env, false);
        }
    }
}

/// Exports to add to a shell's environment, and the script it sources to restore.
type Lighter = (Vec<(OsString, OsString)>, Vec<u8>);

/// The task's snapshot made lighter for a shell that starts in exactly `env` (see
/// [`crate::snapshot::lighter_snapshot`]), for that shell to source from a descriptor
/// through `/proc/self/fd`; `None` (restore from the snapshot file) when there is no
/// snapshot yet, it cannot be read, or this machine has no `/proc` to source it through.
fn lighter_restore(
    session: &ShellSession,
    env: &[(OsString, OsString)],
    move_exports: bool,
) -> Option<Lighter> {
    let snapshot = snapshot_to_source(session)?;
    Some(crate::snapshot::lighter_snapshot(
        &snapshot,
        env,
        move_exports,
    ))
}

/// The task's snapshot as it is now, for a shell to source (made lighter) from a
/// descriptor through `/proc/self/fd`; `None` when there is no snapshot yet, it cannot be
/// read, or this machine has no `/proc` to source it through.
fn snapshot_to_source(session: &ShellSession) -> Option<Vec<u8>> {
    static PROC_FDS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    if !session.snapshot_ready() || !*PROC_FDS.get_or_init(|| Path::new("/proc/self/fd").is_dir()) {
        return None;
    }
    crate::snapshot::read_own_file(&session.snapshot_path).ok()
}

/// `bash [-l] -c script`.
fn bash_argv(script: &str, login: bool) -> Result<Vec<OsString>, EnvError> {
    let bash = find_bash().ok_or_else(|| EnvError::new("bash was not found"))?;
    let mut argv: Vec<OsString> = vec![bash.into()];
    if login {
        argv.push("-l".into());
    }
    argv.extend(["-c".into(), script.into()]);
    Ok(argv)
}

/// A foreground command in the task's long-lived sandbox.
pub(crate) struct Launched(hermes_sandbox::launcher::LaunchedRun);

impl Running for Launched {
    fn pid(&self) -> Option<u32> {
        self.0.pid()
    }

    fn read(&mut self, wait: Duration) -> ReadEvent {
        self.0.read(wait).into()
    }

    fn try_wait(&mut self) -> Option<i32> {
        self.0.try_wait()
    }

    fn wait_exit(&mut self, wait: Duration) -> Option<i32> {
        self.0.wait_exit(wait)
    }

    fn kill(&mut self, grace: Duration) -> Vec<u32> {
        self.0.kill(grace)
    }
}

/// The sandbox of a program the runtime starts for a tool (the browser), under the
/// same policy as the task's commands: the same read-only places and hidden secrets,
/// the same limits, nothing writable but the state directories the caller adds (the
/// program's own private directory in the server's run directory), and a network namespace whose one way out
/// is the runtime's proxy, judged by the tool's own network policy
/// ([`hermes_sandbox::network::attach_judged`]; a web tool's reach is
/// `security.*`, not `terminal.sandbox.network`). `None` when `terminal.sandbox.mode` is `off`: the operator
/// chose to run what the model starts with the server's own rights.
pub fn program_policy(config: &TerminalConfig) -> Result<Option<Policy>, EnvError> {
    if config.sandbox.mode == Mode::Off {
        return Ok(None);
    }
    sandbox_policy(
        config,
        Confined {
            mode: Mode::ReadOnly,
            access_from: &config.hermes_home,
            writable_roots: Vec::new(),
            state_dirs: Vec::new(),
            network: hermes_sandbox::Network::loopback_off(),
        },
    )
    .map(Some)
}

/// What differs between the sandboxes of a task's commands and of a program the
/// runtime starts for a tool.
struct Confined<'a> {
    mode: Mode,
    /// The working directory the access policy (protected and deny-read places) is
    /// worked out from.
    access_from: &'a Path,
    writable_roots: Vec<PathBuf>,
    state_dirs: Vec<PathBuf>,
    network: hermes_sandbox::Network,
}

/// The one place a local sandbox's [`Policy`] is put together from the configuration:
/// every sandbox hides the server's run directory and the deny-read list, keeps
/// `$HERMES_HOME` and the protected places read-only, and has the configured limits;
/// the empty file and the seccomp programs (written once per server) come with any mode
/// but `off`.
fn sandbox_policy(config: &TerminalConfig, confined: Confined<'_>) -> Result<Policy, EnvError> {
    let active = confined.mode != Mode::Off;
    let access = config.access_policy(confined.access_from);
    Ok(Policy {
        mode: confined.mode,
        writable_roots: confined.writable_roots,
        state_dirs: confined.state_dirs,
        hidden: hermes_sandbox::run_dir::hidden_places(),
        protected: read_only_places(&config.hermes_home, &access),
        network: confined.network,
        empty_file: if active {
            Some(hermes_sandbox::run_dir::empty_file().map_err(EnvError::new)?)
        } else {
            None
        },
        seccomp_programs: if active {
            hermes_sandbox::run_dir::seccomp_programs().map_err(EnvError::new)?
        } else {
            Vec::new()
        },
        limits: config.sandbox.limits,
    })
}

/// What stays read-only inside the sandbox: the whole `$HERMES_HOME` (configuration,
/// plugins and state the server trusts) and the protected places of the access policy
/// the file tools use (credentials, start-up files, system directories); and what is
/// hidden (seen empty): the policy's deny-read list.
fn read_only_places(
    hermes_home: &Path,
    access: &hermes_runtime::access::AccessPolicy,
) -> Arc<[hermes_sandbox::ReadOnlyPlace]> {
    use hermes_runtime::protected_paths::{resolve, Extent};
    use hermes_sandbox::ReadOnlyPlace;
    let mut places = vec![ReadOnlyPlace::tree(resolve(hermes_home))];
    places.extend(access.protected().places().iter().map(|p| match p.extent {
        Extent::Tree => ReadOnlyPlace::tree(&p.path),
        Extent::File => ReadOnlyPlace::file(&p.path),
    }));
    places.extend(
        access
            .deny_read()
            .iter()
            .map(|p| ReadOnlyPlace::hidden(&p.path, p.extent == Extent::Tree)),
    );
    static LAST: Mutex<Option<Arc<[ReadOnlyPlace]>>> = Mutex::new(None);
    super::one_copy(&LAST, places.into())
}

pub fn availability() -> Option<String> {
    if find_bash().is_none() {
        return Some("bash was not found on PATH or in /bin, /usr/bin".into());
    }
    None
}

/// The bash to run (`/bin/bash` when PATH has none). The answer is kept while PATH is
/// unchanged and the file is still there, so a call costs one stat, not one per PATH entry.
pub fn find_bash() -> Option<PathBuf> {
    static FOUND: Mutex<Option<(Option<OsString>, PathBuf)>> = Mutex::new(None);
    let path = std::env::var_os("PATH");
    let mut found = FOUND.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((seen, bash)) = found.as_ref() {
        if *seen == path && bash.is_file() {
            return Some(bash.clone());
        }
    }
    let bash = search_bash()?;
    *found = Some((path, bash.clone()));
    Some(bash)
}

fn search_bash() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let candidate = dir.join("bash");
            if candidate.is_file() {
                return Some(candidate);
            }
        }
    }
    ["/bin/bash", "/usr/bin/bash", "/usr/local/bin/bash"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
}

/// The temp dir: an absolute `TMPDIR`, else `/tmp`.
pub fn local_temp_dir() -> String {
    std::env::var("TMPDIR")
        .ok()
        .filter(|t| t.starts_with('/'))
        .map(|t| t.trim_end_matches('/').to_string())
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| "/tmp".to_string())
}

/// The variables that send a sandboxed command's HTTP clients through the runtime's proxy.
fn proxy_env(network: &hermes_sandbox::Network) -> Vec<(OsString, OsString)> {
    network
        .proxy_env()
        .into_iter()
        .map(|(name, value)| (name.into(), value.into()))
        .collect()
}

/// The environment of a local child: the allow-list of `hermes-sandbox` plus the
/// `passthrough` names; `_HERMES_FORCE_<NAME>` injects `<NAME>`; a PATH without
/// `/usr/bin` gets the standard directories.
pub fn child_env(passthrough: &[String]) -> Vec<(OsString, OsString)> {
    // One copy of the server's environment (each costs a lock and every variable).
    let server: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    let path = server
        .iter()
        .find(|(k, _)| k == "PATH")
        .and_then(|(_, v)| v.to_str())
        .unwrap_or_default()
        .to_string();
    let forced: Vec<(OsString, OsString)> = server
        .iter()
        .filter_map(|(key, value)| {
            Some((
                key.to_str()?.strip_prefix("_HERMES_FORCE_")?.into(),
                value.clone(),
            ))
        })
        .collect();
    let mut env = hermes_sandbox::child_env(server, passthrough);
    let mut set = |name: OsString, value: OsString| {
        env.retain(|(k, _)| *k != name);
        env.push((name, value));
    };
    for (name, value) in forced {
        set(name, value);
    }
    if !path.split(':').any(|d| d == "/usr/bin") {
        let extra =
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/opt/homebrew/bin";
        let joined = if path.is_empty() {
            extra.to_string()
        } else {
            format!("{path}:{extra}")
        };
        set("PATH".into(), joined.into());
    }
    set("PYTHONUNBUFFERED".into(), "1".into());
    env
}

impl Environment for LocalEnv {
    fn backend(&self) -> &'static str {
        "local"
    }

    fn run_bash(
        &self,
        script: &str,
        login: bool,
        stdin: Option<Vec<u8>>,
    ) -> Result<Box<dyn Running>, EnvError> {
        self.start(script, login, stdin, false)
    }

    /// In the task's long-lived sandbox when there is one to use (commands of a task
    /// come one at a time), else in a sandbox of its own.
    fn run_foreground(&self, script: &str, login: bool) -> Result<Box<dyn Running>, EnvError> {
        if let Some(shell) = self.take_ready() {
            shell.retire();
        }
        if self.policy.is_active() {
            let argv = bash_argv(script, login)?;
            if let Some(run) = self.launcher.run(
                &argv,
                &self.launcher_env(),
                &nearest_existing(&self.cwd),
                &[],
            ) {
                return Ok(Box::new(Launched(run)));
            }
        }
        self.start(script, login, None, false)
    }

    /// In the shell started ahead for this command when it is still what a fresh start
    /// would be (sandbox), or forked from the task's waiting bash (sandbox off).
    fn run_foreground_restored(
        &self,
        session: &ShellSession,
        body: &str,
    ) -> Result<Box<dyn Running>, EnvError> {
        let runs = self
            .foreground_runs
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1;
        if !self.policy.is_active() {
            let restore = session.restore();
            if let Some(run) = self.fork(session, &restore, body, &self.launcher_env()) {
                return Ok(run);
            }
            return self.run_foreground(&format!("{restore}{body}"), false);
        }
        self.run_restored(session, body, runs)
    }

    /// Only once a task has run a second command: many tasks run one (a single `call`,
    /// one-off subtasks), and a shell started for nothing still costs a bash start. The
    /// waiting shell restores the state now: the command before it has ended.
    fn prepare_foreground(&self, session: &ShellSession) {
        if self
            .foreground_runs
            .load(std::sync::atomic::Ordering::Relaxed)
            < 2
        {
            return;
        }
        // The next command is forked from the bash waiting for it.
        if self
            .forks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
        {
            return;
        }
        let mut slot = self.ready.lock().unwrap_or_else(|p| p.into_inner());
        if self.closed.load(std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        if slot.is_none() {
            *slot = self.start_ready(session, self.launcher_env(), true);
        }
        // A shell that cannot be told is retired, with the slot free again.
        if slot
            .as_mut()
            .is_some_and(|shell| !self.restore_in(shell, session))
        {
            if let Some(shell) = slot.take() {
                drop(slot);
                shell.retire();
            }
        }
    }

    /// A shell waiting for the next command is retired first: this command may change
    /// the snapshot it sourced.
    fn run_bash_escalated(
        &self,
        script: &str,
        login: bool,
        stdin: Option<Vec<u8>>,
    ) -> Result<Box<dyn Running>, EnvError> {
        if let Some(shell) = self.take_ready() {
            shell.retire();
        }
        self.start(script, login, stdin, true)
    }

    fn local_command(
        &self,
        argv: Vec<OsString>,
        cwd: &Path,
        launch: Launch,
    ) -> Option<Result<LocalCommand, EnvError>> {
        Some(self.command_line(argv, cwd, launch))
    }

    fn sandbox_mode(&self) -> Option<Mode> {
        Some(self.policy.mode)
    }

    fn temp_dir(&self) -> String {
        self.state_dir.to_string_lossy().into_owned()
    }

    fn default_cwd(&self) -> String {
        self.cwd.to_string_lossy().into_owned()
    }

    fn fetch_file(&self, path: &str, max_bytes: usize) -> Result<Vec<u8>, EnvError> {
        use std::io::Read;
        let file = std::fs::File::open(path).map_err(|e| EnvError::new(format!("{path}: {e}")))?;
        let mut out = Vec::new();
        file.take(max_bytes as u64)
            .read_to_end(&mut out)
            .map_err(|e| EnvError::new(format!("{path}: {e}")))?;
        Ok(out)
    }

    fn resumable_dir(&self) -> Option<&Path> {
        Some(&self.state_dir)
    }

    fn cool(&self) {
        if let Some(shell) = self.take_ready() {
            shell.retire();
        }
        drop(self.forks.lock().unwrap_or_else(|p| p.into_inner()).take());
        self.launcher.end_idle();
        self.back_to_back
            .store(false, std::sync::atomic::Ordering::Relaxed);
    }

    fn cleanup(&self) {
        let ready = {
            let mut slot = self.ready.lock().unwrap_or_else(|p| p.into_inner());
            self.closed.store(true, std::sync::atomic::Ordering::SeqCst);
            slot.take()
        };
        if let Some(shell) = ready {
            shell.retire();
        }
        drop(self.forks.lock().unwrap_or_else(|p| p.into_inner()).take());
        self.launcher.shutdown();
        let _ = std::fs::remove_dir_all(&self.state_dir);
    }
}

/// The nearest existing ancestor of `path` (a deleted cwd must not stop commands).
pub fn nearest_existing(path: &Path) -> PathBuf {
    let mut current = path.to_path_buf();
    loop {
        if current.is_dir() {
            return current;
        }
        if !current.pop() {
            return PathBuf::from("/");
        }
    }
}

// ------------------------------------------------------------------ process trees

/// (pid, ppid, pgrp, state) of every process, from /proc.
fn process_table() -> Vec<(u32, u32, i32, char)> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return out;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if let Some(row) = stat_of(pid) {
            out.push(row);
        }
    }
    out
}

fn stat_of(pid: u32) -> Option<(u32, u32, i32, char)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &text[text.rfind(')')? + 1..];
    let mut fields = after.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some((pid, ppid, pgrp, state))
}

/// Whether a process exists and is not a zombie.
pub fn is_alive(pid: u32) -> bool {
    match stat_of(pid) {
        Some((_, _, _, state)) => state != 'Z' && state != 'X',
        None => {
            // No /proc: fall back to kill(0).
            // SAFETY: signal 0 only checks existence.
            !std::path::Path::new("/proc/self").exists()
                && unsafe { libc::kill(pid as i32, 0) } == 0
        }
    }
}

/// `root`, its process group (when it leads one) and all its descendants.
pub fn tree_pids(root: u32) -> Vec<u32> {
    let table = process_table();
    let mut set: Vec<u32> = vec![root];
    let root_pgrp = table.iter().find(|(pid, ..)| *pid == root).map(|r| r.2);
    if root_pgrp == Some(root as i32) {
        for (pid, _, pgrp, _) in &table {
            if *pgrp == root as i32 && !set.contains(pid) {
                set.push(*pid);
            }
        }
    }
    let mut i = 0;
    while i < set.len() {
        let parent = set[i];
        for (pid, ppid, ..) in &table {
            if *ppid == parent && !set.contains(pid) {
                set.push(*pid);
            }
        }
        i += 1;
    }
    set
}

fn signal_all(pgid: u32, pids: &[u32], sig: i32) {
    // SAFETY: sending signals to pids we collected; failures are ignored.
    unsafe {
        libc::kill(-(pgid as i32), sig);
        for pid in pids {
            libc::kill(*pid as i32, sig);
        }
    }
}

/// Stops the process tree rooted at `root` (a session/group leader): SIGTERM to the group
/// and every descendant, up to `grace` for them to exit, then SIGKILL; `reap` is called
/// while waiting so the caller can collect its direct child. Returns the survivors.
pub fn kill_tree(root: u32, grace: Duration, reap: &mut dyn FnMut()) -> Vec<u32> {
    let mut pids = tree_pids(root);
    signal_all(root, &pids, libc::SIGTERM);
    // Resume stopped processes so they can act on SIGTERM.
    signal_all(root, &pids, libc::SIGCONT);
    let deadline = Instant::now() + grace;
    loop {
        reap();
        for pid in tree_pids(root) {
            if !pids.contains(&pid) {
                pids.push(pid);
            }
        }
        if !pids.iter().any(|p| is_alive(*p)) {
            return Vec::new();
        }
        if Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    for pid in tree_pids(root) {
        if !pids.contains(&pid) {
            pids.push(pid);
        }
    }
    signal_all(root, &pids, libc::SIGKILL);
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        reap();
        let survivors: Vec<u32> = pids.iter().copied().filter(|p| is_alive(*p)).collect();
        if survivors.is_empty() || Instant::now() >= deadline {
            return survivors;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
}

#[cfg(test)]
mod tests {
    use super::read_only_places;
    use hermes_runtime::access::AccessPolicy;
    use std::sync::Arc;

    /// Tasks alike hold one list of read-only places between them, not one each: it runs
    /// to hundreds of paths, and every task's sandbox policy has it.
    #[test]
    fn tasks_alike_share_one_list_of_read_only_places() {
        let home = tempfile::tempdir().unwrap();
        let hermes_home = home.path().join(".hermes");
        let access = || AccessPolicy::new(home.path(), &hermes_home);
        let first = read_only_places(&hermes_home, &access());
        let second = read_only_places(&hermes_home, &access());
        assert!(first.len() > 10, "the protected places: {first:?}");
        assert!(Arc::ptr_eq(&first, &second));

        let other_home = tempfile::tempdir().unwrap();
        let other = read_only_places(
            &hermes_home,
            &AccessPolicy::new(other_home.path(), &hermes_home),
        );
        assert_ne!(first, other);
        assert!(!Arc::ptr_eq(&first, &other));
    }
}
