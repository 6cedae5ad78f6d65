//! Judging a rollout's progress (upstream's `DeploymentComplete`, `DeploymentProgressing`,
//! `DeploymentTimedOut`): complete, progressing since the stored status, or past its
//! `progressDeadlineSeconds`.

use k8s_openapi::api::apps::v1::DeploymentStatus;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use crate::DeploymentObject;
use crate::accessors::{deployment_replicas, deployment_status, generation};
use crate::conditions::{PROGRESSING, get_deployment_condition, reasons};

/// A rollout is complete once every desired replica is updated and available, no old pod is left,
/// and the status describes the current generation.
pub(crate) fn deployment_complete(d: &DeploymentObject, status: &DeploymentStatus) -> bool {
    let replicas = deployment_replicas(d);
    status.updated_replicas.unwrap_or(0) == replicas
        && status.replicas.unwrap_or(0) == replicas
        && status.available_replicas.unwrap_or(0) == replicas
        && status.observed_generation.unwrap_or(0) >= generation(&d.metadata)
}

/// Whether `new_status` shows progress over the Deployment's stored status: more updated, ready or
/// available pods, or fewer old pods.
pub(crate) fn deployment_progressing(d: &DeploymentObject, new_status: &DeploymentStatus) -> bool {
    let old = deployment_status(d);
    let count = |v: Option<i32>| v.unwrap_or(0);
    let old_old_replicas = count(old.replicas).saturating_sub(count(old.updated_replicas));
    let new_old_replicas =
        count(new_status.replicas).saturating_sub(count(new_status.updated_replicas));
    count(new_status.updated_replicas) > count(old.updated_replicas)
        || new_old_replicas < old_old_replicas
        || count(new_status.ready_replicas) > count(old.ready_replicas)
        || count(new_status.available_replicas) > count(old.available_replicas)
}

/// Whether the Deployment has a progress deadline (`progressDeadlineSeconds` set and not the
/// "no deadline" sentinel `i32::MAX`).
pub(crate) fn has_progress_deadline(d: &DeploymentObject) -> bool {
    d.spec
        .progress_deadline_seconds
        .is_some_and(|s| s != i32::MAX)
}

/// Whether the rollout has exceeded its progress deadline at `now`: the Progressing condition of
/// `new_status` already says so, or its lastUpdateTime is more than `progressDeadlineSeconds` ago.
/// Never after a completed rollout (reason NewReplicaSetAvailable): its condition may simply be old.
pub(crate) fn deployment_timed_out(
    d: &DeploymentObject,
    new_status: &DeploymentStatus,
    now: Timestamp,
) -> bool {
    let Some(deadline) = d
        .spec
        .progress_deadline_seconds
        .filter(|_| has_progress_deadline(d))
    else {
        return false;
    };
    let Some(condition) = get_deployment_condition(new_status, PROGRESSING) else {
        return false;
    };
    match condition.reason.as_deref() {
        Some(reasons::NEW_RS_AVAILABLE) => return false,
        Some(reasons::TIMED_OUT) => return true,
        _ => {}
    }
    // An absent lastUpdateTime is Go's zero time: long past any deadline.
    let Some(from) = condition.last_update_time.as_ref().map(|t| t.0) else {
        return true;
    };
    from.checked_add(SignedDuration::from_secs(i64::from(deadline)))
        .is_ok_and(|expiry| expiry < now)
}
