//! `hermes-tools agent` at a real terminal (a pseudo-terminal from portable-pty) asks
//! the person before a dangerous command, and the loop goes on with the answer. The
//! model is the scripted STAND-IN of agent/tests/support (an HTTP server on 127.0.0.1
//! that replays tool calls; it is not a model).

#[path = "../agent/tests/support/mod.rs"]
mod support;

use portable_pty::{native_pty_system, CommandBuilder, PtySize};
use serde_json::json;
use std::io::{Read, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::{final_answer, last_message, tool_calls, Reply, ScriptedModel};

/// A model that asks for `rm -rf victim`, then answers with the tool result it got.
fn deleting_model() -> ScriptedModel {
    ScriptedModel::respond(|request, n| {
        if n == 0 {
            return Reply::Json(tool_calls(&[(
                "c1",
                "terminal",
                json!({"command": "rm -rf victim"}),
            )]));
        }
        let result = last_message(request, "tool").unwrap_or_default();
        Reply::Json(final_answer(&format!(
            "FINAL: {}",
            if result.contains("\"exit_code\":0") {
                "deleted"
            } else {
                "refused"
            }
        )))
    })
}

struct Session {
    output: Arc<Mutex<String>>,
    writer: Box<dyn Write + Send>,
    child: Box<dyn portable_pty::Child + Send + Sync>,
}

impl Session {
    fn start(home: &Path, work: &Path, model: &ScriptedModel) -> Session {
        Session::run(
            home,
            work,
            &[
                "agent",
                "remove the victim folder",
                "--toolsets",
                "terminal",
                "--base-url",
                &model.base_url,
            ],
        )
    }

    /// `hermes-tools ARGS` on a fresh pseudo-terminal.
    fn run(home: &Path, work: &Path, args: &[&str]) -> Session {
        let pair = native_pty_system()
            .openpty(PtySize {
                rows: 40,
                cols: 200,
                pixel_width: 0,
                pixel_height: 0,
            })
            .unwrap();
        let mut command = CommandBuilder::new(env!("CARGO_BIN_EXE_hermes-tools"));
        command.args(args);
        command.cwd(work);
        command.env("HERMES_HOME", home);
        command.env_remove("HERMES_INTERACTIVE");
        command.env_remove("HERMES_YOLO_MODE");
        let child = pair.slave.spawn_command(command).unwrap();
        drop(pair.slave);
        let mut reader = pair.master.try_clone_reader().unwrap();
        let writer = pair.master.take_writer().unwrap();
        let output = Arc::new(Mutex::new(String::new()));
        let sink = Arc::clone(&output);
        std::thread::spawn(move || {
            let _master = pair.master;
            let mut buf = [0u8; 4096];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Session {
            output,
            writer,
            child,
        }
    }

    /// Waits (with a guard against hangs) until the terminal shows `text`.
    fn wait_for(&self, text: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let seen = self.output.lock().unwrap().clone();
            if seen.contains(text) {
                return seen;
            }
            assert!(
                Instant::now() < deadline,
                "{text:?} never appeared; the terminal showed:\n{seen}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn type_keys(&mut self, keys: &[u8]) {
        self.writer.write_all(keys).unwrap();
        self.writer.flush().unwrap();
    }

    fn exit_code(mut self) -> u32 {
        self.child.wait().unwrap().exit_code()
    }
}

fn run_answering(keys: &[u8]) -> (bool, String, ScriptedModel) {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.yaml"),
        "approvals:\n  timeout: 60\n",
    )
    .unwrap();
    let work = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(work.path().join("victim/inner")).unwrap();
    let model = deleting_model();
    let mut session = Session::start(home.path(), work.path(), &model);
    let prompt = session.wait_for("Allow this command?");
    assert!(
        prompt.contains("rm -rf victim"),
        "the prompt shows the command:\n{prompt}"
    );
    assert!(
        prompt.contains("recursive delete"),
        "and why it needs approval:\n{prompt}"
    );
    assert!(
        prompt.contains("[o]nce")
            && prompt.contains("[s]ession")
            && prompt.contains("[a]lways")
            && prompt.contains("[d]eny")
    );
    session.type_keys(keys);
    let shown = session.wait_for("FINAL:");
    let code = session.exit_code();
    assert_eq!(code, 0, "the loop reached its final answer:\n{shown}");
    (work.path().join("victim").exists(), shown, model)
}

#[test]
fn once_runs_the_command_and_the_loop_finishes() {
    let (exists, shown, model) = run_answering(b"o\r");
    assert!(!exists, "approved once, the command ran");
    assert!(shown.contains("FINAL: deleted"), "{shown}");
    let result = last_message(&model.request(1), "tool").unwrap();
    assert!(result.contains("granted by the user"), "{result}");
}

#[test]
fn deny_refuses_and_the_model_hears_it() {
    let (exists, shown, model) = run_answering(b"d\r");
    assert!(exists, "denied, nothing ran");
    assert!(shown.contains("FINAL: refused"), "{shown}");
    let result = last_message(&model.request(1), "tool").unwrap();
    assert!(
        result.contains("the user denied") && result.contains("NOT consented"),
        "{result}"
    );
}

#[test]
fn ctrl_c_at_the_prompt_refuses() {
    let (exists, shown, _model) = run_answering(b"\x03");
    assert!(exists);
    assert!(
        shown.contains("cancelled: not approved") && shown.contains("FINAL: refused"),
        "{shown}"
    );
}

#[test]
fn without_a_terminal_nobody_is_asked() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(work.path().join("victim")).unwrap();
    let model = deleting_model();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_hermes-tools"))
        .args([
            "agent",
            "remove the victim folder",
            "--toolsets",
            "terminal",
            "--base-url",
            &model.base_url,
            "--quiet",
        ])
        .current_dir(work.path())
        .env("HERMES_HOME", home.path())
        .env("HERMES_INTERACTIVE", "1")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(output.status.success());
    assert_eq!(String::from_utf8_lossy(&output.stdout), "FINAL: refused\n");
    assert!(work.path().join("victim").exists());
    let result = last_message(&model.request(1), "tool").unwrap();
    assert!(
        result.contains("nobody can approve") && !result.contains("has been asked"),
        "{result}"
    );
}

#[test]
fn call_at_a_terminal_asks_too() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(work.path().join("victim")).unwrap();
    let mut session = Session::run(
        home.path(),
        work.path(),
        &["call", "terminal", r#"{"command": "rm -rf victim"}"#],
    );
    let prompt = session.wait_for("Allow this command?");
    assert!(prompt.contains("rm -rf victim"), "{prompt}");
    session.type_keys(b"s\r");
    let shown = session.wait_for("granted by the user");
    assert_eq!(session.exit_code(), 0, "{shown}");
    assert!(!work.path().join("victim").exists());
}
