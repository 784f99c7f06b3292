//! The contributor's promise, end to end: drop one file into tools/ of a scratch copy,
//! build, and the tool is listed, described, grouped and callable, with no other edit.
//! A malformed file fails that build with its file, line and column.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Never copied: build output, version control, installed test peers.
const SKIPPED: &[&str] = &["target", ".git", "node_modules"];

fn copy_tree(from: &Path, to: &Path) {
    if from.is_dir() {
        std::fs::create_dir_all(to).unwrap();
        for entry in std::fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            if SKIPPED.iter().any(|skipped| entry.file_name() == *skipped) {
                continue;
            }
            copy_tree(&entry.path(), &to.join(entry.file_name()));
        }
    } else {
        std::fs::copy(from, to).unwrap();
    }
}

/// Shares compiled dependencies between runs without touching the outer build's lock.
fn scratch_target_dir() -> PathBuf {
    let test_binary = std::env::current_exe().unwrap();
    let target = test_binary
        .ancestors()
        .find(|p| p.file_name().is_some_and(|n| n == "target"))
        .map(Path::to_path_buf);
    target
        .unwrap_or_else(|| std::env::temp_dir().join("hermes-tools-target"))
        .join("e2e-scratch")
}

fn cargo_build(workspace: &Path) -> std::process::Output {
    Command::new(env!("CARGO"))
        .args(["build", "--quiet", "--bin", "hermes-tools"])
        .current_dir(workspace)
        .env("CARGO_TARGET_DIR", scratch_target_dir())
        .output()
        .unwrap()
}

#[test]
fn a_new_tool_file_is_all_it_takes() {
    let source = Path::new(env!("CARGO_MANIFEST_DIR"));
    let scratch = tempfile::tempdir().unwrap();
    copy_tree(source, scratch.path());
    std::fs::write(
        scratch.path().join("tools/zz_greeting.rs"),
        r#"use hermes_runtime::prelude::*;

/// Greet someone by name, politely.
#[tool(toolset = "greeting", emoji = "👋")]
pub fn greet(
    /// Who to greet.
    name: String,
    /// Add an exclamation mark.
    excited: Option<bool>,
) -> ToolResult {
    let mark = if excited.unwrap_or(false) { "!" } else { "." };
    Ok(json!({"greeting": format!("Hello, {name}{mark}")}).into())
}
"#,
    )
    .unwrap();

    let build = cargo_build(scratch.path());
    assert!(
        build.status.success(),
        "build failed:\n{}",
        String::from_utf8_lossy(&build.stderr)
    );
    let binary = scratch_target_dir().join("debug/hermes-tools");
    let run = |args: &[&str]| {
        let output = Command::new(&binary).args(args).output().unwrap();
        assert!(output.status.success(), "{args:?}");
        String::from_utf8(output.stdout).unwrap()
    };

    let list = run(&["list"]);
    let line = list
        .lines()
        .find(|l| l.contains(" greet "))
        .expect("greet is listed");
    assert!(
        line.starts_with("👋") && line.contains("greeting") && line.contains("available"),
        "{line}"
    );

    let schema: Vec<Value> =
        serde_json::from_str(&run(&["schema", "--toolsets", "greeting"])).unwrap();
    assert_eq!(schema.len(), 1);
    assert_eq!(schema[0]["function"]["name"], "greet");
    assert_eq!(
        schema[0]["function"]["description"],
        "Greet someone by name, politely."
    );
    assert_eq!(
        schema[0]["function"]["parameters"]["required"],
        serde_json::json!(["name"])
    );
    assert_eq!(
        schema[0]["function"]["parameters"]["properties"]["excited"]["type"],
        "boolean"
    );

    let toolsets: Value = serde_json::from_str(&run(&["toolsets", "--json"])).unwrap();
    assert_eq!(
        toolsets["toolsets"]["greeting"]["tools"],
        serde_json::json!(["greet"])
    );
    assert_eq!(
        toolsets["legacy_toolsets"]["greeting_tools"],
        serde_json::json!(["greet"])
    );

    let legacy: Vec<Value> =
        serde_json::from_str(&run(&["schema", "--toolsets", "greeting_tools"])).unwrap();
    assert_eq!(legacy, schema);

    let result: Value =
        serde_json::from_str(run(&["call", "greet", r#"{"name": "Ada", "excited": true}"#]).trim())
            .unwrap();
    assert_eq!(result["greeting"], "Hello, Ada!");

    let mirrored =
        std::fs::read_to_string(scratch.path().join("generated/tool_schemas.json")).unwrap();
    assert!(
        mirrored.contains("\"name\": \"greet\""),
        "generated/ mirrors the new tool"
    );

    std::fs::write(
        scratch.path().join("tools/zz_broken.rs"),
        "use hermes_runtime::prelude::*;\n\n/// Broken on purpose.\n#[tool(toolset = \"greeting\", colour = \"red\")]\npub fn broken() -> ToolResult {\n    Ok(json!({}).into())\n}\n",
    )
    .unwrap();
    let build = cargo_build(scratch.path());
    assert!(
        !build.status.success(),
        "a malformed tool file must fail the build"
    );
    let stderr = String::from_utf8_lossy(&build.stderr);
    assert!(
        stderr.contains("tools/zz_broken.rs:4:30: unknown key `colour`"),
        "{stderr}"
    );
}
