//! `hermes-tools serve` keeps its threads to what the calls need: a client that sends
//! each call once it has the answer to the last is served by the threads that read the
//! input, whichever tasks its calls belong to, and never makes the server start a call
//! worker (each would be one more stack and allocator arena held for good).

use serde_json::json;

mod common;

#[test]
fn calls_sent_one_after_another_start_no_call_worker() {
    let f = common::ServeFixture::new(
        "terminal:\n  sandbox:\n    mode: \"off\"\napprovals:\n  unattended_mode: approve\n",
    );
    let mut server = f.serve();
    // Each call outlasts the watchdog's tick, so a second reader takes turns with the
    // first: the next line is read while the answer to the last is written.
    for round in 0..2 {
        for task in 0..12 {
            let r = server.call_in(
                &json!({"task_id": format!("t{task}")}),
                "terminal",
                json!({"command": format!("sleep 0.02; echo {round}")}),
            );
            assert_eq!(r["output"], round.to_string(), "{r}");
        }
    }
    let names = common::thread_names(server.pid());
    assert!(
        names.iter().any(|name| name == "hermes-serve-re"),
        "no second reader took turns: {names:?}"
    );
    assert!(
        !names.iter().any(|name| name.starts_with("hermes-serve-ca")),
        "a call worker was started: {names:?}"
    );
}
