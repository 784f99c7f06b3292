//! OpenAI's Images API: `POST {base}/images/generations` (JSON) for text-to-image and
//! `POST {base}/images/edits` (multipart, `image[]` parts) for edits; the image comes
//! back as `b64_json` (or, from older models, a URL).

use serde_json::{json, Value};
use std::time::Duration;

pub const API_MODEL: &str = "gpt-image-2";
/// Tiers: the same API model at three qualities.
pub const TIERS: [(&str, &str); 3] = [
    ("gpt-image-2-low", "low"),
    ("gpt-image-2-medium", "medium"),
    ("gpt-image-2-high", "high"),
];
/// gpt-image-2 edits take at most this many images.
pub const MAX_SOURCES: usize = 16;

pub fn size(aspect: &str) -> &'static str {
    match aspect {
        "landscape" => "1536x1024",
        "portrait" => "1024x1536",
        _ => "1024x1024",
    }
}

pub fn base_url() -> String {
    std::env::var("OPENAI_BASE_URL")
        .ok()
        .map(|b| b.trim().trim_end_matches('/').to_string())
        .filter(|b| !b.is_empty())
        .unwrap_or_else(|| "https://api.openai.com/v1".into())
}

/// What came back: base64 image data, or a URL to fetch.
pub enum Output {
    Base64(String),
    Url(String),
}

pub struct Answer {
    pub output: Output,
    pub revised_prompt: Option<String>,
}

fn parse(mut response: ureq::http::Response<ureq::Body>, key: &str) -> Result<Answer, String> {
    let status = response.status().as_u16();
    let text = response
        .body_mut()
        .with_config()
        .limit(128 * 1024 * 1024)
        .read_to_string()
        .map_err(|e| format!("cannot read OpenAI's answer: {e}"))?;
    let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    if !(200..300).contains(&status) {
        let message = body
            .pointer("/error/message")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| text.chars().take(300).collect());
        let message = if key.len() >= 4 {
            message.replace(key, "***")
        } else {
            message
        };
        return Err(format!(
            "HTTP {status}: {}",
            hermes_runtime::redact::redact_secrets(&message)
        ));
    }
    let first = body
        .pointer("/data/0")
        .ok_or("OpenAI returned no image data")?;
    let revised_prompt = first
        .get("revised_prompt")
        .and_then(Value::as_str)
        .map(str::to_string);
    let output = if let Some(b64) = first.get("b64_json").and_then(Value::as_str) {
        Output::Base64(b64.to_string())
    } else if let Some(url) = first.get("url").and_then(Value::as_str) {
        Output::Url(url.to_string())
    } else {
        return Err("OpenAI response contained neither b64_json nor URL".into());
    };
    Ok(Answer {
        output,
        revised_prompt,
    })
}

pub fn generate(
    key: &str,
    prompt: &str,
    size: &str,
    quality: &str,
    timeout: Duration,
) -> Result<Answer, String> {
    let base = base_url();
    let body =
        json!({"model": API_MODEL, "prompt": prompt, "size": size, "n": 1, "quality": quality});
    let response = hermes_net::operator_agent(timeout)
        .post(&format!("{base}/images/generations"))
        .header("Authorization", &format!("Bearer {key}"))
        .header("Content-Type", "application/json")
        .send(body.to_string())
        .map_err(|e| format!("cannot reach OpenAI at {base}: {e}"))?;
    parse(response, key)
}

/// One source image of an edit: bytes, file name, media type.
pub struct Source {
    pub bytes: Vec<u8>,
    pub name: String,
    pub mime: String,
}

pub fn edit(
    key: &str,
    prompt: &str,
    size: &str,
    quality: &str,
    sources: &[Source],
    timeout: Duration,
) -> Result<Answer, String> {
    let base = base_url();
    let boundary = format!("hermes-{}", hermes_environments::output::random_hex(24));
    let mut body: Vec<u8> = Vec::new();
    let mut field = |name: &str, value: &str| {
        body.extend_from_slice(
            format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n")
                .as_bytes(),
        );
    };
    field("model", API_MODEL);
    field("prompt", prompt);
    field("size", size);
    field("quality", quality);
    field("n", "1");
    let image_field = if sources.len() > 1 {
        "image[]"
    } else {
        "image"
    };
    for source in sources {
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"{image_field}\"; filename=\"{}\"\r\nContent-Type: {}\r\n\r\n",
                source.name, source.mime
            )
            .as_bytes(),
        );
        body.extend_from_slice(&source.bytes);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    let response = hermes_net::operator_agent(timeout)
        .post(&format!("{base}/images/edits"))
        .header("Authorization", &format!("Bearer {key}"))
        .header(
            "Content-Type",
            &format!("multipart/form-data; boundary={boundary}"),
        )
        .send(&body[..])
        .map_err(|e| format!("cannot reach OpenAI at {base}: {e}"))?;
    parse(response, key)
}
