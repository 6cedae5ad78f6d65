//! Reading the optional fields of Deployments and ReplicaSets the way upstream's Go structs see them.
//!
//! k8s-openapi models every field the API server may omit as `Option`, while upstream reads plain Go
//! values (zero when omitted) and pointers the API server always defaults. These helpers apply the
//! same defaults in one place so the decision code reads like upstream's: an absent count is 0, an
//! absent `spec.replicas` is the API default 1, an absent strategy type is the API default
//! `RollingUpdate`.

use std::borrow::Cow;

use k8s_openapi::api::apps::v1::{DeploymentStatus, ReplicaSetStatus};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::jiff::Timestamp;
use kube::api::ObjectMeta;

use crate::{DeploymentObject, ReplicaSetObject};

/// The API server's default for `spec.replicas` of both kinds (the CRD copies default it too).
pub(crate) const DEFAULT_REPLICAS: i32 = 1;

/// The strategy type that rolls pods over gradually.
pub(crate) const ROLLING_UPDATE_STRATEGY: &str = "RollingUpdate";
/// The strategy type that kills all old pods before creating new ones.
pub(crate) const RECREATE_STRATEGY: &str = "Recreate";

/// `spec.replicas` of a Deployment.
pub(crate) fn deployment_replicas(d: &DeploymentObject) -> i32 {
    d.spec.replicas.unwrap_or(DEFAULT_REPLICAS)
}

/// `spec.strategy.type` of a Deployment (absent means the API default, RollingUpdate).
pub(crate) fn strategy_type(d: &DeploymentObject) -> &str {
    d.spec
        .strategy
        .as_ref()
        .and_then(|s| s.type_.as_deref())
        .unwrap_or(ROLLING_UPDATE_STRATEGY)
}

/// The Deployment's status, or the empty status of a Deployment never synced.
pub(crate) fn deployment_status(d: &DeploymentObject) -> Cow<'_, DeploymentStatus> {
    match &d.status {
        Some(s) => Cow::Borrowed(&s.status),
        None => Cow::Owned(DeploymentStatus::default()),
    }
}

/// `metadata.generation` (0 when absent, like Go's zero value).
pub(crate) fn generation(meta: &ObjectMeta) -> i64 {
    meta.generation.unwrap_or(0)
}

/// `metadata.name` ("" when absent).
pub(crate) fn name(meta: &ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or_default()
}

/// `metadata.creationTimestamp` (absent sorts first, like Go's zero time).
pub(crate) fn creation_timestamp(meta: &ObjectMeta) -> Option<Timestamp> {
    meta.creation_timestamp.as_ref().map(|t| t.0)
}

/// `spec.replicas` of a ReplicaSet.
pub(crate) fn rs_replicas(rs: &ReplicaSetObject) -> i32 {
    rs.spec.replicas.unwrap_or(DEFAULT_REPLICAS)
}

/// The ReplicaSet's pod template (absent reads as the empty template, as a Go zero struct would).
pub(crate) fn rs_template(rs: &ReplicaSetObject) -> Cow<'_, PodTemplateSpec> {
    match &rs.spec.template {
        Some(t) => Cow::Borrowed(t),
        None => Cow::Owned(PodTemplateSpec::default()),
    }
}

fn rs_status(rs: &ReplicaSetObject) -> Option<&ReplicaSetStatus> {
    rs.status.as_deref()
}

/// `status.replicas` of a ReplicaSet.
pub(crate) fn rs_status_replicas(rs: &ReplicaSetObject) -> i32 {
    rs_status(rs).map_or(0, |s| s.replicas)
}

/// `status.readyReplicas` of a ReplicaSet.
pub(crate) fn rs_ready_replicas(rs: &ReplicaSetObject) -> i32 {
    rs_status(rs).and_then(|s| s.ready_replicas).unwrap_or(0)
}

/// `status.availableReplicas` of a ReplicaSet.
pub(crate) fn rs_available_replicas(rs: &ReplicaSetObject) -> i32 {
    rs_status(rs)
        .and_then(|s| s.available_replicas)
        .unwrap_or(0)
}

/// `status.observedGeneration` of a ReplicaSet.
pub(crate) fn rs_observed_generation(rs: &ReplicaSetObject) -> i64 {
    rs_status(rs)
        .and_then(|s| s.observed_generation)
        .unwrap_or(0)
}

/// `status.terminatingReplicas` of a ReplicaSet (`None`: not reported).
pub(crate) fn rs_terminating_replicas(rs: &ReplicaSetObject) -> Option<i32> {
    rs_status(rs).and_then(|s| s.terminating_replicas)
}

/// Whether two ReplicaSets are the same object: same UID when both have one, else the same value in
/// memory (objects built in tests or not yet created have no UID).
pub(crate) fn same_replica_set(a: &ReplicaSetObject, b: &ReplicaSetObject) -> bool {
    match (&a.metadata.uid, &b.metadata.uid) {
        (Some(x), Some(y)) => x == y,
        _ => std::ptr::eq(a, b),
    }
}
