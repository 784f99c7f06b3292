//! Command-line front end: the commands and their options (clap), and which runs.
//! Each command's work is in its module below. Exit status 0 whenever a result was
//! produced (a tool error is a result); 2 for usage errors.

mod agent;
mod call;
mod catalog;
mod check;
mod cron;
mod interrupt;

use crate::restrict::ToolSelection;
use clap::{Args, Parser, Subcommand};
use hermes_runtime::{Catalog, Registry};
use serde_json::Value;
use std::io::Write;
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
    Agent(agent::AgentRequest),
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

/// Whether the command this process was started with (its first argument) is one of
/// `names`, before the arguments are parsed: what `main` decides ahead of the parse.
pub fn command_is(names: &[&str]) -> bool {
    std::env::args_os()
        .nth(1)
        .and_then(|command| command.into_string().ok())
        .is_some_and(|command| names.contains(&command.as_str()))
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
        Command::Serve { .. } | Command::Mcp { .. } | Command::Agent(_) | Command::Cron { .. }
    );
    let registry = Arc::new(if long_lived {
        registry
    } else {
        registry.without_config_watch()
    });
    // Tools that run sessions or scripts (cronjob, execute_code) reach the registry
    // and the kind of session through `current`.
    let kind = match cli.command {
        Command::Agent(_) => Some(crate::current::SessionKind::Interactive),
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
        Command::Agent(request) => return agent::run_agent(registry, request),
        Command::Cron { watch, interval } => return cron::run_cron(&registry, watch, interval),
        Command::List { selection, json } => catalog::list(&registry, &selection, json),
        Command::Schema { selection, strict } => catalog::schema(&registry, &selection, strict),
        Command::Toolsets { json } => catalog::toolsets(&registry, json),
        Command::Call {
            name,
            args,
            task_id,
            cwd,
            selection,
        } => match call::call(&registry, name, args, task_id, cwd, &selection) {
            Ok(text) => text,
            Err(usage) => {
                eprintln!("error: {usage}");
                return ExitCode::from(2);
            }
        },
        Command::Classify { json, command } => {
            check::check_command(&registry, &check::command_line(&command), json)
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
