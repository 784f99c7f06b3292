//! Result budgets: a result over its tool's threshold is saved under
//! `$HERMES_HOME/cache/spillover/` and the model gets a preview that says where the
//! whole text is and how to page through it.
//!
//! The replacement is a JSON object like every result, the hints in its fields:
//! `{"persisted_output": true, "original_chars", "size", "path", "preview",
//! "preview_truncated", "hint"}`; when the text could not be saved, `path` is absent,
//! `truncated` is true and `hint` says why.

use crate::config::Config;
use serde_json::json;
use std::path::{Path, PathBuf};

pub const DEFAULT_RESULT_CHARS: usize = 100_000;
pub const DEFAULT_TURN_CHARS: usize = 200_000;
pub const PREVIEW_CHARS: usize = 1_500;
pub const MCP_RESULT_CHARS: usize = 50_000;
/// Tools whose results are never spilled: reading a spilled file must not spill again.
pub const PINNED_UNLIMITED: &[&str] = &["read_file"];

/// The threshold for one tool. Priority: pinned, a per-tool config override, the MCP
/// budget for `mcp_` tools, the tool's declared budget (never above the default),
/// the default.
pub fn result_threshold(tool: &str, declared: Option<usize>, config: &Config) -> usize {
    if PINNED_UNLIMITED.contains(&tool) {
        return usize::MAX;
    }
    if let Some(per_tool) = config.positive_usize(&format!("tool_budget.per_tool.{tool}")) {
        return per_tool;
    }
    let default = config
        .positive_usize("tool_budget.default_result_chars")
        .unwrap_or(DEFAULT_RESULT_CHARS);
    if tool.starts_with("mcp_") {
        let mcp = config
            .positive_usize("tool_budget.mcp_result_size_chars")
            .unwrap_or(MCP_RESULT_CHARS);
        return mcp.min(default);
    }
    match declared {
        Some(usize::MAX) => usize::MAX,
        Some(value) => value.min(default),
        None => default,
    }
}

/// Replaces `result` by a preview when it is longer than `threshold` characters.
pub fn apply_budget(result: String, threshold: usize, hermes_home: &Path, call_id: &str) -> String {
    let length = result.chars().count();
    if length <= threshold {
        return result;
    }
    persist(result, length, hermes_home, call_id)
}

fn safe_file_stem(call_id: &str) -> String {
    let cleaned: String = call_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(80)
        .collect();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    if cleaned.is_empty() {
        format!("result-{}-{nanos}", std::process::id())
    } else {
        format!("{cleaned}-{nanos}")
    }
}

fn human_size(chars: usize) -> String {
    if chars >= 1_000_000 {
        format!("{:.1} MB", chars as f64 / 1_000_000.0)
    } else {
        format!("{:.1} KB", chars as f64 / 1_000.0)
    }
}

fn preview(result: &str) -> (String, bool) {
    let cut = result
        .char_indices()
        .nth(PREVIEW_CHARS)
        .map_or(result.len(), |(i, _)| i);
    let mut head = &result[..cut];
    // A preview that ends mid-line reads badly; back off to the last newline if that
    // keeps at least half of it.
    if let Some(newline) = head.rfind('\n') {
        if newline >= cut / 2 {
            head = &head[..newline];
        }
    }
    (head.to_string(), cut < result.len())
}

/// Writes the whole result and returns the JSON object that stands for it.
pub fn persist(result: String, length: usize, hermes_home: &Path, call_id: &str) -> String {
    let directory = hermes_home.join("cache").join("spillover");
    let path = directory.join(format!("{}.txt", safe_file_stem(call_id)));
    let saved = write_private(&directory, &path, &result);
    let (head, more) = preview(&result);
    let size = human_size(length);
    let spilled = match saved {
        Ok(()) => json!({
            "persisted_output": true,
            "original_chars": length,
            "size": size,
            "path": path.display().to_string(),
            "preview": head,
            "preview_truncated": more,
            "hint": format!(
                "This result was {length} characters ({size}), more than fits here. The whole text is saved at {}. \
                 Read it in pages with read_file (offset/limit) or process it with a script instead of calling the tool again.",
                path.display()
            ),
        }),
        Err(e) => json!({
            "persisted_output": false,
            "original_chars": length,
            "size": size,
            "preview": head,
            "preview_truncated": more,
            "truncated": true,
            "hint": format!("This result was {length} characters; only the start is shown and the full output could not be saved: {e}"),
        }),
    };
    spilled.to_string()
}

/// Whether `result` is already a spilled result's stand-in.
pub fn is_spilled(result: &str) -> bool {
    result.starts_with("{\"persisted_output\":")
}

fn write_private(directory: &Path, path: &PathBuf, text: &str) -> std::io::Result<()> {
    std::fs::create_dir_all(directory)?;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    use std::io::Write;
    let mut file = options.open(path)?;
    file.write_all(text.as_bytes())?;
    file.sync_all()?;
    let written = std::fs::metadata(path)?.len();
    if written != text.len() as u64 {
        return Err(std::io::Error::other(format!(
            "wrote {written} of {} bytes",
            text.len()
        )));
    }
    Ok(())
}

/// Per turn: while the results together exceed `turn_budget`, spill the largest
/// result not yet spilled.
pub fn apply_turn_budget(
    results: &mut [String],
    turn_budget: usize,
    hermes_home: &Path,
    call_ids: &[String],
) {
    let mut spilled = vec![false; results.len()];
    loop {
        let total: usize = results.iter().map(|r| r.chars().count()).sum();
        if total <= turn_budget {
            return;
        }
        let largest = results
            .iter()
            .enumerate()
            .filter(|(i, r)| !spilled[*i] && !is_spilled(r))
            .max_by_key(|(_, r)| r.chars().count())
            .map(|(i, _)| i);
        let Some(index) = largest else { return };
        let text = std::mem::take(&mut results[index]);
        let length = text.chars().count();
        results[index] = persist(
            text,
            length,
            hermes_home,
            call_ids.get(index).map_or("", String::as_str),
        );
        spilled[index] = true;
    }
}
