//! Rolling updates (upstream `update.go rollingUpdate`, `updatedDesiredNodeCounts`, `findUpdatedPodsOnNode`
//! and `util.SurgeCount` / `UnavailableCount` / `IsPodUpdated`).
//!
//! A rolling update never creates or deletes by itself; it picks old pods to delete (and, when surging, nodes
//! that get a new pod next to the old one), and `manage` does the rest on the next syncs. Two regimes:
//!
//! - **maxSurge = 0**: delete just enough old pods to keep the unavailable count within `maxUnavailable`; an
//!   old pod that is not available is always replaced, an available one only while budget remains.
//! - **maxSurge > 0**: never take a node down; start a new pod beside the old one (always if the old one is
//!   unavailable, else while surge budget remains) and delete the old pod once the new one is available.
//!
//! Unlike Deployments, DaemonSet percentages are rounded **up** for both limits (50% of 3 nodes is 2), and if
//! both come out 0 on a non-empty DaemonSet, one unavailable pod is allowed so the update can progress.
//! Nodes are visited in the order given (upstream visits a Go map, i.e. in random order); the plans are
//! deterministic for a given input.

use std::borrow::Borrow;
use std::collections::BTreeMap;
use std::num::ParseIntError;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use mini_kcm_runtime::api::int_or_percent::{IntOrPercentError, Rounding, scaled_value};
use mini_kcm_runtime::api::kinds::ApiFamily;
use mini_kcm_runtime::pods::cached::CachedPod;
use mini_kcm_runtime::pods::ranking::is_pod_available;

use crate::placement::DaemonPlacement;
use crate::{
    DaemonSetObject, REVISION_HASH_LABEL, TEMPLATE_GENERATION_ANNOTATION, TEMPLATE_GENERATION_LABEL,
};

const ROLLING_UPDATE: &str = "RollingUpdate";

/// Why a rolling update could not be planned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum UpdateError {
    #[error("invalid value for MaxUnavailable")]
    InvalidMaxUnavailable(#[source] IntOrPercentError),
    #[error("invalid value for MaxSurge")]
    InvalidMaxSurge(#[source] IntOrPercentError),
    /// A node with daemon pods that the surge path needed to judge is not in the node list.
    #[error("couldn't get node for nodeName {0:?}")]
    NodeNotFound(String),
}

/// The DaemonSet's template generation from its `deprecated.daemonset.template.generation` annotation:
/// `Ok(None)` without the annotation, an error if it does not parse. Callers treat an error as `None`.
pub(crate) fn template_generation(ds: &DaemonSetObject) -> Result<Option<i64>, ParseIntError> {
    ds.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(TEMPLATE_GENERATION_ANNOTATION))
        .map(|v| v.parse::<i64>())
        .transpose()
}

/// The DaemonSet as the controller of `family` reads it. On the copies, the template-generation annotation
/// is dropped: the API server bumps it on every template change of an apps/v1 DaemonSet, but nothing does
/// on a CRD, so a copy carrying one (copied from an apps/v1 object) would keep counting its old pods as
/// updated by their `pod-template-generation` label and never roll out. Copies tell pods apart by the
/// revision hash alone (a deliberate difference: upstream has no copies).
pub(crate) fn without_unmaintained_template_generation(
    ds: Arc<DaemonSetObject>,
    family: ApiFamily,
) -> Arc<DaemonSetObject> {
    let carries_it = ds
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(TEMPLATE_GENERATION_ANNOTATION));
    if family == ApiFamily::Apps || !carries_it {
        return ds;
    }
    let mut copy = Arc::unwrap_or_clone(ds);
    if let Some(annotations) = copy.metadata.annotations.as_mut() {
        annotations.remove(TEMPLATE_GENERATION_ANNOTATION);
    }
    Arc::new(copy)
}

/// [`template_generation`] with a parse error read as "no generation", as every upstream caller does.
pub(crate) fn template_generation_or_none(ds: &DaemonSetObject) -> Option<i64> {
    template_generation(ds).ok().flatten()
}

fn pod_label<'p>(pod: &'p CachedPod, key: &str) -> &'p str {
    pod.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(key))
        .map_or("", String::as_str)
}

/// A pod is up to date if its `controller-revision-hash` label is the current (non-empty) hash, or — for
/// pods made before revisions — its `pod-template-generation` label is the DaemonSet's template generation.
pub(crate) fn is_pod_updated(pod: &CachedPod, hash: &str, generation: Option<i64>) -> bool {
    let generation_matches =
        generation.is_some_and(|g| pod_label(pod, TEMPLATE_GENERATION_LABEL) == g.to_string());
    let hash_matches = !hash.is_empty() && pod_label(pod, REVISION_HASH_LABEL) == hash;
    hash_matches || generation_matches
}

fn rolling_update(
    ds: &DaemonSetObject,
) -> Option<&k8s_openapi::api::apps::v1::RollingUpdateDaemonSet> {
    let strategy = ds.spec.update_strategy.as_ref()?;
    if strategy.type_.as_deref() != Some(ROLLING_UPDATE) {
        return None;
    }
    strategy.rolling_update.as_ref()
}

/// How many extra pods may be surged out of `number_to_schedule` (0 unless RollingUpdate with maxSurge).
pub(crate) fn surge_count(
    ds: &DaemonSetObject,
    number_to_schedule: i32,
) -> Result<i32, UpdateError> {
    match rolling_update(ds).and_then(|r| r.max_surge.as_ref()) {
        None => Ok(0),
        Some(v) => scaled_value(Some(v), number_to_schedule, Rounding::Up)
            .map_err(UpdateError::InvalidMaxSurge),
    }
}

/// How many pods may be unavailable out of `number_to_schedule` (0 unless RollingUpdate; a RollingUpdate
/// without maxUnavailable is an error, the API server defaults it).
pub(crate) fn unavailable_count(
    ds: &DaemonSetObject,
    number_to_schedule: i32,
) -> Result<i32, UpdateError> {
    match rolling_update(ds) {
        None => Ok(0),
        Some(r) => scaled_value(r.max_unavailable.as_ref(), number_to_schedule, Rounding::Up)
            .map_err(UpdateError::InvalidMaxUnavailable),
    }
}

/// Whether the DaemonSet may run two pods on a node during an update (upstream `AllowsSurge`).
pub(crate) fn allows_surge(ds: &DaemonSetObject) -> bool {
    surge_count(ds, 1).is_ok_and(|n| n > 0)
}

/// The limits of one rolling-update step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct UpdateLimits {
    pub max_surge: i32,
    pub max_unavailable: i32,
    pub desired_number_scheduled: i32,
}

/// Upstream `updatedDesiredNodeCounts` given the number of nodes that should run the pod: both limits
/// scaled (rounded up) against it, and `maxUnavailable = 1` if both are 0 on a non-empty DaemonSet.
pub(crate) fn get_unavailable_numbers(
    ds: &DaemonSetObject,
    desired_number_scheduled: i32,
) -> Result<UpdateLimits, UpdateError> {
    let mut max_unavailable = unavailable_count(ds, desired_number_scheduled)?;
    let max_surge = surge_count(ds, desired_number_scheduled)?;
    if desired_number_scheduled > 0 && max_unavailable == 0 && max_surge == 0 {
        tracing::info!(
            daemonset = ds.metadata.name.as_deref().unwrap_or_default(),
            "DaemonSet is not configured for surge or unavailability, defaulting to accepting unavailability"
        );
        max_unavailable = 1;
    }
    Ok(UpdateLimits {
        max_surge,
        max_unavailable,
        desired_number_scheduled,
    })
}

/// What the update step compares pods against.
#[derive(Debug, Clone, Copy)]
pub(crate) struct UpdateContext<'a> {
    /// The current revision's hash.
    pub hash: &'a str,
    /// The DaemonSet's template generation, if its annotation parsed.
    pub generation: Option<i64>,
    pub min_ready_seconds: i32,
    /// Wall-clock time for availability (`minReadySeconds`).
    pub now: Timestamp,
}

impl<'a> UpdateContext<'a> {
    pub(crate) fn new(ds: &DaemonSetObject, hash: &'a str, now: Timestamp) -> Self {
        Self {
            hash,
            generation: template_generation_or_none(ds),
            min_ready_seconds: ds.spec.min_ready_seconds.unwrap_or(0),
            now,
        }
    }

    fn available(&self, pod: &CachedPod) -> bool {
        is_pod_available(pod, self.min_ready_seconds, self.now)
    }
}

/// The daemon pods targeting one node.
#[derive(Debug, Clone)]
pub(crate) struct NodePods<'a> {
    pub node_name: &'a str,
    pub pods: Vec<&'a CachedPod>,
    /// Whether the node should run the pod; `None` if the node is not in the node list (its pods are
    /// leftovers of a deleted node).
    pub should_run: Option<bool>,
}

/// The non-deleted new and old pod on a node, or `None` if there are several of either (then `manage`
/// must prune the node first).
fn find_updated_pods_on_node<'p>(
    pods: &[&'p CachedPod],
    ctx: &UpdateContext<'_>,
) -> Option<(Option<&'p CachedPod>, Option<&'p CachedPod>)> {
    let mut new_pod = None;
    let mut old_pod = None;
    for &pod in pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
    {
        let slot = if is_pod_updated(pod, ctx.hash, ctx.generation) {
            &mut new_pod
        } else {
            &mut old_pod
        };
        if slot.replace(pod).is_some() {
            return None;
        }
    }
    Some((new_pod, old_pod))
}

fn pod_name(pod: &CachedPod) -> String {
    pod.metadata.name.clone().unwrap_or_default()
}

/// Old pods to delete and nodes that get a new pod in this step.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RollingUpdatePlan {
    pub pods_to_delete: Vec<String>,
    pub nodes_needing_pods: Vec<String>,
}

/// The maxSurge = 0 step: which old pods to delete so that at most `max_unavailable` pods are unavailable.
/// Nodes without a pod, with both an old and a new pod, or with excess pods count as unavailable (manage
/// will fix them); pods being deleted do not count, so an update progresses while nodes are down.
pub(crate) fn plan_max_unavailable(
    nodes: &[NodePods<'_>],
    ctx: &UpdateContext<'_>,
    max_unavailable: i32,
) -> RollingUpdatePlan {
    let mut num_unavailable: i32 = 0;
    let mut always_replace = Vec::new();
    let mut candidates = Vec::new();
    for node in nodes {
        let Some((new_pod, old_pod)) = find_updated_pods_on_node(&node.pods, ctx) else {
            tracing::debug!(
                node = node.node_name,
                "excess daemon pods on node, left to manage"
            );
            num_unavailable += 1;
            continue;
        };
        match (new_pod, old_pod) {
            (None, None) | (Some(_), Some(_)) => num_unavailable += 1,
            (Some(new_pod), None) => {
                if !ctx.available(new_pod) {
                    num_unavailable += 1;
                }
            }
            (None, Some(old_pod)) => {
                if !ctx.available(old_pod) {
                    // Already down: replacing it costs nothing.
                    always_replace.push(pod_name(old_pod));
                    num_unavailable += 1;
                } else if num_unavailable < max_unavailable {
                    candidates.push(pod_name(old_pod));
                }
            }
        }
    }
    let budget = usize::try_from(max_unavailable.saturating_sub(num_unavailable))
        .unwrap_or(0)
        .min(candidates.len());
    tracing::debug!(
        replacements = always_replace.len(),
        max_unavailable,
        num_unavailable,
        candidates = candidates.len(),
        "daemon pods allowed to be replaced"
    );
    let mut pods_to_delete = always_replace;
    pods_to_delete.extend(candidates.into_iter().take(budget));
    RollingUpdatePlan {
        pods_to_delete,
        nodes_needing_pods: Vec::new(),
    }
}

/// The maxSurge > 0 step: nodes that get a new pod beside their old one, and old pods to delete because
/// their node's new pod is available (or because they are unavailable on a node that should no longer run
/// them). Old pods on nodes that should no longer run the DaemonSet are only deleted while more pods are
/// available than desired, so a change of node constraints never leaves the application without pods.
pub(crate) fn plan_surge(
    nodes: &[NodePods<'_>],
    ctx: &UpdateContext<'_>,
    max_surge: i32,
    desired_number_scheduled: i32,
) -> Result<RollingUpdatePlan, UpdateError> {
    let mut pods_to_delete = Vec::new();
    let mut should_not_run_pods = Vec::new();
    let mut candidate_nodes = Vec::new();
    let mut always_nodes = Vec::new();
    let mut num_surge: i32 = 0;
    let mut num_available: i32 = 0;
    let should_run = |node: &NodePods<'_>| {
        node.should_run
            .ok_or_else(|| UpdateError::NodeNotFound(node.node_name.to_owned()))
    };
    for node in nodes {
        let Some((new_pod, old_pod)) = find_updated_pods_on_node(&node.pods, ctx) else {
            tracing::debug!(
                node = node.node_name,
                "excess daemon pods on node, left to manage"
            );
            num_surge += 1;
            continue;
        };
        // Availability counts every node, including those the DaemonSet is leaving.
        if let Some(pod) = old_pod.or(new_pod)
            && ctx.available(pod)
        {
            num_available += 1;
        }
        match (new_pod, old_pod) {
            (_, None) => {}
            (None, Some(old_pod)) => {
                if !ctx.available(old_pod) {
                    if should_run(node)? {
                        always_nodes.push(node.node_name.to_owned());
                    } else {
                        pods_to_delete.push(pod_name(old_pod));
                    }
                } else if !should_run(node)? {
                    should_not_run_pods.push(pod_name(old_pod));
                } else if num_surge < max_surge {
                    candidate_nodes.push(node.node_name.to_owned());
                }
            }
            (Some(new_pod), Some(old_pod)) => {
                if ctx.available(new_pod) {
                    pods_to_delete.push(pod_name(old_pod));
                } else {
                    num_surge += 1;
                }
            }
        }
    }
    let deletable =
        usize::try_from(num_available.saturating_sub(desired_number_scheduled)).unwrap_or(0);
    pods_to_delete.extend(should_not_run_pods.into_iter().take(deletable));

    let budget = usize::try_from(max_surge.saturating_sub(num_surge))
        .unwrap_or(0)
        .min(candidate_nodes.len());
    tracing::debug!(
        replacements = always_nodes.len(),
        max_surge,
        num_surge,
        candidates = candidate_nodes.len(),
        "daemon pods allowed to surge"
    );
    let mut nodes_needing_pods = always_nodes;
    nodes_needing_pods.extend(candidate_nodes.into_iter().take(budget));
    Ok(RollingUpdatePlan {
        pods_to_delete,
        nodes_needing_pods,
    })
}

/// One rolling-update step over the cluster: `node_to_pods` are the DaemonSet's claimed pods by target node
/// (without deleted terminal pods), `nodes` the node list. Nodes that should run the pod and have none are
/// added as empty, the limits are computed against their count, and the maxSurge = 0 or > 0 plan follows.
/// Nodes are visited in name order.
///
/// upstream: rollingUpdate
pub(crate) fn plan_rolling_update<'a, N: Borrow<Node>>(
    ds: &DaemonSetObject,
    placement: &DaemonPlacement,
    nodes: &'a [N],
    node_to_pods: &BTreeMap<String, Vec<&'a CachedPod>>,
    hash: &'a str,
    now: Timestamp,
) -> Result<RollingUpdatePlan, UpdateError> {
    let mut by_node: BTreeMap<&str, NodePods<'_>> = node_to_pods
        .iter()
        .map(|(name, pods)| {
            (
                name.as_str(),
                NodePods {
                    node_name: name.as_str(),
                    pods: pods.clone(),
                    should_run: None,
                },
            )
        })
        .collect();
    let mut desired = 0;
    for node in nodes {
        let node: &'a Node = node.borrow();
        let name = node.metadata.name.as_deref().unwrap_or_default();
        let should_run = placement.evaluate(node).should_run;
        if should_run {
            desired += 1;
        }
        let entry = by_node.entry(name).or_insert_with(|| NodePods {
            node_name: name,
            pods: Vec::new(),
            should_run: None,
        });
        entry.should_run = Some(should_run);
    }
    // Only nodes that have pods or should have one take part (upstream's map holds nothing else).
    let entries: Vec<NodePods<'_>> = by_node
        .into_values()
        .filter(|n| n.should_run == Some(true) || node_to_pods.contains_key(n.node_name))
        .collect();
    let limits = get_unavailable_numbers(ds, desired)?;
    let ctx = UpdateContext::new(ds, hash, now);
    if limits.max_surge == 0 {
        Ok(plan_max_unavailable(&entries, &ctx, limits.max_unavailable))
    } else {
        plan_surge(&entries, &ctx, limits.max_surge, desired)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_fixtures::{
        new_ds, new_node, pod_with, surge_strategy, taint, tainted, ts, unavailable_strategy,
    };
    use k8s_openapi::api::apps::v1::{DaemonSetUpdateStrategy, RollingUpdateDaemonSet};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    use kube::api::ObjectMeta;

    fn pod_labels(pairs: &[(&str, &str)]) -> CachedPod {
        CachedPod {
            metadata: ObjectMeta {
                labels: Some(
                    pairs
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    /// Mirrors upstream `TestIsPodUpdated`.
    #[test]
    fn is_pod_updated_table() {
        let generation = Some(12345);
        let bad_generation = Some(12350);
        let hash = "55555";
        let both = pod_labels(&[
            (TEMPLATE_GENERATION_LABEL, "12345"),
            (REVISION_HASH_LABEL, hash),
        ]);
        let no_hash = pod_labels(&[(TEMPLATE_GENERATION_LABEL, "12345")]);
        let empty = pod_labels(&[]);
        let none = CachedPod::default();
        let cases: Vec<(&str, Option<i64>, &CachedPod, String, bool)> = vec![
            (
                "templateGeneration and hash both match",
                generation,
                &both,
                hash.into(),
                true,
            ),
            (
                "templateGeneration matches, hash doesn't",
                generation,
                &both,
                format!("{hash}123"),
                true,
            ),
            (
                "templateGeneration matches, no hash label, has hash",
                generation,
                &no_hash,
                hash.into(),
                true,
            ),
            (
                "templateGeneration matches, no hash label, no hash",
                generation,
                &no_hash,
                String::new(),
                true,
            ),
            (
                "templateGeneration matches, has hash label, no hash",
                generation,
                &both,
                String::new(),
                true,
            ),
            (
                "templateGeneration doesn't match, hash does",
                bad_generation,
                &both,
                hash.into(),
                true,
            ),
            (
                "templateGeneration and hash don't match",
                bad_generation,
                &both,
                format!("{hash}123"),
                false,
            ),
            (
                "empty labels, no hash",
                generation,
                &empty,
                String::new(),
                false,
            ),
            ("empty labels", generation, &empty, hash.into(), false),
            ("no labels", generation, &none, hash.into(), false),
            ("no generation, no hash", None, &both, String::new(), false),
        ];
        for (name, generation, pod, hash, expected) in cases {
            assert_eq!(is_pod_updated(pod, &hash, generation), expected, "{name}");
        }
    }

    #[test]
    fn copies_ignore_the_template_generation_annotation() {
        let mut ds = new_ds("web");
        ds.metadata.annotations = Some(BTreeMap::from([(
            TEMPLATE_GENERATION_ANNOTATION.to_string(),
            "1".to_string(),
        )]));
        let ds = Arc::new(ds);
        let apps = without_unmaintained_template_generation(ds.clone(), ApiFamily::Apps);
        assert_eq!(template_generation_or_none(&apps), Some(1));
        let copy = without_unmaintained_template_generation(ds, ApiFamily::Copies);
        assert_eq!(template_generation_or_none(&copy), None);
        // Old pods labelled with that generation are then out of date once the hash moves on.
        let mut old = pod_with("old", "node-1", Some("old-hash"), None);
        if let Some(labels) = old.metadata.labels.as_mut() {
            labels.insert(TEMPLATE_GENERATION_LABEL.into(), "1".into());
        }
        assert!(is_pod_updated(
            &old,
            "new-hash",
            template_generation_or_none(&apps)
        ));
        assert!(!is_pod_updated(
            &old,
            "new-hash",
            template_generation_or_none(&copy)
        ));
    }

    #[test]
    fn template_generation_parsing() {
        let mut ds = new_ds("x");
        assert_eq!(template_generation(&ds), Ok(None));
        ds.metadata.annotations =
            Some([(TEMPLATE_GENERATION_ANNOTATION.to_string(), "7".to_string())].into());
        assert_eq!(template_generation(&ds), Ok(Some(7)));
        ds.metadata.annotations =
            Some([(TEMPLATE_GENERATION_ANNOTATION.to_string(), "x".to_string())].into());
        assert!(template_generation(&ds).is_err());
        assert_eq!(template_generation_or_none(&ds), None);
    }

    /// Mirrors upstream `TestGetUnavailableNumbers`: the limits for the desired node count (the empty-node
    /// part of the table is covered by `plan_rolling_update_adds_empty_desired_nodes`).
    #[test]
    fn get_unavailable_numbers_table() {
        let with = |strategy| {
            let mut ds = new_ds("x");
            ds.spec.update_strategy = strategy;
            ds
        };
        let pct = |s: &str| IntOrString::String(s.into());
        type Case = (
            &'static str,
            Option<DaemonSetUpdateStrategy>,
            i32,
            (i32, i32),
        );
        let cases: Vec<Case> = vec![
            (
                "No nodes",
                unavailable_strategy(IntOrString::Int(0)),
                0,
                (0, 0),
            ),
            (
                "Two nodes with ready pods",
                unavailable_strategy(IntOrString::Int(1)),
                2,
                (0, 1),
            ),
            (
                "Two nodes, one node without pods",
                unavailable_strategy(IntOrString::Int(0)),
                2,
                (0, 1),
            ),
            (
                "Two nodes, one node without pods, surge",
                surge_strategy(IntOrString::Int(0)),
                2,
                (0, 1),
            ),
            (
                "Two nodes with pods, MaxUnavailable in percents",
                unavailable_strategy(pct("50%")),
                2,
                (0, 1),
            ),
            (
                "Two nodes with pods, MaxUnavailable in percents, surge",
                surge_strategy(pct("50%")),
                2,
                (1, 0),
            ),
            (
                "Two nodes with pods, MaxUnavailable is 100%, surge",
                surge_strategy(pct("100%")),
                2,
                (2, 0),
            ),
            (
                "Three nodes, 50% rounds up to 2",
                unavailable_strategy(pct("50%")),
                3,
                (0, 2),
            ),
            ("OnDelete has no limits", None, 3, (0, 1)),
            (
                "1% of 1 rounds up",
                unavailable_strategy(pct("1%")),
                1,
                (0, 1),
            ),
            (
                "surge 34% of 3 rounds up to 2",
                surge_strategy(pct("34%")),
                3,
                (2, 0),
            ),
        ];
        for (name, strategy, desired, (surge, unavailable)) in cases {
            let limits = get_unavailable_numbers(&with(strategy), desired).unwrap();
            assert_eq!(
                (
                    limits.max_surge,
                    limits.max_unavailable,
                    limits.desired_number_scheduled
                ),
                (surge, unavailable, desired),
                "{name}"
            );
        }
        assert!(matches!(
            get_unavailable_numbers(&with(unavailable_strategy(pct("50"))), 2),
            Err(UpdateError::InvalidMaxUnavailable(_))
        ));
        assert!(matches!(
            get_unavailable_numbers(&with(surge_strategy(pct("x%"))), 2),
            Err(UpdateError::InvalidMaxSurge(_))
        ));
        let mut missing = with(unavailable_strategy(IntOrString::Int(1)));
        if let Some(s) = missing.spec.update_strategy.as_mut() {
            s.rolling_update = Some(RollingUpdateDaemonSet::default());
        }
        assert!(get_unavailable_numbers(&missing, 2).is_err());
        assert!(allows_surge(&with(surge_strategy(pct("1%")))));
        assert!(!allows_surge(&with(surge_strategy(IntOrString::Int(0)))));
        assert!(!allows_surge(&with(unavailable_strategy(
            IntOrString::Int(3)
        ))));
    }

    fn entry<'a>(
        node: &'a str,
        pods: Vec<&'a CachedPod>,
        should_run: Option<bool>,
    ) -> NodePods<'a> {
        NodePods {
            node_name: node,
            pods,
            should_run,
        }
    }

    fn ctx(hash: &str, min_ready: i32, now: i64) -> UpdateContext<'_> {
        UpdateContext {
            hash,
            generation: None,
            min_ready_seconds: min_ready,
            now: ts(now),
        }
    }

    /// The maxUnavailable steps of upstream `TestDaemonSetUpdatesPods` / `...WhenNewPodIsNotReady` /
    /// `...AllOldPodsNotReady` / `...SomeOldPodsNotReady`, as plans.
    #[test]
    fn max_unavailable_plans() {
        let ready = Some((true, 0));
        let old: Vec<CachedPod> = (0..5)
            .map(|i| pod_with(&format!("old-{i}"), &format!("node-{i}"), Some("v1"), ready))
            .collect();
        let names = |plan: &RollingUpdatePlan| plan.pods_to_delete.clone();
        fn nodes_of<'a>(pods: Vec<Option<&'a CachedPod>>) -> Vec<NodePods<'a>> {
            const NAMES: [&str; 5] = ["node-0", "node-1", "node-2", "node-3", "node-4"];
            pods.into_iter()
                .zip(NAMES)
                .map(|(p, node)| entry(node, p.into_iter().collect(), Some(true)))
                .collect()
        }

        // All old and available: delete exactly maxUnavailable.
        let all_old = nodes_of(old.iter().map(Some).collect());
        let plan = plan_max_unavailable(&all_old, &ctx("v2", 0, 100), 2);
        assert_eq!(names(&plan), ["old-0", "old-1"]);
        assert!(plan.nodes_needing_pods.is_empty());

        // Two nodes emptied (manage will recreate them): no further deletions until they are back.
        let emptied = nodes_of(vec![
            None,
            None,
            Some(&old[2]),
            Some(&old[3]),
            Some(&old[4]),
        ]);
        assert!(names(&plan_max_unavailable(&emptied, &ctx("v2", 0, 100), 2)).is_empty());

        // New pods not ready count against the budget.
        let new_unready: Vec<CachedPod> = (0..2)
            .map(|i| {
                pod_with(
                    &format!("new-{i}"),
                    &format!("node-{i}"),
                    Some("v2"),
                    Some((false, 0)),
                )
            })
            .collect();
        let waiting = nodes_of(vec![
            Some(&new_unready[0]),
            Some(&new_unready[1]),
            Some(&old[2]),
            Some(&old[3]),
            Some(&old[4]),
        ]);
        assert_eq!(
            names(&plan_max_unavailable(&waiting, &ctx("v2", 0, 100), 3)),
            ["old-2"]
        );
        assert!(names(&plan_max_unavailable(&waiting, &ctx("v2", 0, 100), 2)).is_empty());

        // Old pods that are not available are always replaced, beyond the budget.
        let unready_old: Vec<CachedPod> = (0..5)
            .map(|i| pod_with(&format!("sick-{i}"), &format!("node-{i}"), Some("v1"), None))
            .collect();
        let sick = nodes_of(unready_old.iter().map(Some).collect());
        assert_eq!(
            names(&plan_max_unavailable(&sick, &ctx("v2", 0, 100), 3)).len(),
            5,
            "TestDaemonSetUpdatesAllOldPodsNotReady"
        );

        // Deleted pods do not count as unavailable; excess pods make the node unavailable.
        let mut deleting = old[0].clone();
        deleting.metadata.deletion_timestamp = Some(Time(ts(1)));
        let dup = pod_with("dup", "node-1", Some("v1"), ready);
        let mixed = vec![
            entry("node-0", vec![&deleting], Some(true)),
            entry("node-1", vec![&old[1], &dup], Some(true)),
            entry("node-2", vec![&old[2]], Some(true)),
        ];
        // node-0 has no live pod (unavailable), node-1 excess (unavailable): budget 3 leaves one.
        assert_eq!(
            names(&plan_max_unavailable(&mixed, &ctx("v2", 0, 100), 3)),
            ["old-2"]
        );

        // minReadySeconds: a new pod ready for less than that is unavailable.
        let fresh = pod_with("fresh", "node-0", Some("v2"), Some((true, 95)));
        let min_ready = vec![
            entry("node-0", vec![&fresh], Some(true)),
            entry("node-1", vec![&old[1]], Some(true)),
        ];
        assert!(names(&plan_max_unavailable(&min_ready, &ctx("v2", 10, 100), 1)).is_empty());
        assert_eq!(
            names(&plan_max_unavailable(&min_ready, &ctx("v2", 10, 105), 1)),
            ["old-1"]
        );
    }

    /// The surge steps of upstream `TestDaemonSetUpdatesPodsWithMaxSurge` and
    /// `TestDaemonSetUpdatesAllOldPodsNotReadyMaxSurge`, as plans.
    #[test]
    fn surge_plans() {
        let old: Vec<CachedPod> = (0..5)
            .map(|i| {
                pod_with(
                    &format!("old-{i}"),
                    &format!("node-{i}"),
                    Some("v1"),
                    Some((true, 0)),
                )
            })
            .collect();
        let node_names = ["node-0", "node-1", "node-2", "node-3", "node-4"];
        let all_old: Vec<NodePods<'_>> = old
            .iter()
            .zip(node_names)
            .map(|(p, n)| entry(n, vec![p], Some(true)))
            .collect();

        // Step 1: surge onto maxSurge nodes, delete nothing.
        let plan = plan_surge(&all_old, &ctx("v2", 0, 100), 2, 5).unwrap();
        assert_eq!(plan.nodes_needing_pods, ["node-0", "node-1"]);
        assert!(plan.pods_to_delete.is_empty());

        // Step 2: the surged pods are not ready yet: they hold the budget.
        let new_unready: Vec<CachedPod> = (0..2)
            .map(|i| {
                pod_with(
                    &format!("new-{i}"),
                    node_names[i],
                    Some("v2"),
                    Some((false, 0)),
                )
            })
            .collect();
        let surged: Vec<NodePods<'_>> = (0..5)
            .map(|i| {
                let mut pods = vec![&old[i]];
                if i < 2 {
                    pods.push(&new_unready[i]);
                }
                entry(node_names[i], pods, Some(true))
            })
            .collect();
        assert_eq!(
            plan_surge(&surged, &ctx("v2", 0, 100), 2, 5).unwrap(),
            RollingUpdatePlan::default()
        );

        // Step 3: they became available: delete their old pods and surge onto the next nodes.
        let new_ready: Vec<CachedPod> = (0..2)
            .map(|i| {
                pod_with(
                    &format!("new-{i}"),
                    node_names[i],
                    Some("v2"),
                    Some((true, 0)),
                )
            })
            .collect();
        let progressed: Vec<NodePods<'_>> = (0..5)
            .map(|i| {
                let mut pods = vec![&old[i]];
                if i < 2 {
                    pods.push(&new_ready[i]);
                }
                entry(node_names[i], pods, Some(true))
            })
            .collect();
        let plan = plan_surge(&progressed, &ctx("v2", 0, 100), 2, 5).unwrap();
        assert_eq!(plan.pods_to_delete, ["old-0", "old-1"]);
        assert_eq!(plan.nodes_needing_pods, ["node-2", "node-3"]);

        // All old pods unavailable: surge everywhere at once.
        let sick: Vec<CachedPod> = (0..5)
            .map(|i| pod_with(&format!("sick-{i}"), node_names[i], Some("v1"), None))
            .collect();
        let all_sick: Vec<NodePods<'_>> = sick
            .iter()
            .zip(node_names)
            .map(|(p, n)| entry(n, vec![p], Some(true)))
            .collect();
        assert_eq!(
            plan_surge(&all_sick, &ctx("v2", 0, 100), 3, 5)
                .unwrap()
                .nodes_needing_pods
                .len(),
            5
        );
        // An unavailable old pod on a node that should no longer run is deleted outright.
        let leaving = vec![entry("node-0", vec![&sick[0]], Some(false))];
        let plan = plan_surge(&leaving, &ctx("v2", 0, 100), 1, 0).unwrap();
        assert_eq!(plan.pods_to_delete, ["sick-0"]);
        assert!(plan.nodes_needing_pods.is_empty());
        // ... and a node missing from the node list is an error when it must be judged.
        let unknown = vec![entry("gone", vec![&sick[0]], None)];
        assert_eq!(
            plan_surge(&unknown, &ctx("v2", 0, 100), 1, 0),
            Err(UpdateError::NodeNotFound("gone".into()))
        );
    }

    /// Upstream `TestDaemonSetUpdatesPodsNotMatchTainstWithMaxSurge`: available old pods on nodes that should
    /// no longer run are deleted only while more pods are available than desired.
    #[test]
    fn surge_keeps_leaving_pods_until_replacements_are_available() {
        let names = ["node-0", "node-1", "node-2"];
        let old: Vec<CachedPod> = (0..3)
            .map(|i| pod_with(&format!("old-{i}"), names[i], Some("v1"), Some((true, 0))))
            .collect();
        // node-0 became intolerable; desired is 2 and 3 pods are available: one may go.
        let nodes = vec![
            entry(names[0], vec![&old[0]], Some(false)),
            entry(names[1], vec![&old[1]], Some(true)),
            entry(names[2], vec![&old[2]], Some(true)),
        ];
        let plan = plan_surge(&nodes, &ctx("v2", 0, 100), 1, 2).unwrap();
        assert_eq!(plan.pods_to_delete, ["old-0"]);
        assert_eq!(plan.nodes_needing_pods, ["node-1"]);
        // With only the desired number available, the leaving pod stays.
        let plan = plan_surge(&nodes[..2], &ctx("v2", 0, 100), 1, 2).unwrap();
        assert!(plan.pods_to_delete.is_empty());
    }

    #[test]
    fn plan_rolling_update_adds_empty_desired_nodes() {
        let mut ds = new_ds("x");
        ds.spec.update_strategy = unavailable_strategy(IntOrString::String("50%".into()));
        let nodes = vec![
            new_node("node-0", None),
            new_node("node-1", None),
            new_node("node-2", None),
            tainted(
                new_node("node-3", None),
                vec![taint("k", None, "NoSchedule")],
            ),
        ];
        let p0 = pod_with("p0", "node-0", Some("v1"), Some((true, 0)));
        let mut p1 = pod_with("p1", "node-1", Some("v1"), Some((true, 0)));
        p1.metadata.deletion_timestamp = Some(Time(ts(1)));
        let p9 = pod_with("p9", "node-9", Some("v1"), Some((true, 0)));
        let node_to_pods: BTreeMap<String, Vec<&CachedPod>> = [
            ("node-0".to_string(), vec![&p0]),
            ("node-1".to_string(), vec![&p1]),
            ("node-9".to_string(), vec![&p9]),
        ]
        .into();
        let placement = DaemonPlacement::new(&ds);
        // desired = 3 (node-3 is tainted) → maxUnavailable = 2; node-1 (only a deleting pod) and node-2
        // (empty) are unavailable, so nothing more may go down.
        let plan =
            plan_rolling_update(&ds, &placement, &nodes, &node_to_pods, "v2", ts(100)).unwrap();
        assert!(plan.pods_to_delete.is_empty());
        // With 100% (3) one more may go; nodes are visited in name order, so p0 before node-9's p9.
        ds.spec.update_strategy = unavailable_strategy(IntOrString::String("100%".into()));
        let plan =
            plan_rolling_update(&ds, &placement, &nodes, &node_to_pods, "v2", ts(100)).unwrap();
        assert_eq!(plan.pods_to_delete, ["p0"]);
        // A surge step must judge node-9, which is not in the node list.
        ds.spec.update_strategy = surge_strategy(IntOrString::Int(1));
        assert_eq!(
            plan_rolling_update(&ds, &placement, &nodes, &node_to_pods, "v2", ts(100)),
            Err(UpdateError::NodeNotFound("node-9".into()))
        );
    }
}
