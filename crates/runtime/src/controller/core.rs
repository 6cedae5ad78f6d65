//! The core every controller is built on: what the ReplicaSet, Deployment and DaemonSet controllers
//! share, written once, so each controller's own code is only its algorithm.
//!
//! - [`ControllerOptions`]: the settings every instance has (family, workers, where decisions go, the
//!   request budget, the longest retry delay, the queue's priorities);
//! - [`ControllerCore`]: the fields every instance has (its objects' cache as [`Owners`], the queue, the
//!   read-your-own-writes store, status-write deferral, the event recorder, metrics, sync counts), and
//!   the one way handlers queue keys, saying why ([`ControllerCore::enqueue`], `super::wake`);
//! - [`Reconcile`]: what a controller adds — how it is built on the shared informers and which events
//!   wake it, its sync of one object that exists, what to forget when an object is gone, its expectations
//!   for the live view, and any housekeeping beside the workers;
//! - [`new_controller`]: builds one instance of a [`Reconcile`], handlers registered, as the manager's
//!   [`Controller`]; each controller crate exports it for its type as a [`NewController`], which the
//!   manager's descriptor table calls (`super::offline` builds one on caches filled by hand, for unit
//!   tests).
//!
//! The core runs the workers and owns the **prologue** of every sync (kube-runtime's applier owns
//! "object gone" the same way): a key whose caches have not yet observed this controller's own writes
//! is retried (a routine failure, counted as upstream's `stale_sync_skips`); a key whose object is no
//! longer cached is forgotten everywhere — consistency records, deferred status writes and the
//! controller's own bookkeeping — and succeeds. Only an existing object reaches [`Reconcile::sync`].
//!
//! What happens to a key after its sync is decided in one place, `crate::controller::worker` (controller-runtime's
//! `reconcileHandler`): success forgets its failures and honours the [`Requeue`] the sync returned; a
//! failure requeues it with rate-limited backoff, drops it after `max_retries` (Deployments), or
//! forgets it when the failure says no retry can help.

use std::fmt::{Debug, Display};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::ObjectMeta;
use kube::core::{DynamicResourceScope, NamespaceResourceScope};
use kube::discovery::ApiResource;
use kube::{Client, Resource};
use mini_kcm_workqueue::{Priorities, Wake, WorkQueue, controller_rate_limiter};
use serde::de::DeserializeOwned;

use super::wake::{self, wake};
use super::{Controller, ObjectKey, Owners};
use crate::api::client::RequestBudget;
use crate::api::kinds::{ApiFamily, WorkloadKind};
use crate::api::status_writes::StatusWrites;
use crate::api::tracked_api::TrackedApi;
use crate::controller::consistency::ConsistencyStore;
use crate::controller::expectations::ExpectationsSnapshot;
use crate::controller::worker::{SyncFailure, Workers, run_workers};
use crate::informers::{Change, Informer, Origin, SharedInformers};
use crate::observability::decisions::{DecidedBy, DecisionLog, RoutineRetry};
use crate::observability::events::EventRecorder;
use crate::observability::inspect::{ControllerView, SyncStats};
use crate::observability::metrics::ControllerMetrics;
use crate::pods::cached::CachedPod;
use crate::pods::ranking::is_pod_ready;
use crate::pods::slow_start;
use crate::switches::features::{Feature, FeatureGates};
use crate::switches::safeties::{Safeties, Safety};

/// The per-key cap of client-go's `DefaultControllerRateLimiter`.
const DEFAULT_MAX_RETRY_DELAY: Duration = Duration::from_secs(1000);

/// Settings of one controller instance.
#[derive(Debug, Clone)]
pub struct ControllerOptions {
    /// Which API family the instance manages: the built-in `apps/v1` kinds or the `minikcm.dev` copies.
    pub family: ApiFamily,
    /// `--concurrent-<kind>-syncs`: how many keys are synced at once.
    pub workers: usize,
    /// Where syncs file their decisions (disabled by default).
    pub decisions: DecisionLog,
    /// The request budget of the client the controller is given, which its event writes draw from
    /// without holding up its other requests (unlimited by default).
    pub budget: RequestBudget,
    /// The longest delay between two retries of a failing key (client-go's default controller rate
    /// limiter: 1000 s). Not a kube-controller-manager flag: tests lower it to reach the Deployment
    /// controller's drop after 15 failures in seconds rather than minutes.
    pub max_retry_delay: Duration,
    /// Whether the queue hands keys from live events out before keys from lists and resyncs
    /// (`--work-queue-priorities`, `--max-low-priority-wait`; a deliberate difference from upstream,
    /// whose queue is one FIFO: docs/work-queue.md). On by default.
    pub priorities: Priorities,
    /// `--feature-gates`, as each controller consults them.
    pub features: FeatureGates,
    /// The safety mechanisms switched off (`mini-kcm up --without`, for learning; all on otherwise).
    pub safeties: Safeties,
}

impl ControllerOptions {
    /// `workers` as upstream's default for this controller, everything else off or unlimited.
    pub fn new(family: ApiFamily, workers: usize) -> Self {
        ControllerOptions {
            family,
            workers,
            decisions: DecisionLog::disabled(),
            budget: RequestBudget::unlimited(),
            max_retry_delay: DEFAULT_MAX_RETRY_DELAY,
            priorities: Priorities::default(),
            features: FeatureGates::default(),
            safeties: Safeties::all_on(),
        }
    }
}

/// What tells one controller apart when its core is built.
#[derive(Debug, Clone, Copy)]
pub struct ControllerKind {
    /// `replicaset`, `deployment`, `daemonset`: names its queue, logs and decisions.
    pub name: &'static str,
    /// The kind it manages.
    pub kind: WorkloadKind,
    /// The `reportingController` of its events, as upstream's.
    pub event_component: &'static str,
    /// With `Some(n)`, a key failing `n` syncs in a row is dropped until its next event (the Deployment
    /// controller's rule); otherwise failures are retried forever with backoff.
    pub max_retries: Option<usize>,
    /// The feature gate that switches its read-your-own-writes off (upstream's
    /// `StaleControllerConsistency<Kind>`); `None`: always on.
    pub consistency_gate: Option<Feature>,
}

/// The fields every controller instance has.
pub struct ControllerCore<K: Resource> {
    /// The settings it was built with.
    pub options: ControllerOptions,
    /// The controller instance, for logs, decisions and the live view.
    pub by: DecidedBy,
    /// The kind and API group of the objects it manages.
    pub resource: ApiResource,
    /// The controller's own (rate-limited) client. Writes go through [`ControllerCore::own_api`] and
    /// its siblings, which record them.
    client: Client,
    /// The objects it manages, as a cache and as the owners of their children.
    pub objects: Owners<K>,
    /// The work queue of its objects' keys, with per-key rate-limited retries.
    pub queue: WorkQueue<ObjectKey>,
    /// Read-your-own-writes: a key is synced only once the caches show this controller's last writes.
    pub consistency: ConsistencyStore,
    /// The status writes left to a sync already pending for the same key (`crate::api::status_writes`).
    pub status_writes: StatusWrites,
    /// Its event recorder, reporting as its `event_component` and drawing on `options.budget`.
    pub recorder: EventRecorder,
    /// Its kind's metrics, shared by its instances of both API families.
    pub metrics: ControllerMetrics,
    /// Sync counts, kept by the workers, for the live view.
    pub(crate) syncs: SyncStats,
    max_retries: Option<usize>,
}

impl<K> ControllerCore<K>
where
    K: Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
{
    /// The core of a controller of `what` over `objects` (an informer of the managed kind, in
    /// `options.family`), whose selector `selector_of` reads. The objects' cache is tracked for
    /// read-your-own-writes; a controller tracks the caches of the children it writes itself.
    pub fn new(
        what: ControllerKind,
        objects: Informer<K>,
        selector_of: fn(&K) -> &LabelSelector,
        client: Client,
        options: ControllerOptions,
        metrics: ControllerMetrics,
    ) -> Self {
        let family = options.family;
        let resource = what.kind.api_resource(family);
        let queue = WorkQueue::new(
            family.queue_name(what.name),
            controller_rate_limiter(options.max_retry_delay),
            metrics.queue.clone(),
        )
        .with_priorities(options.priorities);
        // Off by its feature gate (as upstream), or switched off by a learner (`--without
        // read-your-own-writes`): either way nothing is recorded and no sync is held back.
        let gated_off = what
            .consistency_gate
            .is_some_and(|gate| !options.features.enabled(gate));
        let consistency = if gated_off || !options.safeties.is_on(Safety::ReadYourOwnWrites) {
            ConsistencyStore::disabled()
        } else {
            ConsistencyStore::default()
        };
        consistency.track(&objects);
        ControllerCore {
            by: DecidedBy {
                controller: what.name,
                family: family.label(),
                kind: what.kind.kind(),
            },
            objects: Owners::new(objects, resource.clone(), selector_of)
                .with_safeties(&options.safeties),
            resource,
            recorder: EventRecorder::new(
                client.clone(),
                options.budget.clone(),
                what.event_component,
                metrics.events_dropped.clone(),
            ),
            client,
            status_writes: StatusWrites::new(queue.clone(), metrics.status_writes_deferred.clone()),
            queue,
            consistency,
            metrics,
            syncs: SyncStats::default(),
            max_retries: what.max_retries,
            options,
        }
    }

    /// Tracks the cache of a kind the controller writes besides its own objects (its children), for
    /// read-your-own-writes.
    pub fn track<C>(&self, children: &Informer<C>)
    where
        C: Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
    {
        self.consistency.track(children);
    }

    /// The API of its own objects, for the sync of `owner`: every write through it is recorded for that
    /// sync (`crate::api::tracked_api`).
    pub fn own_api(&self, owner: &ObjectKey) -> TrackedApi<K>
    where
        K: Resource<DynamicType = ApiResource, Scope = DynamicResourceScope>,
    {
        self.api_with(owner, &self.resource, self.by.kind)
    }

    /// The API of a kind with a static type (`Pod`, `ControllerRevision`, the pods' cached view), named
    /// `noun` in the decision log, for the sync of `owner` (see [`ControllerCore::own_api`]).
    pub fn api<C>(&self, owner: &ObjectKey, noun: &'static str) -> TrackedApi<C>
    where
        C: Resource<DynamicType = (), Scope = NamespaceResourceScope>
            + Clone
            + Debug
            + DeserializeOwned
            + 'static,
    {
        TrackedApi::namespaced(self.client.clone(), noun, owner, self.consistency.clone())
    }

    /// The API of a workload kind of either family (`dt`), named `noun` in the decision log, for the
    /// sync of `owner` (see [`ControllerCore::own_api`]).
    pub fn api_with<C>(
        &self,
        owner: &ObjectKey,
        dt: &C::DynamicType,
        noun: &'static str,
    ) -> TrackedApi<C>
    where
        C: Resource<Scope = DynamicResourceScope> + Clone + Debug + DeserializeOwned + 'static,
    {
        TrackedApi::namespaced_with(
            self.client.clone(),
            dt,
            noun,
            owner,
            self.consistency.clone(),
        )
    }

    /// The size of the first batch of pod creations (`crate::pods::slow_start`; all at once when a learner
    /// switched slow start off).
    pub fn initial_batch_size(&self) -> usize {
        slow_start::initial_batch_size(&self.options.safeties)
    }

    /// Queues the key of `object`, saying why (see `super::wake`).
    pub fn enqueue(&self, object: &K, why: Wake) {
        self.queue.add_woken(ObjectKey::of(object.meta()), why);
    }

    /// An event of one of the controller's own objects: every change (spec, status, even deletion) is
    /// worth a sync. An object deleted, or deleted and re-created under the same name between two events
    /// (its UID changed), is forgotten first: its read-your-own-writes records, and what `forget` drops
    /// (its expectations: a new object of that name must start clean).
    pub fn on_object(&self, change: &Change<K>, origin: Origin, forget: impl Fn(&ObjectKey)) {
        let kind = self.by.kind;
        let gone = |object: &K, why: Wake| {
            let key = ObjectKey::of(object.meta());
            self.consistency.clear(&key);
            forget(&key);
            self.queue.add_woken(key, why);
        };
        match change {
            Change::Added(object) => {
                self.enqueue(object, wake(origin, || wake::added(kind, object.meta())));
            }
            Change::Updated { old, new } => {
                let why = wake(origin, || wake::updated(kind, old.meta(), new.meta()));
                if old.meta().uid != new.meta().uid {
                    gone(old, why.clone());
                }
                self.enqueue(new, why);
            }
            Change::Deleted(object) => {
                gone(object, wake(origin, || wake::deleted(kind, object.meta())))
            }
        }
    }

    /// A pod of `owner` went from not Ready to Ready: sync `owner` again once the pod has been Ready for
    /// its `minReadySeconds` (plus `margin`), when it counts as available. Nothing without
    /// `minReadySeconds`: the pod is available as soon as it is Ready, and this event already woke the
    /// owner.
    pub fn recheck_when_available(
        &self,
        owner: &ObjectMeta,
        min_ready_seconds: Option<i32>,
        (old, new): (&CachedPod, &CachedPod),
        margin: Duration,
    ) {
        let min_ready = u64::try_from(min_ready_seconds.unwrap_or(0)).unwrap_or(0);
        if min_ready > 0 && !is_pod_ready(old) && is_pod_ready(new) {
            self.queue.add_after_woken(
                ObjectKey::of(owner),
                Duration::from_secs(min_ready).saturating_add(margin),
                Wake::fresh(super::wake::POD_BECOMES_AVAILABLE),
            );
        }
    }

    /// Queues the key of each of `objects` (the owners one child event concerns). `why` is put in words
    /// only if there is at least one, and only once.
    pub fn enqueue_all<'a>(
        &self,
        objects: impl IntoIterator<Item = &'a Arc<K>>,
        why: impl FnOnce() -> Wake,
    ) where
        K: 'a,
    {
        let mut objects = objects.into_iter().peekable();
        if objects.peek().is_none() {
            return;
        }
        let mut why = Some(why());
        while let Some(object) = objects.next() {
            // The last one takes the wake itself: no copy of its reason is made for nothing.
            let wake = if objects.peek().is_some() {
                why.clone()
            } else {
                why.take()
            };
            if let Some(wake) = wake {
                self.enqueue(object, wake);
            }
        }
    }
}

/// What a sync asks of the queue when it succeeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum Requeue {
    /// Nothing: the next event brings the key back.
    Never,
    /// Sync again after this long, because of what the `&'static str` says in a few words ("a pod
    /// becomes available (minReadySeconds)", "the progress deadline passes", "a failed pod's backoff
    /// ends"): the reason the next sync shows as what woke it. Zero means "soon, rate-limited", as
    /// upstream's requeue of a Deployment whose deadline has just passed.
    After(Duration, &'static str),
}

impl Requeue {
    /// The earlier of two requests (with its reason; the first on a tie).
    pub fn or_earlier(self, other: Requeue) -> Requeue {
        match (self, other) {
            (Requeue::After(a, why_a), Requeue::After(b, why_b)) => {
                if b < a {
                    Requeue::After(b, why_b)
                } else {
                    Requeue::After(a, why_a)
                }
            }
            (Requeue::Never, other) | (other, Requeue::Never) => other,
        }
    }

    /// `Some(delay)` as a request for `why`, `None` as none.
    pub fn after(delay: Option<Duration>, why: &'static str) -> Requeue {
        delay.map_or(Requeue::Never, |delay| Requeue::After(delay, why))
    }
}

/// A controller's algorithm, run by its [`ControllerCore`].
pub trait Reconcile: Send + Sync + Sized + 'static {
    /// The kind it manages.
    type Object: Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static;
    /// How its sync fails.
    type Error: SyncFailure + Send + 'static;

    /// One instance (for `options.family`) on the shared informers, with `client`, the controller's own
    /// rate-limited client for writes.
    fn new(
        informers: &SharedInformers,
        client: Client,
        options: ControllerOptions,
        metrics: ControllerMetrics,
    ) -> Self;

    /// Registers the informer event handlers that queue its keys (each keeps a handle on the instance).
    fn register_handlers(self: &Arc<Self>);

    /// Its [`ControllerCore`], which the workers, the prologue and the live view work from.
    fn core(&self) -> &ControllerCore<Self::Object>;

    /// One sync of one object that exists in the cache (the prologue has run).
    fn sync(
        &self,
        key: &ObjectKey,
        object: Arc<Self::Object>,
    ) -> impl Future<Output = Result<Requeue, Self::Error>> + Send;

    /// The object of `key` is gone: forget what the controller keeps about it besides the core's
    /// records (expectations, cached parsing).
    fn forget(&self, _key: &ObjectKey) {}

    /// The pod creations and deletions it still waits to observe, for the live view.
    fn expectations(&self) -> Option<ExpectationsSnapshot> {
        None
    }

    /// Work that runs beside the workers for as long as they run (e.g. a periodic clean-up).
    fn housekeeping(&self) -> impl Future<Output = ()> + Send {
        std::future::pending()
    }
}

/// Why a sync failed before or inside the controller's algorithm.
#[derive(Debug)]
pub enum SyncKeyError<E> {
    /// The caches have not yet observed this controller's own writes to the key's objects; the
    /// retry comes once they have (routine).
    StaleCache {
        /// The kind the controller manages (e.g. `ReplicaSet`), for the message.
        kind: &'static str,
    },
    /// The controller's sync failed.
    Failed(E),
}

impl<E: Display> Display for SyncKeyError<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SyncKeyError::StaleCache { kind } => write!(
                f,
                "the caches have not yet observed this {kind} controller's own writes"
            ),
            SyncKeyError::Failed(e) => e.fmt(f),
        }
    }
}

/// As the controller's error itself (its message, then its sources), so the chain is printed once.
impl<E: SyncFailure> std::error::Error for SyncKeyError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SyncKeyError::StaleCache { .. } => None,
            SyncKeyError::Failed(e) => e.source(),
        }
    }
}

impl<E: SyncFailure> SyncFailure for SyncKeyError<E> {
    fn routine(&self) -> Option<RoutineRetry> {
        match self {
            SyncKeyError::StaleCache { .. } => Some(RoutineRetry::StaleCache),
            SyncKeyError::Failed(e) => e.routine(),
        }
    }

    fn forgets_the_key(&self) -> bool {
        matches!(self, SyncKeyError::Failed(e) if e.forgets_the_key())
    }
}

/// One sync of `key`: the prologue (module header), then the controller's [`Reconcile::sync`].
pub async fn sync_key<R: Reconcile>(
    controller: &R,
    key: &ObjectKey,
) -> Result<Requeue, SyncKeyError<R::Error>> {
    let core = controller.core();
    if !core.consistency.is_ready(key) {
        core.metrics
            .stale_sync_skips
            .inc(&core.resource.group, &core.resource.plural);
        return Err(SyncKeyError::StaleCache { kind: core.by.kind });
    }
    let Some(object) = core.objects.get(key.namespace(), key.name()) else {
        tracing::debug!(
            kind = core.by.kind,
            "the object is gone; forgetting its records"
        );
        core.consistency.clear(key);
        core.status_writes.forget(key);
        controller.forget(key);
        return Ok(Requeue::Never);
    };
    controller
        .sync(key, object)
        .await
        .map_err(SyncKeyError::Failed)
}

/// How the manager builds one controller instance (for one API family) on the shared informers, with the
/// controller's own client: each controller crate exports one, `new_controller::<ItsController>`.
pub type NewController =
    fn(&SharedInformers, Client, ControllerOptions, ControllerMetrics) -> Arc<dyn Controller>;

/// One instance of `R` with its handlers registered, as the manager runs it. Call
/// [`SharedInformers::start`] afterwards.
pub fn new_controller<R: Reconcile>(
    informers: &SharedInformers,
    client: Client,
    options: ControllerOptions,
    metrics: ControllerMetrics,
) -> Arc<dyn Controller> {
    Arc::new(built::<R>(informers, client, options, metrics))
}

/// The bookkeeping a worker of `core`'s controller needs around each sync.
fn workers_of<K: Resource>(core: &ControllerCore<K>) -> Workers {
    Workers {
        by: core.by,
        queue: core.queue.clone(),
        count: core.options.workers,
        max_retries: core.max_retries,
        panics: core.metrics.sync_panics.clone(),
        stats: core.syncs.clone(),
        decisions: core.options.decisions.clone(),
    }
}

pub(super) fn built<R: Reconcile>(
    informers: &SharedInformers,
    client: Client,
    options: ControllerOptions,
    metrics: ControllerMetrics,
) -> Arc<R> {
    let controller = Arc::new(R::new(informers, client, options, metrics));
    controller.register_handlers();
    controller
}

/// Every [`Reconcile`], shared, runs as a [`Controller`] of the manager.
impl<R: Reconcile> Controller for Arc<R> {
    fn run(&self) -> BoxFuture<'static, ()> {
        let controller = Arc::clone(self);
        async move {
            let core = controller.core();
            tracing::info!(
                family = core.by.family,
                workers = core.options.workers,
                "starting the {} controller",
                core.by.kind
            );
            let workers = workers_of(core);
            let syncing = Arc::clone(&controller);
            let workers = run_workers(workers, move |key: ObjectKey| {
                let controller = Arc::clone(&syncing);
                async move { sync_key(controller.as_ref(), &key).await }
            });
            tokio::select! {
                () = workers => {}
                () = controller.housekeeping() => {}
            }
        }
        .boxed()
    }

    fn shut_down(&self) {
        self.core().queue.shut_down();
    }

    #[cfg(feature = "testing")]
    fn step(&self) -> BoxFuture<'static, Option<ObjectKey>> {
        let controller = Arc::clone(self);
        async move {
            let core = controller.core();
            if core.queue.is_empty() {
                return None;
            }
            let (key, woken) = core.queue.get_woken().await?;
            let workers = workers_of(core);
            let sync = |key: ObjectKey| {
                let controller = Arc::clone(&controller);
                async move { sync_key(controller.as_ref(), &key).await }
            };
            super::worker::work_on(&workers, key.clone(), woken, &sync).await;
            Some(key)
        }
        .boxed()
    }

    #[cfg(feature = "testing")]
    fn queued(&self) -> (usize, Option<std::time::Duration>) {
        let snapshot = self.core().queue.snapshot(1);
        let next = snapshot.waiting.first().map(|w| w.ready_in);
        (snapshot.queued_count, next)
    }

    fn inspect(&self) -> ControllerView {
        let core = self.core();
        ControllerView::new(
            core.by,
            core.options.workers,
            &core.queue,
            &core.syncs,
            self.expectations(),
        )
    }
}
