//! What the pod cache keeps of a pod: [`CachedPod`], only the fields the controllers read.
//!
//! Why: pods are by far the most numerous objects a controller-manager caches, and most of a pod is what
//! the kubelet needs (containers, volumes, probes, tolerations, IPs), not what a workload controller
//! decides on. Decoded whole, a typical pod takes ≈ 22 KB of heap, two thirds of it volumes and
//! containers. Upstream's kube-controller-manager keeps whole pods; keeping less changes no decision,
//! because nothing reads the rest (every reader goes through the informer cache; pods are created from
//! templates, never from cached pods).
//!
//! `CachedPod` is a type of its own, not a `k8s_openapi` `Pod` with fields left empty: `Pod`'s spec and
//! status are wide structs (2.4 KB inline even when empty), while `CachedPod` has only the kept fields
//! (`tests/cached_pod_bytes.rs` counts both). Its fields keep `Pod`'s names and paths
//! (`pod.spec.node_name`, `pod.status.conditions`), so code reads a cached pod as it would read a pod.
//!
//! The pod watch decodes `CachedPod` directly (serde skips every other field of the JSON, so nothing
//! else is even allocated) and then [`CachedPod::trimmed`] drops what the decoded fields hold beyond
//! what is read. `CachedPod::from(pod)` makes the same of a pod decoded whole (pods put in a cache by
//! hand, tests, and the reference the watch's decoding is tested against).
//!
//! What is kept, field by field, who reads it, and its protobuf field number are listed once, in the
//! table at the top of `src/protobuf/kept_fields.rs`. Its test holds every way a cached pod is made (this
//! type's JSON decoding with [`CachedPod::trimmed`], `CachedPod::from`, and the protobuf decoding) to that
//! list on pods captured from a real API server; a field added to these types does not compile until it
//! is listed there.

use std::borrow::Cow;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::{Affinity, ContainerStatus, NodeAffinity, Pod, PodCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use serde::Deserialize;

/// A pod as the pod cache keeps it (see the module header); decoded from a pod's JSON, it reads only
/// these fields.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct CachedPod {
    #[serde(
        default,
        deserialize_with = "crate::api::object::metadata_without_managed_fields"
    )]
    /// `metadata`, without `managedFields`.
    pub metadata: ObjectMeta,
    /// The kept part of `spec`.
    #[serde(default)]
    pub spec: Option<CachedPodSpec>,
    /// The kept part of `status`.
    #[serde(default)]
    pub status: Option<CachedPodStatus>,
}

/// The kept part of a pod's spec.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CachedPodSpec {
    /// `spec.nodeName`: the node the pod is bound to (a DaemonSet's pods are pinned by affinity, then
    /// bound by the scheduler).
    #[serde(default)]
    pub node_name: Option<String>,
    /// `spec.affinity`, node affinity only (which node a daemon pod targets).
    #[serde(default)]
    pub affinity: Option<CachedAffinity>,
    /// Once trimmed, only the sidecars (`restartPolicy: Always`).
    #[serde(default)]
    pub init_containers: Option<Vec<CachedInitContainer>>,
}

/// The kept part of a pod's affinity: node affinity only.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CachedAffinity {
    /// `spec.affinity.nodeAffinity`.
    #[serde(default)]
    pub node_affinity: Option<NodeAffinity>,
}

impl From<Affinity> for CachedAffinity {
    fn from(affinity: Affinity) -> Self {
        CachedAffinity {
            node_affinity: affinity.node_affinity,
        }
    }
}

/// An init container's name and restart policy.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CachedInitContainer {
    /// `name`.
    #[serde(default)]
    pub name: String,
    /// `restartPolicy`: `Always` makes it a sidecar, whose restarts count for the deletion ranking.
    #[serde(default)]
    pub restart_policy: Option<String>,
}

/// The kept part of a pod's status.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CachedPodStatus {
    /// `status.phase` (`Pending`, `Running`, `Succeeded`, `Failed`, `Unknown`).
    #[serde(default)]
    pub phase: Option<String>,
    /// Once trimmed, only the Ready condition.
    #[serde(default)]
    pub conditions: Option<Vec<PodCondition>>,
    /// Once trimmed, only containers that restarted.
    #[serde(default)]
    pub container_statuses: Option<Vec<ContainerRestarts>>,
    /// Once trimmed, only sidecars that restarted.
    #[serde(default)]
    pub init_container_statuses: Option<Vec<ContainerRestarts>>,
}

/// A container status's name and restart count.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ContainerRestarts {
    /// The container's name.
    #[serde(default)]
    pub name: String,
    /// `restartCount`: how often it restarted (the deletion ranking deletes the most restarted first).
    #[serde(default)]
    pub restart_count: i32,
}

impl CachedPod {
    /// The pod as the cache keeps it: what no controller reads dropped (other conditions than Ready,
    /// init containers that are not sidecars, zero restart counts, `managedFields`), and every list at
    /// its length (serde grows lists by doubling).
    pub fn trimmed(self) -> Self {
        let CachedPod {
            mut metadata,
            spec,
            status,
        } = self;
        let spec = spec.map(|s| {
            let mut sidecars: Vec<CachedInitContainer> = s
                .init_containers
                .into_iter()
                .flatten()
                .filter(|c| c.restart_policy.as_deref() == Some("Always"))
                .collect();
            sidecars.shrink_to_fit();
            CachedPodSpec {
                node_name: s.node_name,
                affinity: s.affinity.filter(|a| a.node_affinity.is_some()),
                init_containers: (!sidecars.is_empty()).then_some(sidecars),
            }
        });
        let sidecars: Vec<&str> = spec
            .iter()
            .flat_map(|s| s.init_containers.iter().flatten())
            .map(|c| c.name.as_str())
            .collect();
        let status = status.map(|s| CachedPodStatus {
            phase: s.phase,
            conditions: s.conditions.map(|cs| {
                let mut ready: Vec<_> = cs.into_iter().filter(|c| c.type_ == "Ready").collect();
                ready.shrink_to_fit();
                ready
            }),
            container_statuses: s.container_statuses.and_then(|cs| restarted(cs, |_| true)),
            init_container_statuses: s
                .init_container_statuses
                .and_then(|cs| restarted(cs, |name| sidecars.contains(&name))),
        });
        metadata.managed_fields = None;
        if let Some(owners) = metadata.owner_references.as_mut() {
            owners.shrink_to_fit();
        }
        CachedPod {
            metadata,
            spec,
            status,
        }
    }
}

/// The cached form of a pod decoded whole (moves the kept fields, then trims).
impl From<Pod> for CachedPod {
    fn from(pod: Pod) -> Self {
        let restarts = |cs: Vec<ContainerStatus>| -> Vec<ContainerRestarts> {
            cs.into_iter()
                .map(|c| ContainerRestarts {
                    name: c.name,
                    restart_count: c.restart_count,
                })
                .collect()
        };
        CachedPod {
            metadata: pod.metadata,
            spec: pod.spec.map(|s| CachedPodSpec {
                node_name: s.node_name,
                affinity: s.affinity.map(CachedAffinity::from),
                init_containers: s.init_containers.map(|cs| {
                    cs.into_iter()
                        .map(|c| CachedInitContainer {
                            name: c.name,
                            restart_policy: c.restart_policy,
                        })
                        .collect()
                }),
            }),
            status: pod.status.map(|s| CachedPodStatus {
                phase: s.phase,
                conditions: s.conditions,
                container_statuses: s.container_statuses.map(restarts),
                init_container_statuses: s.init_container_statuses.map(restarts),
            }),
        }
        .trimmed()
    }
}

/// The statuses whose container `keep` accepts and that restarted at least once (no status reads as
/// no restarts), at their length, or `None` if there are none.
fn restarted(
    statuses: Vec<ContainerRestarts>,
    keep: impl Fn(&str) -> bool,
) -> Option<Vec<ContainerRestarts>> {
    let mut kept: Vec<ContainerRestarts> = statuses
        .into_iter()
        .filter(|c| c.restart_count > 0 && keep(&c.name))
        .collect();
    kept.shrink_to_fit();
    (!kept.is_empty()).then_some(kept)
}

/// A cached pod is read and written at the pods' endpoint, as a pod.
impl Resource for CachedPod {
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
    use k8s_openapi::api::core::v1::PodStatus;

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
        let kept = CachedPod::from(full.clone());
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
        let kept = CachedPod::from(full_pod());
        let status = kept.status.unwrap();
        let conditions: Vec<&str> = status
            .conditions
            .iter()
            .flatten()
            .map(|c| c.type_.as_str())
            .collect();
        assert_eq!(conditions, ["Ready"], "only the Ready condition is kept");
        let init: Vec<&str> = kept
            .spec
            .iter()
            .flat_map(|s| s.init_containers.iter().flatten())
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(
            init,
            ["proxy"],
            "only the sidecar is kept of the init containers"
        );
    }

    #[test]
    fn the_watch_projection_keeps_the_same_as_trimming_a_whole_pod() {
        let decoded: CachedPod = serde_json::from_value(full_pod_json()).unwrap();
        assert_eq!(decoded.trimmed(), CachedPod::from(full_pod()));
        let bare: CachedPod =
            serde_json::from_value(serde_json::json!({"metadata": {"name": "p"}, "status": null}))
                .unwrap();
        let whole: Pod =
            serde_json::from_value(serde_json::json!({"metadata": {"name": "p"}})).unwrap();
        assert_eq!(bare.trimmed(), CachedPod::from(whole));
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
            CachedPod::from(pod)
                .status
                .unwrap()
                .container_statuses
                .is_none()
        );
    }

    #[test]
    fn a_pod_without_spec_or_status_stays_so() {
        let kept = CachedPod::from(Pod::default());
        assert!(kept.spec.is_none() && kept.status.is_none());
    }
}
