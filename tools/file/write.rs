//! Writing whole files safely: parents created, temp file + rename, the original's
//! permissions, line endings and BOM kept.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

const BOM: &str = "\u{feff}";

/// How the existing file was written: kept when new text is written over it.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct Style {
    pub crlf: bool,
    pub bom: bool,
}

impl Style {
    /// CRLF when most line breaks of `bytes` are CRLF; BOM when it starts with one.
    pub fn detect(bytes: &[u8]) -> Style {
        let newlines = bytes.iter().filter(|b| **b == b'\n').count();
        let crlf = bytes.windows(2).filter(|w| w == b"\r\n").count();
        Style { crlf: newlines > 0 && crlf * 2 > newlines, bom: bytes.starts_with(BOM.as_bytes()) }
    }

    /// Text as the model sees it: BOM dropped, CRLF as LF.
    pub fn to_model(self, text: &str) -> String {
        let text = text.strip_prefix(BOM).unwrap_or(text);
        if self.crlf {
            text.replace("\r\n", "\n")
        } else {
            text.to_string()
        }
    }

    /// Text as it goes to disk: LF turned into CRLF (when the file used CRLF and the
    /// text brings none of its own), BOM put back.
    pub fn to_disk(self, text: &str) -> String {
        let mut out = String::with_capacity(text.len() + 16);
        if self.bom && !text.starts_with(BOM) {
            out.push_str(BOM);
        }
        if self.crlf && !text.contains("\r\n") {
            out.push_str(&text.replace('\n', "\r\n"));
        } else {
            out.push_str(text);
        }
        out
    }
}

/// Creates the missing ancestors of `path`; returns how many directories were made.
pub fn create_parents(path: &Path) -> std::io::Result<usize> {
    let Some(parent) = path.parent() else { return Ok(0) };
    let missing = parent.ancestors().take_while(|dir| !dir.as_os_str().is_empty() && !dir.exists()).count();
    if missing > 0 {
        std::fs::create_dir_all(parent)?;
    }
    Ok(missing)
}

/// Where a write to `path` lands: through a symlink to its target.
pub fn write_target(path: &Path) -> PathBuf {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()),
        _ => path.to_path_buf(),
    }
}

/// Replaces `path` with `data` in one step: a temp file in the same directory, synced,
/// given the original's permissions, renamed over. Nothing is left behind on failure.
pub fn atomic_write(path: &Path, data: &[u8]) -> std::io::Result<()> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let original = std::fs::metadata(path).ok();
    let mut attempt = 0;
    let (temp, mut file) = loop {
        let temp = dir.join(format!(
            ".{name}.hermes-tmp-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        match std::fs::OpenOptions::new().write(true).create_new(true).open(&temp) {
            Ok(file) => break (temp, file),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && attempt < 16 => attempt += 1,
            Err(e) => return Err(e),
        }
    };
    let result = (|| {
        file.write_all(data)?;
        file.sync_all()?;
        drop(file);
        if let Some(meta) = &original {
            std::fs::set_permissions(&temp, meta.permissions())?;
        }
        std::fs::rename(&temp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}

/// True when `content` looks like read_file's `N|line` display pasted back: at least
/// two lines, most non-empty lines carry the gutter, and its numbers count up by one.
pub fn looks_like_numbered_display(content: &str) -> bool {
    let lines: Vec<&str> = content.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.len() < 2 {
        return false;
    }
    let numbers: Vec<u64> = lines
        .iter()
        .filter_map(|line| {
            let trimmed = line.trim_start();
            let digits = trimmed.len() - trimmed.trim_start_matches(|c: char| c.is_ascii_digit()).len();
            if digits == 0 || !trimmed[digits..].starts_with('|') {
                return None;
            }
            trimmed[..digits].parse().ok()
        })
        .collect();
    if numbers.len() < 2 || numbers.len() * 2 <= lines.len() {
        return false;
    }
    let ascending = numbers.windows(2).filter(|w| w[1] == w[0] + 1).count();
    ascending * 2 >= numbers.len() - 1
}

/// True when `content` is read_file's "unchanged" stub rather than file text.
pub fn looks_like_dedup_stub(content: &str) -> bool {
    let trimmed = content.trim();
    if let Ok(serde_json::Value::Object(map)) = serde_json::from_str::<serde_json::Value>(trimmed) {
        return map.get("dedup") == Some(&serde_json::Value::Bool(true))
            || map.get("content_returned") == Some(&serde_json::Value::Bool(false));
    }
    trimmed.len() < 2000 && trimmed.contains("\"content_returned\"") && trimmed.contains("\"dedup\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbered_display() {
        assert!(looks_like_numbered_display("1|a\n2|b\n3|c"));
        assert!(looks_like_numbered_display("10|fn main() {\n11|}\n"));
        assert!(!looks_like_numbered_display("a|b\nc|d"));
        assert!(!looks_like_numbered_display("1|only one"));
        assert!(!looks_like_numbered_display("5|x\n1|y\n9|z"));
    }

    #[test]
    fn styles() {
        let style = Style::detect(b"a\r\nb\r\n");
        assert!(style.crlf && !style.bom);
        assert_eq!(style.to_disk("x\ny\n"), "x\r\ny\r\n");
        let bom = Style::detect("\u{feff}hi\n".as_bytes());
        assert!(bom.bom && !bom.crlf);
        assert_eq!(bom.to_disk("hi\n"), "\u{feff}hi\n");
        assert_eq!(bom.to_model("\u{feff}hi\n"), "hi\n");
    }
}
