//! The grammar of `tools/toolsets.rs`: composite toolsets, presets and legacy names.
//!
//! ```text
//! toolsets! {
//!     const CORE = [read_file, write_file, terminal];   // CORE: what every preset shares
//!     const CODING = CORE - [terminal];
//!     planned [web_search, vision_analyze];               // named by presets, not built yet
//!     /// Description of the toolset.
//!     toolset "debugging" { tools: [terminal], includes: ["file"] }
//!     toolset "coding" { tools: CODING, posture: true }
//!     legacy "terminal_tools" = [terminal];
//! }
//! ```

use proc_macro2::Span;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{braced, bracketed, Attribute, Ident, LitBool, LitStr, Token};

pub struct ToolsetsFile {
    pub statements: Vec<Statement>,
}

pub enum Statement {
    Group { name: Ident, expr: ListExpr },
    Planned { names: Vec<NameRef> },
    Toolset(ToolsetDecl),
    Legacy { name: LitStr, expr: ListExpr },
}

pub struct ToolsetDecl {
    pub name: LitStr,
    pub description: String,
    pub tools: Option<ListExpr>,
    pub includes: Vec<LitStr>,
    pub posture: bool,
}

/// A tool name as written: an identifier or a string.
#[derive(Clone)]
pub struct NameRef {
    pub name: String,
    pub span: Span,
}

/// `term (+|- term)*`
pub struct ListExpr {
    pub first: Term,
    pub rest: Vec<(bool, Term)>,
}

pub enum Term {
    Group(Ident),
    List(Vec<NameRef>),
}

mod kw {
    syn::custom_keyword!(planned);
    syn::custom_keyword!(toolset);
    syn::custom_keyword!(legacy);
    syn::custom_keyword!(tools);
    syn::custom_keyword!(includes);
    syn::custom_keyword!(posture);
}

impl Parse for ToolsetsFile {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let mut statements = Vec::new();
        while !input.is_empty() {
            let attrs = input.call(Attribute::parse_outer)?;
            let lookahead = input.lookahead1();
            if lookahead.peek(Token![const]) {
                reject_docs(&attrs, "a const group")?;
                input.parse::<Token![const]>()?;
                let name: Ident = input.parse()?;
                input.parse::<Token![=]>()?;
                let expr = input.parse()?;
                input.parse::<Token![;]>()?;
                statements.push(Statement::Group { name, expr });
            } else if lookahead.peek(kw::planned) {
                reject_docs(&attrs, "the planned list")?;
                input.parse::<kw::planned>()?;
                let names = parse_name_list(input)?;
                input.parse::<Token![;]>()?;
                statements.push(Statement::Planned { names });
            } else if lookahead.peek(kw::toolset) {
                let keyword = input.parse::<kw::toolset>()?;
                let name: LitStr = input.parse()?;
                let description = crate::tool_fn::doc_paragraphs(&attrs).join(" ");
                if description.is_empty() {
                    return Err(syn::Error::new(
                        keyword.span,
                        format!(
                            "toolset \"{}\" has no description: write a `///` doc comment above it",
                            name.value()
                        ),
                    ));
                }
                let body;
                braced!(body in input);
                let mut decl = ToolsetDecl {
                    name,
                    description,
                    tools: None,
                    includes: Vec::new(),
                    posture: false,
                };
                let mut seen: Vec<String> = Vec::new();
                while !body.is_empty() {
                    let field = body.lookahead1();
                    let key = if field.peek(kw::tools) {
                        body.parse::<kw::tools>()?;
                        "tools"
                    } else if field.peek(kw::includes) {
                        body.parse::<kw::includes>()?;
                        "includes"
                    } else if field.peek(kw::posture) {
                        body.parse::<kw::posture>()?;
                        "posture"
                    } else {
                        return Err(field.error());
                    };
                    if seen.iter().any(|s| s == key) {
                        return Err(body.error(format!("`{key}` is given twice in this toolset")));
                    }
                    seen.push(key.to_string());
                    body.parse::<Token![:]>()?;
                    match key {
                        "tools" => decl.tools = Some(body.parse()?),
                        "includes" => {
                            let list;
                            bracketed!(list in body);
                            let names: Punctuated<LitStr, Token![,]> =
                                Punctuated::parse_terminated(&list)?;
                            decl.includes = names.into_iter().collect();
                        }
                        _ => decl.posture = body.parse::<LitBool>()?.value,
                    }
                    if !body.is_empty() {
                        body.parse::<Token![,]>()?;
                    }
                }
                statements.push(Statement::Toolset(decl));
            } else if lookahead.peek(kw::legacy) {
                reject_docs(&attrs, "a legacy name")?;
                input.parse::<kw::legacy>()?;
                let name: LitStr = input.parse()?;
                input.parse::<Token![=]>()?;
                let expr = input.parse()?;
                input.parse::<Token![;]>()?;
                statements.push(Statement::Legacy { name, expr });
            } else {
                return Err(lookahead.error());
            }
        }
        Ok(ToolsetsFile { statements })
    }
}

fn reject_docs(attrs: &[Attribute], what: &str) -> syn::Result<()> {
    match attrs.first() {
        Some(attr) if !attr.path().is_ident("doc") => Err(syn::Error::new_spanned(
            attr,
            format!("attributes are not allowed on {what}"),
        )),
        _ => Ok(()),
    }
}

impl Parse for ListExpr {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let first = input.parse()?;
        let mut rest = Vec::new();
        loop {
            if input.peek(Token![+]) {
                input.parse::<Token![+]>()?;
                rest.push((true, input.parse()?));
            } else if input.peek(Token![-]) {
                input.parse::<Token![-]>()?;
                rest.push((false, input.parse()?));
            } else {
                break;
            }
        }
        Ok(ListExpr { first, rest })
    }
}

impl Parse for Term {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        if input.peek(syn::token::Bracket) {
            Ok(Term::List(parse_name_list(input)?))
        } else {
            Ok(Term::Group(input.parse()?))
        }
    }
}

fn parse_name_list(input: ParseStream) -> syn::Result<Vec<NameRef>> {
    let list;
    bracketed!(list in input);
    let mut names = Vec::new();
    while !list.is_empty() {
        if list.peek(LitStr) {
            let lit: LitStr = list.parse()?;
            names.push(NameRef {
                name: lit.value(),
                span: lit.span(),
            });
        } else {
            let ident: Ident = list.parse()?;
            names.push(NameRef {
                name: ident.to_string(),
                span: ident.span(),
            });
        }
        if !list.is_empty() {
            list.parse::<Token![,]>()?;
        }
    }
    Ok(names)
}
