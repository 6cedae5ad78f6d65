//! What a running controller shows about itself: its queue, its expectations, its sync counts, and the
//! informers it reads. The manager's live view (`/debug/controllers`) and `mini-kcm explain` render these
//! views; they are plain data (serde), taken at one moment and stale as soon as they are returned.
//!
//! Every list is capped at [`LIST_LIMIT`] entries with its full count beside it, so looking at a
//! controller with 10 000 queued keys costs the same as looking at an idle one.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use mini_kcm_workqueue::WorkQueue;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::controller::expectations::{EXPECTATIONS_TIMEOUT, ExpectationsSnapshot};
use crate::controller::key::ObjectKey;
use crate::observability::decisions::{DecidedBy, RoutineRetry};
use crate::switches::safeties::SwitchedOff;

/// Most entries of any list in a view.
pub const LIST_LIMIT: usize = 200;

/// Everything a manager shows at `/debug/controllers/state`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ManagerView {
    /// Every controller instance the manager runs (one per controller and API family).
    pub controllers: Vec<ControllerView>,
    /// Every shared informer the controllers read from.
    pub informers: Vec<InformerView>,
    /// Whether syncs file decisions (`--decision-log`).
    pub decision_log: bool,
    /// The safety mechanisms a learner switched off (`mini-kcm up --without`): the page's red banner.
    #[serde(default)]
    pub switched_off: Vec<SwitchedOff>,
    /// How late watch events reach the caches (`mini-kcm up --watch-delay`), in milliseconds; 0 normally.
    #[serde(default)]
    pub watch_delay_ms: u64,
}

/// One controller instance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ControllerView {
    /// `replicaset`, `deployment`, `daemonset`.
    pub controller: String,
    /// `apps` or `copies`.
    pub family: String,
    /// The kind it manages, e.g. `ReplicaSet`.
    pub kind: String,
    /// How many keys it syncs at once (`--concurrent-*-syncs`).
    pub workers: usize,
    /// Its work queue.
    pub queue: QueueView,
    /// Its sync counts.
    pub syncs: SyncView,
    /// Per key, the pod creations and deletions the controller still waits to observe (the Deployment
    /// controller keeps none: it waits on its ReplicaSets' status instead).
    pub expectations: Vec<ExpectationView>,
}

impl ControllerView {
    /// The view of the controller instance `by`, from its queue, sync counts and expectations.
    pub fn new(
        by: DecidedBy,
        workers: usize,
        queue: &WorkQueue<ObjectKey>,
        syncs: &SyncStats,
        expectations: Option<ExpectationsSnapshot>,
    ) -> Self {
        ControllerView {
            controller: by.controller.into(),
            family: by.family.into(),
            kind: by.kind.into(),
            workers,
            queue: QueueView::of(queue, syncs),
            syncs: syncs.view(),
            expectations: expectations.map(ExpectationView::list).unwrap_or_default(),
        }
    }
}

/// A work queue at one moment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueView {
    /// Keys ready for a worker, in the order they would be handed out, with their priority and why.
    pub queued: Vec<QueuedView>,
    /// All keys ready, including those beyond `queued`'s [`LIST_LIMIT`].
    pub queued_count: usize,
    /// Keys being synced now.
    pub in_flight: Vec<String>,
    /// All keys being synced, including those beyond `in_flight`'s [`LIST_LIMIT`].
    pub in_flight_count: usize,
    /// Keys waiting for a delay: a backoff after failures (`retries` > 0) or a requested recheck.
    pub waiting: Vec<WaitingView>,
    /// All waiting keys, including those beyond `waiting`'s [`LIST_LIMIT`].
    pub waiting_count: usize,
}

/// A key ready for a worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueuedView {
    /// The object's `namespace/name`.
    pub key: String,
    /// `fresh` (an event, a recheck, a retry) or `low` (only lists and resyncs queued it: it may wait
    /// behind fresh keys, within the queue's aging bound).
    pub priority: String,
    /// What queued it since its last sync (distinct reasons, first seen first).
    pub reasons: Vec<String>,
    /// Reasons beyond those, counted only.
    pub more: usize,
    /// How long it has been queued, since the first of those adds, in milliseconds.
    pub queued_for_ms: u64,
}

/// A key waiting for a delay before it is queued again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WaitingView {
    /// The object's `namespace/name`.
    pub key: String,
    /// Failures in a row the queue's rate limiter counts for it (0: a plain delay, not a backoff).
    pub retries: usize,
    /// How long until it is queued again, in milliseconds.
    pub next_attempt_in_ms: u64,
    /// In backoff (`retries` > 0) after a routine retry: why it is routine. `None` after a real
    /// failure (or for a recheck).
    #[serde(default)]
    pub routine: Option<RoutineRetry>,
}

impl QueueView {
    /// The queue at this moment; `syncs` says which keys in backoff last failed for a routine reason.
    pub(crate) fn of(queue: &WorkQueue<ObjectKey>, syncs: &SyncStats) -> Self {
        let snap = queue.snapshot(LIST_LIMIT);
        let keys = |keys: Vec<ObjectKey>| keys.iter().map(ToString::to_string).collect();
        QueueView {
            queued: snap
                .queued
                .into_iter()
                .map(|q| QueuedView {
                    key: q.key.to_string(),
                    priority: q.priority.as_str().into(),
                    reasons: q.reasons.into_iter().map(Cow::into_owned).collect(),
                    more: q.more,
                    queued_for_ms: millis(q.queued_for),
                })
                .collect(),
            queued_count: snap.queued_count,
            in_flight: keys(snap.processing),
            in_flight_count: snap.processing_count,
            waiting: snap
                .waiting
                .into_iter()
                .map(|w| WaitingView {
                    routine: if w.retries > 0 {
                        syncs.last_routine(&w.key)
                    } else {
                        None
                    },
                    key: w.key.to_string(),
                    retries: w.retries,
                    next_attempt_in_ms: millis(w.ready_in),
                })
                .collect(),
            waiting_count: snap.waiting_count,
        }
    }
}

/// The expectations of one key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExpectationView {
    /// The owner's `namespace/name`.
    pub key: String,
    /// Creations still to be observed (may be negative after over-observation).
    pub pending_adds: i64,
    /// Deletions still to be observed (may be negative after over-observation).
    pub pending_deletes: i64,
    /// Time since the expectations were set (adjustments do not reset it), in milliseconds.
    pub age_ms: u64,
    /// When the controller stops waiting anyway ([`EXPECTATIONS_TIMEOUT`]); 0 once expired.
    pub expires_in_ms: u64,
    /// Both counters are at or below zero: the next sync may act.
    pub satisfied: bool,
}

impl ExpectationView {
    pub(crate) fn list(snapshot: ExpectationsSnapshot) -> Vec<ExpectationView> {
        // The first LIST_LIMIT by key, not whichever the map yields first.
        let mut records = snapshot.records;
        records.sort_by(|a, b| a.0.cmp(&b.0));
        records
            .into_iter()
            .take(LIST_LIMIT)
            .map(|(key, counts, age)| ExpectationView {
                key: key.to_string(),
                pending_adds: counts.add,
                pending_deletes: counts.del,
                age_ms: millis(age),
                expires_in_ms: millis(EXPECTATIONS_TIMEOUT.saturating_sub(age)),
                satisfied: counts.add <= 0 && counts.del <= 0,
            })
            .collect()
    }
}

/// How many syncs a controller ran, and how they ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SyncView {
    /// Syncs finished since the controller started, however they ended.
    pub total: u64,
    /// Syncs that failed for a reason that is not routine (an error worth reading).
    pub failed: u64,
    /// Syncs that stopped for a routine reason and were retried (a write conflict, a stale cache):
    /// nothing is wrong. Not included in `failed`.
    #[serde(default)]
    pub routine_retries: u64,
    /// `routine_retries` by reason, every reason listed (with its count, possibly 0, and why it is
    /// routine).
    #[serde(default)]
    pub routine: Vec<RoutineCount>,
    /// Syncs that ended in the last 60 seconds (recent throughput).
    pub last_minute: u64,
}

/// Routine retries of one reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoutineCount {
    /// The reason counted.
    pub reason: RoutineRetry,
    /// Syncs retried for it since the controller started.
    pub count: u64,
    /// A few words for it (`write conflict`), for a reader.
    pub label: String,
    /// Why it is routine, for a reader ([`RoutineRetry::why`]).
    pub why: String,
}

/// An informer's cache.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InformerView {
    /// The kind it caches, e.g. `Pod`.
    pub kind: String,
    /// `<apiVersion>/<plural>`, e.g. `apps/v1/replicasets`.
    pub resource: String,
    /// Objects in the cache now.
    pub objects: usize,
    /// The newest resourceVersion the cache has seen (0 before the first list).
    pub last_resource_version: u64,
    /// Full lists so far: the first one, then one after every watch restart that needed a relist.
    pub lists: u64,
    /// How it lists: `streaming` (a watch's initial events, KEP-3157) or `paged` (the API server refused
    /// the stream).
    #[serde(default)]
    pub list_mode: String,
    /// `protobuf`, `json`, or `json (protobuf refused)`.
    pub content_type: String,
    /// Watch failures (each is retried with backoff).
    pub watch_errors: u64,
    /// Whether the first full list is in the cache.
    pub synced: bool,
}

/// Counts of a controller's syncs (kept by the worker loop).
#[derive(Debug, Clone, Default)]
pub struct SyncStats {
    inner: Arc<StatsInner>,
}

/// How one sync ended, as the sync counts tell it (decided by `crate::controller::worker`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SyncEnd {
    Done,
    /// A routine retry: counted apart from failures.
    Routine(RoutineRetry),
    Failed,
}

#[derive(Debug, Default)]
struct StatsInner {
    total: AtomicU64,
    failed: AtomicU64,
    /// Routine retries, per reason (in the order of [`RoutineRetry::ALL`]).
    routine: [AtomicU64; RoutineRetry::ALL.len()],
    /// Per key that failed its last sync: whether that was a routine retry. Cleared by a sync that
    /// succeeds, so it holds at most the keys failing now (or dropped by `max_retries` until their next
    /// sync).
    last_failure: Mutex<HashMap<ObjectKey, Option<RoutineRetry>>>,
    /// Syncs per second over the last minute: (second since `origin`, count), newest last.
    recent: Mutex<RecentSyncs>,
}

#[derive(Debug, Default)]
struct RecentSyncs {
    origin: Option<Instant>,
    seconds: std::collections::VecDeque<(u64, u64)>,
}

const WINDOW_SECONDS: u64 = 60;

impl SyncStats {
    /// Counts one finished sync of `key`.
    pub(crate) fn record(&self, key: &ObjectKey, end: SyncEnd) {
        self.inner.total.fetch_add(1, Ordering::Relaxed);
        let routine = match end {
            SyncEnd::Done => None,
            SyncEnd::Routine(reason) => Some(reason),
            SyncEnd::Failed => {
                self.inner.failed.fetch_add(1, Ordering::Relaxed);
                None
            }
        };
        if let Some(reason) = routine {
            self.inner.routine[reason as usize].fetch_add(1, Ordering::Relaxed);
        }
        {
            let mut last = self
                .inner
                .last_failure
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if end == SyncEnd::Done {
                last.remove(key);
            } else {
                last.insert(key.clone(), routine);
            }
        }
        let now = Instant::now();
        let mut recent = self
            .inner
            .recent
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let second = recent.second(now);
        match recent.seconds.back_mut() {
            Some((s, count)) if *s == second => *count += 1,
            _ => recent.seconds.push_back((second, 1)),
        }
        recent.trim(second);
    }

    pub(crate) fn view(&self) -> SyncView {
        let now = Instant::now();
        let mut recent = self
            .inner
            .recent
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let second = recent.second(now);
        recent.trim(second);
        let routine: Vec<RoutineCount> = RoutineRetry::ALL
            .iter()
            .map(|&reason| RoutineCount {
                reason,
                count: self.inner.routine[reason as usize].load(Ordering::Relaxed),
                label: reason.label().into(),
                why: reason.why().into(),
            })
            .collect();
        SyncView {
            total: self.inner.total.load(Ordering::Relaxed),
            failed: self.inner.failed.load(Ordering::Relaxed),
            routine_retries: routine.iter().map(|r| r.count).sum(),
            routine,
            last_minute: recent.seconds.iter().map(|(_, c)| c).sum(),
        }
    }

    /// Whether `key`'s last sync was a routine retry, and why (`None` if it succeeded or really failed).
    pub(crate) fn last_routine(&self, key: &ObjectKey) -> Option<RoutineRetry> {
        self.inner
            .last_failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(key)
            .copied()
            .flatten()
    }
}

impl RecentSyncs {
    fn second(&mut self, now: Instant) -> u64 {
        let origin = *self.origin.get_or_insert(now);
        now.saturating_duration_since(origin).as_secs()
    }

    /// Drops the seconds that left the window.
    fn trim(&mut self, second: u64) {
        while self
            .seconds
            .front()
            .is_some_and(|(s, _)| s + WINDOW_SECONDS <= second)
        {
            self.seconds.pop_front();
        }
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> ObjectKey {
        ObjectKey::new("ns", name)
    }

    #[tokio::test(start_paused = true)]
    async fn recent_throughput_counts_the_last_minute_only() {
        let stats = SyncStats::default();
        stats.record(&key("a"), SyncEnd::Done);
        stats.record(&key("a"), SyncEnd::Failed);
        tokio::time::advance(Duration::from_secs(30)).await;
        stats.record(&key("a"), SyncEnd::Done);
        let view = stats.view();
        assert_eq!(
            (
                view.total,
                view.failed,
                view.routine_retries,
                view.last_minute
            ),
            (3, 1, 0, 3)
        );
        tokio::time::advance(Duration::from_secs(31)).await;
        assert_eq!(stats.view().last_minute, 1);
        tokio::time::advance(Duration::from_secs(60)).await;
        assert_eq!(stats.view().last_minute, 0);
        assert_eq!(stats.view().total, 3);
    }

    #[tokio::test(start_paused = true)]
    async fn routine_retries_are_counted_apart_from_failures_by_reason() {
        let stats = SyncStats::default();
        stats.record(&key("a"), SyncEnd::Routine(RoutineRetry::Conflict));
        stats.record(&key("a"), SyncEnd::Routine(RoutineRetry::Conflict));
        stats.record(&key("b"), SyncEnd::Routine(RoutineRetry::StaleCache));
        stats.record(&key("c"), SyncEnd::Failed);
        stats.record(&key("d"), SyncEnd::Done);
        let view = stats.view();
        assert_eq!((view.total, view.failed, view.routine_retries), (5, 1, 3));
        let counts: Vec<(RoutineRetry, u64)> =
            view.routine.iter().map(|r| (r.reason, r.count)).collect();
        assert_eq!(
            counts,
            [(RoutineRetry::Conflict, 2), (RoutineRetry::StaleCache, 1)]
        );
        assert!(view.routine.iter().all(|r| !r.why.is_empty()));
        // The last failure of each key: routine for a and b, a real one for c, none for d.
        assert_eq!(stats.last_routine(&key("a")), Some(RoutineRetry::Conflict));
        assert_eq!(
            stats.last_routine(&key("b")),
            Some(RoutineRetry::StaleCache)
        );
        assert_eq!(stats.last_routine(&key("c")), None);
        assert_eq!(stats.last_routine(&key("d")), None);
        // A routine retry then a real failure: the key's backoff is a failure's now.
        stats.record(&key("a"), SyncEnd::Failed);
        assert_eq!(stats.last_routine(&key("a")), None);
        // A success forgets the key.
        stats.record(&key("b"), SyncEnd::Done);
        assert_eq!(stats.last_routine(&key("b")), None);
        assert_eq!(stats.inner.last_failure.lock().unwrap().len(), 2, "a and c");
    }

    #[tokio::test(start_paused = true)]
    async fn a_key_in_backoff_after_a_routine_retry_says_so() {
        let queue: WorkQueue<ObjectKey> = WorkQueue::new(
            "inspect",
            mini_kcm_workqueue::default_controller_rate_limiter(),
            None,
        );
        let stats = SyncStats::default();
        for (name, end) in [
            ("conflicted", SyncEnd::Routine(RoutineRetry::Conflict)),
            ("broken", SyncEnd::Failed),
        ] {
            queue.add(key(name));
            let k = queue.get().await.unwrap();
            stats.record(&k, end);
            queue.add_rate_limited(k.clone());
            queue.done(&k);
        }
        let view = QueueView::of(&queue, &stats);
        let routine = |name: &str| {
            let w = view.waiting.iter().find(|w| w.key == format!("ns/{name}"));
            let w = w.unwrap_or_else(|| panic!("{name} waits: {view:?}"));
            assert_eq!(w.retries, 1, "{w:?}");
            w.routine
        };
        assert_eq!(routine("conflicted"), Some(RoutineRetry::Conflict));
        assert_eq!(routine("broken"), None);
    }
}
