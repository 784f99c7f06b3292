//! Where write_file and patch look and write: this machine's disk ([`HostDisk`], the
//! path and write modules as they are), or the task's environment when its terminal runs
//! elsewhere ([`EnvDisk`], through [`super::remote`]). The edit logic above is the same for
//! both, so results, refusals and limits match.

use super::guard::Stamp;
use super::{paths, v4a, write};
use hermes_environments::files::{Change, Committed, Kind, Probe, Remote, MAX_REMOTE_READ_BYTES};
use hermes_runtime::access::AccessPolicy;
use hermes_runtime::protected_paths::ProtectedPaths;
use hermes_runtime::ToolContext;
use std::cell::RefCell;
use std::collections::HashMap;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A held edit lock (released when dropped).
pub trait Held {}
impl<T> Held for T {}

pub trait Disk {
    /// Where an edit of `shown` lands, or why it is refused (devices, protected places).
    fn write_target(&self, ctx: &ToolContext, shown: &str, verb: &str) -> Result<PathBuf, String>;
    fn is_dir(&self, target: &Path) -> bool;
    /// Makes (or, in an environment, counts for the write to make) the missing parents.
    fn create_parents(&self, target: &Path) -> std::io::Result<usize>;
    fn lock(&self, target: &Path) -> Result<Box<dyn Held>, String>;
    fn current_bytes(&self, target: &Path) -> std::io::Result<Option<Vec<u8>>>;
    fn replace_checked(
        &self,
        target: &Path,
        base: Option<&[u8]>,
        data: &[u8],
    ) -> Result<(), write::ReplaceError>;
    /// Whether `target` now holds exactly `data`.
    fn holds(&self, target: &Path, data: &[u8]) -> bool;
    fn stamp(&self, target: &Path) -> Option<Stamp>;
    /// The key of the task's file state for `target`.
    fn state_key(&self, target: &Path) -> PathBuf;
    /// "Did you mean" names for a missing `shown`.
    fn similar_files(&self, ctx: &ToolContext, target: &Path, shown: &str) -> Vec<String>;
    /// Where a file named in a V4A patch is planned: [`paths::patch_target`]'s rules.
    fn patch_target(&self, ctx: &ToolContext, shown: &str, verb: &str) -> Result<PathBuf, String>;
    /// A FIFO, socket or device node.
    fn is_special(&self, target: &Path) -> bool;
    fn lock_all(&self, targets: &[PathBuf]) -> Result<Box<dyn Held>, String>;
    /// Carries out a V4A plan: every file or none.
    fn apply(&self, plan: &v4a::Plan) -> Result<(), String>;
}

/// This machine's files, through the task's access policy (widened for a call by a
/// write outside the roots that a person approved).
pub struct HostDisk {
    access: RefCell<Arc<AccessPolicy>>,
}

impl HostDisk {
    pub fn for_call(ctx: &ToolContext) -> Result<HostDisk, String> {
        Ok(HostDisk {
            access: RefCell::new(crate::file_access::policy(ctx)?),
        })
    }
}

impl Disk for HostDisk {
    fn write_target(&self, ctx: &ToolContext, shown: &str, verb: &str) -> Result<PathBuf, String> {
        paths::write_target(ctx, &self.access, shown, verb)
    }
    fn is_dir(&self, target: &Path) -> bool {
        target.is_dir()
    }
    fn create_parents(&self, target: &Path) -> std::io::Result<usize> {
        let shown = target.display().to_string();
        crate::file_access::create_parents(&self.access.borrow(), target, "Write", &shown)
            .map_err(std::io::Error::from)
    }
    fn lock(&self, target: &Path) -> Result<Box<dyn Held>, String> {
        write::lock_for_edit(target).map(|lock| Box::new(lock) as Box<dyn Held>)
    }
    fn current_bytes(&self, target: &Path) -> std::io::Result<Option<Vec<u8>>> {
        write::current_bytes(target)
    }
    fn replace_checked(
        &self,
        target: &Path,
        base: Option<&[u8]>,
        data: &[u8],
    ) -> Result<(), write::ReplaceError> {
        if !write::holds(target, base).map_err(write::ReplaceError::Io)? {
            return Err(write::ReplaceError::BaseChanged);
        }
        let shown = target.display().to_string();
        crate::file_access::write_file_bytes(
            &self.access.borrow(),
            target,
            data,
            false,
            "Write",
            &shown,
        )
        .map(|_| ())
        .map_err(|e| write::ReplaceError::Io(e.into()))
    }
    fn holds(&self, target: &Path, data: &[u8]) -> bool {
        std::fs::read(target)
            .map(|on_disk| on_disk == data)
            .unwrap_or(false)
    }
    fn stamp(&self, target: &Path) -> Option<Stamp> {
        Stamp::current(target)
    }
    fn state_key(&self, target: &Path) -> PathBuf {
        super::guard::state_key(target)
    }
    fn similar_files(&self, ctx: &ToolContext, _target: &Path, shown: &str) -> Vec<String> {
        paths::similar_files(&paths::locate(ctx, shown), shown)
    }
    fn patch_target(&self, ctx: &ToolContext, shown: &str, verb: &str) -> Result<PathBuf, String> {
        paths::patch_target(ctx, &self.access, shown, verb)
    }
    fn is_special(&self, target: &Path) -> bool {
        std::fs::symlink_metadata(target).is_ok_and(|meta| !meta.is_file() && !meta.is_dir())
    }
    fn lock_all(&self, targets: &[PathBuf]) -> Result<Box<dyn Held>, String> {
        write::lock_all_for_edit(targets).map(|locks| Box::new(locks) as Box<dyn Held>)
    }
    fn apply(&self, plan: &v4a::Plan) -> Result<(), String> {
        v4a::apply(plan, &self.access.borrow())
    }
}

/// The files of the task's environment. Each target is probed once per call (the
/// probe carries the content), and the probe is updated by the write.
///
/// A V4A patch is planned on copies: each file it names is copied from the environment
/// into a private directory on this machine (the "mirror"), the plan is made there by
/// the same code as on local, and its steps are committed to the environment in one
/// compare-and-swap.
pub struct EnvDisk {
    pub remote: Remote,
    /// By real path inside the environment.
    probes: RefCell<HashMap<PathBuf, Probe>>,
    written: RefCell<HashMap<PathBuf, bool>>,
    mirror: RefCell<Option<Mirror>>,
    /// [`hermes_environments::files::edits_done`] before the first look.
    edits_seen: std::cell::Cell<Option<u64>>,
}

/// The private copies a V4A patch is planned on; removed when dropped.
struct Mirror {
    root: PathBuf,
    /// Copy -> real path inside the environment.
    real_of: HashMap<PathBuf, PathBuf>,
}

impl Drop for Mirror {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

impl EnvDisk {
    pub fn new(remote: Remote) -> EnvDisk {
        EnvDisk {
            remote,
            probes: Default::default(),
            written: Default::default(),
            mirror: Default::default(),
            edits_seen: Default::default(),
        }
    }

    /// The real path inside the environment of `target` (a copy in the mirror, or real).
    fn real(&self, target: &Path) -> PathBuf {
        self.mirror
            .borrow()
            .as_ref()
            .and_then(|m| m.real_of.get(target).cloned())
            .unwrap_or_else(|| target.to_path_buf())
    }

    /// A copy of the probed file in the mirror (nothing there when it does not exist).
    fn mirrored(&self, probe: &Probe) -> Result<PathBuf, String> {
        let mut slot = self.mirror.borrow_mut();
        if slot.is_none() {
            let root = std::env::temp_dir().join(format!(
                "hermes-patch-{}",
                hermes_environments::output::random_hex(12)
            ));
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(&root)
                .map_err(|e| {
                    format!("cannot make a private directory to plan the patch in: {e}")
                })?;
            *slot = Some(Mirror {
                root,
                real_of: HashMap::new(),
            });
        }
        let mirror = slot.as_mut().expect("made above");
        let copy = mirror.root.join(probe.real.trim_start_matches('/'));
        if !mirror.real_of.contains_key(&copy) {
            if let Some(parent) = copy.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(|e| format!("cannot copy {}: {e}", probe.real))?;
            }
            match probe_bytes(probe) {
                Ok(Some(bytes)) => std::fs::write(&copy, bytes)
                    .map_err(|e| format!("cannot copy {}: {e}", probe.real))?,
                Ok(None) => {}
                Err(e) => return Err(format!("{}: {e}", probe.real)),
            }
            mirror
                .real_of
                .insert(copy.clone(), PathBuf::from(&probe.real));
        }
        Ok(copy)
    }

    /// Probes `shown` with its content and applies the write rules to where it lands.
    pub fn target(&self, shown: &str, verb: &str) -> Result<(PathBuf, Probe), String> {
        if self.edits_seen.get().is_none() {
            self.edits_seen
                .set(Some(hermes_environments::files::edits_done()));
        }
        let probe = self.remote.probe(shown, true)?;
        if hermes_environments::files::is_device_path(&probe.real) {
            return Err(format!(
                "{verb} denied: '{shown}' is a device or kernel file."
            ));
        }
        // Without a home directory there, the credential places are guarded at the root.
        let home = Path::new(if probe.home.is_empty() {
            "/"
        } else {
            &probe.home
        });
        let protected = ProtectedPaths::new(home, &home.join(".hermes"))
            .with_safe_roots(std::env::var_os("HERMES_WRITE_SAFE_ROOT"));
        if let Some(refusal) = protected.write_refusal(Path::new(&probe.real)) {
            return Err(refusal.message(verb, shown));
        }
        let target = PathBuf::from(&probe.real);
        self.probes
            .borrow_mut()
            .insert(target.clone(), probe.clone());
        Ok((target, probe))
    }

    /// Looks at every file again when another edit of this process finished since the
    /// first look (called with the edit locks held, so what it sees stays current).
    fn refresh_after_lock(&self) -> Result<(), String> {
        if self.edits_seen.get() == Some(hermes_environments::files::edits_done()) {
            return Ok(());
        }
        let reals: Vec<PathBuf> = self.probes.borrow().keys().cloned().collect();
        for real in reals {
            let probe = self.remote.probe(&real.to_string_lossy(), true)?;
            if let Some(mirror) = self.mirror.borrow().as_ref() {
                let copy = mirror.root.join(probe.real.trim_start_matches('/'));
                if mirror.real_of.contains_key(&copy) {
                    let _ = std::fs::remove_file(&copy);
                    if let Ok(Some(bytes)) = probe_bytes(&probe) {
                        std::fs::write(&copy, bytes)
                            .map_err(|e| format!("cannot copy {}: {e}", probe.real))?;
                    }
                }
            }
            self.probes.borrow_mut().insert(real, probe);
        }
        Ok(())
    }

    fn probe_of(&self, target: &Path) -> Option<Probe> {
        self.probes.borrow().get(&self.real(target)).cloned()
    }
}

/// What the probe says a file holds, as [`write::current_bytes`] says it for the host.
pub fn probe_bytes(probe: &Probe) -> std::io::Result<Option<Vec<u8>>> {
    match probe.kind {
        Kind::Missing => Ok(None),
        Kind::Dir => Err(std::io::Error::other("it is a directory")),
        Kind::Special => Err(std::io::Error::other("it is not a regular file (a device, socket or pipe)")),
        Kind::File => match &probe.content {
            Some(bytes) => Ok(Some(bytes.clone())),
            None => Err(std::io::Error::other(format!(
                "it is {} bytes; the file tools read at most {} MiB from the task's environment (use terminal for larger files)",
                probe.len,
                MAX_REMOTE_READ_BYTES >> 20,
            ))),
        },
    }
}

impl Disk for EnvDisk {
    fn write_target(&self, _ctx: &ToolContext, shown: &str, verb: &str) -> Result<PathBuf, String> {
        self.target(shown, verb).map(|(target, _)| target)
    }
    fn is_dir(&self, target: &Path) -> bool {
        self.probe_of(target).is_some_and(|p| p.kind == Kind::Dir)
    }
    fn create_parents(&self, target: &Path) -> std::io::Result<usize> {
        Ok(self.probe_of(target).map(|p| p.missing_dirs).unwrap_or(0))
    }
    fn lock(&self, target: &Path) -> Result<Box<dyn Held>, String> {
        self.lock_all(&[target.to_path_buf()])
    }
    fn current_bytes(&self, target: &Path) -> std::io::Result<Option<Vec<u8>>> {
        match self.probe_of(target) {
            Some(probe) => probe_bytes(&probe),
            None => Err(std::io::Error::other(
                "the file was not looked at before the edit",
            )),
        }
    }
    fn replace_checked(
        &self,
        target: &Path,
        base: Option<&[u8]>,
        data: &[u8],
    ) -> Result<(), write::ReplaceError> {
        let shown = target.to_string_lossy();
        let change = Change {
            target: &shown,
            base,
            data: Some(data),
        };
        match self.remote.commit(&[change]) {
            Ok(Committed::BaseChanged) => Err(write::ReplaceError::BaseChanged),
            Err(e) => Err(write::ReplaceError::Io(std::io::Error::other(e))),
            Ok(Committed::Done(done)) => {
                let written = done.first().copied();
                self.written
                    .borrow_mut()
                    .insert(target.to_path_buf(), written.is_some_and(|w| w.verified));
                if let (Some(w), Some(probe)) = (written, self.probes.borrow_mut().get_mut(target))
                {
                    probe.kind = Kind::File;
                    probe.len = w.len;
                    probe.mtime = w.mtime;
                    probe.content = Some(data.to_vec());
                }
                Ok(())
            }
        }
    }
    fn holds(&self, target: &Path, _data: &[u8]) -> bool {
        self.written.borrow().get(target).copied().unwrap_or(false)
    }
    fn stamp(&self, target: &Path) -> Option<Stamp> {
        self.probe_of(target)
            .filter(|p| p.kind != Kind::Missing)
            .map(|p| Stamp {
                mtime: p.mtime,
                len: p.len,
            })
    }
    fn state_key(&self, target: &Path) -> PathBuf {
        self.remote.state_key(&self.real(target).to_string_lossy())
    }
    fn similar_files(&self, _ctx: &ToolContext, target: &Path, shown: &str) -> Vec<String> {
        let siblings = self
            .probe_of(target)
            .map(|p| p.siblings)
            .unwrap_or_default();
        paths::similar_names(target, shown, siblings)
    }
    fn patch_target(&self, _ctx: &ToolContext, shown: &str, verb: &str) -> Result<PathBuf, String> {
        if Path::new(shown)
            .components()
            .any(|c| c == std::path::Component::ParentDir)
        {
            return Err(format!(
                "{verb} denied: '{shown}' in the patch contains a `..` component. Name files in patch headers by a path \
                 inside the working directory, or by an absolute path."
            ));
        }
        let (_, probe) = self.target(shown, verb)?;
        let relative = !(shown.starts_with('/') || shown.starts_with('~'));
        if relative && !Path::new(&probe.real).starts_with(&probe.base) {
            return Err(format!(
                "{verb} denied: '{shown}' leads outside the working directory {} (through a symlink, to {}).",
                probe.base, probe.real
            ));
        }
        self.mirrored(&probe)
    }
    fn is_special(&self, target: &Path) -> bool {
        self.probe_of(target)
            .is_some_and(|p| p.kind == Kind::Special)
    }
    fn lock_all(&self, targets: &[PathBuf]) -> Result<Box<dyn Held>, String> {
        let reals: Vec<String> = targets
            .iter()
            .map(|t| self.real(t).to_string_lossy().into_owned())
            .collect();
        let lock = hermes_environments::files::lock_paths(&self.remote, &reals);
        self.refresh_after_lock()?;
        Ok(Box::new(lock))
    }
    fn apply(&self, plan: &v4a::Plan) -> Result<(), String> {
        // Per step: the real path, what it holds now, what it is to hold.
        type Step<'p> = (String, Option<Vec<u8>>, Option<&'p [u8]>);
        let steps: Vec<Step<'_>> = plan
            .steps()
            .map(|(copy, data)| {
                let real = self.real(copy).to_string_lossy().into_owned();
                let base = self
                    .probe_of(copy)
                    .and_then(|p| p.content.filter(|_| p.kind == Kind::File));
                (real, base, data)
            })
            .collect();
        let changes: Vec<Change<'_>> = steps
            .iter()
            .map(|(real, base, data)| Change {
                target: real,
                base: base.as_deref(),
                data: *data,
            })
            .collect();
        match self.remote.commit(&changes)? {
            Committed::BaseChanged => Err(write::ReplaceError::BaseChanged.to_string()),
            Committed::Done(done) => {
                let mut probes = self.probes.borrow_mut();
                for ((real, _, data), written) in steps.iter().zip(done) {
                    if let Some(probe) = probes.get_mut(Path::new(real)) {
                        probe.kind = if data.is_some() {
                            Kind::File
                        } else {
                            Kind::Missing
                        };
                        probe.len = written.len;
                        probe.mtime = written.mtime;
                        probe.content = data.map(<[u8]>::to_vec);
                    }
                }
                Ok(())
            }
        }
    }
}
