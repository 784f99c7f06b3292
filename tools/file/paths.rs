//! Which paths the file tools refuse (devices, kernel files, binaries) and the
//! "did you mean" list for a missing file.

use std::io::Read;
use std::path::{Component, Path, PathBuf};

/// Bytes sniffed for NUL to call a file binary.
pub const SNIFF_BYTES: usize = 8192;

/// Files that stream forever, block, or expose memory: refused whatever their type.
pub fn is_device_path(path: &Path) -> bool {
    let resolved = std::fs::canonicalize(path).unwrap_or_else(|_| normalize(path));
    let text = resolved.to_string_lossy();
    if text.starts_with("/dev/") && !text.starts_with("/dev/shm/") {
        return true;
    }
    if let Some(rest) = text.strip_prefix("/proc/") {
        let parts: Vec<&str> = rest.split('/').collect();
        let kernel = ["kcore", "kmsg", "kpagecount", "kpageflags", "sysrq-trigger"];
        if parts.len() == 1 && kernel.contains(&parts[0]) {
            return true;
        }
        if parts.len() >= 2 {
            let sensitive = ["mem", "pagemap", "fd", "environ", "clear_refs", "map_files"];
            if parts[1..].iter().any(|p| sensitive.contains(p)) {
                return true;
            }
        }
    }
    false
}

/// `a/./b/../c` -> `a/c`, without touching the disk.
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum BinaryKind {
    Image,
    Other,
}

const IMAGE_EXTENSIONS: &[&str] = &[
    "png", "jpg", "jpeg", "gif", "bmp", "ico", "webp", "tif", "tiff", "psd", "heic", "heif", "avif", "icns",
];

const BINARY_EXTENSIONS: &[&str] = &[
    // archives and packages
    "zip", "tar", "gz", "tgz", "bz2", "xz", "7z", "rar", "zst", "lz4", "jar", "war", "whl", "deb", "rpm",
    "apk", "dmg", "iso", "img", "msi", "cab",
    // executables, objects, bytecode
    "exe", "dll", "so", "dylib", "a", "o", "obj", "lib", "bin", "class", "pyc", "pyo", "wasm", "elf",
    // documents that are not text
    "pdf", "doc", "xls", "ppt", "pptx", "odt", "ods", "odp",
    // media
    "mp3", "mp4", "m4a", "m4v", "wav", "ogg", "oga", "flac", "aac", "avi", "mov", "mkv", "webm", "wmv",
    "flv", "opus",
    // fonts
    "ttf", "otf", "woff", "woff2", "eot",
    // data blobs
    "sqlite", "sqlite3", "db", "parquet", "npy", "npz", "pkl", "pickle", "h5", "hdf5", "pt", "pth",
    "onnx", "safetensors", "gguf", "dat",
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

/// Binary by content: a NUL byte in the first [`SNIFF_BYTES`].
pub fn sniff_binary(path: &Path) -> std::io::Result<bool> {
    let mut file = std::fs::File::open(path)?;
    let mut buf = vec![0u8; SNIFF_BYTES];
    let mut filled = 0;
    while filled < buf.len() {
        let n = file.read(&mut buf[filled..])?;
        if n == 0 {
            break;
        }
        filled += n;
    }
    Ok(has_nul(&buf[..filled]))
}

pub fn has_nul(bytes: &[u8]) -> bool {
    bytes[..bytes.len().min(SNIFF_BYTES)].contains(&0)
}

/// Names in the missing file's directory that look like what was meant, as paths
/// written the way the caller wrote theirs. At most 5, closest first.
pub fn similar_files(resolved: &Path, given: &str) -> Vec<String> {
    let Some(wanted) = resolved.file_name().and_then(|n| n.to_str()) else {
        return Vec::new();
    };
    let Some(dir) = resolved.parent() else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let wanted_lower = wanted.to_lowercase();
    let wanted_stem = stem(&wanted_lower);
    let mut scored: Vec<(usize, String)> = Vec::new();
    for entry in entries.flatten() {
        let Ok(name) = entry.file_name().into_string() else { continue };
        let lower = name.to_lowercase();
        let distance = levenshtein(&wanted_lower, &lower);
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
                given_path.with_file_name(&name).to_string_lossy().into_owned()
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

/// Edit distance in characters.
pub fn levenshtein(a: &str, b: &str) -> usize {
    let b_chars: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b_chars.len()).collect();
    let mut current = vec![0; b_chars.len() + 1];
    for (i, ca) in a.chars().enumerate() {
        current[0] = i + 1;
        for (j, cb) in b_chars.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != *cb);
            current[j + 1] = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        std::mem::swap(&mut previous, &mut current);
    }
    previous[b_chars.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances() {
        assert_eq!(levenshtein("kitten", "sitting"), 3);
        assert_eq!(levenshtein("", "abc"), 3);
        assert_eq!(levenshtein("same", "same"), 0);
    }

    #[test]
    fn devices() {
        assert!(is_device_path(Path::new("/dev/zero")));
        assert!(is_device_path(Path::new("/proc/self/mem")));
        assert!(is_device_path(Path::new("/proc/kcore")));
        assert!(!is_device_path(Path::new("/etc/hostname")));
    }
}
