//! The architecture test: the folders of `petstore-server/src` are rooms,
//! each with a rule of what it may import, and no file of either crate
//! imports, through any chain, a file that imports it back.
//!
//! It reads the source, not the compiled crate: every `crate::`,
//! `super::` and `self::` path outside comments, strings and `#[cfg(test)]`
//! items, and every `use` of a child module, resolved to the file that
//! holds the module it names. A path into a folder from outside resolves
//! to the folder's `mod.rs` when it names what `mod.rs` re-exports, which
//! is how "from outside only `mod.rs` is visible" is checked.
//!
//! The rules are the table [`SERVER_RULES`]; `lib.rs` repeats them for
//! readers. Test code (`#[cfg(test)]`, `tests/`) may use anything.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Each room of the server and what it may import besides itself. An
/// entry is a folder (`util`), a file (`http/route.rs`), or `*`. `lib.rs`
/// only declares the rooms; `main.rs` is the binary (it may use `cli`
/// only, checked apart).
const SERVER_RULES: &[(&str, &[&str])] = &[
    // Plain helpers: buffers, interned strings, file reading, hex.
    ("util", &[]),
    // Logs, metrics registry, recorder, histogram, access log; the
    // recorder sizes its arrays by the route table.
    ("paths.rs", &[]),
    ("telemetry", &["util", "paths.rs"]),
    ("headers", &["util"]),
    // The key table: each entry keeps its 2xx header templates.
    ("keys", &["util", "telemetry", "headers"]),
    // The two seams and their backends.
    ("store", &["util", "telemetry"]),
    ("ratelimit", &["util", "telemetry", "keys/mod.rs"]),
    // What every request shares: no HTTP, no backend.
    (
        "state.rs",
        &[
            "util",
            "telemetry",
            "keys/mod.rs",
            "store/mod.rs",
            "ratelimit/mod.rs",
        ],
    ),
    // The contract: never a backend, a socket or a runtime.
    (
        "http",
        &[
            "util",
            "telemetry",
            "headers",
            "paths.rs",
            "state.rs",
            "keys/mod.rs",
            "store/mod.rs",
            "ratelimit/mod.rs",
        ],
    ),
    // Sockets, connections, the one request driver.
    ("net", &["util", "telemetry", "state.rs", "http/mod.rs"]),
    // Flags and start-up wiring: the only room that names every backend.
    ("cli", &["*"]),
];

/// Words that name a backend; outside `store/`, `ratelimit/` and the
/// start-up wiring (`cli/`) code never says them (comments may).
const BACKEND_WORDS: &[&str] = &["redis", "postgres", "snapshot_file"];

/// Rooms allowed to name a backend.
const BACKEND_ROOMS: &[&str] = &["store", "ratelimit", "cli"];

fn root() -> PathBuf {
    match option_env!("CARGO_MANIFEST_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from("."),
    }
}

#[test]
fn the_server_keeps_its_rooms_and_seams() {
    let tree = Tree::read(&root().join("src"), &["main.rs"]);
    let mut faults = tree.cycles();
    faults.extend(tree.rule_breaks(SERVER_RULES));
    faults.extend(tree.backend_names(BACKEND_WORDS, BACKEND_ROOMS));
    assert!(
        faults.is_empty(),
        "architecture faults:\n{}",
        faults.join("\n")
    );
}

#[test]
fn the_binary_only_parses_arguments() {
    let main = std::fs::read_to_string(root().join("src/main.rs")).expect("main.rs");
    let code = strip(&main);
    let used: BTreeSet<&str> = code
        .match_indices("petstore_server::")
        .map(|(at, _)| {
            let rest = &code[at + "petstore_server::".len()..];
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            &rest[..end]
        })
        .collect();
    assert_eq!(used, BTreeSet::from(["cli"]), "main.rs uses {used:?}");
}

#[test]
fn the_core_has_no_import_circle() {
    let tree = Tree::read(&root().join("../petstore-core/src"), &[]);
    assert!(tree.files.len() > 10, "read {} files", tree.files.len());
    let faults = tree.cycles();
    assert!(
        faults.is_empty(),
        "core import circles:\n{}",
        faults.join("\n")
    );
}

// The checker's own tests: it must see what it is there to see.

fn synthetic(files: &[(&str, &str)]) -> Tree {
    let mut tree = Tree::default();
    for (path, text) in files {
        tree.add(path, text);
    }
    tree.link();
    tree
}

#[test]
fn the_checker_finds_a_circle_through_a_facade_and_a_super_path() {
    let tree = synthetic(&[
        ("lib.rs", "pub mod store; pub mod http;"),
        (
            "store/mod.rs",
            "mod journal;\npub use journal::Journal;\npub struct Failed;",
        ),
        (
            "store/journal.rs",
            "use super::Failed;\npub struct Journal;",
        ),
        ("http/mod.rs", "use crate::store::Journal;"),
    ]);
    let cycles = tree.cycles();
    assert_eq!(cycles.len(), 1, "{cycles:?}");
    assert!(cycles[0].contains("store/journal.rs"), "{cycles:?}");
    assert!(cycles[0].contains("store/mod.rs"), "{cycles:?}");
}

#[test]
fn the_checker_finds_a_forbidden_import_in_a_group_and_ignores_comments_strings_and_tests() {
    let tree = synthetic(&[
        ("lib.rs", "pub mod util; pub mod http; pub mod store;"),
        ("util/mod.rs", "pub mod hex;"),
        ("util/hex.rs", "// crate::http::x\nconst S: &str = \"crate::http\";\n#[cfg(test)]\nmod tests { use crate::http::Thing; }"),
        ("store/mod.rs", "pub mod postgres;"),
        ("store/postgres.rs", "pub struct Pg;"),
        ("http/mod.rs", "use crate::{util::hex, store::{postgres::Pg}};\nfn f() { let _ = 'a'; let _x: &'static str = \"\"; }"),
    ]);
    let rules: &[(&str, &[&str])] = &[
        ("util", &[]),
        ("store", &[]),
        ("http", &["util", "store/mod.rs"]),
    ];
    let breaks = tree.rule_breaks(rules);
    assert_eq!(
        breaks,
        vec![
            "http/mod.rs imports store/postgres.rs, which its room's rule does not allow"
                .to_string()
        ]
    );
    assert!(tree.cycles().is_empty());
    let names = tree.backend_names(&["postgres"], &["store"]);
    assert_eq!(names.len(), 1, "{names:?}");
    assert!(names[0].starts_with("http/mod.rs"), "{names:?}");
}

#[test]
fn the_checker_resolves_exported_macros_to_their_file() {
    let tree = synthetic(&[
        ("lib.rs", "pub mod telemetry; pub mod util;"),
        ("telemetry/mod.rs", "pub mod log;"),
        (
            "telemetry/log.rs",
            "#[macro_export]\nmacro_rules! log_info { () => {} }",
        ),
        ("util/mod.rs", "use crate::log_info;"),
    ]);
    assert_eq!(
        tree.rule_breaks(&[("util", &[]), ("telemetry", &[])]),
        vec![
            "util/mod.rs imports telemetry/log.rs, which its room's rule does not allow"
                .to_string()
        ]
    );
}

/// The files of one crate and the files each imports.
#[derive(Default, Debug)]
struct Tree {
    /// Path relative to `src/` → the file.
    files: BTreeMap<String, File>,
    /// Module path (`store::postgres`) → file path.
    modules: BTreeMap<Vec<String>, String>,
    /// `#[macro_export]` macro name → file path.
    macros: BTreeMap<String, String>,
}

#[derive(Debug, Default)]
struct File {
    module: Vec<String>,
    /// Code without comments, string contents and test items.
    code: String,
    imports: BTreeSet<String>,
}

impl Tree {
    fn read(src: &Path, skip: &[&str]) -> Tree {
        let mut tree = Tree::default();
        let mut stack = vec![src.to_path_buf()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).expect("a source folder") {
                let path = entry.expect("an entry").path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    let rel = path
                        .strip_prefix(src)
                        .expect("under src")
                        .to_string_lossy()
                        .replace('\\', "/");
                    if skip.contains(&rel.as_str()) {
                        continue;
                    }
                    let text = std::fs::read_to_string(&path).expect("a source file");
                    tree.add(&rel, &text);
                }
            }
        }
        tree.link();
        tree
    }

    fn add(&mut self, rel: &str, text: &str) {
        let stem = rel.strip_suffix(".rs").unwrap_or(rel);
        let mut module: Vec<String> = stem.split('/').map(str::to_owned).collect();
        if matches!(
            module.last().map(String::as_str),
            Some("mod" | "lib" | "main")
        ) {
            module.pop();
        }
        let code = without_tests(&strip(text));
        for name in macro_names(&code) {
            self.macros.insert(name, rel.to_owned());
        }
        self.modules.insert(module.clone(), rel.to_owned());
        self.files.insert(
            rel.to_owned(),
            File {
                module,
                code,
                imports: BTreeSet::new(),
            },
        );
    }

    fn link(&mut self) {
        let mut all = BTreeMap::new();
        for (rel, file) in &self.files {
            let children = child_modules(&file.code);
            let mut imports = BTreeSet::new();
            for path in paths(&file.code, &file.module, &children) {
                if let Some(target) = self.resolve(&path) {
                    if target != *rel {
                        imports.insert(target);
                    }
                }
            }
            all.insert(rel.clone(), imports);
        }
        for (rel, imports) in all {
            if let Some(file) = self.files.get_mut(&rel) {
                file.imports = imports;
            }
        }
    }

    /// The file of the deepest module `path` names.
    fn resolve(&self, path: &[String]) -> Option<String> {
        let mut module: Vec<String> = Vec::new();
        for segment in path {
            let mut deeper = module.clone();
            deeper.push(segment.clone());
            if self.modules.contains_key(&deeper) {
                module = deeper;
            } else {
                break;
            }
        }
        if module.is_empty() {
            // A macro exported at the crate root, or an item of lib.rs.
            return path.first().and_then(|name| self.macros.get(name)).cloned();
        }
        self.modules.get(&module).cloned()
    }

    /// Every import circle, once each, as `a -> b -> a`.
    fn cycles(&self) -> Vec<String> {
        // Tarjan's strongly connected components; a component of more
        // than one file holds a circle.
        struct Walk<'t> {
            tree: &'t Tree,
            index: BTreeMap<&'t str, usize>,
            low: BTreeMap<&'t str, usize>,
            stack: Vec<&'t str>,
            on_stack: BTreeSet<&'t str>,
            found: Vec<Vec<&'t str>>,
        }
        impl<'t> Walk<'t> {
            fn visit(&mut self, v: &'t str) {
                let i = self.index.len();
                self.index.insert(v, i);
                self.low.insert(v, i);
                self.stack.push(v);
                self.on_stack.insert(v);
                for w in &self.tree.files[v].imports {
                    let w = w.as_str();
                    if !self.tree.files.contains_key(w) {
                        continue;
                    }
                    if !self.index.contains_key(w) {
                        self.visit(w);
                        let low = self.low[v].min(self.low[w]);
                        self.low.insert(v, low);
                    } else if self.on_stack.contains(w) {
                        let low = self.low[v].min(self.index[w]);
                        self.low.insert(v, low);
                    }
                }
                if self.low[v] == self.index[v] {
                    let mut component = Vec::new();
                    while let Some(w) = self.stack.pop() {
                        self.on_stack.remove(w);
                        component.push(w);
                        if w == v {
                            break;
                        }
                    }
                    if component.len() > 1 {
                        component.sort();
                        self.found.push(component);
                    }
                }
            }
        }
        let mut walk = Walk {
            tree: self,
            index: BTreeMap::new(),
            low: BTreeMap::new(),
            stack: Vec::new(),
            on_stack: BTreeSet::new(),
            found: Vec::new(),
        };
        for file in self.files.keys() {
            if !walk.index.contains_key(file.as_str()) {
                walk.visit(file);
            }
        }
        walk.found
            .iter()
            .map(|component| {
                let edges: Vec<String> = component
                    .iter()
                    .flat_map(|a| {
                        self.files[*a]
                            .imports
                            .iter()
                            .filter(|b| component.contains(&b.as_str()))
                            .map(move |b| format!("{a} -> {b}"))
                    })
                    .collect();
                format!("import circle among {component:?}: {}", edges.join(", "))
            })
            .collect()
    }

    fn rule_breaks(&self, rules: &[(&str, &[&str])]) -> Vec<String> {
        let mut breaks = Vec::new();
        for (rel, file) in &self.files {
            if rel == "lib.rs" {
                continue;
            }
            let Some((room, allowed)) = rules.iter().find(|(room, _)| in_room(rel, room)) else {
                breaks.push(format!("{rel} is in no room of the rules"));
                continue;
            };
            for target in &file.imports {
                let ok = in_room(target, room)
                    || allowed
                        .iter()
                        .any(|allowed| *allowed == "*" || in_room(target, allowed));
                if !ok {
                    breaks.push(format!(
                        "{rel} imports {target}, which its room's rule does not allow"
                    ));
                }
            }
        }
        breaks
    }

    fn backend_names(&self, words: &[&str], rooms: &[&str]) -> Vec<String> {
        let mut found = Vec::new();
        for (rel, file) in &self.files {
            if rel == "lib.rs" || rooms.iter().any(|room| in_room(rel, room)) {
                continue;
            }
            let lower = file.code.to_lowercase();
            for word in words {
                if lower.contains(word) {
                    found.push(format!("{rel} names a backend in its code: {word}"));
                }
            }
        }
        found
    }
}

/// Whether file `rel` is in `room` (a folder, or a file).
fn in_room(rel: &str, room: &str) -> bool {
    if room.ends_with(".rs") {
        rel == room
    } else {
        rel.strip_prefix(room)
            .is_some_and(|rest| rest.starts_with('/'))
    }
}

/// `text` with comments removed and string and character literals
/// emptied, so that only code is read.
fn strip(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if c == 'r' && (next == Some('#') || next == Some('"')) && !ident_before(&chars, i) {
            // A raw string: r"..." or r#"..."#.
            let mut j = i + 1;
            let mut hashes = 0;
            while chars.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if chars.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            while j < chars.len() {
                if chars[j] == '"' && (0..hashes).all(|k| chars.get(j + 1 + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            out.push_str("\"\"");
            i = j;
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == '\'' {
            // A character literal ('a', '\n', '\u{..}') or a lifetime ('a).
            if next == Some('\\') {
                i += 2;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
                out.push_str("' '");
            } else if chars.get(i + 2) == Some(&'\'') {
                i += 3;
                out.push_str("' '");
            } else {
                out.push(c);
                i += 1;
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn ident_before(chars: &[char], i: usize) -> bool {
    i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_')
}

/// `code` without the items under `#[cfg(test)]`.
fn without_tests(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at + "#[cfg(test)]".len()..];
        // The item ends at its first `;` before any `{`, or with the
        // brace block that opens first.
        let semi = after.find(';');
        let brace = after.find('{');
        let end = match (semi, brace) {
            (Some(s), Some(b)) if s < b => s + 1,
            (Some(s), None) => s + 1,
            (_, Some(b)) => matching_brace(after, b).map_or(after.len(), |e| e + 1),
            (None, None) => after.len(),
        };
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

fn matching_brace(text: &str, open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in text[open..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(open + i);
                }
            }
            _ => {}
        }
    }
    None
}

fn words(code: &str) -> Vec<&str> {
    code.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .collect()
}

/// The modules a file declares: `mod name;` (its children).
fn child_modules(code: &str) -> BTreeSet<String> {
    let mut children = BTreeSet::new();
    let w = words(code);
    for pair in w.windows(2) {
        if pair[0] == "mod" {
            children.insert(pair[1].to_owned());
        }
    }
    children
}

fn macro_names(code: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("macro_rules!") {
        let after = rest[at + "macro_rules!".len()..].trim_start();
        let name: String = after
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if !name.is_empty() {
            names.push(name);
        }
        rest = &rest[at + 1..];
    }
    names
}

/// Every path from the crate root that `code` (of module `module`, with
/// child modules `children`) names: `crate::…`, `super::…`, `self::…`,
/// and `use child::…`, with `{…}` groups expanded.
fn paths(code: &str, module: &[String], children: &BTreeSet<String>) -> Vec<Vec<String>> {
    let tokens = tokenize(code);
    let mut found = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let t = tokens[i].as_str();
        let follows_path = i > 0 && tokens[i - 1] == "::";
        let base: Option<Vec<String>> = match t {
            _ if follows_path => None,
            "crate" | "$crate" => Some(Vec::new()),
            "super" => {
                let mut base = module.to_vec();
                base.pop();
                Some(base)
            }
            "self" => Some(module.to_vec()),
            _ if i > 0 && tokens[i - 1] == "use" && children.contains(t) => {
                // `use child::…`: a relative path into a child module.
                let mut base = module.to_vec();
                base.push(t.to_owned());
                Some(base)
            }
            _ => None,
        };
        match base {
            Some(base) if tokens.get(i + 1).map(String::as_str) == Some("::") => {
                let (trees, end) = use_tree(&tokens, i + 2, base);
                found.extend(trees);
                i = end.max(i + 1);
            }
            _ => i += 1,
        }
    }
    found
}

/// Parses the path after `…::` at `at`: segments, `{` groups, `*`.
fn use_tree(tokens: &[String], mut at: usize, mut base: Vec<String>) -> (Vec<Vec<String>>, usize) {
    let mut out = Vec::new();
    loop {
        match tokens.get(at).map(String::as_str) {
            Some("{") => {
                at += 1;
                loop {
                    match tokens.get(at).map(String::as_str) {
                        Some("}") => {
                            at += 1;
                            break;
                        }
                        Some(",") => at += 1,
                        None => break,
                        Some(_) => {
                            let (inner, end) = use_tree(tokens, at, base.clone());
                            out.extend(inner);
                            at = end.max(at + 1);
                        }
                    }
                }
                return (out, at);
            }
            Some("*") => {
                out.push(base);
                return (out, at + 1);
            }
            Some("self") => {
                out.push(base);
                return (out, at + 1);
            }
            Some(segment) if is_ident(segment) => {
                base.push(segment.to_owned());
                at += 1;
                if tokens.get(at).map(String::as_str) == Some("::") {
                    at += 1;
                } else {
                    out.push(base);
                    return (out, at);
                }
            }
            _ => {
                out.push(base);
                return (out, at);
            }
        }
    }
}

fn is_ident(token: &str) -> bool {
    token
        .chars()
        .all(|c| c.is_alphanumeric() || c == '_' || c == '$')
}

fn tokenize(code: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let chars: Vec<char> = code.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_alphanumeric() || c == '_' || c == '$' {
            let start = i;
            while i < chars.len()
                && (chars[i].is_alphanumeric() || chars[i] == '_' || chars[i] == '$')
            {
                i += 1;
            }
            tokens.push(chars[start..i].iter().collect());
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            tokens.push("::".to_owned());
            i += 2;
        } else if c.is_whitespace() {
            i += 1;
        } else {
            tokens.push(c.to_string());
            i += 1;
        }
    }
    tokens
}
