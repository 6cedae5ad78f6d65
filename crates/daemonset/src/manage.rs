//! The `manage` step of a DaemonSet sync (upstream `getNodesToDaemonPods`, `podsShouldBeOnNode`,
//! `getUnscheduledPodsWithoutNode`): for every node, create the missing daemon pod, or delete the pods that
//! should not be there — failed pods (behind a per-node backoff), succeeded pods, duplicates, and every pod
//! on a node the DaemonSet must leave.
//!
//! With surge allowed a node may briefly hold one pod of the current revision and one older pod; manage
//! keeps the oldest of each and drops the old one as soon as it is not Ready or the new one is available.
//! Without surge it keeps only the oldest pod (scheduled first, then by creation time, then by name).
//!
//! The plans here are what `syncNodes` executes: creations (pinned to their node, capped at
//! [`crate::BURST_REPLICAS`], in slow-start batches) and deletions, with expectations set first. That
//! execution, the events and the requeues are the [`controller`](crate::controller)'s job.

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use mini_kcm_runtime::observability::decisions::NodePlacement;
use mini_kcm_runtime::observability::events::EventType;
use mini_kcm_runtime::pods::cached::CachedPod;
use mini_kcm_runtime::pods::ranking::{is_pod_available, is_pod_ready};
use tokio::time::Instant;

use crate::affinity::get_target_node_name;
use crate::backoff::{FailedPodBackoff, failed_pods_backoff_key};
use crate::placement::{DaemonPlacement, NodeDecision};
use crate::update::allows_surge;
use crate::{
    DaemonSetObject, FAILED_DAEMON_POD_REASON, REVISION_HASH_LABEL, SUCCEEDED_DAEMON_POD_REASON,
};

fn phase(pod: &CachedPod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

fn is_scheduled(pod: &CachedPod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty())
}

fn name(pod: &CachedPod) -> &str {
    pod.metadata.name.as_deref().unwrap_or_default()
}

/// Oldest first: scheduled before unscheduled, then earlier creation (a missing timestamp is Go's zero time,
/// the oldest), then name. Upstream `podByCreationTimestampAndPhase`; status also counts the oldest pod.
pub(crate) fn cmp_oldest_first(a: &CachedPod, b: &CachedPod) -> Ordering {
    let created = |p: &CachedPod| p.metadata.creation_timestamp.as_ref().map(|t| t.0);
    is_scheduled(b)
        .cmp(&is_scheduled(a))
        .then_with(|| created(a).cmp(&created(b)))
        .then_with(|| name(a).cmp(name(b)))
}

/// Claimed daemon pods grouped by the node they are for ([`get_target_node_name`]); pods whose node
/// cannot be told are skipped. Terminal pods that are being deleted are dropped unless
/// `include_deleted_terminal` (history cleanup still wants their hashes).
///
/// upstream: getNodesToDaemonPods
pub(crate) fn group_pods_by_node<'a>(
    pods: impl IntoIterator<Item = &'a CachedPod>,
    include_deleted_terminal: bool,
) -> BTreeMap<String, Vec<&'a CachedPod>> {
    let mut by_node: BTreeMap<String, Vec<&'a CachedPod>> = BTreeMap::new();
    for pod in pods {
        let terminal = matches!(phase(pod), "Succeeded" | "Failed");
        if !include_deleted_terminal && terminal && pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        match get_target_node_name(pod) {
            Ok(node) => by_node.entry(node.to_owned()).or_default().push(pod),
            Err(e) => {
                tracing::debug!(pod = name(pod), error = %e, "daemon pod without target node")
            }
        }
    }
    by_node
}

/// Unscheduled pods targeting nodes that no longer exist: nothing else (not even pod GC) would delete them.
pub(crate) fn unscheduled_pods_without_node<N: Borrow<Node>>(
    nodes: &[N],
    node_to_pods: &BTreeMap<String, Vec<&CachedPod>>,
) -> Vec<String> {
    let existing: HashSet<&str> = nodes
        .iter()
        .map(|n| n.borrow().metadata.name.as_deref().unwrap_or_default())
        .collect();
    node_to_pods
        .iter()
        .filter(|(node, _)| !existing.contains(node.as_str()))
        .flat_map(|(_, pods)| pods.iter())
        .filter(|p| !is_scheduled(p))
        .map(|p| name(p).to_owned())
        .collect()
}

/// An event the controller should record on the DaemonSet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DaemonPodEvent {
    /// `Warning` or `Normal`.
    pub event_type: EventType,
    pub reason: &'static str,
    pub message: String,
    /// The pod the event is about (its name, in the DaemonSet's namespace).
    pub pod: String,
}

/// What `manage` does on one node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct NodePlan {
    /// Create a daemon pod on the node.
    pub create: bool,
    pub pods_to_delete: Vec<String>,
    pub events: Vec<DaemonPodEvent>,
    /// Look at the DaemonSet again after this long (a failed pod is waiting out its backoff).
    pub requeue_after: Option<Duration>,
}

/// What a manage pass compares against.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ManageContext<'a> {
    pub ds: &'a DaemonSetObject,
    /// The current revision's hash.
    pub hash: &'a str,
    /// Whether the DaemonSet allows two pods per node ([`allows_surge`]).
    pub surge: bool,
    /// Wall-clock time for availability (`minReadySeconds`).
    pub now: Timestamp,
    /// Monotonic time for the failed-pod backoff.
    pub backoff_now: Instant,
}

impl<'a> ManageContext<'a> {
    pub(crate) fn new(
        ds: &'a DaemonSetObject,
        hash: &'a str,
        now: Timestamp,
        backoff_now: Instant,
    ) -> Self {
        Self {
            ds,
            hash,
            surge: allows_surge(ds),
            now,
            backoff_now,
        }
    }
}

/// Upstream `podsShouldBeOnNode` for one node. `pods` is `None` when no daemon pod targets the node.
/// Advancing the backoff of a node whose failed pod is deleted is part of the decision, hence `backoff`.
///
/// upstream: podsShouldBeOnNode
pub(crate) fn plan_node(
    ctx: &ManageContext<'_>,
    decision: NodeDecision,
    node_name: &str,
    pods: Option<&[&CachedPod]>,
    backoff: &mut FailedPodBackoff,
) -> NodePlan {
    let mut plan = NodePlan::default();
    let Some(pods) = pods else {
        plan.create = decision.should_run;
        return plan;
    };
    if !decision.should_continue_running {
        plan.pods_to_delete = pods
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .map(|p| name(p).to_owned())
            .collect();
        return plan;
    }

    let namespace = ctx.ds.metadata.namespace.as_deref().unwrap_or_default();
    let mut running: Vec<&CachedPod> = Vec::new();
    for &pod in pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
    {
        match phase(pod) {
            "Failed" => {
                // The kubelet may be rejecting the pod over and over: delete at most once per backoff.
                let key = failed_pods_backoff_key(ctx.ds, node_name);
                if backoff.is_in_backoff_since_update(&key, ctx.backoff_now) {
                    let delay = backoff.get(&key);
                    tracing::debug!(
                        pod = name(pod),
                        node = node_name,
                        ?delay,
                        "failed daemon pod deletion delayed by backoff"
                    );
                    plan.requeue_after = Some(plan.requeue_after.map_or(delay, |d| d.min(delay)));
                    continue;
                }
                backoff.next(&key, ctx.backoff_now);
                plan.events.push(DaemonPodEvent {
                    event_type: EventType::Warning,
                    reason: FAILED_DAEMON_POD_REASON,
                    message: format!(
                        "Found failed daemon pod {namespace}/{} on node {node_name}, will try to kill it",
                        name(pod)
                    ),
                    pod: name(pod).to_owned(),
                });
                plan.pods_to_delete.push(name(pod).to_owned());
            }
            "Succeeded" => {
                plan.events.push(DaemonPodEvent {
                    event_type: EventType::Normal,
                    reason: SUCCEEDED_DAEMON_POD_REASON,
                    message: format!(
                        "Found succeeded daemon pod {namespace}/{} on node {node_name}, will try to delete it",
                        name(pod)
                    ),
                    pod: name(pod).to_owned(),
                });
                plan.pods_to_delete.push(name(pod).to_owned());
            }
            _ => running.push(pod),
        }
    }

    if !ctx.surge {
        // Keep the oldest; a new pod for an emptied node is created on a later sync.
        if running.len() > 1 {
            running.sort_by(|a, b| cmp_oldest_first(a, b));
            plan.pods_to_delete
                .extend(running[1..].iter().map(|p| name(p).to_owned()));
        }
        return plan;
    }

    if running.len() <= 1 {
        // Surging needs at least one live pod per node.
        plan.create = running.is_empty() && decision.should_run;
        return plan;
    }
    // Keep the oldest pod of the current revision and the oldest of any other; delete the rest.
    running.sort_by(|a, b| cmp_oldest_first(a, b));
    let mut oldest_new: Option<&CachedPod> = None;
    let mut oldest_old: Option<&CachedPod> = None;
    for pod in running {
        let is_new = pod
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(REVISION_HASH_LABEL))
            .is_some_and(|h| h == ctx.hash);
        let slot = if is_new {
            &mut oldest_new
        } else {
            &mut oldest_old
        };
        if slot.is_none() {
            *slot = Some(pod);
        } else {
            plan.pods_to_delete.push(name(pod).to_owned());
        }
    }
    if let (Some(new_pod), Some(old_pod)) = (oldest_new, oldest_old) {
        let min_ready = ctx.ds.spec.min_ready_seconds.unwrap_or(0);
        if !is_pod_ready(old_pod) || is_pod_available(new_pod, min_ready, ctx.now) {
            // The old pod is no use any more, or the new one has taken over.
            plan.pods_to_delete.push(name(old_pod).to_owned());
        }
    }
    plan
}

/// The whole manage pass: per-node plans in node-list order, then unscheduled pods of vanished nodes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ManagePlan {
    pub nodes_needing_pods: Vec<String>,
    pub pods_to_delete: Vec<String>,
    pub events: Vec<DaemonPodEvent>,
    /// The shortest backoff a failed pod is waiting out, if any.
    pub requeue_after: Option<Duration>,
}

/// Upstream `manage` minus `syncNodes`: `node_to_pods` are the claimed pods by target node without deleted
/// terminal pods ([`group_pods_by_node`] with `false`). `nodes` may be owned nodes or the informer's shared
/// ones (`Arc<Node>`), so a sync never copies the node list.
pub(crate) fn plan_manage<N: Borrow<Node>>(
    ctx: &ManageContext<'_>,
    placement: &DaemonPlacement,
    nodes: &[N],
    node_to_pods: &BTreeMap<String, Vec<&CachedPod>>,
    backoff: &mut FailedPodBackoff,
) -> ManagePlan {
    let mut plan = ManagePlan::default();
    for node in nodes {
        let node: &Node = node.borrow();
        let node_name = node.metadata.name.as_deref().unwrap_or_default();
        let node_plan = plan_node(
            ctx,
            placement.evaluate(node),
            node_name,
            node_to_pods.get(node_name).map(Vec::as_slice),
            backoff,
        );
        if node_plan.create {
            plan.nodes_needing_pods.push(node_name.to_owned());
        }
        plan.pods_to_delete.extend(node_plan.pods_to_delete);
        plan.events.extend(node_plan.events);
        if let Some(delay) = node_plan.requeue_after {
            plan.requeue_after = Some(plan.requeue_after.map_or(delay, |d| d.min(delay)));
        }
    }
    plan.pods_to_delete
        .extend(unscheduled_pods_without_node(nodes, node_to_pods));
    plan
}

/// The node → pod map of one sync, for the decision log: every node, whether the DaemonSet wants a pod
/// there, its daemon pods there, and why it is not wanted (or why the pod is missing). Derived from the
/// same snapshot as [`plan_manage`]; nothing keeps it between syncs.
pub(crate) fn node_map<N: Borrow<Node>>(
    placement: &DaemonPlacement,
    nodes: &[N],
    node_to_pods: &BTreeMap<String, Vec<&CachedPod>>,
) -> Vec<NodePlacement> {
    nodes
        .iter()
        .map(|node| {
            let node: &Node = node.borrow();
            let node_name = node.metadata.name.as_deref().unwrap_or_default();
            let pods: Vec<String> = node_to_pods
                .get(node_name)
                .map(|pods| pods.iter().map(|p| name(p).to_owned()).collect())
                .unwrap_or_default();
            let decision = placement.evaluate(node);
            let why = placement.why_not(node).or_else(|| {
                pods.is_empty()
                    .then(|| "no daemon pod here yet: one is to be created".to_string())
            });
            NodePlacement {
                node: node_name.to_owned(),
                should_run: decision.should_run,
                pods,
                why,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::affinity::replace_daemon_set_pod_node_name_node_affinity;
    use crate::backoff::FAILED_POD_BACKOFF_INITIAL;
    use crate::test_fixtures::{new_ds, new_node, taint, tainted};
    use crate::test_fixtures::{pod_with, surge_strategy, ts, unavailable_strategy};
    use k8s_openapi::api::apps::v1::DaemonSetUpdateStrategy;
    use k8s_openapi::api::core::v1::PodCondition;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    use mini_kcm_runtime::pods::cached::{CachedAffinity, CachedPodStatus};

    fn created(mut pod: CachedPod, secs: i64) -> CachedPod {
        pod.metadata.creation_timestamp = Some(Time(ts(secs)));
        pod
    }

    fn failed(mut pod: CachedPod) -> CachedPod {
        pod.status = Some(CachedPodStatus {
            phase: Some("Failed".into()),
            ..Default::default()
        });
        pod
    }

    fn five_nodes() -> Vec<Node> {
        (0..5)
            .map(|i| new_node(&format!("node-{i}"), None))
            .collect()
    }

    fn strategies() -> Vec<Option<DaemonSetUpdateStrategy>> {
        vec![
            Some(DaemonSetUpdateStrategy {
                type_: Some("OnDelete".into()),
                rolling_update: None,
            }),
            unavailable_strategy(IntOrString::Int(1)),
        ]
    }

    fn run(
        ds: &DaemonSetObject,
        nodes: &[Node],
        pods: &[CachedPod],
        now: i64,
        backoff: &mut FailedPodBackoff,
    ) -> ManagePlan {
        let ctx = ManageContext::new(ds, "current", ts(now), Instant::now());
        let placement = DaemonPlacement::new(ds);
        plan_manage(
            &ctx,
            &placement,
            nodes,
            &group_pods_by_node(pods, false),
            backoff,
        )
    }

    /// Mirrors upstream `TestDaemonKillFailedPods`.
    #[tokio::test(start_paused = true)]
    async fn kill_failed_pods() {
        let cases = [
            (0, 1, 0, 0, 0, "normal (do nothing)"),
            (0, 0, 1, 0, 0, "no pods (create 1)"),
            (
                1,
                0,
                0,
                1,
                1,
                "1 failed pod (kill 1), 0 normal pod (create 0; will create in the next sync)",
            ),
            (
                1,
                3,
                0,
                3,
                1,
                "1 failed pod (kill 1), 3 normal pods (kill 2)",
            ),
        ];
        for (num_failed, num_normal, creates, deletes, events, name) in cases {
            for strategy in strategies() {
                let mut ds = new_ds("foo");
                ds.spec.update_strategy = strategy;
                let mut pods: Vec<CachedPod> = (0..num_failed)
                    .map(|i| {
                        failed(pod_with(
                            &format!("failed-{i}"),
                            "node-0",
                            Some("current"),
                            None,
                        ))
                    })
                    .collect();
                pods.extend((0..num_normal).map(|i| {
                    created(
                        pod_with(&format!("normal-{i}"), "node-0", Some("current"), None),
                        i,
                    )
                }));
                let plan = run(
                    &ds,
                    &[new_node("node-0", None)],
                    &pods,
                    100,
                    &mut FailedPodBackoff::default(),
                );
                assert_eq!(plan.nodes_needing_pods.len(), creates, "{name}");
                assert_eq!(plan.pods_to_delete.len(), deletes, "{name}");
                assert_eq!(plan.events.len(), events, "{name}");
                if num_normal == 3 {
                    assert!(
                        !plan.pods_to_delete.contains(&"normal-0".to_string()),
                        "oldest kept"
                    );
                }
            }
        }
    }

    /// Mirrors upstream `TestDaemonKillFailedPodsBackoff`, with paused tokio time.
    #[tokio::test(start_paused = true)]
    async fn kill_failed_pods_backoff() {
        for strategy in strategies() {
            let mut ds = new_ds("foo");
            ds.spec.update_strategy = strategy;
            let nodes = [new_node("node-0", None)];
            let pods = [failed(pod_with(
                "node-0-x",
                "node-0",
                Some("current"),
                None,
            ))];
            let mut backoff = FailedPodBackoff::default();
            let key = failed_pods_backoff_key(&ds, "node-0");

            let plan = run(&ds, &nodes, &pods, 100, &mut backoff);
            assert_eq!((plan.pods_to_delete.len(), plan.events.len()), (1, 1));
            assert_eq!(plan.events[0].reason, FAILED_DAEMON_POD_REASON);
            assert_eq!(
                plan.events[0].message,
                "Found failed daemon pod default/node-0-x on node node-0, will try to kill it"
            );
            let initial = backoff.get(&key);
            assert_eq!(initial, FAILED_POD_BACKOFF_INITIAL);

            let plan = run(&ds, &nodes, &pods, 100, &mut backoff);
            assert_eq!(plan.pods_to_delete.len(), 0, "limited by the backoff");
            assert_eq!(plan.requeue_after, Some(initial));
            assert_eq!(
                backoff.get(&key),
                initial,
                "waiting does not raise the delay"
            );

            tokio::time::advance(initial - Duration::from_nanos(1)).await;
            assert!(backoff.is_in_backoff_since_update(&key, Instant::now()));
            tokio::time::advance(Duration::from_nanos(1)).await;
            assert!(!backoff.is_in_backoff_since_update(&key, Instant::now()));

            let plan = run(&ds, &nodes, &pods, 100, &mut backoff);
            assert_eq!((plan.pods_to_delete.len(), plan.events.len()), (1, 1));
            assert_eq!(backoff.get(&key), initial * 2);
        }
    }

    #[test]
    fn succeeded_pods_are_deleted_with_an_event() {
        let ds = new_ds("foo");
        let mut done = pod_with("done", "node-0", Some("current"), None);
        done.status = Some(CachedPodStatus {
            phase: Some("Succeeded".into()),
            ..Default::default()
        });
        let plan = run(
            &ds,
            &[new_node("node-0", None)],
            &[done],
            0,
            &mut FailedPodBackoff::default(),
        );
        assert_eq!(plan.pods_to_delete, ["done"]);
        assert_eq!(plan.events[0].event_type, EventType::Normal);
        assert_eq!(plan.events[0].reason, SUCCEEDED_DAEMON_POD_REASON);
        assert!(
            plan.nodes_needing_pods.is_empty(),
            "recreated on the next sync"
        );
    }

    /// Upstream `TestNoScheduleTaintedDoesntEvicitRunningIntolerantPod`,
    /// `TestNoExecuteTaintedDoesEvicitRunningIntolerantPod`, `TestDaemonSetRespectsTermination` and
    /// `TestDealsWithExistingPods`, at the manage level.
    #[test]
    fn taints_termination_and_existing_pods() {
        let ds = new_ds("intolerant");
        let mut backoff = FailedPodBackoff::default();
        let keep = [pod_with(
            "keep-running-me",
            "tainted",
            Some("current"),
            None,
        )];
        let no_schedule = [tainted(
            new_node("tainted", None),
            vec![taint("dedicated", Some("user1"), "NoSchedule")],
        )];
        assert_eq!(
            run(&ds, &no_schedule, &keep, 0, &mut backoff),
            ManagePlan::default()
        );
        let no_execute = [tainted(
            new_node("tainted", None),
            vec![taint("dedicated", Some("user1"), "NoExecute")],
        )];
        assert_eq!(
            run(&ds, &no_execute, &keep, 0, &mut backoff).pods_to_delete,
            ["keep-running-me"]
        );

        let mut terminating = pod_with("terminating", "node-0", Some("current"), None);
        terminating.metadata.deletion_timestamp = Some(Time(ts(1)));
        assert_eq!(
            run(
                &ds,
                &[new_node("node-0", None)],
                &[terminating],
                0,
                &mut backoff
            ),
            ManagePlan::default()
        );

        // node-0: none (create); node-1: one; node-2: two (delete 1); node-3: five (delete 4).
        let mut pods = vec![pod_with("n1", "node-1", Some("current"), None)];
        pods.extend((0..2).map(|i| {
            created(
                pod_with(&format!("n2-{i}"), "node-2", Some("current"), None),
                i,
            )
        }));
        pods.extend((0..5).map(|i| {
            created(
                pod_with(&format!("n3-{i}"), "node-3", Some("current"), None),
                i,
            )
        }));
        let plan = run(&ds, &five_nodes(), &pods, 0, &mut backoff);
        assert_eq!(plan.nodes_needing_pods, ["node-0", "node-4"]);
        assert_eq!(
            plan.pods_to_delete,
            ["n2-1", "n3-1", "n3-2", "n3-3", "n3-4"]
        );
    }

    /// Upstream `TestSelectorDaemonDeletesUnselectedPods` (manage part): pods on nodes the DaemonSet must
    /// leave are all deleted, except those already being deleted.
    #[test]
    fn pods_on_unselected_nodes_are_deleted() {
        let mut ds = new_ds("foo");
        if let Some(spec) = ds.spec.template.spec.as_mut() {
            spec.node_selector = Some([("color".to_string(), "blue".to_string())].into());
        }
        let nodes = [
            new_node(
                "blue",
                Some([("color".to_string(), "blue".to_string())].into()),
            ),
            new_node(
                "red",
                Some([("color".to_string(), "red".to_string())].into()),
            ),
        ];
        let mut gone = pod_with("red-deleting", "red", Some("current"), None);
        gone.metadata.deletion_timestamp = Some(Time(ts(1)));
        let pods = [pod_with("red-1", "red", Some("current"), None), gone];
        let plan = run(&ds, &nodes, &pods, 0, &mut FailedPodBackoff::default());
        assert_eq!(plan.nodes_needing_pods, ["blue"]);
        assert_eq!(plan.pods_to_delete, ["red-1"]);
    }

    /// Upstream `TestDeleteUnscheduledPodForNotExistingNode`.
    #[test]
    fn unscheduled_pods_of_missing_nodes_are_deleted() {
        let ds = new_ds("foo");
        let mut pinned = pod_with("pinned-to-gone", "", Some("current"), None);
        pinned.spec.as_mut().unwrap().affinity = Some(CachedAffinity::from(
            replace_daemon_set_pod_node_name_node_affinity(None, "node-gone"),
        ));
        let scheduled_gone = pod_with("scheduled-on-gone", "node-gone-2", Some("current"), None);
        let pods = [
            pod_with("ok", "node-0", Some("current"), None),
            pinned,
            scheduled_gone,
        ];
        let plan = run(
            &ds,
            &[new_node("node-0", None)],
            &pods,
            0,
            &mut FailedPodBackoff::default(),
        );
        assert_eq!(plan.pods_to_delete, ["pinned-to-gone"]);
    }

    #[test]
    fn grouping_skips_deleted_terminal_and_nodeless_pods() {
        let mut gone = failed(pod_with("failed-deleted", "node-0", None, None));
        gone.metadata.deletion_timestamp = Some(Time(ts(1)));
        let nodeless = pod_with("nowhere", "", None, None);
        let live = pod_with("live", "node-0", None, None);
        let pods = [gone, nodeless, live];
        let grouped = group_pods_by_node(&pods, false);
        assert_eq!(grouped.len(), 1);
        assert_eq!(grouped["node-0"].len(), 1);
        assert_eq!(group_pods_by_node(&pods, true)["node-0"].len(), 2);
    }

    #[test]
    fn oldest_first_order() {
        let unscheduled = created(pod_with("a-unscheduled", "", None, None), 1);
        let old = created(pod_with("z-old", "n", None, None), 1);
        let young_b = created(pod_with("b-young", "n", None, None), 5);
        let young_a = created(pod_with("a-young", "n", None, None), 5);
        let no_time = pod_with("no-time", "n", None, None);
        let mut pods = [&unscheduled, &young_b, &old, &young_a, &no_time];
        pods.sort_by(|a, b| cmp_oldest_first(a, b));
        let names: Vec<&str> = pods.iter().map(|p| name(p)).collect();
        assert_eq!(
            names,
            ["no-time", "z-old", "a-young", "b-young", "a-unscheduled"]
        );
    }

    fn ready_since(mut pod: CachedPod, ready: bool, since: Option<i64>) -> CachedPod {
        pod.status = Some(CachedPodStatus {
            conditions: Some(vec![PodCondition {
                type_: "Ready".into(),
                status: if ready { "True" } else { "False" }.into(),
                last_transition_time: since.map(|s| Time(ts(s))),
                ..Default::default()
            }]),
            ..Default::default()
        });
        pod
    }

    fn surge_ds(min_ready: i32) -> DaemonSetObject {
        let mut ds = new_ds("foo");
        ds.spec.update_strategy = surge_strategy(IntOrString::Int(1));
        ds.spec.min_ready_seconds = Some(min_ready);
        ds
    }

    /// Upstream `TestSurgeDealsWithExistingPods`.
    #[test]
    fn surge_deals_with_existing_pods() {
        let mut pods = vec![pod_with("n1", "node-1", Some("current"), None)];
        pods.extend((0..2).map(|i| {
            created(
                pod_with(&format!("n2-{i}"), "node-2", Some("current"), None),
                i,
            )
        }));
        pods.extend((0..5).map(|i| {
            created(
                pod_with(&format!("n3-{i}"), "node-3", Some("current"), None),
                i,
            )
        }));
        let plan = run(
            &surge_ds(0),
            &five_nodes(),
            &pods,
            0,
            &mut FailedPodBackoff::default(),
        );
        assert_eq!(plan.nodes_needing_pods.len(), 2);
        assert_eq!(plan.pods_to_delete.len(), 5);
    }

    /// The node-1 pods shared by the `TestSurge*` cases: a current pod created at 100 and two old Ready pods
    /// created at 50 and 60.
    fn node1_pods(new_ready_since: Option<i64>, oldest_ready: bool) -> Vec<CachedPod> {
        let new_pod = created(pod_with("node-1-new", "node-1", Some("current"), None), 100);
        let new_pod = match new_ready_since {
            Some(since) => ready_since(new_pod, true, Some(since)),
            None => new_pod,
        };
        vec![
            new_pod,
            ready_since(
                created(pod_with("node-1-old", "node-1", None, None), 50),
                oldest_ready,
                None,
            ),
            ready_since(
                created(pod_with("node-1-delete", "node-1", None, None), 60),
                true,
                None,
            ),
            pod_with("node-2-pod", "node-2", Some("current"), None),
        ]
    }

    /// Upstream `TestSurgePreservesReadyOldPods`.
    #[test]
    fn surge_preserves_ready_old_pods() {
        let plan = run(
            &surge_ds(0),
            &five_nodes(),
            &node1_pods(None, true),
            0,
            &mut FailedPodBackoff::default(),
        );
        assert_eq!(plan.nodes_needing_pods, ["node-0", "node-3", "node-4"]);
        assert_eq!(plan.pods_to_delete, ["node-1-delete"]);
    }

    /// Upstream `TestSurgeDeletesUnreadyOldPods`.
    #[test]
    fn surge_deletes_unready_old_pods() {
        let plan = run(
            &surge_ds(0),
            &five_nodes(),
            &node1_pods(None, false),
            0,
            &mut FailedPodBackoff::default(),
        );
        assert_eq!(plan.nodes_needing_pods.len(), 3);
        assert_eq!(plan.pods_to_delete, ["node-1-delete", "node-1-old"]);
    }

    /// Upstream `TestSurgePreservesOldReadyWithUnsatisfiedMinReady`.
    #[test]
    fn surge_preserves_old_ready_with_unsatisfied_min_ready() {
        let plan = run(
            &surge_ds(15),
            &five_nodes(),
            &node1_pods(Some(50), true),
            60,
            &mut FailedPodBackoff::default(),
        );
        assert_eq!(plan.nodes_needing_pods.len(), 3);
        assert_eq!(plan.pods_to_delete, ["node-1-delete"]);
    }

    /// Upstream `TestSurgeDeletesOldReadyWithUnsatisfiedMinReady` (the new pod has now been Ready long enough).
    #[test]
    fn surge_deletes_old_ready_once_new_is_available() {
        let plan = run(
            &surge_ds(15),
            &five_nodes(),
            &node1_pods(Some(50), true),
            70,
            &mut FailedPodBackoff::default(),
        );
        assert_eq!(plan.nodes_needing_pods.len(), 3);
        assert_eq!(plan.pods_to_delete, ["node-1-delete", "node-1-old"]);
    }

    /// Upstream `TestSurgeCreatesNewPodWhenAtMaxSurgeAndOldPodDeleted` (manage part): a node whose only pod
    /// is being deleted gets a new one even though the surge budget is used up elsewhere.
    #[test]
    fn surge_creates_new_pod_when_old_pod_deleted() {
        let mut pods = vec![
            ready_since(
                created(pod_with("node-0-new", "node-0", Some("current"), None), 100),
                false,
                None,
            ),
            ready_since(
                created(pod_with("node-0-old-ready", "node-0", None, None), 50),
                true,
                None,
            ),
        ];
        for i in 1..5 {
            let mut old = ready_since(
                created(
                    pod_with(
                        &format!("node-{i}-preserve"),
                        &format!("node-{i}"),
                        None,
                        None,
                    ),
                    1,
                ),
                true,
                None,
            );
            if i == 4 {
                old.metadata.deletion_timestamp = Some(Time(ts(31)));
            }
            pods.push(old);
        }
        let plan = run(
            &surge_ds(0),
            &five_nodes(),
            &pods,
            0,
            &mut FailedPodBackoff::default(),
        );
        assert_eq!(plan.nodes_needing_pods, ["node-4"]);
        assert!(plan.pods_to_delete.is_empty());
    }
}
