//! Shell state kept between the commands of one task: a snapshot file of exports,
//! functions and aliases that each command sources and re-dumps, and the working
//! directory reported by a marker line at the end of each command's output.

use super::env::{sh_quote, Environment, ReadEvent};
use super::output::random_hex;
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub struct ShellSession {
    /// 12 hex digits naming the snapshot file and the cwd marker.
    pub sid: String,
    pub snapshot_path: String,
    cwd: Mutex<String>,
    snapshot_ready: Mutex<bool>,
}

/// What a command's wrapped output told us.
#[derive(Debug, Default, PartialEq)]
pub struct MarkerInfo {
    pub cwd: Option<String>,
}

impl ShellSession {
    pub fn new(temp_dir: String, cwd: String) -> Self {
        let sid = random_hex(12);
        let snapshot_path = format!("{temp_dir}/hermes-snap-{sid}.sh");
        Self { sid, snapshot_path, cwd: Mutex::new(cwd), snapshot_ready: Mutex::new(false) }
    }

    pub fn cwd(&self) -> String {
        self.cwd.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn set_cwd(&self, cwd: String) {
        *self.cwd.lock().unwrap_or_else(|p| p.into_inner()) = cwd;
    }

    pub fn snapshot_ready(&self) -> bool {
        *self.snapshot_ready.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn marker(&self) -> String {
        format!("__HERMES_CWD_{}__", self.sid)
    }

    /// Takes the first snapshot in a login shell (30 s at most). On failure commands run
    /// under `bash -l` instead. Tasks whose login shells would start alike (`shared_as`:
    /// same machine, settings, environment and directory) share one login shell per
    /// process: the first task's fresh snapshot, taken before any command of it ran, is
    /// copied for the others.
    pub fn init(&self, env: &dyn Environment, shared_as: Option<String>) {
        let Some(key) = shared_as else { return self.take_login_snapshot(env) };
        let cell = {
            let mut taken = first_snapshots().lock().unwrap_or_else(|p| p.into_inner());
            let entry = taken.entry(key).or_default();
            // Start-up files may change while the server runs: an old one is taken again.
            if entry.get().is_some_and(|(at, _)| at.elapsed() > FIRST_SNAPSHOT_REUSE) {
                *entry = Default::default();
            }
            std::sync::Arc::clone(entry)
        };
        let mut mine = false;
        let (_, first) = cell.get_or_init(|| {
            mine = true;
            self.take_login_snapshot(env);
            (Instant::now(), self.snapshot_ready().then(|| std::fs::read(&self.snapshot_path).ok()).flatten())
        });
        if mine {
            return;
        }
        let copied = first.as_ref().is_some_and(|bytes| {
            use std::io::Write;
            use std::os::unix::fs::OpenOptionsExt;
            let file = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&self.snapshot_path);
            file.and_then(|mut f| f.write_all(bytes)).is_ok()
        });
        if copied {
            *self.snapshot_ready.lock().unwrap_or_else(|p| p.into_inner()) = true;
        } else {
            self.take_login_snapshot(env);
        }
    }

    fn take_login_snapshot(&self, env: &dyn Environment) {
        let script = format!(
            "umask 077; for __v in $(compgen -v HERMES_SESSION_); do unset \"$__v\"; done; unset __v; {}",
            dump_snapshot(&self.snapshot_path)
        );
        let Ok(mut run) = env.run_foreground(&script, true) else { return };
        let deadline = Instant::now() + Duration::from_secs(30);
        let code = loop {
            if let Some(code) = run.try_wait() {
                break Some(code);
            }
            if Instant::now() >= deadline {
                run.kill(Duration::from_millis(500));
                break None;
            }
            if let ReadEvent::Eof = run.read(Duration::from_millis(20)) {
                std::thread::sleep(Duration::from_millis(5));
            }
        };
        if code == Some(0) {
            *self.snapshot_ready.lock().unwrap_or_else(|p| p.into_inner()) = true;
        }
    }

    /// The script one command runs as: restore state, cd, run, save state, print the
    /// cwd marker, exit with the command's status. `cwd_override` is a per-call workdir.
    pub fn wrap(&self, command: &str, cwd_override: Option<&str>) -> String {
        self.restore() + &self.wrap_body(command, cwd_override)
    }

    /// The part of [`ShellSession::wrap`] that restores the task's state (empty before
    /// the first snapshot). It reads only the snapshot the previous command left, so a
    /// shell may run it as soon as that command has ended, ahead of the next one.
    pub fn restore(&self) -> String {
        if !self.snapshot_ready() {
            return String::new();
        }
        format!("if [ -r {snap} ]; then builtin source {snap} >/dev/null 2>&1; fi\n", snap = sh_quote(&self.snapshot_path))
    }

    /// The rest of [`ShellSession::wrap`], after the state is restored.
    pub fn wrap_body(&self, command: &str, cwd_override: Option<&str>) -> String {
        let cwd = cwd_override.map(str::to_owned).unwrap_or_else(|| self.cwd());
        let ready = self.snapshot_ready();
        let mut s = String::new();
        s.push_str(
            "export AI_AGENT=\"${AI_AGENT:-hermes-agent}\" HERMES_AGENT=\"${HERMES_AGENT:-true}\" \
             GIT_PAGER=\"${GIT_PAGER:-cat}\" PAGER=\"${PAGER:-cat}\"\n",
        );
        s.push_str(&format!("builtin cd -- {} || exit 126\n", cd_target(&cwd)));
        s.push_str(&format!("eval {}\n", sh_quote(command)));
        s.push_str("__hermes_ec=$?\n");
        if ready {
            s.push_str("umask 077\n");
            s.push_str(&dump_snapshot(&self.snapshot_path));
            s.push('\n');
        }
        // `cd -P .` makes $PWD physical without a subshell.
        s.push_str(&format!(
            "builtin cd -P . >/dev/null 2>&1; builtin printf '\\n{m}%s{m}\\n' \"$PWD\"\nexit $__hermes_ec\n",
            m = self.marker()
        ));
        s
    }

    /// The script a background process runs: restore state, cd, run (state is not saved
    /// back, so a long-running process never overwrites later changes).
    pub fn wrap_background(&self, command: &str, cwd_override: Option<&str>) -> String {
        let cwd = cwd_override.map(str::to_owned).unwrap_or_else(|| self.cwd());
        let mut s = self.restore();
        s.push_str("export PYTHONUNBUFFERED=1 AI_AGENT=\"${AI_AGENT:-hermes-agent}\" HERMES_AGENT=\"${HERMES_AGENT:-true}\"\n");
        s.push_str(&format!("builtin cd -- {} || exit 126\n", cd_target(&cwd)));
        s.push_str(&format!("eval {}\n", sh_quote(command)));
        s
    }

    /// Removes the marker line from the output and returns what it said.
    pub fn strip_marker(&self, output: &mut String) -> MarkerInfo {
        let marker = self.marker();
        let Some(end_marker) = output.rfind(&marker) else { return MarkerInfo::default() };
        let before = &output[..end_marker];
        let Some(start_marker) = before.rfind(&marker) else { return MarkerInfo::default() };
        let cwd = output[start_marker + marker.len()..end_marker].to_string();
        let mut cut_from = start_marker;
        if output[..cut_from].ends_with('\n') {
            cut_from -= 1;
        }
        let mut cut_to = end_marker + marker.len();
        if output[cut_to..].starts_with('\n') {
            cut_to += 1;
        }
        output.replace_range(cut_from..cut_to, "");
        MarkerInfo { cwd: Some(cwd) }
    }

    /// Removes the snapshot file.
    pub fn remove_files(&self, env: &dyn Environment) {
        if env.backend() == "local" {
            let _ = std::fs::remove_file(&self.snapshot_path);
            return;
        }
        // Best effort on the far side, 5 s at most.
        let Ok(mut run) = env.run_bash(&format!("rm -f {}", sh_quote(&self.snapshot_path)), false, None) else { return };
        let deadline = Instant::now() + Duration::from_secs(5);
        while run.try_wait().is_none() {
            if Instant::now() >= deadline {
                run.kill(Duration::from_millis(200));
                return;
            }
            let _ = run.read(Duration::from_millis(20));
        }
    }
}

/// How long a first snapshot is copied for new tasks before a login shell runs again.
const FIRST_SNAPSHOT_REUSE: Duration = Duration::from_secs(60);

/// When a kind of task's first login-shell snapshot was taken, and its bytes (`None`: it failed).
type FirstSnapshot = std::sync::Arc<std::sync::OnceLock<(Instant, Option<Vec<u8>>)>>;

fn first_snapshots() -> &'static Mutex<std::collections::HashMap<String, FirstSnapshot>> {
    static TAKEN: std::sync::OnceLock<Mutex<std::collections::HashMap<String, FirstSnapshot>>> = std::sync::OnceLock::new();
    TAKEN.get_or_init(Default::default)
}

/// `~` and `~/x` stay for the shell to expand; everything else is quoted.
fn cd_target(cwd: &str) -> String {
    if cwd == "~" {
        return "~".into();
    }
    if let Some(rest) = cwd.strip_prefix("~/") {
        return format!("~/{}", sh_quote(rest));
    }
    sh_quote(cwd)
}

/// Writes exports, functions, aliases and shell options to the snapshot. Commands of a
/// task are serialised and background processes never write it, so a plain rewrite (no
/// extra `mv` process per command) is safe; a torn file only loses state, since sourcing
/// errors are ignored.
///
/// The file is overwritten in place (`1<>`), not truncated: on ext4 truncating a written
/// file to zero makes its close start writeback (`auto_da_alloc`), about 3 ms a command
/// here. The dump ends with `return`, so whatever an earlier, longer dump left after it is
/// never read.
fn dump_snapshot(path: &str) -> String {
    format!(
        "{{ builtin export -p; builtin declare -f; builtin alias -p; \
         builtin printf '%s\\n' 'shopt -s expand_aliases' 'set +e' 'set +u' 'builtin return 0'; }} 1<> {path} 2>/dev/null",
        path = sh_quote(path),
    )
}
