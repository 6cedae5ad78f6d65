//! Informer events → Deployment keys (upstream's add/update/delete handlers of deployments, ReplicaSets
//! and pods). Which Deployments a ReplicaSet event wakes is the runtime's `Owners::to_wake`; a deleted
//! ReplicaSet wakes its controller, a deleted pod the Recreate Deployment that may be waiting for it.
//! Every key is queued with why, in words (`wake::wake`: only live watch events are described; lists
//! and resyncs queue at low priority).

use std::sync::Arc;

use mini_kcm_runtime::api::kinds::{DeploymentObject, ReplicaSetObject};
use mini_kcm_runtime::controller::wake::{self, wake};
use mini_kcm_runtime::informers::{Change, Origin};
use mini_kcm_runtime::pods::cached::CachedPod;

use super::DeploymentController;
use crate::accessors::{RECREATE_STRATEGY, strategy_type};

impl DeploymentController {
    pub(super) fn register_event_handlers(self: &Arc<Self>) {
        let c = Arc::clone(self);
        self.core
            .objects
            .add_handler(move |change: &Change<DeploymentObject>, origin| {
                c.on_deployment(change, origin)
            });
        let c = Arc::clone(self);
        self.replica_sets
            .add_handler(move |change: &Change<ReplicaSetObject>, origin| {
                c.on_replica_set(change, origin)
            });
        let c = Arc::clone(self);
        self.pods
            .add_handler(move |change: &Change<CachedPod>, origin| {
                if let Change::Deleted(pod) = change {
                    c.pod_deleted(pod, origin);
                }
            });
    }

    /// Every change of a Deployment (spec, status, even deletion) is worth a sync.
    pub(crate) fn on_deployment(&self, change: &Change<DeploymentObject>, origin: Origin) {
        // Nothing of its own to forget: a Deployment controller keeps no expectations.
        self.core.on_object(change, origin, |_| {});
    }

    pub(crate) fn on_replica_set(&self, change: &Change<ReplicaSetObject>, origin: Origin) {
        match change {
            Change::Added(rs) => {
                let owners = self.core.objects.to_wake(None, &rs.metadata);
                self.core.enqueue_all(owners.all(), || {
                    wake(origin, || wake::added("ReplicaSet", &rs.metadata))
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
                    wake(origin, || {
                        wake::updated("ReplicaSet", &old.metadata, &new.metadata)
                    })
                });
            }
            Change::Deleted(rs) => {
                if let Some(d) = self.core.objects.controller_of(&rs.metadata) {
                    let why = wake(origin, || wake::deleted("ReplicaSet", &rs.metadata));
                    self.core.enqueue(&d, why);
                }
            }
        }
    }

    /// A Recreate rollout waits until no old pod runs, so every deletion of one of its pods wakes a
    /// Recreate Deployment, as upstream's `deletePod` (v1.37; until v1.36 upstream woke it only when a
    /// fresh list found no pod left, one API call per deletion). The sync reads the pods from the cache.
    pub(crate) fn pod_deleted(&self, pod: &CachedPod, origin: Origin) {
        let Some(rs) = self.replica_sets.controller_of(&pod.metadata) else {
            return;
        };
        if let Some(d) = self.core.objects.controller_of(&rs.metadata)
            && strategy_type(&d) == RECREATE_STRATEGY
        {
            let why = wake(origin, || wake::deleted("pod", &pod.metadata));
            self.core.enqueue(&d, why);
        }
    }
}
