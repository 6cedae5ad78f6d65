//! Objects for the unit tests of this crate, as upstream's test helpers (`newDaemonSet`, `newNode`, a
//! pod on a node with a revision hash, the update strategies). One place, so the tests of
//! `placement`, `update`, `manage`, `status`, `history`, `backoff` and the controller share them. The
//! helpers for the recorded API are the runtime's (`mini_kcm_runtime::controller::offline`).

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{DaemonSetSpec, DaemonSetUpdateStrategy, RollingUpdateDaemonSet};
use k8s_openapi::api::core::v1::{
    Affinity, Container, Node, NodeSpec, Pod, PodCondition, PodSpec, PodStatus, PodTemplateSpec,
    Taint, Toleration,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, OwnerReference, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;
use kube::api::ObjectMeta;
use mini_kcm_runtime::pods::cached::{CachedPod, CachedPodSpec, CachedPodStatus};

use crate::{DaemonSetObject, REVISION_HASH_LABEL};

/// The strategy type as the API spells it (the fixtures use nothing of `update`, which tests with them).
const ROLLING_UPDATE: &str = "RollingUpdate";

pub(crate) fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

pub(crate) fn simple_ds_labels() -> BTreeMap<String, String> {
    labels(&[("name", "simple-daemon"), ("type", "production")])
}

pub(crate) fn new_node(name: &str, node_labels: Option<BTreeMap<String, String>>) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: node_labels,
            ..Default::default()
        },
        ..Default::default()
    }
}

pub(crate) fn tainted(mut node: Node, taints: Vec<Taint>) -> Node {
    node.spec.get_or_insert_with(NodeSpec::default).taints = Some(taints);
    node
}

pub(crate) fn taint(key: &str, value: Option<&str>, effect: &str) -> Taint {
    Taint {
        key: key.into(),
        value: value.map(Into::into),
        effect: effect.into(),
        time_added: None,
    }
}

pub(crate) fn toleration(
    key: Option<&str>,
    operator: Option<&str>,
    value: Option<&str>,
    effect: Option<&str>,
) -> Toleration {
    Toleration {
        key: key.map(Into::into),
        operator: operator.map(Into::into),
        value: value.map(Into::into),
        effect: effect.map(Into::into),
        toleration_seconds: None,
    }
}

/// Upstream test helper `newDaemonSet`: OnDelete, selector and template labels `simpleDaemonSetLabel`.
pub(crate) fn new_ds(name: &str) -> DaemonSetObject {
    let mut ds = DaemonSetObject::new(
        name,
        &mini_kcm_runtime::api::kinds::WorkloadKind::DaemonSet
            .api_resource(mini_kcm_runtime::api::kinds::ApiFamily::Apps),
        DaemonSetSpec {
            selector: LabelSelector {
                match_labels: Some(simple_ds_labels()),
                match_expressions: None,
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(simple_ds_labels()),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "c".into(),
                        image: Some("foo/bar".into()),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
            },
            revision_history_limit: Some(2),
            ..Default::default()
        },
    );
    ds.metadata.namespace = Some("default".into());
    ds.metadata.uid = Some(format!("uid-{name}"));
    ds
}

pub(crate) fn ts(secs: i64) -> Timestamp {
    Timestamp::from_second(secs).unwrap()
}

pub(crate) fn pod_with(
    name: &str,
    node: &str,
    hash: Option<&str>,
    ready: Option<(bool, i64)>,
) -> CachedPod {
    let mut labels = simple_ds_labels();
    if let Some(hash) = hash {
        labels.insert(REVISION_HASH_LABEL.into(), hash.into());
    }
    CachedPod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            labels: Some(labels),
            ..Default::default()
        },
        spec: Some(CachedPodSpec {
            node_name: (!node.is_empty()).then(|| node.into()),
            ..Default::default()
        }),
        status: ready.map(|(ready, since)| CachedPodStatus {
            conditions: Some(vec![PodCondition {
                type_: "Ready".into(),
                status: if ready { "True" } else { "False" }.into(),
                last_transition_time: Some(Time(ts(since))),
                ..Default::default()
            }]),
            ..Default::default()
        }),
    }
}

pub(crate) fn surge_strategy(value: IntOrString) -> Option<DaemonSetUpdateStrategy> {
    Some(DaemonSetUpdateStrategy {
        type_: Some(ROLLING_UPDATE.into()),
        rolling_update: Some(RollingUpdateDaemonSet {
            max_unavailable: Some(IntOrString::Int(0)),
            max_surge: Some(value),
        }),
    })
}

pub(crate) fn unavailable_strategy(value: IntOrString) -> Option<DaemonSetUpdateStrategy> {
    Some(DaemonSetUpdateStrategy {
        type_: Some(ROLLING_UPDATE.into()),
        rolling_update: Some(RollingUpdateDaemonSet {
            max_unavailable: Some(value),
            max_surge: None,
        }),
    })
}

/// Upstream's `newOnDeleteStrategy`.
pub(crate) fn on_delete_strategy() -> Option<DaemonSetUpdateStrategy> {
    Some(DaemonSetUpdateStrategy {
        type_: Some("OnDelete".into()),
        rolling_update: None,
    })
}

/// Upstream's `updateStrategies()`: OnDelete, and RollingUpdate with `maxUnavailable: 1`.
pub(crate) fn update_strategies() -> Vec<Option<DaemonSetUpdateStrategy>> {
    vec![
        on_delete_strategy(),
        unavailable_strategy(IntOrString::Int(1)),
    ]
}

/// The controller reference a daemon pod or revision of `ds` carries.
pub(crate) fn controller_ref(ds: &DaemonSetObject) -> OwnerReference {
    mini_kcm_fixtures::controller_ref(
        "DaemonSet",
        ds.metadata.name.as_deref().unwrap_or_default(),
        ds.metadata.uid.as_deref().unwrap_or_default(),
    )
}

/// A cached pod as the API server would store it (the fields the cache keeps), to put it in a
/// [`RecordedApi`].
pub(crate) fn to_pod(cached: &CachedPod) -> Pod {
    let spec = cached.spec.as_ref();
    let status = cached.status.as_ref();
    Pod {
        metadata: cached.metadata.clone(),
        spec: Some(PodSpec {
            node_name: spec.and_then(|s| s.node_name.clone()),
            affinity: spec.and_then(|s| s.affinity.as_ref()).map(|a| Affinity {
                node_affinity: a.node_affinity.clone(),
                ..Default::default()
            }),
            containers: vec![Container {
                name: "c".into(),
                image: Some("foo/bar".into()),
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: status.map(|s| PodStatus {
            phase: s.phase.clone(),
            conditions: s.conditions.clone(),
            ..Default::default()
        }),
    }
}
