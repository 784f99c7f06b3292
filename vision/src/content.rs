//! Tool results that carry an image for the model itself.
//!
//! A tool returns the envelope [`multimodal_result`] builds (a JSON object, so it is a
//! valid result string everywhere). A caller that can put images in front of its
//! model unwraps it with [`split_multimodal`]: MCP as `image` content, `serve` as an
//! OpenAI content array, the agent loop as a user message with the image. Any other
//! caller passes the JSON on, whose `text_summary` says what happened.

use crate::prepare::PreparedImage;
use serde_json::{json, Value};

/// The key that marks the envelope.
pub const MULTIMODAL_KEY: &str = "_multimodal";

/// `{"_multimodal": true, "content": [{"type": "text", ...}, {"type": "image_url",
/// "image_url": {"url": "data:..."}}], "text_summary": ..., "meta": {...}}`.
pub fn multimodal_result(
    text: &str,
    image: &PreparedImage,
    text_summary: &str,
    meta: Value,
) -> Value {
    json!({
        MULTIMODAL_KEY: true,
        "content": [
            {"type": "text", "text": text},
            {"type": "image_url", "image_url": {"url": image.data_url()}},
        ],
        "text_summary": text_summary,
        "meta": meta,
    })
}

/// One image of an unwrapped envelope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImagePart {
    pub mime: String,
    /// The image, base64-encoded.
    pub data: String,
}

impl ImagePart {
    pub fn data_url(&self) -> String {
        format!("data:{};base64,{}", self.mime, self.data)
    }

    /// MCP's image content: `{"type": "image", "data": ..., "mimeType": ...}`.
    pub fn mcp_content(&self) -> Value {
        json!({"type": "image", "data": self.data, "mimeType": self.mime})
    }

    /// The OpenAI chat content part: `{"type": "image_url", "image_url": {"url": ...}}`.
    pub fn openai_part(&self) -> Value {
        json!({"type": "image_url", "image_url": {"url": self.data_url()}})
    }
}

/// The text and images of a result string, when it is the envelope; `None` for any
/// other result. Image parts that are not base64 data URLs are left out.
pub fn split_multimodal(result: &str) -> Option<(String, Vec<ImagePart>)> {
    if !result.trim_start().starts_with('{') || !result.contains(MULTIMODAL_KEY) {
        return None;
    }
    let value: Value = serde_json::from_str(result).ok()?;
    if value.get(MULTIMODAL_KEY) != Some(&Value::Bool(true)) {
        return None;
    }
    let mut texts = Vec::new();
    let mut images = Vec::new();
    for part in value.get("content")?.as_array()? {
        match part.get("type").and_then(Value::as_str) {
            Some("text") => {
                if let Some(t) = part.get("text").and_then(Value::as_str) {
                    texts.push(t.to_string());
                }
            }
            Some("image_url") => {
                let url = part
                    .pointer("/image_url/url")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let Some(rest) = url.strip_prefix("data:") else {
                    continue;
                };
                let Some((header, data)) = rest.split_once(',') else {
                    continue;
                };
                let Some(mime) = header.strip_suffix(";base64") else {
                    continue;
                };
                images.push(ImagePart {
                    mime: mime.to_string(),
                    data: data.to_string(),
                });
            }
            _ => {}
        }
    }
    Some((texts.join("\n"), images))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prepare::{prepare, Caps};

    #[test]
    fn the_envelope_round_trips() {
        let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0\x1f\x15\xc4\x89\0\0\0\rIDATx\x9cc\xf8\xcf\xc0\xf0\x1f\0\x05\0\x01\xff\x89\x99=\x1d\0\0\0\0IEND\xaeB`\x82";
        let image = prepare(png, &Caps::default()).unwrap();
        let result = multimodal_result("look", &image, "an image", json!({"n": 1})).to_string();
        let (text, images) = split_multimodal(&result).unwrap();
        assert_eq!(text, "look");
        assert_eq!(images.len(), 1);
        assert_eq!(images[0].mime, "image/png");
        assert_eq!(images[0].data_url(), image.data_url());
        assert_eq!(images[0].mcp_content()["mimeType"], "image/png");
        assert!(split_multimodal(r#"{"success": true}"#).is_none());
        assert!(split_multimodal(r#"{"_multimodal": false, "content": []}"#).is_none());
    }
}
