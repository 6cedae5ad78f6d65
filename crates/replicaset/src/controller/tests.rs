//! Controller-level unit tests: the controller on caches filled by hand and a client that cannot reach any
//! server, so any API call the controller attempts shows up as an error. Mirrors upstream's
//! TestSyncReplicaSetDormancy, TestSyncReplicaSetDoesNothing, TestOverlappingRSs and
//! TestDeleteControllerAndExpectations.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ReplicaSetSpec, ReplicaSetStatus};
use k8s_openapi::api::core::v1::{PodCondition, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::ObjectMeta;
use mini_kcm_runtime::controller::offline::{key, offline_controller};
use mini_kcm_runtime::informers::{Change, Origin};
use mini_kcm_runtime::kinds::{ApiFamily, ReplicaSetObject, WorkloadKind};
use mini_kcm_runtime::pods::cached::CachedPod;
use mini_kcm_runtime::pods::cached::{CachedPodSpec, CachedPodStatus};
use mini_kcm_workqueue::Priority;

use super::{ReplicaSetController, SyncError};
use mini_kcm_runtime::controller::{Requeue, SyncKeyError, sync_key};

fn controller() -> Arc<ReplicaSetController> {
    offline_controller(&mini_kcm_runtime::recorded_api::RecordedApi::new())
}

fn labels(app: &str) -> BTreeMap<String, String> {
    BTreeMap::from([("app".to_string(), app.to_string())])
}

fn replica_set(name: &str, uid: &str, replicas: i32, app: &str) -> ReplicaSetObject {
    let mut rs = ReplicaSetObject::new(
        name,
        &WorkloadKind::ReplicaSet.api_resource(ApiFamily::Apps),
        ReplicaSetSpec {
            replicas: Some(replicas),
            selector: LabelSelector {
                match_labels: Some(labels(app)),
                ..Default::default()
            },
            template: Some(PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels(app)),
                    ..Default::default()
                }),
                spec: Some(PodSpec::default()),
            }),
            ..Default::default()
        },
    );
    rs.metadata.namespace = Some("ns".into());
    rs.metadata.uid = Some(uid.into());
    rs.metadata.generation = Some(1);
    rs.metadata.resource_version = Some("1".into());
    // The status already says what the cache shows, so a sync that changes nothing makes no API call.
    rs.status = Some(From::from(ReplicaSetStatus {
        replicas,
        fully_labeled_replicas: Some(replicas),
        ready_replicas: Some(replicas),
        available_replicas: Some(replicas),
        terminating_replicas: Some(0),
        observed_generation: Some(1),
        conditions: None,
    }));
    rs
}

fn pod(name: &str, app: &str, owner: Option<(&str, &str)>) -> CachedPod {
    CachedPod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            uid: Some(format!("uid-{name}")),
            resource_version: Some("2".into()),
            labels: Some(labels(app)),
            owner_references: owner.map(|(owner_name, uid)| {
                vec![OwnerReference {
                    api_version: "apps/v1".into(),
                    kind: "ReplicaSet".into(),
                    name: owner_name.into(),
                    uid: uid.into(),
                    controller: Some(true),
                    block_owner_deletion: Some(true),
                }]
            }),
            ..Default::default()
        },
        spec: Some(CachedPodSpec {
            node_name: Some("node-1".into()),
            ..Default::default()
        }),
        status: Some(CachedPodStatus {
            phase: Some("Running".into()),
            conditions: Some(vec![PodCondition {
                type_: "Ready".into(),
                status: "True".into(),
                last_transition_time: Some(Time(Timestamp::UNIX_EPOCH)),
                ..Default::default()
            }]),
            ..Default::default()
        }),
    }
}

#[tokio::test]
async fn a_replica_set_in_its_desired_state_makes_no_api_call() {
    let c = controller();
    c.core
        .objects
        .cache_insert(replica_set("web", "rs-uid", 2, "web"));
    for name in ["a", "b"] {
        c.pods
            .cache_insert(pod(name, "web", Some(("web", "rs-uid"))));
    }
    // Any request would fail against the unreachable client.
    let requeue = sync_key(c.as_ref(), &key("ns/web"))
        .await
        .expect("nothing to do, nothing called");
    assert_eq!(requeue, Requeue::Never);
}

#[tokio::test]
async fn unsatisfied_expectations_make_the_sync_dormant() {
    let c = controller();
    let mut rs = replica_set("web", "rs-uid", 3, "web");
    // Status as the cache shows it: 2 of 3, so only a creation would call the API.
    if let Some(status) = rs.status.as_mut() {
        status.replicas = 2;
        status.fully_labeled_replicas = Some(2);
        status.ready_replicas = Some(2);
        status.available_replicas = Some(2);
    }
    c.core.objects.cache_insert(rs);
    for name in ["a", "b"] {
        c.pods
            .cache_insert(pod(name, "web", Some(("web", "rs-uid"))));
    }
    // Waiting for one creation to be observed: the sync must not create.
    c.expectations.expect_creations(&key("ns/web"), 1);
    let requeue = sync_key(c.as_ref(), &key("ns/web"))
        .await
        .expect("dormant: no creation attempted");
    assert_eq!(requeue, Requeue::Never);

    // Once the creation is observed, the sync acts (and, with no server, fails trying).
    c.expectations.creation_observed(&key("ns/web"));
    let err = sync_key(c.as_ref(), &key("ns/web"))
        .await
        .expect_err("a creation is attempted");
    // The failed creation also adds a ReplicaFailure condition, whose write fails the same way.
    assert!(
        matches!(err, SyncKeyError::Failed(SyncError::Status(_))),
        "{err}"
    );
    // The failed creation lowered the expectations again, so the next sync may retry.
    assert!(c.expectations.satisfied_expectations(&key("ns/web")));
}

#[tokio::test]
async fn a_pod_event_counts_only_for_its_controller_among_overlapping_replica_sets() {
    let c = controller();
    // Two ReplicaSets whose selectors both match app=web.
    c.core
        .objects
        .cache_insert(replica_set("first", "uid-1", 1, "web"));
    c.core
        .objects
        .cache_insert(replica_set("second", "uid-2", 1, "web"));
    c.expectations.expect_creations(&key("ns/first"), 1);
    c.expectations.expect_creations(&key("ns/second"), 1);

    let owned = std::sync::Arc::new(pod("p", "web", Some(("second", "uid-2"))));
    c.on_pod(&Change::Added(owned), Origin::Watch);
    assert!(c.expectations.satisfied_expectations(&key("ns/second")));
    assert!(!c.expectations.satisfied_expectations(&key("ns/first")));
    assert_eq!(c.core.queue.len(), 1, "only the controller is woken");
    assert_eq!(c.core.queue.get().await, Some(key("ns/second")));
}

#[tokio::test]
async fn an_orphan_wakes_every_matching_replica_set_without_counting() {
    let c = controller();
    c.core
        .objects
        .cache_insert(replica_set("first", "uid-1", 1, "web"));
    c.core
        .objects
        .cache_insert(replica_set("second", "uid-2", 1, "web"));
    c.core
        .objects
        .cache_insert(replica_set("other", "uid-3", 1, "db"));
    c.expectations.expect_creations(&key("ns/first"), 1);
    c.on_pod(
        &Change::Added(std::sync::Arc::new(pod("orphan", "web", None))),
        Origin::Watch,
    );
    assert_eq!(c.core.queue.len(), 2);
    assert!(!c.expectations.satisfied_expectations(&key("ns/first")));
}

#[tokio::test]
async fn a_pod_of_a_same_named_owner_of_the_other_family_is_not_ours() {
    let c = controller();
    c.core
        .objects
        .cache_insert(replica_set("web", "rs-uid", 1, "web"));
    // The copy named `web` is another object: another UID.
    let mut foreign = pod("p", "web", Some(("web", "copy-uid")));
    if let Some(refs) = foreign.metadata.owner_references.as_mut() {
        refs[0].api_version = "minikcm.dev/v1".into();
    }
    c.expectations.expect_creations(&key("ns/web"), 1);
    c.on_pod(&Change::Added(std::sync::Arc::new(foreign)), Origin::Watch);
    assert!(!c.expectations.satisfied_expectations(&key("ns/web")));
    assert_eq!(c.core.queue.len(), 0);
}

#[tokio::test]
async fn deleting_a_replica_set_forgets_its_expectations() {
    let c = controller();
    let rs = replica_set("web", "rs-uid", 1, "web");
    c.expectations.expect_creations(&key("ns/web"), 5);
    c.on_replica_set(&Change::Deleted(std::sync::Arc::new(rs)), Origin::Watch);
    assert!(c.expectations.get(&key("ns/web")).is_none());
    // The sync of a ReplicaSet that is gone does nothing and succeeds.
    let requeue = sync_key(c.as_ref(), &key("ns/web")).await.expect("gone");
    assert_eq!(requeue, Requeue::Never);
}

#[tokio::test]
async fn a_graceful_deletion_is_counted_once() {
    let c = controller();
    c.core
        .objects
        .cache_insert(replica_set("web", "rs-uid", 1, "web"));
    c.expectations
        .expect_deletions(&key("ns/web"), vec![key("ns/a")]);
    let before = pod("a", "web", Some(("web", "rs-uid")));
    let mut terminating = before.clone();
    terminating.metadata.resource_version = Some("3".into());
    terminating.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
    c.on_pod(
        &Change::Updated {
            old: std::sync::Arc::new(before),
            new: std::sync::Arc::new(terminating.clone()),
        },
        Origin::Watch,
    );
    assert!(c.expectations.satisfied_expectations(&key("ns/web")));
    c.expectations
        .expect_deletions(&key("ns/web"), vec![key("ns/other")]);
    // The final delete of the same pod must not count for another expected deletion.
    c.on_pod(
        &Change::Deleted(std::sync::Arc::new(terminating)),
        Origin::Watch,
    );
    assert!(!c.expectations.satisfied_expectations(&key("ns/web")));
}

/// `pod` before it turned Ready (an older resourceVersion).
fn not_ready(mut pod: CachedPod) -> CachedPod {
    pod.metadata.resource_version = Some("1".into());
    if let Some(status) = pod.status.as_mut() {
        status.conditions = Some(vec![PodCondition {
            type_: "Ready".into(),
            status: "False".into(),
            ..Default::default()
        }]);
    }
    pod
}

#[tokio::test]
async fn a_pod_turning_ready_wakes_its_replica_set_saying_so() {
    let c = controller();
    let mut rs = replica_set("web", "rs-uid", 1, "web");
    rs.spec.min_ready_seconds = Some(10);
    c.core.objects.cache_insert(rs);
    let ready = pod("web-7d9f-x", "web", Some(("web", "rs-uid")));
    c.on_pod(
        &Change::Updated {
            old: std::sync::Arc::new(not_ready(ready.clone())),
            new: std::sync::Arc::new(ready),
        },
        Origin::Watch,
    );
    let (woken_key, woken) = c.core.queue.get_woken().await.unwrap();
    assert_eq!(woken_key, key("ns/web"));
    assert_eq!(woken.reasons, ["pod web-7d9f-x became Ready (update)"]);
    assert_eq!(woken.priority, Priority::Fresh);
    // The recheck for minReadySeconds says why too.
    let waiting = c.core.queue.snapshot(10).waiting;
    assert_eq!(waiting.len(), 1, "{waiting:?}");
}

#[tokio::test]
async fn keys_from_the_initial_list_are_low_priority_and_say_so() {
    let c = controller();
    let rs = std::sync::Arc::new(replica_set("web", "rs-uid", 1, "web"));
    c.core.objects.cache_insert(rs.as_ref().clone());
    c.on_replica_set(&Change::Added(rs.clone()), Origin::InitialList);
    let owned = pod("web-1", "web", Some(("web", "rs-uid")));
    c.on_pod(
        &Change::Added(std::sync::Arc::new(owned)),
        Origin::InitialList,
    );
    let queued = c.core.queue.snapshot(10).queued;
    assert_eq!(queued.len(), 1, "coalesced: {queued:?}");
    assert_eq!(queued[0].priority, Priority::Low);
    assert_eq!(queued[0].reasons, ["initial list"]);
    // A live event makes it fresh, and says what happened.
    c.on_pod(
        &Change::Deleted(std::sync::Arc::new(pod(
            "web-1",
            "web",
            Some(("web", "rs-uid")),
        ))),
        Origin::Watch,
    );
    let (_, woken) = c.core.queue.get_woken().await.unwrap();
    assert_eq!(woken.priority, Priority::Fresh);
    assert_eq!(woken.reasons, ["initial list", "pod web-1 deleted"]);
}

/// `StaleControllerConsistencyReplicaSet` decides whether a sync waits for the caches to show the
/// controller's own writes (on by default, as upstream's beta gate).
#[tokio::test]
async fn the_consistency_gate_switches_read_your_own_writes() {
    use mini_kcm_runtime::controller::ControllerOptions;
    use mini_kcm_runtime::controller::offline::offline_controller_with;
    use mini_kcm_runtime::features::{Feature, FeatureGates};

    let owner = key("default/rs");
    let written = ReplicaSetObject {
        metadata: ObjectMeta {
            resource_version: Some("99".into()),
            ..Default::default()
        },
        ..ReplicaSetObject::new(
            "rs",
            &WorkloadKind::ReplicaSet.api_resource(ApiFamily::Apps),
            ReplicaSetSpec::default(),
        )
    };
    let on: Arc<ReplicaSetController> = offline_controller(&mini_kcm_runtime::recorded_api::RecordedApi::new());
    on.core.consistency.record_write(&owner, &written);
    assert!(!on.core.consistency.is_ready(&owner));

    let mut options = ControllerOptions::new(ApiFamily::Apps, 1);
    options.features =
        FeatureGates::default().with(Feature::StaleControllerConsistencyReplicaSet, false);
    let off: Arc<ReplicaSetController> = offline_controller_with(&mini_kcm_runtime::recorded_api::RecordedApi::new(), options);
    off.core.consistency.record_write(&owner, &written);
    assert!(off.core.consistency.is_ready(&owner));
}
