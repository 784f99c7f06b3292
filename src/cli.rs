//! Command-line front end. Exit status 0 whenever a result was produced (a tool error
//! is a result); 2 for usage errors.

use crate::restrict::ToolSelection;
use clap::{Args, Parser, Subcommand};
use hermes_runtime::availability::CheckPass;
use hermes_runtime::strict::strict_parameters;
use hermes_runtime::{Catalog, Registry, ToolCall, ToolContext};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::process::ExitCode;
use std::sync::Arc;

#[derive(Parser)]
#[command(
    name = "hermes-tools",
    version,
    about = "A tool runtime for LLM agents: list, describe and call tools",
    after_help = "Manual: README.md and docs/ in the hermes-tools repository."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List tools with their toolset, availability and the environment they need.
    #[command(after_help = "Manual: docs/tools.md in the hermes-tools repository.")]
    List {
        #[command(flatten)]
        selection: SelectionArgs,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Print the tool definitions the model sees, as a JSON array.
    #[command(after_help = "Manual: docs/tools.md in the hermes-tools repository.")]
    Schema {
        #[command(flatten)]
        selection: SelectionArgs,
        /// OpenAI strict mode: every property required, optional ones nullable.
        #[arg(long)]
        strict: bool,
    },
    /// List toolsets, what they include, and the legacy and alias names.
    #[command(after_help = "Manual: docs/tools.md in the hermes-tools repository.")]
    Toolsets {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Call one tool and print its result string.
    #[command(after_help = "Manual: docs/tools.md in the hermes-tools repository.")]
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
        /// Refuse the call unless the tool is in this selection.
        #[command(flatten)]
        selection: SelectionArgs,
    },
    /// Serve tool calls as JSON lines on stdin/stdout (see docs/protocol.md), concurrently.
    /// With `--toolsets`/`--disabled`, calls of tools outside the selection are refused.
    #[command(after_help = "Manual: docs/protocol.md in the hermes-tools repository.")]
    Serve {
        /// `client`: commands that need approval are asked of the client with
        /// `approval_request` lines. Default: nobody is asked (unattended policy).
        #[arg(long, value_name = "WHO")]
        approvals: Option<crate::serve_approvals::ApprovalsMode>,
        /// The client puts images in front of its model: a result that carries an image
        /// (vision_analyze) is answered with `content` as an array of OpenAI content
        /// parts, text and `image_url`.
        #[arg(long)]
        images: bool,
        #[command(flatten)]
        selection: SelectionArgs,
    },
    /// Run the agent loop on a task against an OpenAI-compatible chat-completions
    /// endpoint (config.yaml `model.base_url`, `model.name`, `model.api_key_env`) and
    /// print the final answer. Tool calls are shown on stderr.
    #[command(after_help = "Manual: docs/agent-and-cron.md in the hermes-tools repository.")]
    Agent {
        /// The task, in words.
        task: String,
        /// Toolsets to offer the model, comma-separated. Default: hermes-cli.
        #[arg(long, value_delimiter = ',')]
        toolsets: Option<Vec<String>>,
        /// Toolsets to withhold, comma-separated.
        #[arg(long, value_delimiter = ',')]
        disabled: Option<Vec<String>>,
        /// Base URL of the endpoint, up to `/chat/completions` (overrides model.base_url).
        #[arg(long)]
        base_url: Option<String>,
        /// Model name (overrides model.name).
        #[arg(long)]
        model: Option<String>,
        /// Environment variable that holds the API key (overrides model.api_key_env).
        #[arg(long)]
        api_key_env: Option<String>,
        /// Most model requests before giving up (overrides agent.max_iterations, 90).
        #[arg(long)]
        max_iterations: Option<u32>,
        /// Seconds to wait for one model reply (overrides model.timeout_seconds, 120).
        #[arg(long)]
        timeout: Option<f64>,
        /// Working directory for the tools. Default: the current directory.
        #[arg(long)]
        cwd: Option<std::path::PathBuf>,
        /// Session id to record under (a new one by default).
        #[arg(long)]
        session_id: Option<String>,
        /// No progress lines on stderr.
        #[arg(long, short)]
        quiet: bool,
        /// Print the outcome as JSON (status, answer, error, iterations, session id).
        #[arg(long)]
        json: bool,
    },
    /// Classify a shell command: safe, dangerous (needs approval), hardline (never
    /// runs on a host) or blocked (sudo password guessing, an operator deny rule).
    #[command(name = "check-command")]
    #[command(after_help = "Manual: docs/security.md in the hermes-tools repository.")]
    Classify {
        /// Print `{"verdict", "description", "key"}` instead of a line of text.
        #[arg(long)]
        json: bool,
        /// The command, after `--` so its own options are not read as ours.
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<String>,
    },
    /// Run the scheduled jobs of `cronjob` that are due ($HERMES_HOME/cron/jobs.json),
    /// each as an agent-loop session against the configured model, and print what ran
    /// as JSON. With `--watch`, keep checking every `--interval` seconds until stopped.
    #[command(after_help = "Manual: docs/agent-and-cron.md in the hermes-tools repository.")]
    Cron {
        /// Keep running as a scheduler instead of one pass.
        #[arg(long)]
        watch: bool,
        /// Seconds between passes with `--watch` (default 60).
        #[arg(long, default_value_t = 60)]
        interval: u64,
    },
    /// Serve the tools over MCP: stdio by default, streamable HTTP with `--http`.
    /// MCP servers from config.yaml and plugins are attached first.
    #[command(after_help = "Manual: docs/mcp.md in the hermes-tools repository.")]
    Mcp {
        #[command(flatten)]
        selection: SelectionArgs,
        /// Serve streamable HTTP on ADDR (`PORT` or `IP:PORT`; loopback 127.0.0.1:8765
        /// when given without a value) instead of stdio.
        #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = "")]
        http: Option<String>,
        /// Also accept this Host (and its origins) over HTTP; loopback only by default.
        #[arg(long, value_name = "HOST")]
        allow_host: Vec<String>,
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

impl SelectionArgs {
    fn restriction(&self) -> ToolSelection {
        ToolSelection {
            toolsets: self.toolsets.clone(),
            disabled: self.disabled.clone(),
        }
    }
}

/// Runs the command line over `catalog`: the generated one for `hermes-tools`, a
/// fixture catalog for test binaries.
pub fn run(catalog: &'static Catalog) -> ExitCode {
    let cli = Cli::parse();
    quiet_panics();
    let registry = Registry::new(catalog);
    // Servers, the agent and the scheduler outlive many calls and watch config.yaml for
    // edits; the other commands read it for one command.
    let long_lived = matches!(
        cli.command,
        Command::Serve { .. } | Command::Mcp { .. } | Command::Agent { .. } | Command::Cron { .. }
    );
    let registry = Arc::new(if long_lived {
        registry
    } else {
        registry.without_config_watch()
    });
    // Tools that run sessions or scripts (cronjob, execute_code) reach the registry
    // and the kind of session through `current`.
    let kind = match cli.command {
        Command::Agent { .. } => Some(crate::current::SessionKind::Interactive),
        Command::Serve { .. } => Some(crate::current::SessionKind::Serve),
        Command::Cron { .. } => Some(crate::current::SessionKind::Cron),
        _ => None,
    };
    crate::current::set(&registry, kind);
    if kind == Some(crate::current::SessionKind::Cron) {
        // Scheduled runs have nobody to ask: approvals apply `approvals.cron_mode`.
        // Set while this is the only thread.
        std::env::set_var("HERMES_CRON_SESSION", "1");
    }
    // MCP servers and plugins join the registry for the commands that list or call
    // tools; the connections live as long as `_extensions`. (`mcp` attaches its own.)
    let _extensions = match cli.command {
        Command::Toolsets { .. } | Command::Classify { .. } | Command::Mcp { .. } => None,
        _ => Some(hermes_mcp::attach(&registry)),
    };
    let output = match cli.command {
        Command::Serve {
            approvals,
            images,
            selection,
        } => {
            hermes_runtime::context::set_process_accepts_images(images);
            selection.restriction().enforce_on(&registry);
            return match crate::serve::serve_stdio(registry, approvals.unwrap_or_default()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: serve stopped: {e}");
                    ExitCode::from(1)
                }
            };
        }
        Command::Agent {
            task,
            toolsets,
            disabled,
            base_url,
            model,
            api_key_env,
            max_iterations,
            timeout,
            cwd,
            session_id,
            quiet,
            json,
        } => {
            let request = AgentRequest {
                task,
                toolsets,
                disabled,
                base_url,
                model,
                api_key_env,
                max_iterations,
                timeout,
                cwd,
                session_id,
                quiet,
                json,
            };
            return run_agent(registry, request);
        }
        Command::Cron { watch, interval } => return run_cron(&registry, watch, interval),
        Command::List { selection, json } => list(&registry, &selection, json),
        Command::Schema { selection, strict } => schema(&registry, &selection, strict),
        Command::Toolsets { json } => toolsets(&registry, json),
        Command::Call {
            name,
            args,
            task_id,
            cwd,
            selection,
        } => match call(&registry, name, args, task_id, cwd, &selection) {
            Ok(text) => text,
            Err(usage) => {
                eprintln!("error: {usage}");
                return ExitCode::from(2);
            }
        },
        Command::Classify { json, command } => {
            check_command(&registry, &command_line(&command), json)
        }
        Command::Mcp {
            selection,
            http,
            allow_host,
        } => {
            // MCP results carry images as `image` content blocks.
            hermes_runtime::context::set_process_accepts_images(true);
            let http = match http
                .as_deref()
                .map(hermes_mcp::server::parse_http_addr)
                .transpose()
            {
                Ok(http) => http,
                Err(usage) => {
                    eprintln!("error: {usage}");
                    return ExitCode::from(2);
                }
            };
            crate::current::set_selection(selection.restriction());
            let selection = hermes_mcp::server::Selection {
                toolsets: selection.toolsets,
                disabled: selection.disabled,
            };
            let options = hermes_mcp::server::HttpOptions {
                allowed_hosts: allow_host,
                ..Default::default()
            };
            crate::tools::terminal::set_event_sink(Some(Arc::new(|task: &str, event: &Value| {
                hermes_mcp::elicitation::deliver_notification(task, event);
            })));
            return match hermes_mcp::server::run(registry, selection, http, options) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: mcp server stopped: {e}");
                    ExitCode::from(1)
                }
            };
        }
    };
    let mut stdout = std::io::stdout().lock();
    // A closed pipe (`| head`) is not an error worth a panic.
    let _ = stdout
        .write_all(output.as_bytes())
        .and_then(|_| stdout.flush());
    ExitCode::SUCCESS
}

fn warn_unknown(unknown: &[String]) {
    for name in unknown {
        eprintln!("warning: unknown toolset `{name}` (see `hermes-tools toolsets`)");
    }
}

fn list(registry: &Registry, selection: &SelectionArgs, as_json: bool) -> String {
    let selected =
        registry.select_tools(selection.toolsets.as_deref(), selection.disabled.as_deref());
    warn_unknown(&selected.unknown);
    let mut pass = CheckPass::new(registry.checks());
    let rows: Vec<Value> = selected
        .tools
        .iter()
        .filter_map(|name| registry.get(name))
        .map(|tool| {
            let aliases: Vec<&str> = match &tool {
                hermes_runtime::ToolRef::Static(entry) => entry.aliases.to_vec(),
                hermes_runtime::ToolRef::Dynamic(_) => Vec::new(),
            };
            let available = registry.is_available(&tool, &mut pass);
            let mut row = json!({
                "name": tool.name(),
                "toolset": tool.toolset(),
                "emoji": tool.emoji(),
                "available": available,
                "requires_env": tool.requires_env(),
                "aliases": aliases,
                "description": tool.description(),
            });
            if !available {
                if let Some(reason) = tool.unavailable_reason() {
                    row["reason"] = json!(reason);
                }
            }
            row
        })
        .collect();
    if as_json {
        return format!(
            "{}\n",
            serde_json::to_string_pretty(&rows).expect("JSON serialises")
        );
    }
    let mut out = String::new();
    let width = selected
        .tools
        .iter()
        .map(|n| n.len())
        .max()
        .unwrap_or(4)
        .max(4);
    for row in &rows {
        let available = row["available"].as_bool().unwrap_or(false);
        let status = if available {
            "available".to_string()
        } else {
            let env: Vec<&str> = row["requires_env"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            if let Some(reason) = row["reason"].as_str() {
                format!("unavailable ({reason})")
            } else if env.is_empty() {
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

fn schema(registry: &Registry, selection: &SelectionArgs, strict: bool) -> String {
    let definitions =
        registry.definitions(selection.toolsets.as_deref(), selection.disabled.as_deref());
    warn_unknown(&definitions.unknown_toolsets);
    let mut tools = definitions.tools;
    if strict {
        for tool in &mut tools {
            let function = &mut tool["function"];
            function["parameters"] = strict_parameters(&function["parameters"]);
            function["strict"] = Value::Bool(true);
        }
    }
    format!(
        "{}\n",
        serde_json::to_string_pretty(&tools).expect("JSON serialises")
    )
}

fn toolsets(registry: &Registry, as_json: bool) -> String {
    let catalog = registry.catalog();
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
                        "resolved": registry.resolve_toolset(t.name),
                        "planned": t.planned,
                    }),
                )
            })
            .collect();
        let legacy: serde_json::Map<String, Value> = catalog
            .legacy_toolsets
            .iter()
            .map(|l| (l.name.to_string(), json!(l.tools)))
            .collect();
        let aliases: serde_json::Map<String, Value> = catalog
            .tools
            .iter()
            .flat_map(|t| {
                t.aliases
                    .iter()
                    .map(move |a| (a.to_string(), Value::from(t.name)))
            })
            .collect();
        let out = json!({"toolsets": toolsets, "legacy_toolsets": legacy, "tool_aliases": aliases});
        return format!(
            "{}\n",
            serde_json::to_string_pretty(&out).expect("JSON serialises")
        );
    }
    let mut out = String::new();
    for t in catalog.toolsets {
        let resolved = registry.resolve_toolset(t.name);
        out.push_str(&format!(
            "{} ({} tools): {}\n",
            t.name,
            resolved.len(),
            t.description
        ));
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
        out.push_str(&format!(
            "\ntool aliases:\n    {}\n",
            aliases.join("\n    ")
        ));
    }
    out
}

fn call(
    registry: &Arc<Registry>,
    name: String,
    args: Option<String>,
    task_id: Option<String>,
    cwd: Option<std::path::PathBuf>,
    selection: &SelectionArgs,
) -> Result<String, String> {
    selection.restriction().enforce_on(registry);
    let text = match args.as_deref() {
        Some("-") => {
            let mut buffer = String::new();
            std::io::stdin()
                .read_to_string(&mut buffer)
                .map_err(|e| format!("cannot read arguments from stdin: {e}"))?;
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
    if let Some(prompter) = terminal_prompter() {
        builder = builder.approver(prompter);
    }
    let call = ToolCall::new(name, Value::String(text));
    let result = registry.handle_function_call(&call, &builder.build());
    Ok(format!("{result}\n"))
}

struct AgentRequest {
    task: String,
    toolsets: Option<Vec<String>>,
    disabled: Option<Vec<String>>,
    base_url: Option<String>,
    model: Option<String>,
    api_key_env: Option<String>,
    max_iterations: Option<u32>,
    timeout: Option<f64>,
    cwd: Option<std::path::PathBuf>,
    session_id: Option<String>,
    quiet: bool,
    json: bool,
}

/// `hermes-tools agent`: exit 0 with the final answer on stdout; 1 when the loop ended
/// without one (endpoint failure, iteration budget, interrupt); 2 for usage errors.
fn run_agent(registry: Arc<Registry>, request: AgentRequest) -> ExitCode {
    use hermes_agent::{
        AgentConfig, AgentSession, ClarifyChannel, LoopStatus, NoClarify, SessionOptions,
        TerminalClarify,
    };
    use std::io::IsTerminal;

    if request.task.trim().is_empty() {
        eprintln!("error: the task is empty");
        return ExitCode::from(2);
    }
    let mut config = AgentConfig::from_config(&registry.config());
    if let Some(url) = request.base_url {
        config.model.base_url = url;
    }
    if let Some(model) = request.model {
        config.model.model = model;
    }
    if let Some(env) = request.api_key_env {
        config.model.api_key_env = env;
    }
    if let Some(n) = request.max_iterations {
        config.max_iterations = n.max(1);
    }
    if let Some(seconds) = request.timeout.filter(|s| s.is_finite() && *s > 0.0) {
        config.model.timeout = std::time::Duration::from_secs_f64(seconds);
    }
    // A model with vision is shown images tools return (vision_analyze needs no
    // auxiliary model then).
    hermes_runtime::context::set_process_accepts_images(config.model.supports_vision);
    if config.model.api_key().is_none() && !request.quiet {
        eprintln!(
            "note: ${} is not set; calling {} without an API key",
            config.model.api_key_env, config.model.base_url
        );
    }
    let toolsets = request
        .toolsets
        .unwrap_or_else(|| vec!["hermes-cli".to_string()]);
    let unknown = registry
        .select_tools(Some(&toolsets), request.disabled.as_deref())
        .unknown;
    warn_unknown(&unknown);
    let clarify: Arc<dyn ClarifyChannel> =
        match TerminalClarify::open().filter(|_| std::io::stdin().is_terminal()) {
            Some(terminal) => Arc::new(terminal),
            None => Arc::new(NoClarify::new(
                "there is no terminal to ask on; decide yourself and say what you assumed",
            )),
        };
    let quiet = request.quiet;
    let progress: hermes_agent::ProgressFn = Arc::new(move |line: &str| {
        if !quiet {
            eprintln!("{line}");
        }
    });
    let cancel = hermes_runtime::context::Cancellation::default();
    interrupt_on_ctrl_c(cancel.clone());
    let session = AgentSession::new(
        registry,
        SessionOptions {
            id: request.session_id,
            source: Some("cli".into()),
            toolsets: Some(toolsets),
            disabled_toolsets: request.disabled.unwrap_or_default(),
            clarify: Some(clarify),
            config: Some(config),
            cwd: request.cwd,
            cancel: Some(cancel),
            progress: Some(progress),
            approver: terminal_prompter(),
            notifications: Some(Arc::new(crate::tools::terminal::drain_events)),
            ..Default::default()
        },
    );
    let outcome = session.run(&request.task);
    let mut stdout = std::io::stdout().lock();
    if request.json {
        let out = json!({
            "status": outcome.status.as_str(),
            "final_answer": outcome.final_answer,
            "error": outcome.error,
            "iterations": outcome.iterations,
            "tool_calls": outcome.tool_calls,
            "session_id": session.id(),
        });
        let _ = writeln!(stdout, "{out}");
    } else if let Some(answer) = outcome
        .final_answer
        .as_deref()
        .filter(|_| outcome.status == LoopStatus::Completed)
    {
        let _ = writeln!(stdout, "{answer}");
    }
    let _ = stdout.flush();
    if outcome.status == LoopStatus::Completed {
        return ExitCode::SUCCESS;
    }
    if !request.json {
        eprintln!(
            "error: the agent stopped ({}): {}",
            outcome.status.as_str(),
            outcome.error.as_deref().unwrap_or("no final answer")
        );
        if let Some(partial) = &outcome.final_answer {
            eprintln!("last text from the model:\n{partial}");
        }
    }
    ExitCode::from(1)
}

/// The person at the terminal, when stdin is one: approval requests are asked on
/// `/dev/tty` (once / session / always / deny; timeout and Ctrl-C deny). Without a
/// terminal nobody is asked and the unattended policy applies.
fn terminal_prompter() -> Option<Arc<dyn hermes_runtime::approval::ApprovalPrompter>> {
    use std::io::IsTerminal;
    if !std::io::stdin().is_terminal() {
        return None;
    }
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
        .ok()?;
    Some(Arc::new(hermes_runtime::approval::TerminalPrompter::tty()))
}

/// `hermes-tools cron`: one pass over the due jobs (a JSON line of what ran), or with
/// `watch` a pass every `interval` seconds. Exit 1 when the job store cannot be read.
fn run_cron(registry: &Arc<Registry>, watch: bool, interval: u64) -> ExitCode {
    loop {
        match crate::tools::cronjob::runner::run_due(registry) {
            Ok(ran) => {
                let mut stdout = std::io::stdout().lock();
                let _ = writeln!(stdout, "{}", json!({"ran": ran.len(), "jobs": ran}))
                    .and_then(|_| stdout.flush());
            }
            Err(e) => {
                eprintln!("error: {e}");
                if !watch {
                    return ExitCode::from(1);
                }
            }
        }
        if !watch {
            return ExitCode::SUCCESS;
        }
        std::thread::sleep(std::time::Duration::from_secs(interval.max(1)));
    }
}

/// The first Ctrl-C interrupts the agent (it stops after the current step); a second
/// one exits at once.
fn interrupt_on_ctrl_c(cancel: hermes_runtime::context::Cancellation) {
    use std::sync::atomic::{AtomicBool, Ordering};
    static INTERRUPTED: AtomicBool = AtomicBool::new(false);
    extern "C" fn on_sigint(_: libc::c_int) {
        if INTERRUPTED.swap(true, Ordering::SeqCst) {
            // SAFETY: _exit is async-signal-safe.
            unsafe { libc::_exit(130) };
        }
    }
    // SAFETY: the handler only touches an atomic and calls _exit.
    unsafe {
        libc::signal(libc::SIGINT, on_sigint as *const () as libc::sighandler_t);
    }
    std::thread::spawn(move || loop {
        if INTERRUPTED.load(Ordering::SeqCst) {
            eprintln!("interrupted: stopping after the current step (Ctrl-C again to quit now)");
            cancel.cancel();
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    });
}

fn check_command(registry: &Registry, command: &str, as_json: bool) -> String {
    // The approval flow's view of this installation: homes, temp dir, deny globs.
    let guard =
        hermes_runtime::approval::Approvals::for_home(registry.hermes_home()).guard_context();
    let verdict = hermes_command_guard::classify(command, &guard);
    if as_json {
        let out = json!({
            "verdict": verdict.verdict.as_str(),
            "description": verdict.description,
            "key": verdict.key,
        });
        return format!("{out}\n");
    }
    match verdict.description {
        Some(description) => format!("{}: {description}\n", verdict.verdict.as_str()),
        None => format!("{}\n", verdict.verdict.as_str()),
    }
}

/// One argument is the command as typed; several are re-quoted so `-- bash -c "a | b"`
/// is judged as the shell would have received it.
fn command_line(words: &[String]) -> String {
    if let [single] = words {
        return single.clone();
    }
    let quote = |word: &String| {
        let plain = !word.is_empty()
            && word
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%^".contains(c));
        if plain {
            word.clone()
        } else {
            format!("'{}'", word.replace('\'', "'\\''"))
        }
    };
    words.iter().map(quote).collect::<Vec<_>>().join(" ")
}

/// Handler and probe panics are caught and reported as results; the default hook's
/// multi-line report (and backtrace) on stderr would only add noise to a log.
fn quiet_panics() {
    std::panic::set_hook(Box::new(|info| {
        let location = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        let message = hermes_runtime::availability::panic_message(info.payload());
        eprintln!("panic{location}: {message}");
    }));
}
