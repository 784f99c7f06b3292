//! Simple commands and the one "executable position" model (reference §1.6, requirement R1).
//!
//! Every positional rule asks the same question: after skipping assignments, shell keywords,
//! wrappers (`sudo`, `env`, `nice`, `timeout`, `chroot`, ...) with their options and option
//! arguments, `busybox`/`toybox` and any directory prefix, which word is the program that runs?
//! Answering it once here means no rule can forget a wrapper.

use std::sync::LazyLock;

use regex::Regex;

use crate::tokenize::{Lexed, Op, Redirect, Token, Word};

#[derive(Debug, Clone, Default)]
pub(crate) struct WrapperUse {
    pub name: String,
    /// The wrapper's own option words (original case), e.g. sudo's `-S`.
    pub options: Vec<String>,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct SimpleCommand {
    pub words: Vec<Word>,
    pub redirects: Vec<Redirect>,
    /// Index into `words` of the executable, if the command runs one.
    pub exec: Option<usize>,
    /// Lower-cased, deobfuscated basename of the executable.
    pub exec_name: String,
    /// Lower-cased, deobfuscated executable as written (path kept).
    pub exec_path: String,
    pub wrappers: Vec<WrapperUse>,
    /// `env -S TEXT ...`: the text env would split and run.
    pub env_split_payload: Option<String>,
    pub unterminated: bool,
    /// Its standard input is the previous command's output (`a | b`).
    pub piped_from_previous: bool,
    /// The executable's name is only known at run time (`$cmd`, `$(...)`, `${a}.ext4`).
    pub dynamic_exec: bool,
}

impl SimpleCommand {
    pub fn args(&self) -> &[Word] {
        match self.exec {
            Some(i) => self.words.get(i + 1..).unwrap_or(&[]),
            None => &[],
        }
    }

    pub fn arg_values(&self) -> impl Iterator<Item = &str> {
        self.args().iter().map(|w| w.value.as_str())
    }
}

const KEYWORDS: &[&str] = &[
    "if", "then", "else", "elif", "fi", "do", "done", "while", "until", "!", "{", "}", "esac",
];
/// Keywords whose following words are data (loop variables, case subjects), not a command.
const DATA_KEYWORDS: &[&str] = &["for", "case", "select", "function"];

/// Split tokens into simple commands at every control operator and locate their executables.
pub(crate) fn simple_commands(lexed: Lexed) -> Vec<SimpleCommand> {
    let mut commands = Vec::new();
    let mut current = SimpleCommand::default();
    for token in lexed.tokens {
        match token {
            Token::Word(w) => current.words.push(w),
            Token::Redirect(r) => current.redirects.push(r),
            Token::Op(op) => {
                if !current.words.is_empty() || !current.redirects.is_empty() {
                    commands.push(std::mem::take(&mut current));
                }
                current.piped_from_previous = op == Op::Pipe;
            }
        }
    }
    if !current.words.is_empty() || !current.redirects.is_empty() {
        commands.push(current);
    }
    for command in &mut commands {
        command.unterminated = command.words.iter().any(|w| w.unterminated)
            || command
                .redirects
                .iter()
                .any(|r| r.target.as_ref().is_some_and(|t| t.unterminated));
        locate_executable(command);
    }
    commands
}

pub(crate) fn basename(path: &str) -> &str {
    path.rsplit(['/', '\\']).next().unwrap_or(path)
}

fn is_assignment(value: &str) -> bool {
    let Some((name, _)) = value.split_once('=') else {
        return false;
    };
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn is_number(value: &str) -> bool {
    let digits = value.strip_prefix(['-', '+']).unwrap_or(value);
    !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit() || c == '.')
}

/// What a wrapper does with the words after it.
struct WrapperSpec {
    /// Short option letters that consume the next word (or the rest of their cluster).
    short_with_value: &'static str,
    /// Long options that consume the next word unless written `--opt=value`.
    long_with_value: &'static [&'static str],
    /// Options that turn the wrapper into a query: nothing runs.
    query: &'static [&'static str],
    /// Positional words the wrapper takes before the command (`timeout 10`, `chroot DIR`).
    positionals: usize,
    /// Bare numbers are options (`nice -10`, `chrt 50`).
    numbers_are_options: bool,
}

fn wrapper_spec(name: &str) -> Option<WrapperSpec> {
    let spec = |short, long, query, positionals, numbers| WrapperSpec {
        short_with_value: short,
        long_with_value: long,
        query,
        positionals,
        numbers_are_options: numbers,
    };
    Some(match name {
        "sudo" | "doas" => spec(
            "ugpChDrtTUR",
            &[
                "--user",
                "--group",
                "--host",
                "--prompt",
                "--close-from",
                "--chdir",
                "--role",
                "--type",
                "--command-timeout",
                "--other-user",
                "--chroot",
            ],
            &[],
            0,
            false,
        ),
        "pkexec" => spec("", &["--user"], &[], 0, false),
        "env" => spec("uC", &["--unset", "--chdir"], &[], 0, false),
        "exec" => spec("a", &[], &[], 0, false),
        "nohup" | "builtin" => spec("", &[], &[], 0, false),
        "setsid" => spec("", &[], &[], 0, false),
        "time" => spec("o", &["--output", "--format"], &[], 0, false),
        "command" => spec("", &[], &["-v", "-V"], 0, false),
        "nice" => spec("n", &["--adjustment"], &[], 0, true),
        "timeout" => spec("sk", &["--signal", "--kill-after"], &[], 1, false),
        "stdbuf" => spec("ioe", &["--input", "--output", "--error"], &[], 0, true),
        "ionice" => spec(
            "cnP",
            &["--class", "--classdata", "--pgid", "--uid"],
            &["-p", "--pid", "-P", "--pgid", "-u", "--uid"],
            0,
            true,
        ),
        "chrt" => spec(
            "T",
            &["--sched-runtime", "--sched-period", "--sched-deadline"],
            &["-p", "--pid"],
            0,
            true,
        ),
        "taskset" => spec("", &[], &["-p", "--pid"], 1, false),
        "chroot" => spec("", &["--userspec", "--groups"], &[], 1, false),
        "runuser" | "sg" => spec(
            "ugGl",
            &["--user", "--group", "--supp-group"],
            &[],
            0,
            false,
        ),
        "unshare" | "nsenter" | "setpriv" | "strace" | "ltrace" | "caffeinate" | "proxychains"
        | "proxychains4" | "torsocks" | "xvfb-run" | "catchsegv" => spec(
            "tSeopEaIOuUgG",
            &[
                "--target", "--setuid", "--setgid", "--output", "--user", "--group", "--regid",
                "--reuid",
            ],
            &[],
            0,
            false,
        ),
        "systemd-run" => spec(
            "pEMuH",
            &[
                "--property",
                "--setenv",
                "--machine",
                "--unit",
                "--uid",
                "--gid",
                "--working-directory",
                "--description",
                "--slice",
                "--host",
            ],
            &[],
            0,
            false,
        ),
        "flock" => spec(
            "wEcno",
            &["--timeout", "--conflict-exit-code", "--command"],
            &[],
            1,
            false,
        ),
        "faketime" => spec("f", &[], &[], 1, false),
        _ => return None,
    })
}

/// A command name the shell only knows after expanding it: a variable, a substitution that is
/// not a literal spelling, or a glob/brace pattern (`/bin/r?`, `{rm,-rf,x}`).
fn is_dynamic_name(name: &str, word: &Word) -> bool {
    let globbed = word.glob_at.is_some() && !matches!(word.value.as_str(), "[" | "[[" | "{" | "}");
    // A substitution "spelled out" by deobfuscation still is not a name if its output is
    // processed further (`$(echo cm0= | base64 -d)`).
    let substituted = word.raw.contains("$(") || word.raw.contains('`');
    let not_a_name =
        substituted && name.contains(|c: char| c.is_whitespace() || "|;&<>()".contains(c));
    name.contains(['$', '`'])
        || not_a_name
        || (globbed && word.value.contains(['*', '?', '[', '{']))
}

/// Apply R1: walk past keywords, assignments and wrappers to the executable.
fn locate_executable(command: &mut SimpleCommand) {
    let words = &command.words;
    let mut i = 0;
    while i < words.len() && KEYWORDS.contains(&words[i].value.as_str()) {
        i += 1;
    }
    if words
        .get(i)
        .is_some_and(|w| DATA_KEYWORDS.contains(&w.value.as_str()))
    {
        return;
    }
    while i < words.len() {
        let value = &words[i].value;
        if is_assignment(value) && !words[i].raw.starts_with(['"', '\'']) {
            i += 1;
            continue;
        }
        let path = deobfuscate_command_word(value).to_lowercase();
        let name = basename(&path).to_string();
        if name == "busybox" || name == "toybox" {
            i += 1;
            continue;
        }
        let Some(spec) = wrapper_spec(&name) else {
            command.dynamic_exec = is_dynamic_name(&name, &words[i]);
            command.exec = Some(i);
            command.exec_name = name;
            command.exec_path = path;
            return;
        };
        let mut wrapper = WrapperUse {
            name: name.clone(),
            options: Vec::new(),
        };
        i += 1;
        let mut positionals_left = spec.positionals;
        while i < words.len() {
            let word = &words[i].value;
            if word == "--" {
                i += 1;
                break;
            }
            if spec.query.iter().any(|q| {
                word == q || (word.starts_with("--") && word.starts_with(&format!("{q}=")))
            }) {
                command.wrappers.push(wrapper);
                return;
            }
            if name == "env" && (word.starts_with("-S") || word.starts_with("--split-string")) {
                let (mut text, rest_from) = if word == "-S" || word == "--split-string" {
                    (
                        words
                            .get(i + 1)
                            .map(|w| w.value.clone())
                            .unwrap_or_default(),
                        i + 2,
                    )
                } else {
                    let attached = word
                        .strip_prefix("--split-string=")
                        .or_else(|| word.strip_prefix("-S"))
                        .unwrap_or("");
                    (attached.to_string(), i + 1)
                };
                for extra in words.iter().skip(rest_from) {
                    text.push(' ');
                    text.push_str(&extra.raw);
                }
                wrapper.options.push(word.clone());
                command.wrappers.push(wrapper);
                command.env_split_payload = Some(text);
                return;
            }
            if spec.numbers_are_options && is_number(word) {
                i += 1;
                continue;
            }
            if let Some(long) = word.strip_prefix("--") {
                wrapper.options.push(word.clone());
                i += 1;
                let takes_value =
                    !long.contains('=') && spec.long_with_value.contains(&word.as_str());
                if takes_value {
                    i += 1;
                }
                continue;
            }
            if word.len() > 1 && word.starts_with('-') {
                wrapper.options.push(word.clone());
                i += 1;
                let cluster = &word[1..];
                if let Some(pos) = cluster.find(|c| spec.short_with_value.contains(c)) {
                    if pos + 1 == cluster.len() {
                        i += 1;
                    }
                }
                continue;
            }
            if name == "env" && is_assignment(word) {
                i += 1;
                continue;
            }
            if positionals_left > 0 {
                positionals_left -= 1;
                i += 1;
                continue;
            }
            break;
        }
        command.wrappers.push(wrapper);
    }
}

static LITERAL_SUBSTITUTIONS: LazyLock<[Regex; 5]> = LazyLock::new(|| {
    [
        r#"\$\(\s*echo\s+([^()`]*?)\s*\)"#,
        r#"`\s*echo\s+([^`]*?)\s*`"#,
        r#"\$\(\s*printf\s+['"]?%s['"]?\s+([^()`]*?)\s*\)"#,
        r#"\$\{[A-Za-z_][A-Za-z0-9_]*//?[^/}]*/([^}]*)\}"#,
        r#"\$\{[A-Za-z_][A-Za-z0-9_]*:?[-=]([^}]*)\}"#,
    ]
    .map(|p| Regex::new(p).expect("valid deobfuscation regex"))
});

/// §1.4 item 6: literal substitutions that only spell a word (`$(echo rm)`, `${x:-rm}`) are
/// replaced by that word, nesting level by nesting level.
pub(crate) fn deobfuscate_command_word(value: &str) -> String {
    if !value.contains(['$', '`']) {
        return value.to_string();
    }
    let mut current = value.to_string();
    for _ in 0..4 {
        let mut next = current.clone();
        for re in LITERAL_SUBSTITUTIONS.iter() {
            next = re
                .replace_all(&next, |caps: &regex::Captures<'_>| {
                    caps[1].replace(['\'', '"'], "")
                })
                .into_owned();
        }
        if next == current {
            break;
        }
        current = next;
    }
    current
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokenize::tokenize;

    fn exec_of(text: &str) -> Vec<String> {
        simple_commands(tokenize(text))
            .into_iter()
            .map(|c| c.exec_name)
            .collect()
    }

    #[test]
    fn peels_wrappers() {
        assert_eq!(
            exec_of("sudo -u bob nice -n 5 timeout 10 /bin/rm -rf /"),
            ["rm"]
        );
        assert_eq!(exec_of("env -C /tmp FOO=1 busybox rm x"), ["rm"]);
        assert_eq!(exec_of("command -v mkfs"), [""]);
        assert_eq!(exec_of("chroot /mnt reboot; chrt -p 5"), ["reboot", ""]);
        assert_eq!(exec_of("$(echo rm) -rf /"), ["rm"]);
        assert_eq!(exec_of("ionice -c 3 taskset 0x1 dd if=x"), ["dd"]);
    }
}
