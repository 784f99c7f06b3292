//! `cronjob`: jobs that run a prompt later or on a schedule, as agent-loop sessions.
//!
//! Jobs live in `$HERMES_HOME/cron/jobs.json`; `hermes-tools cron` runs the due ones
//! (once, or every minute with `--watch`), and `action=run` runs one now.

use hermes_runtime::prelude::*;

pub mod runner;
mod schedule;
mod store;

use store::Store;

/// What cronjob does.
#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum CronAction {
    Create,
    List,
    Update,
    Pause,
    Resume,
    Remove,
    Run,
}

/// A model for one job instead of the configured one.
#[derive(Deserialize)]
pub struct CronModel {
    /// Model name, e.g. `anthropic/claude-sonnet-4`.
    model: String,
    /// Provider name; kept with the job for reference.
    provider: Option<String>,
}

fn truthy(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| {
        matches!(
            v.trim().to_lowercase().as_str(),
            "1" | "true" | "yes" | "on"
        )
    })
}

/// Offered in interactive, serve and cron sessions (and where the original's session
/// variables say one is running), never to a one-off `call` or an MCP client.
pub fn cron_available() -> bool {
    crate::current::session_kind().is_some()
        || [
            "HERMES_INTERACTIVE",
            "HERMES_GATEWAY_SESSION",
            "HERMES_EXEC_ASK",
        ]
        .iter()
        .any(|v| truthy(v))
}

fn fail(message: impl Into<String>) -> ToolResult {
    Ok(json!({"success": false, "error": message.into()}).into())
}

fn repeat_display(job: &Value) -> String {
    let completed = job["repeat"]["completed"].as_u64().unwrap_or(0);
    match job["repeat"]["times"].as_u64() {
        None => "forever".into(),
        Some(1) if completed == 0 => "once".into(),
        Some(1) => "1/1".into(),
        Some(times) if completed > 0 => format!("{completed}/{times}"),
        Some(times) => format!("{times} times"),
    }
}

fn format_job(job: &Value) -> Value {
    let prompt = job["prompt"].as_str().unwrap_or_default();
    let preview = if prompt.chars().count() > 100 {
        prompt.chars().take(100).collect::<String>() + "..."
    } else {
        prompt.to_string()
    };
    let skills = job["skills"].clone();
    let enabled = job["enabled"].as_bool().unwrap_or(true);
    let mut out = json!({
        "job_id": job["id"],
        "name": job["name"],
        "skill": skills.get(0).cloned().unwrap_or(Value::Null),
        "skills": if skills.is_array() { skills.clone() } else { json!([]) },
        "prompt_preview": preview,
        "model": job["model"],
        "provider": job["provider"],
        "base_url": job["base_url"],
        "schedule": job.get("schedule_display").cloned().unwrap_or(json!("?")),
        "repeat": repeat_display(job),
        "deliver": job.get("deliver").filter(|d| !d.is_null()).cloned().unwrap_or(json!("local")),
        "next_run_at": job["next_run_at"],
        "last_run_at": job["last_run_at"],
        "last_status": job["last_status"],
        "last_delivery_error": job["last_delivery_error"],
        "enabled": enabled,
        "state": job.get("state").filter(|s| !s.is_null()).cloned().unwrap_or(json!(if enabled { "scheduled" } else { "paused" })),
        "paused_at": job["paused_at"],
        "paused_reason": job["paused_reason"],
    });
    for key in ["enabled_toolsets", "workdir"] {
        if job.get(key).is_some_and(|v| !v.is_null()) {
            out[key] = job[key].clone();
        }
    }
    out
}

fn clean_list(items: Option<Vec<String>>) -> Option<Vec<String>> {
    items.map(|list| {
        list.into_iter()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect()
    })
}

/// A job's folder: absolute, existing, and inside the writable roots of the session
/// that schedules it (the run's terminal may write there, so it must not be a place
/// its author could not write).
fn check_workdir(ctx: &ToolContext, workdir: &str) -> Result<(), String> {
    let path = std::path::Path::new(workdir);
    if !path.is_absolute() || !path.is_dir() {
        return Err(format!(
            "workdir must be an absolute path to an existing folder; got '{workdir}'"
        ));
    }
    let access = crate::file_access::policy(ctx)?;
    if !access.within_roots(path) {
        let roots: Vec<String> = access
            .writable_roots()
            .unwrap_or_default()
            .iter()
            .map(|r| r.display().to_string())
            .collect();
        return Err(format!(
            "workdir '{workdir}' is outside this session's writable roots ({}): a job works only where its author \
             may write. Pick a folder inside them, or ask the user to add it to terminal.sandbox.writable_roots.",
            roots.join(", ")
        ));
    }
    Ok(())
}

/// The tools a job may use at most: its author's ([`crate::current::session_tools`]),
/// within the ceiling the job already has. `Err` when `enabled_toolsets` asks for more.
fn tool_ceiling(
    ctx: &ToolContext,
    existing: Option<Vec<String>>,
    enabled_toolsets: Option<&[String]>,
) -> Result<Option<Vec<String>>, String> {
    let ceiling = match (crate::current::session_tools(ctx), existing) {
        (Some(mine), Some(before)) => {
            Some(mine.into_iter().filter(|t| before.contains(t)).collect())
        }
        (mine, before) => mine.or(before),
    };
    if let (Some(ceiling), Some(asked), Some(registry)) = (
        &ceiling,
        enabled_toolsets.filter(|t| !t.is_empty()),
        crate::current::registry_for(ctx),
    ) {
        let beyond: Vec<String> = registry
            .select_tools(Some(asked), None)
            .tools
            .into_iter()
            .filter(|name| !ceiling.contains(name))
            .collect();
        if !beyond.is_empty() {
            return Err(format!(
                "enabled_toolsets would give the job tools this session does not have ({}): a job gets at most its \
                 author's tools. Name toolsets within yours, or leave enabled_toolsets out.",
                beyond.join(", ")
            ));
        }
    }
    Ok(ceiling)
}

/// Schedule prompts to run later or repeatedly, each run a fresh agent session with no memory of this chat, so write prompts that stand on their own. action `create` needs `schedule` and `prompt` (or `skills`, loaded in order before the prompt); `list` shows every job; `update`, `pause`, `resume`, `remove` and `run` (run now) need `job_id`: list first, never guess ids. Schedules: '30m' or '2h' (once, that long from now), 'every 2h' (recurring), '0 9 * * *' (cron expression, local time), '2026-06-01T09:00' (once at that time). A run cannot ask questions and cannot schedule further jobs; its final answer is the job's output, saved under $HERMES_HOME/cron/output/. On update, skills=[] clears the skills.
// One parameter per field of the tool's schema.
#[allow(clippy::too_many_arguments)]
#[tool(toolset = "cronjob", emoji = "⏰", check = cron_available)]
pub fn cronjob(
    /// One of create, list, update, pause, resume, remove, run. create needs `schedule` and `prompt`.
    action: CronAction,
    /// The job's id (or its exact name), for update, pause, resume, remove and run.
    job_id: Option<String>,
    /// create/update: the complete, self-contained instruction for each run.
    prompt: Option<String>,
    /// create/update: '30m', 'every 2h', '0 9 * * *' or an ISO timestamp such as '2026-06-01T09:00:00'.
    schedule: Option<String>,
    /// A short name for the job.
    name: Option<String>,
    /// How many runs, then the job is removed. Leave out for the default: once for one-shots, forever for recurring schedules.
    repeat: Option<i64>,
    /// Where the output goes: 'local' (saved under $HERMES_HOME/cron/output/; the only target here) or 'origin'.
    deliver: Option<String>,
    /// Skill names loaded, in order, before the prompt on each run.
    skills: Option<Vec<String>>,
    /// A model for this job instead of the configured one.
    model: Option<CronModel>,
    /// Toolsets the job's runs may use (e.g. ["web", "file"]); all default tools when left out. On update, [] clears it.
    enabled_toolsets: Option<Vec<String>>,
    /// An absolute folder the job's tools work in. On update, "" clears it.
    workdir: Option<String>,
    /// pause: why, kept with the job.
    reason: Option<String>,
    ctx: &ToolContext,
) -> ToolResult {
    let store = Store::in_home(ctx.hermes_home());
    let fields = JobFields {
        prompt,
        schedule,
        name,
        repeat,
        deliver,
        skills,
        model,
        enabled_toolsets,
        workdir,
    };
    match action {
        CronAction::Create => create(ctx, &store, fields),
        CronAction::List => match store.load() {
            Ok(jobs) => {
                let listed: Vec<Value> = jobs.iter().map(format_job).collect();
                Ok(json!({"success": true, "count": listed.len(), "jobs": listed}).into())
            }
            Err(e) => fail(e),
        },
        _ => {
            let Some(reference) = job_id.filter(|j| !j.trim().is_empty()) else {
                return fail(
                    "job_id is required for this action; use cronjob(action='list') to find it",
                );
            };
            let jobs = match store.load() {
                Ok(jobs) => jobs,
                Err(e) => return fail(e),
            };
            let job = match store::resolve(&jobs, reference.trim()) {
                Ok(Some(job)) => job.clone(),
                Ok(None) => {
                    return fail(format!("Job with ID or name '{reference}' not found. Use cronjob(action='list') to inspect jobs."))
                }
                Err(matches) => {
                    let matches: Vec<Value> = matches.iter().map(|m| json!({"id": m["id"], "name": m["name"], "schedule": m["schedule_display"], "next_run_at": m["next_run_at"]})).collect();
                    return Ok(json!({"success": false, "error": format!("'{reference}' names several jobs; use the job id"), "matches": matches}).into());
                }
            };
            let id = job["id"].as_str().unwrap_or_default().to_string();
            match action {
                CronAction::Remove => remove(&store, &id),
                CronAction::Pause => set_paused(&store, &id, true, reason),
                CronAction::Resume => set_paused(&store, &id, false, None),
                CronAction::Run => run_now(ctx, &store, &id),
                _ => update(ctx, &store, &id, &job, fields),
            }
        }
    }
}

/// The job fields create and update take.
struct JobFields {
    prompt: Option<String>,
    schedule: Option<String>,
    name: Option<String>,
    repeat: Option<i64>,
    deliver: Option<String>,
    skills: Option<Vec<String>>,
    model: Option<CronModel>,
    enabled_toolsets: Option<Vec<String>>,
    workdir: Option<String>,
}

fn create(ctx: &ToolContext, store: &Store, fields: JobFields) -> ToolResult {
    let JobFields {
        prompt,
        schedule: schedule_text,
        name,
        repeat,
        deliver,
        skills,
        model,
        enabled_toolsets,
        workdir,
    } = fields;
    let Some(schedule_text) = schedule_text.filter(|s| !s.trim().is_empty()) else {
        return fail("schedule is required for create");
    };
    let skills = clean_list(skills).unwrap_or_default();
    let prompt = prompt.unwrap_or_default();
    if prompt.trim().is_empty() && skills.is_empty() {
        return fail("create requires either prompt or at least one skill");
    }
    let parsed = match schedule::parse_schedule(&schedule_text) {
        Ok(parsed) => parsed,
        Err(e) => return fail(e),
    };
    let workdir = workdir
        .map(|w| w.trim().to_string())
        .filter(|w| !w.is_empty());
    if let Some(dir) = &workdir {
        if let Err(e) = check_workdir(ctx, dir) {
            return fail(e);
        }
    }
    let allowed_tools = match tool_ceiling(ctx, None, enabled_toolsets.as_deref()) {
        Ok(ceiling) => ceiling,
        Err(e) => return fail(e),
    };
    let Some(next) = schedule::next_run(&parsed, None) else {
        return fail(format!(
            "The one-shot time {} is more than {}s in the past and cannot be scheduled.",
            parsed["run_at"].as_str().unwrap_or(&schedule_text),
            schedule::ONESHOT_GRACE_SECONDS
        ));
    };
    let times = match repeat {
        Some(n) if n > 0 => Some(n),
        Some(_) => None,
        None if parsed["kind"] == "once" => Some(1),
        None => None,
    };
    let label = if prompt.trim().is_empty() {
        skills[0].clone()
    } else {
        prompt
            .trim()
            .chars()
            .take(50)
            .collect::<String>()
            .trim()
            .to_string()
    };
    let deliver = deliver
        .map(|d| d.trim().to_string())
        .filter(|d| !d.is_empty())
        .unwrap_or_else(|| "local".into());
    let toolsets = clean_list(enabled_toolsets).filter(|t| !t.is_empty());
    let created = store.update(|jobs| {
        let job = json!({
            "id": store::new_id(jobs),
            "name": name.clone().filter(|n| !n.trim().is_empty()).unwrap_or(label.clone()),
            "prompt": prompt,
            "skills": skills,
            "skill": skills.first(),
            "model": model.as_ref().map(|m| m.model.clone()),
            "provider": model.as_ref().and_then(|m| m.provider.clone()),
            "base_url": Value::Null,
            "schedule": parsed,
            "schedule_display": parsed["display"],
            "repeat": {"times": times, "completed": 0},
            "enabled": true,
            "state": "scheduled",
            "paused_at": Value::Null,
            "paused_reason": Value::Null,
            "created_at": schedule::iso(&schedule::now()),
            "next_run_at": next,
            "last_run_at": Value::Null,
            "last_status": Value::Null,
            "last_error": Value::Null,
            "last_delivery_error": Value::Null,
            "deliver": deliver,
            "origin": Value::Null,
            "enabled_toolsets": toolsets,
            "allowed_tools": allowed_tools,
            "workdir": workdir,
        });
        jobs.push(job.clone());
        Ok(job)
    });
    let job = match created {
        Ok(job) => job,
        Err(e) => return fail(e),
    };
    let mut message = format!(
        "Cron job '{}' created.",
        job["name"].as_str().unwrap_or_default()
    );
    if deliver != "local" {
        message.push_str(" Outputs are saved locally under $HERMES_HOME/cron/output/; this runtime has no chat delivery.");
    }
    Ok(json!({
        "success": true,
        "job_id": job["id"],
        "name": job["name"],
        "skill": job["skill"],
        "skills": job["skills"],
        "schedule": job["schedule_display"],
        "repeat": repeat_display(&job),
        "deliver": job["deliver"],
        "next_run_at": job["next_run_at"],
        "job": format_job(&job),
        "message": message,
    })
    .into())
}

fn remove(store: &Store, id: &str) -> ToolResult {
    let removed = store.update(|jobs| {
        let position = jobs
            .iter()
            .position(|j| j["id"] == id)
            .ok_or_else(|| format!("Failed to remove job '{id}'"))?;
        Ok(jobs.remove(position))
    });
    match removed {
        Ok(job) => Ok(json!({
            "success": true,
            "message": format!("Cron job '{}' removed.", job["name"].as_str().unwrap_or_default()),
            "removed_job": {"id": id, "name": job["name"], "schedule": job["schedule_display"]},
        })
        .into()),
        Err(e) => fail(e),
    }
}

fn set_paused(store: &Store, id: &str, paused: bool, reason: Option<String>) -> ToolResult {
    let updated = store.update(|jobs| {
        let job = jobs
            .iter_mut()
            .find(|j| j["id"] == id)
            .ok_or_else(|| format!("Job '{id}' no longer exists"))?;
        if paused {
            job["enabled"] = json!(false);
            job["state"] = json!("paused");
            job["paused_at"] = json!(schedule::iso(&schedule::now()));
            job["paused_reason"] = json!(reason);
        } else {
            job["enabled"] = json!(true);
            job["state"] = json!("scheduled");
            job["paused_at"] = Value::Null;
            job["paused_reason"] = Value::Null;
            // Missed runs are not made up: the next one counts from now.
            let next = schedule::next_run(&job["schedule"], None);
            job["next_run_at"] = json!(next);
        }
        Ok(job.clone())
    });
    match updated {
        Ok(job) => Ok(json!({"success": true, "job": format_job(&job)}).into()),
        Err(e) => fail(e),
    }
}

fn run_now(ctx: &ToolContext, store: &Store, id: &str) -> ToolResult {
    let Some(registry) = crate::current::registry_for(ctx) else {
        return fail("cronjob run needs the runtime's registry; run it from hermes-tools serve, agent or cron");
    };
    let report = runner::run_job(&registry, id, true);
    let jobs = store.load().unwrap_or_default();
    let mut result = jobs
        .iter()
        .find(|j| j["id"] == id)
        .map(format_job)
        .unwrap_or_else(|| json!({"job_id": id, "removed_after_run": true}));
    result["executed"] = json!(report.claimed);
    result["execution_success"] = json!(report.success);
    if !report.claimed {
        result["execution_skipped"] = json!(report.error);
    } else if let Some(error) = report.error {
        result["execution_error"] = json!(error);
    }
    result["output_file"] = json!(report.output_file);
    Ok(json!({"success": true, "job": result}).into())
}

fn update(
    ctx: &ToolContext,
    store: &Store,
    id: &str,
    job: &Value,
    fields: JobFields,
) -> ToolResult {
    let JobFields {
        prompt,
        schedule: schedule_text,
        name,
        repeat,
        deliver,
        skills,
        model,
        enabled_toolsets,
        workdir,
    } = fields;
    let parsed = match schedule_text
        .as_deref()
        .map(schedule::parse_schedule)
        .transpose()
    {
        Ok(parsed) => parsed,
        Err(e) => return fail(e),
    };
    if let Some(dir) = workdir.as_deref().map(str::trim).filter(|w| !w.is_empty()) {
        if let Err(e) = check_workdir(ctx, dir) {
            return fail(e);
        }
    }
    let allowed_tools = match tool_ceiling(
        ctx,
        runner::string_list(&job["allowed_tools"]),
        enabled_toolsets.as_deref(),
    ) {
        Ok(ceiling) => ceiling,
        Err(e) => return fail(e),
    };
    let nothing = [
        prompt.is_none(),
        parsed.is_none(),
        name.is_none(),
        repeat.is_none(),
        deliver.is_none(),
        skills.is_none(),
        model.is_none(),
        enabled_toolsets.is_none(),
        workdir.is_none(),
    ];
    if nothing.iter().all(|n| *n) {
        return fail("No updates provided.");
    }
    let updated = store.update(|jobs| {
        let job = jobs
            .iter_mut()
            .find(|j| j["id"] == id)
            .ok_or_else(|| format!("Job '{id}' no longer exists"))?;
        job["allowed_tools"] = json!(allowed_tools);
        if let Some(prompt) = prompt {
            job["prompt"] = json!(prompt);
        }
        if let Some(name) = name {
            job["name"] = json!(name);
        }
        if let Some(deliver) = deliver {
            job["deliver"] = json!(deliver.trim());
        }
        if let Some(skills) = clean_list(skills) {
            job["skill"] = json!(skills.first());
            job["skills"] = json!(skills);
        }
        if let Some(model) = model {
            job["model"] = json!(model.model);
            job["provider"] = json!(model.provider);
        }
        if let Some(toolsets) = clean_list(enabled_toolsets) {
            job["enabled_toolsets"] = if toolsets.is_empty() {
                Value::Null
            } else {
                json!(toolsets)
            };
        }
        if let Some(workdir) = workdir {
            let workdir = workdir.trim().to_string();
            job["workdir"] = if workdir.is_empty() {
                Value::Null
            } else {
                json!(workdir)
            };
        }
        if let Some(repeat) = repeat {
            job["repeat"]["times"] = if repeat <= 0 {
                Value::Null
            } else {
                json!(repeat)
            };
        }
        if let Some(parsed) = parsed {
            let next = schedule::next_run(&parsed, None)
                .ok_or("The new one-shot time is in the past and cannot be scheduled.")?;
            job["schedule_display"] = parsed["display"].clone();
            job["schedule"] = parsed;
            job["next_run_at"] = json!(next);
            if job["state"] != "paused" {
                job["state"] = json!("scheduled");
                job["enabled"] = json!(true);
            }
        }
        Ok(job.clone())
    });
    match updated {
        Ok(job) => Ok(json!({"success": true, "job": format_job(&job)}).into()),
        Err(e) => fail(e),
    }
}
