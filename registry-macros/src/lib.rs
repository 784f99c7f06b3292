//! The `#[tool]` attribute and the `toolsets!` macro.
//!
//! Neither generates a registry: `build.rs` scans `tools/` and does that. These macros
//! exist so the files compile (parameter doc comments are not valid Rust and are
//! stripped here) and so grammar mistakes show up in the editor with exact spans.
//! They share their parsers with the generator, so both always agree.

use proc_macro::TokenStream;

#[proc_macro_attribute]
pub fn tool(attr: TokenStream, item: TokenStream) -> TokenStream {
    match hermes_codegen::macro_support::expand_tool(attr.into(), item.into()) {
        Ok(tokens) => tokens.into(),
        Err(error) => error.to_compile_error().into(),
    }
}

#[proc_macro]
pub fn toolsets(input: TokenStream) -> TokenStream {
    match hermes_codegen::macro_support::check_toolsets(input.into()) {
        Ok(tokens) => tokens.into(),
        Err(error) => error.to_compile_error().into(),
    }
}
