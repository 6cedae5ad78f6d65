//! The kept subset of the API's protobuf messages, and their conversion into what the caches hold.
//!
//! Each message declares only the fields the caches keep, with the field numbers of the `generated.proto`
//! files (`k8s.io/api/core/v1`, `k8s.io/apimachinery/pkg/apis/meta/v1`; the table of kept fields and
//! their numbers is in `super::kept_fields`); every other field is skipped unread. The conversions follow
//! Go's encoders: a string, number or list left empty is written to protobuf but omitted from JSON
//! (`omitempty`), so empty here means absent there, and both decodings give the same object (tested on
//! objects captured from a 1.37.2 API server, in which every kept field is set).

use std::collections::BTreeMap;

use bytes::Bytes;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use prost::Message;

use super::wire::{DecodeError, unwrap_envelope};
use crate::pods::cached::{
    CachedAffinity, CachedInitContainer, CachedPod, CachedPodSpec, CachedPodStatus,
    ContainerRestarts,
};

/// A kind whose objects and lists can be decoded from protobuf into what its cache keeps.
pub(crate) trait ProtobufKind: kube::Resource + Sized {
    /// One object, enveloped (a GET's body, a watch event's object).
    fn decode_object(body: Bytes) -> Result<Self, DecodeError>;
    /// A list, enveloped (a page of a paged list).
    fn decode_list(body: Bytes) -> Result<DecodedList<Self>, DecodeError>;
}

/// A page of a list.
#[derive(Debug)]
pub(crate) struct DecodedList<K> {
    pub(crate) resource_version: Option<String>,
    pub(crate) continue_token: Option<String>,
    pub(crate) items: Vec<K>,
}

fn non_empty(s: String) -> Option<String> {
    (!s.is_empty()).then_some(s)
}

fn non_empty_vec<T>(v: Vec<T>) -> Option<Vec<T>> {
    (!v.is_empty()).then_some(v)
}

fn non_empty_map(m: BTreeMap<String, String>) -> Option<BTreeMap<String, String>> {
    (!m.is_empty()).then_some(m)
}

/// `meta.v1.Time`: seconds only (the API's JSON has second precision, and Go's decoder drops the nanos
/// too); Go writes the zero time as an empty message.
#[derive(Clone, PartialEq, Message)]
struct Time {
    #[prost(int64, tag = "1")]
    seconds: i64,
}

impl Time {
    fn into_meta(self) -> Option<meta::Time> {
        if self.seconds == 0 {
            return None;
        }
        k8s_openapi::jiff::Timestamp::from_second(self.seconds)
            .ok()
            .map(meta::Time)
    }
}

fn time(t: Option<Time>) -> Option<meta::Time> {
    t.and_then(Time::into_meta)
}

/// `meta.v1.ListMeta`.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct ListMeta {
    #[prost(string, tag = "2")]
    resource_version: String,
    #[prost(string, tag = "3")]
    continue_: String,
}

/// `meta.v1.OwnerReference`.
#[derive(Clone, PartialEq, Message)]
struct OwnerReference {
    #[prost(string, tag = "1")]
    kind: String,
    #[prost(string, tag = "3")]
    name: String,
    #[prost(string, tag = "4")]
    uid: String,
    #[prost(string, tag = "5")]
    api_version: String,
    #[prost(bool, optional, tag = "6")]
    controller: Option<bool>,
    #[prost(bool, optional, tag = "7")]
    block_owner_deletion: Option<bool>,
}

/// `meta.v1.ObjectMeta`, all but `managedFields` (17), which no controller reads.
#[derive(Clone, PartialEq, Message)]
struct ObjectMeta {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(string, tag = "2")]
    generate_name: String,
    #[prost(string, tag = "3")]
    namespace: String,
    #[prost(string, tag = "4")]
    self_link: String,
    #[prost(string, tag = "5")]
    uid: String,
    #[prost(string, tag = "6")]
    resource_version: String,
    #[prost(int64, tag = "7")]
    generation: i64,
    #[prost(message, optional, tag = "8")]
    creation_timestamp: Option<Time>,
    #[prost(message, optional, tag = "9")]
    deletion_timestamp: Option<Time>,
    #[prost(int64, optional, tag = "10")]
    deletion_grace_period_seconds: Option<i64>,
    #[prost(btree_map = "string, string", tag = "11")]
    labels: BTreeMap<String, String>,
    #[prost(btree_map = "string, string", tag = "12")]
    annotations: BTreeMap<String, String>,
    #[prost(message, repeated, tag = "13")]
    owner_references: Vec<OwnerReference>,
    #[prost(string, repeated, tag = "14")]
    finalizers: Vec<String>,
}

impl ObjectMeta {
    fn into_meta(self) -> meta::ObjectMeta {
        meta::ObjectMeta {
            name: non_empty(self.name),
            generate_name: non_empty(self.generate_name),
            namespace: non_empty(self.namespace),
            self_link: non_empty(self.self_link),
            uid: non_empty(self.uid),
            resource_version: non_empty(self.resource_version),
            generation: (self.generation != 0).then_some(self.generation),
            creation_timestamp: time(self.creation_timestamp),
            deletion_timestamp: time(self.deletion_timestamp),
            deletion_grace_period_seconds: self.deletion_grace_period_seconds,
            labels: non_empty_map(self.labels),
            annotations: non_empty_map(self.annotations),
            owner_references: non_empty_vec(
                self.owner_references
                    .into_iter()
                    .map(|o| meta::OwnerReference {
                        api_version: o.api_version,
                        kind: o.kind,
                        name: o.name,
                        uid: o.uid,
                        controller: o.controller,
                        block_owner_deletion: o.block_owner_deletion,
                    })
                    .collect(),
            ),
            finalizers: non_empty_vec(self.finalizers),
            managed_fields: None,
        }
    }
}

/// `core.v1.NodeSelectorRequirement`.
#[derive(Clone, PartialEq, Message)]
struct NodeSelectorRequirement {
    #[prost(string, tag = "1")]
    key: String,
    #[prost(string, tag = "2")]
    operator: String,
    #[prost(string, repeated, tag = "3")]
    values: Vec<String>,
}

/// `core.v1.NodeSelectorTerm`.
#[derive(Clone, PartialEq, Message)]
struct NodeSelectorTerm {
    #[prost(message, repeated, tag = "1")]
    match_expressions: Vec<NodeSelectorRequirement>,
    #[prost(message, repeated, tag = "2")]
    match_fields: Vec<NodeSelectorRequirement>,
}

impl NodeSelectorTerm {
    fn into_core(self) -> core::NodeSelectorTerm {
        let requirements = |rs: Vec<NodeSelectorRequirement>| {
            non_empty_vec(
                rs.into_iter()
                    .map(|r| core::NodeSelectorRequirement {
                        key: r.key,
                        operator: r.operator,
                        values: non_empty_vec(r.values),
                    })
                    .collect(),
            )
        };
        core::NodeSelectorTerm {
            match_expressions: requirements(self.match_expressions),
            match_fields: requirements(self.match_fields),
        }
    }
}

/// `core.v1.NodeSelector`.
#[derive(Clone, PartialEq, Message)]
struct NodeSelector {
    #[prost(message, repeated, tag = "1")]
    node_selector_terms: Vec<NodeSelectorTerm>,
}

/// `core.v1.PreferredSchedulingTerm`.
#[derive(Clone, PartialEq, Message)]
struct PreferredSchedulingTerm {
    #[prost(int32, tag = "1")]
    weight: i32,
    #[prost(message, optional, tag = "2")]
    preference: Option<NodeSelectorTerm>,
}

/// `core.v1.NodeAffinity`.
#[derive(Clone, PartialEq, Message)]
struct NodeAffinity {
    #[prost(message, optional, tag = "1")]
    required: Option<NodeSelector>,
    #[prost(message, repeated, tag = "2")]
    preferred: Vec<PreferredSchedulingTerm>,
}

/// `core.v1.Affinity`: node affinity only (pod affinity, 2 and 3, is not kept).
#[derive(Clone, PartialEq, Message)]
struct Affinity {
    #[prost(message, optional, tag = "1")]
    node_affinity: Option<NodeAffinity>,
}

impl Affinity {
    fn into_cached(self) -> CachedAffinity {
        CachedAffinity {
            node_affinity: self.node_affinity.map(|a| core::NodeAffinity {
                required_during_scheduling_ignored_during_execution: a.required.map(|s| {
                    core::NodeSelector {
                        node_selector_terms: s
                            .node_selector_terms
                            .into_iter()
                            .map(NodeSelectorTerm::into_core)
                            .collect(),
                    }
                }),
                preferred_during_scheduling_ignored_during_execution: non_empty_vec(
                    a.preferred
                        .into_iter()
                        .map(|p| core::PreferredSchedulingTerm {
                            weight: p.weight,
                            preference: p
                                .preference
                                .map(NodeSelectorTerm::into_core)
                                .unwrap_or_default(),
                        })
                        .collect(),
                ),
            }),
        }
    }
}

/// `core.v1.Container`: name and restart policy (init containers only).
#[derive(Clone, PartialEq, Message)]
struct Container {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(string, optional, tag = "24")]
    restart_policy: Option<String>,
}

/// `core.v1.PodSpec`.
#[derive(Clone, PartialEq, Message)]
struct PodSpec {
    #[prost(string, tag = "10")]
    node_name: String,
    #[prost(message, optional, tag = "18")]
    affinity: Option<Affinity>,
    #[prost(message, repeated, tag = "20")]
    init_containers: Vec<Container>,
}

/// `core.v1.PodCondition`.
#[derive(Clone, PartialEq, Message)]
struct PodCondition {
    #[prost(string, tag = "1")]
    type_: String,
    #[prost(string, tag = "2")]
    status: String,
    #[prost(message, optional, tag = "3")]
    last_probe_time: Option<Time>,
    #[prost(message, optional, tag = "4")]
    last_transition_time: Option<Time>,
    #[prost(string, tag = "5")]
    reason: String,
    #[prost(string, tag = "6")]
    message: String,
    #[prost(int64, tag = "7")]
    observed_generation: i64,
}

/// `core.v1.ContainerStatus`: name and restart count.
#[derive(Clone, PartialEq, Message)]
struct ContainerStatus {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(int32, tag = "5")]
    restart_count: i32,
}

/// `core.v1.PodStatus`.
#[derive(Clone, PartialEq, Message)]
struct PodStatus {
    #[prost(string, tag = "1")]
    phase: String,
    #[prost(message, repeated, tag = "2")]
    conditions: Vec<PodCondition>,
    #[prost(message, repeated, tag = "8")]
    container_statuses: Vec<ContainerStatus>,
    #[prost(message, repeated, tag = "10")]
    init_container_statuses: Vec<ContainerStatus>,
}

fn restarts(statuses: Vec<ContainerStatus>) -> Option<Vec<ContainerRestarts>> {
    non_empty_vec(
        statuses
            .into_iter()
            .map(|c| ContainerRestarts {
                name: c.name,
                restart_count: c.restart_count,
            })
            .collect(),
    )
}

/// `core.v1.Pod`.
#[derive(Clone, PartialEq, Message)]
struct Pod {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ObjectMeta>,
    #[prost(message, optional, tag = "2")]
    spec: Option<PodSpec>,
    #[prost(message, optional, tag = "3")]
    status: Option<PodStatus>,
}

impl Pod {
    fn into_cached(self) -> CachedPod {
        CachedPod {
            metadata: self.metadata.map(ObjectMeta::into_meta).unwrap_or_default(),
            spec: self.spec.map(|s| CachedPodSpec {
                node_name: non_empty(s.node_name),
                affinity: s.affinity.map(Affinity::into_cached),
                init_containers: non_empty_vec(
                    s.init_containers
                        .into_iter()
                        .map(|c| CachedInitContainer {
                            name: c.name,
                            restart_policy: c.restart_policy,
                        })
                        .collect(),
                ),
            }),
            status: self.status.map(|s| CachedPodStatus {
                phase: non_empty(s.phase),
                conditions: non_empty_vec(
                    s.conditions
                        .into_iter()
                        .map(|c| core::PodCondition {
                            type_: c.type_,
                            status: c.status,
                            last_probe_time: time(c.last_probe_time),
                            last_transition_time: time(c.last_transition_time),
                            reason: non_empty(c.reason),
                            message: non_empty(c.message),
                            observed_generation: (c.observed_generation != 0)
                                .then_some(c.observed_generation),
                        })
                        .collect(),
                ),
                container_statuses: restarts(s.container_statuses),
                init_container_statuses: restarts(s.init_container_statuses),
            }),
        }
        .trimmed()
    }
}

/// `core.v1.PodList`.
#[derive(Clone, PartialEq, Message)]
struct PodList {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ListMeta>,
    #[prost(message, repeated, tag = "2")]
    items: Vec<Pod>,
}

/// `core.v1.Taint`.
#[derive(Clone, PartialEq, Message)]
struct Taint {
    #[prost(string, tag = "1")]
    key: String,
    #[prost(string, tag = "2")]
    value: String,
    #[prost(string, tag = "3")]
    effect: String,
    #[prost(message, optional, tag = "4")]
    time_added: Option<Time>,
}

/// `core.v1.NodeSpec`: what a DaemonSet's placement reads.
#[derive(Clone, PartialEq, Message)]
struct NodeSpec {
    #[prost(bool, tag = "4")]
    unschedulable: bool,
    #[prost(message, repeated, tag = "5")]
    taints: Vec<Taint>,
}

/// `core.v1.Node`: metadata and the kept spec (the status, heartbeats and images, is not kept).
#[derive(Clone, PartialEq, Message)]
struct Node {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ObjectMeta>,
    #[prost(message, optional, tag = "2")]
    spec: Option<NodeSpec>,
}

impl Node {
    fn into_cached(self) -> core::Node {
        core::Node {
            metadata: self.metadata.map(ObjectMeta::into_meta).unwrap_or_default(),
            spec: self.spec.map(|s| core::NodeSpec {
                unschedulable: s.unschedulable.then_some(true),
                taints: non_empty_vec(
                    s.taints
                        .into_iter()
                        .map(|t| core::Taint {
                            key: t.key,
                            value: non_empty(t.value),
                            effect: t.effect,
                            time_added: time(t.time_added),
                        })
                        .collect(),
                ),
                ..Default::default()
            }),
            status: None,
        }
    }
}

/// `core.v1.NodeList`.
#[derive(Clone, PartialEq, Message)]
struct NodeList {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ListMeta>,
    #[prost(message, repeated, tag = "2")]
    items: Vec<Node>,
}

/// `meta.v1.Status`: an API error (details are not kept).
#[derive(Clone, PartialEq, Message)]
pub(crate) struct Status {
    #[prost(string, tag = "2")]
    status: String,
    #[prost(string, tag = "3")]
    message: String,
    #[prost(string, tag = "4")]
    reason: String,
    #[prost(int32, tag = "6")]
    code: i32,
}

impl Status {
    /// As kube reports an API error.
    pub(crate) fn into_kube(self) -> kube::core::Status {
        let mut status = kube::core::Status::failure(&self.message, &self.reason)
            .with_code(u16::try_from(self.code).unwrap_or_default());
        if self.status == "Success" {
            status.status = Some(kube::core::response::StatusSummary::Success);
        }
        status
    }
}

fn list_meta(m: Option<ListMeta>) -> (Option<String>, Option<String>) {
    let m = m.unwrap_or_default();
    (non_empty(m.resource_version), non_empty(m.continue_))
}

/// The message in an envelope, refusing another kind than `expected` (an empty kind is accepted).
fn enveloped<M: Message + Default>(body: Bytes, expected: &'static str) -> Result<M, DecodeError> {
    let (kind, raw) = unwrap_envelope(body)?;
    if !kind.is_empty() && kind != expected {
        return Err(DecodeError::WrongKind {
            expected,
            got: kind,
        });
    }
    M::decode(raw).map_err(DecodeError::message(expected))
}

impl ProtobufKind for CachedPod {
    fn decode_object(body: Bytes) -> Result<Self, DecodeError> {
        Ok(enveloped::<Pod>(body, "Pod")?.into_cached())
    }

    fn decode_list(body: Bytes) -> Result<DecodedList<Self>, DecodeError> {
        let list: PodList = enveloped(body, "PodList")?;
        let (resource_version, continue_token) = list_meta(list.metadata);
        Ok(DecodedList {
            resource_version,
            continue_token,
            items: list.items.into_iter().map(Pod::into_cached).collect(),
        })
    }
}

impl ProtobufKind for core::Node {
    fn decode_object(body: Bytes) -> Result<Self, DecodeError> {
        Ok(enveloped::<Node>(body, "Node")?.into_cached())
    }

    fn decode_list(body: Bytes) -> Result<DecodedList<Self>, DecodeError> {
        let list: NodeList = enveloped(body, "NodeList")?;
        let (resource_version, continue_token) = list_meta(list.metadata);
        Ok(DecodedList {
            resource_version,
            continue_token,
            items: list.items.into_iter().map(Node::into_cached).collect(),
        })
    }
}

/// What the node cache keeps of a node decoded from JSON: the same as the protobuf decoding keeps.
pub(crate) fn cached_node(node: core::Node) -> core::Node {
    let mut metadata = node.metadata;
    metadata.managed_fields = None;
    core::Node {
        metadata,
        spec: node.spec.map(|s| core::NodeSpec {
            unschedulable: s.unschedulable.filter(|u| *u),
            taints: s.taints.filter(|t| !t.is_empty()),
            ..Default::default()
        }),
        status: None,
    }
}

#[cfg(test)]
impl Status {
    pub(crate) fn failure(code: i32, reason: &str, message: &str) -> Self {
        Status {
            status: "Failure".into(),
            message: message.into(),
            reason: reason.into(),
            code,
        }
    }
}

/// Pods, lists and bookmarks encoded as the API server does, for tests.
#[cfg(test)]
pub(crate) mod encode {
    use super::*;
    use crate::protobuf::wire::encode::enveloped;

    fn pod_message(name: &str, resource_version: &str, annotations: &[(&str, &str)]) -> Pod {
        Pod {
            metadata: Some(ObjectMeta {
                name: name.into(),
                namespace: if name.is_empty() {
                    String::new()
                } else {
                    "ns".into()
                },
                resource_version: resource_version.into(),
                annotations: annotations
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                ..Default::default()
            }),
            spec: Some(PodSpec::default()),
            status: Some(PodStatus::default()),
        }
    }

    /// A pod `ns/name` at `resource_version`, enveloped.
    pub(crate) fn pod(name: &str, resource_version: &str) -> Bytes {
        enveloped(
            "Pod",
            pod_message(name, resource_version, &[]).encode_to_vec(),
        )
    }

    /// A bookmark's object: a pod with only a resourceVersion (and the end-of-list annotation).
    pub(crate) fn bookmark(resource_version: &str, initial_events_end: bool) -> Bytes {
        let annotations: &[(&str, &str)] = if initial_events_end {
            &[("k8s.io/initial-events-end", "true")]
        } else {
            &[]
        };
        enveloped(
            "Pod",
            pod_message("", resource_version, annotations).encode_to_vec(),
        )
    }

    /// A page of a pod list.
    pub(crate) fn pod_list(
        names: &[(&str, &str)],
        resource_version: &str,
        continue_: &str,
    ) -> Bytes {
        let list = PodList {
            metadata: Some(ListMeta {
                resource_version: resource_version.into(),
                continue_: continue_.into(),
            }),
            items: names
                .iter()
                .map(|(n, rv)| pod_message(n, rv, &[]))
                .collect(),
        };
        enveloped("PodList", list.encode_to_vec())
    }
}
