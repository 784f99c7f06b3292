//! Shell state kept between the commands of one task: a snapshot file of exports,
//! functions and aliases that each command sources and re-dumps, and the working
//! directory reported by a marker line at the end of each command's output.

use super::env::{sh_quote, sh_quote_bytes, Environment, ReadEvent};
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
        Self::resumed(&temp_dir, random_hex(12), cwd, false)
    }

    /// The session named `sid` whose files are in `temp_dir`, as it was left: in `cwd`,
    /// with its snapshot taken or not.
    pub fn resumed(temp_dir: &str, sid: String, cwd: String, snapshot_ready: bool) -> Self {
        let snapshot_path = format!("{temp_dir}/hermes-snap-{sid}.sh");
        Self {
            sid,
            snapshot_path,
            cwd: Mutex::new(cwd),
            snapshot_ready: Mutex::new(snapshot_ready),
        }
    }

    pub fn cwd(&self) -> String {
        self.cwd.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn set_cwd(&self, cwd: String) {
        *self.cwd.lock().unwrap_or_else(|p| p.into_inner()) = cwd;
    }

    pub fn snapshot_ready(&self) -> bool {
        *self
            .snapshot_ready
            .lock()
            .unwrap_or_else(|p| p.into_inner())
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
        let Some(key) = shared_as else {
            return self.take_login_snapshot(env);
        };
        let cell = {
            let mut taken = first_snapshots().lock().unwrap_or_else(|p| p.into_inner());
            let entry = taken.entry(key).or_default();
            // Start-up files may change while the server runs: an old one is taken again.
            if entry
                .get()
                .is_some_and(|(at, _)| at.elapsed() > FIRST_SNAPSHOT_REUSE)
            {
                *entry = Default::default();
            }
            std::sync::Arc::clone(entry)
        };
        let mut mine = false;
        let (_, first) = cell.get_or_init(|| {
            mine = true;
            self.take_login_snapshot(env);
            (
                Instant::now(),
                self.snapshot_ready()
                    .then(|| read_own_file(&self.snapshot_path).ok())
                    .flatten(),
            )
        });
        if mine {
            return;
        }
        let copied = first.as_ref().is_some_and(|bytes| {
            use std::io::Write;
            use std::os::unix::fs::OpenOptionsExt;
            let file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&self.snapshot_path);
            file.and_then(|mut f| f.write_all(bytes)).is_ok()
        });
        if copied {
            *self
                .snapshot_ready
                .lock()
                .unwrap_or_else(|p| p.into_inner()) = true;
        } else {
            self.take_login_snapshot(env);
        }
    }

    fn take_login_snapshot(&self, env: &dyn Environment) {
        let script = format!(
            "umask 077; for __v in $(compgen -v HERMES_SESSION_); do unset \"$__v\"; done; unset __v; {}",
            dump_snapshot(&self.snapshot_path)
        );
        let Ok(mut run) = env.run_foreground(&script, true) else {
            return;
        };
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
            *self
                .snapshot_ready
                .lock()
                .unwrap_or_else(|p| p.into_inner()) = true;
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
        format!(
            "if [ -r {snap} ]; then builtin source {snap} >/dev/null 2>&1; fi\n",
            snap = sh_quote(&self.snapshot_path)
        )
    }

    /// The rest of [`ShellSession::wrap`], after the state is restored.
    ///
    /// A command that can change none of what the snapshot holds leaves it as it is:
    /// after a command of programs and quiet builtins (see [`crate::unchanged_state`]),
    /// the shell writes it only when one of their names is a function or an alias of the
    /// task's, which it asks itself.
    pub fn wrap_body(&self, command: &str, cwd_override: Option<&str>) -> String {
        let dump = match crate::unchanged_state::names_run_by(command) {
            None => Dump::Always(&self.snapshot_path),
            Some(names) => Dump::IfDefined(&self.snapshot_path, names),
        };
        self.wrap_body_dumping(command, cwd_override, dump)
    }

    /// The script a command a person approved runs as outside the sandbox: nothing of
    /// the task's state is restored (its exports, functions, aliases and PATH are the
    /// model's, and could change what the approved command runs), so it is the command
    /// shown, in a login shell. What its shell ends with is saved beside the snapshot for
    /// [`ShellSession::merge_approved`] to lay over the task's state.
    pub fn wrap_approved(&self, command: &str, cwd_override: Option<&str>) -> String {
        let dump = self.approved_dump_path();
        let dump = dump.as_deref().map_or(Dump::Never, Dump::Always);
        self.wrap_body_dumping(command, cwd_override, dump)
    }

    /// As [`ShellSession::wrap_background`], with nothing of the task's state restored
    /// (see [`ShellSession::wrap_approved`]).
    pub fn wrap_approved_background(&self, command: &str, cwd_override: Option<&str>) -> String {
        self.background_script(String::new(), command, cwd_override)
    }

    /// Written by a shell with the server's rights, so never in the task's state
    /// directory (its commands may plant a link there): in the server's own run
    /// directory, which no sandbox sees.
    fn approved_dump_path(&self) -> Option<String> {
        let dir = hermes_sandbox::run_dir::server_dir().ok()?;
        Some(
            dir.join(format!("approved-{}.sh", self.sid))
                .to_string_lossy()
                .into_owned(),
        )
    }

    /// Lays what a command run by [`ShellSession::wrap_approved`] left (its exports,
    /// functions, aliases) over the task's snapshot, so the commands after it see them.
    pub fn merge_approved(&self) {
        const END: &[u8] = b"\nbuiltin return 0\n";
        let Some(dump_path) = self.approved_dump_path() else {
            return;
        };
        let Ok(approved) = std::fs::read(&dump_path) else {
            return;
        };
        let _ = std::fs::remove_file(&dump_path);
        let Ok(mut state) = read_own_file(&self.snapshot_path) else {
            return;
        };
        if let Some(end) = state.windows(END.len()).position(|w| w == END) {
            state.truncate(end + 1);
        }
        state.extend_from_slice(&approved);
        let _ = replace_own_file(&self.snapshot_path, &state);
    }

    /// The body, saving the shell's state at the end as `dump` says.
    fn wrap_body_dumping(&self, command: &str, cwd_override: Option<&str>, dump: Dump) -> String {
        let cwd = cwd_override
            .map(str::to_owned)
            .unwrap_or_else(|| self.cwd());
        let ready = self.snapshot_ready();
        let mut s = String::new();
        s.push_str(&format!("export {AGENT_DEFAULTS}\n"));
        s.push_str(&format!("builtin cd -- {} || exit 126\n", cd_target(&cwd)));
        s.push_str(&format!("eval {}\n", sh_quote(command)));
        s.push_str("__hermes_ec=$?\n");
        match dump {
            _ if !ready => {}
            Dump::Never => {}
            Dump::Always(path) => {
                s.push_str("umask 077\n");
                s.push_str(&dump_snapshot(path));
                s.push('\n');
            }
            Dump::IfDefined(_, names) if names.is_empty() => {}
            Dump::IfDefined(path, names) => {
                s.push_str("if {");
                for name in names {
                    let name = sh_quote(name);
                    s.push_str(&format!(
                        " builtin declare -F -- {name} || builtin alias -- {name} ||"
                    ));
                }
                s.push_str(" false; } >/dev/null 2>&1; then umask 077; ");
                s.push_str(&dump_snapshot(path));
                s.push_str("; fi\n");
            }
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
        self.background_script(self.restore(), command, cwd_override)
    }

    fn background_script(
        &self,
        mut s: String,
        command: &str,
        cwd_override: Option<&str>,
    ) -> String {
        let cwd = cwd_override
            .map(str::to_owned)
            .unwrap_or_else(|| self.cwd());
        s.push_str(&format!("export PYTHONUNBUFFERED=1 {AGENT_DEFAULTS}\n"));
        s.push_str(&format!("builtin cd -- {} || exit 126\n", cd_target(&cwd)));
        s.push_str(&format!("eval {}\n", sh_quote(command)));
        s
    }

    /// Removes the marker line from the output and returns what it said.
    pub fn strip_marker(&self, output: &mut String) -> MarkerInfo {
        let marker = self.marker();
        let Some(end_marker) = output.rfind(&marker) else {
            return MarkerInfo::default();
        };
        let before = &output[..end_marker];
        let Some(start_marker) = before.rfind(&marker) else {
            return MarkerInfo::default();
        };
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
        let Ok(mut run) = env.run_bash(
            &format!("rm -f {}", sh_quote(&self.snapshot_path)),
            false,
            None,
        ) else {
            return;
        };
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
    static TAKEN: std::sync::OnceLock<Mutex<std::collections::HashMap<String, FirstSnapshot>>> =
        std::sync::OnceLock::new();
    TAKEN.get_or_init(Default::default)
}

/// A task's snapshot as the server reads it: a regular file, never through a link (its
/// commands may replace the file with a link to something only the server may read).
pub fn read_own_file(path: &str) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Replaces a task's snapshot as the server writes it: a new file renamed over the old
/// name, so a link planted there is replaced, never followed.
fn replace_own_file(path: &str, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let fresh = format!("{path}.{}", random_hex(12));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&fresh)
        .and_then(|mut f| f.write_all(bytes));
    match written.and_then(|()| std::fs::rename(&fresh, path)) {
        Ok(()) => Ok(()),
        Err(e) => {
            let _ = std::fs::remove_file(&fresh);
            Err(e)
        }
    }
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

/// What every command's shell exports unless the task set it: tools that look tell an
/// agent is driving, and pagers that wait for a person do not. A background process
/// gets them too, from its own script: the snapshot holds them only once a command
/// wrote it (a command of programs does not, see [`ShellSession::wrap_body`]).
const AGENT_DEFAULTS: &str = "AI_AGENT=\"${AI_AGENT:-hermes-agent}\" \
    HERMES_AGENT=\"${HERMES_AGENT:-true}\" GIT_PAGER=\"${GIT_PAGER:-cat}\" PAGER=\"${PAGER:-cat}\"";

/// Whether a command's shell writes its state at the end, and where.
enum Dump<'a> {
    Never,
    Always(&'a str),
    /// Only when one of these names is a function or an alias of the shell's.
    IfDefined(&'a str, Vec<&'a str>),
}

/// Names bash gives a value of its own at start-up (or reads specially), whatever the
/// environment says: their exports are always restored.
fn set_by_the_shell(name: &[u8]) -> bool {
    const NAMES: &[&[u8]] = &[
        b"_",
        b"PWD",
        b"OLDPWD",
        b"SHLVL",
        b"IFS",
        b"SHELL",
        b"SHELLOPTS",
        b"POSIXLY_CORRECT",
        b"PS4",
        b"OPTIND",
        b"OPTERR",
        b"PPID",
        b"UID",
        b"EUID",
        b"GROUPS",
        b"HOSTNAME",
        b"HOSTTYPE",
        b"MACHTYPE",
        b"OSTYPE",
        b"RANDOM",
        b"SRANDOM",
        b"SECONDS",
        b"LINENO",
        b"EPOCHSECONDS",
        b"EPOCHREALTIME",
        b"COLUMNS",
        b"LINES",
        b"DIRSTACK",
        b"FUNCNAME",
        b"PIPESTATUS",
        b"MAILCHECK",
    ];
    name.starts_with(b"BASH")
        || name.starts_with(b"COMP")
        || name.starts_with(b"HIST")
        || NAMES.contains(&name)
}

/// An export line as `export -p` writes it.
struct ExportLine<'a> {
    /// With its newline.
    len: usize,
    name: &'a [u8],
    /// The value as bash parses it when the line is a plain `declare -x NAME="VALUE"`
    /// (`None` for other attributes, ANSI-C quoting or no value).
    plain_value: Option<Vec<u8>>,
}

/// The export line that starts `text`; `None` for anything else, which ends the exports.
fn export_line(text: &[u8]) -> Option<ExportLine<'_>> {
    let rest = text.strip_prefix(b"declare -")?;
    let flags_len = rest.iter().position(|&b| b == b' ')?;
    let (flags, rest) = (&rest[..flags_len], &rest[flags_len + 1..]);
    if flags.is_empty() || !flags.iter().all(u8::is_ascii_lowercase) {
        return None;
    }
    let name_len = rest
        .iter()
        .position(|&b| !(b.is_ascii_alphanumeric() || b == b'_'))?;
    let name = &rest[..name_len];
    if name.is_empty() || name[0].is_ascii_digit() {
        return None;
    }
    let after_name = &rest[name_len..];
    let header = text.len() - after_name.len();
    let (value_len, value) = if after_name.starts_with(b"\n") {
        (0, None)
    } else if let Some(quoted) = after_name.strip_prefix(b"=\"") {
        let (len, value) = double_quoted(quoted)?;
        (len + 2, Some(value))
    } else if let Some(quoted) = after_name.strip_prefix(b"=$'") {
        (ansi_c_quoted_len(quoted)? + 3, None)
    } else {
        return None;
    };
    if after_name.get(value_len) != Some(&b'\n') {
        return None;
    }
    Some(ExportLine {
        len: header + value_len + 1,
        name,
        plain_value: value.filter(|_| flags == b"x"),
    })
}

/// The export lines that start `text`, each with the bytes it spans, and where they end.
fn leading_exports(text: &[u8]) -> (Vec<(std::ops::Range<usize>, ExportLine<'_>)>, usize) {
    let mut lines = Vec::new();
    let mut at = 0;
    while let Some(line) = export_line(&text[at..]) {
        let span = at..at + line.len;
        at = span.end;
        lines.push((span, line));
    }
    (lines, at)
}

/// Whether `name` has one export line among `lines`.
fn appears_once(lines: &[(std::ops::Range<usize>, ExportLine<'_>)], name: &[u8]) -> bool {
    lines.iter().filter(|(_, line)| line.name == name).count() == 1
}

/// The value of a double-quoted word that starts `text` (after its opening quote) as
/// bash reads it, and the word's length to its closing quote included. `None` when it
/// holds an expansion or does not end.
fn double_quoted(text: &[u8]) -> Option<(usize, Vec<u8>)> {
    let mut value = Vec::with_capacity(text.len().min(256));
    let mut i = 0;
    loop {
        match *text.get(i)? {
            b'"' => return Some((i + 1, value)),
            b'$' | b'`' => return None,
            // Inside double quotes a backslash escapes only these; before a newline
            // both go; before anything else it stays.
            b'\\' => match *text.get(i + 1)? {
                c @ (b'$' | b'`' | b'"' | b'\\') => {
                    value.push(c);
                    i += 2;
                }
                b'\n' => i += 2,
                _ => {
                    value.push(b'\\');
                    i += 1;
                }
            },
            c => {
                value.push(c);
                i += 1;
            }
        }
    }
}

/// The length of a `$'...'` word that starts `text` (after its `$'`), closing quote
/// included.
fn ansi_c_quoted_len(text: &[u8]) -> Option<usize> {
    let mut i = 0;
    loop {
        match *text.get(i)? {
            b'\'' => return Some(i + 1),
            b'\\' => i += 2,
            b'\n' => return None,
            _ => i += 1,
        }
    }
}

/// Names whose value changes how bash itself starts or runs (start-up files, options,
/// the dynamic loader, the C library, the waiting shell's own `read`s): never moved into
/// a shell's environment.
fn read_at_start_up(name: &[u8]) -> bool {
    const NAMES: &[&[u8]] = &[
        b"ENV",
        b"LOCPATH",
        b"NLSPATH",
        b"TZ",
        b"TZDIR",
        b"TMPDIR",
        b"TERMINFO",
        b"TERMCAP",
        b"INPUTRC",
        b"TMOUT",
    ];
    [
        &b"LD_"[..],
        b"GCONV",
        b"MALLOC",
        b"GLIBC",
        b"GMON",
        b"LC_",
        b"LANG",
    ]
    .iter()
    .any(|p| name.starts_with(p))
        || NAMES.contains(&name)
}

/// Largest value, and largest sum of values, moved into a shell's environment: far
/// below what `execve` takes.
const MOVED_VALUE_MAX: usize = 32 << 10;
const MOVED_TOTAL_MAX: usize = 256 << 10;

/// `snapshot` (as [`dump_snapshot`] writes it) made lighter for a shell that starts in
/// exactly `start_env`: the same script less the leading exports that shell already
/// has with the same value, and, when `move_exports`, less the plain exports returned
/// to be added to that environment instead. A shell started in `start_env` with those
/// added, sourcing the script, ends as one started in `start_env` sourcing the whole
/// snapshot: no export line expands anything, so none sees another's value, and every
/// other line is kept in its place. Bash spends several microseconds on each `declare`,
/// and nearly every export is the same from one command to the next.
pub fn lighter_snapshot(
    snapshot: &[u8],
    start_env: &[(std::ffi::OsString, std::ffi::OsString)],
    move_exports: bool,
) -> (Vec<(std::ffi::OsString, std::ffi::OsString)>, Vec<u8>) {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let (lines, exports_end) = leading_exports(snapshot);
    let once = |name: &[u8]| appears_once(&lines, name);
    let inherited = |name: &[u8], value: &[u8]| {
        let mut found = start_env.iter().filter(|(k, _)| k.as_bytes() == name);
        matches!((found.next(), found.next()), (Some((_, v)), None) if v.as_bytes() == value)
    };
    let mut moved = Vec::new();
    let mut moved_size = 0;
    let mut out = Vec::with_capacity(snapshot.len());
    for (range, line) in &lines {
        let name = line.name;
        if let Some(value) = line
            .plain_value
            .as_deref()
            .filter(|_| !set_by_the_shell(name) && once(name))
        {
            if inherited(name, value) {
                continue;
            }
            let fits =
                value.len() <= MOVED_VALUE_MAX && moved_size + value.len() <= MOVED_TOTAL_MAX;
            if move_exports && fits && !read_at_start_up(name) {
                moved_size += value.len();
                moved.push((
                    OsStr::from_bytes(name).to_owned(),
                    OsStr::from_bytes(value).to_owned(),
                ));
                continue;
            }
        }
        out.extend_from_slice(&snapshot[range.clone()]);
    }
    out.extend_from_slice(&snapshot[exports_end..]);
    (moved, out)
}

/// What a bash that forks each of a task's commands (see `env::local::fork_server`) can
/// hold for all of them, out of a restore script [`lighter_snapshot`] made for it: the
/// plain exports of names that change nothing of how that bash itself runs, then the
/// functions, aliases and options. Its commands' shells then source only the rest
/// ([`split_restore`]), a few lines, instead of parsing every definition again for each
/// command, which cost about as much as the fork itself.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Standing {
    /// For `source`: it may end in what an older, longer dump left after its `return`.
    pub script: Vec<u8>,
    exports: Vec<Vec<u8>>,
    functions: Vec<Vec<u8>>,
}

/// `restore` cut into what a waiting bash can hold ([`Standing`]) and what each
/// command's shell sources after its fork, in their order. Sourcing the second in a
/// fork of a bash that sourced the first ends as sourcing `restore` does: no export line
/// expands anything and no definition reads a variable. Exports stay with each command
/// when bash treats their name specially, when they are not plain (`-r`, `-i`, ANSI-C
/// quoted) or come twice; the definitions do when one of them is a function named after
/// a step of the waiting bash (`builtin`, `exec`), which it would run in that step's place.
pub fn split_restore(restore: &[u8]) -> (Standing, Vec<u8>) {
    let (exports, exports_end) = leading_exports(restore);
    let definitions = &restore[exports_end..];
    let mut standing = Standing::default();
    let mut each_command = Vec::new();
    for (range, line) in &exports {
        let name = line.name;
        let held = line.plain_value.is_some()
            && appears_once(&exports, name)
            && !set_by_the_shell(name)
            && !read_at_start_up(name)
            && !name.starts_with(b"__hermes_");
        if held {
            standing.script.extend_from_slice(&restore[range.clone()]);
            standing.exports.push(name.to_vec());
        } else {
            each_command.extend_from_slice(&restore[range.clone()]);
        }
    }
    let functions = function_names(definitions);
    if functions
        .iter()
        .any(|name| WAITING_SHELL_STEPS.contains(&name.as_slice()))
    {
        each_command.extend_from_slice(definitions);
    } else {
        standing.script.extend_from_slice(definitions);
        standing.functions = functions;
    }
    (standing, each_command)
}

/// The commands the waiting bash runs by name (see `env::local::fork_server`): a function
/// of one of these names would run in their place.
const WAITING_SHELL_STEPS: &[&[u8]] = &[b"builtin", b"exec"];

/// The names of the functions `declare -f` printed in `text`: each starts with a line
/// `NAME () ` and a line `{ `. A here-document in a body may hold such lines too; the
/// name is then one more to undefine, which the definitions sourced after put back.
fn function_names(text: &[u8]) -> Vec<Vec<u8>> {
    let lines: Vec<&[u8]> = text.split(|b| *b == b'\n').collect();
    lines
        .windows(2)
        .filter(|pair| pair[1] == b"{ ")
        .filter_map(|pair| pair[0].strip_suffix(b" () "))
        .filter(|name| !name.is_empty())
        .map(<[u8]>::to_vec)
        .collect()
}

impl Standing {
    /// A script that brings a bash started in `start_env` that sourced this back to its
    /// start: no alias, none of these functions, and these exports as `start_env` has
    /// them or unset. Every command is `\builtin`, which no alias can stand for.
    pub fn undo(&self, start_env: &[(std::ffi::OsString, std::ffi::OsString)]) -> Vec<u8> {
        use std::os::unix::ffi::OsStrExt;
        if *self == Standing::default() {
            return Vec::new();
        }
        let mut out = b"\\builtin shopt -u expand_aliases\n\\builtin unalias -a\n".to_vec();
        for name in &self.functions {
            out.extend_from_slice(b"\\builtin unset -f -- ");
            out.extend_from_slice(&sh_quote_bytes(name));
            out.push(b'\n');
        }
        for name in &self.exports {
            out.extend_from_slice(b"\\builtin unset -v ");
            out.extend_from_slice(name);
            out.push(b'\n');
            if let Some((_, value)) = start_env.iter().find(|(k, _)| k.as_bytes() == name) {
                out.extend_from_slice(b"\\builtin export ");
                out.extend_from_slice(name);
                out.push(b'=');
                out.extend_from_slice(&sh_quote_bytes(value.as_bytes()));
                out.push(b'\n');
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;
    use std::process::{Command, Stdio};

    fn env(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v)))
            .collect()
    }

    #[test]
    fn exports_are_read_as_bash_reads_double_quotes() {
        let line = b"declare -x A=\"x \\$ \\` \\\" \\\\ \\n \\\ny\"\nrest";
        let ExportLine {
            len,
            name,
            plain_value,
        } = export_line(line).unwrap();
        assert_eq!(
            (name, plain_value.unwrap().as_slice(), &line[len..]),
            (&b"A"[..], &b"x $ ` \" \\ \\n y"[..], &b"rest"[..])
        );
        for (kept, rest) in [
            (&b"declare -x A=$'a\\nb\\'c'\nrest"[..], &b"rest"[..]),
            (b"declare -rx A=\"1\"\nrest", b"rest"),
            (b"declare -x A\nrest", b"rest"),
        ] {
            let ExportLine {
                len,
                name,
                plain_value,
            } = export_line(kept).unwrap();
            assert!(
                name == b"A" && plain_value.is_none() && &kept[len..] == rest,
                "{}",
                String::from_utf8_lossy(kept)
            );
        }
        for not_an_export in [
            &b"declare -x A=\"$HOME\"\n"[..],
            b"declare -x A=\"`id`\"\n",
            b"declare -x A=\"unterminated\n",
            b"declare -x A=\"1\"; echo\n",
            b"declare -x 1A=\"1\"\n",
            b"declare -x A=$'no end\n'\n",
            b"f () \n",
        ] {
            assert!(
                export_line(not_an_export).is_none(),
                "{}",
                String::from_utf8_lossy(not_an_export)
            );
        }
    }

    const SNAPSHOT: &[u8] = b"declare -x HOME=\"/root\"\ndeclare -x KEPT=\"k\"\ndeclare -x NEW=\"1\"\ndeclare -x PATH=\"/bin\"\n\
        declare -x PWD=\"/w\"\ndeclare -x LD_PRELOAD=\"x.so\"\ndeclare -x TWICE=\"t\"\ndeclare -x ANSI=$'\\001'\ndeclare -x TWICE=\"t\"\n\
        f () \n{ \n    declare -x KEPT=\"k\"\n}\ndeclare -x KEPT=\"k\"\nbuiltin return 0\n";
    const AFTER_THE_EXPORTS: &str =
        "f () \n{ \n    declare -x KEPT=\"k\"\n}\ndeclare -x KEPT=\"k\"\nbuiltin return 0\n";

    #[test]
    fn only_unchanged_inherited_exports_are_left_out() {
        let start = env(&[
            ("HOME", "/root"),
            ("KEPT", "k"),
            ("PATH", "/usr/bin"),
            ("PWD", "/w"),
            ("TWICE", "t"),
        ]);
        let (moved, light) = lighter_snapshot(SNAPSHOT, &start, false);
        assert_eq!(moved, vec![]);
        assert_eq!(
            String::from_utf8(light).unwrap(),
            "declare -x NEW=\"1\"\ndeclare -x PATH=\"/bin\"\ndeclare -x PWD=\"/w\"\ndeclare -x LD_PRELOAD=\"x.so\"\n\
             declare -x TWICE=\"t\"\ndeclare -x ANSI=$'\\001'\ndeclare -x TWICE=\"t\"\n".to_owned()
                + AFTER_THE_EXPORTS
        );
    }

    #[test]
    fn changed_plain_exports_move_into_the_environment_but_what_bash_reads_at_start_up() {
        let start = env(&[
            ("HOME", "/root"),
            ("KEPT", "k"),
            ("PATH", "/usr/bin"),
            ("PWD", "/w"),
        ]);
        let (moved, light) = lighter_snapshot(SNAPSHOT, &start, true);
        assert_eq!(moved, env(&[("NEW", "1"), ("PATH", "/bin")]));
        assert_eq!(
            String::from_utf8(light).unwrap(),
            "declare -x PWD=\"/w\"\ndeclare -x LD_PRELOAD=\"x.so\"\ndeclare -x TWICE=\"t\"\ndeclare -x ANSI=$'\\001'\n\
             declare -x TWICE=\"t\"\n".to_owned()
                + AFTER_THE_EXPORTS
        );
    }

    /// What `bash` started in `start_env` shows of its variables and functions after
    /// sourcing `file`.
    fn state_after_sourcing(file: &std::path::Path, start_env: &[(OsString, OsString)]) -> String {
        state_after(&[file], start_env)
    }

    /// The same after sourcing each of `files` in turn.
    fn state_after(files: &[&std::path::Path], start_env: &[(OsString, OsString)]) -> String {
        let sources: String = files
            .iter()
            .map(|file| {
                format!(
                    "builtin source {} >/dev/null 2>&1; ",
                    sh_quote(&file.to_string_lossy())
                )
            })
            .collect();
        let script = format!("{sources}builtin unset BASH_ARGC BASH_ARGV BASH_LINENO BASH_SOURCE; declare -p; declare -f; alias -p; shopt -p; umask");
        let out = Command::new("bash")
            .args(["--noprofile", "--norc", "-c", &script])
            .env_clear()
            .envs(start_env.iter().cloned())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        // Less what differs between any two runs: the script's own text and the parent.
        let text = String::from_utf8_lossy(&out.stdout);
        text.lines()
            .filter(|l| {
                !l.starts_with("declare -- BASH_EXECUTION_STRING=")
                    && !l.starts_with("declare -ir PPID=")
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn a_shell_sourcing_the_lighter_snapshot_ends_as_one_sourcing_the_whole() {
        let dir = tempfile::tempdir().unwrap();
        let odd = "q\"uo$te`s\\ and \\n, a\ttab, é, and\na newline";
        let start = env(&[
            ("PATH", "/usr/bin:/bin"),
            ("KEEP", "same"),
            ("ODD", odd),
            ("CHANGED", "before"),
            ("GONE", "x"),
            ("LANG", "C.UTF-8"),
        ]);
        // A dump made by bash itself, after a command changed some of the state.
        let whole = dir.path().join("whole.sh");
        let bytes = dump_after(
            "export CHANGED=after NEW='n\"e$w' ANSI=$'\\001'; unset GONE; declare -x EMPTY=; export UNSET_EXPORT; \
             f() { echo \"$1\"; }; alias ll='ls -l'; umask 077",
            &start,
            &whole,
        );
        let expected = state_after_sourcing(&whole, &start);
        assert!(
            ["CHANGED=\"after\"", "f ()", "alias ll="]
                .iter()
                .all(|s| expected.contains(s)),
            "{expected}"
        );
        for move_exports in [false, true] {
            let (moved, light) = lighter_snapshot(&bytes, &start, move_exports);
            assert!(light.len() < bytes.len(), "nothing was left out");
            assert_eq!(moved.len(), if move_exports { 3 } else { 0 }, "{moved:?}");
            let light_path = dir.path().join("light.sh");
            std::fs::write(&light_path, &light).unwrap();
            let mut started_in = start.clone();
            started_in.retain(|(k, _)| !moved.iter().any(|(m, _)| m == k));
            started_in.extend(moved);
            assert_eq!(
                state_after_sourcing(&light_path, &started_in),
                expected,
                "moving exports: {move_exports}"
            );
        }
    }

    /// A snapshot bash dumps in `start_env` after running `command`, written to `path`.
    fn dump_after(
        command: &str,
        start_env: &[(OsString, OsString)],
        path: &std::path::Path,
    ) -> Vec<u8> {
        let script = format!("{command}; {}", dump_snapshot(&path.to_string_lossy()));
        let made = Command::new("bash")
            .args(["--noprofile", "--norc", "-c", &script])
            .env_clear()
            .envs(start_env.iter().cloned())
            .status()
            .unwrap();
        assert!(made.success());
        std::fs::read(path).unwrap()
    }

    fn start_env() -> Vec<(OsString, OsString)> {
        env(&[
            ("ODD", "q\"uo$te`s\\ and \\n, a\ttab, é, it's\na newline"),
            ("PATH", "/usr/bin:/bin"),
            ("KEEP", "same"),
            ("CHANGED", "before"),
            ("GONE", "x"),
            ("LANG", "C.UTF-8"),
        ])
    }

    #[test]
    fn a_fork_of_a_bash_holding_the_standing_part_ends_as_one_sourcing_the_whole() {
        let dir = tempfile::tempdir().unwrap();
        let start = start_env();
        let whole = dir.path().join("whole.sh");
        let bytes = dump_after(
            "export CHANGED=after NEW='n\"e$w' ANSI=$'\\001' LANG=C; unset GONE; declare -ix NUMBER=7; \
             f() { echo \"$1\"; }; g() { cat <<'EOF'\nh () \n{ \nEOF\n}; alias ll='ls -l'; cd /",
            &start,
            &whole,
        );
        let light = lighter_snapshot(&bytes, &start, false).1;
        let (standing, each_command) = split_restore(&light);
        let held = String::from_utf8_lossy(&standing.script);
        let rest = String::from_utf8_lossy(&each_command);
        assert!(
            held.contains("CHANGED=\"after\"")
                && held.contains("f () ")
                && held.contains("alias ll="),
            "{held}"
        );
        // Read by bash itself, not plain, or the directory: with each command.
        for name in ["LANG=", "ANSI=", "NUMBER=", "PWD="] {
            assert!(
                rest.contains(name) && !held.contains(name),
                "{name}: {rest}"
            );
        }
        assert_eq!(
            standing.functions,
            vec![b"f".to_vec(), b"g".to_vec(), b"h".to_vec()]
        );
        let (held_path, rest_path) = (dir.path().join("held.sh"), dir.path().join("rest.sh"));
        std::fs::write(&held_path, &standing.script).unwrap();
        std::fs::write(&rest_path, &each_command).unwrap();
        assert_eq!(
            state_after(&[&held_path, &rest_path], &start),
            state_after_sourcing(&whole, &start)
        );
    }

    #[test]
    fn functions_named_after_the_waiting_bash_steps_stay_with_each_command() {
        let dir = tempfile::tempdir().unwrap();
        let start = start_env();
        for step in ["builtin", "exec"] {
            let dump = dump_after(
                &format!("export NEW=1; f() {{ :; }}; {step}() {{ command {step} \"$@\"; }}"),
                &start,
                &dir.path().join("dump.sh"),
            );
            let (held, each_command) = split_restore(&lighter_snapshot(&dump, &start, false).1);
            assert_eq!(held.script, b"declare -x NEW=\"1\"\n", "{step}");
            assert!(held.functions.is_empty(), "{step}");
            assert!(each_command.windows(5).any(|w| w == b"f () "), "{step}");
        }
    }

    #[test]
    fn undoing_the_standing_part_leaves_the_bash_as_it_started() {
        let dir = tempfile::tempdir().unwrap();
        let start = start_env();
        // Held: changed and new exports, a function, and an alias named builtin.
        let before = dump_after(
            "export CHANGED=after KEEP=other NEW=1 ODD=plain; f() { :; }; alias builtin='echo no' ls='ls -l'",
            &start,
            &dir.path().join("before.sh"),
        );
        let after = dump_after(
            "export LATER=2; later() { :; }",
            &start,
            &dir.path().join("after.sh"),
        );
        let (held_before, _) = split_restore(&lighter_snapshot(&before, &start, false).1);
        assert_eq!(held_before.functions, vec![b"f".to_vec()]);
        let (held_after, rest_after) = split_restore(&lighter_snapshot(&after, &start, false).1);
        let files = [
            ("held_before.sh", held_before.script.clone()),
            ("undo.sh", held_before.undo(&start)),
            ("held_after.sh", held_after.script.clone()),
            ("rest_after.sh", rest_after),
        ];
        for (name, bytes) in &files {
            std::fs::write(dir.path().join(name), bytes).unwrap();
        }
        let paths: Vec<std::path::PathBuf> = files
            .iter()
            .map(|(name, _)| dir.path().join(name))
            .collect();
        let paths: Vec<&std::path::Path> = paths.iter().map(|p| p.as_path()).collect();
        assert_eq!(
            state_after(&paths, &start),
            state_after_sourcing(&dir.path().join("after.sh"), &start)
        );
        assert!(Standing::default().undo(&start).is_empty());
    }
}
