//! Faults on a plane of its own: the API server frozen mid-rollout (SIGSTOP, then SIGCONT). Every state the ReplicaSet watch delivers is checked against what upstream guarantees:
//! the ReplicaSets' `spec.replicas` sum never exceeds `replicas + maxSurge`, and a template never has
//! two ReplicaSets. After the fault, the rollout must complete with nobody touching anything.
//!
//! The plane is this binary's alone (the faults would break other tests' requests), and one fault runs
//! at a time. The short freeze lasts 30 s: long enough for every client to see its requests hang and its
//! watches stall, shorter than kube-controller-manager's node-monitor grace period; the long one (90 s,
//! 200 s with `MINI_KCM_FULL_FAULTS=1`) outlasts it, so nodes and pods go NotReady and come back.
//!
//! Also here: every watch forced to expire mid-scale (the plane's `expire_watches` hook), and five
//! times in a row with nothing else going on, each time every informer relisting within 5 s of the API
//! server answering again (the watch backoff, `mini_kcm_runtime::informers::WatchBackoff`), the manager
//! a scale made the moment the API server answers again after such an expiry, timed for mini-kcm and for
//! kube-controller-manager's replicaset controller side by side, the manager
//! killed repeatedly during concurrent rollouts (Deployments and a DaemonSet), and the plane's etcd,
//! kube-controller-manager, kube-scheduler and kwok restarted mid-rollout. Bad input (malformed and edge-case objects) is
//! in `bad_input.rs`.
//!
//! CI runs each fault once, on one family (`runs_on`), at a smaller size; `MINI_KCM_FULL_FAULTS=1` runs
//! every fault on both families at full size (docs/reliability.md).

// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::{DaemonSetSpec, DaemonSetUpdateStrategy, RollingUpdateDaemonSet};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::reflector::store;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use mini_kcm_e2e::denied_writes::{DeniedWrites, manager_config};
use mini_kcm_e2e::{
    TIMEOUT, TestManager, app_selector, check_every_state, controller_uid, daemon_sets,
    deployment_of, deployments, family_resource, for_both_families, has_available_replicas,
    is_active, pinned_node, pod_template, replica_set, replica_sets, rolling_update, selector,
    wait_deployment_complete, wait_generation_observed,
};
use mini_kcm_manager::{Kinds, ManagerOptions};
use mini_kcm_runtime::api::kinds::{
    ApiFamily, DaemonSetObject, DeploymentObject, ReplicaSetObject, WorkloadKind,
};
use mini_kcm_runtime::informers::{RetryBudget, WatchBackoff, with_watch_backoff};
use mini_kcm_testkit::{
    Component, PlaneConfig, PlaneInfo, TestNamespace, component_pid, expire_watches,
    restart_component, shared_plane,
};
use serde_json::json;

const FREEZE: Duration = Duration::from_secs(30);
const HASH: &str = "pod-template-hash";
/// The label a DaemonSet's pods carry their revision in.
const REVISION: &str = "controller-revision-hash";
const READY_AFTER: &str = "minikcm.dev/ready-after";
/// The image of every rollout's new template.
const NEW_IMAGE: &str = "registry.k8s.io/pause:3.9";
/// The DaemonSet rolled out during the manager's kills.
const DAEMON: &str = "agent";

/// One fault at a time: a frozen API server would fail the other test's requests.
static ONE_FAULT_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn plane() -> &'static PlaneInfo {
    shared_plane(PlaneConfig::default())
}

for_both_families!(
    a_frozen_api_server_mid_rollout_converges_within_the_bounds,
    a_forced_relist_mid_scale_creates_and_deletes_exactly,
    a_manager_killed_repeatedly_during_concurrent_rollouts_converges_within_the_bounds,
    plane_components_restarted_mid_rollout_converge_within_the_bounds,
    the_managers_writes_refused_mid_rollout_converge_within_the_bounds,
);

/// Set to `1` for the full fault runs: every fault on both families, at full size (200 s freeze, 20
/// rollouts and 10 kills of the manager, 200 s of refused writes). Without it (CI) each fault runs once,
/// at a smaller size, on the family `in_ci_on` names for it.
const FULL_FAULTS: &str = "MINI_KCM_FULL_FAULTS";

fn full_faults() -> bool {
    std::env::var(FULL_FAULTS).is_ok_and(|v| v == "1")
}

/// Whether a fault runs on `family` in this run: always with `MINI_KCM_FULL_FAULTS=1`, else only on the
/// family CI covers it on. The families share everything a fault exercises (informers, work queue,
/// writes, the controllers' syncs) and differ only in the API group they watch, so CI alternates them
/// across the faults: both families still face a freeze, a forced relist or restart, and lost writes.
fn runs_on(family: ApiFamily, in_ci_on: ApiFamily) -> bool {
    if full_faults() || family == in_ci_on {
        return true;
    }
    eprintln!(
        "not run here: CI runs this fault on {} only; {FULL_FAULTS}=1 runs it on both families",
        in_ci_on.label()
    );
    false
}

async fn a_frozen_api_server_mid_rollout_converges_within_the_bounds(family: ApiFamily) {
    // apps/v1 faces the longer freeze below in every run.
    if runs_on(family, ApiFamily::Copies) {
        frozen_mid_rollout(family, FREEZE).await;
    }
}

/// A freeze longer than kube-controller-manager's node-monitor grace period: afterwards its
/// node-lifecycle controller marks the kwok nodes NotReady and their pods not Ready, and the plane's
/// simulated kubelet (kwok's `kubelet-*` stages) brings them back as a kubelet's next status would. The
/// rollout must still complete within the bounds. CI: 90 s on apps/v1; `MINI_KCM_FULL_FAULTS=1`: 200 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_server_frozen_past_the_node_grace_period_converges_within_the_bounds() {
    let freeze = if full_faults() {
        Duration::from_secs(200)
    } else {
        Duration::from_secs(90)
    };
    frozen_mid_rollout(ApiFamily::Apps, freeze).await;
}

/// The API server SIGSTOPped for `freeze` mid-rollout, then SIGCONT; checked as the module says.
async fn frozen_mid_rollout(family: ApiFamily, freeze: Duration) {
    let _one = ONE_FAULT_AT_A_TIME.lock().await;
    let ns = TestNamespace::create(
        plane(),
        &format!("fault-freeze{}-{}", freeze.as_secs(), family.label()),
    )
    .await;
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

    // From now on, on every state: the bound on spec.replicas and one ReplicaSet per template. Not the
    // Ready pods: a frozen API server stops every node's heartbeat, and after it resumes the plane's
    // node-lifecycle controller may mark pods NotReady for a moment (seen after a 30 s freeze in CI: 7
    // Ready pods of 10 while the manager, as upstream's would, replaced the unready old ones); that is
    // the plane's doing, not the controllers'. The pods are still counted (the most at once).
    let apps = ["web".to_string()];
    let bounds = watch_rollout_bounds(&ns, family, &apps, replicas, surge, None).await;

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
    wait_generation_observed(&ns, family, "web", "the rollout started (a new ReplicaSet)").await;
    let before = deployments(&ns, family).get("web").await.unwrap();
    let status = before.status.unwrap_or_default();
    assert!(
        status.updated_replicas.unwrap_or(0) < replicas
            || status.available_replicas.unwrap_or(0) < replicas,
        "the rollout was over before the freeze: {status:?}"
    );
    // The current pid: another test of this binary may have restarted the API server.
    let apiserver = component_pid(Component::ApiServer).unwrap();
    let pid = libc::pid_t::try_from(apiserver).unwrap();
    // SAFETY: signals to a process of our own plane.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
    // The fault's duration, not a wait for a condition.
    tokio::time::sleep(freeze).await;
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGCONT) }, 0);
    let resumed = Instant::now();

    wait_deployment_complete(&ns, family, "web", replicas).await;
    let converged = resumed.elapsed();
    assert_no_orphans(&ns, &apps).await;
    let RolloutBoundsHeld {
        checks,
        pod_checks,
        peak,
    } = bounds.held("around the freeze");
    println!(
        "{}: rollout converged {:.1}s after a {}s freeze; {checks} ReplicaSet and {pod_checks} pod states \
         checked; at most {peak} pods at once (replicas + maxSurge = {})",
        family.label(),
        converged.as_secs_f64(),
        freeze.as_secs(),
        replicas + surge,
    );
    manager.stop().await;
}

/// Every watch expires (etcd compacted to its current revision, the API server restarted) right after a
/// ReplicaSet is scaled from 2 to 20, and again right after it is scaled down to 5: the manager's
/// informers must relist (counted through `/debug/controllers/state`), and a relist must not make it
/// forget pods it created (duplicate creates) or pods it deleted (lost or repeated deletes). Checked on
/// every state the pod watch delivers: never more active pods than the largest `spec.replicas` the
/// ReplicaSet has had; at the end exactly `spec.replicas`, all owned by it.
async fn a_forced_relist_mid_scale_creates_and_deletes_exactly(family: ApiFamily) {
    if !runs_on(family, ApiFamily::Apps) {
        return;
    }
    let _one = ONE_FAULT_AT_A_TIME.lock().await;
    let ns = TestNamespace::create(plane(), &format!("fault-relist-{}", family.label())).await;
    let manager = TestManager::start(&ns, kinds(family)).await;
    let (small, large, after) = (2, 20, 5);
    replica_sets(&ns, family)
        .create(&PostParams::default(), &replica_set("web", small, family))
        .await
        .unwrap();
    let uid = wait_replica_set(&ns, family, small)
        .await
        .metadata
        .uid
        .unwrap();

    let violations = Arc::new(Mutex::new(Vec::<String>::new()));
    let checks = Arc::new(Mutex::new(0_u64));
    let most = Arc::new(Mutex::new(0_usize));
    let writer = store::Writer::<Pod>::default();
    let reader = writer.as_reader();
    // The manager's backoff, so this watch too is back within seconds and checks the states after each
    // expiry.
    let stream = with_watch_backoff(
        reflector(
            writer,
            watcher(
                ns.api::<Pod>(),
                watcher::Config::default().labels(&app_selector("web")),
            ),
        ),
        WatchBackoff::new(),
        RetryBudget::process(),
    );
    let (seen, counted, largest) = (violations.clone(), checks.clone(), most.clone());
    let watch = tokio::spawn(check_every_state(stream, move || {
        let active = reader.state().iter().filter(|p| is_active(p)).count();
        *counted.lock().unwrap() += 1;
        let mut largest = largest.lock().unwrap();
        *largest = (*largest).max(active);
        // The bound is the largest spec.replicas so far: 20 from the scale-up on.
        if active > large as usize {
            seen.lock()
                .unwrap()
                .push(format!("{active} active pods > {large}"));
        }
    }));

    let started = Instant::now();
    scale(&ns, family, large).await;
    let (restart_up, resumed_up) = expire_and_wait_relists(&manager).await;
    wait_replica_set(&ns, family, large).await;
    let up = started.elapsed();

    let started = Instant::now();
    scale(&ns, family, after).await;
    let (restart_down, resumed_down) = expire_and_wait_relists(&manager).await;
    wait_replica_set(&ns, family, after).await;
    let down = started.elapsed();
    let pods = ns.api::<Pod>().list(&Default::default()).await.unwrap();
    let active: Vec<&Pod> = pods.items.iter().filter(|p| is_active(p)).collect();
    watch.abort();

    let violations = violations.lock().unwrap().clone();
    let checks = *checks.lock().unwrap();
    println!(
        "{}: forced relists mid-scale: 2→20 in {:.1}s (API server back in {:.1}s, every informer relisted {} after), \
         20→5 in {:.1}s (API server back in {:.1}s, every informer relisted {} after); most active pods seen {}; \
         {checks} states checked",
        family.label(),
        up.as_secs_f64(),
        restart_up.as_secs_f64(),
        resumed_up,
        down.as_secs_f64(),
        restart_down.as_secs_f64(),
        resumed_down,
        *most.lock().unwrap(),
    );
    assert!(checks > 0, "the invariant watch saw no state");
    assert!(violations.is_empty(), "duplicate creates: {violations:?}");
    assert_eq!(active.len(), after as usize, "active pods at the end");
    assert!(
        active
            .iter()
            .all(|p| controller_uid(p).as_deref() == Some(uid.as_str())),
        "every pod owned by the ReplicaSet"
    );
    manager.stop().await;
}

/// The API server restarted over and over with every watch expired each time (etcd compacted while it
/// is down): after each restart every informer of a manager of both families (9 watches) must have
/// relisted within [`RESUME_BOUND`] of the API server answering again. Prints each time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn informers_relist_promptly_after_every_api_server_restart() {
    let _one = ONE_FAULT_AT_A_TIME.lock().await;
    let ns = TestNamespace::create(plane(), "fault-restarts-resume").await;
    let manager = TestManager::start(&ns, Kinds::Both).await;
    // A ReplicaSet reconciled: the manager is serving and its informers have listed.
    replica_sets(&ns, ApiFamily::Apps)
        .create(
            &PostParams::default(),
            &replica_set("web", 1, ApiFamily::Apps),
        )
        .await
        .unwrap();
    wait_replica_set(&ns, ApiFamily::Apps, 1).await;
    let runs: usize = if full_faults() { 20 } else { 5 };
    let mut times = Vec::new();
    for _ in 0..runs {
        let (restart, resumed) = expire_and_wait_relists(&manager).await;
        times.push(format!("{resumed} (restart {:.1}s)", restart.as_secs_f64()));
    }
    println!(
        "every informer relisted after each of {runs} API server restarts, after: {}",
        times.join(", ")
    );
    manager.stop().await;
}

/// The same fault for mini-kcm and for kube-controller-manager: every watch expired by an API server
/// restart, and a ReplicaSet scaled (3, then 1, and again) the moment the API server answers again; the
/// time until the scale is done (pods created or deleted and the status written for the new
/// generation). Scheduling is not waited for: the plane's kube-scheduler resumes at its own pace. Each
/// side runs alone against the same plane (upstream: a `kube-controller-manager` process with only its
/// replicaset controller, as the bench starts it). Reports both sides' times; asserts only that every
/// scale completes. 2 rounds per side, 10 with `MINI_KCM_FULL_FAULTS=1`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scale_right_after_an_api_server_restart_beside_upstream() {
    let _one = ONE_FAULT_AT_A_TIME.lock().await;
    let rounds = if full_faults() { 10 } else { 2 };

    let ns = TestNamespace::create(plane(), "fault-resume-mini-kcm").await;
    let manager = TestManager::start(&ns, Kinds::Apps).await;
    let ours = scales_after_restarts(&ns, rounds).await;
    manager.stop().await;

    let ns = TestNamespace::create(plane(), "fault-resume-upstream").await;
    let mut upstream =
        tokio::process::Command::new(ns.plane.bin_dir.join("kube-controller-manager"))
            .arg(format!("--kubeconfig={}", ns.plane.kubeconfig.display()))
            .args([
                "--controllers=replicaset",
                "--leader-elect=false",
                "--secure-port=0",
                "--kube-api-qps=20",
                "--kube-api-burst=30",
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
    let theirs = scales_after_restarts(&ns, rounds).await;
    let _ = upstream.kill().await;

    let show = |times: &[Duration]| {
        times
            .iter()
            .map(|t| format!("{:.2}", t.as_secs_f64()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!(
        "a scale right after the API server answered again, done after (s): mini-kcm {}; kube-controller-manager {}",
        show(&ours),
        show(&theirs)
    );
}

/// A ReplicaSet `web` (apps/v1) reconciled by whichever controller runs, then `rounds` times: every
/// watch expired, and the moment the API server answers again, a scale (to 3, then 1, ...). Returns how
/// long after the API server answered each scale was done.
async fn scales_after_restarts(ns: &TestNamespace, rounds: usize) -> Vec<Duration> {
    let family = ApiFamily::Apps;
    replica_sets(ns, family)
        .create(&PostParams::default(), &replica_set("web", 1, family))
        .await
        .unwrap();
    wait_scaled(ns, 1).await;
    let mut times = Vec::new();
    for round in 0..rounds {
        let replicas = if round % 2 == 0 { 3 } else { 1 };
        expire_watches().await.unwrap();
        let answering = Instant::now();
        scale(ns, family, replicas).await;
        wait_scaled(ns, replicas).await;
        times.push(answering.elapsed());
    }
    times
}

/// Waits until ReplicaSet `web` (apps/v1) has `replicas` pods and has written that status for its
/// current generation.
async fn wait_scaled(ns: &TestNamespace, replicas: i32) {
    ns.wait_for_with(
        &replica_sets(ns, ApiFamily::Apps),
        family_resource(ApiFamily::Apps),
        "web",
        &format!("{replicas} replicas for the current generation"),
        RELIST_TIMEOUT,
        |rs| {
            rs.is_some_and(|rs| {
                let status = rs.status.clone().unwrap_or_default();
                status.replicas == replicas && status.observed_generation == rs.metadata.generation
            })
        },
    )
    .await
    .unwrap();
}

/// How soon after the API server answers again (its `/readyz`) every informer must have relisted after
/// a 410 Gone. The watch backoff waits at most 2 s between attempts and relists at once after a 410
/// (`mini_kcm_runtime::informers::WatchBackoff`); the rest is the list itself on a busy machine.
const RESUME_BOUND: Duration = Duration::from_secs(5);

/// Expires every watch (the API server restarted, etcd compacted meanwhile), then waits until every
/// informer of `manager` has listed again. Returns how long the API server's restart took and how long
/// after it every informer had relisted (formatted: the slowest, and which it was). Fails when that is
/// more than [`RESUME_BOUND`].
async fn expire_and_wait_relists(manager: &TestManager) -> (Duration, String) {
    let before = informer_lists(manager).await;
    let restarting = Instant::now();
    expire_watches().await.unwrap();
    let answering = Instant::now();
    let restart = answering - restarting;
    // `/debug/controllers/state` offers nothing to watch: poll it, often enough to measure.
    let mut relisted_at: BTreeMap<String, Duration> = BTreeMap::new();
    loop {
        let now = informer_lists(manager).await;
        let elapsed = answering.elapsed();
        for (resource, lists) in &now {
            if *lists > before.get(resource).copied().unwrap_or(0) {
                relisted_at.entry(resource.clone()).or_insert(elapsed);
            }
        }
        if relisted_at.len() == before.len() || elapsed > RESUME_BOUND * 4 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let missing: Vec<&String> = before
        .keys()
        .filter(|r| !relisted_at.contains_key(*r))
        .collect();
    assert!(
        missing.is_empty(),
        "not relisted {:.1}s after the API server answered again: {missing:?}",
        answering.elapsed().as_secs_f64()
    );
    let (slowest, at) = relisted_at
        .iter()
        .max_by_key(|(_, at)| **at)
        .map(|(r, at)| (r.clone(), *at))
        .unwrap();
    assert!(
        at <= RESUME_BOUND,
        "{slowest} relisted {:.1}s after the API server answered again (bound {RESUME_BOUND:?}); all: {relisted_at:?}",
        at.as_secs_f64()
    );
    (restart, format!("{:.2}s ({slowest})", at.as_secs_f64()))
}

fn kinds(family: ApiFamily) -> Kinds {
    match family {
        ApiFamily::Apps => Kinds::Apps,
        ApiFamily::Copies => Kinds::Copies,
    }
}

async fn scale(ns: &TestNamespace, family: ApiFamily, replicas: i32) {
    replica_sets(ns, family)
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": replicas}})),
        )
        .await
        .unwrap();
}

/// How long a ReplicaSet may take to settle once every informer of the manager has relisted after a
/// forced expiry (that is asserted first, within [`RESUME_BOUND`]). What remains is the plane's: its
/// kube-scheduler resumes with client-go's reflector backoff (0.8 s doubling to 30 s, jittered up to
/// twice that), and pods the manager creates right after the restart wait for it. Measured: 15 pods
/// created right after the restart were bound 54 s later (2026-11-27). Before the manager's backoff was capped
/// at 2 s (`WatchBackoff`) its informers could be as late, and this was 180 s.
const RELIST_TIMEOUT: Duration = Duration::from_secs(120);

/// Waits until ReplicaSet `web` reports `replicas` available pods for its current generation.
async fn wait_replica_set(
    ns: &TestNamespace,
    family: ApiFamily,
    replicas: i32,
) -> ReplicaSetObject {
    ns.wait_for_with(
        &replica_sets(ns, family),
        family_resource(family),
        "web",
        &format!("{replicas} available replicas"),
        RELIST_TIMEOUT,
        |rs| has_available_replicas(rs, replicas),
    )
    .await
    .unwrap()
}

/// Full lists so far by each informer of the manager (`/debug/controllers/state`), by position and
/// resource (a manager of both families may watch one resource twice).
async fn informer_lists(manager: &TestManager) -> BTreeMap<String, u64> {
    let state: serde_json::Value =
        serde_json::from_str(&manager.get("/debug/controllers/state").await).unwrap();
    state["informers"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .map(|(n, i)| {
            (
                format!("{n}:{}", i["resource"].as_str().unwrap_or_default()),
                i["lists"].as_u64().unwrap_or(0),
            )
        })
        .collect()
}

/// A background watch checking an invariant on every state it delivers.
struct InvariantWatch {
    task: tokio::task::JoinHandle<()>,
    violations: Arc<Mutex<Vec<String>>>,
    checks: Arc<Mutex<u64>>,
}

impl InvariantWatch {
    /// Stops the watch; returns the violations it recorded and how many states it checked.
    fn finish(self) -> (Vec<String>, u64) {
        self.task.abort();
        let violations = self.violations.lock().unwrap().clone();
        let checks = *self.checks.lock().unwrap();
        (violations, checks)
    }
}

/// Watches the namespace's ReplicaSets and checks, on every state, per Deployment (the ReplicaSets'
/// controller): Σ `spec.replicas` ≤ `replicas + surge`, and one ReplicaSet per template. Returns once the
/// watch has listed.
async fn watch_deployment_bounds(
    ns: &TestNamespace,
    family: ApiFamily,
    replicas: i32,
    surge: i32,
) -> InvariantWatch {
    let violations = Arc::new(Mutex::new(Vec::<String>::new()));
    let checks = Arc::new(Mutex::new(0_u64));
    let writer = store::Writer::new(WorkloadKind::ReplicaSet.api_resource(family));
    let reader = writer.as_reader();
    let stream = reflector(
        writer,
        watcher(replica_sets(ns, family), watcher::Config::default()),
    )
    .default_backoff();
    let (seen, counted, state) = (violations.clone(), checks.clone(), reader.clone());
    let task = tokio::spawn(check_every_state(stream, move || {
        *counted.lock().unwrap() += 1;
        let mut totals: BTreeMap<String, i32> = BTreeMap::new();
        let mut per_template: BTreeMap<(String, String), usize> = BTreeMap::new();
        for rs in state.state() {
            let owner = rs
                .metadata
                .owner_references
                .as_ref()
                .and_then(|refs| refs.iter().find(|r| r.controller == Some(true)))
                .map(|r| r.name.clone())
                .unwrap_or_default();
            let hash = rs
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(HASH))
                .cloned()
                .unwrap_or_default();
            *totals.entry(owner.clone()).or_default() += rs.spec.replicas.unwrap_or(0);
            *per_template.entry((owner, hash)).or_default() += 1;
        }
        let mut seen = seen.lock().unwrap();
        for (owner, total) in totals {
            if total > replicas + surge {
                seen.push(format!(
                    "{owner}: Σ spec.replicas {total} > {replicas} + {surge}"
                ));
            }
        }
        for ((owner, hash), n) in per_template {
            if n > 1 {
                seen.push(format!(
                    "{owner}: {n} ReplicaSets with template hash {hash:?}"
                ));
            }
        }
    }));
    reader.wait_until_ready().await.unwrap();
    InvariantWatch {
        task,
        violations,
        checks,
    }
}

/// Watches the pods of DaemonSet `name` (label `app=<name>`) and checks, on every state, that no node
/// has more than one active pod pinned to it (the DaemonSet has no surge). Returns once the watch has
/// listed.
async fn watch_one_daemon_pod_per_node(ns: &TestNamespace, name: &str) -> InvariantWatch {
    let violations = Arc::new(Mutex::new(Vec::<String>::new()));
    let checks = Arc::new(Mutex::new(0_u64));
    let (reader, writer) = reflector::store::<Pod>();
    let stream = reflector(
        writer,
        watcher(
            ns.api::<Pod>(),
            watcher::Config::default().labels(&app_selector(name)),
        ),
    )
    .default_backoff();
    let (seen, counted, state) = (violations.clone(), checks.clone(), reader.clone());
    let task = tokio::spawn(check_every_state(stream, move || {
        *counted.lock().unwrap() += 1;
        let mut by_node: BTreeMap<String, usize> = BTreeMap::new();
        for pod in state.state().iter().filter(|p| is_active(p)) {
            *by_node
                .entry(pinned_node(pod).unwrap_or_default())
                .or_default() += 1;
        }
        for (node, n) in by_node {
            if n > 1 {
                seen.lock()
                    .unwrap()
                    .push(format!("{n} active daemon pods on node {node:?}"));
            }
        }
    }));
    reader.wait_until_ready().await.unwrap();
    InvariantWatch {
        task,
        violations,
        checks,
    }
}

/// The pods of Deployments as a watch sees them: the most pods of one Deployment at once, terminating
/// ones included (they may exceed `replicas + maxSurge` while old pods terminate, as upstream's do:
/// reported, not asserted), and, on every state, at least `min_ready` Ready, non-terminating pods per
/// Deployment (for rollouts that start from a healthy state, `replicas − maxUnavailable`).
struct PodWatch {
    invariant: InvariantWatch,
    peak: Arc<Mutex<usize>>,
}

impl PodWatch {
    /// Stops the watch; returns the violations, the states checked and the peak pod count.
    fn finish(self) -> (Vec<String>, u64, usize) {
        let peak = *self.peak.lock().unwrap();
        let (violations, checks) = self.invariant.finish();
        (violations, checks, peak)
    }
}

/// The bounds of a rollout, watched on every state: [`watch_deployment_bounds`] on the ReplicaSets and
/// [`watch_deployment_pods`] on the pods. Each fault test ends with [`RolloutBounds::held`].
struct RolloutBounds {
    replica_sets: InvariantWatch,
    pods: PodWatch,
}

/// What the watches of a [`RolloutBounds`] saw, for the test's summary line.
struct RolloutBoundsHeld {
    checks: u64,
    pod_checks: u64,
    peak: usize,
}

async fn watch_rollout_bounds(
    ns: &TestNamespace,
    family: ApiFamily,
    apps: &[String],
    replicas: i32,
    surge: i32,
    min_ready: Option<usize>,
) -> RolloutBounds {
    RolloutBounds {
        replica_sets: watch_deployment_bounds(ns, family, replicas, surge).await,
        pods: watch_deployment_pods(ns, apps, min_ready).await,
    }
}

impl RolloutBounds {
    /// Stops both watches and asserts that each saw states and none broke a bound (`around`: when, for
    /// the message).
    fn held(self, around: &str) -> RolloutBoundsHeld {
        let (mut violations, checks) = self.replica_sets.finish();
        let (pod_violations, pod_checks, peak) = self.pods.finish();
        violations.extend(pod_violations);
        assert!(
            checks > 0 && pod_checks > 0,
            "an invariant watch saw no state"
        );
        assert!(
            violations.is_empty(),
            "bounds broken {around}: {violations:?}"
        );
        RolloutBoundsHeld {
            checks,
            pod_checks,
            peak,
        }
    }
}

/// Watches the pods labelled `app=<name>` for each name in `apps` (see [`PodWatch`]); `min_ready: None`
/// checks no readiness (a fault that makes nodes NotReady). Returns once the watch has listed.
async fn watch_deployment_pods(
    ns: &TestNamespace,
    apps: &[String],
    min_ready: Option<usize>,
) -> PodWatch {
    let violations = Arc::new(Mutex::new(Vec::<String>::new()));
    let checks = Arc::new(Mutex::new(0_u64));
    let peak = Arc::new(Mutex::new(0_usize));
    let writer = store::Writer::default();
    let reader = writer.as_reader();
    let stream =
        reflector(writer, watcher(ns.api::<Pod>(), watcher::Config::default())).default_backoff();
    let apps: BTreeSet<String> = apps.iter().cloned().collect();
    let (seen, counted, highest, state) = (
        violations.clone(),
        checks.clone(),
        peak.clone(),
        reader.clone(),
    );
    let task = tokio::spawn(check_every_state(stream, move || {
        *counted.lock().unwrap() += 1;
        let mut pods: BTreeMap<&str, usize> = apps.iter().map(|a| (a.as_str(), 0)).collect();
        let mut ready: BTreeMap<&str, usize> = apps.iter().map(|a| (a.as_str(), 0)).collect();
        let all = state.state();
        for pod in &all {
            let Some(app) = pod.metadata.labels.as_ref().and_then(|l| l.get("app")) else {
                continue;
            };
            let Some(count) = pods.get_mut(app.as_str()) else {
                continue;
            };
            *count += 1;
            if is_active(pod) && is_ready(pod) {
                *ready.get_mut(app.as_str()).unwrap() += 1;
            }
        }
        let mut highest = highest.lock().unwrap();
        *highest = (*highest).max(pods.values().copied().max().unwrap_or(0));
        if let Some(min_ready) = min_ready {
            for (app, n) in ready {
                if n < min_ready {
                    seen.lock()
                        .unwrap()
                        .push(format!("{app}: {n} Ready pods < {min_ready}"));
                }
            }
        }
    }));
    reader.wait_until_ready().await.unwrap();
    PodWatch {
        invariant: InvariantWatch {
            task,
            violations,
            checks,
        },
        peak,
    }
}

fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Every pod labelled `app=<name>` has a controller: nothing matching a Deployment was left orphaned.
async fn assert_no_orphans(ns: &TestNamespace, apps: &[String]) {
    for app in apps {
        let pods = ns
            .api::<Pod>()
            .list(&kube::api::ListParams::default().labels(&app_selector(app)))
            .await
            .unwrap();
        let orphans: Vec<String> = pods
            .items
            .iter()
            .filter(|p| is_active(p) && controller_uid(p).is_none())
            .filter_map(|p| p.metadata.name.clone())
            .collect();
        assert!(orphans.is_empty(), "{app}: orphaned pods {orphans:?}");
    }
}

/// A Deployment whose rollout has not completed: a generation not yet observed, or replicas not all
/// updated and available.
fn rollout_under_way(d: &DeploymentObject, replicas: i32) -> bool {
    let s = d.status.clone().unwrap_or_default();
    s.observed_generation != d.metadata.generation
        || s.updated_replicas.unwrap_or(0) < replicas
        || s.replicas.unwrap_or(0) != replicas
        || s.available_replicas.unwrap_or(0) < replicas
}

/// A DaemonSet whose rollout has not completed on `nodes` nodes.
fn daemon_rollout_under_way(ds: &DaemonSetObject, nodes: i32) -> bool {
    let s = ds.status.clone().unwrap_or_default();
    s.observed_generation != ds.metadata.generation
        || s.desired_number_scheduled != nodes
        || s.updated_number_scheduled.unwrap_or(0) != nodes
        || s.number_available.unwrap_or(0) != nodes
        || s.current_number_scheduled != nodes
        || s.number_misscheduled != 0
}

/// Waits until DaemonSet `name` reports an up-to-date, available pod on each of `nodes` nodes for its
/// current generation.
async fn wait_daemon_set_rolled_out(ns: &TestNamespace, family: ApiFamily, name: &str, nodes: i32) {
    ns.wait_for_with(
        &daemon_sets(ns, family),
        WorkloadKind::DaemonSet.api_resource(family),
        name,
        &format!("an up-to-date, available daemon pod on each of {nodes} nodes"),
        TIMEOUT,
        |ds| ds.is_some_and(|ds| !daemon_rollout_under_way(ds, nodes)),
    )
    .await
    .unwrap();
}

/// A DaemonSet `name` of `family` on every node of the plane, rolling one node at a time (maxUnavailable
/// 1, maxSurge 0), whose pods become Ready `ready_after` after they start.
fn rolling_daemon_set(name: &str, family: ApiFamily, ready_after: &str) -> DaemonSetObject {
    let mut template = pod_template(name);
    template
        .metadata
        .get_or_insert_with(Default::default)
        .annotations = Some(BTreeMap::from([(
        READY_AFTER.to_string(),
        ready_after.to_string(),
    )]));
    let mut ds = DaemonSetObject::new(
        name,
        &WorkloadKind::DaemonSet.api_resource(family),
        DaemonSetSpec {
            selector: selector(name),
            template,
            update_strategy: Some(DaemonSetUpdateStrategy {
                type_: Some("RollingUpdate".into()),
                rolling_update: Some(RollingUpdateDaemonSet {
                    max_unavailable: Some(IntOrString::Int(1)),
                    max_surge: Some(IntOrString::Int(0)),
                }),
            }),
            ..Default::default()
        },
    );
    ds.status = None;
    ds
}

/// A template change starting a rollout whose new pods take `ready_after` to become Ready; `step` makes
/// each change a new template.
fn new_template(ready_after: &str, step: &str) -> serde_json::Value {
    json!({"spec": {"template": {
        "metadata": {"annotations": {READY_AFTER: ready_after, "minikcm.dev/fault-step": step}},
        "spec": {"containers": [{"name": "main", "image": NEW_IMAGE}]}}}})
}

/// Concurrent rollouts while the manager is killed (its task dropped mid-request, as `kill -9` would) and
/// started again, over and over, at moments drawn from a seeded sequence (printed, to replay a run). On
/// every state the ReplicaSet watch delivers, for each Deployment: Σ `spec.replicas` ≤ replicas +
/// maxSurge, and one ReplicaSet per template. A DaemonSet on every node of the plane rolls out a new
/// template meanwhile (maxUnavailable 1, no surge); on every state its pod watch delivers, no node has two
/// active pods. After the last kill every rollout must complete, and every node must run exactly one pod
/// of the DaemonSet's new revision. CI: 6 rollouts, 3 kills; `MINI_KCM_FULL_FAULTS=1`: 20 rollouts,
/// 10 kills.
async fn a_manager_killed_repeatedly_during_concurrent_rollouts_converges_within_the_bounds(
    family: ApiFamily,
) {
    if !runs_on(family, ApiFamily::Copies) {
        return;
    }
    let _one = ONE_FAULT_AT_A_TIME.lock().await;
    let (rollouts, kills) = if full_faults() { (20, 10) } else { (6, 3) };
    let ns = TestNamespace::create(plane(), &format!("fault-kills-{}", family.label())).await;
    let mut manager = TestManager::start(&ns, kinds(family)).await;
    // maxUnavailable 0: four steps of one surge pod that takes 4 s to become Ready, so every rollout lasts
    // well beyond the kills (CI: at most 9 s of them).
    let (replicas, surge, unavailable) = (4, 1, 0);
    let names: Vec<String> = (0..rollouts).map(|i| format!("web-{i}")).collect();
    for name in &names {
        let mut d = deployment_of(name, replicas, family);
        rolling_update(&mut d, surge, unavailable);
        deployments(&ns, family)
            .create(&PostParams::default(), &d)
            .await
            .unwrap();
    }
    // The DaemonSet: on every node of this binary's plane (no test here adds nodes). One node at a time,
    // each new pod Ready after 3 s: its rollout outlasts the first kill (at most 3 s in).
    let nodes: Vec<String> = Api::<Node>::all(ns.client.clone())
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    let node_count = i32::try_from(nodes.len()).unwrap();
    daemon_sets(&ns, family)
        .create(
            &PostParams::default(),
            &rolling_daemon_set(DAEMON, family, "1s"),
        )
        .await
        .unwrap();
    for name in &names {
        wait_deployment_complete(&ns, family, name, replicas).await;
    }
    wait_daemon_set_rolled_out(&ns, family, DAEMON, node_count).await;

    let min_ready = usize::try_from(replicas - unavailable).unwrap();
    let bounds = watch_rollout_bounds(&ns, family, &names, replicas, surge, Some(min_ready)).await;
    let per_node = watch_one_daemon_pod_per_node(&ns, DAEMON).await;
    for name in &names {
        deployments(&ns, family)
            .patch(
                name,
                &PatchParams::default(),
                // New pods take 4 s to become Ready: the rollouts last long enough to be killed in.
                &Patch::Merge(new_template("4s", "1")),
            )
            .await
            .unwrap();
    }
    daemon_sets(&ns, family)
        .patch(
            DAEMON,
            &PatchParams::default(),
            &Patch::Merge(new_template("3s", "1")),
        )
        .await
        .unwrap();
    // The moments of the kills: 0.3–3 s of running between two kills, from a seeded sequence.
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let mut state = seed | 1;
    let mut next_gap = || {
        // xorshift64: reproducible from the printed seed.
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        Duration::from_millis(300 + state % 2700)
    };
    let (mut mid_rollout, mut mid_daemon_rollout) = (0, 0);
    for _ in 0..kills {
        // The fault's timing, not a wait for a condition.
        tokio::time::sleep(next_gap()).await;
        let all = deployments(&ns, family)
            .list(&Default::default())
            .await
            .unwrap();
        if all.items.iter().any(|d| rollout_under_way(d, replicas)) {
            mid_rollout += 1;
        }
        let ds = daemon_sets(&ns, family).get(DAEMON).await.unwrap();
        if daemon_rollout_under_way(&ds, node_count) {
            mid_daemon_rollout += 1;
        }
        manager.kill().await;
        manager = TestManager::start(&ns, kinds(family)).await;
    }
    let last_kill = Instant::now();
    for name in &names {
        wait_deployment_complete(&ns, family, name, replicas).await;
    }
    let converged = last_kill.elapsed();
    wait_daemon_set_rolled_out(&ns, family, DAEMON, node_count).await;
    // Every node runs exactly one active pod, of the new template, and no other pod is active.
    let pods = ns
        .wait_for_list(
            &ns.api::<Pod>(),
            watcher::Config::default().labels(&app_selector(DAEMON)),
            "exactly one new daemon pod on every node",
            TIMEOUT,
            |pods| {
                let active: Vec<&Pod> = pods.iter().filter(|p| is_active(p)).collect();
                active.len() == nodes.len()
                    && nodes.iter().all(|node| {
                        active
                            .iter()
                            .filter(|p| pinned_node(p).as_deref() == Some(node.as_str()))
                            .count()
                            == 1
                    })
                    && active.iter().all(|p| {
                        p.spec.as_ref().unwrap().containers[0].image.as_deref() == Some(NEW_IMAGE)
                    })
            },
        )
        .await;
    let daemon_converged = last_kill.elapsed();
    let revisions: BTreeSet<String> = pods
        .iter()
        .filter(|p| is_active(p))
        .filter_map(|p| p.metadata.labels.as_ref()?.get(REVISION).cloned())
        .collect();
    assert_no_orphans(&ns, &names).await;
    let RolloutBoundsHeld {
        checks,
        pod_checks,
        peak,
    } = bounds.held("around the kills");
    let (daemon_violations, daemon_checks) = per_node.finish();
    println!(
        "{}: {rollouts} rollouts and a DaemonSet on {} nodes, {kills} kills of the manager (seed {seed}), \
         {mid_rollout} of them mid-rollout ({mid_daemon_rollout} mid-DaemonSet-rollout): all Deployments \
         complete {:.1}s after the last kill, the DaemonSet {:.1}s; {checks} ReplicaSet states, \
         {pod_checks} pod states and {daemon_checks} daemon pod states checked; at most {peak} pods of \
         one Deployment at once (replicas + maxSurge = {})",
        family.label(),
        nodes.len(),
        converged.as_secs_f64(),
        daemon_converged.as_secs_f64(),
        replicas + surge,
    );
    assert!(daemon_checks > 0, "the daemon pod watch saw no state");
    assert!(
        mid_rollout > 0,
        "no kill landed while a rollout was under way"
    );
    assert!(
        mid_daemon_rollout > 0,
        "no kill landed while the DaemonSet's rollout was under way"
    );
    assert!(
        daemon_violations.is_empty(),
        "two daemon pods on a node around the kills: {daemon_violations:?}"
    );
    assert_eq!(
        revisions.len(),
        1,
        "every daemon pod of one revision: {revisions:?}"
    );
    manager.stop().await;
}

/// The plane's other components restarted in place (the plane's `restart` hook: SIGTERM, start again with
/// the same ports and data, wait until healthy), one after another, each in the middle of a rollout: etcd
/// (the API server's requests fail meanwhile), kube-controller-manager (the plane's: node lifecycle,
/// garbage collection, …), kube-scheduler (new pods stay unscheduled meanwhile) and kwok (the simulated
/// kubelets: pods do not become Ready meanwhile). Before each restart the Deployment's template changes
/// and the restart waits until the new ReplicaSet exists, so it surely lands mid-rollout; the pid must
/// change. Checked on every state the ReplicaSet watch delivers: Σ `spec.replicas` ≤ replicas +
/// maxSurge and one ReplicaSet per template. After the last restart the rollout must complete with
/// nobody touching anything.
async fn plane_components_restarted_mid_rollout_converge_within_the_bounds(family: ApiFamily) {
    if !runs_on(family, ApiFamily::Apps) {
        return;
    }
    let _one = ONE_FAULT_AT_A_TIME.lock().await;
    let ns = TestNamespace::create(plane(), &format!("fault-restarts-{}", family.label())).await;
    let manager = TestManager::start(&ns, kinds(family)).await;
    let (replicas, surge, unavailable) = (3, 1, 0);
    let mut d = deployment_of("web", replicas, family);
    rolling_update(&mut d, surge, unavailable);
    deployments(&ns, family)
        .create(&PostParams::default(), &d)
        .await
        .unwrap();
    wait_deployment_complete(&ns, family, "web", replicas).await;
    let apps = ["web".to_string()];
    let min_ready = usize::try_from(replicas - unavailable).unwrap();
    let bounds = watch_rollout_bounds(&ns, family, &apps, replicas, surge, Some(min_ready)).await;

    let mut restarts = Vec::new();
    for (step, component) in [
        Component::Etcd,
        Component::ControllerManager,
        Component::Scheduler,
        Component::Kwok,
    ]
    .into_iter()
    .enumerate()
    {
        // A new template (pods Ready 3 s after they start), and wait until the controller has acted on
        // it: the new ReplicaSet exists.
        deployments(&ns, family)
            .patch(
                "web",
                &PatchParams::default(),
                &Patch::Merge(new_template("3s", &step.to_string())),
            )
            .await
            .unwrap();
        let d =
            wait_generation_observed(&ns, family, "web", "the rollout started (a new ReplicaSet)")
                .await;
        assert!(
            rollout_under_way(&d, replicas),
            "the rollout was over before {} was restarted: {:?}",
            component.name(),
            d.status
        );
        let before = component_pid(component).unwrap();
        let restarting = Instant::now();
        let done = restart_component(component).await.unwrap();
        let took = restarting.elapsed();
        assert_ne!(done.pid, before, "{} was not restarted", component.name());
        assert_eq!(component_pid(component), Some(done.pid));
        restarts.push(format!("{} {:.1}s", component.name(), took.as_secs_f64()));
    }
    let last_restart = Instant::now();
    wait_deployment_complete(&ns, family, "web", replicas).await;
    let converged = last_restart.elapsed();
    assert_no_orphans(&ns, &apps).await;
    let RolloutBoundsHeld {
        checks,
        pod_checks,
        peak,
    } = bounds.held("around the restarts");
    let replica_sets = replica_sets(&ns, family)
        .list(&Default::default())
        .await
        .unwrap()
        .items;
    println!(
        "{}: restarts mid-rollout ({}): rollout complete {:.1}s after the last restart; {} ReplicaSets; \
         {checks} ReplicaSet and {pod_checks} pod states checked; at most {peak} pods at once \
         (replicas + maxSurge = {})",
        family.label(),
        restarts.join(", "),
        converged.as_secs_f64(),
        replica_sets.len(),
        replicas + surge,
    );
    manager.stop().await;
}

/// The manager's writes refused mid-rollout (a ValidatingAdmissionPolicy on its user: the API server
/// answers, every write fails: pod creations, scaling, status), then allowed again: the rollout must
/// complete with nobody touching anything (a key the Deployment controller dropped after 15 failures,
/// here at most 1 s apart, comes back by the informers' resync, here every 4–8 s; the `deployment`
/// tests prove that case on its own), and the bounds hold
/// on every state (Σ spec.replicas, one ReplicaSet per template, Ready pods ≥ replicas − maxUnavailable,
/// no orphan at the end). CI: 20 s of refusals; `MINI_KCM_FULL_FAULTS=1`: 200 s.
async fn the_managers_writes_refused_mid_rollout_converge_within_the_bounds(family: ApiFamily) {
    if !runs_on(family, ApiFamily::Copies) {
        return;
    }
    let _one = ONE_FAULT_AT_A_TIME.lock().await;
    let outage = Duration::from_secs(if full_faults() { 200 } else { 20 });
    let ns = TestNamespace::create(plane(), &format!("fault-refused-{}", family.label())).await;
    let manager = TestManager::start_as(
        &ns,
        ManagerOptions {
            kinds: kinds(family),
            min_resync_period: Duration::from_secs(4),
            deployment_max_retry_delay: Duration::from_secs(1),
            ..Default::default()
        },
        Some(manager_config(&ns).await),
    )
    .await;
    let (replicas, surge, unavailable) = (6, 2, 1);
    let mut d = deployment_of("web", replicas, family);
    rolling_update(&mut d, surge, unavailable);
    deployments(&ns, family)
        .create(&PostParams::default(), &d)
        .await
        .unwrap();
    wait_deployment_complete(&ns, family, "web", replicas).await;
    let apps = ["web".to_string()];
    let min_ready = usize::try_from(replicas - unavailable).unwrap();
    let bounds = watch_rollout_bounds(&ns, family, &apps, replicas, surge, Some(min_ready)).await;

    // New pods take 3 s to become Ready: the rollout is under way when the writes start failing.
    deployments(&ns, family)
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(new_template("3s", "1")),
        )
        .await
        .unwrap();
    let started = wait_generation_observed(
        &ns,
        family,
        "web",
        "the rollout started (the new generation observed)",
    )
    .await;
    let retried = async || {
        let mut total = 0.0;
        for controller in ["deployment", "replicaset"] {
            let queue = format!(
                "workqueue_retries_total{{name=\"{}\"",
                family.queue_name(controller)
            );
            total += manager.metric(&queue).await;
        }
        total
    };
    let retries_before = retried().await;
    let denied = DeniedWrites::deny(&ns, family).await;
    let under_way = deployments(&ns, family).get("web").await.unwrap();
    assert!(
        rollout_under_way(&under_way, replicas),
        "the rollout was over before the writes were refused: {:?} (started {:?})",
        under_way.status,
        started.status
    );
    // The fault's duration, not a wait for a condition.
    tokio::time::sleep(outage).await;
    let retries = retried().await - retries_before;
    denied.allow().await;
    let allowed = Instant::now();

    wait_deployment_complete(&ns, family, "web", replicas).await;
    let converged = allowed.elapsed();
    assert_no_orphans(&ns, &apps).await;
    let RolloutBoundsHeld {
        checks,
        pod_checks,
        peak,
    } = bounds.held("around the refused writes");
    println!(
        "{}: the manager's writes refused for {}s mid-rollout ({retries} Deployment and ReplicaSet retries meanwhile): \
         rollout complete {:.1}s after they were allowed; {checks} ReplicaSet and {pod_checks} pod states \
         checked; at most {peak} pods at once (replicas + maxSurge = {})",
        family.label(),
        outage.as_secs(),
        converged.as_secs_f64(),
        replicas + surge,
    );
    // The new ReplicaSet's pod creations fail and back off (5 ms doubling: about 12 retries in 20 s).
    assert!(
        retries >= 10.0,
        "only {retries} syncs were retried while refused: the refusals did not reach the manager"
    );
    manager.stop().await;
}
