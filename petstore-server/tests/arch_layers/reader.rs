//! What one file imports and names outside its test code, read with
//! `syn`: paths into the crate, other paths, identifiers.

use std::collections::BTreeSet;

use proc_macro2::{Spacing, TokenStream, TokenTree};
use syn::visit::{self, Visit};

/// What one file imports and names, outside its test code.
#[derive(Default)]
pub(crate) struct Reader {
    /// The module the code being read is in.
    pub(crate) module: Vec<String>,
    /// The file's own `mod name;` children.
    pub(crate) children: BTreeSet<String>,
    /// Children declared under `#[cfg(test)]`.
    pub(crate) test_children: Vec<String>,
    pub(crate) macros: Vec<String>,
    pub(crate) internal: Vec<(usize, Vec<String>)>,
    pub(crate) external: Vec<(usize, String)>,
    pub(crate) idents: Vec<(usize, String)>,
}

impl Reader {
    /// Records `segments` (a path as written), resolved from the crate
    /// root when it starts with `crate`, `super` or `self`, or with a
    /// child module in a `use`.
    pub(crate) fn path(&mut self, line: usize, segments: Vec<String>, in_use: bool) {
        let Some(first) = segments.first() else {
            return;
        };
        let mut base = match first.as_str() {
            "crate" | "$crate" => Vec::new(),
            "super" | "self" => self.module.clone(),
            name if in_use && self.children.contains(name) => self.module.clone(),
            _ => {
                self.external.push((line, segments.join("::")));
                return;
            }
        };
        if segments.len() < 2 && !in_use {
            return; // `self` the value, `crate` in `pub(crate)`
        }
        let crate_root = usize::from(first == "crate" || first == "$crate");
        let mut rest = segments.iter().skip(crate_root).peekable();
        while let Some(segment) = rest.next_if(|s| *s == "super" || *s == "self") {
            if segment == "super" {
                base.pop();
            }
        }
        base.extend(rest.cloned());
        self.internal.push((line, base));
    }

    fn use_tree(&mut self, tree: &syn::UseTree, mut prefix: Vec<String>) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(&p.tree, prefix);
            }
            syn::UseTree::Name(n) => {
                if n.ident != "self" {
                    prefix.push(n.ident.to_string());
                }
                self.path(n.ident.span().start().line, prefix, true);
            }
            syn::UseTree::Rename(r) => {
                prefix.push(r.ident.to_string());
                self.path(r.ident.span().start().line, prefix, true);
            }
            syn::UseTree::Glob(g) => self.path(g.star_token.spans[0].start().line, prefix, true),
            syn::UseTree::Group(g) => {
                for tree in &g.items {
                    self.use_tree(tree, prefix.clone());
                }
            }
        }
    }

    /// The paths and identifiers inside a macro's arguments.
    fn tokens(&mut self, tokens: TokenStream) {
        let mut run: Vec<String> = Vec::new();
        let mut line = 0;
        let mut joined = false;
        let mut colons = 0;
        let mut tokens = tokens.into_iter().peekable();
        while let Some(token) = tokens.next() {
            match token {
                TokenTree::Ident(ident) => {
                    let text = ident.to_string();
                    self.idents
                        .push((ident.span().start().line, text.to_lowercase()));
                    if !joined && !run.is_empty() {
                        self.path(line, std::mem::take(&mut run), false);
                    }
                    if run.is_empty() {
                        line = ident.span().start().line;
                    }
                    run.push(text);
                    joined = false;
                }
                TokenTree::Punct(p) if p.as_char() == ':' => {
                    colons += 1;
                    if colons == 2 {
                        joined = true;
                        colons = 0;
                    } else if p.spacing() != Spacing::Joint {
                        colons = 0;
                    }
                }
                TokenTree::Punct(p) if p.as_char() == '$' => {
                    // `$crate`: the crate the macro is defined in.
                    if let Some(TokenTree::Ident(next)) = tokens.peek() {
                        if *next == "crate" {
                            let line_of = next.span().start().line;
                            tokens.next();
                            if !run.is_empty() {
                                self.path(line, std::mem::take(&mut run), false);
                            }
                            line = line_of;
                            run.push("$crate".to_string());
                            joined = false;
                        }
                    }
                }
                other => {
                    if !run.is_empty() {
                        self.path(line, std::mem::take(&mut run), false);
                    }
                    joined = false;
                    colons = 0;
                    if let TokenTree::Group(group) = other {
                        self.tokens(group.stream());
                    }
                }
            }
        }
        if !run.is_empty() {
            self.path(line, run, false);
        }
    }
}

impl<'ast> Visit<'ast> for Reader {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        if !is_test(item_attrs(item)) {
            visit::visit_item(self, item);
        } else if let syn::Item::Mod(m) = item {
            if m.content.is_none() {
                self.test_children.push(m.ident.to_string());
            }
        }
    }

    fn visit_impl_item(&mut self, item: &'ast syn::ImplItem) {
        let attrs = match item {
            syn::ImplItem::Const(i) => &i.attrs,
            syn::ImplItem::Fn(i) => &i.attrs,
            syn::ImplItem::Type(i) => &i.attrs,
            syn::ImplItem::Macro(i) => &i.attrs,
            _ => return visit::visit_impl_item(self, item),
        };
        if !is_test(attrs) {
            visit::visit_impl_item(self, item);
        }
    }

    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        // An inline module's paths are relative to it.
        if item.content.is_some() {
            self.module.push(item.ident.to_string());
            visit::visit_item_mod(self, item);
            self.module.pop();
        }
    }

    fn visit_item_macro(&mut self, item: &'ast syn::ItemMacro) {
        let exported = item.attrs.iter().any(|a| a.path().is_ident("macro_export"));
        if let (true, Some(name)) = (exported, &item.ident) {
            self.macros.push(name.to_string());
        }
        visit::visit_item_macro(self, item);
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        self.use_tree(&item.tree, Vec::new());
        visit::visit_item_use(self, item);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        if let Some(first) = path.segments.first() {
            let segments = path.segments.iter().map(|s| s.ident.to_string()).collect();
            self.path(first.ident.span().start().line, segments, false);
        }
        visit::visit_path(self, path);
    }

    fn visit_ident(&mut self, ident: &'ast proc_macro2::Ident) {
        self.idents
            .push((ident.span().start().line, ident.to_string().to_lowercase()));
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        visit::visit_macro(self, mac);
        self.tokens(mac.tokens.clone());
    }
}

fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    match item {
        syn::Item::Const(i) => &i.attrs,
        syn::Item::Enum(i) => &i.attrs,
        syn::Item::ExternCrate(i) => &i.attrs,
        syn::Item::Fn(i) => &i.attrs,
        syn::Item::ForeignMod(i) => &i.attrs,
        syn::Item::Impl(i) => &i.attrs,
        syn::Item::Macro(i) => &i.attrs,
        syn::Item::Mod(i) => &i.attrs,
        syn::Item::Static(i) => &i.attrs,
        syn::Item::Struct(i) => &i.attrs,
        syn::Item::Trait(i) => &i.attrs,
        syn::Item::TraitAlias(i) => &i.attrs,
        syn::Item::Type(i) => &i.attrs,
        syn::Item::Union(i) => &i.attrs,
        syn::Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

/// Whether `attrs` hold `#[cfg(test)]`.
fn is_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| {
        attr.path().is_ident("cfg")
            && attr
                .parse_args::<syn::Ident>()
                .is_ok_and(|ident| ident == "test")
    })
}
