//! The places no tool may write: credentials, the runtime's own configuration and
//! state, what shells, git, language tool chains and session managers load at
//! start-up, and system directories; and the secrets no tool may read.
//!
//! One list serves every door, through [`crate::access::AccessPolicy`]: the file tools
//! ask it before each write and read; an OS sandbox takes [`ProtectedPaths::places`] as
//! the places it mounts read-only and [`deny_read_places`] as the ones it hides. The
//! command detector's path vocabulary
//! (`command-guard/src/rules/paths.rs`) names the same families as regex fragments.
//!
//! Paths are compared after [`resolve`]: made absolute, `.`/`..` folded, every symlink
//! on the way (a dangling one at the end included) followed. The list itself is
//! resolved the same way, so a `$HOME` that is a symlink still matches.

use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

/// Why a place is protected; decides the wording of a refusal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// Keys, tokens and passwords of the user (`~/.ssh`, `~/.aws`, `.netrc`, ...).
    Credential,
    /// The runtime's own configuration, secrets and state under `$HERMES_HOME`:
    /// writing them would grant permissions or falsify history.
    Runtime,
    /// Files a shell, git, a language tool chain or a session manager loads or runs at
    /// start-up: writing them runs code in the next shell, outside any sandbox.
    ShellStartup,
    /// Operating-system directories (`/etc`, `/usr`, `/boot`, ...).
    System,
}

/// Whether a place is one file or a whole directory tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Extent {
    File,
    Tree,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProtectedPlace {
    /// Absolute and resolved.
    pub path: PathBuf,
    pub extent: Extent,
    pub family: Family,
}

impl ProtectedPlace {
    /// Whether `resolved` is this place or (for a tree) inside it.
    pub fn covers(&self, resolved: &Path) -> bool {
        match self.extent {
            Extent::File => resolved == self.path,
            Extent::Tree => resolved.starts_with(&self.path),
        }
    }
}

/// Why a write was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The path is (inside) a protected place.
    Protected { place: PathBuf, family: Family },
    /// `HERMES_WRITE_SAFE_ROOT` is set and the path lies outside every root in it.
    OutsideSafeRoots { roots: Vec<PathBuf> },
    /// The path lies outside every writable root of the access policy.
    OutsideWritableRoots { roots: Vec<PathBuf> },
    /// The path is (inside) a place on the deny-read list.
    ReadDenied { place: PathBuf },
}

impl Refusal {
    /// A sentence for the model, naming the path as it was given.
    pub fn message(&self, verb: &str, shown: &str) -> String {
        match self {
            Refusal::Protected { family, .. } => {
                let what = match family {
                    Family::Credential => "a protected credential file",
                    Family::Runtime => "part of the runtime's own configuration, secrets or state",
                    Family::ShellStartup => {
                        "loaded at start-up by a shell, git, a tool chain or the session manager"
                    }
                    Family::System => "a protected system location",
                };
                format!("{verb} denied: '{shown}' is {what}; no tool writes there.")
            }
            Refusal::OutsideSafeRoots { roots } => {
                let list: Vec<String> = roots.iter().map(|r| r.display().to_string()).collect();
                format!(
                    "{verb} denied: '{shown}' is outside HERMES_WRITE_SAFE_ROOT ({}). Unset the variable or add this path's directory to it.",
                    list.join(":")
                )
            }
            Refusal::OutsideWritableRoots { roots } => {
                let list: Vec<String> = roots.iter().map(|r| r.display().to_string()).collect();
                format!(
                    "{verb} denied: '{shown}' is outside the writable roots ({}): the working directory, the temp \
                     directory and terminal.sandbox.writable_roots, the same places commands may write. Write inside \
                     them, or ask the user to add the folder to terminal.sandbox.writable_roots in config.yaml.",
                    if list.is_empty() { "none: terminal.sandbox.mode is read-only".to_string() } else { list.join(", ") }
                )
            }
            Refusal::ReadDenied { .. } => format!(
                "{verb} denied: '{shown}' holds credentials or the runtime's secrets (the deny-read list); no tool \
                 reads it and commands see it empty. The user reads it outside the agent."
            ),
        }
    }
}

/// Credential places under the home directory.
const HOME_CREDENTIAL_TREES: &[&str] = &[
    ".ssh",
    ".aws",
    ".gnupg",
    ".kube",
    ".docker",
    ".azure",
    ".config/gcloud",
    ".config/gh",
];
const HOME_CREDENTIAL_FILES: &[&str] = &[
    ".netrc",
    ".pgpass",
    ".npmrc",
    ".pypirc",
    ".git-credentials",
    ".cargo/credentials",
    ".cargo/credentials.toml",
];
/// Files shells, login sessions, git, editors and tool chains load when they start.
const SHELL_STARTUP_FILES: &[&str] = &[
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".bash_aliases",
    ".profile",
    ".login",
    ".logout",
    ".cshrc",
    ".tcshrc",
    ".kshrc",
    ".mkshrc",
    ".inputrc",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".zlogin",
    ".zlogout",
    ".pam_environment",
    ".xprofile",
    ".xsession",
    ".xsessionrc",
    ".xinitrc",
    ".gitconfig",
    ".gitattributes",
    ".hgrc",
    ".curlrc",
    ".wgetrc",
    ".vimrc",
    ".exrc",
    ".emacs",
    ".tmux.conf",
    ".screenrc",
    ".pythonrc",
    ".pythonrc.py",
    ".cargo/env",
    ".cargo/env.fish",
    ".cargo/config",
    ".cargo/config.toml",
    ".yarnrc",
    ".pip/pip.conf",
];
/// Directories whose every file is loaded or run at start-up (or put first on PATH).
/// The sandbox holds a missing one with an empty read-only directory (made on the host
/// when the home is a writable root), so installers that refuse an existing folder
/// (oh-my-zsh, rustup) are left out.
const SHELL_STARTUP_TREES: &[&str] = &[
    ".bashrc.d",
    ".zshrc.d",
    ".config/fish",
    ".config/git",
    ".config/autostart",
    ".config/systemd",
    ".config/environment.d",
    ".config/pip",
    ".config/nvim",
    ".config/direnv",
    ".vim",
    ".emacs.d",
    ".local/bin",
    ".local/share/systemd",
    ".cargo/bin",
    // Python user site-packages: usercustomize, sitecustomize and .pth files run in
    // every interpreter the user starts.
    ".local/lib",
    ".bin",
    "bin",
];
/// Under `$HERMES_HOME` (and the default `~/.hermes` when it differs).
const RUNTIME_FILES: &[&str] = &[
    "config.yaml",
    ".env",
    "auth.json",
    "auth.lock",
    ".anthropic_oauth.json",
    "mcp_server_token",
    "webhook_subscriptions.json",
    "state.db",
    crate::config::GRANTS_FILE,
];
/// Trees under `$HERMES_HOME`: tokens, pairings, transcripts, and plugins (code the
/// runtime loads on its next start).
/// `cron` holds scheduled jobs (which run with the operator's provider keys) and their
/// outputs: only the cronjob tool writes there.
const RUNTIME_TREES: &[&str] = &[
    "auth",
    "mcp-tokens",
    "pairing",
    "sessions",
    "plugins",
    "cron",
];
/// Operating-system directories (Linux and macOS spellings).
const SYSTEM_TREES: &[&str] = &[
    "/etc",
    "/boot",
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/sys",
    "/proc",
    "/private/etc",
    "/System",
    "/Library",
    "/var/lib",
    "/var/spool",
    "/var/log",
    "/var/cache",
    "/var/backups",
    "/var/mail",
    "/var/local",
    "/var/opt",
    "/run",
    "/snap",
];

/// Secrets no tool reads and the sandbox hides, under the home directory: keys and
/// tokens of the user, cloud, container and package-manager credentials, keyrings.
const HOME_SECRET_TREES: &[&str] = &[
    ".ssh",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".gnupg",
    ".password-store",
    ".local/share/keyrings",
    ".config/gh",
];
const HOME_SECRET_FILES: &[&str] = &[
    ".kube/config",
    ".docker/config.json",
    ".netrc",
    ".npmrc",
    ".pypirc",
    ".pgpass",
    ".git-credentials",
    ".vault-token",
    ".cargo/credentials",
    ".cargo/credentials.toml",
];
/// The runtime's own secrets and other sessions' data under `$HERMES_HOME`.
const RUNTIME_SECRET_FILES: &[&str] = &[
    ".env",
    "mcp_server_token",
    "auth.json",
    ".anthropic_oauth.json",
    "state.db",
    "state.db-wal",
    "state.db-shm",
];
const RUNTIME_SECRET_TREES: &[&str] = &["auth", "mcp-tokens", "pairing", "sessions"];

/// The deny-read list for one home directory and one `$HERMES_HOME` (and the default
/// `~/.hermes` when it differs). Every path is resolved.
pub fn deny_read_places(home: &Path, hermes_home: &Path) -> Vec<ProtectedPlace> {
    let mut places = Vec::new();
    let mut resolver = Resolver::default();
    let mut add = |base: &Path, names: &[&str], extent: Extent| {
        for name in names {
            places.push(ProtectedPlace {
                path: resolver.resolve(base, name),
                extent,
                family: Family::Credential,
            });
        }
    };
    add(home, HOME_SECRET_TREES, Extent::Tree);
    add(home, HOME_SECRET_FILES, Extent::File);
    for base in runtime_bases(home, hermes_home) {
        add(&base, RUNTIME_SECRET_FILES, Extent::File);
        add(&base, RUNTIME_SECRET_TREES, Extent::Tree);
    }
    places.dedup();
    places
}

/// A place the operator added to the deny-read list: a file, or else a whole tree.
pub fn deny_read_place(path: &Path) -> ProtectedPlace {
    let path = resolve(path);
    let extent = if path.is_file() {
        Extent::File
    } else {
        Extent::Tree
    };
    ProtectedPlace {
        path,
        extent,
        family: Family::Credential,
    }
}

/// `$HERMES_HOME`, and the default `~/.hermes` when it is another place.
fn runtime_bases(home: &Path, hermes_home: &Path) -> Vec<PathBuf> {
    let default_root = home.join(".hermes");
    let mut bases = vec![hermes_home.to_path_buf()];
    if resolve(&default_root) != resolve(hermes_home) {
        bases.push(default_root);
    }
    bases
}

/// The protected places for one home directory and one `$HERMES_HOME`, plus the
/// optional `HERMES_WRITE_SAFE_ROOT` allow-list.
#[derive(Clone, Debug)]
pub struct ProtectedPaths {
    places: Vec<ProtectedPlace>,
    safe_roots: Vec<PathBuf>,
}

impl ProtectedPaths {
    /// The list for `home` and `hermes_home`, without safe roots.
    pub fn new(home: &Path, hermes_home: &Path) -> ProtectedPaths {
        let mut places = Vec::new();
        let mut resolver = Resolver::default();
        let mut add = |base: &Path, names: &[&str], extent: Extent, family: Family| {
            for name in names {
                places.push(ProtectedPlace {
                    path: resolver.resolve(base, name),
                    extent,
                    family,
                });
            }
        };
        add(
            home,
            HOME_CREDENTIAL_TREES,
            Extent::Tree,
            Family::Credential,
        );
        add(
            home,
            HOME_CREDENTIAL_FILES,
            Extent::File,
            Family::Credential,
        );
        add(
            home,
            SHELL_STARTUP_FILES,
            Extent::File,
            Family::ShellStartup,
        );
        add(
            home,
            SHELL_STARTUP_TREES,
            Extent::Tree,
            Family::ShellStartup,
        );
        for base in &runtime_bases(home, hermes_home) {
            add(base, RUNTIME_FILES, Extent::File, Family::Runtime);
            add(base, RUNTIME_TREES, Extent::Tree, Family::Runtime);
        }
        add(Path::new("/"), SYSTEM_TREES, Extent::Tree, Family::System);
        places.dedup();
        ProtectedPaths {
            places,
            safe_roots: Vec::new(),
        }
    }

    /// Confines writes to the roots of a `:`-separated list (empty entries ignored; an
    /// empty or absent list confines nothing).
    pub fn with_safe_roots(mut self, list: Option<OsString>) -> ProtectedPaths {
        self.safe_roots = list
            .map(|list| {
                std::env::split_paths(&list)
                    .filter(|p| !p.as_os_str().is_empty())
                    .map(|p| resolve(&p))
                    .collect()
            })
            .unwrap_or_default();
        self
    }

    /// Every protected place, resolved: what a sandbox makes read-only.
    pub fn places(&self) -> &[ProtectedPlace] {
        &self.places
    }

    pub fn safe_roots(&self) -> &[PathBuf] {
        &self.safe_roots
    }

    /// Why a write to `resolved` (an output of [`resolve`]) must be refused, if it must.
    pub fn write_refusal(&self, resolved: &Path) -> Option<Refusal> {
        if let Some(place) = self.places.iter().find(|place| place.covers(resolved)) {
            return Some(Refusal::Protected {
                place: place.path.clone(),
                family: place.family,
            });
        }
        if !self.safe_roots.is_empty()
            && !self
                .safe_roots
                .iter()
                .any(|root| resolved.starts_with(root))
        {
            return Some(Refusal::OutsideSafeRoots {
                roots: self.safe_roots.clone(),
            });
        }
        None
    }

    /// [`resolve`] then [`ProtectedPaths::write_refusal`].
    pub fn check_write(&self, path: &Path) -> Option<Refusal> {
        self.write_refusal(&resolve(path))
    }
}

/// Symlinks followed before a path is called unresolvable (as the kernel's limit).
const MAX_LINK_HOPS: usize = 40;

/// Where `path` really points: absolute (against the process's directory when
/// relative), `.` and `..` folded, every symlink on the way followed, a dangling
/// final link followed to where it points. The part that does not exist yet is kept
/// as written. Never fails: a link loop leaves the path as far as it got.
pub fn resolve(path: &Path) -> PathBuf {
    let mut current = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .unwrap_or_else(|_| PathBuf::from("/"))
            .join(path)
    };
    let mut hops = 0;
    'outer: loop {
        current = fold_dots(&current);
        // The longest prefix that exists, resolved by the kernel; the rest appended.
        let mut missing: Vec<OsString> = Vec::new();
        let mut probe = current.clone();
        loop {
            if let Ok(real) = std::fs::canonicalize(&probe) {
                let mut out = real;
                out.extend(missing.iter().rev());
                return out;
            }
            // A dangling symlink: follow it by hand and start over.
            if let Ok(meta) = std::fs::symlink_metadata(&probe) {
                if meta.file_type().is_symlink() && hops < MAX_LINK_HOPS {
                    if let Ok(target) = std::fs::read_link(&probe) {
                        hops += 1;
                        let parent = probe
                            .parent()
                            .map(Path::to_path_buf)
                            .unwrap_or_else(|| PathBuf::from("/"));
                        let mut next = parent.join(target);
                        next.extend(missing.iter().rev());
                        current = next;
                        continue 'outer;
                    }
                }
            }
            match (probe.parent(), probe.file_name()) {
                (Some(parent), Some(name)) => {
                    missing.push(name.to_os_string());
                    probe = parent.to_path_buf();
                }
                _ => return current,
            }
        }
    }
}

/// [`resolve`] of `base.join(name)` for many names below a few bases: each base is
/// resolved once, and a name below it costs one `lstat` per component (most of these
/// places do not exist, and the first missing component ends the walk) instead of a
/// `realpath` of the whole path and of each parent in turn. A component that is a
/// symlink sends the name the whole way through [`resolve`]. A task's environment
/// resolves about a hundred such places when it is made.
#[derive(Default)]
struct Resolver {
    bases: Vec<(PathBuf, PathBuf)>,
}

impl Resolver {
    fn resolve(&mut self, base: &Path, name: &str) -> PathBuf {
        // An absolute name stands below `/` whatever the base (as `Path::join` has it).
        let (base, name) = match name.strip_prefix('/') {
            Some(below_root) => (Path::new("/"), below_root),
            None => (base, name),
        };
        let real_base = match self.bases.iter().find(|(given, _)| given == base) {
            Some((_, real)) => real.clone(),
            None => {
                let real = resolve(base);
                self.bases.push((base.to_path_buf(), real.clone()));
                real
            }
        };
        let mut walked = real_base;
        let mut parts = Path::new(name).components();
        for part in parts.by_ref() {
            let Component::Normal(part) = part else {
                return resolve(&base.join(name));
            };
            walked.push(part);
            match std::fs::symlink_metadata(&walked) {
                Ok(meta) if meta.file_type().is_symlink() => return resolve(&base.join(name)),
                Ok(_) => {}
                // Missing (or out of reach): the rest stays as written, as in `resolve`.
                Err(_) => break,
            }
        }
        walked.extend(parts);
        walked
    }
}

/// `/a/./b/../c` -> `/a/c` without looking at the disk; `..` never climbs above `/`.
fn fold_dots(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                if out.parent().is_some() {
                    out.pop();
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn the_resolver_finds_what_resolve_finds() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        std::fs::create_dir_all(real.join(".config/git")).unwrap();
        std::fs::create_dir_all(real.join("elsewhere/inner")).unwrap();
        std::fs::write(real.join(".bashrc"), "").unwrap();
        std::fs::write(real.join("file"), "").unwrap();
        symlink(real.join("elsewhere"), real.join(".ssh")).unwrap();
        symlink(real.join("nowhere/yet"), real.join(".aws")).unwrap();
        symlink("elsewhere/inner", real.join(".kube")).unwrap();
        // The base itself reached through a link.
        let linked_base = dir.path().join("home");
        symlink(&real, &linked_base).unwrap();
        let names = [
            ".bashrc",
            ".profile",
            ".config/git",
            ".config/git/config",
            ".config/fish",
            ".ssh",
            ".ssh/id_ed25519",
            ".aws/credentials",
            ".kube/config",
            "file/below",
            "/etc",
            "/lib",
            "/no/such/place",
        ];
        for base in [&real, &linked_base] {
            let mut resolver = Resolver::default();
            for name in names {
                assert_eq!(
                    resolver.resolve(base, name),
                    resolve(&base.join(name)),
                    "{name} below {}",
                    base.display()
                );
            }
        }
    }

    fn setup() -> (tempfile::TempDir, PathBuf, PathBuf, ProtectedPaths) {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let hermes = dir.path().join("hermes");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(&hermes).unwrap();
        let list = ProtectedPaths::new(&home, &hermes);
        (dir, home, hermes, list)
    }

    #[test]
    fn credential_runtime_and_system_places_are_refused() {
        let (_dir, home, hermes, list) = setup();
        for path in [
            home.join(".ssh/authorized_keys"),
            home.join(".ssh"),
            home.join(".aws/credentials"),
            home.join(".config/gcloud/credentials.db"),
            home.join(".kube/config"),
            home.join(".docker/config.json"),
            home.join(".netrc"),
            home.join(".git-credentials"),
            home.join(".bashrc"),
            hermes.join("config.yaml"),
            hermes.join(".env"),
            hermes.join("auth.json"),
            hermes.join("mcp_server_token"),
            hermes.join("plugins/evil/plugin.yaml"),
            home.join(".hermes/config.yaml"),
            PathBuf::from("/etc/passwd"),
            PathBuf::from("/usr/local/bin/tool"),
            PathBuf::from("/boot/grub/grub.cfg"),
        ] {
            assert!(
                list.check_write(&path).is_some(),
                "{} should be refused",
                path.display()
            );
        }
        for path in [
            home.join("project/main.rs"),
            home.join(".sshx"),
            hermes.join("skills/mine/SKILL.md"),
        ] {
            assert_eq!(
                list.check_write(&path),
                None,
                "{} should be allowed",
                path.display()
            );
        }
    }

    #[test]
    fn symlinks_and_dots_are_seen_through() {
        let (dir, home, hermes, list) = setup();
        let work = dir.path().join("work");
        std::fs::create_dir_all(&work).unwrap();
        symlink(hermes.join("config.yaml"), work.join("dangling")).unwrap();
        symlink(&home, work.join("homelink")).unwrap();
        assert!(list.check_write(&work.join("dangling")).is_some());
        assert!(list
            .check_write(&work.join("homelink/.ssh/id_rsa"))
            .is_some());
        assert!(list.check_write(&work.join("../home/./.netrc")).is_some());
        assert_eq!(
            resolve(&work.join("dangling")),
            resolve(&hermes).join("config.yaml")
        );
    }

    #[test]
    fn safe_roots_confine_writes() {
        let (dir, home, _hermes, list) = setup();
        let root = dir.path().join("root");
        std::fs::create_dir_all(&root).unwrap();
        let list = list.with_safe_roots(Some(OsString::from(format!("{}:", root.display()))));
        assert_eq!(list.check_write(&root.join("a/b.txt")), None);
        assert!(matches!(
            list.check_write(&home.join("x.txt")),
            Some(Refusal::OutsideSafeRoots { .. })
        ));
        assert!(list.check_write(&dir.path().join("rootless/x")).is_some());
    }

    #[test]
    fn link_loops_end() {
        let dir = tempfile::tempdir().unwrap();
        symlink(dir.path().join("b"), dir.path().join("a")).unwrap();
        symlink(dir.path().join("a"), dir.path().join("b")).unwrap();
        let _ = resolve(&dir.path().join("a/x"));
    }
}
