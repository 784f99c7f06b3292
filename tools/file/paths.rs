//! Which paths the file tools refuse (devices, kernel files, protected places,
//! binaries), where a path given by the model really lands, and the "did you mean"
//! list for a missing file.

use hermes_runtime::access::AccessPolicy;
use hermes_runtime::protected_paths;
use hermes_runtime::ToolContext;
use std::cell::RefCell;
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use crate::file_access::{is_device_path, normalize, under_device_roots};

/// The directory relative paths start from: the task's terminal directory once its
/// shell has one (after `cd sub`, `x` means `sub/x`), else the working directory.
pub fn base_dir(ctx: &ToolContext) -> PathBuf {
    hermes_environments::env::local_task_cwd(ctx.task_id())
        .unwrap_or_else(|| ctx.cwd().to_path_buf())
}

/// `path` as the caller meant it: `~` expanded, relative paths under [`base_dir`],
/// dots folded (symlinks are not followed here).
pub fn locate(ctx: &ToolContext, path: &str) -> PathBuf {
    let relative = !(path.starts_with('/') || path == "~" || path.starts_with("~/"));
    if relative {
        normalize(&base_dir(ctx).join(path))
    } else {
        normalize(&ctx.resolve_path(path))
    }
}

/// Where a write to `shown` lands (every symlink followed, a dangling one to where it
/// points, so the link itself is never replaced), or why no tool may write there:
/// devices and kernel files, and what the access policy refuses (protected places,
/// outside the writable roots unless a person approves, outside
/// `HERMES_WRITE_SAFE_ROOT`). An approval widens `access` for this call. `verb` starts
/// the refusal ("Write", "Patch", "Delete").
pub fn write_target(
    ctx: &ToolContext,
    access: &RefCell<Arc<AccessPolicy>>,
    shown: &str,
    verb: &str,
) -> Result<PathBuf, String> {
    let target = protected_paths::resolve(&locate(ctx, shown));
    if is_device_path(&target) {
        return Err(format!(
            "{verb} denied: '{shown}' is a device or kernel file."
        ));
    }
    let tool = if verb == "Write" {
        "write_file"
    } else {
        "patch"
    };
    let widened =
        crate::file_access::grant_outside_roots(ctx, &access.borrow(), &target, tool, verb, shown)?;
    if let Some(widened) = widened {
        *access.borrow_mut() = Arc::new(widened);
    }
    Ok(target)
}

/// [`write_target`] for a path named inside a V4A patch (`*** Add/Update/Delete File:`,
/// `*** Move to:`). Patch text is the easiest place to smuggle a path, so beyond the
/// write rules a `..` component is refused, and a relative path must stay inside the
/// working directory after symlinks are followed.
pub fn patch_target(
    ctx: &ToolContext,
    access: &RefCell<Arc<AccessPolicy>>,
    shown: &str,
    verb: &str,
) -> Result<PathBuf, String> {
    if Path::new(shown)
        .components()
        .any(|c| c == Component::ParentDir)
    {
        return Err(format!(
            "{verb} denied: '{shown}' in the patch contains a `..` component. Name files in patch headers by a path \
             inside the working directory, or by an absolute path."
        ));
    }
    let target = write_target(ctx, access, shown, verb)?;
    let relative = !(shown.starts_with('/') || shown.starts_with('~'));
    if relative {
        let base = protected_paths::resolve(&base_dir(ctx));
        if !target.starts_with(&base) {
            return Err(format!(
                "{verb} denied: '{shown}' leads outside the working directory {} (through a symlink, to {}).",
                base.display(),
                target.display()
            ));
        }
    }
    Ok(target)
}

/// Why a file could not be opened for reading as a plain file.
#[derive(Debug)]
pub enum OpenError {
    NotFound,
    Directory,
    /// A device, FIFO, socket, or a kernel file (procfs, sysfs and the like).
    NotRegular(&'static str),
    Io(std::io::Error),
}

/// Opens `path` for reading only if it is a regular file on an ordinary filesystem,
/// without ever blocking and without opening anything else: the path is first opened
/// as a bare handle (`O_PATH`: no device is opened, no FIFO waited on, every symlink
/// followed once), the checks are made on what that handle names and its real path
/// as the kernel reports it, and the file is then opened for reading through the
/// handle. A path swapped between the check and the read cannot change what is read.
pub fn open_regular(path: &Path) -> Result<(File, std::fs::Metadata), OpenError> {
    open_regular_resolved(path).map(|(file, meta, _)| (file, meta))
}

/// A file met by a walk that follows no symlink, opened for reading with the promise
/// of [`open_regular`] (nothing but a regular file on an ordinary filesystem is
/// opened, and nothing blocks) in fewer system calls: the path is where the walk found
/// it below a real root, so the kernel is not asked for it again, and the filesystem of
/// each device is asked once (`filesystems` keeps the answers, `true` for a kernel
/// one). `None` for anything else, or what cannot be opened (as ripgrep skips it).
pub fn open_walked(path: &Path, filesystems: &mut Vec<(u64, bool)>) -> Option<File> {
    use std::os::unix::fs::MetadataExt;
    let handle = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_NOFOLLOW)
        .open(path)
        .ok()?;
    let meta = handle.metadata().ok()?;
    if !meta.is_file() {
        return None;
    }
    let kernel = match filesystems.iter().find(|(dev, _)| *dev == meta.dev()) {
        Some(&(_, kernel)) => kernel,
        None => {
            let kernel = on_kernel_filesystem(&handle);
            filesystems.push((meta.dev(), kernel));
            kernel
        }
    };
    if kernel {
        return None;
    }
    match fd_table::reopen_for_reading(&handle) {
        Ok(file) => Some(file),
        // No procfs to reopen through: the slower open by name.
        Err(_) => open_regular(path).ok().map(|(file, _)| file),
    }
}

/// [`open_regular`], with the real path of the file opened (every symlink followed).
pub fn open_regular_resolved(path: &Path) -> Result<(File, std::fs::Metadata, PathBuf), OpenError> {
    probe_regular(path)?.open()
}

/// A regular file on an ordinary filesystem, checked through an `O_PATH` handle and
/// not opened for reading yet: what a read would find, with nothing read.
pub struct Probed {
    pub meta: std::fs::Metadata,
    /// The real path the kernel reports for it (every symlink followed).
    pub real: PathBuf,
    handle: File,
    /// Already open for reading (resolved by name where no procfs answers).
    readable: bool,
}

impl Probed {
    /// Opens for reading what was checked, through the handle.
    pub fn open(self) -> Result<(File, std::fs::Metadata, PathBuf), OpenError> {
        let file = if self.readable {
            self.handle
        } else {
            fd_table::reopen_for_reading(&self.handle).map_err(OpenError::Io)?
        };
        Ok((file, self.meta, self.real))
    }
}

/// The checks of [`open_regular`] without opening the file for reading.
pub fn probe_regular(path: &Path) -> Result<Probed, OpenError> {
    let handle = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH)
        .open(path)
    {
        Ok(handle) => handle,
        Err(_) if is_device_path(path) => {
            return Err(OpenError::NotRegular("a device or kernel file"))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(OpenError::NotFound),
        Err(e) => return Err(OpenError::Io(e)),
    };
    let Some(real) = fd_table::real_path(&handle) else {
        // No procfs to ask: resolve by name instead.
        let (file, meta, real) = open_regular_by_name(path)?;
        return Ok(Probed {
            meta,
            real,
            handle: file,
            readable: true,
        });
    };
    if under_device_roots(&real) {
        return Err(OpenError::NotRegular("a device or kernel file"));
    }
    let meta = plain_file(&handle)?;
    Ok(Probed {
        meta,
        real,
        handle,
        readable: false,
    })
}

/// What `/proc/self/fd` says about this process's descriptors, asked through that
/// directory opened once: each question then walks one name, not four.
mod fd_table {
    use std::ffi::OsString;
    use std::fs::File;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::ffi::OsStringExt;
    use std::os::unix::fs::OpenOptionsExt;
    use std::path::PathBuf;
    use std::sync::OnceLock;

    fn directory() -> Option<&'static OwnedFd> {
        static DIRECTORY: OnceLock<Option<OwnedFd>> = OnceLock::new();
        DIRECTORY
            .get_or_init(|| {
                std::fs::OpenOptions::new()
                    .read(true)
                    .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
                    .open("/proc/self/fd")
                    .ok()
                    .map(OwnedFd::from)
            })
            .as_ref()
    }

    /// The descriptor's number as a NUL-terminated name in that directory.
    fn entry_name(fd: &impl AsRawFd) -> [u8; 12] {
        let mut name = [0u8; 12];
        let digits = fd.as_raw_fd().to_string();
        name[..digits.len()].copy_from_slice(digits.as_bytes());
        name
    }

    /// The path the kernel gives for what `fd` is open on (every symlink followed).
    pub fn real_path(fd: &impl AsRawFd) -> Option<PathBuf> {
        let directory = directory()?;
        let name = entry_name(fd);
        let mut buffer = vec![0u8; 256];
        loop {
            // SAFETY: a valid directory descriptor, a NUL-terminated name and a buffer
            // of the length passed.
            let n = unsafe {
                libc::readlinkat(
                    directory.as_raw_fd(),
                    name.as_ptr().cast(),
                    buffer.as_mut_ptr().cast(),
                    buffer.len(),
                )
            };
            if n < 0 {
                return None;
            }
            let n = n as usize;
            if n < buffer.len() {
                buffer.truncate(n);
                return Some(PathBuf::from(OsString::from_vec(buffer)));
            }
            buffer.resize(buffer.len() * 4, 0);
        }
    }

    /// Opens for reading what the `O_PATH` handle names, without walking its path
    /// again: never blocking on a FIFO, never taking a terminal.
    pub fn reopen_for_reading(handle: &File) -> std::io::Result<File> {
        let Some(directory) = directory() else {
            return Err(std::io::Error::other("/proc/self/fd cannot be opened"));
        };
        let name = entry_name(handle);
        let flags = libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC;
        // SAFETY: a valid directory descriptor and a NUL-terminated name.
        let fd = unsafe { libc::openat(directory.as_raw_fd(), name.as_ptr().cast(), flags) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `openat` has just returned this descriptor, owned by nobody else.
        Ok(File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
    }
}

/// [`open_regular`] where `/proc/self/fd` cannot say what a descriptor names (no
/// procfs): the path is resolved by name first, the open does not follow a symlink
/// put there since and does not wait for a FIFO's writer, and the checks are made
/// on the opened descriptor.
fn open_regular_by_name(path: &Path) -> Result<(File, std::fs::Metadata, PathBuf), OpenError> {
    if is_device_path(path) {
        return Err(OpenError::NotRegular("a device or kernel file"));
    }
    let real = match std::fs::canonicalize(path) {
        Ok(real) => real,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(OpenError::NotFound),
        Err(e) => return Err(OpenError::Io(e)),
    };
    if is_device_path(&real) {
        return Err(OpenError::NotRegular("a device or kernel file"));
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_NOCTTY)
        .open(&real)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => {
                OpenError::NotRegular("a path that was swapped for a symlink while it was opened")
            }
            _ if e.kind() == std::io::ErrorKind::NotFound => OpenError::NotFound,
            _ => OpenError::Io(e),
        })?;
    let meta = plain_file(&file)?;
    Ok((file, meta, real))
}

/// The metadata of a regular file on an ordinary filesystem, else why it is not one.
fn plain_file(file: &File) -> Result<std::fs::Metadata, OpenError> {
    let meta = file.metadata().map_err(OpenError::Io)?;
    if meta.is_dir() {
        return Err(OpenError::Directory);
    }
    if !meta.is_file() {
        return Err(OpenError::NotRegular(
            "not a regular file (a device, socket or pipe)",
        ));
    }
    if on_kernel_filesystem(file) {
        return Err(OpenError::NotRegular(
            "a kernel file (procfs, sysfs or the like)",
        ));
    }
    Ok(meta)
}

/// Whether the descriptor (a bare `O_PATH` handle will do) lives on a filesystem the
/// kernel synthesises (its "files" expose memory, block, or never end).
#[cfg(target_os = "linux")]
fn on_kernel_filesystem(file: &File) -> bool {
    const KERNEL_FS: &[u64] = &[
        0x9fa0,      // proc
        0x6265_6572, // sysfs
        0x6462_6720, // debugfs
        0x7472_6163, // tracefs
        0x7363_6673, // securityfs
        0x0027_e0eb, // cgroup
        0x6367_7270, // cgroup2
        0xcafe_4a11, // bpf
        0x6265_6570, // configfs
        0x6165_676c, // pstore
        0xde5e_81e4, // efivarfs
        0x0000_1cd1, // devpts
    ];
    // SAFETY: statfs is plain data, valid when zeroed.
    let mut stat: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: a valid descriptor and a zeroed out-buffer of the right type.
    let rc = unsafe { libc::fstatfs(std::os::fd::AsRawFd::as_raw_fd(file), &mut stat) };
    rc == 0 && KERNEL_FS.contains(&((stat.f_type as u64) & 0xffff_ffff))
}

#[cfg(not(target_os = "linux"))]
fn on_kernel_filesystem(_file: &File) -> bool {
    false
}

/// Bytes sniffed for NUL to call a file binary.
pub const SNIFF_BYTES: usize = 8192;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum BinaryKind {
    Image,
    Other,
}

const IMAGE_EXTENSIONS: &[&str] = &[
    "png", "jpg", "jpeg", "gif", "bmp", "ico", "webp", "tif", "tiff", "psd", "heic", "heif",
    "avif", "icns",
];

const BINARY_EXTENSIONS: &[&str] = &[
    // archives and packages
    "zip",
    "tar",
    "gz",
    "tgz",
    "bz2",
    "xz",
    "7z",
    "rar",
    "zst",
    "lz4",
    "jar",
    "war",
    "whl",
    "deb",
    "rpm",
    "apk",
    "dmg",
    "iso",
    "img",
    "msi",
    "cab",
    // executables, objects, bytecode
    "exe",
    "dll",
    "so",
    "dylib",
    "a",
    "o",
    "obj",
    "lib",
    "bin",
    "class",
    "pyc",
    "pyo",
    "wasm",
    "elf",
    // documents that are not text
    "pdf",
    "doc",
    "xls",
    "ppt",
    "pptx",
    "odt",
    "ods",
    "odp",
    // media
    "mp3",
    "mp4",
    "m4a",
    "m4v",
    "wav",
    "ogg",
    "oga",
    "flac",
    "aac",
    "avi",
    "mov",
    "mkv",
    "webm",
    "wmv",
    "flv",
    "opus",
    // fonts
    "ttf",
    "otf",
    "woff",
    "woff2",
    "eot",
    // data blobs
    "sqlite",
    "sqlite3",
    "db",
    "parquet",
    "npy",
    "npz",
    "pkl",
    "pickle",
    "h5",
    "hdf5",
    "pt",
    "pth",
    "onnx",
    "safetensors",
    "gguf",
    "dat",
];

/// Binary by its extension alone.
pub fn binary_extension(path: &Path) -> Option<BinaryKind> {
    let ext = path.extension()?.to_str()?.to_ascii_lowercase();
    if IMAGE_EXTENSIONS.contains(&ext.as_str()) {
        Some(BinaryKind::Image)
    } else if BINARY_EXTENSIONS.contains(&ext.as_str()) {
        Some(BinaryKind::Other)
    } else {
        None
    }
}

/// The first [`SNIFF_BYTES`] of a file, read to tell text from binary and then read
/// again from memory rather than from the file.
#[derive(Default)]
pub struct Head {
    bytes: Vec<u8>,
    /// The file ended within them.
    whole: bool,
}

impl Head {
    /// Reads the head of a file whose size was `len` when it was opened. A file of
    /// at most [`SNIFF_BYTES`] is read as that size said: once `len` bytes have come,
    /// no further read asks whether more follow. A size of 0 says nothing (some
    /// filesystems give it to files with content), so such a file is read to its end.
    pub fn read(file: &mut File, len: u64) -> std::io::Result<Head> {
        let sized = len > 0 && len <= SNIFF_BYTES as u64;
        let want = if sized { len as usize } else { SNIFF_BYTES };
        let mut bytes = Vec::with_capacity(want);
        file.by_ref().take(want as u64).read_to_end(&mut bytes)?;
        let whole = sized || bytes.len() < want;
        Ok(Head { bytes, whole })
    }

    /// Binary by content: a NUL byte in the head.
    pub fn has_nul(&self) -> bool {
        has_nul(&self.bytes)
    }

    /// The whole file from its start: the head, then whatever `file` has after it.
    pub fn then_rest(self, file: File) -> impl Read {
        let rest = if self.whole { 0 } else { u64::MAX };
        std::io::Cursor::new(self.bytes).chain(file.take(rest))
    }
}

pub fn has_nul(bytes: &[u8]) -> bool {
    bytes[..bytes.len().min(SNIFF_BYTES)].contains(&0)
}

/// Names in the missing file's directory that look like what was meant, as paths
/// written the way the caller wrote theirs. At most 5, closest first.
pub fn similar_files(resolved: &Path, given: &str) -> Vec<String> {
    let Some(dir) = resolved.parent() else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let names = entries
        .flatten()
        .filter_map(|entry| entry.file_name().into_string().ok());
    similar_names(resolved, given, names)
}

/// [`similar_files`] among `names`, the entries of the missing file's directory.
pub fn similar_names(
    resolved: &Path,
    given: &str,
    names: impl IntoIterator<Item = String>,
) -> Vec<String> {
    let Some(wanted) = resolved.file_name().and_then(|n| n.to_str()) else {
        return Vec::new();
    };
    let wanted_lower = wanted.to_lowercase();
    let wanted_stem = stem(&wanted_lower);
    let mut scored: Vec<(usize, String)> = Vec::new();
    for name in names {
        let lower = name.to_lowercase();
        let distance = strsim::levenshtein(&wanted_lower, &lower);
        let budget = (wanted_lower.chars().count().max(lower.chars().count()) / 3).max(2);
        let related = distance <= budget
            || (wanted_stem.len() >= 3 && stem(&lower) == wanted_stem)
            || (wanted_lower.len() >= 4 && lower.contains(&wanted_lower))
            || (lower.len() >= 4 && wanted_lower.contains(&lower));
        if related {
            scored.push((distance, name));
        }
    }
    scored.sort();
    let given_path = Path::new(given);
    scored
        .into_iter()
        .take(5)
        .map(|(_, name)| {
            if given.contains('/') {
                given_path
                    .with_file_name(&name)
                    .to_string_lossy()
                    .into_owned()
            } else {
                name
            }
        })
        .collect()
}

fn stem(name: &str) -> &str {
    match name.rfind('.') {
        Some(0) | None => name,
        Some(dot) => &name[..dot],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices() {
        assert!(is_device_path(Path::new("/dev/zero")));
        assert!(is_device_path(Path::new("/proc/self/mem")));
        assert!(is_device_path(Path::new("/proc/kcore")));
        assert!(is_device_path(Path::new("/proc/self/maps")));
        assert!(is_device_path(Path::new("/sys/kernel/notes")));
        assert!(!is_device_path(Path::new("/dev/shm/x")));
        assert!(!is_device_path(Path::new("/etc/hostname")));
    }
}
