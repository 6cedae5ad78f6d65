//! The ReplicaSet controller itself: its caches, queue and bookkeeping, and the workers that drive syncs.
//! It executes the pure decisions of this crate ([`crate::plan`], [`crate::status`]) against the API
//! server.
//!
//! - [`handlers`]: informer events → ReplicaSet keys, and expectation bookkeeping;
//! - [`sync`]: `syncReplicaSet` — claim pods, plan, create or delete, write the status;
//! - [`status_write`]: the status write with one retry.

mod handlers;
mod status_write;
mod sync;

pub(crate) use sync::SyncError;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use kube::Client;
use mini_kcm_runtime::controller::{
    Controller, ControllerCore, ControllerKind, ControllerOptions, ObjectKey, Reconcile, Requeue,
};
use mini_kcm_runtime::expectations::{ExpectationsSnapshot, UidTrackingExpectations};
use mini_kcm_runtime::informers::{Informer, SharedInformers};
use mini_kcm_runtime::kinds::{ReplicaSetObject, WorkloadKind, pod_informer, workload_informer};
use mini_kcm_runtime::metrics::ControllerMetrics;
use mini_kcm_runtime::pods::cached::CachedPod;
use mini_kcm_runtime::pods::control::PodControl;

use crate::EVENT_COMPONENT;

/// What sets this controller apart in its core.
const REPLICA_SET_CONTROLLER: ControllerKind = ControllerKind {
    name: "replicaset",
    kind: WorkloadKind::ReplicaSet,
    event_component: EVENT_COMPONENT,
    max_retries: None,
};

/// `--concurrent-replicaset-syncs`' default, as upstream.
#[cfg(test)]
pub(crate) const DEFAULT_WORKERS: usize = 5;

/// One ReplicaSet controller instance (for one API family), built on the shared informers, with its
/// event handlers registered. `client` is the controller's own (rate-limited) client for writes. Call
/// [`SharedInformers::start`] afterwards.
pub fn new_controller(
    informers: &SharedInformers,
    client: Client,
    options: ControllerOptions,
    metrics: ControllerMetrics,
) -> Arc<dyn Controller> {
    Arc::new(ReplicaSetController::new(
        informers, client, options, metrics,
    ))
}

/// One ReplicaSet controller (for one API family).
#[derive(Clone)]
pub(crate) struct ReplicaSetController {
    pub(crate) inner: Arc<Shared>,
}

pub(crate) struct Shared {
    pub(crate) core: ControllerCore<ReplicaSetObject>,
    pub(crate) pods: Informer<CachedPod>,
    pub(crate) expectations: UidTrackingExpectations,
    pub(crate) pod_control: PodControl,
}

impl ReplicaSetController {
    pub(crate) fn new(
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
        let controller = ReplicaSetController {
            inner: Arc::new(Shared {
                pod_control: PodControl::new(
                    client,
                    core.recorder.clone(),
                    core.consistency.clone(),
                ),
                core,
                pods,
                expectations: UidTrackingExpectations::new(),
            }),
        };
        controller.register_handlers();
        controller
    }
}

impl Reconcile for ReplicaSetController {
    type Object = ReplicaSetObject;
    type Error = SyncError;

    fn core(&self) -> &ControllerCore<ReplicaSetObject> {
        &self.inner.core
    }

    async fn sync(
        &self,
        key: &ObjectKey,
        rs: Arc<ReplicaSetObject>,
    ) -> Result<Requeue, Self::Error> {
        self.sync_replica_set(key, rs).await
    }

    fn forget(&self, key: &ObjectKey) {
        self.inner.expectations.delete_expectations(key);
    }

    fn expectations(&self) -> Option<ExpectationsSnapshot> {
        Some(self.inner.expectations.snapshot())
    }
}
