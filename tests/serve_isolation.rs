//! `hermes-tools serve` with several clients on one server: each task (its
//! `task_id`, else its `session_id`) has its own shell state, file records and
//! background processes, and a busy task does not hold up a quiet one.

mod serve_support;

use serde_json::{json, Value};
use serve_support::{call, content, Server};

#[test]
fn two_sessions_without_task_ids_do_not_share_shell_state_or_read_records() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let elsewhere = work.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let notes = work.path().join("notes.txt");
    std::fs::write(&notes, "first line\nsecond line\n").unwrap();
    let mut server = Server::start(home.path(), work.path());
    let alpha = json!({"session_id": "alpha"});
    let beta = json!({"session_id": "beta"});

    let moved = server.call(
        "a1",
        "terminal",
        json!({"command": format!("cd {} && export SHELL_MARK=alpha-only", elsewhere.display())}),
        alpha.clone(),
    );
    assert_eq!(moved["exit_code"], 0, "{moved}");
    let seen_by_alpha = server.call(
        "a2",
        "terminal",
        json!({"command": "pwd; echo \"SHELL_MARK=$SHELL_MARK\""}),
        alpha.clone(),
    );
    assert!(
        seen_by_alpha["output"]
            .as_str()
            .unwrap()
            .contains("SHELL_MARK=alpha-only"),
        "{seen_by_alpha}"
    );
    let seen_by_beta = server.call(
        "b1",
        "terminal",
        json!({"command": "pwd; echo \"SHELL_MARK=$SHELL_MARK\""}),
        beta.clone(),
    );
    let beta_output = seen_by_beta["output"].as_str().unwrap();
    assert!(
        beta_output.contains("SHELL_MARK=\n") || beta_output.ends_with("SHELL_MARK="),
        "{seen_by_beta}"
    );
    assert!(!beta_output.contains("elsewhere"), "{seen_by_beta}");

    let read = json!({"path": notes.to_str().unwrap()});
    let first = server.call("a3", "read_file", read.clone(), alpha.clone());
    assert!(
        first["content"].as_str().unwrap().contains("second line"),
        "{first}"
    );
    // beta never read the file: it gets the text, not the "unchanged" stub.
    let for_beta = server.call("b2", "read_file", read.clone(), beta.clone());
    assert!(
        for_beta["content"]
            .as_str()
            .unwrap()
            .contains("second line"),
        "{for_beta}"
    );
    assert_ne!(for_beta["status"], "unchanged", "{for_beta}");
    // alpha read it already: the stub shows the records are kept, per session.
    let again = server.call("a4", "read_file", read, alpha);
    assert_eq!(again["status"], "unchanged", "{again}");
    server.finish();
}

#[test]
fn a_task_cannot_see_or_touch_another_tasks_processes() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let mut server = Server::start(home.path(), work.path());
    let owner = json!({"task_id": "owner"});
    let stranger = json!({"task_id": "stranger"});
    let started = server.call(
        "o1",
        "terminal",
        json!({"command": "sleep 60", "background": true}),
        owner.clone(),
    );
    let id = started["session_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no session_id: {started}"))
        .to_string();

    let listed = server.call("s1", "process", json!({"action": "list"}), stranger.clone());
    assert_eq!(listed["processes"], json!([]), "{listed}");
    for (n, action) in ["poll", "log", "kill", "write"].iter().enumerate() {
        for target in [id.clone(), id[5..9].to_string()] {
            let refused = server.call(
                &format!("s{n}-{target}"),
                "process",
                json!({"action": action, "session_id": target, "data": "x"}),
                stranger.clone(),
            );
            assert_eq!(
                refused["status"], "not_found",
                "{action} {target}: {refused}"
            );
        }
    }

    let listed = server.call("o2", "process", json!({"action": "list"}), owner.clone());
    assert_eq!(listed["processes"].as_array().unwrap().len(), 1, "{listed}");
    let polled = server.call(
        "o3",
        "process",
        json!({"action": "poll", "session_id": &id[..9]}),
        owner.clone(),
    );
    assert_eq!(polled["status"], "running", "{polled}");
    let killed = server.call(
        "o4",
        "process",
        json!({"action": "kill", "session_id": id}),
        owner,
    );
    assert_eq!(killed["status"], "killed", "{killed}");
    server.finish();
}

#[test]
fn a_quiet_task_is_answered_while_another_has_hundreds_of_calls_queued() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("quiet.txt"), "quiet\n").unwrap();
    // Few workers, so the busy task alone could fill them all: the quiet call must
    // still get the next free one.
    std::fs::write(
        home.path().join("config.yaml"),
        "serve:\n  max_in_flight: 4\n",
    )
    .unwrap();
    let mut server = Server::start(home.path(), work.path());
    let busy = 200;
    let mut flood = String::new();
    for n in 0..busy {
        flood.push_str(
            &call(
                &format!("busy{n}"),
                "terminal",
                json!({"command": "sleep 0.05"}),
                json!({"task_id": "busy"}),
            )
            .to_string(),
        );
        flood.push('\n');
    }
    server.send_raw(flood.as_bytes());
    server.send(&call(
        "quiet",
        "read_file",
        json!({"path": "quiet.txt"}),
        json!({"task_id": "quiet"}),
    ));
    let mut busy_before_quiet = None;
    let mut answered = 0;
    while answered < busy + 1 {
        let answer = server.next();
        answered += 1;
        if answer["tool_call_id"] == "quiet" {
            assert!(
                content(&answer)["content"]
                    .as_str()
                    .unwrap()
                    .contains("quiet"),
                "{answer}"
            );
            busy_before_quiet = Some(answered - 1);
        } else {
            assert_eq!(content(&answer)["exit_code"], 0, "{answer}");
        }
    }
    let before = busy_before_quiet.expect("the quiet call was answered");
    assert!(
        before < 30,
        "the quiet call waited behind {before} of the busy task's {busy} calls"
    );
    server.finish();
}

/// The first call of a quiet server runs on the thread that read it; while it sleeps,
/// the input must still be read and other tasks answered, and afterwards the threads
/// that took turns must still serve call after call.
#[test]
fn a_long_call_run_by_the_reading_thread_holds_up_no_other_task() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    for n in 0..3 {
        std::fs::write(
            work.path().join(format!("q{n}.txt")),
            format!("quick {n}\n"),
        )
        .unwrap();
    }
    let mut server = Server::start(home.path(), work.path());
    server.send(&call(
        "slow",
        "terminal",
        json!({"command": "sleep 3; echo slow"}),
        json!({"task_id": "slow"}),
    ));
    for n in 0..3 {
        server.send(&call(
            &format!("q{n}"),
            "read_file",
            json!({"path": format!("q{n}.txt")}),
            json!({"task_id": format!("q{n}")}),
        ));
    }
    for n in 0..3 {
        let answer = server.next();
        assert_ne!(
            answer["tool_call_id"], "slow",
            "the long call was answered before the quick ones: {answer}"
        );
        assert!(
            content(&answer)["content"]
                .as_str()
                .unwrap()
                .contains("quick"),
            "{answer}"
        );
        assert!(
            answer["tool_call_id"].as_str().unwrap().starts_with('q'),
            "answer {n}: {answer}"
        );
    }
    let slow = server.next();
    assert_eq!(slow["tool_call_id"], "slow");
    assert!(
        content(&slow)["output"].as_str().unwrap().contains("slow"),
        "{slow}"
    );
    for n in 0..50 {
        std::fs::write(
            work.path().join(format!("again{n}.txt")),
            format!("again {n}\n"),
        )
        .unwrap();
        let read = server.call(
            &format!("again{n}"),
            "read_file",
            json!({"path": format!("again{n}.txt")}),
            json!({"task_id": format!("t{}", n % 3)}),
        );
        assert_eq!(read["content"], format!("1|again {n}"), "{read}");
    }
    server.finish();
}

#[test]
fn calls_beyond_the_queue_bounds_are_refused_with_an_answer() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.yaml"),
        "serve:\n  max_in_flight_per_task: 1\n  max_queued_per_task: 3\n",
    )
    .unwrap();
    let mut server = Server::start(home.path(), work.path());
    let mut lines = String::new();
    for n in 0..10 {
        lines.push_str(
            &call(
                &format!("c{n}"),
                "terminal",
                json!({"command": "sleep 0.3"}),
                json!({"task_id": "t"}),
            )
            .to_string(),
        );
        lines.push('\n');
    }
    server.send_raw(lines.as_bytes());
    let mut refused = 0;
    let mut ran = 0;
    let mut ids = Vec::new();
    for _ in 0..10 {
        let answer = server.next();
        ids.push(answer["tool_call_id"].as_str().unwrap().to_string());
        let result = content(&answer);
        match result.get("error").and_then(Value::as_str) {
            Some(error) if error.contains("serve.max_queued_per_task") => refused += 1,
            _ => {
                assert_eq!(result["exit_code"], 0, "{answer}");
                ran += 1;
            }
        }
    }
    ids.sort();
    let mut expected: Vec<String> = (0..10).map(|n| format!("c{n}")).collect();
    expected.sort();
    assert_eq!(ids, expected, "every call is answered once");
    // Three waiting always fit (one more if the first started before the fourth
    // arrived); the rest are refused, unless calls finish first, which takes 0.3 s each.
    assert!(refused >= 1 && ran >= 3, "ran {ran}, refused {refused}");
    server.finish();
}
