//! Builders for the unit tests, shaped like upstream's test helpers (`newDeployment`, `rs`, ...).

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{
    DeploymentSpec, DeploymentStrategy, ReplicaSetSpec, ReplicaSetStatus, RollingUpdateDeployment,
};
use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;
use kube::api::ObjectMeta;

use crate::{DeploymentObject, ReplicaSetObject};

pub(crate) fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

/// Upstream's `newDeployment`: RollingUpdate with integer maxSurge / maxUnavailable, one container.
pub(crate) fn deployment(
    name: &str,
    replicas: i32,
    max_surge: i32,
    max_unavailable: i32,
) -> DeploymentObject {
    deployment_with(
        name,
        replicas,
        Some(IntOrString::Int(max_surge)),
        Some(IntOrString::Int(max_unavailable)),
    )
}

pub(crate) fn deployment_with(
    name: &str,
    replicas: i32,
    max_surge: Option<IntOrString>,
    max_unavailable: Option<IntOrString>,
) -> DeploymentObject {
    let labels = BTreeMap::from([("foo".to_string(), "bar".to_string())]);
    DeploymentObject {
        types: None,
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some("default".to_string()),
            uid: Some(format!("uid-{name}")),
            annotations: Some(BTreeMap::new()),
            ..Default::default()
        },
        spec: DeploymentSpec {
            replicas: Some(replicas),
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                ..Default::default()
            },
            strategy: Some(DeploymentStrategy {
                type_: Some("RollingUpdate".to_string()),
                rolling_update: Some(RollingUpdateDeployment {
                    max_surge,
                    max_unavailable,
                }),
            }),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "app".to_string(),
                        image: Some("foo/bar".to_string()),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
            },
            ..Default::default()
        },
        status: None,
    }
}

pub(crate) fn recreate(mut d: DeploymentObject) -> DeploymentObject {
    d.spec.strategy = Some(DeploymentStrategy {
        type_: Some("Recreate".to_string()),
        rolling_update: None,
    });
    d
}

/// Upstream's `rs(name, replicas, nil, noTimestamp)`: no template, no status.
pub(crate) fn rs(name: &str, replicas: i32) -> ReplicaSetObject {
    ReplicaSetObject {
        types: None,
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some("default".to_string()),
            ..Default::default()
        },
        spec: ReplicaSetSpec {
            replicas: Some(replicas),
            ..Default::default()
        },
        status: None,
    }
}

/// `rs` with a creation timestamp.
pub(crate) fn rs_at(name: &str, replicas: i32, created: &str) -> ReplicaSetObject {
    let mut r = rs(name, replicas);
    r.metadata.creation_timestamp = Some(Time(ts(created)));
    r
}

/// Sets status.replicas and status.availableReplicas (ready = available).
pub(crate) fn with_status(
    mut r: ReplicaSetObject,
    replicas: i32,
    available: i32,
) -> ReplicaSetObject {
    r.status = Some(From::from(ReplicaSetStatus {
        replicas,
        ready_replicas: Some(available),
        available_replicas: Some(available),
        ..Default::default()
    }));
    r
}

pub(crate) fn with_available(mut r: ReplicaSetObject, available: i32) -> ReplicaSetObject {
    r.status
        .get_or_insert_with(Default::default)
        .available_replicas = Some(available);
    r
}

pub(crate) fn with_annotations(
    mut r: ReplicaSetObject,
    pairs: &[(&str, &str)],
) -> ReplicaSetObject {
    let a = r.metadata.annotations.get_or_insert_with(BTreeMap::new);
    for (k, v) in pairs {
        a.insert(k.to_string(), v.to_string());
    }
    r
}

pub(crate) fn with_uid(mut r: ReplicaSetObject, uid: &str) -> ReplicaSetObject {
    r.metadata.uid = Some(uid.to_string());
    r
}

/// A ReplicaSet carrying the Deployment's template (optionally with a hash label).
pub(crate) fn rs_for(
    d: &DeploymentObject,
    name: &str,
    replicas: i32,
    hash: Option<&str>,
) -> ReplicaSetObject {
    let mut template = d.spec.template.clone();
    if let Some(h) = hash {
        template
            .metadata
            .get_or_insert_with(Default::default)
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(crate::POD_TEMPLATE_HASH_LABEL.to_string(), h.to_string());
    }
    let mut r = with_uid(rs(name, replicas), &format!("uid-{name}"));
    r.spec.template = Some(template);
    r
}
