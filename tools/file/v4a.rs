//! The V4A multi-file patch format: parse, check every operation against the disk,
//! then apply all of them or none.
//!
//! ```text
//! *** Begin Patch
//! *** Update File: src/app.py
//! *** Move to: src/main.py        (optional)
//! @@ def main():                  (optional anchor line)
//!  context
//! -removed
//! +added
//! *** Add File: notes.txt
//! +first line
//! *** Delete File: old.txt
//! *** End Patch
//! ```

use super::spliced::{Line as SplicedLine, Spliced};
use super::syntax::Language;
use super::write::Style;
use crate::shared::find_replace::diff::{unified_diff_of_regions, Region};
use crate::shared::find_replace::lines::{self as lines_mod, Normalise};
use crate::shared::find_replace::loose::Loose;
use crate::shared::find_replace::{closest_region, unified_diff};
use hermes_runtime::access::AccessPolicy;
use std::borrow::Cow;
use std::ops::Range;
use std::path::{Path, PathBuf};

#[derive(Debug)]
pub enum Op {
    Add {
        path: String,
        lines: Vec<String>,
    },
    Delete {
        path: String,
    },
    Update {
        path: String,
        move_to: Option<String>,
        hunks: Vec<Hunk>,
    },
}

#[derive(Debug, Default)]
pub struct Hunk {
    header: Option<String>,
    lines: Vec<Line>,
    at_eof: bool,
    /// Line of the patch text where the hunk starts (1-based), for error messages.
    patch_line: usize,
}

#[derive(Debug)]
enum Line {
    Context(String),
    Remove(String),
    Add(String),
}

/// Parses the patch text into operations, or says which line is wrong.
pub fn parse(text: &str) -> Result<Vec<Op>, String> {
    let lines: Vec<&str> = text
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect();
    let mut i = 0;
    while i < lines.len() && lines[i].trim().is_empty() {
        i += 1;
    }
    if i < lines.len() && lines[i].trim() == "*** Begin Patch" {
        i += 1;
    } else if !(i < lines.len() && lines[i].trim_start().starts_with("*** ")) {
        return Err("the patch must start with `*** Begin Patch`".into());
    }
    let mut ops = Vec::new();
    let mut ended = false;
    while i < lines.len() {
        let line = lines[i];
        let number = i + 1;
        i += 1;
        if line.trim() == "*** End Patch" {
            ended = true;
            break;
        }
        if line.trim().is_empty() {
            continue;
        }
        // Markers are recognised with surrounding whitespace, as codex's apply_patch does.
        let line = line.trim();
        if let Some(path) = header_path(line, "*** Add File:") {
            let mut body = Vec::new();
            while i < lines.len() && !is_marker(lines[i]) {
                let l = lines[i];
                if let Some(rest) = l.strip_prefix('+') {
                    body.push(rest.to_string());
                } else if l.is_empty() && i + 1 < lines.len() && !is_marker(lines[i + 1]) {
                    body.push(String::new());
                } else if !l.is_empty() {
                    return Err(format!(
                        "line {}: every line of an added file must start with `+`, got: {}",
                        i + 1,
                        clip(l)
                    ));
                }
                i += 1;
            }
            ops.push(Op::Add { path, lines: body });
        } else if let Some(path) = header_path(line, "*** Delete File:") {
            ops.push(Op::Delete { path });
        } else if let Some(path) = header_path(line, "*** Update File:") {
            let mut move_to = None;
            if i < lines.len() {
                if let Some(dest) = header_path(lines[i].trim(), "*** Move to:") {
                    move_to = Some(dest);
                    i += 1;
                }
            }
            let mut hunks: Vec<Hunk> = Vec::new();
            while i < lines.len() {
                let l = lines[i];
                if l.trim() == "*** End of File" {
                    if let Some(hunk) = hunks.last_mut() {
                        hunk.at_eof = true;
                    }
                    i += 1;
                    continue;
                }
                if is_marker(l) {
                    break;
                }
                if let Some(rest) = l.strip_prefix("@@") {
                    hunks.push(Hunk {
                        header: anchor(rest),
                        patch_line: i + 1,
                        ..Hunk::default()
                    });
                    i += 1;
                    continue;
                }
                if hunks.is_empty() {
                    hunks.push(Hunk {
                        patch_line: i + 1,
                        ..Hunk::default()
                    });
                }
                let hunk = hunks.last_mut().expect("a hunk was just ensured");
                let parsed = match l.chars().next() {
                    Some(' ') => Line::Context(l[1..].to_string()),
                    Some('-') => Line::Remove(l[1..].to_string()),
                    Some('+') => Line::Add(l[1..].to_string()),
                    None => Line::Context(String::new()),
                    Some(_) => {
                        return Err(format!(
                            "line {}: a hunk line must start with ` ` (context), `-` (remove) or `+` (add), got: {}",
                            i + 1,
                            clip(l)
                        ))
                    }
                };
                hunk.lines.push(parsed);
                i += 1;
            }
            // Blank lines before the next header are separators, not context.
            for hunk in &mut hunks {
                while matches!(hunk.lines.last(), Some(Line::Context(c)) if c.is_empty()) {
                    hunk.lines.pop();
                }
            }
            hunks.retain(|h| !h.lines.is_empty());
            if hunks.is_empty() && move_to.is_none() {
                return Err(format!(
                    "line {number}: `*** Update File: {path}` has no changes"
                ));
            }
            ops.push(Op::Update {
                path,
                move_to,
                hunks,
            });
        } else if line.starts_with("*** Move to:") {
            return Err(format!(
                "line {number}: `*** Move to:` must follow an `*** Update File:` line"
            ));
        } else {
            return Err(format!(
                "line {number}: expected `*** Add File:`, `*** Update File:`, `*** Delete File:` or `*** End Patch`, got: {}",
                clip(line)
            ));
        }
    }
    let _ = ended; // a missing `*** End Patch` is forgiven: the text simply ended
    if ops.is_empty() {
        return Err("the patch contains no file operations".into());
    }
    Ok(ops)
}

/// A line that ends the current section: any `*** ` line at the left margin, or a
/// known marker with whitespace around it.
fn is_marker(line: &str) -> bool {
    if line.starts_with("*** ") {
        return true;
    }
    let trimmed = line.trim();
    ["*** Begin Patch", "*** End Patch", "*** End of File"].contains(&trimmed)
        || [
            "*** Add File:",
            "*** Delete File:",
            "*** Update File:",
            "*** Move to:",
        ]
        .iter()
        .any(|marker| trimmed.starts_with(marker))
}

fn header_path(line: &str, prefix: &str) -> Option<String> {
    let path = line.strip_prefix(prefix)?.trim();
    (!path.is_empty()).then(|| path.to_string())
}

/// The anchor text after `@@`, unless it is a unified-diff range like `-1,3 +1,4 @@`.
fn anchor(rest: &str) -> Option<String> {
    let text = rest.trim();
    let text = text.strip_suffix("@@").map(str::trim).unwrap_or(text);
    if text.is_empty()
        || (text.starts_with('-')
            && text.contains('+')
            && text.chars().any(|c| c.is_ascii_digit())
            && !text.chars().any(char::is_alphabetic))
    {
        None
    } else {
        Some(text.to_string())
    }
}

fn clip(line: &str) -> String {
    let clipped: String = line.chars().take(120).collect();
    if clipped.len() < line.len() {
        format!("{clipped}...")
    } else {
        clipped
    }
}

/// What applying the patch will do, worked out before anything is written.
#[derive(Default)]
pub struct Plan {
    steps: Vec<Step>,
    pub diff: String,
    pub files_created: Vec<String>,
    pub files_modified: Vec<String>,
    pub files_deleted: Vec<String>,
    pub files_moved: Vec<(String, String)>,
    /// Resolved paths whose content changed or appeared (for the read tracker).
    pub touched: Vec<PathBuf>,
    pub changed: bool,
    /// Hunks (and added files) found already in place: a replayed patch.
    pub already_applied: usize,
    /// (path, shown name, text before, text after) of each file whose text changed,
    /// for the syntax checks.
    pub checks: Vec<(PathBuf, String, Option<String>, String)>,
}

impl Plan {
    /// What applying the plan does, file by file: the new content, or `None` for a removal.
    pub fn steps(&self) -> impl Iterator<Item = (&Path, Option<&[u8]>)> {
        self.steps.iter().map(|step| match step {
            Step::Write { path, data, .. } => (path.as_path(), Some(data.as_slice())),
            Step::Remove { path } => (path.as_path(), None),
        })
    }
}

enum Step {
    Write {
        path: PathBuf,
        data: Vec<u8>,
        permissions: Option<std::fs::Permissions>,
    },
    Remove {
        path: PathBuf,
    },
}

fn display_path(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// Checks every operation against the disk and computes the new contents.
pub fn plan(ops: &[Op], resolve: impl Fn(&str) -> PathBuf) -> Result<Plan, String> {
    let mut plan = Plan::default();
    // Each path takes part in one operation, except that a file deleted earlier in
    // the patch may be added again (a rewrite).
    let mut seen: Vec<PathBuf> = Vec::new();
    let mut deleted: Vec<PathBuf> = Vec::new();
    let claim = |seen: &mut Vec<PathBuf>,
                 deleted: &mut Vec<PathBuf>,
                 path: &Path,
                 shown: &str,
                 adding: bool|
     -> Result<bool, String> {
        if adding {
            if let Some(at) = deleted.iter().position(|p| p == path) {
                deleted.remove(at);
                return Ok(true);
            }
        }
        if seen.iter().any(|p| p == path) {
            return Err(format!(
                "{shown} appears in more than one operation of this patch; merge them"
            ));
        }
        seen.push(path.to_path_buf());
        Ok(false)
    };
    for op in ops {
        match op {
            Op::Add { path, lines } => {
                let target = resolve(path);
                let replaces_deleted = claim(&mut seen, &mut deleted, &target, path, true)?;
                let mut content = lines.join("\n");
                if !lines.is_empty() {
                    content.push('\n');
                }
                if !replaces_deleted && std::fs::symlink_metadata(&target).is_ok() {
                    if std::fs::read(&target).is_ok_and(|bytes| bytes == content.as_bytes()) {
                        plan.already_applied += 1;
                        continue;
                    }
                    return Err(format!("cannot add {path}: it already exists (use `*** Update File:` to change it)"));
                }
                plan.diff.push_str(&unified_diff(
                    "",
                    &content,
                    "/dev/null",
                    &format!("b/{path}"),
                ));
                plan.checks
                    .push((target.clone(), path.clone(), None, content.clone()));
                plan.steps.push(Step::Write {
                    path: target.clone(),
                    data: content.into_bytes(),
                    permissions: None,
                });
                plan.files_created.push(path.clone());
                plan.touched.push(target);
                plan.changed = true;
            }
            Op::Delete { path } => {
                let target = resolve(path);
                claim(&mut seen, &mut deleted, &target, path, false)?;
                deleted.push(target.clone());
                let text = read_text(&target, path)?;
                plan.diff
                    .push_str(&unified_diff(&text, "", &format!("a/{path}"), "/dev/null"));
                plan.steps.push(Step::Remove {
                    path: target.clone(),
                });
                plan.files_deleted.push(path.clone());
                plan.touched.push(target);
                plan.changed = true;
            }
            Op::Update {
                path,
                move_to,
                hunks,
            } => {
                let source = resolve(path);
                claim(&mut seen, &mut deleted, &source, path, false)?;
                let raw = read_text(&source, path)?;
                let style = Style::detect(raw.as_bytes());
                // A plain file needs no conversion: spare a large file two copies.
                let plain = style == Style::default();
                let text = if plain { raw } else { style.to_model(&raw) };
                let (updated, regions, replayed) = apply_hunks(&text, hunks, path)?;
                plan.already_applied += replayed;
                let shown_dest = move_to.as_deref().unwrap_or(path);
                let (old_name, new_name) = (format!("a/{path}"), format!("b/{shown_dest}"));
                plan.diff.push_str(&unified_diff_of_regions(
                    &text, &updated, &regions, &old_name, &new_name,
                ));
                let unchanged = regions.is_empty();
                let checked = move_to.as_deref().map_or_else(|| source.clone(), &resolve);
                // Only a language the syntax checks know needs the two texts kept.
                if !unchanged && Language::of(&checked).is_some() {
                    plan.checks.push((
                        checked,
                        shown_dest.to_string(),
                        Some(text),
                        updated.clone(),
                    ));
                }
                let data = if plain {
                    updated.into_bytes()
                } else {
                    style.to_disk(&updated).into_bytes()
                };
                let moved_to = move_to
                    .as_ref()
                    .map(|dest_shown| (dest_shown, resolve(dest_shown)))
                    .filter(|(_, dest)| *dest != source);
                if let Some((dest_shown, dest)) = moved_to {
                    claim(&mut seen, &mut deleted, &dest, dest_shown, false)?;
                    if std::fs::symlink_metadata(&dest).is_ok() {
                        return Err(format!(
                            "cannot move {path} to {dest_shown}: the destination already exists"
                        ));
                    }
                    let permissions = std::fs::metadata(&source).ok().map(|m| m.permissions());
                    plan.steps.push(Step::Write {
                        path: dest.clone(),
                        data,
                        permissions,
                    });
                    plan.steps.push(Step::Remove {
                        path: source.clone(),
                    });
                    plan.files_moved.push((path.clone(), dest_shown.clone()));
                    plan.touched.push(source.clone());
                    plan.touched.push(dest);
                    plan.changed = true;
                } else if !unchanged {
                    plan.steps.push(Step::Write {
                        path: source.clone(),
                        data,
                        permissions: None,
                    });
                    plan.touched.push(source.clone());
                    plan.changed = true;
                }
                plan.files_modified
                    .push(move_to.as_ref().unwrap_or(path).clone());
            }
        }
    }
    Ok(plan)
}

fn read_text(path: &Path, shown: &str) -> Result<String, String> {
    let meta = std::fs::metadata(path).map_err(|_| format!("{shown}: file not found"))?;
    if !meta.is_file() {
        return Err(format!("{shown}: not a regular file"));
    }
    let bytes = std::fs::read(path).map_err(|e| format!("{shown}: cannot read: {e}"))?;
    if super::paths::has_nul(&bytes) {
        return Err(format!("{shown}: binary file, not patched"));
    }
    String::from_utf8(bytes).map_err(|_| format!("{shown}: not valid UTF-8, not patched"))
}

/// Applies the hunks of one file in order; each must be found after the previous
/// one. Returns the new text, the regions that changed and how many hunks were found
/// already applied.
fn apply_hunks<'a>(
    text: &'a str,
    hunks: &'a [Hunk],
    shown: &str,
) -> Result<(String, Vec<Region>, usize), String> {
    let trailing_newline = text.ends_with('\n') || text.is_empty();
    let mut lines = Spliced::new(text);
    let mut cursor = 0usize;
    let mut replayed = 0usize;
    for (index, hunk) in hunks.iter().enumerate() {
        let label = format!(
            "{shown}: hunk {} (patch line {})",
            index + 1,
            hunk.patch_line
        );
        let old: Vec<&str> = hunk
            .lines
            .iter()
            .filter_map(|l| match l {
                Line::Context(s) | Line::Remove(s) => Some(s.as_str()),
                Line::Add(_) => None,
            })
            .collect();
        let starts = match &hunk.header {
            Some(header) => anchor_lines(&lines, header, cursor),
            None => vec![cursor],
        };
        if starts.is_empty() {
            let header = hunk.header.as_deref().unwrap_or_default();
            return Err(format!(
                "{label}: the anchor line `@@ {header}` was not found in the file"
            ));
        }
        let at = if old.is_empty() {
            // Pure addition: after the anchor line, or at the end of the file.
            match (&hunk.header, starts.as_slice()) {
                (None, _) => lines.len(),
                (Some(_), [one]) => one + 1,
                (Some(header), many) => {
                    return Err(format!(
                        "{label}: the anchor `@@ {header}` occurs {} times (lines {}); give a more specific anchor",
                        many.len(),
                        line_list(many)
                    ))
                }
            }
        } else {
            // With several anchor lines, where the lines are is worked out once and each
            // anchor picks among them; with one, the search stops as soon as it can.
            let places_of_old = if starts.len() > 1 {
                runs(&lines, &old)
            } else {
                None
            };
            let mut places: Vec<(usize, Level)> = Vec::new();
            for &start in &starts {
                let from = if hunk.header.is_some() { start } else { cursor };
                let anchored = hunk.header.is_some();
                let located = match starts.len() {
                    1 => locate(&lines, &old, from, hunk.at_eof, anchored),
                    _ => pick(
                        &places_of_old,
                        lines.len(),
                        old.len(),
                        from,
                        hunk.at_eof,
                        anchored,
                    ),
                };
                match located {
                    Located::At(at, level) => {
                        if !places.iter().any(|p| p.0 == at) {
                            places.push((at, level));
                        }
                    }
                    Located::Ambiguous(all) => {
                        return Err(format!(
                            "{label}: its context and removed lines match {} places (lines {}); add context lines \
                             or an `@@` anchor line so it matches one",
                            all.len(),
                            line_list(&all)
                        ))
                    }
                    Located::Missing => {}
                }
            }
            match places.as_slice() {
                [(at, level)] => {
                    let at = *at;
                    let level = *level;
                    let added = splice_hunk(&mut lines, at, hunk, &old, level);
                    cursor = at + added;
                    continue;
                }
                [] => {}
                many => {
                    let at: Vec<usize> = many.iter().map(|p| p.0).collect();
                    return Err(format!(
                        "{label}: the anchor `@@ {}` leads to {} different places (lines {}); give a more specific anchor",
                        hunk.header.as_deref().unwrap_or_default(),
                        at.len(),
                        line_list(&at)
                    ));
                }
            }
            // Not found: a hunk whose result is already in the file was applied before.
            let new_side: Vec<&str> = hunk
                .lines
                .iter()
                .filter_map(|l| match l {
                    Line::Context(s) | Line::Add(s) => Some(s.as_str()),
                    Line::Remove(_) => None,
                })
                .collect();
            if new_side != old && !new_side.iter().all(|l| l.trim().is_empty()) {
                let found = runs(&lines, &new_side);
                if let Located::At(at, _) = pick(
                    &found,
                    lines.len(),
                    new_side.len(),
                    cursor,
                    hunk.at_eof,
                    false,
                ) {
                    replayed += 1;
                    cursor = at + new_side.len();
                    continue;
                }
            }
            let wanted = old.join("\n");
            let mut message =
                format!("{label}: its context and removed lines were not found in the file");
            let plain: Vec<&str> = lines.texts().collect();
            if let Some((line, snippet, _)) = closest_region(&plain.join("\n"), &wanted) {
                message.push_str(&format!(
                    ". The most similar region starts at line {line}:\n{snippet}"
                ));
            }
            return Err(message);
        };
        let added = splice_hunk(&mut lines, at, hunk, &old, Level::Exact);
        cursor = at + added;
    }
    let (updated, regions) = lines.into_text(trailing_newline);
    Ok((updated, regions, replayed))
}

/// Puts the hunk's new lines in place of its old ones at line `at`; returns how
/// many lines replaced them. Context lines keep the file's text; added lines move
/// to the file's indentation when the context matched at another one.
fn splice_hunk<'a>(
    lines: &mut Spliced<'a>,
    at: usize,
    hunk: &'a Hunk,
    old: &[&str],
    level: Level,
) -> usize {
    let (patch_indent, file_indent) = if level >= Level::Indentation {
        let first = old.iter().position(|l| !l.trim().is_empty()).unwrap_or(0);
        (
            old.get(first).map(|l| l.to_string()).unwrap_or_default(),
            if at + first < lines.len() {
                lines.line(at + first).text.into_owned()
            } else {
                String::new()
            },
        )
    } else {
        (String::new(), String::new())
    };
    let mut replacement = Vec::with_capacity(hunk.lines.len());
    let mut old_index = at;
    for line in &hunk.lines {
        match line {
            Line::Context(_) => {
                replacement.push(lines.line(old_index));
                old_index += 1;
            }
            Line::Remove(_) => old_index += 1,
            Line::Add(s) if level >= Level::Indentation => replacement.push(SplicedLine {
                text: Cow::Owned(reindent(&file_indent, &patch_indent, s)),
                crlf: false,
            }),
            Line::Add(s) => replacement.push(SplicedLine {
                text: Cow::Borrowed(s),
                crlf: false,
            }),
        }
    }
    let added = replacement.len();
    lines.splice(at, old.len(), replacement);
    added
}

/// The lines (from `cursor` on, then before it) that an `@@` anchor names: equal
/// after trimming, else containing it.
fn anchor_lines(lines: &Spliced<'_>, header: &str, cursor: usize) -> Vec<usize> {
    let wanted = header.trim();
    let containing = lines.containing(wanted);
    // Every line equal to the anchor contains it too.
    let equal: Vec<usize> = containing
        .iter()
        .copied()
        .filter(|&i| lines.line(i).text.trim() == wanted)
        .collect();
    let chosen = if equal.is_empty() { containing } else { equal };
    let cursor = cursor.min(lines.len());
    let split = chosen.partition_point(|&i| i < cursor);
    chosen[split..]
        .iter()
        .chain(&chosen[..split])
        .copied()
        .collect()
}

fn line_list(at: &[usize]) -> String {
    at.iter()
        .take(10)
        .map(|i| (i + 1).to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// How loosely the lines were compared, in the order tried.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Level {
    Exact,
    TrailingWhitespace,
    Indentation,
    Typography,
}

enum Located {
    At(usize, Level),
    Ambiguous(Vec<usize>),
    Missing,
}

fn typography(line: &str) -> Cow<'_, str> {
    Cow::Owned(Loose::new(line.trim()).text)
}

/// The comparisons tried, in order: exact first, then ignoring trailing whitespace,
/// then indentation, then typography (dashes, quotes, spaces).
const LEVELS: [(Level, Normalise); 4] = [
    (Level::Exact, lines_mod::exact),
    (Level::TrailingWhitespace, lines_mod::trim_end),
    (Level::Indentation, lines_mod::trim_both),
    (Level::Typography, typography),
];

/// Every place `old` sits in `lines`, overlapping ones included, at the first level
/// that finds any.
fn runs(lines: &Spliced<'_>, old: &[&str]) -> Option<(Level, Vec<usize>)> {
    if old.len() > lines.len() {
        return None;
    }
    LEVELS.into_iter().find_map(|(level, normalise)| {
        let all = lines_mod::find_runs(lines.texts(), old, normalise, true);
        (!all.is_empty()).then_some((level, all))
    })
}

/// What [`pick`] would choose among [`runs`], reading no more of the file than that
/// needs: the lines after `from` first, and only up to the first place (anchored) or
/// the second (which makes the hunk ambiguous, and is then read on for the message);
/// the lines before `from` only when nothing is after it.
fn locate(lines: &Spliced<'_>, old: &[&str], from: usize, at_eof: bool, anchored: bool) -> Located {
    let (len, k) = (lines.len(), old.len());
    if k > len {
        return Located::Missing;
    }
    let from = from.min(len);
    for (level, normalise) in LEVELS {
        let after = |limit| runs_within(lines, old, (level, normalise), from..len, limit);
        let mut candidates = after(if anchored { 1 } else { 2 });
        if candidates.is_empty() {
            // Runs that start before `from` lie within its first `from + k - 1` lines.
            candidates = runs_within(
                lines,
                old,
                (level, normalise),
                0..(from + k - 1).min(len),
                usize::MAX,
            );
        }
        if candidates.is_empty() {
            continue;
        }
        if at_eof
            && lines
                .texts_from(len - k)
                .zip(old)
                .all(|(line, wanted)| normalise(line) == normalise(wanted))
        {
            return Located::At(len - k, level);
        }
        if candidates.len() == 1 || anchored {
            return Located::At(candidates[0], level);
        }
        if candidates[0] >= from {
            candidates = after(usize::MAX);
        }
        return Located::Ambiguous(candidates);
    }
    Located::Missing
}

/// The first `limit` runs of `old` lying within the lines `within`.
fn runs_within(
    lines: &Spliced<'_>,
    old: &[&str],
    (level, normalise): (Level, Normalise),
    within: Range<usize>,
    limit: usize,
) -> Vec<usize> {
    if level == Level::Exact {
        if let Some(found) = lines.exact_runs(old, within.clone(), limit) {
            return found;
        }
    }
    let lines = lines.texts_from(within.start).take(within.len());
    lines_mod::find_first_runs(lines, old, normalise, true, limit)
        .into_iter()
        .map(|at| at + within.start)
        .collect()
}

/// Which of the places `runs` found is meant: after `from` first, then anywhere. More
/// than one is ambiguous, except that with `anchored` the first place after the anchor
/// is meant; a hunk tied to the end of the file takes the place there.
fn pick(
    runs: &Option<(Level, Vec<usize>)>,
    len: usize,
    k: usize,
    from: usize,
    at_eof: bool,
    anchored: bool,
) -> Located {
    let Some((level, all)) = runs else {
        return Located::Missing;
    };
    if at_eof && all.contains(&(len - k)) {
        return Located::At(len - k, *level);
    }
    let from = from.min(len);
    let after: Vec<usize> = all.iter().copied().filter(|&s| s >= from).collect();
    let candidates = if after.is_empty() { all.clone() } else { after };
    if candidates.len() == 1 || anchored {
        return Located::At(candidates[0], *level);
    }
    Located::Ambiguous(candidates)
}

fn reindent(file_line: &str, patch_line: &str, added: &str) -> String {
    crate::shared::find_replace::reindent(file_line, patch_line, added)
}

/// Writes the plan through `access` (every file's folder opened beneath its writable
/// root); on any failure, undoes what was already done and reports it.
pub fn apply(plan: &Plan, access: &AccessPolicy) -> Result<(), String> {
    let write = |path: &Path, data: &[u8]| {
        let shown = display_path(path);
        crate::file_access::write_file_bytes(access, path, data, true, "Patch", &shown)
            .map_err(std::io::Error::from)
    };
    enum Undo {
        Restore(PathBuf, Vec<u8>),
        Delete(PathBuf),
    }
    let mut undo: Vec<Undo> = Vec::new();
    let mut outcome = Ok(());
    for (index, step) in plan.steps.iter().enumerate() {
        // Undo is for a later step failing: the last step needs no copy of the old file.
        let undoable = index + 1 < plan.steps.len();
        let result = match step {
            Step::Write {
                path,
                data,
                permissions,
            } => {
                let previous = if undoable {
                    std::fs::read(path).ok()
                } else {
                    None
                };
                let result = write(path, data).and_then(|_| match permissions {
                    Some(p) => std::fs::set_permissions(path, p.clone()),
                    None => Ok(()),
                });
                if result.is_ok() && undoable {
                    undo.push(match previous {
                        Some(bytes) => Undo::Restore(path.clone(), bytes),
                        None => Undo::Delete(path.clone()),
                    });
                }
                result.map_err(|e| format!("writing {}: {e}", display_path(path)))
            }
            Step::Remove { path } => {
                let previous = std::fs::read(path);
                match previous {
                    Ok(bytes) => {
                        crate::file_access::remove_file(access, path, "Delete", &display_path(path))
                            .map(|_| undo.push(Undo::Restore(path.clone(), bytes)))
                            .map_err(|e| format!("deleting {}: {e}", display_path(path)))
                    }
                    Err(e) => Err(format!("deleting {}: {e}", display_path(path))),
                }
            }
        };
        if let Err(e) = result {
            outcome = Err(e);
            break;
        }
    }
    if outcome.is_err() {
        for step in undo.into_iter().rev() {
            match step {
                Undo::Restore(path, bytes) => {
                    let _ = write(&path, &bytes);
                }
                Undo::Delete(path) => {
                    let _ = crate::file_access::remove_file(access, &path, "Delete", "");
                }
            }
        }
    }
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_all_operations() {
        let ops = parse(
            "*** Begin Patch\n*** Add File: a.txt\n+hello\n*** Update File: b.txt\n*** Move to: c.txt\n@@ fn x\n a\n-b\n+B\n*** Delete File: d.txt\n*** End Patch\n",
        )
        .unwrap();
        assert_eq!(ops.len(), 3);
        assert!(
            matches!(&ops[0], Op::Add { path, lines } if path == "a.txt" && lines == &["hello".to_string()])
        );
        assert!(
            matches!(&ops[1], Op::Update { move_to: Some(m), hunks, .. } if m == "c.txt" && hunks.len() == 1)
        );
        assert!(matches!(&ops[2], Op::Delete { path } if path == "d.txt"));
    }

    #[test]
    fn rejects_garbage() {
        assert!(parse("hello").is_err());
        assert!(parse("*** Begin Patch\n*** End Patch").is_err());
        assert!(
            parse("*** Begin Patch\n*** Update File: x\n@@\n?? what\n*** End Patch")
                .unwrap_err()
                .contains("line 4")
        );
    }

    /// The search that stops early chooses what choosing among every place would.
    #[test]
    fn early_stopping_search_agrees_with_the_full_one() {
        let text = "a\nb\n  a\nb \nc\na\nb\nc\nd\na\nlong line one\nlong line two\nlong line one\nlong line two\n";
        let mut lines = Spliced::new(text);
        lines.splice(
            8,
            1,
            vec![SplicedLine {
                text: Cow::Borrowed("a"),
                crlf: false,
            }],
        );
        let wanted: [&[&str]; 8] = [
            &["a", "b"],
            &["a"],
            &["b", "c"],
            &["c", "d"],
            &["a", "b", "c"],
            &["z"],
            &["long line one", "long line two"],
            &["long line two", "long line one"],
        ];
        for old in wanted {
            let all = runs(&lines, old);
            for from in 0..=lines.len() + 1 {
                for (at_eof, anchored) in
                    [(false, false), (true, false), (false, true), (true, true)]
                {
                    let early = locate(&lines, old, from, at_eof, anchored);
                    let full = pick(&all, lines.len(), old.len(), from, at_eof, anchored);
                    let shown = |l: &Located| match l {
                        Located::At(at, level) => format!("at {at} {level:?}"),
                        Located::Ambiguous(all) => format!("ambiguous {all:?}"),
                        Located::Missing => "missing".into(),
                    };
                    assert_eq!(
                        shown(&early),
                        shown(&full),
                        "{old:?} from {from} eof {at_eof} anchored {anchored}"
                    );
                }
            }
        }
    }

    #[test]
    fn hunks_apply_in_order() {
        let ops =
            parse("*** Begin Patch\n*** Update File: f\n@@\n a\n-b\n+B\n@@\n c\n+d\n*** End Patch")
                .unwrap();
        let Op::Update { hunks, .. } = &ops[0] else {
            panic!()
        };
        let (text, regions, _) = apply_hunks("a\nb\nc\n", hunks, "f").unwrap();
        assert_eq!(text, "a\nB\nc\nd\n");
        assert_eq!(regions.len(), 1);
        assert_eq!(
            apply_hunks("a  \nb\nc\n", hunks, "f").unwrap().0,
            "a  \nB\nc\nd\n"
        );
        assert!(apply_hunks("x\ny\n", hunks, "f").is_err());
    }
}
