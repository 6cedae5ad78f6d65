//! Kubernetes' own e2e specs for the workload controllers (`mini-kcm conformance`, crates/conformance) on a
//! plane of their own whose Deployment, ReplicaSet and DaemonSet controllers are mini-kcm's.
//!
//! Fails when a spec fails that is not an expected failure (each of those fails with
//! kube-controller-manager's controllers too, so this is "passes upstream, fails with mini-kcm"), when an
//! expected failure passes (the list must stay true), or when fewer specs ran than the sets hold. The
//! sets run here are those that fit CI's time budget (docs/conformance.md); the table is printed either
//! way, and reports and logs stay in the target directory.

use mini_kcm_conformance::{E2eBinary, Outcome, Side, SpecSet, run_side, specs, table};

/// The sets CI runs (all of them: `mini-kcm conformance`).
const CI_SETS: &[SpecSet] = &[SpecSet::Apps, SpecSet::Disruption, SpecSet::Widened];
/// e2e processes at once; the specs mostly wait, so more processes than cores is fine.
const PARALLEL: usize = 4;
/// Specs the CI sets select (31 + 19 + 14); fewer means the focus or the binary broke. Against the
/// specs of 1.35 (`deploy/version-matrix.sh`), 61: the widened set's three MutatingAdmissionPolicy specs
/// are not `[Conformance]` there, so their exact names match nothing.
fn expected_specs() -> usize {
    let minor = mini_kcm_local_plane::VersionSet::selected()
        .ok()
        .and_then(|v| v.kubernetes_minor());
    match minor {
        Some(minor) if minor < 36 => 61,
        _ => 64,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_specs_pass_with_mini_kcm_controllers() {
    let binary = E2eBinary::ensure().await.expect("building the e2e binary");
    let out = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("conformance");
    let results = run_side(
        Side::Mini,
        &binary,
        CI_SETS,
        PARALLEL,
        3,
        out.clone(),
        |line| eprintln!("conformance: {line}"),
    )
    .await
    .expect("running the upstream specs");
    eprintln!("{}", table(std::slice::from_ref(&results)));

    let failures: Vec<String> = results
        .unexpected_failures()
        .iter()
        .map(|r| match &r.outcome {
            Outcome::Failed(message) => format!("{}: {message}", r.spec),
            other => format!("{}: {}", r.spec, other.short()),
        })
        .collect();
    assert!(
        failures.is_empty(),
        "upstream specs failed with mini-kcm's controllers (logs and reports in {}):\n{}",
        out.display(),
        failures.join("\n")
    );
    let passes: Vec<&str> = results
        .unexpected_passes()
        .iter()
        .map(|r| r.spec.as_str())
        .collect();
    assert!(
        passes.is_empty(),
        "expected failures passed; take them off specs::EXPECTED_FAILURES: {passes:?}"
    );
    let expected = expected_specs();
    assert!(
        results.results.len() >= expected,
        "only {} specs ran, expected {expected}",
        results.results.len()
    );
    let passed = results
        .results
        .iter()
        .filter(|r| r.outcome == Outcome::Passed)
        .count();
    let skipped = results
        .results
        .iter()
        .filter(|r| matches!(r.outcome, Outcome::Skipped(_)))
        .count();
    eprintln!(
        "{passed} passed, {} expected failures, {skipped} skipped by the specs themselves",
        specs::EXPECTED_FAILURES.len()
    );
}
