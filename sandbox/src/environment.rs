//! The environment a sandboxed (or any) child starts with: an allow-list, so the
//! server's provider keys and tokens never reach a command by default.

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
