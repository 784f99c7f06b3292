//! Where skills live and how they are read: the skill roots, SKILL.md frontmatter,
//! discovery and lookup by name.
//!
//! Roots, in precedence order: `$HERMES_HOME/skills` (where new skills go), the
//! directories of `skills.external_dirs` in config.yaml, and the bundled skills of an
//! installation when `HERMES_BUNDLED_SKILLS` names them (read-only).

use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

pub const MAX_NAME_LENGTH: usize = 64;
pub const MAX_DESCRIPTION_LENGTH: usize = 1024;
pub const MAX_SKILL_CONTENT_CHARS: usize = 100_000;
pub const MAX_SKILL_FILE_BYTES: usize = 1_048_576;
/// Supporting files live under these folders of a skill.
pub const SUPPORT_DIRS: [&str; 4] = ["assets", "references", "scripts", "templates"];
/// Folders never searched for skills: metadata, VCS, environments, caches.
const EXCLUDED_DIRS: [&str; 14] = [
    ".git",
    ".github",
    ".hub",
    ".archive",
    ".venv",
    "venv",
    "node_modules",
    "site-packages",
    "__pycache__",
    ".tox",
    ".nox",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
];

#[derive(Debug, Clone)]
pub struct Root {
    pub dir: PathBuf,
    /// Skills here may be edited and deleted.
    pub writable: bool,
}

/// The skill roots for `hermes_home`, the local one first.
pub fn roots(hermes_home: &Path) -> Vec<Root> {
    let local = hermes_home.join("skills");
    let mut roots = vec![Root {
        dir: local.clone(),
        writable: true,
    }];
    let config = hermes_runtime::config::Config::load(hermes_home);
    let external = match config.get("skills.external_dirs") {
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        Some(Value::String(one)) => vec![one.clone()],
        _ => Vec::new(),
    };
    let mut add = |dir: PathBuf, writable: bool| {
        let same = |a: &Path, b: &Path| {
            std::fs::canonicalize(a)
                .ok()
                .zip(std::fs::canonicalize(b).ok())
                .is_some_and(|(a, b)| a == b)
        };
        if dir.is_dir() && !roots.iter().any(|r| same(&r.dir, &dir)) {
            roots.push(Root { dir, writable });
        }
    };
    for entry in external {
        add(expand_home(&entry), true);
    }
    if let Some(bundled) = std::env::var_os("HERMES_BUNDLED_SKILLS").filter(|v| !v.is_empty()) {
        add(PathBuf::from(bundled), false);
    }
    roots
}

fn expand_home(path: &str) -> PathBuf {
    match (path.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ if path == "~" => std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(path)),
        _ => PathBuf::from(path),
    }
}

/// A SKILL.md split into its YAML frontmatter (a mapping) and body.
pub struct Parsed {
    pub frontmatter: Map<String, Value>,
    pub body: String,
}

/// Splits and parses the frontmatter; `Err` says what is wrong in words for the model.
pub fn parse(content: &str) -> Result<Parsed, String> {
    let content = content.trim_start_matches('\u{feff}');
    if !content.starts_with("---") {
        return Err("SKILL.md must start with YAML frontmatter (a `---` line, `name:` and `description:`, then `---`).".into());
    }
    let rest = &content[3..];
    let Some((yaml, body)) = split_at_closing_fence(rest) else {
        return Err(
            "SKILL.md frontmatter is not closed: end it with a line holding only `---`.".into(),
        );
    };
    let parsed: serde_yaml_ng::Value = serde_yaml_ng::from_str(yaml)
        .map_err(|e| format!("The YAML frontmatter does not parse: {e}"))?;
    let Ok(Value::Object(frontmatter)) = serde_json::to_value(parsed) else {
        return Err("The frontmatter must be a YAML mapping of `key: value` pairs.".into());
    };
    Ok(Parsed {
        frontmatter,
        body: body.to_string(),
    })
}

/// `(yaml, body)` around the first line after the opening fence that is `---`.
fn split_at_closing_fence(rest: &str) -> Option<(&str, &str)> {
    let mut at = 0;
    for line in rest.split_inclusive('\n') {
        if at > 0 && line.trim_end() == "---" {
            return Some((&rest[..at], &rest[at + line.len()..]));
        }
        at += line.len();
    }
    None
}

/// What a SKILL.md written by the model must satisfy.
pub fn validate(content: &str) -> Result<Parsed, String> {
    if content.trim().is_empty() {
        return Err("Content cannot be empty.".into());
    }
    if content.chars().count() > MAX_SKILL_CONTENT_CHARS {
        return Err(format!(
            "SKILL.md is {} characters (limit {MAX_SKILL_CONTENT_CHARS}); move details into references/ files.",
            content.chars().count()
        ));
    }
    let parsed = parse(content)?;
    let name = parsed.frontmatter.get("name");
    if name.is_none_or(|n| n.is_null() || n.as_str().is_some_and(|s| s.trim().is_empty())) {
        return Err("The frontmatter must include a `name` field.".into());
    }
    let description = match parsed.frontmatter.get("description") {
        None | Some(Value::Null) => {
            return Err("The frontmatter must include a `description` field.".into())
        }
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    };
    if description.trim().is_empty() {
        return Err("The frontmatter `description` must not be empty.".into());
    }
    if description.chars().count() > MAX_DESCRIPTION_LENGTH {
        return Err(format!(
            "The description exceeds {MAX_DESCRIPTION_LENGTH} characters."
        ));
    }
    if parsed.body.trim().is_empty() {
        return Err("SKILL.md needs instructions after the frontmatter.".into());
    }
    Ok(parsed)
}

/// Skill and category names: lowercase letters, digits, `.`, `_`, `-`.
pub fn validate_name(name: &str, what: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err(format!("{what} is required."));
    }
    if name.chars().count() > MAX_NAME_LENGTH {
        return Err(format!("{what} exceeds {MAX_NAME_LENGTH} characters."));
    }
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if !first_ok
        || !name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c))
    {
        return Err(format!(
            "Invalid {} '{name}': use lowercase letters, digits, '.', '_' and '-', starting with a letter or digit.",
            what.to_lowercase()
        ));
    }
    Ok(())
}

/// One installed skill.
#[derive(Debug, Clone)]
pub struct Skill {
    pub dir: PathBuf,
    pub root: Root,
    pub name: String,
    pub description: String,
    pub category: Option<String>,
}

impl Skill {
    pub fn skill_md(&self) -> PathBuf {
        self.dir.join("SKILL.md")
    }
}

/// The text of `path`, a file of the skills folder `root`: read only when it stays in
/// that folder with every symlink followed, and is not on the deny-read list of
/// `access` (when given). `Err` says why not.
pub fn read_in_root(
    root: &Path,
    path: &Path,
    access: Option<&hermes_runtime::access::AccessPolicy>,
) -> Result<String, String> {
    use std::io::Read;
    let base = std::fs::canonicalize(root).map_err(|e| format!("{}: {e}", root.display()))?;
    let within = path
        .strip_prefix(root)
        .map(|rest| base.join(rest))
        .unwrap_or_else(|_| path.to_path_buf());
    let (mut file, real) =
        hermes_runtime::access::open_file_beneath(&base, &within).map_err(|e| e.to_string())?;
    if let Some(refusal) = access.and_then(|a| a.read_refusal(&real)) {
        return Err(refusal.message("Read", &path.display().to_string()));
    }
    let mut text = String::new();
    file.read_to_string(&mut text).map_err(|e| e.to_string())?;
    Ok(text)
}

/// Every SKILL.md under `root`, sorted; support folders of a skill are not entered.
fn index_files(root: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let has_skill = dir.join("SKILL.md").is_file();
        if has_skill {
            found.push(dir.join("SKILL.md"));
        }
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let is_dir = entry.path().is_dir();
            if !is_dir
                || EXCLUDED_DIRS.contains(&name.as_str())
                || (has_skill && SUPPORT_DIRS.contains(&name.as_str()))
            {
                continue;
            }
            // Bounded depth: category/name is two levels; deeper trees are unusual.
            if entry
                .path()
                .strip_prefix(root)
                .map(|p| p.components().count())
                .unwrap_or(99)
                <= 4
            {
                stack.push(entry.path());
            }
        }
    }
    found.sort();
    found
}

fn read_skill(skill_md: &Path, root: &Root) -> Option<Skill> {
    let mut head = read_in_root(&root.dir, skill_md, None).ok()?;
    if head.len() > 4000 {
        let mut cut = 4000;
        while !head.is_char_boundary(cut) {
            cut -= 1;
        }
        head.truncate(cut);
    }
    let dir = skill_md.parent()?.to_path_buf();
    let dir_name = dir.file_name()?.to_string_lossy().into_owned();
    let (frontmatter, body) = match parse(&head) {
        Ok(parsed) => (parsed.frontmatter, parsed.body),
        Err(_) => (Map::new(), head.clone()),
    };
    let name: String = frontmatter
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or(&dir_name)
        .chars()
        .take(MAX_NAME_LENGTH)
        .collect();
    let mut description = frontmatter
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if description.is_empty() {
        description = body
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty() && !l.starts_with('#'))
            .unwrap_or_default()
            .to_string();
    }
    if description.chars().count() > MAX_DESCRIPTION_LENGTH {
        description = description
            .chars()
            .take(MAX_DESCRIPTION_LENGTH - 3)
            .collect::<String>()
            + "...";
    }
    let relative = skill_md.strip_prefix(&root.dir).ok()?;
    let parts: Vec<String> = relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let category = (parts.len() >= 3).then(|| parts[0].clone());
    Some(Skill {
        dir,
        root: root.clone(),
        name,
        description,
        category,
    })
}

/// Every skill of every root; a name already seen in an earlier root is skipped.
pub fn all_skills(roots: &[Root]) -> Vec<Skill> {
    let mut skills: Vec<Skill> = Vec::new();
    for root in roots {
        for skill_md in index_files(&root.dir) {
            if let Some(skill) = read_skill(&skill_md, root) {
                if !skills.iter().any(|s| s.name == skill.name) {
                    skills.push(skill);
                }
            }
        }
    }
    skills.sort_by(|a, b| {
        (a.category.as_deref().unwrap_or(""), &a.name)
            .cmp(&(b.category.as_deref().unwrap_or(""), &b.name))
    });
    skills
}

/// A name given by the model may be a bare name or `category/name`; never absolute,
/// never with `..`.
pub fn lookup_error(name: &str) -> Option<String> {
    let path = Path::new(name);
    if name.trim().is_empty() {
        return Some("Give the skill's name (see skills_list).".into());
    }
    if path.is_absolute()
        || name.contains('\\')
        || path
            .components()
            .any(|c| !matches!(c, std::path::Component::Normal(_)))
    {
        return Some(format!(
            "Invalid skill name '{name}': use a skill name or a relative `category/name` path."
        ));
    }
    None
}

/// Skills matching `name` (a `category/name` path under a root, a folder name or a
/// frontmatter name), from the first root that has any: an earlier root's skill hides
/// a later one's of the same name. Several matches within one root are returned for
/// the caller to report as ambiguous.
pub fn find(roots: &[Root], name: &str) -> Vec<Skill> {
    for root in roots {
        let direct = root.dir.join(name).join("SKILL.md");
        if direct.is_file() {
            if let Some(skill) = read_skill(&direct, root) {
                return vec![skill];
            }
        }
        let matches: Vec<Skill> = index_files(&root.dir)
            .iter()
            .filter_map(|skill_md| read_skill(skill_md, root))
            .filter(|skill| {
                skill.name == name
                    || skill
                        .dir
                        .file_name()
                        .is_some_and(|n| n.to_string_lossy() == name)
            })
            .collect();
        if !matches.is_empty() {
            return matches;
        }
    }
    Vec::new()
}

/// True when `path` (after resolving symlinks of the parts that exist) stays in `dir`.
pub fn stays_within(path: &Path, dir: &Path) -> bool {
    let Ok(base) = std::fs::canonicalize(dir) else {
        return false;
    };
    let mut existing = path.to_path_buf();
    let mut tail = Vec::new();
    while !existing.exists() {
        match (
            existing.file_name().map(|n| n.to_os_string()),
            existing.parent(),
        ) {
            (Some(name), Some(parent)) => {
                tail.push(name);
                existing = parent.to_path_buf();
            }
            _ => return false,
        }
    }
    let Ok(mut resolved) = std::fs::canonicalize(&existing) else {
        return false;
    };
    for part in tail.into_iter().rev() {
        resolved.push(part);
    }
    resolved.starts_with(&base)
}

/// A relative path inside a skill with no `..`, root or prefix parts.
pub fn traversal_error(file_path: &str) -> Option<String> {
    let path = Path::new(file_path);
    if path.is_absolute()
        || path.components().any(|c| {
            !matches!(
                c,
                std::path::Component::Normal(_) | std::path::Component::CurDir
            )
        })
    {
        return Some("Path traversal ('..') and absolute paths are not allowed: give a path inside the skill.".into());
    }
    None
}

/// The supporting files of a skill, grouped by their folder.
pub fn linked_files(dir: &Path) -> Map<String, Value> {
    let mut groups = Map::new();
    for sub in SUPPORT_DIRS {
        let mut files = Vec::new();
        collect_files(&dir.join(sub), dir, &mut files, 0);
        files.sort();
        if !files.is_empty() {
            groups.insert(sub.to_string(), Value::from(files));
        }
    }
    groups
}

fn collect_files(dir: &Path, base: &Path, out: &mut Vec<String>, depth: usize) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() && depth < 6 {
            collect_files(&path, base, out, depth + 1);
        } else if kind.is_file() {
            if let Ok(relative) = path.strip_prefix(base) {
                out.push(relative.to_string_lossy().into_owned());
            }
        }
    }
}
