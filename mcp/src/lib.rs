//! MCP and plugins for hermes-tools: the dynamic layer of the registry, and an MCP
//! server in front of it.
//!
//! - [`client`]: the servers under `mcp_servers` in config.yaml become tools named
//!   `mcp_<server>_<tool>` in toolset `mcp-<server>`.
//! - [`plugins`]: folders under `$HERMES_HOME/plugins/` and `./.hermes/plugins/` with a
//!   `plugin.yaml` declaring tools and hooks that run as commands.
//! - [`server`]: `hermes-tools mcp`, the registry served over MCP (stdio or streamable HTTP).
//! - [`stdio`]: the stdio transport of that server, which answers `tools/call` itself.
//! - [`library`]: the prompts and resources it serves (skills, stored outputs).
//! - [`caller`]: the client behind a running call (logs, sampling, forms).
//! - [`review`]: the client's model as the smart approval reviewer.
//! - [`sampling`]: the client's model, given tools, as the model of sub-agents.
//!
//! [`attach`] is the one call a front end makes at start: it connects the configured
//! servers and loads the plugins, and says what it loaded and what it skipped.

pub mod caller;
pub mod client;
pub mod convert;
pub mod elicitation;
pub mod http_guard;
pub mod library;
pub mod names;
pub mod review;
pub mod sampling;
pub use hermes_plugins as plugins;
pub mod server;
pub mod stdio;

use hermes_runtime::Registry;
use std::sync::Arc;

/// What [`attach`] loaded and skipped. `Display` prints one line per item.
#[derive(Default)]
pub struct Report {
    /// One entry per server named under `mcp_servers`.
    pub servers: Vec<client::ServerReport>,
    /// One entry per plugin folder found.
    pub plugins: Vec<plugins::PluginReport>,
    /// The live connections; dropping the report keeps them (their tools hold them).
    pub clients: client::McpClients,
}

impl Report {
    /// Names of every tool registered by MCP servers and plugins.
    pub fn tools(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .servers
            .iter()
            .flat_map(|s| s.tools.iter().cloned())
            .collect();
        names.extend(self.plugins.iter().flat_map(|p| p.tools.iter().cloned()));
        names.sort();
        names
    }

    /// Lines about what was skipped or failed (empty when everything loaded).
    pub fn problems(&self) -> Vec<String> {
        let mut lines = Vec::new();
        for server in &self.servers {
            if let Some(error) = &server.error {
                lines.push(format!("mcp server {}: {error}", server.name));
            }
            for (tool, why) in &server.skipped_tools {
                lines.push(format!(
                    "mcp server {}: tool {tool} skipped: {why}",
                    server.name
                ));
            }
        }
        for plugin in &self.plugins {
            if let plugins::PluginStatus::Skipped(why) = &plugin.status {
                lines.push(format!(
                    "plugin {} ({}): skipped: {why}",
                    plugin.id,
                    plugin.path.display()
                ));
            }
        }
        lines
    }
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for server in &self.servers {
            writeln!(f, "{server}")?;
        }
        for plugin in &self.plugins {
            writeln!(f, "{plugin}")?;
        }
        Ok(())
    }
}

/// Connects every enabled server under `mcp_servers` (concurrently, with timeouts)
/// and loads every enabled plugin. Never fails: what could not load is in the report
/// (and logged on stderr). Blocks until the connections are settled; call
/// [`attach_async`] from async code.
pub fn attach(registry: &Arc<Registry>) -> Report {
    let servers = client::connect_configured(registry);
    let plugins = plugins::load_plugins(registry);
    finish(servers, plugins)
}

/// [`attach`] for callers inside a Tokio runtime.
pub async fn attach_async(registry: &Arc<Registry>) -> Report {
    let servers = client::connect_configured_async(registry).await;
    let registry = Arc::clone(registry);
    let plugins = tokio::task::spawn_blocking(move || plugins::load_plugins(&registry))
        .await
        .unwrap_or_default();
    finish(servers, plugins)
}

fn finish(
    (servers, clients): (Vec<client::ServerReport>, client::McpClients),
    plugins: Vec<plugins::PluginReport>,
) -> Report {
    let report = Report {
        servers,
        plugins,
        clients,
    };
    for line in report.problems() {
        eprintln!("warning: {line} (see docs/mcp.md)");
    }
    report
}

/// Test support: a catalog with no built-in tools, for registries that hold only
/// MCP and plugin tools.
#[doc(hidden)]
pub mod testing {
    use hermes_runtime::Catalog;

    pub static EMPTY_CATALOG: Catalog = Catalog {
        tools: &[],
        checks: &[],
        toolsets: &[],
        legacy_toolsets: &[],
        core_tools: &[],
        tool_index: |_| None,
        toolset_index: |_| None,
    };
}
