//! Masks secrets in a command before a person (or a chat platform) sees it.

use regex::Regex;
use std::sync::LazyLock;

struct Rule {
    re: Regex,
    replacement: &'static str,
}

static RULES: LazyLock<Vec<Rule>> = LazyLock::new(|| {
    let rule = |pattern: &str, replacement: &'static str| Rule {
        re: Regex::new(pattern).expect("valid redaction regex"),
        replacement,
    };
    vec![
        // PEM private keys: keep the armour lines, drop the body.
        rule(
            r"(?s)(-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----).*?(-----END [A-Z0-9 ]*PRIVATE KEY-----)",
            "$1***$2",
        ),
        // `-----BEGIN ... PRIVATE KEY-----` with no end line: drop everything after it.
        rule(
            r"(?s)(-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----)(?:[^*].*)?$",
            "$1***",
        ),
        // Authorization headers (any scheme word after the colon is kept).
        rule(
            r#"(?i)(authorization\s*:\s*(?:bearer|basic|token)\s+)[^\s'"`]+"#,
            "$1***",
        ),
        rule(r#"(?i)(authorization\s*:\s*)([^\s'"`]{8,})"#, "$1***"),
        // Bare bearer tokens (e.g. `--token "Bearer abc"`).
        rule(r"(?i)(\bbearer\s+)[A-Za-z0-9._~+/=-]{8,}", "$1***"),
        // JSON web tokens.
        rule(
            r"\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}",
            "***JWT***",
        ),
        // OpenAI / Anthropic style keys.
        rule(r"\bsk-[A-Za-z0-9_-]{8,}", "sk-***"),
        // GitHub tokens.
        rule(r"\b(ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{16,}", "${1}_***"),
        rule(r"\bgithub_pat_[A-Za-z0-9_]{20,}", "github_pat_***"),
        // AWS access key ids.
        rule(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b", "${1}***"),
        // Slack tokens.
        rule(r"\bxox[abprs]-[A-Za-z0-9-]{10,}", "xox*-***"),
        // NAME=value where the name says it is a secret.
        rule(
            r#"(?i)\b([A-Z0-9_]*(?:API_KEY|SECRET|TOKEN|PASSWORD|PASSWD)[A-Z0-9_]*\s*=\s*)([^\s'"`]{4,}|'[^']*'|`[^`]*`)"#,
            "$1***",
        ),
    ]
});

/// The command with every secret-looking value replaced by `***`.
pub fn redact_secrets(text: &str) -> String {
    let mut out = text.to_string();
    for rule in RULES.iter() {
        if rule.re.is_match(&out) {
            out = rule.re.replace_all(&out, rule.replacement).into_owned();
        }
    }
    out
}
