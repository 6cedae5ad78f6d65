//! A Deployment's ReplicaSets: which one is new, which are old or active, and the orders upstream
//! walks them in.
//!
//! The new ReplicaSet is the one whose pod template equals the Deployment's, ignoring the
//! `pod-template-hash` label the controller adds; all others are old. Equality is upstream's semantic
//! equality (an absent list or map equals an empty one), so a ReplicaSet created by another
//! implementation of the controller is recognised as well (its hash may differ, see [`crate::hash`]).

use std::cmp::Ordering;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use serde_json::{Map, Value};

use crate::accessors::{
    creation_timestamp, name, rs_available_replicas, rs_observed_generation, rs_ready_replicas,
    rs_replicas, rs_status_replicas, rs_template, rs_terminating_replicas, same_replica_set,
};
use crate::annotations::{POD_TEMPLATE_HASH_LABEL, revision};
use crate::strategy::saturating_sum;
use crate::{DeploymentObject, ReplicaSetObject};

/// JSON keys of the map-typed fields of a pod template. An empty map there equals an absent one;
/// an empty object under any other key is a struct (e.g. `emptyDir: {}`) and stays significant.
const MAP_FIELDS: [&str; 9] = [
    "labels",
    "annotations",
    "nodeSelector",
    "matchLabels",
    "limits",
    "requests",
    "overhead",
    "volumeAttributes",
    "options",
];

/// Whether two pod templates are equal, ignoring the value (and presence) of the `pod-template-hash`
/// label (upstream's `EqualIgnoreHash`).
///
/// The hash is ignored because the Deployment's template never carries it and because hash values may
/// differ between implementations and versions. Templates are compared as canonical JSON with absent
/// and empty lists/maps identified, like upstream's semantic equality. Quantities are compared as
/// written; the API server normalises them on every write, so both sides are canonical.
pub fn equal_ignore_hash(a: &PodTemplateSpec, b: &PodTemplateSpec) -> bool {
    match (canonical(a), canonical(b)) {
        (Some(x), Some(y)) => x == y,
        _ => false,
    }
}

fn canonical(template: &PodTemplateSpec) -> Option<Value> {
    // Serialised as is and the label dropped from the JSON: cloning the template first would cost
    // as much again, and every Deployment sync compares each of its ReplicaSets' templates.
    let mut value = serde_json::to_value(template).ok()?;
    if let Some(labels) = value
        .pointer_mut("/metadata/labels")
        .and_then(Value::as_object_mut)
    {
        labels.remove(POD_TEMPLATE_HASH_LABEL);
    }
    drop_empty(&mut value);
    Some(value)
}

fn drop_empty(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.values_mut().for_each(drop_empty);
            map.retain(|key, child| !is_empty_collection(key, child));
        }
        Value::Array(items) => items.iter_mut().for_each(drop_empty),
        _ => {}
    }
}

fn is_empty_collection(key: &str, value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Array(items) => items.is_empty(),
        Value::Object(map) => MAP_FIELDS.contains(&key) && Map::is_empty(map),
        _ => false,
    }
}

/// Oldest first by creation timestamp, then by name (upstream's `ReplicaSetsByCreationTimestamp`).
pub(crate) fn cmp_by_creation(a: &ReplicaSetObject, b: &ReplicaSetObject) -> Ordering {
    creation_timestamp(&a.metadata)
        .cmp(&creation_timestamp(&b.metadata))
        .then_with(|| name(&a.metadata).cmp(name(&b.metadata)))
}

/// Largest first; among equal sizes newest first (upstream's `ReplicaSetsBySizeNewer`, used when
/// proportional scaling adds replicas).
pub(crate) fn cmp_by_size_newer(a: &ReplicaSetObject, b: &ReplicaSetObject) -> Ordering {
    rs_replicas(b)
        .cmp(&rs_replicas(a))
        .then_with(|| cmp_by_creation(b, a))
}

/// Largest first; among equal sizes oldest first (upstream's `ReplicaSetsBySizeOlder`, used when
/// proportional scaling removes replicas).
pub(crate) fn cmp_by_size_older(a: &ReplicaSetObject, b: &ReplicaSetObject) -> Ordering {
    rs_replicas(b)
        .cmp(&rs_replicas(a))
        .then_with(|| cmp_by_creation(a, b))
}

/// Lowest revision first; unparsable or equal revisions fall back to creation order (upstream's
/// `ReplicaSetsByRevision`, the order of revision-history cleanup).
pub(crate) fn cmp_by_revision(a: &ReplicaSetObject, b: &ReplicaSetObject) -> Ordering {
    match (revision(&a.metadata), revision(&b.metadata)) {
        (Ok(x), Ok(y)) if x != y => x.cmp(&y),
        _ => cmp_by_creation(a, b),
    }
}

/// Sorts oldest first.
pub(crate) fn sort_by_creation(rss: &mut [&ReplicaSetObject]) {
    rss.sort_by(|a, b| cmp_by_creation(a, b));
}

/// The ReplicaSets with `spec.replicas > 0` (upstream's `FilterActiveReplicaSets`).
pub(crate) fn filter_active<'a>(rss: &[&'a ReplicaSetObject]) -> Vec<&'a ReplicaSetObject> {
    rss.iter()
        .copied()
        .filter(|rs| rs_replicas(rs) > 0)
        .collect()
}

/// The Deployment's new ReplicaSet: the oldest one whose template equals the Deployment's (there can
/// be several after an upgrade changed the hash; choosing the oldest is deterministic).
pub(crate) fn find_new_replica_set<'a>(
    d: &DeploymentObject,
    rss: &[&'a ReplicaSetObject],
) -> Option<&'a ReplicaSetObject> {
    // As `equal_ignore_hash` against each, with the Deployment's side computed once.
    let wanted = canonical(&d.spec.template)?;
    let mut sorted = rss.to_vec();
    sort_by_creation(&mut sorted);
    sorted
        .into_iter()
        .find(|rs| canonical(&rs_template(rs)).is_some_and(|t| t == wanted))
}

/// The Deployment's old ReplicaSets, in input order: first those with `spec.replicas != 0`, then all.
pub(crate) fn find_old_replica_sets<'a>(
    d: &DeploymentObject,
    rss: &[&'a ReplicaSetObject],
) -> (Vec<&'a ReplicaSetObject>, Vec<&'a ReplicaSetObject>) {
    let new_rs = find_new_replica_set(d, rss);
    let all: Vec<&ReplicaSetObject> = rss
        .iter()
        .copied()
        .filter(|rs| !new_rs.is_some_and(|n| same_replica_set(rs, n)))
        .collect();
    let required = all
        .iter()
        .copied()
        .filter(|rs| rs_replicas(rs) != 0)
        .collect();
    (required, all)
}

/// Rollback: makes the ReplicaSet's template the Deployment's, without the `pod-template-hash` label.
pub(crate) fn set_from_replica_set_template(d: &mut DeploymentObject, template: &PodTemplateSpec) {
    let mut template = template.clone();
    if let Some(labels) = template.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
        labels.remove(POD_TEMPLATE_HASH_LABEL);
    }
    d.spec.template = template;
}

/// Σ `spec.replicas` (upstream's `GetReplicaCountForReplicaSets`).
pub(crate) fn get_replica_count_for_replica_sets(rss: &[&ReplicaSetObject]) -> i32 {
    saturating_sum(rss.iter().map(|rs| rs_replicas(rs)))
}

/// Σ `status.replicas`.
pub(crate) fn get_actual_replica_count_for_replica_sets(rss: &[&ReplicaSetObject]) -> i32 {
    saturating_sum(rss.iter().map(|rs| rs_status_replicas(rs)))
}

/// Σ `status.readyReplicas`.
pub(crate) fn get_ready_replica_count_for_replica_sets(rss: &[&ReplicaSetObject]) -> i32 {
    saturating_sum(rss.iter().map(|rs| rs_ready_replicas(rs)))
}

/// Σ `status.availableReplicas`.
pub(crate) fn get_available_replica_count_for_replica_sets(rss: &[&ReplicaSetObject]) -> i32 {
    saturating_sum(rss.iter().map(|rs| rs_available_replicas(rs)))
}

/// Σ `status.terminatingReplicas`, or `None` when a ReplicaSet the ReplicaSet controller has synced
/// does not report it (then the sum is unknown). Never-synced ReplicaSets count as 0.
pub(crate) fn get_terminating_replica_count_for_replica_sets(
    rss: &[&ReplicaSetObject],
) -> Option<i32> {
    let mut total = 0;
    for rs in rss {
        match rs_terminating_replicas(rs) {
            Some(n) => total = saturating_sum([total, n]),
            None if rs_observed_generation(rs) == 0 => {}
            None => return None,
        }
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::core::v1::{EmptyDirVolumeSource, PodSpec, Volume};
    use kube::api::ObjectMeta;

    use super::*;
    use crate::testutil::{deployment, rs, rs_at, rs_for, ts};

    fn template(
        name: &str,
        node: &str,
        annotations: &[(&str, &str)],
        labels: &[(&str, &str)],
    ) -> PodTemplateSpec {
        let map = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        PodTemplateSpec {
            metadata: Some(ObjectMeta {
                name: Some(name.to_string()),
                annotations: Some(map(annotations)),
                labels: Some(map(labels)),
                ..Default::default()
            }),
            spec: Some(PodSpec {
                node_name: Some(node.to_string()),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn equal_ignore_hash_table() {
        // Mirrors upstream TestEqualIgnoreHash (each case also checked in reverse order).
        const H: &str = POD_TEMPLATE_HASH_LABEL;
        let cases = [
            (
                "Same spec, same labels",
                template(
                    "foo",
                    "foo-node",
                    &[],
                    &[(H, "value-1"), ("something", "else")],
                ),
                template(
                    "foo",
                    "foo-node",
                    &[],
                    &[(H, "value-1"), ("something", "else")],
                ),
                true,
            ),
            (
                "Same spec, only pod-template-hash label value is different",
                template(
                    "foo",
                    "foo-node",
                    &[],
                    &[(H, "value-1"), ("something", "else")],
                ),
                template(
                    "foo",
                    "foo-node",
                    &[],
                    &[(H, "value-2"), ("something", "else")],
                ),
                true,
            ),
            (
                "Same spec, the former doesn't have pod-template-hash label",
                template("foo", "foo-node", &[], &[("something", "else")]),
                template(
                    "foo",
                    "foo-node",
                    &[],
                    &[(H, "value-2"), ("something", "else")],
                ),
                true,
            ),
            (
                "Same spec, the label is different, the former doesn't have pod-template-hash label, same number of labels",
                template("foo", "foo-node", &[], &[("something", "else")]),
                template("foo", "foo-node", &[], &[(H, "value-2")]),
                false,
            ),
            (
                "Same spec, the label is different, the latter doesn't have pod-template-hash label, same number of labels",
                template("foo", "foo-node", &[], &[(H, "value-1")]),
                template("foo", "foo-node", &[], &[("something", "else")]),
                false,
            ),
            (
                "Same spec, the label is different, and the pod-template-hash label value is the same",
                template("foo", "foo-node", &[], &[(H, "value-1")]),
                template(
                    "foo",
                    "foo-node",
                    &[],
                    &[(H, "value-1"), ("something", "else")],
                ),
                false,
            ),
            (
                "Different spec, same labels",
                template(
                    "foo",
                    "foo-node",
                    &[("former", "value")],
                    &[(H, "value-1"), ("something", "else")],
                ),
                template(
                    "foo",
                    "foo-node",
                    &[("latter", "value")],
                    &[(H, "value-1"), ("something", "else")],
                ),
                false,
            ),
            (
                "Different spec, different pod-template-hash label value",
                template(
                    "foo-1",
                    "foo-node",
                    &[],
                    &[(H, "value-1"), ("something", "else")],
                ),
                template(
                    "foo-2",
                    "foo-node",
                    &[],
                    &[(H, "value-2"), ("something", "else")],
                ),
                false,
            ),
            (
                "Different spec, the former doesn't have pod-template-hash label",
                template("foo-1", "foo-node-1", &[], &[("something", "else")]),
                template(
                    "foo-2",
                    "foo-node-2",
                    &[],
                    &[(H, "value-2"), ("something", "else")],
                ),
                false,
            ),
            (
                "Different spec, different labels",
                template("foo", "foo-node-1", &[], &[("something", "else")]),
                template("foo", "foo-node-2", &[], &[("nothing", "else")]),
                false,
            ),
        ];
        for (name, a, b, expected) in cases {
            assert_eq!(equal_ignore_hash(&a, &b), expected, "{name}");
            assert_eq!(
                equal_ignore_hash(&b, &a),
                expected,
                "{name} (reverse order)"
            );
        }
    }

    #[test]
    fn equal_ignore_hash_identifies_absent_and_empty_collections() {
        let mut a = template("foo", "n", &[], &[(POD_TEMPLATE_HASH_LABEL, "x")]);
        let mut b = template("foo", "n", &[], &[]);
        b.metadata.as_mut().unwrap().labels = None;
        b.metadata.as_mut().unwrap().annotations = None;
        assert!(equal_ignore_hash(&a, &b));
        a.spec.as_mut().unwrap().volumes = Some(vec![]);
        assert!(equal_ignore_hash(&a, &b));
        // An empty struct is not an absent one.
        a.spec.as_mut().unwrap().volumes = Some(vec![Volume {
            name: "v".into(),
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..Default::default()
        }]);
        b.spec.as_mut().unwrap().volumes = Some(vec![Volume {
            name: "v".into(),
            ..Default::default()
        }]);
        assert!(!equal_ignore_hash(&a, &b));
    }

    #[test]
    fn find_new_replica_set_table() {
        // Mirrors upstream TestFindNewReplicaSet.
        let d = deployment("nginx", 1, 0, 0);
        let mut new_rs = rs_for(&d, "new", 0, Some("hash"));
        new_rs.metadata.creation_timestamp = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(ts("2024-01-01T00:01:00Z")),
        );
        let mut new_dup = rs_for(&d, "new-dup", 0, Some("different-hash"));
        new_dup.metadata.creation_timestamp = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(ts("2024-01-01T00:00:00Z")),
        );
        let mut old_d = deployment("nginx", 1, 0, 0);
        old_d.spec.template.spec.as_mut().unwrap().containers[0].name = "nginx-old-1".into();
        let old_rs = rs_for(&old_d, "old", 0, None);

        let found = |list: &[&ReplicaSetObject]| {
            find_new_replica_set(&d, list).map(|r| r.metadata.name.clone().unwrap())
        };
        assert_eq!(found(&[&new_rs, &old_rs]).as_deref(), Some("new"));
        assert_eq!(
            found(&[&new_rs, &old_rs, &new_dup]).as_deref(),
            Some("new-dup")
        );
        assert_eq!(found(&[&old_rs]), None);
    }

    #[test]
    fn find_old_replica_sets_table() {
        // Mirrors upstream TestFindOldReplicaSets.
        let d = deployment("nginx", 1, 0, 0);
        let mut new_rs = rs_for(&d, "new", 1, Some("hash"));
        new_rs.metadata.creation_timestamp = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(ts("2024-01-01T00:01:00Z")),
        );
        let mut new_dup = rs_for(&d, "new-dup", 0, Some("different-hash"));
        new_dup.metadata.creation_timestamp = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(ts("2024-01-01T00:00:00Z")),
        );
        let mut old_d = deployment("nginx", 1, 0, 0);
        old_d.spec.template.spec.as_mut().unwrap().containers[0].name = "nginx-old-1".into();
        let mut old_rs = rs_for(&old_d, "old", 0, None);
        old_rs.metadata.creation_timestamp = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(ts("2023-12-31T23:59:00Z")),
        );

        let names = |v: Vec<&ReplicaSetObject>| -> Vec<String> {
            let mut v = v;
            sort_by_creation(&mut v);
            v.iter().map(|r| r.metadata.name.clone().unwrap()).collect()
        };
        let run = |list: &[&ReplicaSetObject]| {
            let (required, all) = find_old_replica_sets(&d, list);
            (names(required), names(all))
        };
        assert_eq!(run(&[&new_rs, &old_rs]), (vec![], vec!["old".to_string()]));
        assert_eq!(run(&[&old_rs]), (vec![], vec!["old".to_string()]));
        assert_eq!(
            run(&[&old_rs, &new_rs, &new_dup]),
            (
                vec!["new".to_string()],
                vec!["old".to_string(), "new".to_string()]
            )
        );
        assert_eq!(run(&[&new_rs]), (vec![], vec![]));
    }

    #[test]
    fn size_orders_break_ties_by_age() {
        let older = rs_at("a", 2, "2016-05-20T00:00:00Z");
        let old = rs_at("b", 2, "2016-05-20T01:00:00Z");
        let big = rs_at("c", 5, "2016-05-20T02:00:00Z");
        let mut v = [&older, &big, &old];
        v.sort_by(|a, b| cmp_by_size_newer(a, b));
        assert_eq!(
            v.iter().map(|r| name(&r.metadata)).collect::<Vec<_>>(),
            ["c", "b", "a"]
        );
        v.sort_by(|a, b| cmp_by_size_older(a, b));
        assert_eq!(
            v.iter().map(|r| name(&r.metadata)).collect::<Vec<_>>(),
            ["c", "a", "b"]
        );
    }

    #[test]
    fn rollback_template_drops_the_hash_label() {
        let mut d = deployment("nginx", 1, 0, 0);
        let mut other = deployment("nginx", 1, 0, 0);
        other.spec.template.spec.as_mut().unwrap().containers[0].image = Some("v2".into());
        let target = rs_for(&other, "nginx-old", 0, Some("abc"));
        set_from_replica_set_template(&mut d, target.spec.template.as_ref().unwrap());
        assert_eq!(d.spec.template, other.spec.template);
        assert!(filter_active(&[&target, &rs("x", 1)]).len() == 1);
    }
}
