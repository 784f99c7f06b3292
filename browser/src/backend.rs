//! What the browser tools drive, whatever drives the browser: a [`Backend`] opens one
//! [`Page`] per task, and the tools act on that page. The built-in backend speaks the
//! Chrome DevTools Protocol ([`crate::chromium`]: a Chromium this process starts, or one
//! the operator runs); a hosted browser service would be another implementation of the
//! same two traits, and the tools, the manager's per-task bookkeeping and the network
//! policy would stay as they are.

use crate::guard::RequestPolicy;
use crate::settings::Settings;
use crate::tab::Visit;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// A browser the process holds: opens a context and page per task.
pub trait Backend: Send + Sync {
    /// A new page in a context of its own (cookies, storage, history), every request
    /// of it judged by `policy`.
    fn open_page(
        &self,
        settings: &Settings,
        policy: RequestPolicy,
    ) -> Result<Arc<dyn Page>, String>;
    /// The browser went away (it crashed, or its connection closed).
    fn is_closed(&self) -> bool;
    /// Whether this process started the browser (and stops it when no page is left).
    fn is_local(&self) -> bool;
}

/// One task's page. Refs (`@eN`) are those of the page's last snapshot; acting on one
/// the page no longer holds fails and acts on nothing.
pub trait Page: Send + Sync {
    fn is_alive(&self) -> bool;
    /// Closes the page and its context.
    fn close(&self);
    /// Loads `url`, waiting for the load and then a bounded network quiet.
    fn navigate(&self, url: &str) -> Result<Visit, String>;
    /// Where the page is now.
    fn visit(&self) -> Result<Visit, String>;
    fn back(&self) -> Result<Visit, String>;
    /// The accessibility snapshot (`- role "name" [ref=eN]` lines) and its ref count.
    fn snapshot(&self, full: bool) -> Result<(String, usize), String>;
    fn click(&self, element: &str) -> Result<String, String>;
    fn type_text(&self, element: &str, text: &str) -> Result<String, String>;
    fn scroll(&self, down: bool) -> Result<(), String>;
    fn press(&self, key: &str) -> Result<(), String>;
    /// The console messages and page errors so far (emptied when `clear`).
    fn console(&self, clear: bool) -> (Vec<Value>, Vec<Value>);
    fn evaluate(&self, expression: &str) -> Result<Value, String>;
    /// A PNG within the caps: its media type and bytes.
    fn screenshot(&self, max_side: u32, max_bytes: usize) -> Result<(String, Vec<u8>), String>;
    /// Numbered labels drawn on the interactive elements, for an annotated screenshot.
    fn draw_labels(&self) -> Result<Vec<Value>, String>;
    fn clear_labels(&self);
    fn pending_dialogs(&self) -> Vec<Value>;
    fn recent_dialogs(&self) -> Vec<Value>;
    fn answer_dialog(
        &self,
        accept: bool,
        prompt_text: Option<&str>,
        dialog_id: Option<&str>,
    ) -> Result<Value, String>;
    /// Dismisses dialogs that waited longer than `timeout`.
    fn expire_dialogs(&self, timeout: Duration);
    /// A raw protocol command (`browser_cdp`); a backend without one says so.
    fn raw(
        &self,
        method: &str,
        params: Value,
        target: Option<&str>,
        timeout: Duration,
    ) -> Result<Value, String>;
}
