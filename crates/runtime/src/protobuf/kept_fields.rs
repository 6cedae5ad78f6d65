//! The one description of what the caches keep of a pod and a node, and the test that holds both
//! decodings to it.
//!
//! Why: the kept subset is written in three places that nothing but tests ties together: the `prost`
//! messages ([`super::messages`], one field number each), the cached types with their serde decoding
//! and [`CachedPod::trimmed`] (`pods/cached.rs`, and `cached_node` for nodes), and `CachedPod::from`
//! for a pod decoded whole. A wrong field number does not fail to decode: prost skips the field as
//! unknown and it reads as its zero value, a restart count of 0 or no deletion timestamp. Where no
//! fixture sets the field, JSON reads the same zero, and "protobuf equals JSON" proves nothing. So the
//! test below:
//! - destructures every cached struct without `..`: a field added to a cached type does not compile
//!   until it is listed here;
//! - decodes every captured pod and node both ways (and each pod from a whole `Pod` too) and requires
//!   the same value;
//! - requires each listed field to be set (non-empty, non-zero) in at least one fixture, so that the
//!   equality above compares something. A field no fixture sets fails the test by its name below; give
//!   it a value in the fixtures' `capture.sh` and capture again.
//!
//! Kept, by protobuf message (`k8s.io/api/core/v1` and `k8s.io/apimachinery/pkg/apis/meta/v1`
//! `generated.proto`, numbers checked against 1.37.2), field = number, and what reads it:
//!
//! | message | kept fields | read for |
//! | --- | --- | --- |
//! | `Pod` | metadata 1, spec 2, status 3 | |
//! | `ObjectMeta` (pods, nodes) | name 1, generateName 2, namespace 3, selfLink 4 (no API server writes it since 1.24: never set), uid 5, resourceVersion 6, generation 7, creationTimestamp 8, deletionTimestamp 9, deletionGracePeriodSeconds 10, labels 11, annotations 12, ownerReferences 13, finalizers 14; not managedFields 17 | keys, selectors (`pod-template-hash`, `controller-revision-hash`), claims, ranking (`controller.kubernetes.io/pod-deletion-cost`, timestamps), active pods (deletionTimestamp), the consistency store and relists |
//! | `OwnerReference` | kind 1, name 3, uid 4, apiVersion 5, controller 6, blockOwnerDeletion 7 | claim, adoption |
//! | `Time` | seconds 1 (not nanos 2: JSON has seconds only) | |
//! | `PodSpec` | nodeName 10, affinity 18, initContainers 20 | ranking by node, the pod index by node, the DaemonSet's node → pod map |
//! | `Container` (init containers) | name 1, restartPolicy 24; only sidecars (`Always`) are kept | ranking counts sidecar restarts |
//! | `Affinity` | nodeAffinity 1 (not the pod affinities 2, 3) | a DaemonSet pod's node before it is bound |
//! | `NodeAffinity` | requiredDuringScheduling… 1, preferredDuringScheduling… 2 | |
//! | `NodeSelector` | nodeSelectorTerms 1 | |
//! | `NodeSelectorTerm` | matchExpressions 1, matchFields 2 | |
//! | `NodeSelectorRequirement` | key 1, operator 2, values 3 | |
//! | `PreferredSchedulingTerm` | weight 1, preference 2 | |
//! | `PodStatus` | phase 1, conditions 2, containerStatuses 8, initContainerStatuses 10 | active, failed, succeeded pods |
//! | `PodCondition` | type 1, status 2, lastProbeTime 3, lastTransitionTime 4, reason 5, message 6, observedGeneration 7; only Ready is kept | readiness, availability |
//! | `ContainerStatus` | name 1, restartCount 5; only containers and sidecars that restarted are kept | ranking (no status: no restarts) |
//! | `Node` | metadata 1, spec 2 (not status 3) | DaemonSet placement |
//! | `NodeSpec` | unschedulable 4, taints 5 | |
//! | `Taint` | key 1, value 2, effect 3, timeAdded 4 | |

use std::collections::BTreeMap;

use bytes::Bytes;
use k8s_openapi::api::core::v1::{
    Node, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, NodeSpec, Pod,
    PodCondition, PreferredSchedulingTerm, Taint,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::messages::{ProtobufKind, cached_node};
use crate::pods::cached::{
    CachedAffinity, CachedInitContainer, CachedPod, CachedPodSpec, CachedPodStatus,
    ContainerRestarts,
};

/// Which kept fields (`Message.field`, as in the table above) some fixture set.
#[derive(Default)]
struct Coverage(BTreeMap<&'static str, bool>);

impl Coverage {
    fn field(&mut self, name: &'static str, set: bool) {
        *self.0.entry(name).or_default() |= set;
    }

    fn never_set(&self) -> Vec<&'static str> {
        self.0
            .iter()
            .filter(|(_, set)| !**set)
            .map(|(name, _)| *name)
            .collect()
    }
}

fn visit_meta(meta: &ObjectMeta, cov: &mut Coverage) {
    let ObjectMeta {
        name,
        generate_name,
        namespace,
        self_link: _, // kept with the rest of the metadata, but no API server writes it since 1.24
        uid,
        resource_version,
        generation,
        creation_timestamp,
        deletion_timestamp,
        deletion_grace_period_seconds,
        labels,
        annotations,
        owner_references,
        finalizers,
        managed_fields,
    } = meta;
    assert!(managed_fields.is_none(), "managedFields are not kept");
    cov.field("ObjectMeta.name", name.is_some());
    cov.field("ObjectMeta.generateName", generate_name.is_some());
    cov.field("ObjectMeta.namespace", namespace.is_some());
    cov.field("ObjectMeta.uid", uid.is_some());
    cov.field("ObjectMeta.resourceVersion", resource_version.is_some());
    cov.field("ObjectMeta.generation", generation.is_some_and(|g| g > 0));
    cov.field("ObjectMeta.creationTimestamp", creation_timestamp.is_some());
    cov.field("ObjectMeta.deletionTimestamp", deletion_timestamp.is_some());
    cov.field(
        "ObjectMeta.deletionGracePeriodSeconds",
        deletion_grace_period_seconds.is_some_and(|s| s > 0),
    );
    cov.field("ObjectMeta.labels", labels.is_some());
    cov.field(
        "ObjectMeta.annotations",
        annotations
            .iter()
            .flatten()
            .any(|(k, _)| k == "controller.kubernetes.io/pod-deletion-cost"),
    );
    cov.field("ObjectMeta.finalizers", finalizers.is_some());
    cov.field("ObjectMeta.ownerReferences", owner_references.is_some());
    for OwnerReference {
        api_version,
        block_owner_deletion,
        controller,
        kind,
        name,
        uid,
    } in owner_references.iter().flatten()
    {
        cov.field("OwnerReference.apiVersion", !api_version.is_empty());
        cov.field("OwnerReference.kind", !kind.is_empty());
        cov.field("OwnerReference.name", !name.is_empty());
        cov.field("OwnerReference.uid", !uid.is_empty());
        cov.field("OwnerReference.controller", *controller == Some(true));
        cov.field(
            "OwnerReference.blockOwnerDeletion",
            *block_owner_deletion == Some(true),
        );
    }
}

fn visit_term(term: &NodeSelectorTerm, cov: &mut Coverage) {
    let NodeSelectorTerm {
        match_expressions,
        match_fields,
    } = term;
    cov.field(
        "NodeSelectorTerm.matchExpressions",
        match_expressions.is_some(),
    );
    cov.field("NodeSelectorTerm.matchFields", match_fields.is_some());
    for NodeSelectorRequirement {
        key,
        operator,
        values,
    } in match_expressions.iter().chain(match_fields).flatten()
    {
        cov.field("NodeSelectorRequirement.key", !key.is_empty());
        cov.field("NodeSelectorRequirement.operator", !operator.is_empty());
        cov.field("NodeSelectorRequirement.values", values.is_some());
    }
}

fn visit_node_affinity(affinity: &NodeAffinity, cov: &mut Coverage) {
    let NodeAffinity {
        required_during_scheduling_ignored_during_execution: required,
        preferred_during_scheduling_ignored_during_execution: preferred,
    } = affinity;
    cov.field("NodeAffinity.requiredDuringScheduling", required.is_some());
    cov.field(
        "NodeAffinity.preferredDuringScheduling",
        preferred.is_some(),
    );
    if let Some(NodeSelector {
        node_selector_terms,
    }) = required
    {
        cov.field(
            "NodeSelector.nodeSelectorTerms",
            !node_selector_terms.is_empty(),
        );
        for term in node_selector_terms {
            visit_term(term, cov);
        }
    }
    for PreferredSchedulingTerm { preference, weight } in preferred.iter().flatten() {
        cov.field("PreferredSchedulingTerm.weight", *weight != 0);
        cov.field(
            "PreferredSchedulingTerm.preference",
            *preference != NodeSelectorTerm::default(),
        );
        visit_term(preference, cov);
    }
}

fn visit_restarts(statuses: &Option<Vec<ContainerRestarts>>, cov: &mut Coverage) {
    for ContainerRestarts {
        name,
        restart_count,
    } in statuses.iter().flatten()
    {
        cov.field("ContainerStatus.name", !name.is_empty());
        cov.field("ContainerStatus.restartCount", *restart_count != 0);
    }
}

fn visit_pod(pod: &CachedPod, cov: &mut Coverage) {
    let CachedPod {
        metadata,
        spec,
        status,
    } = pod;
    visit_meta(metadata, cov);
    cov.field("Pod.spec", spec.is_some());
    cov.field("Pod.status", status.is_some());
    if let Some(CachedPodSpec {
        node_name,
        affinity,
        init_containers,
    }) = spec
    {
        cov.field("PodSpec.nodeName", node_name.is_some());
        cov.field("PodSpec.affinity", affinity.is_some());
        if let Some(CachedAffinity { node_affinity }) = affinity {
            cov.field("Affinity.nodeAffinity", node_affinity.is_some());
            if let Some(node_affinity) = node_affinity {
                visit_node_affinity(node_affinity, cov);
            }
        }
        cov.field("PodSpec.initContainers", init_containers.is_some());
        for CachedInitContainer {
            name,
            restart_policy,
        } in init_containers.iter().flatten()
        {
            cov.field("Container.name", !name.is_empty());
            cov.field("Container.restartPolicy", restart_policy.is_some());
        }
    }
    if let Some(CachedPodStatus {
        phase,
        conditions,
        container_statuses,
        init_container_statuses,
    }) = status
    {
        cov.field("PodStatus.phase", phase.is_some());
        cov.field("PodStatus.conditions", conditions.is_some());
        cov.field("PodStatus.containerStatuses", container_statuses.is_some());
        cov.field(
            "PodStatus.initContainerStatuses",
            init_container_statuses.is_some(),
        );
        for PodCondition {
            type_,
            status,
            last_probe_time,
            last_transition_time,
            reason,
            message,
            observed_generation,
        } in conditions.iter().flatten()
        {
            cov.field("PodCondition.type", !type_.is_empty());
            cov.field("PodCondition.status", !status.is_empty());
            cov.field("PodCondition.lastProbeTime", last_probe_time.is_some());
            cov.field(
                "PodCondition.lastTransitionTime",
                last_transition_time.is_some(),
            );
            cov.field("PodCondition.reason", reason.is_some());
            cov.field("PodCondition.message", message.is_some());
            cov.field(
                "PodCondition.observedGeneration",
                observed_generation.is_some_and(|g| g > 0),
            );
        }
        visit_restarts(container_statuses, cov);
        visit_restarts(init_container_statuses, cov);
    }
}

fn visit_node(node: &Node, cov: &mut Coverage) {
    let Node {
        metadata,
        spec,
        status,
    } = node;
    visit_meta(metadata, cov);
    assert!(status.is_none(), "a node's status is not kept");
    cov.field("Node.spec", spec.is_some());
    if let Some(NodeSpec {
        config_source,
        external_id,
        pod_cidr,
        pod_cidrs,
        pod_preemption_policy,
        provider_id,
        taints,
        unschedulable,
    }) = spec
    {
        assert!(
            config_source.is_none()
                && external_id.is_none()
                && pod_cidr.is_none()
                && pod_cidrs.is_none()
                && pod_preemption_policy.is_none()
                && provider_id.is_none(),
            "of a node's spec, only unschedulable and taints are kept: {spec:?}"
        );
        cov.field("NodeSpec.unschedulable", *unschedulable == Some(true));
        cov.field("NodeSpec.taints", taints.is_some());
        for Taint {
            effect,
            key,
            time_added,
            value,
        } in taints.iter().flatten()
        {
            cov.field("Taint.key", !key.is_empty());
            cov.field("Taint.value", value.is_some());
            cov.field("Taint.effect", !effect.is_empty());
            cov.field("Taint.timeAdded", time_added.is_some());
        }
    }
}

#[test]
fn every_kept_field_is_set_in_a_fixture_and_decoded_alike_from_protobuf_and_json() {
    let mut cov = Coverage::default();
    let pods: [(&str, Bytes, Bytes); 3] = [
        ("pod", fixture!("pod.pb"), fixture!("pod.json")),
        (
            "daemon-pod",
            fixture!("daemon-pod.pb"),
            fixture!("daemon-pod.json"),
        ),
        (
            "deleting-pod",
            fixture!("deleting-pod.pb"),
            fixture!("deleting-pod.json"),
        ),
    ];
    for (name, pb, json) in pods {
        let from_protobuf = CachedPod::decode_object(pb).unwrap();
        let from_json: CachedPod = serde_json::from_slice(&json).unwrap();
        assert_eq!(from_protobuf, from_json.trimmed(), "{name}: protobuf, JSON");
        let whole: Pod = serde_json::from_slice(&json).unwrap();
        assert_eq!(
            from_protobuf,
            CachedPod::from(whole),
            "{name}: protobuf, whole pod"
        );
        visit_pod(&from_protobuf, &mut cov);
    }
    let from_protobuf = Node::decode_object(fixture!("node.pb")).unwrap();
    let from_json: Node = serde_json::from_slice(&fixture!("node.json")).unwrap();
    assert_eq!(
        from_protobuf,
        cached_node(from_json),
        "node: protobuf, JSON"
    );
    visit_node(&from_protobuf, &mut cov);

    let never_set = cov.never_set();
    assert!(
        never_set.is_empty(),
        "kept fields that no fixture sets, so the decodings are not compared on them: {never_set:?}"
    );
}
