//! The smart approval reviewer of `hermes-tools mcp`: with `approvals.mode: smart`
//! and no reviewer endpoint configured (`approvals.smart.*`), a flagged command is
//! reviewed by the model of the MCP client that made the call, through
//! `sampling/createMessage`, when the client declared `sampling`. Its answer counts as
//! the configured reviewer's would: APPROVE runs the command, DENY refuses it (or
//! asks the user, who may still allow it once), anything else asks the user. The
//! runtime reviews only where someone could be asked (a client with elicitation).
//! A client without sampling, or a call that is not an MCP call, escalates to the user
//! as before. An endpoint configured later reviews instead, as it would have.

use crate::caller::Caller;
use hermes_runtime::approval::{
    parse_verdict, review_messages, Approvals, Guardian, HttpGuardian, ReviewRequest, SmartVerdict,
};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// How long the client's model may take to answer a review.
const REVIEW_TIMEOUT: Duration = Duration::from_secs(60);
/// The verdict is one word.
const REVIEW_MAX_TOKENS: u32 = 16;

struct ClientReviewer {
    hermes_home: PathBuf,
}

impl Guardian for ClientReviewer {
    fn review(&self, request: &ReviewRequest) -> SmartVerdict {
        if let Some(endpoint) = Approvals::for_home(&self.hermes_home)
            .policy()
            .smart
            .clone()
        {
            return HttpGuardian::new(endpoint).review(request);
        }
        let Some(caller) = Caller::serving().filter(Caller::samples) else {
            return SmartVerdict::Escalate;
        };
        let messages = review_messages(request);
        let (Some(system), Some(user)) = (
            messages[0]["content"].as_str(),
            messages[1]["content"].as_str(),
        ) else {
            return SmartVerdict::Escalate;
        };
        match caller.sample(Some(system), user, REVIEW_MAX_TOKENS, REVIEW_TIMEOUT, None) {
            Ok(answer) => parse_verdict(&answer),
            Err(_) => SmartVerdict::Escalate,
        }
    }
}

/// Makes the client's model the smart reviewer of the approvals of `hermes_home`.
pub fn install(hermes_home: &Path) {
    let reviewer = ClientReviewer {
        hermes_home: hermes_home.to_path_buf(),
    };
    Approvals::for_home(hermes_home).set_guardian(Some(Arc::new(reviewer)));
}
