//! The deliberate differences between mini-kcm's controllers and upstream's, as named rules applied to
//! both planes alike, each with the doc that explains the difference. They are the only normalisation
//! beyond what any two planes differ in (generated names, UIDs, times, resourceVersions), and they are
//! narrow: a new divergence cannot hide behind an old one.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Node, PodSpec, Taint, Toleration};
use serde_json::{Value, json};

/// A deliberate difference, as a report names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rule {
    pub(crate) name: &'static str,
    /// Where it is explained.
    pub(crate) doc: &'static str,
    /// What the comparison does about it.
    pub(crate) normalisation: &'static str,
}

/// Every rule in force; a report lists them.
pub(crate) const RULES: [Rule; 4] = [
    Rule {
        name: "pod-template-hash",
        doc: "docs/deployment.md#deliberate-differences-from-upstream",
        normalisation: "mini-kcm hashes a template differently, and the hash ends the name of a \
            Deployment's ReplicaSet: a ReplicaSet left without its Deployment (deleted with \
            --cascade=orphan) is compared as `<stem>-<pod-template-hash of IMAGE, revision N>`",
    },
    Rule {
        name: "daemonset-recount-on-node-verdict",
        doc: "docs/daemonset.md#deliberate-differences-from-upstream",
        normalisation: "mini-kcm recounts a DaemonSet when a node's verdict changes, upstream only when \
            a pod must be created or deleted: after each node operation upstream's DaemonSets alone \
            are annotated (no spec change), which makes upstream recount; mini-kcm's are never \
            touched, so its own node handling must reach the same state",
    },
    Rule {
        name: "daemonset-node-choice",
        doc: "docs/daemonset.md#deliberate-differences-from-upstream",
        normalisation: "when a rolling update may surge or replace on only some of the nodes, \
            upstream picks them in Go map order (at random), mini-kcm in name order: daemon pods are \
            compared per class of node (whether the DaemonSet's nodeSelector selects it, which of \
            its taints the template does not tolerate), not per node name",
    },
    Rule {
        name: "deployment-lost-progress-write",
        doc: "docs/deployment.md#deliberate-differences-from-upstream",
        normalisation: "upstream's Deployment controller has no read-your-own-writes: its status write \
            right after creating a ReplicaSet (Progressing NewReplicaSetCreated) can fail on a \
            conflict, and then the condition keeps NewReplicaSetAvailable from the rollout before for \
            as long as replicas equal updatedReplicas; where upstream says NewReplicaSetAvailable in that \
            state and mini-kcm ReplicaSetUpdated or NewReplicaSetCreated, the reasons count as equal; \
            and once that rollout completes upstream keeps the message of the rollout before (its \
            SetDeploymentCondition returns early when status and reason are unchanged, \
            deployment_util.go:130 in v1.37.2), so where upstream's NewReplicaSetAvailable message names \
            a ReplicaSet that is no longer its new one and mini-kcm's names its new one, the messages \
            count as equal",
    },
];

/// `name` without the `-<pod-template-hash>` a Deployment's ReplicaSet carries.
pub(crate) fn without_template_hash(rs: &ReplicaSet, name: &str) -> String {
    let hash = rs
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("pod-template-hash"));
    // Without its hash, a name no longer tells a Deployment's ReplicaSets apart: the image and the
    // revision do (the operations change templates by their image, or restart them: two ReplicaSets of
    // one image then differ in their revision, seed 7009).
    let revision = rs
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("deployment.kubernetes.io/revision"))
        .map(|r| format!(", revision {r}"))
        .unwrap_or_default();
    let image = rs
        .spec
        .template
        .as_ref()
        .and_then(|t| t.spec.as_ref())
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.clone())
        .unwrap_or_default();
    match hash.and_then(|h| name.strip_suffix(&format!("-{h}"))) {
        Some(stem) => format!("{stem}-<pod-template-hash of {image}{revision}>"),
        None => name.to_string(),
    }
}

/// A node's class to the pods of `spec`, for the rule "daemonset-node-choice": whether its labels
/// satisfy the spec's nodeSelector, and which of its taints the spec does not tolerate (the sequences'
/// own, `random`). Nodes of one class are interchangeable to a DaemonSet with that template.
pub(crate) fn node_class(node: &Node, spec: Option<&PodSpec>) -> String {
    let labels = node.metadata.labels.clone().unwrap_or_default();
    let selected = spec
        .and_then(|s| s.node_selector.as_ref())
        .is_none_or(|wanted| wanted.iter().all(|(k, v)| labels.get(k) == Some(v)));
    let tolerations = spec.and_then(|s| s.tolerations.clone()).unwrap_or_default();
    let mut untolerated: Vec<String> = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default()
        .into_iter()
        .filter(|t| t.key == "random")
        .filter(|t| !tolerations.iter().any(|tol| tolerates(tol, t)))
        .map(|t| t.effect)
        .collect();
    untolerated.sort();
    format!(
        "selected {selected}, untolerated taints [{}]",
        untolerated.join(",")
    )
}

/// Whether `toleration` tolerates `taint` (the API's rule, for the tolerations the sequences write).
fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    let key = toleration.key.as_deref().unwrap_or_default();
    let exists = toleration.operator.as_deref() == Some("Exists");
    let key_matches = key == taint.key || (key.is_empty() && exists);
    let effect_matches = toleration
        .effect
        .as_deref()
        .is_none_or(|e| e.is_empty() || e == taint.effect);
    let value_matches = exists || toleration.value == taint.value;
    key_matches && effect_matches && value_matches
}

/// Each node's name with its class to the pods of `spec`.
pub(crate) fn node_classes(nodes: &[Node], spec: Option<&PodSpec>) -> BTreeMap<String, String> {
    nodes
        .iter()
        .map(|n| {
            (
                n.metadata.name.clone().unwrap_or_default(),
                node_class(n, spec),
            )
        })
        .collect()
}

/// The class of the node of a pod whose node is gone.
pub(crate) const NO_SUCH_NODE: &str = "(no such node)";

/// Daemon pods per node (each node's pods sorted) regrouped per node class: per class, the nodes'
/// lists in a sorted order. Pods on a node that is no longer there go under [`NO_SUCH_NODE`].
pub(crate) fn by_node_class(
    per_node: BTreeMap<String, Vec<Value>>,
    classes: &BTreeMap<String, String>,
) -> Value {
    let mut grouped: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for (node, mut pods) in per_node {
        pods.sort_by_key(|v| v.to_string());
        let class = classes
            .get(&node)
            .cloned()
            .unwrap_or_else(|| NO_SUCH_NODE.to_string());
        grouped.entry(class).or_default().push(json!(pods));
    }
    for lists in grouped.values_mut() {
        lists.sort_by_key(|v| v.to_string());
    }
    json!(grouped)
}

/// The rule "deployment-lost-progress-write": for each Deployment whose Progressing reason is
/// NewReplicaSetAvailable on upstream while its replicas equal its updated replicas (upstream then
/// never re-judges the condition), mini-kcm's ReplicaSetUpdated or NewReplicaSetCreated is taken as
/// that reason, as long as the rollout is incomplete on mini-kcm's plane (fewer available replicas than
/// `spec.replicas`): once complete, mini-kcm must say NewReplicaSetAvailable itself. Only the reason is
/// forgiven (with its message): the condition's status and everything else still count.
pub(crate) fn forgive_lost_progress_write(mini: &mut Value, upstream: &Value) {
    let Some(objects) = mini.as_object_mut() else {
        return;
    };
    for (key, view) in objects.iter_mut() {
        if !key.starts_with("Deployment ") {
            continue;
        }
        let Some(theirs) = upstream.get(key) else {
            continue;
        };
        let status = &theirs["status"];
        let replicas_all_updated = !status[0].is_null() && status[0] == status[1];
        let upstream_reason = progressing(theirs);
        // The view's status is [replicas, updated, ready, available, unavailable, terminating].
        let available = view["status"][3].as_i64().unwrap_or(0);
        let rollout_incomplete = available < view["replicas"].as_i64().unwrap_or(0);
        let Some(conditions) = view["conditions"].as_array_mut() else {
            continue;
        };
        let mut forgiven = false;
        for condition in conditions.iter_mut() {
            let is_progressing = condition[0] == "Progressing" && condition[1] == "True";
            let mini_reason = condition[2].as_str().unwrap_or_default();
            if is_progressing
                && replicas_all_updated
                && rollout_incomplete
                && upstream_reason == Some(("True", "NewReplicaSetAvailable"))
                && matches!(mini_reason, "ReplicaSetUpdated" | "NewReplicaSetCreated")
            {
                condition[2] = json!("NewReplicaSetAvailable");
                forgiven = true;
            }
        }
        // A completed rollout whose Progressing message upstream kept from the rollout before.
        let completed_on_both = progressing(view) == Some(("True", "NewReplicaSetAvailable"))
            && upstream_reason == Some(("True", "NewReplicaSetAvailable"));
        if completed_on_both
            && theirs["progressingNamesOld"] == json!(true)
            && view["progressingNamesOld"] == json!(false)
        {
            view["progressingNamesOld"] = json!(true);
            forgiven = true;
        }
        // The message goes with the reason: upstream's, for the condition whose reason was forgiven.
        if forgiven {
            let theirs = theirs["messages"]
                .as_array()
                .and_then(|m| m.iter().find(|m| m[0] == "Progressing"))
                .cloned();
            let messages = view.get_mut("messages").and_then(Value::as_array_mut);
            if let (Some(theirs), Some(messages)) = (theirs, messages) {
                for message in messages.iter_mut().filter(|m| m[0] == "Progressing") {
                    *message = theirs.clone();
                }
            }
        }
    }
}

/// A Deployment view's Progressing (status, reason).
fn progressing(view: &Value) -> Option<(&str, &str)> {
    view["conditions"]
        .as_array()?
        .iter()
        .find(|c| c[0] == "Progressing")
        .map(|c| {
            (
                c[1].as_str().unwrap_or_default(),
                c[2].as_str().unwrap_or_default(),
            )
        })
}

/// The `kubectl` arguments of the rule "daemonset-recount-on-node-verdict", after step `step`.
pub(crate) fn recount_daemon_sets_args(step: usize) -> Vec<String> {
    ["annotate", "daemonsets", "--all", "--overwrite"]
        .iter()
        .map(|a| (*a).to_string())
        .chain([format!("random/recount={step}")])
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn daemon_pods_on_interchangeable_nodes_compare_equal_whichever_node_got_them() {
        let classes: BTreeMap<String, String> = [
            ("n1".to_string(), "plain".to_string()),
            ("n2".to_string(), "plain".to_string()),
            ("n3".to_string(), "tainted".to_string()),
        ]
        .into();
        let surged = json!(["new", false]);
        let old = json!(["old", true]);
        let mini = BTreeMap::from([
            ("n1".to_string(), vec![old.clone(), surged.clone()]),
            ("n2".to_string(), vec![old.clone()]),
            ("n3".to_string(), vec![old.clone()]),
        ]);
        let upstream = BTreeMap::from([
            ("n1".to_string(), vec![old.clone()]),
            ("n2".to_string(), vec![surged.clone(), old.clone()]),
            ("n3".to_string(), vec![old.clone()]),
        ]);
        assert_eq!(
            by_node_class(mini.clone(), &classes),
            by_node_class(upstream, &classes)
        );
        // A surge on a node of another class is still told apart.
        let elsewhere = BTreeMap::from([
            ("n1".to_string(), vec![old.clone()]),
            ("n2".to_string(), vec![old.clone()]),
            ("n3".to_string(), vec![old.clone(), surged]),
        ]);
        assert_ne!(
            by_node_class(mini, &classes),
            by_node_class(elsewhere, &classes)
        );
    }

    #[test]
    fn a_lost_progress_write_is_forgiven_only_where_upstream_never_re_judges() {
        let view = |reason: &str, status: Value| {
            json!({"Deployment web": {
                "replicas": 2,
                "status": status,
                "conditions": [["Available", "False", "MinimumReplicasUnavailable"],
                               ["Progressing", "True", reason]],
            }})
        };
        let upstream = view("NewReplicaSetAvailable", json!([2, 2, null, null, 2, 0]));
        let mut mini = view("ReplicaSetUpdated", json!([2, 2, null, null, 2, 0]));
        forgive_lost_progress_write(&mut mini, &upstream);
        assert_eq!(mini, upstream);
        // Mid-rollout (replicas above updated) upstream re-judges: a different reason is a divergence.
        let upstream = view("NewReplicaSetAvailable", json!([3, 1, 2, 2, 1, 0]));
        let mut mini = view("ReplicaSetUpdated", json!([3, 1, 2, 2, 1, 0]));
        forgive_lost_progress_write(&mut mini, &upstream);
        assert_ne!(mini, upstream);
        // A complete rollout (every replica available) is never forgiven: mini-kcm must say so itself.
        let upstream = view("NewReplicaSetAvailable", json!([2, 2, 2, 2, null, 0]));
        let mut mini = view("ReplicaSetUpdated", json!([2, 2, 2, 2, null, 0]));
        forgive_lost_progress_write(&mut mini, &upstream);
        assert_ne!(mini, upstream);
        // The other way round (mini stuck on NewReplicaSetAvailable) is never forgiven.
        let upstream = view("ReplicaSetUpdated", json!([2, 2, null, null, 2, 0]));
        let mut mini = view("NewReplicaSetAvailable", json!([2, 2, null, null, 2, 0]));
        forgive_lost_progress_write(&mut mini, &upstream);
        assert_ne!(mini, upstream);
    }

    #[test]
    fn a_completed_rollouts_message_kept_from_the_rollout_before_is_forgiven_on_upstream_only() {
        let view = |names_old: bool, new: &str| {
            json!({"Deployment web": {
                "replicas": 2,
                "status": [2, 2, 2, 2, null, 0],
                "conditions": [["Available", "True", "MinimumReplicasAvailable"],
                               ["Progressing", "True", "NewReplicaSetAvailable"]],
                "messages": [["Progressing", format!("ReplicaSet \"web-<{new}>\" has successfully progressed.")]],
                "progressingNamesOld": names_old,
            }})
        };
        // Seed 7008: upstream names the ReplicaSet of the rollout before, mini-kcm the new one.
        let upstream = view(true, "v1");
        let mut mini = view(false, "v2");
        forgive_lost_progress_write(&mut mini, &upstream);
        assert_eq!(mini, upstream);
        // mini-kcm naming an old ReplicaSet is never forgiven.
        let upstream = view(false, "v2");
        let mut mini = view(true, "v1");
        forgive_lost_progress_write(&mut mini, &upstream);
        assert_ne!(mini, upstream);
        // Nor is any other message difference of a completed rollout.
        let upstream = view(false, "v2");
        let mut mini = view(false, "v3");
        forgive_lost_progress_write(&mut mini, &upstream);
        assert_ne!(mini, upstream);
    }

    #[test]
    fn a_node_class_is_what_the_template_cares_about() {
        let node = |labels: serde_json::Value, taints: serde_json::Value| -> Node {
            serde_json::from_value(json!({
                "metadata": {"name": "n", "labels": labels},
                "spec": {"taints": taints},
            }))
            .unwrap_or_default()
        };
        let plain = node(json!({}), json!([]));
        let labelled = node(json!({"random/agent": "yes"}), json!([]));
        let tainted = node(
            json!({}),
            json!([{"key": "random", "value": "x", "effect": "NoSchedule"}]),
        );
        let spec =
            |s: serde_json::Value| -> PodSpec { serde_json::from_value(s).unwrap_or_default() };
        let anywhere = spec(json!({"containers": []}));
        // A label no selector asks for does not tell nodes apart; an untolerated taint does.
        assert_eq!(
            node_class(&plain, Some(&anywhere)),
            node_class(&labelled, Some(&anywhere))
        );
        assert_ne!(
            node_class(&plain, Some(&anywhere)),
            node_class(&tainted, Some(&anywhere))
        );
        let selective = spec(json!({"containers": [], "nodeSelector": {"random/agent": "yes"}}));
        assert_ne!(
            node_class(&plain, Some(&selective)),
            node_class(&labelled, Some(&selective))
        );
        let tolerant = spec(json!({"containers": [],
            "tolerations": [{"key": "random", "operator": "Exists", "effect": "NoSchedule"}]}));
        assert_eq!(
            node_class(&plain, Some(&tolerant)),
            node_class(&tainted, Some(&tolerant))
        );
    }

    #[test]
    fn a_replica_set_name_loses_its_template_hash() {
        let mut rs = ReplicaSet::default();
        rs.metadata.labels =
            Some([("pod-template-hash".to_string(), "6f8b59f68d".to_string())].into());
        rs.metadata.annotations = Some(
            [(
                "deployment.kubernetes.io/revision".to_string(),
                "2".to_string(),
            )]
            .into(),
        );
        rs.spec = k8s_openapi::api::apps::v1::ReplicaSetSpec {
            template: Some(k8s_openapi::api::core::v1::PodTemplateSpec {
                spec: Some(k8s_openapi::api::core::v1::PodSpec {
                    containers: vec![k8s_openapi::api::core::v1::Container {
                        image: Some("pause:3.9".into()),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(
            without_template_hash(&rs, "web1-6f8b59f68d"),
            "web1-<pod-template-hash of pause:3.9, revision 2>"
        );
        assert_eq!(without_template_hash(&rs, "rs1"), "rs1");
    }
}
