//! `list`, `schema` and `toolsets`: what the registry offers, as a table or as JSON.

use super::{warn_unknown, SelectionArgs};
use hermes_runtime::availability::CheckPass;
use hermes_runtime::strict::strict_parameters;
use hermes_runtime::Registry;
use serde_json::{json, Value};

pub(super) fn list(registry: &Registry, selection: &SelectionArgs, as_json: bool) -> String {
    let selected =
        registry.select_tools(selection.toolsets.as_deref(), selection.disabled.as_deref());
    warn_unknown(&selected.unknown);
    let mut pass = CheckPass::new(registry.checks());
    let rows: Vec<Value> = selected
        .tools
        .iter()
        .filter_map(|name| registry.get(name))
        .map(|tool| {
            let aliases: Vec<&str> = match &tool {
                hermes_runtime::ToolRef::Static(entry) => entry.aliases.to_vec(),
                hermes_runtime::ToolRef::Dynamic(_) => Vec::new(),
            };
            let available = registry.is_available(&tool, &mut pass);
            let mut row = json!({
                "name": tool.name(),
                "toolset": tool.toolset(),
                "emoji": tool.emoji(),
                "available": available,
                "requires_env": tool.requires_env(),
                "aliases": aliases,
                "description": tool.description(),
            });
            if !available {
                if let Some(reason) = tool.unavailable_reason() {
                    row["reason"] = json!(reason);
                }
            }
            row
        })
        .collect();
    if as_json {
        return format!(
            "{}\n",
            serde_json::to_string_pretty(&rows).expect("JSON serialises")
        );
    }
    let mut out = String::new();
    let width = selected
        .tools
        .iter()
        .map(|n| n.len())
        .max()
        .unwrap_or(4)
        .max(4);
    for row in &rows {
        let available = row["available"].as_bool().unwrap_or(false);
        let status = if available {
            "available".to_string()
        } else {
            let env: Vec<&str> = row["requires_env"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            if let Some(reason) = row["reason"].as_str() {
                format!("unavailable ({reason})")
            } else if env.is_empty() {
                "unavailable".to_string()
            } else {
                format!("unavailable (needs {})", env.join(", "))
            }
        };
        out.push_str(&format!(
            "{} {:width$}  {:16} {}\n",
            row["emoji"].as_str().unwrap_or_default(),
            row["name"].as_str().unwrap_or_default(),
            row["toolset"].as_str().unwrap_or_default(),
            status,
        ));
    }
    out
}

pub(super) fn schema(registry: &Registry, selection: &SelectionArgs, strict: bool) -> String {
    let definitions =
        registry.definitions(selection.toolsets.as_deref(), selection.disabled.as_deref());
    warn_unknown(&definitions.unknown_toolsets);
    let mut tools = definitions.tools;
    if strict {
        for tool in &mut tools {
            let function = &mut tool["function"];
            function["parameters"] = strict_parameters(&function["parameters"]);
            function["strict"] = Value::Bool(true);
        }
    }
    format!(
        "{}\n",
        serde_json::to_string_pretty(&tools).expect("JSON serialises")
    )
}

pub(super) fn toolsets(registry: &Registry, as_json: bool) -> String {
    let catalog = registry.catalog();
    if as_json {
        let toolsets: serde_json::Map<String, Value> = catalog
            .toolsets
            .iter()
            .map(|t| {
                (
                    t.name.to_string(),
                    json!({
                        "description": t.description,
                        "tools": t.tools,
                        "includes": t.includes,
                        "resolved": registry.resolve_toolset(t.name),
                        "planned": t.planned,
                    }),
                )
            })
            .collect();
        let legacy: serde_json::Map<String, Value> = catalog
            .legacy_toolsets
            .iter()
            .map(|l| (l.name.to_string(), json!(l.tools)))
            .collect();
        let aliases: serde_json::Map<String, Value> = catalog
            .tools
            .iter()
            .flat_map(|t| {
                t.aliases
                    .iter()
                    .map(move |a| (a.to_string(), Value::from(t.name)))
            })
            .collect();
        let out = json!({"toolsets": toolsets, "legacy_toolsets": legacy, "tool_aliases": aliases});
        return format!(
            "{}\n",
            serde_json::to_string_pretty(&out).expect("JSON serialises")
        );
    }
    let mut out = String::new();
    for t in catalog.toolsets {
        let resolved = registry.resolve_toolset(t.name);
        out.push_str(&format!(
            "{} ({} tools): {}\n",
            t.name,
            resolved.len(),
            t.description
        ));
        if !resolved.is_empty() {
            out.push_str(&format!("    tools: {}\n", resolved.join(", ")));
        }
        if !t.includes.is_empty() {
            out.push_str(&format!("    includes: {}\n", t.includes.join(", ")));
        }
    }
    let legacy: Vec<String> = catalog
        .legacy_toolsets
        .iter()
        .filter(|l| !l.tools.is_empty())
        .map(|l| format!("{} -> {}", l.name, l.tools.join(", ")))
        .collect();
    if !legacy.is_empty() {
        out.push_str(&format!("\nlegacy names:\n    {}\n", legacy.join("\n    ")));
    }
    let aliases: Vec<String> = catalog
        .tools
        .iter()
        .flat_map(|t| t.aliases.iter().map(move |a| format!("{a} -> {}", t.name)))
        .collect();
    if !aliases.is_empty() {
        out.push_str(&format!(
            "\ntool aliases:\n    {}\n",
            aliases.join("\n    ")
        ));
    }
    out
}
