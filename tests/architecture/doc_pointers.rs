//! Every `crates/….rs::item` pointer in docs/*.md names an item that exists: the docs send readers to
//! code by these pointers, and a rename must not leave them pointing at nothing.
//!
//! A pointer is `crates/<path>.rs::name`, `crates/<path>.rs::Type::name` or
//! `crates/<path>.rs::{a, b}`. The file must exist and define each named item: a `fn` (free or a
//! method), `struct`, `enum`, `trait`, `const`, `static`, `mod` or `type` of that name; for
//! `Type::name`, the file must also define or implement `Type`. The check is textual (no parser), which
//! is enough for names and keeps the test free of dependencies.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

/// One pointer as written in a doc, split into the file and the item path.
#[derive(Debug, PartialEq)]
struct Pointer {
    doc: String,
    file: String,
    items: Vec<Vec<String>>,
}

#[test]
fn every_code_pointer_in_the_docs_names_an_existing_item() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    let mut pointers = Vec::new();
    for doc in &docs {
        let name = doc.file_name().unwrap().to_string_lossy().into_owned();
        pointers.extend(pointers_in(&name, &std::fs::read_to_string(doc).unwrap()));
    }
    // The crosswalk tables alone hold more than this; fewer means the parser stopped finding them.
    assert!(
        pointers.len() >= 40,
        "found only {} pointers",
        pointers.len()
    );
    let broken: Vec<String> = pointers.iter().flat_map(|p| problems(&root, p)).collect();
    assert!(
        broken.is_empty(),
        "doc pointers to code that does not exist:\n  {}",
        broken.join("\n  ")
    );
}

#[test]
fn the_parser_finds_every_form_and_the_check_rejects_a_bad_pointer() {
    let text = "see `crates/a/src/b.rs::f`, crates/a/src/b.rs::T::m and (crates/a/src/c.rs::{x, y}); \
                not crates/a/tests/r.rs::{apps,copies}_round_trip nor crates/a/src/ (a folder)";
    let found = pointers_in("x.md", text);
    let items: Vec<(&str, Vec<String>)> = found
        .iter()
        .flat_map(|p| {
            p.items
                .iter()
                .map(|i| (p.file.as_str(), i.clone()))
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(
        items,
        vec![
            ("crates/a/src/b.rs", vec!["f".to_string()]),
            ("crates/a/src/b.rs", vec!["T".to_string(), "m".to_string()]),
            ("crates/a/src/c.rs", vec!["x".to_string()]),
            ("crates/a/src/c.rs", vec!["y".to_string()]),
        ]
    );

    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let good = pointers_in(
        "x.md",
        "crates/runtime/src/pods/slow_start.rs::slow_start_batch",
    );
    assert!(problems(&root, &good[0]).is_empty());
    for bad in [
        "crates/runtime/src/pods/slow_start.rs::no_such_item",
        "crates/runtime/src/no_such_file.rs::slow_start_batch",
        "crates/runtime/src/pods/slow_start.rs::NoSuchType::slow_start_batch",
    ] {
        let pointer = &pointers_in("x.md", bad)[0];
        assert_eq!(problems(&root, pointer).len(), 1, "{bad} passed the check");
    }
}

/// The pointers in one doc.
fn pointers_in(doc: &str, text: &str) -> Vec<Pointer> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("crates/") {
        let after = &rest[start..];
        // A path runs over path characters up to `.rs::`.
        let path_len = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || "/_-.".contains(c)))
            .unwrap_or(after.len());
        let path = &after[..path_len];
        let tail = &after[path_len..];
        rest = &after["crates/".len()..];
        let (Some(file), Some(items)) = (path.strip_suffix(".rs"), tail.strip_prefix("::")) else {
            continue;
        };
        let file = format!("{file}.rs");
        if let Some(group) = items.strip_prefix('{') {
            let Some(end) = group.find('}') else { continue };
            let names: Vec<&str> = group[..end].split(',').map(str::trim).collect();
            // `{apps,copies}_suffix` is a family of test names, not a list of items.
            let glued = group[end + 1..]
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
            if glued || !names.iter().all(|n| is_identifier(n)) {
                continue;
            }
            found.push(Pointer {
                doc: doc.to_string(),
                file,
                items: names.iter().map(|n| vec![n.to_string()]).collect(),
            });
            continue;
        }
        let mut segments = Vec::new();
        let mut remaining = items;
        loop {
            let len = remaining
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(remaining.len());
            if len == 0 {
                break;
            }
            segments.push(remaining[..len].to_string());
            match remaining[len..].strip_prefix("::") {
                Some(next) if next.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') => {
                    remaining = next;
                }
                _ => break,
            }
        }
        if !segments.is_empty() {
            found.push(Pointer {
                doc: doc.to_string(),
                file,
                items: vec![segments],
            });
        }
    }
    found
}

fn is_identifier(name: &str) -> bool {
    !name.is_empty()
        && name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// What is wrong with one pointer, one line per problem.
fn problems(root: &Path, pointer: &Pointer) -> Vec<String> {
    let Ok(source) = std::fs::read_to_string(root.join(&pointer.file)) else {
        return vec![format!("{}: {} does not exist", pointer.doc, pointer.file)];
    };
    let mut problems = Vec::new();
    for item in &pointer.items {
        let (name, owner) = match item.as_slice() {
            [.., owner, name] => (name, Some(owner)),
            [name] => (name, None),
            [] => continue,
        };
        let defined = defines(&source, name);
        let owner_ok = owner.is_none_or(|o| defines(&source, o) || implements(&source, o));
        if !defined || !owner_ok {
            problems.push(format!(
                "{}: {}::{} is not defined there",
                pointer.doc,
                pointer.file,
                item.join("::")
            ));
        }
    }
    problems
}

/// Whether `source` declares an item called `name`.
fn defines(source: &str, name: &str) -> bool {
    const KEYWORDS: [&str; 8] = [
        "fn", "struct", "enum", "trait", "const", "static", "mod", "type",
    ];
    words(source)
        .windows(2)
        .any(|w| w[1] == name && KEYWORDS.contains(&w[0]))
}

/// Whether `source` has an `impl … Type` block for `name` (its methods may be pointed at).
fn implements(source: &str, name: &str) -> bool {
    source.lines().any(|line| {
        let line = line.trim_start();
        line.starts_with("impl") && words(line).contains(&name)
    })
}

/// The identifier-like words of `text`, in order.
fn words(text: &str) -> Vec<&str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .collect()
}

/// The crates whose modules docs/architecture.md's map lists one by one.
const MAPPED_CRATES: &[&str] = &["runtime", "manager"];

#[test]
fn the_architecture_map_lists_every_module_of_the_crates_it_details() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let map = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    let mut missing = Vec::new();
    for krate in MAPPED_CRATES {
        let listed = map_entries(&map, krate);
        assert!(
            !listed.is_empty(),
            "docs/architecture.md's map has no `{krate}/` section"
        );
        let mut modules: Vec<String> =
            std::fs::read_dir(root.join("crates").join(krate).join("src"))
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter_map(|path| {
                    let name = path.file_name()?.to_str()?.to_string();
                    if path.is_dir() {
                        // A folder is a module when it has its own `mod.rs` or a sibling `name.rs`.
                        let sibling = path.with_extension("rs");
                        (path.join("mod.rs").exists() && !sibling.exists())
                            .then(|| format!("{name}/"))
                    } else {
                        (name.ends_with(".rs") && name != "lib.rs" && name != "main.rs")
                            .then_some(name)
                    }
                })
                .collect();
        modules.sort();
        for module in modules {
            let folder = format!("{}/", module.trim_end_matches(".rs"));
            if !listed.contains(&module) && !listed.contains(&folder) {
                missing.push(format!("crates/{krate}/src/{module}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "modules missing from docs/architecture.md's map (add a line saying what each is):\n  {}",
        missing.join("\n  ")
    );
}

/// The file and folder names in the first column of a crate's section of the map (`  runtime/` up to
/// the next crate at the same depth).
fn map_entries(map: &str, krate: &str) -> Vec<String> {
    let header = format!("  {krate}/");
    let mut entries = Vec::new();
    let mut inside = false;
    for line in map.lines() {
        if line.starts_with(&header) {
            inside = true;
            continue;
        }
        if !inside {
            continue;
        }
        // The next crate (two spaces, then a name) or the end of the block.
        if line.starts_with("```") || (line.starts_with("  ") && !line.starts_with("   ")) {
            break;
        }
        let first_column = line.trim_start().split("  ").next().unwrap_or("");
        entries.extend(
            first_column
                .split(',')
                .map(|name| name.trim().to_string())
                .filter(|name| name.ends_with(".rs") || name.ends_with('/')),
        );
    }
    entries
}
