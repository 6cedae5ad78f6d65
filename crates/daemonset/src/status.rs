//! The DaemonSet status (upstream `updateDaemonSetStatus` / `storeDaemonSetStatus`).
//!
//! Every node that should run the pod counts towards `desiredNumberScheduled`; if it has pods, the **oldest**
//! one decides whether the node counts as ready, available (Ready for `minReadySeconds`) and updated. Nodes
//! that should not run the pod but have one count as misscheduled. The controller never computes
//! conditions, and `collisionCount` is only bumped by revision-name collisions, so both are carried over.
//!
//! `observedGeneration` is raised only when the sync was allowed to act (expectations satisfied): a status
//! written while waiting for earlier creations must not claim the current generation was processed.

use std::borrow::Borrow;
use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSetStatus;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use mini_kcm_runtime::pods::cached::CachedPod;
use mini_kcm_runtime::pods::ranking::{is_pod_available, is_pod_ready, next_availability_check};

use crate::DaemonSetObject;
use crate::manage::cmp_oldest_first;
use crate::placement::DaemonPlacement;
use crate::update::{is_pod_updated, template_generation_or_none};

/// The seven counts of a DaemonSet status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct StatusCounts {
    pub desired_number_scheduled: i32,
    pub current_number_scheduled: i32,
    pub number_misscheduled: i32,
    pub number_ready: i32,
    pub updated_number_scheduled: i32,
    pub number_available: i32,
    pub number_unavailable: i32,
}

/// The counts and when to look again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StatusReport {
    pub counts: StatusCounts,
    /// Upstream's requeue: `minReadySeconds` later, when it is set and some counted pods are Ready but not
    /// yet available (a last line of defence against clock skew).
    pub requeue_after: Option<Duration>,
    /// The precise moment (from `now`) the first Ready pod on a node that should run one becomes available,
    /// counted or not: a surged new pod beside an old one is not counted, yet the rolling update waits for
    /// its availability to delete the old pod. The wiring requeues at the earlier of this and
    /// `requeue_after`, so the sync never depends on a pod event or on a delayed requeue that the queue may
    /// have merged into an earlier one (a deliberate difference, docs/daemonset.md).
    pub next_availability: Option<Duration>,
}

/// Counts the status over `nodes`, with `node_to_pods` the claimed pods by target node without deleted
/// terminal pods, `hash` the current revision's hash and `now` the wall clock for `minReadySeconds`.
pub(crate) fn calculate_status<N: Borrow<Node>>(
    ds: &DaemonSetObject,
    placement: &DaemonPlacement,
    nodes: &[N],
    node_to_pods: &BTreeMap<String, Vec<&CachedPod>>,
    hash: &str,
    now: Timestamp,
) -> StatusReport {
    let min_ready_seconds = ds.spec.min_ready_seconds.unwrap_or(0);
    let generation = template_generation_or_none(ds);
    let mut counts = StatusCounts::default();
    let mut awaited: Vec<&CachedPod> = Vec::new();
    for node in nodes {
        let node: &Node = node.borrow();
        let name = node.metadata.name.as_deref().unwrap_or_default();
        let oldest = node_to_pods
            .get(name)
            .and_then(|pods| pods.iter().copied().min_by(|a, b| cmp_oldest_first(a, b)));
        if !placement.evaluate(node).should_run {
            if oldest.is_some() {
                counts.number_misscheduled += 1;
            }
            continue;
        }
        counts.desired_number_scheduled += 1;
        let Some(pod) = oldest else {
            continue;
        };
        if let Some(pods) = node_to_pods.get(name) {
            awaited.extend(
                pods.iter()
                    .copied()
                    .filter(|p| p.metadata.deletion_timestamp.is_none()),
            );
        }
        counts.current_number_scheduled += 1;
        if is_pod_ready(pod) {
            counts.number_ready += 1;
            if is_pod_available(pod, min_ready_seconds, now) {
                counts.number_available += 1;
            }
        }
        if is_pod_updated(pod, hash, generation) {
            counts.updated_number_scheduled += 1;
        }
    }
    counts.number_unavailable = counts.desired_number_scheduled - counts.number_available;

    let requeue_after = (min_ready_seconds > 0 && counts.number_ready != counts.number_available)
        .then(|| Duration::from_secs(u64::try_from(min_ready_seconds).unwrap_or(0)));
    StatusReport {
        counts,
        requeue_after,
        next_availability: next_availability_check(awaited, min_ready_seconds, now),
    }
}

/// The status to write, or `None` when the stored one already has these counts and an observedGeneration
/// at least the DaemonSet's generation. The existing status (conditions, collisionCount) is carried over;
/// `observedGeneration` becomes the DaemonSet's generation only with `update_observed_generation`.
pub(crate) fn status_to_store(
    ds: &DaemonSetObject,
    counts: &StatusCounts,
    update_observed_generation: bool,
) -> Option<DaemonSetStatus> {
    let current = ds.status.clone().unwrap_or_default();
    let generation = ds.metadata.generation.unwrap_or(0);
    let stored = StatusCounts {
        desired_number_scheduled: current.desired_number_scheduled,
        current_number_scheduled: current.current_number_scheduled,
        number_misscheduled: current.number_misscheduled,
        number_ready: current.number_ready,
        updated_number_scheduled: current.updated_number_scheduled.unwrap_or(0),
        number_available: current.number_available.unwrap_or(0),
        number_unavailable: current.number_unavailable.unwrap_or(0),
    };
    if stored == *counts && current.observed_generation.unwrap_or(0) >= generation {
        return None;
    }
    let mut status = current;
    if update_observed_generation {
        status.observed_generation = Some(generation);
    }
    status.desired_number_scheduled = counts.desired_number_scheduled;
    status.current_number_scheduled = counts.current_number_scheduled;
    status.number_misscheduled = counts.number_misscheduled;
    status.number_ready = counts.number_ready;
    status.updated_number_scheduled = Some(counts.updated_number_scheduled);
    status.number_available = Some(counts.number_available);
    status.number_unavailable = Some(counts.number_unavailable);
    Some(status)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manage::group_pods_by_node;
    use crate::test_fixtures::{new_ds, new_node, taint, tainted};
    use crate::test_fixtures::{pod_with, ts};
    use crate::{TEMPLATE_GENERATION_ANNOTATION, TEMPLATE_GENERATION_LABEL};
    use k8s_openapi::api::apps::v1::DaemonSetCondition;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn created(mut pod: CachedPod, secs: i64) -> CachedPod {
        pod.metadata.creation_timestamp = Some(Time(ts(secs)));
        pod
    }

    fn report(
        ds: &DaemonSetObject,
        nodes: &[Node],
        pods: &[CachedPod],
        hash: &str,
        now: i64,
    ) -> StatusReport {
        calculate_status(
            ds,
            &DaemonPlacement::new(ds),
            nodes,
            &group_pods_by_node(pods, false),
            hash,
            ts(now),
        )
    }

    /// Mirrors upstream `TestNumberReadyStatus`.
    #[test]
    fn number_ready_status() {
        let ds = new_ds("foo");
        let nodes = [new_node("node-0", None), new_node("node-1", None)];
        let unready = [
            pod_with("a", "node-0", Some("h"), None),
            pod_with("b", "node-1", Some("h"), None),
        ];
        assert_eq!(
            report(&ds, &nodes, &unready, "h", 10).counts.number_ready,
            0
        );
        let ready = [
            pod_with("a", "node-0", Some("h"), Some((true, 0))),
            pod_with("b", "node-1", Some("h"), Some((true, 0))),
        ];
        let counts = report(&ds, &nodes, &ready, "h", 10).counts;
        assert_eq!(counts.number_ready, 2);
        assert_eq!(counts.number_available, 2);
        assert_eq!(counts.number_unavailable, 0);
    }

    #[test]
    fn all_counts() {
        let mut ds = new_ds("foo");
        ds.spec.min_ready_seconds = Some(30);
        ds.metadata.annotations =
            Some([(TEMPLATE_GENERATION_ANNOTATION.to_string(), "4".to_string())].into());
        let nodes = [
            new_node("fresh", None),
            new_node("settled", None),
            new_node("legacy", None),
            new_node("empty", None),
            tainted(
                new_node("tainted", None),
                vec![taint("k", None, "NoSchedule")],
            ),
            tainted(
                new_node("tainted-empty", None),
                vec![taint("k", None, "NoSchedule")],
            ),
        ];
        // fresh: oldest pod is old-hash and not ready; a younger current pod does not count.
        let fresh_old = created(pod_with("fresh-old", "fresh", Some("v1"), None), 1);
        let fresh_new = created(
            pod_with("fresh-new", "fresh", Some("v2"), Some((true, 0))),
            2,
        );
        // settled: current, ready long enough.
        let settled = created(
            pod_with("settled", "settled", Some("v2"), Some((true, 0))),
            1,
        );
        // legacy: no hash label but the template generation label; ready too recently.
        let mut legacy = created(pod_with("legacy", "legacy", None, Some((true, 90))), 1);
        legacy
            .metadata
            .labels
            .as_mut()
            .unwrap()
            .insert(TEMPLATE_GENERATION_LABEL.into(), "4".into());
        let misscheduled = pod_with("mis", "tainted", Some("v2"), None);
        let pods = [fresh_old, fresh_new, settled, legacy, misscheduled];
        let report = report(&ds, &nodes, &pods, "v2", 100);
        assert_eq!(
            report.counts,
            StatusCounts {
                desired_number_scheduled: 4,
                current_number_scheduled: 3,
                number_misscheduled: 1,
                number_ready: 2,
                updated_number_scheduled: 2,
                number_available: 1,
                number_unavailable: 3,
            }
        );
        assert_eq!(report.requeue_after, Some(Duration::from_secs(30)));
        assert_eq!(report.next_availability, Some(Duration::from_secs(20)));
    }

    #[test]
    fn no_requeue_without_min_ready_or_when_all_ready_are_available() {
        let ds = new_ds("foo");
        let nodes = [new_node("node-0", None)];
        let pods = [pod_with("a", "node-0", Some("h"), Some((true, 99)))];
        assert_eq!(report(&ds, &nodes, &pods, "h", 100).requeue_after, None);
        let mut slow = new_ds("slow");
        slow.spec.min_ready_seconds = Some(5);
        assert_eq!(report(&slow, &nodes, &pods, "h", 200).requeue_after, None);
        assert_eq!(
            report(&slow, &nodes, &pods, "h", 100).requeue_after,
            Some(Duration::from_secs(5))
        );
    }

    /// The rolling update deletes an old pod once the new pod beside it is available; the status counts
    /// only the old (oldest) pod, so the recheck must come from the surged pod, not from the counts.
    #[test]
    fn a_surged_pod_becoming_available_is_awaited() {
        let mut ds = new_ds("surge");
        ds.spec.min_ready_seconds = Some(10);
        let nodes = [new_node("node-0", None)];
        let old = created(pod_with("old", "node-0", Some("v1"), Some((true, 0))), 1);
        let surged = created(pod_with("new", "node-0", Some("v2"), Some((true, 96))), 90);
        let surging = report(&ds, &nodes, &[old, surged.clone()], "v2", 100);
        assert_eq!(surging.counts.number_ready, 1);
        assert_eq!(surging.counts.number_available, 1);
        assert_eq!(
            surging.requeue_after, None,
            "upstream's rule sees nothing to wait for"
        );
        assert_eq!(surging.next_availability, Some(Duration::from_secs(6)));

        // A surged pod being deleted, or on a node that should not run one, is not awaited.
        let mut leaving = surged;
        leaving.metadata.deletion_timestamp = Some(Time(ts(99)));
        let old = created(pod_with("old", "node-0", Some("v1"), Some((true, 0))), 1);
        assert_eq!(
            report(&ds, &nodes, &[old, leaving], "v2", 100).next_availability,
            None
        );
    }

    /// Mirrors upstream `TestObservedGeneration` and the skip rule of `storeDaemonSetStatus`.
    #[test]
    fn observed_generation_and_skip_rule() {
        let mut ds = new_ds("foo");
        ds.metadata.generation = Some(1);
        let counts = StatusCounts {
            desired_number_scheduled: 1,
            current_number_scheduled: 1,
            number_unavailable: 1,
            ..Default::default()
        };
        let written = status_to_store(&ds, &counts, true).unwrap();
        assert_eq!(written.observed_generation, Some(1));
        assert_eq!(written.desired_number_scheduled, 1);
        assert_eq!(written.number_available, Some(0));

        // Expectations not satisfied: counts written, generation not claimed.
        let waiting = status_to_store(&ds, &counts, false).unwrap();
        assert_eq!(waiting.observed_generation, None);

        // Same counts and generation observed: nothing to write.
        ds.status = Some(written.clone());
        assert_eq!(status_to_store(&ds, &counts, true), None);
        // A newer generation forces a write even with the same counts.
        ds.metadata.generation = Some(2);
        assert_eq!(
            status_to_store(&ds, &counts, true).and_then(|s| s.observed_generation),
            Some(2)
        );
        // Conditions and collisionCount survive.
        let mut with_extras = written;
        with_extras.collision_count = Some(3);
        with_extras.conditions = Some(vec![DaemonSetCondition {
            type_: Some("Foreign".into()),
            status: Some("True".into()),
            ..Default::default()
        }]);
        ds.status = Some(with_extras);
        let changed = StatusCounts {
            number_ready: 1,
            ..counts
        };
        let kept = status_to_store(&ds, &changed, true).unwrap();
        assert_eq!(kept.collision_count, Some(3));
        assert_eq!(kept.conditions.map(|c| c.len()), Some(1));
        assert_eq!(kept.number_ready, 1);
    }
}
