//! Learn by breaking (docs/tour-breaking.md): each safety mechanism of the controllers switched off
//! (`mini-kcm up --without MECHANISM`, here `ManagerOptions::safeties`) on the real plane, proving the
//! failure it prevents appears without it and not with it.
//!
//! The windows these mechanisms guard last milliseconds on an idle plane. The scenarios that need one
//! widen it with a watch delay (`mini-kcm up --watch-delay`, `ManagerOptions::watch_delay`): every watch
//! event reaches the manager's caches seconds late, so the race is lost every time, not now and then.
//! Each scenario runs twice, with and without the mechanism, each time with a manager of its own in a
//! namespace of its own.

// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use mini_kcm_e2e::{
    TIMEOUT, TestManager, app_selector, family_resource, has_available_replicas, is_active,
    pod_quota, pod_template, replica_set, replica_sets,
};
use mini_kcm_manager::{Kinds, ManagerOptions};
use mini_kcm_runtime::api::kinds::ApiFamily;
use mini_kcm_runtime::switches::safeties::{Safeties, Safety};
use mini_kcm_testkit::{PlaneConfig, PlaneInfo, TestNamespace, shared_plane};
use serde_json::json;

fn plane() -> &'static PlaneInfo {
    shared_plane(PlaneConfig::default())
}

/// How late the manager's caches see every event where a scenario needs a wide window: far longer
/// than a sync, far shorter than the test.
const WATCH_DELAY: Duration = Duration::from_secs(3);

const FAMILY: ApiFamily = ApiFamily::Apps;

/// A namespace and a manager for it, with `off` switched off and the watch delayed by `delay`.
async fn setup(prefix: &str, off: &[Safety], delay: Duration) -> (TestNamespace, TestManager) {
    let ns = TestNamespace::create(plane(), prefix).await;
    let options = ManagerOptions {
        kinds: Kinds::Apps,
        safeties: Safeties::without(off.iter().copied()),
        watch_delay: delay,
        ..Default::default()
    };
    let manager = TestManager::start_with(&ns, options).await;
    (ns, manager)
}

/// Every pod with `app=<app>` the API server ever showed in the namespace (the test's own watch, not
/// delayed): name → whether it ever had a controller reference.
#[derive(Clone, Default)]
struct PodsSeen(Arc<Mutex<BTreeMap<String, bool>>>);

impl PodsSeen {
    fn watch(ns: &TestNamespace, app: &str) -> Self {
        let seen = PodsSeen::default();
        let record = seen.clone();
        let pods = ns.api::<Pod>();
        let config = watcher::Config::default().labels(&app_selector(app));
        tokio::spawn(async move {
            let mut events = std::pin::pin!(watcher(pods, config));
            while let Some(event) = events.next().await {
                if let Ok(watcher::Event::Apply(pod) | watcher::Event::InitApply(pod)) = event {
                    let owned = pod
                        .metadata
                        .owner_references
                        .as_ref()
                        .is_some_and(|refs| refs.iter().any(|r| r.controller == Some(true)));
                    let name = pod.metadata.name.clone().unwrap_or_default();
                    let mut seen = record.0.lock().unwrap();
                    let ever_owned = seen.entry(name).or_default();
                    *ever_owned |= owned;
                }
            }
        });
        seen
    }

    fn count(&self) -> usize {
        self.0.lock().unwrap().len()
    }

    fn ever_owned(&self, name: &str) -> Option<bool> {
        self.0.lock().unwrap().get(name).copied()
    }
}

/// Waits until the ReplicaSet reports `replicas` available for its generation and the namespace holds
/// exactly that many active pods of it: converged.
async fn wait_converged(ns: &TestNamespace, name: &str, replicas: i32) {
    ns.wait_for_with(
        &replica_sets(ns, FAMILY),
        family_resource(FAMILY),
        name,
        &format!("{replicas} available replicas"),
        TIMEOUT,
        |rs| has_available_replicas(rs, replicas),
    )
    .await;
    ns.wait_for_list(
        &ns.api::<Pod>(),
        watcher::Config::default().labels(&app_selector(name)),
        &format!("{replicas} active pods"),
        TIMEOUT,
        |pods| pods.iter().filter(|p| is_active(p)).count() == usize::try_from(replicas).unwrap(),
    )
    .await;
}

/// The scale-up both expectations and read-your-own-writes guard: a ReplicaSet of 3 is scaled to 6,
/// and a moment later one of its pods changes (any event that wakes it). Its first sync creates 3
/// pods; the pod's event, delivered after that sync, wakes a second one whose cache shows neither the
/// new pods nor the first sync's status. Returns how many pods the API server ever showed, and the
/// manager.
async fn scale_up_with_a_second_wake(prefix: &str, off: &[Safety]) -> (usize, TestManager) {
    let (ns, manager) = setup(prefix, off, WATCH_DELAY).await;
    let api = replica_sets(&ns, FAMILY);
    api.create(&PostParams::default(), &replica_set("web", 3, FAMILY))
        .await
        .unwrap();
    wait_converged(&ns, "web", 3).await;
    let seen = PodsSeen::watch(&ns, "web");
    let pods = ns.api::<Pod>();
    let one = pods
        .list(&ListParams::default().labels(&app_selector("web")))
        .await
        .unwrap()
        .items
        .into_iter()
        .next()
        .and_then(|p| p.metadata.name)
        .unwrap();

    let started = Instant::now();
    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 6}})),
    )
    .await
    .unwrap();
    pods.patch(
        &one,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {"learn-by-breaking": "touched"}}})),
    )
    .await
    .unwrap();
    // The two events must both reach the API server before the first sync writes, a watch delay
    // later; a loaded machine that took longer would prove nothing.
    assert!(
        started.elapsed() < WATCH_DELAY / 2,
        "the two writes took {:?}",
        started.elapsed()
    );
    wait_converged(&ns, "web", 6).await;
    (seen.count(), manager)
}

/// Without expectations (and without read-your-own-writes, which would otherwise hold the second sync
/// back), the second sync creates 3 more pods: 9 for 6, 3 of them deleted again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_expectations_a_scale_up_creates_duplicates() {
    let off = [Safety::Expectations, Safety::ReadYourOwnWrites];
    let (ever, manager) = scale_up_with_a_second_wake("brk-exp-off", &off).await;
    println!("without expectations and read-your-own-writes: {ever} pods for 6");
    assert!(ever >= 9, "expected duplicates, saw {ever} pods in all");
    manager.stop().await;
}

/// With expectations alone (read-your-own-writes still off), the second sync waits: exactly 6 pods.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_expectations_a_scale_up_creates_no_duplicates() {
    let (ever, manager) =
        scale_up_with_a_second_wake("brk-exp-on", &[Safety::ReadYourOwnWrites]).await;
    println!("with expectations (read-your-own-writes off): {ever} pods for 6");
    assert_eq!(ever, 6, "no duplicates expected");
    manager.stop().await;
}

/// The 409s the ReplicaSet controller's client got.
async fn conflicts(manager: &TestManager) -> f64 {
    manager
        .metric(r#"rest_client_requests_total{client="replicaset-controller",code="409""#)
        .await
}

/// Without read-your-own-writes (expectations on, so no duplicate), the second sync writes the status
/// from its stale copy of the ReplicaSet: refused with 409 Conflict, read again, written again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_read_your_own_writes_stale_status_writes_conflict() {
    let (ever, manager) =
        scale_up_with_a_second_wake("brk-ryow-off", &[Safety::ReadYourOwnWrites]).await;
    let conflicts = conflicts(&manager).await;
    println!(
        "without read-your-own-writes: {} conflicts, {ever} pods",
        conflicts as u64
    );
    assert!(conflicts >= 1.0, "expected stale writes refused");
    manager.stop().await;
}

/// With it, the syncs in the window are held back (counted as stale-sync skips) and nothing the
/// controller writes is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_read_your_own_writes_no_write_conflicts() {
    let (ever, manager) = scale_up_with_a_second_wake("brk-ryow-on", &[]).await;
    let conflicts = conflicts(&manager).await;
    let skips = manager
        .metric("replicaset_controller_stale_sync_skips_total")
        .await;
    println!(
        "with read-your-own-writes: {} conflicts, {} stale-sync skips, {ever} pods",
        conflicts as u64, skips as u64
    );
    assert_eq!(conflicts, 0.0);
    assert!(skips >= 1.0, "the second sync was held back");
    assert_eq!(ever, 6);
    manager.stop().await;
}

/// A namespace with room for 2 pods and a ReplicaSet of 8: the first sync's creations, and how many
/// the quota refused. No watch delay: the batches are within one sync.
async fn creations_against_a_quota(prefix: &str, off: &[Safety]) -> (usize, usize) {
    let (ns, manager) = setup(prefix, off, Duration::ZERO).await;
    pod_quota(&ns, "two-pods", 2).await;
    replica_sets(&ns, FAMILY)
        .create(&PostParams::default(), &replica_set("web", 8, FAMILY))
        .await
        .unwrap();
    let deadline = Instant::now() + TIMEOUT;
    let first_failed = loop {
        let decisions = manager.decisions(&ns.name, "web").await;
        // Newest first: the oldest sync whose creations were refused.
        if let Some(d) = decisions.iter().rev().find(|d| {
            d.writes
                .iter()
                .any(|w| w.verb == "create" && w.error.is_some())
        }) {
            break d.clone();
        }
        assert!(
            Instant::now() < deadline,
            "no refused creation: {decisions:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let creates = first_failed
        .writes
        .iter()
        .filter(|w| w.verb == "create")
        .count();
    let refused = first_failed
        .writes
        .iter()
        .filter(|w| w.verb == "create" && w.error.is_some())
        .count();
    manager.stop().await;
    (creates, refused)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_slow_start_every_doomed_creation_is_sent() {
    let (creates, refused) = creations_against_a_quota("brk-slow-off", &[Safety::SlowStart]).await;
    println!("without slow start: {creates} creations in the first sync, {refused} refused");
    assert_eq!((creates, refused), (8, 6));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_slow_start_one_doomed_creation_is_sent() {
    let (creates, refused) = creations_against_a_quota("brk-slow-on", &[]).await;
    println!("with slow start: {creates} creations in the first sync, {refused} refused");
    assert_eq!((creates, refused), (3, 1));
}

/// An orphan pod matching a ReplicaSet of 0 is created; once it is Ready (a second later: the pod's
/// `minikcm.dev/ready-after`), the ReplicaSet is deleted. The manager's caches, a watch delay behind,
/// then show the orphan beside a ReplicaSet that still looks alive. Returns whether the orphan ever
/// got a controller, and whether it still exists once the manager's caches show the deletion.
async fn orphan_beside_a_deleted_replica_set(prefix: &str, off: &[Safety]) -> (bool, bool) {
    let (ns, manager) = setup(prefix, off, WATCH_DELAY).await;
    let sets = replica_sets(&ns, FAMILY);
    sets.create(&PostParams::default(), &replica_set("web", 0, FAMILY))
        .await
        .unwrap();
    wait_converged(&ns, "web", 0).await;
    let seen = PodsSeen::watch(&ns, "web");

    let mut template = pod_template("web");
    let mut metadata = template.metadata.take().unwrap_or_default();
    metadata.name = Some("orphan".into());
    metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert("minikcm.dev/ready-after".into(), "1s".into());
    let orphan = Pod {
        metadata,
        spec: template.spec,
        ..Default::default()
    };
    let pods = ns.api::<Pod>();
    let created_at = Instant::now();
    pods.create(&PostParams::default(), &orphan).await.unwrap();
    ns.wait_for(&pods, "orphan", "the orphan Ready", TIMEOUT, |p| {
        p.and_then(|p| p.status.as_ref())
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
    })
    .await;
    sets.delete("web", &DeleteParams::default()).await.unwrap();
    // The deletion must reach the API server before the orphan reaches the manager's caches.
    assert!(
        created_at.elapsed() < WATCH_DELAY - Duration::from_millis(500),
        "the orphan took {:?} to be Ready",
        created_at.elapsed()
    );

    // Until the manager's caches no longer show the ReplicaSet, it may still act for it.
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let view = manager
            .get(&format!(
                "/debug/controllers/object?kind=ReplicaSet&namespace={}&name=web",
                ns.name
            ))
            .await;
        let view: serde_json::Value = serde_json::from_str(&view).unwrap();
        if view["found"] == false && view["controller_running"] == true {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the manager still caches web: {view}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let adopted = seen.ever_owned("orphan").unwrap_or(false);
    let survived = match pods.get_opt("orphan").await.unwrap() {
        Some(pod) => pod.metadata.deletion_timestamp.is_none(),
        None => false,
    };
    manager.stop().await;
    (adopted, survived)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_adoption_recheck_a_deleted_replica_set_adopts_an_orphan() {
    let (adopted, survived) =
        orphan_beside_a_deleted_replica_set("brk-adopt-off", &[Safety::AdoptionRecheck]).await;
    println!("without the adoption recheck: adopted {adopted}, survived {survived}");
    assert!(
        adopted && !survived,
        "adopted {adopted}, survived {survived}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_adoption_recheck_the_orphan_is_left_alone() {
    let (adopted, survived) = orphan_beside_a_deleted_replica_set("brk-adopt-on", &[]).await;
    println!("with the adoption recheck: adopted {adopted}, survived {survived}");
    assert!(
        !adopted && survived,
        "adopted {adopted}, survived {survived}"
    );
}
