//! Many tasks through one `serve`, with the command sandbox on (the default), against
//! the floor of the same commands run by `bash -c` from a thread pool as wide as serve's
//! default `max_in_flight` (32), in the same run:
//!
//! - TASKS tasks × CALLS terminal calls (`echo`), every line sent at once; wall time, and
//!   each call's time from the moment it was sent to its answer (p50, p99). Each task's
//!   first call starts its sandbox; the rest run in it.
//! - The CPU time of the whole process tree per call (user and system, of every process
//!   reaped: serve is ended by closing its input, so it ends its sandboxes, and each
//!   level reaps the one below), against the floor's.
//! - The cost of a sandbox start as sandboxes pile up: a fresh task's first call, with
//!   10, 100 and 400 tasks' sandboxes alive in the same server (median of 15 each, once
//!   the shells the filling calls started ahead for their tasks are up). A
//!   start that reads a table of every socket of the server grows with that number.
//!
//! - The memory one more idle task costs: the proportional set size (PSS) of serve and
//!   every process below it with 50 tasks idle (each ran `true` three times), less that
//!   with one, per task; then with 150 against 50, which leaves out what the server
//!   grows once (threads, their caches, the allocator's arenas). Both while the tasks
//!   are warm (their sandboxes kept for the next command) and once they have cooled
//!   down (`TERMINAL_KEEP_WARM_SECONDS`, here 1 s).
//!   Against the original's cost per idle task (benches/original_idle_tasks.py) when
//!   `HERMES_BENCH_ORIGINAL_PYTHON` names a Python that has hermes-agent installed;
//!   then the whole tree's PSS at 1, 50 and 150 idle tasks, each against the
//!   original's: what a server costs in all, what both sides pay once included.
//!
//! cargo bench --bench many_tasks [-- TASKS CALLS | memory]
//! (or `cargo bench --bench many_tasks --profile dev` to reuse the test build)

use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "support/original_python.rs"]
mod original_python;

const WIDTH: usize = 32;

struct Serve {
    child: Child,
    /// `None` once closed ([`Serve::finish`]).
    stdin: Option<ChildStdin>,
    answers: mpsc::Receiver<(String, Instant)>,
    _home: tempfile::TempDir,
}

impl Serve {
    fn start() -> Serve {
        // Idle sandboxes must stay alive for the pile-up measure.
        Serve::start_keeping_warm(3600)
    }

    /// A serve whose idle tasks cool down after `keep_warm` seconds.
    fn start_keeping_warm(keep_warm: u64) -> Serve {
        let home = tempfile::tempdir().unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_hermes-tools"))
            .args(["serve", "--toolsets", "terminal"])
            .env("HERMES_HOME", home.path())
            .env("TERMINAL_KEEP_WARM_SECONDS", keep_warm.to_string())
            .env("TERMINAL_LIFETIME_SECONDS", "3600")
            .current_dir(home.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("hermes-tools serve starts");
        let stdout = child.stdout.take().unwrap();
        let (sender, answers) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let at = Instant::now();
                let Ok(answer) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                if let Some(id) = answer["tool_call_id"].as_str() {
                    let ok = answer["content"]
                        .as_str()
                        .and_then(|c| serde_json::from_str::<Value>(c).ok())
                        .is_some_and(|c| c["exit_code"] == 0);
                    assert!(ok, "a call failed: {line}");
                    if sender.send((id.to_string(), at)).is_err() {
                        break;
                    }
                }
            }
        });
        let stdin = child.stdin.take().unwrap();
        Serve {
            child,
            stdin: Some(stdin),
            answers,
            _home: home,
        }
    }

    fn send(&mut self, id: &str, task: &str, command: &str) -> Instant {
        let line = json!({
            "id": id, "type": "function", "task_id": task,
            "function": {"name": "terminal", "arguments": json!({"command": command}).to_string()},
        });
        writeln!(self.stdin.as_mut().unwrap(), "{line}").unwrap();
        Instant::now()
    }

    fn flush(&mut self) {
        self.stdin.as_mut().unwrap().flush().unwrap();
    }

    /// Waits for the answers to `sent`; each call's time from sending to answer.
    fn collect(&self, sent: &HashMap<String, Instant>) -> Vec<Duration> {
        let mut times = Vec::with_capacity(sent.len());
        while times.len() < sent.len() {
            let (id, at) = self
                .answers
                .recv_timeout(Duration::from_secs(600))
                .expect("serve answers");
            if let Some(start) = sent.get(&id) {
                times.push(at - *start);
            }
        }
        times
    }

    fn one(&mut self, id: &str, task: &str) -> Duration {
        let start = self.send(id, task, "true");
        self.flush();
        let mut sent = HashMap::new();
        sent.insert(id.to_string(), start);
        self.collect(&sent)[0]
    }
}

impl Serve {
    /// Ends serve by closing its input (it ends its sandboxes at exit) and waits for it.
    fn finish(mut self) {
        self.stdin = None;
        let _ = self.child.wait();
    }
}

/// CPU time (user and system) of the children reaped so far, and of theirs.
fn children_cpu() -> Duration {
    // SAFETY: getrusage fills the structure it is given.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage);
        usage
    };
    let time = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    time(usage.ru_utime) + time(usage.ru_stime)
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The proportional set size (KiB) of `root` and every process below it.
fn tree_pss_kib(root: u32) -> u64 {
    let mut tree = common::descendants(root);
    tree.push(root);
    tree.iter()
        .filter_map(|pid| std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok())
        .flat_map(|rollup| {
            rollup
                .lines()
                .filter_map(|l| {
                    l.strip_prefix("Pss:")?
                        .trim()
                        .strip_suffix("kB")?
                        .trim()
                        .parse::<u64>()
                        .ok()
                })
                .collect::<Vec<_>>()
        })
        .sum()
}

/// Fresh tasks timed at each number of live sandboxes.
const FRESH_STARTS: usize = 15;

const IDLE_TASKS: usize = 50;
/// Idle tasks at the second measure: the cost of the tasks between the two is what one
/// more task costs once the server has settled (its threads, their caches and the
/// allocator's arenas grown), which the first measure also counts.
const MORE_IDLE_TASKS: usize = 150;

/// Serve's PSS (KiB) with one task, with IDLE_TASKS more that ran `true` three times and
/// were left idle for `idle`, then with MORE_IDLE_TASKS.
fn idle_tasks_pss(keep_warm: u64, idle: Duration) -> [u64; 3] {
    let mut serve = Serve::start_keeping_warm(keep_warm);
    serve.one("warm", "warm");
    std::thread::sleep(idle);
    let mut figures = [tree_pss_kib(serve.child.id()), 0, 0];
    for (figure, tasks) in [(1, 0..IDLE_TASKS), (2, IDLE_TASKS..MORE_IDLE_TASKS)] {
        // One call at a time, as the original's script makes them: what a burst of
        // calls at once leaves in the allocator is not a task's cost.
        for call in 0..3 {
            for task in tasks.clone() {
                serve.one(&format!("idle{task}-{call}"), &format!("idle{task}"));
            }
        }
        std::thread::sleep(idle);
        figures[figure] = tree_pss_kib(serve.child.id());
    }
    serve.finish();
    figures
}

/// The original's PSS (KiB) with one task, IDLE_TASKS and MORE_IDLE_TASKS idle, from
/// benches/original_idle_tasks.py.
fn original_idle_tasks_pss() -> Result<[u64; 3], String> {
    let line = original_python::last_line(
        "original_idle_tasks.py",
        &[IDLE_TASKS.to_string(), MORE_IDLE_TASKS.to_string()],
    )?;
    let figures: Vec<u64> = line.split(' ').filter_map(|f| f.parse().ok()).collect();
    figures
        .try_into()
        .map_err(|_| format!("no figures printed: {line}"))
}

/// KiB per task: the first idle tasks against one task, then the tasks between the two
/// measures.
fn per_task([one, first, more]: [u64; 3]) -> (f64, f64) {
    (
        first.saturating_sub(one) as f64 / IDLE_TASKS as f64,
        more.saturating_sub(first) as f64 / (MORE_IDLE_TASKS - IDLE_TASKS) as f64,
    )
}

fn idle_memory() {
    let warm = idle_tasks_pss(3600, Duration::from_secs(2));
    let cooled = idle_tasks_pss(1, Duration::from_secs(4));
    let original = original_idle_tasks_pss();
    println!(
        "the memory one more idle task costs (PSS of the process tree, KiB; {IDLE_TASKS} tasks against one, then {MORE_IDLE_TASKS} against {IDLE_TASKS}):"
    );
    let theirs_per_task = original.as_ref().ok().map(|figures| per_task(*figures));
    let against = |ours: f64, theirs: fn(&(f64, f64)) -> f64| match &theirs_per_task {
        Some(kib) if theirs(kib) > 0.0 => format!(" ({:.2}x the original)", ours / theirs(kib)),
        _ => String::new(),
    };
    for (what, figures) in [
        ("warm (sandbox kept for the next command)", warm),
        ("cooled down", cooled),
    ] {
        let (first, more) = per_task(figures);
        println!(
            "  {what:<41} {first:>8.1}{}; {more:>8.1}{}",
            against(first, |o| o.0),
            against(more, |o| o.1)
        );
    }
    if let Some((first, more)) = theirs_per_task {
        println!(
            "  {:<41} {first:>8.1}; {more:>8.1}",
            "the original, an environment per task"
        );
    }
    if let Err(e) = &original {
        println!("  the original: not measured ({e})");
    }
    // What a server costs in all, its start included: the per-task figures leave out
    // what both sides pay once.
    println!(
        "the whole process tree with 1, {IDLE_TASKS} and {MORE_IDLE_TASKS} idle tasks (PSS, KiB):"
    );
    let whole = |figures: [u64; 3]| -> String {
        let ratios = match &original {
            Ok(theirs) => format!(
                " ({})",
                figures
                    .iter()
                    .zip(theirs)
                    .map(|(ours, theirs)| format!("{:.2}x", *ours as f64 / *theirs as f64))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Err(_) => String::new(),
        };
        format!("{} {} {}{ratios}", figures[0], figures[1], figures[2])
    };
    println!("  {:<41} {}", "warm", whole(warm));
    println!("  {:<41} {}", "cooled down", whole(cooled));
    if let Ok(figures) = &original {
        println!(
            "  {:<41} {} {} {}",
            "the original", figures[0], figures[1], figures[2]
        );
    }
}

fn percentile(times: &mut [Duration], p: f64) -> Duration {
    times.sort();
    times[((times.len() - 1) as f64 * p).round() as usize]
}

/// The floor: the same commands by `bash -c`, from WIDTH threads taking jobs in order.
fn floor(tasks: usize, calls: usize) -> (Duration, Vec<Duration>) {
    let jobs: Vec<String> = (0..tasks * calls)
        .map(|i| format!("echo call {i}"))
        .collect();
    let queue = std::sync::Arc::new(std::sync::Mutex::new(jobs.into_iter()));
    let started = Instant::now();
    let workers: Vec<_> = (0..WIDTH)
        .map(|_| {
            let queue = std::sync::Arc::clone(&queue);
            std::thread::spawn(move || {
                let mut times = Vec::new();
                loop {
                    let Some(job) = queue.lock().unwrap().next() else {
                        break;
                    };
                    let status = Command::new("bash")
                        .args(["-c", &job])
                        .stdout(Stdio::null())
                        .status()
                        .unwrap();
                    assert!(status.success());
                    times.push(started.elapsed());
                }
                times
            })
        })
        .collect();
    let times: Vec<Duration> = workers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect();
    (started.elapsed(), times)
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let tasks = args.first().copied().unwrap_or(200);
    let calls = args.get(1).copied().unwrap_or(20);
    if std::env::args().any(|a| a == "memory") {
        idle_memory();
        return;
    }

    let cpu_before = children_cpu();
    let (floor_wall, mut floor_times) = floor(tasks, calls);
    let floor_cpu = children_cpu() - cpu_before;
    let cpu_before = children_cpu();
    let mut serve = Serve::start();
    let mut sent = HashMap::new();
    let started = Instant::now();
    // Call by call across tasks, as agents working side by side send them.
    for call in 0..calls {
        for task in 0..tasks {
            let id = format!("t{task}-c{call}");
            let at = serve.send(&id, &format!("task{task}"), &format!("echo call {call}"));
            sent.insert(id, at);
        }
    }
    serve.flush();
    let mut times = serve.collect(&sent);
    let wall = started.elapsed();
    let (p50, p99) = (percentile(&mut times, 0.5), percentile(&mut times, 0.99));
    let (floor_p50, floor_p99) = (
        percentile(&mut floor_times, 0.5),
        percentile(&mut floor_times, 0.99),
    );
    println!("{tasks} tasks x {calls} terminal calls, all sent at once (sandbox on):");
    println!(
        "  floor, bash -c from {WIDTH} threads: wall {floor_wall:>9.2?}  p50 {floor_p50:>9.2?}  p99 {floor_p99:>9.2?}"
    );
    println!(
        "  one serve:                       wall {wall:>9.2?}  p50 {p50:>9.2?}  p99 {p99:>9.2?}  ({:.2}x wall, {:.2}x p99)",
        wall.as_secs_f64() / floor_wall.as_secs_f64(),
        p99.as_secs_f64() / floor_p99.as_secs_f64()
    );
    serve.finish();
    let serve_cpu = children_cpu() - cpu_before;
    let per_call = |cpu: Duration| cpu / (tasks * calls) as u32;
    println!(
        "  CPU time of the process tree per call: serve {:>9.2?}, floor {:>9.2?}  ({:.2}x)",
        per_call(serve_cpu),
        per_call(floor_cpu),
        serve_cpu.as_secs_f64() / floor_cpu.as_secs_f64()
    );

    // A fresh task's first call (a sandbox start) as live sandboxes pile up.
    let mut serve = Serve::start();
    let mut live = 0;
    let mut first_at_10 = None;
    println!(
        "a fresh task's first call (a new sandbox), median of {FRESH_STARTS}, with N sandboxes alive:"
    );
    for target in [10usize, 100, 400] {
        let mut sent = HashMap::new();
        while live < target {
            let id = format!("fill{live}");
            sent.insert(id.clone(), serve.send(&id, &format!("fill{live}"), "true"));
            live += 1;
        }
        serve.flush();
        serve.collect(&sent);
        // Each filling call had its task's next shell started ahead, after its answer:
        // hundreds of them starting at once are not what a start costs.
        std::thread::sleep(Duration::from_secs(1));
        let mut firsts: Vec<Duration> = (0..FRESH_STARTS)
            .map(|i| serve.one(&format!("fresh{target}-{i}"), &format!("fresh{target}-{i}")))
            .collect();
        live += FRESH_STARTS;
        let median = percentile(&mut firsts, 0.5);
        let base = *first_at_10.get_or_insert(median);
        println!(
            "  N = {target:>3}: {median:>9.2?}  ({:.2}x of N = 10)",
            median.as_secs_f64() / base.as_secs_f64()
        );
    }
    drop(serve);

    idle_memory();
}
