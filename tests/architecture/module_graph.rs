//! The module graph of every crate has no circles: a reader can learn each crate bottom-up.
//!
//! Reads the sources under `crates/*/src`, takes each file as a module (`a.rs` and `a/mod.rs` are `a`,
//! `a/b.rs` is `a::b`), and draws an edge for every path it names through `crate::` or `super::` (in
//! `use` items and in code; comments and inline `#[cfg(test)]` modules excluded, test-only files
//! skipped). A module naming its own ancestor or descendant is nesting, not a dependency between
//! concepts, so only edges between unrelated modules count. The test fails, naming the modules, when any
//! of them form a circle.

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Module = Vec<String>;

#[test]
fn no_crate_has_a_circle_between_its_modules() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates");
    let mut circles = Vec::new();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(&crates)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("src/lib.rs").exists() || p.join("src/main.rs").exists())
        .collect();
    entries.sort();
    assert!(entries.len() >= 5, "found the crates under {crates:?}");
    for krate in entries {
        let graph = module_graph(&krate.join("src"));
        for circle in strongly_connected(&graph) {
            let names: Vec<String> = circle.iter().map(|m| m.join("::")).collect();
            circles.push(format!(
                "{}: {}",
                krate.file_name().unwrap().to_string_lossy(),
                names.join(" ↔ ")
            ));
        }
    }
    assert!(
        circles.is_empty(),
        "modules that depend on each other (move the shared part into a module both can use):\n  {}",
        circles.join("\n  ")
    );
}

/// Module → the unrelated modules it names.
fn module_graph(src: &Path) -> BTreeMap<Module, BTreeSet<Module>> {
    let mut files = Vec::new();
    collect_files(src, &mut files);
    let modules: BTreeMap<Module, String> = files
        .iter()
        .filter_map(|file| {
            let module = module_of(src, file);
            let skip = module
                .last()
                .is_some_and(|name| name == "tests" || name == "testutil");
            (!skip).then(|| (module, code_of(&std::fs::read_to_string(file).unwrap())))
        })
        .collect();
    let known: BTreeSet<&Module> = modules.keys().collect();
    let mut graph = BTreeMap::new();
    for (module, code) in &modules {
        let mut edges = BTreeSet::new();
        for path in named_paths(code, module) {
            // The longest prefix that is a module of this crate is the module the path names.
            let target = (0..=path.len())
                .rev()
                .map(|n| path[..n].to_vec())
                .find(|prefix| known.contains(prefix));
            if let Some(target) = target
                && !target.starts_with(module)
                && !module.starts_with(&target)
            {
                edges.insert(target);
            }
        }
        graph.insert(module.clone(), edges);
    }
    graph
}

fn collect_files(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            collect_files(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
}

fn module_of(src: &Path, file: &Path) -> Module {
    let relative = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Module = relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// The file without comments and without its inline test module.
fn code_of(source: &str) -> String {
    let mut code = String::new();
    for line in source.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("#[cfg(test)]") {
            // Inline test modules sit at the end of a file; a `#[cfg(test)] mod x;` declaration is skipped.
            if source[source.find(line).unwrap_or(0)..]
                .lines()
                .nth(1)
                .is_some_and(|next| next.trim_start().starts_with("mod ") && next.contains('{'))
            {
                break;
            }
            continue;
        }
        let without_comment = line.split("//").next().unwrap_or("");
        code.push_str(without_comment);
        code.push('\n');
    }
    code
}

/// Every module path named through `crate::` or `super::` (groups `{a, b::c}` expanded), as absolute
/// paths from the crate root.
fn named_paths(code: &str, module: &Module) -> Vec<Module> {
    let mut paths = Vec::new();
    let bytes = code.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let rest = &code[i..];
        let preceded_by_ident = i > 0
            && (bytes[i - 1].is_ascii_alphanumeric()
                || bytes[i - 1] == b'_'
                || bytes[i - 1] == b':');
        if !preceded_by_ident && (rest.starts_with("crate::") || rest.starts_with("super::")) {
            let mut base: Module = Vec::new();
            let mut j = i;
            if code[j..].starts_with("crate::") {
                j += "crate::".len();
            } else {
                // `super` of a file module is its parent; each further `super` goes one up.
                base = module.clone();
                while code[j..].starts_with("super::") {
                    base.pop();
                    j += "super::".len();
                }
            }
            let (found, end) = parse_tree(code, j, &base);
            paths.extend(found);
            i = end.max(i + 1);
        } else {
            i += rest.chars().next().map_or(1, char::len_utf8);
        }
    }
    paths
}

/// Parses `a::b::{c, d::e}` at `start`; returns the paths and where parsing stopped.
fn parse_tree(code: &str, start: usize, prefix: &Module) -> (Vec<Module>, usize) {
    let bytes = code.as_bytes();
    let mut path = prefix.clone();
    let mut i = start;
    loop {
        if i < bytes.len() && bytes[i] == b'{' {
            let mut paths = Vec::new();
            i += 1;
            loop {
                while i < bytes.len() && (bytes[i].is_ascii_whitespace() || bytes[i] == b',') {
                    i += 1;
                }
                if i >= bytes.len() || bytes[i] == b'}' {
                    return (paths, i + 1);
                }
                let (inner, end) = parse_tree(code, i, &path);
                paths.extend(inner);
                i = end.max(i + 1);
            }
        }
        let ident_end = code[i..]
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .map_or(code.len(), |n| i + n);
        if ident_end == i {
            return (vec![path], i);
        }
        path.push(code[i..ident_end].to_string());
        i = ident_end;
        if code[i..].starts_with("::") {
            i += 2;
        } else {
            return (vec![path], i);
        }
    }
}

/// Tarjan's strongly connected components with more than one module.
fn strongly_connected(graph: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    struct State<'a> {
        graph: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<&'a Module, usize>,
        low: BTreeMap<&'a Module, usize>,
        stack: Vec<&'a Module>,
        on_stack: BTreeSet<&'a Module>,
        next: usize,
        components: Vec<Vec<Module>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a Module) {
        s.index.insert(v, s.next);
        s.low.insert(v, s.next);
        s.next += 1;
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.graph.get(v).into_iter().flatten() {
            let Some((w, _)) = s.graph.get_key_value(w) else {
                continue;
            };
            if !s.index.contains_key(w) {
                visit(s, w);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w.clone());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.components.push(component);
            }
        }
    }
    let mut state = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        next: 0,
        components: Vec::new(),
    };
    for v in graph.keys() {
        if !state.index.contains_key(v) {
            visit(&mut state, v);
        }
    }
    state.components
}
