//! The `#[tool(...)]` key grammar, shared by the attribute macro and the generator.

use proc_macro2::{Span, TokenStream};
use syn::parse::Parser;
use syn::{Expr, ExprArray, ExprLit, Lit, LitInt, LitStr, Path};

pub const KEYS: &[&str] = &[
    "name",
    "toolset",
    "emoji",
    "check",
    "requires_env",
    "max_result_chars",
    "aliases",
    "dynamic_schema",
    "concurrency",
    "unavailable_reason",
];

/// How a tool may overlap other calls of the same turn.
pub const CONCURRENCY_VALUES: &[&str] = &["exclusive", "read_only", "path_scoped"];

/// The parsed keys. Spans are kept so later checks can point at the right token.
#[derive(Clone)]
pub struct ToolAttr {
    pub name: Option<LitStr>,
    pub toolset: LitStr,
    pub emoji: Option<LitStr>,
    pub check: Option<Path>,
    pub requires_env: Vec<LitStr>,
    pub max_result_chars: Option<LitInt>,
    pub aliases: Vec<LitStr>,
    pub dynamic_schema: Option<Path>,
    pub concurrency: Option<LitStr>,
    pub unavailable_reason: Option<Path>,
}

#[derive(Default)]
struct Partial {
    seen: Vec<String>,
    name: Option<LitStr>,
    toolset: Option<LitStr>,
    emoji: Option<LitStr>,
    check: Option<Path>,
    requires_env: Vec<LitStr>,
    max_result_chars: Option<LitInt>,
    aliases: Vec<LitStr>,
    dynamic_schema: Option<Path>,
    concurrency: Option<LitStr>,
    unavailable_reason: Option<Path>,
}

/// Parses the tokens inside `#[tool(...)]`. `attr_span` is where a missing
/// `toolset` is reported.
pub fn parse_tool_attr(tokens: TokenStream, attr_span: Span) -> syn::Result<ToolAttr> {
    let mut partial = Partial::default();
    let parser = syn::meta::parser(|meta| {
        let key = meta
            .path
            .get_ident()
            .map(|i| i.to_string())
            .unwrap_or_else(|| {
                let path = &meta.path;
                quote::quote!(#path).to_string().replace(' ', "")
            });
        if !KEYS.contains(&key.as_str()) {
            return Err(meta.error(unknown_key_message(&key)));
        }
        if partial.seen.contains(&key) {
            return Err(meta.error(format!(
                "`{key}` is given twice in #[tool(...)]; each key may appear once"
            )));
        }
        partial.seen.push(key.clone());
        let value: Expr = meta.value()?.parse()?;
        match key.as_str() {
            "name" => partial.name = Some(expect_str(&key, &value)?),
            "toolset" => partial.toolset = Some(expect_str(&key, &value)?),
            "emoji" => partial.emoji = Some(expect_str(&key, &value)?),
            "check" => partial.check = Some(expect_path(&key, &value)?),
            "dynamic_schema" => partial.dynamic_schema = Some(expect_path(&key, &value)?),
            "unavailable_reason" => partial.unavailable_reason = Some(expect_path(&key, &value)?),
            "requires_env" => partial.requires_env = expect_str_list(&key, &value)?,
            "aliases" => partial.aliases = expect_str_list(&key, &value)?,
            "max_result_chars" => partial.max_result_chars = Some(expect_int(&key, &value)?),
            "concurrency" => {
                let lit = expect_str(&key, &value)?;
                if !CONCURRENCY_VALUES.contains(&lit.value().as_str()) {
                    return Err(syn::Error::new(
                        lit.span(),
                        format!(
                            "`concurrency` is one of {}: read_only tools run beside others, path_scoped ones beside calls on other paths, exclusive ones alone",
                            CONCURRENCY_VALUES.join(", ")
                        ),
                    ));
                }
                partial.concurrency = Some(lit);
            }
            _ => unreachable!("every key in KEYS is handled"),
        }
        Ok(())
    });
    parser.parse2(tokens)?;
    let Some(toolset) = partial.toolset else {
        return Err(syn::Error::new(
            attr_span,
            "#[tool] needs a toolset, e.g. #[tool(toolset = \"file\")]: the toolset is how agents enable and disable tools",
        ));
    };
    if !is_valid_toolset_name(&toolset.value()) {
        return Err(syn::Error::new(toolset.span(), TOOLSET_NAME_RULE));
    }
    Ok(ToolAttr {
        name: partial.name,
        toolset,
        emoji: partial.emoji,
        check: partial.check,
        requires_env: partial.requires_env,
        max_result_chars: partial.max_result_chars,
        aliases: partial.aliases,
        dynamic_schema: partial.dynamic_schema,
        concurrency: partial.concurrency,
        unavailable_reason: partial.unavailable_reason,
    })
}

pub const TOOLSET_NAME_RULE: &str =
    "a toolset name uses ASCII letters, digits, `_` and `-`; `all` and `*` are reserved (they mean every toolset)";

pub fn is_valid_toolset_name(name: &str) -> bool {
    !name.is_empty()
        && name != "all"
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

fn unknown_key_message(key: &str) -> String {
    let closest = did_you_mean(key, KEYS.iter().copied());
    format!(
        "unknown key `{key}` in #[tool(...)]{closest}; the keys are: {}",
        KEYS.join(", ")
    )
}

/// ` (did you mean `x`?)` for the known word closest to `wanted`, when one is within
/// three edits (the typos worth pointing at); empty otherwise. Ties go to the word that
/// sorts first, so the hint is the same on every build.
pub fn did_you_mean<'a>(wanted: &str, known: impl IntoIterator<Item = &'a str>) -> String {
    known
        .into_iter()
        .map(|k| (strsim::levenshtein(wanted, k), k))
        .min()
        .filter(|(distance, _)| *distance <= 3)
        .map(|(_, k)| format!(" (did you mean `{k}`?)"))
        .unwrap_or_default()
}

fn expect_str(key: &str, value: &Expr) -> syn::Result<LitStr> {
    match value {
        Expr::Lit(ExprLit {
            lit: Lit::Str(s), ..
        }) => Ok(s.clone()),
        other => Err(syn::Error::new_spanned(
            other,
            format!("`{key}` takes a string, e.g. {key} = \"...\""),
        )),
    }
}

fn expect_int(key: &str, value: &Expr) -> syn::Result<LitInt> {
    match value {
        Expr::Lit(ExprLit {
            lit: Lit::Int(i), ..
        }) => {
            i.base10_parse::<usize>()?;
            Ok(i.clone())
        }
        other => Err(syn::Error::new_spanned(
            other,
            format!("`{key}` takes a whole number, e.g. {key} = 100_000"),
        )),
    }
}

fn expect_path(key: &str, value: &Expr) -> syn::Result<Path> {
    match value {
        Expr::Path(p) if p.qself.is_none() => Ok(p.path.clone()),
        other => Err(syn::Error::new_spanned(
            other,
            format!("`{key}` takes the path of a function, e.g. {key} = my_function"),
        )),
    }
}

fn expect_str_list(key: &str, value: &Expr) -> syn::Result<Vec<LitStr>> {
    let Expr::Array(ExprArray { elems, .. }) = value else {
        return Err(syn::Error::new_spanned(
            value,
            format!("`{key}` takes a list of strings, e.g. {key} = [\"A\", \"B\"]"),
        ));
    };
    elems.iter().map(|e| expect_str(key, e)).collect()
}
