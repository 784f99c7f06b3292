//! The shapes of the generated static table.

use crate::context::ToolContext;
use crate::output::ToolResult;
use std::future::Future;
use std::pin::Pin;

pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// How a tool's handler is called. The generated shims take the raw JSON arguments,
/// read them into the handler's typed parameters and call it.
#[derive(Clone, Copy)]
pub enum Handler {
    Sync(fn(&ToolContext, serde_json::Value) -> ToolResult),
    /// Owns its context so the future can outlive the caller's borrow (the bridge may
    /// run it on another thread).
    Async(fn(ToolContext, serde_json::Value) -> BoxFuture<ToolResult>),
}

impl Handler {
    pub fn is_async(&self) -> bool {
        matches!(self, Handler::Async(_))
    }
}

/// An availability probe shared by every tool that names it; its index in
/// [`Catalog::checks`] is its identity, so one pass probes it at most once.
pub struct CheckProbe {
    /// The Rust path, for logs and `list`.
    pub name: &'static str,
    pub probe: fn() -> bool,
}

/// One built-in tool, as generated from a `#[tool]` function.
pub struct ToolEntry {
    pub name: &'static str,
    pub toolset: &'static str,
    /// The first paragraph of the doc comment; also `schema`'s description.
    pub description: &'static str,
    /// Empty means the default glyph.
    pub emoji: &'static str,
    /// `{"name", "description", "parameters"}` as compact JSON, built at compile time.
    pub schema: &'static str,
    pub handler: Handler,
    /// Index into [`Catalog::checks`].
    pub check: Option<usize>,
    /// Shown to people (`list`), never enforced.
    pub requires_env: &'static [&'static str],
    pub max_result_chars: Option<usize>,
    /// Old names still accepted at dispatch, never advertised.
    pub aliases: &'static [&'static str],
    /// Rewrites the schema at definition time: `None` drops the tool from this build
    /// of definitions, an object is shallow-merged over the schema.
    pub dynamic_schema:
        Option<fn(&crate::registry::SchemaContext<'_>) -> Option<serde_json::Value>>,
    /// Why the tool's check fails, in words a person can act on (`list`); `None` from
    /// it, or no function, shows only that the tool is unavailable.
    pub unavailable_reason: Option<fn() -> Option<String>>,
    pub concurrency: Concurrency,
    /// The file that declares the tool, relative to the crate root.
    pub source: &'static str,
}

/// How a call may overlap the other calls of one model turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Concurrency {
    /// Side effects the runtime cannot see (a shell, a question to the user): alone.
    Exclusive,
    /// Only reads; beside anything but writes to what it reads (its `path`, if any).
    ReadOnly,
    /// Writes only the file named by its `path` argument.
    PathScoped,
}

/// One toolset: direct tools (only those that exist) and included toolsets.
pub struct ToolsetDef {
    pub name: &'static str,
    pub description: &'static str,
    /// Sorted names of existing tools.
    pub tools: &'static [&'static str],
    pub includes: &'static [&'static str],
    /// A posture bundle (e.g. `coding`): disabling it removes only its non-core tools.
    pub posture: bool,
    /// Tools the catalogue names but this build does not have.
    pub planned: &'static [&'static str],
}

/// An old toolset name (`web_tools`) and the tools it stands for.
pub struct LegacyToolset {
    pub name: &'static str,
    pub tools: &'static [&'static str],
}

/// The whole generated table.
pub struct Catalog {
    /// Sorted by name.
    pub tools: &'static [ToolEntry],
    pub checks: &'static [CheckProbe],
    /// Sorted by name.
    pub toolsets: &'static [ToolsetDef],
    /// Sorted by name; no name here is also a real toolset.
    pub legacy_toolsets: &'static [LegacyToolset],
    /// The tools every interactive preset starts from; disabling a `hermes-*` or posture
    /// bundle keeps them.
    pub core_tools: &'static [&'static str],
    /// Canonical index of a tool name or alias, by a generated `match` (no hashing).
    pub tool_index: fn(&str) -> Option<usize>,
    pub toolset_index: fn(&str) -> Option<usize>,
}

impl Catalog {
    /// The entry for a name or one of its aliases.
    pub fn tool(&self, name: &str) -> Option<&'static ToolEntry> {
        (self.tool_index)(name).map(|i| &self.tools[i])
    }

    pub fn toolset(&self, name: &str) -> Option<&'static ToolsetDef> {
        (self.toolset_index)(name).map(|i| &self.toolsets[i])
    }

    pub fn legacy_toolset(&self, name: &str) -> Option<&'static LegacyToolset> {
        self.legacy_toolsets
            .binary_search_by(|l| l.name.cmp(name))
            .ok()
            .map(|i| &self.legacy_toolsets[i])
    }
}

impl ToolEntry {
    pub const DEFAULT_EMOJI: &'static str = "⚡";

    pub fn emoji_or_default(&self) -> &'static str {
        if self.emoji.is_empty() {
            Self::DEFAULT_EMOJI
        } else {
            self.emoji
        }
    }
}
