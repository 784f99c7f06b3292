//! A small JSON-over-HTTPS client for the sandbox providers (ureq underneath).

use super::EnvError;
use serde_json::Value;
use std::time::Duration;

/// Largest response body read (command output arrives in it).
const MAX_BODY: u64 = 64 * 1024 * 1024;

#[derive(Clone)]
pub struct Api {
    pub base: String,
    bearer: String,
    extra_headers: Vec<(String, String)>,
    agent: ureq::Agent,
    provider: &'static str,
}

impl Api {
    pub fn new(provider: &'static str, base: &str, bearer: &str, timeout: Duration) -> Api {
        let config = ureq::Agent::config_builder()
            .timeout_global(Some(timeout))
            .http_status_as_error(false)
            .tls_config(hermes_runtime::tls_trust::tls_config())
            .build();
        Api {
            base: base.trim_end_matches('/').to_string(),
            bearer: bearer.to_string(),
            extra_headers: Vec::new(),
            agent: ureq::Agent::new_with_config(config),
            provider,
        }
    }

    pub fn header(mut self, name: &str, value: &str) -> Api {
        self.extra_headers
            .push((name.to_string(), value.to_string()));
        self
    }

    fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    fn headers<B>(
        &self,
        mut req: ureq::RequestBuilder<B>,
        accept: &str,
    ) -> ureq::RequestBuilder<B> {
        req = req
            .header("Authorization", &format!("Bearer {}", self.bearer))
            .header("Accept", accept);
        for (k, v) in &self.extra_headers {
            req = req.header(k, v);
        }
        req
    }

    /// Sends a request (`body` as JSON when given) and returns the status and the
    /// response, its body not read yet.
    fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        accept: &str,
    ) -> Result<ureq::http::Response<ureq::Body>, EnvError> {
        let url = self.url(path);
        let result = match method {
            "GET" => self.headers(self.agent.get(&url), accept).call(),
            "DELETE" => self.headers(self.agent.delete(&url), accept).call(),
            _ => {
                let req = self.headers(self.agent.post(&url), accept);
                match body {
                    Some(b) => req.send_json(b),
                    None => req.send_empty(),
                }
            }
        };
        result.map_err(|e| {
            EnvError::new(format!("{} API {method} {url} failed: {e}", self.provider))
                .hint("check the network and the provider's status, then retry")
        })
    }

    /// Sends a request; `body` as JSON when given. Returns the status and raw body.
    pub fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(u16, Vec<u8>), EnvError> {
        self.send_accepting(method, path, body, "application/json")
    }

    /// [`Api::send`] for a route that answers another media type (`accept`).
    pub fn send_accepting(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        accept: &str,
    ) -> Result<(u16, Vec<u8>), EnvError> {
        let mut response = self.call(method, path, body, accept)?;
        let status = response.status().as_u16();
        let bytes = response
            .body_mut()
            .with_config()
            .limit(MAX_BODY)
            .read_to_vec()
            .map_err(|e| {
                EnvError::new(format!(
                    "{} API {method} {path}: cannot read the response: {e}",
                    self.provider
                ))
            })?;
        Ok((status, bytes))
    }

    /// Opens a streamed answer (`accept`, e.g. `application/x-ndjson`): the status and a
    /// reader of the body as it arrives.
    pub fn open(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        accept: &str,
    ) -> Result<(u16, Box<dyn std::io::Read + Send>), EnvError> {
        let response = self.call(method, path, body, accept)?;
        let status = response.status().as_u16();
        let reader = response
            .into_body()
            .into_with_config()
            .limit(MAX_BODY)
            .reader();
        Ok((status, Box::new(reader)))
    }

    /// A JSON request whose answer must be a 2xx JSON document.
    pub fn json(&self, method: &str, path: &str, body: Option<&Value>) -> Result<Value, EnvError> {
        let (status, bytes) = self.send(method, path, body)?;
        if !(200..300).contains(&status) {
            let text = String::from_utf8_lossy(&bytes);
            let hint = match status {
                401 | 403 => "the credentials were refused: check the API key / token",
                404 => "the sandbox or endpoint does not exist (it may have expired)",
                429 => "rate limited: wait and retry",
                _ => "retry later",
            };
            return Err(EnvError::new(format!(
                "{} API {method} {path} answered HTTP {status}: {}",
                self.provider,
                text.chars().take(500).collect::<String>()
            ))
            .hint(hint));
        }
        if bytes.is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_slice(&bytes).map_err(|e| {
            EnvError::new(format!(
                "{} API {method} {path}: the answer is not JSON: {e}",
                self.provider
            ))
        })
    }
}

/// Percent-encodes a query value (slashes kept: the values are paths).
pub fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The script an HTTP backend sends: `script` wrapped by [`super::remote_wrap`] (so a
/// timeout can kill its process group), with `stdin` piped into it when given (the
/// providers' one-shot execute routes take no input stream).
pub fn wrapped_script(script: &str, login: bool, stdin: Option<&[u8]>, rid: &str) -> String {
    match stdin {
        Some(data) => {
            let inner = format!(
                "printf '%s' {} | bash {}-c {}",
                super::sh_quote(&String::from_utf8_lossy(data)),
                if login { "-l " } else { "" },
                super::sh_quote(script)
            );
            super::remote_wrap(&inner, false, "/tmp", rid)
        }
        None => super::remote_wrap(script, login, "/tmp", rid),
    }
}
