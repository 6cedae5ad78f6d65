//! Each command's flags are documented in one table, and that table lists exactly the flags clap
//! defines: a flag added, renamed or removed fails this test until its row is. The tables live where a
//! user of the command reads (`FLAG_TABLES`); no other document may carry a table of flags, so a second,
//! drifting copy (as `run`'s once was in README and `docs/in-cluster.md`) cannot come back.

use std::collections::BTreeSet;
use std::path::Path;

use clap::CommandFactory;

use crate::Cli;

/// Command (its path under `mini-kcm`), the document holding its table, and the line the table follows.
const FLAG_TABLES: &[(&str, &str, &str)] = &[
    ("up", "README.md", "Options of `mini-kcm up`:"),
    ("env", "README.md", "Options of `mini-kcm env`:"),
    ("rollout", "README.md", "Options of `mini-kcm rollout`:"),
    (
        "run",
        "docs/in-cluster.md",
        "## Flags, metrics and leader election",
    ),
    (
        "explain",
        "docs/live-view.md",
        "Options of `mini-kcm explain`:",
    ),
    (
        "bench",
        "docs/performance.md",
        "Options of `mini-kcm bench`:",
    ),
    (
        "conformance",
        "docs/conformance.md",
        "Options of `mini-kcm conformance`:",
    ),
];

fn repo() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// The long flags of a subcommand and of its own subcommands (`rollout status --watch`), without
/// `--help` and `--version`. `mini-kcm`'s global flags (`--log-format`) are documented with `run`.
fn clap_flags(name: &str) -> BTreeSet<String> {
    fn collect(command: &clap::Command, out: &mut BTreeSet<String>) {
        for arg in command.get_arguments() {
            if arg.is_hide_set() || arg.is_global_set() && command.get_name() == "mini-kcm" {
                continue;
            }
            if let Some(long) = arg.get_long()
                && long != "help"
                && long != "version"
            {
                out.insert(format!("--{long}"));
            }
        }
        for sub in command.get_subcommands() {
            collect(sub, out);
        }
    }
    let cli = Cli::command();
    let mut flags = BTreeSet::new();
    if let Some(command) = cli.find_subcommand(name) {
        collect(command, &mut flags);
    }
    if name == "run" {
        for arg in cli.get_arguments().filter(|a| a.is_global_set()) {
            if let Some(long) = arg.get_long() {
                flags.insert(format!("--{long}"));
            }
        }
    }
    flags
}

/// The rows of the first table after the line `after`: the flags named in each row's first cell.
fn table_flags(text: &str, after: &str) -> Option<BTreeSet<String>> {
    let mut lines = text.lines().skip_while(|line| line.trim() != after);
    lines.next()?;
    let rows = lines
        .skip_while(|line| !line.starts_with('|'))
        .take_while(|line| line.starts_with('|'))
        .skip(2);
    let mut flags = BTreeSet::new();
    for row in rows {
        let first_cell = row.split(" | ").next().unwrap_or(row);
        flags.extend(flags_in(first_cell));
    }
    Some(flags)
}

/// Every `--name` in a text.
fn flags_in(text: &str) -> Vec<String> {
    let mut flags = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("--") {
        let name: String = rest[at + 2..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        if !name.is_empty() {
            flags.push(format!("--{name}"));
        }
        rest = &rest[at + 2 + name.len()..];
    }
    flags
}

#[test]
fn each_commands_flag_table_lists_exactly_its_flags() {
    let mut problems = Vec::new();
    for (command, file, after) in FLAG_TABLES {
        let text = std::fs::read_to_string(repo().join(file)).unwrap_or_default();
        let Some(documented) = table_flags(&text, after) else {
            problems.push(format!(
                "{file}: no line `{after}` (the `{command}` flag table follows it)"
            ));
            continue;
        };
        let defined = clap_flags(command);
        assert!(!defined.is_empty(), "clap defines no flags for `{command}`");
        for missing in defined.difference(&documented) {
            problems.push(format!(
                "{file}: `mini-kcm {command}` has {missing}, its table lacks it"
            ));
        }
        for extra in documented.difference(&defined) {
            problems.push(format!(
                "{file}: the `mini-kcm {command}` table lists {extra}, which it lacks"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn no_other_document_carries_a_table_of_flags() {
    let mut documents = vec![repo().join("README.md")];
    let docs = repo().join("docs");
    for entry in std::fs::read_dir(&docs).into_iter().flatten().flatten() {
        if entry.path().extension().is_some_and(|e| e == "md") {
            documents.push(entry.path());
        }
    }
    assert!(documents.len() > 10, "found the docs in {}", docs.display());
    let mut strays = Vec::new();
    for path in documents {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let registered: Vec<&str> = FLAG_TABLES
            .iter()
            .filter(|(_, file, _)| path.ends_with(file))
            .map(|(_, _, after)| *after)
            .collect();
        // Rows of the registered tables, then every row that starts with a flag.
        let mut allowed = BTreeSet::new();
        for after in &registered {
            let mut lines = text.lines().skip_while(|line| line.trim() != *after);
            lines.next();
            allowed.extend(
                lines
                    .skip_while(|line| !line.starts_with('|'))
                    .take_while(|line| line.starts_with('|')),
            );
        }
        for line in text.lines() {
            if line.starts_with("| `--") && !allowed.contains(line) {
                strays.push(format!("{}: {line}", path.display()));
            }
        }
    }
    assert!(
        strays.is_empty(),
        "flag rows outside the commands' tables (FLAG_TABLES in crates/mini-kcm/src/flag_tables.rs):\n{}",
        strays.join("\n")
    );
}

#[test]
fn a_table_is_read_row_by_row() {
    let text = "intro\n## Flags\n\n| flag | meaning |\n| --- | --- |\n| `--a` / `--b-c N` | x --not |\n\
                | `--d[=false]` | y |\n\nafter\n| `--e` | z |\n";
    let flags = table_flags(text, "## Flags").unwrap_or_default();
    let expected: BTreeSet<String> = ["--a", "--b-c", "--d"].map(String::from).into();
    assert_eq!(flags, expected);
    assert!(table_flags(text, "## Missing").is_none());
}
