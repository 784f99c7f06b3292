//! `hermes-tools serve` as a child on pipes, its output lines read as they come (a
//! thread reads them into a channel, so a test can wait for a line with a deadline).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;

pub struct ServeProcess {
    pub child: Child,
    pub stdin: Option<ChildStdin>,
    pub lines: mpsc::Receiver<String>,
}

/// `hermes-tools serve` on the Hermes home `home`; the caller adds arguments, the
/// working directory, the environment and where stderr goes.
pub fn serve_command(home: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_hermes-tools"));
    command.arg("serve").env("HERMES_HOME", home);
    command
}

impl ServeProcess {
    pub fn spawn(command: &mut Command) -> ServeProcess {
        let mut child = command.stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("start hermes-tools serve");
        let stdout = child.stdout.take().unwrap();
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        ServeProcess { child, stdin, lines }
    }
}
