//! Result shapes more than one file tool answers with: an error with extra fields, a
//! failed patch and its nudge, and the warning that a file changed since it was seen.

use super::disk::Disk;
use super::guard::FileState;
use hermes_runtime::output::tool_error_with;
use hermes_runtime::prelude::*;
use std::path::Path;

/// `{"error": message, ...extra}` as a normal (model-facing) result.
pub(super) fn error_with(message: impl std::fmt::Display, extra: &[(&str, Value)]) -> ToolOutput {
    ToolOutput::Text(tool_error_with(message, extra))
}

/// A failed patch: `{"error", "success": false, "_hint"?}`.
pub(super) fn patch_error(message: &str, hint: Option<String>) -> ToolOutput {
    let mut extra = vec![("success", json!(false))];
    if let Some(hint) = hint {
        extra.push(("_hint", json!(hint)));
    }
    error_with(message, &extra)
}

/// The nudge after a failed patch, firmer from the third failure in a row on a file.
pub(super) fn failure_hint(failures: u32, path: &str) -> String {
    if failures >= 3 {
        format!(
            "This is failed patch number {failures} in a row on {path}. STOP guessing: read_file the region you \
             want to change, copy old_string from it character for character (without the `N|` prefixes), or \
             rewrite the file with write_file."
        )
    } else {
        "Copy old_string exactly from a fresh read_file of the file (without the `N|` prefixes), including \
         whitespace, and add surrounding lines if it is not unique."
            .to_string()
    }
}

/// A warning when the file changed on disk since this task last read or wrote it.
pub(super) fn stale_warning(
    disk: &dyn Disk,
    state: &FileState,
    target: &Path,
    shown: &str,
) -> Option<String> {
    let seen = state.last_seen(&disk.state_key(target))?;
    let now = disk.stamp(target)?;
    (seen != now).then(|| {
        format!(
            "{shown} changed on disk since you last read it (another process or tool edited it); \
             those changes may have been overwritten. Read it again to check."
        )
    })
}
