//! A stand-in for an OpenAI-compatible chat-completions endpoint, written from
//! OpenAI's published API definition of `POST /v1/chat/completions` (the request body
//! `CreateChatCompletionRequest`, user content parts `text` and `image_url`, the
//! `chat.completion` response object). It checks every request strictly (unknown
//! fields, wrong types, a part that is not one of the defined shapes, an image URL that
//! is not a base64 data URL of an image) and answers 400 with OpenAI's error object
//! when a check fails. A valid request is answered with what the "model" saw: the
//! prompt, and each image's type and size as decoded here.
#![allow(dead_code)]

use crate::web_support::{json_reply, Reply, Request, Server};
use base64::Engine;
use serde_json::{json, Value};

pub const KEY: &str = "sk-test-vision-0123456789abcdef";

const REQUEST_FIELDS: &[&str] = &[
    "model",
    "messages",
    "temperature",
    "max_tokens",
    "max_completion_tokens",
    "top_p",
    "n",
    "stream",
    "stop",
    "presence_penalty",
    "frequency_penalty",
    "seed",
    "user",
    "tools",
    "tool_choice",
    "response_format",
    "logprobs",
    "top_logprobs",
    "metadata",
    "store",
    "parallel_tool_calls",
    "reasoning_effort",
    "modalities",
    "service_tier",
];

fn bad(message: impl Into<String>) -> Reply {
    json_reply(
        400,
        &json!({"error": {"message": message.into(), "type": "invalid_request_error", "param": null, "code": null}}),
    )
}

/// What one image part held: its media type and decoded size.
pub fn describe_image(url: &str) -> Result<String, String> {
    let rest = url
        .strip_prefix("data:")
        .ok_or("image_url.url is not a data URL")?;
    let (header, data) = rest.split_once(',').ok_or("data URL without ','")?;
    let mime = header
        .strip_suffix(";base64")
        .ok_or("data URL not base64")?;
    if !["image/png", "image/jpeg", "image/gif", "image/webp"].contains(&mime) {
        return Err(format!("unsupported image type {mime}"));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data)
        .map_err(|e| format!("invalid base64: {e}"))?;
    let image = image::load_from_memory(&bytes).map_err(|e| format!("not an image: {e}"))?;
    let format = image::guess_format(&bytes).map_err(|e| e.to_string())?;
    let declared = match format {
        image::ImageFormat::Png => "image/png",
        image::ImageFormat::Jpeg => "image/jpeg",
        image::ImageFormat::Gif => "image/gif",
        image::ImageFormat::WebP => "image/webp",
        _ => "other",
    };
    if declared != mime {
        return Err(format!("declared {mime} but the bytes are {declared}"));
    }
    Ok(format!(
        "{mime} {}x{} {}b",
        image.width(),
        image.height(),
        url.len()
    ))
}

fn check_part(part: &Value) -> Result<Option<String>, String> {
    let object = part.as_object().ok_or("a content part is not an object")?;
    match object.get("type").and_then(Value::as_str) {
        Some("text") => {
            if object.keys().any(|k| k != "type" && k != "text") {
                return Err("unknown field in a text part".into());
            }
            object
                .get("text")
                .and_then(Value::as_str)
                .ok_or("text part without a string text")?;
            Ok(None)
        }
        Some("image_url") => {
            if object.keys().any(|k| k != "type" && k != "image_url") {
                return Err("unknown field in an image_url part".into());
            }
            let image = object
                .get("image_url")
                .and_then(Value::as_object)
                .ok_or("image_url must be an object with url")?;
            if image.keys().any(|k| k != "url" && k != "detail") {
                return Err("unknown field in image_url".into());
            }
            if let Some(detail) = image.get("detail") {
                if !["auto", "low", "high"].contains(&detail.as_str().unwrap_or("")) {
                    return Err("image_url.detail must be auto, low or high".into());
                }
            }
            let url = image
                .get("url")
                .and_then(Value::as_str)
                .ok_or("image_url.url must be a string")?;
            describe_image(url).map(Some)
        }
        other => Err(format!("unknown content part type {other:?}")),
    }
}

/// Checks a request; `Ok` with the prompt texts and image descriptions.
pub fn check(req: &Request) -> Result<(Vec<String>, Vec<String>, Value), String> {
    if req.method != "POST" || req.path() != "/v1/chat/completions" {
        return Err(format!("no route {} {}", req.method, req.path()));
    }
    if req.header("authorization") != Some(&format!("Bearer {KEY}")) {
        return Err("Incorrect API key provided".into());
    }
    if !req
        .header("content-type")
        .is_some_and(|c| c.starts_with("application/json"))
    {
        return Err("the body must be JSON".into());
    }
    let body = req.json().ok_or("the body is not JSON")?;
    let object = body.as_object().ok_or("the body is not an object")?;
    if let Some(unknown) = object
        .keys()
        .find(|k| !REQUEST_FIELDS.contains(&k.as_str()))
    {
        return Err(format!("Unrecognized request argument supplied: {unknown}"));
    }
    object
        .get("model")
        .and_then(Value::as_str)
        .filter(|m| !m.is_empty())
        .ok_or("model must be a non-empty string")?;
    if let Some(t) = object.get("temperature") {
        let t = t.as_f64().ok_or("temperature must be a number")?;
        if !(0.0..=2.0).contains(&t) {
            return Err("temperature must be within [0, 2]".into());
        }
    }
    if let Some(n) = object.get("max_tokens") {
        n.as_u64().ok_or("max_tokens must be an integer")?;
    }
    let messages = object
        .get("messages")
        .and_then(Value::as_array)
        .filter(|m| !m.is_empty())
        .ok_or("messages must be a non-empty array")?;
    let (mut texts, mut images) = (Vec::new(), Vec::new());
    for message in messages {
        let role = message
            .get("role")
            .and_then(Value::as_str)
            .ok_or("a message has no role")?;
        if !["system", "user", "assistant", "tool", "developer"].contains(&role) {
            return Err(format!("unknown role {role}"));
        }
        match message.get("content") {
            Some(Value::String(text)) => texts.push(text.clone()),
            Some(Value::Array(parts)) => {
                for part in parts {
                    match check_part(part)? {
                        Some(image) => images.push(image),
                        None => texts.push(part["text"].as_str().unwrap_or("").to_string()),
                    }
                }
            }
            Some(Value::Null) | None if role == "assistant" => {}
            _ => {
                return Err(format!(
                    "{role} message content must be a string or an array"
                ))
            }
        }
    }
    Ok((texts, images, body))
}

pub fn completion(model: &str, content: &str) -> Value {
    json!({
        "id": "chatcmpl-test", "object": "chat.completion", "created": 1_700_000_000,
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content, "refusal": null},
                     "logprobs": null, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    })
}

/// The stand-in's answer to one request: a valid request is answered
/// "I see <images> | <last text>".
pub fn answer(req: &Request) -> Reply {
    match check(req) {
        Ok((texts, images, body)) => {
            let answer = format!(
                "I see {} | {}",
                images.join(", "),
                texts.last().cloned().unwrap_or_default()
            );
            json_reply(
                200,
                &completion(body["model"].as_str().unwrap_or(""), &answer),
            )
        }
        Err(why) if why.starts_with("Incorrect API key") => json_reply(
            401,
            &json!({"error": {"message": format!("Incorrect API key provided: {}", req.header("authorization").unwrap_or("")), "type": "invalid_request_error", "code": "invalid_api_key"}}),
        ),
        Err(why) => bad(why),
    }
}

/// The stand-in.
pub fn start() -> Server {
    Server::start(answer)
}

/// The base64 data URLs of a request's image parts.
pub fn image_urls(req: &Request) -> Vec<String> {
    let Some(body) = req.json() else {
        return Vec::new();
    };
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter_map(|p| p.pointer("/image_url/url").and_then(Value::as_str))
        .map(str::to_string)
        .collect()
}

/// A provider with a per-image size limit: an image whose data URL is longer than
/// `max_url_bytes` is refused with 400 and the kind of message providers give
/// ("image exceeds 5 MB maximum: ..."); anything else as [`answer`].
pub fn start_with_image_limit(max_url_bytes: usize) -> Server {
    Server::start(move |req: &Request| -> Reply {
        if let Some(url) = image_urls(req)
            .into_iter()
            .find(|u| u.len() > max_url_bytes)
        {
            return json_reply(
                400,
                &json!({"error": {"message": format!("messages.0.content.1.image_url: image exceeds {max_url_bytes} bytes maximum: {} bytes > {max_url_bytes} bytes", url.len()), "type": "invalid_request_error", "param": null, "code": null}}),
            );
        }
        answer(req)
    })
}
