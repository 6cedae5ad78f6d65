//! Faults on a plane of its own: the API server frozen mid-rollout (SIGSTOP, then SIGCONT), for both
//! families. Every state the ReplicaSet watch delivers is checked against what upstream guarantees:
//! the ReplicaSets' `spec.replicas` sum never exceeds `replicas + maxSurge`, and a template never has
//! two ReplicaSets. After the fault, the rollout must complete with nobody touching anything.
//!
//! The plane is this binary's alone (the faults would break other tests' requests), and one fault runs
//! at a time. The freeze lasts 30 s: long enough for every client to see its requests hang and its
//! watches stall, shorter than kube-controller-manager's node-monitor grace period (a longer freeze makes
//! the node-lifecycle controller mark the kwok nodes NotReady afterwards, a plane effect, not ours).

// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::reflector::store;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use mini_kcm_e2e::{
    TestManager, check_every_state, deployment_of, deployments, for_both_families, replica_sets,
    rolling_update, wait_deployment_complete,
};
use mini_kcm_manager::Kinds;
use mini_kcm_runtime::kinds::{ApiFamily, WorkloadKind};
use mini_kcm_testkit::{PlaneConfig, PlaneInfo, TestNamespace, shared_plane};
use serde_json::json;

const FREEZE: Duration = Duration::from_secs(30);
const HASH: &str = "pod-template-hash";

/// One fault at a time: a frozen API server would fail the other test's requests.
static ONE_FAULT_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn plane() -> &'static PlaneInfo {
    shared_plane(PlaneConfig::default())
}

for_both_families!(a_frozen_api_server_mid_rollout_converges_within_the_bounds);

async fn a_frozen_api_server_mid_rollout_converges_within_the_bounds(family: ApiFamily) {
    let _one = ONE_FAULT_AT_A_TIME.lock().await;
    let ns = TestNamespace::create(plane(), &format!("fault-freeze-{}", family.label())).await;
    let kinds = match family {
        ApiFamily::Apps => Kinds::Apps,
        ApiFamily::Copies => Kinds::Copies,
    };
    let manager = TestManager::start(&ns, kinds).await;
    let (replicas, surge, unavailable) = (10, 3, 2);
    let mut d = deployment_of("web", replicas, family);
    rolling_update(&mut d, surge, unavailable);
    deployments(&ns, family)
        .create(&PostParams::default(), &d)
        .await
        .unwrap();
    wait_deployment_complete(&ns, family, "web", replicas).await;

    // From now on, on every state the ReplicaSet watch delivers: the bound on spec.replicas, and one
    // ReplicaSet per template.
    let violations = Arc::new(Mutex::new(Vec::<String>::new()));
    let checks = Arc::new(Mutex::new(0_u64));
    let writer = store::Writer::new(WorkloadKind::ReplicaSet.api_resource(family));
    let reader = writer.as_reader();
    let stream = reflector(
        writer,
        watcher(replica_sets(&ns, family), watcher::Config::default()),
    )
    .default_backoff();
    let (seen, counted) = (violations.clone(), checks.clone());
    let watch = tokio::spawn(check_every_state(stream, move || {
        let rss = reader.state();
        *counted.lock().unwrap() += 1;
        let total: i32 = rss.iter().map(|rs| rs.spec.replicas.unwrap_or(0)).sum();
        if total > replicas + surge {
            seen.lock()
                .unwrap()
                .push(format!("Σ spec.replicas {total} > {replicas} + {surge}"));
        }
        let mut by_hash: BTreeMap<String, usize> = BTreeMap::new();
        for rs in &rss {
            let hash = rs
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(HASH))
                .cloned()
                .unwrap_or_default();
            *by_hash.entry(hash).or_default() += 1;
        }
        if let Some((hash, n)) = by_hash.iter().find(|(_, n)| **n > 1) {
            seen.lock()
                .unwrap()
                .push(format!("{n} ReplicaSets with template hash {hash:?}"));
        }
    }));

    deployments(&ns, family)
        .patch(
            "web",
            &PatchParams::default(),
            // New pods take 3 s to become Ready, so the rollout is surely under way at the freeze.
            &Patch::Merge(json!({"spec": {"template": {
                "metadata": {"annotations": {"minikcm.dev/ready-after": "3s"}},
                "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9"}]}}}})),
        )
        .await
        .unwrap();
    // Freeze as soon as the rollout is under way: the new ReplicaSet exists.
    ns.wait_for_with(
        &deployments(&ns, family),
        WorkloadKind::Deployment.api_resource(family),
        "web",
        "the rollout started (a new ReplicaSet)",
        mini_kcm_e2e::TIMEOUT,
        |d| {
            d.is_some_and(|d| {
                d.status
                    .as_ref()
                    .is_some_and(|s| s.observed_generation == d.metadata.generation)
            })
        },
    )
    .await
    .unwrap();
    let before = deployments(&ns, family).get("web").await.unwrap();
    let status = before.status.unwrap_or_default();
    assert!(
        status.updated_replicas.unwrap_or(0) < replicas
            || status.available_replicas.unwrap_or(0) < replicas,
        "the rollout was over before the freeze: {status:?}"
    );
    let apiserver = plane().pids["kube-apiserver"];
    let pid = libc::pid_t::try_from(apiserver).unwrap();
    // SAFETY: signals to a process of our own plane.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
    // The fault's duration, not a wait for a condition.
    tokio::time::sleep(FREEZE).await;
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGCONT) }, 0);
    let resumed = Instant::now();

    wait_deployment_complete(&ns, family, "web", replicas).await;
    let converged = resumed.elapsed();
    watch.abort();
    let violations = violations.lock().unwrap().clone();
    let checks = *checks.lock().unwrap();
    println!(
        "{}: rollout converged {:.1}s after a {}s freeze; {checks} states checked",
        family.label(),
        converged.as_secs_f64(),
        FREEZE.as_secs()
    );
    assert!(checks > 0, "the invariant watch saw no state");
    assert!(
        violations.is_empty(),
        "bounds broken around the freeze: {violations:?}"
    );
    manager.stop().await;
}
