//! The `skills` toolset: skills_list, skill_view, skill_manage.
//!
//! A skill is a folder with a SKILL.md (YAML frontmatter with `name` and
//! `description`, then instructions) and optional supporting files under
//! references/, templates/, scripts/ and assets/. New skills go to
//! `$HERMES_HOME/skills/[<category>/]<name>/`.

use hermes_runtime::prelude::*;

use crate::shared::skills_library as library;
mod manage;

use library::Root;

fn roots(ctx: &ToolContext) -> Vec<Root> {
    library::roots(ctx.hermes_home())
}

/// List the skills you have (name, description, category). Skills are saved procedures for recurring kinds of task; load one with skill_view(name) before doing such a task.
#[tool(toolset = "skills", emoji = "📚", concurrency = "read_only")]
pub fn skills_list(
    /// Only skills of this category.
    category: Option<String>,
    ctx: &ToolContext,
) -> ToolResult {
    let roots = roots(ctx);
    let local = &roots[0].dir;
    if !local.exists() {
        if let Err(e) = std::fs::create_dir_all(local) {
            return Ok(json!({"success": false, "error": format!("Cannot create {}: {e}", local.display())}).into());
        }
    }
    let mut skills = library::all_skills(&roots);
    if let Some(category) = category.as_deref().filter(|c| !c.is_empty()) {
        skills.retain(|s| s.category.as_deref() == Some(category));
    }
    if skills.is_empty() {
        return Ok(json!({
            "success": true,
            "skills": [],
            "categories": [],
            "message": format!("No skills found in {}.", local.display()),
        })
        .into());
    }
    let mut categories: Vec<&str> = skills
        .iter()
        .filter_map(|s| s.category.as_deref())
        .collect();
    categories.dedup();
    categories.sort_unstable();
    categories.dedup();
    let listed: Vec<Value> = skills
        .iter()
        .map(|s| json!({"name": s.name, "description": s.description, "category": s.category}))
        .collect();
    Ok(json!({
        "success": true,
        "skills": listed,
        "categories": categories,
        "count": skills.len(),
        "hint": "Use skill_view(name) to see full content, tags, and linked files",
    })
    .into())
}

/// Load a skill: its SKILL.md instructions, plus `linked_files` listing its references, templates, scripts and assets. To read one of those, call again with `file_path`.
#[tool(toolset = "skills", emoji = "📚", concurrency = "read_only")]
pub fn skill_view(
    /// The skill's name as skills_list shows it, or its `category/name` path.
    name: String,
    /// A file inside the skill, e.g. `references/api.md`. Leave out for SKILL.md.
    file_path: Option<String>,
    ctx: &ToolContext,
) -> ToolResult {
    if let Some(why) = library::lookup_error(&name) {
        return Ok(json!({"success": false, "error": why, "hint": "Use a skill name or a relative path in the skills directory."}).into());
    }
    let roots = roots(ctx);
    let mut found = library::find(&roots, &name);
    if found.len() > 1 {
        return Ok(json!({
            "success": false,
            "error": format!("Ambiguous skill name '{name}': {} skills match. Load one by its `category/name` path.", found.len()),
            "matches": found.iter().map(|s| s.skill_md().display().to_string()).collect::<Vec<_>>(),
        })
        .into());
    }
    let Some(skill) = found.pop() else {
        let known: Vec<String> = library::all_skills(&roots)
            .into_iter()
            .take(20)
            .map(|s| s.name)
            .collect();
        return Ok(json!({
            "success": false,
            "error": format!("Skill '{name}' not found."),
            "available_skills": known,
            "hint": "Use skills_list to see all available skills",
        })
        .into());
    };
    match file_path.as_deref().filter(|p| !p.is_empty()) {
        Some(file_path) => Ok(view_file(&skill, &name, file_path, ctx).into()),
        None => Ok(view_skill(&skill, &roots, ctx).into()),
    }
}

fn view_file(skill: &library::Skill, name: &str, file_path: &str, ctx: &ToolContext) -> Value {
    if let Some(why) = library::traversal_error(file_path) {
        return json!({"success": false, "error": why, "hint": "Use a relative path within the skill directory"});
    }
    let target = skill.dir.join(file_path);
    if !library::stays_within(&target, &skill.dir) {
        return json!({"success": false, "error": format!("'{file_path}' resolves outside the skill's folder; refused.")});
    }
    if crate::file_access::is_device_path(&target) || !target.is_file() {
        return json!({
            "success": false,
            "error": format!("File '{file_path}' not found in skill '{name}'."),
            "available_files": library::linked_files(&skill.dir),
            "hint": "Use one of the available file paths listed above",
        });
    }
    let read = crate::file_access::policy(ctx)
        .and_then(|access| library::read_in_root(&skill.root.dir, &target, Some(&access)))
        .map(String::into_bytes)
        .map_err(|e| e.to_string());
    match read {
        Ok(bytes) => match String::from_utf8(bytes) {
            Ok(content) => json!({
                "success": true,
                "name": name,
                "file": file_path,
                "content": content,
                "file_type": target.extension().map(|e| format!(".{}", e.to_string_lossy())).unwrap_or_default(),
            }),
            Err(e) => json!({
                "success": true,
                "name": name,
                "file": file_path,
                "content": format!("[Binary file: {}, size: {} bytes]", target.file_name().unwrap_or_default().to_string_lossy(), e.as_bytes().len()),
                "is_binary": true,
            }),
        },
        Err(e) => json!({"success": false, "error": format!("Cannot read '{file_path}': {e}")}),
    }
}

fn string_list(value: Option<&Value>) -> Vec<String> {
    match value {
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_owned)
                    .unwrap_or_else(|| v.to_string())
            })
            .collect(),
        Some(Value::String(text)) => text
            .trim_matches(['[', ']'])
            .split(',')
            .map(|t| t.trim().trim_matches(['"', '\'']).to_string())
            .filter(|t| !t.is_empty())
            .collect(),
        _ => Vec::new(),
    }
}

fn view_skill(skill: &library::Skill, roots: &[Root], ctx: &ToolContext) -> Value {
    let read = crate::file_access::policy(ctx).and_then(|access| {
        library::read_in_root(&skill.root.dir, &skill.skill_md(), Some(&access))
    });
    let content = match read {
        Ok(content) => content,
        Err(e) => {
            return json!({"success": false, "error": format!("Failed to read skill '{}': {e}", skill.name)})
        }
    };
    let frontmatter = library::parse(&content)
        .map(|p| p.frontmatter)
        .unwrap_or_default();
    let hermes = frontmatter.get("metadata").and_then(|m| m.get("hermes"));
    let tags = string_list(
        hermes
            .and_then(|h| h.get("tags"))
            .or(frontmatter.get("tags")),
    );
    let related = string_list(
        hermes
            .and_then(|h| h.get("related_skills"))
            .or(frontmatter.get("related_skills")),
    );
    let required_env: Vec<String> = match frontmatter.get("required_environment_variables") {
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(|i| {
                i.as_str()
                    .map(str::to_owned)
                    .or_else(|| i.get("name").and_then(Value::as_str).map(str::to_owned))
            })
            .collect(),
        _ => string_list(
            frontmatter
                .get("prerequisites")
                .and_then(|p| p.get("env_vars")),
        ),
    };
    let missing: Vec<&String> = required_env
        .iter()
        .filter(|n| std::env::var_os(n.as_str()).is_none_or(|v| v.is_empty()))
        .collect();
    let linked = library::linked_files(&skill.dir);
    let relative = skill
        .skill_md()
        .strip_prefix(&roots[0].dir)
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| skill.skill_md().display().to_string());
    let mut result = json!({
        "success": true,
        "name": skill.name,
        "description": frontmatter.get("description").cloned().unwrap_or(json!("")),
        "tags": tags,
        "related_skills": related,
        "content": content,
        "path": relative,
        "skill_dir": skill.dir.display().to_string(),
        "linked_files": if linked.is_empty() { Value::Null } else { Value::Object(linked.clone()) },
        "usage_hint": if linked.is_empty() { Value::Null } else { json!("To view linked files, call skill_view(name, file_path) where file_path is e.g. 'references/api.md' or 'assets/config.yaml'") },
        "required_environment_variables": required_env,
        "missing_required_environment_variables": missing,
        "setup_needed": !missing.is_empty(),
        "readiness_status": if missing.is_empty() { "available" } else { "setup_needed" },
    });
    if !skill.root.writable || skill.root.dir != roots[0].dir {
        result["source_dir"] = json!(skill.root.dir.display().to_string());
    }
    if let Some(metadata) = frontmatter.get("metadata").filter(|m| m.is_object()) {
        result["metadata"] = metadata.clone();
    }
    result
}

/// What skill_manage does.
#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SkillAction {
    Create,
    Patch,
    Edit,
    Delete,
    WriteFile,
    RemoveFile,
}

/// Create, change or delete skills: your procedural memory of approaches that worked. New skills go to $HERMES_HOME/skills/. Actions: `create` (full SKILL.md in `content`, optional `category`), `patch` (`old_string` -> `new_string`, the preferred way to fix a skill), `edit` (a full SKILL.md rewrite, for major changes), `delete`, `write_file` and `remove_file` (supporting files under references/, templates/, scripts/ or assets/). SKILL.md starts with YAML frontmatter holding `name` and `description`, then the instructions. Create a skill after a hard task succeeded, after overcoming errors, or when the user asks you to remember a procedure; patch it as soon as you find it stale or incomplete. Good skills state when to use them, numbered steps with exact commands, pitfalls and how to verify. Confirm with the user before creating or deleting.
// One parameter per field of the tool's schema.
#[allow(clippy::too_many_arguments)]
#[tool(toolset = "skills", emoji = "📝")]
pub fn skill_manage(
    /// The action to perform.
    action: SkillAction,
    /// Skill name (lowercase letters, digits, '.', '_', '-'; at most 64 characters). For every action but create it must be an existing skill.
    name: String,
    /// Full SKILL.md text (YAML frontmatter, then the body). Required for create and edit; for edit, read the skill first with skill_view and give the whole updated text.
    content: Option<String>,
    /// Text to find (patch). Must be unique unless replace_all is true; include enough context.
    old_string: Option<String>,
    /// Replacement text (patch); an empty string deletes the match.
    new_string: Option<String>,
    /// patch: replace every occurrence instead of requiring one (default false).
    replace_all: Option<bool>,
    /// create only: a category folder to group the skill under (e.g. devops, data-science).
    category: Option<String>,
    /// A supporting file in the skill: for write_file and remove_file it must be under references/, templates/, scripts/ or assets/; for patch it defaults to SKILL.md.
    file_path: Option<String>,
    /// The file's content (write_file).
    file_content: Option<String>,
    /// delete only: the skill this one was merged into (it must exist), or "" when it is pruned with no successor.
    absorbed_into: Option<String>,
    ctx: &ToolContext,
) -> ToolResult {
    let roots = roots(ctx);
    let missing =
        |what: &str| -> ToolResult { Ok(json!({"success": false, "error": what}).into()) };
    // Writes go to the local skills folder only, with the protected places of the
    // task's access policy still refused there.
    let access = match crate::file_access::policy(ctx) {
        Ok(access) => access.confined_to(&roots[0].dir),
        Err(e) => return missing(&e),
    };
    let outcome = match action {
        SkillAction::Create => match content.as_deref().filter(|c| !c.is_empty()) {
            Some(content) => manage::create(&access, &roots, &name, content, category.as_deref()),
            None => return missing("content is required for 'create': give the full SKILL.md text (frontmatter and body)."),
        },
        SkillAction::Edit => match content.as_deref().filter(|c| !c.is_empty()) {
            Some(content) => manage::edit(&access, &roots, &name, content),
            None => return missing("content is required for 'edit': give the full updated SKILL.md text."),
        },
        SkillAction::Patch => match (old_string.as_deref().filter(|o| !o.is_empty()), new_string.as_deref()) {
            (None, _) => return missing("old_string is required for 'patch': give the text to find."),
            (_, None) => return missing("new_string is required for 'patch'; use an empty string to delete the match."),
            (Some(old), Some(new)) => manage::patch(&access, &roots, &name, old, new, file_path.as_deref(), replace_all.unwrap_or(false)),
        },
        SkillAction::Delete => manage::delete(&roots, &name, absorbed_into.as_deref()),
        SkillAction::WriteFile => match (file_path.as_deref().filter(|p| !p.is_empty()), file_content.as_deref()) {
            (None, _) => return missing("file_path is required for 'write_file', e.g. 'references/api-guide.md'."),
            (_, None) => return missing("file_content is required for 'write_file'."),
            (Some(path), Some(text)) => manage::write_file(&access, &roots, &name, path, text),
        },
        SkillAction::RemoveFile => match file_path.as_deref().filter(|p| !p.is_empty()) {
            Some(path) => manage::remove_file(&access, &roots, &name, path),
            None => return missing("file_path is required for 'remove_file'."),
        },
    };
    Ok(outcome.unwrap_or_else(|failure| failure).into())
}
