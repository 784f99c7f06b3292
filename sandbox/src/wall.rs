//! The sandbox's namespaces and mounts, set up by this program itself: the wall ships
//! with the binary, so a fresh machine needs no bubblewrap package.
//!
//! A program that calls [`crate::launcher::serve_if_requested`] first thing in `main`
//! (the `hermes-tools` binary does) becomes, when started with [`WALL_ARG`], a launcher
//! that understands the subset of bubblewrap's command line [`crate::bwrap`] writes
//! and nothing else (an unknown option is an error, never ignored):
//!
//! 1. the limits: the cgroups joined (`--cgroup-procs`) and the resource limits set
//!    (`--rlimit`); with `--proxy-channel` a user and network namespace of its own, where
//!    the proxy's listener is made and sent to the server ([`crate::network`]); the
//!    Landlock scopes applied ([`crate::scope`]), then `unshare` of the
//!    user, mount, PID, IPC and UTS namespaces (and network, cgroup), the caller's uid
//!    and gid mapped to themselves;
//! 2. a first child, init of the new PID namespace, builds the new root on a private
//!    tmpfs: every step (`--ro-bind`, `--bind`, `--dev-bind`, `--tmpfs`,
//!    `--remount-ro`, `--dev`, `--proc`, `--symlink`) in the order given, sources taken
//!    from the old root (the base pivoted into first), then the old root detached and
//!    the new root moved over the base and entered;
//! 3. a second child (PID 2) starts a new session if asked, drops every capability,
//!    sets no-new-privileges, loads the seccomp programs (read from their files before
//!    anything changed) and executes the command; init reaps orphans and exits with the command's status
//!    (128 + signal when a signal ended it), and when init ends the kernel ends every
//!    process of the namespace. Before Landlock ABI 9 init also keeps the sandbox's
//!    unix connects and datagrams to its own socket files ([`unix_guard`]).
//!
//! Read-only binds are made with `mount_setattr(AT_RECURSIVE)` (Linux 5.12), which
//! reaches every mount beneath the place at once and only ever adds restrictions, so a
//! host mount under a read-only tree cannot stay writable (`--remount-ro`, as in
//! bubblewrap, changes only the mount at its place). Where the kernel lacks it
//! the wall fails closed and the caller may use a system bubblewrap instead.

use std::ffi::{CStr, CString, OsStr, OsString};
use std::os::fd::FromRawFd;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

mod confined;
mod unix_guard;

/// The argument that turns a program into the wall.
pub const WALL_ARG: &str = "__hermes-sandbox-wall";

/// The option that names the proxy's channel ([`crate::network`]).
pub(crate) const PROXY_CHANNEL_ARG: &str = "--proxy-channel";

/// Where the new root is assembled: a tmpfs mounted over this place, visible only in
/// the new mount namespace, becomes the root the old one is pivoted under.
const BASE: &str = "/tmp";
const NEW_ROOT: &str = "/newroot";
const OLD_ROOT: &str = "/oldroot";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BindKind {
    ReadWrite,
    ReadOnly,
    Devices,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Bind {
        source: PathBuf,
        dest: PathBuf,
        kind: BindKind,
    },
    Tmpfs(PathBuf),
    RemountReadOnly(PathBuf),
    Dev(PathBuf),
    Proc(PathBuf),
    Symlink {
        target: PathBuf,
        link: PathBuf,
    },
}

/// What the command line asked for.
#[derive(Debug, Default, PartialEq, Eq)]
struct Plan {
    /// Landlock and seccomp only ([`confined`]): the kernel refuses user namespaces.
    landlock_only: bool,
    die_with_parent: bool,
    unshare_net: bool,
    unshare_cgroup: bool,
    new_session: bool,
    chdir: Option<PathBuf>,
    /// The descriptor on which the proxy's listener goes back to the server, from a
    /// network namespace this process makes first (see [`crate::network`]).
    proxy_channel: Option<libc::c_int>,
    seccomp_files: Vec<PathBuf>,
    cgroup_procs: Vec<PathBuf>,
    rlimits: Vec<(libc::__rlimit_resource_t, u64, u64)>,
    steps: Vec<Step>,
    argv: Vec<OsString>,
}

fn parse(mut args: impl Iterator<Item = OsString>) -> Result<Plan, String> {
    let mut plan = Plan::default();
    let mut required = [
        ("--unshare-user", false),
        ("--unshare-pid", false),
        ("--unshare-ipc", false),
        ("--unshare-uts", false),
        ("--cap-drop", false),
    ];
    let value = |args: &mut dyn Iterator<Item = OsString>, option: &str| {
        args.next().ok_or_else(|| format!("{option} needs a value"))
    };
    while let Some(arg) = args.next() {
        let option = arg.to_str().unwrap_or("");
        if let Some((_, seen)) = required.iter_mut().find(|(name, _)| *name == option) {
            *seen = true;
        }
        match option {
            "--" => {
                plan.argv = args.collect();
                if plan.argv.is_empty() {
                    return Err("no command after --".into());
                }
                if let Some((name, _)) = required.iter().find(|(_, seen)| !seen) {
                    return Err(format!("{name} is not optional here"));
                }
                check_absolute(&plan)?;
                return Ok(plan);
            }
            "--die-with-parent" => plan.die_with_parent = true,
            confined::ARG => plan.landlock_only = true,
            "--unshare-user" | "--unshare-pid" | "--unshare-ipc" | "--unshare-uts" => {}
            "--unshare-net" => plan.unshare_net = true,
            "--unshare-cgroup-try" => plan.unshare_cgroup = true,
            "--new-session" => plan.new_session = true,
            "--cap-drop" => {
                if value(&mut args, option)? != "ALL" {
                    return Err("only --cap-drop ALL is understood".into());
                }
            }
            "--chdir" => plan.chdir = Some(value(&mut args, option)?.into()),
            PROXY_CHANNEL_ARG => {
                let given = value(&mut args, option)?;
                let fd = given
                    .to_str()
                    .and_then(|fd| fd.parse().ok())
                    .filter(|fd| *fd > 2)
                    .ok_or_else(|| format!("{PROXY_CHANNEL_ARG}: not a descriptor: {given:?}"))?;
                plan.proxy_channel = Some(fd);
            }
            "--seccomp-file" => plan.seccomp_files.push(value(&mut args, option)?.into()),
            "--cgroup-procs" => plan.cgroup_procs.push(value(&mut args, option)?.into()),
            "--rlimit" => {
                let given = value(&mut args, option)?;
                plan.rlimits.push(
                    parse_rlimit(&given)
                        .ok_or_else(|| format!("--rlimit: not NAME=SOFT:HARD: {given:?}"))?,
                );
            }
            "--bind" | "--ro-bind" | "--dev-bind" => {
                let source = PathBuf::from(value(&mut args, option)?);
                let dest = PathBuf::from(value(&mut args, option)?);
                let kind = match option {
                    "--bind" => BindKind::ReadWrite,
                    "--ro-bind" => BindKind::ReadOnly,
                    _ => BindKind::Devices,
                };
                plan.steps.push(Step::Bind { source, dest, kind });
            }
            "--tmpfs" => plan
                .steps
                .push(Step::Tmpfs(value(&mut args, option)?.into())),
            "--remount-ro" => plan
                .steps
                .push(Step::RemountReadOnly(value(&mut args, option)?.into())),
            "--dev" => plan.steps.push(Step::Dev(value(&mut args, option)?.into())),
            "--proc" => plan
                .steps
                .push(Step::Proc(value(&mut args, option)?.into())),
            "--symlink" => {
                let target = PathBuf::from(value(&mut args, option)?);
                let link = PathBuf::from(value(&mut args, option)?);
                plan.steps.push(Step::Symlink { target, link });
            }
            _ => return Err(format!("unknown option {arg:?}")),
        }
    }
    Err("no command: the options end without --".into())
}

/// `data=1024:2048`: a resource the sandbox limits, its soft and hard limit.
fn parse_rlimit(given: &OsStr) -> Option<(libc::__rlimit_resource_t, u64, u64)> {
    let (name, limits) = given.to_str()?.split_once('=')?;
    let resource = match name {
        "data" => libc::RLIMIT_DATA,
        "cpu" => libc::RLIMIT_CPU,
        "fsize" => libc::RLIMIT_FSIZE,
        "nproc" => libc::RLIMIT_NPROC,
        _ => return None,
    };
    let (soft, hard) = limits.split_once(':')?;
    let (soft, hard) = (soft.parse().ok()?, hard.parse().ok()?);
    (soft <= hard).then_some((resource, soft, hard))
}

/// Whether a sandbox entry ([`crate::bwrap::entry`]) is this wall.
pub(crate) fn is_wall(entry: &[OsString]) -> bool {
    entry.get(1).is_some_and(|arg| arg == WALL_ARG)
}

/// The places of every step, which must be absolute: they are joined under the new and
/// the old root.
fn check_absolute(plan: &Plan) -> Result<(), String> {
    for step in &plan.steps {
        let places: Vec<&Path> = match step {
            Step::Bind { source, dest, .. } => vec![source, dest],
            Step::Tmpfs(p) | Step::RemountReadOnly(p) | Step::Dev(p) | Step::Proc(p) => vec![p],
            Step::Symlink { link, .. } => vec![link],
        };
        if let Some(relative) = places.into_iter().find(|p| !p.is_absolute()) {
            return Err(format!("{}: not an absolute path", relative.display()));
        }
    }
    Ok(())
}

static CHOSEN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether this process enters its sandboxes through the built-in wall (which applies
/// the Landlock scopes itself, see [`crate::scope`]).
pub(crate) fn chosen() -> bool {
    CHOSEN.load(std::sync::atomic::Ordering::Relaxed)
}

pub(crate) fn mark_chosen() {
    CHOSEN.store(true, std::sync::atomic::Ordering::Relaxed);
}

static CONFINED_ONLY: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether the sandboxes of this process are Landlock and seccomp only ([`confined`]):
/// no namespaces, so no network namespace for the proxy either.
pub fn confined_only() -> bool {
    CONFINED_ONLY.load(std::sync::atomic::Ordering::Relaxed)
}

/// The weaker wall was chosen: said once, on stderr, with what it does not do.
pub(crate) fn mark_confined_only() {
    if !CONFINED_ONLY.swap(true, std::sync::atomic::Ordering::Relaxed) {
        mark_chosen();
        eprintln!(
            "hermes-tools: this kernel refuses user namespaces, so commands run confined by Landlock and seccomp \
             only: no network, the host's /proc and /dev visible, host socket files outside the hidden places \
             reachable, background processes outliving their command until the task ends. Allowing unprivileged \
             user namespaces (see docs/security.md) gives the full sandbox."
        );
    }
}

/// The wall's entry in its Landlock-only form.
pub(crate) fn confined_entry(program: std::ffi::OsString) -> Vec<OsString> {
    vec![program, WALL_ARG.into(), confined::ARG.into()]
}

/// Runs the wall when this process was started as one; returns otherwise. Must run
/// before any thread starts: a process with threads cannot enter a new user namespace.
pub(crate) fn serve_if_requested() {
    let mut args = std::env::args_os();
    if args.nth(1).as_deref() != Some(OsStr::new(WALL_ARG)) {
        return;
    }
    std::process::exit(serve_args(args));
}

/// Builds and runs the wall the arguments after [`WALL_ARG`] describe; its exit status.
pub(crate) fn serve_args(args: impl Iterator<Item = OsString>) -> i32 {
    match parse(args) {
        Ok(plan) => run(&plan),
        Err(e) => {
            eprintln!("hermes-tools sandbox: {e}");
            2
        }
    }
}

/// A failed step: what was tried and what the kernel said.
fn failed(what: impl std::fmt::Display) -> String {
    format!("{what}: {}", std::io::Error::last_os_error())
}

fn c_path(path: &Path) -> Result<CString, String> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| format!("{}: a path with a NUL byte", path.display()))
}

/// `path` below `root` (`path` is absolute).
fn under(root: &str, path: &Path) -> PathBuf {
    let mut joined = PathBuf::from(root);
    joined.extend(path.components().skip(1));
    joined
}

fn run(plan: &Plan) -> i32 {
    match run_outside(plan) {
        Ok(code) => code,
        Err(Failure { code, message }) => {
            eprintln!("{message}");
            code
        }
    }
}

/// Why the wall gave up, and the status it ends with.
struct Failure {
    code: i32,
    message: String,
}

impl From<String> for Failure {
    fn from(e: String) -> Failure {
        Failure {
            code: 1,
            message: format!("hermes-tools sandbox: {e}"),
        }
    }
}

/// 125, with the words of the shell that used to set the limits: the command never ran.
fn limit_failure(what: &str, detail: String) -> Failure {
    Failure {
        code: 125,
        message: format!("the command sandbox cannot {what} ({detail})"),
    }
}

/// The process that started the wall: limits, scopes, namespaces, then init's status.
fn run_outside(plan: &Plan) -> Result<i32, Failure> {
    // The limits first, so everything of the sandbox, this process included, is in them.
    for procs in &plan.cgroup_procs {
        join_cgroup(procs)
            .map_err(|e| limit_failure("join its cgroup", format!("{}: {e}", procs.display())))?;
    }
    for &(resource, soft, hard) in &plan.rlimits {
        let limit = libc::rlimit {
            rlim_cur: soft,
            rlim_max: hard,
        };
        // SAFETY: setrlimit on our own process with a valid structure.
        if unsafe { libc::setrlimit(resource, &limit) } != 0 {
            return Err(limit_failure(
                "set its resource limits",
                failed("setrlimit"),
            ));
        }
    }
    // Read before anything changes: the programs live in the server's private directory,
    // which the new root does not show.
    let seccomp = plan
        .seccomp_files
        .iter()
        .map(|file| std::fs::read(file).map_err(|e| format!("cannot read {}: {e}", file.display())))
        .collect::<Result<Vec<_>, _>>()?;
    if plan.landlock_only {
        if plan.proxy_channel.is_some() {
            return Err(format!("{PROXY_CHANNEL_ARG} needs namespaces").into());
        }
        return confined::run(plan, &seccomp).map_err(|(code, why)| Failure {
            code,
            message: format!("hermes-tools sandbox: {why}"),
        });
    }
    if let Some(fd) = plan.proxy_channel {
        // SAFETY: the descriptor was placed here for this process alone; it is closed
        // once the listener is sent, before any child of the sandbox exists.
        let channel = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
        crate::network::set_up_in_this_process(channel)
            .map_err(|e| format!("cannot make the sandbox's network: {e}"))?;
    }
    // The signal and abstract-socket scopes, before anything of the sandbox exists.
    crate::scope::restrict_thread().map_err(|e| e.to_string())?;
    enter_namespaces(plan)?;
    if fork()? == 0 {
        std::process::exit(run_init(plan, &seccomp));
    }
    Ok(wait_for_init())
}

/// Moves this process into the cgroup whose `cgroup.procs` is `procs`. A cgroup v1
/// hierarchy also has a `tasks` file, where writing `0` moves the writing thread alone;
/// this process has one thread (the wall runs before any starts, and `unshare` of a user
/// namespace would fail otherwise), so that moves the whole process, and the kernel
/// skips the lock a process move takes on every thread group of the machine (a write
/// lock that waits for an RCU grace period: 10-20 ms, and every fork on the machine
/// waits behind it, each sandbox start in turn). cgroup v2 has no `tasks` file.
fn join_cgroup(procs: &Path) -> std::io::Result<()> {
    if let Some(tasks) = procs
        .parent()
        .map(|dir| dir.join("tasks"))
        .filter(|tasks| tasks.exists())
    {
        return std::fs::write(tasks, "0");
    }
    std::fs::write(procs, std::process::id().to_string())
}

/// `fork(2)`: the child's 0 or the child's pid. Safe here because the wall's process is
/// single-threaded (it runs before anything else starts).
fn fork() -> Result<libc::pid_t, String> {
    // SAFETY: single-threaded, so the child may run any code after the fork.
    match unsafe { libc::fork() } {
        pid if pid < 0 => Err(failed("fork")),
        pid => Ok(pid),
    }
}

fn enter_namespaces(plan: &Plan) -> Result<(), String> {
    // SAFETY: plain syscalls on our own process.
    unsafe {
        if plan.die_with_parent {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
        }
        let (uid, gid) = (libc::getuid(), libc::getgid());
        let mut flags = libc::CLONE_NEWUSER
            | libc::CLONE_NEWNS
            | libc::CLONE_NEWPID
            | libc::CLONE_NEWIPC
            | libc::CLONE_NEWUTS;
        if plan.unshare_net {
            flags |= libc::CLONE_NEWNET;
        }
        if libc::unshare(flags) != 0 {
            return Err(failed("cannot make the sandbox's namespaces"));
        }
        if plan.unshare_cgroup {
            // "try": a kernel without cgroup namespaces still gets the rest.
            libc::unshare(libc::CLONE_NEWCGROUP);
        }
        write_file(c"/proc/self/setgroups", b"deny")?;
        write_file(c"/proc/self/uid_map", format!("{uid} {uid} 1\n").as_bytes())?;
        write_file(c"/proc/self/gid_map", format!("{gid} {gid} 1\n").as_bytes())?;
    }
    if plan.unshare_net {
        crate::network::loopback_up()
            .map_err(|e| format!("cannot bring up the sandbox's loopback: {e}"))?;
    }
    Ok(())
}

fn write_file(path: &CStr, content: &[u8]) -> Result<(), String> {
    // SAFETY: a NUL-terminated path and a buffer that outlives the calls.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(failed(format!("cannot open {path:?}")));
        }
        let written = libc::write(fd, content.as_ptr().cast(), content.len());
        libc::close(fd);
        if written != content.len() as isize {
            return Err(failed(format!("cannot write {path:?}")));
        }
    }
    Ok(())
}

/// The status this process ends with when its child `pid` ended with `raw`.
fn exit_code(raw: libc::c_int) -> i32 {
    if libc::WIFEXITED(raw) {
        libc::WEXITSTATUS(raw)
    } else if libc::WIFSIGNALED(raw) {
        128 + libc::WTERMSIG(raw)
    } else {
        1
    }
}

/// The outer process's only child is init.
fn wait_for_init() -> i32 {
    loop {
        let mut raw = 0;
        // SAFETY: waitpid on our own child.
        let got = unsafe { libc::waitpid(-1, &mut raw, 0) };
        if got > 0 {
            return exit_code(raw);
        }
        if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return 1;
        }
    }
}

/// PID 1 of the new namespace: builds the root, starts the command, reaps.
fn run_init(plan: &Plan, seccomp: &[Vec<u8>]) -> i32 {
    if plan.die_with_parent {
        // SAFETY: prctl on our own process.
        unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) };
    }
    let own_network = plan.unshare_net || plan.proxy_channel.is_some();
    let guard = if unix_guard::wanted(own_network) {
        unix_guard::block_child_signals();
        match unix_guard::Handoff::new() {
            Ok(handoff) => Some(handoff),
            Err(e) => {
                eprintln!("hermes-tools sandbox: {e}");
                return 1;
            }
        }
    } else {
        None
    };
    let command = match build_root(plan).and_then(|()| fork()) {
        Ok(command) => command,
        Err(e) => {
            eprintln!("hermes-tools sandbox: {e}");
            return 1;
        }
    };
    if command == 0 {
        let channel = guard.map(|handoff| {
            drop(handoff.init_end);
            handoff.command_end
        });
        let (code, e) = exec_command(plan, seccomp, channel);
        eprintln!("hermes-tools sandbox: {e}");
        // SAFETY: ending the child without running the parent's exit handlers twice.
        unsafe { libc::_exit(code) };
    }
    if let Some(handoff) = guard {
        drop(handoff.command_end);
        match unix_guard::take(handoff.init_end, command)
            .and_then(|listener| unix_guard::keep_only_ptrace().map(|()| listener))
        {
            Ok(listener) => return unix_guard::serve(listener, command),
            // The command's process gave up too; its status is reaped below.
            Err(e) => eprintln!("hermes-tools sandbox: {e}"),
        }
    }
    // Init reaps whatever the command leaves behind, until the command itself ends;
    // then everything else in the namespace ends with init.
    loop {
        let mut raw = 0;
        // SAFETY: waitpid on our own children.
        let got = unsafe { libc::waitpid(-1, &mut raw, 0) };
        if got == command {
            return exit_code(raw);
        }
        if got < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ECHILD) {
            return 1;
        }
    }
}

fn build_root(plan: &Plan) -> Result<(), String> {
    let base = Path::new(BASE);
    mount(
        None,
        Path::new("/"),
        None,
        libc::MS_SLAVE | libc::MS_REC,
        None,
    )
    .map_err(|e| format!("cannot make / private to the sandbox: {e}"))?;
    mount(
        Some(Path::new("tmpfs")),
        base,
        Some(c"tmpfs"),
        libc::MS_NOSUID | libc::MS_NODEV,
        Some(c"mode=0755"),
    )
    .map_err(|e| format!("cannot mount the sandbox's base tmpfs: {e}"))?;
    let new_root = under(BASE, Path::new(NEW_ROOT));
    for dir in [&new_root, &under(BASE, Path::new(OLD_ROOT))] {
        std::fs::create_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    mount(
        Some(&new_root),
        &new_root,
        None,
        libc::MS_BIND | libc::MS_REC,
        None,
    )
    .map_err(|e| format!("cannot bind the new root: {e}"))?;
    pivot_root(base, &under(BASE, Path::new(OLD_ROOT)))?;
    std::env::set_current_dir("/").map_err(|e| format!("chdir /: {e}"))?;

    for step in &plan.steps {
        apply(step)?;
    }

    // SAFETY: NUL-terminated paths.
    unsafe {
        if libc::umount2(c"/oldroot".as_ptr(), libc::MNT_DETACH) != 0 {
            return Err(failed("cannot detach the old root"));
        }
    }
    // The new root goes over the base and becomes this process's root by `chroot`, not
    // by a second `pivot_root`: that call visits every thread of the machine (to move
    // those whose root or directory is the old one), so a start would cost more the
    // more sandboxes are alive. With the old root detached above, what stays beneath
    // is the base alone, two empty directories, and nothing in the sandbox may
    // `chroot`, `mount` or `unshare` to reach it (no capability, seccomp).
    std::env::set_current_dir(NEW_ROOT).map_err(|e| format!("chdir {NEW_ROOT}: {e}"))?;
    mount(
        Some(Path::new(".")),
        Path::new("/"),
        None,
        libc::MS_MOVE,
        None,
    )
    .map_err(|e| format!("cannot move the new root over the base: {e}"))?;
    // SAFETY: NUL-terminated path.
    if unsafe { libc::chroot(c".".as_ptr()) } != 0 {
        return Err(failed("cannot enter the new root"));
    }
    std::env::set_current_dir("/").map_err(|e| format!("chdir /: {e}"))?;
    if let Some(dir) = &plan.chdir {
        std::env::set_current_dir(dir).map_err(|e| format!("chdir {}: {e}", dir.display()))?;
    }
    Ok(())
}

fn apply(step: &Step) -> Result<(), String> {
    match step {
        Step::Bind { source, dest, kind } => {
            let from = under(OLD_ROOT, source);
            let to = under(NEW_ROOT, dest);
            let is_dir = std::fs::metadata(&from)
                .map_err(|e| format!("cannot bind {}: {e}", source.display()))?
                .is_dir();
            make_mount_point(&to, is_dir)?;
            mount(Some(&from), &to, None, libc::MS_BIND | libc::MS_REC, None).map_err(|e| {
                format!(
                    "cannot bind {} on {}: {e}",
                    source.display(),
                    dest.display()
                )
            })?;
            let mut attrs = MOUNT_ATTR_NOSUID;
            match kind {
                BindKind::ReadOnly => attrs |= MOUNT_ATTR_RDONLY | MOUNT_ATTR_NODEV,
                BindKind::ReadWrite => attrs |= MOUNT_ATTR_NODEV,
                BindKind::Devices => {}
            }
            restrict(&to, attrs, Depth::Recursive)
        }
        Step::Tmpfs(dest) => fresh(
            c"tmpfs",
            dest,
            libc::MS_NOSUID | libc::MS_NODEV,
            Some(c"mode=0755"),
        )
        .map(drop),
        // Only the mount at the place, as bubblewrap's option: what was bound beneath it
        // since (a task's own state directory under a covered place) stays as it is.
        Step::RemountReadOnly(dest) => {
            restrict(&under(NEW_ROOT, dest), MOUNT_ATTR_RDONLY, Depth::One)
        }
        Step::Proc(dest) => fresh(
            c"proc",
            dest,
            libc::MS_NOSUID | libc::MS_NOEXEC | libc::MS_NODEV,
            None,
        )
        .map(drop),
        Step::Dev(dest) => make_dev(dest),
        Step::Symlink { target, link } => {
            let at = under(NEW_ROOT, link);
            match std::os::unix::fs::symlink(target, &at) {
                Ok(()) => Ok(()),
                Err(_) if std::fs::read_link(&at).is_ok_and(|t| t == *target) => Ok(()),
                Err(e) => Err(format!("cannot make the link {}: {e}", link.display())),
            }
        }
    }
}

/// A minimal `/dev`: the harmless device nodes of the host, a private devpts, and the
/// usual links.
fn make_dev(dest: &Path) -> Result<(), String> {
    let to = fresh(
        c"tmpfs",
        dest,
        libc::MS_NOSUID | libc::MS_NOEXEC,
        Some(c"mode=0755"),
    )?;
    for node in ["null", "zero", "full", "random", "urandom", "tty"] {
        let host = Path::new("/oldroot/dev").join(node);
        if !host.exists() {
            continue;
        }
        let inside = to.join(node);
        make_mount_point(&inside, false)?;
        mount(Some(&host), &inside, None, libc::MS_BIND, None)
            .map_err(|e| format!("cannot bind /dev/{node}: {e}"))?;
        restrict(&inside, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, Depth::One)?;
    }
    for (link, target) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
        ("core", "/proc/kcore"),
        ("ptmx", "pts/ptmx"),
    ] {
        std::os::unix::fs::symlink(target, to.join(link))
            .map_err(|e| format!("cannot make /dev/{link}: {e}"))?;
    }
    std::fs::create_dir(to.join("shm")).map_err(|e| format!("cannot make /dev/shm: {e}"))?;
    let pts = to.join("pts");
    std::fs::create_dir(&pts).map_err(|e| format!("cannot make /dev/pts: {e}"))?;
    mount(
        Some(Path::new("devpts")),
        &pts,
        Some(c"devpts"),
        libc::MS_NOSUID | libc::MS_NOEXEC,
        Some(c"newinstance,ptmxmode=0666,mode=620"),
    )
    .map_err(|e| format!("cannot mount a devpts on /dev/pts: {e}"))
}

/// A new file system of `kind` (tmpfs, proc) mounted at `dest` of the new root; where.
fn fresh(
    kind: &CStr,
    dest: &Path,
    flags: libc::c_ulong,
    data: Option<&CStr>,
) -> Result<PathBuf, String> {
    let to = under(NEW_ROOT, dest);
    make_mount_point(&to, true)?;
    let source = Path::new(OsStr::from_bytes(kind.to_bytes()));
    mount(Some(source), &to, Some(kind), flags, data)
        .map_err(|e| format!("cannot mount a {kind:?} on {}: {e}", dest.display()))?;
    Ok(to)
}

/// Makes `path` exist as a directory or a file to mount on, with its parents.
fn make_mount_point(path: &Path, dir: bool) -> Result<(), String> {
    if std::fs::symlink_metadata(path).is_ok() {
        return Ok(());
    }
    let made = if dir {
        std::fs::create_dir_all(path)
    } else {
        path.parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| {
                std::fs::OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(false)
                    .open(path)
                    .map(drop)
            })
    };
    made.map_err(|e| format!("cannot make the mount point {}: {e}", path.display()))
}

fn mount(
    source: Option<&Path>,
    target: &Path,
    fstype: Option<&CStr>,
    flags: libc::c_ulong,
    data: Option<&CStr>,
) -> Result<(), std::io::Error> {
    let source = source
        .map(c_path)
        .transpose()
        .map_err(std::io::Error::other)?;
    let target = c_path(target).map_err(std::io::Error::other)?;
    // SAFETY: NUL-terminated strings or null pointers, alive across the call.
    let done = unsafe {
        libc::mount(
            source.as_ref().map_or(std::ptr::null(), |s| s.as_ptr()),
            target.as_ptr(),
            fstype.map_or(std::ptr::null(), CStr::as_ptr),
            flags,
            data.map_or(std::ptr::null(), |d| d.as_ptr().cast()),
        )
    };
    if done == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

fn pivot_root(new_root: &Path, put_old: &Path) -> Result<(), String> {
    let (new, old) = (c_path(new_root)?, c_path(put_old)?);
    // SAFETY: NUL-terminated paths.
    if unsafe { libc::syscall(libc::SYS_pivot_root, new.as_ptr(), old.as_ptr()) } != 0 {
        return Err(failed(format!("pivot_root to {}", new_root.display())));
    }
    Ok(())
}

const MOUNT_ATTR_RDONLY: u64 = 0x1;
const MOUNT_ATTR_NOSUID: u64 = 0x2;
const MOUNT_ATTR_NODEV: u64 = 0x4;
const MOUNT_ATTR_NOEXEC: u64 = 0x8;
const AT_RECURSIVE: libc::c_uint = 0x8000;

/// `struct mount_attr` of `mount_setattr(2)`.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Depth {
    One,
    Recursive,
}

/// Adds `attrs` to the mount at `path` (and, `Recursive`, every mount beneath it).
fn restrict(path: &Path, attrs: u64, depth: Depth) -> Result<(), String> {
    let target = c_path(path)?;
    let attr = MountAttr {
        attr_set: attrs,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: a NUL-terminated path and a mount_attr of the size passed.
    let done = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            target.as_ptr(),
            if depth == Depth::Recursive {
                AT_RECURSIVE
            } else {
                0
            } | libc::AT_SYMLINK_NOFOLLOW as libc::c_uint,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if done != 0 {
        let shown = path
            .strip_prefix(NEW_ROOT)
            .map_or(path.to_path_buf(), |p| Path::new("/").join(p));
        return Err(failed(format!(
            "cannot restrict the mounts at {}",
            shown.display()
        )));
    }
    Ok(())
}

/// In the command's process: session, capabilities, seccomp, then the command. Returns
/// only with the status to end with (127: the command cannot be executed) and why.
fn exec_command(
    plan: &Plan,
    seccomp: &[Vec<u8>],
    unix_guard: Option<std::os::fd::OwnedFd>,
) -> (i32, String) {
    let argv: Vec<CString> = match plan
        .argv
        .iter()
        .map(|a| CString::new(a.clone().into_vec()))
        .collect::<Result<_, _>>()
    {
        Ok(argv) => argv,
        Err(_) => return (1, "an argument holds a NUL byte".into()),
    };
    // SAFETY: plain syscalls on our own process; the pointers outlive the calls.
    unsafe {
        if plan.die_with_parent {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
        }
        if plan.new_session && libc::setsid() < 0 {
            return (1, failed("setsid"));
        }
        // What this program's runtime changed, set back for the command: SIGPIPE is
        // ignored by Rust's start-up and would be inherited across exec.
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        if let Err(e) = drop_capabilities() {
            return (1, e);
        }
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return (1, failed("no_new_privs"));
        }
        if let Err(e) = crate::scope::refuse_outside_sockets() {
            return (1, e.to_string());
        }
        // Before the programs, which refuse new seccomp listeners.
        if let Some(channel) = unix_guard {
            if let Err(e) = unix_guard::install(channel) {
                return (1, e);
            }
        }
        for program in seccomp {
            if let Err(e) = load_seccomp(program) {
                return (1, e);
            }
        }
        if crate::launcher::is_own_launcher(&plan.argv) {
            // Under every wall an exec would have found: the launcher of the image
            // this process already runs, without a second exec and start of it.
            libc::_exit(crate::launcher::serve_in_this_process());
        }
        let mut pointers: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
        pointers.push(std::ptr::null());
        libc::execvp(pointers[0], pointers.as_ptr());
    }
    (127, failed(format!("cannot execute {:?}", plan.argv[0])))
}

/// Empties the bounding, ambient, effective, permitted and inheritable sets: even root
/// inside gains nothing on exec.
fn drop_capabilities() -> Result<(), String> {
    // SAFETY: prctl on our own process.
    unsafe {
        for cap in 0..64 {
            if libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) != 0
                && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL)
            {
                break; // past the last capability this kernel knows
            }
        }
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        );
    }
    keep_capabilities(0).map_err(|e| format!("cannot drop capabilities: {e}"))
}

/// Sets this process's effective and permitted capabilities to `kept` (a mask of the
/// first 32), inheritable to none.
fn keep_capabilities(kept: u32) -> Result<(), String> {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: libc::c_int,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const VERSION_3: u32 = 0x2008_0522;
    let mut header = Header {
        version: VERSION_3,
        pid: 0,
    };
    let none = Data {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    };
    let data = [
        Data {
            effective: kept,
            permitted: kept,
            inheritable: 0,
        },
        none,
    ];
    // SAFETY: capset on our own process with structures of the kernel's layout.
    if unsafe { libc::syscall(libc::SYS_capset, &mut header as *mut Header, data.as_ptr()) } != 0 {
        return Err(std::io::Error::last_os_error().to_string());
    }
    Ok(())
}

/// Loads a classic BPF program (an array of `sock_filter`, as seccompiler writes it).
fn load_seccomp(program: &[u8]) -> Result<(), String> {
    let size = std::mem::size_of::<libc::sock_filter>();
    if program.is_empty() || !program.len().is_multiple_of(size) || program.len() / size > 4096 {
        return Err("a seccomp program file holds no program".into());
    }
    let filters: Vec<libc::sock_filter> = program
        .chunks_exact(size)
        .map(|raw| libc::sock_filter {
            code: u16::from_ne_bytes([raw[0], raw[1]]),
            jt: raw[2],
            jf: raw[3],
            k: u32::from_ne_bytes([raw[4], raw[5], raw[6], raw[7]]),
        })
        .collect();
    let prog = libc::sock_fprog {
        len: filters.len() as u16,
        filter: filters.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: a program the kernel checks before taking it; `filters` outlives the call.
    if unsafe {
        libc::prctl(
            libc::PR_SET_SECCOMP,
            libc::SECCOMP_MODE_FILTER,
            &prog as *const libc::sock_fprog,
            0,
            0,
        )
    } != 0
    {
        return Err(failed("cannot load a seccomp program"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> impl Iterator<Item = OsString> {
        list.iter()
            .map(OsString::from)
            .collect::<Vec<_>>()
            .into_iter()
    }

    const NAMESPACES: [&str; 6] = [
        "--unshare-user",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--cap-drop",
        "ALL",
    ];

    #[test]
    fn reads_the_options_the_layout_writes_in_order() {
        let mut line: Vec<&str> = NAMESPACES.to_vec();
        line.extend([
            "--ro-bind",
            "/",
            "/",
            "--tmpfs",
            "/run",
            "--bind",
            "/w",
            "/w",
            "--remount-ro",
            "/run",
            "--seccomp-file",
            "/s.bpf",
            "--rlimit",
            "cpu=10:15",
            "--chdir",
            "/w",
            "--",
            "sh",
            "-c",
            "true",
        ]);
        let plan = parse(args(&line)).unwrap();
        assert_eq!(
            plan.steps,
            vec![
                Step::Bind {
                    source: "/".into(),
                    dest: "/".into(),
                    kind: BindKind::ReadOnly
                },
                Step::Tmpfs("/run".into()),
                Step::Bind {
                    source: "/w".into(),
                    dest: "/w".into(),
                    kind: BindKind::ReadWrite
                },
                Step::RemountReadOnly("/run".into()),
            ]
        );
        assert_eq!(plan.seccomp_files, vec![PathBuf::from("/s.bpf")]);
        assert_eq!(plan.rlimits, vec![(libc::RLIMIT_CPU, 10, 15)]);
        assert_eq!(plan.chdir, Some(PathBuf::from("/w")));
        assert_eq!(plan.argv, vec!["sh", "-c", "true"]);
    }

    #[test]
    fn refuses_what_it_does_not_understand() {
        let mut unknown: Vec<&str> = NAMESPACES.to_vec();
        unknown.extend(["--share-net", "--", "true"]);
        assert!(parse(args(&unknown)).unwrap_err().contains("--share-net"));
        let mut partial: Vec<&str> = NAMESPACES.to_vec();
        partial.extend(["--cap-drop", "CAP_SYS_ADMIN", "--", "true"]);
        assert!(parse(args(&partial)).is_err());
        assert!(parse(args(&NAMESPACES)).unwrap_err().contains("without --"));
        // Every namespace is asked for explicitly: a layout that forgot one is a bug,
        // never a weaker sandbox.
        assert!(parse(args(&["--unshare-user", "--", "true"]))
            .unwrap_err()
            .contains("not optional"));
        for bad in ["nofile=1:1", "cpu=10:5", "cpu=10", "data=x:y"] {
            let mut line: Vec<&str> = NAMESPACES.to_vec();
            line.extend(["--rlimit", bad, "--", "true"]);
            assert!(parse(args(&line)).is_err(), "{bad}");
        }
        let mut relative: Vec<&str> = NAMESPACES.to_vec();
        relative.extend(["--tmpfs", "run", "--", "true"]);
        assert!(parse(args(&relative)).unwrap_err().contains("absolute"));
        // The proxy's channel is a descriptor above the standard ones, nothing else.
        for bad in ["x", "2", "-1", ""] {
            let mut line: Vec<&str> = NAMESPACES.to_vec();
            line.extend([PROXY_CHANNEL_ARG, bad, "--", "true"]);
            assert!(parse(args(&line)).is_err(), "{bad}");
        }
    }

    #[test]
    fn reads_the_proxy_channel() {
        let mut line: Vec<&str> = NAMESPACES.to_vec();
        line.extend([PROXY_CHANNEL_ARG, "7", "--", "true"]);
        assert_eq!(parse(args(&line)).unwrap().proxy_channel, Some(7));
        let mut without: Vec<&str> = NAMESPACES.to_vec();
        without.extend(["--", "true"]);
        assert_eq!(parse(args(&without)).unwrap().proxy_channel, None);
    }
}
