//! `serve` starts itself once more with glibc's per-thread caches off
//! (`src/thread_caches.rs`), and the commands it runs see the caller's environment as
//! it was. Driven through the binary, read from `/proc`.

mod common;

use serde_json::{json, Value};

// GLIBC_TUNABLES reaches commands only when passed through, as any variable.
const CONFIG: &str =
    "terminal:\n  env_passthrough: [GLIBC_TUNABLES]\n  sandbox:\n    mode: workspace-write\n";

/// `serve` with GLIBC_TUNABLES as given (`None`: unset).
fn serve(f: &common::ServeFixture, tunables: Option<&str>) -> common::ServeSession {
    let mut command = f.command();
    command.env_remove("GLIBC_TUNABLES");
    if let Some(tunables) = tunables {
        command.env("GLIBC_TUNABLES", tunables);
    }
    common::ServeSession::spawn(command, json!({"task_id": "t1"}))
}

/// The environment the server's process image was started with (what the last exec
/// gave it, whatever it changed since).
fn started_with(server: &common::ServeSession, name: &str) -> Option<String> {
    let environ = std::fs::read(format!("/proc/{}/environ", server.pid())).unwrap();
    environ
        .split(|b| *b == 0)
        .filter_map(|entry| std::str::from_utf8(entry).ok())
        .find_map(|entry| entry.strip_prefix(&format!("{name}=")).map(str::to_string))
}

fn seen_by_a_command(server: &mut common::ServeSession) -> String {
    let r: Value = server.call(
        "terminal",
        json!({"command": "echo \"${GLIBC_TUNABLES-unset} ${HERMES_TOOLS_GLIBC_TUNABLES_BEFORE-unset}\""}),
    );
    assert_eq!(r["exit_code"], 0, "{r}");
    r["output"].as_str().unwrap().trim().to_string()
}

fn name_of(server: &common::ServeSession) -> String {
    std::fs::read_to_string(format!("/proc/{}/comm", server.pid()))
        .unwrap()
        .trim()
        .to_string()
}

#[test]
fn serve_runs_without_thread_caches_and_its_commands_see_no_trace_of_it() {
    let f = common::ServeFixture::new(CONFIG);
    let mut server = serve(&f, None);
    let output = seen_by_a_command(&mut server);
    // Started again, with nothing to put back.
    assert_eq!(
        started_with(&server, "HERMES_TOOLS_GLIBC_TUNABLES_BEFORE").as_deref(),
        Some("")
    );
    assert_eq!(
        started_with(&server, "GLIBC_TUNABLES").as_deref(),
        Some("glibc.malloc.tcache_count=0")
    );
    assert_eq!(output, "unset unset");
    assert_eq!(name_of(&server), "hermes-tools");
}

#[test]
fn the_callers_tunables_are_kept_and_handed_on_as_they_were() {
    let f = common::ServeFixture::new(CONFIG);
    let mut server = serve(&f, Some("glibc.malloc.perturb=0"));
    let output = seen_by_a_command(&mut server);
    // Started again with ours after the caller's (the dynamic loader rewrites the
    // variable it read in place, so what it was given is not shown whole).
    assert_eq!(
        started_with(&server, "HERMES_TOOLS_GLIBC_TUNABLES_BEFORE").as_deref(),
        Some("=glibc.malloc.perturb=0")
    );
    assert_eq!(output, "glibc.malloc.perturb=0 unset");
}

#[test]
fn a_caller_who_sizes_the_thread_caches_gets_that_size() {
    let f = common::ServeFixture::new(CONFIG);
    let mut server = serve(&f, Some("glibc.malloc.tcache_count=3"));
    let output = seen_by_a_command(&mut server);
    assert_eq!(
        started_with(&server, "GLIBC_TUNABLES").as_deref(),
        Some("glibc.malloc.tcache_count=3")
    );
    assert_eq!(
        started_with(&server, "HERMES_TOOLS_GLIBC_TUNABLES_BEFORE"),
        None
    );
    assert_eq!(output, "glibc.malloc.tcache_count=3 unset");
}
