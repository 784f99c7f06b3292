//! What is decided about a URL before any name is looked up: its normal form, the
//! scheme, secrets carried in it, the cloud-metadata host names and literal addresses.

use crate::address::{classify, AddressClass};
use crate::blocklist::BlockMatch;
use regex::Regex;
use std::fmt;
use std::net::IpAddr;
use std::sync::LazyLock;
use url::{Host, Url};

/// Why a URL may not be fetched. `Display` is the sentence shown to the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    Unparseable(String),
    Scheme(String),
    NoHost,
    /// A known API-key or token shape appears in the URL.
    SecretShape,
    /// A credential-named query parameter with a value (`token=...`).
    SecretParameter(String),
    /// A cloud-metadata name or address: refused whatever the settings.
    Metadata {
        host: String,
    },
    /// A private, loopback or otherwise internal address, with
    /// `security.allow_private_urls` off.
    Private {
        host: String,
        address: IpAddr,
        kind: &'static str,
    },
    Unresolvable {
        host: String,
        reason: String,
    },
    Blocked(BlockMatch),
    /// `security.website_blocklist` cannot be read; nothing is fetched until it is fixed.
    PolicyBroken(String),
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Unparseable(why) => write!(f, "Invalid URL: {why}"),
            Refusal::Scheme(scheme) => write!(
                f,
                "Blocked: only http and https URLs can be fetched, not '{scheme}:'"
            ),
            Refusal::NoHost => write!(f, "Invalid URL: it names no host"),
            Refusal::SecretShape => write!(
                f,
                "Blocked: URL contains what appears to be an API key or token. \
                 Secrets must not be sent in URLs."
            ),
            Refusal::SecretParameter(name) => write!(
                f,
                "Blocked: URL contains a credential-like query parameter ({name}). \
                 Web extract backends are third-party readers; remove the sensitive query \
                 parameter or use a local browser session when this access is explicitly required."
            ),
            Refusal::Metadata { host } => write!(
                f,
                "Blocked: {host} is a cloud metadata endpoint, which is never fetched"
            ),
            Refusal::Private {
                host,
                address,
                kind,
            } => {
                let named = if *host == address.to_string() {
                    String::new()
                } else {
                    format!("{host} is ")
                };
                write!(
                    f,
                    "Blocked: URL targets a private or internal network address \
                     ({named}{address}, {kind}; security.allow_private_urls opens private ranges)"
                )
            }
            Refusal::Unresolvable { host, reason } => {
                write!(f, "Blocked: could not resolve {host}: {reason}")
            }
            Refusal::Blocked(found) => f.write_str(&found.message),
            Refusal::PolicyBroken(why) => write!(
                f,
                "Blocked: the website policy cannot be read ({why}); fix security.website_blocklist in config.yaml (see {})",
                hermes_runtime::config::SETTINGS_PAGE
            ),
        }
    }
}

impl std::error::Error for Refusal {}

/// The URL as an HTTP client expects it: surrounding whitespace and whitespace right
/// after `scheme://` removed, the host in IDNA (punycode) form, non-ASCII and spaces
/// in path, query and fragment percent-encoded, existing escapes kept. Input that is
/// not an http(s) URL comes back trimmed and otherwise untouched.
pub fn normalize_url(raw: &str) -> String {
    static AFTER_SCHEME: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"^([A-Za-z][A-Za-z0-9+.-]*://)\s+").unwrap());
    let trimmed = raw.trim();
    let repaired = AFTER_SCHEME.replace(trimmed, "$1");
    match Url::parse(&repaired) {
        Ok(url) if matches!(url.scheme(), "http" | "https") => url.to_string(),
        _ => repaired.into_owned(),
    }
}

/// Key shapes of well-known providers (OpenAI, GitHub, Slack, Google, AWS, Stripe,
/// Hugging Face, Tavily, Exa, Firecrawl, ...), matched as whole tokens.
static KEY_SHAPES: LazyLock<Regex> = LazyLock::new(|| {
    let shapes = [
        r"sk-[A-Za-z0-9_-]{10,}",
        r"ghp_[A-Za-z0-9]{10,}",
        r"github_pat_[A-Za-z0-9_]{10,}",
        r"gh[ousr]_[A-Za-z0-9]{10,}",
        r"xapp-\d+-[A-Za-z0-9-]{10,}",
        r"xox[baprs]-[A-Za-z0-9-]{10,}",
        r"AIza[A-Za-z0-9_-]{30,}",
        r"pplx-[A-Za-z0-9]{10,}",
        r"fal_[A-Za-z0-9_-]{10,}",
        r"fc-[A-Za-z0-9]{10,}",
        r"bb_live_[A-Za-z0-9_-]{10,}",
        r"gAAAA[A-Za-z0-9_=-]{20,}",
        r"AKIA[A-Z0-9]{16}",
        r"[sr]k_(?:live|test)_[A-Za-z0-9]{10,}",
        r"SG\.[A-Za-z0-9_-]{10,}",
        r"hf_[A-Za-z0-9]{10,}",
        r"r8_[A-Za-z0-9]{10,}",
        r"npm_[A-Za-z0-9]{10,}",
        r"pypi-[A-Za-z0-9_-]{10,}",
        r"do[po]_v1_[A-Za-z0-9]{10,}",
        r"am_[A-Za-z0-9_-]{10,}",
        r"sk_[A-Za-z0-9_]{10,}",
        r"tvly-[A-Za-z0-9]{10,}",
        r"exa_[A-Za-z0-9]{10,}",
        r"gsk_[A-Za-z0-9]{10,}",
        r"syt_[A-Za-z0-9]{10,}",
        r"retaindb_[A-Za-z0-9]{10,}",
        r"hsk-[A-Za-z0-9]{10,}",
        r"mem0_[A-Za-z0-9]{10,}",
        r"brv_[A-Za-z0-9]{10,}",
        r"xai-[A-Za-z0-9]{30,}",
        r"ntn_[A-Za-z0-9]{10,}",
        r"fw[-_][A-Za-z0-9]{30,}",
        r"fpk_[A-Za-z0-9]{30,}",
    ];
    // A token boundary on both sides (the regex crate has no look-around).
    Regex::new(&format!(
        r"(?:^|[^A-Za-z0-9_-])(?:{})(?:$|[^A-Za-z0-9_-])",
        shapes.join("|")
    ))
    .unwrap()
});

/// Query parameter names that only ever carry credentials. Ordinary words that double
/// as page facets (`key`, `code`, `auth`, `session`) are left out on purpose.
const SENSITIVE_PARAMETERS: &[&str] = &[
    "access_token",
    "api_key",
    "apikey",
    "auth_token",
    "authorization",
    "awsaccesskeyid",
    "client_secret",
    "credential",
    "credentials",
    "jwt",
    "password",
    "passwd",
    "secret",
    "session_id",
    "signature",
    "token",
    "x_amz_security_token",
    "x_amz_signature",
    "x-amz-security-token",
    "x-amz-signature",
];

fn percent_decoded(text: &str) -> String {
    url::form_urlencoded::parse(format!("x={}", text.replace('+', "%2B")).as_bytes())
        .next()
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default()
}

/// A secret the URL carries, in the raw text, its percent-decoded form or its
/// normal form: a known key shape, or a credential-named query parameter with a value.
pub fn secret_in_url(raw: &str) -> Option<Refusal> {
    let normalized = normalize_url(raw);
    let forms = [
        raw.to_string(),
        percent_decoded(raw),
        normalized.clone(),
        percent_decoded(&normalized),
    ];
    if forms.iter().any(|form| KEY_SHAPES.is_match(form)) {
        return Some(Refusal::SecretShape);
    }
    let url = Url::parse(&normalized).ok()?;
    if !matches!(url.scheme(), "http" | "https") {
        return None;
    }
    url.query_pairs()
        .find(|(name, value)| {
            !value.is_empty() && SENSITIVE_PARAMETERS.contains(&name.to_lowercase().as_str())
        })
        .map(|(name, _)| Refusal::SecretParameter(name.into_owned()))
}

/// Host names of cloud metadata services, refused before any lookup.
const METADATA_HOSTS: &[&str] = &["metadata.google.internal", "metadata.goog"];

/// The host of `url` in lower case without a trailing dot, brackets removed from
/// IPv6 literals.
pub fn host_of(url: &Url) -> Option<String> {
    match url.host()? {
        Host::Domain(d) => Some(d.trim_end_matches('.').to_ascii_lowercase()),
        Host::Ipv4(ip) => Some(ip.to_string()),
        Host::Ipv6(ip) => Some(ip.to_string()),
    }
}

/// The checks that need no name lookup: parse, scheme, host, metadata names and
/// literal metadata addresses, and literal private addresses unless `allow_private`.
/// Secrets are checked separately ([`secret_in_url`]): they concern what the model
/// sends, not where a redirect leads.
pub fn screen_target(url: &str, allow_private: bool) -> Result<Url, Refusal> {
    let parsed = Url::parse(url).map_err(|e| Refusal::Unparseable(e.to_string()))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(Refusal::Scheme(parsed.scheme().to_string()));
    }
    let host = host_of(&parsed)
        .filter(|h| !h.is_empty())
        .ok_or(Refusal::NoHost)?;
    if METADATA_HOSTS.contains(&host.as_str()) {
        return Err(Refusal::Metadata { host });
    }
    let literal = match parsed.host() {
        Some(Host::Ipv4(ip)) => Some(IpAddr::V4(ip)),
        Some(Host::Ipv6(ip)) => Some(IpAddr::V6(ip)),
        _ => None,
    };
    if let Some(ip) = literal {
        judge_address(&host, ip, allow_private)?;
    }
    Ok(parsed)
}

/// Whether a connection to `ip` (an answer for `host`) is allowed.
pub fn judge_address(host: &str, ip: IpAddr, allow_private: bool) -> Result<(), Refusal> {
    match classify(ip) {
        AddressClass::Metadata => Err(Refusal::Metadata {
            host: host.to_string(),
        }),
        AddressClass::Private(kind) if !allow_private => Err(Refusal::Private {
            host: host.to_string(),
            address: ip,
            kind,
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalisation_vectors() {
        for (raw, expected) in [
            ("https://wttr.in/Köln", "https://wttr.in/K%C3%B6ln"),
            ("https://wttr.in/K%C3%B6ln", "https://wttr.in/K%C3%B6ln"),
            (
                "https://münich.example/Köln",
                "https://xn--mnich-kva.example/K%C3%B6ln",
            ),
            (
                "https://example.com/r?next=https:// evil.example",
                "https://example.com/r?next=https://%20evil.example",
            ),
            ("https://   docs.example/a b", "https://docs.example/a%20b"),
            ("  https://example.com/x  ", "https://example.com/x"),
            (
                "https://example.com/p#fragmént",
                "https://example.com/p#fragm%C3%A9nt",
            ),
            ("ftp://example.com/ü", "ftp://example.com/ü"),
        ] {
            assert_eq!(normalize_url(raw), expected, "{raw}");
        }
    }

    #[test]
    fn secrets_in_urls_are_found() {
        for url in [
            "https://example.com/?q=sk-abcdefghijklmnop",
            "https://example.com/sk-abcdefghijklmnop/x",
            "https://example.com/?q=%73k-abcdefghijklmnop",
            "https://example.com/?k=ghp_abcdefghijklmnopqrstuvwxyz",
            "https://example.com/?k=AKIAABCDEFGHIJKLMNOP",
            "https://example.com/?k=tvly-abcdefghijkl",
        ] {
            assert_eq!(secret_in_url(url), Some(Refusal::SecretShape), "{url}");
        }
        for (url, name) in [
            ("https://example.com/?token=abc", "token"),
            ("https://example.com/?API_KEY=abc", "API_KEY"),
            ("https://s3.example/?X-Amz-Signature=abc", "X-Amz-Signature"),
            ("https://example.com/?a=1&password=hunter2", "password"),
            ("https://example.com/?access%5Ftoken=x", "access_token"),
        ] {
            assert_eq!(
                secret_in_url(url),
                Some(Refusal::SecretParameter(name.to_string())),
                "{url}"
            );
        }
        for url in [
            "https://example.com/?key=value",
            "https://example.com/?code=promo",
            "https://example.com/?token=",
            "https://example.com/task-management",
            "https://example.com/?q=risk-assessment-framework",
        ] {
            assert_eq!(secret_in_url(url), None, "{url}");
        }
    }

    #[test]
    fn targets_screened_without_lookup() {
        assert!(matches!(
            screen_target("ftp://example.com/file.txt", false),
            Err(Refusal::Scheme(_))
        ));
        assert!(screen_target("example.com/path", false).is_err());
        assert!(screen_target("http://", false).is_err());
        assert!(screen_target("", false).is_err());
        for url in [
            "http://metadata.google.internal/computeMetadata/v1/",
            "http://METADATA.GOOGLE.INTERNAL./x",
            "http://169.254.169.254/latest/meta-data/",
            "http://[fd00:ec2::254]/latest/",
            "http://[::ffff:169.254.169.254]/",
            "http://100.100.100.200/latest/meta-data/",
            "http://0xa9.0xfe.0xa9.0xfe/",
            "http://2852039166/",
        ] {
            for allow in [false, true] {
                assert!(
                    matches!(screen_target(url, allow), Err(Refusal::Metadata { .. })),
                    "{url} allow={allow}: {:?}",
                    screen_target(url, allow)
                );
            }
        }
        for url in [
            "http://127.0.0.1:8080/",
            "http://127.1/",
            "http://0x7f000001/",
            "http://[::1]:8080/",
            "http://[::ffff:7f00:1]/",
            "http://10.0.0.1/",
            "http://0.0.0.0/",
        ] {
            assert!(
                matches!(screen_target(url, false), Err(Refusal::Private { .. })),
                "{url}"
            );
            assert!(screen_target(url, true).is_ok(), "{url}");
        }
    }
}
