//! `agent`: the agent loop on one task, with the person at the terminal asked for
//! clarifications and approvals, and Ctrl-C to interrupt.

use super::interrupt::interrupt_on_ctrl_c;
use super::{terminal_prompter, warn_unknown};
use hermes_runtime::Registry;
use serde_json::json;
use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

#[derive(clap::Args)]
pub(super) struct AgentRequest {
    /// The task, in words.
    pub task: String,
    /// Toolsets to offer the model, comma-separated. Default: hermes-cli.
    #[arg(long, value_delimiter = ',')]
    pub toolsets: Option<Vec<String>>,
    /// Toolsets to withhold, comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub disabled: Option<Vec<String>>,
    /// Base URL of the endpoint, up to `/chat/completions` (overrides model.base_url).
    #[arg(long)]
    pub base_url: Option<String>,
    /// Model name (overrides model.name).
    #[arg(long)]
    pub model: Option<String>,
    /// Environment variable that holds the API key (overrides model.api_key_env).
    #[arg(long)]
    pub api_key_env: Option<String>,
    /// Most model requests before giving up (overrides agent.max_iterations, 90).
    #[arg(long)]
    pub max_iterations: Option<u32>,
    /// Seconds to wait for one model reply (overrides model.timeout_seconds, 120).
    #[arg(long)]
    pub timeout: Option<f64>,
    /// Working directory for the tools. Default: the current directory.
    #[arg(long)]
    pub cwd: Option<std::path::PathBuf>,
    /// Session id to record under (a new one by default).
    #[arg(long)]
    pub session_id: Option<String>,
    /// No progress lines on stderr.
    #[arg(long, short)]
    pub quiet: bool,
    /// Print the outcome as JSON (status, answer, error, iterations, session id).
    #[arg(long)]
    pub json: bool,
}

/// `hermes-tools agent`: exit 0 with the final answer on stdout; 1 when the loop ended
/// without one (endpoint failure, iteration budget, interrupt); 2 for usage errors.
pub(super) fn run_agent(registry: Arc<Registry>, request: AgentRequest) -> ExitCode {
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
