//! The status of a ReplicaSet, computed from the claimed pods (pure; `controller::status` writes it only
//! when it changed).
//!
//! A copy's status also carries `status.selector` (see [`StatusWithSelector`]), which its scale
//! subresource reports to HorizontalPodAutoscalers: computed here with the counts, so a copy whose stored
//! status lacks it or holds a stale one is written even when no count changed.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ReplicaSetCondition, ReplicaSetStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use mini_kcm_runtime::api::kinds::{ApiFamily, ReplicaSetObject, StatusWithSelector};
use mini_kcm_runtime::api::selector::Selector;
use mini_kcm_runtime::pods::cached::CachedPod;
use mini_kcm_runtime::pods::ranking::{is_pod_available, is_pod_ready};

/// The condition type upstream sets when pods cannot be created or deleted.
pub(crate) const REPLICA_FAILURE: &str = "ReplicaFailure";

/// What went wrong while managing replicas, for the `ReplicaFailure` condition.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub(crate) struct ManageFailure {
    /// `FailedCreate` (too few pods) or `FailedDelete` (too many).
    pub reason: &'static str,
    pub message: String,
}

/// The status the ReplicaSet of `family` should have, given its active claimed pods, the number of its
/// terminating pods (`None` while the `DeploymentReplicaSetTerminatingReplicas` gate is off: the field
/// is then left unset) and the outcome of managing replicas. Conditions other than `ReplicaFailure` are
/// kept as they are.
pub(crate) fn calculate_status(
    rs: &ReplicaSetObject,
    family: ApiFamily,
    active: &[Arc<CachedPod>],
    terminating: Option<usize>,
    failure: Option<&ManageFailure>,
    now: Timestamp,
) -> StatusWithSelector<ReplicaSetStatus> {
    let mut status = rs.status.clone().unwrap_or_default();
    status.selector = family.status_selector(&rs.spec.selector);
    let template_labels = rs
        .spec
        .template
        .as_ref()
        .and_then(|t| t.metadata.as_ref())
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    let template_selector = Selector::from_map(&template_labels);
    let min_ready_seconds = rs.spec.min_ready_seconds.unwrap_or(0);
    let mut fully_labeled = 0;
    let mut ready = 0;
    let mut available = 0;
    for pod in active {
        if template_selector.matches(pod.metadata.labels.as_ref().unwrap_or(&Default::default())) {
            fully_labeled += 1;
        }
        if is_pod_ready(pod) {
            ready += 1;
            if is_pod_available(pod, min_ready_seconds, now) {
                available += 1;
            }
        }
    }

    let existing_failure = status.conditions.as_ref().is_some_and(|cs| {
        cs.iter()
            .any(|c| c.type_.as_deref() == Some(REPLICA_FAILURE))
    });
    match failure {
        Some(failure) if !existing_failure => {
            status
                .conditions
                .get_or_insert_with(Vec::new)
                .push(ReplicaSetCondition {
                    type_: Some(REPLICA_FAILURE.to_string()),
                    status: Some("True".to_string()),
                    reason: Some(failure.reason.to_string()),
                    message: Some(failure.message.clone()),
                    last_transition_time: Some(Time(now)),
                });
        }
        None if existing_failure => {
            if let Some(conditions) = status.conditions.as_mut() {
                conditions.retain(|c| c.type_.as_deref() != Some(REPLICA_FAILURE));
            }
            if status.conditions.as_ref().is_some_and(Vec::is_empty) {
                status.conditions = None;
            }
        }
        _ => {}
    }

    status.replicas = count(active.len());
    status.fully_labeled_replicas = Some(fully_labeled);
    status.ready_replicas = Some(ready);
    status.available_replicas = Some(available);
    status.terminating_replicas = terminating.map(count);
    status
}

fn count(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// Whether `new` differs from the stored status in anything upstream compares (counts, conditions) or
/// the spec generation has not been observed yet, or (copies only) in the selector.
pub(crate) fn status_changed(
    rs: &ReplicaSetObject,
    new: &StatusWithSelector<ReplicaSetStatus>,
) -> bool {
    let old = rs.status.clone().unwrap_or_default();
    if old.selector != new.selector {
        return true;
    }
    let zero = |v: Option<i32>| v.unwrap_or(0);
    old.replicas != new.replicas
        || zero(old.fully_labeled_replicas) != zero(new.fully_labeled_replicas)
        || zero(old.ready_replicas) != zero(new.ready_replicas)
        || zero(old.available_replicas) != zero(new.available_replicas)
        || old.terminating_replicas != new.terminating_replicas
        || rs.metadata.generation != old.observed_generation
        || old.status.conditions.unwrap_or_default() != new.conditions.clone().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::ReplicaSetSpec;
    use k8s_openapi::api::core::v1::{PodCondition, PodTemplateSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
    use kube::api::ObjectMeta;
    use mini_kcm_runtime::pods::cached::CachedPodStatus;
    use std::collections::BTreeMap;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn rs(min_ready: i32) -> ReplicaSetObject {
        let mut rs = ReplicaSetObject::new(
            "rs",
            &mini_kcm_runtime::api::kinds::WorkloadKind::ReplicaSet
                .api_resource(mini_kcm_runtime::api::kinds::ApiFamily::Apps),
            ReplicaSetSpec {
                replicas: Some(3),
                min_ready_seconds: Some(min_ready),
                template: Some(PodTemplateSpec {
                    metadata: Some(ObjectMeta {
                        labels: Some(labels(&[("app", "x"), ("tier", "web")])),
                        ..Default::default()
                    }),
                    spec: None,
                }),
                ..Default::default()
            },
        );
        rs.metadata.generation = Some(2);
        rs
    }

    fn pod(pod_labels: &[(&str, &str)], ready_since: Option<i64>) -> Arc<CachedPod> {
        Arc::new(CachedPod {
            metadata: ObjectMeta {
                labels: Some(labels(pod_labels)),
                ..Default::default()
            },
            status: Some(CachedPodStatus {
                phase: Some("Running".into()),
                conditions: ready_since.map(|s| {
                    vec![PodCondition {
                        type_: "Ready".into(),
                        status: "True".into(),
                        last_transition_time: Some(Time(Timestamp::from_second(s).unwrap())),
                        ..Default::default()
                    }]
                }),
                ..Default::default()
            }),
            ..Default::default()
        })
    }

    /// Mirrors upstream's TestCalculateStatus.
    #[test]
    fn counts_fully_labeled_ready_and_available_pods() {
        let now = Timestamp::from_second(1000).unwrap();
        let pods = vec![
            pod(&[("app", "x"), ("tier", "web")], Some(900)), // available (ready 100 s > 10 s)
            pod(&[("app", "x"), ("tier", "web")], Some(995)), // ready, not yet available
            pod(&[("app", "x")], None),                       // not fully labelled, not ready
        ];
        let status = calculate_status(&rs(10), ApiFamily::Apps, &pods, Some(2), None, now);
        assert_eq!(status.replicas, 3);
        assert_eq!(status.fully_labeled_replicas, Some(2));
        assert_eq!(status.ready_replicas, Some(2));
        assert_eq!(status.available_replicas, Some(1));
        assert_eq!(status.terminating_replicas, Some(2));

        // The DeploymentReplicaSetTerminatingReplicas gate off: the count is not reported, even over a
        // stored one (upstream's TestCalculateStatus case with the gate disabled).
        let mut reported = rs(10);
        reported
            .status
            .get_or_insert_with(Default::default)
            .terminating_replicas = Some(4);
        let status = calculate_status(&reported, ApiFamily::Apps, &pods, None, None, now);
        assert_eq!(status.terminating_replicas, None);
        assert_eq!(status.replicas, 3);
    }

    /// Mirrors upstream's TestCalculateStatusConditions.
    #[test]
    fn replica_failure_is_added_once_and_removed_on_success() {
        let now = Timestamp::from_second(1000).unwrap();
        let mut set = rs(0);
        let failure = ManageFailure {
            reason: "FailedCreate",
            message: "pods is forbidden".into(),
        };
        let failed = calculate_status(&set, ApiFamily::Apps, &[], Some(0), Some(&failure), now);
        let conditions = failed.conditions.clone().unwrap();
        assert_eq!(conditions.len(), 1);
        assert_eq!(conditions[0].reason.as_deref(), Some("FailedCreate"));
        assert_eq!(conditions[0].status.as_deref(), Some("True"));

        // A second failure does not replace the first (its transition time stays).
        set.status = Some(failed.clone());
        let later = Timestamp::from_second(2000).unwrap();
        let again = calculate_status(&set, ApiFamily::Apps, &[], Some(0), Some(&failure), later);
        assert_eq!(again.conditions, failed.conditions);

        // Success removes it.
        let ok = calculate_status(&set, ApiFamily::Apps, &[], Some(0), None, later);
        assert_eq!(ok.conditions, None);
    }

    #[test]
    fn unchanged_status_is_not_written() {
        let now = Timestamp::from_second(1000).unwrap();
        let mut set = rs(0);
        let status = calculate_status(&set, ApiFamily::Apps, &[], Some(0), None, now);
        assert!(
            status_changed(&set, &status),
            "generation 2 not observed yet"
        );
        let mut stored = status.clone();
        stored.observed_generation = Some(2);
        set.status = Some(stored);
        let again = calculate_status(&set, ApiFamily::Apps, &[], Some(0), None, now);
        assert!(!status_changed(&set, &again));
    }

    /// A copy's status carries its selector in string form; apps/v1's never does.
    #[test]
    fn only_a_copy_gets_the_selector() {
        let now = Timestamp::from_second(1000).unwrap();
        let mut set = rs(0);
        set.spec.selector = LabelSelector {
            match_labels: Some(labels(&[("tier", "web"), ("app", "x")])),
            ..Default::default()
        };
        let copy = calculate_status(&set, ApiFamily::Copies, &[], Some(0), None, now);
        assert_eq!(copy.selector.as_deref(), Some("app=x,tier=web"));
        let apps = calculate_status(&set, ApiFamily::Apps, &[], Some(0), None, now);
        assert_eq!(apps.selector, None);
        assert_eq!(apps.status, copy.status);
    }

    /// A copy whose stored status lacks the selector (an older version or another writer stored it), or
    /// holds a stale one, is written although every count is current.
    #[test]
    fn a_missing_or_wrong_selector_is_a_change() {
        let now = Timestamp::from_second(1000).unwrap();
        let mut set = rs(0);
        set.spec.selector = LabelSelector {
            match_labels: Some(labels(&[("app", "x")])),
            ..Default::default()
        };
        let mut current = calculate_status(&set, ApiFamily::Copies, &[], Some(0), None, now);
        current.observed_generation = Some(2);
        set.status = Some(current.clone());
        let again = calculate_status(&set, ApiFamily::Copies, &[], Some(0), None, now);
        assert!(!status_changed(&set, &again), "all current");

        for stored in [None, Some("app=y".to_string()), Some(String::new())] {
            set.status = Some(StatusWithSelector::new(
                current.status.clone(),
                stored.clone(),
            ));
            let new = calculate_status(&set, ApiFamily::Copies, &[], Some(0), None, now);
            assert_eq!(new.selector.as_deref(), Some("app=x"));
            assert!(status_changed(&set, &new), "stored selector {stored:?}");
        }
    }
}
