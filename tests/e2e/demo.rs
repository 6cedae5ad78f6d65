//! The demo, end to end on the local plane: `deploy/demo/tour.sh` run as a user runs it
//! (`DEMO_ENV=local`, no pauses). The script starts its own plane (`mini-kcm up`), kube-controller-manager's
//! workload controllers and mini-kcm as processes, and fails on the first step whose condition is not
//! reached (a wait that times out, a ReplicaSet or pod that should not have been replaced). This test
//! builds the mini-kcm binary, runs the tour and checks that it completed every step, that the decisions
//! it shows came from mini-kcm, and that it stopped everything it started.

// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use mini_kcm_e2e::{mini_kcm_binary, repo_path};

/// The tour takes about 25 s here; each of its waits has its own bound (`DEMO_TIMEOUT`), this one bounds
/// the whole run (a first run also builds the control plane binaries, waiting for the shared build lock).
const TOUR_TIMEOUT: Duration = Duration::from_secs(20 * 60);
const STEPS: usize = 13;

#[test]
fn the_tour_runs_end_to_end_on_the_local_plane() {
    let binary = mini_kcm_binary();
    let work = std::env::temp_dir().join(format!("mini-kcm-demo-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);

    // stderr joins stdout, so the output reads in order; the script leads its own process group, so a
    // timeout can stop it with everything it started.
    let mut child = Command::new("bash")
        .arg("-c")
        .arg("exec bash \"$0\" 2>&1")
        .arg(repo_path("deploy/demo/tour.sh"))
        .env("DEMO_ENV", "local")
        .env("DEMO_PAUSE", "0")
        .env("DEMO_TIMEOUT", "90")
        .env("DEMO_WORK", &work)
        .env("MINI_KCM", &binary)
        .env_remove("KUBECONFIG")
        .env_remove("KUBECTL")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (lines_tx, lines) = mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });

    let started = Instant::now();
    let mut output = String::new();
    let mut timed_out = false;
    loop {
        let left = TOUR_TIMEOUT.saturating_sub(started.elapsed());
        match lines.recv_timeout(left) {
            Ok(line) => {
                println!("{line}");
                output.push_str(&line);
                output.push('\n');
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                timed_out = true;
                // SIGTERM to the group: the script's exit trap stops the plane and the controllers.
                let _ = Command::new("kill")
                    .args(["-TERM", &format!("-{}", child.id())])
                    .status();
                break;
            }
        }
    }
    let status = child.wait().unwrap();
    // Whatever the script printed while stopping after a timeout.
    for line in lines.try_iter() {
        println!("{line}");
        output.push_str(&line);
        output.push('\n');
    }
    reader.join().unwrap();
    let seconds = started.elapsed().as_secs_f64();
    assert!(
        !timed_out,
        "the tour did not finish within {TOUR_TIMEOUT:?}; its files are in {}",
        work.display()
    );
    assert!(
        status.success(),
        "the tour failed ({status}) after {seconds:.1}s; its logs are in {}",
        work.display()
    );

    // Every step ran to its end ("ok"), and the tour said it was complete.
    for step in 1..=STEPS {
        assert!(
            output.contains(&format!("\n== {step}. ")),
            "step {step} never started"
        );
    }
    assert_eq!(
        output.matches("\n   ok\n").count(),
        STEPS,
        "not every step finished"
    );
    assert!(output.contains(&format!("mini-kcm tour complete ({STEPS} steps")));

    // The decisions it shows are mini-kcm's own log lines and events, for each family.
    assert!(output.contains("mini-kcm said:"));
    for decision in [
        "too few replicas: 0 active of 3 desired",
        "creating 3 pod(s) in slow-start batches 1, 2",
        "scaling event: spec.replicas is now 5",
        "creating daemon pods on 1 node(s) that should run one and have none: kwok-node-4",
    ] {
        assert!(
            output.lines().any(|l| l.contains(decision)),
            "the tour did not show mini-kcm deciding {decision:?}"
        );
    }
    assert!(
        output
            .lines()
            .any(|l| l.contains("mini-kcm-apps") && l.contains("Scaled up replica set shop-")),
        "no event of mini-kcm scaling the handed-over apps/v1 Deployment"
    );

    // It stopped what it started: the plane's `up` reported a clean stop.
    let up_log = std::fs::read_to_string(work.join("up.log")).unwrap();
    assert!(
        up_log.contains("mini-kcm: stopped"),
        "the plane did not stop cleanly:\n{up_log}"
    );
    println!("the tour took {seconds:.1}s");
    let _ = std::fs::remove_dir_all(&work);
}

/// Every script of the tour parses, the kind environment's included (tests/e2e/kind.rs runs that one on a
/// real kind cluster).
#[test]
fn every_script_of_the_tour_parses() {
    let mut scripts = vec![repo_path("deploy/demo/tour.sh")];
    for entry in std::fs::read_dir(repo_path("deploy/demo/env")).unwrap() {
        scripts.push(entry.unwrap().path());
    }
    assert!(
        scripts.len() >= 3,
        "expected tour.sh, env/local.sh and env/kind.sh"
    );
    for script in scripts {
        let output = Command::new("bash")
            .arg("-n")
            .arg(&script)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{} does not parse: {}",
            script.display(),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}
