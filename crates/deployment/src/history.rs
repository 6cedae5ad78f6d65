//! Revision history cleanup (upstream's `cleanupDeployment`): keep at most `revisionHistoryLimit` old
//! ReplicaSets, the rest are deleted, lowest revision first.
//!
//! Old ReplicaSets are kept for rollbacks. Only fully drained ones are deleted: no pods in spec or
//! status, and a status that describes their current generation (otherwise a scale-down might not be
//! observed yet). The controller runs this only when a rollout is complete or while paused.

use crate::accessors::{generation, rs_observed_generation, rs_replicas, rs_status_replicas};
use crate::replica_sets::cmp_by_revision;
use crate::{DeploymentObject, ReplicaSetObject};

/// Whether the Deployment limits its history (`revisionHistoryLimit` set and not the "keep all"
/// sentinel `i32::MAX`).
pub(crate) fn has_revision_history_limit(d: &DeploymentObject) -> bool {
    d.spec.revision_history_limit.is_some_and(|l| l != i32::MAX)
}

/// The old ReplicaSets to delete, in deletion order. Delete them one by one (default options),
/// ignoring NotFound and stopping at the first other error (so a struggling API server is not
/// flooded).
pub(crate) fn replica_sets_to_clean_up<'a>(
    d: &DeploymentObject,
    old_rss: &[&'a ReplicaSetObject],
) -> Vec<&'a ReplicaSetObject> {
    let Some(limit) = d
        .spec
        .revision_history_limit
        .filter(|_| has_revision_history_limit(d))
    else {
        return Vec::new();
    };
    // ReplicaSets already being deleted neither count nor get deleted again.
    let mut cleanable: Vec<&ReplicaSetObject> = old_rss
        .iter()
        .copied()
        .filter(|rs| rs.metadata.deletion_timestamp.is_none())
        .collect();
    let diff = i64::try_from(cleanable.len())
        .unwrap_or(i64::MAX)
        .saturating_sub(i64::from(limit));
    if diff <= 0 {
        return Vec::new();
    }
    cleanable.sort_by(|a, b| cmp_by_revision(a, b));
    cleanable
        .into_iter()
        .take(usize::try_from(diff).unwrap_or(usize::MAX))
        .filter(|rs| {
            rs_status_replicas(rs) == 0
                && rs_replicas(rs) == 0
                && generation(&rs.metadata) <= rs_observed_generation(rs)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;
    use crate::annotations::REVISION_ANNOTATION;
    use crate::testutil::{deployment, rs, rs_at, ts, with_annotations, with_status};

    fn with_limit(limit: i32) -> DeploymentObject {
        let mut d = deployment("foo", 1, 0, 0);
        d.spec.revision_history_limit = Some(limit);
        d
    }

    fn names(v: Vec<&ReplicaSetObject>) -> Vec<String> {
        let mut n: Vec<String> = v.iter().map(|r| r.metadata.name.clone().unwrap()).collect();
        n.sort();
        n
    }

    #[test]
    fn cleanup_deployment_table() {
        // Mirrors upstream TestDeploymentController_cleanupDeployment.
        let s = |name: &str, spec: i32, status: i32| with_status(rs(name, spec), status, 0);
        let mut already_deleted = s("foo-1", 0, 0);
        already_deleted.metadata.deletion_timestamp = Some(Time(ts("2024-01-01T00:00:00Z")));
        let cases: Vec<(Vec<ReplicaSetObject>, i32, usize)> = vec![
            (
                vec![s("foo-1", 0, 0), s("foo-2", 0, 0), s("foo-3", 0, 0)],
                1,
                2,
            ),
            // Only the ReplicaSet with spec.replicas = status.replicas = 0 is deleted.
            (
                vec![
                    s("foo-1", 0, 0),
                    s("foo-2", 0, 1),
                    s("foo-3", 1, 0),
                    s("foo-4", 1, 1),
                ],
                0,
                1,
            ),
            (vec![s("foo-1", 0, 0), s("foo-2", 0, 0)], 0, 2),
            (vec![s("foo-1", 1, 1), s("foo-2", 1, 1)], 0, 0),
            (vec![already_deleted], 0, 0),
            // Unlimited history.
            (
                vec![s("foo-1", 0, 0), s("foo-2", 0, 0), s("foo-3", 0, 0)],
                i32::MAX,
                0,
            ),
        ];
        for (i, (old, limit, expected)) in cases.into_iter().enumerate() {
            let refs: Vec<&ReplicaSetObject> = old.iter().collect();
            assert_eq!(
                replica_sets_to_clean_up(&with_limit(limit), &refs).len(),
                expected,
                "case {i}"
            );
        }
        let refs = [&rs("foo-1", 0)];
        assert!(replica_sets_to_clean_up(&deployment("foo", 1, 0, 0), &refs).is_empty());
    }

    #[test]
    fn cleanup_deployment_order_table() {
        // Mirrors upstream TestDeploymentController_cleanupDeploymentOrder: creation order foo-1 <
        // foo-2 < foo-3 < foo-4.
        let r = |name: &str, replicas: i32, created: &str, revision: &str| {
            let mut r = with_status(rs_at(name, replicas, created), replicas, 0);
            if !revision.is_empty() {
                r = with_annotations(r, &[(REVISION_ANNOTATION, revision)]);
            }
            r
        };
        let (t1, t2, t3, t4) = (
            "2024-01-01T00:00:00Z",
            "2024-01-01T00:01:00Z",
            "2024-01-01T00:02:00Z",
            "2024-01-01T00:03:00Z",
        );
        let cases: Vec<(Vec<ReplicaSetObject>, i32, Vec<&str>)> = vec![
            (
                vec![r("foo-1", 0, t1, "1"), r("foo-2", 0, t2, "2")],
                1,
                vec!["foo-1"],
            ),
            (
                vec![r("foo-1", 0, t1, "2"), r("foo-2", 0, t2, "1")],
                1,
                vec!["foo-2"],
            ),
            (
                vec![r("foo-1", 0, t1, "1"), r("foo-2", 0, t2, "")],
                1,
                vec!["foo-2"],
            ),
            (
                vec![r("foo-1", 0, t1, ""), r("foo-2", 0, t2, "2")],
                1,
                vec!["foo-1"],
            ),
            (
                vec![
                    r("foo-1", 1, t1, "1"),
                    r("foo-2", 0, t2, "2"),
                    r("foo-3", 0, t3, "3"),
                ],
                1,
                vec!["foo-2"],
            ),
            (
                vec![
                    r("foo-1", 1, t1, "1"),
                    r("foo-2", 1, t2, "2"),
                    r("foo-3", 0, t3, "3"),
                ],
                1,
                vec![],
            ),
            (
                vec![
                    r("foo-1", 0, t1, "3"),
                    r("foo-2", 0, t2, "1"),
                    r("foo-3", 0, t3, "4"),
                    r("foo-4", 0, t4, "2"),
                ],
                2,
                vec!["foo-2", "foo-4"],
            ),
        ];
        for (i, (old, limit, expected)) in cases.into_iter().enumerate() {
            let refs: Vec<&ReplicaSetObject> = old.iter().collect();
            assert_eq!(
                names(replica_sets_to_clean_up(&with_limit(limit), &refs)),
                expected,
                "case {i}"
            );
        }
    }

    #[test]
    fn unobserved_generation_is_kept() {
        let mut r = with_status(rs("foo-1", 0), 0, 0);
        r.metadata.generation = Some(3);
        r.status.as_mut().unwrap().observed_generation = Some(2);
        assert!(replica_sets_to_clean_up(&with_limit(0), &[&r]).is_empty());
        r.status.as_mut().unwrap().observed_generation = Some(3);
        assert_eq!(replica_sets_to_clean_up(&with_limit(0), &[&r]).len(), 1);
    }
}
