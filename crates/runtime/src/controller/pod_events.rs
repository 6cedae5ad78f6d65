//! The pod event handler of a controller that creates and deletes pods itself: the ReplicaSet and
//! DaemonSet controllers (upstream writes their `addPod` / `updatePod` / `deletePod` twice, nearly alike).
//!
//! For each pod event, in this order:
//! 1. a creation or deletion the pod's controller was waiting for is counted against its expectations
//!    (before its key is queued, so the sync it leads to sees the count);
//! 2. the owners the event concerns are queued ([`Owners::to_wake`](super::Owners::to_wake): the
//!    controller, a former controller, or every owner that may adopt an orphan), saying why;
//! 3. a pod turning Ready is looked at again once it has been Ready for the owner's `minReadySeconds`,
//!    when it counts as available.
//!
//! A pod seen with a deletionTimestamp counts as deleted at once: a graceful deletion takes a while, and
//! the owner should replace the pod now rather than when the kubelet has finally removed it.
//! [`PodEventRules`] holds the two places where the controllers differ.

use std::time::Duration;

use mini_kcm_workqueue::Wake;

use super::wake::{self, wake};
use super::{ControllerCore, ObjectKey};
use crate::controller::expectations::{ControllerExpectations, UidTrackingExpectations};
use crate::informers::{Change, Origin};
use crate::pods::cached::CachedPod;

/// The expectations a pod event is counted against.
pub trait PodExpectations {
    /// A pod of `owner` was created.
    fn creation_observed(&self, owner: &ObjectKey);
    /// `pod`, a pod of `owner`, was deleted (or started terminating).
    fn deletion_observed(&self, owner: &ObjectKey, pod: &ObjectKey);
}

/// Plain counters (the DaemonSet controller's): which pod went does not matter.
impl PodExpectations for ControllerExpectations {
    fn creation_observed(&self, owner: &ObjectKey) {
        ControllerExpectations::creation_observed(self, owner);
    }

    fn deletion_observed(&self, owner: &ObjectKey, _pod: &ObjectKey) {
        ControllerExpectations::deletion_observed(self, owner);
    }
}

/// Deletions tracked by pod (the ReplicaSet controller's): a pod counts once however often it is seen
/// going.
impl PodExpectations for UidTrackingExpectations {
    fn creation_observed(&self, owner: &ObjectKey) {
        UidTrackingExpectations::creation_observed(self, owner);
    }

    fn deletion_observed(&self, owner: &ObjectKey, pod: &ObjectKey) {
        UidTrackingExpectations::deletion_observed(self, owner, pod);
    }
}

/// Where the ReplicaSet and DaemonSet pod handlers differ, as upstream's do.
pub struct PodEventRules<K> {
    /// The owner's `spec.minReadySeconds`.
    pub min_ready_seconds: fn(&K) -> Option<i32>,
    /// Added to `minReadySeconds` before the availability recheck (the DaemonSet controller waits one
    /// second more, so the check does not land a hair too early).
    pub available_margin: Duration,
    /// A pod that starts terminating with changed labels also counts as deleted for its old labels'
    /// owners (the ReplicaSet controller's rule; with plain counters it would count twice).
    pub relabelled_deletion_counts_old: bool,
}

impl<K> ControllerCore<K>
where
    K: kube::Resource
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    /// Handles one pod event from the pod informer (module header).
    ///
    /// upstream: addPod, updatePod, deletePod (of the ReplicaSet and DaemonSet controllers)
    pub fn on_pod(
        &self,
        change: &Change<CachedPod>,
        origin: Origin,
        expectations: &impl PodExpectations,
        rules: &PodEventRules<K>,
    ) {
        match change {
            Change::Added(pod) => {
                let why = || wake(origin, || wake::added("pod", &pod.metadata));
                if pod.metadata.deletion_timestamp.is_some() {
                    // First seen already terminating (e.g. after a restart): a deletion, never a creation.
                    self.pod_deleted(pod, expectations, why);
                    return;
                }
                let owners = self.objects.to_wake(None, &pod.metadata);
                // A creation counts for the pod's controller only: nobody waits for an orphan.
                if let Some(owner) = &owners.controller {
                    expectations.creation_observed(&ObjectKey::of(owner.meta()));
                }
                self.enqueue_all(owners.all(), why);
            }
            Change::Updated { old, new } => {
                if old.metadata.resource_version == new.metadata.resource_version {
                    return;
                }
                let why = || wake(origin, || wake::pod_updated(old, new));
                if new.metadata.deletion_timestamp.is_some() {
                    self.pod_deleted(new, expectations, why);
                    if rules.relabelled_deletion_counts_old
                        && old.metadata.labels != new.metadata.labels
                    {
                        self.pod_deleted(old, expectations, why);
                    }
                    return;
                }
                let owners = self.objects.to_wake(Some(&old.metadata), &new.metadata);
                self.enqueue_all(owners.all(), why);
                if let Some(owner) = &owners.controller {
                    self.recheck_when_available(
                        owner.meta(),
                        (rules.min_ready_seconds)(owner),
                        (old, new),
                        rules.available_margin,
                    );
                }
            }
            Change::Deleted(pod) => {
                self.pod_deleted(pod, expectations, || {
                    wake(origin, || wake::deleted("pod", &pod.metadata))
                });
            }
        }
    }

    /// Counts a deletion for the pod's controller and wakes it; `why` is called only if there is one
    /// (nobody waits for an orphan to go).
    fn pod_deleted(
        &self,
        pod: &CachedPod,
        expectations: &impl PodExpectations,
        why: impl FnOnce() -> Wake,
    ) {
        let Some(owner) = self.objects.controller_of(&pod.metadata) else {
            return;
        };
        let key = ObjectKey::of(owner.meta());
        expectations.deletion_observed(&key, &ObjectKey::of(&pod.metadata));
        self.queue.add_woken(key, why());
    }
}
