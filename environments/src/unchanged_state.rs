//! Which commands cannot change what a task's snapshot holds (its exports, functions and
//! aliases), so that their shell need not write the snapshot again.
//!
//! Writing it (`export -p`, `declare -f`, `alias -p` into the file) is a good share of
//! the CPU a short command costs, and most of an agent's commands are programs run with
//! words: `ls -la`, `git status`, `python3 x.py 2>&1 | tail`. A program runs in a child
//! and cannot touch the shell's state; only the shell itself can, through a builtin, an
//! assignment, an expansion that assigns, a function or an alias.
//!
//! The reading fails closed: anything it does not follow (a `$`, a backquote, a
//! newline, a builtin outside the few that change nothing, a name that is not a plain
//! word) means the snapshot is written as before. What it cannot know from the text,
//! whether a name is one of the task's functions or aliases, the shell asks itself
//! after the command, before it decides ([`ShellSession::wrap_body`]).
//!
//! [`ShellSession::wrap_body`]: crate::snapshot::ShellSession::wrap_body

/// The names of the commands `command` runs when it can change none of the shell's
/// exports, functions and aliases, unless one of those names is a function or an alias
/// of the task's; `None` when it may change them, or when telling would take more than
/// this reading.
pub(crate) fn names_run_by(command: &str) -> Option<Vec<&str>> {
    let mut names: Vec<&str> = Vec::new();
    let bytes = command.as_bytes();
    let mut quote = Quote::None;
    // Where the current simple command starts, and whether its name was taken.
    let mut start = 0;
    let mut named = false;
    let mut i = 0;
    while i < bytes.len() {
        let byte = bytes[i];
        if byte == b'\n' || byte == b'\r' || byte == 0 {
            return None;
        }
        match quote {
            Quote::Single => {
                if byte == b'\'' {
                    quote = Quote::None;
                }
            }
            Quote::Double => match byte {
                b'"' => quote = Quote::None,
                b'\\' => i += 1,
                b'$' | b'`' => return None,
                _ => {}
            },
            Quote::None => match byte {
                b'\'' => quote = Quote::Single,
                b'"' => quote = Quote::Double,
                b'\\' => i += 1,
                b'$' | b'`' => return None,
                // `>&`, `<&` and `&>` are redirections, not a command's end.
                b'&' if i > 0 && matches!(bytes[i - 1], b'>' | b'<') => {}
                b'&' if bytes.get(i + 1) == Some(&b'>') => {}
                b';' | b'&' | b'|' => {
                    if !named {
                        take_name(&command[start..i], &mut names)?;
                    }
                    start = i + 1;
                    named = false;
                }
                b'#' if at_word_start(bytes, i) => break,
                b' ' | b'\t' if !named && !command[start..i].trim().is_empty() => {
                    take_name(&command[start..i], &mut names)?;
                    named = true;
                }
                _ => {}
            },
        }
        i += 1;
    }
    if quote != Quote::None {
        return None;
    }
    if !named {
        take_name(&command[start..i.min(bytes.len())], &mut names)?;
    }
    names.sort_unstable();
    names.dedup();
    Some(names)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Quote {
    None,
    Single,
    Double,
}

/// A `#` starts a comment only at the start of a word.
fn at_word_start(bytes: &[u8], i: usize) -> bool {
    i == 0 || matches!(bytes[i - 1], b' ' | b'\t' | b';' | b'&' | b'|')
}

/// Adds the name of the simple command whose text (up to the end of its first word) is
/// `text`; `None` when that name may change the shell's state or is not a plain word (a
/// quoted or escaped name, an assignment, a redirection before the name, a keyword).
fn take_name<'a>(text: &'a str, names: &mut Vec<&'a str>) -> Option<()> {
    let name = text.trim_matches([' ', '\t']);
    if name.is_empty() {
        // Between `&&`, or a command that is only blanks: nothing runs.
        return Some(());
    }
    let plain = name == "["
        || name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_./+:@,-".contains(&b));
    if !plain || KEYWORDS.contains(&name) {
        return None;
    }
    if BUILTINS.contains(&name) && !CHANGE_NOTHING.contains(&name) {
        return None;
    }
    names.push(name);
    Some(())
}

/// Bash's reserved words that a plain word can spell.
const KEYWORDS: &[&str] = &[
    "case", "coproc", "do", "done", "elif", "else", "esac", "fi", "for", "function", "if", "in",
    "select", "then", "time", "until", "while",
];

/// Bash's builtins (`compgen -b` of bash 5.2; a test holds the machine's bash to it).
const BUILTINS: &[&str] = &[
    ".",
    ":",
    "[",
    "alias",
    "bg",
    "bind",
    "break",
    "builtin",
    "caller",
    "cd",
    "command",
    "compgen",
    "complete",
    "compopt",
    "continue",
    "declare",
    "dirs",
    "disown",
    "echo",
    "enable",
    "eval",
    "exec",
    "exit",
    "export",
    "false",
    "fc",
    "fg",
    "getopts",
    "hash",
    "help",
    "history",
    "jobs",
    "kill",
    "let",
    "local",
    "logout",
    "mapfile",
    "popd",
    "printf",
    "pushd",
    "pwd",
    "read",
    "readarray",
    "readonly",
    "return",
    "set",
    "shift",
    "shopt",
    "source",
    "suspend",
    "test",
    "times",
    "trap",
    "true",
    "type",
    "typeset",
    "ulimit",
    "umask",
    "unalias",
    "unset",
    "wait",
];

/// The builtins that change none of the shell's variables, functions or aliases, with
/// any words (`printf` is not one: `-v` assigns).
const CHANGE_NOTHING: &[&str] = &[":", "[", "echo", "false", "pwd", "test", "true", "type"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_and_quiet_builtins_are_named() {
        for (command, names) in [
            ("ls -la", &["ls"][..]),
            ("echo call 3", &["echo"]),
            ("", &[]),
            ("  # only a comment", &[]),
            (
                "git status && git diff --stat | tail -n 5",
                &["git", "tail"],
            ),
            (
                "python3 x.py 2>&1 | grep -v '^$' > out.txt",
                &["grep", "python3"],
            ),
            ("cat a; cat b & wait_for_it", &["cat", "wait_for_it"]),
            ("grep 'a $b `c`' f", &["grep"]),
            (
                "echo \"quoted \\\" # not a comment\" # a comment; cd /",
                &["echo"],
            ),
            ("find . -name '*.rs' -exec wc -l {} \\;", &["find"]),
            ("/usr/bin/env python3 -V", &["/usr/bin/env"]),
            ("./run.sh --x=1 || [ -e y ]", &["./run.sh", "["]),
            ("g++ -O2 a.cc", &["g++"]),
            ("make &>log |& tee x <&3", &["make", "tee"]),
        ] {
            assert_eq!(names_run_by(command).as_deref(), Some(names), "{command}");
        }
    }

    #[test]
    fn what_may_change_the_state_or_is_not_followed_is_refused() {
        for command in [
            "cd /tmp",
            "export A=1",
            "A=1",
            "A=1 ls",
            "ls; unset PATH",
            "ls && source ~/.venv/bin/activate",
            ". ./env.sh",
            "echo $((n=1))",
            "echo ${X:=default}",
            "echo \"$(cd /)\"",
            "echo `pwd`",
            "printf -v PATH x",
            "read LINE < f",
            "eval export A=1",
            "builtin cd /",
            "command cd /",
            "f() { :; }",
            "function f { :; }",
            "{ ls; }",
            "(cd /tmp)",
            "((n++))",
            "[[ a =~ b ]]",
            "if true; then cd /; fi",
            "for f in *; do cd \"$f\"; done",
            "> out cd /",
            "2>/dev/null cd /",
            "\\cd /",
            "'cd' /",
            "c\"d\" /",
            "ls\ncd /",
            "echo 'unterminated",
            "echo \"unterminated",
            "time ls",
            "alias ls=cd",
            "shopt -s extglob",
            "set -a",
            "mapfile x < f",
            "declare -x A=1",
            "exec 3>f",
            "ls | while read x; do :; done",
            "%1",
            "! cd /",
            "~/bin/tool",
        ] {
            assert_eq!(names_run_by(command), None, "{command}");
        }
    }

    /// What the reading lets pass changes nothing in a real bash: its exports,
    /// functions and aliases are the same before and after (the task's own functions and
    /// aliases being other names).
    #[test]
    fn what_passes_changes_nothing_in_bash() {
        let dir = tempfile::tempdir().unwrap();
        for command in [
            "ls -la",
            "echo call 3",
            "  # only a comment",
            "git status && git diff --stat | tail -n 5",
            "python3 x.py 2>&1 | grep -v '^$' > out.txt",
            "cat a; cat b & sleep 0",
            "find . -name '*.rs' -exec wc -l {} \\;",
            "./run.sh --x=1 || [ -e y ]",
            "make &>log |& tee x",
            "type ls; pwd; test -d .; true",
        ] {
            assert!(names_run_by(command).is_some(), "{command}");
            let script = format!(
                "export A=1; f() {{ :; }}; alias z=ls; \\
                 dump() {{ export -p | grep -v ' _='; declare -f; alias -p; }}; \\
                 before=$(dump); eval {} >/dev/null 2>&1; \\
                 [ \"$before\" = \"$(dump)\" ] && echo same",
                crate::env::sh_quote(command)
            );
            let out = std::process::Command::new("bash")
                .args(["--noprofile", "--norc", "-c", &script])
                .current_dir(dir.path())
                .stdin(std::process::Stdio::null())
                .output()
                .expect("bash runs");
            assert_eq!(String::from_utf8_lossy(&out.stdout), "same\n", "{command}");
        }
    }

    /// The list above is the machine's bash's: a builtin it does not know would pass for
    /// a program.
    #[test]
    fn the_builtins_are_those_of_the_machines_bash() {
        let out = std::process::Command::new("bash")
            .args(["--noprofile", "--norc", "-c", "compgen -b"])
            .output()
            .expect("bash runs");
        let mut machines: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_owned)
            .collect();
        machines.sort();
        let mut known: Vec<String> = BUILTINS.iter().map(|b| b.to_string()).collect();
        known.sort();
        let unknown: Vec<&String> = machines.iter().filter(|b| !known.contains(b)).collect();
        assert!(unknown.is_empty(), "builtins not listed: {unknown:?}");
    }
}
