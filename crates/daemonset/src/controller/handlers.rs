//! Informer events → DaemonSet keys to sync, plus expectation bookkeeping (upstream's add/update/delete
//! handlers of DaemonSets, pods, nodes and ControllerRevisions).
//!
//! - Which DaemonSets a pod or revision event wakes is the runtime's `Owners::to_wake`: its controller if
//!   that is one of our DaemonSets (same kind, name and UID: the two families share pods and revisions),
//!   a former controller, or, for an orphan, every DaemonSet whose selector matches it (one of them may
//!   adopt it). A revision that is added already owned wakes nobody.
//! - A pod creation or deletion we were waiting for is counted against the expectations first (plain
//!   counters, as upstream: a graceful deletion may count twice, which only makes the owner sync sooner).
//! - A node event wakes only the DaemonSets whose decision for that node could change, judged with each
//!   DaemonSet's cached [`DaemonPlacement`](crate::placement::DaemonPlacement) and the pods on the node
//!   (from the pod node index). Node updates that change neither labels nor taints (heartbeats, status) are
//!   ignored: nothing else of a node enters the decision.
//! - Every key is queued with why, in words (`wake::wake`: only live watch events are described; lists
//!   and resyncs queue at low priority).

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{Node, Taint};
use kube::api::ObjectMeta;
use mini_kcm_runtime::controller::wake::{self, wake};
use mini_kcm_runtime::controller::{ObjectKey, ToWake};
use mini_kcm_runtime::informers::{Change, Origin};
use mini_kcm_runtime::kinds::{POD_NODE_INDEX, controller_ref};
use mini_kcm_runtime::pods::cached::CachedPod;
use mini_kcm_workqueue::Wake;

use super::DaemonSetController;
use crate::DaemonSetObject;

impl DaemonSetController {
    pub(crate) fn register_handlers(&self) {
        let c = self.clone();
        self.inner
            .core
            .objects
            .add_handler(move |change: &Change<DaemonSetObject>, origin| {
                c.on_daemon_set(change, origin)
            });
        let c = self.clone();
        self.inner
            .pods
            .add_handler(move |change: &Change<CachedPod>, origin| c.on_pod(change, origin));
        let c = self.clone();
        self.inner
            .nodes
            .add_handler(move |change: &Change<Node>, origin| c.on_node(change, origin));
        let c = self.clone();
        self.inner
            .revisions
            .add_handler(move |change: &Change<ControllerRevision>, origin| {
                c.on_revision(change, origin)
            });
    }

    // ---- DaemonSets ----

    pub(crate) fn on_daemon_set(&self, change: &Change<DaemonSetObject>, origin: Origin) {
        match change {
            Change::Added(ds) => {
                self.inner.placements.get(ds);
                let why = wake(origin, || wake::added("DaemonSet", &ds.metadata));
                self.inner.core.enqueue(ds, why);
            }
            Change::Updated { old, new } => {
                let why = wake(origin, || {
                    wake::updated("DaemonSet", &old.metadata, &new.metadata)
                });
                // Deleted and re-created under the same name between two events: forget the old one.
                if old.metadata.uid != new.metadata.uid {
                    self.daemon_set_deleted(old, why.clone());
                }
                self.inner.placements.get(new);
                // Always sync: a status-only change may still mean a retry is due.
                self.inner.core.enqueue(new, why);
            }
            Change::Deleted(ds) => {
                let why = wake(origin, || wake::deleted("DaemonSet", &ds.metadata));
                self.daemon_set_deleted(ds, why);
            }
        }
    }

    fn daemon_set_deleted(&self, ds: &DaemonSetObject, why: Wake) {
        let key = ObjectKey::of(&ds.metadata);
        self.inner.placements.forget(&key);
        self.inner.core.consistency.clear(&key);
        // A new DaemonSet with the same name must start with clean expectations.
        self.inner.expectations.delete_expectations(&key);
        self.inner.core.queue.add_woken(key, why);
    }

    // ---- pods ----

    pub(crate) fn on_pod(&self, change: &Change<CachedPod>, origin: Origin) {
        match change {
            Change::Added(pod) => self.pod_added(pod, origin),
            Change::Updated { old, new } => self.pod_updated(old, new, origin),
            Change::Deleted(pod) => {
                self.pod_deleted(pod, || wake(origin, || wake::deleted("pod", &pod.metadata)));
            }
        }
    }

    fn pod_added(&self, pod: &CachedPod, origin: Origin) {
        let why = || wake(origin, || wake::added("pod", &pod.metadata));
        if pod.metadata.deletion_timestamp.is_some() {
            // Seen for the first time already terminating (e.g. after a restart): a deletion, never a
            // creation.
            self.pod_deleted(pod, why);
            return;
        }
        let owners = self.inner.core.objects.to_wake(None, &pod.metadata);
        // A creation counts for the pod's controller only: nobody waits for an orphan.
        if let Some(ds) = &owners.controller {
            self.inner
                .expectations
                .creation_observed(&ObjectKey::of(&ds.metadata));
        }
        self.inner.core.enqueue_all(owners.all(), why);
    }

    fn pod_updated(&self, old: &CachedPod, new: &CachedPod, origin: Origin) {
        if old.metadata.resource_version == new.metadata.resource_version {
            return;
        }
        let why = || wake(origin, || wake::pod_updated(old, new));
        if new.metadata.deletion_timestamp.is_some() {
            // Graceful deletion started: act now rather than when the pod is finally gone.
            self.pod_deleted(new, why);
            return;
        }
        let owners = self.wake_owners(&old.metadata, &new.metadata, why);
        // Availability needs minReadySeconds of readiness: look again once it should be reached (one
        // second more, as upstream, so the check does not land a hair too early).
        if let Some(ds) = &owners.controller {
            let min_ready = ds.spec.min_ready_seconds;
            let core = &self.inner.core;
            core.recheck_when_available(
                &ds.metadata,
                min_ready,
                (old, new),
                Duration::from_secs(1),
            );
        }
    }

    /// Counts a deletion for the pod's controller and wakes it; `why` is called only if there is one.
    fn pod_deleted(&self, pod: &CachedPod, why: impl FnOnce() -> Wake) {
        // Nobody cares about an orphan going away.
        let Some(ds) = self.inner.core.objects.controller_of(&pod.metadata) else {
            return;
        };
        let key = ObjectKey::of(&ds.metadata);
        self.inner.expectations.deletion_observed(&key);
        self.inner.core.queue.add_woken(key, why());
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
                let owners = self.inner.core.objects.to_wake(None, &revision.metadata);
                self.inner.core.enqueue_all(&owners.adopters, || {
                    wake(origin, || wake::added(KIND, &revision.metadata))
                });
            }
            Change::Updated { old, new } => {
                if old.metadata.resource_version == new.metadata.resource_version {
                    return;
                }
                self.wake_owners(&old.metadata, &new.metadata, || {
                    wake(origin, || wake::updated(KIND, &old.metadata, &new.metadata))
                });
            }
            Change::Deleted(revision) => self.revision_deleted(revision, origin),
        }
    }

    /// Wakes the DaemonSets a pod or revision updated from `old` to `new` concerns, saying `why`;
    /// returns them for the caller's own bookkeeping.
    fn wake_owners(
        &self,
        old: &ObjectMeta,
        new: &ObjectMeta,
        why: impl FnOnce() -> Wake,
    ) -> ToWake<DaemonSetObject> {
        let owners = self.inner.core.objects.to_wake(Some(old), new);
        self.inner.core.enqueue_all(owners.all(), why);
        owners
    }

    fn revision_deleted(&self, revision: &ControllerRevision, origin: Origin) {
        if let Some(ds) = self.inner.core.objects.controller_of(&revision.metadata) {
            let why = wake(origin, || {
                wake::deleted("ControllerRevision", &revision.metadata)
            });
            self.inner.core.enqueue(&ds, why);
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
    /// continue, one there), or a misscheduled count may be stale (upstream 1.36's three rules). For a node
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
            .inner
            .pods
            .by_index(POD_NODE_INDEX, node_name)
            .iter()
            .filter_map(|pod| controller_ref(&pod.metadata))
            .filter(|reference| self.inner.core.objects.is_our_kind(reference))
            .map(|reference| reference.uid.clone())
            .collect();
        let mut concerned = Vec::new();
        for ds in self.inner.core.objects.list() {
            let placement = self.inner.placements.get(&ds);
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
        self.inner.core.enqueue_all(&concerned, why);
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
