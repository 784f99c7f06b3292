//! One task's page: its own browser context and tab, the events it has seen (load
//! progress, console, exceptions, dialogs, refused requests), and the refs of its
//! last snapshot.

use crate::cdp::{CdpError, Connection, Event};
use crate::guard::RequestPolicy;
use crate::settings::{DialogPolicy, Settings};
use crate::snapshot::{self, RefTarget};
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::sync::{mpsc, Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const CALL: Duration = Duration::from_secs(30);
/// How long a navigation waits for the network to go quiet after `load`.
const NETWORK_IDLE_WAIT: Duration = Duration::from_secs(3);
/// How long no request may be under way for the network to count as quiet.
const QUIET: Duration = Duration::from_millis(150);
const MAX_MESSAGES: usize = 1000;

/// A JavaScript dialog waiting for an answer.
#[derive(Debug, Clone)]
pub struct Dialog {
    pub id: String,
    pub kind: String,
    pub message: String,
    pub default_prompt: String,
    pub opened_at: f64,
    pub session_id: String,
}

impl Dialog {
    pub fn to_json(&self) -> Value {
        json!({"id": self.id, "type": self.kind, "message": self.message,
               "default_prompt": self.default_prompt, "opened_at": self.opened_at})
    }
}

#[derive(Default)]
struct PageState {
    frame_id: String,
    loader_id: String,
    /// `(loaderId, lifecycle event name)` of the main frame.
    lifecycle: Vec<(String, String)>,
    loading: bool,
    console: Vec<Value>,
    errors: Vec<Value>,
    pending_dialogs: Vec<Dialog>,
    recent_dialogs: Vec<Value>,
    dialog_seq: u64,
    /// Requests refused by the policy since the last navigation: (url, why, document).
    refused: Vec<(String, String, bool)>,
    /// Sessions of frames and workers attached under the page.
    children: HashSet<String>,
    /// Requests of the page under way, and since when none has been.
    inflight: HashSet<String>,
    quiet_since: Option<Instant>,
}

struct Shared {
    state: Mutex<PageState>,
    changed: Condvar,
}

struct RefTable {
    loader_id: String,
    refs: HashMap<String, RefTarget>,
}

/// What a navigation ended on.
pub struct Visit {
    pub url: String,
    pub title: String,
}

pub struct Tab {
    connection: Arc<Connection>,
    pub context_id: String,
    pub target_id: String,
    pub session_id: String,
    shared: Arc<Shared>,
    refs: Mutex<Option<RefTable>>,
    listener: u64,
    settings: Settings,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

fn cdp(e: CdpError) -> String {
    e.to_string()
}

/// A paused request for the guard thread.
struct Paused {
    session: String,
    request_id: String,
    url: String,
    document: bool,
}

impl Tab {
    /// A new context and tab in the browser behind `connection`, every request of it
    /// judged by `policy`.
    pub fn open(
        connection: Arc<Connection>,
        settings: Settings,
        policy: RequestPolicy,
    ) -> Result<Arc<Tab>, String> {
        let context = connection
            .call(
                "Target.createBrowserContext",
                json!({"disposeOnDetach": true}),
                None,
                CALL,
            )
            .map_err(cdp)?;
        let context_id = context["browserContextId"]
            .as_str()
            .ok_or("no browser context id")?
            .to_string();
        let target = connection
            .call(
                "Target.createTarget",
                json!({"url": "about:blank", "browserContextId": context_id}),
                None,
                CALL,
            )
            .map_err(cdp)?;
        let target_id = target["targetId"]
            .as_str()
            .ok_or("no target id")?
            .to_string();
        let attached = connection
            .call(
                "Target.attachToTarget",
                json!({"targetId": target_id, "flatten": true}),
                None,
                CALL,
            )
            .map_err(cdp)?;
        let session_id = attached["sessionId"]
            .as_str()
            .ok_or("no session id")?
            .to_string();
        let shared = Arc::new(Shared {
            state: Mutex::new(PageState::default()),
            changed: Condvar::new(),
        });

        let (paused_tx, paused_rx) = mpsc::channel::<Paused>();
        let listener = {
            let shared = Arc::downgrade(&shared);
            let weak_connection = Arc::downgrade(&connection);
            let session = session_id.clone();
            let policy_dialogs = settings.dialog_policy;
            connection.listen(Arc::new(move |event: &Event| {
                on_event(
                    event,
                    &session,
                    &shared,
                    &weak_connection,
                    &paused_tx,
                    policy_dialogs,
                )
            }))
        };
        spawn_guard(
            Arc::downgrade(&connection),
            Arc::downgrade(&shared),
            paused_rx,
            policy,
        );

        let tab = Arc::new(Tab {
            connection: Arc::clone(&connection),
            context_id,
            target_id,
            session_id: session_id.clone(),
            shared,
            refs: Mutex::new(None),
            listener,
            settings,
        });
        let session = Some(session_id.as_str());
        for (method, params) in [
            (
                "Fetch.enable",
                json!({"patterns": [{"urlPattern": "*", "requestStage": "Request"}]}),
            ),
            ("Page.enable", json!({})),
            ("Page.setLifecycleEventsEnabled", json!({"enabled": true})),
            (
                "Network.enable",
                json!({"maxTotalBufferSize": 0, "maxResourceBufferSize": 0}),
            ),
            ("Runtime.enable", json!({})),
            ("DOM.enable", json!({})),
            (
                "Emulation.setDeviceMetricsOverride",
                json!({"width": 1280, "height": 800, "deviceScaleFactor": 1, "mobile": false}),
            ),
            (
                "Target.setAutoAttach",
                json!({"autoAttach": true, "waitForDebuggerOnStart": true, "flatten": true}),
            ),
        ] {
            tab.connection
                .call(method, params, session, CALL)
                .map_err(|e| format!("{method}: {e}"))?;
        }
        let tree = tab
            .connection
            .call("Page.getFrameTree", json!({}), session, CALL)
            .map_err(cdp)?;
        {
            let mut state = lock(&tab.shared.state);
            state.frame_id = tree["frameTree"]["frame"]["id"]
                .as_str()
                .unwrap_or_default()
                .into();
            state.loader_id = tree["frameTree"]["frame"]["loaderId"]
                .as_str()
                .unwrap_or_default()
                .into();
        }
        Ok(tab)
    }

    pub fn is_alive(&self) -> bool {
        !self.connection.is_closed()
    }

    /// Closes the context (and its tab) in the browser.
    pub fn close(&self) {
        self.connection.unlisten(self.listener);
        let _ = self.connection.call(
            "Target.disposeBrowserContext",
            json!({"browserContextId": self.context_id}),
            None,
            Duration::from_secs(5),
        );
    }

    fn call(&self, method: &str, params: Value) -> Result<Value, String> {
        self.call_for(method, params, CALL)
    }

    fn call_for(&self, method: &str, params: Value, timeout: Duration) -> Result<Value, String> {
        self.connection
            .call(method, params, Some(&self.session_id), timeout)
            .map_err(cdp)
    }

    /// Waits until `done` holds or `timeout` passes; whether it held.
    fn wait_until(&self, timeout: Duration, done: impl Fn(&PageState) -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        let mut state = lock(&self.shared.state);
        loop {
            if done(&state) {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || self.connection.is_closed() {
                return false;
            }
            state = self
                .shared
                .changed
                .wait_timeout(state, left.min(Duration::from_millis(50)))
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    fn has_event(state: &PageState, loader: &str, name: &str) -> bool {
        state
            .lifecycle
            .iter()
            .any(|(l, n)| l == loader && n == name)
    }

    /// After load, a bounded wait for the network to go quiet.
    fn wait_loaded(&self, loader: &str, timeout: Duration) {
        let loader = loader.to_string();
        self.wait_until(timeout, |s| {
            Self::has_event(s, &loader, "load") || !s.pending_dialogs.is_empty()
        });
        self.wait_until(NETWORK_IDLE_WAIT, |s| {
            Self::has_event(s, &loader, "networkIdle")
                || (s.inflight.is_empty() && s.quiet_since.is_some_and(|t| t.elapsed() >= QUIET))
                || s.loader_id != loader
                || !s.pending_dialogs.is_empty()
        });
    }

    /// The first refusal of a top-level document since the last navigation.
    fn document_refusal(&self) -> Option<(String, String)> {
        let state = lock(&self.shared.state);
        state
            .refused
            .iter()
            .find(|(_, _, document)| *document)
            .map(|(url, why, _)| (url.clone(), why.clone()))
    }

    pub fn navigate(&self, url: &str) -> Result<Visit, String> {
        lock(&self.shared.state).refused.clear();
        let answer = self.call("Page.navigate", json!({"url": url}))?;
        if let Some(error) = answer["errorText"].as_str().filter(|e| !e.is_empty()) {
            if let Some((blocked, why)) = self.document_refusal() {
                let _ = self.call("Page.navigate", json!({"url": "about:blank"}));
                return Err(
                    if blocked.trim_end_matches('/') == url.trim_end_matches('/') {
                        why
                    } else {
                        format!("{why} (a redirect from {url} led to {blocked})")
                    },
                );
            }
            return Err(format!("Navigation to {url} failed: {error}"));
        }
        if let Some(loader) = answer["loaderId"].as_str() {
            self.wait_loaded(loader, self.settings.command_timeout);
        }
        *self.refs_table() = None;
        self.visit()
    }

    fn refs_table(&self) -> std::sync::MutexGuard<'_, Option<RefTable>> {
        lock(&self.refs)
    }

    /// The page's address and title now.
    pub fn visit(&self) -> Result<Visit, String> {
        let info = self
            .connection
            .call(
                "Target.getTargetInfo",
                json!({"targetId": self.target_id}),
                None,
                CALL,
            )
            .map_err(cdp)?;
        Ok(Visit {
            url: info["targetInfo"]["url"]
                .as_str()
                .unwrap_or_default()
                .into(),
            title: info["targetInfo"]["title"]
                .as_str()
                .unwrap_or_default()
                .into(),
        })
    }

    pub fn back(&self) -> Result<Visit, String> {
        let history = self.call("Page.getNavigationHistory", json!({}))?;
        let index = history["currentIndex"].as_i64().unwrap_or(0);
        if index <= 0 {
            return Err("There is no previous page in this tab's history.".into());
        }
        let entry = &history["entries"][(index - 1) as usize];
        let before = lock(&self.shared.state).loader_id.clone();
        self.call(
            "Page.navigateToHistoryEntry",
            json!({"entryId": entry["id"]}),
        )?;
        self.wait_until(self.settings.command_timeout, |s| s.loader_id != before);
        let loader = lock(&self.shared.state).loader_id.clone();
        self.wait_loaded(&loader, self.settings.command_timeout);
        *self.refs_table() = None;
        if let Some((_, why)) = self.document_refusal() {
            return Err(why);
        }
        self.visit()
    }

    /// A dialog blocks the page's JavaScript: say so instead of waiting on it.
    fn dialog_blocks(&self) -> Result<(), String> {
        let state = lock(&self.shared.state);
        match state.pending_dialogs.first() {
            Some(d) => Err(format!(
                "A {} dialog is open on the page (\"{}\"); answer it with browser_dialog first.",
                d.kind, d.message
            )),
            None => Ok(()),
        }
    }

    /// The accessibility snapshot; its refs replace the previous ones.
    pub fn snapshot(&self, full: bool) -> Result<(String, usize), String> {
        // An open dialog blocks the page's accessibility tree; the refs are kept.
        if let Some(dialog) = lock(&self.shared.state).pending_dialogs.first() {
            return Ok((
                format!(
                    "(a {} dialog is open: \"{}\". Answer it with browser_dialog to see the page again.)",
                    dialog.kind, dialog.message
                ),
                0,
            ));
        }
        let loader = lock(&self.shared.state).loader_id.clone();
        let tree = self.call_for(
            "Accessibility.getFullAXTree",
            json!({}),
            Duration::from_secs(120),
        )?;
        let nodes = tree["nodes"].as_array().cloned().unwrap_or_default();
        let built = snapshot::build(&nodes, full);
        let count = built.refs.len();
        *self.refs_table() = Some(RefTable {
            loader_id: loader,
            refs: built.refs,
        });
        Ok((built.text, count))
    }

    pub fn pending_dialogs(&self) -> Vec<Value> {
        lock(&self.shared.state)
            .pending_dialogs
            .iter()
            .map(Dialog::to_json)
            .collect()
    }

    pub fn recent_dialogs(&self) -> Vec<Value> {
        lock(&self.shared.state).recent_dialogs.clone()
    }

    /// The element a ref names, checked to be the one the snapshot saw: same
    /// document, still in it. Its JavaScript object id.
    fn resolve(&self, raw: &str) -> Result<(String, String), String> {
        let id = snapshot::parse_ref(raw).ok_or_else(|| {
            format!("Invalid ref '{raw}': use a ref such as @e5 from the latest browser_snapshot.")
        })?;
        let stale = |why: &str| {
            format!(
                "Ref @{id} is stale: {why}. Take a new browser_snapshot and use its refs; nothing was done."
            )
        };
        let (target, loader) = {
            let table = self.refs_table();
            let Some(table) = table.as_ref() else {
                return Err(
                    "No snapshot of this page yet: call browser_snapshot first and use its refs."
                        .into(),
                );
            };
            let target = table.refs.get(&id).cloned().ok_or_else(|| {
                format!("Unknown ref @{id}: the latest snapshot has no such ref. Take a new browser_snapshot.")
            })?;
            (target, table.loader_id.clone())
        };
        if lock(&self.shared.state).loader_id != loader {
            return Err(stale("the page has navigated since the snapshot"));
        }
        let resolved = self
            .call(
                "DOM.resolveNode",
                json!({"backendNodeId": target.backend_node_id}),
            )
            .map_err(|_| stale("the element is no longer in the page"))?;
        let object = resolved["object"]["objectId"]
            .as_str()
            .ok_or_else(|| stale("the element is no longer in the page"))?
            .to_string();
        let connected = self.call_on(&object, "function(){return this.isConnected === true}")?;
        if connected != Value::Bool(true) {
            return Err(stale(
                "the element was removed from the page (it re-rendered)",
            ));
        }
        Ok((id, object))
    }

    /// Calls `function` with `this` bound to `object`; its value.
    fn call_on(&self, object: &str, function: &str) -> Result<Value, String> {
        let answer = self.call(
            "Runtime.callFunctionOn",
            json!({"objectId": object, "functionDeclaration": function,
                   "returnByValue": true, "awaitPromise": true}),
        )?;
        if let Some(details) = answer.get("exceptionDetails") {
            return Err(exception_text(details));
        }
        Ok(answer["result"]["value"].clone())
    }

    /// A command that may open a dialog (a click, a key): its answer, or nothing when
    /// a dialog opened first (the page stays blocked until the dialog is answered, and
    /// the command finishes then).
    fn call_unless_dialog(&self, method: &str, params: Value) -> Result<(), String> {
        let (tx, rx) = mpsc::channel();
        let connection = Arc::clone(&self.connection);
        let (method_owned, session) = (method.to_string(), self.session_id.clone());
        std::thread::spawn(move || {
            let _ = tx.send(connection.call(&method_owned, params, Some(&session), CALL));
        });
        let deadline = Instant::now() + CALL;
        loop {
            match rx.recv_timeout(Duration::from_millis(50)) {
                Ok(answer) => return answer.map(drop).map_err(cdp),
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err("the browser connection is closed".into())
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if !lock(&self.shared.state).pending_dialogs.is_empty() {
                        return Ok(());
                    }
                    if Instant::now() > deadline {
                        return Err(format!("{method} got no answer within {}s", CALL.as_secs()));
                    }
                }
            }
        }
    }

    /// Lets a navigation an action started run to its load.
    fn settle(&self, before: &str) {
        std::thread::sleep(Duration::from_millis(150));
        let (loading, loader) = {
            let state = lock(&self.shared.state);
            (state.loading, state.loader_id.clone())
        };
        if loading || loader != before {
            self.wait_until(Duration::from_secs(10), |s| {
                !s.loading || !s.pending_dialogs.is_empty()
            });
            let loader = lock(&self.shared.state).loader_id.clone();
            self.wait_loaded(&loader, Duration::from_secs(10));
        }
    }

    pub fn click(&self, raw: &str) -> Result<String, String> {
        self.dialog_blocks()?;
        let (id, object) = self.resolve(raw)?;
        let before = lock(&self.shared.state).loader_id.clone();
        let place = self.call_on(
            &object,
            "function(){this.scrollIntoView({block:'center',inline:'center',behavior:'instant'});\
             const r=this.getBoundingClientRect();const x=r.left+r.width/2,y=r.top+r.height/2;\
             const hit=document.elementFromPoint(x,y);\
             return {x:x,y:y,w:r.width,h:r.height,hit:!!hit&&(hit===this||this.contains(hit))};}",
        )?;
        let visible =
            place["w"].as_f64().unwrap_or(0.0) > 0.0 && place["h"].as_f64().unwrap_or(0.0) > 0.0;
        if visible && place["hit"] == Value::Bool(true) {
            let (x, y) = (
                place["x"].as_f64().unwrap_or(0.0),
                place["y"].as_f64().unwrap_or(0.0),
            );
            for kind in ["mouseMoved", "mousePressed", "mouseReleased"] {
                self.call_unless_dialog(
                    "Input.dispatchMouseEvent",
                    json!({"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1}),
                )?;
            }
        } else {
            // Covered or without a box: the element itself gets the click, never
            // whatever lies at its coordinates.
            self.call_unless_dialog(
                "Runtime.callFunctionOn",
                json!({"objectId": object, "functionDeclaration": "function(){this.click();}"}),
            )?;
        }
        self.release(&object);
        self.settle(&before);
        Ok(format!("@{id}"))
    }

    pub fn type_text(&self, raw: &str, text: &str) -> Result<String, String> {
        self.dialog_blocks()?;
        let (id, object) = self.resolve(raw)?;
        self.call_on(
            &object,
            "function(){this.scrollIntoView({block:'center'});this.focus();\
             if('value' in this){this.value='';this.dispatchEvent(new Event('input',{bubbles:true}));}\
             else if(this.isContentEditable){this.textContent='';}}",
        )?;
        self.call("Input.insertText", json!({"text": text}))?;
        self.call_on(
            &object,
            "function(){this.dispatchEvent(new Event('change',{bubbles:true}));}",
        )?;
        self.release(&object);
        Ok(format!("@{id}"))
    }

    fn release(&self, object: &str) {
        self.connection.notify(
            "Runtime.releaseObject",
            json!({"objectId": object}),
            Some(&self.session_id),
        );
    }

    pub fn scroll(&self, down: bool) -> Result<(), String> {
        self.dialog_blocks()?;
        self.call(
            "Input.dispatchMouseEvent",
            json!({"type": "mouseWheel", "x": 640, "y": 400, "deltaX": 0,
                   "deltaY": if down { 500 } else { -500 }}),
        )?;
        std::thread::sleep(Duration::from_millis(100));
        Ok(())
    }

    pub fn press(&self, key: &str) -> Result<(), String> {
        self.dialog_blocks()?;
        let (code, key_code, text) = key_info(key)
            .ok_or_else(|| format!("Unknown key '{key}': use a key name such as Enter, Tab, Escape, ArrowDown, Backspace, or one character."))?;
        let before = lock(&self.shared.state).loader_id.clone();
        let mut down = json!({"type": if text.is_empty() { "rawKeyDown" } else { "keyDown" },
                              "key": key, "code": code, "windowsVirtualKeyCode": key_code,
                              "nativeVirtualKeyCode": key_code});
        if !text.is_empty() {
            down["text"] = json!(text);
            down["unmodifiedText"] = json!(text);
        }
        self.call_unless_dialog("Input.dispatchKeyEvent", down)?;
        self.call_unless_dialog(
            "Input.dispatchKeyEvent",
            json!({"type": "keyUp", "key": key, "code": code, "windowsVirtualKeyCode": key_code,
                   "nativeVirtualKeyCode": key_code}),
        )?;
        self.settle(&before);
        Ok(())
    }

    /// Console messages and uncaught exceptions seen so far.
    pub fn console(&self, clear: bool) -> (Vec<Value>, Vec<Value>) {
        let mut state = lock(&self.shared.state);
        let out = (state.console.clone(), state.errors.clone());
        if clear {
            state.console.clear();
            state.errors.clear();
        }
        out
    }

    /// Evaluates `expression` in the page; its value as JSON.
    pub fn evaluate(&self, expression: &str) -> Result<Value, String> {
        self.dialog_blocks()?;
        let answer = self.call(
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true, "awaitPromise": true,
                   "userGesture": true}),
        )?;
        if let Some(details) = answer.get("exceptionDetails") {
            return Err(exception_text(details));
        }
        let result = &answer["result"];
        if result.get("value").is_none()
            && result["type"] == "object"
            && result["subtype"] != "null"
        {
            if let Some(description) = result["description"].as_str() {
                return Err(format!(
                    "The expression returned {description}, which cannot be serialised: return a primitive value (.innerText, .href, .value) or JSON.stringify(...) instead."
                ));
            }
        }
        Ok(result.get("value").cloned().unwrap_or(Value::Null))
    }

    /// A PNG (or JPEG when the PNG is too big) of the viewport, within `max_side`
    /// pixels per side and `max_bytes`. Returns (mime, bytes).
    pub fn screenshot(&self, max_side: u32, max_bytes: usize) -> Result<(String, Vec<u8>), String> {
        use base64::Engine;
        let metrics = self.call("Page.getLayoutMetrics", json!({}))?;
        let width = metrics["cssVisualViewport"]["clientWidth"]
            .as_f64()
            .unwrap_or(1280.0);
        let height = metrics["cssVisualViewport"]["clientHeight"]
            .as_f64()
            .unwrap_or(800.0);
        let mut scale = (max_side as f64 / width.max(height)).min(1.0);
        for (format, quality) in [
            ("png", None),
            ("jpeg", Some(80)),
            ("jpeg", Some(60)),
            ("jpeg", Some(50)),
        ] {
            loop {
                let mut params = json!({"format": format, "captureBeyondViewport": false,
                    "clip": {"x": metrics["cssVisualViewport"]["pageX"].as_f64().unwrap_or(0.0),
                             "y": metrics["cssVisualViewport"]["pageY"].as_f64().unwrap_or(0.0),
                             "width": width, "height": height, "scale": scale}});
                if let Some(q) = quality {
                    params["quality"] = json!(q);
                }
                let shot = self.call("Page.captureScreenshot", params)?;
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(shot["data"].as_str().unwrap_or_default())
                    .map_err(|e| e.to_string())?;
                if bytes.len() <= max_bytes {
                    return Ok((format!("image/{format}"), bytes));
                }
                if format == "jpeg" && quality == Some(50) && scale > 0.1 {
                    scale /= 2.0;
                    continue;
                }
                break;
            }
        }
        Err("the screenshot stays over the size limit".into())
    }

    /// Draws `[N]` labels over the elements of the latest refs (for annotated
    /// screenshots); returns how many were drawn. [`Tab::clear_labels`] removes them.
    pub fn draw_labels(&self) -> Result<Vec<Value>, String> {
        let refs: Vec<(String, RefTarget)> = match self.refs_table().as_ref() {
            Some(table) => table
                .refs
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            None => Vec::new(),
        };
        let mut labels = Vec::new();
        for (id, target) in refs.into_iter().take(500) {
            let Ok(model) = self.call(
                "DOM.getBoxModel",
                json!({"backendNodeId": target.backend_node_id}),
            ) else {
                continue;
            };
            let quad = &model["model"]["border"];
            let (Some(x), Some(y)) = (quad[0].as_f64(), quad[1].as_f64()) else {
                continue;
            };
            labels.push(json!({"n": id.trim_start_matches('e'), "x": x, "y": y,
                               "ref": format!("@{id}"), "role": target.role, "name": target.name}));
        }
        let script = format!(
            "(()=>{{const l={};const box=document.createElement('div');box.id='__hermes_labels';\
             box.style.cssText='position:fixed;left:0;top:0;width:0;height:0;z-index:2147483647;pointer-events:none';\
             for(const e of l){{const d=document.createElement('div');d.textContent='['+e.n+']';\
             d.style.cssText='position:fixed;left:'+e.x+'px;top:'+e.y+'px;background:#ff0;color:#000;font:bold 11px monospace;padding:0 2px;border:1px solid #000';\
             box.appendChild(d);}}document.documentElement.appendChild(box);return l.length;}})()",
            Value::Array(labels.clone())
        );
        self.evaluate(&script)?;
        Ok(labels)
    }

    pub fn clear_labels(&self) {
        let _ = self.evaluate("document.getElementById('__hermes_labels')?.remove()");
    }

    /// Answers a pending dialog.
    pub fn answer_dialog(
        &self,
        accept: bool,
        prompt_text: Option<&str>,
        dialog_id: Option<&str>,
    ) -> Result<Value, String> {
        let dialog = {
            let state = lock(&self.shared.state);
            if state.pending_dialogs.is_empty() {
                return Err("no dialog is currently open".into());
            }
            match dialog_id {
                Some(id) => state
                    .pending_dialogs
                    .iter()
                    .find(|d| d.id == id)
                    .cloned()
                    .ok_or_else(|| {
                        let known: Vec<&str> = state
                            .pending_dialogs
                            .iter()
                            .map(|d| d.id.as_str())
                            .collect();
                        format!("dialog_id '{id}' not found (open: {})", known.join(", "))
                    })?,
                None if state.pending_dialogs.len() > 1 => {
                    let known: Vec<&str> = state
                        .pending_dialogs
                        .iter()
                        .map(|d| d.id.as_str())
                        .collect();
                    return Err(format!(
                        "{} dialogs are open; pass dialog_id (one of {})",
                        known.len(),
                        known.join(", ")
                    ));
                }
                None => state.pending_dialogs[0].clone(),
            }
        };
        let mut params = json!({"accept": accept});
        if dialog.kind == "prompt" {
            params["promptText"] = json!(prompt_text.unwrap_or(""));
        }
        self.connection
            .call(
                "Page.handleJavaScriptDialog",
                params,
                Some(&dialog.session_id),
                CALL,
            )
            .map_err(cdp)?;
        let mut state = lock(&self.shared.state);
        state.pending_dialogs.retain(|d| d.id != dialog.id);
        let mut record = dialog.to_json();
        record["closed_at"] = json!(now());
        record["closed_by"] = json!("agent");
        push_capped(&mut state.recent_dialogs, record, 20);
        Ok(dialog.to_json())
    }

    /// A raw CDP command: on the browser (`target` None), or on a target through a
    /// session attached for this one call (this task's own tab uses its session).
    pub fn raw(
        &self,
        method: &str,
        params: Value,
        target: Option<&str>,
        timeout: Duration,
    ) -> Result<Value, String> {
        match target {
            None => self
                .connection
                .call(method, params, None, timeout)
                .map_err(cdp),
            Some(t) if t == self.target_id => self.call_for(method, params, timeout),
            Some(t) => {
                let attached = self
                    .connection
                    .call(
                        "Target.attachToTarget",
                        json!({"targetId": t, "flatten": true}),
                        None,
                        CALL,
                    )
                    .map_err(cdp)?;
                let session = attached["sessionId"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                let out = self
                    .connection
                    .call(method, params, Some(&session), timeout)
                    .map_err(cdp);
                self.connection.notify(
                    "Target.detachFromTarget",
                    json!({"sessionId": session}),
                    None,
                );
                out
            }
        }
    }
}

fn push_capped(list: &mut Vec<Value>, value: Value, cap: usize) {
    if list.len() >= cap {
        list.remove(0);
    }
    list.push(value);
}

fn exception_text(details: &Value) -> String {
    details["exception"]["description"]
        .as_str()
        .or_else(|| details["text"].as_str())
        .unwrap_or("JavaScript exception")
        .to_string()
}

fn remote_text(arg: &Value) -> String {
    match arg.get("value") {
        Some(Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
        None => arg["description"]
            .as_str()
            .or_else(|| arg["unserializableValue"].as_str())
            .or_else(|| arg["type"].as_str())
            .unwrap_or_default()
            .to_string(),
    }
}

/// Key name → (code, Windows virtual key code, text it types).
fn key_info(key: &str) -> Option<(String, i64, String)> {
    let named: &[(&str, &str, i64, &str)] = &[
        ("Enter", "Enter", 13, "\r"),
        ("Tab", "Tab", 9, ""),
        ("Escape", "Escape", 27, ""),
        ("Backspace", "Backspace", 8, ""),
        ("Delete", "Delete", 46, ""),
        ("ArrowDown", "ArrowDown", 40, ""),
        ("ArrowUp", "ArrowUp", 38, ""),
        ("ArrowLeft", "ArrowLeft", 37, ""),
        ("ArrowRight", "ArrowRight", 39, ""),
        ("Home", "Home", 36, ""),
        ("End", "End", 35, ""),
        ("PageDown", "PageDown", 34, ""),
        ("PageUp", "PageUp", 33, ""),
        (" ", "Space", 32, " "),
        ("Space", "Space", 32, " "),
    ];
    if let Some((_, code, vk, text)) = named.iter().find(|(k, ..)| k.eq_ignore_ascii_case(key)) {
        return Some((code.to_string(), *vk, text.to_string()));
    }
    let mut chars = key.chars();
    let (Some(c), None) = (chars.next(), chars.next()) else {
        return None;
    };
    let upper = c.to_ascii_uppercase();
    let code = if c.is_ascii_alphabetic() {
        format!("Key{upper}")
    } else if c.is_ascii_digit() {
        format!("Digit{c}")
    } else {
        String::new()
    };
    Some((code, upper as i64, c.to_string()))
}

fn on_event(
    event: &Event,
    page_session: &str,
    shared: &Weak<Shared>,
    connection: &Weak<Connection>,
    paused: &mpsc::Sender<Paused>,
    dialogs: DialogPolicy,
) {
    let Some(shared) = shared.upgrade() else {
        return;
    };
    let Some(session) = event.session_id.as_deref() else {
        return;
    };
    let mine = session == page_session || lock(&shared.state).children.contains(session);
    if !mine {
        return;
    }
    let p = &event.params;
    match event.method.as_str() {
        "Fetch.requestPaused" => {
            let state = lock(&shared.state);
            let document = session == page_session
                && p["resourceType"] == "Document"
                && p["frameId"].as_str() == Some(state.frame_id.as_str());
            let _ = paused.send(Paused {
                session: session.to_string(),
                request_id: p["requestId"].as_str().unwrap_or_default().to_string(),
                url: p["request"]["url"].as_str().unwrap_or_default().to_string(),
                document,
            });
        }
        "Target.attachedToTarget" => {
            // A frame or worker of the page: its requests are judged too, before it
            // runs a line.
            let Some(child) = p["sessionId"].as_str() else {
                return;
            };
            lock(&shared.state).children.insert(child.to_string());
            if let Some(connection) = connection.upgrade() {
                let child = Some(child);
                connection.notify(
                    "Fetch.enable",
                    json!({"patterns": [{"urlPattern": "*", "requestStage": "Request"}]}),
                    child,
                );
                connection.notify(
                    "Target.setAutoAttach",
                    json!({"autoAttach": true, "waitForDebuggerOnStart": true, "flatten": true}),
                    child,
                );
                connection.notify("Runtime.runIfWaitingForDebugger", json!({}), child);
            }
        }
        "Page.lifecycleEvent" if session == page_session => {
            let mut state = lock(&shared.state);
            if p["frameId"].as_str() == Some(state.frame_id.as_str()) {
                let loader = p["loaderId"].as_str().unwrap_or_default().to_string();
                let name = p["name"].as_str().unwrap_or_default().to_string();
                if name == "init" {
                    state.loader_id = loader.clone();
                    state.lifecycle.retain(|(l, _)| *l == loader);
                }
                if state.lifecycle.len() > 200 {
                    state.lifecycle.remove(0);
                }
                state.lifecycle.push((loader, name));
                shared.changed.notify_all();
            }
        }
        "Network.requestWillBeSent" if session == page_session => {
            let mut state = lock(&shared.state);
            if let Some(id) = p["requestId"].as_str() {
                state.inflight.insert(id.to_string());
            }
        }
        "Network.loadingFinished" | "Network.loadingFailed" if session == page_session => {
            let mut state = lock(&shared.state);
            if let Some(id) = p["requestId"].as_str() {
                state.inflight.remove(id);
            }
            if state.inflight.is_empty() {
                state.quiet_since = Some(Instant::now());
                shared.changed.notify_all();
            }
        }
        "Page.frameNavigated" if session == page_session => {
            let frame = &p["frame"];
            if frame.get("parentId").is_none() {
                let mut state = lock(&shared.state);
                state.frame_id = frame["id"].as_str().unwrap_or_default().into();
                state.loader_id = frame["loaderId"].as_str().unwrap_or_default().into();
                shared.changed.notify_all();
            }
        }
        "Page.frameStartedLoading" | "Page.frameStoppedLoading" if session == page_session => {
            let mut state = lock(&shared.state);
            if p["frameId"].as_str() == Some(state.frame_id.as_str()) {
                state.loading = event.method == "Page.frameStartedLoading";
                shared.changed.notify_all();
            }
        }
        "Runtime.consoleAPICalled" => {
            let text: Vec<String> = p["args"]
                .as_array()
                .into_iter()
                .flatten()
                .map(remote_text)
                .collect();
            let kind = match p["type"].as_str().unwrap_or("log") {
                "warning" => "warn",
                other => other,
            };
            let mut state = lock(&shared.state);
            push_capped(
                &mut state.console,
                json!({"type": kind, "text": text.join(" "), "source": "console"}),
                MAX_MESSAGES,
            );
        }
        "Runtime.exceptionThrown" => {
            let message = exception_text(&p["exceptionDetails"]);
            let mut state = lock(&shared.state);
            push_capped(
                &mut state.errors,
                json!({"message": message, "source": "exception"}),
                MAX_MESSAGES,
            );
        }
        "Page.javascriptDialogOpening" => {
            let mut state = lock(&shared.state);
            state.dialog_seq += 1;
            let dialog = Dialog {
                id: format!("d-{}", state.dialog_seq),
                kind: p["type"].as_str().unwrap_or_default().into(),
                message: p["message"].as_str().unwrap_or_default().into(),
                default_prompt: p["defaultPrompt"].as_str().unwrap_or_default().into(),
                opened_at: now(),
                session_id: session.to_string(),
            };
            let answer = match dialogs {
                DialogPolicy::MustRespond => None,
                DialogPolicy::AutoDismiss => Some(false),
                DialogPolicy::AutoAccept => Some(true),
            };
            match answer {
                None => state.pending_dialogs.push(dialog),
                Some(accept) => {
                    let mut record = dialog.to_json();
                    record["closed_at"] = json!(now());
                    record["closed_by"] = json!("auto_policy");
                    push_capped(&mut state.recent_dialogs, record, 20);
                    if let Some(connection) = connection.upgrade() {
                        let mut params = json!({"accept": accept});
                        if dialog.kind == "prompt" {
                            params["promptText"] = json!(dialog.default_prompt);
                        }
                        connection.notify("Page.handleJavaScriptDialog", params, Some(session));
                    }
                }
            }
            shared.changed.notify_all();
        }
        "Page.javascriptDialogClosed" => {
            let mut state = lock(&shared.state);
            let closed: Vec<Dialog> = state
                .pending_dialogs
                .iter()
                .filter(|d| d.session_id == session)
                .cloned()
                .collect();
            if let Some(first) = closed.first() {
                let id = first.id.clone();
                state.pending_dialogs.retain(|d| d.id != id);
                let mut record = first.to_json();
                record["closed_at"] = json!(now());
                record["closed_by"] = json!("remote");
                push_capped(&mut state.recent_dialogs, record, 20);
            }
            shared.changed.notify_all();
        }
        _ => {}
    }
}

/// Dismisses dialogs left unanswered past the timeout; judges paused requests.
fn spawn_guard(
    connection: Weak<Connection>,
    shared: Weak<Shared>,
    paused: mpsc::Receiver<Paused>,
    policy: RequestPolicy,
) {
    std::thread::Builder::new()
        .name("browser-guard".into())
        .spawn(move || {
            while let Ok(request) = paused.recv() {
                let Some(connection) = connection.upgrade() else {
                    return;
                };
                let session = Some(request.session.as_str());
                match policy.judge(&request.url) {
                    Ok(()) => connection.notify(
                        "Fetch.continueRequest",
                        json!({"requestId": request.request_id}),
                        session,
                    ),
                    Err(why) => {
                        if let Some(shared) = shared.upgrade() {
                            let mut state = lock(&shared.state);
                            state.refused.push((request.url.clone(), why.clone(), request.document));
                            let entry = json!({"message": format!("request refused by policy: {} ({why})", request.url), "source": "policy"});
                            push_capped(&mut state.errors, entry, MAX_MESSAGES);
                        }
                        connection.notify(
                            "Fetch.failRequest",
                            json!({"requestId": request.request_id, "errorReason": "BlockedByClient"}),
                            session,
                        );
                    }
                }
            }
        })
        .expect("a thread can be started");
}

/// Dismisses dialogs that waited longer than `timeout` (must_respond policy).
pub fn expire_dialogs(tab: &Tab, timeout: Duration) {
    let expired: Vec<Dialog> = {
        let state = lock(&tab.shared.state);
        state
            .pending_dialogs
            .iter()
            .filter(|d| now() - d.opened_at > timeout.as_secs_f64())
            .cloned()
            .collect()
    };
    for dialog in expired {
        tab.connection.notify(
            "Page.handleJavaScriptDialog",
            json!({"accept": false}),
            Some(&dialog.session_id),
        );
        let mut state = lock(&tab.shared.state);
        state.pending_dialogs.retain(|d| d.id != dialog.id);
        let mut record = dialog.to_json();
        record["closed_at"] = json!(now());
        record["closed_by"] = json!("watchdog");
        push_capped(&mut state.recent_dialogs, record, 20);
    }
}
