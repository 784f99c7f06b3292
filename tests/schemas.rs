//! Every generated tool schema is valid JSON Schema, accepts arguments built from it
//! and rejects broken ones, has a strict-mode view, and is snapshotted for review.

use hermes_runtime::definitions::definition;
use hermes_runtime::strict::strict_parameters;
use hermes_tools::CATALOG;
use serde_json::{json, Map, Value};

fn parameters(name: &str) -> Value {
    definition(CATALOG.tool(name).unwrap())["function"]["parameters"].clone()
}

/// A value that satisfies `schema` using only required properties.
fn sample(schema: &Value) -> Value {
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        return values[0].clone();
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("string") => json!("sample"),
        Some("integer") => json!(1),
        Some("number") => json!(0.5),
        Some("boolean") => json!(true),
        Some("array") => json!([sample(&schema["items"])]),
        Some("object") => {
            let mut object = Map::new();
            for name in schema["required"].as_array().into_iter().flatten() {
                let name = name.as_str().unwrap();
                object.insert(name.into(), sample(&schema["properties"][name]));
            }
            Value::Object(object)
        }
        _ => json!("anything"),
    }
}

/// A value of a type the schema does not allow, when it names one.
fn wrong_type(schema: &Value) -> Option<Value> {
    match schema.get("type").and_then(Value::as_str)? {
        "string" => Some(json!(42)),
        "integer" | "number" => Some(json!("not a number")),
        "boolean" => Some(json!("yes")),
        "array" => Some(json!("not a list")),
        "object" => Some(json!([])),
        _ => None,
    }
}

#[test]
fn every_schema_is_valid_json_schema() {
    assert!(!CATALOG.tools.is_empty());
    for entry in CATALOG.tools {
        let schema = parameters(entry.name);
        if let Err(error) = jsonschema::meta::validate(&schema) {
            panic!("{}: not a valid JSON Schema: {error}", entry.name);
        }
        let strict = strict_parameters(&schema);
        if let Err(error) = jsonschema::meta::validate(&strict) {
            panic!(
                "{}: strict view is not a valid JSON Schema: {error}",
                entry.name
            );
        }
    }
}

#[test]
fn schemas_accept_good_and_reject_bad_arguments() {
    for entry in CATALOG.tools {
        let schema = parameters(entry.name);
        let validator = jsonschema::validator_for(&schema).unwrap();
        let good = sample(&schema);
        assert!(validator.is_valid(&good), "{}: rejects {good}", entry.name);
        for required in schema["required"].as_array().unwrap() {
            let mut missing = good.clone();
            missing
                .as_object_mut()
                .unwrap()
                .remove(required.as_str().unwrap());
            assert!(
                !validator.is_valid(&missing),
                "{}: accepts args without {required}",
                entry.name
            );
        }
        for (name, property) in schema["properties"].as_object().unwrap() {
            if let Some(bad) = wrong_type(property) {
                let mut broken = good.clone();
                broken[name] = bad.clone();
                assert!(
                    !validator.is_valid(&broken),
                    "{}: accepts {name} = {bad}",
                    entry.name
                );
            }
        }
        assert!(
            !validator.is_valid(&json!("not an object")),
            "{}",
            entry.name
        );
    }
}

#[test]
fn strict_view_requires_everything_and_allows_null_for_optional() {
    for entry in CATALOG.tools {
        let schema = parameters(entry.name);
        let strict = strict_parameters(&schema);
        assert_eq!(
            strict["additionalProperties"],
            json!(false),
            "{}",
            entry.name
        );
        let properties = strict["properties"].as_object().unwrap();
        let required: Vec<&str> = strict["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(required.len(), properties.len(), "{}", entry.name);
        let validator = jsonschema::validator_for(&strict).unwrap();
        let mut with_nulls = Map::new();
        let originally_required: Vec<&Value> =
            schema["required"].as_array().unwrap().iter().collect();
        for (name, property) in schema["properties"].as_object().unwrap() {
            let value = if originally_required.contains(&&json!(name)) {
                sample(property)
            } else {
                Value::Null
            };
            with_nulls.insert(name.clone(), value);
        }
        let instance = Value::Object(with_nulls);
        assert!(
            validator.is_valid(&instance),
            "{}: strict view rejects {instance}",
            entry.name
        );
    }
}

/// Keywords OpenAI's strict mode accepts in function parameters.
const STRICT_KEYWORDS: &[&str] = &[
    "type",
    "description",
    "enum",
    "items",
    "properties",
    "required",
    "additionalProperties",
    "minimum",
    "maximum",
    "anyOf",
];

fn assert_strict_subset(tool: &str, schema: &Value, path: &str) {
    let object = schema
        .as_object()
        .unwrap_or_else(|| panic!("{tool}: {path} is not a schema object"));
    for key in object.keys() {
        assert!(
            STRICT_KEYWORDS.contains(&key.as_str()),
            "{tool}: {path} uses `{key}`, which strict mode rejects"
        );
    }
    assert!(
        object.contains_key("type") || object.contains_key("anyOf"),
        "{tool}: {path} has no type; strict mode needs one"
    );
    if object.get("type") == Some(&json!("object"))
        || object
            .get("type")
            .and_then(Value::as_array)
            .is_some_and(|t| t.contains(&json!("object")))
    {
        assert_eq!(
            object.get("additionalProperties"),
            Some(&json!(false)),
            "{tool}: {path}"
        );
        let names: Vec<&String> = object["properties"].as_object().unwrap().keys().collect();
        let required: Vec<&str> = object["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(
            names.len(),
            required.len(),
            "{tool}: {path} must require every property"
        );
        for (name, property) in object["properties"].as_object().unwrap() {
            assert_strict_subset(tool, property, &format!("{path}.{name}"));
        }
    }
    if let Some(items) = object.get("items") {
        assert_strict_subset(tool, items, &format!("{path}[]"));
    }
    for branch in object
        .get("anyOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        assert_strict_subset(tool, branch, &format!("{path}|"));
    }
}

#[test]
fn strict_view_stays_within_openai_strict_mode() {
    for entry in CATALOG.tools {
        assert_strict_subset(
            entry.name,
            &strict_parameters(&parameters(entry.name)),
            "parameters",
        );
    }
}

#[test]
fn schema_snapshots() {
    for entry in CATALOG.tools {
        insta::assert_json_snapshot!(format!("schema_{}", entry.name), definition(entry));
    }
}
