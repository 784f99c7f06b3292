//! The search and extract providers, each called over its published HTTP API with a
//! base-URL override for self-hosted instances and tests. Provider failures become
//! results (`{"success": false, "error"}` or a per-URL `error`), never panics.

use hermes_runtime::config::Config;
use serde_json::{json, Value};
use std::time::Duration;

/// Largest provider response read.
const MAX_API_RESPONSE: u64 = 32 * 1024 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Local,
    Searxng,
    Tavily,
    Brave,
    Firecrawl,
    Exa,
    Parallel,
}

/// Auto-detection order when nothing is configured: keyed providers first, then the
/// free ones (the original's order).
const AUTO_ORDER: [Backend; 6] = [
    Backend::Tavily,
    Backend::Exa,
    Backend::Parallel,
    Backend::Firecrawl,
    Backend::Searxng,
    Backend::Brave,
];

fn env(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

fn base(name: &str, default: &str) -> String {
    env(name)
        .unwrap_or_else(|| default.to_string())
        .trim_end_matches('/')
        .to_string()
}

/// One extracted page, or why it could not be extracted.
#[derive(Debug, Clone, Default)]
pub struct ExtractItem {
    pub url: String,
    pub title: String,
    pub content: String,
    pub error: Option<String>,
    /// `blocked_by_policy` of a URL the website blocklist refused.
    pub blocked: Option<Value>,
}

impl ExtractItem {
    pub fn failed(url: &str, error: impl Into<String>) -> ExtractItem {
        ExtractItem {
            url: url.to_string(),
            error: Some(error.into()),
            ..Default::default()
        }
    }
}

impl Backend {
    pub const ALL: [Backend; 7] = [
        Backend::Local,
        Backend::Searxng,
        Backend::Tavily,
        Backend::Brave,
        Backend::Firecrawl,
        Backend::Exa,
        Backend::Parallel,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Backend::Local => "local",
            Backend::Searxng => "searxng",
            Backend::Tavily => "tavily",
            Backend::Brave => "brave-free",
            Backend::Firecrawl => "firecrawl",
            Backend::Exa => "exa",
            Backend::Parallel => "parallel",
        }
    }

    pub fn display_name(self) -> &'static str {
        match self {
            Backend::Local => "Local",
            Backend::Searxng => "SearXNG",
            Backend::Tavily => "Tavily",
            Backend::Brave => "Brave Search (Free)",
            Backend::Firecrawl => "Firecrawl",
            Backend::Exa => "Exa",
            Backend::Parallel => "Parallel",
        }
    }

    pub fn from_name(name: &str) -> Option<Backend> {
        let name = name.trim().to_lowercase();
        match name.as_str() {
            "brave" => Some(Backend::Brave),
            other => Backend::ALL.into_iter().find(|b| b.name() == other),
        }
    }

    pub fn supports_search(self) -> bool {
        self != Backend::Local
    }

    pub fn supports_extract(self) -> bool {
        !matches!(self, Backend::Searxng | Backend::Brave)
    }

    /// `Ok` when the backend can run here, else what it lacks.
    pub fn availability(self) -> Result<(), String> {
        let need = |name: &str| env(name).map(|_| ()).ok_or(format!("{name} is not set"));
        match self {
            Backend::Local => Ok(()),
            Backend::Searxng => need("SEARXNG_URL"),
            Backend::Tavily => need("TAVILY_API_KEY"),
            Backend::Brave => need("BRAVE_SEARCH_API_KEY"),
            Backend::Exa => need("EXA_API_KEY"),
            Backend::Parallel => need("PARALLEL_API_KEY"),
            Backend::Firecrawl => need("FIRECRAWL_API_KEY")
                .or_else(|_| need("FIRECRAWL_API_URL"))
                .map_err(|_| "FIRECRAWL_API_KEY or FIRECRAWL_API_URL is not set".into()),
        }
    }

    fn is_available(self) -> bool {
        self.availability().is_ok()
    }
}

fn configured(config: &Config, key: &str) -> Option<String> {
    config
        .get(key)
        .and_then(Value::as_str)
        .map(|s| s.trim().to_lowercase())
        .filter(|s| !s.is_empty())
}

/// The search backend: `web.search_backend` when it can run, else `web.backend`,
/// else the first provider with a key. `Err` is the message for the model.
pub fn search_backend(config: &Config) -> Result<Backend, String> {
    if let Some(b) = configured(config, "web.search_backend").and_then(|n| Backend::from_name(&n)) {
        if b.supports_search() && b.is_available() {
            return Ok(b);
        }
    }
    if let Some(name) = configured(config, "web.backend") {
        if let Some(b) = Backend::from_name(&name) {
            if !b.supports_search() {
                return Err(format!(
                    "{} is an extract-only backend and cannot search. Set web.search_backend \
                     to searxng, brave-free, tavily, exa, parallel or firecrawl.",
                    b.display_name()
                ));
            }
            return Ok(b);
        }
    }
    AUTO_ORDER
        .into_iter()
        .find(|b| b.is_available())
        .ok_or_else(|| {
            "No web search provider configured. Set SEARXNG_URL, BRAVE_SEARCH_API_KEY, \
             TAVILY_API_KEY, EXA_API_KEY, PARALLEL_API_KEY, FIRECRAWL_API_KEY or \
             FIRECRAWL_API_URL, or web.search_backend in config.yaml."
                .to_string()
        })
}

/// The extract backend: `web.extract_backend` when it can run (a search-only one is
/// an error, as in the original), else `web.backend` when it can extract, else the
/// first extracting provider with a key, else `local`.
pub fn extract_backend(config: &Config) -> Result<Backend, String> {
    let search_only = |b: Backend| {
        format!(
            "{} is a search-only backend and cannot extract URL content. Set \
             web.extract_backend to firecrawl, tavily, exa, parallel or local.",
            b.display_name()
        )
    };
    if let Some(name) = configured(config, "web.extract_backend") {
        match Backend::from_name(&name) {
            Some(b) if !b.supports_extract() => return Err(search_only(b)),
            Some(b) if b.is_available() => return Ok(b),
            _ => {}
        }
    }
    if let Some(b) = configured(config, "web.backend").and_then(|n| Backend::from_name(&n)) {
        if b.supports_extract() {
            return Ok(b);
        }
    }
    Ok(AUTO_ORDER
        .into_iter()
        .find(|b| b.supports_extract() && b.is_available())
        .unwrap_or(Backend::Local))
}

fn read_json(mut response: ureq::http::Response<ureq::Body>, who: &str) -> Result<Value, String> {
    let status = response.status().as_u16();
    let text = response
        .body_mut()
        .with_config()
        .limit(MAX_API_RESPONSE)
        .read_to_string()
        .map_err(|e| format!("could not read the {who} response: {e}"))?;
    if status >= 400 {
        let detail: String = text.chars().take(300).collect();
        return Err(format!("{who} returned HTTP {status}: {detail}"));
    }
    serde_json::from_str(&text).map_err(|_| format!("Could not parse {who} response as JSON"))
}

fn post(
    url: &str,
    headers: &[(&str, String)],
    body: &Value,
    timeout: Duration,
    who: &str,
) -> Result<Value, String> {
    let agent = hermes_net::operator_agent(timeout);
    let mut request = agent.post(url).header("Accept", "application/json");
    for (name, value) in headers {
        request = request.header(*name, value.as_str());
    }
    let response = request
        .send_json(body)
        .map_err(|e| format!("Could not reach {who} at {url}: {e}"))?;
    read_json(response, who)
}

fn text(value: &Value, key: &str) -> String {
    value
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

fn strings(value: &Value, key: &str) -> Vec<String> {
    value
        .get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

fn results<'a>(value: &'a Value, key: &str) -> impl Iterator<Item = &'a Value> {
    value
        .get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

fn web_results(items: Vec<(String, String, String)>) -> Value {
    let web: Vec<Value> = items
        .into_iter()
        .enumerate()
        .map(|(i, (title, url, description))| {
            json!({"title": title, "url": url, "description": description, "position": i + 1})
        })
        .collect();
    json!({"success": true, "data": {"web": web}})
}

fn failure(message: String) -> Value {
    json!({"success": false, "error": message})
}

fn bearer(key: &str) -> Vec<(&'static str, String)> {
    env(key)
        .map(|k| vec![("Authorization", format!("Bearer {k}"))])
        .unwrap_or_default()
}

fn x_api_key(key: &str) -> Vec<(&'static str, String)> {
    env(key).map(|k| vec![("x-api-key", k)]).unwrap_or_default()
}

const SEARCH_TIMEOUT: Duration = Duration::from_secs(30);
const EXTRACT_TIMEOUT: Duration = Duration::from_secs(60);

impl Backend {
    /// `{"success": true, "data": {"web": [...]}}` or `{"success": false, "error"}`.
    pub fn search(self, query: &str, limit: usize) -> Value {
        if let Err(why) = self.availability() {
            return failure(why);
        }
        match self.search_inner(query, limit) {
            Ok(found) => found,
            Err(why) => failure(format!("{} search failed: {why}", self.display_name())),
        }
    }

    fn search_inner(self, query: &str, limit: usize) -> Result<Value, String> {
        match self {
            Backend::Local => Err("the local backend cannot search".into()),
            Backend::Searxng => {
                let base = base("SEARXNG_URL", "");
                let url = format!("{base}/search");
                let response = hermes_net::operator_agent(SEARCH_TIMEOUT)
                    .get(&url)
                    .query("q", query)
                    .query("format", "json")
                    .query("pageno", "1")
                    .header("Accept", "application/json")
                    .call()
                    .map_err(|e| format!("Could not reach SearXNG at {base}: {e}"))?;
                let data = read_json(response, "SearXNG")?;
                let mut found: Vec<&Value> = results(&data, "results").collect();
                let score = |r: &Value| r.get("score").and_then(Value::as_f64).unwrap_or(0.0);
                found.sort_by(|a, b| score(b).total_cmp(&score(a)));
                Ok(web_results(
                    found
                        .into_iter()
                        .take(limit)
                        .map(|r| (text(r, "title"), text(r, "url"), text(r, "content")))
                        .collect(),
                ))
            }
            Backend::Brave => {
                let base = base("BRAVE_SEARCH_BASE_URL", "https://api.search.brave.com");
                let response = hermes_net::operator_agent(SEARCH_TIMEOUT)
                    .get(&format!("{base}/res/v1/web/search"))
                    .query("q", query)
                    .query("count", limit.clamp(1, 20).to_string())
                    .header("Accept", "application/json")
                    .header(
                        "X-Subscription-Token",
                        env("BRAVE_SEARCH_API_KEY").unwrap_or_default(),
                    )
                    .call()
                    .map_err(|e| format!("Could not reach Brave Search: {e}"))?;
                let data = read_json(response, "Brave Search")?;
                let web = data.get("web").cloned().unwrap_or(Value::Null);
                Ok(web_results(
                    results(&web, "results")
                        .take(limit)
                        .map(|r| (text(r, "title"), text(r, "url"), text(r, "description")))
                        .collect(),
                ))
            }
            Backend::Tavily => {
                let base = base("TAVILY_BASE_URL", "https://api.tavily.com");
                let body = json!({
                    "query": query,
                    "max_results": limit.min(20),
                    "include_raw_content": false,
                    "include_images": false,
                });
                let data = post(
                    &format!("{base}/search"),
                    &bearer("TAVILY_API_KEY"),
                    &body,
                    SEARCH_TIMEOUT,
                    "Tavily",
                )?;
                Ok(web_results(
                    results(&data, "results")
                        .map(|r| (text(r, "title"), text(r, "url"), text(r, "content")))
                        .collect(),
                ))
            }
            Backend::Firecrawl => {
                let base = base("FIRECRAWL_API_URL", "https://api.firecrawl.dev");
                let body = json!({"query": query, "limit": limit});
                let data = post(
                    &format!("{base}/v2/search"),
                    &bearer("FIRECRAWL_API_KEY"),
                    &body,
                    SEARCH_TIMEOUT,
                    "Firecrawl",
                )?;
                let web = data.get("data").cloned().unwrap_or(Value::Null);
                Ok(web_results(
                    results(&web, "web")
                        .take(limit)
                        .map(|r| (text(r, "title"), text(r, "url"), text(r, "description")))
                        .collect(),
                ))
            }
            Backend::Exa => {
                let base = base("EXA_BASE_URL", "https://api.exa.ai");
                let body =
                    json!({"query": query, "numResults": limit, "contents": {"highlights": true}});
                let data = post(
                    &format!("{base}/search"),
                    &x_api_key("EXA_API_KEY"),
                    &body,
                    SEARCH_TIMEOUT,
                    "Exa",
                )?;
                Ok(web_results(
                    results(&data, "results")
                        .map(|r| {
                            (
                                text(r, "title"),
                                text(r, "url"),
                                strings(r, "highlights").join(" "),
                            )
                        })
                        .collect(),
                ))
            }
            Backend::Parallel => {
                let base = base("PARALLEL_BASE_URL", "https://api.parallel.ai");
                let mode = env("PARALLEL_SEARCH_MODE")
                    .map(|m| m.to_lowercase())
                    .filter(|m| ["fast", "one-shot", "agentic"].contains(&m.as_str()))
                    .unwrap_or_else(|| "agentic".into());
                let body = json!({
                    "objective": query,
                    "search_queries": [query],
                    "mode": mode,
                    "max_results": limit.min(20),
                });
                let mut headers = x_api_key("PARALLEL_API_KEY");
                headers.push(("parallel-beta", PARALLEL_BETA.into()));
                let data = post(
                    &format!("{base}/v1beta/search"),
                    &headers,
                    &body,
                    SEARCH_TIMEOUT,
                    "Parallel",
                )?;
                Ok(web_results(
                    results(&data, "results")
                        .map(|r| {
                            (
                                text(r, "title"),
                                text(r, "url"),
                                strings(r, "excerpts").join(" "),
                            )
                        })
                        .collect(),
                ))
            }
        }
    }

    /// Pages of `urls` (already screened) from a provider. Whole-call failures become
    /// one failed item per URL.
    pub fn extract_remote(self, urls: &[String]) -> Vec<ExtractItem> {
        if let Err(why) = self.availability() {
            return urls
                .iter()
                .map(|u| ExtractItem::failed(u, why.clone()))
                .collect();
        }
        match self.extract_inner(urls) {
            Ok(items) => items,
            Err(why) => urls
                .iter()
                .map(|u| {
                    ExtractItem::failed(u, format!("{} extract failed: {why}", self.display_name()))
                })
                .collect(),
        }
    }

    fn extract_inner(self, urls: &[String]) -> Result<Vec<ExtractItem>, String> {
        let page = |r: &Value, content: String| ExtractItem {
            url: text(r, "url"),
            title: text(r, "title"),
            content,
            ..Default::default()
        };
        match self {
            Backend::Tavily => {
                let base = base("TAVILY_BASE_URL", "https://api.tavily.com");
                let body = json!({"urls": urls, "include_images": false});
                let data = post(
                    &format!("{base}/extract"),
                    &bearer("TAVILY_API_KEY"),
                    &body,
                    EXTRACT_TIMEOUT,
                    "Tavily",
                )?;
                let mut items: Vec<ExtractItem> = results(&data, "results")
                    .map(|r| {
                        let raw = Some(text(r, "raw_content"))
                            .filter(|t| !t.is_empty())
                            .unwrap_or_else(|| text(r, "content"));
                        page(r, raw)
                    })
                    .collect();
                items.extend(results(&data, "failed_results").map(|f| {
                    let error = Some(text(f, "error")).filter(|e| !e.is_empty());
                    ExtractItem::failed(
                        &text(f, "url"),
                        error.unwrap_or_else(|| "extraction failed".into()),
                    )
                }));
                Ok(items)
            }
            Backend::Exa => {
                let base = base("EXA_BASE_URL", "https://api.exa.ai");
                let body = json!({"urls": urls, "text": true});
                let data = post(
                    &format!("{base}/contents"),
                    &x_api_key("EXA_API_KEY"),
                    &body,
                    EXTRACT_TIMEOUT,
                    "Exa",
                )?;
                let mut items: Vec<ExtractItem> = results(&data, "results")
                    .map(|r| page(r, text(r, "text")))
                    .collect();
                items.extend(
                    results(&data, "statuses")
                        .filter(|s| text(s, "status") == "error")
                        .map(|s| {
                            let tag = s
                                .pointer("/error/tag")
                                .and_then(Value::as_str)
                                .unwrap_or("extraction failed");
                            ExtractItem::failed(&text(s, "id"), tag)
                        }),
                );
                Ok(items)
            }
            Backend::Parallel => {
                let base = base("PARALLEL_BASE_URL", "https://api.parallel.ai");
                let body = json!({"urls": urls, "full_content": true});
                let mut headers = x_api_key("PARALLEL_API_KEY");
                headers.push(("parallel-beta", PARALLEL_BETA.into()));
                let data = post(
                    &format!("{base}/v1beta/extract"),
                    &headers,
                    &body,
                    EXTRACT_TIMEOUT,
                    "Parallel",
                )?;
                let mut items: Vec<ExtractItem> = results(&data, "results")
                    .map(|r| {
                        let full = Some(text(r, "full_content"))
                            .filter(|t| !t.is_empty())
                            .unwrap_or_else(|| strings(r, "excerpts").join("\n\n"));
                        page(r, full)
                    })
                    .collect();
                items.extend(results(&data, "errors").map(|e| {
                    let why = [text(e, "content"), text(e, "error_type")]
                        .into_iter()
                        .find(|t| !t.is_empty())
                        .unwrap_or_else(|| "extraction failed".into());
                    ExtractItem::failed(&text(e, "url"), why)
                }));
                Ok(items)
            }
            Backend::Firecrawl => {
                let base = base("FIRECRAWL_API_URL", "https://api.firecrawl.dev");
                let headers = bearer("FIRECRAWL_API_KEY");
                Ok(urls
                    .iter()
                    .map(|url| {
                        let body = json!({"url": url, "formats": ["markdown"]});
                        match post(
                            &format!("{base}/v2/scrape"),
                            &headers,
                            &body,
                            EXTRACT_TIMEOUT,
                            "Firecrawl",
                        ) {
                            Err(why) => ExtractItem::failed(url, why),
                            Ok(data) => {
                                let doc = data.get("data").cloned().unwrap_or(Value::Null);
                                let meta = doc.get("metadata").cloned().unwrap_or(Value::Null);
                                let final_url = Some(text(&meta, "sourceURL"))
                                    .filter(|u| !u.is_empty())
                                    .unwrap_or_else(|| url.clone());
                                ExtractItem {
                                    url: final_url,
                                    title: text(&meta, "title"),
                                    content: text(&doc, "markdown"),
                                    ..Default::default()
                                }
                            }
                        }
                    })
                    .collect())
            }
            Backend::Local | Backend::Searxng | Backend::Brave => Err(format!(
                "{} cannot extract through a provider",
                self.display_name()
            )),
        }
    }
}

/// The beta feature header of Parallel's search and extract APIs.
const PARALLEL_BETA: &str = "search-extract-2025-10-10";
