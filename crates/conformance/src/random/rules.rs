//! The deliberate differences between mini-kcm's controllers and upstream's, as named rules applied to
//! both planes alike, each with the doc that explains the difference. They are the only normalisation
//! beyond what any two planes differ in (generated names, UIDs, times, resourceVersions), and they are
//! narrow: a new divergence cannot hide behind an old one.

use k8s_openapi::api::apps::v1::ReplicaSet;

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
pub(crate) const RULES: [Rule; 2] = [
    Rule {
        name: "pod-template-hash",
        doc: "docs/deployment.md#deliberate-differences-from-upstream",
        normalisation: "mini-kcm hashes a template differently, and the hash ends the name of a \
            Deployment's ReplicaSet: a ReplicaSet left without its Deployment (deleted with \
            --cascade=orphan) is compared as `<stem>-<pod-template-hash of IMAGE>`",
    },
    Rule {
        name: "daemonset-recount-on-node-verdict",
        doc: "docs/daemonset.md#deliberate-differences-from-upstream",
        normalisation: "mini-kcm recounts a DaemonSet when a node's verdict changes, upstream only when \
            a pod must be created or deleted: after each node operation both planes' DaemonSets are \
            annotated (no spec change), which makes upstream recount too",
    },
];

/// `name` without the `-<pod-template-hash>` a Deployment's ReplicaSet carries.
pub(crate) fn without_template_hash(rs: &ReplicaSet, name: &str) -> String {
    let hash = rs
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("pod-template-hash"));
    // Without its hash, a name no longer tells a Deployment's ReplicaSets apart: the image does (the
    // operations change templates only by their image).
    let image = rs
        .spec
        .as_ref()
        .and_then(|s| s.template.as_ref())
        .and_then(|t| t.spec.as_ref())
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.clone())
        .unwrap_or_default();
    match hash.and_then(|h| name.strip_suffix(&format!("-{h}"))) {
        Some(stem) => format!("{stem}-<pod-template-hash of {image}>"),
        None => name.to_string(),
    }
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
    fn a_replica_set_name_loses_its_template_hash() {
        let mut rs = ReplicaSet::default();
        rs.metadata.labels =
            Some([("pod-template-hash".to_string(), "6f8b59f68d".to_string())].into());
        rs.spec = Some(k8s_openapi::api::apps::v1::ReplicaSetSpec {
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
        });
        assert_eq!(
            without_template_hash(&rs, "web1-6f8b59f68d"),
            "web1-<pod-template-hash of pause:3.9>"
        );
        assert_eq!(without_template_hash(&rs, "rs1"), "rs1");
    }
}
