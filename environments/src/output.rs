//! Output handling for commands: incremental UTF-8 decoding, a bounded head/tail
//! capture that spills the whole text to a private file when it overflows, secret
//! redaction and the meanings of common exit codes.

use std::collections::VecDeque;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// `tool_output.max_bytes` default: characters of output a foreground call returns.
pub const DEFAULT_MAX_OUTPUT: usize = 50_000;
/// Most characters a spill file holds.
pub const SPILL_MAX_CHARS: usize = 5_000_000;
/// Spill files older than this are pruned.
const SPILL_MAX_AGE_SECS: u64 = 7 * 24 * 3600;

/// Decodes UTF-8 that arrives in arbitrary chunks: a sequence split across chunks is
/// joined, invalid bytes become U+FFFD, and an incomplete tail at the end becomes one
/// U+FFFD.
#[derive(Default)]
pub struct Utf8Decoder {
    pending: Vec<u8>,
}

impl Utf8Decoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Decodes what can be decoded of `pending + chunk`, keeping an incomplete trailing
    /// sequence for the next call.
    pub fn push(&mut self, chunk: &[u8]) -> String {
        let mut buf = std::mem::take(&mut self.pending);
        buf.extend_from_slice(chunk);
        let mut out = String::with_capacity(buf.len());
        let mut rest: &[u8] = &buf;
        loop {
            match std::str::from_utf8(rest) {
                Ok(text) => {
                    out.push_str(text);
                    break;
                }
                Err(e) => {
                    let (valid, after) = rest.split_at(e.valid_up_to());
                    // SAFETY-free: `valid` was just checked.
                    out.push_str(std::str::from_utf8(valid).unwrap_or_default());
                    match e.error_len() {
                        Some(n) => {
                            out.push('\u{FFFD}');
                            rest = &after[n..];
                        }
                        None => {
                            self.pending = after.to_vec();
                            break;
                        }
                    }
                }
            }
        }
        out
    }

    /// The end of the stream: an incomplete sequence left over is one U+FFFD.
    pub fn finish(&mut self) -> String {
        if self.pending.is_empty() {
            String::new()
        } else {
            self.pending.clear();
            "\u{FFFD}".to_string()
        }
    }
}

/// Keeps the first 40 % and the last 60 % of `max_chars` characters of a stream; when
/// the stream is longer, the whole stream (up to [`SPILL_MAX_CHARS`]) goes to a spill
/// file as it arrives.
pub struct BoundedCapture {
    max_chars: usize,
    head_cap: usize,
    tail_cap: usize,
    head: String,
    head_chars: usize,
    tail: VecDeque<char>,
    total_chars: usize,
    spill_dir: Option<PathBuf>,
    spill: Option<(PathBuf, File)>,
    spilled_chars: usize,
    spill_failed: bool,
}

/// The captured text of one command.
#[derive(Debug, Clone, PartialEq)]
pub struct Captured {
    /// The text to show: everything, or head + notice + tail.
    pub text: String,
    pub total_chars: usize,
    pub truncated: bool,
    pub omitted_chars: usize,
    /// The spill file with the whole output, when it overflowed and saving worked.
    pub full_output_path: Option<PathBuf>,
    /// The spill file stopped at [`SPILL_MAX_CHARS`].
    pub spill_capped: bool,
}

impl BoundedCapture {
    /// `spill_dir`: where overflowing output is saved (`None`: never saved).
    pub fn new(max_chars: usize, spill_dir: Option<PathBuf>) -> Self {
        let max_chars = max_chars.max(10);
        let head_cap = (max_chars as f64 * 0.4) as usize;
        Self {
            max_chars,
            head_cap,
            tail_cap: max_chars - head_cap,
            head: String::new(),
            head_chars: 0,
            tail: VecDeque::new(),
            total_chars: 0,
            spill_dir,
            spill: None,
            spilled_chars: 0,
            spill_failed: false,
        }
    }

    pub fn total_chars(&self) -> usize {
        self.total_chars
    }

    pub fn push_str(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        let overflowed_before = self.total_chars > self.max_chars;
        for c in text.chars() {
            self.total_chars += 1;
            if self.head_chars < self.head_cap {
                self.head.push(c);
                self.head_chars += 1;
            } else {
                self.tail.push_back(c);
            }
        }
        if self.total_chars > self.max_chars {
            if !overflowed_before {
                // First overflow: everything so far is still in head + tail.
                self.open_spill();
                let mut so_far = self.head.clone();
                so_far.extend(self.tail.iter());
                self.write_spill(&so_far);
            } else {
                self.write_spill(text);
            }
            while self.tail.len() > self.tail_cap {
                self.tail.pop_front();
            }
        }
    }

    fn open_spill(&mut self) {
        let Some(dir) = self.spill_dir.clone() else {
            return;
        };
        match create_spill_file(&dir) {
            Ok(pair) => self.spill = Some(pair),
            Err(_) => self.spill_failed = true,
        }
    }

    fn write_spill(&mut self, text: &str) {
        let Some((_, file)) = self.spill.as_mut() else {
            return;
        };
        if self.spilled_chars >= SPILL_MAX_CHARS {
            return;
        }
        let room = SPILL_MAX_CHARS - self.spilled_chars;
        let piece: &str = match text.char_indices().nth(room) {
            Some((idx, _)) => &text[..idx],
            None => text,
        };
        let n = piece.chars().count();
        if file.write_all(piece.as_bytes()).is_err() {
            self.spill_failed = true;
            self.spill = None;
            return;
        }
        self.spilled_chars += n;
    }

    /// Edits the end of the stream before [`finish`](Self::finish) (e.g. to remove a
    /// trailing marker line); character counts follow the edit.
    pub fn edit_end(&mut self, edit: impl FnOnce(&mut String)) {
        if self.total_chars <= self.max_chars {
            let mut all = std::mem::take(&mut self.head);
            all.extend(self.tail.drain(..));
            edit(&mut all);
            self.total_chars = all.chars().count();
            self.head_chars = 0;
            for c in all.chars() {
                if self.head_chars < self.head_cap {
                    self.head.push(c);
                    self.head_chars += 1;
                } else {
                    self.tail.push_back(c);
                }
            }
        } else {
            let mut tail: String = self.tail.drain(..).collect();
            let before = tail.chars().count();
            edit(&mut tail);
            let after = tail.chars().count();
            self.total_chars = self.total_chars + after - before;
            self.tail = tail.chars().collect();
        }
    }

    /// The text to show, and where the whole text went.
    pub fn finish(mut self) -> Captured {
        if self.total_chars <= self.max_chars {
            let mut text = self.head;
            text.extend(self.tail.iter());
            return Captured {
                text,
                total_chars: self.total_chars,
                truncated: false,
                omitted_chars: 0,
                full_output_path: None,
                spill_capped: false,
            };
        }
        let spill_capped =
            self.spilled_chars >= SPILL_MAX_CHARS && self.total_chars > SPILL_MAX_CHARS;
        let path = self.spill.take().map(|(path, file)| {
            drop(file);
            path
        });
        let omitted = self.total_chars - self.head_chars - self.tail.len();
        let where_ = match &path {
            Some(p) if spill_capped => format!(
                "; the first {SPILL_MAX_CHARS} characters are saved in {} (read it with read_file or search_files)",
                p.display()
            ),
            Some(p) => format!("; the full output is saved in {} (read it with read_file or search_files)", p.display()),
            None => String::new(),
        };
        let notice = format!(
            "\n\n[... output truncated: {omitted} characters omitted of {} total{where_} ...]\n\n",
            self.total_chars
        );
        let mut text = self.head;
        text.push_str(&notice);
        text.extend(self.tail.iter());
        Captured {
            text,
            total_chars: self.total_chars,
            truncated: true,
            omitted_chars: omitted,
            full_output_path: path,
            spill_capped,
        }
    }
}

/// A new private file `out-<epoch>-<pid>-<hex>.log` in `dir` (created 0700), after
/// pruning week-old ones.
fn create_spill_file(dir: &Path) -> std::io::Result<(PathBuf, File)> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    prune_old_spills(dir);
    let epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let path = dir.join(format!(
        "out-{epoch}-{}-{}.log",
        std::process::id(),
        random_hex(8)
    ));
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)?;
    Ok((path, file))
}

fn prune_old_spills(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let now = std::time::SystemTime::now();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if !(name.starts_with("out-") && name.ends_with(".log")) {
            continue;
        }
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|m| now.duration_since(m).ok())
            .is_some_and(|age| age.as_secs() > SPILL_MAX_AGE_SECS);
        if old {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Rewrites a finished spill file with ANSI stripped and secrets redacted.
pub fn clean_spill_file(path: &Path, command: &str) {
    let Ok(text) = std::fs::read_to_string(path) else {
        return;
    };
    let cleaned = redact(&hermes_command_guard::strip_ansi(&text), command);
    if cleaned != text {
        let _ = std::fs::write(path, cleaned);
    }
}

/// `n` random lowercase hex digits (from the OS, falling back to time and a counter).
/// A fresh id for one command run on a backend (its marker and file names): random, so
/// no other process guesses it, plus the backend's own count of runs.
pub fn run_id(runs: &std::sync::atomic::AtomicU64) -> String {
    format!(
        "{}-{}",
        random_hex(8),
        runs.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    )
}

pub use hermes_runtime::random::random_hex;

// ------------------------------------------------------------------ redaction

/// Masks secrets in command output: the runtime's one rule set
/// ([`hermes_runtime::redact::redact_output`]).
pub fn redact(output: &str, command: &str) -> String {
    hermes_runtime::redact::redact_output(output, command)
}

// ------------------------------------------------------------------ exit codes

/// What a non-zero exit code usually means, when that is well known.
pub fn exit_code_meaning(command: &str, code: i32) -> Option<String> {
    if code == 0 {
        return None;
    }
    let signal = if code < 0 {
        Some(-code)
    } else if code > 128 && code < 160 {
        Some(code - 128)
    } else {
        None
    };
    if let Some(sig) = signal {
        if code != 130 {
            let what = match sig {
                3 => Some("killed by SIGQUIT (quit, core dumped)"),
                4 => Some("killed by SIGILL (illegal instruction)"),
                6 => Some("killed by SIGABRT (aborted, e.g. an assertion or abort())"),
                7 => Some("killed by SIGBUS (bus error: bad memory access)"),
                8 => Some("killed by SIGFPE (arithmetic error such as division by zero)"),
                9 => Some("killed by SIGKILL; if nobody killed it, the system may have run out of memory (OOM killer)"),
                11 => Some("killed by SIGSEGV (segmentation fault)"),
                13 => Some("killed by SIGPIPE (wrote to a pipe whose reader had exited, common with `| head`)"),
                15 => Some("killed by SIGTERM (terminated)"),
                24 => Some("killed by SIGXCPU (CPU time limit exceeded)"),
                25 => Some("killed by SIGXFSZ (file size limit exceeded)"),
                _ => None,
            };
            if let Some(what) = what {
                return Some(what.to_string());
            }
        }
    }
    let last = last_command_word(command)?;
    let meaning = match (last.as_str(), code) {
        ("grep" | "egrep" | "fgrep" | "zgrep" | "rg" | "ag" | "ack", 1) => "no matches found (not an error)",
        ("diff" | "cmp", 1) => "the inputs differ (not an error)",
        ("find", 1) => "some paths could not be read (e.g. permission denied); other results may still be valid",
        ("test" | "[" | "[[", 1) => "the condition was false (not an error)",
        ("curl", 6) => "could not resolve the host (DNS)",
        ("curl", 7) => "could not connect to the host",
        ("curl", 22) => "the server answered with an HTTP error (400 or above)",
        ("curl", 28) => "the request timed out",
        ("git", 1) => "git reported a normal negative result (e.g. nothing to commit, or differences found)",
        _ => return None,
    };
    Some(meaning.to_string())
}

/// The command word of the last pipeline segment, behind simple wrappers.
fn last_command_word(command: &str) -> Option<String> {
    let segment = command
        .rsplit(['|', ';', '&', '\n'])
        .map(str::trim)
        .find(|s| !s.is_empty())?;
    let words = segment.split_whitespace().peekable();
    for word in words {
        if word.contains('=') && !word.starts_with('-') && !word.starts_with('=') {
            continue;
        }
        if matches!(
            word,
            "sudo" | "env" | "time" | "nice" | "command" | "exec" | "nohup" | "!"
        ) {
            continue;
        }
        if word.starts_with('-') {
            continue;
        }
        let base = word.rsplit('/').next().unwrap_or(word);
        return Some(
            base.trim_matches(|c| c == '(' || c == ')' || c == '{')
                .to_string(),
        );
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decoder_joins_split_sequences() {
        let mut d = Utf8Decoder::new();
        let mut s = d.push(b"caf\xc3");
        s += &d.push(b"\xa9 ok\n");
        s += &d.finish();
        assert_eq!(s, "café ok\n");
        let mut d = Utf8Decoder::new();
        let emoji = "😀".as_bytes();
        let mut s = String::new();
        for b in emoji {
            s += &d.push(&[*b]);
        }
        assert_eq!(s, "😀");
        let mut d = Utf8Decoder::new();
        assert_eq!(d.push(b"a\xffb"), "a\u{FFFD}b");
        assert_eq!(d.push(b"x\xe2\x82"), "x");
        assert_eq!(d.finish(), "\u{FFFD}");
    }

    #[test]
    fn capture_keeps_head_and_tail() {
        let mut c = BoundedCapture::new(100, None);
        for _ in 0..30 {
            c.push_str("0123456789");
        }
        let out = c.finish();
        assert!(out.truncated);
        assert_eq!(out.total_chars, 300);
        assert_eq!(out.omitted_chars, 200);
        assert!(out.text.starts_with(&"0123456789".repeat(4)));
        assert!(out.text.ends_with(&"0123456789".repeat(6)));
    }

    #[test]
    fn redaction() {
        let r = redact(
            "key sk-abcdefghijklmnopqrstuvwx and AKIAABCDEFGHIJKLMNOP",
            "echo",
        );
        assert!(!r.contains("abcdefghijklmnop"), "{r}");
        assert!(!r.contains("ABCDEFGHIJKLMNOP"), "{r}");
        let r = redact("API_KEY=hunter2\nHOME=/root\n", "env");
        assert_eq!(r, "API_KEY=***\nHOME=/root\n");
        // Secret-named assignments are masked wherever they appear.
        let r = redact("API_KEY=hunter2\nCOLOR=blue\n", "cat notes.txt");
        assert_eq!(r, "API_KEY=***\nCOLOR=blue\n");
        let r = redact(
            "aws_secret_access_key = wJalrXUtnFEMI\npassword: hunter22\n",
            "cat f",
        );
        assert!(
            !r.contains("wJalrXUtnFEMI") && !r.contains("hunter22"),
            "{r}"
        );
        let r = redact("token hf_abcdefghijklmnopqrstuvwxyz0123", "echo");
        assert_eq!(r, "token hf_***");
        let r = redact("Authorization: Bearer abcdef123456", "curl");
        assert_eq!(r, "Authorization: Bearer ***");
    }

    #[test]
    fn meanings() {
        assert!(exit_code_meaning("grep foo bar.txt", 1)
            .unwrap()
            .contains("no matches"));
        assert!(exit_code_meaning("cat x | grep -q foo", 1)
            .unwrap()
            .contains("no matches"));
        assert!(exit_code_meaning("sleep 1", 137)
            .unwrap()
            .contains("SIGKILL"));
        assert!(exit_code_meaning("curl http://x", 7)
            .unwrap()
            .contains("connect"));
        assert_eq!(exit_code_meaning("false", 1), None);
        assert_eq!(exit_code_meaning("x", 130), None);
    }
}
