//! Landlock scopes around the launch of a sandboxed command: signals of processes
//! outside the sandbox are out of its reach, and abstract unix sockets outside it (its
//! own network namespace already holds a separate set of those).
//!
//! Only scopes are restricted, no filesystem access, so the wall may still mount
//! (Landlock forbids mounting only to filesystem-restricted domains). With bubblewrap
//! the domain is put on the launcher threads that start the children, so the server
//! itself stays unrestricted and each child inherits the domain. The built-in wall
//! ([`crate::wall`]) puts the domain on itself when it starts, so its own setup is
//! the same whoever starts it.

use landlock::{AccessFs, CompatLevel, Compatible, Ruleset, RulesetAttr, Scope};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex, OnceLock};

/// A launch to run on a launcher thread, given whether its restriction took hold.
type Job = Box<dyn FnOnce(&Result<(), String>) + Send>;

/// How many launcher threads take launches: sandboxes of different tasks start side by
/// side, none waits for another's spawn (a fork of the whole server for bubblewrap).
const LAUNCHER_THREADS: usize = 4;

/// Runs `spawn` on one of a few long-lived launcher threads restricted by the scopes
/// (long-lived because a child's parent-death signal, which bubblewrap's
/// `--die-with-parent` uses, fires when the thread that started it ends). The scopes are
/// applied where the kernel has them (Landlock ABI 6, Linux 6.12).
pub fn spawn_scoped<T: Send + 'static>(
    spawn: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> std::io::Result<T> {
    static SCOPED: OnceLock<Mutex<Sender<Job>>> = OnceLock::new();
    static PLAIN: OnceLock<Mutex<Sender<Job>>> = OnceLock::new();
    let launcher = if crate::wall::chosen() {
        PLAIN.get_or_init(|| Mutex::new(start_launchers(false)))
    } else {
        SCOPED.get_or_init(|| Mutex::new(start_launchers(true)))
    };
    let (done, result) = std::sync::mpsc::channel();
    let job: Job = Box::new(move |restricted| {
        let outcome = match restricted {
            Ok(()) => spawn(),
            Err(why) => Err(std::io::Error::other(why.clone())),
        };
        let _ = done.send(outcome);
    });
    let sent = launcher.lock().unwrap_or_else(|p| p.into_inner()).send(job);
    sent.map_err(|_| std::io::Error::other("the sandbox launcher thread is gone"))?;
    result
        .recv()
        .unwrap_or_else(|_| Err(std::io::Error::other("the sandbox launcher thread failed")))
}

fn start_launchers(scoped: bool) -> Sender<Job> {
    let (jobs, queue) = std::sync::mpsc::channel::<Job>();
    let queue = Arc::new(Mutex::new(queue));
    for _ in 0..LAUNCHER_THREADS {
        let queue = Arc::clone(&queue);
        let spawned = std::thread::Builder::new()
            .name("sandbox-launcher".into())
            .spawn(move || {
                let restricted = if scoped {
                    restrict_thread().map_err(|e| e.to_string())
                } else {
                    Ok(())
                };
                loop {
                    // The lock is held only while waiting: an idle thread takes the next job.
                    let job = queue.lock().unwrap_or_else(|p| p.into_inner()).recv();
                    match job {
                        Ok(job) => job(&restricted),
                        Err(_) => return,
                    }
                }
            });
        if let Err(e) = spawned {
            // With no thread at all, jobs fail at once with "is gone" (the queue is dropped).
            eprintln!("warning: cannot start a sandbox launcher thread: {e}");
        }
    }
    jobs
}

/// Puts the calling thread (and what it starts from now on) in the scopes' domain.
pub(crate) fn restrict_thread() -> std::io::Result<()> {
    Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .scope(Scope::AbstractUnixSocket | Scope::Signal)
        .and_then(|r| r.create())
        .and_then(|r| r.restrict_self())
        .map_err(|e| {
            std::io::Error::other(format!("cannot apply the sandbox's Landlock scopes: {e}"))
        })?;
    Ok(())
}

/// Puts the calling process in a domain where a pathname unix socket can be connected
/// to only if a process of the same domain made it (Landlock ABI 9, Linux 7.0: the
/// `RESOLVE_UNIX` right, handled with no path granting it). A host service whose socket
/// file appears in a shared writable root (`/tmp`) after the sandbox started is then
/// refused like the ones hidden at its start; the sandbox's own sockets, and those of
/// programs it starts, still connect. On older kernels this is a no-op; the built-in
/// wall keeps the same rule there itself (`wall/unix_guard.rs`). Called after the mounts (a domain that
/// handles a file-system right may not mount) and before the command runs.
pub(crate) fn refuse_outside_sockets() -> std::io::Result<()> {
    Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::ResolveUnix)
        .and_then(|r| r.create())
        .and_then(|r| r.restrict_self())
        .map_err(|e| {
            std::io::Error::other(format!(
                "cannot refuse the host's unix sockets with Landlock: {e}"
            ))
        })?;
    Ok(())
}

/// The Landlock ABI version this kernel offers (0: none), asked of the kernel itself.
pub fn landlock_abi() -> u32 {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with a null attribute pointer, size 0 and the VERSION flag the call reads
    // and writes no memory; it returns the ABI version or -1.
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    u32::try_from(abi).unwrap_or(0)
}
