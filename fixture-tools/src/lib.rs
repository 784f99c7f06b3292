//! A catalog of fixture tools, generated from `fixture-tools/tools/` exactly as the
//! real one is from `tools/`, so tests exercise the whole pipeline.

pub mod tools {
    include!(concat!(env!("OUT_DIR"), "/tool_modules.rs"));
}

include!(concat!(env!("OUT_DIR"), "/registry.rs"));
