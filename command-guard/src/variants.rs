//! Builds every view of a command the rules look at (reference §1.4), once per classification.
//!
//! * **Sources**: the command itself plus every payload the shell would run (R4): `$(...)`,
//!   backticks, process substitutions, `sh -c`/`bash -lc` strings, `eval` arguments, `env -S`
//!   text, `su -c`, read-tool program options and here-docs fed to a shell. Payloads are analysed
//!   breadth-first to a fixed depth; going deeper fails closed (R5).
//! * **Texts** for positionless rules: each source normalized (quoted newlines as spaces, PCRE
//!   grep patterns blanked), the Windows-path variant, and the executable lines below.
//! * **Executable lines**: one per simple command, starting at its deobfuscated executable
//!   basename. Anchoring a regex at the start of such a line *is* the executable-position model,
//!   which replaces the original's marked/faithful variants.

use std::collections::VecDeque;
use std::sync::LazyLock;

use regex::Regex;

use crate::command::{simple_commands, SimpleCommand};
use crate::normalize::{finish, prepare, quoted_newlines_to_spaces};
use crate::structural::{parse_shell_options, read_tool_program, SHELLS};
use crate::tokenize::{find_closing_paren, tokenize, Word};
use crate::GuardContext;

pub(crate) const MAX_PAYLOAD_DEPTH: usize = 8;
const MAX_SOURCES: usize = 512;
const MAX_RAW_CHARS: usize = 128_000;
const MAX_CHARS_WITHOUT_SEPARATOR: usize = 4_096;
const MAX_SEPARATORS: usize = 25_000;

#[derive(Debug, Default)]
pub(crate) struct Source {
    /// Prepared text with quoted spans blanked (quotes kept), for H7/H8.
    pub masked: String,
    /// Normalized text as the rules read it.
    pub main: String,
    pub commands: Vec<SimpleCommand>,
}

#[derive(Debug, Default)]
pub(crate) struct Analysis {
    pub sources: Vec<Source>,
    pub texts: Vec<String>,
    pub exec_lines: Vec<String>,
    /// Executable lines with the executable's path kept, for deny globs.
    pub exec_lines_full: Vec<String>,
    pub limit_exceeded: bool,
    pub malformed_pattern: bool,
}

impl Analysis {
    pub fn commands(&self) -> impl Iterator<Item = &SimpleCommand> {
        self.sources.iter().flat_map(|s| s.commands.iter())
    }
}

/// §1.2 step 1, on the raw text before any work is spent on it.
pub(crate) fn raw_limit_exceeded(raw: &str) -> bool {
    if raw.len() > MAX_RAW_CHARS * 4 {
        return true;
    }
    let mut length = 0usize;
    let mut separators = 0usize;
    for c in raw.chars() {
        length += 1;
        if matches!(c, ';' | '&' | '|' | '\n') {
            separators += 1;
        }
    }
    length > MAX_RAW_CHARS
        || (length > MAX_CHARS_WITHOUT_SEPARATOR && separators == 0)
        || separators >= MAX_SEPARATORS
}

static WINDOWS_PATH: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?:^|[^A-Za-z0-9_])[A-Za-z]:\\|\\\\[A-Za-z0-9_.$-]").expect("valid regex")
});

pub(crate) fn analyze(raw: &str, ctx: &GuardContext) -> Analysis {
    let mut analysis = Analysis::default();
    let mut queue: VecDeque<(String, usize)> = VecDeque::from([(raw.to_string(), 0)]);
    while let Some((text, depth)) = queue.pop_front() {
        if depth > MAX_PAYLOAD_DEPTH || analysis.sources.len() >= MAX_SOURCES {
            analysis.limit_exceeded = true;
            break;
        }
        let source = analyze_source(&text, ctx, &mut analysis, &mut |payload| {
            queue.push_back((payload, depth + 1));
        });
        analysis.texts.push(source.main.clone());
        analysis.sources.push(source);
    }
    let stripped = crate::normalize::strip_ansi(raw);
    // Both alternatives need a backslash; most commands have none and skip the regex.
    if stripped.contains('\\') && WINDOWS_PATH.is_match(&stripped) {
        let windows = finish(&prepare(&stripped.replace('\\', "/"), ctx));
        if !analysis.texts.contains(&windows) {
            analysis.texts.push(windows);
        }
    }
    analysis.texts.extend(analysis.exec_lines.iter().cloned());
    analysis
}

fn analyze_source(
    text: &str,
    ctx: &GuardContext,
    analysis: &mut Analysis,
    enqueue: &mut dyn FnMut(String),
) -> Source {
    let prepared = prepare(text, ctx);
    let mut lexed = tokenize(&prepared);
    let substitution_payloads = std::mem::take(&mut lexed.payloads);
    let mut commands = simple_commands(lexed);
    if let Some(expanded) = crate::expansion::expand_known_variables(&prepared, &mut commands) {
        enqueue(expanded);
    }
    for payload in crate::pipelines::stdin_programs(&commands) {
        enqueue(payload);
    }
    let data_spans = crate::data::data_spans(&commands);

    let mut chars: Vec<char> = prepared.chars().collect();
    let masked = mask_quotes(&chars);
    quoted_newlines_to_spaces(&mut chars);
    for command in &commands {
        if let Some(pattern) = pcre_grep_pattern(command) {
            if pattern.unterminated && pattern.raw.starts_with('\'') {
                analysis.malformed_pattern = true;
            } else if is_wholly_single_quoted(&pattern.raw) {
                for c in chars
                    .iter_mut()
                    .take(pattern.end.saturating_sub(1))
                    .skip(pattern.start + 1)
                {
                    *c = ' ';
                }
            }
        }
    }
    for &(from, to) in &data_spans.text {
        for c in chars.iter_mut().take(to).skip(from) {
            if *c != '\n' {
                *c = ' ';
            }
        }
    }
    let main = finish(&chars.iter().collect::<String>());

    for payload in substitution_payloads {
        enqueue(payload);
    }
    for command in &commands {
        for payload in command_payloads(command) {
            enqueue(payload);
        }
        if let Some(exec) = command.exec {
            // A blanked PCRE pattern stays blank here too: it is regex text, not shell.
            let blanked = pcre_grep_pattern(command).map(|w| w.start);
            let args: Vec<&str> = command.words[exec + 1..]
                .iter()
                .map(|w| {
                    let pcre_pattern = Some(w.start) == blanked && is_wholly_single_quoted(&w.raw);
                    if data_spans.words.contains(&w.start) || pcre_pattern {
                        "''"
                    } else {
                        w.raw.as_str()
                    }
                })
                .collect();
            let render =
                |head: &str| finish(&format!("{head} {}", args.join(" ")).replace('\n', " "));
            analysis.exec_lines.push(render(&command.exec_name));
            analysis.exec_lines_full.push(render(&command.exec_path));
        }
    }
    Source {
        masked,
        main,
        commands,
    }
}

fn is_wholly_single_quoted(raw: &str) -> bool {
    raw.len() >= 2 && raw.starts_with('\'') && raw.ends_with('\'') && raw.matches('\'').count() == 2
}

/// The pattern operand of a PCRE grep (`grep -P`, `rg -P`), whose text is regex syntax, not shell.
fn pcre_grep_pattern(command: &SimpleCommand) -> Option<&Word> {
    if !matches!(
        command.exec_name.as_str(),
        "grep" | "egrep" | "fgrep" | "ggrep" | "rg"
    ) {
        return None;
    }
    let args = command.args();
    let is_pcre = args.iter().any(|w| {
        let v = w.value.as_str();
        v == "--perl-regexp"
            || v == "--pcre2"
            || (v.starts_with('-') && !v.starts_with("--") && v.contains('P'))
    });
    if !is_pcre {
        return None;
    }
    let mut i = 0;
    while i < args.len() {
        let v = args[i].value.as_str();
        match v {
            "-e" | "--regexp" => return args.get(i + 1),
            "-f" | "-m" | "-A" | "-B" | "-C" | "-d" | "-D" | "--file" => i += 2,
            "--" => return args.get(i + 1),
            _ if v.starts_with('-') && v.len() > 1 => i += 1,
            _ => return Some(&args[i]),
        }
    }
    None
}

/// Command texts this simple command hands to a shell (R4).
fn command_payloads(command: &SimpleCommand) -> Vec<String> {
    let mut payloads: Vec<String> = command.env_split_payload.iter().cloned().collect();
    if command.exec.is_none() {
        return payloads;
    }
    let args = command.args();
    let name = command.exec_name.as_str();
    if SHELLS.contains(&name) {
        let shell = parse_shell_options(args);
        if shell.has_dash_c {
            if let Some(i) = shell.first_operand {
                payloads.push(args[i].value.clone());
            }
        } else if shell.first_operand.is_none() {
            for redirect in &command.redirects {
                if let Some(body) = &redirect.heredoc_body {
                    payloads.push(body.clone());
                } else if redirect.op == "<<<" {
                    payloads.extend(redirect.target.as_ref().map(|t| t.value.clone()));
                }
            }
        }
    } else if name == "eval" {
        payloads.push(
            args.iter()
                .map(|w| w.value.as_str())
                .collect::<Vec<_>>()
                .join(" "),
        );
    } else if name == "su" {
        if let Some(i) = args
            .iter()
            .position(|w| w.value == "-c" || w.value == "--command")
        {
            payloads.extend(args.get(i + 1).map(|w| w.value.clone()));
        }
    } else if let Some((_, Some(program))) = read_tool_program(command) {
        payloads.push(program);
    }
    payloads
}

/// Quoted text blanked, quotes kept (reference §1.5): what remains is shell syntax. Command
/// substitutions inside double quotes stay, and so does a quoted redirect target.
fn mask_quotes(chars: &[char]) -> String {
    let mut out = String::with_capacity(chars.len());
    let mut i = 0;
    let mut last_unquoted = ' ';
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\\' => {
                out.push(' ');
                if let Some(&next) = chars.get(i + 1) {
                    out.push(if next == '\n' { '\n' } else { ' ' });
                }
                i += 2;
            }
            '\'' | '"' => {
                let after_redirect = last_unquoted == '>';
                out.push(c);
                i += 1;
                while i < chars.len() && chars[i] != c {
                    let inner = chars[i];
                    if c == '"' && inner == '\\' {
                        out.push(' ');
                        i += 1;
                        if i < chars.len() {
                            out.push(' ');
                            i += 1;
                        }
                        continue;
                    }
                    if c == '"' && inner == '$' && chars.get(i + 1) == Some(&'(') {
                        let close = find_closing_paren(chars, i + 2).unwrap_or(chars.len() - 1);
                        out.extend(&chars[i..=close.min(chars.len() - 1)]);
                        i = close + 1;
                        continue;
                    }
                    if c == '"' && inner == '`' {
                        let mut j = i + 1;
                        while j < chars.len() && chars[j] != '`' {
                            j += 1;
                        }
                        out.extend(&chars[i..=j.min(chars.len() - 1)]);
                        i = j + 1;
                        continue;
                    }
                    out.push(if after_redirect && inner != '>' {
                        inner
                    } else {
                        ' '
                    });
                    i += 1;
                }
                if i < chars.len() {
                    out.push(c);
                    i += 1;
                }
                last_unquoted = c;
            }
            _ => {
                out.push(c);
                if !c.is_whitespace() {
                    last_unquoted = c;
                }
                i += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_quoted_text() {
        let chars: Vec<char> = r#"echo "a > b $(x)" 'c' > "/dev/sda""#.chars().collect();
        assert_eq!(mask_quotes(&chars), r#"echo "      $(x)" ' ' > "/dev/sda""#);
    }

    #[test]
    fn payloads_are_recursive() {
        let a = analyze(
            r#"bash -c "eval 'echo \$(reboot)'""#,
            &GuardContext::default(),
        );
        assert!(a.commands().any(|c| c.exec_name == "reboot"));
    }
}
