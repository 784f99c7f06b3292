//! How a sandbox is entered (the program's own wall, or bubblewrap), checked once
//! per process, and the bubblewrap-style arguments for a [`Policy`], which both read.

use crate::policy::{Mode, Policy, WrapOptions};
use crate::real_paths::RealPaths;
use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

/// The command line that enters a sandbox, up to its options: this program's own wall
/// ([`crate::wall`]) when a program is set ([`crate::launcher::set_program`]) and the
/// kernel lets it build one, else a system bubblewrap. `$TERMINAL_SANDBOX_BWRAP` names
/// a bubblewrap to use instead (exactly that file). Each is tried once per process; the
/// error says why none can start here.
pub(crate) fn entry() -> Result<Vec<OsString>, String> {
    if let Some(chosen) = std::env::var_os("TERMINAL_SANDBOX_BWRAP").filter(|v| !v.is_empty()) {
        let chosen = PathBuf::from(chosen);
        if !chosen.is_file() {
            return Err("bubblewrap (bwrap) was not found".into());
        }
        let entry = vec![chosen.into_os_string()];
        return probe(&entry).map(|()| entry);
    }
    let mut why = Vec::new();
    if let Some(program) = crate::launcher::program_path() {
        let entry = vec![program.into_os_string(), crate::wall::WALL_ARG.into()];
        match probe(&entry) {
            Ok(()) => {
                crate::wall::mark_chosen();
                return Ok(entry);
            }
            Err(e) => why.push(e),
        }
    }
    match find_bwrap() {
        Some(bwrap) => {
            let entry = vec![bwrap.into_os_string()];
            match probe(&entry) {
                Ok(()) => return Ok(entry),
                Err(e) => why.push(e),
            }
        }
        None => why.push("bubblewrap (bwrap) was not found".into()),
    }
    // Where namespaces are refused, the weaker wall of Landlock and seccomp alone.
    if let Some(program) = crate::launcher::program_path() {
        let entry = crate::wall::confined_entry(program.into_os_string());
        match probe(&entry) {
            Ok(()) => {
                crate::wall::mark_confined_only();
                return Ok(entry);
            }
            Err(e) => why.push(e),
        }
    }
    Err(why.join("; "))
}

/// A system bubblewrap: `bwrap` on PATH, else in the usual system directories.
pub fn find_bwrap() -> Option<PathBuf> {
    which::which("bwrap").ok().or_else(|| {
        ["/usr/bin/bwrap", "/bin/bwrap", "/usr/local/bin/bwrap"]
            .map(PathBuf::from)
            .into_iter()
            .find(|p| p.is_file())
    })
}

/// Runs `true` once under every namespace the sandbox uses; the answer is kept for the
/// life of the process. `Err` carries what the entry said.
fn probe(entry: &[OsString]) -> Result<(), String> {
    type Answers = HashMap<Vec<OsString>, Result<(), String>>;
    static RESULTS: OnceLock<Mutex<Answers>> = OnceLock::new();
    let mut results = RESULTS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    results
        .entry(entry.to_vec())
        .or_insert_with(|| run_probe(entry))
        .clone()
}

fn run_probe(entry: &[OsString]) -> Result<(), String> {
    let policy = Policy {
        mode: Mode::ReadOnly,
        writable_roots: Vec::new(),
        state_dirs: Vec::new(),
        hidden: Vec::new(),
        protected: Default::default(),
        network: crate::Network::Off,
        empty_file: None,
        seccomp_programs: Vec::new(),
        limits: crate::Limits::NONE,
    };
    let name = if entry.len() > 1 {
        "the built-in sandbox".to_string()
    } else {
        Path::new(&entry[0]).display().to_string()
    };
    let output = std::process::Command::new(&entry[0])
        .args(&entry[1..])
        .args(arguments(
            &policy,
            Path::new("/"),
            WrapOptions {
                new_session: true,
                tty: None,
                proxied: false,
            },
        ))
        .args(["--", "true"])
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("{name} could not be started: {e}"))?;
    if output.status.success() {
        return Ok(());
    }
    let said = String::from_utf8_lossy(&output.stderr).trim().to_string();
    Err(format!(
        "{name} failed to set up its namespaces ({}){}",
        output.status,
        if said.is_empty() {
            String::new()
        } else {
            format!(": {said}")
        }
    ))
}

fn push(args: &mut Vec<OsString>, items: &[&str]) {
    args.extend(items.iter().map(OsString::from));
}

fn push_mount(args: &mut Vec<OsString>, flag: &str, source: &Path, dest: &Path) {
    args.push(flag.into());
    args.push(source.as_os_str().to_owned());
    args.push(dest.as_os_str().to_owned());
}

/// The bubblewrap options (everything before `--`).
pub(crate) fn arguments(policy: &Policy, cwd: &Path, options: WrapOptions<'_>) -> Vec<OsString> {
    layout(policy, cwd, options).args
}

/// The options, and what their mounts stand on.
pub(crate) fn layout(policy: &Policy, cwd: &Path, options: WrapOptions<'_>) -> Layout {
    let mut layout = fixed_layout(policy, options, &mut RealPaths::default());
    finish_layout(policy, cwd, &mut layout);
    layout
}

/// A sandbox's options, and what each bind mount stands on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Layout {
    pub(crate) args: Vec<OsString>,
    /// What every place bound is, in order. A mount stands on the inode, and a host
    /// process that replaces the place (an editor saving by rename, `rm -rf` and a new
    /// directory, a service making its socket again) lifts it from a running sandbox
    /// while the options stay the same.
    identities: Vec<Identity>,
}

/// A file's device and inode, and its birth time (or, where the filesystem keeps none,
/// its change time): a new file often gets the inode number just freed.
type Identity = (u64, u64, i128);

fn identity(path: &Path) -> Identity {
    std::fs::symlink_metadata(path)
        .map(|meta| identity_of(&meta))
        .unwrap_or_default()
}

fn identity_of(meta: &std::fs::Metadata) -> Identity {
    use std::os::unix::fs::MetadataExt;
    let born = match meta
        .created()
        .map(|t| t.duration_since(std::time::UNIX_EPOCH))
    {
        Ok(Ok(since)) => since.as_nanos() as i128,
        _ => -(meta.ctime() as i128 * 1_000_000_000 + meta.ctime_nsec() as i128),
    };
    (meta.dev(), meta.ino(), born)
}

impl Layout {
    fn bind(&mut self, flag: &str, source: &Path, dest: &Path) {
        self.bind_known(flag, source, dest, identity(dest));
    }

    fn bind_known(&mut self, flag: &str, source: &Path, dest: &Path, identity: Identity) {
        push_mount(&mut self.args, flag, source, dest);
        self.identities.push(identity);
    }
}

/// The layout but the host's socket files and the working directory: what depends only
/// on the places `real_paths` looks up (and on `/proc`, which does not change).
pub(crate) fn fixed_layout(
    policy: &Policy,
    options: WrapOptions<'_>,
    real_paths: &mut RealPaths,
) -> Layout {
    let mut layout = Layout::default();
    push(
        &mut layout.args,
        &[
            "--die-with-parent",
            "--unshare-user",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
        ],
    );
    push(
        &mut layout.args,
        &["--unshare-cgroup-try", "--cap-drop", "ALL"],
    );
    if policy.network == crate::Network::Off || !options.proxied {
        push(&mut layout.args, &["--unshare-net"]);
    }
    if options.new_session {
        push(&mut layout.args, &["--new-session"]);
    }
    push(
        &mut layout.args,
        &["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"],
    );
    private_run(&mut layout, real_paths);
    if let Some(tty) = options.tty {
        // The command's own terminal under its own name, and no other: the fresh devpts
        // is covered, so the host's other terminals stay out of reach (inside, no new
        // pseudo-terminal can be opened).
        push(&mut layout.args, &["--tmpfs", "/dev/pts"]);
        push_mount(&mut layout.args, "--dev-bind", tty, tty);
    }
    // Kernel settings are guarded by file ownership alone: root inside must not reach them.
    for knob in [
        "/proc/sys",
        "/proc/sysrq-trigger",
        "/proc/irq",
        "/proc/bus",
        "/proc/fs",
    ] {
        if Path::new(knob).exists() {
            push_mount(
                &mut layout.args,
                "--ro-bind",
                Path::new(knob),
                Path::new(knob),
            );
        }
    }
    let mut writable = policy.resolved_writable(real_paths);
    for root in &writable {
        layout.bind("--bind", root, root);
    }
    // The sandbox's own files: covered after the writable roots (one of them may hold
    // them), then only the task's own state directory is bound back, writable.
    let hidden: Vec<PathBuf> = policy
        .hidden
        .iter()
        .filter_map(|place| real_paths.existing(place))
        .collect();
    for place in &hidden {
        layout.args.push("--tmpfs".into());
        layout.args.push(place.as_os_str().to_owned());
    }
    if policy.is_active() {
        for dir in &policy.state_dirs {
            if let Some(real) = real_paths.existing(dir) {
                layout.bind("--bind", &real, &real);
                writable.push(real);
            }
        }
    }
    for place in &hidden {
        layout.args.push("--remount-ro".into());
        layout.args.push(place.as_os_str().to_owned());
    }
    let mut held: Vec<PathBuf> = Vec::new();
    // Trees first, so a file inside a protected tree needs no mount of its own.
    let kept = || policy.protected.iter().filter(|p| !p.hidden);
    let trees = kept().filter(|p| p.tree);
    for place in trees.chain(kept().filter(|p| !p.tree)) {
        let Some((real, exists)) = real_paths.as_far_as_it_exists(&place.path) else {
            continue;
        };
        if !writable.iter().any(|root| real.starts_with(root))
            || held.iter().any(|tree| real.starts_with(tree))
        {
            continue; // already read-only
        }
        if place.tree {
            held.push(real.clone());
        }
        if exists {
            layout.bind("--ro-bind", &real, &real);
        } else if !place.tree {
            if let Some(empty) = &policy.empty_file {
                push_mount(&mut layout.args, "--ro-bind", empty, &real);
            }
        } else {
            layout.args.push("--tmpfs".into());
            layout.args.push(real.as_os_str().to_owned());
            layout.args.push("--remount-ro".into());
            layout.args.push(real.as_os_str().to_owned());
        }
    }
    // Secrets last, on top of everything: no read-only bind above shows them again.
    let mut hidden_trees: Vec<PathBuf> = Vec::new();
    let hidden = || policy.protected.iter().filter(|p| p.hidden);
    for place in hidden()
        .filter(|p| p.tree)
        .chain(hidden().filter(|p| !p.tree))
    {
        let Some((real, true)) = real_paths.as_far_as_it_exists(&place.path) else {
            continue; // nothing there to hide
        };
        if hidden_trees.iter().any(|tree| real.starts_with(tree)) {
            continue;
        }
        if real.is_dir() {
            hidden_trees.push(real.clone());
            layout.args.push("--tmpfs".into());
            layout.args.push(real.as_os_str().to_owned());
            layout.args.push("--remount-ro".into());
            layout.args.push(real.as_os_str().to_owned());
        } else if let Some(empty) = &policy.empty_file {
            layout.bind("--ro-bind", empty, &real);
        }
    }
    layout
}

/// A fresh `/run` for the sandbox: host services make their sockets there (container
/// engines, D-Bus, systemd, `/run/user/<uid>`), also after a command started, when no
/// cover laid at its start holds them. Only the resolver file `/etc/resolv.conf` leads
/// to there comes back, read-only; `/var/run` is a link to `/run` on current systems.
fn private_run(layout: &mut Layout, real_paths: &mut RealPaths) {
    let run = Path::new("/run");
    if !run.is_dir() || std::fs::symlink_metadata(run).is_ok_and(|m| m.is_symlink()) {
        return;
    }
    push(&mut layout.args, &["--tmpfs", "/run"]);
    if let Some(resolver) = real_paths.existing(Path::new("/etc/resolv.conf")) {
        if resolver.starts_with(run) {
            layout.bind("--ro-bind", &resolver, &resolver);
        }
    }
    if std::fs::read_link("/run/shm").is_ok_and(|target| target == Path::new("/dev/shm")) {
        push(&mut layout.args, &["--symlink", "/dev/shm", "/run/shm"]);
    }
}

/// Adds to [`fixed_layout`] what is looked at afresh every time: the socket files (at
/// most [`SOCKETS_LOOKED_AT_WITHIN`] old), and the working directory.
pub(crate) fn finish_layout(policy: &Policy, cwd: &Path, layout: &mut Layout) {
    // Host services listening on socket files (container engines, systemd, D-Bus) would
    // take orders from root inside as from root outside: their sockets are covered.
    if let Some(empty) = &policy.empty_file {
        for (socket, identity) in listening_socket_files().iter() {
            layout.bind_known("--ro-bind", empty, socket, *identity);
        }
    }
    layout.args.push("--chdir".into());
    layout.args.push(cwd.as_os_str().to_owned());
}

/// The socket files bound in this network namespace ([`crate::host_sockets`]) that
/// exist as sockets now, with what each is.
///
/// Asked of the kernel at most once per [`SOCKETS_LOOKED_AT_WITHIN`] for the whole
/// process: every command of a kept sandbox compares its layout with a fresh one, and the
/// dump walks every unix socket of the namespace (the server's own included, a few for
/// each live sandbox), a good share of a call's time in the server. A socket file made
/// after the look is one made after the command's start, which no cover laid at a start
/// can hold anyway: the sandbox's own rule refuses those (`wall::unix_guard`, or
/// Landlock's where the kernel has it).
fn listening_socket_files() -> Arc<[(PathBuf, Identity)]> {
    type Looked = Option<(std::time::Instant, Arc<[(PathBuf, Identity)]>)>;
    static LAST: Mutex<Looked> = Mutex::new(None);
    let mut last = LAST.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((at, files)) = last.as_ref() {
        if at.elapsed() < SOCKETS_LOOKED_AT_WITHIN {
            return Arc::clone(files);
        }
    }
    let files = socket_files_now();
    *last = Some((std::time::Instant::now(), Arc::clone(&files)));
    files
}

/// How old a look at the host's socket files may be for a layout.
const SOCKETS_LOOKED_AT_WITHIN: std::time::Duration = std::time::Duration::from_millis(20);

fn socket_files_now() -> Arc<[(PathBuf, Identity)]> {
    use std::os::unix::fs::FileTypeExt;
    crate::host_sockets::socket_paths()
        .into_iter()
        .filter_map(|path| {
            let meta = std::fs::symlink_metadata(&path).ok()?;
            meta.file_type()
                .is_socket()
                .then(|| (path, identity_of(&meta)))
        })
        .collect()
}
