//! Expectations: how many pod creations and deletions a controller is still waiting to *see* in its informer
//! after issuing them (upstream `ControllerExpectations` / `UIDTrackingControllerExpectations`).
//!
//! A controller that has just created 10 pods must not sync again before its cache shows them, or it would
//! create 10 more. So it records "expect 10 adds" per owner key (`namespace/name`); pod events lower the
//! counters; the owner syncs again only once both counters are ≤ 0 (they may go negative), no record exists, or
//! the record is older than [`EXPECTATIONS_TIMEOUT`] — the safety net for lost watch events.
//!
//! Timestamps use `tokio::time::Instant` so tests on a paused tokio clock can jump past the timeout.
//!
//! A learner may switch them off (`mini-kcm up --without expectations`, `crate::switches::safeties`): the counters
//! are still kept (the live view shows them), but [`ControllerExpectations::satisfied_expectations`]
//! always answers yes, so a sync acts on a cache that does not show its own creations yet.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use crate::controller::key::ObjectKey;
use crate::switches::safeties::{Safeties, Safety};

/// After this long unmet expectations are ignored and the owner syncs anyway (upstream `ExpectationsTimeout`).
pub(crate) const EXPECTATIONS_TIMEOUT: Duration = Duration::from_secs(5 * 60);

/// The counters still outstanding for one owner; either may be negative after over-observation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExpectedCounts {
    /// Pod creations not yet seen in the cache (upstream's `add`).
    pub add: i64,
    /// Pod deletions not yet seen in the cache (upstream's `del`).
    pub del: i64,
}

/// Why a sync waiting on `pending` (the owner's counts, if any) does nothing: the decision log's skip line.
pub fn waiting_reason(pending: Option<ExpectedCounts>) -> String {
    let (add, del) = pending.map_or((0, 0), |p| (p.add.max(0), p.del.max(0)));
    format!("expectations not satisfied, {add} creation(s) and {del} deletion(s) not yet observed")
}

/// Every owner's outstanding counts and how long ago they were set (see `crate::observability::inspect`).
#[derive(Debug, Clone, Default)]
pub struct ExpectationsSnapshot {
    /// Per owner key, its counts and the time since they were set, in no particular order.
    pub(crate) records: Vec<(ObjectKey, ExpectedCounts, Duration)>,
}

#[derive(Debug, Clone, Copy)]
struct Record {
    counts: ExpectedCounts,
    set_at: Instant,
}

impl Record {
    fn fulfilled(&self) -> bool {
        self.counts.add <= 0 && self.counts.del <= 0
    }

    fn expired(&self) -> bool {
        self.set_at.elapsed() > EXPECTATIONS_TIMEOUT
    }
}

/// Per-owner expected creations/deletions. Cloning shares the same table.
#[derive(Debug, Clone, Default)]
pub struct ControllerExpectations {
    records: Arc<Mutex<HashMap<ObjectKey, Record>>>,
    /// Switched off by a learner: kept, but never waited for.
    ignored: bool,
}

/// Counts arrive as `usize` from the callers' collections; saturate rather than wrap if one is ever absurd.
fn as_count(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The counters stay meaningful if another thread panicked while holding the lock, so poisoning is ignored.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl ControllerExpectations {
    /// An empty table whose expectations are waited for (the safety on).
    pub fn new() -> Self {
        Self::default()
    }

    /// Expectations as `safeties` say: waited for, unless switched off.
    pub fn honouring(safeties: &Safeties) -> Self {
        ControllerExpectations {
            ignored: !safeties.is_on(Safety::Expectations),
            ..Self::default()
        }
    }

    /// The outstanding counts for `key`, if a record exists (expired records are still returned).
    pub fn get(&self, key: &ObjectKey) -> Option<ExpectedCounts> {
        lock(&self.records).get(key).map(|r| r.counts)
    }

    /// Whether the owner may sync: no record, both counters ≤ 0, or the record has expired.
    /// Always true when switched off (module header).
    pub fn satisfied_expectations(&self, key: &ObjectKey) -> bool {
        if self.ignored {
            return true;
        }
        let records = lock(&self.records);
        let Some(record) = records.get(key) else {
            tracing::trace!(
                controller = %key,
                "no expectations recorded (or already deleted)"
            );
            return true;
        };
        if record.fulfilled() {
            tracing::trace!(
                controller = %key,
                add = record.counts.add,
                del = record.counts.del,
                "expectations fulfilled"
            );
            true
        } else if record.expired() {
            tracing::debug!(
                controller = %key,
                add = record.counts.add,
                del = record.counts.del,
                "expectations expired"
            );
            true
        } else {
            tracing::trace!(
                controller = %key,
                add = record.counts.add,
                del = record.counts.del,
                "still waiting on expectations"
            );
            false
        }
    }

    /// Replaces any record for `key` with these counts, stamped now.
    pub fn set_expectations(&self, key: &ObjectKey, add: usize, del: usize) {
        let counts = ExpectedCounts {
            add: as_count(add),
            del: as_count(del),
        };
        tracing::debug!(
            controller = %key,
            add = counts.add,
            del = counts.del,
            "setting expectations"
        );
        let record = Record {
            counts,
            set_at: Instant::now(),
        };
        lock(&self.records).insert(key.clone(), record);
    }

    /// Replaces any record for `key` with `adds` expected creations and no deletions, stamped now.
    pub fn expect_creations(&self, key: &ObjectKey, adds: usize) {
        self.set_expectations(key, adds, 0);
    }

    pub(crate) fn expect_deletions(&self, key: &ObjectKey, dels: usize) {
        self.set_expectations(key, 0, dels);
    }

    /// Lowers the counters of an existing record; without a record nothing happens. The timestamp is kept.
    pub fn lower_expectations(&self, key: &ObjectKey, add: usize, del: usize) {
        self.adjust(key, -as_count(add), -as_count(del), "lowered expectations");
    }

    #[cfg(test)]
    /// Raises the counters of an existing record; without a record nothing happens. The timestamp is kept.
    pub(crate) fn raise_expectations(&self, key: &ObjectKey, add: usize, del: usize) {
        self.adjust(key, as_count(add), as_count(del), "raised expectations");
    }

    /// One expected creation was seen (or will never happen because the create failed).
    pub fn creation_observed(&self, key: &ObjectKey) {
        self.lower_expectations(key, 1, 0);
    }

    /// One expected deletion was seen (or will never happen because the delete failed).
    pub fn deletion_observed(&self, key: &ObjectKey) {
        self.lower_expectations(key, 0, 1);
    }

    /// Forgets the owner (deleted, not found, or recreated under the same name).
    pub fn delete_expectations(&self, key: &ObjectKey) {
        lock(&self.records).remove(key);
    }

    /// Every record with its age, for people watching (the live view).
    pub fn snapshot(&self) -> ExpectationsSnapshot {
        ExpectationsSnapshot {
            records: lock(&self.records)
                .iter()
                .map(|(key, r)| (key.clone(), r.counts, r.set_at.elapsed()))
                .collect(),
        }
    }

    fn adjust(&self, key: &ObjectKey, add: i64, del: i64, what: &str) {
        let mut records = lock(&self.records);
        if let Some(record) = records.get_mut(key) {
            record.counts.add = record.counts.add.saturating_add(add);
            record.counts.del = record.counts.del.saturating_add(del);
            tracing::trace!(
                controller = %key,
                add = record.counts.add,
                del = record.counts.del,
                "{what}"
            );
        }
    }
}

/// [`ControllerExpectations`] that also remembers *which* pods (`namespace/name`) it expects to disappear, so a
/// pod counts once whether the controller first sees its deletionTimestamp being set or its final removal
/// (graceful deletion produces both). Used by the ReplicaSet controller. Cloning shares the same state.
#[derive(Debug, Clone, Default)]
pub struct UidTrackingExpectations {
    counts: ControllerExpectations,
    /// Lock order: this lock first, then the one inside `counts`.
    pending_deletions: Arc<Mutex<HashMap<ObjectKey, BTreeSet<ObjectKey>>>>,
}

impl UidTrackingExpectations {
    /// An empty table whose expectations are waited for (the safety on).
    pub fn new() -> Self {
        Self::default()
    }

    /// See [`ControllerExpectations::honouring`].
    pub fn honouring(safeties: &Safeties) -> Self {
        UidTrackingExpectations {
            counts: ControllerExpectations::honouring(safeties),
            ..Self::default()
        }
    }

    /// The outstanding counts for `key`, if a record exists (see [`ControllerExpectations::get`]).
    pub fn get(&self, key: &ObjectKey) -> Option<ExpectedCounts> {
        self.counts.get(key)
    }

    /// Whether the owner may sync (see [`ControllerExpectations::satisfied_expectations`]).
    pub fn satisfied_expectations(&self, key: &ObjectKey) -> bool {
        self.counts.satisfied_expectations(key)
    }

    /// Replaces the owner's counts with `adds` expected creations and no deletions; the pending pod set
    /// is left as it is.
    pub fn expect_creations(&self, key: &ObjectKey, adds: usize) {
        self.counts.expect_creations(key, adds);
    }

    /// One expected creation was seen (or will never happen because the create failed).
    pub fn creation_observed(&self, key: &ObjectKey) {
        self.counts.creation_observed(key);
    }

    #[cfg(test)]
    pub(crate) fn lower_expectations(&self, key: &ObjectKey, add: usize, del: usize) {
        self.counts.lower_expectations(key, add, del);
    }

    /// Records that the pods `pod_keys` are about to be deleted: replaces the owner's pending set and sets
    /// del = number of distinct keys (add = 0).
    pub fn expect_deletions(&self, key: &ObjectKey, pod_keys: Vec<ObjectKey>) {
        let expected: BTreeSet<ObjectKey> = pod_keys.into_iter().collect();
        tracing::debug!(controller = %key, pods = ?expected, "waiting on deletions");
        let mut pending = lock(&self.pending_deletions);
        if let Some(existing) = pending.get(key).filter(|set| !set.is_empty()) {
            // Syncs only delete once earlier expectations are met, so leftovers here point to a bookkeeping bug.
            tracing::error!(controller = %key, pods = ?existing, "clobbering existing expected deletions");
        }
        let count = expected.len();
        pending.insert(key.clone(), expected);
        self.counts.expect_deletions(key, count);
    }

    /// Counts the deletion of `pod_key` if (and only if) it is still pending for the owner.
    pub fn deletion_observed(&self, key: &ObjectKey, pod_key: &ObjectKey) {
        let mut pending = lock(&self.pending_deletions);
        if let Some(set) = pending.get_mut(key)
            && set.remove(pod_key)
        {
            tracing::trace!(
                controller = %key,
                pod = %pod_key,
                "observed expected deletion"
            );
            self.counts.deletion_observed(key);
        }
    }

    /// Forgets both the counters and the pending pod set of the owner.
    pub fn delete_expectations(&self, key: &ObjectKey) {
        let mut pending = lock(&self.pending_deletions);
        self.counts.delete_expectations(key);
        pending.remove(key);
    }

    /// See [`ControllerExpectations::snapshot`].
    pub fn snapshot(&self) -> ExpectationsSnapshot {
        self.counts.snapshot()
    }

    #[cfg(test)]
    /// A copy of the pod keys still expected to be deleted, if the owner has a pending set.
    pub(crate) fn get_uids(&self, key: &ObjectKey) -> Option<BTreeSet<ObjectKey>> {
        lock(&self.pending_deletions).get(key).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A key from upstream's `namespace/name` spelling.
    fn k(key: &str) -> ObjectKey {
        let (namespace, name) = key.split_once('/').unwrap();
        ObjectKey::new(namespace, name)
    }

    // Mirrors TestControllerExpectations; upstream's fake 30 s TTL store is our real EXPECTATIONS_TIMEOUT.
    #[tokio::test(start_paused = true)]
    async fn controller_expectations() {
        let e = ControllerExpectations::new();
        let key = &k("default/rc");
        let (adds, dels) = (10, 30);
        e.set_expectations(key, adds, dels);
        assert_eq!(e.get(key), Some(ExpectedCounts { add: 10, del: 30 }));

        // Concurrent observers, one more than expected.
        std::thread::scope(|s| {
            for _ in 0..adds + 1 {
                s.spawn(|| e.creation_observed(key));
            }
        });
        assert!(
            !e.satisfied_expectations(key),
            "deletions are still expected"
        );

        std::thread::scope(|s| {
            for _ in 0..dels + 1 {
                s.spawn(|| e.deletion_observed(key));
            }
        });

        // Expectations have been surpassed.
        assert_eq!(e.get(key), Some(ExpectedCounts { add: -1, del: -1 }));
        assert!(e.satisfied_expectations(key));

        // Old expectations are replaced, then expire.
        e.set_expectations(key, 1, 2);
        assert_eq!(e.get(key), Some(ExpectedCounts { add: 1, del: 2 }));
        assert!(!e.satisfied_expectations(key));
        tokio::time::advance(EXPECTATIONS_TIMEOUT - Duration::from_secs(1)).await;
        assert!(!e.satisfied_expectations(key), "not expired yet");
        tokio::time::advance(Duration::from_secs(2)).await;
        assert!(
            e.satisfied_expectations(key),
            "expectations should have expired"
        );
        // Expiry does not drop the record.
        assert_eq!(e.get(key), Some(ExpectedCounts { add: 1, del: 2 }));
    }

    #[tokio::test(start_paused = true)]
    async fn adjustments_keep_the_timestamp() {
        let e = ControllerExpectations::new();
        let key = &k("ns/rs");
        e.expect_creations(key, 3);
        assert_eq!(e.get(key), Some(ExpectedCounts { add: 3, del: 0 }));
        tokio::time::advance(EXPECTATIONS_TIMEOUT - Duration::from_secs(10)).await;
        e.raise_expectations(key, 2, 1);
        e.lower_expectations(key, 1, 0);
        assert_eq!(e.get(key), Some(ExpectedCounts { add: 4, del: 1 }));
        tokio::time::advance(Duration::from_secs(11)).await;
        assert!(
            e.satisfied_expectations(key),
            "raising must not extend the deadline"
        );

        e.expect_deletions(key, 2);
        assert_eq!(e.get(key), Some(ExpectedCounts { add: 0, del: 2 }));
        assert!(
            !e.satisfied_expectations(key),
            "setting restamps the record"
        );
        e.deletion_observed(key);
        e.deletion_observed(key);
        assert!(e.satisfied_expectations(key));
    }

    #[test]
    fn missing_records() {
        let e = ControllerExpectations::new();
        assert!(e.satisfied_expectations(&k("ns/none")));
        // Observations without a record do not create one.
        e.creation_observed(&k("ns/none"));
        e.deletion_observed(&k("ns/none"));
        e.raise_expectations(&k("ns/none"), 5, 5);
        assert_eq!(e.get(&k("ns/none")), None);
        assert!(e.satisfied_expectations(&k("ns/none")));

        e.expect_creations(&k("ns/a"), 1);
        let shared = e.clone();
        assert!(!shared.satisfied_expectations(&k("ns/a")));
        shared.delete_expectations(&k("ns/a"));
        assert_eq!(e.get(&k("ns/a")), None);
        assert!(e.satisfied_expectations(&k("ns/a")));
    }

    // Mirrors TestUIDExpectations.
    #[test]
    fn uid_expectations() {
        let uid_exp = UidTrackingExpectations::new();
        for replicas in [2, 1, 0, 5] {
            let key = ObjectKey::new("default", format!("rc-{replicas}"));
            let pod_keys: Vec<ObjectKey> = (0..5)
                .map(|i| ObjectKey::new("default", format!("pod{i}-rc-{replicas}")))
                .collect();
            uid_exp.expect_deletions(&key, pod_keys.clone());
            assert!(
                !uid_exp.satisfied_expectations(&key),
                "{key} satisfied before deletion"
            );

            for pod in &pod_keys {
                uid_exp.deletion_observed(&key, pod);
            }
            assert!(
                uid_exp.satisfied_expectations(&key),
                "{key} unsatisfied after deletion"
            );

            uid_exp.delete_expectations(&key);
            assert_eq!(uid_exp.get_uids(&key), None);
            assert_eq!(uid_exp.get(&key), None);
        }
    }

    #[test]
    fn uid_deletions_count_once() {
        let e = UidTrackingExpectations::new();
        let key = &k("ns/rs");
        e.expect_deletions(key, vec![k("ns/a"), k("ns/b"), k("ns/a")]);
        assert_eq!(
            e.get(key),
            Some(ExpectedCounts { add: 0, del: 2 }),
            "duplicate keys count once"
        );

        // deletionTimestamp update, then the final delete event: one decrement.
        e.deletion_observed(key, &k("ns/a"));
        e.deletion_observed(key, &k("ns/a"));
        assert_eq!(e.get(key), Some(ExpectedCounts { add: 0, del: 1 }));
        // A pod that was not expected does not count.
        e.deletion_observed(key, &k("ns/other"));
        e.deletion_observed(&k("ns/other-rs"), &k("ns/b"));
        assert_eq!(e.get(key), Some(ExpectedCounts { add: 0, del: 1 }));
        assert_eq!(e.get_uids(key), Some(BTreeSet::from([k("ns/b")])));
        assert!(!e.satisfied_expectations(key));

        // Clobbering replaces the pending set (and logs an error).
        e.expect_deletions(key, vec![k("ns/c")]);
        assert_eq!(e.get_uids(key), Some(BTreeSet::from([k("ns/c")])));
        e.deletion_observed(key, &k("ns/b"));
        assert_eq!(e.get(key), Some(ExpectedCounts { add: 0, del: 1 }));
        e.deletion_observed(key, &k("ns/c"));
        assert!(e.satisfied_expectations(key));

        // Creations go through the plain counters.
        e.expect_creations(key, 2);
        e.creation_observed(key);
        e.lower_expectations(key, 1, 0);
        assert!(e.satisfied_expectations(key));
    }
}
