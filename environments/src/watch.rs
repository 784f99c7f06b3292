//! Rate limits of watch-pattern notifications (reference §4, as the original does them).
//!
//! Per process: at most one notification every 15 s. A match inside that cooldown is
//! dropped and marks the window as a strike; 3 strike windows in a row, or 8
//! deliveries, turn watching off and the process falls back to one completion notice.
//! Across all processes: more than 15 notifications within 10 s trips a breaker that
//! drops watch matches for 30 s, with one notice when it trips and one when it releases.

use serde_json::{json, Value};
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub const MIN_INTERVAL: Duration = Duration::from_secs(15);
pub const STRIKE_LIMIT: u32 = 3;
pub const MAX_DELIVERIES: u32 = 8;
pub const GLOBAL_MAX_PER_WINDOW: u32 = 15;
pub const GLOBAL_WINDOW: Duration = Duration::from_secs(10);
pub const GLOBAL_COOLDOWN: Duration = Duration::from_secs(30);

/// One process's watch state.
#[derive(Debug, Default)]
pub struct WatchLimiter {
    cooldown_until: Option<Instant>,
    strike_candidate: bool,
    strikes: u32,
    deliveries: u32,
    suppressed: u32,
    disabled: bool,
}

/// What to do with the matches found in one chunk of output.
#[derive(Debug, PartialEq)]
pub enum WatchDecision {
    /// Deliver; `suppressed` matches were dropped since the last delivery, and `last`
    /// says this is the final delivery before watching is turned off.
    Deliver {
        suppressed: u32,
        last: bool,
    },
    Drop,
    /// Too many rate-limited windows: watching is now off (notify once about it).
    Disable {
        suppressed: u32,
    },
}

impl WatchLimiter {
    pub fn disabled(&self) -> bool {
        self.disabled
    }

    /// `matched` lines arrived now.
    pub fn admit(&mut self, matched: usize, now: Instant) -> WatchDecision {
        if self.disabled {
            return WatchDecision::Drop;
        }
        if self.cooldown_until.is_some_and(|until| now < until) {
            self.suppressed = self.suppressed.saturating_add(matched as u32);
            if !self.strike_candidate {
                self.strike_candidate = true;
                self.strikes += 1;
                if self.strikes >= STRIKE_LIMIT {
                    self.disabled = true;
                    return WatchDecision::Disable {
                        suppressed: self.suppressed,
                    };
                }
            }
            return WatchDecision::Drop;
        }
        if self.cooldown_until.is_some() && !self.strike_candidate {
            self.strikes = 0;
        }
        self.strike_candidate = false;
        self.cooldown_until = Some(now + MIN_INTERVAL);
        self.deliveries += 1;
        let suppressed = std::mem::take(&mut self.suppressed);
        let last = self.deliveries >= MAX_DELIVERIES;
        if last {
            self.disabled = true;
        }
        WatchDecision::Deliver { suppressed, last }
    }
}

#[derive(Default)]
struct Breaker {
    window_start: Option<Instant>,
    hits: u32,
    tripped_until: Option<Instant>,
    suppressed: u32,
}

fn breaker() -> &'static Mutex<Breaker> {
    static BREAKER: Mutex<Breaker> = Mutex::new(Breaker {
        window_start: None,
        hits: 0,
        tripped_until: None,
        suppressed: 0,
    });
    &BREAKER
}

/// The global breaker's verdict on one watch match: whether it may be delivered, and
/// notices about the breaker itself (tripped, released) to deliver as well.
pub fn global_admit(now: Instant) -> (bool, Vec<Value>) {
    let mut b = breaker().lock().unwrap_or_else(|p| p.into_inner());
    let mut notices = Vec::new();
    if b.tripped_until.is_some_and(|until| now >= until) {
        let suppressed = std::mem::take(&mut b.suppressed);
        b.tripped_until = None;
        b.window_start = Some(now);
        b.hits = 0;
        if suppressed > 0 {
            notices.push(json!({
                "type": "watch_overflow_released",
                "session_id": "",
                "suppressed": suppressed,
                "message": format!("Watch-pattern notifications resumed. {suppressed} match event(s) were suppressed during the flood."),
            }));
        }
    }
    if b.tripped_until.is_some() {
        b.suppressed += 1;
        return (false, notices);
    }
    if b.window_start
        .is_none_or(|start| now.duration_since(start) >= GLOBAL_WINDOW)
    {
        b.window_start = Some(now);
        b.hits = 0;
    }
    if b.hits >= GLOBAL_MAX_PER_WINDOW {
        b.tripped_until = Some(now + GLOBAL_COOLDOWN);
        b.suppressed += 1;
        notices.push(json!({
            "type": "watch_overflow_tripped",
            "session_id": "",
            "message": format!(
                "Watch-pattern overflow: more than {GLOBAL_MAX_PER_WINDOW} notifications in {}s across all processes. \
                 Further watch matches are dropped for {}s.",
                GLOBAL_WINDOW.as_secs(),
                GLOBAL_COOLDOWN.as_secs()
            ),
        }));
        return (false, notices);
    }
    b.hits += 1;
    (true, notices)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_delivery_per_window_and_three_strike_windows_disable() {
        let mut w = WatchLimiter::default();
        let t0 = Instant::now();
        assert_eq!(
            w.admit(1, t0),
            WatchDecision::Deliver {
                suppressed: 0,
                last: false
            }
        );
        assert_eq!(w.admit(2, t0 + Duration::from_secs(1)), WatchDecision::Drop);
        assert_eq!(w.admit(1, t0 + Duration::from_secs(2)), WatchDecision::Drop);
        let t1 = t0 + MIN_INTERVAL;
        assert_eq!(
            w.admit(1, t1),
            WatchDecision::Deliver {
                suppressed: 3,
                last: false
            }
        );
        assert_eq!(w.admit(1, t1 + Duration::from_secs(1)), WatchDecision::Drop);
        let t2 = t1 + MIN_INTERVAL;
        assert_eq!(
            w.admit(1, t2),
            WatchDecision::Deliver {
                suppressed: 1,
                last: false
            }
        );
        assert_eq!(
            w.admit(4, t2 + Duration::from_secs(1)),
            WatchDecision::Disable { suppressed: 4 }
        );
        assert!(w.disabled());
        assert_eq!(w.admit(1, t2 + MIN_INTERVAL * 2), WatchDecision::Drop);
    }

    #[test]
    fn a_clean_window_resets_the_strikes() {
        let mut w = WatchLimiter::default();
        let mut t = Instant::now();
        for _ in 0..4 {
            assert!(matches!(w.admit(1, t), WatchDecision::Deliver { .. }));
            assert_eq!(w.admit(1, t + Duration::from_secs(1)), WatchDecision::Drop);
            t += MIN_INTERVAL;
            // A window without drops in between.
            assert!(matches!(w.admit(1, t), WatchDecision::Deliver { .. }));
            t += MIN_INTERVAL;
        }
        assert!(w.disabled(), "the eighth delivery is the last");
    }
}
