//! skills_list, skill_view and skill_manage through the binary, over a real
//! `$HERMES_HOME/skills` in a temp dir.

mod binary;

use binary::{call, content_of, serve, serve_call};
use serde_json::{json, Value};
use std::path::Path;

const DEPLOY: &str = "---\nname: deploy-app\ndescription: Deploy the web app to staging\ntags: [ops, deploy]\n---\n# Deploy\n1. run `make build`\n2. run `make deploy`\n";

fn manage(home: &Path, args: Value) -> Value {
    call(home, "skill_manage", &args, &[])
}

#[test]
fn a_skill_is_created_listed_viewed_patched_and_deleted() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let empty = call(h, "skills_list", &json!({}), &[]);
    assert_eq!(empty["success"], true);
    assert_eq!(empty["skills"], json!([]));

    let created = manage(
        h,
        json!({"action": "create", "name": "deploy-app", "category": "devops", "content": DEPLOY}),
    );
    assert_eq!(created["success"], true, "{created}");
    assert_eq!(created["path"], "devops/deploy-app");
    let skill_md = h.join("skills/devops/deploy-app/SKILL.md");
    assert_eq!(std::fs::read_to_string(&skill_md).unwrap(), DEPLOY);

    let listed = call(h, "skills_list", &json!({}), &[]);
    assert_eq!(listed["count"], 1);
    assert_eq!(
        listed["skills"][0],
        json!({"name": "deploy-app", "description": "Deploy the web app to staging", "category": "devops"})
    );
    assert_eq!(listed["categories"], json!(["devops"]));
    assert_eq!(
        call(h, "skills_list", &json!({"category": "other"}), &[])["skills"],
        json!([])
    );

    let written = manage(
        h,
        json!({"action": "write_file", "name": "deploy-app", "file_path": "references/hosts.md", "file_content": "staging: 10.0.0.5\n"}),
    );
    assert_eq!(written["success"], true, "{written}");
    let viewed = call(h, "skill_view", &json!({"name": "deploy-app"}), &[]);
    assert_eq!(viewed["content"], DEPLOY);
    assert_eq!(viewed["tags"], json!(["ops", "deploy"]));
    assert_eq!(
        viewed["linked_files"],
        json!({"references": ["references/hosts.md"]})
    );
    let file = call(
        h,
        "skill_view",
        &json!({"name": "devops/deploy-app", "file_path": "references/hosts.md"}),
        &[],
    );
    assert_eq!(file["content"], "staging: 10.0.0.5\n");

    let patched = manage(
        h,
        json!({"action": "patch", "name": "deploy-app", "old_string": "make deploy", "new_string": "make deploy ENV=staging"}),
    );
    assert_eq!(patched["success"], true, "{patched}");
    assert!(std::fs::read_to_string(&skill_md)
        .unwrap()
        .contains("make deploy ENV=staging"));
    // A patch that would remove the frontmatter's description is refused and changes nothing.
    let broken = manage(
        h,
        json!({"action": "patch", "name": "deploy-app", "old_string": "description: Deploy the web app to staging\n", "new_string": ""}),
    );
    assert_eq!(broken["success"], false);
    assert!(
        broken["error"]
            .as_str()
            .unwrap()
            .contains("Patch would break SKILL.md structure"),
        "{broken}"
    );
    assert!(std::fs::read_to_string(&skill_md)
        .unwrap()
        .contains("description: Deploy"));

    let removed = manage(
        h,
        json!({"action": "remove_file", "name": "deploy-app", "file_path": "references/hosts.md"}),
    );
    assert_eq!(removed["success"], true, "{removed}");
    assert!(!h.join("skills/devops/deploy-app/references").exists());

    let deleted = manage(h, json!({"action": "delete", "name": "deploy-app"}));
    assert_eq!(deleted["success"], true, "{deleted}");
    assert!(
        !h.join("skills/devops").exists(),
        "the emptied category folder is removed too"
    );
    let gone = call(h, "skill_view", &json!({"name": "deploy-app"}), &[]);
    assert_eq!(gone["success"], false);
    assert!(gone["error"].as_str().unwrap().contains("not found"));
}

#[test]
fn bad_skills_and_paths_are_refused_and_nothing_is_written() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    for (content, expected) in [
        ("just some text", "must start with YAML frontmatter"),
        ("---\nname: x\ndescription: y\n", "not closed"),
        ("---\ndescription: y\n---\nbody\n", "`name`"),
        ("---\nname: x\n---\nbody\n", "`description`"),
        (
            "---\nname: x\ndescription: y\n---\n\n",
            "instructions after the frontmatter",
        ),
        ("---\n[not, a, mapping]\n---\nbody\n", "mapping"),
    ] {
        let refused = manage(
            h,
            json!({"action": "create", "name": "x", "content": content}),
        );
        assert_eq!(refused["success"], false, "{content:?} was accepted");
        assert!(
            refused["error"].as_str().unwrap().contains(expected),
            "{content:?}: {refused}"
        );
    }
    let bad_name = manage(
        h,
        json!({"action": "create", "name": "../evil", "content": DEPLOY}),
    );
    assert!(
        bad_name["error"]
            .as_str()
            .unwrap()
            .contains("Invalid skill name"),
        "{bad_name}"
    );
    let bad_category = manage(
        h,
        json!({"action": "create", "name": "ok", "category": "a/b", "content": DEPLOY}),
    );
    assert_eq!(bad_category["success"], false);
    assert!(
        !h.join("skills/x").exists() && !h.join("skills/ok").exists() && !h.join("evil").exists()
    );

    assert_eq!(
        manage(
            h,
            json!({"action": "create", "name": "deploy-app", "content": DEPLOY})
        )["success"],
        true
    );
    let again = manage(
        h,
        json!({"action": "create", "name": "deploy-app", "content": DEPLOY}),
    );
    assert!(again["error"].as_str().unwrap().contains("already exists"));
    for path in ["../../outside.md", "/tmp/abs.md", "notes.md", "references"] {
        let refused = manage(
            h,
            json!({"action": "write_file", "name": "deploy-app", "file_path": path, "file_content": "x"}),
        );
        assert_eq!(refused["success"], false, "{path} was written");
    }
    // A support folder that is a symlink out of the skill cannot be written through.
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), h.join("skills/deploy-app/scripts")).unwrap();
    let escaped = manage(
        h,
        json!({"action": "write_file", "name": "deploy-app", "file_path": "scripts/run.sh", "file_content": "x"}),
    );
    assert!(
        escaped["error"]
            .as_str()
            .unwrap()
            .contains("outside the skill"),
        "{escaped}"
    );
    assert!(!outside.path().join("run.sh").exists());
    let view_out = call(
        h,
        "skill_view",
        &json!({"name": "deploy-app", "file_path": "../../config.yaml"}),
        &[],
    );
    assert_eq!(view_out["success"], false);
    let unknown = manage(
        h,
        json!({"action": "patch", "name": "nope", "old_string": "a", "new_string": "b"}),
    );
    assert!(unknown["error"].as_str().unwrap().contains("not found"));
}

#[test]
fn external_and_bundled_skill_folders_are_listed_and_bundled_ones_are_read_only() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let external = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(external.path().join("research/papers")).unwrap();
    std::fs::write(
        external.path().join("research/papers/SKILL.md"),
        "---\nname: papers\ndescription: Find papers\n---\nSearch arXiv.\n",
    )
    .unwrap();
    std::fs::write(
        h.join("config.yaml"),
        format!(
            "skills:\n  external_dirs:\n    - {}\n",
            external.path().display()
        ),
    )
    .unwrap();
    let listed = call(h, "skills_list", &json!({}), &[]);
    assert_eq!(listed["skills"][0]["name"], "papers", "{listed}");
    assert_eq!(listed["skills"][0]["category"], "research");

    let bundled = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(bundled.path().join("shipped")).unwrap();
    std::fs::write(
        bundled.path().join("shipped/SKILL.md"),
        "---\nname: shipped\ndescription: Comes with the install\n---\nDo it.\n",
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hermes-tools"))
        .args([
            "call",
            "skill_manage",
            &json!({"action": "delete", "name": "shipped"}).to_string(),
        ])
        .env("HERMES_HOME", h)
        .env("HERMES_BUNDLED_SKILLS", bundled.path())
        .output()
        .unwrap();
    let refused: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        refused["error"].as_str().unwrap().contains("read-only"),
        "{refused}"
    );
    assert!(bundled.path().join("shipped/SKILL.md").exists());
}

#[test]
fn skills_are_served_over_serve_as_well() {
    let home = tempfile::tempdir().unwrap();
    let answers = serve(
        home.path(),
        &["--toolsets", "skills"],
        &[serve_call(
            "c",
            "skill_manage",
            &json!({"action": "create", "name": "a-skill", "content": DEPLOY.replace("deploy-app", "a-skill")}),
        )],
    );
    assert_eq!(content_of(&answers, "c")["success"], true, "{answers:?}");
    let answers = serve(
        home.path(),
        &["--toolsets", "skills"],
        &[serve_call("l", "skills_list", &json!({}))],
    );
    assert_eq!(content_of(&answers, "l")["skills"][0]["name"], "a-skill");
}

#[test]
fn a_local_skill_hides_an_external_one_of_the_same_name() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let external = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(external.path().join("shared")).unwrap();
    std::fs::write(
        external.path().join("shared/SKILL.md"),
        "---\nname: shared\ndescription: External copy\n---\nExternal.\n",
    )
    .unwrap();
    std::fs::write(
        h.join("config.yaml"),
        format!(
            "skills:\n  external_dirs: [{}]\n",
            external.path().display()
        ),
    )
    .unwrap();
    let created = manage(
        h,
        json!({"action": "create", "name": "shared", "content": "---\nname: shared\ndescription: Local copy\n---\nLocal.\n"}),
    );
    // Creating over a name an external folder already has is refused, as in any root.
    assert!(
        created["error"]
            .as_str()
            .unwrap()
            .contains("already exists"),
        "{created}"
    );
    std::fs::create_dir_all(h.join("skills/shared")).unwrap();
    std::fs::write(
        h.join("skills/shared/SKILL.md"),
        "---\nname: shared\ndescription: Local copy\n---\nLocal.\n",
    )
    .unwrap();
    let listed = call(h, "skills_list", &json!({}), &[]);
    assert_eq!(listed["count"], 1, "{listed}");
    assert_eq!(listed["skills"][0]["description"], "Local copy");
    let viewed = call(h, "skill_view", &json!({"name": "shared"}), &[]);
    assert_eq!(
        viewed["content"], "---\nname: shared\ndescription: Local copy\n---\nLocal.\n",
        "{viewed}"
    );
}
