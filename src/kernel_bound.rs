//! The kernel's half of the write policy: a write the model asked for runs on a thread
//! of its own that Landlock lets write only beneath the task's writable roots.
//!
//! The path checks of [`hermes_runtime::access::AccessPolicy`] decide what may be
//! written, race-free (`openat2` beneath the root, no symlink followed out). They are
//! user-space code, though, and a mistake in them would write with the server's
//! rights. On the confined thread the same write fails with `EACCES` outside the
//! roots whatever the checks said, as the terminal's commands do inside the sandbox.
//! Reads are not restricted (the deny-read list is the checks' alone), and the
//! protected places inside a root stay the checks' job: Landlock grants trees, it
//! cannot carve a file out of one.
//!
//! Landlock applies to the thread that asks and the threads it starts, never to the
//! rest of the process, so each write gets a fresh thread (the rules themselves are
//! built once per set of roots): tens of microseconds beside the write's `fsync`.
//! Where the kernel has no Landlock the checks stand alone (`docs/security.md` says
//! so); a kernel that has it and refuses the rules refuses the write.

use hermes_runtime::access::WriteError;
use landlock::{
    AccessFs, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset, RulesetAttr, RulesetCreated,
    RulesetCreatedAttr, ABI,
};
use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

/// The newest file-system rights this code asks the kernel to handle; older kernels
/// handle what they know (best effort).
const WRITE_ABI: ABI = ABI::V5;

/// Runs `work` on a thread whose writes the kernel confines beneath `roots`; `None`
/// (writes not bounded by roots: `terminal.sandbox.mode: off`) runs it as it is.
pub fn within_roots<T: Send>(
    roots: Option<&[PathBuf]>,
    work: impl FnOnce() -> Result<T, WriteError> + Send,
) -> Result<T, WriteError> {
    let Some(roots) = roots else {
        return work();
    };
    let setup_failed = |source| WriteError::Failed {
        doing: "the kernel's write confinement could not be set up".into(),
        source,
    };
    let rules = rules_for(roots).map_err(setup_failed)?;
    std::thread::scope(|scope| {
        let confined = std::thread::Builder::new()
            .name("confined-write".into())
            .stack_size(WRITER_STACK)
            .spawn_scoped(scope, || {
                rules
                    .restrict_self()
                    .map_err(|e| setup_failed(std::io::Error::other(e)))?;
                work()
            })
            .map_err(setup_failed)?;
        match confined.join() {
            Ok(result) => result,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}

/// A write's thread does path work and one copy: far less stack than a thread's
/// default 2 MiB, and a smaller mapping is cheaper to make for every write.
const WRITER_STACK: usize = 256 * 1024;

/// The rules letting a thread create, write, truncate, rename and remove files only
/// beneath `roots`, built once per set of root folders and handed out as a copy of the
/// ruleset's descriptor. A root is known by its device and inode as well as its path,
/// so a folder removed and made again gets rules of its own; a root that does not
/// exist is left out (nothing can be written beneath it).
fn rules_for(roots: &[PathBuf]) -> std::io::Result<RulesetCreated> {
    type Known = Mutex<HashMap<Vec<(PathBuf, u64, u64)>, RulesetCreated>>;
    static KNOWN: OnceLock<Known> = OnceLock::new();
    let key: Vec<(PathBuf, u64, u64)> = roots
        .iter()
        .filter_map(|root| {
            let found = std::fs::metadata(root).ok()?;
            Some((root.clone(), found.dev(), found.ino()))
        })
        .collect();
    let known = KNOWN.get_or_init(Default::default);
    if let Some(rules) = known.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
        return rules.try_clone();
    }
    let writes = AccessFs::from_write(WRITE_ABI);
    let mut rules = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(writes)
        .map_err(std::io::Error::other)?
        .create()
        .map_err(std::io::Error::other)?;
    for (root, _, _) in &key {
        let Ok(beneath) = PathFd::new(root) else {
            continue;
        };
        rules = rules
            .add_rule(PathBeneath::new(beneath, writes))
            .map_err(std::io::Error::other)?;
    }
    let copy = rules.try_clone()?;
    let mut known = known.lock().unwrap_or_else(|p| p.into_inner());
    if known.len() >= 64 {
        known.clear();
    }
    known.insert(key, rules);
    Ok(copy)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_outside_the_roots_fail_in_the_kernel_and_only_on_that_thread() {
        // Asked of the kernel, so a confinement that silently did nothing cannot pass
        // for a kernel without Landlock.
        if hermes_sandbox::landlock_abi() == 0 {
            eprintln!("skipped: this kernel has no Landlock");
            return;
        }
        let scratch = tempfile::tempdir().unwrap();
        let root = scratch.path().join("workspace");
        let elsewhere = scratch.path().join("elsewhere");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::create_dir(&elsewhere).unwrap();
        std::fs::write(elsewhere.join("kept"), b"original").unwrap();
        let roots = [root.clone()];

        let outcome = within_roots(Some(&roots), || {
            Ok::<_, WriteError>((
                std::fs::write(root.join("sub/made"), b"inside"),
                std::fs::write(elsewhere.join("kept"), b"overwritten"),
                std::fs::write(elsewhere.join("new"), b"planted"),
                std::fs::remove_file(elsewhere.join("kept")),
                std::fs::rename(root.join("sub/made"), elsewhere.join("moved")),
            ))
        })
        .unwrap();
        assert!(
            outcome.0.is_ok(),
            "a write inside the root: {:?}",
            outcome.0
        );
        for (what, result) in [
            ("overwrite", &outcome.1),
            ("create", &outcome.2),
            ("remove", &outcome.3),
            ("rename out", &outcome.4),
        ] {
            let error = result.as_ref().expect_err(what);
            assert_eq!(error.raw_os_error(), Some(libc::EACCES), "{what}: {error}");
        }
        assert_eq!(std::fs::read(elsewhere.join("kept")).unwrap(), b"original");
        assert!(!elsewhere.join("new").exists());

        // The rest of the process is not confined.
        std::fs::write(elsewhere.join("after"), b"this thread").unwrap();
    }

    #[test]
    fn unbounded_policies_run_the_write_unconfined() {
        let scratch = tempfile::tempdir().unwrap();
        let target = scratch.path().join("anywhere");
        within_roots(None, || {
            std::fs::write(&target, b"x").map_err(|source| WriteError::Failed {
                doing: "write".into(),
                source,
            })
        })
        .unwrap();
        assert!(target.exists());
    }
}
