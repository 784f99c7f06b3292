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
        out.push(Span { start: at, end: at + body.len(), next: at + piece.len() });
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
pub fn find_runs<S: AsRef<str>, W: AsRef<str>>(haystack: &[S], wanted: &[W], normalise: Normalise, overlapping: bool) -> Vec<usize> {
    if wanted.is_empty() || wanted.len() > haystack.len() {
        return Vec::new();
    }
    // Keyed with a fast seeded hash: every candidate line of the file is hashed once.
    let mut ids: HashMap<Cow<'_, str>, u32, foldhash::fast::RandomState> =
        HashMap::with_capacity_and_hasher(wanted.len(), foldhash::fast::RandomState::default());
    let pattern: Vec<u32> = wanted
        .iter()
        .map(|line| {
            let next = ids.len() as u32;
            *ids.entry(normalise(line.as_ref())).or_insert(next)
        })
        .collect();
    // A line whose normalised length no wanted line has cannot match: most lines of
    // a large file are ruled out by that, without hashing them.
    let longest = ids.keys().map(|line| line.len()).max().unwrap_or(0);
    let mut wanted_length = vec![false; longest + 1];
    for line in ids.keys() {
        wanted_length[line.len()] = true;
    }
    let text: Vec<u32> = haystack
        .iter()
        .map(|line| {
            let line = normalise(line.as_ref());
            if !wanted_length.get(line.len()).copied().unwrap_or(false) {
                return u32::MAX;
            }
            ids.get(&line).copied().unwrap_or(u32::MAX)
        })
        .collect();
    kmp(&text, &pattern, overlapping)
}

fn kmp(text: &[u32], pattern: &[u32], overlapping: bool) -> Vec<usize> {
    let k = pattern.len();
    let mut failure = vec![0usize; k];
    let mut j = 0;
    for i in 1..k {
        while j > 0 && pattern[i] != pattern[j] {
            j = failure[j - 1];
        }
        if pattern[i] == pattern[j] {
            j += 1;
        }
        failure[i] = j;
    }
    let mut found = Vec::new();
    j = 0;
    for (i, &t) in text.iter().enumerate() {
        while j > 0 && t != pattern[j] {
            j = failure[j - 1];
        }
        if t == pattern[j] {
            j += 1;
        }
        if j == k {
            found.push(i + 1 - k);
            j = if overlapping { failure[k - 1] } else { 0 };
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_overlapping_and_not() {
        let hay = ["a", "a", "a", "b"];
        assert_eq!(find_runs(&hay, &["a", "a"], exact, false), vec![0]);
        assert_eq!(find_runs(&hay, &["a", "a"], exact, true), vec![0, 1]);
        assert_eq!(find_runs(&hay, &["  a", "b "], trim_both, false), vec![2]);
        assert!(find_runs(&hay, &["c"], exact, false).is_empty());
    }

    #[test]
    fn ascii_layout_only() {
        assert_eq!(trim_both("\u{3000}x "), "\u{3000}x");
        assert_eq!(collapse_spaces("a \t b"), "a b");
    }
}
