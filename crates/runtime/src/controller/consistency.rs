//! Read-your-own-writes protection (upstream's consistency store since 1.36, KEP-5647).
//!
//! A controller acts on its cache. Right after it created pods or wrote a status, the cache may not show
//! those writes yet, and a sync in that window would act twice (create more pods, or write a stale
//! status over a fresh one). Expectations cover pod counts; this covers everything else: for each owner,
//! remember the highest resourceVersion we wrote per kind, and skip the owner's sync (it is requeued by
//! the event that brings the write) until every involved informer has delivered that resourceVersion.

use std::any::TypeId;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kube::Resource;

use crate::controller::key::ObjectKey;
use crate::informers::Informer;

/// Upstream's `<controller>_stale_sync_skips_total{group, resource}`: syncs skipped because the caches
/// had not yet seen the controller's own writes.
#[derive(Clone)]
pub struct StaleSyncSkips(prometheus::IntCounterVec);

impl StaleSyncSkips {
    /// Registers the counter under `subsystem` (e.g. `replicaset_controller`).
    pub(crate) fn register(
        registry: &prometheus::Registry,
        subsystem: &str,
    ) -> Result<Self, prometheus::Error> {
        let counter = prometheus::IntCounterVec::new(
            prometheus::Opts::new(
                "stale_sync_skips_total",
                "Number of syncs skipped because the informer cache was older than the controller's own writes.",
            )
            .subsystem(subsystem),
            &["group", "resource"],
        )?;
        registry.register(Box::new(counter.clone()))?;
        Ok(StaleSyncSkips(counter))
    }

    /// A counter registered nowhere (unit tests).
    pub(crate) fn unregistered() -> Self {
        let counter = prometheus::IntCounterVec::new(
            prometheus::Opts::new("unregistered", "unregistered"),
            &["group", "resource"],
        )
        .unwrap_or_else(|_| unreachable!("static metric options are valid"));
        StaleSyncSkips(counter)
    }

    /// Counts one skipped sync of an object of `group`/`resource` (e.g. `apps`, `replicasets`).
    pub(crate) fn inc(&self, group: &str, resource: &str) {
        self.0.with_label_values(&[group, resource]).inc();
    }
}

/// Reads how far an informer's watch has got (see `Informer::observed_resource_version`).
pub(crate) type ObservedVersion = Arc<dyn Fn() -> u64 + Send + Sync>;

/// Per owner key, the resourceVersions written per kind that the caches must reach before a sync.
#[derive(Clone, Default)]
pub struct ConsistencyStore {
    inner: Arc<Mutex<Inner>>,
    /// Switched off by its feature gate: nothing is recorded, every sync runs at once (upstream then
    /// builds no store at all).
    off: bool,
}

#[derive(Default)]
struct Inner {
    /// Per written type (e.g. `Pod`, `ReplicaSetObject`), how far its informer has got.
    kinds: HashMap<TypeId, ObservedVersion>,
    writes: HashMap<ObjectKey, HashMap<TypeId, u64>>,
}

impl ConsistencyStore {
    /// A store that records nothing and never holds a sync back.
    pub fn disabled() -> Self {
        ConsistencyStore {
            off: true,
            ..Default::default()
        }
    }

    /// Declares `informer` as the cache that shows this controller's writes of `K`.
    pub fn track<K: Resource + Send + Sync + 'static>(&self, informer: &Informer<K>) {
        let informer = informer.clone();
        self.track_with::<K>(Arc::new(move || informer.observed_resource_version()));
    }

    /// Declares how far the cache of `K` has got (for tests: any function).
    pub(crate) fn track_with<K: 'static>(&self, observed: ObservedVersion) {
        self.lock().kinds.insert(TypeId::of::<K>(), observed);
    }

    /// Records that a write for `owner` produced `written` (its resourceVersion must become visible).
    pub fn record_write<K: Resource + 'static>(&self, owner: &ObjectKey, written: &K) {
        if self.off {
            return;
        }
        let Some(rv) = written
            .meta()
            .resource_version
            .as_deref()
            .and_then(|rv| rv.parse::<u64>().ok())
        else {
            return;
        };
        let mut inner = self.lock();
        let entry = inner
            .writes
            .entry(owner.clone())
            .or_default()
            .entry(TypeId::of::<K>())
            .or_default();
        *entry = (*entry).max(rv);
    }

    /// Whether every recorded write of `owner_key` is visible in the caches. Forgets the record once it
    /// is, so the common case costs one map lookup.
    pub fn is_ready(&self, owner: &ObjectKey) -> bool {
        let mut inner = self.lock();
        let Some(writes) = inner.writes.get(owner) else {
            return true;
        };
        let caught_up = writes.iter().all(|(kind, rv)| {
            inner
                .kinds
                .get(kind)
                .is_none_or(|observed| observed() >= *rv)
        });
        if caught_up {
            inner.writes.remove(owner);
        }
        caught_up
    }

    /// Drops the record (owner deleted or gone).
    pub fn clear(&self, owner: &ObjectKey) {
        self.lock().writes.remove(owner);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pods::cached::CachedPod;
    use k8s_openapi::api::apps::v1::ReplicaSet;
    use kube::api::ObjectMeta;
    use std::sync::atomic::{AtomicU64, Ordering};

    fn at<K: Resource + Default>(rv: &str) -> K {
        let mut object = K::default();
        *object.meta_mut() = ObjectMeta {
            resource_version: Some(rv.into()),
            ..Default::default()
        };
        object
    }

    #[test]
    fn sync_waits_until_every_written_version_is_observed() {
        let pods_seen = Arc::new(AtomicU64::new(10));
        let owners_seen = Arc::new(AtomicU64::new(10));
        let store = ConsistencyStore::default();
        let p = pods_seen.clone();
        store.track_with::<CachedPod>(Arc::new(move || p.load(Ordering::SeqCst)));
        let o = owners_seen.clone();
        store.track_with::<ReplicaSet>(Arc::new(move || o.load(Ordering::SeqCst)));
        let rs = ObjectKey::new("ns", "rs");

        assert!(store.is_ready(&rs), "nothing written yet");
        store.record_write(&rs, &at::<CachedPod>("15"));
        store.record_write(&rs, &at::<CachedPod>("12"));
        store.record_write(&rs, &at::<ReplicaSet>("16"));
        assert!(!store.is_ready(&rs));
        pods_seen.store(15, Ordering::SeqCst);
        assert!(!store.is_ready(&rs), "the status write is not visible yet");
        owners_seen.store(20, Ordering::SeqCst);
        assert!(store.is_ready(&rs));
        assert!(store.is_ready(&ObjectKey::new("other", "rs")));
        store.record_write(&rs, &at::<CachedPod>("99"));
        store.clear(&rs);
        assert!(store.is_ready(&rs));
    }

    #[test]
    fn a_disabled_store_never_holds_a_sync_back() {
        let store = ConsistencyStore::disabled();
        store.track_with::<CachedPod>(Arc::new(|| 1));
        let rs = ObjectKey::new("ns", "rs");
        store.record_write(&rs, &at::<CachedPod>("15"));
        assert!(store.is_ready(&rs));
    }
}
