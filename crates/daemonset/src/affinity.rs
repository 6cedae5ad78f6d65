//! The pod a DaemonSet creates for a node, and the node an existing daemon pod belongs to (upstream
//! `util.CreatePodTemplate`, `util.ReplaceDaemonSetPodNodeNameNodeAffinity`, `util.GetTargetNodeName`).
//!
//! Daemon pods are not bound by the controller: it pins them to their node with a required node affinity
//! `matchFields metadata.name In [node]` and lets the scheduler bind them. So a pod's node is its
//! `spec.nodeName` once scheduled, and that affinity term before.

use k8s_openapi::api::core::v1::{
    Affinity, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, PodSpec,
    PodTemplateSpec,
};
use kube::api::ObjectMeta;
use mini_kcm_runtime::pods::cached::CachedPod;

use crate::placement::add_or_update_daemon_pod_tolerations;
use crate::{REVISION_HASH_LABEL, TEMPLATE_GENERATION_LABEL};

const OBJECT_NAME_FIELD: &str = "metadata.name";

/// The required-affinity term pinning a pod to `node_name`.
fn node_name_term(node_name: &str) -> NodeSelectorTerm {
    NodeSelectorTerm {
        match_expressions: None,
        match_fields: Some(vec![NodeSelectorRequirement {
            key: OBJECT_NAME_FIELD.to_owned(),
            operator: "In".to_owned(),
            values: Some(vec![node_name.to_owned()]),
        }]),
    }
}

/// Pins a pod to `node_name`: the required node affinity becomes exactly one term `matchFields metadata.name
/// In [node_name]`, replacing whatever required terms were there (they were already satisfied by the node,
/// which is why it was chosen). Preferred node affinity and pod (anti-)affinity are kept as they are.
pub(crate) fn replace_daemon_set_pod_node_name_node_affinity(
    affinity: Option<Affinity>,
    node_name: &str,
) -> Affinity {
    let mut affinity = affinity.unwrap_or_default();
    let node_affinity = affinity
        .node_affinity
        .get_or_insert_with(NodeAffinity::default);
    node_affinity.required_during_scheduling_ignored_during_execution = Some(NodeSelector {
        node_selector_terms: vec![node_name_term(node_name)],
    });
    affinity
}

/// Why a pod's node could not be told.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum TargetNodeError {
    /// Neither `spec.nodeName` nor a required node affinity.
    #[error(
        "no spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution for pod {pod}"
    )]
    NoRequiredNodeAffinity { pod: String },
    /// A required node affinity without terms.
    #[error("no nodeSelectorTerms in requiredDuringSchedulingIgnoredDuringExecution of pod {pod}")]
    NoNodeSelectorTerms { pod: String },
    /// The first `metadata.name In` requirement lists zero or several nodes.
    #[error("the matchFields value of '{OBJECT_NAME_FIELD}' is not unique for pod {pod}")]
    NodeNameNotUnique { pod: String },
    /// No term has a `metadata.name In` requirement.
    #[error("no node name found for pod {pod}")]
    NoNodeName { pod: String },
}

/// The node a daemon pod is for: `spec.nodeName` if scheduled, else the value of the first `matchFields
/// metadata.name In` requirement of its required node affinity (which must have exactly one value). Pods for
/// which this fails are ignored by the controller.
pub(crate) fn get_target_node_name(pod: &CachedPod) -> Result<&str, TargetNodeError> {
    let spec = pod.spec.as_ref();
    if let Some(node_name) = spec
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty())
    {
        return Ok(node_name);
    }
    let pod_key = || {
        format!(
            "{}/{}",
            pod.metadata.namespace.as_deref().unwrap_or_default(),
            pod.metadata.name.as_deref().unwrap_or_default()
        )
    };
    let Some(required) = spec
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|na| {
            na.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
    else {
        return Err(TargetNodeError::NoRequiredNodeAffinity { pod: pod_key() });
    };
    if required.node_selector_terms.is_empty() {
        return Err(TargetNodeError::NoNodeSelectorTerms { pod: pod_key() });
    }
    let first_name_requirement = required
        .node_selector_terms
        .iter()
        .flat_map(|term| term.match_fields.iter().flatten())
        .find(|r| r.key == OBJECT_NAME_FIELD && r.operator == "In");
    match first_name_requirement.map(|r| r.values.as_deref().unwrap_or_default()) {
        Some([node_name]) => Ok(node_name),
        Some(_) => Err(TargetNodeError::NodeNameNotUnique { pod: pod_key() }),
        None => Err(TargetNodeError::NoNodeName { pod: pod_key() }),
    }
}

/// The template of every pod the DaemonSet creates in this sync: the DaemonSet's template plus the daemon
/// default tolerations, the label `pod-template-generation` (when the DaemonSet's generation annotation
/// parsed) and the label `controller-revision-hash` (when `hash` is non-empty).
pub(crate) fn create_pod_template(
    template: &PodTemplateSpec,
    generation: Option<i64>,
    hash: &str,
) -> PodTemplateSpec {
    let mut template = template.clone();
    add_or_update_daemon_pod_tolerations(template.spec.get_or_insert_with(PodSpec::default));
    let labels = template
        .metadata
        .get_or_insert_with(ObjectMeta::default)
        .labels
        .get_or_insert_with(Default::default);
    if let Some(generation) = generation {
        labels.insert(TEMPLATE_GENERATION_LABEL.to_owned(), generation.to_string());
    }
    if !hash.is_empty() {
        labels.insert(REVISION_HASH_LABEL.to_owned(), hash.to_owned());
    }
    template
}

/// The template of the pod for one node: a [`create_pod_template`] result pinned to `node_name`.
pub(crate) fn pod_template_for_node(
    template: &PodTemplateSpec,
    node_name: &str,
) -> PodTemplateSpec {
    let mut template = template.clone();
    let spec = template.spec.get_or_insert_with(PodSpec::default);
    spec.affinity = Some(replace_daemon_set_pod_node_name_node_affinity(
        spec.affinity.take(),
        node_name,
    ));
    template
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Pod, PodAffinity, PreferredSchedulingTerm};

    fn req(key: &str, op: &str, values: &[&str]) -> NodeSelectorRequirement {
        NodeSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: Some(values.iter().map(|v| v.to_string()).collect()),
        }
    }

    fn required(terms: Vec<NodeSelectorTerm>) -> Affinity {
        Affinity {
            node_affinity: Some(NodeAffinity {
                required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                    node_selector_terms: terms,
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn expressions(reqs: Vec<NodeSelectorRequirement>) -> NodeSelectorTerm {
        NodeSelectorTerm {
            match_expressions: Some(reqs),
            match_fields: None,
        }
    }

    fn fields(reqs: Vec<NodeSelectorRequirement>) -> NodeSelectorTerm {
        NodeSelectorTerm {
            match_expressions: None,
            match_fields: Some(reqs),
        }
    }

    fn preferred() -> Vec<PreferredSchedulingTerm> {
        vec![PreferredSchedulingTerm {
            weight: 0,
            preference: expressions(vec![req("kubernetes.io/hostname", "In", &["host_1"])]),
        }]
    }

    /// Mirrors upstream `TestReplaceDaemonSetPodNodeNameNodeAffinity`.
    #[test]
    fn replace_daemon_set_pod_node_name_node_affinity_table() {
        let pinned = required(vec![fields(vec![req("metadata.name", "In", &["host_1"])])]);
        let cases: Vec<(Option<Affinity>, Affinity)> = vec![
            (None, pinned.clone()),
            (
                Some(required(vec![expressions(vec![req(
                    "kubernetes.io/hostname",
                    "In",
                    &["host_1"],
                )])])),
                pinned.clone(),
            ),
            (
                Some(Affinity {
                    node_affinity: Some(NodeAffinity {
                        preferred_during_scheduling_ignored_during_execution: Some(preferred()),
                        required_during_scheduling_ignored_during_execution: None,
                    }),
                    ..Default::default()
                }),
                Affinity {
                    node_affinity: Some(NodeAffinity {
                        preferred_during_scheduling_ignored_during_execution: Some(preferred()),
                        ..pinned.node_affinity.clone().unwrap()
                    }),
                    ..Default::default()
                },
            ),
            (
                Some(required(vec![fields(vec![req(
                    "metadata.name",
                    "In",
                    &["host_1", "host_2"],
                )])])),
                pinned.clone(),
            ),
            (
                Some(required(vec![
                    expressions(vec![req("hostname", "In", &["host_1"])]),
                    fields(vec![req("metadata.name", "In", &["host_2"])]),
                ])),
                pinned.clone(),
            ),
            (
                Some(required(vec![fields(vec![req(
                    "metadata.name",
                    "NotIn",
                    &["host_2"],
                )])])),
                pinned.clone(),
            ),
            (
                Some(required(vec![fields(vec![req(
                    "metadata.foo",
                    "In",
                    &["bar"],
                )])])),
                pinned.clone(),
            ),
            (
                Some(Affinity {
                    pod_affinity: Some(PodAffinity::default()),
                    ..Default::default()
                }),
                Affinity {
                    pod_affinity: Some(PodAffinity::default()),
                    ..pinned.clone()
                },
            ),
        ];
        for (i, (input, expected)) in cases.into_iter().enumerate() {
            assert_eq!(
                replace_daemon_set_pod_node_name_node_affinity(input, "host_1"),
                expected,
                "case {i}"
            );
        }
    }

    /// Mirrors upstream `TestGetTargetNodeName`.
    #[test]
    fn get_target_node_name_table() {
        let pod = |name: &str, spec: PodSpec| {
            CachedPod::from(Pod {
                metadata: ObjectMeta {
                    name: Some(name.into()),
                    namespace: Some("default".into()),
                    ..Default::default()
                },
                spec: Some(spec),
                status: None,
            })
        };
        let with_affinity = |a: Affinity| PodSpec {
            affinity: Some(a),
            ..Default::default()
        };
        let pod1 = pod(
            "pod1",
            PodSpec {
                node_name: Some("node-1".into()),
                ..Default::default()
            },
        );
        let pod2 = pod(
            "pod2",
            with_affinity(required(vec![fields(vec![req(
                "metadata.name",
                "In",
                &["node-1"],
            )])])),
        );
        let pod3 = pod(
            "pod3",
            with_affinity(required(vec![fields(vec![req(
                "metadata.name",
                "In",
                &["node-1", "node-2"],
            )])])),
        );
        let pod4 = pod("pod4", PodSpec::default());
        let pod5 = pod("pod5", with_affinity(required(vec![])));
        let pod6 = pod(
            "pod6",
            with_affinity(required(vec![
                expressions(vec![req("zone", "In", &["a"])]),
                fields(vec![req("metadata.name", "NotIn", &["node-1"])]),
            ])),
        );
        assert_eq!(get_target_node_name(&pod1), Ok("node-1"));
        assert_eq!(get_target_node_name(&pod2), Ok("node-1"));
        assert_eq!(
            get_target_node_name(&pod3),
            Err(TargetNodeError::NodeNameNotUnique {
                pod: "default/pod3".into()
            })
        );
        assert_eq!(
            get_target_node_name(&pod4).map_err(|e| e.to_string()),
            Err("no spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution for pod default/pod4".into())
        );
        assert!(matches!(
            get_target_node_name(&pod5),
            Err(TargetNodeError::NoNodeSelectorTerms { .. })
        ));
        assert!(matches!(
            get_target_node_name(&pod6),
            Err(TargetNodeError::NoNodeName { .. })
        ));
        // A pod pinned by the controller reads back its node.
        let pinned = pod(
            "pod7",
            with_affinity(replace_daemon_set_pod_node_name_node_affinity(
                None, "node-9",
            )),
        );
        assert_eq!(get_target_node_name(&pinned), Ok("node-9"));
    }

    /// Mirrors upstream `TestCreatePodTemplate`.
    #[test]
    fn create_pod_template_table() {
        for (generation, hash, expect_hash_label) in [(1_i64, "", false), (2, "3242341807", true)] {
            let template = create_pod_template(&PodTemplateSpec::default(), Some(generation), hash);
            let labels = template.metadata.unwrap().labels.unwrap();
            assert_eq!(
                labels.get(TEMPLATE_GENERATION_LABEL),
                Some(&generation.to_string())
            );
            assert_eq!(
                labels.get(REVISION_HASH_LABEL).map(String::as_str),
                expect_hash_label.then_some(hash)
            );
            // Default tolerations are always added.
            assert_eq!(template.spec.unwrap().tolerations.map(|t| t.len()), Some(6));
        }
        let no_generation = create_pod_template(&PodTemplateSpec::default(), None, "");
        assert_eq!(
            no_generation.metadata.and_then(|m| m.labels),
            Some(Default::default())
        );
    }

    #[test]
    fn pod_template_for_node_pins_node() {
        let base = create_pod_template(&PodTemplateSpec::default(), None, "abc");
        let for_node = pod_template_for_node(&base, "node-3");
        let pod = CachedPod::from(Pod {
            metadata: Default::default(),
            spec: for_node.spec,
            status: None,
        });
        assert_eq!(get_target_node_name(&pod), Ok("node-3"));
        assert_eq!(
            base.spec.and_then(|s| s.affinity),
            None,
            "the shared template is untouched"
        );
    }
}
