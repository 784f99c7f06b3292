//! Finding a run of lines among a file's lines in linear time: every line is
//! compared after a normalisation, the wanted lines are interned to numbers and the
//! run is found with Knuth–Morris–Pratt, so a large `old_string` or hunk costs
//! O(file + pattern) rather than O(file × pattern). Lines of a length no wanted line
//! has are ruled out before any hashing.

use std::borrow::Cow;
use std::collections::HashMap;

/// One line of a text: `start..end` without its line break, `next` where the
/// following line starts.
#[derive(Clone, Copy, Debug)]
pub struct Span {
    pub start: usize,
    pub end: usize,
    pub next: usize,
}

/// The lines of `text`, a trailing `\r` left out of each line's body.
pub fn spans(text: &str) -> Vec<Span> {
    let mut out = Vec::with_capacity(text.len() / 32 + 1);
    let mut at = 0;
    for piece in text.split_inclusive('\n') {
        let body = piece.strip_suffix('\n').unwrap_or(piece);
        let body = body.strip_suffix('\r').unwrap_or(body);
        out.push(Span {
            start: at,
            end: at + body.len(),
            next: at + piece.len(),
        });
        at += piece.len();
    }
    out
}

/// How two lines are compared.
pub type Normalise = fn(&str) -> Cow<'_, str>;

/// Horizontal whitespace in the ASCII sense: the line strategies never treat a
/// non-breaking or ideographic space as layout, so they are never rewritten.
pub fn is_layout_space(c: char) -> bool {
    c == ' ' || c == '\t'
}

pub fn exact(line: &str) -> Cow<'_, str> {
    Cow::Borrowed(line)
}

pub fn trim_end(line: &str) -> Cow<'_, str> {
    Cow::Borrowed(line.trim_end_matches(is_layout_space))
}

pub fn trim_both(line: &str) -> Cow<'_, str> {
    Cow::Borrowed(line.trim_matches(is_layout_space))
}

pub fn collapse_spaces(line: &str) -> Cow<'_, str> {
    let trimmed = line.trim_matches(is_layout_space);
    if !trimmed.contains("  ") && !trimmed.contains('\t') {
        return Cow::Borrowed(trimmed);
    }
    let mut out = String::with_capacity(trimmed.len());
    let mut in_space = false;
    for c in trimmed.chars() {
        if is_layout_space(c) {
            if !in_space {
                out.push(' ');
            }
            in_space = true;
        } else {
            out.push(c);
            in_space = false;
        }
    }
    Cow::Owned(out)
}

/// Start indices in `haystack` where `wanted` occurs, after both are normalised.
/// `overlapping` counts occurrences that share lines (to tell a unique match from
/// an ambiguous one); otherwise matches are taken left to right without overlap.
pub fn find_runs<H, W>(
    haystack: impl IntoIterator<Item = H>,
    wanted: &[W],
    normalise: Normalise,
    overlapping: bool,
) -> Vec<usize>
where
    H: AsRef<str>,
    W: AsRef<str>,
{
    find_first_runs(haystack, wanted, normalise, overlapping, usize::MAX)
}

/// [`find_runs`] that stops reading `haystack` once `limit` runs are found.
pub fn find_first_runs<H, W>(
    haystack: impl IntoIterator<Item = H>,
    wanted: &[W],
    normalise: Normalise,
    overlapping: bool,
    limit: usize,
) -> Vec<usize>
where
    H: AsRef<str>,
    W: AsRef<str>,
{
    if wanted.is_empty() || limit == 0 {
        return Vec::new();
    }
    // Keyed with a fast seeded hash: a candidate line of the file is hashed once.
    let mut ids: HashMap<Cow<'_, str>, u32, foldhash::fast::RandomState> =
        HashMap::with_capacity_and_hasher(wanted.len(), foldhash::fast::RandomState::default());
    let pattern: Vec<u32> = wanted
        .iter()
        .map(|line| {
            let next = ids.len() as u32;
            *ids.entry(normalise(line.as_ref())).or_insert(next)
        })
        .collect();
    // Most lines of a large file are ruled out by their length and last bytes alone,
    // before any hashing.
    let mut sieve = Sieve::default();
    ids.keys().for_each(|line| sieve.insert(line));
    let mut matcher = Kmp::new(&pattern, overlapping);
    let mut found = Vec::new();
    for (index, line) in haystack.into_iter().enumerate() {
        let line = normalise(line.as_ref());
        let id = if sieve.may_hold(&line) {
            ids.get(&line).copied().unwrap_or(u32::MAX)
        } else {
            u32::MAX
        };
        if matcher.step(id) {
            found.push(index + 1 - pattern.len());
            if found.len() == limit {
                break;
            }
        }
    }
    found
}

/// A set of lines that may give false positives but never false negatives, keyed by a
/// line's length and last eight bytes: one multiply and one bit per line.
struct Sieve {
    bits: Vec<u64>,
}

const SIEVE_BITS: u32 = 16;

impl Default for Sieve {
    fn default() -> Sieve {
        Sieve {
            bits: vec![0; 1 << (SIEVE_BITS - 6)],
        }
    }
}

impl Sieve {
    fn key(line: &str) -> usize {
        let bytes = line.as_bytes();
        let mut last = [0u8; 8];
        let take = bytes.len().min(8);
        last[..take].copy_from_slice(&bytes[bytes.len() - take..]);
        let mixed = (u64::from_le_bytes(last) ^ (bytes.len() as u64).rotate_left(29))
            .wrapping_mul(0x9E37_79B9_7F4A_7C15);
        (mixed >> (64 - SIEVE_BITS)) as usize
    }

    fn insert(&mut self, line: &str) {
        let key = Sieve::key(line);
        self.bits[key / 64] |= 1 << (key % 64);
    }

    fn may_hold(&self, line: &str) -> bool {
        let key = Sieve::key(line);
        self.bits[key / 64] & (1 << (key % 64)) != 0
    }
}

/// Knuth–Morris–Pratt over a stream of interned lines.
struct Kmp<'p> {
    pattern: &'p [u32],
    failure: Vec<usize>,
    matched: usize,
    overlapping: bool,
}

impl<'p> Kmp<'p> {
    fn new(pattern: &'p [u32], overlapping: bool) -> Kmp<'p> {
        let mut failure = vec![0usize; pattern.len()];
        let mut j = 0;
        for i in 1..pattern.len() {
            while j > 0 && pattern[i] != pattern[j] {
                j = failure[j - 1];
            }
            if pattern[i] == pattern[j] {
                j += 1;
            }
            failure[i] = j;
        }
        Kmp {
            pattern,
            failure,
            matched: 0,
            overlapping,
        }
    }

    /// Takes the next line; true when a run of the pattern ends with it.
    fn step(&mut self, line: u32) -> bool {
        let k = self.pattern.len();
        while self.matched > 0 && line != self.pattern[self.matched] {
            self.matched = self.failure[self.matched - 1];
        }
        if line == self.pattern[self.matched] {
            self.matched += 1;
        }
        if self.matched < k {
            return false;
        }
        self.matched = if self.overlapping {
            self.failure[k - 1]
        } else {
            0
        };
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_overlapping_and_not() {
        let hay = ["a", "a", "a", "b"];
        assert_eq!(find_runs(hay, &["a", "a"], exact, false), vec![0]);
        assert_eq!(find_runs(hay, &["a", "a"], exact, true), vec![0, 1]);
        assert_eq!(find_runs(hay, &["  a", "b "], trim_both, false), vec![2]);
        assert!(find_runs(hay, &["c"], exact, false).is_empty());
        assert!(find_runs(&hay[..1], &["a", "a"], exact, false).is_empty());
        // Lines the sieve lets through by accident still have to be equal.
        let many: Vec<String> = (0..5000).map(|i| format!("line {i}")).collect();
        assert_eq!(
            find_runs(many, &["line 4321", "line 4322"], exact, true),
            vec![4321]
        );
        let repeated = ["x", "y", "x", "y", "x", "y"];
        assert_eq!(
            find_runs(repeated, &["x", "y", "x"], exact, true),
            vec![0, 2]
        );
        assert_eq!(
            find_first_runs(repeated, &["x", "y"], exact, true, 2),
            vec![0, 2]
        );
        assert_eq!(find_first_runs(repeated, &["x"], exact, true, 1), vec![0]);
    }

    #[test]
    fn ascii_layout_only() {
        assert_eq!(trim_both("\u{3000}x "), "\u{3000}x");
        assert_eq!(collapse_spaces("a \t b"), "a b");
    }
}
