//! Every request a page makes, judged before it leaves: the top-level navigation, each
//! redirect hop, each subresource, `fetch()`/XHR, frames and workers. Chromium pauses
//! them (`Fetch.requestPaused`) and this decides with the network layer's policy: the
//! same screening as `web_extract` (metadata floor, private ranges unless the operator
//! opened them, the website blocklist), the host resolved and every answer judged.

use hermes_net::{Fetcher, NetPolicy};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Decides whether `file://` paths may be read: `None` allows, `Some(why)` refuses.
pub type FileCheck = Arc<dyn Fn(&Path) -> Option<String> + Send + Sync>;

/// What a task's browser may reach.
#[derive(Clone)]
pub struct RequestPolicy {
    fetcher: Fetcher,
    /// `browser.allow_file_urls` with the access policy's read check; `None` refuses
    /// every `file://` URL.
    files: Option<FileCheck>,
}

impl RequestPolicy {
    pub fn new(policy: NetPolicy, files: Option<FileCheck>) -> RequestPolicy {
        RequestPolicy {
            fetcher: Fetcher::new(policy),
            files,
        }
    }

    pub fn net(&self) -> &NetPolicy {
        self.fetcher.policy()
    }

    /// The judge of the connections a sandboxed browser makes through the runtime's
    /// proxy: its only way out, so what `Fetch` never sees (popups, WebSockets,
    /// service workers) is judged too, by the address actually dialled.
    pub(crate) fn reach(&self) -> Arc<dyn hermes_sandbox::network::Reach> {
        Arc::new(ProxyReach(self.net().clone()))
    }

    /// A request's URL: `Ok` lets it go, `Err` says why not.
    pub fn judge(&self, raw: &str) -> Result<(), String> {
        let scheme = raw
            .split_once(':')
            .map(|(s, _)| s.to_ascii_lowercase())
            .unwrap_or_default();
        match scheme.as_str() {
            "http" | "https" => self
                .fetcher
                .check_hop(raw, Duration::from_secs(10))
                .map(drop)
                .map_err(|r| r.to_string()),
            // A WebSocket's handshake is an HTTP request to the same host.
            "ws" | "wss" => {
                let as_http = format!("http{}", &raw[2..]);
                self.fetcher
                    .check_hop(&as_http, Duration::from_secs(10))
                    .map(drop)
                    .map_err(|r| r.to_string())
            }
            // Content the page already holds.
            "data" | "blob" | "about" => Ok(()),
            "file" => self.judge_file(raw),
            other => Err(format!("Blocked: the browser may not open '{other}:' URLs")),
        }
    }

    fn judge_file(&self, raw: &str) -> Result<(), String> {
        let Some(check) = &self.files else {
            return Err(
                "Blocked: file:// URLs are off (browser.allow_file_urls opens them, within what read_file may read)"
                    .into(),
            );
        };
        let parsed = url::Url::parse(raw).map_err(|e| format!("Invalid URL: {e}"))?;
        let path = parsed
            .to_file_path()
            .map_err(|_| "Blocked: a file:// URL must name a local absolute path".to_string())?;
        // Symlinks followed, so a link to a refused place is refused too.
        let resolved = std::fs::canonicalize(&path).unwrap_or(path);
        match check(&resolved) {
            None => Ok(()),
            Some(why) => Err(format!("Blocked: {why}")),
        }
    }
}

struct ProxyReach(NetPolicy);

impl hermes_sandbox::network::Reach for ProxyReach {
    fn check(
        &self,
        host: &str,
        port: u16,
        address: Option<std::net::IpAddr>,
    ) -> Result<(), String> {
        self.0
            .judge_connection(host, port, address)
            .map_err(|refusal| format!("the browser may not connect to {host}:{port}: {refusal}"))
    }
}
