//! Every error prints its own context once: a `#[error("…")]` message never names the field that is its
//! `source`, because whoever prints the error walks the chain (`mini-kcm` prints `{e:#}`, the workers log
//! `error_chain`), and a message that also interpolates its source makes the reader see the cause twice
//! ("reading kubeconfig X: <cause>: <cause>").
//!
//! Reads every `crates/*/src` file, finds each `#[error("…")]` (not `transparent`) and the enum variant or
//! struct it describes, takes as the source the field marked `#[source]` or `#[from]` or named `source`
//! (thiserror's rules), and fails naming each message that interpolates it.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

#[test]
fn no_error_message_repeats_its_source() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates");
    let mut files = Vec::new();
    collect_files(&crates, &mut files);
    files.sort();
    let mut checked = 0;
    let mut repeats = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for (line, message, source) in error_messages(&text) {
            checked += 1;
            if let Some(field) = source
                && names_field(&message, &field)
            {
                let path = file.strip_prefix(&crates).unwrap_or(file).display();
                repeats.push(format!(
                    "crates/{path}:{line}: \"{message}\" prints its source `{field}`"
                ));
            }
        }
    }
    // Able to fail: the check must have seen the workspace's errors, not an empty tree.
    assert!(checked > 50, "found only {checked} #[error] messages");
    assert!(
        repeats.is_empty(),
        "error messages that print their source, which the chain prints again (say only what this \
         layer was doing):\n  {}",
        repeats.join("\n  ")
    );
}

#[test]
fn the_check_sees_a_repeated_source_in_each_form() {
    let text = r#"
        enum E {
            #[error("reading {path}: {source}")]
            Named { path: String, source: std::io::Error },
            #[error("client: {0}")]
            Tuple(#[from] kube::Error),
            #[error("api {context}: {inner:?}")]
            Marked { context: String, #[source] inner: kube::Error },
            #[error("fine: {context}")]
            Fine { context: String, #[source] source: std::io::Error },
            #[error("{0}")]
            Plain(String),
            #[error(transparent)]
            Through(#[from] std::io::Error),
        }
    "#;
    let found: Vec<(String, bool)> = error_messages(text)
        .into_iter()
        .map(|(_, message, source)| {
            let repeats = source.is_some_and(|field| names_field(&message, &field));
            (message, repeats)
        })
        .collect();
    assert_eq!(
        found,
        vec![
            ("reading {path}: {source}".to_string(), true),
            ("client: {0}".to_string(), true),
            ("api {context}: {inner:?}".to_string(), true),
            ("fine: {context}".to_string(), false),
            ("{0}".to_string(), false),
        ]
    );
}

fn collect_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "target") {
                collect_files(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "rs")
            && path.to_string_lossy().contains("/src/")
        {
            out.push(path);
        }
    }
}

/// Each non-transparent `#[error("…")]`: its line, its message and the name of its source field (`0`,
/// `1`, … for a tuple variant), if it has one.
fn error_messages(text: &str) -> Vec<(usize, String, Option<String>)> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("#[error(") {
        let offset = text.len() - rest.len() + at;
        let line = text[..offset].lines().count() + 1;
        let after = &rest[at + "#[error(".len()..];
        let Some(attribute_end) = closing(after, '(', ')') else {
            break;
        };
        let arguments = &after[..attribute_end];
        rest = &after[attribute_end..];
        if arguments.trim() == "transparent" {
            continue;
        }
        let message = string_literal(arguments).unwrap_or_default();
        found.push((line, message, source_field(item_after(rest))));
    }
    found
}

/// The text of the variant (or struct) an attribute describes: its name and its fields' brackets.
fn item_after(text: &str) -> &str {
    // Skip the attribute's own closing `]`, then any further attributes and doc comments.
    let text = without_attributes(text.find(']').map_or(text, |i| &text[i + 1..]));
    let Some(open) = text.find(['(', '{', ',', '}', ';']) else {
        return text;
    };
    let bracket = text[open..].chars().next().unwrap_or(',');
    let close = match bracket {
        '(' => ')',
        '{' => '}',
        _ => return &text[..open],
    };
    let end = closing(&text[open + 1..], bracket, close).map_or(text.len(), |i| open + 1 + i + 1);
    &text[..end]
}

/// The source field of a variant's text, by thiserror's rules.
fn source_field(item: &str) -> Option<String> {
    let open = item.find(['(', '{'])?;
    let tuple = item[open..].starts_with('(');
    let fields = split_top_level(&item[open + 1..item.len().saturating_sub(1).max(open + 1)]);
    fields.iter().enumerate().find_map(|(index, field)| {
        let marked = field.contains("#[source]") || field.contains("#[from]");
        let field = *field;
        let name = if tuple {
            index.to_string()
        } else {
            let declaration = without_attributes(field)
                .trim_start_matches("pub(crate) ")
                .trim_start_matches("pub ");
            declaration.split(':').next()?.trim().to_string()
        };
        (marked || name == "source").then_some(name)
    })
}

/// Text with its leading attributes and comments skipped.
fn without_attributes(mut text: &str) -> &str {
    loop {
        text = text.trim_start();
        if let Some(attribute) = text.strip_prefix("#[") {
            let end = closing(attribute, '[', ']').map_or(attribute.len(), |i| i + 1);
            text = &attribute[end..];
        } else if text.starts_with("//") {
            text = text.find('\n').map_or("", |i| &text[i + 1..]);
        } else {
            return text;
        }
    }
}

fn split_top_level(text: &str) -> Vec<&str> {
    let mut fields = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' | '{' | '[' | '<' => depth += 1,
            ')' | '}' | ']' | '>' => depth -= 1,
            ',' if depth == 0 => {
                fields.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if !text[start..].trim().is_empty() {
        fields.push(&text[start..]);
    }
    fields
}

/// Whether a format string interpolates `field` (`{field}`, `{field:?}`, `{field:#}`).
fn names_field(message: &str, field: &str) -> bool {
    let mut rest = message;
    while let Some(at) = rest.find('{') {
        rest = &rest[at + 1..];
        if rest.starts_with('{') {
            rest = &rest[1..];
            continue;
        }
        let end = rest.find(['}', ':']).unwrap_or(rest.len());
        if rest[..end].trim() == field {
            return true;
        }
    }
    false
}

/// The first string literal in an attribute's arguments (plain or raw), unescaped enough to read.
fn string_literal(arguments: &str) -> Option<String> {
    let start = arguments.find('"')?;
    let mut out = String::new();
    let mut chars = arguments[start + 1..].chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(next) = chars.next() {
                    out.push(next);
                }
            }
            '"' => return Some(out),
            _ => out.push(c),
        }
    }
    None
}

/// The index of the bracket closing an already open one.
fn closing(text: &str, open: char, close: char) -> Option<usize> {
    let mut depth = 1;
    let mut in_string = false;
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        if in_string {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        if c == '"' {
            in_string = true;
        } else if c == open {
            depth += 1;
        } else if c == close {
            depth -= 1;
            if depth == 0 {
                return Some(i);
            }
        }
    }
    None
}
