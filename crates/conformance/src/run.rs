//! Running the e2e binary against one plane: list what the focus selects (a dry run), run the specs that
//! may share the plane in several processes at once and the `[Serial]` ones alone afterwards, then read
//! every process's JSON report.
//!
//! Ginkgo's own parallel mode needs its CLI as a coordinator; separate processes, each focused on its own
//! share of the spec names, give the same speed-up with only the test binary.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Instant;

use crate::report::{Outcome, Reported, SpecResult, read_report};
use crate::specs::{SKIP, SpecSet, exact_spec_regex};
use crate::{ConformanceError, E2eBinary};

/// Ginkgo's seed: the same order of specs in every run.
pub(crate) const SEED: u64 = 1;

/// Where one run (one side) puts its reports and logs.
pub(crate) struct RunPlan<'a> {
    pub binary: &'a E2eBinary,
    pub kubeconfig: &'a Path,
    pub sets: &'a [SpecSet],
    /// Processes running specs at once (the `[Serial]` specs always run alone).
    pub parallel: usize,
    pub out: PathBuf,
}

/// The specs of `sets` the binary would run, each with its set, in report order.
pub(crate) async fn list(plan: &RunPlan<'_>) -> Result<Vec<(SpecSet, String)>, ConformanceError> {
    let mut specs = Vec::new();
    for &set in plan.sets {
        let report = plan.out.join(format!("dry-run-{}.json", set.name()));
        let args = vec!["--ginkgo.dry-run".to_string()];
        run_process(plan, &set.focus(), &report, &args, "dry run").await?;
        let listed = read_report(&report).map_err(|detail| ConformanceError::NoReport {
            path: report.clone(),
            status: "dry run".into(),
            log: log_path(&report),
            detail,
        })?;
        for reported in listed.into_iter().filter(|r| r.selected) {
            if !specs.iter().any(|(_, s)| s == &reported.spec) {
                specs.push((set, reported.spec));
            }
        }
    }
    Ok(specs)
}

/// Runs every listed spec and returns one result per spec (a spec missing from the reports is `NotRun`).
pub(crate) async fn run(
    plan: &RunPlan<'_>,
    specs: &[(SpecSet, String)],
    progress: impl Fn(&str),
) -> Result<Vec<SpecResult>, ConformanceError> {
    let (serial, shared): (Vec<_>, Vec<_>) = specs
        .iter()
        .map(|(_, spec)| spec.clone())
        .partition(|spec| spec.contains("[Serial]"));
    let shards = plan.parallel.max(1).min(shared.len().max(1));
    let mut groups: Vec<Vec<String>> = vec![Vec::new(); shards];
    for (i, spec) in shared.into_iter().enumerate() {
        groups[i % shards].push(spec);
    }
    groups.retain(|g| !g.is_empty());

    let mut reported: Vec<Reported> = Vec::new();
    let started = Instant::now();
    progress(&format!(
        "{} specs in {} processes at once, then {} [Serial] specs alone",
        groups.iter().map(Vec::len).sum::<usize>(),
        groups.len(),
        serial.len()
    ));
    let shared_runs = groups.iter().enumerate().map(|(i, group)| {
        let report = plan.out.join(format!("shard-{}.json", i + 1));
        async move {
            let outcome = run_process(plan, &exact_focus(group), &report, &[], "specs").await;
            (report, outcome)
        }
    });
    let mut finished = Vec::new();
    for (report, outcome) in futures::future::join_all(shared_runs).await {
        outcome?;
        finished.push(report);
    }
    progress(&format!(
        "shared specs done after {:.0}s",
        started.elapsed().as_secs_f64()
    ));
    if !serial.is_empty() {
        let report = plan.out.join("serial.json");
        run_process(plan, &exact_focus(&serial), &report, &[], "serial specs").await?;
        finished.push(report);
        progress(&format!(
            "serial specs done after {:.0}s",
            started.elapsed().as_secs_f64()
        ));
    }
    for report in finished {
        // A process killed half-way leaves no report: its specs count as not run.
        if let Ok(mut specs) = read_report(&report) {
            reported.append(&mut specs);
        }
    }

    Ok(merge(
        specs,
        &reported,
        plan.sets.first().copied().unwrap_or(SpecSet::Apps),
    ))
}

/// One result per listed spec from the reports of every process, plus the failed suite nodes (they
/// explain a spec that did not run), counted in `suite_set`.
fn merge(
    specs: &[(SpecSet, String)],
    reported: &[Reported],
    suite_set: SpecSet,
) -> Vec<SpecResult> {
    let mut results = Vec::new();
    for (set, spec) in specs {
        let entries: Vec<&Reported> = reported
            .iter()
            .filter(|r| r.is_spec && &r.spec == spec)
            .collect();
        // Every process reports every spec of the binary; those outside its focus as skipped without a
        // message. The one that ran it has the outcome (a spec that skips itself says why).
        let ran = entries.iter().find(|r| r.selected).or_else(|| {
            entries
                .iter()
                .find(|r| matches!(&r.outcome, Outcome::Skipped(m) if !m.is_empty()))
        });
        results.push(SpecResult {
            set: *set,
            spec: spec.clone(),
            outcome: ran.map_or(Outcome::NotRun, |r| r.outcome.clone()),
            seconds: ran.map_or(0.0, |r| r.seconds),
        });
    }
    // Suite set-up failures are reported as pseudo-specs: keep them, they explain every "not run".
    for r in reported.iter().filter(|r| !r.is_spec) {
        if let Outcome::Failed(_) = r.outcome {
            results.push(SpecResult {
                set: suite_set,
                spec: r.spec.clone(),
                outcome: r.outcome.clone(),
                seconds: r.seconds,
            });
        }
    }
    results
}

fn exact_focus(specs: &[String]) -> String {
    specs
        .iter()
        .map(|s| exact_spec_regex(s))
        .collect::<Vec<_>>()
        .join("|")
}

fn log_path(report: &Path) -> PathBuf {
    report.with_extension("log")
}

/// Runs the e2e binary once with `focus`; its output goes to the `.log` beside `report`. A failing spec
/// makes the binary exit non-zero, so only a missing report is an error (the caller reads the report).
async fn run_process(
    plan: &RunPlan<'_>,
    focus: &str,
    report: &Path,
    extra: &[String],
    what: &str,
) -> Result<(), ConformanceError> {
    let log = log_path(report);
    let log_file = std::fs::File::create(&log)
        .map_err(|e| ConformanceError::io(format!("creating {}", log.display()), e))?;
    let err_file = log_file
        .try_clone()
        .map_err(|e| ConformanceError::io(format!("opening {}", log.display()), e))?;
    let report_dir = report.with_extension("artifacts");
    std::fs::create_dir_all(&report_dir)
        .map_err(|e| ConformanceError::io(format!("creating {}", report_dir.display()), e))?;
    let _ = std::fs::remove_file(report);
    let status = tokio::process::Command::new(&plan.binary.path)
        .arg(format!("--kubeconfig={}", plan.kubeconfig.display()))
        .arg(format!(
            "--kubectl-path={}",
            plan.binary.plane.path("kubectl").display()
        ))
        .arg("--provider=skeleton")
        .arg(format!("--report-dir={}", report_dir.display()))
        .arg(format!("--ginkgo.focus={focus}"))
        .arg(format!("--ginkgo.skip={SKIP}"))
        .arg(format!("--ginkgo.seed={SEED}"))
        .arg(format!("--ginkgo.json-report={}", report.display()))
        .arg("--ginkgo.no-color")
        .arg("--ginkgo.timeout=2h")
        .arg("--ginkgo.v")
        // The Go test runner's own limit (10 minutes by default) would kill a long run mid-spec.
        .arg("-test.timeout=0")
        .args(extra)
        .current_dir(&report_dir)
        .stdin(Stdio::null())
        .stdout(log_file)
        .stderr(err_file)
        .kill_on_drop(true)
        .status()
        .await
        .map_err(|e| ConformanceError::io(format!("running {}", plan.binary.path.display()), e))?;
    if !report.is_file() {
        return Err(ConformanceError::NoReport {
            path: report.to_path_buf(),
            status: format!("{what}: {status}"),
            log,
            detail: "the report file is missing".into(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reported(spec: &str, outcome: Outcome, selected: bool, is_spec: bool) -> Reported {
        Reported {
            spec: spec.into(),
            outcome,
            seconds: 1.0,
            selected,
            is_spec,
        }
    }

    #[test]
    fn merge_takes_the_process_that_ran_each_spec_and_keeps_failed_suite_nodes() {
        let specs = vec![
            (SpecSet::Apps, "[sig-apps] a [Conformance]".to_string()),
            (SpecSet::Apps, "[sig-apps] b".to_string()),
            (SpecSet::Disruption, "[sig-apps] c".to_string()),
            (SpecSet::Disruption, "[sig-apps] d".to_string()),
        ];
        let failed = Outcome::Failed("failed: x".into());
        let reports = vec![
            // Process 1 ran a (failed) and skipped the others by focus.
            reported("[sig-apps] a [Conformance]", failed.clone(), true, true),
            reported("[sig-apps] b", Outcome::Skipped(String::new()), false, true),
            reported("[sig-apps] c", Outcome::Skipped(String::new()), false, true),
            // Process 2 ran b, and c skipped itself.
            reported(
                "[sig-apps] a [Conformance]",
                Outcome::Skipped(String::new()),
                false,
                true,
            ),
            reported("[sig-apps] b", Outcome::Passed, true, true),
            reported(
                "[sig-apps] c",
                Outcome::Skipped("needs gce".into()),
                false,
                true,
            ),
            // d is in no report; a suite node failed.
            reported("[SynchronizedBeforeSuite]", failed.clone(), true, false),
        ];
        let results = merge(&specs, &reports, SpecSet::Apps);
        let outcomes: Vec<(&str, &Outcome)> = results
            .iter()
            .map(|r| (r.spec.as_str(), &r.outcome))
            .collect();
        assert_eq!(
            outcomes,
            vec![
                ("[sig-apps] a [Conformance]", &failed),
                ("[sig-apps] b", &Outcome::Passed),
                ("[sig-apps] c", &Outcome::Skipped("needs gce".into())),
                ("[sig-apps] d", &Outcome::NotRun),
                ("[SynchronizedBeforeSuite]", &failed),
            ]
        );
    }
}
