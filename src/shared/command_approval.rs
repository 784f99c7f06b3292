//! The approval gate of the terminal and execute_code tools: ONE function,
//! [`approval_gate`], decides whether a command may run before anything executes,
//! through the runtime's approval flow (`hermes_runtime::approval`), and maps its
//! verdict onto the tool's result shapes: a refusal is `E("blocked")`, a request waiting for the user is
//! `E("pending_approval")`.

use hermes_command_guard::{detect_hardline, match_deny_rule, sudo_stdin_guard};
use hermes_runtime::approval::{
    call_approval, is_isolated_backend, messages, Approvals, Grant, GuardOptions, ResultKind,
};
use hermes_runtime::ToolContext;
use serde_json::{json, Value};

/// The refusal envelope `E(status)` of the reference.
pub fn envelope(status: &str, error: &str) -> Value {
    json!({"output": "", "exit_code": -1, "error": error, "status": status})
}

/// `Ok(approval note or None)` when the command may run; `Err(result JSON)` when it is
/// refused, already in the terminal tool's result shape.
///
/// `has_host_access`: false for isolated backends (singularity, modal, daytona, kubernetes,
/// vercel_sandbox, docker without host mounts), where only `approvals.deny` applies.
/// `force` (set by an agent loop after the user approved) skips the human step, never
/// the floors.
pub fn approval_gate(
    command: &str,
    env_type: &str,
    has_host_access: bool,
    ctx: &ToolContext,
    force: bool,
) -> Result<Option<Value>, Value> {
    if force {
        let approvals = Approvals::for_home(ctx.hermes_home());
        return floors_only(&approvals, command, env_type, has_host_access);
    }
    let grant = granted(command, env_type, has_host_access, ctx, None)?;
    Ok(grant.and_then(Grant::note).map(|note| json!(note)))
}

/// The approval flow's answer for `command`: `Ok(why it may run)`, or the refusal in
/// the tool's result shape. `exactly_in`: only an earlier grant of exactly this command
/// in this directory counts (and the person is shown the directory).
fn granted(
    command: &str,
    env_type: &str,
    has_host_access: bool,
    ctx: &ToolContext,
    exactly_in: Option<&str>,
) -> Result<Option<Grant>, Value> {
    let approvals = Approvals::for_home(ctx.hermes_home());
    let (context, options) = call_approval(ctx);
    let options = GuardOptions {
        has_host_access,
        exact_grants: exactly_in.is_some(),
        working_directory: exactly_in.map(str::to_owned),
        ..options
    };
    let verdict = approvals.check_all_command_guards(command, env_type, &context, &options);
    let mut shape = verdict.to_json();
    let Value::Object(fields) = &mut shape else {
        unreachable!("verdicts serialise to objects")
    };
    fields.remove("approved");
    match verdict.kind {
        ResultKind::Approved => Ok(verdict.grant),
        ResultKind::Pending => {
            let mut pending = envelope("pending_approval", "");
            merge(&mut pending, fields);
            Err(pending)
        }
        _ => {
            let message = verdict
                .message
                .clone()
                .unwrap_or_else(|| "BLOCKED: the command was not approved.".into());
            let mut refusal = envelope("blocked", &message);
            fields.remove("message");
            merge(&mut refusal, fields);
            Err(refusal)
        }
    }
}

fn merge(target: &mut Value, fields: &serde_json::Map<String, Value>) {
    for (key, value) in fields {
        target[key.as_str()] = value.clone();
    }
}

/// With `force`: only what is never bypassed (deny rules; on host backends also the
/// hardline floor and the sudo -S guard).
fn floors_only(
    approvals: &Approvals,
    command: &str,
    env_type: &str,
    has_host_access: bool,
) -> Result<Option<Value>, Value> {
    let guard = approvals.guard_context();
    if let Some(glob) = match_deny_rule(command, &guard) {
        let mut refusal = envelope("blocked", &messages::deny_rule(&glob));
        refusal["user_deny"] = json!(true);
        return Err(refusal);
    }
    if is_isolated_backend(env_type, has_host_access) {
        return Ok(None);
    }
    if let Some(finding) = detect_hardline(command, &guard) {
        let mut refusal = envelope("blocked", &messages::hardline(&finding.description, None));
        refusal["hardline"] = json!(true);
        refusal["pattern_key"] = json!(finding.key);
        refusal["description"] = json!(finding.description);
        return Err(refusal);
    }
    if sudo_stdin_guard(command, &guard).is_some() {
        return Err(envelope("blocked", &messages::sudo_guard()));
    }
    Ok(None)
}

// ---------------------------------------------------------------------------------------
// Scripts run by path: `bash FILE`, `python3 FILE`, `./FILE`, `source FILE` run text the
// command line does not show, so that text is read and put through the same gate.

/// Scripts bigger than this are not read; the detector's own input limit is of this size.
const MAX_SCRIPT_BYTES: u64 = 128 * 1024;
/// Scripts that run scripts are followed this deep; deeper nesting is refused.
const MAX_SCRIPT_DEPTH: usize = 3;

enum ScriptText {
    Text(String),
    /// A compiled program: nothing to read lexically.
    Binary,
}

/// Opens without blocking (a FIFO or device never hangs the gate), and reads only a
/// regular file of bounded size.
fn read_script(path: &std::path::Path) -> Result<ScriptText, String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| format!("cannot be opened: {e}"))?;
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot be examined: {e}"))?;
    if !meta.is_file() {
        return Err("is not a regular file".into());
    }
    if meta.len() > MAX_SCRIPT_BYTES {
        return Err(format!("is larger than {MAX_SCRIPT_BYTES} bytes"));
    }
    let mut bytes = Vec::new();
    file.take(MAX_SCRIPT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot be read: {e}"))?;
    if bytes.len() as u64 > MAX_SCRIPT_BYTES {
        return Err(format!("is larger than {MAX_SCRIPT_BYTES} bytes"));
    }
    if bytes.contains(&0) {
        return Ok(ScriptText::Binary);
    }
    Ok(ScriptText::Text(
        String::from_utf8_lossy(&bytes).into_owned(),
    ))
}

/// Whether the file is a program for an interpreter other than a shell (by how it is run,
/// or by its `#!` line when it is executed by path).
fn runs_as_program(kind: hermes_command_guard::ScriptKind, text: &str) -> bool {
    use hermes_command_guard::ScriptKind;
    match kind {
        ScriptKind::Shell => false,
        ScriptKind::Interpreter => true,
        ScriptKind::Executable => text
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("#!"))
            .is_some_and(|shebang| {
                let words: Vec<&str> = shebang.split_whitespace().collect();
                let program = match words.as_slice() {
                    [env, program, ..] if env.ends_with("/env") => program,
                    [program, ..] => program,
                    [] => return false,
                };
                let name = program.rsplit('/').next().unwrap_or(program);
                !matches!(name, "sh" | "bash" | "dash" | "zsh" | "ksh" | "-S")
            }),
    }
}

/// What a program hands to a shell hides in its string literals (`os.system("...")`,
/// `` `...` `` in Perl and Ruby): the literals of each line, joined by spaces, one line per
/// source line. The program's own syntax is not shell and is left out.
fn program_strings(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let mut literals: Vec<String> = Vec::new();
        let mut chars = line.chars();
        while let Some(c) = chars.next() {
            if !matches!(c, '\'' | '"' | '`') {
                continue;
            }
            let mut literal = String::new();
            while let Some(inner) = chars.next() {
                match inner {
                    '\\' => literal.extend(chars.next()),
                    q if q == c => break,
                    other => literal.push(other),
                }
            }
            if !literal.is_empty() {
                literals.push(literal);
            }
        }
        if !literals.is_empty() {
            out.push_str(&literals.join(" "));
            out.push('\n');
        }
    }
    out
}

fn resolve_script_path(path: &str, cwd: &str) -> std::path::PathBuf {
    let home = std::env::var("HOME").unwrap_or_default();
    let expand = |p: &str| match p.strip_prefix('~') {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => format!("{home}{rest}"),
        _ => p.to_string(),
    };
    let path = expand(path);
    if path.starts_with('/') {
        path.into()
    } else {
        std::path::Path::new(&expand(cwd)).join(path)
    }
}

fn script_refusal(path: &str, why: &str) -> Value {
    let mut refusal = envelope(
        "blocked",
        &format!(
            "BLOCKED: the command runs the script {path}, which {why}, so its content cannot be checked \
             before it runs. Make sure the file exists as a regular file first (written in an earlier \
             call), then run it in a call of its own."
        ),
    );
    refusal["script"] = json!(path);
    refusal
}

/// The gate for the scripts a command runs by path, relative to `cwd` (the directory the
/// command starts in). Each script's text goes through [`approval_gate`] as if it were the
/// command; a script that cannot be read, is written by the same command, or whose path is
/// only known at run time is refused. Only files on this machine can be read, so only the
/// local backend is checked this way.
pub fn script_gate(
    command: &str,
    cwd: &str,
    env_type: &str,
    has_host_access: bool,
    ctx: &ToolContext,
    force: bool,
    contained: bool,
) -> Result<Option<Value>, Value> {
    if env_type != "local" {
        return Ok(None);
    }
    ScriptCheck {
        cwd,
        env_type,
        has_host_access,
        ctx,
        force,
        contained,
    }
    .check(command, 0)
}

struct ScriptCheck<'a> {
    cwd: &'a str,
    env_type: &'a str,
    has_host_access: bool,
    ctx: &'a ToolContext,
    force: bool,
    /// The command runs inside the OS sandbox: only the floors apply to script text.
    contained: bool,
}

impl ScriptCheck<'_> {
    fn check(&self, command: &str, depth: usize) -> Result<Option<Value>, Value> {
        let (cwd, env_type, has_host_access, ctx, force) = (
            self.cwd,
            self.env_type,
            self.has_host_access,
            self.ctx,
            self.force,
        );
        let guard = Approvals::for_home(ctx.hermes_home()).guard_context();
        let mut note = None;
        for run in hermes_command_guard::scripts_run_by_path(command, &guard) {
            // Contained, a script that cannot be read before it runs is no escape: the
            // sandbox holds whatever it does. Only readable text meets the floors.
            let skip_or_refuse = |why: &str| match self.contained {
                true => Ok(()),
                false => Err(script_refusal(&run.path, why)),
            };
            if run.dynamic {
                skip_or_refuse("is named by a variable, substitution or pattern")?;
                continue;
            }
            if run.written_by_command {
                skip_or_refuse("is written by the same command")?;
                continue;
            }
            if depth >= MAX_SCRIPT_DEPTH {
                skip_or_refuse(&format!(
                    "is nested more than {MAX_SCRIPT_DEPTH} scripts deep"
                ))?;
                continue;
            }
            let text = match read_script(&resolve_script_path(&run.path, cwd)) {
                Ok(ScriptText::Text(text)) => text,
                Ok(ScriptText::Binary)
                    if run.kind == hermes_command_guard::ScriptKind::Executable =>
                {
                    continue
                }
                Ok(ScriptText::Binary) => {
                    skip_or_refuse("is not text")?;
                    continue;
                }
                Err(why) => {
                    skip_or_refuse(&why)?;
                    continue;
                }
            };
            let text = if runs_as_program(run.kind, &text) {
                program_strings(&text)
            } else {
                text
            };
            let checked = format!("# {}, run by the command\n{text}", run.path);
            let verdict = if self.contained {
                floors_only(
                    &Approvals::for_home(ctx.hermes_home()),
                    &checked,
                    env_type,
                    has_host_access,
                )
            } else {
                approval_gate(&checked, env_type, has_host_access, ctx, force)
            };
            if let Some(granted) = verdict.map_err(|mut refusal| {
                refusal["script"] = json!(run.path);
                refusal
            })? {
                note = Some(granted);
            }
            if let Some(granted) = self.check(&text, depth + 1)? {
                note = Some(granted);
            }
        }
        Ok(note)
    }
}

// ---------------------------------------------------------------------------------------
// Input submitted to a running process (`process` write/submit): a shell, REPL or any
// program that can start one runs the lines it is sent, so each line is gated like a command.

/// Control keys whose effect on the line is known; anything else that moves the cursor or
/// recalls text (arrows, Ctrl-A/E/K/Y/R) makes the line the shell runs unknowable here.
fn edit_line(line: &mut String, key: char) -> bool {
    match key {
        '\u{7f}' | '\u{8}' => {
            line.pop();
        }
        '\u{15}' | '\u{3}' => line.clear(),
        '\u{17}' => {
            let kept = line
                .trim_end()
                .rfind(char::is_whitespace)
                .map_or(0, |i| i + 1);
            line.truncate(kept);
        }
        '\t' => line.push(' '),
        '\u{4}' => {}
        c if c.is_control() => return false,
        c => line.push(c),
    }
    true
}

/// The lines `data` completes (and the one it leaves typed), given what was typed before.
/// `None` when it holds line-editing keys whose effect cannot be followed.
pub fn submitted_lines(typed_before: &str, data: &str) -> Option<(Vec<String>, String)> {
    if data.contains(['\u{1b}', '\u{9b}']) {
        return None;
    }
    let mut lines = Vec::new();
    let mut line = typed_before.to_string();
    for key in data.chars() {
        if key == '\n' || key == '\r' {
            lines.push(std::mem::take(&mut line));
        } else if !edit_line(&mut line, key) {
            return None;
        }
    }
    Some((lines, line))
}

/// The gate for `process` write/submit: every line completed by `data`, and the line left
/// typed, goes through [`approval_gate`]. `Ok(typed line to remember)` when all may be sent.
pub fn submitted_input_gate(
    typed_before: &str,
    data: &str,
    env_type: &str,
    has_host_access: bool,
    ctx: &ToolContext,
    contained: bool,
) -> Result<String, Value> {
    let Some((lines, rest)) = submitted_lines(typed_before, data) else {
        return Err(envelope(
            "blocked",
            "BLOCKED: the input holds cursor-movement, history or other line-editing keys, so the line \
             the process would run cannot be checked. Send plain lines (text, backspace and Enter) instead.",
        ));
    };
    for line in lines
        .iter()
        .chain(std::iter::once(&rest))
        .filter(|l| !l.trim().is_empty())
    {
        let verdict = if contained {
            floors_only(
                &Approvals::for_home(ctx.hermes_home()),
                line,
                env_type,
                has_host_access,
            )
        } else {
            approval_gate(line, env_type, has_host_access, ctx, false)
        };
        verdict.map_err(|mut refusal| {
            refusal["input_line"] = json!(line);
            refusal
        })?;
    }
    Ok(rest)
}

// ------------------------------------------------------------------ the OS sandbox

/// A command the gate let through, and where it runs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Clearance {
    /// The `approval` note of the result, if any.
    pub note: Option<Value>,
    /// Run outside the OS sandbox: a person granted this flagged command.
    pub escalate: bool,
    /// Escalated: the directory the person was shown, where it runs.
    pub directory: Option<String>,
}

/// The approval gate in front of an environment with an OS sandbox (`sandbox` is its
/// mode; `None` or `off` is exactly [`approval_gate`]).
///
/// With the sandbox on, the operating system is the wall and the approval flow only
/// decides whether a flagged command may leave it:
/// - nobody to ask: the floors (hardline, `sudo -S`, `approvals.deny`) still refuse, and
///   a flagged command runs inside the sandbox without asking; it never escalates;
/// - a person to ask: the usual flow; a flagged command they granted (once, for the
///   session, always, or `force` from an agent loop after they approved) runs outside
///   the sandbox, in a clean login shell. Only a grant of exactly this command counts
///   (or a pattern the operator wrote in `command_allowlist`): an earlier grant of the
///   same kind of finding for another command asks again. Smart approval, yolo and
///   `approvals.mode: off` grant no escape. The decision is [`Grant::binds_to_the_command`].
pub fn sandboxed_approval_gate(
    command: &str,
    env_type: &str,
    has_host_access: bool,
    ctx: &ToolContext,
    force: bool,
    sandbox: Option<hermes_sandbox::Mode>,
    directory: &str,
) -> Result<Clearance, Value> {
    let Some(mode) = sandbox.filter(|m| *m != hermes_sandbox::Mode::Off) else {
        return approval_gate(command, env_type, has_host_access, ctx, force).map(|note| {
            Clearance {
                note,
                ..Clearance::default()
            }
        });
    };
    let approvals = Approvals::for_home(ctx.hermes_home());
    if force {
        floors_only(&approvals, command, env_type, has_host_access)?;
        return Ok(Clearance {
            note: Some(json!(
                "granted by the user; ran outside the sandbox in a clean login shell"
            )),
            escalate: true,
            directory: Some(directory.to_string()),
        });
    }
    let finding = approvals.check_dangerous_command(command);
    let context = sandbox_approval_context(ctx);
    if !context.has_human() {
        floors_only(&approvals, command, env_type, has_host_access)?;
        let note = finding.map(|f| {
            json!(format!(
                "{}: ran inside the sandbox (terminal.sandbox.mode: {}) without asking, since nobody can be asked \
                 here; it cannot leave the sandbox",
                f.description,
                mode.as_str()
            ))
        });
        return Ok(Clearance {
            note,
            ..Clearance::default()
        });
    }
    let grant = granted(command, env_type, has_host_access, ctx, Some(directory))?;
    let escalate = finding.is_some() && grant.is_some_and(Grant::binds_to_the_command);
    let note = grant.and_then(Grant::note).map(|note| match escalate {
        true => json!(format!(
            "{note}; ran outside the sandbox in a clean login shell"
        )),
        false => json!(note),
    });
    Ok(Clearance {
        note,
        escalate,
        directory: escalate.then(|| directory.to_string()),
    })
}

fn sandbox_approval_context(ctx: &ToolContext) -> hermes_runtime::approval::ApprovalContext {
    // The call's own approver (a terminal, a serve client, an MCP user) counts as a person.
    hermes_runtime::approval::call_approval(ctx).0
}

/// When a sandboxed command failed on a write the sandbox refused, the note that says so
/// and names the keys that govern it.
pub fn sandbox_refusal_note(
    mode: hermes_sandbox::Mode,
    exit_code: i32,
    output: &str,
) -> Option<String> {
    let refused = [
        "Read-only file system",
        "Permission denied",
        "Operation not permitted",
    ];
    if mode == hermes_sandbox::Mode::Off
        || exit_code == 0
        || !refused.iter().any(|r| output.contains(r))
    {
        return None;
    }
    let writable = match mode {
        hermes_sandbox::Mode::ReadOnly => "nothing is writable".to_string(),
        _ => "only the working directory, /tmp and terminal.sandbox.writable_roots are writable"
            .to_string(),
    };
    Some(format!(
        "Permission denied by the sandbox: this command ran inside the OS sandbox (terminal.sandbox.mode: {}), where \
         {writable}, and $HERMES_HOME and credential files (~/.ssh, ~/.aws, ...) are read-only everywhere; \
         'Read-only file system' or 'Permission denied' above is the sandbox refusing. It is not lifted by retrying \
         another way: the user can widen terminal.sandbox.writable_roots or approve the command.",
        mode.as_str()
    ))
}

/// Whether commands on the configured backend reach this machine's files.
pub fn has_host_access(config: &hermes_environments::config::TerminalConfig) -> bool {
    match config.backend.as_str() {
        "local" | "ssh" => true,
        "docker" => {
            config.docker_mount_cwd
                || config.docker_volumes.as_ref().is_ok_and(|v| {
                    v.iter().any(|v| {
                        let host = v.split(':').next().unwrap_or("");
                        host.starts_with('/') || host.starts_with('~') || host.starts_with('.')
                    })
                })
        }
        _ => false,
    }
}
