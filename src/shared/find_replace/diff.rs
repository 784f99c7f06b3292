//! Unified diffs of an edit. An edit usually changes a few lines of a large file, so
//! the common head and tail are skipped with a byte comparison and only the part
//! between them (with its context lines) is diffed: a one-line patch of a 5 MB
//! file costs a memcmp, not a diff of 5 MB.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::ops::Range;
use std::time::{Duration, Instant};

/// Lines of context around each change, as `diff -u`.
const CONTEXT: usize = 3;
/// A diff that runs longer settles for a coarser, still correct one.
const DEADLINE: Duration = Duration::from_secs(2);

/// Unified diff of two texts, headed `--- old_name` / `+++ new_name`; empty when equal.
pub fn unified_diff(old: &str, new: &str, old_name: &str, new_name: &str) -> String {
    if old == new {
        return String::new();
    }
    let mut out = header(old_name, new_name);
    push_hunks(&mut out, old, new, 0, 0);
    out
}

/// A stretch of lines an edit changed: `old` in the old text and `new` in the new one
/// (byte ranges that start at line starts), with the number of the line each starts
/// at. Everything between two regions is the same in both texts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Region {
    pub old: Range<usize>,
    pub new: Range<usize>,
    pub old_line: usize,
    pub new_line: usize,
}

/// The unified diff of an edit whose changed regions are known (in order): only they
/// and their context lines are read, however large the texts. Where the alignment of
/// the two texts is unambiguous this is the diff [`unified_diff`] gives of the whole
/// texts; where text repeats, the hunks show each change where it was made.
pub fn unified_diff_of_regions(
    old: &str,
    new: &str,
    regions: &[Region],
    old_name: &str,
    new_name: &str,
) -> String {
    if regions.is_empty() {
        return String::new();
    }
    let mut out = header(old_name, new_name);
    let mut next = 0;
    while next < regions.len() {
        let first = &regions[next];
        let old_from = back_lines(old, first.old.start, CONTEXT);
        let before = bytecount::count(&old.as_bytes()[old_from..first.old.start], b'\n');
        let new_from = first.new.start - (first.old.start - old_from);
        let mut last = first;
        next += 1;
        // Regions whose context lines meet are diffed together, as one group of a
        // whole-text diff would be.
        while let Some(following) = regions.get(next) {
            if back_lines(old, following.old.start, CONTEXT)
                > forward_lines(old, last.old.end, CONTEXT)
            {
                break;
            }
            last = following;
            next += 1;
        }
        let old_to = forward_lines(old, last.old.end, CONTEXT);
        let new_to = last.new.end + (old_to - last.old.end);
        push_hunks(
            &mut out,
            &old[old_from..old_to],
            &new[new_from..new_to],
            first.old_line - before,
            first.new_line - before,
        );
    }
    out
}

fn header(old_name: &str, new_name: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "--- {old_name}");
    let _ = writeln!(out, "+++ {new_name}");
    out
}

/// The hunks of the diff of `old` and `new`, numbered as if they started at lines
/// `old_line` and `new_line`.
fn push_hunks(out: &mut String, old: &str, new: &str, old_line: usize, new_line: usize) {
    let head = common_head(old, new);
    let tail = common_tail(&old[head..], &new[head..]);
    // Keep CONTEXT common lines on each side inside the diffed part.
    let from = back_lines(old, head, CONTEXT);
    let old_end = forward_lines(old, old.len() - tail, CONTEXT);
    let new_end = new.len() - (old.len() - old_end);
    let skipped_lines = bytecount::count(&old.as_bytes()[..from], b'\n');
    let old_part = &old[from..old_end];
    let new_part = &new[from..new_end];
    let (old_line, new_line) = (old_line + skipped_lines, new_line + skipped_lines);
    let (changed_old, changed_new) = (&old[head..old.len() - tail], &new[head..new.len() - tail]);
    if share_no_line(old_part, changed_old, new_part, changed_new) {
        push_replacement(out, old_part, new_part, (old_line, new_line));
        return;
    }
    let diff = similar::TextDiff::configure()
        .algorithm(similar::Algorithm::Myers)
        .deadline(Instant::now() + DEADLINE)
        .diff_lines(old_part, new_part);
    for group in diff.grouped_ops(CONTEXT) {
        let (Some(first), Some(last)) = (group.first(), group.last()) else {
            continue;
        };
        let old_range = (first.old_range().start, last.old_range().end);
        let new_range = (first.new_range().start, last.new_range().end);
        let _ = writeln!(
            out,
            "@@ -{} +{} @@",
            hunk_range(old_range, old_line),
            hunk_range(new_range, new_line)
        );
        for op in &group {
            for change in diff.iter_changes(op) {
                let tag = match change.tag() {
                    similar::ChangeTag::Equal => ' ',
                    similar::ChangeTag::Delete => '-',
                    similar::ChangeTag::Insert => '+',
                };
                out.push(tag);
                let value = change.value();
                out.push_str(value);
                if !value.ends_with('\n') {
                    out.push_str("\n\\ No newline at end of file\n");
                }
            }
        }
    }
}

/// True when no line the edit removed is in the new part and no line it added is in
/// the old one: nothing can be matched across, so the diff is the removal of the one
/// and the insertion of the other, without a search (which costs the product of the
/// two sizes when they have nothing in common, as when every line of a block changed).
fn share_no_line(old_part: &str, removed: &str, new_part: &str, added: &str) -> bool {
    let (old_lines, new_lines) = (line_set(old_part), line_set(new_part));
    !added
        .split_inclusive('\n')
        .any(|line| old_lines.contains(line))
        && !removed
            .split_inclusive('\n')
            .any(|line| new_lines.contains(line))
}

fn line_set(text: &str) -> HashSet<&str, foldhash::fast::RandomState> {
    text.split_inclusive('\n').collect()
}

/// The one hunk of a diff whose parts share only their first and last lines: the common
/// lines as context, every other old line removed, every other new line added.
fn push_replacement(
    out: &mut String,
    old_part: &str,
    new_part: &str,
    (old_line, new_line): (usize, usize),
) {
    let old_lines: Vec<&str> = old_part.split_inclusive('\n').collect();
    let new_lines: Vec<&str> = new_part.split_inclusive('\n').collect();
    let head = old_lines
        .iter()
        .zip(&new_lines)
        .take_while(|(a, b)| a == b)
        .count();
    let most = old_lines.len().min(new_lines.len()) - head;
    let tail = old_lines
        .iter()
        .rev()
        .zip(new_lines.iter().rev())
        .take(most)
        .take_while(|(a, b)| a == b)
        .count();
    let _ = writeln!(
        out,
        "@@ -{} +{} @@",
        hunk_range((0, old_lines.len()), old_line),
        hunk_range((0, new_lines.len()), new_line)
    );
    let tagged = old_lines[..head]
        .iter()
        .map(|line| (' ', *line))
        .chain(
            old_lines[head..old_lines.len() - tail]
                .iter()
                .map(|line| ('-', *line)),
        )
        .chain(
            new_lines[head..new_lines.len() - tail]
                .iter()
                .map(|line| ('+', *line)),
        )
        .chain(
            old_lines[old_lines.len() - tail..]
                .iter()
                .map(|line| (' ', *line)),
        );
    for (tag, line) in tagged {
        out.push(tag);
        out.push_str(line);
        if !line.ends_with('\n') {
            out.push_str("\n\\ No newline at end of file\n");
        }
    }
}

/// `N,LEN` as unified diffs write it (`N` alone for one line; an empty range names
/// the line before it).
fn hunk_range((start, end): (usize, usize), offset: usize) -> String {
    let len = end - start;
    let first = start + offset + 1;
    match len {
        1 => first.to_string(),
        0 => format!("{},0", first - 1),
        _ => format!("{first},{len}"),
    }
}

/// Bytes compared at a time when looking for the first difference: slice equality
/// of a block is a `memcmp`, far faster than walking byte by byte.
const BLOCK: usize = 4096;

/// Length of the longest common prefix of `a` and `b`.
fn same_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let mut at = 0;
    while at + BLOCK <= n && a[at..at + BLOCK] == b[at..at + BLOCK] {
        at += BLOCK;
    }
    at + a[at..n]
        .iter()
        .zip(&b[at..n])
        .take_while(|(x, y)| x == y)
        .count()
}

/// Length of the longest common suffix of `a` and `b`.
fn same_suffix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let (a, b) = (&a[a.len() - n..], &b[b.len() - n..]);
    let mut end = n;
    while end >= BLOCK && a[end - BLOCK..end] == b[end - BLOCK..end] {
        end -= BLOCK;
    }
    n - end
        + a[..end]
            .iter()
            .rev()
            .zip(b[..end].iter().rev())
            .take_while(|(x, y)| x == y)
            .count()
}

/// Length of the common head of both texts, cut back to a line start.
fn common_head(a: &str, b: &str) -> usize {
    let same = same_prefix(a.as_bytes(), b.as_bytes());
    memchr::memrchr(b'\n', &a.as_bytes()[..same]).map_or(0, |i| i + 1)
}

/// Length of the common tail of both texts, starting at a line start in both.
fn common_tail(a: &str, b: &str) -> usize {
    let same = same_suffix(a.as_bytes(), b.as_bytes());
    let tail = &a.as_bytes()[a.len() - same..];
    // The first line break inside the common part makes both cut points line starts.
    match memchr::memchr(b'\n', tail) {
        Some(i) => same - (i + 1),
        None => 0,
    }
}

/// The line start `lines` lines before line start `at`.
fn back_lines(text: &str, mut at: usize, lines: usize) -> usize {
    for _ in 0..lines {
        if at == 0 {
            break;
        }
        at = memchr::memrchr(b'\n', &text.as_bytes()[..at - 1]).map_or(0, |i| i + 1);
    }
    at
}

/// The line start `lines` lines after line start `at` (or the end).
fn forward_lines(text: &str, mut at: usize, lines: usize) -> usize {
    for _ in 0..lines {
        match memchr::memchr(b'\n', &text.as_bytes()[at..]) {
            Some(i) => at += i + 1,
            None => return text.len(),
        }
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(old: &str, new: &str) -> String {
        similar::TextDiff::from_lines(old, new)
            .unified_diff()
            .context_radius(3)
            .header("a", "b")
            .to_string()
    }

    #[test]
    fn same_as_a_whole_file_diff() {
        // 200 lines fit in one comparison block; 5000 lines span many.
        for lines in [200, 5000] {
            let old: String = (0..lines).map(|i| format!("line {i}\n")).collect();
            let last = format!("line {}\n", lines - 1);
            let cases = [
                old.replace("line 100\n", "line hundred\n"),
                old.replace("line 0\n", ""),
                old.replace(&last, "last"),
                format!("{old}extra\n"),
                old.replace("line 1", "row 1"),
                old.replace("line ", "row "),
                old.replace("line 3\n", "a\nb\nc\n").replace("line 4\n", ""),
                old.replace("line 10\n", "x\n").replace("line 150\n", "y\n"),
                old.replace("line 1\n", "x\n")
                    .replace(&format!("line {}\n", lines - 2), "y\n"),
                String::new(),
            ];
            for new in cases {
                assert_eq!(unified_diff(&old, &new, "a", "b"), reference(&old, &new));
            }
        }
        assert_eq!(
            unified_diff("a\nb", "a\nc", "a", "b"),
            reference("a\nb", "a\nc")
        );
        assert_eq!(unified_diff("", "x\n", "a", "b"), reference("", "x\n"));
        assert_eq!(unified_diff("x", "x", "a", "b"), "");
    }

    /// `old`'s lines with each `(first line, count, new lines)` edit made (sorted,
    /// apart), and the regions those edits changed.
    fn edited(old: &[String], edits: &[(usize, usize, &[&str])]) -> (String, String, Vec<Region>) {
        let (mut old_text, mut new_text, mut regions) = (String::new(), String::new(), Vec::new());
        let mut line = 0;
        let mut new_line = 0;
        for &(first, count, lines) in edits {
            for l in &old[line..first] {
                old_text.push_str(l);
                new_text.push_str(l);
            }
            new_line += first - line;
            let (old_start, new_start) = (old_text.len(), new_text.len());
            old[first..first + count]
                .iter()
                .for_each(|l| old_text.push_str(l));
            lines
                .iter()
                .for_each(|l| new_text.push_str(&format!("{l}\n")));
            regions.push(Region {
                old: old_start..old_text.len(),
                new: new_start..new_text.len(),
                old_line: first,
                new_line,
            });
            new_line += lines.len();
            line = first + count;
        }
        old[line..].iter().for_each(|l| {
            old_text.push_str(l);
            new_text.push_str(l);
        });
        (old_text, new_text, regions)
    }

    #[test]
    fn regions_give_the_whole_text_diff() {
        let old: Vec<String> = (0..400).map(|i| format!("line {i}\n")).collect();
        let cases: [&[(usize, usize, &[&str])]; 7] = [
            &[(10, 1, &["ten"])],
            &[(10, 1, &["ten"]), (16, 1, &["sixteen"])],
            &[(10, 1, &["ten"]), (17, 1, &["seventeen"])],
            &[
                (0, 2, &[]),
                (100, 0, &["a", "b"]),
                (107, 3, &["c"]),
                (399, 1, &["last"]),
            ],
            &[(5, 1, &["line 4", "line 5"]), (200, 100, &["line 1"])],
            &[
                (3, 1, &["x"]),
                (9, 1, &["y"]),
                (16, 1, &["z"]),
                (23, 377, &[]),
            ],
            &[(390, 10, &["end"])],
        ];
        for edits in cases {
            let (old_text, new_text, regions) = edited(&old, edits);
            assert_eq!(
                unified_diff_of_regions(&old_text, &new_text, &regions, "a", "b"),
                reference(&old_text, &new_text),
                "{edits:?}"
            );
        }
        assert_eq!(unified_diff_of_regions("a\n", "a\n", &[], "a", "b"), "");
        // Where the text repeats, the hunks show the edit where it was made.
        let old: Vec<String> = ["x", "y", "x", "y", "z"]
            .iter()
            .map(|l| format!("{l}\n"))
            .collect();
        let (old_text, new_text, regions) = edited(&old, &[(2, 2, &[])]);
        assert_eq!(
            unified_diff_of_regions(&old_text, &new_text, &regions, "a", "b"),
            "--- a\n+++ b\n@@ -1,5 +1,3 @@\n x\n y\n-x\n-y\n z\n"
        );
    }
}
