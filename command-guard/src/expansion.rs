//! Shell variables the command itself assigns literal values to (`a=rm; $a -rf x`,
//! `export m=mkfs; ${m}.ext4 ...`): the command is re-read with them substituted, so every rule
//! sees what the shell would run. A command name that stays unknown fails closed elsewhere.

use crate::command::SimpleCommand;

const DECLARERS: &[&str] = &["export", "readonly", "declare", "typeset", "local"];

fn is_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `NAME=value` pairs whose value holds no expansion of its own.
fn literal_assignments(commands: &[SimpleCommand]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for command in commands {
        let words = match command.exec {
            None => &command.words[..],
            Some(_) if DECLARERS.contains(&command.exec_name.as_str()) => command.args(),
            Some(_) => continue,
        };
        for word in words {
            let Some((name, value)) = word.value.split_once('=') else {
                continue;
            };
            if is_name(name) && !value.contains(['$', '`']) {
                out.push((name.to_string(), value.to_string()));
            }
        }
    }
    out
}

/// `text` with `$NAME` and `${NAME}` replaced for every known name.
fn substitute(text: &str, known: &[(String, String)]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let (name, consumed) = if let Some(braced) = after.strip_prefix('{') {
            match braced.find('}') {
                Some(end) => (&braced[..end], end + 2),
                None => ("", 0),
            }
        } else {
            let end = after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(after.len());
            (&after[..end], end)
        };
        // The last assignment wins, as it does in a straight-line script.
        match known.iter().rev().find(|(n, _)| n == name) {
            Some((_, value)) if consumed > 0 => {
                out.push_str(value);
                rest = &after[consumed..];
            }
            _ => {
                out.push('$');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The text with known variables substituted, when that changes anything. Command names
/// that substitution fully resolves are no longer dynamic.
pub(crate) fn expand_known_variables(text: &str, commands: &mut [SimpleCommand]) -> Option<String> {
    if !text.contains('$') {
        return None;
    }
    let known = literal_assignments(commands);
    if known.is_empty() {
        return None;
    }
    for command in commands.iter_mut().filter(|c| c.dynamic_exec) {
        let Some(exec) = command.exec else { continue };
        let resolved = substitute(&command.words[exec].value, &known);
        if !resolved.contains(['$', '`', '*', '?', '[', '{']) {
            command.dynamic_exec = false;
        }
    }
    let expanded = substitute(text, &known);
    (expanded != text).then_some(expanded)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn substitutes_plain_and_braced_names() {
        let known = vec![
            ("a".to_string(), "rm".to_string()),
            ("m".to_string(), "mkfs".to_string()),
        ];
        assert_eq!(
            substitute("$a -rf x; ${m}.ext4 $HOME $ab", &known),
            "rm -rf x; mkfs.ext4 $HOME $ab"
        );
    }
}
