//! Background processes: the registry behind `terminal(background=true)` and the
//! `process` tool (reference §4).
//!
//! Each process has an id `proc_<12 hex>`, a rolling output buffer of 200 000
//! characters filled by a reader thread, and an exit record. At most 64 are tracked;
//! finished ones are pruned 30 minutes after they started. Completion and watch-pattern
//! events are queued per task; the agent loop drains them with [`drain_events`], and a
//! server that pushes them to its client installs a sink with [`set_event_sink`]. Watch
//! notifications are rate-limited as described in `watch.rs`.

use super::env::{local, Environment, ReadEvent, Running};
use super::output::{random_hex, Utf8Decoder};
use super::watch::{global_admit, WatchDecision, WatchLimiter};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, OnceLock, RwLock};
use std::time::{Duration, Instant, SystemTime};

pub const BUFFER_CHARS: usize = 200_000;
pub const MAX_TRACKED: usize = 64;
pub const PRUNE_AFTER: Duration = Duration::from_secs(30 * 60);
const TAIL_CHARS: usize = 2_000;
const WATCH_MAX_LINES: usize = 20;

#[derive(Debug, Clone, PartialEq)]
pub struct ExitRecord {
    pub exit_code: i32,
    pub completion_reason: String,
    pub termination_source: String,
}

#[derive(Default)]
struct State {
    buffer: String,
    buffer_chars: usize,
    /// Lines dropped from the front of the buffer (so line numbers stay stable).
    exit: Option<ExitRecord>,
    /// The agent already saw the completion (wait/kill), so no notification is queued.
    consumed: bool,
    watch: WatchLimiter,
    reader_done: bool,
}

pub struct ProcessEntry {
    pub id: String,
    pub command: String,
    pub cwd: String,
    pub owner_task_id: String,
    pub pid: Option<u32>,
    pub started_at: SystemTime,
    pub started: Instant,
    pub pty: bool,
    pub notify_on_complete: bool,
    pub watch_patterns: Vec<String>,
    pub backend: String,
    /// Runs inside the OS sandbox: what is typed into it is contained like a command.
    pub contained: bool,
    state: Mutex<State>,
    changed: Condvar,
    run: Mutex<Box<dyn Running>>,
    /// Input written since the last line end: the line the process's shell is being typed.
    typed_line: Mutex<String>,
}

fn registry() -> &'static Mutex<Vec<Arc<ProcessEntry>>> {
    static REG: OnceLock<Mutex<Vec<Arc<ProcessEntry>>>> = OnceLock::new();
    REG.get_or_init(Default::default)
}

fn events() -> &'static Mutex<HashMap<String, Vec<Value>>> {
    static EVENTS: OnceLock<Mutex<HashMap<String, Vec<Value>>>> = OnceLock::new();
    EVENTS.get_or_init(Default::default)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Takes the queued notifications of a task (completion notices and watch-pattern
/// matches), oldest first. The agent loop calls this after each turn.
pub fn drain_events(task_id: &str) -> Vec<Value> {
    lock(events()).remove(task_id).unwrap_or_default()
}

/// Receives notifications as they happen, with the owning task id, instead of the
/// per-task queue (servers that push them to their client).
pub type EventSink = Arc<dyn Fn(&str, &Value) + Send + Sync>;

fn sink() -> &'static RwLock<Option<EventSink>> {
    static SINK: RwLock<Option<EventSink>> = RwLock::new(None);
    &SINK
}

/// Delivers every later notification to `sink` (`None`: queue them again for
/// [`drain_events`]). Events already queued are handed to the new sink first.
pub fn set_event_sink(new: Option<EventSink>) {
    let mut slot = sink().write().unwrap_or_else(|p| p.into_inner());
    if let Some(deliver) = &new {
        let queued: Vec<(String, Vec<Value>)> = lock(events()).drain().collect();
        for (task, list) in queued {
            for event in list {
                deliver(&task, &event);
            }
        }
    }
    *slot = new;
}

fn push_event(task_id: &str, event: Value) {
    let deliver = sink().read().unwrap_or_else(|p| p.into_inner()).clone();
    match deliver {
        Some(deliver) => deliver(task_id, &event),
        None => lock(events())
            .entry(task_id.to_string())
            .or_default()
            .push(event),
    }
}

/// What a new background process needs.
pub struct SpawnRequest<'a> {
    pub command: &'a str,
    pub script: String,
    pub cwd: String,
    pub task_id: &'a str,
    pub pty: bool,
    pub notify_on_complete: bool,
    pub watch_patterns: Vec<String>,
    /// Outside the OS sandbox (a person approved this command).
    pub escalate: bool,
}

/// Starts a background process and registers it.
pub fn spawn(env: &dyn Environment, req: SpawnRequest<'_>) -> Result<Arc<ProcessEntry>, String> {
    prune();
    {
        let reg = lock(registry());
        if reg.len() >= MAX_TRACKED {
            return Err(format!(
                "{MAX_TRACKED} background processes are already tracked and none has finished; kill some with the \
                 process tool (action=kill) first"
            ));
        }
    }
    let run: Box<dyn Running> = if req.pty {
        if env.backend() != "local" {
            return Err("pty=true is only supported on the local backend".into());
        }
        let bash = local::find_bash().ok_or("bash was not found")?;
        // Approved, it runs outside the sandbox in a login shell (see `wrap_approved`).
        let login: &[&str] = if req.escalate { &["-l"] } else { &[] };
        let argv: Vec<std::ffi::OsString> = std::iter::once(bash.into_os_string())
            .chain(login.iter().map(|a| a.into()))
            .chain(["-c".into(), req.script.clone().into()])
            .collect();
        let command_for = |tty: Option<std::path::PathBuf>| {
            let launch = local::Launch {
                escalate: req.escalate,
                pty: true,
                tty,
            };
            env.local_command(argv, Path::new(&req.cwd), launch)
                .ok_or_else(|| "pty=true is only supported on the local backend".to_string())?
                .map_err(|e| e.reason)
        };
        Box::new(
            PtyRun::spawn(command_for)
                .map_err(|e| format!("cannot start the process in a pseudo-terminal: {e}"))?,
        )
    } else if req.escalate {
        env.run_bash_escalated(&req.script, true, None)
            .map_err(|e| e.reason)?
    } else {
        env.run_bash(&req.script, false, None)
            .map_err(|e| e.reason)?
    };
    let entry = Arc::new(ProcessEntry {
        id: format!("proc_{}", random_hex(12)),
        command: req.command.to_string(),
        cwd: req.cwd,
        owner_task_id: req.task_id.to_string(),
        pid: run.pid(),
        started_at: SystemTime::now(),
        started: Instant::now(),
        pty: req.pty,
        notify_on_complete: req.notify_on_complete,
        watch_patterns: req.watch_patterns,
        backend: env.backend().to_string(),
        contained: !req.escalate
            && env
                .sandbox_mode()
                .is_some_and(|m| m != hermes_sandbox::Mode::Off),
        state: Mutex::new(State::default()),
        changed: Condvar::new(),
        run: Mutex::new(run),
        typed_line: Mutex::new(String::new()),
    });
    lock(registry()).push(Arc::clone(&entry));
    let reader = Arc::clone(&entry);
    std::thread::Builder::new()
        .name(format!("bg-{}", entry.id))
        .spawn(move || reader_loop(reader))
        .map_err(|e| format!("cannot start the output reader: {e}"))?;
    Ok(entry)
}

fn reader_loop(entry: Arc<ProcessEntry>) {
    let mut decoder = Utf8Decoder::new();
    let mut exited_at: Option<Instant> = None;
    loop {
        let event = lock(&entry.run).read(Duration::from_millis(50));
        match event {
            ReadEvent::Data(bytes) => {
                let text = decoder.push(&bytes);
                entry.append(&text);
            }
            ReadEvent::Eof => {
                let code = loop {
                    if let Some(code) = lock(&entry.run).try_wait() {
                        break code;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                };
                entry.record_exit(code, "exited", "process_exit");
                break;
            }
            ReadEvent::Idle => {}
        }
        if exited_at.is_none() {
            if let Some(code) = lock(&entry.run).try_wait() {
                entry.record_exit(code, "exited", "process_exit");
                exited_at = Some(Instant::now());
            }
        }
        // The direct child is gone: a grandchild may hold the pipe open for ever, so stop
        // reading soon after.
        if exited_at.is_some_and(|t| t.elapsed() > Duration::from_millis(300)) {
            break;
        }
    }
    let tail = decoder.finish();
    entry.append(&tail);
    let mut st = lock(&entry.state);
    st.reader_done = true;
    drop(st);
    entry.changed.notify_all();
    entry.queue_completion();
}

impl ProcessEntry {
    fn append(&self, text: &str) {
        if text.is_empty() {
            return;
        }
        let mut st = lock(&self.state);
        st.buffer.push_str(text);
        st.buffer_chars += text.chars().count();
        if st.buffer_chars > BUFFER_CHARS + BUFFER_CHARS / 10 {
            let drop_chars = st.buffer_chars - BUFFER_CHARS;
            let cut = st
                .buffer
                .char_indices()
                .nth(drop_chars)
                .map(|(i, _)| i)
                .unwrap_or(st.buffer.len());
            st.buffer.drain(..cut);
            st.buffer_chars -= drop_chars;
        }
        let matches = self.watch_matches(&mut st, text);
        drop(st);
        self.changed.notify_all();
        for event in matches {
            push_event(&self.owner_task_id, event);
        }
    }

    fn watch_matches(&self, st: &mut State, text: &str) -> Vec<Value> {
        // Output after the exit is late noise: the completion notice covers it.
        if self.watch_patterns.is_empty() || st.watch.disabled() || st.exit.is_some() {
            return Vec::new();
        }
        let mut pattern = None;
        let lines: Vec<&str> = text
            .lines()
            .filter(|line| {
                match self
                    .watch_patterns
                    .iter()
                    .find(|p| line.contains(p.as_str()))
                {
                    Some(p) => {
                        pattern.get_or_insert(p.clone());
                        true
                    }
                    None => false,
                }
            })
            .collect();
        let Some(pattern) = pattern else {
            return Vec::new();
        };
        let now = Instant::now();
        let (suppressed, last) = match st.watch.admit(lines.len(), now) {
            WatchDecision::Drop => return Vec::new(),
            WatchDecision::Disable { suppressed } => {
                return vec![json!({
                    "type": "watch_disabled",
                    "session_id": self.id,
                    "command": self.command,
                    "suppressed": suppressed,
                    "message": format!(
                        "Watch patterns disabled for process {}: {} consecutive rate-limit windows (at most one \
                         notification every {}s). You will get one notification when the process exits instead.",
                        self.id,
                        super::watch::STRIKE_LIMIT,
                        super::watch::MIN_INTERVAL.as_secs()
                    ),
                })]
            }
            WatchDecision::Deliver { suppressed, last } => (suppressed, last),
        };
        let (admitted, mut out) = global_admit(now);
        if !admitted {
            return out;
        }
        let mut excerpt = lines
            .iter()
            .take(WATCH_MAX_LINES)
            .copied()
            .collect::<Vec<_>>()
            .join("\n");
        if excerpt.chars().count() > TAIL_CHARS {
            excerpt = excerpt.chars().take(TAIL_CHARS).collect();
        }
        let mut event = json!({
            "type": "watch_match",
            "session_id": self.id,
            "pattern": pattern,
            "command": self.command,
            "line": hermes_command_guard::strip_ansi(lines[0]),
            "output": hermes_command_guard::strip_ansi(&excerpt),
            "suppressed": suppressed,
            "message": format!("Background process {} printed a line matching '{pattern}'.", self.id),
        });
        if last {
            event["watch_disabled"] = json!(true);
            event["message"] = json!(format!(
                "Background process {} matched its watch patterns {} times; watching is now off and you will be \
                 notified when it completes instead.",
                self.id,
                super::watch::MAX_DELIVERIES
            ));
        }
        out.push(event);
        out
    }

    fn record_exit(&self, code: i32, reason: &str, source: &str) {
        let mut st = lock(&self.state);
        if st.exit.is_none() {
            st.exit = Some(ExitRecord {
                exit_code: code,
                completion_reason: reason.to_string(),
                termination_source: source.to_string(),
            });
        }
        drop(st);
        self.changed.notify_all();
    }

    fn queue_completion(&self) {
        let st = lock(&self.state);
        let notify = self.notify_on_complete || st.watch.disabled();
        if !notify || st.consumed {
            return;
        }
        let Some(exit) = st.exit.clone() else { return };
        let tail = tail_chars(&st.buffer, TAIL_CHARS);
        drop(st);
        let phrase = if exit.completion_reason == "killed" {
            "was killed".to_string()
        } else {
            format!("exited with code {}", exit.exit_code)
        };
        push_event(
            &self.owner_task_id,
            json!({
                "type": "completion",
                "session_id": self.id,
                "status": exit.completion_reason,
                "exit_code": exit.exit_code,
                "command": self.command,
                "output_tail": clean(&tail, &self.command),
                "message": format!("Background process {} ({}) {phrase}.", self.id, truncate_chars(&self.command, 200)),
            }),
        );
    }

    pub fn exit(&self) -> Option<ExitRecord> {
        lock(&self.state).exit.clone()
    }

    pub fn status(&self) -> &'static str {
        if self.exit().is_some() {
            "exited"
        } else {
            "running"
        }
    }

    pub fn output(&self) -> String {
        clean(&lock(&self.state).buffer, &self.command)
    }

    fn uptime(&self) -> u64 {
        self.started.elapsed().as_secs()
    }

    fn started_at_epoch(&self) -> f64 {
        self.started_at
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0)
    }

    /// Kills the process tree. `Err(survivors)` when something outlived SIGKILL.
    pub fn kill(&self, grace: Duration, source: &str) -> Result<(), Vec<u32>> {
        {
            let mut st = lock(&self.state);
            st.consumed = true;
        }
        let survivors = lock(&self.run).kill(grace);
        if !survivors.is_empty() {
            return Err(survivors);
        }
        let mut st = lock(&self.state);
        // Callers only kill running processes; an exit recorded meanwhile is this kill's.
        st.exit = Some(ExitRecord {
            exit_code: -15,
            completion_reason: "killed".into(),
            termination_source: source.to_string(),
        });
        drop(st);
        self.changed.notify_all();
        Ok(())
    }

    /// Waits until the process exits, `timeout` passes or `cancelled` says stop.
    pub fn wait(&self, timeout: Duration, cancelled: &dyn Fn() -> bool) -> Option<ExitRecord> {
        let deadline = Instant::now() + timeout;
        let mut st = lock(&self.state);
        loop {
            if let Some(exit) = st.exit.clone() {
                // Let the reader take the last output (bounded by its 300 ms drain).
                let drain_until = Instant::now() + Duration::from_millis(500);
                while !st.reader_done && Instant::now() < drain_until {
                    st = self
                        .changed
                        .wait_timeout(st, Duration::from_millis(20))
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                }
                st.consumed = true;
                return Some(exit);
            }
            let now = Instant::now();
            if now >= deadline || cancelled() {
                return None;
            }
            let step = (deadline - now).min(Duration::from_millis(100));
            st = self
                .changed
                .wait_timeout(st, step)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    pub fn write(&self, data: &[u8]) -> std::io::Result<usize> {
        lock(&self.run).write_stdin(data)
    }

    /// The partly typed line (what earlier writes left after their last line end).
    pub fn typed_line(&self) -> String {
        lock(&self.typed_line).clone()
    }

    pub fn set_typed_line(&self, line: String) {
        *lock(&self.typed_line) = line;
    }

    pub fn close_stdin(&self) -> std::io::Result<()> {
        lock(&self.run).close_stdin()
    }

    pub fn list_row(&self) -> Value {
        let st = lock(&self.state);
        let mut row = json!({
            "session_id": self.id,
            "command": truncate_chars(&self.command, 200),
            "cwd": self.cwd,
            "pid": self.pid,
            "owner_task_id": self.owner_task_id,
            "started_at": self.started_at_epoch(),
            "uptime_seconds": self.uptime(),
            "status": if st.exit.is_some() { "exited" } else { "running" },
            "output_preview": clean(&tail_chars(&st.buffer, 200), &self.command),
        });
        if let Some(exit) = &st.exit {
            row["exit_code"] = json!(exit.exit_code);
            row["completion_reason"] = json!(exit.completion_reason);
        }
        if self.notify_on_complete {
            row["notify_on_complete"] = json!(true);
        }
        if !self.watch_patterns.is_empty() {
            row["watch_patterns"] = json!(self.watch_patterns);
        }
        row
    }

    pub fn poll(&self) -> Value {
        let st = lock(&self.state);
        let mut out = json!({
            "session_id": self.id,
            "command": self.command,
            "status": if st.exit.is_some() { "exited" } else { "running" },
            "pid": self.pid,
            "uptime_seconds": self.uptime(),
            "output_preview": clean(&tail_chars(&st.buffer, 1_000), &self.command),
        });
        if let Some(exit) = &st.exit {
            out["exit_code"] = json!(exit.exit_code);
            out["completion_reason"] = json!(exit.completion_reason);
            out["termination_source"] = json!(exit.termination_source);
        }
        out
    }
}

/// ANSI stripped, secrets redacted.
fn clean(text: &str, command: &str) -> String {
    super::output::redact(&hermes_command_guard::strip_ansi(text), command)
}

pub fn tail_chars(text: &str, n: usize) -> String {
    let count = text.chars().count();
    if count <= n {
        return text.to_string();
    }
    text.chars().skip(count - n).collect()
}

fn truncate_chars(text: &str, n: usize) -> String {
    text.chars().take(n).collect()
}

/// Finds one of `task_id`'s processes by id, `proc_`-less id or a prefix of at least
/// 4 hex digits unique among that task's processes. Another task's process is not
/// found, whatever the caller knows of its id.
pub fn find(task_id: &str, session_id: &str) -> Result<Arc<ProcessEntry>, String> {
    let wanted = session_id.trim();
    let bare = wanted.strip_prefix("proc_").unwrap_or(wanted);
    let reg = lock(registry());
    let mine = || reg.iter().filter(|e| e.owner_task_id == task_id);
    if let Some(e) = mine().find(|e| e.id == wanted || e.id == format!("proc_{bare}")) {
        return Ok(Arc::clone(e));
    }
    if bare.len() >= 4 && bare.chars().all(|c| c.is_ascii_hexdigit()) {
        let hits: Vec<&Arc<ProcessEntry>> =
            mine().filter(|e| e.id[5..].starts_with(bare)).collect();
        match hits.len() {
            1 => return Ok(Arc::clone(hits[0])),
            n if n > 1 => {
                return Err(format!(
                    "session_id '{wanted}' matches {n} processes; give more of the id"
                ))
            }
            _ => {}
        }
    }
    Err(format!(
        "no background process of this task with session_id '{wanted}' (see action=list)"
    ))
}

/// The processes `task_id` started.
pub fn list(task_id: &str) -> Vec<Arc<ProcessEntry>> {
    prune();
    lock(registry())
        .iter()
        .filter(|e| e.owner_task_id == task_id)
        .cloned()
        .collect()
}

/// Drops finished processes started more than 30 minutes ago.
fn prune() {
    let mut reg = lock(registry());
    reg.retain(|e| !(e.exit().is_some() && e.started.elapsed() > PRUNE_AFTER));
}

pub fn task_has_running(task_id: &str) -> bool {
    lock(registry())
        .iter()
        .any(|e| e.owner_task_id == task_id && e.exit().is_none())
}

/// Kills the running processes of a task.
pub fn kill_task_processes(task_id: &str) {
    let entries: Vec<Arc<ProcessEntry>> = lock(registry())
        .iter()
        .filter(|e| e.owner_task_id == task_id && e.exit().is_none())
        .cloned()
        .collect();
    for e in entries {
        let _ = e.kill(Duration::from_secs(1), "kill_all");
    }
}

/// Kills every running process (exit cleanup).
pub fn kill_all_processes() {
    let entries: Vec<Arc<ProcessEntry>> = lock(registry())
        .iter()
        .filter(|e| e.exit().is_none())
        .cloned()
        .collect();
    for e in entries {
        let _ = e.kill(Duration::from_millis(500), "kill_all");
    }
}

// ------------------------------------------------------------------ PTY processes

/// A process in a pseudo-terminal (30 rows x 120 columns).
pub struct PtyRun {
    child: Box<dyn portable_pty::Child + Send + Sync>,
    _master: Box<dyn portable_pty::MasterPty + Send>,
    writer: Option<Box<dyn std::io::Write + Send>>,
    rx: std::sync::mpsc::Receiver<Vec<u8>>,
    exit: Option<i32>,
    eof: bool,
}

impl PtyRun {
    /// Opens a terminal, then starts the command `command_for` builds for its device.
    pub fn spawn(
        command_for: impl FnOnce(Option<std::path::PathBuf>) -> Result<local::LocalCommand, String>,
    ) -> Result<PtyRun, String> {
        use portable_pty::PtySize;
        use std::os::unix::fs::OpenOptionsExt;
        use std::os::unix::process::CommandExt;
        let system = portable_pty::native_pty_system();
        let pair = system
            .openpty(PtySize {
                rows: 30,
                cols: 120,
                pixel_width: 0,
                pixel_height: 0,
            })
            .map_err(|e| e.to_string())?;
        let tty = pair
            .master
            .tty_name()
            .ok_or("the pseudo-terminal has no device name")?;
        let command = command_for(Some(tty.clone()))?;
        let mut cmd = command.to_command();
        // The terminal's device, opened afresh for the child's standard streams (the
        // slave end portable_pty holds would do the same): spawned here rather than by
        // portable_pty, which closes every inherited descriptor before the exec, the
        // sandbox's program among them.
        let terminal = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOCTTY | libc::O_CLOEXEC)
            .open(&tty)
            .map_err(|e| format!("cannot open {}: {e}", tty.display()))?;
        let copy = |t: &std::fs::File| t.try_clone().map_err(|e| e.to_string());
        cmd.stdin(copy(&terminal)?)
            .stdout(copy(&terminal)?)
            .stderr(terminal);
        // SAFETY: async-signal-safe calls only, on the child's own process.
        unsafe {
            cmd.pre_exec(|| {
                for signal in [
                    libc::SIGCHLD,
                    libc::SIGHUP,
                    libc::SIGINT,
                    libc::SIGQUIT,
                    libc::SIGTERM,
                    libc::SIGALRM,
                    libc::SIGPIPE,
                ] {
                    libc::signal(signal, libc::SIG_DFL);
                }
                let mut none: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut none);
                libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
                if libc::setsid() == -1 || libc::ioctl(0, libc::TIOCSCTTY as _, 0) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command
            .launch(move || cmd.spawn())
            .map_err(|e| e.to_string())?;
        let child: Box<dyn portable_pty::Child + Send + Sync> = Box::new(child);
        let mut reader = pair.master.try_clone_reader().map_err(|e| e.to_string())?;
        let writer = pair.master.take_writer().map_err(|e| e.to_string())?;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 16 * 1024];
            loop {
                match reader.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if tx.send(buf[..n].to_vec()).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        Ok(PtyRun {
            child,
            _master: pair.master,
            writer: Some(writer),
            rx,
            exit: None,
            eof: false,
        })
    }
}

use std::io::Read as _;

fn pty_code(status: portable_pty::ExitStatus) -> i32 {
    match status.signal() {
        None => status.exit_code() as i32,
        Some(sig) => {
            let s = sig.to_lowercase();
            if s.contains("kill") {
                -9
            } else if s.contains("term") {
                -15
            } else if s.contains("interrupt") {
                -2
            } else if s.contains("hang") {
                -1
            } else {
                -(status.exit_code() as i32).max(1)
            }
        }
    }
}

impl Running for PtyRun {
    fn pid(&self) -> Option<u32> {
        self.child.process_id()
    }

    fn read(&mut self, wait: Duration) -> ReadEvent {
        if self.eof {
            return ReadEvent::Eof;
        }
        match self.rx.recv_timeout(wait) {
            Ok(data) => ReadEvent::Data(data),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => ReadEvent::Idle,
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                self.eof = true;
                ReadEvent::Eof
            }
        }
    }

    fn try_wait(&mut self) -> Option<i32> {
        if self.exit.is_none() {
            if let Ok(Some(status)) = self.child.try_wait() {
                self.exit = Some(pty_code(status));
            }
        }
        self.exit
    }

    fn kill(&mut self, grace: Duration) -> Vec<u32> {
        let Some(pid) = self.child.process_id() else {
            return Vec::new();
        };
        let child = &mut self.child;
        let exit = &mut self.exit;
        local::kill_tree(pid, grace, &mut || {
            if exit.is_none() {
                if let Ok(Some(status)) = child.try_wait() {
                    *exit = Some(pty_code(status));
                }
            }
        })
    }

    fn write_stdin(&mut self, data: &[u8]) -> std::io::Result<usize> {
        let writer = self
            .writer
            .as_mut()
            .ok_or_else(|| std::io::Error::other("stdin was closed"))?;
        writer.write_all(data)?;
        writer.flush()?;
        Ok(data.len())
    }

    fn close_stdin(&mut self) -> std::io::Result<()> {
        // End of input on a terminal is Ctrl-D at the start of a line.
        let writer = self
            .writer
            .as_mut()
            .ok_or_else(|| std::io::Error::other("stdin was already closed"))?;
        writer.write_all(b"\x04")?;
        writer.flush()
    }
}

impl Drop for PtyRun {
    fn drop(&mut self) {
        let _ = self.child.try_wait();
    }
}
