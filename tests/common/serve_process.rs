//! `hermes-tools serve` (or any line-writing child) on pipes, its output lines read as they come (a
//! thread reads them into a channel, so a test can wait for a line with a deadline).

#![allow(dead_code)] // each test binary uses a part

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
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start hermes-tools serve");
        let lines = line_channel(child.stdout.take().unwrap());
        let stdin = child.stdin.take();
        ServeProcess {
            child,
            stdin,
            lines,
        }
    }
}

/// The lines a child writes to `stdout`, read on a thread of their own.
pub fn line_channel(stdout: impl std::io::Read + Send + 'static) -> mpsc::Receiver<String> {
    let (sender, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if sender.send(line).is_err() {
                break;
            }
        }
    });
    lines
}
