//! Dangerous-command approval: policy from config, the permanent allowlist, session
//! approvals, the human step (terminal prompt, gateway round-trip, smart review).
//!
//! Everything hangs off one [`Approvals`] value per Hermes home: it holds the policy read
//! from `config.yaml`, and all mutable approval state (session approvals, the permanent
//! allowlist, session yolo, smart-denial streaks, pending gateway requests) behind one
//! lock. The detector itself is the `hermes-command-guard` crate.
//!
//! The entry point is [`Approvals::check_all_command_guards`] (reference §2.1):
//! isolated backend -> floors -> yolo/off -> allowlist -> no-human contexts -> findings
//! minus approved keys -> smart review -> gateway / terminal prompt -> persist.

mod allowlist_file;
mod call;
mod context;
mod gateway;
mod guard;
pub mod messages;
mod policy;
mod prompt;
mod result;
mod shown;
mod smart;

pub use crate::redact::redact_secrets;
pub use allowlist_file::{
    atomic_write, read_allowlist, replace_allowlist_block, resolve_symlinks, save_allowlist,
};
pub use call::{call_approval, CallApprovalGate};
pub use context::{env_truthy, ApprovalContext, NoHumanReason, UNATTENDED_PLATFORMS};
pub use gateway::{GatewayApprovalRequest, HeartbeatCallback, NotifyCallback};
pub use guard::{
    is_isolated_backend, CommandScanner, GuardOptions, HookApprovalGate, ScanVerdict,
    ISOLATED_BACKENDS,
};
pub use policy::{
    parse_allowlist, parse_mode, parse_no_human_mode, ApprovalMode, ApprovalPolicy, NoHumanMode,
    SmartEndpoint,
};
pub use prompt::{
    parse_answer, prompt_dangerous_approval, render_prompt, ApprovalPrompter, PromptIo,
    PromptRequest, ReadOutcome, StreamIo, TerminalPrompter, TtyIo,
};
pub use result::{Choice, Grant, GuardResult, Outcome, ResultKind};
pub use shown::shown_command;
pub use smart::{
    http_post_json, parse_verdict, review_messages, unreviewable, xml_escape, Guardian,
    HttpGuardian, ReviewRequest, SmartVerdict, MAX_REVIEW_CHARS, SYSTEM_PROMPT,
};

use hermes_command_guard::legacy_key_aliases;
use serde_json::Value;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, RwLock};
use std::time::Duration;

/// Observes the human step: called with `pre_approval_request` / `post_approval_response`
/// and a JSON payload (redacted command, description, pattern key, surface, choice).
pub type ApprovalObserver = Arc<dyn Fn(&str, &Value) + Send + Sync>;

/// Saves of the exactly granted commands, one at a time in this process.
static GRANTED_COMMANDS_SAVE: Mutex<()> = Mutex::new(());

/// How many sessions keep a smart-denial streak.
const STREAK_SESSIONS: usize = 256;

/// All mutable approval state, behind [`Approvals`]' single lock.
#[derive(Default)]
pub(crate) struct State {
    pub(crate) sessions: HashMap<String, HashSet<String>>,
    /// Commands a person granted for a session, exactly as they were shown.
    pub(crate) session_commands: HashMap<String, HashSet<String>>,
    pub(crate) permanent: BTreeSet<String>,
    /// What the file held at the last load/save: entries removed from the file by hand
    /// since are not written back.
    pub(crate) baseline: BTreeSet<String>,
    pub(crate) yolo_sessions: HashSet<String>,
    /// Consecutive smart denials per session, least recently touched first.
    pub(crate) streaks: Vec<(String, u32)>,
    pub(crate) notify: HashMap<String, NotifyCallback>,
    pub(crate) heartbeat: HashMap<String, HeartbeatCallback>,
    pub(crate) entries: HashMap<String, gateway::Entry>,
    /// Pending gateway request ids per session, oldest first.
    pub(crate) queues: HashMap<String, Vec<String>>,
}

impl State {
    fn is_approved(&self, session: &str, key: &str) -> bool {
        let in_session = |k: &str| self.sessions.get(session).is_some_and(|s| s.contains(k));
        let known = |k: &str| self.permanent.contains(k) || in_session(k);
        known(key) || legacy_key_aliases(key).iter().any(|alias| known(alias))
    }

    fn streak(&self, session: &str) -> u32 {
        self.streaks
            .iter()
            .find(|(s, _)| s == session)
            .map_or(0, |(_, n)| *n)
    }

    fn set_streak(&mut self, session: &str, value: u32) {
        self.streaks.retain(|(s, _)| s != session);
        if value > 0 {
            self.streaks.push((session.to_string(), value));
            if self.streaks.len() > STREAK_SESSIONS {
                self.streaks.remove(0);
            }
        }
    }
}

/// The approval machinery of one Hermes home.
pub struct Approvals {
    hermes_home: PathBuf,
    policy: RwLock<Arc<ApprovalPolicy>>,
    state: Mutex<State>,
    /// Woken whenever a gateway request is answered, times out or is withdrawn.
    wake: Condvar,
    process_yolo: AtomicBool,
    guardian: RwLock<Option<Arc<dyn Guardian>>>,
    /// The guardian is the HTTP one built from `approvals.smart.*` (not one set in code),
    /// so a new policy rebuilds it.
    guardian_from_config: AtomicBool,
    scanner: RwLock<Option<Arc<dyn CommandScanner>>>,
    prompter: RwLock<Option<Arc<dyn ApprovalPrompter>>>,
    observer: RwLock<Option<ApprovalObserver>>,
    heartbeat_every: RwLock<Duration>,
}

impl std::fmt::Debug for Approvals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Approvals")
            .field("hermes_home", &self.hermes_home)
            .finish_non_exhaustive()
    }
}

fn read<T: Clone>(lock: &RwLock<T>) -> T {
    lock.read().unwrap_or_else(|p| p.into_inner()).clone()
}

fn write<T>(lock: &RwLock<T>, value: T) {
    *lock.write().unwrap_or_else(|p| p.into_inner()) = value;
}

impl Approvals {
    /// Reads `config.yaml` of `hermes_home` (policy and permanent allowlist) and
    /// `HERMES_YOLO_MODE` (once, here).
    pub fn load(hermes_home: impl Into<PathBuf>) -> Approvals {
        let hermes_home = hermes_home.into();
        let policy = ApprovalPolicy::load(&hermes_home);
        Approvals::with_policy(hermes_home, policy)
    }

    /// With a given policy; its `command_allowlist` becomes the permanent set and baseline.
    pub fn with_policy(hermes_home: impl Into<PathBuf>, policy: ApprovalPolicy) -> Approvals {
        let permanent: BTreeSet<String> = policy.command_allowlist.iter().cloned().collect();
        let guardian = configured_guardian(&policy);
        Approvals {
            hermes_home: hermes_home.into(),
            policy: RwLock::new(Arc::new(policy)),
            state: Mutex::new(State {
                baseline: permanent.clone(),
                permanent,
                ..State::default()
            }),
            wake: Condvar::new(),
            process_yolo: AtomicBool::new(env_truthy(
                std::env::var("HERMES_YOLO_MODE").ok().as_deref(),
            )),
            guardian: RwLock::new(guardian),
            guardian_from_config: AtomicBool::new(true),
            scanner: RwLock::new(None),
            prompter: RwLock::new(None),
            observer: RwLock::new(None),
            heartbeat_every: RwLock::new(Duration::from_secs(10)),
        }
    }

    /// One instance per process for `$HERMES_HOME` (loaded on first use).
    /// The shared instance for a Hermes home, created on first use: every tool call
    /// of a process that uses one home sees the same session approvals. When
    /// config.yaml changed since the last call, the policy and the permanent
    /// allowlist are read again, so an operator's edit applies without a restart.
    pub fn for_home(hermes_home: &Path) -> Arc<Approvals> {
        type Signature = Option<(std::time::SystemTime, u64)>;
        type ByHome = HashMap<PathBuf, (Arc<Approvals>, Signature)>;
        static BY_HOME: OnceLock<Mutex<ByHome>> = OnceLock::new();
        let signature = crate::config::file_signature(&crate::config::Config::path_in(hermes_home));
        let mut homes = BY_HOME
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let (approvals, seen) = homes
            .entry(hermes_home.to_path_buf())
            .or_insert_with(|| (Arc::new(Approvals::load(hermes_home)), signature));
        if *seen != signature {
            approvals.set_policy(ApprovalPolicy::load(hermes_home));
            approvals.reload_allowlist();
            *seen = signature;
        }
        Arc::clone(approvals)
    }

    pub fn global() -> &'static Approvals {
        static GLOBAL: OnceLock<Approvals> = OnceLock::new();
        GLOBAL.get_or_init(|| Approvals::load(crate::context::default_hermes_home()))
    }

    pub fn hermes_home(&self) -> &Path {
        &self.hermes_home
    }

    pub fn config_path(&self) -> PathBuf {
        crate::config::Config::path_in(&self.hermes_home)
    }

    pub fn policy(&self) -> Arc<ApprovalPolicy> {
        read(&self.policy)
    }

    /// Replaces the policy (the permanent allowlist in memory is not touched); the smart
    /// reviewer follows the new `approvals.smart.*` unless one was set in code.
    pub fn set_policy(&self, policy: ApprovalPolicy) {
        if self.guardian_from_config.load(Ordering::SeqCst) {
            write(&self.guardian, configured_guardian(&policy));
        }
        write(&self.policy, Arc::new(policy));
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Process-wide yolo (`--yolo`; `HERMES_YOLO_MODE` is read at construction).
    pub fn set_process_yolo(&self, on: bool) {
        self.process_yolo.store(on, Ordering::SeqCst);
    }

    pub fn process_yolo(&self) -> bool {
        self.process_yolo.load(Ordering::SeqCst)
    }

    /// The smart reviewer (by default the HTTP one from `approvals.smart.*`, if configured).
    pub fn set_guardian(&self, guardian: Option<Arc<dyn Guardian>>) {
        self.guardian_from_config.store(false, Ordering::SeqCst);
        write(&self.guardian, guardian);
    }

    /// An optional external scanner (the original's tirith). Off unless set.
    pub fn set_scanner(&self, scanner: Option<Arc<dyn CommandScanner>>) {
        write(&self.scanner, scanner);
    }

    /// The prompter used for interactive CLI contexts when the call brings none.
    pub fn set_prompter(&self, prompter: Option<Arc<dyn ApprovalPrompter>>) {
        write(&self.prompter, prompter);
    }

    pub fn set_observer(&self, observer: Option<ApprovalObserver>) {
        write(&self.observer, observer);
    }

    /// How often a waiting gateway request calls the session's heartbeat (default 10 s).
    pub fn set_heartbeat_interval(&self, every: Duration) {
        write(&self.heartbeat_every, every.max(Duration::from_millis(10)));
    }

    pub(crate) fn observe(&self, event: &str, payload: &Value) {
        if let Some(observer) = read(&self.observer) {
            observer(event, payload);
        }
    }

    // ---- session and permanent approvals -------------------------------------------

    /// Approves `key` for `session` (session scope).
    pub fn approve_session(&self, session: &str, key: &str) {
        self.lock()
            .sessions
            .entry(session.to_string())
            .or_default()
            .insert(key.to_string());
    }

    /// Whether `key` (or one of its legacy aliases) is approved for `session` or permanently.
    pub fn is_approved(&self, session: &str, key: &str) -> bool {
        self.lock().is_approved(session, key)
    }

    /// Adds `entry` to the permanent allowlist in memory and saves the file.
    pub fn approve_permanent(&self, entry: &str) -> Result<(), String> {
        self.lock().permanent.insert(entry.to_string());
        self.save_permanent_allowlist()
    }

    /// Whether a person granted exactly `command` (as kept by the grant: the command
    /// and where it runs) for `session`.
    pub fn is_command_granted_for_session(&self, session: &str, command: &str) -> bool {
        self.lock()
            .session_commands
            .get(session)
            .is_some_and(|granted| granted.contains(command))
    }

    /// Where commands a person granted with `always` are kept, exactly as shown.
    fn granted_commands_path(&self) -> PathBuf {
        self.hermes_home.join("approved_commands.json")
    }

    /// The commands a person granted with `always` (read from the file each time, so
    /// grants made by other processes count).
    pub fn permanently_granted_commands(&self) -> Vec<String> {
        std::fs::read(self.granted_commands_path())
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default()
    }

    /// Keeps exactly `command` as granted with `always`.
    pub fn grant_command_permanently(&self, command: &str) -> Result<(), String> {
        let _saving = GRANTED_COMMANDS_SAVE
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let mut commands = self.permanently_granted_commands();
        if commands.iter().any(|c| c == command) {
            return Ok(());
        }
        commands.push(command.to_string());
        let text = serde_json::to_vec_pretty(&commands).map_err(|e| e.to_string())?;
        atomic_write(&self.granted_commands_path(), &text)
    }

    /// The permanent allowlist as held in memory, sorted.
    pub fn permanent_entries(&self) -> Vec<String> {
        self.lock().permanent.iter().cloned().collect()
    }

    /// Re-reads `command_allowlist` from the file: replaces the set and the baseline.
    pub fn reload_allowlist(&self) {
        match read_allowlist(&self.config_path()) {
            Some(entries) => {
                let set: BTreeSet<String> = entries.into_iter().collect();
                let mut state = self.lock();
                state.permanent = set.clone();
                state.baseline = set;
            }
            None => eprintln!(
                "warning: {}: command_allowlist not reloaded (file unreadable)",
                self.config_path().display()
            ),
        }
    }

    /// Writes `on_disk ∪ (memory − baseline)` to `config.yaml` (see [`save_allowlist`]);
    /// afterwards memory and baseline are what was written. Errors are also printed.
    pub fn save_permanent_allowlist(&self) -> Result<(), String> {
        let (memory, baseline) = {
            let state = self.lock();
            (state.permanent.clone(), state.baseline.clone())
        };
        match save_allowlist(&self.config_path(), &memory, &baseline) {
            Ok(written) => {
                let mut state = self.lock();
                // Keep entries added while the file was being written.
                let added_meanwhile: Vec<String> =
                    state.permanent.difference(&memory).cloned().collect();
                state.permanent = written.clone();
                state.permanent.extend(added_meanwhile);
                state.baseline = written;
                Ok(())
            }
            Err(e) => {
                eprintln!("warning: permanent command allowlist not saved: {e}");
                Err(e)
            }
        }
    }

    /// `/yolo` for one session.
    pub fn set_session_yolo(&self, session: &str, on: bool) {
        let mut state = self.lock();
        if on {
            state.yolo_sessions.insert(session.to_string());
        } else {
            state.yolo_sessions.remove(session);
        }
    }

    pub fn is_session_yolo(&self, session: &str) -> bool {
        self.lock().yolo_sessions.contains(session)
    }

    /// Consecutive smart denials in `session` since its last approval.
    pub fn denial_streak(&self, session: &str) -> u32 {
        self.lock().streak(session)
    }

    /// Drops the session's approvals, yolo, streak and pending gateway requests; anyone
    /// waiting on those requests wakes up refused.
    pub fn clear_session(&self, session: &str) {
        let mut state = self.lock();
        state.sessions.remove(session);
        state.session_commands.remove(session);
        state.yolo_sessions.remove(session);
        state.set_streak(session, 0);
        gateway::interrupt_session(&mut state, session);
        drop(state);
        self.wake.notify_all();
    }
}

/// The HTTP reviewer of `approvals.smart.*`, when configured.
fn configured_guardian(policy: &ApprovalPolicy) -> Option<Arc<dyn Guardian>> {
    policy
        .smart
        .clone()
        .map(|endpoint| Arc::new(HttpGuardian::new(endpoint)) as Arc<dyn Guardian>)
}
