//! Strict fakes of the paid search APIs, written from each provider's published API
//! reference (request fields, auth header, response shape), not from our client:
//! Tavily (`POST /search`, `POST /extract`, `Authorization: Bearer`), Brave
//! (`GET /res/v1/web/search`, `X-Subscription-Token`), Firecrawl v2 (`POST /v2/search`,
//! `POST /v2/scrape`, `Authorization: Bearer`), Exa (`POST /search`, `POST /contents`,
//! `x-api-key`), Parallel (`POST /v1beta/search`, `POST /v1beta/extract`, `x-api-key`
//! and the `parallel-beta: search-extract-2025-10-10` header). A request with a wrong
//! key, a wrong method or path, a field the API does not define, a missing required
//! field or a value of the wrong type gets the provider's error status. The official
//! Python SDKs are run against the same fakes (tests/web_search.rs), which checks the
//! fakes from the other side.
#![allow(dead_code)]

use super::{json_reply, Reply, Request, Server};
use serde_json::{json, Map, Value};

pub const KEY: &str = "test-key-0123456789abcdef";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    Tavily,
    Brave,
    Firecrawl,
    Exa,
    Parallel,
}

type Checked = Result<Value, (u16, String)>;

fn reject(status: u16, why: impl Into<String>) -> (u16, String) {
    (status, why.into())
}

fn object(request: &Request) -> Result<Map<String, Value>, (u16, String)> {
    if !request
        .header("content-type")
        .is_some_and(|t| t.starts_with("application/json"))
    {
        return Err(reject(415, "Content-Type must be application/json"));
    }
    match request.json() {
        Some(Value::Object(map)) => Ok(map),
        _ => Err(reject(400, "the body must be a JSON object")),
    }
}

fn only_fields(body: &Map<String, Value>, allowed: &[&str]) -> Result<(), (u16, String)> {
    match body.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(unknown) => Err(reject(422, format!("unknown field `{unknown}`"))),
        None => Ok(()),
    }
}

fn string_field(body: &Map<String, Value>, key: &str) -> Result<String, (u16, String)> {
    body.get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
        .map(str::to_string)
        .ok_or_else(|| {
            reject(
                422,
                format!("`{key}` is required and must be a non-empty string"),
            )
        })
}

fn int_in(
    body: &Map<String, Value>,
    key: &str,
    low: i64,
    high: i64,
) -> Result<Option<i64>, (u16, String)> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_i64()
            .filter(|n| (low..=high).contains(n))
            .map(Some)
            .ok_or_else(|| reject(422, format!("`{key}` must be an integer in {low}..={high}"))),
    }
}

fn bool_field(body: &Map<String, Value>, key: &str) -> Result<(), (u16, String)> {
    match body.get(key) {
        None | Some(Value::Bool(_)) | Some(Value::Null) => Ok(()),
        _ => Err(reject(422, format!("`{key}` must be a boolean"))),
    }
}

fn url_list(
    body: &Map<String, Value>,
    key: &str,
    max: usize,
) -> Result<Vec<String>, (u16, String)> {
    let urls: Vec<String> = match body.get(key) {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| i.as_str().map(str::to_string))
            .collect::<Option<_>>()
            .ok_or_else(|| reject(422, format!("`{key}` must be a list of strings")))?,
        _ => return Err(reject(422, format!("`{key}` is required"))),
    };
    if urls.is_empty() || urls.len() > max {
        return Err(reject(422, format!("`{key}` takes 1 to {max} URLs")));
    }
    Ok(urls)
}

/// Deterministic hits for a query: `n` results about it.
pub fn hits(query: &str, n: usize) -> Vec<(String, String, String)> {
    (1..=n)
        .map(|i| {
            (
                format!("Result {i} for {query}"),
                format!("https://results.example/{i}"),
                format!("Snippet {i} about {query}"),
            )
        })
        .collect()
}

/// The page text a fake returns for a URL.
pub fn page_text(url: &str) -> String {
    format!("# Page\n\nFull text of {url}.\n")
}

fn bearer_ok(request: &Request) -> bool {
    request.header("authorization") == Some(&format!("Bearer {KEY}"))
}

fn tavily(request: &Request) -> Checked {
    if !bearer_ok(request) {
        return Err(reject(401, "Unauthorized: missing or invalid API key."));
    }
    let body = object(request)?;
    match (request.method.as_str(), request.path()) {
        ("POST", "/search") => {
            only_fields(
                &body,
                &[
                    "query",
                    "auto_parameters",
                    "topic",
                    "search_depth",
                    "chunks_per_source",
                    "max_results",
                    "time_range",
                    "days",
                    "start_date",
                    "end_date",
                    "include_answer",
                    "include_raw_content",
                    "include_images",
                    "include_image_descriptions",
                    "include_favicon",
                    "include_domains",
                    "exclude_domains",
                    "country",
                    "include_usage",
                    "exact_match",
                    "safe_search",
                ],
            )?;
            let query = string_field(&body, "query")?;
            let n = int_in(&body, "max_results", 0, 20)?.unwrap_or(5) as usize;
            bool_field(&body, "include_images")?;
            let results: Vec<Value> = hits(&query, n)
                .into_iter()
                .enumerate()
                .map(|(i, (title, url, content))| {
                    json!({"title": title, "url": url, "content": content, "score": 0.9 - i as f64 * 0.1, "raw_content": null, "favicon": null})
                })
                .collect();
            Ok(
                json!({"query": query, "follow_up_questions": null, "answer": null, "images": [],
                      "results": results, "response_time": 0.42, "request_id": "req-1"}),
            )
        }
        ("POST", "/extract") => {
            only_fields(
                &body,
                &[
                    "urls",
                    "query",
                    "chunks_per_source",
                    "extract_depth",
                    "include_images",
                    "include_favicon",
                    "format",
                    "timeout",
                    "include_usage",
                ],
            )?;
            let urls = url_list(&body, "urls", 20)?;
            bool_field(&body, "include_images")?;
            let (bad, good): (Vec<String>, Vec<String>) =
                urls.into_iter().partition(|u| u.contains("unreachable"));
            Ok(json!({
                "results": good.iter().map(|u| json!({"url": u, "raw_content": page_text(u), "images": []})).collect::<Vec<_>>(),
                "failed_results": bad.iter().map(|u| json!({"url": u, "error": "Failed to fetch url"})).collect::<Vec<_>>(),
                "response_time": 0.3, "request_id": "req-2"
            }))
        }
        _ => Err(reject(404, "Not Found")),
    }
}

fn brave(request: &Request) -> Checked {
    if request.header("x-subscription-token") != Some(KEY) {
        return Err(reject(401, "invalid subscription token"));
    }
    if (request.method.as_str(), request.path()) != ("GET", "/res/v1/web/search") {
        return Err(reject(404, "Not Found"));
    }
    let query = request
        .query("q")
        .filter(|q| !q.is_empty() && q.len() <= 400)
        .ok_or_else(|| reject(422, "`q` is required (at most 400 characters)"))?;
    let count = match request.query("count") {
        None => 20,
        Some(c) => c
            .parse::<usize>()
            .ok()
            .filter(|c| (1..=20).contains(c))
            .ok_or_else(|| reject(422, "`count` must be 1..=20"))?,
    };
    let results: Vec<Value> = hits(&query, count)
        .into_iter()
        .map(|(title, url, description)| json!({"type": "search_result", "title": title, "url": url, "description": description}))
        .collect();
    Ok(
        json!({"type": "search", "query": {"original": query}, "web": {"type": "search", "results": results}}),
    )
}

fn firecrawl(request: &Request) -> Checked {
    if !bearer_ok(request) {
        return Err(reject(401, "Unauthorized: Invalid token"));
    }
    let body = object(request)?;
    match (request.method.as_str(), request.path()) {
        ("POST", "/v2/search") => {
            only_fields(
                &body,
                &[
                    "query",
                    "limit",
                    "sources",
                    "categories",
                    "tbs",
                    "location",
                    "country",
                    "timeout",
                    "ignoreInvalidURLs",
                    "scrapeOptions",
                    "integration",
                    "origin",
                ],
            )?;
            let query = string_field(&body, "query")?;
            let n = int_in(&body, "limit", 1, 100)?.unwrap_or(5) as usize;
            let web: Vec<Value> = hits(&query, n)
                .into_iter()
                .enumerate()
                .map(|(i, (title, url, description))| json!({"url": url, "title": title, "description": description, "position": i + 1}))
                .collect();
            Ok(json!({"success": true, "data": {"web": web}, "creditsUsed": n, "id": "search-1"}))
        }
        ("POST", "/v2/scrape") => {
            only_fields(
                &body,
                &[
                    "url",
                    "formats",
                    "onlyMainContent",
                    "includeTags",
                    "excludeTags",
                    "maxAge",
                    "headers",
                    "waitFor",
                    "mobile",
                    "skipTlsVerification",
                    "timeout",
                    "parsers",
                    "actions",
                    "location",
                    "removeBase64Images",
                    "blockAds",
                    "proxy",
                    "storeInCache",
                    "zeroDataRetention",
                    "integration",
                    "origin",
                    "fastMode",
                    "useMock",
                    "minAge",
                    "lockdown",
                ],
            )?;
            let url = string_field(&body, "url")?;
            if let Some(formats) = body.get("formats") {
                let ok = formats.as_array().is_some_and(|f| {
                    f.iter()
                        .all(|x| x.is_string() || x.get("type").is_some_and(Value::is_string))
                });
                if !ok {
                    return Err(reject(
                        400,
                        "`formats` must be a list of format names or objects",
                    ));
                }
            }
            if url.contains("unreachable") {
                return Err(reject(500, "Failed to scrape URL"));
            }
            Ok(json!({"success": true, "data": {
                "markdown": page_text(&url),
                "metadata": {"title": format!("Title of {url}"), "sourceURL": url, "url": url, "statusCode": 200}
            }}))
        }
        _ => Err(reject(404, "Not Found")),
    }
}

fn exa(request: &Request) -> Checked {
    if request.header("x-api-key") != Some(KEY) {
        return Err(reject(401, "Invalid API key"));
    }
    let body = object(request)?;
    match (request.method.as_str(), request.path()) {
        ("POST", "/search") => {
            only_fields(
                &body,
                &[
                    "query",
                    "type",
                    "category",
                    "userLocation",
                    "numResults",
                    "includeDomains",
                    "excludeDomains",
                    "startCrawlDate",
                    "endCrawlDate",
                    "startPublishedDate",
                    "endPublishedDate",
                    "includeText",
                    "excludeText",
                    "context",
                    "moderation",
                    "contents",
                    "useAutoprompt",
                    "flags",
                    "additionalQueries",
                    "systemPrompt",
                    "outputSchema",
                    "stream",
                ],
            )?;
            let query = string_field(&body, "query")?;
            let n = int_in(&body, "numResults", 1, 100)?.unwrap_or(10) as usize;
            let highlights = body
                .get("contents")
                .and_then(|c| c.get("highlights"))
                .is_some();
            let results: Vec<Value> = hits(&query, n)
                .into_iter()
                .map(|(title, url, snippet)| {
                    let mut r = json!({"id": url, "url": url, "title": title, "publishedDate": null, "author": null});
                    if highlights {
                        r["highlights"] = json!([snippet]);
                        r["highlightScores"] = json!([0.5]);
                    }
                    r
                })
                .collect();
            Ok(
                json!({"requestId": "req-exa-1", "resolvedSearchType": "neural", "results": results}),
            )
        }
        ("POST", "/contents") => {
            only_fields(
                &body,
                &[
                    "urls",
                    "ids",
                    "text",
                    "highlights",
                    "summary",
                    "livecrawl",
                    "livecrawlTimeout",
                    "maxAgeHours",
                    "subpages",
                    "subpageTarget",
                    "extras",
                    "context",
                    "flags",
                ],
            )?;
            let urls = url_list(
                &body,
                if body.contains_key("urls") {
                    "urls"
                } else {
                    "ids"
                },
                100,
            )?;
            let (bad, good): (Vec<String>, Vec<String>) =
                urls.into_iter().partition(|u| u.contains("unreachable"));
            let mut statuses: Vec<Value> = good
                .iter()
                .map(|u| json!({"id": u, "status": "success"}))
                .collect();
            statuses.extend(bad.iter().map(|u| json!({"id": u, "status": "error", "error": {"tag": "CRAWL_NOT_FOUND", "httpStatusCode": 404}})));
            Ok(json!({
                "requestId": "req-exa-2",
                "results": good.iter().map(|u| json!({"id": u, "url": u, "title": format!("Title of {u}"), "text": page_text(u)})).collect::<Vec<_>>(),
                "statuses": statuses
            }))
        }
        _ => Err(reject(404, "Not Found")),
    }
}

fn parallel(request: &Request) -> Checked {
    if request.header("x-api-key") != Some(KEY) {
        return Err(reject(401, "Invalid API key"));
    }
    if !request.header("parallel-beta").is_some_and(|b| {
        b.split(',')
            .any(|x| x.trim() == "search-extract-2025-10-10")
    }) {
        return Err(reject(
            400,
            "this endpoint needs the parallel-beta: search-extract-2025-10-10 header",
        ));
    }
    let body = object(request)?;
    match (request.method.as_str(), request.path()) {
        ("POST", "/v1beta/search") => {
            only_fields(
                &body,
                &[
                    "objective",
                    "search_queries",
                    "mode",
                    "max_results",
                    "excerpts",
                    "source_policy",
                    "fetch_policy",
                    "max_chars_per_result",
                    "processor",
                ],
            )?;
            let objective = body
                .get("objective")
                .and_then(Value::as_str)
                .map(str::to_string);
            let queries = body
                .get("search_queries")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let query = objective
                .or_else(|| queries.first().and_then(Value::as_str).map(str::to_string))
                .ok_or_else(|| reject(422, "`objective` or `search_queries` is required"))?;
            if let Some(mode) = body.get("mode").and_then(Value::as_str) {
                if !["one-shot", "agentic", "fast"].contains(&mode) {
                    return Err(reject(422, "`mode` must be one-shot, agentic or fast"));
                }
            }
            let n = int_in(&body, "max_results", 1, 40)?.unwrap_or(10) as usize;
            let results: Vec<Value> = hits(&query, n)
                .into_iter()
                .map(|(title, url, excerpt)| json!({"url": url, "title": title, "publish_date": null, "excerpts": [excerpt]}))
                .collect();
            Ok(
                json!({"search_id": "search_1", "results": results, "warnings": null, "usage": [{"name": "sku_search", "count": 1}]}),
            )
        }
        ("POST", "/v1beta/extract") => {
            only_fields(
                &body,
                &[
                    "urls",
                    "objective",
                    "search_queries",
                    "fetch_policy",
                    "excerpts",
                    "full_content",
                ],
            )?;
            let urls = url_list(&body, "urls", 20)?;
            let (bad, good): (Vec<String>, Vec<String>) =
                urls.into_iter().partition(|u| u.contains("unreachable"));
            Ok(json!({
                "extract_id": "extract_1",
                "results": good.iter().map(|u| json!({"url": u, "title": format!("Title of {u}"), "publish_date": null, "excerpts": [], "full_content": page_text(u)})).collect::<Vec<_>>(),
                "errors": bad.iter().map(|u| json!({"url": u, "error_type": "fetch_error", "http_status_code": 404, "content": "Page not found"})).collect::<Vec<_>>(),
                "warnings": null, "usage": [{"name": "sku_extract_excerpts", "count": 1}]
            }))
        }
        _ => Err(reject(404, "Not Found")),
    }
}

/// A fake of `provider` on a free loopback port.
pub fn start(provider: Provider) -> Server {
    Server::start(move |request: &Request| -> Reply {
        let checked = match provider {
            Provider::Tavily => tavily(request),
            Provider::Brave => brave(request),
            Provider::Firecrawl => firecrawl(request),
            Provider::Exa => exa(request),
            Provider::Parallel => parallel(request),
        };
        match checked {
            Ok(body) => json_reply(200, &body),
            Err((status, why)) => json_reply(
                status,
                &json!({"error": why, "detail": why, "success": false}),
            ),
        }
    })
}
