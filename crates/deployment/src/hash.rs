//! The `pod-template-hash`: a short, stable name for a pod template.
//!
//! The Deployment controller names each ReplicaSet `<deployment>-<hash>` and labels the ReplicaSet, its
//! selector and its pods with `pod-template-hash: <hash>`, so that the pods of different templates of
//! one Deployment never overlap. The hash must therefore be a deterministic function of the template
//! (and of `status.collisionCount`, which the controller bumps to get a fresh name after a collision).
//!
//! Upstream feeds a go-spew dump of the Go struct into FNV-1a-32, a byte stream that depends on Go's
//! struct layout and cannot be reproduced outside Go. We hash a canonical encoding instead: the JSON of
//! the k8s-openapi struct. That encoding is deterministic (fields in declaration order, absent fields
//! omitted, maps are `BTreeMap`s and so sorted), identical for `apps/v1` and the `minikcm.dev` copies
//! (same spec types), and stable across restarts. The digest is SHA-256; upstream's *output* format is
//! kept: a 32-bit value written in decimal, each digit mapped through the alphabet
//! `bcdfghjklmnpqrstvwxz2456789` (upstream's `rand.SafeEncodeString`), 1 to 10 characters.
//!
//! A different hash than kube-controller-manager's only changes the names of new ReplicaSets: the
//! controller finds a Deployment's ReplicaSets by template equality ([`crate::equal_ignore_hash`]),
//! never by recomputing a hash, so it adopts ReplicaSets created by kube-controller-manager as well.

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use sha2::{Digest, Sha256};

use crate::annotations::POD_TEMPLATE_HASH_LABEL;

/// The characters of upstream's safe encoding (no vowels, no confusable digits).
const ALPHANUMS: &[u8; 27] = b"bcdfghjklmnpqrstvwxz2456789";

/// The `pod-template-hash` of `template`, salted with `collision_count` when present.
///
/// Must be computed on the Deployment's template, i.e. WITHOUT the `pod-template-hash` label: nothing
/// is stripped here, so a template that already carries the label hashes differently.
pub(crate) fn compute_hash(template: &PodTemplateSpec, collision_count: Option<i32>) -> String {
    let mut hasher = Sha256::new();
    match serde_json::to_vec(template) {
        Ok(bytes) => hasher.update(&bytes),
        // Unreachable for k8s-openapi types (all map keys are strings); Debug is deterministic too, so
        // the result stays a pure function of the template.
        Err(_) => hasher.update(format!("{template:?}").as_bytes()),
    }
    if let Some(count) = collision_count {
        // As upstream: the count as a little-endian uint32 in an 8-byte buffer (the upper 4 bytes zero).
        let mut bytes = [0u8; 8];
        bytes[..4].copy_from_slice(&count.to_le_bytes());
        hasher.update(bytes);
    }
    let digest = hasher.finalize();
    let value = u32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]]);
    safe_encode(&value.to_string())
}

/// Upstream's `SafeEncodeString`: each character `c` becomes `ALPHANUMS[c % 27]`, so the decimal digits
/// 0-9 become `4 5 6 7 8 9 b c d f`.
fn safe_encode(s: &str) -> String {
    s.chars()
        .map(|c| char::from(ALPHANUMS[(c as usize) % ALPHANUMS.len()]))
        .collect()
}

/// Whether a selector uses the `pod-template-hash` key. Such a Deployment can never own what it creates:
/// each new ReplicaSet's selector and pods carry the controller's own hash value, which the Deployment's
/// selector does not match, so it is released and the next sync creates another, without bound
/// (upstream's controllers do exactly that). mini-kcm refuses to roll such a Deployment out.
pub(crate) fn selects_on_pod_template_hash(selector: &LabelSelector) -> bool {
    let in_labels = selector
        .match_labels
        .as_ref()
        .is_some_and(|labels| labels.contains_key(POD_TEMPLATE_HASH_LABEL));
    let in_expressions = selector
        .match_expressions
        .iter()
        .flatten()
        .any(|e| e.key == POD_TEMPLATE_HASH_LABEL);
    in_labels || in_expressions
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashSet};

    use k8s_openapi::api::core::v1::{Container, PodSpec};
    use kube::api::ObjectMeta;

    use super::*;
    use crate::POD_TEMPLATE_HASH_LABEL;

    fn template(labels: &[(&str, &str)], image: &str) -> PodTemplateSpec {
        PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..Default::default()
            }),
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "app".into(),
                    image: Some(image.into()),
                    ..Default::default()
                }],
                ..Default::default()
            }),
        }
    }

    #[test]
    fn safe_encoding_maps_digits_like_upstream() {
        assert_eq!(safe_encode("0123456789"), "456789bcdf");
    }

    #[test]
    fn hash_is_stable() {
        // A fixed template must hash to a fixed string forever: ReplicaSet names derive from it, and a
        // change would make a restarted controller create a second ReplicaSet for the same template
        // (were it not found by template equality first). The values are reproducible outside Rust:
        // SHA-256 of `{"metadata":{"labels":{"app":"nginx"}},"spec":{"containers":[{"image":"nginx:1.25","name":"app"}]}}`
        // and of `{}`, first 4 bytes big-endian, decimal, safe-encoded.
        let t = template(&[("app", "nginx")], "nginx:1.25");
        assert_eq!(compute_hash(&t, None), "9476c68ff");
        assert_eq!(
            compute_hash(&PodTemplateSpec::default(), None),
            "5586568895"
        );
        assert_eq!(compute_hash(&t, None), compute_hash(&t.clone(), None));
    }

    #[test]
    fn hash_differs_with_collision_count() {
        // Mirrors upstream TestComputeHash.
        let t = PodTemplateSpec::default();
        assert_ne!(compute_hash(&t, Some(1)), compute_hash(&t, Some(2)));
        assert_ne!(compute_hash(&t, None), compute_hash(&t, Some(i32::MAX)));
        assert_ne!(compute_hash(&t, None), compute_hash(&t, Some(0)));
    }

    #[test]
    fn hash_is_independent_of_map_insertion_order() {
        let mut forward = BTreeMap::new();
        forward.insert("a".to_string(), "1".to_string());
        forward.insert("b".to_string(), "2".to_string());
        forward.insert("c".to_string(), "3".to_string());
        let mut backward = BTreeMap::new();
        backward.insert("c".to_string(), "3".to_string());
        backward.insert("b".to_string(), "2".to_string());
        backward.insert("a".to_string(), "1".to_string());
        let mut t1 = template(&[], "x");
        let mut t2 = template(&[], "x");
        t1.metadata.as_mut().unwrap().labels = Some(forward);
        t2.metadata.as_mut().unwrap().labels = Some(backward);
        assert_eq!(compute_hash(&t1, None), compute_hash(&t2, None));
    }

    #[test]
    fn hash_label_must_be_excluded_by_the_caller() {
        // The hash is taken from the Deployment's template, which has no pod-template-hash label; the
        // ReplicaSet's template (with the label) hashes differently, so never hash that one.
        let deployment_template = template(&[("app", "web")], "web:1");
        let hash = compute_hash(&deployment_template, None);
        let rs_template = template(
            &[("app", "web"), (POD_TEMPLATE_HASH_LABEL, hash.as_str())],
            "web:1",
        );
        assert_ne!(compute_hash(&rs_template, None), hash);
    }

    #[test]
    fn hash_has_few_collisions() {
        // Mirrors upstream TestPodTemplateSpecHash: 1000 templates differing in one field.
        let mut seen = HashSet::new();
        for i in 0..1000 {
            let hash = compute_hash(&template(&[("app", "web")], &format!("web:{i}")), None);
            assert!(!hash.is_empty() && hash.len() <= 10);
            assert!(seen.insert(hash), "hash collision at version {i}");
        }
    }
}
