//! execute_code in a remote terminal environment (docker/podman, ssh, singularity,
//! kubernetes): the
//! interpreter runs inside the task's environment, where its `terminal` runs, started
//! through [`Environment::run_bash`] like a terminal command.
//!
//! The tool calls travel on what every such backend already carries: each request is a
//! framed line on the run's own output stream (the script's stdout and stderr go to
//! files in a private folder of the run instead, kept within their caps as they are
//! written; for a caller that shows progress, stdout also comes on the stream as
//! framed chunks, as it arrives), and each answer is written back as a
//! file in that folder by a short command of its own. When the run ends, the capped
//! head and tail of the two files come back in one more command, and the folder goes.

use super::child::{Captured, Ending, Finished, MAX_STDERR_BYTES, MAX_STDOUT_BYTES};
use super::rpc::Dispatcher;
use super::stubs::{FRAME_PREFIX, STDOUT_FRAME_PREFIX};
use base64::Engine as _;
use hermes_environments::env::{sh_quote, Environment, ReadEvent, Running, Slot};
use serde_json::Value;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Writes the module and the script from stdin: `argv[1]` the folder, `argv[2]` the
/// module's length in bytes.
const UNPACK: &str = r#"import sys
d, n = sys.argv[1], int(sys.argv[2])
data = sys.stdin.buffer.read()
open(d + "/hermes_tools.py", "wb").write(data[:n])
open(d + "/script.py", "wb").write(data[n:])
"#;

/// Keeps what the script writes to one of its outputs within a fixed size on the
/// remote disk, as the local run keeps it in memory: the first 40% of the cap in
/// `argv[1]`, the last 60% in a ring file `argv[1].ring` (an 8-byte count of all bytes
/// seen, then the ring). Written as it arrives, so a run stopped at its timeout leaves
/// what it had printed. `argv[2]` the cap. With `argv[3]` (a lock file), each chunk also
/// goes to the run's stream as a stdout frame, written holding that lock as the tool
/// calls' frames are, so the two never interleave.
const CAP_OUTPUT: &str = r#"import base64, fcntl, os, sys
path, cap = sys.argv[1], int(sys.argv[2])
lock = open(sys.argv[3], "ab") if len(sys.argv) > 3 else None
head_cap = cap * 2 // 5
tail_cap = cap - head_cap
head = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
ring = os.open(path + ".ring", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
total = 0
while True:
    chunk = os.read(0, 65536)
    if not chunk:
        break
    if lock:
        frame = b"\x1ehermes-out:" + base64.b64encode(chunk) + b"\n"
        fcntl.flock(lock, fcntl.LOCK_EX)
        while frame:
            frame = frame[os.write(1, frame):]
        fcntl.flock(lock, fcntl.LOCK_UN)
    if total < head_cap:
        part = chunk[:head_cap - total]
        os.write(head, part)
        total += len(part)
        chunk = chunk[len(part):]
    if chunk and tail_cap:
        kept = chunk[-tail_cap:]
        at = (total + len(chunk) - len(kept) - head_cap) % tail_cap
        first = kept[:tail_cap - at]
        os.pwrite(ring, first, 8 + at)
        if len(kept) > len(first):
            os.pwrite(ring, kept[len(first):], 8)
    total += len(chunk)
    os.pwrite(ring, total.to_bytes(8, "little"), 0)
"#;

/// Prints, as JSON, each output's total size and its capped head and tail (as
/// [`CAP_OUTPUT`] kept them), base64-encoded: `argv[1]` the folder, then the caps of
/// stdout and stderr.
const COLLECT: &str = r#"import base64, json, os, sys
d = sys.argv[1]
out = {}
def read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""
for name, cap in (("stdout", int(sys.argv[2])), ("stderr", int(sys.argv[3]))):
    head_cap = cap * 2 // 5
    tail_cap = cap - head_cap
    head = read(os.path.join(d, name))[:head_cap]
    ring = read(os.path.join(d, name + ".ring"))
    total = max(len(head), int.from_bytes(ring[:8], "little") if len(ring) >= 8 else 0)
    ring = ring[8:8 + tail_cap]
    beyond = total - head_cap
    tail = b""
    if beyond > 0 and ring:
        n = min(beyond, tail_cap, len(ring))
        start = (beyond - n) % len(ring)
        tail = (ring[start:] + ring[:start])[:n]
    out[name] = [total, base64.b64encode(head).decode(), base64.b64encode(tail).decode()]
print(json.dumps(out))
"#;

/// Output of the run's stream that is not a request (a shell's complaint), kept this far.
const MAX_STREAM_NOISE: usize = 10_000;
/// How long one staging, answer or collecting command may take.
const STEP_TIMEOUT: Duration = Duration::from_secs(60);

pub struct Job<'a> {
    pub module: &'a str,
    pub code: &'a str,
    pub token: &'a str,
    pub timeout: Duration,
}

/// Runs the script in `slot`'s environment, answering its tool calls with `dispatcher`;
/// with `on_stdout`, the script's stdout is handed to it as it arrives (it still comes
/// back whole, within its cap, in the result).
pub fn run(
    slot: &Slot,
    job: Job<'_>,
    dispatcher: Arc<Dispatcher>,
    cancelled: &dyn Fn() -> bool,
    on_stdout: Option<&mut dyn FnMut(&str)>,
) -> Result<Finished, String> {
    let env = Arc::clone(&slot.env);
    let dir = format!(
        "{}/hermes-exec-{}",
        env.temp_dir().trim_end_matches('/'),
        hermes_environments::output::random_hex(12)
    );
    let q = sh_quote(&dir);
    let tee = if on_stdout.is_some() {
        format!(" {}", sh_quote(&format!("{dir}/stream.lock")))
    } else {
        String::new()
    };
    // The outputs go through CAP_OUTPUT, whose processes keep the run's stream open
    // until they have written everything, so the collecting step reads complete files.
    let command = format!(
        "(umask 077 && mkdir -p {q}) && python3 -c {unpack} {q} {n} && \
         HERMES_RPC_DIR={q} HERMES_RPC_OUT_FD=3 HERMES_RPC_TOKEN={token} PYTHONPATH={q}${{PYTHONPATH:+:$PYTHONPATH}} \
         PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 python3 {q}/script.py 3>&1 \
         > >(python3 -c {cap} {q}/stdout {MAX_STDOUT_BYTES}{tee}) 2> >(python3 -c {cap} {q}/stderr {MAX_STDERR_BYTES}) </dev/null",
        unpack = sh_quote(UNPACK),
        cap = sh_quote(CAP_OUTPUT),
        n = job.module.len(),
        token = sh_quote(job.token),
    );
    // Restores the task's shell state and working directory, and saves nothing back, so
    // the `cd` and exports of the script's own terminal calls are kept.
    let script = slot.session.wrap_background(&command, None);
    let bundle = [job.module.as_bytes(), job.code.as_bytes()].concat();
    let login = !slot.session.snapshot_ready();
    let mut running = env.run_bash(&script, login, Some(bundle)).map_err(|e| {
        format!(
            "cannot start the script in the {} environment: {e}",
            env.backend()
        )
    })?;

    let (requests, queue) = mpsc::channel::<(u64, Vec<u8>)>();
    let answerer = {
        let (env, dir) = (Arc::clone(&env), dir.clone());
        std::thread::Builder::new()
            .name("execute-code-remote-rpc".into())
            .spawn(move || {
                for (id, request) in queue {
                    let answer = dispatcher.answer_line(&request);
                    let path = sh_quote(&format!("{dir}/resp-{id}"));
                    // Written aside and renamed, so the script never reads half an answer.
                    let write = format!("cat > {path}.part && mv -f {path}.part {path}");
                    if let Err(e) = run_to_end(env.as_ref(), &write, Some(answer.into_bytes())) {
                        eprintln!("warning: execute_code could not answer a tool call in the {} environment: {e}", env.backend());
                    }
                }
            })
            .map_err(|e| format!("cannot start the tool-call thread: {e}"))?
    };

    let ending = pump(
        running.as_mut(),
        job.timeout,
        cancelled,
        &requests,
        on_stdout,
    );
    drop(requests);
    let _ = answerer.join();
    drop(running);

    let collect = format!(
        "python3 -c {collect} {q} {MAX_STDOUT_BYTES} {MAX_STDERR_BYTES}; rm -rf {q}",
        collect = sh_quote(COLLECT)
    );
    let (collected, _) = run_to_end(env.as_ref(), &collect, None)?;
    let (stdout, mut stderr) = parse_collected(&collected)?;
    if stderr.total == 0 && !ending.noise.is_empty() {
        // The interpreter never started (no python3, no folder): the shell said why.
        stderr = Captured {
            total: ending.noise.len(),
            head: ending.noise,
            tail: Vec::new(),
        };
    }
    Ok(Finished {
        ending: ending.ending,
        stdout,
        stderr,
    })
}

struct Pumped {
    ending: Ending,
    noise: Vec<u8>,
}

/// Reads the run's stream until it ends, sending each request on and handing the
/// stdout frames to `on_stdout`; stops the run at the timeout or on cancellation.
fn pump(
    running: &mut dyn Running,
    timeout: Duration,
    cancelled: &dyn Fn() -> bool,
    requests: &mpsc::Sender<(u64, Vec<u8>)>,
    mut on_stdout: Option<&mut dyn FnMut(&str)>,
) -> Pumped {
    let deadline = Instant::now() + timeout;
    let mut pending: Vec<u8> = Vec::new();
    let mut noise: Vec<u8> = Vec::new();
    let mut exited: Option<(i32, Instant)> = None;
    let mut eof = false;
    let mut decoder = hermes_environments::output::Utf8Decoder::new();
    let mut printed = String::new();
    let mut take_lines = |pending: &mut Vec<u8>, noise: &mut Vec<u8>, printed: &mut String| {
        while let Some(end) = pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            if let Some(frame) = line.strip_prefix(STDOUT_FRAME_PREFIX) {
                let chunk = base64::engine::general_purpose::STANDARD
                    .decode(frame.trim_ascii_end())
                    .unwrap_or_default();
                printed.push_str(&decoder.push(&chunk));
                continue;
            }
            match line.strip_prefix(FRAME_PREFIX) {
                Some(request) => {
                    let id = serde_json::from_slice::<Value>(request)
                        .ok()
                        .and_then(|r| r.get("id").and_then(Value::as_u64));
                    if let Some(id) = id {
                        let _ = requests.send((id, request.to_vec()));
                    }
                }
                None if noise.len() < MAX_STREAM_NOISE => {
                    noise.extend_from_slice(&line[..line.len().min(MAX_STREAM_NOISE - noise.len())])
                }
                None => {}
            }
        }
    };
    let ending = loop {
        if !eof {
            match running.read(Duration::from_millis(20)) {
                ReadEvent::Data(bytes) => {
                    pending.extend_from_slice(&bytes);
                    take_lines(&mut pending, &mut noise, &mut printed);
                }
                ReadEvent::Eof => eof = true,
                ReadEvent::Idle => {}
            }
        } else {
            std::thread::sleep(Duration::from_millis(5));
        }
        if let Some(on_stdout) = on_stdout.as_mut() {
            // Also when nothing came, so output waiting for its batch goes once due.
            on_stdout(&std::mem::take(&mut printed));
        }
        if exited.is_none() {
            exited = running.try_wait().map(|code| (code, Instant::now()));
        }
        if let Some((code, at)) = exited {
            if eof || at.elapsed() > Duration::from_millis(300) {
                break Ending::Exited(code);
            }
        }
        if cancelled() {
            running.kill(Duration::from_secs(2));
            break Ending::Cancelled;
        }
        if Instant::now() >= deadline {
            running.kill(Duration::from_secs(2));
            break Ending::TimedOut;
        }
    };
    if !pending.is_empty() {
        pending.push(b'\n');
        take_lines(&mut pending, &mut noise, &mut printed);
    }
    if let Some(on_stdout) = on_stdout.as_mut() {
        on_stdout(&std::mem::take(&mut printed));
    }
    Pumped { ending, noise }
}

/// Runs a short command in `env` to its end: its output and exit code.
fn run_to_end(
    env: &dyn Environment,
    script: &str,
    stdin: Option<Vec<u8>>,
) -> Result<(Vec<u8>, i32), String> {
    let mut running = env.run_bash(script, false, stdin).map_err(|e| e.reason)?;
    let deadline = Instant::now() + STEP_TIMEOUT;
    let mut out = Vec::new();
    let mut eof = false;
    loop {
        if !eof {
            match running.read(Duration::from_millis(20)) {
                ReadEvent::Data(bytes) => out.extend_from_slice(&bytes),
                ReadEvent::Eof => eof = true,
                ReadEvent::Idle => {}
            }
        }
        if eof {
            if let Some(code) = running.try_wait() {
                return Ok((out, code));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        if Instant::now() >= deadline {
            running.kill(Duration::from_secs(1));
            return Err(format!(
                "a step in the {} environment did not finish within {}s",
                env.backend(),
                STEP_TIMEOUT.as_secs()
            ));
        }
    }
}

fn parse_collected(raw: &[u8]) -> Result<(Captured, Captured), String> {
    let text = String::from_utf8_lossy(raw);
    let line = text
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .unwrap_or_default();
    let parsed: Value = serde_json::from_str(line)
        .map_err(|_| format!("cannot read the script's output back: {}", text.trim()))?;
    let decode = |name: &str| -> Result<Captured, String> {
        let entry = &parsed[name];
        let part = |i: usize| {
            base64::engine::general_purpose::STANDARD.decode(entry[i].as_str().unwrap_or_default())
        };
        Ok(Captured {
            total: entry[0].as_u64().unwrap_or(0) as usize,
            head: part(1).map_err(|e| format!("cannot decode the script's {name}: {e}"))?,
            tail: part(2).map_err(|e| format!("cannot decode the script's {name}: {e}"))?,
        })
    };
    Ok((decode("stdout")?, decode("stderr")?))
}
