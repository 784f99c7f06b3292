//! hermes-tools: the tools in `tools/` and their generated registry, on top of
//! `hermes-runtime`.
//!
//! Nothing is discovered at start-up: `build.rs` turned `tools/` into [`CATALOG`].

pub use hermes_runtime as runtime;

pub mod cli;
pub mod current;
pub mod file_access;
pub mod restrict;
pub mod serve;
pub mod serve_approvals;
pub mod shared;

/// One module per file in `tools/`, declared by the generator.
pub mod tools {
    include!(concat!(env!("OUT_DIR"), "/tool_modules.rs"));

    /// Why a tool whose check failed is unavailable, for `hermes-tools list`, where
    /// the tool can say more than "unavailable".
    pub fn unavailable_reason(tool: &str) -> Option<String> {
        match tool {
            "vision_analyze" => vision::vision_unavailable_reason(),
            "image_generate" => image_gen::image_generate_unavailable_reason(),
            "ha_list_entities" | "ha_get_state" | "ha_list_services" | "ha_call_service" => {
                homeassistant::ha_unavailable_reason()
            }
            _ => None,
        }
    }
}

include!(concat!(env!("OUT_DIR"), "/registry.rs"));
