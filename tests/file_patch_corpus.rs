//! Replays the apply-patch scenarios under `tests/data/apply_patch/` through
//! `hermes-tools call patch`. Each scenario is a folder: `input/` (the files before),
//! `patch.txt`, `expected/` (every file after: the tree must be exactly this) and
//! `result.json` (`success`, and for a failure a piece of the error). The cases follow
//! the examples published with the V4A / apply_patch format (codex's apply-patch
//! scenarios and docs), written anew here; where this project deliberately differs
//! from codex, `differs_from_codex` in result.json says how.

mod file_patch_support;

use file_patch_support::{tree, Workspace};
use serde_json::Value;
use std::path::Path;

fn copy_tree(from: &Path, to: &Path) {
    if !from.exists() {
        return;
    }
    for (rel, bytes) in tree(from) {
        let target = to.join(rel);
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::write(target, bytes).unwrap();
    }
}

fn replay(scenario: &Path) -> Result<(), String> {
    let name = scenario.file_name().unwrap().to_string_lossy().into_owned();
    let w = Workspace::new();
    copy_tree(&scenario.join("input"), w.dir.path());
    let patch = std::fs::read_to_string(scenario.join("patch.txt")).unwrap();
    let expect: Value =
        serde_json::from_str(&std::fs::read_to_string(scenario.join("result.json")).unwrap())
            .unwrap();
    let result = w.v4a(&patch);
    let success = expect["success"].as_bool().unwrap();
    if result["success"].as_bool() != Some(success) {
        return Err(format!("{name}: expected success={success}, got {result}"));
    }
    if let Some(piece) = expect["error_contains"].as_str() {
        let error = result["error"].as_str().unwrap_or_default();
        if !error.contains(piece) {
            return Err(format!(
                "{name}: the error should mention {piece:?}: {error}"
            ));
        }
    }
    let expected_dir = scenario.join("expected");
    let expected = if expected_dir.exists() {
        tree(&expected_dir)
    } else {
        Vec::new()
    };
    let actual = tree(w.dir.path());
    if actual != expected {
        let show = |files: &[(String, Vec<u8>)]| {
            files
                .iter()
                .map(|(p, b)| format!("{p}: {:?}", String::from_utf8_lossy(b)))
                .collect::<Vec<_>>()
                .join("\n  ")
        };
        return Err(format!(
            "{name}: files after the patch\n  {}\nexpected\n  {}",
            show(&actual),
            show(&expected)
        ));
    }
    Ok(())
}

#[test]
fn apply_patch_scenarios() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/apply_patch");
    let mut scenarios: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    scenarios.sort();
    assert!(
        scenarios.len() >= 30,
        "the corpus is missing: {}",
        root.display()
    );
    let failures: Vec<String> = scenarios.iter().filter_map(|s| replay(s).err()).collect();
    assert!(
        failures.is_empty(),
        "{} of {} scenarios failed:\n{}",
        failures.len(),
        scenarios.len(),
        failures.join("\n\n")
    );
}
