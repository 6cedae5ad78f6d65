//! What the pod cache keeps of a pod: only the fields the controllers read.
//!
//! Why: pods are by far the most numerous objects a controller-manager caches, and most of a pod is what
//! the kubelet needs (containers, volumes, probes, tolerations, IPs), not what a workload controller
//! decides on. Decoded whole, a typical pod takes ≈ 22 KB of heap, two thirds of it volumes and
//! containers; as kept here ≈ 3.4 KB (`tests/cached_pod_bytes.rs`). Upstream's kube-controller-manager
//! keeps whole pods; dropping the rest changes no decision, because nothing reads it (every reader goes
//! through the informer cache; pods are created from templates, never from cached pods).
//!
//! The pod watch does not even decode the rest: it decodes [`PodProjection`], which has only these
//! fields (serde skips the others), and turns it into the cached `Pod`. Decoding a whole pod and
//! trimming it would cost the CPU of ≈ 22 KB of small allocations per watch event and leave the freed
//! pieces as holes in the heap. [`keep_read_fields`] trims an already decoded pod the same way (for
//! pods put in a cache by hand, and as the reference the projection is tested against).
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
//! - `status.phase` (active, failed and succeeded pods); `status.conditions` of type Ready (readiness and
//!   availability via `lastTransitionTime`); `status.containerStatuses` and the sidecars'
//!   `status.initContainerStatuses`, only `name` and `restartCount`, only for containers that restarted
//!   (ranking; a missing status counts as no restarts).
//!
//! Everything else becomes empty (`spec.containers` is an empty list, since the type requires one).

use std::borrow::Cow;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::{
    Affinity, Container, ContainerStatus, NodeAffinity, Pod, PodCondition, PodSpec, PodStatus,
};
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kube::Resource;
use serde::Deserialize;

/// A pod as the pod watch decodes it: only the fields listed in the module header (serde skips the
/// others). [`PodProjection::into_pod`] makes the cached `Pod` of it.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct PodProjection {
    #[serde(default, deserialize_with = "metadata_without_managed_fields")]
    metadata: ObjectMeta,
    #[serde(default)]
    spec: Option<SpecProjection>,
    #[serde(default)]
    status: Option<StatusProjection>,
}

/// `ObjectMeta` without `managedFields` (on a pod, often larger than everything kept here together),
/// and without `selfLink`, which no server sets any more.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct MetaProjection {
    #[serde(default)]
    annotations: Option<BTreeMap<String, String>>,
    #[serde(default)]
    creation_timestamp: Option<Time>,
    #[serde(default)]
    deletion_grace_period_seconds: Option<i64>,
    #[serde(default)]
    deletion_timestamp: Option<Time>,
    #[serde(default)]
    finalizers: Option<Vec<String>>,
    #[serde(default)]
    generate_name: Option<String>,
    #[serde(default)]
    generation: Option<i64>,
    #[serde(default)]
    labels: Option<BTreeMap<String, String>>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    owner_references: Option<Vec<OwnerReference>>,
    #[serde(default)]
    resource_version: Option<String>,
    #[serde(default)]
    uid: Option<String>,
}

impl From<MetaProjection> for ObjectMeta {
    fn from(m: MetaProjection) -> Self {
        ObjectMeta {
            annotations: m.annotations,
            creation_timestamp: m.creation_timestamp,
            deletion_grace_period_seconds: m.deletion_grace_period_seconds,
            deletion_timestamp: m.deletion_timestamp,
            finalizers: m.finalizers,
            generate_name: m.generate_name,
            generation: m.generation,
            labels: m.labels,
            name: m.name,
            namespace: m.namespace,
            owner_references: m.owner_references,
            resource_version: m.resource_version,
            uid: m.uid,
            managed_fields: None,
            self_link: None,
        }
    }
}

fn metadata_without_managed_fields<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<ObjectMeta, D::Error> {
    MetaProjection::deserialize(deserializer).map(ObjectMeta::from)
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SpecProjection {
    #[serde(default)]
    node_name: Option<String>,
    #[serde(default)]
    affinity: Option<AffinityProjection>,
    #[serde(default)]
    init_containers: Option<Vec<ContainerProjection>>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct AffinityProjection {
    #[serde(default)]
    node_affinity: Option<NodeAffinity>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ContainerProjection {
    #[serde(default)]
    name: String,
    #[serde(default)]
    restart_policy: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct StatusProjection {
    #[serde(default)]
    phase: Option<String>,
    #[serde(default)]
    conditions: Option<Vec<PodCondition>>,
    #[serde(default)]
    container_statuses: Option<Vec<RestartsProjection>>,
    #[serde(default)]
    init_container_statuses: Option<Vec<RestartsProjection>>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RestartsProjection {
    #[serde(default)]
    name: String,
    #[serde(default)]
    restart_count: i32,
}

impl PodProjection {
    /// The cached pod: the projection's fields in a `Pod`, with what no controller needs dropped (other
    /// conditions than Ready, init containers that are not sidecars, zero restart counts,
    /// `managedFields`), and every list at its length (serde grows lists by doubling).
    pub fn into_pod(self) -> Pod {
        let PodProjection {
            metadata,
            spec,
            status,
        } = self;
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
        let is_sidecar = |name: &str| sidecars.iter().any(|c| c.name == name);
        let status = status.map(|s| PodStatus {
            phase: s.phase,
            conditions: s.conditions.map(|cs| {
                let mut ready: Vec<_> = cs.into_iter().filter(|c| c.type_ == "Ready").collect();
                ready.shrink_to_fit();
                ready
            }),
            container_statuses: s.container_statuses.and_then(|cs| restarts(cs, |_| true)),
            init_container_statuses: s
                .init_container_statuses
                .and_then(|cs| restarts(cs, is_sidecar)),
            ..PodStatus::default()
        });
        let spec = spec.map(|s| PodSpec {
            node_name: s.node_name,
            affinity: s
                .affinity
                .and_then(|a| a.node_affinity)
                .map(|node_affinity| Affinity {
                    node_affinity: Some(node_affinity),
                    ..Affinity::default()
                }),
            init_containers: (!sidecars.is_empty()).then_some(sidecars),
            ..PodSpec::default()
        });
        let mut metadata = metadata;
        metadata.managed_fields = None;
        if let Some(owners) = metadata.owner_references.as_mut() {
            owners.shrink_to_fit();
        }
        Pod {
            metadata,
            spec,
            status,
        }
    }
}

/// A decoded pod's projection (moves the kept fields; for [`keep_read_fields`]).
impl From<Pod> for PodProjection {
    fn from(pod: Pod) -> Self {
        let restarts = |cs: Vec<ContainerStatus>| -> Vec<RestartsProjection> {
            cs.into_iter()
                .map(|c| RestartsProjection {
                    name: c.name,
                    restart_count: c.restart_count,
                })
                .collect()
        };
        PodProjection {
            metadata: pod.metadata,
            spec: pod.spec.map(|s| SpecProjection {
                node_name: s.node_name,
                affinity: s.affinity.map(|a| AffinityProjection {
                    node_affinity: a.node_affinity,
                }),
                init_containers: s.init_containers.map(|cs| {
                    cs.into_iter()
                        .map(|c| ContainerProjection {
                            name: c.name,
                            restart_policy: c.restart_policy,
                        })
                        .collect()
                }),
            }),
            status: pod.status.map(|s| StatusProjection {
                phase: s.phase,
                conditions: s.conditions,
                container_statuses: s.container_statuses.map(restarts),
                init_container_statuses: s.init_container_statuses.map(restarts),
            }),
        }
    }
}

/// The pod as the cache keeps it, from a pod decoded whole (see the module header).
pub fn keep_read_fields(pod: Pod) -> Pod {
    PodProjection::from(pod).into_pod()
}

/// `name` and `restartCount` of the statuses whose container `keep` accepts and that restarted at
/// least once (no status reads as no restarts), or `None` if there are none.
fn restarts(
    statuses: Vec<RestartsProjection>,
    keep: impl Fn(&str) -> bool,
) -> Option<Vec<ContainerStatus>> {
    let kept: Vec<ContainerStatus> = statuses
        .into_iter()
        .filter(|c| c.restart_count > 0 && keep(&c.name))
        .map(|c| ContainerStatus {
            name: c.name,
            restart_count: c.restart_count,
            ..ContainerStatus::default()
        })
        .collect();
    (!kept.is_empty()).then_some(kept)
}

/// The projection is watched at the pods' endpoint, as a pod.
impl Resource for PodProjection {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(dt: &()) -> Cow<'_, str> {
        Pod::kind(dt)
    }

    fn group(dt: &()) -> Cow<'_, str> {
        Pod::group(dt)
    }

    fn version(dt: &()) -> Cow<'_, str> {
        Pod::version(dt)
    }

    fn plural(dt: &()) -> Cow<'_, str> {
        Pod::plural(dt)
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pod as the API server returns it for a Deployment's replica (taken from the local plane), with
    /// a restartable init container and managedFields added.
    fn full_pod() -> Pod {
        serde_json::from_value(full_pod_json()).unwrap()
    }

    fn full_pod_json() -> serde_json::Value {
        serde_json::json!({
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
        })
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
    fn the_watch_projection_keeps_the_same_as_trimming_a_whole_pod() {
        let projected: PodProjection = serde_json::from_value(full_pod_json()).unwrap();
        assert_eq!(projected.into_pod(), keep_read_fields(full_pod()));
        let bare: PodProjection =
            serde_json::from_value(serde_json::json!({"metadata": {"name": "p"}, "status": null}))
                .unwrap();
        assert_eq!(
            bare.into_pod(),
            keep_read_fields(
                serde_json::from_value(serde_json::json!({"metadata": {"name": "p"}})).unwrap()
            )
        );
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
