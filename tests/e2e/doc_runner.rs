//! Typing a document's commands as a reader would (tests/e2e/tour.rs): its ```sh blocks in order, each
//! followed by the `<!-- check: ... -->` conditions under it, in a user's shell at the root of the
//! repository, beside a `mini-kcm up` the test started.
//!
//! - A ```sh block is typed into the second terminal: a bash session (`set -euo pipefail`) that gets no
//!   `PATH`, `KUBECONFIG` or manager address from the test; the docs' set-up line ([`SETUP_LINE`]) sets
//!   them, run with the plane's `--state-dir` ([`with_setup_line`]).
//! - A `<!-- check: CONDITION -->` comment is a bash condition retried until it holds or the timeout
//!   passes. `<!-- check without: … -->` and `<!-- check with: … -->` hold only in the run of a section
//!   with its mechanism off, or on (docs/tour-breaking.md).
//! - A ```sh block whose first line is `# terminal 1` starts the plane: it holds exactly one
//!   `cargo run -p mini-kcm -- up ARGS` (or `mini-kcm up ARGS`) line, run as the built binary with the same
//!   arguments and the test's own `--state-dir` ([`start_up`]).
//! - A `## ` heading starts a section (docs/tour-breaking.md runs one section at a time, [`runs`]).

// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::{
    ProcessGroup, SETUP_LINE, as_a_users_shell, check_script_prelude, repo_path,
    setup_line_with_state_dir, shell_quote,
};

/// Which plane a section's commands run against: its first `# terminal 1` block (the mechanism off) or
/// its second (on).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    Without,
    With,
}

/// One piece of a document, in document order.
#[derive(Debug, Clone, PartialEq)]
pub enum Piece {
    /// A `## ` heading.
    Heading(String),
    /// The lines of a ```sh block typed in the second terminal.
    Commands(String),
    /// A bash condition that must come true; `only` in one variant's run, else in every run.
    Check {
        condition: String,
        only: Option<Variant>,
    },
    /// A `# terminal 1` block: `mini-kcm`'s arguments (`up …`).
    Up(Vec<String>),
}

/// The first line of a ```sh block that starts the plane.
const TERMINAL_1: &str = "# terminal 1";

/// The pieces of a Markdown document, in order. Panics on a `# terminal 1` block that does not hold
/// exactly one `up` command.
pub fn pieces(markdown: &str) -> Vec<Piece> {
    let mut pieces = Vec::new();
    let mut block: Option<String> = None;
    for line in markdown.lines() {
        match &mut block {
            Some(commands) if line.trim_start().starts_with("```") => {
                let commands = std::mem::take(commands);
                pieces.push(match commands.lines().next() {
                    Some(first) if first.trim().starts_with(TERMINAL_1) => {
                        Piece::Up(up_arguments(&commands))
                    }
                    _ => Piece::Commands(commands),
                });
                block = None;
            }
            Some(commands) => {
                commands.push_str(line);
                commands.push('\n');
            }
            None if line.trim() == "```sh" => block = Some(String::new()),
            None => {
                if let Some(heading) = line.strip_prefix("## ") {
                    pieces.push(Piece::Heading(heading.trim().to_string()));
                } else if let Some(check) = check(line) {
                    pieces.push(check);
                }
            }
        }
    }
    pieces
}

/// A `<!-- check: … -->`, `<!-- check without: … -->` or `<!-- check with: … -->` line.
fn check(line: &str) -> Option<Piece> {
    let inner = line
        .trim()
        .strip_prefix("<!-- check")?
        .strip_suffix("-->")?;
    let (only, condition) = if let Some(rest) = inner.strip_prefix(":") {
        (None, rest)
    } else if let Some(rest) = inner.strip_prefix(" without:") {
        (Some(Variant::Without), rest)
    } else if let Some(rest) = inner.strip_prefix(" with:") {
        (Some(Variant::With), rest)
    } else {
        panic!("a check comment the runner does not know: {line}");
    };
    Some(Piece::Check {
        condition: condition.trim().to_string(),
        only,
    })
}

/// The arguments of the one `up` command of a `# terminal 1` block (comments aside).
fn up_arguments(block: &str) -> Vec<String> {
    let commands: Vec<&str> = block
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    let [command] = commands.as_slice() else {
        panic!("a `{TERMINAL_1}` block holds exactly one `mini-kcm up` command, not:\n{block}");
    };
    let args = command
        .strip_prefix("cargo run -p mini-kcm -- ")
        .or_else(|| command.strip_prefix("mini-kcm "))
        .unwrap_or_else(|| panic!("not a `mini-kcm up` command: {command}"));
    assert!(
        !args.contains(['\'', '"', '$', '\\', ';', '&', '|']),
        "the runner splits `up`'s arguments at spaces only: {command}"
    );
    let args: Vec<String> = args.split_whitespace().map(str::to_string).collect();
    assert_eq!(
        args.first().map(String::as_str),
        Some("up"),
        "not a `mini-kcm up` command: {command}"
    );
    args
}

/// The pieces with every set-up line as the docs say to type it for an `up --state-dir DIR`, and how
/// many set-up lines there were.
pub fn with_setup_line(pieces: &[Piece], state_dir: &Path) -> (Vec<Piece>, usize) {
    let setup = setup_line_with_state_dir(state_dir);
    let mut setups = 0;
    let pieces = pieces
        .iter()
        .map(|piece| match piece {
            Piece::Commands(commands) => Piece::Commands(
                commands
                    .lines()
                    .map(|line| {
                        if line.trim() == SETUP_LINE {
                            setups += 1;
                            format!("{setup}\n")
                        } else {
                            format!("{line}\n")
                        }
                    })
                    .collect(),
            ),
            other => other.clone(),
        })
        .collect();
    (pieces, setups)
}

/// The bash script that types the pieces: the commands as written (each line echoed first), each check
/// that applies to `variant` through `<name>_check`, then `<NAME> COMPLETE`. Headings are skipped; a
/// `# terminal 1` block is not for the second terminal.
pub fn script(name: &str, pieces: &[Piece], timeout: Duration, variant: Option<Variant>) -> String {
    let mut script = check_script_prelude(name, timeout);
    for piece in pieces {
        match piece {
            Piece::Heading(_) => {}
            Piece::Commands(commands) => {
                for line in commands.lines() {
                    script.push_str(&format!("echo {}\n", shell_quote(&format!("$ {line}"))));
                }
                script.push_str(commands);
            }
            Piece::Check { condition, only } => {
                if only.is_none() || *only == variant {
                    script.push_str(&format!("{name}_check {}\n", shell_quote(condition)));
                }
            }
            Piece::Up(args) => panic!("`mini-kcm {}` is terminal 1's", args.join(" ")),
        }
    }
    script.push_str(&format!("echo {} COMPLETE\n", name.to_uppercase()));
    script
}

/// One run of a section of docs/tour-breaking.md: its plane (`up`'s arguments) and what terminal 2
/// types against it.
#[derive(Debug, PartialEq)]
pub struct Run {
    pub section: String,
    pub variant: Variant,
    pub up: Vec<String>,
    /// The section's terminal-2 blocks and the checks that hold in this variant's run.
    pub pieces: Vec<Piece>,
}

/// The runs of a document made of sections that each start the plane twice: a first `# terminal 1`
/// block (the mechanism off), the terminal-2 blocks and their checks, then a second `# terminal 1` block
/// (the mechanism on), after which the reader types the same terminal-2 blocks again. Panics on a
/// section of another shape.
pub fn runs(pieces: &[Piece]) -> Vec<Run> {
    let mut runs = Vec::new();
    let mut sections: Vec<(String, Vec<&Piece>)> = vec![(String::new(), Vec::new())];
    for piece in pieces {
        match piece {
            Piece::Heading(heading) => sections.push((heading.clone(), Vec::new())),
            other => sections.last_mut().unwrap().1.push(other),
        }
    }
    for (section, pieces) in sections {
        let ups: Vec<(usize, &Vec<String>)> = pieces
            .iter()
            .enumerate()
            .filter_map(|(i, p)| match p {
                Piece::Up(args) => Some((i, args)),
                _ => None,
            })
            .collect();
        if ups.is_empty() {
            assert!(
                !pieces.iter().any(|p| matches!(p, Piece::Commands(_))),
                "section {section:?} has commands but no `{TERMINAL_1}` block"
            );
            continue;
        }
        let [(first, without), (second, with)] = ups.as_slice() else {
            panic!(
                "section {section:?} starts the plane {} times: once without its mechanism, once with it",
                ups.len()
            );
        };
        let (first, second) = (*first, *second);
        let typed = &pieces[first + 1..second];
        assert!(
            typed.iter().any(|p| matches!(p, Piece::Commands(_))),
            "section {section:?}: no commands between its two `{TERMINAL_1}` blocks"
        );
        assert!(
            pieces[second + 1..]
                .iter()
                .all(|p| !matches!(p, Piece::Commands(_) | Piece::Check { .. })),
            "section {section:?}: commands or checks after its second `{TERMINAL_1}` block (the reader types the ones above again)"
        );
        for (variant, up) in [(Variant::Without, without), (Variant::With, with)] {
            runs.push(Run {
                section: section.clone(),
                variant,
                up: (*up).clone(),
                pieces: typed
                    .iter()
                    .filter(|p| match p {
                        Piece::Check { only, .. } => only.is_none() || *only == Some(variant),
                        _ => true,
                    })
                    .map(|p| (*p).clone())
                    .collect(),
            });
        }
    }
    runs
}

/// `mini-kcm up`, started as a user starts it in terminal 1, running until dropped.
pub struct Up {
    pub printed: String,
    /// Where its standard error (the manager's log lines) goes.
    pub log: PathBuf,
    _group: ProcessGroup,
}

/// Starts `binary` with `args` (`up …`) and `--state-dir state_dir` in a process group of its own, and
/// waits for `mini-kcm: running`. Its standard error goes to `log`.
pub fn start_up(binary: &Path, args: &[String], state_dir: &Path, log: &Path) -> Up {
    let mut child = Command::new(binary)
        .args(args)
        .arg("--state-dir")
        .arg(state_dir)
        .env_remove("KUBECONFIG")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(log).unwrap())
        .process_group(0)
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let group = ProcessGroup(child);
    let mut lines = BufReader::new(stdout).lines();
    let mut printed = String::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        printed.push_str(&line);
        printed.push('\n');
        if line.starts_with("mini-kcm: running") {
            break;
        }
    }
    assert!(
        printed.contains("mini-kcm: running"),
        "mini-kcm {} did not start:\n{printed}\n--- its log\n{}",
        args.join(" "),
        tail(log, 40)
    );
    // Keep draining `up`'s output so it never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    Up {
        printed,
        log: log.to_path_buf(),
        _group: group,
    }
}

/// The last `n` lines of a file.
pub fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// What a typed script did.
pub struct Typed {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
    /// Something it started in the background still ran when it ended (ended then by the runner).
    pub left_running: bool,
    pub took: Duration,
}

/// Types `script` in terminal 2: bash, in a user's shell at the root of the repository, in a process
/// group of its own. Its output goes to files in `work` (a background job keeps a pipe open, not a file),
/// and whatever it left running in the background is ended once it exits.
pub fn type_in_terminal_2(script: &str, work: &Path) -> Typed {
    static TYPED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = TYPED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let out = work.join(format!("terminal-2-{n}.out"));
    let err = work.join(format!("terminal-2-{n}.err"));
    let started = Instant::now();
    let mut bash = as_a_users_shell(Command::new("bash").arg("-c").arg(script))
        .current_dir(repo_path(""))
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .process_group(0)
        .spawn()
        .unwrap();
    let status = bash.wait().unwrap();
    // A job ended by the script (`kill %1`) may take a moment to exit; one still running after that was
    // left behind.
    let pgid = bash.id();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !live_members(pgid).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let left = live_members(pgid);
    for pid in &left {
        let _ = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .stderr(Stdio::null())
            .status();
    }
    let left_running = !left.is_empty();
    Typed {
        success: status.success(),
        stdout: std::fs::read_to_string(&out).unwrap_or_default(),
        stderr: std::fs::read_to_string(&err).unwrap_or_default(),
        left_running,
        took: started.elapsed(),
    }
}

/// The processes of process group `pgid` that have not exited (zombies aside: in a container nobody
/// may reap an orphan).
fn live_members(pgid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            // `pid (comm) state ppid pgrp …`; comm may hold spaces and parentheses.
            let mut fields = stat.get(stat.rfind(')')? + 1..)?.split_whitespace();
            let state = fields.next()?;
            let pgrp: u32 = fields.nth(1)?.parse().ok()?;
            (pgrp == pgid && state != "Z" && state != "X").then_some(pid)
        })
        .collect()
}
