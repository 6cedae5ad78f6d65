//! Upstream's tests of the Deployment controller's writing half (`deployment_controller_test.go`,
//! `sync_test.go`, `rolling_test.go`, `recreate_test.go`, `progress_test.go` of
//! `pkg/controller/deployment`), as whole syncs against the recorded API: the Deployment and its
//! ReplicaSets are stored in the API and in the caches, one `sync_key` runs, and the test asserts the
//! requests it made and what they carried. Upstream calls the step under test (`scale`,
//! `cleanupDeployment`, `reconcileNewReplicaSet`...) with a fake clientset; here the same case is set up
//! so that a full sync reaches that step, and the step's numbers are checked in the writes. The pure
//! arithmetic of the same tables is tested once more in the pure modules (`proportional`, `rolling`,
//! `history`, `recreate`, `status`).
//!
//! The last part checks read-your-own-writes for every kind of write the controller makes: the sync
//! after a write waits (`StaleCache`) until the caches show it, then runs.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{DeploymentCondition, DeploymentStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use mini_kcm_runtime::controller::ownership::{AdoptionRefused, ClaimError};
use mini_kcm_runtime::controller::{Requeue, SyncKeyError};
use mini_kcm_runtime::pods::cached::{CachedPod, CachedPodStatus};

use super::SyncError;
use crate::annotations::{
    DESIRED_REPLICAS_ANNOTATION, MAX_REPLICAS_ANNOTATION, POD_TEMPLATE_HASH_LABEL,
    REVISION_ANNOTATION, ROLLBACK_TO_ANNOTATION, set_replicas_annotations,
};
use crate::strategy::max_surge;
use crate::testutil::{
    Fixture, at_revision, controller_ref, deployment, new_rs, old_rs, recreate, ts, with_available,
    with_status,
};
use crate::{DeploymentObject, ReplicaSetObject};

// ---- helpers ----

/// The sizes written to ReplicaSet `name`, in order.
fn sizes_written(f: &Fixture, name: &str) -> Vec<i64> {
    f.bodies(&format!("update replicasets {name}"))
        .iter()
        .map(|body| body["spec"]["replicas"].as_i64().expect("a size"))
        .collect()
}

/// `rs` created at `at`.
fn created(mut rs: ReplicaSetObject, at: &str) -> ReplicaSetObject {
    rs.metadata.creation_timestamp = Some(Time(ts(at)));
    rs
}

/// `rs` without a revision annotation.
fn no_revision(mut rs: ReplicaSetObject) -> ReplicaSetObject {
    if let Some(a) = rs.metadata.annotations.as_mut() {
        a.remove(REVISION_ANNOTATION);
    }
    rs
}

/// `d` with that status.
fn with_deployment_status(mut d: DeploymentObject, status: DeploymentStatus) -> DeploymentObject {
    d.status = Some(status.into());
    d
}

/// A pod controlled by `rs`, in that phase (`None`: no phase reported yet).
fn pod_of(rs: &ReplicaSetObject, name: &str, phase: Option<&str>) -> CachedPod {
    let mut pod = CachedPod::default();
    pod.metadata.name = Some(name.into());
    pod.metadata.namespace = Some("default".into());
    pod.metadata.labels = rs.metadata.labels.clone();
    pod.metadata.owner_references = Some(vec![mini_kcm_fixtures::controller_ref(
        "ReplicaSet",
        rs.metadata.name.as_deref().unwrap_or_default(),
        rs.metadata.uid.as_deref().unwrap_or_default(),
    )]);
    pod.status = Some(CachedPodStatus {
        phase: phase.map(str::to_string),
        ..Default::default()
    });
    pod
}

/// Upstream's `newRSWithAvailable`: status.replicas and availableReplicas (no ready count).
fn rs_with_available(rs: ReplicaSetObject, replicas: i32, available: i32) -> ReplicaSetObject {
    with_available(with_status(rs, replicas, 0), available)
}

/// The condition of `type_` in a status as the API stores it.
fn condition<'a>(status: &'a DeploymentStatus, type_: &str) -> Option<&'a DeploymentCondition> {
    status
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_.as_deref() == Some(type_))
}

/// The next sync of `name` waits for the caches, and asks the API nothing.
async fn assert_waits(f: &Fixture, name: &str, why: &str) {
    f.api.clear_requests();
    let err = f
        .sync(name)
        .await
        .expect_err("the caches lag behind our own write");
    assert!(
        matches!(err, SyncKeyError::StaleCache { .. }),
        "{why}: {err}"
    );
    assert!(f.calls().is_empty(), "{why}: {:?}", f.calls());
}

// ---- deployment_controller_test.go ----

/// upstream: TestSyncDeploymentCreatesReplicaSet
#[tokio::test]
async fn a_deployment_without_replica_sets_creates_its_new_one() {
    let f = Fixture::new();
    f.add_deployment(&deployment("foo", 1, 0, 0));
    f.run("foo", "the sync succeeds").await;
    assert_eq!(
        f.api.actions(),
        [
            "create replicasets",
            "update deployments/status foo",
            "update deployments/status foo"
        ]
    );
    let name = f.api.writes()[0].name.clone().expect("a named creation");
    let rs = f.stored_replica_set(&name).expect("created");
    let hash = rs.metadata.labels.as_ref().unwrap()[POD_TEMPLATE_HASH_LABEL].clone();
    assert_eq!(name, format!("foo-{hash}"));
    assert_eq!(rs.spec.replicas, Some(1));
    assert_eq!(
        rs.spec.selector.match_labels.as_ref().unwrap()[POD_TEMPLATE_HASH_LABEL],
        hash
    );
    let d = f.stored_deployment("foo").unwrap();
    assert_eq!(rs.metadata.owner_references, Some(vec![controller_ref(&d)]));
    let annotations = rs.metadata.annotations.as_ref().unwrap();
    assert_eq!(annotations[REVISION_ANNOTATION], "1");
    assert_eq!(annotations[DESIRED_REPLICAS_ANNOTATION], "1");
    assert_eq!(annotations[MAX_REPLICAS_ANNOTATION], "1");
    // The first status write records the revision, the second the counts.
    let writes = f.bodies("update deployments/status foo");
    assert_eq!(
        writes[0]["metadata"]["annotations"][REVISION_ANNOTATION],
        "1"
    );
    assert_eq!(writes[1]["status"]["unavailableReplicas"], 1);
    assert_eq!(f.events().await, ["ScalingReplicaSet"]);
}

/// upstream: TestSyncDeploymentDontDoAnythingDuringDeletion
#[tokio::test]
async fn a_deployment_being_deleted_only_gets_its_status_written() {
    let f = Fixture::new();
    let mut d = deployment("foo", 1, 0, 0);
    d.metadata.deletion_timestamp = Some(Time(Timestamp::now()));
    f.add_deployment(&d);
    f.run("foo", "the sync succeeds").await;
    assert_eq!(f.api.actions(), ["update deployments/status foo"]);
    assert!(
        f.api
            .list::<ReplicaSetObject>(&crate::testutil::replica_sets())
            .is_empty()
    );
}

/// upstream: TestSyncDeploymentDeletionRace
#[tokio::test]
async fn an_adoption_is_refused_when_the_api_says_the_deployment_is_being_deleted() {
    let f = Fixture::new();
    // The cache says the Deployment lives; the API server knows it is being deleted.
    let d = f.add_deployment(&deployment("foo", 1, 0, 0));
    let mut deleting = d.clone();
    deleting.metadata.deletion_timestamp = Some(Time(Timestamp::now()));
    f.api
        .insert_with(&deleting, &crate::testutil::deployments());
    // An orphan that matches: adopting it is what makes the controller read the Deployment again.
    let mut orphan = new_rs(&d, "rs1", 1, 1);
    orphan.metadata.owner_references = None;
    f.add_replica_set(&orphan);

    let err = f.sync("foo").await.expect_err("no adoption");
    assert!(
        matches!(
            &err,
            SyncKeyError::Failed(SyncError::Claim(ClaimError::CannotAdopt {
                reason: AdoptionRefused::Deleting { .. },
                ..
            }))
        ),
        "{err:?}"
    );
    assert_eq!(f.calls(), ["get deployments foo"]);
}

/// upstream: TestDontSyncDeploymentsWithEmptyPodSelector
#[tokio::test]
async fn a_deployment_selecting_everything_is_not_synced() {
    let f = Fixture::new();
    let mut d = deployment("foo", 1, 0, 0);
    d.spec.selector = LabelSelector::default();
    f.add_deployment(&d);
    let requeue = f.sync("foo").await.expect("nothing to do");
    assert_eq!(requeue, Requeue::Never);
    // No generation to observe (as upstream's fixture): no write at all.
    assert!(f.calls().is_empty(), "{:?}", f.calls());
    assert_eq!(f.events().await, ["SelectingAll"]);
}

/// The Deployment and ReplicaSets of upstream's TestReentrantRollback: at revision 2, asked to roll
/// back to the previous revision (0), whose ReplicaSet has another termination grace period.
fn reentrant_rollback(f: &Fixture) -> DeploymentObject {
    let mut d = at_revision(deployment("foo", 1, 0, 0), 2);
    d.metadata
        .annotations
        .as_mut()
        .unwrap()
        .insert(ROLLBACK_TO_ANNOTATION.into(), "0".into());
    let mut old = new_rs(&d, "deploymentrs-old", 0, 1);
    if let Some(spec) = old.spec.template.as_mut().and_then(|t| t.spec.as_mut()) {
        spec.termination_grace_period_seconds = Some(1);
    }
    f.add_replica_set(&old);
    f.add_replica_set(&new_rs(&d, "deploymentrs-new", 1, 2));
    f.add_deployment(&d)
}

/// upstream: TestReentrantRollback
#[tokio::test]
async fn a_rollback_updates_the_deployment_and_no_replica_set() {
    let f = Fixture::new();
    reentrant_rollback(&f);
    f.run("foo", "the rollback is written").await;
    assert_eq!(f.api.actions(), ["update deployments foo"]);
    let d = f.stored_deployment("foo").unwrap();
    let template = &d.spec.template;
    assert_eq!(
        template
            .spec
            .as_ref()
            .unwrap()
            .termination_grace_period_seconds,
        Some(1),
        "the old template is back"
    );
    assert!(
        !template
            .metadata
            .as_ref()
            .and_then(|m| m.labels.as_ref())
            .unwrap()
            .contains_key(POD_TEMPLATE_HASH_LABEL),
        "without the ReplicaSet's hash label"
    );
    let annotations = d.metadata.annotations.as_ref().unwrap();
    assert!(!annotations.contains_key(ROLLBACK_TO_ANNOTATION));
    assert_eq!(annotations[REVISION_ANNOTATION], "2");
    assert_eq!(f.events().await, ["DeploymentRollback"]);
}

/// upstream: TestGetReplicaSetsForDeployment
#[tokio::test]
async fn each_deployment_claims_only_the_replica_sets_it_controls() {
    let f = Fixture::new();
    // Two Deployments with the same selector; each controls one ReplicaSet matching both.
    let foo = f.add_deployment(&at_revision(deployment("foo", 1, 0, 0), 1));
    let bar = f.add_deployment(&at_revision(deployment("bar", 1, 0, 0), 1));
    f.add_replica_set(&with_status(new_rs(&foo, "rs1", 1, 1), 1, 1));
    f.add_replica_set(&with_status(new_rs(&bar, "rs2", 1, 1), 1, 1));
    for (name, other_rs) in [("foo", "rs2"), ("bar", "rs1")] {
        f.api.clear_requests();
        f.run(name, "the sync succeeds").await;
        assert_eq!(
            f.api.actions(),
            [format!("update deployments/status {name}")]
        );
        assert!(
            f.api
                .requests()
                .iter()
                .all(|r| r.name.as_deref() != Some(other_rs)),
            "{name} never touches {other_rs}"
        );
        // The status counts its own ReplicaSet only.
        let status = f.stored_deployment(name).unwrap().status.unwrap();
        assert_eq!(status.replicas, Some(1), "{name}");
        assert_eq!(status.updated_replicas, Some(1), "{name}");
    }
}

/// upstream: TestGetReplicaSetsForDeploymentAdoptRelease
#[tokio::test]
async fn a_matching_orphan_is_adopted_and_a_mismatching_replica_set_released() {
    let f = Fixture::new();
    let d = f.add_deployment(&at_revision(deployment("foo", 1, 0, 0), 1));
    let mut adopt = with_status(new_rs(&d, "rs-adopt", 1, 1), 1, 1);
    adopt.metadata.owner_references = None;
    f.add_replica_set(&adopt);
    let mut release = with_status(new_rs(&d, "rs-release", 1, 1), 1, 1);
    release.metadata.labels = Some(BTreeMap::from([("foo".into(), "notbar".into())]));
    f.add_replica_set(&release);

    f.run("foo", "the sync succeeds").await;
    let calls = f.calls();
    // The claim's writes go in name order (the fresh read of the owner before the first adoption).
    assert_eq!(
        calls[..3],
        [
            "get deployments foo",
            "patch replicasets rs-adopt",
            "patch replicasets rs-release"
        ],
        "{calls:?}"
    );
    let adopted = f.stored_replica_set("rs-adopt").unwrap();
    assert_eq!(
        adopted.metadata.owner_references,
        Some(vec![controller_ref(&d)])
    );
    let released = f.stored_replica_set("rs-release").unwrap();
    assert_eq!(released.metadata.owner_references, Some(vec![]));
    // Only the adopted one counts.
    let status = f.stored_deployment("foo").unwrap().status.unwrap();
    assert_eq!(status.replicas, Some(1));
}

// ---- recreate_test.go (and the pod map of deployment_controller_test.go) ----

/// upstream: TestScaleDownOldReplicaSets
#[tokio::test]
async fn recreate_scales_every_old_replica_set_down_first() {
    let f = Fixture::new();
    let d = f.add_deployment(&at_revision(recreate(deployment("foo", 3, 0, 0)), 1));
    f.add_replica_set(&old_rs(&d, "foo-0", 3, 1));
    f.run("foo", "the sync succeeds").await;
    assert_eq!(
        f.api.actions(),
        ["update replicasets foo-0", "update deployments/status foo"],
        "old ones down, no new ReplicaSet yet"
    );
    assert_eq!(sizes_written(&f, "foo-0"), [0]);
    assert_eq!(f.events().await, ["ScalingReplicaSet"]);
}

/// upstream: TestOldPodsRunning, TestGetPodMapForReplicaSets
///
/// Whether old pods still run decides whether a Recreate sync creates the new ReplicaSet. The pods
/// counted are those of the Deployment's ReplicaSets, whatever their phase (terminal ones then do not
/// block); a pod that matches the selector but has no controller is not one of them.
#[tokio::test]
async fn recreate_creates_the_new_replica_set_only_once_no_old_pod_runs() {
    // (case, old ReplicaSets as (status.replicas), pods as (owner index or None, phase), creates)
    type Case = (
        &'static str,
        &'static [i32],
        &'static [(Option<usize>, Option<&'static str>)],
        bool,
    );
    let cases: [Case; 10] = [
        ("no old RSs", &[], &[], true),
        (
            "old RSs with running pods",
            &[0, 0],
            &[
                (Some(0), None),
                (Some(0), None),
                (Some(1), None),
                (Some(1), None),
            ],
            false,
        ),
        (
            "old RSs without pods but with non-zero status replicas",
            &[1],
            &[],
            false,
        ),
        (
            "old RSs without pods or non-zero status replicas",
            &[0],
            &[],
            true,
        ),
        (
            "old RSs with zero status replicas but pods in terminal state are present",
            &[0],
            &[(Some(0), Some("Failed")), (Some(0), Some("Succeeded"))],
            true,
        ),
        (
            "old RSs with zero status replicas but pod in unknown phase present",
            &[0],
            &[(Some(0), Some("Unknown"))],
            false,
        ),
        (
            "old RSs with zero status replicas with pending pod present",
            &[0],
            &[(Some(0), Some("Pending"))],
            false,
        ),
        (
            "old RSs with zero status replicas with running pod present",
            &[0],
            &[(Some(0), Some("Running"))],
            false,
        ),
        (
            "old RSs with zero status replicas but pods in terminal state and pending are present",
            &[0, 0, 0],
            &[
                (Some(0), Some("Failed")),
                (Some(0), Some("Succeeded")),
                (Some(2), Some("Pending")),
            ],
            false,
        ),
        (
            // TestGetPodMapForReplicaSets: a matching pod without a controller is not the
            // Deployment's.
            "a running orphan pod matching the selector",
            &[0],
            &[(None, Some("Running"))],
            true,
        ),
    ];
    for (case, old, pods, creates) in cases {
        let f = Fixture::new();
        let d = f.add_deployment(&at_revision(
            recreate(deployment("foo", 1, 0, 0)),
            old.len() as i64,
        ));
        let olds: Vec<ReplicaSetObject> = old
            .iter()
            .enumerate()
            .map(|(i, status)| {
                let rs = old_rs(&d, &format!("rs-{i}"), 0, i as i64 + 1);
                f.add_replica_set(&with_status(rs, *status, 0))
            })
            .collect();
        for (i, (owner, phase)) in pods.iter().enumerate() {
            let mut pod = pod_of(&olds[owner.unwrap_or(0)], &format!("pod-{i}"), *phase);
            if owner.is_none() {
                pod.metadata.owner_references = None;
            }
            f.add_pod(pod);
        }
        f.run("foo", "the sync succeeds").await;
        let actions = f.api.actions();
        assert_eq!(
            actions.iter().any(|a| a == "create replicasets"),
            creates,
            "{case}: {actions:?}"
        );
        if !creates {
            assert_eq!(actions, ["update deployments/status foo"], "{case}");
        }
    }
}

// ---- sync_test.go ----

/// One row of upstream's TestScale.
struct ScaleCase {
    name: &'static str,
    /// The Deployment: replicas, maxSurge, maxUnavailable.
    deployment: (i32, i32, i32),
    /// The Deployment before the scaling event (its replicas and maxSurge gave the annotations).
    old_deployment: (i32, i32),
    /// The template changed too: every ReplicaSet is old.
    new_template: bool,
    new_rs: Option<(&'static str, i32)>,
    old_rss: &'static [(&'static str, i32, &'static str)],
    /// Every ReplicaSet's size after the sync.
    expected: &'static [(&'static str, i32)],
    /// ReplicaSets not written at all.
    not_written: &'static [&'static str],
    /// desired-replicas annotations other than the old Deployment's replicas.
    desired: &'static [(&'static str, i32)],
}

const NEW: &str = "2016-05-20T02:00:00Z";
const OLD: &str = "2016-05-20T01:00:00Z";
const OLDER: &str = "2016-05-20T00:00:00Z";

fn scale_cases() -> Vec<ScaleCase> {
    let case = |name, deployment, old_deployment, new_rs, old_rss, expected| -> ScaleCase {
        ScaleCase {
            name,
            deployment,
            old_deployment,
            new_template: false,
            new_rs,
            old_rss,
            expected,
            not_written: &[],
            desired: &[],
        }
    };
    vec![
        case(
            "normal scaling event: 10 -> 12",
            (12, 0, 0),
            (10, 0),
            Some(("foo-v1", 10)),
            &[],
            &[("foo-v1", 12)],
        ),
        case(
            "normal scaling event: 10 -> 5",
            (5, 0, 0),
            (10, 0),
            Some(("foo-v1", 10)),
            &[],
            &[("foo-v1", 5)],
        ),
        case(
            "proportional scaling: 5 -> 10",
            (10, 0, 0),
            (5, 0),
            Some(("foo-v2", 2)),
            &[("foo-v1", 3, OLD)],
            &[("foo-v2", 4), ("foo-v1", 6)],
        ),
        case(
            "proportional scaling: 5 -> 3",
            (3, 0, 0),
            (5, 0),
            Some(("foo-v2", 2)),
            &[("foo-v1", 3, OLD)],
            &[("foo-v2", 1), ("foo-v1", 2)],
        ),
        case(
            "proportional scaling: 9 -> 4",
            (4, 0, 0),
            (9, 0),
            Some(("foo-v2", 8)),
            &[("foo-v1", 1, OLD)],
            &[("foo-v2", 4), ("foo-v1", 0)],
        ),
        case(
            "proportional scaling: 7 -> 10",
            (10, 0, 0),
            (7, 0),
            Some(("foo-v3", 2)),
            &[("foo-v2", 3, OLD), ("foo-v1", 2, OLDER)],
            &[("foo-v3", 3), ("foo-v2", 4), ("foo-v1", 3)],
        ),
        case(
            "proportional scaling: 13 -> 8",
            (8, 0, 0),
            (13, 0),
            Some(("foo-v3", 2)),
            &[("foo-v2", 8, OLD), ("foo-v1", 3, OLDER)],
            &[("foo-v3", 1), ("foo-v2", 5), ("foo-v1", 2)],
        ),
        case(
            "leftover distribution: 3 -> 4",
            (4, 0, 0),
            (3, 0),
            Some(("foo-v3", 1)),
            &[("foo-v2", 1, OLD), ("foo-v1", 1, OLDER)],
            &[("foo-v3", 2), ("foo-v2", 1), ("foo-v1", 1)],
        ),
        case(
            "leftover distribution: 3 -> 2",
            (2, 0, 0),
            (3, 0),
            Some(("foo-v3", 1)),
            &[("foo-v2", 1, OLD), ("foo-v1", 1, OLDER)],
            &[("foo-v3", 1), ("foo-v2", 1), ("foo-v1", 0)],
        ),
        case(
            "proportional scaling (no new rs): 4 -> 5",
            (5, 0, 0),
            (4, 0),
            None,
            &[("foo-v2", 2, OLD), ("foo-v1", 2, OLDER)],
            &[("foo-v2", 3), ("foo-v1", 2)],
        ),
        case(
            "proportional scaling: 6 -> 0",
            (0, 0, 0),
            (6, 0),
            Some(("foo-v3", 3)),
            &[("foo-v2", 2, OLD), ("foo-v1", 1, OLDER)],
            &[("foo-v3", 0), ("foo-v2", 0), ("foo-v1", 0)],
        ),
        ScaleCase {
            // Not a scaling event for the sync (no active ReplicaSet): the rollout grows the new one.
            not_written: &["foo-v2", "foo-v1"],
            ..case(
                "proportional scaling: 0 -> 6",
                (6, 0, 0),
                (6, 0),
                Some(("foo-v3", 0)),
                &[("foo-v2", 0, OLD), ("foo-v1", 0, OLDER)],
                &[("foo-v3", 6), ("foo-v2", 0), ("foo-v1", 0)],
            )
        },
        ScaleCase {
            // Upstream ignores the writes of foo-v3 and foo-v1 ("failed"); their size and
            // annotations are current, so the sync writes only foo-v2.
            not_written: &["foo-v3", "foo-v1"],
            desired: &[("foo-v2", 3)],
            ..case(
                "failed rs update",
                (5, 0, 0),
                (5, 0),
                Some(("foo-v3", 2)),
                &[("foo-v2", 1, OLD), ("foo-v1", 1, OLDER)],
                &[("foo-v3", 2), ("foo-v2", 2), ("foo-v1", 1)],
            )
        },
        case(
            "deployment with surge pods",
            (20, 2, 0),
            (10, 2),
            Some(("foo-v2", 6)),
            &[("foo-v1", 6, OLD)],
            &[("foo-v2", 11), ("foo-v1", 11)],
        ),
        case(
            "change both surge and size",
            (50, 6, 0),
            (10, 3),
            Some(("foo-v2", 5)),
            &[("foo-v1", 8, OLD)],
            &[("foo-v2", 22), ("foo-v1", 34)],
        ),
        ScaleCase {
            new_template: true,
            ..case(
                "change both size and template",
                (14, 0, 0),
                (10, 0),
                None,
                &[("foo-v2", 7, NEW), ("foo-v1", 3, OLD)],
                &[("foo-v2", 10), ("foo-v1", 4)],
            )
        },
        ScaleCase {
            // Not a scaling event for the sync either: the rollout leaves both alone (the new
            // one's pods are unavailable, so the old one keeps its pod).
            not_written: &["foo-v2", "foo-v1"],
            ..case(
                "saturated but broken new replica set does not affect old pods",
                (2, 1, 1),
                (2, 1),
                Some(("foo-v2", 2)),
                &[("foo-v1", 1, OLD)],
                &[("foo-v2", 2), ("foo-v1", 1)],
            )
        },
    ]
}

/// upstream: TestScale
#[tokio::test]
async fn a_scaling_event_resizes_the_replica_sets_proportionally() {
    for c in scale_cases() {
        let f = Fixture::new();
        let (replicas, surge, unavailable) = c.deployment;
        let mut d = deployment("foo", replicas, surge, unavailable);
        let old_d = deployment("foo", c.old_deployment.0, c.old_deployment.1, 0);
        // Revisions follow age: the new ReplicaSet (or the newest old one) has the highest.
        let revision = |name: &str| -> i64 { name.trim_start_matches("foo-v").parse().unwrap() };
        let mut rss: Vec<ReplicaSetObject> = c
            .old_rss
            .iter()
            .map(|(name, size, at)| created(old_rs(&d, name, *size, revision(name)), at))
            .collect();
        if c.new_template {
            let template = d.spec.template.metadata.as_mut().unwrap();
            template
                .labels
                .as_mut()
                .unwrap()
                .insert("another".into(), "label".into());
        }
        if let Some((name, size)) = c.new_rs {
            rss.push(created(new_rs(&d, name, size, revision(name)), NEW));
        }
        let top = rss
            .iter()
            .map(|rs| revision(rs.metadata.name.as_deref().unwrap()))
            .max();
        f.add_deployment(&at_revision(d.clone(), top.unwrap_or(0)));
        for rs in &mut rss {
            let name = rs.metadata.name.clone().unwrap();
            let desired = c
                .desired
                .iter()
                .find(|(n, _)| *n == name)
                .map_or(c.old_deployment.0, |(_, v)| *v);
            set_replicas_annotations(rs, desired, desired + max_surge(&old_d));
            f.add_replica_set(rs);
        }

        f.run("foo", "the sync succeeds").await;
        let actions = f.api.actions();
        assert_eq!(
            actions.last().map(String::as_str),
            Some("update deployments/status foo"),
            "{}: {actions:?}",
            c.name
        );
        let max_replicas = replicas + max_surge(&d);
        for (name, expected) in c.expected {
            let rs = f.stored_replica_set(name).unwrap();
            assert_eq!(rs.spec.replicas, Some(*expected), "{}: {name}", c.name);
            if !sizes_written(&f, name).is_empty() {
                // Every write brings the replicas annotations up to date with the size.
                let annotations = rs.metadata.annotations.as_ref().unwrap();
                assert_eq!(
                    annotations[DESIRED_REPLICAS_ANNOTATION],
                    replicas.to_string(),
                    "{}: {name}",
                    c.name
                );
                assert_eq!(
                    annotations[MAX_REPLICAS_ANNOTATION],
                    max_replicas.to_string(),
                    "{}: {name}",
                    c.name
                );
            }
        }
        for name in c.not_written {
            assert!(sizes_written(&f, name).is_empty(), "{}: {name}", c.name);
        }
    }
}

/// upstream: TestDeploymentController_generateReplicaSetName
///
/// The ReplicaSet a sync creates is named `<deployment>-<hash>`, the Deployment's name cut so the
/// whole stays a valid name (253 characters): 242 characters of it with upstream's 10-character hash.
#[tokio::test]
async fn a_created_replica_set_is_named_after_its_deployment_within_the_name_limit() {
    for name in [
        "my-deployment".to_string(),
        "a".repeat(250),
        "a".repeat(242),
    ] {
        let f = Fixture::new();
        f.add_deployment(&deployment(&name, 1, 0, 0));
        f.run(&name, "the sync succeeds").await;
        let created = f.api.writes()[0].name.clone().expect("a named creation");
        let rs = f.stored_replica_set(&created).expect("created");
        let hash = rs.metadata.labels.as_ref().unwrap()[POD_TEMPLATE_HASH_LABEL].clone();
        assert!(created.len() <= 253, "{} characters", created.len());
        let portion = &name[..name.len().min(253 - 1 - hash.len())];
        assert_eq!(
            created,
            format!("{portion}-{hash}"),
            "{} characters",
            name.len()
        );
        if hash.len() == 10 && name.len() >= 242 {
            assert_eq!(portion.len(), 242);
        }
    }
}

/// A paused Deployment `foo` at `revision_history_limit` whose new ReplicaSet `foo-new` is
/// saturated (so the pause only cleans up), with `olds`; returns the names the sync deleted.
async fn cleanup_sync(olds: Vec<ReplicaSetObject>, limit: i32) -> (Fixture, Vec<String>) {
    let f = Fixture::new();
    let mut d = deployment("foo", 1, 0, 0);
    d.spec.revision_history_limit = Some(limit);
    d.spec.paused = Some(true);
    let top = olds
        .iter()
        .filter_map(|rs| crate::annotations::revision(&rs.metadata).ok())
        .max()
        .unwrap_or(0);
    let d = f.add_deployment(&at_revision(d, top + 1));
    let mut new = with_status(new_rs(&d, "foo-new", 1, top + 1), 1, 1);
    set_replicas_annotations(&mut new, 1, 1);
    f.add_replica_set(&created(new, "2016-05-20T03:00:00Z"));
    for rs in olds {
        f.add_replica_set(&rs);
    }
    f.run("foo", "the sync succeeds").await;
    let deleted = f
        .api
        .writes()
        .into_iter()
        .filter(|w| w.verb == mini_kcm_runtime::recorded_api::Verb::Delete)
        .map(|w| {
            assert_eq!(w.resource, "replicasets");
            w.name.unwrap()
        })
        .collect();
    (f, deleted)
}

/// upstream: TestDeploymentController_cleanupDeployment
#[tokio::test]
async fn old_replica_sets_beyond_the_history_limit_are_deleted_once_drained() {
    let d = deployment("foo", 1, 0, 0);
    // (spec.replicas, status.replicas) of foo-1, foo-2...; no revisions, no creation times.
    let old = |sizes: &[(i32, i32)]| -> Vec<ReplicaSetObject> {
        sizes
            .iter()
            .enumerate()
            .map(|(i, (spec, status))| {
                let rs = old_rs(&d, &format!("foo-{}", i + 1), *spec, 0);
                with_status(no_revision(rs), *status, 0)
            })
            .collect()
    };
    let mut already_deleted = old(&[(0, 0)]);
    already_deleted[0].metadata.deletion_timestamp = Some(Time(Timestamp::now()));
    let cases: Vec<(Vec<ReplicaSetObject>, i32, &[&str])> = vec![
        (old(&[(0, 0), (0, 0), (0, 0)]), 1, &["foo-1", "foo-2"]),
        // Only the ReplicaSet with spec.replicas = status.replicas = 0.
        (old(&[(0, 0), (0, 1), (1, 0), (1, 1)]), 0, &["foo-1"]),
        (old(&[(0, 0), (0, 0)]), 0, &["foo-1", "foo-2"]),
        (old(&[(1, 1), (1, 1)]), 0, &[]),
        (already_deleted, 0, &[]),
        // An unlimited history.
        (old(&[(0, 0), (0, 0), (0, 0)]), i32::MAX, &[]),
    ];
    for (i, (olds, limit, expected)) in cases.into_iter().enumerate() {
        let (f, deleted) = cleanup_sync(olds, limit).await;
        assert_eq!(deleted, expected, "case {i}");
        for name in expected {
            assert!(f.stored_replica_set(name).is_none(), "case {i}: {name}");
        }
    }
}

/// upstream: TestDeploymentController_cleanupDeploymentOrder
#[tokio::test]
async fn the_lowest_revisions_are_deleted_first() {
    let d = deployment("foo", 1, 0, 0);
    // (spec.replicas = status.replicas, minutes after 01:00, revision or none) of foo-1, foo-2...
    let old = |rows: &[(i32, i64, Option<i64>)]| -> Vec<ReplicaSetObject> {
        rows.iter()
            .enumerate()
            .map(|(i, (replicas, minutes, revision))| {
                let mut rs = old_rs(
                    &d,
                    &format!("foo-{}", i + 1),
                    *replicas,
                    revision.unwrap_or(0),
                );
                if revision.is_none() {
                    rs = no_revision(rs);
                }
                let at = ts(OLD)
                    .checked_add(SignedDuration::from_mins(*minutes))
                    .unwrap();
                rs.metadata.creation_timestamp = Some(Time(at));
                with_status(rs, *replicas, 0)
            })
            .collect()
    };
    let cases: Vec<(Vec<ReplicaSetObject>, i32, &[&str])> = vec![
        (old(&[(0, -1, Some(1)), (0, 0, Some(2))]), 1, &["foo-1"]),
        (old(&[(0, -1, Some(2)), (0, 0, Some(1))]), 1, &["foo-2"]),
        (old(&[(0, -1, Some(1)), (0, 0, None)]), 1, &["foo-2"]),
        (old(&[(0, -1, None), (0, 0, Some(2))]), 1, &["foo-1"]),
        (
            old(&[(1, -1, Some(1)), (0, 0, Some(2)), (0, 1, Some(3))]),
            1,
            &["foo-2"],
        ),
        (
            old(&[(1, -1, Some(1)), (1, 0, Some(2)), (0, 1, Some(3))]),
            1,
            &[],
        ),
        (
            old(&[
                (0, -1, Some(3)),
                (0, 0, Some(1)),
                (0, 1, Some(4)),
                (0, 2, Some(2)),
            ]),
            2,
            &["foo-2", "foo-4"],
        ),
    ];
    for (i, (olds, limit, expected)) in cases.into_iter().enumerate() {
        let (_, deleted) = cleanup_sync(olds, limit).await;
        assert_eq!(deleted, expected, "case {i}");
    }
}

// ---- rolling_test.go ----

/// upstream: TestDeploymentController_reconcileNewReplicaSet
#[tokio::test]
async fn the_new_replica_set_grows_within_max_surge_and_shrinks_to_replicas() {
    // (replicas, maxSurge, old size, new size, the new size written); maxUnavailable 0.
    let cases = [
        (10, 0, 10, 0, None),
        (10, 2, 10, 0, Some(2)),
        (10, 2, 5, 0, Some(7)),
        (10, 2, 10, 2, None),
        // Should scale down.
        (10, 2, 2, 11, Some(10)),
    ];
    for (i, (replicas, surge, old, new, expected)) in cases.into_iter().enumerate() {
        let f = Fixture::new();
        let d = f.add_deployment(&at_revision(deployment("foo", replicas, surge, 0), 2));
        f.add_replica_set(&new_rs(&d, "foo-new", new, 2));
        f.add_replica_set(&old_rs(&d, "foo-old", old, 1));
        f.run("foo", "the sync succeeds").await;
        let written = sizes_written(&f, "foo-new");
        match expected {
            Some(size) => {
                assert_eq!(written, [size], "case {i}");
                // The step is the sync's only move; the status follows.
                assert_eq!(
                    f.api.actions(),
                    [
                        "update replicasets foo-new",
                        "update deployments/status foo"
                    ],
                    "case {i}"
                );
            }
            None => assert!(written.is_empty(), "case {i}: {written:?}"),
        }
    }
}

/// upstream: TestDeploymentController_reconcileOldReplicaSets
#[tokio::test]
async fn old_replica_sets_shrink_within_max_unavailable() {
    // (replicas, maxUnavailable, old size, new size, old available, new available, the old sizes
    // written); maxSurge 0, so the new ReplicaSet never grows here. Upstream checks "scaled" only.
    type Case = (i32, i32, i32, i32, i32, i32, &'static [i64]);
    let cases: [Case; 5] = [
        (10, 0, 10, 0, 10, 0, &[9]),
        (10, 2, 10, 0, 10, 0, &[8]),
        // Unhealthy replicas of the old ReplicaSet are cleaned up.
        (10, 2, 10, 0, 8, 0, &[8]),
        // One unhealthy replica cleaned up, then one ready pod scaled down.
        (10, 2, 10, 0, 9, 0, &[9, 8]),
        // The new ReplicaSet's unavailable pods leave no room to scale old ones down.
        (10, 2, 8, 2, 8, 0, &[]),
    ];
    for (i, (replicas, unavailable, old, new, old_ready, new_ready, expected)) in
        cases.into_iter().enumerate()
    {
        let f = Fixture::new();
        let d = f.add_deployment(&at_revision(deployment("foo", replicas, 0, unavailable), 2));
        f.add_replica_set(&with_available(new_rs(&d, "foo-new", new, 2), new_ready));
        f.add_replica_set(&with_available(old_rs(&d, "foo-old", old, 1), old_ready));
        f.run("foo", "the sync succeeds").await;
        assert_eq!(sizes_written(&f, "foo-old"), expected, "case {i}");
        assert!(sizes_written(&f, "foo-new").is_empty(), "case {i}");
        assert_eq!(
            f.api.actions().last().map(String::as_str),
            Some("update deployments/status foo"),
            "case {i}"
        );
    }
}

/// upstream: TestDeploymentController_cleanupUnhealthyReplicas
///
/// Upstream passes the most the cleanup may remove (maxCleanupCount); a sync derives it from the
/// Deployment: `replicas + maxSurge − (replicas − maxUnavailable) − unavailable pods of the new
/// ReplicaSet`. Here 10 replicas, maxSurge 2 and a new ReplicaSet of 2 (so it does not grow), which
/// leaves `maxUnavailable + the new ReplicaSet's available pods`, chosen to give upstream's count.
/// The cleanup's write comes first; a scale-down of ready pods may follow it in the same pass.
#[tokio::test]
async fn unhealthy_old_replicas_are_cleaned_up_first_within_the_budget() {
    // (old ready of 10, maxCleanupCount, as (maxUnavailable, new available), cleaned up, the
    // scale-down of ready pods that follows)
    let cases = [
        (8, 1, (1, 0), 1, None),
        (8, 3, (2, 1), 2, Some(7)),
        (8, 0, (0, 0), 0, None),
        (10, 3, (1, 2), 0, Some(7)),
    ];
    for (i, (ready, max_cleanup, (unavailable, new_available), cleaned, scaled_to)) in
        cases.into_iter().enumerate()
    {
        assert_eq!(
            unavailable + new_available,
            max_cleanup,
            "case {i}: the setup"
        );
        let f = Fixture::new();
        let d = f.add_deployment(&at_revision(deployment("foo", 10, 2, unavailable), 2));
        f.add_replica_set(&with_available(new_rs(&d, "foo-new", 2, 2), new_available));
        f.add_replica_set(&with_available(old_rs(&d, "foo-old", 10, 1), ready));
        f.run("foo", "the sync succeeds").await;
        let cleanup = (cleaned > 0).then_some(10 - cleaned);
        let expected: Vec<i64> = cleanup.into_iter().chain(scaled_to).collect();
        assert_eq!(sizes_written(&f, "foo-old"), expected, "case {i}");
        assert!(sizes_written(&f, "foo-new").is_empty(), "case {i}");
    }
}

/// upstream: TestDeploymentController_scaleDownOldReplicaSetsForRollingUpdate
///
/// Upstream calls the scale-down of ready pods alone; a sync runs the cleanup of unhealthy replicas
/// before it, whose write (when there are unhealthy ones) comes first. The new ReplicaSet has no
/// replicas (maxSurge 0: it may not grow while the old one has them all).
#[tokio::test]
async fn ready_old_replicas_are_scaled_down_within_max_unavailable() {
    // (maxUnavailable, old ready, old size, the cleanup's write, the scale-down's write)
    let cases = [
        (0, 10, 10, None, Some(9)),
        (2, 10, 10, None, Some(8)),
        (2, 8, 10, Some(8), None),
        (2, 10, 0, None, None),
        (2, 1, 10, Some(8), None),
    ];
    for (i, (unavailable, ready, old, cleanup, scale_down)) in cases.into_iter().enumerate() {
        let f = Fixture::new();
        let d = f.add_deployment(&at_revision(deployment("foo", 10, 0, unavailable), 2));
        f.add_replica_set(&new_rs(&d, "foo-new", 0, 2));
        f.add_replica_set(&with_available(old_rs(&d, "foo-old", old, 1), ready));
        f.run("foo", "the sync succeeds").await;
        let expected: Vec<i64> = cleanup.into_iter().chain(scale_down).collect();
        assert_eq!(sizes_written(&f, "foo-old"), expected, "case {i}");
    }
}

// ---- progress_test.go ----

fn progressing(status: &str, reason: &str, at: Option<&str>) -> DeploymentCondition {
    DeploymentCondition {
        type_: Some("Progressing".into()),
        status: Some(status.into()),
        reason: Some(reason.into()),
        last_update_time: at.map(|t| Time(ts(t))),
        last_transition_time: at.map(|t| Time(ts(t))),
        message: None,
    }
}

const TEST_TIME: &str = "2017-02-15T18:49:00Z";

/// Upstream's `currentDeployment`: Recreate, `replicas`, the status counts and conditions given.
fn current_deployment(
    deadline: Option<i32>,
    replicas: i32,
    (status_replicas, updated, available): (i32, i32, i32),
    conditions: Vec<DeploymentCondition>,
) -> DeploymentObject {
    let mut d = at_revision(recreate(deployment("progress-test", replicas, 0, 0)), 2);
    d.spec.progress_deadline_seconds = deadline;
    with_deployment_status(
        d,
        DeploymentStatus {
            replicas: Some(status_replicas),
            updated_replicas: Some(updated),
            available_replicas: Some(available),
            conditions: Some(conditions),
            ..Default::default()
        },
    )
}

/// upstream: TestSyncRolloutStatus
///
/// Each case as a Recreate sync that reaches the status: old ReplicaSets already at 0 (one still
/// reporting a pod keeps the new one from growing), the new one at its size. Upstream's case "do not
/// estimate progress of deployment with only one active ReplicaSet" has a single active ReplicaSet
/// that is not the new one, which a sync would scale down first: left to the pure table
/// (`status::tests::sync_rollout_status_table`).
#[tokio::test]
async fn the_progressing_condition_is_written_with_the_status() {
    let updated = || progressing("True", "ReplicaSetUpdated", Some(TEST_TIME));
    let timed_out = || progressing("False", "ProgressDeadlineExceeded", None);
    // (case, deadline, replicas, status counts, conditions, old ReplicaSets (spec, status.replicas,
    // available), new ReplicaSet (same), the Progressing condition written as (status, reason), its
    // lastTransitionTime kept)
    type Sizes = (i32, i32, i32);
    type Case = (
        &'static str,
        Option<i32>,
        i32,
        Sizes,
        Vec<DeploymentCondition>,
        Vec<Sizes>,
        Option<Sizes>,
        Option<(&'static str, &'static str)>,
        bool,
    );
    let cases: Vec<Case> = vec![
        (
            "General: remove Progressing condition and do not estimate progress if deployment has no Progress Deadline",
            None,
            3,
            (2, 2, 2),
            vec![updated()],
            vec![(0, 1, 1)],
            Some((3, 2, 2)),
            None,
            false,
        ),
        (
            "DeploymentProgressing: dont update lastTransitionTime if deployment already has Progressing=True",
            Some(60),
            3,
            (2, 2, 2),
            vec![updated()],
            vec![(0, 1, 1)],
            Some((3, 2, 2)),
            Some(("True", "ReplicaSetUpdated")),
            true,
        ),
        (
            "DeploymentProgressing: update everything if deployment has Progressing=False",
            Some(60),
            3,
            (2, 2, 2),
            vec![timed_out()],
            vec![(0, 1, 1)],
            Some((3, 2, 2)),
            Some(("True", "ReplicaSetUpdated")),
            false,
        ),
        (
            "DeploymentProgressing: create Progressing condition if it does not exist",
            Some(60),
            3,
            (2, 2, 2),
            vec![],
            vec![(0, 1, 1)],
            Some((3, 2, 2)),
            Some(("True", "ReplicaSetUpdated")),
            false,
        ),
        (
            "DeploymentComplete: dont update lastTransitionTime if deployment already has Progressing=True",
            Some(60),
            3,
            (3, 3, 3),
            vec![updated()],
            vec![],
            Some((3, 3, 3)),
            Some(("True", "NewReplicaSetAvailable")),
            true,
        ),
        (
            "DeploymentComplete: update everything if deployment has Progressing=False",
            Some(60),
            3,
            (3, 3, 3),
            vec![timed_out()],
            vec![],
            Some((3, 3, 3)),
            Some(("True", "NewReplicaSetAvailable")),
            false,
        ),
        (
            "DeploymentComplete: create Progressing condition if it does not exist",
            Some(60),
            3,
            (3, 3, 3),
            vec![],
            vec![],
            Some((3, 3, 3)),
            Some(("True", "NewReplicaSetAvailable")),
            false,
        ),
        (
            // The sync creates the missing new ReplicaSet (with 0 replicas) before the status.
            "DeploymentComplete: defend against NPE when newRS=nil",
            Some(60),
            0,
            (3, 3, 3),
            vec![updated()],
            vec![(0, 0, 0)],
            None,
            Some(("True", "NewReplicaSetAvailable")),
            false,
        ),
        (
            "DeploymentTimedOut: update status if rollout exceeds Progress Deadline",
            Some(60),
            3,
            (2, 2, 2),
            vec![updated()],
            vec![],
            Some((3, 2, 2)),
            Some(("False", "ProgressDeadlineExceeded")),
            false,
        ),
        (
            "DeploymentTimedOut: do not update status if deployment has existing timedOut condition",
            Some(60),
            3,
            (2, 2, 2),
            vec![timed_out()],
            vec![],
            Some((3, 2, 2)),
            Some(("False", "ProgressDeadlineExceeded")),
            false,
        ),
    ];
    for (case, deadline, replicas, counts, conditions, olds, new, expected, transition_kept) in
        cases
    {
        let f = Fixture::new();
        let d = f.add_deployment(&current_deployment(deadline, replicas, counts, conditions));
        for (i, (spec, status, available)) in olds.into_iter().enumerate() {
            let rs = old_rs(&d, &format!("bar-{i}"), spec, 1);
            f.add_replica_set(&rs_with_available(rs, status, available));
        }
        if let Some((spec, status, available)) = new {
            f.add_replica_set(&rs_with_available(
                new_rs(&d, "foo", spec, 2),
                status,
                available,
            ));
        }
        f.run("progress-test", "the sync succeeds").await;
        let actions = f.api.actions();
        assert_eq!(
            actions.last().map(String::as_str),
            Some("update deployments/status progress-test"),
            "{case}: {actions:?}"
        );
        let status = f
            .stored_deployment("progress-test")
            .unwrap()
            .status
            .unwrap()
            .status;
        let written = condition(&status, "Progressing");
        match expected {
            None => assert!(written.is_none(), "{case}: {written:?}"),
            Some((expected_status, expected_reason)) => {
                let written = written.unwrap_or_else(|| panic!("{case}: no Progressing"));
                assert_eq!(written.status.as_deref(), Some(expected_status), "{case}");
                assert_eq!(written.reason.as_deref(), Some(expected_reason), "{case}");
                if transition_kept {
                    assert_eq!(
                        written.last_transition_time,
                        Some(Time(ts(TEST_TIME))),
                        "{case}"
                    );
                }
            }
        }
    }
}

/// upstream: TestRequeueStuckDeployment
///
/// A sync that finds nothing to write asks to be run again when the progress deadline passes. Each
/// case is a rolling Deployment of 3 replicas with one available: a first sync writes its status, then
/// the stored Progressing condition is set as the case says and a second sync decides. Upstream's
/// cases at and after the deadline ("less than a second", "now", "after") need a clock the test sets;
/// with the real clock, the second sync there finds the deadline passed and writes
/// ProgressDeadlineExceeded instead (TestSyncRolloutStatus above), so they stay in the pure table
/// (`status::tests::requeue_stuck_deployment_table`), with "stuck deployment - 1s". So does "no
/// progressing condition found": a sync with a deadline that finds no Progressing condition records
/// FoundNewReplicaSet first, as upstream's getNewReplicaSet.
#[tokio::test]
async fn a_stuck_rollout_is_synced_again_when_its_deadline_passes() {
    // Whole seconds, as the API stores times; not after the sync's own clock reading.
    let now = Timestamp::from_second(Timestamp::now().as_second()).unwrap();
    let ago = |secs: i64| Time(now.checked_sub(SignedDuration::from_secs(secs)).unwrap());
    // (case, deadline, replicas, the Progressing condition the stored status gets instead of the
    // first sync's (`None`: kept), the requeue as (above, at most) seconds)
    type Case = (
        &'static str,
        Option<i32>,
        i32,
        Option<DeploymentCondition>,
        Option<(u64, u64)>,
    );
    let stuck = |secs| {
        Some(DeploymentCondition {
            last_update_time: Some(ago(secs)),
            ..progressing("True", "ReplicaSetUpdated", None)
        })
    };
    let cases: Vec<Case> = vec![
        // Without a deadline the first sync wrote no Progressing condition.
        ("nil progressDeadlineSeconds specified", None, 4, None, None),
        (
            "infinite progressDeadlineSeconds specified",
            Some(i32::MAX),
            4,
            None,
            None,
        ),
        // The first sync found it complete (NewReplicaSetAvailable).
        (
            "complete deployment does not need to be requeued",
            Some(60),
            1,
            None,
            None,
        ),
        (
            "already failed deployment does not need to be requeued",
            Some(60),
            4,
            Some(progressing("False", "ProgressDeadlineExceeded", None)),
            None,
        ),
        // 60 s deadline, 30 s gone (up to a second more by now): 30 s left, plus the 1 s pad.
        (
            "stuck deployment - 30s",
            Some(60),
            4,
            stuck(30),
            Some((30, 31)),
        ),
    ];
    for (case, deadline, replicas, progress, expected) in cases {
        let f = Fixture::new();
        let mut d = at_revision(deployment("foo", replicas, 1, 0), 1);
        d.spec.progress_deadline_seconds = deadline;
        let d = f.add_deployment(&d);
        // One pod available (of 1: complete; of 4: not).
        f.add_replica_set(&with_status(
            new_rs(&d, "foo-new", replicas, 1),
            replicas,
            1,
        ));
        f.run("foo", "the first sync writes the status").await;

        let mut stored = f.stored_deployment("foo").unwrap();
        if let Some(progress) = progress {
            let status = stored.status.as_mut().unwrap();
            let conditions = status.conditions.get_or_insert_with(Vec::new);
            conditions.retain(|c| c.type_.as_deref() != Some("Progressing"));
            conditions.push(progress);
        }
        f.add_deployment(&stored);
        f.api.clear_requests();
        let requeue = f.sync("foo").await.expect("the second sync succeeds");
        assert!(f.api.actions().is_empty(), "{case}: {:?}", f.api.actions());
        match expected {
            None => assert_eq!(requeue, Requeue::Never, "{case}"),
            Some((above, at_most)) => {
                let Requeue::After(delay, _) = requeue else {
                    panic!("{case}: {requeue:?}");
                };
                assert!(
                    delay > std::time::Duration::from_secs(above)
                        && delay <= std::time::Duration::from_secs(at_most),
                    "{case}: {delay:?}"
                );
            }
        }
    }
}

// ---- read-your-own-writes, per kind of write ----

/// A ReplicaSet creation: the next sync waits until the ReplicaSet cache shows it.
#[tokio::test]
async fn after_creating_a_replica_set_the_next_sync_waits_for_it() {
    let f = Fixture::new();
    f.add_deployment(&deployment("foo", 1, 0, 0));
    f.run("foo", "the sync succeeds").await;
    assert_eq!(f.api.actions()[0], "create replicasets");
    assert_waits(&f, "foo", "nothing seen yet").await;
    f.feed_deployments();
    assert_waits(&f, "foo", "the creation is not seen yet").await;
    f.feed_replica_sets();
    f.api.clear_requests();
    f.run("foo", "the caches show every write").await;
    assert!(f.calls().is_empty(), "nothing left to do: {:?}", f.calls());
}

/// A ReplicaSet update (a scale): the next sync waits until the ReplicaSet cache shows it.
#[tokio::test]
async fn after_scaling_a_replica_set_the_next_sync_waits_for_it() {
    let f = Fixture::new();
    let d = f.add_deployment(&at_revision(deployment("foo", 5, 0, 0), 1));
    let mut rs = new_rs(&d, "foo-new", 3, 1);
    set_replicas_annotations(&mut rs, 3, 3);
    f.add_replica_set(&rs);
    f.run("foo", "the sync succeeds").await;
    assert_eq!(
        f.api.actions(),
        [
            "update replicasets foo-new",
            "update deployments/status foo"
        ]
    );
    f.feed_deployments();
    assert_waits(&f, "foo", "the scale is not seen yet").await;
    f.feed_replica_sets();
    f.api.clear_requests();
    f.run("foo", "the caches show every write").await;
    assert!(f.calls().is_empty(), "nothing left to do: {:?}", f.calls());
}

/// A ReplicaSet deletion (history cleanup): the next sync waits until the ReplicaSet cache shows it.
#[tokio::test]
async fn after_deleting_a_replica_set_the_next_sync_waits_for_it() {
    let d = deployment("foo", 1, 0, 0);
    let doomed = with_status(no_revision(old_rs(&d, "foo-1", 0, 0)), 0, 0);
    let (f, deleted) = cleanup_sync(vec![doomed], 0).await;
    assert_eq!(deleted, ["foo-1"]);
    f.feed_deployments();
    assert_waits(&f, "foo", "the deletion is not seen yet").await;
    f.feed_replica_sets();
    f.api.clear_requests();
    f.run("foo", "the caches show every write").await;
    assert!(f.calls().is_empty(), "nothing left to do: {:?}", f.calls());
}

/// A status write: the next sync waits until the Deployment cache shows it.
#[tokio::test]
async fn after_writing_the_status_the_next_sync_waits_for_it() {
    let f = Fixture::new();
    let mut d = deployment("foo", 1, 0, 0);
    d.metadata.deletion_timestamp = Some(Time(Timestamp::now()));
    f.add_deployment(&d);
    f.run("foo", "the sync succeeds").await;
    assert_eq!(f.api.actions(), ["update deployments/status foo"]);
    assert_waits(&f, "foo", "the status is not seen yet").await;
    f.feed_deployments();
    f.api.clear_requests();
    f.run("foo", "the cache shows the status").await;
    assert!(
        f.calls().is_empty(),
        "the status is current: {:?}",
        f.calls()
    );
}

/// A full update of the Deployment (a rollback): the next sync waits until the Deployment cache shows
/// it, then rolls out the template it brought back, reusing (and renumbering) its ReplicaSet.
#[tokio::test]
async fn after_a_rollback_the_next_sync_waits_for_it() {
    let f = Fixture::new();
    reentrant_rollback(&f);
    f.run("foo", "the rollback is written").await;
    assert_eq!(f.api.actions(), ["update deployments foo"]);
    assert_waits(&f, "foo", "the rollback is not seen yet").await;
    f.feed_deployments();
    f.api.clear_requests();
    f.run("foo", "the cache shows the rollback").await;
    let actions = f.api.actions();
    assert_eq!(
        actions.first().map(String::as_str),
        Some("update replicasets deploymentrs-old"),
        "{actions:?}"
    );
    let reused = f.stored_replica_set("deploymentrs-old").unwrap();
    assert_eq!(
        reused.metadata.annotations.as_ref().unwrap()[REVISION_ANNOTATION],
        "3"
    );
}

/// An adoption (a patch of the ReplicaSet): the next sync waits until the ReplicaSet cache shows it.
#[tokio::test]
async fn after_adopting_a_replica_set_the_next_sync_waits_for_it() {
    let f = Fixture::new();
    let d = f.add_deployment(&at_revision(deployment("foo", 1, 0, 0), 1));
    let mut orphan = with_status(new_rs(&d, "rs-adopt", 1, 1), 1, 1);
    orphan.metadata.owner_references = None;
    f.add_replica_set(&orphan);
    f.run("foo", "the sync succeeds").await;
    assert_eq!(
        f.api.actions(),
        [
            "patch replicasets rs-adopt",
            "update deployments/status foo"
        ]
    );
    f.feed_deployments();
    assert_waits(&f, "foo", "the adoption is not seen yet").await;
    f.feed_replica_sets();
    f.api.clear_requests();
    f.run("foo", "the caches show every write").await;
    assert!(f.calls().is_empty(), "adopted once: {:?}", f.calls());
}
