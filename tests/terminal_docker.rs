//! The `docker` backend, for real, through podman (no Docker engine on these machines):
//! `podman --runtime runc ... run --ulimit host`, with `CONTAINERS_CONF` naming a file
//! that sets `default_ulimits = []`. No registry is reachable, so the image is imported
//! from a tarball built here out of the host's bash, coreutils and their libraries.
//! `.ci/setup.d/20-terminal.sh` installs podman and runc; without them this test FAILS.

use hermes_runtime::{Registry, ToolCall, ToolContext};
use hermes_tools::tools::terminal;
use serde_json::{json, Value};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use tempfile::TempDir;

const IMAGE: &str = "localhost/hermes-terminal-test:latest";

mod common;
use common::{build_rootfs, which};
mod file_tools_env;

/// The containers.conf podman needs here, and the imported image (built once).
fn podman_setup() -> &'static (TempDir, String) {
    static SETUP: OnceLock<(TempDir, String)> = OnceLock::new();
    SETUP.get_or_init(|| {
        let podman = which("podman").unwrap_or_else(|| {
            panic!("podman was not found: run .ci/setup.d/20-terminal.sh (installs podman and runc) before this test")
        });
        assert!(which("runc").is_some() || Path::new("/usr/sbin/runc").exists(), "runc missing: run .ci/setup.d/20-terminal.sh");
        let dir = TempDir::new().unwrap();
        let conf = dir.path().join("containers.conf");
        std::fs::write(&conf, "[containers]\ndefault_ulimits = []\n").unwrap();
        // Every podman started from this process (the backend's too) reads it.
        std::env::set_var("CONTAINERS_CONF", &conf);
        let rootfs = dir.path().join("rootfs");
        // Beyond the shell's basics, what the file tools' scripts use there.
        build_rootfs(
            &rootfs,
            &[
                "bash", "sleep", "cat", "rm", "head", "ls", "mkdir", "env", "realpath", "stat", "dirname", "tr", "base64",
                "sha256sum", "mv", "chmod", "grep", "find", "flock",
            ],
        );
        let import = format!(
            "tar -C {r} -cf {d}/rootfs.tar . && {podman} import {d}/rootfs.tar {IMAGE} >/dev/null",
            r = rootfs.display(),
            d = dir.path().display(),
        );
        let out = Command::new("bash").arg("-c").arg(&import).stdin(Stdio::null()).output().unwrap();
        assert!(out.status.success(), "building the test image failed: {}", String::from_utf8_lossy(&out.stderr));
        (dir, podman)
    })
}

/// A Hermes home whose config.yaml runs the terminal in the test image.
fn docker_home(extra: &str) -> TempDir {
    let (_, podman) = podman_setup();
    let home = TempDir::new().unwrap();
    std::fs::write(
        home.path().join("config.yaml"),
        format!(
            "terminal:\n  backend: docker\n  docker_binary: {podman}\n  docker_global_args: [\"--runtime\", \"runc\"]\n  \
             docker_run_args: [\"--ulimit\", \"host\"]\n  docker_image: {IMAGE}\n  container_memory: 512\n{extra}"
        ),
    )
    .unwrap();
    home
}

fn client(task: &str, extra: &str) -> (ToolContext, Registry, TempDir, String) {
    let home = docker_home(extra);
    let task = format!("{task}-{}", std::process::id());
    let ctx = ToolContext::builder()
        .task_id(&task)
        .hermes_home(home.path())
        .build();
    let registry = Registry::with_home(&hermes_tools::CATALOG, home.path().to_path_buf());
    (ctx, registry, home, task)
}

fn call(registry: &Registry, ctx: &ToolContext, tool: &str, args: Value) -> Value {
    let raw = registry.handle_function_call(&ToolCall::new(tool, args), ctx);
    serde_json::from_str(&raw).unwrap_or_else(|e| panic!("not JSON ({e}): {raw}"))
}

fn containers_named(podman: &str, label: &str) -> Vec<String> {
    let out = Command::new(podman)
        .args([
            "ps",
            "-a",
            "--filter",
            &format!("label={label}"),
            "--format",
            "{{.Names}}",
        ])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

fn inspect(podman: &str, name: &str, format: &str) -> String {
    let out = Command::new(podman)
        .args(["inspect", "-f", format, name])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn docker_backend_through_podman() {
    let (_, podman) = podman_setup();
    let volume = TempDir::new().unwrap();
    std::fs::write(volume.path().join("from-host.txt"), "hello from the host\n").unwrap();
    std::env::set_var("HERMES_DOCKER_TEST_FWD", "forwarded-value");
    let extra = format!(
        "  docker_volumes: [\"{}:/data\"]\n  docker_forward_env: [HERMES_DOCKER_TEST_FWD]\n",
        volume.path().display()
    );
    let (ctx, registry, _home, task) = client("terminal-docker", &extra);
    let task_label = format!("hermes-task={task}");

    let r = call(
        &registry,
        &ctx,
        "terminal",
        json!({"command": "echo in-container; cat /data/from-host.txt; echo $HERMES_DOCKER_TEST_FWD"}),
    );
    assert_eq!(
        r["output"], "in-container\nhello from the host\nforwarded-value",
        "{r}"
    );
    assert_eq!(r["exit_code"], 0);
    assert_eq!(r["cwd"], "/root");

    // One labelled container for the task, with the limits applied.
    let names = containers_named(podman, &task_label);
    assert_eq!(names.len(), 1, "{names:?}");
    let name = &names[0];
    assert!(name.starts_with("hermes-") && name.len() == 15, "{name}");
    assert_eq!(
        inspect(podman, name, "{{index .Config.Labels \"hermes-agent\"}}"),
        "1"
    );
    assert_eq!(inspect(podman, name, "{{.HostConfig.PidsLimit}}"), "256");
    assert_eq!(
        inspect(podman, name, "{{.HostConfig.Memory}}"),
        (512u64 * 1024 * 1024).to_string()
    );
    // --cap-drop ALL: nothing effective; no-new-privileges set.
    assert_eq!(inspect(podman, name, "{{.EffectiveCaps}}"), "[]");
    assert!(inspect(podman, name, "{{.HostConfig.CapDrop}}").contains("CAP_CHOWN"));
    assert_eq!(
        inspect(podman, name, "{{.HostConfig.SecurityOpt}}"),
        "[no-new-privileges]"
    );
    let r = call(
        &registry,
        &ctx,
        "terminal",
        json!({"command": "cd /tmp && export INSIDE=7; exit 4"}),
    );
    assert_eq!(r["exit_code"], 4);
    let r = call(
        &registry,
        &ctx,
        "terminal",
        json!({"command": "cd /tmp && export INSIDE=7"}),
    );
    assert_eq!(r["cwd"], "/tmp");
    let r = call(
        &registry,
        &ctx,
        "terminal",
        json!({"command": "pwd; echo $INSIDE"}),
    );
    assert_eq!(r["output"], "/tmp\n7");

    // Timeout inside the container kills the process there.
    let r = call(
        &registry,
        &ctx,
        "terminal",
        json!({"command": "sleep 4721", "timeout": 2}),
    );
    assert_eq!(r["exit_code"], 124, "{r}");
    let r = call(
        &registry,
        &ctx,
        "terminal",
        json!({"command": "for p in /proc/[0-9]*; do cat $p/cmdline 2>/dev/null; echo; done"}),
    );
    assert!(!r["output"].as_str().unwrap().contains("sleep4721"), "{r}");

    // Cleanup removes the container.
    terminal::cleanup_task(ctx.task_id());
    assert!(containers_named(podman, &task_label).is_empty());
}

/// A home shared into the container shows the files of the deny-read list empty or
/// not at all (its `~/.ssh`, a `.netrc`), the rest as it is; a volume that is itself a
/// denied place is refused. Through the binary, as an operator's config does it.
#[test]
fn shared_host_folders_keep_the_deny_read_list() {
    let _ = podman_setup();
    let shared_home = TempDir::new().unwrap();
    std::fs::create_dir_all(shared_home.path().join(".ssh")).unwrap();
    std::fs::write(shared_home.path().join(".ssh/id_ed25519"), "PRIVATE KEY\n").unwrap();
    std::fs::write(
        shared_home.path().join(".netrc"),
        "machine x password SECRET\n",
    )
    .unwrap();
    std::fs::write(shared_home.path().join("notes.txt"), "plain notes\n").unwrap();
    let run = |volumes: &str, command: &str| -> Value {
        let home = docker_home(&format!("  docker_volumes: [{volumes}]\n"));
        let out = Command::new(env!("CARGO_BIN_EXE_hermes-tools"))
            .args(["call", "terminal", &json!({"command": command}).to_string()])
            .env("HERMES_HOME", home.path())
            .env("HOME", shared_home.path())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let shared = format!("\"{}:/home/me\"", shared_home.path().display());
    let r = run(
        &shared,
        "cat /home/me/notes.txt; echo \"[$(ls -A /home/me/.ssh)]\"; test -s /home/me/.netrc || echo empty; \
         cat /home/me/.ssh/id_ed25519 /home/me/.netrc 2>&1; touch /home/me/.ssh/planted 2>/dev/null; \
         test -e /home/me/.ssh/planted && echo planted || echo refused",
    );
    let output = r["output"].as_str().unwrap();
    assert!(output.starts_with("plain notes\n[]\nempty\n"), "{r}");
    assert!(
        !output.contains("PRIVATE") && !output.contains("SECRET"),
        "{r}"
    );
    assert!(output.ends_with("refused"), "{r}");
    assert!(!shared_home.path().join(".ssh/planted").exists());
    // Sharing the secret itself starts no container.
    let r = run(
        &format!("\"{}/.ssh:/keys\"", shared_home.path().display()),
        "cat /keys/id_ed25519",
    );
    assert!(!r.to_string().contains("PRIVATE"), "{r}");
    assert!(r.to_string().contains("deny-read list"), "{r}");
}

#[test]
fn file_tools_work_inside_the_container() {
    let home = docker_home("");
    let host_cwd = TempDir::new().unwrap();
    let task = format!("files-docker-{}", std::process::id());
    let mut session = file_tools_env::Session::start(home.path(), host_cwd.path(), &task);
    let dir = format!("/root/hermes-files-{}", std::process::id());
    file_tools_env::exercise(&mut session, &dir, host_cwd.path());
    session.finish();
    assert!(!Path::new(&dir).exists(), "{dir} appeared on this machine");
    let (_, podman) = podman_setup();
    assert!(
        containers_named(podman, &format!("hermes-task={task}")).is_empty(),
        "the container outlived the server"
    );
}

#[test]
fn lost_container_is_recreated() {
    let (_, podman) = podman_setup();
    let (ctx, registry, _home, task) = client("terminal-docker-lost", "");
    let r = call(
        &registry,
        &ctx,
        "terminal",
        json!({"command": "echo first"}),
    );
    assert_eq!(r["output"], "first", "{r}");
    let name = containers_named(podman, &format!("hermes-task={task}"))
        .pop()
        .unwrap();
    let _ = Command::new(podman).args(["kill", &name]).output();
    let _ = Command::new(podman).args(["rm", "-f", &name]).output();
    let r = call(
        &registry,
        &ctx,
        "terminal",
        json!({"command": "echo second"}),
    );
    assert_eq!(r["output"], "second", "{r}");
    assert_eq!(r["environment_recreated"], true);
    terminal::cleanup_task(&task);
    assert!(containers_named(podman, &format!("hermes-task={task}")).is_empty());
}

#[test]
fn bad_volume_json_names_the_variable() {
    let home = TempDir::new().unwrap();
    std::fs::write(
        home.path().join("config.yaml"),
        "terminal:\n  backend: docker\n  docker_volumes: 3\n",
    )
    .unwrap();
    let problem = terminal::availability_problem(home.path()).unwrap();
    assert!(problem.contains("docker_volumes"), "{problem}");
}

#[test]
fn command_construction() {
    use hermes_environments::env::docker::{exec_args, run_args};
    let args = run_args(
        "hermes-abcd1234",
        "img:1",
        1.5,
        2048,
        &["/h:/c:ro".to_string()],
        "t1",
        &["--ulimit".into(), "host".into()],
    );
    assert_eq!(
        args.join(" "),
        "run -d --name hermes-abcd1234 --label hermes-agent=1 --label hermes-task=t1 --cap-drop ALL \
         --security-opt no-new-privileges --pids-limit 256 --cpus 1.5 --memory 2048m -v /h:/c:ro --ulimit host \
         img:1 sleep infinity"
    );
    std::env::set_var("HERMES_FWD_PRESENT", "secret-value");
    let args = exec_args(
        "cid",
        &["HERMES_FWD_PRESENT".into(), "HERMES_FWD_ABSENT".into()],
        false,
        "echo hi",
    );
    assert_eq!(
        args,
        [
            "exec",
            "-e",
            "HERMES_FWD_PRESENT",
            "cid",
            "bash",
            "-c",
            "echo hi"
        ]
    );
    assert!(!args.iter().any(|a| a.contains("secret-value")));
}
