//! The registry that makes informers shared: one per (kind, scope).

use std::any::Any;
use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;

use crate::pods::cached::CachedPod;

use super::backoff::{RetryBudget, WatchBackoff, with_watch_backoff};
use super::list_mode::{ListMode, consistent_stream_client, list_and_watch};
use super::watch_delay::delayed;
use super::{Indexer, Informer};
use crate::inspect::InformerView;

/// A kind an informer can watch: how to build its `Api` for the whole cluster or one namespace (kube's
/// constructors differ between static and dynamic kinds), and what the cache keeps of an object. The
/// watch decodes the kind itself: pods are watched as `CachedPod`, whose decoding reads only the fields
/// the controllers read (`crate::pods::cached`).
pub trait Watched: Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static {
    fn scoped_api(
        client: Client,
        namespace: Option<&str>,
        dyntype: &Self::DynamicType,
    ) -> Api<Self>;

    /// What the cache keeps of a decoded object (from the watch, or put in the cache by hand). By
    /// default all of it but `managedFields`, which are large and which no controller reads.
    fn cached(mut self) -> Self {
        self.meta_mut().managed_fields = None;
        self
    }
}

macro_rules! watched_namespaced {
    ($($t:ty),*) => {$(
        impl Watched for $t {
            fn scoped_api(client: Client, namespace: Option<&str>, _: &()) -> Api<Self> {
                match namespace {
                    Some(ns) => Api::namespaced(client, ns),
                    None => Api::all(client),
                }
            }
        }
    )*};
}

watched_namespaced!(k8s_openapi::api::apps::v1::ControllerRevision);

impl Watched for CachedPod {
    fn scoped_api(client: Client, namespace: Option<&str>, _: &()) -> Api<Self> {
        match namespace {
            Some(ns) => Api::namespaced(client, ns),
            None => Api::all(client),
        }
    }

    fn cached(self) -> Self {
        self.trimmed()
    }
}

impl Watched for k8s_openapi::api::core::v1::Node {
    fn scoped_api(client: Client, _: Option<&str>, _: &()) -> Api<Self> {
        Api::all(client)
    }
}

impl<P, U> Watched for crate::object::Workload<P, U>
where
    P: Clone + Debug + DeserializeOwned + Send + Sync + 'static,
    U: Clone + Default + Debug + DeserializeOwned + Send + Sync + 'static,
{
    fn scoped_api(
        client: Client,
        namespace: Option<&str>,
        dyntype: &kube::discovery::ApiResource,
    ) -> Api<Self> {
        match namespace {
            Some(ns) => Api::namespaced_with(client, ns, dyntype),
            None => Api::all_with(client, dyntype),
        }
    }
}

/// Hands out one [`Informer`] per kind, so every controller asking for the same kind shares one watch and
/// one cache. Scope is the whole cluster, or one namespace (`--namespace`).
#[derive(Clone)]
pub struct SharedInformers {
    client: Client,
    /// `client`, asking for streamed lists as consistent reads (`list_mode`).
    stream_client: Client,
    namespace: Option<String>,
    /// The resync period of every informer of this factory (`None`: no resync).
    resync_period: Option<Duration>,
    /// Streamed lists first (`with_streamed_lists`).
    streamed_lists: bool,
    /// How late every watch event reaches the caches (`with_watch_delay`; zero but for learners).
    watch_delay: Duration,
    informers: Arc<Mutex<HashMap<String, Box<dyn Any + Send + Sync>>>>,
    /// How to view each informer (`crate::inspect`), in creation order.
    views: Arc<Mutex<Vec<InformerViewFn>>>,
    /// Watches of informers created since the last `start`.
    pending: Arc<Mutex<Vec<Pending>>>,
    /// The running watches; aborted when the last handle of this factory is dropped, so a stopped
    /// manager leaves no watch behind.
    running: Arc<Mutex<tokio::task::JoinSet<()>>>,
}

type InformerViewFn = Box<dyn Fn() -> InformerView + Send + Sync>;

/// An informer not yet running: its watch future and a way to wait for its first list.
struct Pending {
    kind: String,
    run: futures::future::BoxFuture<'static, ()>,
    synced: futures::future::BoxFuture<'static, ()>,
}

impl SharedInformers {
    pub fn new(client: Client, namespace: Option<String>) -> Self {
        SharedInformers {
            stream_client: consistent_stream_client(client.clone()),
            client,
            namespace,
            resync_period: None,
            streamed_lists: true,
            watch_delay: Duration::ZERO,
            informers: Arc::default(),
            views: Arc::default(),
            pending: Arc::default(),
            running: Arc::default(),
        }
    }

    /// Gives every informer of this factory a periodic resync, jittered as kube-controller-manager does:
    /// one period drawn once per factory, uniformly in `[min, 2 × min)` (its `ResyncPeriod` is called
    /// once per informer factory, so all informers of a factory share the draw). A zero `min` disables
    /// the resync. Call before requesting informers.
    pub fn with_min_resync_period(mut self, min: Duration) -> Self {
        self.resync_period = jittered_resync_period(min, rand::random::<f64>());
        self
    }

    /// Whether informers start with a streamed list (client-go's `WatchListClient` gate, on by
    /// default); off, every informer lists in pages, as against an API server that refuses streams.
    /// Call before requesting informers.
    pub fn with_streamed_lists(mut self, on: bool) -> Self {
        self.streamed_lists = on;
        self
    }

    /// Hands every watch event to the caches `delay` after it arrived (`super::watch_delay`): caches that
    /// lag on purpose, for learners (`mini-kcm up --watch-delay`) and tests. Call before requesting
    /// informers.
    pub fn with_watch_delay(mut self, delay: Duration) -> Self {
        self.watch_delay = delay;
        self
    }

    /// The informer for `K` (described by `dyntype`), created on first request with `indexers`. Later
    /// requests return the same informer; their indexers must be a subset of the first request's (the
    /// shared kinds' indexers are declared in one place, see `crate::kinds`).
    pub(crate) fn informer<K>(
        &self,
        dyntype: &K::DynamicType,
        indexers: impl FnOnce() -> Vec<Indexer<K>>,
    ) -> Informer<K>
    where
        K: Watched,
    {
        let id = format!("{}/{}", K::api_version(dyntype), K::plural(dyntype));
        let mut informers = self
            .informers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(existing) = informers
            .get(&id)
            .and_then(|b| b.downcast_ref::<Informer<K>>())
        {
            return existing.clone();
        }
        // Every list is a consistent read, streamed or paged (`list_mode`): served from the API server's
        // watch cache once it has caught up with etcd (KEP-3157/4988), as client-go's relist after a 410
        // is. A list answered at `resourceVersion=0` may come from a lagging cache and show the past,
        // which would turn objects created since then into deletions here.
        let mode = if self.streamed_lists {
            ListMode::default()
        } else {
            ListMode::paged()
        };
        let kind = K::kind(dyntype).into_owned();
        let events = list_and_watch(
            K::scoped_api(
                self.stream_client.clone(),
                self.namespace.as_deref(),
                dyntype,
            ),
            K::scoped_api(self.client.clone(), self.namespace.as_deref(), dyntype),
            kind.clone(),
            mode.clone(),
        );
        // The informer makes each decoded object what the cache keeps (`K::cached`). Failed requests are
        // retried within 2 s, and at once after a 410, under the process's retry budget (`backoff`).
        let events = with_watch_backoff(events, WatchBackoff::new(), RetryBudget::process());
        let events = delayed(events, self.watch_delay);
        let informer = Informer::new(
            events,
            kind,
            indexers(),
            self.resync_period,
            K::cached,
            mode,
        );
        let viewed = informer.clone();
        let resource = id.clone();
        self.views
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(Box::new(move || viewed.view(&resource)));
        informers.insert(id, Box::new(informer.clone()));
        let synced = informer.clone();
        self.pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(Pending {
                kind: informer.kind().to_string(),
                run: Box::pin(informer.clone().run()),
                synced: Box::pin(async move { synced.wait_for_sync().await }),
            });
        informer
    }

    /// Every informer's cache at a glance, in creation order.
    pub fn views(&self) -> Vec<InformerView> {
        self.views
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .map(|view| view())
            .collect()
    }

    /// Starts the watch of every informer created so far (call after all controllers registered their
    /// handlers) and waits until each has its first full list in the cache.
    pub async fn start(&self) {
        let pending: Vec<Pending> = std::mem::take(
            &mut *self
                .pending
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        let mut synced = Vec::new();
        {
            let mut running = self
                .running
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            for p in pending {
                tracing::debug!(kind = %p.kind, "starting informer");
                running.spawn(p.run);
                synced.push(p.synced);
            }
        }
        futures::future::join_all(synced).await;
    }
}

/// `min × (1 + unit)` for `unit` in `[0, 1)`; `None` for a zero `min`.
fn jittered_resync_period(min: Duration, unit: f64) -> Option<Duration> {
    if min.is_zero() {
        return None;
    }
    // Absurd flag values (beyond what a Duration holds) mean "never", not a panic.
    Duration::try_from_secs_f64(min.as_secs_f64() * (1.0 + unit.clamp(0.0, 1.0))).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resync_periods_are_jittered_between_min_and_twice_min() {
        let twelve_hours = Duration::from_secs(12 * 3600);
        assert_eq!(
            jittered_resync_period(twelve_hours, 0.0),
            Some(twelve_hours)
        );
        assert_eq!(
            jittered_resync_period(twelve_hours, 0.5),
            Some(Duration::from_secs(18 * 3600))
        );
        let near_max = jittered_resync_period(twelve_hours, 0.999_999).unwrap();
        assert!(near_max < 2 * twelve_hours && near_max > twelve_hours);
        assert_eq!(jittered_resync_period(Duration::ZERO, 0.3), None);
        assert_eq!(jittered_resync_period(Duration::MAX, 0.5), None);
    }
}
