//! `web_search` and `web_extract`: the web through one of several providers, or for
//! extraction with no key at all through the `local` backend. Every URL the model
//! names is screened by the network layer (hermes-net) first: secrets in the URL,
//! private and metadata addresses, the website blocklist.

use hermes_net::{Fetcher, Limits, NetPolicy, Refusal};
use hermes_runtime::config::Config;
use hermes_runtime::prelude::*;
use regex::Regex;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

mod backends;
mod local;

pub use backends::{extract_backend, search_backend, Backend, ExtractItem};
pub use local::html_to_markdown;

const DEFAULT_CHAR_LIMIT: usize = 15_000;
const MAX_URLS: usize = 5;

fn config_for(home: &std::path::Path) -> Arc<Config> {
    hermes_runtime::config::call_config().unwrap_or_else(|| Arc::new(Config::load(home)))
}

/// Available when a search backend can run: configured, or found by its key.
pub fn web_search_available() -> bool {
    let config = config_for(&hermes_runtime::context::default_hermes_home());
    search_backend(&config).is_ok_and(|b| b.availability().is_ok())
}

/// Always: the `local` backend needs no key.
pub fn web_extract_available() -> bool {
    true
}

/// The original's parameters (bounds and default) over the generated ones.
pub fn web_search_schema(_: &SchemaContext) -> Option<Value> {
    Some(json!({"parameters": {
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "description": "The search query to look up on the web. You may include backend-supported operators such as site:example.com, filetype:pdf, intitle:word, -term, or \"exact phrase\"."
            },
            "limit": {
                "type": "integer",
                "description": "Maximum number of results to return. Defaults to 5.",
                "minimum": 1,
                "maximum": 100,
                "default": 5
            }
        },
        "required": ["query"]
    }}))
}

pub fn web_extract_schema(_: &SchemaContext) -> Option<Value> {
    // The item shapes are the generated ones (from `UrlItem`), so the two cannot drift.
    let entry = crate::CATALOG
        .tool("web_extract")
        .expect("web_extract is in the catalog");
    let generated: Value = serde_json::from_str(entry.schema).expect("generated schemas are JSON");
    let items = generated["parameters"]["properties"]["urls"]["items"].clone();
    Some(json!({"parameters": {
        "type": "object",
        "properties": {
            "urls": {
                "type": "array",
                "items": items,
                "description": "URLs to extract content from (at most 5 per call): each a URL string, or an object with a url or href field such as a web_search result.",
                "maxItems": MAX_URLS
            },
            "char_limit": {
                "type": "integer",
                "description": "Characters of each page returned inline (default 15000). Longer pages come back as a head and tail with the full text stored on disk; raise it to see more of a long page inline.",
                "minimum": 2000
            }
        },
        "required": ["urls"]
    }}))
}

/// Search the web. Returns up to 5 results by default, each with title, URL and description. The query goes to the configured search provider as written, so operators such as site:domain, filetype:pdf, intitle:word, -term and "exact phrase" work where the provider supports them.
#[tool(toolset = "web", emoji = "🔍", max_result_chars = 100_000, check = web_search_available, requires_env = ["SEARXNG_URL", "BRAVE_SEARCH_API_KEY", "TAVILY_API_KEY", "EXA_API_KEY", "PARALLEL_API_KEY", "FIRECRAWL_API_KEY", "FIRECRAWL_API_URL"], dynamic_schema = web_search_schema)]
pub fn web_search(
    /// The search query.
    query: String,
    /// Most results to return, 1 to 100 (default 5).
    limit: Option<i64>,
    ctx: &ToolContext,
) -> ToolResult {
    if query.trim().is_empty() {
        return Ok(json!({"success": false, "error": "query is required"}).into());
    }
    let limit = limit.unwrap_or(5).clamp(1, 100) as usize;
    let config = config_for(ctx.hermes_home());
    let found = match search_backend(&config) {
        Ok(backend) => backend.search(&query, limit),
        Err(why) => json!({"success": false, "error": why}),
    };
    Ok(found.into())
}

/// One item of `urls`: a URL, or an object that names one (a web_search result passed
/// back as it came).
#[derive(Deserialize)]
#[serde(
    untagged,
    expecting = "each item of urls is a URL string or an object with a string 'url' or 'href' field"
)]
pub enum UrlItem {
    Address(String),
    Object {
        /// The page's URL.
        url: Option<String>,
        /// The page's URL, under the name HTML links use; read when `url` is absent.
        href: Option<String>,
    },
}

impl UrlItem {
    /// The URL the item names, if any.
    fn url(&self) -> Option<String> {
        let named = match self {
            UrlItem::Address(url) => Some(url),
            UrlItem::Object { url, href } => {
                url.as_ref().filter(|u| !u.is_empty()).or(href.as_ref())
            }
        };
        named
            .map(|s| s.trim())
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    }
}

/// Inline base64 images are token bombs: they become `[IMAGE: alt]` placeholders.
pub fn base64_images_to_placeholders(text: &str) -> String {
    static MARKDOWN: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"!\[([^\]]*)\]\(\s*data:image/[^;]+;base64,[A-Za-z0-9+/=\s]+\)").unwrap()
    });
    static PARENTHESISED: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"\(\s*data:image/[^;]+;base64,[A-Za-z0-9+/=\s]+\)").unwrap());
    static BARE: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"data:image/[^;]+;base64,[A-Za-z0-9+/=]+").unwrap());
    let out = MARKDOWN.replace_all(text, |c: &regex::Captures| {
        let alt = c[1].trim();
        if alt.is_empty() {
            "[IMAGE]".to_string()
        } else {
            format!("[IMAGE: {alt}]")
        }
    });
    let out = PARENTHESISED.replace_all(&out, "[IMAGE]");
    BARE.replace_all(&out, "[IMAGE]").into_owned()
}

fn refused(url: &str, refusal: &Refusal) -> ExtractItem {
    ExtractItem {
        blocked: match refusal {
            Refusal::Blocked(found) => Some(found.to_json()),
            _ => None,
        },
        ..ExtractItem::failed(url, refusal.to_string())
    }
}

fn item_json(item: &ExtractItem) -> Value {
    let mut value =
        json!({"url": item.url, "title": item.title, "content": item.content, "error": item.error});
    if let Some(blocked) = &item.blocked {
        value["blocked_by_policy"] = blocked.clone();
    }
    value
}

/// Extract the content of web pages as markdown or text, without summarising. Works with HTML pages, plain text and PDF documents (arxiv papers, reports): pass the PDF link directly. Pages within the character budget (default 15000) come back whole; longer ones come back as a head and tail window with a footer naming the file that holds the full text and the read_file call that pages through the omitted middle. Inline images appear as [IMAGE: alt] placeholders; real image URLs stay links. If a URL fails or times out, use the browser tool instead.
#[tool(toolset = "web", emoji = "📄", max_result_chars = 100_000, check = web_extract_available, requires_env = ["SEARXNG_URL", "BRAVE_SEARCH_API_KEY", "TAVILY_API_KEY", "EXA_API_KEY", "PARALLEL_API_KEY", "FIRECRAWL_API_KEY", "FIRECRAWL_API_URL"], dynamic_schema = web_extract_schema)]
pub fn web_extract(
    /// URLs to extract (at most 5): each a URL string, or an object with a `url` or `href` field such as a web_search result.
    urls: Vec<UrlItem>,
    /// Characters of each page returned inline (at least 2000, default 15000).
    char_limit: Option<i64>,
    ctx: &ToolContext,
) -> ToolResult {
    let home = ctx.hermes_home().to_path_buf();
    let config = config_for(&home);
    let policy = NetPolicy::from_config(&config, &home);
    let urls: Vec<Option<String>> = urls.iter().take(MAX_URLS).map(UrlItem::url).collect();

    // One slot per input item, filled in input order.
    let mut slots: Vec<Option<Value>> = vec![None; urls.len()];
    let mut pending: Vec<(usize, String)> = Vec::new();
    for (index, item) in urls.iter().enumerate() {
        let Some(url) = item.clone() else {
            slots[index] = Some(
                json!({"url": "", "title": "", "content": "", "error": format!(
                    "Invalid URL item at index {index}: expected a URL string or an object with a string 'url' or 'href' field"
                )}),
            );
            continue;
        };
        if let Some(secret) = hermes_net::secret_in_url(&url) {
            return Ok(json!({"success": false, "error": secret.to_string()}).into());
        }
        pending.push((index, url));
    }

    let backend = if pending.is_empty() {
        Backend::Local
    } else {
        match extract_backend(&config) {
            Ok(backend) => backend,
            Err(why) => return Ok(json!({"success": false, "error": why}).into()),
        }
    };
    let fetcher = Fetcher::new(policy.clone());
    let limits = Limits {
        timeout: Duration::from_secs(
            config
                .positive_usize("web.extract_timeout")
                .unwrap_or(30)
                .min(300) as u64,
        ),
        ..Limits::default()
    };

    // Each page as it is read, for callers that show a long call while it runs.
    // Counted and sent under one lock, so the counts arrive in order.
    let read = std::sync::Mutex::new(0usize);
    let report = |url: &str| {
        let mut done = read.lock().unwrap_or_else(|p| p.into_inner());
        *done += 1;
        ctx.report_progress(&hermes_runtime::redact::redact_secrets(&format!(
            "Read {} of {}: {url}",
            *done,
            pending.len()
        )));
    };
    let items: Vec<(usize, ExtractItem)> = if backend == Backend::Local {
        std::thread::scope(|scope| {
            let workers: Vec<_> = pending
                .iter()
                .map(|(index, url)| {
                    let (fetcher, limits, report) = (&fetcher, &limits, &report);
                    scope.spawn(move || {
                        let item = match local::extract(fetcher, url, limits) {
                            Ok(page) => ExtractItem {
                                url: page.url,
                                title: page.title,
                                content: page.content,
                                ..Default::default()
                            },
                            Err(local::Failure::Other(why)) => ExtractItem::failed(url, why),
                            Err(local::Failure::Refused(refusal)) => {
                                refused(&hermes_net::normalize_url(url), &refusal)
                            }
                        };
                        report(url);
                        (*index, item)
                    })
                })
                .collect();
            workers
                .into_iter()
                .map(|w| w.join().expect("an extract worker does not panic"))
                .collect()
        })
    } else {
        // A third party fetches these: judge them here first (one lookup each).
        let mut screened: Vec<(usize, String)> = Vec::new();
        for (index, url) in &pending {
            match fetcher.preflight(url, Duration::from_secs(10)) {
                Ok(normal) => screened.push((*index, normal)),
                Err(refusal) => {
                    slots[*index] = Some(item_json(&refused(
                        &hermes_net::normalize_url(url),
                        &refusal,
                    )))
                }
            }
        }
        let targets: Vec<String> = screened.iter().map(|(_, u)| u.clone()).collect();
        let found = if targets.is_empty() {
            Vec::new()
        } else {
            backend.extract_remote(&targets)
        };
        match_results(&screened, found)
    };

    let store = hermes_net::store_dir(&home);
    let char_limit = char_limit
        .map(|n| n.max(0) as usize)
        .or_else(|| config.positive_usize("web.extract_char_limit"))
        .unwrap_or(DEFAULT_CHAR_LIMIT)
        .clamp(2000, 500_000);
    for (index, mut item) in items {
        if item.error.is_none() {
            // Where a provider ended up (after its redirects) passes the same policy.
            if let Err(refusal) = policy.screen_hop(&item.url) {
                item = refused(&item.url, &refusal);
            } else {
                let clean = base64_images_to_placeholders(&item.content);
                item.content =
                    hermes_net::truncate_and_store(&clean, &item.url, char_limit, &store).0;
            }
        }
        slots[index] = Some(item_json(&item));
    }
    let results: Vec<Value> = slots
        .into_iter()
        .zip(urls.iter())
        .map(|(slot, item)| {
            slot.unwrap_or_else(|| {
                json!({"url": item.clone().unwrap_or_default(), "title": "", "content": "",
                       "error": "Extract backend returned no result for this URL"})
            })
        })
        .collect();
    if results.is_empty() {
        return Ok(json!({"error": "Content was inaccessible or not found"}).into());
    }
    Ok(json!({"results": results}).into())
}

/// Provider results matched back to the input slots: by URL where the provider kept
/// it, else in order.
fn match_results(
    screened: &[(usize, String)],
    found: Vec<ExtractItem>,
) -> Vec<(usize, ExtractItem)> {
    let mut free: Vec<(usize, String)> = screened.to_vec();
    let mut unmatched = Vec::new();
    let mut out = Vec::new();
    for item in found {
        match free.iter().position(|(_, u)| *u == item.url) {
            Some(at) => out.push((free.remove(at).0, item)),
            None => unmatched.push(item),
        }
    }
    for item in unmatched {
        if free.is_empty() {
            break;
        }
        out.push((free.remove(0).0, item));
    }
    out
}
