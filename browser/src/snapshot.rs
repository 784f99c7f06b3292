//! The accessibility tree as the text the models know:
//!
//! ```text
//! - heading "Sign in" [level=1] [ref=e1]
//! - textbox "Email" [ref=e2]
//! - button "Continue" [ref=e3]
//! - list:
//!   - link "Docs" [ref=e4]
//!   - link "Docs" [nth=1] [ref=e5]
//! ```
//!
//! Built from `Accessibility.getFullAXTree`. Interactive roles always get a ref, named
//! content roles too; a second element with the same role and name is told apart by
//! `[nth=N]`. Each ref is bound to the element's `backendNodeId`, so acting on it
//! reaches that element or fails; never another one in its place.

use serde_json::Value;
use std::collections::HashMap;

/// Roles a model acts on: always given a ref.
const INTERACTIVE: &[&str] = &[
    "button",
    "link",
    "textbox",
    "searchbox",
    "checkbox",
    "radio",
    "combobox",
    "listbox",
    "option",
    "menuitem",
    "menuitemcheckbox",
    "menuitemradio",
    "tab",
    "switch",
    "slider",
    "spinbutton",
    "treeitem",
    "textarea",
];

/// Content roles given a ref when they have a name.
const NAMED_CONTENT: &[&str] = &[
    "heading",
    "img",
    "image",
    "cell",
    "gridcell",
    "columnheader",
    "rowheader",
    "listitem",
    "article",
    "region",
    "dialog",
    "alertdialog",
    "figure",
    "tabpanel",
    "navigation",
    "main",
    "form",
    "table",
    "term",
    "definition",
];

/// Containers kept in a compact snapshot when something inside them is shown.
const STRUCTURE: &[&str] = &[
    "list",
    "listitem",
    "navigation",
    "main",
    "form",
    "table",
    "row",
    "dialog",
    "alertdialog",
    "menu",
    "menubar",
    "tablist",
    "tree",
    "grid",
    "banner",
    "contentinfo",
    "complementary",
    "region",
    "article",
    "group",
    "radiogroup",
    "toolbar",
];

/// Roles that are never a line of their own (their children are shown in their place).
const TRANSPARENT: &[&str] = &[
    "none",
    "generic",
    "presentation",
    "InlineTextBox",
    "LineBreak",
    "RootWebArea",
    "WebArea",
    "Iframe",
    "IframePresentational",
    "LayoutTable",
    "LayoutTableRow",
    "LayoutTableCell",
    "Section",
    "sectionheader",
    "sectionfooter",
    "paragraph",
    "Pre",
    "Div",
    "LabelText",
    "Legend",
    "Abbr",
    "Canvas",
    "Ruby",
    "Mark",
    "time",
    "emphasis",
    "strong",
    "code",
    "subscript",
    "superscript",
    "insertion",
    "deletion",
    "blockquote",
    "caption",
];

/// One ref of a snapshot.
#[derive(Debug, Clone)]
pub struct RefTarget {
    pub backend_node_id: i64,
    pub role: String,
    pub name: String,
}

/// A snapshot: its text and what each ref points at.
#[derive(Debug, Default)]
pub struct Snapshot {
    pub text: String,
    pub refs: HashMap<String, RefTarget>,
}

struct Node<'a> {
    raw: &'a Value,
    children: Vec<usize>,
}

fn ax_value(node: &Value, key: &str) -> String {
    match &node[key]["value"] {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn property<'a>(node: &'a Value, name: &str) -> Option<&'a Value> {
    node["properties"]
        .as_array()?
        .iter()
        .find(|p| p["name"] == name)
        .map(|p| &p["value"]["value"])
}

fn quote(text: &str) -> String {
    let one_line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let cut: String = if one_line.chars().count() > 200 {
        one_line.chars().take(200).collect::<String>() + "…"
    } else {
        one_line
    };
    format!("\"{}\"", cut.replace('\\', "\\\\").replace('"', "\\\""))
}

/// Builds the snapshot text from the `nodes` of `Accessibility.getFullAXTree`.
/// `full` includes text and every container; otherwise only elements with a ref and
/// the containers that hold them.
pub fn build(nodes: &[Value], full: bool) -> Snapshot {
    let mut index: HashMap<&str, usize> = HashMap::with_capacity(nodes.len());
    for (i, node) in nodes.iter().enumerate() {
        if let Some(id) = node["nodeId"].as_str() {
            index.insert(id, i);
        }
    }
    let mut tree: Vec<Node> = nodes
        .iter()
        .map(|raw| Node {
            raw,
            children: Vec::new(),
        })
        .collect();
    let mut has_parent = vec![false; nodes.len()];
    for (i, node) in nodes.iter().enumerate() {
        for child in node["childIds"].as_array().into_iter().flatten() {
            if let Some(&c) = child.as_str().and_then(|id| index.get(id)) {
                tree[i].children.push(c);
                has_parent[c] = true;
            }
        }
    }
    let roots: Vec<usize> = (0..nodes.len()).filter(|&i| !has_parent[i]).collect();

    // First pass: which nodes get a ref, in document order.
    let order = document_order(&tree, &roots);
    let mut wants_ref = vec![false; nodes.len()];
    let mut shown = vec![false; nodes.len()];
    for &i in &order {
        let raw = tree[i].raw;
        if raw["ignored"].as_bool() == Some(true) {
            continue;
        }
        let role = ax_value(raw, "role");
        let name = ax_value(raw, "name");
        let backend = raw["backendDOMNodeId"].as_i64();
        if backend.is_some()
            && (INTERACTIVE.contains(&role.as_str())
                || (NAMED_CONTENT.contains(&role.as_str()) && !name.trim().is_empty()))
        {
            wants_ref[i] = true;
        }
    }
    // Which nodes are shown: in full mode every non-transparent one; in compact
    // mode ref'd ones and the structure around them.
    let mut keeps = vec![false; nodes.len()];
    for &i in order.iter().rev() {
        let raw = tree[i].raw;
        if raw["ignored"].as_bool() == Some(true) {
            keeps[i] = tree[i].children.iter().any(|&c| keeps[c]);
            continue;
        }
        let role = ax_value(raw, "role");
        let child_kept = tree[i].children.iter().any(|&c| keeps[c]);
        let is_text = role == "StaticText";
        let name = ax_value(raw, "name");
        shown[i] = if full {
            let blank = name.trim().is_empty();
            let hidden = TRANSPARENT.contains(&role.as_str())
                || (is_text && blank)
                || (role == "group" && blank && !child_kept);
            !hidden
        } else {
            wants_ref[i]
                || (STRUCTURE.contains(&role.as_str()) && child_kept)
                || (role == "heading" && !name.trim().is_empty())
        };
        keeps[i] = shown[i] || child_kept;
    }

    // Refs numbered in document order; duplicates of (role, name) told apart.
    let mut snapshot = Snapshot::default();
    let mut seen: HashMap<(String, String), usize> = HashMap::new();
    let mut ref_of: HashMap<usize, (String, usize)> = HashMap::new();
    let mut next = 1;
    for &i in &order {
        if !(wants_ref[i] && keeps[i]) {
            continue;
        }
        let raw = tree[i].raw;
        let role = ax_value(raw, "role");
        let name = ax_value(raw, "name");
        let count = seen.entry((role.clone(), name.clone())).or_insert(0);
        let nth = *count;
        *count += 1;
        let id = format!("e{next}");
        next += 1;
        snapshot.refs.insert(
            id.clone(),
            RefTarget {
                backend_node_id: raw["backendDOMNodeId"].as_i64().unwrap_or_default(),
                role,
                name,
            },
        );
        ref_of.insert(i, (id, nth));
    }

    // Second pass: the text, indented by shown ancestors.
    let mut out = String::new();
    let mut stack: Vec<(usize, usize)> = roots.iter().rev().map(|&r| (r, 0)).collect();
    while let Some((i, depth)) = stack.pop() {
        if !keeps[i] {
            continue;
        }
        let raw = tree[i].raw;
        let child_depth = if shown[i] {
            line(&mut out, raw, depth, ref_of.get(&i));
            depth + 1
        } else {
            depth
        };
        // A text node's words are already in its parent's name when the parent is
        // named from its content; in full mode show it anyway unless identical.
        for &c in tree[i].children.iter().rev() {
            if shown[i]
                && ax_value(tree[c].raw, "role") == "StaticText"
                && ax_value(tree[c].raw, "name").trim() == ax_value(raw, "name").trim()
                && tree[c].children.iter().all(|&g| !keeps[g] || !shown[g])
            {
                continue;
            }
            stack.push((c, child_depth));
        }
    }
    snapshot.text = out.trim_end().to_string();
    snapshot
}

fn document_order(tree: &[Node], roots: &[usize]) -> Vec<usize> {
    let mut order = Vec::with_capacity(tree.len());
    let mut stack: Vec<usize> = roots.iter().rev().copied().collect();
    let mut visited = vec![false; tree.len()];
    while let Some(i) = stack.pop() {
        if std::mem::replace(&mut visited[i], true) {
            continue;
        }
        order.push(i);
        for &c in tree[i].children.iter().rev() {
            stack.push(c);
        }
    }
    order
}

fn line(out: &mut String, raw: &Value, depth: usize, reference: Option<&(String, usize)>) {
    let role = ax_value(raw, "role");
    let name = ax_value(raw, "name");
    for _ in 0..depth {
        out.push_str("  ");
    }
    if role == "StaticText" {
        out.push_str("- text: ");
        out.push_str(&quote(&name));
        out.push('\n');
        return;
    }
    out.push_str("- ");
    out.push_str(&role);
    if !name.trim().is_empty() {
        out.push(' ');
        out.push_str(&quote(&name));
    }
    if let Some(level) = property(raw, "level").and_then(Value::as_i64) {
        out.push_str(&format!(" [level={level}]"));
    }
    match property(raw, "checked").and_then(Value::as_str) {
        Some("true") => out.push_str(" [checked]"),
        Some("mixed") => out.push_str(" [checked=mixed]"),
        _ => {}
    }
    if property(raw, "disabled").and_then(Value::as_bool) == Some(true) {
        out.push_str(" [disabled]");
    }
    if let Some(expanded) = property(raw, "expanded").and_then(Value::as_bool) {
        out.push_str(&format!(" [expanded={expanded}]"));
    }
    if property(raw, "selected").and_then(Value::as_bool) == Some(true) {
        out.push_str(" [selected]");
    }
    if let Some((id, nth)) = reference {
        if *nth > 0 {
            out.push_str(&format!(" [nth={nth}]"));
        }
        out.push_str(&format!(" [ref={id}]"));
    }
    let value = ax_value(raw, "value");
    if !value.trim().is_empty() && value != name {
        out.push_str(": ");
        out.push_str(&quote(&value));
    }
    out.push('\n');
}

/// A ref as the model may write it: `@e5`, `e5`, `[ref=e5]`, `ref=e5`.
pub fn parse_ref(raw: &str) -> Option<String> {
    let trimmed = raw
        .trim()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .trim_start_matches("ref=")
        .trim_start_matches('@');
    let digits = trimmed.strip_prefix('e')?;
    (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())).then(|| trimmed.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(id: &str, role: &str, name: &str, backend: i64, children: &[&str]) -> Value {
        json!({"nodeId": id, "ignored": false, "role": {"value": role}, "name": {"value": name},
               "backendDOMNodeId": backend, "childIds": children})
    }

    #[test]
    fn refs_duplicates_and_compact_view() {
        let nodes = vec![
            node("1", "RootWebArea", "Page", 1, &["2", "3", "4", "5"]),
            node("2", "heading", "Title", 2, &["6"]),
            node("3", "link", "Docs", 3, &[]),
            node("4", "link", "Docs", 4, &[]),
            node("5", "generic", "", 5, &["7"]),
            node("6", "StaticText", "Title", 6, &[]),
            node("7", "StaticText", "Some words", 7, &[]),
        ];
        let compact = build(&nodes, false);
        assert_eq!(
            compact.text,
            "- heading \"Title\" [ref=e1]\n- link \"Docs\" [ref=e2]\n- link \"Docs\" [nth=1] [ref=e3]"
        );
        assert_eq!(compact.refs["e3"].backend_node_id, 4);
        let full = build(&nodes, true);
        assert!(
            full.text.contains("- text: \"Some words\""),
            "{}",
            full.text
        );
        assert_eq!(parse_ref("@e12").as_deref(), Some("e12"));
        assert_eq!(parse_ref("[ref=e3]").as_deref(), Some("e3"));
        assert_eq!(parse_ref("button"), None);
    }
}
