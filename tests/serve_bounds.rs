//! `hermes-tools serve` answers every line, whatever it holds, within bounded memory.

mod serve_support;

use serde_json::{json, Value};
use serve_support::{call, content, Server};

#[test]
fn every_line_gets_an_answer() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let mut server = Server::start(home.path(), work.path());
    let good = call("ok", "read_file", json!({"path": "missing.txt"}), json!({}));
    let pair = json!([
        call("p1", "read_file", json!({"path": "a"}), json!({})),
        call("p2", "read_file", json!({"path": "b"}), json!({}))
    ]);
    let lines: Vec<Vec<u8>> = vec![
        b"[]".to_vec(),
        b"".to_vec(),
        b"   ".to_vec(),
        b"{not json".to_vec(),
        vec![b'{', 0xff, 0xfe, b'}'],
        call("n", "read_file", json!({}), json!({"task_id": 5}))
            .to_string()
            .into_bytes(),
        call("n", "read_file", json!({}), json!({"session_id": ["s"]}))
            .to_string()
            .into_bytes(),
        json!({"id": 7, "function": {"name": "read_file"}})
            .to_string()
            .into_bytes(),
        json!({"id": "x"}).to_string().into_bytes(),
        b"42".to_vec(),
        json!([{"function": {"name": "read_file"}}, "oops"])
            .to_string()
            .into_bytes(),
        json!({"type": "no_such_message"}).to_string().into_bytes(),
        json!({"type": "clarify_response", "id": "clarify_404", "answer": "x"})
            .to_string()
            .into_bytes(),
        good.to_string().into_bytes(),
        pair.to_string().into_bytes(),
    ];
    let errors = lines.len() - 2;
    for line in &lines {
        server.send_raw(&[line.as_slice(), b"\n"].concat());
    }
    let answers = server.finish();
    assert_eq!(answers.len(), lines.len() + 1, "{answers:#?}");
    let mut error_lines: Vec<u64> = answers
        .iter()
        .filter_map(|a| a.get("line").and_then(Value::as_u64))
        .collect();
    error_lines.sort();
    assert_eq!(
        error_lines,
        (1..=errors as u64).collect::<Vec<_>>(),
        "{answers:#?}"
    );
    for answer in answers.iter().filter(|a| a.get("line").is_some()) {
        assert!(
            answer["error"].as_str().is_some_and(|e| !e.is_empty()),
            "{answer}"
        );
    }
    let wrong_type = answers.iter().find(|a| a["line"] == 6).unwrap();
    assert!(
        wrong_type["error"]
            .as_str()
            .unwrap()
            .contains("`task_id` must be a string"),
        "{wrong_type}"
    );
    let ids: Vec<&str> = answers
        .iter()
        .filter_map(|a| a["tool_call_id"].as_str())
        .collect();
    assert_eq!(ids.len(), 3, "{answers:#?}");
    assert!(ids.contains(&"ok"));
    let p1 = ids.iter().position(|id| *id == "p1").unwrap();
    assert_eq!(
        ids[p1 + 1],
        "p2",
        "an array's answers come together, in order"
    );
}

#[test]
fn a_200_mb_line_is_refused_without_taking_200_mb() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let mut server = Server::start(home.path(), work.path());
    let mut huge = Vec::with_capacity(200 * 1024 * 1024 + 64);
    huge.extend_from_slice(
        b"{\"id\": \"huge\", \"function\": {\"name\": \"write_file\", \"arguments\": \"",
    );
    huge.resize(200 * 1024 * 1024, b'x');
    huge.extend_from_slice(b"\"}}\n");
    server.send_raw(&huge);
    drop(huge);
    let refused = server.next();
    assert_eq!(refused["line"], 1, "{refused}");
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("serve.max_line_bytes"),
        "{refused}"
    );
    let after = server.call(
        "next",
        "read_file",
        json!({"path": "nothing-here"}),
        json!({}),
    );
    assert!(
        after.get("error").is_some(),
        "the next line is served: {after}"
    );
    let peak_mb = server.memory_kb("VmHWM:") / 1024;
    assert!(peak_mb < 256, "peak RSS {peak_mb} MB");
    server.finish();
}

#[test]
fn memory_stays_flat_over_50000_calls() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("small.txt"), "one\ntwo\nthree\n").unwrap();
    let mut server = Server::start(home.path(), work.path());
    let batch = |from: usize, to: usize| {
        let mut text = String::new();
        for n in from..to {
            let ids = json!({"task_id": format!("t{}", n % 8)});
            let args = json!({"path": "small.txt", "offset": 1 + n % 3});
            text.push_str(&call(&format!("c{n}"), "read_file", args, ids).to_string());
            text.push('\n');
        }
        text
    };
    let run = |server: &mut Server, from: usize, to: usize| {
        // Write in slices and read the answers as they come, as a client would.
        for start in (from..to).step_by(500) {
            let end = (start + 500).min(to);
            server.send_raw(batch(start, end).as_bytes());
            for _ in start..end {
                let answer = server.next();
                assert!(content(&answer).is_object(), "{answer}");
            }
        }
    };
    // The heap (anonymous pages), not VmRSS: the resident pages of the
    // binary's own text grow with every crate linked in and say nothing of
    // what the server keeps per call.
    run(&mut server, 0, 1_000);
    let after_1k = server.memory_kb("RssAnon:");
    run(&mut server, 1_000, 50_000);
    let after_50k = server.memory_kb("RssAnon:");
    assert!(
        after_50k < 24 * 1024,
        "heap after 50,000 calls: {after_50k} kB (after 1,000: {after_1k} kB)"
    );
    assert!(
        after_50k < after_1k + 10 * 1024,
        "heap grew from {after_1k} kB to {after_50k} kB"
    );
    server.finish();
}

#[test]
fn a_spilled_result_is_still_a_json_answer() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.yaml"),
        "tool_budget:\n  per_tool:\n    terminal: 500\n",
    )
    .unwrap();
    let mut server = Server::start(home.path(), work.path());
    let spilled = server.call(
        "big",
        "terminal",
        json!({"command": "seq 1 2000"}),
        json!({}),
    );
    assert_eq!(spilled["persisted_output"], true, "{spilled}");
    let saved = std::fs::read_to_string(spilled["path"].as_str().unwrap()).unwrap();
    assert!(
        saved.contains("1999"),
        "the whole result is saved: {saved:.200}"
    );
    assert!(
        spilled["hint"].as_str().unwrap().contains("read_file"),
        "{spilled}"
    );
    server.finish();
}
