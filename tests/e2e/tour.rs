//! `docs/tour.md` and its part 2, `docs/tour-lifecycle.md`, stay true: this test starts `mini-kcm up` as
//! a user would, then runs every `sh` block of the tour in order in one bash session
//! (`set -euo pipefail`), and after each block waits for the conditions of the `<!-- check: ... -->`
//! comments that follow it (each a bash condition, retried until it holds or 90 s pass). A command that
//! fails, or a check that never holds, fails the test with the tour's output so far.

// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use mini_kcm_e2e::{ProcessGroup, check_script_prelude, mini_kcm_binary, repo_path, shell_quote};

/// How long one check may take to hold.
const CHECK_TIMEOUT: Duration = Duration::from_secs(90);

/// One piece of the tour, in document order.
#[derive(Debug, PartialEq)]
enum Piece {
    /// The lines of a ```sh block.
    Commands(String),
    /// A bash condition that must come true.
    Check(String),
}

/// The `sh` blocks and `check` comments of a Markdown document, in order.
fn pieces(markdown: &str) -> Vec<Piece> {
    let mut pieces = Vec::new();
    let mut block: Option<String> = None;
    for line in markdown.lines() {
        match &mut block {
            Some(commands) if line.trim_start().starts_with("```") => {
                pieces.push(Piece::Commands(std::mem::take(commands)));
                block = None;
            }
            Some(commands) => {
                commands.push_str(line);
                commands.push('\n');
            }
            None if line.trim() == "```sh" => block = Some(String::new()),
            None => {
                if let Some(check) = line
                    .trim()
                    .strip_prefix("<!-- check:")
                    .and_then(|rest| rest.strip_suffix("-->"))
                {
                    pieces.push(Piece::Check(check.trim().to_string()));
                }
            }
        }
    }
    pieces
}

/// The bash script that runs the pieces: commands as written, each check through `tour_check`.
fn script(pieces: &[Piece]) -> String {
    let mut script = check_script_prelude("tour", CHECK_TIMEOUT);
    for piece in pieces {
        match piece {
            Piece::Commands(commands) => {
                for line in commands.lines() {
                    script.push_str(&format!("echo {}\n", shell_quote(&format!("$ {line}"))));
                }
                script.push_str(commands);
            }
            Piece::Check(check) => {
                script.push_str(&format!("tour_check {}\n", shell_quote(check)));
            }
        }
    }
    script.push_str("echo TOUR COMPLETE\n");
    script
}

#[test]
fn the_pieces_of_a_markdown_tour_are_found_in_order() {
    let doc = "intro\n```sh\nkubectl get pods\nmini-kcm explain x\n```\n<!-- check: [[ 1 -eq 1 ]] -->\n\
               ```text\nnot run\n```\n";
    assert_eq!(
        pieces(doc),
        [
            Piece::Commands("kubectl get pods\nmini-kcm explain x\n".into()),
            Piece::Check("[[ 1 -eq 1 ]]".into()),
        ]
    );
    assert!(script(&pieces(doc)).contains("tour_check '[[ 1 -eq 1 ]]'"));
}

#[test]
fn the_tour_in_the_docs_runs_and_its_checks_hold() {
    // Both parts, in order: part 2 goes on from where part 1 left the plane.
    let doc = ["docs/tour.md", "docs/tour-lifecycle.md"]
        .map(|part| std::fs::read_to_string(repo_path(part)).unwrap())
        .join("\n");
    let pieces = pieces(&doc);
    assert!(
        pieces
            .iter()
            .filter(|p| matches!(p, Piece::Check(_)))
            .count()
            >= 60,
        "the tour lost its checks"
    );
    let binary = mini_kcm_binary();
    let work = std::env::temp_dir().join(format!("mini-kcm-tour-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(work.join("bin")).unwrap();
    std::os::unix::fs::symlink(&binary, work.join("bin/mini-kcm")).unwrap();

    // The plane's binaries (kubectl among them), built once and cached.
    let built = Command::new(&binary).arg("build-plane").output().unwrap();
    assert!(built.status.success(), "build-plane: {built:?}");
    let bin_dir = String::from_utf8(built.stdout).unwrap();
    let bin_dir = bin_dir.lines().last().unwrap().trim().to_string();

    let kubeconfig = work.join("kubeconfig");
    let mut child = Command::new(&binary)
        .args(["up", "--nodes", "3", "--state-dir"])
        .arg(work.join("plane"))
        .arg("--kubeconfig-out")
        .arg(&kubeconfig)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let up = ProcessGroup(child);
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
        "mini-kcm up did not start:\n{printed}"
    );
    // `up` states its manager's address; `mini-kcm explain` finds it on its own when `up` runs with
    // its default state directory, here it is told (the test keeps its plane in its own folder).
    let manager_addr = printed
        .split("metrics on http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_else(|| panic!("no manager address in:\n{printed}"))
        .to_string();
    // Keep draining `up`'s output so it never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});

    let path = format!(
        "{}:{bin_dir}:{}",
        work.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let output = Command::new("bash")
        .arg("-c")
        .arg(script(&pieces))
        .env("PATH", path)
        .env("KUBECONFIG", &kubeconfig)
        .env("MINI_KCM_MANAGER_ADDR", &manager_addr)
        .current_dir(&work)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    assert!(
        output.status.success() && stdout.contains("TOUR COMPLETE"),
        "the tour failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}\n--- up\n{printed}",
        output.status
    );
    drop(up);
    let _ = std::fs::remove_dir_all(&work);
}
