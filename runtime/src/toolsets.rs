//! Toolset resolution over the merged view (static toolsets plus tools registered at
//! run time): composite toolsets, `all`/`*`, legacy `_tools` names, and the
//! enabled/disabled selection that decides which tools a model is offered.

use crate::registry::Registry;
use std::collections::BTreeSet;

/// True for names that mean "every toolset".
pub fn is_all(name: &str) -> bool {
    name == "all" || name == "*"
}

/// A toolset as the registry sees it now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolsetView {
    pub name: String,
    pub description: String,
    /// Sorted: the static tools, tools registered under this name, and the tools of a
    /// toolset an alias of this name points at.
    pub tools: Vec<String>,
    pub includes: Vec<String>,
}

impl Registry {
    /// Static toolsets and toolsets that exist only through registered tools, sorted.
    pub fn toolset_names(&self) -> Vec<String> {
        let mut names: BTreeSet<String> = self
            .catalog()
            .toolsets
            .iter()
            .map(|t| t.name.to_string())
            .collect();
        names.extend(self.dynamic_toolset_names());
        names.into_iter().collect()
    }

    /// `all`, `*`, a static or registered toolset, or a toolset alias.
    pub fn validate_toolset(&self, name: &str) -> bool {
        is_all(name)
            || self.catalog().toolset(name).is_some()
            || self.dynamic_toolset_names().iter().any(|n| n == name)
            || self.toolset_alias_target(name).is_some()
    }

    /// The merged view of one toolset; `None` when the name means nothing.
    pub fn toolset(&self, name: &str) -> Option<ToolsetView> {
        let alias_target = self.toolset_alias_target(name);
        let mut tools: BTreeSet<String> = BTreeSet::new();
        let collect_direct = |toolset: &str, tools: &mut BTreeSet<String>| {
            if let Some(def) = self.catalog().toolset(toolset) {
                for tool in def.tools {
                    // A tool of this toolset that a registration moved to another
                    // toolset no longer counts here.
                    let own = self
                        .catalog()
                        .tool(tool)
                        .is_some_and(|e| e.toolset == toolset);
                    let moved_away = own
                        && self
                            .get(tool)
                            .is_some_and(|found| found.toolset() != toolset);
                    if !moved_away {
                        tools.insert(tool.to_string());
                    }
                }
            }
            tools.extend(self.dynamic_tools_in(toolset));
        };
        collect_direct(name, &mut tools);
        if let Some(target) = &alias_target {
            collect_direct(target, &mut tools);
        }
        if let Some(def) = self.catalog().toolset(name) {
            return Some(ToolsetView {
                name: name.to_string(),
                description: def.description.to_string(),
                tools: tools.into_iter().collect(),
                includes: def.includes.iter().map(|s| s.to_string()).collect(),
            });
        }
        if tools.is_empty() {
            return None;
        }
        let description = match &alias_target {
            Some(_) if name.starts_with("mcp-") => format!("MCP server '{}' tools", &name[4..]),
            Some(_) => format!("MCP server '{name}' tools"),
            None if name.starts_with("mcp-") => format!("MCP server '{}' tools", &name[4..]),
            None => format!("Plugin toolset: {name}"),
        };
        Some(ToolsetView {
            name: name.to_string(),
            description,
            tools: tools.into_iter().collect(),
            includes: Vec::new(),
        })
    }

    /// Every tool a toolset stands for, sorted and unique. Includes are expanded once
    /// each, so cycles and diamonds are harmless. Unknown names resolve to nothing.
    pub fn resolve_toolset(&self, name: &str) -> Vec<String> {
        if is_all(name) {
            return self.tool_names();
        }
        let mut visited = BTreeSet::new();
        let mut tools = BTreeSet::new();
        let mut stack = vec![name.to_string()];
        while let Some(current) = stack.pop() {
            if !visited.insert(current.clone()) {
                continue;
            }
            if let Some(view) = self.toolset(&current) {
                tools.extend(view.tools);
                stack.extend(view.includes);
            }
        }
        tools.into_iter().collect()
    }

    /// For disabling a preset or posture bundle: its own tools and those of its direct
    /// includes, minus the core every preset shares.
    pub fn bundle_non_core_tools(&self, name: &str) -> Vec<String> {
        let core = self.catalog().core_tools;
        let mut tools: BTreeSet<String> = match self.toolset(name) {
            Some(view) => {
                let mut tools: BTreeSet<String> = view.tools.into_iter().collect();
                for include in view.includes {
                    if let Some(included) = self.toolset(&include) {
                        tools.extend(included.tools);
                    }
                }
                tools
            }
            None => self.resolve_toolset(name).into_iter().collect(),
        };
        tools.retain(|t| !core.contains(&t.as_str()));
        tools.into_iter().collect()
    }

    fn is_bundle(&self, name: &str) -> bool {
        name.starts_with("hermes-") || self.catalog().toolset(name).is_some_and(|d| d.posture)
    }

    /// A toolset name (real names win over legacy ones), a legacy name, or `None`.
    fn tools_named_by(&self, name: &str, disabling: bool) -> Option<Vec<String>> {
        if self.validate_toolset(name) {
            if disabling && self.is_bundle(name) {
                return Some(self.bundle_non_core_tools(name));
            }
            return Some(self.resolve_toolset(name));
        }
        self.catalog()
            .legacy_toolset(name)
            .map(|legacy| legacy.tools.iter().map(|t| t.to_string()).collect())
    }

    /// Which tools `enabled` and `disabled` toolsets select.
    ///
    /// `enabled = None` means every toolset; an empty list selects nothing. Disabled
    /// names are applied last and beat enabled composites; disabling a `hermes-*`
    /// preset or a posture bundle removes only what it adds to the core.
    pub fn select_tools<S: AsRef<str>>(
        &self,
        enabled: Option<&[S]>,
        disabled: Option<&[S]>,
    ) -> Selection {
        let mut selected: BTreeSet<String> = BTreeSet::new();
        let mut unknown = Vec::new();
        match enabled {
            None => selected.extend(self.tool_names()),
            Some(names) => {
                for name in names.iter().map(AsRef::as_ref) {
                    match self.tools_named_by(name, false) {
                        Some(tools) => selected.extend(tools),
                        None => unknown.push(name.to_string()),
                    }
                }
            }
        }
        for name in disabled.unwrap_or(&[]).iter().map(AsRef::as_ref) {
            match self.tools_named_by(name, true) {
                Some(tools) => {
                    for tool in tools {
                        selected.remove(&tool);
                    }
                }
                None => unknown.push(name.to_string()),
            }
        }
        Selection {
            tools: selected.into_iter().collect(),
            unknown,
        }
    }
}

/// The result of an enabled/disabled selection.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Selection {
    /// Sorted tool names.
    pub tools: Vec<String>,
    /// Names that were neither a toolset nor a legacy toolset name, in order given.
    pub unknown: Vec<String>,
}
