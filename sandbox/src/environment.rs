//! What a sandboxed (or any) child starts with: an environment from an allow-list, so
//! the server's provider keys and tokens never reach a command by default, and no
//! descriptor the server was handed by whoever started it.

use std::ffi::OsString;

/// Names every child gets from the server's environment when set.
pub const ALLOWED_NAMES: &[&str] = &[
    "PATH",
    "HOME",
    "LANG",
    "LANGUAGE",
    "TERM",
    "USER",
    "LOGNAME",
    "SHELL",
    "TMPDIR",
    "TZ",
    "COLORTERM",
];

/// Whether `name` passes without being listed in `terminal.env_passthrough`.
pub fn is_allowed_name(name: &str) -> bool {
    ALLOWED_NAMES.contains(&name) || name.starts_with("LC_")
}

/// The allowed subset of `vars`, plus the names in `passthrough`.
pub fn child_env(
    vars: impl IntoIterator<Item = (OsString, OsString)>,
    passthrough: &[String],
) -> Vec<(OsString, OsString)> {
    vars.into_iter()
        .filter(|(name, _)| {
            name.to_str()
                .is_some_and(|n| is_allowed_name(n) || passthrough.iter().any(|p| p == n))
        })
        .collect()
}

/// Marks every descriptor this process holds above standard error close-on-exec. Called
/// first thing (before anything of ours is open), it keeps from every child what the
/// process that started this one left open without that flag: a file it had open for
/// writing, its end of a pipe, a socket to its own services. A child that is handed one
/// reaches through it whatever its walls keep it from by path, and the sandbox's own
/// placements (see `launcher`) must not meet a stranger at the numbers they use.
/// Everything this process opens itself closes on exec already.
pub fn keep_inherited_descriptors_from_children() {
    // SAFETY: close_range only changes flags of this process's own descriptors.
    let marked = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    } == 0;
    if marked {
        return;
    }
    // Before Linux 5.11: each open descriptor in turn.
    let Ok(open) = std::fs::read_dir("/proc/self/fd") else {
        return;
    };
    let numbers: Vec<i32> = open
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
        .filter(|fd| *fd > 2)
        .collect();
    for fd in numbers {
        // SAFETY: setting a flag on a descriptor number; a closed one is an error only.
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v)))
            .collect()
    }

    #[test]
    fn secrets_are_dropped_unless_passed_through() {
        let input = vars(&[
            ("PATH", "/bin"),
            ("OPENAI_API_KEY", "sk-1"),
            ("LC_ALL", "C"),
            ("MY_TOKEN", "t"),
        ]);
        let names = |out: Vec<(OsString, OsString)>| {
            out.into_iter()
                .map(|(k, _)| k.into_string().unwrap())
                .collect::<Vec<_>>()
        };
        assert_eq!(names(child_env(input.clone(), &[])), ["PATH", "LC_ALL"]);
        assert_eq!(
            names(child_env(input, &["MY_TOKEN".into()])),
            ["PATH", "LC_ALL", "MY_TOKEN"]
        );
    }
}
