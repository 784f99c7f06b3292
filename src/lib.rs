//! hermes-tools: the tools in `tools/` and their generated registry, on top of
//! `hermes-runtime`.
//!
//! Nothing is discovered at start-up: `build.rs` turned `tools/` into [`CATALOG`].

pub use hermes_runtime as runtime;

pub mod allocator;
pub mod cli;
pub mod current;
pub mod file_access;
mod kernel_bound;
pub mod restrict;
pub mod serve;
pub mod serve_approvals;
pub mod shared;

/// One module per file in `tools/`, declared by the generator.
pub mod tools {
    include!(concat!(env!("OUT_DIR"), "/tool_modules.rs"));
}

include!(concat!(env!("OUT_DIR"), "/registry.rs"));
