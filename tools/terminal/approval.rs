//! The approval gate of the terminal tool: ONE function, [`approval_gate`], decides
//! whether a command may run before anything executes, through the runtime's approval
//! flow (`hermes_runtime::approval`), and maps its verdict onto the tool's result
//! shapes: a refusal is `E("blocked")`, a request waiting for the user is
//! `E("pending_approval")`.

use hermes_command_guard::{detect_hardline, match_deny_rule, sudo_stdin_guard};
use hermes_runtime::approval::{is_isolated_backend, messages, ApprovalContext, Approvals, GuardOptions, ResultKind};
use hermes_runtime::ToolContext;
use serde_json::{json, Value};

/// The refusal envelope `E(status)` of the reference.
pub fn envelope(status: &str, error: &str) -> Value {
    json!({"output": "", "exit_code": -1, "error": error, "status": status})
}

/// `Ok(approval note or None)` when the command may run; `Err(result JSON)` when it is
/// refused, already in the terminal tool's result shape.
///
/// `has_host_access`: false for isolated backends (singularity, modal, daytona,
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
    let approvals = Approvals::for_home(ctx.hermes_home());
    if force {
        return floors_only(&approvals, command, env_type, has_host_access);
    }
    let mut context = ApprovalContext::from_env();
    if !ctx.session_id().is_empty() {
        context.session_key = Some(ctx.session_id().to_string());
    }
    let options = GuardOptions { has_host_access, ..Default::default() };
    let verdict = approvals.check_all_command_guards(command, env_type, &context, &options);
    let mut shape = verdict.to_json();
    let Value::Object(fields) = &mut shape else { unreachable!("verdicts serialise to objects") };
    fields.remove("approved");
    match verdict.kind {
        ResultKind::Approved => Ok(if verdict.user_approved {
            Some(json!("granted by the user"))
        } else if verdict.smart_approved {
            Some(json!("granted by smart approval"))
        } else {
            None
        }),
        ResultKind::Pending => {
            let mut pending = envelope("pending_approval", "");
            merge(&mut pending, fields);
            Err(pending)
        }
        _ => {
            let message = verdict.message.clone().unwrap_or_else(|| "BLOCKED: the command was not approved.".into());
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
fn floors_only(approvals: &Approvals, command: &str, env_type: &str, has_host_access: bool) -> Result<Option<Value>, Value> {
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

// ------------------------------------------------------------------ the OS sandbox

/// A command the gate let through, and where it runs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Clearance {
    /// The `approval` note of the result, if any.
    pub note: Option<Value>,
    /// Run outside the OS sandbox: a person granted this flagged command.
    pub escalate: bool,
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
///   the sandbox. Smart approval, yolo and `approvals.mode: off` grant no escape.
pub fn sandboxed_approval_gate(
    command: &str,
    env_type: &str,
    has_host_access: bool,
    ctx: &ToolContext,
    force: bool,
    sandbox: Option<hermes_sandbox::Mode>,
) -> Result<Clearance, Value> {
    let Some(mode) = sandbox.filter(|m| *m != hermes_sandbox::Mode::Off) else {
        return approval_gate(command, env_type, has_host_access, ctx, force).map(|note| Clearance { note, escalate: false });
    };
    let approvals = Approvals::for_home(ctx.hermes_home());
    if force {
        floors_only(&approvals, command, env_type, has_host_access)?;
        return Ok(Clearance { note: Some(json!("granted by the user; ran outside the sandbox")), escalate: true });
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
        return Ok(Clearance { note, escalate: false });
    }
    let note = approval_gate(command, env_type, has_host_access, ctx, false)?;
    let escalate = finding.is_some() && is_personal_grant(&approvals, &context, note.as_ref());
    let note = match (escalate, note) {
        (true, Some(Value::String(n))) => Some(json!(format!("{n}; ran outside the sandbox"))),
        (true, None) => Some(json!("granted earlier by the user; ran outside the sandbox")),
        (_, note) => note,
    };
    Ok(Clearance { note, escalate })
}

fn sandbox_approval_context(ctx: &ToolContext) -> ApprovalContext {
    let mut context = ApprovalContext::from_env();
    if !ctx.session_id().is_empty() {
        context.session_key = Some(ctx.session_id().to_string());
    }
    context
}

/// Whether an approved flagged command was approved by a person (now, or by a session
/// or permanent grant) rather than by a blanket bypass or a model.
fn is_personal_grant(approvals: &Approvals, context: &ApprovalContext, note: Option<&Value>) -> bool {
    match note.and_then(Value::as_str) {
        Some("granted by the user") => true,
        Some(_) => false,
        None => {
            let bypass = approvals.process_yolo()
                || context.yolo
                || approvals.is_session_yolo(&context.session_key())
                || approvals.policy().mode == hermes_runtime::approval::ApprovalMode::Off;
            !bypass
        }
    }
}

/// When a sandboxed command failed on a write the sandbox refused, the note that says so
/// and names the keys that govern it.
pub fn sandbox_refusal_note(mode: hermes_sandbox::Mode, exit_code: i32, output: &str) -> Option<String> {
    let refused = ["Read-only file system", "Permission denied", "Operation not permitted"];
    if mode == hermes_sandbox::Mode::Off || exit_code == 0 || !refused.iter().any(|r| output.contains(r)) {
        return None;
    }
    let writable = match mode {
        hermes_sandbox::Mode::ReadOnly => "nothing is writable".to_string(),
        _ => "only the working directory, /tmp and terminal.sandbox.writable_roots are writable".to_string(),
    };
    Some(format!(
        "Permission denied by the sandbox: this command ran inside the OS sandbox (terminal.sandbox.mode: {}), where \
         {writable}, and $HERMES_HOME and credential files (~/.ssh, ~/.aws, ...) are read-only everywhere; \
         'Read-only file system' or 'Permission denied' above is the sandbox refusing. It is not lifted by retrying \
         another way: the user can widen terminal.sandbox.writable_roots or approve the command.",
        mode.as_str()
    ))
}
