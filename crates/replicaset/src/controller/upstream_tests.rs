//! Ports of upstream's `pkg/controller/replicaset/replica_set_test.go` (v1.37.2, unchanged since v1.36.3) that drive the
//! controller: each runs whole syncs (`sync_key`) against the recorded API and asserts the requests made
//! (verbs, resources, names, and the bodies where they matter) and the events, where upstream counts the
//! calls of its `FakePodControl` and the actions of its fake clientset. Handler tests assert the keys
//! queued. Each test names the upstream test it ports; the fixtures are `super::tests`'.
//!
//! Ported elsewhere: TestSyncReplicaSetDoesNothing and TestOverlappingRSs (`super::tests`), the pure
//! decisions (`crate::plan`: TestGetPodsToDelete; `crate::status`: TestCalculateStatus,
//! TestCalculateStatusConditions), TestSlowStartBatch (`mini_kcm_runtime::pods::slow_start`).
//!
//! Not ported: TestWatchControllers and TestWatchPods (they run informers on a fake watch; the recorded
//! API serves no watches, and the handlers they reach are tested here directly); TestRSSyncExpectations
//! (it swaps the expectations for a fake that adds a pod while they are checked; ours cannot be
//! swapped, and `sync_replica_set` reads the expectations before the pods, as upstream);
//! TestGetCondition, TestSetCondition, TestRemoveCondition (helpers we do not have: `crate::status`
//! adds and removes the one condition the controller owns); TestGetPodKeys (`ObjectKey::of`);
//! BenchmarkGetReplicaSetsWithSameController.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, OwnerReference, Time};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use mini_kcm_runtime::api::kinds::{ApiFamily, ReplicaSetObject};
use mini_kcm_runtime::controller::expectations::ExpectedCounts;
use mini_kcm_runtime::controller::offline::{drain_queue, key, offline_controller_with};
use mini_kcm_runtime::controller::ownership::{AdoptionRefused, ClaimError};
use mini_kcm_runtime::controller::worker::{SyncFailure, error_chain};
use mini_kcm_runtime::controller::{ControllerOptions, Requeue, SyncKeyError, sync_key, wake};
use mini_kcm_runtime::informers::{Change, Origin};
use mini_kcm_runtime::recorded_api::{Reaction, RecordedApi, Verb};
use mini_kcm_runtime::switches::features::{Feature, FeatureGates};

use super::status_write::update_status;
use super::tests::{
    cached, controller, deliver_pods, deliver_pods_except, deliver_replica_sets, events, labels,
    pod, replica_set, seed, stored_pods, sync_done, with_status, written,
};
use super::{ReplicaSetController, SyncError};
use crate::BURST_REPLICAS;
use crate::status::ManageFailure;

/// Upstream's `newReplicaSet` in our fixtures: `ns/foobar`, selecting and labelling `app=foo`, its
/// status at `replicas` pods.
fn foobar(replicas: i32) -> ReplicaSetObject {
    replica_set("foobar", "foobar-uid", replicas, "foo")
}

/// A Running, Ready pod of `ns/foobar`.
fn foobar_pod(name: &str) -> k8s_openapi::api::core::v1::Pod {
    pod(name, "foo", Some(("foobar", "foobar-uid")))
}

fn foobar_key() -> mini_kcm_runtime::controller::ObjectKey {
    key("ns/foobar")
}

/// The controller with a feature gate turned over.
fn controller_with(api: &RecordedApi, feature: Feature, on: bool) -> Arc<ReplicaSetController> {
    let mut options = ControllerOptions::new(ApiFamily::Apps, 1);
    options.features = FeatureGates::default().with(feature, on);
    offline_controller_with(api, options)
}

fn expected(add: i64, del: i64) -> Option<ExpectedCounts> {
    Some(ExpectedCounts { add, del })
}

/// Upstream lets 10 of 100 creations through and then refuses the rest, and checks that one sync makes
/// no more create calls than the slow-start batches that reach the refusal. The recorded API cannot let
/// a number of requests through before it refuses, so here the quota refuses from the first creation:
/// one call, not 100, and the sync reports the quota's refusal.
///
/// upstream: TestSyncReplicaSetCreateFailures
#[tokio::test]
async fn a_quota_refusing_pods_stops_the_creations_at_the_first_refused_batch() {
    let api = RecordedApi::new();
    let c = controller(&api);
    seed(&api, &c, &[with_status(foobar(100), 0)], &[]);
    api.react(Verb::Create, "pods", Reaction::QuotaExceeded);

    let err = sync_key(c.as_ref(), &foobar_key())
        .await
        .expect_err("the quota refuses every pod");
    assert!(
        matches!(&err, SyncKeyError::Failed(SyncError::Manage(ManageFailure { reason: "FailedCreate", message }))
            if message.contains("exceeded quota")),
        "{err}"
    );
    assert_eq!(
        api.actions(),
        ["create pods", "update replicasets/status foobar"]
    );
    let condition = &written(&api, 1)["status"]["conditions"][0];
    assert_eq!(condition["type"], "ReplicaFailure");
    assert_eq!(condition["status"], "True");
    assert_eq!(condition["reason"], "FailedCreate");
    assert!(
        condition["message"]
            .as_str()
            .is_some_and(|m| m.contains("exceeded quota")),
        "{condition}"
    );
    assert!(stored_pods(&api).is_empty());
    // The 99 creations never attempted are not waited for: the next sync may try again.
    assert!(c.expectations.satisfied_expectations(&foobar_key()));
    assert_eq!(events(&api, &c).await, ["FailedCreate"]);
}

/// Upstream changes the cached ReplicaSet behind the controller's back between syncs: this shows the
/// cache the API's ReplicaSet with a status of `pods` pods and no condition.
fn cache_says(api: &RecordedApi, c: &ReplicaSetController, pods: i32) {
    let stored = api
        .get::<ReplicaSetObject>(&c.core.resource, "ns", "foobar")
        .expect("stored");
    c.core.objects.cache_insert(with_status(stored, pods));
}

/// While a creation is awaited the sync creates nothing but still writes a changed status; a creation
/// that fails is not awaited, so the next sync creates again. Upstream's pod control records no write
/// for read-your-own-writes and its cache never shows the created pods, so the consistency gate is off
/// here: with it on, every sync after a creation would (rightly) wait for the cache instead.
///
/// upstream: TestSyncReplicaSetDormancy
#[tokio::test]
async fn expectations_hold_creations_back_but_not_status_updates() {
    let api = RecordedApi::new();
    let c = controller_with(&api, Feature::StaleControllerConsistencyReplicaSet, false);
    seed(
        &api,
        &c,
        &[with_status(foobar(2), 1)],
        &[foobar_pod("pod0")],
    );
    let mut steps = Vec::new();
    let mut results = Vec::new();
    let mut sync = async |api: &RecordedApi| {
        let before = api.actions().len();
        let result = sync_key(c.as_ref(), &foobar_key()).await;
        steps.push(api.actions().split_off(before));
        results.push(result.map_err(|e| e.to_string()));
    };

    // 1 of 2: creates one, and waits for it.
    sync(&api).await;
    assert_eq!(c.expectations.get(&foobar_key()), expected(1, 0));
    // The status looks stale: written, but no creation while one is awaited.
    cache_says(&api, &c, 0);
    sync(&api).await;
    // The creation is observed; the next one is refused.
    c.expectations.creation_observed(&foobar_key());
    cache_says(&api, &c, 1);
    api.react_times(1, Verb::Create, "pods", Reaction::QuotaExceeded);
    sync(&api).await;
    assert!(c.expectations.satisfied_expectations(&foobar_key()));
    // The refused creation is not awaited: the next sync creates.
    cache_says(&api, &c, 1);
    sync(&api).await;

    assert_eq!(
        steps,
        [
            vec!["create pods"],
            vec!["update replicasets/status foobar"],
            vec!["create pods", "update replicasets/status foobar"],
            vec!["create pods"],
        ]
    );
    assert!(results[0].is_ok() && results[1].is_ok() && results[3].is_ok());
    assert!(
        results[2]
            .as_ref()
            .is_err_and(|e| e.contains("exceeded quota")),
        "{results:?}"
    );
    assert_eq!(stored_pods(&api).len(), 3);
    assert_eq!(
        events(&api, &c).await,
        ["FailedCreate", "SuccessfulCreate", "SuccessfulCreate"]
    );
}

/// A ReplicaSet named `name` in `namespace` selecting `app=<selector>`, or with an empty selector.
fn selecting(name: &str, namespace: &str, selector: Option<&str>) -> ReplicaSetObject {
    let mut rs = replica_set(name, &format!("{name}-uid"), 1, "unused");
    rs.metadata.namespace = Some(namespace.into());
    rs.spec.selector = LabelSelector {
        match_labels: selector.map(labels),
        ..Default::default()
    };
    rs
}

/// Which ReplicaSets a new orphan wakes: those of its namespace whose (non-empty) selector matches its
/// labels; none for a pod without labels. The ReplicaSets accumulate from case to case, as upstream's.
///
/// upstream: TestPodControllerLookup
#[tokio::test]
async fn an_orphan_wakes_the_replica_sets_of_its_namespace_that_select_it() {
    let api = RecordedApi::new();
    let c = controller(&api);
    let cases = [
        (
            "a pod without labels matches no ReplicaSet, not even one without a selector",
            selecting("basic", "ns", None),
            None,
            vec![],
        ),
        (
            "matching labels in another namespace",
            selecting("foo", "other", Some("bar")),
            Some("bar"),
            vec![],
        ),
        (
            "matching labels in the same namespace",
            selecting("bar", "ns", Some("bar")),
            Some("bar"),
            vec!["ns/bar".to_string()],
        ),
    ];
    for (name, rs, pod_app, woken) in cases {
        c.core.objects.cache_insert(rs);
        let mut orphan = pod("orphan", "x", None);
        orphan.metadata.labels = pod_app.map(labels);
        c.on_pod(&Change::Added(cached(orphan)), Origin::Watch);
        assert_eq!(drain_queue(&c.core).await, woken, "{name}");
    }
    assert_eq!(api.requests(), []);
}

/// An owned pod that vanished while the watch was down (its last known state, from a relist) wakes its
/// ReplicaSet.
///
/// upstream: TestDeleteFinalStateUnknown
#[tokio::test]
async fn a_pod_deleted_while_the_watch_was_down_wakes_its_replica_set() {
    let api = RecordedApi::new();
    let c = controller(&api);
    c.core.objects.cache_insert(foobar(1));
    c.on_pod(&Change::Deleted(cached(foobar_pod("pod0"))), Origin::Relist);
    assert_eq!(drain_queue(&c.core).await, ["ns/foobar"]);
    assert_eq!(api.requests(), []);
}

/// Which ReplicaSets a pod update wakes: its controller (also after a relabelling), and when the
/// controller reference goes, the former controller too and every ReplicaSet selecting the orphan.
///
/// upstream: TestUpdatePods
#[tokio::test]
async fn a_pod_update_wakes_its_old_and_new_owners() {
    let api = RecordedApi::new();
    let c = controller(&api);
    // `foobar` selects app=one, `barfoo` app=two.
    c.core
        .objects
        .cache_insert(replica_set("foobar", "uid-1", 1, "one"));
    c.core
        .objects
        .cache_insert(replica_set("barfoo", "uid-2", 1, "two"));
    let version = |app: &str, owner: Option<(&str, &str)>, rv: &str| {
        let mut p = pod("pod0", app, owner);
        p.metadata.resource_version = Some(rv.into());
        cached(p)
    };
    let rs1 = Some(("foobar", "uid-1"));
    let rs2 = Some(("barfoo", "uid-2"));
    let cases = [
        (
            "controller kept, labels changed: the controller",
            ("one", rs1),
            ("two", rs1),
            vec!["ns/foobar"],
        ),
        (
            "controller reference removed: the former controller, which also selects it",
            ("two", rs2),
            ("two", None),
            vec!["ns/barfoo"],
        ),
        (
            "controller reference removed: the former controller and the one selecting it",
            ("two", rs1),
            ("two", None),
            vec!["ns/barfoo", "ns/foobar"],
        ),
        (
            "controller kept, relabelled into another selector: the controller only",
            ("one", rs2),
            ("two", rs2),
            vec!["ns/barfoo"],
        ),
    ];
    for (name, (old_app, old_owner), (new_app, new_owner), woken) in cases {
        c.on_pod(
            &Change::Updated {
                old: version(old_app, old_owner, "1"),
                new: version(new_app, new_owner, "2"),
            },
            Origin::Watch,
        );
        assert_eq!(drain_queue(&c.core).await, woken, "{name}");
    }
    assert_eq!(api.requests(), []);
}

/// A status write the server refuses fails the sync, which is then retried (with backoff); the write
/// itself is tried twice, the second time on a fresh read.
///
/// upstream: TestControllerUpdateRequeue
#[tokio::test]
async fn a_refused_status_update_fails_the_sync_for_a_retry() {
    let api = RecordedApi::new();
    let c = controller(&api);
    seed(
        &api,
        &c,
        &[with_status(foobar(1), 2)],
        &[foobar_pod("pod0")],
    );
    api.react(Verb::Update, "replicasets/status", Reaction::Unavailable);

    let err = sync_key(c.as_ref(), &foobar_key())
        .await
        .expect_err("the status write fails");
    assert!(
        matches!(&err, SyncKeyError::Failed(SyncError::Status(_))),
        "{err}"
    );
    assert!(!err.forgets_the_key(), "retried, as upstream's requeue");
    assert_eq!(
        api.calls(),
        [
            "update replicasets/status foobar",
            "get replicasets foobar",
            "update replicasets/status foobar",
        ]
    );
}

/// The status write, refused: read the ReplicaSet again and write once more, with the status computed
/// by the sync (not the one read). Upstream's case is the first row.
///
/// upstream: TestControllerUpdateStatusWithFailure
#[tokio::test]
async fn a_refused_status_write_is_retried_once_with_the_computed_status() {
    let cases = [
        ("refused every time", Reaction::Unavailable, None, false),
        ("a conflict every time", Reaction::Conflict, None, false),
        ("a conflict once", Reaction::Conflict, Some(1), true),
    ];
    for (name, reaction, times, succeeds) in cases {
        let api = RecordedApi::new();
        let c = controller(&api);
        let rs = foobar(1);
        seed(&api, &c, std::slice::from_ref(&rs), &[]);
        match times {
            Some(n) => api.react_times(n, Verb::Update, "replicasets/status", reaction),
            None => api.react(Verb::Update, "replicasets/status", reaction),
        }
        let mut computed = rs.status.clone().unwrap_or_default();
        computed.replicas = 10;

        let result = update_status(&c.core.own_api(&foobar_key()), &rs, computed, || false).await;

        assert_eq!(result.is_ok(), succeeds, "{name}: {:?}", result.err());
        assert_eq!(
            api.calls(),
            [
                "update replicasets/status foobar",
                "get replicasets foobar",
                "update replicasets/status foobar",
            ],
            "{name}"
        );
        for update in [0, 1] {
            assert_eq!(
                written(&api, update)["status"]["replicas"],
                10,
                "{name}: update {update}"
            );
        }
        let stored = api
            .get::<ReplicaSetObject>(&c.core.resource, "ns", "foobar")
            .and_then(|rs| rs.status)
            .map(|s| s.replicas);
        assert_eq!(stored, Some(if succeeds { 10 } else { 1 }), "{name}");
    }
}

/// A sync creates at most `BURST_REPLICAS` pods and then waits until every one of them is observed
/// before it creates more; deletions alike. Upstream runs it with small bursts; ours is the constant
/// 500, so 502 replicas take two syncs each way. The consistency gate is off, as upstream's pod control
/// records nothing for it: this is about the expectations alone.
///
/// upstream: TestControllerBurstReplicas
#[tokio::test]
async fn creations_and_deletions_go_in_bursts_each_awaited_in_full() {
    let api = RecordedApi::new();
    let c = controller_with(&api, Feature::StaleControllerConsistencyReplicaSet, false);
    let burst = BURST_REPLICAS;
    let replicas = i32::try_from(burst + 2).unwrap_or(i32::MAX);
    seed(&api, &c, &[with_status(foobar(replicas), 0)], &[]);
    let pod_writes = |api: &RecordedApi, verb: &str| {
        api.actions()
            .iter()
            .filter(|a| a.starts_with(&format!("{verb} pods")))
            .count()
    };
    let sync = async |api: &RecordedApi| {
        api.clear_requests();
        sync_done(&c, &foobar_key(), "syncs").await;
        deliver_replica_sets(api, &c);
    };

    // Up: a full burst, awaited until the very last pod is seen.
    sync(&api).await;
    assert_eq!(pod_writes(&api, "create"), burst);
    let last = api
        .writes()
        .iter()
        .rev()
        .find(|w| w.verb == Verb::Create)
        .and_then(|w| w.name.clone())
        .unwrap_or_default();
    deliver_pods_except(&api, &c, &last).await;
    assert_eq!(c.expectations.get(&foobar_key()), expected(1, 0));
    sync(&api).await;
    assert_eq!(pod_writes(&api, "create"), 0, "one creation still awaited");
    deliver_pods(&api, &c).await;
    sync(&api).await;
    assert_eq!(pod_writes(&api, "create"), 2);
    deliver_pods(&api, &c).await;
    assert_eq!(stored_pods(&api).len(), burst + 2);

    // Down to zero: a burst of deletions, awaited until the last is seen; then the rest.
    let mut rs = api
        .get::<ReplicaSetObject>(&c.core.resource, "ns", "foobar")
        .expect("stored");
    rs.spec.replicas = Some(0);
    api.insert_with(&rs, &c.core.resource);
    deliver_replica_sets(&api, &c);
    sync(&api).await;
    assert_eq!(pod_writes(&api, "delete"), burst);
    let last = api
        .writes()
        .iter()
        .rev()
        .find(|w| w.verb == Verb::Delete)
        .and_then(|w| w.name.clone())
        .unwrap_or_default();
    deliver_pods_except(&api, &c, &last).await;
    assert_eq!(c.expectations.get(&foobar_key()), expected(0, 1));
    sync(&api).await;
    assert_eq!(pod_writes(&api, "delete"), 0, "one deletion still awaited");
    deliver_pods(&api, &c).await;
    sync(&api).await;
    assert_eq!(pod_writes(&api, "delete"), 2);
    assert!(stored_pods(&api).is_empty());
}

/// A ReplicaSet owned by the Deployment with `controller_uid`.
fn sibling(name: &str, app: &str, controller_uid: &str, replicas: i32) -> ReplicaSetObject {
    let mut rs = replica_set(name, &format!("{name}-uid"), replicas, app);
    rs.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "apps/v1".into(),
        kind: "Deployment".into(),
        name: format!("deployment-{controller_uid}"),
        uid: controller_uid.into(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }]);
    rs
}

/// A pod of the ReplicaSet `rs` on `node`, Ready since the epoch or, `recently`, for a minute.
fn pod_on(
    name: &str,
    rs: &ReplicaSetObject,
    node: &str,
    recently: bool,
) -> k8s_openapi::api::core::v1::Pod {
    let app = rs
        .spec
        .selector
        .match_labels
        .as_ref()
        .and_then(|l| l.get("app"))
        .cloned()
        .unwrap_or_default();
    let owner = (
        rs.metadata.name.as_deref().unwrap_or_default(),
        rs.metadata.uid.as_deref().unwrap_or_default(),
    );
    let mut p = pod(name, &app, Some(owner));
    if let Some(spec) = p.spec.as_mut() {
        spec.node_name = Some(node.into());
    }
    if recently
        && let Some(condition) = p
            .status
            .as_mut()
            .and_then(|s| s.conditions.as_mut())
            .and_then(|c| c.first_mut())
    {
        condition.last_transition_time =
            Some(Time(Timestamp::now() - SignedDuration::from_secs(60)));
    }
    p
}

/// Scaling down ranks pods by how many active pods of the ReplicaSets sharing the same controller (a
/// Deployment's, this one included, also one being deleted) run on their node: the crowded node loses a
/// pod first; pods of ReplicaSets of another controller do not count. `p1` has been Ready for a minute,
/// `p2` for decades, so `p1` would go first if the ranks were equal.
///
/// upstream: TestRelatedPodsLookup, TestGetReplicaSetsWithSameController
#[tokio::test]
async fn scaling_down_deletes_first_on_nodes_crowded_by_related_replica_sets() {
    let foo1 = with_status(sibling("foo1", "foo", "123", 1), 2);
    let foo2 = sibling("foo2", "baz", "123", 1);
    let unrelated = sibling("bar1", "quux", "456", 2);
    let mut deleting = sibling("foo3", "xyzzy", "123", 2);
    deleting.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
    let own = [
        pod_on("p1", &foo1, "node-a", true),
        pod_on("p2", &foo1, "node-b", false),
    ];
    let cases = [
        (
            "a related ReplicaSet's pod crowds node-b; another controller's on node-a do not count",
            vec![
                (foo2.clone(), vec![pod_on("p3", &foo2, "node-b", false)]),
                (
                    unrelated.clone(),
                    vec![
                        pod_on("p4", &unrelated, "node-a", false),
                        pod_on("p5", &unrelated, "node-a", false),
                    ],
                ),
            ],
            "delete pods p2",
        ),
        (
            "the pods of a related ReplicaSet being deleted count too",
            vec![
                (foo2.clone(), vec![pod_on("p3", &foo2, "node-b", false)]),
                (
                    deleting.clone(),
                    vec![
                        pod_on("p6", &deleting, "node-a", false),
                        pod_on("p7", &deleting, "node-a", false),
                    ],
                ),
            ],
            "delete pods p1",
        ),
    ];
    for (name, others, deletion) in cases {
        let api = RecordedApi::new();
        let c = controller(&api);
        let mut replica_sets = vec![foo1.clone()];
        let mut pods = own.to_vec();
        for (rs, rs_pods) in others {
            replica_sets.push(rs);
            pods.extend(rs_pods);
        }
        seed(&api, &c, &replica_sets, &pods);
        sync_done(&c, &key("ns/foo1"), "scales down").await;
        assert_eq!(api.actions(), [deletion], "{name}");
    }
}

/// A pod counts as deleted for the expectations once, when it is first seen terminating (added so, or
/// updated so), not again on later updates or its final removal; a deletion not awaited counts nothing.
///
/// upstream: TestDeletionTimestamp
#[tokio::test]
async fn a_pod_counts_as_deleted_once_as_soon_as_it_terminates() {
    let api = RecordedApi::new();
    let c = controller(&api);
    c.core.objects.cache_insert(foobar(1));
    let rs = foobar_key();
    let mut terminating = foobar_pod("pod0");
    terminating.metadata.resource_version = Some("1".into());
    terminating.metadata.deletion_timestamp = Some(Time(Timestamp::now()));
    let mut before = foobar_pod("pod0");
    before.metadata.resource_version = Some("2".into());

    // Added already terminating: a deletion, not a creation.
    c.expectations.expect_deletions(&rs, vec![key("ns/pod0")]);
    c.on_pod(&Change::Added(cached(terminating.clone())), Origin::Watch);
    assert_eq!(drain_queue(&c.core).await, ["ns/foobar"]);
    assert_eq!(c.expectations.get(&rs), expected(0, 0));

    // Updated to terminating: a deletion.
    c.expectations.expect_deletions(&rs, vec![key("ns/pod0")]);
    c.on_pod(
        &Change::Updated {
            old: cached(before.clone()),
            new: cached(terminating.clone()),
        },
        Origin::Watch,
    );
    assert_eq!(drain_queue(&c.core).await, ["ns/foobar"]);
    assert_eq!(c.expectations.get(&rs), expected(0, 0));

    // Now another pod's deletion is awaited: updates of the terminating pod and its removal count
    // nothing.
    let second = foobar_pod("second");
    c.expectations.expect_deletions(&rs, vec![key("ns/second")]);
    let mut earlier_terminating = before.clone();
    earlier_terminating.metadata.deletion_timestamp = Some(Time(Timestamp::now()));
    c.on_pod(
        &Change::Updated {
            old: cached(earlier_terminating),
            new: cached(terminating.clone()),
        },
        Origin::Watch,
    );
    assert_eq!(c.expectations.get(&rs), expected(0, 1));
    c.on_pod(&Change::Deleted(cached(terminating)), Origin::Watch);
    assert_eq!(c.expectations.get(&rs), expected(0, 1));
    drain_queue(&c.core).await;

    // The awaited pod's removal counts.
    c.on_pod(&Change::Deleted(cached(second)), Origin::Watch);
    assert_eq!(drain_queue(&c.core).await, ["ns/foobar"]);
    assert_eq!(c.expectations.get(&rs), expected(0, 0));
    assert_eq!(api.requests(), []);
}

/// A ReplicaSet deleted while creations are awaited: its expectations go, and so does the record of its
/// writes, so a ReplicaSet recreated under the same name is synced at once and from scratch. (The rest
/// of upstream's test, the sync after the deletion doing nothing, needs the cache to drop the
/// ReplicaSet, which a test cannot make it do: `super::tests::deleting_a_replica_set_forgets_its_
/// expectations` syncs a ReplicaSet never cached instead.)
///
/// upstream: TestDeleteControllerAndExpectations
#[tokio::test]
async fn deleting_a_replica_set_forgets_what_its_syncs_awaited() {
    let api = RecordedApi::new();
    let c = controller(&api);
    let rs = with_status(foobar(1), 0);
    seed(&api, &c, std::slice::from_ref(&rs), &[]);
    sync_done(&c, &foobar_key(), "creates").await;
    assert_eq!(api.actions(), ["create pods"]);
    assert_eq!(c.expectations.get(&foobar_key()), expected(1, 0));
    assert!(!c.core.consistency.is_ready(&foobar_key()));

    c.on_replica_set(&Change::Deleted(Arc::new(rs)), Origin::Watch);
    assert_eq!(c.expectations.get(&foobar_key()), None);
    assert!(c.core.consistency.is_ready(&foobar_key()));
    assert_eq!(drain_queue(&c.core).await, ["ns/foobar"]);
}

/// A ReplicaSet deleted while a creation is awaited and recreated under the same name (another UID):
/// the new one starts without the old one's expectations, creates its own pod and awaits it.
///
/// upstream: TestExpectationsOnRecreate
#[tokio::test]
async fn a_recreated_replica_set_starts_with_fresh_expectations() {
    let api = RecordedApi::new();
    let c = controller(&api);
    let old = with_status(foobar(1), 0);
    seed(&api, &c, std::slice::from_ref(&old), &[]);
    c.on_replica_set(&Change::Added(Arc::new(old.clone())), Origin::Watch);
    assert_eq!(drain_queue(&c.core).await, ["ns/foobar"]);
    sync_done(&c, &foobar_key(), "creates").await;
    assert_eq!(api.actions(), ["create pods"]);
    assert_eq!(c.expectations.get(&foobar_key()), expected(1, 0));
    assert_eq!(c.core.queue.len(), 0);

    c.on_replica_set(&Change::Deleted(Arc::new(old.clone())), Origin::Watch);
    assert_eq!(c.expectations.get(&foobar_key()), None);
    // The deletion's sync is skipped, as upstream's test does.
    assert_eq!(drain_queue(&c.core).await, ["ns/foobar"]);

    let mut recreated = old;
    recreated.metadata.uid = Some("foobar-uid-2".into());
    recreated.metadata.resource_version = None;
    api.insert_with(&recreated, &c.core.resource);
    deliver_replica_sets(&api, &c);
    let cached_rs = c.core.objects.get("ns", "foobar").expect("cached");
    c.on_replica_set(&Change::Added(cached_rs), Origin::Watch);
    assert_eq!(drain_queue(&c.core).await, ["ns/foobar"]);
    api.clear_requests();
    sync_done(&c, &foobar_key(), "the new ReplicaSet is synced at once").await;
    assert_eq!(api.actions(), ["create pods"]);
    assert_eq!(
        written(&api, 0)["metadata"]["ownerReferences"][0]["uid"],
        "foobar-uid-2"
    );
    assert_eq!(c.expectations.get(&foobar_key()), expected(1, 0));
}

/// A matching pod controlled by someone else is not adopted (no patch, not even the re-read that
/// precedes one) and not counted: both replicas are created.
///
/// upstream: TestDoNotPatchPodWithOtherControlRef
#[tokio::test]
async fn a_matching_pod_of_another_controller_is_left_alone() {
    let api = RecordedApi::new();
    let c = controller(&api);
    seed(
        &api,
        &c,
        &[with_status(foobar(2), 0)],
        &[pod("pod", "foo", Some(("AnotherRS", "another-uid")))],
    );
    sync_done(&c, &foobar_key(), "creates").await;
    assert_eq!(api.calls(), ["create pods", "create pods"]);
    for creation in [0, 1] {
        let created = written(&api, creation);
        assert_eq!(created["metadata"]["generateName"], "foobar-");
        assert_eq!(
            created["metadata"]["ownerReferences"][0]["uid"],
            "foobar-uid"
        );
    }
    assert_eq!(
        events(&api, &c).await,
        ["SuccessfulCreate", "SuccessfulCreate"]
    );
}

/// Adoptions the server refuses fail the sync (to be retried) before it creates anything: every
/// orphan is tried, the first error is returned.
///
/// upstream: TestPatchPodFails
#[tokio::test]
async fn refused_adoptions_fail_the_sync_before_any_creation() {
    let api = RecordedApi::new();
    let c = controller(&api);
    seed(
        &api,
        &c,
        &[with_status(foobar(2), 0)],
        &[pod("pod1", "foo", None), pod("pod2", "foo", None)],
    );
    api.react(Verb::Patch, "pods", Reaction::Unavailable);
    let err = sync_key(c.as_ref(), &foobar_key())
        .await
        .expect_err("the adoptions fail");
    assert!(
        matches!(
            &err,
            SyncKeyError::Failed(SyncError::Claim(ClaimError::Patch {
                action: "adopting",
                ..
            }))
        ),
        "{err}"
    );
    assert!(
        error_chain(&err).contains("unable to handle the request"),
        "{}",
        error_chain(&err)
    );
    assert!(!err.forgets_the_key(), "retried");
    let mut calls = api.calls();
    calls.sort();
    assert_eq!(
        calls,
        [
            "get replicasets foobar",
            "patch pods pod1",
            "patch pods pod2"
        ]
    );
}

/// A ReplicaSet being deleted adopts nothing and creates nothing (and its status is current: no call).
///
/// upstream: TestDoNotAdoptOrCreateIfBeingDeleted
#[tokio::test]
async fn a_replica_set_being_deleted_neither_adopts_nor_creates() {
    let api = RecordedApi::new();
    let c = controller(&api);
    let mut rs = with_status(foobar(2), 0);
    rs.metadata.deletion_timestamp = Some(Time(Timestamp::now()));
    seed(&api, &c, &[rs], &[pod("pod1", "foo", None)]);
    sync_done(&c, &foobar_key(), "nothing to do").await;
    assert_eq!(api.requests(), []);
}

/// The cache says the ReplicaSet lives, the API says it is being deleted: the re-read before the first
/// adoption finds out, and the sync stops without a write.
///
/// upstream: TestDoNotAdoptOrCreateIfBeingDeletedRace
#[tokio::test]
async fn the_reread_before_adopting_stops_a_replica_set_being_deleted() {
    let api = RecordedApi::new();
    let c = controller(&api);
    let cached_rs = with_status(foobar(2), 0);
    seed(
        &api,
        &c,
        std::slice::from_ref(&cached_rs),
        &[pod("pod1", "foo", None)],
    );
    let mut deleting = cached_rs;
    deleting.metadata.deletion_timestamp = Some(Time(Timestamp::now()));
    api.insert_with(&deleting, &c.core.resource);

    let err = sync_key(c.as_ref(), &foobar_key())
        .await
        .expect_err("adoption refused");
    assert!(
        matches!(
            &err,
            SyncKeyError::Failed(SyncError::Claim(ClaimError::CannotAdopt {
                reason: AdoptionRefused::Deleting { .. },
                ..
            }))
        ),
        "{err}"
    );
    assert_eq!(api.calls(), ["get replicasets foobar"]);
}

/// With `minReadySeconds`, pods Ready for less than that count as ready, not available, and the sync
/// asks to run again when the first of them becomes available (not after the whole `minReadySeconds`).
///
/// upstream: TestReplicaSetAvailabilityCheck
#[tokio::test]
async fn ready_pods_become_available_after_min_ready_seconds_and_are_checked_then() {
    let api = RecordedApi::new();
    let c = controller(&api);
    let mut rs = with_status(foobar(4), 0);
    rs.spec.min_ready_seconds = Some(5);
    // Whole seconds (a pod's times are stored to the second), from the next whole second on: the sync
    // has at least a second before foobar-4, Ready 4 s before `base`, becomes available.
    let base = Timestamp::from_second(Timestamp::now().as_second() + 1).expect("a valid time");
    let ready_since = |name: &str, seconds_before: i64| {
        let mut p = foobar_pod(name);
        if let Some(condition) = p
            .status
            .as_mut()
            .and_then(|s| s.conditions.as_mut())
            .and_then(|c| c.first_mut())
        {
            condition.last_transition_time =
                Some(Time(base - SignedDuration::from_secs(seconds_before)));
        }
        p
    };
    let mut pending = foobar_pod("foobar-1");
    pending.status = Some(k8s_openapi::api::core::v1::PodStatus {
        phase: Some("Pending".into()),
        ..Default::default()
    });
    seed(
        &api,
        &c,
        &[rs],
        &[
            pending,
            ready_since("foobar-2", 0),
            ready_since("foobar-3", 2),
            ready_since("foobar-4", 4),
        ],
    );
    let requeue = sync_key(c.as_ref(), &foobar_key())
        .await
        .expect("writes the status");
    assert_eq!(api.actions(), ["update replicasets/status foobar"]);
    let status = &written(&api, 0)["status"];
    assert_eq!(status["replicas"], 4);
    assert_eq!(status["readyReplicas"], 3);
    assert_eq!(status["availableReplicas"], 0);
    // foobar-4 becomes available 1 s after `base`, less than 2 s from now: the check is due then, not
    // after the whole minReadySeconds (the fallback).
    match requeue {
        Requeue::After(delay, why) => {
            assert_eq!(why, wake::POD_BECOMES_AVAILABLE);
            assert!(
                delay > Duration::ZERO && delay <= Duration::from_secs(2),
                "{delay:?}"
            );
        }
        Requeue::Never => panic!("the availability must be checked again"),
    }
    assert_eq!(c.core.queue.len(), 0, "the worker requeues, not the sync");
}
