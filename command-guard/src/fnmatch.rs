//! Python-`fnmatch`-style globs (`*`, `?`, `[...]`, `[!...]`), translated to anchored regexes.
//! `*` crosses `/` and there is no backslash escaping, as in `fnmatch.fnmatch`.

use regex::{Regex, RegexBuilder};

pub(crate) fn glob_to_regex(glob: &str, case_insensitive: bool) -> Option<Regex> {
    let chars: Vec<char> = glob.chars().collect();
    let mut pattern = String::from("^");
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '*' => pattern.push_str(".*"),
            '?' => pattern.push('.'),
            '[' => match class_end(&chars, i) {
                Some(end) => {
                    let mut body: String = chars[i + 1..end].iter().collect();
                    let negated = body.starts_with('!');
                    if negated {
                        body.remove(0);
                    }
                    let escaped: String = body
                        .chars()
                        .map(|c| {
                            if matches!(c, '\\' | '[' | ']' | '^' | '&' | '~') {
                                format!("\\{c}")
                            } else {
                                c.to_string()
                            }
                        })
                        .collect();
                    pattern.push('[');
                    if negated {
                        pattern.push('^');
                    }
                    pattern.push_str(&escaped);
                    pattern.push(']');
                    i = end;
                }
                None => pattern.push_str(r"\["),
            },
            c => pattern.push_str(&regex::escape(&c.to_string())),
        }
        i += 1;
    }
    pattern.push('$');
    RegexBuilder::new(&pattern)
        .case_insensitive(case_insensitive)
        .dot_matches_new_line(true)
        .build()
        .ok()
}

/// Index of the `]` closing the class opened at `open`; a `]` first in the class is literal.
fn class_end(chars: &[char], open: usize) -> Option<usize> {
    let mut j = open + 1;
    if chars.get(j) == Some(&'!') {
        j += 1;
    }
    if chars.get(j) == Some(&']') {
        j += 1;
    }
    while j < chars.len() {
        if chars[j] == ']' {
            return Some(j);
        }
        j += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn translates_globs() {
        let re = glob_to_regex("git push --force*", true).unwrap();
        assert!(re.is_match("git push --force origin"));
        assert!(!re.is_match("sudo git push --force"));
        assert!(glob_to_regex("ls [!x]y", false).unwrap().is_match("ls ay"));
        assert!(glob_to_regex("a[b", false).unwrap().is_match("a[b"));
    }
}
