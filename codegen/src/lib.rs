//! The generator behind `build.rs`: scans `tools/` with syn, validates every `#[tool]`
//! and the toolset declarations, and writes the static registry, the schemas and the
//! toolset map. Errors name the file, line and column.
//!
//! It runs at build time only; the binary starts with the finished table.

pub mod attr;
pub mod diagnostics;
mod emit;
pub mod macro_support;
mod model;
pub mod scan;
pub mod schema;
pub mod tool_fn;
pub mod toolsets_dsl;

pub use diagnostics::Diagnostic;

use std::path::{Path, PathBuf};

/// Everything the build writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generated {
    /// The static table, shims and lookups; included by the root crate and mirrored
    /// into `generated/registry.rs`.
    pub registry_rs: String,
    /// `mod` declarations for the tool files, with absolute paths (so not mirrored).
    pub tool_modules_rs: String,
    /// Every tool's definition as the model sees it, sorted by name.
    pub tool_schemas_json: String,
    /// Toolsets, their tools and includes, legacy names and tool aliases.
    pub toolsets_json: String,
    /// Files whose change must re-run the generator.
    pub inputs: Vec<PathBuf>,
}

impl Generated {
    /// The files mirrored into `generated/`, by file name.
    pub fn mirrored(&self) -> [(&'static str, &str); 3] {
        [
            ("registry.rs", &self.registry_rs),
            ("tool_schemas.json", &self.tool_schemas_json),
            ("toolsets.json", &self.toolsets_json),
        ]
    }
}

/// Generates from `<crate_root>/tools`. Diagnostics come sorted by file and position.
pub fn generate(crate_root: &Path) -> Result<Generated, Vec<Diagnostic>> {
    let tools_dir = crate_root.join("tools");
    let mut diagnostics = Vec::new();
    let (sources, found) = scan::scan(crate_root, &tools_dir, &mut diagnostics);
    let model = model::build(crate_root, &tools_dir, &sources, found, &mut diagnostics);
    if !diagnostics.is_empty() {
        diagnostics.sort_by(|a, b| (&a.file, a.line, a.column).cmp(&(&b.file, b.line, b.column)));
        diagnostics.dedup();
        return Err(diagnostics);
    }
    let model = model.expect("a model is built whenever there are no diagnostics");
    let mut inputs = vec![tools_dir.clone()];
    inputs.extend(sources.iter().map(|s| s.abs_path.clone()));
    if model.toolsets_file.is_some() {
        inputs.push(tools_dir.join(scan::TOOLSETS_FILE));
    }
    Ok(Generated {
        registry_rs: emit::registry_rs(&model),
        tool_modules_rs: emit::tool_modules_rs(&model, &sources),
        tool_schemas_json: emit::tool_schemas_json(&model),
        toolsets_json: emit::toolsets_json(&model),
        inputs,
    })
}

/// Writes `contents` unless the file already holds exactly that, so an unchanged
/// output never touches timestamps (and never triggers a rebuild).
pub fn write_if_changed(path: &Path, contents: &str) -> std::io::Result<bool> {
    if std::fs::read(path).is_ok_and(|existing| existing == contents.as_bytes()) {
        return Ok(false);
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let temp = path.with_extension("tmp-hermes-codegen");
    std::fs::write(&temp, contents)?;
    std::fs::rename(&temp, path)?;
    Ok(true)
}

/// The whole job of a `build.rs`: generate from `tools/` of the crate being built,
/// write into `OUT_DIR`, and mirror the reviewable files into `mirror_dir` (relative
/// to the crate root) when given. Problems become `cargo::error` lines, which fail the
/// build with the file, line and column of each.
pub fn run_build_script(mirror_dir: Option<&str>) {
    let root = PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    );
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    println!("cargo::rerun-if-changed=tools");
    let generated = match generate(&root) {
        Ok(generated) => generated,
        Err(diagnostics) => {
            for diagnostic in &diagnostics {
                println!("cargo::error={diagnostic}");
            }
            return;
        }
    };
    for input in &generated.inputs {
        println!("cargo::rerun-if-changed={}", input.display());
    }
    let write = |path: PathBuf, contents: &str| {
        if let Err(e) = write_if_changed(&path, contents) {
            println!("cargo::error=cannot write {}: {e}", path.display());
        }
    };
    write(out_dir.join("tool_modules.rs"), &generated.tool_modules_rs);
    for (name, contents) in generated.mirrored() {
        write(out_dir.join(name), contents);
        if let Some(mirror) = mirror_dir {
            // The committed mirror is what reviewers diff; CI fails when it is stale.
            write(root.join(mirror).join(name), contents);
        }
    }
}
