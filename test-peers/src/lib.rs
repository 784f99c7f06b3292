//! Where the tests find the peers that `.ci/setup.d` installs.
//!
//! Python packages live in a virtual environment, not in the system Python: current
//! Debian and Ubuntu mark their Python "externally managed" and refuse a bare
//! `pip install`. The setup script and the tests agree on one place for it:
//! `$HERMES_TEST_VENV`, else `~/.cache/hermes-tools/test-venv`.

use std::path::PathBuf;
use std::process::Command;

/// The script that installs the Python peers.
pub const PYTHON_SETUP: &str = ".ci/setup.d/10-python.sh";

/// The virtual environment the setup script creates.
pub fn venv_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("HERMES_TEST_VENV").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/root"));
    home.join(".cache/hermes-tools/test-venv")
}

/// The venv's interpreter, after checking that it imports `modules`; a missing one
/// fails the test with the command that installs it.
pub fn python_with(modules: &[&str]) -> PathBuf {
    let python = venv_dir().join("bin/python3");
    assert!(
        python.exists(),
        "{} is missing: run `bash {PYTHON_SETUP}` (it creates the test venv)",
        python.display()
    );
    if !modules.is_empty() {
        let probe = format!("import {}", modules.join(", "));
        let output = Command::new(&python).args(["-c", &probe]).output();
        let ok = output.as_ref().is_ok_and(|o| o.status.success());
        assert!(
            ok,
            "{} cannot `{probe}`: run `bash {PYTHON_SETUP}`\n{}",
            python.display(),
            output
                .map(|o| String::from_utf8_lossy(&o.stderr).into_owned())
                .unwrap_or_default()
        );
    }
    python
}
