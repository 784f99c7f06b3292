//! `serve` starts itself once more with glibc's allocator set to give back what idle
//! tasks freed (`src/allocator.rs`), and the commands it runs see the caller's
//! environment as it was. Driven through the binary, read from `/proc`.

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
/// gave it, whatever it changed since). The dynamic loader ends each tunable it read in
/// place, putting a NUL where a `:` was: what follows `GLIBC_TUNABLES` is joined back.
fn started_with(server: &common::ServeSession, name: &str) -> Option<String> {
    let environ = std::fs::read(format!("/proc/{}/environ", server.pid())).unwrap();
    let mut entries = environ
        .split(|b| *b == 0)
        .filter_map(|entry| std::str::from_utf8(entry).ok())
        .peekable();
    let prefix = format!("{name}=");
    while let Some(entry) = entries.next() {
        let Some(value) = entry.strip_prefix(&prefix) else {
            continue;
        };
        let mut value = value.to_string();
        while name == "GLIBC_TUNABLES" && entries.peek().is_some_and(|e| e.starts_with("glibc.")) {
            value.push(':');
            value.push_str(entries.next().unwrap());
        }
        return Some(value);
    }
    None
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

const OURS: &str = "glibc.malloc.tcache_count=0:glibc.malloc.mxfast=0:glibc.malloc.trim_threshold=32768:glibc.malloc.top_pad=32768";

#[test]
fn serve_runs_with_the_allocators_settings_and_its_commands_see_no_trace_of_them() {
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
        Some(OURS)
    );
    assert_eq!(output, "unset unset");
    assert_eq!(name_of(&server), "hermes-tools");
}

#[test]
fn the_callers_tunables_are_kept_and_handed_on_as_they_were() {
    let f = common::ServeFixture::new(CONFIG);
    let mut server = serve(&f, Some("glibc.malloc.perturb=0"));
    let output = seen_by_a_command(&mut server);
    // Started again with ours after the caller's.
    assert_eq!(
        started_with(&server, "GLIBC_TUNABLES"),
        Some(format!("glibc.malloc.perturb=0:{OURS}"))
    );
    assert_eq!(
        started_with(&server, "HERMES_TOOLS_GLIBC_TUNABLES_BEFORE").as_deref(),
        Some("=glibc.malloc.perturb=0")
    );
    assert_eq!(output, "glibc.malloc.perturb=0 unset");
}

#[test]
fn a_caller_who_sizes_the_thread_caches_gets_that_size_and_the_other_settings() {
    let f = common::ServeFixture::new(CONFIG);
    let mut server = serve(&f, Some("glibc.malloc.tcache_count=3"));
    let output = seen_by_a_command(&mut server);
    let others = OURS.strip_prefix("glibc.malloc.tcache_count=0:").unwrap();
    assert_eq!(
        started_with(&server, "GLIBC_TUNABLES"),
        Some(format!("glibc.malloc.tcache_count=3:{others}"))
    );
    assert_eq!(
        started_with(&server, "HERMES_TOOLS_GLIBC_TUNABLES_BEFORE").as_deref(),
        Some("=glibc.malloc.tcache_count=3")
    );
    assert_eq!(output, "glibc.malloc.tcache_count=3 unset");
}

#[test]
fn a_caller_who_sets_every_setting_is_not_started_again() {
    let f = common::ServeFixture::new(CONFIG);
    let theirs = "glibc.malloc.top_pad=0:glibc.malloc.tcache_count=2:glibc.malloc.mxfast=64:glibc.malloc.trim_threshold=0";
    let mut server = serve(&f, Some(theirs));
    let output = seen_by_a_command(&mut server);
    assert_eq!(
        started_with(&server, "GLIBC_TUNABLES").as_deref(),
        Some(theirs)
    );
    assert_eq!(
        started_with(&server, "HERMES_TOOLS_GLIBC_TUNABLES_BEFORE"),
        None
    );
    assert_eq!(output, format!("{theirs} unset"));
}
