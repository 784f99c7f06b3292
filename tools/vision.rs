//! `vision_analyze`: an image from a URL, a data URL or a file, either put in front of
//! the model itself (callers that take images) or described by the auxiliary vision
//! model (`auxiliary.vision.*`).

use hermes_runtime::config::Config;
use hermes_runtime::prelude::*;
use hermes_vision::{AuxVision, Caps, ImageError, PreparedImage};
use std::path::Path;
use std::sync::Arc;

fn config_for(home: &Path) -> Arc<Config> {
    hermes_runtime::config::call_config().unwrap_or_else(|| Arc::new(Config::load(home)))
}

/// Why `vision_analyze` cannot describe an image, or `None` when the auxiliary model
/// is configured. (Callers that take images need no model; they are not known here.)
pub fn vision_unavailable_reason() -> Option<String> {
    if hermes_runtime::context::process_accepts_images() {
        return None;
    }
    let config = config_for(&hermes_runtime::context::default_hermes_home());
    AuxVision::resolve(&config)
        .err()
        .map(|why| format!("{why}; or use a caller that takes images (mcp, serve --images)"))
}

/// Offered when the auxiliary vision model is configured, or when the process serves
/// callers that take images (`mcp`, `serve --images`, an agent whose model has
/// vision): they get the image itself.
pub fn vision_available() -> bool {
    vision_unavailable_reason().is_none()
}

/// The failed analysis, with what the model should make of it: no credits, a model
/// that takes no images, an image the endpoint refused, or anything else.
fn failure_result(text: &str, model: &str) -> ToolResult {
    let lower = text.to_lowercase();
    let has = |hints: &[&str]| hints.iter().any(|h| lower.contains(h));
    let analysis = if has(&[
        "402",
        "insufficient",
        "payment required",
        "credits",
        "billing",
    ]) {
        format!(
            "Insufficient credits or payment required. Please top up your API provider \
             account and try again. Error: {text}"
        )
    } else if has(&[
        "does not support",
        "not support image",
        "content_policy",
        "multimodal",
        "unrecognized request argument",
        "image input",
    ]) {
        format!(
            "{model} does not support vision or our request was not accepted by the server. \
             Error: {text}"
        )
    } else if has(&["invalid_request", "image_url"]) {
        format!(
            "The vision API rejected the image. This can happen when the image is in an \
             unsupported format, corrupted, or still too large after it was made smaller. Try \
             a smaller JPEG/PNG and retry. Error: {text}"
        )
    } else {
        format!(
            "There was a problem with the request and the image could not be analyzed. \
             Error: {text}"
        )
    };
    failure(format!("Error analyzing image: {text}"), analysis)
}

fn failure(error: String, analysis: String) -> ToolResult {
    Ok(json!({"success": false, "error": error, "analysis": analysis}).into())
}

/// What the result says about an image handed to the model itself.
fn native_result(source: &str, question: &str, image: &PreparedImage) -> ToolResult {
    let mut text = "Image loaded into your context — you can see it natively now. Use your \
                    built-in vision to answer the user."
        .to_string();
    if !question.trim().is_empty() {
        text.push_str(&format!("\n\nQuestion: {}", question.trim()));
    }
    let summary = format!(
        "Image attached natively for the main model ({:.1} KB). Answer using built-in vision.",
        image.source_bytes as f64 / 1024.0
    );
    let shown: String = source.chars().take(200).collect();
    let meta = json!({
        "image_url": shown,
        "size_bytes": image.source_bytes,
        "native_vision": true,
        "mime_type": image.mime(),
        "width": image.width,
        "height": image.height,
        "resized": image.resized,
    });
    Ok(hermes_vision::multimodal_result(&text, image, &summary, meta).into())
}

/// Load an image into the conversation so you can see it. Accepts a URL, local file path, or data URL. When the caller can show images to you, the image is attached to your context directly and you read the pixels yourself on the next turn — call this any time the user references an image (filepath in their message, URL in tool output, screenshot from the browser, etc.). Otherwise an auxiliary vision model describes the image and answers the question in text.
#[tool(
    toolset = "vision",
    emoji = "👁️",
    check = vision_available,
    unavailable_reason = vision_unavailable_reason,
    concurrency = "read_only"
)]
pub fn vision_analyze(
    /// Image URL (http/https), local file path, or data: URL to load.
    image_url: String,
    /// Your specific question or request about the image. Optional context the model uses on the next turn after seeing the image.
    question: String,
    ctx: &ToolContext,
) -> ToolResult {
    let source = image_url.trim();
    if source.is_empty() {
        return Ok(json!({"success": false, "error": "image_url is required"}).into());
    }
    let config = config_for(ctx.hermes_home());
    let prepared =
        crate::shared::image_source::load_image_source(source, ctx, &config).and_then(|bytes| {
            hermes_vision::prepare(&bytes, &Caps::default()).map_err(|e| match e {
                ImageError::NotAnImage(_) => format!("{e} ({} bytes given)", bytes.len()),
                other => other.to_string(),
            })
        });
    let image = match prepared {
        Ok(image) => image,
        Err(e) => {
            return failure(
                format!("Error analyzing image: {e}"),
                format!("The image could not be loaded. Error: {e}"),
            )
        }
    };
    if ctx.accepts_images() {
        return native_result(source, &question, &image);
    }
    let aux = match AuxVision::resolve(&config) {
        Ok(aux) => aux,
        Err(why) => {
            return failure(
                format!("Error analyzing image: {why}"),
                format!("No vision model is available to describe the image: {why}"),
            )
        }
    };
    let prompt = format!(
        "Fully describe and explain everything about this image, then answer the following \
         question:\n\n{question}"
    );
    match aux.ask(&prompt, &image.data_url()) {
        Ok(answer) => Ok(json!({"success": true, "analysis": answer.text}).into()),
        Err(failure) => {
            let text = failure.to_string();
            failure_result(&text, &failure.model)
        }
    }
}
