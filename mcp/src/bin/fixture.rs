//! Test support for hermes-mcp (not installed with hermes-tools).
//!
//! - `hermes-mcp-fixture serve [--http ADDR]`: the MCP server over a registry with no
//!   built-in tools, plus the MCP servers and plugins of `$HERMES_HOME`.
//! - `hermes-mcp-fixture conformance-client URL`: the client side for the
//!   `@modelcontextprotocol/conformance` client scenarios (`MCP_CONFORMANCE_SCENARIO`):
//!   connects to URL as the configured server `conf` through [`hermes_mcp::attach`], and
//!   calls the scenario's tool through the registry.

use hermes_mcp::server::{HttpOptions, Selection};
use hermes_runtime::{Registry, ToolCall, ToolContext};
use serde_json::{json, Value};
use std::process::ExitCode;
use std::sync::Arc;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("serve") => {
            let registry = Arc::new(Registry::new(&hermes_mcp::testing::EMPTY_CATALOG));
            let http = match args.iter().position(|a| a == "--http") {
                Some(i) => match hermes_mcp::server::parse_http_addr(
                    args.get(i + 1).map_or("", String::as_str),
                ) {
                    Ok(addr) => Some(addr),
                    Err(e) => {
                        eprintln!("error: {e}");
                        return ExitCode::from(2);
                    }
                },
                None => None,
            };
            match hermes_mcp::server::run(
                registry,
                Selection::default(),
                http,
                HttpOptions::default(),
            ) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::from(1)
                }
            }
        }
        Some("conformance-client") => {
            let Some(url) = args.get(1) else {
                eprintln!("usage: hermes-mcp-fixture conformance-client URL");
                return ExitCode::from(2);
            };
            conformance_client(url)
        }
        _ => {
            eprintln!("usage: hermes-mcp-fixture serve [--http ADDR] | conformance-client URL");
            ExitCode::from(2)
        }
    }
}

fn conformance_client(url: &str) -> ExitCode {
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    let home = std::env::temp_dir().join(format!("hermes-mcp-conformance-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&home);
    let config =
        json!({"mcp_servers": {"conf": {"url": url, "timeout": 20, "connect_timeout": 20}}});
    if std::fs::write(home.join("config.yaml"), config.to_string()).is_err() {
        eprintln!("error: cannot write {}", home.display());
        return ExitCode::from(1);
    }
    let registry = Arc::new(Registry::with_home(
        &hermes_mcp::testing::EMPTY_CATALOG,
        home.clone(),
    ));
    let report = hermes_mcp::attach(&registry);
    print!("{report}");
    let call = |name: &str, args: Value| {
        let result = registry
            .handle_function_call(&ToolCall::new(name, args), &ToolContext::builder().build());
        println!("{name} -> {result}");
        result
    };
    let failed = match scenario.as_str() {
        "tools_call" => hermes_mcp::convert::is_error_result(&call(
            "mcp_conf_add_numbers",
            json!({"a": 5, "b": 3}),
        )),
        "sse-retry" => {
            hermes_mcp::convert::is_error_result(&call("mcp_conf_test_reconnection", json!({})))
        }
        _ => report.servers.iter().any(|s| s.error.is_some()),
    };
    report.clients.shutdown();
    let _ = std::fs::remove_dir_all(&home);
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
