//! The one set of rules that masks secrets in text a person or the model sees: a
//! command shown for approval ([`redact_secrets`]) and the output of a command or a
//! background process ([`redact_output`]). Redaction is defence in depth: the access
//! policy keeps secrets unreadable in the first place (`crate::access`).

use crate::word_gated::WordGatedPattern;
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
        // Stripe live and restricted keys.
        rule(r"\b(sk|rk)_(live|test)_[A-Za-z0-9]{10,}", "${1}_${2}_***"),
        // Hugging Face, GitLab, npm, PyPI, DigitalOcean tokens; Google API keys.
        rule(r"\bhf_[A-Za-z0-9]{20,}", "hf_***"),
        rule(r"\bglpat-[A-Za-z0-9_-]{16,}", "glpat-***"),
        rule(r"\bnpm_[A-Za-z0-9]{30,}", "npm_***"),
        rule(r"\bpypi-[A-Za-z0-9_-]{30,}", "pypi-***"),
        rule(r"\bdop_v1_[a-f0-9]{30,}", "dop_v1_***"),
        rule(r"\bAIza[0-9A-Za-z_-]{30,}", "AIza***"),
        // GitHub tokens.
        rule(r"\b(ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{16,}", "${1}_***"),
        rule(r"\bgithub_pat_[A-Za-z0-9_]{20,}", "github_pat_***"),
        // AWS access key ids.
        rule(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b", "${1}***"),
        // Slack tokens.
        rule(r"\bxox[abposr]-[A-Za-z0-9-]{10,}", "xox*-***"),
        // API key headers.
        rule(r#"(?i)\b(x-api-key\s*[:=]\s*)[^\s'"`]{6,}"#, "$1***"),
        // NAME=value where the name says it is a secret.
        rule(
            r#"(?i)\b([A-Z0-9_]*(?:API_KEY|SECRET|TOKEN|PASSWORD|PASSWD)[A-Z0-9_]*\s*=\s*)([^\s'"`]{4,}|'[^']*'|`[^`]*`)"#,
            "$1***",
        ),
        // `name: value`, `"name": "value"` and the like in config files and JSON, for
        // names that say they are secrets (aws_secret_access_key, password, api-key).
        rule(
            r#"(?i)\b([a-z0-9_.-]*(?:api[_-]?key|secret|token|passw(?:or)?d|access[_-]?key|private[_-]?key|credential)[a-z0-9_.-]*["']?\s*:\s*["']?)([^\s'"`,}]{4,})"#,
            "$1***",
        ),
    ]
});

/// `NAME=value` lines of an environment listing.
static ENV_LINE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?m)^((?:export |declare -x |setenv )?[A-Za-z_][A-Za-z0-9_]*)=(.*)$")
        .expect("valid regex")
});

/// Names of variables that hold secrets more often than not.
static SECRET_NAME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)(KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASS|CREDENTIAL|AUTH|PRIVATE|SESSION|COOKIE|DSN|API)")
        .expect("valid regex")
});

/// Commands that print an environment or read a file of variables.
static DUMPS_ENV: WordGatedPattern = WordGatedPattern::new(
    &[
        "env",
        "set",
        "export",
        "declare",
        "shrc",
        "profile",
        "config.yaml",
    ],
    r"(?:^|[;&|(`\s])(?:env|printenv|set|export|declare)(?:\s+-[A-Za-z]+)*\s*(?:$|[;&|)`])|\.env\b|\.(?:bash|zsh)rc\b|\.profile\b|\.bash_profile\b|config\.yaml\b|/proc/[^/\s]+/environ",
);

/// Masks secrets in the output of `command`: every rule of [`redact_secrets`], and,
/// when the command dumps its environment or reads an env/rc/config file, the values
/// of `NAME=value` lines whose name looks secret.
pub fn redact_output(output: &str, command: &str) -> String {
    let text = redact_secrets(output);
    if !DUMPS_ENV.is_match(command) {
        return text;
    }
    ENV_LINE
        .replace_all(&text, |caps: &regex::Captures| {
            let (name, value) = (&caps[1], &caps[2]);
            if SECRET_NAME.is_match(name) && !value.is_empty() && !value.contains("***") {
                format!("{name}=***")
            } else {
                caps[0].to_string()
            }
        })
        .into_owned()
}

/// The text with every secret-looking value replaced by `***`.
pub fn redact_secrets(text: &str) -> String {
    let mut out = text.to_string();
    for rule in RULES.iter() {
        if rule.re.is_match(&out) {
            out = rule.re.replace_all(&out, rule.replacement).into_owned();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_that_dumps_variables_gets_its_secret_looking_values_masked() {
        let listing = "APP_SESSION=abc123\nPATH=/usr/bin";
        for command in [
            "env",
            "printenv",
            "set",
            "export -p",
            "declare -x",
            "cat .env",
            "cat ~/.bashrc",
            "cat ~/.zshrc",
            "cat ~/.profile",
            "cat ~/.bash_profile",
            "cat config.yaml",
            "tr '\\0' '\\n' < /proc/self/environ",
        ] {
            assert_eq!(
                redact_output(listing, command),
                "APP_SESSION=***\nPATH=/usr/bin",
                "{command}"
            );
        }
        for command in ["echo done", "ls settings", "cat notes.txt"] {
            assert_eq!(redact_output(listing, command), listing, "{command}");
        }
    }
}
