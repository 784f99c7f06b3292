//! What the MCP server offers beside tools: prompts and resources.
//!
//! - [`Skills`]: each skill is a prompt (its SKILL.md, with an optional `task`
//!   argument) and a resource (`skill://<name>`, its files under the template
//!   `skill://{name}/{path}`), read through `skills_list` and `skill_view`, so the
//!   skill roots, lookup and read checks are theirs. Offered when `skill_view` is
//!   among the served tools.
//! - [`StoredOutputs`]: what tools left under `$HERMES_HOME/cache` (spilled results,
//!   terminal output, generated images, audio, screenshots) as `file://` resources.
//!
//! Every file read for a client goes through [`read_for_client`]: the task's access
//! policy (the deny-read list `read_file` obeys) decides on the path the kernel opened.
//!
//! A [`Library`] answers in MCP's JSON shapes; a server holds a list of them and asks
//! each in turn ([`crate::server::Extras`]).

use hermes_runtime::{Registry, ToolCall, ToolContext};
use serde_json::{json, Map, Value};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Largest file served in one `resources/read` or attached to a result.
pub const MAX_READ_BYTES: u64 = 16 * 1024 * 1024;
/// Most stored outputs listed by `resources/list` (the newest).
pub const MAX_LISTED_OUTPUTS: usize = 200;

/// The call a library serves: the registry, and a context of the session's task.
pub struct Serving<'a> {
    pub registry: &'a Arc<Registry>,
    pub ctx: &'a ToolContext,
    /// Whether `tool` is among the tools this server serves.
    pub serves: &'a dyn Fn(&str) -> bool,
}

impl Serving<'_> {
    /// Runs `tool` as a client call would, and reads its JSON answer.
    fn tool(&self, tool: &str, args: Value) -> Value {
        let text = self
            .registry
            .handle_function_call(&ToolCall::new(tool, args), self.ctx);
        serde_json::from_str(&text).unwrap_or_else(|_| json!({"error": text}))
    }
}

/// A source of prompts and resources. Each method answers `None` (or nothing) for
/// names and URIs that are not its own.
pub trait Library: Send + Sync {
    /// `prompts/list` entries: `{"name", "description", "arguments"?}`.
    fn prompts(&self, _serving: &Serving) -> Vec<Value> {
        Vec::new()
    }
    /// A `prompts/get` result (`{"description"?, "messages"}`), or why not.
    fn prompt(
        &self,
        _name: &str,
        _arguments: &Map<String, Value>,
        _serving: &Serving,
    ) -> Option<Result<Value, String>> {
        None
    }
    /// `resources/list` entries: `{"uri", "name", "description"?, "mimeType"?}`.
    fn resources(&self, _serving: &Serving) -> Vec<Value> {
        Vec::new()
    }
    /// `resources/templates/list` entries: `{"uriTemplate", "name", ...}`.
    fn templates(&self, _serving: &Serving) -> Vec<Value> {
        Vec::new()
    }
    /// The `contents` of a `resources/read`, or why not.
    fn read(&self, _uri: &str, _serving: &Serving) -> Option<Result<Vec<Value>, String>> {
        None
    }
    /// Something that changes when the resource at `uri` changes (for
    /// `resources/subscribe`); `None` when the URI is not this library's.
    fn version(&self, _uri: &str, _serving: &Serving) -> Option<String> {
        None
    }
    /// Values for `argument` (typed so far: `value`) of a prompt or a resource template
    /// (`reference` is the request's `ref`).
    fn complete(
        &self,
        _reference: &Value,
        _argument: &str,
        _value: &str,
        _context: &Map<String, Value>,
        _serving: &Serving,
    ) -> Option<Vec<String>> {
        None
    }
}

/// The access policy of the task `ctx` belongs to, built from the operator's
/// configuration as for the file tools and the sandbox.
fn access_policy(ctx: &ToolContext) -> Result<hermes_runtime::access::AccessPolicy, String> {
    let config = hermes_environments::config::TerminalConfig::load(ctx.hermes_home())
        .map_err(|e| format!("the configuration cannot be read, so no file is read: {e}"))?;
    Ok(config.access_policy(ctx.cwd()))
}

/// Reads `path` for a client: refused when the task's access policy denies reading
/// the file the kernel opened (every symlink followed), when it is no regular file,
/// or larger than `limit`. `Err` is a sentence.
pub fn read_for_client(ctx: &ToolContext, path: &Path, limit: u64) -> Result<Vec<u8>, String> {
    use std::os::unix::fs::OpenOptionsExt;
    let shown = path.display().to_string();
    // Non-blocking, so a FIFO put where a file was expected cannot hold the read.
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| format!("{shown}: {e}"))?;
    let real = hermes_runtime::access::fd_path(&file)
        .ok_or_else(|| format!("{shown}: where it leads cannot be told"))?;
    if let Some(refusal) = access_policy(ctx)?.read_refusal(&real) {
        return Err(refusal.message("Read", &shown));
    }
    let meta = file.metadata().map_err(|e| format!("{shown}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("{shown} is not a regular file"));
    }
    if meta.len() > limit {
        return Err(format!(
            "{shown} is {} bytes, more than the {limit} served",
            meta.len()
        ));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.by_ref()
        .take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{shown}: {e}"))?;
    Ok(bytes)
}

/// The MIME type a file's extension says (for content blocks and resources).
pub fn mime_type(path: &Path) -> &'static str {
    let extension = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .unwrap_or_default();
    match extension.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "svg" => "image/svg+xml",
        "wav" => "audio/wav",
        "mp3" => "audio/mpeg",
        "ogg" | "opus" => "audio/ogg",
        "flac" => "audio/flac",
        "m4a" | "aac" => "audio/aac",
        "json" => "application/json",
        "html" | "htm" => "text/html",
        "md" => "text/markdown",
        "pdf" => "application/pdf",
        "txt" | "log" | "csv" | "yaml" | "yml" | "toml" | "py" | "sh" | "rs" | "js" => "text/plain",
        _ => "application/octet-stream",
    }
}

/// `contents` of a resource: text when it is UTF-8 of a text type, else base64.
pub fn contents(uri: &str, mime: &str, bytes: Vec<u8>) -> Value {
    use base64::Engine;
    let textual = mime.starts_with("text/") || mime == "application/json";
    match String::from_utf8(bytes) {
        Ok(text) if textual || mime == "application/octet-stream" => {
            let mime = if textual { mime } else { "text/plain" };
            json!({"uri": uri, "mimeType": mime, "text": text})
        }
        Ok(text) => {
            json!({"uri": uri, "mimeType": mime, "blob": base64::engine::general_purpose::STANDARD.encode(text)})
        }
        Err(e) => {
            json!({"uri": uri, "mimeType": mime, "blob": base64::engine::general_purpose::STANDARD.encode(e.into_bytes())})
        }
    }
}

/// A path as a `file://` URI (bytes outside the unreserved set and `/` escaped).
pub fn file_uri(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut uri = String::from("file://");
    for &byte in path.as_os_str().as_bytes() {
        if byte.is_ascii_alphanumeric() || b"/-._~".contains(&byte) {
            uri.push(byte as char);
        } else {
            uri.push_str(&format!("%{byte:02X}"));
        }
    }
    uri
}

/// The path of a `file://` URI, `None` for anything else.
pub fn file_path(uri: &str) -> Option<PathBuf> {
    use std::os::unix::ffi::OsStringExt;
    let rest = uri.strip_prefix("file://")?;
    let rest = rest.strip_prefix("localhost").unwrap_or(rest);
    if !rest.starts_with('/') {
        return None;
    }
    let mut bytes = Vec::with_capacity(rest.len());
    let raw = rest.as_bytes();
    let mut i = 0;
    while i < raw.len() {
        if raw[i] == b'%' && i + 2 < raw.len() {
            let hex = std::str::from_utf8(&raw[i + 1..i + 3]).ok()?;
            bytes.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            bytes.push(raw[i]);
            i += 1;
        }
    }
    Some(PathBuf::from(std::ffi::OsString::from_vec(bytes)))
}

/// Size and modification time, as a version string.
fn stat_version(path: &Path) -> Option<String> {
    let meta = std::fs::metadata(path).ok()?;
    let modified = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    Some(format!("{}:{modified}", meta.len()))
}

/// Skills as prompts and resources, through `skills_list` and `skill_view`.
pub struct Skills;

const SKILL_SCHEME: &str = "skill://";

impl Skills {
    fn offered(serving: &Serving) -> bool {
        (serving.serves)("skill_view") && (serving.serves)("skills_list")
    }

    fn list(serving: &Serving) -> Vec<Value> {
        if !Skills::offered(serving) {
            return Vec::new();
        }
        match serving.tool("skills_list", json!({})).get("skills") {
            Some(Value::Array(skills)) => skills.clone(),
            _ => Vec::new(),
        }
    }

    /// `skill_view`'s answer for `name` (and a file of it), or its error.
    fn view(name: &str, file: Option<&str>, serving: &Serving) -> Result<Value, String> {
        let mut args = json!({"name": name});
        if let Some(file) = file {
            args["file_path"] = json!(file);
        }
        let viewed = serving.tool("skill_view", args);
        if viewed["success"] == true {
            return Ok(viewed);
        }
        Err(viewed["error"]
            .as_str()
            .map(str::to_owned)
            .unwrap_or_else(|| viewed.to_string()))
    }

    /// `skill://NAME` or `skill://NAME/FILE`.
    fn parse(uri: &str) -> Option<(&str, Option<&str>)> {
        let rest = uri.strip_prefix(SKILL_SCHEME)?;
        match rest.split_once('/') {
            Some((name, file)) if !file.is_empty() => Some((name, Some(file))),
            Some((name, _)) => Some((name, None)),
            None => Some((rest, None)),
        }
        .filter(|(name, _)| !name.is_empty())
    }
}

impl Library for Skills {
    fn prompts(&self, serving: &Serving) -> Vec<Value> {
        Skills::list(serving)
            .iter()
            .map(|skill| {
                json!({
                    "name": skill["name"],
                    "description": skill["description"],
                    "arguments": [{
                        "name": "task",
                        "description": "What to apply the skill to (optional).",
                        "required": false,
                    }],
                })
            })
            .collect()
    }

    fn prompt(
        &self,
        name: &str,
        arguments: &Map<String, Value>,
        serving: &Serving,
    ) -> Option<Result<Value, String>> {
        if !Skills::offered(serving) || !Skills::list(serving).iter().any(|s| s["name"] == name) {
            return None;
        }
        Some(Skills::view(name, None, serving).map(|viewed| {
            let mut text = format!(
                "Follow the skill \"{name}\" below.\n\n{}",
                viewed["content"].as_str().unwrap_or_default()
            );
            if let Some(task) = arguments
                .get("task")
                .and_then(Value::as_str)
                .filter(|t| !t.trim().is_empty())
            {
                text.push_str(&format!("\n\nApply it to this task: {task}"));
            }
            json!({
                "description": viewed["description"],
                "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
            })
        }))
    }

    fn resources(&self, serving: &Serving) -> Vec<Value> {
        Skills::list(serving)
            .iter()
            .filter_map(|skill| {
                let name = skill["name"].as_str()?;
                Some(json!({
                    "uri": format!("{SKILL_SCHEME}{name}"),
                    "name": name,
                    "description": skill["description"],
                    "mimeType": "text/markdown",
                }))
            })
            .collect()
    }

    fn templates(&self, serving: &Serving) -> Vec<Value> {
        if !Skills::offered(serving) {
            return Vec::new();
        }
        vec![json!({
            "uriTemplate": format!("{SKILL_SCHEME}{{name}}/{{path}}"),
            "name": "skill-file",
            "description": "A file of a skill (references/, templates/, scripts/, assets/), as skill_view shows it.",
        })]
    }

    fn read(&self, uri: &str, serving: &Serving) -> Option<Result<Vec<Value>, String>> {
        let (name, file) = Skills::parse(uri)?;
        if !Skills::offered(serving) {
            return None;
        }
        Some(Skills::view(name, file, serving).map(|viewed| {
            let mime = match file {
                Some(file) => mime_type(Path::new(file)),
                None => "text/markdown",
            };
            let mime = if viewed["is_binary"] == true || !mime.starts_with("text/") {
                "text/plain"
            } else {
                mime
            };
            vec![json!({"uri": uri, "mimeType": mime, "text": viewed["content"].as_str().unwrap_or_default()})]
        }))
    }

    fn version(&self, uri: &str, serving: &Serving) -> Option<String> {
        let (name, file) = Skills::parse(uri)?;
        let viewed = Skills::view(name, None, serving).ok()?;
        let dir = PathBuf::from(viewed["skill_dir"].as_str()?);
        stat_version(&dir.join(file.unwrap_or("SKILL.md")))
    }

    fn complete(
        &self,
        reference: &Value,
        argument: &str,
        value: &str,
        context: &Map<String, Value>,
        serving: &Serving,
    ) -> Option<Vec<String>> {
        let template = reference["uri"].as_str()?;
        if !template.starts_with(SKILL_SCHEME) {
            return None;
        }
        match argument {
            "name" => Some(
                Skills::list(serving)
                    .iter()
                    .filter_map(|s| s["name"].as_str())
                    .filter(|n| n.starts_with(value))
                    .map(str::to_owned)
                    .collect(),
            ),
            "path" => {
                let name = context.get("name").and_then(Value::as_str)?;
                let viewed = Skills::view(name, None, serving).ok()?;
                let mut files: Vec<String> = Vec::new();
                for listed in viewed["linked_files"].as_object().into_iter().flatten() {
                    for file in listed.1.as_array().into_iter().flatten() {
                        if let Some(file) = file.as_str().filter(|f| f.starts_with(value)) {
                            files.push(file.to_string());
                        }
                    }
                }
                Some(files)
            }
            _ => Some(Vec::new()),
        }
    }
}

/// Files tools stored under `$HERMES_HOME/cache`, as `file://` resources.
pub struct StoredOutputs;

impl StoredOutputs {
    fn root(serving: &Serving) -> PathBuf {
        serving.ctx.hermes_home().join("cache")
    }

    /// The file of `uri` when it lies under the cache folder (by the real path).
    fn file(uri: &str, serving: &Serving) -> Option<PathBuf> {
        let path = file_path(uri)?;
        let root = std::fs::canonicalize(StoredOutputs::root(serving)).ok()?;
        let real = std::fs::canonicalize(&path).ok()?;
        real.starts_with(&root).then_some(path)
    }

    /// Every regular file under the cache folder that may be read, newest first
    /// (hidden entries, the engines' scratch folders, skipped).
    fn files(serving: &Serving) -> Vec<(PathBuf, std::time::SystemTime, u64)> {
        let Ok(policy) = access_policy(serving.ctx) else {
            return Vec::new();
        };
        let readable = |path: &Path| {
            std::fs::canonicalize(path).is_ok_and(|real| policy.read_refusal(&real).is_none())
        };
        let mut found = Vec::new();
        let mut stack = vec![StoredOutputs::root(serving)];
        while let Some(dir) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                if entry.file_name().to_string_lossy().starts_with('.') {
                    continue;
                }
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                if kind.is_dir() {
                    stack.push(entry.path());
                } else if kind.is_file() && readable(&entry.path()) {
                    if let Ok(meta) = entry.metadata() {
                        let modified = meta.modified().unwrap_or(std::time::UNIX_EPOCH);
                        found.push((entry.path(), modified, meta.len()));
                    }
                }
            }
        }
        found.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        found.truncate(MAX_LISTED_OUTPUTS);
        found
    }
}

impl Library for StoredOutputs {
    fn resources(&self, serving: &Serving) -> Vec<Value> {
        let root = StoredOutputs::root(serving);
        StoredOutputs::files(serving)
            .into_iter()
            .map(|(path, _, size)| {
                let kind = path
                    .strip_prefix(&root)
                    .ok()
                    .and_then(|p| p.components().next())
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .unwrap_or_default();
                json!({
                    "uri": file_uri(&path),
                    "name": path.file_name().unwrap_or_default().to_string_lossy(),
                    "description": format!("Stored by a tool ({kind}, {size} bytes)"),
                    "mimeType": mime_type(&path),
                    "size": size,
                })
            })
            .collect()
    }

    fn read(&self, uri: &str, serving: &Serving) -> Option<Result<Vec<Value>, String>> {
        let path = StoredOutputs::file(uri, serving)?;
        Some(
            read_for_client(serving.ctx, &path, MAX_READ_BYTES)
                .map(|bytes| vec![contents(uri, mime_type(&path), bytes)]),
        )
    }

    fn version(&self, uri: &str, serving: &Serving) -> Option<String> {
        StoredOutputs::file(uri, serving)
            .map(|path| stat_version(&path).unwrap_or_else(|| "gone".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_uris_round_trip() {
        for path in ["/tmp/a b/c%d.txt", "/home/x/ünï/y", "/plain/path-1_2.~"] {
            let uri = file_uri(Path::new(path));
            assert!(!uri.contains(' '), "{uri}");
            assert_eq!(file_path(&uri).unwrap(), PathBuf::from(path), "{uri}");
        }
        assert_eq!(file_path("skill://x"), None);
        assert_eq!(file_path("file://relative"), None);
    }

    #[test]
    fn skill_uris() {
        assert_eq!(Skills::parse("skill://a"), Some(("a", None)));
        assert_eq!(
            Skills::parse("skill://a/references/b.md"),
            Some(("a", Some("references/b.md")))
        );
        assert_eq!(Skills::parse("skill://"), None);
        assert_eq!(Skills::parse("file:///x"), None);
    }
}
