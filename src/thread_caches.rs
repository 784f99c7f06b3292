//! The long-lived commands (`serve`, `mcp`, `agent`, `cron`) run without glibc's
//! per-thread caches of freed blocks.
//!
//! A task that cools down frees what it held (see `hermes_environments::env::cool_idle`)
//! and the server gives the freed pages back with `malloc_trim`. A block kept in a
//! thread's cache is not free to the heap, though: it pins its page, and every thread
//! that ran calls keeps up to seven blocks of each small size, scattered over pages the
//! rest of which was freed. With many idle tasks that was most of what each one cost
//! (measured in `benches/many_tasks.rs`). glibc reads the size of those caches only from
//! `GLIBC_TUNABLES`, when a program starts, so the command starts itself once more with
//! it set, and then puts the variable back as it was: the commands it runs inherit the
//! caller's environment, not this setting.

use std::ffi::OsString;

/// Set across the second start: what `GLIBC_TUNABLES` was (`=` and the value), or
/// nothing when it was unset.
const BEFORE: &str = "HERMES_TOOLS_GLIBC_TUNABLES_BEFORE";
const NO_THREAD_CACHES: &str = "glibc.malloc.tcache_count=0";

/// For a long-lived command, starts this program again with the thread caches off (once;
/// it returns when that cannot be done, or in the second start).
pub fn off_for_long_lived_commands() {
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
    // A caller who sets the caches' size gets theirs.
    let set_by_caller = tunables
        .as_deref()
        .and_then(|t| t.to_str())
        .is_some_and(|t| t.contains("glibc.malloc.tcache_count"));
    if !long_lived || set_by_caller || program.is_none() {
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
    with_ours.push(NO_THREAD_CACHES);
    use std::os::unix::process::CommandExt;
    // Only an error returns; the command then runs with the caches.
    let _ = std::process::Command::new("/proc/self/exe")
        .arg0(program.unwrap_or_default())
        .args(std::env::args_os().skip(1))
        .env("GLIBC_TUNABLES", with_ours)
        .env(BEFORE, before)
        .exec();
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
