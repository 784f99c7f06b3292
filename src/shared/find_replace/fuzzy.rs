//! The last-resort matches, by similarity: a block whose first and last lines match
//! and whose middle is close (anchored block), or a block of as many lines most of
//! which are close (close lines). They never guess: when two places qualify and
//! neither is clearly better, the edit is refused with both places named.
//!
//! Their work is bounded: similarity is a Dice coefficient of character bigrams
//! (linear in the line length), lines are clipped before comparing, and a search
//! whose size (file lines × pattern lines) exceeds a budget is skipped with a reason.

use super::lines::Span;

/// Line comparisons one close-lines search may make.
const COMPARISON_BUDGET: usize = 2_000_000;
/// Characters of a line that take part in a similarity.
const LINE_CLIP: usize = 400;
/// Lines of `old_string` beyond which no similarity search is tried.
const MAX_PATTERN_LINES: usize = 400;
/// Candidates the anchored search looks at.
const MAX_ANCHOR_CANDIDATES: usize = 1000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    AnchoredBlock,
    CloseLines,
}

/// What the similarity search concluded.
pub enum Outcome {
    None,
    /// Lines `first..first + count` of the file (0-based), and how.
    Found {
        first: usize,
        count: usize,
        kind: Kind,
    },
    /// More than one place qualifies equally: the message names them.
    Ambiguous(String),
    /// The search was not run; the message says why.
    Skipped(String),
}

/// A line's character bigrams, sorted; each pair packed into one number (first
/// character high) so they sort and compare as pairs would, in one instruction.
pub type Bigrams = Vec<u64>;

pub fn bigrams(line: &str) -> Bigrams {
    let chars: Vec<char> = line
        .split_whitespace()
        .flat_map(|w| w.chars().chain([' ']))
        .take(LINE_CLIP)
        .collect();
    let mut grams: Bigrams = chars
        .windows(2)
        .map(|w| (u64::from(w[0]) << 32) | u64::from(w[1]))
        .collect();
    grams.sort_unstable();
    grams
}

/// Dice coefficient of two sorted bigram lists, 0..=1.
pub fn dice(a: &[u64], b: &[u64]) -> f64 {
    if a.is_empty() && b.is_empty() {
        return 1.0;
    }
    let (mut i, mut j, mut common) = (0, 0, 0usize);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Equal => {
                common += 1;
                i += 1;
                j += 1;
            }
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
        }
    }
    2.0 * common as f64 / (a.len() + b.len()) as f64
}

/// Searches `text` (split as `spans`) for the lines of `old`.
pub fn search(text: &str, spans: &[Span], old_lines: &[&str]) -> Outcome {
    let k = old_lines.len();
    if old_lines.iter().filter(|l| !l.trim().is_empty()).count() < 2 || k > spans.len() {
        return Outcome::None;
    }
    if k > MAX_PATTERN_LINES {
        return Outcome::Skipped(format!(
            "no similarity search was tried: old_string has {k} lines (the limit is {MAX_PATTERN_LINES})"
        ));
    }
    let file_lines: Vec<&str> = spans.iter().map(|s| &text[s.start..s.end]).collect();
    match anchored(&file_lines, old_lines) {
        Outcome::None => {}
        other => return other,
    }
    close_lines(&file_lines, old_lines)
}

fn typographic_trim(line: &str) -> String {
    super::loose::Loose::new(line.trim()).text
}

/// Places where the first and last lines match (ignoring surrounding whitespace and
/// typography) and the middle is similar enough: 0.5 when only one place has those
/// anchors, 0.7 when several do.
fn anchored(file_lines: &[&str], old_lines: &[&str]) -> Outcome {
    let k = old_lines.len();
    if k < 3 {
        return Outcome::None;
    }
    let first = typographic_trim(old_lines[0]);
    let last = typographic_trim(old_lines[k - 1]);
    if first.is_empty() || last.is_empty() {
        return Outcome::None;
    }
    let mut starts = Vec::new();
    for i in 0..=file_lines.len() - k {
        if file_lines[i].trim().is_empty() {
            continue;
        }
        if typographic_trim(file_lines[i]) == first
            && typographic_trim(file_lines[i + k - 1]) == last
        {
            starts.push(i);
            if starts.len() > MAX_ANCHOR_CANDIDATES {
                return Outcome::Skipped(format!(
                    "no anchored match was tried: the first and last lines of old_string occur more than {MAX_ANCHOR_CANDIDATES} times"
                ));
            }
        }
    }
    if starts.is_empty() {
        return Outcome::None;
    }
    let threshold = if starts.len() == 1 { 0.5 } else { 0.7 };
    let middle: Vec<Bigrams> = old_lines[1..k - 1].iter().map(|l| bigrams(l)).collect();
    let scored: Vec<(usize, f64)> = starts
        .into_iter()
        .map(|i| {
            let total: f64 = middle
                .iter()
                .enumerate()
                .map(|(j, grams)| dice(&bigrams(file_lines[i + 1 + j]), grams))
                .sum();
            (i, total / middle.len() as f64)
        })
        .filter(|(_, score)| *score >= threshold)
        .collect();
    pick(scored, k, Kind::AnchoredBlock)
}

/// Blocks of `k` lines where at least half the lines are close (similarity ≥ 0.8).
fn close_lines(file_lines: &[&str], old_lines: &[&str]) -> Outcome {
    let k = old_lines.len();
    let windows = file_lines.len() - k + 1;
    if windows.saturating_mul(k) > COMPARISON_BUDGET {
        return Outcome::Skipped(format!(
            "no similarity search was tried: {} file lines against {k} lines of old_string is more than {COMPARISON_BUDGET} comparisons",
            file_lines.len()
        ));
    }
    let old_grams: Vec<Bigrams> = old_lines.iter().map(|l| bigrams(l)).collect();
    // A file line's bigrams are computed once, however many windows it is in.
    let file_grams: Vec<Bigrams> = file_lines.iter().map(|l| bigrams(l)).collect();
    let needed = k.div_ceil(2);
    let mut scored = Vec::new();
    for start in 0..windows {
        let mut close = 0usize;
        let mut total = 0.0;
        for (j, grams) in old_grams.iter().enumerate() {
            // A window that can no longer reach `needed` close lines is given up.
            if close + (k - j) < needed {
                break;
            }
            let similarity = dice(&file_grams[start + j], grams);
            total += similarity;
            if similarity >= 0.8 {
                close += 1;
            }
        }
        if close >= needed {
            scored.push((start, total / k as f64));
        }
    }
    pick(scored, k, Kind::CloseLines)
}

/// One place from the qualifying ones, or a refusal. Overlapping windows are one
/// place (the best scoring of them); separate places are never chosen between.
fn pick(scored: Vec<(usize, f64)>, k: usize, kind: Kind) -> Outcome {
    let mut groups: Vec<Vec<(usize, f64)>> = Vec::new();
    for (start, score) in scored {
        match groups.last_mut() {
            Some(group) if start < group.last().map_or(0, |g| g.0) + k => {
                group.push((start, score))
            }
            _ => groups.push(vec![(start, score)]),
        }
    }
    match groups.len() {
        0 => Outcome::None,
        1 => {
            let group = &groups[0];
            let best = group.iter().map(|g| g.1).fold(f64::MIN, f64::max);
            let tops: Vec<usize> = group
                .iter()
                .filter(|g| (g.1 - best).abs() < 1e-9)
                .map(|g| g.0)
                .collect();
            if tops.len() == 1 {
                Outcome::Found {
                    first: tops[0],
                    count: k,
                    kind,
                }
            } else {
                Outcome::Ambiguous(places(&tops))
            }
        }
        _ => {
            let firsts: Vec<usize> = groups.iter().map(|g| g[0].0).collect();
            Outcome::Ambiguous(places(&firsts))
        }
    }
}

fn places(starts: &[usize]) -> String {
    let shown: Vec<String> = starts
        .iter()
        .take(10)
        .map(|s| (s + 1).to_string())
        .collect();
    format!(
        "old_string is not in the file verbatim, and {} places are equally close to it (starting at lines {}); \
         copy the exact text from read_file so it matches one place",
        starts.len(),
        shown.join(", ")
    )
}

/// Splits `old` into its lines for the similarity search; the bool says whether the
/// match should take the last line's line break too.
pub fn pattern_lines(old: &str) -> (Vec<&str>, bool) {
    match old.strip_suffix('\n') {
        Some(rest) => (
            rest.split('\n')
                .map(|l| l.strip_suffix('\r').unwrap_or(l))
                .collect(),
            true,
        ),
        None => (
            old.split('\n')
                .map(|l| l.strip_suffix('\r').unwrap_or(l))
                .collect(),
            false,
        ),
    }
}
