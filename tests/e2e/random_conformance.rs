//! Random differential conformance (`mini-kcm conformance --random`, crates/conformance/src/random): the
//! same seeded user operations on a plane with kube-controller-manager's workload controllers and one
//! with mini-kcm's, every settled state compared. CI runs a small fixed set (docs/conformance.md has a
//! larger run); any divergence fails the test, with the commands and both states in the target folder.

/// Seeds and length CI runs: two sequences of 15 operations, a few minutes for both planes.
const SEEDS: usize = 2;
const FIRST_SEED: u64 = 1;
const OPS: usize = 15;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_operations_leave_both_planes_in_the_same_state() {
    let out = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("random-conformance");
    let diverged =
        mini_kcm_conformance::random_sequences(SEEDS, FIRST_SEED, OPS, &out, true, |line| {
            eprintln!("random conformance: {line}")
        })
        .await
        .expect("running the random sequences");
    assert_eq!(
        diverged,
        0,
        "the planes diverged (commands, differences and both states in {})",
        out.display()
    );
}
