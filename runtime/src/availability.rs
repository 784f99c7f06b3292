//! Availability probes (`check = ...`), cached so a definitions build does not run
//! every probe every turn, and forgiving of a single flaky failure.
//!
//! Rules: a verdict (true or false) younger than [`CHECK_TTL`] is reused; a failure
//! within [`FAILURE_GRACE`] of the last successful probe counts as a flake (the tool
//! stays visible and the failure is not cached); a probe that panics is a failure and
//! never reaches the caller; within one [`CheckPass`] each probe runs at most once.

use std::collections::{HashMap, VecDeque};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub const CHECK_TTL: Duration = Duration::from_secs(30);
pub const FAILURE_GRACE: Duration = Duration::from_secs(60);
pub const MAX_CACHED_CHECKS: usize = 512;

/// The identity of a probe: its slot in the static table, or a dynamic entry's id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CheckId {
    Static(usize),
    Dynamic(u64),
}

/// Time source, injectable so tests can walk through the TTL and grace windows.
pub trait Clock: Send + Sync {
    fn now(&self) -> Instant;
}

pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

#[derive(Default)]
struct CacheState {
    verdicts: HashMap<CheckId, (Instant, bool)>,
    verdict_order: VecDeque<CheckId>,
    last_good: HashMap<CheckId, Instant>,
}

pub struct CheckCache {
    clock: Arc<dyn Clock>,
    state: Mutex<CacheState>,
}

impl Default for CheckCache {
    fn default() -> Self {
        CheckCache::with_clock(Arc::new(SystemClock))
    }
}

impl CheckCache {
    pub fn with_clock(clock: Arc<dyn Clock>) -> Self {
        CheckCache {
            clock,
            state: Mutex::new(CacheState::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, CacheState> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Forgets every verdict, e.g. after the operator enabled a tool.
    pub fn invalidate(&self) {
        *self.lock() = CacheState::default();
    }

    /// The cached verdict, without probing.
    pub fn cached(&self, id: CheckId) -> Option<bool> {
        let now = self.clock.now();
        let state = self.lock();
        state
            .verdicts
            .get(&id)
            .filter(|(at, _)| now.duration_since(*at) < CHECK_TTL)
            .map(|(_, verdict)| *verdict)
    }

    /// Runs `probe` unless a fresh verdict is cached. The lock is not held while the
    /// probe runs, so a slow probe blocks nobody else.
    pub fn check(&self, id: CheckId, name: &str, probe: &dyn Fn() -> bool) -> bool {
        if let Some(verdict) = self.cached(id) {
            return verdict;
        }
        let passed = run_probe(name, probe);
        let now = self.clock.now();
        let mut state = self.lock();
        if passed {
            state.last_good.insert(id, now);
            state.remember(id, now, true);
            return true;
        }
        let recently_good = state
            .last_good
            .get(&id)
            .is_some_and(|good| now.duration_since(*good) < FAILURE_GRACE);
        if recently_good {
            eprintln!("warning: availability check {name} failed once after passing recently; treating it as transient");
            return true;
        }
        state.remember(id, now, false);
        false
    }
}

impl CacheState {
    fn remember(&mut self, id: CheckId, now: Instant, verdict: bool) {
        self.verdicts
            .retain(|_, (at, _)| now.duration_since(*at) < CHECK_TTL);
        self.last_good
            .retain(|_, at| now.duration_since(*at) < FAILURE_GRACE);
        let verdicts = &self.verdicts;
        self.verdict_order
            .retain(|known| verdicts.contains_key(known) && *known != id);
        while self.verdicts.len() >= MAX_CACHED_CHECKS {
            match self.verdict_order.pop_front() {
                Some(oldest) => {
                    self.verdicts.remove(&oldest);
                }
                None => break,
            }
        }
        self.verdicts.insert(id, (now, verdict));
        self.verdict_order.push_back(id);
    }
}

/// A panicking probe is a failure: logged, never propagated.
fn run_probe(name: &str, probe: &dyn Fn() -> bool) -> bool {
    match catch_unwind(AssertUnwindSafe(probe)) {
        Ok(passed) => passed,
        Err(payload) => {
            eprintln!(
                "warning: availability check {name} panicked: {}",
                panic_message(&*payload)
            );
            false
        }
    }
}

pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_string()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "panic with a non-text payload".to_string()
    }
}

/// One definitions build or availability listing: each probe runs at most once in it.
pub struct CheckPass<'a> {
    cache: &'a CheckCache,
    seen: HashMap<CheckId, bool>,
}

impl<'a> CheckPass<'a> {
    pub fn new(cache: &'a CheckCache) -> Self {
        CheckPass {
            cache,
            seen: HashMap::new(),
        }
    }

    pub fn check(&mut self, id: CheckId, name: &str, probe: &dyn Fn() -> bool) -> bool {
        if let Some(verdict) = self.seen.get(&id) {
            return *verdict;
        }
        let verdict = self.cache.check(id, name, probe);
        self.seen.insert(id, verdict);
        verdict
    }
}
