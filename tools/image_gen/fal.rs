//! FAL's queue API: submit to `https://queue.fal.run/{model}` (or `FAL_QUEUE_RUN_HOST`),
//! poll the `status_url` the submit answer names until `COMPLETED`, read the
//! `response_url`. The key goes only to that host, as `Authorization: Key ...`.

use serde_json::{json, Map, Value};
use std::time::{Duration, Instant};

/// How a model takes its size.
#[derive(Clone, Copy, PartialEq, Eq)]
enum SizeStyle {
    /// `image_size`: a preset name ("landscape_16_9", "square_hd", ...).
    Preset,
    /// `image_size`: literal dimensions ("1536x1024").
    Literal,
    /// `aspect_ratio`: "16:9", "1:1", "9:16".
    AspectRatio,
}

/// One model of the catalog: how its payload is built from the tool's arguments.
pub struct FalModel {
    pub id: &'static str,
    pub display: &'static str,
    style: SizeStyle,
    /// landscape, square, portrait.
    sizes: [&'static str; 3],
    defaults: &'static [(&'static str, DefaultValue)],
    /// The keys its text-to-image endpoint takes; others are left out.
    supports: &'static [&'static str],
    /// Whether a text-to-image result goes through FAL's Clarity upscaler.
    pub upscale: bool,
    /// The image-to-image endpoint.
    pub edit_endpoint: Option<&'static str>,
    /// The keys the edit endpoint takes (a size only where it lists one: the others
    /// take the size of the source).
    edit_supports: &'static [&'static str],
    pub max_reference_images: usize,
}

#[derive(Clone, Copy)]
enum DefaultValue {
    Int(i64),
    Float(f64),
    Bool(bool),
    Text(&'static str),
}

impl DefaultValue {
    fn json(self) -> Value {
        match self {
            DefaultValue::Int(n) => json!(n),
            DefaultValue::Float(f) => json!(f),
            DefaultValue::Bool(b) => json!(b),
            DefaultValue::Text(t) => json!(t),
        }
    }
}

use DefaultValue::{Bool, Float, Int, Text};

const WIDE_PRESETS: [&str; 3] = ["landscape_16_9", "square_hd", "portrait_16_9"];
const RATIOS: [&str; 3] = ["16:9", "1:1", "9:16"];

/// The models FAL serves here, the first the default. Defaults keep cost predictable
/// (one image, medium quality, no paid prompt expansion, the cheapest resolution).
pub const MODELS: &[FalModel] = &[
    FalModel {
        id: "fal-ai/flux-2/klein/9b",
        display: "FLUX 2 Klein 9B",
        style: SizeStyle::Preset,
        sizes: WIDE_PRESETS,
        defaults: &[
            ("num_inference_steps", Int(4)),
            ("output_format", Text("png")),
            ("enable_safety_checker", Bool(false)),
        ],
        supports: &[
            "prompt",
            "image_size",
            "num_inference_steps",
            "seed",
            "output_format",
            "enable_safety_checker",
        ],
        upscale: false,
        edit_endpoint: Some("fal-ai/flux-2/klein/9b/edit"),
        edit_supports: &[
            "prompt",
            "image_urls",
            "num_inference_steps",
            "seed",
            "output_format",
            "enable_safety_checker",
        ],
        max_reference_images: 9,
    },
    FalModel {
        id: "fal-ai/flux-2-pro",
        display: "FLUX 2 Pro",
        style: SizeStyle::Preset,
        sizes: WIDE_PRESETS,
        defaults: &[
            ("num_inference_steps", Int(50)),
            ("guidance_scale", Float(4.5)),
            ("num_images", Int(1)),
            ("output_format", Text("png")),
            ("enable_safety_checker", Bool(false)),
            ("safety_tolerance", Text("5")),
            ("sync_mode", Bool(true)),
        ],
        supports: &[
            "prompt",
            "image_size",
            "num_inference_steps",
            "guidance_scale",
            "num_images",
            "output_format",
            "enable_safety_checker",
            "safety_tolerance",
            "sync_mode",
            "seed",
        ],
        upscale: true,
        edit_endpoint: Some("fal-ai/flux-2-pro/edit"),
        edit_supports: &[
            "prompt",
            "image_urls",
            "num_inference_steps",
            "guidance_scale",
            "num_images",
            "output_format",
            "enable_safety_checker",
            "safety_tolerance",
            "sync_mode",
            "seed",
        ],
        max_reference_images: 9,
    },
    FalModel {
        id: "fal-ai/z-image/turbo",
        display: "Z-Image Turbo",
        style: SizeStyle::Preset,
        sizes: WIDE_PRESETS,
        defaults: &[
            ("num_inference_steps", Int(8)),
            ("num_images", Int(1)),
            ("output_format", Text("png")),
            ("enable_safety_checker", Bool(false)),
            ("enable_prompt_expansion", Bool(false)),
        ],
        supports: &[
            "prompt",
            "image_size",
            "num_inference_steps",
            "num_images",
            "seed",
            "output_format",
            "enable_safety_checker",
            "enable_prompt_expansion",
        ],
        upscale: false,
        edit_endpoint: None,
        edit_supports: &[],
        max_reference_images: 0,
    },
    FalModel {
        id: "fal-ai/nano-banana-pro",
        display: "Nano Banana Pro (Gemini 3 Pro Image)",
        style: SizeStyle::AspectRatio,
        sizes: RATIOS,
        defaults: &[
            ("num_images", Int(1)),
            ("output_format", Text("png")),
            ("safety_tolerance", Text("5")),
            ("resolution", Text("1K")),
        ],
        supports: &[
            "prompt",
            "aspect_ratio",
            "num_images",
            "output_format",
            "safety_tolerance",
            "seed",
            "sync_mode",
            "resolution",
            "enable_web_search",
            "limit_generations",
        ],
        upscale: false,
        edit_endpoint: Some("fal-ai/nano-banana-pro/edit"),
        edit_supports: &[
            "prompt",
            "image_urls",
            "aspect_ratio",
            "num_images",
            "output_format",
            "safety_tolerance",
            "seed",
            "sync_mode",
            "resolution",
            "enable_web_search",
            "limit_generations",
        ],
        max_reference_images: 2,
    },
    FalModel {
        id: "fal-ai/gpt-image-1.5",
        display: "GPT Image 1.5",
        style: SizeStyle::Literal,
        sizes: ["1536x1024", "1024x1024", "1024x1536"],
        defaults: &[
            ("quality", Text("medium")),
            ("num_images", Int(1)),
            ("output_format", Text("png")),
        ],
        supports: &[
            "prompt",
            "image_size",
            "quality",
            "num_images",
            "output_format",
            "background",
            "sync_mode",
        ],
        upscale: false,
        edit_endpoint: Some("fal-ai/gpt-image-1.5/edit"),
        edit_supports: &[
            "prompt",
            "image_urls",
            "image_size",
            "quality",
            "num_images",
            "output_format",
            "sync_mode",
        ],
        max_reference_images: 16,
    },
    FalModel {
        id: "fal-ai/gpt-image-2",
        display: "GPT Image 2",
        // The 4:3 presets: the 16:9 ones fall under this model's minimum pixel count.
        style: SizeStyle::Preset,
        sizes: ["landscape_4_3", "square_hd", "portrait_4_3"],
        defaults: &[
            ("quality", Text("medium")),
            ("num_images", Int(1)),
            ("output_format", Text("png")),
        ],
        supports: &[
            "prompt",
            "image_size",
            "quality",
            "num_images",
            "output_format",
            "sync_mode",
        ],
        upscale: false,
        edit_endpoint: Some("openai/gpt-image-2/edit"),
        edit_supports: &[
            "prompt",
            "image_urls",
            "quality",
            "num_images",
            "output_format",
            "sync_mode",
            "mask_image_url",
        ],
        max_reference_images: 16,
    },
    FalModel {
        id: "fal-ai/ideogram/v3",
        display: "Ideogram V3",
        style: SizeStyle::Preset,
        sizes: WIDE_PRESETS,
        defaults: &[
            ("rendering_speed", Text("BALANCED")),
            ("expand_prompt", Bool(true)),
            ("style", Text("AUTO")),
        ],
        supports: &[
            "prompt",
            "image_size",
            "rendering_speed",
            "expand_prompt",
            "style",
            "seed",
        ],
        upscale: false,
        edit_endpoint: Some("fal-ai/ideogram/v3/edit"),
        edit_supports: &[
            "prompt",
            "image_urls",
            "rendering_speed",
            "expand_prompt",
            "style",
            "seed",
        ],
        max_reference_images: 1,
    },
    FalModel {
        id: "fal-ai/recraft/v4/pro/text-to-image",
        display: "Recraft V4 Pro",
        style: SizeStyle::Preset,
        sizes: WIDE_PRESETS,
        defaults: &[("enable_safety_checker", Bool(false))],
        supports: &[
            "prompt",
            "image_size",
            "enable_safety_checker",
            "colors",
            "background_color",
        ],
        upscale: false,
        edit_endpoint: None,
        edit_supports: &[],
        max_reference_images: 0,
    },
    FalModel {
        id: "fal-ai/qwen-image",
        display: "Qwen Image",
        style: SizeStyle::Preset,
        sizes: WIDE_PRESETS,
        defaults: &[
            ("num_inference_steps", Int(30)),
            ("guidance_scale", Float(2.5)),
            ("num_images", Int(1)),
            ("output_format", Text("png")),
            ("acceleration", Text("regular")),
        ],
        supports: &[
            "prompt",
            "image_size",
            "num_inference_steps",
            "guidance_scale",
            "num_images",
            "output_format",
            "acceleration",
            "seed",
            "sync_mode",
        ],
        upscale: false,
        edit_endpoint: Some("fal-ai/qwen-image-2/pro/edit"),
        edit_supports: &[
            "prompt",
            "image_urls",
            "num_inference_steps",
            "guidance_scale",
            "num_images",
            "output_format",
            "acceleration",
            "seed",
            "sync_mode",
        ],
        max_reference_images: 3,
    },
    FalModel {
        id: "fal-ai/krea/v2/medium/text-to-image",
        display: "Krea 2 Medium",
        style: SizeStyle::AspectRatio,
        sizes: RATIOS,
        defaults: &[("creativity", Text("medium"))],
        supports: &[
            "prompt",
            "aspect_ratio",
            "creativity",
            "seed",
            "image_style_references",
        ],
        upscale: false,
        edit_endpoint: None,
        edit_supports: &[],
        max_reference_images: 0,
    },
    FalModel {
        id: "fal-ai/krea/v2/large/text-to-image",
        display: "Krea 2 Large",
        style: SizeStyle::AspectRatio,
        sizes: RATIOS,
        defaults: &[("creativity", Text("medium"))],
        supports: &[
            "prompt",
            "aspect_ratio",
            "creativity",
            "seed",
            "image_style_references",
        ],
        upscale: false,
        edit_endpoint: None,
        edit_supports: &[],
        max_reference_images: 0,
    },
];

/// The configured model (`image_gen.model`, else `FAL_IMAGE_MODEL`), or the default
/// when unset or unknown.
pub fn model(configured: Option<&str>) -> &'static FalModel {
    let wanted = configured.map(str::to_string).or_else(|| {
        std::env::var("FAL_IMAGE_MODEL")
            .ok()
            .map(|m| m.trim().to_string())
            .filter(|m| !m.is_empty())
    });
    wanted
        .and_then(|id| MODELS.iter().find(|m| m.id == id))
        .unwrap_or(&MODELS[0])
}

fn size_index(aspect: &str) -> usize {
    match aspect {
        "square" => 1,
        "portrait" => 2,
        _ => 0,
    }
}

/// The request body for text-to-image (`sources` empty) or an edit: the model's
/// defaults, the prompt, the size in the model's style (for an edit only where its
/// edit endpoint takes one), the sources; then only the keys the endpoint takes.
pub fn payload(model: &FalModel, prompt: &str, aspect: &str, sources: &[String]) -> Value {
    let edit = !sources.is_empty();
    let allowed = if edit {
        model.edit_supports
    } else {
        model.supports
    };
    let mut body = Map::new();
    for (key, value) in model.defaults {
        body.insert((*key).into(), value.json());
    }
    body.insert("prompt".into(), json!(prompt.trim()));
    if edit {
        body.insert("image_urls".into(), json!(sources));
    }
    let size = model.sizes[size_index(aspect)];
    let size_key = match model.style {
        SizeStyle::Preset | SizeStyle::Literal => "image_size",
        SizeStyle::AspectRatio => "aspect_ratio",
    };
    if !edit || allowed.contains(&size_key) {
        body.insert(size_key.into(), json!(size));
    }
    body.retain(|k, _| {
        k == "prompt" || (edit && k == "image_urls") || allowed.contains(&k.as_str())
    });
    Value::Object(body)
}

/// FAL's upscaler, run over text-to-image results of models with `upscale`.
pub const UPSCALER: &str = "fal-ai/clarity-upscaler";

/// The upscaler's request for `image_url`, made from `prompt`: twice the size, close
/// to the source.
pub fn upscale_payload(image_url: &str, prompt: &str) -> Value {
    json!({
        "image_url": image_url,
        "prompt": format!("masterpiece, best quality, highres, {}", prompt.trim()),
        "upscale_factor": 2,
        "negative_prompt": "(worst quality, low quality, normal quality:2)",
        "creativity": 0.35,
        "resemblance": 0.6,
        "guidance_scale": 4,
        "num_inference_steps": 18,
        "enable_safety_checker": false,
    })
}

/// The queue host's base URL.
pub fn base_url() -> String {
    let host = std::env::var("FAL_QUEUE_RUN_HOST")
        .ok()
        .map(|h| h.trim().trim_end_matches('/').to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "queue.fal.run".into());
    format!("https://{host}")
}

pub struct Generated {
    /// `images` of the result, or its single `image` (the upscaler's shape).
    pub images: Vec<Value>,
}

fn read_json(response: &mut ureq::http::Response<ureq::Body>) -> Result<Value, String> {
    let text = response
        .body_mut()
        .with_config()
        .limit(64 * 1024 * 1024)
        .read_to_string()
        .map_err(|e| format!("cannot read FAL's answer: {e}"))?;
    serde_json::from_str(&text).map_err(|_| {
        let clipped: String = text.chars().take(300).collect();
        format!("FAL's answer is not JSON: {clipped}")
    })
}

fn status_error(what: &str, status: u16, body: &Value) -> String {
    let detail = body
        .get("detail")
        .map(|d| match d {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .unwrap_or_else(|| body.to_string());
    let clipped: String = detail.chars().take(300).collect();
    format!("FAL {what} failed with HTTP {status}: {clipped}")
}

/// GET a queue URL with the key; the JSON of a 2xx answer.
fn get(agent: &ureq::Agent, url: &str, auth: &str, what: &str) -> Result<Value, String> {
    let mut response = agent
        .get(url)
        .header("Authorization", auth)
        .call()
        .map_err(|e| format!("cannot reach FAL at {}: {e}", base_url()))?;
    let code = response.status().as_u16();
    let answer = read_json(&mut response)?;
    if !(200..300).contains(&code) {
        return Err(status_error(what, code, &answer));
    }
    Ok(answer)
}

/// Submits `body` to `endpoint`, waits for it within `timeout`, returns its result.
pub fn run(
    key: &str,
    endpoint: &str,
    body: &Value,
    idempotency_key: &str,
    timeout: Duration,
) -> Result<Generated, String> {
    let base = base_url();
    let agent = hermes_net::operator_agent(Duration::from_secs(60));
    let auth = format!("Key {key}");
    let mut response = agent
        .post(&format!("{base}/{endpoint}"))
        .header("Authorization", &auth)
        .header("Content-Type", "application/json")
        .header("x-idempotency-key", idempotency_key)
        .send(body.to_string())
        .map_err(|e| format!("cannot reach FAL at {base}: {e}"))?;
    let status = response.status().as_u16();
    let submitted = read_json(&mut response)?;
    if !(200..300).contains(&status) {
        return Err(status_error("submit", status, &submitted));
    }
    let own = |field: &str| -> Result<String, String> {
        let url = submitted
            .get(field)
            .and_then(Value::as_str)
            .ok_or_else(|| format!("FAL's submit answer has no {field}"))?;
        // The key is sent to the queue host alone.
        if !url.starts_with(&format!("{base}/")) {
            return Err(format!("FAL's {field} is not on {base}; not following it"));
        }
        Ok(url.to_string())
    };
    let status_url = own("status_url")?;
    let response_url = own("response_url")?;
    let deadline = Instant::now() + timeout;
    let mut pause = Duration::from_millis(200);
    loop {
        let answer = get(&agent, &status_url, &auth, "status")?;
        match answer.get("status").and_then(Value::as_str) {
            Some("COMPLETED") => break,
            Some("IN_QUEUE") | Some("IN_PROGRESS") => {}
            other => return Err(format!("FAL reported an unknown status: {other:?}")),
        }
        if Instant::now() + pause > deadline {
            return Err(format!(
                "FAL did not finish within {} s (image_gen.timeout)",
                timeout.as_secs()
            ));
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_secs(2));
    }
    let result = get(&agent, &response_url, &auth, "result")?;
    let images = match (result.get("images"), result.get("image")) {
        (Some(Value::Array(images)), _) => images.clone(),
        (_, Some(image @ Value::Object(_))) => vec![image.clone()],
        _ => return Err("Invalid response from FAL.ai API — no images returned".into()),
    };
    Ok(Generated { images })
}
