//! The smart step against a local OpenAI-compatible server, and the denial breaker.

use hermes_runtime::approval::*;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Clone)]
struct Reply {
    status: u16,
    body: String,
    chunked: bool,
}

fn answer(content: &str) -> Reply {
    Reply {
        status: 200,
        body: json!({"choices": [{"message": {"role": "assistant", "content": content}}]})
            .to_string(),
        chunked: false,
    }
}

struct Seen {
    headers: Vec<String>,
    body: Value,
}

/// Serves exactly `replies.len()` requests on 127.0.0.1, then stops.
fn server(replies: Vec<Reply>) -> (String, Arc<Mutex<Vec<Seen>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let seen2 = Arc::clone(&seen);
    std::thread::spawn(move || {
        for (stream, reply) in listener.incoming().zip(replies) {
            let mut stream = stream.unwrap();
            stream
                .set_read_timeout(Some(Duration::from_secs(5)))
                .unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut headers = Vec::new();
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                if line == "\r\n" || line.is_empty() {
                    break;
                }
                headers.push(line.trim_end().to_string());
            }
            let length: usize = headers
                .iter()
                .find_map(|h| {
                    h.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse().unwrap())
                })
                .unwrap();
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            seen2.lock().unwrap().push(Seen {
                headers,
                body: serde_json::from_slice(&body).unwrap(),
            });
            let response = if reply.chunked {
                let (a, b) = reply.body.split_at(reply.body.len() / 2);
                format!(
                    "HTTP/1.1 {} X\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{a}\r\n{:x}\r\n{b}\r\n0\r\n\r\n",
                    reply.status,
                    a.len(),
                    b.len()
                )
            } else {
                format!(
                    "HTTP/1.1 {} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}",
                    reply.status,
                    reply.body.len(),
                    reply.body
                )
            };
            stream.write_all(response.as_bytes()).unwrap();
        }
    });
    (base, seen)
}

fn endpoint(base: &str) -> SmartEndpoint {
    SmartEndpoint {
        base_url: base.to_string(),
        model: "guard-mini".into(),
        api_key_env: Some("APPROVAL_SMART_TEST_KEY".into()),
        timeout: Duration::from_secs(5),
    }
}

fn request() -> ReviewRequest {
    ReviewRequest {
        command: "rm -rf build && echo '<done>'".into(),
        description: "recursive delete".into(),
        policy: "".into(),
    }
}

#[test]
fn http_guardian_verdicts() {
    let (base, seen) = server(vec![
        answer("APPROVE"),
        answer(" DENY\n"),
        answer("Sure, that looks fine"),
        Reply {
            status: 500,
            body: "{\"error\": \"boom\"}".into(),
            chunked: false,
        },
        answer("approve"),
        Reply {
            chunked: true,
            ..answer("APPROVE")
        },
        Reply {
            status: 200,
            body: "not json".into(),
            chunked: false,
        },
    ]);
    // SAFETY: only this test reads the variable.
    unsafe { std::env::set_var("APPROVAL_SMART_TEST_KEY", "sk-test-123") };
    let guardian = HttpGuardian::new(endpoint(&base));
    let verdicts: Vec<SmartVerdict> = (0..7).map(|_| guardian.review(&request())).collect();
    assert_eq!(
        verdicts,
        [
            SmartVerdict::Approve,
            SmartVerdict::Deny,
            SmartVerdict::Escalate,
            SmartVerdict::Escalate,
            SmartVerdict::Escalate,
            SmartVerdict::Approve,
            SmartVerdict::Escalate,
        ]
    );
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 7);
    let first = &seen[0];
    assert_eq!(first.headers[0], "POST /v1/chat/completions HTTP/1.1");
    assert!(
        first
            .headers
            .iter()
            .any(|h| h.eq_ignore_ascii_case("Authorization: Bearer sk-test-123")),
        "{:?}",
        first.headers
    );
    assert_eq!(first.body["model"], "guard-mini");
    assert_eq!(first.body["temperature"], 0);
    assert_eq!(first.body["max_tokens"], 16);
    assert_eq!(first.body["messages"][0]["role"], "system");
    assert_eq!(first.body["messages"][0]["content"], SYSTEM_PROMPT);
    assert_eq!(
        first.body["messages"][1]["content"],
        "<review_data>\n<description>recursive delete</description>\n<command>rm -rf build &amp;&amp; echo &apos;&lt;done&gt;&apos;</command>\n</review_data>"
    );
}

#[test]
fn unreachable_or_unsupported_endpoints_escalate() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let closed = HttpGuardian::new(endpoint(&format!("http://127.0.0.1:{port}/v1")));
    assert_eq!(closed.review(&request()), SmartVerdict::Escalate);
    let not_http = HttpGuardian::new(endpoint("ftp://127.0.0.1/v1"));
    assert_eq!(not_http.review(&request()), SmartVerdict::Escalate);
}

#[test]
fn https_endpoints_are_spoken_to_over_tls() {
    // A listener that records what the client sends first, then hangs up: a TLS client
    // starts with a handshake record (0x16, version 0x03 0x0N), never with `POST`.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!(
        "https://127.0.0.1:{}/v1",
        listener.local_addr().unwrap().port()
    );
    let first = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut head = [0u8; 3];
        stream.read_exact(&mut head).unwrap();
        head
    });
    let guardian = HttpGuardian::new(endpoint(&base));
    assert_eq!(
        guardian.review(&request()),
        SmartVerdict::Escalate,
        "no TLS server there, so the review escalates"
    );
    let head = first.join().unwrap();
    assert_eq!(head[0], 0x16, "a TLS handshake record: {head:?}");
    assert_eq!(head[1], 0x03);
}

#[test]
fn the_reviewer_follows_config_changes() {
    let (first, first_seen) = server(vec![answer("APPROVE")]);
    let (second, second_seen) = server(vec![answer("APPROVE")]);
    let home = tempfile::tempdir().unwrap();
    let config = |base: &str| {
        format!(
            "approvals:\n  mode: smart\n  smart:\n    base_url: {base}\n    model: guard-mini\n"
        )
    };
    std::fs::write(home.path().join("config.yaml"), config(&first)).unwrap();
    // Someone could be asked, but the reviewer answers first.
    let ctx = ApprovalContext {
        session_key: Some("r".into()),
        interactive: true,
        ..Default::default()
    };
    let nobody_asked: Arc<dyn ApprovalPrompter> =
        Arc::new(|_: &PromptRequest| -> Choice { panic!("the reviewer approves first") });
    let options = GuardOptions {
        prompter: Some(nobody_asked),
        ..Default::default()
    };
    let check = || {
        Approvals::for_home(home.path()).check_all_command_guards(
            "rm -rf build",
            "local",
            &ctx,
            &options,
        )
    };
    assert!(check().smart_approved);
    assert_eq!(first_seen.lock().unwrap().len(), 1);
    // A different file (size differs), so the signature changes even within one mtime tick.
    std::fs::write(
        home.path().join("config.yaml"),
        format!("# moved\n{}", config(&second)),
    )
    .unwrap();
    // `approvals.*` is a permission setting: it applies from the next start.
    hermes_runtime::config::reload_permissions(home.path());
    assert!(check().smart_approved);
    assert_eq!(
        second_seen.lock().unwrap().len(),
        1,
        "the new endpoint reviewed it"
    );
    assert_eq!(first_seen.lock().unwrap().len(), 1);
}

fn smart_approvals(base: &str, threshold: i64) -> (tempfile::TempDir, Approvals) {
    let dir = tempfile::tempdir().unwrap();
    let policy = ApprovalPolicy {
        mode: ApprovalMode::Smart,
        smart: Some(endpoint(base)),
        denial_breaker_threshold: threshold,
        ..Default::default()
    };
    let approvals = Approvals::with_policy(dir.path(), policy);
    approvals.set_process_yolo(false);
    (dir, approvals)
}

/// A person at a terminal whose prompter is not wired: nobody can overrule a smart denial.
fn cli_without_prompter(session: &str) -> ApprovalContext {
    ApprovalContext {
        session_key: Some(session.into()),
        interactive: true,
        ..Default::default()
    }
}

#[test]
fn smart_mode_end_to_end_with_breaker() {
    let (base, seen) = server(vec![
        answer("DENY"),
        answer("DENY"),
        answer("DENY"),
        answer("DENY"),
        answer("APPROVE"),
        answer("DENY"),
        answer("gibberish"),
    ]);
    let (_dir, approvals) = smart_approvals(&base, 3);
    let ctx = cli_without_prompter("b");
    let none = GuardOptions::default();
    let mut messages = Vec::new();
    for _ in 0..4 {
        let result = approvals.check_all_command_guards("rm -rf build", "local", &ctx, &none);
        let json = result.to_json();
        assert_eq!(json["approved"], false);
        assert_eq!(json["smart_denied"], true);
        messages.push(json["message"].as_str().unwrap().to_string());
    }
    assert!(messages
        .iter()
        .all(|m| m.starts_with("BLOCKED by smart approval: ") && m.contains("Do not retry")));
    assert!(!messages[0].contains("Circuit breaker") && !messages[1].contains("Circuit breaker"));
    assert!(
        messages[2].contains("Circuit breaker: 3 consecutive"),
        "{}",
        messages[2]
    );
    assert!(messages[3].contains("Circuit breaker: 4 consecutive"));
    assert_eq!(approvals.denial_streak("b"), 4);
    assert_eq!(approvals.denial_streak("other"), 0, "per session");

    // An approval resets the streak.
    let approved = approvals.check_all_command_guards("rm -rf build", "local", &ctx, &none);
    assert_eq!(
        approved.to_json(),
        json!({"approved": true, "message": null, "smart_approved": true})
    );
    assert_eq!(approvals.denial_streak("b"), 0);
    let again = approvals.check_all_command_guards("rm -rf build", "local", &ctx, &none);
    assert!(!again.message.unwrap().contains("Circuit breaker"));

    // Garbage escalates to a human: here nobody is wired, so the unattended policy
    // refuses it, without claiming anyone was asked.
    let escalated = approvals.check_all_command_guards("rm -rf build", "local", &ctx, &none);
    assert_eq!(escalated.kind, ResultKind::Blocked);
    assert!(!escalated.smart_denied);
    assert!(!escalated.message.unwrap().contains("has been asked"));
    assert_eq!(seen.lock().unwrap().len(), 7);

    // Unreviewable input never reaches the server (the server has no replies left).
    let weird = approvals.check_all_command_guards("rm -rf build\x1b[2J", "local", &ctx, &none);
    assert_eq!(weird.kind, ResultKind::Blocked);
}

#[test]
fn breaker_disabled_at_zero_and_human_denials_do_not_count() {
    let (base, _seen) = server(vec![
        answer("DENY"),
        answer("DENY"),
        answer("DENY"),
        answer("ESCALATE"),
    ]);
    let (_dir, approvals) = smart_approvals(&base, 0);
    let ctx = cli_without_prompter("z");
    for _ in 0..3 {
        let result = approvals.check_all_command_guards(
            "rm -rf build",
            "local",
            &ctx,
            &GuardOptions::default(),
        );
        assert!(!result.message.unwrap().contains("Circuit breaker"));
    }
    assert_eq!(approvals.denial_streak("z"), 3);
    let deny = GuardOptions {
        prompter: Some(Arc::new(|_: &PromptRequest| Choice::Deny)),
        ..Default::default()
    };
    let human = approvals.check_all_command_guards("rm -rf build", "local", &ctx, &deny);
    assert_eq!(human.outcome, Some(Outcome::Denied));
    assert_eq!(
        approvals.denial_streak("z"),
        3,
        "a human denial does not feed the breaker"
    );
}
