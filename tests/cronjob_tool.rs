//! cronjob through the binary: jobs created, listed, run, paused and removed over
//! `serve`, and due jobs run by `hermes-tools cron`, each run an agent-loop session
//! against a local STAND-IN for the model endpoint (agent/tests/support/mod.rs: a
//! scripted HTTP server on 127.0.0.1, not a model). A real endpoint is used by
//! setting `model.base_url`, `model.name` and `model.api_key_env` in config.yaml.

mod binary;
#[path = "../agent/tests/support/mod.rs"]
mod support;

use binary::{content_of, hermes, serve, serve_call};
use serde_json::{json, Value};
use std::path::Path;
use support::{final_answer, last_message, offered_tools, Reply, ScriptedModel};

fn point_at(home: &Path, model: &ScriptedModel) {
    let config = format!(
        "model:\n  base_url: {}\n  name: stand-in\n  api_key_env: HERMES_TEST_NO_SUCH_KEY\n  max_retries: 0\nagent:\n  max_iterations: 4\n",
        model.base_url
    );
    std::fs::write(home.join("config.yaml"), config).unwrap();
}

fn jobs_on_disk(home: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(home.join("cron/jobs.json")).unwrap();
    serde_json::from_str::<Value>(&text).unwrap()["jobs"]
        .as_array()
        .unwrap()
        .clone()
}

fn cronjob(home: &Path, id: &str, args: Value) -> Value {
    content_of(&serve(home, &[], &[serve_call(id, "cronjob", &args)]), id)
}

#[test]
fn a_job_is_created_listed_run_against_the_model_and_removed() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let model = ScriptedModel::script(vec![Reply::Json(final_answer("Sunny, 21 degrees."))]);
    point_at(h, &model);

    let created = cronjob(
        h,
        "c",
        json!({"action": "create", "schedule": "every 2h", "prompt": "Report the weather for Lisbon (MARKER-41)", "name": "weather"}),
    );
    assert_eq!(created["success"], true, "{created}");
    assert_eq!(created["schedule"], "every 120m");
    assert_eq!(created["repeat"], "forever");
    let job_id = created["job_id"].as_str().unwrap().to_string();
    assert_eq!(jobs_on_disk(h)[0]["id"], job_id.as_str());

    let listed = cronjob(h, "l", json!({"action": "list"}));
    assert_eq!(listed["count"], 1);
    assert_eq!(listed["jobs"][0]["name"], "weather");
    assert_eq!(listed["jobs"][0]["state"], "scheduled");

    let ran = cronjob(h, "r", json!({"action": "run", "job_id": job_id}));
    assert_eq!(ran["success"], true, "{ran}");
    assert_eq!(ran["job"]["executed"], true, "{ran}");
    assert_eq!(ran["job"]["execution_success"], true, "{ran}");
    assert_eq!(ran["job"]["last_status"], "ok");
    // The job's prompt reached the model, in a session that cannot schedule or ask.
    assert_eq!(model.request_count(), 1);
    let request = model.request(0);
    assert!(last_message(&request, "user")
        .unwrap()
        .contains("MARKER-41"));
    let offered = offered_tools(&request);
    assert!(offered.contains(&"read_file".to_string()), "{offered:?}");
    assert!(
        !offered.contains(&"cronjob".to_string()) && !offered.contains(&"clarify".to_string()),
        "{offered:?}"
    );
    let output = std::fs::read_to_string(ran["job"]["output_file"].as_str().unwrap()).unwrap();
    assert!(
        output.contains("Sunny, 21 degrees.") && output.contains("MARKER-41"),
        "{output}"
    );
    assert!(ran["job"]["output_file"]
        .as_str()
        .unwrap()
        .contains(&format!("cron/output/{job_id}/")));

    let paused = cronjob(
        h,
        "p",
        json!({"action": "pause", "job_id": "weather", "reason": "holiday"}),
    );
    assert_eq!(paused["job"]["state"], "paused");
    let refused = cronjob(h, "r2", json!({"action": "run", "job_id": job_id}));
    assert_eq!(refused["job"]["executed"], false);
    assert!(refused["job"]["execution_skipped"]
        .as_str()
        .unwrap()
        .contains("paused"));
    let resumed = cronjob(h, "u", json!({"action": "resume", "job_id": job_id}));
    assert_eq!(resumed["job"]["state"], "scheduled");
    let updated = cronjob(
        h,
        "u2",
        json!({"action": "update", "job_id": job_id, "schedule": "0 9 * * *"}),
    );
    assert_eq!(updated["job"]["schedule"], "0 9 * * *");

    let removed = cronjob(h, "x", json!({"action": "remove", "job_id": job_id}));
    assert_eq!(removed["success"], true, "{removed}");
    assert_eq!(removed["removed_job"]["id"], job_id.as_str());
    assert_eq!(cronjob(h, "l2", json!({"action": "list"}))["count"], 0);
    assert_eq!(model.request_count(), 1, "nothing else ran");
}

#[test]
fn bad_input_is_refused_and_stores_nothing() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    for (args, expected) in [
        (
            json!({"action": "create", "prompt": "x"}),
            "schedule is required",
        ),
        (
            json!({"action": "create", "schedule": "every 1h"}),
            "prompt or at least one skill",
        ),
        (
            json!({"action": "create", "schedule": "sometimes", "prompt": "x"}),
            "Invalid schedule",
        ),
        (
            json!({"action": "create", "schedule": "61 * * * *", "prompt": "x"}),
            "Invalid cron expression",
        ),
        (
            json!({"action": "create", "schedule": "2001-01-01T00:00", "prompt": "x"}),
            "in the past",
        ),
        (
            json!({"action": "create", "schedule": "1h", "prompt": "x", "workdir": "relative/dir"}),
            "absolute path",
        ),
        (json!({"action": "remove", "job_id": "nope"}), "not found"),
        (json!({"action": "pause"}), "job_id is required"),
    ] {
        let answer = cronjob(h, "b", args.clone());
        assert_eq!(answer["success"], false, "{args} was accepted: {answer}");
        assert!(
            answer["error"].as_str().unwrap().contains(expected),
            "{args}: {answer}"
        );
    }
    assert!(!h.join("cron/jobs.json").exists() || jobs_on_disk(h).is_empty());
    let once = cronjob(
        h,
        "o",
        json!({"action": "create", "schedule": "30m", "prompt": "x"}),
    );
    assert_eq!(once["repeat"], "once");
    assert!(once["schedule"]
        .as_str()
        .unwrap()
        .starts_with("once in 30m"));
}

#[test]
fn the_cron_command_runs_due_jobs_and_drops_finished_one_shots() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let model = ScriptedModel::script(vec![Reply::Json(final_answer("Backup checked."))]);
    point_at(h, &model);
    let now = chrono::Local::now().format("%Y-%m-%dT%H:%M:%S").to_string();
    let due = cronjob(
        h,
        "d",
        json!({"action": "create", "schedule": now, "prompt": "Check the backups (MARKER-77)"}),
    );
    assert_eq!(due["success"], true, "{due}");
    let later = cronjob(
        h,
        "l",
        json!({"action": "create", "schedule": "every 1d", "prompt": "Not yet"}),
    );
    assert_eq!(later["success"], true);

    let out = hermes(h, &["cron"], "");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pass: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(pass["ran"], 1, "{pass}");
    assert_eq!(pass["jobs"][0]["job_id"], due["job_id"]);
    assert_eq!(pass["jobs"][0]["success"], true, "{pass}");
    assert!(last_message(&model.request(0), "user")
        .unwrap()
        .contains("MARKER-77"));
    let left = jobs_on_disk(h);
    assert_eq!(
        left.len(),
        1,
        "the one-shot is gone after its run: {left:?}"
    );
    assert_eq!(left[0]["id"], later["job_id"]);
    // A second pass finds nothing due.
    let again: Value = serde_json::from_slice(&hermes(h, &["cron"], "").stdout).unwrap();
    assert_eq!(again["ran"], 0);
    assert_eq!(model.request_count(), 1);
}

#[test]
fn cronjob_is_offered_to_sessions_but_not_to_a_bare_schema_request() {
    let home = tempfile::tempdir().unwrap();
    let plain = hermes(home.path(), &["schema", "--toolsets", "cronjob"], "");
    let definitions: Vec<Value> = serde_json::from_slice(&plain.stdout).unwrap();
    assert!(definitions.is_empty(), "{definitions:?}");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hermes-tools"))
        .args(["schema", "--toolsets", "cronjob"])
        .env("HERMES_HOME", home.path())
        .env("HERMES_INTERACTIVE", "1")
        .output()
        .unwrap();
    let definitions: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(definitions[0]["function"]["name"], "cronjob");
}

#[test]
fn the_cron_scheduler_keeps_running_jobs_as_they_fall_due() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let model = ScriptedModel::script(vec![Reply::Json(final_answer("Done."))]);
    point_at(h, &model);
    let mut scheduler = std::process::Command::new(env!("CARGO_BIN_EXE_hermes-tools"))
        .args(["cron", "--watch", "--interval", "1"])
        .env("HERMES_HOME", h)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Created while the scheduler is already running.
    let now = chrono::Local::now().format("%Y-%m-%dT%H:%M:%S").to_string();
    let job = cronjob(
        h,
        "d",
        json!({"action": "create", "schedule": now, "prompt": "Scheduled (MARKER-93)"}),
    );
    let id = job["job_id"].as_str().unwrap().to_string();
    let output_dir = h.join("cron/output").join(&id);
    let mut finished = false;
    for _ in 0..300 {
        if output_dir.read_dir().is_ok_and(|mut d| d.next().is_some()) && jobs_on_disk(h).is_empty()
        {
            finished = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let _ = scheduler.kill();
    let _ = scheduler.wait();
    assert!(finished, "the scheduler did not run the job");
    assert!(last_message(&model.request(0), "user")
        .unwrap()
        .contains("MARKER-93"));
}
