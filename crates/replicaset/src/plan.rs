//! What one sync should do about the number of pods (pure; upstream's `manageReplicas` decisions).
//!
//! Kept apart from the API calls so the decision can be tested, logged and explained on its own: the
//! sync computes a [`ReplicaPlan`] from a snapshot of the caches, logs it, then executes it.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;
use mini_kcm_runtime::pods::cached::CachedPod;
use mini_kcm_runtime::pods::ranking::{
    RankedPod, deletion_reason, is_pod_active, is_pod_ready, sort_for_deletion,
};

/// The decision of one sync.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ReplicaPlan {
    /// As many active pods as wanted.
    Steady,
    /// Create `count` pods (at most the burst) because there are `active` of `desired`.
    Create {
        count: usize,
        active: usize,
        desired: usize,
    },
    /// Delete these pods, each with why it was chosen before the pods that stay.
    Delete {
        pods: Vec<(Arc<CachedPod>, String)>,
        active: usize,
        desired: usize,
    },
}

/// Decides creations or deletions for a ReplicaSet that wants `desired` pods and has the `active` claimed
/// pods. `related` gives the active pods of every ReplicaSet with the same controller (a Deployment's
/// ReplicaSets), used to prefer deleting pods on crowded nodes; it is called only when some but not all
/// pods go, since collecting them costs a walk over all those pods (upstream too reads them only when
/// scaling down). At most `burst` pods per sync. `deletion_cost`: the `PodDeletionCost` gate.
///
/// upstream: manageReplicas (its decision)
pub(crate) fn plan_replicas(
    desired: usize,
    active: &[Arc<CachedPod>],
    related: impl FnOnce() -> Vec<Arc<CachedPod>>,
    burst: usize,
    now: Timestamp,
    deletion_cost: bool,
) -> ReplicaPlan {
    let have = active.len();
    if have < desired {
        return ReplicaPlan::Create {
            count: (desired - have).min(burst),
            active: have,
            desired,
        };
    }
    if have == desired {
        return ReplicaPlan::Steady;
    }
    let diff = (have - desired).min(burst);
    ReplicaPlan::Delete {
        pods: pods_to_delete(active, related, diff, now, deletion_cost),
        active: have,
        desired,
    }
}

/// The `diff` pods to delete first: ranked by upstream's `ActivePodsWithRanks` (rank = active related
/// pods on the same node) unless every pod goes anyway. Each comes with the rule that put it ahead of the
/// first pod that stays.
///
/// upstream: getPodsToDelete
fn pods_to_delete(
    active: &[Arc<CachedPod>],
    related: impl FnOnce() -> Vec<Arc<CachedPod>>,
    diff: usize,
    now: Timestamp,
    deletion_cost: bool,
) -> Vec<(Arc<CachedPod>, String)> {
    // By name first: pods the ranking cannot tell apart stay in this order (the sort is stable), so the
    // choice among them, and the order of the deletions, is the same whatever order the cache lists
    // them in (upstream's is arbitrary).
    let mut active: Vec<&Arc<CachedPod>> = active.iter().collect();
    active.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    if diff >= active.len() {
        return active
            .into_iter()
            .map(|p| (Arc::clone(p), "every pod goes".to_string()))
            .collect();
    }
    let mut on_node: HashMap<&str, usize> = HashMap::new();
    let related = related();
    for pod in related.iter().filter(|p| is_pod_active(p)) {
        *on_node.entry(node_of(pod)).or_default() += 1;
    }
    let mut ranked: Vec<RankedPod<'_>> = active
        .iter()
        .map(|pod| RankedPod {
            pod,
            rank: on_node.get(node_of(pod)).copied().unwrap_or(0),
        })
        .collect();
    sort_for_deletion(&mut ranked, Some(now), deletion_cost);
    let first_kept = ranked[diff];
    ranked[..diff]
        .iter()
        .map(|chosen| {
            let why = deletion_reason(*chosen, first_kept, Some(now), deletion_cost).map_or_else(
                || "tied with the pods that stay (any of them could go)".to_string(),
                |r| r.to_string(),
            );
            let pod = active
                .iter()
                .find(|p| std::ptr::eq(p.as_ref(), chosen.pod))
                .map(|p| Arc::clone(p))
                .unwrap_or_else(|| Arc::new(chosen.pod.clone()));
            (pod, why)
        })
        .collect()
}

/// What upstream's `replicaset_controller_sorting_deletion_age_ratio` observes for one scale-down that
/// ranked its pods (some but not all of the `active` pods were `chosen`): for each chosen ready pod, its
/// age over the age of the youngest ready pod among `active`, in whole milliseconds divided as integers
/// (so the ratio is a whole number, as upstream's). Pods without a creation time are left out; and when
/// the youngest ready pod is 0 ms old, nothing is reported (upstream would divide by zero).
///
/// upstream: reportSortingDeletionAgeRatioMetric
pub(crate) fn deletion_age_ratios(
    active: &[Arc<CachedPod>],
    chosen: &[(Arc<CachedPod>, String)],
    now: Timestamp,
) -> Vec<f64> {
    let created = |pod: &CachedPod| {
        pod.metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0)
            .filter(|_| is_pod_ready(pod))
    };
    let age_ms = |t: Timestamp| (now.as_nanosecond() - t.as_nanosecond()) / 1_000_000;
    let Some(youngest) = active.iter().filter_map(|p| created(p)).max() else {
        return Vec::new();
    };
    let youngest_ms = age_ms(youngest);
    if youngest_ms == 0 {
        return Vec::new();
    }
    chosen
        .iter()
        .filter_map(|(pod, _)| created(pod))
        .map(|t| (age_ms(t) / youngest_ms) as f64)
        .collect()
}

fn node_of(pod: &CachedPod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PodCondition;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use kube::api::ObjectMeta;
    use mini_kcm_runtime::pods::cached::{CachedPodSpec, CachedPodStatus};
    use std::collections::BTreeMap;

    fn pod(
        name: &str,
        node: Option<&str>,
        phase: &str,
        ready: bool,
        cost: Option<&str>,
    ) -> Arc<CachedPod> {
        Arc::new(CachedPod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                uid: Some(format!("uid-{name}")),
                creation_timestamp: Some(Time(Timestamp::from_second(100).unwrap())),
                annotations: cost.map(|c| {
                    BTreeMap::from([(
                        "controller.kubernetes.io/pod-deletion-cost".to_string(),
                        c.to_string(),
                    )])
                }),
                ..Default::default()
            },
            spec: Some(CachedPodSpec {
                node_name: node.map(str::to_string),
                ..Default::default()
            }),
            status: Some(CachedPodStatus {
                phase: Some(phase.into()),
                conditions: Some(vec![PodCondition {
                    type_: "Ready".into(),
                    status: if ready { "True" } else { "False" }.into(),
                    last_transition_time: Some(Time(Timestamp::from_second(200).unwrap())),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        })
    }

    fn now() -> Timestamp {
        Timestamp::from_second(10_000).unwrap()
    }

    #[test]
    fn too_few_pods_creates_the_difference_capped_by_the_burst() {
        let pods = vec![pod("a", Some("n1"), "Running", true, None)];
        assert_eq!(
            plan_replicas(3, &pods, || pods.clone(), 500, now(), true),
            ReplicaPlan::Create {
                count: 2,
                active: 1,
                desired: 3
            }
        );
        // Upstream's TestControllerBurstReplicas: never more than the burst in one sync.
        assert_eq!(
            plan_replicas(1000, &[], Vec::new, 500, now(), true),
            ReplicaPlan::Create {
                count: 500,
                active: 0,
                desired: 1000
            }
        );
        assert_eq!(
            plan_replicas(1, &pods, || pods.clone(), 500, now(), true),
            ReplicaPlan::Steady
        );
        // Related pods are collected only to rank deletions.
        let not_needed =
            || -> Vec<Arc<CachedPod>> { panic!("related pods read without deletions") };
        plan_replicas(3, &pods, not_needed, 500, now(), true);
        plan_replicas(1, &pods, not_needed, 500, now(), true);
        plan_replicas(0, &pods, not_needed, 500, now(), true);
    }

    /// Upstream's TestGetPodsToDelete: earlier lifecycle stages go first.
    #[test]
    fn deletes_unscheduled_then_pending_then_not_ready_first() {
        let running = pod("running", Some("n1"), "Running", true, None);
        let not_ready = pod("not-ready", Some("n1"), "Running", false, None);
        let pending = pod("pending", Some("n1"), "Pending", false, None);
        let unscheduled = pod("unscheduled", None, "Pending", false, None);
        let all = vec![
            running.clone(),
            not_ready.clone(),
            pending.clone(),
            unscheduled.clone(),
        ];
        let ReplicaPlan::Delete { pods, .. } =
            plan_replicas(1, &all, || all.clone(), 500, now(), true)
        else {
            panic!("expected deletions");
        };
        let names: Vec<_> = pods
            .iter()
            .map(|(p, _)| p.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(names, vec!["unscheduled", "pending", "not-ready"]);
        assert_eq!(pods[0].1, "unscheduled");
    }

    /// Upstream's TestRelatedPodsLookup / ranking by related pods on the same node, and deletion cost.
    #[test]
    fn prefers_crowded_nodes_and_lower_deletion_cost() {
        let lonely = pod("lonely", Some("n1"), "Running", true, None);
        let crowded = pod("crowded", Some("n2"), "Running", true, None);
        let sibling = pod("sibling-of-other-rs", Some("n2"), "Running", true, None);
        let active = vec![lonely.clone(), crowded.clone()];
        let related = vec![lonely.clone(), crowded.clone(), sibling];
        let ReplicaPlan::Delete { pods, .. } =
            plan_replicas(1, &active, || related.clone(), 500, now(), true)
        else {
            panic!("expected a deletion");
        };
        assert_eq!(pods[0].0.metadata.name.as_deref(), Some("crowded"));
        assert!(
            pods[0].1.contains("more pods of related ReplicaSets"),
            "{}",
            pods[0].1
        );

        let cheap = pod("cheap", Some("n1"), "Running", true, Some("-10"));
        let crowded_costly = pod("costly", Some("n2"), "Running", true, Some("100"));
        let active = vec![crowded_costly.clone(), cheap.clone()];
        let related = vec![
            crowded_costly,
            cheap,
            pod("x", Some("n2"), "Running", true, None),
        ];
        let ReplicaPlan::Delete { pods, .. } =
            plan_replicas(1, &active, || related.clone(), 500, now(), true)
        else {
            panic!("expected a deletion");
        };
        assert_eq!(pods[0].0.metadata.name.as_deref(), Some("cheap"));
        assert!(pods[0].1.contains("deletion cost"), "{}", pods[0].1);

        // The PodDeletionCost gate off: the annotation is ignored, the crowded node goes first.
        let ReplicaPlan::Delete { pods, .. } =
            plan_replicas(1, &active, || related.clone(), 500, now(), false)
        else {
            panic!("expected a deletion");
        };
        assert_eq!(pods[0].0.metadata.name.as_deref(), Some("costly"));
    }

    #[test]
    fn scaling_to_zero_deletes_everything_without_ranking() {
        let all = vec![
            pod("a", Some("n1"), "Running", true, None),
            pod("b", None, "Pending", false, None),
        ];
        let ReplicaPlan::Delete {
            pods,
            active,
            desired,
        } = plan_replicas(0, &all, || all.clone(), 500, now(), true)
        else {
            panic!("expected deletions");
        };
        assert_eq!((pods.len(), active, desired), (2, 2, 0));
    }

    fn created_at(pod: &Arc<CachedPod>, second: i64) -> Arc<CachedPod> {
        let mut pod = pod.as_ref().clone();
        pod.metadata.creation_timestamp = Some(Time(Timestamp::from_second(second).unwrap()));
        Arc::new(pod)
    }

    /// Ages over the youngest ready pod's, divided as whole milliseconds; only ready pods count, both
    /// for the youngest and for what is reported.
    #[test]
    fn deletion_age_ratios_divide_ages_like_upstream() {
        let now = now();
        let ready = |name, second| created_at(&pod(name, None, "Running", true, None), second);
        let youngest = ready("young", 9_000); // 1000 s old
        let old = ready("old", 7_500); // 2500 s: ratio 2 (2.5 truncated)
        let older = ready("older", 4_000); // 6000 s: ratio 6
        let not_ready = created_at(&pod("nr", None, "Running", false, None), 9_900);
        let active = vec![
            youngest.clone(),
            old.clone(),
            older.clone(),
            not_ready.clone(),
        ];
        let chosen: Vec<(Arc<CachedPod>, String)> = [&not_ready, &older, &old]
            .into_iter()
            .map(|p| (p.clone(), String::new()))
            .collect();
        assert_eq!(deletion_age_ratios(&active, &chosen, now), [6.0, 2.0]);
        // Without a ready pod there is nothing to compare with.
        assert!(
            deletion_age_ratios(std::slice::from_ref(&not_ready), &chosen[..1], now).is_empty()
        );
        // A youngest pod created this very millisecond: nothing (no division by zero).
        let newborn = ready("newborn", 10_000);
        assert!(deletion_age_ratios(&[newborn, old.clone()], &chosen[2..], now).is_empty());
    }
}
