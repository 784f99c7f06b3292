//! Matching that forgives runs of spaces and typographic characters inside lines,
//! and puts the file's own characters back into the parts of the replacement that
//! did not change.
//!
//! Both the file and `old_string` are brought to a loose form (every run of
//! horizontal space — tab, no-break, ideographic and the other Unicode spaces — is
//! one ASCII space; dashes, the minus sign, curly quotes and the ellipsis are ASCII),
//! keeping, for each loose byte, where it came from. The loose `old_string` is then
//! searched in the loose file like any string.

use std::ops::Range;
use std::time::{Duration, Instant};

/// How long the character diff that preserves the file's characters may run before
/// it settles for a coarser (still correct) diff.
const PRESERVE_DEADLINE: Duration = Duration::from_millis(500);

/// A text in loose form, with the original byte each loose byte came from.
pub struct Loose {
    pub text: String,
    /// `origin[i]`: start in the original of the character loose byte `i` came from;
    /// one more entry, the original's length, closes the last range.
    origin: Vec<u32>,
    /// `position[j]`: loose offset of original byte `j` (only at character starts),
    /// plus the end.
    position: Vec<u32>,
}

fn space(c: char) -> bool {
    matches!(
        c,
        ' ' | '\t' | '\u{a0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200a}' | '\u{202f}' | '\u{205f}' | '\u{3000}'
    )
}

fn dash(c: char) -> bool {
    matches!(
        c,
        '-' | '\u{2010}'..='\u{2015}' | '\u{2212}' | '\u{fe58}' | '\u{fe63}' | '\u{ff0d}'
    )
}

fn ascii_for(c: char) -> Option<&'static str> {
    Some(match c {
        '\u{2018}' | '\u{2019}' | '\u{201a}' | '\u{201b}' | '\u{2032}' => "'",
        '\u{201c}' | '\u{201d}' | '\u{201e}' | '\u{201f}' | '\u{2033}' => "\"",
        '\u{2026}' => "...",
        _ => return None,
    })
}

/// True when the loose form of `text` differs from `text` itself.
pub fn has_loose_characters(text: &str) -> bool {
    text.chars()
        .any(|c| (space(c) && c != ' ') || (dash(c) && c != '-') || ascii_for(c).is_some())
        || text.contains("  ")
        || text.contains("--")
}

impl Loose {
    pub fn new(original: &str) -> Loose {
        let mut text = String::with_capacity(original.len());
        let mut origin = Vec::with_capacity(original.len() + 1);
        let mut position = vec![0u32; original.len() + 1];
        let mut previous: Option<char> = None;
        for (at, c) in original.char_indices() {
            position[at] = text.len() as u32;
            let class = if space(c) {
                Some(' ')
            } else if dash(c) {
                Some('-')
            } else {
                None
            };
            match class {
                // A run of spaces (or of dashes) is one loose character.
                Some(k) if previous == Some(k) => {}
                Some(k) => {
                    text.push(k);
                    origin.push(at as u32);
                }
                None => {
                    let replaced = ascii_for(c);
                    let piece = match replaced {
                        Some(ascii) => ascii,
                        None => &original[at..at + c.len_utf8()],
                    };
                    for _ in 0..piece.len() {
                        origin.push(at as u32);
                    }
                    text.push_str(piece);
                }
            }
            previous = class;
        }
        position[original.len()] = text.len() as u32;
        origin.push(original.len() as u32);
        Loose {
            text,
            origin,
            position,
        }
    }

    /// The original range that loose range `range` came from.
    pub fn original_range(&self, range: Range<usize>) -> Range<usize> {
        let start = self.origin[range.start] as usize;
        let end = if range.end >= self.origin.len() - 1 {
            *self
                .origin
                .last()
                .expect("origin always ends with the length") as usize
        } else {
            // The end is where the next loose character's source starts, so a run
            // of spaces or dashes is taken whole.
            self.origin[range.end] as usize
        };
        start..end.max(start)
    }

    /// Loose offset of original byte offset `at` (a character boundary).
    fn loose_offset(&self, at: usize) -> usize {
        self.position[at] as usize
    }
}

/// Non-overlapping original ranges of `text` whose loose form is `old`'s loose form.
pub fn find(text: &str, old: &str) -> Vec<Range<usize>> {
    if !has_loose_characters(text) && !has_loose_characters(old) {
        return Vec::new();
    }
    let loose_old = Loose::new(old);
    let wanted = loose_old.text.trim_matches(' ');
    if wanted.trim().is_empty() {
        return Vec::new();
    }
    let loose_text = Loose::new(text);
    loose_text
        .text
        .match_indices(wanted)
        .map(|(at, m)| loose_text.original_range(at..at + m.len()))
        .collect()
}

/// `new`, with every stretch it shares with `old` written as the file wrote it in
/// `region` (which matched `old` loosely): the model's edit lands, the file's dashes,
/// quotes and spaces around it stay.
pub fn preserve(region: &str, old: &str, new: &str) -> String {
    let loose_region = Loose::new(region);
    let loose_old = Loose::new(old);
    let old_body = loose_old.text.trim_matches(' ');
    let region_body = loose_region.text.trim_matches(' ');
    if old_body != region_body {
        return new.to_string();
    }
    // Loose offsets of `old` and of `region` differ by the leading space each trimmed.
    let old_lead = loose_old.text.len() - loose_old.text.trim_start_matches(' ').len();
    let region_lead = loose_region.text.len() - loose_region.text.trim_start_matches(' ').len();
    let old_chars: Vec<(usize, char)> = old.char_indices().collect();
    let new_chars: Vec<(usize, char)> = new.char_indices().collect();
    let o: Vec<char> = old_chars.iter().map(|(_, c)| *c).collect();
    let n: Vec<char> = new_chars.iter().map(|(_, c)| *c).collect();
    let byte_of = |chars: &[(usize, char)], total: usize, index: usize| {
        chars.get(index).map_or(total, |(at, _)| *at)
    };
    let ops = similar::capture_diff_slices_deadline(
        similar::Algorithm::Myers,
        &o,
        &n,
        Some(Instant::now() + PRESERVE_DEADLINE),
    );
    let mut out = String::with_capacity(new.len() + 16);
    for op in ops {
        match op {
            similar::DiffOp::Equal { old_index, len, .. } => {
                let from = byte_of(&old_chars, old.len(), old_index);
                let to = byte_of(&old_chars, old.len(), old_index + len);
                let loose_from =
                    loose_old.loose_offset(from).saturating_sub(old_lead) + region_lead;
                let loose_to = loose_old.loose_offset(to).saturating_sub(old_lead) + region_lead;
                if loose_to > loose_region.text.len() || loose_from > loose_to {
                    out.push_str(&old[from..to]);
                    continue;
                }
                let range = loose_region.original_range(loose_from..loose_to);
                out.push_str(&region[range]);
            }
            similar::DiffOp::Insert {
                new_index, new_len, ..
            }
            | similar::DiffOp::Replace {
                new_index, new_len, ..
            } => {
                let from = byte_of(&new_chars, new.len(), new_index);
                let to = byte_of(&new_chars, new.len(), new_index + new_len);
                out.push_str(&new[from..to]);
            }
            similar::DiffOp::Delete { .. } => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_within_lines() {
        let text = "x = foo   bar baz\n";
        let found = find(text, "foo bar");
        assert_eq!(found, vec![4..13]);
        assert_eq!(&text[found[0].clone()], "foo   bar");
    }

    #[test]
    fn typography_matches_and_is_kept() {
        let text = "say \u{201c}hi\u{201d} \u{2014} then\u{2026}\n";
        let found = find(text, "say \"hi\" - then...");
        assert_eq!(found.len(), 1);
        let region = &text[found[0].clone()];
        assert_eq!(
            preserve(region, "say \"hi\" - then...", "say \"hello\" - then..."),
            "say \u{201c}hello\u{201d} \u{2014} then\u{2026}"
        );
    }

    #[test]
    fn ideographic_space_is_kept() {
        let text = "名前\u{3000}太郎\n";
        let found = find(text, "名前 太郎");
        let region = &text[found[0].clone()];
        assert_eq!(
            preserve(region, "名前 太郎", "名前 次郎"),
            "名前\u{3000}次郎"
        );
    }
}
