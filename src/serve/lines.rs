//! Input lines with a length bound: a line longer than the bound is skipped in
//! fixed-size chunks and reported, so one huge line never becomes one huge buffer.

use std::io::{BufRead, BufReader, Read};

const CHUNK_BYTES: usize = 64 * 1024;
/// Above this the line buffer is given back after use, so one large (but allowed)
/// line does not pin its capacity for the rest of the run.
const KEEP_CAPACITY: usize = 256 * 1024;

pub enum Line<'a> {
    /// The bytes of the line, without its `\n`.
    Bytes(&'a [u8]),
    /// The line had more than the bound; `bytes` is how long it was.
    TooLong { bytes: usize },
}

pub struct BoundedLines<R> {
    reader: BufReader<R>,
    line: Vec<u8>,
    max_bytes: usize,
}

impl<R: Read> BoundedLines<R> {
    pub fn new(input: R, max_bytes: usize) -> Self {
        BoundedLines {
            reader: BufReader::with_capacity(CHUNK_BYTES, input),
            line: Vec::new(),
            max_bytes,
        }
    }

    /// The next line; `None` at end of input. A last line without `\n` counts.
    pub fn next_line(&mut self) -> Option<std::io::Result<Line<'_>>> {
        if self.line.capacity() > KEEP_CAPACITY {
            self.line = Vec::new();
        }
        self.line.clear();
        let mut length = 0usize;
        let mut overflowed = false;
        loop {
            let chunk = match self.reader.fill_buf() {
                Ok(chunk) => chunk,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Some(Err(e)),
            };
            if chunk.is_empty() {
                if length == 0 {
                    return None;
                }
                break;
            }
            let (taken, ends) = match find_newline(chunk) {
                Some(newline) => (newline, true),
                None => (chunk.len(), false),
            };
            length += taken;
            if length > self.max_bytes {
                if !overflowed {
                    overflowed = true;
                    self.line = Vec::new();
                }
            } else {
                self.line.extend_from_slice(&chunk[..taken]);
            }
            self.reader.consume(if ends { taken + 1 } else { taken });
            if ends {
                break;
            }
        }
        if overflowed {
            return Some(Ok(Line::TooLong { bytes: length }));
        }
        if self.line.last() == Some(&b'\r') {
            self.line.pop();
        }
        Some(Ok(Line::Bytes(&self.line)))
    }
}

fn find_newline(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|&b| b == b'\n')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(input: &[u8], max: usize) -> Vec<Result<Vec<u8>, usize>> {
        let mut lines = BoundedLines::new(input, max);
        let mut out = Vec::new();
        while let Some(line) = lines.next_line() {
            out.push(match line.unwrap() {
                Line::Bytes(b) => Ok(b.to_vec()),
                Line::TooLong { bytes } => Err(bytes),
            });
        }
        out
    }

    #[test]
    fn long_lines_are_reported_and_the_next_line_survives() {
        let mut input = vec![b'x'; 200_000];
        input.extend_from_slice(b"\nshort\r\n\nlast");
        assert_eq!(
            collect(&input, 1000),
            vec![
                Err(200_000),
                Ok(b"short".to_vec()),
                Ok(Vec::new()),
                Ok(b"last".to_vec())
            ]
        );
    }

    #[test]
    fn a_line_of_exactly_the_bound_is_kept() {
        assert_eq!(
            collect(b"abcd\nabcde\n", 4),
            vec![Ok(b"abcd".to_vec()), Err(5)]
        );
    }
}
