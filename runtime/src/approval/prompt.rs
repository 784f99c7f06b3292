//! The terminal prompt (reference §2.6): shows the (redacted) command and its finding,
//! offers once / session / always / deny, and turns the answer into a [`Choice`]. Anything
//! that is not a clear grant refuses.

use super::result::Choice;
use crate::redact::redact_secrets;
use std::io::{BufRead, Read, Write};
use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What a prompter is asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptRequest {
    /// The command as the model wrote it (prompters show it redacted).
    pub command: String,
    pub description: String,
    pub timeout: Duration,
    /// `always` is offered.
    pub allow_permanent: bool,
    /// `session` is offered.
    pub allow_session: bool,
    /// The smart reviewer denied it; only once/deny are offered.
    pub smart_denied: bool,
    pub title: Option<String>,
    /// The tool that asks (`terminal` for shell commands, a tool name for plugin rules).
    pub tool: Option<String>,
}

impl PromptRequest {
    pub fn new(command: &str, description: &str, timeout: Duration) -> PromptRequest {
        PromptRequest {
            command: command.to_string(),
            description: description.to_string(),
            timeout,
            allow_permanent: true,
            allow_session: true,
            smart_denied: false,
            title: None,
            tool: None,
        }
    }

    pub fn offers_session(&self) -> bool {
        self.allow_session && !self.smart_denied
    }

    pub fn offers_always(&self) -> bool {
        self.offers_session() && self.allow_permanent
    }

    /// A client's answer word: an offered grant grants; anything else denies.
    pub fn choice_from_word(&self, word: &str) -> Choice {
        let word = word.trim().to_ascii_lowercase();
        if self.choices().contains(&word.as_str()) {
            Choice::parse_resolution(&word)
        } else {
            Choice::Deny
        }
    }

    /// The answers offered, in order: `once`, `session`?, `always`?, `deny`.
    pub fn choices(&self) -> Vec<&'static str> {
        let mut choices = vec!["once"];
        if self.offers_session() {
            choices.push("session");
        }
        if self.offers_always() {
            choices.push("always");
        }
        choices.push("deny");
        choices
    }
}

/// Anything that can ask a person: the terminal, a TUI, a test double.
pub trait ApprovalPrompter: Send + Sync {
    /// Must never grant on error: return `Deny`, `Timeout` or `Cancelled` instead.
    fn prompt(&self, request: &PromptRequest) -> Choice;

    /// `Err(how to enable approvals)` when this surface has no way to reach a person (an
    /// MCP client without elicitation); the unattended policy then applies and the
    /// refusal carries the text.
    fn reachable(&self) -> Result<(), String> {
        Ok(())
    }
}

impl<F> ApprovalPrompter for F
where
    F: Fn(&PromptRequest) -> Choice + Send + Sync,
{
    fn prompt(&self, request: &PromptRequest) -> Choice {
        self(request)
    }
}

/// What one read of an answer produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadOutcome {
    Line(String),
    Timeout,
    /// Ctrl-C.
    Interrupted,
    /// End of input (Ctrl-D on an empty line, closed stream).
    Eof,
    Failed(String),
}

/// Where the prompt is written and the answer read.
pub trait PromptIo: Send {
    fn show(&mut self, text: &str) -> std::io::Result<()>;
    fn read_answer(&mut self, timeout: Duration) -> ReadOutcome;
}

/// The prompt text for a request (command redacted).
pub fn render_prompt(request: &PromptRequest) -> String {
    let mut text = String::new();
    let title = request.title.as_deref().unwrap_or("Dangerous command");
    text.push_str(&format!("\n⚠️  {title}: {}\n", request.description));
    if request.smart_denied {
        text.push_str("   The smart reviewer judged this command dangerous.\n");
    }
    text.push('\n');
    for line in redact_secrets(&request.command).lines() {
        text.push_str("    ");
        text.push_str(line);
        text.push('\n');
    }
    let choices: Vec<String> = request
        .choices()
        .iter()
        .map(|word| format!("[{}]{}", &word[..1], &word[1..]))
        .collect();
    text.push_str(&format!(
        "\nAllow this command? {} (default: deny, {}s) > ",
        choices.join(" / "),
        request.timeout.as_secs()
    ));
    text
}

/// `o|once`, `s|session`, `a|always` (`always` falls back to `session` when permanent
/// approval is not offered); everything else, empty included, denies.
pub fn parse_answer(answer: &str, request: &PromptRequest) -> Choice {
    match answer.trim().to_lowercase().as_str() {
        "o" | "once" => Choice::Once,
        "s" | "session" if request.offers_session() => Choice::Session,
        "a" | "always" if request.offers_always() => Choice::Always,
        "a" | "always" if request.offers_session() => Choice::Session,
        _ => Choice::Deny,
    }
}

/// `prompt_dangerous_approval`: show the request on `io`, read one answer.
pub fn prompt_dangerous_approval(io: &mut dyn PromptIo, request: &PromptRequest) -> Choice {
    if io.show(&render_prompt(request)).is_err() {
        return Choice::Deny;
    }
    let choice = match io.read_answer(request.timeout) {
        ReadOutcome::Line(line) => parse_answer(&line, request),
        ReadOutcome::Timeout => Choice::Timeout,
        ReadOutcome::Interrupted | ReadOutcome::Eof => Choice::Cancelled,
        ReadOutcome::Failed(_) => Choice::Deny,
    };
    let note = match choice {
        Choice::Timeout => "\n(no answer in time: not approved)\n",
        Choice::Cancelled => "\n(cancelled: not approved)\n",
        Choice::Deny => "(denied)\n",
        _ => "",
    };
    let _ = io.show(note);
    choice
}

/// A [`PromptIo`] over any reader and writer. The read happens on a helper thread so a
/// timeout can be honoured; a read still pending after a timeout is picked up by the
/// next prompt. A Ctrl-C byte (0x03) in the input counts as an interrupt.
pub struct StreamIo {
    reader: Arc<Mutex<Box<dyn BufRead + Send>>>,
    writer: Box<dyn Write + Send>,
    pending: Option<Receiver<ReadOutcome>>,
}

impl StreamIo {
    pub fn new(
        reader: impl Read + Send + 'static,
        writer: impl Write + Send + 'static,
    ) -> StreamIo {
        StreamIo {
            reader: Arc::new(Mutex::new(Box::new(std::io::BufReader::new(reader)))),
            writer: Box::new(writer),
            pending: None,
        }
    }

    /// The process's stdin and stderr.
    pub fn stdio() -> StreamIo {
        StreamIo::new(std::io::stdin(), std::io::stderr())
    }
}

fn read_line_bytes(reader: &mut dyn BufRead) -> ReadOutcome {
    let mut line = Vec::new();
    match reader.read_until(b'\n', &mut line) {
        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => ReadOutcome::Interrupted,
        Err(e) => ReadOutcome::Failed(e.to_string()),
        Ok(0) => ReadOutcome::Eof,
        Ok(_) if line.contains(&0x03) => ReadOutcome::Interrupted,
        Ok(_) if line.first() == Some(&0x04) => ReadOutcome::Eof,
        Ok(_) => ReadOutcome::Line(
            String::from_utf8_lossy(&line)
                .trim_end_matches(['\r', '\n'])
                .to_string(),
        ),
    }
}

impl PromptIo for StreamIo {
    fn show(&mut self, text: &str) -> std::io::Result<()> {
        self.writer.write_all(text.as_bytes())?;
        self.writer.flush()
    }

    fn read_answer(&mut self, timeout: Duration) -> ReadOutcome {
        let rx = match self.pending.take() {
            Some(rx) => rx,
            None => {
                let (tx, rx) = mpsc::channel();
                let reader = Arc::clone(&self.reader);
                std::thread::spawn(move || {
                    let mut guard = reader.lock().unwrap_or_else(|p| p.into_inner());
                    let _ = tx.send(read_line_bytes(&mut **guard));
                });
                rx
            }
        };
        match rx.recv_timeout(timeout) {
            Ok(outcome) => outcome,
            Err(RecvTimeoutError::Timeout) => {
                self.pending = Some(rx);
                ReadOutcome::Timeout
            }
            Err(RecvTimeoutError::Disconnected) => {
                ReadOutcome::Failed("reader thread ended".into())
            }
        }
    }
}

/// A [`PromptIo`] on a terminal device (`/dev/tty` by default), opened for each prompt.
/// While it reads, the terminal is switched to character mode with signals off, so Ctrl-C
/// arrives as a byte (-> cancelled) instead of killing the process, and typed characters
/// are echoed by hand; the previous mode is restored afterwards.
pub struct TtyIo {
    path: PathBuf,
    file: Option<std::fs::File>,
}

impl TtyIo {
    pub fn new(path: impl Into<PathBuf>) -> TtyIo {
        TtyIo {
            path: path.into(),
            file: None,
        }
    }

    /// The controlling terminal.
    pub fn dev_tty() -> TtyIo {
        TtyIo::new("/dev/tty")
    }

    fn file(&mut self) -> std::io::Result<&mut std::fs::File> {
        if self.file.is_none() {
            let mut options = std::fs::OpenOptions::new();
            options.read(true).write(true);
            #[cfg(unix)]
            {
                use std::os::unix::fs::OpenOptionsExt;
                options.custom_flags(libc::O_NOCTTY);
            }
            self.file = Some(options.open(&self.path)?);
        }
        Ok(self.file.as_mut().expect("just opened"))
    }
}

#[cfg(unix)]
mod raw {
    use std::os::fd::RawFd;

    /// Restores the saved terminal mode when dropped.
    pub struct ModeGuard {
        fd: RawFd,
        saved: Option<libc::termios>,
    }

    impl ModeGuard {
        /// Character mode without echo and signals; `saved: None` when `fd` is no terminal.
        pub fn enter(fd: RawFd) -> ModeGuard {
            // SAFETY: termios is plain data; tcgetattr fills it or fails.
            let mut mode: libc::termios = unsafe { std::mem::zeroed() };
            if unsafe { libc::tcgetattr(fd, &mut mode) } != 0 {
                return ModeGuard { fd, saved: None };
            }
            let saved = mode;
            mode.c_lflag &= !(libc::ICANON | libc::ECHO | libc::ISIG | libc::IEXTEN);
            mode.c_cc[libc::VMIN] = 1;
            mode.c_cc[libc::VTIME] = 0;
            // SAFETY: fd is open; mode is a valid termios derived from the current one.
            unsafe { libc::tcsetattr(fd, libc::TCSANOW, &mode) };
            ModeGuard {
                fd,
                saved: Some(saved),
            }
        }

        pub fn is_tty(&self) -> bool {
            self.saved.is_some()
        }
    }

    impl Drop for ModeGuard {
        fn drop(&mut self) {
            if let Some(saved) = &self.saved {
                // SAFETY: restores the mode read in `enter` on the same open fd.
                unsafe { libc::tcsetattr(self.fd, libc::TCSANOW, saved) };
            }
        }
    }

    /// Waits until `fd` is readable: `Ok(false)` on timeout.
    pub fn wait_readable(fd: RawFd, timeout_ms: i32) -> std::io::Result<bool> {
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        loop {
            // SAFETY: one valid pollfd.
            let n = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
            if n < 0 {
                let err = std::io::Error::last_os_error();
                if err.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(err);
            }
            return Ok(n > 0);
        }
    }
}

impl PromptIo for TtyIo {
    fn show(&mut self, text: &str) -> std::io::Result<()> {
        let file = self.file()?;
        // Output processing is left on, so the terminal turns \n into \r\n itself.
        file.write_all(text.as_bytes())?;
        file.flush()
    }

    #[cfg(unix)]
    fn read_answer(&mut self, timeout: Duration) -> ReadOutcome {
        use std::os::fd::AsRawFd;
        let file = match self.file() {
            Ok(file) => file,
            Err(e) => return ReadOutcome::Failed(e.to_string()),
        };
        let fd = file.as_raw_fd();
        let mode = raw::ModeGuard::enter(fd);
        let deadline = Instant::now() + timeout;
        let mut line: Vec<u8> = Vec::new();
        let mut buf = [0u8; 64];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return ReadOutcome::Timeout;
            }
            let millis = left.as_micros().div_ceil(1000).clamp(1, i32::MAX as u128) as i32;
            match raw::wait_readable(fd, millis) {
                Ok(false) => continue,
                Ok(true) => {}
                Err(e) => return ReadOutcome::Failed(e.to_string()),
            }
            let n = match file.read(&mut buf) {
                Ok(0) => return ReadOutcome::Eof,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return ReadOutcome::Failed(e.to_string()),
            };
            let mut echo: Vec<u8> = Vec::new();
            for &byte in &buf[..n] {
                match byte {
                    0x03 => {
                        let _ = file.write_all(b"^C\n");
                        return ReadOutcome::Interrupted;
                    }
                    0x04 if line.is_empty() => {
                        let _ = file.write_all(b"\n");
                        return ReadOutcome::Eof;
                    }
                    b'\r' | b'\n' | 0x04 => {
                        if mode.is_tty() {
                            echo.push(b'\n');
                            let _ = file.write_all(&echo);
                        }
                        return ReadOutcome::Line(String::from_utf8_lossy(&line).into_owned());
                    }
                    0x7f | 0x08 => {
                        // Drop the last character (and its UTF-8 continuation bytes).
                        while let Some(last) = line.pop() {
                            if last & 0xC0 != 0x80 {
                                break;
                            }
                        }
                        echo.extend_from_slice(b"\x08 \x08");
                    }
                    b if b < 0x20 => {}
                    b => {
                        line.push(b);
                        echo.push(b);
                    }
                }
            }
            if mode.is_tty() && !echo.is_empty() {
                let _ = file.write_all(&echo);
                let _ = file.flush();
            }
        }
    }

    #[cfg(not(unix))]
    fn read_answer(&mut self, _timeout: Duration) -> ReadOutcome {
        ReadOutcome::Failed("terminal prompts need a Unix terminal".into())
    }
}

/// An [`ApprovalPrompter`] that asks on a [`PromptIo`] (one prompt at a time).
pub struct TerminalPrompter {
    io: Mutex<Box<dyn PromptIo>>,
}

impl TerminalPrompter {
    pub fn new(io: impl PromptIo + 'static) -> TerminalPrompter {
        TerminalPrompter {
            io: Mutex::new(Box::new(io)),
        }
    }

    /// Prompts on `/dev/tty`.
    pub fn tty() -> TerminalPrompter {
        TerminalPrompter::new(TtyIo::dev_tty())
    }
}

impl ApprovalPrompter for TerminalPrompter {
    fn prompt(&self, request: &PromptRequest) -> Choice {
        let mut io = self.io.lock().unwrap_or_else(|p| p.into_inner());
        prompt_dangerous_approval(&mut **io, request)
    }
}
