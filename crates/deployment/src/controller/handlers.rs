//! Informer events → Deployment keys (upstream's add/update/delete handlers of deployments, ReplicaSets
//! and pods).

use mini_kcm_runtime::controller::ObjectKey;
use mini_kcm_runtime::informers::Change;
use mini_kcm_runtime::kinds::{DeploymentObject, ReplicaSetObject, controller_ref};
use mini_kcm_runtime::pods::cached::CachedPod;

use super::DeploymentController;
use crate::accessors::{RECREATE_STRATEGY, strategy_type};

impl DeploymentController {
    pub(crate) fn register_handlers(&self) {
        let c = self.clone();
        self.inner
            .deployments
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
            Change::Added(rs) => {
                if controller_ref(&rs.metadata).is_some() {
                    if let Some(d) = self.inner.deployments.controller_of(&rs.metadata) {
                        self.enqueue(&d);
                    }
                    return;
                }
                // An orphan: every Deployment that selects it may adopt it.
                for d in self.inner.deployments.selecting(&rs.metadata) {
                    self.enqueue(&d);
                }
            }
            Change::Updated { old, new } => {
                if old.metadata.resource_version == new.metadata.resource_version {
                    return;
                }
                let ref_changed = controller_ref(&old.metadata) != controller_ref(&new.metadata);
                if ref_changed && let Some(d) = self.inner.deployments.controller_of(&old.metadata)
                {
                    self.enqueue(&d);
                }
                if controller_ref(&new.metadata).is_some() {
                    if let Some(d) = self.inner.deployments.controller_of(&new.metadata) {
                        self.enqueue(&d);
                    }
                    return;
                }
                if old.metadata.labels != new.metadata.labels || ref_changed {
                    for d in self.inner.deployments.selecting(&new.metadata) {
                        self.enqueue(&d);
                    }
                }
            }
            Change::Deleted(rs) => {
                if let Some(d) = self.inner.deployments.controller_of(&rs.metadata) {
                    self.enqueue(&d);
                }
            }
        }
    }

    /// A Recreate rollout waits until no old pod runs: each pod deletion may be the last one.
    pub(crate) fn pod_deleted(&self, pod: &CachedPod) {
        let Some(rs) = self.inner.replica_sets.controller_of(&pod.metadata) else {
            return;
        };
        if let Some(d) = self.inner.deployments.controller_of(&rs.metadata)
            && strategy_type(&d) == RECREATE_STRATEGY
        {
            self.enqueue(&d);
        }
    }

    pub(crate) fn enqueue(&self, d: &DeploymentObject) {
        self.inner.queue.add(ObjectKey::of(&d.metadata));
    }
}
