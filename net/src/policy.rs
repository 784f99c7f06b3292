//! The network policy of a session: whether private ranges are open and which
//! websites are blocked. Built from config.yaml (whose `security` section is held
//! back at its first reading, so a model that edits the file mid-session changes
//! nothing) and `HERMES_ALLOW_PRIVATE_URLS`.

use crate::blocklist::Blocklist;
use crate::screen::{normalize_url, screen_target, secret_in_url, Refusal};
use hermes_runtime::config::Config;
use serde_json::Value;
use std::path::Path;
use url::Url;

#[derive(Debug, Clone)]
pub struct NetPolicy {
    /// Private, loopback, CGNAT and other internal ranges may be reached. The
    /// metadata floor stays closed regardless.
    pub allow_private: bool,
    /// `Err` when `security.website_blocklist` is malformed: every URL is refused
    /// with the reason until it is fixed.
    pub blocklist: Result<Blocklist, String>,
}

impl Default for NetPolicy {
    /// Private ranges closed, no blocklist.
    fn default() -> Self {
        NetPolicy {
            allow_private: false,
            blocklist: Ok(Blocklist::of_rules([]).disabled()),
        }
    }
}

fn truthy(value: &Value) -> bool {
    match value {
        Value::Bool(b) => *b,
        Value::String(s) => matches!(
            s.trim().to_lowercase().as_str(),
            "true" | "1" | "yes" | "on"
        ),
        Value::Number(n) => n.as_i64() == Some(1),
        _ => false,
    }
}

impl NetPolicy {
    /// The policy for a call under `hermes_home`: the running call's configuration if
    /// there is one, else config.yaml read now.
    pub fn load(hermes_home: &Path) -> NetPolicy {
        match hermes_runtime::config::call_config() {
            Some(config) => NetPolicy::from_config(&config, hermes_home),
            None => NetPolicy::from_config(&Config::load(hermes_home), hermes_home),
        }
    }

    /// `HERMES_ALLOW_PRIVATE_URLS` (true/1/yes opens, false/0/no closes whatever the
    /// file says), then `security.allow_private_urls`, then the legacy
    /// `browser.allow_private_urls`.
    pub fn from_config(config: &Config, hermes_home: &Path) -> NetPolicy {
        let env = std::env::var("HERMES_ALLOW_PRIVATE_URLS")
            .unwrap_or_default()
            .trim()
            .to_lowercase();
        let allow_private = match env.as_str() {
            "true" | "1" | "yes" => true,
            "false" | "0" | "no" => false,
            _ => ["security.allow_private_urls", "browser.allow_private_urls"]
                .iter()
                .any(|key| config.get(key).is_some_and(truthy)),
        };
        NetPolicy {
            allow_private,
            blocklist: Blocklist::from_section(
                config.get("security.website_blocklist"),
                hermes_home,
            ),
        }
    }

    /// The blocklist's verdict on `url`.
    pub fn check_blocklist(&self, url: &str) -> Result<(), Refusal> {
        match &self.blocklist {
            Err(why) => Err(Refusal::PolicyBroken(why.clone())),
            Ok(list) => list
                .check(url)
                .map_or(Ok(()), |found| Err(Refusal::Blocked(found))),
        }
    }

    /// A URL the model supplied, screened before anything is sent: normalised, no
    /// secrets, http(s) with a host, not a metadata name or a refused literal address,
    /// not blocklisted. Names are resolved (and their addresses judged) only when the
    /// connection is made, by [`crate::Fetcher`], or by [`crate::Fetcher::preflight`]
    /// for URLs that a third party fetches.
    pub fn screen(&self, raw: &str) -> Result<Url, Refusal> {
        if let Some(secret) = secret_in_url(raw) {
            return Err(secret);
        }
        self.screen_hop(&normalize_url(raw))
    }

    /// A connection a program opens on its own (a browser's popup, WebSocket or
    /// prefetch), judged where it is made: the host name before any lookup (metadata
    /// names, literal addresses, the blocklist), then each address it resolved to.
    /// The caller connects to the address judged, never to a second lookup's answer.
    pub fn judge_connection(
        &self,
        host: &str,
        port: u16,
        address: Option<std::net::IpAddr>,
    ) -> Result<(), Refusal> {
        match address {
            Some(ip) => crate::screen::judge_address(host, ip, self.allow_private),
            None => {
                let authority = if host.contains(':') {
                    format!("[{host}]:{port}")
                } else {
                    format!("{host}:{port}")
                };
                self.screen_hop(&format!("http://{authority}/")).map(drop)
            }
        }
    }

    /// The checks every redirect hop passes too (a secret in a redirect target is
    /// the server's choice, not a leak by the model, so it is not refused).
    pub fn screen_hop(&self, url: &str) -> Result<Url, Refusal> {
        let parsed = screen_target(url, self.allow_private)?;
        self.check_blocklist(parsed.as_str())?;
        Ok(parsed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_and_environment_decide_private_access() {
        // A fresh home each time: the `security` section is held back at its first
        // reading in a process.
        let with = |yaml: &str| {
            let home = tempfile::tempdir().unwrap();
            std::fs::write(home.path().join("config.yaml"), yaml).unwrap();
            let config = Config::load(home.path());
            NetPolicy::from_config(&config, home.path())
        };
        // The variable is unset in this test process unless a test sets it; none does.
        assert!(std::env::var_os("HERMES_ALLOW_PRIVATE_URLS").is_none());
        assert!(!with("{}").allow_private);
        assert!(with("security:\n  allow_private_urls: true\n").allow_private);
        assert!(!with("security:\n  allow_private_urls: \"false\"\n").allow_private);
        assert!(with("browser:\n  allow_private_urls: true\n").allow_private);
        let broken = with("security:\n  website_blocklist:\n    enabled: maybe\n");
        assert!(matches!(
            broken.screen("https://example.com/"),
            Err(Refusal::PolicyBroken(_))
        ));
    }

    #[test]
    fn connections_are_judged_by_name_then_by_each_address() {
        let closed = NetPolicy {
            allow_private: false,
            blocklist: Ok(Blocklist::of_rules(["blocked.example"])),
        };
        let ip = |s: &str| Some(s.parse::<std::net::IpAddr>().unwrap());
        assert!(closed.judge_connection("example.com", 443, None).is_ok());
        assert!(closed
            .judge_connection("example.com", 443, ip("93.184.215.14"))
            .is_ok());
        for (host, address) in [
            ("metadata.google.internal", None),
            ("169.254.169.254", None),
            ("127.0.0.1", None),
            ("::1", None),
            ("blocked.example", None),
            ("rebinding.example", ip("127.0.0.1")),
            ("rebinding.example", ip("10.0.0.5")),
            ("rebinding.example", ip("169.254.169.254")),
        ] {
            assert!(
                closed.judge_connection(host, 80, address).is_err(),
                "{host} {address:?}"
            );
        }
        let open = NetPolicy {
            allow_private: true,
            ..closed
        };
        assert!(open.judge_connection("127.0.0.1", 8080, None).is_ok());
        assert!(open.judge_connection("localhost", 80, ip("::1")).is_ok());
        // The metadata floor holds with private ranges open.
        assert!(open
            .judge_connection("x.example", 80, ip("169.254.169.254"))
            .is_err());
    }
}
