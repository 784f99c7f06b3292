//! Text normalization shared by every variant (reference §1.3) and the ANSI stripper (§3.6).
//!
//! The pipeline is split in two halves because the shell tokenizer wants to see quotes and
//! backslashes as the shell would, while the regex-based rules want them gone:
//! [`prepare`] (ANSI/NUL/NFKC, continuations, home folding, `$IFS`) feeds the tokenizer, and
//! [`finish`] (escape dropping, empty-quote deletion) turns any prepared text into rule input.

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::Regex;
use unicode_normalization::UnicodeNormalization;

use crate::GuardContext;

const ESC: char = '\u{1b}';
const BEL: char = '\u{07}';
const C1_ST: char = '\u{9c}';

/// Remove every ECMA-48 control sequence: CSI, OSC, DCS/SOS/PM/APC strings, nF escapes,
/// Fp/Fe/Fs escapes, their 8-bit C1 forms and any other C1 control.
///
/// An unterminated control *string* (OSC/DCS/...) loses only its introducer: dropping everything
/// up to the end would let an attacker hide a command behind a lone `ESC ]`.
pub fn strip_ansi(input: &str) -> Cow<'_, str> {
    if !input
        .chars()
        .any(|c| c == ESC || ('\u{80}'..='\u{9f}').contains(&c))
    {
        return Cow::Borrowed(input);
    }
    let chars: Vec<char> = input.chars().collect();
    let mut out = String::with_capacity(input.len());
    let mut stripper = Stripper {
        chars: &chars,
        no_terminator_from: usize::MAX,
    };
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        i = match c {
            ESC => stripper.skip_escape(i),
            '\u{9b}' => stripper.skip_csi_body(i + 1),
            '\u{9d}' | '\u{90}' | '\u{98}' | '\u{9e}' | '\u{9f}' => {
                stripper.skip_string_body(i + 1)
            }
            '\u{80}'..='\u{9f}' => i + 1,
            _ => {
                out.push(c);
                i + 1
            }
        };
    }
    Cow::Owned(out)
}

struct Stripper<'a> {
    chars: &'a [char],
    /// Once a search for a string terminator failed from some position, every later search
    /// fails too; remembering it keeps many unterminated strings linear.
    no_terminator_from: usize,
}

impl Stripper<'_> {
    fn at(&self, i: usize) -> Option<u32> {
        self.chars.get(i).map(|&c| c as u32)
    }

    fn skip_escape(&mut self, esc: usize) -> usize {
        let Some(next) = self.at(esc + 1) else {
            return esc + 1;
        };
        match next {
            0x5b => self.skip_csi_body(esc + 2), // ESC [
            0x5d | 0x50 | 0x58 | 0x5e | 0x5f => self.skip_string_body(esc + 2), // ] P X ^ _
            0x20..=0x2f => {
                let mut j = esc + 1;
                while matches!(self.at(j), Some(0x20..=0x2f)) {
                    j += 1;
                }
                if matches!(self.at(j), Some(0x30..=0x7e)) {
                    j + 1
                } else {
                    j
                }
            }
            0x30..=0x7e => esc + 2,
            _ => esc + 1,
        }
    }

    fn skip_csi_body(&self, mut j: usize) -> usize {
        while matches!(self.at(j), Some(0x30..=0x3f)) {
            j += 1;
        }
        while matches!(self.at(j), Some(0x20..=0x2f)) {
            j += 1;
        }
        if matches!(self.at(j), Some(0x40..=0x7e)) {
            j + 1
        } else {
            j
        }
    }

    fn skip_string_body(&mut self, start: usize) -> usize {
        if start >= self.no_terminator_from {
            return start;
        }
        let mut j = start;
        while j < self.chars.len() {
            match self.chars[j] {
                BEL | C1_ST => return j + 1,
                ESC if self.chars.get(j + 1) == Some(&'\\') => return j + 2,
                _ => j += 1,
            }
        }
        self.no_terminator_from = start;
        start
    }
}

/// First half of §1.3: steps 1, 2, 3 and 6. The result is what the tokenizer reads.
pub(crate) fn prepare(raw: &str, ctx: &GuardContext) -> String {
    let stripped = strip_ansi(raw);
    let mut text: String = stripped.chars().filter(|&c| c != '\0').collect();
    if !text.is_ascii() {
        text = text.nfkc().collect();
    }
    if text.contains("\\\n") || text.contains("\\\r\n") {
        text = text.replace("\\\r\n", "").replace("\\\n", "");
    }
    text = fold_homes(&text, ctx);
    if text.contains("$IFS") || text.contains("${IFS") {
        text = IFS_EXPANSION.replace_all(&text, " ").into_owned();
    }
    text
}

/// Second half of §1.3: steps 4 and 5, applied to text that no longer needs shell structure.
pub(crate) fn finish(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.peek() {
                Some(&next) if next != '\n' => {
                    out.push(next);
                    chars.next();
                }
                _ => out.push(c),
            }
        } else {
            out.push(c);
        }
    }
    if out.contains("''") || out.contains("\"\"") {
        out = out.replace("''", "").replace("\"\"", "");
    }
    out
}

/// Newlines inside quotes are data, not command separators: the main variant turns them into
/// spaces so "same line" rules keep seeing one command.
pub(crate) fn quoted_newlines_to_spaces(chars: &mut [char]) {
    let mut quote: Option<char> = None;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match quote {
            None => match c {
                '\\' => i += 1,
                '\'' | '"' => quote = Some(c),
                _ => {}
            },
            Some(q) => {
                if c == q {
                    quote = None;
                } else if c == '\\' && q == '"' {
                    i += 1;
                } else if c == '\n' {
                    chars[i] = ' ';
                }
            }
        }
        i += 1;
    }
}

static IFS_EXPANSION: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\$\{IFS[^}]*\}|\$IFS(?-u:\b)").expect("valid IFS regex"));

fn path_components(path: &str) -> Vec<&str> {
    path.split(['/', '\\']).filter(|c| !c.is_empty()).collect()
}

/// Both separator spellings of a home path, so `C:\Users\x` also folds `C:/Users/x`.
fn separator_forms(path: &str) -> Vec<String> {
    let components = path_components(path);
    if components.len() < 2 {
        return Vec::new();
    }
    let rooted = path.starts_with(['/', '\\']);
    ["/", "\\"]
        .iter()
        .map(|sep| {
            let joined = components.join(sep);
            if rooted {
                format!("{sep}{joined}")
            } else {
                joined
            }
        })
        .collect()
}

fn is_path_boundary(c: char) -> bool {
    c.is_whitespace()
        || matches!(
            c,
            '\'' | '"' | ';' | '&' | '|' | '<' | '>' | '(' | ')' | '`'
        )
}

fn continues_a_name(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '_' | '.' | '-' | '/' | '\\' | '~' | '$')
}

/// Step 3: Hermes home then user home become `~/.hermes` / `~`, so the path-family rules need
/// only one spelling. Only paths with a non-empty tail fold (the bare home is left alone).
fn fold_homes(text: &str, ctx: &GuardContext) -> String {
    let mut needles: Vec<(String, &'static str)> = Vec::new();
    for (path, replacement) in [
        (&ctx.hermes_home, "~/.hermes"),
        (&ctx.hermes_home_real, "~/.hermes"),
        (&ctx.home, "~"),
        (&ctx.home_real, "~"),
    ] {
        if let Some(path) = path {
            for form in separator_forms(path) {
                needles.push((form, replacement));
            }
        }
    }
    needles.retain(|(n, _)| text.contains(n.as_str()));
    if needles.is_empty() {
        return text.to_string();
    }
    needles.sort_by_key(|(needle, _)| std::cmp::Reverse(needle.len()));

    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut previous: Option<char> = None;
    'scan: while !rest.is_empty() {
        if previous.is_none_or(|p| !continues_a_name(p)) {
            for (needle, replacement) in &needles {
                let Some(after) = rest.strip_prefix(needle.as_str()) else {
                    continue;
                };
                let mut tail_chars = after.chars();
                let Some(sep @ ('/' | '\\')) = tail_chars.next() else {
                    continue;
                };
                let tail_start = &after[sep.len_utf8()..];
                let tail_len = tail_start
                    .find(is_path_boundary)
                    .unwrap_or(tail_start.len());
                if tail_len == 0 {
                    continue;
                }
                out.push_str(replacement);
                out.push('/');
                out.extend(
                    tail_start[..tail_len]
                        .chars()
                        .map(|c| if c == '\\' { '/' } else { c }),
                );
                previous = tail_start[..tail_len].chars().last();
                rest = &tail_start[tail_len..];
                continue 'scan;
            }
        }
        let Some(c) = rest.chars().next() else { break };
        out.push(c);
        previous = Some(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_csi_osc_and_c1() {
        assert_eq!(strip_ansi("\x1b[31mrm\x1b[0m -rf /"), "rm -rf /");
        assert_eq!(strip_ansi("\x1b]0;title\x07rm"), "rm");
        assert_eq!(strip_ansi("\u{9b}31mrm\u{9b}0m"), "rm");
        assert_eq!(strip_ansi("\x1bPdata\x1b\\ok"), "ok");
        assert_eq!(strip_ansi("\x1b(Bok"), "ok");
        assert_eq!(strip_ansi("\x1b]unterminated rm"), "unterminated rm");
    }

    #[test]
    fn folds_homes_by_component() {
        let ctx = GuardContext {
            home: Some("/home/alice".into()),
            ..GuardContext::default()
        };
        assert_eq!(fold_homes("cat /home/alice/.ssh/id", &ctx), "cat ~/.ssh/id");
        assert_eq!(fold_homes("cat /home/alice", &ctx), "cat /home/alice");
        assert_eq!(
            fold_homes("cat /x/home/alice/y", &ctx),
            "cat /x/home/alice/y"
        );
        let win = GuardContext {
            home: Some(r"C:\Users\tester".into()),
            ..GuardContext::default()
        };
        assert_eq!(
            fold_homes(r"x > C:\Users\tester\.bashrc", &win),
            "x > ~/.bashrc"
        );
    }

    #[test]
    fn ifs_and_escapes() {
        let ctx = GuardContext::default();
        assert_eq!(prepare("sed${IFS}-i x", &ctx), "sed -i x");
        assert_eq!(prepare("echo $IFSACONFIG", &ctx), "echo $IFSACONFIG");
        assert_eq!(finish(r"r\m -rf ''/"), "rm -rf /");
    }
}
