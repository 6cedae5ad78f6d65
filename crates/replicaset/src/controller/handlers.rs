//! Informer events → keys to sync, plus expectation bookkeeping (upstream's add/update/delete handlers).
//!
//! Which ReplicaSets a pod event wakes is the runtime's `Owners::to_wake` (its controller, a former
//! controller, or every ReplicaSet that may adopt an orphan); what stays here is the bookkeeping: a pod
//! creation or deletion we were waiting for is counted against the expectations first, and a pod turning
//! Ready is looked at again after `minReadySeconds`.

use mini_kcm_runtime::controller::ObjectKey;
use mini_kcm_runtime::informers::Change;
use mini_kcm_runtime::kinds::ReplicaSetObject;
use mini_kcm_runtime::pods::cached::CachedPod;
use mini_kcm_runtime::pods::ranking::is_pod_ready;

use super::ReplicaSetController;

impl ReplicaSetController {
    pub(crate) fn register_handlers(&self) {
        let controller = self.clone();
        self.inner
            .core
            .objects
            .add_handler(move |change: &Change<ReplicaSetObject>| {
                controller.on_replica_set(change)
            });
        let controller = self.clone();
        self.inner
            .pods
            .add_handler(move |change: &Change<CachedPod>| controller.on_pod(change));
    }

    pub(crate) fn on_replica_set(&self, change: &Change<ReplicaSetObject>) {
        match change {
            Change::Added(rs) => self.enqueue(rs),
            Change::Updated { old, new } => {
                // Deleted and re-created under the same name between two events: forget the old one.
                if old.metadata.uid != new.metadata.uid {
                    self.replica_set_deleted(old);
                }
                // Always sync: a status-only change may still mean a retry is due.
                self.enqueue(new);
            }
            Change::Deleted(rs) => self.replica_set_deleted(rs),
        }
    }

    fn replica_set_deleted(&self, rs: &ReplicaSetObject) {
        let key = ObjectKey::of(&rs.metadata);
        self.inner.core.consistency.clear(&key);
        // A new ReplicaSet with the same name must start with clean expectations.
        self.inner.expectations.delete_expectations(&key);
        self.inner.core.queue.add(key);
    }

    pub(crate) fn on_pod(&self, change: &Change<CachedPod>) {
        match change {
            Change::Added(pod) => self.pod_added(pod),
            Change::Updated { old, new } => self.pod_updated(old, new),
            Change::Deleted(pod) => self.pod_deleted(pod),
        }
    }

    fn pod_added(&self, pod: &CachedPod) {
        if pod.metadata.deletion_timestamp.is_some() {
            // Seen for the first time already terminating (e.g. after a restart): count as a deletion,
            // never as a creation.
            self.pod_deleted(pod);
            return;
        }
        let wake = self.inner.core.objects.to_wake(None, &pod.metadata);
        // A creation counts for the pod's controller only: nobody waits for an orphan.
        if let Some(rs) = &wake.controller {
            self.inner
                .expectations
                .creation_observed(&ObjectKey::of(&rs.metadata));
        }
        for rs in wake.all() {
            self.enqueue(rs);
        }
    }

    fn pod_updated(&self, old: &CachedPod, new: &CachedPod) {
        if old.metadata.resource_version == new.metadata.resource_version {
            return;
        }
        let labels_changed = old.metadata.labels != new.metadata.labels;
        if new.metadata.deletion_timestamp.is_some() {
            // Graceful deletion started: replace the pod now rather than when it is finally gone.
            self.pod_deleted(new);
            if labels_changed {
                self.pod_deleted(old);
            }
            return;
        }
        let wake = self
            .inner
            .core
            .objects
            .to_wake(Some(&old.metadata), &new.metadata);
        for rs in wake.all() {
            self.enqueue(rs);
        }
        // Availability needs minReadySeconds of readiness: look again when it should be reached.
        if let Some(rs) = &wake.controller {
            let min_ready = rs.spec.min_ready_seconds.unwrap_or(0);
            if min_ready > 0 && !is_pod_ready(old) && is_pod_ready(new) {
                let delay = std::time::Duration::from_secs(u64::try_from(min_ready).unwrap_or(0));
                self.inner
                    .core
                    .queue
                    .add_after(ObjectKey::of(&rs.metadata), delay);
            }
        }
    }

    fn pod_deleted(&self, pod: &CachedPod) {
        let Some(rs) = self.inner.core.objects.controller_of(&pod.metadata) else {
            return;
        };
        let key = ObjectKey::of(&rs.metadata);
        self.inner
            .expectations
            .deletion_observed(&key, &ObjectKey::of(&pod.metadata));
        self.inner.core.queue.add(key);
    }

    fn enqueue(&self, rs: &ReplicaSetObject) {
        self.inner.core.queue.add(ObjectKey::of(&rs.metadata));
    }
}
