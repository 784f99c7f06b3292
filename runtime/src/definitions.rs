//! Tool definitions: what the model is told it can call.

use crate::availability::{panic_message, CheckPass, CHECK_TTL};
use crate::catalog::ToolEntry;
use crate::registry::{Registry, SchemaContext, ToolRef};
use serde_json::{Map, Value};
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Instant;

/// How many distinct selections keep their definitions cached.
pub const MEMO_ENTRIES: usize = 8;

/// A tool's static `parameters` object, parsed once per process (coercion runs on
/// every call and must not re-parse the schema text).
pub fn static_parameters(entry: &ToolEntry) -> Arc<Value> {
    static PARSED: OnceLock<RwLock<HashMap<usize, Arc<Value>>>> = OnceLock::new();
    let cache = PARSED.get_or_init(Default::default);
    let key = entry.schema.as_ptr() as usize;
    if let Some(parsed) = cache.read().unwrap_or_else(|p| p.into_inner()).get(&key) {
        return Arc::clone(parsed);
    }
    let schema: Value = serde_json::from_str(entry.schema)
        .expect("schemas are generated as valid JSON at build time");
    let parameters = Arc::new(schema.get("parameters").cloned().unwrap_or(Value::Null));
    cache
        .write()
        .unwrap_or_else(|p| p.into_inner())
        .insert(key, Arc::clone(&parameters));
    parameters
}

/// `{"type": "function", "function": schema}` for a static entry, without rewrites.
pub fn definition(entry: &'static ToolEntry) -> Value {
    wrap(ToolRef::Static(entry).base_schema())
}

fn wrap(schema: Value) -> Value {
    let mut item = Map::new();
    item.insert("type".into(), Value::from("function"));
    item.insert("function".into(), schema);
    Value::Object(item)
}

/// Definitions for a selection.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Definitions {
    /// Sorted by tool name.
    pub tools: Vec<Value>,
    /// Names given that are neither toolsets nor legacy toolset names.
    pub unknown_toolsets: Vec<String>,
    /// Selected tools whose check failed, sorted.
    pub unavailable: Vec<String>,
}

impl Definitions {
    pub fn names(&self) -> Vec<&str> {
        self.tools
            .iter()
            .filter_map(|t| t["function"]["name"].as_str())
            .collect()
    }
}

#[derive(Clone, PartialEq, Eq)]
struct MemoKey {
    enabled: Option<BTreeSet<String>>,
    /// An empty list and no list are the same selection.
    disabled: Option<BTreeSet<String>>,
    generation: u64,
    config_signature: Option<(std::time::SystemTime, u64)>,
}

#[derive(Default)]
pub struct DefinitionsMemo {
    entries: VecDeque<(MemoKey, Instant, Arc<Definitions>)>,
}

impl Registry {
    /// True when the tool has no check or its check passes.
    pub fn is_available(&self, tool: &ToolRef, pass: &mut CheckPass<'_>) -> bool {
        match self.check_of(tool) {
            None => true,
            Some((id, name, probe)) => pass.check(id, &name, &*probe),
        }
    }

    /// Definitions for the selected toolsets: `enabled = None` selects every toolset,
    /// `Some(&[])` none; `disabled` is applied last. Cached per selection until the
    /// registry or config changes (or the check verdicts may have expired); every call
    /// returns a fresh list, so a caller appending to it cannot poison the cache.
    pub fn definitions<S: AsRef<str>>(
        &self,
        enabled: Option<&[S]>,
        disabled: Option<&[S]>,
    ) -> Definitions {
        let key = MemoKey {
            enabled: enabled.map(|names| names.iter().map(|n| n.as_ref().to_string()).collect()),
            disabled: disabled
                .filter(|names| !names.is_empty())
                .map(|names| names.iter().map(|n| n.as_ref().to_string()).collect()),
            generation: self.generation(),
            config_signature: self.config().signature,
        };
        {
            let memo = self
                .definitions_memo
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            if let Some((_, _, cached)) = memo
                .entries
                .iter()
                .find(|(k, at, _)| *k == key && at.elapsed() < CHECK_TTL)
            {
                let cached = Definitions::clone(cached);
                drop(memo);
                self.set_last_resolved(cached.names().into_iter().map(str::to_owned).collect());
                return cached;
            }
        }
        let computed = Arc::new(self.compute_definitions(enabled, disabled));
        let mut memo = self
            .definitions_memo
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        memo.entries.retain(|(k, _, _)| *k != key);
        while memo.entries.len() >= MEMO_ENTRIES {
            memo.entries.pop_front();
        }
        memo.entries
            .push_back((key, Instant::now(), Arc::clone(&computed)));
        Definitions::clone(&computed)
    }

    /// Forgets cached definitions and check verdicts (after enabling a tool).
    pub fn invalidate_caches(&self) {
        self.checks.invalidate();
        self.invalidate_definitions_memo();
    }

    /// Forgets cached definitions only; check verdicts stay.
    pub fn invalidate_definitions_memo(&self) {
        self.definitions_memo
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entries
            .clear();
    }

    /// A toolset is available when at least one of its tools is.
    pub fn is_toolset_available(&self, toolset: &str) -> bool {
        let mut pass = CheckPass::new(&self.checks);
        self.resolve_toolset(toolset)
            .iter()
            .filter_map(|name| self.get(name))
            .any(|tool| self.is_available(&tool, &mut pass))
    }

    fn compute_definitions<S: AsRef<str>>(
        &self,
        enabled: Option<&[S]>,
        disabled: Option<&[S]>,
    ) -> Definitions {
        let selection = self.select_tools(enabled, disabled);
        let mut pass = CheckPass::new(&self.checks);
        let mut out = Definitions {
            unknown_toolsets: selection.unknown,
            ..Default::default()
        };
        let mut passed: Vec<ToolRef> = Vec::new();
        for name in &selection.tools {
            let Some(tool) = self.get(name) else { continue };
            if self.is_available(&tool, &mut pass) {
                passed.push(tool);
            } else {
                out.unavailable.push(name.clone());
            }
        }
        let available: BTreeSet<String> = passed.iter().map(|t| t.name().to_string()).collect();
        let context = SchemaContext {
            available: &available,
        };
        for tool in passed {
            if let Some(schema) = rewritten_schema(&tool, &context) {
                out.tools.push(wrap(schema));
            }
        }
        self.set_last_resolved(out.names().into_iter().map(str::to_owned).collect());
        out
    }
}

/// The schema after the tool's `dynamic_schema` rewrite: `None` drops the tool, an
/// object is merged over the static schema (top-level keys replace). A rewrite that
/// panics or returns something else leaves the static schema.
fn rewritten_schema(tool: &ToolRef, context: &SchemaContext<'_>) -> Option<Value> {
    let mut schema = tool.base_schema();
    let outcome = match tool {
        ToolRef::Static(entry) => match entry.dynamic_schema {
            Some(rewrite) => catch_unwind(AssertUnwindSafe(|| rewrite(context))),
            None => return Some(schema),
        },
        ToolRef::Dynamic(d) => match &d.dynamic_schema {
            Some(rewrite) => catch_unwind(AssertUnwindSafe(|| rewrite(context))),
            None => return Some(schema),
        },
    };
    match outcome {
        Ok(None) => None,
        Ok(Some(Value::Object(overrides))) => {
            let object = schema.as_object_mut().expect("schemas are objects");
            for (key, value) in overrides {
                object.insert(key, value);
            }
            object.insert("name".into(), Value::from(tool.name()));
            Some(schema)
        }
        Ok(Some(_)) => {
            eprintln!(
                "warning: dynamic schema of {} is not an object; using the static schema",
                tool.name()
            );
            Some(schema)
        }
        Err(payload) => {
            eprintln!(
                "warning: dynamic schema of {} panicked ({}); using the static schema",
                tool.name(),
                panic_message(&*payload)
            );
            Some(schema)
        }
    }
}
