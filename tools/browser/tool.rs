//! The `browser` toolset: a real Chromium (hermes-browser) driven by the model through
//! accessibility snapshots and element refs. Every URL the model names is screened by
//! the network layer first, and every request the page then makes (redirects,
//! subresources, scripts' fetches) is judged by the same policy inside the browser.
//! Results pass through secret redaction; the agent loop wraps them as untrusted.

use hermes_browser::{manager, FileCheck, Lease, RequestPolicy, Settings};
use hermes_net::NetPolicy;
use hermes_runtime::config::Config;
use hermes_runtime::prelude::*;
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod eval_policy;
mod schemas;

pub use schemas::{browser_cdp_schema, browser_navigate_schema};

/// Snapshots longer than this are cut on a line boundary, the whole stored.
const SNAPSHOT_LIMIT: usize = 15_000;
/// Screenshot caps: pixels per side and bytes.
const MAX_SIDE: u32 = 7_900;
const MAX_IMAGE_BYTES: usize = 4 * 1024 * 1024;

fn config_for(home: &std::path::Path) -> Arc<Config> {
    hermes_runtime::config::call_config().unwrap_or_else(|| Arc::new(Config::load(home)))
}

fn settings(ctx: &ToolContext) -> Settings {
    Settings::from_config(&config_for(ctx.hermes_home()))
}

fn default_settings() -> Settings {
    Settings::from_config(&config_for(&hermes_runtime::context::default_hermes_home()))
}

/// Offered when a browser can be had: Chromium found or a CDP endpoint configured.
pub fn browser_available() -> bool {
    default_settings().availability().is_ok()
}

/// What is missing for a browser: the program or the endpoint (`list`).
pub fn browser_unavailable_reason() -> Option<String> {
    default_settings().availability().err()
}

/// browser_cdp and browser_dialog: only with a configured CDP endpoint that answers,
/// as the original offers them.
pub fn browser_cdp_available() -> bool {
    let settings = default_settings();
    settings.cdp_url.is_some() && settings.availability().is_ok()
}

/// Closes the task's browser context when the task's state is dropped (the task
/// ended: a closed MCP session, a finished agent run).
#[derive(Default)]
struct TaskBrowser {
    task: Mutex<Option<String>>,
}

impl Drop for TaskBrowser {
    fn drop(&mut self) {
        if let Some(task) = self.task.get_mut().ok().and_then(Option::take) {
            manager().close_task(&task);
        }
    }
}

fn request_policy(ctx: &ToolContext, settings: &Settings) -> RequestPolicy {
    let net = NetPolicy::load(ctx.hermes_home());
    let files: Option<FileCheck> = if settings.allow_file_urls {
        let access = crate::file_access::policy(ctx);
        Some(Arc::new(move |path: &std::path::Path| {
            if ["/proc", "/sys", "/dev"]
                .iter()
                .any(|p| path.starts_with(p))
            {
                return Some(format!("{} is a device or kernel file", path.display()));
            }
            match &access {
                Err(why) => Some(why.clone()),
                Ok(policy) => policy
                    .check_read(path)
                    .map(|r| r.message("Read", &path.display().to_string())),
            }
        }))
    } else {
        None
    };
    RequestPolicy::new(net, files)
}

/// The task's tab, opened when `create`; an error result otherwise.
fn tab(ctx: &ToolContext, create: bool) -> Result<Arc<Lease>, String> {
    let settings = settings(ctx);
    let state = ctx.task_state::<TaskBrowser>();
    let task = ctx.task_id().to_string();
    if !create {
        return manager().existing(&task).ok_or_else(|| {
            "No browser page is open for this task: call browser_navigate first.".to_string()
        });
    }
    settings.availability()?;
    let mut settings = settings;
    if settings.cdp_url.is_none() {
        settings.sandbox = browser_sandbox(ctx)?;
    }
    let opened = manager().tab(&task, &settings, || request_policy(ctx, &settings))?;
    *state.task.lock().unwrap_or_else(|p| p.into_inner()) = Some(task);
    Ok(opened)
}

/// The OS sandbox a launched Chromium runs in: the policy of the task's commands
/// (`terminal.sandbox.*`), so the browser reads what they may read and writes nothing
/// but its own profile. A configuration that cannot be read starts no browser.
fn browser_sandbox(ctx: &ToolContext) -> Result<Option<hermes_sandbox::Policy>, String> {
    let config = hermes_environments::config::TerminalConfig::load(ctx.hermes_home())?;
    hermes_environments::env::local::program_policy(&config).map_err(|e| e.to_string())
}

/// Runs `act` on the task's open page, held for the call (the inactivity timeout
/// never closes a page in use); the failure result when the task has no page.
fn on_open_page(ctx: &ToolContext, act: impl FnOnce(&Lease) -> ToolResult) -> ToolResult {
    let tab = match tab(ctx, false) {
        Ok(tab) => tab,
        Err(why) => return failure(why),
    };
    let _hold = tab.hold();
    act(&tab)
}

/// Every string in `value` with secrets masked.
fn redacted(value: Value) -> Value {
    match value {
        Value::String(s) => Value::String(hermes_runtime::redact::redact_secrets(&s)),
        Value::Array(items) => Value::Array(items.into_iter().map(redacted).collect()),
        Value::Object(map) => {
            Value::Object(map.into_iter().map(|(k, v)| (k, redacted(v))).collect())
        }
        other => other,
    }
}

fn failure(error: impl Into<String>) -> ToolResult {
    let error = hermes_runtime::redact::redact_secrets(&error.into());
    Ok(json!({"success": false, "error": error}).into())
}

fn success(value: Value) -> ToolResult {
    Ok(redacted(value).into())
}

/// The URL the browser is sent to, or why not. http(s) goes through the network
/// layer's screening (secrets, metadata, private literals, blocklist); `file://` only
/// with `browser.allow_file_urls`, within what read_file may read; `about:blank`
/// always; other schemes never.
fn screen_navigation(raw: &str, ctx: &ToolContext, settings: &Settings) -> Result<String, Value> {
    let trimmed = raw.trim();
    if trimmed.is_empty() {
        return Err(json!({"success": false, "error": "url is required"}));
    }
    let has_scheme = trimmed.split_once(':').is_some_and(|(s, _)| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c))
            && !s.contains('.')
    });
    let url = if has_scheme
        && !trimmed.contains("://")
        && !trimmed.starts_with("about:")
        && !trimmed.starts_with("data:")
        && !trimmed.starts_with("javascript:")
    {
        // host:port without a scheme
        format!("https://{trimmed}")
    } else if has_scheme {
        trimmed.to_string()
    } else {
        format!("https://{trimmed}")
    };
    let scheme = url
        .split_once(':')
        .map(|(s, _)| s.to_ascii_lowercase())
        .unwrap_or_default();
    match scheme.as_str() {
        "http" | "https" => {
            let policy = NetPolicy::load(ctx.hermes_home());
            match policy.screen(&url) {
                Ok(parsed) => Ok(parsed.to_string()),
                Err(refusal) => {
                    let mut out = json!({"success": false, "error": refusal.to_string()});
                    if let hermes_net::Refusal::Blocked(found) = &refusal {
                        out["blocked_by_policy"] =
                            json!({"host": found.host, "rule": found.rule, "source": found.source});
                    }
                    Err(out)
                }
            }
        }
        "about" if url == "about:blank" => Ok(url),
        "file" if settings.allow_file_urls => request_policy(ctx, settings)
            .judge(&url)
            .map(|()| url.clone())
            .map_err(|why| json!({"success": false, "error": why})),
        "file" => Err(json!({"success": false, "error":
            "Blocked: file:// pages are off; the operator can open them with browser.allow_file_urls (within what read_file may read)."})),
        other => Err(json!({"success": false, "error": format!(
            "Blocked: the browser opens http(s) pages only, not '{other}:' URLs."
        )})),
    }
}

/// A snapshot as returned to the model: cut on a line boundary past the limit, the
/// whole (redacted) text stored with a read_file pointer to the rest.
fn fit_snapshot(text: &str, url: &str, ctx: &ToolContext) -> String {
    if text.chars().count() <= SNAPSHOT_LIMIT {
        return text.to_string();
    }
    let whole = hermes_runtime::redact::redact_secrets(text);
    let stored =
        hermes_net::store_full_text(&hermes_net::store_dir(ctx.hermes_home()), url, &whole);
    let reserve = 200 + stored.as_ref().map_or(0, |p| p.display().to_string().len());
    let mut kept = String::new();
    let mut lines = 0;
    for line in whole.lines() {
        if kept.len() + line.len() + 1 > SNAPSHOT_LIMIT - reserve {
            break;
        }
        kept.push_str(line);
        kept.push('\n');
        lines += 1;
    }
    let remaining = whole.lines().count() - lines;
    match stored {
        Some(path) => format!(
            "{kept}\n[... {remaining} more lines truncated — full snapshot: read_file path=\"{}\" offset={} limit=200]",
            path.display(),
            lines + 1
        ),
        None => format!("{kept}\n[... {remaining} more lines truncated; the full snapshot could not be stored]"),
    }
}

fn with_dialogs(mut out: Value, tab: &Lease, settings: &Settings) -> Value {
    let pending = tab.pending_dialogs();
    if settings.cdp_url.is_some() || !pending.is_empty() {
        out["pending_dialogs"] = Value::Array(pending);
        let recent = tab.recent_dialogs();
        if !recent.is_empty() {
            out["recent_dialogs"] = Value::Array(recent);
        }
    }
    out
}

/// Open a URL in the browser and return a compact snapshot of the page.
#[tool(toolset = "browser", emoji = "🌐", max_result_chars = 100_000, check = browser_available, unavailable_reason = browser_unavailable_reason, dynamic_schema = browser_navigate_schema)]
pub fn browser_navigate(
    /// The URL to open, such as https://example.com.
    url: String,
    ctx: &ToolContext,
) -> ToolResult {
    let settings = settings(ctx);
    let target = match screen_navigation(&url, ctx, &settings) {
        Ok(target) => target,
        Err(refused) => return Ok(refused.into()),
    };
    // Each step as progress, for callers that show a long call while it runs (a first
    // call starts Chromium; a slow page waits for its load and network quiet).
    if manager().existing(ctx.task_id()).is_none() {
        ctx.report_progress("Starting the browser");
    }
    let tab = match tab(ctx, true) {
        Ok(tab) => tab,
        Err(why) => return failure(why),
    };
    let _hold = tab.hold();
    ctx.report_progress(&hermes_runtime::redact::redact_secrets(&format!(
        "Opening {target}"
    )));
    let visit = match tab.navigate(&target) {
        Ok(visit) => visit,
        Err(why) => return failure(why),
    };
    ctx.report_progress(&hermes_runtime::redact::redact_secrets(&format!(
        "Loaded \"{}\"; reading the page",
        visit.title
    )));
    let mut out = json!({"success": true, "url": visit.url, "title": visit.title});
    match tab.snapshot(false) {
        Ok((text, count)) => {
            out["snapshot"] = json!(fit_snapshot(&text, &visit.url, ctx));
            out["element_count"] = json!(count);
        }
        Err(why) => out["snapshot_error"] = json!(why),
    }
    success(with_dialogs(out, &tab, &settings))
}

/// Text snapshot of the current page's accessibility tree, with a ref (such as @e1) on every element you can act on.
#[tool(toolset = "browser", emoji = "📸", max_result_chars = 100_000, check = browser_available, unavailable_reason = browser_unavailable_reason)]
pub fn browser_snapshot(
    /// true: the whole page's content; false (default): a compact view of the interactive elements.
    full: Option<bool>,
    ctx: &ToolContext,
) -> ToolResult {
    let settings = settings(ctx);
    on_open_page(ctx, |tab| {
        let url = tab.visit().map(|v| v.url).unwrap_or_default();
        match tab.snapshot(full.unwrap_or(false)) {
            Ok((text, count)) => {
                let out = json!({"success": true, "snapshot": fit_snapshot(&text, &url, ctx), "element_count": count});
                success(with_dialogs(out, tab, &settings))
            }
            Err(why) => failure(format!("Failed to get snapshot: {why}")),
        }
    })
}

/// Click the element a ref from the latest snapshot names (such as @e5).
#[tool(toolset = "browser", emoji = "👆", check = browser_available, unavailable_reason = browser_unavailable_reason)]
pub fn browser_click(
    /// The element's ref from the snapshot, such as @e5.
    r#ref: String,
    ctx: &ToolContext,
) -> ToolResult {
    on_open_page(ctx, |tab| match tab.click(&r#ref) {
        Ok(clicked) => success(json!({"success": true, "clicked": clicked})),
        Err(why) => failure(why),
    })
}

/// Type text into the field a ref names, replacing what it held.
#[tool(toolset = "browser", emoji = "⌨️", check = browser_available, unavailable_reason = browser_unavailable_reason)]
pub fn browser_type(
    /// The field's ref from the snapshot, such as @e3.
    r#ref: String,
    /// The text to enter.
    text: String,
    ctx: &ToolContext,
) -> ToolResult {
    on_open_page(ctx, |tab| match tab.type_text(&r#ref, &text) {
        Ok(element) => success(json!({"success": true, "typed": text, "element": element})),
        Err(why) => failure(why),
    })
}

/// Which way to scroll.
#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    Up,
    Down,
}

/// Scroll the page up or down by about half a screen.
#[tool(toolset = "browser", emoji = "📜", check = browser_available, unavailable_reason = browser_unavailable_reason)]
pub fn browser_scroll(
    /// up or down.
    direction: Direction,
    ctx: &ToolContext,
) -> ToolResult {
    on_open_page(ctx, |tab| {
        let down = matches!(direction, Direction::Down);
        match tab.scroll(down) {
            Ok(()) => {
                success(json!({"success": true, "scrolled": if down { "down" } else { "up" }}))
            }
            Err(why) => failure(why),
        }
    })
}

/// Go back to the previous page of this tab's history.
#[tool(toolset = "browser", emoji = "◀️", check = browser_available, unavailable_reason = browser_unavailable_reason)]
pub fn browser_back(ctx: &ToolContext) -> ToolResult {
    on_open_page(ctx, |tab| match tab.back() {
        Ok(visit) => success(json!({"success": true, "url": visit.url})),
        Err(why) => failure(why),
    })
}

/// Press one key on the page (Enter submits a form, Tab moves focus).
#[tool(toolset = "browser", emoji = "⌨️", check = browser_available, unavailable_reason = browser_unavailable_reason)]
pub fn browser_press(
    /// The key, such as Enter, Tab, Escape, ArrowDown or one character.
    key: String,
    ctx: &ToolContext,
) -> ToolResult {
    on_open_page(ctx, |tab| match tab.press(&key) {
        Ok(()) => success(json!({"success": true, "pressed": key})),
        Err(why) => failure(why),
    })
}

const IMAGES_SCRIPT: &str =
    "Array.from(document.images).map(i=>({src:i.currentSrc||i.src,alt:i.alt||'',\
    width:i.naturalWidth,height:i.naturalHeight})).filter(i=>i.src&&!i.src.startsWith('data:'))";

/// List the images of the current page: address, alt text and size.
#[tool(toolset = "browser", emoji = "🖼️", max_result_chars = 100_000, check = browser_available, unavailable_reason = browser_unavailable_reason)]
pub fn browser_get_images(ctx: &ToolContext) -> ToolResult {
    on_open_page(ctx, |tab| match tab.evaluate(IMAGES_SCRIPT) {
        Ok(Value::Array(images)) => {
            let count = images.len();
            success(json!({"success": true, "images": images, "count": count}))
        }
        Ok(_) => success(
            json!({"success": true, "images": [], "count": 0, "warning": "Could not read the page's images"}),
        ),
        Err(why) => failure(format!("Failed to get images: {why}")),
    })
}

/// Console output and JavaScript errors of the current page, or the value of a JavaScript expression evaluated in it.
#[tool(toolset = "browser", emoji = "🖥️", max_result_chars = 100_000, check = browser_available, unavailable_reason = browser_unavailable_reason)]
pub fn browser_console(
    /// Empty the message buffers after reading them. Default false.
    clear: Option<bool>,
    /// JavaScript to evaluate in the page, like the DevTools console; its value comes back as JSON.
    expression: Option<String>,
    ctx: &ToolContext,
) -> ToolResult {
    let settings = settings(ctx);
    if let Some(expression) = expression {
        if let Some(why) = eval_policy::refusal(&expression, &settings) {
            return failure(why);
        }
        let tab = match tab(ctx, false) {
            Ok(tab) => tab,
            Err(why) => return failure(why),
        };
        let _hold = tab.hold();
        return match tab.evaluate(&expression) {
            Ok(value) => {
                let parsed = match &value {
                    Value::String(s) => serde_json::from_str::<Value>(s).unwrap_or(value),
                    _ => value,
                };
                let kind = match &parsed {
                    Value::Null => "NoneType",
                    Value::Bool(_) => "bool",
                    Value::Number(n) if n.is_f64() => "float",
                    Value::Number(_) => "int",
                    Value::String(_) => "str",
                    Value::Array(_) => "list",
                    Value::Object(_) => "dict",
                };
                success(json!({"success": true, "result": parsed, "result_type": kind}))
            }
            Err(why) => failure(why),
        };
    }
    on_open_page(ctx, |tab| {
        let (messages, errors) = tab.console(clear.unwrap_or(false));
        success(json!({
            "success": true,
            "total_messages": messages.len(),
            "total_errors": errors.len(),
            "console_messages": messages,
            "js_errors": errors,
        }))
    })
}

/// Take a screenshot of the current page to look at it: layouts, images, CAPTCHAs, whatever the text snapshot misses.
#[tool(toolset = "browser", emoji = "👁️", check = browser_available, unavailable_reason = browser_unavailable_reason)]
pub fn browser_vision(
    /// What you want to learn from the page's look; be specific.
    question: String,
    /// Draw numbered [N] labels on the interactive elements; [N] is ref @eN. Default false.
    annotate: Option<bool>,
    ctx: &ToolContext,
) -> ToolResult {
    use base64::Engine;
    on_open_page(ctx, |tab| {
        let annotate = annotate.unwrap_or(false);
        let mut annotations = Vec::new();
        if annotate {
            if let Err(why) = tab.snapshot(false) {
                return failure(format!("Failed to take a snapshot for the labels: {why}"));
            }
            match tab.draw_labels() {
                Ok(labels) => annotations = labels,
                Err(why) => return failure(format!("Failed to draw labels: {why}")),
            }
        }
        let shot = tab.screenshot(MAX_SIDE, MAX_IMAGE_BYTES);
        if annotate {
            tab.clear_labels();
        }
        let (mime, bytes) = match shot {
            Ok(shot) => shot,
            Err(why) => return failure(format!("Failed to take screenshot: {why}")),
        };
        let extension = if mime == "image/png" { "png" } else { "jpg" };
        let dir = ctx.hermes_home().join("cache").join("screenshots");
        let path = dir.join(format!(
            "browser_screenshot_{}.{extension}",
            hermes_sandbox::random_hex(12)
        ));
        if let Err(e) = std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, &bytes)) {
            return failure(format!("Failed to save the screenshot: {e}"));
        }
        let url = tab.visit().map(|v| v.url).unwrap_or_default();
        let data = base64::engine::general_purpose::STANDARD.encode(&bytes);
        let mut text = format!(
            "Screenshot of {url} attached; look at it to answer.\n\nQuestion: {}",
            question.trim()
        );
        if annotate {
            text.push_str("\n\nLabels [N] drawn on the page are refs @eN.");
        }
        let mut meta = json!({"screenshot_path": path.display().to_string(), "url": url,
                              "size_bytes": bytes.len(), "mime_type": mime});
        // The auxiliary vision model (auxiliary.vision.*), when one is configured, answers
        // the question too, for callers and models that cannot look at images.
        let data_url = format!("data:{mime};base64,{data}");
        let mut summary = format!(
            "Screenshot of the page attached ({:.1} KB). Screenshot path: {}",
            bytes.len() as f64 / 1024.0,
            path.display()
        );
        if let Ok(aux) = hermes_vision::AuxVision::resolve(&config_for(ctx.hermes_home())) {
            let prompt = format!(
                "This is a screenshot of a web page in a browser. Question: {}\n\nAnswer from what is visible. \
                 Where it matters, name the interactive elements, and describe any verification challenge or CAPTCHA and what it asks for.",
                question.trim()
            );
            match aux.analyze(&prompt, &data_url) {
                Ok(analysis) => {
                    text.push_str(&format!(
                        "\n\nAnalysis by the auxiliary vision model:\n{analysis}"
                    ));
                    summary = format!("{analysis}\n\nScreenshot path: {}", path.display());
                    meta["analysis"] = json!(analysis);
                }
                Err(why) => meta["analysis_error"] = json!(why.to_string()),
            }
        }
        if annotate {
            meta["annotations"] = Value::Array(annotations);
        }
        Ok(ToolOutput::Multimodal(json!({
            "_multimodal": true,
            "content": [
                {"type": "text", "text": hermes_runtime::redact::redact_secrets(&text)},
                {"type": "image_url", "image_url": {"url": data_url}},
            ],
            "text_summary": hermes_runtime::redact::redact_secrets(&summary),
            "meta": redacted(meta),
        })))
    })
}

/// How to answer a dialog.
#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "lowercase")]
pub enum DialogAction {
    Accept,
    Dismiss,
}

/// Answer a JavaScript dialog (alert, confirm, prompt, beforeunload) that is blocking the page; browser_snapshot lists open ones under pending_dialogs.
#[tool(toolset = "browser-cdp", emoji = "💬", check = browser_cdp_available, requires_env = ["BROWSER_CDP_URL"])]
pub fn browser_dialog(
    /// accept (OK, or the prompt's answer) or dismiss (Cancel).
    action: DialogAction,
    /// The answer to a prompt() dialog; ignored for others. Default empty.
    prompt_text: Option<String>,
    /// Which dialog, from pending_dialogs[].id; needed only when several are open.
    dialog_id: Option<String>,
    ctx: &ToolContext,
) -> ToolResult {
    on_open_page(ctx, |tab| {
        let accept = matches!(action, DialogAction::Accept);
        match tab.answer_dialog(accept, prompt_text.as_deref(), dialog_id.as_deref()) {
            Ok(dialog) => success(
                json!({"success": true, "action": if accept { "accept" } else { "dismiss" }, "dialog": dialog}),
            ),
            Err(why) => failure(why),
        }
    })
}

/// Send one raw Chrome DevTools Protocol command to the connected browser.
#[tool(toolset = "browser-cdp", emoji = "🧪", max_result_chars = 100_000, check = browser_cdp_available, requires_env = ["BROWSER_CDP_URL"], dynamic_schema = browser_cdp_schema)]
pub fn browser_cdp(
    /// The CDP method, such as Target.getTargets or Runtime.evaluate.
    method: String,
    /// The method's parameters: a JSON object (or its JSON text); omit it or pass {} when
    /// the method takes none.
    params: Option<String>,
    /// The target (tab) id from Target.getTargets, for page-level methods.
    target_id: Option<String>,
    /// An out-of-process frame id; not supported by this backend.
    frame_id: Option<String>,
    /// Seconds to wait for the answer (default 30, at most 300).
    timeout: Option<f64>,
    ctx: &ToolContext,
) -> ToolResult {
    let method = method.trim().to_string();
    let error = |msg: String| -> ToolResult {
        Ok(json!({"error": hermes_runtime::redact::redact_secrets(&msg), "method": method}).into())
    };
    let Some((domain, name)) = method.split_once('.') else {
        return error("method must be a CDP method name such as 'Target.getTargets'".into());
    };
    if domain.is_empty() || name.is_empty() {
        return error("method must be a CDP method name such as 'Target.getTargets'".into());
    }
    if frame_id.is_some() {
        return error(
            "frame_id routing is not supported by this browser backend; pass target_id".into(),
        );
    }
    // The request interception is the policy's hold on the page: not the model's to
    // switch off.
    if domain == "Fetch" {
        return error("Fetch.* commands are reserved: the browser's requests are judged by the network policy".into());
    }
    // Declared as text so strict-mode schemas can carry it; an object the model sends is
    // passed here as its JSON text by the runtime's argument repair.
    let params = match params.as_deref().map(str::trim) {
        None | Some("") | Some("null") => json!({}),
        Some(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(map)) => Value::Object(map),
            _ => return error("params must be a JSON object".into()),
        },
    };
    if matches!(method.as_str(), "Page.navigate" | "Target.createTarget") {
        if let Some(url) = params.get("url").and_then(Value::as_str) {
            let settings = settings(ctx);
            if let Err(refused) = screen_navigation(url, ctx, &settings) {
                return error(refused["error"].as_str().unwrap_or("Blocked").to_string());
            }
        }
    }
    let timeout = Duration::from_secs_f64(timeout.unwrap_or(30.0).clamp(1.0, 300.0));
    let tab = match tab(ctx, true) {
        Ok(tab) => tab,
        Err(why) => return error(why),
    };
    let _hold = tab.hold();
    match tab.raw(&method, params, target_id.as_deref(), timeout) {
        Ok(result) => success(json!({"success": true, "method": method, "result": result})),
        Err(why) => error(why),
    }
}
