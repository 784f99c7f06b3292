//! What one sandbox may consume: processes, memory, file size and CPU time
//! (`terminal.sandbox.limits.*`), so a fork bomb or a runaway allocation in one task
//! leaves the server and the other tasks answering.
//!
//! Two mechanisms, both set up by the host process that becomes bubblewrap, before it
//! starts (so nothing inside can undo them, and every launcher shares them):
//!
//! - a cgroup of its own per sandbox, under this server's (`hermes-tools-<pid>`) in the
//!   caller's cgroup, where the kernel lets us make one: cgroup v2 when the caller's
//!   cgroup already hands the `pids` (and `memory`) controllers to its children (the
//!   root cgroup, or a delegated one the caller is not a leaf process of), else a
//!   writable v1 `pids` hierarchy. `pids.max` bounds every process and
//!   thread of the sandbox together, `memory.max` (v2) their memory together;
//! - resource limits (set with the shell's `ulimit`, hard and soft): per process data
//!   size (`RLIMIT_DATA`, private writable memory), file size, CPU seconds, and a
//!   process count (`RLIMIT_NPROC`). The kernel counts the latter per user across the
//!   machine and exempts root, so it is set to the machine's current number of tasks
//!   plus the limit: it stops a fork bomb of a normal user without breaking a user who
//!   already runs many processes; for root only the cgroup bounds processes.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// `terminal.sandbox.limits`; `None` is unlimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Limits {
    /// Processes and threads of one command together (`max_processes`).
    pub max_processes: Option<u64>,
    /// MiB of memory: per process, and of the whole command where a cgroup holds it
    /// (`max_memory_mb`).
    pub max_memory_mb: Option<u64>,
    /// MiB one file may grow to (`max_file_size_mb`).
    pub max_file_size_mb: Option<u64>,
    /// CPU seconds one process may use (`max_cpu_seconds`).
    pub max_cpu_seconds: Option<u64>,
}

impl Default for Limits {
    /// Generous enough for builds, test suites and package installs.
    fn default() -> Limits {
        Limits {
            max_processes: Some(1024),
            max_memory_mb: Some(8192),
            max_file_size_mb: Some(8192),
            max_cpu_seconds: Some(3600),
        }
    }
}

impl Limits {
    pub const NONE: Limits = Limits {
        max_processes: None,
        max_memory_mb: None,
        max_file_size_mb: None,
        max_cpu_seconds: None,
    };

    /// The same limits as options of the built-in wall ([`crate::wall`]), which joins
    /// the cgroups and sets the resource limits itself before it makes the namespaces.
    pub(crate) fn wall_options(&self) -> Vec<std::ffi::OsString> {
        let mut options: Vec<std::ffi::OsString> = Vec::new();
        for procs in new_cgroup(self) {
            options.push("--cgroup-procs".into());
            options.push(procs.into_os_string());
        }
        let mut rlimit = |name: &str, soft: u64, hard: u64| {
            options.push("--rlimit".into());
            options.push(format!("{name}={soft}:{hard}").into());
        };
        const MIB: u64 = 1024 * 1024;
        if let Some(mb) = self.max_memory_mb {
            rlimit("data", mb.saturating_mul(MIB), mb.saturating_mul(MIB));
        }
        if let Some(seconds) = self.max_cpu_seconds {
            rlimit("cpu", seconds, seconds.saturating_add(5));
        }
        if let Some(mb) = self.max_file_size_mb {
            rlimit("fsize", mb.saturating_mul(MIB), mb.saturating_mul(MIB));
        }
        if let Some(n) = self.max_processes {
            let budget = machine_tasks().saturating_add(n);
            rlimit("nproc", budget, budget);
        }
        options
    }

    /// Shell lines (for the `/bin/sh` bubblewrap is started from) that put the shell in
    /// a fresh cgroup of this server's and set the resource limits; on failure the
    /// shell exits 125 with a message, so a command never runs without them.
    pub(crate) fn shell_lines(&self) -> String {
        let mut lines = String::new();
        let fail = |what: &str| {
            format!(" || {{ echo 'the command sandbox cannot {what}' >&2; exit 125; }}\n")
        };
        for procs in new_cgroup(self) {
            // As the wall joins (see `wall::join_cgroup`): the shell has one thread.
            match procs.parent().map(|dir| dir.join("tasks")) {
                Some(tasks) if tasks.exists() => {
                    lines.push_str(&format!("echo 0 > {}", quote(&tasks)))
                }
                _ => lines.push_str(&format!("echo $$ > {}", quote(&procs))),
            }
            lines.push_str(&fail("join its cgroup"));
        }
        // One limit per `ulimit` (dash takes one). dash counts file size in 512-byte
        // blocks and processes with -p; bash in KiB and with -u.
        let mut common: Vec<String> = Vec::new();
        if let Some(mb) = self.max_memory_mb {
            common.push(format!("-d {}", mb.saturating_mul(1024)));
        }
        if let Some(seconds) = self.max_cpu_seconds {
            // SIGXCPU at the limit (the shell reports "CPU time limit exceeded"), SIGKILL
            // a little later for a process that ignores it.
            common.push(format!("-S -t {seconds}"));
            common.push(format!("-H -t {}", seconds.saturating_add(5)));
        }
        let (mut bash, mut dash) = (common.clone(), common);
        if let Some(mb) = self.max_file_size_mb {
            bash.push(format!("-f {}", mb.saturating_mul(1024)));
            dash.push(format!("-f {}", mb.saturating_mul(2048)));
        }
        if let Some(n) = self.max_processes {
            let budget = machine_tasks().saturating_add(n);
            bash.push(format!("-u {budget}"));
            dash.push(format!("-p {budget}"));
        }
        if bash.is_empty() {
            return lines;
        }
        let each = |flags: &[String]| {
            flags
                .iter()
                .map(|f| format!("ulimit {f}"))
                .collect::<Vec<_>>()
                .join(" && ")
        };
        lines.push_str(&format!(
            "if [ -n \"${{BASH_VERSION-}}\" ]; then {}; else {}; fi",
            each(&bash),
            each(&dash)
        ));
        lines.push_str(&fail("set its resource limits"));
        lines
    }
}

impl Limits {
    /// When a command's end shows it ran into one of these limits (its exit status, or
    /// what its programs print when the kernel refuses), what was reached and the key
    /// that raises it.
    pub fn reached(&self, exit_code: i32, output: &str) -> Option<String> {
        let signal = |n: i32| exit_code == 128 + n || exit_code == -n;
        let line_with = |words: &[&str]| {
            output.lines().any(|line| {
                let lower = line.to_ascii_lowercase();
                words.iter().any(|w| lower.contains(w))
            })
        };
        let forks_refused = output.lines().any(|line| {
            let lower = line.to_ascii_lowercase();
            lower.contains("resource temporarily unavailable")
                && ["fork", "clone", "thread", "spawn", "blockingioerror"]
                    .iter()
                    .any(|w| lower.contains(w))
        });
        let (what, key, value, unit) =
            if signal(libc::SIGXFSZ) || line_with(&["file size limit exceeded"]) {
                (
                    "a file grew past",
                    "max_file_size_mb",
                    self.max_file_size_mb,
                    " MiB",
                )
            } else if signal(libc::SIGXCPU) || line_with(&["cpu time limit exceeded"]) {
                (
                    "a process used more CPU time than",
                    "max_cpu_seconds",
                    self.max_cpu_seconds,
                    " s",
                )
            } else if forks_refused {
                (
                    "the command started more processes and threads than",
                    "max_processes",
                    self.max_processes,
                    "",
                )
            } else if line_with(&[
                "cannot allocate memory",
                "memoryerror",
                "out of memory",
                "memory allocation of",
                "bad_alloc",
            ]) {
                (
                    "a process asked for more memory than",
                    "max_memory_mb",
                    self.max_memory_mb,
                    " MiB",
                )
            } else {
                return None;
            };
        let limit = value?;
        Some(format!(
            "Limit of the sandbox reached: {what} the limit of {limit}{unit} \
             (terminal.sandbox.limits.{key}). The command was stopped there, and the server and other tasks \
             were not affected. If the work needs more, the user can raise terminal.sandbox.limits.{key} in \
             config.yaml (0 means no limit)."
        ))
    }
}

fn quote(path: &Path) -> String {
    format!("'{}'", path.to_string_lossy().replace('\'', r"'\''"))
}

/// Tasks (processes and threads) on the machine now, from `/proc/loadavg`.
fn machine_tasks() -> u64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|text| {
            let field = text.split_whitespace().nth(3)?;
            field.split('/').nth(1)?.parse().ok()
        })
        .unwrap_or(0)
}

/// Where this server makes its sandboxes' cgroups, found once.
struct CgroupHome {
    /// `hermes-tools-<pid>` in the caller's cgroup.
    dir: PathBuf,
    /// cgroup v2 with the `memory` controller: `memory.max` is set too.
    v2_memory: bool,
}

impl CgroupHome {
    /// The cgroup of the sandbox numbered `number`.
    fn sandbox_dir(&self, number: u64) -> PathBuf {
        self.dir.join(format!("s{number}"))
    }
}

/// Found (and the server's cgroup made) on first use.
static HOME: OnceLock<Option<CgroupHome>> = OnceLock::new();

fn cgroup_home() -> Option<&'static CgroupHome> {
    HOME.get_or_init(find_cgroup_home).as_ref()
}

fn find_cgroup_home() -> Option<CgroupHome> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    // (the caller's cgroup, v2, v2 with memory)
    let mut candidates: Vec<(PathBuf, bool, bool)> = Vec::new();
    for line in own.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let path = path.trim_start_matches('/');
        if controllers.is_empty() {
            if let Some(mount) = mount_of(&mounts, |fstype, _| fstype == "cgroup2") {
                let dir = mount.join(path);
                let enabled =
                    std::fs::read_to_string(dir.join("cgroup.subtree_control")).unwrap_or_default();
                let words: Vec<&str> = enabled.split_whitespace().collect();
                if words.contains(&"pids") {
                    candidates.insert(0, (dir, true, words.contains(&"memory")));
                }
            }
        } else if controllers.split(',').any(|c| c == "pids") {
            let mount = mount_of(&mounts, |fstype, options| {
                fstype == "cgroup" && options.split(',').any(|o| o == "pids")
            });
            if let Some(mount) = mount {
                candidates.push((mount.join(path), false, false));
            }
        }
    }
    candidates.into_iter().find_map(|(parent, v2, v2_memory)| {
        remove_cgroups_of_dead_servers(&parent);
        let dir = parent.join(format!("hermes-tools-{}", std::process::id()));
        match std::fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(_) => return None,
        }
        // The server's own group has no processes; its children get the controllers.
        if v2 {
            let controllers = if v2_memory { "+pids +memory" } else { "+pids" };
            let _ = std::fs::write(dir.join("cgroup.subtree_control"), controllers);
        }
        dir.join("pids.max")
            .exists()
            .then_some(CgroupHome { dir, v2_memory })
    })
}

/// The mount point of the first mount whose filesystem type and super options pass.
fn mount_of(mountinfo: &str, wanted: impl Fn(&str, &str) -> bool) -> Option<PathBuf> {
    mountinfo.lines().find_map(|line| {
        let (before, after) = line.split_once(" - ")?;
        let mut after = after.split_whitespace();
        let (fstype, _source, options) = (after.next()?, after.next()?, after.next()?);
        let mount = before.split_whitespace().nth(4)?;
        wanted(fstype, options).then(|| PathBuf::from(mount))
    })
}

/// A fresh cgroup with the limits set, for one sandbox; the `cgroup.procs` files to
/// join (none where no cgroup can be made). Emptied cgroups of earlier sandboxes are
/// removed first.
fn new_cgroup(limits: &Limits) -> Vec<PathBuf> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    if limits.max_processes.is_none() && limits.max_memory_mb.is_none() {
        return Vec::new();
    }
    let Some(home) = cgroup_home() else {
        return Vec::new();
    };
    remove_ended_cgroups(false);
    let number = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = home.sandbox_dir(number);
    if std::fs::create_dir(&dir).is_err() {
        return Vec::new();
    }
    made().push_back((number, Instant::now()));
    if let Some(n) = limits.max_processes {
        let _ = std::fs::write(dir.join("pids.max"), n.to_string());
    }
    if let (true, Some(mb)) = (home.v2_memory, limits.max_memory_mb) {
        let _ = std::fs::write(dir.join("memory.max"), (mb << 20).to_string());
        let _ = std::fs::write(dir.join("memory.swap.max"), "0");
    }
    vec![dir.join("cgroup.procs")]
}

/// The cgroups made for sandboxes (by number, see [`CgroupHome::sandbox_dir`]: no
/// allocation of its own for each, which a server with many idle tasks would hold
/// scattered over its heap), oldest look first, with when each was made or last found
/// still in use.
fn made() -> std::sync::MutexGuard<'static, std::collections::VecDeque<(u64, Instant)>> {
    static MADE: Mutex<std::collections::VecDeque<(u64, Instant)>> =
        Mutex::new(std::collections::VecDeque::new());
    MADE.lock().unwrap_or_else(|p| p.into_inner())
}

/// A cgroup is empty from when it is made until its shell joins it: only older ones
/// are taken for ended.
const JOIN_GRACE: Duration = Duration::from_secs(60);

/// The most cgroups one sandbox start tries to remove: more ended ones than it makes,
/// and never one try per live sandbox (which made each start slower as they piled up).
const REMOVED_PER_START: usize = 4;

/// Removes the cgroups of sandboxes that have ended (one with a process in it cannot
/// be removed; it is looked at again a grace period later); `all`: every one, young
/// ones too (the server ends).
fn remove_ended_cgroups(all: bool) {
    let Some(home) = cgroup_home() else {
        return;
    };
    let remove = |number: u64| std::fs::remove_dir(home.sandbox_dir(number)).is_ok();
    let mut made = made();
    if all {
        made.retain(|(number, _)| !remove(*number));
        return;
    }
    for _ in 0..REMOVED_PER_START {
        match made.front() {
            Some((_, at)) if at.elapsed() >= JOIN_GRACE => {}
            _ => return,
        }
        let Some((number, _)) = made.pop_front() else {
            return;
        };
        if !remove(number) {
            made.push_back((number, Instant::now()));
        }
    }
}

/// Removes every cgroup in `home` that has no process.
fn remove_empty_cgroups(home: &Path) {
    let Ok(entries) = std::fs::read_dir(home) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            let _ = std::fs::remove_dir(entry.path());
        }
    }
}

/// Cgroups left by servers that ended without removing them.
fn remove_cgroups_of_dead_servers(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("hermes-tools-"))
            .and_then(|pid| pid.parse::<libc::pid_t>().ok())
        else {
            continue;
        };
        if crate::run_dir::is_gone(pid) {
            remove_empty_cgroups(&entry.path());
            let _ = std::fs::remove_dir(entry.path());
        }
    }
}

/// At the server's end: its cgroups, once their sandboxes have ended.
pub(crate) fn remove_cgroups() {
    // Only looks: nothing is made at the end.
    if let Some(Some(home)) = HOME.get() {
        remove_ended_cgroups(true);
        let _ = std::fs::remove_dir(&home.dir);
    }
}
