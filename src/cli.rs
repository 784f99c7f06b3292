//! Command-line front end. Exit status 0 whenever a result was produced (a tool error
//! is a result); 2 for usage errors.

use clap::{Args, Parser, Subcommand};
use hermes_runtime::availability::{CheckCache, CheckPass};
use hermes_runtime::definitions::{is_tool_available, tool_definitions};
use hermes_runtime::dispatch::{handle_function_call, ToolCall};
use hermes_runtime::strict::strict_parameters;
use hermes_runtime::toolsets::{resolve_toolset, select_tools};
use hermes_runtime::{Catalog, ToolContext};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "hermes-tools", version, about = "A tool runtime for LLM agents: list, describe and call tools")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List tools with their toolset, availability and the environment they need.
    List {
        #[command(flatten)]
        selection: SelectionArgs,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Print the tool definitions the model sees, as a JSON array.
    Schema {
        #[command(flatten)]
        selection: SelectionArgs,
        /// OpenAI strict mode: every property required, optional ones nullable.
        #[arg(long)]
        strict: bool,
    },
    /// List toolsets, what they include, and the legacy and alias names.
    Toolsets {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Call one tool and print its result string.
    Call {
        /// Tool name (an alias works too).
        name: String,
        /// Arguments as a JSON object; `-` reads them from stdin. Default `{}`.
        args: Option<String>,
        /// Task id: tools keep per-task state (working directory, read history) under it.
        #[arg(long)]
        task_id: Option<String>,
        /// Working directory for relative paths. Default: the current directory.
        #[arg(long)]
        cwd: Option<std::path::PathBuf>,
    },
}

#[derive(Args)]
struct SelectionArgs {
    /// Toolsets to enable, comma-separated (`all` for every one). Default: all.
    #[arg(long, value_delimiter = ',')]
    toolsets: Option<Vec<String>>,
    /// Toolsets to remove, comma-separated; applied last.
    #[arg(long, value_delimiter = ',')]
    disabled: Option<Vec<String>>,
}

pub fn run() -> ExitCode {
    let cli = Cli::parse();
    let catalog: &Catalog = &hermes_tools::CATALOG;
    let output = match cli.command {
        Command::List { selection, json } => list(catalog, &selection, json),
        Command::Schema { selection, strict } => schema(catalog, &selection, strict),
        Command::Toolsets { json } => toolsets(catalog, json),
        Command::Call { name, args, task_id, cwd } => match call(catalog, name, args, task_id, cwd) {
            Ok(text) => text,
            Err(usage) => {
                eprintln!("error: {usage}");
                return ExitCode::from(2);
            }
        },
    };
    let mut stdout = std::io::stdout().lock();
    // A closed pipe (`| head`) is not an error worth a panic.
    let _ = stdout.write_all(output.as_bytes()).and_then(|_| stdout.flush());
    ExitCode::SUCCESS
}

fn warn_unknown(unknown: &[String]) {
    for name in unknown {
        eprintln!("warning: unknown toolset `{name}` (see `hermes-tools toolsets`)");
    }
}

fn list(catalog: &Catalog, selection: &SelectionArgs, as_json: bool) -> String {
    let selected = select_tools(catalog, selection.toolsets.as_deref(), selection.disabled.as_deref());
    warn_unknown(&selected.unknown);
    let cache = CheckCache::default();
    let mut pass = CheckPass::new(&cache);
    let rows: Vec<Value> = selected
        .tools
        .iter()
        .map(|name| {
            let entry = catalog.tool(name).expect("selected tools exist");
            json!({
                "name": entry.name,
                "toolset": entry.toolset,
                "emoji": entry.emoji_or_default(),
                "available": is_tool_available(catalog, entry, &mut pass),
                "requires_env": entry.requires_env,
                "aliases": entry.aliases,
                "description": entry.description,
            })
        })
        .collect();
    if as_json {
        return format!("{}\n", serde_json::to_string_pretty(&rows).expect("JSON serialises"));
    }
    let mut out = String::new();
    let width = selected.tools.iter().map(|n| n.len()).max().unwrap_or(4).max(4);
    for row in &rows {
        let available = row["available"].as_bool().unwrap_or(false);
        let status = if available {
            "available".to_string()
        } else {
            let env: Vec<&str> = row["requires_env"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
            if env.is_empty() {
                "unavailable".to_string()
            } else {
                format!("unavailable (needs {})", env.join(", "))
            }
        };
        out.push_str(&format!(
            "{} {:width$}  {:16} {}\n",
            row["emoji"].as_str().unwrap_or_default(),
            row["name"].as_str().unwrap_or_default(),
            row["toolset"].as_str().unwrap_or_default(),
            status,
        ));
    }
    out
}

fn schema(catalog: &Catalog, selection: &SelectionArgs, strict: bool) -> String {
    let cache = CheckCache::default();
    let definitions = tool_definitions(catalog, &cache, selection.toolsets.as_deref(), selection.disabled.as_deref());
    warn_unknown(&definitions.unknown_toolsets);
    let mut tools = definitions.tools;
    if strict {
        for tool in &mut tools {
            let function = &mut tool["function"];
            function["parameters"] = strict_parameters(&function["parameters"]);
            function["strict"] = Value::Bool(true);
        }
    }
    format!("{}\n", serde_json::to_string_pretty(&tools).expect("JSON serialises"))
}

fn toolsets(catalog: &Catalog, as_json: bool) -> String {
    if as_json {
        let toolsets: serde_json::Map<String, Value> = catalog
            .toolsets
            .iter()
            .map(|t| {
                (
                    t.name.to_string(),
                    json!({
                        "description": t.description,
                        "tools": t.tools,
                        "includes": t.includes,
                        "resolved": resolve_toolset(catalog, t.name),
                        "planned": t.planned,
                    }),
                )
            })
            .collect();
        let legacy: serde_json::Map<String, Value> =
            catalog.legacy_toolsets.iter().map(|l| (l.name.to_string(), json!(l.tools))).collect();
        let aliases: serde_json::Map<String, Value> = catalog
            .tools
            .iter()
            .flat_map(|t| t.aliases.iter().map(move |a| (a.to_string(), Value::from(t.name))))
            .collect();
        let out = json!({"toolsets": toolsets, "legacy_toolsets": legacy, "tool_aliases": aliases});
        return format!("{}\n", serde_json::to_string_pretty(&out).expect("JSON serialises"));
    }
    let mut out = String::new();
    for t in catalog.toolsets {
        let resolved = resolve_toolset(catalog, t.name);
        out.push_str(&format!("{} ({} tools): {}\n", t.name, resolved.len(), t.description));
        if !resolved.is_empty() {
            out.push_str(&format!("    tools: {}\n", resolved.join(", ")));
        }
        if !t.includes.is_empty() {
            out.push_str(&format!("    includes: {}\n", t.includes.join(", ")));
        }
    }
    let legacy: Vec<String> = catalog
        .legacy_toolsets
        .iter()
        .filter(|l| !l.tools.is_empty())
        .map(|l| format!("{} -> {}", l.name, l.tools.join(", ")))
        .collect();
    if !legacy.is_empty() {
        out.push_str(&format!("\nlegacy names:\n    {}\n", legacy.join("\n    ")));
    }
    let aliases: Vec<String> = catalog
        .tools
        .iter()
        .flat_map(|t| t.aliases.iter().map(move |a| format!("{a} -> {}", t.name)))
        .collect();
    if !aliases.is_empty() {
        out.push_str(&format!("\ntool aliases:\n    {}\n", aliases.join("\n    ")));
    }
    out
}

fn call(
    catalog: &Catalog,
    name: String,
    args: Option<String>,
    task_id: Option<String>,
    cwd: Option<std::path::PathBuf>,
) -> Result<String, String> {
    let text = match args.as_deref() {
        Some("-") => {
            let mut buffer = String::new();
            std::io::stdin().read_to_string(&mut buffer).map_err(|e| format!("cannot read arguments from stdin: {e}"))?;
            buffer
        }
        Some(text) => text.to_string(),
        None => String::new(),
    };
    let mut builder = ToolContext::builder();
    if let Some(task_id) = task_id {
        builder = builder.task_id(task_id);
    }
    if let Some(cwd) = cwd {
        builder = builder.cwd(cwd);
    }
    let call = ToolCall { name, arguments: Some(Value::String(text)), ..Default::default() };
    let result = handle_function_call(catalog, &call, &builder.build());
    Ok(format!("{result}\n"))
}
