//! Informer events → DaemonSet keys to sync, plus expectation bookkeeping (upstream's add/update/delete
//! handlers of DaemonSets, pods, nodes and ControllerRevisions).
//!
//! - Which DaemonSets a pod or revision event wakes is the runtime's `Owners::to_wake`: its controller if
//!   that is one of our DaemonSets (same kind, name and UID: the two families share pods and revisions),
//!   a former controller, or, for an orphan, every DaemonSet whose selector matches it (one of them may
//!   adopt it). A revision that is added already owned wakes nobody.
//! - Pod events go through the runtime's shared pod handler (`ControllerCore::on_pod`, also the
//!   ReplicaSet controller's): a creation or deletion we were waiting for is counted against the
//!   expectations first (plain counters, as upstream), and a pod turning Ready is looked at again once it
//!   counts as available. `POD_EVENT_RULES` says where the DaemonSet's handling differs.
//! - A node event wakes only the DaemonSets whose decision for that node could change, judged with each
//!   DaemonSet's cached [`DaemonPlacement`](crate::placement::DaemonPlacement) and the pods on the node
//!   (from the pod node index). Node updates that change neither labels nor taints (heartbeats, status) are
//!   ignored: nothing else of a node enters the decision.
//! - Every key is queued with why, in words (`wake::wake`: only live watch events are described; lists
//!   and resyncs queue at low priority).

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{Node, Taint};
use mini_kcm_runtime::api::kinds::{POD_NODE_INDEX, controller_ref};
use mini_kcm_runtime::controller::wake::{self, wake};
use mini_kcm_runtime::controller::{ObjectKey, PodEventRules};
use mini_kcm_runtime::informers::{Change, Origin};
use mini_kcm_runtime::pods::cached::CachedPod;
use mini_kcm_workqueue::Wake;

use super::DaemonSetController;

/// Upstream's DaemonSet pod handlers: the availability recheck one second after `minReadySeconds`, and a
/// terminating pod counts once (the expectations are plain counters).
const POD_EVENT_RULES: PodEventRules<DaemonSetObject> = PodEventRules {
    min_ready_seconds: |ds| ds.spec.min_ready_seconds,
    available_margin: Duration::from_secs(1),
    relabelled_deletion_counts_old: false,
};
use crate::DaemonSetObject;

impl DaemonSetController {
    pub(super) fn register_event_handlers(self: &Arc<Self>) {
        let c = Arc::clone(self);
        self.core
            .objects
            .add_handler(move |change: &Change<DaemonSetObject>, origin| {
                c.on_daemon_set(change, origin)
            });
        let c = Arc::clone(self);
        self.pods
            .add_handler(move |change: &Change<CachedPod>, origin| c.on_pod(change, origin));
        let c = Arc::clone(self);
        self.nodes
            .add_handler(move |change: &Change<Node>, origin| c.on_node(change, origin));
        let c = Arc::clone(self);
        self.revisions
            .add_handler(move |change: &Change<ControllerRevision>, origin| {
                c.on_revision(change, origin)
            });
    }

    // ---- DaemonSets ----

    pub(crate) fn on_daemon_set(&self, change: &Change<DaemonSetObject>, origin: Origin) {
        self.core.on_object(change, origin, |key| {
            self.placements.forget(key);
            self.expectations.delete_expectations(key);
        });
        // Parse the placement rules now (after a re-created DaemonSet's old ones are forgotten), so
        // node events judge this DaemonSet without re-parsing.
        if let Change::Added(ds) | Change::Updated { new: ds, .. } = change {
            self.placements.get(ds);
        }
    }

    // ---- pods ----

    pub(crate) fn on_pod(&self, change: &Change<CachedPod>, origin: Origin) {
        self.core
            .on_pod(change, origin, &self.expectations, &POD_EVENT_RULES);
    }

    // ---- ControllerRevisions ----

    pub(crate) fn on_revision(&self, change: &Change<ControllerRevision>, origin: Origin) {
        const KIND: &str = "ControllerRevision";
        match change {
            Change::Added(revision) => {
                if revision.metadata.deletion_timestamp.is_some() {
                    self.revision_deleted(revision, origin);
                    return;
                }
                // An owned revision wakes nobody, ours included: a sync created it and already used it.
                // An orphan wakes every DaemonSet that may adopt it.
                let owners = self.core.objects.to_wake(None, &revision.metadata);
                self.core.enqueue_all(&owners.adopters, || {
                    wake(origin, || wake::added(KIND, &revision.metadata))
                });
            }
            Change::Updated { old, new } => {
                if old.metadata.resource_version == new.metadata.resource_version {
                    return;
                }
                let owners = self
                    .core
                    .objects
                    .to_wake(Some(&old.metadata), &new.metadata);
                self.core.enqueue_all(owners.all(), || {
                    wake(origin, || wake::updated(KIND, &old.metadata, &new.metadata))
                });
            }
            Change::Deleted(revision) => self.revision_deleted(revision, origin),
        }
    }

    fn revision_deleted(&self, revision: &ControllerRevision, origin: Origin) {
        if let Some(ds) = self.core.objects.controller_of(&revision.metadata) {
            let why = wake(origin, || {
                wake::deleted("ControllerRevision", &revision.metadata)
            });
            self.core.enqueue(&ds, why);
        }
    }

    // ---- nodes ----

    /// A node added, changed or deleted: wake the DaemonSets whose decision for it can change.
    ///
    /// upstream: addNode, updateNode
    pub(crate) fn on_node(&self, change: &Change<Node>, origin: Origin) {
        match change {
            Change::Added(node) => self.wake_for_node(None, node, NodeEvent::Present, || {
                wake(origin, || wake::added("node", &node.metadata))
            }),
            Change::Updated { old, new } => {
                if same_placement_inputs(old, new) {
                    return;
                }
                self.wake_for_node(Some(old), new, NodeEvent::Present, || {
                    wake(origin, || node_updated(old, new))
                });
            }
            Change::Deleted(node) => self.wake_for_node(None, node, NodeEvent::Gone, || {
                wake(origin, || wake::deleted("node", &node.metadata))
            }),
        }
    }

    /// Enqueues the DaemonSets for which this node event matters. For a node that exists: its verdict
    /// changed (status counts move), or a pod must be created (should run, none there) or deleted (must not
    /// continue, one there), or a misscheduled count may be stale (upstream's three rules, unchanged in 1.37). For a node
    /// that is gone: the DaemonSets that wanted it (desired count) or have pods on it.
    fn wake_for_node(
        &self,
        old: Option<&Node>,
        node: &Node,
        event: NodeEvent,
        why: impl FnOnce() -> Wake,
    ) {
        let node_name = node.metadata.name.as_deref().unwrap_or_default();
        // The owners of pods bound to this node, from the node index: never a scan of all pods.
        let owners_with_pods: HashSet<String> = self
            .pods
            .by_index(POD_NODE_INDEX, node_name)
            .iter()
            .filter_map(|pod| controller_ref(&pod.metadata))
            .filter(|reference| self.core.objects.is_our_kind(reference))
            .map(|reference| reference.uid.clone())
            .collect();
        let mut concerned = Vec::new();
        for ds in self.core.objects.list() {
            let placement = self.placements.get(&ds);
            let decision = placement.evaluate(node);
            let scheduled = ds
                .metadata
                .uid
                .as_ref()
                .is_some_and(|uid| owners_with_pods.contains(uid));
            let wake = match event {
                NodeEvent::Gone => decision.should_run || scheduled,
                NodeEvent::Present => {
                    let misscheduled = ds
                        .status
                        .as_ref()
                        .is_some_and(|s| s.number_misscheduled > 0);
                    old.is_some_and(|old| placement.evaluate(old) != decision)
                        || (decision.should_run && !scheduled)
                        || (!decision.should_continue_running && scheduled)
                        || (scheduled && misscheduled)
                }
            };
            if wake {
                tracing::debug!(
                    node = node_name,
                    daemonset = %ObjectKey::of(&ds.metadata),
                    ?decision,
                    scheduled,
                    "node change concerns a DaemonSet"
                );
                concerned.push(ds);
            }
        }
        self.core.enqueue_all(&concerned, why);
    }
}

/// `"node kwok-node-2 labels changed"`, `"... taints changed"` (the only node updates that wake).
fn node_updated(old: &Node, new: &Node) -> String {
    let name = new.metadata.name.as_deref().unwrap_or_default();
    let what = match (
        node_labels(old) != node_labels(new),
        node_taints(old) != node_taints(new),
    ) {
        (true, true) => "labels and taints changed",
        (true, false) => "labels changed",
        _ => "taints changed",
    };
    format!("node {name} {what}")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NodeEvent {
    /// Added, or updated in its labels or taints.
    Present,
    Gone,
}

/// Whether two versions of a node agree on everything a placement decision reads: labels and taints
/// (absent and empty count as equal, as upstream's semantic equality has it).
fn same_placement_inputs(old: &Node, new: &Node) -> bool {
    node_labels(old) == node_labels(new) && node_taints(old) == node_taints(new)
}

fn node_labels(node: &Node) -> &BTreeMap<String, String> {
    static NO_LABELS: BTreeMap<String, String> = BTreeMap::new();
    node.metadata.labels.as_ref().unwrap_or(&NO_LABELS)
}

fn node_taints(node: &Node) -> &[Taint] {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default()
}
