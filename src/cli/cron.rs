//! `cron`: the due scheduled jobs run once, or a pass at every interval.

use hermes_runtime::Registry;
use serde_json::json;
use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

/// `hermes-tools cron`: one pass over the due jobs (a JSON line of what ran), or with
/// `watch` a pass every `interval` seconds. Exit 1 when the job store cannot be read.
pub(super) fn run_cron(registry: &Arc<Registry>, watch: bool, interval: u64) -> ExitCode {
    loop {
        match crate::tools::cronjob::runner::run_due(registry) {
            Ok(ran) => {
                let mut stdout = std::io::stdout().lock();
                let _ = writeln!(stdout, "{}", json!({"ran": ran.len(), "jobs": ran}))
                    .and_then(|_| stdout.flush());
            }
            Err(e) => {
                eprintln!("error: {e}");
                if !watch {
                    return ExitCode::from(1);
                }
            }
        }
        if !watch {
            return ExitCode::SUCCESS;
        }
        std::thread::sleep(std::time::Duration::from_secs(interval.max(1)));
    }
}
