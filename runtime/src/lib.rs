//! The part of hermes-tools that runs.
//!
//! The registry itself is not built here: `build.rs` of the root crate generates a
//! static [`Catalog`] from the files in `tools/`, and hands it to this crate as data.
//! This crate never depends on `tools/` or on the generated table, so the arrows point
//! one way: tools -> runtime, generated table -> tools + runtime.

pub mod access;
pub mod approval;
pub mod args;
pub mod availability;
pub mod batch;
pub mod bridge;
pub mod budget;
pub mod catalog;
pub mod coerce;
pub mod config;
pub mod config_watch;
pub mod context;
pub mod definitions;
pub mod dispatch;
pub mod hooks;
pub mod output;
pub mod protected_paths;
pub mod random;
pub mod redact;
pub mod registry;
pub mod strict;
pub mod tls_trust;
pub mod toolsets;
pub mod word_gated;

pub use catalog::{
    Catalog, CheckProbe, Concurrency, Handler, LegacyToolset, ToolEntry, ToolsetDef,
};
pub use context::{AgentSession, ToolContext};
pub use dispatch::ToolCall;
pub use output::{tool_error, ToolError, ToolOutput, ToolResult};
pub use registry::{Caller, DynamicHandler, DynamicTool, Registry, SchemaContext, ToolRef};

/// What a file in `tools/` imports: the attribute, the context and the result types.
pub mod prelude {
    pub use crate::context::ToolContext;
    pub use crate::output::{tool_error, ToolError, ToolOutput, ToolResult};
    pub use crate::registry::SchemaContext;
    pub use hermes_registry_macros::{tool, toolsets};
    pub use serde::Deserialize;
    pub use serde_json::{json, Value};
}

/// Re-exported so generated code and tool files name one version of each.
pub use serde_json;
