//! The actions of skill_manage. Every write is atomic (temp file and rename) and
//! stays inside the skill's folder; device files and symlinks leading out are refused.

use crate::file_access::is_device_path;
use crate::shared::find_replace;
use crate::shared::skills_library::{
    self as library, Root, Skill, MAX_SKILL_FILE_BYTES, SUPPORT_DIRS,
};
use hermes_runtime::access::AccessPolicy;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

type Outcome = Result<Value, Value>;

fn fail(message: impl Into<String>) -> Value {
    json!({"success": false, "error": message.into()})
}

/// Writes through the access policy confined to the skills folder: the folder of the
/// file is opened beneath it, never through a symlink leading out.
fn write_text(access: &AccessPolicy, path: &Path, text: &str) -> Result<(), Value> {
    if is_device_path(path) {
        return Err(fail(format!(
            "Refusing to write {}: it is a device or kernel file.",
            path.display()
        )));
    }
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if !meta.is_file() {
            return Err(fail(format!(
                "Refusing to write {}: it is not a regular file.",
                path.display()
            )));
        }
    }
    let shown = path.display().to_string();
    crate::file_access::write_file_bytes(access, path, text.as_bytes(), true, "Write", &shown)
        .map(|_| ())
        .map_err(|e| fail(e.to_string()))
}

fn not_found(name: &str, roots: &[Root], suffix: &str) -> Value {
    let known: Vec<String> = library::all_skills(roots)
        .into_iter()
        .take(20)
        .map(|s| s.name)
        .collect();
    json!({"success": false, "error": format!("Skill '{name}' not found.{suffix}"), "available_skills": known})
}

/// The one skill called `name` that may be changed here.
/// The start of a skill's description, as a change record shows it.
fn short_description(parsed: &library::Parsed) -> String {
    parsed
        .frontmatter
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .chars()
        .take(120)
        .collect()
}

fn existing(roots: &[Root], name: &str) -> Result<Skill, Value> {
    if let Some(why) = library::lookup_error(name) {
        return Err(fail(why));
    }
    let mut found = library::find(roots, name);
    match found.len() {
        0 => Err(not_found(name, roots, "")),
        1 => {
            let skill = found.remove(0);
            if !skill.root.writable {
                return Err(fail(format!(
                    "Skill '{name}' is a bundled skill at {} and is read-only here; create your own copy under another name.",
                    skill.dir.display()
                )));
            }
            Ok(skill)
        }
        n => Err(json!({
            "success": false,
            "error": format!("Ambiguous skill name '{name}': {n} skills match; use its `category/name` path."),
            "matches": found.iter().map(|s| s.dir.display().to_string()).collect::<Vec<_>>(),
        })),
    }
}

/// A supporting file's path: under one of the support folders (or SKILL.md itself).
fn support_path(file_path: &str) -> Result<(), Value> {
    if file_path.is_empty() {
        return Err(fail("file_path is required."));
    }
    if let Some(why) = library::traversal_error(file_path) {
        return Err(fail(why));
    }
    let parts: Vec<&str> = Path::new(file_path)
        .iter()
        .filter_map(|p| p.to_str())
        .filter(|p| *p != ".")
        .collect();
    if parts.last() == Some(&"SKILL.md") && parts.len() <= 2 {
        return Ok(());
    }
    match parts.first() {
        Some(first) if SUPPORT_DIRS.contains(first) && parts.len() >= 2 => Ok(()),
        Some(first) if SUPPORT_DIRS.contains(first) => Err(fail(format!(
            "Give a file path, not just a folder, e.g. '{first}/notes.md'."
        ))),
        _ => Err(fail(format!(
            "The file must be under one of: {}. Got: '{file_path}'",
            SUPPORT_DIRS.join(", ")
        ))),
    }
}

/// Where `file_path` of `skill` is, refusing anything that resolves outside it.
fn target_in(skill: &Skill, file_path: &str) -> Result<PathBuf, Value> {
    let parts: Vec<&str> = Path::new(file_path)
        .iter()
        .filter_map(|p| p.to_str())
        .collect();
    let target = if parts.last() == Some(&"SKILL.md") && parts.len() <= 2 {
        skill.skill_md()
    } else {
        skill.dir.join(file_path)
    };
    if !library::stays_within(&target, &skill.dir) {
        return Err(fail(format!(
            "'{file_path}' resolves outside the skill's folder; refused."
        )));
    }
    Ok(target)
}

pub fn create(
    access: &AccessPolicy,
    roots: &[Root],
    name: &str,
    content: &str,
    category: Option<&str>,
) -> Outcome {
    library::validate_name(name, "Skill name").map_err(fail)?;
    let category = category.map(str::trim).filter(|c| !c.is_empty());
    if let Some(category) = category {
        library::validate_name(category, "Category").map_err(fail)?;
    }
    let parsed = library::validate(content).map_err(fail)?;
    if let Some(taken) = library::find(roots, name).first() {
        return Err(fail(format!(
            "A skill named '{name}' already exists at {}.",
            taken.dir.display()
        )));
    }
    let local = &roots[0].dir;
    std::fs::create_dir_all(local)
        .map_err(|e| fail(format!("Cannot create {}: {e}", local.display())))?;
    let dir = match category {
        Some(category) => local.join(category).join(name),
        None => local.join(name),
    };
    let skill_md = dir.join("SKILL.md");
    if !library::stays_within(&skill_md, local) {
        return Err(fail(
            "The skill's folder would resolve outside the skills directory; refused.",
        ));
    }
    write_text(access, &skill_md, content)?;
    let description = short_description(&parsed);
    let mut result = json!({
        "success": true,
        "message": format!("Skill '{name}' created."),
        "path": dir.strip_prefix(local).unwrap_or(&dir).display().to_string(),
        "skill_md": skill_md.display().to_string(),
        "_change": {"description": description},
        "hint": format!("To add reference files, templates or scripts, use skill_manage(action='write_file', name='{name}', file_path='references/example.md', file_content='...')"),
    });
    if let Some(category) = category {
        result["category"] = json!(category);
    }
    Ok(result)
}

pub fn edit(access: &AccessPolicy, roots: &[Root], name: &str, content: &str) -> Outcome {
    let parsed = library::validate(content).map_err(fail)?;
    let skill = existing(roots, name)?;
    write_text(access, &skill.skill_md(), content)?;
    let description = short_description(&parsed);
    Ok(json!({
        "success": true,
        "message": format!("Skill '{name}' updated (full rewrite)."),
        "path": skill.dir.display().to_string(),
        "_change": {"description": description},
    }))
}

pub fn patch(
    access: &AccessPolicy,
    roots: &[Root],
    name: &str,
    old: &str,
    new: &str,
    file_path: Option<&str>,
    replace_all: bool,
) -> Outcome {
    if old.is_empty() {
        return Err(fail("old_string is required for 'patch'."));
    }
    let skill = existing(roots, name)?;
    let target = match file_path.filter(|p| !p.is_empty()) {
        Some(file_path) => {
            support_path(file_path)?;
            target_in(&skill, file_path)?
        }
        None => skill.skill_md(),
    };
    let label = file_path.filter(|p| !p.is_empty()).unwrap_or("SKILL.md");
    if !target.is_file() {
        return Err(fail(format!("File not found: {label}")));
    }
    let content =
        std::fs::read_to_string(&target).map_err(|e| fail(format!("Cannot read {label}: {e}")))?;
    let found = match find_replace::find(&content, old) {
        Ok(found) => found,
        Err(find_replace::Miss::Ambiguous(places)) => {
            return Err(fail(format!("old_string fits several places in {label} equally well ({places}); include more context.")))
        }
        Err(find_replace::Miss::NotFound(_)) => {
            let preview: String = content.chars().take(500).collect();
            return Err(json!({"success": false, "error": format!("Could not find old_string in {label}."), "file_preview": preview}));
        }
    };
    let count = found.ranges.len();
    if count > 1 && !replace_all {
        return Err(fail(format!(
            "old_string matches {count} places in {label}; include more context so it matches one, or set replace_all=true."
        )));
    }
    let updated = found.apply(&content, new);
    if updated.chars().count() > library::MAX_SKILL_CONTENT_CHARS {
        return Err(fail(format!(
            "{label} would exceed {} characters.",
            library::MAX_SKILL_CONTENT_CHARS
        )));
    }
    if target == skill.skill_md() {
        library::validate(&updated)
            .map_err(|why| fail(format!("Patch would break SKILL.md structure: {why}")))?;
    }
    write_text(access, &target, &updated)?;
    let clip = |s: &str| {
        if s.chars().count() > 200 {
            s.chars().take(200).collect::<String>() + "…"
        } else {
            s.to_string()
        }
    };
    Ok(json!({
        "success": true,
        "message": format!("Patched {label} in skill '{name}' ({count} replacement{}).", if count > 1 { "s" } else { "" }),
        "_change": {"old": clip(old), "new": clip(new)},
    }))
}

pub fn delete(roots: &[Root], name: &str, absorbed_into: Option<&str>) -> Outcome {
    let skill = existing(roots, name)?;
    let absorbed = absorbed_into.map(str::trim).filter(|t| !t.is_empty());
    if let Some(target) = absorbed {
        if target == name {
            return Err(fail(format!(
                "absorbed_into='{target}' cannot be the skill being deleted."
            )));
        }
        if library::find(roots, target).is_empty() {
            return Err(fail(format!(
                "absorbed_into='{target}' does not exist. Create or patch the umbrella skill first, then delete."
            )));
        }
    }
    // The folder itself must be a real folder below its root, never the root or a link.
    let is_link = std::fs::symlink_metadata(&skill.dir)
        .map(|m| m.file_type().is_symlink())
        .unwrap_or(true);
    let root = std::fs::canonicalize(&skill.root.dir).ok();
    let dir = std::fs::canonicalize(&skill.dir).ok();
    let below_root = matches!((&root, &dir), (Some(r), Some(d)) if d != r && d.starts_with(r));
    if is_link || !below_root {
        return Err(fail(format!(
            "Refusing to delete {}: it is not a skill folder inside its skills directory.",
            skill.dir.display()
        )));
    }
    std::fs::remove_dir_all(&skill.dir)
        .map_err(|e| fail(format!("Cannot delete skill '{name}': {e}")))?;
    if let Some(parent) = skill.dir.parent() {
        if parent != skill.root.dir
            && std::fs::read_dir(parent)
                .map(|mut d| d.next().is_none())
                .unwrap_or(false)
        {
            let _ = std::fs::remove_dir(parent);
        }
    }
    let mut message = format!("Skill '{name}' deleted.");
    if let Some(target) = absorbed {
        message.push_str(&format!(" Content absorbed into '{target}'."));
    }
    Ok(json!({"success": true, "message": message}))
}

pub fn write_file(
    access: &AccessPolicy,
    roots: &[Root],
    name: &str,
    file_path: &str,
    file_content: &str,
) -> Outcome {
    support_path(file_path)?;
    if file_content.len() > MAX_SKILL_FILE_BYTES {
        return Err(fail(format!(
            "File content is {} bytes (limit {MAX_SKILL_FILE_BYTES} bytes, 1 MiB); split it into smaller files.",
            file_content.len()
        )));
    }
    let skill = existing(roots, name).map_err(|mut e| {
        if e["error"]
            .as_str()
            .is_some_and(|m| m.ends_with("not found."))
        {
            e["error"] = json!(format!(
                "{} Create it first with action='create'.",
                e["error"].as_str().unwrap_or_default()
            ));
        }
        e
    })?;
    let target = target_in(&skill, file_path)?;
    if target == skill.skill_md() {
        library::validate(file_content).map_err(fail)?;
    }
    write_text(access, &target, file_content)?;
    Ok(json!({
        "success": true,
        "message": format!("File '{file_path}' written to skill '{name}'."),
        "path": target.display().to_string(),
    }))
}

pub fn remove_file(access: &AccessPolicy, roots: &[Root], name: &str, file_path: &str) -> Outcome {
    support_path(file_path)?;
    let skill = existing(roots, name)?;
    let target = target_in(&skill, file_path)?;
    if target == skill.skill_md() {
        return Err(fail(
            "SKILL.md cannot be removed with remove_file; use action='delete' for the whole skill.",
        ));
    }
    if !std::fs::symlink_metadata(&target)
        .map(|m| m.is_file())
        .unwrap_or(false)
    {
        let available: Vec<Value> = library::linked_files(&skill.dir)
            .values()
            .flat_map(|v| v.as_array().cloned().unwrap_or_default())
            .collect();
        return Err(json!({
            "success": false,
            "error": format!("File '{file_path}' not found in skill '{name}'."),
            "available_files": if available.is_empty() { Value::Null } else { Value::from(available) },
        }));
    }
    crate::file_access::remove_file(access, &target, "Remove", file_path)
        .map_err(|e| fail(e.to_string()))?;
    if let Some(parent) = target.parent() {
        if parent != skill.dir
            && std::fs::read_dir(parent)
                .map(|mut d| d.next().is_none())
                .unwrap_or(false)
        {
            let _ = std::fs::remove_dir(parent);
        }
    }
    Ok(
        json!({"success": true, "message": format!("File '{file_path}' removed from skill '{name}'.")}),
    )
}
