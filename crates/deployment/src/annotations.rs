//! The annotations through which a Deployment and its ReplicaSets remember rollout state.
//!
//! The controller keeps no state of its own; what it must remember across syncs lives in annotations:
//! - `deployment.kubernetes.io/revision` numbers the rollouts. The new ReplicaSet always carries the
//!   highest revision; the Deployment copies it. A ReplicaSet that becomes new again (a rollback, or a
//!   template reverted by hand) gets a fresh number and keeps its previous ones in `revision-history`.
//! - `desired-replicas` and `max-replicas` record `spec.replicas` and `spec.replicas + maxSurge` at the
//!   time the ReplicaSet was last sized. A differing `desired-replicas` is how the controller tells a
//!   scaling event from a rollout, and `max-replicas` is the base of proportional scaling.
//! - The Deployment's own annotations (e.g. `kubernetes.io/change-cause`) are copied onto its new
//!   ReplicaSet, except the ones above and `kubectl apply`'s, so `kubectl rollout history` can show them.

use std::collections::BTreeMap;

use kube::api::ObjectMeta;

use crate::accessors::deployment_replicas;
use crate::strategy::max_surge;
use crate::{DeploymentObject, ReplicaSetObject};

/// The rollout sequence number of a ReplicaSet (and, copied, of its Deployment).
pub const REVISION_ANNOTATION: &str = "deployment.kubernetes.io/revision";
/// Earlier revision numbers a ReplicaSet served under, comma separated.
pub(crate) const REVISION_HISTORY_ANNOTATION: &str = "deployment.kubernetes.io/revision-history";
/// The Deployment's `spec.replicas` when the ReplicaSet was last sized.
pub(crate) const DESIRED_REPLICAS_ANNOTATION: &str = "deployment.kubernetes.io/desired-replicas";
/// The Deployment's `spec.replicas + maxSurge` when the ReplicaSet was last sized.
pub(crate) const MAX_REPLICAS_ANNOTATION: &str = "deployment.kubernetes.io/max-replicas";
/// The apps/v1 round-trip of the removed `spec.rollbackTo`: the revision to roll back to (0 = previous).
pub(crate) const ROLLBACK_TO_ANNOTATION: &str = "deprecated.deployment.rollback.to";
/// `kubectl apply`'s record of the applied object; never copied onto ReplicaSets.
pub const LAST_APPLIED_CONFIG_ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";
/// The label (on ReplicaSets, their selectors and pods) that separates the templates of a Deployment.
pub const POD_TEMPLATE_HASH_LABEL: &str = "pod-template-hash";
/// Upstream's bound on `revision-history` (about 100 entries).
pub(crate) const MAX_REV_HISTORY_LENGTH_IN_CHARS: usize = 2000;

/// Annotations that belong to the controller (or to `kubectl apply`) and so are never copied between a
/// Deployment and its ReplicaSets.
const ANNOTATIONS_TO_SKIP: [&str; 6] = [
    LAST_APPLIED_CONFIG_ANNOTATION,
    REVISION_ANNOTATION,
    REVISION_HISTORY_ANNOTATION,
    DESIRED_REPLICAS_ANNOTATION,
    MAX_REPLICAS_ANNOTATION,
    ROLLBACK_TO_ANNOTATION,
];

/// Whether `key` is one of the annotations never copied between a Deployment and its ReplicaSets.
pub fn skip_copy_annotation(key: &str) -> bool {
    ANNOTATIONS_TO_SKIP.contains(&key)
}

fn annotation<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations.as_ref()?.get(key).map(String::as_str)
}

fn annotations_mut(meta: &mut ObjectMeta) -> &mut BTreeMap<String, String> {
    meta.annotations.get_or_insert_with(BTreeMap::new)
}

/// The revision of an object: 0 without the annotation, an error when it does not parse (upstream's
/// `strconv.ParseInt`, which like Rust's accepts a leading sign).
pub fn revision(meta: &ObjectMeta) -> Result<i64, std::num::ParseIntError> {
    match annotation(meta, REVISION_ANNOTATION) {
        None => Ok(0),
        Some(v) => v.parse(),
    }
}

fn parsable_revisions<'a>(rss: &'a [&'a ReplicaSetObject]) -> impl Iterator<Item = i64> + 'a {
    rss.iter().filter_map(|rs| match revision(&rs.metadata) {
        Ok(v) => Some(v),
        Err(err) => {
            // Skipped, as upstream: a hand-edited revision must not block the rollout.
            tracing::debug!(replica_set = ?rs.metadata.name, %err, "unparsable revision annotation, skipped");
            None
        }
    })
}

/// The highest revision among `rss` (0 when none has one).
pub(crate) fn max_revision(rss: &[&ReplicaSetObject]) -> i64 {
    parsable_revisions(rss).fold(0, i64::max)
}

/// The second-highest revision among `rss`, i.e. the revision before the current one (0 when none):
/// the target of a rollback to "revision 0".
pub(crate) fn last_revision(rss: &[&ReplicaSetObject]) -> i64 {
    let (mut max, mut second) = (0, 0);
    for v in parsable_revisions(rss) {
        if v >= max {
            second = max;
            max = v;
        } else if v > second {
            second = v;
        }
    }
    second
}

/// Sets the Deployment's revision annotation; true when it changed.
pub(crate) fn set_deployment_revision(d: &mut DeploymentObject, revision: &str) -> bool {
    let annotations = annotations_mut(&mut d.metadata);
    if annotations.get(REVISION_ANNOTATION).map(String::as_str) == Some(revision) {
        return false;
    }
    annotations.insert(REVISION_ANNOTATION.to_string(), revision.to_string());
    true
}

/// Copies the Deployment's annotations onto the ReplicaSet, except the skip list; true when the
/// ReplicaSet's annotations changed. Annotations the Deployment no longer has are left alone, as
/// upstream does.
pub(crate) fn copy_deployment_annotations_to_replica_set(
    d: &DeploymentObject,
    rs: &mut ReplicaSetObject,
) -> bool {
    let rs_annotations = annotations_mut(&mut rs.metadata);
    let mut changed = false;
    for (k, v) in d.metadata.annotations.iter().flatten() {
        // The revision in particular is never copied: the ReplicaSet's is the reliable one (the
        // Deployment's copy may lag after a failed status write).
        if skip_copy_annotation(k) || rs_annotations.get(k) == Some(v) {
            continue;
        }
        rs_annotations.insert(k.clone(), v.clone());
        changed = true;
    }
    changed
}

/// Rollback: replaces the Deployment's annotations by the ReplicaSet's, except the skip list, whose
/// values stay the Deployment's. Otherwise the next sync would copy the Deployment's current
/// annotations (e.g. a change-cause) onto the ReplicaSet being rolled back to.
pub(crate) fn set_deployment_annotations_to(
    d: &mut DeploymentObject,
    rollback_to: &ReplicaSetObject,
) {
    let mut annotations: BTreeMap<String, String> = d
        .metadata
        .annotations
        .iter()
        .flatten()
        .filter(|(k, _)| skip_copy_annotation(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for (k, v) in rollback_to.metadata.annotations.iter().flatten() {
        if !skip_copy_annotation(k) {
            annotations.insert(k.clone(), v.clone());
        }
    }
    d.metadata.annotations = Some(annotations);
}

/// Brings the annotations of the Deployment's new ReplicaSet up to date (upstream's
/// `SetNewReplicaSetAnnotations`); true when they changed.
///
/// Copies the Deployment's annotations, raises the revision to `new_revision` when it is lower
/// (recording the previous number in `revision-history`, trimmed from the front to
/// `rev_history_limit_in_chars`), and, for a ReplicaSet about to be created (`exists == false`), sets
/// the desired/max replicas annotations. A revision is never lowered: old ReplicaSets may have been
/// deleted since the new one got its number.
pub(crate) fn set_new_replica_set_annotations(
    d: &DeploymentObject,
    rs: &mut ReplicaSetObject,
    new_revision: i64,
    exists: bool,
    rev_history_limit_in_chars: usize,
) -> bool {
    let mut changed = copy_deployment_annotations_to_replica_set(d, rs);
    let annotations = annotations_mut(&mut rs.metadata);
    let old_revision = annotations.get(REVISION_ANNOTATION).cloned();
    let old_revision_number = match old_revision.as_deref() {
        None | Some("") => 0,
        Some(v) => match v.parse::<i64>() {
            Ok(n) => n,
            Err(err) => {
                // As upstream: give up on this ReplicaSet's annotations rather than guess.
                tracing::info!(revision = v, %err, "new replica set has an unparsable revision");
                return false;
            }
        },
    };
    if old_revision_number < new_revision {
        annotations.insert(REVISION_ANNOTATION.to_string(), new_revision.to_string());
        changed = true;
        if let Some(old) = old_revision {
            // The ReplicaSet served an earlier revision: it is becoming new again (a rollback).
            let history = annotations
                .get(REVISION_HISTORY_ANNOTATION)
                .cloned()
                .unwrap_or_default();
            if let Some(updated) =
                append_revision_history(&history, &old, rev_history_limit_in_chars)
            {
                annotations.insert(REVISION_HISTORY_ANNOTATION.to_string(), updated);
            } else {
                tracing::info!(
                    limit = rev_history_limit_in_chars,
                    "not appending revision: revision history length limit reached"
                );
            }
        }
    }
    if !exists {
        let replicas = deployment_replicas(d);
        changed |= set_replicas_annotations(rs, replicas, replicas.saturating_add(max_surge(d)));
    }
    changed
}

/// `history` with `old` appended, dropping entries from the front until the result fits in `limit`
/// characters; `None` when even `old` alone does not fit.
fn append_revision_history(history: &str, old: &str, limit: usize) -> Option<String> {
    let entries: Vec<&str> = history.split(',').collect();
    if entries[0].is_empty() {
        return Some(old.to_string());
    }
    let mut total = history.len() + old.len() + 1;
    let mut start = 0;
    while total > limit && start < entries.len() {
        total -= entries[start].len() + 1;
        start += 1;
    }
    if total > limit {
        return None;
    }
    let mut kept = entries[start..].to_vec();
    kept.push(old);
    Some(kept.join(","))
}

/// A non-negative int32 annotation (upstream parses with `ParseUint`: digits only, no sign, at most
/// `i32::MAX`); `None` when absent or invalid.
pub(crate) fn non_negative_i32_annotation(meta: &ObjectMeta, key: &str) -> Option<i32> {
    let value = annotation(meta, key)?;
    let parsed = if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        value
            .parse::<u64>()
            .ok()
            .and_then(|v| i32::try_from(v).ok())
    } else {
        None
    };
    if parsed.is_none() {
        tracing::debug!(
            key,
            value,
            "could not convert the annotation to a non-negative int32"
        );
    }
    parsed
}

/// The `desired-replicas` annotation of a ReplicaSet.
pub(crate) fn desired_replicas_annotation(rs: &ReplicaSetObject) -> Option<i32> {
    non_negative_i32_annotation(&rs.metadata, DESIRED_REPLICAS_ANNOTATION)
}

/// The `max-replicas` annotation of a ReplicaSet.
pub(crate) fn max_replicas_annotation(rs: &ReplicaSetObject) -> Option<i32> {
    non_negative_i32_annotation(&rs.metadata, MAX_REPLICAS_ANNOTATION)
}

/// Sets the desired/max replicas annotations; true when either changed.
pub(crate) fn set_replicas_annotations(rs: &mut ReplicaSetObject, desired: i32, max: i32) -> bool {
    let annotations = annotations_mut(&mut rs.metadata);
    let mut changed = false;
    for (key, value) in [
        (DESIRED_REPLICAS_ANNOTATION, desired.to_string()),
        (MAX_REPLICAS_ANNOTATION, max.to_string()),
    ] {
        if annotations.get(key) != Some(&value) {
            annotations.insert(key.to_string(), value);
            changed = true;
        }
    }
    changed
}

/// Whether [`set_replicas_annotations`] would change anything.
pub(crate) fn replicas_annotations_need_update(
    rs: &ReplicaSetObject,
    desired: i32,
    max: i32,
) -> bool {
    annotation(&rs.metadata, DESIRED_REPLICAS_ANNOTATION) != Some(desired.to_string().as_str())
        || annotation(&rs.metadata, MAX_REPLICAS_ANNOTATION) != Some(max.to_string().as_str())
}

/// The revision a pending legacy rollback asks for (`deprecated.deployment.rollback.to`); `None` when
/// absent, empty or unparsable (upstream ignores an invalid value).
///
/// upstream: getRollbackTo
pub(crate) fn rollback_to(d: &DeploymentObject) -> Option<i64> {
    match annotation(&d.metadata, ROLLBACK_TO_ANNOTATION) {
        None | Some("") => None,
        Some(v) => v.parse().ok(),
    }
}

/// Removes the legacy rollback request (the controller then writes the whole Deployment).
pub(crate) fn clear_rollback_to(d: &mut DeploymentObject) {
    if let Some(annotations) = d.metadata.annotations.as_mut() {
        annotations.remove(ROLLBACK_TO_ANNOTATION);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{deployment, rs, with_annotations};

    #[test]
    fn annotation_utils() {
        // Mirrors upstream TestAnnotationUtils.
        let mut d = deployment("nginx", 1, 0, 0);
        d.metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(REVISION_ANNOTATION.into(), "1".into());
        let mut r = rs("nginx-abc", 0);

        // SetNewReplicaSetAnnotations: revisions 11 through 20 with a 5-character history limit.
        for i in 10..20i64 {
            let next = i + 1;
            set_new_replica_set_annotations(&d, &mut r, next, true, 5);
            if i >= 12 {
                let expected = format!("{},{}", i - 1, i);
                assert_eq!(
                    r.metadata.annotations.as_ref().unwrap()[REVISION_HISTORY_ANNOTATION],
                    expected
                );
            }
            assert_eq!(
                r.metadata.annotations.as_ref().unwrap()[REVISION_ANNOTATION],
                next.to_string()
            );
        }

        // SetReplicasAnnotations.
        assert!(set_replicas_annotations(&mut r, 10, 11));
        let a = r.metadata.annotations.as_ref().unwrap();
        assert_eq!(a[DESIRED_REPLICAS_ANNOTATION], "10");
        assert_eq!(a[MAX_REPLICAS_ANNOTATION], "11");
        assert!(!set_replicas_annotations(&mut r, 10, 11));

        // IsSaturated.
        r.metadata
            .annotations
            .as_mut()
            .unwrap()
            .insert(DESIRED_REPLICAS_ANNOTATION.into(), "1".into());
        r.status
            .get_or_insert_with(Default::default)
            .available_replicas = Some(1);
        r.spec.replicas = Some(1);
        assert!(crate::proportional::is_saturated(&d, Some(&r)));
    }

    #[test]
    fn revision_is_not_copied_and_never_lowered() {
        let mut d = deployment("nginx", 1, 0, 0);
        d.metadata.annotations = Some(BTreeMap::from([
            (REVISION_ANNOTATION.to_string(), "9".to_string()),
            ("kubernetes.io/change-cause".to_string(), "edit".to_string()),
            (LAST_APPLIED_CONFIG_ANNOTATION.to_string(), "{}".to_string()),
        ]));
        let mut r = with_annotations(rs("nginx-abc", 1), &[(REVISION_ANNOTATION, "5")]);
        assert!(set_new_replica_set_annotations(&d, &mut r, 3, true, 2000));
        let a = r.metadata.annotations.as_ref().unwrap();
        assert_eq!(a[REVISION_ANNOTATION], "5");
        assert_eq!(a["kubernetes.io/change-cause"], "edit");
        assert!(!a.contains_key(LAST_APPLIED_CONFIG_ANNOTATION));
        assert!(!a.contains_key(REVISION_HISTORY_ANNOTATION));
        // Nothing left to change.
        assert!(!set_new_replica_set_annotations(&d, &mut r, 3, true, 2000));
    }

    #[test]
    fn unparsable_revision_blocks_the_update() {
        let d = deployment("nginx", 1, 0, 0);
        let mut r = with_annotations(rs("nginx-abc", 1), &[(REVISION_ANNOTATION, "x")]);
        assert!(!set_new_replica_set_annotations(&d, &mut r, 3, true, 2000));
        assert_eq!(
            r.metadata.annotations.as_ref().unwrap()[REVISION_ANNOTATION],
            "x"
        );
    }

    #[test]
    fn new_replica_set_gets_replicas_annotations() {
        // replicas 10, maxSurge 3 → desired 10, max 13.
        let d = deployment("nginx", 10, 3, 2);
        let mut r = rs("nginx-abc", 0);
        assert!(set_new_replica_set_annotations(&d, &mut r, 1, false, 2000));
        let a = r.metadata.annotations.as_ref().unwrap();
        assert_eq!(a[REVISION_ANNOTATION], "1");
        assert_eq!(a[DESIRED_REPLICAS_ANNOTATION], "10");
        assert_eq!(a[MAX_REPLICAS_ANNOTATION], "13");
    }

    #[test]
    fn revision_history_is_trimmed_from_the_front() {
        assert_eq!(append_revision_history("", "3", 2000).as_deref(), Some("3"));
        assert_eq!(
            append_revision_history("1,2", "3", 2000).as_deref(),
            Some("1,2,3")
        );
        assert_eq!(
            append_revision_history("1,2", "3", 3).as_deref(),
            Some("2,3")
        );
        assert_eq!(append_revision_history("1,2", "345", 2), None);
    }

    #[test]
    fn max_and_last_revision() {
        let a = with_annotations(rs("a", 0), &[(REVISION_ANNOTATION, "3")]);
        let b = with_annotations(rs("b", 0), &[(REVISION_ANNOTATION, "7")]);
        let c = with_annotations(rs("c", 0), &[(REVISION_ANNOTATION, "bogus")]);
        let d = rs("d", 0);
        assert_eq!(max_revision(&[&a, &b, &c, &d]), 7);
        assert_eq!(last_revision(&[&a, &b, &c, &d]), 3);
        assert_eq!(last_revision(&[&b]), 0);
        assert_eq!(max_revision(&[]), 0);
        // Equal maxima: the second is the same number.
        let b2 = with_annotations(rs("b2", 0), &[(REVISION_ANNOTATION, "7")]);
        assert_eq!(last_revision(&[&b, &b2]), 7);
    }

    #[test]
    fn non_negative_int32_annotation() {
        // Mirrors upstream TestGetNonNegativeInt32FromAnnotation.
        let cases: [(Option<&str>, Option<i32>); 9] = [
            (None, None),
            (Some("invalid"), None),
            (Some("-1"), None),
            (Some("+1"), None),
            (Some("0"), Some(0)),
            (Some("13"), Some(13)),
            (Some("2147483647"), Some(i32::MAX)),
            (Some("2147483648"), None),
            (Some("4294967296"), None),
        ];
        for (value, expected) in cases {
            let mut r = with_annotations(rs("r", 0), &[("foo", "2")]);
            if let Some(v) = value {
                r = with_annotations(r, &[("test", v)]);
            }
            assert_eq!(
                non_negative_i32_annotation(&r.metadata, "test"),
                expected,
                "{value:?}"
            );
        }
    }

    #[test]
    fn replicas_annotations_need_update_table() {
        // Mirrors upstream TestReplicasAnnotationsNeedUpdate.
        let bare = rs("hello", 0);
        assert!(replicas_annotations_need_update(&bare, 10, 20));
        let desired_differs = with_annotations(
            rs("hello", 0),
            &[
                (DESIRED_REPLICAS_ANNOTATION, "8"),
                (MAX_REPLICAS_ANNOTATION, "20"),
            ],
        );
        assert!(replicas_annotations_need_update(&desired_differs, 10, 20));
        let max_differs = with_annotations(
            rs("hello", 0),
            &[
                (DESIRED_REPLICAS_ANNOTATION, "10"),
                (MAX_REPLICAS_ANNOTATION, "16"),
            ],
        );
        assert!(replicas_annotations_need_update(&max_differs, 10, 20));
        let up_to_date = with_annotations(
            rs("hello", 0),
            &[
                (DESIRED_REPLICAS_ANNOTATION, "10"),
                (MAX_REPLICAS_ANNOTATION, "20"),
            ],
        );
        assert!(!replicas_annotations_need_update(&up_to_date, 10, 20));
    }

    #[test]
    fn rollback_annotations() {
        let mut d = deployment("nginx", 1, 0, 0);
        assert_eq!(rollback_to(&d), None);
        d.metadata.annotations = Some(BTreeMap::from([
            (ROLLBACK_TO_ANNOTATION.to_string(), "0".to_string()),
            (REVISION_ANNOTATION.to_string(), "4".to_string()),
            ("change-cause".to_string(), "edit".to_string()),
        ]));
        assert_eq!(rollback_to(&d), Some(0));
        let target = with_annotations(
            rs("nginx-old", 0),
            &[
                (REVISION_ANNOTATION, "2"),
                ("change-cause", "create"),
                ("other", "x"),
            ],
        );
        set_deployment_annotations_to(&mut d, &target);
        let a = d.metadata.annotations.as_ref().unwrap();
        assert_eq!(a[REVISION_ANNOTATION], "4");
        assert_eq!(a["change-cause"], "create");
        assert_eq!(a["other"], "x");
        assert_eq!(a[ROLLBACK_TO_ANNOTATION], "0");
        clear_rollback_to(&mut d);
        assert_eq!(rollback_to(&d), None);
        d.metadata
            .annotations
            .as_mut()
            .unwrap()
            .insert(ROLLBACK_TO_ANNOTATION.into(), "nope".into());
        assert_eq!(rollback_to(&d), None);
    }
}
