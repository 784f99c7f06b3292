//! The MCP client against servers no one here wrote: `@modelcontextprotocol/server-everything`
//! (npm) and a FastMCP server of the Python `mcp` package, over stdio and streamable HTTP.

mod common;

use common::*;
use serde_json::json;

#[test]
fn server_everything_over_stdio() {
    let bin = node_bin("mcp-server-everything");
    let home = home_with_config(&format!(
        "tool_budget: {{mcp_result_size_chars: 8000}}\nmcp_servers:\n  everything:\n    command: {}\n    args: [stdio]\n    tools:\n      exclude: [\"trigger_*\", toggle_simulated_logging]\n",
        bin.display()
    ));
    let registry = registry(home.path());
    let report = hermes_mcp::attach(&registry);
    let server = &report.servers[0];
    assert_eq!(server.error, None, "{report}");
    assert!(
        server.tools.contains(&"mcp_everything_echo".to_string()),
        "{report}"
    );
    assert!(
        !server
            .tools
            .iter()
            .any(|t| t.starts_with("mcp_everything_trigger_")),
        "exclude glob ignored: {report}"
    );
    assert!(!server
        .tools
        .contains(&"mcp_everything_toggle_simulated_logging".to_string()));
    // Toolset, alias and the schema the model sees.
    assert_eq!(
        registry.toolset_alias_target("everything").as_deref(),
        Some("mcp-everything")
    );
    let echo = registry.get("mcp_everything_echo").unwrap();
    assert_eq!(echo.toolset(), "mcp-everything");
    assert!(echo.parameters()["properties"]["message"].is_object());
    assert!(registry
        .resolve_toolset("everything")
        .contains(&"mcp_everything_echo".to_string()));
    // Calls: text, argument repair ("2" → 2), an image as the multimodal envelope.
    assert_eq!(
        call_json(&registry, "mcp_everything_echo", json!({"message": "hi"})),
        json!({"result": "Echo: hi"})
    );
    let sum = call_json(
        &registry,
        "mcp_everything_get_sum",
        json!({"a": 1, "b": "2"}),
    );
    assert!(sum["result"].as_str().unwrap().contains('3'), "{sum}");
    let image = call_json(&registry, "mcp_everything_get_tiny_image", json!({}));
    assert_eq!(image["_multimodal"], true, "{image}");
    assert!(image["content"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["type"] == "image_url"
            && c["image_url"]["url"]
                .as_str()
                .unwrap()
                .starts_with("data:image/png;base64,")));
    // The MCP result budget applies (tool_budget.mcp_result_size_chars).
    let long = call(
        &registry,
        "mcp_everything_echo",
        json!({"message": "x".repeat(9000)}),
    );
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&long).unwrap()["persisted_output"],
        true,
        "{long}"
    );
    // The server's own argument errors come back as error results.
    let bad = call_json(
        &registry,
        "mcp_everything_get_sum",
        json!({"a": "not a number"}),
    );
    assert!(bad.get("error").is_some(), "{bad}");
    report.clients.shutdown();
    assert!(registry.get("mcp_everything_echo").is_none());
    assert_eq!(registry.toolset_alias_target("everything"), None);
}

fn py_server_config(name: &str, extra: &str) -> String {
    format!(
        "mcp_servers:\n  {name}:\n    command: {}\n    args: [{}]\n    timeout: 20\n    connect_timeout: 30\n{extra}",
        python().display(),
        fixture("py_server.py").display()
    )
}

#[test]
fn python_server_results_names_and_list_changed() {
    let home = home_with_config(&py_server_config("py-fix", ""));
    let registry = registry(home.path());
    let report = hermes_mcp::attach(&registry);
    assert_eq!(report.servers[0].error, None, "{report}");
    // Sanitised names: the server's `-`; the tool's `.` and `-`.
    assert!(
        registry.get("mcp_py_fix_weird_name_tool").is_some(),
        "{report}"
    );
    assert_eq!(
        registry.get("mcp_py_fix_add").unwrap().toolset(),
        "mcp-py-fix"
    );
    assert_eq!(
        registry.toolset_alias_target("py-fix").as_deref(),
        Some("mcp-py-fix")
    );
    assert_eq!(
        call_json(&registry, "mcp_py_fix_add", json!({"a": 2, "b": 40})),
        json!({"result": "42"})
    );
    assert_eq!(
        call_json(&registry, "mcp_py_fix_weird_name_tool", json!({})),
        json!({"result": "weird ok"})
    );
    let failed = call_json(&registry, "mcp_py_fix_fail", json!({"reason": "loudly"}));
    assert!(
        failed["error"].as_str().unwrap().contains("failed loudly"),
        "{failed}"
    );
    let pixel = call_json(&registry, "mcp_py_fix_pixel", json!({}));
    assert_eq!(pixel["_multimodal"], true, "{pixel}");
    assert!(pixel["text_summary"]
        .as_str()
        .unwrap()
        .contains("one transparent pixel"));

    // tools/list_changed: a new tool appears, a removed one disappears.
    let generation = registry.generation();
    assert_eq!(
        call_json(&registry, "mcp_py_fix_grow", json!({"name": "late"})),
        json!({"result": "added late"})
    );
    assert!(
        wait_for(10, || registry.get("mcp_py_fix_late").is_some()),
        "list_changed not handled"
    );
    assert!(registry.generation() > generation);
    let late = registry.get("mcp_py_fix_late").unwrap();
    assert_eq!(late.description(), "Added at run time: late");
    assert_eq!(
        call_json(&registry, "mcp_py_fix_late", json!({})),
        json!({"result": "late was added at run time"})
    );
    call_json(&registry, "mcp_py_fix_shrink", json!({"name": "late"}));
    assert!(
        wait_for(10, || registry.get("mcp_py_fix_late").is_none()),
        "vanished tool kept"
    );
    assert!(registry.get("mcp_py_fix_add").is_some());
    report.clients.shutdown();
}

#[test]
fn a_server_that_dies_is_reported_and_reconnected() {
    let home = home_with_config(&py_server_config("mortal", ""));
    let registry = registry(home.path());
    let report = hermes_mcp::attach(&registry);
    assert_eq!(report.servers[0].error, None, "{report}");
    let first_pid = call_json(&registry, "mcp_mortal_pid", json!({}))["result"]
        .as_str()
        .unwrap()
        .to_string();
    let died = call_json(&registry, "mcp_mortal_die", json!({}));
    let message = died["error"]
        .as_str()
        .unwrap_or_else(|| panic!("no error: {died}"));
    assert!(message.contains("mortal"), "{message}");
    // Until the reconnect lands, calls say so; then they work against a new process.
    let mut answers = Vec::new();
    let back = wait_for(30, || {
        let answer = call_json(&registry, "mcp_mortal_pid", json!({}));
        let ok = answer
            .get("result")
            .and_then(|r| r.as_str())
            .is_some_and(|pid| pid != first_pid);
        answers.push(answer);
        ok
    });
    assert!(back, "no reconnect: {answers:?}");
    for answer in answers.iter().filter(|a| a.get("error").is_some()) {
        let text = answer["error"].as_str().unwrap();
        assert!(
            text.contains("mortal") && (text.contains("reconnect") || text.contains("connect")),
            "{text}"
        );
    }
    report.clients.shutdown();
}

#[test]
fn python_server_over_streamable_http_with_headers() {
    let port = free_port();
    let _server = ChildGuard(
        std::process::Command::new(python())
            .arg(fixture("py_server.py"))
            .args(["http", &port.to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    assert!(
        wait_for_port(port, 30),
        "the Python HTTP server did not start"
    );
    let home = home_with_config(&format!(
        "mcp_servers:\n  web:\n    url: http://127.0.0.1:{port}/mcp\n    headers: {{X-Test: yes}}\n    tools:\n      include: [add, \"p*\"]\n      exclude: [add]\n"
    ));
    let registry = registry(home.path());
    let report = hermes_mcp::attach(&registry);
    assert_eq!(report.servers[0].error, None, "{report}");
    // include wins over exclude.
    assert_eq!(
        report.servers[0].tools,
        vec!["mcp_web_add", "mcp_web_pid", "mcp_web_pixel"],
        "{report}"
    );
    assert_eq!(
        call_json(&registry, "mcp_web_add", json!({"a": 1, "b": 1})),
        json!({"result": "2"})
    );
    report.clients.shutdown();
}

#[test]
fn config_switches_and_name_collisions() {
    let py = python();
    let py = py.display();
    let script = fixture("py_server.py");
    let home = home_with_config(&format!(
        "mcp_servers:\n\
         \x20 off:\n    command: {py}\n    args: [{s}]\n    enabled: false\n\
         \x20 none:\n    command: {py}\n    args: [{s}]\n    tools: {{include: []}}\n\
         \x20 a-b:\n    command: {py}\n    args: [{s}]\n    tools: {{include: [add]}}\n\
         \x20 a_b:\n    command: {py}\n    args: [{s}]\n    tools: {{include: [add]}}\n\
         \x20 broken:\n    args: [x]\n\
         \x20 missing:\n    command: /nonexistent/server\n",
        s = script.display()
    ));
    let registry = registry(home.path());
    let report = hermes_mcp::attach(&registry);
    let by_name = |n: &str| {
        report
            .servers
            .iter()
            .find(|s| s.name == n)
            .unwrap_or_else(|| panic!("{n} not reported: {report}"))
    };
    assert!(!by_name("off").enabled);
    assert!(
        by_name("none").tools.is_empty() && by_name("none").error.is_none(),
        "{report}"
    );
    assert!(
        by_name("broken")
            .error
            .as_deref()
            .unwrap()
            .contains("command"),
        "{report}"
    );
    assert!(by_name("missing").error.is_some(), "{report}");
    // `a-b` and `a_b` both sanitise to mcp_a_b_add: one wins, the other is skipped with a reason.
    let (ab1, ab2) = (by_name("a-b"), by_name("a_b"));
    assert_eq!(ab1.tools.len() + ab2.tools.len(), 1, "{report}");
    let skipped: Vec<_> = ab1.skipped_tools.iter().chain(&ab2.skipped_tools).collect();
    assert_eq!(skipped.len(), 1, "{report}");
    assert!(
        skipped[0].1.contains("already provided by toolset mcp-a"),
        "{skipped:?}"
    );
    assert!(report.problems().iter().any(|p| p.contains("skipped")));
    assert_eq!(
        call_json(&registry, "mcp_a_b_add", json!({"a": 1, "b": 2})),
        json!({"result": "3"})
    );
    report.clients.shutdown();
}
