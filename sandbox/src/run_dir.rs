//! The server's private directory for the sandbox's own files: the seccomp programs,
//! the empty file bound over missing protected files, each task's shell snapshots and
//! the fork server's FIFOs.
//!
//! It lives under a base directory per user (`$XDG_RUNTIME_DIR/hermes-tools` when the
//! session has a private runtime directory, else `/dev/shm/hermes-tools-<uid>`, else
//! `<temp dir>/hermes-tools-<uid>`), as `srv-<pid>-<random>`, mode 0700. Permissions
//! alone cannot keep a sandboxed command out (it runs as the same user), so every
//! sandbox covers the base with an empty read-only tmpfs ([`hidden_places`]) and binds
//! back only the one task directory its own shell writes its snapshot to. `/dev/shm`
//! is out of every sandbox's reach anyway: each gets a fresh `/dev`.
//!
//! The directory is removed when the server ends: at exit (`atexit`), and on SIGINT,
//! SIGTERM and SIGHUP through [`remove_on_signals`]. Directories of servers that died
//! without either (SIGKILL) are removed by the next server that starts.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The server's directory, created on first use; an error says where and why not.
pub fn server_dir() -> Result<&'static Path, String> {
    static DIR: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    DIR.get_or_init(create_server_dir)
        .as_deref()
        .map_err(Clone::clone)
}

/// A fresh private directory `<prefix>-<random>` inside the server's directory.
pub fn private_dir(prefix: &str) -> Result<PathBuf, String> {
    let dir = server_dir()?.join(format!("{prefix}-{}", random_hex(12)));
    make_private(&dir)?;
    Ok(dir)
}

/// What every sandbox covers with an empty tmpfs: the base of this server's directory
/// (holding every server's of this user), and `$XDG_RUNTIME_DIR/hermes-tools` too
/// when the base is elsewhere. Places under `/dev` are left out: a sandbox's `/dev`
/// is fresh and shows none of them.
pub fn hidden_places() -> Vec<PathBuf> {
    let mut places: Vec<PathBuf> = Vec::new();
    let candidates = server_dir()
        .ok()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .into_iter()
        .chain(xdg_base());
    for place in candidates {
        if !place.starts_with("/dev") && !places.contains(&place) {
            places.push(place);
        }
    }
    places
}

/// The read-only empty file bound over protected files that do not exist yet.
pub fn empty_file() -> Result<PathBuf, String> {
    static FILE: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    FILE.get_or_init(|| {
        let path = server_dir()?.join("empty");
        write_read_only(&path, b"", 0o444)?;
        Ok(path)
    })
    .clone()
}

/// A read-only empty directory, bound over directories a container must not show
/// (a bind, so it stacks on the volume it is inside as every engine orders binds).
pub fn empty_dir() -> Result<PathBuf, String> {
    static DIR: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    DIR.get_or_init(|| {
        use std::os::unix::fs::PermissionsExt;
        let path = server_dir()?.join("empty-dir");
        std::fs::create_dir(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o555))
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(path)
    })
    .clone()
}

/// The seccomp programs ([`crate::write_seccomp_programs`]), written once per server.
pub fn seccomp_programs() -> Result<Vec<PathBuf>, String> {
    static PROGRAMS: OnceLock<Result<Vec<PathBuf>, String>> = OnceLock::new();
    PROGRAMS
        .get_or_init(|| crate::write_seccomp_programs(server_dir()?))
        .clone()
}

/// Removes the server's directory (when it was created), and the cgroups of its
/// sandboxes that have ended. Safe to call more than once.
pub fn remove_server_dir() {
    // Only looks: removal must not create the directory first.
    if let Some(dir) = CREATED.get() {
        let _ = std::fs::remove_dir_all(dir);
    }
    crate::limits::remove_cgroups();
}

/// The directory once [`server_dir`] has created it.
static CREATED: OnceLock<PathBuf> = OnceLock::new();

/// On SIGINT, SIGTERM or SIGHUP: `before` (ending what runs), then the directory is
/// removed and the process ends by the same signal. Installs handlers once; a program
/// that sets its own handler for one of them later keeps its own.
pub fn remove_on_signals(before: fn()) {
    use std::sync::atomic::{AtomicI32, Ordering};
    static WRITE_END: AtomicI32 = AtomicI32::new(-1);
    static INSTALLED: OnceLock<()> = OnceLock::new();
    extern "C" fn on_signal(signal: libc::c_int) {
        let byte = signal as u8;
        // SAFETY: write is async-signal-safe; a full pipe only loses a repeat.
        unsafe {
            libc::write(
                WRITE_END.load(Ordering::SeqCst),
                (&byte as *const u8).cast(),
                1,
            )
        };
    }
    INSTALLED.get_or_init(|| {
        let mut fds = [0; 2];
        // SAFETY: pipe2 fills two descriptors on success.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return;
        }
        WRITE_END.store(fds[1], Ordering::SeqCst);
        let read_end = fds[0];
        let spawned = std::thread::Builder::new()
            .name("signal-cleanup".into())
            .spawn(move || {
                let mut byte = 0u8;
                // SAFETY: reading one byte from our own pipe.
                while unsafe { libc::read(read_end, (&mut byte as *mut u8).cast(), 1) } != 1 {}
                before();
                remove_server_dir();
                // SAFETY: back to the default action, then the same signal again.
                unsafe {
                    libc::signal(byte as libc::c_int, libc::SIG_DFL);
                    libc::raise(byte as libc::c_int);
                }
            });
        if spawned.is_err() {
            return;
        }
        for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            // SAFETY: the handler only writes a byte to a pipe.
            unsafe { libc::signal(signal, on_signal as *const () as libc::sighandler_t) };
        }
    });
}

fn create_server_dir() -> Result<PathBuf, String> {
    let mut tried = Vec::new();
    for base in bases() {
        match make_private(&base) {
            Ok(()) => {
                remove_dead_servers(&base);
                let dir = base.join(format!("srv-{}-{}", std::process::id(), random_hex(12)));
                make_private(&dir)?;
                let _ = CREATED.set(dir.clone());
                extern "C" fn at_exit() {
                    let _ = std::panic::catch_unwind(remove_server_dir);
                }
                // SAFETY: registering a plain extern "C" fn.
                unsafe { libc::atexit(at_exit) };
                return Ok(dir);
            }
            Err(e) => tried.push(e),
        }
    }
    Err(format!(
        "no private directory for the sandbox's own files: {}",
        tried.join("; ")
    ))
}

fn xdg_base() -> Option<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let dir = PathBuf::from(std::env::var_os("XDG_RUNTIME_DIR")?);
    let meta = std::fs::symlink_metadata(&dir).ok()?;
    // SAFETY: geteuid has no preconditions.
    let mine = meta.uid() == unsafe { libc::geteuid() };
    (dir.is_absolute() && meta.is_dir() && mine && meta.mode() & 0o022 == 0)
        .then(|| dir.join("hermes-tools"))
}

fn bases() -> Vec<PathBuf> {
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    let mut bases: Vec<PathBuf> = xdg_base().into_iter().collect();
    if Path::new("/dev/shm").is_dir() {
        bases.push(PathBuf::from(format!("/dev/shm/hermes-tools-{uid}")));
    }
    bases.push(std::env::temp_dir().join(format!("hermes-tools-{uid}")));
    bases
}

/// Creates `dir` with mode 0700, or makes sure an existing one is a real directory of
/// ours (not a link, not another user's) and sets it to 0700.
fn make_private(dir: &Path) -> Result<(), String> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    let failed = |e: std::io::Error| format!("{}: {e}", dir.display());
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => return Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(failed(e)),
    }
    let meta = std::fs::symlink_metadata(dir).map_err(failed)?;
    // SAFETY: geteuid has no preconditions.
    if !meta.is_dir() || meta.uid() != unsafe { libc::geteuid() } {
        return Err(format!(
            "{} exists and is not a directory of this user",
            dir.display()
        ));
    }
    if meta.mode() & 0o7777 != 0o700 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(failed)?;
    }
    Ok(())
}

/// Removes `srv-<pid>-*` directories of processes that no longer exist.
fn remove_dead_servers(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("srv-"))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<libc::pid_t>().ok())
        else {
            continue;
        };
        if is_gone(pid) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Whether no process `pid` exists.
pub(crate) fn is_gone(pid: libc::pid_t) -> bool {
    // SAFETY: signal 0 only checks whether the process exists.
    let failed = unsafe { libc::kill(pid, 0) } != 0;
    failed && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
}

fn write_read_only(path: &Path, bytes: &[u8], mode: u32) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let failed = |e: std::io::Error| format!("cannot write {}: {e}", path.display());
    std::fs::write(path, bytes).map_err(failed)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(failed)
}

/// `digits` random hex digits (from the kernel's random source).
pub fn random_hex(digits: usize) -> String {
    let mut bytes = vec![0u8; digits.div_ceil(2)];
    if getrandom::fill(&mut bytes).is_err() {
        // Unique within the process, unlikely to repeat across processes: a counter,
        // the pid and the clock, through std's randomly keyed hasher.
        use std::hash::{BuildHasher, Hasher};
        static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        for chunk in bytes.chunks_mut(8) {
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u64(COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
            h.write_u32(std::process::id());
            h.write_u128(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos()),
            );
            chunk.copy_from_slice(&h.finish().to_le_bytes()[..chunk.len()]);
        }
    }
    let mut hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    hex.truncate(digits);
    hex
}
