//! Dangerous-command approval: policy from config, the permanent allowlist, session
//! approvals, the human step (terminal prompt, gateway round-trip, smart review).
