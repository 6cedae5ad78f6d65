//! The RollingUpdate strategy's plans (upstream's `rolling.go`): how far the new ReplicaSet may grow
//! now, and which old ReplicaSets scale down by how much, within the limits [`crate::strategy`]
//! resolves.
//!
//! A rollout step never lets the total of `spec.replicas` over all ReplicaSets exceed
//! `replicas + maxSurge`, and never scales old ReplicaSets down further than keeps
//! `replicas - maxUnavailable` pods available. Unavailable pods of the new ReplicaSet do not count as
//! room to scale old ones down, so a broken new template cannot eat the old pods (e.g. 10 replicas,
//! surge 3, unavailable 2: old 8 + new 5, and it stays there).
//!
//! Each plan keeps the numbers it was decided from, and its `explain` formats the decision log's reason
//! from them, so the explanation cannot drift from the arithmetic.

use mini_kcm_runtime::api::int_or_percent::{Rounding, scaled_value};

use crate::accessors::{
    RECREATE_STRATEGY, ROLLING_UPDATE_STRATEGY, deployment_replicas, rs_available_replicas,
    rs_replicas, strategy_type,
};
use crate::replica_sets::{
    cmp_by_creation, get_available_replica_count_for_replica_sets,
    get_replica_count_for_replica_sets,
};
use crate::scale::ScaleStep;
use crate::strategy::{max_unavailable, rolling_params, saturating_sum};
use crate::{DeploymentObject, Error, ReplicaSetObject};

/// How far maxSurge lets the new ReplicaSet of a rolling update grow now: the numbers of upstream's
/// `NewRSNewReplicas`, kept for the decision log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Surge {
    /// `spec.replicas` over all ReplicaSets.
    pub total: i32,
    /// maxSurge resolved against the Deployment's `spec.replicas`.
    pub max_surge: i32,
    /// `replicas + maxSurge`: the total no step may exceed.
    pub limit: i32,
    /// The size the new ReplicaSet may have now (its current size when `total` is at the limit).
    pub to: i32,
}

/// The RollingUpdate arm of [`new_rs_new_replicas`]: up to `replicas + maxSurge` pods in total over all
/// ReplicaSets, never above `replicas`; unchanged when the total is already at the limit.
fn surge(
    d: &DeploymentObject,
    all_rss: &[&ReplicaSetObject],
    new_rs: &ReplicaSetObject,
) -> Result<Surge, Error> {
    let replicas = deployment_replicas(d);
    // Unlike `max_surge`, upstream reads the raw field here: an absent maxSurge is an error.
    let max_surge = scaled_value(rolling_params(d).0, replicas, Rounding::Up)?;
    let total = get_replica_count_for_replica_sets(all_rss);
    // Saturating, here and in every size formula after it: `replicas` and `maxSurge` are user
    // numbers, anything the API accepts, and no user number may panic the controller (overflow in
    // a debug build) or wrap (a release build). Go wraps `replicas + surge` (2147483647 + 1 is
    // negative there, and the new ReplicaSet never grows); saturating keeps the limit at i32::MAX.
    let limit = replicas.saturating_add(max_surge);
    let current = rs_replicas(new_rs);
    let to = if total >= limit {
        current
    } else {
        current.saturating_add(
            limit
                .saturating_sub(total)
                .min(replicas.saturating_sub(current)),
        )
    };
    Ok(Surge {
        total,
        max_surge,
        limit,
        to,
    })
}

/// The size the new ReplicaSet may grow to now (upstream's `NewRSNewReplicas`).
///
/// RollingUpdate: up to `replicas + maxSurge` pods in total over all ReplicaSets, never above
/// `replicas`; unchanged when the total is already at the limit. Recreate: `replicas` outright.
pub(crate) fn new_rs_new_replicas(
    d: &DeploymentObject,
    all_rss: &[&ReplicaSetObject],
    new_rs: &ReplicaSetObject,
) -> Result<i32, Error> {
    match strategy_type(d) {
        ROLLING_UPDATE_STRATEGY => Ok(surge(d, all_rss, new_rs)?.to),
        RECREATE_STRATEGY => Ok(deployment_replicas(d)),
        other => Err(Error::UnsupportedStrategy(other.to_string())),
    }
}

/// The plan for the new ReplicaSet of a rolling update, with the numbers it was decided from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NewReplicaSetPlan {
    /// The write, when the size changes.
    pub step: Option<ScaleStep>,
    /// The new ReplicaSet's name.
    pub name: String,
    /// Its `spec.replicas` before the step.
    pub current: i32,
    /// The Deployment's `spec.replicas`.
    pub replicas: i32,
    /// Below `replicas` under RollingUpdate: how far maxSurge let it grow.
    pub surge: Option<Surge>,
}

impl NewReplicaSetPlan {
    /// Why the new ReplicaSet grows, shrinks or waits, for the decision log; `None` when it has all its
    /// replicas.
    pub(crate) fn explain(&self) -> Option<String> {
        let Self {
            name,
            current,
            replicas,
            ..
        } = self;
        if current > replicas {
            return Some(format!(
                "new ReplicaSet {name} has {current} of {replicas} wanted: scale it down"
            ));
        }
        let Surge {
            total,
            max_surge,
            limit,
            to,
        } = self.surge?;
        Some(if total >= limit {
            format!(
                "surge blocked: {total} pods ≥ replicas + maxSurge ({replicas} + {max_surge} = {limit}); new ReplicaSet {name} stays at {current}"
            )
        } else {
            format!(
                "room to surge: {total} pods < replicas + maxSurge ({replicas} + {max_surge} = {limit}); new ReplicaSet {name} may grow from {current} to {to}"
            )
        })
    }
}

/// The plan for the new ReplicaSet of a rolling update (upstream's `reconcileNewReplicaSet`): down to
/// `replicas` when above, else up as far as [`new_rs_new_replicas`] allows. A step always changes the
/// size.
///
/// upstream: reconcileNewReplicaSet
pub(crate) fn reconcile_new_replica_set(
    d: &DeploymentObject,
    all_rss: &[&ReplicaSetObject],
    new_rs: &ReplicaSetObject,
) -> Result<NewReplicaSetPlan, Error> {
    let replicas = deployment_replicas(d);
    let current = rs_replicas(new_rs);
    let mut plan = NewReplicaSetPlan {
        step: None,
        name: new_rs.metadata.name.clone().unwrap_or_default(),
        current,
        replicas,
        surge: None,
    };
    let target = match current.cmp(&replicas) {
        std::cmp::Ordering::Equal => return Ok(plan),
        std::cmp::Ordering::Greater => replicas,
        std::cmp::Ordering::Less if strategy_type(d) == ROLLING_UPDATE_STRATEGY => {
            let surge = surge(d, all_rss, new_rs)?;
            plan.surge = Some(surge);
            surge.to
        }
        std::cmp::Ordering::Less => new_rs_new_replicas(d, all_rss, new_rs)?,
    };
    plan.step = (target != current).then(|| ScaleStep::new(new_rs, target, false));
    Ok(plan)
}

/// An old ReplicaSet with the size it has at this point of a plan.
#[derive(Clone, Copy)]
struct Sized<'a> {
    rs: &'a ReplicaSetObject,
    replicas: i32,
}

impl<'a> Sized<'a> {
    fn of(rs: &'a ReplicaSetObject) -> Self {
        Sized {
            rs,
            replicas: rs_replicas(rs),
        }
    }

    fn step(&mut self, to: i32) -> ScaleStep {
        let step = ScaleStep {
            from: self.replicas,
            to,
            ..ScaleStep::new(self.rs, to, false)
        };
        self.replicas = to;
        step
    }
}

/// The outcome of scaling down unhealthy old replicas (upstream's `cleanupUnhealthyReplicas`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct UnhealthyCleanup {
    /// Steps, oldest ReplicaSet first.
    pub steps: Vec<ScaleStep>,
    /// The replicas the steps remove.
    pub scaled_down: i32,
    /// A ReplicaSet reports more available pods than `spec.replicas` (its status lags a scale-down):
    /// upstream errors out at that ReplicaSet, after executing the steps before it. The rollout then
    /// reports "not scaled" and waits for the status to catch up.
    pub aborted: bool,
}

#[cfg(test)]
/// Scales down the unavailable pods of old ReplicaSets, oldest first, at most `max_cleanup_count` in
/// total. Removing pods that are not available cannot lower availability, and the ReplicaSet
/// controller deletes not-ready pods first, so this frees room without risk.
pub(crate) fn cleanup_unhealthy_replicas(
    old_rss: &[&ReplicaSetObject],
    max_cleanup_count: i32,
) -> UnhealthyCleanup {
    let mut sized: Vec<Sized> = old_rss.iter().map(|rs| Sized::of(rs)).collect();
    cleanup_unhealthy(&mut sized, max_cleanup_count)
}

fn cleanup_unhealthy(old: &mut [Sized], max_cleanup_count: i32) -> UnhealthyCleanup {
    old.sort_by(|a, b| cmp_by_creation(a.rs, b.rs));
    let mut result = UnhealthyCleanup::default();
    for target in old.iter_mut() {
        if result.scaled_down >= max_cleanup_count {
            break;
        }
        let available = rs_available_replicas(target.rs);
        if target.replicas == 0 || target.replicas == available {
            continue;
        }
        let count = max_cleanup_count
            .saturating_sub(result.scaled_down)
            .min(target.replicas.saturating_sub(available));
        let new_replicas = target.replicas.saturating_sub(count);
        if new_replicas > target.replicas {
            tracing::debug!(
                replica_set = ?target.rs.metadata.name,
                from = target.replicas,
                to = new_replicas,
                "invalid request to scale down unhealthy replicas"
            );
            result.aborted = true;
            return result;
        }
        result.steps.push(target.step(new_replicas));
        result.scaled_down = result.scaled_down.saturating_add(count);
    }
    result
}

#[cfg(test)]
/// Steps scaling old ReplicaSets down, oldest first, by as many pods as are available above
/// `minAvailable` over `all_rss` (upstream's `scaleDownOldReplicaSetsForRollingUpdate`).
pub(crate) fn scale_down_old_replica_sets_for_rolling_update(
    d: &DeploymentObject,
    all_rss: &[&ReplicaSetObject],
    old_rss: &[&ReplicaSetObject],
) -> Vec<ScaleStep> {
    let mut sized: Vec<Sized> = old_rss.iter().map(|rs| Sized::of(rs)).collect();
    scale_down_old(
        d,
        get_available_replica_count_for_replica_sets(all_rss),
        &mut sized,
    )
}

fn scale_down_old(d: &DeploymentObject, available: i32, old: &mut [Sized]) -> Vec<ScaleStep> {
    let min_available = deployment_replicas(d).saturating_sub(max_unavailable(d));
    if available <= min_available {
        return Vec::new();
    }
    old.sort_by(|a, b| cmp_by_creation(a.rs, b.rs));
    let total = available.saturating_sub(min_available);
    let mut scaled = 0;
    let mut steps = Vec::new();
    for target in old.iter_mut() {
        if scaled >= total {
            break;
        }
        if target.replicas == 0 {
            continue;
        }
        let count = target.replicas.min(total.saturating_sub(scaled));
        steps.push(target.step(target.replicas.saturating_sub(count)));
        scaled = scaled.saturating_add(count);
    }
    steps
}

/// The plan for the old ReplicaSets of a rolling update (upstream's `reconcileOldReplicaSets`), with
/// the numbers it was decided from.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct OldReplicaSetsPlan {
    /// `allPods - minAvailable - newRSUnavailable`: how many old pods may go in this sync at most.
    pub max_scaled_down: i32,
    /// Unhealthy-replica cleanup steps, then availability-bounded scale-down steps, in execution
    /// order; one ReplicaSet may appear in both. Execute in order and stop at the first failure.
    pub steps: Vec<ScaleStep>,
    /// Whether upstream reports "scaled down" (and so syncs the rollout status and returns) once all
    /// steps succeeded. Upstream swallows a failed step: treat any failure as "not scaled", no error.
    pub scaled: bool,
    /// `spec.replicas` over the old ReplicaSets (0: nothing to plan, and the numbers below are 0).
    pub old_replicas: i32,
    /// `spec.replicas` over all ReplicaSets.
    pub all_pods: i32,
    /// The Deployment's `spec.replicas`.
    pub replicas: i32,
    /// maxUnavailable resolved against `replicas`.
    pub max_unavailable: i32,
    /// Pods the new ReplicaSet has that are not available (they make no room for old ones to go).
    pub new_unavailable: i32,
}

impl OldReplicaSetsPlan {
    /// Why old ReplicaSets shrink or wait, for the decision log; `None` when no old replicas are left.
    pub(crate) fn explain(&self) -> Option<String> {
        let Self {
            max_scaled_down: may_go,
            old_replicas: old,
            all_pods,
            replicas,
            max_unavailable: unavailable,
            new_unavailable,
            ..
        } = self;
        if *old == 0 {
            return None;
        }
        let min_available = replicas.saturating_sub(*unavailable);
        let sum = format!(
            "{all_pods} pods − minAvailable {min_available} (replicas {replicas} − maxUnavailable {unavailable}) − {new_unavailable} unavailable new = {may_go}"
        );
        Some(if *may_go <= 0 {
            format!("scale-down blocked: {sum}: no old pod may go yet")
        } else {
            format!("{old} old replicas, at most {may_go} may go now: {sum}")
        })
    }
}

/// Plans the scale-down of the active old ReplicaSets `old_rss` of a rolling update.
///
/// `all_rss` is every ReplicaSet of the Deployment (old and new). Unhealthy old replicas go first,
/// since they only block the rollout; then old ReplicaSets shrink as far as availability allows.
/// Sizes carry over between the two phases; statuses are the cached ones (upstream re-reads each
/// updated ReplicaSet from the write's response, which can only differ if the ReplicaSet controller
/// wrote a status in between).
///
/// upstream: reconcileOldReplicaSets
pub(crate) fn reconcile_old_replica_sets(
    d: &DeploymentObject,
    all_rss: &[&ReplicaSetObject],
    old_rss: &[&ReplicaSetObject],
    new_rs: &ReplicaSetObject,
) -> OldReplicaSetsPlan {
    let old_replicas = get_replica_count_for_replica_sets(old_rss);
    if old_replicas == 0 {
        return OldReplicaSetsPlan::default();
    }
    let all_pods = get_replica_count_for_replica_sets(all_rss);
    let replicas = deployment_replicas(d);
    let max_unavailable = max_unavailable(d);
    let min_available = replicas.saturating_sub(max_unavailable);
    let new_unavailable = rs_replicas(new_rs).saturating_sub(rs_available_replicas(new_rs));
    let max_scaled_down = all_pods
        .saturating_sub(min_available)
        .saturating_sub(new_unavailable);
    let mut plan = OldReplicaSetsPlan {
        max_scaled_down,
        old_replicas,
        all_pods,
        replicas,
        max_unavailable,
        new_unavailable,
        ..Default::default()
    };
    if max_scaled_down <= 0 {
        return plan;
    }

    let mut old: Vec<Sized> = old_rss.iter().map(|rs| Sized::of(rs)).collect();
    let cleanup = cleanup_unhealthy(&mut old, max_scaled_down);
    plan.steps = cleanup.steps;
    if cleanup.aborted {
        return plan;
    }
    let available = get_available_replica_count_for_replica_sets(old_rss)
        .saturating_add(rs_available_replicas(new_rs));
    let scale_down = scale_down_old(d, available, &mut old);
    let scaled_down = saturating_sum(scale_down.iter().map(ScaleStep::scaled_down));
    plan.steps.extend(scale_down);
    plan.scaled = cleanup.scaled_down.saturating_add(scaled_down) > 0;
    plan
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::{DeploymentCondition, DeploymentStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    use k8s_openapi::jiff::Timestamp;

    use super::*;
    use crate::conditions::{PROGRESSING, reasons};
    use crate::progress::{deployment_complete, deployment_progressing, deployment_timed_out};
    use crate::replica_sets::{
        get_actual_replica_count_for_replica_sets, get_ready_replica_count_for_replica_sets,
        get_terminating_replica_count_for_replica_sets,
    };
    use crate::strategy::{max_surge, min_available, resolve_fenceposts};
    use crate::testutil::{
        deployment, deployment_with, recreate, rs, rs_at, ts, with_available, with_status,
    };

    fn pct(s: &str) -> IntOrString {
        IntOrString::String(s.to_string())
    }

    const MAX: i32 = i32::MAX;

    #[test]
    fn sizes_near_i32_max_saturate_instead_of_overflowing() {
        // replicas 2147483647 + maxSurge 1 overflowed (a panic in debug builds). Go wraps to a negative
        // limit and never grows the new ReplicaSet; saturating lets it grow to `replicas`.
        let d = deployment("huge", MAX, 1, 0);
        assert_eq!(max_surge(&d), 1);
        assert_eq!(max_unavailable(&d), 0);
        assert_eq!(min_available(&d), MAX);
        let new_rs = rs("new", 0);
        assert_eq!(new_rs_new_replicas(&d, &[&new_rs], &new_rs), Ok(MAX));
        let step = reconcile_new_replica_set(&d, &[&new_rs], &new_rs)
            .unwrap()
            .step
            .unwrap();
        assert_eq!((step.from, step.to), (0, MAX));

        // Mid-rollout from one huge ReplicaSet to another: the sums of sizes would overflow.
        let old = with_available(rs_at("old", MAX, "2016-05-20T00:00:00Z"), MAX);
        let new_rs = with_available(rs_at("new", 1, "2016-05-20T01:00:00Z"), 0);
        let all = [&old, &new_rs];
        assert_eq!(get_replica_count_for_replica_sets(&all), MAX);
        assert_eq!(get_available_replica_count_for_replica_sets(&all), MAX);
        assert_eq!(new_rs_new_replicas(&d, &all, &new_rs), Ok(1));
        let plan = reconcile_old_replica_sets(&d, &all, &[&old], &new_rs);
        // All pods (saturated) - minAvailable - the new ReplicaSet's unavailable one.
        assert_eq!(plan.max_scaled_down, -1);
        assert!(plan.steps.is_empty());

        // maxSurge 100% of 2^31-1 doubles it: Go wraps to -2, saturation keeps i32::MAX.
        let d = deployment_with("huge", MAX, Some(pct("200%")), Some(pct("0%")));
        assert_eq!(max_surge(&d), MAX);

        // Unhealthy cleanup and scale-down with extreme counts.
        let sick = with_available(rs_at("sick", MAX, "2016-05-20T00:00:00Z"), 0);
        let cleanup = cleanup_unhealthy_replicas(&[&sick], MAX);
        assert_eq!(cleanup.scaled_down, MAX);
        assert_eq!(cleanup.steps[0].to, 0);
        let d = deployment("huge", MAX, 0, MAX);
        let steps = scale_down_old_replica_sets_for_rolling_update(&d, &[&old], &[&old]);
        assert_eq!(steps.len(), 1);
        assert_eq!(steps[0].to, 0);

        // Status counts that would wrap.
        let old_status = DeploymentStatus {
            replicas: Some(MAX),
            updated_replicas: Some(i32::MIN),
            ..Default::default()
        };
        let mut d = deployment("huge", MAX, 1, 0);
        d.status = Some(old_status.clone().into());
        assert!(!deployment_progressing(&d, &old_status));
    }

    #[test]
    fn resolve_fenceposts_table() {
        // Mirrors upstream TestResolveFenceposts.
        type Row = (
            Option<&'static str>,
            Option<&'static str>,
            i32,
            Option<(i32, i32)>,
        );
        let cases: [Row; 7] = [
            (Some("0%"), Some("0%"), 0, Some((0, 1))),
            (Some("39%"), Some("39%"), 10, Some((4, 3))),
            (Some("oops"), Some("39%"), 10, None),
            (Some("55%"), Some("urg"), 10, None),
            (None, Some("39%"), 10, Some((0, 3))),
            (Some("39%"), None, 10, Some((4, 0))),
            (None, None, 10, Some((0, 1))),
        ];
        for (i, (surge, unavailable, desired, expected)) in cases.into_iter().enumerate() {
            let surge = surge.map(pct);
            let unavailable = unavailable.map(pct);
            let got = resolve_fenceposts(surge.as_ref(), unavailable.as_ref(), desired);
            assert_eq!(got.ok(), expected, "case {i}");
        }
    }

    #[test]
    fn new_rs_new_replicas_table() {
        // Mirrors upstream TestNewRSNewReplicas: all RSs = one RS of 5; maxUnavailable 1.
        let cases = [
            ("can not scale up - to newRSReplicas", false, 1, 5, 1, 5),
            ("scale up - to depReplicas", false, 6, 2, 10, 6),
            ("recreate - to depReplicas", true, 3, 1, 1, 3),
        ];
        let rs5 = rs("rs5", 5);
        for (name, is_recreate, dep_replicas, new_rs_replicas, surge, expected) in cases {
            let mut d = deployment("nginx", dep_replicas, surge, 1);
            if is_recreate {
                d = recreate(d);
            }
            let new_rs = rs("new", new_rs_replicas);
            assert_eq!(
                new_rs_new_replicas(&d, &[&rs5], &new_rs),
                Ok(expected),
                "{name}"
            );
        }
        let mut d = deployment("nginx", 3, 1, 1);
        d.spec.strategy.as_mut().unwrap().type_ = Some("Bogus".into());
        assert!(new_rs_new_replicas(&d, &[&rs5], &rs("new", 1)).is_err());
        let no_surge = deployment_with("nginx", 3, None, Some(IntOrString::Int(1)));
        assert!(new_rs_new_replicas(&no_surge, &[&rs5], &rs("new", 1)).is_err());
    }

    #[test]
    fn max_unavailable_table() {
        // Mirrors upstream TestMaxUnavailable (maxSurge 1).
        let d = |replicas, unavailable: IntOrString| {
            deployment_with("d", replicas, Some(IntOrString::Int(1)), Some(unavailable))
        };
        let cases = [
            (
                "maxUnavailable less than replicas",
                d(10, IntOrString::Int(5)),
                5,
            ),
            (
                "maxUnavailable equal replicas",
                d(10, IntOrString::Int(10)),
                10,
            ),
            (
                "maxUnavailable greater than replicas",
                d(5, IntOrString::Int(10)),
                5,
            ),
            (
                "maxUnavailable with replicas is 0",
                d(0, IntOrString::Int(10)),
                0,
            ),
            (
                "maxUnavailable with Recreate deployment strategy",
                recreate(d(10, IntOrString::Int(5))),
                0,
            ),
            (
                "maxUnavailable less than replicas with percents",
                d(10, pct("50%")),
                5,
            ),
            (
                "maxUnavailable equal replicas with percents",
                d(10, pct("100%")),
                10,
            ),
            (
                "maxUnavailable greater than replicas with percents",
                d(5, pct("100%")),
                5,
            ),
        ];
        for (name, d, expected) in cases {
            assert_eq!(max_unavailable(&d), expected, "{name}");
        }
    }

    #[test]
    fn min_available_table() {
        // Mirrors upstream TestMinAvailable (maxSurge 1).
        let d = |replicas, unavailable: IntOrString| {
            deployment_with("d", replicas, Some(IntOrString::Int(1)), Some(unavailable))
        };
        let cases = [
            (d(10, IntOrString::Int(5)), 5),
            (d(10, IntOrString::Int(10)), 0),
            (d(5, IntOrString::Int(10)), 0),
            (d(0, IntOrString::Int(10)), 0),
            (recreate(d(10, IntOrString::Int(1))), 0),
            (d(10, pct("60%")), 4),
            (d(10, pct("100%")), 0),
            (d(5, pct("100%")), 0),
        ];
        for (i, (d, expected)) in cases.into_iter().enumerate() {
            assert_eq!(min_available(&d), expected, "case {i}");
        }
    }

    #[test]
    fn recreate_ignores_an_inert_rolling_update_block() {
        // The CRD copies default rollingUpdate even for Recreate.
        let mut d = deployment("d", 10, 3, 2);
        d.spec.strategy.as_mut().unwrap().type_ = Some("Recreate".into());
        assert_eq!((max_surge(&d), max_unavailable(&d)), (0, 0));
    }

    #[test]
    fn reconcile_new_replica_set_table() {
        // Mirrors upstream TestDeploymentController_reconcileNewReplicaSet (maxUnavailable 0).
        let cases = [
            (10, 0, 10, 0, None),
            (10, 2, 10, 0, Some(2)),
            (10, 2, 5, 0, Some(7)),
            (10, 2, 10, 2, None),
            (10, 2, 2, 11, Some(10)),
        ];
        for (i, (replicas, surge, old, new, expected)) in cases.into_iter().enumerate() {
            let new_rs = rs("foo-v2", new);
            let old_rs = rs("foo-v2", old);
            let d = deployment("foo", replicas, surge, 0);
            let step = reconcile_new_replica_set(&d, &[&new_rs, &old_rs], &new_rs)
                .unwrap()
                .step;
            assert_eq!(step.map(|s| s.to), expected, "case {i}");
        }
    }

    #[test]
    fn reconcile_old_replica_sets_table() {
        // Mirrors upstream TestDeploymentController_reconcileOldReplicaSets (maxSurge 0). The last
        // column is the old ReplicaSet's final size (upstream checks only "scaled").
        let cases = [
            (10, 0, 10, 0, 10, 0, true, 9),
            (10, 2, 10, 0, 10, 0, true, 8),
            // Unhealthy replicas of the old ReplicaSet are cleaned up.
            (10, 2, 10, 0, 8, 0, true, 8),
            // One unhealthy replica cleaned up, one ready pod scaled down.
            (10, 2, 10, 0, 9, 0, true, 8),
            // Unavailable pods of the new ReplicaSet do not make room for scaling old ones down.
            (10, 2, 8, 2, 8, 0, false, 8),
        ];
        for (i, (replicas, unavailable, old, new, old_ready, new_ready, scaled, final_old)) in
            cases.into_iter().enumerate()
        {
            let new_rs = with_available(rs("foo-new", new), new_ready);
            let old_rs = with_available(rs("foo-old", old), old_ready);
            let d = deployment("foo", replicas, 0, unavailable);
            let plan = reconcile_old_replica_sets(&d, &[&old_rs, &new_rs], &[&old_rs], &new_rs);
            assert_eq!(plan.scaled, scaled, "case {i}");
            let last = plan.steps.last().map_or(old, |s| s.to);
            assert_eq!(last, final_old, "case {i}");
            // Steps chain: each starts where the previous one left the ReplicaSet.
            let mut size = old;
            for s in &plan.steps {
                assert_eq!(s.from, size, "case {i}");
                size = s.to;
            }
        }
    }

    #[test]
    fn reconcile_old_replica_sets_waits_for_lagging_status() {
        // An old ReplicaSet reports more available pods than its spec (status lags a scale-down):
        // upstream errors inside the cleanup and reports "not scaled".
        let d = deployment("foo", 10, 3, 2);
        let lagging = with_available(rs_at("old-1", 5, "2016-05-20T00:00:00Z"), 7);
        let new_rs = with_available(rs_at("new", 8, "2016-05-20T01:00:00Z"), 8);
        let plan = reconcile_old_replica_sets(&d, &[&lagging, &new_rs], &[&lagging], &new_rs);
        assert!(!plan.scaled);
        assert!(plan.steps.is_empty());
    }

    #[test]
    fn cleanup_unhealthy_replicas_table() {
        // Mirrors upstream TestDeploymentController_cleanupUnhealthyReplicas.
        let cases = [(10, 8, 1, 1), (10, 8, 3, 2), (10, 8, 0, 0), (10, 10, 3, 0)];
        for (i, (old, ready, max_cleanup, expected)) in cases.into_iter().enumerate() {
            let old_rs = with_available(rs("foo-v2", old), ready);
            let result = cleanup_unhealthy_replicas(&[&old_rs], max_cleanup);
            assert_eq!(result.scaled_down, expected, "case {i}");
            assert!(!result.aborted);
        }
    }

    #[test]
    fn scale_down_old_replica_sets_for_rolling_update_table() {
        // Mirrors upstream TestDeploymentController_scaleDownOldReplicaSetsForRollingUpdate (maxSurge 0).
        let cases = [
            (10, 0, 10, 10, Some(9)),
            (10, 2, 10, 10, Some(8)),
            (10, 2, 8, 10, None),
            (10, 2, 10, 0, None),
            (10, 2, 1, 10, None),
        ];
        for (i, (replicas, unavailable, ready, old, expected)) in cases.into_iter().enumerate() {
            let old_rs = with_available(rs("foo-v2", old), ready);
            let d = deployment("foo", replicas, 0, unavailable);
            let steps = scale_down_old_replica_sets_for_rolling_update(&d, &[&old_rs], &[&old_rs]);
            assert!(steps.len() <= 1, "case {i}: one update at most");
            assert_eq!(steps.first().map(|s| s.to), expected, "case {i}");
        }
    }

    #[test]
    fn replica_counts() {
        // Mirrors upstream TestGetReplicaCountForReplicaSets.
        let mut rs1 = with_status(rs("rs1", 1), 2, 0);
        rs1.status.as_mut().unwrap().observed_generation = Some(1);
        rs1.status.as_mut().unwrap().terminating_replicas = Some(3);
        let mut rs2 = with_status(rs("rs2", 2), 3, 0);
        rs2.status.as_mut().unwrap().terminating_replicas = Some(1);
        let rs3 = with_status(rs("unsynced", 3), 0, 0);
        let mut rs4 = with_status(rs("dropped", 1), 1, 0);
        rs4.status.as_mut().unwrap().observed_generation = Some(1);

        let cases: [(&[&ReplicaSetObject], i32, i32, Option<i32>); 6] = [
            (&[&rs1], 1, 2, Some(3)),
            (&[&rs1, &rs2], 3, 5, Some(4)),
            (&[&rs3], 3, 0, Some(0)),
            (&[&rs1, &rs2, &rs3], 6, 5, Some(4)),
            (&[&rs4], 1, 1, None),
            (&[&rs1, &rs2, &rs3, &rs4], 7, 6, None),
        ];
        for (i, (sets, count, actual, terminating)) in cases.into_iter().enumerate() {
            assert_eq!(get_replica_count_for_replica_sets(sets), count, "case {i}");
            assert_eq!(
                get_actual_replica_count_for_replica_sets(sets),
                actual,
                "case {i}"
            );
            assert_eq!(
                get_terminating_replica_count_for_replica_sets(sets),
                terminating,
                "case {i}"
            );
        }
        let a = with_status(rs("a", 3), 3, 2);
        let b = with_status(rs("b", 3), 3, 1);
        assert_eq!(get_ready_replica_count_for_replica_sets(&[&a, &b]), 3);
        assert_eq!(get_available_replica_count_for_replica_sets(&[&a, &b]), 3);
    }

    fn status(replicas: i32, updated: i32, ready: i32, available: i32) -> DeploymentStatus {
        DeploymentStatus {
            replicas: Some(replicas),
            updated_replicas: Some(updated),
            ready_replicas: Some(ready),
            available_replicas: Some(available),
            ..Default::default()
        }
    }

    #[test]
    fn deployment_complete_table() {
        // Mirrors upstream TestDeploymentComplete: (desired, current, updated, available, maxUnavailable, maxSurge).
        let cases = [
            (
                "not complete: min but not all pods become available",
                (5, 5, 5, 4, 1, 0),
                false,
            ),
            (
                "not complete: min availability is not honored",
                (5, 5, 5, 3, 1, 0),
                false,
            ),
            ("complete", (5, 5, 5, 5, 0, 0), true),
            (
                "not complete: all pods are available but not updated",
                (5, 5, 4, 5, 0, 0),
                false,
            ),
            (
                "not complete: still running old pods",
                (1, 2, 1, 1, 0, 1),
                false,
            ),
            (
                "not complete: one replica deployment never comes up",
                (1, 1, 1, 0, 1, 1),
                false,
            ),
        ];
        for (name, (desired, current, updated, available, unavailable, surge), expected) in cases {
            let mut d = deployment("d", desired, surge, unavailable);
            d.status = Some(status(current, updated, 0, available).into());
            assert_eq!(
                deployment_complete(&d, d.status.as_ref().unwrap()),
                expected,
                "{name}"
            );
        }
        // The status must describe the current generation.
        let mut d = deployment("d", 1, 0, 1);
        d.metadata.generation = Some(2);
        let mut s = status(1, 1, 1, 1);
        s.observed_generation = Some(1);
        assert!(!deployment_complete(&d, &s));
        s.observed_generation = Some(2);
        assert!(deployment_complete(&d, &s));
    }

    #[test]
    fn deployment_progressing_table() {
        // Mirrors upstream TestDeploymentProgressing: (current, updated, ready, available).
        let cases = [
            (
                "progressing: updated pods",
                (10, 4, 4, 4),
                (10, 6, 4, 4),
                true,
            ),
            ("not progressing", (10, 4, 4, 4), (10, 4, 4, 4), false),
            (
                "progressing: old pods removed",
                (10, 4, 6, 6),
                (8, 4, 6, 6),
                true,
            ),
            (
                "not progressing: less new pods",
                (10, 7, 3, 3),
                (10, 6, 3, 3),
                false,
            ),
            (
                "progressing: less overall but more new pods",
                (10, 4, 7, 7),
                (8, 8, 5, 5),
                true,
            ),
            (
                "progressing: more ready pods",
                (10, 10, 9, 8),
                (10, 10, 10, 8),
                true,
            ),
            (
                "progressing: more available pods",
                (10, 10, 10, 9),
                (10, 10, 10, 10),
                true,
            ),
        ];
        for (name, old, new, expected) in cases {
            let mut d = deployment("d", 10, 0, 1);
            d.status = Some(status(old.0, old.1, old.2, old.3).into());
            assert_eq!(
                deployment_progressing(&d, &status(new.0, new.1, new.2, new.3)),
                expected,
                "{name}"
            );
        }
    }

    #[test]
    fn deployment_timed_out_table() {
        // Mirrors upstream TestDeploymentTimedOut.
        let at = |min: u32, sec: u32| ts(&format!("2016-01-01T00:{min:02}:{sec:02}Z"));
        let d = |reason: &str, pds: Option<i32>, from: Option<Timestamp>| {
            let mut d = deployment("d", 1, 0, 1);
            d.spec.progress_deadline_seconds = pds;
            d.status = Some(From::from(DeploymentStatus {
                conditions: Some(vec![DeploymentCondition {
                    type_: Some(PROGRESSING.into()),
                    status: Some("True".into()),
                    reason: (!reason.is_empty()).then(|| reason.to_string()),
                    last_update_time: from.map(Time),
                    ..Default::default()
                }]),
                ..Default::default()
            }));
            d
        };
        let cases = [
            (
                "nil progressDeadlineSeconds specified - no timeout",
                d("", None, Some(at(1, 9))),
                at(1, 20),
                false,
            ),
            (
                "infinite progressDeadlineSeconds specified - no timeout",
                d("", Some(i32::MAX), Some(at(1, 9))),
                at(1, 20),
                false,
            ),
            (
                "progressDeadlineSeconds: 10s, now - started => 00:01:20 - 00:01:09 => 11s",
                d("", Some(10), Some(at(1, 9))),
                at(1, 20),
                true,
            ),
            (
                "progressDeadlineSeconds: 10s, now - started => 00:01:20 - 00:01:11 => 9s",
                d("", Some(10), Some(at(1, 11))),
                at(1, 20),
                false,
            ),
            (
                "previous status was a complete deployment",
                d(reasons::NEW_RS_AVAILABLE, None, None),
                at(1, 20),
                false,
            ),
            (
                "complete deployment with a deadline never times out",
                d(reasons::NEW_RS_AVAILABLE, Some(10), Some(at(0, 0))),
                at(1, 20),
                false,
            ),
            (
                "already timed out",
                d(reasons::TIMED_OUT, Some(10), Some(at(1, 19))),
                at(1, 20),
                true,
            ),
            (
                "exactly at the deadline is not past it",
                d("", Some(10), Some(at(1, 10))),
                at(1, 20),
                false,
            ),
        ];
        for (name, d, now, expected) in cases {
            assert_eq!(
                deployment_timed_out(&d, d.status.as_ref().unwrap(), now),
                expected,
                "{name}"
            );
        }
    }

    #[test]
    fn reasons_name_the_numbers_the_plans_use() {
        let d = deployment("foo", 10, 3, 2);
        let new = with_status(rs("foo-new", 5), 5, 0);
        let old = with_status(rs("foo-old", 8), 8, 8);
        let all = [&old, &new];
        let why_new = |all: &[&ReplicaSetObject], new: &ReplicaSetObject| {
            reconcile_new_replica_set(&d, all, new).unwrap().explain()
        };
        let why_old = |all: &[&ReplicaSetObject], old: &[&ReplicaSetObject], new| {
            reconcile_old_replica_sets(&d, all, old, new).explain()
        };
        assert_eq!(
            why_new(&all, &new).unwrap(),
            "surge blocked: 13 pods ≥ replicas + maxSurge (10 + 3 = 13); new ReplicaSet foo-new stays at 5"
        );
        let small_old = with_status(rs("foo-old", 4), 4, 4);
        assert_eq!(
            why_new(&[&small_old, &new], &new).unwrap(),
            "room to surge: 9 pods < replicas + maxSurge (10 + 3 = 13); new ReplicaSet foo-new may grow from 5 to 9"
        );
        // The same numbers as the plan: 13 − 8 − 5 = 0, so nothing may go (upstream's "stays there").
        assert_eq!(
            reconcile_old_replica_sets(&d, &all, &[&old], &new).steps,
            []
        );
        assert_eq!(
            why_old(&all, &[&old], &new).unwrap(),
            "scale-down blocked: 13 pods − minAvailable 8 (replicas 10 − maxUnavailable 2) − 5 unavailable new = 0: no old pod may go yet"
        );
        let done = with_status(rs("foo-new", 10), 10, 10);
        assert_eq!(why_new(&[&done], &done), None);
        assert_eq!(why_old(&[&done], &[], &done), None);

        // A scaled-down Deployment, and old pods free to go once the new ones are available.
        let big = with_status(rs("foo-new", 12), 12, 12);
        assert_eq!(
            why_new(&[&big], &big).unwrap(),
            "new ReplicaSet foo-new has 12 of 10 wanted: scale it down"
        );
        let ready = with_status(rs("foo-new", 5), 5, 5);
        assert_eq!(
            why_old(&[&old, &ready], &[&old], &ready).unwrap(),
            "8 old replicas, at most 5 may go now: 13 pods − minAvailable 8 (replicas 10 − maxUnavailable 2) − 0 unavailable new = 5"
        );
    }
}
