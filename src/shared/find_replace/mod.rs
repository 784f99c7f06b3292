//! Find-and-replace: the strategies that find `old_string` (exact first, then ever
//! looser), how `new_string` is fitted to what was found, and the "closest region"
//! shown when nothing matches.

pub mod diff;
mod fuzzy;
pub mod lines;
pub mod loose;

use lines::Normalise;
use std::borrow::Cow;
use std::ops::Range;

pub use diff::unified_diff;

/// How `old_string` was found in the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    Exact,
    TrailingWhitespace,
    Indentation,
    Whitespace,
    Loose,
    Escapes,
    LineNumbers,
    AnchoredBlock,
    CloseLines,
}

impl Strategy {
    pub fn describe(self) -> &'static str {
        match self {
            Strategy::Exact => "exact match",
            Strategy::TrailingWhitespace => "matched ignoring trailing whitespace",
            Strategy::Indentation => "matched ignoring indentation; the replacement was re-indented to the file's",
            Strategy::Whitespace => "matched ignoring differences in whitespace; the replacement was re-indented to the file's",
            Strategy::Loose => "matched ignoring runs of spaces and typographic characters (dashes, curly quotes, ellipsis, no-break and ideographic spaces); the file's own characters were kept where the text did not change",
            Strategy::Escapes => "matched after turning literal \\n, \\t and \\\" in old_string into the characters they stand for (new_string was treated the same way)",
            Strategy::LineNumbers => "matched after removing read_file's `N|` line-number prefixes from old_string (and from new_string where it had them); do not copy them next time",
            Strategy::AnchoredBlock => "matched by similarity: the first and last lines are the same and the lines between are close; check the diff",
            Strategy::CloseLines => "matched by similarity: most lines of the block are close to old_string's; check the diff",
        }
    }
}

/// Where `old_string` occurs, and how to turn `new_string` into each replacement.
pub struct Found {
    pub strategy: Strategy,
    pub ranges: Vec<Range<usize>>,
    /// `old_string` as it was matched (unescaped or without line numbers when the
    /// strategy needed that).
    old: String,
    fit: Fit,
    new_text: NewText,
}

/// How `new_string` is fitted to each place found.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fit {
    AsGiven,
    /// Moved from old_string's indentation to the file's.
    Reindent,
    /// The file's characters kept in the stretches old and new share.
    Preserve,
}

/// What `new_string` needs before it goes in.
#[derive(Clone, Copy, PartialEq, Eq)]
enum NewText {
    AsGiven,
    Unescape,
    StripLineNumbers,
}

/// Why `old_string` was not used.
#[derive(Debug)]
pub enum Miss {
    /// Nowhere; the reason says what was not tried, if anything.
    NotFound(Option<String>),
    /// At several places that are equally likely.
    Ambiguous(String),
}

/// Tries the strategies in order and returns the first that finds anything.
pub fn find(text: &str, old: &str) -> Result<Found, Miss> {
    if old.trim().is_empty() {
        return Err(Miss::NotFound(None));
    }
    let exact = occurrences(text, old);
    if !exact.is_empty() {
        return Ok(Found::new(
            Strategy::Exact,
            exact,
            old,
            Fit::AsGiven,
            NewText::AsGiven,
        ));
    }
    let spans = lines::spans(text);
    let line_strategies: [(Strategy, Normalise, Fit); 3] = [
        (Strategy::TrailingWhitespace, lines::trim_end, Fit::AsGiven),
        (Strategy::Indentation, lines::trim_both, Fit::Reindent),
        (Strategy::Whitespace, lines::collapse_spaces, Fit::Reindent),
    ];
    for (strategy, normalise, fit) in line_strategies {
        let ranges = line_matches(text, &spans, old, normalise);
        if !ranges.is_empty() {
            return Ok(Found::new(strategy, ranges, old, fit, NewText::AsGiven));
        }
    }
    let loose_ranges = loose::find(text, old);
    if !loose_ranges.is_empty() {
        return Ok(Found::new(
            Strategy::Loose,
            loose_ranges,
            old,
            Fit::Preserve,
            NewText::AsGiven,
        ));
    }
    // A corrected `old` (unescaped, or without pasted line numbers) is looked for as
    // it is, then line by line ignoring trailing white space.
    let exact_then_lines = |wanted: &str| {
        let ranges = occurrences(text, wanted);
        if ranges.is_empty() {
            line_matches(text, &spans, wanted, lines::trim_end)
        } else {
            ranges
        }
    };
    let unescaped = unescape(old);
    if unescaped != old && !unescaped.trim().is_empty() {
        let ranges = exact_then_lines(&unescaped);
        if !ranges.is_empty() {
            return Ok(Found::new(
                Strategy::Escapes,
                ranges,
                &unescaped,
                Fit::AsGiven,
                NewText::Unescape,
            ));
        }
    }
    if let Some(stripped) = strip_line_numbers(old) {
        let ranges = exact_then_lines(&stripped);
        if !ranges.is_empty() {
            return Ok(Found::new(
                Strategy::LineNumbers,
                ranges,
                &stripped,
                Fit::AsGiven,
                NewText::StripLineNumbers,
            ));
        }
    }
    let (old_lines, with_newline) = fuzzy::pattern_lines(old);
    match fuzzy::search(text, &spans, &old_lines) {
        fuzzy::Outcome::Found { first, count, kind } => {
            let last = spans[first + count - 1];
            let end = if with_newline { last.next } else { last.end };
            let place = spans[first].start..end;
            let strategy = match kind {
                fuzzy::Kind::AnchoredBlock => Strategy::AnchoredBlock,
                fuzzy::Kind::CloseLines => Strategy::CloseLines,
            };
            Ok(Found::new(
                strategy,
                vec![place],
                old,
                Fit::Reindent,
                NewText::AsGiven,
            ))
        }
        fuzzy::Outcome::Ambiguous(why) => Err(Miss::Ambiguous(why)),
        fuzzy::Outcome::Skipped(why) => Err(Miss::NotFound(Some(why))),
        fuzzy::Outcome::None => Err(Miss::NotFound(None)),
    }
}

/// Where `wanted` occurs verbatim, left to right without overlap (a SIMD search:
/// the whole of a large file is scanned to tell a unique match from several).
fn occurrences(text: &str, wanted: &str) -> Vec<Range<usize>> {
    memchr::memmem::find_iter(text.as_bytes(), wanted.as_bytes())
        .map(|at| at..at + wanted.len())
        .collect()
}

/// Non-space characters `new_string` must have for its presence to count as a replay.
const MIN_REPLAY_EVIDENCE: usize = 6;

/// True when `new` is already in `text` where `old` is not: the edit was made before
/// (a replayed call). `new` must be found as it is (or ignoring trailing
/// whitespace), and once, unless every occurrence was to be replaced; and it must be
/// more than a few characters.
pub fn already_applied(text: &str, new: &str, replace_all: bool) -> bool {
    // A few characters found somewhere prove nothing.
    if new.chars().filter(|c| !c.is_whitespace()).count() < MIN_REPLAY_EVIDENCE {
        return false;
    }
    let mut count = memchr::memmem::find_iter(text.as_bytes(), new.as_bytes()).count();
    if count == 0 {
        count = line_matches(text, &lines::spans(text), new, lines::trim_end).len();
    }
    count == 1 || (replace_all && count > 1)
}

/// A line of read_file's display split at its `N|` gutter (white space before the
/// number is skipped): the number's digits and the line after the bar.
pub fn split_gutter(line: &str) -> Option<(&str, &str)> {
    let trimmed = line.trim_start();
    let digits = trimmed.len()
        - trimmed
            .trim_start_matches(|c: char| c.is_ascii_digit())
            .len();
    if digits == 0 || !trimmed[digits..].starts_with('|') {
        return None;
    }
    Some((&trimmed[..digits], &trimmed[digits + 1..]))
}

/// `text` without read_file's `N|` gutter, when every non-empty line carries one.
pub fn strip_line_numbers(text: &str) -> Option<String> {
    let mut any = false;
    let mut out = String::with_capacity(text.len());
    for piece in text.split_inclusive('\n') {
        let body = piece.trim_end_matches('\n');
        if body.trim().is_empty() {
            out.push_str(piece);
            continue;
        }
        let (_, line) = split_gutter(body)?;
        any = true;
        out.push_str(line);
        if piece.ends_with('\n') {
            out.push('\n');
        }
    }
    (any && !out.is_empty()).then_some(out)
}

impl Found {
    fn new(
        strategy: Strategy,
        ranges: Vec<Range<usize>>,
        old: &str,
        fit: Fit,
        new_text: NewText,
    ) -> Found {
        Found {
            strategy,
            ranges,
            old: old.to_string(),
            fit,
            new_text,
        }
    }

    /// `text` with every found range replaced.
    pub fn apply(&self, text: &str, new: &str) -> String {
        let new: Cow<'_, str> = match self.new_text {
            NewText::AsGiven => Cow::Borrowed(new),
            NewText::Unescape => Cow::Owned(unescape(new)),
            NewText::StripLineNumbers => {
                strip_line_numbers(new).map_or(Cow::Borrowed(new), Cow::Owned)
            }
        };
        let mut out = String::with_capacity(text.len() + new.len());
        let mut last = 0;
        for range in &self.ranges {
            let region = &text[range.clone()];
            out.push_str(&text[last..range.start]);
            let fitted: Cow<'_, str> = match self.fit {
                Fit::AsGiven => Cow::Borrowed(&new),
                Fit::Reindent => Cow::Owned(reindent(region, &self.old, &new)),
                Fit::Preserve => Cow::Owned(loose::preserve(region, &self.old, &new)),
            };
            out.push_str(&literal_controls(&fitted, region));
            last = range.end;
        }
        out.push_str(&text[last..]);
        out
    }
}

/// `\t` and `\r` written out in `new` become the real characters when the region
/// they replace has real ones and none written out: models double-escape the tab of
/// a tab-indented file, while a file that spells `"\t"` in its source keeps it.
fn literal_controls<'a>(new: &'a str, region: &str) -> Cow<'a, str> {
    let mut out = Cow::Borrowed(new);
    for (written, real) in [("\\t", "\t"), ("\\r", "\r")] {
        if out.contains(written) && region.contains(real) && !region.contains(written) {
            out = Cow::Owned(out.replace(written, real));
        }
    }
    out
}

/// Line-based search: the lines of `old` against the file's lines, compared after
/// `normalise`, in linear time. Non-overlapping, in order.
fn line_matches(
    text: &str,
    spans: &[lines::Span],
    old: &str,
    normalise: Normalise,
) -> Vec<Range<usize>> {
    let (wanted, with_newline) = fuzzy::pattern_lines(old);
    if wanted.iter().all(|l| normalise(l).is_empty()) {
        return Vec::new();
    }
    let file_lines = spans.iter().map(|s| &text[s.start..s.end]);
    lines::find_runs(file_lines, &wanted, normalise, false)
        .into_iter()
        .map(|first| {
            let last = spans[first + wanted.len() - 1];
            spans[first].start..if with_newline { last.next } else { last.end }
        })
        .collect()
}

fn leading_ws(line: &str) -> &str {
    &line[..line.len() - line.trim_start_matches(lines::is_layout_space).len()]
}

fn first_indent(text: &str) -> Option<&str> {
    text.lines().find(|l| !l.trim().is_empty()).map(leading_ws)
}

/// `new` moved from `old`'s base indentation to that of `region`: each line keeps
/// its indentation relative to old_string's first line; a line indented less than
/// that starts at the file's base.
pub fn reindent(region: &str, old: &str, new: &str) -> String {
    let (Some(from), Some(to)) = (first_indent(old), first_indent(region)) else {
        return new.to_string();
    };
    if from == to {
        return new.to_string();
    }
    new.split_inclusive('\n')
        .map(|line| {
            if line.trim().is_empty() {
                line.to_string()
            } else if let Some(rest) = line.strip_prefix(from) {
                format!("{to}{rest}")
            } else {
                format!("{to}{}", line.trim_start_matches(lines::is_layout_space))
            }
        })
        .collect()
}

/// `\n`, `\t`, `\r`, `\"`, `\'` and `\\` written out literally, as models sometimes
/// double-escape them.
pub fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.peek().copied() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('"') => out.push('"'),
            Some('\'') => out.push('\''),
            Some('\\') => out.push('\\'),
            _ => {
                out.push('\\');
                continue;
            }
        }
        chars.next();
    }
    out
}

const CLOSEST_BUDGET: usize = 2_000_000;

/// The region of `text` most like `old`: (first line number, `N|line` snippet, score 0..1).
/// `None` when nothing is even loosely similar.
pub fn closest_region(text: &str, old: &str) -> Option<(usize, String, f64)> {
    let file_lines: Vec<&str> = text.lines().collect();
    // At most CLOSEST_BUDGET line comparisons, however large the file or old_string.
    let take = (CLOSEST_BUDGET / file_lines.len().max(1)).clamp(1, 40);
    let old_lines: Vec<&str> = old
        .lines()
        .filter(|l| !l.trim().is_empty())
        .take(take)
        .collect();
    if file_lines.is_empty() || old_lines.is_empty() {
        return None;
    }
    let file_grams: Vec<fuzzy::Bigrams> = file_lines.iter().map(|l| fuzzy::bigrams(l)).collect();
    let old_grams: Vec<fuzzy::Bigrams> = old_lines.iter().map(|l| fuzzy::bigrams(l)).collect();
    let k = old_lines.len();
    let mut best = (0usize, 0.0f64);
    for start in 0..file_lines.len() {
        let mut total = 0.0;
        for (i, grams) in old_grams.iter().enumerate() {
            // A place that cannot beat the best so far even if every line left were
            // the same is given up (with a margin, so rounding never decides).
            if (total + (k - i) as f64) / (k as f64) < best.1 - 1e-9 {
                break;
            }
            if let Some(line) = file_grams.get(start + i) {
                total += fuzzy::dice(line, grams);
            }
        }
        let score = total / k as f64;
        if score > best.1 {
            best = (start, score);
        }
    }
    if best.1 < 0.25 {
        return None;
    }
    let from = best.0.saturating_sub(1);
    let to = (best.0 + k + 1).min(file_lines.len()).min(from + 14);
    let mut snippet = String::new();
    for (i, line) in file_lines[from..to].iter().enumerate() {
        if !snippet.is_empty() {
            snippet.push('\n');
        }
        let line: String = line.chars().take(300).collect();
        snippet.push_str(&format!("{}|{}", from + i + 1, line));
    }
    Some((best.0 + 1, snippet, best.1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_and_fuzzy() {
        let text = "fn a() {\n    let x = 1;   \n    let y = 2;\n}\n";
        let found = find(text, "let x = 1;\nlet y = 2;").unwrap();
        assert_eq!(found.strategy, Strategy::Indentation);
        assert_eq!(
            found.apply(text, "let x = 10;\nlet y = 20;"),
            "fn a() {\n    let x = 10;\n    let y = 20;\n}\n"
        );
        let found = find(text, "    let x = 1;\n    let y = 2;\n").unwrap();
        assert_eq!(found.strategy, Strategy::TrailingWhitespace);
        assert!(find(text, "nothing like it").is_err());
    }

    #[test]
    fn within_lines_typography_and_tabs() {
        let text = "x = foo   bar baz\n";
        let found = find(text, "foo bar").unwrap();
        assert_eq!(found.strategy, Strategy::Loose);
        assert_eq!(found.apply(text, "foo qux"), "x = foo   qux baz\n");
        let text = "\tif a:\n\t\tgo()\n";
        let found = find(text, "\tif a:").unwrap();
        assert_eq!(found.apply(text, "\\tif b:"), "\tif b:\n\t\tgo()\n");
        let text = "sep = \"\\t\"\n";
        let found = find(text, "sep = \"\\t\"").unwrap();
        assert_eq!(found.apply(text, "sep = \"\\t\\t\""), "sep = \"\\t\\t\"\n");
        assert!(matches!(find("a\n", " \n\t"), Err(Miss::NotFound(None))));
    }

    #[test]
    fn similarity_refuses_ties() {
        let block = "fn one() {\n    let a = compute(1);\n    let b = compute(2);\n}\n";
        let text = format!("{block}\n{block}");
        let old = "fn one() {\n    let a = compute(1);\n    let b = compute(3);\n}";
        assert!(matches!(find(&text, old), Err(Miss::Ambiguous(_))));
        let found = find(block, old).unwrap();
        assert_eq!(found.strategy, Strategy::AnchoredBlock);
    }

    #[test]
    fn escapes() {
        let text = "a\n\tb\n";
        let found = find(text, "a\\n\\tb").unwrap();
        assert_eq!(found.strategy, Strategy::Escapes);
        assert_eq!(found.apply(text, "c\\nd"), "c\nd\n");
    }

    #[test]
    fn line_number_prefixes() {
        let text = "a\nb\nc\n";
        let found = find(text, "2|b\n3|c").unwrap();
        assert_eq!(found.strategy, Strategy::LineNumbers);
        assert_eq!(found.apply(text, "2|B\n3|C"), "a\nB\nC\n");
        assert_eq!(strip_line_numbers("1|x\n\n2|y"), Some("x\n\ny".into()));
        assert_eq!(strip_line_numbers("x|y"), None);
    }

    #[test]
    fn closest() {
        let text = "one\ntwo\nfn compute_total(x: u32) -> u32 {\n    x + 1\n}\nthree\n";
        let (line, snippet, _) =
            closest_region(text, "fn compute_totals(x: u64) -> u64 {\n    x + 2\n}").unwrap();
        assert_eq!(line, 3);
        assert!(snippet.contains("3|fn compute_total(x: u32) -> u32 {"));
    }
}
