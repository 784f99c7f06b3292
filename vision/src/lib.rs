//! Images for the model: one path from "something the model pointed at" to "an image a
//! vision model accepts", shared by `vision_analyze`, `image_generate` and
//! `browser_vision`.
//!
//! # Loading
//! - [`ImageType::sniff`]: the type by magic bytes (PNG, JPEG, GIF, WebP, BMP; SVG by its
//!   `<svg` root). File names and declared content types are never trusted.
//! - [`decode_data_url`]: the bytes of a `data:...;base64,...` URL (capped).
//! - [`fetch_image`]: GET a URL the model supplied through [`hermes_net::Fetcher::get`]
//!   (screening, DNS pinning, redirects screened per hop, the body cap), retried only
//!   on 429, 5xx and transport failures (2 s, 4 s backoff, three tries in all).
//!
//! # Preparing
//! - [`prepare`]: bytes to a [`PreparedImage`] within [`Caps`]: BMP re-encoded as PNG,
//!   SVG rasterised to PNG, anything over [`Caps::max_side`] pixels on a side or whose
//!   data URL exceeds [`Caps::max_data_url_bytes`] downscaled (PNG stays PNG, the rest
//!   become JPEG at falling quality). [`PreparedImage::data_url`] is what goes into a
//!   chat message; images already within the caps pass through unchanged.
//!
//! # The auxiliary vision model
//! - [`AuxVision::resolve`]: the endpoint from config.yaml `auxiliary.vision.*`
//!   (`provider`, `model`, `base_url`, `api_key`, `timeout`, `temperature`) and the
//!   provider keys in the environment, or with `provider: auto` the chain of the main
//!   model (when it reads images), OpenRouter and DeepInfra; `Err` is the reason none
//!   is available, for availability checks.
//! - [`AuxVision::analyze`] / [`AuxVision::ask`]: an OpenAI-compatible
//!   `POST {base_url}/chat/completions` with a text part and an `image_url` part; the
//!   answer's text (or its reasoning when the content is empty). An image refused as
//!   too large is sent once more, smaller; in the `auto` chain an endpoint that cannot
//!   serve (key, credits, rate limit, unreachable) hands over to the next. API keys are
//!   sent only as bearer headers and never appear in an error.
//!
//! # Results that carry the image itself
//! - [`multimodal_result`]: the tool-result envelope
//!   `{"_multimodal": true, "content": [text, image_url], "text_summary", "meta"}` that
//!   callers able to take images (`serve`, `mcp`, the agent loop) unwrap;
//!   [`split_multimodal`] unwraps it into text plus [`ImagePart`]s;
//!   [`ImagePart::mcp_content`] is the MCP `{"type": "image", "data", "mimeType"}` form.

mod aux;
mod content;
mod prepare;
mod sniff;
mod source;

pub use aux::{Answer, AuxError, AuxVision, Failure, DEFAULT_TIMEOUT_SECS};
pub use content::{multimodal_result, split_multimodal, ImagePart, MULTIMODAL_KEY};
pub use prepare::{prepare, Caps, ImageError, PreparedImage};
pub use sniff::ImageType;
pub use source::{decode_data_url, fetch_image, FETCH_TRIES, MAX_INGEST_BYTES};
