//! The `local` backend: bash on this machine, each command in a new session, and the
//! process-tree kill every local child uses.

use super::{ChildRun, EnvError, Environment, Running};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

pub struct LocalEnv {
    cwd: PathBuf,
}

impl LocalEnv {
    pub fn new(cwd: PathBuf) -> Self {
        Self { cwd }
    }
}

pub fn availability() -> Option<String> {
    if find_bash().is_none() {
        return Some("bash was not found on PATH or in /bin, /usr/bin".into());
    }
    None
}

/// The bash to run (`/bin/bash` when PATH has none).
pub fn find_bash() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let candidate = dir.join("bash");
            if candidate.is_file() {
                return Some(candidate);
            }
        }
    }
    ["/bin/bash", "/usr/bin/bash", "/usr/local/bin/bash"].iter().map(PathBuf::from).find(|p| p.is_file())
}

/// The temp dir: an absolute `TMPDIR`, else `/tmp`.
pub fn local_temp_dir() -> String {
    std::env::var("TMPDIR").ok().filter(|t| t.starts_with('/')).map(|t| t.trim_end_matches('/').to_string())
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| "/tmp".to_string())
}

/// Environment variables that never reach a command: provider credentials and tool
/// secrets that belong to Hermes itself (reference §3.6).
pub const SCRUBBED_ENV: &[&str] = &[
    "OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENROUTER_API_KEY",
    "CLAUDE_CODE_OAUTH_TOKEN", "GH_TOKEN", "MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET", "DAYTONA_API_KEY",
    "VERCEL_TOKEN", "VERCEL_OIDC_TOKEN", "NOUS_API_KEY", "TELEGRAM_BOT_TOKEN", "DISCORD_BOT_TOKEN",
    "SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "FIRECRAWL_API_KEY", "EXA_API_KEY", "TAVILY_API_KEY",
    "ELEVENLABS_API_KEY", "FAL_KEY", "XAI_API_KEY", "GOOGLE_API_KEY", "GEMINI_API_KEY", "SUDO_PASSWORD",
];

/// Applies the child-environment rules to a command: scrub secrets, `_HERMES_FORCE_<NAME>`
/// injects `<NAME>`, a PATH without `/usr/bin` gets the standard directories.
pub fn prepare_env(cmd: &mut Command, passthrough: &[String]) {
    for name in SCRUBBED_ENV {
        if !passthrough.iter().any(|p| p == name) {
            cmd.env_remove(name);
        }
    }
    for (key, value) in std::env::vars_os() {
        if let Some(name) = key.to_str().and_then(|k| k.strip_prefix("_HERMES_FORCE_")) {
            cmd.env(name, value);
        }
    }
    let path = std::env::var("PATH").unwrap_or_default();
    if !path.split(':').any(|d| d == "/usr/bin") {
        let extra = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/opt/homebrew/bin";
        let joined = if path.is_empty() { extra.to_string() } else { format!("{path}:{extra}") };
        cmd.env("PATH", joined);
    }
}

impl Environment for LocalEnv {
    fn backend(&self) -> &'static str {
        "local"
    }

    fn run_bash(&self, script: &str, login: bool, stdin: Option<Vec<u8>>) -> Result<Box<dyn Running>, EnvError> {
        let bash = find_bash().ok_or_else(|| EnvError::new("bash was not found"))?;
        let mut cmd = Command::new(bash);
        if login {
            cmd.arg("-l");
        }
        cmd.arg("-c").arg(script);
        let dir = nearest_existing(&self.cwd);
        cmd.current_dir(dir);
        cmd.env("PYTHONUNBUFFERED", "1");
        prepare_env(&mut cmd, &super::super::config::env_passthrough());
        let run = ChildRun::spawn(cmd, stdin, false).map_err(|e| EnvError::new(format!("cannot start bash: {e}")))?;
        Ok(Box::new(run))
    }

    fn temp_dir(&self) -> String {
        local_temp_dir()
    }

    fn default_cwd(&self) -> String {
        self.cwd.to_string_lossy().into_owned()
    }

    fn fetch_file(&self, path: &str, max_bytes: usize) -> Result<Vec<u8>, EnvError> {
        use std::io::Read;
        let file = std::fs::File::open(path).map_err(|e| EnvError::new(format!("{path}: {e}")))?;
        let mut out = Vec::new();
        file.take(max_bytes as u64).read_to_end(&mut out).map_err(|e| EnvError::new(format!("{path}: {e}")))?;
        Ok(out)
    }

    fn cleanup(&self) {}
}

/// The nearest existing ancestor of `path` (a deleted cwd must not stop commands).
pub fn nearest_existing(path: &std::path::Path) -> PathBuf {
    let mut current = path.to_path_buf();
    loop {
        if current.is_dir() {
            return current;
        }
        if !current.pop() {
            return PathBuf::from("/");
        }
    }
}

// ------------------------------------------------------------------ process trees

/// (pid, ppid, pgrp, state) of every process, from /proc.
fn process_table() -> Vec<(u32, u32, i32, char)> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else { return out };
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        if let Some(row) = stat_of(pid) {
            out.push(row);
        }
    }
    out
}

fn stat_of(pid: u32) -> Option<(u32, u32, i32, char)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &text[text.rfind(')')? + 1..];
    let mut fields = after.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some((pid, ppid, pgrp, state))
}

/// Whether a process exists and is not a zombie.
pub fn is_alive(pid: u32) -> bool {
    match stat_of(pid) {
        Some((_, _, _, state)) => state != 'Z' && state != 'X',
        None => {
            // No /proc: fall back to kill(0).
            // SAFETY: signal 0 only checks existence.
            !std::path::Path::new("/proc/self").exists() && unsafe { libc::kill(pid as i32, 0) } == 0
        }
    }
}

/// `root`, its process group (when it leads one) and all its descendants.
pub fn tree_pids(root: u32) -> Vec<u32> {
    let table = process_table();
    let mut set: Vec<u32> = vec![root];
    let root_pgrp = table.iter().find(|(pid, ..)| *pid == root).map(|r| r.2);
    if root_pgrp == Some(root as i32) {
        for (pid, _, pgrp, _) in &table {
            if *pgrp == root as i32 && !set.contains(pid) {
                set.push(*pid);
            }
        }
    }
    let mut i = 0;
    while i < set.len() {
        let parent = set[i];
        for (pid, ppid, ..) in &table {
            if *ppid == parent && !set.contains(pid) {
                set.push(*pid);
            }
        }
        i += 1;
    }
    set
}

fn signal_all(pgid: u32, pids: &[u32], sig: i32) {
    // SAFETY: sending signals to pids we collected; failures are ignored.
    unsafe {
        libc::kill(-(pgid as i32), sig);
        for pid in pids {
            libc::kill(*pid as i32, sig);
        }
    }
}

/// Stops the process tree rooted at `root` (a session/group leader): SIGTERM to the group
/// and every descendant, up to `grace` for them to exit, then SIGKILL; `reap` is called
/// while waiting so the caller can collect its direct child. Returns the survivors.
pub fn kill_tree(root: u32, grace: Duration, reap: &mut dyn FnMut()) -> Vec<u32> {
    let mut pids = tree_pids(root);
    signal_all(root, &pids, libc::SIGTERM);
    // Resume stopped processes so they can act on SIGTERM.
    signal_all(root, &pids, libc::SIGCONT);
    let deadline = Instant::now() + grace;
    loop {
        reap();
        for pid in tree_pids(root) {
            if !pids.contains(&pid) {
                pids.push(pid);
            }
        }
        if !pids.iter().any(|p| is_alive(*p)) {
            return Vec::new();
        }
        if Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    for pid in tree_pids(root) {
        if !pids.contains(&pid) {
            pids.push(pid);
        }
    }
    signal_all(root, &pids, libc::SIGKILL);
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        reap();
        let survivors: Vec<u32> = pids.iter().copied().filter(|p| is_alive(*p)).collect();
        if survivors.is_empty() || Instant::now() >= deadline {
            return survivors;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
}
