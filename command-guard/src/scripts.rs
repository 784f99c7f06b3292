//! Script files a command runs by path (`bash FILE`, `python3 FILE`, `./FILE`, `source FILE`,
//! `sh < FILE`), so a caller with file access can read them and check their text like a
//! command. This module only reads the command; it never touches the file system.

use crate::command::SimpleCommand;
use crate::structural::{program_of, Program};
use crate::variants::raw_limit_exceeded;
use crate::writes::written_paths;
use crate::GuardContext;

/// How the script is started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScriptKind {
    /// Read by a shell (`bash FILE`, `source FILE`, `sh < FILE`).
    Shell,
    /// Read by another interpreter (`python3 FILE`, `perl FILE`).
    Interpreter,
    /// Executed by path (`./FILE`, `/tmp/x`): a script when it starts with `#!`.
    Executable,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptRun {
    /// The path as the command names it, joined to the directory of a preceding literal `cd`.
    pub path: String,
    pub kind: ScriptKind,
    /// The path is only known at run time (`bash "$f"`, `./*.sh`): the file cannot be checked.
    pub dynamic: bool,
    /// The same command also writes this path (`echo ... > x.sh; bash x.sh`), so what runs is
    /// not what is on disk now.
    pub written_by_command: bool,
}

fn script_of(command: &SimpleCommand) -> Option<(String, ScriptKind)> {
    let exec = command.exec?;
    let shell_like = matches!(
        command.exec_name.as_str(),
        "bash" | "sh" | "zsh" | "ksh" | "dash" | "source" | "."
    );
    let kind = if shell_like {
        ScriptKind::Shell
    } else {
        ScriptKind::Interpreter
    };
    match program_of(command) {
        Some(Program::Script(i)) => command.args().get(i).map(|w| (w.value.clone(), kind)),
        Some(Program::Stdin) if !command.piped_from_previous => command
            .redirects
            .iter()
            .find(|r| r.op == "<")
            .and_then(|r| r.target.as_ref())
            .map(|t| (t.value.clone(), kind)),
        Some(_) => None,
        None => {
            let word = &command.words[exec].value;
            word.contains('/')
                .then(|| (word.clone(), ScriptKind::Executable))
        }
    }
}

fn join(dir: Option<&str>, path: &str) -> String {
    match dir {
        Some(dir) if !path.starts_with(['/', '~']) => {
            format!("{}/{path}", dir.trim_end_matches('/'))
        }
        _ => path.to_string(),
    }
}

/// Every script the command would run by path, in the order the shell meets them.
pub fn scripts_run_by_path(cmd: &str, ctx: &GuardContext) -> Vec<ScriptRun> {
    if raw_limit_exceeded(cmd) {
        return Vec::new();
    }
    let analysis = crate::shared_analysis(cmd, ctx);
    let written: Vec<String> = analysis
        .commands()
        .flat_map(written_paths)
        .chain(fetched_paths(&analysis))
        .collect();
    let mut runs = Vec::new();
    for source in &analysis.sources {
        let mut cwd: Option<String> = None;
        let mut cwd_known = true;
        for command in &source.commands {
            if matches!(command.exec_name.as_str(), "cd" | "pushd") {
                match command.arg_values().find(|v| !v.starts_with('-')) {
                    Some(dir) if !dir.contains(['$', '`', '*', '?']) => {
                        cwd = Some(join(cwd.as_deref(), dir))
                    }
                    _ => cwd_known = false,
                }
                continue;
            }
            let Some((path, kind)) = script_of(command) else {
                continue;
            };
            let dynamic = !cwd_known || path.contains(['$', '`', '*', '?', '[', '{']);
            let path = join(cwd.as_deref(), &path);
            let written_by_command = written.iter().any(|w| same_file(w, &path));
            runs.push(ScriptRun {
                path,
                kind,
                dynamic,
                written_by_command,
            });
        }
    }
    runs
}

/// Files downloaders write (`curl -o F`, `wget -O F`).
fn fetched_paths(analysis: &crate::variants::Analysis) -> Vec<String> {
    analysis
        .commands()
        .filter(|c| matches!(c.exec_name.as_str(), "curl" | "wget"))
        .flat_map(|c| {
            let values: Vec<String> = c.arg_values().map(String::from).collect();
            values
                .windows(2)
                .filter(|w| {
                    matches!(
                        w[0].as_str(),
                        "-o" | "--output" | "-O" | "--output-document"
                    )
                })
                .map(|w| w[1].clone())
                .collect::<Vec<_>>()
        })
        .collect()
}

fn same_file(a: &str, b: &str) -> bool {
    let trim = |p: &str| p.trim_start_matches("./").to_string();
    trim(a) == trim(b) || crate::command::basename(a) == crate::command::basename(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(cmd: &str) -> Vec<(String, ScriptKind)> {
        scripts_run_by_path(cmd, &GuardContext::default())
            .into_iter()
            .map(|r| (r.path, r.kind))
            .collect()
    }

    #[test]
    fn finds_each_way_of_running_a_file() {
        assert_eq!(
            paths("bash x.sh"),
            [("x.sh".to_string(), ScriptKind::Shell)]
        );
        assert_eq!(
            paths("sudo sh -x ./x.sh arg"),
            [("./x.sh".to_string(), ScriptKind::Shell)]
        );
        assert_eq!(
            paths("python3 -u tool.py --flag"),
            [("tool.py".to_string(), ScriptKind::Interpreter)]
        );
        assert_eq!(
            paths(". ./env.sh && source lib.sh"),
            [
                ("./env.sh".to_string(), ScriptKind::Shell),
                ("lib.sh".to_string(), ScriptKind::Shell)
            ]
        );
        assert_eq!(
            paths("cd sub && ./run"),
            [("sub/./run".to_string(), ScriptKind::Executable)]
        );
        assert_eq!(
            paths("sh < setup.sh"),
            [("setup.sh".to_string(), ScriptKind::Shell)]
        );
        assert!(paths("python3 -m pytest").is_empty());
        assert!(paths("bash -c 'ls'").is_empty());
        assert!(paths("ls -la").is_empty());
    }

    #[test]
    fn marks_what_cannot_be_known_ahead() {
        let runs = scripts_run_by_path(
            "echo 'rm -rf ~' > a.sh; bash a.sh; bash \"$f\"",
            &GuardContext::default(),
        );
        assert!(runs[0].written_by_command && !runs[0].dynamic);
        assert!(runs[1].dynamic);
    }
}
