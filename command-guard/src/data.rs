//! Words that are data, not commands: what `echo`/`printf` print (when it goes to a file or the
//! terminal, not into another program), grep patterns, commit and PR messages, prose here-docs
//! written to files. Positionless rules read these as blanks, so prose that mentions
//! `rm -rf /` is not flagged; the shell structure (redirections, substitutions) stays visible.

use std::collections::HashSet;

use crate::command::SimpleCommand;
use crate::tokenize::Word;

#[derive(Debug, Default)]
pub(crate) struct DataSpans {
    /// Char spans of the source text to blank.
    pub text: Vec<(usize, usize)>,
    /// Start offsets of the words blanked.
    pub words: HashSet<usize>,
}

const GREPS: &[&str] = &[
    "grep", "egrep", "fgrep", "rg", "ag", "ack", "zgrep", "git-grep",
];
const MESSAGE_TOOLS: &[&str] = &["git", "hg", "jj", "svn", "gh", "glab"];
const MESSAGE_OPTIONS: &[&str] = &[
    "-m",
    "--message",
    "--title",
    "--body",
    "--notes",
    "--subject",
    "--description",
    "--grep",
];
const FORGE_SHORT_OPTIONS: &[&str] = &["-t", "-b", "-n"];

fn grep_pattern_words(args: &[Word]) -> Vec<&Word> {
    let mut out = Vec::new();
    let mut i = 0;
    let mut explicit = false;
    while i < args.len() {
        let v = args[i].value.as_str();
        match v {
            "-e" | "--regexp" => {
                explicit = true;
                out.extend(args.get(i + 1));
                i += 2;
            }
            "-f" | "-m" | "-A" | "-B" | "-C" | "-d" | "-D" | "--file" | "-g" | "--glob" | "-t"
            | "--type" => i += 2,
            "--" => {
                if !explicit {
                    out.extend(args.get(i + 1));
                }
                return out;
            }
            _ if v.starts_with('-') && v.len() > 1 => i += 1,
            _ => {
                if !explicit {
                    out.push(&args[i]);
                }
                return out;
            }
        }
    }
    out
}

fn message_words<'a>(tool: &str, args: &'a [Word]) -> Vec<&'a Word> {
    let mut out = Vec::new();
    for (i, word) in args.iter().enumerate() {
        let v = word.value.as_str();
        let takes_next = MESSAGE_OPTIONS.contains(&v)
            || (matches!(tool, "gh" | "glab") && FORGE_SHORT_OPTIONS.contains(&v))
            || (v.starts_with('-')
                && !v.starts_with("--")
                && v.len() > 2
                && v.ends_with('m')
                && tool == "git");
        if takes_next {
            out.extend(args.get(i + 1));
        } else if MESSAGE_OPTIONS
            .iter()
            .any(|o| o.starts_with("--") && v.starts_with(&format!("{o}=")))
        {
            out.push(word);
        }
    }
    out
}

pub(crate) fn data_spans(commands: &[SimpleCommand]) -> DataSpans {
    let mut spans = DataSpans::default();
    for (i, command) in commands.iter().enumerate() {
        if command.exec.is_none() {
            continue;
        }
        let output_is_piped = commands
            .get(i + 1)
            .is_some_and(|next| next.piped_from_previous);
        let name = command.exec_name.as_str();
        let args = command.args();
        let words: Vec<&Word> = match name {
            "echo" | "printf" if !output_is_piped => args.iter().collect(),
            n if GREPS.contains(&n) => grep_pattern_words(args),
            n if MESSAGE_TOOLS.contains(&n) => message_words(n, args),
            _ => Vec::new(),
        };
        for word in words {
            spans.text.push((word.start, word.end));
            spans.words.insert(word.start);
        }
        let prose_heredoc =
            !output_is_piped && matches!(name, "cat" | "tee" | "git" | "gh" | "glab");
        if prose_heredoc {
            spans
                .text
                .extend(command.redirects.iter().filter_map(|r| r.heredoc_span));
        }
    }
    spans
}
