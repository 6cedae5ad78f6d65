//! ControllerRevisions of a DaemonSet (upstream `update.go`: `getPatch`, `Match`, `snapshot`,
//! `constructHistory`, `dedupCurHistories`, `cleanupHistory`, `maxRevision`).
//!
//! A revision records one pod template. Its `data` is the strategic-merge patch that would restore that
//! template — `{"spec":{"template":{"$patch":"replace",...}}}` — and a revision is the DaemonSet's current
//! one exactly when its data bytes equal the patch computed from the DaemonSet now. Upstream compares bytes,
//! so to recognise (and not duplicate) revisions written by kube-controller-manager, [`revision_data`]
//! reproduces upstream's bytes: the template as Go marshals it, keys sorted, Go string escaping (see
//! `go_json`). Revision data read from the API is re-encoded the same way before comparing, which gives the
//! stored bytes back for any revision upstream (or this crate) wrote.
//!
//! Names are `<daemonset>-<hash>`. Upstream hashes the Go struct dump of the template with FNV, which cannot
//! be reproduced from Rust; [`revision_hash`] is a SHA-256 of the revision data (plus the collision count)
//! written in upstream's alphabet and length, so names look alike and only differ from what upstream would
//! have chosen for revisions created here. Pods are labelled with their revision's hash label, whatever
//! produced it, so adopted upstream revisions keep working.

mod go_json;

use std::collections::HashSet;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use kube::api::ObjectMeta;
use mini_kcm_runtime::pods::cached::CachedPod;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::{DaemonSetObject, REVISION_HASH_LABEL};

/// Upstream `rand.SafeEncodeString`'s alphabet: no vowels (no words) and no look-alike characters.
const HASH_ALPHABET: &[u8; 27] = b"bcdfghjklmnpqrstvwxz2456789";

/// API default of `spec.revisionHistoryLimit`.
pub(crate) const DEFAULT_REVISION_HISTORY_LIMIT: i32 = 10;

/// Why revision data could not be produced.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// The template (or revision) did not serialize to JSON.
    #[error("failed to encode revision data")]
    Serialize(#[from] serde_json::Error),
}

/// The data of the DaemonSet's current revision, byte for byte as upstream `getPatch` makes it.
pub fn revision_data(ds: &DaemonSetObject) -> Result<Vec<u8>, HistoryError> {
    let template = serde_json::to_value(&ds.spec.template)?;
    let mut template = go_json::shape_pod_template(&template);
    if let Value::Object(fields) = &mut template {
        fields.insert("$patch".to_owned(), Value::String("replace".to_owned()));
    }
    Ok(go_json::to_vec(
        &json!({ "spec": { "template": template } }),
    ))
}

/// The revision's data in upstream's canonical encoding (`None` without data: 1.37's API requires it,
/// older API servers accept a revision without, which then decodes as `null`).
fn canonical_data(revision: &ControllerRevision) -> Option<Vec<u8>> {
    (!revision.data.0.is_null()).then(|| go_json::to_vec(&revision.data.0))
}

/// The revision's number: absent reads as 0, as upstream's `int64` field does (optional since 1.37).
pub(crate) fn revision_number(revision: &ControllerRevision) -> i64 {
    revision.revision.unwrap_or_default()
}

/// Upstream `Match`: whether `revision` records the template whose [`revision_data`] is `data`.
pub(crate) fn revision_matches(data: &[u8], revision: &ControllerRevision) -> bool {
    canonical_data(revision).is_some_and(|d| d == data)
}

/// The hash naming a new revision with this data: 32 bits of SHA-256 over the data (and, when set, the
/// collision count as upstream feeds it: 4 bytes little-endian then 4 zero bytes), in decimal, each digit
/// mapped into [`HASH_ALPHABET`] as upstream's `SafeEncodeString` maps it.
pub(crate) fn revision_hash(data: &[u8], collision_count: Option<i32>) -> String {
    let mut hasher = Sha256::new();
    hasher.update(data);
    if let Some(count) = collision_count {
        let mut bytes = [0_u8; 8];
        bytes[..4].copy_from_slice(&count.to_le_bytes());
        hasher.update(bytes);
    }
    let digest = hasher.finalize();
    let value = u32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]]);
    value
        .to_string()
        .bytes()
        .map(|b| char::from(HASH_ALPHABET[usize::from(b) % HASH_ALPHABET.len()]))
        .collect()
}

/// `<daemonset>-<hash>`.
pub(crate) fn revision_name(ds_name: &str, hash: &str) -> String {
    format!("{ds_name}-{hash}")
}

/// Upstream `snapshot`'s object: named `<ds>-<hash>`, labelled with the template labels plus the hash
/// label, annotated with the DaemonSet's annotations, controlled by `owner`, numbered `revision`. The hash
/// is [`revision_hash`] of `data` with the DaemonSet's `status.collisionCount`.
pub(crate) fn build_revision(
    ds: &DaemonSetObject,
    data: &[u8],
    revision: i64,
    owner: OwnerReference,
) -> Result<ControllerRevision, HistoryError> {
    let collision_count = ds.status.as_ref().and_then(|s| s.collision_count);
    let hash = revision_hash(data, collision_count);
    let mut labels = ds
        .spec
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    labels.insert(REVISION_HASH_LABEL.to_owned(), hash.clone());
    Ok(ControllerRevision {
        metadata: ObjectMeta {
            name: Some(revision_name(
                ds.metadata.name.as_deref().unwrap_or_default(),
                &hash,
            )),
            namespace: ds.metadata.namespace.clone(),
            labels: Some(labels),
            annotations: ds.metadata.annotations.clone(),
            owner_references: Some(vec![owner]),
            ..Default::default()
        },
        data: RawExtension(serde_json::from_slice(data)?),
        revision: Some(revision),
    })
}

/// The JSON body that creates `revision` with its data bytes exactly as given. Serializing the object
/// normally would re-escape the data (serde_json leaves `<`, `>`, `&` unescaped), and the API server stores
/// the data bytes as received; upstream compares against those bytes.
pub(crate) fn revision_create_body(
    revision: &ControllerRevision,
    data: &[u8],
) -> Result<Vec<u8>, HistoryError> {
    let mut value = serde_json::to_value(revision)?;
    if let Value::Object(fields) = &mut value {
        fields.remove("data");
        fields
            .entry("apiVersion")
            .or_insert_with(|| Value::String("apps/v1".to_owned()));
        fields
            .entry("kind")
            .or_insert_with(|| Value::String("ControllerRevision".to_owned()));
    }
    let mut body = go_json::to_vec(&value);
    // `body` is a non-empty object: splice the raw data in as its last member.
    if body.pop() == Some(b'}') {
        body.extend_from_slice(b",\"data\":");
        body.extend_from_slice(data);
        body.push(b'}');
    }
    Ok(body)
}

/// The revision hash label of a revision or pod (`""` if absent).
fn hash_label(meta: &ObjectMeta) -> &str {
    meta.labels
        .as_ref()
        .and_then(|l| l.get(REVISION_HASH_LABEL))
        .map_or("", String::as_str)
}

#[cfg(test)]
/// A copy of `revision` with the hash label set to its name, if it lacks the label (upstream labels such
/// revisions by name rather than by a recomputed hash, so collisions cannot matter).
pub(crate) fn with_hash_label(revision: &ControllerRevision) -> Option<ControllerRevision> {
    if revision
        .metadata
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(REVISION_HASH_LABEL))
    {
        return None;
    }
    let mut labelled = revision.clone();
    let name = labelled.metadata.name.clone().unwrap_or_default();
    labelled
        .metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert(REVISION_HASH_LABEL.to_owned(), name);
    Some(labelled)
}

#[cfg(test)]
/// The DaemonSet's revisions split into those matching the current template and the rest.
#[derive(Debug, Clone, Default)]
pub(crate) struct PartitionedHistories<'a> {
    pub current: Vec<&'a ControllerRevision>,
    pub old: Vec<&'a ControllerRevision>,
}

#[cfg(test)]
/// Splits `histories` by [`revision_matches`] against `data`.
pub(crate) fn find_matching_history<'a>(
    data: &[u8],
    histories: impl IntoIterator<Item = &'a ControllerRevision>,
) -> PartitionedHistories<'a> {
    let mut split = PartitionedHistories::default();
    for history in histories {
        if revision_matches(data, history) {
            split.current.push(history);
        } else {
            split.old.push(history);
        }
    }
    split
}

/// The highest revision number (0 for none). The current revision must be numbered one above the old ones.
pub(crate) fn max_revision<'a>(histories: impl IntoIterator<Item = &'a ControllerRevision>) -> i64 {
    histories.into_iter().map(revision_number).fold(0, i64::max)
}

/// Which of several revisions matching the current template to keep.
#[derive(Debug, Clone)]
pub(crate) struct DedupPlan<'a> {
    /// The one with the highest revision number (the last one seen among equals).
    pub keep: &'a ControllerRevision,
    /// The others, to delete once pods carrying their hash are relabelled to `keep`'s.
    pub delete: Vec<&'a ControllerRevision>,
}

impl DedupPlan<'_> {
    /// The hash label pods should carry.
    pub(crate) fn keep_hash(&self) -> &str {
        hash_label(&self.keep.metadata)
    }

    /// Names of pods whose hash label differs from the kept revision's (upstream relabels them all).
    pub(crate) fn pods_to_relabel<'p>(
        &self,
        pods: impl IntoIterator<Item = &'p CachedPod>,
    ) -> Vec<String> {
        let keep = self.keep_hash();
        pods.into_iter()
            .filter(|p| hash_label(&p.metadata) != keep)
            .map(|p| p.metadata.name.clone().unwrap_or_default())
            .collect()
    }
}

/// Upstream `dedupCurHistories`: `None` for no revisions; with one, keep it and delete nothing.
pub(crate) fn dedup_histories<'a>(current: &[&'a ControllerRevision]) -> Option<DedupPlan<'a>> {
    let mut keep: Option<&'a ControllerRevision> = None;
    for &history in current {
        // `>=`: among equal numbers the last one seen wins, as upstream.
        if keep.is_none_or(|k| history.revision >= k.revision) {
            keep = Some(history);
        }
    }
    let keep = keep?;
    let delete = current
        .iter()
        .filter(|h| h.metadata.name != keep.metadata.name)
        .copied()
        .collect();
    Some(DedupPlan { keep, delete })
}

/// The JSON merge patch relabelling a pod to `hash`.
pub(crate) fn relabel_pod_patch(hash: &str) -> Value {
    json!({ "metadata": { "labels": { REVISION_HASH_LABEL: hash } } })
}

/// The hashes of the DaemonSet's pods (including deleted terminal ones): revisions with these hashes are
/// still in use and are never cleaned up.
pub(crate) fn live_hashes<'p>(pods: impl IntoIterator<Item = &'p CachedPod>) -> HashSet<String> {
    pods.into_iter()
        .map(|p| hash_label(&p.metadata))
        .filter(|h| !h.is_empty())
        .map(str::to_owned)
        .collect()
}

/// `spec.revisionHistoryLimit`, or its API default 10 when absent (upstream would dereference nil).
pub(crate) fn revision_history_limit(ds: &DaemonSetObject) -> i32 {
    ds.spec
        .revision_history_limit
        .unwrap_or(DEFAULT_REVISION_HISTORY_LIMIT)
}

/// Upstream `cleanupHistory`: of the old revisions beyond `limit`, the ones to delete, lowest revision
/// numbers first, skipping any whose hash a pod still carries (so fewer may be deleted than asked).
pub(crate) fn revisions_to_clean_up<'a>(
    old: &[&'a ControllerRevision],
    live_hashes: &HashSet<String>,
    limit: i32,
) -> Vec<&'a ControllerRevision> {
    let excess = old
        .len()
        .saturating_sub(usize::try_from(limit).unwrap_or(0));
    let mut by_revision = old.to_vec();
    by_revision.sort_by_key(|h| h.revision);
    by_revision
        .into_iter()
        .filter(|h| !live_hashes.contains(hash_label(&h.metadata)))
        .take(excess)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_fixtures::new_ds;
    use k8s_openapi::api::core::v1::{
        Container, ContainerPort, HTTPGetAction, PodSpec, PodTemplateSpec, Probe,
        ResourceRequirements,
    };
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    use std::collections::BTreeMap;

    fn ds_with_template(template: PodTemplateSpec) -> DaemonSetObject {
        let mut ds = new_ds("foo");
        ds.spec.template = template;
        ds
    }

    fn simple_template() -> PodTemplateSpec {
        PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some([("app".to_string(), "foo".to_string())].into()),
                ..Default::default()
            }),
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "c".into(),
                    image: Some("nginx:1.25".into()),
                    ..Default::default()
                }],
                ..Default::default()
            }),
        }
    }

    /// Golden bytes produced by upstream's getPatch (Go 1.26, k8s.io/api v0.36.3) for the same templates.
    #[test]
    fn revision_data_matches_upstream_bytes() {
        let ds = ds_with_template(simple_template());
        assert_eq!(
            String::from_utf8(revision_data(&ds).unwrap()).unwrap(),
            r#"{"spec":{"template":{"$patch":"replace","metadata":{"labels":{"app":"foo"}},"spec":{"containers":[{"image":"nginx:1.25","name":"c","resources":{}}]}}}}"#
        );

        let mut template = simple_template();
        let spec = template.spec.as_mut().unwrap();
        spec.containers[0].command = Some(vec!["sh".into(), "-c".into(), "a && b > /x <y".into()]);
        spec.containers[0].ports = Some(vec![ContainerPort {
            container_port: 80,
            ..Default::default()
        }]);
        spec.containers[0].resources = Some(ResourceRequirements {
            limits: Some(BTreeMap::from([(
                "cpu".to_string(),
                Quantity("500m".into()),
            )])),
            ..Default::default()
        });
        spec.containers[0].readiness_probe = Some(Probe {
            http_get: Some(HTTPGetAction {
                port: IntOrString::String("http".into()),
                path: Some("/healthz".into()),
                ..Default::default()
            }),
            period_seconds: Some(0),
            ..Default::default()
        });
        spec.host_network = Some(false);
        spec.termination_grace_period_seconds = Some(30);
        let ds = ds_with_template(template);
        assert_eq!(
            String::from_utf8(revision_data(&ds).unwrap()).unwrap(),
            r#"{"spec":{"template":{"$patch":"replace","metadata":{"labels":{"app":"foo"}},"spec":{"containers":[{"command":["sh","-c","a \u0026\u0026 b \u003e /x \u003cy"],"image":"nginx:1.25","name":"c","ports":[{"containerPort":80}],"readinessProbe":{"httpGet":{"path":"/healthz","port":"http"}},"resources":{"limits":{"cpu":"500m"}}}],"terminationGracePeriodSeconds":30}}}}"#
        );
    }

    /// Go-only shapes: struct fields always written, nil lists as `null`, a missing quantity as `"0"`,
    /// omitempty zeros dropped, non-nil pointers to zero values kept (golden bytes from upstream's code).
    #[test]
    fn revision_data_reproduces_go_field_rules() {
        let template: PodTemplateSpec = serde_json::from_value(json!({
            "metadata": {"labels": {"a": "b"}, "creationTimestamp": null, "name": ""},
            "spec": {
                "containers": [{"name": "c", "env": [{"name": "E", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}}]}],
                "volumes": [{"name": "v", "projected": {}}],
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}},
                "hostNetwork": false,
                "automountServiceAccountToken": false
            }
        }))
        .unwrap();
        assert_eq!(
            String::from_utf8(revision_data(&ds_with_template(template)).unwrap()).unwrap(),
            r#"{"spec":{"template":{"$patch":"replace","metadata":{"labels":{"a":"b"}},"spec":{"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":null}}},"automountServiceAccountToken":false,"containers":[{"env":[{"name":"E","valueFrom":{"resourceFieldRef":{"divisor":"0","resource":"limits.cpu"}}}],"name":"c","resources":{}}],"volumes":[{"name":"v","projected":{"sources":null}}]}}}}"#
        );
    }

    #[test]
    fn revision_data_round_trips_through_a_revision() {
        let ds = ds_with_template(simple_template());
        let data = revision_data(&ds).unwrap();
        let owner = OwnerReference {
            api_version: "apps/v1".into(),
            kind: "DaemonSet".into(),
            name: "foo".into(),
            uid: "uid-foo".into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        };
        let revision = build_revision(&ds, &data, 3, owner).unwrap();
        assert!(revision_matches(&data, &revision));
        assert_eq!(revision.revision, Some(3));
        let labels = revision.metadata.labels.as_ref().unwrap();
        let hash = revision_hash(&data, None);
        assert_eq!(labels.get(REVISION_HASH_LABEL), Some(&hash));
        assert_eq!(labels.get("app").map(String::as_str), Some("foo"));
        assert_eq!(revision.metadata.name, Some(format!("foo-{hash}")));

        // The create body carries the exact bytes.
        let body = revision_create_body(&revision, &data).unwrap();
        let text = String::from_utf8(body.clone()).unwrap();
        assert!(text.ends_with(&format!(
            ",\"data\":{}}}",
            String::from_utf8(data.clone()).unwrap()
        )));
        let parsed: ControllerRevision = serde_json::from_slice(&body).unwrap();
        assert!(revision_matches(&data, &parsed));
        assert!(text.contains(r#""kind":"ControllerRevision""#));

        // Another template does not match.
        let mut other = simple_template();
        other.spec.as_mut().unwrap().containers[0].image = Some("nginx:1.26".into());
        assert!(!revision_matches(
            &revision_data(&ds_with_template(other)).unwrap(),
            &revision
        ));
        assert!(!revision_matches(&data, &ControllerRevision::default()));
    }

    #[test]
    fn hash_uses_upstream_alphabet_and_collision_count() {
        let data = b"{}";
        let plain = revision_hash(data, None);
        assert!(!plain.is_empty() && plain.len() <= 10);
        assert!(plain.bytes().all(|b| b"456789bcdf".contains(&b)), "{plain}");
        assert_ne!(revision_hash(data, Some(0)), plain);
        assert_ne!(revision_hash(data, Some(1)), revision_hash(data, Some(0)));
        assert_eq!(revision_hash(data, Some(1)), revision_hash(data, Some(1)));
    }

    fn rev(name: &str, revision: i64, hash: Option<&str>) -> ControllerRevision {
        ControllerRevision {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: hash.map(|h| [(REVISION_HASH_LABEL.to_string(), h.to_string())].into()),
                ..Default::default()
            },
            data: RawExtension::default(),
            revision: Some(revision),
        }
    }

    fn pod_hash(name: &str, hash: &str) -> CachedPod {
        CachedPod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some([(REVISION_HASH_LABEL.to_string(), hash.to_string())].into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    /// Mirrors the history handling of upstream `TestControlledHistories` / `constructHistory`.
    #[test]
    fn partition_dedup_and_numbering() {
        let ds = ds_with_template(simple_template());
        let data = revision_data(&ds).unwrap();
        let mut current_a = rev("foo-a", 2, Some("a"));
        current_a.data = RawExtension(serde_json::from_slice(&data).unwrap());
        let mut current_b = rev("foo-b", 5, Some("b"));
        current_b.data = current_a.data.clone();
        let old = rev("foo-old", 4, Some("old"));
        let all = [current_a.clone(), old.clone(), current_b.clone()];
        let split = find_matching_history(&data, &all);
        assert_eq!(split.current.len(), 2);
        assert_eq!(split.old.len(), 1);
        assert_eq!(max_revision(split.old.iter().copied()) + 1, 5);

        let plan = dedup_histories(&split.current).unwrap();
        assert_eq!(plan.keep.metadata.name.as_deref(), Some("foo-b"));
        assert_eq!(plan.delete.len(), 1);
        assert_eq!(plan.keep_hash(), "b");
        let pods = [pod_hash("p1", "a"), pod_hash("p2", "b")];
        assert_eq!(plan.pods_to_relabel(&pods), ["p1"]);
        assert_eq!(
            relabel_pod_patch("b"),
            json!({"metadata": {"labels": {"controller-revision-hash": "b"}}})
        );

        // Ties keep the last one seen.
        let tie_a = rev("t-a", 3, Some("a"));
        let tie_b = rev("t-b", 3, Some("b"));
        let plan = dedup_histories(&[&tie_a, &tie_b]).unwrap();
        assert_eq!(plan.keep.metadata.name.as_deref(), Some("t-b"));
        assert!(dedup_histories(&[]).is_none());
        let single = dedup_histories(&[&tie_a]).unwrap();
        assert!(single.delete.is_empty());

        assert_eq!(max_revision(&[] as &[ControllerRevision]), 0);
        assert!(with_hash_label(&current_a).is_none());
        let unlabelled = rev("foo-x", 1, None);
        let labelled = with_hash_label(&unlabelled).unwrap();
        assert_eq!(hash_label(&labelled.metadata), "foo-x");
    }

    #[test]
    fn cleanup_never_deletes_a_live_revision() {
        let revs: Vec<ControllerRevision> = (1..=6)
            .map(|i| rev(&format!("r{i}"), i, Some(&format!("h{i}"))))
            .collect();
        let old: Vec<&ControllerRevision> = revs.iter().rev().collect();
        let pods = [pod_hash("p", "h1"), pod_hash("q", "h3")];
        let live = live_hashes(&pods);
        let names = |v: Vec<&ControllerRevision>| -> Vec<String> {
            v.into_iter()
                .map(|r| r.metadata.name.clone().unwrap())
                .collect()
        };
        // 6 old, keep 2: kill 4, lowest first, skipping r1 and r3 which pods still use.
        assert_eq!(
            names(revisions_to_clean_up(&old, &live, 2)),
            ["r2", "r4", "r5", "r6"]
        );
        assert_eq!(
            names(revisions_to_clean_up(&old, &live, 3)),
            ["r2", "r4", "r5"]
        );
        assert!(revisions_to_clean_up(&old, &live, 6).is_empty());
        // Everything live: nothing deleted even far over the limit.
        let all_live: HashSet<String> = (1..=6).map(|i| format!("h{i}")).collect();
        assert!(revisions_to_clean_up(&old, &all_live, 0).is_empty());
        // Unlabelled revisions are never live.
        let bare = rev("bare", 0, None);
        assert_eq!(names(revisions_to_clean_up(&[&bare], &live, 0)), ["bare"]);
        assert_eq!(revision_history_limit(&new_ds("x")), 2);
        let mut unset = new_ds("y");
        unset.spec.revision_history_limit = None;
        assert_eq!(
            revision_history_limit(&unset),
            DEFAULT_REVISION_HISTORY_LIMIT
        );
    }
}
