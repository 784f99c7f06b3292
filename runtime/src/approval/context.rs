//! Who is asking (reference §2.1): the signals that decide whether a human can answer an
//! approval request, and through which surface.

/// Platforms with nobody watching: they are never a gateway context.
pub const UNATTENDED_PLATFORMS: &[&str] = &["webhook", "msgraph_webhook", "api_server"];

/// The approval context of one call. Build it explicitly, or from the environment with
/// [`ApprovalContext::from_env`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApprovalContext {
    /// `HERMES_SESSION_KEY`; `None` falls back to the environment, then `"default"`.
    pub session_key: Option<String>,
    /// `HERMES_INTERACTIVE`: a person at a terminal (CLI prompt).
    pub interactive: bool,
    /// `HERMES_GATEWAY_SESSION`: a messaging gateway relays approval cards.
    pub gateway_session: bool,
    /// `HERMES_SESSION_PLATFORM`, e.g. `telegram`, `webhook`.
    pub platform: Option<String>,
    /// `HERMES_EXEC_ASK`: approvals travel through the gateway queue of the session.
    pub exec_ask: bool,
    /// `HERMES_CRON_SESSION`.
    pub cron: bool,
    /// `HERMES_SINGLE_QUERY_SESSION` (`hermes -q`).
    pub single_query: bool,
    /// `HERMES_YOLO_MODE` as seen by this context.
    pub yolo: bool,
    /// Added to a refusal when nobody could be asked: why, and how to enable approvals
    /// on the surface the call came through.
    pub channel_note: Option<String>,
}

/// Why nobody can answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoHumanReason {
    SingleQuery,
    Cron,
    /// An unattended platform, by name.
    Unattended(String),
    /// No signal at all (a library call, a server with no approval channel). The
    /// original approves here; this port fails closed, under the unattended setting.
    Unspecified,
}

impl NoHumanReason {
    /// The config key that would let such commands through.
    pub fn mode_key(&self) -> &'static str {
        match self {
            NoHumanReason::SingleQuery => "approvals.single_query_mode",
            NoHumanReason::Cron => "approvals.cron_mode",
            NoHumanReason::Unattended(_) | NoHumanReason::Unspecified => {
                "approvals.unattended_mode"
            }
        }
    }

    /// How a message names the context.
    pub fn label(&self) -> String {
        match self {
            NoHumanReason::SingleQuery => "a single-query run (-q)".to_string(),
            NoHumanReason::Cron => "a cron job".to_string(),
            NoHumanReason::Unattended(platform) => format!("the unattended '{platform}' platform"),
            NoHumanReason::Unspecified => {
                "a context with nobody to ask (no terminal prompt, approving client or gateway is connected)".to_string()
            }
        }
    }
}

pub fn env_truthy(value: Option<&str>) -> bool {
    matches!(
        value.map(|v| v.trim().to_ascii_lowercase()).as_deref(),
        Some("1" | "true" | "yes" | "on")
    )
}

impl ApprovalContext {
    /// Reads the `HERMES_*` variables of this process.
    pub fn from_env() -> ApprovalContext {
        ApprovalContext::from_vars(|name| std::env::var(name).ok())
    }

    /// Same as [`from_env`](Self::from_env) with any source of variables.
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> ApprovalContext {
        let flag = |name: &str| env_truthy(get(name).as_deref());
        let text = |name: &str| {
            get(name)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        ApprovalContext {
            session_key: text("HERMES_SESSION_KEY"),
            interactive: flag("HERMES_INTERACTIVE"),
            gateway_session: flag("HERMES_GATEWAY_SESSION"),
            platform: text("HERMES_SESSION_PLATFORM").map(|p| p.to_ascii_lowercase()),
            exec_ask: flag("HERMES_EXEC_ASK"),
            cron: flag("HERMES_CRON_SESSION"),
            single_query: flag("HERMES_SINGLE_QUERY_SESSION"),
            yolo: flag("HERMES_YOLO_MODE"),
            channel_note: None,
        }
    }

    /// The session the approvals belong to: this context's key, else `HERMES_SESSION_KEY`,
    /// else `"default"`.
    pub fn session_key(&self) -> String {
        self.session_key
            .clone()
            .filter(|k| !k.is_empty())
            .or_else(|| {
                std::env::var("HERMES_SESSION_KEY")
                    .ok()
                    .filter(|k| !k.trim().is_empty())
            })
            .unwrap_or_else(|| "default".to_string())
    }

    pub fn is_unattended_platform(&self) -> bool {
        self.platform
            .as_deref()
            .is_some_and(|p| UNATTENDED_PLATFORMS.contains(&p))
    }

    /// Nobody can be asked here, whatever other flags say.
    fn attended(&self) -> bool {
        !self.single_query && !self.cron && !self.is_unattended_platform()
    }

    /// A messaging gateway with a person behind it (needs a platform).
    pub fn is_gateway(&self) -> bool {
        self.attended()
            && self.gateway_session
            && self.platform.as_deref().is_some_and(|p| !p.is_empty())
    }

    pub fn is_cli(&self) -> bool {
        self.attended() && self.interactive
    }

    pub fn is_ask(&self) -> bool {
        self.attended() && self.exec_ask
    }

    pub fn has_human(&self) -> bool {
        self.is_cli() || self.is_gateway() || self.is_ask()
    }

    /// The first of single-query, cron, unattended platform that applies.
    pub fn no_human_reason(&self) -> Option<NoHumanReason> {
        if self.single_query {
            Some(NoHumanReason::SingleQuery)
        } else if self.cron {
            Some(NoHumanReason::Cron)
        } else if self.is_unattended_platform() {
            Some(NoHumanReason::Unattended(
                self.platform.clone().unwrap_or_default(),
            ))
        } else if !self.has_human() {
            Some(NoHumanReason::Unspecified)
        } else {
            None
        }
    }
}
