//! The plane is real: with kube-controller-manager's own workload controllers enabled
//! (`--workload-controllers upstream`), a Deployment becomes available on simulated nodes, the real
//! scheduler binds its pods, the real garbage collector removes its ReplicaSet and pods, and a DaemonSet
//! gets exactly one pod per node.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, PostParams};
use kube::runtime::watcher;
use mini_kcm_e2e::{app_selector, daemon_set, deployment};
use mini_kcm_testkit::{
    PlaneConfig, PlaneInfo, TestNamespace, UpstreamWorkloadControllers, shared_plane,
};

const TIMEOUT: Duration = Duration::from_secs(90);
const NODES: usize = 3;

fn plane() -> &'static PlaneInfo {
    shared_plane(PlaneConfig {
        nodes: NODES,
        upstream_workload_controllers: UpstreamWorkloadControllers::Enabled,
    })
}

fn is_running_and_ready(pod: &Pod) -> bool {
    let status = pod.status.as_ref();
    status.and_then(|s| s.phase.as_deref()) == Some("Running")
        && status
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployment_becomes_available_and_is_garbage_collected() {
    let ns = TestNamespace::create(plane(), "upstream-deploy").await;
    let deployments = ns.api::<Deployment>();
    deployments
        .create(&PostParams::default(), &deployment("web", 10))
        .await
        .expect("create deployment");

    ns.wait_for(&deployments, "web", "10 available replicas", TIMEOUT, |d| {
        d.and_then(|d| d.status.as_ref())
            .is_some_and(|s| s.available_replicas == Some(10) && s.updated_replicas == Some(10))
    })
    .await;

    // Every pod was bound by the scheduler to one of the simulated nodes and made Ready by kwok.
    let pods = ns
        .wait_for_list(
            &ns.api::<Pod>(),
            watcher::Config::default().labels(&app_selector("web")),
            "10 running, ready pods",
            TIMEOUT,
            |pods| pods.len() == 10 && pods.iter().all(is_running_and_ready),
        )
        .await;
    let nodes = &ns.plane.nodes;
    for pod in &pods {
        let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
        assert!(
            node.as_ref().is_some_and(|n| nodes.contains(n)),
            "pod {:?} is bound to {node:?}, not to one of {nodes:?}",
            pod.metadata.name
        );
    }
    let replica_sets = ns
        .wait_for_list(
            &ns.api::<ReplicaSet>(),
            watcher::Config::default().labels(&app_selector("web")),
            "one ReplicaSet",
            TIMEOUT,
            |rs| rs.len() == 1,
        )
        .await;
    let rs_uid = replica_sets[0].metadata.uid.clone();
    assert!(
        pods.iter().all(|p| p
            .metadata
            .owner_references
            .as_ref()
            .is_some_and(|refs| refs.iter().any(|r| Some(&r.uid) == rs_uid.as_ref()))),
        "every pod is owned by the ReplicaSet"
    );

    // Background deletion: the garbage collector removes the ReplicaSet, then its pods.
    deployments
        .delete("web", &DeleteParams::background())
        .await
        .expect("delete deployment");
    ns.wait_for_list(
        &ns.api::<ReplicaSet>(),
        watcher::Config::default(),
        "the garbage collector to delete the ReplicaSet",
        TIMEOUT,
        |rs| rs.is_empty(),
    )
    .await;
    ns.wait_for_list(
        &ns.api::<Pod>(),
        watcher::Config::default(),
        "the garbage collector to delete every pod",
        TIMEOUT,
        |pods| pods.is_empty(),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemon_set_gets_exactly_one_pod_per_node() {
    let ns = TestNamespace::create(plane(), "upstream-ds").await;
    let daemon_sets = ns.api::<DaemonSet>();
    daemon_sets
        .create(&PostParams::default(), &daemon_set("agent"))
        .await
        .expect("create daemon set");

    ns.wait_for(
        &daemon_sets,
        "agent",
        "one available pod per node",
        TIMEOUT,
        |ds| {
            ds.and_then(|d| d.status.as_ref()).is_some_and(|s| {
                s.desired_number_scheduled == NODES as i32
                    && s.number_available == Some(NODES as i32)
                    && s.updated_number_scheduled == Some(NODES as i32)
            })
        },
    )
    .await;
    let pods = ns
        .wait_for_list(
            &ns.api::<Pod>(),
            watcher::Config::default().labels(&app_selector("agent")),
            "one running pod per node",
            TIMEOUT,
            |pods| pods.len() == NODES && pods.iter().all(is_running_and_ready),
        )
        .await;
    let mut per_node: BTreeMap<String, usize> = BTreeMap::new();
    for pod in &pods {
        let spec = pod.spec.as_ref().expect("pod spec");
        let node = spec.node_name.clone().expect("bound pod");
        // The DaemonSet controller does not bind: it pins the pod with a matchFields affinity term and
        // the scheduler binds it to exactly that node.
        let pinned: Vec<String> = spec
            .affinity
            .as_ref()
            .and_then(|a| a.node_affinity.as_ref())
            .and_then(|na| {
                na.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })
            .map(|req| {
                req.node_selector_terms
                    .iter()
                    .flat_map(|t| t.match_fields.iter().flatten())
                    .filter(|f| f.key == "metadata.name")
                    .flat_map(|f| f.values.iter().flatten().cloned())
                    .collect()
            })
            .unwrap_or_default();
        assert_eq!(
            pinned,
            vec![node.clone()],
            "pod {:?} affinity",
            pod.metadata.name
        );
        *per_node.entry(node).or_default() += 1;
    }
    let expected: BTreeMap<String, usize> = ns.plane.nodes.iter().map(|n| (n.clone(), 1)).collect();
    assert_eq!(per_node, expected);
}

/// mini-kcm managing the CRD copies beside kube-controller-manager's own ReplicaSet controller, on one
/// plane, with both ReplicaSets selecting the same labels: each keeps exactly its own pods, and neither
/// adopts, releases or deletes the other's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copies_run_beside_upstream_without_touching_each_other() {
    use mini_kcm_e2e::{TestManager, controller_uid, is_active, replica_set, replica_sets};
    use mini_kcm_runtime::api::kinds::ApiFamily;

    let ns = TestNamespace::create(plane(), "side-by-side").await;
    let manager = TestManager::start(&ns, mini_kcm_manager::Kinds::Copies).await;
    // Same name and selector in both families: `app=shared`.
    let upstream_rs = replica_sets(&ns, ApiFamily::Apps)
        .create(
            &PostParams::default(),
            &replica_set("shared", 2, ApiFamily::Apps),
        )
        .await
        .expect("create apps/v1 ReplicaSet");
    let copy_rs = replica_sets(&ns, ApiFamily::Copies)
        .create(
            &PostParams::default(),
            &replica_set("shared", 3, ApiFamily::Copies),
        )
        .await
        .expect("create minikcm.dev ReplicaSet");
    let upstream_uid = upstream_rs.metadata.uid.clone().expect("uid");
    let copy_uid = copy_rs.metadata.uid.clone().expect("uid");
    let count = |pods: &[Pod], uid: &str| {
        pods.iter()
            .filter(|p| is_active(p) && controller_uid(p).as_deref() == Some(uid))
            .count()
    };
    let pods = ns
        .wait_for_list(
            &ns.api::<Pod>(),
            watcher::Config::default().labels(&app_selector("shared")),
            "2 pods of the upstream ReplicaSet and 3 of the copy",
            TIMEOUT,
            |pods| {
                count(pods, &upstream_uid) == 2
                    && count(pods, &copy_uid) == 3
                    && pods.iter().filter(|p| is_active(p)).count() == 5
            },
        )
        .await;
    // Scaling each side down removes only its own pods.
    use kube::api::{Patch, PatchParams};
    let scale_to = |n: i32| Patch::Merge(serde_json::json!({"spec": {"replicas": n}}));
    replica_sets(&ns, ApiFamily::Apps)
        .patch("shared", &PatchParams::default(), &scale_to(1))
        .await
        .expect("scale apps");
    replica_sets(&ns, ApiFamily::Copies)
        .patch("shared", &PatchParams::default(), &scale_to(1))
        .await
        .expect("scale copy");
    let after = ns
        .wait_for_list(
            &ns.api::<Pod>(),
            watcher::Config::default().labels(&app_selector("shared")),
            "1 pod on each side",
            TIMEOUT,
            |pods| {
                count(pods, &upstream_uid) == 1
                    && count(pods, &copy_uid) == 1
                    && pods.iter().filter(|p| is_active(p)).count() == 2
            },
        )
        .await;
    // The survivors are pods each side created itself (no pod changed hands).
    for pod in after.iter().filter(|p| is_active(p)) {
        let before = pods
            .iter()
            .find(|p| p.metadata.uid == pod.metadata.uid)
            .expect("a survivor existed before the scale-down");
        assert_eq!(controller_uid(before), controller_uid(pod));
    }
    manager.stop().await;
}
