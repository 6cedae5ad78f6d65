//! Every write a controller makes goes through `mini_kcm_runtime::api::tracked_api::TrackedApi`, which records
//! it once for read-your-own-writes and for the decision log. A write made any other way would let the
//! owner's next sync run on a cache that does not show it yet, and no test would notice; so this test
//! reads the sources and fails, naming the line, when a controller crate builds an API of its own or a
//! module records a write by hand.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

/// What a controller crate's code must not contain, and why.
const FORBIDDEN_IN_CONTROLLERS: &[(&str, &str)] = &[
    (
        "Api::namespaced",
        "builds an API of its own (use the core's own_api / api / api_with)",
    ),
    (
        "Api::all",
        "builds an API of its own (use the core's own_api / api / api_with)",
    ),
    ("kube::Api", "names kube's API (use TrackedApi)"),
    ("use kube::{Api", "names kube's API (use TrackedApi)"),
    (
        ".request::<",
        "sends a raw request (use TrackedApi::create_raw)",
    ),
    (
        "record_write(",
        "records a write by hand (TrackedApi records it)",
    ),
    (
        // `wrote(` and `wrote_api(`.
        "decisions::wrote",
        "records a write by hand (TrackedApi records it)",
    ),
];

/// The runtime's modules allowed to record writes: the store itself and the one writer.
const RECORDERS: &[&str] = &["consistency.rs", "tracked_api.rs", "decisions.rs"];

#[test]
fn controllers_write_only_through_the_tracked_api() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates");
    let mut found = Vec::new();
    for krate in ["replicaset", "deployment", "daemonset"] {
        for file in sources(&crates.join(krate).join("src")) {
            for (line_number, line) in code_lines(&file) {
                for (pattern, why) in FORBIDDEN_IN_CONTROLLERS {
                    if line.contains(pattern) {
                        found.push(format!("{}:{line_number}: {why}", file.display()));
                    }
                }
            }
        }
    }
    for file in sources(&crates.join("runtime/src")) {
        let name = file.file_name().unwrap().to_string_lossy().to_string();
        if RECORDERS.contains(&name.as_str()) {
            continue;
        }
        for (line_number, line) in code_lines(&file) {
            if line.contains("record_write(") || line.contains("decisions::wrote") {
                found.push(format!(
                    "{}:{line_number}: records a write by hand (TrackedApi records it)",
                    file.display()
                ));
            }
        }
    }
    assert!(
        found.is_empty(),
        "writes outside TrackedApi:\n  {}",
        found.join("\n  ")
    );
}

/// The crate's source files, test-only files left out.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let stem = path.file_stem().unwrap().to_string_lossy().to_string();
                let test_only = stem == "tests"
                    || stem.ends_with("_tests")
                    || stem == "testutil"
                    || stem == "test_fixtures";
                if !test_only {
                    files.push(path);
                }
            }
        }
    }
    files.sort();
    assert!(!files.is_empty(), "found the sources under {dir:?}");
    files
}

/// Numbered lines of code: comments dropped, and nothing from the inline `#[cfg(test)]` module on
/// (it sits at the end of a file).
fn code_lines(file: &Path) -> Vec<(usize, String)> {
    let source = std::fs::read_to_string(file).unwrap();
    let mut lines = Vec::new();
    let mut all = source.lines().enumerate().peekable();
    while let Some((index, line)) = all.next() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("#[cfg(test)]") {
            if all.peek().is_some_and(|(_, next)| {
                next.trim_start().starts_with("mod ") && next.contains('{')
            }) {
                break;
            }
            continue;
        }
        if trimmed.starts_with("//") {
            continue;
        }
        let code = line.split("//").next().unwrap_or("");
        lines.push((index + 1, code.to_string()));
    }
    lines
}

/// The check finds what it looks for (so an empty result means something).
#[test]
fn the_check_sees_a_hand_made_api_and_skips_test_modules() {
    let dir = std::env::temp_dir().join(format!("mini-kcm-writes-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("sync.rs");
    std::fs::write(
        &file,
        "// Api::namespaced in a comment\nlet api = Api::namespaced(c, ns);\n#[cfg(test)]\nmod tests {\n    record_write(x);\n}\n",
    )
    .unwrap();
    let lines = code_lines(&file);
    std::fs::remove_dir_all(&dir).unwrap();
    let hits: Vec<usize> = lines
        .iter()
        .filter(|(_, l)| FORBIDDEN_IN_CONTROLLERS.iter().any(|(p, _)| l.contains(p)))
        .map(|(n, _)| *n)
        .collect();
    assert_eq!(hits, [2]);
}
