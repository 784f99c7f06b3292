//! `check-command`: the approval verdict for a shell command, as the guard sees it.

use hermes_runtime::Registry;
use serde_json::json;

pub(super) fn check_command(registry: &Registry, command: &str, as_json: bool) -> String {
    // The approval flow's view of this installation: homes, temp dir, deny globs.
    let guard =
        hermes_runtime::approval::Approvals::for_home(registry.hermes_home()).guard_context();
    let verdict = hermes_command_guard::classify(command, &guard);
    if as_json {
        let out = json!({
            "verdict": verdict.verdict.as_str(),
            "description": verdict.description,
            "key": verdict.key,
        });
        return format!("{out}\n");
    }
    match verdict.description {
        Some(description) => format!("{}: {description}\n", verdict.verdict.as_str()),
        None => format!("{}\n", verdict.verdict.as_str()),
    }
}

/// One argument is the command as typed; several are re-quoted so `-- bash -c "a | b"`
/// is judged as the shell would have received it.
pub(super) fn command_line(words: &[String]) -> String {
    if let [single] = words {
        return single.clone();
    }
    let quote = |word: &String| {
        let plain = !word.is_empty()
            && word
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%^".contains(c));
        if plain {
            word.clone()
        } else {
            format!("'{}'", word.replace('\'', "'\\''"))
        }
    };
    words.iter().map(quote).collect::<Vec<_>>().join(" ")
}
