//! `hermes-tools serve`: calls of one task that touch shared state run, and answer, in
//! the order their lines arrived (the turn rules of an array: reads may overlap, writes
//! to one path and exclusive tools such as `terminal` keep their order), while other
//! tasks' calls still run beside them.

mod serve_support;

use serde_json::{json, Value};
use serve_support::{call, content, Server};

fn home() -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.yaml"),
        "terminal:\n  sandbox:\n    mode: \"off\"\n",
    )
    .unwrap();
    home
}

/// Answers by call id, and the order their lines came in.
fn collect(
    server: &Server,
    count: usize,
) -> (std::collections::HashMap<String, Value>, Vec<String>) {
    let mut by_id = std::collections::HashMap::new();
    let mut order = Vec::new();
    for _ in 0..count {
        let answer = server.next();
        let id = answer["tool_call_id"]
            .as_str()
            .unwrap_or_else(|| panic!("{answer}"))
            .to_string();
        order.push(id.clone());
        by_id.insert(id, answer);
    }
    (by_id, order)
}

fn position(order: &[String], id: &str) -> usize {
    order
        .iter()
        .position(|o| o == id)
        .unwrap_or_else(|| panic!("no answer {id}"))
}

#[test]
fn pipelined_lines_of_a_task_see_their_predecessor() {
    let home = home();
    let work = tempfile::tempdir().unwrap();
    let mut server = Server::start(home.path(), work.path());
    const TASKS: usize = 12;
    const ROUNDS: usize = 3;
    let mut lines = Vec::new();
    for task in 0..TASKS {
        for round in 0..ROUNDS {
            let dir = work.path().join(format!("t{task}/r{round}"));
            std::fs::create_dir_all(&dir).unwrap();
            let ids = json!({"task_id": format!("task-{task}")});
            lines.push(call(
                &format!("cd-{task}-{round}"),
                "terminal",
                json!({"command": format!("cd {}", dir.display())}),
                ids.clone(),
            ));
            lines.push(call(
                &format!("pwd-{task}-{round}"),
                "terminal",
                json!({"command": "pwd"}),
                ids.clone(),
            ));
            let file = work.path().join(format!("t{task}/note.txt"));
            lines.push(call(
                &format!("write-{task}-{round}"),
                "write_file",
                json!({"path": file, "content": format!("round {round}\n")}),
                ids.clone(),
            ));
            lines.push(call(
                &format!("read-{task}-{round}"),
                "read_file",
                json!({"path": file}),
                ids,
            ));
        }
    }
    // All at once, as a client that pipelines writes them.
    let mut bytes = Vec::new();
    for line in &lines {
        bytes.extend_from_slice(format!("{line}\n").as_bytes());
    }
    server.send_raw(&bytes);
    let (answers, order) = collect(&server, lines.len());
    let mut wrong = Vec::new();
    for task in 0..TASKS {
        for round in 0..ROUNDS {
            let dir = work.path().join(format!("t{task}/r{round}"));
            let pwd = content(&answers[&format!("pwd-{task}-{round}")]);
            if pwd["output"].as_str().map(str::trim) != Some(&dir.display().to_string()) {
                wrong.push(format!("pwd-{task}-{round} saw {}", pwd["output"]));
            }
            let read = content(&answers[&format!("read-{task}-{round}")]);
            if !read["content"]
                .as_str()
                .unwrap_or_default()
                .contains(&format!("round {round}"))
            {
                wrong.push(format!("read-{task}-{round} saw {}", read["content"]));
            }
            // Each answer of the task comes after the one before it.
            let sequence = [
                format!("cd-{task}-{round}"),
                format!("pwd-{task}-{round}"),
                format!("write-{task}-{round}"),
                format!("read-{task}-{round}"),
            ];
            for pair in sequence.windows(2) {
                if position(&order, &pair[0]) > position(&order, &pair[1]) {
                    wrong.push(format!("{} answered before {}", pair[1], pair[0]));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} calls out of order: {wrong:#?}",
        wrong.len(),
        lines.len()
    );
    server.finish();
}

#[test]
fn other_tasks_still_run_beside_a_long_call() {
    let home = home();
    let work = tempfile::tempdir().unwrap();
    let mut server = Server::start(home.path(), work.path());
    let marker = work.path().join("slow-may-end");
    // The slow call ends only once the fast task's call has run: if tasks were served one
    // after the other, it would wait out its whole timeout.
    server.send(&call(
        "slow",
        "terminal",
        json!({"command": format!("for i in $(seq 300); do [ -e {m} ] && break; sleep 0.1; done; [ -e {m} ] && echo saw-it", m = marker.display()), "timeout": 60}),
        json!({"task_id": "slow-task"}),
    ));
    server.send(&call(
        "fast",
        "write_file",
        json!({"path": marker, "content": "go\n"}),
        json!({"task_id": "fast-task"}),
    ));
    let (answers, order) = collect(&server, 2);
    assert_eq!(order, vec!["fast".to_string(), "slow".to_string()]);
    assert!(
        content(&answers["slow"])["output"]
            .as_str()
            .unwrap_or_default()
            .contains("saw-it"),
        "{:?}",
        answers["slow"]
    );
    server.finish();
}
