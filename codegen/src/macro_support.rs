//! The work of the `#[tool]` and `toolsets!` macros, kept here so they parse exactly
//! as the generator does.

use crate::attr::parse_tool_attr;
use crate::tool_fn::analyze_tool_fn;
use crate::toolsets_dsl::ToolsetsFile;
use proc_macro2::{Span, TokenStream};
use quote::ToTokens;

/// Checks the attribute and function, then returns the function with its parameter
/// doc comments removed (they are descriptions for the schema, not valid Rust).
pub fn expand_tool(attr: TokenStream, item: TokenStream) -> syn::Result<TokenStream> {
    let mut function: syn::ItemFn = syn::parse2(item).map_err(|e| {
        syn::Error::new(
            e.span(),
            "#[tool] goes on a function (`pub fn name(...) -> ToolResult`)",
        )
    })?;
    let parsed = parse_tool_attr(attr, Span::call_site())?;
    analyze_tool_fn(&function, parsed)?;
    for input in function.sig.inputs.iter_mut() {
        if let syn::FnArg::Typed(typed) = input {
            typed.attrs.retain(|a| !a.path().is_ident("doc"));
        }
    }
    // A tool's parameters are its schema, not an API to slim down: one per field the
    // model fills in, however many there are.
    function
        .attrs
        .push(syn::parse_quote!(#[allow(clippy::too_many_arguments)]));
    Ok(function.into_token_stream())
}

/// Checks the grammar; the declarations themselves are read by the generator.
pub fn check_toolsets(input: TokenStream) -> syn::Result<TokenStream> {
    syn::parse2::<ToolsetsFile>(input)?;
    Ok(TokenStream::new())
}
