//! What a sandboxed command may do, and turning an argv into a sandboxed one.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// `terminal.sandbox.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Nothing is writable but the launcher's own state directory.
    ReadOnly,
    /// The writable roots (working directory, /tmp, configured roots) are writable.
    WorkspaceWrite,
    /// No sandbox: commands run with the server's own rights.
    Off,
}

impl Mode {
    pub const NAMES: &'static [&'static str] = &["read-only", "workspace-write", "off"];

    pub fn parse(word: &str) -> Result<Mode, String> {
        match word.trim().to_ascii_lowercase().replace('_', "-").as_str() {
            "read-only" | "readonly" => Ok(Mode::ReadOnly),
            "workspace-write" | "" => Ok(Mode::WorkspaceWrite),
            "off" | "false" | "none" | "danger-full-access" => Ok(Mode::Off),
            other => Err(format!(
                "terminal.sandbox.mode '{other}' is not one of {}",
                Mode::NAMES.join(", ")
            )),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Mode::ReadOnly => "read-only",
            Mode::WorkspaceWrite => "workspace-write",
            Mode::Off => "off",
        }
    }
}

/// Why a command could not be sandboxed; its text tells the user how to proceed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxError(pub String);

impl SandboxError {
    pub fn unavailable(why: impl std::fmt::Display) -> SandboxError {
        SandboxError(format!(
            "the command sandbox cannot start: {why}. Commands are not run without it. It needs a \
             kernel that lets unprivileged users make user namespaces (Linux 5.12 or later; on \
             Ubuntu, AppArmor may forbid them: sysctl kernel.apparmor_restrict_unprivileged_userns=0), \
             or Linux 6.12 or later for the weaker wall of Landlock and seccomp alone, \
             or bubblewrap installed (apt-get install bubblewrap); or set \
             `terminal.sandbox.mode: off` in config.yaml to run commands with the server's own rights"
        ))
    }
}

impl std::fmt::Display for SandboxError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SandboxError {}

/// The rules for one environment's commands.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Policy {
    pub mode: Mode,
    /// Writable in `workspace-write` (missing ones are skipped).
    pub writable_roots: Vec<PathBuf>,
    /// Writable in every mode but `off`: the task's own state (its shell snapshot),
    /// bound back inside the hidden places.
    pub state_dirs: Vec<PathBuf>,
    /// Covered by an empty read-only tmpfs: the private directories of the sandbox's own
    /// files ([`crate::run_dir::hidden_places`]), out of every command's sight.
    pub hidden: Vec<PathBuf>,
    /// Read-only even inside a writable root. Shared: every task of a server with the
    /// same configuration and directory gets the same list, which runs to hundreds of
    /// paths.
    pub protected: std::sync::Arc<[crate::ReadOnlyPlace]>,
    /// What the command may reach (see [`crate::network`]).
    pub network: crate::Network,
    /// A read-only empty regular file, bound over protected files that do not exist yet
    /// so they cannot be created (`None`: missing protected files are not covered).
    pub empty_file: Option<PathBuf>,
    /// seccomp programs ([`crate::write_seccomp_programs`]) installed before the
    /// command starts.
    pub seccomp_programs: Vec<PathBuf>,
    /// What one sandbox may consume.
    pub limits: crate::Limits,
}

/// How one command is launched.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WrapOptions<'a> {
    /// Detach from any controlling terminal (pipes); false for pseudo-terminals, whose
    /// session the launcher already set up.
    pub new_session: bool,
    /// The pseudo-terminal the command runs on: visible inside under its own name (and
    /// no other terminal of the host is).
    pub tty: Option<&'a Path>,
    /// The spawn is prepared by [`crate::network::attach`], which makes the network
    /// namespace and serves the proxy. Without it the sandbox gets a namespace with
    /// only loopback (never the host's network), as it does when the network is off.
    pub proxied: bool,
}

impl Policy {
    pub fn is_active(&self) -> bool {
        self.mode != Mode::Off
    }

    /// The argv that runs `argv` (program first) in `cwd` under this policy. With `off`
    /// it is `argv` itself; otherwise a bubblewrap command line, or an error when the
    /// sandbox cannot start here.
    pub fn wrap(
        &self,
        argv: &[OsString],
        cwd: &Path,
        options: WrapOptions<'_>,
    ) -> Result<Vec<OsString>, SandboxError> {
        if !self.is_active() {
            return Ok(argv.to_vec());
        }
        self.wrap_with(argv, || crate::bwrap::arguments(self, cwd, options))
    }

    /// As [`Policy::wrap`] with the bubblewrap options of a layout already worked out
    /// (the one a kept sandbox is then compared against, so it describes exactly the
    /// sandbox started).
    pub(crate) fn wrap_in(
        &self,
        argv: &[OsString],
        layout: &crate::bwrap::Layout,
    ) -> Result<Vec<OsString>, SandboxError> {
        self.wrap_with(argv, || layout.args.clone())
    }

    fn wrap_with(
        &self,
        argv: &[OsString],
        bwrap_options: impl FnOnce() -> Vec<OsString>,
    ) -> Result<Vec<OsString>, SandboxError> {
        if argv.is_empty() {
            return Err(SandboxError("no command to run".into()));
        }
        let entry = crate::bwrap::entry().map_err(SandboxError::unavailable)?;
        if crate::wall::is_wall(&entry) {
            // The wall reads its seccomp programs and sets the limits itself, so it is
            // the program the caller executes (through a descriptor only that child holds).
            let mut out = entry;
            for program in &self.seccomp_programs {
                out.extend(["--seccomp-file".into(), program.clone().into_os_string()]);
            }
            out.extend(self.limits.wall_options());
            out.extend(bwrap_options());
            out.push("--".into());
            out.extend(argv.iter().cloned());
            return Ok(out);
        }
        // The wall reads seccomp programs from file descriptors; a shell opens them, so
        // launchers that close inherited descriptors (pseudo-terminals) work the same.
        // The same shell joins the sandbox's cgroup and sets its resource limits.
        let mut out: Vec<OsString> = Vec::new();
        let limits = self.limits.shell_lines();
        if !self.seccomp_programs.is_empty() || !limits.is_empty() {
            let opens: String = (0..self.seccomp_programs.len())
                .map(|i| format!("exec {}<\"${}\"\n", i + 3, i + 1))
                .collect();
            let script = format!(
                "{limits}{opens}shift {}; exec \"$@\"",
                self.seccomp_programs.len()
            );
            out.extend(["/bin/sh".into(), "-c".into(), script.into(), "sh".into()]);
            out.extend(
                self.seccomp_programs
                    .iter()
                    .map(|p| p.clone().into_os_string()),
            );
        }
        out.extend(entry);
        out.extend(bwrap_options());
        for fd in 0..self.seccomp_programs.len() {
            out.extend(["--add-seccomp-fd".into(), (fd + 3).to_string().into()]);
        }
        out.push("--".into());
        out.extend(argv.iter().cloned());
        Ok(out)
    }

    /// The writable roots a command may write (its state directories aside), resolved
    /// (symlinks followed) and existing.
    pub(crate) fn resolved_writable(
        &self,
        real_paths: &mut crate::real_paths::RealPaths,
    ) -> Vec<PathBuf> {
        let mut roots: Vec<PathBuf> = Vec::new();
        let candidates: &[PathBuf] = match self.mode {
            Mode::WorkspaceWrite => &self.writable_roots,
            Mode::ReadOnly | Mode::Off => &[],
        };
        for root in candidates {
            if let Some(real) = real_paths.existing(root) {
                if real != Path::new("/") && !roots.contains(&real) {
                    roots.push(real);
                }
            }
        }
        // Outer roots first, so a nested root is mounted on top of its parent.
        roots.sort_by_key(|p| p.components().count());
        roots
    }
}
