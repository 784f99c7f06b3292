//! The browsers of this process and the page of each task: a browser is started (or
//! connected to) on the first call that needs one, each task gets its own context,
//! and a context unused for `browser.inactivity_timeout` is closed. A local browser
//! with no context left is stopped. What drives the browser is a [`Backend`]; the
//! bookkeeping here (which task has which page, when it was last used, whether a call
//! is using it) is the same for every backend.

use crate::backend::{Backend, Page};
use crate::chromium::Chromium;
use crate::guard::RequestPolicy;
use crate::settings::Settings;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

struct Browser {
    backend: Box<dyn Backend>,
    /// What it was made from: the CDP URL, or the executable setting.
    origin: String,
}

/// A task's page and its use: the inactivity timeout closes only a page no call holds.
pub struct Lease {
    page: Arc<dyn Page>,
    last_used: Mutex<Instant>,
    /// Calls using the page now.
    busy: AtomicUsize,
    inactivity: Duration,
    dialog_timeout: Duration,
}

/// A call's hold on a page ([`Lease::hold`]).
pub struct Hold<'a>(&'a Lease);

impl Drop for Hold<'_> {
    fn drop(&mut self) {
        self.0.touch();
        self.0.busy.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Lease {
    /// Marks the page in use until the hold is dropped.
    pub fn hold(&self) -> Hold<'_> {
        self.busy.fetch_add(1, Ordering::SeqCst);
        self.touch();
        Hold(self)
    }

    fn touch(&self) {
        *self.last_used.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
    }

    fn is_idle(&self) -> bool {
        let used = *self.last_used.lock().unwrap_or_else(|p| p.into_inner());
        self.busy.load(Ordering::SeqCst) == 0 && used.elapsed() > self.inactivity
    }
}

impl std::ops::Deref for Lease {
    type Target = dyn Page;

    fn deref(&self) -> &(dyn Page + 'static) {
        self.page.as_ref()
    }
}

#[derive(Default)]
struct State {
    browser: Option<Browser>,
    pages: HashMap<String, Arc<Lease>>,
    reaper: bool,
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
    /// The task's page, opened (and the browser started) when there is none.
    pub fn tab(
        &'static self,
        task: &str,
        settings: &Settings,
        policy: impl FnOnce() -> RequestPolicy,
    ) -> Result<Arc<Lease>, String> {
        let mut state = lock(&self.state);
        if let Some(lease) = state.pages.get(task) {
            if lease.is_alive() {
                lease.touch();
                return Ok(Arc::clone(lease));
            }
            state.pages.remove(task);
        }
        let policy = policy();
        let origin = origin_of(settings);
        let usable = state
            .browser
            .as_ref()
            .is_some_and(|b| b.origin == origin && !b.backend.is_closed());
        if !usable {
            state.browser = None;
            let backend = match &settings.cdp_url {
                Some(url) => Chromium::connect(url)?,
                None => Chromium::launch(settings, &policy)?,
            };
            state.browser = Some(Browser {
                backend: Box::new(backend),
                origin,
            });
        }
        let browser = state.browser.as_ref().expect("set above");
        let lease = Arc::new(Lease {
            page: browser.backend.open_page(settings, policy)?,
            last_used: Mutex::new(Instant::now()),
            busy: AtomicUsize::new(0),
            inactivity: settings.inactivity_timeout,
            dialog_timeout: settings.dialog_timeout,
        });
        state.pages.insert(task.to_string(), Arc::clone(&lease));
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
        Ok(lease)
    }

    /// The task's page if it has one.
    pub fn existing(&self, task: &str) -> Option<Arc<Lease>> {
        let state = lock(&self.state);
        let lease = state.pages.get(task).filter(|l| l.is_alive())?;
        lease.touch();
        Some(Arc::clone(lease))
    }

    /// Closes the task's context (the task ended).
    pub fn close_task(&self, task: &str) {
        let lease = lock(&self.state).pages.remove(task);
        if let Some(lease) = lease {
            lease.close();
        }
        self.stop_idle_browser();
    }

    /// How many contexts are open (tests, benchmarks).
    pub fn open_tabs(&self) -> usize {
        lock(&self.state).pages.len()
    }

    fn stop_idle_browser(&self) {
        let mut state = lock(&self.state);
        if state.pages.is_empty() && state.browser.as_ref().is_some_and(|b| b.backend.is_local()) {
            state.browser = None;
        }
    }

    fn reap(&self) {
        let leases: Vec<(String, Arc<Lease>)> = lock(&self.state)
            .pages
            .iter()
            .map(|(task, lease)| (task.clone(), Arc::clone(lease)))
            .collect();
        for (task, lease) in leases {
            if lease.is_idle() {
                self.close_task(&task);
            } else {
                lease.expire_dialogs(lease.dialog_timeout);
            }
        }
    }
}
