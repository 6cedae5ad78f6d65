//! Deployment conditions: what `kubectl rollout status` and users read.
//!
//! Three condition types: `Available` (minimum availability reached), `Progressing` (the rollout's
//! state against `progressDeadlineSeconds`) and `ReplicaFailure` (copied from a ReplicaSet that cannot
//! create or delete pods), their reasons and messages, and how one is set (keeping its transition time
//! when only the reason changes) or removed. The status that carries them is computed in
//! [`crate::status`].

use k8s_openapi::api::apps::v1::{DeploymentCondition, DeploymentStatus, ReplicaSetCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

/// Condition type: the Deployment has its minimum availability.
pub(crate) const AVAILABLE: &str = "Available";
/// Condition type: the rollout's progress against its deadline.
pub(crate) const PROGRESSING: &str = "Progressing";
/// Condition type: a ReplicaSet failed to create or delete pods.
pub(crate) const REPLICA_FAILURE: &str = "ReplicaFailure";

pub(crate) const CONDITION_TRUE: &str = "True";
pub(crate) const CONDITION_FALSE: &str = "False";
pub(crate) const CONDITION_UNKNOWN: &str = "Unknown";

/// Condition reasons, as upstream.
pub(crate) mod reasons {
    /// Progressing: a ReplicaSet was scaled as part of the rollout.
    pub(crate) const REPLICA_SET_UPDATED: &str = "ReplicaSetUpdated";
    /// Progressing (False): the new ReplicaSet could not be created.
    pub(crate) const FAILED_RS_CREATE: &str = "ReplicaSetCreateError";
    /// Progressing: the new ReplicaSet was created.
    pub(crate) const NEW_REPLICA_SET: &str = "NewReplicaSetCreated";
    /// Progressing: an existing ReplicaSet was found to be the new one.
    pub(crate) const FOUND_NEW_RS: &str = "FoundNewReplicaSet";
    /// Progressing: the rollout is complete.
    pub(crate) const NEW_RS_AVAILABLE: &str = "NewReplicaSetAvailable";
    /// Progressing (False): no progress within `progressDeadlineSeconds`.
    pub(crate) const TIMED_OUT: &str = "ProgressDeadlineExceeded";
    /// Progressing (Unknown): paused; no progress is expected.
    pub(crate) const PAUSED: &str = "DeploymentPaused";
    /// Progressing (Unknown): resumed; the deadline counts from now, not from before the pause.
    pub(crate) const RESUMED: &str = "DeploymentResumed";
    /// Available: at least `replicas - maxUnavailable` pods are available.
    pub(crate) const MINIMUM_REPLICAS_AVAILABLE: &str = "MinimumReplicasAvailable";
    /// Available (False): fewer than that.
    pub(crate) const MINIMUM_REPLICAS_UNAVAILABLE: &str = "MinimumReplicasUnavailable";
    /// Progressing (False), mini-kcm's own: the selector uses `pod-template-hash`, so nothing is rolled
    /// out (upstream would create ReplicaSets without bound).
    pub(crate) const SELECTOR_USES_POD_TEMPLATE_HASH: &str = "SelectorUsesPodTemplateHash";
}

/// Event reasons of the Deployment controller besides `ScalingReplicaSet`.
pub(crate) mod event_reasons {
    /// Warning, mini-kcm's own: the selector uses `pod-template-hash`; nothing is rolled out.
    pub(crate) const SELECTOR_USES_POD_TEMPLATE_HASH: &str =
        super::reasons::SELECTOR_USES_POD_TEMPLATE_HASH;
}

/// Upstream's messages, for conditions and events.
pub(crate) mod messages {
    pub(crate) const SELECTOR_USES_POD_TEMPLATE_HASH: &str = "The selector uses the label key pod-template-hash, which the controller sets to its own value on every ReplicaSet and pod: it would never select what it creates. Nothing is rolled out until the Deployment is re-created with another selector.";
    pub(crate) const PAUSED: &str = "Deployment is paused";
    pub(crate) const RESUMED: &str = "Deployment is resumed";
    pub(crate) const MINIMUM_AVAILABLE: &str = "Deployment has minimum availability.";
    pub(crate) const MINIMUM_UNAVAILABLE: &str = "Deployment does not have minimum availability.";

    pub(crate) fn found_new_replica_set(rs: &str) -> String {
        format!("Found new replica set \"{rs}\"")
    }

    pub(crate) fn created_new_replica_set(rs: &str) -> String {
        format!("Created new replica set \"{rs}\"")
    }

    pub(crate) fn failed_to_create_replica_set(rs: &str, error: &str) -> String {
        format!("Failed to create new replica set \"{rs}\": {error}")
    }

    /// The first scale-up event of a created ReplicaSet.
    pub(crate) fn scaled_up_new_replica_set(rs: &str, replicas: i32) -> String {
        format!("Scaled up replica set {rs} from 0 to {replicas}")
    }

    pub(crate) fn rolled_back(deployment: &str, revision: i64) -> String {
        format!("Rolled back deployment \"{deployment}\" to revision {revision}")
    }

    pub(crate) fn rollback_template_unchanged(deployment: &str) -> String {
        format!(
            "The rollback revision contains the same template as current deployment \"{deployment}\""
        )
    }

    /// `ReplicaSet "<rs>" <what>`, or `Deployment "<d>" <what>` while there is no new ReplicaSet.
    pub(crate) fn subject(deployment: &str, new_rs: Option<&str>, what: &str) -> String {
        match new_rs {
            Some(rs) => format!("ReplicaSet \"{rs}\" {what}"),
            None => format!("Deployment \"{deployment}\" {what}"),
        }
    }
}

/// A condition with both timestamps at `now`.
pub(crate) fn new_deployment_condition(
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> DeploymentCondition {
    DeploymentCondition {
        type_: Some(type_.to_string()),
        status: Some(status.to_string()),
        reason: Some(reason.to_string()),
        message: Some(message.to_string()),
        last_update_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
    }
}

/// The condition of `type_`, if present.
pub(crate) fn get_deployment_condition<'a>(
    status: &'a DeploymentStatus,
    type_: &str,
) -> Option<&'a DeploymentCondition> {
    status
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_.as_deref() == Some(type_))
}

pub(crate) fn reason(c: &DeploymentCondition) -> &str {
    c.reason.as_deref().unwrap_or_default()
}

/// Sets a condition (upstream's `SetDeploymentCondition`): nothing changes if one of the same type
/// already has the same status and reason (its timestamps and message stay); otherwise the old one is
/// replaced, keeping its lastTransitionTime when only the reason changed. The new condition goes to the
/// end of the list, as upstream (condition order is visible to clients).
pub(crate) fn set_deployment_condition(
    status: &mut DeploymentStatus,
    mut condition: DeploymentCondition,
) {
    let type_ = condition.type_.clone().unwrap_or_default();
    if let Some(current) = get_deployment_condition(status, &type_) {
        if current.status == condition.status && reason(current) == reason(&condition) {
            return;
        }
        if current.status == condition.status {
            condition.last_transition_time = current.last_transition_time.clone();
        }
    }
    remove_deployment_condition(status, &type_);
    status
        .conditions
        .get_or_insert_with(Vec::new)
        .push(condition);
}

/// Removes the condition of `type_` (an emptied list becomes absent, as upstream's nil slice).
pub(crate) fn remove_deployment_condition(status: &mut DeploymentStatus, type_: &str) {
    if let Some(conditions) = status.conditions.as_mut() {
        conditions.retain(|c| c.type_.as_deref() != Some(type_));
        if conditions.is_empty() {
            status.conditions = None;
        }
    }
}

/// A ReplicaSet's condition promoted to the Deployment (lastUpdateTime = its lastTransitionTime).
pub(crate) fn replica_set_to_deployment_condition(c: &ReplicaSetCondition) -> DeploymentCondition {
    DeploymentCondition {
        type_: c.type_.clone(),
        status: c.status.clone(),
        reason: c.reason.clone(),
        message: c.message.clone(),
        last_update_time: c.last_transition_time.clone(),
        last_transition_time: c.last_transition_time.clone(),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::testutil::ts;

    pub(crate) fn cond(type_: &str, status: &str, reason: &str) -> DeploymentCondition {
        DeploymentCondition {
            type_: Some(type_.into()),
            status: Some(status.into()),
            reason: Some(reason.into()),
            ..Default::default()
        }
    }

    fn with_conditions(conditions: Vec<DeploymentCondition>) -> DeploymentStatus {
        DeploymentStatus {
            conditions: Some(conditions),
            ..Default::default()
        }
    }

    #[test]
    fn get_condition() {
        // Mirrors upstream TestGetCondition.
        let status = with_conditions(vec![
            cond(PROGRESSING, CONDITION_FALSE, "ForSomeReason"),
            cond(AVAILABLE, CONDITION_TRUE, "AwesomeController"),
        ]);
        assert!(get_deployment_condition(&status, AVAILABLE).is_some());
        assert!(get_deployment_condition(&status, REPLICA_FAILURE).is_none());
    }

    #[test]
    fn set_condition() {
        // Mirrors upstream TestSetCondition.
        let progressing = cond(PROGRESSING, CONDITION_FALSE, "ForSomeReason");
        let progressing2 = cond(PROGRESSING, CONDITION_TRUE, "BecauseItIs");
        let available = cond(AVAILABLE, CONDITION_TRUE, "AwesomeController");

        let mut s = DeploymentStatus::default();
        set_deployment_condition(&mut s, available.clone());
        assert_eq!(s, with_conditions(vec![available.clone()]));

        let mut s = with_conditions(vec![progressing.clone()]);
        set_deployment_condition(&mut s, available.clone());
        assert_eq!(s, with_conditions(vec![progressing.clone(), available]));

        let mut s = with_conditions(vec![progressing]);
        set_deployment_condition(&mut s, progressing2.clone());
        assert_eq!(s, with_conditions(vec![progressing2]));
    }

    #[test]
    fn set_condition_keeps_transition_time_and_skips_same_reason() {
        let t0 = ts("2024-01-01T00:00:00Z");
        let t1 = ts("2024-01-01T00:05:00Z");
        let mut s = DeploymentStatus::default();
        set_deployment_condition(
            &mut s,
            new_deployment_condition(PROGRESSING, CONDITION_TRUE, "A", "a", t0),
        );
        set_deployment_condition(
            &mut s,
            new_deployment_condition(AVAILABLE, CONDITION_TRUE, "X", "x", t0),
        );
        // Same status and reason: nothing changes, not even the message.
        set_deployment_condition(
            &mut s,
            new_deployment_condition(PROGRESSING, CONDITION_TRUE, "A", "other", t1),
        );
        assert_eq!(
            s.conditions.as_ref().unwrap()[0].message.as_deref(),
            Some("a")
        );
        // Same status, new reason: transition time kept, update time fresh, moved to the end.
        set_deployment_condition(
            &mut s,
            new_deployment_condition(PROGRESSING, CONDITION_TRUE, "B", "b", t1),
        );
        let c = s.conditions.as_ref().unwrap();
        assert_eq!(
            (
                c[0].type_.as_deref().unwrap_or_default(),
                c[1].type_.as_deref().unwrap_or_default()
            ),
            (AVAILABLE, PROGRESSING)
        );
        assert_eq!(c[1].last_transition_time, Some(Time(t0)));
        assert_eq!(c[1].last_update_time, Some(Time(t1)));
        // New status: both fresh.
        set_deployment_condition(
            &mut s,
            new_deployment_condition(PROGRESSING, CONDITION_FALSE, "C", "c", t1),
        );
        assert_eq!(
            s.conditions.as_ref().unwrap()[1].last_transition_time,
            Some(Time(t1))
        );
    }

    #[test]
    fn remove_condition() {
        // Mirrors upstream TestRemoveCondition.
        let mut s = DeploymentStatus::default();
        remove_deployment_condition(&mut s, PROGRESSING);
        assert_eq!(s, DeploymentStatus::default());
        let mut s = with_conditions(vec![cond(PROGRESSING, CONDITION_FALSE, "ForSomeReason")]);
        remove_deployment_condition(&mut s, PROGRESSING);
        assert_eq!(s, DeploymentStatus::default());
        let full = with_conditions(vec![
            cond(PROGRESSING, CONDITION_FALSE, "ForSomeReason"),
            cond(AVAILABLE, CONDITION_TRUE, "AwesomeController"),
        ]);
        let mut s = full.clone();
        remove_deployment_condition(&mut s, REPLICA_FAILURE);
        assert_eq!(s, full);
    }
}
