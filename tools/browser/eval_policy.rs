//! `browser.restrict_evaluate`: an opt-in refusal of expressions that name cookie,
//! storage, credential or network APIs, whether written as identifiers or hidden in
//! string literals (`document["coo"+"kie"]`). Off by default, as in the original: it
//! judges names, not behaviour, and would refuse much ordinary DOM reading. The
//! browser's requests stay under the network policy either way.

use hermes_browser::Settings;
use regex::Regex;
use std::sync::LazyLock;

/// Sensitive names and what they reach.
const SENSITIVE: &[(&str, &str)] = &[
    ("cookie", "document.cookie"),
    ("localStorage", "web storage"),
    ("sessionStorage", "web storage"),
    ("indexedDB", "IndexedDB"),
    ("caches", "Cache Storage"),
    ("clipboard", "the clipboard"),
    ("credentials", "stored credentials"),
    ("serviceWorker", "service workers"),
    ("fetch", "network requests"),
    ("XMLHttpRequest", "network requests"),
    ("WebSocket", "network requests"),
    ("EventSource", "network requests"),
    ("sendBeacon", "network beacons"),
    ("importScripts", "network requests"),
];

/// Why `expression` is refused, when the restriction is on and it names one.
pub fn refusal(expression: &str, settings: &Settings) -> Option<String> {
    if !settings.restrict_evaluate || settings.allow_unsafe_evaluate {
        return None;
    }
    let reason = sensitive_reason(expression)?;
    Some(format!(
        "Blocked: the expression uses a sensitive browser API ({reason}) and browser.restrict_evaluate is on. \
         Read the page with browser_snapshot, browser_get_images or browser_console without an expression, \
         or ask the operator to set browser.restrict_evaluate: false."
    ))
}

fn sensitive_reason(expression: &str) -> Option<&'static str> {
    static LITERAL: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r#"'(?:\\.|[^'\\])*'|"(?:\\.|[^"\\])*"|`(?:\\.|[^`\\])*`"#).unwrap()
    });
    let literals: Vec<String> = LITERAL
        .find_iter(expression)
        .map(|m| decode(&m.as_str()[1..m.as_str().len() - 1]).to_lowercase())
        .collect();
    let joined = literals.concat();
    for (name, reason) in SENSITIVE {
        let word = Regex::new(&format!(r"(?i)\b{name}\b")).expect("names are plain words");
        let lower = name.to_lowercase();
        if word.is_match(expression)
            || literals.iter().any(|l| l.contains(&lower))
            || joined.contains(&lower)
        {
            return Some(reason);
        }
    }
    None
}

/// `\xNN`, `\uNNNN` and `\u{N}` escapes of a string literal decoded (for the check
/// only; anything else is kept as written).
fn decode(body: &str) -> String {
    static ESCAPE: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"\\x([0-9a-fA-F]{2})|\\u\{([0-9a-fA-F]+)\}|\\u([0-9a-fA-F]{4})|\\(.)").unwrap()
    });
    ESCAPE
        .replace_all(body, |c: &regex::Captures| {
            let hex = c.get(1).or(c.get(2)).or(c.get(3));
            match hex {
                Some(h) => u32::from_str_radix(h.as_str(), 16)
                    .ok()
                    .and_then(char::from_u32)
                    .map(String::from)
                    .unwrap_or_default(),
                None => c[4].to_string(),
            }
        })
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_hidden_names_are_found() {
        assert_eq!(sensitive_reason("document.cookie"), Some("document.cookie"));
        assert_eq!(
            sensitive_reason(r#"document["co\x6fkie"]"#),
            Some("document.cookie")
        );
        assert_eq!(
            sensitive_reason(r#"globalThis["fe"+"tch"]("/x")"#),
            Some("network requests")
        );
        assert_eq!(sensitive_reason("document.title"), None);
    }
}
