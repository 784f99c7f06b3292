//! Schedules as the model writes them, and when they fire next.
//!
//! `30m`, `2h`, `1d`: once, that long from now. `every 30m`, `every 2h`: recurring.
//! Five (or six) cron fields (`0 9 * * *`): recurring, in local time. An ISO
//! timestamp (`2026-06-01T09:00`): once, local time when it has no offset.

use chrono::{DateTime, Duration, FixedOffset, Local, NaiveDateTime, SecondsFormat, TimeZone};
use serde_json::{json, Value};

/// A one-shot more than this far in the past is refused (a clock skew allowance).
pub const ONESHOT_GRACE_SECONDS: i64 = 120;

pub fn now() -> DateTime<Local> {
    Local::now()
}

pub fn iso(time: &DateTime<Local>) -> String {
    time.to_rfc3339_opts(SecondsFormat::Micros, false)
}

pub fn parse_iso(text: &str) -> Option<DateTime<Local>> {
    DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t: DateTime<FixedOffset>| t.with_timezone(&Local))
}

/// Minutes of `30m`, `2h`, `1d` (and their long spellings).
pub fn parse_duration(text: &str) -> Result<i64, String> {
    let text = text.trim().to_lowercase();
    let digits: String = text.chars().take_while(|c| c.is_ascii_digit()).collect();
    let unit = text[digits.len()..].trim();
    let value: i64 = digits
        .parse()
        .map_err(|_| format!("Invalid duration: '{text}'. Use a form like '30m', '2h' or '1d'"))?;
    let per = match unit {
        "m" | "min" | "mins" | "minute" | "minutes" => 1,
        "h" | "hr" | "hrs" | "hour" | "hours" => 60,
        "d" | "day" | "days" => 1440,
        _ => {
            return Err(format!(
                "Invalid duration: '{text}'. Use a form like '30m', '2h' or '1d'"
            ))
        }
    };
    if value == 0 {
        return Err(format!(
            "Invalid duration: '{text}': it must be at least one minute"
        ));
    }
    value
        .checked_mul(per)
        .filter(|m| *m <= 525_600 * 100)
        .ok_or_else(|| format!("Duration '{text}' is too long"))
}

fn looks_like_cron(text: &str) -> bool {
    let parts: Vec<&str> = text.split_whitespace().collect();
    parts.len() >= 5
        && parts[..5]
            .iter()
            .all(|p| p.chars().all(|c| c.is_ascii_digit() || "*-,/".contains(c)))
}

/// The stored form: `{"kind": "once"|"interval"|"cron", ..., "display"}`.
pub fn parse_schedule(text: &str) -> Result<Value, String> {
    let original = text.trim();
    let lower = original.to_lowercase();
    if let Some(rest) = lower.strip_prefix("every ") {
        let minutes = parse_duration(rest)?;
        return Ok(
            json!({"kind": "interval", "minutes": minutes, "display": format!("every {minutes}m")}),
        );
    }
    if looks_like_cron(original) {
        original
            .parse::<croner::Cron>()
            .map_err(|e| format!("Invalid cron expression '{original}': {e}"))?;
        return Ok(json!({"kind": "cron", "expr": original, "display": original}));
    }
    let is_date = original.len() >= 10
        && original.as_bytes()[4] == b'-'
        && original[..4].chars().all(|c| c.is_ascii_digit());
    if original.contains('T') || is_date {
        let at = parse_timestamp(original).ok_or_else(|| format!("Invalid timestamp '{original}': use a form like 2026-06-01T09:00 or 2026-06-01T09:00:00+02:00"))?;
        return Ok(
            json!({"kind": "once", "run_at": iso(&at), "display": format!("once at {}", at.format("%Y-%m-%d %H:%M"))}),
        );
    }
    if let Ok(minutes) = parse_duration(original) {
        let at = now() + Duration::minutes(minutes);
        return Ok(
            json!({"kind": "once", "run_at": iso(&at), "display": format!("once in {original}")}),
        );
    }
    Err(format!(
        "Invalid schedule '{original}'. Use:\n  - Duration: '30m', '2h', '1d' (one-shot)\n  - Interval: 'every 30m', 'every 2h' (recurring)\n  - Cron: '0 9 * * *' (cron expression)\n  - Timestamp: '2026-02-03T14:00:00' (one-shot at time)"
    ))
}

fn parse_timestamp(text: &str) -> Option<DateTime<Local>> {
    let text = text.replace('Z', "+00:00");
    if let Ok(at) = DateTime::parse_from_rfc3339(&text) {
        return Some(at.with_timezone(&Local));
    }
    for format in [
        "%Y-%m-%dT%H:%M:%S%.f%:z",
        "%Y-%m-%dT%H:%M%:z",
        "%Y-%m-%d %H:%M:%S%:z",
    ] {
        if let Ok(at) = DateTime::parse_from_str(&text, format) {
            return Some(at.with_timezone(&Local));
        }
    }
    let naive = [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M:%S",
        "%Y-%m-%d %H:%M",
    ]
    .iter()
    .find_map(|f| NaiveDateTime::parse_from_str(&text, f).ok())
    .or_else(|| {
        chrono::NaiveDate::parse_from_str(&text, "%Y-%m-%d")
            .ok()
            .and_then(|d| d.and_hms_opt(0, 0, 0))
    })?;
    Local.from_local_datetime(&naive).earliest()
}

/// When the schedule fires next after `last_run` (or from now), `None` when done.
pub fn next_run(schedule: &Value, last_run: Option<&str>) -> Option<String> {
    let now = now();
    let last = last_run.and_then(parse_iso);
    match schedule.get("kind").and_then(Value::as_str)? {
        "once" => {
            if last.is_some() {
                return None;
            }
            let at = parse_iso(schedule.get("run_at")?.as_str()?)?;
            (at >= now - Duration::seconds(ONESHOT_GRACE_SECONDS)).then(|| iso(&at))
        }
        "interval" => {
            let minutes = schedule.get("minutes")?.as_i64()?;
            let base = last.unwrap_or(now);
            let mut next = base + Duration::minutes(minutes);
            // After downtime, the next run is the next slot from now, not a backlog.
            if next < now {
                next = now;
            }
            Some(iso(&next))
        }
        "cron" => {
            let cron: croner::Cron = schedule.get("expr")?.as_str()?.parse().ok()?;
            let base = match last {
                Some(last) if last > now => last,
                _ => now,
            };
            cron.find_next_occurrence(&base, false)
                .ok()
                .map(|t| iso(&t))
        }
        _ => None,
    }
}

/// True when a job whose next run is `next_run_at` is due now.
pub fn is_due(next_run_at: Option<&str>) -> bool {
    next_run_at
        .and_then(parse_iso)
        .is_some_and(|at| at <= now())
}
