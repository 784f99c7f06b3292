//! Unified diffs of an edit. An edit usually changes a few lines of a large file, so
//! the common head and tail are skipped with a byte comparison and only the part
//! between them (with its context lines) is diffed: a one-line patch of a 5 MB
//! file costs a memcmp, not a diff of 5 MB.

use std::fmt::Write as _;
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
    let head = common_head(old, new);
    let tail = common_tail(&old[head..], &new[head..]);
    // Keep CONTEXT common lines on each side inside the diffed part.
    let from = back_lines(old, head, CONTEXT);
    let old_end = forward_lines(old, old.len() - tail, CONTEXT);
    let new_end = new.len() - (old.len() - old_end);
    let skipped_lines = bytecount::count(&old.as_bytes()[..from], b'\n');
    let old_part = &old[from..old_end];
    let new_part = &new[from..new_end];
    let diff = similar::TextDiff::configure()
        .algorithm(similar::Algorithm::Myers)
        .deadline(Instant::now() + DEADLINE)
        .diff_lines(old_part, new_part);
    let mut out = String::new();
    let _ = writeln!(out, "--- {old_name}");
    let _ = writeln!(out, "+++ {new_name}");
    for group in diff.grouped_ops(CONTEXT) {
        let (Some(first), Some(last)) = (group.first(), group.last()) else { continue };
        let old_range = (first.old_range().start, last.old_range().end);
        let new_range = (first.new_range().start, last.new_range().end);
        let _ = writeln!(
            out,
            "@@ -{} +{} @@",
            hunk_range(old_range, skipped_lines),
            hunk_range(new_range, skipped_lines)
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
    out
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
    at + a[at..n].iter().zip(&b[at..n]).take_while(|(x, y)| x == y).count()
}

/// Length of the longest common suffix of `a` and `b`.
fn same_suffix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let (a, b) = (&a[a.len() - n..], &b[b.len() - n..]);
    let mut end = n;
    while end >= BLOCK && a[end - BLOCK..end] == b[end - BLOCK..end] {
        end -= BLOCK;
    }
    n - end + a[..end].iter().rev().zip(b[..end].iter().rev()).take_while(|(x, y)| x == y).count()
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
        similar::TextDiff::from_lines(old, new).unified_diff().context_radius(3).header("a", "b").to_string()
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
                old.replace("line 10\n", "x\n").replace("line 150\n", "y\n"),
                old.replace("line 1\n", "x\n").replace(&format!("line {}\n", lines - 2), "y\n"),
                String::new(),
            ];
            for new in cases {
                assert_eq!(unified_diff(&old, &new, "a", "b"), reference(&old, &new));
            }
        }
        assert_eq!(unified_diff("a\nb", "a\nc", "a", "b"), reference("a\nb", "a\nc"));
        assert_eq!(unified_diff("", "x\n", "a", "b"), reference("", "x\n"));
        assert_eq!(unified_diff("x", "x", "a", "b"), "");
    }
}
