//! One crate's files, parsed: their modules, macros, `May use` lines,
//! and what each imports and names.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use syn::visit::Visit;

use super::reader::Reader;
use super::rules::{child_modules, module_of, rule_line};

/// Where a room must carry its `May use` line.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lines {
    /// Every room (the server).
    Required,
    /// Folder rooms; a one-file room without one has no rule (the core).
    RequiredInFolders,
}

/// One crate's files, parsed.
#[derive(Default)]
pub(crate) struct Tree {
    /// Path relative to `src/` → what the file imports and names.
    pub(crate) files: BTreeMap<String, File>,
    /// Module path (`store::postgres`) → its file.
    pub(crate) modules: BTreeMap<Vec<String>, String>,
    /// `#[macro_export]` macro → the file defining it.
    pub(crate) macros: BTreeMap<String, String>,
}

#[derive(Default)]
pub(crate) struct File {
    /// The `May use` line: its line number and its entries, or why it
    /// cannot be read.
    pub(crate) rule: Option<(usize, Result<Vec<String>, String>)>,
    /// Paths into the crate, from its root, with their line.
    pub(crate) internal: Vec<(usize, Vec<String>)>,
    /// Other paths (`tokio::net::TcpStream`), with their line.
    pub(crate) external: Vec<(usize, String)>,
    /// Every identifier in code, lowercased, with its line.
    pub(crate) idents: Vec<(usize, String)>,
    /// Files this one imports: target → (line, the path as written).
    pub(crate) imports: Imports,
}

/// The files a file imports: target → the first line importing it, and
/// the path as written (from the crate root).
pub(crate) type Imports = BTreeMap<String, (usize, String)>;

impl Tree {
    pub(crate) fn read(src: &Path) -> Tree {
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

    pub(crate) fn parse(sources: &[(&str, &str)]) -> Tree {
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
    pub(crate) fn room_of(&self, rel: &str) -> Option<String> {
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
    pub(crate) fn admits(&self, entry: &str, target: &str) -> bool {
        entry == "*" || entry == target || self.room_of(target).is_some_and(|r| r == entry)
    }

    /// The rooms: name → the file that carries its rule (a folder's
    /// `mod.rs`, or `folder.rs`; a one-file room's own file).
    pub(crate) fn rooms(&self) -> BTreeMap<String, String> {
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
}
