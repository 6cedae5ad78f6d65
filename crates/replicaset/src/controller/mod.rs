//! The ReplicaSet controller itself: its caches, queue and bookkeeping, and the workers that drive syncs.
//! It executes the pure decisions of this crate ([`crate::plan`], [`crate::status`]) against the API
//! server.
//!
//! - [`handlers`]: informer events → ReplicaSet keys, and expectation bookkeeping;
//! - [`sync`]: `syncReplicaSet` — claim pods, plan, create or delete, write the status;
//! - [`status`]: the status write with one retry.

mod handlers;
mod status;
mod sync;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use futures::FutureExt;
use futures::future::BoxFuture;
use kube::Client;
use kube::discovery::ApiResource;
use mini_kcm_runtime::client::RequestBudget;
use mini_kcm_runtime::consistency::ConsistencyStore;
use mini_kcm_runtime::controller::{Controller, ObjectKey, Owners};
use mini_kcm_runtime::decisions::{DecidedBy, DecisionLog};
use mini_kcm_runtime::events::EventRecorder;
use mini_kcm_runtime::expectations::UidTrackingExpectations;
use mini_kcm_runtime::informers::{Informer, SharedInformers};
use mini_kcm_runtime::inspect::{ControllerView, SyncStats};
use mini_kcm_runtime::kinds::{
    ApiFamily, ReplicaSetObject, WorkloadKind, pod_informer, workload_informer,
};
use mini_kcm_runtime::metrics::ControllerMetrics;
use mini_kcm_runtime::pods::cached::CachedPod;
use mini_kcm_runtime::pods::control::PodControl;
use mini_kcm_runtime::status_writes::StatusWrites;
use mini_kcm_runtime::worker::{Workers, run_workers};
use mini_kcm_workqueue::{WorkQueue, default_controller_rate_limiter};

use crate::{BURST_REPLICAS, EVENT_COMPONENT};

/// Settings of one ReplicaSet controller instance.
#[derive(Debug, Clone)]
pub struct ReplicaSetOptions {
    pub family: ApiFamily,
    /// `--concurrent-replicaset-syncs` (upstream default 5).
    pub workers: usize,
    /// Upstream's `BurstReplicas` (500).
    pub burst_replicas: usize,
    /// Where syncs file their decisions (disabled by default).
    pub decisions: DecisionLog,
    /// The request budget of the client the controller is given, which its event writes draw from
    /// without holding up its other requests (unlimited by default).
    pub budget: RequestBudget,
}

impl ReplicaSetOptions {
    pub fn new(family: ApiFamily) -> Self {
        ReplicaSetOptions {
            family,
            workers: 5,
            burst_replicas: BURST_REPLICAS,
            decisions: DecisionLog::disabled(),
            budget: RequestBudget::unlimited(),
        }
    }
}

/// One ReplicaSet controller (for one API family).
#[derive(Clone)]
pub struct ReplicaSetController {
    pub(crate) inner: Arc<Shared>,
}

pub(crate) struct Shared {
    pub(crate) options: ReplicaSetOptions,
    pub(crate) resource: ApiResource,
    pub(crate) client: Client,
    pub(crate) replica_sets: Owners<ReplicaSetObject>,
    pub(crate) pods: Informer<CachedPod>,
    pub(crate) queue: WorkQueue<ObjectKey>,
    pub(crate) expectations: UidTrackingExpectations,
    pub(crate) consistency: ConsistencyStore,
    pub(crate) status_writes: StatusWrites,
    pub(crate) pod_control: PodControl,
    pub(crate) metrics: ControllerMetrics,
    pub(crate) syncs: SyncStats,
}

impl ReplicaSetController {
    /// Creates the controller on the shared informers and registers its event handlers. `client` is the
    /// controller's own (rate-limited) client for writes. Call [`SharedInformers::start`] afterwards.
    pub fn new(
        informers: &SharedInformers,
        client: Client,
        options: ReplicaSetOptions,
        metrics: ControllerMetrics,
    ) -> Self {
        let resource = WorkloadKind::ReplicaSet.api_resource(options.family);
        let replica_sets = workload_informer(informers, WorkloadKind::ReplicaSet, options.family);
        let pods = pod_informer(informers);
        let queue_name = options.family.queue_name("replicaset");
        let queue = WorkQueue::new(
            &queue_name,
            default_controller_rate_limiter(),
            metrics.queue.clone(),
        );
        let consistency = ConsistencyStore::default();
        consistency.track(&pods);
        consistency.track(&replica_sets);
        let recorder = EventRecorder::new(
            client.clone(),
            options.budget.clone(),
            EVENT_COMPONENT,
            metrics.events_dropped.clone(),
        );
        let controller = ReplicaSetController {
            inner: Arc::new(Shared {
                options,
                replica_sets: Owners::new(replica_sets, resource.clone(), |rs| &rs.spec.selector),
                resource,
                client: client.clone(),
                pods,
                status_writes: StatusWrites::new(
                    queue.clone(),
                    metrics.status_writes_deferred.clone(),
                ),
                queue,
                expectations: UidTrackingExpectations::new(),
                pod_control: PodControl::new(client, recorder, consistency.clone()),
                consistency,
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
            "starting the ReplicaSet controller"
        );
        let controller = self.clone();
        let s = &self.inner;
        let workers = Workers {
            by: self.decided_by(),
            queue: s.queue.clone(),
            count: s.options.workers,
            max_retries: None,
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
            controller: "replicaset",
            family: self.inner.options.family.label(),
            kind: WorkloadKind::ReplicaSet.kind(),
        }
    }
}

impl Controller for ReplicaSetController {
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
            Some(s.expectations.snapshot()),
        )
    }
}
