//! Informer events → keys to sync, plus expectation bookkeeping (upstream's add/update/delete handlers).
//!
//! The rules, in short: a pod with a controller reference wakes only its controller (if that is one of
//! our ReplicaSets, same UID); an orphan wakes every ReplicaSet whose selector matches it (one of them may
//! adopt it); a pod creation or deletion we were waiting for is counted against the expectations first.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use mini_kcm_runtime::informers::Change;
use mini_kcm_runtime::kinds::{ReplicaSetObject, controller_ref};
use mini_kcm_runtime::pods::ranking::is_pod_ready;
use mini_kcm_runtime::selector::Selector;

use crate::controller::ReplicaSetController;

impl ReplicaSetController {
    pub(crate) fn register_handlers(&self) {
        let controller = self.clone();
        self.inner
            .replica_sets
            .add_handler(move |change: &Change<ReplicaSetObject>| {
                controller.on_replica_set(change)
            });
        let controller = self.clone();
        self.inner
            .pods
            .add_handler(move |change: &Change<Pod>| controller.on_pod(change));
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
        let key = key_of(rs);
        self.inner.consistency.clear(&key);
        // A new ReplicaSet with the same name must start with clean expectations.
        self.inner.expectations.delete_expectations(&key);
        self.inner.queue.add(key);
    }

    pub(crate) fn on_pod(&self, change: &Change<Pod>) {
        match change {
            Change::Added(pod) => self.pod_added(pod),
            Change::Updated { old, new } => self.pod_updated(old, new),
            Change::Deleted(pod) => self.pod_deleted(pod),
        }
    }

    fn pod_added(&self, pod: &Pod) {
        if pod.metadata.deletion_timestamp.is_some() {
            // Seen for the first time already terminating (e.g. after a restart): count as a deletion,
            // never as a creation.
            self.pod_deleted(pod);
            return;
        }
        if let Some(reference) = controller_ref(&pod.metadata) {
            if let Some(rs) = self.resolve(pod.metadata.namespace.as_deref(), reference) {
                let key = key_of(&rs);
                self.inner.expectations.creation_observed(&key);
                self.inner.queue.add(key);
            }
            return;
        }
        // An orphan: every matching ReplicaSet gets a chance to adopt it. No expectation changes: nobody
        // waits for an orphan.
        for rs in self.replica_sets_selecting(pod) {
            self.enqueue(&rs);
        }
    }

    fn pod_updated(&self, old: &Pod, new: &Pod) {
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
        let new_ref = controller_ref(&new.metadata);
        let old_ref = controller_ref(&old.metadata);
        let ref_changed = new_ref != old_ref;
        if ref_changed
            && let Some(rs) =
                old_ref.and_then(|r| self.resolve(old.metadata.namespace.as_deref(), r))
        {
            self.enqueue(&rs);
        }
        if let Some(reference) = new_ref {
            let Some(rs) = self.resolve(new.metadata.namespace.as_deref(), reference) else {
                return;
            };
            self.enqueue(&rs);
            // Availability needs minReadySeconds of readiness: look again when it should be reached.
            let min_ready = rs.spec.min_ready_seconds.unwrap_or(0);
            if min_ready > 0 && !is_pod_ready(old) && is_pod_ready(new) {
                let delay = std::time::Duration::from_secs(u64::try_from(min_ready).unwrap_or(0));
                self.inner.queue.add_after(key_of(&rs), delay);
            }
            return;
        }
        if labels_changed || ref_changed {
            for rs in self.replica_sets_selecting(new) {
                self.enqueue(&rs);
            }
        }
    }

    fn pod_deleted(&self, pod: &Pod) {
        let Some(reference) = controller_ref(&pod.metadata) else {
            return;
        };
        let Some(rs) = self.resolve(pod.metadata.namespace.as_deref(), reference) else {
            return;
        };
        let key = key_of(&rs);
        let pod_key = format!(
            "{}/{}",
            pod.metadata.namespace.as_deref().unwrap_or_default(),
            pod.metadata.name.as_deref().unwrap_or_default()
        );
        self.inner.expectations.deletion_observed(&key, &pod_key);
        self.inner.queue.add(key);
    }

    /// The ReplicaSet a controller reference points at, if it is one of ours: same kind and API group
    /// (the two families share pods), found by name, and the same UID.
    fn resolve(
        &self,
        namespace: Option<&str>,
        reference: &OwnerReference,
    ) -> Option<Arc<ReplicaSetObject>> {
        let ours = reference.kind == self.inner.resource.kind
            && reference.api_version.split('/').next() == Some(self.inner.resource.group.as_str());
        if !ours {
            return None;
        }
        let rs = self
            .inner
            .replica_sets
            .get(namespace.unwrap_or_default(), &reference.name)?;
        (rs.metadata.uid.as_deref() == Some(reference.uid.as_str())).then_some(rs)
    }

    /// ReplicaSets in the pod's namespace whose (non-empty, valid) selector matches the pod's labels.
    fn replica_sets_selecting(&self, pod: &Pod) -> Vec<Arc<ReplicaSetObject>> {
        let Some(labels) = pod.metadata.labels.as_ref().filter(|l| !l.is_empty()) else {
            return Vec::new();
        };
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let matching: Vec<_> = self
            .inner
            .replica_sets
            .list_namespace(namespace)
            .into_iter()
            .filter(|rs| {
                Selector::from_label_selector(&rs.spec.selector)
                    .is_ok_and(|s| !s.is_empty() && s.matches(labels))
            })
            .collect();
        if matching.len() > 1 {
            tracing::warn!(
                pod = pod.metadata.name.as_deref().unwrap_or_default(),
                namespace,
                "user error: more than one ReplicaSet selects this pod"
            );
        }
        matching
    }

    fn enqueue(&self, rs: &ReplicaSetObject) {
        self.inner.queue.add(key_of(rs));
    }
}

pub(crate) fn key_of(rs: &ReplicaSetObject) -> String {
    format!(
        "{}/{}",
        rs.metadata.namespace.as_deref().unwrap_or_default(),
        rs.metadata.name.as_deref().unwrap_or_default()
    )
}
