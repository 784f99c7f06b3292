//! The built-in backend: a browser spoken to over the Chrome DevTools Protocol, one
//! browser context and tab ([`Tab`]) per task.

use crate::backend::{Backend, Page};
use crate::cdp::Connection;
use crate::guard::RequestPolicy;
use crate::launch::LocalBrowser;
use crate::settings::Settings;
use crate::tab::{self, Tab, Visit};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

pub struct Chromium {
    connection: Arc<Connection>,
    /// The browser this process started; stopped when this is dropped.
    _local: Option<LocalBrowser>,
}

impl Chromium {
    /// A Chromium started here ([`crate::launch::launch`]), inside the task sandbox's
    /// policy when `settings.sandbox` names one.
    pub fn launch(settings: &Settings, policy: &RequestPolicy) -> Result<Chromium, String> {
        let (connection, local) = crate::launch::launch(settings, policy)?;
        Ok(Chromium {
            connection,
            _local: Some(local),
        })
    }

    /// A browser the operator runs, at `browser.cdp_url` / `BROWSER_CDP_URL`.
    pub fn connect(configured: &str) -> Result<Chromium, String> {
        let address = crate::launch::resolve_cdp_url(configured, Duration::from_secs(10))?;
        Ok(Chromium {
            connection: crate::cdp::connect_websocket(&address, Duration::from_secs(10))?,
            _local: None,
        })
    }
}

impl Backend for Chromium {
    fn open_page(
        &self,
        settings: &Settings,
        policy: RequestPolicy,
    ) -> Result<Arc<dyn Page>, String> {
        let tab: Arc<dyn Page> = Tab::open(Arc::clone(&self.connection), settings.clone(), policy)?;
        Ok(tab)
    }

    fn is_closed(&self) -> bool {
        self.connection.is_closed()
    }

    fn is_local(&self) -> bool {
        self._local.is_some()
    }
}

impl Page for Tab {
    fn is_alive(&self) -> bool {
        Tab::is_alive(self)
    }
    fn close(&self) {
        Tab::close(self)
    }
    fn navigate(&self, url: &str) -> Result<Visit, String> {
        Tab::navigate(self, url)
    }
    fn visit(&self) -> Result<Visit, String> {
        Tab::visit(self)
    }
    fn back(&self) -> Result<Visit, String> {
        Tab::back(self)
    }
    fn snapshot(&self, full: bool) -> Result<(String, usize), String> {
        Tab::snapshot(self, full)
    }
    fn click(&self, element: &str) -> Result<String, String> {
        Tab::click(self, element)
    }
    fn type_text(&self, element: &str, text: &str) -> Result<String, String> {
        Tab::type_text(self, element, text)
    }
    fn scroll(&self, down: bool) -> Result<(), String> {
        Tab::scroll(self, down)
    }
    fn press(&self, key: &str) -> Result<(), String> {
        Tab::press(self, key)
    }
    fn console(&self, clear: bool) -> (Vec<Value>, Vec<Value>) {
        Tab::console(self, clear)
    }
    fn evaluate(&self, expression: &str) -> Result<Value, String> {
        Tab::evaluate(self, expression)
    }
    fn screenshot(&self, max_side: u32, max_bytes: usize) -> Result<(String, Vec<u8>), String> {
        Tab::screenshot(self, max_side, max_bytes)
    }
    fn draw_labels(&self) -> Result<Vec<Value>, String> {
        Tab::draw_labels(self)
    }
    fn clear_labels(&self) {
        Tab::clear_labels(self)
    }
    fn pending_dialogs(&self) -> Vec<Value> {
        Tab::pending_dialogs(self)
    }
    fn recent_dialogs(&self) -> Vec<Value> {
        Tab::recent_dialogs(self)
    }
    fn answer_dialog(
        &self,
        accept: bool,
        prompt_text: Option<&str>,
        dialog_id: Option<&str>,
    ) -> Result<Value, String> {
        Tab::answer_dialog(self, accept, prompt_text, dialog_id)
    }
    fn expire_dialogs(&self, timeout: Duration) {
        tab::expire_dialogs(self, timeout)
    }
    fn raw(
        &self,
        method: &str,
        params: Value,
        target: Option<&str>,
        timeout: Duration,
    ) -> Result<Value, String> {
        Tab::raw(self, method, params, target, timeout)
    }
}
