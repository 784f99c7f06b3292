//! patch in mode `replace`: one find-and-replace edit of one file, through the shared
//! matcher ([`crate::shared::find_replace`]), with its refusals, the already-applied
//! answer, the syntax check and the checked replacement.

use super::disk::Disk;
use super::guard::FileState;
use super::replies::{error_with, failure_hint, patch_error, stale_warning};
use super::{patch, paths, syntax, write};
use hermes_runtime::prelude::*;

/// The edit of `path`: `old_string` found (exactly once unless `replace_all`) and
/// replaced by `new_string`.
pub(super) fn patch_replace(
    disk: &dyn Disk,
    ctx: &ToolContext,
    state: &FileState,
    path: &str,
    old_string: &str,
    new_string: &str,
    replace_all: bool,
) -> ToolResult {
    let target = match disk.write_target(ctx, path, "Patch") {
        Ok(target) => target,
        Err(refusal) => return Ok(patch_error(&refusal, None)),
    };
    let _lock = match disk.lock(&target) {
        Ok(lock) => lock,
        Err(e) => return Ok(patch_error(&format!("Cannot patch {path}: {e}"), None)),
    };
    let bytes = match disk.current_bytes(&target) {
        Ok(Some(bytes)) => bytes,
        Ok(None) => {
            let similar = disk.similar_files(ctx, &target, path);
            let mut extra = vec![("success", json!(false))];
            if !similar.is_empty() {
                extra.push(("similar_files", json!(similar)));
            }
            extra.push(("_hint", json!("To create a new file, use write_file.")));
            return Ok(error_with(format!("File not found: {path}"), &extra));
        }
        Err(e) => return Ok(patch_error(&format!("Refusing to patch {path}: {e}"), None)),
    };
    if paths::binary_extension(&target).is_some() || paths::has_nul(&bytes) {
        return Ok(patch_error(
            &format!("Refusing to patch {path}: it is a binary file."),
            None,
        ));
    }
    let Ok(raw) = String::from_utf8(bytes) else {
        return Ok(patch_error(
            &format!("Cannot patch {path}: it is not valid UTF-8 text. Rewrite it with write_file if you must."),
            None,
        ));
    };
    let style = write::Style::detect(raw.as_bytes());
    // A plain file needs no conversion: spare a large file two copies.
    let plain = style == write::Style::default();
    // The bytes read, kept for the check that nothing changed them before the rename.
    let (text, converted_from) = if plain {
        (raw, None)
    } else {
        (style.to_model(&raw), Some(raw))
    };
    let old = old_string.replace("\r\n", "\n");
    let new = new_string.replace("\r\n", "\n");
    let key = disk.state_key(&target);
    if old == new {
        return Ok(ToolOutput::json(&json!({
            "success": true,
            "no_change": true,
            "note": "old_string and new_string are identical: nothing to change.",
            "diff": "",
            "files_modified": [],
            "files_created": [],
            "files_deleted": [],
        })));
    }
    let found = match patch::find(&text, &old) {
        Ok(found) => found,
        Err(patch::Miss::NotFound(_)) if patch::already_applied(&text, &new, replace_all) => {
            state.patch_succeeded(&key);
            return Ok(ToolOutput::json(&json!({
                "success": true,
                "no_change": true,
                "already_applied": true,
                "note": "old_string is not in the file but new_string is: the edit was already made, nothing was changed.",
                "diff": "",
                "files_modified": [],
                "files_created": [],
                "files_deleted": [],
            })));
        }
        Err(patch::Miss::NotFound(why)) => {
            let failures = state.patch_failed(&key);
            let mut message = format!("Could not find old_string in {path}.");
            if let Some(why) = why {
                message.push_str(&format!(" ({why}.)"));
            }
            match patch::closest_region(&text, &old) {
                Some((line, snippet, _)) => message.push_str(&format!(
                    " The most similar region starts at line {line}:\n{snippet}"
                )),
                None => message.push_str(" Nothing in the file looks like it."),
            }
            return Ok(patch_error(&message, Some(failure_hint(failures, path))));
        }
        Err(patch::Miss::Ambiguous(why)) => {
            let failures = state.patch_failed(&key);
            return Ok(patch_error(
                &format!("Not applied to {path}: {why}."),
                Some(failure_hint(failures, path)),
            ));
        }
    };
    let count = found.ranges.len();
    if count > 1 && !replace_all {
        let failures = state.patch_failed(&key);
        return Ok(patch_error(
            &format!(
                "old_string matches {count} places in {path}. Include more surrounding lines so it matches \
                 exactly one, or set replace_all to true to change all {count}."
            ),
            Some(failure_hint(failures, path)),
        ));
    }
    let updated = found.apply(&text, &new);
    if updated == text {
        state.patch_succeeded(&key);
        return Ok(ToolOutput::json(&json!({
            "success": true,
            "no_change": true,
            "note": "The replacement leaves the file as it was.",
            "diff": "",
            "files_modified": [],
            "files_created": [],
            "files_deleted": [],
        })));
    }
    let lint = syntax::review(&target, path, Some(&text), &updated, ctx.hermes_home());
    if let Some(refusal) = lint.as_ref().and_then(|r| r.refusal.clone()) {
        let failures = state.patch_failed(&key);
        return Ok(error_with(
            refusal,
            &[
                ("success", json!(false)),
                ("lint", lint.map(|r| r.lint).unwrap_or(Value::Null)),
                ("_hint", json!(failure_hint(failures, path))),
            ],
        ));
    }
    let warning = stale_warning(disk, state, &target, path);
    let data = if plain {
        std::borrow::Cow::Borrowed(updated.as_str())
    } else {
        style.to_disk(&updated).into()
    };
    let base = converted_from.as_deref().unwrap_or(&text);
    if let Err(e) = disk.replace_checked(&target, Some(base.as_bytes()), data.as_bytes()) {
        return Ok(patch_error(
            &format!("Patch not applied to {path}: {e}"),
            None,
        ));
    }
    state.patch_succeeded(&key);
    state.record_write(&key, disk.stamp(&target));
    let mut result = json!({
        "success": true,
        "diff": patch::unified_diff(&text, &updated, &format!("a/{path}"), &format!("b/{path}")),
        "files_modified": [path],
        "files_created": [],
        "files_deleted": [],
        "replacements": count,
    });
    if found.strategy != patch::Strategy::Exact {
        result["note"] = json!(format!(
            "old_string was not found verbatim: {}.",
            found.strategy.describe()
        ));
        result["strategy"] = json!(format!("{:?}", found.strategy));
    }
    if let Some(report) = lint {
        result["lint"] = report.lint;
    }
    if let Some(warning) = warning {
        result["warning"] = json!(warning);
    }
    Ok(ToolOutput::json(&result))
}
