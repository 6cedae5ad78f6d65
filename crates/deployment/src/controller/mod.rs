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
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use kube::Client;
use kube::discovery::ApiResource;
use mini_kcm_runtime::client::RequestBudget;
use mini_kcm_runtime::consistency::ConsistencyStore;
use mini_kcm_runtime::controller::{Controller, ObjectKey, Owners};
use mini_kcm_runtime::decisions::{DecidedBy, DecisionLog};
use mini_kcm_runtime::events::EventRecorder;
use mini_kcm_runtime::informers::{Informer, SharedInformers};
use mini_kcm_runtime::inspect::{ControllerView, SyncStats};
use mini_kcm_runtime::kinds::{
    ApiFamily, DeploymentObject, ReplicaSetObject, WorkloadKind, pod_informer, workload_informer,
};
use mini_kcm_runtime::metrics::ControllerMetrics;
use mini_kcm_runtime::pods::cached::CachedPod;
use mini_kcm_runtime::status_writes::StatusWrites;
use mini_kcm_runtime::worker::{Workers, run_workers};
use mini_kcm_workqueue::{WorkQueue, controller_rate_limiter};

/// The `reportingController` of our events, as upstream.
pub(crate) const EVENT_COMPONENT: &str = "deployment-controller";
/// Upstream's `maxRetries`: a Deployment failing this many syncs in a row is dropped until its next event.
pub(crate) const MAX_RETRIES: usize = 15;

/// Settings of one Deployment controller instance.
#[derive(Debug, Clone)]
pub struct DeploymentOptions {
    pub family: ApiFamily,
    /// `--concurrent-deployment-syncs` (upstream default 5).
    pub workers: usize,
    /// The longest delay between two retries of a failing key (client-go's default controller rate
    /// limiter: 1000 s). Not a kube-controller-manager flag: tests lower it to reach the
    /// [`MAX_RETRIES`] drop in seconds rather than minutes.
    pub max_retry_delay: Duration,
    /// Where syncs file their decisions (disabled by default).
    pub decisions: DecisionLog,
    /// The request budget of the client the controller is given, which its event writes draw from
    /// without holding up its other requests (unlimited by default).
    pub budget: RequestBudget,
}

/// The per-key cap of client-go's `DefaultControllerRateLimiter`.
pub(crate) const DEFAULT_MAX_RETRY_DELAY: Duration = Duration::from_secs(1000);

impl DeploymentOptions {
    pub fn new(family: ApiFamily) -> Self {
        DeploymentOptions {
            family,
            workers: 5,
            max_retry_delay: DEFAULT_MAX_RETRY_DELAY,
            decisions: DecisionLog::disabled(),
            budget: RequestBudget::unlimited(),
        }
    }
}

/// One Deployment controller (for one API family).
#[derive(Clone)]
pub struct DeploymentController {
    pub(crate) inner: Arc<Shared>,
}

pub(crate) struct Shared {
    pub(crate) options: DeploymentOptions,
    pub(crate) resource: ApiResource,
    pub(crate) rs_resource: ApiResource,
    pub(crate) client: Client,
    pub(crate) deployments: Owners<DeploymentObject>,
    /// ReplicaSets, also as the owners of pods (a pod deletion may be the last one a Recreate waits for).
    pub(crate) replica_sets: Owners<ReplicaSetObject>,
    pub(crate) pods: Informer<CachedPod>,
    pub(crate) queue: WorkQueue<ObjectKey>,
    /// Read-your-own-writes of Deployments and ReplicaSets (not in upstream's Deployment controller,
    /// which tolerates a stale cache through conflicts; here all three controllers share the rule).
    pub(crate) consistency: ConsistencyStore,
    pub(crate) status_writes: StatusWrites,
    pub(crate) recorder: EventRecorder,
    pub(crate) metrics: ControllerMetrics,
    pub(crate) syncs: SyncStats,
}

impl DeploymentController {
    /// Creates the controller on the shared informers and registers its handlers; `client` is the
    /// controller's own rate-limited client. Call `SharedInformers::start` afterwards.
    pub fn new(
        informers: &SharedInformers,
        client: Client,
        options: DeploymentOptions,
        metrics: ControllerMetrics,
    ) -> Self {
        let family = options.family;
        let resource = WorkloadKind::Deployment.api_resource(family);
        let rs_resource = WorkloadKind::ReplicaSet.api_resource(family);
        let deployments = workload_informer(informers, WorkloadKind::Deployment, family);
        let replica_sets = workload_informer(informers, WorkloadKind::ReplicaSet, family);
        let consistency = ConsistencyStore::default();
        consistency.track(&deployments);
        consistency.track(&replica_sets);
        let queue = WorkQueue::new(
            family.queue_name("deployment"),
            controller_rate_limiter(options.max_retry_delay),
            metrics.queue.clone(),
        );
        let controller = DeploymentController {
            inner: Arc::new(Shared {
                deployments: Owners::new(deployments, resource.clone(), |d| &d.spec.selector),
                replica_sets: Owners::new(replica_sets, rs_resource.clone(), |rs| {
                    &rs.spec.selector
                }),
                resource,
                rs_resource,
                pods: pod_informer(informers),
                consistency,
                status_writes: StatusWrites::new(
                    queue.clone(),
                    metrics.status_writes_deferred.clone(),
                ),
                queue,
                recorder: EventRecorder::new(
                    client.clone(),
                    options.budget.clone(),
                    EVENT_COMPONENT,
                    metrics.events_dropped.clone(),
                ),
                client,
                options,
                metrics,
                syncs: SyncStats::default(),
            }),
        };
        controller.register_handlers();
        controller
    }

    /// Runs the workers until the queue is shut down.
    async fn run_workers(&self) {
        let family = self.inner.options.family.label();
        tracing::info!(
            family,
            workers = self.inner.options.workers,
            "starting the Deployment controller"
        );
        let controller = self.clone();
        let s = &self.inner;
        let workers = Workers {
            by: self.decided_by(),
            queue: s.queue.clone(),
            count: s.options.workers,
            max_retries: Some(MAX_RETRIES),
            panics: s.metrics.sync_panics.clone(),
            stats: s.syncs.clone(),
            decisions: s.options.decisions.clone(),
        };
        run_workers(workers, move |key: ObjectKey| {
            let controller = controller.clone();
            async move { controller.sync(&key).await }
        })
        .await;
    }

    fn decided_by(&self) -> DecidedBy {
        DecidedBy {
            controller: "deployment",
            family: self.inner.options.family.label(),
            kind: WorkloadKind::Deployment.kind(),
        }
    }
}

impl Controller for DeploymentController {
    fn run(&self) -> BoxFuture<'static, ()> {
        let controller = self.clone();
        async move { controller.run_workers().await }.boxed()
    }

    fn shut_down(&self) {
        self.inner.queue.shut_down();
    }

    fn inspect(&self) -> ControllerView {
        let s = &self.inner;
        ControllerView::new(
            self.decided_by(),
            s.options.workers,
            &s.queue,
            &s.syncs,
            None,
        )
    }
}
