//! Background-process notifications as the model reads them: one message per event,
//! marked important so the model acts on it before going on.

use serde_json::Value;

fn text<'a>(event: &'a Value, key: &str) -> &'a str {
    event.get(key).and_then(Value::as_str).unwrap_or("")
}

/// The message for one event of the process registry (`completion`, `watch_match`,
/// `watch_disabled`, breaker notices).
pub fn notification_text(event: &Value) -> String {
    let id = text(event, "session_id");
    let command = text(event, "command");
    match text(event, "type") {
        "watch_match" => {
            let mut out = format!(
                "[IMPORTANT: Background process {id} matched watch pattern \"{}\".\nCommand: {command}\nMatched output:\n{}",
                text(event, "pattern"),
                text(event, "output")
            );
            if let Some(n) = event
                .get("suppressed")
                .and_then(Value::as_u64)
                .filter(|n| *n > 0)
            {
                out.push_str(&format!(
                    "\n({n} earlier matches were suppressed by the rate limit)"
                ));
            }
            if event.get("watch_disabled").and_then(Value::as_bool) == Some(true) {
                out.push_str(&format!("\n{}", text(event, "message")));
            }
            out.push(']');
            out
        }
        "completion" => {
            let code = event
                .get("exit_code")
                .map(Value::to_string)
                .unwrap_or_else(|| "?".into());
            let status = if text(event, "status") == "killed" {
                "was killed".to_string()
            } else if code == "0" {
                "completed normally (exit code 0)".to_string()
            } else {
                format!("exited with code {code}")
            };
            format!(
                "[IMPORTANT: Background process {id} {status}.\nCommand: {command}\nOutput (last part):\n{}]",
                text(event, "output_tail")
            )
        }
        _ => format!("[IMPORTANT: {}]", text(event, "message")),
    }
}
