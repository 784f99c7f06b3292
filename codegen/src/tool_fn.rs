//! What a `#[tool]` function means: its name, description and parameters. Shared by
//! the attribute macro (early, spanned errors in the editor) and the generator.

use crate::attr::ToolAttr;
use syn::spanned::Spanned;
use syn::{Attribute, FnArg, GenericArgument, ItemFn, Pat, PathArguments, ReturnType, Type};

pub struct ToolFn {
    pub attr: ToolAttr,
    pub fn_ident: syn::Ident,
    /// The registered name: `name = ".."` or the function's name.
    pub name: String,
    pub name_span: proc_macro2::Span,
    pub description: String,
    pub is_async: bool,
    pub params: Vec<Param>,
}

pub enum Param {
    /// `&ToolContext`: passed by the runtime, not part of the schema.
    Context,
    Arg(Box<ArgParam>),
}

pub struct ArgParam {
    pub name: String,
    pub span: proc_macro2::Span,
    /// The declared type; for an optional parameter, the type inside `Option`.
    pub ty: Type,
    pub optional: bool,
    pub description: String,
}

/// Text of the `///` lines, one entry per line, a single leading space removed.
pub fn doc_lines(attrs: &[Attribute]) -> Vec<String> {
    attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .filter_map(|a| match &a.meta {
            syn::Meta::NameValue(nv) => match &nv.value {
                syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(s),
                    ..
                }) => Some(s.value()),
                _ => None,
            },
            _ => None,
        })
        // `///` alone yields an empty doc string: that is a paragraph break, so it must
        // survive as one empty line (`"".lines()` would drop it).
        .flat_map(|text| {
            text.split('\n')
                .map(|l| {
                    l.strip_prefix(' ')
                        .unwrap_or(l)
                        .trim_end_matches('\r')
                        .to_string()
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Paragraphs of a doc comment, each with its lines joined by spaces.
pub fn doc_paragraphs(attrs: &[Attribute]) -> Vec<String> {
    let mut paragraphs = Vec::new();
    let mut current: Vec<String> = Vec::new();
    for line in doc_lines(attrs) {
        let line = line.trim();
        if line.is_empty() {
            if !current.is_empty() {
                paragraphs.push(current.join(" "));
                current.clear();
            }
        } else {
            current.push(line.to_string());
        }
    }
    if !current.is_empty() {
        paragraphs.push(current.join(" "));
    }
    paragraphs
}

/// Whole doc text for a parameter or field: paragraphs separated by a blank line.
pub fn doc_text(attrs: &[Attribute]) -> String {
    doc_paragraphs(attrs).join("\n\n")
}

pub fn is_valid_tool_name(name: &str) -> bool {
    let mut chars = name.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    (first.is_ascii_alphabetic() || first == '_')
        && name.len() <= 64
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// `Option<T>` -> `Some(T)`.
pub fn option_inner(ty: &Type) -> Option<&Type> {
    let Type::Path(path) = ty else { return None };
    let last = path.path.segments.last()?;
    if last.ident != "Option" {
        return None;
    }
    let PathArguments::AngleBracketed(args) = &last.arguments else {
        return None;
    };
    match args.args.first() {
        Some(GenericArgument::Type(inner)) if args.args.len() == 1 => Some(inner),
        _ => None,
    }
}

fn is_context_type(ty: &Type) -> bool {
    let Type::Path(path) = ty else { return false };
    path.path
        .segments
        .last()
        .is_some_and(|s| s.ident == "ToolContext")
}

/// Checks the function's shape and reads its description and parameters.
pub fn analyze_tool_fn(item: &ItemFn, attr: ToolAttr) -> syn::Result<ToolFn> {
    let fn_ident = item.sig.ident.clone();
    let (name, name_span) = match &attr.name {
        Some(lit) => (lit.value(), lit.span()),
        None => (fn_ident.to_string(), fn_ident.span()),
    };
    if !is_valid_tool_name(&name) {
        return Err(syn::Error::new(
            name_span,
            format!(
                "`{name}` is not a valid tool name: use 1 to 64 ASCII letters, digits, `_` or `-`, starting with a letter or `_`"
            ),
        ));
    }
    for alias in &attr.aliases {
        if !is_valid_tool_name(&alias.value()) {
            return Err(syn::Error::new(
                alias.span(),
                format!("alias `{}` is not a valid tool name: use 1 to 64 ASCII letters, digits, `_` or `-`, starting with a letter or `_`", alias.value()),
            ));
        }
    }
    if !item.sig.generics.params.is_empty() {
        return Err(syn::Error::new_spanned(
            &item.sig.generics,
            "a tool function cannot be generic: the runtime calls it with concrete argument types",
        ));
    }
    if let ReturnType::Default = item.sig.output {
        return Err(syn::Error::new(
            item.sig.ident.span(),
            format!("tool `{name}` must return ToolResult, e.g. `-> ToolResult`"),
        ));
    }
    let description = doc_paragraphs(&item.attrs)
        .into_iter()
        .next()
        .unwrap_or_default();
    if description.is_empty() {
        return Err(syn::Error::new(
            item.sig.ident.span(),
            format!("tool `{name}` has no description: write a `///` doc comment above the function; its first paragraph is what the model reads"),
        ));
    }
    let mut params = Vec::new();
    let mut seen_context = false;
    for input in &item.sig.inputs {
        let typed = match input {
            FnArg::Receiver(receiver) => {
                return Err(syn::Error::new_spanned(
                    receiver,
                    "a tool is a free function, not a method: remove `self`",
                ));
            }
            FnArg::Typed(typed) => typed,
        };
        if let Type::Reference(reference) = &*typed.ty {
            if is_context_type(&reference.elem) {
                if seen_context {
                    return Err(syn::Error::new_spanned(
                        typed,
                        "a tool takes the context once",
                    ));
                }
                seen_context = true;
                params.push(Param::Context);
                continue;
            }
        }
        if is_context_type(&typed.ty) {
            return Err(syn::Error::new_spanned(
                &typed.ty,
                "take the context by reference: `ctx: &ToolContext`",
            ));
        }
        let Pat::Ident(pat) = &*typed.pat else {
            return Err(syn::Error::new_spanned(&typed.pat, "write the parameter as a plain name, e.g. `path: String`; its name is the argument's name in the schema"));
        };
        let arg_name = pat.ident.to_string();
        let arg_name = arg_name.strip_prefix("r#").unwrap_or(&arg_name).to_string();
        let description = doc_text(&typed.attrs);
        if description.is_empty() {
            return Err(syn::Error::new(
                pat.ident.span(),
                format!("parameter `{arg_name}` of tool `{name}` has no description: write a `///` doc comment above it; the model reads it to know what to pass"),
            ));
        }
        let (ty, optional) = match option_inner(&typed.ty) {
            Some(inner) => (inner.clone(), true),
            None => ((*typed.ty).clone(), false),
        };
        if let Type::Reference(_) = ty {
            return Err(syn::Error::new_spanned(&typed.ty, format!("parameter `{arg_name}` must own its value (e.g. `String`, not `&str`): arguments are read from JSON")));
        }
        params.push(Param::Arg(Box::new(ArgParam {
            name: arg_name,
            span: typed.span(),
            ty,
            optional,
            description,
        })));
    }
    Ok(ToolFn {
        attr,
        fn_ident,
        name,
        name_span,
        description,
        is_async: item.sig.asyncness.is_some(),
        params,
    })
}
