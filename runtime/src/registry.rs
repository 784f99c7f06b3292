//! One lookup over the static table and the dynamic layer (MCP servers, plugins).
//!
//! The static table never changes. Dynamic entries may be added and removed at any
//! time; every stored change bumps [`Registry::generation`], which keys the caches of
//! toolset resolution and tool definitions. Readers take `Arc` snapshots and work
//! without holding the lock.

use crate::availability::{CheckCache, CheckId};
use crate::catalog::{BoxFuture, Catalog, ToolEntry};
use crate::config::{Config, ConfigState};
use crate::context::ToolContext;
use crate::hooks::{ApprovalGate, ToolHooks};
use crate::output::ToolError;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

pub type SyncDynamicHandler =
    Arc<dyn Fn(Value, &ToolContext) -> Result<Value, ToolError> + Send + Sync>;
pub type AsyncDynamicHandler =
    Arc<dyn Fn(Value, ToolContext) -> BoxFuture<Result<Value, ToolError>> + Send + Sync>;
pub type DynamicCheck = Arc<dyn Fn() -> bool + Send + Sync>;
pub type DynamicSchemaFn = Arc<dyn Fn(&SchemaContext) -> Option<Value> + Send + Sync>;

/// A handler of the dynamic layer answers with a JSON value: a string is the result
/// text, a multimodal envelope passes through, anything else breaks the result
/// contract and is reported as such.
#[derive(Clone)]
pub enum DynamicHandler {
    Sync(SyncDynamicHandler),
    Async(AsyncDynamicHandler),
}

/// What a `dynamic_schema` function sees when definitions are built.
pub struct SchemaContext<'a> {
    /// Every selected tool whose check passed, taken before any rewrite, so dropping
    /// one tool never changes another's rewrite.
    pub available: &'a std::collections::BTreeSet<String>,
}

impl SchemaContext<'_> {
    pub fn is_available(&self, tool: &str) -> bool {
        self.available.contains(tool)
    }
}

/// A tool registered at run time.
pub struct DynamicTool {
    pub name: String,
    pub toolset: String,
    /// `{"name"?, "description", "parameters"?}`.
    pub schema: Value,
    pub handler: DynamicHandler,
    pub check: Option<DynamicCheck>,
    pub requires_env: Vec<String>,
    pub emoji: String,
    pub max_result_chars: Option<usize>,
    pub dynamic_schema: Option<DynamicSchemaFn>,
    pub concurrency: crate::catalog::Concurrency,
    /// The plugin that registered it; `None` for built-in and MCP code.
    pub owner: Option<String>,
    /// Identity for check caching, assigned by the registry.
    id: u64,
}

impl DynamicTool {
    pub fn new(
        name: impl Into<String>,
        toolset: impl Into<String>,
        schema: Value,
        handler: DynamicHandler,
    ) -> Self {
        DynamicTool {
            name: name.into(),
            toolset: toolset.into(),
            schema,
            handler,
            check: None,
            requires_env: Vec::new(),
            emoji: String::new(),
            max_result_chars: None,
            dynamic_schema: None,
            concurrency: crate::catalog::Concurrency::Exclusive,
            owner: None,
            id: 0,
        }
    }

    pub fn id(&self) -> u64 {
        self.id
    }
}

/// A tool found by name: from the static table or the dynamic layer.
#[derive(Clone)]
pub enum ToolRef {
    Static(&'static ToolEntry),
    Dynamic(Arc<DynamicTool>),
}

impl ToolRef {
    pub fn name(&self) -> &str {
        match self {
            ToolRef::Static(e) => e.name,
            ToolRef::Dynamic(d) => &d.name,
        }
    }

    pub fn toolset(&self) -> &str {
        match self {
            ToolRef::Static(e) => e.toolset,
            ToolRef::Dynamic(d) => &d.toolset,
        }
    }

    pub fn emoji(&self) -> &str {
        let emoji = match self {
            ToolRef::Static(e) => e.emoji,
            ToolRef::Dynamic(d) => &d.emoji,
        };
        if emoji.is_empty() {
            ToolEntry::DEFAULT_EMOJI
        } else {
            emoji
        }
    }

    pub fn requires_env(&self) -> Vec<String> {
        match self {
            ToolRef::Static(e) => e.requires_env.iter().map(|s| s.to_string()).collect(),
            ToolRef::Dynamic(d) => d.requires_env.clone(),
        }
    }

    /// Why the tool's check fails, when the tool can say (`unavailable_reason`).
    pub fn unavailable_reason(&self) -> Option<String> {
        match self {
            ToolRef::Static(e) => e.unavailable_reason.and_then(|reason| reason()),
            ToolRef::Dynamic(_) => None,
        }
    }

    pub fn max_result_chars(&self) -> Option<usize> {
        match self {
            ToolRef::Static(e) => e.max_result_chars,
            ToolRef::Dynamic(d) => d.max_result_chars,
        }
    }

    pub fn concurrency(&self) -> crate::catalog::Concurrency {
        match self {
            ToolRef::Static(e) => e.concurrency,
            ToolRef::Dynamic(d) => d.concurrency,
        }
    }

    pub fn is_async(&self) -> bool {
        match self {
            ToolRef::Static(e) => e.handler.is_async(),
            ToolRef::Dynamic(d) => matches!(d.handler, DynamicHandler::Async(_)),
        }
    }

    /// The stored schema with `name` forced to the registered name.
    pub fn base_schema(&self) -> Value {
        let mut schema = match self {
            ToolRef::Static(e) => {
                serde_json::from_str(e.schema).expect("generated schemas are valid JSON")
            }
            ToolRef::Dynamic(d) => d.schema.clone(),
        };
        if let Some(object) = schema.as_object_mut() {
            object.insert("name".into(), Value::from(self.name()));
        }
        schema
    }

    /// The `parameters` object, parsed once per static tool.
    pub fn parameters(&self) -> Arc<Value> {
        match self {
            ToolRef::Static(e) => crate::definitions::static_parameters(e),
            ToolRef::Dynamic(d) => {
                Arc::new(d.schema.get("parameters").cloned().unwrap_or(Value::Null))
            }
        }
    }

    pub fn description(&self) -> String {
        match self {
            ToolRef::Static(e) => e.description.to_string(),
            ToolRef::Dynamic(d) => d
                .schema
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
        }
    }
}

/// Who is registering: built-in or MCP code, or a plugin (by id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    Host,
    Plugin(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegistryError {
    /// The schema is not an object, or `parameters` is present and not an object.
    InvalidSchema(String),
    /// A plugin tried something only an operator may grant.
    Permission(String),
}

impl std::fmt::Display for RegistryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RegistryError::InvalidSchema(m) | RegistryError::Permission(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for RegistryError {}

/// What `register` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Registration {
    Stored,
    /// Kept the existing tool; the reason was logged.
    Rejected,
}

#[derive(Default)]
struct DynamicLayer {
    tools: BTreeMap<String, Arc<DynamicTool>>,
    /// Extra toolset names (an MCP server's name) pointing at a registered toolset.
    toolset_aliases: BTreeMap<String, String>,
}

/// The runtime's view of every tool: static table plus dynamic layer, with caches.
pub struct Registry {
    catalog: &'static Catalog,
    layer: RwLock<DynamicLayer>,
    generation: AtomicU64,
    next_id: AtomicU64,
    pub(crate) checks: CheckCache,
    hermes_home: PathBuf,
    config: RwLock<Arc<Config>>,
    /// Started at the first look at the configuration; `None` where it cannot be trusted.
    config_watch: std::sync::OnceLock<Option<crate::config_watch::ConfigWatch>>,
    /// The watch's count of changes when the file was last looked at (stored after
    /// the configuration read then), or `u64::MAX` before the first look.
    config_looked_at: AtomicU64,
    hooks: RwLock<Vec<Arc<dyn ToolHooks>>>,
    approval_gate: RwLock<Option<Arc<dyn ApprovalGate>>>,
    pub(crate) definitions_memo: Mutex<crate::definitions::DefinitionsMemo>,
    last_resolved: Mutex<Vec<String>>,
}

impl Registry {
    pub fn new(catalog: &'static Catalog) -> Registry {
        Registry::with_home(catalog, crate::context::default_hermes_home())
    }

    pub fn with_home(catalog: &'static Catalog, hermes_home: PathBuf) -> Registry {
        let config = Config::load(&hermes_home);
        Registry {
            catalog,
            layer: RwLock::new(DynamicLayer::default()),
            generation: AtomicU64::new(0),
            next_id: AtomicU64::new(1),
            checks: CheckCache::default(),
            hermes_home,
            config: RwLock::new(Arc::new(config)),
            config_watch: std::sync::OnceLock::new(),
            config_looked_at: AtomicU64::new(u64::MAX),
            hooks: RwLock::new(Vec::new()),
            approval_gate: RwLock::new(None),
            definitions_memo: Mutex::new(Default::default()),
            last_resolved: Mutex::new(Vec::new()),
        }
    }

    /// For a process that reads the configuration for one command and exits: config.yaml
    /// is looked at on the file each time, with no inotify watch, whose set-up and
    /// tear-down at exit would cost more than the command's look at the file.
    pub fn without_config_watch(self) -> Registry {
        let _ = self.config_watch.set(None);
        self
    }

    /// Replaces the check cache, e.g. with one on a test clock.
    pub fn with_check_cache(mut self, checks: CheckCache) -> Registry {
        self.checks = checks;
        self
    }

    pub fn catalog(&self) -> &'static Catalog {
        self.catalog
    }

    pub fn hermes_home(&self) -> &std::path::Path {
        &self.hermes_home
    }

    pub fn checks(&self) -> &CheckCache {
        &self.checks
    }

    /// Bumped by every stored registration, deregistration, restore and alias.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    fn bump(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
    }

    /// The current config, re-read when the file changed since the last read (asked of
    /// an inotify watch where one sees every change, else of the file).
    pub fn config(&self) -> Arc<Config> {
        let path = Config::path_in(&self.hermes_home);
        let watch = self
            .config_watch
            .get_or_init(|| crate::config_watch::ConfigWatch::new(&path));
        let changes = watch.as_ref().and_then(|watch| watch.changes());
        // The count is read before the configuration: whoever stored it had stored the
        // configuration it looked at first.
        if changes.is_some_and(|n| n == self.config_looked_at.load(Ordering::SeqCst)) {
            return Arc::clone(&self.config.read().unwrap_or_else(|p| p.into_inner()));
        }
        let current = Arc::clone(&self.config.read().unwrap_or_else(|p| p.into_inner()));
        let config = if current.is_stale() {
            let fresh = Arc::new(Config::load(&self.hermes_home));
            *self.config.write().unwrap_or_else(|p| p.into_inner()) = Arc::clone(&fresh);
            fresh
        } else {
            current
        };
        if let Some(n) = changes {
            self.config_looked_at.store(n, Ordering::SeqCst);
        }
        config
    }

    pub fn add_hooks(&self, hooks: Arc<dyn ToolHooks>) {
        self.hooks
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .push(hooks);
    }

    pub fn hooks(&self) -> Vec<Arc<dyn ToolHooks>> {
        self.hooks.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Whether any hooks are registered (without copying the list).
    pub fn has_hooks(&self) -> bool {
        !self
            .hooks
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .is_empty()
    }

    pub fn set_approval_gate(&self, gate: Option<Arc<dyn ApprovalGate>>) {
        *self
            .approval_gate
            .write()
            .unwrap_or_else(|p| p.into_inner()) = gate;
    }

    pub fn approval_gate(&self) -> Option<Arc<dyn ApprovalGate>> {
        self.approval_gate
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub(crate) fn set_last_resolved(&self, names: Vec<String>) {
        *self.last_resolved.lock().unwrap_or_else(|p| p.into_inner()) = names;
    }

    /// The tool names of the latest definitions build (for `execute_code`'s sandbox).
    pub fn last_resolved_tools(&self) -> Vec<String> {
        self.last_resolved
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn layer(&self) -> std::sync::RwLockReadGuard<'_, DynamicLayer> {
        self.layer.read().unwrap_or_else(|p| p.into_inner())
    }

    fn layer_mut(&self) -> std::sync::RwLockWriteGuard<'_, DynamicLayer> {
        self.layer.write().unwrap_or_else(|p| p.into_inner())
    }

    // ---- lookup -------------------------------------------------------------------

    /// A tool by name or static alias; a dynamic entry shadows a static one.
    pub fn get(&self, name: &str) -> Option<ToolRef> {
        if let Some(dynamic) = self.layer().tools.get(name) {
            return Some(ToolRef::Dynamic(Arc::clone(dynamic)));
        }
        let entry = self.catalog.tool(name)?;
        if entry.name != name {
            // An alias: the canonical name may itself be overridden.
            if let Some(dynamic) = self.layer().tools.get(entry.name) {
                return Some(ToolRef::Dynamic(Arc::clone(dynamic)));
            }
        }
        Some(ToolRef::Static(entry))
    }

    /// The canonical name for a name or alias (unknown names are returned as given).
    pub fn canonical_name<'a>(&self, name: &'a str) -> std::borrow::Cow<'a, str> {
        match self.catalog.tool(name) {
            Some(entry) if entry.name != name && !self.layer().tools.contains_key(name) => {
                std::borrow::Cow::Borrowed(entry.name)
            }
            _ => std::borrow::Cow::Borrowed(name),
        }
    }

    /// Every tool name, sorted.
    pub fn tool_names(&self) -> Vec<String> {
        let layer = self.layer();
        let mut names: Vec<String> = self
            .catalog
            .tools
            .iter()
            .map(|t| t.name.to_string())
            .collect();
        names.extend(
            layer
                .tools
                .keys()
                .filter(|n| self.catalog.tool(n).is_none_or(|e| e.name != n.as_str()))
                .cloned(),
        );
        names.sort();
        names.dedup();
        names
    }

    /// Tools registered in the dynamic layer under `toolset`, sorted.
    pub fn dynamic_tools_in(&self, toolset: &str) -> Vec<String> {
        self.layer()
            .tools
            .values()
            .filter(|t| t.toolset == toolset)
            .map(|t| t.name.clone())
            .collect()
    }

    pub fn dynamic_toolset_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .layer()
            .tools
            .values()
            .map(|t| t.toolset.clone())
            .collect();
        names.sort();
        names.dedup();
        names
    }

    pub fn toolset_alias_target(&self, alias: &str) -> Option<String> {
        self.layer().toolset_aliases.get(alias).cloned()
    }

    pub fn toolset_aliases(&self) -> BTreeMap<String, String> {
        self.layer().toolset_aliases.clone()
    }

    /// Identity and probe of a tool's availability check.
    pub fn check_of(&self, tool: &ToolRef) -> Option<(CheckId, String, DynamicCheck)> {
        match tool {
            ToolRef::Static(entry) => entry.check.map(|index| {
                let probe = &self.catalog.checks[index];
                let f = probe.probe;
                (
                    CheckId::Static(index),
                    probe.name.to_string(),
                    Arc::new(f) as DynamicCheck,
                )
            }),
            ToolRef::Dynamic(d) => d.check.as_ref().map(|c| {
                (
                    CheckId::Dynamic(d.id),
                    format!("check of {}", d.name),
                    Arc::clone(c),
                )
            }),
        }
    }

    // ---- registration ---------------------------------------------------------------

    /// Whether the operator granted `plugin` the right to replace other toolsets' tools.
    /// An unreadable config grants nothing.
    pub fn plugin_may_override(&self, plugin: &str) -> bool {
        let config = self.config();
        if let ConfigState::Broken(_) = config.state {
            return false;
        }
        let base = format!("plugins.entries.{plugin}");
        let legacy = config.get(&format!("{base}.allow_tool_override")) == Some(&Value::Bool(true));
        let capability = config
            .get(&format!("{base}.granted_capabilities"))
            .and_then(Value::as_array)
            .is_some_and(|caps| caps.iter().any(|c| c == "tools.override"));
        legacy || capability
    }

    /// Adds or replaces a dynamic tool, following the override rules: same toolset
    /// replaces; another toolset's name is kept unless `override_existing`, and a
    /// plugin needs the operator's grant for that.
    pub fn register(
        &self,
        mut tool: DynamicTool,
        caller: &Caller,
        override_existing: bool,
    ) -> Result<Registration, RegistryError> {
        match &tool.schema {
            Value::Object(object) => match object.get("parameters") {
                None | Some(Value::Null) | Some(Value::Object(_)) => {}
                Some(other) => {
                    return Err(RegistryError::InvalidSchema(format!(
                        "tool {}: `parameters` must be an object, got {}",
                        tool.name,
                        crate::args::json_type_name(other)
                    )))
                }
            },
            other => {
                return Err(RegistryError::InvalidSchema(format!(
                    "tool {}: the schema must be an object, got {}",
                    tool.name,
                    crate::args::json_type_name(other)
                )))
            }
        }
        if let Caller::Plugin(id) = caller {
            tool.owner = Some(id.clone());
        }
        tool.id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let may_override = match caller {
            Caller::Plugin(id) => self.plugin_may_override(id),
            Caller::Host => true,
        };
        let mut layer = self.layer_mut();
        let existing_toolset = layer
            .tools
            .get(&tool.name)
            .map(|t| t.toolset.clone())
            .or_else(|| self.catalog.tool(&tool.name).map(|e| e.toolset.to_string()));
        if let Some(existing) = existing_toolset {
            if existing != tool.toolset {
                if !override_existing {
                    eprintln!(
                        "error: tool {} of toolset {} is already provided by toolset {}; registration skipped \
                         (rename the tool, or register with override and, for a plugin, an operator grant)",
                        tool.name, tool.toolset, existing
                    );
                    return Ok(Registration::Rejected);
                }
                if let Caller::Plugin(id) = caller {
                    if !may_override {
                        return Err(RegistryError::Permission(format!(
                            "plugin {id} may not replace tool {} of toolset {existing}: set plugins.entries.{id}.allow_tool_override: true in config.yaml to allow it",
                            tool.name
                        )));
                    }
                }
                eprintln!(
                    "info: tool {} of toolset {existing} replaced by toolset {}",
                    tool.name, tool.toolset
                );
            }
        }
        layer.tools.insert(tool.name.clone(), Arc::new(tool));
        drop(layer);
        self.bump();
        Ok(Registration::Stored)
    }

    /// Removes a dynamic tool. Unknown names are a no-op. A plugin may remove only its
    /// own tools (or any with the operator's grant); `mcp-*` toolsets are exempt.
    pub fn deregister(&self, name: &str, caller: &Caller) -> Result<bool, RegistryError> {
        let mut layer = self.layer_mut();
        let Some(existing) = layer.tools.get(name) else {
            return Ok(false);
        };
        if let Caller::Plugin(id) = caller {
            let own = existing.owner.as_deref() == Some(id.as_str());
            if !existing.toolset.starts_with("mcp-") && !own && !self.plugin_may_override(id) {
                return Err(RegistryError::Permission(format!(
                    "plugin {id} may not remove tool {name}, which it did not register"
                )));
            }
        }
        let removed = layer.tools.remove(name).expect("checked above");
        Self::drop_emptied_aliases(&mut layer, &removed.toolset, self.catalog);
        drop(layer);
        self.bump();
        Ok(true)
    }

    fn drop_emptied_aliases(layer: &mut DynamicLayer, toolset: &str, catalog: &Catalog) {
        let still_used = layer.tools.values().any(|t| t.toolset == toolset)
            || catalog
                .tools
                .iter()
                .any(|t| t.toolset == toolset && !layer.tools.contains_key(t.name));
        if !still_used {
            layer.toolset_aliases.retain(|_, target| target != toolset);
        }
    }

    /// Points `alias` at `toolset` (an MCP server name at `mcp-<server>`).
    pub fn register_toolset_alias(&self, alias: &str, toolset: &str) {
        let previous = self
            .layer_mut()
            .toolset_aliases
            .insert(alias.to_string(), toolset.to_string());
        if let Some(previous) = previous.filter(|p| p != toolset) {
            eprintln!("warning: toolset alias {alias} moved from {previous} to {toolset}");
        }
        self.bump();
    }

    /// The dynamic entry under `name`, for a later [`restore`](Registry::restore).
    pub fn snapshot(&self, name: &str) -> Option<Arc<DynamicTool>> {
        self.layer().tools.get(name).cloned()
    }

    /// Puts `previous` back (or removes the entry when `None`) only if the entry is
    /// still the very object `current`; false when someone changed it meanwhile.
    pub fn restore(
        &self,
        name: &str,
        current: Option<&Arc<DynamicTool>>,
        previous: Option<Arc<DynamicTool>>,
    ) -> bool {
        let mut layer = self.layer_mut();
        let matches = match (layer.tools.get(name), current) {
            (Some(present), Some(expected)) => Arc::ptr_eq(present, expected),
            (None, None) => true,
            _ => false,
        };
        if !matches {
            return false;
        }
        let removed = match previous {
            Some(previous) => layer.tools.insert(name.to_string(), previous),
            None => layer.tools.remove(name),
        };
        if let Some(removed) = removed {
            Self::drop_emptied_aliases(&mut layer, &removed.toolset, self.catalog);
        }
        drop(layer);
        self.bump();
        true
    }
}
