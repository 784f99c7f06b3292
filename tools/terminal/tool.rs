//! The `terminal` toolset: `terminal` (run shell commands, foreground or background) and
//! `process` (alias `process_manage`: manage the background processes).
//!
//! The handlers check arguments, run the approval gate and shape the JSON results; the
//! work lives in the `hermes-environments` crate (environments/: the backends, shell
//! state, bounded capture and redaction, background processes, the settings) and beside
//! this file: `guidance.rs`, `workdir.rs`; the approval gate it shares with execute_code
//! is `crate::shared::command_approval`.

use hermes_runtime::prelude::*;
use std::time::{Duration, Instant};

pub mod guidance;
pub mod workdir;
use hermes_environments::{config, env, output, process_registry, snapshot};

pub use env::{cleanup_all_environments, cleanup_task};
pub use hermes_environments::process_registry::{drain_events, set_event_sink, EventSink};

use crate::shared::command_approval::{self as approval, envelope, has_host_access};
use crate::shared::live_output::LiveOutput;
use config::TerminalConfig;
use env::{ReadEvent, Running};

/// Run a shell command (bash) and get its output and exit code. Commands of one task
/// share a shell state: `cd` and `export` carry over to the next call. Output is merged
/// stdout+stderr; very long output is cut to its start and end, with the whole text saved
/// to a file whose path is given. Do not use this to read, write or search files: use
/// read_file, write_file, patch and search_files. For servers, watchers and anything that
/// does not finish on its own, set background=true and manage it with the process tool
/// (do not use `&`, nohup or disown). Dangerous commands may need the user's approval.
///
/// Reference §3: result keys `output, exit_code, error, cwd, ...` in that order;
/// refusals are the envelope `{output: "", exit_code: -1, error, status}`.
#[tool(toolset = "terminal", emoji = "💻", max_result_chars = 100_000, check = terminal_available)]
pub fn terminal(
    /// The command to run, as you would type it in bash.
    command: String,
    /// Run it as a tracked background process and return at once with a session_id for the process tool. Use for servers, watchers and long jobs. Default false.
    background: Option<bool>,
    /// Seconds to wait before the command is killed (exit code 124). Default 180; a foreground timeout above 600 is refused: run longer commands with background=true and notify_on_complete=true.
    timeout: Option<i64>,
    /// Directory to run this one command in (absolute, or ~/...). Letters, digits, spaces and / \ : _ - . ~ + @ = , only. Does not change the directory of later calls; use `cd` for that.
    workdir: Option<String>,
    /// Background only: run the process in a pseudo-terminal, for interactive programs that need a TTY (prompts, REPLs); send input with process action=write/submit. Default false.
    pty: Option<bool>,
    /// Background only: be notified automatically when the process finishes, instead of polling. Default false.
    notify_on_complete: Option<bool>,
    /// Background only: strings to watch for in the output (e.g. "listening on", "ERROR"); you are notified when a line contains one. Ignored when notify_on_complete is set.
    watch_patterns: Option<Vec<String>>,
    ctx: &ToolContext,
) -> ToolResult {
    let request = TerminalRequest {
        command,
        background: background.unwrap_or(false),
        timeout,
        workdir,
        pty: pty.unwrap_or(false),
        notify_on_complete: notify_on_complete.unwrap_or(false),
        watch_patterns: watch_patterns.unwrap_or_default(),
    };
    Ok(run_terminal(&request, ctx, false).into())
}

/// The availability probe: the configured backend has what it needs.
pub fn terminal_available() -> bool {
    availability_problem(&hermes_runtime::context::default_hermes_home()).is_none()
}

/// What is missing for the configured backend (`None` when it can be tried).
pub fn availability_problem(hermes_home: &std::path::Path) -> Option<String> {
    match TerminalConfig::load(hermes_home) {
        Ok(config) => env::availability(&config),
        Err(e) => Some(e),
    }
}

/// The arguments of one `terminal` call.
#[derive(Debug, Clone, Default)]
pub struct TerminalRequest {
    pub command: String,
    pub background: bool,
    pub timeout: Option<i64>,
    pub workdir: Option<String>,
    pub pty: bool,
    pub notify_on_complete: bool,
    pub watch_patterns: Vec<String>,
}

impl TerminalRequest {
    pub fn new(command: impl Into<String>) -> Self {
        Self {
            command: command.into(),
            ..Self::default()
        }
    }
}

/// Runs a terminal call and returns its result JSON. `force` skips the approval step
/// (used by an agent loop after the user approved); it never skips hardline or
/// blocked verdicts.
pub fn run_terminal(req: &TerminalRequest, ctx: &ToolContext, force: bool) -> Value {
    let command = req.command.as_str();
    if command.trim().is_empty() {
        return envelope("error", "command is empty: give the shell command to run");
    }
    let config = match TerminalConfig::load(ctx.hermes_home()) {
        Ok(c) => c,
        Err(e) => return envelope("error", &e),
    };
    if !env::BACKENDS.contains(&config.backend.as_str()) {
        return envelope("error", &env::unknown_backend(&config.backend).reason);
    }
    let timeout = match req.timeout {
        Some(t) if t <= 0 => {
            return envelope(
                "error",
                &format!("timeout must be at least 1 second, got {t}"),
            )
        }
        Some(t) => t as u64,
        None => config.timeout,
    };
    let background = req.background;
    if !background && timeout > config.max_foreground_timeout {
        return json!({"error": format!(
            "Foreground timeout {timeout}s exceeds the maximum of {}s. Use background=true with \
             notify_on_complete=true for long-running commands.",
            config.max_foreground_timeout
        )});
    }

    // Foreground guidance.
    if !background {
        if let Some(g) = guidance::foreground_guidance(command) {
            return envelope("error", &g.message);
        }
    }

    // Approval, before anything runs.
    let host_access = has_host_access(&config);
    let sandbox = (config.backend == "local").then_some(config.sandbox.mode);
    // Where the command will run, as known before its environment is: the person is
    // shown it, a grant covers it, and a command granted to leave the sandbox runs there.
    let directory = match req.workdir.as_deref() {
        Some(w) if w.starts_with('/') || w.starts_with('~') => w.to_string(),
        Some(w) => ctx.cwd().join(w).to_string_lossy().into_owned(),
        None => env::local_task_cwd(ctx.task_id())
            .unwrap_or_else(|| ctx.cwd().to_path_buf())
            .to_string_lossy()
            .into_owned(),
    };
    let clearance = match approval::sandboxed_approval_gate(
        command,
        &config.backend,
        host_access,
        ctx,
        force,
        sandbox,
        &directory,
    ) {
        Ok(clearance) => clearance,
        Err(refusal) => return refusal,
    };

    if let Some(dir) = &req.workdir {
        if let Err(msg) = workdir::validate(dir) {
            return envelope("blocked", &msg);
        }
    }

    if let Some(missing) = env::availability(&config) {
        return envelope(
            "disabled",
            &format!(
                "the {} terminal backend is not available: {missing}",
                config.backend
            ),
        );
    }
    let slot = match env::get_or_create(&config, ctx.task_id(), ctx.cwd()) {
        Ok(slot) => slot,
        Err(e) => {
            let mut out = envelope(
                "degraded",
                &format!(
                    "the {} environment could not be reached: {}",
                    config.backend, e.reason
                ),
            );
            out["reason"] = json!(e.reason);
            if let Some(hint) = &e.retry_hint {
                out["retry_hint"] = json!(hint);
            }
            if std::env::var("TERMINAL_DEGRADED_MODE").ok().as_deref() != Some("fail") {
                env::evict(ctx.task_id());
            }
            return out;
        }
    };
    let workdir = req.workdir.as_deref().map(|w| {
        if w.starts_with('/') || w.starts_with('~') || slot.env.backend() != "local" {
            w.to_string()
        } else {
            ctx.cwd().join(w).to_string_lossy().into_owned()
        }
    });
    let start_dir = workdir.clone().unwrap_or_else(|| slot.session.cwd());
    // Inside the OS sandbox a script is contained like the command that runs it, so only
    // the floors apply to its text; outside it, its text is asked about like a command.
    let contained = sandbox.is_some_and(|m| m != hermes_sandbox::Mode::Off) && !clearance.escalate;
    let clearance = match approval::script_gate(
        command,
        &start_dir,
        &config.backend,
        host_access,
        ctx,
        force,
        contained,
    ) {
        Ok(note) => approval::Clearance {
            note: note.or(clearance.note),
            ..clearance
        },
        Err(refusal) => return refusal,
    };

    if background {
        return start_background(req, &slot, workdir, ctx, clearance);
    }
    run_foreground(
        command,
        &slot,
        workdir.as_deref(),
        timeout,
        &config,
        ctx,
        clearance,
    )
}

fn start_background(
    req: &TerminalRequest,
    slot: &env::Slot,
    workdir: Option<String>,
    ctx: &ToolContext,
    clearance: approval::Clearance,
) -> Value {
    let notify = req.notify_on_complete;
    if !slot.env.supports_background() {
        return envelope(
            "error",
            &format!(
                "background processes are not supported on the {} backend; run the command in the foreground",
                slot.env.backend()
            ),
        );
    }
    let (watch, watch_ignored) = if notify && !req.watch_patterns.is_empty() {
        (Vec::new(), true)
    } else {
        (req.watch_patterns.clone(), false)
    };
    let cwd = workdir.clone().unwrap_or_else(|| slot.session.cwd());
    let mut pty = req.pty;
    let mut pty_note = None;
    if pty && slot.env.backend() != "local" {
        pty = false;
        pty_note = Some(format!("pty=true is only supported on the local backend; started without a pseudo-terminal on {}", slot.env.backend()));
    } else if pty && req.command.contains("gh auth login") && req.command.contains("--with-token") {
        pty = false;
        pty_note = Some("pty was turned off: `gh auth login --with-token` reads the token from a pipe, not a terminal".into());
    }
    let script = if clearance.escalate {
        slot.session.wrap_approved_background(
            &req.command,
            workdir.as_deref().or(clearance.directory.as_deref()),
        )
    } else {
        slot.session
            .wrap_background(&req.command, workdir.as_deref())
    };
    let spawned = process_registry::spawn(
        slot.env.as_ref(),
        process_registry::SpawnRequest {
            command: &req.command,
            script,
            cwd,
            task_id: ctx.task_id(),
            pty,
            notify_on_complete: notify,
            watch_patterns: watch.clone(),
            escalate: clearance.escalate,
        },
    );
    let entry = match spawned {
        Ok(entry) => entry,
        Err(e) => return envelope("error", &e),
    };
    let mut out = json!({
        "output": "Background process started. Use the process tool with this session_id to poll, read its log, wait for it or kill it.",
        "session_id": entry.id,
        "pid": entry.pid,
        "exit_code": 0,
        "error": null,
    });
    if let Some(note) = clearance.note {
        out["approval"] = note;
    }
    if let Some(note) = pty_note {
        out["pty_note"] = json!(note);
    }
    if notify {
        out["notify_on_complete"] = json!(true);
    }
    if !watch.is_empty() {
        out["watch_patterns"] = json!(watch);
    }
    if watch_ignored {
        out["watch_patterns_ignored"] = json!(true);
    }
    out
}

/// What running a script produced.
pub struct Execution {
    /// The bounded capture, not yet finished (callers may edit its end first).
    pub capture: output::BoundedCapture,
    pub exit_code: i32,
    pub timed_out: bool,
    pub interrupted: bool,
}

/// Runs a script to completion: merged output decoded incrementally and bounded while it
/// streams; on timeout or cancellation the whole tree is killed. Reading stops ~300 ms
/// after the script exits even if a grandchild still holds the pipe.
pub fn execute(
    run: &mut dyn Running,
    timeout: Duration,
    max_chars: usize,
    spill_dir: Option<std::path::PathBuf>,
    cancelled: &dyn Fn() -> bool,
    on_output: &mut dyn FnMut(&str),
) -> Execution {
    let mut decoder = output::Utf8Decoder::new();
    let mut capture = output::BoundedCapture::new(max_chars, spill_dir);
    let deadline = Instant::now() + timeout;
    let mut exit: Option<i32> = None;
    let mut exited_at: Option<Instant> = None;
    let mut eof = false;
    let mut timed_out = false;
    let mut interrupted = false;
    // After end of output the shell is usually exiting this very moment: poll for its
    // status quickly at first, then back off, so a short command costs no fixed sleep.
    let mut exit_poll = Duration::from_micros(50);
    loop {
        if !eof {
            match run.read(Duration::from_millis(20)) {
                ReadEvent::Data(bytes) => {
                    let text = decoder.push(&bytes);
                    on_output(&text);
                    capture.push_str(&text);
                }
                ReadEvent::Eof => eof = true,
                ReadEvent::Idle => on_output(""),
            }
        } else if exit.is_none() {
            if let Some(code) = run.wait_exit(exit_poll) {
                exit = Some(code);
                exited_at = Some(Instant::now());
            }
            exit_poll = (exit_poll * 2).min(Duration::from_millis(5));
        }
        if exit.is_none() {
            if let Some(code) = run.try_wait() {
                exit = Some(code);
                exited_at = Some(Instant::now());
            }
        }
        if exit.is_some()
            && (eof || exited_at.is_some_and(|t| t.elapsed() > Duration::from_millis(300)))
        {
            break;
        }
        if Instant::now() >= deadline {
            timed_out = true;
            break;
        }
        if cancelled() {
            interrupted = true;
            break;
        }
    }
    if timed_out || interrupted {
        run.kill(Duration::from_secs(1));
        // Whatever was already in the pipe.
        let until = Instant::now() + Duration::from_millis(200);
        while Instant::now() < until {
            match run.read(Duration::from_millis(20)) {
                ReadEvent::Data(bytes) => capture.push_str(&decoder.push(&bytes)),
                _ => break,
            }
        }
    }
    capture.push_str(&decoder.finish());
    let exit_code = if timed_out {
        124
    } else if interrupted {
        130
    } else {
        exit.unwrap_or(-1)
    };
    Execution {
        capture,
        exit_code,
        timed_out,
        interrupted,
    }
}

fn run_foreground(
    command: &str,
    slot: &env::Slot,
    workdir: Option<&str>,
    timeout: u64,
    config: &TerminalConfig,
    ctx: &ToolContext,
    clearance: approval::Clearance,
) -> Value {
    let _serial = slot.run_lock.lock().unwrap_or_else(|p| p.into_inner());
    // Before the first snapshot `restore` is empty and the command runs in a login shell.
    let restore = slot.session.restore();
    let body = slot.session.wrap_body(command, workdir);
    let login = restore.is_empty();
    let started = if clearance.escalate {
        let approved = slot
            .session
            .wrap_approved(command, workdir.or(clearance.directory.as_deref()));
        slot.env.run_bash_escalated(&approved, true, None)
    } else if login {
        slot.env.run_foreground(&body, true)
    } else {
        slot.env.run_foreground_restored(&slot.session, &body)
    };
    let mut run = match started {
        Ok(run) => run,
        Err(e) => {
            let mut out = envelope(
                "degraded",
                &format!(
                    "the {} environment failed to start the command: {}",
                    slot.env.backend(),
                    e.reason
                ),
            );
            out["reason"] = json!(e.reason);
            if let Some(hint) = &e.retry_hint {
                out["retry_hint"] = json!(hint);
            }
            return out;
        }
    };
    let spill_dir = ctx.hermes_home().join("cache").join("terminal-output");
    let cancel = ctx.cancellation().clone();
    let mut live = LiveOutput::new(ctx, command, Some(slot.session.marker()));
    let exec = execute(
        run.as_mut(),
        Duration::from_secs(timeout),
        config.max_output_chars,
        Some(spill_dir),
        &move || cancel.is_cancelled(),
        &mut |text| live.push(text),
    );
    live.flush();
    drop(run);
    if clearance.escalate {
        slot.session.merge_approved();
    }
    if !login {
        // The next command's shell starts (and restores the state) while this result is made.
        slot.env.prepare_foreground(&slot.session);
    }
    *slot.last_used.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();

    let mut capture = exec.capture;
    let mut marker = snapshot::MarkerInfo::default();
    capture.edit_end(|text| marker = slot.session.strip_marker(text));
    let captured = capture.finish();
    if let (Some(cwd), None) = (&marker.cwd, workdir) {
        slot.session.set_cwd(cwd.clone());
    }
    if let Some(path) = &captured.full_output_path {
        output::clean_spill_file(path, command);
        strip_marker_from_file(path, &slot.session);
    }
    let mut text = captured.text;
    if exec.timed_out {
        text.push_str(&format!("\n[Command timed out after {timeout}s]"));
    } else if exec.interrupted {
        text.push_str("\n[Command interrupted]");
    }
    let text = hermes_command_guard::strip_ansi(&text);
    let text = output::redact(text.trim(), command);

    let mut out = json!({
        "output": text,
        "exit_code": exec.exit_code,
        "error": null,
    });
    out["cwd"] = json!(marker
        .cwd
        .clone()
        .or_else(|| workdir.map(str::to_owned))
        .unwrap_or_else(|| slot.session.cwd()));
    if slot.env.take_recreated() {
        out["environment_recreated"] = json!(true);
    }
    if captured.truncated {
        out["output_total_chars"] = json!(captured.total_chars);
        if let Some(path) = &captured.full_output_path {
            out["full_output_path"] = json!(path.to_string_lossy());
        }
        let note = match (&captured.full_output_path, captured.spill_capped) {
            (Some(path), false) => format!(
                "The output had {} characters; only its start and end are shown. The whole output is in {} (read it \
                 with read_file or search_files instead of re-running the command).",
                captured.total_chars,
                path.display()
            ),
            (Some(path), true) => format!(
                "The output had {} characters; only its start and end are shown. Its first {} characters are in {}.",
                captured.total_chars,
                output::SPILL_MAX_CHARS,
                path.display()
            ),
            (None, _) => format!(
                "The output had {} characters; only its start and end are shown (it could not be saved to a file). \
                 Re-run with the output redirected to a file if you need all of it.",
                captured.total_chars
            ),
        };
        out["truncation_note"] = json!(note);
    }
    if let Some(note) = clearance.note {
        out["approval"] = note;
    }
    if let Some(mode) = slot.env.sandbox_mode().filter(|_| !clearance.escalate) {
        if let Some(note) = approval::sandbox_refusal_note(
            mode,
            exec.exit_code,
            out["output"].as_str().unwrap_or(""),
        ) {
            out["sandbox"] = json!(note);
        }
        if mode != hermes_sandbox::Mode::Off {
            let output = out["output"].as_str().unwrap_or("");
            let network = config.sandbox.network.refusal_note(output);
            if let Some(note) = config.sandbox.limits.reached(exec.exit_code, output) {
                out["limit"] = json!(note);
            }
            if let Some(note) = network {
                out["network"] = json!(note);
            }
        }
    }
    if !exec.timed_out && !exec.interrupted {
        if let Some(meaning) = output::exit_code_meaning(command, exec.exit_code) {
            out["exit_code_meaning"] = json!(meaning);
        }
    }
    if exec.exit_code == 126 && marker.cwd.is_none() {
        out["hint"] = json!(format!(
            "Exit code 126 here usually means the working directory {} does not exist or is not accessible.",
            workdir.map(str::to_owned).unwrap_or_else(|| slot.session.cwd())
        ));
    } else if exec.timed_out {
        out["hint"] = json!(
            "The command was killed at its timeout. If it is expected to run long, use a larger timeout or \
             background=true."
        );
    }
    out
}

/// The spill file holds the raw stream, marker line included: remove it.
fn strip_marker_from_file(path: &std::path::Path, session: &snapshot::ShellSession) {
    let Ok(mut text) = std::fs::read_to_string(path) else {
        return;
    };
    let before = text.len();
    session.strip_marker(&mut text);
    if text.len() != before {
        let _ = std::fs::write(path, text);
    }
}

// ------------------------------------------------------------------ process tool

/// What the process tool does.
#[derive(Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ProcessAction {
    List,
    Poll,
    Log,
    Wait,
    Kill,
    Write,
    Submit,
    Close,
}

impl ProcessAction {
    fn name(self) -> &'static str {
        match self {
            ProcessAction::List => "list",
            ProcessAction::Poll => "poll",
            ProcessAction::Log => "log",
            ProcessAction::Wait => "wait",
            ProcessAction::Kill => "kill",
            ProcessAction::Write => "write",
            ProcessAction::Submit => "submit",
            ProcessAction::Close => "close",
        }
    }
}

/// Manage background processes started with terminal(background=true): `list` them,
/// `poll` one for status and recent output, read its `log` (paged by lines), `wait` for it
/// to finish, `kill` it (with everything it started), or send input to a process started
/// with pty=true: `write` (raw text), `submit` (text + Enter), `close` (end of input).
#[tool(toolset = "terminal", emoji = "⚙️", aliases = ["process_manage"])]
pub fn process(
    /// What to do: list, poll, log, wait, kill, write, submit or close.
    action: ProcessAction,
    /// The process's session_id from terminal (proc_...; a unique prefix of 4+ hex digits works). Required for every action but list.
    session_id: Option<String>,
    /// Text to send, for write and submit.
    data: Option<String>,
    /// For wait: seconds to wait at most (default and maximum: the terminal timeout, 180).
    timeout: Option<i64>,
    /// For log: first line to return, 0-based. Without it you get the last `limit` lines.
    offset: Option<i64>,
    /// For log: how many lines to return. Default 200.
    limit: Option<i64>,
    ctx: &ToolContext,
) -> ToolResult {
    Ok(run_process(
        action,
        session_id.as_deref(),
        data.as_deref(),
        timeout,
        offset,
        limit,
        ctx,
    )
    .into())
}

fn status_error(status: &str, error: impl Into<String>) -> Value {
    json!({"status": status, "error": error.into()})
}

/// The process tool's logic, callable from Rust.
pub fn run_process(
    action: ProcessAction,
    session_id: Option<&str>,
    data: Option<&str>,
    timeout: Option<i64>,
    offset: Option<i64>,
    limit: Option<i64>,
    ctx: &ToolContext,
) -> Value {
    if action == ProcessAction::List {
        let rows: Vec<Value> = process_registry::list(ctx.task_id())
            .iter()
            .map(|e| e.list_row())
            .collect();
        return json!({"processes": rows});
    }
    let Some(session_id) = session_id.filter(|s| !s.trim().is_empty()) else {
        return status_error(
            "error",
            format!(
                "session_id is required for action '{}' (see action=list for the ids)",
                action.name()
            ),
        );
    };
    let entry = match process_registry::find(ctx.task_id(), session_id) {
        Ok(e) => e,
        Err(msg) => return status_error("not_found", msg),
    };
    let config = TerminalConfig::load(ctx.hermes_home()).ok();
    match action {
        ProcessAction::List => unreachable!("handled above"),
        ProcessAction::Poll => entry.poll(),
        ProcessAction::Log => {
            let limit = limit.filter(|l| *l >= 1).unwrap_or(200) as usize;
            let text = entry.output();
            let lines: Vec<&str> = text.lines().collect();
            let total = lines.len();
            let (start, end) = match offset {
                Some(o) => {
                    let start = (o.max(0) as usize).min(total);
                    (start, (start + limit).min(total))
                }
                None => (total.saturating_sub(limit), total),
            };
            let shown = &lines[start..end];
            json!({
                "session_id": entry.id,
                "command": entry.command,
                "status": entry.status(),
                "output": shown.join("\n"),
                "total_lines": total,
                "showing": format!("{} lines", shown.len()),
            })
        }
        ProcessAction::Wait => {
            let max = config.as_ref().map(|c| c.timeout).unwrap_or(180);
            let wait_for = match timeout {
                Some(t) if t <= 0 => {
                    return status_error(
                        "error",
                        format!("timeout must be at least 1 second, got {t}"),
                    )
                }
                Some(t) => (t as u64).min(max),
                None => max,
            };
            let cancel = ctx.cancellation().clone();
            match entry.wait(Duration::from_secs(wait_for), &move || {
                cancel.is_cancelled()
            }) {
                Some(exit) => {
                    let full = entry.output();
                    let tail = process_registry::tail_chars(&full, 2_000);
                    let mut out = json!({
                        "status": "exited",
                        "command": entry.command,
                        "exit_code": exit.exit_code,
                        "completion_reason": exit.completion_reason,
                        "termination_source": exit.termination_source,
                        "output": tail,
                    });
                    if full.chars().count() > 2_000 {
                        out["output_cut"] = json!(true);
                    }
                    out
                }
                None if ctx.cancellation().is_cancelled() => json!({
                    "status": "interrupted",
                    "command": entry.command,
                    "output": process_registry::tail_chars(&entry.output(), 1_000),
                    "note": "The wait was interrupted; the process is still running.",
                }),
                None => json!({
                    "status": "timeout",
                    "command": entry.command,
                    "output": process_registry::tail_chars(&entry.output(), 1_000),
                    "process_running": true,
                    "timeout_note": format!(
                        "The process is still running after {wait_for}s. Wait again, poll it later, or kill it."
                    ),
                }),
            }
        }
        ProcessAction::Kill => {
            if entry.exit().is_some() {
                return status_error("already_exited", format!("{} has already exited", entry.id));
            }
            let grace = Duration::from_secs_f64(
                config.as_ref().map(|c| c.term_grace_seconds).unwrap_or(2.0),
            );
            match entry.kill(grace, "process.kill") {
                Ok(()) => json!({
                    "status": "killed",
                    "session_id": entry.id,
                    "completion_reason": "killed",
                    "termination_source": "process.kill",
                }),
                Err(survivors) => json!({
                    "status": "error",
                    "error": format!("processes {survivors:?} of {} survived SIGTERM and SIGKILL", entry.id),
                    "process_running": true,
                }),
            }
        }
        ProcessAction::Write | ProcessAction::Submit => {
            if entry.exit().is_some() {
                return status_error(
                    "already_exited",
                    format!("{} has already exited; it cannot take input", entry.id),
                );
            }
            let mut text = data.unwrap_or("").to_string();
            if action == ProcessAction::Submit {
                text.push('\n');
            } else if text.is_empty() {
                return status_error("error", "data is required for action 'write'");
            }
            let host_access = config.as_ref().is_none_or(has_host_access);
            let env_type = entry.backend.as_str();
            match approval::submitted_input_gate(
                &entry.typed_line(),
                &text,
                env_type,
                host_access,
                ctx,
                entry.contained,
            ) {
                Ok(rest) => entry.set_typed_line(rest),
                Err(refusal) => return refusal,
            }
            match entry.write(text.as_bytes()) {
                Ok(n) => json!({"status": "ok", "bytes_written": n}),
                Err(e) => status_error("error", format!("cannot write to {}: {e}", entry.id)),
            }
        }
        ProcessAction::Close => {
            if entry.exit().is_some() {
                return status_error("already_exited", format!("{} has already exited", entry.id));
            }
            match entry.close_stdin() {
                Ok(()) => {
                    json!({"status": "ok", "message": format!("sent end of input to {}", entry.id)})
                }
                Err(e) => status_error(
                    "error",
                    format!("cannot close the input of {}: {e}", entry.id),
                ),
            }
        }
    }
}
