//! Tools that need a model, over `hermes-tools mcp` with no model endpoint set up: they
//! ask the client's model through `sampling/createMessage`, driven by the Python `mcp`
//! package's `ClientSession` (mcp/tests/fixtures/py_library_client.py) whose sampling
//! callback answers and records what it was asked.

mod mcp_support;

use mcp_support::{home_with, walk};
use serde_json::{json, Value};

/// No model endpoint: the default one, whose key variable is not set.
const NO_MODEL: &str = "model:\n  api_key_env: HERMES_TEST_KEY_THAT_IS_NOT_SET\n";

fn delegate(arguments: Value, envs: &[(&str, &str)]) -> (Value, Value) {
    let home = home_with(NO_MODEL);
    let out = walk(
        home.path(),
        &["--toolsets", "delegation"],
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
    }
    assert_eq!(out["steps"][0]["isError"], false, "{out}");
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
