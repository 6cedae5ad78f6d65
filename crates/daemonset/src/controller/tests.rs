//! Controller-level unit tests: the controller on caches filled from a recorded API (`RecordedApi`), so
//! every request a sync makes is recorded and asserted, and "no API call" means `requests()` is empty.
//! Mirrors upstream's TestDeleteControllerAndExpectations-style dormancy checks, TestAddNode,
//! TestUpdateNode and the controller-reference resolution of the pod and history handlers; and shows,
//! for each kind of write a sync makes, that the next sync waits until the caches show it
//! (read-your-own-writes). Upstream's action-asserting sync tests are in `upstream_tests`.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSetStatus};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::ApiResource;
use mini_kcm_runtime::api::kinds::{ApiFamily, WorkloadKind};
use mini_kcm_runtime::controller::ObjectKey;
use mini_kcm_runtime::controller::offline::{
    drain_queue, flushed_events, key, offline_controller, stored,
};
use mini_kcm_runtime::informers::{Change, Origin};
use mini_kcm_runtime::pods::cached::{CachedPod, CachedPodStatus};
use mini_kcm_runtime::recorded_api::{Reaction, RecordedApi, Verb};
use mini_kcm_workqueue::Priority;

use super::DaemonSetController;
use crate::DaemonSetObject;
use crate::REVISION_HASH_LABEL;
use crate::history::{build_revision, revision_data};
use crate::test_fixtures::{controller_ref, labels, new_ds, new_node, pod_with, to_pod};
use mini_kcm_runtime::controller::{Requeue, SyncKeyError, sync_key};

/// A controller whose handlers are driven by hand (no sync).
fn controller() -> Arc<DaemonSetController> {
    offline_controller(&RecordedApi::new())
}

/// A recorded API and a controller on it.
fn cluster() -> (RecordedApi, Arc<DaemonSetController>) {
    let api = RecordedApi::new();
    let c = offline_controller(&api);
    (api, c)
}

fn ds_resource() -> ApiResource {
    WorkloadKind::DaemonSet.api_resource(ApiFamily::Apps)
}

fn put_ds(api: &RecordedApi, c: &DaemonSetController, ds: &DaemonSetObject) {
    stored(api, ds, &ds_resource(), &c.core.objects, &ds_resource());
}

fn put_node(api: &RecordedApi, c: &DaemonSetController, node: &Node) {
    stored(api, node, &(), &c.nodes, &());
}

fn put_pod(api: &RecordedApi, c: &DaemonSetController, pod: &CachedPod) {
    stored(api, &to_pod(pod), &(), &c.pods, &());
}

fn put_revision(api: &RecordedApi, c: &DaemonSetController, revision: &ControllerRevision) {
    stored(api, revision, &(), &c.revisions, &());
}

/// The API's latest resourceVersion, as a list (or a watch bookmark) reports it.
async fn latest_resource_version(api: &RecordedApi) -> String {
    let pods: Api<Pod> = Api::all(api.client());
    pods.list(&Default::default())
        .await
        .expect("list")
        .metadata
        .resource_version
        .expect("a list has a resourceVersion")
}

/// The node a pod creation pinned its pod to.
fn pinned_node(body: &serde_json::Value) -> &str {
    body.pointer("/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms/0/matchFields/0/values/0")
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default()
}

/// A DaemonSet as the cache holds it after the API server stored it, with the status the caches show.
fn daemon_set(name: &str, status: DaemonSetStatus) -> DaemonSetObject {
    let mut ds = new_ds(name);
    ds.metadata.generation = Some(1);
    ds.metadata.resource_version = Some("1".into());
    ds.status = Some(status);
    ds
}

fn status(desired: i32, current: i32, ready: i32, available: i32) -> DaemonSetStatus {
    DaemonSetStatus {
        desired_number_scheduled: desired,
        current_number_scheduled: current,
        number_ready: ready,
        updated_number_scheduled: Some(current),
        number_available: Some(available),
        number_unavailable: Some(desired - available),
        observed_generation: Some(1),
        ..Default::default()
    }
}

/// Revision `number` of `ds`'s current template, as the controller would have created it.
fn revision_of(ds: &DaemonSetObject, number: i64) -> ControllerRevision {
    let data = revision_data(ds).unwrap();
    build_revision(ds, &data, number, controller_ref(ds)).unwrap()
}

/// The current revision of `ds`, stored; returns its hash.
fn insert_current_revision(
    api: &RecordedApi,
    c: &DaemonSetController,
    ds: &DaemonSetObject,
) -> String {
    let revision = revision_of(ds, 1);
    let hash = revision.metadata.labels.as_ref().unwrap()[REVISION_HASH_LABEL].clone();
    put_revision(api, c, &revision);
    hash
}

/// A Ready, Running daemon pod of `ds` on `node`, carrying `hash`.
fn daemon_pod(ds: &DaemonSetObject, name: &str, node: &str, hash: &str) -> CachedPod {
    let mut pod = pod_with(name, node, Some(hash), Some((true, 0)));
    pod.metadata.uid = Some(format!("uid-{name}"));
    pod.metadata.resource_version = Some("2".into());
    pod.metadata.owner_references = Some(vec![controller_ref(ds)]);
    if let Some(status) = pod.status.as_mut() {
        status.phase = Some("Running".into());
    }
    pod
}

#[tokio::test]
async fn a_daemon_set_in_its_desired_state_makes_no_api_call() {
    let (api, c) = cluster();
    let ds = daemon_set("foo", status(2, 2, 2, 2));
    let hash = insert_current_revision(&api, &c, &ds);
    put_ds(&api, &c, &ds);
    for (i, node) in ["node-0", "node-1"].into_iter().enumerate() {
        put_node(&api, &c, &new_node(node, None));
        put_pod(&api, &c, &daemon_pod(&ds, &format!("pod-{i}"), node, &hash));
    }
    let requeue = sync_key(c.as_ref(), &key("default/foo"))
        .await
        .expect("nothing to do");
    assert_eq!(requeue, Requeue::Never);
    assert_eq!(api.requests(), [], "nothing called");
}

#[tokio::test]
async fn unsatisfied_expectations_make_the_sync_dormant() {
    let (api, c) = cluster();
    // Two nodes, one pod: only a creation would call the API (the status already says so).
    let ds = daemon_set("foo", status(2, 1, 1, 1));
    let hash = insert_current_revision(&api, &c, &ds);
    put_ds(&api, &c, &ds);
    put_node(&api, &c, &new_node("node-0", None));
    put_node(&api, &c, &new_node("node-1", None));
    put_pod(&api, &c, &daemon_pod(&ds, "pod-0", "node-0", &hash));
    let foo = key("default/foo");

    c.expectations.expect_creations(&foo, 1);
    let requeue = sync_key(c.as_ref(), &foo)
        .await
        .expect("dormant: no creation attempted");
    assert_eq!(requeue, Requeue::Never);
    assert_eq!(api.requests(), [], "nothing called");

    // Once the creation is observed, the sync acts; a quota refuses the creation.
    c.expectations.creation_observed(&foo);
    api.react_times(1, Verb::Create, "pods", Reaction::QuotaExceeded);
    let err = sync_key(c.as_ref(), &foo)
        .await
        .expect_err("the creation is refused");
    assert!(
        matches!(err, SyncKeyError::Failed(super::SyncError::Manage(_))),
        "{err}"
    );
    assert!(err.to_string().contains("node-1"), "{err}");
    assert_eq!(api.actions(), ["create pods"]);
    // The refused creation lowered the expectations again, so the next sync may retry …
    assert!(c.expectations.satisfied_expectations(&foo));

    // … which creates the pod on node-1, and waits for it.
    api.clear_requests();
    let _ = sync_key(c.as_ref(), &foo).await.expect("created");
    let writes = api.writes();
    assert_eq!(api.actions(), ["create pods"]);
    assert_eq!(pinned_node(writes[0].body.as_ref().unwrap()), "node-1");
    assert!(!c.expectations.satisfied_expectations(&foo));
}

#[tokio::test]
async fn a_failed_pod_is_deleted_at_most_once_per_backoff() {
    let (api, c) = cluster();
    // One node whose only pod failed: counted as scheduled, neither ready nor available.
    let ds = daemon_set("foo", status(1, 1, 0, 0));
    let hash = insert_current_revision(&api, &c, &ds);
    put_ds(&api, &c, &ds);
    put_node(&api, &c, &new_node("node-0", None));
    let mut failed = daemon_pod(&ds, "pod-0", "node-0", &hash);
    failed.status = Some(CachedPodStatus {
        phase: Some("Failed".into()),
        ..Default::default()
    });
    put_pod(&api, &c, &failed);

    // The deletion is attempted, and does not go through.
    api.react_times(1, Verb::Delete, "pods", Reaction::Unavailable);
    let err = sync_key(c.as_ref(), &key("default/foo"))
        .await
        .expect_err("the failed pod's deletion is attempted");
    assert!(err.to_string().contains("deleting pod pod-0"), "{err}");
    assert_eq!(api.actions(), ["delete pods pod-0"]);
    assert_eq!(c.backoff().len(), 1, "the node's backoff started");
    // Still failed: within the backoff nothing is attempted.
    api.clear_requests();
    let requeue = sync_key(c.as_ref(), &key("default/foo"))
        .await
        .expect("held back by the backoff");
    assert!(
        matches!(requeue, Requeue::After(d, _) if !d.is_zero()),
        "looks again when the backoff ends: {requeue:?}"
    );
    assert_eq!(api.requests(), [], "nothing called");
}

#[tokio::test]
async fn a_node_event_wakes_only_daemon_sets_whose_decision_can_change() {
    let c = controller();
    let mut a = daemon_set("a", status(0, 0, 0, 0));
    a.spec.template.spec.as_mut().unwrap().node_selector = Some(labels(&[("role", "a")]));
    let mut b = daemon_set("b", status(0, 0, 0, 0));
    b.metadata.uid = Some("uid-b".into());
    b.spec.template.spec.as_mut().unwrap().node_selector = Some(labels(&[("role", "b")]));
    c.core.objects.cache_insert(a.clone());
    c.core.objects.cache_insert(b.clone());

    // A new node for `a` only.
    let node = Arc::new(new_node("n1", Some(labels(&[("role", "a")]))));
    c.on_node(&Change::Added(node.clone()), Origin::Watch);
    assert_eq!(drain_queue(&c.core).await, ["default/a"]);

    // `a` runs a pod there now. A heartbeat (status only) concerns nobody.
    c.pods.cache_insert(daemon_pod(&a, "a-pod", "n1", "h"));
    let mut heartbeat = (*node).clone();
    heartbeat.metadata.resource_version = Some("9".into());
    heartbeat.status = Some(Default::default());
    c.on_node(
        &Change::Updated {
            old: node.clone(),
            new: Arc::new(heartbeat),
        },
        Origin::Watch,
    );
    assert!(drain_queue(&c.core).await.is_empty());

    // A label neither DaemonSet looks at: both verdicts stay, and nothing is missing or misplaced.
    let zoned = Arc::new(new_node(
        "n1",
        Some(labels(&[("role", "a"), ("zone", "z")])),
    ));
    c.on_node(
        &Change::Updated {
            old: node.clone(),
            new: zoned.clone(),
        },
        Origin::Watch,
    );
    assert!(drain_queue(&c.core).await.is_empty());

    // Relabelled from `a` to `b`: `a` must delete its pod, `b` must create one.
    let relabelled = Arc::new(new_node("n1", Some(labels(&[("role", "b")]))));
    c.on_node(
        &Change::Updated {
            old: zoned,
            new: relabelled.clone(),
        },
        Origin::Watch,
    );
    assert_eq!(drain_queue(&c.core).await, ["default/a", "default/b"]);

    // A deleted node wakes the DaemonSets that wanted it (`b`) or have pods on it (`a`).
    c.on_node(&Change::Deleted(relabelled), Origin::Watch);
    assert_eq!(drain_queue(&c.core).await, ["default/a", "default/b"]);
}

#[tokio::test]
async fn a_pod_of_a_same_named_daemon_set_of_the_other_family_is_not_ours() {
    let c = controller();
    let ds = daemon_set("foo", status(0, 0, 0, 0));
    c.core.objects.cache_insert(ds.clone());
    let mut foreign = daemon_pod(&ds, "p", "node-0", "h");
    // The copy named `foo` is another object: another UID.
    if let Some(refs) = foreign.metadata.owner_references.as_mut() {
        refs[0].api_version = "minikcm.dev/v1".into();
        refs[0].uid = "copy-uid".into();
    }
    c.expectations.expect_creations(&key("default/foo"), 1);
    c.on_pod(&Change::Added(Arc::new(foreign)), Origin::Watch);
    assert!(!c.expectations.satisfied_expectations(&key("default/foo")));
    assert!(drain_queue(&c.core).await.is_empty());

    // Ours: observed and woken.
    c.on_pod(
        &Change::Added(Arc::new(daemon_pod(&ds, "q", "node-0", "h"))),
        Origin::Watch,
    );
    assert!(c.expectations.satisfied_expectations(&key("default/foo")));
    assert_eq!(drain_queue(&c.core).await, ["default/foo"]);
}

#[tokio::test]
async fn orphan_revisions_wake_matching_daemon_sets_and_owned_ones_do_not() {
    let c = controller();
    let ds = daemon_set("foo", status(0, 0, 0, 0));
    c.core.objects.cache_insert(ds.clone());
    let data = revision_data(&ds).unwrap();
    let owned = build_revision(&ds, &data, 1, controller_ref(&ds)).unwrap();
    c.on_revision(&Change::Added(Arc::new(owned.clone())), Origin::Watch);
    assert!(
        drain_queue(&c.core).await.is_empty(),
        "our own new revision needs no sync"
    );
    let mut orphan = owned.clone();
    orphan.metadata.owner_references = None;
    c.on_revision(&Change::Added(Arc::new(orphan)), Origin::Watch);
    assert_eq!(
        drain_queue(&c.core).await,
        ["default/foo"],
        "someone may adopt the orphan"
    );
    c.on_revision(&Change::Deleted(Arc::new(owned)), Origin::Watch);
    assert_eq!(
        drain_queue(&c.core).await,
        ["default/foo"],
        "a lost revision must be rebuilt"
    );
}

#[tokio::test]
async fn an_empty_selector_is_refused_without_touching_anything() {
    let (api, c) = cluster();
    let mut ds = daemon_set("foo", status(0, 0, 0, 0));
    ds.spec.selector = LabelSelector::default();
    put_ds(&api, &c, &ds);
    put_node(&api, &c, &new_node("node-0", None));
    let requeue = sync_key(c.as_ref(), &key("default/foo"))
        .await
        .expect("SelectingAll, no work");
    assert_eq!(requeue, Requeue::Never);
    assert_eq!(
        flushed_events(&api, &c.core.recorder).await,
        ["SelectingAll"]
    );
    assert!(
        api.requests().iter().all(|r| r.plural() == "events"),
        "only the event: {:?}",
        api.requests()
    );
}

#[tokio::test]
async fn deleting_a_daemon_set_forgets_its_expectations() {
    let (api, c) = cluster();
    let ds = daemon_set("foo", status(0, 0, 0, 0));
    c.expectations.expect_creations(&key("default/foo"), 5);
    c.on_daemon_set(&Change::Deleted(Arc::new(ds)), Origin::Watch);
    assert!(c.expectations.get(&key("default/foo")).is_none());
    assert_eq!(drain_queue(&c.core).await, ["default/foo"]);
    // The sync of a DaemonSet that is gone does nothing and succeeds.
    let requeue = sync_key(c.as_ref(), &key("default/foo"))
        .await
        .expect("gone");
    assert_eq!(requeue, Requeue::Never);
    assert_eq!(api.requests(), [], "nothing called");
}

#[tokio::test]
async fn placements_are_reparsed_when_the_generation_changes() {
    let c = controller();
    let mut ds = daemon_set("foo", status(0, 0, 0, 0));
    let node = new_node("n", Some(BTreeMap::from([("role".into(), "x".into())])));
    assert!(c.placements.get(&ds).evaluate(&node).should_run);
    ds.spec.template.spec.as_mut().unwrap().node_selector = Some(labels(&[("role", "y")]));
    assert!(
        c.placements.get(&ds).evaluate(&node).should_run,
        "same generation: the cached rules (the API server bumps the generation on a template change)"
    );
    ds.metadata.generation = Some(2);
    assert!(!c.placements.get(&ds).evaluate(&node).should_run);
}

/// The feature gates reach the controller: `TaintTolerationComparisonOperators` decides whether a `Gt`
/// toleration tolerates a numeric taint, `StaleControllerConsistencyDaemonSet` whether a sync waits for
/// the caches to show the controller's own writes.
#[tokio::test]
async fn feature_gates_reach_placement_and_read_your_own_writes() {
    use k8s_openapi::api::core::v1::{Taint, Toleration};
    use mini_kcm_runtime::api::kinds::ApiFamily;
    use mini_kcm_runtime::controller::ControllerOptions;
    use mini_kcm_runtime::controller::offline::offline_controller_with;
    use mini_kcm_runtime::switches::features::{Feature, FeatureGates};

    let mut ds = daemon_set("foo", status(0, 0, 0, 0));
    ds.spec.template.spec.as_mut().unwrap().tolerations = Some(vec![Toleration {
        key: Some("gpu-mem".into()),
        operator: Some("Gt".into()),
        value: Some("8".into()),
        ..Default::default()
    }]);
    let mut node = new_node("n", None);
    node.spec.get_or_insert_with(Default::default).taints = Some(vec![Taint {
        key: "gpu-mem".into(),
        value: Some("16".into()),
        effect: "NoSchedule".into(),
        ..Default::default()
    }]);
    let with = |gates: FeatureGates| -> Arc<DaemonSetController> {
        let mut options = ControllerOptions::new(ApiFamily::Apps, 1);
        options.features = gates;
        offline_controller_with(&mini_kcm_runtime::recorded_api::RecordedApi::new(), options)
    };
    let default = controller();
    assert!(!default.placements.get(&ds).evaluate(&node).should_run);
    let on = with(FeatureGates::default().with(Feature::TaintTolerationComparisonOperators, true));
    assert!(on.placements.get(&ds).evaluate(&node).should_run);

    let written = {
        let mut ds = ds.clone();
        ds.metadata.resource_version = Some("99".into());
        ds
    };
    let owner = ObjectKey::of(&ds.metadata);
    default.core.consistency.record_write(&owner, &written);
    assert!(
        !default.core.consistency.is_ready(&owner),
        "the gate is on by default"
    );
    let off =
        with(FeatureGates::default().with(Feature::StaleControllerConsistencyDaemonSet, false));
    off.core.consistency.record_write(&owner, &written);
    assert!(off.core.consistency.is_ready(&owner));
}

/// A surged pod beside an old one: the rolling update waits for the new pod's availability to delete the
/// old pod, so the sync must schedule its own recheck for that moment. The status (which counts only the
/// old, oldest pod) shows nothing to wait for, and the pod handler's recheck may have been merged into
/// an earlier one by the queue.
#[tokio::test]
async fn a_sync_waiting_on_a_surged_pod_rechecks_when_it_becomes_available() {
    use k8s_openapi::api::apps::v1::{DaemonSetUpdateStrategy, RollingUpdateDaemonSet};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    use k8s_openapi::jiff::{Timestamp, ToSpan};

    let (api, c) = cluster();
    let mut ds = daemon_set("foo", status(1, 1, 1, 1));
    ds.spec.min_ready_seconds = Some(10);
    ds.spec.update_strategy = Some(DaemonSetUpdateStrategy {
        type_: Some("RollingUpdate".into()),
        rolling_update: Some(RollingUpdateDaemonSet {
            max_surge: Some(IntOrString::Int(1)),
            max_unavailable: Some(IntOrString::Int(0)),
        }),
    });
    if let Some(status) = ds.status.as_mut() {
        status.updated_number_scheduled = Some(0);
    }
    let hash = insert_current_revision(&api, &c, &ds);
    put_ds(&api, &c, &ds);
    put_node(&api, &c, &new_node("node-0", None));
    let now = Timestamp::now();
    let at = |ago: i64| Some(Time(now.checked_sub(ago.seconds()).unwrap()));
    let mut old = daemon_pod(&ds, "old", "node-0", "old-hash");
    old.metadata.creation_timestamp = at(120);
    let mut new = daemon_pod(&ds, "new", "node-0", &hash);
    new.metadata.creation_timestamp = at(10);
    // Ready for 4 of the 10 seconds it needs.
    new.status.as_mut().unwrap().conditions.as_mut().unwrap()[0].last_transition_time = at(4);
    put_pod(&api, &c, &old);
    put_pod(&api, &c, &new);

    let requeue = sync_key(c.as_ref(), &key("default/foo"))
        .await
        .expect("nothing to write while the new pod is not yet available");
    assert_eq!(api.requests(), [], "nothing called");
    let Requeue::After(ready_in, _) = requeue else {
        panic!("no recheck asked for: {requeue:?}");
    };
    assert!(
        ready_in > std::time::Duration::from_secs(4)
            && ready_in <= std::time::Duration::from_secs(6),
        "recheck in {ready_in:?}, expected when the new pod becomes available (~6 s)"
    );
}

#[tokio::test]
async fn a_node_added_wakes_its_daemon_set_saying_so_and_listed_nodes_are_low() {
    let c = controller();
    c.core
        .objects
        .cache_insert(daemon_set("agent", status(0, 0, 0, 0)));
    let listed = Arc::new(new_node("kwok-node-1", None));
    c.on_node(&Change::Added(listed), Origin::InitialList);
    let queued = c.core.queue.snapshot(10).queued;
    assert_eq!(queued.len(), 1);
    assert_eq!(
        (queued[0].priority, queued[0].reasons.clone()),
        (Priority::Low, vec!["initial list".into()])
    );
    let (_, woken) = c.core.queue.get_woken().await.unwrap();
    c.core.queue.done(&ObjectKey::new("default", "agent"));
    assert_eq!(woken.priority, Priority::Low);

    let added = Arc::new(new_node("kwok-node-2", None));
    c.on_node(&Change::Added(added), Origin::Watch);
    let (_, woken) = c.core.queue.get_woken().await.unwrap();
    assert_eq!(woken.reasons, ["node kwok-node-2 added"]);
    assert_eq!(woken.priority, Priority::Fresh);
}

// ---- read-your-own-writes: after each kind of write, the next sync waits for the cache ----

/// The next sync is skipped, calling nothing, until the caches show the last sync's writes.
async fn assert_waits_for_the_cache(api: &RecordedApi, c: &DaemonSetController) {
    api.clear_requests();
    let err = sync_key(c, &key("default/foo"))
        .await
        .expect_err("the cache does not show the write yet");
    assert!(matches!(err, SyncKeyError::StaleCache { .. }), "{err}");
    assert_eq!(api.requests(), [], "a skipped sync calls nothing");
}

/// Syncs once the caches show the writes; returns its writes.
async fn sync_after_the_cache_caught_up(api: &RecordedApi, c: &DaemonSetController) -> Vec<String> {
    api.clear_requests();
    let _ = sync_key(c, &key("default/foo"))
        .await
        .expect("the cache shows the write");
    api.actions()
}

#[tokio::test]
async fn after_creating_a_pod_the_next_sync_waits_until_the_cache_shows_it() {
    let (api, c) = cluster();
    let ds = daemon_set("foo", status(1, 0, 0, 0));
    insert_current_revision(&api, &c, &ds);
    put_ds(&api, &c, &ds);
    put_node(&api, &c, &new_node("node-0", None));
    let _ = sync_key(c.as_ref(), &key("default/foo"))
        .await
        .expect("creates");
    assert_eq!(api.actions(), ["create pods"]);

    assert_waits_for_the_cache(&api, &c).await;
    // The watch delivers the pod: the cache shows it and its handler counts the creation.
    api.feed(&c.pods, &());
    let created = c.pods.list().pop().expect("the pod is cached");
    c.on_pod(&Change::Added(created), Origin::Watch);
    // A worker takes the key the event queued.
    assert_eq!(drain_queue(&c.core).await, ["default/foo"]);
    // Now the status counts it.
    assert_eq!(
        sync_after_the_cache_caught_up(&api, &c).await,
        ["update daemonsets/status foo"]
    );
}

#[tokio::test]
async fn after_deleting_a_pod_the_next_sync_waits_until_the_cache_shows_it() {
    let (api, c) = cluster();
    let ds = daemon_set("foo", status(1, 1, 1, 1));
    let hash = insert_current_revision(&api, &c, &ds);
    put_ds(&api, &c, &ds);
    put_node(&api, &c, &new_node("node-0", None));
    // Two pods on the node: the younger one goes.
    put_pod(&api, &c, &daemon_pod(&ds, "pod-0", "node-0", &hash));
    let mut younger = daemon_pod(&ds, "pod-1", "node-0", &hash);
    younger.metadata.creation_timestamp = Some(Time(Timestamp::now()));
    put_pod(&api, &c, &younger);
    let _ = sync_key(c.as_ref(), &key("default/foo"))
        .await
        .expect("deletes");
    assert_eq!(api.actions(), ["delete pods pod-1"]);

    assert_waits_for_the_cache(&api, &c).await;
    // The watch delivers the deletion as a real API server's graceful one: the pod terminating, at the
    // latest resourceVersion. (The recorded API removes it at once, and a test cache cannot drop it.)
    let rv = latest_resource_version(&api).await;
    let old = c.pods.get("default", "pod-1").expect("cached");
    let mut terminating = old.as_ref().clone();
    terminating.metadata.deletion_timestamp = Some(Time(Timestamp::now()));
    terminating.metadata.resource_version = Some(rv);
    c.pods.cache_insert(terminating.clone());
    c.on_pod(
        &Change::Updated {
            old,
            new: Arc::new(terminating),
        },
        Origin::Watch,
    );
    assert_eq!(
        sync_after_the_cache_caught_up(&api, &c).await,
        Vec::<String>::new()
    );
}

#[tokio::test]
async fn after_creating_a_revision_the_next_sync_waits_until_the_cache_shows_it() {
    let (api, c) = cluster();
    // No node, no revision yet: the revision is the only write.
    let ds = daemon_set("foo", status(0, 0, 0, 0));
    put_ds(&api, &c, &ds);
    let _ = sync_key(c.as_ref(), &key("default/foo"))
        .await
        .expect("creates the revision");
    assert_eq!(api.actions(), ["create controllerrevisions"]);

    assert_waits_for_the_cache(&api, &c).await;
    api.feed(&c.revisions, &());
    assert_eq!(
        sync_after_the_cache_caught_up(&api, &c).await,
        Vec::<String>::new()
    );
}

#[tokio::test]
async fn after_labelling_a_revision_the_next_sync_waits_until_the_cache_shows_it() {
    let (api, c) = cluster();
    let ds = daemon_set("foo", status(0, 0, 0, 0));
    put_ds(&api, &c, &ds);
    let mut unlabelled = revision_of(&ds, 1);
    if let Some(labels) = unlabelled.metadata.labels.as_mut() {
        labels.remove(REVISION_HASH_LABEL);
    }
    put_revision(&api, &c, &unlabelled);
    let name = unlabelled.metadata.name.clone().unwrap();
    let _ = sync_key(c.as_ref(), &key("default/foo"))
        .await
        .expect("labels the revision");
    assert_eq!(api.actions(), [format!("patch controllerrevisions {name}")]);

    assert_waits_for_the_cache(&api, &c).await;
    api.feed(&c.revisions, &());
    assert_eq!(
        sync_after_the_cache_caught_up(&api, &c).await,
        Vec::<String>::new()
    );
    let labelled: ControllerRevision = api.get(&(), "default", &name).unwrap();
    assert_eq!(labelled.metadata.labels.unwrap()[REVISION_HASH_LABEL], name);
}

/// A revision of `ds` with another image, numbered `number`.
fn old_revision(ds: &DaemonSetObject, image: &str, number: i64) -> ControllerRevision {
    let mut old = ds.clone();
    if let Some(spec) = old.spec.template.spec.as_mut() {
        spec.containers[0].image = Some(image.into());
    }
    revision_of(&old, number)
}

#[tokio::test]
async fn after_renumbering_a_revision_the_next_sync_waits_until_the_cache_shows_it() {
    let (api, c) = cluster();
    let ds = daemon_set("foo", status(0, 0, 0, 0));
    put_ds(&api, &c, &ds);
    // Rolled back: the current template is revision 1's, revision 2 is another.
    let current = revision_of(&ds, 1);
    put_revision(&api, &c, &current);
    put_revision(&api, &c, &old_revision(&ds, "foo/bar:2", 2));
    let name = current.metadata.name.clone().unwrap();
    let _ = sync_key(c.as_ref(), &key("default/foo"))
        .await
        .expect("renumbers");
    assert_eq!(api.actions(), [format!("patch controllerrevisions {name}")]);
    let renumbered: ControllerRevision = api.get(&(), "default", &name).unwrap();
    assert_eq!(renumbered.revision, Some(3));

    assert_waits_for_the_cache(&api, &c).await;
    api.feed(&c.revisions, &());
    assert_eq!(
        sync_after_the_cache_caught_up(&api, &c).await,
        Vec::<String>::new()
    );
}

#[tokio::test]
async fn after_deleting_an_old_revision_the_next_sync_waits_until_the_cache_shows_it() {
    let (api, c) = cluster();
    // Three old revisions, a history limit of two: the oldest goes.
    let ds = daemon_set("foo", status(0, 0, 0, 0));
    put_ds(&api, &c, &ds);
    let oldest = old_revision(&ds, "foo/bar:1", 1);
    put_revision(&api, &c, &oldest);
    put_revision(&api, &c, &old_revision(&ds, "foo/bar:2", 2));
    put_revision(&api, &c, &old_revision(&ds, "foo/bar:3", 3));
    put_revision(&api, &c, &revision_of(&ds, 4));
    let name = oldest.metadata.name.clone().unwrap();
    let _ = sync_key(c.as_ref(), &key("default/foo"))
        .await
        .expect("cleans up");
    assert_eq!(
        api.actions(),
        [format!("delete controllerrevisions {name}")]
    );

    assert_waits_for_the_cache(&api, &c).await;
    // The revision cache reaches the deletion's resourceVersion. A test cache cannot drop the
    // revision, so it shows it as being deleted at that version; the cleanup then deletes it again,
    // which finds it gone (NotFound: done) and records nothing.
    let rv = latest_resource_version(&api).await;
    let mut deleted = c
        .revisions
        .get("default", &name)
        .expect("cached")
        .as_ref()
        .clone();
    deleted.metadata.deletion_timestamp = Some(Time(Timestamp::now()));
    deleted.metadata.resource_version = Some(rv);
    c.revisions.cache_insert(deleted);
    assert_eq!(
        sync_after_the_cache_caught_up(&api, &c).await,
        [format!("delete controllerrevisions {name}")]
    );
    assert!(
        c.core.consistency.is_ready(&key("default/foo")),
        "a deletion that found nothing is no write to wait for"
    );
}

#[tokio::test]
async fn after_writing_the_status_the_next_sync_waits_until_the_cache_shows_it() {
    let (api, c) = cluster();
    // One node with its Ready pod; the cached status still says nothing is scheduled.
    let ds = daemon_set("foo", status(0, 0, 0, 0));
    let hash = insert_current_revision(&api, &c, &ds);
    put_ds(&api, &c, &ds);
    put_node(&api, &c, &new_node("node-0", None));
    put_pod(&api, &c, &daemon_pod(&ds, "pod-0", "node-0", &hash));
    let _ = sync_key(c.as_ref(), &key("default/foo"))
        .await
        .expect("writes the status");
    assert_eq!(api.actions(), ["update daemonsets/status foo"]);

    assert_waits_for_the_cache(&api, &c).await;
    api.feed(&c.core.objects, &ds_resource());
    assert_eq!(
        sync_after_the_cache_caught_up(&api, &c).await,
        Vec::<String>::new()
    );
}
