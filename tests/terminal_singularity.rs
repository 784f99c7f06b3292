//! The singularity backend for real, where apptainer or singularity is installed.
//! There is no package for either on the machines that run CI, so this test is
//! ignored there (and shown as such); run it with
//! `cargo test --test terminal_singularity -- --ignored`. The command lines it
//! builds are tested everywhere (tests/terminal_http_backends.rs).

use hermes_runtime::{Registry, ToolCall, ToolContext};
use serde_json::{json, Value};

mod common;
use common::{build_rootfs, which};

#[test]
#[ignore = "needs apptainer or singularity; run with --ignored where one is installed"]
fn singularity_runs_commands_in_a_sandbox_image() {
    let binary = which("apptainer").or_else(|| which("singularity")).expect("apptainer or singularity on PATH");
    let dir = tempfile::tempdir().unwrap();
    let rootfs = dir.path().join("rootfs");
    // A directory image ("sandbox") made of the host's bash and coreutils.
    build_rootfs(&rootfs, &["bash", "sleep", "cat", "rm", "ls", "mkdir", "env", "pwd"]);
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.yaml"),
        format!("terminal:\n  backend: singularity\n  singularity_binary: {binary}\n  singularity_image: {}\n", rootfs.display()),
    )
    .unwrap();
    let registry = Registry::with_home(&hermes_tools::CATALOG, home.path().to_path_buf());
    let ctx = ToolContext::builder().task_id("singularity-real").hermes_home(home.path()).build();
    let run = |command: &str| -> Value {
        let text = registry.handle_function_call(&ToolCall::new("terminal", json!({ "command": command })), &ctx);
        serde_json::from_str(&text).unwrap()
    };
    let first = run("echo inside && mkdir -p /tmp/work && cd /tmp/work && export MARK=kept");
    assert_eq!(first["exit_code"], 0, "{first}");
    assert_eq!(first["output"], "inside");
    let second = run("pwd; echo $MARK");
    assert_eq!(second["output"], "/tmp/work\nkept", "{second}");
    hermes_tools::tools::terminal::cleanup_task("singularity-real");
}
