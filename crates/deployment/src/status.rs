//! The Deployment's status: recomputed from its ReplicaSets on every sync ([`calculate_status`],
//! [`rollout_status`]) and only written when the result differs ([`deployment_status_equal`]). When it
//! does not differ and a rollout is still under way, [`requeue_after_for_progress`] says when to look
//! again so the deadline is noticed on time rather than at the next resync. A copy's status also carries
//! `status.selector` for its scale subresource ([`status_as_written`]); a missing or stale one alone
//! makes the status differ ([`status_needs_write`]).

use std::time::Duration;

use k8s_openapi::api::apps::v1::{DeploymentCondition, DeploymentStatus};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use mini_kcm_runtime::api::kinds::{ApiFamily, StatusWithSelector};
use mini_kcm_runtime::switches::features::{Feature, FeatureGates};

use crate::accessors::{deployment_replicas, deployment_status, generation, name};
use crate::conditions::{
    AVAILABLE, CONDITION_FALSE, CONDITION_TRUE, CONDITION_UNKNOWN, PROGRESSING, REPLICA_FAILURE,
    get_deployment_condition, messages, new_deployment_condition, reason, reasons,
    remove_deployment_condition, replica_set_to_deployment_condition, set_deployment_condition,
};
use crate::progress::{
    deployment_complete, deployment_progressing, deployment_timed_out, has_progress_deadline,
};
use crate::replica_sets::{
    get_actual_replica_count_for_replica_sets, get_available_replica_count_for_replica_sets,
    get_ready_replica_count_for_replica_sets, get_replica_count_for_replica_sets,
    get_terminating_replica_count_for_replica_sets,
};
use crate::strategy::max_unavailable;
use crate::{DeploymentObject, ReplicaSetObject};

/// The Deployment's status computed from its ReplicaSets (upstream's `calculateStatus`).
///
/// `all_rss` is every ReplicaSet of the Deployment, the new one included; `new_rs` the new one, if it
/// exists. Counts are sums over the ReplicaSets (`updatedReplicas` over the new one only); existing
/// conditions are kept (other controllers' condition types too) and `Available` is set. With the
/// `DeploymentReplicaSetTerminatingReplicas` gate (beta, on since v1.35) `terminatingReplicas` is summed
/// as well.
pub(crate) fn calculate_status(
    all_rss: &[&ReplicaSetObject],
    new_rs: Option<&ReplicaSetObject>,
    d: &DeploymentObject,
    now: Timestamp,
) -> DeploymentStatus {
    let available = get_available_replica_count_for_replica_sets(all_rss);
    // More available pods than desired while scaling down: nothing is unavailable.
    let unavailable = get_replica_count_for_replica_sets(all_rss)
        .saturating_sub(available)
        .max(0);
    let current = deployment_status(d);
    let new_rss: Vec<&ReplicaSetObject> = new_rs.into_iter().collect();
    let mut status = DeploymentStatus {
        observed_generation: Some(generation(&d.metadata)),
        replicas: Some(get_actual_replica_count_for_replica_sets(all_rss)),
        updated_replicas: Some(get_actual_replica_count_for_replica_sets(&new_rss)),
        ready_replicas: Some(get_ready_replica_count_for_replica_sets(all_rss)),
        available_replicas: Some(available),
        unavailable_replicas: Some(unavailable),
        collision_count: current.collision_count,
        terminating_replicas: get_terminating_replica_count_for_replica_sets(all_rss),
        conditions: current.conditions.clone().filter(|c| !c.is_empty()),
    };
    let condition = if available >= deployment_replicas(d).saturating_sub(max_unavailable(d)) {
        new_deployment_condition(
            AVAILABLE,
            CONDITION_TRUE,
            reasons::MINIMUM_REPLICAS_AVAILABLE,
            messages::MINIMUM_AVAILABLE,
            now,
        )
    } else {
        new_deployment_condition(
            AVAILABLE,
            CONDITION_FALSE,
            reasons::MINIMUM_REPLICAS_UNAVAILABLE,
            messages::MINIMUM_UNAVAILABLE,
            now,
        )
    };
    set_deployment_condition(&mut status, condition);
    status
}

/// The status of a Deployment during a rollout (upstream's `syncRolloutStatus`, without the write).
///
/// [`calculate_status`], plus the Progressing condition when a progress deadline is set (removed when
/// not): complete → True `NewReplicaSetAvailable`; progress since the stored status → True
/// `ReplicaSetUpdated` with a fresh lastUpdateTime (that renewal is what keeps the deadline from
/// expiring while pods keep coming up); otherwise past the deadline → False `ProgressDeadlineExceeded`.
/// A rollout already recorded as complete is not re-evaluated while nothing new is rolling out. Also
/// promotes a ReplicaSet's ReplicaFailure condition (the new ReplicaSet's first) or removes it.
pub(crate) fn rollout_status(
    all_rss: &[&ReplicaSetObject],
    new_rs: Option<&ReplicaSetObject>,
    d: &DeploymentObject,
    now: Timestamp,
) -> DeploymentStatus {
    let mut status = calculate_status(all_rss, new_rs, d, now);
    let deadline = has_progress_deadline(d);
    if !deadline {
        remove_deployment_condition(&mut status, PROGRESSING);
    }

    let stored = deployment_status(d);
    let current = get_deployment_condition(&stored, PROGRESSING);
    let already_complete = status.replicas == status.updated_replicas
        && current.is_some_and(|c| reason(c) == reasons::NEW_RS_AVAILABLE);
    if deadline && !already_complete {
        let d_name = name(&d.metadata);
        let rs_name = new_rs.map(|rs| name(&rs.metadata));
        if deployment_complete(d, &status) {
            let msg = messages::subject(d_name, rs_name, "has successfully progressed.");
            let c = new_deployment_condition(
                PROGRESSING,
                CONDITION_TRUE,
                reasons::NEW_RS_AVAILABLE,
                &msg,
                now,
            );
            set_deployment_condition(&mut status, c);
        } else if deployment_progressing(d, &status) {
            let msg = messages::subject(d_name, rs_name, "is progressing.");
            let mut c = new_deployment_condition(
                PROGRESSING,
                CONDITION_TRUE,
                reasons::REPLICA_SET_UPDATED,
                &msg,
                now,
            );
            // Unlike `set_deployment_condition`, the condition is renewed even when the reason is the
            // same: its lastUpdateTime is the progress clock.
            if let Some(current) = current {
                if current.status.as_deref() == Some(CONDITION_TRUE) {
                    c.last_transition_time = current.last_transition_time.clone();
                }
                remove_deployment_condition(&mut status, PROGRESSING);
            }
            set_deployment_condition(&mut status, c);
        } else if deployment_timed_out(d, &status, now) {
            let msg = messages::subject(d_name, rs_name, "has timed out progressing.");
            let c = new_deployment_condition(
                PROGRESSING,
                CONDITION_FALSE,
                reasons::TIMED_OUT,
                &msg,
                now,
            );
            set_deployment_condition(&mut status, c);
        }
    }

    match replica_failure(all_rss, new_rs) {
        Some(c) => set_deployment_condition(&mut status, c),
        None => remove_deployment_condition(&mut status, REPLICA_FAILURE),
    }
    status
}

/// The ReplicaFailure condition to show: the new ReplicaSet's, else the first old one's.
fn replica_failure(
    all_rss: &[&ReplicaSetObject],
    new_rs: Option<&ReplicaSetObject>,
) -> Option<DeploymentCondition> {
    let failure = |rs: &ReplicaSetObject| {
        rs.status
            .as_ref()?
            .conditions
            .as_ref()?
            .iter()
            .find(|c| c.type_.as_deref() == Some(REPLICA_FAILURE))
            .map(replica_set_to_deployment_condition)
    };
    new_rs
        .and_then(failure)
        .or_else(|| all_rss.iter().find_map(|rs| failure(rs)))
}

/// Records a pause or resume in the Progressing condition (upstream's `checkPausedConditions`); true
/// when the status changed and must be written. Only with a progress deadline, and never over a
/// recorded timeout. Without the Resumed reason, a Deployment paused longer than its deadline would
/// time out the moment it is resumed.
pub(crate) fn check_paused_conditions(d: &mut DeploymentObject, now: Timestamp) -> bool {
    if !has_progress_deadline(d) {
        return false;
    }
    let current_reason = d
        .status
        .as_ref()
        .and_then(|s| get_deployment_condition(s, PROGRESSING))
        .map(reason);
    if current_reason == Some(reasons::TIMED_OUT) {
        return false;
    }
    let paused_recorded = current_reason == Some(reasons::PAUSED);
    let paused = d.spec.paused.unwrap_or(false);
    let (reason, message) = match (paused, paused_recorded) {
        (true, false) => (reasons::PAUSED, messages::PAUSED),
        (false, true) => (reasons::RESUMED, messages::RESUMED),
        _ => return false,
    };
    let c = new_deployment_condition(PROGRESSING, CONDITION_UNKNOWN, reason, message, now);
    set_deployment_condition(d.status.get_or_insert_with(Default::default), c);
    true
}

/// Padding added to [`ProgressRequeue::After`] before requeueing, so the check lands just after the
/// deadline despite timer and clock skew (upstream adds one second).
pub(crate) const PROGRESS_REQUEUE_PAD: Duration = Duration::from_secs(1);

/// When to look at a Deployment again for its progress deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProgressRequeue {
    /// No deadline to watch (none set, no Progressing condition, complete, or already timed out).
    Never,
    /// Less than a second left: requeue now, rate-limited.
    Now,
    /// The deadline is this far away; requeue after it plus [`PROGRESS_REQUEUE_PAD`].
    After(Duration),
}

impl ProgressRequeue {
    /// The delay to give the work queue (`None`: do not requeue; zero: rate-limited requeue now).
    pub(crate) fn queue_delay(self) -> Option<Duration> {
        match self {
            ProgressRequeue::Never => None,
            ProgressRequeue::Now => Some(Duration::ZERO),
            ProgressRequeue::After(after) => Some(after + PROGRESS_REQUEUE_PAD),
        }
    }
}

/// Upstream's `requeueStuckDeployment`, for a sync whose computed `new_status` equals the stored one:
/// without this, a stalled rollout would only be declared timed out at the next resync. The deadline
/// is the stored Progressing condition's lastUpdateTime + `progressDeadlineSeconds`.
pub(crate) fn requeue_after_for_progress(
    d: &DeploymentObject,
    new_status: &DeploymentStatus,
    now: Timestamp,
) -> ProgressRequeue {
    let Some(deadline) = d
        .spec
        .progress_deadline_seconds
        .filter(|_| has_progress_deadline(d))
    else {
        return ProgressRequeue::Never;
    };
    let stored = deployment_status(d);
    let Some(current) = get_deployment_condition(&stored, PROGRESSING) else {
        return ProgressRequeue::Never;
    };
    if deployment_complete(d, new_status) || reason(current) == reasons::TIMED_OUT {
        return ProgressRequeue::Never;
    }
    // An absent lastUpdateTime is Go's zero time: long past.
    let Some(from) = current.last_update_time.as_ref().map(|t| t.0) else {
        return ProgressRequeue::Now;
    };
    let Ok(expiry) = from.checked_add(SignedDuration::from_secs(i64::from(deadline))) else {
        return ProgressRequeue::Never;
    };
    let after = expiry.duration_since(now);
    if after < SignedDuration::from_secs(1) {
        return ProgressRequeue::Now;
    }
    ProgressRequeue::After(after.unsigned_abs())
}

/// Whether two statuses are the same as far as the API server can tell: the counts it omits when zero
/// (`replicas`, `observedGeneration`, ...) equal 0, and no conditions equals an empty list. Compare the
/// computed status with the stored one through this, not `==`, or every sync would write.
pub(crate) fn deployment_status_equal(a: &DeploymentStatus, b: &DeploymentStatus) -> bool {
    normalized(a) == normalized(b)
}

/// `status` as the Deployment `d` of `family` stores it: with `status.selector` for a copy (what its scale
/// subresource reports to HorizontalPodAutoscalers), without for apps/v1; and without
/// `terminatingReplicas` while the `DeploymentReplicaSetTerminatingReplicas` gate is off (upstream then
/// leaves it unset).
pub(crate) fn status_as_written(
    d: &DeploymentObject,
    family: ApiFamily,
    features: &FeatureGates,
    mut status: DeploymentStatus,
) -> StatusWithSelector<DeploymentStatus> {
    if !features.enabled(Feature::DeploymentReplicaSetTerminatingReplicas) {
        status.terminating_replicas = None;
    }
    StatusWithSelector::new(status, family.status_selector(&d.spec.selector))
}

/// Whether the stored status must be replaced by `new`: it differs in what [`deployment_status_equal`]
/// compares, or in the selector (a copy stored by an older version or by another writer gets its selector
/// without waiting for a count to change).
pub(crate) fn status_needs_write(
    stored: Option<&StatusWithSelector<DeploymentStatus>>,
    new: &StatusWithSelector<DeploymentStatus>,
) -> bool {
    match stored {
        None => {
            !deployment_status_equal(&DeploymentStatus::default(), new) || new.selector.is_some()
        }
        Some(stored) => !deployment_status_equal(stored, new) || stored.selector != new.selector,
    }
}

fn normalized(s: &DeploymentStatus) -> DeploymentStatus {
    let zero = |v: Option<i32>| Some(v.unwrap_or(0));
    DeploymentStatus {
        available_replicas: zero(s.available_replicas),
        collision_count: s.collision_count,
        conditions: Some(s.conditions.clone().unwrap_or_default()),
        observed_generation: Some(s.observed_generation.unwrap_or(0)),
        ready_replicas: zero(s.ready_replicas),
        replicas: zero(s.replicas),
        terminating_replicas: s.terminating_replicas,
        unavailable_replicas: zero(s.unavailable_replicas),
        updated_replicas: zero(s.updated_replicas),
    }
}

/// The Deployment marked as not rolled out because its selector uses `pod-template-hash`
/// ([`crate::hash::selects_on_pod_template_hash`]): Progressing False with mini-kcm's reason
/// `SelectorUsesPodTemplateHash`, and this generation observed. Unchanged when already so marked, so the
/// controller writes once, not on every sync.
pub(crate) fn refused_for_pod_template_hash(
    d: &DeploymentObject,
    now: Timestamp,
) -> DeploymentObject {
    let mut refused = d.clone();
    let generation = refused.metadata.generation;
    let status = refused.status.get_or_insert_with(Default::default);
    if status.observed_generation.unwrap_or(0) < generation.unwrap_or(0) {
        status.observed_generation = generation;
    }
    set_deployment_condition(
        status,
        new_deployment_condition(
            PROGRESSING,
            CONDITION_FALSE,
            reasons::SELECTOR_USES_POD_TEMPLATE_HASH,
            messages::SELECTOR_USES_POD_TEMPLATE_HASH,
            now,
        ),
    );
    refused
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::{ReplicaSetCondition, ReplicaSetStatus};

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;
    use crate::conditions::tests::cond;
    use crate::testutil::{deployment, recreate, rs, ts, with_status};

    #[test]
    fn terminating_replicas_are_written_only_with_their_gate_on() {
        let d = deployment("foo", 5, 1, 1);
        let status = DeploymentStatus {
            terminating_replicas: Some(2),
            ..Default::default()
        };
        let on = FeatureGates::default();
        let written = status_as_written(&d, ApiFamily::Apps, &on, status.clone());
        assert_eq!(written.terminating_replicas, Some(2));
        let off = on.with(Feature::DeploymentReplicaSetTerminatingReplicas, false);
        let written = status_as_written(&d, ApiFamily::Copies, &off, status);
        assert_eq!(written.terminating_replicas, None);
        assert!(written.selector.is_some(), "a copy still gets its selector");
    }

    #[test]
    fn calculate_status_sums_and_keeps_foreign_conditions() {
        let now = ts("2024-01-01T00:00:00Z");
        let mut d = deployment("foo", 5, 1, 1);
        d.metadata.generation = Some(4);
        d.status = Some(From::from(DeploymentStatus {
            collision_count: Some(2),
            conditions: Some(vec![cond("Custom", CONDITION_TRUE, "Mine")]),
            ..Default::default()
        }));
        let old = with_status(rs("foo-1", 2), 3, 3);
        let new_rs = with_status(rs("foo-2", 4), 2, 1);
        let s = calculate_status(&[&old, &new_rs], Some(&new_rs), &d, now);
        assert_eq!(s.observed_generation, Some(4));
        assert_eq!(s.replicas, Some(5));
        assert_eq!(s.updated_replicas, Some(2));
        assert_eq!(s.ready_replicas, Some(4));
        assert_eq!(s.available_replicas, Some(4));
        assert_eq!(s.unavailable_replicas, Some(2));
        assert_eq!(s.collision_count, Some(2));
        assert_eq!(s.terminating_replicas, Some(0));
        let c = s.conditions.as_ref().unwrap();
        assert_eq!(c[0].type_.as_deref(), Some("Custom"));
        // 4 available >= 5 - 1.
        assert_eq!(
            (
                c[1].type_.as_deref().unwrap_or_default(),
                c[1].status.as_deref().unwrap_or_default()
            ),
            (AVAILABLE, CONDITION_TRUE)
        );
        assert_eq!(c[1].message.as_deref(), Some(messages::MINIMUM_AVAILABLE));

        // Recreate tolerates no unavailability.
        let d = recreate(deployment("foo", 5, 1, 1));
        let s = calculate_status(&[&old, &new_rs], Some(&new_rs), &d, now);
        let c = get_deployment_condition(&s, AVAILABLE).unwrap();
        assert_eq!(reason(c), reasons::MINIMUM_REPLICAS_UNAVAILABLE);
        // Scaling down: more available than specified is not negative unavailability.
        let big = with_status(rs("foo-3", 1), 6, 6);
        assert_eq!(
            calculate_status(&[&big], None, &d, now).unavailable_replicas,
            Some(0)
        );
    }

    /// Upstream's `currentDeployment`: Recreate, a name, counts, conditions.
    fn current(
        pds: Option<i32>,
        replicas: i32,
        status: (i32, i32, i32),
        conditions: Vec<DeploymentCondition>,
    ) -> DeploymentObject {
        let mut d = recreate(deployment("progress-test", replicas, 0, 0));
        d.spec.progress_deadline_seconds = pds;
        d.status = Some(From::from(DeploymentStatus {
            replicas: Some(status.0),
            updated_replicas: Some(status.1),
            available_replicas: Some(status.2),
            conditions: (!conditions.is_empty()).then_some(conditions),
            ..Default::default()
        }));
        d
    }

    fn rs_avail(name: &str, spec: i32, replicas: i32, available: i32) -> ReplicaSetObject {
        let mut r = rs(name, spec);
        r.status = Some(From::from(ReplicaSetStatus {
            replicas,
            available_replicas: Some(available),
            ..Default::default()
        }));
        r
    }

    #[test]
    fn sync_rollout_status_table() {
        // Mirrors upstream TestSyncRolloutStatus. `now` is far past every deadline, as upstream's
        // real clock is.
        let test_time = ts("2017-02-15T18:49:00Z");
        let now = ts("2024-01-01T00:00:00Z");
        let timed_out = cond(PROGRESSING, CONDITION_FALSE, reasons::TIMED_OUT);
        let at = |mut c: DeploymentCondition| {
            c.last_update_time = Some(Time(test_time));
            c.last_transition_time = Some(Time(test_time));
            c
        };
        let new_rs_available = at(cond(PROGRESSING, CONDITION_TRUE, reasons::NEW_RS_AVAILABLE));
        let rs_updated = at(cond(
            PROGRESSING,
            CONDITION_TRUE,
            reasons::REPLICA_SET_UPDATED,
        ));
        let pds = Some(60);

        struct Case {
            name: &'static str,
            d: DeploymentObject,
            others: Vec<ReplicaSetObject>,
            new_rs: Option<ReplicaSetObject>,
            expected: Option<(&'static str, &'static str)>,
            keeps_update: bool,
            keeps_transition: bool,
        }
        let cases = vec![
            Case {
                name: "General: remove Progressing condition and do not estimate progress if deployment has no Progress Deadline",
                d: current(None, 3, (2, 2, 2), vec![rs_updated.clone()]),
                others: vec![rs_avail("bar", 0, 1, 1)],
                new_rs: Some(rs_avail("foo", 3, 2, 2)),
                expected: None,
                keeps_update: false,
                keeps_transition: false,
            },
            Case {
                name: "General: do not estimate progress of deployment with only one active ReplicaSet",
                d: current(pds, 3, (3, 3, 3), vec![new_rs_available.clone()]),
                others: vec![rs_avail("bar", 3, 3, 3)],
                new_rs: None,
                expected: Some((CONDITION_TRUE, reasons::NEW_RS_AVAILABLE)),
                keeps_update: true,
                keeps_transition: true,
            },
            Case {
                name: "DeploymentProgressing: dont update lastTransitionTime if deployment already has Progressing=True",
                d: current(pds, 3, (2, 2, 2), vec![rs_updated.clone()]),
                others: vec![rs_avail("bar", 0, 1, 1)],
                new_rs: Some(rs_avail("foo", 3, 2, 2)),
                expected: Some((CONDITION_TRUE, reasons::REPLICA_SET_UPDATED)),
                keeps_update: false,
                keeps_transition: true,
            },
            Case {
                name: "DeploymentProgressing: update everything if deployment has Progressing=False",
                d: current(pds, 3, (2, 2, 2), vec![timed_out.clone()]),
                others: vec![rs_avail("bar", 0, 1, 1)],
                new_rs: Some(rs_avail("foo", 3, 2, 2)),
                expected: Some((CONDITION_TRUE, reasons::REPLICA_SET_UPDATED)),
                keeps_update: false,
                keeps_transition: false,
            },
            Case {
                name: "DeploymentProgressing: create Progressing condition if it does not exist",
                d: current(pds, 3, (2, 2, 2), vec![]),
                others: vec![rs_avail("bar", 0, 1, 1)],
                new_rs: Some(rs_avail("foo", 3, 2, 2)),
                expected: Some((CONDITION_TRUE, reasons::REPLICA_SET_UPDATED)),
                keeps_update: false,
                keeps_transition: false,
            },
            Case {
                name: "DeploymentComplete: dont update lastTransitionTime if deployment already has Progressing=True",
                d: current(pds, 3, (3, 3, 3), vec![rs_updated.clone()]),
                others: vec![],
                new_rs: Some(rs_avail("foo", 3, 3, 3)),
                expected: Some((CONDITION_TRUE, reasons::NEW_RS_AVAILABLE)),
                keeps_update: false,
                keeps_transition: true,
            },
            Case {
                name: "DeploymentComplete: update everything if deployment has Progressing=False",
                d: current(pds, 3, (3, 3, 3), vec![timed_out.clone()]),
                others: vec![],
                new_rs: Some(rs_avail("foo", 3, 3, 3)),
                expected: Some((CONDITION_TRUE, reasons::NEW_RS_AVAILABLE)),
                keeps_update: false,
                keeps_transition: false,
            },
            Case {
                name: "DeploymentComplete: create Progressing condition if it does not exist",
                d: current(pds, 3, (3, 3, 3), vec![]),
                others: vec![],
                new_rs: Some(rs_avail("foo", 3, 3, 3)),
                expected: Some((CONDITION_TRUE, reasons::NEW_RS_AVAILABLE)),
                keeps_update: false,
                keeps_transition: false,
            },
            Case {
                name: "DeploymentComplete: defend against NPE when newRS=nil",
                d: current(pds, 0, (3, 3, 3), vec![rs_updated.clone()]),
                others: vec![rs_avail("foo", 0, 0, 0)],
                new_rs: None,
                expected: Some((CONDITION_TRUE, reasons::NEW_RS_AVAILABLE)),
                keeps_update: false,
                keeps_transition: true,
            },
            Case {
                name: "DeploymentTimedOut: update status if rollout exceeds Progress Deadline",
                d: current(pds, 3, (2, 2, 2), vec![rs_updated.clone()]),
                others: vec![],
                new_rs: Some(rs_avail("foo", 3, 2, 2)),
                expected: Some((CONDITION_FALSE, reasons::TIMED_OUT)),
                keeps_update: false,
                keeps_transition: false,
            },
            Case {
                name: "DeploymentTimedOut: do not update status if deployment has existing timedOut condition",
                d: current(pds, 3, (2, 2, 2), vec![timed_out.clone()]),
                others: vec![],
                new_rs: Some(rs_avail("foo", 3, 2, 2)),
                expected: Some((CONDITION_FALSE, reasons::TIMED_OUT)),
                keeps_update: true,
                keeps_transition: true,
            },
        ];
        for c in cases {
            let mut all: Vec<&ReplicaSetObject> = c.others.iter().collect();
            all.extend(c.new_rs.as_ref());
            let s = rollout_status(&all, c.new_rs.as_ref(), &c.d, now);
            let got = get_deployment_condition(&s, PROGRESSING);
            let Some((status, reason_)) = c.expected else {
                assert!(got.is_none(), "{}", c.name);
                continue;
            };
            let got = got.unwrap_or_else(|| panic!("{}: no Progressing condition", c.name));
            assert_eq!(
                (got.status.as_deref().unwrap_or_default(), reason(got)),
                (status, reason_),
                "{}",
                c.name
            );
            let stored = get_deployment_condition(c.d.status.as_ref().unwrap(), PROGRESSING);
            if c.keeps_update {
                assert_eq!(
                    got.last_update_time,
                    stored.unwrap().last_update_time,
                    "{}",
                    c.name
                );
            } else {
                assert_eq!(got.last_update_time, Some(Time(now)), "{}", c.name);
            }
            if c.keeps_transition {
                assert_eq!(
                    got.last_transition_time,
                    stored.unwrap().last_transition_time,
                    "{}",
                    c.name
                );
            } else {
                assert_eq!(got.last_transition_time, Some(Time(now)), "{}", c.name);
            }
        }
    }

    #[test]
    fn rollout_status_messages_name_the_replica_set() {
        let now = ts("2024-01-01T00:00:00Z");
        let d = current(Some(60), 3, (0, 0, 0), vec![]);
        let new_rs = rs_avail("foo-abc", 3, 3, 3);
        let s = rollout_status(&[&new_rs], Some(&new_rs), &d, now);
        let c = get_deployment_condition(&s, PROGRESSING).unwrap();
        assert_eq!(
            c.message.as_deref(),
            Some("ReplicaSet \"foo-abc\" has successfully progressed.")
        );
        let d = current(Some(60), 0, (3, 3, 3), vec![]);
        let s = rollout_status(&[], None, &d, now);
        let c = get_deployment_condition(&s, PROGRESSING).unwrap();
        assert_eq!(
            c.message.as_deref(),
            Some("Deployment \"progress-test\" has successfully progressed.")
        );
        let mut stuck = current(Some(60), 3, (3, 3, 1), vec![]);
        stuck.status.as_mut().unwrap().conditions = Some(vec![DeploymentCondition {
            last_update_time: Some(Time(ts("2023-12-31T00:00:00Z"))),
            ..cond(PROGRESSING, CONDITION_TRUE, reasons::REPLICA_SET_UPDATED)
        }]);
        let slow = rs_avail("foo-abc", 3, 3, 1);
        let s = rollout_status(&[&slow], Some(&slow), &stuck, now);
        let c = get_deployment_condition(&s, PROGRESSING).unwrap();
        assert_eq!(
            c.message.as_deref(),
            Some("ReplicaSet \"foo-abc\" has timed out progressing.")
        );
    }

    #[test]
    fn replica_failure_is_promoted_and_removed() {
        let now = ts("2024-01-01T00:00:00Z");
        let failed_at = ts("2023-12-31T00:00:00Z");
        let failure = |msg: &str| ReplicaSetCondition {
            type_: Some(REPLICA_FAILURE.into()),
            status: Some(CONDITION_TRUE.into()),
            reason: Some("FailedCreate".into()),
            message: Some(msg.into()),
            last_transition_time: Some(Time(failed_at)),
        };
        let mut old = rs_avail("old", 1, 1, 1);
        old.status.as_mut().unwrap().conditions = Some(vec![failure("old quota")]);
        let mut new_rs = rs_avail("new", 1, 0, 0);
        let d = current(None, 2, (1, 0, 1), vec![]);
        let s = rollout_status(&[&old, &new_rs], Some(&new_rs), &d, now);
        let c = get_deployment_condition(&s, REPLICA_FAILURE).unwrap();
        assert_eq!(c.message.as_deref(), Some("old quota"));
        assert_eq!(c.last_update_time, Some(Time(failed_at)));
        new_rs.status.as_mut().unwrap().conditions = Some(vec![failure("new quota")]);
        let s = rollout_status(&[&old, &new_rs], Some(&new_rs), &d, now);
        assert_eq!(
            get_deployment_condition(&s, REPLICA_FAILURE)
                .unwrap()
                .message
                .as_deref(),
            Some("new quota")
        );
        let d = current(
            None,
            2,
            (1, 0, 1),
            vec![cond(REPLICA_FAILURE, CONDITION_TRUE, "FailedCreate")],
        );
        let healthy = rs_avail("new", 1, 1, 1);
        let s = rollout_status(&[&healthy], Some(&healthy), &d, now);
        assert!(get_deployment_condition(&s, REPLICA_FAILURE).is_none());
    }

    #[test]
    fn requeue_stuck_deployment_table() {
        // Mirrors upstream TestRequeueStuckDeployment.
        let pds = Some(60);
        let failed = vec![cond(PROGRESSING, CONDITION_FALSE, reasons::TIMED_OUT)];
        let stuck = vec![DeploymentCondition {
            type_: Some(PROGRESSING.into()),
            status: Some(CONDITION_TRUE.into()),
            last_update_time: Some(Time(ts("2017-02-15T18:49:00Z"))),
            ..Default::default()
        }];
        let new_status = |replicas, updated, available| DeploymentStatus {
            replicas: Some(replicas),
            updated_replicas: Some(updated),
            available_replicas: Some(available),
            ..Default::default()
        };
        let default_now = ts("2017-02-15T18:49:00Z");
        let cases = [
            (
                "nil progressDeadlineSeconds specified",
                current(None, 4, (3, 3, 2), vec![]),
                new_status(3, 3, 2),
                default_now,
                ProgressRequeue::Never,
            ),
            (
                "infinite progressDeadlineSeconds specified",
                current(Some(i32::MAX), 4, (3, 3, 2), vec![]),
                new_status(3, 3, 2),
                default_now,
                ProgressRequeue::Never,
            ),
            (
                "no progressing condition found",
                current(pds, 4, (3, 3, 2), vec![]),
                new_status(3, 3, 2),
                default_now,
                ProgressRequeue::Never,
            ),
            (
                "complete deployment does not need to be requeued",
                current(pds, 3, (3, 3, 3), vec![]),
                new_status(3, 3, 3),
                default_now,
                ProgressRequeue::Never,
            ),
            (
                "already failed deployment does not need to be requeued",
                current(pds, 3, (3, 3, 0), failed),
                new_status(3, 3, 0),
                default_now,
                ProgressRequeue::Never,
            ),
            (
                "stuck deployment - 30s",
                current(pds, 3, (3, 3, 1), stuck.clone()),
                new_status(3, 3, 1),
                ts("2017-02-15T18:49:30Z"),
                ProgressRequeue::After(Duration::from_secs(30)),
            ),
            (
                "stuck deployment - 1s",
                current(pds, 3, (3, 3, 1), stuck.clone()),
                new_status(3, 3, 1),
                ts("2017-02-15T18:49:59Z"),
                ProgressRequeue::After(Duration::from_secs(1)),
            ),
            (
                "failed deployment - less than a second => now",
                current(pds, 3, (3, 3, 1), stuck.clone()),
                new_status(3, 3, 1),
                ts("2017-02-15T18:49:59.000000001Z"),
                ProgressRequeue::Now,
            ),
            (
                "failed deployment - now",
                current(pds, 3, (3, 3, 1), stuck.clone()),
                new_status(3, 3, 1),
                ts("2017-02-15T18:50:00Z"),
                ProgressRequeue::Now,
            ),
            (
                "failed deployment - 1s after deadline",
                current(pds, 3, (3, 3, 1), stuck.clone()),
                new_status(3, 3, 1),
                ts("2017-02-15T18:50:01Z"),
                ProgressRequeue::Now,
            ),
            (
                "failed deployment - 60s after deadline",
                current(pds, 3, (3, 3, 1), stuck),
                new_status(3, 3, 1),
                ts("2017-02-15T18:51:00Z"),
                ProgressRequeue::Now,
            ),
        ];
        for (name, d, status, now, expected) in cases {
            assert_eq!(
                requeue_after_for_progress(&d, &status, now),
                expected,
                "{name}"
            );
        }
        assert_eq!(
            ProgressRequeue::After(Duration::from_secs(30)).queue_delay(),
            Some(Duration::from_secs(31))
        );
        assert_eq!(ProgressRequeue::Now.queue_delay(), Some(Duration::ZERO));
        assert_eq!(ProgressRequeue::Never.queue_delay(), None);
    }

    #[test]
    fn paused_and_resumed_conditions() {
        let now = ts("2024-01-01T00:00:00Z");
        let mut d = current(Some(600), 3, (3, 3, 3), vec![]);
        assert!(!check_paused_conditions(&mut d, now));
        d.spec.paused = Some(true);
        assert!(check_paused_conditions(&mut d, now));
        let c = get_deployment_condition(d.status.as_ref().unwrap(), PROGRESSING).unwrap();
        assert_eq!(
            (
                c.status.as_deref().unwrap_or_default(),
                reason(c),
                c.message.as_deref()
            ),
            (CONDITION_UNKNOWN, reasons::PAUSED, Some(messages::PAUSED))
        );
        assert!(!check_paused_conditions(&mut d, now));
        d.spec.paused = Some(false);
        assert!(check_paused_conditions(&mut d, now));
        let c = get_deployment_condition(d.status.as_ref().unwrap(), PROGRESSING).unwrap();
        assert_eq!(reason(c), reasons::RESUMED);
        // A recorded timeout is never overwritten; no deadline, no condition.
        let mut timed_out = current(
            Some(600),
            3,
            (3, 3, 3),
            vec![cond(PROGRESSING, CONDITION_FALSE, reasons::TIMED_OUT)],
        );
        timed_out.spec.paused = Some(true);
        assert!(!check_paused_conditions(&mut timed_out, now));
        let mut no_deadline = current(None, 3, (3, 3, 3), vec![]);
        no_deadline.spec.paused = Some(true);
        assert!(!check_paused_conditions(&mut no_deadline, now));
    }

    #[test]
    fn status_equality_ignores_omitted_zeroes() {
        let computed = DeploymentStatus {
            observed_generation: Some(0),
            replicas: Some(0),
            updated_replicas: Some(0),
            ready_replicas: Some(0),
            available_replicas: Some(0),
            unavailable_replicas: Some(0),
            conditions: Some(vec![]),
            ..Default::default()
        };
        assert!(deployment_status_equal(
            &computed,
            &DeploymentStatus::default()
        ));
        let other = DeploymentStatus {
            replicas: Some(1),
            ..Default::default()
        };
        assert!(!deployment_status_equal(&computed, &other));
        // Pointers keep their zero: collisionCount 0 is not absent.
        let counted = DeploymentStatus {
            collision_count: Some(0),
            ..Default::default()
        };
        assert!(!deployment_status_equal(
            &counted,
            &DeploymentStatus::default()
        ));
    }

    #[test]
    fn a_copy_stores_its_selector_and_apps_v1_does_not() {
        let d = deployment("foo", 1, 0, 1);
        let status = DeploymentStatus::default();
        let copy = status_as_written(
            &d,
            ApiFamily::Copies,
            &FeatureGates::default(),
            status.clone(),
        );
        assert_eq!(copy.selector.as_deref(), Some("foo=bar"));
        assert_eq!(copy.status, status);
        let apps = status_as_written(&d, ApiFamily::Apps, &FeatureGates::default(), status);
        assert_eq!(apps.selector, None);
    }

    /// A copy whose stored status lacks the selector (an older version or another writer stored it), or
    /// holds a stale one, is written although nothing else changed; apps/v1 compares as before.
    #[test]
    fn a_missing_or_wrong_selector_needs_a_write() {
        let d = deployment("foo", 3, 0, 1);
        let counts = DeploymentStatus {
            observed_generation: Some(1),
            replicas: Some(3),
            updated_replicas: Some(3),
            available_replicas: Some(3),
            ..Default::default()
        };
        let new = status_as_written(
            &d,
            ApiFamily::Copies,
            &FeatureGates::default(),
            counts.clone(),
        );
        assert!(!status_needs_write(Some(&new), &new));
        for stored in [None, Some("foo=baz".to_string()), Some(String::new())] {
            let stored = StatusWithSelector::new(counts.clone(), stored);
            assert!(
                status_needs_write(Some(&stored), &new),
                "stored selector {:?}",
                stored.selector
            );
        }
        assert!(status_needs_write(None, &new), "never written");

        let apps = status_as_written(
            &d,
            ApiFamily::Apps,
            &FeatureGates::default(),
            counts.clone(),
        );
        assert!(!status_needs_write(Some(&counts.clone().into()), &apps));
        assert!(!status_needs_write(
            None,
            &status_as_written(
                &d,
                ApiFamily::Apps,
                &FeatureGates::default(),
                Default::default()
            )
        ));
        // A count change alone still needs a write.
        let more = DeploymentStatus {
            replicas: Some(4),
            ..counts.clone()
        };
        assert!(status_needs_write(
            Some(&new),
            &status_as_written(&d, ApiFamily::Copies, &FeatureGates::default(), more)
        ));
    }
}
