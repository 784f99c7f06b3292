//! [`Approvals::check_all_command_guards`]: the whole gate for one shell command
//! (reference §2.1 and §2.2).

use super::context::{ApprovalContext, NoHumanReason};
use super::gateway::{GatewayAnswer, GatewayAsk};
use super::messages;
use super::policy::{ApprovalMode, NoHumanMode};
use super::prompt::{ApprovalPrompter, PromptRequest};
use super::result::{Choice, Grant, GuardResult, Outcome, ResultKind};
use super::smart::{unreviewable, ReviewRequest, SmartVerdict};
use super::{read, Approvals};
use crate::redact::redact_secrets;
use hermes_command_guard::{
    detect_dangerous, detect_hardline, match_deny_rule, matches_allowlist, sudo_stdin_guard,
    GuardContext, MALFORMED_PAYLOAD_KEY, PARSER_LIMIT_KEY,
};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Backends that run commands away from the host: only deny rules apply there.
pub const ISOLATED_BACKENDS: &[&str] = &[
    "singularity",
    "modal",
    "daytona",
    "vercel_sandbox",
    "kubernetes",
];

/// `docker` counts as isolated unless it has host access (a cwd mount at `/workspace` or
/// a host volume); the caller works that out from its backend settings.
pub fn is_isolated_backend(env_type: &str, has_host_access: bool) -> bool {
    let env = env_type.trim().to_ascii_lowercase();
    ISOLATED_BACKENDS.contains(&env.as_str()) || (env == "docker" && !has_host_access)
}

/// What an external scanner (the original's tirith) says about a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScanVerdict {
    Allow,
    Block {
        rule_id: String,
        summary: String,
    },
    Warn {
        rule_id: String,
        summary: String,
    },
    /// The scanner could not run; `security.tirith_fail_open` decides.
    Unavailable(String),
}

/// An optional second opinion next to the built-in detector; none is installed by default.
pub trait CommandScanner: Send + Sync {
    fn scan(&self, command: &str) -> ScanVerdict;
}

/// Per-call options of [`Approvals::check_all_command_guards`].
#[derive(Clone, Default)]
pub struct GuardOptions {
    /// For `docker`: the container sees host files, so it is not isolated.
    pub has_host_access: bool,
    /// The interactive prompter for this call (else the one set on [`Approvals`]).
    pub prompter: Option<Arc<dyn ApprovalPrompter>>,
    /// Overrides `approvals.timeout` for the human step.
    pub timeout: Option<Duration>,
    /// Earlier grants count only for exactly the commands a person granted, not for
    /// every command with the same kind of finding (where a grant lets the command
    /// leave the OS sandbox).
    pub exact_grants: bool,
    /// The directory the command will run in: shown to the person, and part of what
    /// an exact grant covers (`rm -rf build` granted in one directory is asked again in
    /// another).
    pub working_directory: Option<String>,
}

/// What an exact grant of `command` is kept as: the command, and where it runs.
fn grant_key(command: &str, options: &GuardOptions) -> String {
    match &options.working_directory {
        Some(dir) => format!("{command}\n# in {dir}"),
        None => command.to_string(),
    }
}

/// A finding with where it came from.
#[derive(Debug, Clone)]
struct Flag {
    key: String,
    description: String,
    from_scanner: bool,
}

impl Approvals {
    /// The detector's view of this installation: home folders, temp dir, deny globs.
    pub fn guard_context(&self) -> GuardContext {
        let real = |p: &Path| {
            std::fs::canonicalize(p)
                .ok()
                .filter(|r| r != p)
                .map(|r| r.to_string_lossy().into_owned())
        };
        let home = std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from);
        let temp = std::env::temp_dir();
        GuardContext {
            home_real: home.as_deref().and_then(real),
            home: home.map(|h| h.to_string_lossy().into_owned()),
            hermes_home: Some(self.hermes_home.to_string_lossy().into_owned()),
            hermes_home_real: real(&self.hermes_home),
            temp_dir: std::fs::canonicalize(&temp)
                .unwrap_or(temp)
                .to_string_lossy()
                .into_owned(),
            deny_globs: self.policy().deny.clone(),
        }
    }

    /// `check_dangerous_command`: the detector only (no floors, no state).
    pub fn check_dangerous_command(&self, command: &str) -> Option<hermes_command_guard::Finding> {
        detect_dangerous(command, &self.guard_context())
    }

    fn scanner_flag(&self, command: &str) -> Option<Flag> {
        let scanner = read(&self.scanner)?;
        let flag = |rule_id: &str, level: &str, summary: &str| Flag {
            key: format!("tirith:{rule_id}"),
            description: format!("security scan {level}: {summary}"),
            from_scanner: true,
        };
        match scanner.scan(command) {
            ScanVerdict::Allow => None,
            ScanVerdict::Block { rule_id, summary } => Some(flag(&rule_id, "block", &summary)),
            ScanVerdict::Warn { rule_id, summary } => Some(flag(&rule_id, "warning", &summary)),
            ScanVerdict::Unavailable(why) if !self.policy().scanner_fail_open => {
                Some(flag("unavailable", "unavailable (fail-closed)", &why))
            }
            ScanVerdict::Unavailable(_) => None,
        }
    }

    fn flags(&self, command: &str, guard: &GuardContext) -> Vec<Flag> {
        let mut flags: Vec<Flag> = detect_dangerous(command, guard)
            .map(|f| Flag {
                key: f.key,
                description: f.description,
                from_scanner: false,
            })
            .into_iter()
            .collect();
        flags.extend(self.scanner_flag(command));
        flags
    }

    /// The whole approval gate for a shell command about to run on `env_type`.
    pub fn check_all_command_guards(
        &self,
        command: &str,
        env_type: &str,
        ctx: &ApprovalContext,
        options: &GuardOptions,
    ) -> GuardResult {
        let guard = self.guard_context();
        let policy = self.policy();

        // 1. Isolated backends: the operator's deny rules only.
        if is_isolated_backend(env_type, options.has_host_access) {
            return match match_deny_rule(command, &guard) {
                Some(glob) => {
                    GuardResult::with_message(ResultKind::UserDeny, messages::deny_rule(&glob))
                }
                None => GuardResult::granted(Grant::IsolatedBackend),
            };
        }

        // 2. Floors, never bypassed.
        if let Some(finding) = detect_hardline(command, &guard) {
            let saved = (finding.key == PARSER_LIMIT_KEY || finding.key == MALFORMED_PAYLOAD_KEY)
                .then(|| save_blocked_script(&self.hermes_home, command));
            let saved_ref = saved
                .as_ref()
                .map(|r| r.as_ref().map(|p| p.to_str().unwrap_or("")).map_err(|_| ()));
            let mut result = GuardResult::with_message(
                ResultKind::Hardline,
                messages::hardline(&finding.description, saved_ref),
            );
            result.pattern_key = Some(finding.key);
            result.description = Some(finding.description);
            return result;
        }
        if sudo_stdin_guard(command, &guard).is_some() {
            return GuardResult::with_message(ResultKind::Sudo, messages::sudo_guard());
        }
        if let Some(glob) = match_deny_rule(command, &guard) {
            return GuardResult::with_message(ResultKind::UserDeny, messages::deny_rule(&glob));
        }

        // 3. Bypasses.
        let session = ctx.session_key();
        if self.process_yolo()
            || ctx.yolo
            || self.is_session_yolo(&session)
            || policy.mode == ApprovalMode::Off
        {
            return GuardResult::granted(Grant::Bypass);
        }

        // 4. The permanent allowlist, matched as commands.
        if matches_allowlist(command, &self.permanent_entries()) {
            return GuardResult::granted(Grant::PermanentCommand);
        }

        // 5. Nobody to ask.
        if !ctx.has_human() {
            let Some(reason) = ctx.no_human_reason() else {
                return GuardResult::granted(Grant::Unattended);
            };
            if self.no_human_mode(&reason) == NoHumanMode::Approve {
                return GuardResult::granted(Grant::Unattended);
            }
            return match self.flags(command, &guard).into_iter().next() {
                Some(flag) => unattended_refusal(flag, &reason, ctx),
                None => GuardResult::granted(Grant::NothingFlagged),
            };
        }

        // 6. Findings not yet approved: the command itself granted before, else the
        // kinds of findings granted before (unless only exact grants count).
        let all = self.flags(command, &guard);
        if all.is_empty() {
            return GuardResult::granted(Grant::NothingFlagged);
        }
        let key = grant_key(command, options);
        if self.is_command_granted_for_session(&session, &key) {
            return GuardResult::granted(Grant::SessionCommand);
        }
        if self.permanently_granted_commands().contains(&key) {
            return GuardResult::granted(Grant::PermanentCommand);
        }
        let flags: Vec<Flag> = {
            let state = self.lock();
            all.iter()
                .filter(|f| !state.is_approved(&session, &f.key))
                .cloned()
                .collect()
        };
        let flags = match (flags.is_empty(), options.exact_grants) {
            (true, false) => return GuardResult::granted(Grant::Category),
            (true, true) => all,
            (false, _) => flags,
        };

        // 7. A decision.
        self.decide("terminal", command, ctx, &session, &flags, options, false)
    }

    fn breaker_streak(&self, session: &str) -> Option<u32> {
        let threshold = self.policy().breaker_threshold()?;
        let streak = self.denial_streak(session);
        (streak >= threshold).then_some(streak)
    }

    fn smart_review(&self, command: &str, description: &str) -> SmartVerdict {
        if unreviewable(command) || unreviewable(description) {
            return SmartVerdict::Escalate;
        }
        let Some(guardian) = read(&self.guardian) else {
            return SmartVerdict::Escalate;
        };
        let request = ReviewRequest {
            command: command.to_string(),
            description: description.to_string(),
            policy: self.policy().smart_policy.clone(),
        };
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| guardian.review(&request)))
            .unwrap_or(SmartVerdict::Escalate)
    }

    #[allow(clippy::too_many_arguments)]
    fn decide(
        &self,
        tool: &str,
        command: &str,
        ctx: &ApprovalContext,
        session: &str,
        flags: &[Flag],
        options: &GuardOptions,
        once_only: bool,
    ) -> GuardResult {
        let policy = self.policy();
        let timeout = options.timeout.unwrap_or(policy.timeout);
        let pattern_keys: Vec<String> = flags.iter().map(|f| f.key.clone()).collect();
        let pattern_key = pattern_keys[0].clone();
        let description = flags
            .iter()
            .map(|f| f.description.as_str())
            .collect::<Vec<_>>()
            .join("; ");
        let allow_permanent = !once_only && flags.iter().any(|f| !f.from_scanner);
        let base = |kind: ResultKind| GuardResult {
            pattern_key: Some(pattern_key.clone()),
            pattern_keys: pattern_keys.clone(),
            description: Some(description.clone()),
            ..GuardResult::new(kind)
        };

        let prompter = options.prompter.clone().or_else(|| read(&self.prompter));
        // Someone can answer: a terminal or client user behind a prompter, or a gateway/ask
        // user (by card, or later through the pending request, which only a running gateway
        // shows). Flags alone reach nobody: then the unattended policy applies, and the
        // model is never told that a person was asked.
        let gateway_reachable = (ctx.is_gateway() || ctx.is_ask()) && self.has_gateway_notifier();
        let human_reachable = gateway_reachable || (ctx.is_cli() && prompter.is_some());

        // Smart review.
        let mut smart_denied = false;
        if policy.mode == ApprovalMode::Smart {
            match self.smart_review(command, &description) {
                SmartVerdict::Approve => {
                    self.lock().set_streak(session, 0);
                    return GuardResult {
                        smart_approved: true,
                        ..GuardResult::granted(Grant::Smart)
                    };
                }
                SmartVerdict::Deny => {
                    {
                        let mut state = self.lock();
                        let streak = state.streak(session).saturating_add(1);
                        state.set_streak(session, streak);
                    }
                    smart_denied = true;
                    if !human_reachable {
                        return GuardResult {
                            message: Some(messages::smart_denied(
                                &description,
                                self.breaker_streak(session),
                            )),
                            smart_denied: true,
                            ..base(ResultKind::Blocked)
                        };
                    }
                }
                SmartVerdict::Escalate => {}
            }
        }
        if !human_reachable {
            if self.no_human_mode(&NoHumanReason::Unspecified) == NoHumanMode::Approve {
                return GuardResult::granted(Grant::Unattended);
            }
            let flag = flags[0].clone();
            return GuardResult {
                description: Some(description.clone()),
                pattern_keys: pattern_keys.clone(),
                ..unattended_refusal(flag, &NoHumanReason::Unspecified, ctx)
            };
        }
        let allow_permanent = allow_permanent && !smart_denied;
        let hook_payload = |surface: &str| {
            json!({
                "command": redact_secrets(command),
                "description": description,
                "pattern_key": pattern_key,
                "pattern_keys": pattern_keys,
                "session_key": session,
                "surface": surface,
                "smart_denied": smart_denied,
            })
        };

        // Gateway / ask.
        let mut answer: Option<(Choice, Option<String>, bool)> = None;
        if gateway_reachable {
            self.observe("pre_approval_request", &hook_payload("gateway"));
            let waited = self.gateway_wait(&GatewayAsk {
                session,
                command,
                description: &description,
                pattern_keys: &pattern_keys,
                allow_permanent,
                allow_session: !once_only,
                smart_denied,
                timeout,
            });
            let post = |choice: &str| {
                let mut payload = hook_payload("gateway");
                payload["choice"] = json!(choice);
                self.observe("post_approval_response", &payload);
            };
            match waited {
                GatewayAnswer::Answer {
                    choice,
                    reason,
                    coalesced,
                } => {
                    post(choice.as_str());
                    answer = Some((choice, reason, coalesced));
                }
                GatewayAnswer::Timeout { coalesced } => {
                    post("timeout");
                    answer = Some((Choice::Timeout, None, coalesced));
                }
                GatewayAnswer::Interrupted => {
                    post("deny");
                    return GuardResult {
                        message: Some(messages::interrupted(&description)),
                        outcome: Some(Outcome::Denied),
                        smart_denied,
                        ..base(ResultKind::Refused)
                    };
                }
                GatewayAnswer::NotifyFailed(error) => {
                    post("notify_failed");
                    return GuardResult {
                        message: Some(messages::notify_failed(&description, &error)),
                        outcome: Some(Outcome::NotifyFailed),
                        smart_denied,
                        ..base(ResultKind::Refused)
                    };
                }
                GatewayAnswer::NoNotify => {}
            }
        }

        // Terminal prompt (or park the request).
        let (choice, reason, coalesced) = match answer {
            Some(answer) => answer,
            None => match (ctx.is_cli(), prompter) {
                (true, Some(prompter)) => {
                    self.observe("pre_approval_request", &hook_payload("cli"));
                    let request = PromptRequest {
                        command: command.to_string(),
                        description: description.clone(),
                        timeout,
                        allow_permanent,
                        allow_session: !smart_denied && !once_only,
                        smart_denied,
                        title: None,
                        tool: Some(tool.to_string()),
                        working_directory: options.working_directory.clone(),
                    };
                    let choice = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        prompter.prompt(&request)
                    }))
                    .unwrap_or(Choice::Deny);
                    let mut payload = hook_payload("cli");
                    payload["choice"] = json!(choice.as_str());
                    self.observe("post_approval_response", &payload);
                    (choice, None, false)
                }
                _ => {
                    let redacted = redact_secrets(command);
                    return GuardResult {
                        message: Some(messages::pending(&description, &redacted)),
                        command: Some(redacted),
                        smart_denied,
                        allow_permanent,
                        ..base(ResultKind::Pending)
                    };
                }
            },
        };

        // Refusals.
        if !choice.grants() {
            let streak = self.breaker_streak(session);
            let (outcome, message) = match choice {
                Choice::Timeout => (Outcome::Timeout, messages::timed_out(&description, streak)),
                _ => (
                    Outcome::Denied,
                    messages::human_denied(&description, reason.as_deref(), streak),
                ),
            };
            return GuardResult {
                message: Some(message),
                outcome: Some(outcome),
                deny_reason: reason.filter(|_| outcome == Outcome::Denied),
                choice: Some(choice),
                smart_denied,
                coalesced,
                ..base(ResultKind::Refused)
            };
        }

        // Grants: a smart-denied command is granted once only; `always` needs a
        // permanent-capable finding.
        let choice = match choice {
            _ if smart_denied || once_only => Choice::Once,
            Choice::Always if !allow_permanent => Choice::Session,
            other => other,
        };
        let mut save = false;
        {
            let mut state = self.lock();
            state.set_streak(session, 0);
            if matches!(choice, Choice::Session | Choice::Always) {
                let set = state.sessions.entry(session.to_string()).or_default();
                set.extend(pattern_keys.iter().cloned());
                if tool == "terminal" {
                    state
                        .session_commands
                        .entry(session.to_string())
                        .or_default()
                        .insert(grant_key(command, options));
                }
            }
            if choice == Choice::Always {
                for flag in flags.iter().filter(|f| !f.from_scanner) {
                    save |= state.permanent.insert(flag.key.clone());
                }
            }
        }
        if save {
            let _ = self.save_permanent_allowlist();
        }
        if choice == Choice::Always && tool == "terminal" {
            if let Err(e) = self.grant_command_permanently(&grant_key(command, options)) {
                eprintln!("warning: the command granted with `always` was not saved: {e}");
            }
        }
        GuardResult {
            user_approved: true,
            description: Some(description.clone()),
            choice: Some(choice),
            coalesced,
            ..GuardResult::granted(Grant::Person(choice))
        }
    }
}

/// Keeps a command that hit the parser limit as a script for the user to inspect:
/// `$HERMES_HOME/cache/blocked-scripts/blocked-<epoch>-<8hex>.sh`; files older than 7
/// days there are pruned.
pub(crate) fn save_blocked_script(hermes_home: &Path, command: &str) -> Result<PathBuf, String> {
    let dir = hermes_home.join("cache").join("blocked-scripts");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let week = Duration::from_secs(7 * 24 * 3600);
    if let Ok(entries) = std::fs::read_dir(&dir) {
        for entry in entries.flatten() {
            let old = entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age > week);
            let ours = entry.file_name().to_string_lossy().starts_with("blocked-");
            if old && ours {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
    let epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let path = dir.join(format!(
        "blocked-{epoch}-{}.sh",
        crate::random::random_hex(8)
    ));
    std::fs::write(&path, command).map_err(|e| e.to_string())?;
    Ok(path)
}

/// Stable 48-bit FNV-1a digest as 12 hex digits (default plugin rule keys).
fn short_digest(text: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.as_bytes() {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{:012x}", hash & 0xffff_ffff_ffff)
}

impl Approvals {
    /// `check_execute_code_guard`: a whole script for the code-execution tool. Isolated
    /// backends skip it, yolo / mode off approve, no-human contexts in deny mode block, and
    /// only gateway / ask users get a one-shot approval (key `execute_code`); elsewhere it runs.
    pub fn check_execute_code_guard(
        &self,
        code: &str,
        env_type: &str,
        ctx: &ApprovalContext,
        options: &GuardOptions,
    ) -> GuardResult {
        if is_isolated_backend(env_type, options.has_host_access) {
            return GuardResult::approved();
        }
        let session = ctx.session_key();
        if self.process_yolo()
            || ctx.yolo
            || self.is_session_yolo(&session)
            || self.policy().mode == ApprovalMode::Off
        {
            return GuardResult::approved();
        }
        let flag = Flag {
            key: "execute_code".to_string(),
            description: "run a script with execute_code".to_string(),
            from_scanner: true,
        };
        if !ctx.has_human() {
            if let Some(reason) = ctx.no_human_reason() {
                if self.no_human_mode(&reason) == NoHumanMode::Deny {
                    return unattended_refusal(flag, &reason, ctx);
                }
            }
            return GuardResult::approved();
        }
        if !(ctx.is_gateway() || ctx.is_ask()) {
            return GuardResult::approved();
        }
        self.decide("execute_code", code, ctx, &session, &[flag], options, true)
    }

    /// `request_tool_approval`: a hook or plugin asks a human before a tool runs. The key is
    /// `plugin_rule:<rule_key>` (default `<tool>:<12 hex digest of reason>`); without a human
    /// it fails closed.
    pub fn request_tool_approval(
        &self,
        tool: &str,
        reason: &str,
        rule_key: Option<&str>,
        ctx: &ApprovalContext,
        options: &GuardOptions,
    ) -> GuardResult {
        let rule = rule_key
            .map(str::trim)
            .filter(|k| !k.is_empty())
            .map(str::to_string)
            .unwrap_or_else(|| format!("{tool}:{}", short_digest(reason)));
        let flag = Flag {
            key: format!("plugin_rule:{rule}"),
            description: if reason.trim().is_empty() {
                format!("{tool} needs approval")
            } else {
                reason.to_string()
            },
            from_scanner: false,
        };
        let session = ctx.session_key();
        if self.is_approved(&session, &flag.key) {
            return GuardResult::approved();
        }
        if !ctx.has_human() {
            let label = ctx
                .no_human_reason()
                .map_or_else(|| "this context".to_string(), |r| r.label());
            let mut message = format!(
                "BLOCKED: the {tool} call needs a person's approval ({}) and nobody can approve it in {label}. \
                 Do not retry it or rephrase it; find another approach.",
                flag.description
            );
            if let Some(note) = ctx.channel_note.as_deref().filter(|n| !n.trim().is_empty()) {
                message.push(' ');
                message.push_str(note.trim());
            }
            let mut result = GuardResult::with_message(ResultKind::Blocked, message);
            result.pattern_key = Some(flag.key.clone());
            result.pattern_keys = vec![flag.key];
            result.description = Some(flag.description);
            return result;
        }
        self.decide(tool, tool, ctx, &session, &[flag], options, false)
    }

    fn no_human_mode(&self, reason: &NoHumanReason) -> NoHumanMode {
        let policy = self.policy();
        match reason {
            NoHumanReason::SingleQuery => policy.single_query_mode,
            NoHumanReason::Cron => policy.cron_mode,
            NoHumanReason::Unattended(_) | NoHumanReason::Unspecified => policy.unattended_mode,
        }
    }
}

/// The refusal for a flagged command when nobody can be asked, naming the setting
/// that would allow it.
fn unattended_refusal(flag: Flag, reason: &NoHumanReason, ctx: &ApprovalContext) -> GuardResult {
    let mut message = messages::unattended(&flag.description, &reason.label(), reason.mode_key());
    if let Some(note) = ctx.channel_note.as_deref().filter(|n| !n.trim().is_empty()) {
        message.push(' ');
        message.push_str(note.trim());
    }
    let mut result = GuardResult::with_message(ResultKind::Blocked, message);
    result.pattern_key = Some(flag.key.clone());
    result.pattern_keys = vec![flag.key];
    result.description = Some(flag.description);
    result
}

/// Plugs [`Approvals`] into the registry's hook gate (`pre_tool_call` asking a human).
pub struct HookApprovalGate {
    pub approvals: Arc<Approvals>,
    /// `None`: the context is read from the environment at each call.
    pub context: Option<ApprovalContext>,
    pub options: GuardOptions,
}

impl crate::hooks::ApprovalGate for HookApprovalGate {
    fn approve(&self, tool: &str, message: &str, rule_key: &str) -> Result<bool, String> {
        let ctx = self
            .context
            .clone()
            .unwrap_or_else(ApprovalContext::from_env);
        let rule = Some(rule_key).filter(|k| !k.is_empty());
        Ok(self
            .approvals
            .request_tool_approval(tool, message, rule, &ctx, &self.options)
            .is_approved())
    }
}
