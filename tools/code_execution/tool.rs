//! `execute_code`: a Python script that calls the sandbox tools (file tools, terminal,
//! web tools when this build has them) through a generated `hermes_tools` module.
//!
//! The script runs as a child process on the machine of the local terminal backend,
//! in the task's working directory, started by [`child::spawn_script`] (the single
//! spawn point an OS sandbox of that backend can wrap). Its tool calls come back over
//! a Unix socket and run through the registry like direct calls. Only tools that are
//! both sandbox tools and enabled for the session get functions, so a disabled tool
//! cannot even be imported; the server refuses any other name too.

use hermes_runtime::prelude::*;
use hermes_runtime::Registry;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod child;
mod rpc;
mod stubs;

const DEFAULT_TIMEOUT_SECONDS: u64 = 300;
const DEFAULT_MAX_TOOL_CALLS: usize = 50;

struct Limits {
    timeout: u64,
    max_calls: usize,
}

fn limits(config: &hermes_runtime::config::Config) -> Limits {
    let timeout = config.get("code_execution.timeout").and_then(Value::as_u64).filter(|t| *t > 0).unwrap_or(DEFAULT_TIMEOUT_SECONDS);
    let max_calls = config.positive_usize("code_execution.max_tool_calls").unwrap_or(DEFAULT_MAX_TOOL_CALLS);
    Limits { timeout, max_calls }
}

fn configured_python(config: &hermes_runtime::config::Config) -> Option<String> {
    config.get("code_execution.python").and_then(Value::as_str).map(str::to_owned)
}

/// Offered where a Python interpreter can run scripts.
pub fn sandbox_available() -> bool {
    let config = hermes_runtime::config::Config::load(&hermes_runtime::context::default_hermes_home());
    child::find_python(configured_python(&config).as_deref()).is_some()
}

/// The description and `code` parameter name only the sandbox tools offered this turn.
pub fn execute_code_schema(schema: &SchemaContext) -> Option<Value> {
    let enabled: Vec<&str> = stubs::SANDBOX_TOOLS.iter().copied().filter(|t| schema.is_available(t)).collect();
    let config = hermes_runtime::config::Config::load(&hermes_runtime::context::default_hermes_home());
    let limits = limits(&config);
    Some(json!({
        "description": stubs::description(&enabled, limits.max_calls, limits.timeout),
        "parameters": {
            "type": "object",
            "properties": {
                "code": {
                    "type": "string",
                    "description": format!(
                        "Python code to run. Import tools with `from hermes_tools import {}` and print the result to stdout.",
                        stubs::import_example(&enabled)
                    ),
                }
            },
            "required": ["code"],
        },
    }))
}

/// Run a Python script that calls tools programmatically through `from hermes_tools import ...`; print the result to stdout. Use it for 3 or more tool calls with logic between them, for filtering large outputs, and for loops.
#[tool(toolset = "code_execution", emoji = "🐍", max_result_chars = 100_000, check = sandbox_available, dynamic_schema = execute_code_schema)]
pub fn execute_code(
    /// Python code to run. Import tools with `from hermes_tools import terminal, ...` and print the result to stdout.
    code: String,
    ctx: &ToolContext,
) -> ToolResult {
    if code.trim().is_empty() {
        return Ok(ToolOutput::error("No code provided."));
    }
    let Some(registry) = registry_for(ctx) else {
        return Ok(ToolOutput::error("execute_code needs the runtime's registry; run it through hermes-tools call, serve, mcp or agent"));
    };
    let config = registry.config();
    match crate::tools::terminal::config::TerminalConfig::load(ctx.hermes_home()) {
        Ok(terminal) if terminal.backend == "local" => {}
        Ok(terminal) => {
            return Ok(ToolOutput::error(format!(
                "execute_code runs scripts on the local terminal backend only; this installation's terminal backend is `{}`. Use terminal() there instead.",
                terminal.backend
            )))
        }
        Err(e) => return Ok(ToolOutput::error(format!("execute_code cannot read the terminal configuration: {e}"))),
    }
    // A script can spawn processes and touch files without passing the terminal's
    // command checks, so the script as a whole goes through the approval flow first.
    if let Err(refusal) = approve_script(&code, ctx) {
        return Ok(ToolOutput::json(&refusal));
    }
    let Some(python) = child::find_python(configured_python(&config).as_deref()) else {
        return Ok(ToolOutput::error("execute_code needs python3 on PATH (or code_execution.python in config.yaml)"));
    };
    let limits = limits(&config);
    let allowed = enabled_sandbox_tools(ctx, &registry);
    match run(&code, &python, ctx, registry, allowed, &limits) {
        Ok(result) => Ok(ToolOutput::json(&result)),
        Err(e) => Ok(ToolOutput::json(&json!({"status": "error", "error": e, "tool_calls_made": 0, "duration_seconds": 0.0}))),
    }
}

/// The runtime's execute_code guard: where nobody can approve (call, serve, mcp, cron
/// without an operator's `approvals.*_mode: approve`) the script is refused; a gateway
/// or ask user approves it once; an interactive terminal session runs it.
fn approve_script(code: &str, ctx: &ToolContext) -> Result<(), Value> {
    use hermes_runtime::approval::{ApprovalContext, Approvals, GuardOptions};
    let approvals = Approvals::for_home(ctx.hermes_home());
    let mut context = ApprovalContext::from_env();
    if !ctx.session_id().is_empty() {
        context.session_key = Some(ctx.session_id().to_string());
    }
    let options = GuardOptions { has_host_access: true, ..Default::default() };
    let verdict = approvals.check_execute_code_guard(code, "local", &context, &options);
    if verdict.is_approved() {
        return Ok(());
    }
    Err(json!({
        "status": "error",
        "error": verdict.message.unwrap_or_else(|| "execute_code was not approved.".into()),
        "tool_calls_made": 0,
        "duration_seconds": 0.0,
    }))
}

fn registry_for(ctx: &ToolContext) -> Option<Arc<Registry>> {
    ctx.agent_session_as::<hermes_agent::AgentSession>().map(|s| Arc::clone(s.registry())).or_else(crate::current::registry)
}

/// Sandbox tools the session offers: the command's selection (`--toolsets`,
/// `--disabled`), narrowed to what an attached agent session offers its model.
fn enabled_sandbox_tools(ctx: &ToolContext, registry: &Registry) -> Vec<String> {
    let selection = crate::current::selection();
    let offered = registry.definitions(selection.toolsets.as_deref(), selection.disabled.as_deref());
    let mut names: Vec<String> = offered.names().into_iter().filter(|n| stubs::SANDBOX_TOOLS.contains(n)).map(str::to_owned).collect();
    if let Some(session) = ctx.agent_session_as::<hermes_agent::AgentSession>() {
        let in_session: Vec<String> = session.definitions().iter().filter_map(|d| d["function"]["name"].as_str().map(str::to_owned)).collect();
        names.retain(|n| in_session.contains(n));
    }
    names
}

/// A private folder for the module, the script and the socket; removed on drop.
struct Staging(PathBuf);

impl Staging {
    fn new() -> Result<Staging, String> {
        let dir = std::env::temp_dir().join(format!("hermes-exec-{}", crate::tools::terminal::output::random_hex(12)));
        std::fs::create_dir(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).map_err(|e| format!("cannot protect {}: {e}", dir.display()))?;
        Ok(Staging(dir))
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn run(code: &str, python: &Path, ctx: &ToolContext, registry: Arc<Registry>, allowed: Vec<String>, limits: &Limits) -> Result<Value, String> {
    let staging = Staging::new()?;
    let module = staging.path().join("hermes_tools.py");
    std::fs::write(&module, stubs::module_source(&allowed)).map_err(|e| format!("cannot write the hermes_tools module: {e}"))?;
    let script = staging.path().join("script.py");
    std::fs::write(&script, code).map_err(|e| format!("cannot write the script: {e}"))?;
    let socket = staging.path().join("rpc.sock");
    let listener = std::os::unix::net::UnixListener::bind(&socket).map_err(|e| format!("cannot open the tool socket: {e}"))?;
    let token = crate::tools::terminal::output::random_hex(32);
    let server = rpc::Server::start(listener, registry, ctx.clone(), rpc::Limits { allowed, max_calls: limits.max_calls, token: token.clone() })
        .map_err(|e| format!("cannot serve the tool socket: {e}"))?;
    let started = Instant::now();
    let launch = child::Launch { python, script: &script, cwd: ctx.cwd(), module_dir: staging.path(), socket: &socket, token: &token };
    let spawned = child::spawn_script(&launch);
    let process = match spawned {
        Ok(process) => process,
        Err(e) => {
            server.stop();
            return Err(format!("cannot start {}: {e}", python.display()));
        }
    };
    let cancel = ctx.cancellation().clone();
    let finished = child::wait(process, Duration::from_secs(limits.timeout), move || cancel.is_cancelled());
    let duration = (started.elapsed().as_secs_f64() * 100.0).round() / 100.0;
    let calls = server.stop();
    Ok(shape_result(finished, calls, duration, limits.timeout))
}

fn clean(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    crate::tools::terminal::output::redact(&hermes_command_guard::strip_ansi(&text), "")
}

fn shape_result(finished: child::Finished, calls: usize, duration: f64, timeout: u64) -> Value {
    let out = &finished.stdout;
    let captured = out.head.len() + out.tail.len();
    let truncated = out.total > captured;
    let mut stdout = clean(&out.head);
    if truncated {
        stdout.push_str(&format!("\n\n... [OUTPUT TRUNCATED - {} bytes omitted out of {} total] ...\n\n", out.total - captured, out.total));
    }
    stdout.push_str(&clean(&out.tail));
    let mut stderr = clean(&finished.stderr.head);
    stderr.push_str(&clean(&finished.stderr.tail));
    let (status, exit_code) = match finished.ending {
        child::Ending::Exited(0) => ("success", 0),
        child::Ending::Exited(code) => ("error", code),
        child::Ending::TimedOut => ("timeout", -1),
        child::Ending::Cancelled => ("interrupted", -1),
    };
    let mut result = json!({
        "status": status,
        "output": stdout,
        "exit_code": exit_code,
        "tool_calls_made": calls,
        "duration_seconds": duration,
        "stdout_truncated": truncated,
        "stdout_bytes_captured": captured,
        "stdout_bytes_total": out.total,
        "stdout_bytes_omitted": out.total - captured,
    });
    if truncated {
        result["warning"] = json!("execute_code stdout was truncated; the script ran, but only the head and tail of its output are here. Re-run with narrower output if the rest matters.");
    }
    match status {
        "timeout" => {
            let message = format!("Script timed out after {timeout}s and was killed.");
            result["output"] = json!(if stdout.is_empty() { format!("⏰ {message}") } else { format!("{stdout}\n\n⏰ {message}") });
            result["error"] = json!(message);
        }
        "interrupted" => result["output"] = json!(format!("{stdout}\n[execution interrupted]")),
        "error" => {
            result["error"] = json!(if stderr.is_empty() { format!("Script exited with code {exit_code}") } else { stderr.clone() });
            if !stderr.is_empty() {
                result["output"] = json!(format!("{stdout}\n--- stderr ---\n{stderr}"));
            }
        }
        _ => {}
    }
    result
}
