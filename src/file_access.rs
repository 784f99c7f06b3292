//! The one way a tool touches this machine's files for the model: the task's access
//! policy ([`hermes_runtime::access::AccessPolicy`], built from the operator's
//! configuration as the sandbox's is), and the race-free write through it.
//!
//! write_file, patch, text_to_speech and skill_manage write through
//! [`write_file_bytes`]; read_file, search_files and skill_view ask [`read_refusal`];
//! cronjob asks the policy whether a job's folder lies inside its author's roots.
//! A write outside the writable roots is put to the person like a flagged command
//! ([`grant_outside_roots`]) and refused when nobody can answer; protected places are
//! refused always. Device and kernel files are recognised by place here
//! ([`is_device_path`]) for every tool that opens files.

use hermes_runtime::access::{AccessPolicy, ParentDir, WriteError};
use hermes_runtime::protected_paths::{resolve, Refusal};
use hermes_runtime::ToolContext;
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// Environment variables the policy is built from (besides config.yaml).
const POLICY_VARIABLES: &[&str] = &[
    "HOME",
    "TMPDIR",
    "HERMES_WRITE_SAFE_ROOT",
    "TERMINAL_CWD",
    "TERMINAL_SANDBOX_MODE",
    "TERMINAL_SANDBOX_WRITABLE_ROOTS",
    "TERMINAL_SANDBOX_DENY_READ",
];

/// The access policy of the task `ctx` belongs to: its working directory's writable
/// roots, the protected places and the deny-read list, from the operator's config.
/// Built once per config.yaml (by its size and mtime), working directory and
/// environment, then kept: the places are resolved on the disk, and the config parsed,
/// which is not worth doing again for every read.
pub fn policy(ctx: &ToolContext) -> Result<Arc<AccessPolicy>, String> {
    type Cache = Mutex<HashMap<String, Arc<AccessPolicy>>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let config_path = hermes_runtime::config::Config::path_in(ctx.hermes_home());
    let variables: Vec<_> = POLICY_VARIABLES.iter().map(std::env::var_os).collect();
    let key = format!(
        "{}\0{:?}\0{}\0{variables:?}",
        config_path.display(),
        hermes_runtime::config::file_signature(&config_path),
        ctx.cwd().display(),
    );
    let cache = CACHE.get_or_init(Default::default);
    if let Some(hit) = cache.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
        return Ok(Arc::clone(hit));
    }
    let config = hermes_environments::config::TerminalConfig::load(ctx.hermes_home())
        .map_err(|e| format!("the configuration cannot be read, so no file is touched: {e}"))?;
    let built = Arc::new(config.access_policy(ctx.cwd()));
    let mut cache = cache.lock().unwrap_or_else(|p| p.into_inner());
    if cache.len() > 64 {
        cache.clear();
    }
    cache.insert(key, Arc::clone(&built));
    Ok(built)
}

/// Why `real` (a path with every symlink already followed, as the kernel gives it for
/// an opened file) must not be read by the model, as a sentence (`None`: it may be).
pub fn read_refusal(ctx: &ToolContext, real: &Path, verb: &str, shown: &str) -> Option<String> {
    match policy(ctx) {
        Ok(policy) => policy.read_refusal(real).map(|r| r.message(verb, shown)),
        Err(e) => Some(format!("{verb} denied: {e}")),
    }
}

/// Whether `policy` lets a write to `target` happen: `Ok(None)` as it is, `Ok(Some)`
/// widened to the folder of `target` when the write is outside the writable roots and
/// the person approves it (as a flagged command is approved; refused when nobody can be
/// asked). Protected places are never widened.
pub fn grant_outside_roots(
    ctx: &ToolContext,
    policy: &AccessPolicy,
    target: &Path,
    tool: &str,
    verb: &str,
    shown: &str,
) -> Result<Option<AccessPolicy>, String> {
    use hermes_runtime::hooks::ApprovalGate;
    let resolved = resolve(target);
    let refusal = match policy.write_refusal(&resolved) {
        None => return Ok(None),
        Some(refusal @ Refusal::OutsideWritableRoots { .. }) => refusal,
        Some(other) => return Err(other.message(verb, shown)),
    };
    // The nearest folder that exists: the write makes the rest.
    let folder = resolved
        .ancestors()
        .skip(1)
        .find(|dir| dir.is_dir())
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("/"));
    let gate = hermes_runtime::approval::CallApprovalGate::for_call(ctx);
    let reason = format!(
        "{tool} writes {} outside the writable roots",
        resolved.display()
    );
    let key = format!("write_outside_roots:{}", resolved.display());
    match gate.approve(tool, &reason, &key) {
        Ok(true) => Ok(Some(policy.with_extra_root(&folder))),
        Ok(false) => Err(format!(
            "{} Nobody approved this write.",
            refusal.message(verb, shown)
        )),
        Err(e) => Err(format!("{} ({e})", refusal.message(verb, shown))),
    }
}

/// Replaces `target` with `data` through `policy`: its folder opened beneath its
/// writable root (made first with `create_parents`), a temp file written and synced
/// there, the original's permissions kept, and renamed over the name (a symlink put
/// there is replaced, never followed), on a thread the kernel confines to the
/// writable roots ([`crate::kernel_bound`]). Returns the folders made.
pub fn write_file_bytes(
    policy: &AccessPolicy,
    target: &Path,
    data: &[u8],
    create_parents: bool,
    verb: &str,
    shown: &str,
) -> Result<usize, WriteError> {
    crate::kernel_bound::within_roots(policy.writable_roots(), || {
        let parent = policy.open_parent(target, create_parents, verb, shown)?;
        write_in(&parent, data).map_err(|source| WriteError::Failed {
            doing: format!("{verb} failed for '{shown}'"),
            source,
        })?;
        Ok(parent.created)
    })
}

/// Removes the file `target` through `policy` (the name itself, never what a symlink
/// there points to).
pub fn remove_file(
    policy: &AccessPolicy,
    target: &Path,
    verb: &str,
    shown: &str,
) -> Result<(), WriteError> {
    crate::kernel_bound::within_roots(policy.writable_roots(), || {
        let parent = policy.open_parent(target, false, verb, shown)?;
        rustix::fs::unlinkat(&parent.dir, &parent.name, rustix::fs::AtFlags::empty()).map_err(|e| {
            WriteError::Failed {
                doing: format!("{verb} failed for '{shown}'"),
                source: e.into(),
            }
        })
    })
}

/// Makes the missing folders of `target` through `policy`; returns how many.
pub fn create_parents(
    policy: &AccessPolicy,
    target: &Path,
    verb: &str,
    shown: &str,
) -> Result<usize, WriteError> {
    crate::kernel_bound::within_roots(policy.writable_roots(), || {
        policy
            .open_parent(target, true, verb, shown)
            .map(|parent| parent.created)
    })
}

/// Replaces a file the runtime names itself (the cron store), not one the model named:
/// the same temp file + rename, in the folder as it is.
pub fn write_own_file(path: &Path, data: &[u8]) -> std::io::Result<()> {
    use rustix::fs::{Mode, OFlags};
    let (Some(folder), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(std::io::Error::other(format!(
            "{} names no file",
            path.display()
        )));
    };
    let dir = rustix::fs::open(
        folder,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let parent = ParentDir {
        dir,
        name: name.to_os_string(),
        real: folder.to_path_buf(),
        created: 0,
    };
    write_in(&parent, data)
}

/// The temp file + rename of one write inside an opened folder.
pub fn write_in(parent: &ParentDir, data: &[u8]) -> std::io::Result<()> {
    use rustix::fs::{AtFlags, Mode, OFlags};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let original = rustix::fs::statat(&parent.dir, &parent.name, AtFlags::SYMLINK_NOFOLLOW)
        .ok()
        .filter(|st| st.st_mode & libc::S_IFMT == libc::S_IFREG)
        .map(|st| st.st_mode & 0o7777);
    let name = parent.name.to_string_lossy();
    let mut attempt = 0;
    let (temp, file) = loop {
        let temp = format!(
            ".{name}.hermes-tmp-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        match rustix::fs::openat(
            &parent.dir,
            temp.as_str(),
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o666),
        ) {
            Ok(fd) => break (temp, std::fs::File::from(fd)),
            Err(rustix::io::Errno::EXIST) if attempt < 16 => attempt += 1,
            Err(e) => return Err(e.into()),
        }
    };
    let result = (|| {
        let mut file = file;
        file.write_all(data)?;
        if let Some(mode) = original {
            rustix::fs::fchmod(&file, Mode::from_raw_mode(mode))?;
        }
        file.sync_all()?;
        drop(file);
        rustix::fs::renameat(&parent.dir, temp.as_str(), &parent.dir, &parent.name)?;
        Ok(())
    })();
    if result.is_err() {
        let _ = rustix::fs::unlinkat(&parent.dir, temp.as_str(), AtFlags::empty());
    }
    result
}

/// Files that stream forever, block, or expose memory, by where they are: devices
/// (except `/dev/shm`) and every file of procfs and sysfs (memory maps, environments,
/// kernel logs). The file tools' `open_regular` also checks the opened descriptor's type and
/// filesystem, which catches the same files under other names.
pub fn is_device_path(path: &Path) -> bool {
    under_device_roots(&std::fs::canonicalize(path).unwrap_or_else(|_| normalize(path)))
}

/// [`is_device_path`] for a path already resolved.
pub(crate) fn under_device_roots(resolved: &Path) -> bool {
    let under = |root: &str| resolved.starts_with(root);
    (under("/dev") && !under("/dev/shm")) || under("/proc") || under("/sys")
}

/// `a/./b/../c` -> `a/c`, without touching the disk.
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}
