//! What the pod cache keeps of a pod: only the fields the controllers read.
//!
//! Why: pods are by far the most numerous objects a controller-manager caches, and most of a pod is what
//! the kubelet needs (containers, volumes, probes, tolerations, IPs), not what a workload controller
//! decides on. Decoded, a typical pod takes ≈ 17 KiB of heap, of which its volumes and containers are
//! two thirds; the fields below take under 2 KiB. Upstream's kube-controller-manager keeps whole pods;
//! dropping the rest on arrival changes no decision, because nothing reads it (every reader goes through
//! the informer cache; pods are created from templates, never from cached pods).
//!
//! Kept, field by field, and who reads it:
//! - `metadata` whole except `managedFields`: names and namespaces (keys), uid, labels (selectors,
//!   `pod-template-hash`, `controller-revision-hash`), ownerReferences (claim, adoption), annotations
//!   (`controller.kubernetes.io/pod-deletion-cost`), creation and deletion timestamps (ranking, active
//!   pods), resourceVersion (the consistency store, relists).
//! - `spec.nodeName` (ranking by node, the DaemonSet's node → pod map, the pod index by node);
//!   `spec.affinity.nodeAffinity` (a DaemonSet pod's target node before it is scheduled);
//!   `spec.initContainers`, only the restartable ones ("sidecars"), only `name` and `restartPolicy`
//!   (ranking counts their restarts separately).
//! - `status.phase` (active, failed and succeeded pods); `status.reason` and `status.message` (why a
//!   DaemonSet pod failed, in its event); `status.conditions` of type Ready (readiness and
//!   availability via `lastTransitionTime`); `status.containerStatuses` and the sidecars'
//!   `status.initContainerStatuses`, only `name` and `restartCount`, only for containers that restarted
//!   (ranking; a missing status counts as no restarts).
//!
//! Everything else becomes empty (`spec.containers` is an empty list, since the type requires one).

use k8s_openapi::api::core::v1::{Affinity, Container, ContainerStatus, Pod, PodSpec, PodStatus};

/// The pod as the cache keeps it (see the module header for what stays and why).
pub fn keep_read_fields(pod: Pod) -> Pod {
    let Pod {
        mut metadata,
        spec,
        status,
    } = pod;
    metadata.managed_fields = None;
    if let Some(owners) = metadata.owner_references.as_mut() {
        owners.shrink_to_fit();
    }
    let sidecars: Vec<Container> = spec
        .as_ref()
        .and_then(|s| s.init_containers.as_ref())
        .into_iter()
        .flatten()
        .filter(|c| c.restart_policy.as_deref() == Some("Always"))
        .map(|c| Container {
            name: c.name.clone(),
            restart_policy: c.restart_policy.clone(),
            ..Container::default()
        })
        .collect();
    let spec = spec.map(|s| PodSpec {
        node_name: s.node_name,
        affinity: s
            .affinity
            .and_then(|a| a.node_affinity)
            .map(|node_affinity| Affinity {
                node_affinity: Some(node_affinity),
                ..Affinity::default()
            }),
        init_containers: (!sidecars.is_empty()).then(|| sidecars.clone()),
        ..PodSpec::default()
    });
    let status = status.map(|s| PodStatus {
        phase: s.phase,
        reason: s.reason,
        message: s.message,
        conditions: s.conditions.map(|cs| {
            let mut ready: Vec<_> = cs.into_iter().filter(|c| c.type_ == "Ready").collect();
            ready.shrink_to_fit();
            ready
        }),
        container_statuses: s.container_statuses.and_then(|cs| restarts(cs, |_| true)),
        init_container_statuses: s
            .init_container_statuses
            .and_then(|cs| restarts(cs, |name| sidecars.iter().any(|c| c.name == name))),
        ..PodStatus::default()
    });
    Pod {
        metadata,
        spec,
        status,
    }
}

/// `name` and `restartCount` of the statuses whose container `keep` accepts and that restarted at
/// least once (no status reads as no restarts), or `None` if there are none.
fn restarts(
    statuses: Vec<ContainerStatus>,
    keep: impl Fn(&str) -> bool,
) -> Option<Vec<ContainerStatus>> {
    let mut kept: Vec<ContainerStatus> = statuses
        .into_iter()
        .filter(|c| c.restart_count > 0 && keep(&c.name))
        .map(|c| ContainerStatus {
            name: c.name,
            restart_count: c.restart_count,
            ..ContainerStatus::default()
        })
        .collect();
    // Collected in place, the list would keep the decoded one's capacity (serde grows lists by doubling).
    kept.shrink_to_fit();
    (!kept.is_empty()).then_some(kept)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pod as the API server returns it for a Deployment's replica (taken from the local plane), with
    /// a restartable init container and managedFields added.
    fn full_pod() -> Pod {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "creationTimestamp": "2026-11-24T00:02:12Z", "generateName": "rs-99-",
                "labels": {"app": "rs-99", "pod-template-hash": "abc"},
                "annotations": {"controller.kubernetes.io/pod-deletion-cost": "5"},
                "managedFields": [{"manager": "kube-controller-manager", "operation": "Update"}],
                "name": "rs-99-znlgp", "namespace": "ns", "resourceVersion": "7709", "uid": "u1",
                "ownerReferences": [{"apiVersion": "apps/v1", "blockOwnerDeletion": true,
                    "controller": true, "kind": "ReplicaSet", "name": "rs-99", "uid": "u0"}]
            },
            "spec": {
                "containers": [{"image": "registry.k8s.io/pause:3.10", "name": "app",
                    "volumeMounts": [{"mountPath": "/var/run/secrets", "name": "token"}]}],
                "initContainers": [
                    {"name": "setup", "image": "busybox"},
                    {"name": "proxy", "image": "envoy", "restartPolicy": "Always"}
                ],
                "nodeName": "kwok-node-5",
                "affinity": {
                    "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": ["kwok-node-5"]}]}]}},
                    "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}
                },
                "tolerations": [{"effect": "NoExecute", "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists", "tolerationSeconds": 300}],
                "volumes": [{"name": "token", "projected": {"sources": [
                    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}]}}]
            },
            "status": {
                "conditions": [
                    {"lastTransitionTime": "2026-11-24T00:02:27Z", "status": "True", "type": "Initialized"},
                    {"lastTransitionTime": "2026-11-24T00:02:27Z", "status": "True", "type": "Ready"}
                ],
                "containerStatuses": [{"image": "registry.k8s.io/pause:3.10", "imageID": "", "name": "app",
                    "ready": true, "restartCount": 3, "state": {"running": {"startedAt": "2026-11-24T00:02:27Z"}}}],
                "initContainerStatuses": [
                    {"image": "busybox", "imageID": "", "name": "setup", "ready": false, "restartCount": 9},
                    {"image": "envoy", "imageID": "", "name": "proxy", "ready": true, "restartCount": 2}
                ],
                "hostIP": "127.0.0.1", "podIP": "10.244.3.248", "phase": "Running",
                "qosClass": "BestEffort", "startTime": "2026-11-24T00:02:27Z"
            }
        }))
        .unwrap()
    }

    #[test]
    fn keeps_what_controllers_read() {
        let full = full_pod();
        let kept = keep_read_fields(full.clone());
        let mut metadata = full.metadata.clone();
        metadata.managed_fields = None;
        if let Some(owners) = metadata.owner_references.as_mut() {
            owners.shrink_to_fit();
        }
        assert_eq!(kept.metadata, metadata);
        let spec = kept.spec.as_ref().unwrap();
        assert_eq!(spec.node_name.as_deref(), Some("kwok-node-5"));
        let affinity = spec.affinity.as_ref().unwrap();
        assert_eq!(
            affinity.node_affinity,
            full.spec
                .as_ref()
                .unwrap()
                .affinity
                .as_ref()
                .unwrap()
                .node_affinity
        );
        assert!(affinity.pod_anti_affinity.is_none());
        let sidecars = spec.init_containers.as_ref().unwrap();
        assert_eq!(sidecars.len(), 1);
        assert_eq!(sidecars[0].name, "proxy");
        assert_eq!(sidecars[0].restart_policy.as_deref(), Some("Always"));
        let status = kept.status.as_ref().unwrap();
        assert_eq!(status.phase.as_deref(), Some("Running"));
        let conditions = status.conditions.as_ref().unwrap();
        assert_eq!(conditions.len(), 1);
        assert_eq!(
            conditions[0],
            full.status.as_ref().unwrap().conditions.as_ref().unwrap()[1]
        );
        let restarts: Vec<(&str, i32)> = status
            .container_statuses
            .iter()
            .chain(status.init_container_statuses.iter())
            .flatten()
            .map(|c| (c.name.as_str(), c.restart_count))
            .collect();
        assert_eq!(restarts, [("app", 3), ("proxy", 2)]);
    }

    #[test]
    fn drops_what_only_the_kubelet_needs() {
        let kept = keep_read_fields(full_pod());
        let spec = kept.spec.unwrap();
        assert!(spec.containers.is_empty());
        assert!(spec.volumes.is_none());
        assert!(spec.tolerations.is_none());
        let status = kept.status.unwrap();
        assert!(status.host_ip.is_none() && status.pod_ip.is_none() && status.start_time.is_none());
        let app = &status.container_statuses.unwrap()[0];
        assert!(app.image.is_empty() && app.state.is_none());
    }

    #[test]
    fn containers_that_never_restarted_leave_no_status() {
        let pod = Pod {
            status: Some(PodStatus {
                container_statuses: Some(vec![ContainerStatus {
                    name: "app".into(),
                    image: "pause".into(),
                    ..ContainerStatus::default()
                }]),
                ..PodStatus::default()
            }),
            ..Pod::default()
        };
        assert!(
            keep_read_fields(pod)
                .status
                .unwrap()
                .container_statuses
                .is_none()
        );
    }

    #[test]
    fn a_pod_without_spec_or_status_stays_so() {
        let kept = keep_read_fields(Pod::default());
        assert!(kept.spec.is_none() && kept.status.is_none());
    }
}
