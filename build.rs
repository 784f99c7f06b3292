//! Reads tools/ once and writes the static registry: see codegen/ for how.

use std::path::PathBuf;

fn main() {
    let root = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    println!("cargo::rerun-if-changed=tools");
    let generated = match hermes_codegen::generate(&root) {
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
        if let Err(e) = hermes_codegen::write_if_changed(&path, contents) {
            println!("cargo::error=cannot write {}: {e}", path.display());
        }
    };
    write(out_dir.join("tool_modules.rs"), &generated.tool_modules_rs);
    for (name, contents) in generated.mirrored() {
        write(out_dir.join(name), contents);
        // The committed mirror is what reviewers diff; CI fails when it is stale.
        write(root.join("generated").join(name), contents);
    }
}
