//! Where image bytes come from: data URLs and model-supplied http(s) URLs.

use crate::prepare::ImageError;
use base64::Engine;
use hermes_net::{FetchError, Fetcher, Limits};
use std::time::Duration;

/// Largest image read from any source (50 MB), before any downscaling.
pub const MAX_INGEST_BYTES: usize = 50 * 1024 * 1024;

/// Tries of one download: the first and two more after 429, 5xx or transport failures.
pub const FETCH_TRIES: u32 = 3;

/// The bytes and declared media type of a `data:` URL. Only base64 payloads are
/// accepted; the declared type is informative (the bytes decide).
pub fn decode_data_url(url: &str) -> Result<(Vec<u8>, String), ImageError> {
    let rest = url
        .get(..5)
        .filter(|p| p.eq_ignore_ascii_case("data:"))
        .map(|_| &url[5..])
        .ok_or_else(|| ImageError::NotAnImage("not a data: URL".into()))?;
    let (header, payload) = rest
        .split_once(',')
        .ok_or_else(|| ImageError::NotAnImage("the data: URL has no ',' before its data".into()))?;
    if !header
        .split(';')
        .any(|p| p.trim().eq_ignore_ascii_case("base64"))
    {
        return Err(ImageError::NotAnImage(
            "the data: URL must be base64-encoded (data:image/png;base64,...)".into(),
        ));
    }
    let declared = header.split(';').next().unwrap_or("").trim().to_string();
    let payload: String = payload.chars().filter(|c| !c.is_whitespace()).collect();
    if payload.len() / 4 * 3 > MAX_INGEST_BYTES {
        return Err(ImageError::TooLarge(format!(
            "The data: URL holds more than {} MB.",
            MAX_INGEST_BYTES / (1024 * 1024)
        )));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(payload.trim_end_matches('=').to_string() + pad(&payload))
        .map_err(|e| ImageError::NotAnImage(format!("invalid base64 in the data: URL: {e}")))?;
    Ok((bytes, declared))
}

fn pad(payload: &str) -> &'static str {
    match payload.trim_end_matches('=').len() % 4 {
        2 => "==",
        3 => "=",
        _ => "",
    }
}

/// GET `url` (model-supplied) through `fetcher`: screened, pinned, redirects screened,
/// at most [`MAX_INGEST_BYTES`], within `timeout` per try. A 2xx body is returned;
/// 429, 5xx, timeouts and transport failures are tried again (after 1 s, then 2 s),
/// refusals, oversize bodies and other statuses are not.
pub fn fetch_image(fetcher: &Fetcher, url: &str, timeout: Duration) -> Result<Vec<u8>, ImageError> {
    let limits = Limits {
        timeout,
        max_body_bytes: MAX_INGEST_BYTES as u64,
        max_redirects: 10,
    };
    let mut last = String::new();
    for attempt in 0..FETCH_TRIES {
        if attempt > 0 {
            std::thread::sleep(Duration::from_secs(1 << (attempt - 1)));
        }
        match fetcher.get(url, &limits) {
            Ok(fetched) if (200..300).contains(&fetched.status) => return Ok(fetched.body),
            Ok(fetched) if fetched.status == 429 || fetched.status >= 500 => {
                last = format!("the server answered HTTP {}", fetched.status);
            }
            Ok(fetched) => {
                return Err(ImageError::Source(format!(
                    "Could not download the image: the server answered HTTP {}",
                    fetched.status
                )))
            }
            Err(error @ (FetchError::Timeout(_) | FetchError::Transport(_))) => {
                last = error.to_string();
            }
            Err(FetchError::TooLarge { .. }) => {
                return Err(ImageError::TooLarge(format!(
                    "The image is larger than the {} MB download limit.",
                    MAX_INGEST_BYTES / (1024 * 1024)
                )))
            }
            Err(error) => {
                return Err(ImageError::Source(format!(
                    "Could not download the image: {error}"
                )))
            }
        }
    }
    Err(ImageError::Source(format!(
        "Could not download the image after {FETCH_TRIES} tries: {last}"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_urls() {
        let (bytes, mime) = decode_data_url("data:image/png;base64,aGVsbG8=").unwrap();
        assert_eq!(bytes, b"hello");
        assert_eq!(mime, "image/png");
        let (bytes, _) = decode_data_url("DATA:image/png;base64,aGVsbG8").unwrap();
        assert_eq!(bytes, b"hello");
        assert!(decode_data_url("data:image/png,hello").is_err());
        assert!(decode_data_url("data:image/png;base64,@@@").is_err());
        assert!(decode_data_url("https://x").is_err());
    }
}
