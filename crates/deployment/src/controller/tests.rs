//! Controller-level unit tests: the controller on caches filled by hand and a recorded API
//! (`mini_kcm_runtime::recorded_api`), which answers and records every call, so a test asserts what the
//! controller asked of the server, or that it asked nothing. Mirrors upstream's handler tests
//! (TestGetReplicaSetsForDeployment-style owner resolution, the Recreate pod-deletion wake-up of
//! TestPodDeletionEnqueuesRecreateDeployment) and checks the read-your-own-writes skip. Upstream's tests
//! of whole syncs are in `super::upstream_tests`.

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::ObjectMeta;
use mini_kcm_runtime::controller::offline::drain_queue;
use mini_kcm_runtime::controller::{ObjectKey, Requeue, SyncKeyError, sync_key};
use mini_kcm_runtime::informers::{Change, Origin};
use mini_kcm_runtime::pods::cached::CachedPod;

use super::DeploymentController;
use crate::testutil::{Fixture, deployment, recreate, rs_for};
use crate::{DeploymentObject, ReplicaSetObject};

/// A controller on a recorded API, and that API: a handler test asserts it was never called.
fn controller() -> (Arc<DeploymentController>, Fixture) {
    let f = Fixture::new();
    (f.c.clone(), f)
}

fn controlled_by(meta: &mut ObjectMeta, api_version: &str, kind: &str, name: &str, uid: &str) {
    meta.owner_references = Some(vec![mini_kcm_fixtures::controller_ref_in(
        api_version,
        kind,
        name,
        uid,
    )]);
}

/// A ReplicaSet of `d`'s template (labels foo=bar), controlled by `owner` if given.
fn replica_set(d: &DeploymentObject, name: &str, owner: Option<(&str, &str)>) -> ReplicaSetObject {
    let mut rs = rs_for(d, name, 1, Some("hash"));
    rs.metadata.labels = d
        .spec
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone());
    if let Some((api_version, owner)) = owner {
        let uid = format!("uid-{owner}");
        controlled_by(&mut rs.metadata, api_version, "Deployment", owner, &uid);
    }
    rs
}

/// upstream: TestAddReplicaSet
#[tokio::test]
async fn a_replica_set_event_wakes_only_its_controller() {
    let (c, f) = controller();
    let first = deployment("first", 1, 1, 0);
    c.core.objects.cache_insert(first.clone());
    c.core.objects.cache_insert(deployment("second", 1, 1, 0));
    let owned = replica_set(&first, "rs", Some(("apps/v1", "second")));
    c.on_replica_set(&Change::Added(Arc::new(owned)), Origin::Watch);
    assert_eq!(drain_queue(&c.core).await, ["default/second"]);
    assert!(f.api.requests().is_empty(), "a handler calls no API");
}

/// upstream: TestAddReplicaSetOrphan
#[tokio::test]
async fn an_orphan_replica_set_wakes_every_deployment_selecting_it() {
    let (c, f) = controller();
    let first = deployment("first", 1, 1, 0);
    c.core.objects.cache_insert(first.clone());
    c.core.objects.cache_insert(deployment("second", 1, 1, 0));
    let mut elsewhere = deployment("elsewhere", 1, 1, 0);
    elsewhere.metadata.namespace = Some("other".into());
    c.core.objects.cache_insert(elsewhere);
    c.on_replica_set(
        &Change::Added(Arc::new(replica_set(&first, "rs", None))),
        Origin::Watch,
    );
    assert_eq!(
        drain_queue(&c.core).await,
        ["default/first", "default/second"]
    );
    assert!(f.api.requests().is_empty(), "a handler calls no API");
}

#[tokio::test]
async fn a_replica_set_of_a_same_named_deployment_of_the_other_family_is_not_ours() {
    let (c, f) = controller();
    let d = deployment("web", 1, 1, 0);
    c.core.objects.cache_insert(d.clone());
    // The copy named `web` is another object: another UID.
    let mut foreign = replica_set(&d, "rs", Some(("minikcm.dev/v1", "web")));
    if let Some(refs) = foreign.metadata.owner_references.as_mut() {
        refs[0].uid = "copy-uid".into();
    }
    c.on_replica_set(&Change::Added(Arc::new(foreign)), Origin::Watch);
    assert!(drain_queue(&c.core).await.is_empty());
    assert!(f.api.requests().is_empty(), "a handler calls no API");
}

#[tokio::test]
async fn a_reference_is_resolved_by_kind_name_and_uid_whatever_its_group_version() {
    let (c, f) = controller();
    let d = deployment("web", 1, 1, 0);
    c.core.objects.cache_insert(d.clone());
    // As upstream, a reference written with an older API group still names the owner by its UID.
    let legacy = replica_set(&d, "rs", Some(("extensions/v1beta1", "web")));
    c.on_replica_set(&Change::Added(Arc::new(legacy)), Origin::Watch);
    assert_eq!(drain_queue(&c.core).await, ["default/web"]);
    assert!(f.api.requests().is_empty(), "a handler calls no API");
}

/// upstream: TestUpdateReplicaSet, TestUpdateReplicaSetOrphanWithNewLabels,
/// TestUpdateReplicaSetChangeControllerRef, TestUpdateReplicaSetRelease, TestDeleteReplicaSet,
/// TestDeleteReplicaSetOrphan: which Deployments a ReplicaSet's update or deletion wakes. `d1` and `d2`
/// select the same labels.
#[tokio::test]
async fn replica_set_updates_and_deletions_wake_the_deployments_concerned() {
    let with_labels = |mut rs: ReplicaSetObject, value: &str| {
        rs.metadata.labels = Some([("foo".to_string(), value.to_string())].into());
        rs
    };
    let bumped = |mut rs: ReplicaSetObject| {
        rs.metadata.resource_version = Some("2".into());
        rs
    };
    let d1 = deployment("d1", 1, 1, 0);
    let d2 = deployment("d2", 1, 1, 0);
    let of_d1 = || {
        let mut rs = replica_set(&d1, "rs1", Some(("apps/v1", "d1")));
        rs.metadata.resource_version = Some("1".into());
        rs
    };
    let orphan = || {
        let mut rs = of_d1();
        rs.metadata.owner_references = None;
        rs
    };
    let of_d2 = || {
        let mut rs = of_d1();
        rs.metadata.owner_references = replica_set(&d2, "rs1", Some(("apps/v1", "d2")))
            .metadata
            .owner_references;
        rs
    };
    let cases: Vec<(&str, Change<ReplicaSetObject>, Vec<&str>)> = vec![
        (
            "an update of a controlled ReplicaSet wakes its controller",
            Change::Updated {
                old: Arc::new(of_d1()),
                new: Arc::new(bumped(of_d1())),
            },
            vec!["default/d1"],
        ),
        (
            "an orphan whose labels now match wakes every Deployment selecting it",
            Change::Updated {
                old: Arc::new(with_labels(orphan(), "notbar")),
                new: Arc::new(bumped(orphan())),
            },
            vec!["default/d1", "default/d2"],
        ),
        (
            "a changed controller reference wakes the old and the new controller",
            Change::Updated {
                old: Arc::new(of_d2()),
                new: Arc::new(bumped(of_d1())),
            },
            vec!["default/d1", "default/d2"],
        ),
        (
            "a released ReplicaSet wakes every Deployment selecting it",
            Change::Updated {
                old: Arc::new(of_d1()),
                new: Arc::new(bumped(orphan())),
            },
            vec!["default/d1", "default/d2"],
        ),
        (
            "a deleted ReplicaSet wakes its controller",
            Change::Deleted(Arc::new(of_d1())),
            vec!["default/d1"],
        ),
        (
            "a deleted orphan wakes nobody",
            Change::Deleted(Arc::new(orphan())),
            vec![],
        ),
    ];
    for (case, change, expected) in cases {
        let (c, f) = controller();
        c.core.objects.cache_insert(d1.clone());
        c.core.objects.cache_insert(d2.clone());
        c.on_replica_set(&change, Origin::Watch);
        assert_eq!(drain_queue(&c.core).await, expected, "{case}");
        assert!(
            f.api.requests().is_empty(),
            "{case}: a handler calls no API"
        );
    }
}

/// A pod of `rs` (controlled by it), named `name`.
fn pod_of(rs: &ReplicaSetObject, name: &str) -> CachedPod {
    let mut pod = CachedPod::default();
    pod.metadata.name = Some(name.into());
    pod.metadata.namespace = Some("default".into());
    let rs_name = rs.metadata.name.as_deref().unwrap_or_default();
    let rs_uid = rs.metadata.uid.as_deref().unwrap_or_default();
    controlled_by(&mut pod.metadata, "apps/v1", "ReplicaSet", rs_name, rs_uid);
    pod
}

/// upstream: TestPodDeletionEnqueuesRecreateDeployment (v1.37's table: "last pod deleted", "pod with
/// siblings deleted"), TestPodDeletionPartialReplicaSetOwnershipEnqueueRecreateDeployment (an orphan
/// ReplicaSet of the same selector beside): every deletion of a pod of a Recreate Deployment wakes it,
/// whatever pods are left, in which of its ReplicaSets; a RollingUpdate Deployment is not woken by pod
/// deletions.
#[tokio::test]
async fn a_pod_deletion_wakes_a_recreate_deployment_whatever_pods_are_left() {
    // (case, Recreate, pods left in the cache after the deletion: of `web-1`, of `web-2`, of an orphan
    // ReplicaSet; woken)
    let cases = [
        ("last pod deleted", true, 0, 0, 0, true),
        ("pod with siblings deleted", true, 1, 0, 0, true),
        ("pods left in another ReplicaSet", true, 0, 2, 0, true),
        ("an orphan ReplicaSet's pods beside", true, 0, 0, 2, true),
        ("a rolling update is not woken", false, 0, 0, 0, false),
        ("a rolling update with pods left", false, 1, 1, 1, false),
    ];
    for (case, strategy_recreate, left_1, left_2, left_orphan, woken) in cases {
        let (c, f) = controller();
        let mut d = deployment("web", 1, 1, 0);
        if strategy_recreate {
            d = recreate(d);
        }
        c.core.objects.cache_insert(d.clone());
        let rs1 = replica_set(&d, "web-1", Some(("apps/v1", "web")));
        let rs2 = replica_set(&d, "web-2", Some(("apps/v1", "web")));
        let orphan = replica_set(&d, "orphan", None);
        for (rs, left) in [(&rs1, left_1), (&rs2, left_2), (&orphan, left_orphan)] {
            c.replica_sets.cache_insert(rs.clone());
            let rs_name = rs.metadata.name.as_deref().unwrap_or_default();
            for i in 0..left {
                c.pods.cache_insert(pod_of(rs, &format!("{rs_name}-{i}")));
            }
        }
        c.pod_deleted(&pod_of(&rs1, "web-1-gone"), Origin::Watch);
        let expected: Vec<String> = if woken {
            vec!["default/web".into()]
        } else {
            vec![]
        };
        assert_eq!(drain_queue(&c.core).await, expected, "{case}");
        assert!(
            f.api.requests().is_empty(),
            "{case}: a handler calls no API"
        );
    }
}

/// A pod whose ReplicaSet no Deployment controls (an orphan ReplicaSet's pod) wakes nobody.
#[tokio::test]
async fn a_deleted_pod_of_an_orphan_replica_set_wakes_nobody() {
    let (c, f) = controller();
    let d = recreate(deployment("web", 1, 1, 0));
    c.core.objects.cache_insert(d.clone());
    let orphan = replica_set(&d, "orphan", None);
    c.replica_sets.cache_insert(orphan.clone());
    c.pod_deleted(&pod_of(&orphan, "orphan-x"), Origin::Watch);
    assert_eq!(drain_queue(&c.core).await, Vec::<String>::new());
    assert!(f.api.requests().is_empty(), "a handler calls no API");
}

#[tokio::test]
async fn the_sync_waits_until_the_cache_shows_its_own_writes() {
    let (c, f) = controller();
    let mut d = deployment("web", 1, 1, 0);
    d.metadata.resource_version = Some("5".into());
    c.core.objects.cache_insert(d.clone());
    let key = ObjectKey::of(&d.metadata);
    // A write of ours produced resourceVersion 10, which the cache has not delivered yet.
    let mut written = d.clone();
    written.metadata.resource_version = Some("10".into());
    c.core.consistency.record_write(&key, &written);
    let err = sync_key(c.as_ref(), &key)
        .await
        .expect_err("a stale cache is not synced");
    assert!(matches!(err, SyncKeyError::StaleCache { .. }), "{err}");
    assert!(f.api.requests().is_empty(), "a skipped sync calls no API");
    c.core.objects.cache_insert(written);
    assert!(c.core.consistency.is_ready(&key));
}

#[tokio::test]
async fn a_deleted_deployment_is_forgotten_without_api_calls() {
    let (c, f) = controller();
    let key = ObjectKey::new("default", "gone");
    let mut written = deployment("gone", 1, 1, 0);
    written.metadata.resource_version = Some("10".into());
    c.core.consistency.record_write(&key, &written);
    // The Deployment cache has seen version 10 (e.g. the deletion) but holds no such object.
    let mut other = deployment("other", 1, 1, 0);
    other.metadata.resource_version = Some("11".into());
    c.core.objects.cache_insert(other);
    let requeue = sync_key(c.as_ref(), &key)
        .await
        .expect("nothing to do, nothing called");
    assert_eq!(requeue, Requeue::Never);
    assert!(f.api.requests().is_empty());
}

#[tokio::test]
async fn selecting_everything_only_observes_the_generation() {
    let f = Fixture::new();
    let mut d = deployment("all", 1, 1, 0);
    d.spec.selector = LabelSelector::default();
    d.metadata.generation = Some(3);
    d.status = Some(
        k8s_openapi::api::apps::v1::DeploymentStatus {
            observed_generation: Some(3),
            ..Default::default()
        }
        .into(),
    );
    f.add_deployment(&d);
    // Already observed: no write, only a SelectingAll event.
    let requeue = f.sync("all").await.expect("nothing to write");
    assert_eq!(requeue, Requeue::Never);
    assert!(f.calls().is_empty(), "{:?}", f.calls());
    assert_eq!(f.events().await, ["SelectingAll"]);

    // Not yet observed: the generation is written, and nothing else.
    d.metadata.generation = Some(4);
    f.add_deployment(&d);
    f.api.clear_requests();
    let requeue = f.sync("all").await.expect("the status write succeeds");
    assert_eq!(requeue, Requeue::Never);
    assert_eq!(f.api.actions(), ["update deployments/status all"]);
    let written = f.stored_deployment("all").unwrap();
    assert_eq!(written.status.unwrap().observed_generation, Some(4));
}

#[tokio::test]
async fn what_wakes_a_deployment_is_said_in_words() {
    let (c, f) = controller();
    let d = deployment("web", 1, 1, 0);
    c.core.objects.cache_insert(d.clone());
    let mut old = replica_set(&d, "web-7d9f", Some(("apps/v1", "web")));
    old.metadata.resource_version = Some("3".into());
    let mut new = old.clone();
    new.metadata.resource_version = Some("4".into());
    c.on_replica_set(
        &Change::Updated {
            old: Arc::new(old),
            new: Arc::new(new),
        },
        Origin::Watch,
    );
    let mut scaled = d.clone();
    scaled.metadata.generation = Some(3);
    c.on_deployment(
        &Change::Updated {
            old: Arc::new(d),
            new: Arc::new(scaled),
        },
        Origin::Watch,
    );
    let (_, woken) = c.core.queue.get_woken().await.unwrap();
    assert_eq!(
        woken.reasons,
        [
            "ReplicaSet web-7d9f status changed",
            "Deployment web spec changed (generation 3)"
        ]
    );
    assert!(f.api.requests().is_empty(), "a handler calls no API");
}
