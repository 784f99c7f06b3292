//! Where an image a tool is given comes from: an http(s) URL (through the network
//! policy), a data URL, or a file (through the read policy, and inside the task's
//! environment on a non-local backend). vision_analyze and image_generate's source
//! images read them alike.

use hermes_net::{Fetcher, NetPolicy};
use hermes_runtime::config::Config;
use hermes_runtime::prelude::*;
use std::io::Read;
use std::time::Duration;

/// Seconds a download may take when `auxiliary.vision.download_timeout` is unset.
const DOWNLOAD_TIMEOUT_SECS: f64 = 30.0;

/// The image's bytes, from an http(s) URL (through the network policy), a data URL,
/// or a file (through the read policy; inside the task's environment on a non-local
/// backend).
pub fn load_image_source(
    source: &str,
    ctx: &ToolContext,
    config: &Config,
) -> Result<Vec<u8>, String> {
    let lower = source.to_ascii_lowercase();
    if lower.starts_with("data:") {
        return hermes_vision::decode_data_url(source)
            .map(|(bytes, _)| bytes)
            .map_err(|e| e.to_string());
    }
    if lower.starts_with("http://") || lower.starts_with("https://") {
        let timeout = config
            .get("auxiliary.vision.download_timeout")
            .and_then(Value::as_f64)
            .filter(|t| t.is_finite() && *t > 0.0)
            .unwrap_or(DOWNLOAD_TIMEOUT_SECS);
        let fetcher = Fetcher::new(NetPolicy::from_config(config, ctx.hermes_home()));
        return hermes_vision::fetch_image(&fetcher, source, Duration::from_secs_f64(timeout))
            .map_err(|e| e.to_string());
    }
    let path = if lower.starts_with("file://") {
        &source[7..]
    } else {
        source
    };
    if path.contains("://") {
        return Err(
            "Invalid image source. Provide an http(s) URL, a data: URL or a file path.".into(),
        );
    }
    read_file_bytes(path, ctx)
}

fn read_file_bytes(path: &str, ctx: &ToolContext) -> Result<Vec<u8>, String> {
    match hermes_environments::files::for_task(ctx) {
        Some(Ok(remote)) => {
            let probe = remote
                .probe(path, true)
                .map_err(|e| format!("Cannot read {path}: {e}"))?;
            if hermes_environments::files::is_device_path(&probe.real) {
                return Err(format!("Cannot read {path}: it is a device or kernel file"));
            }
            return match probe.kind {
                hermes_environments::files::Kind::Missing => {
                    Err(format!("image file not found: '{path}'"))
                }
                hermes_environments::files::Kind::File => probe.content.ok_or_else(|| {
                    format!(
                        "Cannot read {path}: it is {} bytes, more than the task's environment \
                         gives the file tools",
                        probe.len
                    )
                }),
                _ => Err(format!("Cannot read {path}: it is not a regular file")),
            };
        }
        Some(Err(e)) => return Err(e),
        None => {}
    }
    let relative = !(path.starts_with('/') || path == "~" || path.starts_with("~/"));
    let located = if relative {
        hermes_environments::env::local_task_cwd(ctx.task_id())
            .unwrap_or_else(|| ctx.cwd().to_path_buf())
            .join(path)
    } else {
        ctx.resolve_path(path)
    };
    let located = crate::file_access::normalize(&located);
    if crate::file_access::is_device_path(&located) {
        return Err(format!("Cannot read {path}: it is a device or kernel file"));
    }
    // Non-blocking, so a FIFO or device swapped in for the path cannot hang the call
    // (it is refused below as not a regular file).
    let opened = {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
            .open(&located)
    };
    let file = opened.map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => format!("image file not found: '{path}'"),
        _ => format!("Cannot read {path}: {e}"),
    })?;
    let meta = file
        .metadata()
        .map_err(|e| format!("Cannot read {path}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("Cannot read {path}: it is not a regular file"));
    }
    // The read policy judges the file that was opened, every symlink followed.
    let real = std::fs::read_link(format!("/proc/self/fd/{}", {
        use std::os::fd::AsRawFd;
        file.as_raw_fd()
    }))
    .unwrap_or_else(|_| std::fs::canonicalize(&located).unwrap_or(located.clone()));
    if let Some(refusal) = crate::file_access::read_refusal(ctx, &real, "Read", path) {
        return Err(refusal);
    }
    let cap = hermes_vision::MAX_INGEST_BYTES as u64;
    if meta.len() > cap {
        return Err(format!(
            "The image is larger than the {} MB limit.",
            cap / (1024 * 1024)
        ));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(cap + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("Cannot read {path}: {e}"))?;
    Ok(bytes)
}
