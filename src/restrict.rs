//! `--toolsets` / `--disabled` for `call` and `serve`: a pre-call hook that refuses
//! every tool outside the selection, so the refusal reaches the client as a result
//! and applies to calls made from inside other tools (execute_code scripts) too.

use hermes_runtime::hooks::{PreCall, PreDecision, ToolHooks};
use hermes_runtime::Registry;
use std::sync::{Arc, Weak};

/// The toolsets a client may use; `None` for either field means no restriction there.
#[derive(Debug, Clone, Default)]
pub struct ToolSelection {
    pub toolsets: Option<Vec<String>>,
    pub disabled: Option<Vec<String>>,
}

impl ToolSelection {
    pub fn is_restricted(&self) -> bool {
        self.toolsets.is_some() || self.disabled.is_some()
    }

    /// The tool names the selection allows, resolved now (MCP tools attached since are
    /// included when their toolset is).
    pub fn allowed(&self, registry: &Registry) -> Vec<String> {
        registry
            .select_tools(self.toolsets.as_deref(), self.disabled.as_deref())
            .tools
    }

    /// Installs the refusal on `registry`; unknown toolset names are warned about.
    pub fn enforce_on(&self, registry: &Arc<Registry>) {
        crate::current::set_selection(self.clone());
        if !self.is_restricted() {
            return;
        }
        let unknown = registry
            .select_tools(self.toolsets.as_deref(), self.disabled.as_deref())
            .unknown;
        for name in unknown {
            eprintln!("warning: unknown toolset `{name}` (see `hermes-tools toolsets`)");
        }
        let hook = SelectionGuard {
            registry: Arc::downgrade(registry),
            selection: self.clone(),
        };
        registry.add_hooks(Arc::new(hook));
    }
}

/// Holds the registry weakly: the registry owns its hooks.
struct SelectionGuard {
    registry: Weak<Registry>,
    selection: ToolSelection,
}

impl SelectionGuard {
    fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(toolsets) = &self.selection.toolsets {
            parts.push(format!("--toolsets {}", toolsets.join(",")));
        }
        if let Some(disabled) = &self.selection.disabled {
            parts.push(format!("--disabled {}", disabled.join(",")));
        }
        parts.join(" ")
    }
}

impl ToolHooks for SelectionGuard {
    fn pre_tool_call(&self, call: &PreCall<'_>) -> PreDecision {
        let Some(registry) = self.registry.upgrade() else {
            return PreDecision::Continue;
        };
        let name = registry.canonical_name(call.tool_name).into_owned();
        // An unknown name goes on to dispatch, which answers with suggestions.
        if registry.get(&name).is_none() {
            return PreDecision::Continue;
        }
        if self.selection.allowed(&registry).contains(&name) {
            return PreDecision::Continue;
        }
        PreDecision::Block(format!(
            "Tool {name} is not enabled here ({}); use only the tools of the selected toolsets",
            self.describe()
        ))
    }
}
