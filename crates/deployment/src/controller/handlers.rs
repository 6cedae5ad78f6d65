//! Informer events → Deployment keys (upstream's add/update/delete handlers of deployments, ReplicaSets
//! and pods). Which Deployments a ReplicaSet event wakes is the runtime's `Owners::to_wake`; a deleted
//! ReplicaSet wakes its controller, a deleted pod the Recreate Deployment that may be waiting for it.

use mini_kcm_runtime::controller::ObjectKey;
use mini_kcm_runtime::informers::Change;
use mini_kcm_runtime::kinds::{DeploymentObject, ReplicaSetObject};
use mini_kcm_runtime::pods::cached::CachedPod;

use super::DeploymentController;
use crate::accessors::{RECREATE_STRATEGY, strategy_type};

impl DeploymentController {
    pub(crate) fn register_handlers(&self) {
        let c = self.clone();
        self.inner
            .core
            .objects
            .add_handler(move |change: &Change<DeploymentObject>| {
                // Every change (spec, status, even deletion) is worth a sync.
                let d = match change {
                    Change::Added(d) | Change::Deleted(d) => d,
                    Change::Updated { new, .. } => new,
                };
                c.enqueue(d);
            });
        let c = self.clone();
        self.inner
            .replica_sets
            .add_handler(move |change: &Change<ReplicaSetObject>| c.on_replica_set(change));
        let c = self.clone();
        self.inner
            .pods
            .add_handler(move |change: &Change<CachedPod>| {
                if let Change::Deleted(pod) = change {
                    c.pod_deleted(pod);
                }
            });
    }

    pub(crate) fn on_replica_set(&self, change: &Change<ReplicaSetObject>) {
        match change {
            Change::Added(rs) => self.wake_owners(None, rs),
            Change::Updated { old, new } => {
                if old.metadata.resource_version == new.metadata.resource_version {
                    return;
                }
                self.wake_owners(Some(old), new);
            }
            Change::Deleted(rs) => {
                if let Some(d) = self.inner.core.objects.controller_of(&rs.metadata) {
                    self.enqueue(&d);
                }
            }
        }
    }

    /// Wakes the Deployments a ReplicaSet added (`old` is `None`) or updated concerns (`Owners::to_wake`).
    fn wake_owners(&self, old: Option<&ReplicaSetObject>, new: &ReplicaSetObject) {
        let wake = self
            .inner
            .core
            .objects
            .to_wake(old.map(|rs| &rs.metadata), &new.metadata);
        for d in wake.all() {
            self.enqueue(d);
        }
    }

    /// A Recreate rollout waits until no old pod runs: each pod deletion may be the last one.
    pub(crate) fn pod_deleted(&self, pod: &CachedPod) {
        let Some(rs) = self.inner.replica_sets.controller_of(&pod.metadata) else {
            return;
        };
        if let Some(d) = self.inner.core.objects.controller_of(&rs.metadata)
            && strategy_type(&d) == RECREATE_STRATEGY
        {
            self.enqueue(&d);
        }
    }

    pub(crate) fn enqueue(&self, d: &DeploymentObject) {
        self.inner.core.queue.add(ObjectKey::of(&d.metadata));
    }
}
