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
#[cfg(test)]
mod upstream_tests;

use std::sync::Arc;

use kube::Client;
use kube::discovery::ApiResource;
use mini_kcm_runtime::api::kinds::{
    DeploymentObject, ReplicaSetObject, WorkloadKind, pod_informer, workload_informer,
};
use mini_kcm_runtime::controller::{
    ControllerCore, ControllerKind, ControllerOptions, ObjectKey, Owners, Reconcile, Requeue,
};
use mini_kcm_runtime::informers::{Informer, SharedInformers};
use mini_kcm_runtime::observability::metrics::ControllerMetrics;
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
    // Upstream's Deployment controller has no consistency store, so no gate (docs/deployment.md).
    consistency_gate: None,
};

/// One Deployment controller (for one API family).
pub(crate) struct DeploymentController {
    pub(crate) core: ControllerCore<DeploymentObject>,
    pub(crate) rs_resource: ApiResource,
    /// ReplicaSets, also as the owners of pods (a pod deletion may be the last one a Recreate waits for).
    pub(crate) replica_sets: Owners<ReplicaSetObject>,
    pub(crate) pods: Informer<CachedPod>,
}

impl Reconcile for DeploymentController {
    type Object = DeploymentObject;
    type Error = SyncError;

    fn new(
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
        DeploymentController {
            core,
            replica_sets: Owners::new(replica_sets, rs_resource.clone(), |rs| &rs.spec.selector),
            rs_resource,
            pods: pod_informer(informers),
        }
    }

    fn register_handlers(self: &Arc<Self>) {
        self.register_event_handlers();
    }

    fn core(&self) -> &ControllerCore<DeploymentObject> {
        &self.core
    }

    async fn sync(&self, key: &ObjectKey, d: Arc<DeploymentObject>) -> Result<Requeue, SyncError> {
        self.sync_deployment(key, d).await
    }
}
