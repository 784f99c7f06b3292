//! The `file` toolset: read_file, write_file, patch, search_files.
//!
//! This file holds the tools' entry points: their schemas (the doc comments), argument
//! checks and defaults, and where each call runs (this machine or the task's
//! environment). Each tool's work lives in its `handle_*` module; the engines beside them.

use hermes_runtime::prelude::*;

mod disk;
mod guard;
mod handle_read;
mod handle_replace;
mod handle_search;
mod handle_v4a;
mod handle_write;
mod paths;
mod read;
mod remote_search;
mod replies;
mod search;
mod spliced;
mod syntax;
mod v4a;
pub(crate) mod write;

use crate::shared::find_replace as patch;
use guard::FileState;
use hermes_environments::files as remote;
use replies::patch_error;

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
        Some(Ok(remote)) => handle_read::read_in_env(&remote, &state, &path, offset, limit, ctx),
        Some(Err(e)) => Ok(ToolOutput::error(e)),
        None => handle_read::read_local(&state, &path, offset, limit, ctx),
    }
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
        Some(Ok(remote)) => {
            handle_write::write_with(&disk::EnvDisk::new(remote), ctx, &path, &content)
        }
        Some(Err(e)) => Ok(ToolOutput::error(e)),
        None => match disk::HostDisk::for_call(ctx) {
            Ok(host) => handle_write::write_with(&host, ctx, &path, &content),
            Err(e) => Ok(ToolOutput::error(e)),
        },
    }
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
                Some(Ok(remote)) => handle_replace::patch_replace(
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
                    Ok(host) => handle_replace::patch_replace(
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
                Some(Ok(remote)) => {
                    handle_v4a::patch_v4a(&disk::EnvDisk::new(remote), ctx, &state, &text)
                }
                Some(Err(e)) => Ok(patch_error(&e, None)),
                None => match disk::HostDisk::for_call(ctx) {
                    Ok(host) => handle_v4a::patch_v4a(&host, ctx, &state, &text),
                    Err(e) => Ok(patch_error(&e, None)),
                },
            }
        }
    }
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
/// again with the offset the result names. The search stops just past the page, so
/// `total_count` is then a lower bound (`total_count_is_lower_bound`).
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
    let request = handle_search::Request {
        pattern,
        target: target.unwrap_or(SearchTarget::Content),
        shown_root: path
            .filter(|p| !p.trim().is_empty())
            .unwrap_or_else(|| ".".into()),
        file_glob,
        limit: limit
            .unwrap_or(DEFAULT_SEARCH_LIMIT)
            .clamp(1, MAX_SEARCH_LIMIT) as usize,
        offset: offset.unwrap_or(0) as usize,
        output_mode: output_mode.unwrap_or(OutputMode::Content),
        context: context.unwrap_or(0).min(MAX_SEARCH_CONTEXT) as usize,
    };
    handle_search::search_files(&request, ctx)
}
