//! The access policy: what the model may write and read on this machine, one value
//! consulted by every door.
//!
//! An [`AccessPolicy`] holds the writable roots (the same the OS sandbox makes
//! writable: working directory, temp directory, `terminal.sandbox.writable_roots`),
//! the protected places carved out of them, and the deny-read list. The file tools,
//! text_to_speech, skills and cron ask it before touching a file; the sandbox mounts
//! its protected places read-only and hides its deny-read places. It is built once per
//! call from the operator's configuration (`hermes_environments::config` does that),
//! and derived work can only narrow it ([`AccessPolicy::confined_to`]).
//!
//! Writes are carried out race-free: [`AccessPolicy::open_parent`] opens the target's
//! directory from a descriptor of its writable root with `openat2(RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)`, checks what the kernel says it
//! opened, and the file is then created and renamed inside that directory by name, so
//! a symlink planted or swapped on the way never leads a write out.

use crate::protected_paths::{
    deny_read_place, deny_read_places, resolve, ProtectedPaths, ProtectedPlace, Refusal,
};
use rustix::fs::{Mode, OFlags, ResolveFlags};
use std::ffi::OsString;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

/// What the model may write and read.
#[derive(Clone, Debug)]
pub struct AccessPolicy {
    protected: ProtectedPaths,
    /// Resolved; `None`: writes are not bounded by roots (`terminal.sandbox.mode: off`),
    /// only by the protected places.
    writable_roots: Option<Vec<PathBuf>>,
    deny_read: Vec<ProtectedPlace>,
}

/// A directory opened for a write beneath a writable root, and the name to write in it.
#[derive(Debug)]
pub struct ParentDir {
    pub dir: OwnedFd,
    pub name: OsString,
    /// Where the kernel says the directory is.
    pub real: PathBuf,
    /// Directories made on the way.
    pub created: usize,
}

impl AccessPolicy {
    /// The policy for `home` and `hermes_home`: the protected places and the default
    /// deny-read list, writes not bounded by roots.
    pub fn new(home: &Path, hermes_home: &Path) -> AccessPolicy {
        AccessPolicy {
            protected: ProtectedPaths::new(home, hermes_home),
            writable_roots: None,
            deny_read: deny_read_places(home, hermes_home),
        }
    }

    /// Bounds writes to `roots` (resolved here; `/` never counts as a root, as in the
    /// sandbox); `None` leaves writes unbounded.
    pub fn with_writable_roots(mut self, roots: Option<Vec<PathBuf>>) -> AccessPolicy {
        self.writable_roots = roots.map(|roots| {
            let mut resolved: Vec<PathBuf> = Vec::new();
            for root in roots {
                let real = resolve(&root);
                if real != Path::new("/") && !resolved.contains(&real) {
                    resolved.push(real);
                }
            }
            resolved
        });
        self
    }

    /// Adds the operator's own deny-read paths (files or folders) to the default list.
    pub fn with_deny_read(mut self, extra: &[PathBuf]) -> AccessPolicy {
        self.deny_read
            .extend(extra.iter().map(|path| deny_read_place(path)));
        self
    }

    /// Also confines writes to `HERMES_WRITE_SAFE_ROOT` (a `:`-separated list).
    pub fn with_safe_roots(mut self, list: Option<OsString>) -> AccessPolicy {
        self.protected = self.protected.with_safe_roots(list);
        self
    }

    /// The same policy with writes confined to `root` alone (within the current roots
    /// when `root` lies inside them): what a tool's own store or a derived task gets.
    pub fn confined_to(&self, root: &Path) -> AccessPolicy {
        let mut narrowed = self.clone();
        narrowed.writable_roots = Some(vec![resolve(root)]);
        narrowed
    }

    /// The same policy with `folder` added to the writable roots (a write a person
    /// approved); the protected places still apply inside it.
    pub fn with_extra_root(&self, folder: &Path) -> AccessPolicy {
        let mut widened = self.clone();
        if let Some(roots) = widened.writable_roots.as_mut() {
            let real = resolve(folder);
            if !roots.contains(&real) {
                roots.push(real);
            }
        }
        widened
    }

    pub fn protected(&self) -> &ProtectedPaths {
        &self.protected
    }

    /// `None` when writes are not bounded by roots.
    pub fn writable_roots(&self) -> Option<&[PathBuf]> {
        self.writable_roots.as_deref()
    }

    pub fn deny_read(&self) -> &[ProtectedPlace] {
        &self.deny_read
    }

    /// Whether `path` (resolved here) lies inside the writable roots.
    pub fn within_roots(&self, path: &Path) -> bool {
        self.root_of(&resolve(path)).is_some()
    }

    /// Why a write to `resolved` (an output of [`resolve`]) is refused, if it is:
    /// protected places first, then the roots, then `HERMES_WRITE_SAFE_ROOT`.
    pub fn write_refusal(&self, resolved: &Path) -> Option<Refusal> {
        let listed = self.protected.write_refusal(resolved);
        if matches!(listed, Some(Refusal::Protected { .. })) {
            return listed;
        }
        if self.root_of(resolved).is_none() {
            return Some(Refusal::OutsideWritableRoots {
                roots: self.writable_roots.clone().unwrap_or_default(),
            });
        }
        listed
    }

    /// [`resolve`] then [`AccessPolicy::write_refusal`].
    pub fn check_write(&self, path: &Path) -> Option<Refusal> {
        self.write_refusal(&resolve(path))
    }

    /// Why a read of `resolved` is refused (a deny-read place), if it is.
    pub fn read_refusal(&self, resolved: &Path) -> Option<Refusal> {
        self.deny_read
            .iter()
            .find(|place| place.covers(resolved))
            .map(|place| Refusal::ReadDenied {
                place: place.path.clone(),
            })
    }

    /// [`resolve`] then [`AccessPolicy::read_refusal`].
    pub fn check_read(&self, path: &Path) -> Option<Refusal> {
        self.read_refusal(&resolve(path))
    }

    /// The writable root `resolved` lies in (the innermost), `/` when unbounded.
    fn root_of(&self, resolved: &Path) -> Option<PathBuf> {
        match &self.writable_roots {
            None => Some(PathBuf::from("/")),
            Some(roots) => roots
                .iter()
                .filter(|root| resolved.starts_with(root))
                .max_by_key(|root| root.components().count())
                .cloned(),
        }
    }

    /// Opens the directory a write to `target` goes to, race-free, after checking the
    /// policy: the target is resolved, refused when the policy says so, and its
    /// directory is then opened from a descriptor of its writable root without
    /// following any symlink (made, with `create_parents`, where missing). What was
    /// opened is checked again by the path the kernel gives for it.
    pub fn open_parent(
        &self,
        target: &Path,
        create_parents: bool,
        verb: &str,
        shown: &str,
    ) -> Result<ParentDir, WriteError> {
        let resolved = resolve(target);
        if let Some(refusal) = self.write_refusal(&resolved) {
            return Err(WriteError::Refused(refusal.message(verb, shown)));
        }
        let root = self
            .root_of(&resolved)
            .expect("a path the policy allows lies in a root");
        let (Some(parent), Some(name)) = (resolved.parent(), resolved.file_name()) else {
            return Err(WriteError::Refused(format!(
                "{verb} denied: '{shown}' names no file."
            )));
        };
        let relative = parent.strip_prefix(&root).unwrap_or(Path::new(""));
        let failed = |source: std::io::Error| WriteError::Failed {
            doing: format!("{verb} failed: cannot open the folder of '{shown}'"),
            source,
        };
        let root_dir = rustix::fs::open(
            &root,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| failed(e.into()))?;
        let (dir, created) =
            open_beneath(root_dir, relative, create_parents).map_err(|e| match e.raw_os_error() {
                Some(libc::ELOOP) | Some(libc::EXDEV) => WriteError::Refused(format!(
                    "{verb} denied: a folder on the way to '{shown}' was replaced by a symlink while it was opened; nothing was written."
                )),
                _ => failed(e),
            })?;
        let real = fd_path(&dir).unwrap_or_else(|| parent.to_path_buf());
        if let Some(refusal) = self.write_refusal(&real.join(name)) {
            return Err(WriteError::Refused(refusal.message(verb, shown)));
        }
        Ok(ParentDir {
            dir,
            name: name.to_os_string(),
            real,
            created,
        })
    }
}

/// Why a write through the policy did not happen: the policy refused it, or the system
/// failed it. Either displays as the sentence the model is shown.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The place is not writable under the policy (protected, outside the writable
    /// roots, names no file, or a folder on the way was swapped for a symlink).
    #[error("{0}")]
    Refused(String),
    /// The write was allowed and the system failed it (`doing` says what it was at).
    #[error("{doing}: {source}")]
    Failed {
        doing: String,
        source: std::io::Error,
    },
}

impl From<WriteError> for std::io::Error {
    /// A refusal is `PermissionDenied`; a failure keeps the kind of its cause.
    fn from(error: WriteError) -> std::io::Error {
        let kind = match &error {
            WriteError::Refused(_) => std::io::ErrorKind::PermissionDenied,
            WriteError::Failed { source, .. } => source.kind(),
        };
        std::io::Error::new(kind, error.to_string())
    }
}

/// Opens the regular file `path` for reading only if it lies beneath the folder `root`
/// with every symlink on the way resolved inside `root` (`openat2` with
/// `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS` from a descriptor of `root`): a file
/// symlinked out of its folder (a skill's SKILL.md pointing at `~/.aws/credentials`)
/// is not opened. Returns the file and the path the kernel gives for it.
pub fn open_file_beneath(root: &Path, path: &Path) -> std::io::Result<(std::fs::File, PathBuf)> {
    let relative = path.strip_prefix(root).map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!("{} is not inside {}", path.display(), root.display()),
        )
    })?;
    let root_dir = rustix::fs::open(
        root,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let file = rustix::fs::openat2(
        &root_dir,
        relative,
        OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY,
        Mode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
    )
    .map_err(|e| match e {
        rustix::io::Errno::XDEV => std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!("{} leads outside {}", path.display(), root.display()),
        ),
        other => other.into(),
    })?;
    let file = std::fs::File::from(file);
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    let real = fd_path(&file).unwrap_or_else(|| path.to_path_buf());
    Ok((file, real))
}

/// Opens `relative` (a path of plain names) beneath `root`, one name at a time, never
/// following a symlink; makes missing directories when `create`.
fn open_beneath(root: OwnedFd, relative: &Path, create: bool) -> std::io::Result<(OwnedFd, usize)> {
    let mut current = root;
    let mut created = 0;
    for part in relative.iter() {
        let next = match open_dir_at(&current, part) {
            Err(e) if create && e.kind() == std::io::ErrorKind::NotFound => {
                match rustix::fs::mkdirat(&current, part, Mode::from_raw_mode(0o777)) {
                    Ok(()) => created += 1,
                    Err(rustix::io::Errno::EXIST) => {}
                    Err(e) => return Err(e.into()),
                }
                open_dir_at(&current, part)?
            }
            other => other?,
        };
        current = next;
    }
    Ok((current, created))
}

/// One directory below `dir`: `openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
/// RESOLVE_NO_MAGICLINKS`, or `openat` with `O_NOFOLLOW` on kernels before 5.6.
fn open_dir_at(dir: &impl AsFd, name: &std::ffi::OsStr) -> std::io::Result<OwnedFd> {
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::NOFOLLOW;
    match rustix::fs::openat2(
        dir,
        name,
        flags,
        Mode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
    ) {
        Err(rustix::io::Errno::NOSYS) => {
            rustix::fs::openat(dir, name, flags, Mode::empty()).map_err(Into::into)
        }
        other => other.map_err(Into::into),
    }
}

/// The path the kernel gives for what `fd` is open on.
pub fn fd_path(fd: &impl AsFd) -> Option<PathBuf> {
    use std::os::fd::AsRawFd;
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_fd().as_raw_fd()))
        .ok()
        .filter(|p| p.is_absolute())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn setup() -> (tempfile::TempDir, PathBuf, PathBuf, PathBuf, AccessPolicy) {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let hermes = dir.path().join("hermes");
        let work = dir.path().join("work");
        for d in [&home, &hermes, &work] {
            std::fs::create_dir_all(d).unwrap();
        }
        let policy =
            AccessPolicy::new(&home, &hermes).with_writable_roots(Some(vec![work.clone()]));
        (dir, home, hermes, work, policy)
    }

    #[test]
    fn writes_stay_inside_the_roots_without_the_protected_places() {
        let (dir, home, hermes, work, policy) = setup();
        assert!(policy.check_write(&work.join("src/main.rs")).is_none());
        assert!(matches!(
            policy.check_write(&dir.path().join("elsewhere.txt")),
            Some(Refusal::OutsideWritableRoots { .. })
        ));
        let at_home = policy.confined_to(&home);
        for startup in [
            ".bash_aliases",
            ".bashrc.d/x.sh",
            ".config/fish/conf.d/x.fish",
            ".gitconfig",
            ".config/git/config",
            ".local/bin/git",
            ".cargo/env",
            ".cargo/bin/cargo",
            ".local/lib/python3.12/site-packages/usercustomize.py",
            ".local/lib/python3.12/site-packages/evil.pth",
            ".config/autostart/x.desktop",
            ".config/systemd/user/x.service",
            ".profile",
            ".zshenv",
        ] {
            assert!(
                matches!(
                    at_home.check_write(&home.join(startup)),
                    Some(Refusal::Protected { .. })
                ),
                "{startup} should be protected"
            );
        }
        assert!(at_home.check_write(&home.join("notes/todo.md")).is_none());
        assert!(policy
            .confined_to(&hermes)
            .check_write(&hermes.join("cron/jobs.json"))
            .is_some());
    }

    #[test]
    fn secrets_are_denied_to_reads() {
        let (_dir, home, hermes, work, policy) = setup();
        for secret in [
            home.join(".ssh/id_rsa"),
            home.join(".aws/credentials"),
            home.join(".kube/config"),
            home.join(".docker/config.json"),
            home.join(".netrc"),
            home.join(".cargo/credentials.toml"),
            hermes.join(".env"),
            hermes.join("mcp_server_token"),
            hermes.join("state.db"),
        ] {
            assert!(policy.check_read(&secret).is_some(), "{}", secret.display());
        }
        assert!(policy.check_read(&work.join("README.md")).is_none());
        assert!(policy.check_read(&home.join(".kube/cache/x")).is_none());
        let extra = work.join("private");
        let policy = policy.with_deny_read(std::slice::from_ref(&extra));
        assert!(policy.check_read(&extra.join("x")).is_some());
        assert!(policy.check_read(&home.join(".ssh/id_ed25519")).is_some());
    }

    #[test]
    fn a_refusal_and_a_failure_keep_their_kinds_as_io_errors() {
        let refused: std::io::Error = WriteError::Refused("Write denied: 'x'.".into()).into();
        assert_eq!(refused.kind(), std::io::ErrorKind::PermissionDenied);
        assert_eq!(refused.to_string(), "Write denied: 'x'.");
        let failed: std::io::Error = WriteError::Failed {
            doing: "Write failed for 'x'".into(),
            source: std::io::Error::from_raw_os_error(libc::ENOSPC),
        }
        .into();
        assert_eq!(failed.kind(), std::io::ErrorKind::StorageFull);
        assert!(failed.to_string().starts_with("Write failed for 'x': "));
    }

    #[test]
    fn a_symlink_never_leads_a_write_out() {
        let (_dir, _home, hermes, work, policy) = setup();
        std::fs::write(hermes.join("config.yaml"), "x: 1\n").unwrap();
        symlink(hermes.join("config.yaml"), work.join("cfg.wav")).unwrap();
        let refused = policy
            .open_parent(&work.join("cfg.wav"), false, "Write", "cfg.wav")
            .unwrap_err();
        assert!(
            matches!(&refused, WriteError::Refused(why) if why.contains("runtime")),
            "{refused}"
        );
        symlink(&hermes, work.join("link")).unwrap();
        assert!(matches!(
            policy.open_parent(&work.join("link/new.txt"), true, "Write", "link/new.txt"),
            Err(WriteError::Refused(_))
        ));
        let made = policy
            .open_parent(&work.join("a/b/c.txt"), true, "Write", "a/b/c.txt")
            .unwrap();
        assert_eq!(made.created, 2);
        assert_eq!(made.real, resolve(&work.join("a/b")));
        // A folder swapped for a symlink after the check is not followed.
        std::fs::remove_dir(work.join("a/b")).unwrap();
        symlink(&hermes, work.join("a/b")).unwrap();
        let root = rustix::fs::open(
            resolve(&work),
            OFlags::PATH | OFlags::DIRECTORY,
            Mode::empty(),
        )
        .unwrap();
        assert!(open_beneath(root, Path::new("a/b"), false).is_err());
    }
}
