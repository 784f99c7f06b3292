//! The agent's task list: in memory, one per session.

use serde::Serialize;
use serde_json::{json, Value};
use std::sync::Mutex;

pub const MAX_ITEMS: usize = 256;
pub const MAX_CONTENT_CHARS: usize = 4000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    Pending,
    InProgress,
    Completed,
    Cancelled,
}

impl TodoStatus {
    pub fn parse(text: &str) -> Option<TodoStatus> {
        match text
            .trim()
            .to_ascii_lowercase()
            .replace(['-', ' '], "_")
            .as_str()
        {
            "pending" => Some(TodoStatus::Pending),
            "in_progress" => Some(TodoStatus::InProgress),
            "completed" => Some(TodoStatus::Completed),
            "cancelled" | "canceled" => Some(TodoStatus::Cancelled),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            TodoStatus::Pending => "pending",
            TodoStatus::InProgress => "in_progress",
            TodoStatus::Completed => "completed",
            TodoStatus::Cancelled => "cancelled",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TodoItem {
    pub id: String,
    pub content: String,
    pub status: TodoStatus,
}

/// One item as the model sent it: in merge mode only `id` is needed to update an item.
#[derive(Debug, Clone, Default)]
pub struct TodoInput {
    pub id: String,
    pub content: Option<String>,
    pub status: Option<String>,
}

#[derive(Default)]
struct State {
    items: Vec<TodoItem>,
    revision: u64,
}

#[derive(Default)]
pub struct TodoStore {
    state: Mutex<State>,
}

impl TodoStore {
    pub fn new() -> TodoStore {
        TodoStore::default()
    }

    pub fn items(&self) -> Vec<TodoItem> {
        self.lock().items.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `None` reads. `Some(list)` replaces the list, or with `merge` updates items by
    /// id and appends new ones. The result is always the whole list with counts; a bad
    /// write changes nothing and says why.
    pub fn apply(&self, todos: Option<Vec<TodoInput>>, merge: bool) -> Value {
        let mut state = self.lock();
        let Some(inputs) = todos else {
            return render(&state, &[]);
        };
        let mut warnings = Vec::new();
        match build(&state.items, inputs, merge, &mut warnings) {
            Ok(items) => {
                state.items = items;
                state.revision += 1;
                render(&state, &warnings)
            }
            Err(error) => {
                let mut out = render(&state, &[]);
                out["error"] = json!(error);
                out
            }
        }
    }

    /// The items still to do, for re-injection after a context compression.
    pub fn open_items_text(&self) -> Option<String> {
        let state = self.lock();
        let open: Vec<String> = state
            .items
            .iter()
            .filter(|i| matches!(i.status, TodoStatus::Pending | TodoStatus::InProgress))
            .map(|i| format!("- [{}] {}: {}", i.status.as_str(), i.id, i.content))
            .collect();
        (!open.is_empty()).then(|| format!("[Your task list, still open]\n{}", open.join("\n")))
    }
}

fn build(
    current: &[TodoItem],
    inputs: Vec<TodoInput>,
    merge: bool,
    warnings: &mut Vec<String>,
) -> Result<Vec<TodoItem>, String> {
    // Duplicate ids in one write: the last one wins, at the first one's position.
    let mut deduped: Vec<TodoInput> = Vec::with_capacity(inputs.len());
    for (position, input) in inputs.into_iter().enumerate() {
        let id = input.id.trim().to_string();
        if id.is_empty() {
            return Err(format!(
                "item {position} has no id: every item needs a non-empty `id`"
            ));
        }
        let input = TodoInput {
            id: id.clone(),
            ..input
        };
        match deduped.iter_mut().find(|d| d.id == id) {
            Some(existing) => {
                warnings.push(format!(
                    "id {id:?} was given more than once; the last one was kept"
                ));
                *existing = input;
            }
            None => deduped.push(input),
        }
    }
    let mut items: Vec<TodoItem> = if merge { current.to_vec() } else { Vec::new() };
    for input in deduped {
        let status = match &input.status {
            Some(text) => Some(TodoStatus::parse(text).ok_or_else(|| {
                format!(
                    "item {:?} has status {text:?}; use one of pending, in_progress, completed, cancelled",
                    input.id
                )
            })?),
            None => None,
        };
        let content = match input.content {
            Some(content) if content.trim().is_empty() => {
                return Err(format!(
                    "item {:?} has empty content: say what the step is",
                    input.id
                ));
            }
            Some(content) if content.chars().count() > MAX_CONTENT_CHARS => {
                warnings.push(format!(
                    "item {:?} was cut to {MAX_CONTENT_CHARS} characters",
                    input.id
                ));
                Some(content.chars().take(MAX_CONTENT_CHARS).collect::<String>())
            }
            other => other,
        };
        match items.iter_mut().find(|i| i.id == input.id) {
            Some(existing) => {
                if let Some(content) = content {
                    existing.content = content;
                }
                if let Some(status) = status {
                    existing.status = status;
                }
            }
            None => {
                let content = content.ok_or_else(|| {
                    format!(
                        "item {:?} is new and has no content: new items need `content`",
                        input.id
                    )
                })?;
                items.push(TodoItem {
                    id: input.id,
                    content,
                    status: status.unwrap_or(TodoStatus::Pending),
                });
            }
        }
    }
    if items.len() > MAX_ITEMS {
        return Err(format!(
            "the list would have {} items; at most {MAX_ITEMS} are kept. Cancel or drop finished items, or group steps",
            items.len()
        ));
    }
    // One item in progress at a time: the first keeps it, later ones go back to pending.
    let in_progress: Vec<usize> = items
        .iter()
        .enumerate()
        .filter(|(_, i)| i.status == TodoStatus::InProgress)
        .map(|(n, _)| n)
        .collect();
    if let [keep, rest @ ..] = in_progress.as_slice() {
        if !rest.is_empty() {
            let demoted: Vec<String> = rest.iter().map(|&n| items[n].id.clone()).collect();
            for &n in rest {
                items[n].status = TodoStatus::Pending;
            }
            warnings.push(format!(
                "only one item may be in progress: kept {:?}, set {} back to pending",
                items[*keep].id,
                demoted
                    .iter()
                    .map(|d| format!("{d:?}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        // The item in progress goes ahead of pending items listed before it.
        let keep = *keep;
        if let Some(first_pending) = items[..keep]
            .iter()
            .position(|i| i.status == TodoStatus::Pending)
        {
            let item = items.remove(keep);
            items.insert(first_pending, item);
        }
    }
    Ok(items)
}

fn render(state: &State, warnings: &[String]) -> Value {
    let count = |status| state.items.iter().filter(|i| i.status == status).count();
    let mut out = json!({
        "todos": state.items,
        "summary": {
            "total": state.items.len(),
            "pending": count(TodoStatus::Pending),
            "in_progress": count(TodoStatus::InProgress),
            "completed": count(TodoStatus::Completed),
            "cancelled": count(TodoStatus::Cancelled),
        },
        "revision": state.revision,
    });
    if !warnings.is_empty() {
        out["_warning"] = json!(warnings.join("; "));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(id: &str, content: &str, status: &str) -> TodoInput {
        TodoInput {
            id: id.into(),
            content: Some(content.into()),
            status: Some(status.into()),
        }
    }

    #[test]
    fn in_progress_item_moves_ahead_of_earlier_pending_ones() {
        let store = TodoStore::new();
        let out = store.apply(
            Some(vec![
                input("1", "a", "completed"),
                input("2", "b", "pending"),
                input("3", "c", "in_progress"),
            ]),
            false,
        );
        let ids: Vec<&str> = out["todos"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["1", "3", "2"]);
    }
}
