//! The approval context of one tool call: who can be asked is decided by the call's
//! [`ToolContext`] (its approver) on top of the process's `HERMES_*` signals.

use super::context::ApprovalContext;
use super::guard::GuardOptions;
use super::Approvals;
use crate::context::ToolContext;
use std::sync::Arc;

/// The context and options for an approval asked on behalf of `ctx`: its session key,
/// and its approver as the interactive prompter when that approver can reach a person.
pub fn call_approval(ctx: &ToolContext) -> (ApprovalContext, GuardOptions) {
    let mut context = ApprovalContext::from_env();
    if !ctx.session_id().is_empty() {
        context.session_key = Some(ctx.session_id().to_string());
    }
    let mut options = GuardOptions::default();
    if let Some(approver) = ctx.approver() {
        match approver.reachable() {
            Ok(()) => {
                context.interactive = true;
                options.prompter = Some(Arc::clone(approver));
            }
            Err(note) => context.channel_note = Some(note),
        }
    }
    (context, options)
}

/// The registry's hook gate for one call: a plugin hook answering `approve` asks the
/// same person (or falls under the same unattended policy) as a dangerous command.
pub struct CallApprovalGate {
    approvals: Arc<Approvals>,
    context: ApprovalContext,
    options: GuardOptions,
}

impl CallApprovalGate {
    pub fn for_call(ctx: &ToolContext) -> CallApprovalGate {
        let (context, options) = call_approval(ctx);
        CallApprovalGate {
            approvals: Approvals::for_home(ctx.hermes_home()),
            context,
            options,
        }
    }
}

impl crate::hooks::ApprovalGate for CallApprovalGate {
    fn approve(&self, tool: &str, message: &str, rule_key: &str) -> Result<bool, String> {
        let rule = Some(rule_key).filter(|k| !k.is_empty());
        let verdict =
            self.approvals
                .request_tool_approval(tool, message, rule, &self.context, &self.options);
        Ok(verdict.is_approved())
    }
}
