//! Availability checks on a test clock. One test, run in order: the flaky probe's
//! answer is process-wide state.

use hermes_fixture_tools::tools::fixtures::{FLAKY_PASSES, FLAKY_PROBES};
use hermes_fixture_tools::CATALOG;
use hermes_runtime::availability::{CheckCache, Clock};
use hermes_runtime::Registry;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

struct TestClock {
    start: Instant,
    offset: Mutex<Duration>,
}

impl Clock for TestClock {
    fn now(&self) -> Instant {
        self.start + *self.offset.lock().unwrap()
    }
}

impl TestClock {
    fn set(&self, seconds: u64) {
        *self.offset.lock().unwrap() = Duration::from_secs(seconds);
    }
}

fn probes() -> usize {
    FLAKY_PROBES.load(Ordering::SeqCst)
}

fn names(registry: &Registry) -> Vec<String> {
    registry.invalidate_definitions_memo();
    registry
        .definitions(Some(&["fx_checked"]), None)
        .names()
        .into_iter()
        .map(str::to_owned)
        .collect()
}

#[test]
fn checks_are_cached_forgiving_and_shared() {
    let clock = Arc::new(TestClock {
        start: Instant::now(),
        offset: Mutex::new(Duration::ZERO),
    });
    let home = tempfile::tempdir().unwrap();
    let registry = Registry::with_home(&CATALOG, home.path().to_path_buf())
        .with_check_cache(CheckCache::with_clock(clock.clone()));
    let both = vec!["fx_flaky_a".to_string(), "fx_flaky_b".to_string()];

    // t=0: success; the two tools share one probe, which runs once for the pass.
    FLAKY_PASSES.store(true, Ordering::SeqCst);
    let before = probes();
    assert_eq!(names(&registry), both);
    assert_eq!(probes() - before, 1);

    // t=10: the cached success answers without probing.
    clock.set(10);
    assert_eq!(names(&registry), both);
    assert_eq!(probes() - before, 1);

    // t=45: the probe now fails, but it passed less than 60 s ago: a flake. Still
    // offered, and the failure is not cached, so the next pass probes again.
    FLAKY_PASSES.store(false, Ordering::SeqCst);
    clock.set(45);
    assert_eq!(names(&registry), both);
    assert_eq!(probes() - before, 2);
    assert_eq!(names(&registry), both);
    assert_eq!(probes() - before, 3);

    // t=61: more than 60 s after the last success: unavailable, cached for 30 s.
    clock.set(61);
    assert!(names(&registry).is_empty());
    assert_eq!(probes() - before, 4);
    clock.set(90);
    assert!(names(&registry).is_empty());
    assert_eq!(probes() - before, 4, "the failure is cached until t=91");

    // Invalidation forgets the verdict; the probe passes again.
    FLAKY_PASSES.store(true, Ordering::SeqCst);
    registry.invalidate_caches();
    assert_eq!(names(&registry), both);
    assert_eq!(probes() - before, 5);

    // A panicking probe never reaches the caller: the tool is simply not offered.
    let broken = registry.definitions(Some(&["fx_broken"]), None);
    assert!(broken.tools.is_empty());
    assert_eq!(broken.unavailable, vec!["fx_broken_check", "fx_needs_key"]);
    assert!(!registry.is_toolset_available("fx_broken"));
    assert!(registry.is_toolset_available("fx_checked"));
    assert!(
        registry.is_toolset_available("fx_basic"),
        "no check means available"
    );
}
