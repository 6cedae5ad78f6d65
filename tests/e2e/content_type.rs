//! Pods and nodes read in protobuf and in JSON give the handlers the same changes.
//!
//! Two sets of shared informers on one plane, one asking for protobuf (the default,
//! `--kube-api-content-type=application/vnd.kubernetes.protobuf`), one for JSON. After both synced, the
//! test makes changes that touch every field the caches keep (labels, annotations, owner references,
//! finalizers, a deletion in two steps, init containers, node affinity, node taints, labels and
//! cordoning); then every change each handler saw, object and all, must be the same in both, in the
//! same order, and the two pod caches must hold equal objects. The live view's informer table names the
//! content type each informer used.

// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Resource};
use mini_kcm_runtime::api::kinds::{node_informer, pod_informer};
use mini_kcm_runtime::informers::{Change, ContentType, Informer, Origin, SharedInformers};
use mini_kcm_runtime::pods::cached::CachedPod;
use mini_kcm_testkit::{PlaneConfig, PlaneInfo, TestNamespace, shared_plane};
use serde_json::json;

fn plane() -> &'static PlaneInfo {
    shared_plane(PlaneConfig::default())
}

/// Every watch change a handler saw, with its resourceVersion: `(rv, "<change> <key> <object>")`.
type Seen = Arc<Mutex<Vec<(u64, String)>>>;

fn rv<K: Resource>(object: &K) -> u64 {
    object
        .meta()
        .resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn record<K: Resource + Debug + Send + Sync + 'static>(informer: &Informer<K>) -> Seen {
    let seen: Seen = Arc::default();
    let sink = seen.clone();
    informer.add_handler(move |change: &Change<K>, origin| {
        if origin != Origin::Watch {
            return;
        }
        let (object, line) = match change {
            Change::Added(o) => (o, format!("added {o:?}")),
            Change::Updated { old, new } => {
                (new, format!("updated from {} to {new:?}", rv(old.as_ref())))
            }
            Change::Deleted(o) => (o, format!("deleted {o:?}")),
        };
        sink.lock().unwrap().push((rv(object.as_ref()), line));
    });
    seen
}

struct Side {
    informers: SharedInformers,
    pods: Informer<CachedPod>,
    pod_changes: Seen,
    node_changes: Seen,
}

async fn side(content_type: ContentType, namespace: &str) -> Side {
    let client = mini_kcm_local_plane::client_from_kubeconfig(&plane().kubeconfig)
        .await
        .unwrap();
    let informers =
        SharedInformers::new(client, Some(namespace.to_string())).with_content_type(content_type);
    let pods = pod_informer(&informers);
    let nodes = node_informer(&informers);
    let (pod_changes, node_changes) = (record(&pods), record(&nodes));
    tokio::time::timeout(Duration::from_secs(60), informers.start())
        .await
        .expect("the caches synced");
    Side {
        informers,
        pods,
        pod_changes,
        node_changes,
    }
}

/// A pod with what the cache keeps beyond the basics: an owner, a finalizer, a deletion cost, a sidecar
/// and a plain init container, and a DaemonSet-style node affinity.
fn pod(name: &str, owner: &ConfigMap, node: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {
            "name": name,
            "labels": {"app": "content-type", "pod-template-hash": "h1"},
            "annotations": {"controller.kubernetes.io/pod-deletion-cost": "3"},
            "finalizers": ["mini-kcm.dev/test"],
            "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": owner.metadata.name,
                "uid": owner.metadata.uid, "controller": true, "blockOwnerDeletion": false}]
        },
        "spec": {
            "initContainers": [
                {"name": "setup", "image": "busybox"},
                {"name": "proxy", "image": "envoy", "restartPolicy": "Always"}
            ],
            "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": [node]}]}]}}},
            "tolerations": [{"operator": "Exists"}]
        }
    }))
    .unwrap()
}

/// Waits until `seen` holds a change at or after `resource_version`.
async fn wait_until_seen(seen: &Seen, resource_version: u64, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !seen
        .lock()
        .unwrap()
        .iter()
        .any(|(v, _)| *v >= resource_version)
    {
        assert!(
            Instant::now() < deadline,
            "{what}: nothing seen at {resource_version} or later"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The changes in `[from, to]`, in the order the handler saw them.
fn window(seen: &Seen, from: u64, to: u64) -> Vec<String> {
    seen.lock()
        .unwrap()
        .iter()
        .filter(|(v, _)| (from..=to).contains(v))
        .map(|(_, line)| line.clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protobuf_and_json_informers_see_the_same_changes() {
    let ns = TestNamespace::create(plane(), "content-type").await;
    let namespace = ns.name.clone();
    let protobuf = side(ContentType::Protobuf, &namespace).await;
    let json_side = side(ContentType::Json, &namespace).await;

    // The content type each informer used, as the live view shows it.
    let formats: BTreeMap<String, String> = protobuf
        .informers
        .views()
        .into_iter()
        .map(|v| (v.kind, v.content_type))
        .collect();
    assert_eq!(formats["Pod"], "protobuf");
    assert_eq!(formats["Node"], "protobuf");
    assert!(
        json_side
            .informers
            .views()
            .iter()
            .all(|v| v.content_type == "json")
    );

    let client = mini_kcm_local_plane::client_from_kubeconfig(&plane().kubeconfig)
        .await
        .unwrap();
    let pods = ns.api::<Pod>();
    let nodes: Api<Node> = Api::all(client);
    let node = plane().nodes[0].clone();
    let owner = ns
        .api::<ConfigMap>()
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "owner"}})).unwrap(),
        )
        .await
        .unwrap();

    let first = pods
        .create(&PostParams::default(), &pod("p1", &owner, &node))
        .await
        .unwrap();
    let from = rv(&first);
    pods.create(&PostParams::default(), &pod("p2", &owner, &node))
        .await
        .unwrap();
    let merge = |value: serde_json::Value| Patch::Merge(value);
    let params = PatchParams::default();
    pods.patch(
        "p1",
        &params,
        &merge(json!({"metadata": {"labels": {"extra": "yes"}}})),
    )
    .await
    .unwrap();
    pods.patch(
        "p2",
        &params,
        &merge(json!({"metadata": {"annotations": {"controller.kubernetes.io/pod-deletion-cost": "-7"}}})),
    )
    .await
    .unwrap();
    // A deletion in two steps: the finalizer holds it (deletionTimestamp set), then its removal ends it.
    pods.delete("p2", &DeleteParams::default()).await.unwrap();
    pods.patch(
        "p2",
        &params,
        &merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    nodes
        .patch(
            &node,
            &params,
            &merge(json!({
                "metadata": {"labels": {"content-type-test": "1"}},
                "spec": {"unschedulable": true, "taints": [
                    {"key": "content-type-test", "value": "v", "effect": "NoSchedule"}]}
            })),
        )
        .await
        .unwrap();
    let node_end = nodes
        .patch(
            &node,
            &params,
            &merge(json!({
                "metadata": {"labels": {"content-type-test": null}},
                "spec": {"unschedulable": null, "taints": null}
            })),
        )
        .await
        .unwrap();
    // p1 Running and Ready (kwok), then its finalizer removed so the namespace can go.
    ns.wait_for(&pods, "p1", "a Ready pod", Duration::from_secs(60), |p| {
        p.and_then(|p| p.status.as_ref())
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
    })
    .await
    .unwrap();
    let last = pods
        .patch(
            "p1",
            &params,
            &merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
    let to = rv(&last).max(rv(&node_end));

    for side in [&protobuf, &json_side] {
        wait_until_seen(&side.pod_changes, rv(&last), "pods").await;
        wait_until_seen(&side.node_changes, rv(&node_end), "nodes").await;
    }
    let pod_changes = window(&protobuf.pod_changes, from, to);
    assert_eq!(pod_changes, window(&json_side.pod_changes, from, to));
    assert!(
        pod_changes.len() >= 7,
        "creations, updates, the two-step deletion: {pod_changes:#?}"
    );
    assert!(pod_changes.iter().any(|c| c.starts_with("deleted ")));
    assert!(
        pod_changes
            .iter()
            .any(|c| c.contains("name: \"proxy\"") && c.contains("match_fields")),
        "a sidecar and a node affinity came through: {pod_changes:#?}"
    );
    let node_changes = window(&protobuf.node_changes, from, to);
    assert_eq!(node_changes, window(&json_side.node_changes, from, to));
    assert!(
        node_changes
            .iter()
            .any(|c| c.contains("content-type-test") && c.contains("NoSchedule")),
        "the taint came through: {node_changes:#?}"
    );

    let cached = |side: &Side| {
        let mut pods: Vec<String> = side.pods.list().iter().map(|p| format!("{p:?}")).collect();
        pods.sort();
        pods
    };
    assert_eq!(cached(&protobuf), cached(&json_side));
}
