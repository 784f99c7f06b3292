//! The OpenAI strict-mode view of a schema: every property required, optional ones
//! nullable, no extra properties. Derived from the same schema, never written by hand.

use serde_json::{Map, Value};

/// Rewrites a `parameters` object (and every nested object) for strict mode.
pub fn strict_parameters(parameters: &Value) -> Value {
    let mut out = parameters.clone();
    make_strict(&mut out);
    out
}

fn make_strict(schema: &mut Value) {
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    if let Some(items) = object.get_mut("items") {
        make_strict(items);
    }
    // Each branch of a union is a schema of its own, objects included.
    if let Some(Value::Array(branches)) = object.get_mut("anyOf") {
        branches.iter_mut().for_each(make_strict);
    }
    if object.get("type").and_then(Value::as_str) != Some("object") {
        return;
    }
    let required: Vec<String> = object
        .get("required")
        .and_then(Value::as_array)
        .map(|names| {
            names
                .iter()
                .filter_map(|n| n.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let mut all_names = Vec::new();
    if let Some(Value::Object(properties)) = object.get_mut("properties") {
        for (name, property) in properties.iter_mut() {
            make_strict(property);
            if !required.contains(name) {
                make_nullable(property);
            }
            all_names.push(Value::String(name.clone()));
        }
    } else {
        object.insert("properties".into(), Value::Object(Map::new()));
    }
    object.insert("required".into(), Value::Array(all_names));
    object.insert("additionalProperties".into(), Value::Bool(false));
}

fn make_nullable(property: &mut Value) {
    let Some(object) = property.as_object_mut() else {
        return;
    };
    match object.get_mut("type") {
        Some(Value::String(single)) => {
            let single = std::mem::take(single);
            object.insert(
                "type".into(),
                Value::Array(vec![Value::String(single), "null".into()]),
            );
        }
        Some(Value::Array(types)) => {
            if !types.iter().any(|t| t == "null") {
                types.push("null".into());
            }
        }
        _ => {
            let inner = Value::Object(std::mem::take(object));
            object.insert(
                "anyOf".into(),
                Value::Array(vec![inner, serde_json::json!({"type": "null"})]),
            );
        }
    }
    // A nullable enum must list null among its values too.
    if let Some(Value::Array(values)) = object.get_mut("enum") {
        if !values.contains(&Value::Null) {
            values.push(Value::Null);
        }
    }
}
