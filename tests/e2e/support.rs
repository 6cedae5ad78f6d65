//! Workload manifests shared by the end-to-end tests.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{DaemonSet, DaemonSetSpec, Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::ObjectMeta;

/// An image that is never pulled: kwok simulates the kubelet.
pub const IMAGE: &str = "registry.k8s.io/pause:3.10";

pub fn pod_template(app: &str) -> PodTemplateSpec {
    PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(BTreeMap::from([("app".to_string(), app.to_string())])),
            ..Default::default()
        }),
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "main".into(),
                image: Some(IMAGE.into()),
                ..Default::default()
            }],
            ..Default::default()
        }),
    }
}

pub fn selector(app: &str) -> LabelSelector {
    LabelSelector {
        match_labels: Some(BTreeMap::from([("app".to_string(), app.to_string())])),
        ..Default::default()
    }
}

pub fn deployment(name: &str, replicas: i32) -> Deployment {
    Deployment {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec: Some(DeploymentSpec {
            replicas: Some(replicas),
            selector: selector(name),
            template: pod_template(name),
            ..Default::default()
        }),
        ..Default::default()
    }
}

pub fn daemon_set(name: &str) -> DaemonSet {
    DaemonSet {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec: Some(DaemonSetSpec {
            selector: selector(name),
            template: pod_template(name),
            ..Default::default()
        }),
        ..Default::default()
    }
}

pub fn app_selector(app: &str) -> String {
    format!("app={app}")
}
