//! The verdict of [`check_all_command_guards`](super::Approvals::check_all_command_guards)
//! and the JSON shapes it serialises to (reference §2.2).

use serde::{Serialize, Serializer};
use serde_json::{json, Map, Value};

/// An answer to an approval request. Only `Once`, `Session`, `Always` grant (R2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Choice {
    Once,
    Session,
    Always,
    Deny,
    Timeout,
    Cancelled,
}

impl Choice {
    pub fn as_str(self) -> &'static str {
        match self {
            Choice::Once => "once",
            Choice::Session => "session",
            Choice::Always => "always",
            Choice::Deny => "deny",
            Choice::Timeout => "timeout",
            Choice::Cancelled => "cancelled",
        }
    }

    pub fn grants(self) -> bool {
        matches!(self, Choice::Once | Choice::Session | Choice::Always)
    }

    /// A resolver's word: `once|session|always|deny`; anything else is a denial (fail closed).
    pub fn parse_resolution(word: &str) -> Choice {
        match word.trim().to_ascii_lowercase().as_str() {
            "once" | "approve" => Choice::Once,
            "session" => Choice::Session,
            "always" => Choice::Always,
            _ => Choice::Deny,
        }
    }
}

impl std::fmt::Display for Choice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why an approved command may run: the one thing that decides whether it may leave
/// the OS sandbox ([`Grant::binds_to_the_command`]), never the text of a note.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Grant {
    /// Nothing in the command needed approval.
    NothingFlagged,
    /// A person answered this request, for this command (`once`, `session`, `always`).
    Person(Choice),
    /// A person granted exactly this command earlier in the session.
    SessionCommand,
    /// A person granted exactly this command with `always`, or the operator's
    /// `command_allowlist` names it (as written or by a pattern written there).
    PermanentCommand,
    /// Only the kind of finding was granted before (for the session or permanently),
    /// for another command.
    Category,
    /// The smart reviewer approved it.
    Smart,
    /// yolo, or `approvals.mode: off`.
    Bypass,
    /// Nobody could be asked and the unattended, cron or single-query mode approves.
    Unattended,
    /// An isolated backend, where only the deny rules apply.
    IsolatedBackend,
}

impl Grant {
    /// A person (or the operator's own allowlist) approved exactly this command.
    pub fn binds_to_the_command(self) -> bool {
        matches!(
            self,
            Grant::Person(_) | Grant::SessionCommand | Grant::PermanentCommand
        )
    }

    /// The result's `approval` note, when the grant is worth telling.
    pub fn note(self) -> Option<&'static str> {
        match self {
            Grant::Person(_) => Some("granted by the user"),
            Grant::SessionCommand | Grant::PermanentCommand => Some("granted earlier by the user"),
            Grant::Smart => Some("granted by smart approval"),
            _ => None,
        }
    }
}

/// `outcome` of a refusal that followed a request to a human.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Denied,
    Timeout,
    NotifyFailed,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Denied => "denied",
            Outcome::Timeout => "timeout",
            Outcome::NotifyFailed => "notify_failed",
        }
    }
}

/// Which shape a result has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultKind {
    /// `{"approved": true, "message": null, ...}`
    Approved,
    /// A human (or the lack of an answer) refused: has `outcome` and `user_consent: false`.
    Refused,
    /// The hardline floor: `{"approved": false, "hardline": true, "message"}`.
    Hardline,
    /// An `approvals.deny` glob: `{"approved": false, "user_deny": true, "message"}`.
    UserDeny,
    /// The sudo-stdin floor: `{"approved": false, "message"}`.
    Sudo,
    /// No human could be asked (cron, `-q`, unattended platform) or the smart reviewer
    /// denied without a human: `{"approved": false, "message", "pattern_key", "description"}`.
    Blocked,
    /// Waiting for the user: `status: "pending_approval"`.
    Pending,
}

/// One verdict. Fields that do not belong to a kind stay `None`/`false` and are not
/// serialised.
#[derive(Debug, Clone, PartialEq)]
pub struct GuardResult {
    pub kind: ResultKind,
    pub message: Option<String>,
    pub pattern_key: Option<String>,
    pub pattern_keys: Vec<String>,
    pub description: Option<String>,
    pub outcome: Option<Outcome>,
    pub deny_reason: Option<String>,
    /// The human's answer, when one was given.
    pub choice: Option<Choice>,
    pub user_approved: bool,
    pub smart_approved: bool,
    pub smart_denied: bool,
    /// Pending: whether `always` is offered.
    pub allow_permanent: bool,
    /// Pending: the redacted command.
    pub command: Option<String>,
    /// This request waited on an identical pending request instead of sending its own.
    pub coalesced: bool,
    /// Approved: why.
    pub grant: Option<Grant>,
}

impl GuardResult {
    pub(crate) fn new(kind: ResultKind) -> GuardResult {
        GuardResult {
            kind,
            message: None,
            pattern_key: None,
            pattern_keys: Vec::new(),
            description: None,
            outcome: None,
            deny_reason: None,
            choice: None,
            user_approved: false,
            smart_approved: false,
            smart_denied: false,
            allow_permanent: true,
            command: None,
            coalesced: false,
            grant: None,
        }
    }

    pub(crate) fn approved() -> GuardResult {
        GuardResult::new(ResultKind::Approved)
    }

    pub(crate) fn granted(grant: Grant) -> GuardResult {
        GuardResult {
            grant: Some(grant),
            ..GuardResult::new(ResultKind::Approved)
        }
    }

    pub(crate) fn with_message(kind: ResultKind, message: String) -> GuardResult {
        GuardResult {
            message: Some(message),
            ..GuardResult::new(kind)
        }
    }

    pub fn is_approved(&self) -> bool {
        self.kind == ResultKind::Approved
    }

    pub fn is_hardline(&self) -> bool {
        self.kind == ResultKind::Hardline
    }

    /// The reference's JSON object for this verdict.
    pub fn to_json(&self) -> Value {
        let mut map = Map::new();
        map.insert("approved".into(), json!(self.is_approved()));
        let opt = |v: &Option<String>| v.clone().map(Value::String).unwrap_or(Value::Null);
        match self.kind {
            ResultKind::Approved => {
                map.insert("message".into(), Value::Null);
                if self.user_approved {
                    map.insert("user_approved".into(), json!(true));
                    map.insert("description".into(), opt(&self.description));
                }
                if self.smart_approved {
                    map.insert("smart_approved".into(), json!(true));
                }
            }
            ResultKind::Refused => {
                map.insert("message".into(), opt(&self.message));
                map.insert("pattern_key".into(), opt(&self.pattern_key));
                map.insert("description".into(), opt(&self.description));
                map.insert(
                    "outcome".into(),
                    json!(self.outcome.unwrap_or(Outcome::Denied).as_str()),
                );
                map.insert("user_consent".into(), json!(false));
                if let Some(reason) = &self.deny_reason {
                    map.insert("deny_reason".into(), json!(reason));
                }
                if self.smart_denied {
                    map.insert("smart_denied".into(), json!(true));
                }
            }
            ResultKind::Hardline => {
                map.insert("hardline".into(), json!(true));
                map.insert("message".into(), opt(&self.message));
            }
            ResultKind::UserDeny => {
                map.insert("user_deny".into(), json!(true));
                map.insert("message".into(), opt(&self.message));
            }
            ResultKind::Sudo => {
                map.insert("message".into(), opt(&self.message));
            }
            ResultKind::Blocked => {
                map.insert("message".into(), opt(&self.message));
                map.insert("pattern_key".into(), opt(&self.pattern_key));
                map.insert("description".into(), opt(&self.description));
                if self.smart_denied {
                    map.insert("smart_denied".into(), json!(true));
                }
            }
            ResultKind::Pending => {
                map.insert("pattern_key".into(), opt(&self.pattern_key));
                map.insert("status".into(), json!("pending_approval"));
                map.insert("approval_pending".into(), json!(true));
                map.insert("command".into(), opt(&self.command));
                map.insert("description".into(), opt(&self.description));
                map.insert("message".into(), opt(&self.message));
                if self.smart_denied {
                    map.insert("smart_denied".into(), json!(true));
                }
                if !self.allow_permanent {
                    map.insert("allow_permanent".into(), json!(false));
                }
            }
        }
        if self.coalesced {
            map.insert("coalesced".into(), json!(true));
        }
        Value::Object(map)
    }
}

impl Serialize for GuardResult {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_json().serialize(serializer)
    }
}
