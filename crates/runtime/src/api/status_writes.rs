//! Status writes the next sync is about to supersede.
//!
//! What: when a sync has computed a changed status but its object's key is already pending in the work
//! queue again (an event for the object arrived while the sync ran), the sync leaves the write to that
//! next sync, at most once in a row per object.
//!
//! Why: the pending sync starts as soon as this one ends, sees a snapshot that includes the event, and
//! writes a status at least as new. Writing the older one first costs a request, a watch event for every
//! client watching the object, and tells nobody anything that lasts. Upstream gets the same saving by
//! accident whenever its workers fall behind (a key waiting in the queue takes in several events at
//! once); mini-kcm's workers keep up, so without this it wrote about a quarter more ReplicaSet status
//! updates than upstream while thousands of pods started (`docs/performance.md`).
//!
//! At most once in a row: under a steady stream of events the key is pending at almost every write, and
//! a status deferred every time would never be written (a Deployment rolling out waits for its
//! ReplicaSets' statuses). So a status is at most one sync late, never starved. A sync that finds its
//! object gone calls [`StatusWrites::forget`]. Each deferral is counted in
//! `<controller>_status_writes_deferred_total`.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};

use mini_kcm_workqueue::WorkQueue;

use crate::controller::key::ObjectKey;
use crate::observability::counter::{Counter, CounterSpec};

/// The counter of deferrals: `<subsystem>_status_writes_deferred_total` (`ControllerMetrics`).
pub(crate) const STATUS_WRITES_DEFERRED: CounterSpec = CounterSpec {
    name: "status_writes_deferred_total",
    help: "Number of changed statuses not written because an event had already queued the object's next sync, which writes a newer one.",
};

/// Decides, per object, whether a changed status is written now or left to the pending sync. Clones
/// share their state.
#[derive(Clone)]
pub struct StatusWrites {
    queue: WorkQueue<ObjectKey>,
    /// Objects whose last due status write was deferred: their next one is written whatever happens.
    deferred: Arc<Mutex<HashSet<ObjectKey>>>,
    /// `ControllerMetrics::status_writes_deferred`.
    counter: Counter,
}

impl StatusWrites {
    /// Decisions for the objects of `queue` (the controller's own queue: pending means "synced again
    /// next"), each deferral counted in `counter`.
    pub fn new(queue: WorkQueue<ObjectKey>, counter: Counter) -> Self {
        StatusWrites {
            queue,
            deferred: Arc::default(),
            counter,
        }
    }

    /// Whether the sync of `key` should skip the status write it is about to make. Call it only when a
    /// write is due (the status changed); a `true` is remembered, so the next call for `key` says `false`.
    pub fn defer(&self, key: &ObjectKey) -> bool {
        let mut deferred = self.deferred.lock().unwrap_or_else(PoisonError::into_inner);
        if deferred.remove(key) || !self.queue.is_pending(key) {
            return false;
        }
        deferred.insert(key.clone());
        self.counter.inc();
        tracing::debug!("status write left to the pending sync (an event arrived during this one)");
        true
    }

    /// Drops what is remembered about `key` (its object is gone).
    pub fn forget(&self, key: &ObjectKey) {
        self.deferred
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(key);
    }

    /// Objects whose next due status write will not be deferred.
    #[cfg(test)]
    fn deferred_count(&self) -> usize {
        self.deferred
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mini_kcm_workqueue::default_controller_rate_limiter;

    fn key(name: &str) -> ObjectKey {
        ObjectKey::new("default", name)
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_is_deferred_only_when_the_key_is_pending_and_never_twice_in_a_row() {
        let queue = WorkQueue::new("test", default_controller_rate_limiter(), None);
        let counter = Counter::unregistered();
        let writes = StatusWrites::new(queue.clone(), counter.clone());
        let a = key("a");

        queue.add(a.clone());
        let Some(taken) = queue.get().await else {
            panic!("the queue has the key")
        };
        assert!(
            !writes.defer(&a),
            "nothing arrived during the sync: write now"
        );

        queue.add(a.clone()); // an event during the sync
        assert!(
            writes.defer(&a),
            "the pending sync will write a newer status"
        );
        assert_eq!(writes.deferred_count(), 1);
        queue.done(&taken);

        let Some(taken) = queue.get().await else {
            panic!("the key was requeued")
        };
        queue.add(a.clone()); // events keep coming
        assert!(
            !writes.defer(&a),
            "deferred last time: written now even though the key is pending again"
        );
        assert!(
            writes.defer(&a),
            "after a write, a pending key may defer again"
        );
        queue.done(&taken);

        writes.forget(&a);
        assert_eq!(writes.deferred_count(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn objects_are_decided_independently() {
        let queue = WorkQueue::new("test", default_controller_rate_limiter(), None);
        let writes = StatusWrites::new(queue.clone(), Counter::unregistered());
        queue.add(key("a"));
        queue.add(key("b"));
        assert!(writes.defer(&key("a")));
        assert!(writes.defer(&key("b")), "a's deferral does not bind b");
        assert!(!writes.defer(&key("c")), "c is not pending");
    }
}
