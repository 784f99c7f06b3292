//! Tool definitions: what the model is told it can call.

use crate::availability::{panic_message, CheckCache, CheckId, CheckPass};
use crate::catalog::{Catalog, ToolEntry};
use crate::toolsets::select_tools;
use serde_json::{Map, Value};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// True when the tool has no check or its check passes.
pub fn is_tool_available(catalog: &Catalog, entry: &ToolEntry, pass: &mut CheckPass<'_>) -> bool {
    match entry.check {
        None => true,
        Some(index) => {
            let probe = &catalog.checks[index];
            pass.check(CheckId::Static(index), probe.name, &probe.probe)
        }
    }
}

/// The tool's function schema: the static one with its `dynamic_schema` object merged
/// over it (top-level keys replace). A failing override leaves the static schema.
pub fn function_schema(entry: &ToolEntry) -> Value {
    let mut schema: Value = serde_json::from_str(entry.schema)
        .expect("schemas are generated as valid JSON at build time");
    if let Some(produce) = entry.dynamic_schema {
        match catch_unwind(AssertUnwindSafe(produce)) {
            Ok(Value::Object(overrides)) => {
                let object = schema.as_object_mut().expect("generated schemas are objects");
                for (key, value) in overrides {
                    object.insert(key, value);
                }
            }
            Ok(_) => eprintln!("warning: dynamic schema of {} is not an object; using the static schema", entry.name),
            Err(payload) => eprintln!(
                "warning: dynamic schema of {} panicked ({}); using the static schema",
                entry.name,
                panic_message(&*payload)
            ),
        }
    }
    if let Some(object) = schema.as_object_mut() {
        object.insert("name".into(), Value::from(entry.name));
    }
    schema
}

/// `{"type": "function", "function": schema}`.
pub fn definition(entry: &ToolEntry) -> Value {
    let mut item = Map::new();
    item.insert("type".into(), Value::from("function"));
    item.insert("function".into(), function_schema(entry));
    Value::Object(item)
}

/// Definitions for the selected toolsets.
#[derive(Debug, Default)]
pub struct Definitions {
    /// Sorted by tool name.
    pub tools: Vec<Value>,
    /// Names given that are neither toolsets nor legacy toolset names.
    pub unknown_toolsets: Vec<String>,
    /// Selected tools whose check failed, sorted.
    pub unavailable: Vec<&'static str>,
}

/// `enabled = None` selects every toolset, `Some(&[])` none; `disabled` is applied last.
pub fn tool_definitions<S: AsRef<str>>(
    catalog: &Catalog,
    checks: &CheckCache,
    enabled: Option<&[S]>,
    disabled: Option<&[S]>,
) -> Definitions {
    let selection = select_tools(catalog, enabled, disabled);
    let mut pass = CheckPass::new(checks);
    let mut out = Definitions { unknown_toolsets: selection.unknown, ..Default::default() };
    for name in selection.tools {
        let entry = catalog.tool(name).expect("selections only name existing tools");
        if is_tool_available(catalog, entry, &mut pass) {
            out.tools.push(definition(entry));
        } else {
            out.unavailable.push(entry.name);
        }
    }
    out
}
