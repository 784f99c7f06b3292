//! A file's lines as a V4A patch edits them, hunk by hunk: the file stays one
//! borrowed string with an index of where its lines start, and each hunk replaces a
//! run of lines with new ones, recorded as a list of pieces. Patching a few lines of a
//! large file so copies only the lines a hunk writes, and the new text once at the end;
//! the pieces also say which regions changed, so only those are diffed.

use crate::shared::find_replace::diff::Region;
use std::borrow::Cow;
use std::ops::Range;

/// One line: its text without the line break, and whether its break is CRLF (a line no
/// hunk replaces keeps its own break, whatever the other lines use).
#[derive(Clone, Debug)]
pub struct Line<'a> {
    pub text: Cow<'a, str>,
    pub crlf: bool,
}

#[derive(Debug)]
enum Piece<'a> {
    /// Lines of the original text, by number.
    Kept(Range<usize>),
    Written(Vec<Line<'a>>),
}

impl Piece<'_> {
    fn len(&self) -> usize {
        match self {
            Piece::Kept(range) => range.len(),
            Piece::Written(lines) => lines.len(),
        }
    }
}

/// Wanted lines shorter than this are too common to search for as substrings.
const TELLING_LENGTH: usize = 12;

pub struct Spliced<'a> {
    text: &'a str,
    /// Where each original line starts, and `text.len()` last.
    starts: Vec<usize>,
    pieces: Vec<Piece<'a>>,
    len: usize,
}

impl<'a> Spliced<'a> {
    pub fn new(text: &'a str) -> Spliced<'a> {
        let mut starts = Vec::with_capacity(text.len() / 40 + 2);
        starts.push(0);
        starts.extend(memchr::memchr_iter(b'\n', text.as_bytes()).map(|at| at + 1));
        if *starts.last().expect("starts has the first line") != text.len() {
            starts.push(text.len());
        }
        let originals = starts.len() - 1;
        let pieces = if originals == 0 {
            Vec::new()
        } else {
            vec![Piece::Kept(0..originals)]
        };
        Spliced {
            text,
            starts,
            pieces,
            len: originals,
        }
    }

    /// How many lines the text has now.
    pub fn len(&self) -> usize {
        self.len
    }

    fn originals(&self) -> usize {
        self.starts.len() - 1
    }

    fn original(&self, number: usize) -> Line<'a> {
        let body = self.body(number);
        // Two bytes cut from the line: `\r\n`.
        let crlf = self.starts[number + 1] - self.starts[number] == body.len() + 2;
        Line {
            text: Cow::Borrowed(body),
            crlf,
        }
    }

    /// Line `at` as it is now.
    pub fn line(&self, at: usize) -> Line<'a> {
        let mut first = 0;
        for piece in &self.pieces {
            if at < first + piece.len() {
                return match piece {
                    Piece::Kept(range) => self.original(range.start + at - first),
                    Piece::Written(lines) => lines[at - first].clone(),
                };
            }
            first += piece.len();
        }
        panic!("line {at} of {} lines", self.len)
    }

    /// Every line's text as it is now, in order.
    pub fn texts(&self) -> Texts<'_, 'a> {
        self.texts_from(0)
    }

    /// The texts of the lines from line `first` on.
    pub fn texts_from(&self, first: usize) -> Texts<'_, 'a> {
        let mut before = 0;
        for (piece, lines) in self.pieces.iter().enumerate() {
            if first < before + lines.len() {
                return Texts {
                    spliced: self,
                    piece,
                    at: first - before,
                };
            }
            before += lines.len();
        }
        Texts {
            spliced: self,
            piece: self.pieces.len(),
            at: 0,
        }
    }

    /// Original line `number` without its break.
    fn body(&self, number: usize) -> &'a str {
        let text: &'a str = self.text;
        let (start, mut end) = (self.starts[number], self.starts[number + 1]);
        let bytes = text.as_bytes();
        if end > start && bytes[end - 1] == b'\n' {
            end -= 1;
            if end > start && bytes[end - 1] == b'\r' {
                end -= 1;
            }
        }
        &text[start..end]
    }

    /// The lines now containing `wanted`, each once, in order: one substring search over
    /// each stretch of original lines rather than one per line.
    pub fn containing(&self, wanted: &str) -> Vec<usize> {
        if wanted.is_empty() {
            return (0..self.len).collect();
        }
        let finder = memchr::memmem::Finder::new(wanted.as_bytes());
        let mut found = Vec::new();
        let mut first = 0;
        for piece in &self.pieces {
            match piece {
                Piece::Kept(range) => {
                    let from = self.starts[range.start];
                    let bytes = &self.text.as_bytes()[from..self.starts[range.end]];
                    let mut last_line = usize::MAX;
                    for hit in finder.find_iter(bytes) {
                        // The original line holding the hit; a hit that reaches into
                        // its line break is not inside the line.
                        let at = from + hit;
                        let number = self.starts.partition_point(|&start| start <= at) - 1;
                        let body_end = self.starts[number] + self.body(number).len();
                        if number != last_line && at + wanted.len() <= body_end {
                            found.push(first + number - range.start);
                            last_line = number;
                        }
                    }
                }
                Piece::Written(lines) => {
                    found.extend(
                        lines
                            .iter()
                            .enumerate()
                            .filter(|(_, l)| l.text.contains(wanted))
                            .map(|(i, _)| first + i),
                    );
                }
            }
            first += piece.len();
        }
        found
    }

    /// The first `limit` runs of lines equal to `wanted` inside the lines `within`
    /// (overlapping ones too), found by a substring search for the longest wanted line
    /// and a check of the lines around each place it is. `None` when that line is too
    /// short to be telling, or it occurs so often that checking would cost more than
    /// reading every line: the caller then reads every line.
    pub fn exact_runs(
        &self,
        wanted: &[&str],
        within: Range<usize>,
        limit: usize,
    ) -> Option<Vec<usize>> {
        let (offset, telling) = wanted
            .iter()
            .enumerate()
            .max_by_key(|(_, line)| line.len())?;
        if telling.len() < TELLING_LENGTH {
            return None;
        }
        let k = wanted.len();
        let within = within.start..within.end.min(self.len);
        if within.end < within.start + k {
            return Some(Vec::new());
        }
        // Lines that can hold the telling line of a run inside `within`.
        let holders = within.start + offset..within.end - (k - 1 - offset);
        let mut budget = 2 * self.len + 1024;
        let mut found = Vec::new();
        let mut check = |holder: usize, found: &mut Vec<usize>| -> Option<bool> {
            // A check finds its first line among the pieces, then compares k lines.
            budget = budget.checked_sub(k + self.pieces.len())?;
            let start = holder - offset;
            if self
                .texts_from(start)
                .zip(wanted)
                .all(|(line, want)| line == *want)
            {
                found.push(start);
            }
            Some(found.len() >= limit)
        };
        let finder = memchr::memmem::Finder::new(telling.as_bytes());
        let mut first = 0;
        for piece in &self.pieces {
            let lines = first..first + piece.len();
            first = lines.end;
            let (from, to) = (lines.start.max(holders.start), lines.end.min(holders.end));
            if from >= to {
                continue;
            }
            match piece {
                Piece::Kept(range) => {
                    let numbers = range.start + from - lines.start..range.start + to - lines.start;
                    let base = self.starts[numbers.start];
                    for hit in
                        finder.find_iter(&self.text.as_bytes()[base..self.starts[numbers.end]])
                    {
                        let at = base + hit;
                        let number = self.starts.partition_point(|&start| start <= at) - 1;
                        // Only a whole line counts.
                        let whole_line =
                            self.starts[number] == at && self.body(number).len() == telling.len();
                        if whole_line && check(lines.start + number - range.start, &mut found)? {
                            return Some(found);
                        }
                    }
                }
                Piece::Written(written) => {
                    for index in from..to {
                        if written[index - lines.start].text == *telling
                            && check(index, &mut found)?
                        {
                            return Some(found);
                        }
                    }
                }
            }
        }
        Some(found)
    }

    /// Puts `replacement` in place of the `count` lines from line `at`.
    pub fn splice(&mut self, at: usize, count: usize, replacement: Vec<Line<'a>>) {
        assert!(
            at + count <= self.len,
            "splice {at}+{count} past {} lines",
            self.len
        );
        let end = at + count;
        let added = replacement.len();
        let mut head = Vec::with_capacity(self.pieces.len() + 2);
        let mut tail = Vec::new();
        let mut first = 0;
        for piece in std::mem::take(&mut self.pieces) {
            let (start, stop) = (first, first + piece.len());
            first = stop;
            if start < at {
                head.push(part(&piece, 0..at.min(stop) - start));
            }
            if stop > end {
                tail.push(part(&piece, end.max(start) - start..stop - start));
            }
        }
        head.push(Piece::Written(replacement));
        head.extend(tail);
        head.retain(|piece| piece.len() > 0);
        self.pieces = head;
        self.len = self.len - count + added;
    }

    /// The text now, each line with its own break; the last line gets one only when
    /// `trailing_newline`. With it, the regions that changed, for the diff.
    pub fn into_text(mut self, trailing_newline: bool) -> (String, Vec<Region>) {
        self.settle_last_lines(trailing_newline);
        let mut out = String::with_capacity(self.text.len() + self.written_bytes());
        let mut regions = Vec::new();
        // The original line after the last kept one, and where the text after it began.
        let mut next_original = 0;
        let mut open: Option<(usize, usize)> = None; // (new byte start, new line start)
        let mut new_line = 0;
        for piece in &self.pieces {
            match piece {
                Piece::Kept(range) => {
                    let old_start = self.starts[next_original];
                    let removed = range.start > next_original;
                    if removed || open.is_some() {
                        let (new_start, new_first) = open.take().unwrap_or((out.len(), new_line));
                        regions.push(Region {
                            old: old_start..self.starts[range.start],
                            new: new_start..out.len(),
                            old_line: next_original,
                            new_line: new_first,
                        });
                    }
                    out.push_str(&self.text[self.starts[range.start]..self.starts[range.end]]);
                    next_original = range.end;
                }
                Piece::Written(lines) => {
                    open.get_or_insert((out.len(), new_line));
                    for line in lines {
                        out.push_str(&line.text);
                        out.push_str(if line.crlf { "\r\n" } else { "\n" });
                    }
                }
            }
            new_line += piece.len();
        }
        if !trailing_newline && matches!(self.pieces.last(), Some(Piece::Written(_))) {
            let cut = if out.ends_with("\r\n") { 2 } else { 1 };
            out.truncate(out.len() - cut);
        }
        if next_original < self.originals() || open.is_some() {
            let (new_start, new_first) = open.unwrap_or((out.len(), new_line));
            regions.push(Region {
                old: self.starts[next_original]..self.text.len(),
                new: new_start.min(out.len())..out.len(),
                old_line: next_original,
                new_line: new_first,
            });
        }
        regions.retain(|region| self.text[region.old.clone()] != out[region.new.clone()]);
        (out, regions)
    }

    fn written_bytes(&self) -> usize {
        let written = |piece: &Piece<'_>| match piece {
            Piece::Written(lines) => lines.iter().map(|line| line.text.len() + 2).sum(),
            Piece::Kept(_) => 0,
        };
        self.pieces.iter().map(written).sum()
    }

    /// Kept lines are copied with their own bytes, break included; two lines cannot be:
    /// the file's last line when it has no break and other lines now follow it, and the
    /// new last line when the text is to end without a break. Those become written lines.
    fn settle_last_lines(&mut self, trailing_newline: bool) {
        let originals = self.originals();
        let unbroken_last = originals > 0 && !self.text.ends_with('\n');
        let last_piece = self.pieces.len().saturating_sub(1);
        let mut settled = Vec::with_capacity(self.pieces.len() + 2);
        for (index, piece) in std::mem::take(&mut self.pieces).into_iter().enumerate() {
            let is_last = index == last_piece;
            let needs = match &piece {
                Piece::Kept(range) => {
                    let holds_unbroken = unbroken_last && range.end == originals;
                    (holds_unbroken && !is_last)
                        || (!trailing_newline && is_last && !holds_unbroken)
                }
                Piece::Written(_) => false,
            };
            match piece {
                Piece::Kept(range) if needs => {
                    if range.len() > 1 {
                        settled.push(Piece::Kept(range.start..range.end - 1));
                    }
                    settled.push(Piece::Written(vec![self.original(range.end - 1)]));
                }
                piece => settled.push(piece),
            }
        }
        self.pieces = settled;
    }
}

/// The texts of a [`Spliced`]'s lines, in order.
pub struct Texts<'s, 'a> {
    spliced: &'s Spliced<'a>,
    piece: usize,
    at: usize,
}

impl<'s, 'a> Iterator for Texts<'s, 'a> {
    type Item = &'s str;

    fn next(&mut self) -> Option<&'s str> {
        loop {
            let line = match self.spliced.pieces.get(self.piece)? {
                Piece::Kept(range) => (range.start + self.at < range.end)
                    .then(|| self.spliced.body(range.start + self.at)),
                Piece::Written(lines) => lines.get(self.at).map(|line| line.text.as_ref()),
            };
            match line {
                Some(line) => {
                    self.at += 1;
                    return Some(line);
                }
                None => {
                    self.piece += 1;
                    self.at = 0;
                }
            }
        }
    }
}

/// The lines `within` (relative to the piece's first line) of a piece.
fn part<'a>(piece: &Piece<'a>, within: Range<usize>) -> Piece<'a> {
    match piece {
        Piece::Kept(range) => Piece::Kept(range.start + within.start..range.start + within.end),
        Piece::Written(lines) => Piece::Written(lines[within].to_vec()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn joined(lines: &[Line<'_>], trailing_newline: bool) -> String {
        let mut out = String::new();
        for (i, line) in lines.iter().enumerate() {
            out.push_str(&line.text);
            if i + 1 < lines.len() || trailing_newline {
                out.push_str(if line.crlf { "\r\n" } else { "\n" });
            }
        }
        out
    }

    fn written(texts: &[&'static str]) -> Vec<Line<'static>> {
        texts
            .iter()
            .map(|t| Line {
                text: Cow::Borrowed(*t),
                crlf: false,
            })
            .collect()
    }

    /// Every splice, checked against the same edits made on a plain vector of lines.
    #[test]
    fn same_as_editing_a_vector_of_lines() {
        let texts = [
            "a\nb\nc\nd\ne\n",
            "a\nb\nc",
            "a\r\nb\nc\r\n",
            "",
            "x",
            "a\n\nb\n\n",
        ];
        let edits: [&[(usize, usize, &[&'static str])]; 6] = [
            &[(1, 1, &["B"])],
            &[(0, 0, &["first"]), (3, 1, &[])],
            &[(0, 2, &["x", "y", "z"]), (4, 0, &["end"])],
            &[(1, 1, &["B1", "B2"]), (2, 1, &["C"]), (0, 1, &[])],
            &[(99, 0, &["tail"])],
            &[(99, 99, &[])],
        ];
        for text in texts {
            for edit in &edits {
                let mut spliced = Spliced::new(text);
                let mut model: Vec<Line<'_>> =
                    (0..spliced.len()).map(|i| spliced.original(i)).collect();
                for &(at, count, new) in edit.iter() {
                    let at = at.min(model.len());
                    let count = count.min(model.len() - at);
                    spliced.splice(at, count, written(new));
                    model.splice(at..at + count, written(new));
                    assert_eq!(spliced.len(), model.len());
                    for (i, line) in model.iter().enumerate() {
                        assert_eq!(spliced.line(i).text, line.text);
                    }
                    let texts: Vec<&str> = spliced.texts().collect();
                    assert_eq!(
                        texts,
                        model.iter().map(|l| l.text.as_ref()).collect::<Vec<_>>()
                    );
                    for from in 0..=model.len() {
                        assert_eq!(spliced.texts_from(from).count(), model.len() - from);
                    }
                }
                let trailing = text.ends_with('\n') || text.is_empty();
                let expected = joined(&model, trailing);
                let (out, regions) = spliced.into_text(trailing);
                assert_eq!(out, expected, "{text:?} {edit:?}");
                // The text outside the regions is the same on both sides.
                let (mut old_at, mut new_at) = (0, 0);
                for region in &regions {
                    assert_eq!(
                        text[old_at..region.old.start],
                        out[new_at..region.new.start]
                    );
                    old_at = region.old.end;
                    new_at = region.new.end;
                }
                assert_eq!(
                    text[old_at..],
                    out[new_at..],
                    "{text:?} {edit:?} {regions:?}"
                );
                assert_eq!(regions.is_empty(), out == text);
            }
        }
    }

    #[test]
    fn exact_runs_are_every_run() {
        let block = [
            "    let first_value = compute(1);",
            "    let second_value = compute(2);",
            "}",
        ];
        let mut text = String::new();
        for i in 0..40 {
            let lines = if i % 3 == 0 { &block[..] } else { &block[1..] };
            for line in lines {
                text.push_str(line);
                text.push_str(if i % 4 == 0 { "\r\n" } else { "\n" });
            }
        }
        text.push_str(block[0]);
        let mut spliced = Spliced::new(&text);
        spliced.splice(
            10,
            4,
            written(&[
                "    let first_value = compute(1);",
                "    let second_value = compute(2);",
            ]),
        );
        let wanted: [&[&str]; 4] = [&block[..2], &block[..], &block[1..], &block[..1]];
        for want in wanted {
            let all = crate::shared::find_replace::lines::find_runs(
                spliced.texts(),
                want,
                crate::shared::find_replace::lines::exact,
                true,
            );
            for from in [0, 5, 11, 50, spliced.len()] {
                for limit in [1, 2, usize::MAX] {
                    let expected: Vec<usize> = all
                        .iter()
                        .copied()
                        .filter(|&at| at >= from && at + want.len() <= 60)
                        .take(limit)
                        .collect();
                    assert_eq!(
                        spliced.exact_runs(want, from..60, limit),
                        Some(expected),
                        "{want:?} {from} {limit}"
                    );
                }
            }
        }
        assert_eq!(spliced.exact_runs(&["}"], 0..60, 1), None);
    }

    #[test]
    fn lines_containing() {
        let mut spliced = Spliced::new("fn a\nfn b fn\nx\nfn c");
        assert_eq!(spliced.containing("fn"), vec![0, 1, 3]);
        spliced.splice(2, 1, written(&["fn x", "y"]));
        assert_eq!(spliced.containing("fn"), vec![0, 1, 2, 4]);
        assert_eq!(spliced.containing("b fn"), vec![1]);
    }
}
