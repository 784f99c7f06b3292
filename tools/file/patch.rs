//! Find-and-replace with whitespace-tolerant fallbacks, the "closest region" shown
//! when nothing matches, and unified diffs.

use std::borrow::Cow;
use std::ops::Range;

/// How `old_string` was found in the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    Exact,
    TrailingWhitespace,
    Indentation,
    Whitespace,
    Escapes,
    LineNumbers,
}

impl Strategy {
    pub fn describe(self) -> &'static str {
        match self {
            Strategy::Exact => "exact match",
            Strategy::TrailingWhitespace => "matched ignoring trailing whitespace",
            Strategy::Indentation => "matched ignoring indentation; the replacement was re-indented to the file's",
            Strategy::Whitespace => "matched ignoring differences in whitespace; the replacement was re-indented to the file's",
            Strategy::Escapes => "matched after turning literal \\n, \\t and \\\" in old_string into the characters they stand for (new_string was treated the same way)",
            Strategy::LineNumbers => "matched after removing read_file's `N|` line-number prefixes from old_string (and from new_string where it had them); do not copy them next time",
        }
    }
}

/// Where `old_string` occurs, and how to turn `new_string` into each replacement.
pub struct Found {
    pub strategy: Strategy,
    pub ranges: Vec<Range<usize>>,
    /// Per range: (indent of old_string, indent found in the file) when they differ.
    reindent: Vec<Option<(String, String)>>,
    new_text: NewText,
}

/// What `new_string` needs before it goes in.
#[derive(Clone, Copy, PartialEq, Eq)]
enum NewText {
    AsGiven,
    Unescape,
    StripLineNumbers,
}

/// Tries the strategies in order and returns the first that finds anything.
pub fn find(text: &str, old: &str) -> Option<Found> {
    if old.is_empty() {
        return None;
    }
    let exact: Vec<Range<usize>> = text.match_indices(old).map(|(at, m)| at..at + m.len()).collect();
    if !exact.is_empty() {
        return Some(Found::plain(Strategy::Exact, exact));
    }
    let line_strategies: [(Strategy, Normalise); 3] = [
        (Strategy::TrailingWhitespace, trim_end),
        (Strategy::Indentation, trim_both),
        (Strategy::Whitespace, collapse_whitespace),
    ];
    for (strategy, normalise) in line_strategies {
        let ranges = line_matches(text, old, normalise);
        if !ranges.is_empty() {
            let reindent = if strategy == Strategy::TrailingWhitespace {
                vec![None; ranges.len()]
            } else {
                ranges.iter().map(|r| indent_change(old, &text[r.clone()])).collect()
            };
            return Some(Found { strategy, ranges, reindent, new_text: NewText::AsGiven });
        }
    }
    let unescaped = unescape(old);
    if unescaped != old && !unescaped.is_empty() {
        let mut ranges: Vec<Range<usize>> =
            text.match_indices(unescaped.as_str()).map(|(at, m)| at..at + m.len()).collect();
        if ranges.is_empty() {
            ranges = line_matches(text, &unescaped, trim_end);
        }
        if !ranges.is_empty() {
            let reindent = vec![None; ranges.len()];
            return Some(Found { strategy: Strategy::Escapes, ranges, reindent, new_text: NewText::Unescape });
        }
    }
    if let Some(stripped) = strip_line_numbers(old) {
        let mut ranges: Vec<Range<usize>> =
            text.match_indices(stripped.as_str()).map(|(at, m)| at..at + m.len()).collect();
        if ranges.is_empty() {
            ranges = line_matches(text, &stripped, trim_end);
        }
        if !ranges.is_empty() {
            let reindent = vec![None; ranges.len()];
            return Some(Found { strategy: Strategy::LineNumbers, ranges, reindent, new_text: NewText::StripLineNumbers });
        }
    }
    None
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
        let trimmed = body.trim_start();
        let digits = trimmed.len() - trimmed.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if digits == 0 || !trimmed[digits..].starts_with('|') {
            return None;
        }
        any = true;
        out.push_str(&trimmed[digits + 1..]);
        if piece.ends_with('\n') {
            out.push('\n');
        }
    }
    (any && !out.is_empty()).then_some(out)
}

impl Found {
    fn plain(strategy: Strategy, ranges: Vec<Range<usize>>) -> Found {
        let reindent = vec![None; ranges.len()];
        Found { strategy, ranges, reindent, new_text: NewText::AsGiven }
    }

    /// `text` with every found range replaced.
    pub fn apply(&self, text: &str, new: &str) -> String {
        let new: Cow<'_, str> = match self.new_text {
            NewText::AsGiven => Cow::Borrowed(new),
            NewText::Unescape => Cow::Owned(unescape(new)),
            NewText::StripLineNumbers => strip_line_numbers(new).map_or(Cow::Borrowed(new), Cow::Owned),
        };
        let mut out = String::with_capacity(text.len() + new.len());
        let mut last = 0;
        for (range, reindent) in self.ranges.iter().zip(&self.reindent) {
            out.push_str(&text[last..range.start]);
            match reindent {
                Some((from, to)) => out.push_str(&reindent_text(&new, from, to)),
                None => out.push_str(&new),
            }
            last = range.end;
        }
        out.push_str(&text[last..]);
        out
    }
}

/// How a line is compared in the line-based strategies.
type Normalise = fn(&str) -> Cow<'_, str>;

fn trim_end(line: &str) -> Cow<'_, str> {
    Cow::Borrowed(line.trim_end())
}

fn trim_both(line: &str) -> Cow<'_, str> {
    Cow::Borrowed(line.trim())
}

fn collapse_whitespace(line: &str) -> Cow<'_, str> {
    Cow::Owned(line.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// Line-based search: the lines of `old` against every window of as many lines of
/// `text`, compared after `normalise`. Non-overlapping, in order.
fn line_matches(text: &str, old: &str, normalise: Normalise) -> Vec<Range<usize>> {
    let (old_lines, with_newline) = match old.strip_suffix('\n') {
        Some(rest) => (rest.split('\n').collect::<Vec<_>>(), true),
        None => (old.split('\n').collect::<Vec<_>>(), false),
    };
    let wanted: Vec<Cow<'_, str>> = old_lines.iter().map(|l| normalise(l.trim_end_matches('\r'))).collect();
    if wanted.iter().all(|l| l.is_empty()) {
        return Vec::new();
    }
    // (start, end without the line break, end with it)
    let mut spans = Vec::new();
    let mut at = 0;
    for piece in text.split_inclusive('\n') {
        let body = piece.trim_end_matches('\n').trim_end_matches('\r');
        spans.push((at, at + body.len(), at + piece.len()));
        at += piece.len();
    }
    let k = wanted.len();
    let mut ranges = Vec::new();
    let mut start = 0;
    while start + k <= spans.len() {
        let hit = (0..k).all(|i| {
            let (s, e, _) = spans[start + i];
            normalise(&text[s..e]) == wanted[i]
        });
        if hit {
            let last = spans[start + k - 1];
            let end = if with_newline { last.2 } else { last.1 };
            ranges.push(spans[start].0..end);
            start += k;
        } else {
            start += 1;
        }
    }
    ranges
}

fn leading_ws(line: &str) -> &str {
    &line[..line.len() - line.trim_start().len()]
}

fn first_indent(text: &str) -> Option<&str> {
    text.lines().find(|l| !l.trim().is_empty()).map(leading_ws)
}

fn indent_change(old: &str, found: &str) -> Option<(String, String)> {
    let from = first_indent(old)?;
    let to = first_indent(found)?;
    (from != to).then(|| (from.to_string(), to.to_string()))
}

/// Moves every line of `text` from indent `from` to indent `to`.
fn reindent_text(text: &str, from: &str, to: &str) -> String {
    text.split_inclusive('\n')
        .map(|line| {
            if line.trim().is_empty() {
                line.to_string()
            } else if let Some(rest) = line.strip_prefix(from) {
                format!("{to}{rest}")
            } else {
                line.to_string()
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

fn bigrams(line: &str) -> Vec<(char, char)> {
    let chars: Vec<char> = line.split_whitespace().flat_map(|w| w.chars().chain([' '])).collect();
    let mut grams: Vec<(char, char)> = chars.windows(2).map(|w| (w[0], w[1])).collect();
    grams.sort_unstable();
    grams
}

/// Dice coefficient of two sorted bigram lists.
fn dice(a: &[(char, char)], b: &[(char, char)]) -> f64 {
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

/// The region of `text` most like `old`: (first line number, `N|line` snippet, score 0..1).
/// `None` when nothing is even loosely similar.
pub fn closest_region(text: &str, old: &str) -> Option<(usize, String, f64)> {
    let file_lines: Vec<&str> = text.lines().collect();
    let old_lines: Vec<&str> = old.lines().take(40).collect();
    if file_lines.is_empty() || old_lines.is_empty() {
        return None;
    }
    let file_grams: Vec<Vec<(char, char)>> = file_lines.iter().map(|l| bigrams(l)).collect();
    let old_grams: Vec<Vec<(char, char)>> = old_lines.iter().map(|l| bigrams(l)).collect();
    let k = old_lines.len();
    let mut best = (0usize, 0.0f64);
    for start in 0..file_lines.len() {
        let mut total = 0.0;
        for (i, grams) in old_grams.iter().enumerate() {
            if let Some(line) = file_grams.get(start + i) {
                total += dice(line, grams);
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

/// Unified diff of two texts, with `a/`-style headers as given.
pub fn unified_diff(old: &str, new: &str, old_name: &str, new_name: &str) -> String {
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(old_name, new_name)
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_and_fuzzy() {
        let text = "fn a() {\n    let x = 1;   \n    let y = 2;\n}\n";
        let found = find(text, "let x = 1;\nlet y = 2;").unwrap();
        assert_eq!(found.strategy, Strategy::Indentation);
        assert_eq!(found.apply(text, "let x = 10;\nlet y = 20;"), "fn a() {\n    let x = 10;\n    let y = 20;\n}\n");
        let found = find(text, "    let x = 1;\n    let y = 2;\n").unwrap();
        assert_eq!(found.strategy, Strategy::TrailingWhitespace);
        assert!(find(text, "nothing like it").is_none());
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
        let (line, snippet, _) = closest_region(text, "fn compute_totals(x: u64) -> u64 {\n    x + 2\n}").unwrap();
        assert_eq!(line, 3);
        assert!(snippet.contains("3|fn compute_total(x: u32) -> u32 {"));
    }
}
