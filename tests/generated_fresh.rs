//! `generated/` is committed for reviewers; this fails when it no longer matches what
//! the generator makes of `tools/` (a hand edit, or tools changed without a build).

#[test]
fn generated_folder_matches_the_tools() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let generated = hermes_codegen::generate(root).unwrap_or_else(|errors| {
        panic!(
            "tools/ does not generate: {}",
            errors
                .iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join("\n")
        )
    });
    for (name, expected) in generated.mirrored() {
        let path = root.join("generated").join(name);
        let actual = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            actual == expected,
            "generated/{name} is stale: run `cargo build` and commit generated/"
        );
    }
}
