//! Ctrl-C during an agent run: a request to stop, then a way out.

/// The first Ctrl-C interrupts the agent (it stops after the current step); a second
/// one exits at once.
pub(super) fn interrupt_on_ctrl_c(cancel: hermes_runtime::context::Cancellation) {
    use std::sync::atomic::{AtomicBool, Ordering};
    static INTERRUPTED: AtomicBool = AtomicBool::new(false);
    extern "C" fn on_sigint(_: libc::c_int) {
        if INTERRUPTED.swap(true, Ordering::SeqCst) {
            // SAFETY: _exit is async-signal-safe.
            unsafe { libc::_exit(130) };
        }
    }
    // SAFETY: the handler only touches an atomic and calls _exit.
    unsafe {
        libc::signal(libc::SIGINT, on_sigint as *const () as libc::sighandler_t);
    }
    std::thread::spawn(move || loop {
        if INTERRUPTED.load(Ordering::SeqCst) {
            eprintln!("interrupted: stopping after the current step (Ctrl-C again to quit now)");
            cancel.cancel();
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    });
}
