//! Structural findings (reference §1.8): code handed to an interpreter or shell on the command
//! line, and read-only-looking tools told to run a program. These need option parsing, not
//! pattern matching: `node -pe` runs code, `python -Wonce x.py` does not.

use crate::command::SimpleCommand;
use crate::tokenize::Word;
use crate::variants::Analysis;

pub(crate) const SHELLS: &[&str] = &["bash", "sh", "zsh", "ksh", "dash"];

pub(crate) const SCRIPT_VIA_FLAG: &str = "script execution via -e/-c flag";
pub(crate) const SCRIPT_VIA_HEREDOC: &str = "script execution via heredoc";
pub(crate) const SHELL_VIA_DASH_C: &str = "shell command via -c/-lc flag";
pub(crate) const MALFORMED_PAYLOAD: &str = "command parser limit or malformed executable payload";

/// Option letters bash really has; a cluster with anything else is not an option cluster.
const BASH_OPTION_LETTERS: &str = "abcefhiklmnprstuvxBCDEHIPT";

pub(crate) struct ShellOptions {
    pub has_dash_c: bool,
    /// Index (into the args) of the first operand: the `-c` text, or the script.
    pub first_operand: Option<usize>,
}

pub(crate) fn parse_shell_options(args: &[Word]) -> ShellOptions {
    let mut has_dash_c = false;
    let mut i = 0;
    while i < args.len() {
        let value = args[i].value.as_str();
        if value == "--" || value == "-" {
            i += 1;
            break;
        }
        if matches!(
            value,
            "-O" | "+O" | "-o" | "+o" | "--init-file" | "--rcfile"
        ) {
            i += 2;
            continue;
        }
        if value.starts_with("--") {
            i += 1;
            continue;
        }
        if let Some(cluster) = value.strip_prefix('-').or_else(|| value.strip_prefix('+')) {
            if cluster.is_empty() {
                break;
            }
            if value.starts_with('-')
                && cluster.chars().all(|c| BASH_OPTION_LETTERS.contains(c))
                && cluster.contains('c')
            {
                has_dash_c = true;
            }
            i += if cluster.ends_with(['o', 'O']) { 2 } else { 1 };
            continue;
        }
        break;
    }
    ShellOptions {
        has_dash_c,
        first_operand: (i < args.len()).then_some(i),
    }
}

struct InterpreterSpec {
    exec_short: &'static str,
    exec_long: &'static [&'static str],
    /// Short options whose value may be the next word.
    value_short: &'static str,
    /// Short options whose value must be attached (`perl -0777`).
    attached_short: &'static str,
    value_long: &'static [&'static str],
    /// Short options after which the remaining words belong to something else (`python -m`).
    stop_short: &'static str,
}

fn interpreter_spec(name: &str) -> Option<InterpreterSpec> {
    let name = name.strip_suffix(".exe").unwrap_or(name);
    let spec = |exec_short, exec_long, value_short, attached_short, value_long, stop_short| {
        InterpreterSpec {
            exec_short,
            exec_long,
            value_short,
            attached_short,
            value_long,
            stop_short,
        }
    };
    Some(match name {
        "py" => spec("c", &[], "WX", "", &["--check-hash-based-pycs"], "m"),
        n if n.starts_with("python") => spec("c", &[], "WX", "", &["--check-hash-based-pycs"], "m"),
        "node" | "nodejs" => spec(
            "ep",
            &["--eval", "--print"],
            "Cr",
            "",
            &["--conditions", "--require", "--import", "--loader"],
            "",
        ),
        n if n.starts_with("perl") => spec("eE", &["--eval"], "IMm", "0Fx", &[], ""),
        n if n.starts_with("ruby") => spec("e", &[], "CEFIKr", "", &[], ""),
        "php" => spec("r", &[], "cdz", "", &[], ""),
        "bun" => spec(
            "e",
            &["--eval"],
            "",
            "",
            &["--config", "--cwd", "--env-file", "--preload", "--require"],
            "",
        ),
        "deno" => spec("e", &["--eval"], "L", "", &["--log-level"], ""),
        "lua" | "luajit" | "lua5.1" | "lua5.2" | "lua5.3" | "lua5.4" => {
            spec("e", &[], "l", "", &[], "")
        }
        _ => return None,
    })
}

fn is_powershell(name: &str) -> bool {
    matches!(
        name.strip_suffix(".exe").unwrap_or(name),
        "powershell" | "pwsh"
    )
}

/// Where an interpreter takes its program from, as invoked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Program {
    /// `-c`/`-e` text on the command line.
    Inline,
    /// Standard input (no script operand, or `-`).
    Stdin,
    /// A script file: the index of its operand in the arguments.
    Script(usize),
    /// Something else names the program (`python -m module`, `deno eval`).
    Other,
}

fn interpreter_program(name: &str, spec: &InterpreterSpec, args: &[Word]) -> Program {
    let mut i = 0;
    while i < args.len() {
        let value = args[i].value.as_str();
        if value == "--" {
            return if i + 1 < args.len() {
                Program::Script(i + 1)
            } else {
                Program::Stdin
            };
        }
        if value == "-" {
            return Program::Stdin;
        }
        if let Some(long) = value.strip_prefix("--") {
            let option = format!("--{}", long.split('=').next().unwrap_or(""));
            if spec.exec_long.contains(&option.as_str()) {
                return Program::Inline;
            }
            i += if spec.value_long.contains(&option.as_str()) && !long.contains('=') {
                2
            } else {
                1
            };
            continue;
        }
        if let Some(cluster) = value.strip_prefix('-').filter(|c| !c.is_empty()) {
            let letters: Vec<char> = cluster.chars().collect();
            let mut skip_next = false;
            for (k, &letter) in letters.iter().enumerate() {
                if spec.exec_short.contains(letter) {
                    return Program::Inline;
                }
                if spec.stop_short.contains(letter) {
                    return Program::Other;
                }
                if spec.attached_short.contains(letter) {
                    break;
                }
                if spec.value_short.contains(letter) {
                    skip_next = k + 1 == letters.len();
                    break;
                }
            }
            i += if skip_next { 2 } else { 1 };
            continue;
        }
        if name == "deno" && matches!(value, "eval" | "run" | "repl" | "task") {
            return if value == "eval" {
                Program::Inline
            } else {
                Program::Other
            };
        }
        return Program::Script(i);
    }
    Program::Stdin
}

fn interpreter_runs_inline_code(name: &str, spec: &InterpreterSpec, args: &[Word]) -> bool {
    interpreter_program(name, spec, args) == Program::Inline
}

/// Where a shell or interpreter command takes its program from; `None` for other programs.
pub(crate) fn program_of(command: &SimpleCommand) -> Option<Program> {
    command.exec?;
    let name = command.exec_name.as_str();
    let args = command.args();
    if SHELLS.contains(&name) {
        let shell = parse_shell_options(args);
        let reads_stdin_flag = args
            .iter()
            .take(shell.first_operand.unwrap_or(args.len()))
            .any(|w| {
                w.value.starts_with('-') && !w.value.starts_with("--") && w.value.contains('s')
            });
        return Some(if shell.has_dash_c {
            Program::Inline
        } else if reads_stdin_flag {
            Program::Stdin
        } else {
            shell.first_operand.map_or(Program::Stdin, Program::Script)
        });
    }
    if matches!(name, "source" | ".") {
        return Some(if args.is_empty() {
            Program::Other
        } else {
            Program::Script(0)
        });
    }
    let spec = interpreter_spec(name)?;
    Some(interpreter_program(name, &spec, args))
}

fn powershell_runs_inline_code(args: &[Word]) -> bool {
    let mut i = 0;
    while i < args.len() {
        let value = args[i].value.to_lowercase();
        if !value.starts_with('-') || value.starts_with("--") {
            return false;
        }
        if matches!(value.as_str(), "-command" | "-c" | "-file" | "-f") {
            return true;
        }
        i += if matches!(value.as_str(), "-executionpolicy" | "-workingdirectory") {
            2
        } else {
            1
        };
    }
    false
}

const READ_TOOL_PROGRAM_OPTIONS: &[(&str, &[&str])] = &[
    ("rg", &["--pre", "--hostname-bin"]),
    ("sort", &["--compress-program"]),
    ("ag", &["--pager"]),
    ("man", &["--pager", "--html", "-P", "-H"]),
];

pub(crate) fn read_tool_options(tool: &str) -> &'static [&'static str] {
    READ_TOOL_PROGRAM_OPTIONS
        .iter()
        .find(|(t, _)| *t == tool)
        .map_or(&[], |(_, o)| o)
}

/// The program option a read tool was given, with the program text when one is present.
pub(crate) fn read_tool_program(command: &SimpleCommand) -> Option<(&'static str, Option<String>)> {
    let options = read_tool_options(&command.exec_name);
    if options.is_empty() {
        return None;
    }
    let args = command.args();
    for (i, arg) in args.iter().enumerate() {
        let value = arg.value.as_str();
        if value == "--" {
            return None;
        }
        for option in options {
            if value == *option {
                return Some((option, args.get(i + 1).map(|w| w.value.clone())));
            }
            if let Some(attached) = value.strip_prefix(option) {
                if let Some(program) = attached.strip_prefix('=') {
                    return Some((option, Some(program.to_string())));
                }
                if !option.starts_with("--") && !attached.is_empty() {
                    return Some((option, Some(attached.to_string())));
                }
            }
        }
    }
    None
}

pub(crate) fn is_interpreter_or_shell(name: &str) -> bool {
    SHELLS.contains(&name) || interpreter_spec(name).is_some() || is_powershell(name)
}

fn command_finding(command: &SimpleCommand) -> Option<String> {
    let name = command.exec_name.as_str();
    command.exec?;
    let involved = is_interpreter_or_shell(name) || !read_tool_options(name).is_empty();
    if !involved {
        return None;
    }
    if command.unterminated {
        return Some(MALFORMED_PAYLOAD.to_string());
    }
    let args = command.args();
    if let Some(spec) = interpreter_spec(name) {
        if interpreter_runs_inline_code(name, &spec, args) {
            return Some(SCRIPT_VIA_FLAG.to_string());
        }
    } else if is_powershell(name) {
        if powershell_runs_inline_code(args) {
            return Some(SCRIPT_VIA_FLAG.to_string());
        }
    } else if SHELLS.contains(&name) {
        if parse_shell_options(args).has_dash_c {
            return Some(SHELL_VIA_DASH_C.to_string());
        }
        return None;
    } else if let Some((option, _)) = read_tool_program(command) {
        return Some(format!("arbitrary program execution via {name} {option}"));
    } else {
        return None;
    }
    command
        .redirects
        .iter()
        .any(|r| r.is_heredoc_like())
        .then(|| SCRIPT_VIA_HEREDOC.to_string())
}

pub(crate) fn structural_finding(analysis: &Analysis) -> Option<String> {
    analysis.commands().find_map(command_finding)
}
