//! What `hermes-tools mcp` serves beside tools, through the binary on stdio with the
//! Python `mcp` package's `ClientSession` (mcp/tests/fixtures/py_library_client.py):
//! skills as prompts and resources, files tools stored as resources (through the
//! deny-read list), subscriptions, completions, call logs at the level the client
//! set, and text_to_speech's audio as audio content.

mod mcp_support;

use mcp_support::{home_with_skill, walk, walk_to, HttpServer, TOKEN};
use serde_json::{json, Value};
use std::path::Path;

#[test]
fn skills_are_prompts_and_resources() {
    let home = home_with_skill();
    let out = walk(
        home.path(),
        &["--toolsets", "skills,file"],
        json!([
            {"op": "list_prompts"},
            {"op": "get_prompt", "name": "deploy-check", "arguments": {"task": "the billing service"}},
            {"op": "get_prompt", "name": "no-such-skill"},
            {"op": "list_resources"},
            {"op": "list_templates"},
            {"op": "read_resource", "uri": "skill://deploy-check"},
            {"op": "read_resource", "uri": "skill://deploy-check/references/steps.md"},
            {"op": "read_resource", "uri": "skill://deploy-check/../../../config.yaml"},
            {"op": "complete", "ref": {"type": "ref/resource", "uri": "skill://{name}/{path}"}, "argument": {"name": "name", "value": "dep"}},
            {"op": "complete", "ref": {"type": "ref/resource", "uri": "skill://{name}/{path}"}, "argument": {"name": "path", "value": "ref"}, "context": {"name": "deploy-check"}},
        ]),
        &[],
    );
    let steps = out["steps"].as_array().unwrap();
    let prompts = steps[0]["prompts"].as_array().unwrap();
    assert_eq!(prompts.len(), 1, "{}", steps[0]);
    assert_eq!(prompts[0]["name"], "deploy-check");
    assert_eq!(
        prompts[0]["description"],
        "Checks a deployment before it goes out."
    );
    assert_eq!(prompts[0]["arguments"][0]["name"], "task");
    let text = steps[1]["messages"][0]["content"]["text"].as_str().unwrap();
    assert!(text.contains("1. Run the smoke tests."), "{text}");
    assert!(
        text.contains("Apply it to this task: the billing service"),
        "{text}"
    );
    assert!(
        steps[2]["error"]
            .as_str()
            .unwrap()
            .contains("Unknown prompt"),
        "{}",
        steps[2]
    );
    let resources = steps[3]["resources"].as_array().unwrap();
    assert!(
        resources.iter().any(|r| r["uri"] == "skill://deploy-check"),
        "{}",
        steps[3]
    );
    assert_eq!(
        steps[4]["resourceTemplates"][0]["uriTemplate"],
        "skill://{name}/{path}"
    );
    assert!(steps[5]["contents"][0]["text"]
        .as_str()
        .unwrap()
        .contains("# Deploy check"));
    assert_eq!(steps[5]["contents"][0]["mimeType"], "text/markdown");
    assert_eq!(
        steps[6]["contents"][0]["text"],
        "Roll back with `deploy --undo`.\n"
    );
    // skill_view's own checks keep a skill's files inside its folder.
    assert!(steps[7].get("error").is_some(), "{}", steps[7]);
    assert_eq!(steps[8]["completion"]["values"], json!(["deploy-check"]));
    assert_eq!(
        steps[9]["completion"]["values"],
        json!(["references/steps.md"])
    );
}

#[test]
fn skills_are_not_offered_when_their_tools_are_not_served() {
    let home = home_with_skill();
    let out = walk(
        home.path(),
        &["--toolsets", "file"],
        json!([{"op": "list_prompts"}, {"op": "read_resource", "uri": "skill://deploy-check"}]),
        &[],
    );
    assert_eq!(out["steps"][0]["prompts"], json!([]));
    assert!(out["steps"][1]["error"]
        .as_str()
        .unwrap()
        .contains("not found"));
}

#[test]
fn stored_outputs_are_resources_read_through_the_deny_read_list() {
    let home = mcp_support::home();
    let h = home.path();
    let cache = h.join("cache");
    std::fs::create_dir_all(cache.join("spillover")).unwrap();
    std::fs::create_dir_all(cache.join("images")).unwrap();
    let spilled = cache.join("spillover/call_7.txt");
    std::fs::write(&spilled, "line one\nline two\n").unwrap();
    std::fs::write(
        cache.join("images/red.png"),
        [0x89, b'P', b'N', b'G', 0, 1, 2],
    )
    .unwrap();
    // A place of the cache on the deny-read list, a link to it, and a link out of
    // the cache.
    let secrets = cache.join("private");
    std::fs::create_dir_all(&secrets).unwrap();
    std::fs::write(secrets.join("token"), "hunter2").unwrap();
    std::os::unix::fs::symlink(secrets.join("token"), cache.join("spillover/leak.txt")).unwrap();
    std::os::unix::fs::symlink(h.join("config.yaml"), cache.join("spillover/out.txt")).unwrap();
    std::fs::write(
        h.join("config.yaml"),
        format!(
            "terminal:\n  sandbox:\n    mode: \"off\"\n    deny_read: [\"{}\"]\n",
            secrets.display()
        ),
    )
    .unwrap();
    let uri = |path: &Path| hermes_mcp::library::file_uri(path);
    let out = walk(
        h,
        &["--toolsets", "file"],
        json!([
            {"op": "list_resources"},
            {"op": "read_resource", "uri": uri(&spilled)},
            {"op": "read_resource", "uri": uri(&cache.join("images/red.png"))},
            {"op": "read_resource", "uri": uri(&cache.join("spillover/leak.txt"))},
            {"op": "read_resource", "uri": uri(&h.join("config.yaml"))},
            {"op": "read_resource", "uri": uri(&cache.join("spillover/out.txt"))},
            {"op": "read_resource", "uri": uri(&secrets.join("token"))},
            {"op": "subscribe", "uri": uri(&spilled)},
            {"op": "write_file", "path": spilled, "text": "changed\n"},
            {"op": "wait_updated", "seconds": 10},
            {"op": "unsubscribe", "uri": uri(&spilled)},
            {"op": "write_file", "path": spilled, "text": "changed again\n"},
            {"op": "wait_updated", "seconds": 3},
        ]),
        &[],
    );
    let steps = out["steps"].as_array().unwrap();
    let listed: Vec<&str> = steps[0]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["uri"].as_str().unwrap())
        .collect();
    assert!(listed.contains(&uri(&spilled).as_str()), "{listed:?}");
    assert!(
        listed.contains(&uri(&cache.join("images/red.png")).as_str()),
        "{listed:?}"
    );
    assert_eq!(steps[1]["contents"][0]["text"], "line one\nline two\n");
    assert_eq!(steps[1]["contents"][0]["mimeType"], "text/plain");
    assert_eq!(steps[2]["contents"][0]["mimeType"], "image/png");
    assert_eq!(steps[2]["contents"][0]["blob_bytes"], 7);
    let refused = steps[3]["error"].as_str().unwrap_or_default();
    assert!(refused.contains("denied"), "{}", steps[3]);
    assert!(!steps[3].to_string().contains("hunter2"));
    // Only the cache folder is served, whatever the client names.
    assert!(steps[4]["error"]
        .as_str()
        .unwrap_or_default()
        .contains("not found"));
    assert!(steps[5]["error"]
        .as_str()
        .unwrap_or_default()
        .contains("not found"));
    let refused = steps[6]["error"].as_str().unwrap_or_default();
    assert!(refused.contains("denied"), "{}", steps[6]);
    assert!(
        !listed
            .iter()
            .any(|u| u.contains("private") || u.contains("leak")),
        "{listed:?}"
    );
    assert_eq!(steps[9], json!({"updated": true}), "{out}");
    let updates: Vec<&Value> = out["notifications"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["method"] == "notifications/resources/updated")
        .collect();
    assert_eq!(updates.len(), 1, "{out}");
    assert_eq!(updates[0]["params"]["uri"], uri(&spilled));
    assert_eq!(steps[12], json!({"updated": false}), "{out}");
}

#[test]
fn calls_log_at_the_level_the_client_set() {
    let home = mcp_support::home();
    let out = walk(
        home.path(),
        &["--toolsets", "file"],
        json!([
            {"op": "call_tool", "name": "read_file", "arguments": {"path": "config.yaml"}},
            {"op": "set_level", "level": "info"},
            {"op": "call_tool", "name": "read_file", "arguments": {"path": "no-such-file"}},
            {"op": "call_tool", "name": "read_file", "arguments": {"path": "config.yaml"}},
            {"op": "set_level", "level": "debug"},
            {"op": "call_tool", "name": "read_file", "arguments": {"path": "config.yaml"}},
            {"op": "sleep", "seconds": 0.5},
        ]),
        &[],
    );
    let logs: Vec<(String, String)> = out["notifications"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["params"]["logger"] == "hermes-tools/call")
        .map(|n| {
            (
                n["params"]["level"].as_str().unwrap().to_string(),
                n["params"]["data"]["event"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let expected: Vec<(String, String)> = [
        // None before setLevel; at info, no debug "started".
        ("warning", "failed"),
        ("info", "finished"),
        ("debug", "started"),
        ("info", "finished"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(logs, expected, "{out}");
}

#[test]
fn text_to_speech_answers_with_audio_content() {
    let home = mcp_support::home_with("tts:\n  provider: espeak\n");
    let out = walk(
        home.path(),
        &["--toolsets", "tts"],
        json!([
            {"op": "call_tool", "name": "text_to_speech", "arguments": {"text": "Hello from the tool runtime."}},
            {"op": "list_resources"},
        ]),
        &[],
    );
    let result = &out["steps"][0];
    assert_eq!(result["isError"], false, "{result}");
    let content = result["content"].as_array().unwrap();
    let text: Value = serde_json::from_str(content[0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(text["success"], true, "{text}");
    let audio = content
        .iter()
        .find(|c| c["type"] == "audio")
        .unwrap_or_else(|| panic!("no audio block: {result}"));
    assert_eq!(audio["mimeType"], "audio/wav");
    let size = std::fs::metadata(text["file_path"].as_str().unwrap())
        .unwrap()
        .len();
    assert_eq!(audio["data_bytes"], size);
    // The file stays readable as a resource afterwards.
    let file_uri = hermes_mcp::library::file_uri(Path::new(text["file_path"].as_str().unwrap()));
    assert!(out["steps"][1]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["uri"] == file_uri && r["mimeType"] == "audio/wav"));
}

/// A flagged command under `approvals.mode: smart` with no reviewer endpoint, from a
/// client whose model answers `verdict` (none: the client offers no sampling) and
/// whose user declines every form. Returns the client's report and whether the
/// command's target is still there.
fn smart_review(verdict: Option<&str>) -> (Value, bool) {
    let home = mcp_support::home_with("approvals:\n  mode: smart\n");
    let victim = home.path().join("victim");
    std::fs::create_dir_all(victim.join("inner")).unwrap();
    let command = format!("rm -rf {}", victim.display());
    let mut envs = vec![("ELICITATION_ANSWER", "decline")];
    envs.extend(verdict.map(|v| ("SAMPLING_ANSWER", v)));
    let out = walk(
        home.path(),
        &["--toolsets", "terminal"],
        json!([{"op": "call_tool", "name": "terminal", "arguments": {"command": command}}]),
        &envs,
    );
    (out, victim.exists())
}

#[test]
fn the_clients_model_reviews_flagged_commands_through_sampling() {
    let (approved, victim_left) = smart_review(Some("APPROVE"));
    assert!(!victim_left, "an approved command runs: {approved}");
    assert_eq!(approved["steps"][0]["isError"], false, "{approved}");
    let asked = &approved["sampled"][0];
    assert!(asked["systemPrompt"]
        .as_str()
        .unwrap()
        .contains("You review one shell command"));
    let review = asked["messages"][0]["content"]["text"].as_str().unwrap();
    assert!(
        review.contains("<command>rm -rf") && review.contains("victim</command>"),
        "{review}"
    );
    // The model approved: the user was not asked.
    assert_eq!(approved["elicited"], json!([]), "{approved}");

    // The model denied: the user may still allow it once, and declines.
    let (denied, victim_left) = smart_review(Some("DENY"));
    assert!(victim_left, "a denied command does not run: {denied}");
    assert_eq!(denied["sampled"].as_array().unwrap().len(), 1);
    let form = denied["elicited"][0]["message"].as_str().unwrap();
    assert!(
        form.contains("smart reviewer judged it dangerous"),
        "{form}"
    );

    // No sampling: straight to the user.
    let (unasked, victim_left) = smart_review(None);
    assert!(victim_left, "{unasked}");
    assert_eq!(unasked["sampled"], json!([]));
    let form = unasked["elicited"][0]["message"].as_str().unwrap();
    assert!(!form.contains("smart reviewer"), "{form}");
}

#[test]
fn resource_updates_and_call_logs_reach_an_http_client() {
    let home = mcp_support::home();
    let stored = home.path().join("cache/spillover/long.txt");
    std::fs::create_dir_all(stored.parent().unwrap()).unwrap();
    std::fs::write(&stored, "first\n").unwrap();
    let server = HttpServer::start(home.path(), home.path(), &["--toolsets", "file"]);
    let uri = hermes_mcp::library::file_uri(&stored);
    let out = walk_to(
        home.path(),
        &[&server.url()],
        json!([
            {"op": "read_resource", "uri": uri},
            {"op": "subscribe", "uri": uri},
            {"op": "write_file", "path": stored, "text": "second\n"},
            {"op": "wait_updated", "seconds": 10},
            {"op": "set_level", "level": "debug"},
            {"op": "call_tool", "name": "read_file", "arguments": {"path": stored}},
            {"op": "sleep", "seconds": 0.5},
        ]),
        &[("HERMES_MCP_SERVER_TOKEN", TOKEN)],
    );
    let steps = out["steps"].as_array().unwrap();
    assert_eq!(steps[0]["contents"][0]["text"], "first\n", "{out}");
    assert_eq!(steps[3], json!({"updated": true}), "{out}");
    let events: Vec<&str> = out["notifications"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["params"]["logger"] == "hermes-tools/call")
        .filter_map(|n| n["params"]["data"]["event"].as_str())
        .collect();
    assert_eq!(events, ["started", "finished"], "{out}");
}

#[test]
fn clients_of_2024_11_05_get_no_audio_block() {
    let home = mcp_support::home_with("tts:\n  provider: espeak\n");
    let mut session = mcp_support::StdioSession::start(home.path(), &["--toolsets", "tts"]);
    let opened = session.request(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "old", "version": "1"}}}));
    assert_eq!(opened["result"]["protocolVersion"], "2024-11-05");
    session.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let answered = session.request(
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "text_to_speech", "arguments": {"text": "An older client."}}}),
    );
    let content = answered["result"]["content"].as_array().unwrap();
    assert_eq!(content.len(), 1, "{answered}");
    assert_eq!(content[0]["type"], "text");
    assert!(content[0]["text"].as_str().unwrap().contains("MEDIA:"));
}

#[test]
fn a_result_links_the_file_it_stored_and_the_link_reads_it() {
    let home = mcp_support::home_with("tool_output:\n  max_bytes: 2000\n");
    let out = walk(
        home.path(),
        &["--toolsets", "terminal"],
        json!([
            {"op": "call_tool", "name": "terminal", "arguments": {"command": "seq 1 3000"}},
        ]),
        &[],
    );
    let content = out["steps"][0]["content"].as_array().unwrap();
    let result: Value = serde_json::from_str(content[0]["text"].as_str().unwrap()).unwrap();
    let stored = result["full_output_path"]
        .as_str()
        .unwrap_or_else(|| panic!("no stored output: {result}"));
    let link = content
        .iter()
        .find(|c| c["type"] == "resource_link")
        .unwrap_or_else(|| panic!("no link: {out}"));
    assert_eq!(
        link["uri"],
        hermes_mcp::library::file_uri(Path::new(stored))
    );
    let read = walk(
        home.path(),
        &["--toolsets", "terminal"],
        json!([{"op": "read_resource", "uri": link["uri"]}]),
        &[],
    );
    let text = read["steps"][0]["contents"][0]["text"].as_str().unwrap();
    assert!(text.contains("\n1500\n") && text.contains("3000"), "{read}");
}
