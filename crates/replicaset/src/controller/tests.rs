//! Controller-level unit tests: the controller on caches filled by hand and a recorded API
//! (`mini_kcm_runtime::recorded_api`), so a test runs whole syncs with `sync_key` and asserts every
//! request they made, as upstream's tests do with a fake clientset.
//!
//! Here: the fixtures and helpers shared with `super::upstream_tests` (the ports of upstream's
//! `replica_set_test.go`), the handler tests, and, for each kind of write the controller makes (pod
//! creation, pod deletion, status update, adoption, release), that the next sync waits until the caches
//! show the write (read-your-own-writes) and runs once they do.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ReplicaSetSpec, ReplicaSetStatus};
use k8s_openapi::api::core::v1::{Pod, PodCondition, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::ObjectMeta;
use mini_kcm_fixtures::PodFixture;
use mini_kcm_runtime::api::kinds::{ApiFamily, ReplicaSetObject, WorkloadKind};
use mini_kcm_runtime::controller::offline::{drain_queue, flushed_events, key, offline_controller};
use mini_kcm_runtime::controller::{ObjectKey, Requeue, SyncKeyError, sync_key};
use mini_kcm_runtime::informers::{Change, Origin};
use mini_kcm_runtime::pods::cached::CachedPod;
use mini_kcm_runtime::recorded_api::{Reaction, RecordedApi, Verb};
use mini_kcm_workqueue::Priority;
use serde_json::{Value, json};

use super::{ReplicaSetController, SyncError};
use crate::status::ManageFailure;

// ---------------------------------------------------------------------------------------------------
// Fixtures and helpers (also used by `super::upstream_tests`).
// ---------------------------------------------------------------------------------------------------

/// The controller (`apps/v1`, gates at their defaults) on empty caches, writing to `api`.
pub(super) fn controller(api: &RecordedApi) -> Arc<ReplicaSetController> {
    offline_controller(api)
}

pub(super) use mini_kcm_fixtures::app_labels as labels;

/// A ReplicaSet in namespace `ns` selecting `app=<app>`, whose template has the same labels. Its status
/// already says `replicas` Ready and available pods at its generation, so a sync that finds that many
/// pods writes nothing (see [`with_status`] for another count).
pub(super) fn replica_set(name: &str, uid: &str, replicas: i32, app: &str) -> ReplicaSetObject {
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
    with_status(rs, replicas)
}

/// `rs` whose status says `pods` Ready, available and fully labelled pods, none terminating, at its
/// generation, no conditions.
pub(super) fn with_status(mut rs: ReplicaSetObject, pods: i32) -> ReplicaSetObject {
    rs.status = Some(From::from(ReplicaSetStatus {
        replicas: pods,
        fully_labeled_replicas: Some(pods),
        ready_replicas: Some(pods),
        available_replicas: Some(pods),
        terminating_replicas: Some(0),
        observed_generation: rs.metadata.generation,
        conditions: None,
    }));
    rs
}

/// A Running pod in namespace `ns` labelled `app=<app>`, on `node-1`, Ready since the epoch, controlled
/// by the ReplicaSet `owner` (name, uid) if any.
pub(super) fn pod(name: &str, app: &str, owner: Option<(&str, &str)>) -> Pod {
    let pod = PodFixture::new("ns", name)
        .labels(&[("app", app)])
        .resource_version("2")
        .on_node("node-1")
        .ready();
    match owner {
        Some((owner_name, uid)) => pod.owned_by("ReplicaSet", owner_name, uid),
        None => pod,
    }
    .pod()
}

/// `pod` as the pod cache keeps it, for the handlers.
pub(super) fn cached(pod: Pod) -> Arc<CachedPod> {
    Arc::new(CachedPod::from(pod))
}

/// Stores the ReplicaSets and pods in the recorded API and shows the very same objects in the
/// controller's caches (no handler runs): a sync then reads from its caches what the API has.
pub(super) fn seed(
    api: &RecordedApi,
    c: &ReplicaSetController,
    replica_sets: &[ReplicaSetObject],
    pods: &[Pod],
) {
    for rs in replica_sets {
        api.insert_with(rs, &c.core.resource);
    }
    for pod in pods {
        api.insert(pod);
    }
    deliver_replica_sets(api, c);
    api.feed(&c.pods, &());
}

/// Caches the API's ReplicaSets as their watch would (no handler runs: the tests sync by hand).
pub(super) fn deliver_replica_sets(api: &RecordedApi, c: &ReplicaSetController) {
    api.feed(&c.core.objects, &c.core.resource);
}

/// Tells the controller what a pod watch would have told it since its cache last looked at the API: a
/// pod new or changed in the API is cached and handed to the pod handler (so expectations count it); a
/// cached pod gone from the API is shown as a graceful deletion shows it first, terminating, at a
/// resourceVersion after its deletion (the cache cannot drop an object, and the recorded API deletes at
/// once). Returns the keys the handler queued, taken out of the queue as the worker would take them
/// before the sync the test runs next (a key left pending would defer that sync's status write, see
/// `mini_kcm_runtime::api::status_writes`).
pub(super) async fn deliver_pods(api: &RecordedApi, c: &ReplicaSetController) -> Vec<String> {
    deliver_pods_except(api, c, "").await
}

/// [`deliver_pods`], except the change of the pod named `held_back` (a watch event still on its way).
pub(super) async fn deliver_pods_except(
    api: &RecordedApi,
    c: &ReplicaSetController,
    held_back: &str,
) -> Vec<String> {
    let stored = api.list::<CachedPod>(&());
    for pod in &stored {
        let (namespace, name) = namespace_and_name(&pod.metadata);
        if name == held_back {
            continue;
        }
        let change = match c.pods.get(namespace, name) {
            None => Change::Added(Arc::new(pod.clone())),
            Some(old) if old.metadata.resource_version != pod.metadata.resource_version => {
                Change::Updated {
                    old,
                    new: Arc::new(pod.clone()),
                }
            }
            Some(_) => continue,
        };
        c.pods.cache_insert(pod.clone());
        c.on_pod(&change, Origin::Watch);
    }
    for old in c.pods.list() {
        let gone = !stored.iter().any(|p| p.metadata.uid == old.metadata.uid);
        let name = old.metadata.name.as_deref().unwrap_or_default();
        if gone && name != held_back && old.metadata.deletion_timestamp.is_none() {
            let mut terminating = old.as_ref().clone();
            terminating.metadata.deletion_timestamp = Some(Time(Timestamp::now()));
            terminating.metadata.resource_version = Some(api.resource_version().to_string());
            c.pods.cache_insert(terminating.clone());
            c.on_pod(
                &Change::Updated {
                    old,
                    new: Arc::new(terminating),
                },
                Origin::Watch,
            );
        }
    }
    drain_queue(&c.core).await
}

fn namespace_and_name(meta: &ObjectMeta) -> (&str, &str) {
    (
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default(),
    )
}

/// The body of the `index`-th write (events left out).
pub(super) fn written(api: &RecordedApi, index: usize) -> Value {
    api.writes()
        .get(index)
        .and_then(|w| w.body.clone())
        .unwrap_or(Value::Null)
}

/// The reasons of the events written so far, sorted, once the recorder has written all it was given.
pub(super) async fn events(api: &RecordedApi, c: &ReplicaSetController) -> Vec<String> {
    let mut events = flushed_events(api, &c.core.recorder).await;
    events.sort();
    events
}

/// One sync of `key` that must succeed and ask for no later sync (`what` it does, for the message).
pub(super) async fn sync_done(c: &ReplicaSetController, key: &ObjectKey, what: &str) {
    match sync_key(c, key).await {
        Ok(requeue) => assert_eq!(requeue, Requeue::Never, "{what}"),
        Err(e) => panic!("{what}: {e}"),
    }
}

/// The pods the API holds.
pub(super) fn stored_pods(api: &RecordedApi) -> Vec<Pod> {
    api.list::<Pod>(&())
}

// ---------------------------------------------------------------------------------------------------
// Syncs.
// ---------------------------------------------------------------------------------------------------

/// upstream: TestSyncReplicaSetDoesNothing
#[tokio::test]
async fn a_replica_set_in_its_desired_state_makes_no_api_call() {
    let api = RecordedApi::new();
    let c = controller(&api);
    seed(
        &api,
        &c,
        &[replica_set("web", "rs-uid", 2, "web")],
        &[
            pod("a", "web", Some(("web", "rs-uid"))),
            pod("b", "web", Some(("web", "rs-uid"))),
        ],
    );
    let requeue = sync_key(c.as_ref(), &key("ns/web"))
        .await
        .expect("nothing to do");
    assert_eq!(requeue, Requeue::Never);
    assert_eq!(api.requests(), []);
}

#[tokio::test]
async fn unsatisfied_expectations_make_the_sync_dormant() {
    let api = RecordedApi::new();
    let c = controller(&api);
    // 2 of 3 pods, and the status says so: only a creation would call the API.
    seed(
        &api,
        &c,
        &[with_status(replica_set("web", "rs-uid", 3, "web"), 2)],
        &[
            pod("a", "web", Some(("web", "rs-uid"))),
            pod("b", "web", Some(("web", "rs-uid"))),
        ],
    );
    // Waiting for one creation to be observed: the sync must not create.
    c.expectations.expect_creations(&key("ns/web"), 1);
    let requeue = sync_key(c.as_ref(), &key("ns/web"))
        .await
        .expect("dormant: nothing attempted");
    assert_eq!(requeue, Requeue::Never);
    assert_eq!(api.requests(), []);

    // Once the creation is observed, the sync creates the missing pod, and waits for it in turn.
    c.expectations.creation_observed(&key("ns/web"));
    sync_done(&c, &key("ns/web"), "one creation").await;
    assert_eq!(api.actions(), ["create pods"]);
    assert_eq!(stored_pods(&api).len(), 3);
    assert!(!c.expectations.satisfied_expectations(&key("ns/web")));
}

/// A pod the deletion finds gone already is as good as deleted: no failure, no event, no wait.
#[tokio::test]
async fn a_pod_already_gone_counts_as_deleted() {
    let api = RecordedApi::new();
    let c = controller(&api);
    seed(
        &api,
        &c,
        &[with_status(replica_set("web", "rs-uid", 0, "web"), 1)],
        &[pod("a", "web", Some(("web", "rs-uid")))],
    );
    api.react(Verb::Delete, "pods", Reaction::NotFound);
    sync_done(&c, &key("ns/web"), "a pod not found is deleted").await;
    // The status is computed from the pods the sync started with, as upstream's.
    assert_eq!(api.actions(), ["delete pods a"]);
    assert!(c.expectations.satisfied_expectations(&key("ns/web")));
    assert_eq!(events(&api, &c).await, Vec::<String>::new());
}

/// A refused deletion: a `FailedDelete` event and `ReplicaFailure` condition, the sync fails (and is
/// retried), and the deletion is no longer waited for.
#[tokio::test]
async fn a_refused_deletion_is_reported_and_not_waited_for() {
    let api = RecordedApi::new();
    let c = controller(&api);
    seed(
        &api,
        &c,
        &[with_status(replica_set("web", "rs-uid", 0, "web"), 1)],
        &[pod("a", "web", Some(("web", "rs-uid")))],
    );
    api.react(Verb::Delete, "pods", Reaction::Unavailable);
    let err = sync_key(c.as_ref(), &key("ns/web"))
        .await
        .expect_err("the deletion failed");
    assert!(
        matches!(
            &err,
            SyncKeyError::Failed(SyncError::Manage(ManageFailure {
                reason: "FailedDelete",
                ..
            }))
        ),
        "{err}"
    );
    assert_eq!(
        api.actions(),
        ["delete pods a", "update replicasets/status web"]
    );
    let condition = &written(&api, 1)["status"]["conditions"][0];
    assert_eq!(condition["type"], "ReplicaFailure");
    assert_eq!(condition["reason"], "FailedDelete");
    assert!(c.expectations.satisfied_expectations(&key("ns/web")));
    assert_eq!(events(&api, &c).await, ["FailedDelete"]);
}

// ---------------------------------------------------------------------------------------------------
// Read-your-own-writes: after each kind of write, the next sync waits for the caches to show it.
// ---------------------------------------------------------------------------------------------------

/// The sync of `ns/web` right after one that wrote: held back with no request made.
async fn assert_waits_for_the_cache(api: &RecordedApi, c: &ReplicaSetController) {
    api.clear_requests();
    let err = sync_key(c, &key("ns/web"))
        .await
        .expect_err("the caches lag behind the last write");
    assert!(matches!(err, SyncKeyError::StaleCache { .. }), "{err}");
    assert_eq!(api.requests(), [], "a held-back sync calls nothing");
}

#[tokio::test]
async fn after_creating_a_pod_the_next_sync_waits_until_the_cache_shows_it() {
    let api = RecordedApi::new();
    let c = controller(&api);
    seed(
        &api,
        &c,
        &[with_status(replica_set("web", "rs-uid", 2, "web"), 1)],
        &[pod("a", "web", Some(("web", "rs-uid")))],
    );
    sync_done(&c, &key("ns/web"), "creates").await;
    assert_eq!(api.actions(), ["create pods"]);
    let created = written(&api, 0);
    assert_eq!(created["metadata"]["generateName"], "web-");
    assert_eq!(created["metadata"]["labels"], json!({"app": "web"}));
    assert_eq!(
        created["metadata"]["ownerReferences"][0]["uid"], "rs-uid",
        "{created}"
    );
    assert_eq!(
        created["metadata"]["ownerReferences"][0]["controller"],
        true
    );
    assert_eq!(events(&api, &c).await, ["SuccessfulCreate"]);
    assert_waits_for_the_cache(&api, &c).await;

    assert_eq!(deliver_pods(&api, &c).await, ["ns/web"]);
    sync_done(&c, &key("ns/web"), "the cache shows the new pod").await;
    assert_eq!(api.actions(), ["update replicasets/status web"]);
    assert_eq!(written(&api, 0)["status"]["replicas"], 2);
}

#[tokio::test]
async fn after_deleting_a_pod_the_next_sync_waits_until_the_cache_shows_it() {
    let api = RecordedApi::new();
    let c = controller(&api);
    // `b` costs less to delete: it goes first.
    let mut b = pod("b", "web", Some(("web", "rs-uid")));
    b.metadata.annotations = Some(BTreeMap::from([(
        "controller.kubernetes.io/pod-deletion-cost".to_string(),
        "-100".to_string(),
    )]));
    seed(
        &api,
        &c,
        &[with_status(replica_set("web", "rs-uid", 1, "web"), 2)],
        &[pod("a", "web", Some(("web", "rs-uid"))), b],
    );
    sync_done(&c, &key("ns/web"), "deletes").await;
    assert_eq!(api.actions(), ["delete pods b"]);
    let names: Vec<_> = stored_pods(&api)
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    assert_eq!(names, ["a"]);
    assert!(!c.expectations.satisfied_expectations(&key("ns/web")));
    assert_eq!(events(&api, &c).await, ["SuccessfulDelete"]);
    assert_waits_for_the_cache(&api, &c).await;

    assert_eq!(deliver_pods(&api, &c).await, ["ns/web"]);
    assert!(c.expectations.satisfied_expectations(&key("ns/web")));
    sync_done(&c, &key("ns/web"), "the cache shows the deletion").await;
    assert_eq!(api.actions(), ["update replicasets/status web"]);
    let status = &written(&api, 0)["status"];
    assert_eq!(status["replicas"], 1);
    assert_eq!(status["terminatingReplicas"], 1);
}

#[tokio::test]
async fn after_writing_the_status_the_next_sync_waits_until_the_cache_shows_it() {
    let api = RecordedApi::new();
    let c = controller(&api);
    seed(
        &api,
        &c,
        &[with_status(replica_set("web", "rs-uid", 2, "web"), 1)],
        &[
            pod("a", "web", Some(("web", "rs-uid"))),
            pod("b", "web", Some(("web", "rs-uid"))),
        ],
    );
    sync_done(&c, &key("ns/web"), "writes the status").await;
    assert_eq!(api.actions(), ["update replicasets/status web"]);
    assert_eq!(written(&api, 0)["status"]["replicas"], 2);
    assert_waits_for_the_cache(&api, &c).await;

    deliver_replica_sets(&api, &c);
    sync_done(&c, &key("ns/web"), "the cache shows the status").await;
    assert_eq!(api.requests(), [], "the status is current now");
}

#[tokio::test]
async fn after_adopting_a_pod_the_next_sync_waits_until_the_cache_shows_it() {
    let api = RecordedApi::new();
    let c = controller(&api);
    seed(
        &api,
        &c,
        &[replica_set("web", "rs-uid", 1, "web")],
        &[pod("orphan", "web", None)],
    );
    sync_done(&c, &key("ns/web"), "adopts").await;
    // The ReplicaSet is read fresh before the first adoption (upstream's RecheckDeletionTimestamp).
    assert_eq!(api.calls(), ["get replicasets web", "patch pods orphan"]);
    let patch = written(&api, 0);
    let add = patch
        .as_array()
        .and_then(|ops| ops.iter().find(|op| op["op"] == "add"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(add["path"], "/metadata/ownerReferences", "{patch}");
    assert_eq!(add["value"][0]["uid"], "rs-uid");
    assert_eq!(add["value"][0]["controller"], true);
    assert_waits_for_the_cache(&api, &c).await;

    assert_eq!(deliver_pods(&api, &c).await, ["ns/web"]);
    sync_done(&c, &key("ns/web"), "the cache shows the adoption").await;
    assert_eq!(api.requests(), [], "the pod is ours now, nothing to do");
}

#[tokio::test]
async fn after_releasing_a_pod_the_next_sync_waits_until_the_cache_shows_it() {
    let api = RecordedApi::new();
    let c = controller(&api);
    // Ours, but relabelled out of the selector.
    seed(
        &api,
        &c,
        &[replica_set("web", "rs-uid", 0, "web")],
        &[pod("relabelled", "other", Some(("web", "rs-uid")))],
    );
    sync_done(&c, &key("ns/web"), "releases").await;
    assert_eq!(api.actions(), ["patch pods relabelled"]);
    let patch = written(&api, 0);
    assert!(
        patch.as_array().is_some_and(|ops| ops
            .iter()
            .any(|op| op["op"] == "remove" && op["path"] == "/metadata/ownerReferences/0")),
        "{patch}"
    );
    let released = stored_pods(&api);
    assert_eq!(released[0].metadata.owner_references, Some(vec![]));
    assert_waits_for_the_cache(&api, &c).await;

    // The released pod wakes its former owner.
    assert_eq!(deliver_pods(&api, &c).await, ["ns/web"]);
    sync_done(&c, &key("ns/web"), "the cache shows the release").await;
    assert_eq!(api.requests(), [], "not ours any more, nothing to do");
}

/// `StaleControllerConsistencyReplicaSet` decides whether a sync waits for the caches to show the
/// controller's own writes (on by default, as upstream's beta gate).
#[tokio::test]
async fn the_consistency_gate_switches_read_your_own_writes() {
    use mini_kcm_runtime::controller::ControllerOptions;
    use mini_kcm_runtime::controller::offline::offline_controller_with;
    use mini_kcm_runtime::switches::features::{Feature, FeatureGates};

    for gate in [true, false] {
        let api = RecordedApi::new();
        let mut options = ControllerOptions::new(ApiFamily::Apps, 1);
        options.features =
            FeatureGates::default().with(Feature::StaleControllerConsistencyReplicaSet, gate);
        let c: Arc<ReplicaSetController> = offline_controller_with(&api, options);
        seed(
            &api,
            &c,
            &[with_status(replica_set("web", "rs-uid", 1, "web"), 0)],
            &[],
        );
        sync_done(&c, &key("ns/web"), "creates").await;
        assert_eq!(api.actions(), ["create pods"], "gate {gate}");
        api.clear_requests();
        // Nothing delivered: the cache has not seen the new pod.
        let next = sync_key(c.as_ref(), &key("ns/web")).await;
        if gate {
            assert!(matches!(next, Err(SyncKeyError::StaleCache { .. })));
        } else {
            // Runs, and only the expectations keep it from creating the pod again.
            assert_eq!(next.expect("not held back"), Requeue::Never);
        }
        assert_eq!(api.requests(), [], "gate {gate}");
    }
}

/// Which failed syncs are routine retries is decided in one place (`SyncFailure::routine`): a status
/// write refused with 409 Conflict and a sync held back by a stale cache are (the live view counts them
/// apart and does not show them as errors); a server that cannot answer is a real failure.
#[tokio::test]
async fn a_conflict_and_a_stale_cache_are_routine_retries_an_unavailable_server_is_not() {
    use mini_kcm_runtime::controller::worker::SyncFailure;
    use mini_kcm_runtime::observability::decisions::RoutineRetry;

    for (reaction, routine) in [
        (Reaction::Conflict, Some(RoutineRetry::Conflict)),
        (Reaction::Unavailable, None),
    ] {
        let api = RecordedApi::new();
        let c = controller(&api);
        seed(
            &api,
            &c,
            &[with_status(replica_set("web", "rs-uid", 2, "web"), 1)],
            &[
                pod("a", "web", Some(("web", "rs-uid"))),
                pod("b", "web", Some(("web", "rs-uid"))),
            ],
        );
        api.react(Verb::Update, "replicasets/status", reaction);
        let err = sync_key(c.as_ref(), &key("ns/web"))
            .await
            .expect_err("the status write is refused");
        assert!(
            matches!(&err, SyncKeyError::Failed(SyncError::Status(_))),
            "{err}"
        );
        assert_eq!(err.routine(), routine, "{err}");
    }

    // A write the cache has not shown yet holds the next sync back: routine too.
    let api = RecordedApi::new();
    let c = controller(&api);
    seed(
        &api,
        &c,
        &[with_status(replica_set("web", "rs-uid", 1, "web"), 0)],
        &[],
    );
    sync_done(&c, &key("ns/web"), "creates").await;
    let err = sync_key(c.as_ref(), &key("ns/web"))
        .await
        .expect_err("the cache has not seen the new pod");
    assert_eq!(err.routine(), Some(RoutineRetry::StaleCache), "{err}");
}

// ---------------------------------------------------------------------------------------------------
// Handlers: which keys an event queues, and what it counts. Handlers never call the API.
// ---------------------------------------------------------------------------------------------------

/// upstream: TestOverlappingRSs
#[tokio::test]
async fn a_pod_event_counts_only_for_its_controller_among_overlapping_replica_sets() {
    let api = RecordedApi::new();
    let c = controller(&api);
    // Two ReplicaSets whose selectors both match app=web.
    c.core
        .objects
        .cache_insert(replica_set("first", "uid-1", 1, "web"));
    c.core
        .objects
        .cache_insert(replica_set("second", "uid-2", 1, "web"));
    c.expectations.expect_creations(&key("ns/first"), 1);
    c.expectations.expect_creations(&key("ns/second"), 1);

    let owned = cached(pod("p", "web", Some(("second", "uid-2"))));
    c.on_pod(&Change::Added(owned), Origin::Watch);
    assert!(c.expectations.satisfied_expectations(&key("ns/second")));
    assert!(!c.expectations.satisfied_expectations(&key("ns/first")));
    assert_eq!(c.core.queue.len(), 1, "only the controller is woken");
    assert_eq!(c.core.queue.get().await, Some(key("ns/second")));
    assert_eq!(api.requests(), []);
}

#[tokio::test]
async fn an_orphan_wakes_every_matching_replica_set_without_counting() {
    let api = RecordedApi::new();
    let c = controller(&api);
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
        &Change::Added(cached(pod("orphan", "web", None))),
        Origin::Watch,
    );
    assert_eq!(c.core.queue.len(), 2);
    assert!(!c.expectations.satisfied_expectations(&key("ns/first")));
    assert_eq!(api.requests(), []);
}

#[tokio::test]
async fn a_pod_of_a_same_named_owner_of_the_other_family_is_not_ours() {
    let api = RecordedApi::new();
    let c = controller(&api);
    c.core
        .objects
        .cache_insert(replica_set("web", "rs-uid", 1, "web"));
    // The copy named `web` is another object: another UID.
    let mut foreign = pod("p", "web", Some(("web", "copy-uid")));
    if let Some(refs) = foreign.metadata.owner_references.as_mut() {
        refs[0].api_version = "minikcm.dev/v1".into();
    }
    c.expectations.expect_creations(&key("ns/web"), 1);
    c.on_pod(&Change::Added(cached(foreign)), Origin::Watch);
    assert!(!c.expectations.satisfied_expectations(&key("ns/web")));
    assert_eq!(c.core.queue.len(), 0);
}

#[tokio::test]
async fn deleting_a_replica_set_forgets_its_expectations() {
    let api = RecordedApi::new();
    let c = controller(&api);
    let rs = replica_set("web", "rs-uid", 1, "web");
    c.expectations.expect_creations(&key("ns/web"), 5);
    c.on_replica_set(&Change::Deleted(Arc::new(rs)), Origin::Watch);
    assert!(c.expectations.get(&key("ns/web")).is_none());
    // The sync of a ReplicaSet that is gone does nothing and succeeds.
    let requeue = sync_key(c.as_ref(), &key("ns/web")).await.expect("gone");
    assert_eq!(requeue, Requeue::Never);
    assert_eq!(api.requests(), []);
}

#[tokio::test]
async fn a_graceful_deletion_is_counted_once() {
    let api = RecordedApi::new();
    let c = controller(&api);
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
            old: cached(before),
            new: cached(terminating.clone()),
        },
        Origin::Watch,
    );
    assert!(c.expectations.satisfied_expectations(&key("ns/web")));
    c.expectations
        .expect_deletions(&key("ns/web"), vec![key("ns/other")]);
    // The final delete of the same pod must not count for another expected deletion.
    c.on_pod(&Change::Deleted(cached(terminating)), Origin::Watch);
    assert!(!c.expectations.satisfied_expectations(&key("ns/web")));
}

/// `pod` before it turned Ready (an older resourceVersion).
fn not_ready(mut pod: Pod) -> Pod {
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
    let api = RecordedApi::new();
    let c = controller(&api);
    let mut rs = replica_set("web", "rs-uid", 1, "web");
    rs.spec.min_ready_seconds = Some(10);
    c.core.objects.cache_insert(rs);
    let ready = pod("web-7d9f-x", "web", Some(("web", "rs-uid")));
    c.on_pod(
        &Change::Updated {
            old: cached(not_ready(ready.clone())),
            new: cached(ready),
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
    let api = RecordedApi::new();
    let c = controller(&api);
    let rs = Arc::new(replica_set("web", "rs-uid", 1, "web"));
    c.core.objects.cache_insert(rs.as_ref().clone());
    c.on_replica_set(&Change::Added(rs.clone()), Origin::InitialList);
    let owned = pod("web-1", "web", Some(("web", "rs-uid")));
    c.on_pod(&Change::Added(cached(owned.clone())), Origin::InitialList);
    let queued = c.core.queue.snapshot(10).queued;
    assert_eq!(queued.len(), 1, "coalesced: {queued:?}");
    assert_eq!(queued[0].priority, Priority::Low);
    assert_eq!(queued[0].reasons, ["initial list"]);
    // A live event makes it fresh, and says what happened.
    c.on_pod(&Change::Deleted(cached(owned)), Origin::Watch);
    let (_, woken) = c.core.queue.get_woken().await.unwrap();
    assert_eq!(woken.priority, Priority::Fresh);
    assert_eq!(woken.reasons, ["initial list", "pod web-1 deleted"]);
}
