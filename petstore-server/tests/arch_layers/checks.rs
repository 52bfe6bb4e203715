//! The checks a parsed tree must pass: the rooms' lines, no circle,
//! no socket or runtime in `http/`, backends named only behind their
//! seams, a binary that uses only `cli`.

use std::collections::{BTreeMap, BTreeSet};

use super::tree::{Lines, Tree};

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

impl Tree {
    /// Rooms without their line, lines that cannot be read or name no
    /// room, and every import a line does not allow.
    pub(crate) fn rule_faults(&self, lines: Lines) -> Vec<String> {
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
    pub(crate) fn circles(&self) -> Vec<String> {
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
    pub(crate) fn sockets_in(&self, room: &str) -> Vec<String> {
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
    pub(crate) fn backend_names(&self) -> Vec<String> {
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
    pub(crate) fn binary_faults(&self) -> Vec<String> {
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
