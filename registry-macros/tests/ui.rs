//! What a contributor sees in the editor and in rustc's output: the attribute's own
//! errors point at the offending token. (The build script reports the same mistakes
//! first, with file:line:column; see codegen/tests.)
//!
//! Each `tests/ui/pass_*.rs` must compile and run; each `tests/ui/fail_*.rs` must fail
//! to compile with exactly the errors in the `.stderr` file beside it. The cases are
//! built as the bins of one scratch package, in one cargo run, and every verdict is
//! taken from what cargo says about that bin by name: a compile-fail case passes only
//! when cargo reports errors for it *and* produced no artifact for it, so a case whose
//! diagnostics went missing can never count as an expected failure.
//!
//! `HERMES_UI_BLESS=1 cargo test -p hermes-registry-macros --test ui` rewrites the
//! `.stderr` files from what rustc prints now.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

const CASES: &str = "tests/ui";

#[derive(Default)]
struct Outcome {
    errors: Vec<String>,
    executable: Option<PathBuf>,
    built: bool,
}

#[test]
fn attribute_errors_point_at_the_token() {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cases = case_names(&manifest_dir.join(CASES));
    assert!(
        cases.iter().any(|c| c.starts_with("pass_"))
            && cases.iter().any(|c| c.starts_with("fail_"))
    );

    let project = Path::new(env!("CARGO_TARGET_TMPDIR")).join("ui-cases");
    write_project(manifest_dir, &project, &cases);
    let (outcomes, cargo_stderr) = build(&project);

    let bless = std::env::var_os("HERMES_UI_BLESS").is_some();
    let mut failures = Vec::new();
    for case in &cases {
        let outcome = outcomes.get(case.as_str());
        let failure = if case.starts_with("pass_") {
            check_pass(case, outcome)
        } else {
            check_fail(&manifest_dir.join(CASES), case, outcome, bless)
        };
        if let Err(why) = failure {
            failures.push(format!("{CASES}/{case}.rs: {why}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} ui cases failed:\n\n{}\n\n--- cargo's stderr ---\n{cargo_stderr}",
        failures.len(),
        cases.len(),
        failures.join("\n\n")
    );
}

fn case_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|entry| {
            let path = entry.unwrap().path();
            let stem = path.file_stem()?.to_str()?.to_owned();
            let is_case = path.extension().is_some_and(|e| e == "rs")
                && (stem.starts_with("pass_") || stem.starts_with("fail_"));
            is_case.then_some(stem)
        })
        .collect();
    names.sort();
    names
}

/// A package of its own (an empty `[workspace]`), with the workspace's lock file so it
/// builds the same dependency versions, and the cases at `tests/ui/` so rustc prints
/// the same relative paths as the `.stderr` files hold.
fn write_project(manifest_dir: &Path, project: &Path, cases: &[String]) {
    let workspace = manifest_dir.parent().unwrap();
    let ui = project.join(CASES);
    if ui.exists() {
        std::fs::remove_dir_all(&ui).unwrap();
    }
    std::fs::create_dir_all(&ui).unwrap();
    let mut manifest = format!(
        "[package]\nname = \"ui-cases\"\nversion = \"0.0.0\"\nedition = \"2021\"\npublish = false\n\n\
         [workspace]\n\n[profile.dev]\ndebug = false\n\n[dependencies]\n\
         hermes-registry-macros = {{ path = {macros:?} }}\nhermes-runtime = {{ path = {runtime:?} }}\n",
        macros = manifest_dir.display().to_string(),
        runtime = workspace.join("runtime").display().to_string(),
    );
    for case in cases {
        std::fs::copy(
            manifest_dir.join(CASES).join(format!("{case}.rs")),
            ui.join(format!("{case}.rs")),
        )
        .unwrap();
        manifest.push_str(&format!(
            "\n[[bin]]\nname = \"{case}\"\npath = \"{CASES}/{case}.rs\"\n"
        ));
    }
    std::fs::write(project.join("Cargo.toml"), manifest).unwrap();
    std::fs::copy(workspace.join("Cargo.lock"), project.join("Cargo.lock")).unwrap();
}

/// One `cargo build` of every case; what cargo said, per bin.
fn build(project: &Path) -> (BTreeMap<String, Outcome>, String) {
    let output = Command::new(env!("CARGO"))
        .args([
            "build",
            "--bins",
            "--keep-going",
            "--offline",
            "--message-format=json",
            "--color=never",
        ])
        .current_dir(project)
        .env("CARGO_TARGET_DIR", project.join("target"))
        .env_remove("CARGO_BUILD_TARGET_DIR")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env("RUSTFLAGS", "--diagnostic-width=140")
        .env("CARGO_TERM_COLOR", "never")
        .output()
        .expect("cargo runs");
    let mut outcomes: BTreeMap<String, Outcome> = BTreeMap::new();
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let Ok(message) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let is_ours = message["package_id"]
            .as_str()
            .is_some_and(|id| id.contains("ui-cases"));
        let Some(target) = message["target"]["name"].as_str().filter(|_| is_ours) else {
            continue;
        };
        let outcome = outcomes.entry(target.to_owned()).or_default();
        match message["reason"].as_str() {
            Some("compiler-artifact") => {
                outcome.built = true;
                outcome.executable = message["executable"].as_str().map(PathBuf::from);
            }
            Some("compiler-message") => {
                let diagnostic = &message["message"];
                let text = diagnostic["message"].as_str().unwrap_or_default();
                if diagnostic["level"] == "error" && !text.starts_with("aborting due to") {
                    outcome.errors.push(
                        diagnostic["rendered"]
                            .as_str()
                            .unwrap_or(text)
                            .trim_end()
                            .to_owned(),
                    );
                }
            }
            _ => {}
        }
    }
    (
        outcomes,
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn check_pass(case: &str, outcome: Option<&Outcome>) -> Result<(), String> {
    let outcome = outcome.filter(|o| o.built).ok_or_else(|| {
        let errors = outcome.map(|o| o.errors.join("\n\n")).unwrap_or_default();
        format!("should compile, but did not:\n{errors}")
    })?;
    let executable = outcome
        .executable
        .as_ref()
        .ok_or("compiled, but cargo named no executable")?;
    let run = Command::new(executable)
        .output()
        .map_err(|e| format!("cannot run {case}: {e}"))?;
    if !run.status.success() {
        return Err(format!(
            "compiled, but running it failed ({}):\n{}",
            run.status,
            String::from_utf8_lossy(&run.stderr)
        ));
    }
    Ok(())
}

fn check_fail(
    dir: &Path,
    case: &str,
    outcome: Option<&Outcome>,
    bless: bool,
) -> Result<(), String> {
    let outcome =
        outcome.ok_or("cargo said nothing about this case (neither errors nor an artifact)")?;
    if outcome.built {
        return Err("should fail to compile, but it compiled".into());
    }
    if outcome.errors.is_empty() {
        return Err(
            "did not compile, but rustc reported no error for it (a dependency failed?)".into(),
        );
    }
    let actual = outcome.errors.join("\n\n");
    let expected_path = dir.join(format!("{case}.stderr"));
    if bless {
        std::fs::write(&expected_path, format!("{actual}\n")).unwrap();
        return Ok(());
    }
    let expected = std::fs::read_to_string(&expected_path).unwrap_or_default();
    if normalise(&expected) != normalise(&actual) {
        return Err(format!(
            "the errors differ from {}\n--- expected ---\n{}\n--- actual ---\n{actual}",
            expected_path.display(),
            expected.trim_end()
        ));
    }
    Ok(())
}

fn normalise(text: &str) -> String {
    text.lines()
        .map(str::trim_end)
        .collect::<Vec<_>>()
        .join("\n")
        .trim()
        .to_owned()
}
