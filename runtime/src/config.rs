//! `$HERMES_HOME/config.yaml`: the keys the runtime reads, with the original's names.
//!
//! A missing file means defaults. A broken file is reported (file and line) and also
//! means defaults, except where a broken file must fail closed (plugin override
//! grants): callers see [`ConfigState::Broken`] and decide.
//!
//! The file is read only when it is a regular file of at most [`MAX_CONFIG_BYTES`],
//! opened without blocking (a FIFO put in its place is an error, not a hang).
//!
//! Keys that grant permissions ([`PERMISSION_KEYS`]) are taken from the file as it
//! was when this process first read it. Later edits of them are ignored until restart
//! (and reported once), because a model with a shell could have made them; the one
//! exception is what the runtime itself adds to `command_allowlist` after an `always`
//! approval, which it records in [`GRANTS_FILE`] beside the config so that every
//! process of the same home honours it. Edits that only remove allowlist entries take
//! effect at once.

use serde_json::Value;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::SystemTime;

/// The manual page with every configuration key, its default and its meaning: errors
/// and warnings about a setting end by naming it.
pub const SETTINGS_PAGE: &str = "docs/configuration.md";

/// Largest config.yaml (and grants file) read; a bigger one is reported as broken.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// Dotted keys whose changes after start-up are held back: they decide what runs
/// without asking, what is loaded as code, and what leaves the sandbox.
pub const PERMISSION_KEYS: &[&str] = &[
    "approvals",
    "command_allowlist",
    "mcp_servers",
    "plugins",
    "security",
    "terminal.sandbox",
    "terminal.env_passthrough",
];

/// Under `$HERMES_HOME`: the `command_allowlist` entries the runtime itself added, one
/// JSON string a line. No tool may write it (see the protected-path list).
pub const GRANTS_FILE: &str = "command_allowlist.granted";

#[derive(Debug, Clone)]
pub enum ConfigState {
    Missing,
    Loaded(Value),
    Broken(String),
}

/// One read of config.yaml, with the (mtime, size) it was read at.
#[derive(Debug, Clone)]
pub struct Config {
    pub path: PathBuf,
    pub state: ConfigState,
    pub signature: Option<(SystemTime, u64)>,
}

impl Config {
    pub fn path_in(hermes_home: &Path) -> PathBuf {
        hermes_home.join("config.yaml")
    }

    pub fn load(hermes_home: &Path) -> Config {
        let path = Config::path_in(hermes_home);
        let signature = file_signature(&path);
        let mut state = match read_config_text(&path) {
            Ok(None) => ConfigState::Missing,
            Err(why) => ConfigState::Broken(why),
            Ok(Some(text)) if text.trim().is_empty() => {
                ConfigState::Loaded(Value::Object(Default::default()))
            }
            Ok(Some(text)) => match serde_yaml_ng::from_str::<Value>(&text) {
                Ok(value @ Value::Object(_)) => ConfigState::Loaded(value),
                Ok(Value::Null) => ConfigState::Loaded(Value::Object(Default::default())),
                Ok(_) => ConfigState::Broken(format!(
                    "{}: the top level must be a mapping of keys",
                    path.display()
                )),
                Err(e) => ConfigState::Broken(format!("{}: {e}", path.display())),
            },
        };
        hold_back_permissions(hermes_home, &mut state);
        if let ConfigState::Broken(why) = &state {
            eprintln!("warning: config ignored, defaults used: {why}");
        }
        Config {
            path,
            state,
            signature,
        }
    }

    /// The value at a dotted path (`tool_budget.mcp_result_size_chars`), if loaded.
    pub fn get(&self, dotted: &str) -> Option<&Value> {
        let ConfigState::Loaded(root) = &self.state else {
            return None;
        };
        dotted.split('.').try_fold(root, |node, key| node.get(key))
    }

    /// The string at a dotted path, trimmed; `None` when it is missing, empty or not a
    /// string.
    pub fn text(&self, dotted: &str) -> Option<String> {
        self.get(dotted)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    }

    pub fn positive_usize(&self, dotted: &str) -> Option<usize> {
        self.get(dotted)
            .and_then(Value::as_u64)
            .filter(|n| *n > 0)
            .map(|n| n as usize)
    }

    pub fn is_broken(&self) -> bool {
        matches!(self.state, ConfigState::Broken(_))
    }

    /// Whether the file changed since this read.
    pub fn is_stale(&self) -> bool {
        file_signature(&self.path) != self.signature
    }
}

pub fn file_signature(path: &Path) -> Option<(SystemTime, u64)> {
    let metadata = std::fs::metadata(path).ok()?;
    Some((metadata.modified().ok()?, metadata.len()))
}

thread_local! {
    static CALL_CONFIG: std::cell::RefCell<Option<Arc<Config>>> = const { std::cell::RefCell::new(None) };
}

/// The configuration of the tool call running on this thread, as the dispatcher
/// found it when the call started: what the call's parts ask of the configuration
/// then costs one look at the file per call, not one per part.
pub fn call_config() -> Option<Arc<Config>> {
    CALL_CONFIG.with(|current| current.borrow().clone())
}

/// Makes `config` this thread's [`call_config`] until the guard is dropped.
pub fn enter_call(config: Arc<Config>) -> CallConfigGuard {
    CallConfigGuard {
        previous: CALL_CONFIG.with(|current| current.replace(Some(config))),
    }
}

/// Restores the [`call_config`] of the call around this one (if any) when dropped.
pub struct CallConfigGuard {
    previous: Option<Arc<Config>>,
}

impl Drop for CallConfigGuard {
    fn drop(&mut self) {
        let previous = self.previous.take();
        CALL_CONFIG.with(|current| *current.borrow_mut() = previous);
    }
}

/// The text of a config file: `Ok(None)` when it does not exist; an error when it is
/// not a regular file, is larger than [`MAX_CONFIG_BYTES`], is not UTF-8 or cannot be
/// read. Never blocks: the open does not wait for a FIFO's writer.
pub fn read_config_text(path: &Path) -> Result<Option<String>, String> {
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
    {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: cannot read: {e}", path.display())),
    };
    let meta = file
        .metadata()
        .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!("{}: not a regular file; ignored", path.display()));
    }
    if meta.len() > MAX_CONFIG_BYTES {
        return Err(format!(
            "{}: larger than {} bytes; ignored",
            path.display(),
            MAX_CONFIG_BYTES
        ));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_CONFIG_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    if bytes.len() as u64 > MAX_CONFIG_BYTES {
        return Err(format!(
            "{}: larger than {} bytes; ignored",
            path.display(),
            MAX_CONFIG_BYTES
        ));
    }
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| format!("{}: not UTF-8 text", path.display()))
}

/// What a process took from the file at start-up, per home.
struct Pinned {
    /// Value of each permission key at start-up (`None`: absent).
    values: Vec<(&'static str, Option<Value>)>,
    /// Held-back changes already reported, as (key, the file's value).
    reported: HashSet<(&'static str, String)>,
}

fn pins() -> &'static Mutex<HashMap<PathBuf, Pinned>> {
    static PINS: OnceLock<Mutex<HashMap<PathBuf, Pinned>>> = OnceLock::new();
    PINS.get_or_init(Default::default)
}

fn dotted_get<'v>(root: &'v Value, dotted: &str) -> Option<&'v Value> {
    dotted.split('.').try_fold(root, |node, key| node.get(key))
}

/// Sets (or with `None` removes) the value at a dotted path, creating mappings on the way.
fn dotted_set(root: &mut Value, dotted: &str, value: Option<Value>) {
    let mut keys: Vec<&str> = dotted.split('.').collect();
    let last = keys.pop().expect("a key");
    let mut node = root;
    for key in keys {
        let Value::Object(map) = node else { return };
        if value.is_none() && !map.contains_key(key) {
            return;
        }
        node = map
            .entry(key.to_string())
            .or_insert_with(|| Value::Object(Default::default()));
    }
    if let Value::Object(map) = node {
        match value {
            Some(value) => {
                map.insert(last.to_string(), value);
            }
            None => {
                map.remove(last);
            }
        }
    }
}

/// First load of a home: remembers the permission keys. Later loads: puts the
/// remembered values back over whatever the file now says (reporting each change
/// once); `command_allowlist` keeps the file's entries that were there at start-up
/// or that the runtime granted.
fn hold_back_permissions(hermes_home: &Path, state: &mut ConfigState) {
    let empty = Value::Object(Default::default());
    let current = match state {
        ConfigState::Loaded(value) => Some(value),
        _ => None,
    };
    let key = std::fs::canonicalize(hermes_home).unwrap_or_else(|_| hermes_home.to_path_buf());
    let mut pins = pins().lock().unwrap_or_else(|p| p.into_inner());
    let Some(pinned) = pins.get_mut(&key) else {
        let root = current.as_deref().unwrap_or(&empty);
        let values = PERMISSION_KEYS
            .iter()
            .map(|k| (*k, dotted_get(root, k).cloned()))
            .collect();
        pins.insert(
            key,
            Pinned {
                values,
                reported: HashSet::new(),
            },
        );
        return;
    };
    let Some(root) = current else { return };
    for (name, at_start) in &pinned.values {
        let now = dotted_get(root, name).cloned();
        if *name == "command_allowlist" {
            let file_entries = allowlist_strings(now.as_ref());
            let mut allowed: BTreeSet<String> =
                allowlist_strings(at_start.as_ref()).into_iter().collect();
            if file_entries.iter().any(|e| !allowed.contains(e)) {
                allowed.extend(runtime_grants(hermes_home));
            }
            let (kept, dropped): (Vec<String>, Vec<String>) =
                file_entries.into_iter().partition(|e| allowed.contains(e));
            if !dropped.is_empty() && pinned.reported.insert((name, dropped.join("\n"))) {
                eprintln!(
                    "warning: {}: command_allowlist entries added since start-up by something other than an approval are ignored until restart: {}",
                    Config::path_in(hermes_home).display(),
                    dropped.join(", ")
                );
            }
            if now.is_some() || !kept.is_empty() {
                dotted_set(root, name, Some(Value::from(kept)));
            }
            continue;
        }
        if now != *at_start {
            let shown = now
                .as_ref()
                .map(Value::to_string)
                .unwrap_or_else(|| "(removed)".into());
            if pinned.reported.insert((name, shown)) {
                eprintln!(
                    "warning: {}: `{name}` changed since start-up; permission settings are read once, so the change applies after a restart",
                    Config::path_in(hermes_home).display()
                );
            }
            dotted_set(root, name, at_start.clone());
        }
    }
}

/// The strings of a `command_allowlist` value (a list; a scalar string as one entry).
fn allowlist_strings(value: Option<&Value>) -> Vec<String> {
    match value {
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect(),
        Some(Value::String(one)) => vec![one.clone()],
        _ => Vec::new(),
    }
}

/// What a restart does: the next load takes the permission keys from the file as it
/// is then. For an embedder that restarts its runtime within one process (and tests
/// of settings an operator changed); nothing a model can call reaches it.
pub fn reload_permissions(hermes_home: &Path) {
    let key = std::fs::canonicalize(hermes_home).unwrap_or_else(|_| hermes_home.to_path_buf());
    pins()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(&key);
}

/// Entries the runtime recorded in [`GRANTS_FILE`] (nothing when it is missing or unreadable).
pub fn runtime_grants(hermes_home: &Path) -> Vec<String> {
    let Ok(Some(text)) = read_config_text(&hermes_home.join(GRANTS_FILE)) else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|line| serde_json::from_str::<String>(line).ok())
        .collect()
}

/// Records entries the runtime itself adds to `command_allowlist` (an `always`
/// approval), so every process of this home accepts them from the file.
pub fn record_runtime_grants(hermes_home: &Path, entries: &[String]) -> std::io::Result<()> {
    if entries.is_empty() {
        return Ok(());
    }
    let mut lines = String::new();
    for entry in entries {
        lines.push_str(&Value::from(entry.as_str()).to_string());
        lines.push('\n');
    }
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
        .open(hermes_home.join(GRANTS_FILE))?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other(
            "the grants file is not a regular file",
        ));
    }
    // One write of whole lines, appended: concurrent writers do not interleave.
    file.write_all(lines.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(home: &Path, text: &str) {
        std::fs::write(Config::path_in(home), text).unwrap();
    }

    #[test]
    fn permission_keys_are_held_at_start_up_and_runtime_grants_pass() {
        let home = tempfile::tempdir().unwrap();
        write(
            home.path(),
            "command_allowlist: [\"a\"]\ntool_budget:\n  x: 1\n",
        );
        let first = Config::load(home.path());
        assert_eq!(
            first.get("command_allowlist"),
            Some(&serde_json::json!(["a"]))
        );
        write(
            home.path(),
            "command_allowlist: [\"a\", \"b\", \"c\"]\napprovals:\n  unattended_mode: approve\ntool_budget:\n  x: 2\n",
        );
        record_runtime_grants(home.path(), &["b".to_string()]).unwrap();
        let later = Config::load(home.path());
        assert_eq!(
            later.get("command_allowlist"),
            Some(&serde_json::json!(["a", "b"]))
        );
        assert_eq!(later.get("approvals"), None);
        assert_eq!(later.get("tool_budget.x"), Some(&serde_json::json!(2)));
        // Removing an entry is no grant: it applies at once.
        write(home.path(), "command_allowlist: []\n");
        assert_eq!(
            Config::load(home.path()).get("command_allowlist"),
            Some(&serde_json::json!([]))
        );
    }

    #[test]
    fn a_fifo_or_oversized_file_is_broken_not_a_hang() {
        let home = tempfile::tempdir().unwrap();
        let path = Config::path_in(home.path());
        let c_path = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
        assert!(Config::load(home.path()).is_broken());
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, "#".repeat(MAX_CONFIG_BYTES as usize + 1)).unwrap();
        assert!(Config::load(home.path()).is_broken());
    }
}
