//! What is compared after each operation: the namespace's workloads as a user judges them, with what
//! legitimately differs between two planes normalised away (generated names, UIDs, times,
//! resourceVersions), so two planes that agree give equal values.
//!
//! Per Deployment: `spec.replicas`, paused, every status counter, whether `observedGeneration` caught
//! up, the conditions (type, status, reason), the revision annotation, and its ReplicaSets by template
//! (image) with their replicas, revision and size annotations, status and pods (how many, how many
//! Ready, the deletion costs of those left). Per ReplicaSet without a Deployment: the same, and its
//! conditions. Per DaemonSet: the status, the daemon pods per node (image, Ready, terminating, whether
//! relabelled back: of two on a node the oldest stays), nodes told apart by class
//! ([`rules::RULES`]), and the ControllerRevision numbers. Pods without a controller are counted by
//! their `app` label.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet, Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams};
use serde_json::{Value, json};

use super::ops::{DELETION_COST, RELABELLED};
use super::rules;

/// The namespace's normalised state.
pub(crate) async fn snapshot(client: &kube::Client, ns: &str) -> Result<Value, kube::Error> {
    let lp = ListParams::default();
    let deployments = Api::<Deployment>::namespaced(client.clone(), ns)
        .list(&lp)
        .await?
        .items;
    let replica_sets = Api::<ReplicaSet>::namespaced(client.clone(), ns)
        .list(&lp)
        .await?
        .items;
    let daemon_sets = Api::<DaemonSet>::namespaced(client.clone(), ns)
        .list(&lp)
        .await?
        .items;
    let revisions = Api::<ControllerRevision>::namespaced(client.clone(), ns)
        .list(&lp)
        .await?
        .items;
    let pods = Api::<Pod>::namespaced(client.clone(), ns)
        .list(&lp)
        .await?
        .items;
    let nodes = nodes(client).await?;
    Ok(normalise(
        &deployments,
        &replica_sets,
        &daemon_sets,
        &revisions,
        &pods,
        &nodes,
    ))
}

/// Every node.
pub(crate) async fn nodes(client: &kube::Client) -> Result<Vec<Node>, kube::Error> {
    Ok(Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items)
}

fn uid(meta: &kube::api::ObjectMeta) -> &str {
    meta.uid.as_deref().unwrap_or_default()
}

fn controller_uid(meta: &kube::api::ObjectMeta) -> Option<&str> {
    meta.owner_references
        .as_ref()?
        .iter()
        .find(|r| r.controller == Some(true))
        .map(|r| r.uid.as_str())
}

fn annotation(meta: &kube::api::ObjectMeta, key: &str) -> Value {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map_or(Value::Null, |v| json!(v))
}

pub(crate) fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn image_of(spec: Option<&k8s_openapi::api::core::v1::PodSpec>) -> Value {
    spec.and_then(|s| s.containers.first())
        .and_then(|c| c.image.clone())
        .map_or(Value::Null, |i| json!(i))
}

/// Live pods of an owner: how many, how many Ready, how many terminating, and which survived a
/// scale-down as far as upstream decides it: by their deletion costs. Past readiness and cost,
/// upstream ranks pods by how many of the owner's pods share their node (where the scheduler put
/// them, at random among equal nodes), then by ready and creation time in logarithmic buckets, then by
/// UID: so whether a pod relabelled back survives is not compared.
fn pods_of(pods: &[Pod], owner_uid: &str) -> Value {
    let owned: Vec<&Pod> = pods
        .iter()
        .filter(|p| controller_uid(&p.metadata) == Some(owner_uid))
        .collect();
    let live = || {
        owned
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
    };
    let mut costs: Vec<String> = live()
        .filter_map(|p| p.metadata.annotations.as_ref()?.get(DELETION_COST).cloned())
        .collect();
    costs.sort();
    json!({
        "pods": live().count(),
        "ready": live().filter(|p| is_ready(p)).count(),
        "terminating": owned.iter().filter(|p| p.metadata.deletion_timestamp.is_some()).count(),
        "deletionCosts": costs,
    })
}

fn conditions(list: Option<Vec<(String, String, Option<String>)>>) -> Value {
    let mut list = list.unwrap_or_default();
    list.sort();
    json!(list)
}

fn replica_set_view(rs: &ReplicaSet, pods: &[Pod]) -> Value {
    let status = rs.status.clone().unwrap_or_default();
    json!({
        "image": image_of(rs.spec.template.as_ref().and_then(|t| t.spec.as_ref())),
        "replicas": rs.spec.replicas,
        "revision": annotation(&rs.metadata, "deployment.kubernetes.io/revision"),
        "desiredReplicas": annotation(&rs.metadata, "deployment.kubernetes.io/desired-replicas"),
        "maxReplicas": annotation(&rs.metadata, "deployment.kubernetes.io/max-replicas"),
        "status": [status.replicas, status.fully_labeled_replicas, status.ready_replicas,
                   status.available_replicas, status.terminating_replicas],
        "observedGeneration": status.observed_generation == rs.metadata.generation,
        "conditions": conditions(status.conditions.map(|c| c.into_iter()
            .map(|c| (c.type_.unwrap_or_default(), c.status.unwrap_or_default(), c.reason)).collect())),
        "owned": pods_of(pods, uid(&rs.metadata)),
    })
}

pub(crate) fn normalise(
    deployments: &[Deployment],
    replica_sets: &[ReplicaSet],
    daemon_sets: &[DaemonSet],
    revisions: &[ControllerRevision],
    pods: &[Pod],
    nodes: &[Node],
) -> Value {
    let mut state = BTreeMap::new();
    for d in deployments {
        let name = d.metadata.name.clone().unwrap_or_default();
        let status = d.status.clone().unwrap_or_default();
        let mut children: Vec<Value> = replica_sets
            .iter()
            .filter(|rs| controller_uid(&rs.metadata) == Some(uid(&d.metadata)))
            .map(|rs| replica_set_view(rs, pods))
            .collect();
        children.sort_by_key(|v| v.to_string());
        let spec = d.spec.clone();
        state.insert(
            format!("Deployment {name}"),
            json!({
                "replicas": spec.replicas,
                "paused": spec.paused.unwrap_or(false),
                "status": [status.replicas, status.updated_replicas, status.ready_replicas,
                           status.available_replicas, status.unavailable_replicas,
                           status.terminating_replicas],
                "observedGeneration": status.observed_generation == d.metadata.generation,
                "conditions": conditions(status.conditions.map(|c| c.into_iter()
                    .map(|c| (c.type_.unwrap_or_default(), c.status.unwrap_or_default(), c.reason)).collect())),
                "revision": annotation(&d.metadata, "deployment.kubernetes.io/revision"),
                "replicaSets": children,
            }),
        );
    }
    for rs in replica_sets {
        let controlled = controller_uid(&rs.metadata).is_some();
        let name = rs.metadata.name.clone().unwrap_or_default();
        let name = rules::without_template_hash(rs, &name);
        // A Deployment's ReplicaSets are named by a hash: they are compared under their Deployment.
        if !controlled
            || !deployments
                .iter()
                .any(|d| controller_uid(&rs.metadata) == Some(uid(&d.metadata)))
        {
            let key = if controlled {
                format!("ReplicaSet of a gone owner {name}")
            } else {
                format!("ReplicaSet {name}")
            };
            state.insert(key, replica_set_view(rs, pods));
        }
    }
    for ds in daemon_sets {
        let name = ds.metadata.name.clone().unwrap_or_default();
        let status = ds.status.clone().unwrap_or_default();
        let template = ds.spec.template.spec.as_ref();
        let classes = rules::node_classes(nodes, template);
        // Every node, also those without a daemon pod; pods on a node that is gone apart.
        let mut per_node: BTreeMap<String, Vec<Value>> =
            classes.keys().map(|n| (n.clone(), Vec::new())).collect();
        for pod in pods
            .iter()
            .filter(|p| controller_uid(&p.metadata) == Some(uid(&ds.metadata)))
        {
            let node = pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .unwrap_or_default();
            per_node.entry(node).or_default().push(json!([
                image_of(pod.spec.as_ref()),
                is_ready(pod),
                pod.metadata.deletion_timestamp.is_some(),
                pod.metadata
                    .labels
                    .as_ref()
                    .is_some_and(|l| l.contains_key(RELABELLED)),
            ]));
        }
        let per_class = rules::by_node_class(per_node, &classes);
        let mut numbers: Vec<i64> = revisions
            .iter()
            .filter(|r| controller_uid(&r.metadata) == Some(uid(&ds.metadata)))
            .map(|r| r.revision.unwrap_or_default())
            .collect();
        numbers.sort_unstable();
        state.insert(
            format!("DaemonSet {name}"),
            json!({
                "status": [status.desired_number_scheduled, status.current_number_scheduled,
                           status.number_misscheduled, status.number_ready, status.updated_number_scheduled,
                           status.number_available, status.number_unavailable],
                "observedGeneration": status.observed_generation == ds.metadata.generation,
                "podsPerNodeClass": per_class,
                "revisions": numbers,
            }),
        );
    }
    let mut orphans: BTreeMap<String, usize> = BTreeMap::new();
    for pod in pods.iter().filter(|p| {
        controller_uid(&p.metadata).is_none() && p.metadata.deletion_timestamp.is_none()
    }) {
        let app = pod
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("app"))
            .cloned()
            .unwrap_or_default();
        *orphans.entry(app).or_default() += 1;
    }
    state.insert("orphan pods by app".into(), json!(orphans));
    json!(state)
}

/// What the comparison sees of any owner's pod: image, Ready, deletion cost.
fn pod_attributes(pod: &Pod) -> Value {
    json!([
        image_of(pod.spec.as_ref()),
        is_ready(pod),
        pod.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(DELETION_COST)),
    ])
}

/// The `index`-th (modulo their number) live pod of `owner` (a ReplicaSet by controller, a
/// Deployment or DaemonSet by its `app` label), in an order that picks equivalent pods on two planes
/// whose compared states are equal: by the pod's attributes, then its node's class and what else of
/// the owner's the node runs (nodes alike in both are interchangeable), and only then the node's name.
pub(crate) fn pod_at(pods: &[Pod], nodes: &[Node], owner: &str, index: usize) -> Option<String> {
    let owned: Vec<&Pod> = pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| {
            if owner.starts_with("rs") {
                p.metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .any(|r| r.controller == Some(true) && r.name == owner)
            } else {
                p.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("app"))
                    .map(String::as_str)
                    == Some(owner)
            }
        })
        .collect();
    let node_of = |p: &Pod| {
        p.spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default()
    };
    let mut on_node: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for pod in &owned {
        on_node
            .entry(node_of(pod))
            .or_default()
            .push(pod_attributes(pod).to_string());
    }
    for list in on_node.values_mut() {
        list.sort();
    }
    let mut keyed: Vec<(String, String)> = owned
        .iter()
        .map(|p| {
            let node = node_of(p);
            let class = nodes
                .iter()
                .find(|n| n.metadata.name.as_deref() == Some(&node))
                .map(|n| rules::node_class(n, p.spec.as_ref()));
            let key = json!([pod_attributes(p), class, on_node.get(&node), node]);
            (key.to_string(), p.metadata.name.clone().unwrap_or_default())
        })
        .collect();
    keyed.sort();
    let at = index.checked_rem(keyed.len())?;
    Some(keyed.swap_remove(at).1)
}

/// Whether a DaemonSet of the normalised `state` has pods on a node that is gone.
pub(crate) fn has_pods_on_removed_nodes(state: &Value) -> bool {
    state.as_object().is_some_and(|objects| {
        objects.values().any(|view| {
            view["podsPerNodeClass"][rules::NO_SUCH_NODE]
                .as_array()
                .is_some_and(|nodes| {
                    nodes
                        .iter()
                        .any(|pods| pods.as_array().is_some_and(|p| !p.is_empty()))
                })
        })
    })
}

/// The paths at which two normalised states differ, with both values (empty: equal).
pub(crate) fn differences(mini: &Value, upstream: &Value) -> Vec<String> {
    let mut mini = mini.clone();
    rules::forgive_lost_progress_write(&mut mini, upstream);
    let mut found = Vec::new();
    walk("", &mini, upstream, &mut found);
    found
}

fn walk(path: &str, a: &Value, b: &Value, found: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for key in keys {
                let next = format!("{path}/{key}");
                walk(
                    &next,
                    x.get(key).unwrap_or(&Value::Null),
                    y.get(key).unwrap_or(&Value::Null),
                    found,
                );
            }
        }
        _ if a == b => {}
        _ => found.push(format!("{path}: mini {a} | upstream {b}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn daemon_pod(name: &str, node: &str, image: &str, ready: bool) -> Pod {
        let mut pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"app": "agent"}},
            "spec": {"nodeName": node, "containers": [{"name": "main", "image": image}]},
        }))
        .unwrap_or_default();
        if ready {
            pod.status = serde_json::from_value(
                json!({"conditions": [{"type": "Ready", "status": "True"}]}),
            )
            .ok();
        }
        pod
    }

    #[test]
    fn a_pod_is_picked_alike_on_planes_that_surged_onto_different_nodes_of_one_class() {
        let nodes: Vec<Node> = ["n1", "n2", "n3"]
            .iter()
            .map(|n| serde_json::from_value(json!({"metadata": {"name": n}})).unwrap_or_default())
            .collect();
        // Old pods everywhere; the surged new pod on n1 on one plane, on n3 on the other.
        let plane = |surged: &str| {
            let mut pods: Vec<Pod> = ["n1", "n2", "n3"]
                .iter()
                .map(|n| daemon_pod(&format!("old-{n}"), n, "old", true))
                .collect();
            pods.push(daemon_pod("new", surged, "new", false));
            pods
        };
        let (a, b) = (plane("n1"), plane("n3"));
        for index in 0..4 {
            let on = |pods: &[Pod]| {
                let name = pod_at(pods, &nodes, "agent", index).unwrap_or_default();
                let pod = pods
                    .iter()
                    .find(|p| p.metadata.name.as_deref() == Some(&name));
                // What deleting it changes: the pod, and whether its node keeps another.
                let node = pod.and_then(|p| p.spec.as_ref()?.node_name.clone());
                let others = pods
                    .iter()
                    .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.clone()) == node)
                    .count();
                (pod.map(pod_attributes), others)
            };
            assert_eq!(on(&a), on(&b), "index {index}");
        }
        assert_eq!(pod_at(&[], &nodes, "agent", 3), None);
    }

    #[test]
    fn daemon_pods_on_a_removed_node_are_noticed() {
        let with = json!({"DaemonSet agent": {"podsPerNodeClass": {"(no such node)": [[["img", true, true, false]]]}}});
        let without = json!({"DaemonSet agent": {"podsPerNodeClass": {"selected true, untolerated taints []": [[["img", true, false, false]]]}}});
        assert!(has_pods_on_removed_nodes(&with));
        assert!(!has_pods_on_removed_nodes(&without));
    }

    #[test]
    fn equal_states_have_no_differences_and_a_changed_counter_is_named() {
        let a = json!({"Deployment web": {"replicas": 3, "status": [3, 3]}});
        let mut b = a.clone();
        assert!(differences(&a, &b).is_empty());
        b["Deployment web"]["status"] = json!([3, 2]);
        assert_eq!(
            differences(&a, &b),
            ["/Deployment web/status: mini [3,3] | upstream [3,2]"]
        );
    }
}
