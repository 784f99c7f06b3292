//! Between MCP tool results and this runtime's result strings.
//!
//! Client side, an MCP `CallToolResult` becomes:
//! - `isError: true` → `{"error": <the text>}`;
//! - text only → `{"result": <the texts joined by newlines>}` (plus `structured` when
//!   the server sent `structuredContent` and no text);
//! - any image → the multimodal envelope
//!   `{"_multimodal": true, "content": [{"type": "text", ...}, {"type": "image_url", "image_url": {"url": "data:<mime>;base64,..."}}], "text_summary": ...}`.
//!
//! Server side, a result string becomes one text block, an envelope becomes text and
//! image blocks (MCP blocks in it, audio and resources, pass as they are), and a
//! result whose JSON has a non-empty `error` is `isError: true`. The files a result
//! names with `MEDIA:` tags are found by [`media_paths`] (the server attaches them),
//! and files under the cache folder it names by [`stored_paths`] (the server links them).

use serde_json::{json, Map, Value};

/// Text of an MCP content block that is not an image (text, resource, audio, link).
fn block_text(block: &Value) -> Option<String> {
    match block.get("type").and_then(Value::as_str)? {
        "text" => block.get("text").and_then(Value::as_str).map(str::to_owned),
        "resource" => {
            let resource = block.get("resource")?;
            resource
                .get("text")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .or_else(|| {
                    resource
                        .get("uri")
                        .and_then(Value::as_str)
                        .map(|uri| format!("[resource {uri}]"))
                })
        }
        "resource_link" => {
            let uri = block.get("uri").and_then(Value::as_str).unwrap_or_default();
            Some(format!("[resource link {uri}]"))
        }
        "audio" => Some(format!(
            "[audio {} omitted]",
            block
                .get("mimeType")
                .and_then(Value::as_str)
                .unwrap_or("audio")
        )),
        _ => None,
    }
}

/// An MCP `CallToolResult` (as JSON) → the handler's answer (a string or an envelope).
pub fn mcp_result_to_value(result: &Value) -> Value {
    let blocks = result
        .get("content")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let texts: Vec<String> = blocks.iter().filter_map(block_text).collect();
    let joined = texts.join("\n");
    if result.get("isError") == Some(&Value::Bool(true)) {
        let message = if joined.trim().is_empty() {
            "the MCP tool reported an error without a message".to_string()
        } else {
            joined
        };
        return Value::String(json!({ "error": message }).to_string());
    }
    let has_image = blocks
        .iter()
        .any(|b| b.get("type").and_then(Value::as_str) == Some("image"));
    if has_image {
        let mut content = Vec::new();
        for block in &blocks {
            if block.get("type").and_then(Value::as_str) == Some("image") {
                let mime = block
                    .get("mimeType")
                    .and_then(Value::as_str)
                    .unwrap_or("image/png");
                let data = block
                    .get("data")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                content.push(json!({"type": "image_url", "image_url": {"url": format!("data:{mime};base64,{data}")}}));
            } else if let Some(text) = block_text(block) {
                content.push(json!({"type": "text", "text": text}));
            }
        }
        let images = content.iter().filter(|c| c["type"] == "image_url").count();
        let summary = if joined.is_empty() {
            format!("[{images} image(s)]")
        } else {
            format!("{joined}\n[{images} image(s)]")
        };
        return json!({"_multimodal": true, "content": content, "text_summary": summary});
    }
    let mut out = Map::new();
    out.insert("result".into(), Value::String(joined));
    // Servers usually repeat structured content as text; it is added only when the
    // text says nothing.
    if let Some(structured) = result
        .get("structuredContent")
        .filter(|v| !v.is_null() && texts.is_empty())
    {
        out.insert("structured".into(), structured.clone());
    }
    Value::String(Value::Object(out).to_string())
}

/// The files a result hands over with `MEDIA:<path>` lines in its `media_tag` (the
/// tag chat platforms deliver as attachments: text_to_speech's audio).
pub fn media_paths(result: &str) -> Vec<std::path::PathBuf> {
    if !result.contains("MEDIA:") {
        return Vec::new();
    }
    #[derive(serde::Deserialize)]
    struct Tagged {
        media_tag: Option<String>,
    }
    let Ok(Tagged {
        media_tag: Some(tag),
    }) = serde_json::from_str::<Tagged>(result)
    else {
        return Vec::new();
    };
    tag.lines()
        .filter_map(|line| line.trim().strip_prefix("MEDIA:"))
        .map(str::trim)
        .filter(|path| path.starts_with('/'))
        .map(std::path::PathBuf::from)
        .collect()
}

/// The files under `root` a result object names in its top-level string fields (a
/// spilled result's `path`, a terminal's `full_output_path`, a generated file's
/// `file_path`), that exist.
pub fn stored_paths(result: &str, root: &std::path::Path) -> Vec<std::path::PathBuf> {
    let Some(root) = root.to_str().filter(|r| result.contains(*r)) else {
        return Vec::new();
    };
    let Ok(Value::Object(fields)) = serde_json::from_str::<Value>(result) else {
        return Vec::new();
    };
    let mut found: Vec<std::path::PathBuf> = fields
        .values()
        .filter_map(Value::as_str)
        .filter(|text| text.starts_with(root) && text[root.len()..].starts_with('/'))
        .map(std::path::PathBuf::from)
        .filter(|path| path.is_file())
        .collect();
    found.dedup();
    found
}

/// Whether a result string reports an error (`{"error": <non-empty>}`).
pub fn is_error_result(result: &str) -> bool {
    matches!(
        hermes_runtime::hooks::derive_status(result).0,
        hermes_runtime::hooks::CallStatus::Error
    )
}

/// The keys of a result object that decide how it is served; every other value is
/// skipped without being built.
#[derive(serde::Deserialize)]
struct ResultKeys {
    error: Option<Value>,
    #[serde(rename = "_multimodal")]
    multimodal: Option<serde::de::IgnoredAny>,
}

/// A chat-completions content part of a result (text, or an image as a data URL), or an
/// MCP block a plugin or an MCP server gave, as an MCP content block.
pub(crate) fn content_part(part: &Value) -> Value {
    match part.get("type").and_then(Value::as_str) {
        Some("text") => json!({"type": "text", "text": part["text"].as_str().unwrap_or_default()}),
        Some("image_url") => {
            let url = part["image_url"]["url"].as_str().unwrap_or_default();
            match url
                .strip_prefix("data:")
                .and_then(|rest| rest.split_once(";base64,"))
            {
                Some((mime, data)) => json!({"type": "image", "mimeType": mime, "data": data}),
                None => json!({"type": "text", "text": format!("[image {url}]")}),
            }
        }
        Some("image" | "audio" | "resource" | "resource_link") => part.clone(),
        _ => json!({"type": "text", "text": part.to_string()}),
    }
}

/// A result string → an MCP `CallToolResult` as JSON.
pub fn result_string_to_mcp(result: &str) -> Value {
    // Most results are objects that are no envelope: their `error` decides, read
    // without building the rest (as `is_error_result` would judge it). Anything else
    // (an envelope, a duplicate key, not an object) takes the general way.
    if result.trim_start().starts_with('{') {
        if let Ok(ResultKeys {
            error,
            multimodal: None,
        }) = serde_json::from_str::<ResultKeys>(result)
        {
            let is_error = !matches!(error, None | Some(Value::Bool(false)))
                && error.as_ref().and_then(Value::as_str) != Some("");
            return json!({"content": [{"type": "text", "text": result}], "isError": is_error});
        }
    }
    if let Ok(envelope) = serde_json::from_str::<Value>(result) {
        if hermes_runtime::dispatch::is_multimodal_envelope(&envelope) {
            let mut content: Vec<Value> = envelope["content"]
                .as_array()
                .into_iter()
                .flatten()
                .map(content_part)
                .collect();
            if content.is_empty() {
                content.push(json!({"type": "text", "text": envelope["text_summary"].as_str().unwrap_or_default()}));
            }
            return json!({"content": content, "isError": false});
        }
    }
    json!({"content": [{"type": "text", "text": result}], "isError": is_error_result(result)})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_error_and_image_results() {
        let text = mcp_result_to_value(
            &json!({"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}),
        );
        assert_eq!(text, Value::String(r#"{"result":"a\nb"}"#.into()));
        let error = mcp_result_to_value(
            &json!({"content": [{"type": "text", "text": "bad"}], "isError": true}),
        );
        assert_eq!(error, Value::String(r#"{"error":"bad"}"#.into()));
        let image = mcp_result_to_value(
            &json!({"content": [{"type": "text", "text": "see"}, {"type": "image", "mimeType": "image/png", "data": "AAAA"}]}),
        );
        assert!(hermes_runtime::dispatch::is_multimodal_envelope(&image));
        assert_eq!(
            image["content"][1]["image_url"]["url"],
            "data:image/png;base64,AAAA"
        );
        let back = result_string_to_mcp(&image.to_string());
        assert_eq!(
            back["content"][1],
            json!({"type": "image", "mimeType": "image/png", "data": "AAAA"})
        );
    }

    #[test]
    fn media_tags_name_files() {
        let tts = json!({"success": true, "file_path": "/h/cache/audio/a.ogg",
            "media_tag": "[[audio_as_voice]]\nMEDIA:/h/cache/audio/a.ogg"})
        .to_string();
        assert_eq!(
            media_paths(&tts),
            vec![std::path::PathBuf::from("/h/cache/audio/a.ogg")]
        );
        assert!(media_paths(r#"{"output": "MEDIA:/etc/passwd"}"#).is_empty());
        assert!(media_paths(r#"{"media_tag": "MEDIA:relative.wav"}"#).is_empty());
    }

    #[test]
    fn stored_paths_are_existing_files_under_the_root() {
        let root = tempfile::tempdir().unwrap();
        let cache = root.path().join("cache");
        std::fs::create_dir_all(cache.join("spillover")).unwrap();
        let kept = cache.join("spillover/a.txt");
        std::fs::write(&kept, "x").unwrap();
        let result = json!({
            "path": kept,
            "missing": cache.join("spillover/b.txt"),
            "outside": root.path().join("c.txt"),
            "sibling": format!("{}-other/d.txt", cache.display()),
            "nested": {"path": kept},
        })
        .to_string();
        assert_eq!(stored_paths(&result, &cache), vec![kept]);
        assert!(stored_paths("not json", &cache).is_empty());
    }

    #[test]
    fn envelopes_keep_mcp_blocks() {
        let envelope = json!({"_multimodal": true, "content": [
            {"type": "text", "text": "t"},
            {"type": "audio", "mimeType": "audio/wav", "data": "UklG"},
            {"type": "resource", "resource": {"uri": "x://y", "mimeType": "text/plain", "text": "r"}},
        ]});
        let served = result_string_to_mcp(&envelope.to_string());
        assert_eq!(served["content"][1], envelope["content"][1]);
        assert_eq!(served["content"][2], envelope["content"][2]);
    }

    #[test]
    fn error_key_means_is_error() {
        assert_eq!(result_string_to_mcp(r#"{"error": "x"}"#)["isError"], true);
        assert_eq!(result_string_to_mcp(r#"{"ok": 1}"#)["isError"], false);
        assert_eq!(result_string_to_mcp("plain")["isError"], false);
    }

    #[test]
    fn the_quick_reading_judges_errors_as_the_full_one() {
        let results = [
            r#"{"error": "x"}"#,
            r#"{"error": ""}"#,
            r#"{"error": null}"#,
            r#"{"error": false}"#,
            r#"{"error": true}"#,
            r#"{"error": 0}"#,
            r#"{"error": {"why": 1}}"#,
            r#"{"error": []}"#,
            r#"  {"content": "1|a", "error": "late"}"#,
            r#"{"error": "", "error": "second wins"}"#,
            r#"{"error": "x"} trailing"#,
            r#"["error", 1]"#,
            r#""error""#,
            r#"{"ok": {"error": "nested"}}"#,
            "",
            "{",
            "null",
        ];
        for result in results {
            let served = result_string_to_mcp(result);
            assert_eq!(served["isError"], is_error_result(result), "{result}");
            assert_eq!(served["content"][0]["text"], result, "{result}");
        }
    }
}
