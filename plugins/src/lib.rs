//! Plugins: tools and hooks that run as commands, declared in a manifest.
//!
//! A plugin is a folder `$HERMES_HOME/plugins/<id>/` (user plugins) or
//! `./.hermes/plugins/<id>/` (project plugins) holding `plugin.yaml`:
//!
//! ```yaml
//! id: weather                    # optional; default the folder name; [A-Za-z0-9_-]+
//! description: Weather lookups
//! tools:
//!   - name: get_weather          # [A-Za-z0-9_-]+
//!     toolset: weather           # default: the plugin id
//!     description: Current weather for a city.
//!     parameters:                # JSON Schema of the arguments (default: no arguments)
//!       type: object
//!       properties: {city: {type: string, description: City name}}
//!       required: [city]
//!     command: ["python3", "./get_weather.py"] # argv; `./x` and `../x` are paths in the plugin folder
//!     timeout: 30                # seconds, default 60
//!     override: false            # replace another toolset's tool (needs allow_tool_override)
//!     emoji: "🌦"
//! hooks:
//!   pre_tool_call: ["./hooks/pre.sh"]         # argv
//!   post_tool_call: ["./hooks/post.sh"]
//!   timeout: 10                  # seconds per hook run, default 10
//! ```
//!
//! A tool's command gets the JSON arguments on stdin, runs in the call's working
//! directory with `HERMES_PLUGIN_DIR`, `HERMES_PLUGIN_ID`, `HERMES_TOOL_NAME`,
//! `HERMES_TASK_ID` and `HERMES_HOME` set, and its stdout is the result: JSON is
//! passed on as is, other text is wrapped as `{"result": "<text>"}`. A non-zero exit,
//! a signal or the timeout (the process group is killed) gives `{"error": ...}` with
//! the tail of stderr.
//!
//! A hook command gets the event as JSON on stdin: `{"event": "pre_tool_call",
//! "tool_name", "args", "task_id", "session_id", "tool_call_id"}` (post adds
//! `result`, `status`, `duration_ms`). A pre hook may print `{"action": "block",
//! "message": ...}`, `{"action": "modify", "args": {...}}` (merged into the arguments),
//! `{"action": "approve", "message": ...}` (ask the approval gate) or nothing. A hook
//! that fails or prints something else is logged and ignored.
//!
//! Enabling (config.yaml `plugins.entries.<id>.enabled`): user plugins load unless
//! `enabled: false`; project plugins, which come with whatever repository is checked
//! out, load only with `enabled: true`. Replacing a tool of another toolset needs
//! `override: true` in the manifest and `plugins.entries.<id>.allow_tool_override: true`;
//! without the grant the whole plugin is skipped and anything it registered is undone.

use hermes_runtime::hooks::{PostCall, PreCall, PreDecision, ToolHooks};
use hermes_runtime::registry::{Registration, RegistryError};
use hermes_runtime::{Caller, DynamicHandler, DynamicTool, Registry, ToolError};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const MANIFEST: &str = "plugin.yaml";
pub const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(60);
pub const DEFAULT_HOOK_TIMEOUT: Duration = Duration::from_secs(10);
const STDERR_TAIL: usize = 2000;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub id: Option<String>,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub version: Option<String>,
    #[serde(default)]
    pub tools: Vec<ToolSpec>,
    #[serde(default)]
    pub hooks: HookSpec,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolSpec {
    pub name: String,
    pub toolset: Option<String>,
    #[serde(default)]
    pub description: String,
    pub parameters: Option<Value>,
    pub command: Vec<String>,
    pub timeout: Option<f64>,
    #[serde(default, rename = "override")]
    pub override_existing: bool,
    #[serde(default)]
    pub emoji: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HookSpec {
    pub pre_tool_call: Option<Vec<String>>,
    pub post_tool_call: Option<Vec<String>>,
    pub timeout: Option<f64>,
}

/// Where a plugin was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    User,
    Project,
}

#[derive(Debug, Clone, PartialEq)]
pub enum PluginStatus {
    Loaded,
    /// Disabled in config.yaml (or a project plugin not enabled).
    Disabled(String),
    /// Broken manifest, refused override, duplicate id: nothing of it is registered.
    Skipped(String),
}

#[derive(Debug, Clone)]
pub struct PluginReport {
    pub id: String,
    pub path: PathBuf,
    pub source: Source,
    pub status: PluginStatus,
    pub tools: Vec<String>,
    pub hooks: Vec<String>,
}

impl std::fmt::Display for PluginReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.status {
            PluginStatus::Loaded => write!(
                f,
                "plugin {}: {} tool(s) [{}], hooks [{}]",
                self.id,
                self.tools.len(),
                self.tools.join(", "),
                self.hooks.join(", ")
            ),
            PluginStatus::Disabled(why) => write!(f, "plugin {}: disabled ({why})", self.id),
            PluginStatus::Skipped(why) => write!(
                f,
                "plugin {} ({}): skipped: {why}",
                self.id,
                self.path.display()
            ),
        }
    }
}

fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Reads and checks a manifest; the error names the file and the reason.
pub fn read_manifest(dir: &Path) -> Result<Manifest, String> {
    let path = dir.join(MANIFEST);
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    let manifest: Manifest =
        serde_yaml_ng::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let problem = |why: String| format!("{}: {why}", path.display());
    if let Some(id) = &manifest.id {
        if !valid_id(id) {
            return Err(problem(format!(
                "id {id:?} may only use letters, digits, `_` and `-`"
            )));
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    for (index, tool) in manifest.tools.iter().enumerate() {
        let at = format!("tools[{index}] ({})", tool.name);
        if !valid_id(&tool.name) {
            return Err(problem(format!(
                "{at}: the name may only use letters, digits, `_` and `-`"
            )));
        }
        if !seen.insert(tool.name.clone()) {
            return Err(problem(format!("{at}: declared twice")));
        }
        if tool.command.is_empty() || tool.command[0].is_empty() {
            return Err(problem(format!(
                "{at}: `command` must be a non-empty list (argv)"
            )));
        }
        match &tool.parameters {
            None | Some(Value::Null) | Some(Value::Object(_)) => {}
            Some(_) => {
                return Err(problem(format!(
                    "{at}: `parameters` must be a JSON Schema object"
                )))
            }
        }
        if tool.timeout.is_some_and(|t| t.is_nan() || t <= 0.0) {
            return Err(problem(format!(
                "{at}: `timeout` must be a positive number of seconds"
            )));
        }
    }
    for (kind, argv) in [
        ("pre_tool_call", &manifest.hooks.pre_tool_call),
        ("post_tool_call", &manifest.hooks.post_tool_call),
    ] {
        if argv
            .as_ref()
            .is_some_and(|a| a.is_empty() || a[0].is_empty())
        {
            return Err(problem(format!(
                "hooks.{kind} must be a non-empty list (argv)"
            )));
        }
    }
    Ok(manifest)
}

/// Plugin folders in load order: user plugins, then project plugins, each sorted.
pub fn plugin_dirs(hermes_home: &Path, project_root: &Path) -> Vec<(Source, PathBuf)> {
    let mut out = Vec::new();
    for (source, root) in [
        (Source::User, hermes_home.join("plugins")),
        (
            Source::Project,
            project_root.join(".hermes").join("plugins"),
        ),
    ] {
        let Ok(entries) = std::fs::read_dir(&root) else {
            continue;
        };
        let mut dirs: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .collect();
        dirs.sort();
        out.extend(dirs.into_iter().map(|d| (source, d)));
    }
    out
}

/// Loads the plugins of `$HERMES_HOME/plugins/` and `./.hermes/plugins/` (the
/// current directory's).
pub fn load_plugins(registry: &Arc<Registry>) -> Vec<PluginReport> {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    load_plugins_from(registry, &cwd)
}

/// [`load_plugins`] with the project root given.
pub fn load_plugins_from(registry: &Arc<Registry>, project_root: &Path) -> Vec<PluginReport> {
    let mut reports: Vec<PluginReport> = Vec::new();
    let home = registry.hermes_home().to_path_buf();
    let home_plugins = std::fs::canonicalize(home.join("plugins")).ok();
    for (source, dir) in plugin_dirs(&home, project_root) {
        // The project may be $HERMES_HOME itself; do not load a folder twice.
        if source == Source::Project
            && home_plugins
                .as_ref()
                .is_some_and(|h| std::fs::canonicalize(&dir).is_ok_and(|d| d.starts_with(h)))
        {
            continue;
        }
        let folder_id = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut report = PluginReport {
            id: folder_id.clone(),
            path: dir.clone(),
            source,
            status: PluginStatus::Loaded,
            tools: vec![],
            hooks: vec![],
        };
        let manifest = match read_manifest(&dir) {
            Ok(m) => m,
            Err(why) => {
                report.status = PluginStatus::Skipped(why);
                reports.push(report);
                continue;
            }
        };
        let id = manifest.id.clone().unwrap_or(folder_id);
        report.id = id.clone();
        if !valid_id(&id) {
            report.status = PluginStatus::Skipped(format!(
                "the folder name {id:?} is not a valid plugin id; set `id:` in {MANIFEST}"
            ));
            reports.push(report);
            continue;
        }
        if reports
            .iter()
            .any(|r| r.id == id && r.status == PluginStatus::Loaded)
        {
            report.status =
                PluginStatus::Skipped(format!("a plugin with id {id} is already loaded"));
            reports.push(report);
            continue;
        }
        let enabled = registry
            .config()
            .get(&format!("plugins.entries.{id}.enabled"))
            .and_then(Value::as_bool);
        match (source, enabled) {
            (_, Some(false)) => {
                report.status =
                    PluginStatus::Disabled(format!("plugins.entries.{id}.enabled is false"));
                reports.push(report);
                continue;
            }
            (Source::Project, None) => {
                report.status = PluginStatus::Disabled(format!(
                    "project plugins load only with plugins.entries.{id}.enabled: true"
                ));
                reports.push(report);
                continue;
            }
            _ => {}
        }
        match install(registry, &id, &dir, &manifest) {
            Ok((tools, hooks)) => {
                report.tools = tools;
                report.hooks = hooks;
            }
            Err(why) => report.status = PluginStatus::Skipped(why),
        }
        reports.push(report);
    }
    reports
}

/// Registers a plugin's tools (undoing them all if one is refused) and then its hooks.
fn install(
    registry: &Arc<Registry>,
    id: &str,
    dir: &Path,
    manifest: &Manifest,
) -> Result<(Vec<String>, Vec<String>), String> {
    let caller = Caller::Plugin(id.to_string());
    type Ledger = Vec<(String, Option<Arc<DynamicTool>>, Option<Arc<DynamicTool>>)>;
    let mut ledger: Ledger = Vec::new();
    let undo = |ledger: &Ledger| {
        for (name, current, previous) in ledger.iter().rev() {
            if !registry.restore(name, current.as_ref(), previous.clone()) {
                eprintln!("warning: plugin {id}: could not undo the registration of {name}: it changed meanwhile");
            }
        }
    };
    let mut tools = Vec::new();
    for spec in &manifest.tools {
        let toolset = spec.toolset.clone().unwrap_or_else(|| id.to_string());
        let description = if spec.description.trim().is_empty() {
            format!("Plugin tool {} of {id}", spec.name)
        } else {
            spec.description.clone()
        };
        let parameters = match &spec.parameters {
            Some(Value::Object(p)) => Value::Object(p.clone()),
            _ => json!({"type": "object", "properties": {}}),
        };
        let schema =
            json!({"name": spec.name, "description": description, "parameters": parameters});
        let runner = Arc::new(ToolRunner {
            plugin: id.to_string(),
            tool: spec.name.clone(),
            dir: dir.to_path_buf(),
            argv: spec.command.clone(),
            timeout: spec
                .timeout
                .map_or(DEFAULT_TOOL_TIMEOUT, Duration::from_secs_f64),
        });
        let handler = DynamicHandler::Sync(Arc::new(move |args, ctx| runner.run(&args, ctx)));
        let mut tool = DynamicTool::new(spec.name.clone(), toolset.clone(), schema, handler);
        tool.emoji = spec.emoji.clone();
        let previous = registry.snapshot(&spec.name);
        match registry.register(tool, &caller, spec.override_existing) {
            Ok(Registration::Stored) => {
                let current = registry.snapshot(&spec.name);
                ledger.push((spec.name.clone(), current, previous));
                tools.push(spec.name.clone());
            }
            Ok(Registration::Rejected) => {
                eprintln!("warning: plugin {id}: tool {} not registered: the name belongs to another toolset (set `override: true` and grant plugins.entries.{id}.allow_tool_override)", spec.name);
            }
            Err(RegistryError::Permission(why)) => {
                undo(&ledger);
                return Err(format!("{why}; the whole plugin was skipped"));
            }
            Err(other) => {
                undo(&ledger);
                return Err(format!("tool {}: {other}", spec.name));
            }
        }
    }
    let mut hooks = Vec::new();
    if manifest.hooks.pre_tool_call.is_some() || manifest.hooks.post_tool_call.is_some() {
        let timeout = manifest
            .hooks
            .timeout
            .filter(|t| *t > 0.0)
            .map_or(DEFAULT_HOOK_TIMEOUT, Duration::from_secs_f64);
        if manifest.hooks.pre_tool_call.is_some() {
            hooks.push("pre_tool_call".to_string());
        }
        if manifest.hooks.post_tool_call.is_some() {
            hooks.push("post_tool_call".to_string());
        }
        registry.add_hooks(Arc::new(CommandHooks {
            plugin: id.to_string(),
            dir: dir.to_path_buf(),
            pre: manifest.hooks.pre_tool_call.clone(),
            post: manifest.hooks.post_tool_call.clone(),
            timeout,
        }));
    }
    Ok((tools, hooks))
}

/// argv[0] with a `/` and not absolute is relative to the plugin folder (the
/// command runs in the call's working directory).
fn resolve_program(dir: &Path, program: &str) -> PathBuf {
    let path = Path::new(program);
    if !path.is_absolute() && program.contains('/') {
        dir.join(path)
    } else {
        path.to_path_buf()
    }
}

/// An argument starting with `./` or `../` names a file of the plugin folder.
fn plugin_relative(dir: &Path, arg: &str) -> std::ffi::OsString {
    if arg.starts_with("./") || arg.starts_with("../") {
        dir.join(arg).into_os_string()
    } else {
        arg.into()
    }
}

/// How a command run ended.
pub struct RunOutput {
    pub status: Result<std::process::ExitStatus, String>,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `argv` with `input` on stdin, killing its process group after `timeout`.
pub fn run_command(
    dir: &Path,
    argv: &[String],
    cwd: &Path,
    env: &[(&str, String)],
    input: &[u8],
    timeout: Duration,
) -> Result<RunOutput, String> {
    let program = resolve_program(dir, &argv[0]);
    let mut command = Command::new(&program);
    command
        .args(argv[1..].iter().map(|a| plugin_relative(dir, a)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command.current_dir(if cwd.is_dir() { cwd } else { dir });
    for (key, value) in env {
        command.env(key, value);
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        command.process_group(0);
    }
    let mut child = command
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", program.display()))?;
    let mut stdin = child.stdin.take();
    let input = input.to_vec();
    let writer = std::thread::spawn(move || {
        if let Some(stdin) = stdin.as_mut() {
            let _ = stdin.write_all(&input);
        }
        drop(stdin);
    });
    let mut stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let out_reader = std::thread::spawn(move || {
        let mut buffer = Vec::new();
        let _ = stdout.read_to_end(&mut buffer);
        buffer
    });
    let err_reader = std::thread::spawn(move || {
        let mut buffer = Vec::new();
        let _ = stderr.read_to_end(&mut buffer);
        buffer
    });
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Ok(status),
            Ok(None) if started.elapsed() >= timeout => {
                #[cfg(unix)]
                // SAFETY: kill(2) on the process group this command leads; no memory involved.
                unsafe {
                    libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL);
                }
                let _ = child.kill();
                let _ = child.wait();
                break Err(format!(
                    "timed out after {} s and was killed",
                    timeout.as_secs_f64()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => break Err(format!("cannot wait for it: {e}")),
        }
    };
    let _ = writer.join();
    let stdout = String::from_utf8_lossy(&out_reader.join().unwrap_or_default()).into_owned();
    let stderr = String::from_utf8_lossy(&err_reader.join().unwrap_or_default()).into_owned();
    Ok(RunOutput {
        status,
        stdout,
        stderr,
    })
}

fn tail(text: &str, chars: usize) -> String {
    let count = text.chars().count();
    let trimmed: String = if count > chars {
        text.chars().skip(count - chars).collect()
    } else {
        text.to_string()
    };
    trimmed.trim().to_string()
}

struct ToolRunner {
    plugin: String,
    tool: String,
    dir: PathBuf,
    argv: Vec<String>,
    timeout: Duration,
}

impl ToolRunner {
    fn run(&self, args: &Value, ctx: &hermes_runtime::ToolContext) -> Result<Value, ToolError> {
        let env = [
            ("HERMES_PLUGIN_DIR", self.dir.to_string_lossy().into_owned()),
            ("HERMES_PLUGIN_ID", self.plugin.clone()),
            ("HERMES_TOOL_NAME", self.tool.clone()),
            ("HERMES_TASK_ID", ctx.task_id().to_string()),
            (
                "HERMES_HOME",
                ctx.hermes_home().to_string_lossy().into_owned(),
            ),
        ];
        let input = serde_json::to_vec(args).unwrap_or_default();
        let error = |message: String| Ok(Value::String(hermes_runtime::tool_error(message)));
        let output = match run_command(&self.dir, &self.argv, ctx.cwd(), &env, &input, self.timeout)
        {
            Ok(output) => output,
            Err(why) => return error(format!("plugin tool {}: {why}", self.tool)),
        };
        let stderr = tail(&output.stderr, STDERR_TAIL);
        let with_stderr = |head: String| {
            if stderr.is_empty() {
                head
            } else {
                format!("{head}; stderr: {stderr}")
            }
        };
        match output.status {
            Err(why) => error(with_stderr(format!("plugin tool {} {why}", self.tool))),
            Ok(status) if !status.success() => {
                let how = match status.code() {
                    Some(code) => format!("exited with status {code}"),
                    None => "was killed by a signal".to_string(),
                };
                error(with_stderr(format!("plugin tool {} {how}", self.tool)))
            }
            Ok(_) => {
                let text = output.stdout.trim();
                if serde_json::from_str::<Value>(text).is_ok_and(|v| !v.is_string()) {
                    Ok(Value::String(text.to_string()))
                } else if let Ok(Value::String(inner)) = serde_json::from_str::<Value>(text) {
                    Ok(Value::String(json!({"result": inner}).to_string()))
                } else {
                    Ok(Value::String(json!({"result": text}).to_string()))
                }
            }
        }
    }
}

/// `pre_tool_call` / `post_tool_call` commands of one plugin.
struct CommandHooks {
    plugin: String,
    dir: PathBuf,
    pre: Option<Vec<String>>,
    post: Option<Vec<String>>,
    timeout: Duration,
}

impl CommandHooks {
    fn run(&self, argv: &[String], event: &Value) -> Option<Value> {
        let cwd = std::env::current_dir().unwrap_or_else(|_| self.dir.clone());
        let env = [
            ("HERMES_PLUGIN_DIR", self.dir.to_string_lossy().into_owned()),
            ("HERMES_PLUGIN_ID", self.plugin.clone()),
        ];
        let kind = event["event"].as_str().unwrap_or("hook");
        let input = serde_json::to_vec(event).unwrap_or_default();
        match run_command(&self.dir, argv, &cwd, &env, &input, self.timeout) {
            Err(why) => eprintln!(
                "warning: plugin {} {kind} hook: {why}; ignored",
                self.plugin
            ),
            Ok(RunOutput {
                status: Err(why), ..
            }) => eprintln!("warning: plugin {} {kind} hook {why}; ignored", self.plugin),
            Ok(RunOutput {
                status: Ok(status),
                stderr,
                ..
            }) if !status.success() => {
                eprintln!(
                    "warning: plugin {} {kind} hook failed ({status}): {}; ignored",
                    self.plugin,
                    tail(&stderr, 500)
                )
            }
            Ok(RunOutput { stdout, .. }) => {
                let text = stdout.trim();
                if text.is_empty() {
                    return None;
                }
                match serde_json::from_str::<Value>(text) {
                    Ok(value) => return Some(value),
                    Err(_) => eprintln!("warning: plugin {} {kind} hook printed something that is not JSON; ignored", self.plugin),
                }
            }
        }
        None
    }
}

impl ToolHooks for CommandHooks {
    fn pre_tool_call(&self, call: &PreCall<'_>) -> PreDecision {
        let Some(argv) = &self.pre else {
            return PreDecision::Continue;
        };
        let event = json!({
            "event": "pre_tool_call",
            "plugin": self.plugin,
            "tool_name": call.tool_name,
            "args": call.args,
            "task_id": call.ids.task_id,
            "session_id": call.ids.session_id,
            "tool_call_id": call.ids.tool_call_id,
        });
        let Some(answer) = self.run(argv, &event) else {
            return PreDecision::Continue;
        };
        let message = answer
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        match answer.get("action").and_then(Value::as_str) {
            Some("block") => {
                let message = if message.trim().is_empty() {
                    format!("Blocked by plugin {}", self.plugin)
                } else {
                    message
                };
                PreDecision::Block(message)
            }
            Some("modify") => match answer.get("args") {
                Some(Value::Object(args)) => PreDecision::Modify(args.clone()),
                _ => PreDecision::Continue,
            },
            Some("approve") => PreDecision::Approve {
                message,
                rule_key: answer
                    .get("rule_key")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
            },
            None | Some("continue") | Some("allow") => PreDecision::Continue,
            Some(other) => {
                eprintln!("warning: plugin {} pre_tool_call hook answered unknown action {other:?}; ignored", self.plugin);
                PreDecision::Continue
            }
        }
    }

    fn post_tool_call(&self, call: &PostCall<'_>) {
        let Some(argv) = &self.post else { return };
        let mut event = Map::new();
        event.insert("event".into(), json!("post_tool_call"));
        event.insert("plugin".into(), json!(self.plugin));
        event.insert("tool_name".into(), json!(call.tool_name));
        event.insert("args".into(), call.args.clone());
        event.insert("result".into(), json!(call.result));
        event.insert("status".into(), json!(call.status.as_str()));
        event.insert("duration_ms".into(), json!(call.duration_ms));
        event.insert("task_id".into(), json!(call.ids.task_id));
        event.insert("session_id".into(), json!(call.ids.session_id));
        event.insert("tool_call_id".into(), json!(call.ids.tool_call_id));
        let _ = self.run(argv, &Value::Object(event));
    }
}
