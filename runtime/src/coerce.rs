//! Repairing argument types models get wrong: `"42"` for an integer, `"true"` for a
//! boolean, a bare string where a list is expected, a JSON-encoded list or object in a
//! string. Guided by the tool's schema; whenever a repair is ambiguous the original
//! value is kept and the handler reports the problem.

use serde_json::{Map, Value};

/// Coerces each argument that has a property schema. Non-object arguments and schemas
/// without `properties` are returned unchanged.
pub fn coerce_arguments(args: Value, parameters: &Value) -> Value {
    let Value::Object(mut map) = args else {
        return args;
    };
    let Some(properties) = parameters.get("properties").and_then(Value::as_object) else {
        return Value::Object(map);
    };
    for (key, value) in map.iter_mut() {
        if let Some(schema) = properties.get(key) {
            let original = std::mem::take(value);
            *value = coerce_value(original, schema);
        }
    }
    Value::Object(map)
}

fn types_of(schema: &Value) -> Vec<&str> {
    match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(list)) => list.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

fn branches(schema: &Value) -> impl Iterator<Item = &Value> {
    ["anyOf", "oneOf"]
        .into_iter()
        .filter_map(|k| schema.get(k).and_then(Value::as_array))
        .flatten()
}

fn allows_null(schema: &Value) -> bool {
    types_of(schema).contains(&"null")
        || schema.get("nullable") == Some(&Value::Bool(true))
        || branches(schema).any(|b| types_of(b).contains(&"null"))
}

fn expects(schema: &Value, wanted: &str) -> bool {
    types_of(schema).contains(&wanted) || branches(schema).any(|b| types_of(b).contains(&wanted))
}

/// The schema a container's parts follow.
fn item_schema(schema: &Value) -> Option<&Value> {
    schema
        .get("items")
        .or_else(|| branches(schema).find_map(|b| b.get("items")))
}

fn property_schemas(schema: &Value) -> Option<&Map<String, Value>> {
    schema
        .get("properties")
        .and_then(Value::as_object)
        .or_else(|| branches(schema).find_map(|b| b.get("properties").and_then(Value::as_object)))
}

pub fn coerce_value(value: Value, schema: &Value) -> Value {
    // Only a declared list type wraps a lone value; a union leaves it to its branches.
    let expects_array = types_of(schema).contains(&"array");
    match value {
        Value::Null => Value::Null,
        // A JSON object or list where only a string is declared (a "JSON string"
        // parameter such as ha_call_service's `data`) is passed on as its JSON text.
        Value::Array(_) | Value::Object(_) if types_of(schema) == ["string"] => {
            Value::String(value.to_string())
        }
        Value::Array(_) | Value::Object(_) => walk_container(value, schema),
        Value::String(text) if expects_array => {
            let coerced = coerce_string(&text, schema);
            match coerced {
                Some(changed) => changed,
                None => {
                    if text.trim_start().starts_with('[') {
                        eprintln!("warning: an argument looks like a JSON list but does not parse; wrapping it as one string");
                    }
                    Value::Array(vec![Value::String(text)])
                }
            }
        }
        Value::String(text) => coerce_string(&text, schema).unwrap_or(Value::String(text)),
        other
            if expects_array
                && !types_of(schema).is_empty()
                && !matches_scalar_type(&other, schema) =>
        {
            Value::Array(vec![other])
        }
        other => other,
    }
}

fn matches_scalar_type(value: &Value, schema: &Value) -> bool {
    let types = types_of(schema);
    match value {
        Value::Bool(_) => types.contains(&"boolean"),
        Value::Number(n) => {
            types.contains(&"number") || (types.contains(&"integer") && (n.is_i64() || n.is_u64()))
        }
        _ => false,
    }
}

/// Walks a list or object, parsing JSON-encoded parts where the schema expects a
/// container there. Strings the schema types as strings stay strings.
fn walk_container(value: Value, schema: &Value) -> Value {
    match value {
        Value::Array(items) => {
            let Some(items_schema) = item_schema(schema) else {
                return Value::Array(items);
            };
            Value::Array(
                items
                    .into_iter()
                    .map(|item| walk_part(item, items_schema))
                    .collect(),
            )
        }
        Value::Object(mut map) => {
            if let Some(properties) = property_schemas(schema) {
                for (key, part) in map.iter_mut() {
                    if let Some(part_schema) = properties.get(key) {
                        let original = std::mem::take(part);
                        *part = walk_part(original, part_schema);
                    }
                }
            }
            Value::Object(map)
        }
        other => other,
    }
}

fn walk_part(part: Value, schema: &Value) -> Value {
    match part {
        Value::String(text)
            if (expects(schema, "array") || expects(schema, "object"))
                && !expects(schema, "string") =>
        {
            match parse_container(&text, schema) {
                Some(parsed) => walk_container(parsed, schema),
                None => Value::String(text),
            }
        }
        container @ (Value::Array(_) | Value::Object(_)) => walk_container(container, schema),
        other => other,
    }
}

fn parse_container(text: &str, schema: &Value) -> Option<Value> {
    match serde_json::from_str::<Value>(text.trim()) {
        Ok(parsed @ Value::Array(_)) if expects(schema, "array") => Some(parsed),
        Ok(parsed @ Value::Object(_)) if expects(schema, "object") => Some(parsed),
        _ => None,
    }
}

/// `Some(new)` when the string was repaired into another value.
fn coerce_string(text: &str, schema: &Value) -> Option<Value> {
    let types = types_of(schema);
    if types.is_empty() {
        if allows_null(schema) && text.trim().eq_ignore_ascii_case("null") {
            return Some(Value::Null);
        }
        // A union without a top-level type: try each branch in order.
        return branches(schema).find_map(|branch| coerce_string(text, branch));
    }
    if allows_null(schema) && text.trim().eq_ignore_ascii_case("null") {
        return Some(Value::Null);
    }
    types
        .iter()
        .filter(|t| **t != "null")
        .find_map(|t| coerce_string_as(text, t, schema))
}

fn coerce_string_as(text: &str, json_type: &str, schema: &Value) -> Option<Value> {
    let trimmed = text.trim();
    match json_type {
        "integer" => match parse_finite(trimmed)? {
            n if n.fract() == 0.0 && n.abs() < 9.007_199_254_740_992e15 => {
                Some(Value::from(n as i64))
            }
            _ => None,
        },
        "number" => {
            let n = parse_finite(trimmed)?;
            if n.fract() == 0.0 && n.abs() < 9.007_199_254_740_992e15 {
                Some(Value::from(n as i64))
            } else {
                serde_json::Number::from_f64(n).map(Value::Number)
            }
        }
        "boolean" => {
            if trimmed.eq_ignore_ascii_case("true") {
                Some(Value::Bool(true))
            } else if trimmed.eq_ignore_ascii_case("false") {
                Some(Value::Bool(false))
            } else {
                None
            }
        }
        "object" if trimmed.is_empty() && schema.get("required").is_none() => {
            Some(Value::Object(Map::new()))
        }
        "array" | "object" => {
            let parsed = parse_container(trimmed, &serde_json::json!({"type": json_type}));
            if parsed.is_none() {
                eprintln!("warning: an argument expected as {json_type} is a string that does not parse as one");
            }
            parsed.map(|p| walk_container(p, schema))
        }
        _ => None,
    }
}

/// Numbers JSON can carry: `inf`, `nan` and friends stay strings.
fn parse_finite(text: &str) -> Option<f64> {
    if text.is_empty()
        || text
            .chars()
            .any(|c| c.is_alphabetic() && !matches!(c, 'e' | 'E'))
    {
        return None;
    }
    text.parse::<f64>().ok().filter(|n| n.is_finite())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn coerce(value: Value, property: Value) -> Value {
        let parameters = json!({"type": "object", "properties": {"p": property}});
        coerce_arguments(json!({ "p": value }), &parameters)["p"].clone()
    }

    #[test]
    fn a_container_where_a_string_is_declared_becomes_its_json_text() {
        assert_eq!(
            coerce(json!({"brightness": 255}), json!({"type": "string"})),
            json!("{\"brightness\":255}")
        );
        assert_eq!(
            coerce(json!([1, 2]), json!({"type": "string"})),
            json!("[1,2]")
        );
        // A union that takes the container keeps it.
        assert_eq!(
            coerce(json!({"a": 1}), json!({"type": ["string", "object"]})),
            json!({"a": 1})
        );
    }

    #[test]
    fn numbers() {
        assert_eq!(coerce(json!("42"), json!({"type": "integer"})), json!(42));
        assert_eq!(coerce(json!("1e3"), json!({"type": "number"})), json!(1000));
        assert_eq!(coerce(json!("2.5"), json!({"type": "number"})), json!(2.5));
        assert_eq!(
            coerce(json!("3.5"), json!({"type": "integer"})),
            json!("3.5")
        );
        for kept in ["inf", "-inf", "nan", "Infinity", "NaN", "abc", ""] {
            assert_eq!(
                coerce(json!(kept), json!({"type": "number"})),
                json!(kept),
                "{kept}"
            );
        }
    }

    #[test]
    fn booleans_and_nulls() {
        assert_eq!(
            coerce(json!(" TRUE "), json!({"type": "boolean"})),
            json!(true)
        );
        assert_eq!(
            coerce(json!("False"), json!({"type": "boolean"})),
            json!(false)
        );
        assert_eq!(
            coerce(json!("yes"), json!({"type": "boolean"})),
            json!("yes")
        );
        assert_eq!(
            coerce(json!("null"), json!({"type": ["string", "null"]})),
            json!(null)
        );
        assert_eq!(
            coerce(json!("null"), json!({"type": "string", "nullable": true})),
            json!(null)
        );
        assert_eq!(
            coerce(json!("null"), json!({"type": "string"})),
            json!("null")
        );
    }

    #[test]
    fn any_of_boolean_or_array() {
        let schema =
            json!({"anyOf": [{"type": "boolean"}, {"type": "array", "items": {"type": "string"}}]});
        assert_eq!(coerce(json!("true"), schema.clone()), json!(true));
        assert_eq!(coerce(json!("False"), schema.clone()), json!(false));
        assert_eq!(coerce(json!(true), schema.clone()), json!(true));
        assert_eq!(coerce(json!(["err"]), schema.clone()), json!(["err"]));
        assert_eq!(coerce(json!("some-pattern"), schema), json!("some-pattern"));
    }

    #[test]
    fn arrays_and_objects() {
        let urls = json!({"type": "array", "items": {"type": "string"}});
        assert_eq!(
            coerce(json!("https://a.com"), urls.clone()),
            json!(["https://a.com"])
        );
        assert_eq!(
            coerce(json!("[\"a\", \"b\"]"), urls.clone()),
            json!(["a", "b"])
        );
        assert_eq!(
            coerce(
                json!(7),
                json!({"type": "array", "items": {"type": "integer"}})
            ),
            json!([7])
        );
        assert_eq!(coerce(json!(null), urls), json!(null));
        assert_eq!(
            coerce(json!("{\"a\": 1}"), json!({"type": "object"})),
            json!({"a": 1})
        );
        assert_eq!(
            coerce(json!("[1]"), json!({"type": "object"})),
            json!("[1]")
        );
        assert_eq!(coerce(json!(""), json!({"type": "object"})), json!({}));
        let nested = json!({"type": "array", "items": {"type": "object", "properties": {"tags": {"type": "array"}, "name": {"type": "string"}}}});
        assert_eq!(
            coerce(json!(["{\"tags\": \"[1,2]\", \"name\": \"[x]\"}"]), nested),
            json!([{"tags": [1, 2], "name": "[x]"}])
        );
    }

    #[test]
    fn untyped_and_unknown_properties_stay() {
        assert_eq!(
            coerce(json!("42"), json!({"description": "anything"})),
            json!("42")
        );
        let parameters = json!({"type": "object", "properties": {}});
        assert_eq!(
            coerce_arguments(json!({"other": "1"}), &parameters),
            json!({"other": "1"})
        );
        assert_eq!(coerce_arguments(json!("text"), &parameters), json!("text"));
    }
}
