//! One model turn's tool calls: run together where that is safe, in order where it is
//! not, results in the calls' order.
//!
//! Each tool declares its concurrency (`#[tool(concurrency = "...")]`, exclusive by
//! default). Reads run at once; a write waits for earlier calls that touch the same
//! path; an exclusive tool (a shell command, a question to the user, an MCP tool)
//! runs alone, after everything before it.

use crate::catalog::Concurrency;
use crate::context::ToolContext;
use crate::dispatch::{parse_arguments, ToolCall};
use crate::registry::Registry;
use serde_json::Value;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Access {
    /// Reads; `Some(path)` when it reads at or below one path.
    Read(Option<PathBuf>),
    Write(PathBuf),
    /// Must not overlap anything.
    Exclusive,
}

/// How a call may overlap others: from the tool's declared concurrency and, for
/// tools that read or write one path, the `path` argument.
pub fn access_of(concurrency: Concurrency, args: &Value, ctx: &ToolContext) -> Access {
    let path = args
        .get("path")
        .and_then(Value::as_str)
        .map(|p| normalise(&ctx.resolve_path(p)));
    match concurrency {
        Concurrency::ReadOnly => Access::Read(path),
        Concurrency::PathScoped => path.map_or(Access::Exclusive, Access::Write),
        Concurrency::Exclusive => Access::Exclusive,
    }
}

/// `a/./b/../c` -> `a/c`, without touching the file system.
fn normalise(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

fn overlaps(a: &Path, b: &Path) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

/// Whether two calls must not overlap (the later one waits for the earlier).
pub fn conflicts(a: &Access, b: &Access) -> bool {
    match (a, b) {
        (Access::Exclusive, _) | (_, Access::Exclusive) => true,
        (Access::Read(_), Access::Read(_)) => false,
        (Access::Write(w), Access::Read(r)) | (Access::Read(r), Access::Write(w)) => {
            r.as_ref().is_none_or(|r| overlaps(w, r))
        }
        (Access::Write(x), Access::Write(y)) => overlaps(x, y),
    }
}

/// Splits calls (by index) into consecutive groups whose members may run at once.
/// A call starts a new group when it conflicts with a member of the current one, so
/// conflicting calls keep their order.
pub fn plan(accesses: &[Access]) -> Vec<Vec<usize>> {
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for (index, access) in accesses.iter().enumerate() {
        let joins_current = groups.last().is_some_and(|group| {
            group
                .iter()
                .all(|member| !conflicts(&accesses[*member], access))
        });
        if joins_current {
            groups.last_mut().expect("checked").push(index);
        } else {
            groups.push(vec![index]);
        }
    }
    groups
}

impl Registry {
    /// What `call` reads, writes or holds exclusively, for ordering it among others.
    pub fn access_of_call(&self, call: &ToolCall, ctx: &ToolContext) -> Access {
        let args = parse_arguments(call.arguments.as_ref()).unwrap_or(Value::Null);
        match self.get(&call.name) {
            Some(tool) => access_of(tool.concurrency(), &args, ctx),
            // Unknown tools answer with an error and touch nothing.
            None => Access::Read(None),
        }
    }

    /// Runs a turn's calls and returns their results in the same order, then applies
    /// the turn's total result budget.
    pub fn handle_batch(&self, calls: &[ToolCall], ctx: &ToolContext) -> Vec<String> {
        let accesses: Vec<Access> = calls
            .iter()
            .map(|call| self.access_of_call(call, ctx))
            .collect();
        let mut results: Vec<Option<String>> = vec![None; calls.len()];
        for group in plan(&accesses) {
            if let [only] = group.as_slice() {
                results[*only] = Some(self.handle_function_call(&calls[*only], ctx));
                continue;
            }
            std::thread::scope(|scope| {
                let handles: Vec<_> = group
                    .iter()
                    .map(|&index| {
                        (
                            index,
                            scope.spawn(move || self.handle_function_call(&calls[index], ctx)),
                        )
                    })
                    .collect();
                for (index, handle) in handles {
                    // handle_function_call catches every panic; a join error would
                    // mean the thread itself died, which still gets a JSON answer.
                    results[index] = Some(handle.join().unwrap_or_else(|_| {
                        crate::output::tool_error(format!(
                            "Error executing {}: the worker thread died",
                            calls[index].name
                        ))
                    }));
                }
            });
        }
        let mut results: Vec<String> = results
            .into_iter()
            .map(|r| r.expect("every call ran"))
            .collect();
        let budget = self
            .config()
            .positive_usize("tool_budget.turn_budget_chars")
            .unwrap_or(crate::budget::DEFAULT_TURN_CHARS);
        let ids: Vec<String> = calls
            .iter()
            .map(|c| c.tool_call_id.clone().unwrap_or_else(|| c.name.clone()))
            .collect();
        crate::budget::apply_turn_budget(&mut results, budget, self.hermes_home(), &ids);
        results
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ctx() -> ToolContext {
        ToolContext::builder().cwd("/work").build()
    }

    #[test]
    fn reads_run_together_and_writes_to_one_path_keep_their_order() {
        let c = ctx();
        let read = |args| access_of(Concurrency::ReadOnly, &args, &c);
        let write = |args| access_of(Concurrency::PathScoped, &args, &c);
        let accesses = vec![
            read(json!({"path": "a.txt"})),
            read(json!({"path": "b.txt"})),
            write(json!({"path": "c.txt"})),
            write(json!({"path": "./c.txt"})),
            read(json!({"path": "a.txt"})),
            access_of(Concurrency::Exclusive, &json!({}), &c),
            read(json!({"path": "/work/c.txt"})),
        ];
        assert_eq!(
            plan(&accesses),
            vec![vec![0, 1, 2], vec![3, 4], vec![5], vec![6]]
        );
    }

    #[test]
    fn a_read_conflicts_with_writes_below_its_path() {
        let c = ctx();
        let search = access_of(
            Concurrency::ReadOnly,
            &json!({"pattern": "x", "path": "src"}),
            &c,
        );
        let inside = access_of(Concurrency::PathScoped, &json!({"path": "src/lib.rs"}), &c);
        let outside = access_of(Concurrency::PathScoped, &json!({"path": "docs/a.md"}), &c);
        assert!(conflicts(&search, &inside));
        assert!(!conflicts(&search, &outside));
        assert_eq!(
            access_of(Concurrency::PathScoped, &json!({"patch": "..."}), &c),
            Access::Exclusive
        );
        assert_eq!(
            access_of(Concurrency::Exclusive, &json!({"path": "a"}), &c),
            Access::Exclusive
        );
    }
}
