//! Landlock scopes around the launch of a sandboxed command: abstract unix sockets
//! (which live in the network namespace, shared while the network is on) and signals
//! of processes outside the sandbox are out of its reach.
//!
//! Only scopes are restricted, no filesystem access, so bubblewrap may still mount
//! (Landlock forbids mounting only to filesystem-restricted domains). The domain is
//! put on a launcher thread that starts the children, so the server itself stays
//! unrestricted and each child inherits the domain.

use landlock::{CompatLevel, Compatible, Ruleset, RulesetAttr, RulesetStatus, Scope, ABI};
use std::sync::mpsc::Sender;
use std::sync::{Mutex, OnceLock};

/// A launch to run on a launcher thread, given whether its restriction took hold.
type Job = Box<dyn FnOnce(&Result<(), String>) + Send>;

/// Runs `spawn` on a long-lived launcher thread restricted by the scopes (long-lived
/// because a child's parent-death signal, which bubblewrap's `--die-with-parent` uses,
/// fires when the thread that started it ends). With `required` (the network is shared),
/// a kernel without Landlock scopes (ABI 6, Linux 6.12) is an error; without it the
/// scopes are applied where the kernel has them.
pub fn spawn_scoped<T: Send + 'static>(
    required: bool,
    spawn: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> std::io::Result<T> {
    static STRICT: OnceLock<Mutex<Sender<Job>>> = OnceLock::new();
    static LENIENT: OnceLock<Mutex<Sender<Job>>> = OnceLock::new();
    let slot = if required { &STRICT } else { &LENIENT };
    let launcher = slot.get_or_init(|| Mutex::new(start_launcher(required)));
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

fn start_launcher(required: bool) -> Sender<Job> {
    let (jobs, queue) = std::sync::mpsc::channel::<Job>();
    let spawned = std::thread::Builder::new()
        .name("sandbox-launcher".into())
        .spawn(move || {
            let restricted = restrict_thread(required).map_err(|e| e.to_string());
            for job in queue {
                job(&restricted);
            }
        });
    if let Err(e) = spawned {
        // Jobs sent to a queue nobody reads fail at once with "is gone".
        eprintln!("warning: cannot start the sandbox launcher thread: {e}");
    }
    jobs
}

fn restrict_thread(required: bool) -> std::io::Result<()> {
    let level = if required {
        CompatLevel::HardRequirement
    } else {
        CompatLevel::BestEffort
    };
    let missing = |e: &dyn std::fmt::Display| {
        std::io::Error::other(format!(
            "the command sandbox cannot start: this kernel cannot keep abstract unix sockets and signals of the host \
             out of reach (Landlock scopes, ABI {} or newer, Linux 6.12): {e}. Commands are not run without it. Set \
             `terminal.sandbox.network: false` (a private network namespace isolates them instead) or \
             `terminal.sandbox.mode: off` in config.yaml",
            ABI::V6 as u32
        ))
    };
    let status = Ruleset::default()
        .set_compatibility(level)
        .scope(Scope::AbstractUnixSocket | Scope::Signal)
        .and_then(|r| r.create())
        .and_then(|r| r.restrict_self())
        .map_err(|e| missing(&e))?;
    if required && status.ruleset != RulesetStatus::FullyEnforced {
        return Err(missing(&"the scopes are not enforced"));
    }
    Ok(())
}
