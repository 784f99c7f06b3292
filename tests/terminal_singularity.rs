//! The singularity backend.
//!
//! There is no package for apptainer or singularity on the machines that run CI, so
//! `singularity_through_a_standin_cli` drives `hermes-tools serve` against a STAND-IN
//! for the `apptainer` CLI (tests/fakes/apptainer: it follows Apptainer's documented
//! `--cleanenv` / `APPTAINERENV_*` rules and runs commands with the host's bash in a
//! private mount namespace): it shows the command lines the backend builds, that the
//! container sees only the allow-listed environment and that a remote image is
//! converted once. `singularity_runs_commands_in_a_sandbox_image` runs the real CLI
//! where one is installed: `cargo test --test terminal_singularity -- --ignored`.

use hermes_runtime::{Registry, ToolCall, ToolContext};
use serde_json::{json, Value};

mod common;
mod sandbox_fakes;
use common::{build_rootfs, which};
use hermes_environments::env::singularity::{
    allowed_env, exec_args, start_args, stop_args, CONTAINER_PATH,
};
use sandbox_fakes::{fakes_dir, Serve};
mod file_tools_env;

impl file_tools_env::ToolCalls for Serve {
    fn call(&mut self, tool: &str, args: Value) -> Value {
        Serve::call(self, tool, args)
    }
}

#[test]
fn command_lines_clean_the_environment_and_overlay_a_tmpfs() {
    assert_eq!(
        start_args("/cache/img.sif", "hermes-0badc0de", 2.0, 4096),
        [
            "instance",
            "start",
            "--containall",
            "--no-home",
            "--cleanenv",
            "--writable-tmpfs",
            "--cpus",
            "2",
            "--memory",
            "4096M",
            "/cache/img.sif",
            "hermes-0badc0de"
        ]
    );
    assert_eq!(
        exec_args("hermes-0badc0de", "echo hi"),
        [
            "exec",
            "--cleanenv",
            "instance://hermes-0badc0de",
            "bash",
            "-c",
            "echo hi"
        ]
    );
    assert_eq!(
        stop_args("hermes-0badc0de"),
        ["instance", "stop", "hermes-0badc0de"]
    );
}

#[test]
fn only_the_allow_list_reaches_the_container() {
    let host = |name: &str| match name {
        "HOME" => Some("/home/u".to_string()),
        "LANG" => Some("C.UTF-8".to_string()),
        "PATH" => Some("/home/u/bin:/usr/bin".to_string()),
        "OPENAI_API_KEY" => Some("sk-secret".to_string()),
        "KEEP_ME" => Some("yes".to_string()),
        _ => None,
    };
    let env = allowed_env(
        &host,
        &[
            "KEEP_ME".to_string(),
            "NOT_SET".to_string(),
            "BAD NAME".to_string(),
        ],
    );
    assert_eq!(
        env,
        [
            ("PATH", CONTAINER_PATH),
            ("LANG", "C.UTF-8"),
            ("KEEP_ME", "yes")
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()))
    );
}

#[test]
fn singularity_through_a_standin_cli() {
    let state = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let standin = fakes_dir().join("apptainer");
    std::fs::write(
        home.path().join("config.yaml"),
        format!(
            "terminal:\n  backend: singularity\n  singularity_binary: {}\n  singularity_image: docker://debian:12-slim\n  env_passthrough: [KEEP_ME]\n",
            standin.display()
        ),
    )
    .unwrap();
    let state_dir = state.path().to_str().unwrap();
    let env = [
        ("APPTAINER_STANDIN_STATE", state_dir),
        ("HERMES_STANDIN_SECRET", "s3cret"),
        ("KEEP_ME", "kept"),
    ];
    for _ in 0..2 {
        let mut serve = Serve::start_in(home.path(), &env);
        let r = serve.terminal(
            json!({"command": "echo ${HERMES_STANDIN_SECRET:-unset} $KEEP_ME; echo $PATH"}),
        );
        assert_eq!(r["output"], format!("unset kept\n{CONTAINER_PATH}"), "{r}");
        let r =
            serve.terminal(json!({"command": "cd /tmp && mkdir -p w && cd w && export MARK=1"}));
        assert_eq!(r["exit_code"], 0, "{r}");
        let r = serve.terminal(json!({"command": "pwd; echo $MARK"}));
        assert_eq!(r["output"], "/tmp/w\n1", "{r}");
        serve.finish();
    }
    let calls = std::fs::read_to_string(state.path().join("calls.log")).unwrap();
    let sif = home
        .path()
        .join("cache/singularity/docker___debian_12-slim.sif");
    assert_eq!(
        calls.lines().filter(|l| l.starts_with("build ")).count(),
        1,
        "converted once:\n{calls}"
    );
    assert!(sif.is_file());
    let starts: Vec<&str> = calls
        .lines()
        .filter(|l| l.starts_with("instance start"))
        .collect();
    assert_eq!(starts.len(), 2, "{calls}");
    for start in starts {
        assert!(
            start.starts_with("instance start --containall --no-home --cleanenv --writable-tmpfs --cpus 1 --memory "),
            "{start}"
        );
        assert!(start.contains(&sif.display().to_string()), "{start}");
    }
    assert!(calls
        .lines()
        .filter(|l| l.starts_with("exec "))
        .all(|l| l.starts_with("exec --cleanenv instance://")));
    assert_eq!(
        calls
            .lines()
            .filter(|l| l.starts_with("instance stop"))
            .count(),
        2,
        "{calls}"
    );
}

#[test]
fn file_tools_work_in_the_container_of_the_standin_cli() {
    let state = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.yaml"),
        format!(
            "terminal:\n  backend: singularity\n  singularity_binary: {}\n  singularity_image: docker://debian:12-slim\n",
            fakes_dir().join("apptainer").display()
        ),
    )
    .unwrap();
    let mut serve = Serve::start_in(
        home.path(),
        &[("APPTAINER_STANDIN_STATE", state.path().to_str().unwrap())],
    );
    // The server runs in this crate's directory, where none of the files may appear.
    file_tools_env::exercise(
        &mut serve,
        "/tmp/files-work",
        &std::env::current_dir().unwrap(),
    );
    // `--cleanenv` leaves no HOME there: `~` is the account's home directory.
    let r = serve.terminal(json!({"command": "echo ${HOME-unset}"}));
    assert_eq!(r["output"], "unset", "{r}");
    let r = serve.call(
        "write_file",
        json!({"path": "~/in-home.txt", "content": "home\n"}),
    );
    assert_eq!(r["verified"], true, "{r}");
    let r = serve.terminal(json!({"command": "cat /root/in-home.txt"}));
    assert_eq!(r["output"], "home", "{r}");
    serve.finish();
    let calls = std::fs::read_to_string(state.path().join("calls.log")).unwrap();
    assert!(calls
        .lines()
        .filter(|l| l.starts_with("exec "))
        .all(|l| l.starts_with("exec --cleanenv instance://")));
}

#[test]
#[ignore = "needs apptainer or singularity; run with --ignored where one is installed"]
fn singularity_runs_commands_in_a_sandbox_image() {
    let binary = which("apptainer")
        .or_else(|| which("singularity"))
        .expect("apptainer or singularity on PATH");
    let dir = tempfile::tempdir().unwrap();
    let rootfs = dir.path().join("rootfs");
    // A directory image ("sandbox") made of the host's bash and coreutils.
    build_rootfs(
        &rootfs,
        &["bash", "sleep", "cat", "rm", "ls", "mkdir", "env", "pwd"],
    );
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.yaml"),
        format!("terminal:\n  backend: singularity\n  singularity_binary: {binary}\n  singularity_image: {}\n", rootfs.display()),
    )
    .unwrap();
    let registry = Registry::with_home(&hermes_tools::CATALOG, home.path().to_path_buf());
    let ctx = ToolContext::builder()
        .task_id("singularity-real")
        .hermes_home(home.path())
        .build();
    let run = |command: &str| -> Value {
        let text = registry.handle_function_call(
            &ToolCall::new("terminal", json!({ "command": command })),
            &ctx,
        );
        serde_json::from_str(&text).unwrap()
    };
    let first = run("echo inside && mkdir -p /tmp/work && cd /tmp/work && export MARK=kept");
    assert_eq!(first["exit_code"], 0, "{first}");
    assert_eq!(first["output"], "inside");
    let second = run("pwd; echo $MARK");
    assert_eq!(second["output"], "/tmp/work\nkept", "{second}");
    hermes_tools::tools::terminal::cleanup_task("singularity-real");
}
