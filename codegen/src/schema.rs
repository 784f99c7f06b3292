//! Rust parameter types to JSON Schema, inlined (no `$ref`), the way models read best.

use crate::scan::SourceFile;
use crate::tool_fn::{doc_text, option_inner, ArgParam};
use serde_json::{json, Map, Value};
use syn::spanned::Spanned;
use syn::{Attribute, Fields, GenericArgument, Item, PathArguments, Type};

/// Where named parameter types (structs and enums in `tools/`) are found.
pub struct TypeIndex<'a> {
    sources: &'a [SourceFile],
}

impl<'a> TypeIndex<'a> {
    pub fn new(sources: &'a [SourceFile]) -> Self {
        TypeIndex { sources }
    }

    /// A type named `name`: the using file first, then a single match elsewhere.
    fn find(
        &self,
        name: &str,
        from_file: usize,
        span: proc_macro2::Span,
    ) -> syn::Result<(usize, &'a Item)> {
        let defined_in = |file: &'a SourceFile| {
            file.ast.items.iter().find(|item| match item {
                Item::Struct(s) => s.ident == name,
                Item::Enum(e) => e.ident == name,
                _ => false,
            })
        };
        if let Some(item) = defined_in(&self.sources[from_file]) {
            return Ok((from_file, item));
        }
        let elsewhere: Vec<(usize, &Item)> = self
            .sources
            .iter()
            .enumerate()
            .filter_map(|(i, f)| defined_in(f).map(|item| (i, item)))
            .collect();
        match elsewhere.as_slice() {
            [one] => Ok(*one),
            [] => Err(syn::Error::new(span, unsupported_type_message(name))),
            many => Err(syn::Error::new(
                span,
                format!(
                    "the type `{name}` is defined in several tool files ({}); define it in this file to say which one",
                    many.iter().map(|(i, _)| self.sources[*i].rel_path.as_str()).collect::<Vec<_>>().join(", ")
                ),
            )),
        }
    }
}

fn unsupported_type_message(name: &str) -> String {
    format!(
        "the type `{name}` cannot be a tool parameter: use String, bool, an integer or float type, Vec<T>, Option<T>, \
         HashMap<String, T>, serde_json::Value, or a struct, unit-variant enum or #[serde(untagged)] enum defined in a file in tools/"
    )
}

/// The `parameters` object of a tool.
pub fn parameters_schema(
    params: &[&ArgParam],
    index: &TypeIndex<'_>,
    file: usize,
) -> syn::Result<Value> {
    let mut properties = Map::new();
    let mut required = Vec::new();
    for param in params {
        let schema = type_schema(
            &param.ty,
            Some(&param.description),
            index,
            file,
            &mut Vec::new(),
        )?;
        properties.insert(param.name.clone(), schema);
        if !param.optional {
            required.push(Value::String(param.name.clone()));
        }
    }
    Ok(json!({"type": "object", "properties": properties, "required": required}))
}

fn with_description(mut schema: Map<String, Value>, description: Option<&str>) -> Value {
    if let Some(text) = description {
        // Keep `type` first and the description right after it: that is how reviewers
        // and models read schemas.
        let mut ordered = Map::new();
        if let Some(t) = schema.remove("type") {
            ordered.insert("type".into(), t);
        }
        ordered.insert("description".into(), Value::String(text.to_string()));
        ordered.extend(schema);
        return Value::Object(ordered);
    }
    Value::Object(schema)
}

fn object(pairs: &[(&str, Value)]) -> Map<String, Value> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_string(), v.clone()))
        .collect()
}

fn generic_args(segment: &syn::PathSegment) -> Vec<&Type> {
    match &segment.arguments {
        PathArguments::AngleBracketed(args) => args
            .args
            .iter()
            .filter_map(|a| match a {
                GenericArgument::Type(t) => Some(t),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

fn type_schema(
    ty: &Type,
    description: Option<&str>,
    index: &TypeIndex<'_>,
    file: usize,
    visiting: &mut Vec<String>,
) -> syn::Result<Value> {
    let span = ty.span();
    let Type::Path(path) = ty else {
        let shown = quote::quote!(#ty).to_string();
        return Err(syn::Error::new(span, unsupported_type_message(&shown)));
    };
    let segment = path
        .path
        .segments
        .last()
        .expect("a type path has a segment");
    let ident = segment.ident.to_string();
    let args = generic_args(segment);
    let simple = |t: &str| {
        Ok(with_description(
            object(&[("type", Value::from(t))]),
            description,
        ))
    };
    match ident.as_str() {
        "String" | "PathBuf" => simple("string"),
        "bool" => simple("boolean"),
        "f32" | "f64" => simple("number"),
        "i8" | "i16" | "i32" | "i64" | "i128" | "isize" => simple("integer"),
        "u8" | "u16" | "u32" | "u64" | "u128" | "usize" => Ok(with_description(
            object(&[("type", Value::from("integer")), ("minimum", Value::from(0))]),
            description,
        )),
        "Value" => Ok(with_description(Map::new(), description)),
        "Vec" | "VecDeque" | "BTreeSet" | "HashSet" if args.len() == 1 => {
            let items = type_schema(args[0], None, index, file, visiting)?;
            Ok(with_description(object(&[("type", Value::from("array")), ("items", items)]), description))
        }
        "HashMap" | "BTreeMap" if args.len() == 2 => {
            let key_is_string = matches!(args[0], Type::Path(p) if p.path.is_ident("String"));
            if !key_is_string {
                return Err(syn::Error::new(args[0].span(), "map parameters need `String` keys: JSON object keys are strings"));
            }
            let values = type_schema(args[1], None, index, file, visiting)?;
            Ok(with_description(
                object(&[("type", Value::from("object")), ("additionalProperties", values)]),
                description,
            ))
        }
        "Box" if args.len() == 1 => type_schema(args[0], description, index, file, visiting),
        "Option" => Err(syn::Error::new(
            span,
            "`Option` only makes a parameter or struct field optional; it cannot be nested inside another type",
        )),
        _ if args.is_empty() => named_type_schema(&ident, span, description, index, file, visiting),
        _ => Err(syn::Error::new(span, unsupported_type_message(&ident))),
    }
}

fn named_type_schema(
    name: &str,
    span: proc_macro2::Span,
    description: Option<&str>,
    index: &TypeIndex<'_>,
    file: usize,
    visiting: &mut Vec<String>,
) -> syn::Result<Value> {
    let (defining_file, item) = index.find(name, file, span)?;
    if visiting.iter().any(|v| v == name) {
        return Err(syn::Error::new(
            span,
            format!(
                "the type `{name}` contains itself; recursive parameter types are not supported"
            ),
        ));
    }
    let attrs = match item {
        Item::Struct(s) => &s.attrs,
        Item::Enum(e) => &e.attrs,
        _ => unreachable!("the index only holds structs and enums"),
    };
    if !derives_deserialize(attrs) {
        return Err(syn::Error::new(
            span,
            format!("`{name}` is used as a tool parameter, so it needs #[derive(Deserialize)] (serde) where it is defined"),
        ));
    }
    let container = SerdeAttrs::parse(attrs)?;
    visiting.push(name.to_string());
    let schema = match item {
        Item::Enum(e) if container.untagged => untagged_enum_schema(
            name,
            e,
            &container,
            description,
            index,
            defining_file,
            visiting,
        )?,
        Item::Enum(e) => {
            let mut values = Vec::new();
            for variant in &e.variants {
                if !matches!(variant.fields, Fields::Unit) {
                    return Err(syn::Error::new(
                        variant.span(),
                        format!("`{name}::{}` carries data; a parameter enum must have unit variants only (it becomes a string enum), or be #[serde(untagged)] (it becomes any of its variants' shapes)", variant.ident),
                    ));
                }
                let variant_attrs = SerdeAttrs::parse(&variant.attrs)?;
                if variant_attrs.skip {
                    continue;
                }
                let wire = variant_attrs.rename.unwrap_or_else(|| {
                    apply_rename_all(
                        &variant.ident.to_string(),
                        container.rename_all.as_deref(),
                        true,
                    )
                });
                values.push(Value::String(wire));
            }
            with_description(
                object(&[
                    ("type", Value::from("string")),
                    ("enum", Value::Array(values)),
                ]),
                description,
            )
        }
        Item::Struct(s) => {
            let Fields::Named(fields) = &s.fields else {
                return Err(syn::Error::new(
                    s.ident.span(),
                    format!("`{name}` must have named fields to be a parameter object"),
                ));
            };
            let schema = object_schema(name, fields, &container, index, defining_file, visiting)?;
            with_description(schema, description)
        }
        _ => unreachable!(),
    };
    visiting.pop();
    Ok(schema)
}

/// The JSON object a struct (or a struct variant) deserializes from.
fn object_schema(
    name: &str,
    fields: &syn::FieldsNamed,
    container: &SerdeAttrs,
    index: &TypeIndex<'_>,
    defining_file: usize,
    visiting: &mut Vec<String>,
) -> syn::Result<Map<String, Value>> {
    let mut properties = Map::new();
    let mut required = Vec::new();
    for field in &fields.named {
        let field_attrs = SerdeAttrs::parse(&field.attrs)?;
        if field_attrs.skip {
            continue;
        }
        let field_ident = field
            .ident
            .as_ref()
            .expect("named fields have names")
            .to_string();
        let wire = field_attrs.rename.clone().unwrap_or_else(|| {
            apply_rename_all(
                field_ident.trim_start_matches("r#"),
                container.rename_all.as_deref(),
                false,
            )
        });
        let field_description = doc_text(&field.attrs);
        if field_description.is_empty() {
            return Err(syn::Error::new(
                field.ident.as_ref().map_or(field.span(), |i| i.span()),
                format!("field `{field_ident}` of `{name}` has no description: write a `///` doc comment above it; the model reads it"),
            ));
        }
        let (field_type, optional) = match option_inner(&field.ty) {
            Some(inner) => (inner, true),
            None => (&field.ty, field_attrs.default),
        };
        let schema = type_schema(
            field_type,
            Some(&field_description),
            index,
            defining_file,
            visiting,
        )?;
        properties.insert(wire.clone(), schema);
        if !optional {
            required.push(Value::String(wire));
        }
    }
    let mut schema = object(&[
        ("type", Value::from("object")),
        ("properties", Value::Object(properties)),
        ("required", Value::Array(required)),
    ]);
    if container.deny_unknown_fields {
        schema.insert("additionalProperties".into(), Value::Bool(false));
    }
    Ok(schema)
}

/// `#[serde(untagged)]`: serde tries each variant in order, so the JSON may take the
/// shape of any of them (`anyOf`). A newtype variant takes its inner type's shape, a
/// struct variant an object; unit and multi-field tuple variants (JSON null and
/// arrays of mixed types) have no shape a tool schema offers.
fn untagged_enum_schema(
    name: &str,
    e: &syn::ItemEnum,
    container: &SerdeAttrs,
    description: Option<&str>,
    index: &TypeIndex<'_>,
    defining_file: usize,
    visiting: &mut Vec<String>,
) -> syn::Result<Value> {
    let mut branches = Vec::new();
    for variant in &e.variants {
        let variant_attrs = SerdeAttrs::parse(&variant.attrs)?;
        if variant_attrs.skip {
            continue;
        }
        let variant_name = format!("{name}::{}", variant.ident);
        let branch = match &variant.fields {
            Fields::Unnamed(fields) if fields.unnamed.len() == 1 => {
                let inner = &fields.unnamed[0].ty;
                if option_inner(inner).is_some() {
                    return Err(syn::Error::new(
                        inner.span(),
                        format!("`{variant_name}` wraps an `Option`, which accepts JSON null; a parameter schema does not offer null, so wrap the inner type"),
                    ));
                }
                type_schema(inner, None, index, defining_file, visiting)?
            }
            Fields::Named(fields) => Value::Object(object_schema(
                &variant_name,
                fields,
                &SerdeAttrs {
                    deny_unknown_fields: container.deny_unknown_fields,
                    ..variant_attrs
                },
                index,
                defining_file,
                visiting,
            )?),
            Fields::Unit => {
                return Err(syn::Error::new(
                    variant.span(),
                    format!("`{variant_name}` is a unit variant of an untagged enum, so it matches JSON null, which a parameter schema does not offer; give it one field or a struct body"),
                ))
            }
            Fields::Unnamed(_) => {
                return Err(syn::Error::new(
                    variant.span(),
                    format!("`{variant_name}` has several unnamed fields, so it matches a JSON array of mixed types, which a parameter schema cannot express; use one field or a struct body"),
                ))
            }
        };
        branches.push(branch);
    }
    if branches.is_empty() {
        return Err(syn::Error::new(
            e.ident.span(),
            format!("the untagged enum `{name}` has no variant the schema can offer"),
        ));
    }
    Ok(with_description(
        object(&[("anyOf", Value::Array(branches))]),
        description,
    ))
}

fn derives_deserialize(attrs: &[Attribute]) -> bool {
    attrs
        .iter()
        .filter(|a| a.path().is_ident("derive"))
        .any(|a| {
            let mut found = false;
            let _ = a.parse_nested_meta(|meta| {
                if meta
                    .path
                    .segments
                    .last()
                    .is_some_and(|s| s.ident == "Deserialize")
                {
                    found = true;
                }
                Ok(())
            });
            found
        })
}

/// The serde attributes that change what JSON a type accepts.
#[derive(Default)]
struct SerdeAttrs {
    rename: Option<String>,
    rename_all: Option<String>,
    default: bool,
    skip: bool,
    deny_unknown_fields: bool,
    untagged: bool,
}

const RENAME_RULES: &[&str] = &[
    "lowercase",
    "UPPERCASE",
    "PascalCase",
    "camelCase",
    "snake_case",
    "SCREAMING_SNAKE_CASE",
    "kebab-case",
    "SCREAMING-KEBAB-CASE",
];

impl SerdeAttrs {
    fn parse(attrs: &[Attribute]) -> syn::Result<SerdeAttrs> {
        let mut out = SerdeAttrs::default();
        for attr in attrs.iter().filter(|a| a.path().is_ident("serde")) {
            attr.parse_nested_meta(|meta| {
                let key = meta.path.get_ident().map(|i| i.to_string()).unwrap_or_default();
                match key.as_str() {
                    "rename" => out.rename = Some(meta.value()?.parse::<syn::LitStr>()?.value()),
                    "rename_all" => {
                        let rule = meta.value()?.parse::<syn::LitStr>()?;
                        if !RENAME_RULES.contains(&rule.value().as_str()) {
                            return Err(syn::Error::new(rule.span(), format!("unknown rename rule; serde knows {}", RENAME_RULES.join(", "))));
                        }
                        out.rename_all = Some(rule.value());
                    }
                    "default" => {
                        out.default = true;
                        if meta.input.peek(syn::Token![=]) {
                            let _: syn::LitStr = meta.value()?.parse()?;
                        }
                    }
                    "skip" | "skip_deserializing" => out.skip = true,
                    "deny_unknown_fields" => out.deny_unknown_fields = true,
                    "untagged" => out.untagged = true,
                    // Words of the error message only; the accepted shape stays.
                    "alias" | "expecting" => {
                        let _: syn::LitStr = meta.value()?.parse()?;
                    }
                    other => {
                        return Err(meta.error(format!(
                            "#[serde({other})] changes the JSON shape in a way the schema generator does not model; \
                             use rename, rename_all, default, skip, alias, expecting, deny_unknown_fields or untagged"
                        )))
                    }
                }
                Ok(())
            })?;
        }
        Ok(out)
    }
}

/// serde's `rename_all` rules. Variant names start PascalCase, field names snake_case.
fn apply_rename_all(name: &str, rule: Option<&str>, is_variant: bool) -> String {
    let Some(rule) = rule else {
        return name.to_string();
    };
    let words: Vec<String> = if is_variant {
        let mut words = Vec::new();
        let mut current = String::new();
        for c in name.chars() {
            if c.is_uppercase() && !current.is_empty() {
                words.push(std::mem::take(&mut current));
            }
            current.push(c);
        }
        if !current.is_empty() {
            words.push(current);
        }
        words.into_iter().map(|w| w.to_lowercase()).collect()
    } else {
        name.split('_')
            .filter(|w| !w.is_empty())
            .map(str::to_lowercase)
            .collect()
    };
    let capitalise = |w: &String| {
        let mut chars = w.chars();
        chars
            .next()
            .map(|c| c.to_uppercase().chain(chars).collect::<String>())
            .unwrap_or_default()
    };
    match rule {
        "lowercase" => words.concat(),
        "UPPERCASE" => words.concat().to_uppercase(),
        "PascalCase" => words.iter().map(capitalise).collect(),
        "camelCase" => words
            .iter()
            .enumerate()
            .map(|(i, w)| if i == 0 { w.clone() } else { capitalise(w) })
            .collect(),
        "snake_case" => words.join("_"),
        "SCREAMING_SNAKE_CASE" => words.join("_").to_uppercase(),
        "kebab-case" => words.join("-"),
        "SCREAMING-KEBAB-CASE" => words.join("-").to_uppercase(),
        _ => name.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::apply_rename_all;

    #[test]
    fn rename_rules_follow_serde() {
        assert_eq!(
            apply_rename_all("FilesOnly", Some("snake_case"), true),
            "files_only"
        );
        assert_eq!(
            apply_rename_all("FilesOnly", Some("kebab-case"), true),
            "files-only"
        );
        assert_eq!(
            apply_rename_all("FilesOnly", Some("lowercase"), true),
            "filesonly"
        );
        assert_eq!(
            apply_rename_all("old_string", Some("camelCase"), false),
            "oldString"
        );
        assert_eq!(apply_rename_all("old_string", None, false), "old_string");
    }
}
