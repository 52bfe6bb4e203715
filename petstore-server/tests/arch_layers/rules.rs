//! A room's `May use` line, read from its `//!` overview, and the module
//! paths of files.

use std::collections::BTreeSet;

pub(crate) fn module_of(rel: &str) -> Vec<String> {
    let stem = rel.strip_suffix(".rs").unwrap_or(rel);
    let mut module: Vec<String> = stem.split('/').map(str::to_owned).collect();
    if matches!(
        module.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        module.pop();
    }
    module
}

/// The `May use` line of a file's `//!` overview, if it has one.
pub(crate) fn rule_line(attrs: &[syn::Attribute]) -> Option<(usize, Result<Vec<String>, String>)> {
    for attr in attrs {
        let syn::Meta::NameValue(doc) = &attr.meta else {
            continue;
        };
        if !doc.path.is_ident("doc") {
            continue;
        }
        let syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Str(text),
            ..
        }) = &doc.value
        else {
            continue;
        };
        let text = text.value();
        if let Some(rest) = text.trim().strip_prefix("May use:") {
            return Some((
                attr.pound_token.spans[0].start().line,
                parse_rule(rest.trim()),
            ));
        }
    }
    None
}

/// ``"`a`, `b/mod.rs`."`` → `["a", "b/mod.rs"]`; `"nothing."` → `[]`.
fn parse_rule(text: &str) -> Result<Vec<String>, String> {
    if text == "nothing." {
        return Ok(Vec::new());
    }
    let form = "`May use:` wants `room`, `path/file.rs` or `*` in backticks, comma-separated, ending with `.`; or `nothing.`";
    let list = text.strip_suffix('.').ok_or_else(|| form.to_string())?;
    list.split(',')
        .map(|entry| {
            let entry = entry.trim();
            entry
                .strip_prefix('`')
                .and_then(|e| e.strip_suffix('`'))
                .filter(|e| !e.is_empty() && !e.contains('`'))
                .map(str::to_owned)
                .ok_or_else(|| format!("{form}; read `{entry}`"))
        })
        .collect()
}

/// The modules a file declares by `mod name;`.
pub(crate) fn child_modules(items: &[syn::Item]) -> BTreeSet<String> {
    items
        .iter()
        .filter_map(|item| match item {
            syn::Item::Mod(m) if m.content.is_none() => Some(m.ident.to_string()),
            _ => None,
        })
        .collect()
}
