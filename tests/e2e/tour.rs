//! The tour stays true, typed as a reader types it (the runner: `tests/e2e/doc_runner.rs`).
//!
//! `docs/tour.md` and its part 2, `docs/tour-lifecycle.md`: this test starts `mini-kcm up` as a user
//! would, then runs every `sh` block of the tour in order in one bash session (`set -euo pipefail`), and
//! after each block waits for the conditions of the `<!-- check: ... -->` comments that follow it (each a
//! bash condition, retried until it holds or 90 s pass). A command that fails, or a check that never
//! holds, fails the test with the tour's output so far.
//!
//! Part 3, `docs/tour-breaking.md`: each section starts the plane twice in terminal 1 (`# terminal 1`
//! blocks: `cargo run -p mini-kcm -- up --without MECHANISM …`, then with the mechanism on), and the
//! test types the section's terminal-2 blocks against each, with the checks of that variant
//! (`check without:`, `check with:`). By default only the expectations section, the chapter's headline
//! (two planes); `MINI_KCM_TOUR_BREAKING=all` runs every section (eight), any other value the sections
//! whose heading contains it.
//!
//! The session is a user's shell at the root of the repository: it gets no `PATH`, `KUBECONFIG` or
//! manager address from the test. The tour's own set-up line (`eval "$(cargo run -q -p mini-kcm -- env)"`,
//! [`SETUP_LINE`]) puts `mini-kcm` and `kubectl` on `PATH` and sets `KUBECONFIG`, with the `--state-dir`
//! the tour documents for an `up --state-dir DIR`: the test keeps its plane in a folder of its own, as
//! the first running plane slot may be another test's.

// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::sync::Mutex;
use std::time::{Duration, Instant};

use mini_kcm_e2e::doc_runner::{
    Piece, Run, Variant, pieces, runs, script, start_up, tail, type_in_terminal_2, with_setup_line,
};
use mini_kcm_e2e::{SETUP_LINE, mini_kcm_binary, repo_path};

/// How long one check may take to hold.
const CHECK_TIMEOUT: Duration = Duration::from_secs(90);

/// The section of docs/tour-breaking.md run by default (the start of its heading).
const REPRESENTATIVE: &str = "Expectations";

/// The tests of this binary start planes of their own: one at a time, so the timing-sensitive steps of
/// the breaking chapter (a delete within the watch delay) do not share two cores with the tour.
static ONE_PLANE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// A fresh folder for one test's planes and output.
fn work_dir(name: &str) -> std::path::PathBuf {
    let work = std::env::temp_dir().join(format!("mini-kcm-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    work
}

#[test]
fn the_pieces_of_a_markdown_tour_are_found_in_order() {
    let doc = "intro\n```sh\nkubectl get pods\nmini-kcm explain x\n```\n<!-- check: [[ 1 -eq 1 ]] -->\n\
               ```text\nnot run\n```\n";
    let found = pieces(doc);
    assert_eq!(
        found,
        [
            Piece::Commands("kubectl get pods\nmini-kcm explain x\n".into()),
            Piece::Check {
                condition: "[[ 1 -eq 1 ]]".into(),
                only: None
            },
        ]
    );
    let script = script("tour", &found, CHECK_TIMEOUT, None);
    assert!(script.contains("tour_check '[[ 1 -eq 1 ]]'"));
    assert!(script.ends_with("echo TOUR COMPLETE\n"));
}

#[test]
fn a_breaking_section_is_two_runs_each_with_its_own_checks() {
    let doc = "## Intro\n```text\ncargo run -p mini-kcm -- up --without X\n```\n\
               ## Slow start\n```sh\n# terminal 1\ncargo run -p mini-kcm -- up --without slow-start\n```\n\
               ```sh\nkubectl get rs\n```\n<!-- check: both -->\n<!-- check without: off -->\n\
               <!-- check with: on -->\n```sh\n# terminal 1 (Ctrl-C first)\nmini-kcm up\n```\n";
    let found = runs(&pieces(doc));
    let check = |condition: &str, only| Piece::Check {
        condition: condition.into(),
        only,
    };
    assert_eq!(
        found,
        [
            Run {
                section: "Slow start".into(),
                variant: Variant::Without,
                up: vec!["up".into(), "--without".into(), "slow-start".into()],
                pieces: vec![
                    Piece::Commands("kubectl get rs\n".into()),
                    check("both", None),
                    check("off", Some(Variant::Without)),
                ],
            },
            Run {
                section: "Slow start".into(),
                variant: Variant::With,
                up: vec!["up".into()],
                pieces: vec![
                    Piece::Commands("kubectl get rs\n".into()),
                    check("both", None),
                    check("on", Some(Variant::With)),
                ],
            },
        ]
    );
    // A script holds only its variant's checks.
    let without = script(
        "breaking",
        &found[0].pieces,
        CHECK_TIMEOUT,
        Some(Variant::Without),
    );
    assert!(without.contains("breaking_check 'off'") && !without.contains("'on'"));
}

#[test]
#[should_panic(expected = "exactly one `mini-kcm up` command")]
fn a_terminal_1_block_holds_one_up_command() {
    pieces("```sh\n# terminal 1\nmini-kcm up\nkubectl get pods\n```\n");
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
            .filter(|p| matches!(p, Piece::Check { only: None, .. }))
            .count()
            >= 100,
        "the tour lost its checks"
    );
    assert!(
        pieces
            .iter()
            .all(|p| !matches!(p, Piece::Up(_) | Piece::Check { only: Some(_), .. })),
        "the tour runs one plane, started by the test: no `# terminal 1` blocks or variant checks"
    );
    let _one = ONE_PLANE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let binary = mini_kcm_binary();
    let work = work_dir("tour-test");
    let state_dir = work.join("plane");

    // The set-up line, in each part, is run with the plane's --state-dir.
    let (pieces, setups) = with_setup_line(&pieces, &state_dir);
    assert_eq!(
        setups, 2,
        "each part of the tour starts with the set-up line `{SETUP_LINE}`"
    );

    // `cargo run -p mini-kcm -- up` in its own terminal: the binary cargo built, same arguments but the
    // state directory.
    let up = start_up(
        &binary,
        &["up".into(), "--nodes".into(), "3".into()],
        &state_dir,
        &work.join("up.log"),
    );

    // The second terminal: a user's shell at the root of the clone.
    let typed = type_in_terminal_2(&script("tour", &pieces, CHECK_TIMEOUT, None), &work);
    println!("{}", typed.stdout);
    println!("the tour took {:.0} s", typed.took.as_secs_f64());
    assert!(
        typed.success && typed.stdout.contains("TOUR COMPLETE") && !typed.left_running,
        "the tour failed{}:\n--- stdout\n{}\n--- stderr\n{}\n--- up\n{}",
        if typed.left_running {
            " (a background job was left running)"
        } else {
            ""
        },
        typed.stdout,
        typed.stderr,
        up.printed
    );
    drop(up);
    let _ = std::fs::remove_dir_all(&work);
}

#[test]
fn the_breaking_chapter_runs_and_its_checks_hold() {
    let doc = std::fs::read_to_string(repo_path("docs/tour-breaking.md")).unwrap();
    let all = runs(&pieces(&doc));
    let sections: std::collections::BTreeSet<&str> =
        all.iter().map(|r| r.section.as_str()).collect();
    assert_eq!(sections.len(), 4, "four mechanisms, one section each");
    let selection = std::env::var("MINI_KCM_TOUR_BREAKING").unwrap_or_default();
    let chosen: Vec<&Run> = all
        .iter()
        .filter(|run| match selection.as_str() {
            "" => run.section.starts_with(REPRESENTATIVE),
            "all" => true,
            part => run.section.to_lowercase().contains(&part.to_lowercase()),
        })
        .collect();
    assert!(
        !chosen.is_empty(),
        "MINI_KCM_TOUR_BREAKING={selection} names no section of {sections:?}"
    );
    let _one = ONE_PLANE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let binary = mini_kcm_binary();
    let work = work_dir("tour-breaking-test");
    let started = Instant::now();
    let mut took = Vec::new();
    let mut stopping = Vec::new();
    for (i, run) in chosen.iter().enumerate() {
        let variant = match run.variant {
            Variant::Without => "without its mechanism",
            Variant::With => "with it",
        };
        println!(
            "=== {}, {variant}: mini-kcm {}",
            run.section,
            run.up.join(" ")
        );
        // A plane of its own each time, as a reader's Ctrl-C and new `up` give.
        let state_dir = work.join(format!("plane-{i}"));
        let (pieces, setups) = with_setup_line(&run.pieces, &state_dir);
        assert!(
            setups >= 1,
            "section {:?}: terminal 2 starts with the set-up line `{SETUP_LINE}`",
            run.section
        );
        let run_started = Instant::now();
        let up = start_up(
            &binary,
            &run.up,
            &state_dir,
            &work.join(format!("up-{i}.log")),
        );
        let started_up = run_started.elapsed();
        let typed = type_in_terminal_2(
            &script("breaking", &pieces, CHECK_TIMEOUT, Some(run.variant)),
            &work,
        );
        println!("{}", typed.stdout);
        assert!(
            typed.success && typed.stdout.contains("BREAKING COMPLETE") && !typed.left_running,
            "{}, {variant}: failed{}:\n--- stdout\n{}\n--- stderr\n{}\n--- up\n{}\n--- up's log (last lines)\n{}",
            run.section,
            if typed.left_running {
                " (a background job was left running)"
            } else {
                ""
            },
            typed.stdout,
            typed.stderr,
            up.printed,
            tail(&up.log, 30)
        );
        // `up` takes about 10 s to stop: the next run starts meanwhile (its plane has its own ports).
        stopping.push(std::thread::spawn(move || drop(up)));
        took.push(format!(
            "{}, {variant}: {:.0} s (plane start {:.0} s, terminal 2 {:.0} s)",
            run.section,
            run_started.elapsed().as_secs_f64(),
            started_up.as_secs_f64(),
            typed.took.as_secs_f64(),
        ));
    }
    for stop in stopping {
        stop.join().unwrap();
    }
    for line in &took {
        println!("{line}");
    }
    println!(
        "the breaking chapter ({} runs) took {:.0} s",
        chosen.len(),
        started.elapsed().as_secs_f64()
    );
    let _ = std::fs::remove_dir_all(&work);
}
