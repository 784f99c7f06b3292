//! From scanned files to a validated model of tools and toolsets.

use crate::diagnostics::Diagnostic;
use crate::scan::{relative, FoundTool, SourceFile, TOOLSETS_FILE};
use crate::schema::{parameters_schema, TypeIndex};
use crate::tool_fn::{ArgParam, Param};
use crate::toolsets_dsl::{ListExpr, NameRef, Statement, Term, ToolsetsFile};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

pub struct Model {
    /// Sorted by name.
    pub tools: Vec<ToolModel>,
    /// Resolved Rust paths of the availability probes, in first-use order.
    pub checks: Vec<String>,
    /// Sorted by name.
    pub toolsets: Vec<ToolsetModel>,
    /// Sorted by name.
    pub legacy: Vec<(String, Vec<String>)>,
    pub core: Vec<String>,
    pub toolsets_file: Option<PathBuf>,
}

pub struct ToolModel {
    pub name: String,
    pub toolset: String,
    pub description: String,
    pub emoji: String,
    /// `{"name", "description", "parameters"}`.
    pub schema: Value,
    pub module: String,
    pub fn_ident: syn::Ident,
    pub is_async: bool,
    pub shim_args: Vec<ShimArg>,
    pub check: Option<usize>,
    pub requires_env: Vec<String>,
    pub max_result_chars: Option<usize>,
    pub aliases: Vec<String>,
    pub dynamic_schema: Option<String>,
    pub unavailable_reason: Option<String>,
    pub concurrency: String,
    pub source: String,
}

pub enum ShimArg {
    Context,
    Required(String),
    Optional(String),
}

pub struct ToolsetModel {
    pub name: String,
    pub description: String,
    /// Existing direct tools, sorted.
    pub tools: Vec<String>,
    pub includes: Vec<String>,
    pub posture: bool,
    /// Named tools that this build does not have, sorted.
    pub planned: Vec<String>,
    /// Every existing tool reached through includes, sorted.
    pub resolved: Vec<String>,
}

/// A path written in a tool file, made absolute from the crate root.
fn resolve_fn_path(path: &syn::Path, module: &str) -> String {
    let written = quote::quote!(#path).to_string().replace(' ', "");
    if written.starts_with("crate::") || written.starts_with("::") {
        written
    } else {
        format!("crate::tools::{module}::{written}")
    }
}

pub fn build(
    crate_root: &Path,
    tools_dir: &Path,
    sources: &[SourceFile],
    found: Vec<FoundTool>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<Model> {
    let index = TypeIndex::new(sources);
    let mut tools = Vec::new();
    let mut checks: Vec<String> = Vec::new();
    // name or alias -> (canonical tool, where it was declared)
    let mut names: BTreeMap<String, (String, String)> = BTreeMap::new();

    for FoundTool { file_index, tool } in found {
        let file = &sources[file_index];
        let at = |span| Diagnostic::at(&file.rel_path, span, "");
        let here = at(tool.name_span);
        let place = format!("{}:{}:{}", here.file, here.line, here.column);
        if let Some((owner, first)) = names.get(&tool.name) {
            let what = if *owner == tool.name {
                "a tool"
            } else {
                "an alias"
            };
            diagnostics.push(Diagnostic::at(
                &file.rel_path,
                tool.name_span,
                format!("the tool name `{}` is already used by {what} declared at {first}; every tool name and alias must be unique", tool.name),
            ));
            continue;
        }
        names.insert(tool.name.clone(), (tool.name.clone(), place.clone()));
        for alias in &tool.attr.aliases {
            let alias_name = alias.value();
            if let Some((owner, first)) = names.get(&alias_name) {
                diagnostics.push(Diagnostic::at(
                    &file.rel_path,
                    alias.span(),
                    format!("the alias `{alias_name}` is already used by `{owner}` (declared at {first}); every tool name and alias must be unique"),
                ));
                continue;
            }
            let alias_place = at(alias.span());
            names.insert(
                alias_name,
                (
                    tool.name.clone(),
                    format!(
                        "{}:{}:{}",
                        alias_place.file, alias_place.line, alias_place.column
                    ),
                ),
            );
        }

        let args: Vec<&ArgParam> = tool
            .params
            .iter()
            .filter_map(|p| match p {
                Param::Arg(a) => Some(&**a),
                Param::Context => None,
            })
            .collect();
        let parameters = match parameters_schema(&args, &index, file_index) {
            Ok(parameters) => parameters,
            Err(e) => {
                diagnostics.extend(Diagnostic::from_syn(&file.rel_path, &e));
                continue;
            }
        };
        let check = tool.attr.check.as_ref().map(|path| {
            let resolved = resolve_fn_path(path, &file.module);
            match checks.iter().position(|c| *c == resolved) {
                Some(i) => i,
                None => {
                    checks.push(resolved);
                    checks.len() - 1
                }
            }
        });
        let shim_args = tool
            .params
            .iter()
            .map(|p| match p {
                Param::Context => ShimArg::Context,
                Param::Arg(a) if a.optional => ShimArg::Optional(a.name.clone()),
                Param::Arg(a) => ShimArg::Required(a.name.clone()),
            })
            .collect();
        tools.push(ToolModel {
            schema: json!({"name": tool.name, "description": tool.description, "parameters": parameters}),
            name: tool.name,
            toolset: tool.attr.toolset.value(),
            description: tool.description,
            emoji: tool.attr.emoji.as_ref().map(|e| e.value()).unwrap_or_default(),
            module: file.module.clone(),
            fn_ident: tool.fn_ident,
            is_async: tool.is_async,
            shim_args,
            check,
            requires_env: tool.attr.requires_env.iter().map(|l| l.value()).collect(),
            max_result_chars: tool.attr.max_result_chars.as_ref().map(|l| l.base10_parse().expect("checked when parsed")),
            aliases: tool.attr.aliases.iter().map(|l| l.value()).collect(),
            dynamic_schema: tool.attr.dynamic_schema.as_ref().map(|p| resolve_fn_path(p, &file.module)),
            unavailable_reason: tool.attr.unavailable_reason.as_ref().map(|p| resolve_fn_path(p, &file.module)),
            concurrency: tool.attr.concurrency.as_ref().map_or_else(|| "exclusive".to_string(), |c| c.value()),
            source: file.rel_path.clone(),
        });
    }
    tools.sort_by(|a, b| a.name.cmp(&b.name));

    let toolsets_path = tools_dir.join(TOOLSETS_FILE);
    let declarations = if toolsets_path.is_file() {
        parse_toolsets_file(
            &relative(crate_root, &toolsets_path),
            &toolsets_path,
            diagnostics,
        )
    } else {
        None
    };
    let (toolsets, legacy, core) = build_toolsets(
        &tools,
        &names,
        declarations,
        &relative(crate_root, &toolsets_path),
        diagnostics,
    );
    if !diagnostics.is_empty() {
        return None;
    }
    Some(Model {
        tools,
        checks,
        toolsets,
        legacy,
        core,
        toolsets_file: toolsets_path.is_file().then_some(toolsets_path),
    })
}

fn parse_toolsets_file(
    rel_path: &str,
    path: &Path,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<ToolsetsFile> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) => {
            diagnostics.push(Diagnostic::file_level(
                rel_path,
                format!("cannot read the file: {e}"),
            ));
            return None;
        }
    };
    let file = match syn::parse_file(&text) {
        Ok(file) => file,
        Err(e) => {
            diagnostics.extend(Diagnostic::from_syn(rel_path, &e));
            return None;
        }
    };
    let invocations: Vec<&syn::ItemMacro> = file
        .items
        .iter()
        .filter_map(|item| match item {
            syn::Item::Macro(m)
                if m.mac
                    .path
                    .segments
                    .last()
                    .is_some_and(|s| s.ident == "toolsets") =>
            {
                Some(m)
            }
            _ => None,
        })
        .collect();
    match invocations.as_slice() {
        [one] => match syn::parse2::<ToolsetsFile>(one.mac.tokens.clone()) {
            Ok(parsed) => Some(parsed),
            Err(e) => {
                diagnostics.extend(Diagnostic::from_syn(rel_path, &e));
                None
            }
        },
        [] => {
            diagnostics.push(Diagnostic::file_level(
                rel_path,
                "this file declares toolsets in one `toolsets! { ... }` block, and none was found",
            ));
            None
        }
        [_, second, ..] => {
            diagnostics.push(Diagnostic::at(
                rel_path,
                second.mac.path.segments[0].ident.span(),
                "declare every toolset in one `toolsets! { ... }` block",
            ));
            None
        }
    }
}

type ToolsetParts = (Vec<ToolsetModel>, Vec<(String, Vec<String>)>, Vec<String>);

fn build_toolsets(
    tools: &[ToolModel],
    names: &BTreeMap<String, (String, String)>,
    declarations: Option<ToolsetsFile>,
    rel_path: &str,
    diagnostics: &mut Vec<Diagnostic>,
) -> ToolsetParts {
    let statements = declarations.map(|d| d.statements).unwrap_or_default();
    let mut planned: BTreeSet<String> = BTreeSet::new();
    for statement in &statements {
        if let Statement::Planned { names: listed } = statement {
            planned.extend(listed.iter().map(|n| n.name.clone()));
        }
    }
    let resolve_name = |name: &NameRef, diagnostics: &mut Vec<Diagnostic>| -> Option<String> {
        if let Some((canonical, _)) = names.get(&name.name) {
            return Some(canonical.clone());
        }
        if planned.contains(&name.name) {
            return Some(name.name.clone());
        }
        let known = names.keys().chain(planned.iter()).map(String::as_str);
        let hint = crate::attr::did_you_mean(&name.name, known);
        diagnostics.push(Diagnostic::at(
            rel_path,
            name.span,
            format!(
                "`{}` is not a tool in tools/ and not listed in `planned [...]`{hint}",
                name.name
            ),
        ));
        None
    };

    let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let evaluate = |expr: &ListExpr,
                    groups: &BTreeMap<String, Vec<String>>,
                    diagnostics: &mut Vec<Diagnostic>|
     -> Vec<String> {
        let term_names = |term: &Term, diagnostics: &mut Vec<Diagnostic>| -> Vec<String> {
            match term {
                Term::Group(ident) => match groups.get(&ident.to_string()) {
                    Some(list) => list.clone(),
                    None => {
                        diagnostics.push(Diagnostic::at(rel_path, ident.span(), format!("no group named `{ident}` is declared above this line (`const {ident} = [...];`)")));
                        Vec::new()
                    }
                },
                Term::List(list) => list
                    .iter()
                    .filter_map(|n| resolve_name(n, diagnostics))
                    .collect(),
            }
        };
        let mut result = term_names(&expr.first, diagnostics);
        for (add, term) in &expr.rest {
            let names = term_names(term, diagnostics);
            if *add {
                for name in names {
                    if !result.contains(&name) {
                        result.push(name);
                    }
                }
            } else {
                result.retain(|n| !names.contains(n));
            }
        }
        result
    };

    let existing: BTreeSet<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    let mut toolsets: BTreeMap<String, ToolsetModel> = BTreeMap::new();
    let mut declared_at: BTreeMap<String, proc_macro2::Span> = BTreeMap::new();
    let mut explicit_legacy: Vec<(syn::LitStr, Vec<String>)> = Vec::new();
    for statement in &statements {
        match statement {
            Statement::Group { name, expr } => {
                let list = evaluate(expr, &groups, diagnostics);
                if groups.insert(name.to_string(), list).is_some() {
                    diagnostics.push(Diagnostic::at(
                        rel_path,
                        name.span(),
                        format!("the group `{name}` is declared twice"),
                    ));
                }
            }
            Statement::Planned { .. } => {}
            Statement::Toolset(decl) => {
                let name = decl.name.value();
                if !crate::attr::is_valid_toolset_name(&name) {
                    diagnostics.push(Diagnostic::at(
                        rel_path,
                        decl.name.span(),
                        format!(
                            "`{name}` cannot be a toolset name: {}",
                            crate::attr::TOOLSET_NAME_RULE
                        ),
                    ));
                    continue;
                }
                if declared_at.insert(name.clone(), decl.name.span()).is_some() {
                    diagnostics.push(Diagnostic::at(
                        rel_path,
                        decl.name.span(),
                        format!("the toolset \"{name}\" is declared twice"),
                    ));
                    continue;
                }
                let listed = decl
                    .tools
                    .as_ref()
                    .map(|e| evaluate(e, &groups, diagnostics))
                    .unwrap_or_default();
                let (present, missing): (Vec<String>, Vec<String>) = listed
                    .into_iter()
                    .partition(|n| existing.contains(n.as_str()));
                toolsets.insert(
                    name.clone(),
                    ToolsetModel {
                        name,
                        description: decl.description.clone(),
                        tools: present,
                        includes: decl.includes.iter().map(|l| l.value()).collect(),
                        posture: decl.posture,
                        planned: missing,
                        resolved: Vec::new(),
                    },
                );
            }
            Statement::Legacy { name, expr } => {
                let list = evaluate(expr, &groups, diagnostics);
                explicit_legacy.push((name.clone(), list));
            }
        }
    }

    for tool in tools {
        let toolset = toolsets
            .entry(tool.toolset.clone())
            .or_insert_with(|| ToolsetModel {
                name: tool.toolset.clone(),
                description: format!("{} tools", tool.toolset),
                tools: Vec::new(),
                includes: Vec::new(),
                posture: false,
                planned: Vec::new(),
                resolved: Vec::new(),
            });
        if !toolset.tools.contains(&tool.name) {
            toolset.tools.push(tool.name.clone());
        }
    }
    for statement in &statements {
        if let Statement::Toolset(decl) = statement {
            for include in &decl.includes {
                if !toolsets.contains_key(&include.value()) {
                    diagnostics.push(Diagnostic::at(
                        rel_path,
                        include.span(),
                        format!("the toolset \"{}\" includes \"{}\", which is neither declared here nor the toolset of any tool", decl.name.value(), include.value()),
                    ));
                }
            }
        }
    }
    let names_of: Vec<String> = toolsets.keys().cloned().collect();
    for name in &names_of {
        let resolved = resolve(&toolsets, name);
        let toolset = toolsets.get_mut(name).expect("listed above");
        toolset.tools.sort();
        toolset.tools.dedup();
        toolset.planned.sort();
        toolset.planned.dedup();
        toolset.resolved = resolved;
    }

    let mut legacy: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for toolset in toolsets.values() {
        let legacy_name = format!("{}_tools", toolset.name);
        if !toolsets.contains_key(&legacy_name) {
            legacy.insert(legacy_name, toolset.resolved.clone());
        }
    }
    for (name, list) in explicit_legacy {
        if toolsets.contains_key(&name.value()) {
            diagnostics.push(Diagnostic::at(rel_path, name.span(), format!("\"{}\" is a real toolset, and a real toolset name always wins over a legacy one; remove this line", name.value())));
            continue;
        }
        let mut present: Vec<String> = list
            .into_iter()
            .filter(|n| existing.contains(n.as_str()))
            .collect();
        present.sort();
        legacy.insert(name.value(), present);
    }
    let core = groups
        .get("CORE")
        .map(|list| {
            list.iter()
                .filter(|n| existing.contains(n.as_str()))
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    (
        toolsets.into_values().collect(),
        legacy.into_iter().collect(),
        core,
    )
}

/// Direct tools plus those of every include, each toolset expanded once.
fn resolve(toolsets: &BTreeMap<String, ToolsetModel>, name: &str) -> Vec<String> {
    let mut visited = BTreeSet::new();
    let mut out = BTreeSet::new();
    let mut stack = vec![name.to_string()];
    while let Some(current) = stack.pop() {
        if !visited.insert(current.clone()) {
            continue;
        }
        if let Some(toolset) = toolsets.get(&current) {
            out.extend(toolset.tools.iter().cloned());
            stack.extend(toolset.includes.iter().cloned());
        }
    }
    out.into_iter().collect()
}
