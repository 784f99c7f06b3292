//! patch in mode `patch`: a V4A patch over several files, all or nothing. Every target
//! is checked and locked first, the plan ([`super::v4a`]) is made and syntax-checked in
//! memory, and only then are the files changed.

use super::disk::Disk;
use super::guard::FileState;
use super::replies::{error_with, failure_hint, patch_error, stale_warning};
use super::{paths, syntax, v4a};
use hermes_runtime::prelude::*;
use std::path::PathBuf;

/// The V4A patch `text` applied to every file it names, or to none.
pub(super) fn patch_v4a(
    disk: &dyn Disk,
    ctx: &ToolContext,
    state: &FileState,
    text: &str,
) -> ToolResult {
    let ops = match v4a::parse(text) {
        Ok(ops) => ops,
        Err(e) => {
            return Ok(patch_error(
                &format!("Invalid V4A patch: {e}"),
                Some("Check the format: `*** Begin Patch`, file headers, `@@` hunks of ` `/`-`/`+` lines, `*** End Patch`.".into()),
            ))
        }
    };
    let mut first_path = None;
    let mut targets: std::collections::HashMap<String, PathBuf> = Default::default();
    for op in &ops {
        let (shown, verb, move_to) = match op {
            v4a::Op::Add { path, .. } => (path, "Add", None),
            v4a::Op::Delete { path } => (path, "Delete", None),
            v4a::Op::Update { path, move_to, .. } => (path, "Update", move_to.as_ref()),
        };
        for (shown, verb) in std::iter::once((shown, verb)).chain(move_to.map(|to| (to, "Move"))) {
            let target = match disk.patch_target(ctx, shown, verb) {
                Ok(target) => target,
                Err(refusal) => {
                    return Ok(patch_error(
                        &format!("Patch not applied, no file was changed: {refusal}"),
                        None,
                    ))
                }
            };
            if disk.is_special(&target) {
                return Ok(patch_error(
                    &format!("Patch not applied, no file was changed: {shown} is not a regular file (a device, socket or pipe)."),
                    None,
                ));
            }
            targets.insert(shown.clone(), target);
        }
        first_path.get_or_insert_with(|| shown.clone());
    }
    // Every file of the patch stays locked until it is written.
    let _locks = match disk.lock_all(&targets.values().cloned().collect::<Vec<_>>()) {
        Ok(locks) => locks,
        Err(e) => {
            return Ok(patch_error(
                &format!("Patch not applied, no file was changed: {e}"),
                None,
            ))
        }
    };
    let resolve = |p: &str| {
        targets
            .get(p)
            .cloned()
            .unwrap_or_else(|| paths::locate(ctx, p))
    };
    let plan = match v4a::plan(&ops, resolve) {
        Ok(plan) => plan,
        Err(e) => {
            let shown = first_path.unwrap_or_default();
            let failures = state.patch_failed(&disk.state_key(&resolve(&shown)));
            return Ok(patch_error(
                &format!("Patch not applied, no file was changed: {e}"),
                Some(failure_hint(failures, &shown)),
            ));
        }
    };
    if !plan.changed {
        if plan.already_applied > 0 {
            return Ok(ToolOutput::json(&json!({
                "success": true,
                "no_change": true,
                "already_applied": true,
                "note": "Every change of this patch is already in the files: it was applied before, nothing was changed.",
                "diff": "",
                "files_modified": [],
                "files_created": [],
                "files_deleted": [],
            })));
        }
        return Ok(ToolOutput::json(&json!({
            "success": true,
            "no_change": true,
            "note": "The patch leaves every file as it was.",
            "diff": "",
            "files_modified": [],
            "files_created": [],
            "files_deleted": [],
        })));
    }
    let mut lint = serde_json::Map::new();
    for (target, shown, before, after) in &plan.checks {
        let Some(report) =
            syntax::review(target, shown, before.as_deref(), after, ctx.hermes_home())
        else {
            continue;
        };
        if let Some(refusal) = report.refusal {
            let failures = state.patch_failed(&disk.state_key(target));
            return Ok(error_with(
                format!("Patch not applied, no file was changed: {refusal}"),
                &[
                    ("success", json!(false)),
                    ("lint", json!({shown.clone(): report.lint})),
                    ("_hint", json!(failure_hint(failures, shown))),
                ],
            ));
        }
        lint.insert(shown.clone(), report.lint);
    }
    let mut warnings = Vec::new();
    for op in &ops {
        if let v4a::Op::Update { path, .. } | v4a::Op::Delete { path } = op {
            if let Some(w) = stale_warning(disk, state, &resolve(path), path) {
                warnings.push(w);
            }
        }
    }
    if let Err(e) = disk.apply(&plan) {
        return Ok(patch_error(
            &format!("Patch not applied (changes already made were undone): {e}"),
            None,
        ));
    }
    for touched in &plan.touched {
        state.record_write(&disk.state_key(touched), disk.stamp(touched));
        state.patch_succeeded(&disk.state_key(touched));
    }
    let mut result = json!({
        "success": true,
        "diff": plan.diff,
        "files_modified": plan.files_modified,
        "files_created": plan.files_created,
        "files_deleted": plan.files_deleted,
    });
    if plan.already_applied > 0 {
        result["already_applied_hunks"] = json!(plan.already_applied);
        result["note"] = json!(format!(
            "{} of the patch's changes were already in the files and were left as they are.",
            plan.already_applied
        ));
    }
    if !lint.is_empty() {
        result["lint"] = Value::Object(lint);
    }
    if !plan.files_moved.is_empty() {
        result["files_moved"] = json!(plan
            .files_moved
            .iter()
            .map(|(from, to)| json!({"from": from, "to": to}))
            .collect::<Vec<_>>());
    }
    if !warnings.is_empty() {
        result["warning"] = json!(warnings.join(" "));
    }
    Ok(ToolOutput::json(&result))
}
