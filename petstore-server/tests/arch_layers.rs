//! The architecture test: the top-level folders (and files) of a crate's
//! `src/` are rooms, each with one line saying what it may import, and
//! no import runs in a circle, between rooms or between files.
//!
//! The rules are not written here: each room's `mod.rs` (or the file
//! itself, for a one-file room) carries one line of its `//!` overview,
//! ``May use: `util`, `keys/mod.rs`.``, whose entries are a room
//! (`util`: any file in it), a file relative to `src/` (`keys/mod.rs`:
//! that file only, which is how "from outside, only `mod.rs` is visible"
//! is written), or `*`; or the words `nothing.`.
//!
//! The sources are parsed with `syn`. An import is a `use` or a path in
//! code (macro arguments included) that starts with `crate`, `super` or
//! `self`, or a `use` of a child module, resolved to the file of the
//! deepest module it names; an exported macro resolves to the file that
//! defines it. Test code (`#[cfg(test)]` items and modules, `tests/`) may
//! use anything.
//!
//! Checked in `petstore-server/src`: every room has its line and keeps
//! it; rooms and files form no circle; `http/` names no socket and no
//! runtime; backends are named only in `store/`, `ratelimit/` and `cli/`;
//! `main.rs` uses only `cli`. In `petstore-core/src`: the same rules and
//! circles, where a folder room must carry its line and a one-file room
//! may.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use proc_macro2::{Spacing, TokenStream, TokenTree};
use syn::visit::{self, Visit};

/// Paths that open a socket or run tasks: `net/`'s business, never the
/// contract's (`http/` stays synchronous and testable without either).
const SOCKETS_AND_RUNTIMES: &[&str] = &[
    "std::net::TcpListener",
    "std::net::TcpStream",
    "std::net::UdpSocket",
    "tokio::net",
    "tokio::runtime",
    "tokio::spawn",
    "tokio::task",
    "hyper::server",
    "hyper_util::rt",
    "hyper_util::server",
];

/// Words that name a backend: only the seams and the start-up wiring say
/// them in code (comments may).
const BACKEND_WORDS: &[&str] = &["redis", "postgres", "snapshot_file"];
const BACKEND_ROOMS: &[&str] = &["store", "ratelimit", "cli"];

fn src(krate: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(krate)
        .join("src")
}

#[test]
fn the_server_keeps_its_rooms_and_seams() {
    let tree = Tree::read(&src("petstore-server"));
    assert!(tree.files.len() > 50, "read {} files", tree.files.len());
    let mut faults = tree.rule_faults(Lines::Required);
    faults.extend(tree.circles());
    faults.extend(tree.sockets_in("http"));
    faults.extend(tree.backend_names());
    faults.extend(tree.binary_faults());
    assert!(
        faults.is_empty(),
        "architecture faults:\n{}",
        faults.join("\n")
    );
}

#[test]
fn the_core_keeps_its_rooms_and_has_no_import_circle() {
    let tree = Tree::read(&src("petstore-core"));
    assert!(tree.files.len() > 10, "read {} files", tree.files.len());
    let mut faults = tree.rule_faults(Lines::RequiredInFolders);
    faults.extend(tree.circles());
    assert!(faults.is_empty(), "core faults:\n{}", faults.join("\n"));
}

/// Where a room must carry its `May use` line.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Lines {
    /// Every room (the server).
    Required,
    /// Folder rooms; a one-file room without one has no rule (the core).
    RequiredInFolders,
}

/// One crate's files, parsed.
#[derive(Default)]
struct Tree {
    /// Path relative to `src/` → what the file imports and names.
    files: BTreeMap<String, File>,
    /// Module path (`store::postgres`) → its file.
    modules: BTreeMap<Vec<String>, String>,
    /// `#[macro_export]` macro → the file defining it.
    macros: BTreeMap<String, String>,
}

#[derive(Default)]
struct File {
    /// The `May use` line: its line number and its entries, or why it
    /// cannot be read.
    rule: Option<(usize, Result<Vec<String>, String>)>,
    /// Paths into the crate, from its root, with their line.
    internal: Vec<(usize, Vec<String>)>,
    /// Other paths (`tokio::net::TcpStream`), with their line.
    external: Vec<(usize, String)>,
    /// Every identifier in code, lowercased, with its line.
    idents: Vec<(usize, String)>,
    /// Files this one imports: target → (line, the path as written).
    imports: Imports,
}

/// The files a file imports: target → the first line importing it, and
/// the path as written (from the crate root).
type Imports = BTreeMap<String, (usize, String)>;

impl Tree {
    fn read(src: &Path) -> Tree {
        let mut sources = Vec::new();
        let mut stack = vec![src.to_path_buf()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).expect("a source folder") {
                let path = entry.expect("an entry").path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    let rel = path.strip_prefix(src).expect("under src");
                    let rel = rel.to_string_lossy().replace('\\', "/");
                    sources.push((rel, std::fs::read_to_string(&path).expect("a source")));
                }
            }
        }
        let sources: Vec<(&str, &str)> = sources
            .iter()
            .map(|(rel, text)| (rel.as_str(), text.as_str()))
            .collect();
        Tree::parse(&sources)
    }

    fn parse(sources: &[(&str, &str)]) -> Tree {
        let mut tree = Tree::default();
        let mut test_modules = BTreeSet::new();
        for (rel, text) in sources {
            let syntax = syn::parse_file(text).unwrap_or_else(|e| panic!("{rel}: {e}"));
            let module = module_of(rel);
            let mut reader = Reader {
                module: module.clone(),
                children: child_modules(&syntax.items),
                ..Reader::default()
            };
            reader.visit_file(&syntax);
            for child in reader.test_children {
                test_modules.insert([module.clone(), vec![child]].concat());
            }
            for name in reader.macros {
                tree.macros.insert(name, rel.to_string());
            }
            tree.modules.insert(module, rel.to_string());
            let file = File {
                rule: rule_line(&syntax.attrs),
                internal: reader.internal,
                external: reader.external,
                idents: reader.idents,
                imports: BTreeMap::new(),
            };
            tree.files.insert(rel.to_string(), file);
        }
        // A module declared under `#[cfg(test)]` is test code, with all
        // that it holds.
        let tests: Vec<String> = tree
            .modules
            .iter()
            .filter(|(module, _)| test_modules.iter().any(|t| module.starts_with(t)))
            .map(|(_, rel)| rel.clone())
            .collect();
        for rel in tests {
            tree.files.remove(&rel);
            tree.modules.retain(|_, file| *file != rel);
        }
        let resolved: Vec<(String, Imports)> = tree
            .files
            .iter()
            .map(|(rel, file)| {
                let mut imports = BTreeMap::new();
                for (line, path) in &file.internal {
                    match tree.resolve(path) {
                        Some(target) if target != *rel => {
                            imports.entry(target).or_insert((*line, path.join("::")));
                        }
                        _ => {}
                    }
                }
                (rel.clone(), imports)
            })
            .collect();
        for (rel, imports) in resolved {
            if let Some(file) = tree.files.get_mut(&rel) {
                file.imports = imports;
            }
        }
        tree
    }

    /// The file of the deepest module `path` names, or of the exported
    /// macro it names.
    fn resolve(&self, path: &[String]) -> Option<String> {
        let mut module: Vec<String> = Vec::new();
        for segment in path {
            module.push(segment.clone());
            if !self.modules.contains_key(&module) {
                module.pop();
                break;
            }
        }
        if module.is_empty() {
            return path.first().and_then(|name| self.macros.get(name)).cloned();
        }
        self.modules.get(&module).cloned()
    }

    /// The room of a file: its top folder (with `folder.rs`, if the
    /// folder's module is written so), or the file itself; `lib.rs` and
    /// `main.rs` are in none.
    fn room_of(&self, rel: &str) -> Option<String> {
        if let Some((folder, _)) = rel.split_once('/') {
            return Some(folder.to_string());
        }
        if rel == "lib.rs" || rel == "main.rs" {
            return None;
        }
        let stem = rel.strip_suffix(".rs").unwrap_or(rel);
        let prefix = format!("{stem}/");
        match self.files.keys().any(|f| f.starts_with(&prefix)) {
            true => Some(stem.to_string()),
            false => Some(rel.to_string()),
        }
    }

    /// Whether a `May use` entry (`*`, a room, a file) admits `target`.
    fn admits(&self, entry: &str, target: &str) -> bool {
        entry == "*" || entry == target || self.room_of(target).is_some_and(|r| r == entry)
    }

    /// The rooms: name → the file that carries its rule (a folder's
    /// `mod.rs`, or `folder.rs`; a one-file room's own file).
    fn rooms(&self) -> BTreeMap<String, String> {
        let mut rooms = BTreeMap::new();
        for rel in self.files.keys() {
            let Some(room) = self.room_of(rel) else {
                continue;
            };
            let file = if room == *rel {
                rel.clone()
            } else if self.files.contains_key(&format!("{room}.rs")) {
                format!("{room}.rs")
            } else {
                format!("{room}/mod.rs")
            };
            rooms.insert(room, file);
        }
        rooms
    }

    /// Rooms without their line, lines that cannot be read or name no
    /// room, and every import a line does not allow.
    fn rule_faults(&self, lines: Lines) -> Vec<String> {
        let rooms = self.rooms();
        let mut faults = Vec::new();
        let mut rules: BTreeMap<&str, (&str, Vec<String>)> = BTreeMap::new();
        for (room, rule_file) in &rooms {
            let folder = room != rule_file;
            match self.files.get(rule_file).and_then(|f| f.rule.as_ref()) {
                None if folder || lines == Lines::Required => faults.push(format!(
                    "{rule_file}: room `{room}` has no `//! May use: ...` line"
                )),
                None => {}
                Some((line, Err(why))) => faults.push(format!("{rule_file}:{line}: {why}")),
                Some((line, Ok(entries))) => {
                    for entry in entries {
                        let known = entry == "*"
                            || rooms.contains_key(entry)
                            || self.files.contains_key(entry);
                        if !known {
                            faults.push(format!(
                                "{rule_file}:{line}: `May use` names `{entry}`, neither a room nor a file"
                            ));
                        }
                    }
                    rules.insert(room, (rule_file, entries.clone()));
                }
            }
        }
        for (rel, file) in &self.files {
            let Some(room) = self.room_of(rel) else {
                continue;
            };
            let Some((rule_file, allowed)) = rules.get(room.as_str()) else {
                continue;
            };
            for (target, (line, path)) in &file.imports {
                let ok =
                    self.admits(&room, target) || allowed.iter().any(|a| self.admits(a, target));
                if !ok {
                    let rule = if allowed.is_empty() {
                        "nothing".to_string()
                    } else {
                        allowed.join(", ")
                    };
                    faults.push(format!(
                        "{rel}:{line}: imports `{path}` ({target}); room `{room}` may use: {rule} ({rule_file})"
                    ));
                }
            }
        }
        faults
    }

    /// A circle among files, and among rooms, for each knot of them
    /// (once that one is undone, the next shows).
    fn circles(&self) -> Vec<String> {
        let mut faults = Vec::new();
        for (kind, group) in [
            (
                "files",
                &(|rel: &str| Some(rel.to_string())) as &dyn Fn(&str) -> Option<String>,
            ),
            ("rooms", &|rel: &str| self.room_of(rel)),
        ] {
            let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
            for (rel, file) in &self.files {
                let Some(from) = group(rel) else { continue };
                let to = file.imports.keys().filter_map(|t| group(t));
                graph
                    .entry(from.clone())
                    .or_default()
                    .extend(to.filter(|t| *t != from));
            }
            for knot in strongly_connected(&graph) {
                let circle = one_circle(&graph, &knot);
                let edges: Vec<String> = circle
                    .windows(2)
                    .map(|pair| self.witness(&pair[0], &pair[1], group))
                    .collect();
                faults.push(format!(
                    "import circle among {kind}: {} ({})",
                    circle.join(" -> "),
                    edges.join("; ")
                ));
            }
        }
        faults
    }

    /// An import from group `from` into group `to`, as `file:line imports
    /// path (target)`.
    fn witness(&self, from: &str, to: &str, group: &dyn Fn(&str) -> Option<String>) -> String {
        for (rel, file) in &self.files {
            if group(rel).as_deref() != Some(from) {
                continue;
            }
            for (target, (line, path)) in &file.imports {
                if group(target).as_deref() == Some(to) {
                    return format!("{rel}:{line} imports `{path}` ({target})");
                }
            }
        }
        format!("{from} imports {to}")
    }

    /// Every path in `room` that names a socket or a runtime.
    fn sockets_in(&self, room: &str) -> Vec<String> {
        let mut faults = Vec::new();
        for (rel, file) in self.files.iter().filter(|(rel, _)| self.admits(room, rel)) {
            for (line, path) in &file.external {
                let named = SOCKETS_AND_RUNTIMES.iter().find(|p| {
                    path.strip_prefix(**p)
                        .is_some_and(|rest| rest.is_empty() || rest.starts_with("::"))
                });
                if let Some(named) = named {
                    faults.push(format!(
                        "{rel}:{line}: names `{path}`: `{room}/` holds no socket and no runtime ({named} is `net/`'s)"
                    ));
                }
            }
        }
        faults
    }

    /// Every identifier naming a backend outside the rooms allowed to.
    fn backend_names(&self) -> Vec<String> {
        let mut faults = Vec::new();
        for (rel, file) in &self.files {
            let allowed = rel == "lib.rs" || BACKEND_ROOMS.iter().any(|r| self.admits(r, rel));
            if allowed {
                continue;
            }
            for (line, ident) in &file.idents {
                if let Some(word) = BACKEND_WORDS.iter().find(|w| ident.contains(**w)) {
                    faults.push(format!(
                        "{rel}:{line}: names a backend (`{word}`) outside {BACKEND_ROOMS:?}"
                    ));
                }
            }
        }
        faults
    }

    /// `main.rs` uses the library's `cli` and nothing else of it.
    fn binary_faults(&self) -> Vec<String> {
        let Some(main) = self.files.get("main.rs") else {
            return vec!["main.rs: not found".to_string()];
        };
        main.external
            .iter()
            .filter(|(_, path)| path.starts_with("petstore_server::"))
            .filter(|(_, path)| {
                *path != "petstore_server::cli" && !path.starts_with("petstore_server::cli::")
            })
            .map(|(line, path)| {
                format!("main.rs:{line}: uses `{path}`; the binary uses only `cli`")
            })
            .collect()
    }
}

fn module_of(rel: &str) -> Vec<String> {
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
fn rule_line(attrs: &[syn::Attribute]) -> Option<(usize, Result<Vec<String>, String>)> {
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
fn child_modules(items: &[syn::Item]) -> BTreeSet<String> {
    items
        .iter()
        .filter_map(|item| match item {
            syn::Item::Mod(m) if m.content.is_none() => Some(m.ident.to_string()),
            _ => None,
        })
        .collect()
}

/// What one file imports and names, outside its test code.
#[derive(Default)]
struct Reader {
    /// The module the code being read is in.
    module: Vec<String>,
    /// The file's own `mod name;` children.
    children: BTreeSet<String>,
    /// Children declared under `#[cfg(test)]`.
    test_children: Vec<String>,
    macros: Vec<String>,
    internal: Vec<(usize, Vec<String>)>,
    external: Vec<(usize, String)>,
    idents: Vec<(usize, String)>,
}

impl Reader {
    /// Records `segments` (a path as written), resolved from the crate
    /// root when it starts with `crate`, `super` or `self`, or with a
    /// child module in a `use`.
    fn path(&mut self, line: usize, segments: Vec<String>, in_use: bool) {
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

/// The shortest circle through the first node of `knot` (a strongly
/// connected component), as its nodes with the first repeated at the end.
fn one_circle(graph: &BTreeMap<String, BTreeSet<String>>, knot: &[String]) -> Vec<String> {
    let start = &knot[0];
    let mut came_from: BTreeMap<&String, &String> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(v) = queue.pop_front() {
        for w in graph.get(v).into_iter().flatten() {
            if w == start {
                let mut circle = vec![start.clone(), v.clone()];
                let mut at = v;
                while let Some(back) = came_from.get(at) {
                    circle.push((*back).clone());
                    at = back;
                }
                circle.reverse();
                return circle;
            }
            if knot.contains(w) && !came_from.contains_key(w) {
                came_from.insert(w, v);
                queue.push_back(w);
            }
        }
    }
    knot.to_vec()
}

/// Every strongly connected component of more than one node: each holds
/// a circle. Tarjan's algorithm.
fn strongly_connected(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    #[derive(Default)]
    struct Walk<'g> {
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        found: Vec<Vec<String>>,
    }
    fn visit<'g>(graph: &'g BTreeMap<String, BTreeSet<String>>, walk: &mut Walk<'g>, v: &'g str) {
        let i = walk.index.len();
        walk.index.insert(v, i);
        walk.low.insert(v, i);
        walk.stack.push(v);
        for w in graph.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !graph.contains_key(w) {
                continue;
            }
            if !walk.index.contains_key(w) {
                visit(graph, walk, w);
                let low = walk.low[v].min(walk.low[w]);
                walk.low.insert(v, low);
            } else if walk.stack.contains(&w) {
                let low = walk.low[v].min(walk.index[w]);
                walk.low.insert(v, low);
            }
        }
        if walk.low[v] == walk.index[v] {
            let at = walk.stack.iter().rposition(|s| *s == v).unwrap_or(0);
            let mut component: Vec<String> = walk.stack.drain(at..).map(str::to_owned).collect();
            if component.len() > 1 {
                component.sort();
                walk.found.push(component);
            }
        }
    }
    let mut walk = Walk::default();
    for v in graph.keys() {
        if !walk.index.contains_key(v.as_str()) {
            visit(graph, &mut walk, v);
        }
    }
    walk.found
}

// The checker's own tests: each check fails on a small tree that breaks
// its rule, and passes on one that keeps it.

fn fake(files: &[(&str, &str)]) -> Tree {
    Tree::parse(files)
}

#[test]
fn a_forbidden_import_is_found_in_a_group_and_not_in_comments_strings_or_tests() {
    let tree = fake(&[
        ("lib.rs", "pub mod util; pub mod http; pub mod store;"),
        ("util/mod.rs", "//! May use: nothing.\npub mod hex;"),
        (
            "util/hex.rs",
            "// crate::http::x\nconst S: &str = \"crate::http\";\n#[cfg(test)]\nmod tests { use crate::http::Thing; }",
        ),
        ("store/mod.rs", "//! May use: nothing.\npub mod postgres;"),
        ("store/postgres.rs", "pub struct Pg;"),
        (
            "http/mod.rs",
            "//! May use: `util`, `store/mod.rs`.\nuse crate::{util::hex,\n    store::{postgres::Pg}};",
        ),
    ]);
    assert_eq!(
        tree.rule_faults(Lines::Required),
        ["http/mod.rs:3: imports `store::postgres::Pg` (store/postgres.rs); room `http` may use: util, store/mod.rs (http/mod.rs)"]
    );
    assert!(tree.circles().is_empty());
}

#[test]
fn a_super_path_and_an_exported_macro_resolve_to_their_files() {
    let tree = fake(&[
        ("lib.rs", "pub mod telemetry; pub mod util;"),
        ("telemetry/mod.rs", "//! May use: `util`.\npub mod log;"),
        (
            "telemetry/log.rs",
            "#[macro_export]\nmacro_rules! log_info { () => {} }",
        ),
        ("util/mod.rs", "//! May use: nothing.\npub mod a;"),
        (
            "util/a.rs",
            "fn f() { let _ = super::super::telemetry::X; crate::log_info!(); }",
        ),
    ]);
    let faults = tree.rule_faults(Lines::Required);
    assert_eq!(faults.len(), 2, "{faults:?}");
    assert!(faults[0].starts_with("util/a.rs:1: imports `log_info` (telemetry/log.rs)"));
    assert!(faults[1].starts_with("util/a.rs:1: imports `telemetry::X` (telemetry/mod.rs)"));
}

#[test]
fn a_room_without_its_line_or_with_a_bad_one_fails() {
    let files = [
        ("lib.rs", "mod a; mod b; mod c; mod d;"),
        ("a/mod.rs", "//! The a room.\nmod x;"),
        ("a/x.rs", ""),
        ("b.rs", ""),
        ("c.rs", "//! May use: util."),
        ("d.rs", "//! May use: `nowhere`."),
    ];
    let faults = fake(&files).rule_faults(Lines::Required);
    assert_eq!(faults.len(), 4, "{faults:?}");
    assert!(
        faults[0].starts_with("a/mod.rs: room `a` has no"),
        "{faults:?}"
    );
    assert!(
        faults[1].starts_with("b.rs: room `b.rs` has no"),
        "{faults:?}"
    );
    assert!(
        faults[2].starts_with("c.rs:1: `May use:` wants"),
        "{faults:?}"
    );
    assert!(
        faults[3].contains("names `nowhere`, neither a room nor a file"),
        "{faults:?}"
    );
    // The core's one-file rooms may go without.
    let faults = fake(&files).rule_faults(Lines::RequiredInFolders);
    assert_eq!(faults.len(), 3, "{faults:?}");
}

#[test]
fn a_circle_among_rooms_fails_even_when_each_import_is_allowed() {
    let tree = fake(&[
        ("lib.rs", "mod keys; mod http;"),
        ("keys/mod.rs", "//! May use: `http`.\nmod table;"),
        ("keys/table.rs", "use crate::http::headers::Quota;"),
        (
            "http/mod.rs",
            "//! May use: `keys/mod.rs`.\nmod headers;\nmod admit;",
        ),
        ("http/headers.rs", "pub struct Quota;"),
        ("http/admit.rs", "\n\nuse crate::keys::Keys;"),
    ]);
    assert!(tree.rule_faults(Lines::Required).is_empty());
    let circles = tree.circles();
    assert_eq!(circles.len(), 1, "{circles:?}");
    assert!(circles[0].starts_with("import circle among rooms: http -> keys -> http ("));
    assert!(circles[0].contains("http/admit.rs:3 imports `keys::Keys` (keys/mod.rs)"));
    assert!(circles[0].contains("keys/table.rs:1 imports `http::headers::Quota` (http/headers.rs)"));
}

#[test]
fn a_circle_among_files_fails_through_a_facade_and_a_child_use() {
    let tree = fake(&[
        ("lib.rs", "pub mod store;"),
        (
            "store/mod.rs",
            "mod journal;\npub use journal::Journal;\npub struct Failed;",
        ),
        (
            "store/journal.rs",
            "use super::Failed;\npub struct Journal;",
        ),
    ]);
    let circles = tree.circles();
    assert_eq!(circles.len(), 1, "{circles:?}");
    assert!(circles[0].contains("store/journal.rs:1 imports `store::Failed` (store/mod.rs)"));
    assert!(circles[0].contains("store/mod.rs:2 imports `store::journal::Journal`"));
}

#[test]
fn a_socket_or_runtime_in_http_fails_and_test_code_may_use_one() {
    let tree = fake(&[
        ("lib.rs", "mod http; mod net;"),
        (
            "http/mod.rs",
            "use std::net::IpAddr;\nuse tokio::{io, net::TcpStream};\n#[cfg(test)]\nmod tests;\nfn f() { let _ = tokio::spawn(async {}); }\n#[cfg(test)]\nfn g() { tokio::runtime::Builder::new_current_thread(); }",
        ),
        ("http/tests.rs", "use hyper_util::rt::TokioIo;"),
        ("net/mod.rs", "use tokio::net::TcpListener;"),
    ]);
    let faults = tree.sockets_in("http");
    assert_eq!(faults.len(), 2, "{faults:?}");
    assert!(faults[0].starts_with("http/mod.rs:2: names `tokio::net::TcpStream`"));
    assert!(faults[1].starts_with("http/mod.rs:5: names `tokio::spawn`"));
}

#[test]
fn a_backend_named_outside_its_rooms_fails() {
    let tree = fake(&[
        ("lib.rs", "mod state; mod store;"),
        (
            "state.rs",
            "// redis is fine in a comment\nfn f() { let _ = \"postgres\"; g!(Redis::x); }",
        ),
        ("store/mod.rs", "mod postgres;"),
        ("store/postgres.rs", ""),
    ]);
    let faults = tree.backend_names();
    assert_eq!(
        faults,
        ["state.rs:2: names a backend (`redis`) outside [\"store\", \"ratelimit\", \"cli\"]"]
    );
}

#[test]
fn the_binary_may_use_cli_only() {
    let tree = fake(&[
        ("main.rs", "fn main() { petstore_server::cli::main(); }"),
        ("lib.rs", "pub mod cli;"),
    ]);
    assert!(tree.binary_faults().is_empty());
    let tree = fake(&[("main.rs", "use petstore_server::net;\nfn main() {}")]);
    assert_eq!(
        tree.binary_faults(),
        ["main.rs:1: uses `petstore_server::net`; the binary uses only `cli`"]
    );
}
