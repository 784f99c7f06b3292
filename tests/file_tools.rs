//! The `file` toolset end to end: real files in temp dirs, calls through the real
//! entry point (`handle_function_call`) against the generated catalog.

use hermes_runtime::{Registry, ToolCall, ToolContext};
use serde_json::{json, Value};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use tempfile::TempDir;

struct Env {
    dir: TempDir,
    ctx: ToolContext,
    registry: Registry,
    _home: TempDir,
}

fn env() -> Env {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let dir = TempDir::new().unwrap();
    let home = TempDir::new().unwrap();
    let id = format!(
        "file-tools-test-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    let ctx = ToolContext::builder()
        .cwd(dir.path())
        .task_id(id)
        .hermes_home(home.path())
        .build();
    let registry = Registry::with_home(&hermes_tools::CATALOG, home.path().to_path_buf());
    Env {
        dir,
        ctx,
        registry,
        _home: home,
    }
}

impl Env {
    /// The raw result string.
    fn raw(&self, tool: &str, args: Value) -> String {
        self.registry
            .handle_function_call(&ToolCall::new(tool, args), &self.ctx)
    }

    /// The result as JSON (any plain-text tail after a blank line is dropped).
    fn call(&self, tool: &str, args: Value) -> Value {
        let raw = self.raw(tool, args);
        let json_part = raw.split("\n\n[").next().unwrap();
        serde_json::from_str(json_part).unwrap_or_else(|e| panic!("not JSON ({e}): {raw}"))
    }

    fn path(&self, rel: &str) -> std::path::PathBuf {
        self.dir.path().join(rel)
    }

    fn put(&self, rel: &str, content: impl AsRef<[u8]>) {
        let path = self.path(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }

    fn get(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path(rel)).unwrap()
    }
}

fn error_of(v: &Value) -> &str {
    v["error"]
        .as_str()
        .unwrap_or_else(|| panic!("expected an error, got {v}"))
}

/// Leaves no `.hermes-tmp` files behind.
fn assert_no_temp_files(dir: &Path) {
    for entry in walk(dir) {
        let name = entry.file_name().unwrap().to_string_lossy().into_owned();
        assert!(!name.contains("hermes-tmp"), "stray temp file {name}");
    }
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

// ---------------------------------------------------------------- read_file

#[test]
fn read_three_lines() {
    let e = env();
    e.put("a.txt", "a\nb\nc\n");
    let v = e.call("read_file", json!({"path": "a.txt"}));
    assert_eq!(v["content"], "1|a\n2|b\n3|c");
    assert_eq!(v["total_lines"], 3);
    assert_eq!(v["file_size"], 6);
    assert_eq!(v["truncated"], false);
    assert!(v.get("next_offset").is_none());
}

#[test]
fn read_without_trailing_newline_and_crlf() {
    let e = env();
    e.put("w.txt", "x\r\ny\r\nz");
    let v = e.call("read_file", json!({"path": "w.txt"}));
    assert_eq!(v["content"], "1|x\n2|y\n3|z");
    assert_eq!(v["total_lines"], 3);
}

#[test]
fn read_pages_with_offset_limit_and_next_offset() {
    let e = env();
    let text: String = (1..=10).map(|i| format!("line{i}\n")).collect();
    e.put("ten.txt", &text);
    let v = e.call(
        "read_file",
        json!({"path": "ten.txt", "offset": 3, "limit": 4}),
    );
    assert_eq!(v["content"], "3|line3\n4|line4\n5|line5\n6|line6");
    assert_eq!(v["total_lines"], 10);
    assert_eq!(v["truncated"], true);
    assert_eq!(v["next_offset"], 7);
    assert!(v["hint"].as_str().unwrap().contains("offset=7"), "{v}");

    let last = e.call(
        "read_file",
        json!({"path": "ten.txt", "offset": 7, "limit": 4}),
    );
    assert_eq!(last["content"], "7|line7\n8|line8\n9|line9\n10|line10");
    assert_eq!(last["truncated"], false);
    assert!(last.get("next_offset").is_none());

    // offset 0 means 1; past the end gives no rows and says so.
    let zero = e.call(
        "read_file",
        json!({"path": "ten.txt", "offset": 0, "limit": 1}),
    );
    assert_eq!(zero["content"], "1|line1");
    let past = e.call("read_file", json!({"path": "ten.txt", "offset": 50}));
    assert_eq!(past["content"], "");
    assert!(
        past["hint"].as_str().unwrap().contains("past the end"),
        "{past}"
    );
}

#[test]
fn read_cuts_at_character_budget_on_a_line_boundary() {
    let e = env();
    // 1000 lines of 1000 chars: ~1 MB, far over the 100 000-char page.
    let line = "x".repeat(1000);
    let text: String = (0..1000).map(|_| format!("{line}\n")).collect();
    e.put("big.txt", &text);
    let v = e.call("read_file", json!({"path": "big.txt", "limit": 2000}));
    let content = v["content"].as_str().unwrap();
    assert!(content.chars().count() <= 100_000);
    assert_eq!(v["truncated"], true);
    let rows = content.split('\n').count() as u64;
    assert_eq!(v["next_offset"], rows + 1);
    assert!(
        content.split('\n').all(|row| row.ends_with(&line)),
        "rows are whole lines"
    );
    assert_eq!(v["total_lines"], 1000);
}

#[test]
fn read_clips_overlong_lines() {
    let e = env();
    e.put("long.txt", format!("{}\nshort\n", "y".repeat(5000)));
    let v = e.call("read_file", json!({"path": "long.txt"}));
    let first = v["content"]
        .as_str()
        .unwrap()
        .split('\n')
        .next()
        .unwrap()
        .to_string();
    assert_eq!(first, format!("1|{}... [truncated]", "y".repeat(2000)));
    assert!(v["content"].as_str().unwrap().ends_with("\n2|short"));
    assert!(v["note"].as_str().unwrap().contains("clipped"));
}

#[test]
fn read_dedup_stub_then_block() {
    let e = env();
    e.put("d.txt", "one\ntwo\n");
    let first = e.call("read_file", json!({"path": "d.txt"}));
    assert_eq!(first["content"], "1|one\n2|two");

    let stub = e.call("read_file", json!({"path": "d.txt"}));
    assert_eq!(stub["status"], "unchanged");
    assert_eq!(stub["dedup"], true);
    assert_eq!(stub["content_returned"], false);
    assert!(stub["message"].as_str().unwrap().contains("not changed"));
    assert!(stub.get("content").is_none());

    // Another tool resets the repeat streak, but not the dedup count.
    let other = e.call("write_file", json!({"path": "other.txt", "content": "z"}));
    assert_eq!(other["verified"], true);
    let stub2 = e.call("read_file", json!({"path": "d.txt"}));
    assert_eq!(stub2["status"], "unchanged");
    assert!(stub2.get("_warning").is_none());

    let blocked = e.call("read_file", json!({"path": "d.txt"}));
    let err = error_of(&blocked);
    assert!(err.starts_with("BLOCKED"), "{err}");
    assert!(err.contains("has NOT changed"), "{err}");
    assert_eq!(blocked["already_read"], 3);

    // A different region of the same file is still readable.
    let other_region = e.call("read_file", json!({"path": "d.txt", "offset": 2}));
    assert_eq!(other_region["content"], "2|two");
}

#[test]
fn read_after_change_is_fresh_not_stub() {
    let e = env();
    e.put("c.txt", "old\n");
    assert_eq!(
        e.call("read_file", json!({"path": "c.txt"}))["content"],
        "1|old"
    );
    e.put("c.txt", "newer content\n");
    let v = e.call("read_file", json!({"path": "c.txt"}));
    assert_eq!(v["content"], "1|newer content");
}

#[test]
fn read_loop_guard_warns_third_blocks_fourth_and_resets_after_other_tool() {
    let e = env();
    // The file changes between reads, so dedup never answers: only the loop guard acts.
    e.put("l.txt", "v1\n");
    assert_eq!(
        e.call("read_file", json!({"path": "l.txt"}))["content"],
        "1|v1"
    );
    e.put("l.txt", "v22\n");
    let second = e.call("read_file", json!({"path": "l.txt"}));
    assert_eq!(second["content"], "1|v22");
    assert!(second.get("_warning").is_none());
    e.put("l.txt", "v333\n");
    let third = e.call("read_file", json!({"path": "l.txt"}));
    assert_eq!(third["content"], "1|v333");
    assert!(
        third["_warning"].as_str().unwrap().contains("3 times"),
        "{third}"
    );
    e.put("l.txt", "v4444\n");
    let fourth = e.call("read_file", json!({"path": "l.txt"}));
    assert!(
        error_of(&fourth).starts_with("BLOCKED: this is read number 4"),
        "{fourth}"
    );
    assert_eq!(fourth["already_read"], 4);

    // write_file (any other tool) starts a new streak.
    let w = e.call(
        "write_file",
        json!({"path": "l.txt", "content": "after write\n"}),
    );
    assert_eq!(w["verified"], true);
    let again = e.call("read_file", json!({"path": "l.txt"}));
    assert_eq!(again["content"], "1|after write");
    assert!(again.get("_warning").is_none());
}

#[test]
fn read_loop_guard_on_dedup_stubs_warns_on_third() {
    let e = env();
    e.put("s.txt", "same\n");
    e.call("read_file", json!({"path": "s.txt"}));
    let second = e.call("read_file", json!({"path": "s.txt"}));
    assert_eq!(second["dedup"], true);
    let third = e.call("read_file", json!({"path": "s.txt"}));
    assert_eq!(third["dedup"], true);
    assert!(third["_warning"].as_str().is_some(), "{third}");
    let fourth = e.call("read_file", json!({"path": "s.txt"}));
    assert!(error_of(&fourth).starts_with("BLOCKED"));
}

#[test]
fn read_refuses_devices() {
    let e = env();
    let v = e.call("read_file", json!({"path": "/dev/zero"}));
    assert!(error_of(&v).contains("device"), "{v}");
    let v = e.call("read_file", json!({"path": "/proc/self/mem"}));
    assert!(error_of(&v).contains("device or kernel file"), "{v}");
}

#[test]
fn read_refuses_binary_by_extension_and_content() {
    let e = env();
    e.put("pic.png", "not really a png but named like one");
    let v = e.call("read_file", json!({"path": "pic.png"}));
    assert!(error_of(&v).contains("binary"), "{v}");
    assert_eq!(v["is_binary"], true);
    assert!(v["hint"].as_str().unwrap().contains("vision_analyze"));

    e.put("blob.dat2", b"abc\x00def\nmore\n");
    let v = e.call("read_file", json!({"path": "blob.dat2"}));
    assert!(error_of(&v).contains("binary"), "{v}");
    assert_eq!(v["is_binary"], true);
    assert!(!v["hint"].as_str().unwrap().contains("vision_analyze"));
}

#[test]
fn read_invalid_utf8_is_decoded_lossily_with_a_note() {
    let e = env();
    e.put("latin1.txt", b"caf\xe9\nok\n");
    let v = e.call("read_file", json!({"path": "latin1.txt"}));
    assert_eq!(v["content"], "1|caf\u{fffd}\n2|ok");
    assert!(
        v["note"].as_str().unwrap().contains("not valid UTF-8"),
        "{v}"
    );
}

#[test]
fn read_missing_file_suggests_similar_names() {
    let e = env();
    e.put("src/config.yaml", "a: 1\n");
    e.put("src/unrelated.rs", "x\n");
    let v = e.call("read_file", json!({"path": "src/confg.yaml"}));
    assert_eq!(error_of(&v), "File not found: src/confg.yaml");
    assert_eq!(v["similar_files"], json!(["src/config.yaml"]));

    let v = e.call("read_file", json!({"path": "nowhere/at/all.txt"}));
    assert_eq!(error_of(&v), "File not found: nowhere/at/all.txt");
    assert!(v.get("similar_files").is_none());
}

#[test]
fn read_directory_is_an_error() {
    let e = env();
    std::fs::create_dir(e.path("sub")).unwrap();
    let v = e.call("read_file", json!({"path": "sub"}));
    assert_eq!(error_of(&v), "sub is a directory, not a file.");
    assert!(v["hint"].as_str().unwrap().contains("search_files"));
}

#[test]
fn read_empty_file() {
    let e = env();
    e.put("empty.txt", "");
    let v = e.call("read_file", json!({"path": "empty.txt"}));
    assert_eq!(v["content"], "");
    assert_eq!(v["total_lines"], 0);
    assert_eq!(v["hint"], "The file is empty.");
}

// ---------------------------------------------------------------- write_file

#[test]
fn write_creates_parents_and_verifies() {
    let e = env();
    let v = e.call(
        "write_file",
        json!({"path": "deep/er/new.txt", "content": "hello\nworld\n"}),
    );
    assert_eq!(v["bytes_written"], 12);
    assert_eq!(v["dirs_created"], 2);
    assert_eq!(v["verified"], true);
    assert!(v.get("warning").is_none());
    assert_eq!(e.get("deep/er/new.txt"), "hello\nworld\n");

    let again = e.call(
        "write_file",
        json!({"path": "deep/er/new.txt", "content": "bye\n"}),
    );
    assert_eq!(again["dirs_created"], 0);
    assert_eq!(e.get("deep/er/new.txt"), "bye\n");
    assert_no_temp_files(e.dir.path());
}

#[test]
fn write_keeps_crlf_and_bom() {
    let e = env();
    e.put("win.txt", "one\r\ntwo\r\n");
    let v = e.call(
        "write_file",
        json!({"path": "win.txt", "content": "uno\ndos\ntres\n"}),
    );
    assert_eq!(v["verified"], true);
    assert_eq!(v["bytes_written"], 16);
    assert_eq!(e.get("win.txt"), "uno\r\ndos\r\ntres\r\n");
    assert!(v["note"].as_str().unwrap().contains("CRLF"));

    e.put("bom.txt", "\u{feff}first\n");
    e.call(
        "write_file",
        json!({"path": "bom.txt", "content": "second\n"}),
    );
    assert_eq!(e.get("bom.txt"), "\u{feff}second\n");
}

#[test]
fn write_refuses_numbered_display_and_dedup_stub() {
    let e = env();
    let v = e.call(
        "write_file",
        json!({"path": "n.txt", "content": "1|fn main() {\n2|    run();\n3|}\n"}),
    );
    assert!(error_of(&v).contains("`N|` line-number prefixes"), "{v}");
    assert!(!e.path("n.txt").exists());

    let stub =
        json!({"status": "unchanged", "message": "m", "dedup": true, "content_returned": false})
            .to_string();
    let v = e.call("write_file", json!({"path": "n.txt", "content": stub}));
    assert!(error_of(&v).contains("stub"), "{v}");
    assert!(!e.path("n.txt").exists());

    // Pipes that are not a gutter are fine.
    let v = e.call(
        "write_file",
        json!({"path": "t.md", "content": "| a | b |\n|---|---|\n| 1 | 2 |\n"}),
    );
    assert_eq!(v["verified"], true);
}

#[test]
fn write_warns_when_file_changed_since_read() {
    let e = env();
    e.put("s.txt", "original\n");
    e.call("read_file", json!({"path": "s.txt"}));
    e.put("s.txt", "someone else changed this\n");
    let v = e.call("write_file", json!({"path": "s.txt", "content": "mine\n"}));
    assert_eq!(v["verified"], true);
    assert!(
        v["warning"]
            .as_str()
            .unwrap()
            .contains("changed on disk since you last read it"),
        "{v}"
    );
    // Our own write is not a foreign change.
    let v = e.call(
        "write_file",
        json!({"path": "s.txt", "content": "mine again\n"}),
    );
    assert!(v.get("warning").is_none(), "{v}");
}

#[cfg(unix)]
#[test]
fn write_keeps_permissions() {
    use std::os::unix::fs::PermissionsExt;
    let e = env();
    e.put("run.sh", "#!/bin/sh\n");
    std::fs::set_permissions(e.path("run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    e.call(
        "write_file",
        json!({"path": "run.sh", "content": "#!/bin/sh\necho hi\n"}),
    );
    let mode = std::fs::metadata(e.path("run.sh"))
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o755);
}

#[test]
fn write_to_directory_or_missing_argument_is_an_error() {
    let e = env();
    std::fs::create_dir(e.path("adir")).unwrap();
    let v = e.call("write_file", json!({"path": "adir", "content": "x"}));
    assert_eq!(
        error_of(&v),
        "adir is a directory; give a file path to write."
    );
    let v = e.call("write_file", json!({"path": "x.txt"}));
    assert!(error_of(&v).contains("`content`"), "{v}");
}

// ---------------------------------------------------------------- patch (replace)

#[test]
fn patch_replaces_unique_string_with_diff() {
    let e = env();
    e.put("p.py", "def f():\n    return 1\n\ndef g():\n    return 2\n");
    let v = e.call(
        "patch",
        json!({"path": "p.py", "old_string": "return 1", "new_string": "return 42"}),
    );
    assert_eq!(v["success"], true);
    assert_eq!(v["files_modified"], json!(["p.py"]));
    assert_eq!(v["files_created"], json!([]));
    assert_eq!(v["replacements"], 1);
    let diff = v["diff"].as_str().unwrap();
    assert!(diff.contains("--- a/p.py\n+++ b/p.py\n"), "{diff}");
    assert!(diff.contains("-    return 1\n+    return 42\n"), "{diff}");
    assert!(v.get("note").is_none());
    assert_eq!(
        e.get("p.py"),
        "def f():\n    return 42\n\ndef g():\n    return 2\n"
    );
}

#[test]
fn patch_non_unique_fails_then_replace_all_works() {
    let e = env();
    e.put("dup.txt", "x = 1\ny = 1\nz = 1\n");
    let v = e.call(
        "patch",
        json!({"path": "dup.txt", "old_string": "= 1", "new_string": "= 2"}),
    );
    assert_eq!(v["success"], false);
    let err = error_of(&v);
    assert!(err.contains("matches 3 places"), "{err}");
    assert!(err.contains("replace_all"), "{err}");
    assert_eq!(e.get("dup.txt"), "x = 1\ny = 1\nz = 1\n");

    let v = e.call(
        "patch",
        json!({"path": "dup.txt", "old_string": "= 1", "new_string": "= 2", "replace_all": true}),
    );
    assert_eq!(v["success"], true);
    assert_eq!(v["replacements"], 3);
    assert_eq!(e.get("dup.txt"), "x = 2\ny = 2\nz = 2\n");
}

#[test]
fn patch_absent_string_shows_closest_region_and_escalates_hint() {
    let e = env();
    e.put("f.rs", "fn alpha() {}\nfn compute_total(items: &[u32]) -> u32 {\n    items.iter().sum()\n}\nfn omega() {}\n");
    let args = json!({"path": "f.rs", "old_string": "fn compute_totals(items: &[u64]) -> u64 {", "new_string": "x"});
    let first = e.call("patch", args.clone());
    assert_eq!(first["success"], false);
    let err = error_of(&first);
    assert!(
        err.starts_with("Could not find old_string in f.rs."),
        "{err}"
    );
    assert!(err.contains("line 2"), "{err}");
    assert!(
        err.contains("2|fn compute_total(items: &[u32]) -> u32 {"),
        "{err}"
    );
    assert!(!first["_hint"].as_str().unwrap().contains("STOP"));
    e.call("patch", args.clone());
    let third = e.call("patch", args.clone());
    let hint = third["_hint"].as_str().unwrap();
    assert!(hint.contains("number 3") && hint.contains("STOP"), "{hint}");
    // A success clears the streak.
    let ok = e.call(
        "patch",
        json!({"path": "f.rs", "old_string": "fn omega() {}", "new_string": "fn omega() { }"}),
    );
    assert_eq!(ok["success"], true);
    let after = e.call("patch", args);
    assert!(!after["_hint"].as_str().unwrap().contains("STOP"));
}

#[test]
fn patch_whitespace_tolerant_match_reindents() {
    let e = env();
    e.put(
        "w.py",
        "class A:\n    def f(self):\n        x = 1   \n        return x\n",
    );
    let v = e.call(
        "patch",
        json!({"path": "w.py", "old_string": "x = 1\nreturn x", "new_string": "x = 2\nreturn x * 2"}),
    );
    assert_eq!(v["success"], true, "{v}");
    assert!(
        v["note"].as_str().unwrap().contains("ignoring indentation"),
        "{v}"
    );
    assert_eq!(
        e.get("w.py"),
        "class A:\n    def f(self):\n        x = 2\n        return x * 2\n"
    );

    let v = e.call(
        "patch",
        json!({"path": "w.py", "old_string": "        x = 2  \n        return x * 2", "new_string": "        pass"}),
    );
    assert_eq!(v["success"], true, "{v}");
    assert!(
        v["note"].as_str().unwrap().contains("trailing whitespace"),
        "{v}"
    );
    assert_eq!(e.get("w.py"), "class A:\n    def f(self):\n        pass\n");
}

#[test]
fn patch_empty_new_string_deletes_and_identical_is_no_change() {
    let e = env();
    e.put("d.txt", "keep\ndrop me\nkeep too\n");
    let v = e.call(
        "patch",
        json!({"path": "d.txt", "old_string": "drop me\n", "new_string": ""}),
    );
    assert_eq!(v["success"], true);
    assert_eq!(e.get("d.txt"), "keep\nkeep too\n");
    let v = e.call(
        "patch",
        json!({"path": "d.txt", "old_string": "keep", "new_string": "keep"}),
    );
    assert_eq!(v["success"], true);
    assert_eq!(v["no_change"], true);
    assert_eq!(v["diff"], "");
}

#[test]
fn patch_forgives_pasted_line_numbers() {
    let e = env();
    e.put("n.txt", "alpha\nbeta\ngamma\n");
    let v = e.call(
        "patch",
        json!({"path": "n.txt", "old_string": "2|beta\n3|gamma", "new_string": "2|BETA\n3|GAMMA"}),
    );
    assert_eq!(v["success"], true, "{v}");
    assert!(
        v["note"].as_str().unwrap().contains("line-number prefixes"),
        "{v}"
    );
    assert_eq!(e.get("n.txt"), "alpha\nBETA\nGAMMA\n");
}

#[test]
fn patch_warns_when_file_changed_since_read() {
    let e = env();
    e.put("s.txt", "one\ntwo\n");
    e.call("read_file", json!({"path": "s.txt"}));
    e.put("s.txt", "one\ntwo\nthree\n");
    let v = e.call(
        "patch",
        json!({"path": "s.txt", "old_string": "two", "new_string": "2"}),
    );
    assert_eq!(v["success"], true);
    assert!(
        v["warning"].as_str().unwrap().contains("changed on disk"),
        "{v}"
    );
    assert_eq!(e.get("s.txt"), "one\n2\nthree\n");
}

#[test]
fn patch_keeps_crlf() {
    let e = env();
    e.put("c.txt", "a\r\nb\r\nc\r\n");
    let v = e.call(
        "patch",
        json!({"path": "c.txt", "old_string": "a\nb", "new_string": "A\nB"}),
    );
    assert_eq!(v["success"], true, "{v}");
    assert_eq!(e.get("c.txt"), "A\r\nB\r\nc\r\n");
}

#[test]
fn patch_missing_file_and_missing_arguments() {
    let e = env();
    e.put("main.rs", "fn main() {}\n");
    let v = e.call(
        "patch",
        json!({"path": "mian.rs", "old_string": "a", "new_string": "b"}),
    );
    assert_eq!(error_of(&v), "File not found: mian.rs");
    assert_eq!(v["similar_files"], json!(["main.rs"]));
    let v = e.call("patch", json!({"path": "main.rs", "new_string": "b"}));
    assert!(error_of(&v).starts_with("old_string is required"), "{v}");
    let v = e.call("patch", json!({"path": "main.rs", "old_string": "fn"}));
    assert!(error_of(&v).starts_with("new_string is required"), "{v}");
    let v = e.call("patch", json!({"mode": "patch"}));
    assert!(error_of(&v).starts_with("patch is required"), "{v}");
}

// ---------------------------------------------------------------- patch (V4A)

#[test]
fn v4a_add_update_delete_move() {
    let e = env();
    e.put(
        "app.py",
        "import os\n\ndef main():\n    print('hi')\n    return 0\n",
    );
    e.put("old.txt", "bye\n");
    e.put("lib/util.py", "def helper():\n    return 1\n");
    let patch = "\
*** Begin Patch
*** Add File: docs/notes.md
+# Notes
+first line
*** Update File: app.py
@@ def main():
-    print('hi')
+    print('hello')
     return 0
*** Delete File: old.txt
*** Update File: lib/util.py
*** Move to: lib/helpers.py
@@
 def helper():
-    return 1
+    return 2
*** End Patch
";
    let v = e.call("patch", json!({"mode": "patch", "patch": patch}));
    assert_eq!(v["success"], true, "{v}");
    assert_eq!(v["files_created"], json!(["docs/notes.md"]));
    assert_eq!(v["files_modified"], json!(["app.py", "lib/helpers.py"]));
    assert_eq!(v["files_deleted"], json!(["old.txt"]));
    assert_eq!(
        v["files_moved"],
        json!([{"from": "lib/util.py", "to": "lib/helpers.py"}])
    );

    assert_eq!(e.get("docs/notes.md"), "# Notes\nfirst line\n");
    assert_eq!(
        e.get("app.py"),
        "import os\n\ndef main():\n    print('hello')\n    return 0\n"
    );
    assert!(!e.path("old.txt").exists());
    assert!(!e.path("lib/util.py").exists());
    assert_eq!(e.get("lib/helpers.py"), "def helper():\n    return 2\n");

    let diff = v["diff"].as_str().unwrap();
    assert!(
        diff.contains("--- /dev/null\n+++ b/docs/notes.md\n"),
        "{diff}"
    );
    assert!(
        diff.contains("-    print('hi')\n+    print('hello')\n"),
        "{diff}"
    );
    assert!(diff.contains("--- a/old.txt\n+++ /dev/null\n"), "{diff}");
    assert!(
        diff.contains("--- a/lib/util.py\n+++ b/lib/helpers.py\n"),
        "{diff}"
    );
    assert_no_temp_files(e.dir.path());
}

#[test]
fn v4a_with_one_bad_hunk_changes_nothing() {
    let e = env();
    e.put("a.txt", "one\ntwo\nthree\n");
    e.put("b.txt", "alpha\nbeta\n");
    let patch = "\
*** Begin Patch
*** Add File: c.txt
+new
*** Update File: a.txt
@@
-two
+TWO
*** Update File: b.txt
@@
-gamma
+GAMMA
*** End Patch";
    let v = e.call("patch", json!({"mode": "patch", "patch": patch}));
    assert_eq!(v["success"], false);
    let err = error_of(&v);
    assert!(
        err.starts_with("Patch not applied, no file was changed: b.txt: hunk 1"),
        "{err}"
    );
    assert_eq!(e.get("a.txt"), "one\ntwo\nthree\n");
    assert_eq!(e.get("b.txt"), "alpha\nbeta\n");
    assert!(!e.path("c.txt").exists());
    assert!(v["_hint"].is_string());
}

#[test]
fn v4a_refuses_adding_existing_file_and_bad_syntax() {
    let e = env();
    e.put("x.txt", "x\n");
    let v = e.call("patch", json!({"mode": "patch", "patch": "*** Begin Patch\n*** Add File: x.txt\n+y\n*** End Patch"}));
    assert!(error_of(&v).contains("already exists"), "{v}");
    assert_eq!(e.get("x.txt"), "x\n");
    let v = e.call(
        "patch",
        json!({"mode": "patch", "patch": "*** Begin Patch\n*** Frobnicate: x.txt\n*** End Patch"}),
    );
    assert!(error_of(&v).starts_with("Invalid V4A patch: line 2"), "{v}");
}

// ---------------------------------------------------------------- search_files

fn search_tree(e: &Env) {
    e.put(
        "src/main.rs",
        "fn main() {\n    let total = compute();\n    println!(\"{total}\");\n}\n",
    );
    e.put("src/lib.rs", "pub fn compute() -> u32 {\n    41 + 1\n}\n");
    e.put("README.md", "compute things\n");
    e.put("target/debug/out.rs", "fn compute() {}\n");
    e.put(".gitignore", "target/\n");
    e.put(".hidden/secret.rs", "fn compute() {}\n");
}

#[test]
fn search_content_with_context() {
    let e = env();
    search_tree(&e);
    let v = e.call(
        "search_files",
        json!({"pattern": "= compute\\(\\)", "context": 1}),
    );
    assert_eq!(v["total_count"], 1, "{v}");
    let m = &v["matches"][0];
    assert_eq!(m["path"], "src/main.rs");
    assert_eq!(m["line"], 2);
    assert_eq!(m["content"], "    let total = compute();");
    assert_eq!(m["before"], json!([{"line": 1, "content": "fn main() {"}]));
    assert_eq!(
        m["after"],
        json!([{"line": 3, "content": "    println!(\"{total}\");"}])
    );
}

#[test]
fn search_respects_gitignore_and_hidden() {
    let e = env();
    search_tree(&e);
    let v = e.call(
        "search_files",
        json!({"pattern": "compute", "output_mode": "files_only"}),
    );
    assert_eq!(
        v["files"],
        json!(["README.md", "src/lib.rs", "src/main.rs"]),
        "{v}"
    );
    assert_eq!(v["total_count"], 3);
}

#[test]
fn search_files_mode_with_glob_newest_first() {
    let e = env();
    search_tree(&e);
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    std::fs::File::options()
        .write(true)
        .open(e.path("src/main.rs"))
        .unwrap()
        .set_modified(old)
        .unwrap();
    let v = e.call(
        "search_files",
        json!({"pattern": "*.rs", "target": "files"}),
    );
    assert_eq!(v["files"], json!(["src/lib.rs", "src/main.rs"]), "{v}");
    assert_eq!(v["total_count"], 2);
    // The `find` alias, a subdirectory as the root, a name without glob characters.
    let v = e.call(
        "search_files",
        json!({"pattern": "lib", "target": "find", "path": "src"}),
    );
    assert_eq!(v["files"], json!(["src/lib.rs"]), "{v}");
}

#[test]
fn search_file_glob_filters_content_search() {
    let e = env();
    search_tree(&e);
    let v = e.call(
        "search_files",
        json!({"pattern": "compute", "file_glob": "*.md", "target": "grep"}),
    );
    assert_eq!(v["total_count"], 1);
    assert_eq!(
        v["matches"],
        json!([{"path": "README.md", "line": 1, "content": "compute things"}])
    );
}

#[test]
fn search_pages_with_offset_limit_and_trailing_hint() {
    let e = env();
    let text: String = (1..=7).map(|i| format!("hit {i}\n")).collect();
    e.put("many.txt", text);
    let raw = e.raw("search_files", json!({"pattern": "hit", "limit": 3}));
    let (json_part, tail) = raw
        .split_once("\n\n")
        .expect("a plain-text hint after a blank line");
    assert_eq!(
        tail,
        "[Showing results 1-3 of 7. Use offset=3 to see more.]"
    );
    let v: Value = serde_json::from_str(json_part).unwrap();
    assert_eq!(v["total_count"], 7);
    assert_eq!(v["truncated"], true);
    let lines: Vec<u64> = v["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["line"].as_u64().unwrap())
        .collect();
    assert_eq!(lines, [1, 2, 3]);

    let raw = e.raw(
        "search_files",
        json!({"pattern": "hit", "limit": 3, "offset": 3}),
    );
    assert!(
        raw.ends_with("[Showing results 4-6 of 7. Use offset=6 to see more.]"),
        "{raw}"
    );
    let raw = e.raw(
        "search_files",
        json!({"pattern": "hit", "limit": 3, "offset": 6}),
    );
    assert!(!raw.contains("\n\n"), "{raw}");
    let v: Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(v["matches"][0]["line"], 7);
    assert!(v.get("truncated").is_none());
}

#[test]
fn search_results_come_in_walk_order_whichever_thread_found_them() {
    let e = env();
    // Each folder's entries by name, a folder's files before the next name: `a/`
    // comes before `a-c.txt` although `a-c.txt` sorts first as a plain string.
    for rel in [
        "a-c.txt",
        "a/b.txt",
        "a/z/y.txt",
        "b.txt",
        "aa.txt",
        "A.txt",
    ] {
        e.put(rel, "needle\nneedle\n");
    }
    for n in 0..300 {
        e.put(&format!("many/{n:03}.txt"), "needle\n");
    }
    let v = e.call(
        "search_files",
        json!({"pattern": "needle", "output_mode": "count", "limit": 1000}),
    );
    let order: Vec<&String> = v["counts"].as_object().unwrap().keys().collect();
    assert_eq!(
        order[..6],
        [
            "A.txt",
            "a/b.txt",
            "a/z/y.txt",
            "a-c.txt",
            "aa.txt",
            "b.txt"
        ],
        "{v}"
    );
    assert_eq!(order[6], "many/000.txt");
    assert_eq!(order[305], "many/299.txt");
    assert_eq!(v["total_count"], 312);
    // The list of matching files counts each file once.
    let v = e.call(
        "search_files",
        json!({"pattern": "needle", "output_mode": "files_only", "limit": 1000}),
    );
    assert_eq!(v["total_count"], 306, "{v}");
    assert_eq!(v["files"][2], "a/z/y.txt");
}

#[test]
fn search_stops_at_the_match_cap_where_a_walk_in_order_would() {
    let e = env();
    // 10 000 matches are collected at most: 6 000 in a.txt, then 4 000 of b/c.txt's
    // 6 000 (the last without the lines after it); z.txt, after the cap, never counts,
    // whichever thread reached it first.
    let text: String = (0..6000).map(|i| format!("hit {i}\nplain\n")).collect();
    e.put("a.txt", &text);
    e.put("b/c.txt", &text);
    for n in 0..50 {
        e.put(&format!("z{n:02}.txt"), "hit\n");
    }
    let v = e.call(
        "search_files",
        json!({"pattern": "hit", "output_mode": "count", "context": 1}),
    );
    assert_eq!(v["total_count"], 10_000, "{v}");
    assert_eq!(v["total_count_is_lower_bound"], true);
    assert_eq!(v["counts"], json!({"a.txt": 6000, "b/c.txt": 4000}));
    let v = e.call(
        "search_files",
        json!({"pattern": "hit", "context": 1, "offset": 9998, "limit": 2}),
    );
    let (previous, last) = (&v["matches"][0], &v["matches"][1]);
    assert_eq!(
        previous["after"],
        json!([{"line": 7998, "content": "plain"}])
    );
    assert_eq!(
        (&last["path"], &last["line"]),
        (&json!("b/c.txt"), &json!(7999))
    );
    assert!(last.get("after").is_none(), "{last}");
}

#[test]
fn search_stops_one_result_past_the_page_and_says_the_total_is_a_lower_bound() {
    let e = env();
    for n in 0..30 {
        e.put(&format!("f{n:02}.txt"), "hit\nplain\nhit again\n");
    }
    let paths = |v: &Value, key: &str| -> Vec<String> {
        v[key]
            .as_array()
            .unwrap_or_else(|| panic!("no {key} in {v}"))
            .iter()
            .map(|item| {
                item.get("path")
                    .unwrap_or(item)
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect()
    };
    // Lines: the page's five and one more, whichever threads found them.
    let raw = e.raw("search_files", json!({"pattern": "hit", "limit": 5}));
    assert!(
        raw.ends_with("[Showing results 1-5 of at least 6. Use offset=5 to see more.]"),
        "{raw}"
    );
    let v = e.call("search_files", json!({"pattern": "hit", "limit": 5}));
    assert_eq!(v["total_count_is_lower_bound"], true, "{v}");
    // The file the sixth line is in counts whole: its two lines.
    assert_eq!(v["total_count"], 6, "{v}");
    assert_eq!(
        paths(&v, "matches"),
        ["f00.txt", "f00.txt", "f01.txt", "f01.txt", "f02.txt"]
    );
    let v = e.call(
        "search_files",
        json!({"pattern": "hit", "limit": 4, "offset": 50}),
    );
    assert_eq!(v["total_count"], 56, "{v}");
    assert_eq!(
        paths(&v, "matches"),
        ["f25.txt", "f25.txt", "f26.txt", "f26.txt"]
    );
    // A page that reaches the end: the true total, and nothing more to see.
    let raw = e.raw(
        "search_files",
        json!({"pattern": "hit", "limit": 10, "offset": 55}),
    );
    assert!(!raw.contains("\n\n"), "{raw}");
    let v: Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(v["total_count"], 60, "{v}");
    assert!(v.get("total_count_is_lower_bound").is_none(), "{v}");
    // Files and counts page by file.
    let v = e.call(
        "search_files",
        json!({"pattern": "hit", "output_mode": "files_only", "limit": 3}),
    );
    assert_eq!(
        (&v["total_count"], &v["total_count_is_lower_bound"]),
        (&json!(4), &json!(true))
    );
    assert_eq!(paths(&v, "files"), ["f00.txt", "f01.txt", "f02.txt"]);
    let v = e.call(
        "search_files",
        json!({"pattern": "hit", "output_mode": "count", "limit": 2, "offset": 1}),
    );
    assert_eq!(v["counts"], json!({"f01.txt": 2, "f02.txt": 2}), "{v}");
    assert_eq!(v["files_with_matches"], 4, "{v}");
    assert_eq!(v["total_count_is_lower_bound"], true);
    let v = e.call(
        "search_files",
        json!({"pattern": "hit", "output_mode": "files_only", "limit": 30}),
    );
    assert_eq!(v["total_count"], 30, "{v}");
    assert!(v.get("total_count_is_lower_bound").is_none(), "{v}");
}

#[test]
fn search_a_single_file() {
    let e = env();
    e.put("one/file.txt", "needle here\nnothing\nneedle again\n");
    let v = e.call(
        "search_files",
        json!({"pattern": "needle", "path": "one/file.txt"}),
    );
    assert_eq!(v["total_count"], 2);
    assert_eq!(
        v["matches"][0],
        json!({"path": "one/file.txt", "line": 1, "content": "needle here"})
    );
    assert_eq!(v["matches"][1]["line"], 3);
}

#[test]
fn search_count_mode() {
    let e = env();
    e.put("a.txt", "x\nx\nx\n");
    e.put("b.txt", "x\n");
    e.put("c.txt", "y\n");
    let v = e.call(
        "search_files",
        json!({"pattern": "x", "output_mode": "count"}),
    );
    assert_eq!(v["counts"], json!({"a.txt": 3, "b.txt": 1}));
    assert_eq!(v["total_count"], 4);
    assert_eq!(v["files_with_matches"], 2);
}

#[test]
fn search_invalid_regex_and_missing_path() {
    let e = env();
    e.put("a.txt", "x\n");
    let v = e.call("search_files", json!({"pattern": "foo(bar"}));
    assert!(
        error_of(&v).starts_with("Invalid regex pattern `foo(bar`"),
        "{v}"
    );
    assert!(v["hint"].as_str().unwrap().contains("backslash"));
    let v = e.call("search_files", json!({"pattern": "x", "path": "nope"}));
    assert_eq!(error_of(&v), "Path not found: nope");
}

#[test]
fn search_skips_binary_files_and_reports_no_match() {
    let e = env();
    e.put("bin.dat2", b"needle\x00\x01\x02");
    e.put("text.txt", "hay\n");
    let v = e.call("search_files", json!({"pattern": "needle"}));
    assert_eq!(v["total_count"], 0);
    assert_eq!(v["matches"], json!([]));
    assert!(v["hint"].as_str().unwrap().contains("No line matched"));
}

#[test]
fn search_loop_guard_warns_third_blocks_fourth() {
    let e = env();
    e.put("a.txt", "x\n");
    let args = json!({"pattern": "x"});
    assert!(e
        .call("search_files", args.clone())
        .get("_warning")
        .is_none());
    assert!(e
        .call("search_files", args.clone())
        .get("_warning")
        .is_none());
    let third = e.call("search_files", args.clone());
    assert_eq!(third["total_count"], 1);
    assert!(third["_warning"].as_str().unwrap().contains("3 times"));
    let fourth = e.call("search_files", args.clone());
    assert!(error_of(&fourth).starts_with("BLOCKED"), "{fourth}");
    // A different search is fine, and resets the streak.
    assert_eq!(
        e.call("search_files", json!({"pattern": "y"}))["total_count"],
        0
    );
    assert_eq!(e.call("search_files", args)["total_count"], 1);
}

#[test]
fn file_tools_are_in_the_file_toolset() {
    let schemas = hermes_tools::CATALOG
        .tools
        .iter()
        .filter(|t| t.toolset == "file")
        .map(|t| t.name)
        .collect::<Vec<_>>();
    assert_eq!(
        schemas,
        ["patch", "read_file", "search_files", "write_file"]
    );
}
