//! Finding the tool files and the `#[tool]` items at their top level.

use crate::attr::parse_tool_attr;
use crate::diagnostics::Diagnostic;
use crate::tool_fn::{analyze_tool_fn, ToolFn};
use std::path::{Path, PathBuf};
use syn::visit::Visit;
use syn::{Attribute, Item};

/// The file that declares composite toolsets and presets rather than tools.
pub const TOOLSETS_FILE: &str = "toolsets.rs";

pub struct SourceFile {
    /// Relative to the crate root, e.g. `tools/file/tool.rs`.
    pub rel_path: String,
    pub abs_path: PathBuf,
    /// The module the file becomes under `crate::tools`.
    pub module: String,
    pub ast: syn::File,
}

pub struct FoundTool {
    pub file_index: usize,
    pub tool: ToolFn,
}

/// `tools/*.rs` and `tools/<dir>/tool.rs`, in path-component order (`tools/abc/tool.rs`
/// before `tools/abc.rs`), excluding `toolsets.rs`. Returns the paths to watch too.
pub fn list_tool_files(tools_dir: &Path) -> std::io::Result<Vec<(Vec<String>, PathBuf)>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(tools_dir)? {
        let entry = entry?;
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            let entry_point = path.join("tool.rs");
            if entry_point.is_file() {
                files.push((vec![name, "tool.rs".to_string()], entry_point));
            }
        } else if name.ends_with(".rs") && name != TOOLSETS_FILE {
            files.push((vec![name], path));
        }
    }
    files.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(files)
}

pub fn is_tool_attr(attr: &Attribute) -> bool {
    attr.path()
        .segments
        .last()
        .is_some_and(|s| s.ident == "tool")
}

/// Parses every tool file and collects the top-level tools. A `#[tool]` anywhere else
/// is an error, never silently skipped.
pub fn scan(
    crate_root: &Path,
    tools_dir: &Path,
    diagnostics: &mut Vec<Diagnostic>,
) -> (Vec<SourceFile>, Vec<FoundTool>) {
    let mut sources = Vec::new();
    let mut tools = Vec::new();
    let listed = match list_tool_files(tools_dir) {
        Ok(listed) => listed,
        Err(e) => {
            diagnostics.push(Diagnostic::file_level(
                &relative(crate_root, tools_dir),
                format!("cannot read the tools folder: {e}"),
            ));
            return (sources, tools);
        }
    };
    let mut modules_seen: Vec<(String, String)> = Vec::new();
    for (components, path) in listed {
        let rel_path = relative(crate_root, &path);
        let module = components[0].trim_end_matches(".rs").to_string();
        if !is_rust_identifier(&module) {
            diagnostics.push(Diagnostic::file_level(
                &rel_path,
                format!("`{module}` cannot be a Rust module name: name tool files with lowercase letters, digits and `_`"),
            ));
            continue;
        }
        if let Some((_, other)) = modules_seen.iter().find(|(m, _)| *m == module) {
            diagnostics.push(Diagnostic::file_level(
                &rel_path,
                format!(
                    "both {other} and {rel_path} would be the module `{module}`: keep one of them"
                ),
            ));
            continue;
        }
        modules_seen.push((module.clone(), rel_path.clone()));
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) => {
                diagnostics.push(Diagnostic::file_level(
                    &rel_path,
                    format!("cannot read the file: {e}"),
                ));
                continue;
            }
        };
        let ast = match syn::parse_file(&text) {
            Ok(ast) => ast,
            Err(e) => {
                diagnostics.extend(Diagnostic::from_syn(&rel_path, &e).into_iter().map(|mut d| {
                    let detail = if d.message == "cannot parse string into token stream" {
                        "a bracket, brace or parenthesis is not closed, or a token is invalid".to_string()
                    } else {
                        d.message.clone()
                    };
                    d.message = format!("this file is not valid Rust: {detail}");
                    d
                }));
                continue;
            }
        };
        let file_index = sources.len();
        for item in &ast.items {
            collect_top_level(item, &rel_path, file_index, &mut tools, diagnostics);
        }
        let mut nested = NestedToolFinder {
            rel_path: &rel_path,
            diagnostics,
            places: Vec::new(),
        };
        for item in &ast.items {
            nested.visit_item(item);
        }
        sources.push(SourceFile {
            rel_path,
            abs_path: path,
            module,
            ast,
        });
    }
    (sources, tools)
}

fn collect_top_level(
    item: &Item,
    rel_path: &str,
    file_index: usize,
    tools: &mut Vec<FoundTool>,
    diagnostics: &mut Vec<Diagnostic>,
) {
    let Item::Fn(function) = item else {
        if let Some(attr) = item_attrs(item).iter().find(|a| is_tool_attr(a)) {
            diagnostics.push(Diagnostic::at(
                rel_path,
                attr.pound_token.span,
                "#[tool] goes on a function (`pub fn name(...) -> ToolResult`), not on this item",
            ));
        }
        return;
    };
    let Some(attr) = function.attrs.iter().find(|a| is_tool_attr(a)) else {
        return;
    };
    if function.attrs.iter().filter(|a| is_tool_attr(a)).count() > 1 {
        diagnostics.push(Diagnostic::at(
            rel_path,
            attr.pound_token.span,
            "#[tool] is given twice on one function",
        ));
        return;
    }
    let tokens = match &attr.meta {
        syn::Meta::Path(_) => proc_macro2::TokenStream::new(),
        syn::Meta::List(list) => list.tokens.clone(),
        syn::Meta::NameValue(nv) => {
            diagnostics.push(Diagnostic::at(
                rel_path,
                nv.eq_token.span,
                "write the keys in parentheses: #[tool(toolset = \"...\")]",
            ));
            return;
        }
    };
    let attr_span = attr.pound_token.span;
    match parse_tool_attr(tokens, attr_span).and_then(|parsed| analyze_tool_fn(function, parsed)) {
        Ok(tool) => tools.push(FoundTool { file_index, tool }),
        Err(e) => diagnostics.extend(Diagnostic::from_syn(rel_path, &e)),
    }
}

fn item_attrs(item: &Item) -> &[Attribute] {
    match item {
        Item::Const(i) => &i.attrs,
        Item::Enum(i) => &i.attrs,
        Item::ExternCrate(i) => &i.attrs,
        Item::Fn(i) => &i.attrs,
        Item::ForeignMod(i) => &i.attrs,
        Item::Impl(i) => &i.attrs,
        Item::Macro(i) => &i.attrs,
        Item::Mod(i) => &i.attrs,
        Item::Static(i) => &i.attrs,
        Item::Struct(i) => &i.attrs,
        Item::Trait(i) => &i.attrs,
        Item::TraitAlias(i) => &i.attrs,
        Item::Type(i) => &i.attrs,
        Item::Union(i) => &i.attrs,
        Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

/// Reports `#[tool]` on anything below the top level: inside a function body, an
/// `impl` or trait, or an inline module.
struct NestedToolFinder<'a> {
    rel_path: &'a str,
    diagnostics: &'a mut Vec<Diagnostic>,
    /// Where the visitor is, innermost last; empty at the top level.
    places: Vec<&'static str>,
}

impl NestedToolFinder<'_> {
    fn report(&mut self, attrs: &[Attribute], place: &str) {
        if let Some(attr) = attrs.iter().find(|a| is_tool_attr(a)) {
            self.diagnostics.push(Diagnostic::at(
                self.rel_path,
                attr.pound_token.span,
                format!("#[tool] only works on functions at the top level of a file in tools/; this one is {place}, so it would never be registered: move it to the top level"),
            ));
        }
    }

    fn inside(&mut self, place: &'static str, visit: impl FnOnce(&mut Self)) {
        self.places.push(place);
        visit(self);
        self.places.pop();
    }
}

impl<'ast> Visit<'ast> for NestedToolFinder<'_> {
    fn visit_item(&mut self, item: &'ast Item) {
        if let Some(place) = self.places.last().copied() {
            self.report(item_attrs(item), place);
        }
        match item {
            Item::Fn(function) => {
                self.inside("inside a function body", |v| v.visit_block(&function.block))
            }
            Item::Mod(module) => {
                if let Some((_, items)) = &module.content {
                    self.inside("inside an inline module", |v| {
                        items.iter().for_each(|i| v.visit_item(i))
                    });
                }
            }
            Item::Impl(implementation) => {
                for impl_item in &implementation.items {
                    if let syn::ImplItem::Fn(method) = impl_item {
                        self.report(&method.attrs, "inside an impl block");
                        self.inside("inside a function body", |v| v.visit_block(&method.block));
                    }
                }
            }
            Item::Trait(tr) => {
                for trait_item in &tr.items {
                    if let syn::TraitItem::Fn(method) = trait_item {
                        self.report(&method.attrs, "inside a trait");
                    }
                }
            }
            _ => {}
        }
    }
}

pub fn relative(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .to_string_lossy()
        .replace('\\', "/")
}

fn is_rust_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}
