//! What the model reads when a command is refused or parked (reference §2.3). Every
//! refusal says, in plain words, not to retry, rephrase or route around it.

const STOP: &str = "The user has NOT consented to this command. Do not retry it, do not rephrase \
or split it, and do not reach the same outcome with a different command or tool. Stop here and \
wait for the user before doing anything destructive.";

fn breaker(streak: Option<u32>) -> String {
    match streak {
        Some(n) => format!(
            " Circuit breaker: {n} consecutive commands in this session were blocked. Stop trying \
             variants of this command. Tell the user what you were trying to do and ask them to run \
             it themselves or to approve it with /approve."
        ),
        None => String::new(),
    }
}

fn quoted_reason(reason: Option<&str>) -> String {
    match reason.map(str::trim).filter(|r| !r.is_empty()) {
        Some(reason) => format!(" Their reason: \"{reason}\"."),
        None => String::new(),
    }
}

/// The user answered `deny` (or the wait was interrupted, which counts the same).
pub fn human_denied(description: &str, reason: Option<&str>, streak: Option<u32>) -> String {
    format!(
        "BLOCKED: the user denied this command ({description}).{} {STOP}{}",
        quoted_reason(reason),
        breaker(streak)
    )
}

/// The approval request was withdrawn (session cleared, gateway gone) before an answer.
pub fn interrupted(description: &str) -> String {
    format!(
        "BLOCKED: the approval request for this command ({description}) was withdrawn before \
         anyone answered. {STOP}"
    )
}

/// Nobody answered in time. Never says the user refused: silence is not an answer.
pub fn timed_out(description: &str, streak: Option<u32>) -> String {
    format!(
        "BLOCKED: nobody responded to the approval request for this command ({description}) in \
         time. Silence does not count as consent. {STOP}{}",
        breaker(streak)
    )
}

/// The approval card could not be delivered.
pub fn notify_failed(description: &str, error: &str) -> String {
    format!(
        "BLOCKED: the approval request for this command ({description}) could not be delivered \
         to the user ({error}), so the user has NOT consented. Do not retry it or look for \
         another way to run it; tell the user it needs their approval."
    )
}

/// The smart reviewer judged the command dangerous and no human can overrule it.
pub fn smart_denied(description: &str, streak: Option<u32>) -> String {
    format!(
        "BLOCKED by smart approval: {description}. The reviewer judged this command truly \
         dangerous. Do not retry it, rephrase it or run an equivalent command.{}",
        breaker(streak)
    )
}

/// A flagged command in a context where nobody can approve it.
pub fn unattended(description: &str, context_label: &str, mode_key: &str) -> String {
    format!(
        "BLOCKED: this command was flagged ({description}) and nobody can approve commands in \
         {context_label}. Do not retry it or rephrase it. Find another approach that does not \
         need this command, or ask the operator to set `{mode_key}: approve` in config.yaml."
    )
}

/// The hardline floor. `saved_script` is set for parser-limit blocks.
pub fn hardline(description: &str, saved_script: Option<Result<&str, ()>>) -> String {
    let mut text = format!(
        "BLOCKED (hardline): {description}. This command is blocked unconditionally; not even \
         --yolo, /yolo, approvals.mode=off or the cron approve mode can allow it, and no \
         rephrasing will. If it is really needed, the user can run it themselves outside the agent."
    );
    match saved_script {
        // The saved copy is for the user's review only: a script run from it is checked like
        // the command itself, so pointing the model at it would only send it in a circle.
        Some(Ok(path)) => text.push_str(&format!(
            " The command is too long or too deeply nested to be checked; it was saved to {path} \
             for the user to review. Split the work into shorter, simpler commands."
        )),
        Some(Err(())) => text.push_str(
            " The command is too long or too deeply nested to be checked, and saving it for review \
             failed. Split the work into shorter, simpler commands.",
        ),
        None => {}
    }
    text
}

/// Model-written `sudo -S`.
pub fn sudo_guard() -> String {
    "BLOCKED: piping a password into `sudo -S` is password brute-forcing and is never allowed. \
     If sudo is needed, the user can set SUDO_PASSWORD for Hermes or run the command manually. \
     Do not retry it or rephrase it."
        .to_string()
}

/// An operator `approvals.deny` glob matched.
pub fn deny_rule(glob: &str) -> String {
    format!(
        "BLOCKED: this command matches the operator's deny rule '{glob}' (approvals.deny). There \
         is no approval or bypass for it. Do not retry it or rephrase it."
    )
}

/// An external scanner blocked the command and could not be asked otherwise.
pub fn scanner_unavailable(description: &str) -> String {
    format!("BLOCKED: {description}. Do not retry it or rephrase it.")
}

/// The request waits for the user (gateway card without a live waiter).
pub fn pending(description: &str, redacted_command: &str) -> String {
    format!(
        "⚠️ This command needs the user's approval ({description}). The user has been asked:\n\n\
         ```\n{redacted_command}\n```\n\n\
         Do not re-run, rephrase or re-issue it: each attempt sends the user another approval \
         card. Wait for their answer; if your turn ends first, tell the user the approval is \
         still open."
    )
}
