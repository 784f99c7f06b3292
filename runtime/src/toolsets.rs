//! Toolset resolution: composite toolsets, `all`/`*`, legacy `_tools` names, and the
//! enabled/disabled selection that decides which tools a model is offered.

use crate::catalog::Catalog;
use std::collections::BTreeSet;

/// True for names that mean "every toolset".
pub fn is_all(name: &str) -> bool {
    name == "all" || name == "*"
}

/// A real toolset, `all`/`*`. Legacy names are accepted by [`select_tools`] but are
/// not toolsets.
pub fn validate_toolset(catalog: &Catalog, name: &str) -> bool {
    is_all(name) || catalog.toolset(name).is_some()
}

/// Every tool a toolset stands for, sorted and unique. Includes are followed once each,
/// so cycles and diamonds are harmless. Unknown names resolve to nothing.
pub fn resolve_toolset(catalog: &Catalog, name: &str) -> Vec<&'static str> {
    let mut tools = BTreeSet::new();
    if is_all(name) {
        tools.extend(catalog.tools.iter().map(|t| t.name));
    } else {
        let mut visited = BTreeSet::new();
        collect(catalog, name, &mut visited, &mut tools);
    }
    tools.into_iter().collect()
}

fn collect<'c>(
    catalog: &'c Catalog,
    name: &str,
    visited: &mut BTreeSet<&'c str>,
    tools: &mut BTreeSet<&'static str>,
) {
    let Some(def) = catalog.toolset(name) else { return };
    if !visited.insert(def.name) {
        return;
    }
    tools.extend(def.tools.iter().copied());
    for include in def.includes {
        collect(catalog, include, visited, tools);
    }
}

/// For disabling a preset or posture bundle: its own tools and those of its direct
/// includes, minus the core every preset shares, so disabling `hermes-discord` leaves
/// the core in place.
pub fn bundle_non_core_tools(catalog: &Catalog, name: &str) -> Vec<&'static str> {
    let Some(def) = catalog.toolset(name) else {
        return resolve_toolset(catalog, name)
            .into_iter()
            .filter(|t| !catalog.core_tools.contains(t))
            .collect();
    };
    let mut tools: BTreeSet<&'static str> = def.tools.iter().copied().collect();
    for include in def.includes {
        if let Some(included) = catalog.toolset(include) {
            tools.extend(included.tools.iter().copied());
        }
    }
    tools.retain(|t| !catalog.core_tools.contains(t));
    tools.into_iter().collect()
}

fn is_bundle(catalog: &Catalog, name: &str) -> bool {
    name.starts_with("hermes-") || catalog.toolset(name).is_some_and(|d| d.posture)
}

/// The result of an enabled/disabled selection.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Selection {
    /// Sorted tool names.
    pub tools: Vec<&'static str>,
    /// Names that were neither a toolset nor a legacy toolset name, in order given.
    pub unknown: Vec<String>,
}

/// Which tools `enabled` and `disabled` toolsets select.
///
/// `enabled = None` means every toolset; an empty list selects nothing. Disabled names
/// are applied last and beat enabled composites.
pub fn select_tools<S: AsRef<str>>(
    catalog: &Catalog,
    enabled: Option<&[S]>,
    disabled: Option<&[S]>,
) -> Selection {
    let mut selected: BTreeSet<&'static str> = BTreeSet::new();
    let mut unknown = Vec::new();
    match enabled {
        None => selected.extend(catalog.tools.iter().map(|t| t.name)),
        Some(names) => {
            for name in names.iter().map(AsRef::as_ref) {
                match tools_named_by(catalog, name, false) {
                    Some(tools) => selected.extend(tools),
                    None => unknown.push(name.to_string()),
                }
            }
        }
    }
    for name in disabled.unwrap_or(&[]).iter().map(AsRef::as_ref) {
        match tools_named_by(catalog, name, true) {
            Some(tools) => {
                for tool in tools {
                    selected.remove(tool);
                }
            }
            None => unknown.push(name.to_string()),
        }
    }
    Selection { tools: selected.into_iter().collect(), unknown }
}

/// A toolset name (real names win over legacy ones), a legacy name, or `None`.
fn tools_named_by(catalog: &Catalog, name: &str, disabling: bool) -> Option<Vec<&'static str>> {
    if validate_toolset(catalog, name) {
        if disabling && is_bundle(catalog, name) {
            return Some(bundle_non_core_tools(catalog, name));
        }
        return Some(resolve_toolset(catalog, name));
    }
    catalog.legacy_toolset(name).map(|legacy| legacy.tools.to_vec())
}
