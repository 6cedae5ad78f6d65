//! One kind's informer: list+watch into a cache, indexes, and change handlers.

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures::{Stream, StreamExt};
use kube::Resource;
use kube::runtime::watcher;
use serde::de::DeserializeOwned;

use crate::observability::inspect::InformerView;

use super::content_type::WireFormat;
use super::list_mode::ListMode;
use super::store::{CacheKey, IndexFn, Store, cache_key, key_of};

/// A change to one cached object, as handlers see it.
#[derive(Debug)]
pub enum Change<K> {
    /// An object the cache did not have: a watch event, or in a (re)list.
    Added(Arc<K>),
    /// An object the cache had: a watch event, a (re)list, or a resync (then `old` is `new`).
    Updated {
        /// The cached state it replaces.
        old: Arc<K>,
        /// The state now in the cache.
        new: Arc<K>,
    },
    /// The last state the informer knew. For an object that vanished while the watch was down, this is
    /// the state before the outage (client-go's `DeletedFinalStateUnknown`).
    Deleted(Arc<K>),
}

/// Where a change comes from. A handler passes it on with the keys it queues: a live watch event is
/// news, the rest re-deliver what the cache may already have shown (the queue hands those keys out
/// after fresh ones; see `crate::controller::wake`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// An event of the running watch: something just changed.
    Watch,
    /// The first full list, every object as `Added`.
    InitialList,
    /// A full list after the watch had to restart: what changed meanwhile, and every other object
    /// as an update to itself.
    Relist,
    /// The periodic resync: every cached object as an update to itself.
    Resync,
}

impl Origin {
    /// A few words for people: `"watch"`, `"initial list"`, `"relist"`, `"resync"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Watch => "watch",
            Origin::InitialList => "initial list",
            Origin::Relist => "relist",
            Origin::Resync => "resync",
        }
    }
}

type Handler<K> = Arc<dyn Fn(&Change<K>, Origin) + Send + Sync>;

/// A named secondary index of an informer.
pub struct Indexer<K> {
    pub(crate) name: &'static str,
    pub(crate) index_fn: IndexFn<K>,
}

impl<K> Indexer<K> {
    pub(crate) fn new(
        name: &'static str,
        f: impl Fn(&K) -> Vec<String> + Send + Sync + 'static,
    ) -> Self {
        Indexer {
            name,
            index_fn: Arc::new(f),
        }
    }
}

/// The index every informer has: objects by namespace (so "list a namespace" is not a full scan).
pub(crate) const NAMESPACE_INDEX: &str = "namespace";

/// One kind's shared cache. Cheap to clone; all clones share the cache, handlers and watch.
pub struct Informer<K: Resource> {
    inner: Arc<Inner<K>>,
}

impl<K: Resource> Clone for Informer<K> {
    fn clone(&self) -> Self {
        Informer {
            inner: self.inner.clone(),
        }
    }
}

/// A watch's events, as the informer runs on them.
pub(crate) type WatchEvents<K> =
    futures::stream::BoxStream<'static, Result<watcher::Event<K>, watcher::Error>>;

struct Inner<K: Resource> {
    /// The watch, until `run` takes it.
    events: Mutex<Option<WatchEvents<K>>>,
    kind: String,
    store: RwLock<Store<K>>,
    handlers: RwLock<Vec<Handler<K>>>,
    synced: tokio::sync::watch::Sender<bool>,
    /// The highest resourceVersion delivered by the watch so far: every write with a resourceVersion at or
    /// below it is reflected in the cache (a watch delivers events in resourceVersion order).
    observed_resource_version: AtomicU64,
    /// Full lists applied (the first, then one per relist after a watch restart), for the live view.
    lists: AtomicU64,
    /// Watch errors seen (each retried with backoff), for the live view.
    watch_errors: AtomicU64,
    /// How often every cached object is re-delivered to the handlers as an update with old == new
    /// (client-go's resync); `None` never.
    resync_period: Option<Duration>,
    /// What the cache keeps of each object (`Watched::cached`), applied before anything sees it.
    keep: fn(K) -> K,
    /// Whether its lists are streamed or paged, for the live view.
    list_mode: ListMode,
    /// Protobuf or JSON, for the live view.
    wire: WireFormat,
}

impl<K> Informer<K>
where
    K: Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
{
    pub(crate) fn new(
        events: WatchEvents<K>,
        kind: String,
        indexers: Vec<Indexer<K>>,
        resync_period: Option<Duration>,
        keep: fn(K) -> K,
        list_mode: ListMode,
        wire: WireFormat,
    ) -> Self {
        let mut index_fns: HashMap<&'static str, IndexFn<K>> =
            indexers.into_iter().map(|i| (i.name, i.index_fn)).collect();
        index_fns.insert(
            NAMESPACE_INDEX,
            Arc::new(|o: &K| o.meta().namespace.clone().into_iter().collect()),
        );
        let (synced, _) = tokio::sync::watch::channel(false);
        Informer {
            inner: Arc::new(Inner {
                events: Mutex::new(Some(events)),
                kind,
                store: RwLock::new(Store::new(index_fns)),
                handlers: RwLock::new(Vec::new()),
                synced,
                observed_resource_version: AtomicU64::new(0),
                lists: AtomicU64::new(0),
                watch_errors: AtomicU64::new(0),
                resync_period: resync_period.filter(|p| !p.is_zero()),
                keep,
                list_mode,
                wire,
            }),
        }
    }
}

impl<K: Resource> Informer<K> {
    /// Registers a change handler, told each change and where it comes from. Handlers run on the
    /// informer's task, after the cache is updated, so they must be quick (enqueue keys, update
    /// expectations). Register before the informer runs: a late handler does not see the objects
    /// listed before it was added.
    pub fn add_handler(&self, handler: impl Fn(&Change<K>, Origin) + Send + Sync + 'static) {
        if let Ok(mut handlers) = self.inner.handlers.write() {
            handlers.push(Arc::new(handler));
        }
    }

    /// Forgets every handler. The handlers hold their controllers, which hold this informer: a
    /// simulation that drops a process breaks that circle here, or each process would stay in memory.
    #[cfg(feature = "testing")]
    pub(crate) fn clear_handlers(&self) {
        if let Ok(mut handlers) = self.inner.handlers.write() {
            handlers.clear();
        }
    }

    /// Puts an object in the cache without a watch and without notifying handlers: for unit tests of
    /// controllers (client-go's fake informers do the same) and for tools that preload a cache.
    pub fn cache_insert(&self, object: K) {
        let object = (self.inner.keep)(object);
        self.observe(&object);
        let key = key_of(&object);
        self.write(|s| s.upsert(key, Arc::new(object)));
    }

    /// Takes an object out of the cache without a watch and without notifying handlers, as the watch's
    /// deletion event would (`object` carries the deletion's resourceVersion, which counts as observed):
    /// for unit tests, beside [`Informer::cache_insert`].
    pub fn cache_delete(&self, object: &K) {
        self.observe(object);
        let key = key_of(object);
        self.write(|s| s.remove(&key));
    }

    /// The kind this informer watches (for logs).
    pub(crate) fn kind(&self) -> &str {
        &self.inner.kind
    }

    /// The cached object `namespace/name`, if any (`namespace` empty for a cluster-scoped object).
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<K>> {
        self.get_by_key(&cache_key(namespace, name))
    }

    pub(crate) fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        self.read(|s| s.get(key))
    }

    /// Every cached object (a full scan: for startup and tests, not for syncs).
    pub fn list(&self) -> Vec<Arc<K>> {
        self.read(|s| s.values().cloned().collect())
    }

    pub(crate) fn list_namespace(&self, namespace: &str) -> Vec<Arc<K>> {
        self.by_index(NAMESPACE_INDEX, namespace)
    }

    /// Objects filed under `value` in the index `index`.
    pub fn by_index(&self, index: &str, value: &str) -> Vec<Arc<K>> {
        self.read(|s| {
            debug_assert!(s.has_index(index), "unknown index {index}");
            s.by_index(index, value)
        })
    }

    pub(crate) fn len(&self) -> usize {
        self.read(|s| s.len())
    }

    /// Whether the cache holds no object (as yet, or at all).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub(crate) fn has_synced(&self) -> bool {
        *self.inner.synced.borrow()
    }

    /// Waits until the first full list is in the cache.
    pub(crate) async fn wait_for_sync(&self) {
        let mut rx = self.inner.synced.subscribe();
        let _ = rx.wait_for(|synced| *synced).await;
    }

    /// See [`Inner::observed_resource_version`].
    pub(crate) fn observed_resource_version(&self) -> u64 {
        self.inner.observed_resource_version.load(Ordering::Acquire)
    }

    /// The cache at a glance (`crate::observability::inspect`); `resource` names it (`apps/v1/replicasets`).
    pub(crate) fn view(&self, resource: &str) -> InformerView {
        InformerView {
            kind: self.inner.kind.clone(),
            resource: resource.to_string(),
            objects: self.len(),
            last_resource_version: self.observed_resource_version(),
            lists: self.inner.lists.load(Ordering::Relaxed),
            list_mode: self.inner.list_mode.as_str().to_string(),
            content_type: self.inner.wire.as_str().to_string(),
            watch_errors: self.inner.watch_errors.load(Ordering::Relaxed),
            synced: self.has_synced(),
        }
    }

    fn read<T>(&self, f: impl FnOnce(&Store<K>) -> T) -> T {
        // A poisoned lock means a handler panicked mid-update; the data is still a valid map.
        let guard = self
            .inner
            .store
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&guard)
    }

    fn write<T>(&self, f: impl FnOnce(&mut Store<K>) -> T) -> T {
        let mut guard = self
            .inner
            .store
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut guard)
    }

    fn notify(&self, changes: &[Change<K>], origin: Origin) {
        let handlers: Vec<Handler<K>> = self
            .inner
            .handlers
            .read()
            .map(|h| h.clone())
            .unwrap_or_default();
        for change in changes {
            for handler in &handlers {
                handler(change, origin);
            }
        }
    }

    fn observe(&self, object: &K) {
        if let Some(rv) = resource_version(object) {
            self.inner
                .observed_resource_version
                .fetch_max(rv, Ordering::AcqRel);
        }
    }
}

impl<K> Informer<K>
where
    K: Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
{
    /// Lists and watches until the process ends (the watch restarts with backoff on errors), and every
    /// resync period re-delivers the whole cache as updates.
    pub(crate) async fn run(self) {
        let events = self
            .inner
            .events
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        match events {
            Some(events) => self.run_on(events).await,
            None => tracing::warn!(kind = %self.inner.kind, "informer already running"),
        }
    }

    /// The informer's loop over its watch's events (tests feed a channel instead of a watch, on paused
    /// time).
    ///
    /// The resync (client-go's `resyncPeriod`): once the cache has synced, every `resync_period` each
    /// cached object is handed to the handlers as `Updated { old, new }` with `old` and `new` the same
    /// object. It is what brings back keys a controller dropped (the Deployment controller gives up after
    /// 15 failures) with nobody touching the object; handlers that only care about real changes skip
    /// updates whose resourceVersion did not change, as upstream's do.
    async fn run_on<S>(&self, events: S)
    where
        S: Stream<Item = Result<watcher::Event<K>, watcher::Error>>,
    {
        let mut events = std::pin::pin!(events);
        let mut relist: Option<HashMap<CacheKey, Arc<K>>> = None;
        let period = self.inner.resync_period;
        // The resync clock starts when the first list is in; client-go's reflector also starts its
        // resync timer once it has listed.
        let mut next_resync: Option<tokio::time::Instant> = None;
        loop {
            let resync_due = async {
                match next_resync {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            let event = tokio::select! {
                event = events.next() => match event {
                    Some(event) => event,
                    None => return,
                },
                () = resync_due => {
                    let changes = self.resync();
                    tracing::debug!(kind = %self.inner.kind, objects = changes.len(), "resync");
                    self.notify(&changes, Origin::Resync);
                    next_resync = period.and_then(|p| tokio::time::Instant::now().checked_add(p));
                    continue;
                }
            };
            match event {
                Ok(event) => {
                    if self.apply(event, &mut relist) == Applied::FirstList {
                        next_resync =
                            period.and_then(|p| tokio::time::Instant::now().checked_add(p));
                    }
                }
                Err(e) => {
                    self.inner.watch_errors.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(kind = %self.inner.kind, error = %e, "watch failed; retrying with backoff");
                }
            }
        }
    }

    /// Applies one event of the watch to the cache and tells the handlers: a list is gathered in
    /// `relist` until its end, then swapped in whole.
    fn apply(
        &self,
        event: watcher::Event<K>,
        relist: &mut Option<HashMap<CacheKey, Arc<K>>>,
    ) -> Applied {
        match event {
            watcher::Event::Init => *relist = Some(HashMap::new()),
            watcher::Event::InitApply(object) => {
                // Observed only at `InitDone`, once the cache holds it: a controller must not take
                // its own write as visible while the cache still shows the old list.
                let key = key_of(&object);
                let object = self.unless_cached(&key, object);
                relist.get_or_insert_with(HashMap::new).insert(key, object);
            }
            watcher::Event::InitDone => {
                let listed = relist.take().unwrap_or_default();
                let newest = listed
                    .values()
                    .max_by_key(|o| resource_version(o.as_ref()))
                    .cloned();
                let changes = self.replace(listed);
                self.inner.lists.fetch_add(1, Ordering::Relaxed);
                if let Some(newest) = newest {
                    self.observe(newest.as_ref());
                }
                let first = !self.has_synced();
                let origin = if first {
                    tracing::info!(kind = %self.inner.kind, objects = self.len(),
                        list_mode = self.inner.list_mode.as_str(),
                        content_type = self.inner.wire.as_str(), "first list complete");
                    Origin::InitialList
                } else {
                    Origin::Relist
                };
                self.inner.synced.send_replace(true);
                self.notify(&changes, origin);
                if first {
                    return Applied::FirstList;
                }
            }
            watcher::Event::Apply(object) => {
                let object = Arc::new((self.inner.keep)(object));
                self.observe(&object);
                let key = key_of(object.as_ref());
                let change = match self.write(|s| s.upsert(key, object.clone())) {
                    Some(old) => Change::Updated { old, new: object },
                    None => Change::Added(object),
                };
                self.notify(&[change], Origin::Watch);
            }
            watcher::Event::Delete(object) => {
                self.observe(&object);
                let key = key_of(&object);
                let last = self
                    .write(|s| s.remove(&key))
                    .unwrap_or_else(|| Arc::new((self.inner.keep)(object)));
                self.notify(&[Change::Deleted(last)], Origin::Watch);
            }
        }
        Applied::Event
    }

    /// Applies `events` as if the watch had delivered them, handlers included, for a simulation that
    /// decides when each event arrives (a list is `Init`, `InitApply`..., `InitDone`).
    #[cfg(feature = "testing")]
    pub fn deliver(&self, events: Vec<watcher::Event<K>>) {
        let mut relist = None;
        for event in events {
            self.apply(event, &mut relist);
        }
    }

    /// The cached copy of a listed object when the cache holds the same version of it (the listed copy
    /// is dropped at once), else the listed one as the cache keeps it. A relist of a world that did not
    /// change then holds one copy of it, not two: the cache's and the list's (a resourceVersion names
    /// one state of one object, so equal versions are equal objects).
    fn unless_cached(&self, key: &str, listed: K) -> Arc<K> {
        let version = listed.meta().resource_version.as_deref();
        match self.read(|s| s.get(key)) {
            Some(cached)
                if version.is_some() && cached.meta().resource_version.as_deref() == version =>
            {
                cached
            }
            _ => Arc::new((self.inner.keep)(listed)),
        }
    }

    /// Every cached object as an update to itself (the resync's changes).
    fn resync(&self) -> Vec<Change<K>> {
        self.read(|s| {
            s.values()
                .map(|object| Change::Updated {
                    old: object.clone(),
                    new: object.clone(),
                })
                .collect()
        })
    }

    /// Swaps in a fresh list and returns the changes relative to the old cache: objects that disappeared
    /// while the watch was down are `Deleted`, new ones `Added`, and every other listed object is
    /// `Updated`, even when its resourceVersion did not change (client-go's relist delivers `OnUpdate` for
    /// every listed object it already knew; handlers skip equal resourceVersions where upstream's do).
    fn replace(&self, listed: HashMap<CacheKey, Arc<K>>) -> Vec<Change<K>> {
        self.write(|store| {
            let mut changes = Vec::new();
            let vanished: Vec<CacheKey> = store
                .keys()
                .filter(|k| !listed.contains_key(*k))
                .map(str::to_string)
                .collect();
            for key in vanished {
                if let Some(old) = store.remove(&key) {
                    changes.push(Change::Deleted(old));
                }
            }
            for (key, object) in listed {
                // The cached copy itself (`unless_cached`): nothing to re-index.
                if let Some(cached) = store.get(&key)
                    && Arc::ptr_eq(&cached, &object)
                {
                    changes.push(Change::Updated {
                        old: cached,
                        new: object,
                    });
                    continue;
                }
                match store.upsert(key, object.clone()) {
                    None => changes.push(Change::Added(object)),
                    Some(old) => changes.push(Change::Updated { old, new: object }),
                }
            }
            changes
        })
    }
}

/// What applying one event did, for the resync clock.
#[derive(Debug, PartialEq, Eq)]
enum Applied {
    /// The first full list is in: the resync clock starts.
    FirstList,
    /// Anything else.
    Event,
}

/// An object's resourceVersion as a number (the API server's are etcd revisions).
fn resource_version<K: Resource>(object: &K) -> Option<u64> {
    object.meta().resource_version.as_deref()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pods::cached::CachedPod;
    use kube::api::ObjectMeta;
    use std::sync::Mutex;

    fn pod(name: &str, rv: &str) -> Arc<CachedPod> {
        Arc::new(CachedPod {
            metadata: ObjectMeta {
                namespace: Some("ns".into()),
                name: Some(name.into()),
                resource_version: Some(rv.into()),
                ..Default::default()
            },
            ..Default::default()
        })
    }

    fn informer() -> Informer<CachedPod> {
        // A watch that never delivers: `replace` and handlers are tested without one.
        Informer::new(
            futures::stream::empty().boxed(),
            "Pod".into(),
            Vec::new(),
            None,
            CachedPod::trimmed,
            ListMode::default(),
            WireFormat::default(),
        )
    }

    fn describe(change: &Change<CachedPod>) -> String {
        match change {
            Change::Added(p) => format!("added {}", p.metadata.name.clone().unwrap()),
            Change::Updated { old, new } => format!(
                "updated {} {}->{}",
                new.metadata.name.clone().unwrap(),
                old.metadata.resource_version.clone().unwrap(),
                new.metadata.resource_version.clone().unwrap()
            ),
            Change::Deleted(p) => format!("deleted {}", p.metadata.name.clone().unwrap()),
        }
    }

    type EventSender =
        futures::channel::mpsc::UnboundedSender<Result<watcher::Event<CachedPod>, watcher::Error>>;

    /// An informer with `resync`, driven by events sent into the returned channel (no API server),
    /// recording what its handler sees.
    fn fed_informer(
        resync: Option<Duration>,
    ) -> (Informer<CachedPod>, EventSender, Arc<Mutex<Vec<String>>>) {
        let (informer, tx, log, _origins) = fed_informer_with_origins(resync);
        (informer, tx, log)
    }

    /// [`fed_informer`], also recording where each change came from.
    #[allow(clippy::type_complexity)]
    fn fed_informer_with_origins(
        resync: Option<Duration>,
    ) -> (
        Informer<CachedPod>,
        EventSender,
        Arc<Mutex<Vec<String>>>,
        Arc<Mutex<Vec<Origin>>>,
    ) {
        let (tx, rx) = futures::channel::mpsc::unbounded();
        let informer = Informer::new(
            rx.boxed(),
            "Pod".into(),
            Vec::new(),
            resync,
            CachedPod::trimmed,
            ListMode::default(),
            WireFormat::default(),
        );
        let log = Arc::new(Mutex::new(Vec::new()));
        let origins = Arc::new(Mutex::new(Vec::new()));
        let (sink, origin_sink) = (log.clone(), origins.clone());
        informer.add_handler(move |c: &Change<CachedPod>, origin| {
            sink.lock().unwrap().push(describe(c));
            origin_sink.lock().unwrap().push(origin);
        });
        let runner = informer.clone();
        tokio::spawn(runner.run());
        (informer, tx, log, origins)
    }

    fn list(tx: &EventSender, pods: &[(&str, &str)]) {
        tx.unbounded_send(Ok(watcher::Event::Init)).unwrap();
        for (name, rv) in pods {
            let pod = pod(name, rv).as_ref().clone();
            tx.unbounded_send(Ok(watcher::Event::InitApply(pod)))
                .unwrap();
        }
        tx.unbounded_send(Ok(watcher::Event::InitDone)).unwrap();
    }

    /// Lets the informer task handle what was sent (paused time: no timer fires meanwhile).
    async fn settle() {
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }

    fn take_sorted(log: &Arc<Mutex<Vec<String>>>) -> Vec<String> {
        let mut seen = std::mem::take(&mut *log.lock().unwrap());
        seen.sort();
        seen
    }

    #[tokio::test(start_paused = true)]
    async fn resync_delivers_every_cached_object_as_an_update_each_period() {
        let period = Duration::from_secs(60);
        let (informer, tx, log) = fed_informer(Some(period));
        list(&tx, &[("a", "1"), ("b", "2")]);
        settle().await;
        assert!(informer.has_synced());
        assert_eq!(take_sorted(&log), vec!["added a", "added b"]);

        // Nothing before the period is over.
        tokio::time::sleep(period - Duration::from_millis(1)).await;
        settle().await;
        assert!(take_sorted(&log).is_empty());

        tokio::time::sleep(Duration::from_millis(2)).await;
        settle().await;
        assert_eq!(take_sorted(&log), vec!["updated a 1->1", "updated b 2->2"]);

        // A watch event in between, then the next period: the resync shows the current cache.
        let pod_b = pod("b", "7").as_ref().clone();
        tx.unbounded_send(Ok(watcher::Event::Apply(pod_b))).unwrap();
        settle().await;
        assert_eq!(take_sorted(&log), vec!["updated b 2->7"]);
        tokio::time::sleep(period).await;
        settle().await;
        assert_eq!(take_sorted(&log), vec!["updated a 1->1", "updated b 7->7"]);
    }

    #[tokio::test(start_paused = true)]
    async fn no_resync_without_a_period() {
        let (_informer, tx, log) = fed_informer(None);
        list(&tx, &[("a", "1")]);
        settle().await;
        assert_eq!(take_sorted(&log), vec!["added a"]);
        tokio::time::sleep(Duration::from_secs(100 * 24 * 3600)).await;
        settle().await;
        assert!(take_sorted(&log).is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn relist_delivers_updates_for_unchanged_objects() {
        let (_informer, tx, log) = fed_informer(None);
        list(&tx, &[("a", "1"), ("b", "2"), ("c", "3")]);
        settle().await;
        take_sorted(&log);
        // The watch broke (e.g. 410) and the informer relisted: b changed, c is gone, a is the same.
        list(&tx, &[("a", "1"), ("b", "5")]);
        settle().await;
        assert_eq!(
            take_sorted(&log),
            vec!["deleted c", "updated a 1->1", "updated b 2->5"]
        );
    }

    /// A relist keeps the cached copy of every object whose resourceVersion did not change (so a relist
    /// of an unchanged world holds one copy of it) and takes the listed copy of the others.
    #[tokio::test(start_paused = true)]
    async fn a_relist_keeps_the_cached_copy_of_unchanged_objects() {
        let (informer, tx, log) = fed_informer(None);
        let same = Arc::new(Mutex::new(Vec::new()));
        let sink = same.clone();
        informer.add_handler(move |c: &Change<CachedPod>, origin| {
            if let (Change::Updated { old, new }, Origin::Relist) = (c, origin) {
                let name = new.metadata.name.clone().unwrap();
                sink.lock().unwrap().push((name, Arc::ptr_eq(old, new)));
            }
        });
        list(&tx, &[("a", "1"), ("b", "2")]);
        settle().await;
        let (a, b) = (
            informer.get("ns", "a").unwrap(),
            informer.get("ns", "b").unwrap(),
        );
        take_sorted(&log);

        list(&tx, &[("a", "1"), ("b", "5"), ("c", "6")]);
        settle().await;
        assert_eq!(
            take_sorted(&log),
            vec!["added c", "updated a 1->1", "updated b 2->5"],
            "the changes are reported as before"
        );
        assert!(Arc::ptr_eq(&informer.get("ns", "a").unwrap(), &a), "a kept");
        let new_b = informer.get("ns", "b").unwrap();
        assert!(!Arc::ptr_eq(&new_b, &b), "b replaced");
        assert_eq!(new_b.metadata.resource_version.as_deref(), Some("5"));
        let mut same = std::mem::take(&mut *same.lock().unwrap());
        same.sort();
        assert_eq!(same, [("a".to_string(), true), ("b".to_string(), false)]);
        // No copy of a beyond the cache's: its map and namespace index hold the one object, this test
        // the third reference.
        assert_eq!(Arc::strong_count(&a), 3);
        // The kept copy is still indexed.
        assert_eq!(informer.list_namespace("ns").len(), 3);
        assert_eq!(informer.observed_resource_version(), 6);
    }

    #[tokio::test]
    async fn relist_reports_adds_updates_and_vanished_objects() {
        let informer = informer();
        let first = informer.replace(HashMap::from([
            ("ns/a".to_string(), pod("a", "1")),
            ("ns/b".to_string(), pod("b", "2")),
        ]));
        assert_eq!(first.len(), 2);
        assert!(first.iter().all(|c| matches!(c, Change::Added(_))));

        // b was deleted and a updated while the watch was down; c is new; nothing about d.
        let second = informer.replace(HashMap::from([
            ("ns/a".to_string(), pod("a", "5")),
            ("ns/c".to_string(), pod("c", "6")),
        ]));
        let mut seen: Vec<String> = second.iter().map(describe).collect();
        seen.sort();
        assert_eq!(seen, vec!["added c", "deleted b", "updated a 1->5"]);
        assert_eq!(informer.list_namespace("ns").len(), 2);

        // An unchanged relist still reports every listed object as updated (old == new), as client-go.
        let third = informer.replace(HashMap::from([
            ("ns/a".to_string(), pod("a", "5")),
            ("ns/c".to_string(), pod("c", "6")),
        ]));
        let mut seen: Vec<String> = third.iter().map(describe).collect();
        seen.sort();
        assert_eq!(seen, vec!["updated a 5->5", "updated c 6->6"]);
    }

    /// A listed version counts as seen only once the cache holds the list, so a controller's
    /// read-your-own-writes check cannot pass while the cache still shows the previous state.
    #[tokio::test(start_paused = true)]
    async fn a_relist_is_observed_only_once_the_cache_holds_it() {
        let (informer, tx, _log) = fed_informer(None);
        list(&tx, &[("a", "5")]);
        settle().await;
        assert_eq!(informer.observed_resource_version(), 5);
        tx.unbounded_send(Ok(watcher::Event::Init)).unwrap();
        tx.unbounded_send(Ok(watcher::Event::InitApply(
            pod("b", "9").as_ref().clone(),
        )))
        .unwrap();
        settle().await;
        assert_eq!(
            informer.observed_resource_version(),
            5,
            "a list still arriving is not the cache"
        );
        assert!(informer.get("ns", "b").is_none());
        tx.unbounded_send(Ok(watcher::Event::InitDone)).unwrap();
        settle().await;
        assert_eq!(informer.observed_resource_version(), 9);
        assert!(informer.get("ns", "b").is_some());
    }

    #[tokio::test]
    async fn handlers_see_every_change_in_order() {
        let informer = informer();
        let log = Arc::new(Mutex::new(Vec::new()));
        let sink = log.clone();
        informer.add_handler(move |c: &Change<CachedPod>, _| {
            let tag = match c {
                Change::Added(_) => "add",
                Change::Updated { .. } => "update",
                Change::Deleted(_) => "delete",
            };
            sink.lock().unwrap().push(tag);
        });
        let changes = informer.replace(HashMap::from([("ns/a".to_string(), pod("a", "1"))]));
        informer.notify(&changes, Origin::InitialList);
        let changes = informer.replace(HashMap::new());
        informer.notify(&changes, Origin::Relist);
        assert_eq!(*log.lock().unwrap(), vec!["add", "delete"]);
        informer.observe(pod("a", "42").as_ref());
        informer.observe(pod("a", "7").as_ref());
        assert_eq!(informer.observed_resource_version(), 42);
    }

    #[tokio::test(start_paused = true)]
    async fn handlers_are_told_where_each_change_comes_from() {
        let period = Duration::from_secs(60);
        let (_informer, tx, log, origins) = fed_informer_with_origins(Some(period));
        let take = || std::mem::take(&mut *origins.lock().unwrap());
        list(&tx, &[("a", "1"), ("b", "2")]);
        settle().await;
        assert_eq!(take(), [Origin::InitialList, Origin::InitialList]);
        tx.unbounded_send(Ok(watcher::Event::Apply(pod("a", "3").as_ref().clone())))
            .unwrap();
        tx.unbounded_send(Ok(watcher::Event::Delete(pod("b", "4").as_ref().clone())))
            .unwrap();
        settle().await;
        assert_eq!(take(), [Origin::Watch, Origin::Watch]);
        // The watch restarted and listed again: a real change (c is new) is still a relist.
        list(&tx, &[("a", "3"), ("c", "5")]);
        settle().await;
        assert_eq!(take(), [Origin::Relist, Origin::Relist]);
        tokio::time::sleep(period + Duration::from_millis(1)).await;
        settle().await;
        assert_eq!(take(), [Origin::Resync, Origin::Resync]);
        assert_eq!(log.lock().unwrap().len(), 8);
    }
}
