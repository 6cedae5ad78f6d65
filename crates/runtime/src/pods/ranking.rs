//! Pod predicates and orderings shared by the controllers (upstream `controller_utils.go` and `podutil`):
//! which pods are active, ready or available, when the next pod becomes available, and — when scaling down —
//! which pods to delete first.
//!
//! Two orderings exist upstream and both are reproduced: [`cmp_for_deletion`] (`ActivePodsWithRanks`, used by
//! ReplicaSet scale-down, with deletion cost, co-location rank and logarithmic time buckets) and
//! `cmp_active_pods` (`ActivePods`, the same minus cost, rank and buckets; no controller here sorts by it, so
//! it is compiled for its tests only). "Less" means "delete first".
//! Timestamps missing from the API object play the role of Go's zero time, which ranks as the newest.

use std::cmp::Ordering;
use std::collections::HashSet;
use std::fmt;
use std::time::Duration;

use crate::pods::cached::CachedPod;
use k8s_openapi::api::core::v1::PodCondition;
use k8s_openapi::jiff::Timestamp;

/// Annotation by which users order the deletion of a ReplicaSet's pods (upstream `core.PodDeletionCost`).
pub(crate) const POD_DELETION_COST_ANNOTATION: &str = "controller.kubernetes.io/pod-deletion-cost";

const NANOS_PER_SECOND: i128 = 1_000_000_000;

fn phase(pod: &CachedPod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

fn node_name(pod: &CachedPod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or("")
}

fn uid(pod: &CachedPod) -> &str {
    pod.metadata.uid.as_deref().unwrap_or("")
}

fn creation_time(pod: &CachedPod) -> Option<Timestamp> {
    pod.metadata.creation_timestamp.as_ref().map(|t| t.0)
}

fn ready_condition(pod: &CachedPod) -> Option<&PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
}

/// Not Succeeded, not Failed, and not being deleted: the pods that count as replicas.
///
/// upstream: IsPodActive (FilterActivePods keeps the pods it accepts)
pub fn is_pod_active(pod: &CachedPod) -> bool {
    !matches!(phase(pod), "Succeeded" | "Failed") && pod.metadata.deletion_timestamp.is_none()
}

/// Being deleted but not yet in a terminal phase.
pub fn is_pod_terminating(pod: &CachedPod) -> bool {
    !matches!(phase(pod), "Succeeded" | "Failed") && pod.metadata.deletion_timestamp.is_some()
}

/// The (first) `Ready` condition is `True`.
pub fn is_pod_ready(pod: &CachedPod) -> bool {
    ready_condition(pod).is_some_and(|c| c.status == "True")
}

/// Ready, and Ready for at least `min_ready_seconds` at `now` (upstream `podutil.IsPodAvailable`). With a
/// non-zero minimum, a Ready condition without lastTransitionTime never makes the pod available.
pub fn is_pod_available(pod: &CachedPod, min_ready_seconds: i32, now: Timestamp) -> bool {
    let Some(ready) = ready_condition(pod).filter(|c| c.status == "True") else {
        return false;
    };
    if min_ready_seconds == 0 {
        return true;
    }
    ready.last_transition_time.as_ref().is_some_and(|since| {
        since.0.as_nanosecond() + i128::from(min_ready_seconds) * NANOS_PER_SECOND
            <= now.as_nanosecond()
    })
}

/// How long until this ready-but-not-yet-available pod becomes available, if it is one.
fn time_until_available(
    pod: &CachedPod,
    min_ready_seconds: i32,
    now: Timestamp,
) -> Option<Duration> {
    if min_ready_seconds <= 0 || !is_pod_ready(pod) {
        return None;
    }
    let since = ready_condition(pod)?.last_transition_time.as_ref()?.0;
    let remaining = since.as_nanosecond() + i128::from(min_ready_seconds) * NANOS_PER_SECOND
        - now.as_nanosecond();
    (remaining > 0).then(|| Duration::from_nanos(u64::try_from(remaining).unwrap_or(u64::MAX)))
}

/// The earliest moment after `now` at which one of `pods` becomes available (it is Ready but has not yet been
/// Ready for `min_ready_seconds`), so the owner can be requeued precisely. `None` if no pod is in that state.
pub fn next_availability_check<'a>(
    pods: impl IntoIterator<Item = &'a CachedPod>,
    min_ready_seconds: i32,
    now: Timestamp,
) -> Option<Duration> {
    next_availability_check_since_evaluation(pods, min_ready_seconds, now, now)
}

/// Upstream `FindMinNextPodAvailabilityCheck`: the pods are judged as of `evaluated_at`, the moment the owner's
/// status (e.g. availableReplicas) was computed, so no pod that was still unavailable then is missed; the delay
/// is then measured from `now`, and is zero if that pod has become available in between.
pub fn next_availability_check_since_evaluation<'a>(
    pods: impl IntoIterator<Item = &'a CachedPod>,
    min_ready_seconds: i32,
    evaluated_at: Timestamp,
    now: Timestamp,
) -> Option<Duration> {
    let mut earliest: Option<(Duration, &CachedPod)> = None;
    for pod in pods {
        if let Some(wait) = time_until_available(pod, min_ready_seconds, evaluated_at)
            && earliest.is_none_or(|(best, _)| wait < best)
        {
            earliest = Some((wait, pod));
        }
    }
    let (_, pod) = earliest?;
    Some(time_until_available(pod, min_ready_seconds, now).unwrap_or(Duration::ZERO))
}

/// The pod's deletion cost annotation; absent or invalid (e.g. `+1`, `007`, out of int32 range) counts as 0.
pub(crate) fn pod_deletion_cost(pod: &CachedPod) -> i32 {
    let Some(value) = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(POD_DELETION_COST_ANNOTATION))
    else {
        return 0;
    };
    // Upstream rejects a leading '+' and leading zeros before parsing.
    let canonical_start = match value.as_bytes().first() {
        Some(b'-') => true,
        Some(b'0') => value == "0",
        Some(first) => (b'1'..=b'9').contains(first),
        None => false,
    };
    if !canonical_start {
        return 0;
    }
    value.parse().unwrap_or(0)
}

/// Upstream `podPhaseToOrdinal`: Pending (and anything unlisted) 0, Unknown 1, Running 2.
fn phase_ordinal(pod: &CachedPod) -> u8 {
    match phase(pod) {
        "Unknown" => 1,
        "Running" => 2,
        _ => 0,
    }
}

fn phase_ordinal_name(ordinal: u8) -> &'static str {
    match ordinal {
        1 => "Unknown",
        2 => "Running",
        _ => "Pending",
    }
}

/// lastTransitionTime of a True Ready condition, `None` when not ready or not recorded.
fn ready_since(pod: &CachedPod) -> Option<Timestamp> {
    let conditions = pod.status.as_ref()?.conditions.as_ref()?;
    let ready = conditions
        .iter()
        .find(|c| c.type_ == "Ready" && c.status == "True")?;
    ready.last_transition_time.as_ref().map(|t| t.0)
}

/// Highest restart count among regular containers, and among restartable ("sidecar") init containers.
fn max_restarts(pod: &CachedPod) -> (i32, i32) {
    let Some(status) = pod.status.as_ref() else {
        return (0, 0);
    };
    let regular = status
        .container_statuses
        .iter()
        .flatten()
        .map(|c| c.restart_count)
        .fold(0, i32::max);
    let sidecar_names: HashSet<&str> = pod
        .spec
        .iter()
        .flat_map(|s| s.init_containers.iter().flatten())
        .filter(|c| c.restart_policy.as_deref() == Some("Always"))
        .map(|c| c.name.as_str())
        .collect();
    let sidecar = status
        .init_container_statuses
        .iter()
        .flatten()
        .filter(|c| sidecar_names.contains(c.name.as_str()))
        .map(|c| c.restart_count)
        .fold(0, i32::max);
    (regular, sidecar)
}

/// Orders two optional times with the more recent first and a missing time (Go's zero) most recent of all.
fn more_recent_first(a: Option<Timestamp>, b: Option<Timestamp>) -> Ordering {
    match (a, b) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some(a), Some(b)) => b.cmp(&a),
    }
}

/// floor(log2(age in ns)), or -1 for times not in the past; computed through f64 like upstream.
fn age_bucket(time: Timestamp, now: Timestamp) -> i64 {
    let age = now.as_nanosecond() - time.as_nanosecond();
    if age > 0 {
        // Truncating a positive float is its floor.
        (age as f64).log2() as i64
    } else {
        -1
    }
}

/// A pod to be ranked for deletion, with its co-location rank: how many active pods of related ReplicaSets
/// (same owning Deployment, itself included) run on the pod's node.
#[derive(Debug, Clone, Copy)]
pub struct RankedPod<'a> {
    /// The pod, as the pod cache holds it.
    pub pod: &'a CachedPod,
    /// Its co-location rank (upstream `ActivePodsWithRanks.Rank`): more is deleted first.
    pub rank: usize,
}

/// The rule that decided why one pod is deleted before another; rendered for "ranked first because …" logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeletionReason {
    /// Not yet assigned to a node while the other pod is.
    Unscheduled,
    /// An earlier phase: Pending before Unknown before Running.
    EarlierPhase {
        /// The phase of the pod deleted first.
        first: &'static str,
        /// The phase of the other pod.
        second: &'static str,
    },
    /// Not Ready while the other pod is.
    NotReady,
    /// A lower `controller.kubernetes.io/pod-deletion-cost` (with the `PodDeletionCost` gate on).
    LowerDeletionCost {
        /// The deletion cost of the pod deleted first.
        first: i32,
        /// The deletion cost of the other pod.
        second: i32,
    },
    /// More pods of related ReplicaSets on its node.
    MorePodsOnNode {
        /// The rank of the pod deleted first.
        first: usize,
        /// The rank of the other pod.
        second: usize,
    },
    /// Ready more recently (or without a recorded Ready time).
    ReadyMoreRecently,
    /// Ready times fell in the same log2 bucket of age; the UID decides, for a pseudo-random spread.
    ReadyAgeTieBrokenByUid,
    /// A higher restart count of its regular containers (the highest of any one container).
    MoreRestarts {
        /// The count of the pod deleted first.
        first: i32,
        /// The count of the other pod.
        second: i32,
    },
    /// Equal regular restarts, but a higher restart count of its sidecar (restartable init) containers.
    MoreSidecarRestarts {
        /// The count of the pod deleted first.
        first: i32,
        /// The count of the other pod.
        second: i32,
    },
    /// Created more recently (or without a recorded creation time).
    Newer,
    /// Creation times fell in the same log2 bucket of age; the UID decides.
    AgeTieBrokenByUid,
}

impl fmt::Display for DeletionReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unscheduled => f.write_str("unscheduled"),
            Self::EarlierPhase { first, second } => write!(f, "{first} before {second}"),
            Self::NotReady => f.write_str("not Ready"),
            Self::LowerDeletionCost { first, second } => {
                write!(f, "lower deletion cost {first} < {second}")
            }
            Self::MorePodsOnNode { first, second } => {
                write!(
                    f,
                    "more pods of related ReplicaSets on its node ({first} > {second})"
                )
            }
            Self::ReadyMoreRecently => f.write_str("Ready more recently"),
            Self::ReadyAgeTieBrokenByUid => f.write_str("Ready for a similar time, UID order"),
            Self::MoreRestarts { first, second } => write!(f, "more restarts ({first} > {second})"),
            Self::MoreSidecarRestarts { first, second } => {
                write!(f, "more sidecar restarts ({first} > {second})")
            }
            Self::Newer => f.write_str("newer"),
            Self::AgeTieBrokenByUid => f.write_str("similar age, UID order"),
        }
    }
}

/// What a comparison found: the order (a before b = `Less`) and the deciding rule, with the rule's reason
/// stated for the pod that comes first. `None` when no rule told the pods apart.
type Decision = Option<(Ordering, DeletionReason)>;

/// Which of the optional rules a comparison applies: upstream `ActivePods` has neither, upstream
/// `ActivePodsWithRanks` the rank, and the deletion cost with the `PodDeletionCost` gate on.
#[derive(Debug, Clone, Copy)]
struct Rules {
    ranks: bool,
    deletion_cost: bool,
}

/// Upstream `ActivePodsWithRanks.Less` as a three-way comparison, or `ActivePods.Less` without rules 4-5 and
/// `now`; `now` enables the log2 buckets of rules 6 and 8 (always, since v1.37 removed the
/// `LogarithmicScaleDown` gate that chose them).
fn decide(a: RankedPod<'_>, b: RankedPod<'_>, now: Option<Timestamp>, rules: Rules) -> Decision {
    let (pa, pb) = (a.pod, b.pod);

    // 1. Unassigned before assigned.
    let (node_a, node_b) = (node_name(pa), node_name(pb));
    if node_a != node_b && (node_a.is_empty() || node_b.is_empty()) {
        let ordering = if node_a.is_empty() {
            Ordering::Less
        } else {
            Ordering::Greater
        };
        return Some((ordering, DeletionReason::Unscheduled));
    }

    // 2. Pending < Unknown < Running.
    let (phase_a, phase_b) = (phase_ordinal(pa), phase_ordinal(pb));
    if phase_a != phase_b {
        let (first, second) = (phase_a.min(phase_b), phase_a.max(phase_b));
        let reason = DeletionReason::EarlierPhase {
            first: phase_ordinal_name(first),
            second: phase_ordinal_name(second),
        };
        return Some((phase_a.cmp(&phase_b), reason));
    }

    // 3. Not Ready before Ready.
    let (ready_a, ready_b) = (is_pod_ready(pa), is_pod_ready(pb));
    if ready_a != ready_b {
        return Some((ready_a.cmp(&ready_b), DeletionReason::NotReady));
    }

    if rules.ranks {
        // 4. Lower deletion cost first.
        let (cost_a, cost_b) = (pod_deletion_cost(pa), pod_deletion_cost(pb));
        if rules.deletion_cost && cost_a != cost_b {
            let reason = DeletionReason::LowerDeletionCost {
                first: cost_a.min(cost_b),
                second: cost_a.max(cost_b),
            };
            return Some((cost_a.cmp(&cost_b), reason));
        }

        // 5. Higher co-location rank first.
        if a.rank != b.rank {
            let reason = DeletionReason::MorePodsOnNode {
                first: a.rank.max(b.rank),
                second: a.rank.min(b.rank),
            };
            return Some((b.rank.cmp(&a.rank), reason));
        }
    }

    // 6. Both Ready: Ready more recently first.
    if ready_a && ready_b {
        let (since_a, since_b) = (ready_since(pa), ready_since(pb));
        if since_a != since_b {
            return Some(by_recency(
                since_a,
                since_b,
                now,
                uid(pa),
                uid(pb),
                DeletionReason::ReadyMoreRecently,
                DeletionReason::ReadyAgeTieBrokenByUid,
            ));
        }
    }

    // 7. More restarts first: regular containers, then sidecars.
    let ((regular_a, sidecar_a), (regular_b, sidecar_b)) = (max_restarts(pa), max_restarts(pb));
    if regular_a != regular_b {
        let reason = DeletionReason::MoreRestarts {
            first: regular_a.max(regular_b),
            second: regular_a.min(regular_b),
        };
        return Some((regular_b.cmp(&regular_a), reason));
    }
    if sidecar_a != sidecar_b {
        let reason = DeletionReason::MoreSidecarRestarts {
            first: sidecar_a.max(sidecar_b),
            second: sidecar_a.min(sidecar_b),
        };
        return Some((sidecar_b.cmp(&sidecar_a), reason));
    }

    // 8. Newer first.
    let (created_a, created_b) = (creation_time(pa), creation_time(pb));
    if created_a != created_b {
        return Some(by_recency(
            created_a,
            created_b,
            now,
            uid(pa),
            uid(pb),
            DeletionReason::Newer,
            DeletionReason::AgeTieBrokenByUid,
        ));
    }
    None
}

/// Rules 6 and 8 for two different times: more recent first, in log2 buckets of age when `now` is given and
/// both times are known. Equal buckets are decided by UID, and that decision is final even if the UIDs are
/// equal (upstream does not fall through to later rules then).
fn by_recency(
    a: Option<Timestamp>,
    b: Option<Timestamp>,
    now: Option<Timestamp>,
    uid_a: &str,
    uid_b: &str,
    recency: DeletionReason,
    tie: DeletionReason,
) -> (Ordering, DeletionReason) {
    match (a, b, now) {
        (Some(a), Some(b), Some(now)) => {
            let (bucket_a, bucket_b) = (age_bucket(a, now), age_bucket(b, now));
            if bucket_a == bucket_b {
                (uid_a.cmp(uid_b), tie)
            } else {
                (bucket_a.cmp(&bucket_b), recency)
            }
        }
        _ => (more_recent_first(a, b), recency),
    }
}

/// Upstream `ActivePodsWithRanks` order: `Less` means `a` should be deleted before `b`. Rules, first
/// difference wins: unassigned; Pending < Unknown < Running; not Ready; lower deletion cost; higher rank; both
/// Ready: Ready more recently; more restarts (then more sidecar restarts); newer. With `now`, rules 6 and 8
/// compare log2 buckets of age and break bucket ties by UID.
///
/// Not always transitive (bucket ties are decided by UID, exact ties fall through), so sort with
/// [`sort_for_deletion`] rather than `slice::sort_by`, which may panic on such comparators. Without
/// `deletion_cost` (the `PodDeletionCost` gate off) rule 4 is skipped.
pub(crate) fn cmp_for_deletion(
    a: RankedPod<'_>,
    b: RankedPod<'_>,
    now: Option<Timestamp>,
    deletion_cost: bool,
) -> Ordering {
    let rules = Rules {
        ranks: true,
        deletion_cost,
    };
    decide(a, b, now, rules).map_or(Ordering::Equal, |(ordering, _)| ordering)
}

/// Why `first` is deleted before `second` under [`cmp_for_deletion`]; `None` if it is not (equal or after).
pub fn deletion_reason(
    first: RankedPod<'_>,
    second: RankedPod<'_>,
    now: Option<Timestamp>,
    deletion_cost: bool,
) -> Option<DeletionReason> {
    let rules = Rules {
        ranks: true,
        deletion_cost,
    };
    match decide(first, second, now, rules) {
        Some((Ordering::Less, reason)) => Some(reason),
        _ => None,
    }
}

/// Sorts so the pods to delete first come first (upstream `sort.Sort(ActivePodsWithRanks{…, Now: now})`).
pub fn sort_for_deletion(pods: &mut [RankedPod<'_>], now: Option<Timestamp>, deletion_cost: bool) {
    sort_tolerating_cycles(pods, |a, b| cmp_for_deletion(*a, *b, now, deletion_cost));
}

#[cfg(test)]
/// Upstream `ActivePods` order (used where no ranks exist): rules 1-3, then Ready more recently, more restarts,
/// newer — no deletion cost, no rank, no log buckets. `Less` means `a` goes first.
pub(crate) fn cmp_active_pods(a: &CachedPod, b: &CachedPod) -> Ordering {
    let ranked = |pod| RankedPod { pod, rank: 0 };
    let rules = Rules {
        ranks: false,
        deletion_cost: false,
    };
    decide(ranked(a), ranked(b), None, rules).map_or(Ordering::Equal, |(ordering, _)| ordering)
}

#[cfg(test)]
/// Sorts by `cmp_active_pods`.
pub(crate) fn sort_active_pods(pods: &mut [&CachedPod]) {
    sort_tolerating_cycles(pods, |a, b| cmp_active_pods(a, b));
}

/// A stable bottom-up merge sort that cannot panic whatever the comparator answers (Go's sort never does).
fn sort_tolerating_cycles<T: Copy>(items: &mut [T], mut cmp: impl FnMut(&T, &T) -> Ordering) {
    let len = items.len();
    let mut order: Vec<usize> = (0..len).collect();
    let mut merged = Vec::with_capacity(len);
    let mut width = 1;
    while width < len {
        merged.clear();
        for start in (0..len).step_by(2 * width) {
            let middle = (start + width).min(len);
            let end = (start + 2 * width).min(len);
            let (mut left, mut right) = (start, middle);
            while left < middle && right < end {
                if cmp(&items[order[right]], &items[order[left]]) == Ordering::Less {
                    merged.push(order[right]);
                    right += 1;
                } else {
                    merged.push(order[left]);
                    left += 1;
                }
            }
            merged.extend_from_slice(&order[left..middle]);
            merged.extend_from_slice(&order[right..end]);
        }
        std::mem::swap(&mut order, &mut merged);
        width *= 2;
    }
    let sorted: Vec<T> = order.iter().map(|&i| items[i]).collect();
    items.copy_from_slice(&sorted);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pods::cached::{
        CachedInitContainer, CachedPodSpec, CachedPodStatus, ContainerRestarts,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
    use k8s_openapi::jiff::SignedDuration;
    use std::collections::BTreeMap;

    fn now() -> Timestamp {
        Timestamp::from_second(1_750_000_000).unwrap()
    }

    fn ago(d: SignedDuration) -> Timestamp {
        now() - d
    }

    const MONTH: SignedDuration = SignedDuration::from_hours(30 * 24);

    fn status(restarts: i32) -> ContainerRestarts {
        ContainerRestarts {
            restart_count: restarts,
            ..Default::default()
        }
    }

    fn ready_condition_at(status: &str, since: Option<Timestamp>) -> PodCondition {
        PodCondition {
            type_: "Ready".into(),
            status: status.into(),
            last_transition_time: since.map(Time),
            ..Default::default()
        }
    }

    /// A pod in the shape of upstream TestSortingActivePodsWithRanks' `pod` helper.
    #[allow(clippy::too_many_arguments)]
    fn pod(
        name: &str,
        node: &str,
        phase: &str,
        ready: bool,
        restarts: i32,
        sidecar_restarts: i32,
        ready_since: Option<Timestamp>,
        created: Option<Timestamp>,
        cost: Option<&str>,
    ) -> CachedPod {
        let mut status = CachedPodStatus {
            phase: Some(phase.into()),
            ..Default::default()
        };
        if ready {
            status.conditions = Some(vec![ready_condition_at("True", ready_since)]);
            status.container_statuses = Some(vec![self::status(restarts)]);
            status.init_container_statuses = Some(vec![ContainerRestarts {
                name: "sidecar".into(),
                restart_count: sidecar_restarts,
            }]);
        }
        CachedPod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                creation_timestamp: created.map(Time),
                annotations: cost.map(|c| {
                    BTreeMap::from([(POD_DELETION_COST_ANNOTATION.to_owned(), c.to_owned())])
                }),
                ..Default::default()
            },
            spec: Some(CachedPodSpec {
                node_name: (!node.is_empty()).then(|| node.into()),
                init_containers: Some(vec![CachedInitContainer {
                    name: "sidecar".into(),
                    restart_policy: Some("Always".into()),
                }]),
                ..Default::default()
            }),
            status: Some(status),
        }
    }

    fn name(pod: &CachedPod) -> &str {
        pod.metadata.name.as_deref().unwrap()
    }

    /// Deterministic shuffles (xorshift) standing in for upstream's rand.Perm.
    fn shuffles<T: Copy>(items: &[T], rounds: usize) -> Vec<Vec<T>> {
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        (0..rounds)
            .map(|_| {
                let mut v = items.to_vec();
                for i in (1..v.len()).rev() {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    v.swap(i, (state % (i as u64 + 1)) as usize);
                }
                v
            })
            .collect()
    }

    // Mirrors TestActivePodFiltering, plus terminating pods (TestCountTerminatingPods).
    #[test]
    fn active_and_terminating_pods() {
        let with_phase = |phase: &str, deleting: bool| CachedPod {
            metadata: ObjectMeta {
                deletion_timestamp: deleting.then(|| Time(now())),
                ..Default::default()
            },
            status: Some(CachedPodStatus {
                phase: (!phase.is_empty()).then(|| phase.into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let cases = [
            ("Succeeded", false, false, false),
            ("Failed", false, false, false),
            ("Running", false, true, false),
            ("Pending", false, true, false),
            ("", false, true, false),
            ("Pending", true, false, true),
            ("Running", true, false, true),
            ("Succeeded", true, false, false),
            ("Failed", true, false, false),
        ];
        for (phase, deleting, active, terminating) in cases {
            let p = with_phase(phase, deleting);
            assert_eq!(is_pod_active(&p), active, "{phase} deleting={deleting}");
            assert_eq!(
                is_pod_terminating(&p),
                terminating,
                "{phase} deleting={deleting}"
            );
        }
        assert!(is_pod_active(&CachedPod::default()));
    }

    #[test]
    fn readiness_and_availability() {
        let with_ready = |status: &str, since: Option<Timestamp>| CachedPod {
            status: Some(CachedPodStatus {
                conditions: Some(vec![ready_condition_at(status, since)]),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert!(!is_pod_ready(&CachedPod::default()));
        assert!(!is_pod_ready(&with_ready("False", None)));
        assert!(!is_pod_ready(&with_ready("Unknown", None)));
        assert!(is_pod_ready(&with_ready("True", None)));

        let t = now();
        let ready_10s = with_ready("True", Some(ago(SignedDuration::from_secs(10))));
        assert!(is_pod_available(&ready_10s, 0, t));
        assert!(is_pod_available(&ready_10s, 9, t));
        assert!(
            is_pod_available(&ready_10s, 10, t),
            "exactly minReadySeconds counts as available"
        );
        assert!(!is_pod_available(&ready_10s, 11, t));
        assert!(!is_pod_available(
            &with_ready("False", Some(ago(MONTH))),
            0,
            t
        ));
        assert!(is_pod_available(&with_ready("True", None), 0, t));
        assert!(!is_pod_available(&with_ready("True", None), 1, t));
    }

    fn pod_ready_for(seconds: i64, ready: bool) -> CachedPod {
        let status = if ready { "True" } else { "False" };
        CachedPod {
            status: Some(CachedPodStatus {
                conditions: Some(vec![ready_condition_at(
                    status,
                    Some(ago(SignedDuration::from_secs(seconds))),
                )]),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    // Mirrors TestNextPodAvailabilityCheck.
    #[test]
    fn next_availability_of_one_pod() {
        let mut no_transition_time = pod_ready_for(0, true);
        no_transition_time
            .status
            .as_mut()
            .unwrap()
            .conditions
            .as_mut()
            .unwrap()[0]
            .last_transition_time = None;
        let cases = [
            ("not ready", pod_ready_for(0, false), 0, None),
            ("no minReadySeconds", pod_ready_for(0, true), 0, None),
            ("lastTransitionTime is zero", no_transition_time, 1, None),
            (
                "just became ready",
                pod_ready_for(0, true),
                1,
                Some(Duration::from_secs(1)),
            ),
            (
                "ready for 20s",
                pod_ready_for(20, true),
                30,
                Some(Duration::from_secs(10)),
            ),
            ("available", pod_ready_for(51, true), 50, None),
        ];
        for (what, pod, min_ready, want) in cases {
            assert_eq!(time_until_available(&pod, min_ready, now()), want, "{what}");
            assert_eq!(
                next_availability_check([&pod], min_ready, now()),
                want,
                "{what}"
            );
        }
    }

    // Mirrors TestFindMinNextPodAvailabilitySimpleCheck and TestFindMinNextPodAvailability.
    #[test]
    fn next_availability_of_many_pods() {
        let mixed = [
            pod_ready_for(0, false),
            pod_ready_for(2, true),
            pod_ready_for(0, true),
            pod_ready_for(4, true),
            pod_ready_for(0, false),
        ];
        let available = [
            pod_ready_for(0, false),
            pod_ready_for(15, true),
            pod_ready_for(11, true),
            pod_ready_for(10, true),
            pod_ready_for(0, false),
        ];
        let unready = [pod_ready_for(0, false), pod_ready_for(0, false)];
        let ready = [pod_ready_for(0, true), pod_ready_for(0, true)];

        assert_eq!(next_availability_check([], 0, now()), None);
        assert_eq!(next_availability_check(&unready, 0, now()), None);
        assert_eq!(next_availability_check(&ready, 0, now()), None);
        assert_eq!(
            next_availability_check(&mixed, 10, now()),
            Some(Duration::from_secs(6))
        );
        assert_eq!(next_availability_check(&available, 10, now()), None);

        // Status evaluated at `now`, the clock read 2 s / 7 s later.
        let later = |s| now() + SignedDuration::from_secs(s);
        assert_eq!(
            next_availability_check_since_evaluation(&mixed, 10, now(), later(2)),
            Some(Duration::from_secs(4))
        );
        assert_eq!(
            next_availability_check_since_evaluation(&mixed, 10, now(), later(7)),
            Some(Duration::ZERO)
        );
        assert_eq!(
            next_availability_check_since_evaluation(&available, 10, now(), later(7)),
            None
        );
    }

    #[test]
    fn deletion_cost_parsing() {
        let with_cost = |c: &str| pod("p", "n", "Running", true, 0, 0, None, None, Some(c));
        let cases = [
            ("0", 0),
            ("10", 10),
            ("-5", -5),
            ("-0", 0),
            ("2147483647", i32::MAX),
            ("-2147483648", i32::MIN),
            ("2147483648", 0),
            ("+10", 0),
            ("007", 0),
            ("00", 0),
            ("", 0),
            ("-", 0),
            ("1.5", 0),
            ("ten", 0),
            (" 1", 0),
        ];
        for (value, want) in cases {
            assert_eq!(pod_deletion_cost(&with_cost(value)), want, "{value:?}");
        }
        assert_eq!(pod_deletion_cost(&CachedPod::default()), 0);
    }

    // Mirrors TestSortingActivePods.
    #[test]
    fn sorting_active_pods() {
        let then = ago(MONTH);
        let running = |name: &str,
                       ready_since: Option<Timestamp>,
                       restarts: &[i32],
                       created: Option<Timestamp>| {
            CachedPod {
                metadata: ObjectMeta {
                    name: Some(name.into()),
                    creation_timestamp: created.map(Time),
                    ..Default::default()
                },
                spec: Some(CachedPodSpec {
                    node_name: Some("foo".into()),
                    ..Default::default()
                }),
                status: Some(CachedPodStatus {
                    phase: Some("Running".into()),
                    conditions: Some(vec![ready_condition_at("True", ready_since)]),
                    container_statuses: Some(restarts.iter().map(|&r| status(r)).collect()),
                    ..Default::default()
                }),
            }
        };
        let plain = |name: &str, node: &str, phase: &str| CachedPod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            spec: Some(CachedPodSpec {
                node_name: (!node.is_empty()).then(|| node.into()),
                ..Default::default()
            }),
            status: Some(CachedPodStatus {
                phase: Some(phase.into()),
                ..Default::default()
            }),
        };
        let mut lower_sidecar = running(
            "lowerSidecarContainerRestartCount",
            Some(then),
            &[2, 1],
            Some(now()),
        );
        lower_sidecar.spec.as_mut().unwrap().init_containers = Some(vec![CachedInitContainer {
            name: "sidecar".into(),
            restart_policy: Some("Always".into()),
        }]);
        lower_sidecar
            .status
            .as_mut()
            .unwrap()
            .init_container_statuses = Some(vec![ContainerRestarts {
            name: "sidecar".into(),
            restart_count: 2,
        }]);
        let pods = [
            plain("unscheduled", "", "Pending"),
            plain("scheduledButPending", "bar", "Pending"),
            plain("unknownPhase", "foo", "Unknown"),
            plain("runningButNotReady", "foo", "Running"),
            running("runningNoLastTransitionTime", None, &[3, 0], None),
            running("runningWithLastTransitionTime", Some(now()), &[3, 0], None),
            running("runningLongerTime", Some(then), &[3, 0], None),
            lower_sidecar,
            running(
                "lowerContainerRestartCount",
                Some(then),
                &[2, 1],
                Some(now()),
            ),
            running("oldest", Some(then), &[2, 1], Some(then)),
        ];
        let want: Vec<&str> = pods.iter().map(name).collect();
        let refs: Vec<&CachedPod> = pods.iter().collect();
        for mut shuffled in shuffles(&refs, 20) {
            sort_active_pods(&mut shuffled);
            assert_eq!(shuffled.iter().map(|p| name(p)).collect::<Vec<_>>(), want);
        }
    }

    // Mirrors TestSortingActivePodsWithRanks, the case with the PodDeletionCost gate off included.
    #[test]
    fn sorting_active_pods_with_ranks() {
        let (n, then1m) = (Some(now()), Some(ago(MONTH)));
        let hours = |h| Some(ago(SignedDuration::from_hours(h)));
        let unscheduled = pod("unscheduled", "", "Pending", false, 0, 0, None, None, None);
        let scheduled_pending = pod("pending", "node", "Pending", false, 0, 0, None, None, None);
        let unknown_phase = pod(
            "unknown-phase",
            "node",
            "Unknown",
            false,
            0,
            0,
            None,
            None,
            None,
        );
        let running_not_ready = pod(
            "not-ready",
            "node",
            "Running",
            false,
            0,
            0,
            None,
            None,
            None,
        );
        let ready_no_ltt = pod(
            "ready-no-last-transition-time",
            "node",
            "Running",
            true,
            0,
            0,
            None,
            None,
            None,
        );
        let ready_now = pod("ready-now", "node", "Running", true, 0, 0, n, n, None);
        let ready_then = pod(
            "ready-then",
            "node",
            "Running",
            true,
            0,
            0,
            then1m,
            then1m,
            None,
        );
        let high_restarts = pod(
            "ready-high-restarts",
            "node",
            "Running",
            true,
            9001,
            0,
            n,
            n,
            None,
        );
        let high_side_restarts = pod(
            "ready-high-side-restarts",
            "node",
            "Running",
            true,
            9001,
            9001,
            n,
            n,
            None,
        );
        let ready_now_created_then = pod(
            "ready-now-created-then",
            "node",
            "Running",
            true,
            0,
            0,
            n,
            then1m,
            None,
        );
        let low_cost = pod(
            "low-deletion-cost",
            "node",
            "Running",
            true,
            0,
            0,
            n,
            then1m,
            Some("10"),
        );
        let high_cost = pod(
            "high-deletion-cost",
            "node",
            "Running",
            true,
            0,
            0,
            n,
            then1m,
            Some("100"),
        );
        let unscheduled_5h = pod(
            "unscheduled-5-hours",
            "",
            "Pending",
            false,
            0,
            0,
            hours(5),
            hours(5),
            None,
        );
        let unscheduled_8h = pod(
            "unscheduled-8-hours",
            "",
            "Pending",
            false,
            0,
            0,
            hours(8),
            hours(8),
            None,
        );
        let ready_2h = pod(
            "ready-2-hours",
            "",
            "Running",
            true,
            0,
            0,
            hours(2),
            then1m,
            None,
        );
        let ready_5h = pod(
            "ready-5-hours",
            "",
            "Running",
            true,
            0,
            0,
            hours(5),
            then1m,
            None,
        );
        let ready_8h = pod(
            "ready-8-hours",
            "",
            "Running",
            true,
            0,
            0,
            hours(8),
            then1m,
            None,
        );

        let r = |pod, rank| RankedPod { pod, rank };
        let equal = [
            (&unscheduled, &unscheduled),
            (&scheduled_pending, &scheduled_pending),
            (&unknown_phase, &unknown_phase),
            (&running_not_ready, &running_not_ready),
            (&ready_now_created_then, &ready_now_created_then),
            (&ready_now, &ready_now),
            (&ready_then, &ready_then),
            (&high_restarts, &high_restarts),
            (&unscheduled_5h, &unscheduled_8h),
            (&ready_5h, &ready_8h),
        ];
        for (a, b) in equal {
            assert_eq!(
                cmp_for_deletion(r(a, 1), r(b, 1), n, true),
                Ordering::Equal,
                "{} vs {}",
                name(a),
                name(b)
            );
            assert_eq!(
                cmp_for_deletion(r(b, 1), r(a, 1), n, true),
                Ordering::Equal,
                "{} vs {}",
                name(b),
                name(a)
            );
        }

        use DeletionReason::*;
        let unequal = [
            (r(&unscheduled, 1), r(&scheduled_pending, 2), Unscheduled),
            (r(&unscheduled, 2), r(&scheduled_pending, 1), Unscheduled),
            (
                r(&scheduled_pending, 1),
                r(&unknown_phase, 2),
                EarlierPhase {
                    first: "Pending",
                    second: "Unknown",
                },
            ),
            (
                r(&unknown_phase, 1),
                r(&running_not_ready, 2),
                EarlierPhase {
                    first: "Unknown",
                    second: "Running",
                },
            ),
            (r(&running_not_ready, 1), r(&ready_no_ltt, 1), NotReady),
            (r(&ready_no_ltt, 1), r(&ready_now, 1), ReadyMoreRecently),
            (
                r(&ready_now, 2),
                r(&ready_no_ltt, 1),
                MorePodsOnNode {
                    first: 2,
                    second: 1,
                },
            ),
            (r(&ready_now, 1), r(&ready_then, 1), ReadyMoreRecently),
            (
                r(&ready_now, 2),
                r(&ready_then, 1),
                MorePodsOnNode {
                    first: 2,
                    second: 1,
                },
            ),
            (
                r(&high_restarts, 1),
                r(&ready_now, 1),
                MoreRestarts {
                    first: 9001,
                    second: 0,
                },
            ),
            (
                r(&high_side_restarts, 1),
                r(&high_restarts, 1),
                MoreSidecarRestarts {
                    first: 9001,
                    second: 0,
                },
            ),
            (
                r(&ready_now, 2),
                r(&high_restarts, 1),
                MorePodsOnNode {
                    first: 2,
                    second: 1,
                },
            ),
            (r(&ready_now, 1), r(&ready_now_created_then, 1), Newer),
            (
                r(&ready_now_created_then, 2),
                r(&ready_now, 1),
                MorePodsOnNode {
                    first: 2,
                    second: 1,
                },
            ),
            (
                r(&low_cost, 2),
                r(&high_cost, 1),
                LowerDeletionCost {
                    first: 10,
                    second: 100,
                },
            ),
            (r(&ready_2h, 1), r(&ready_5h, 1), ReadyMoreRecently),
        ];
        for (lesser, greater, reason) in unequal {
            let what = format!(
                "{} (rank {}) vs {} (rank {})",
                name(lesser.pod),
                lesser.rank,
                name(greater.pod),
                greater.rank
            );
            assert_eq!(
                cmp_for_deletion(lesser, greater, n, true),
                Ordering::Less,
                "{what}"
            );
            assert_eq!(
                cmp_for_deletion(greater, lesser, n, true),
                Ordering::Greater,
                "{what}"
            );
            assert_eq!(
                deletion_reason(lesser, greater, n, true),
                Some(reason),
                "{what}"
            );
            assert_eq!(deletion_reason(greater, lesser, n, true), None, "{what}");
        }

        // The case with the PodDeletionCost gate off: the cost no longer counts, the rank decides.
        let (lesser, greater) = (r(&high_cost, 2), r(&low_cost, 1));
        assert_eq!(cmp_for_deletion(lesser, greater, n, false), Ordering::Less);
        assert_eq!(
            deletion_reason(lesser, greater, n, false),
            Some(MorePodsOnNode {
                first: 2,
                second: 1
            })
        );
        assert_eq!(
            cmp_for_deletion(lesser, greater, n, true),
            Ordering::Greater
        );
    }

    #[test]
    fn log_buckets_and_uid_tie_breaks() {
        let n = Some(now());
        let hours = |h| Some(ago(SignedDuration::from_hours(h)));
        let with_uid = |mut p: CachedPod, uid: &str| {
            p.metadata.uid = Some(uid.into());
            p
        };
        // Ready 5 h and 8 h ago share bucket 44: the UID decides, and even beats more restarts.
        let ready_5h = with_uid(
            pod(
                "ready-5h",
                "node",
                "Running",
                true,
                0,
                0,
                hours(5),
                None,
                None,
            ),
            "b",
        );
        let ready_8h = with_uid(
            pod(
                "ready-8h",
                "node",
                "Running",
                true,
                7,
                0,
                hours(8),
                None,
                None,
            ),
            "a",
        );
        let r = |pod| RankedPod { pod, rank: 0 };
        assert_eq!(
            cmp_for_deletion(r(&ready_8h), r(&ready_5h), n, true),
            Ordering::Less
        );
        assert_eq!(
            deletion_reason(r(&ready_8h), r(&ready_5h), n, true),
            Some(DeletionReason::ReadyAgeTieBrokenByUid)
        );
        // Without `now` there are no buckets: more recent first.
        assert_eq!(
            deletion_reason(r(&ready_5h), r(&ready_8h), None, true),
            Some(DeletionReason::ReadyMoreRecently)
        );

        // Identical ready times fall through to the restarts rule.
        let same_a = with_uid(
            pod("a", "node", "Running", true, 1, 0, hours(5), None, None),
            "z",
        );
        let same_b = with_uid(
            pod("b", "node", "Running", true, 0, 0, hours(5), None, None),
            "a",
        );
        assert_eq!(
            deletion_reason(r(&same_a), r(&same_b), n, true),
            Some(DeletionReason::MoreRestarts {
                first: 1,
                second: 0
            })
        );

        // Creation times in one bucket: UID order; in different buckets: newer first.
        let created_5h = with_uid(
            pod("c5", "node", "Pending", false, 0, 0, None, hours(5), None),
            "y",
        );
        let created_8h = with_uid(
            pod("c8", "node", "Pending", false, 0, 0, None, hours(8), None),
            "x",
        );
        let created_2h = with_uid(
            pod("c2", "node", "Pending", false, 0, 0, None, hours(2), None),
            "z",
        );
        assert_eq!(
            deletion_reason(r(&created_8h), r(&created_5h), n, true),
            Some(DeletionReason::AgeTieBrokenByUid)
        );
        assert_eq!(
            deletion_reason(r(&created_2h), r(&created_8h), n, true),
            Some(DeletionReason::Newer)
        );
        // Creation time in the future (clock skew) lands in bucket -1, the newest.
        let future = with_uid(
            pod(
                "f",
                "node",
                "Pending",
                false,
                0,
                0,
                None,
                Some(now() + MONTH),
                None,
            ),
            "zz",
        );
        assert_eq!(
            deletion_reason(r(&future), r(&created_2h), n, true),
            Some(DeletionReason::Newer)
        );
        // A missing creation time is the newest of all, with or without buckets.
        let uncreated = with_uid(
            pod("u", "node", "Pending", false, 0, 0, None, None, None),
            "zzz",
        );
        assert_eq!(
            deletion_reason(r(&uncreated), r(&future), n, true),
            Some(DeletionReason::Newer)
        );

        assert_eq!(age_bucket(now(), now()), -1);
        assert_eq!(age_bucket(ago(SignedDuration::from_nanos(1)), now()), 0);
        assert_eq!(age_bucket(ago(SignedDuration::from_hours(2)), now()), 42);
        assert_eq!(age_bucket(ago(SignedDuration::from_hours(5)), now()), 44);
        assert_eq!(age_bucket(ago(SignedDuration::from_hours(8)), now()), 44);
    }

    #[test]
    fn sort_for_deletion_orders_and_survives_cycles() {
        let n = Some(now());
        let hours = |h| Some(ago(SignedDuration::from_hours(h)));
        let with_uid = |mut p: CachedPod, uid: &str| {
            p.metadata.uid = Some(uid.into());
            p
        };
        let unscheduled = pod("unscheduled", "", "Pending", false, 0, 0, None, None, None);
        let pending = pod("pending", "node", "Pending", false, 0, 0, None, None, None);
        let cheap = pod("cheap", "node", "Running", true, 0, 0, n, n, Some("-5"));
        let crowded = pod("crowded", "node", "Running", true, 0, 0, n, n, None);
        let lonely = pod("lonely", "node", "Running", true, 0, 0, n, n, None);
        let pods = [
            RankedPod {
                pod: &unscheduled,
                rank: 0,
            },
            RankedPod {
                pod: &pending,
                rank: 0,
            },
            RankedPod {
                pod: &cheap,
                rank: 1,
            },
            RankedPod {
                pod: &crowded,
                rank: 3,
            },
            RankedPod {
                pod: &lonely,
                rank: 1,
            },
        ];
        for mut shuffled in shuffles(&pods, 20) {
            sort_for_deletion(&mut shuffled, n, true);
            let names: Vec<&str> = shuffled.iter().map(|p| name(p.pod)).collect();
            assert_eq!(
                names,
                ["unscheduled", "pending", "cheap", "crowded", "lonely"]
            );
        }
        assert_eq!(
            deletion_reason(pods[2], pods[3], n, true),
            Some(DeletionReason::LowerDeletionCost {
                first: -5,
                second: 0
            })
        );
        assert_eq!(
            deletion_reason(pods[2], pods[3], n, true)
                .unwrap()
                .to_string(),
            "lower deletion cost -5 < 0"
        );

        // An intransitive triple (upstream's comparator allows it): a = b by ready time, so restarts decide
        // a < b; b < c and c < a by UID within one bucket. Sorting must not panic.
        let a = with_uid(
            pod("a", "node", "Running", true, 5, 0, hours(5), None, None),
            "3",
        );
        let b = with_uid(
            pod("b", "node", "Running", true, 0, 0, hours(5), None, None),
            "1",
        );
        let c = with_uid(
            pod("c", "node", "Running", true, 0, 0, hours(6), None, None),
            "2",
        );
        let r = |pod| RankedPod { pod, rank: 0 };
        assert_eq!(cmp_for_deletion(r(&a), r(&b), n, true), Ordering::Less);
        assert_eq!(cmp_for_deletion(r(&b), r(&c), n, true), Ordering::Less);
        assert_eq!(cmp_for_deletion(r(&c), r(&a), n, true), Ordering::Less);
        let many: Vec<RankedPod> = (0..50).flat_map(|_| [r(&a), r(&b), r(&c)]).collect();
        for mut shuffled in shuffles(&many, 5) {
            sort_for_deletion(&mut shuffled, n, true);
            assert_eq!(shuffled.len(), 150);
        }
    }

    #[test]
    fn reasons_render_for_logs() {
        let rendered = [
            DeletionReason::Unscheduled.to_string(),
            DeletionReason::EarlierPhase {
                first: "Pending",
                second: "Running",
            }
            .to_string(),
            DeletionReason::NotReady.to_string(),
            DeletionReason::MorePodsOnNode {
                first: 3,
                second: 1,
            }
            .to_string(),
            DeletionReason::ReadyMoreRecently.to_string(),
            DeletionReason::MoreRestarts {
                first: 4,
                second: 0,
            }
            .to_string(),
            DeletionReason::Newer.to_string(),
        ];
        assert_eq!(
            rendered,
            [
                "unscheduled",
                "Pending before Running",
                "not Ready",
                "more pods of related ReplicaSets on its node (3 > 1)",
                "Ready more recently",
                "more restarts (4 > 0)",
                "newer",
            ]
        );
    }
}
