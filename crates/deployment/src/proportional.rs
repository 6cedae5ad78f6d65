//! Proportional scaling (upstream's `sync.go scale` and `GetReplicaSetProportion`).
//!
//! When `spec.replicas` changes in the middle of a rollout (or while paused), the controller does not
//! simply resize the new ReplicaSet: that would hasten the rollout of a template that may be broken.
//! Instead every active ReplicaSet grows or shrinks in proportion to its share of the previous maximum
//! (`max-replicas` annotation = old `replicas + maxSurge`), so the mix of old and new pods stays the
//! same. Rounding leftovers go to the largest ReplicaSet.
//!
//! Example (upstream's e2e): 10 replicas, surge 3, a broken new template leaves old 8 / new 5 (13 =
//! max). Scaling to 30 allows 33: old gets round(8·33/13) = 20, new round(5·33/13) = 13.

use crate::accessors::{
    deployment_replicas, deployment_status, rs_available_replicas, rs_replicas,
};
use crate::annotations::{desired_replicas_annotation, max_replicas_annotation};
use crate::replica_sets::get_replica_count_for_replica_sets;
use crate::replica_sets::{cmp_by_creation, cmp_by_size_newer, cmp_by_size_older, filter_active};
use crate::scale::ScaleStep;
use crate::strategy::{is_rolling_update, max_surge, saturate_to_i32};
use crate::{DeploymentObject, ReplicaSetObject};

/// Whether the new ReplicaSet already holds the whole Deployment: its size, its `desired-replicas`
/// annotation and its available pods all equal `spec.replicas`. Then old ReplicaSets can simply go.
pub(crate) fn is_saturated(d: &DeploymentObject, rs: Option<&ReplicaSetObject>) -> bool {
    let Some(rs) = rs else {
        return false;
    };
    // Upstream parses with Atoi (any int) and converts to int32.
    let Some(desired) = rs
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(crate::annotations::DESIRED_REPLICAS_ANNOTATION))
        .and_then(|v| v.parse::<i64>().ok())
    else {
        return false;
    };
    let replicas = deployment_replicas(d);
    rs_replicas(rs) == replicas
        && desired as i32 == replicas
        && rs_available_replicas(rs) == replicas
}

/// The ReplicaSet's share of the change: its size scaled by (new max / max before the scale), minus
/// its size, rounded half away from zero (upstream's `getReplicaSetFraction`).
pub(crate) fn replica_set_fraction(rs: &ReplicaSetObject, d: &DeploymentObject) -> i32 {
    let replicas = deployment_replicas(d);
    let size = rs_replicas(rs);
    if replicas == 0 {
        return size.saturating_neg();
    }
    // Saturating where Go's int32 sum wraps (see `crate::rolling`).
    let max_now = replicas.saturating_add(max_surge(d));
    let max_before = match max_replicas_annotation(rs) {
        Some(max) if max != 0 => max,
        // Annotation removed or zeroed by someone else: estimate from the observed size. Not exact
        // when other ReplicaSets kept theirs, but the caps in `get_proportion` keep the total right.
        _ => {
            let observed = deployment_status(d).replicas.unwrap_or(0);
            if observed == 0 {
                return 0;
            }
            observed
        }
    };
    // In i64: upstream multiplies in int32 and could overflow for absurd sizes.
    let scaled =
        (i64::from(size).saturating_mul(i64::from(max_now))) as f64 / f64::from(max_before);
    saturate_to_i32((scaled.round() as i64).saturating_sub(i64::from(size)))
}

/// The replicas to add to (or remove from, when negative) `rs`, given the Deployment must change by
/// `to_add` in total and `added` is already handed out (upstream's `GetReplicaSetProportion`). Never
/// more than what is left, never for an empty ReplicaSet (a scaled-down one stays down).
pub(crate) fn get_proportion(
    rs: Option<&ReplicaSetObject>,
    d: &DeploymentObject,
    to_add: i32,
    added: i32,
) -> i32 {
    let Some(rs) = rs else {
        return 0;
    };
    if rs_replicas(rs) == 0 || to_add == 0 || to_add == added {
        return 0;
    }
    let fraction = replica_set_fraction(rs, d);
    let allowed = to_add.saturating_sub(added);
    if to_add > 0 {
        fraction.min(allowed)
    } else {
        fraction.max(allowed)
    }
}

/// The replicas the active ReplicaSets must gain (negative: lose) in total: `replicas + maxSurge`
/// (0 when scaling to 0) minus their current sizes (upstream's `deploymentReplicasToAdd`).
pub(crate) fn get_replica_sets_delta(
    d: &DeploymentObject,
    active_rss: &[&ReplicaSetObject],
) -> i32 {
    let replicas = deployment_replicas(d);
    let allowed = if replicas > 0 {
        replicas.saturating_add(max_surge(d))
    } else {
        0
    };
    allowed.saturating_sub(get_replica_count_for_replica_sets(active_rss))
}

/// The only active ReplicaSet, or, when none is active, the new one (else the newest old one); `None`
/// when several are active and must be scaled proportionally (upstream's `FindActiveOrLatest`).
pub(crate) fn find_active_or_latest<'a>(
    new_rs: Option<&'a ReplicaSetObject>,
    old_rss: &[&'a ReplicaSetObject],
) -> Option<&'a ReplicaSetObject> {
    let all: Vec<&ReplicaSetObject> = old_rss.iter().copied().chain(new_rs).collect();
    let active = filter_active(&all);
    match active.len() {
        0 => new_rs.or_else(|| old_rss.iter().copied().max_by(|a, b| cmp_by_creation(a, b))),
        1 => active.first().copied(),
        _ => None,
    }
}

/// Whether `spec.replicas` changed since the active ReplicaSets were last sized: some active
/// ReplicaSet's `desired-replicas` annotation differs from it. Such a sync only scales (proportionally)
/// and does not roll out.
///
/// upstream: isScalingEvent
pub(crate) fn is_scaling_event(
    d: &DeploymentObject,
    new_rs: Option<&ReplicaSetObject>,
    old_rss: &[&ReplicaSetObject],
) -> bool {
    let all: Vec<&ReplicaSetObject> = old_rss.iter().copied().chain(new_rs).collect();
    let replicas = deployment_replicas(d);
    filter_active(&all)
        .into_iter()
        .filter_map(desired_replicas_annotation)
        .any(|desired| desired != replicas)
}

/// The steps of upstream's `scale`: what a scaling event (or a sync while paused) does to the
/// ReplicaSets. Execute in order; stop at the first failure (the Deployment is requeued).
///
/// 1. At most one active ReplicaSet: it (or the newest) takes `spec.replicas` outright.
/// 2. A saturated new ReplicaSet: every active old one goes to 0.
/// 3. RollingUpdate: every active ReplicaSet gets its proportion of the delta, largest first (for
///    equal sizes, newer first when adding and older first when removing); the rounding leftover goes
///    to the first, i.e. largest. These steps are forced: they also refresh stale replicas annotations
///    of ReplicaSets whose size does not change, and may have `from == to`.
///
/// Recreate Deployments with several active ReplicaSets are left alone (the rollout handles them).
pub(crate) fn plan_proportional_scale(
    d: &DeploymentObject,
    new_rs: Option<&ReplicaSetObject>,
    old_rss: &[&ReplicaSetObject],
) -> Vec<ScaleStep> {
    let replicas = deployment_replicas(d);
    if let Some(only) = find_active_or_latest(new_rs, old_rss) {
        if rs_replicas(only) == replicas {
            return Vec::new();
        }
        return vec![ScaleStep::new(only, replicas, false)];
    }

    if is_saturated(d, new_rs) {
        return filter_active(old_rss)
            .into_iter()
            .map(|old| ScaleStep::new(old, 0, false))
            .collect();
    }

    if !is_rolling_update(d) {
        return Vec::new();
    }
    let all: Vec<&ReplicaSetObject> = old_rss.iter().copied().chain(new_rs).collect();
    let mut active = filter_active(&all);
    let to_add = get_replica_sets_delta(d, &active);
    match to_add.cmp(&0) {
        std::cmp::Ordering::Greater => active.sort_by(|a, b| cmp_by_size_newer(a, b)),
        std::cmp::Ordering::Less => active.sort_by(|a, b| cmp_by_size_older(a, b)),
        std::cmp::Ordering::Equal => {}
    }

    let mut added = 0;
    let mut sizes: Vec<i32> = active
        .iter()
        .map(|rs| {
            let proportion = get_proportion(Some(rs), d, to_add, added);
            added = added.saturating_add(proportion);
            rs_replicas(rs).saturating_add(proportion)
        })
        .collect();
    // The rounding leftover goes to the largest ReplicaSet (never below 0).
    if to_add != 0
        && let Some(first) = sizes.first_mut()
    {
        *first = first.saturating_add(to_add.saturating_sub(added)).max(0);
    }
    active
        .iter()
        .zip(sizes)
        .map(|(rs, size)| ScaleStep::new(rs, size, true))
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::apps::v1::DeploymentStatus;

    use super::*;
    use crate::annotations::{
        DESIRED_REPLICAS_ANNOTATION, MAX_REPLICAS_ANNOTATION, set_replicas_annotations,
    };
    use crate::rolling::{
        new_rs_new_replicas, reconcile_new_replica_set, reconcile_old_replica_sets,
    };
    use crate::scale::scale_replica_set;
    use crate::testutil::{deployment, rs, rs_at, with_annotations, with_available};

    #[test]
    fn scaling_near_i32_max_saturates_instead_of_overflowing() {
        const MAX: i32 = i32::MAX;
        // The max-replicas annotation of replicas 2147483647 + maxSurge 1: Go writes the wrapped
        // "-2147483648"; ours saturates.
        let d = deployment("huge", MAX, 1, 0);
        let written = scale_replica_set(&rs("huge-1", 0), MAX, &d, false).unwrap();
        let annotations = written.metadata.annotations.unwrap();
        assert_eq!(annotations[MAX_REPLICAS_ANNOTATION], MAX.to_string());
        assert_eq!(annotations[DESIRED_REPLICAS_ANNOTATION], MAX.to_string());

        // Back down to 2 from two huge active ReplicaSets sized for 2147483647.
        let sized = |r: ReplicaSetObject| {
            with_annotations(
                r,
                &[
                    (DESIRED_REPLICAS_ANNOTATION, "2147483647"),
                    (MAX_REPLICAS_ANNOTATION, "2147483647"),
                ],
            )
        };
        let new_rs = sized(rs_at("new", MAX, NEW));
        let old = sized(rs_at("old", MAX, OLD));
        let d = deployment("huge", 2, 1, 0);
        assert_eq!(get_replica_sets_delta(&d, &[&new_rs, &old]), 3 - MAX);
        // Their true total (2^32 - 2) does not fit an int32 (Go's wraps to -2 and scales *up*); the
        // saturated one only ever scales down, and later syncs (no longer scaling events: the steps
        // rewrite the annotations) bring the new ReplicaSet down to `replicas`.
        let steps = plan_proportional_scale(&d, Some(&new_rs), &[&old]);
        assert!(
            steps.iter().all(|s| s.to >= 0 && s.to <= s.from),
            "{steps:?}"
        );
        assert!(steps.iter().any(|s| s.to < s.from), "{steps:?}");

        // And up to 2147483647 from two ReplicaSets: every intermediate sum saturates.
        let small = |name: &str, at: &str| {
            with_annotations(
                rs_at(name, 1_000_000_000, at),
                &[
                    (DESIRED_REPLICAS_ANNOTATION, "2"),
                    (MAX_REPLICAS_ANNOTATION, "3"),
                ],
            )
        };
        let (new_rs, old) = (small("new", NEW), small("old", OLD));
        let d = deployment("huge", MAX, 1, 0);
        let steps = plan_proportional_scale(&d, Some(&new_rs), &[&old]);
        assert!(steps.iter().all(|s| s.to >= 0), "{steps:?}");
        assert_eq!(
            replica_set_fraction(&rs("x", MAX), &deployment("d", 0, 1, 0)),
            -MAX
        );
    }

    const NEW: &str = "2016-05-20T02:00:00Z";
    const OLD: &str = "2016-05-20T01:00:00Z";
    const OLDER: &str = "2016-05-20T00:00:00Z";

    struct Case {
        name: &'static str,
        deployment: DeploymentObject,
        old_deployment: DeploymentObject,
        new_rs: Option<ReplicaSetObject>,
        old_rss: Vec<ReplicaSetObject>,
        expected_new: Option<i32>,
        expected_old: Vec<i32>,
        desired_annotations: &'static [(&'static str, i32)],
    }

    fn d(replicas: i32) -> DeploymentObject {
        deployment("foo", replicas, 0, 0)
    }

    fn d_surge(replicas: i32, surge: i32) -> DeploymentObject {
        deployment("foo", replicas, surge, 0)
    }

    #[allow(clippy::too_many_arguments)]
    fn case(
        name: &'static str,
        deployment: DeploymentObject,
        old_deployment: DeploymentObject,
        new_rs: Option<ReplicaSetObject>,
        old_rss: Vec<ReplicaSetObject>,
        expected_new: Option<i32>,
        expected_old: Vec<i32>,
    ) -> Case {
        Case {
            name,
            deployment,
            old_deployment,
            new_rs,
            old_rss,
            expected_new,
            expected_old,
            desired_annotations: &[],
        }
    }

    #[test]
    fn scale_table() {
        // Mirrors upstream TestScale (sync_test.go).
        let mut updated_template = d(14);
        updated_template
            .spec
            .template
            .metadata
            .as_mut()
            .unwrap()
            .labels
            .as_mut()
            .unwrap()
            .insert("another".into(), "label".into());
        let mut broken_new = rs_at("foo-v2", 2, NEW);
        broken_new = with_available(broken_new, 0);

        let mut cases = vec![
            case(
                "normal scaling event: 10 -> 12",
                d(12),
                d(10),
                Some(rs_at("foo-v1", 10, NEW)),
                vec![],
                Some(12),
                vec![],
            ),
            case(
                "normal scaling event: 10 -> 5",
                d(5),
                d(10),
                Some(rs_at("foo-v1", 10, NEW)),
                vec![],
                Some(5),
                vec![],
            ),
            case(
                "proportional scaling: 5 -> 10",
                d(10),
                d(5),
                Some(rs_at("foo-v2", 2, NEW)),
                vec![rs_at("foo-v1", 3, OLD)],
                Some(4),
                vec![6],
            ),
            case(
                "proportional scaling: 5 -> 3",
                d(3),
                d(5),
                Some(rs_at("foo-v2", 2, NEW)),
                vec![rs_at("foo-v1", 3, OLD)],
                Some(1),
                vec![2],
            ),
            case(
                "proportional scaling: 9 -> 4",
                d(4),
                d(9),
                Some(rs_at("foo-v2", 8, NEW)),
                vec![rs_at("foo-v1", 1, OLD)],
                Some(4),
                vec![0],
            ),
            case(
                "proportional scaling: 7 -> 10",
                d(10),
                d(7),
                Some(rs_at("foo-v3", 2, NEW)),
                vec![rs_at("foo-v2", 3, OLD), rs_at("foo-v1", 2, OLDER)],
                Some(3),
                vec![4, 3],
            ),
            case(
                "proportional scaling: 13 -> 8",
                d(8),
                d(13),
                Some(rs_at("foo-v3", 2, NEW)),
                vec![rs_at("foo-v2", 8, OLD), rs_at("foo-v1", 3, OLDER)],
                Some(1),
                vec![5, 2],
            ),
            // Scales up the new replica set.
            case(
                "leftover distribution: 3 -> 4",
                d(4),
                d(3),
                Some(rs_at("foo-v3", 1, NEW)),
                vec![rs_at("foo-v2", 1, OLD), rs_at("foo-v1", 1, OLDER)],
                Some(2),
                vec![1, 1],
            ),
            // Scales down the older replica set.
            case(
                "leftover distribution: 3 -> 2",
                d(2),
                d(3),
                Some(rs_at("foo-v3", 1, NEW)),
                vec![rs_at("foo-v2", 1, OLD), rs_at("foo-v1", 1, OLDER)],
                Some(1),
                vec![1, 0],
            ),
            // Scales up the latest replica set first.
            case(
                "proportional scaling (no new rs): 4 -> 5",
                d(5),
                d(4),
                None,
                vec![rs_at("foo-v2", 2, OLD), rs_at("foo-v1", 2, OLDER)],
                None,
                vec![3, 2],
            ),
            case(
                "proportional scaling: 6 -> 0",
                d(0),
                d(6),
                Some(rs_at("foo-v3", 3, NEW)),
                vec![rs_at("foo-v2", 2, OLD), rs_at("foo-v1", 1, OLDER)],
                Some(0),
                vec![0, 0],
            ),
            case(
                "proportional scaling: 0 -> 6",
                d(6),
                d(6),
                Some(rs_at("foo-v3", 0, NEW)),
                vec![rs_at("foo-v2", 0, OLD), rs_at("foo-v1", 0, OLDER)],
                Some(6),
                vec![0, 0],
            ),
            Case {
                // Upstream makes foo-v3 and foo-v1's writes fail and checks foo-v2's: the pure plan
                // gives foo-v3 and foo-v1 their current sizes anyway.
                desired_annotations: &[("foo-v2", 3)],
                ..case(
                    "failed rs update",
                    d(5),
                    d(5),
                    Some(rs_at("foo-v3", 2, NEW)),
                    vec![rs_at("foo-v2", 1, OLD), rs_at("foo-v1", 1, OLDER)],
                    Some(2),
                    vec![2, 1],
                )
            },
            case(
                "deployment with surge pods",
                d_surge(20, 2),
                d_surge(10, 2),
                Some(rs_at("foo-v2", 6, NEW)),
                vec![rs_at("foo-v1", 6, OLD)],
                Some(11),
                vec![11],
            ),
            case(
                "change both surge and size",
                d_surge(50, 6),
                d_surge(10, 3),
                Some(rs_at("foo-v2", 5, NEW)),
                vec![rs_at("foo-v1", 8, OLD)],
                Some(22),
                vec![34],
            ),
            case(
                "change both size and template",
                updated_template,
                d(10),
                None,
                vec![rs_at("foo-v2", 7, NEW), rs_at("foo-v1", 3, OLD)],
                None,
                vec![10, 4],
            ),
            case(
                "saturated but broken new replica set does not affect old pods",
                deployment("foo", 2, 1, 1),
                deployment("foo", 2, 1, 1),
                Some(broken_new),
                vec![rs_at("foo-v1", 1, OLD)],
                Some(2),
                vec![1],
            ),
        ];

        for c in &mut cases {
            let desired_for = |name: &str| {
                c.desired_annotations
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map_or(deployment_replicas(&c.old_deployment), |(_, v)| *v)
            };
            let old_surge = max_surge(&c.old_deployment);
            for r in c.new_rs.iter_mut().chain(c.old_rss.iter_mut()) {
                let desired = desired_for(r.metadata.name.as_deref().unwrap());
                set_replicas_annotations(r, desired, desired + old_surge);
            }
            let old_refs: Vec<&ReplicaSetObject> = c.old_rss.iter().collect();
            let steps = plan_proportional_scale(&c.deployment, c.new_rs.as_ref(), &old_refs);
            let sizes: BTreeMap<String, i32> = c
                .new_rs
                .iter()
                .chain(c.old_rss.iter())
                .map(|r| {
                    let name = r.metadata.name.clone().unwrap();
                    let size = steps
                        .iter()
                        .find(|s| s.name == name)
                        .map_or(rs_replicas(r), |s| s.to);
                    (name, size)
                })
                .collect();
            if let (Some(expected), Some(new_rs)) = (c.expected_new, c.new_rs.as_ref()) {
                assert_eq!(
                    sizes[new_rs.metadata.name.as_deref().unwrap()],
                    expected,
                    "{}: new",
                    c.name
                );
            }
            assert_eq!(c.old_rss.len(), c.expected_old.len(), "{}", c.name);
            for (r, expected) in c.old_rss.iter().zip(&c.expected_old) {
                assert_eq!(
                    sizes[r.metadata.name.as_deref().unwrap()],
                    *expected,
                    "{}: {:?}",
                    c.name,
                    r.metadata.name
                );
            }
        }
    }

    #[test]
    fn get_replica_set_fraction_table() {
        // Mirrors upstream TestGetReplicaSetFraction:
        // (deployment replicas, deployment status.replicas, maxSurge, rs replicas, max-replicas annotation, expected).
        type Row = (&'static str, i32, i32, i32, i32, Option<&'static str>, i32);
        let cases: [Row; 9] = [
            (
                "empty deployment always scales to 0",
                0,
                0,
                0,
                10,
                None,
                -10,
            ),
            (
                "unsynced deployment does not scale when max-replicas annotation is missing",
                10,
                0,
                0,
                5,
                None,
                0,
            ),
            (
                "unsynced deployment does not scale when max-replicas annotation is 0",
                10,
                0,
                0,
                5,
                Some("0"),
                0,
            ),
            (
                "scale up by 1/5 when max-replicas annotation is missing",
                120,
                100,
                0,
                50,
                None,
                10,
            ),
            (
                "scale up by 1/5 when max-replicas annotation is 0",
                120,
                100,
                0,
                50,
                Some("0"),
                10,
            ),
            ("scale up by 1/5", 120, 0, 0, 50, Some("100"), 10),
            (
                "scale up with maxSurge by approximately 1/5",
                120,
                0,
                10,
                50,
                Some("110"),
                9,
            ),
            ("scale down by 1/6", 10, 0, 0, 6, Some("12"), -1),
            (
                "scale down with maxSurge by approximately 1/6",
                100,
                0,
                10,
                50,
                Some("130"),
                -8,
            ),
        ];
        for (name, replicas, status_replicas, surge, rs_size, max, expected) in cases {
            let mut dep = deployment("nginx", replicas, surge, 1);
            dep.status = Some(From::from(DeploymentStatus {
                replicas: Some(status_replicas),
                ..Default::default()
            }));
            let mut r = rs("nginx-1", rs_size);
            if let Some(m) = max {
                r = with_annotations(r, &[(MAX_REPLICAS_ANNOTATION, m)]);
            }
            assert_eq!(replica_set_fraction(&r, &dep), expected, "{name}");
        }
    }

    #[test]
    fn get_proportion_caps_at_what_is_left() {
        let dep = deployment("foo", 20, 0, 1);
        let r = with_annotations(rs("foo-1", 5), &[(MAX_REPLICAS_ANNOTATION, "10")]);
        // Fraction +5, but only 3 left to add.
        assert_eq!(get_proportion(Some(&r), &dep, 10, 7), 3);
        assert_eq!(get_proportion(Some(&r), &dep, 10, 10), 0);
        assert_eq!(get_proportion(None, &dep, 10, 0), 0);
        assert_eq!(get_proportion(Some(&rs("empty", 0)), &dep, 10, 0), 0);
        // Scaling down: fraction -4 of a 10 → 5 scale, capped at the 2 left to remove.
        let down = deployment("foo", 5, 0, 1);
        assert_eq!(
            get_proportion(
                Some(&with_annotations(
                    rs("a", 8),
                    &[(MAX_REPLICAS_ANNOTATION, "10")]
                )),
                &down,
                -5,
                -3
            ),
            -2
        );
    }

    #[test]
    fn is_saturated_cases() {
        // Mirrors the IsSaturated part of upstream TestAnnotationUtils, plus the negative cases.
        let dep = deployment("foo", 3, 1, 1);
        let saturated = with_available(
            with_annotations(rs("foo-1", 3), &[(DESIRED_REPLICAS_ANNOTATION, "3")]),
            3,
        );
        assert!(is_saturated(&dep, Some(&saturated)));
        assert!(!is_saturated(&dep, None));
        assert!(!is_saturated(
            &dep,
            Some(&with_available(rs("foo-1", 3), 3))
        ));
        let unavailable = with_available(
            with_annotations(rs("foo-1", 3), &[(DESIRED_REPLICAS_ANNOTATION, "3")]),
            2,
        );
        assert!(!is_saturated(&dep, Some(&unavailable)));
        let other_desired = with_available(
            with_annotations(rs("foo-1", 3), &[(DESIRED_REPLICAS_ANNOTATION, "4")]),
            3,
        );
        assert!(!is_saturated(&dep, Some(&other_desired)));
    }

    #[test]
    fn saturated_new_replica_set_scales_old_ones_to_zero() {
        let dep = deployment("foo", 3, 1, 1);
        let new_rs = with_available(
            with_annotations(
                rs_at("foo-2", 3, NEW),
                &[(DESIRED_REPLICAS_ANNOTATION, "3")],
            ),
            3,
        );
        let old = rs_at("foo-1", 2, OLD);
        let gone = rs_at("foo-0", 0, OLDER);
        let steps = plan_proportional_scale(&dep, Some(&new_rs), &[&old, &gone]);
        assert_eq!(
            steps,
            vec![ScaleStep {
                name: "foo-1".into(),
                from: 2,
                to: 0,
                force: false
            }]
        );
    }

    #[test]
    fn find_active_or_latest_cases() {
        let new_rs = rs_at("new", 0, NEW);
        let old = rs_at("old", 0, OLD);
        let older = rs_at("older", 0, OLDER);
        let name = |r: Option<&ReplicaSetObject>| r.and_then(|r| r.metadata.name.clone());
        assert_eq!(
            name(find_active_or_latest(Some(&new_rs), &[&old, &older])).as_deref(),
            Some("new")
        );
        assert_eq!(
            name(find_active_or_latest(None, &[&older, &old])).as_deref(),
            Some("old")
        );
        assert_eq!(name(find_active_or_latest(None, &[])), None);
        let active = rs_at("active", 2, OLDER);
        assert_eq!(
            name(find_active_or_latest(Some(&new_rs), &[&old, &active])).as_deref(),
            Some("active")
        );
        let active2 = rs_at("active2", 1, OLD);
        assert_eq!(
            name(find_active_or_latest(Some(&new_rs), &[&active2, &active])),
            None
        );
    }

    #[test]
    fn scaling_event_detection() {
        let dep = deployment("foo", 5, 1, 1);
        let a = with_annotations(rs("a", 2), &[(DESIRED_REPLICAS_ANNOTATION, "5")]);
        let b = with_annotations(rs("b", 0), &[(DESIRED_REPLICAS_ANNOTATION, "3")]);
        let c = rs("c", 3);
        assert!(!is_scaling_event(&dep, Some(&a), &[&b, &c]));
        let stale = with_annotations(rs("d", 1), &[(DESIRED_REPLICAS_ANNOTATION, "4")]);
        assert!(is_scaling_event(&dep, Some(&a), &[&stale]));
    }

    /// Applies steps to the ReplicaSets, as the controller would (writes through `scale_replica_set`).
    fn apply(dep: &DeploymentObject, rss: &mut [ReplicaSetObject], steps: &[ScaleStep]) {
        for step in steps {
            let r = rss
                .iter_mut()
                .find(|r| r.metadata.name.as_deref() == Some(&step.name))
                .unwrap();
            assert_eq!(crate::accessors::rs_replicas(r), step.from, "{step:?}");
            if let Some(updated) = scale_replica_set(r, step.to, dep, step.force) {
                *r = updated;
            }
        }
    }

    #[test]
    fn e2e_proportional_scaling_numbers() {
        // Upstream e2e "deployment should support proportional scaling": 10 replicas, surge 3,
        // unavailable 2, the new template never becomes available.
        let mut dep = deployment("webserver", 10, 3, 2);
        let mut old = with_available(rs_at("webserver-old", 10, OLD), 10);
        set_replicas_annotations(&mut old, 10, 13);
        let mut new_rs = rs_at("webserver-new", 0, NEW);
        // Creation: sized by NewRSNewReplicas over all ReplicaSets.
        let initial = new_rs_new_replicas(&dep, &[&old, &new_rs], &new_rs).unwrap();
        assert_eq!(initial, 3);
        new_rs.spec.replicas = Some(initial);
        set_replicas_annotations(&mut new_rs, 10, 13);
        let mut rss = vec![old, new_rs];

        // Rollout syncs until nothing moves.
        for _ in 0..5 {
            let (old, new_rs) = (&rss[0], &rss[1]);
            let mut steps: Vec<ScaleStep> = reconcile_new_replica_set(&dep, &[old, new_rs], new_rs)
                .unwrap()
                .step
                .into_iter()
                .collect();
            if steps.is_empty() {
                steps = reconcile_old_replica_sets(&dep, &[old, new_rs], &[old], new_rs).steps;
            }
            if steps.is_empty() {
                break;
            }
            apply(&dep, &mut rss, &steps);
        }
        assert_eq!((rs_replicas(&rss[0]), rs_replicas(&rss[1])), (8, 5));

        // Scale the Deployment to 30: a scaling event, scaled proportionally.
        dep.spec.replicas = Some(30);
        assert!(is_scaling_event(&dep, Some(&rss[1]), &[&rss[0]]));
        let steps = plan_proportional_scale(&dep, Some(&rss[1]), &[&rss[0]]);
        apply(&dep, &mut rss, &steps);
        assert_eq!((rs_replicas(&rss[0]), rs_replicas(&rss[1])), (20, 13));
        assert!(!is_scaling_event(&dep, Some(&rss[1]), &[&rss[0]]));
    }

    #[test]
    fn recreate_with_several_active_replica_sets_is_not_scaled_proportionally() {
        let mut dep = deployment("foo", 6, 0, 1);
        dep.spec.strategy.as_mut().unwrap().type_ = Some("Recreate".into());
        dep.spec.strategy.as_mut().unwrap().rolling_update = None;
        let a = rs_at("a", 2, OLD);
        let b = rs_at("b", 2, NEW);
        assert!(plan_proportional_scale(&dep, Some(&b), &[&a]).is_empty());
    }
}
