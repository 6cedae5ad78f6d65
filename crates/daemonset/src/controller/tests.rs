//! Controller-level unit tests: the controller on caches filled by hand and a client that cannot reach any
//! server, so any API call the controller attempts shows up as an error. Mirrors upstream's
//! TestDeleteControllerAndExpectations-style dormancy checks, TestAddNode, TestUpdateNode and the
//! controller-reference resolution of the pod and history handlers.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSetStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, OwnerReference};
use mini_kcm_runtime::controller::ObjectKey;
use mini_kcm_runtime::controller::offline::{drain_queue, key, offline_controller};
use mini_kcm_runtime::informers::{Change, Origin};
use mini_kcm_runtime::pods::cached::{CachedPod, CachedPodStatus};
use mini_kcm_workqueue::Priority;

use super::DaemonSetController;
use crate::DaemonSetObject;
use crate::history::{build_revision, revision_data};
use crate::test_fixtures::pod_with;
use crate::test_fixtures::{labels, new_ds, new_node};
use mini_kcm_runtime::controller::{Requeue, SyncKeyError, sync_key};

fn controller() -> Arc<DaemonSetController> {
    offline_controller(&mini_kcm_runtime::recorded_api::RecordedApi::new())
}

fn controller_ref(ds: &DaemonSetObject) -> OwnerReference {
    OwnerReference {
        api_version: "apps/v1".into(),
        kind: "DaemonSet".into(),
        name: ds.metadata.name.clone().unwrap(),
        uid: ds.metadata.uid.clone().unwrap(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
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

/// The current revision of `ds`, as the controller would have created it; returns its hash.
fn insert_current_revision(c: &DaemonSetController, ds: &DaemonSetObject) -> String {
    let data = revision_data(ds).unwrap();
    let mut revision: ControllerRevision =
        build_revision(ds, &data, 1, controller_ref(ds)).unwrap();
    revision.metadata.resource_version = Some("1".into());
    let hash = revision.metadata.labels.as_ref().unwrap()["controller-revision-hash"].clone();
    c.revisions.cache_insert(revision);
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
    let c = controller();
    let ds = daemon_set("foo", status(2, 2, 2, 2));
    let hash = insert_current_revision(&c, &ds);
    c.core.objects.cache_insert(ds.clone());
    for (i, node) in ["node-0", "node-1"].into_iter().enumerate() {
        c.nodes.cache_insert(new_node(node, None));
        c.pods
            .cache_insert(daemon_pod(&ds, &format!("pod-{i}"), node, &hash));
    }
    // Any request would fail against the unreachable client.
    let requeue = sync_key(c.as_ref(), &key("default/foo"))
        .await
        .expect("nothing to do, nothing called");
    assert_eq!(requeue, Requeue::Never);
}

#[tokio::test]
async fn unsatisfied_expectations_make_the_sync_dormant() {
    let c = controller();
    // Two nodes, one pod: only a creation would call the API (the status already says so).
    let ds = daemon_set("foo", status(2, 1, 1, 1));
    let hash = insert_current_revision(&c, &ds);
    c.core.objects.cache_insert(ds.clone());
    c.nodes.cache_insert(new_node("node-0", None));
    c.nodes.cache_insert(new_node("node-1", None));
    c.pods
        .cache_insert(daemon_pod(&ds, "pod-0", "node-0", &hash));

    c.expectations.expect_creations(&key("default/foo"), 1);
    let requeue = sync_key(c.as_ref(), &key("default/foo"))
        .await
        .expect("dormant: no creation attempted");
    assert_eq!(requeue, Requeue::Never);

    // Once the creation is observed, the sync acts (and, with no server, fails trying).
    c.expectations.creation_observed(&key("default/foo"));
    let err = sync_key(c.as_ref(), &key("default/foo"))
        .await
        .expect_err("a creation is attempted");
    assert!(
        matches!(err, SyncKeyError::Failed(super::SyncError::Manage(_))),
        "{err}"
    );
    assert!(err.to_string().contains("node-1"), "{err}");
    // The failed creation lowered the expectations again, so the next sync may retry.
    assert!(c.expectations.satisfied_expectations(&key("default/foo")));
}

#[tokio::test]
async fn a_failed_pod_is_deleted_at_most_once_per_backoff() {
    let c = controller();
    // One node whose only pod failed: counted as scheduled, neither ready nor available.
    let ds = daemon_set("foo", status(1, 1, 0, 0));
    let hash = insert_current_revision(&c, &ds);
    c.core.objects.cache_insert(ds.clone());
    c.nodes.cache_insert(new_node("node-0", None));
    let mut failed = daemon_pod(&ds, "pod-0", "node-0", &hash);
    failed.status = Some(CachedPodStatus {
        phase: Some("Failed".into()),
        ..Default::default()
    });
    c.pods.cache_insert(failed);

    let err = sync_key(c.as_ref(), &key("default/foo"))
        .await
        .expect_err("the failed pod's deletion is attempted");
    assert!(err.to_string().contains("deleting pod pod-0"), "{err}");
    assert_eq!(c.backoff().len(), 1, "the node's backoff started");
    // Still failed (the deletion did not happen): within the backoff nothing is attempted.
    let requeue = sync_key(c.as_ref(), &key("default/foo"))
        .await
        .expect("held back by the backoff");
    assert!(
        matches!(requeue, Requeue::After(d, _) if !d.is_zero()),
        "looks again when the backoff ends: {requeue:?}"
    );
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
    let c = controller();
    let mut ds = daemon_set("foo", status(0, 0, 0, 0));
    ds.spec.selector = LabelSelector::default();
    c.core.objects.cache_insert(ds);
    c.nodes.cache_insert(new_node("node-0", None));
    let requeue = sync_key(c.as_ref(), &key("default/foo"))
        .await
        .expect("SelectingAll, no work");
    assert_eq!(requeue, Requeue::Never);
}

#[tokio::test]
async fn deleting_a_daemon_set_forgets_its_expectations() {
    let c = controller();
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
    use mini_kcm_runtime::controller::ControllerOptions;
    use mini_kcm_runtime::controller::offline::offline_controller_with;
    use mini_kcm_runtime::features::{Feature, FeatureGates};
    use mini_kcm_runtime::kinds::ApiFamily;

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

    let c = controller();
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
    let hash = insert_current_revision(&c, &ds);
    c.core.objects.cache_insert(ds.clone());
    c.nodes.cache_insert(new_node("node-0", None));
    let now = Timestamp::now();
    let at = |ago: i64| Some(Time(now.checked_sub(ago.seconds()).unwrap()));
    let mut old = daemon_pod(&ds, "old", "node-0", "old-hash");
    old.metadata.creation_timestamp = at(120);
    let mut new = daemon_pod(&ds, "new", "node-0", &hash);
    new.metadata.creation_timestamp = at(10);
    // Ready for 4 of the 10 seconds it needs.
    new.status.as_mut().unwrap().conditions.as_mut().unwrap()[0].last_transition_time = at(4);
    c.pods.cache_insert(old);
    c.pods.cache_insert(new);

    let requeue = sync_key(c.as_ref(), &key("default/foo"))
        .await
        .expect("nothing to write while the new pod is not yet available");
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
