//! The Recreate strategy: every old pod is gone before the new ReplicaSet is created or scaled up
//! (upstream's `recreate.go`).
//!
//! The rollout itself is simple (old ReplicaSets to 0, then the new one to `spec.replicas`); the only
//! decision worth a function is whether old pods are still around, since "scaled to 0" does not mean
//! "pods gone": terminating pods still run until their grace period ends.

use mini_kcm_runtime::pods::cached::CachedPod;

use crate::ReplicaSetObject;
use crate::replica_sets::filter_active;
use crate::replica_sets::get_actual_replica_count_for_replica_sets;
use crate::scale::ScaleStep;

/// Steps scaling every active old ReplicaSet to 0 (lazy, so inactive ones are not written).
pub(crate) fn scale_down_old_replica_sets_for_recreate(
    old_rss: &[&ReplicaSetObject],
) -> Vec<ScaleStep> {
    filter_active(old_rss)
        .into_iter()
        .map(|rs| ScaleStep::new(rs, 0, false))
        .collect()
}

/// Whether old pods may still be running: an old ReplicaSet still reports pods, or a pod owned by a
/// ReplicaSet other than the new one is not in a terminal phase (`Unknown`, e.g. on an unreachable
/// node, counts as running: it might be).
///
/// `pods` pairs each pod of the Deployment's ReplicaSets with its owning ReplicaSet's UID (upstream's
/// pod map).
pub(crate) fn old_pods_running<'a>(
    new_rs: Option<&ReplicaSetObject>,
    old_rss: &[&ReplicaSetObject],
    pods: impl IntoIterator<Item = (&'a str, &'a CachedPod)>,
) -> bool {
    if get_actual_replica_count_for_replica_sets(old_rss) > 0 {
        return true;
    }
    let new_uid = new_rs.and_then(|rs| rs.metadata.uid.as_deref());
    pods.into_iter()
        .filter(|(owner, _)| Some(*owner) != new_uid)
        .any(|(_, pod)| {
            let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
            !matches!(phase, Some("Failed") | Some("Succeeded"))
        })
}

#[cfg(test)]
mod tests {
    use mini_kcm_runtime::pods::cached::CachedPodStatus;

    use super::*;
    use crate::testutil::{rs, with_status, with_uid};

    fn pod(phase: &str) -> CachedPod {
        CachedPod {
            status: Some(CachedPodStatus {
                phase: (!phase.is_empty()).then(|| phase.to_string()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn old_pods_running_table() {
        // Mirrors upstream TestOldPodsRunning.
        let some = with_uid(rs("foo-some-uid", 0), "some-uid");
        let other = with_uid(rs("foo-other-uid", 0), "other-uid");
        let empty_status = with_status(rs("rs-1", 0), 0, 0);
        let still_reporting = with_status(rs("rs-1", 0), 1, 0);
        let (running, pending, failed, succeeded, unknown, unset) = (
            pod("Running"),
            pod("Pending"),
            pod("Failed"),
            pod("Succeeded"),
            pod("Unknown"),
            pod(""),
        );

        type Row<'a> = (
            &'a str,
            Vec<&'a ReplicaSetObject>,
            Vec<(&'a str, &'a CachedPod)>,
            bool,
        );
        let cases: Vec<Row> = vec![
            ("no old RSs", vec![], vec![], false),
            (
                "old RSs with running pods",
                vec![&some, &other],
                vec![
                    ("some-uid", &unset),
                    ("some-uid", &unset),
                    ("other-uid", &unset),
                    ("other-uid", &unset),
                ],
                true,
            ),
            (
                "old RSs without pods but with non-zero status replicas",
                vec![&still_reporting],
                vec![],
                true,
            ),
            (
                "old RSs without pods or non-zero status replicas",
                vec![&empty_status],
                vec![],
                false,
            ),
            (
                "old RSs with zero status replicas but pods in terminal state are present",
                vec![&empty_status],
                vec![("uid-1", &failed), ("uid-1", &succeeded)],
                false,
            ),
            (
                "old RSs with zero status replicas but pod in unknown phase present",
                vec![&empty_status],
                vec![("uid-1", &unknown)],
                true,
            ),
            (
                "old RSs with zero status replicas with pending pod present",
                vec![&empty_status],
                vec![("uid-1", &pending)],
                true,
            ),
            (
                "old RSs with zero status replicas with running pod present",
                vec![&empty_status],
                vec![("uid-1", &running)],
                true,
            ),
            (
                "old RSs with zero status replicas but pods in terminal state and pending are present",
                vec![&empty_status],
                vec![
                    ("uid-1", &failed),
                    ("uid-1", &succeeded),
                    ("uid-3", &pending),
                ],
                true,
            ),
        ];
        for (name, old, pods, expected) in cases {
            assert_eq!(old_pods_running(None, &old, pods), expected, "{name}");
        }
    }

    #[test]
    fn pods_of_the_new_replica_set_do_not_count() {
        let new_rs = with_uid(rs("new", 3), "new-uid");
        let running = pod("Running");
        assert!(!old_pods_running(
            Some(&new_rs),
            &[],
            [("new-uid", &running)]
        ));
        assert!(old_pods_running(
            Some(&new_rs),
            &[],
            [("old-uid", &running)]
        ));
    }

    #[test]
    fn scale_down_old_replica_sets() {
        // Mirrors upstream TestScaleDownOldReplicaSets.
        let a = rs("foo-0", 3);
        let b = rs("foo-1", 0);
        let steps = scale_down_old_replica_sets_for_recreate(&[&a, &b]);
        assert_eq!(
            steps,
            vec![ScaleStep {
                name: "foo-0".into(),
                from: 3,
                to: 0,
                force: false
            }]
        );
    }
}
