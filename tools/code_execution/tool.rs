//! `execute_code`: a Python script that calls the sandbox tools (file tools, terminal,
//! web tools when this build has them) through a generated `hermes_tools` module.
//!
//! The script runs where the task's terminal runs. On the local backend it is started
//! by [`child::spawn_script`] through the task's environment, so it sits inside the
//! same OS sandbox as terminal commands, and its tool calls come back over a socket
//! pair. On docker/podman, ssh and singularity it runs inside that environment
//! ([`remote`]); the HTTP backends cannot carry its calls and say so. The calls run
//! through the registry like direct calls. Only tools that are both sandbox tools and
//! enabled for the session get functions, so a disabled tool cannot even be imported;
//! the parent refuses any other name too.

use hermes_environments::config::TerminalConfig;
use hermes_runtime::prelude::*;
use hermes_runtime::Registry;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod child;
mod remote;
mod rpc;
mod stubs;

const DEFAULT_TIMEOUT_SECONDS: u64 = 300;
const DEFAULT_MAX_TOOL_CALLS: usize = 50;

struct Limits {
    timeout: u64,
    max_calls: usize,
}

fn limits(config: &hermes_runtime::config::Config) -> Limits {
    let timeout = config
        .get("code_execution.timeout")
        .and_then(Value::as_u64)
        .filter(|t| *t > 0)
        .unwrap_or(DEFAULT_TIMEOUT_SECONDS);
    let max_calls = config
        .positive_usize("code_execution.max_tool_calls")
        .unwrap_or(DEFAULT_MAX_TOOL_CALLS);
    Limits { timeout, max_calls }
}

fn configured_python(config: &hermes_runtime::config::Config) -> Option<String> {
    config
        .get("code_execution.python")
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// Offered where a Python interpreter can run scripts.
pub fn sandbox_available() -> bool {
    let config =
        hermes_runtime::config::Config::load(&hermes_runtime::context::default_hermes_home());
    child::find_python(configured_python(&config).as_deref()).is_some()
}

/// The description and `code` parameter name only the sandbox tools offered this turn.
pub fn execute_code_schema(schema: &SchemaContext) -> Option<Value> {
    let enabled: Vec<&str> = stubs::SANDBOX_TOOLS
        .iter()
        .copied()
        .filter(|t| schema.is_available(t))
        .collect();
    let config =
        hermes_runtime::config::Config::load(&hermes_runtime::context::default_hermes_home());
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
    let terminal = match TerminalConfig::load(ctx.hermes_home()) {
        Ok(terminal) => terminal,
        Err(e) => {
            return Ok(ToolOutput::error(format!(
                "execute_code cannot read the terminal configuration: {e}"
            )))
        }
    };
    let place = match Place::of(&terminal) {
        Ok(place) => place,
        Err(message) => return Ok(ToolOutput::error(message)),
    };
    let limits = limits(&config);
    let allowed = enabled_sandbox_tools(ctx, &registry);
    let result = match place {
        Place::Sandboxed | Place::Host => {
            let Some(python) = child::find_python(configured_python(&config).as_deref()) else {
                return Ok(ToolOutput::error(
                    "execute_code needs python3 on PATH (or code_execution.python in config.yaml)",
                ));
            };
            run_local(
                &code, &python, place, &terminal, ctx, registry, allowed, &limits,
            )
        }
        Place::Remote => {
            if let Err(refusal) = approve_script(
                &code,
                &terminal.backend,
                crate::shared::command_approval::has_host_access(&terminal),
                ctx,
            ) {
                return Ok(ToolOutput::json(&refusal));
            }
            run_remote(&code, &terminal, ctx, registry, allowed, &limits)
        }
    };
    match result {
        Ok(result) => Ok(ToolOutput::json(&result)),
        Err(e) => Ok(ToolOutput::json(&failure(e))),
    }
}

fn failure(error: String) -> Value {
    json!({"status": "error", "error": error, "tool_calls_made": 0, "duration_seconds": 0.0})
}

/// Where a script runs: where the terminal's commands run.
#[derive(Clone, Copy, PartialEq)]
enum Place {
    /// This machine, inside the terminal's OS sandbox.
    Sandboxed,
    /// This machine with the server's rights (`terminal.sandbox.mode: off`).
    Host,
    /// Inside the task's remote environment, its calls carried on the run's output.
    Remote,
}

/// Backends whose commands stream their output while they run (a client program on
/// this machine), which is what carries a remote script's tool calls.
const STREAMING_BACKENDS: [&str; 4] = ["docker", "ssh", "singularity", "kubernetes"];

impl Place {
    fn of(terminal: &TerminalConfig) -> Result<Place, String> {
        match terminal.backend.as_str() {
            "local" if terminal.sandbox.mode == hermes_sandbox::Mode::Off => Ok(Place::Host),
            "local" => Ok(Place::Sandboxed),
            backend if STREAMING_BACKENDS.contains(&backend) => Ok(Place::Remote),
            backend if !hermes_environments::env::BACKENDS.contains(&backend) => {
                Err(hermes_environments::env::unknown_backend(backend).reason)
            }
            backend => Err(format!(
                "execute_code cannot run scripts on the {backend} terminal backend: it runs each command as one request \
                 and returns the output only at the end, so a script's tool calls cannot reach this runtime while it \
                 runs. Scripts run on the local, docker, ssh, singularity and kubernetes backends; here, call the tools directly \
                 (terminal runs in the {backend} environment)."
            )),
        }
    }
}

/// The runtime's execute_code guard, for scripts outside the OS sandbox (the local backend
/// with `terminal.sandbox.mode: off`, and remote backends, whose isolated kinds it lets
/// through): where nobody can approve (call, serve, mcp, cron without an operator's
/// `approvals.*_mode: approve`) the script is refused; a gateway or ask user approves it
/// once; an interactive terminal session runs it.
fn approve_script(
    code: &str,
    backend: &str,
    has_host_access: bool,
    ctx: &ToolContext,
) -> Result<(), Value> {
    use hermes_runtime::approval::{ApprovalContext, Approvals, GuardOptions};
    let approvals = Approvals::for_home(ctx.hermes_home());
    let mut context = ApprovalContext::from_env();
    if !ctx.session_id().is_empty() {
        context.session_key = Some(ctx.session_id().to_string());
    }
    let options = GuardOptions {
        has_host_access,
        ..Default::default()
    };
    let verdict = approvals.check_execute_code_guard(code, backend, &context, &options);
    if verdict.is_approved() {
        return Ok(());
    }
    Err(failure(
        verdict
            .message
            .unwrap_or_else(|| "execute_code was not approved.".into()),
    ))
}

fn registry_for(ctx: &ToolContext) -> Option<Arc<Registry>> {
    ctx.agent_session_as::<hermes_agent::AgentSession>()
        .map(|s| Arc::clone(s.registry()))
        .or_else(crate::current::registry)
}

/// Sandbox tools the session offers: the command's selection (`--toolsets`,
/// `--disabled`), narrowed to what an attached agent session offers its model.
fn enabled_sandbox_tools(ctx: &ToolContext, registry: &Registry) -> Vec<String> {
    let selection = crate::current::selection();
    let offered =
        registry.definitions(selection.toolsets.as_deref(), selection.disabled.as_deref());
    let mut names: Vec<String> = offered
        .names()
        .into_iter()
        .filter(|n| stubs::SANDBOX_TOOLS.contains(n))
        .map(str::to_owned)
        .collect();
    if let Some(session) = ctx.agent_session_as::<hermes_agent::AgentSession>() {
        let in_session: Vec<String> = session
            .definitions()
            .iter()
            .filter_map(|d| d["function"]["name"].as_str().map(str::to_owned))
            .collect();
        names.retain(|n| in_session.contains(n));
    }
    names
}

/// A private folder for the module and the script; removed on drop. It lies in the
/// task's own state directory (in the server's private run directory), which only the
/// task's own sandboxes see: no other task or server can change the script between its
/// check and its run.
struct Staging(PathBuf);

impl Staging {
    fn new(parent: &Path) -> Result<Staging, String> {
        let dir = parent.join(format!(
            "hermes-exec-{}",
            hermes_environments::output::random_hex(12)
        ));
        std::fs::create_dir(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| format!("cannot protect {}: {e}", dir.display()))?;
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

/// The gate for a script inside the OS sandbox: the terminal's rule for a program it
/// runs there (`python3 script.py`, inside the sandbox, with the script's text read
/// first). The floors (hardline, `sudo -S`, `approvals.deny`) refuse on the string
/// literals of the script; otherwise it runs contained, with or without a person to ask.
///
/// It never escalates out of the sandbox, even when a person could grant it: the
/// terminal lets a person's grant take out one flagged command they saw, but a script is
/// a whole program written by the model, whose effects a grant cannot name. Whatever a
/// script needs outside the wall it asks for through `terminal()`, and that call meets
/// the terminal's own gate, where a person's grant of that command escalates it.
fn contained_script_gate(script: &Path, cwd: &Path, ctx: &ToolContext) -> Result<(), Value> {
    use hermes_environments::env::sh_quote;
    let command = format!("python3 {}", sh_quote(&script.to_string_lossy()));
    let cwd = cwd.to_string_lossy();
    match crate::shared::command_approval::script_gate(
        &command, &cwd, "local", true, ctx, false, true,
    ) {
        Ok(_) => Ok(()),
        Err(refusal) => {
            let message = refusal["error"]
                .as_str()
                .unwrap_or("BLOCKED: the script was not approved.")
                .replace(&script.to_string_lossy().into_owned(), "the script");
            Err(failure(message))
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn run_local(
    code: &str,
    python: &Path,
    place: Place,
    terminal: &TerminalConfig,
    ctx: &ToolContext,
    registry: Arc<Registry>,
    allowed: Vec<String>,
    limits: &Limits,
) -> Result<Value, String> {
    let slot = task_environment(terminal, ctx)?;
    let staging = Staging::new(Path::new(&slot.env.temp_dir()))?;
    let module = staging.path().join("hermes_tools.py");
    std::fs::write(&module, stubs::module_source(&allowed))
        .map_err(|e| format!("cannot write the hermes_tools module: {e}"))?;
    let script = staging.path().join("script.py");
    std::fs::write(&script, code).map_err(|e| format!("cannot write the script: {e}"))?;
    let cwd = PathBuf::from(slot.session.cwd());
    let cwd = if cwd.is_absolute() {
        cwd
    } else {
        ctx.cwd().to_path_buf()
    };
    let gate = match place {
        Place::Sandboxed => contained_script_gate(&script, &cwd, ctx),
        _ => approve_script(code, "local", true, ctx),
    };
    if let Err(refusal) = gate {
        return Ok(refusal);
    }
    let (parent_end, script_end) = std::os::unix::net::UnixStream::pair()
        .map_err(|e| format!("cannot open the tool socket: {e}"))?;
    let token = hermes_environments::output::random_hex(32);
    let dispatcher = Arc::new(rpc::Dispatcher::new(
        registry,
        ctx.clone(),
        rpc::Limits {
            allowed,
            max_calls: limits.max_calls,
            token: token.clone(),
        },
    ));
    let server = rpc::Server::start(parent_end, dispatcher)
        .map_err(|e| format!("cannot serve the tool socket: {e}"))?;
    let started = Instant::now();
    let launch = child::Launch {
        python,
        script: &script,
        cwd: &cwd,
        module_dir: staging.path(),
        socket: script_end.into(),
        token: &token,
    };
    let process = match child::spawn_script(slot.env.as_ref(), launch) {
        Ok(process) => process,
        Err(e) => {
            server.stop();
            return Err(e);
        }
    };
    let cancel = ctx.cancellation().clone();
    let mut live = crate::shared::live_output::LiveOutput::new(ctx, "", None);
    let mut show = |text: &str| live.push(text);
    // Only a caller that shows progress gets the script's stdout as it comes.
    let shown: Option<&mut dyn FnMut(&str)> = ctx.reports_progress().then_some(&mut show);
    let finished = child::wait(
        process,
        Duration::from_secs(limits.timeout),
        move || cancel.is_cancelled(),
        shown,
    );
    live.flush();
    let duration = (started.elapsed().as_secs_f64() * 100.0).round() / 100.0;
    let calls = server.stop();
    let mut result = shape_result(finished, calls, duration, limits.timeout);
    if place == Place::Sandboxed {
        let (code, output) = (
            result["exit_code"].as_i64().unwrap_or(0) as i32,
            result["output"].as_str().unwrap_or("").to_string(),
        );
        if let Some(note) = crate::shared::command_approval::sandbox_refusal_note(
            terminal.sandbox.mode,
            code,
            &output,
        ) {
            result["sandbox"] = json!(note.replace("this command ran", "this script ran"));
        }
        if let Some(note) = terminal.sandbox.network.refusal_note(&output) {
            result["network"] = json!(note.replace("this connection", "this script's connection"));
        }
        if let Some(note) = terminal.sandbox.limits.reached(code, &output) {
            result["limit"] = json!(note);
        }
    }
    Ok(result)
}

fn run_remote(
    code: &str,
    terminal: &TerminalConfig,
    ctx: &ToolContext,
    registry: Arc<Registry>,
    allowed: Vec<String>,
    limits: &Limits,
) -> Result<Value, String> {
    let slot = task_environment(terminal, ctx)?;
    let token = hermes_environments::output::random_hex(32);
    let dispatcher = Arc::new(rpc::Dispatcher::new(
        registry,
        ctx.clone(),
        rpc::Limits {
            allowed: allowed.clone(),
            max_calls: limits.max_calls,
            token: token.clone(),
        },
    ));
    let module = stubs::module_source(&allowed);
    let job = remote::Job {
        module: &module,
        code,
        token: &token,
        timeout: Duration::from_secs(limits.timeout),
    };
    let started = Instant::now();
    let cancel = ctx.cancellation().clone();
    let mut live = crate::shared::live_output::LiveOutput::new(ctx, "", None);
    let mut show = |text: &str| live.push(text);
    // Only a caller that shows progress gets the script's stdout as it comes.
    let shown: Option<&mut dyn FnMut(&str)> = ctx.reports_progress().then_some(&mut show);
    let finished = remote::run(
        &slot,
        job,
        Arc::clone(&dispatcher),
        &move || cancel.is_cancelled(),
        shown,
    );
    live.flush();
    let finished = finished?;
    let duration = (started.elapsed().as_secs_f64() * 100.0).round() / 100.0;
    Ok(shape_result(
        finished,
        dispatcher.calls_made(),
        duration,
        limits.timeout,
    ))
}

/// The task's terminal environment, shared with its `terminal` calls.
fn task_environment(
    terminal: &TerminalConfig,
    ctx: &ToolContext,
) -> Result<Arc<hermes_environments::env::Slot>, String> {
    use hermes_environments::env;
    if let Some(missing) = env::availability(terminal) {
        return Err(format!(
            "the {} terminal backend is not available: {missing}",
            terminal.backend
        ));
    }
    env::get_or_create(terminal, ctx.task_id(), ctx.cwd()).map_err(|e| {
        format!(
            "the {} environment could not be reached: {}",
            terminal.backend, e.reason
        )
    })
}

fn clean(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    hermes_environments::output::redact(&hermes_command_guard::strip_ansi(&text), "")
}

fn shape_result(finished: child::Finished, calls: usize, duration: f64, timeout: u64) -> Value {
    let out = &finished.stdout;
    let captured = out.head.len() + out.tail.len();
    let truncated = out.total > captured;
    let mut stdout = clean(&out.head);
    if truncated {
        stdout.push_str(&format!(
            "\n\n... [OUTPUT TRUNCATED - {} bytes omitted out of {} total] ...\n\n",
            out.total - captured,
            out.total
        ));
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
            result["output"] = json!(if stdout.is_empty() {
                format!("⏰ {message}")
            } else {
                format!("{stdout}\n\n⏰ {message}")
            });
            result["error"] = json!(message);
        }
        "interrupted" => result["output"] = json!(format!("{stdout}\n[execution interrupted]")),
        "error" => {
            result["error"] = json!(if stderr.is_empty() {
                format!("Script exited with code {exit_code}")
            } else {
                stderr.clone()
            });
            if !stderr.is_empty() {
                result["output"] = json!(format!("{stdout}\n--- stderr ---\n{stderr}"));
            }
        }
        _ => {}
    }
    result
}
