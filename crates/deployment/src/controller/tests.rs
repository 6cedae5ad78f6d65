//! Controller-level unit tests: the controller on caches filled by hand and a client that cannot reach any
//! server, so any API call the controller attempts shows up as an error. Mirrors upstream's handler tests
//! (TestGetReplicaSetsForDeployment-style owner resolution, the Recreate pod-deletion wake-up of
//! TestPodDeletionEnqueuesRecreateDeployment) and checks the read-your-own-writes skip.

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, OwnerReference};
use kube::api::ObjectMeta;
use mini_kcm_runtime::controller::offline::{drain_queue, offline_controller};
use mini_kcm_runtime::controller::{ObjectKey, Requeue, SyncKeyError, sync_key};
use mini_kcm_runtime::informers::{Change, Origin};
use mini_kcm_runtime::pods::cached::CachedPod;

use super::DeploymentController;
use super::error::SyncError;
use crate::testutil::{deployment, recreate, rs_for};
use crate::{DeploymentObject, ReplicaSetObject};

fn controller() -> Arc<DeploymentController> {
    offline_controller(&mini_kcm_runtime::recorded_api::RecordedApi::new())
}

fn controlled_by(meta: &mut ObjectMeta, api_version: &str, kind: &str, name: &str, uid: &str) {
    meta.owner_references = Some(vec![OwnerReference {
        api_version: api_version.into(),
        kind: kind.into(),
        name: name.into(),
        uid: uid.into(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }]);
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

#[tokio::test]
async fn a_replica_set_event_wakes_only_its_controller() {
    let c = controller();
    let first = deployment("first", 1, 1, 0);
    c.core.objects.cache_insert(first.clone());
    c.core.objects.cache_insert(deployment("second", 1, 1, 0));
    let owned = replica_set(&first, "rs", Some(("apps/v1", "second")));
    c.on_replica_set(&Change::Added(Arc::new(owned)), Origin::Watch);
    assert_eq!(drain_queue(&c.core).await, ["default/second"]);
}

#[tokio::test]
async fn an_orphan_replica_set_wakes_every_deployment_selecting_it() {
    let c = controller();
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
}

#[tokio::test]
async fn a_replica_set_of_a_same_named_deployment_of_the_other_family_is_not_ours() {
    let c = controller();
    let d = deployment("web", 1, 1, 0);
    c.core.objects.cache_insert(d.clone());
    // The copy named `web` is another object: another UID.
    let mut foreign = replica_set(&d, "rs", Some(("minikcm.dev/v1", "web")));
    if let Some(refs) = foreign.metadata.owner_references.as_mut() {
        refs[0].uid = "copy-uid".into();
    }
    c.on_replica_set(&Change::Added(Arc::new(foreign)), Origin::Watch);
    assert!(drain_queue(&c.core).await.is_empty());
}

#[tokio::test]
async fn a_reference_is_resolved_by_kind_name_and_uid_whatever_its_group_version() {
    let c = controller();
    let d = deployment("web", 1, 1, 0);
    c.core.objects.cache_insert(d.clone());
    // As upstream, a reference written with an older API group still names the owner by its UID.
    let legacy = replica_set(&d, "rs", Some(("extensions/v1beta1", "web")));
    c.on_replica_set(&Change::Added(Arc::new(legacy)), Origin::Watch);
    assert_eq!(drain_queue(&c.core).await, ["default/web"]);
}

#[tokio::test]
async fn a_pod_deletion_wakes_its_deployment_only_for_recreate() {
    for (strategy_recreate, expected) in [(true, vec!["default/web"]), (false, vec![])] {
        let c = controller();
        let mut d = deployment("web", 1, 1, 0);
        if strategy_recreate {
            d = recreate(d);
        }
        c.core.objects.cache_insert(d.clone());
        c.replica_sets
            .cache_insert(replica_set(&d, "web-hash", Some(("apps/v1", "web"))));
        let mut pod = CachedPod::default();
        pod.metadata.name = Some("web-hash-x".into());
        pod.metadata.namespace = Some("default".into());
        controlled_by(
            &mut pod.metadata,
            "apps/v1",
            "ReplicaSet",
            "web-hash",
            "uid-web-hash",
        );
        c.pod_deleted(&pod, Origin::Watch);
        assert_eq!(
            drain_queue(&c.core).await,
            expected,
            "recreate: {strategy_recreate}"
        );
    }
}

#[tokio::test]
async fn the_sync_waits_until_the_cache_shows_its_own_writes() {
    let c = controller();
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
    c.core.objects.cache_insert(written);
    assert!(c.core.consistency.is_ready(&key));
}

#[tokio::test]
async fn a_deleted_deployment_is_forgotten_without_api_calls() {
    let c = controller();
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
}

#[tokio::test]
async fn selecting_everything_only_observes_the_generation() {
    let c = controller();
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
    c.core.objects.cache_insert(d.clone());
    // Already observed: no write (the unreachable client would fail one), only a SelectingAll event.
    let requeue = sync_key(c.as_ref(), &ObjectKey::of(&d.metadata))
        .await
        .expect("no API call");
    assert_eq!(requeue, Requeue::Never);
    // Not yet observed: the generation is written, which fails against the unreachable client.
    d.metadata.generation = Some(4);
    c.core.objects.cache_insert(d.clone());
    let err = sync_key(c.as_ref(), &ObjectKey::of(&d.metadata))
        .await
        .expect_err("a status write is attempted");
    assert!(
        matches!(err, SyncKeyError::Failed(SyncError::UpdateStatus(_))),
        "{err}"
    );
}

#[tokio::test]
async fn what_wakes_a_deployment_is_said_in_words() {
    let c = controller();
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
}
