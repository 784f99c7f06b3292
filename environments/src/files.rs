//! Files inside a task's environment when its terminal runs elsewhere (docker, ssh,
//! singularity, modal, daytona, vercel_sandbox), for the file tools: every look at a
//! file and every change is a short POSIX shell script run through the environment, so
//! the files are the ones `terminal` sees there. Content travels base64-encoded, so it
//! arrives byte for byte over every transport (pipes, ssh, JSON bodies), and every write
//! is compare-and-swap: the script checks, under `flock` where the environment has it,
//! that the file still holds what the edit was computed from before it renames the new
//! content over it.
//!
//! The environment needs bash, coreutils (`realpath`, `stat`, `base64`, `sha256sum`,
//! `head`, `mv`, `mkdir`, `chmod`, `dirname`, `ls`, `tr`) and, for search_files, `rg`
//! or GNU grep and find.

use crate::config::TerminalConfig;
use crate::env::{self, sh_quote, ReadEvent, Slot};
use base64::Engine;
use hermes_runtime::ToolContext;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

/// Largest file read through an environment: the content crosses the transport whole.
pub const MAX_REMOTE_READ_BYTES: u64 = 16 << 20;
/// Base64 bytes per upload on a backend whose stdin is carried in the command line.
const UPLOAD_CHUNK: usize = 48 * 1024;
/// Longest wait for one file script.
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(120);
/// Starts the structured part of a script's output; what comes before is diagnostics.
const MARK: &str = "__HERMES_FILE_RESULT_5b1d__";

/// The task's environment when its terminal backend is not `local`, created on first use
/// as `terminal` would; `None` on the local backend.
pub fn for_task(ctx: &ToolContext) -> Option<Result<Remote, String>> {
    let backend = configured_backend(ctx.hermes_home());
    if backend == "local" {
        return None;
    }
    Some(connect(ctx))
}

fn connect(ctx: &ToolContext) -> Result<Remote, String> {
    let config = TerminalConfig::load(ctx.hermes_home())?;
    if !env::BACKENDS.contains(&config.backend.as_str()) {
        return Err(env::unknown_backend(&config.backend).reason);
    }
    if let Some(missing) = env::availability(&config) {
        return Err(format!(
            "the {} terminal backend is not available: {missing}",
            config.backend
        ));
    }
    let slot = env::get_or_create(&config, ctx.task_id(), ctx.cwd()).map_err(|e| {
        format!(
            "the {} environment could not be reached: {}",
            config.backend, e.reason
        )
    })?;
    Ok(Remote { slot })
}

/// The backend the configuration names, cached by config.yaml's mtime and size and
/// `TERMINAL_ENV`, so a file call on the local backend costs no look at the file
/// beyond the one its dispatch made.
fn configured_backend(hermes_home: &Path) -> String {
    type Key = (PathBuf, Option<(SystemTime, u64)>, Option<String>);
    static CACHE: OnceLock<Mutex<Option<(Key, String)>>> = OnceLock::new();
    let file = hermes_runtime::config::Config::path_in(hermes_home);
    let stamp = match hermes_runtime::config::call_config() {
        Some(config) if config.path == file => config.signature,
        _ => hermes_runtime::config::file_signature(&file),
    };
    let key: Key = (file, stamp, std::env::var("TERMINAL_ENV").ok());
    let cache = CACHE.get_or_init(Default::default);
    if let Some((cached, backend)) = cache.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
        if *cached == key {
            return backend.clone();
        }
    }
    // A configuration that cannot be read is not the local backend: `connect` reports it.
    let backend = TerminalConfig::load(hermes_home)
        .map(|c| c.backend)
        .unwrap_or_else(|_| "unreadable".into());
    *cache.lock().unwrap_or_else(|p| p.into_inner()) = Some((key, backend.clone()));
    backend
}

/// A file as the environment sees it.
#[derive(Clone, Debug)]
pub struct Probe {
    /// The home directory inside the environment (`$HOME`, else the account's); empty
    /// when it has none.
    pub home: String,
    /// The task's working directory there, every symlink followed.
    pub base: String,
    /// Where it really lands: every symlink followed (a dangling one to where it points).
    pub real: String,
    pub kind: Kind,
    pub len: u64,
    pub mtime: Option<SystemTime>,
    /// The content (regular files read with `want_content`, within the read cap).
    pub content: Option<Vec<u8>>,
    /// Names in the parent directory (for a missing file's "did you mean").
    pub siblings: Vec<String>,
    /// Ancestors of the file that do not exist yet.
    pub missing_dirs: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Missing,
    File,
    Dir,
    /// A FIFO, socket or device node.
    Special,
}

/// One file of a commit: what it must hold now (`None`: must not exist) and what it is
/// to hold after (`None`: deleted).
pub struct Change<'a> {
    pub target: &'a str,
    pub base: Option<&'a [u8]>,
    pub data: Option<&'a [u8]>,
}

/// One file of a finished commit.
#[derive(Debug, Clone, Copy)]
pub struct Written {
    /// The bytes read back match what was sent (or the file is gone, for a deletion).
    pub verified: bool,
    pub len: u64,
    pub mtime: Option<SystemTime>,
}

/// What a commit did.
#[derive(Debug)]
pub enum Committed {
    /// Written, per file in order.
    Done(Vec<Written>),
    /// Some file no longer holds its base: nothing was written.
    BaseChanged,
}

pub struct Remote {
    slot: Arc<Slot>,
}

impl Remote {
    pub fn backend(&self) -> &'static str {
        self.slot.env.backend()
    }

    /// The key the file tools' task state uses for a path of this environment.
    pub fn state_key(&self, real: &str) -> PathBuf {
        PathBuf::from(format!("{}:{real}", self.backend()))
    }

    /// Looks at `shown` (absolute, `~/...`, or relative to the task's working directory),
    /// and reads it when `want_content` and it is a regular file of at most
    /// [`MAX_REMOTE_READ_BYTES`].
    pub fn probe(&self, shown: &str, want_content: bool) -> Result<Probe, String> {
        let script = format!(
            "{locate}\n\
             __r=$(realpath -m -- \"$__p\") || exit 2\n\
             __b=$(realpath -m -- \"$__c\") || exit 2\n\
             if [ -d \"$__r\" ]; then __k=dir; elif [ -f \"$__r\" ]; then __k=file; \
             elif [ -e \"$__r\" ] || [ -L \"$__p\" ]; then __k=special; else __k=missing; fi\n\
             __s='0 0'; [ \"$__k\" = missing ] || __s=$(stat -L -c '%s %.9Y' -- \"$__r\" 2>/dev/null) || __s='0 0'\n\
             __n=0; __x=$(dirname -- \"$__r\"); while [ ! -e \"$__x\" ] && [ \"$__x\" != / ]; do __n=$((__n+1)); __x=$(dirname -- \"$__x\"); done\n\
             printf '\\n%s\\n' {mark}\n\
             printf '%s\\0%s\\0%s\\0%s\\0%s\\0%s\\0' \"$__h\" \"$__b\" \"$__r\" \"$__k\" \"$__s\" \"$__n\"\n\
             if [ \"$__k\" = missing ]; then ls -1A -- \"$(dirname -- \"$__r\")\" 2>/dev/null | head -n 500 | tr '\\n' '\\0'; fi\n\
             printf '\\0'\n\
             if [ {want} = 1 ] && [ \"$__k\" = file ] && [ \"${{__s%% *}}\" -le {cap} ]; then \
             printf 'content\\0'; head -c {cap} -- \"$__r\" | base64 -w0; fi\n",
            locate = self.locate_script(shown),
            mark = MARK,
            want = u8::from(want_content),
            cap = MAX_REMOTE_READ_BYTES,
        );
        let out = self.run(&script, None)?;
        let mut fields = out.split(|b| *b == 0);
        let mut next = || {
            fields
                .next()
                .map(|f| String::from_utf8_lossy(f).into_owned())
                .unwrap_or_default()
        };
        let (home, base, real, kind, stat) = (next(), next(), next(), next(), next());
        let missing_dirs = next().parse().unwrap_or(0);
        let kind = match kind.as_str() {
            "file" => Kind::File,
            "dir" => Kind::Dir,
            "special" => Kind::Special,
            "missing" => Kind::Missing,
            other => {
                return Err(format!(
                    "the {} environment gave an unexpected answer about {shown}: {other:?}",
                    self.backend()
                ))
            }
        };
        let (len, mtime) = parse_stat(&stat);
        let mut siblings = Vec::new();
        loop {
            let name = next();
            if name.is_empty() {
                break;
            }
            siblings.push(name);
        }
        let content = match next().as_str() {
            "content" => Some(
                base64::engine::general_purpose::STANDARD
                    .decode(next().trim())
                    .map_err(|e| {
                        format!(
                            "the content of {shown} arrived damaged from the {} environment: {e}",
                            self.backend()
                        )
                    })?,
            ),
            _ => None,
        };
        Ok(Probe {
            home,
            base,
            real,
            kind,
            len,
            mtime,
            content,
            siblings,
            missing_dirs,
        })
    }

    /// Writes every change or none: each file must still hold its base (checked under
    /// `flock` of its directory where the environment has `flock`), then the new contents
    /// are renamed over (missing directories created, permissions kept) and deletions made.
    pub fn commit(&self, changes: &[Change<'_>]) -> Result<Committed, String> {
        let tag = crate::output::random_hex(12);
        let tmp = self.slot.env.temp_dir();
        let chunked = self.slot.env.stdin_in_command_line();
        let mut script = String::from("__fail() { printf '%s\\n' \"$1\" >&2; exit 1; }\n");
        let mut checks = String::new();
        let mut writes = String::new();
        let mut report = format!("printf '\\n%s\\n' {MARK}\n");
        let last_data = changes.iter().rposition(|c| c.data.is_some());
        let mut stdin = None;
        for (i, change) in changes.iter().enumerate() {
            let upload = sh_quote(&format!("{tmp}/hermes-upload-{tag}-{i}"));
            let target = sh_quote(change.target);
            script.push_str(&format!(
                "__t{i}={target}; __d{i}=$(dirname -- \"$__t{i}\"); __n{i}=0; __x=\"$__d{i}\"; \
                 while [ ! -e \"$__x\" ] && [ \"$__x\" != / ]; do __n{i}=$((__n{i}+1)); __x=$(dirname -- \"$__x\"); done\n"
            ));
            let expected = change.base.map(sha256_hex).unwrap_or_else(|| "none".into());
            checks.push_str(&format!(
                "if [ -e \"$__t{i}\" ] || [ -L \"$__t{i}\" ]; then __h=$(sha256sum < \"$__t{i}\") || __fail \"cannot read $__t{i}\"; \
                 __h=${{__h%% *}}; else __h=none; fi\n\
                 [ \"$__h\" = {expected} ] || {{ rm -f -- {all_uploads}; printf '\\n%s\\nchanged\\0' {MARK}; exit 0; }}\n",
                all_uploads = (0..changes.len())
                    .map(|j| sh_quote(&format!("{tmp}/hermes-upload-{tag}-{j}")))
                    .collect::<Vec<_>>()
                    .join(" "),
            ));
            match change.data {
                Some(data) => {
                    let encoded = base64::engine::general_purpose::STANDARD.encode(data);
                    let parts: Vec<&str> = if chunked {
                        encoded
                            .as_bytes()
                            .chunks(UPLOAD_CHUNK)
                            .map(|c| std::str::from_utf8(c).unwrap_or(""))
                            .collect()
                    } else {
                        vec![encoded.as_str()]
                    };
                    // The last piece of the last file rides on the commit itself.
                    let (carried, separate) = match parts.split_last() {
                        Some((last, rest)) if Some(i) == last_data => (Some(*last), rest),
                        _ => (None, parts.as_slice()),
                    };
                    for part in separate {
                        self.run(
                            &format!("umask 077; cat >> {upload} && printf '\\n%s\\n' {MARK}"),
                            Some(part.as_bytes().to_vec()),
                        )?;
                    }
                    if let Some(last) = carried {
                        stdin = Some(last.as_bytes().to_vec());
                        script.insert_str(0, &format!("(umask 077; cat >> {upload}) || exit 1\n"));
                    }
                    writes.push_str(&format!(
                        "mkdir -p -- \"$__d{i}\" || __fail \"cannot create the directories of $__t{i}\"\n\
                         __tmp=\"$__d{i}/.${{__t{i}##*/}}.hermes-tmp-$$-{i}\"\n\
                         base64 -d < {upload} > \"$__tmp\" || {{ rm -f -- \"$__tmp\"; __fail \"cannot write $__t{i}\"; }}\n\
                         rm -f -- {upload}\n\
                         if [ -e \"$__t{i}\" ]; then chmod --reference=\"$__t{i}\" -- \"$__tmp\" 2>/dev/null; fi\n\
                         mv -f -- \"$__tmp\" \"$__t{i}\" || {{ rm -f -- \"$__tmp\"; __fail \"cannot write $__t{i}\"; }}\n"
                    ));
                    report.push_str(&format!(
                        "__h=$(sha256sum < \"$__t{i}\"); printf '%s %s %s\\0' \"$__n{i}\" \"${{__h%% *}}\" \"$(stat -L -c '%s %.9Y' -- \"$__t{i}\")\"\n"
                    ));
                }
                None => {
                    writes.push_str(&format!(
                        "rm -f -- \"$__t{i}\" || __fail \"cannot delete $__t{i}\"\n"
                    ));
                    report.push_str("printf '0 deleted 0 0\\0'\n");
                }
            }
        }
        // One lock for the whole commit, on the first file's nearest existing directory.
        if !changes.is_empty() {
            script.push_str(
                "__l=\"$__d0\"; while [ ! -d \"$__l\" ]; do __l=$(dirname -- \"$__l\"); done\n\
                 if command -v flock >/dev/null 2>&1; then exec 9<\"$__l\" && flock -x -w 60 9 || __fail 'another edit holds the lock'; fi\n",
            );
        }
        script.push_str(&checks);
        script.push_str(&writes);
        script.push_str(&report);
        let out = self.run(&script, stdin)?;
        if out.starts_with(b"changed\0") {
            return Ok(Committed::BaseChanged);
        }
        let mut done = Vec::new();
        for (field, change) in out.split(|b| *b == 0).zip(changes) {
            let field = String::from_utf8_lossy(field);
            let mut parts = field.splitn(3, ' ');
            let _created = parts.next();
            let hash = parts.next().unwrap_or("");
            let (len, mtime) = parse_stat(parts.next().unwrap_or(""));
            let verified = match change.data {
                Some(data) => hash == sha256_hex(data),
                None => hash == "deleted",
            };
            done.push(Written {
                verified,
                len,
                mtime,
            });
        }
        Ok(Committed::Done(done))
    }

    /// Runs `rg`, else GNU grep, for search_files; the raw `path\0N:line` / `path\0N-line`
    /// rows (ripgrep's and grep's `--null` format), at most `max_rows`. grep runs inside
    /// the root (its paths are then relative to it), because its exclusion of hidden
    /// directories would also match a hidden directory above the root.
    pub fn grep(
        &self,
        root: &str,
        pattern: &str,
        context: usize,
        max_rows: usize,
    ) -> Result<Vec<u8>, String> {
        let script = format!(
            "printf '\\n%s\\n' {MARK}\n\
             set -f\n\
             if command -v rg >/dev/null 2>&1; then \
             rg --no-config --no-messages -n --with-filename --null --no-heading --color never --sort path \
             -C {context} -e {pattern} -- {root} | head -n {max_rows}; exit 0; fi\n\
             if [ -d {root} ]; then cd -- {root} || exit 2; __o='--exclude=.* --exclude-dir=.?*'; set --; else __o=; set -- {root}; fi\n\
             {{ grep -rnIH --null -P -C {context} $__o -e {pattern} -- \"$@\" 2>/dev/null; \
             if [ $? -eq 2 ]; then grep -rnIH --null -E -C {context} $__o -e {pattern} -- \"$@\" 2>/dev/null; fi; }} \
             | head -n {max_rows}\n\
             exit 0\n",
            pattern = sh_quote(pattern),
            root = sh_quote(root),
        );
        self.run(&script, None)
    }

    /// Every file under `root` (hidden ones and, with `rg`, ignored ones skipped) as
    /// `mtime\tpath\0`, at most `max` of them.
    pub fn list_files(&self, root: &str, max: usize) -> Result<Vec<u8>, String> {
        let script = format!(
            "printf '\\n%s\\n' {MARK}\n\
             if command -v rg >/dev/null 2>&1; then rg --no-config --no-messages --files --null --sort path -- {root} \
             | head -z -n {max} | xargs -0 -r stat -c '%.9Y\t%n' -- | tr '\\n' '\\0'; \
             else find {root} -mindepth 0 \\( -name '.*' -a ! -path {root} \\) -prune -o -type f -printf '%T@\\t%p\\0' 2>/dev/null \
             | head -z -n {max}; fi\nexit 0\n",
            root = sh_quote(root),
        );
        self.run(&script, None)
    }

    /// The shell prelude that sets `$__c` (the task's working directory) and `$__p`
    /// (`shown` with `~` expanded and made absolute against it).
    fn locate_script(&self, shown: &str) -> String {
        format!(
            "__h=$HOME; [ -n \"$__h\" ] || __h=$(unset HOME; echo ~); case \"$__h\" in /*) ;; *) __h=;; esac\n\
             __home() {{ [ -n \"$__h\" ] || {{ echo 'this environment has no home directory: give an absolute path' >&2; exit 2; }}; }}\n\
             __c={cwd}; case \"$__c\" in '~') __home; __c=$__h;; '~/'*) __home; __c=\"$__h/${{__c#'~/'}}\";; esac\n\
             __p={path}; case \"$__p\" in '~') __home; __p=$__h;; '~/'*) __home; __p=\"$__h/${{__p#'~/'}}\";; /*) ;; *) __p=\"$__c/$__p\";; esac",
            cwd = sh_quote(&self.slot.session.cwd()),
            path = sh_quote(shown),
        )
    }

    /// Runs `script` in the environment and returns what it printed after [`MARK`], or
    /// why it failed.
    fn run(&self, script: &str, stdin: Option<Vec<u8>>) -> Result<Vec<u8>, String> {
        *self
            .slot
            .last_used
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Instant::now();
        let mut run = self.slot.env.run_bash(script, false, stdin).map_err(|e| {
            format!(
                "the {} environment could not run the file operation: {}",
                self.backend(),
                e.reason
            )
        })?;
        let deadline = Instant::now() + SCRIPT_TIMEOUT;
        let mut out = Vec::new();
        let mut eof = false;
        let code = loop {
            if !eof {
                match run.read(Duration::from_millis(20)) {
                    ReadEvent::Data(bytes) => out.extend_from_slice(&bytes),
                    ReadEvent::Eof => eof = true,
                    ReadEvent::Idle => {}
                }
            } else {
                std::thread::sleep(Duration::from_millis(1));
            }
            if eof {
                if let Some(code) = run.try_wait() {
                    break code;
                }
            }
            if Instant::now() >= deadline {
                run.kill(Duration::from_millis(500));
                return Err(format!(
                    "the file operation in the {} environment took longer than {} s and was stopped",
                    self.backend(),
                    SCRIPT_TIMEOUT.as_secs()
                ));
            }
        };
        let marker = format!("\n{MARK}\n");
        let found = memchr::memmem::rfind(&out, marker.as_bytes());
        match found {
            Some(at) if code == 0 => Ok(out.split_off(at + marker.len())),
            _ => {
                let text = String::from_utf8_lossy(&out);
                let text = text.split(MARK).next().unwrap_or("").trim();
                let text: String = text.chars().take(500).collect();
                Err(format!(
                    "the file operation failed in the {} environment (exit {code}){}",
                    self.backend(),
                    if text.is_empty() {
                        String::new()
                    } else {
                        format!(": {text}")
                    }
                ))
            }
        }
    }
}

/// `len mtime` as `stat -c '%s %.9Y'` prints them.
fn parse_stat(stat: &str) -> (u64, Option<SystemTime>) {
    let mut parts = stat.split_whitespace();
    let len = parts.next().and_then(|s| s.parse().ok()).unwrap_or(0);
    let mtime = parts
        .next()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|s| *s > 0.0)
        .map(|s| SystemTime::UNIX_EPOCH + Duration::from_secs_f64(s));
    (len, mtime)
}

/// `mtime\tpath\0` rows as (path, mtime).
pub fn parse_listing(rows: &[u8]) -> Vec<(String, SystemTime)> {
    rows.split(|b| *b == 0)
        .filter(|row| !row.is_empty())
        .filter_map(|row| {
            let row = String::from_utf8_lossy(row);
            let (mtime, path) = row.split_once('\t')?;
            let (_, mtime) = parse_stat(&format!("0 {mtime}"));
            Some((path.to_string(), mtime.unwrap_or(SystemTime::UNIX_EPOCH)))
        })
        .collect()
}

fn sha256_hex(data: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Devices and kernel files, by where they are inside the environment (the same places
/// the local file tools refuse).
pub fn is_device_path(real: &str) -> bool {
    let under = |root: &str| real == root || real.starts_with(&format!("{root}/"));
    (under("/dev") && !under("/dev/shm")) || under("/proc") || under("/sys")
}

/// Serialises the edits of one path of one environment within this process (the
/// environment's own `flock` covers other processes at the final compare-and-swap).
pub struct PathLock {
    keys: Vec<String>,
}

fn lock_table() -> &'static (Mutex<std::collections::HashSet<String>>, Condvar) {
    static HELD: OnceLock<(Mutex<std::collections::HashSet<String>>, Condvar)> = OnceLock::new();
    HELD.get_or_init(Default::default)
}

/// Takes the in-process edit lock of every path (real paths inside the environment).
pub fn lock_paths(remote: &Remote, paths: &[String]) -> PathLock {
    let (held, wake) = lock_table();
    let mut keys: Vec<String> = paths
        .iter()
        .map(|p| remote.state_key(p).to_string_lossy().into_owned())
        .collect();
    keys.sort();
    keys.dedup();
    let mut set = held.lock().unwrap_or_else(|p| p.into_inner());
    while keys.iter().any(|k| set.contains(k)) {
        set = wake.wait(set).unwrap_or_else(|p| p.into_inner());
    }
    set.extend(keys.iter().cloned());
    PathLock { keys }
}

impl Drop for PathLock {
    fn drop(&mut self) {
        let (held, wake) = lock_table();
        let mut set = held.lock().unwrap_or_else(|p| p.into_inner());
        for key in &self.keys {
            set.remove(key);
        }
        EDITS_DONE.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        wake.notify_all();
    }
}

static EDITS_DONE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// How many locked edits of this process have finished: an edit that looked at its
/// files before taking the lock looks again when this moved meanwhile.
pub fn edits_done() -> u64 {
    EDITS_DONE.load(std::sync::atomic::Ordering::SeqCst)
}
