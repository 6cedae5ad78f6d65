//! What is compared after each operation: the namespace's workloads as a user judges them, with what
//! legitimately differs between two planes normalised away (generated names, UIDs, times,
//! resourceVersions), so two planes that agree give equal values.
//!
//! Per Deployment: `spec.replicas`, paused, every status counter, `observedGeneration` and
//! `collisionCount`, the conditions (type, status, reason) and their messages, the revision
//! annotation, and its ReplicaSets by template (image) with their replicas, annotations,
//! `minReadySeconds`, template labels and annotations, `blockOwnerDeletion`, status and pods (how
//! many, how many Ready, the deletion costs of those left). Per ReplicaSet without a Deployment: the
//! same, and its conditions. Per DaemonSet: the status, the daemon pods per node (image, Ready,
//! terminating, whether relabelled back: of two on a node the oldest stays; tolerations, pinned to
//! their node, `blockOwnerDeletion`), nodes told apart by class ([`rules::RULES`]), and the
//! ControllerRevisions' numbers and data. Pods without a controller are counted by their `app` label.
//! Every state read is also checked against upstream's guarantees ([`broken_invariants`]).

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet, Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};

use super::ops::{DELETION_COST, RELABELLED};
use super::rules;

/// The namespace's normalised state, and the invariants it breaks ([`broken_invariants`]).
pub(crate) async fn snapshot(
    client: &kube::Client,
    ns: &str,
) -> Result<(Value, Vec<String>), kube::Error> {
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
    let broken = broken_invariants(&deployments, &replica_sets, &daemon_sets, &pods);
    let state = normalise(
        &deployments,
        &replica_sets,
        &daemon_sets,
        &revisions,
        &pods,
        &nodes,
    );
    Ok((state, broken))
}

/// Upstream's guarantees, checked on every state read (settled or not), each broken one described:
/// - a Deployment whose controller has observed its generation has at most `spec.replicas + maxSurge`
///   replicas in its ReplicaSets' specs (Recreate: `spec.replicas`); the bound is upstream's, on the
///   ReplicaSets, since terminating pods may outlast it;
/// - a DaemonSet has at most one live pod per node, two where it may surge (`maxSurge` > 0); pods a user
///   relabelled (and may have relabelled back, to be adopted beside the replacement) are not counted;
/// - no pod has two controllers.
pub(crate) fn broken_invariants(
    deployments: &[Deployment],
    replica_sets: &[ReplicaSet],
    daemon_sets: &[DaemonSet],
    pods: &[Pod],
) -> Vec<String> {
    let mut broken = Vec::new();
    for ds in daemon_sets {
        let surges = ds
            .spec
            .update_strategy
            .as_ref()
            .filter(|u| u.type_.as_deref() != Some("OnDelete"))
            .and_then(|u| u.rolling_update.as_ref())
            .and_then(|r| r.max_surge.as_ref())
            .is_some_and(|surge| match surge {
                IntOrString::Int(n) => *n > 0,
                IntOrString::String(s) => s != "0%" && s != "0",
            });
        let limit = if surges { 2 } else { 1 };
        let mut per_node: BTreeMap<&str, usize> = BTreeMap::new();
        for pod in pods {
            let relabelled = pod
                .metadata
                .labels
                .as_ref()
                .is_some_and(|l| l.contains_key(RELABELLED));
            if pod.metadata.deletion_timestamp.is_some()
                || relabelled
                || controller_uid(&pod.metadata) != Some(uid(&ds.metadata))
            {
                continue;
            }
            if let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
                *per_node.entry(node).or_default() += 1;
            }
        }
        for (node, count) in per_node {
            if count > limit {
                broken.push(format!(
                    "DaemonSet {}: {count} live pods on node {node}, at most {limit}",
                    ds.metadata.name.as_deref().unwrap_or_default()
                ));
            }
        }
    }
    for d in deployments {
        let spec = &d.spec;
        let observed = d.status.as_ref().and_then(|s| s.observed_generation);
        if d.metadata.deletion_timestamp.is_some() || observed != d.metadata.generation {
            continue;
        }
        let replicas = i64::from(spec.replicas.unwrap_or(1));
        let surge = spec
            .strategy
            .as_ref()
            .filter(|s| s.type_.as_deref() != Some("Recreate"))
            .and_then(|s| s.rolling_update.as_ref())
            .and_then(|r| r.max_surge.as_ref())
            .map_or(0, |surge| scaled_up(surge, replicas));
        let in_specs: i64 = replica_sets
            .iter()
            .filter(|rs| controller_uid(&rs.metadata) == Some(uid(&d.metadata)))
            .map(|rs| i64::from(rs.spec.replicas.unwrap_or(0)))
            .sum();
        if in_specs > replicas + surge {
            broken.push(format!(
                "Deployment {}: {in_specs} replicas in its ReplicaSets' specs, above replicas + maxSurge \
                 = {}",
                d.metadata.name.as_deref().unwrap_or_default(),
                replicas + surge
            ));
        }
    }
    for pod in pods {
        let controllers = pod.metadata.owner_references.as_ref().map_or(0, |refs| {
            refs.iter().filter(|r| r.controller == Some(true)).count()
        });
        if controllers > 1 {
            broken.push(format!(
                "pod {}: {controllers} controllers",
                pod.metadata.name.as_deref().unwrap_or_default()
            ));
        }
    }
    broken
}

/// An int-or-percent of `total`, a percentage rounded up (as upstream resolves maxSurge).
fn scaled_up(value: &IntOrString, total: i64) -> i64 {
    match value {
        IntOrString::Int(n) => i64::from(*n),
        IntOrString::String(s) => s
            .strip_suffix('%')
            .and_then(|p| p.parse::<i64>().ok())
            .map_or(0, |p| (p.saturating_mul(total) + 99).div_euclid(100)),
    }
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
        "withoutBlockOwnerDeletion": live()
            .filter(|p| controller_ref(&p.metadata).and_then(|r| r.block_owner_deletion) != Some(true))
            .count(),
    })
}

fn conditions(list: Option<Vec<(String, String, Option<String>)>>) -> Value {
    let mut list = list.unwrap_or_default();
    list.sort();
    json!(list)
}

fn replica_set_view(rs: &ReplicaSet, pods: &[Pod]) -> Value {
    let status = rs.status.clone().unwrap_or_default();
    // A Deployment's ReplicaSet's generation counts the scaling steps its Deployment took, which follow
    // when pods became available on each plane (any two planes differ there: seed 7007): only whether
    // the generation is observed counts. A ReplicaSet of a user's counts the user's changes: exactly.
    let generation = if !annotation(&rs.metadata, "deployment.kubernetes.io/revision").is_null() {
        json!(status.observed_generation == rs.metadata.generation)
    } else {
        json!([status.observed_generation, rs.metadata.generation])
    };
    json!({
        "image": image_of(rs.spec.template.as_ref().and_then(|t| t.spec.as_ref())),
        "replicas": rs.spec.replicas,
        "revision": annotation(&rs.metadata, "deployment.kubernetes.io/revision"),
        "desiredReplicas": annotation(&rs.metadata, "deployment.kubernetes.io/desired-replicas"),
        "maxReplicas": annotation(&rs.metadata, "deployment.kubernetes.io/max-replicas"),
        "status": [status.replicas, status.fully_labeled_replicas, status.ready_replicas,
                   status.available_replicas, status.terminating_replicas],
        "observedGeneration": generation,
        "conditions": conditions(status.conditions.map(|c| c.into_iter()
            .map(|c| (c.type_.unwrap_or_default(), c.status.unwrap_or_default(), c.reason)).collect())),
        "owned": pods_of(pods, uid(&rs.metadata)),
        // Copied from the Deployment, or written by its controller (revision-history included).
        "annotations": rs.metadata.annotations,
        "minReadySeconds": rs.spec.min_ready_seconds,
        "template": template_view(rs.spec.template.as_ref()),
        "blockOwnerDeletion": controller_ref(&rs.metadata).and_then(|r| r.block_owner_deletion),
    })
}

/// A ReplicaSet's pod template beyond its image: labels (the `pod-template-hash`, rule
/// "pod-template-hash", aside) and annotations.
fn template_view(template: Option<&k8s_openapi::api::core::v1::PodTemplateSpec>) -> Value {
    let meta = template.and_then(|t| t.metadata.as_ref());
    let mut labels = meta.and_then(|m| m.labels.clone()).unwrap_or_default();
    labels.remove("pod-template-hash");
    let mut view = json!({
        "labels": labels,
        "annotations": meta.and_then(|m| m.annotations.clone()),
    });
    without_restart_times(&mut view);
    view
}

/// `kubectl rollout restart` stamps a template with the time it ran on each plane (to the second):
/// the stamp is compared, its time is not.
const RESTARTED_AT: &str = "kubectl.kubernetes.io/restartedAt";

fn without_restart_times(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                if key == RESTARTED_AT {
                    *v = json!("<time>");
                } else {
                    without_restart_times(v);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(without_restart_times),
        _ => {}
    }
}

fn controller_ref(
    meta: &kube::api::ObjectMeta,
) -> Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference> {
    meta.owner_references
        .as_ref()?
        .iter()
        .find(|r| r.controller == Some(true))
}

/// A Deployment's condition messages, by type, with its ReplicaSets' names as the rule
/// "pod-template-hash" writes them (messages name the ReplicaSet a rollout is at).
fn condition_messages(d: &Deployment, children: &[&ReplicaSet]) -> Value {
    let mut messages: Vec<(String, String)> = d
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .map(|c| {
            let mut message = c.message.clone().unwrap_or_default();
            for rs in children {
                let name = rs.metadata.name.clone().unwrap_or_default();
                if !name.is_empty() {
                    message = message.replace(&name, &rules::without_template_hash(rs, &name));
                }
            }
            (c.type_.clone().unwrap_or_default(), message)
        })
        .collect();
    messages.sort();
    json!(messages)
}

/// Whether the Deployment's Progressing message names one of its ReplicaSets other than the one of its
/// current revision (a message kept from the rollout before; rule "deployment-lost-progress-write").
fn progressing_names_old(d: &Deployment, children: &[&ReplicaSet]) -> bool {
    let Some(message) = d
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .find(|c| c.type_.as_deref() == Some("Progressing"))
        .and_then(|c| c.message.clone())
    else {
        return false;
    };
    let revision = annotation(&d.metadata, "deployment.kubernetes.io/revision");
    children.iter().any(|rs| {
        rs.metadata
            .name
            .as_deref()
            .is_some_and(|name| message.contains(&format!("\"{name}\"")))
            && annotation(&rs.metadata, "deployment.kubernetes.io/revision") != revision
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
        let owned: Vec<&ReplicaSet> = replica_sets
            .iter()
            .filter(|rs| controller_uid(&rs.metadata) == Some(uid(&d.metadata)))
            .collect();
        let mut children: Vec<Value> = owned.iter().map(|rs| replica_set_view(rs, pods)).collect();
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
                "observedGeneration": [status.observed_generation, d.metadata.generation],
                "collisionCount": status.collision_count,
                "messages": condition_messages(d, &owned),
                "progressingNamesOld": progressing_names_old(d, &owned),
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
            let pinned_here = pinned_node(pod).as_deref() == Some(node.as_str());
            per_node.entry(node).or_default().push(json!([
                image_of(pod.spec.as_ref()),
                is_ready(pod),
                pod.metadata.deletion_timestamp.is_some(),
                pod.metadata
                    .labels
                    .as_ref()
                    .is_some_and(|l| l.contains_key(RELABELLED)),
                tolerations_of(pod),
                pinned_here,
                controller_ref(&pod.metadata).and_then(|r| r.block_owner_deletion),
            ]));
        }
        let per_class = rules::by_node_class(per_node, &classes);
        let owned_revisions: Vec<&ControllerRevision> = revisions
            .iter()
            .filter(|r| controller_uid(&r.metadata) == Some(uid(&ds.metadata)))
            .collect();
        let mut numbers: Vec<i64> = owned_revisions
            .iter()
            .map(|r| r.revision.unwrap_or_default())
            .collect();
        numbers.sort_unstable();
        // What each revision records of the template, by number.
        let revision_data: BTreeMap<i64, Value> = owned_revisions
            .iter()
            .map(|r| {
                let mut data = r.data.0.clone();
                without_restart_times(&mut data);
                (r.revision.unwrap_or_default(), data)
            })
            .collect();
        state.insert(
            format!("DaemonSet {name}"),
            json!({
                "status": [status.desired_number_scheduled, status.current_number_scheduled,
                           status.number_misscheduled, status.number_ready, status.updated_number_scheduled,
                           status.number_available, status.number_unavailable],
                "observedGeneration": [status.observed_generation, ds.metadata.generation],
                "collisionCount": status.collision_count,
                "podsPerNodeClass": per_class,
                "revisions": numbers,
                "revisionData": revision_data,
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

/// A pod's tolerations, as `key:operator:value:effect`, sorted (a daemon pod's are its controller's).
fn tolerations_of(pod: &Pod) -> Value {
    let mut list: Vec<String> = pod
        .spec
        .as_ref()
        .and_then(|s| s.tolerations.as_ref())
        .into_iter()
        .flatten()
        .map(|t| {
            format!(
                "{}:{}:{}:{}",
                t.key.as_deref().unwrap_or_default(),
                t.operator.as_deref().unwrap_or_default(),
                t.value.as_deref().unwrap_or_default(),
                t.effect.as_deref().unwrap_or_default()
            )
        })
        .collect();
    list.sort();
    json!(list)
}

/// The node a daemon pod's required node affinity pins it to (`matchFields` on `metadata.name`).
fn pinned_node(pod: &Pod) -> Option<String> {
    pod.spec
        .as_ref()?
        .affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()?
        .node_selector_terms
        .iter()
        .flat_map(|t| t.match_fields.iter().flatten())
        .find(|f| f.key == "metadata.name" && f.operator == "In")
        .and_then(|f| f.values.as_ref()?.first().cloned())
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

/// The writes a workload controller makes (creates, updates, patches, deletes of Deployments,
/// ReplicaSets, DaemonSets, ControllerRevisions and their status) in an API server's `/metrics` text:
/// the sum of `apiserver_request_total` over the `apps` group's write verbs. Only controllers write
/// those while no operation runs (the operations' own writes happen before their step is counted).
pub(crate) fn workload_writes(metrics: &str) -> u64 {
    const WRITES: [&str; 5] = ["POST", "PUT", "PATCH", "DELETE", "APPLY"];
    let mut sum = 0_u64;
    for line in metrics.lines() {
        let Some(rest) = line.strip_prefix("apiserver_request_total{") else {
            continue;
        };
        let Some((labels, value)) = rest.rsplit_once("} ") else {
            continue;
        };
        let label = |name: &str| {
            labels
                .split(',')
                .find_map(|pair| pair.strip_prefix(&format!("{name}=\"")))
                .map(|v| v.trim_end_matches('"'))
        };
        if label("group") == Some("apps") && label("verb").is_some_and(|v| WRITES.contains(&v)) {
            // Prometheus writes counters as floats; they hold whole numbers.
            let n = value.trim().parse::<f64>().unwrap_or(0.0);
            if n.is_finite() && n >= 0.0 {
                sum = sum.saturating_add(n as u64);
            }
        }
    }
    sum
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

    #[test]
    fn workload_writes_sum_the_apps_groups_writes_only() {
        let metrics = r#"# HELP apiserver_request_total Counter of apiserver requests
apiserver_request_total{code="200",component="apiserver",dry_run="",group="apps",resource="replicasets",scope="resource",subresource="status",verb="PUT",version="v1"} 12
apiserver_request_total{code="201",component="apiserver",dry_run="",group="apps",resource="replicasets",scope="resource",subresource="",verb="POST",version="v1"} 3
apiserver_request_total{code="409",component="apiserver",dry_run="",group="apps",resource="deployments",scope="resource",subresource="status",verb="PUT",version="v1"} 1
apiserver_request_total{code="200",component="apiserver",dry_run="",group="apps",resource="deployments",scope="resource",subresource="",verb="LIST",version="v1"} 40
apiserver_request_total{code="200",component="apiserver",dry_run="",group="apps",resource="daemonsets",scope="resource",subresource="",verb="WATCH",version="v1"} 7
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1"} 9
apiserver_request_total_other{group="apps",verb="PUT"} 5
"#;
        assert_eq!(workload_writes(metrics), 16);
        assert_eq!(workload_writes(""), 0);
    }

    #[test]
    fn a_rollout_above_its_surge_or_a_pod_with_two_controllers_breaks_an_invariant() {
        let deployment: Deployment = serde_json::from_value(json!({
            "metadata": {"name": "web", "uid": "d1", "generation": 2},
            "spec": {"replicas": 4, "selector": {}, "template": {},
                     "strategy": {"type": "RollingUpdate",
                                  "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 0}}},
            "status": {"observedGeneration": 2},
        }))
        .unwrap();
        let rs = |name: &str, replicas: i32| -> ReplicaSet {
            serde_json::from_value(json!({
                "metadata": {"name": name, "ownerReferences": [{"apiVersion": "apps/v1",
                    "kind": "Deployment", "name": "web", "uid": "d1", "controller": true}]},
                "spec": {"replicas": replicas, "selector": {}},
            }))
            .unwrap()
        };
        // 25 % of 4 is 1: five replicas are within the bound, six are not.
        assert!(
            broken_invariants(
                std::slice::from_ref(&deployment),
                &[rs("a", 3), rs("b", 2)],
                &[],
                &[]
            )
            .is_empty()
        );
        let broken = broken_invariants(
            std::slice::from_ref(&deployment),
            &[rs("a", 3), rs("b", 3)],
            &[],
            &[],
        );
        assert_eq!(broken.len(), 1, "{broken:?}");
        // Not judged before the controller observed the generation (a scale it has not acted on yet).
        let mut unobserved = deployment;
        unobserved.metadata.generation = Some(3);
        assert!(broken_invariants(&[unobserved], &[rs("a", 3), rs("b", 3)], &[], &[]).is_empty());
        let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p", "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "a", "uid": "1", "controller": true},
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "b", "uid": "2", "controller": true},
        ]}}))
        .unwrap();
        assert_eq!(broken_invariants(&[], &[], &[], &[pod]).len(), 1);
        // Daemon pods per node: two on one node only while the DaemonSet may surge; a relabelled pod
        // (adopted back beside its replacement) is not counted.
        let ds = |surge: i32| -> DaemonSet {
            serde_json::from_value(json!({
                "metadata": {"name": "agent", "uid": "ds1"},
                "spec": {"selector": {}, "template": {},
                    "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": surge}}},
            }))
            .unwrap()
        };
        let daemon_pod = |name: &str, labels: Value| -> Pod {
            serde_json::from_value(json!({"metadata": {"name": name, "labels": labels,
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent",
                    "uid": "ds1", "controller": true}]},
                "spec": {"nodeName": "n1", "containers": []}}))
            .unwrap()
        };
        let two = [daemon_pod("a", json!({})), daemon_pod("b", json!({}))];
        assert_eq!(broken_invariants(&[], &[], &[ds(0)], &two).len(), 1);
        assert!(broken_invariants(&[], &[], &[ds(1)], &two).is_empty());
        let adopted_back = [
            daemon_pod("a", json!({})),
            daemon_pod("b", json!({RELABELLED: "yes"})),
        ];
        assert!(broken_invariants(&[], &[], &[ds(0)], &adopted_back).is_empty());
        assert_eq!(scaled_up(&IntOrString::String("30%".into()), 5), 2);
        assert_eq!(scaled_up(&IntOrString::Int(2), 5), 2);
    }
}
