//! Reads tools/ once and writes the static registry (see codegen/), mirrored into
//! generated/ for review.

fn main() {
    hermes_codegen::run_build_script(Some("generated"));
}
