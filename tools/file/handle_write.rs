//! write_file's work on a [`Disk`]: the refusals (directories, read_file's row
//! prefixes or dedup stub pasted as content, failed syntax checks), the kept line
//! endings and byte-order mark, and the checked, verified replacement.

use super::disk::Disk;
use super::guard::FileState;
use super::replies::{error_with, stale_warning};
use super::{syntax, write};
use hermes_runtime::prelude::*;

/// write_file on `disk`.
pub(super) fn write_with(
    disk: &dyn Disk,
    ctx: &ToolContext,
    path: &str,
    content: &str,
) -> ToolResult {
    let state = ctx.task_state::<FileState>();
    let target = match disk.write_target(ctx, path, "Write") {
        Ok(target) => target,
        Err(refusal) => return Ok(ToolOutput::error(refusal)),
    };
    if disk.is_dir(&target) {
        return Ok(ToolOutput::error(format!(
            "{path} is a directory; give a file path to write."
        )));
    }
    if write::looks_like_numbered_display(content) {
        return Ok(error_with(
            format!("Refusing to write {path}: the content carries read_file's `N|` line-number prefixes."),
            &[("hint", json!("Remove the `N|` prefix from every line and write the plain text."))],
        ));
    }
    if write::looks_like_dedup_stub(content) {
        return Ok(error_with(
            format!("Refusing to write {path}: the content is read_file's \"unchanged\" stub, not file text."),
            &[("hint", json!("Write the actual file content; the stub only means your earlier read is current."))],
        ));
    }
    let dirs_created = match disk.create_parents(&target) {
        Ok(n) => n,
        Err(e) => {
            return Ok(ToolOutput::error(format!(
                "Cannot create the directories for {path}: {e}"
            )))
        }
    };
    let _lock = match disk.lock(&target) {
        Ok(lock) => lock,
        Err(e) => return Ok(ToolOutput::error(format!("Cannot write {path}: {e}"))),
    };
    let existing = match disk.current_bytes(&target) {
        Ok(existing) => existing,
        Err(e) => return Ok(ToolOutput::error(format!("Refusing to write {path}: {e}"))),
    };
    let style = existing
        .as_deref()
        .map(write::Style::detect)
        .unwrap_or_default();
    let before = existing
        .as_deref()
        .and_then(|bytes| std::str::from_utf8(bytes).ok())
        .map(|text| style.to_model(text));
    let lint = syntax::review(&target, path, before.as_deref(), content, ctx.hermes_home());
    if let Some(report) = &lint {
        if let Some(refusal) = &report.refusal {
            return Ok(error_with(refusal, &[("lint", report.lint.clone())]));
        }
    }
    let warning = stale_warning(disk, &state, &target, path);
    let data = style.to_disk(content).into_bytes();
    if let Err(e) = disk.replace_checked(&target, existing.as_deref(), &data) {
        return Ok(ToolOutput::error(format!("Cannot write {path}: {e}")));
    }
    let verified = disk.holds(&target, &data);
    let key = disk.state_key(&target);
    state.record_write(&key, disk.stamp(&target));

    let mut result = json!({
        "bytes_written": data.len(),
        "dirs_created": dirs_created,
        "verified": verified,
    });
    let mut kept = Vec::new();
    if style.crlf && !content.contains("\r\n") {
        kept.push("CRLF line endings");
    }
    if style.bom && !content.starts_with('\u{feff}') {
        kept.push("the UTF-8 byte-order mark");
    }
    if !kept.is_empty() {
        result["note"] = json!(format!("Kept the file's {}.", kept.join(" and ")));
    }
    if let Some(report) = lint {
        result["lint"] = report.lint;
    }
    if let Some(warning) = warning {
        result["warning"] = json!(warning);
    }
    Ok(ToolOutput::json(&result))
}
