//! The gateway round-trip (reference §2.4): a request is queued per session, the
//! session's notify callback sends an approval card, and the caller waits until
//! [`Approvals::resolve_gateway_approval`] answers it, the timeout passes, or the session
//! is cleared. Identical concurrent requests (same command, same ordered pattern keys)
//! share one card.

use super::result::Choice;
use super::shown::shown_command;
use super::{Approvals, State};
use crate::random::random_hex;
use serde::Serialize;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Sends (or schedules) an approval card. An `Err` means the card could not be sent.
pub type NotifyCallback = Arc<dyn Fn(&GatewayApprovalRequest) -> Result<(), String> + Send + Sync>;
/// Called about every 10 s while a request of the session waits (time spent waiting for a
/// human, so activity timeouts can be paused). Gets the request and the seconds waited.
pub type HeartbeatCallback = Arc<dyn Fn(&GatewayApprovalRequest, f64) + Send + Sync>;

/// What the notify callback and [`Approvals::list_gateway_approvals`] see.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GatewayApprovalRequest {
    /// Same as `request_id` (32 hex digits).
    pub approval_id: String,
    pub request_id: String,
    pub session_key: String,
    /// Redacted.
    pub command: String,
    pub description: String,
    pub pattern_key: String,
    pub pattern_keys: Vec<String>,
    pub allow_permanent: bool,
    pub allow_session: bool,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub smart_denied: bool,
    /// Unix time (seconds) when the request times out.
    pub expires_at: f64,
    pub timeout_seconds: f64,
    /// Requests waiting on this card (1 + coalesced ones).
    pub waiters: usize,
    /// Set by [`Approvals::ack_gateway_approval`] once the card is shown.
    pub acked: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Resolution {
    Answer(Choice, Option<String>),
    Timeout,
    Interrupted,
    NotifyFailed(String),
}

pub(crate) struct Entry {
    request: GatewayApprovalRequest,
    raw_command: String,
    deadline: Instant,
    resolution: Option<Resolution>,
    waiters: usize,
}

/// How a gateway wait ended.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum GatewayAnswer {
    Answer {
        choice: Choice,
        reason: Option<String>,
        coalesced: bool,
    },
    Timeout {
        coalesced: bool,
    },
    NotifyFailed(String),
    Interrupted,
    /// No notify callback registered for the session.
    NoNotify,
}

pub(crate) struct GatewayAsk<'a> {
    pub session: &'a str,
    pub command: &'a str,
    pub description: &'a str,
    pub pattern_keys: &'a [String],
    pub allow_permanent: bool,
    pub allow_session: bool,
    pub smart_denied: bool,
    pub timeout: Duration,
}

pub(crate) fn interrupt_session(state: &mut State, session: &str) {
    for id in state.queues.remove(session).unwrap_or_default() {
        if let Some(entry) = state.entries.get_mut(&id) {
            entry.resolution.get_or_insert(Resolution::Interrupted);
        }
    }
}

fn dequeue(state: &mut State, session: &str, id: &str) {
    if let Some(queue) = state.queues.get_mut(session) {
        queue.retain(|q| q != id);
        if queue.is_empty() {
            state.queues.remove(session);
        }
    }
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

impl Approvals {
    /// Registers the callback that sends approval cards for `session`.
    pub fn register_gateway_notify(&self, session: &str, callback: NotifyCallback) {
        self.lock().notify.insert(session.to_string(), callback);
    }

    /// Removes the session's callback; its waiting requests wake up refused.
    pub fn unregister_gateway_notify(&self, session: &str) {
        let mut state = self.lock();
        state.notify.remove(session);
        state.heartbeat.remove(session);
        interrupt_session(&mut state, session);
        drop(state);
        self.wake.notify_all();
    }

    /// Whether any session has a gateway that sends approval cards: only then can a
    /// parked ("pending") request reach a person.
    pub fn has_gateway_notifier(&self) -> bool {
        !self.lock().notify.is_empty()
    }

    pub fn register_gateway_heartbeat(&self, session: &str, callback: HeartbeatCallback) {
        self.lock().heartbeat.insert(session.to_string(), callback);
    }

    /// Answers pending requests of `session`: the one with `request_id` (a stale id
    /// answers none), all of them with `resolve_all`, else the oldest. `choice` is
    /// `once|session|always|deny`; any other word denies. Returns how many were answered.
    pub fn resolve_gateway_approval(
        &self,
        session: &str,
        choice: &str,
        resolve_all: bool,
        reason: Option<&str>,
        request_id: Option<&str>,
    ) -> usize {
        let choice = Choice::parse_resolution(choice);
        let reason = reason
            .map(str::trim)
            .filter(|r| !r.is_empty())
            .map(str::to_string);
        let mut state = self.lock();
        let queue = state.queues.get(session).cloned().unwrap_or_default();
        let chosen: Vec<String> = match request_id {
            Some(id) => queue.into_iter().filter(|q| q == id).collect(),
            None if resolve_all => queue,
            None => queue.into_iter().take(1).collect(),
        };
        let mut count = 0;
        for id in &chosen {
            if let Some(entry) = state.entries.get_mut(id) {
                if entry.resolution.is_none() {
                    entry.resolution = Some(Resolution::Answer(choice, reason.clone()));
                    count += 1;
                }
            }
            dequeue(&mut state, session, id);
        }
        drop(state);
        if count > 0 {
            self.wake.notify_all();
        }
        count
    }

    /// The session's pending requests, oldest first.
    pub fn list_gateway_approvals(&self, session: &str) -> Vec<GatewayApprovalRequest> {
        let state = self.lock();
        state
            .queues
            .get(session)
            .into_iter()
            .flatten()
            .filter_map(|id| state.entries.get(id))
            .map(|entry| GatewayApprovalRequest {
                waiters: entry.waiters,
                ..entry.request.clone()
            })
            .collect()
    }

    /// The oldest pending request of the session.
    pub fn get_pending_gateway_approval(&self, session: &str) -> Option<GatewayApprovalRequest> {
        self.list_gateway_approvals(session).into_iter().next()
    }

    /// Marks a pending request as shown to the user; false when it is not pending.
    pub fn ack_gateway_approval(&self, session: &str, request_id: &str) -> bool {
        let mut state = self.lock();
        let pending = state
            .queues
            .get(session)
            .is_some_and(|q| q.iter().any(|id| id == request_id));
        if !pending {
            return false;
        }
        state
            .entries
            .get_mut(request_id)
            .map(|e| e.request.acked = true)
            .is_some()
    }

    /// Whether the session has a request waiting for a human.
    pub fn has_blocking_approval(&self, session: &str) -> bool {
        self.lock()
            .queues
            .get(session)
            .is_some_and(|q| !q.is_empty())
    }

    /// Sends (or joins) a request and waits for its answer.
    pub(crate) fn gateway_wait(&self, ask: &GatewayAsk<'_>) -> GatewayAnswer {
        let mut coalesced;
        loop {
            let mut state = self.lock();
            let leader = state.queues.get(ask.session).and_then(|queue| {
                queue
                    .iter()
                    .find(|id| {
                        state.entries.get(*id).is_some_and(|e| {
                            e.resolution.is_none()
                                && e.raw_command == ask.command
                                && e.request.pattern_keys == ask.pattern_keys
                        })
                    })
                    .cloned()
            });
            let (id, is_leader) = match leader {
                Some(id) => {
                    if let Some(entry) = state.entries.get_mut(&id) {
                        entry.waiters += 1;
                    }
                    coalesced = true;
                    drop(state);
                    (id, false)
                }
                None => {
                    let Some(notify) = state.notify.get(ask.session).cloned() else {
                        return GatewayAnswer::NoNotify;
                    };
                    let id = random_hex(32);
                    let request = GatewayApprovalRequest {
                        approval_id: id.clone(),
                        request_id: id.clone(),
                        session_key: ask.session.to_string(),
                        command: shown_command(ask.command),
                        description: ask.description.to_string(),
                        pattern_key: ask.pattern_keys.first().cloned().unwrap_or_default(),
                        pattern_keys: ask.pattern_keys.to_vec(),
                        allow_permanent: ask.allow_permanent && !ask.smart_denied,
                        allow_session: ask.allow_session && !ask.smart_denied,
                        smart_denied: ask.smart_denied,
                        expires_at: unix_now() + ask.timeout.as_secs_f64(),
                        timeout_seconds: ask.timeout.as_secs_f64(),
                        waiters: 1,
                        acked: false,
                    };
                    state.entries.insert(
                        id.clone(),
                        Entry {
                            request: request.clone(),
                            raw_command: ask.command.to_string(),
                            deadline: Instant::now() + ask.timeout,
                            resolution: None,
                            waiters: 1,
                        },
                    );
                    state
                        .queues
                        .entry(ask.session.to_string())
                        .or_default()
                        .push(id.clone());
                    drop(state);
                    coalesced = false;
                    let sent =
                        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| notify(&request)))
                            .unwrap_or_else(|_| Err("the notify callback panicked".to_string()));
                    if let Err(error) = sent {
                        let mut state = self.lock();
                        dequeue(&mut state, ask.session, &id);
                        if let Some(entry) = state.entries.get_mut(&id) {
                            entry
                                .resolution
                                .get_or_insert(Resolution::NotifyFailed(error.clone()));
                            entry.waiters -= 1;
                            if entry.waiters == 0 {
                                state.entries.remove(&id);
                            }
                        }
                        drop(state);
                        self.wake.notify_all();
                        return GatewayAnswer::NotifyFailed(error);
                    }
                    (id, true)
                }
            };
            let deadline = Instant::now() + ask.timeout;
            match self.wait_entry(ask.session, &id, deadline, is_leader) {
                Resolution::Answer(Choice::Once, _) if !is_leader => continue,
                Resolution::Answer(choice, reason) => {
                    return GatewayAnswer::Answer {
                        choice,
                        reason,
                        coalesced,
                    }
                }
                Resolution::Timeout => return GatewayAnswer::Timeout { coalesced },
                Resolution::Interrupted => return GatewayAnswer::Interrupted,
                Resolution::NotifyFailed(e) => return GatewayAnswer::NotifyFailed(e),
            }
        }
    }

    fn wait_entry(
        &self,
        session: &str,
        id: &str,
        own_deadline: Instant,
        is_leader: bool,
    ) -> Resolution {
        let heartbeat_every = super::read(&self.heartbeat_every);
        let started = Instant::now();
        let mut last_beat = started;
        let mut state = self.lock();
        loop {
            let Some(entry) = state.entries.get_mut(id) else {
                return Resolution::Interrupted;
            };
            let now = Instant::now();
            let deadline = if is_leader {
                entry.deadline
            } else {
                own_deadline
            };
            if entry.resolution.is_none() && now >= deadline {
                if !is_leader {
                    entry.waiters -= 1;
                    return Resolution::Timeout;
                }
                entry.resolution = Some(Resolution::Timeout);
                dequeue(&mut state, session, id);
                self.wake.notify_all();
                continue;
            }
            if let Some(resolution) = entry.resolution.clone() {
                entry.waiters -= 1;
                if entry.waiters == 0 {
                    state.entries.remove(id);
                }
                return resolution;
            }
            if now.duration_since(last_beat) >= heartbeat_every {
                last_beat = now;
                let request = entry.request.clone();
                if let Some(beat) = state.heartbeat.get(session).cloned() {
                    drop(state);
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        beat(&request, started.elapsed().as_secs_f64())
                    }));
                    state = self.lock();
                    continue;
                }
            }
            let until_beat = heartbeat_every.saturating_sub(now.duration_since(last_beat));
            let wait = (deadline - now)
                .min(Duration::from_secs(1))
                .min(until_beat)
                .max(Duration::from_millis(1));
            state = self
                .wake
                .wait_timeout(state, wait)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}
