//! `image_generate`: text-to-image, or an edit of given images, through FAL's queue
//! API or OpenAI's Images API, as `image_gen.provider` says (unset: FAL when
//! `FAL_KEY` is set). The image is downloaded (a third-party URL, through the network
//! policy) or decoded and saved under `$HERMES_HOME/cache/images/`; its path is the
//! result's `image`.

use hermes_net::{Fetcher, Limits, NetPolicy};
use hermes_runtime::config::Config;
use hermes_runtime::prelude::*;
use hermes_vision::ImageType;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

mod fal;
mod openai;

const DEFAULT_TIMEOUT_SECS: u64 = 300;
/// Largest generated image downloaded.
const MAX_IMAGE_BYTES: u64 = 50 * 1024 * 1024;

/// The shape of the image.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AspectRatio {
    Landscape,
    Square,
    Portrait,
}

impl AspectRatio {
    fn name(self) -> &'static str {
        match self {
            AspectRatio::Landscape => "landscape",
            AspectRatio::Square => "square",
            AspectRatio::Portrait => "portrait",
        }
    }
}

fn env(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

fn config_for(home: &Path) -> Arc<Config> {
    hermes_runtime::config::call_config().unwrap_or_else(|| Arc::new(Config::load(home)))
}

fn setting(value: Option<&Value>) -> Option<String> {
    value
        .and_then(Value::as_str)
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Provider {
    Fal,
    OpenAi,
}

impl Provider {
    fn name(self) -> &'static str {
        match self {
            Provider::Fal => "fal",
            Provider::OpenAi => "openai",
        }
    }
}

/// The backend a call would use, or why there is none. A key alone opts into FAL only
/// (as in the original); OpenAI is used when `image_gen.provider` says so.
fn backend(config: &Config) -> Result<Provider, String> {
    match setting(config.get("image_gen.provider")).as_deref() {
        None => {
            if env("FAL_KEY").is_some() {
                Ok(Provider::Fal)
            } else {
                Err("no image backend: set FAL_KEY, or image_gen.provider: openai with OPENAI_API_KEY".into())
            }
        }
        Some("fal") => env("FAL_KEY")
            .map(|_| Provider::Fal)
            .ok_or_else(|| "image_gen.provider is fal but FAL_KEY is not set".into()),
        Some("openai") => env("OPENAI_API_KEY")
            .map(|_| Provider::OpenAi)
            .ok_or_else(|| "image_gen.provider is openai but OPENAI_API_KEY is not set".into()),
        Some(other) => Err(format!(
            "image_gen.provider '{other}' is not a backend of this runtime (fal, openai)"
        )),
    }
}

/// Why `image_generate` is not offered, or `None` when it is.
pub fn image_generate_unavailable_reason() -> Option<String> {
    let config = config_for(&hermes_runtime::context::default_hermes_home());
    backend(&config).err()
}

pub fn image_generate_available() -> bool {
    image_generate_unavailable_reason().is_none()
}

/// The OpenAI tier: `OPENAI_IMAGE_MODEL`, `image_gen.openai.model`, `image_gen.model`,
/// else medium.
fn openai_tier(config: &Config) -> (&'static str, &'static str) {
    let wanted = [
        env("OPENAI_IMAGE_MODEL"),
        setting(config.get("image_gen.openai.model")),
        setting(config.get("image_gen.model")),
    ];
    wanted
        .iter()
        .flatten()
        .find_map(|w| openai::TIERS.iter().find(|(id, _)| id == w).copied())
        .unwrap_or(openai::TIERS[1])
}

const DESCRIPTION: &str = "Generate high-quality images from text prompts (text-to-image), or edit / transform an existing image (image-to-image) when the active model supports it. Pass `image_url` to edit that image; add `reference_image_urls` for style/composition references; omit both for text-to-image. The backend (FAL or OpenAI) and model are user-configured and not selectable by the agent. Returns the result in the `image` field: the absolute path of the saved image file. To show it to the user, reference that path in your response using the file-delivery convention of the current platform.";

/// The description with the active backend's line, the original's parameters.
pub fn image_generate_schema(_: &SchemaContext) -> Option<Value> {
    let config = config_for(&hermes_runtime::context::default_hermes_home());
    let mut description = DESCRIPTION.to_string();
    let (provider, model, edit, max_refs) = match backend(&config) {
        Ok(Provider::OpenAi) => (
            "OpenAI",
            openai_tier(&config).0.to_string(),
            true,
            openai::MAX_SOURCES,
        ),
        _ => {
            let m = fal::model(setting(config.get("image_gen.model")).as_deref());
            (
                "FAL.ai",
                m.display.to_string(),
                m.edit_endpoint.is_some(),
                m.max_reference_images,
            )
        }
    };
    // The description, a blank line, then the backend and what it can do.
    description.push_str(&format!(
        "\n\nActive backend: {provider} · model: {model}\n"
    ));
    if edit {
        let refs = if max_refs > 1 {
            format!("; up to {max_refs} reference image(s) via reference_image_urls")
        } else {
            String::new()
        };
        description.push_str(&format!(
            "- supports both text-to-image (omit image_url) and image-to-image / editing (pass image_url){refs} — routes automatically"
        ));
    } else {
        description.push_str(
            "- this model is text-to-image only — it is NOT capable of image-to-image / editing; do not pass image_url or reference_image_urls (they will be rejected). Provide a text-only prompt.",
        );
    }
    Some(json!({
        "description": description,
        "parameters": {
            "type": "object",
            "properties": {
                "prompt": {"type": "string", "description": "The text prompt describing the desired image (text-to-image) or the edit to apply (image-to-image). Be detailed and descriptive."},
                "aspect_ratio": {"type": "string", "enum": ["landscape", "square", "portrait"], "description": "The aspect ratio of the generated image. 'landscape' is 16:9 wide, 'portrait' is 16:9 tall, 'square' is 1:1.", "default": "landscape"},
                "image_url": {"type": "string", "description": "Optional source image to edit/transform (image-to-image). When provided, the active backend routes to its image editing endpoint; when omitted, it generates from text alone. Pass a public URL, a data: URL or an absolute local file path from the conversation. Only honored by models that support editing — the description above indicates whether the active model does."},
                "reference_image_urls": {"type": "array", "items": {"type": "string"}, "description": "Optional list of additional reference image URLs / paths (style, character, or composition references) to guide an image-to-image edit. Supported only by some models and capped per-model; the description above indicates the max."}
            },
            "required": ["prompt"]
        }
    }))
}

struct Call<'a> {
    provider: Provider,
    model: String,
    prompt: &'a str,
    aspect: &'a str,
}

impl Call<'_> {
    fn fail(&self, error: impl Into<String>, error_type: &str) -> ToolResult {
        Ok(json!({
            "success": false, "image": null, "error": error.into(), "error_type": error_type,
            "model": self.model, "prompt": self.prompt, "aspect_ratio": self.aspect,
            "provider": self.provider.name(),
        })
        .into())
    }

    fn done(&self, ctx: &ToolContext, image: &Path, modality: &str, extra: Value) -> ToolResult {
        let mut out = json!({
            "success": true, "image": image.display().to_string(), "model": self.model,
            "prompt": self.prompt, "aspect_ratio": self.aspect, "modality": modality,
            "provider": self.provider.name(),
        });
        if let Some(inside) = copy_into_environment(ctx, image) {
            out["host_image"] = json!(image.display().to_string());
            out["agent_visible_image"] = json!(inside);
        }
        if let (Some(out), Value::Object(extra)) = (out.as_object_mut(), extra) {
            for (k, v) in extra {
                out.entry(k).or_insert(v);
            }
        }
        Ok(out.into())
    }
}

/// On a backend other than `local` the task's commands and file tools do not see the
/// host's cache: a copy of the image goes to `~/.hermes/cache/images/` inside the
/// task's environment. Its path there, or `None` (the local backend, or no copy made:
/// `image` stays the result either way).
fn copy_into_environment(ctx: &ToolContext, image: &Path) -> Option<String> {
    use hermes_environments::files::{Change, Committed};
    let remote = hermes_environments::files::for_task(ctx)?.ok()?;
    let home = remote.probe("~", false).ok()?.home;
    let name = image.file_name()?.to_str()?;
    if home.is_empty() {
        return None;
    }
    let target = format!("{}/.hermes/cache/images/{name}", home.trim_end_matches('/'));
    let bytes = std::fs::read(image).ok()?;
    let change = Change {
        target: &target,
        base: None,
        data: Some(&bytes),
    };
    match remote.commit(&[change]) {
        Ok(Committed::Done(written)) if written.iter().all(|w| w.verified) => Some(target),
        _ => None,
    }
}

/// Saves `bytes` (an image, checked by its magic bytes) as
/// `$HERMES_HOME/cache/images/<prefix>_<time>_<id>.<ext>`.
fn save(home: &Path, prefix: &str, bytes: &[u8]) -> Result<PathBuf, String> {
    let kind =
        ImageType::sniff(bytes).ok_or("the backend's answer is not an image of a known type")?;
    let dir = home.join("cache/images");
    std::fs::create_dir_all(&dir).map_err(|e| format!("Cannot create {}: {e}", dir.display()))?;
    let stamp = chrono::Local::now().format("%Y%m%d_%H%M%S");
    let safe: String = prefix
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let path = dir.join(format!(
        "{safe}_{stamp}_{}.{}",
        hermes_environments::output::random_hex(8),
        kind.extension()
    ));
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(|e| format!("Cannot save the image: {e}"))?;
    file.write_all(bytes)
        .map_err(|e| format!("Cannot save the image: {e}"))?;
    Ok(path)
}

/// A generated image's URL (third-party: through the network policy) or data URL.
fn download(url: &str, ctx: &ToolContext, config: &Config) -> Result<Vec<u8>, String> {
    if url.to_ascii_lowercase().starts_with("data:") {
        return hermes_vision::decode_data_url(url)
            .map(|(b, _)| b)
            .map_err(|e| e.to_string());
    }
    let fetcher = Fetcher::new(NetPolicy::from_config(config, ctx.hermes_home()));
    let limits = Limits {
        timeout: Duration::from_secs(120),
        max_body_bytes: MAX_IMAGE_BYTES,
        max_redirects: 10,
    };
    let fetched = fetcher
        .get(url, &limits)
        .map_err(|e| format!("Could not download the generated image: {e}"))?;
    if !(200..300).contains(&fetched.status) {
        return Err(format!(
            "Could not download the generated image: HTTP {}",
            fetched.status
        ));
    }
    Ok(fetched.body)
}

/// Generate high-quality images from text prompts (text-to-image), or edit / transform an existing image (image-to-image) when the active model supports it.
#[tool(
    toolset = "image_gen",
    emoji = "🎨",
    check = image_generate_available,
    unavailable_reason = image_generate_unavailable_reason,
    dynamic_schema = image_generate_schema
)]
pub fn image_generate(
    /// The text prompt describing the desired image (text-to-image) or the edit to apply (image-to-image). Be detailed and descriptive.
    prompt: String,
    /// The aspect ratio of the generated image. 'landscape' is 16:9 wide, 'portrait' is 16:9 tall, 'square' is 1:1.
    aspect_ratio: Option<AspectRatio>,
    /// Optional source image to edit/transform (image-to-image): a public URL, a data: URL or a local file path.
    image_url: Option<String>,
    /// Optional list of additional reference image URLs / paths to guide an image-to-image edit.
    reference_image_urls: Option<Vec<String>>,
    ctx: &ToolContext,
) -> ToolResult {
    let config = config_for(ctx.hermes_home());
    let aspect = aspect_ratio.unwrap_or(AspectRatio::Landscape).name();
    let prompt = prompt.trim();
    let provider = backend(&config);
    let mut call = Call {
        provider: *provider.as_ref().unwrap_or(&Provider::Fal),
        model: String::new(),
        prompt,
        aspect,
    };
    if prompt.is_empty() {
        return call.fail(
            "Prompt is required and must be a non-empty string",
            "invalid_argument",
        );
    }
    let provider = match provider {
        Ok(p) => p,
        Err(why) => {
            return call.fail(
                format!("Image generation is unavailable: {why}"),
                "auth_required",
            )
        }
    };
    let timeout = config
        .get("image_gen.timeout")
        .and_then(Value::as_f64)
        .filter(|t| t.is_finite() && *t > 0.0)
        .map(Duration::from_secs_f64)
        .unwrap_or(Duration::from_secs(DEFAULT_TIMEOUT_SECS));
    let sources: Vec<String> = image_url
        .into_iter()
        .chain(reference_image_urls.unwrap_or_default())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    let modality = if sources.is_empty() { "text" } else { "image" };
    match provider {
        Provider::Fal => {
            let model = fal::model(setting(config.get("image_gen.model")).as_deref());
            call.model = model.id.to_string();
            let key = env("FAL_KEY").unwrap_or_default();
            let endpoint = match (sources.is_empty(), model.edit_endpoint) {
                (true, _) => model.id,
                (false, Some(edit)) => edit,
                (false, None) => {
                    return call.fail(
                        format!(
                            "Model '{}' ({}) is not capable of image-to-image / editing. Provide a text-only prompt (omit image_url), or switch to an edit-capable model (image_gen.model).",
                            model.display, model.id
                        ),
                        "unsupported",
                    )
                }
            };
            // FAL fetches public URLs itself (screened here first); files and data
            // URLs go as data URLs.
            let mut urls = Vec::new();
            for source in sources.iter().take(model.max_reference_images.max(1)) {
                let lower = source.to_ascii_lowercase();
                if lower.starts_with("http://") || lower.starts_with("https://") {
                    let fetcher = Fetcher::new(NetPolicy::from_config(&config, ctx.hermes_home()));
                    match fetcher.preflight(source, Duration::from_secs(10)) {
                        Ok(url) => urls.push(url),
                        Err(refusal) => {
                            return call.fail(format!("{source}: {refusal}"), "invalid_argument")
                        }
                    }
                    continue;
                }
                let image = crate::shared::image_source::load_image_source(source, ctx, &config)
                    .and_then(|bytes| {
                        hermes_vision::prepare(&bytes, &hermes_vision::Caps::default())
                            .map_err(|e| e.to_string())
                    });
                match image {
                    Ok(image) => urls.push(image.data_url()),
                    Err(e) => {
                        return call.fail(
                            format!("Could not load source image {source}: {e}"),
                            "io_error",
                        )
                    }
                }
            }
            let body = fal::payload(model, prompt, aspect, &urls);
            let idempotency = hermes_environments::output::random_hex(32);
            let generated = match fal::run(&key, endpoint, &body, &idempotency, timeout) {
                Ok(generated) => generated,
                Err(e) => {
                    return call.fail(
                        hermes_runtime::redact::redact_secrets(&e.replace(&key, "***")),
                        "api_error",
                    )
                }
            };
            let Some(mut first) = generated
                .images
                .iter()
                .find_map(|i| i.get("url").and_then(Value::as_str))
                .map(str::to_string)
            else {
                return call.fail("No valid image URLs returned from API", "empty_response");
            };
            // The upscaler is a quality pass over generated images; edits are final.
            // Its failure keeps the image as generated.
            let mut upscaled = false;
            if model.upscale && sources.is_empty() && !first.starts_with("data:") {
                let body = fal::upscale_payload(&first, prompt);
                let idempotency = hermes_environments::output::random_hex(32);
                if let Ok(bigger) = fal::run(&key, fal::UPSCALER, &body, &idempotency, timeout) {
                    if let Some(url) = bigger
                        .images
                        .iter()
                        .find_map(|i| i.get("url").and_then(Value::as_str))
                    {
                        first = url.to_string();
                        upscaled = true;
                    }
                }
            }
            let first = first.as_str();
            let saved = download(first, ctx, &config).and_then(|bytes| {
                save(
                    ctx.hermes_home(),
                    &format!("fal_{}", model.id.replace('/', "_")),
                    &bytes,
                )
            });
            match saved {
                Ok(path) => {
                    let source_url = (!first.starts_with("data:")).then(|| first.to_string());
                    call.done(
                        ctx,
                        &path,
                        modality,
                        json!({"source_url": source_url, "images_generated": generated.images.len(), "upscaled": upscaled}),
                    )
                }
                Err(e) => call.fail(e, "io_error"),
            }
        }
        Provider::OpenAi => {
            let (tier, quality) = openai_tier(&config);
            call.model = tier.to_string();
            let key = env("OPENAI_API_KEY").unwrap_or_default();
            let size = openai::size(aspect);
            let answer = if sources.is_empty() {
                openai::generate(&key, prompt, size, quality, timeout)
            } else {
                let mut files = Vec::new();
                for (i, source) in sources.iter().take(openai::MAX_SOURCES).enumerate() {
                    let image =
                        crate::shared::image_source::load_image_source(source, ctx, &config)
                            .and_then(|bytes| {
                                hermes_vision::prepare(&bytes, &hermes_vision::Caps::default())
                                    .map_err(|e| e.to_string())
                            });
                    match image {
                        Ok(image) => files.push(openai::Source {
                            name: format!("image_{i}.{}", image.image_type.extension()),
                            mime: image.mime().to_string(),
                            bytes: image.bytes,
                        }),
                        Err(e) => {
                            return call.fail(
                                format!("Could not load source image for editing: {e}"),
                                "io_error",
                            )
                        }
                    }
                }
                openai::edit(&key, prompt, size, quality, &files, timeout)
            };
            let answer = match answer {
                Ok(answer) => answer,
                Err(e) => {
                    let what = if sources.is_empty() {
                        "generation"
                    } else {
                        "editing"
                    };
                    return call.fail(format!("OpenAI image {what} failed: {e}"), "api_error");
                }
            };
            let bytes = match &answer.output {
                openai::Output::Base64(b64) => {
                    hermes_vision::decode_data_url(&format!("data:image/png;base64,{b64}"))
                        .map(|(b, _)| b)
                        .map_err(|e| format!("OpenAI's image is not valid base64: {e}"))
                }
                openai::Output::Url(url) => download(url, ctx, &config),
            };
            match bytes.and_then(|b| save(ctx.hermes_home(), &format!("openai_{tier}"), &b)) {
                Ok(path) => {
                    let mut extra = json!({"size": size, "quality": quality});
                    if let Some(revised) = answer.revised_prompt {
                        extra["revised_prompt"] = json!(revised);
                    }
                    call.done(ctx, &path, modality, extra)
                }
                Err(e) => call.fail(format!("Could not save image to cache: {e}"), "io_error"),
            }
        }
    }
}
