//! Long results: a head and tail window for the model, the whole text stored under
//! `$HERMES_HOME/cache/web/` with a footer naming the file and a ready `read_file`
//! call for the omitted middle.

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// Largest text stored; beyond it the stored copy is cut with a note.
pub const MAX_STORED_CHARS: usize = 2_000_000;

/// `$HERMES_HOME/cache/web`.
pub fn store_dir(hermes_home: &Path) -> PathBuf {
    hermes_home.join("cache").join("web")
}

fn char_prefix(text: &str, chars: usize) -> &str {
    text.char_indices()
        .nth(chars)
        .map_or(text, |(i, _)| &text[..i])
}

fn char_suffix(text: &str, chars: usize) -> &str {
    let total = text.chars().count();
    if chars >= total {
        return text;
    }
    text.char_indices()
        .nth(total - chars)
        .map_or("", |(i, _)| &text[i..])
}

/// Writes `content` to `dir/<host>-<digest>.md`; `None` when it cannot be written.
/// The text goes to a new file that is then renamed into place, and a `dir` that is a
/// symlink is refused, so a link planted under that name (the names are predictable)
/// never makes the write land in another file.
pub fn store_full_text(dir: &Path, url: &str, content: &str) -> Option<PathBuf> {
    std::fs::create_dir_all(dir).ok()?;
    if !std::fs::symlink_metadata(dir).ok()?.is_dir() {
        return None;
    }
    let host = url::Url::parse(url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_string))
        .unwrap_or_else(|| "page".into());
    let slug: String = host
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '-'
            }
        })
        .take(60)
        .collect();
    let slug = slug.trim_matches('-');
    let slug = if slug.is_empty() { "page" } else { slug };
    let digest = Sha256::digest(url.as_bytes());
    let hex: String = digest.iter().take(5).map(|b| format!("{b:02x}")).collect();
    let path = dir.join(format!("{slug}-{hex}.md"));
    let total = content.chars().count();
    let stored = if total > MAX_STORED_CHARS {
        format!(
            "{}\n\n[... stored copy truncated at {MAX_STORED_CHARS} chars of {total}; extract a more specific URL for the rest ...]",
            char_prefix(content, MAX_STORED_CHARS)
        )
    } else {
        content.to_string()
    };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let temporary = dir.join(format!(".{slug}-{hex}.{}.{nanos}.tmp", std::process::id()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&temporary)
        .and_then(|mut file| std::io::Write::write_all(&mut file, stored.as_bytes()))
        .and_then(|_| std::fs::rename(&temporary, &path));
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
        return None;
    }
    Some(path)
}

/// `(text for the model, whether it was cut)`. Text within `char_limit` comes back
/// whole; longer text keeps about three quarters of the budget from the head and a
/// quarter from the tail, cut at line ends where that loses little, then a footer.
pub fn truncate_and_store(
    content: &str,
    url: &str,
    char_limit: usize,
    dir: &Path,
) -> (String, bool) {
    let total = content.chars().count();
    if total <= char_limit {
        return (content.to_string(), false);
    }
    let head_budget = char_limit * 3 / 4;
    let tail_budget = char_limit - head_budget;
    let mut head = char_prefix(content, head_budget);
    if let Some(nl) = head.rfind('\n') {
        if head[..nl].chars().count() > head_budget / 2 {
            head = &head[..nl];
        }
    }
    let mut tail = char_suffix(content, tail_budget);
    if let Some(nl) = tail.find('\n') {
        if tail[..nl].chars().count() < tail_budget / 2 {
            tail = &tail[nl + 1..];
        }
    }
    let (head_chars, tail_chars) = (head.chars().count(), tail.chars().count());
    let mut footer = vec![
        String::new(),
        format!("{} [TRUNCATED] {}", "─".repeat(8), "─".repeat(8)),
        format!(
            "Showing {head_chars} chars (head) + {tail_chars} chars (tail) of {total} total clean characters."
        ),
    ];
    match store_full_text(dir, url, content) {
        Some(path) => {
            let middle_line = head.matches('\n').count() + 2;
            footer.push(format!("Full text saved to: {}", path.display()));
            footer.push(format!(
                "To read the omitted middle: read_file path=\"{}\" offset={middle_line} limit=200  \
                 (the file is the complete page; raise/lower offset to page through it).",
                path.display()
            ));
        }
        None => footer.push(
            "Full text could not be stored; re-run web_extract on a more specific URL or use browser_navigate for the complete page."
                .into(),
        ),
    }
    footer.push("─".repeat(29));
    (
        format!(
            "{head}\n\n[... middle omitted — see footer ...]\n\n{tail}\n{}",
            footer.join("\n")
        ),
        true,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_is_whole_and_long_text_is_stored() {
        let dir = tempfile::tempdir().unwrap();
        let (same, cut) = truncate_and_store("short", "https://a.example/", 2000, dir.path());
        assert_eq!((same.as_str(), cut), ("short", false));

        let page: String = (0..3000).map(|i| format!("line {i} ünïcode\n")).collect();
        let (text, cut) = truncate_and_store(&page, "https://docs.example/page", 4000, dir.path());
        assert!(cut);
        assert!(text.starts_with("line 0 ünïcode\n"));
        assert!(text.contains("line 2999 ünïcode"));
        assert!(!text.contains("\nline 1500 "));
        let stored = text
            .lines()
            .find_map(|l| l.strip_prefix("Full text saved to: "))
            .unwrap();
        assert!(stored.starts_with(&dir.path().display().to_string()));
        assert!(stored.contains("docs.example-"));
        assert_eq!(std::fs::read_to_string(stored).unwrap(), page);

        // A link planted at the stored name is replaced, its target left alone.
        let victim = dir.path().join("victim.txt");
        std::fs::write(&victim, "keep").unwrap();
        std::fs::remove_file(stored).unwrap();
        std::os::unix::fs::symlink(&victim, stored).unwrap();
        truncate_and_store(&page, "https://docs.example/page", 4000, dir.path());
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        assert_eq!(std::fs::read_to_string(stored).unwrap(), page);
        // The offset of the read_file call is the first line the head left out.
        let offset: usize = text
            .split("offset=")
            .nth(1)
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let last_head_line = text
            .lines()
            .take_while(|l| l.starts_with("line "))
            .last()
            .unwrap();
        assert_eq!(page.lines().nth(offset - 2).unwrap(), last_head_line);
    }
}
