//! The wall where the kernel refuses user namespaces (Ubuntu's AppArmor policy, a
//! `user.max_user_namespaces` of 0): the same command line, carried out with Landlock
//! and seccomp only, as codex does by default. Weaker, and said so
//! ([`super::confined_only`] makes the runtime print why once):
//!
//! - reads: everything but the hidden places (the server's private files, the
//!   deny-read list, the host's `/run`), as Landlock can grant: every other entry of
//!   each directory above a hidden place is granted on its own, so a hidden place that
//!   does not exist yet, or an entry made later beside one, is not covered, and the
//!   names in a hidden directory can be listed (never read);
//! - writes: the writable roots but their protected places, granted the same way, the
//!   task's state directory and the terminal devices;
//! - no network at all: no TCP (Landlock), no IPv4/IPv6 socket of any kind (seccomp),
//!   abstract unix sockets and signals outside the sandbox scoped away; socket files
//!   of host services that the read rules leave visible can still be connected to;
//! - the host's `/proc` and `/dev`, no PID namespace: other processes are seen (their
//!   memory and environment stay out of reach: Landlock scopes ptrace), and a command's
//!   background processes outlive it until the task ends.
//!
//! It needs Landlock ABI 6 (Linux 6.12) for the signal scope: without it, a launcher's
//! `kill(-1)` would reach every process of the user.

use super::{BindKind, Plan, Step};
use landlock::{
    path_beneath_rules, Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr,
    RulesetCreatedAttr, Scope, ABI,
};
use std::path::{Path, PathBuf};

/// The argument, right after the wall's own, that chooses this mode.
pub(crate) const ARG: &str = "--landlock-only";

/// Devices a command writes to whatever its policy (and its terminal, when it has one).
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
];

/// What the plan's mounts amount to, as places.
#[derive(Default)]
struct Places {
    readable_roots: Vec<PathBuf>,
    writable_roots: Vec<PathBuf>,
    /// Neither read nor written (covered by a tmpfs or the empty file).
    hidden: Vec<PathBuf>,
    /// Read-only inside a writable root.
    read_only: Vec<PathBuf>,
    /// Writable wherever they are (the state directories, a terminal).
    writable: Vec<PathBuf>,
}

fn places(plan: &Plan) -> Places {
    let mut places = Places::default();
    for step in &plan.steps {
        match step {
            Step::Bind {
                source,
                dest,
                kind: BindKind::ReadOnly,
            } if source == dest => {
                if dest == Path::new("/") {
                    places.readable_roots.push(dest.clone());
                } else {
                    places.read_only.push(dest.clone());
                }
            }
            // The empty file bound over a secret, a socket or a missing protected file.
            Step::Bind {
                kind: BindKind::ReadOnly,
                dest,
                ..
            } => places.hidden.push(dest.clone()),
            Step::Bind {
                kind: BindKind::ReadWrite,
                dest,
                ..
            } => places.writable_roots.push(dest.clone()),
            Step::Bind {
                kind: BindKind::Devices,
                dest,
                ..
            } => places.writable.push(dest.clone()),
            Step::Tmpfs(place) if place != Path::new("/dev/pts") => {
                places.hidden.push(place.clone())
            }
            _ => {}
        }
    }
    // A writable root bound inside a hidden place (a task's state directory in the
    // server's private directory) is granted on its own.
    let hidden = places.hidden.clone();
    let (inside, roots): (Vec<PathBuf>, Vec<PathBuf>) = places
        .writable_roots
        .drain(..)
        .partition(|root| hidden.iter().any(|h| root.starts_with(h)));
    places.writable_roots = roots;
    places.writable.extend(inside);
    places
}

/// `dir` and what is below it, but `excluded` and what is below those: the directory
/// itself when nothing excluded is below it, else each entry, recursively; the
/// directories above an excluded place go to `listed` (their entries may be listed,
/// which Landlock grants for the whole tree beneath: names in a hidden directory are
/// seen, never their content).
fn granted(dir: &Path, excluded: &[PathBuf], out: &mut Vec<PathBuf>, listed: &mut Vec<PathBuf>) {
    if excluded.iter().any(|e| e == dir) {
        return;
    }
    if !excluded.iter().any(|e| e.starts_with(dir)) {
        out.push(dir.to_path_buf());
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    listed.push(dir.to_path_buf());
    for entry in entries.flatten() {
        granted(&entry.path(), excluded, out, listed);
    }
}

/// Confines this process as the plan says, then runs its command in a child (which can
/// start a session of its own, as this process may lead its group) and ends with its
/// status; `Err` when the command could not be started: the status and why.
pub(super) fn run(plan: &Plan, seccomp: &[Vec<u8>]) -> Result<i32, (i32, String)> {
    let places = places(plan);
    let abi = ABI::V6;
    let (mut readable, mut listed) = (Vec::new(), Vec::new());
    for root in &places.readable_roots {
        granted(root, &places.hidden, &mut readable, &mut listed);
    }
    let mut writable = Vec::new();
    let not_writable: Vec<PathBuf> = places
        .hidden
        .iter()
        .chain(&places.read_only)
        .cloned()
        .collect();
    for root in &places.writable_roots {
        // Above a read-only place, a writable root's directories stay readable only.
        granted(root, &not_writable, &mut writable, &mut Vec::new());
    }
    writable.extend(places.writable.iter().cloned());
    writable.extend(DEVICES.iter().map(PathBuf::from));
    writable.retain(|p| p.exists());
    let ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(abi))
        .and_then(|r| r.handle_access(AccessNet::from_all(abi)))
        .and_then(|r| r.scope(Scope::AbstractUnixSocket | Scope::Signal))
        // RESOLVE_UNIX (ABI 9; left out where the kernel lacks it) granted nowhere: only
        // socket files made inside the sandbox can be connected to.
        .and_then(|r| {
            r.set_compatibility(CompatLevel::BestEffort)
                .handle_access(AccessFs::ResolveUnix)
        })
        .and_then(|r| r.create())
        .map(|r| r.set_compatibility(CompatLevel::HardRequirement))
        .and_then(|r| r.add_rules(path_beneath_rules(&listed, AccessFs::ReadDir)))
        .and_then(|r| r.add_rules(path_beneath_rules(&readable, AccessFs::from_read(abi))))
        .and_then(|r| r.add_rules(path_beneath_rules(&writable, AccessFs::from_all(abi))));
    let ruleset = match ruleset {
        Ok(ruleset) => ruleset,
        Err(e) => {
            return Err((
                1,
                format!("Landlock (ABI 6, Linux 6.12) is needed without user namespaces: {e}"),
            ))
        }
    };
    if let Some(dir) = &plan.chdir {
        if let Err(e) = std::env::set_current_dir(dir) {
            return Err((1, format!("cannot enter {}: {e}", dir.display())));
        }
    }
    // SAFETY: prctl on our own process; Landlock needs no-new-privileges first.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err((1, super::failed("no_new_privs")));
    }
    if let Err(e) = ruleset.restrict_self() {
        return Err((1, format!("cannot apply the Landlock rules: {e}")));
    }
    let mut programs = seccomp.to_vec();
    programs.push(crate::syscalls::no_network_program().map_err(|e| (1, e))?);
    match super::fork().map_err(|e| (1, e))? {
        0 => {
            let (code, why) = super::exec_command(plan, &programs, None);
            eprintln!("hermes-tools sandbox: {why}");
            // SAFETY: ending the child without running the parent's exit handlers twice.
            unsafe { libc::_exit(code) }
        }
        command => loop {
            let mut raw = 0;
            // SAFETY: waitpid on our own child.
            let got = unsafe { libc::waitpid(command, &mut raw, 0) };
            if got == command {
                return Ok(super::exit_code(raw));
            }
            if got < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted
            {
                return Err((1, super::failed("waitpid")));
            }
        },
    }
}
