//! The long-lived commands (`serve`, `mcp`, `agent`, `cron`) run with glibc's allocator
//! set to give back what idle tasks freed.
//!
//! A task that cools down frees what it held (see `hermes_environments::env::cool_idle`)
//! and the server gives the freed pages back with `malloc_trim`. Three of glibc's habits
//! keep such pages anyway, each measured in `benches/many_tasks.rs` as most of what an
//! idle task cost:
//! - Per-thread caches of freed blocks: a block kept in one is not free to the heap, and
//!   every thread that ran calls keeps up to seven blocks of each small size, scattered
//!   over pages the rest of which was freed.
//! - Fast bins: a freed small block stays apart from its free neighbours until the
//!   allocator happens to sweep them together, so it never joins the free space at the
//!   end of its heap, and that free space is what gets handed back.
//! - The end of a heap is handed back only beyond a threshold and a pad (128 KiB each
//!   here, and the threshold rises by itself once a large block was freed), and
//!   `malloc_trim` never cuts the end of a thread's own heap (an arena's). A thread that
//!   ran calls while many tasks were warm kept that high-water mark for good: 456 KiB
//!   free at the end of its heap.
//!
//! Without the caches and the fast bins, a freed block joins its free neighbours at once,
//! and a free that leaves 64 KiB or more at the end of a heap cuts that back to 32 KiB.
//! glibc reads the caches' size only from `GLIBC_TUNABLES`, when a program starts, so the
//! command starts itself once more with the settings in that variable, and then puts it
//! back as it was: the commands it runs inherit the caller's environment, not these
//! settings. A caller who sets one of them in `GLIBC_TUNABLES` gets theirs.

use std::ffi::OsString;

/// Set across the second start: what `GLIBC_TUNABLES` was (`=` and the value), or
/// nothing when it was unset.
const BEFORE: &str = "HERMES_TOOLS_GLIBC_TUNABLES_BEFORE";
/// Each setting as a tunable's name and value.
const SETTINGS: [(&str, &str); 4] = [
    ("glibc.malloc.tcache_count", "0"),
    ("glibc.malloc.mxfast", "0"),
    ("glibc.malloc.trim_threshold", "32768"),
    ("glibc.malloc.top_pad", "32768"),
];

/// For a long-lived command, starts this program again with the allocator's settings
/// (once; it returns when that cannot be done, or in the second start).
pub fn tune_for_long_lived_commands() {
    if !cfg!(all(target_os = "linux", target_env = "gnu")) {
        return;
    }
    let program = std::env::args_os().next();
    if let Some(before) = std::env::var_os(BEFORE) {
        restore(before, program);
        return;
    }
    let long_lived = crate::cli::command_is(&["serve", "mcp", "agent", "cron"]);
    let tunables = std::env::var_os("GLIBC_TUNABLES");
    let ours = settings_not_set_by(tunables.as_deref().and_then(|t| t.to_str()));
    if !long_lived || ours.is_empty() || program.is_none() {
        return;
    }
    let mut before = OsString::new();
    let mut with_ours = OsString::new();
    if let Some(tunables) = &tunables {
        before.push("=");
        before.push(tunables);
        with_ours.push(tunables);
        with_ours.push(":");
    }
    with_ours.push(ours);
    use std::os::unix::process::CommandExt;
    // Only an error returns; the command then runs with glibc's defaults.
    let _ = std::process::Command::new("/proc/self/exe")
        .arg0(program.unwrap_or_default())
        .args(std::env::args_os().skip(1))
        .env("GLIBC_TUNABLES", with_ours)
        .env(BEFORE, before)
        .exec();
}

/// The settings the caller's `GLIBC_TUNABLES` does not name, as `name=value` pairs
/// joined by `:`. A variable that is not text names none.
fn settings_not_set_by(tunables: Option<&str>) -> String {
    let named: Vec<&str> = tunables
        .into_iter()
        .flat_map(|t| t.split(':'))
        .filter_map(|setting| setting.split_once('=').map(|(name, _)| name))
        .collect();
    SETTINGS
        .iter()
        .filter(|(name, _)| !named.contains(name))
        .map(|(name, value)| format!("{name}={value}"))
        .collect::<Vec<_>>()
        .join(":")
}

fn restore(before: OsString, program: Option<OsString>) {
    use std::os::unix::ffi::OsStrExt;
    // Started through /proc/self/exe (the very image that ran, not whatever the path
    // names by now), the process would be called `exe`: it takes the name it was
    // started by again.
    if let Some(name) = program
        .as_deref()
        .and_then(|program| std::path::Path::new(program).file_name())
        .and_then(|name| std::ffi::CString::new(name.as_bytes()).ok())
    {
        // SAFETY: a NUL-terminated string; the kernel copies at most 15 bytes of it.
        unsafe { libc::prctl(libc::PR_SET_NAME, name.as_ptr()) };
    }
    std::env::remove_var(BEFORE);
    match before.as_bytes().strip_prefix(b"=") {
        Some(value) => std::env::set_var("GLIBC_TUNABLES", std::ffi::OsStr::from_bytes(value)),
        None => std::env::remove_var("GLIBC_TUNABLES"),
    }
}
