//! Who reads the input. One thread at a time holds it: it reads a line and answers,
//! queues or starts what the line asks. When the line is a call that can start at
//! once, that thread first makes sure another one is waiting to take the input
//! over, lets go of it and runs the call itself: the call skips a hand-off to a
//! worker, and a long call never stops the input from being read. A thread that
//! has finished such a call waits for its turn to read again. Two threads take
//! turns at most: while both are busy (one reading, one running a call), calls go
//! to the scheduler's workers, so a burst of calls does not add threads here.

use super::lines::{BoundedLines, Line};
use super::{line_error, Server, Started};
use std::io::Read;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::time::{Duration, Instant};

/// Threads that take turns at reading (the one that started serving included).
const READERS: usize = 2;

/// How long a thread waiting for its turn to read watches before it sleeps.
const TURN_WATCH: Duration = Duration::from_micros(200);

pub struct Input {
    state: Mutex<State>,
    /// Threads waiting for their turn to read (counted before they wait).
    waiting: AtomicUsize,
    /// Threads taking turns, at most [`READERS`].
    readers: AtomicUsize,
    max_line_bytes: usize,
}

struct State {
    lines: BoundedLines<Box<dyn Read + Send>>,
    number: usize,
    ended: bool,
    failure: Option<std::io::Error>,
}

impl Input {
    pub fn new(lines: BoundedLines<Box<dyn Read + Send>>, max_line_bytes: usize) -> Input {
        Input {
            state: Mutex::new(State { lines, number: 0, ended: false, failure: None }),
            waiting: AtomicUsize::new(0),
            readers: AtomicUsize::new(1),
            max_line_bytes,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits for the input, watching for it for [`TURN_WATCH`] before sleeping: the
    /// thread letting go of it to run a call then pays no wake-up, and a client
    /// sending call after call finds a reader at once. It yields its core between
    /// looks, as a busy spin would keep the reading thread itself off a busy machine.
    fn wait_turn(&self) -> MutexGuard<'_, State> {
        let started = Instant::now();
        loop {
            match self.state.try_lock() {
                Ok(state) => return state,
                Err(TryLockError::Poisoned(poisoned)) => return poisoned.into_inner(),
                Err(TryLockError::WouldBlock) if started.elapsed() < TURN_WATCH => std::thread::yield_now(),
                Err(TryLockError::WouldBlock) => return self.lock(),
            }
        }
    }
}

/// Reads and serves lines until the input ends, on this thread and the ones it
/// hands the input to; returns the read error that ended it, if one did. Every call
/// read has been started or queued by then, not necessarily finished.
pub fn read_until_end(server: &Arc<Server>) -> Option<std::io::Error> {
    server.input.waiting.fetch_add(1, Ordering::SeqCst);
    take_turns(server);
    server.input.lock().failure.take()
}

/// Whether a thread will take the input over when the one holding it lets go; starts
/// one when none is waiting and fewer than [`READERS`] take turns. Called with the
/// input held, so nobody stops waiting meanwhile.
pub fn next_reader_ready(server: &Arc<Server>) -> bool {
    let input = &server.input;
    if input.waiting.load(Ordering::SeqCst) > 0 {
        return true;
    }
    if input.readers.load(Ordering::SeqCst) >= READERS {
        return false;
    }
    input.waiting.fetch_add(1, Ordering::SeqCst);
    input.readers.fetch_add(1, Ordering::SeqCst);
    let next = Arc::clone(server);
    match std::thread::Builder::new().name("hermes-serve-read".into()).spawn(move || take_turns(&next)) {
        Ok(_) => true,
        Err(_) => {
            input.waiting.fetch_sub(1, Ordering::SeqCst);
            input.readers.fetch_sub(1, Ordering::SeqCst);
            false
        }
    }
}

/// Reads while this thread holds the input, runs the call that made it let go, and
/// queues up to read again; returns once the input has ended. The caller has counted
/// this thread in `waiting`.
fn take_turns(server: &Arc<Server>) {
    loop {
        let mut state = server.input.wait_turn();
        server.input.waiting.fetch_sub(1, Ordering::SeqCst);
        let started = loop {
            if state.ended {
                return;
            }
            if let Some(started) = read_line(server, &mut state) {
                break started;
            }
        };
        drop(state);
        server.run_started(started);
        server.input.waiting.fetch_add(1, Ordering::SeqCst);
    }
}

/// Reads one line and serves it; a call to run on this thread comes back.
fn read_line(server: &Arc<Server>, state: &mut State) -> Option<Started> {
    let State { lines, number, ended, failure } = state;
    let Some(line) = lines.next_line() else {
        *ended = true;
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
            server.output.send_one(line_error(format!("cannot read input: {e}"), *number));
            *failure = Some(e);
            *ended = true;
            server.clarify.close();
            None
        }
    }
}
