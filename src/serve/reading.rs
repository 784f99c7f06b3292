//! Who reads the input. One thread at a time is on duty: it holds the input, reads a
//! line and answers, queues or starts what the line asks. When the line is a call that
//! can start at once and no other call runs this way, the thread on duty lets go of the
//! input and runs the call itself, with no hand-off to anyone: a client sending one
//! call after another costs the server one `read` and one `write` per call and no
//! wake-up of another thread. When the call is over, the thread goes back on duty
//! unless another one has taken it meanwhile.
//!
//! While such a call runs, nobody reads. A watchdog ticks while calls run this way;
//! once one has kept the input without a reader for a whole tick, it calls a second
//! thread on duty (started the first time), so a long call, or a call waiting for the
//! client's answer to a question, never stops the input from being read for more than
//! two ticks. Two threads take turns at most; while one runs a call this way, calls
//! the other reads go to the scheduler's workers, so a burst of calls adds no threads
//! here.

use super::lines::{BoundedLines, Line};
use super::{line_error, Server, Started};
use std::io::Read;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

/// Threads that take turns at reading (the one that started serving included).
const READERS: usize = 2;

/// How long a call run by a reading thread may keep the input without a reader.
const TICK: Duration = Duration::from_millis(1);

/// Ticks without such a call before the watchdog sleeps until the next one.
const IDLE_TICKS: u32 = 100;

pub struct Input {
    state: Mutex<State>,
    /// Threads holding the input or waiting to: at most one reads, the others follow.
    on_duty: AtomicUsize,
    /// Threads taking turns, at most [`READERS`].
    readers: AtomicUsize,
    /// Threads off duty, waiting to be called back on it.
    spares: Mutex<Spares>,
    called: Condvar,
    /// Counts starts and ends of the calls run by reading threads: odd while one runs.
    inline: AtomicU64,
    ended: AtomicBool,
    watchdog: OnceLock<std::thread::Thread>,
    watchdog_asleep: AtomicBool,
    max_line_bytes: usize,
}

struct State {
    lines: BoundedLines<Box<dyn Read + Send>>,
    number: usize,
    ended: bool,
    failure: Option<std::io::Error>,
}

#[derive(Default)]
struct Spares {
    waiting: usize,
    /// Calls on duty not yet taken by a waiting thread.
    calls: usize,
}

/// A call run by the thread that read it: while held, no other call runs that way.
pub struct InlineCall<'a> {
    input: &'a Input,
}

impl Drop for InlineCall<'_> {
    fn drop(&mut self) {
        self.input.inline.fetch_add(1, SeqCst);
    }
}

impl Input {
    pub fn new(lines: BoundedLines<Box<dyn Read + Send>>, max_line_bytes: usize) -> Input {
        Input {
            state: Mutex::new(State {
                lines,
                number: 0,
                ended: false,
                failure: None,
            }),
            on_duty: AtomicUsize::new(1),
            readers: AtomicUsize::new(1),
            spares: Mutex::new(Spares::default()),
            called: Condvar::new(),
            inline: AtomicU64::new(0),
            ended: AtomicBool::new(false),
            watchdog: OnceLock::new(),
            watchdog_asleep: AtomicBool::new(false),
            max_line_bytes,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_spares(&self) -> MutexGuard<'_, Spares> {
        self.spares.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Claims the right to run a call on the reading thread; `None` while another call
    /// runs that way (or the watchdog could not be started).
    pub fn claim_inline(&self) -> Option<InlineCall<'_>> {
        let now = self.inline.load(SeqCst);
        if now % 2 == 1 || self.watchdog.get().is_none() {
            return None;
        }
        self.inline
            .compare_exchange(now, now + 1, SeqCst, SeqCst)
            .ok()?;
        if self.watchdog_asleep.load(SeqCst) && self.watchdog_asleep.swap(false, SeqCst) {
            if let Some(watchdog) = self.watchdog.get() {
                watchdog.unpark();
            }
        }
        Some(InlineCall { input: self })
    }

    /// Waits off duty until called back on it; `false` once the input has ended.
    fn wait_as_spare(&self) -> bool {
        let mut spares = self.lock_spares();
        spares.waiting += 1;
        loop {
            if spares.calls > 0 {
                spares.calls -= 1;
                spares.waiting -= 1;
                return true;
            }
            if self.ended.load(SeqCst) {
                spares.waiting -= 1;
                return false;
            }
            spares = self.called.wait(spares).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// The input has ended: nobody waits for a turn any more.
    fn end(&self) {
        self.ended.store(true, SeqCst);
        let _spares = self.lock_spares();
        self.called.notify_all();
        if let Some(watchdog) = self.watchdog.get() {
            watchdog.unpark();
        }
    }
}

/// Reads and serves lines until the input ends, on this thread and the ones that
/// take turns with it; returns the read error that ended it, if one did. Every call
/// read has been started or queued by then, not necessarily finished.
pub fn read_until_end(server: &Arc<Server>) -> Option<std::io::Error> {
    let watched = Arc::clone(server);
    if let Ok(watchdog) = std::thread::Builder::new()
        .name("hermes-serve-watch".into())
        .spawn(move || watch(&watched))
    {
        let _ = server.input.watchdog.set(watchdog.thread().clone());
    }
    take_turns(server);
    server.input.lock().failure.take()
}

/// Puts a thread on duty while the call running on a reading thread keeps the input
/// without a reader: a waiting one, else a new one if fewer than [`READERS`] take turns.
fn call_on_duty(server: &Arc<Server>) {
    let input = &server.input;
    let mut spares = input.lock_spares();
    if input.on_duty.load(SeqCst) > 0 || input.ended.load(SeqCst) {
        return;
    }
    if spares.waiting > spares.calls {
        spares.calls += 1;
        input.on_duty.fetch_add(1, SeqCst);
        input.called.notify_one();
        return;
    }
    if input.readers.load(SeqCst) >= READERS {
        return;
    }
    input.readers.fetch_add(1, SeqCst);
    input.on_duty.fetch_add(1, SeqCst);
    let next = Arc::clone(server);
    if std::thread::Builder::new()
        .name("hermes-serve-read".into())
        .spawn(move || take_turns(&next))
        .is_err()
    {
        input.readers.fetch_sub(1, SeqCst);
        input.on_duty.fetch_sub(1, SeqCst);
    }
}

/// Ticks while calls run on reading threads, and calls another thread on duty when
/// one such call has run for a whole tick with nobody reading.
fn watch(server: &Arc<Server>) {
    let input = &server.input;
    let mut seen = input.inline.load(SeqCst);
    let mut idle = 0;
    while !input.ended.load(SeqCst) {
        std::thread::park_timeout(TICK);
        let now = input.inline.load(SeqCst);
        if now % 2 == 1 {
            idle = 0;
            if now == seen && input.on_duty.load(SeqCst) == 0 {
                call_on_duty(server);
            }
        } else {
            idle += 1;
            if idle >= IDLE_TICKS {
                input.watchdog_asleep.store(true, SeqCst);
                // A call claimed before the flag was up has not woken us: look again.
                while input.watchdog_asleep.load(SeqCst)
                    && input.inline.load(SeqCst).is_multiple_of(2)
                    && !input.ended.load(SeqCst)
                {
                    std::thread::park();
                }
                input.watchdog_asleep.store(false, SeqCst);
                idle = 0;
            }
        }
        seen = now;
    }
}

/// Reads while this thread is on duty, runs the call that made it let go, and goes
/// back on duty (or waits to be called back); returns once the input has ended. The
/// caller has counted this thread in `on_duty`.
fn take_turns(server: &Arc<Server>) {
    let input = &server.input;
    loop {
        let mut state = input.lock();
        let started = loop {
            if state.ended {
                input.on_duty.fetch_sub(1, SeqCst);
                return;
            }
            if let Some(started) = read_line(server, &mut state) {
                break started;
            }
        };
        input.on_duty.fetch_sub(1, SeqCst);
        drop(state);
        server.run_started(started);
        if input.ended.load(SeqCst) {
            return;
        }
        let back_on_duty = input.on_duty.compare_exchange(0, 1, SeqCst, SeqCst).is_ok();
        if !back_on_duty && !input.wait_as_spare() {
            return;
        }
    }
}

/// Reads one line and serves it; a call to run on this thread comes back.
fn read_line<'s>(server: &'s Arc<Server>, state: &mut State) -> Option<Started<'s>> {
    let State {
        lines,
        number,
        ended,
        failure,
    } = state;
    let Some(line) = lines.next_line() else {
        *ended = true;
        server.input.end();
        // Now, not once the thread that started serving is back: it may be running
        // a call that waits for an answer nobody can send any more.
        server.clarify.close();
        return None;
    };
    *number += 1;
    match line {
        Ok(Line::Bytes(bytes)) => server.take_line(bytes, *number),
        Ok(Line::TooLong { bytes }) => {
            server.output.send_one(line_error(
                format!(
                    "the line is {bytes} bytes, more than serve.max_line_bytes ({}); it was skipped",
                    server.input.max_line_bytes
                ),
                *number,
            ));
            None
        }
        Err(e) => {
            server
                .output
                .send_one(line_error(format!("cannot read input: {e}"), *number));
            *failure = Some(e);
            *ended = true;
            server.input.end();
            server.clarify.close();
            None
        }
    }
}
