//! The ReplicaSet controller itself: its caches, queue and bookkeeping, and the workers that drive syncs.
//! It executes the pure decisions of this crate ([`crate::plan`], [`crate::status`]) against the API
//! server.
//!
//! - [`error`]: how a sync fails;
//! - [`handlers`]: informer events → ReplicaSet keys, and expectation bookkeeping;
//! - [`sync`]: `syncReplicaSet` — claim pods, plan, create or delete, write the status;
//! - [`status_write`]: the status write with one retry.

mod error;
mod handlers;
mod status_write;
mod sync;

pub(crate) use error::SyncError;
#[cfg(test)]
mod breaking_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod upstream_tests;

use std::sync::Arc;

use kube::Client;
use mini_kcm_runtime::api::kinds::{
    ReplicaSetObject, WorkloadKind, pod_informer, workload_informer,
};
use mini_kcm_runtime::controller::expectations::{ExpectationsSnapshot, UidTrackingExpectations};
use mini_kcm_runtime::controller::{
    ControllerCore, ControllerKind, ControllerOptions, ObjectKey, Reconcile, Requeue,
};
use mini_kcm_runtime::informers::{Informer, SharedInformers};
use mini_kcm_runtime::observability::metrics::ControllerMetrics;
use mini_kcm_runtime::pods::cached::CachedPod;
use mini_kcm_runtime::pods::control::PodControl;
use mini_kcm_runtime::switches::features::Feature;

use crate::EVENT_COMPONENT;

/// What sets this controller apart in its core.
const REPLICA_SET_CONTROLLER: ControllerKind = ControllerKind {
    name: "replicaset",
    kind: WorkloadKind::ReplicaSet,
    event_component: EVENT_COMPONENT,
    max_retries: None,
    consistency_gate: Some(Feature::StaleControllerConsistencyReplicaSet),
};

/// One ReplicaSet controller (for one API family): its core, the pods it counts and the expectations of
/// its creations and deletions.
pub(crate) struct ReplicaSetController {
    pub(crate) core: ControllerCore<ReplicaSetObject>,
    pub(crate) pods: Informer<CachedPod>,
    pub(crate) expectations: UidTrackingExpectations,
    pub(crate) pod_control: PodControl,
}

impl Reconcile for ReplicaSetController {
    type Object = ReplicaSetObject;
    type Error = SyncError;

    fn new(
        informers: &SharedInformers,
        client: Client,
        options: ControllerOptions,
        metrics: ControllerMetrics,
    ) -> Self {
        let replica_sets: Informer<ReplicaSetObject> =
            workload_informer(informers, WorkloadKind::ReplicaSet, options.family);
        let core = ControllerCore::new(
            REPLICA_SET_CONTROLLER,
            replica_sets,
            |rs| &rs.spec.selector,
            client.clone(),
            options,
            metrics,
        );
        let pods = pod_informer(informers);
        core.track(&pods);
        let expectations = UidTrackingExpectations::honouring(&core.options.safeties);
        ReplicaSetController {
            pod_control: PodControl::new(client, core.recorder.clone(), core.consistency.clone()),
            core,
            pods,
            expectations,
        }
    }

    fn register_handlers(self: &Arc<Self>) {
        self.register_event_handlers();
    }

    fn core(&self) -> &ControllerCore<ReplicaSetObject> {
        &self.core
    }

    async fn sync(
        &self,
        key: &ObjectKey,
        rs: Arc<ReplicaSetObject>,
    ) -> Result<Requeue, Self::Error> {
        self.sync_replica_set(key, rs).await
    }

    fn forget(&self, key: &ObjectKey) {
        self.expectations.delete_expectations(key);
    }

    fn expectations(&self) -> Option<ExpectationsSnapshot> {
        Some(self.expectations.snapshot())
    }
}
