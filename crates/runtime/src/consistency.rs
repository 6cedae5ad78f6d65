//! Read-your-own-writes protection (upstream 1.36's consistency store, KEP-5647).
//!
//! A controller acts on its cache. Right after it created pods or wrote a status, the cache may not show
//! those writes yet, and a sync in that window would act twice (create more pods, or write a stale
//! status over a fresh one). Expectations cover pod counts; this covers everything else: for each owner,
//! remember the highest resourceVersion we wrote per kind, and skip the owner's sync (it is requeued by
//! the event that brings the write) until every involved informer has delivered that resourceVersion.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Upstream's `<controller>_stale_sync_skips_total{group, resource}`: syncs skipped because the caches
/// had not yet seen the controller's own writes.
#[derive(Clone)]
pub struct StaleSyncSkips(prometheus::IntCounterVec);

impl StaleSyncSkips {
    /// Registers the counter under `subsystem` (e.g. `replicaset_controller`).
    pub fn register(
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
    pub fn unregistered() -> Self {
        let counter = prometheus::IntCounterVec::new(
            prometheus::Opts::new("unregistered", "unregistered"),
            &["group", "resource"],
        )
        .unwrap_or_else(|_| unreachable!("static metric options are valid"));
        StaleSyncSkips(counter)
    }

    pub fn inc(&self, group: &str, resource: &str) {
        self.0.with_label_values(&[group, resource]).inc();
    }
}

/// Reads how far an informer's watch has got (see `Informer::observed_resource_version`).
pub type ObservedVersion = Arc<dyn Fn() -> u64 + Send + Sync>;

/// Per owner key, the resourceVersions written per kind that the caches must reach before a sync.
#[derive(Clone, Default)]
pub struct ConsistencyStore {
    inner: Arc<Mutex<Inner>>,
}

#[derive(Default)]
struct Inner {
    kinds: HashMap<&'static str, ObservedVersion>,
    writes: HashMap<String, HashMap<&'static str, u64>>,
}

impl ConsistencyStore {
    /// Declares the informer that shows writes of `kind`.
    pub fn track_kind(&self, kind: &'static str, observed: ObservedVersion) {
        self.lock().kinds.insert(kind, observed);
    }

    /// Records that a write for `owner_key` produced `resource_version` of `kind`.
    pub fn record_write(
        &self,
        owner_key: &str,
        kind: &'static str,
        resource_version: Option<&str>,
    ) {
        let Some(rv) = resource_version.and_then(|rv| rv.parse::<u64>().ok()) else {
            return;
        };
        let mut inner = self.lock();
        let entry = inner
            .writes
            .entry(owner_key.to_string())
            .or_default()
            .entry(kind)
            .or_default();
        *entry = (*entry).max(rv);
    }

    /// Whether every recorded write of `owner_key` is visible in the caches. Forgets the record once it
    /// is, so the common case costs one map lookup.
    pub fn is_ready(&self, owner_key: &str) -> bool {
        let mut inner = self.lock();
        let Some(writes) = inner.writes.get(owner_key) else {
            return true;
        };
        let caught_up = writes.iter().all(|(kind, rv)| {
            inner
                .kinds
                .get(kind)
                .is_none_or(|observed| observed() >= *rv)
        });
        if caught_up {
            inner.writes.remove(owner_key);
        }
        caught_up
    }

    /// Drops the record (owner deleted or gone).
    pub fn clear(&self, owner_key: &str) {
        self.lock().writes.remove(owner_key);
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
    use std::sync::atomic::{AtomicU64, Ordering};

    #[test]
    fn sync_waits_until_every_written_version_is_observed() {
        let pods_seen = Arc::new(AtomicU64::new(10));
        let owners_seen = Arc::new(AtomicU64::new(10));
        let store = ConsistencyStore::default();
        let p = pods_seen.clone();
        store.track_kind("Pod", Arc::new(move || p.load(Ordering::SeqCst)));
        let o = owners_seen.clone();
        store.track_kind("ReplicaSet", Arc::new(move || o.load(Ordering::SeqCst)));

        assert!(store.is_ready("ns/rs"), "nothing written yet");
        store.record_write("ns/rs", "Pod", Some("15"));
        store.record_write("ns/rs", "Pod", Some("12"));
        store.record_write("ns/rs", "ReplicaSet", Some("16"));
        assert!(!store.is_ready("ns/rs"));
        pods_seen.store(15, Ordering::SeqCst);
        assert!(
            !store.is_ready("ns/rs"),
            "the status write is not visible yet"
        );
        owners_seen.store(20, Ordering::SeqCst);
        assert!(store.is_ready("ns/rs"));
        assert!(store.is_ready("other/rs"));
        store.record_write("ns/rs", "Pod", Some("99"));
        store.clear("ns/rs");
        assert!(store.is_ready("ns/rs"));
    }
}
