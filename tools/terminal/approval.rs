//! The approval gate of the terminal tool: ONE function, [`approval_gate`], decides
//! whether a command may run before anything executes, through the runtime's approval
//! flow (`hermes_runtime::approval`), and maps its verdict onto the tool's result
//! shapes: a refusal is `E("blocked")`, a request waiting for the user is
//! `E("pending_approval")`.

use hermes_command_guard::{detect_hardline, match_deny_rule, sudo_stdin_guard};
use hermes_runtime::approval::{call_approval, is_isolated_backend, messages, Approvals, GuardOptions, ResultKind};
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
    let (context, options) = call_approval(ctx);
    let options = GuardOptions { has_host_access, ..options };
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
