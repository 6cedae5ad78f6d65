//! Informer events → keys to sync, plus expectation bookkeeping (upstream's add/update/delete handlers).
//!
//! Which ReplicaSets a pod event wakes is the runtime's `Owners::to_wake` (its controller, a former
//! controller, or every ReplicaSet that may adopt an orphan); what stays here is the bookkeeping: a pod
//! creation or deletion we were waiting for is counted against the expectations first, and a pod turning
//! Ready is looked at again after `minReadySeconds`. Every key is queued with why, in words
//! (`wake::wake`: only live watch events are described; lists and resyncs queue at low priority).

use std::time::Duration;

use mini_kcm_runtime::controller::ObjectKey;
use mini_kcm_runtime::controller::wake::{self, wake};
use mini_kcm_runtime::informers::{Change, Origin};
use mini_kcm_runtime::kinds::ReplicaSetObject;
use mini_kcm_runtime::pods::cached::CachedPod;
use mini_kcm_workqueue::Wake;

use super::ReplicaSetController;

impl ReplicaSetController {
    pub(crate) fn register_handlers(&self) {
        let controller = self.clone();
        self.inner
            .core
            .objects
            .add_handler(move |change: &Change<ReplicaSetObject>, origin| {
                controller.on_replica_set(change, origin)
            });
        let controller = self.clone();
        self.inner
            .pods
            .add_handler(move |change: &Change<CachedPod>, origin| {
                controller.on_pod(change, origin)
            });
    }

    pub(crate) fn on_replica_set(&self, change: &Change<ReplicaSetObject>, origin: Origin) {
        match change {
            Change::Added(rs) => {
                let why = wake(origin, || wake::added("ReplicaSet", &rs.metadata));
                self.inner.core.enqueue(rs, why);
            }
            Change::Updated { old, new } => {
                let why = wake(origin, || {
                    wake::updated("ReplicaSet", &old.metadata, &new.metadata)
                });
                // Deleted and re-created under the same name between two events: forget the old one.
                if old.metadata.uid != new.metadata.uid {
                    self.replica_set_deleted(old, why.clone());
                }
                // Always sync: a status-only change may still mean a retry is due.
                self.inner.core.enqueue(new, why);
            }
            Change::Deleted(rs) => {
                let why = wake(origin, || wake::deleted("ReplicaSet", &rs.metadata));
                self.replica_set_deleted(rs, why);
            }
        }
    }

    fn replica_set_deleted(&self, rs: &ReplicaSetObject, why: Wake) {
        let key = ObjectKey::of(&rs.metadata);
        self.inner.core.consistency.clear(&key);
        // A new ReplicaSet with the same name must start with clean expectations.
        self.inner.expectations.delete_expectations(&key);
        self.inner.core.queue.add_woken(key, why);
    }

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
            // Seen for the first time already terminating (e.g. after a restart): count as a deletion,
            // never as a creation.
            self.pod_deleted(pod, why);
            return;
        }
        let owners = self.inner.core.objects.to_wake(None, &pod.metadata);
        // A creation counts for the pod's controller only: nobody waits for an orphan.
        if let Some(rs) = &owners.controller {
            self.inner
                .expectations
                .creation_observed(&ObjectKey::of(&rs.metadata));
        }
        self.inner.core.enqueue_all(owners.all(), why);
    }

    fn pod_updated(&self, old: &CachedPod, new: &CachedPod, origin: Origin) {
        if old.metadata.resource_version == new.metadata.resource_version {
            return;
        }
        let why = || wake(origin, || wake::pod_updated(old, new));
        let labels_changed = old.metadata.labels != new.metadata.labels;
        if new.metadata.deletion_timestamp.is_some() {
            // Graceful deletion started: replace the pod now rather than when it is finally gone.
            self.pod_deleted(new, why);
            if labels_changed {
                self.pod_deleted(old, why);
            }
            return;
        }
        let owners = self
            .inner
            .core
            .objects
            .to_wake(Some(&old.metadata), &new.metadata);
        self.inner.core.enqueue_all(owners.all(), why);
        // Availability needs minReadySeconds of readiness: look again when it should be reached.
        if let Some(rs) = &owners.controller {
            let min_ready = rs.spec.min_ready_seconds;
            let core = &self.inner.core;
            core.recheck_when_available(&rs.metadata, min_ready, (old, new), Duration::ZERO);
        }
    }

    /// Counts a deletion for the pod's controller and wakes it; `why` is called only if there is one.
    fn pod_deleted(&self, pod: &CachedPod, why: impl FnOnce() -> Wake) {
        let Some(rs) = self.inner.core.objects.controller_of(&pod.metadata) else {
            return;
        };
        let key = ObjectKey::of(&rs.metadata);
        self.inner
            .expectations
            .deletion_observed(&key, &ObjectKey::of(&pod.metadata));
        self.inner.core.queue.add_woken(key, why());
    }
}
