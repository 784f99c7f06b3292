//! Fair scheduling of calls: one queue per task, tasks served round-robin.
//!
//! A task has at most `per_task` calls running; the server at most `total` (the
//! number of worker threads, started as they are needed). A call beyond those waits
//! in its task's queue, so a task with hundreds of calls queued delays only itself:
//! the next free worker goes to the next task in line, not to the longest queue.
//! Queues are bounded too (calls per task, calls and bytes in all); a call that does
//! not fit is refused at once. A task whose queue is empty and nothing running is
//! forgotten, so finished calls leave nothing behind.
//!
//! Within a task, calls start in arrival order, and a call whose access (what it
//! reads, writes or holds exclusively, as [`hermes_runtime::batch`] works it out for
//! an array) conflicts with a call of the task still running waits for it: the same
//! turn rules as an array, across lines. Reads overlap; writes to one path and
//! exclusive tools (`terminal`, ...) run, and so answer, one after another.
//!
//! A call that can start at once (nothing waits anywhere, both bounds have room and
//! nothing of its task in the way) may be run by the thread that read it instead
//! ([`Scheduler::start_now`]): it counts against the same bounds and overtakes nobody,
//! and the call skips a hand-off to another thread.

use hermes_runtime::batch::{conflicts, Access};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How long one idle worker watches for the next call before it sleeps: a client
/// sending call after call gets its next call picked up without a thread wake-up
/// (tens of microseconds on a busy machine). One worker at most watches, and it
/// yields its core between looks: on a machine with more runnable threads than cores
/// a busy spin would keep the reader thread (which has to read that next call) off
/// the core for the whole watch.
const SPIN: Duration = Duration::from_micros(200);

#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Worker threads, hence calls running at once.
    pub total: usize,
    pub per_task: usize,
    pub queued_per_task: usize,
    pub queued: usize,
    pub queued_bytes: usize,
}

pub type Job = Box<dyn FnOnce() + Send + 'static>;

struct Waiting {
    job: Job,
    bytes: usize,
    access: Vec<Access>,
}

#[derive(Default)]
struct TaskQueue {
    waiting: VecDeque<Waiting>,
    /// The calls running, by serial, with their access.
    running: Vec<(u64, Vec<Access>)>,
    in_line: bool,
}

impl TaskQueue {
    /// Whether a call with `access` may start beside the task's running calls.
    fn admits(&self, access: &[Access], per_task: usize) -> bool {
        self.running.len() < per_task
            && self.running.iter().all(|(_, running)| {
                running
                    .iter()
                    .all(|r| access.iter().all(|a| !conflicts(r, a)))
            })
    }

    /// Whether the task's next waiting call may start now.
    fn next_may_start(&self, per_task: usize) -> bool {
        self.waiting
            .front()
            .is_some_and(|next| self.admits(&next.access, per_task))
    }
}

/// A call marked running: hand it back to [`Scheduler::done`] when it has finished.
pub struct Slot {
    task: Arc<str>,
    serial: u64,
}

#[derive(Default)]
struct State {
    tasks: HashMap<Arc<str>, TaskQueue>,
    /// Tasks with a call waiting and a free slot, in turn order.
    line: VecDeque<Arc<str>>,
    queued: usize,
    queued_bytes: usize,
    running: usize,
    workers: usize,
    idle: usize,
    closing: bool,
    serials: u64,
}

pub struct Scheduler {
    limits: Limits,
    state: Mutex<State>,
    work: Condvar,
    drained: Condvar,
    /// Tasks in line, readable without the lock (for the spinning worker).
    in_line: AtomicUsize,
    spinning: AtomicBool,
}

impl Scheduler {
    pub fn new(limits: Limits) -> Arc<Scheduler> {
        let limits = Limits {
            total: limits.total.max(1),
            per_task: limits.per_task.max(1),
            queued_per_task: limits.queued_per_task.max(1),
            queued: limits.queued.max(1),
            queued_bytes: limits.queued_bytes.max(1),
        };
        Arc::new(Scheduler {
            limits,
            state: Mutex::default(),
            work: Condvar::new(),
            drained: Condvar::new(),
            in_line: AtomicUsize::new(0),
            spinning: AtomicBool::new(false),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `job` for `task`, which touches `access`; `Err` says why it was refused.
    pub fn submit(
        self: &Arc<Self>,
        task: &str,
        bytes: usize,
        access: Vec<Access>,
        job: Job,
    ) -> Result<(), String> {
        let limits = self.limits;
        let mut state = self.lock();
        let waiting_here = state.tasks.get(task).map_or(0, |t| t.waiting.len());
        if waiting_here >= limits.queued_per_task {
            return Err(format!(
                "task {task:?} already has {waiting_here} calls waiting (serve.max_queued_per_task); wait for their answers before sending more"
            ));
        }
        if state.queued >= limits.queued {
            return Err(format!(
                "the server already has {} calls waiting (serve.max_queued); wait for answers before sending more",
                state.queued
            ));
        }
        if state.queued > 0 && state.queued_bytes + bytes > limits.queued_bytes {
            return Err(format!(
                "the calls waiting already hold {} bytes (serve.max_queued_bytes is {}); wait for answers before sending more",
                state.queued_bytes, limits.queued_bytes
            ));
        }
        let key: Arc<str> = match state.tasks.get_key_value(task) {
            Some((key, _)) => Arc::clone(key),
            None => Arc::from(task),
        };
        state.queued += 1;
        state.queued_bytes += bytes;
        let queue = state.tasks.entry(Arc::clone(&key)).or_default();
        queue.waiting.push_back(Waiting { job, bytes, access });
        let joins_line = !queue.in_line && queue.next_may_start(limits.per_task);
        if joins_line {
            queue.in_line = true;
            state.line.push_back(key);
            self.in_line.store(state.line.len(), Ordering::SeqCst);
        }
        if !self.spinning.load(Ordering::SeqCst) {
            self.wake_for_line(&mut state);
        }
        Ok(())
    }

    /// Marks a call of `task` (touching `access`) running on the caller's own thread,
    /// when it can start at once without overtaking anyone: no call waits anywhere, the
    /// server and the task both have a free slot, and no running call of the task is in
    /// its way. The caller runs it and then calls [`Scheduler::done`] with the slot.
    pub fn start_now(&self, task: &str, access: &[Access]) -> Option<Slot> {
        let mut state = self.lock();
        if state.closing || state.queued > 0 || state.running >= self.limits.total {
            return None;
        }
        let key: Arc<str> = match state.tasks.get_key_value(task) {
            Some((_, queue)) if !queue.admits(access, self.limits.per_task) => return None,
            Some((key, _)) => Arc::clone(key),
            None => Arc::from(task),
        };
        state.serials += 1;
        let serial = state.serials;
        state
            .tasks
            .entry(Arc::clone(&key))
            .or_default()
            .running
            .push((serial, access.to_vec()));
        state.running += 1;
        Some(Slot { task: key, serial })
    }

    /// A call started with [`Scheduler::start_now`] has finished.
    pub fn done(self: &Arc<Self>, slot: &Slot) {
        let mut state = self.lock();
        self.finished(&mut state, slot);
        self.wake_for_line(&mut state);
    }

    /// Gets a worker to the calls in line: an idle one, else a new one if the limit
    /// allows (else the next worker to finish takes them).
    fn wake_for_line(self: &Arc<Self>, state: &mut State) {
        if state.line.is_empty() || state.running >= self.limits.total {
            return;
        }
        if state.idle > 0 {
            self.work.notify_one();
        } else if state.workers < self.limits.total {
            state.workers += 1;
            let scheduler = Arc::clone(self);
            let spawned = std::thread::Builder::new()
                .name("hermes-serve-call".into())
                .spawn(move || scheduler.work_loop());
            if spawned.is_err() {
                state.workers -= 1;
            }
        }
    }

    /// Takes the next call in turn order, marking it running; `None` also when as many
    /// calls run as the server allows (some on the threads that read them).
    fn next_job(&self, state: &mut State) -> Option<(Slot, Job)> {
        if state.running >= self.limits.total {
            return None;
        }
        let task = state.line.pop_front()?;
        self.in_line.store(state.line.len(), Ordering::SeqCst);
        state.serials += 1;
        let serial = state.serials;
        let queue = state
            .tasks
            .get_mut(&task)
            .expect("a task in line has a queue");
        let Waiting { job, bytes, access } = queue
            .waiting
            .pop_front()
            .expect("a task in line has a call waiting");
        queue.running.push((serial, access));
        let again = queue.next_may_start(self.limits.per_task);
        queue.in_line = again;
        if again {
            state.line.push_back(Arc::clone(&task));
            self.in_line.store(state.line.len(), Ordering::SeqCst);
        }
        state.queued -= 1;
        state.queued_bytes -= bytes;
        state.running += 1;
        Some((Slot { task, serial }, job))
    }

    fn finished(&self, state: &mut State, slot: &Slot) {
        state.running -= 1;
        let task = &slot.task;
        let queue = state
            .tasks
            .get_mut(task)
            .expect("a running task has a queue");
        queue.running.retain(|(serial, _)| *serial != slot.serial);
        if queue.waiting.is_empty() && queue.running.is_empty() {
            state.tasks.remove(task);
        } else if !queue.in_line && queue.next_may_start(self.limits.per_task) {
            queue.in_line = true;
            state.line.push_back(Arc::clone(task));
            self.in_line.store(state.line.len(), Ordering::SeqCst);
        }
        if state.tasks.is_empty() {
            state.tasks.shrink_to(64);
            state.line.shrink_to(64);
            // Only `finish` waits for this, once closing: a wake-up is a system call.
            if state.closing {
                self.drained.notify_all();
            }
        }
    }

    fn work_loop(self: Arc<Self>) {
        let mut state = self.lock();
        loop {
            if let Some((slot, job)) = self.next_job(&mut state) {
                // More in line (a burst the spinning worker alone picked up).
                self.wake_for_line(&mut state);
                drop(state);
                // A panicking job must not take the worker (and its slot) with it.
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
                state = self.lock();
                self.finished(&mut state, &slot);
                continue;
            }
            if state.closing && state.tasks.is_empty() {
                state.workers -= 1;
                self.work.notify_all();
                return;
            }
            if !state.closing && !self.spinning.swap(true, Ordering::SeqCst) {
                drop(state);
                self.spin_for_work();
                state = self.lock();
                self.spinning.store(false, Ordering::SeqCst);
                if !state.line.is_empty() && state.running < self.limits.total {
                    continue;
                }
            }
            state.idle += 1;
            state = self.work.wait(state).unwrap_or_else(|p| p.into_inner());
            state.idle -= 1;
        }
    }

    /// Watches for a call for [`SPIN`]; returns early when one is in line.
    fn spin_for_work(&self) {
        let started = Instant::now();
        while self.in_line.load(Ordering::SeqCst) == 0 && started.elapsed() < SPIN {
            std::thread::yield_now();
        }
    }

    /// Waits until every queued and running call has finished; the workers then exit.
    pub fn finish(&self) {
        let mut state = self.lock();
        state.closing = true;
        self.work.notify_all();
        while !state.tasks.is_empty() {
            state = self.drained.wait(state).unwrap_or_else(|p| p.into_inner());
        }
        self.work.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    fn limits(total: usize, per_task: usize) -> Limits {
        Limits {
            total,
            per_task,
            queued_per_task: 100,
            queued: 100,
            queued_bytes: 1 << 20,
        }
    }

    fn job(sender: &mpsc::Sender<&'static str>, note: &'static str) -> Job {
        let sender = sender.clone();
        Box::new(move || sender.send(note).unwrap())
    }

    #[test]
    fn a_call_starts_at_once_only_with_a_free_slot_and_nobody_waiting() {
        let scheduler = Scheduler::new(limits(4, 1));
        let first = scheduler.start_now("a", &[]).expect("nothing runs yet");
        assert!(
            scheduler.start_now("a", &[]).is_none(),
            "task a has its one slot taken"
        );
        let (sender, ran) = mpsc::channel();
        scheduler
            .submit("a", 10, Vec::new(), job(&sender, "queued call of a"))
            .unwrap();
        assert!(
            scheduler.start_now("b", &[]).is_none(),
            "a call of b would overtake the call of a that waits"
        );
        scheduler.done(&first);
        assert_eq!(
            ran.recv_timeout(Duration::from_secs(30)).unwrap(),
            "queued call of a"
        );
        scheduler.finish();
        let again = scheduler.start_now("b", &[]);
        assert!(again.is_none(), "a closing scheduler starts nothing");
    }

    #[test]
    fn calls_started_at_once_count_against_max_in_flight() {
        let scheduler = Scheduler::new(limits(1, 4));
        let running = scheduler.start_now("a", &[]).expect("nothing runs yet");
        let (sender, ran) = mpsc::channel();
        scheduler
            .submit("b", 10, Vec::new(), job(&sender, "call of b"))
            .unwrap();
        // The one slot is taken: no worker may run b until a is done.
        assert!(
            ran.recv_timeout(Duration::from_millis(300)).is_err(),
            "b ran beside a with max_in_flight 1"
        );
        scheduler.done(&running);
        assert_eq!(
            ran.recv_timeout(Duration::from_secs(30)).unwrap(),
            "call of b"
        );
        scheduler.finish();
    }
}
