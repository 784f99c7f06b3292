//! Runs one of the benches' scripts against the original (hermes-agent, from PyPI)
//! under the Python `HERMES_BENCH_ORIGINAL_PYTHON` names, with a fresh `HERMES_HOME`
//! and `TERMINAL_CWD`.

use std::process::Command;

/// The last line `benches/<script>` printed, with `args`; an error saying why there is
/// none (no Python named, nothing printed: the script's output is in the error).
pub fn last_line(script: &str, args: &[String]) -> Result<String, String> {
    let python = std::env::var_os("HERMES_BENCH_ORIGINAL_PYTHON")
        .ok_or("HERMES_BENCH_ORIGINAL_PYTHON is not set")?;
    let home = tempfile::tempdir().map_err(|e| e.to_string())?;
    let work = tempfile::tempdir().map_err(|e| e.to_string())?;
    let out = Command::new(python)
        .arg(format!("{}/benches/{script}", env!("CARGO_MANIFEST_DIR")))
        .args(args)
        .env("HERMES_HOME", home.path())
        .env("TERMINAL_CWD", work.path())
        .output()
        .map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&out.stdout);
    match text.trim().lines().last() {
        Some(line) => Ok(line.to_string()),
        None => Err(format!(
            "{script} printed no figure: {text} {}",
            String::from_utf8_lossy(&out.stderr)
        )),
    }
}
