//! Classifies shell commands an LLM agent wants to run. Pure: no I/O, no environment reads;
//! everything that would need them (home directories, temp dir, deny globs) comes in a
//! [`GuardContext`].
//!
//! # Model
//!
//! A command is first checked against input limits (fail closed, R5), then normalized (ANSI,
//! NUL, NFKC, line continuations, home folding, `$IFS`) and tokenized by a small quote-aware
//! shell lexer. The tokens become simple commands, and for each one the *executable position*
//! is located by peeling keywords, assignments, wrappers (`sudo`, `env`, `nice`, `timeout`,
//! `chroot`, `busybox`, ...) and directory prefixes. Everything the shell would run as a nested
//! command (`$(...)`, backticks, `bash -c`, `eval`, `env -S`, here-docs fed to a shell, ...) is
//! analysed the same way, recursively to a bounded depth.
//!
//! Verdicts, from the floor up (see [`classify`]):
//! * **hardline**: parser limits and a tiny set of structural rules (root/system/home deletes,
//!   filesystem formatting, raw device writes, fork bombs, shutdown, kill -1);
//! * **blocked**: model-written `sudo -S` (password guessing) and operator deny globs;
//! * **dangerous**: the ordered rule table, whose key is its description, then structural
//!   findings (inline interpreter code, `sh -c`, read tools running programs);
//! * **safe**: nothing matched.
//!
//! Matching uses the `regex` crate only (no backtracking) plus linear scans, so every check is
//! linear in the input size.

mod aliases;
mod allowlist;
mod command;
mod data;
mod disks;
mod exemption;
mod expansion;
mod fnmatch;
mod normalize;
mod pipelines;
mod rules;
mod scripts;
mod structural;
mod sudo;
mod tokenize;
mod variants;
mod writes;

use std::sync::LazyLock;

use regex::Regex;

pub use aliases::legacy_key_aliases;
pub use allowlist::{is_simple_command, matches_allowlist};
pub use normalize::strip_ansi;
pub use scripts::{scripts_run_by_path, ScriptKind, ScriptRun};

use variants::{analyze, raw_limit_exceeded, Analysis};

/// Key and description of the parser-limit floor.
pub const PARSER_LIMIT_KEY: &str = "command parser limit exceeded";
/// Key of the floor for a malformed quoted PCRE grep pattern.
pub const MALFORMED_PAYLOAD_KEY: &str = structural::MALFORMED_PAYLOAD;
/// Key of the sudo-stdin floor.
pub const SUDO_STDIN_KEY: &str = sudo::SUDO_STDIN;
/// Key of a gateway stop/restart verb assembled from quoted pieces (§1.2 step 5).
pub const SPLICED_GATEWAY_KEY: &str =
    "stop/restart hermes gateway via shell-spliced verb (kills running agents)";

/// Everything the classifier would otherwise have to ask the operating system.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuardContext {
    /// The user's home directory, e.g. `/home/alice` or `C:\Users\alice`.
    pub home: Option<String>,
    /// Its real path, when different.
    pub home_real: Option<String>,
    /// Hermes' home, e.g. `/home/alice/.hermes`.
    pub hermes_home: Option<String>,
    pub hermes_home_real: Option<String>,
    /// The real temp directory (for the verification exemption).
    pub temp_dir: String,
    /// `approvals.deny` globs.
    pub deny_globs: Vec<String>,
}

impl Default for GuardContext {
    fn default() -> Self {
        Self {
            home: None,
            home_real: None,
            hermes_home: None,
            hermes_home_real: None,
            temp_dir: "/tmp".to_string(),
            deny_globs: Vec::new(),
        }
    }
}

/// A detector hit. For rule findings `key == description`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub key: String,
    pub description: String,
}

impl Finding {
    fn from_description(description: &str) -> Self {
        Self {
            key: description.to_string(),
            description: description.to_string(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verdict {
    Safe,
    Dangerous,
    Hardline,
    Blocked,
}

impl Verdict {
    pub fn as_str(&self) -> &'static str {
        match self {
            Verdict::Safe => "safe",
            Verdict::Dangerous => "dangerous",
            Verdict::Hardline => "hardline",
            Verdict::Blocked => "blocked",
        }
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Classification {
    pub verdict: Verdict,
    pub key: Option<String>,
    pub description: Option<String>,
}

impl Classification {
    fn safe() -> Self {
        Self {
            verdict: Verdict::Safe,
            key: None,
            description: None,
        }
    }

    fn with(verdict: Verdict, finding: Finding) -> Self {
        Self {
            verdict,
            key: Some(finding.key),
            description: Some(finding.description),
        }
    }
}

/// The analysis is expensive relative to the checks, so [`classify`] builds it once; `None`
/// means the raw input is already over the parser limits.
fn analysis_of(cmd: &str, ctx: &GuardContext) -> Option<std::rc::Rc<Analysis>> {
    (!raw_limit_exceeded(cmd)).then(|| shared_analysis(cmd, ctx))
}

/// The analysis of `cmd`, the one made last on this thread when it was of the same
/// command in the same context: a caller checks one command against several of the
/// public checks in turn (the floors, the dangerous tier, the scripts it runs), and each
/// would otherwise parse it again. The analysis depends on nothing but its two inputs.
pub(crate) fn shared_analysis(cmd: &str, ctx: &GuardContext) -> std::rc::Rc<Analysis> {
    type Last = Option<(String, GuardContext, std::rc::Rc<Analysis>)>;
    thread_local! {
        static LAST: std::cell::RefCell<Last> = const { std::cell::RefCell::new(None) };
    }
    LAST.with(|last| {
        if let Some((seen_cmd, seen_ctx, analysis)) = &*last.borrow() {
            if seen_cmd == cmd && seen_ctx == ctx {
                return std::rc::Rc::clone(analysis);
            }
        }
        let analysis = std::rc::Rc::new(analyze(cmd, ctx));
        *last.borrow_mut() = Some((cmd.to_owned(), ctx.clone(), std::rc::Rc::clone(&analysis)));
        analysis
    })
}

fn hardline_of(analysis: Option<&Analysis>, ctx: &GuardContext) -> Option<Finding> {
    let Some(analysis) = analysis else {
        return Some(Finding::from_description(PARSER_LIMIT_KEY));
    };
    if analysis.limit_exceeded {
        return Some(Finding::from_description(PARSER_LIMIT_KEY));
    }
    if analysis.malformed_pattern {
        return Some(Finding::from_description(MALFORMED_PAYLOAD_KEY));
    }
    rules::hardline::hardline_finding(analysis, ctx).map(Finding::from_description)
}

fn sudo_guard_of(analysis: Option<&Analysis>) -> Option<Finding> {
    analysis
        .filter(|a| sudo::reads_password_from_stdin(a))
        .map(|_| Finding::from_description(SUDO_STDIN_KEY))
}

fn deny_of(cmd: &str, analysis: Option<&Analysis>, ctx: &GuardContext) -> Option<String> {
    match analysis {
        Some(a) => allowlist::matching_deny_glob(cmd, a, &ctx.deny_globs),
        None => allowlist::matching_deny_glob(cmd, &Analysis::default(), &ctx.deny_globs),
    }
}

fn dangerous_of(cmd: &str, analysis: Option<&Analysis>, ctx: &GuardContext) -> Option<Finding> {
    let Some(analysis) = analysis else {
        return Some(Finding::from_description(PARSER_LIMIT_KEY));
    };
    if analysis.limit_exceeded {
        return Some(Finding::from_description(PARSER_LIMIT_KEY));
    }
    if exemption::is_verification_cleanup(cmd, ctx) {
        return None;
    }
    if let Some(key) = rules::dangerous::dangerous_rule_finding(analysis) {
        return Some(Finding::from_description(key));
    }
    if let Some(key) = structural::structural_finding(analysis) {
        return Some(Finding::from_description(&key));
    }
    if spliced_gateway_lifecycle(analysis) {
        return Some(Finding::from_description(SPLICED_GATEWAY_KEY));
    }
    // A hardline hit is always also dangerous, even where no dangerous rule names it.
    hardline_of(Some(analysis), ctx)
}

/// Needs approval? (Hardline commands are dangerous too.)
pub fn detect_dangerous(cmd: &str, ctx: &GuardContext) -> Option<Finding> {
    dangerous_of(cmd, analysis_of(cmd, ctx).as_deref(), ctx)
}

/// The unconditional floor: parser limits, malformed PCRE payloads and the hardline rules.
pub fn detect_hardline(cmd: &str, ctx: &GuardContext) -> Option<Finding> {
    hardline_of(analysis_of(cmd, ctx).as_deref(), ctx)
}

/// Model-written sudo reading its password from stdin (`-S`, any bundle, `--stdin`).
pub fn sudo_stdin_guard(cmd: &str, ctx: &GuardContext) -> Option<Finding> {
    sudo_guard_of(analysis_of(cmd, ctx).as_deref())
}

/// The first `approvals.deny` glob that matches the command.
pub fn match_deny_rule(cmd: &str, ctx: &GuardContext) -> Option<String> {
    if ctx.deny_globs.is_empty() {
        return None;
    }
    deny_of(cmd, analysis_of(cmd, ctx).as_deref(), ctx)
}

/// One verdict for a command, checking floors first: parser limit / hardline, then sudo-stdin
/// guard / deny globs, then the dangerous tier.
pub fn classify(cmd: &str, ctx: &GuardContext) -> Classification {
    let analysis = analysis_of(cmd, ctx);
    let analysis = analysis.as_deref();
    if let Some(finding) = hardline_of(analysis, ctx) {
        return Classification::with(Verdict::Hardline, finding);
    }
    if let Some(finding) = sudo_guard_of(analysis) {
        return Classification::with(Verdict::Blocked, finding);
    }
    if let Some(glob) = deny_of(cmd, analysis, ctx) {
        return Classification {
            verdict: Verdict::Blocked,
            key: Some(format!("deny:{glob}")),
            description: Some(format!("matches approvals.deny rule '{glob}'")),
        };
    }
    match dangerous_of(cmd, analysis, ctx) {
        Some(finding) => Classification::with(Verdict::Dangerous, finding),
        None => Classification::safe(),
    }
}

static GATEWAY_UNIT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)hermes[.-]gateway").expect("valid regex"));

/// §1.2 step 5: the lifecycle verb only exists after quote removal (`re"start"`), so the text
/// rules missed it; the word values of the parsed command do not.
fn spliced_gateway_lifecycle(analysis: &Analysis) -> bool {
    analysis.commands().any(|command| {
        let values: Vec<String> = command.arg_values().map(str::to_lowercase).collect();
        match command.exec_name.as_str() {
            "launchctl" => {
                const VERBS: &[&str] = &[
                    "stop",
                    "kickstart",
                    "bootout",
                    "unload",
                    "kill",
                    "disable",
                    "remove",
                ];
                values.iter().any(|v| VERBS.contains(&v.as_str()))
                    && values.iter().any(|v| GATEWAY_UNIT.is_match(v))
            }
            "hermes" => values
                .iter()
                .skip_while(|v| v.as_str() != "gateway")
                .nth(1)
                .is_some_and(|verb| verb == "stop" || verb == "restart"),
            _ => false,
        }
    })
}

/// Compiles every rule now rather than when a command first needs it (a one-shot
/// classification compiles only the rules its command can match); long-running hosts call
/// it on a spare thread at start so no request pays for it.
pub fn warm_up() {
    classify("true", &GuardContext::default());
    rules::dangerous::compile_all();
}

/// Every dangerous-rule key in table order (structural and floor keys not included).
pub fn dangerous_rule_keys() -> Vec<&'static str> {
    let mut keys: Vec<&'static str> = rules::dangerous::rule_keys().collect();
    keys.dedup();
    keys
}
