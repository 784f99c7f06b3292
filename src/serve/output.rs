//! The server's output: every line the server writes (answers, requests to the
//! client, notifications) goes through [`Output::send`].
//!
//! Writers write themselves, under one lock, so lines never interleave and nothing
//! waits in a queue of its own: a client that stops reading blocks the writers, which
//! hold their call slots, so no new calls start, the input queue fills to its bounds
//! and the reader blocks on its next refusal. Memory stays bounded by the queue
//! limits. A flush happens only when no other writer is waiting, so answers that are
//! ready together leave in one write.

use std::io::{BufWriter, Write};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

const BUFFER_BYTES: usize = 64 * 1024;

pub struct Output {
    writer: Mutex<BufWriter<Box<dyn Write + Send>>>,
    waiting: AtomicUsize,
    broken: AtomicBool,
}

impl Output {
    pub fn new(output: Box<dyn Write + Send>) -> Output {
        Output {
            writer: Mutex::new(BufWriter::with_capacity(BUFFER_BYTES, output)),
            waiting: AtomicUsize::new(0),
            broken: AtomicBool::new(false),
        }
    }

    /// Writes `lines` together, each followed by `\n`. After the client has closed
    /// its end, lines are dropped (there is nobody to read them).
    pub fn send(&self, lines: &[String]) {
        if self.broken.load(Ordering::Relaxed) {
            return;
        }
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let mut writer = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let mut result = Ok(());
        for line in lines {
            result = result
                .and_then(|_| writer.write_all(line.as_bytes()))
                .and_then(|_| writer.write_all(b"\n"));
        }
        // The last of a group of writers flushes for all of them.
        if self.waiting.fetch_sub(1, Ordering::SeqCst) == 1 {
            result = result.and_then(|_| writer.flush());
        }
        if result.is_err() {
            self.broken.store(true, Ordering::Relaxed);
        }
    }

    pub fn send_one(&self, line: String) {
        self.send(std::slice::from_ref(&line));
    }

    pub fn flush(&self) {
        let mut writer = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        if writer.flush().is_err() {
            self.broken.store(true, Ordering::Relaxed);
        }
    }
}
