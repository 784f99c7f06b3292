//! How a session asks its user a question: a terminal prompt, a request line of the
//! JSON-lines server (implemented in the server), or nothing at all.

use hermes_runtime::context::Cancellation;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::sync::mpsc;
use std::time::Duration;

pub const MAX_CHOICES: usize = 4;
/// What the tool answers when nobody replied in time.
pub const NO_ANSWER_TEXT: &str =
    "The user did not answer in time. Use your best judgement and go on with the task.";

#[derive(Debug, Clone, PartialEq)]
pub struct ClarifyRequest {
    pub session_id: String,
    pub question: String,
    /// At most [`MAX_CHOICES`]; empty means free text.
    pub choices: Vec<String>,
    pub multi_select: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ClarifyReply {
    /// A string, or a list of strings for `multi_select`.
    Answer(Value),
    TimedOut,
}

/// A way to reach the user. `ask` blocks until the answer, the timeout or the
/// cancellation; `Err` means the question could not be asked at all.
pub trait ClarifyChannel: Send + Sync {
    fn ask(
        &self,
        request: &ClarifyRequest,
        timeout: Duration,
        cancel: &Cancellation,
    ) -> Result<ClarifyReply, String>;
}

/// No user to ask: headless runs and delegated sub-agents.
pub struct NoClarify {
    pub reason: String,
}

impl NoClarify {
    pub fn new(reason: impl Into<String>) -> NoClarify {
        NoClarify {
            reason: reason.into(),
        }
    }
}

impl ClarifyChannel for NoClarify {
    fn ask(
        &self,
        _request: &ClarifyRequest,
        _timeout: Duration,
        _cancel: &Cancellation,
    ) -> Result<ClarifyReply, String> {
        Err(self.reason.clone())
    }
}

/// Asks on the controlling terminal (`/dev/tty`), so it works while stdout carries
/// the agent's answer. Choices are numbered; the user types a number (several,
/// comma-separated, for multi-select) or any other text as a free answer.
pub struct TerminalClarify;

impl TerminalClarify {
    /// `Some` when this process has a terminal to ask on.
    pub fn open() -> Option<TerminalClarify> {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/tty")
            .ok()
            .map(|_| TerminalClarify)
    }
}

impl ClarifyChannel for TerminalClarify {
    fn ask(
        &self,
        request: &ClarifyRequest,
        timeout: Duration,
        cancel: &Cancellation,
    ) -> Result<ClarifyReply, String> {
        let mut tty = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/tty")
            .map_err(|e| format!("no terminal to ask on: {e}"))?;
        let mut prompt = format!("\n❓ {}\n", request.question);
        for (n, choice) in request.choices.iter().enumerate() {
            prompt.push_str(&format!("  {}. {choice}\n", n + 1));
        }
        if !request.choices.is_empty() {
            prompt.push_str(&format!(
                "  {}. Other (type your answer)\n",
                request.choices.len() + 1
            ));
            if request.multi_select {
                prompt.push_str("  (several numbers, comma-separated, are fine)\n");
            }
        }
        prompt.push_str("> ");
        tty.write_all(prompt.as_bytes())
            .and_then(|_| tty.flush())
            .map_err(|e| format!("cannot write to the terminal: {e}"))?;
        let (sender, receiver) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let result = BufReader::new(tty).read_line(&mut line).map(|_| line);
            let _ = sender.send(result);
        });
        let deadline = std::time::Instant::now() + timeout;
        loop {
            if cancel.is_cancelled() {
                return Err("the question was cancelled".into());
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return Ok(ClarifyReply::TimedOut);
            }
            match receiver.recv_timeout(left.min(Duration::from_millis(100))) {
                Ok(Ok(line)) => return Ok(ClarifyReply::Answer(interpret(line.trim(), request))),
                Ok(Err(e)) => return Err(format!("cannot read the terminal: {e}")),
                Err(mpsc::RecvTimeoutError::Timeout) => continue,
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err("the terminal closed".into())
                }
            }
        }
    }
}

/// A typed line: numbers pick choices, anything else is the answer itself.
pub fn interpret(line: &str, request: &ClarifyRequest) -> Value {
    let pick = |text: &str| {
        text.trim()
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=request.choices.len()).contains(n))
            .map(|n| request.choices[n - 1].clone())
    };
    if request.choices.is_empty() {
        return json!(line);
    }
    if request.multi_select {
        let picked: Option<Vec<String>> = line.split(',').map(pick).collect();
        return match picked {
            Some(list) if !list.is_empty() => json!(list),
            _ => json!([line]),
        };
    }
    json!(pick(line).unwrap_or_else(|| line.to_string()))
}

/// Choices may arrive as objects (`{"label": ...}`); they are flattened to text.
pub fn flatten_choice(choice: &Value) -> Option<String> {
    match choice {
        Value::String(text) => Some(text.trim().to_string()).filter(|t| !t.is_empty()),
        Value::Object(object) => ["label", "text", "title", "description", "value"]
            .iter()
            .find_map(|key| object.get(*key).and_then(Value::as_str))
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}
