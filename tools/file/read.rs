//! Reading one page of a text file as `N|line` rows.

use std::io::{BufRead, BufReader};
use std::path::Path;

/// Longest line shown before it is clipped.
pub const MAX_LINE_CHARS: usize = 2000;
/// Marker appended to a clipped line.
pub const LINE_CLIP_MARKER: &str = "... [truncated]";

pub struct Page {
    /// `N|line` rows joined by `\n`.
    pub content: String,
    pub total_lines: u64,
    /// Number of the first and last line shown (0 when none).
    pub first: u64,
    pub last: u64,
    /// The page stopped because of the character budget, not the line limit.
    pub char_cut: bool,
    /// Some shown line was not valid UTF-8.
    pub lossy: bool,
    /// Some shown line was clipped.
    pub clipped: bool,
}

/// Streams the file, keeping only lines `offset..offset+limit`, and stops adding rows
/// once `max_chars` would be passed (always at a line boundary). Every line is still
/// counted for `total_lines`.
pub fn read_page(path: &Path, offset: u64, limit: u64, max_chars: usize) -> std::io::Result<Page> {
    let file = std::fs::File::open(path)?;
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    let mut page = Page {
        content: String::new(),
        total_lines: 0,
        first: 0,
        last: 0,
        char_cut: false,
        lossy: false,
        clipped: false,
    };
    let mut chars = 0usize;
    let mut shown = 0u64;
    let mut buf = Vec::new();
    loop {
        buf.clear();
        if reader.read_until(b'\n', &mut buf)? == 0 {
            break;
        }
        page.total_lines += 1;
        let number = page.total_lines;
        if number < offset || shown >= limit || page.char_cut {
            continue;
        }
        let mut line = &buf[..];
        if let Some(rest) = line.strip_suffix(b"\n") {
            line = rest;
        }
        if let Some(rest) = line.strip_suffix(b"\r") {
            line = rest;
        }
        let text = match std::str::from_utf8(line) {
            Ok(text) => std::borrow::Cow::Borrowed(text),
            Err(_) => {
                page.lossy = true;
                String::from_utf8_lossy(line)
            }
        };
        let text = match text.char_indices().nth(MAX_LINE_CHARS) {
            Some((cut, _)) => {
                page.clipped = true;
                format!("{}{LINE_CLIP_MARKER}", &text[..cut])
            }
            None => text.into_owned(),
        };
        let row = format!("{number}|{text}");
        let row_chars = row.chars().count() + usize::from(shown > 0);
        if shown > 0 && chars + row_chars > max_chars {
            page.char_cut = true;
            continue;
        }
        if shown > 0 {
            page.content.push('\n');
        } else {
            page.first = number;
        }
        page.content.push_str(&row);
        chars += row_chars;
        shown += 1;
        page.last = number;
    }
    Ok(page)
}
