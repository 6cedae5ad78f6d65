//! The Deployment controller itself: caches, queue, handlers and the sync that executes the pure plans of
//! this crate against the API server.
//!
//! - [`handlers`]: informer events → Deployment keys;
//! - [`sync`]: `syncDeployment` — claim ReplicaSets, then pause / rollback / scaling / rollout;
//! - [`rollout`]: the steps that write: create the new ReplicaSet, scale, clean up, write status;
//! - [`error`]: how a sync fails.

mod error;
mod handlers;
mod rollout;
mod sync;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use kube::Client;
use kube::discovery::ApiResource;
use mini_kcm_runtime::controller::{
    Controller, ControllerCore, ControllerKind, ControllerOptions, ObjectKey, Owners, Reconcile,
    Requeue,
};
use mini_kcm_runtime::informers::{Informer, SharedInformers};
use mini_kcm_runtime::kinds::{
    DeploymentObject, ReplicaSetObject, WorkloadKind, pod_informer, workload_informer,
};
use mini_kcm_runtime::metrics::ControllerMetrics;
use mini_kcm_runtime::pods::cached::CachedPod;

pub(crate) use error::SyncError;

/// The `reportingController` of our events, as upstream.
pub(crate) const EVENT_COMPONENT: &str = "deployment-controller";
/// Upstream's `maxRetries`: a Deployment failing this many syncs in a row is dropped until its next event.
pub(crate) const MAX_RETRIES: usize = 15;

/// What sets this controller apart in its core.
const DEPLOYMENT_CONTROLLER: ControllerKind = ControllerKind {
    name: "deployment",
    kind: WorkloadKind::Deployment,
    event_component: EVENT_COMPONENT,
    max_retries: Some(MAX_RETRIES),
};

/// `--concurrent-deployment-syncs`' default, as upstream.
#[cfg(test)]
pub(crate) const DEFAULT_WORKERS: usize = 5;

/// One Deployment controller instance (for one API family), built on the shared informers, with its
/// event handlers registered. `client` is the controller's own (rate-limited) client for writes. Call
/// [`SharedInformers::start`] afterwards.
pub fn new_controller(
    informers: &SharedInformers,
    client: Client,
    options: ControllerOptions,
    metrics: ControllerMetrics,
) -> Arc<dyn Controller> {
    Arc::new(DeploymentController::new(
        informers, client, options, metrics,
    ))
}

/// One Deployment controller (for one API family).
#[derive(Clone)]
pub(crate) struct DeploymentController {
    pub(crate) inner: Arc<Shared>,
}

pub(crate) struct Shared {
    pub(crate) core: ControllerCore<DeploymentObject>,
    pub(crate) rs_resource: ApiResource,
    /// ReplicaSets, also as the owners of pods (a pod deletion may be the last one a Recreate waits for).
    pub(crate) replica_sets: Owners<ReplicaSetObject>,
    pub(crate) pods: Informer<CachedPod>,
}

impl DeploymentController {
    pub(crate) fn new(
        informers: &SharedInformers,
        client: Client,
        options: ControllerOptions,
        metrics: ControllerMetrics,
    ) -> Self {
        let family = options.family;
        let deployments: Informer<DeploymentObject> =
            workload_informer(informers, WorkloadKind::Deployment, family);
        let core = ControllerCore::new(
            DEPLOYMENT_CONTROLLER,
            deployments,
            |d| &d.spec.selector,
            client,
            options,
            metrics,
        );
        let rs_resource = WorkloadKind::ReplicaSet.api_resource(family);
        let replica_sets: Informer<ReplicaSetObject> =
            workload_informer(informers, WorkloadKind::ReplicaSet, family);
        // Read-your-own-writes of ReplicaSets too (not in upstream's Deployment controller, which
        // tolerates a stale cache through conflicts; here all three controllers share the rule).
        core.track(&replica_sets);
        let controller = DeploymentController {
            inner: Arc::new(Shared {
                core,
                replica_sets: Owners::new(replica_sets, rs_resource.clone(), |rs| {
                    &rs.spec.selector
                }),
                rs_resource,
                pods: pod_informer(informers),
            }),
        };
        controller.register_handlers();
        controller
    }
}

impl Reconcile for DeploymentController {
    type Object = DeploymentObject;
    type Error = SyncError;

    fn core(&self) -> &ControllerCore<DeploymentObject> {
        &self.inner.core
    }

    async fn sync(&self, key: &ObjectKey, d: Arc<DeploymentObject>) -> Result<Requeue, SyncError> {
        self.sync_deployment(key, d).await
    }
}
