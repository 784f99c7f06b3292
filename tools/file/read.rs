//! Reading one page of a text file as `N|line` rows.
//!
//! The file is read in large blocks. Outside the page nothing is copied: newlines
//! before it are found with `memchr` and those after it are only counted (SIMD), so
//! the first page of a huge file costs about what `wc -l` does. Inside the page a
//! line keeps at most the bytes it can show, so one enormous line never becomes an
//! enormous allocation.

use std::borrow::Cow;
use std::fmt::Write;
use std::io::Read;

/// Longest line shown before it is clipped.
pub const MAX_LINE_CHARS: usize = 2000;
/// Marker appended to a clipped line.
pub const LINE_CLIP_MARKER: &str = "... [truncated]";

/// Bytes of a line kept for display: enough for [`MAX_LINE_CHARS`] characters of
/// four bytes each, plus one more so a longer line is known to be one.
const KEPT_LINE_BYTES: usize = MAX_LINE_CHARS * 4 + 4;
const BLOCK: usize = 1 << 20;
/// The first block: most files a model reads fit in it, and a small read should not
/// pay for zeroing a megabyte. A source that fills it gets full-size blocks.
const FIRST_BLOCK: usize = 16 * 1024;
const BOM: &[u8] = "\u{feff}".as_bytes();

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

/// Rows of the page as they are collected.
struct Rows {
    page: Page,
    limit: u64,
    max_chars: usize,
    chars: usize,
    shown: u64,
    /// The current line's kept bytes, and whether bytes past them were dropped.
    line: Vec<u8>,
    line_overflow: bool,
}

impl Rows {
    fn full(&self) -> bool {
        self.shown >= self.limit || self.page.char_cut
    }

    fn push_bytes(&mut self, bytes: &[u8]) {
        let room = KEPT_LINE_BYTES.saturating_sub(self.line.len());
        if bytes.len() > room {
            self.line_overflow = true;
        }
        self.line.extend_from_slice(&bytes[..bytes.len().min(room)]);
    }

    /// Ends line `number`: turns its bytes into a row, within the character budget,
    /// written straight into the page.
    fn finish_line(&mut self, number: u64) {
        let overflow = std::mem::replace(&mut self.line_overflow, false);
        let mut shown_bytes: &[u8] = &self.line;
        if !overflow {
            shown_bytes = shown_bytes.strip_suffix(b"\r").unwrap_or(shown_bytes);
        }
        if number == 1 {
            // The byte-order mark is an encoding detail, not text.
            shown_bytes = shown_bytes.strip_prefix(BOM).unwrap_or(shown_bytes);
        }
        let text = decode(shown_bytes, overflow, &mut self.page.lossy);
        let (text, text_chars, clipped) = match text.char_indices().nth(MAX_LINE_CHARS) {
            Some((cut, _)) => (
                &text[..cut],
                MAX_LINE_CHARS + LINE_CLIP_MARKER.chars().count(),
                true,
            ),
            None => (&text[..], text.chars().count(), false),
        };
        let row_chars = decimal_digits(number) + 1 + text_chars + usize::from(self.shown > 0);
        if self.shown > 0 && self.chars + row_chars > self.max_chars {
            self.page.char_cut = true;
            return;
        }
        self.page.clipped |= clipped;
        let content = &mut self.page.content;
        if self.shown > 0 {
            content.push('\n');
        } else {
            self.page.first = number;
        }
        let _ = write!(content, "{number}|");
        content.push_str(text);
        if clipped {
            content.push_str(LINE_CLIP_MARKER);
        }
        self.chars += row_chars;
        self.shown += 1;
        self.page.last = number;
        // Keep the allocation for the next line.
        self.line.clear();
    }
}

fn decimal_digits(mut n: u64) -> usize {
    let mut digits = 1;
    while n >= 10 {
        n /= 10;
        digits += 1;
    }
    digits
}

/// UTF-8 text of a line; when the line was cut (`cut`), a character split by the cut
/// is dropped rather than counted as invalid.
fn decode<'a>(bytes: &'a [u8], cut: bool, lossy: &mut bool) -> Cow<'a, str> {
    match std::str::from_utf8(bytes) {
        Ok(text) => Cow::Borrowed(text),
        Err(e) if cut && e.error_len().is_none() => {
            String::from_utf8_lossy(&bytes[..e.valid_up_to()])
        }
        Err(_) => {
            *lossy = true;
            String::from_utf8_lossy(bytes)
        }
    }
}

/// Streams `source`, keeping only lines `offset..offset+limit`, and stops adding rows
/// once `max_chars` would be passed (always at a line boundary). Every line is still
/// counted for `total_lines`. A BOM at the start is not shown.
pub fn read_page(
    mut source: impl Read,
    offset: u64,
    limit: u64,
    max_chars: usize,
) -> std::io::Result<Page> {
    let offset = offset.max(1);
    let mut rows = Rows {
        page: Page {
            content: String::new(),
            total_lines: 0,
            first: 0,
            last: 0,
            char_cut: false,
            lossy: false,
            clipped: false,
        },
        limit,
        max_chars,
        chars: 0,
        shown: 0,
        line: Vec::new(),
        line_overflow: false,
    };
    let mut block = vec![0u8; FIRST_BLOCK];
    // Number of the line the next byte belongs to; newlines seen so far.
    let mut number: u64 = 1;
    let mut last_byte = None;
    loop {
        let n = match source.read(&mut block) {
            Ok(0) => break,
            Ok(n) if n == block.len() && n < BLOCK => {
                block.resize(BLOCK, 0);
                n
            }
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        last_byte = Some(block[n - 1]);
        let mut rest = &block[..n];
        while !rest.is_empty() {
            if rows.full() {
                number += bytecount::count(rest, b'\n') as u64;
                break;
            }
            if number < offset {
                let wanted = (offset - number) as usize;
                match memchr::memchr_iter(b'\n', rest).nth(wanted - 1) {
                    Some(at) => {
                        number += wanted as u64;
                        rest = &rest[at + 1..];
                    }
                    None => {
                        number += bytecount::count(rest, b'\n') as u64;
                        break;
                    }
                }
                continue;
            }
            match memchr::memchr(b'\n', rest) {
                Some(at) => {
                    rows.push_bytes(&rest[..at]);
                    rows.finish_line(number);
                    number += 1;
                    rest = &rest[at + 1..];
                }
                None => {
                    rows.push_bytes(rest);
                    break;
                }
            }
        }
    }
    let newlines = number - 1;
    let unterminated = last_byte.is_some_and(|b| b != b'\n');
    if unterminated && number >= offset && !rows.full() {
        rows.finish_line(number);
    }
    rows.page.total_lines = newlines + u64::from(unterminated);
    Ok(rows.page)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(text: &[u8], offset: u64, limit: u64) -> Page {
        read_page(text, offset, limit, 100_000).unwrap()
    }

    #[test]
    fn pages_and_counts() {
        let p = page(b"a\nb\nc\n", 1, 2);
        assert_eq!(
            (p.content.as_str(), p.total_lines, p.first, p.last),
            ("1|a\n2|b", 3, 1, 2)
        );
        let p = page(b"a\nb\nc", 3, 5);
        assert_eq!((p.content.as_str(), p.total_lines), ("3|c", 3));
        let p = page(b"a\r\nb\r\n", 2, 5);
        assert_eq!(p.content, "2|b");
        let p = page(b"", 1, 5);
        assert_eq!((p.total_lines, p.last), (0, 0));
        let p = page(b"x\n", 5, 5);
        assert_eq!((p.total_lines, p.last), (1, 0));
    }

    #[test]
    fn bom_is_hidden_and_long_lines_clipped() {
        let p = page("\u{feff}hi\nthere\n".as_bytes(), 1, 5);
        assert_eq!(p.content, "1|hi\n2|there");
        let long = "é".repeat(MAX_LINE_CHARS * 3);
        let p = page(format!("{long}\nnext\n").as_bytes(), 1, 5);
        assert!(p.clipped && !p.lossy);
        assert!(p.content.ends_with(&format!("{LINE_CLIP_MARKER}\n2|next")));
    }

    #[test]
    fn counts_across_blocks() {
        let text = "line\n".repeat(BLOCK / 3);
        let p = page(text.as_bytes(), BLOCK as u64 / 4, 2);
        assert_eq!(p.total_lines, (BLOCK / 3) as u64);
        assert_eq!(p.first, BLOCK as u64 / 4);
        assert_eq!(p.last, BLOCK as u64 / 4 + 1);
    }
}
