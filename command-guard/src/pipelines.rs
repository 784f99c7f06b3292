//! Programs fed to a shell or interpreter through a pipe (`curl ... | python3`, `echo ... | sh`,
//! `cat <<EOF | bash`): what the consumer runs is the producer's output.

use crate::command::SimpleCommand;
use crate::structural::{program_of, Program, SHELLS};

const FETCHERS: &[&str] = &[
    "curl",
    "wget",
    "fetch",
    "aria2c",
    "nc",
    "ncat",
    "netcat",
    "socat",
    "http",
    "https",
    "xh",
    "lwp-request",
    "get",
    "iwr",
    "invoke-webrequest",
    "scp",
    "ssh",
    "rsync",
    "ftp",
    "tftp",
];

/// Consumers reading their program from standard input, each with the commands earlier in its
/// pipeline.
fn stdin_consumers(commands: &[SimpleCommand]) -> Vec<(&SimpleCommand, &[SimpleCommand])> {
    let mut out = Vec::new();
    let mut pipeline_start = 0;
    for (i, command) in commands.iter().enumerate() {
        if !command.piped_from_previous {
            pipeline_start = i;
            continue;
        }
        if program_of(command) == Some(Program::Stdin) {
            out.push((command, &commands[pipeline_start..i]));
        }
    }
    out
}

/// The text a literal producer writes: `echo` words, a here-doc or here-string body.
fn literal_output(producer: &SimpleCommand) -> Option<String> {
    let body = producer.redirects.iter().find_map(|r| {
        r.heredoc_body.clone().or_else(|| {
            (r.op == "<<<")
                .then(|| r.target.as_ref().map(|t| t.value.clone()))
                .flatten()
        })
    });
    match producer.exec_name.as_str() {
        "cat" if producer.args().is_empty() => body,
        "echo" => Some(
            producer
                .arg_values()
                .skip_while(|v| matches!(*v, "-n" | "-e" | "-E" | "-ne" | "-en"))
                .collect::<Vec<_>>()
                .join(" "),
        ),
        "printf" => Some(
            producer
                .arg_values()
                .map(|v| v.replace("\\n", "\n").replace("%s", " "))
                .collect::<Vec<_>>()
                .join(" "),
        ),
        _ => None,
    }
}

/// Texts a shell at the end of a pipe runs, when the producer's output is written literally.
pub(crate) fn stdin_programs(commands: &[SimpleCommand]) -> Vec<String> {
    stdin_consumers(commands)
        .into_iter()
        .filter(|(consumer, _)| SHELLS.contains(&consumer.exec_name.as_str()))
        .filter_map(|(_, before)| before.last().and_then(literal_output))
        .collect()
}

pub(crate) const REMOTE_TO_SHELL: &str = "pipe remote content to shell";
pub(crate) const REMOTE_TO_INTERPRETER: &str = "pipe remote content to interpreter";
pub(crate) const PIPE_TO_PROGRAM: &str = "pipe into shell or interpreter (program read from stdin)";

/// A pipe into a program reading its code from stdin; remote producers get their own key.
pub(crate) fn stdin_program_finding(commands: &[SimpleCommand]) -> Option<&'static str> {
    stdin_consumers(commands)
        .into_iter()
        .map(|(consumer, before)| {
            let remote = before
                .iter()
                .any(|c| FETCHERS.contains(&c.exec_name.as_str()));
            let shell = SHELLS.contains(&consumer.exec_name.as_str());
            match (remote, shell) {
                (true, true) => REMOTE_TO_SHELL,
                (true, false) => REMOTE_TO_INTERPRETER,
                (false, _) => PIPE_TO_PROGRAM,
            }
        })
        .min_by_key(|key| usize::from(*key == PIPE_TO_PROGRAM))
}
