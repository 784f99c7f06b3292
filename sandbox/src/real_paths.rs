//! Real paths (every symlink followed) of the places one sandbox layout names.
//!
//! A layout is worked out again before every command of a long-lived sandbox, so this
//! is on the way to each command's start. `realpath(3)` reads every component of a path
//! back with its own `readlink`, and a layout's places mostly share a few parents
//! (`$HOME`, `$HERMES_HOME`) and mostly do not exist: about 300 system calls a layout.
//! Here a parent asked about again is answered from memory, and a place is one `lstat`
//! in its parent's real directory: a missing name or one that is not a symlink needs
//! nothing more. A symlink (or a path with no parent to build on) is resolved by the
//! kernel in one `open(O_PATH)`, named by one `readlink` of `/proc/self/fd/N`.

use std::collections::HashMap;
use std::ffi::{CString, OsString};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Lookups of one layout: valid for as long as the file system is not expected to
/// change, so one is made per layout and then dropped.
#[derive(Default)]
pub(crate) struct RealPaths {
    /// By the path's bytes: hashing a `Path` walks its components, which cost more here
    /// than the system calls.
    known: HashMap<Vec<u8>, Option<PathBuf>>,
    /// Each name looked up in a real directory (see `layout_watch`).
    lookups: Vec<crate::layout_watch::Lookup>,
    /// Some answer came through a symlink, or from a path with no parent but `/`: it
    /// depends on more than `lookups`.
    through_links: bool,
}

impl RealPaths {
    /// Where `path` really is, when it exists.
    pub(crate) fn existing(&mut self, path: &Path) -> Option<PathBuf> {
        if let Some(known) = self.known.get(path.as_os_str().as_bytes()) {
            return known.clone();
        }
        let found = match (path.parent(), path.file_name()) {
            (Some(parent), Some(name)) if path.is_absolute() => {
                self.existing(parent).and_then(|real| {
                    self.lookups.push((
                        real.as_os_str().as_bytes().to_vec(),
                        name.as_bytes().to_vec(),
                    ));
                    let (found, through_link) = in_directory(&real, name, path);
                    self.through_links |= through_link;
                    found
                })
            }
            _ => {
                self.through_links |= path != Path::new("/");
                look_up(path)
            }
        };
        self.known
            .insert(path.as_os_str().as_bytes().to_vec(), found.clone());
        found
    }

    /// `path` with symlinks resolved as far as it exists and the rest appended as
    /// written, and whether all of it exists.
    pub(crate) fn as_far_as_it_exists(&mut self, path: &Path) -> Option<(PathBuf, bool)> {
        let mut existing = path.to_path_buf();
        let mut rest: Vec<OsString> = Vec::new();
        loop {
            if let Some(real) = self.existing(&existing) {
                let whole = rest.is_empty();
                return Some((
                    rest.iter().rev().fold(real, |acc, part| acc.join(part)),
                    whole,
                ));
            }
            rest.push(existing.file_name()?.to_owned());
            if !existing.pop() {
                return None;
            }
        }
    }

    /// The names looked up, when every answer depends on them alone (no symlink was
    /// followed).
    pub(crate) fn lookups(&self) -> Option<&[crate::layout_watch::Lookup]> {
        (!self.through_links).then_some(&self.lookups)
    }
}

/// `name` in the real directory `real_parent` (where `path`'s parent leads): the same
/// when it is there and no symlink, else `path` resolved whole; and whether it was a
/// symlink.
fn in_directory(
    real_parent: &Path,
    name: &std::ffi::OsStr,
    path: &Path,
) -> (Option<PathBuf>, bool) {
    let candidate = real_parent.join(name);
    match std::fs::symlink_metadata(&candidate) {
        Ok(meta) if meta.file_type().is_symlink() => (look_up(path), true),
        Ok(_) => (Some(candidate), false),
        Err(_) => (None, false),
    }
}

fn look_up(path: &Path) -> Option<PathBuf> {
    let name = CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: open returns a new descriptor or -1; O_PATH opens nothing for reading, so
    // no device or FIFO is touched.
    let fd = unsafe { libc::open(name.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
    if fd < 0 {
        return None;
    }
    // SAFETY: a fresh descriptor owned by nobody else.
    let handle = unsafe { OwnedFd::from_raw_fd(fd) };
    match std::fs::read_link(format!("/proc/self/fd/{}", handle.as_raw_fd())) {
        // Anything but a plain absolute path (no /proc, a file deleted meanwhile, one
        // outside this root) is asked of realpath instead.
        Ok(real) if real.is_absolute() && !real.as_os_str().as_bytes().ends_with(b" (deleted)") => {
            Some(real)
        }
        _ => std::fs::canonicalize(path).ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_as_realpath_does_through_symlinks_and_missing_parts() {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir(base.join("real")).unwrap();
        std::fs::write(base.join("real/file"), b"x").unwrap();
        std::os::unix::fs::symlink(base.join("real"), base.join("link")).unwrap();
        std::os::unix::fs::symlink("real/file", base.join("file-link")).unwrap();
        std::os::unix::fs::symlink(base.join("nowhere"), base.join("dangling")).unwrap();
        std::os::unix::fs::symlink("../link/file", base.join("real/up-and-over")).unwrap();
        std::os::unix::fs::symlink("link", base.join("link-to-link")).unwrap();
        let mut paths = RealPaths::default();
        for probe in [
            "link",
            "link/file",
            "file-link",
            "real/../real/file",
            "link/.",
            "link/up-and-over",
            "link-to-link/file",
            "link-to-link/../link/file",
        ] {
            let path = base.join(probe);
            assert_eq!(
                paths.existing(&path),
                Some(std::fs::canonicalize(&path).unwrap()),
                "{probe}"
            );
        }
        assert_eq!(paths.existing(&base.join("dangling")), None);
        assert_eq!(paths.existing(&base.join("real/file/under-a-file")), None);
        assert_eq!(paths.existing(Path::new("/")), Some(PathBuf::from("/")));
        assert_eq!(paths.existing(&base.join("link/missing")), None);
        assert_eq!(
            paths.as_far_as_it_exists(&base.join("link/missing/deeper")),
            Some((base.join("real/missing/deeper"), false))
        );
        assert_eq!(
            paths.as_far_as_it_exists(&base.join("link/file")),
            Some((base.join("real/file"), true))
        );
        // Remembered: a later change is not seen by the same lookups.
        std::fs::remove_file(base.join("real/file")).unwrap();
        assert_eq!(
            paths.existing(&base.join("link/file")),
            Some(base.join("real/file"))
        );
        assert_eq!(RealPaths::default().existing(&base.join("link/file")), None);
    }
}
