//! The keyless `local` extract backend: the page is fetched through the network layer
//! (pinned, SSRF-checked connections, redirects screened, size and time capped) and
//! turned into markdown here: readability picks the article, or the whole body when
//! no article stands out. PDFs come back as their text; plain text, JSON and XML as
//! they are.

use hermes_net::{FetchError, Fetcher, Limits, Refusal};

pub struct Page {
    pub url: String,
    pub title: String,
    pub content: String,
}

fn is_html(content_type: &str, body: &[u8]) -> bool {
    if content_type.contains("html") {
        return true;
    }
    if !content_type.is_empty() {
        return false;
    }
    let start = String::from_utf8_lossy(&body[..body.len().min(512)]).to_lowercase();
    let start = start.trim_start();
    start.starts_with("<!doctype html") || start.starts_with("<html") || start.starts_with('<')
}

/// Markdown of an HTML page and its title.
pub fn html_to_markdown(html: &str, url: &str) -> (String, String) {
    let config = dom_smoothie::Config {
        text_mode: dom_smoothie::TextMode::Markdown,
        ..Default::default()
    };
    if let Ok(article) = dom_smoothie::Readability::new(html, Some(url), Some(config))
        .and_then(|mut reader| reader.parse())
    {
        let text = article.text_content.trim().to_string();
        if !text.is_empty() {
            return (article.title, text);
        }
    }
    // No article stood out (a short page, a listing): the whole body without scripts.
    let document = dom_query::Document::from(html);
    let title = document.select("title").text().trim().to_string();
    let skip = ["script", "style", "meta", "head", "noscript", "template"];
    let text = match document.body() {
        Some(body) => body.md(Some(&skip)),
        None => document.md(Some(&skip)),
    };
    (title, text.trim().to_string())
}

/// The text of a PDF document. The parser has panicked on malformed files before: a
/// panic is caught and reported as an unreadable document.
fn pdf_text(body: &[u8]) -> Result<String, Failure> {
    let parsed = std::panic::catch_unwind(|| pdf_extract::extract_text_from_mem(body));
    match parsed {
        Ok(Ok(text)) if !text.trim().is_empty() => Ok(text.trim().to_string()),
        Ok(Ok(_)) => Err(Failure::Other(
            "The PDF has no extractable text (a scan?); use vision_analyze on its pages".into(),
        )),
        Ok(Err(e)) => Err(Failure::Other(format!("Could not read the PDF: {e}"))),
        Err(_) => Err(Failure::Other(
            "Could not read the PDF: the document is malformed".into(),
        )),
    }
}

/// Why a page could not be read: refused by the network policy (on any redirect
/// hop), or anything else.
pub enum Failure {
    Refused(Refusal),
    Other(String),
}

impl From<String> for Failure {
    fn from(why: String) -> Failure {
        Failure::Other(why)
    }
}

/// Fetches `url` and returns its readable content.
pub fn extract(fetcher: &Fetcher, url: &str, limits: &Limits) -> Result<Page, Failure> {
    let fetched = fetcher.get(url, limits).map_err(|e| match e {
        FetchError::Refused(refusal) => Failure::Refused(refusal),
        other => Failure::Other(other.to_string()),
    })?;
    if fetched.status >= 400 {
        return Err(format!(
            "The server answered HTTP {} for {}",
            fetched.status, fetched.url
        )
        .into());
    }
    let content_type = fetched
        .content_type
        .as_deref()
        .unwrap_or("")
        .to_ascii_lowercase();
    let body = &fetched.body;
    if content_type.contains("pdf") || body.starts_with(b"%PDF-") {
        return Ok(Page {
            content: pdf_text(body)?,
            url: fetched.url,
            title: String::new(),
        });
    }
    if is_html(&content_type, body) {
        let html = String::from_utf8_lossy(body);
        let (title, content) = html_to_markdown(&html, &fetched.url);
        return Ok(Page {
            url: fetched.url,
            title,
            content,
        });
    }
    let textual = content_type.starts_with("text/")
        || ["json", "xml", "javascript", "yaml", "markdown", "csv"]
            .iter()
            .any(|t| content_type.contains(t));
    if !textual {
        return Err(format!(
            "The URL returned {content_type}, not a page or text; use vision_analyze for images"
        )
        .into());
    }
    Ok(Page {
        url: fetched.url,
        title: String::new(),
        content: String::from_utf8_lossy(body).into_owned(),
    })
}
