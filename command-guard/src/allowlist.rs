//! Operator deny globs and the permanent allowlist's command matching (reference §1.11).

use crate::fnmatch::glob_to_regex;
use crate::variants::Analysis;

/// The first `approvals.deny` glob matching any view of the command, both sides lower-cased.
pub(crate) fn matching_deny_glob(
    raw: &str,
    analysis: &Analysis,
    globs: &[String],
) -> Option<String> {
    if globs.is_empty() {
        return None;
    }
    let mut candidates: Vec<String> = vec![raw.trim().to_string()];
    candidates.extend(analysis.texts.iter().cloned());
    candidates.extend(analysis.exec_lines_full.iter().cloned());
    let candidates: Vec<String> = candidates
        .iter()
        .map(|c| collapse_whitespace(&c.to_lowercase()))
        .collect();
    globs.iter().find_map(|glob| {
        let re = glob_to_regex(glob.trim(), true)?;
        candidates
            .iter()
            .any(|c| re.is_match(c))
            .then(|| glob.clone())
    })
}

fn collapse_whitespace(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A command with no shell structure beyond one program and its arguments, so a literal or glob
/// allowlist entry cannot be stretched to approve something chained onto it.
pub fn is_simple_command(cmd: &str) -> bool {
    let mut quote: Option<char> = None;
    let mut quoted_control = false;
    let mut chars = cmd.chars().peekable();
    // The `'\\'` arms consume the escaped character in their guard, whether or not it matches.
    while let Some(c) = chars.next() {
        match quote {
            None => match c {
                '\n' | '\r' | ';' | '&' | '|' | '<' | '>' | '`' => return false,
                '$' if chars.peek() == Some(&'(') => return false,
                '\\' if chars.next().is_some_and(char::is_control) => quoted_control = true,
                '\'' | '"' => quote = Some(c),
                _ => {}
            },
            Some('\'') => {
                if c == '\'' {
                    quote = None;
                } else if c.is_control() {
                    quoted_control = true;
                }
            }
            Some(_) => match c {
                '"' => quote = None,
                '$' | '`' => return false,
                '\\' if chars.next().is_some_and(char::is_control) => quoted_control = true,
                c if c.is_control() => quoted_control = true,
                _ => {}
            },
        }
    }
    if quote.is_some() {
        return false;
    }
    !(quoted_control && cmd.split_whitespace().any(is_inline_code_option))
}

fn is_inline_code_option(word: &str) -> bool {
    let word = word.trim_matches(['\'', '"']);
    if let Some(long) = word.strip_prefix("--") {
        return ["command", "eval", "exec"]
            .iter()
            .any(|o| long.starts_with(o));
    }
    word.strip_prefix('-')
        .is_some_and(|cluster| !cluster.is_empty() && cluster.contains(['c', 'e']))
}

/// Whether a simple command equals an allowlist entry or matches one containing `* ? [`
/// (case-sensitive). Entries that are finding keys are the approval layer's business.
pub fn matches_allowlist(cmd: &str, entries: &[String]) -> bool {
    if !is_simple_command(cmd) {
        return false;
    }
    let command = cmd.trim();
    entries.iter().any(|entry| {
        let entry = entry.trim();
        entry == command
            || (entry.contains(['*', '?', '['])
                && glob_to_regex(entry, false).is_some_and(|re| re.is_match(command)))
    })
}
