//! Informer events → keys to sync, plus expectation bookkeeping (upstream's add/update/delete handlers).
//!
//! Pod events go through the runtime's shared pod handler (`ControllerCore::on_pod`, also the DaemonSet
//! controller's): which ReplicaSets a pod event wakes is `Owners::to_wake` (its controller, a former
//! controller, or every ReplicaSet that may adopt an orphan), a pod creation or deletion we were waiting
//! for is counted against the expectations first, and a pod turning Ready is looked at again after
//! `minReadySeconds`; `POD_EVENT_RULES` says where the ReplicaSet's handling differs. Every key is
//! queued with why, in words (`wake::wake`: only live watch events are described; lists and resyncs
//! queue at low priority).

use std::sync::Arc;
use std::time::Duration;

use mini_kcm_runtime::api::kinds::ReplicaSetObject;
use mini_kcm_runtime::controller::PodEventRules;
use mini_kcm_runtime::informers::{Change, Origin};
use mini_kcm_runtime::pods::cached::CachedPod;

use super::ReplicaSetController;

/// Upstream's ReplicaSet pod handlers: the availability recheck right at `minReadySeconds`, and a pod
/// relabelled as it starts terminating counts as deleted for its old owners too (pods are tracked by
/// key, so counting one twice is harmless).
const POD_EVENT_RULES: PodEventRules<ReplicaSetObject> = PodEventRules {
    min_ready_seconds: |rs| rs.spec.min_ready_seconds,
    available_margin: Duration::ZERO,
    relabelled_deletion_counts_old: true,
};

impl ReplicaSetController {
    pub(super) fn register_event_handlers(self: &Arc<Self>) {
        let controller = Arc::clone(self);
        self.core
            .objects
            .add_handler(move |change: &Change<ReplicaSetObject>, origin| {
                controller.on_replica_set(change, origin)
            });
        let controller = Arc::clone(self);
        self.pods
            .add_handler(move |change: &Change<CachedPod>, origin| {
                controller.on_pod(change, origin)
            });
    }

    pub(crate) fn on_replica_set(&self, change: &Change<ReplicaSetObject>, origin: Origin) {
        self.core.on_object(change, origin, |key| {
            self.expectations.delete_expectations(key);
        });
    }

    pub(crate) fn on_pod(&self, change: &Change<CachedPod>, origin: Origin) {
        self.core
            .on_pod(change, origin, &self.expectations, &POD_EVENT_RULES);
    }
}
