//! Schemas rewritten when definitions are built: browser_navigate's description names
//! only the other tools that survived the filter, and browser_cdp's `params` is an
//! open object.

use hermes_runtime::prelude::*;

/// browser_navigate's description for this turn. The advice to prefer the cheaper
/// tools (web_search, web_extract, the terminal) names only those offered now, so
/// the model is never pointed at a tool it does not have.
pub fn browser_navigate_schema(schema: &SchemaContext) -> Option<Value> {
    Some(json!({"description": navigate_description(
        schema.is_available("web_search"),
        schema.is_available("web_extract"),
        schema.is_available("terminal"),
    )}))
}

pub fn navigate_description(search: bool, extract: bool, terminal: bool) -> String {
    let mut text = String::from(
        "Open a URL in the browser; this starts the browser session for the task and must come before the other browser tools.",
    );
    let web: Vec<&str> = [(search, "web_search"), (extract, "web_extract")]
        .iter()
        .filter(|(on, _)| *on)
        .map(|(_, name)| *name)
        .collect();
    if !web.is_empty() {
        text.push_str(&format!(
            " To just look information up, {} is faster and cheaper.",
            web.join(" or ")
        ));
    }
    let plain: Vec<&str> = [
        (terminal, "curl in the terminal tool"),
        (extract, "web_extract"),
    ]
    .iter()
    .filter(|(on, _)| *on)
    .map(|(_, name)| *name)
    .collect();
    if !plain.is_empty() {
        text.push_str(&format!(
            " For plain-text addresses (.md, .txt, .json, .yaml, .csv, .xml files, raw.githubusercontent.com, documented API endpoints) use {} instead: a browser is much slower for those.",
            plain.join(" or ")
        ));
    }
    text.push_str(
        " Use the browser to interact with pages: clicking, filling forms, content that scripts render. The result holds a compact snapshot of the page with ref ids for its elements, so no browser_snapshot call is needed right after navigating.",
    );
    text
}

/// `timeout` with its default.
pub fn browser_cdp_schema(_: &SchemaContext) -> Option<Value> {
    let entry = crate::CATALOG.tool("browser_cdp")?;
    let mut generated: Value = serde_json::from_str(entry.schema).ok()?;
    let properties = &mut generated["parameters"]["properties"];
    properties["timeout"]["default"] = json!(30);
    Some(json!({"parameters": generated["parameters"]}))
}
