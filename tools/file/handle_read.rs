//! read_file's work, on this machine and in a task's environment: the repeat guard, the
//! refusals (missing, directory, device, deny-read, binary), the dedup stub and the page.

use super::guard::{Dedup, FileState, Stamp, BLOCK_AT, WARN_AT};
use super::replies::error_with;
use super::{disk, paths, read, remote, MAX_READ_CHARS};
use hermes_runtime::prelude::*;
use std::path::Path;

/// read_file on this machine: the repeat guard, then the refusals (missing, directory,
/// device, deny-read, binary by name), the dedup stub, and the page.
pub(super) fn read_local(
    state: &FileState,
    path: &str,
    offset: u64,
    limit: u64,
    ctx: &ToolContext,
) -> ToolResult {
    let resolved = paths::locate(ctx, path);
    let repeat_warning = match read_streak(
        state,
        &resolved.display().to_string(),
        path,
        offset,
        limit,
        ctx,
    ) {
        Ok(warning) => warning,
        Err(blocked) => return Ok(blocked),
    };

    let probed = match paths::probe_regular(&resolved) {
        Ok(probed) => probed,
        Err(paths::OpenError::NotFound) => return Ok(not_found(path, &resolved)),
        Err(paths::OpenError::Directory) => return Ok(is_a_directory(path)),
        Err(paths::OpenError::NotRegular(what)) => return Ok(not_regular(path, what)),
        Err(paths::OpenError::Io(e)) => {
            return Ok(ToolOutput::error(format!("Cannot read {path}: {e}")))
        }
    };
    // Checked on the path the kernel gives for what was opened: a symlink to a secret
    // is refused like the secret.
    if let Some(refusal) = crate::file_access::read_refusal(ctx, &probed.real, "Read", path) {
        return Ok(ToolOutput::error(refusal));
    }
    let (stamp, len) = (Stamp::of(&probed.meta), probed.meta.len());
    if let Some(kind) = paths::binary_extension(&resolved) {
        return Ok(binary_refusal(path, kind, len));
    }
    // Before the file is opened: an unchanged region read before is answered from the
    // records alone. A file refused as binary by its content was never recorded.
    if let Some(answer) = dedup_answer(
        state,
        path,
        &probed.real,
        offset,
        limit,
        stamp,
        &repeat_warning,
    ) {
        return Ok(answer);
    }
    // The real path the kernel reports for the open file: what `state_key` would find.
    let (mut file, _, real) = match probed.open() {
        Ok(opened) => opened,
        Err(paths::OpenError::Io(e)) => {
            return Ok(ToolOutput::error(format!("Cannot read {path}: {e}")))
        }
        Err(_) => return Ok(not_regular(path, "not a regular file")),
    };
    let head = match paths::Head::read(&mut file, len) {
        Ok(head) => head,
        Err(e) => return Ok(ToolOutput::error(format!("Cannot read {path}: {e}"))),
    };
    if head.has_nul() {
        return Ok(binary_refusal(path, paths::BinaryKind::Other, len));
    }
    page_answer(
        state,
        path,
        &real,
        stamp,
        len,
        head.then_rest(file),
        offset,
        limit,
        repeat_warning,
    )
}

/// read_file in the task's environment: the same checks and pages, on the bytes read there.
pub(super) fn read_in_env(
    remote: &remote::Remote,
    state: &FileState,
    path: &str,
    offset: u64,
    limit: u64,
    ctx: &ToolContext,
) -> ToolResult {
    let probe = match remote.probe(path, true) {
        Ok(probe) => probe,
        Err(e) => return Ok(ToolOutput::error(format!("Cannot read {path}: {e}"))),
    };
    let key = remote.state_key(&probe.real);
    let repeat_warning =
        match read_streak(state, &key.display().to_string(), path, offset, limit, ctx) {
            Ok(warning) => warning,
            Err(blocked) => return Ok(blocked),
        };
    if remote::is_device_path(&probe.real) {
        return Ok(not_regular(path, "a device or kernel file"));
    }
    let content = match probe.kind {
        remote::Kind::Missing => {
            return Ok(not_found_among(
                path,
                paths::similar_names(Path::new(&probe.real), path, probe.siblings),
            ))
        }
        remote::Kind::Dir => return Ok(is_a_directory(path)),
        remote::Kind::Special => {
            return Ok(not_regular(
                path,
                "not a regular file (a device, socket or pipe)",
            ))
        }
        remote::Kind::File => match disk::probe_bytes(&probe) {
            Ok(Some(content)) => content,
            Ok(None) => return Ok(not_found_among(path, Vec::new())),
            Err(e) => return Ok(ToolOutput::error(format!("Cannot read {path}: {e}"))),
        },
    };
    let binary = paths::binary_extension(Path::new(&probe.real))
        .or_else(|| paths::has_nul(&content).then_some(paths::BinaryKind::Other));
    if let Some(kind) = binary {
        return Ok(binary_refusal(path, kind, probe.len));
    }
    let stamp = Stamp {
        mtime: probe.mtime,
        len: probe.len,
    };
    if let Some(answer) = dedup_answer(state, path, &key, offset, limit, stamp, &repeat_warning) {
        return Ok(answer);
    }
    page_answer(
        state,
        path,
        &key,
        stamp,
        probe.len,
        content.as_slice(),
        offset,
        limit,
        repeat_warning,
    )
}

/// Counts an identical read in a row: the warning for the third, the refusal from the fourth.
fn read_streak(
    state: &FileState,
    resolved: &str,
    path: &str,
    offset: u64,
    limit: u64,
    ctx: &ToolContext,
) -> Result<Option<String>, ToolOutput> {
    let streak = state.note_call(
        format!("read_file\0{resolved}\0{offset}\0{limit}"),
        ctx.activity_epoch(),
    );
    if streak >= BLOCK_AT {
        return Err(error_with(
            format!(
                "BLOCKED: this is read number {streak} in a row of {path} with the same offset and limit. \
                 The content you already have is what the file holds. Do NOT read it again: act on it, \
                 or read a different region."
            ),
            &[("path", json!(path)), ("already_read", json!(streak))],
        ));
    }
    Ok((streak == WARN_AT).then(|| {
        format!(
            "You have read this exact region of {path} {streak} times in a row. The next identical read will be \
             refused: use what you already have or change approach."
        )
    }))
}

fn is_a_directory(path: &str) -> ToolOutput {
    error_with(
        format!("{path} is a directory, not a file."),
        &[(
            "hint",
            json!("List its files with search_files (target \"files\"), then read one of them."),
        )],
    )
}

fn not_regular(path: &str, what: &str) -> ToolOutput {
    ToolOutput::error(format!("Refusing to read {path}: it is {what}, which can block, stream without end or expose memory."))
}

fn binary_refusal(path: &str, kind: paths::BinaryKind, len: u64) -> ToolOutput {
    let hint = match kind {
        paths::BinaryKind::Image => "This is an image: use vision_analyze to look at it.",
        paths::BinaryKind::Other => {
            "Inspect binary files with terminal commands (file, xxd, strings, unzip -l) instead."
        }
    };
    error_with(
        format!("Cannot read {path}: it is a binary file, not text."),
        &[
            ("is_binary", json!(true)),
            ("file_size", json!(len)),
            ("hint", json!(hint)),
        ],
    )
}

/// The answer of the dedup cache for a region read before, unchanged since: the stub,
/// or the refusal once too many stubs were handed out; `None` when it must be read.
fn dedup_answer(
    state: &FileState,
    path: &str,
    key: &Path,
    offset: u64,
    limit: u64,
    stamp: Stamp,
    repeat_warning: &Option<String>,
) -> Option<ToolOutput> {
    match state.dedup(key, offset, limit, stamp) {
        Dedup::Read => None,
        Dedup::Stub => {
            let mut stub = json!({
                "status": "unchanged",
                "message": "This region of the file has not changed since you last read it; the content from that \
                            read is still current. Work from it instead of reading again.",
                "path": path,
                "dedup": true,
                "content_returned": false,
            });
            if let Some(warning) = repeat_warning {
                stub["_warning"] = json!(warning);
            }
            Some(ToolOutput::json(&stub))
        }
        Dedup::Blocked(times) => Some(error_with(
            format!(
                "BLOCKED: you have asked for this region of {path} {times} times and the file has NOT changed. \
                 STOP calling read_file for it: the content from your earlier read is still current."
            ),
            &[("path", json!(path)), ("already_read", json!(times))],
        )),
    }
}

/// The page of a text file, recorded as read.
#[allow(clippy::too_many_arguments)]
fn page_answer(
    state: &FileState,
    path: &str,
    key: &Path,
    stamp: Stamp,
    len: u64,
    source: impl std::io::Read,
    offset: u64,
    limit: u64,
    repeat_warning: Option<String>,
) -> ToolResult {
    let page = match read::read_page(source, offset, limit, MAX_READ_CHARS) {
        Ok(page) => page,
        Err(e) => return Ok(ToolOutput::error(format!("Cannot read {path}: {e}"))),
    };
    state.record_read(key, offset, limit, stamp);

    let shown_any = page.last > 0;
    let truncated = shown_any && page.last < page.total_lines;
    let mut next_offset = None;
    let hint = if truncated {
        next_offset = Some(page.last + 1);
        let why = if page.char_cut {
            format!(" (the page stopped at about {MAX_READ_CHARS} characters)")
        } else {
            String::new()
        };
        Some(format!(
            "Showing lines {}-{} of {}{why}. Use offset={} to continue.",
            page.first,
            page.last,
            page.total_lines,
            page.last + 1
        ))
    } else if page.total_lines == 0 {
        Some("The file is empty.".to_string())
    } else if !shown_any {
        Some(format!(
            "offset {offset} is past the end of the file, which has {} lines.",
            page.total_lines
        ))
    } else {
        None
    };
    let mut notes = Vec::new();
    if page.lossy {
        notes.push(
            "The file is not valid UTF-8: undecodable bytes are shown as \u{fffd}.".to_string(),
        );
    }
    if page.clipped {
        notes.push(format!(
            "Lines longer than {} characters were clipped and end with `{}`.",
            read::MAX_LINE_CHARS,
            read::LINE_CLIP_MARKER
        ));
    }
    Ok(ToolOutput::json(&PageResult {
        content: &page.content,
        total_lines: page.total_lines,
        file_size: len,
        truncated,
        next_offset,
        hint,
        note: (!notes.is_empty()).then(|| notes.join(" ")),
        warning: repeat_warning,
    }))
}

/// read_file's answer for a page, its fields in this order, serialised straight from
/// the page (no JSON map is built for it).
#[derive(serde::Serialize)]
struct PageResult<'a> {
    content: &'a str,
    total_lines: u64,
    file_size: u64,
    truncated: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    next_offset: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    hint: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<String>,
    #[serde(rename = "_warning", skip_serializing_if = "Option::is_none")]
    warning: Option<String>,
}

fn not_found(given: &str, resolved: &Path) -> ToolOutput {
    not_found_among(given, paths::similar_files(resolved, given))
}

fn not_found_among(given: &str, similar: Vec<String>) -> ToolOutput {
    let mut extra = Vec::new();
    if !similar.is_empty() {
        extra.push(("similar_files", json!(similar)));
    }
    extra.push((
        "hint",
        json!("Check the path, or find the file with search_files (target \"files\")."),
    ));
    error_with(format!("File not found: {given}"), &extra)
}
