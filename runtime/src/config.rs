//! `$HERMES_HOME/config.yaml`: the keys the runtime reads, with the original's names.
//!
//! A missing file means defaults. A broken file is reported (file and line) and also
//! means defaults, except where a broken file must fail closed (plugin override
//! grants): callers see [`ConfigState::Broken`] and decide.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

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
        let state = match std::fs::read_to_string(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => ConfigState::Missing,
            Err(e) => ConfigState::Broken(format!("{}: cannot read: {e}", path.display())),
            Ok(text) if text.trim().is_empty() => ConfigState::Loaded(Value::Object(Default::default())),
            Ok(text) => match serde_yaml_ng::from_str::<Value>(&text) {
                Ok(value @ Value::Object(_)) => ConfigState::Loaded(value),
                Ok(Value::Null) => ConfigState::Loaded(Value::Object(Default::default())),
                Ok(_) => ConfigState::Broken(format!("{}: the top level must be a mapping of keys", path.display())),
                Err(e) => ConfigState::Broken(format!("{}: {e}", path.display())),
            },
        };
        if let ConfigState::Broken(why) = &state {
            eprintln!("warning: config ignored, defaults used: {why}");
        }
        Config { path, state, signature }
    }

    /// The value at a dotted path (`tool_budget.mcp_result_size_chars`), if loaded.
    pub fn get(&self, dotted: &str) -> Option<&Value> {
        let ConfigState::Loaded(root) = &self.state else { return None };
        dotted.split('.').try_fold(root, |node, key| node.get(key))
    }

    pub fn positive_usize(&self, dotted: &str) -> Option<usize> {
        self.get(dotted).and_then(Value::as_u64).filter(|n| *n > 0).map(|n| n as usize)
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
