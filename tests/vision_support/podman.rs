//! The `docker` backend through podman for the image tools' tests: an image made of the
//! host's shell tools (no registry is reachable), imported once per test binary, and
//! the config.yaml lines that run a task's commands in it. Needs `mod common;` in the
//! test binary (its `build_rootfs`).
#![allow(dead_code)]

use std::sync::OnceLock;
use tempfile::TempDir;

pub const IMAGE: &str = "localhost/hermes-image-tools-test:latest";

/// The folder holding `containers.conf` (podman needs `default_ulimits = []` here) and
/// podman's path; panics when podman is missing.
pub fn setup() -> &'static (TempDir, String) {
    static SETUP: OnceLock<(TempDir, String)> = OnceLock::new();
    SETUP.get_or_init(|| {
        let podman = crate::common::which("podman").unwrap_or_else(|| {
            panic!("podman was not found: run .ci/setup.d/20-terminal.sh (installs podman and runc) before this test")
        });
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("containers.conf"),
            "[containers]\ndefault_ulimits = []\n",
        )
        .unwrap();
        let rootfs = dir.path().join("rootfs");
        // What the file probes and commits of the environment use, and mkfifo.
        crate::common::build_rootfs(
            &rootfs,
            &[
                "bash", "cat", "rm", "head", "ls", "mkdir", "env", "realpath", "stat", "dirname",
                "tr", "base64", "mkfifo", "sleep", "sha256sum", "mv", "chmod", "flock",
            ],
        );
        let import = format!(
            "tar -C {r} -cf {d}/rootfs.tar . && CONTAINERS_CONF={d}/containers.conf {podman} import {d}/rootfs.tar {IMAGE} >/dev/null",
            r = rootfs.display(),
            d = dir.path().display(),
        );
        let out = std::process::Command::new("bash")
            .arg("-c")
            .arg(&import)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "building the test image failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        (dir, podman)
    })
}

/// `CONTAINERS_CONF` for the binary.
pub fn containers_conf() -> String {
    setup()
        .0
        .path()
        .join("containers.conf")
        .display()
        .to_string()
}

/// The `terminal:` section that runs tasks in the test image.
pub fn terminal_config() -> String {
    let podman = &setup().1;
    format!(
        "terminal:\n  backend: docker\n  docker_binary: {podman}\n  docker_global_args: [\"--runtime\", \"runc\"]\n  \
         docker_run_args: [\"--ulimit\", \"host\"]\n  docker_image: {IMAGE}\n"
    )
}

/// The names of the containers of `task` that still exist.
pub fn containers_of(task: &str) -> String {
    let out = std::process::Command::new(&setup().1)
        .args([
            "ps",
            "-a",
            "--filter",
            &format!("label=hermes-task={task}"),
            "--format",
            "{{.Names}}",
        ])
        .env("CONTAINERS_CONF", containers_conf())
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}
