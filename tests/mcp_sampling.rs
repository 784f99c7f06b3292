//! Tools that need a model, over `hermes-tools mcp` with no model endpoint set up: they
//! ask the client's model through `sampling/createMessage`, driven by the Python `mcp`
//! package's `ClientSession` (mcp/tests/fixtures/py_library_client.py) whose sampling
//! callback answers and records what it was asked. A client that declares
//! `sampling.tools` answers from a script, asking for tools with `tool_use` blocks.

mod mcp_support;

use mcp_support::{home_with, walk};
use serde_json::{json, Value};
use std::path::Path;

/// No model endpoint: the default one, whose key variable is not set.
const NO_MODEL: &str = "model:\n  api_key_env: HERMES_TEST_KEY_THAT_IS_NOT_SET\n";

fn delegate(arguments: Value, envs: &[(&str, &str)]) -> (Value, Value) {
    let home = home_with(NO_MODEL);
    delegate_in(home.path(), "delegation", arguments, envs)
}

/// `delegate_task` with `arguments` over `hermes-tools mcp --toolsets TOOLSETS` in
/// `home`: the client's report and the tool's result.
fn delegate_in(
    home: &Path,
    toolsets: &str,
    arguments: Value,
    envs: &[(&str, &str)],
) -> (Value, Value) {
    let out = walk(
        home,
        &["--toolsets", toolsets],
        json!([{"op": "call_tool", "name": "delegate_task", "arguments": arguments}]),
        envs,
    );
    let text = out["steps"][0]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{out}"))
        .to_string();
    let result = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    (out, result)
}

fn tool_names(request: &Value) -> Vec<&str> {
    request["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools in {request}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect()
}

/// The texts of the `tool_result` blocks of a request's last message, by tool_use id.
fn tool_results(request: &Value) -> Vec<(String, String, bool)> {
    let last = request["messages"].as_array().unwrap().last().unwrap();
    assert_eq!(last["role"], "user", "{request}");
    last["content"]
        .as_array()
        .unwrap_or_else(|| panic!("{last}"))
        .iter()
        .map(|block| {
            assert_eq!(block["type"], "tool_result", "{last}");
            let text = block["content"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|c| c["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n");
            (
                block["toolUseId"].as_str().unwrap().to_string(),
                text,
                block["isError"] == true,
            )
        })
        .collect()
}

#[test]
fn delegate_task_runs_its_sub_agents_on_the_clients_model() {
    let (out, result) = delegate(
        json!({"tasks": [
            {"goal": "Name the capital of France", "context": "Answer in one word."},
            {"goal": "Name the capital of Italy"},
        ]}),
        &[("SAMPLING_ANSWER", "A one-word answer.")],
    );
    let asked = out["sampled"].as_array().unwrap();
    assert_eq!(asked.len(), 2, "one request per sub-agent: {out}");
    let prompts: Vec<&str> = asked
        .iter()
        .map(|a| a["messages"][0]["content"]["text"].as_str().unwrap())
        .collect();
    let france = prompts
        .iter()
        .find(|p| p.contains("Goal: Name the capital of France"))
        .unwrap_or_else(|| panic!("{prompts:?}"));
    assert!(
        france.contains("Context from the parent agent:\nAnswer in one word."),
        "{france}"
    );
    assert!(prompts
        .iter()
        .any(|p| p.contains("Goal: Name the capital of Italy")));
    for request in asked {
        assert_eq!(
            request["messages"].as_array().unwrap().len(),
            1,
            "{request}"
        );
        assert_eq!(request["messages"][0]["role"], "user");
        let system = request["systemPrompt"].as_str().unwrap();
        assert!(system.contains("You have no tools"), "{system}");
        assert!(request["maxTokens"].as_u64().unwrap() > 0);
        assert!(request_has_no_tools(request), "{request}");
    }

    let results = result["results"].as_array().unwrap();
    assert_eq!(results.len(), 2, "{result}");
    for (index, task) in results.iter().enumerate() {
        assert_eq!(task["task_index"], index, "{task}");
        assert_eq!(task["status"], "completed", "{task}");
        assert_eq!(task["summary"], "A one-word answer.", "{task}");
        assert_eq!(task["tool_calls"], 0, "{task}");
        assert!(
            task["model"].as_str().unwrap().contains("MCP client"),
            "{task}"
        );
        assert!(
            task["note"].as_str().unwrap().contains("sampling.tools"),
            "a client without sampling.tools is told why its sub-agent had no tools: {task}"
        );
    }
    assert_eq!(out["steps"][0]["isError"], false, "{out}");
}

fn request_has_no_tools(request: &Value) -> bool {
    request.get("tools").is_none() && request.get("toolChoice").is_none()
}

#[test]
fn with_sampling_tools_a_sub_agent_runs_its_tools_on_the_clients_model() {
    let home = home_with(NO_MODEL);
    let notes = home.path().join("notes.txt");
    std::fs::write(&notes, "The launch code is 7431.\n").unwrap();
    let script = json!([
        {"tool_use": [
            {"name": "read_file", "input": {"path": notes.to_str().unwrap()}},
            {"name": "terminal", "input": {"command": "echo shell-says && expr 6 '*' 7 && cat notes.txt"}},
            // Flagged, and a sub-agent has nobody to ask: the approval policy blocks it.
            {"name": "terminal", "input": {"command": "echo blocked > blocked-marker; rm -rf blocked-dir"}},
        ]},
        {"text": "What the tools returned: {results}"},
    ]);
    let (out, result) = delegate_in(
        home.path(),
        "delegation,file,terminal",
        json!({"goal": "Find the launch code in notes.txt", "context": "It is in the workspace."}),
        &[("SAMPLING_SCRIPT", &script.to_string())],
    );
    let asked = out["sampled"].as_array().unwrap();
    assert_eq!(asked.len(), 2, "one request per turn: {out}");

    let first = &asked[0];
    let offered = tool_names(first);
    for tool in ["read_file", "terminal", "write_file"] {
        assert!(offered.contains(&tool), "{offered:?}");
    }
    for tool in ["delegate_task", "clarify", "memory", "web_search"] {
        assert!(!offered.contains(&tool), "{tool} offered: {offered:?}");
    }
    assert!(
        first["tools"][0]["inputSchema"]["type"] == "object",
        "{first}"
    );
    assert_eq!(first["toolChoice"]["mode"], "auto", "{first}");
    assert!(first["systemPrompt"]
        .as_str()
        .unwrap()
        .contains("You are a sub-agent"));
    assert_eq!(first["messages"].as_array().unwrap().len(), 1, "{first}");
    let goal = first["messages"][0]["content"]["text"].as_str().unwrap();
    assert!(
        goal.contains("Goal: Find the launch code in notes.txt"),
        "{goal}"
    );

    // The second request carries the conversation: the goal, the model's tool_use
    // blocks, and one user message with a tool_result for each.
    let second = &asked[1];
    let messages = second["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3, "{second}");
    assert_eq!(messages[1]["role"], "assistant");
    let uses: Vec<&Value> = messages[1]["content"].as_array().unwrap().iter().collect();
    assert_eq!(uses.len(), 3, "{second}");
    assert!(uses.iter().all(|u| u["type"] == "tool_use"), "{second}");
    let results = tool_results(second);
    assert_eq!(results.len(), 3, "{second}");
    for ((id, _, _), tool_use) in results.iter().zip(&uses) {
        assert_eq!(id, tool_use["id"].as_str().unwrap());
    }
    for (_, text, failed) in &results[..2] {
        assert!(!failed, "{text}");
        assert!(text.contains("The launch code is 7431."), "{text}");
    }
    assert!(results[1].1.contains("shell-says\\n42"), "{}", results[1].1);
    let (_, blocked, failed) = &results[2];
    assert!(*failed && blocked.contains("BLOCKED"), "{blocked}");
    assert!(!home.path().join("blocked-marker").exists());

    let task = &result["results"][0];
    assert_eq!(task["status"], "completed", "{result}");
    assert_eq!(task["iterations"], 2, "{task}");
    assert_eq!(task["tool_calls"], 3, "{task}");
    assert!(task.get("note").is_none(), "{task}");
    assert!(
        task["model"].as_str().unwrap().contains("MCP client"),
        "{task}"
    );
    let summary = task["summary"].as_str().unwrap();
    assert!(
        summary.starts_with("What the tools returned:")
            && summary.contains("The launch code is 7431.")
            && summary.contains("shell-says\\n42"),
        "{summary}"
    );
}

#[test]
fn a_sub_agent_on_the_clients_model_gets_no_tool_beyond_the_served_ones() {
    let home = home_with(NO_MODEL);
    let marker = home.path().join("made-by-the-sub-agent");
    let script = json!([
        {"tool_use": [{"name": "terminal", "input": {"command": format!("touch {}", marker.display())}}]},
        {"text": "Refused: {results}"},
    ]);
    let (out, result) = delegate_in(
        home.path(),
        "delegation,file",
        json!({"goal": "Create a marker file"}),
        &[("SAMPLING_SCRIPT", &script.to_string())],
    );
    let asked = out["sampled"].as_array().unwrap();
    assert_eq!(asked.len(), 2, "{out}");
    let offered = tool_names(&asked[0]);
    assert!(offered.contains(&"read_file"), "{offered:?}");
    assert!(!offered.contains(&"terminal"), "{offered:?}");
    let results = tool_results(&asked[1]);
    assert_eq!(results.len(), 1);
    let (_, text, failed) = &results[0];
    assert!(failed, "a refused call is an error result: {text}");
    assert!(text.contains("not available in this session"), "{text}");
    assert!(!marker.exists(), "the refused command ran");
    assert_eq!(result["results"][0]["status"], "completed", "{result}");

    // Asking for the tool outright is refused before any sub-agent starts.
    let (out, result) = delegate_in(
        home.path(),
        "delegation,file",
        json!({"goal": "Create a marker file", "toolsets": ["terminal"]}),
        &[("SAMPLING_SCRIPT", "[]")],
    );
    assert_eq!(out["sampled"], json!([]), "{out}");
    let error = result["error"]
        .as_str()
        .unwrap_or_else(|| panic!("{result}"));
    assert!(
        error.contains("does not have") && error.contains("terminal"),
        "{error}"
    );
}

#[test]
fn a_sub_agent_on_the_clients_model_stops_at_the_iteration_budget() {
    let home = home_with(&format!("{NO_MODEL}delegation:\n  max_iterations: 2\n"));
    let again = json!({"tool_use": [{"name": "terminal", "input": {"command": "echo again"}}]});
    let script = json!([again, again, again]);
    let (out, result) = delegate_in(
        home.path(),
        "delegation,terminal",
        json!({"goal": "Loop"}),
        &[("SAMPLING_SCRIPT", &script.to_string())],
    );
    assert_eq!(out["sampled"].as_array().unwrap().len(), 2, "{out}");
    let task = &result["results"][0];
    assert_eq!(task["status"], "budget_exhausted", "{task}");
    assert_eq!(task["iterations"], 2, "{task}");
    assert_eq!(task["tool_calls"], 2, "{task}");
}

#[test]
fn without_sampling_delegate_task_says_no_model_can_run_it() {
    let (out, result) = delegate(json!({"goal": "Name the capital of France"}), &[]);
    assert_eq!(out["sampled"], json!([]), "{out}");
    let task = &result["results"][0];
    assert_eq!(task["status"], "failed", "{result}");
    let error = task["error"].as_str().unwrap();
    assert!(
        error.contains("no model endpoint is set up")
            && error.contains("did not declare the `sampling` capability"),
        "{error}"
    );
}

#[test]
fn cancelling_the_call_stops_a_sub_agent_on_the_clients_model_and_what_it_runs() {
    let home = home_with(NO_MODEL);
    let marker = home.path().join("written-after-the-sleep");
    // The sub-agent's command would leave a mark after 4 s; the call is cancelled at its
    // second "is running" notice, while the command runs.
    let script = json!([
        {"tool_use": [{"name": "terminal", "input": {"command": format!("sleep 4; touch {}", marker.display())}}]},
        {"text": "Should never be asked: {results}"},
    ]);
    let out = walk(
        home.path(),
        &["--toolsets", "delegation,terminal"],
        json!([
            {"op": "cancel_on_progress", "name": "delegate_task",
             "arguments": {"goal": "Sleep, then write a file"},
             "cancel_on": "is running (2 s)", "wait": 4, "quiet": 1},
        ]),
        &[("SAMPLING_SCRIPT", &script.to_string())],
    );
    let cancelled = &out["steps"][0];
    assert_eq!(cancelled["seen"], true, "{out}");
    assert_eq!(cancelled["answered"], false, "{out}");
    assert_eq!(
        out["sampled"].as_array().unwrap().len(),
        1,
        "the sub-agent went on after the cancel: {out}"
    );
    assert!(
        !marker.exists(),
        "the sub-agent's command outlived the cancel"
    );
}

#[test]
fn a_client_that_refuses_a_turn_fails_the_sub_agent_with_its_reason() {
    let home = home_with(NO_MODEL);
    let script = json!([{"tool_use": [{"name": "terminal", "input": {"command": "echo once"}}]}]);
    let (out, result) = delegate_in(
        home.path(),
        "delegation,terminal",
        json!({"goal": "Two turns"}),
        &[("SAMPLING_SCRIPT", &script.to_string())],
    );
    assert_eq!(out["sampled"].as_array().unwrap().len(), 2, "{out}");
    let task = &result["results"][0];
    assert_eq!(task["status"], "failed", "{task}");
    assert_eq!(task["tool_calls"], 1, "{task}");
    let error = task["error"].as_str().unwrap();
    assert!(
        error.starts_with("the MCP client's model was not reached")
            && error.contains("the script has no more answers"),
        "{error}"
    );
}
