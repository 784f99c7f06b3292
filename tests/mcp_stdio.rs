//! `hermes-tools mcp` on stdio, spoken to line by line as a client would: calls are
//! answered with results and errors, a long call holds up neither pings nor other
//! calls, a cancelled call is stopped and not answered, `_meta.task_id` names the
//! task, requests before `initialize` get rmcp's answers, and calls running at end of
//! input still answer.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Duration;

/// How long any answer may take before the test gives up (a bound, not a measure).
const PATIENCE: Duration = Duration::from_secs(60);

struct Client {
    child: Child,
    stdin: Option<Box<dyn Write>>,
    lines: Receiver<Value>,
    /// Messages read while waiting for another one.
    held: Vec<Value>,
}

impl Client {
    fn start(home: &Path, work: &Path, toolsets: &str) -> Client {
        Client::start_with_input(home, work, toolsets, None)
    }

    /// With `input`, the server reads the read end given and the client writes the other.
    fn start_with_input(
        home: &Path,
        work: &Path,
        toolsets: &str,
        input: Option<(std::io::PipeReader, std::io::PipeWriter)>,
    ) -> Client {
        let (stdin, writer) = match input {
            Some((reader, writer)) => (
                Stdio::from(reader),
                Some(Box::new(writer) as Box<dyn Write>),
            ),
            None => (Stdio::piped(), None),
        };
        let mut child = Command::new(env!("CARGO_BIN_EXE_hermes-tools"))
            .args(["mcp", "--toolsets", toolsets])
            .env("HERMES_HOME", home)
            .current_dir(work)
            .stdin(stdin)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let (send, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                let message = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
                if send.send(message).is_err() {
                    break;
                }
            }
        });
        let stdin = writer.or_else(|| child.stdin.take().map(|s| Box::new(s) as Box<dyn Write>));
        Client {
            stdin,
            child,
            lines,
            held: Vec::new(),
        }
    }

    /// A client past the handshake.
    fn initialized(home: &Path, work: &Path, toolsets: &str) -> Client {
        let mut client = Client::start(home, work, toolsets);
        client.initialize();
        client
    }

    fn initialize(&mut self) {
        self.send(json!({"jsonrpc": "2.0", "id": "init", "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}}));
        let answer = self.answer(json!("init"));
        assert_eq!(
            answer["result"]["serverInfo"]["name"], "hermes-tools",
            "{answer}"
        );
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    }

    fn send(&mut self, message: Value) {
        self.send_line(&message.to_string());
    }

    fn send_line(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("input still open");
        stdin.write_all(format!("{line}\n").as_bytes()).unwrap();
        stdin.flush().unwrap();
    }

    fn call(&mut self, id: Value, name: &str, arguments: Value, meta: Option<Value>) {
        let mut params = json!({"name": name, "arguments": arguments});
        if let Some(meta) = meta {
            params["_meta"] = meta;
        }
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}));
    }

    /// The next message with this `id` (`null` also stands for none); others read
    /// meanwhile are held.
    fn answer(&mut self, id: Value) -> Value {
        let answers = |m: &Value| m.get("id").unwrap_or(&Value::Null) == &id;
        if let Some(at) = self.held.iter().position(answers) {
            return self.held.remove(at);
        }
        loop {
            match self.lines.recv_timeout(PATIENCE) {
                Ok(message) if answers(&message) => return message,
                Ok(message) => self.held.push(message),
                Err(e) => panic!("no answer to {id} ({e:?}); read meanwhile: {:?}", self.held),
            }
        }
    }

    /// Every message still to come, until the server closes its output.
    fn rest(&mut self) -> Vec<Value> {
        let mut rest = std::mem::take(&mut self.held);
        loop {
            match self.lines.recv_timeout(PATIENCE) {
                Ok(message) => rest.push(message),
                Err(RecvTimeoutError::Disconnected) => return rest,
                Err(RecvTimeoutError::Timeout) => {
                    panic!("the server kept its output open after end of input")
                }
            }
        }
    }

    /// Closes the input and waits for the server to exit.
    fn finish(mut self) -> (std::process::ExitStatus, Vec<Value>) {
        drop(self.stdin.take());
        let rest = self.rest();
        (self.child.wait().unwrap(), rest)
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn text(answer: &Value) -> String {
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text in {answer}"))
        .to_string()
}

fn setup() -> (tempfile::TempDir, tempfile::TempDir) {
    let home = tempfile::tempdir().unwrap();
    // What is tested is the protocol around a command; inside the OS sandbox (on by
    // default) the commands would run the same.
    std::fs::write(
        home.path().join("config.yaml"),
        "terminal:\n  sandbox:\n    mode: \"off\"\n",
    )
    .unwrap();
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("small.txt"), "one\ntwo\nthree\n").unwrap();
    (home, work)
}

#[test]
fn calls_answer_results_and_errors() {
    let (home, work) = setup();
    let mut client = Client::initialized(home.path(), work.path(), "file");
    client.call(json!(1), "read_file", json!({"path": "small.txt"}), None);
    let read = client.answer(json!(1));
    assert_eq!(read["jsonrpc"], "2.0");
    assert_eq!(read["result"]["isError"], false, "{read}");
    assert!(text(&read).contains("two"), "{read}");

    client.call(json!("s-2"), "no_such_tool", json!({}), None);
    let unknown = client.answer(json!("s-2"));
    assert_eq!(unknown["result"]["isError"], true, "{unknown}");
    assert!(text(&unknown).contains("Unknown tool"), "{unknown}");

    client.call(json!(3), "terminal", json!({"command": "true"}), None);
    let outside = client.answer(json!(3));
    assert_eq!(
        outside["result"]["isError"], true,
        "a tool outside --toolsets ran: {outside}"
    );

    client.call(json!(4), "read_file", json!({"path": 5}), None);
    let wrong_type = client.answer(json!(4));
    assert_eq!(wrong_type["result"]["isError"], true, "{wrong_type}");

    // Params that are no call at all are invalid params (-32602), as over HTTP.
    client.call(json!(5), "read_file", json!("not an object"), None);
    let not_an_object = client.answer(json!(5));
    assert_eq!(not_an_object["error"]["code"], -32602, "{not_an_object}");
    client.send(
        json!({"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"arguments": {}}}),
    );
    assert_eq!(client.answer(json!(6))["error"]["code"], -32602);

    // Unparsable input is ignored; JSON that is no JSON-RPC message is an invalid request.
    client.send_line("this is not json");
    client.send_line("[1, 2]");
    let invalid = client.answer(Value::Null);
    assert_eq!(invalid["error"]["code"], -32600, "{invalid}");
    client.send(json!({"jsonrpc": "2.0", "id": 7, "method": "ping"}));
    assert_eq!(client.answer(json!(7))["result"], json!({}));

    client.send(json!({"jsonrpc": "2.0", "id": 8, "method": "tools/list"}));
    let listed = client.answer(json!(8));
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"read_file") && !names.contains(&"terminal"),
        "{names:?}"
    );
    let (status, rest) = client.finish();
    assert!(status.success(), "{status}");
    assert!(rest.is_empty(), "answers nobody asked for: {rest:?}");
}

#[test]
fn a_long_call_holds_up_neither_pings_nor_other_calls_and_is_cancelled() {
    let (home, work) = setup();
    let mut client = Client::initialized(home.path(), work.path(), "file,terminal");
    let pid_file = work.path().join("sleeper.pid");
    // A task of its own: a task's foreground commands run one at a time, by design.
    let long_task = Some(json!({"task_id": "long"}));
    client.call(
        json!(1),
        "terminal",
        json!({"command": format!("echo $$ > {}; exec sleep 600", pid_file.display())}),
        long_task,
    );
    client.send(json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}));
    assert_eq!(client.answer(json!(2))["result"], json!({}));
    client.call(json!(3), "read_file", json!({"path": "small.txt"}), None);
    assert!(text(&client.answer(json!(3))).contains("three"));
    client.call(
        json!(4),
        "terminal",
        json!({"command": "echo beside"}),
        None,
    );
    assert!(text(&client.answer(json!(4))).contains("beside"));
    assert!(
        client.held.iter().all(|m| m.get("id") != Some(&json!(1))),
        "the long call answered early: {:?}",
        client.held
    );

    let sleeper: u32 = loop {
        if let Some(pid) = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|t| t.trim().parse().ok())
        {
            break pid;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    client.send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1, "reason": "the user gave up"}}));
    let gone = (0..3000).any(|_| {
        std::thread::sleep(Duration::from_millis(20));
        let stat = std::fs::read_to_string(format!("/proc/{sleeper}/stat")).unwrap_or_default();
        // Gone, or a zombie waiting for its parent.
        stat.is_empty()
            || stat
                .rsplit(')')
                .next()
                .is_some_and(|rest| rest.trim_start().starts_with('Z'))
    });
    assert!(gone, "the cancelled command {sleeper} still runs");
    client.call(json!(5), "terminal", json!({"command": "echo after"}), None);
    assert!(text(&client.answer(json!(5))).contains("after"));
    let (status, rest) = client.finish();
    assert!(status.success());
    assert!(
        rest.iter().all(|m| m.get("id") != Some(&json!(1))),
        "a cancelled call was answered: {rest:?}"
    );
}

#[test]
fn meta_task_id_names_the_task() {
    let (home, work) = setup();
    let mut client = Client::initialized(home.path(), work.path(), "terminal");
    client.call(
        json!(1),
        "terminal",
        json!({"command": "export MARK=seen"}),
        Some(json!({"task_id": "shared"})),
    );
    client.answer(json!(1));
    client.call(
        json!(2),
        "terminal",
        json!({"command": "echo \"[$MARK]\""}),
        Some(json!({"task_id": "shared"})),
    );
    assert!(text(&client.answer(json!(2))).contains("[seen]"));
    client.call(
        json!(3),
        "terminal",
        json!({"command": "echo \"[$MARK]\""}),
        None,
    );
    assert!(
        text(&client.answer(json!(3))).contains("[]"),
        "the session's own task saw another task's shell"
    );
}

#[test]
fn requests_before_initialize_get_rmcps_answers() {
    let (home, work) = setup();
    let mut client = Client::start(home.path(), work.path(), "file");
    // A ping is answered before the handshake.
    client.send(json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}));
    assert_eq!(client.answer(json!(1))["result"], json!({}));
    // A call without the handshake (and without the metadata that replaces it) is refused.
    client.call(json!(2), "read_file", json!({"path": "small.txt"}), None);
    let refused = client.answer(json!(2));
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("protocolVersion"),
        "{refused}"
    );
    client.initialize();
    client.call(json!(3), "read_file", json!({"path": "small.txt"}), None);
    assert!(text(&client.answer(json!(3))).contains("one"));
}

#[test]
fn a_call_running_at_end_of_input_still_answers() {
    let (home, work) = setup();
    let mut client = Client::initialized(home.path(), work.path(), "terminal");
    client.call(
        json!(1),
        "terminal",
        json!({"command": "sleep 1; echo finished"}),
        None,
    );
    let (status, rest) = client.finish();
    assert!(status.success(), "{status}");
    let answer = rest
        .iter()
        .find(|m| m.get("id") == Some(&json!(1)))
        .unwrap_or_else(|| panic!("no answer: {rest:?}"));
    assert!(text(answer).contains("finished"), "{answer}");
}

#[test]
fn a_non_blocking_input_is_waited_on() {
    use std::os::fd::AsRawFd;
    let (home, work) = setup();
    let (reader, writer) = std::io::pipe().unwrap();
    let fd = reader.as_raw_fd();
    // SAFETY: flags of a descriptor this test owns.
    unsafe {
        libc::fcntl(
            fd,
            libc::F_SETFL,
            libc::fcntl(fd, libc::F_GETFL) | libc::O_NONBLOCK,
        )
    };
    let mut client =
        Client::start_with_input(home.path(), work.path(), "file", Some((reader, writer)));
    client.initialize();
    // The server has read everything sent so far and finds the pipe empty.
    std::thread::sleep(Duration::from_millis(200));
    client.call(json!(1), "read_file", json!({"path": "small.txt"}), None);
    assert!(text(&client.answer(json!(1))).contains("one"));
    let (status, _) = client.finish();
    assert!(status.success(), "{status}");
}
