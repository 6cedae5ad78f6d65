//! The DaemonSet controller itself: the caches it reads, its queue and bookkeeping, and the workers that
//! drive syncs. It executes the pure plans of this crate against the API server.
//!
//! - [`handlers`]: informer events (DaemonSets, pods, nodes, ControllerRevisions) → DaemonSet keys, and
//!   expectation bookkeeping;
//! - [`sync`]: `syncDaemonSet` — claim pods, construct the history, manage, roll, clean up, status;
//! - [`history`]: the ControllerRevision writes (claim, create with exact bytes, dedup, renumber, clean up);
//! - [`pods`]: `syncNodes` — create pods pinned to their nodes in slow-start batches, delete pods;
//! - [`status`]: the status write with one retry, and the `minReadySeconds` requeue;
//! - [`snapshot`]: what one sync read, shared by those steps; [`error`]: how a sync fails.
//!
//! One instance manages one API family (`apps/v1` or the `minikcm.dev` copies); both instances share the
//! pod, node and ControllerRevision informers (ControllerRevisions are `apps/v1` for both families: their
//! owner reference names the DaemonSet of whichever family).

mod error;
mod handlers;
mod history;
mod pods;
mod snapshot;
mod status;
mod sync;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use futures::FutureExt;
use futures::future::BoxFuture;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::discovery::ApiResource;
use mini_kcm_runtime::client::RequestBudget;
use mini_kcm_runtime::consistency::ConsistencyStore;
use mini_kcm_runtime::controller::{Controller, ObjectKey, Owners};
use mini_kcm_runtime::decisions::{DecidedBy, DecisionLog};
use mini_kcm_runtime::events::EventRecorder;
use mini_kcm_runtime::expectations::ControllerExpectations;
use mini_kcm_runtime::informers::{Informer, SharedInformers};
use mini_kcm_runtime::inspect::{ControllerView, SyncStats};
use mini_kcm_runtime::kinds::{
    ApiFamily, WorkloadKind, controller_revision_informer, node_informer, pod_informer,
    workload_informer,
};
use mini_kcm_runtime::metrics::ControllerMetrics;
use mini_kcm_runtime::pods::cached::CachedPod;
use mini_kcm_runtime::pods::control::PodControl;
use mini_kcm_runtime::status_writes::StatusWrites;
use mini_kcm_runtime::worker::{Workers, run_workers};
use mini_kcm_workqueue::{WorkQueue, default_controller_rate_limiter};

use crate::backoff::{BACKOFF_GC_INTERVAL, FailedPodBackoff};
use crate::placement::DaemonPlacement;
use crate::{BURST_REPLICAS, DaemonSetObject};

/// The `reportingController` of our events, as upstream.
pub(crate) const EVENT_COMPONENT: &str = "daemonset-controller";

/// Settings of one DaemonSet controller instance.
#[derive(Debug, Clone)]
pub struct DaemonSetOptions {
    pub family: ApiFamily,
    /// `--concurrent-daemonset-syncs` (upstream default 2).
    pub workers: usize,
    /// Upstream's `BurstReplicas` (250): at most this many creations and deletions per sync.
    pub burst_replicas: usize,
    /// Where syncs file their decisions (disabled by default).
    pub decisions: DecisionLog,
    /// The request budget of the client the controller is given, which its event writes draw from
    /// without holding up its other requests (unlimited by default).
    pub budget: RequestBudget,
}

impl DaemonSetOptions {
    pub fn new(family: ApiFamily) -> Self {
        DaemonSetOptions {
            family,
            workers: 2,
            burst_replicas: BURST_REPLICAS,
            decisions: DecisionLog::disabled(),
            budget: RequestBudget::unlimited(),
        }
    }
}

/// One DaemonSet controller (for one API family).
#[derive(Clone)]
pub struct DaemonSetController {
    pub(crate) inner: Arc<Shared>,
}

pub(crate) struct Shared {
    pub(crate) options: DaemonSetOptions,
    pub(crate) resource: ApiResource,
    pub(crate) client: Client,
    pub(crate) daemon_sets: Owners<DaemonSetObject>,
    pub(crate) pods: Informer<CachedPod>,
    pub(crate) nodes: Informer<Node>,
    pub(crate) revisions: Informer<ControllerRevision>,
    pub(crate) queue: WorkQueue<ObjectKey>,
    /// Plain counters, as upstream's DaemonSet controller (not the UID-tracking kind of ReplicaSets).
    pub(crate) expectations: ControllerExpectations,
    pub(crate) consistency: ConsistencyStore,
    pub(crate) status_writes: StatusWrites,
    pub(crate) pod_control: PodControl,
    pub(crate) recorder: EventRecorder,
    /// Per (DaemonSet, generation, node): how long to wait before deleting the next failed pod there.
    pub(crate) failed_pods_backoff: Mutex<FailedPodBackoff>,
    pub(crate) placements: PlacementCache,
    pub(crate) metrics: ControllerMetrics,
    pub(crate) syncs: SyncStats,
}

impl Shared {
    pub(crate) fn backoff(&self) -> MutexGuard<'_, FailedPodBackoff> {
        // The backoff table stays meaningful if a holder panicked.
        self.failed_pods_backoff
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl DaemonSetController {
    /// Creates the controller on the shared informers and registers its event handlers. `client` is the
    /// controller's own (rate-limited) client for writes. Call [`SharedInformers::start`] afterwards.
    pub fn new(
        informers: &SharedInformers,
        client: Client,
        options: DaemonSetOptions,
        metrics: ControllerMetrics,
    ) -> Self {
        let family = options.family;
        let daemon_sets = workload_informer(informers, WorkloadKind::DaemonSet, family);
        let pods = pod_informer(informers);
        let nodes = node_informer(informers);
        let revisions = controller_revision_informer(informers);
        let consistency = ConsistencyStore::default();
        consistency.track(&pods);
        consistency.track(&daemon_sets);
        consistency.track(&revisions);
        let resource = WorkloadKind::DaemonSet.api_resource(family);
        let recorder = EventRecorder::new(
            client.clone(),
            options.budget.clone(),
            EVENT_COMPONENT,
            metrics.events_dropped.clone(),
        );
        let queue = WorkQueue::new(
            family.queue_name("daemonset"),
            default_controller_rate_limiter(),
            metrics.queue.clone(),
        );
        let controller = DaemonSetController {
            inner: Arc::new(Shared {
                daemon_sets: Owners::new(daemon_sets, resource.clone(), |ds| &ds.spec.selector),
                resource,
                status_writes: StatusWrites::new(
                    queue.clone(),
                    metrics.status_writes_deferred.clone(),
                ),
                queue,
                pod_control: PodControl::new(client.clone(), recorder.clone(), consistency.clone()),
                recorder,
                client,
                pods,
                nodes,
                revisions,
                expectations: ControllerExpectations::new(),
                consistency,
                failed_pods_backoff: Mutex::new(FailedPodBackoff::default()),
                placements: PlacementCache::default(),
                metrics,
                options,
                syncs: SyncStats::default(),
            }),
        };
        controller.register_handlers();
        controller
    }

    /// Runs the workers until the queue is shut down, and meanwhile forgets stale failed-pod backoff
    /// entries every [`BACKOFF_GC_INTERVAL`].
    async fn run_workers(&self) {
        let family = self.inner.options.family.label();
        tracing::info!(
            family,
            workers = self.inner.options.workers,
            "starting the DaemonSet controller"
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
        let workers = run_workers(workers, move |key: ObjectKey| {
            let controller = controller.clone();
            async move { controller.sync(&key).await }
        });
        let backoff_gc = async {
            loop {
                tokio::time::sleep(BACKOFF_GC_INTERVAL).await;
                self.inner.backoff().gc(tokio::time::Instant::now());
            }
        };
        tokio::select! {
            () = workers => {}
            () = backoff_gc => {}
        }
    }

    fn decided_by(&self) -> DecidedBy {
        DecidedBy {
            controller: "daemonset",
            family: self.inner.options.family.label(),
            kind: WorkloadKind::DaemonSet.kind(),
        }
    }
}

impl Controller for DaemonSetController {
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

/// Each DaemonSet's parsed placement rules, so a node event judges every DaemonSet without re-parsing its
/// template. Entries are refreshed by the DaemonSet handlers and checked against the DaemonSet's UID and
/// generation (a template change bumps the generation) before use.
#[derive(Default)]
pub(crate) struct PlacementCache {
    entries: Mutex<HashMap<ObjectKey, CachedPlacement>>,
}

struct CachedPlacement {
    uid: Option<String>,
    generation: Option<i64>,
    placement: Arc<DaemonPlacement>,
}

impl PlacementCache {
    /// The placement of `ds` as it is now: cached when the UID and generation match, else parsed and
    /// cached.
    pub(crate) fn get(&self, ds: &DaemonSetObject) -> Arc<DaemonPlacement> {
        let key = ObjectKey::of(&ds.metadata);
        let mut entries = self.lock();
        if let Some(cached) = entries.get(&key)
            && ds.metadata.generation.is_some()
            && cached.generation == ds.metadata.generation
            && cached.uid == ds.metadata.uid
        {
            return cached.placement.clone();
        }
        let placement = Arc::new(DaemonPlacement::new(ds));
        entries.insert(
            key,
            CachedPlacement {
                uid: ds.metadata.uid.clone(),
                generation: ds.metadata.generation,
                placement: placement.clone(),
            },
        );
        placement
    }

    pub(crate) fn forget(&self, key: &ObjectKey) {
        self.lock().remove(key);
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<ObjectKey, CachedPlacement>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
