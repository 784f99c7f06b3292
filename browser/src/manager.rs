//! The browsers of this process and the tab of each task: a browser is started (or
//! connected to) on the first call that needs one, each task gets its own context,
//! and a context unused for `browser.inactivity_timeout` is closed. A local browser
//! with no context left is stopped.

use crate::cdp::Connection;
use crate::guard::RequestPolicy;
use crate::launch::{self, LocalBrowser};
use crate::settings::Settings;
use crate::tab::{self, Tab};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

struct Browser {
    connection: Arc<Connection>,
    /// What it was made from: the CDP URL, or the executable setting.
    origin: String,
    _local: Option<LocalBrowser>,
}

#[derive(Default)]
struct State {
    browser: Option<Browser>,
    tabs: HashMap<String, Arc<Tab>>,
    reaper: bool,
    timeouts: HashMap<String, (Duration, Duration)>,
}

pub struct Manager {
    state: Mutex<State>,
}

fn lock(m: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The process's one manager.
pub fn manager() -> &'static Manager {
    static MANAGER: OnceLock<Manager> = OnceLock::new();
    MANAGER.get_or_init(|| Manager {
        state: Mutex::new(State::default()),
    })
}

fn origin_of(settings: &Settings) -> String {
    match &settings.cdp_url {
        Some(url) => format!("cdp:{url}"),
        None => format!("exe:{}", settings.executable.clone().unwrap_or_default()),
    }
}

impl Manager {
    /// The task's tab, opened (and the browser started) when there is none.
    pub fn tab(
        &'static self,
        task: &str,
        settings: &Settings,
        policy: impl FnOnce() -> RequestPolicy,
    ) -> Result<Arc<Tab>, String> {
        let mut state = lock(&self.state);
        if let Some(tab) = state.tabs.get(task) {
            if tab.is_alive() {
                tab.touch();
                return Ok(Arc::clone(tab));
            }
            state.tabs.remove(task);
        }
        let policy = policy();
        let origin = origin_of(settings);
        let usable = state
            .browser
            .as_ref()
            .is_some_and(|b| b.origin == origin && !b.connection.is_closed());
        if !usable {
            state.browser = None;
            let browser = match &settings.cdp_url {
                Some(url) => {
                    let address = launch::resolve_cdp_url(url, Duration::from_secs(10))?;
                    Browser {
                        connection: crate::cdp::connect_websocket(
                            &address,
                            Duration::from_secs(10),
                        )?,
                        origin: origin.clone(),
                        _local: None,
                    }
                }
                None => {
                    let (connection, local) = launch::launch(settings, &policy)?;
                    Browser {
                        connection,
                        origin: origin.clone(),
                        _local: Some(local),
                    }
                }
            };
            state.browser = Some(browser);
        }
        let connection = Arc::clone(&state.browser.as_ref().expect("set above").connection);
        let tab = Tab::open(connection, settings.clone(), policy)?;
        state.tabs.insert(task.to_string(), Arc::clone(&tab));
        state.timeouts.insert(
            task.to_string(),
            (settings.inactivity_timeout, settings.dialog_timeout),
        );
        if !state.reaper {
            state.reaper = true;
            std::thread::Builder::new()
                .name("browser-reaper".into())
                .spawn(move || loop {
                    std::thread::sleep(Duration::from_millis(500));
                    self.reap();
                })
                .map_err(|e| e.to_string())?;
        }
        Ok(tab)
    }

    /// The task's tab if it has one.
    pub fn existing(&self, task: &str) -> Option<Arc<Tab>> {
        let state = lock(&self.state);
        let tab = state.tabs.get(task).filter(|t| t.is_alive())?;
        tab.touch();
        Some(Arc::clone(tab))
    }

    /// Closes the task's context (the task ended).
    pub fn close_task(&self, task: &str) {
        let tab = {
            let mut state = lock(&self.state);
            state.timeouts.remove(task);
            state.tabs.remove(task)
        };
        if let Some(tab) = tab {
            tab.close();
        }
        self.stop_idle_browser();
    }

    /// How many contexts are open (tests, benchmarks).
    pub fn open_tabs(&self) -> usize {
        lock(&self.state).tabs.len()
    }

    fn stop_idle_browser(&self) {
        let mut state = lock(&self.state);
        if state.tabs.is_empty() && state.browser.as_ref().is_some_and(|b| b._local.is_some()) {
            state.browser = None;
        }
    }

    fn reap(&self) {
        let (idle, live): (Vec<_>, Vec<_>) = {
            let state = lock(&self.state);
            state
                .tabs
                .iter()
                .map(|(task, tab)| {
                    let (inactivity, dialog) = state
                        .timeouts
                        .get(task)
                        .copied()
                        .unwrap_or((Duration::from_secs(120), Duration::from_secs(300)));
                    let used = *tab.last_used.lock().unwrap_or_else(|p| p.into_inner());
                    (
                        task.clone(),
                        Arc::clone(tab),
                        !tab.is_busy() && Instant::now() - used > inactivity,
                        dialog,
                    )
                })
                .partition(|(_, _, idle, _)| *idle)
        };
        for (_, tab, _, dialog) in live {
            tab::expire_dialogs(&tab, dialog);
        }
        for (task, _, _, _) in idle {
            self.close_task(&task);
        }
    }
}
