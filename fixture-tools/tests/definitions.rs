//! Toolset resolution, selection and definitions over the merged view, and the
//! dynamic layer's registration rules.

use hermes_fixture_tools::CATALOG;
use hermes_runtime::registry::{Registration, RegistryError};
use hermes_runtime::{Caller, DynamicHandler, DynamicTool, Registry, ToolCall, ToolContext};
use serde_json::{json, Value};
use std::sync::Arc;

fn registry() -> (Registry, tempfile::TempDir) {
    let home = tempfile::tempdir().unwrap();
    (
        Registry::with_home(&CATALOG, home.path().to_path_buf()),
        home,
    )
}

fn names(registry: &Registry, enabled: Option<&[&str]>, disabled: Option<&[&str]>) -> Vec<String> {
    registry
        .definitions(enabled, disabled)
        .names()
        .into_iter()
        .map(str::to_owned)
        .collect()
}

fn dynamic(name: &str, toolset: &str, answer: &'static str) -> DynamicTool {
    let handler = DynamicHandler::Sync(Arc::new(move |_args, _ctx| {
        Ok(Value::String(answer.to_string()))
    }));
    DynamicTool::new(
        name,
        toolset,
        json!({"description": format!("{name} from {toolset}"), "parameters": {"type": "object", "properties": {}}}),
        handler,
    )
}

#[test]
fn selections() {
    let (registry, _home) = registry();
    assert!(
        names(&registry, Some(&[]), None).is_empty(),
        "an empty list selects nothing"
    );
    let all = names(&registry, None, None);
    assert!(all.contains(&"fx_noop".to_string()) && !all.contains(&"fx_needs_key".to_string()));
    let mut sorted = all.clone();
    sorted.sort();
    assert_eq!(all, sorted);
    assert_eq!(
        names(&registry, Some(&["fx_basic"]), None),
        ["fx_async_noop", "fx_echo", "fx_noop"]
    );
    assert_eq!(
        names(&registry, Some(&["fx_basic"]), Some(&["fx_basic"])),
        Vec::<String>::new()
    );
    assert_eq!(
        names(&registry, Some(&["fx_old_tools"]), None),
        ["fx_echo"],
        "legacy name"
    );
    assert_eq!(
        names(&registry, Some(&["fx_basic_tools"]), None),
        ["fx_async_noop", "fx_echo", "fx_noop"],
        "generated legacy name"
    );
    let unknown = registry.definitions(Some(&["nonexistent"]), None);
    assert!(unknown.tools.is_empty());
    assert_eq!(unknown.unknown_toolsets, ["nonexistent"]);
    assert_eq!(
        names(&registry, Some(&["fx_cycle_a"]), None),
        ["fx_echo", "fx_noop"],
        "cycles resolve once"
    );
    assert_eq!(
        registry.resolve_toolset("fx_all_good"),
        [
            "fx_async_noop",
            "fx_echo",
            "fx_noop",
            "fx_rendezvous",
            "fx_sleep"
        ]
    );
    assert!(registry.resolve_toolset("nope").is_empty());
    assert_eq!(
        registry.resolve_toolset("*"),
        registry.resolve_toolset("all")
    );
    // Disabling a preset removes only what it adds to the core.
    let without_preset = names(&registry, None, Some(&["hermes-fx"]));
    assert!(
        without_preset.contains(&"fx_noop".to_string())
            && without_preset.contains(&"fx_echo".to_string())
    );
    assert!(
        !without_preset.contains(&"fx_panic".to_string())
            && !without_preset.contains(&"fx_fail".to_string())
    );
    // ...while disabling a plain toolset removes all of it, even from an enabled composite.
    assert_eq!(
        names(&registry, Some(&["fx_all_good"]), Some(&["fx_slow"])),
        ["fx_async_noop", "fx_echo", "fx_noop"]
    );
}

#[test]
fn definitions_are_openai_functions_with_rewrites() {
    let (registry, _home) = registry();
    let definitions = registry.definitions(Some(&["fx_sandbox", "fx_basic", "fx_broken"]), None);
    let by_name = |n: &str| {
        definitions
            .tools
            .iter()
            .find(|d| d["function"]["name"] == n)
            .cloned()
    };
    let run_code = by_name("fx_run_code").unwrap();
    assert_eq!(run_code["type"], "function");
    // Only the sandbox tools that passed their checks are named.
    assert_eq!(
        run_code["function"]["description"],
        "Run a script. It may call: fx_echo, fx_noop."
    );
    assert_eq!(
        run_code["function"]["parameters"]["required"],
        json!(["code"])
    );
    assert!(by_name("fx_dependent").is_some());
    assert_eq!(
        by_name("fx_broken_schema").unwrap()["function"]["description"],
        "Its dynamic schema panics, so the static one is used."
    );
    let without_noop = registry.definitions(Some(&["fx_sandbox", "fx_echo_tools"]), None);
    let names = without_noop.names();
    assert!(
        !names.contains(&"fx_dependent"),
        "dropped when fx_noop is not offered: {names:?}"
    );
}

#[test]
fn definitions_are_cached_but_never_shared() {
    let (registry, _home) = registry();
    let mut first = registry.definitions::<&str>(None, None);
    let second = registry.definitions::<&str>(None, None);
    assert_eq!(first, second);
    first.tools.push(json!("poison"));
    assert_eq!(
        registry.definitions::<&str>(None, None),
        second,
        "appending to a result does not leak"
    );
    assert_eq!(
        registry.definitions(None, Some(&[] as &[&str])),
        second,
        "no disabled list and an empty one are one selection"
    );
    let generation = registry.generation();
    registry
        .register(
            dynamic("plug_tool", "plugin_x", "\"hi\""),
            &Caller::Plugin("x".into()),
            false,
        )
        .unwrap();
    assert_eq!(registry.generation(), generation + 1);
    assert!(
        registry
            .definitions::<&str>(None, None)
            .names()
            .contains(&"plug_tool"),
        "a registration invalidates the cache"
    );
    assert_eq!(registry.last_resolved_tools().len(), second.tools.len() + 1);
}

#[test]
fn registration_follows_the_override_rules() {
    let (registry, home) = registry();
    let ctx = ToolContext::builder().build();
    let run = |name: &str| registry.handle_function_call(&ToolCall::new(name, json!({})), &ctx);

    // A new name is stored; the same toolset replaces silently.
    assert_eq!(
        registry.register(
            dynamic("mcp_demo_ping", "mcp-demo", "pong"),
            &Caller::Host,
            false
        ),
        Ok(Registration::Stored)
    );
    assert_eq!(run("mcp_demo_ping"), "pong");
    registry
        .register(
            dynamic("mcp_demo_ping", "mcp-demo", "pong 2"),
            &Caller::Host,
            false,
        )
        .unwrap();
    assert_eq!(run("mcp_demo_ping"), "pong 2");

    // Another toolset may not take the name without asking; nothing changes.
    let generation = registry.generation();
    assert_eq!(
        registry.register(
            dynamic("mcp_demo_ping", "mcp-other", "stolen"),
            &Caller::Host,
            false
        ),
        Ok(Registration::Rejected)
    );
    assert_eq!(registry.generation(), generation);
    assert_eq!(run("mcp_demo_ping"), "pong 2");
    assert_eq!(
        registry.register(
            dynamic("fx_noop", "mcp-other", "stolen"),
            &Caller::Host,
            false
        ),
        Ok(Registration::Rejected)
    );
    assert_eq!(run("fx_noop"), "{}");

    // A plugin needs the operator's grant to replace a built-in.
    let refused = registry.register(
        dynamic("fx_noop", "plugin_p", "plugin noop"),
        &Caller::Plugin("p".into()),
        true,
    );
    assert!(
        matches!(refused, Err(RegistryError::Permission(ref m)) if m.contains("plugins.entries.p.allow_tool_override")),
        "{refused:?}"
    );
    assert_eq!(run("fx_noop"), "{}");
    std::fs::write(
        home.path().join("config.yaml"),
        "plugins:\n  entries:\n    p:\n      allow_tool_override: true\n",
    )
    .unwrap();
    // Permission settings apply from the next start (they are held back while running).
    hermes_runtime::config::reload_permissions(home.path());
    let snapshot = registry.snapshot("fx_noop");
    assert_eq!(
        registry.register(
            dynamic("fx_noop", "plugin_p", "plugin noop"),
            &Caller::Plugin("p".into()),
            true
        ),
        Ok(Registration::Stored)
    );
    assert_eq!(run("fx_noop"), "plugin noop");
    assert!(
        !registry
            .resolve_toolset("fx_basic")
            .contains(&"fx_noop".to_string()),
        "the tool moved to plugin_p"
    );
    assert!(registry
        .resolve_toolset("plugin_p")
        .contains(&"fx_noop".to_string()));

    // Unloading restores the built-in, but only if nobody changed the entry since.
    let current = registry.snapshot("fx_noop");
    let stale = Arc::new(dynamic("fx_noop", "plugin_p", "other"));
    assert!(!registry.restore("fx_noop", Some(&stale), snapshot.clone()));
    assert!(registry.restore("fx_noop", current.as_ref(), snapshot));
    assert_eq!(run("fx_noop"), "{}");

    // A broken config grants nothing.
    std::fs::write(home.path().join("config.yaml"), "plugins: [unclosed\n").unwrap();
    assert!(!registry.plugin_may_override("p"));

    // Bad schemas are refused with the tool named.
    let mut bad = dynamic("bad_schema", "x", "");
    bad.schema = json!({"description": "d", "parameters": ["not", "an", "object"]});
    assert!(
        matches!(registry.register(bad, &Caller::Host, false), Err(RegistryError::InvalidSchema(m)) if m.contains("bad_schema"))
    );
}

#[test]
fn mcp_servers_get_toolset_aliases_that_die_with_their_tools() {
    let (registry, _home) = registry();
    registry
        .register(
            dynamic("mcp_dynserver_ping", "mcp-dynserver", "pong"),
            &Caller::Host,
            false,
        )
        .unwrap();
    registry.register_toolset_alias("dynserver", "mcp-dynserver");
    assert!(registry.validate_toolset("dynserver"));
    assert_eq!(
        registry.resolve_toolset("dynserver"),
        ["mcp_dynserver_ping"]
    );
    let view = registry.toolset("mcp-dynserver").unwrap();
    assert_eq!(view.description, "MCP server 'dynserver' tools");
    assert_eq!(
        registry.definitions(Some(&["dynserver"]), None).names(),
        ["mcp_dynserver_ping"]
    );
    let generation = registry.generation();
    assert_eq!(
        registry.deregister("mcp_dynserver_ping", &Caller::Host),
        Ok(true)
    );
    assert!(registry.generation() > generation);
    assert!(
        !registry.validate_toolset("dynserver"),
        "the alias died with the last tool"
    );
    assert!(registry.get("mcp_dynserver_ping").is_none());
    let generation = registry.generation();
    assert_eq!(
        registry.deregister("never_registered", &Caller::Host),
        Ok(false)
    );
    assert_eq!(registry.generation(), generation, "a no-op does not bump");
}

#[test]
fn plugins_may_only_remove_their_own_tools() {
    let (registry, _home) = registry();
    registry
        .register(
            dynamic("owned", "plugin_a", "a"),
            &Caller::Plugin("a".into()),
            false,
        )
        .unwrap();
    assert!(matches!(
        registry.deregister("owned", &Caller::Plugin("b".into())),
        Err(RegistryError::Permission(_))
    ));
    assert_eq!(
        registry.deregister("owned", &Caller::Plugin("a".into())),
        Ok(true)
    );
    assert_eq!(registry.toolset("plugin_a"), None);
    registry
        .register(
            dynamic("plugged", "plugin_a", "a"),
            &Caller::Plugin("a".into()),
            false,
        )
        .unwrap();
    assert_eq!(
        registry.toolset("plugin_a").unwrap().description,
        "Plugin toolset: plugin_a"
    );
    assert!(registry.toolset_names().contains(&"plugin_a".to_string()));
}
