//! The operator's website blocklist: `security.website_blocklist.{enabled, domains,
//! shared_files}` in config.yaml. A rule names a domain (which blocks it and every
//! subdomain) or a `*.`-pattern; rules may be written as URLs, with `www.`, or in
//! shared files of one rule a line (`#` starts a comment).

use serde_json::Value;
use std::path::Path;
use url::Url;

/// A URL the blocklist refuses, in the original's result shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockMatch {
    pub url: String,
    pub host: String,
    pub rule: String,
    /// `config`, or the path of the shared file the rule came from.
    pub source: String,
    pub message: String,
}

impl BlockMatch {
    /// The `blocked_by_policy` object of a web_extract result.
    pub fn to_json(&self) -> Value {
        serde_json::json!({"host": self.host, "rule": self.rule, "source": self.source})
    }
}

#[derive(Debug, Clone)]
pub struct Blocklist {
    pub enabled: bool,
    rules: Vec<(String, String)>,
}

fn normalize_rule(rule: &str) -> Option<String> {
    let mut value = rule.trim().to_lowercase();
    if value.is_empty() || value.starts_with('#') {
        return None;
    }
    if let Some((_, rest)) = value.split_once("://") {
        value = rest.to_string();
    }
    let mut value = value.split('/').next().unwrap_or("").to_string();
    if let Some((_, host)) = value.rsplit_once('@') {
        value = host.to_string();
    }
    if let Some((host, port)) = value.rsplit_once(':') {
        if port.chars().all(|c| c.is_ascii_digit()) {
            value = host.to_string();
        }
    }
    let value = value.trim().trim_end_matches('.');
    let value = value.strip_prefix("www.").unwrap_or(value);
    if value.is_empty() {
        return None;
    }
    // Unicode rules match the punycode hosts that URLs carry after normalisation.
    let ascii = if value.contains('*') {
        value.to_string()
    } else {
        idna::domain_to_ascii(value).unwrap_or_else(|_| value.to_string())
    };
    Some(ascii)
}

/// `*` matches any run of characters (dots included), `?` any one character.
fn wildcard_match(pattern: &[u8], text: &[u8]) -> bool {
    match (pattern.first(), text.first()) {
        (None, None) => true,
        (Some(b'*'), _) => {
            wildcard_match(&pattern[1..], text)
                || (!text.is_empty() && wildcard_match(pattern, &text[1..]))
        }
        (Some(b'?'), Some(_)) => wildcard_match(&pattern[1..], &text[1..]),
        (Some(p), Some(t)) if p == t => wildcard_match(&pattern[1..], &text[1..]),
        _ => false,
    }
}

fn rule_matches(host: &str, pattern: &str) -> bool {
    if pattern.starts_with("*.") {
        return wildcard_match(pattern.as_bytes(), host.as_bytes());
    }
    host == pattern
        || host
            .strip_suffix(pattern)
            .is_some_and(|rest| rest.ends_with('.'))
}

/// The host of a URL, or of scheme-less input such as `example.com/path`.
fn host_of_urlish(url: &str) -> String {
    let parse = |text: &str| {
        Url::parse(text)
            .ok()
            .and_then(|u| u.host_str().map(str::to_string))
    };
    let host = parse(url).or_else(|| {
        (!url.contains("://"))
            .then(|| parse(&format!("http://{}", url.trim())))
            .flatten()
    });
    host.unwrap_or_default()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .trim_end_matches('.')
        .to_lowercase()
}

impl Blocklist {
    /// The blocklist from the `security.website_blocklist` section (absent = off).
    /// Relative shared files are under `hermes_home`; a missing or unreadable shared
    /// file is skipped with a warning, a malformed section is an error.
    pub fn from_section(section: Option<&Value>, hermes_home: &Path) -> Result<Blocklist, String> {
        let section = match section {
            None | Some(Value::Null) => return Ok(Blocklist::of_rules([]).disabled()),
            Some(Value::Object(map)) => map,
            Some(_) => return Err("security.website_blocklist must be a mapping".into()),
        };
        let enabled = match section.get("enabled") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => return Err("security.website_blocklist.enabled must be a boolean".into()),
        };
        let list = |key: &str| -> Result<Vec<Value>, String> {
            match section.get(key) {
                None | Some(Value::Null) => Ok(Vec::new()),
                Some(Value::Array(items)) => Ok(items.clone()),
                Some(_) => Err(format!("security.website_blocklist.{key} must be a list")),
            }
        };
        let mut rules: Vec<(String, String)> = Vec::new();
        let mut add = |rule: String, source: String| {
            if !rules.iter().any(|(r, s)| *r == rule && *s == source) {
                rules.push((rule, source));
            }
        };
        for rule in list("domains")? {
            if let Some(rule) = rule.as_str().and_then(normalize_rule) {
                add(rule, "config".into());
            }
        }
        for file in list("shared_files")? {
            let Some(name) = file.as_str().map(str::trim).filter(|s| !s.is_empty()) else {
                continue;
            };
            let expanded = match name.strip_prefix("~/") {
                Some(rest) => std::env::var_os("HOME")
                    .map(|home| Path::new(&home).join(rest))
                    .unwrap_or_else(|| name.into()),
                None => name.into(),
            };
            let path = if expanded.is_absolute() {
                expanded
            } else {
                hermes_home.join(expanded)
            };
            match std::fs::read_to_string(&path) {
                Ok(text) => {
                    for line in text.lines() {
                        if let Some(rule) = normalize_rule(line) {
                            add(rule, path.display().to_string());
                        }
                    }
                }
                Err(e) => eprintln!(
                    "warning: website blocklist file {} skipped: {e}",
                    path.display()
                ),
            }
        }
        Ok(Blocklist { enabled, rules })
    }

    /// A blocklist of the given rules, enabled (for callers and tests that build one).
    pub fn of_rules<'a>(rules: impl IntoIterator<Item = &'a str>) -> Blocklist {
        Blocklist {
            enabled: true,
            rules: rules
                .into_iter()
                .filter_map(normalize_rule)
                .map(|r| (r, "config".to_string()))
                .collect(),
        }
    }

    /// The same rules, switched off.
    pub fn disabled(mut self) -> Blocklist {
        self.enabled = false;
        self
    }

    /// The rule that blocks `url` (a URL or scheme-less `host/path`), if any.
    pub fn check(&self, url: &str) -> Option<BlockMatch> {
        if !self.enabled {
            return None;
        }
        let host = host_of_urlish(url);
        if host.is_empty() {
            return None;
        }
        let (rule, source) = self
            .rules
            .iter()
            .find(|(rule, _)| rule_matches(&host, rule))?;
        Some(BlockMatch {
            url: url.to_string(),
            message: format!(
                "Blocked by website policy: '{host}' matched rule '{rule}' from {source}"
            ),
            host,
            rule: rule.clone(),
            source: source.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parent_domains_wildcards_and_schemeless_input() {
        let list = Blocklist::of_rules([
            "https://www.Example.com/path",
            "*.tracking.example",
            "Ünï.example",
        ]);
        for (url, rule) in [
            ("https://example.com/page", Some("example.com")),
            ("https://docs.example.com/page", Some("example.com")),
            ("https://www.example.com./", Some("example.com")),
            ("example.com/path", Some("example.com")),
            ("sub.example.com", Some("example.com")),
            ("https://notexample.com/", None),
            ("https://a.tracking.example/x", Some("*.tracking.example")),
            ("https://a.b.tracking.example/x", Some("*.tracking.example")),
            ("https://tracking.example/x", None),
            ("https://ünï.example/", Some("xn--n-nga1b.example")),
            ("", None),
        ] {
            assert_eq!(
                list.check(url).map(|m| m.rule),
                rule.map(String::from),
                "{url}"
            );
        }
        let found = list.check("https://docs.example.com/a").unwrap();
        assert_eq!(found.host, "docs.example.com");
        assert_eq!(found.source, "config");
        assert_eq!(
            found.message,
            "Blocked by website policy: 'docs.example.com' matched rule 'example.com' from config"
        );
    }

    #[test]
    fn config_section_and_shared_files() {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(
            home.path().join("shared.txt"),
            "# comment\n\nbad.example\nhttps://evil.example/x\n",
        )
        .unwrap();
        let section = json!({"enabled": true, "domains": ["a.example"], "shared_files": ["shared.txt", "missing.txt"]});
        let list = Blocklist::from_section(Some(&section), home.path()).unwrap();
        let found = list.check("http://www.bad.example/").unwrap();
        assert_eq!(found.rule, "bad.example");
        assert_eq!(
            found.source,
            home.path().join("shared.txt").display().to_string()
        );
        assert!(list.check("http://evil.example/").is_some());
        assert!(list.check("http://a.example/").is_some());
        assert!(list.check("http://good.example/").is_none());

        let off = json!({"domains": ["a.example"]});
        assert!(Blocklist::from_section(Some(&off), home.path())
            .unwrap()
            .check("http://a.example/")
            .is_none());
        for broken in [
            json!("yes"),
            json!({"enabled": "true"}),
            json!({"domains": "a.example"}),
        ] {
            assert!(
                Blocklist::from_section(Some(&broken), home.path()).is_err(),
                "{broken}"
            );
        }
    }
}
