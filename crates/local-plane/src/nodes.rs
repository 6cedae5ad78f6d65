//! Simulated nodes: plain `Node` objects that kwok (started with `--manage-all-nodes`) keeps Ready.
//!
//! A new node is tainted `node.kubernetes.io/not-ready:NoSchedule` by the apiserver's admission; the
//! node-lifecycle controller of kube-controller-manager lifts the taint once kwok reports Ready, just as
//! on a real cluster. "Ready and schedulable" therefore means: Ready condition True, no `not-ready` or
//! `unreachable` taint, and not cordoned.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, NodeSpec as CoreNodeSpec, NodeStatus, Taint};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

use crate::PlaneError;

/// The annotation kwok's documentation puts on the nodes it simulates.
pub(crate) const KWOK_NODE_ANNOTATION: &str = "kwok.x-k8s.io/node";

const NOT_SCHEDULABLE_TAINTS: [&str; 2] = [
    "node.kubernetes.io/not-ready",
    "node.kubernetes.io/unreachable",
];

/// What a simulated node looks like when created.
#[derive(Debug, Clone, Default)]
pub struct NodeSpec {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
}

impl NodeSpec {
    pub fn named(name: &str) -> Self {
        NodeSpec {
            name: name.to_string(),
            ..Default::default()
        }
    }

    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.labels.insert(key.to_string(), value.to_string());
        self
    }

    pub fn taint(mut self, key: &str, value: &str, effect: &str) -> Self {
        self.taints.push(Taint {
            key: key.to_string(),
            value: Some(value.to_string()),
            effect: effect.to_string(),
            time_added: None,
        });
        self
    }

    fn to_node(&self) -> Node {
        let mut labels = BTreeMap::from([
            ("kubernetes.io/hostname".to_string(), self.name.clone()),
            ("kubernetes.io/os".to_string(), "linux".to_string()),
            ("kubernetes.io/arch".to_string(), "amd64".to_string()),
            ("type".to_string(), "kwok".to_string()),
        ]);
        labels.extend(self.labels.clone());
        let capacity = BTreeMap::from([
            ("cpu".to_string(), Quantity("64".into())),
            ("memory".to_string(), Quantity("256Gi".into())),
            ("pods".to_string(), Quantity("1000".into())),
        ]);
        Node {
            metadata: kube::api::ObjectMeta {
                name: Some(self.name.clone()),
                labels: Some(labels),
                annotations: Some(BTreeMap::from([(
                    KWOK_NODE_ANNOTATION.to_string(),
                    "fake".to_string(),
                )])),
                ..Default::default()
            },
            spec: Some(CoreNodeSpec {
                taints: (!self.taints.is_empty()).then(|| self.taints.clone()),
                ..Default::default()
            }),
            status: Some(NodeStatus {
                allocatable: Some(capacity.clone()),
                capacity: Some(capacity),
                ..Default::default()
            }),
        }
    }
}

/// Creates a simulated node (kwok takes it over within a second).
pub async fn create(client: &Client, spec: &NodeSpec) -> Result<Node, PlaneError> {
    Api::<Node>::all(client.clone())
        .create(&PostParams::default(), &spec.to_node())
        .await
        .map_err(|e| PlaneError::api(format!("creating node {}", spec.name), e))
}

/// Merges labels into a node (a `None` value removes the label).
pub async fn set_labels(
    client: &Client,
    name: &str,
    labels: &BTreeMap<String, Option<String>>,
) -> Result<Node, PlaneError> {
    let patch = json!({ "metadata": { "labels": labels } });
    Api::<Node>::all(client.clone())
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| PlaneError::api(format!("labelling node {name}"), e))
}

/// Replaces the taints of a node that are not managed by Kubernetes itself with `taints`.
pub async fn set_taints(client: &Client, name: &str, taints: &[Taint]) -> Result<Node, PlaneError> {
    let api = Api::<Node>::all(client.clone());
    let node = api
        .get(name)
        .await
        .map_err(|e| PlaneError::api(format!("reading node {name}"), e))?;
    let mut all: Vec<Taint> = node
        .spec
        .and_then(|s| s.taints)
        .unwrap_or_default()
        .into_iter()
        .filter(|t| t.key.starts_with("node.kubernetes.io/"))
        .collect();
    all.extend(taints.iter().cloned());
    let patch = json!({
        "metadata": { "resourceVersion": node.metadata.resource_version },
        "spec": { "taints": all },
    });
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| PlaneError::api(format!("tainting node {name}"), e))
}

/// Whether a node is Ready and schedulable.
pub(crate) fn is_ready_and_schedulable(node: &Node) -> bool {
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    let spec = node.spec.as_ref();
    let cordoned = spec.and_then(|s| s.unschedulable).unwrap_or(false);
    let blocked = spec.and_then(|s| s.taints.as_ref()).is_some_and(|ts| {
        ts.iter()
            .any(|t| NOT_SCHEDULABLE_TAINTS.contains(&t.key.as_str()))
    });
    ready && !cordoned && !blocked
}

/// Ok(true) once every named node is Ready and schedulable.
pub(crate) async fn all_ready(client: &Client, names: &[String]) -> Result<bool, String> {
    let api = Api::<Node>::all(client.clone());
    for name in names {
        match api.get_opt(name).await {
            Ok(Some(node)) if is_ready_and_schedulable(&node) => {}
            Ok(_) => return Ok(false),
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::NodeCondition;

    fn ready_node(taints: Vec<Taint>) -> Node {
        let mut node = NodeSpec {
            name: "n".into(),
            taints,
            ..Default::default()
        }
        .to_node();
        node.status = Some(NodeStatus {
            conditions: Some(vec![NodeCondition {
                type_: "Ready".into(),
                status: "True".into(),
                ..Default::default()
            }]),
            ..Default::default()
        });
        node
    }

    #[test]
    fn ready_means_condition_true_and_no_blocking_taint() {
        assert!(is_ready_and_schedulable(&ready_node(vec![])));
        let not_ready = NodeSpec::named("n")
            .taint("node.kubernetes.io/not-ready", "", "NoSchedule")
            .taints;
        assert!(!is_ready_and_schedulable(&ready_node(not_ready)));
        let other = NodeSpec::named("n")
            .taint("dedicated", "x", "NoSchedule")
            .taints;
        assert!(is_ready_and_schedulable(&ready_node(other)));
        assert!(!is_ready_and_schedulable(&NodeSpec::named("n").to_node()));
    }

    #[test]
    fn node_carries_kwok_annotation_and_hostname_label() {
        let node = NodeSpec::named("kwok-node-7").label("zone", "a").to_node();
        let labels = node.metadata.labels.unwrap();
        assert_eq!(labels["kubernetes.io/hostname"], "kwok-node-7");
        assert_eq!(labels["zone"], "a");
        assert_eq!(
            node.metadata.annotations.unwrap()[KWOK_NODE_ANNOTATION],
            "fake"
        );
    }
}
