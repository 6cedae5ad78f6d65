//! The DaemonSet controller itself: the caches it reads, its queue and bookkeeping, and the workers that
//! drive syncs. It executes the pure plans of this crate against the API server.
//!
//! - [`handlers`]: informer events (DaemonSets, pods, nodes, ControllerRevisions) → DaemonSet keys, and
//!   expectation bookkeeping;
//! - [`sync`]: `syncDaemonSet` — claim pods, construct the history, manage, roll, clean up, status;
//! - [`revision_writes`]: the ControllerRevision writes (claim, create with exact bytes, dedup, renumber, clean up);
//! - [`pods`]: `syncNodes` — create pods pinned to their nodes in slow-start batches, delete pods;
//! - [`status_write`]: the status write with one retry, and when Ready pods become available;
//! - [`snapshot`]: what one sync read, shared by those steps; [`error`]: how a sync fails.
//!
//! One instance manages one API family (`apps/v1` or the `minikcm.dev` copies); both instances share the
//! pod, node and ControllerRevision informers (ControllerRevisions are `apps/v1` for both families: their
//! owner reference names the DaemonSet of whichever family).

mod error;
mod handlers;
mod pods;
mod revision_writes;
mod snapshot;
mod status_write;
mod sync;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod upstream_tests;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::Node;
use kube::Client;
use mini_kcm_runtime::api::kinds::{
    WorkloadKind, controller_revision_informer, node_informer, pod_informer, workload_informer,
};
use mini_kcm_runtime::controller::expectations::{ControllerExpectations, ExpectationsSnapshot};
use mini_kcm_runtime::controller::{
    ControllerCore, ControllerKind, ControllerOptions, ObjectKey, Reconcile, Requeue,
};
use mini_kcm_runtime::informers::{Informer, SharedInformers};
use mini_kcm_runtime::observability::metrics::ControllerMetrics;
use mini_kcm_runtime::pods::cached::CachedPod;
use mini_kcm_runtime::pods::control::PodControl;
use mini_kcm_runtime::switches::features::Feature;

use crate::DaemonSetObject;
use crate::backoff::{BACKOFF_GC_INTERVAL, FailedPodBackoff};
use crate::placement::DaemonPlacement;

pub(crate) use error::SyncError;

/// The `reportingController` of our events, as upstream.
pub(crate) const EVENT_COMPONENT: &str = "daemonset-controller";

/// What sets this controller apart in its core.
const DAEMON_SET_CONTROLLER: ControllerKind = ControllerKind {
    name: "daemonset",
    kind: WorkloadKind::DaemonSet,
    event_component: EVENT_COMPONENT,
    max_retries: None,
    consistency_gate: Some(Feature::StaleControllerConsistencyDaemonSet),
};

/// One DaemonSet controller (for one API family).
pub(crate) struct DaemonSetController {
    pub(crate) core: ControllerCore<DaemonSetObject>,
    pub(crate) pods: Informer<CachedPod>,
    pub(crate) nodes: Informer<Node>,
    pub(crate) revisions: Informer<ControllerRevision>,
    /// Plain counters, as upstream's DaemonSet controller (not the UID-tracking kind of ReplicaSets).
    pub(crate) expectations: ControllerExpectations,
    pub(crate) pod_control: PodControl,
    /// Per (DaemonSet, generation, node): how long to wait before deleting the next failed pod there.
    pub(crate) failed_pods_backoff: Mutex<FailedPodBackoff>,
    pub(crate) placements: PlacementCache,
}

impl DaemonSetController {
    pub(crate) fn backoff(&self) -> MutexGuard<'_, FailedPodBackoff> {
        // The backoff table stays meaningful if a holder panicked.
        self.failed_pods_backoff
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl Reconcile for DaemonSetController {
    type Object = DaemonSetObject;
    type Error = SyncError;

    fn new(
        informers: &SharedInformers,
        client: Client,
        options: ControllerOptions,
        metrics: ControllerMetrics,
    ) -> Self {
        let daemon_sets: Informer<DaemonSetObject> =
            workload_informer(informers, WorkloadKind::DaemonSet, options.family);
        let core = ControllerCore::new(
            DAEMON_SET_CONTROLLER,
            daemon_sets,
            |ds| &ds.spec.selector,
            client.clone(),
            options,
            metrics,
        );
        let pods = pod_informer(informers);
        let revisions = controller_revision_informer(informers);
        core.track(&pods);
        core.track(&revisions);
        let comparison_operators = core
            .options
            .features
            .enabled(Feature::TaintTolerationComparisonOperators);
        let expectations = ControllerExpectations::honouring(&core.options.safeties);
        DaemonSetController {
            pod_control: PodControl::new(client, core.recorder.clone(), core.consistency.clone()),
            core,
            pods,
            nodes: node_informer(informers),
            revisions,
            expectations,
            failed_pods_backoff: Mutex::new(FailedPodBackoff::default()),
            placements: PlacementCache {
                comparison_operators,
                ..Default::default()
            },
        }
    }

    fn register_handlers(self: &Arc<Self>) {
        self.register_event_handlers();
    }

    fn core(&self) -> &ControllerCore<DaemonSetObject> {
        &self.core
    }

    async fn sync(&self, key: &ObjectKey, ds: Arc<DaemonSetObject>) -> Result<Requeue, SyncError> {
        self.sync_daemon_set(key, ds).await
    }

    fn forget(&self, key: &ObjectKey) {
        self.expectations.delete_expectations(key);
    }

    fn expectations(&self) -> Option<ExpectationsSnapshot> {
        Some(self.expectations.snapshot())
    }

    /// Forgets stale failed-pod backoff entries every [`BACKOFF_GC_INTERVAL`].
    async fn housekeeping(&self) {
        loop {
            tokio::time::sleep(BACKOFF_GC_INTERVAL).await;
            self.backoff().gc(tokio::time::Instant::now());
        }
    }
}

/// Each DaemonSet's parsed placement rules, so a node event judges every DaemonSet without re-parsing its
/// template. Entries are refreshed by the DaemonSet handlers and checked against the DaemonSet's UID and
/// generation (a template change bumps the generation) before use.
#[derive(Default)]
pub(crate) struct PlacementCache {
    entries: Mutex<HashMap<ObjectKey, CachedPlacement>>,
    /// The `TaintTolerationComparisonOperators` gate, fixed for the manager's life.
    comparison_operators: bool,
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
        let placement =
            Arc::new(DaemonPlacement::new(ds).with_comparison_operators(self.comparison_operators));
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
