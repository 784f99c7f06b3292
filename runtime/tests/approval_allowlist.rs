//! The permanent allowlist file: merge under two writers, hand edits, comments, symlinks,
//! file mode.

use hermes_runtime::approval::*;
use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;

fn cli() -> ApprovalContext {
    ApprovalContext {
        session_key: Some("s".into()),
        interactive: true,
        ..Default::default()
    }
}

fn always() -> GuardOptions {
    GuardOptions {
        prompter: Some(Arc::new(|_: &PromptRequest| Choice::Always)),
        ..Default::default()
    }
}

fn on_disk(home: &Path) -> Vec<String> {
    read_allowlist(&home.join("config.yaml")).unwrap()
}

const CONFIG: &str = "# my hermes config\nmodel: gpt-x   # the default model\n\ncommand_allowlist:\n  # reviewed 2024\n  - git status\n  - make test\n\n# approvals below\napprovals:\n  mode: manual # keep it\n  timeout: 60\n";

#[test]
fn two_writers_keep_each_others_entries_and_comments() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.yaml"), CONFIG).unwrap();
    let a = Approvals::load(home.path());
    let b = Approvals::load(home.path());
    a.set_process_yolo(false);
    b.set_process_yolo(false);
    assert_eq!(a.permanent_entries(), ["git status", "make test"]);

    let key_a = a.check_dangerous_command("rm -rf build").unwrap().key;
    let key_b = b
        .check_dangerous_command("git reset --hard HEAD")
        .unwrap()
        .key;
    assert_ne!(key_a, key_b);
    assert!(a
        .check_all_command_guards("rm -rf build", "local", &cli(), &always())
        .is_approved());
    assert!(b
        .check_all_command_guards("git reset --hard HEAD", "local", &cli(), &always())
        .is_approved());

    let mut expected = vec![
        "git status".to_string(),
        "make test".into(),
        key_a.clone(),
        key_b.clone(),
    ];
    expected.sort();
    assert_eq!(on_disk(home.path()), expected);
    let text = std::fs::read_to_string(home.path().join("config.yaml")).unwrap();
    assert!(
        text.starts_with(
            "# my hermes config\nmodel: gpt-x   # the default model\n\ncommand_allowlist:\n"
        ),
        "{text}"
    );
    assert!(
        text.ends_with(
            "\n# approvals below\napprovals:\n  mode: manual # keep it\n  timeout: 60\n"
        ),
        "{text}"
    );
    // b picked up a's entry when it saved.
    assert!(b.is_approved("other", &key_a));
    // No temp files left behind.
    let leftovers: Vec<_> = std::fs::read_dir(home.path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty());
}

#[test]
fn entries_removed_by_hand_stay_removed() {
    let home = tempfile::tempdir().unwrap();
    let path = home.path().join("config.yaml");
    std::fs::write(
        &path,
        "command_allowlist:\n- git status\n- make test\nother: 1\n",
    )
    .unwrap();
    let approvals = Approvals::load(home.path());
    approvals.set_process_yolo(false);
    // The user deletes `git status` in an editor while the agent runs.
    std::fs::write(&path, "command_allowlist:\n- make test\nother: 1\n").unwrap();
    let key = approvals
        .check_dangerous_command("rm -rf build")
        .unwrap()
        .key;
    assert!(approvals
        .check_all_command_guards("rm -rf build", "local", &cli(), &always())
        .is_approved());
    let mut expected = vec!["make test".to_string(), key.clone()];
    expected.sort();
    assert_eq!(on_disk(home.path()), expected);
    assert!(std::fs::read_to_string(&path)
        .unwrap()
        .ends_with("other: 1\n"));
    // And a later save still does not bring it back.
    approvals.approve_permanent("cargo build").unwrap();
    let mut expected = vec!["cargo build".to_string(), "make test".into(), key];
    expected.sort();
    assert_eq!(on_disk(home.path()), expected);
    assert!(!approvals
        .permanent_entries()
        .contains(&"git status".to_string()));
}

#[test]
fn symlinked_config_is_written_through_the_link_and_mode_is_kept() {
    let home = tempfile::tempdir().unwrap();
    let real_dir = tempfile::tempdir().unwrap();
    let real = real_dir.path().join("hermes-config.yaml");
    std::fs::write(&real, "# dotfiles managed\nmodel: x\n").unwrap();
    std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o640)).unwrap();
    std::os::unix::fs::symlink(&real, home.path().join("config.yaml")).unwrap();

    let approvals = Approvals::load(home.path());
    approvals.approve_permanent("npm test").unwrap();

    let link = std::fs::symlink_metadata(home.path().join("config.yaml")).unwrap();
    assert!(link.file_type().is_symlink(), "the link itself is kept");
    assert_eq!(
        std::fs::read_to_string(&real).unwrap(),
        "# dotfiles managed\nmodel: x\ncommand_allowlist:\n  - \"npm test\"\n"
    );
    assert_eq!(
        std::fs::metadata(&real).unwrap().permissions().mode() & 0o777,
        0o640
    );
    let stray: Vec<_> = std::fs::read_dir(real_dir.path())
        .unwrap()
        .flatten()
        .collect();
    assert_eq!(stray.len(), 1, "temp file renamed away");
}

#[test]
fn block_replacement_shapes() {
    let entries: BTreeSet<String> = ["b".to_string(), "a 'quoted' \"x\"".to_string()].into();
    // Flow list on the key line, followed by a top-level key.
    assert_eq!(
        replace_allowlist_block("command_allowlist: [x, y]\nz: 1\n", &entries),
        "command_allowlist:\n  - \"a 'quoted' \\\"x\\\"\"\n  - \"b\"\nz: 1\n"
    );
    // Absent, no trailing newline: appended on its own line.
    assert_eq!(
        replace_allowlist_block("a: 1", &entries),
        "a: 1\ncommand_allowlist:\n  - \"a 'quoted' \\\"x\\\"\"\n  - \"b\"\n"
    );
    // Trailing comment lines after the block belong to what follows.
    assert_eq!(
        replace_allowlist_block(
            "command_allowlist:\n  - old\n# next\nk: v\n",
            &BTreeSet::new()
        ),
        "command_allowlist: []\n# next\nk: v\n"
    );
    // A nested `command_allowlist` key is not the top-level one.
    assert_eq!(
        replace_allowlist_block(
            "x:\n  command_allowlist:\n    - q\n",
            &BTreeSet::from(["n".to_string()])
        ),
        "x:\n  command_allowlist:\n    - q\ncommand_allowlist:\n  - \"n\"\n"
    );
}

#[test]
fn broken_yaml_is_not_overwritten() {
    let home = tempfile::tempdir().unwrap();
    let path = home.path().join("config.yaml");
    std::fs::write(&path, "command_allowlist: [unclosed\n").unwrap();
    let approvals = Approvals::load(home.path());
    assert!(approvals.approve_permanent("ls").is_err());
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "command_allowlist: [unclosed\n"
    );
    assert!(approvals.is_approved("s", "ls"), "memory still has it");
}

#[test]
fn atomic_write_uses_a_dot_temp_file_and_replaces() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("settings.yaml");
    atomic_write(&target, b"a: 1\n").unwrap();
    atomic_write(&target, b"a: 2\n").unwrap();
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "a: 2\n");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    // A dangling link gets its target created, the link stays.
    let link = dir.path().join("link.yaml");
    std::os::unix::fs::symlink("made.yaml", &link).unwrap();
    assert_eq!(resolve_symlinks(&link), dir.path().join("made.yaml"));
    atomic_write(&resolve_symlinks(&link), b"k: v\n").unwrap();
    assert_eq!(std::fs::read_to_string(&link).unwrap(), "k: v\n");
}
