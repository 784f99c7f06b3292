//! `$HERMES_HOME/cron/jobs.json`: `{"jobs": [...], "updated_at"}`, changed only under
//! an exclusive lock on `cron/.jobs.lock` and replaced atomically, so concurrent
//! processes (a scheduler, a serve session, a CLI call) never lose each other's jobs.
//! Run output goes to `cron/output/<job_id>/<timestamp>.md`.

use super::schedule;
use crate::file_access::write_own_file;
use serde_json::{json, Value};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// Output files kept per job; older ones are pruned.
const OUTPUT_KEEP: usize = 50;

pub struct Store {
    dir: PathBuf,
}

struct Lock(std::fs::File);

impl Drop for Lock {
    fn drop(&mut self) {
        // SAFETY: the descriptor is owned by the open file.
        unsafe { libc::flock(self.0.as_raw_fd(), libc::LOCK_UN) };
    }
}

impl Store {
    pub fn in_home(hermes_home: &Path) -> Store {
        Store {
            dir: hermes_home.join("cron"),
        }
    }

    fn jobs_file(&self) -> PathBuf {
        self.dir.join("jobs.json")
    }

    fn lock(&self) -> Result<Lock, String> {
        std::fs::create_dir_all(&self.dir)
            .map_err(|e| format!("Cannot create {}: {e}", self.dir.display()))?;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(self.dir.join(".jobs.lock"))
            .map_err(|e| format!("Cannot open the cron lock: {e}"))?;
        // SAFETY: flock on a descriptor we own; blocks until the other holder is done.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(format!(
                "Cannot lock the cron jobs: {}",
                std::io::Error::last_os_error()
            ));
        }
        Ok(Lock(file))
    }

    fn read(&self) -> Result<Vec<Value>, String> {
        let text = match std::fs::read_to_string(self.jobs_file()) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(format!("Cannot read the cron jobs: {e}")),
        };
        let text = text.trim_start_matches('\u{feff}');
        if text.trim().is_empty() {
            return Ok(Vec::new());
        }
        match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(mut top)) => match top.remove("jobs") {
                Some(Value::Array(jobs)) => Ok(jobs),
                None | Some(Value::Null) => Ok(Vec::new()),
                Some(_) => Err(format!(
                    "{} is corrupted: `jobs` is not a list",
                    self.jobs_file().display()
                )),
            },
            Ok(Value::Array(jobs)) => Ok(jobs),
            Ok(_) => Err(format!(
                "{} is corrupted: expected {{\"jobs\": [...]}}",
                self.jobs_file().display()
            )),
            Err(e) => Err(format!(
                "{} is not valid JSON ({e}); fix or move it away",
                self.jobs_file().display()
            )),
        }
    }

    fn write(&self, jobs: &[Value]) -> Result<(), String> {
        let body = json!({"jobs": jobs, "updated_at": schedule::iso(&schedule::now())});
        let text = serde_json::to_string_pretty(&body).expect("JSON serialises");
        write_own_file(&self.jobs_file(), text.as_bytes())
            .map_err(|e| format!("Cannot save the cron jobs: {e}"))
    }

    pub fn load(&self) -> Result<Vec<Value>, String> {
        let _lock = self.lock()?;
        self.read()
    }

    /// Reads, changes and saves the jobs under the lock; nothing is saved on `Err`.
    pub fn update<T>(
        &self,
        change: impl FnOnce(&mut Vec<Value>) -> Result<T, String>,
    ) -> Result<T, String> {
        let _lock = self.lock()?;
        let mut jobs = self.read()?;
        let out = change(&mut jobs)?;
        self.write(&jobs)?;
        Ok(out)
    }

    /// Saves one run's output; returns the file.
    pub fn save_output(&self, job_id: &str, text: &str) -> Result<PathBuf, String> {
        if job_id.is_empty()
            || !job_id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(format!("job id {job_id:?} cannot name an output folder"));
        }
        let dir = self.dir.join("output").join(job_id);
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("Cannot create {}: {e}", dir.display()))?;
        let stamp = schedule::now().format("%Y-%m-%d_%H-%M-%S%.6f");
        let file = dir.join(format!("{stamp}.md"));
        write_own_file(&file, text.as_bytes())
            .map_err(|e| format!("Cannot save the output: {e}"))?;
        let mut outputs: Vec<PathBuf> = std::fs::read_dir(&dir)
            .map(|d| {
                d.flatten()
                    .map(|e| e.path())
                    .filter(|p| p.extension().is_some_and(|x| x == "md"))
                    .collect()
            })
            .unwrap_or_default();
        outputs.sort();
        let excess = outputs.len().saturating_sub(OUTPUT_KEEP);
        for old in &outputs[..excess] {
            let _ = std::fs::remove_file(old);
        }
        Ok(file)
    }
}

/// A new job id: 12 hex digits, unique among `jobs`.
pub fn new_id(jobs: &[Value]) -> String {
    use std::hash::{BuildHasher, Hasher};
    loop {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                .as_nanos(),
        );
        hasher.write_u32(std::process::id());
        let id = format!("{:012x}", hasher.finish() & 0xffff_ffff_ffff);
        if !jobs.iter().any(|j| j["id"] == id) {
            return id;
        }
    }
}

/// The job `reference` names: its id, else its exact name (which must be unique).
pub fn resolve<'a>(
    jobs: &'a [Value],
    reference: &str,
) -> Result<Option<&'a Value>, Vec<&'a Value>> {
    if let Some(job) = jobs.iter().find(|j| j["id"] == reference) {
        return Ok(Some(job));
    }
    let named: Vec<&Value> = jobs.iter().filter(|j| j["name"] == reference).collect();
    match named.len() {
        0 => Ok(None),
        1 => Ok(Some(named[0])),
        _ => Err(named),
    }
}
