//! FAL's queue API: submit to `https://queue.fal.run/{model}` (or `FAL_QUEUE_RUN_HOST`),
//! poll the `status_url` the submit answer names until `COMPLETED`, read the
//! `response_url`. The key goes only to that host, as `Authorization: Key ...`.

use serde_json::{json, Map, Value};
use std::time::{Duration, Instant};

/// How a model takes its size.
#[derive(Clone, Copy)]
enum SizeStyle {
    /// `image_size`: a preset name or a literal.
    ImageSize,
    /// `aspect_ratio`: "16:9", "1:1", "9:16".
    AspectRatio,
}

/// One model of the catalog.
pub struct FalModel {
    pub id: &'static str,
    pub display: &'static str,
    style: SizeStyle,
    /// landscape, square, portrait.
    sizes: [&'static str; 3],
    defaults: &'static [(&'static str, DefaultValue)],
    supports: &'static [&'static str],
    /// The image-to-image endpoint; it takes `image_urls` and the keys of `supports`
    /// but `image_size` (the output takes the source's size).
    pub edit_endpoint: Option<&'static str>,
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

pub const MODELS: &[FalModel] = &[
    FalModel {
        id: "fal-ai/flux-2/klein/9b",
        display: "FLUX 2 Klein 9B",
        style: SizeStyle::ImageSize,
        sizes: ["landscape_16_9", "square_hd", "portrait_16_9"],
        defaults: &[
            ("num_inference_steps", DefaultValue::Int(4)),
            ("output_format", DefaultValue::Text("png")),
            ("enable_safety_checker", DefaultValue::Bool(false)),
        ],
        supports: &[
            "prompt",
            "image_size",
            "num_inference_steps",
            "seed",
            "output_format",
            "enable_safety_checker",
        ],
        edit_endpoint: Some("fal-ai/flux-2/klein/9b/edit"),
        max_reference_images: 9,
    },
    FalModel {
        id: "fal-ai/flux-2-pro",
        display: "FLUX 2 Pro",
        style: SizeStyle::ImageSize,
        sizes: ["landscape_16_9", "square_hd", "portrait_16_9"],
        defaults: &[
            ("num_inference_steps", DefaultValue::Int(50)),
            ("guidance_scale", DefaultValue::Float(4.5)),
            ("num_images", DefaultValue::Int(1)),
            ("output_format", DefaultValue::Text("png")),
            ("enable_safety_checker", DefaultValue::Bool(false)),
            ("safety_tolerance", DefaultValue::Text("5")),
            ("sync_mode", DefaultValue::Bool(true)),
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
        edit_endpoint: Some("fal-ai/flux-2-pro/edit"),
        max_reference_images: 9,
    },
    FalModel {
        id: "fal-ai/z-image/turbo",
        display: "Z-Image Turbo",
        style: SizeStyle::ImageSize,
        sizes: ["landscape_16_9", "square_hd", "portrait_16_9"],
        defaults: &[
            ("num_inference_steps", DefaultValue::Int(8)),
            ("num_images", DefaultValue::Int(1)),
            ("output_format", DefaultValue::Text("png")),
            ("enable_safety_checker", DefaultValue::Bool(false)),
            ("enable_prompt_expansion", DefaultValue::Bool(false)),
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
        edit_endpoint: None,
        max_reference_images: 0,
    },
    FalModel {
        id: "fal-ai/nano-banana-pro",
        display: "Nano Banana Pro (Gemini 3 Pro Image)",
        style: SizeStyle::AspectRatio,
        sizes: ["16:9", "1:1", "9:16"],
        defaults: &[
            ("num_images", DefaultValue::Int(1)),
            ("output_format", DefaultValue::Text("png")),
            ("safety_tolerance", DefaultValue::Text("5")),
            ("resolution", DefaultValue::Text("1K")),
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
        edit_endpoint: Some("fal-ai/nano-banana-pro/edit"),
        max_reference_images: 2,
    },
];

/// The configured model (`image_gen.model`), or the default when unset or unknown.
pub fn model(configured: Option<&str>) -> &'static FalModel {
    configured
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

/// The request body for text-to-image (`sources` empty) or an edit.
pub fn payload(model: &FalModel, prompt: &str, aspect: &str, sources: &[String]) -> Value {
    let edit = !sources.is_empty();
    let mut body = Map::new();
    for (key, value) in model.defaults {
        body.insert((*key).into(), value.json());
    }
    body.insert("prompt".into(), json!(prompt.trim()));
    if edit {
        body.insert("image_urls".into(), json!(sources));
    }
    let size = model.sizes[size_index(aspect)];
    match model.style {
        SizeStyle::ImageSize => body.insert("image_size".into(), json!(size)),
        SizeStyle::AspectRatio => body.insert("aspect_ratio".into(), json!(size)),
    };
    body.retain(|k, _| {
        k == "prompt"
            || (edit && k == "image_urls")
            || (model.supports.contains(&k.as_str()) && !(edit && k == "image_size"))
    });
    Value::Object(body)
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
    let images = result
        .get("images")
        .and_then(Value::as_array)
        .cloned()
        .ok_or("Invalid response from FAL.ai API — no images returned")?;
    Ok(Generated { images })
}
