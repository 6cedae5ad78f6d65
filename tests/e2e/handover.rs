//! Hand-over between kube-controller-manager's workload controllers and mini-kcm's, both ways, on one
//! plane of this test's own (kube-controller-manager is restarted with and without its Deployment,
//! ReplicaSet and DaemonSet controllers):
//!
//! - a Deployment rolled out by upstream (two revisions), then managed by mini-kcm: no pod is recreated,
//!   no ReplicaSet appears, and a scale-up adds pods to upstream's ReplicaSet;
//! - the reverse: rolled out by mini-kcm, then managed by upstream: the same holds (upstream finds our
//!   ReplicaSet by template, although our pod-template-hash is computed differently).

// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use mini_kcm_e2e::{TIMEOUT, TestManager, deployment, is_active};
use mini_kcm_local_plane::{
    Binaries, LocalPlane, PlaneOptions, UpstreamWorkloadControllers, VersionSet,
};
use mini_kcm_manager::Kinds;
use mini_kcm_testkit::TestNamespace;
use serde_json::json;

/// The UIDs of what a hand-over must not replace: the controller's children (`K`: ReplicaSets or
/// ControllerRevisions) and the active pods.
struct Snapshot {
    children: BTreeSet<String>,
    pods: BTreeSet<String>,
}

async fn snapshot<K>(ns: &TestNamespace) -> Snapshot
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned,
    K::DynamicType: Default,
{
    let children = ns.api::<K>().list(&ListParams::default()).await.unwrap();
    let pods = ns.api::<Pod>().list(&ListParams::default()).await.unwrap();
    Snapshot {
        children: children
            .items
            .into_iter()
            .filter_map(|c| c.meta().uid.clone())
            .collect(),
        pods: pods
            .items
            .into_iter()
            .filter(is_active)
            .filter_map(|p| p.metadata.uid)
            .collect(),
    }
}

/// A plane of this test's own (its kube-controller-manager gets restarted), starting with upstream's
/// workload controllers on.
async fn upstream_plane() -> (LocalPlane, &'static mini_kcm_testkit::PlaneInfo) {
    let binaries = Binaries::ensure(&VersionSet::selected().unwrap())
        .await
        .unwrap();
    let mut options = PlaneOptions::new(binaries);
    options.nodes = 2;
    options.upstream_workload_controllers = UpstreamWorkloadControllers::Enabled;
    let plane = LocalPlane::start(options).await.unwrap();
    let info: &'static _ = Box::leak(Box::new(plane.info().clone()));
    (plane, info)
}

/// Waits until the Deployment's rollout of `replicas` is complete for its current generation.
async fn wait_complete(ns: &TestNamespace, name: &str, replicas: i32) {
    ns.wait_for(
        &ns.api::<Deployment>(),
        name,
        "a complete rollout",
        TIMEOUT,
        |d| {
            d.is_some_and(|d| {
                let s = d.status.clone().unwrap_or_default();
                s.observed_generation == d.metadata.generation
                    && s.updated_replicas.unwrap_or(0) == replicas
                    && s.available_replicas.unwrap_or(0) == replicas
                    && s.replicas.unwrap_or(0) == replicas
            })
        },
    )
    .await;
}

async fn roll_out_two_revisions(ns: &TestNamespace) {
    let api = ns.api::<Deployment>();
    api.create(&PostParams::default(), &deployment("web", 3))
        .await
        .unwrap();
    wait_complete(ns, "web", 3).await;
    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9"}]}}}})),
    )
    .await
    .unwrap();
    wait_complete(ns, "web", 3).await;
}

/// Scales to 4 and checks that the controller now in charge kept every ReplicaSet and pod, adding one pod.
async fn scale_and_check_nothing_was_replaced(ns: &TestNamespace, before: &Snapshot) {
    ns.api::<Deployment>()
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 4}})),
        )
        .await
        .unwrap();
    wait_complete(ns, "web", 4).await;
    let after = snapshot::<ReplicaSet>(ns).await;
    assert_eq!(
        after.children, before.children,
        "no ReplicaSet created or deleted"
    );
    assert!(before.pods.is_subset(&after.pods), "no pod was replaced");
    assert_eq!(
        after.pods.len(),
        before.pods.len() + 1,
        "exactly one pod added"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployments_change_hands_both_ways_without_recreating_anything() {
    let (mut plane, info) = upstream_plane().await;

    // Upstream rolls out; then upstream's controllers stop and ours take over.
    let from_upstream = TestNamespace::create(info, "handover-from-upstream").await;
    roll_out_two_revisions(&from_upstream).await;
    let before = snapshot::<ReplicaSet>(&from_upstream).await;
    assert_eq!(before.children.len(), 2);
    plane
        .restart_controller_manager(UpstreamWorkloadControllers::Disabled)
        .await
        .unwrap();
    let ours = TestManager::start(&from_upstream, Kinds::Apps).await;
    scale_and_check_nothing_was_replaced(&from_upstream, &before).await;

    // Ours rolls out; then ours stop and upstream's take over.
    let from_ours = TestNamespace::create(info, "handover-from-ours").await;
    let ours_there = TestManager::start(&from_ours, Kinds::Apps).await;
    roll_out_two_revisions(&from_ours).await;
    let before = snapshot::<ReplicaSet>(&from_ours).await;
    assert_eq!(before.children.len(), 2);
    ours_there.stop().await;
    ours.stop().await;
    plane
        .restart_controller_manager(UpstreamWorkloadControllers::Enabled)
        .await
        .unwrap();
    scale_and_check_nothing_was_replaced(&from_ours, &before).await;

    plane.stop().await;
}

/// The same for DaemonSets: kube-controller-manager and mini-kcm recognise each other's
/// ControllerRevisions (the revision data is byte-for-byte upstream's), so a hand-over either way mints
/// no revision and recreates no pod; a new node gets its pod from the controller now in charge.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemon_sets_change_hands_both_ways_without_new_revisions_or_pods() {
    use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
    use mini_kcm_e2e::daemon_set;
    use mini_kcm_testkit::nodes;

    let (mut plane, info) = upstream_plane().await;
    let client = plane.client().await.unwrap();

    async fn wait_rolled_out(ns: &TestNamespace, nodes: i32) {
        ns.wait_for(
            &ns.api::<DaemonSet>(),
            "agent",
            &format!("{nodes} updated, available pods"),
            TIMEOUT,
            |ds| {
                ds.is_some_and(|ds| {
                    let s = ds.status.clone().unwrap_or_default();
                    s.observed_generation == ds.metadata.generation
                        && s.desired_number_scheduled == nodes
                        && s.updated_number_scheduled.unwrap_or(0) == nodes
                        && s.number_available.unwrap_or(0) == nodes
                })
            },
        )
        .await;
    }
    async fn roll_out_daemon_set(ns: &TestNamespace, nodes: i32) {
        let api = ns.api::<DaemonSet>();
        api.create(&PostParams::default(), &daemon_set("agent"))
            .await
            .unwrap();
        wait_rolled_out(ns, nodes).await;
        api.patch(
            "agent",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9"}]}}}})),
        )
        .await
        .unwrap();
        wait_rolled_out(ns, nodes).await;
    }
    /// Adds a node; the controller in charge must give it a pod, and change nothing else.
    async fn add_node_and_check(
        ns: &TestNamespace,
        client: &kube::Client,
        node: &str,
        nodes_now: i32,
        before: &Snapshot,
    ) {
        nodes::create(client, &nodes::NodeSpec::named(node))
            .await
            .unwrap();
        wait_rolled_out(ns, nodes_now).await;
        let after = snapshot::<ControllerRevision>(ns).await;
        assert_eq!(
            after.children, before.children,
            "no ControllerRevision created or deleted"
        );
        assert!(before.pods.is_subset(&after.pods), "no pod was replaced");
        assert_eq!(
            after.pods.len(),
            before.pods.len() + 1,
            "one pod for the new node"
        );
    }

    // Upstream rolls out two revisions; then ours takes over.
    let from_upstream = TestNamespace::create(info, "ds-handover-from-upstream").await;
    roll_out_daemon_set(&from_upstream, 2).await;
    let before = snapshot::<ControllerRevision>(&from_upstream).await;
    assert_eq!(before.children.len(), 2);
    plane
        .restart_controller_manager(UpstreamWorkloadControllers::Disabled)
        .await
        .unwrap();
    let ours = TestManager::start(&from_upstream, Kinds::Apps).await;
    add_node_and_check(&from_upstream, &client, "handover-node-3", 3, &before).await;

    // Ours rolls out two revisions; then upstream takes over.
    let from_ours = TestNamespace::create(info, "ds-handover-from-ours").await;
    let ours_there = TestManager::start(&from_ours, Kinds::Apps).await;
    roll_out_daemon_set(&from_ours, 3).await;
    let before = snapshot::<ControllerRevision>(&from_ours).await;
    assert_eq!(before.children.len(), 2);
    ours_there.stop().await;
    ours.stop().await;
    plane
        .restart_controller_manager(UpstreamWorkloadControllers::Enabled)
        .await
        .unwrap();
    add_node_and_check(&from_ours, &client, "handover-node-4", 4, &before).await;
    plane.stop().await;
}
