//! The `file` toolset: read_file, write_file, patch, search_files.
//!
//! The handlers here parse and check arguments and shape the JSON results; the work
//! lives in the helper modules beside this file.

use hermes_runtime::output::tool_error_with;
use hermes_runtime::prelude::*;
use std::path::{Path, PathBuf};

mod disk;
mod guard;
mod paths;
mod read;
mod remote_search;
mod search;
mod spliced;
mod syntax;
mod v4a;
pub(crate) mod write;

use crate::shared::find_replace as patch;
use guard::{Dedup, FileState, Stamp, BLOCK_AT, WARN_AT};
use hermes_environments::files as remote;

/// Characters of `N|line` rows one read_file call returns at most.
const MAX_READ_CHARS: usize = 100_000;
const DEFAULT_READ_LIMIT: u64 = 500;
const MAX_READ_LIMIT: u64 = 2000;
const DEFAULT_SEARCH_LIMIT: u64 = 50;
const MAX_SEARCH_LIMIT: u64 = 1000;
const MAX_SEARCH_CONTEXT: u64 = 10;

/// Read a text file: you get its lines numbered as `N|line`, one page at a time. Use this
/// instead of cat, head or tail in the terminal. When the file has more lines than one
/// page, the result has `truncated: true` and `next_offset`: call again with
/// offset=next_offset to continue. Lines over 2000 characters are clipped. Binary files and
/// devices are refused; look at images with vision_analyze. Reading the same unchanged
/// region again returns a short "unchanged" stub, because the copy you already have is
/// current. NEVER copy the `N|` prefixes into write_file or patch.
///
/// Pages are cut at about 100 000 characters on a line boundary. Reads are recorded per
/// task so write_file and patch can warn about files changed since they were read.
#[tool(
    toolset = "file",
    emoji = "📖",
    max_result_chars = 100_000,
    concurrency = "read_only"
)]
pub fn read_file(
    /// Path of the file: absolute, `~/...`, or relative to the working directory.
    path: String,
    /// Line number to start at, 1-based. Default 1.
    offset: Option<u64>,
    /// Most lines to return. Default 500, at most 2000.
    limit: Option<u64>,
    ctx: &ToolContext,
) -> ToolResult {
    if path.trim().is_empty() {
        return Ok(ToolOutput::error("path is empty: give the file to read"));
    }
    let state = ctx.task_state::<FileState>();
    let offset = offset.unwrap_or(1).max(1);
    let limit = limit.unwrap_or(DEFAULT_READ_LIMIT).clamp(1, MAX_READ_LIMIT);
    match remote::for_task(ctx) {
        Some(Ok(remote)) => return read_in_env(&remote, &state, &path, offset, limit, ctx),
        Some(Err(e)) => return Ok(ToolOutput::error(e)),
        None => {}
    }
    let resolved = paths::locate(ctx, &path);
    let repeat_warning = match read_streak(
        &state,
        &resolved.display().to_string(),
        &path,
        offset,
        limit,
        ctx,
    ) {
        Ok(warning) => warning,
        Err(blocked) => return Ok(blocked),
    };

    let probed = match paths::probe_regular(&resolved) {
        Ok(probed) => probed,
        Err(paths::OpenError::NotFound) => return Ok(not_found(&path, &resolved)),
        Err(paths::OpenError::Directory) => return Ok(is_a_directory(&path)),
        Err(paths::OpenError::NotRegular(what)) => return Ok(not_regular(&path, what)),
        Err(paths::OpenError::Io(e)) => {
            return Ok(ToolOutput::error(format!("Cannot read {path}: {e}")))
        }
    };
    // Checked on the path the kernel gives for what was opened: a symlink to a secret
    // is refused like the secret.
    if let Some(refusal) = crate::file_access::read_refusal(ctx, &probed.real, "Read", &path) {
        return Ok(ToolOutput::error(refusal));
    }
    let (stamp, len) = (Stamp::of(&probed.meta), probed.meta.len());
    if let Some(kind) = paths::binary_extension(&resolved) {
        return Ok(binary_refusal(&path, kind, len));
    }
    // Before the file is opened: an unchanged region read before is answered from the
    // records alone. A file refused as binary by its content was never recorded.
    if let Some(answer) = dedup_answer(
        &state,
        &path,
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
        Err(_) => return Ok(not_regular(&path, "not a regular file")),
    };
    let head = match paths::Head::read(&mut file, len) {
        Ok(head) => head,
        Err(e) => return Ok(ToolOutput::error(format!("Cannot read {path}: {e}"))),
    };
    if head.has_nul() {
        return Ok(binary_refusal(&path, paths::BinaryKind::Other, len));
    }
    page_answer(
        &state,
        &path,
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
fn read_in_env(
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

/// Write a whole file, replacing what it held, and create any missing parent directories.
/// Use this to create a file or rewrite it completely; for a targeted edit use patch.
/// Give the exact final text: NEVER include read_file's `N|` line-number prefixes. An
/// existing file keeps its CRLF line endings and byte-order mark. `verified: true` means
/// the bytes on disk were read back and match: do not read the file again to check.
///
/// The write is atomic (temp file in the same directory, then rename) and keeps the
/// original file's permissions.
#[tool(
    toolset = "file",
    emoji = "✍️",
    max_result_chars = 100_000,
    concurrency = "path_scoped"
)]
pub fn write_file(
    /// Path of the file: absolute, `~/...`, or relative to the working directory.
    path: String,
    /// The complete new content of the file.
    content: String,
    ctx: &ToolContext,
) -> ToolResult {
    if path.trim().is_empty() {
        return Ok(ToolOutput::error("path is empty: give the file to write"));
    }
    match remote::for_task(ctx) {
        Some(Ok(remote)) => write_with(&disk::EnvDisk::new(remote), ctx, &path, &content),
        Some(Err(e)) => Ok(ToolOutput::error(e)),
        None => match disk::HostDisk::for_call(ctx) {
            Ok(host) => write_with(&host, ctx, &path, &content),
            Err(e) => Ok(ToolOutput::error(e)),
        },
    }
}

/// write_file on `disk`.
fn write_with(disk: &dyn disk::Disk, ctx: &ToolContext, path: &str, content: &str) -> ToolResult {
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

/// How patch edits.
#[derive(Deserialize, Default, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum PatchMode {
    #[default]
    Replace,
    Patch,
}

/// Edit files, either by replacing one exact piece of text or by applying a V4A patch.
/// Mode `replace` (default): give path, old_string and new_string; old_string must occur
/// exactly once unless replace_all is true, so copy enough surrounding lines from
/// read_file (WITHOUT the `N|` prefixes) to make it unique; small whitespace and
/// indentation differences are tolerated; an empty new_string deletes the text. Mode
/// `patch`: give `patch` in V4A form: `*** Begin Patch`, then for each file
/// `*** Update File: <path>` (optionally followed by `*** Move to: <new path>`) with `@@`
/// hunks of ` ` context, `-` removed and `+` added lines, or `*** Add File: <path>` with
/// `+` lines, or `*** Delete File: <path>`, and finally `*** End Patch`. A V4A patch changes
/// every file or none. The result holds a unified diff of what changed.
///
/// Matching falls back from exact to line matching that ignores trailing whitespace,
/// indentation or runs of spaces, then a loose form that forgives spaces and
/// typography inside lines, unescaping literal `\n`/`\t`, pasted line numbers, and
/// last a similarity search that refuses ties (src/shared/find_replace/). Edited Python, JSON, YAML and TOML are checked for syntax (syntax.rs).
#[tool(
    toolset = "file",
    emoji = "🩹",
    max_result_chars = 100_000,
    concurrency = "path_scoped"
)]
#[allow(clippy::too_many_arguments)]
pub fn patch(
    /// `replace` for one find-and-replace edit (default), `patch` for a V4A multi-file patch.
    mode: Option<PatchMode>,
    /// File to edit (mode `replace`): absolute, `~/...`, or relative to the working directory.
    path: Option<String>,
    /// Exact text to find (mode `replace`); must be unique in the file unless replace_all is true.
    old_string: Option<String>,
    /// Text to put in its place (mode `replace`); an empty string deletes old_string.
    new_string: Option<String>,
    /// Replace every occurrence of old_string instead of exactly one. Default false.
    replace_all: Option<bool>,
    /// The V4A patch text (mode `patch`), from `*** Begin Patch` to `*** End Patch`.
    patch: Option<String>,
    ctx: &ToolContext,
) -> ToolResult {
    let state = ctx.task_state::<FileState>();
    match mode.unwrap_or_default() {
        PatchMode::Replace => {
            let Some(path) = path.filter(|p| !p.trim().is_empty()) else {
                return Ok(patch_error(
                    "path is required in mode `replace`: give the file to edit",
                    None,
                ));
            };
            let Some(old_string) = old_string.filter(|s| !s.is_empty()) else {
                return Ok(patch_error(
                    "old_string is required in mode `replace` and must not be empty (to create a file, use write_file)",
                    None,
                ));
            };
            if old_string.trim().is_empty() {
                return Ok(patch_error(
                    "old_string is only whitespace: it would match arbitrary places. Include the text around the \
                     whitespace you want to change.",
                    None,
                ));
            }
            let Some(new_string) = new_string else {
                return Ok(patch_error(
                    "new_string is required in mode `replace` (give an empty string to delete old_string)",
                    None,
                ));
            };
            let replace_all = replace_all.unwrap_or(false);
            match remote::for_task(ctx) {
                Some(Ok(remote)) => patch_replace(
                    &disk::EnvDisk::new(remote),
                    ctx,
                    &state,
                    &path,
                    &old_string,
                    &new_string,
                    replace_all,
                ),
                Some(Err(e)) => Ok(patch_error(&e, None)),
                None => match disk::HostDisk::for_call(ctx) {
                    Ok(host) => patch_replace(
                        &host,
                        ctx,
                        &state,
                        &path,
                        &old_string,
                        &new_string,
                        replace_all,
                    ),
                    Err(e) => Ok(patch_error(&e, None)),
                },
            }
        }
        PatchMode::Patch => {
            let Some(text) = patch.filter(|p| !p.trim().is_empty()) else {
                return Ok(patch_error(
                    "patch is required in mode `patch`: give the V4A patch text",
                    None,
                ));
            };
            match remote::for_task(ctx) {
                Some(Ok(remote)) => patch_v4a(&disk::EnvDisk::new(remote), ctx, &state, &text),
                Some(Err(e)) => Ok(patch_error(&e, None)),
                None => match disk::HostDisk::for_call(ctx) {
                    Ok(host) => patch_v4a(&host, ctx, &state, &text),
                    Err(e) => Ok(patch_error(&e, None)),
                },
            }
        }
    }
}

fn patch_replace(
    disk: &dyn disk::Disk,
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

fn patch_v4a(
    disk: &dyn disk::Disk,
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

/// What search_files looks for.
#[derive(Deserialize, Clone, Copy, PartialEq, Eq, Debug)]
#[serde(rename_all = "snake_case")]
pub enum SearchTarget {
    #[serde(alias = "grep")]
    Content,
    #[serde(alias = "find")]
    Files,
}

/// How content matches are reported.
#[derive(Deserialize, Clone, Copy, PartialEq, Eq, Debug)]
#[serde(rename_all = "snake_case")]
pub enum OutputMode {
    Content,
    FilesOnly,
    Count,
}

/// Search inside files with a regex, or find files by name with a glob. Use this instead
/// of grep, rg or find in the terminal. Target `content` (default) returns matching lines
/// as `{path, line, content}`; target `files` returns paths whose name matches `pattern`
/// (e.g. `*.py`), newest first. Hidden files, binary files and files ignored by
/// .gitignore are skipped. Results come a page at a time: when `truncated` is true, call
/// again with the offset the result names.
///
/// Walks with ripgrep's own crates (ignore, grep-searcher, grep-regex).
#[tool(
    toolset = "file",
    emoji = "🔎",
    max_result_chars = 100_000,
    concurrency = "read_only"
)]
#[allow(clippy::too_many_arguments)]
pub fn search_files(
    /// Regex to look for in file contents (target `content`), or a glob for file names (target `files`); a name without glob characters matches names containing it.
    pattern: String,
    /// `content` to search inside files (default), `files` to find files by name.
    target: Option<SearchTarget>,
    /// Directory (or single file) to search in. Default `.`, the working directory.
    path: Option<String>,
    /// Only search files whose name matches this glob, e.g. `*.rs` (target `content`).
    file_glob: Option<String>,
    /// Most results to return. Default 50, at most 1000.
    limit: Option<u64>,
    /// Results to skip, for paging. Default 0.
    offset: Option<u64>,
    /// For target `content`: `content` for matching lines (default), `files_only` for the paths of matching files, `count` for matches per file.
    output_mode: Option<OutputMode>,
    /// Lines of context to show before and after each match. Default 0, at most 10.
    context: Option<u64>,
    ctx: &ToolContext,
) -> ToolResult {
    if pattern.is_empty() {
        return Ok(ToolOutput::error(
            "pattern is empty: give a regex (target content) or a glob (target files)",
        ));
    }
    let state = ctx.task_state::<FileState>();
    let target = target.unwrap_or(SearchTarget::Content);
    let shown_root = path
        .filter(|p| !p.trim().is_empty())
        .unwrap_or_else(|| ".".into());
    let limit = limit
        .unwrap_or(DEFAULT_SEARCH_LIMIT)
        .clamp(1, MAX_SEARCH_LIMIT) as usize;
    let offset = offset.unwrap_or(0) as usize;
    let output_mode = output_mode.unwrap_or(OutputMode::Content);
    let context = context.unwrap_or(0).min(MAX_SEARCH_CONTEXT) as usize;
    let remote = match remote::for_task(ctx) {
        Some(Ok(remote)) => Some(remote),
        Some(Err(e)) => return Ok(ToolOutput::error(e)),
        None => None,
    };
    let probe = match &remote {
        Some(remote) => match remote.probe(&shown_root, false) {
            Ok(probe) => Some(probe),
            Err(e) => {
                return Ok(ToolOutput::error(format!(
                    "Cannot search {shown_root}: {e}"
                )))
            }
        },
        None => None,
    };
    let root = match &probe {
        Some(probe) => PathBuf::from(&probe.real),
        None => paths::locate(ctx, &shown_root),
    };

    let key = format!(
        "search_files\0{pattern}\0{target:?}\0{}\0{}\0{limit}\0{offset}\0{output_mode:?}\0{context}",
        root.display(),
        file_glob.as_deref().unwrap_or("")
    );
    let streak = state.note_call(key, ctx.activity_epoch());
    if streak >= BLOCK_AT {
        return Ok(error_with(
            format!(
                "BLOCKED: this is the same search {streak} times in a row and the results have not changed. \
                 Do NOT repeat it: use the results you have, or search for something else."
            ),
            &[("already_searched", json!(streak))],
        ));
    }
    let (device, exists) = match &probe {
        Some(probe) => (
            remote::is_device_path(&probe.real),
            probe.kind != remote::Kind::Missing,
        ),
        None => (crate::file_access::is_device_path(&root), root.exists()),
    };
    if device {
        return Ok(ToolOutput::error(format!(
            "Refusing to search {shown_root}: devices and kernel files (/dev, /proc, /sys) can block, stream without end or expose memory."
        )));
    }
    if !exists {
        return Ok(ToolOutput::error(format!("Path not found: {shown_root}")));
    }
    let access = match &remote {
        Some(_) => None,
        None => match crate::file_access::policy(ctx) {
            Ok(access) => Some(access),
            Err(e) => return Ok(ToolOutput::error(format!("Search denied: {e}"))),
        },
    };
    if let Some(refusal) = access.as_ref().and_then(|a| a.check_read(&root)) {
        return Ok(ToolOutput::error(refusal.message("Search", &shown_root)));
    }
    let scope = search::Scope {
        root,
        shown_root,
        cancel: ctx.cancellation(),
        access,
    };
    let in_env = |failure: remote_search::Failure| match failure {
        remote_search::Failure::Search(e) => search_error(e, &pattern),
        remote_search::Failure::Env(e) => {
            ToolOutput::error(format!("Cannot search {}: {e}", scope.shown_root))
        }
    };

    let mut result = serde_json::Map::new();
    let total;
    let shown;
    match target {
        SearchTarget::Files => {
            let found = match &remote {
                Some(remote) => match remote_search::find_files(remote, &scope, &pattern) {
                    Ok(found) => found,
                    Err(failure) => return Ok(in_env(failure)),
                },
                None => match search::find_files(&scope, &pattern) {
                    Ok(found) => found,
                    Err(e) => return Ok(search_error(e, &pattern)),
                },
            };
            total = found.len();
            let page: Vec<String> = found
                .into_iter()
                .skip(offset)
                .take(limit)
                .map(|(p, _)| p)
                .collect();
            shown = page.len();
            result.insert("total_count".into(), json!(total));
            result.insert("files".into(), json!(page));
        }
        SearchTarget::Content => {
            let found = match &remote {
                Some(remote) => match remote_search::search_content(
                    remote,
                    &scope,
                    &pattern,
                    file_glob.as_deref(),
                    context,
                ) {
                    Ok(found) => found,
                    Err(failure) => return Ok(in_env(failure)),
                },
                None => {
                    match search::search_content(&scope, &pattern, file_glob.as_deref(), context) {
                        Ok(found) => found,
                        Err(e) => return Ok(search_error(e, &pattern)),
                    }
                }
            };
            if found.lower_bound {
                result.insert("total_count_is_lower_bound".into(), json!(true));
            }
            match output_mode {
                OutputMode::Content => {
                    total = found.hits.len();
                    let page: Vec<Value> = found
                        .hits
                        .into_iter()
                        .skip(offset)
                        .take(limit)
                        .map(|hit| {
                            let mut item =
                                json!({"path": hit.path, "line": hit.line, "content": hit.content});
                            if !hit.before.is_empty() {
                                item["before"] = context_lines(hit.before);
                            }
                            if !hit.after.is_empty() {
                                item["after"] = context_lines(hit.after);
                            }
                            item
                        })
                        .collect();
                    shown = page.len();
                    result.insert("total_count".into(), json!(total));
                    result.insert("matches".into(), Value::Array(page));
                }
                OutputMode::FilesOnly => {
                    total = found.files.len();
                    let page: Vec<String> = found
                        .files
                        .into_iter()
                        .skip(offset)
                        .take(limit)
                        .map(|(p, _)| p)
                        .collect();
                    shown = page.len();
                    result.insert("total_count".into(), json!(total));
                    result.insert("files".into(), json!(page));
                }
                OutputMode::Count => {
                    let matches: u64 = found.files.iter().map(|(_, n)| n).sum();
                    total = found.files.len();
                    let mut counts = serde_json::Map::new();
                    for (p, n) in found.files.into_iter().skip(offset).take(limit) {
                        counts.insert(p, json!(n));
                    }
                    shown = counts.len();
                    result.insert("total_count".into(), json!(matches));
                    result.insert("files_with_matches".into(), json!(total));
                    result.insert("counts".into(), Value::Object(counts));
                }
            }
        }
    }
    let truncated = offset + shown < total;
    if truncated {
        result.insert("truncated".into(), json!(true));
    }
    if total == 0 {
        result.insert(
            "hint".into(),
            json!(match target {
                SearchTarget::Files => "No file name matched. Try a looser glob such as `*name*`, or another path.",
                SearchTarget::Content => "No line matched. Check the regex, widen path or file_glob, or try target \"files\".",
            }),
        );
    } else if shown == 0 {
        result.insert(
            "hint".into(),
            json!(format!(
                "offset {offset} is past the last of {total} results."
            )),
        );
    }
    if streak == WARN_AT {
        result.insert(
            "_warning".into(),
            json!(format!(
                "You have run this exact search {streak} times in a row. The next identical search will be refused."
            )),
        );
    }
    let mut text = Value::Object(result).to_string();
    if truncated {
        let unit = if target == SearchTarget::Content && output_mode != OutputMode::Content {
            "files"
        } else {
            "results"
        };
        text.push_str(&format!(
            "\n\n[Showing {unit} {}-{} of {total}. Use offset={} to see more.]",
            offset + 1,
            offset + shown,
            offset + shown
        ));
    }
    Ok(ToolOutput::Text(text))
}

fn context_lines(lines: Vec<(u64, String)>) -> Value {
    Value::Array(
        lines
            .into_iter()
            .map(|(line, content)| json!({"line": line, "content": content}))
            .collect(),
    )
}

fn search_error(error: search::SearchError, pattern: &str) -> ToolOutput {
    match error {
        search::SearchError::BadPattern(why) => error_with(
            format!("Invalid regex pattern `{pattern}`: {why}"),
            &[(
                "hint",
                json!("Escape regex characters such as ( ) [ ] { } . * + ? | \\ with a backslash to match them literally."),
            )],
        ),
        search::SearchError::PatternTooLarge => error_with(
            format!(
                "Regex pattern is too large: it compiles to more than {} MB. Use a shorter pattern or smaller repetition counts.",
                search::MAX_REGEX_BYTES >> 20
            ),
            &[("hint", json!("Replace large `{n}` repetitions with `+` or `*`, or search for a shorter distinctive piece."))],
        ),
        search::SearchError::BadGlob(why) => ToolOutput::error(why),
        search::SearchError::Cancelled => ToolOutput::error("search cancelled"),
    }
}

/// `{"error": message, ...extra}` as a normal (model-facing) result.
fn error_with(message: impl std::fmt::Display, extra: &[(&str, Value)]) -> ToolOutput {
    ToolOutput::Text(tool_error_with(message, extra))
}

/// A failed patch: `{"error", "success": false, "_hint"?}`.
fn patch_error(message: &str, hint: Option<String>) -> ToolOutput {
    let mut extra = vec![("success", json!(false))];
    if let Some(hint) = hint {
        extra.push(("_hint", json!(hint)));
    }
    error_with(message, &extra)
}

/// The nudge after a failed patch, firmer from the third failure in a row on a file.
fn failure_hint(failures: u32, path: &str) -> String {
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
fn stale_warning(
    disk: &dyn disk::Disk,
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

/// The path task state is keyed by: the real path when the file exists.
pub(crate) fn state_key(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| crate::file_access::normalize(path))
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
