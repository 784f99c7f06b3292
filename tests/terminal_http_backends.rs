//! `modal`, `daytona` and `vercel_sandbox` against local stand-ins.
//!
//! modal: through `hermes-tools serve` and the SDK bridge (environments/src/env/modal_bridge.py)
//! with a STAND-IN `modal` module first on the bridge's PYTHONPATH
//! (tests/fakes/modal_standin: the SDK's public synchronous API with its published
//! signatures; Modal's service cannot be reached from here). The on-demand install into
//! `$HERMES_HOME/modal/venv` runs for real (`python3 -m venv`, `pip install`) against a
//! local wheel of that stand-in built by the test, with pip kept off every index and
//! cache. `live_modal` uses the real
//! SDK and service when `MODAL_TOKEN_ID` is set (ignored otherwise).
//!
//! daytona: end to end through `hermes-tools serve`, against tests/fakes/daytona_api.py
//! (the real service cannot be reached from here). The fake is written from Daytona's
//! published API definition and is strict; Daytona's own Python SDK runs against the same
//! fake in `the_official_daytona_sdk_passes_the_fake`, so a fake that drifts from the
//! real API fails there. `live_daytona` runs against the real service when
//! `DAYTONA_API_KEY` is set (ignored otherwise).
//!
//! vercel_sandbox: the same way against tests/fakes/vercel_api.py, written from the API
//! as Vercel's official SDK (npm `@vercel/sandbox`) defines it; that SDK runs against the
//! same fake in `the_official_vercel_sdk_passes_the_fake`. `live_vercel_sandbox` runs
//! against the real service when `VERCEL_TOKEN` (with team and project) or
//! `VERCEL_OIDC_TOKEN` is set (ignored otherwise).
//!
//! The fakes run each command with the local shell in a private mount namespace of its
//! own (their /tmp and /root are temp dirs), so the whole path (wrapping, shell state,
//! output handling, killing) is exercised without touching the host.

use serde_json::{json, Value};
use tempfile::TempDir;

mod sandbox_fakes;
use sandbox_fakes::{Fake, Serve};
mod file_tools_env;

impl file_tools_env::ToolCalls for Serve {
    fn call(&mut self, tool: &str, args: Value) -> Value {
        Serve::call(self, tool, args)
    }
}

/// The file tools' scenario in the sandbox; the server runs in this crate's directory,
/// where none of its files may appear.
fn exercise_file_tools(serve: &mut Serve) {
    file_tools_env::exercise(serve, "/tmp/files-work", &std::env::current_dir().unwrap());
}

/// The common checks: output and exit code, cwd and export persistence, no background
/// processes, a timeout that kills the command in the sandbox.
fn exercise(serve: &mut Serve) {
    let r = serve.terminal(json!({"command": "echo hello; echo oops >&2; exit 5"}));
    assert_eq!(r["output"], "hello\noops", "{r}");
    assert_eq!(r["exit_code"], 5);
    let r = serve
        .terminal(json!({"command": "mkdir -p /tmp/work && cd /tmp/work && export VIA_API=yes"}));
    assert_eq!(r["cwd"], "/tmp/work", "{r}");
    let r = serve.terminal(json!({"command": "pwd; echo $VIA_API"}));
    assert_eq!(r["output"], "/tmp/work\nyes", "{r}");
    let r = serve.terminal(json!({"command": "sleep 1", "background": true}));
    assert_eq!(r["status"], "error");
    assert!(
        r["error"].as_str().unwrap().contains("not supported"),
        "{r}"
    );
    sandbox_fakes::assert_timeout_kills_the_remote_command(serve);
}

// ------------------------------------------------------------------ daytona

fn daytona_config(fake: &Fake, key: &str, extra: &str) -> String {
    format!(
        "terminal:\n  backend: daytona\n  daytona_api_url: {}/api\n  daytona_api_key: {key}\n  daytona_image: img:9\n{extra}",
        fake.url
    )
}

#[test]
fn daytona_runs_commands_in_a_sandbox_and_deletes_it() {
    let fake = Fake::start("daytona_api.py", &["dtn-test-key"]);
    let mut serve = Serve::start(&daytona_config(&fake, "dtn-test-key", ""));
    exercise(&mut serve);

    let sandboxes = fake.sandboxes();
    assert_eq!(sandboxes.len(), 1, "{sandboxes:?}");
    let create = &sandboxes[0]["create"];
    assert_eq!(create["buildInfo"]["dockerfileContent"], "FROM img:9\n");
    assert!(
        create.get("image").is_none() && create.get("snapshot").is_none(),
        "{create}"
    );
    // The default disk setting (50 GB) is clamped to the default per-sandbox limit.
    assert_eq!(create["disk"], 10);
    assert_eq!(create["cpu"], 1);
    assert!(create["labels"]["hermes-task"]
        .as_str()
        .unwrap()
        .starts_with("hermes-"));
    let executes: Vec<Value> = fake
        .requests()
        .into_iter()
        .filter(|r| r["path"].as_str().unwrap().ends_with("/process/execute"))
        .collect();
    let first: Value = serde_json::from_str(executes[0]["body"].as_str().unwrap()).unwrap();
    assert!(
        first["timeout"].as_u64().unwrap() > 0,
        "a real server-side timeout: {first}"
    );
    assert!(
        executes
            .iter()
            .all(|r| r["path"].as_str().unwrap().starts_with("/toolbox/")),
        "{executes:?}"
    );

    serve.finish();
    let sandboxes = fake.sandboxes();
    assert_eq!(
        sandboxes[0]["state"], "destroyed",
        "the sandbox is deleted at exit: {sandboxes:?}"
    );
}

#[test]
fn daytona_from_a_snapshot_sends_no_resources() {
    let fake = Fake::start("daytona_api.py", &["dtn-key-2"]);
    let mut serve = Serve::start(&daytona_config(
        &fake,
        "dtn-key-2",
        "  daytona_snapshot: daytona-small\n",
    ));
    let r = serve.terminal(json!({"command": "echo from-snapshot"}));
    assert_eq!(r["output"], "from-snapshot", "{r}");
    serve.finish();
    let sandboxes = fake.sandboxes();
    let create = &sandboxes[0]["create"];
    assert_eq!(create["snapshot"], "daytona-small");
    for field in ["cpu", "memory", "disk", "buildInfo"] {
        assert!(
            create.get(field).is_none(),
            "{field} sent with a snapshot: {create}"
        );
    }
    assert_eq!(sandboxes[0]["state"], "destroyed");
}

#[test]
fn daytona_refused_credentials_are_degraded_with_a_hint() {
    let fake = Fake::start("daytona_api.py", &["the-right-key"]);
    let mut serve = Serve::start(&daytona_config(&fake, "wrong", ""));
    let r = serve.terminal(json!({"command": "echo x"}));
    sandbox_fakes::assert_refused_credentials(&r, "HTTP 401");
    serve.finish();
}

#[test]
fn the_official_daytona_sdk_passes_the_fake() {
    let fake = Fake::start("daytona_api.py", &["sdk-key"]);
    let python = hermes_test_peers::python_with(&["daytona", "daytona_api_client"]);
    let out = std::process::Command::new(python)
        .arg(sandbox_fakes::fakes_dir().join("daytona_sdk_check.py"))
        .args([format!("{}/api", fake.url), "sdk-key".to_string()])
        // The SDK's event stream (socket.io) has no stand-in; it falls back to polling.
        .env("DAYTONA_USE_DEPRECATED_POLLING", "true")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("sdk ok"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
#[ignore = "talks to the real Daytona service: set DAYTONA_API_KEY and run with --ignored"]
fn live_daytona() {
    let key = std::env::var("DAYTONA_API_KEY").expect("DAYTONA_API_KEY");
    sandbox_fakes::live_round(Serve::start(&format!(
        "terminal:\n  backend: daytona\n  daytona_api_key: {key}\n  daytona_image: debian:12-slim\n"
    )));
}

// ------------------------------------------------------------------ modal

fn modal_config(python: &str, extra: &str) -> String {
    format!("terminal:\n  backend: modal\n  modal_python: {python}\n  modal_image: python:3.11-slim\n{extra}")
}

/// A server on the modal backend with the stand-in SDK, which logs its calls into `state`.
fn modal_serve(state: &TempDir) -> Serve {
    let python = hermes_test_peers::python_with(&[]);
    let standin = sandbox_fakes::fakes_dir().join("modal_standin");
    Serve::start_with_env(
        &modal_config(
            python.to_str().unwrap(),
            "  modal_token_id: ak-1\n  modal_token_secret: as-2\n",
        ),
        &[
            ("PYTHONPATH", standin.to_str().unwrap()),
            ("MODAL_STANDIN_STATE", state.path().to_str().unwrap()),
        ],
    )
}

#[test]
fn modal_runs_commands_through_the_sdk_bridge() {
    let state = TempDir::new().unwrap();
    let mut serve = modal_serve(&state);
    exercise(&mut serve);
    serve.finish();

    let calls: Vec<Value> = std::fs::read_to_string(state.path().join("calls.log"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let names: Vec<&str> = calls.iter().map(|c| c["call"].as_str().unwrap()).collect();
    assert_eq!(
        &names[..3],
        ["App.lookup", "Image.from_registry", "Sandbox.create"],
        "{names:?}"
    );
    assert_eq!(calls[0]["name"], "hermes-agent");
    assert_eq!(calls[0]["create_if_missing"], true);
    assert_eq!(calls[1]["tag"], "python:3.11-slim");
    assert_eq!(calls[2]["timeout"], 3600);
    assert_eq!(
        names.last(),
        Some(&"Sandbox.terminate"),
        "the sandbox is terminated at exit: {names:?}"
    );
    let exec = calls.iter().find(|c| c["call"] == "Sandbox.exec").unwrap();
    assert_eq!(exec["argv"][0], "bash");
    assert!(exec["timeout"].as_u64().unwrap() > 0, "{exec}");
}

#[test]
fn modal_availability_names_what_is_missing() {
    let empty_home = TempDir::new().unwrap();
    let home = empty_home.path().to_str().unwrap();
    let mut serve = Serve::start_with_env(
        &modal_config("/nonexistent/python3", ""),
        &[("HOME", home), ("MODAL_TOKEN_ID", "")],
    );
    let r = serve.terminal(json!({"command": "true"}));
    assert_eq!(r["status"], "disabled", "{r}");
    let error = r["error"].as_str().unwrap();
    assert!(
        error.contains("TERMINAL_MODAL_PYTHON /nonexistent/python3 does not exist"),
        "{error}"
    );
    assert!(
        error.contains("MODAL_TOKEN_ID and MODAL_TOKEN_SECRET"),
        "{error}"
    );
    assert!(error.contains(&format!("{home}/.modal.toml")), "{error}");
    serve.finish();

    // A ~/.modal.toml is enough for the credentials.
    std::fs::write(
        empty_home.path().join(".modal.toml"),
        "[default]\ntoken_id = \"ak\"\ntoken_secret = \"as\"\n",
    )
    .unwrap();
    let mut serve =
        Serve::start_with_env(&modal_config("/nonexistent/python3", ""), &[("HOME", home)]);
    let r = serve.terminal(json!({"command": "true"}));
    let error = r["error"].as_str().unwrap();
    assert!(!error.contains("MODAL_TOKEN_ID"), "{error}");
    serve.finish();
}

/// A wheel of the stand-in SDK (`modal` 1.0.0, with the fakes' `strict` helper it
/// imports) in `dir`, built here: pip installs it from `dir` as from an index.
fn standin_modal_wheel(dir: &std::path::Path) {
    let script = r#"
import base64, hashlib, os, sys, zipfile
fakes, out = sys.argv[1], sys.argv[2]
info = "modal-1.0.0.dist-info"
records = []
with zipfile.ZipFile(os.path.join(out, "modal-1.0.0-py3-none-any.whl"), "w") as wheel:
    def add(name, data):
        wheel.writestr(name, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        records.append(f"{name},sha256={digest},{len(data)}")
    package = os.path.join(fakes, "modal_standin", "modal")
    for name in sorted(os.listdir(package)):
        if name.endswith(".py"):
            add(f"modal/{name}", open(os.path.join(package, name), "rb").read())
    add("strict.py", open(os.path.join(fakes, "strict.py"), "rb").read())
    add(f"{info}/METADATA", b"Metadata-Version: 2.1\nName: modal\nVersion: 1.0.0\n")
    add(f"{info}/WHEEL", b"Wheel-Version: 1.0\nGenerator: hermes-tools tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
    records.append(f"{info}/RECORD,,")
    wheel.writestr(f"{info}/RECORD", "\n".join(records) + "\n")
"#;
    let out = std::process::Command::new("python3")
        .args(["-c", script])
        .arg(sandbox_fakes::fakes_dir())
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "building the stand-in wheel failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// pip with no index but `links` (a directory of wheels), no cache and no user config,
/// so nothing outside the test's directories is read or written.
fn offline_pip(links: &std::path::Path, scratch: &std::path::Path) -> Vec<(String, String)> {
    let conf = scratch.join("pip.conf");
    std::fs::write(&conf, "").unwrap();
    vec![
        ("PIP_NO_INDEX".into(), "1".into()),
        ("PIP_FIND_LINKS".into(), links.display().to_string()),
        ("PIP_NO_CACHE_DIR".into(), "1".into()),
        ("PIP_CONFIG_FILE".into(), conf.display().to_string()),
    ]
}

#[test]
fn modal_installs_its_package_into_a_venv_on_first_use() {
    // The SDK comes from a local wheel of the STAND-IN module (PyPI's `modal` would need
    // Modal's service); the install path is the real one: `python3 -m venv` under
    // $HERMES_HOME/modal, then `pip install 'modal>=1,<2'`.
    let scratch = TempDir::new().unwrap();
    let links = scratch.path().join("wheels");
    std::fs::create_dir(&links).unwrap();
    standin_modal_wheel(&links);
    let state = TempDir::new().unwrap();
    let home = TempDir::new().unwrap();
    std::fs::write(
        home.path().join("config.yaml"),
        "terminal:\n  backend: modal\n  modal_token_id: ak-1\n  modal_token_secret: as-2\n",
    )
    .unwrap();
    let mut env = offline_pip(&links, scratch.path());
    env.push((
        "MODAL_STANDIN_STATE".into(),
        state.path().display().to_string(),
    ));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut serve = Serve::start_in(home.path(), &env);
    let r = serve.terminal(json!({"command": "echo through-the-installed-sdk"}));
    assert_eq!(r["output"], "through-the-installed-sdk", "{r}");
    serve.finish();
    let venv = home.path().join("modal/venv");
    let installed: Vec<_> = std::fs::read_dir(venv.join("lib"))
        .unwrap()
        .flatten()
        .filter(|e| e.path().join("site-packages/modal/__init__.py").is_file())
        .collect();
    assert_eq!(installed.len(), 1, "modal is in the venv's site-packages");
    let calls = std::fs::read_to_string(state.path().join("calls.log")).unwrap();
    assert!(calls.contains("\"Sandbox.create\""), "{calls}");

    // Installed once: the next server uses the venv as it is, with no index at all.
    let mut serve = Serve::start_in(
        home.path(),
        &[
            ("MODAL_STANDIN_STATE", state.path().to_str().unwrap()),
            ("PIP_NO_INDEX", "1"),
        ],
    );
    let r = serve.terminal(json!({"command": "echo again"}));
    assert_eq!(r["output"], "again", "{r}");
    serve.finish();
}

#[test]
fn modal_says_what_is_missing_when_it_cannot_install() {
    let scratch = TempDir::new().unwrap();
    let links = scratch.path().join("no-wheels");
    std::fs::create_dir(&links).unwrap();
    let config =
        "terminal:\n  backend: modal\n  modal_token_id: ak-1\n  modal_token_secret: as-2\n";

    // No package to be had: pip's own reason, the venv it was for, what to do.
    let home = TempDir::new().unwrap();
    std::fs::write(home.path().join("config.yaml"), config).unwrap();
    let env = offline_pip(&links, scratch.path());
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut serve = Serve::start_in(home.path(), &env);
    let r = serve.terminal(json!({"command": "true"}));
    assert_eq!(r["status"], "degraded", "{r}");
    let venv = home.path().join("modal/venv");
    let reason = r["reason"].as_str().unwrap();
    assert!(
        reason.starts_with(&format!(
            "pip install 'modal>=1,<2' into {} failed: ",
            venv.display()
        )),
        "{reason}"
    );
    assert!(
        reason.contains("No matching distribution found for modal"),
        "{reason}"
    );
    assert_eq!(
        r["retry_hint"], "install the package by hand into that venv, or set TERMINAL_MODAL_PYTHON",
        "{r}"
    );
    serve.finish();

    // No python3 to make the venv with: the availability check says so before anything runs.
    let home = TempDir::new().unwrap();
    std::fs::write(home.path().join("config.yaml"), config).unwrap();
    let empty_path = scratch.path().join("empty-path");
    std::fs::create_dir(&empty_path).unwrap();
    let mut serve = Serve::start_in(home.path(), &[("PATH", empty_path.to_str().unwrap())]);
    let r = serve.terminal(json!({"command": "true"}));
    assert_eq!(r["status"], "disabled", "{r}");
    assert_eq!(
        r["error"],
        format!(
            "the modal terminal backend is not available: missing the modal Python package: it is installed into {} \
             on first use, but python3 was not found on PATH (or set TERMINAL_MODAL_PYTHON to an interpreter that has \
             `modal`)",
            home.path().join("modal/venv").display()
        ),
        "{r}"
    );
    serve.finish();
}

#[test]
fn modal_refused_credentials_come_back_with_a_hint() {
    let state = TempDir::new().unwrap();
    let python = hermes_test_peers::python_with(&[]);
    let standin = sandbox_fakes::fakes_dir().join("modal_standin");
    let mut serve = Serve::start_with_env(
        &modal_config(
            python.to_str().unwrap(),
            "  modal_token_id: ak-wrong\n  modal_token_secret: as-2\n",
        ),
        &[
            ("PYTHONPATH", standin.to_str().unwrap()),
            ("MODAL_STANDIN_STATE", state.path().to_str().unwrap()),
            ("MODAL_STANDIN_ACCEPTED_TOKEN_ID", "ak-1"),
        ],
    );
    let r = serve.terminal(json!({"command": "true"}));
    sandbox_fakes::assert_refused_credentials(&r, "AuthError");
    serve.finish();
}

#[test]
#[ignore = "talks to the real Modal service (and installs the modal package into the Hermes home): set MODAL_TOKEN_ID and MODAL_TOKEN_SECRET and run with --ignored"]
fn live_modal() {
    std::env::var("MODAL_TOKEN_ID").expect("MODAL_TOKEN_ID");
    sandbox_fakes::live_round(Serve::start(
        "terminal:\n  backend: modal\n  modal_image: python:3.11-slim\n",
    ));
}

// ------------------------------------------------------------------ vercel_sandbox

fn vercel_config(fake: &Fake, credentials: &str) -> String {
    format!(
        "terminal:\n  backend: vercel_sandbox\n  vercel_api_url: {}/api\n  vercel_runtime: python3.13\n  cwd: /tmp\n{credentials}",
        fake.url
    )
}

#[test]
fn vercel_sandbox_runs_commands_and_stops_the_sandbox() {
    let fake = Fake::start("vercel_api.py", &["vt-test", "team_7"]);
    let mut serve = Serve::start(&vercel_config(
        &fake,
        "  vercel_token: vt-test\n  vercel_team_id: team_7\n  vercel_project_id: prj_1\n",
    ));
    exercise(&mut serve);
    serve.finish();
    let sandboxes = fake.sandboxes();
    assert_eq!(sandboxes.len(), 1, "{sandboxes:?}");
    assert_eq!(
        sandboxes[0]["status"], "stopped",
        "stopped at exit: {sandboxes:?}"
    );
    let create = &sandboxes[0]["create"];
    assert_eq!(create["projectId"], "prj_1");
    assert_eq!(create["runtime"], "python3.13");
    assert_eq!(create["resources"]["vcpus"], 1);
    let requests = fake.requests();
    let api: Vec<&Value> = requests
        .iter()
        .filter(|r| r["path"].as_str().unwrap().starts_with("/api/"))
        .collect();
    assert!(
        api.iter().all(|r| r["query"]["teamId"] == "team_7"),
        "{api:?}"
    );
    let commands: Vec<&&Value> = api
        .iter()
        .filter(|r| r["path"].as_str().unwrap().ends_with("/cmd"))
        .collect();
    assert!(!commands.is_empty());
    for command in &commands {
        assert_eq!(
            command["headers"]["accept"], "application/x-ndjson",
            "{command}"
        );
        let body: Value = serde_json::from_str(command["body"].as_str().unwrap()).unwrap();
        assert!(body["timeout"].as_u64().unwrap() > 0, "{body}");
    }
    assert!(
        api.iter()
            .any(|r| r["path"].as_str().unwrap().ends_with("/kill")),
        "the timed-out command was killed through the API too"
    );
}

/// A JWT with the claims a Vercel OIDC token carries (unsigned: only the claims are read).
fn oidc_token(owner: &str, project: &str) -> String {
    use base64::Engine;
    let part = |v: Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    format!(
        "{}.{}.c2lnbmF0dXJl",
        part(json!({"alg": "RS256", "typ": "JWT"})),
        part(json!({"owner_id": owner, "project_id": project, "iat": 1_700_000_000}))
    )
}

#[test]
fn vercel_team_and_project_come_from_the_oidc_token() {
    let token = oidc_token("team_oidc", "prj_oidc");
    let fake = Fake::start("vercel_api.py", &[&token, "team_oidc"]);
    let mut serve =
        Serve::start_with_env(&vercel_config(&fake, ""), &[("VERCEL_OIDC_TOKEN", &token)]);
    let r = serve.terminal(json!({"command": "echo via-oidc"}));
    assert_eq!(r["output"], "via-oidc", "{r}");
    serve.finish();
    assert_eq!(fake.sandboxes()[0]["create"]["projectId"], "prj_oidc");
}

#[test]
fn vercel_availability_names_what_is_missing() {
    let fake = Fake::start("vercel_api.py", &["vt", "team_7"]);
    let mut serve = Serve::start(&vercel_config(
        &fake,
        "  vercel_token: vt\n  vercel_project_id: prj_1\n",
    ));
    let r = serve.terminal(json!({"command": "true"}));
    assert_eq!(r["status"], "disabled", "{r}");
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .contains("VERCEL_TEAM_ID is not set"),
        "{r}"
    );
    serve.finish();
    let mut serve = Serve::start_with_env(
        &vercel_config(&fake, ""),
        &[("VERCEL_OIDC_TOKEN", "not-a-jwt")],
    );
    let r = serve.terminal(json!({"command": "true"}));
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .contains("VERCEL_OIDC_TOKEN cannot be read"),
        "{r}"
    );
    serve.finish();
    let mut serve = Serve::start(&vercel_config(
        &fake,
        "  vercel_token: wrong\n  vercel_team_id: team_7\n  vercel_project_id: prj_1\n",
    ));
    let r = serve.terminal(json!({"command": "true"}));
    sandbox_fakes::assert_refused_credentials(&r, "HTTP 403");
    serve.finish();
}

#[test]
fn the_official_vercel_sdk_passes_the_fake() {
    let fake = Fake::start("vercel_api.py", &["sdk-token", "team_sdk"]);
    let dir = sandbox_fakes::fakes_dir().join("node");
    assert!(
        dir.join("node_modules/@vercel/sandbox/package.json")
            .is_file(),
        "@vercel/sandbox is missing: run `bash .ci/setup.d/40-sandbox-sdks.sh`"
    );
    let out = std::process::Command::new(sandbox_fakes::node())
        .current_dir(&dir)
        .args([
            "vercel_sdk_check.mjs",
            &fake.url,
            "sdk-token",
            "team_sdk",
            "prj_sdk",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("sdk ok"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
#[ignore = "talks to the real Vercel Sandbox service: set VERCEL_OIDC_TOKEN (or VERCEL_TOKEN, VERCEL_TEAM_ID and VERCEL_PROJECT_ID) and run with --ignored"]
fn live_vercel_sandbox() {
    assert!(std::env::var("VERCEL_OIDC_TOKEN").is_ok() || std::env::var("VERCEL_TOKEN").is_ok());
    sandbox_fakes::live_round(Serve::start("terminal:\n  backend: vercel_sandbox\n"));
}

// ------------------------------------------------------------------ file transfer

/// `Environment::fetch_file` of a backend built from `config` reads what a command wrote
/// (the library call; the file tools' own path is `*_file_tools_work_*` above).
fn fetch_round_trip(config: &str) {
    use hermes_environments::config::TerminalConfig;
    use hermes_environments::env::{create, ReadEvent};
    let home = TempDir::new().unwrap();
    std::fs::write(home.path().join("config.yaml"), config).unwrap();
    let config = TerminalConfig::load(home.path()).unwrap();
    let env = create(&config, "fetch-test", home.path()).unwrap();
    let mut run = env
        .run_bash(
            "printf 'line one\\nline two' > /tmp/fetched.txt",
            false,
            None,
        )
        .unwrap();
    while run.try_wait().is_none() {
        if let ReadEvent::Eof = run.read(std::time::Duration::from_millis(50)) {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
    assert_eq!(run.try_wait(), Some(0));
    assert_eq!(
        env.fetch_file("/tmp/fetched.txt", 1 << 20).unwrap(),
        b"line one\nline two"
    );
    assert_eq!(env.fetch_file("/tmp/fetched.txt", 4).unwrap(), b"line");
    let missing = env.fetch_file("/tmp/no-such-file", 100).unwrap_err();
    assert!(missing.reason.contains("no-such-file"), "{missing}");
    env.cleanup();
}

#[test]
fn daytona_file_tools_work_in_the_sandbox() {
    let fake = Fake::start("daytona_api.py", &["files-key"]);
    let mut serve = Serve::start(&daytona_config(&fake, "files-key", ""));
    exercise_file_tools(&mut serve);
    // A file larger than one upload chunk (the command line carries it there).
    let big: String = (0..20_000).map(|i| format!("line {i}\n")).collect();
    let r = serve.call(
        "write_file",
        json!({"path": "/tmp/files-work/big.txt", "content": big}),
    );
    assert_eq!(r["verified"], true, "{r}");
    let r = serve.call(
        "read_file",
        json!({"path": "/tmp/files-work/big.txt", "offset": 19_999, "limit": 5}),
    );
    assert_eq!(r["content"], "19999|line 19998\n20000|line 19999", "{r}");
    serve.finish();
    assert_eq!(fake.sandboxes()[0]["state"], "destroyed");
}

#[test]
fn vercel_file_tools_work_in_the_sandbox() {
    let fake = Fake::start("vercel_api.py", &["vt-files", "team_files"]);
    let mut serve = Serve::start(&vercel_config(
        &fake,
        "  vercel_token: vt-files\n  vercel_team_id: team_files\n  vercel_project_id: prj_files\n",
    ));
    exercise_file_tools(&mut serve);
    serve.finish();
    assert_eq!(fake.sandboxes()[0]["status"], "stopped");
}

#[test]
fn modal_file_tools_work_through_the_bridge() {
    let state = TempDir::new().unwrap();
    let mut serve = modal_serve(&state);
    exercise_file_tools(&mut serve);
    serve.finish();
}

#[test]
fn daytona_fetches_files_through_the_toolbox() {
    let fake = Fake::start("daytona_api.py", &["fetch-key"]);
    fetch_round_trip(&daytona_config(&fake, "fetch-key", ""));
    assert_eq!(fake.sandboxes()[0]["state"], "destroyed");
}

#[test]
fn vercel_fetches_files_through_fs_read() {
    let fake = Fake::start("vercel_api.py", &["vt-f", "team_f"]);
    fetch_round_trip(&vercel_config(
        &fake,
        "  vercel_token: vt-f\n  vercel_team_id: team_f\n  vercel_project_id: prj_f\n",
    ));
    assert_eq!(fake.sandboxes()[0]["status"], "stopped");
}
