//! Reading the simulated cluster's objects, which the harness keeps as JSON (the recorded API's form):
//! the few fields the cluster, the invariants and the steady states need, each read one way.

use std::collections::BTreeMap;

use serde_json::Value;

/// The resources of the simulation, as the recorded API and the informers name them.
pub const PODS: &str = "v1/pods";
/// Nodes.
pub const NODES: &str = "v1/nodes";
/// ReplicaSets.
pub const REPLICA_SETS: &str = "apps/v1/replicasets";
/// Deployments.
pub const DEPLOYMENTS: &str = "apps/v1/deployments";
/// DaemonSets.
pub const DAEMON_SETS: &str = "apps/v1/daemonsets";
/// ControllerRevisions (a DaemonSet's history).
pub const REVISIONS: &str = "apps/v1/controllerrevisions";

/// The resource of an owner's kind (what an ownerReference's `kind` names).
pub fn resource_of_kind(kind: &str) -> Option<&'static str> {
    match kind {
        "ReplicaSet" => Some(REPLICA_SETS),
        "Deployment" => Some(DEPLOYMENTS),
        "DaemonSet" => Some(DAEMON_SETS),
        _ => None,
    }
}

fn text<'a>(object: &'a Value, pointer: &str) -> &'a str {
    object
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// `metadata.name`.
pub fn name(object: &Value) -> &str {
    text(object, "/metadata/name")
}

/// `metadata.namespace` (empty for a cluster-scoped object).
pub fn namespace(object: &Value) -> &str {
    text(object, "/metadata/namespace")
}

/// `metadata.uid`.
pub fn uid(object: &Value) -> &str {
    text(object, "/metadata/uid")
}

/// `metadata.resourceVersion` as a number (0 if absent).
pub fn resource_version(object: &Value) -> u64 {
    text(object, "/metadata/resourceVersion")
        .parse()
        .unwrap_or(0)
}

/// `metadata.generation` (0 if absent).
pub fn generation(object: &Value) -> i64 {
    object
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

/// `status.observedGeneration` (0 if absent).
pub fn observed_generation(object: &Value) -> i64 {
    status_number(object, "observedGeneration")
}

/// A number in the status (0 if absent).
pub fn status_number(object: &Value, field: &str) -> i64 {
    object
        .get("status")
        .and_then(|s| s.get(field))
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

/// `metadata.labels`.
pub fn labels(object: &Value) -> BTreeMap<String, String> {
    object
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether the object is being deleted (`metadata.deletionTimestamp` set).
pub fn is_terminating(object: &Value) -> bool {
    object
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null())
}

/// An owner reference: the owner's kind, name and UID, and whether it is the controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerRef {
    /// The owner's kind.
    pub kind: String,
    /// The owner's name.
    pub name: String,
    /// The owner's UID.
    pub uid: String,
    /// `controller: true`.
    pub controller: bool,
}

/// Every owner reference in `references` (an `ownerReferences` array, or one reference).
pub fn owner_refs_in(references: &Value) -> Vec<OwnerRef> {
    let one = |r: &Value| {
        Some(OwnerRef {
            kind: r.get("kind")?.as_str()?.to_string(),
            name: r.get("name")?.as_str()?.to_string(),
            uid: r.get("uid")?.as_str()?.to_string(),
            controller: r.get("controller").and_then(Value::as_bool) == Some(true),
        })
    };
    match references {
        Value::Array(items) => items.iter().filter_map(one).collect(),
        Value::Object(_) => one(references).into_iter().collect(),
        _ => Vec::new(),
    }
}

/// The object's owner references.
pub fn owner_refs(object: &Value) -> Vec<OwnerRef> {
    object
        .pointer("/metadata/ownerReferences")
        .map(owner_refs_in)
        .unwrap_or_default()
}

/// The object's controller, if it has one.
pub fn controller_of(object: &Value) -> Option<OwnerRef> {
    owner_refs(object).into_iter().find(|r| r.controller)
}

/// `spec.replicas` (1 if absent, the API's default).
pub fn spec_replicas(object: &Value) -> i64 {
    object
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1)
}

/// The node a pod runs on, or is pinned to by a DaemonSet's node affinity (`matchFields` on
/// `metadata.name`) before the scheduler bound it.
pub fn pod_node(pod: &Value) -> Option<String> {
    if let Some(node) = pod.pointer("/spec/nodeName").and_then(Value::as_str) {
        return Some(node.to_string());
    }
    let terms = pod
        .pointer("/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms")?
        .as_array()?;
    terms.iter().find_map(|term| {
        term.get("matchFields")?
            .as_array()?
            .iter()
            .find(|f| f.get("key").and_then(Value::as_str) == Some("metadata.name"))?
            .get("values")?
            .get(0)?
            .as_str()
            .map(str::to_string)
    })
}

/// Whether the pod's `Ready` condition is true.
pub fn is_ready(pod: &Value) -> bool {
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|conditions| {
            conditions.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some("Ready")
                    && c.get("status").and_then(Value::as_str) == Some("True")
            })
        })
}

/// Whether `labels` match a label selector (`matchLabels` and `matchExpressions`); an empty or
/// missing selector matches nothing, as a workload's selector must not be empty.
pub fn selector_matches(selector: Option<&Value>, labels: &BTreeMap<String, String>) -> bool {
    let Some(selector) = selector.filter(|s| s.as_object().is_some_and(|o| !o.is_empty())) else {
        return false;
    };
    let match_labels = selector
        .get("matchLabels")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .all(|(k, v)| labels.get(k).map(String::as_str) == v.as_str());
    let expressions = selector
        .get("matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .all(|e| {
            let key = e.get("key").and_then(Value::as_str).unwrap_or_default();
            let values: Vec<&str> = e
                .get("values")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            let value = labels.get(key).map(String::as_str);
            match e.get("operator").and_then(Value::as_str) {
                Some("In") => value.is_some_and(|v| values.contains(&v)),
                Some("NotIn") => value.is_none_or(|v| !values.contains(&v)),
                Some("Exists") => value.is_some(),
                Some("DoesNotExist") => value.is_none(),
                _ => false,
            }
        });
    match_labels && expressions
}

/// The images of a pod spec's containers, in order.
pub fn images(pod_spec: Option<&Value>) -> Vec<String> {
    pod_spec
        .and_then(|s| s.get("containers"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("image").and_then(Value::as_str).map(str::to_string))
        .collect()
}

/// Merges `patch` into `target` (JSON merge patch, RFC 7386), as `kubectl patch --type merge`.
pub fn merge(target: &mut Value, patch: &Value) {
    let Some(patch) = patch.as_object() else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(serde_json::Map::new());
    }
    if let Some(target) = target.as_object_mut() {
        for (key, value) in patch {
            if value.is_null() {
                target.remove(key);
            } else {
                merge(target.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
    }
}
