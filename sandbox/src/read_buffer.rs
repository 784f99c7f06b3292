//! 64 KiB buffers for reads of unknown size that come before and after every command
//! (its output, the table of the host's sockets): on the heap, never zeroed, and a few
//! kept for the next reads, so a read touches only the pages the kernel writes into. A
//! zeroed buffer per read was zeroed and faulted in whole every time and handed back to
//! the kernel when freed; one on the stack was touched whole by the stack probe of every
//! thread that read, and one per thread kept a page or more in each of a server's
//! threads.

use std::sync::Mutex;

pub(crate) const SIZE: usize = 64 * 1024;

/// As many as reads that overlap in a busy server; more are freed after use.
const KEPT: usize = 4;

static SPARE: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());

/// Runs `use_it` with a buffer kept from an earlier read, or a new one.
pub(crate) fn with<T>(use_it: impl FnOnce(&mut Vec<u8>) -> T) -> T {
    let spare = || SPARE.lock().unwrap_or_else(|p| p.into_inner());
    let mut buffer = spare().pop().unwrap_or_default();
    let answer = use_it(&mut buffer);
    let mut kept = spare();
    if kept.len() < KEPT {
        kept.push(buffer);
    }
    answer
}

/// Empties `buffer` and has `read` (a `read(2)`-like call, given where to write and how
/// much room there is) fill it, [`SIZE`] bytes at most; what `read` answered.
pub(crate) fn fill(
    buffer: &mut Vec<u8>,
    read: impl FnOnce(*mut libc::c_void, usize) -> isize,
) -> isize {
    buffer.clear();
    buffer.reserve(SIZE);
    let got = read(buffer.as_mut_ptr().cast(), SIZE);
    if got > 0 {
        // SAFETY: `read` wrote the first `got` bytes (at most SIZE, within the capacity).
        unsafe { buffer.set_len((got as usize).min(SIZE)) };
    }
    got
}
