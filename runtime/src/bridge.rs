//! Running `async fn` handlers from synchronous dispatch.
//!
//! One process-wide multi-thread Tokio runtime serves every async handler, whoever
//! calls: a plain thread (the CLI), a thread already inside another runtime (a
//! server), or many worker threads at once. Nothing builds a runtime per call, so
//! clients cached by a handler stay bound to a runtime that lives as long as the
//! process. A plain thread drives the future itself on that runtime; a caller inside
//! another runtime hands it to the bridge's workers and waits on a channel, so it
//! can neither nest runtimes nor deadlock its own.

use crate::catalog::BoxFuture;
use crate::context::Cancellation;
use crate::output::ToolResult;
use std::sync::mpsc;
use std::sync::OnceLock;
use std::time::Duration;
use tokio::runtime::{Handle, Runtime, RuntimeFlavor};

/// How long an async handler may run before its caller gets an error.
pub const DEFAULT_ASYNC_TIMEOUT: Duration = Duration::from_secs(300);

/// The shared runtime, built on first use.
pub fn bridge_runtime() -> &'static Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(std::thread::available_parallelism().map_or(2, |n| n.get().max(2)))
            .thread_name("hermes-bridge")
            .enable_all()
            .build()
            .expect("the async bridge needs a Tokio runtime")
    })
}

#[derive(Debug, PartialEq, Eq)]
pub enum BridgeError {
    TimedOut(Duration),
    /// The handler's task was aborted or panicked before sending a result.
    Lost(String),
}

/// Runs `future` on the bridge runtime and blocks this thread until it finishes or
/// `timeout` passes. On timeout the future is dropped (which cancels it at its next
/// await point) and `cancel` is raised for work it handed to other threads.
pub fn block_on_bridge(
    future: BoxFuture<ToolResult>,
    timeout: Duration,
    cancel: &Cancellation,
) -> Result<ToolResult, BridgeError> {
    if Handle::try_current().is_err() {
        // Not inside any runtime: drive the future on this thread with the bridge
        // runtime's timers and I/O, saving two cross-thread hand-offs per call.
        // The timer must be created inside the runtime, hence the async block.
        return match bridge_runtime()
            .block_on(async move { tokio::time::timeout(timeout, future).await })
        {
            Ok(result) => Ok(result),
            Err(_elapsed) => {
                cancel.cancel();
                Err(BridgeError::TimedOut(timeout))
            }
        };
    }
    let (sender, receiver) = mpsc::sync_channel(1);
    let task = bridge_runtime().spawn(async move {
        let outcome = tokio::time::timeout(timeout, future).await;
        let _ = sender.send(outcome);
    });
    let outcome = wait_outside_runtime(|| receiver.recv());
    match outcome {
        Ok(Ok(result)) => Ok(result),
        Ok(Err(_elapsed)) => {
            cancel.cancel();
            Err(BridgeError::TimedOut(timeout))
        }
        Err(_disconnected) => {
            task.abort();
            Err(BridgeError::Lost(
                "the handler's task ended without a result".into(),
            ))
        }
    }
}

/// Blocking inside a multi-thread runtime worker is allowed only through
/// `block_in_place`, which moves the worker's other tasks elsewhere first.
fn wait_outside_runtime<T>(wait: impl FnOnce() -> T) -> T {
    match Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(wait)
        }
        _ => wait(),
    }
}
