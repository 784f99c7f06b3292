//! Running a job: claim it, run its prompt as an agent-loop session (source `cron`)
//! against the configured model, save the output, record the outcome.

use super::schedule;
use super::store::Store;
use crate::shared::skills_library as library;
use hermes_agent::{AgentConfig, AgentSession, LoopStatus, SessionOptions};
use hermes_runtime::Registry;
use serde_json::{json, Value};
use std::sync::Arc;

/// Toolsets a cron run never gets: no scheduling from a scheduled run, no user to ask,
/// no live chat to message.
pub const CRON_DISABLED_TOOLSETS: [&str; 3] = ["cronjob", "messaging", "clarify"];
/// A claim older than this is taken to be from a run that died.
const CLAIM_TTL_SECONDS: i64 = 3 * 3600;

pub struct RunReport {
    pub claimed: bool,
    pub success: bool,
    pub error: Option<String>,
    pub output_file: Option<String>,
}

/// Claims `job_id` for one run (at most once at a time across processes) and moves
/// its next run on; `Err` says why it was not claimed.
fn claim(store: &Store, job_id: &str, forced: bool) -> Result<Value, String> {
    store.update(|jobs| {
        let Some(job) = jobs.iter_mut().find(|j| j["id"] == job_id) else {
            return Err("Job no longer exists; nothing to run.".into());
        };
        if job["enabled"] == false || job["state"] == "paused" {
            return Err("Job is paused; resume it before running.".into());
        }
        if let Some(claimed) = job["fire_claim"].as_str().and_then(schedule::parse_iso) {
            if schedule::now() - claimed < chrono::Duration::seconds(CLAIM_TTL_SECONDS) {
                return Err("Job is already running; not run again.".into());
            }
        }
        if !forced && !schedule::is_due(job["next_run_at"].as_str()) {
            return Err("Job is not due.".into());
        }
        let now = schedule::iso(&schedule::now());
        job["fire_claim"] = json!(now);
        if job["schedule"]["kind"] != "once" {
            job["next_run_at"] = json!(schedule::next_run(&job["schedule"], Some(&now)));
        }
        Ok(job.clone())
    })
}

/// The prompt the session gets: each attached skill's SKILL.md, then the job's prompt.
fn build_prompt(registry: &Registry, job: &Value) -> String {
    let mut parts = Vec::new();
    let roots = library::roots(registry.hermes_home());
    for name in job["skills"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        match library::find(&roots, name).first().and_then(|s| library::read_in_root(&s.root.dir, &s.skill_md(), None).ok()) {
            Some(content) => parts.push(format!("[Skill \"{name}\" loaded for this scheduled task]\n\n{content}")),
            None => parts.push(format!("[Skill \"{name}\" was attached to this job but is not installed; go on without it]")),
        }
    }
    let prompt = job["prompt"].as_str().unwrap_or_default();
    if !prompt.is_empty() {
        parts.push(prompt.to_string());
    }
    let mut text = parts.join("\n\n---\n\n");
    text.push_str(
        "\n\n[This is a scheduled run with nobody present: do not ask questions. Your final answer is saved as the job's output.]",
    );
    text
}

fn run_session(
    registry: &Arc<Registry>,
    job: &Value,
) -> (LoopStatus, Option<String>, Option<String>, String) {
    // The endpoint and its keys come from the operator's config alone: a job names at
    // most another model there, never where the key is sent.
    let mut config = AgentConfig::from_config(&registry.config());
    if let Some(model) = job["model"].as_str().filter(|m| !m.is_empty()) {
        config.model.model = model.to_string();
    }
    let toolsets: Vec<String> = match job["enabled_toolsets"].as_array() {
        Some(list) if !list.is_empty() => list
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        _ => vec!["hermes-cron".into()],
    };
    let mut disabled: Vec<String> = CRON_DISABLED_TOOLSETS
        .iter()
        .map(|s| s.to_string())
        .collect();
    if let Some(Value::Array(extra)) = registry.config().get("agent.disabled_toolsets") {
        disabled.extend(extra.iter().filter_map(Value::as_str).map(str::to_owned));
    }
    let prompt = build_prompt(registry, job);
    let session = AgentSession::new(
        Arc::clone(registry),
        SessionOptions {
            source: Some("cron".into()),
            title: Some(format!(
                "cron: {}",
                job["name"].as_str().unwrap_or_default()
            )),
            toolsets: Some(toolsets),
            disabled_toolsets: disabled,
            allowed_tools: string_list(&job["allowed_tools"]),
            config: Some(config),
            cwd: job["workdir"].as_str().map(std::path::PathBuf::from),
            ..Default::default()
        },
    );
    let outcome = session.run(&prompt);
    (outcome.status, outcome.final_answer, outcome.error, prompt)
}

/// A JSON list of strings, `None` when it is not one.
pub fn string_list(value: &Value) -> Option<Vec<String>> {
    value.as_array().map(|items| {
        items
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect()
    })
}

fn output_document(
    job: &Value,
    prompt: &str,
    status: LoopStatus,
    answer: Option<&str>,
    error: Option<&str>,
) -> String {
    let mut text = format!(
        "# Cron job: {}\n\n**Job ID:** {}\n**Run time:** {}\n**Schedule:** {}\n**Status:** {}\n\n## Prompt\n\n{}\n\n## Response\n\n{}\n",
        job["name"].as_str().unwrap_or_default(),
        job["id"].as_str().unwrap_or_default(),
        schedule::iso(&schedule::now()),
        job["schedule_display"].as_str().unwrap_or_default(),
        status.as_str(),
        prompt,
        answer.unwrap_or("(no response)"),
    );
    if let Some(error) = error {
        text.push_str(&format!("\n## Error\n\n{error}\n"));
    }
    text
}

/// Records a finished run: status, error, repeat count, next run; a job whose
/// repeats are used up (or a one-shot that ran) is removed.
fn mark_run(store: &Store, job_id: &str, success: bool, error: Option<&str>) -> Result<(), String> {
    store.update(|jobs| {
        let Some(position) = jobs.iter().position(|j| j["id"] == job_id) else {
            return Ok(());
        };
        let job = &mut jobs[position];
        let now = schedule::iso(&schedule::now());
        job["last_run_at"] = json!(now);
        job["last_status"] = json!(if success { "ok" } else { "error" });
        job["last_error"] = json!(if success { None } else { error });
        job["fire_claim"] = Value::Null;
        let completed = job["repeat"]["completed"].as_u64().unwrap_or(0) + 1;
        job["repeat"]["completed"] = json!(completed);
        let times = job["repeat"]["times"].as_u64();
        let next = schedule::next_run(&job["schedule"], Some(&now));
        if times.is_some_and(|t| completed >= t) || next.is_none() {
            jobs.remove(position);
        } else {
            job["next_run_at"] = json!(next);
        }
        Ok(())
    })
}

/// Runs one job now (`forced`: whether or not it is due).
pub fn run_job(registry: &Arc<Registry>, job_id: &str, forced: bool) -> RunReport {
    let store = Store::in_home(registry.hermes_home());
    let job = match claim(&store, job_id, forced) {
        Ok(job) => job,
        Err(why) => {
            return RunReport {
                claimed: false,
                success: false,
                error: Some(why),
                output_file: None,
            }
        }
    };
    let (status, answer, error, prompt) = run_session(registry, &job);
    let success = status == LoopStatus::Completed;
    let document = output_document(&job, &prompt, status, answer.as_deref(), error.as_deref());
    let (output_file, save_error) = match store.save_output(job_id, &document) {
        Ok(file) => (Some(file.display().to_string()), None),
        Err(e) => (None, Some(e)),
    };
    let error = error.or(save_error);
    if let Err(e) = mark_run(&store, job_id, success, error.as_deref()) {
        return RunReport {
            claimed: true,
            success: false,
            error: Some(e),
            output_file,
        };
    }
    RunReport {
        claimed: true,
        success,
        error,
        output_file,
    }
}

/// Runs every due job once, in order of their next run; returns what happened.
pub fn run_due(registry: &Arc<Registry>) -> Result<Vec<Value>, String> {
    let store = Store::in_home(registry.hermes_home());
    let mut due: Vec<Value> = store
        .load()?
        .into_iter()
        .filter(|j| {
            j["enabled"] != false
                && j["state"] != "paused"
                && schedule::is_due(j["next_run_at"].as_str())
        })
        .collect();
    due.sort_by(|a, b| a["next_run_at"].as_str().cmp(&b["next_run_at"].as_str()));
    Ok(due
        .iter()
        .filter_map(|job| {
            let id = job["id"].as_str()?;
            let report = run_job(registry, id, false);
            Some(json!({
                "job_id": id,
                "name": job["name"],
                "executed": report.claimed,
                "success": report.success,
                "error": report.error,
                "output_file": report.output_file,
            }))
        })
        .collect())
}
