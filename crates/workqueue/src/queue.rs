//! The work queue itself: client-go's `queue.go`, `delaying_queue.go` and
//! `rate_limiting_queue.go` folded into one type.
//!
//! Controllers put *keys* (e.g. `"ns/name"`) in the queue from informer event handlers and
//! have a few workers take them out and reconcile. The queue guarantees:
//!
//! * **No key is processed by two workers at once.** A key handed out by [`WorkQueue::get`]
//!   sits in the `processing` set until [`WorkQueue::done`]. Adding it meanwhile only marks it
//!   `dirty`; `done` then puts it back in the queue, so the change is not lost either.
//! * **Duplicates collapse.** A key already waiting in the queue is not queued twice, so a
//!   burst of events for one object costs one reconcile.
//! * **FIFO** among distinct keys, and delayed keys join the queue when their time comes.
//!   With priorities on (the default), FIFO holds within each priority: keys with a fresh add
//!   go before keys whose every add was low priority, until those age: aged low keys and fresh
//!   keys then alternate 1:1 (`ready.rs`).
//! * **What woke a sync is kept.** Each add may carry a [`Wake`]; the reasons and priority
//!   gathered since the key's last hand-out come out with it ([`WorkQueue::get_woken`]). Adds
//!   made while the key is processed belong to its next hand-out, like the key itself.
//!
//! A background task (one per queue) moves delayed keys into the queue when they become ready
//! and, when metrics are enabled, refreshes the unfinished-work gauges every 500 ms like
//! client-go's ticker goroutine, but only while keys are being processed (and once more after the
//! last, to show zero): client-go's ticker wakes an idle process twice a second per queue for gauges
//! that stay at zero, here an idle queue's task sleeps until there is work. It stops on shutdown or
//! when the last handle is dropped.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::fmt::Debug;
use std::hash::Hash;
use std::pin::pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::delaying::Waiting;
use crate::metrics::{Recorder, WorkQueueMetrics};
use crate::rate_limiter::RateLimiter;
use crate::ready::{Popped, Priorities, Ready};
use crate::wake::{Gathered, Incoming, Priority, Wake, Woken};

/// How often the unfinished-work gauges are recomputed (client-go's
/// `defaultUnfinishedWorkUpdatePeriod`).
const UNFINISHED_WORK_UPDATE_PERIOD: Duration = Duration::from_millis(500);

/// Upper bound on a delay, so "wait forever" (e.g. [`Duration::MAX`]) still yields a valid
/// `Instant`. Thirty years is forever for a controller.
const MAX_DELAY: Duration = Duration::from_secs(30 * 365 * 24 * 3600);

/// The reason of a plain [`WorkQueue::add`].
const REASON_ADDED: &str = "added";
/// The reason of [`WorkQueue::add_rate_limited`].
const REASON_RETRY: &str = "retry after a failed sync";

/// A rate-limited, delaying work queue with client-go semantics.
///
/// Cloning is cheap and every clone is the same queue, so hand clones to event handlers and
/// workers. Typical worker loop:
///
/// ```no_run
/// # async fn reconcile(_key: &str) -> Result<(), ()> { Ok(()) }
/// # async fn example(queue: mini_kcm_workqueue::WorkQueue<String>) {
/// while let Some(key) = queue.get().await {
///     match reconcile(&key).await {
///         Ok(()) => queue.forget(&key),
///         Err(()) => queue.add_rate_limited(key.clone()),
///     }
///     queue.done(&key);
/// }
/// # }
/// ```
pub struct WorkQueue<K> {
    inner: Arc<Inner<K>>,
}

impl<K> Clone for WorkQueue<K> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<K> Debug for WorkQueue<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkQueue")
            .field("name", &self.inner.name)
            .finish_non_exhaustive()
    }
}

struct Inner<K> {
    name: String,
    state: Mutex<State<K>>,
    /// Wakes workers parked in `get` (one per queued key; all of them at shutdown).
    item_ready: Notify,
    /// Wakes `shut_down_with_drain` when the last in-flight key is done.
    drained: Notify,
    /// Wakes the background task: earlier deadline, shutdown, or the queue was dropped. Held
    /// in its own `Arc` so the task can wait on it without keeping the queue alive.
    timer: Arc<Notify>,
    rate_limiter: Box<dyn RateLimiter<K>>,
}

impl<K> Drop for Inner<K> {
    fn drop(&mut self) {
        // Let the background task notice that nobody can use the queue any more.
        self.timer.notify_one();
    }
}

/// A moment's view of a queue (see [`WorkQueue::snapshot`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueSnapshot<K> {
    /// Keys ready to hand out, in the order they would go out if nothing changed.
    pub queued: Vec<QueuedKey<K>>,
    pub queued_count: usize,
    /// Keys a worker is syncing now.
    pub processing: Vec<K>,
    pub processing_count: usize,
    /// Keys waiting for a delay (a backoff after a failure, or a requested recheck), earliest first.
    pub waiting: Vec<WaitingKey<K>>,
    pub waiting_count: usize,
    pub shutting_down: bool,
}

/// A key ready to hand out (see [`QueueSnapshot::queued`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedKey<K> {
    pub key: K,
    pub priority: Priority,
    /// Why it was queued (see [`Woken::reasons`]).
    pub reasons: Vec<Cow<'static, str>>,
    /// Adds whose reason was not kept (see [`Woken::more`]).
    pub more: usize,
    /// Since its first add.
    pub queued_for: Duration,
}

/// A key waiting in the delaying part of the queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitingKey<K> {
    pub key: K,
    /// Failures the rate limiter counts for this key (0: a plain delay, not a backoff).
    pub retries: usize,
    /// How long until it is handed out again.
    pub ready_in: Duration,
}

struct State<K> {
    /// Keys ready to hand out, in order. Invariant: every key here is in `dirty` and not in
    /// `processing`, and appears only once.
    ready: Ready<K>,
    /// Keys that need processing: those in `ready` plus in-flight keys added again; with what
    /// their adds said since the last hand-out.
    dirty: HashMap<K, Dirty>,
    /// Keys handed to a worker and not yet `done`.
    processing: HashSet<K>,
    /// Keys added with a delay that has not elapsed yet.
    waiting: Waiting<K>,
    shutting_down: bool,
    /// A `shut_down_with_drain` is waiting; `shut_down` clears it to release the waiter.
    drain: bool,
    metrics: Option<Recorder<K>>,
    /// When the unfinished-work gauges are next recomputed (with metrics only): every period while
    /// keys are processing and once after; `None` while idle (see the module header).
    unfinished_tick: Option<Instant>,
}

/// What a dirty key has gathered until it is handed out.
struct Dirty {
    wakes: Gathered,
    /// The first add since the last hand-out ([`Woken::waited`] runs from here).
    since: Instant,
}

impl<K> WorkQueue<K>
where
    K: Clone + Eq + Hash + Send + Sync + Debug + 'static,
{
    /// Creates a queue. `name` labels its metrics (client-go uses the controller name, e.g.
    /// `"replicaset"`); `rate_limiter` drives [`add_rate_limited`](Self::add_rate_limited),
    /// usually [`default_controller_rate_limiter`](crate::default_controller_rate_limiter).
    ///
    /// Priorities are on with the default bound ([`Priorities::default`]); callers that only use
    /// the plain adds never queue a low key, so the queue is then client-go's FIFO.
    ///
    /// # Panics
    ///
    /// Must be called from within a Tokio runtime: it spawns the queue's timer task.
    pub fn new<R>(
        name: impl Into<String>,
        rate_limiter: R,
        metrics: Option<WorkQueueMetrics>,
    ) -> Self
    where
        R: RateLimiter<K> + 'static,
    {
        let name = name.into();
        let recorder = metrics.as_ref().map(|m| m.recorder(&name));
        let inner = Arc::new(Inner {
            name,
            state: Mutex::new(State {
                ready: Ready::new(Priorities::default()),
                dirty: HashMap::new(),
                processing: HashSet::new(),
                waiting: Waiting::default(),
                shutting_down: false,
                drain: false,
                metrics: recorder,
                unfinished_tick: None,
            }),
            item_ready: Notify::new(),
            drained: Notify::new(),
            timer: Arc::new(Notify::new()),
            rate_limiter: Box::new(rate_limiter),
        });
        tokio::spawn(timer_task(Arc::downgrade(&inner), Arc::clone(&inner.timer)));
        Self { inner }
    }

    /// Sets how keys are ordered by priority (see [`Priorities`]); meant right after
    /// [`new`](Self::new). Keys already queued keep their arrival order.
    ///
    /// ```no_run
    /// # use mini_kcm_workqueue::{Priorities, WorkQueue, default_controller_rate_limiter};
    /// # use std::time::Duration;
    /// # fn example() {
    /// let fifo = WorkQueue::<String>::new("rs", default_controller_rate_limiter(), None)
    ///     .with_priorities(Priorities::Off);
    /// let patient = WorkQueue::<String>::new("ds", default_controller_rate_limiter(), None)
    ///     .with_priorities(Priorities::On { max_low_wait: Duration::from_secs(30) });
    /// # }
    /// ```
    #[must_use]
    pub fn with_priorities(self, priorities: Priorities) -> Self {
        self.inner.lock().ready.set_mode(priorities);
        self
    }

    #[cfg(test)]
    /// The name given at construction (the metrics' `name` label).
    pub(crate) fn name(&self) -> &str {
        &self.inner.name
    }

    /// Marks `key` as needing processing. Ignored after shutdown; a no-op if the key is already
    /// queued; if the key is being processed it is re-queued when the worker calls `done`.
    ///
    /// The same as [`add_woken`](Self::add_woken) with [`Wake::fresh`]`("added")`.
    pub fn add(&self, key: K) {
        self.add_woken(key, Wake::fresh(REASON_ADDED));
    }

    /// [`add`](Self::add), saying why and how urgent. A fresh wake makes a queued low key fresh
    /// (it moves to the back of the fresh keys); a low wake never lowers a key.
    pub fn add_woken(&self, key: K, wake: Wake) {
        let now = Instant::now();
        let queued = self
            .inner
            .add_locked(&mut self.inner.lock(), key, Incoming::One(wake), now);
        if queued {
            self.inner.item_ready.notify_one();
        }
    }

    /// Adds `key` once `delay` has elapsed (immediately if `delay` is zero).
    ///
    /// If the key is already waiting, the earlier of the two ready times is kept. The same as
    /// [`add_after_woken`](Self::add_after_woken) with a fresh `"requeue after {delay:?}"`.
    pub fn add_after(&self, key: K, delay: Duration) {
        self.add_after_woken(key, delay, Wake::fresh(format!("requeue after {delay:?}")));
    }

    /// [`add_after`](Self::add_after), saying why and how urgent: when the delay ends the key is
    /// added with `wake`. Two delayed adds of one key that fire once bring both wakes.
    pub fn add_after_woken(&self, key: K, delay: Duration, wake: Wake) {
        let now = Instant::now();
        let mut guard = self.inner.lock();
        let state = &mut *guard;
        if state.shutting_down {
            return;
        }
        if let Some(m) = &state.metrics {
            m.retry();
        }
        if delay.is_zero() {
            let queued = self.inner.add_locked(state, key, Incoming::One(wake), now);
            drop(guard);
            if queued {
                self.inner.item_ready.notify_one();
            }
            return;
        }
        let Some(ready_at) = now.checked_add(delay.min(MAX_DELAY)) else {
            tracing::warn!(queue = %self.inner.name, ?key, ?delay, "delay out of range; key dropped");
            return;
        };
        let rearm = state.waiting.insert(key, ready_at, Gathered::new(wake));
        drop(guard);
        if rearm {
            self.inner.timer.notify_one();
        }
    }

    /// Adds `key` after the delay the rate limiter assigns (which also counts a failure), fresh,
    /// with the reason `"retry after a failed sync"`.
    pub fn add_rate_limited(&self, key: K) {
        self.add_rate_limited_woken(key, Wake::fresh(REASON_RETRY));
    }

    /// [`add_rate_limited`](Self::add_rate_limited), saying why (a requeue a sync asks for "now"
    /// goes through the rate limiter too, and is no failed sync).
    pub fn add_rate_limited_woken(&self, key: K, wake: Wake) {
        let delay = self.inner.rate_limiter.when(&key);
        self.add_after_woken(key, delay, wake);
    }

    /// Tells the rate limiter to stop tracking `key` (call after a successful sync). This
    /// does not remove the key from the queue, and `done` must still be called.
    pub fn forget(&self, key: &K) {
        self.inner.rate_limiter.forget(key);
    }

    /// How many times `key` has been rate-limited since it was last forgotten.
    pub fn num_requeues(&self, key: &K) -> usize {
        self.inner.rate_limiter.num_requeues(key)
    }

    /// Waits for a key to process. Returns `None` once the queue is shut down *and* empty, so
    /// workers finish the remaining keys before they stop. Call [`done`](Self::done) with every
    /// key returned.
    ///
    /// Cancel-safe: dropping the future never loses a key.
    pub async fn get(&self) -> Option<K> {
        self.get_woken().await.map(|(key, _)| key)
    }

    /// [`get`](Self::get), with what woke the key: the reasons and priority of the adds since it
    /// was last handed out, and how long it waited since the first of them.
    pub async fn get_woken(&self) -> Option<(K, Woken)> {
        let mut notified = pin!(self.inner.item_ready.notified());
        loop {
            // Registered before looking at the state, so an `add` in between still wakes us.
            notified.as_mut().enable();
            {
                let mut state = self.inner.lock();
                let now = Instant::now();
                if let Some(handed_out) = state.pop_for_processing(now) {
                    if state.metrics.is_some() && state.unfinished_tick.is_none() {
                        state.unfinished_tick = Some(now + UNFINISHED_WORK_UPDATE_PERIOD);
                        drop(state);
                        self.inner.timer.notify_one();
                    }
                    return Some(handed_out);
                }
                if state.shutting_down {
                    return None;
                }
            }
            notified.as_mut().await;
            notified.set(self.inner.item_ready.notified());
        }
    }

    /// Marks `key` as finished. If it was added again while being processed, it goes back in
    /// the queue now.
    ///
    /// Calling it for a key that is not being processed is a bug in the caller; it is logged
    /// and ignored (client-go would re-queue a duplicate).
    pub fn done(&self, key: &K) {
        let now = Instant::now();
        let mut guard = self.inner.lock();
        let state = &mut *guard;
        if !state.processing.remove(key) {
            drop(guard);
            tracing::warn!(queue = %self.inner.name, ?key, "done() for a key that is not being processed");
            return;
        }
        if let Some(m) = &mut state.metrics {
            m.done(key, now);
        }
        let requeued = match state.dirty.get(key) {
            Some(dirty) => {
                state.ready.push(key.clone(), dirty.wakes.priority(), now);
                true
            }
            None => false,
        };
        let idle = state.processing.is_empty();
        drop(guard);
        if requeued {
            self.inner.item_ready.notify_one();
        }
        if idle {
            self.inner.drained.notify_waiters();
        }
    }

    /// Whether a worker will be handed `key` again without any further `add`: it is queued, or it
    /// was added again while being processed (`done` queues it then). Keys waiting for a delay are
    /// not pending. For a worker holding `key` this answers "did an event arrive since I took it?".
    pub fn is_pending(&self, key: &K) -> bool {
        let state = self.inner.lock();
        !state.shutting_down && state.dirty.contains_key(key)
    }

    /// Number of keys ready to hand out (not counting in-flight or delayed keys). For
    /// information only: it can change as soon as it is returned.
    pub fn len(&self) -> usize {
        self.inner.lock().ready.len()
    }

    /// Whether no key is ready to hand out (see [`len`](Self::len)).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Stops accepting keys. Workers still receive the keys already queued, then `get`
    /// returns `None`. Delayed keys that are not ready yet are dropped. Idempotent; also
    /// releases a pending `shut_down_with_drain`.
    pub fn shut_down(&self) {
        self.inner.begin_shutdown(false);
    }

    #[cfg(test)]
    /// Like [`shut_down`](Self::shut_down), then waits until every in-flight key is `done`
    /// (client-go's `ShutDownWithDrain`). Keys still sitting in the queue are handed out to
    /// workers as usual but are not waited for. Never completes if a worker never calls `done`,
    /// unless `shut_down` is called.
    pub(crate) async fn shut_down_with_drain(&self) {
        self.inner.begin_shutdown(true);
        let mut notified = pin!(self.inner.drained.notified());
        loop {
            notified.as_mut().enable();
            {
                let state = self.inner.lock();
                if state.processing.is_empty() || !state.drain {
                    return;
                }
            }
            notified.as_mut().await;
            notified.set(self.inner.drained.notified());
        }
    }

    /// What the queue holds right now, for people watching it (the manager's live view): at most
    /// `limit` keys of each list, with the full counts. Taken under the queue's lock in one go, so the
    /// lists are consistent with each other; it is stale as soon as it returns.
    pub fn snapshot(&self, limit: usize) -> QueueSnapshot<K> {
        let now = Instant::now();
        let state = self.inner.lock();
        let (earliest, waiting_count) = state.waiting.earliest(limit);
        let waiting = earliest
            .into_iter()
            .map(|(key, ready_at)| WaitingKey {
                retries: self.inner.rate_limiter.num_requeues(&key),
                ready_in: ready_at.saturating_duration_since(now),
                key,
            })
            .collect();
        let queued = state
            .ready
            .ordered(now, limit)
            .into_iter()
            .map(|(key, priority)| {
                let dirty = state.dirty.get(key);
                let (reasons, more) = dirty.map_or((&[][..], 0), |d| d.wakes.reasons());
                QueuedKey {
                    key: key.clone(),
                    priority,
                    reasons: reasons.to_vec(),
                    more,
                    queued_for: dirty
                        .map_or(Duration::ZERO, |d| now.saturating_duration_since(d.since)),
                }
            })
            .collect();
        QueueSnapshot {
            queued,
            queued_count: state.ready.len(),
            processing: state.processing.iter().take(limit).cloned().collect(),
            processing_count: state.processing.len(),
            waiting,
            waiting_count,
            shutting_down: state.shutting_down,
        }
    }

    #[cfg(test)]
    /// Whether a shutdown has been requested.
    pub(crate) fn shutting_down(&self) -> bool {
        self.inner.lock().shutting_down
    }

    #[cfg(test)]
    fn waiting_ready_at(&self, key: &K) -> Option<Instant> {
        self.inner.lock().waiting.ready_at(key)
    }
}

impl<K> Inner<K> {
    fn lock(&self) -> MutexGuard<'_, State<K>> {
        // No critical section can panic half-way through an update, so the data is consistent
        // even if the lock was poisoned.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<K: Clone + Eq + Hash> Inner<K> {
    /// The heart of `add`. Returns true if the key entered `ready` (a worker should be woken).
    fn add_locked(&self, state: &mut State<K>, key: K, incoming: Incoming, now: Instant) -> bool {
        if state.shutting_down {
            return false;
        }
        if let Some(dirty) = state.dirty.get_mut(&key) {
            // Already due for a sync: this add only adds its reason, and maybe urgency.
            if incoming.fold_into(&mut dirty.wakes) {
                if let Some(m) = &state.metrics {
                    m.upgrade();
                }
                state.ready.upgrade(&key, now); // a no-op while the key is processed
            }
            return false;
        }
        let priority = incoming.priority();
        if let Some(m) = &mut state.metrics {
            m.add(&key, priority, now);
        }
        let dirty = Dirty {
            wakes: incoming.into_gathered(),
            since: now,
        };
        state.dirty.insert(key.clone(), dirty);
        if state.processing.contains(&key) {
            // `done` will queue it; queueing now would let a second worker take it.
            return false;
        }
        state.ready.push(key, priority, now);
        true
    }

    fn begin_shutdown(&self, drain: bool) {
        {
            let mut state = self.lock();
            state.shutting_down = true;
            state.drain = drain;
            state.waiting.clear();
        }
        tracing::debug!(queue = %self.name, drain, "work queue shutting down");
        self.item_ready.notify_waiters();
        self.drained.notify_waiters();
        self.timer.notify_one();
    }

    /// One round of the background task: move due delayed keys into the queue and refresh the
    /// gauges if their tick is due. Returns the next deadline, or `None` once shut down.
    fn on_timer(&self) -> Option<Option<Instant>> {
        let now = Instant::now();
        let mut queued = 0;
        let (next_ready, next_tick) = {
            let mut guard = self.lock();
            let state = &mut *guard;
            if state.shutting_down {
                return None;
            }
            while let Some((key, wakes)) = state.waiting.pop_ready(now) {
                if self.add_locked(state, key, Incoming::Many(wakes), now) {
                    queued += 1;
                }
            }
            if let (Some(tick), Some(m)) = (state.unfinished_tick, &state.metrics)
                && tick <= now
            {
                m.update_unfinished_work(now);
                state.unfinished_tick =
                    (!state.processing.is_empty()).then(|| now + UNFINISHED_WORK_UPDATE_PERIOD);
            }
            (state.waiting.next_ready_at(), state.unfinished_tick)
        };
        for _ in 0..queued {
            self.item_ready.notify_one();
        }
        Some(match (next_ready, next_tick) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        })
    }
}

impl<K: Clone + Eq + Hash> State<K> {
    /// Moves the next ready key to `processing` and returns it with what woke it.
    fn pop_for_processing(&mut self, now: Instant) -> Option<(K, Woken)> {
        let Popped {
            key,
            priority,
            promoted,
        } = self.ready.pop(now)?;
        if let Some(m) = &mut self.metrics {
            m.get(&key, priority, promoted, now);
        }
        let woken = match self.dirty.remove(&key) {
            Some(dirty) => dirty
                .wakes
                .into_woken(now.saturating_duration_since(dirty.since)),
            // Unreachable by the invariant on `ready`; an empty answer beats a panic.
            None => Woken {
                reasons: Vec::new(),
                more: 0,
                priority,
                waited: Duration::ZERO,
            },
        };
        self.processing.insert(key.clone());
        Some((key, woken))
    }
}

/// The per-queue background task. Holds only a weak reference so dropping every handle ends it.
async fn timer_task<K: Clone + Eq + Hash>(queue: Weak<Inner<K>>, wake: Arc<Notify>) {
    loop {
        // Created before the state is read; a `notify_one` from here on leaves a permit.
        let woken = wake.notified();
        let Some(deadline) = queue.upgrade().and_then(|q| q.on_timer()) else {
            return;
        };
        match deadline {
            Some(at) => {
                // Either outcome (deadline reached or woken early) means "look again".
                let _ = tokio::time::timeout_at(at, woken).await;
            }
            None => woken.await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::test_support::{sample, sample_with};
    use crate::rate_limiter::{ItemExponentialFailureRateLimiter, default_controller_rate_limiter};
    use prometheus::Registry;
    use std::collections::HashMap;
    use std::sync::atomic::{AtomicBool, Ordering};

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn queue<K>() -> WorkQueue<K>
    where
        K: Clone + Eq + Hash + Send + Sync + Debug + 'static,
    {
        WorkQueue::new("test", default_controller_rate_limiter(), None)
    }

    /// Lets spawned tasks run without moving the (paused) clock.
    async fn settle() {
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn basic_add_get_done() {
        let q = queue::<&str>();
        q.add("foo");
        q.add("bar");
        q.add("foo"); // already queued: collapses
        assert_eq!(q.len(), 2);
        assert_eq!(q.get().await, Some("foo"));
        assert_eq!(q.get().await, Some("bar"));
        assert!(q.is_empty());
        q.done(&"foo");
        q.done(&"bar");
        assert!(q.is_empty());
        assert!(!q.shutting_down());
        assert_eq!(q.name(), "test");
    }

    #[tokio::test(start_paused = true)]
    async fn a_key_is_pending_while_queued_or_added_again_during_processing() {
        let q = queue::<&str>();
        assert!(!q.is_pending(&"a"), "never added");
        q.add("a");
        assert!(q.is_pending(&"a"), "queued");
        assert_eq!(q.get().await, Some("a"));
        assert!(!q.is_pending(&"a"), "handed out, nothing new since");
        q.add("a");
        assert!(q.is_pending(&"a"), "added again while processing");
        q.done(&"a");
        assert!(q.is_pending(&"a"), "back in the queue");
        assert_eq!(q.get().await, Some("a"));
        q.add_after("a", ms(100));
        assert!(
            !q.is_pending(&"a"),
            "a delayed add is not pending until its time"
        );
        q.add("a");
        q.shut_down();
        assert!(
            !q.is_pending(&"a"),
            "nothing is promised once the queue shuts down"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_snapshot_shows_queued_processing_and_backing_off_keys() {
        let q = queue::<&str>();
        q.add("a");
        q.add("b");
        q.add("c");
        assert_eq!(q.get().await, Some("a"));
        q.add_rate_limited("d"); // first failure: 5 ms
        q.add_rate_limited("d"); // second: 10 ms, but the earlier ready time stays
        q.add_after("e", ms(2000));
        let keys = |snap: &QueueSnapshot<&'static str>| -> Vec<&str> {
            snap.queued.iter().map(|q| q.key).collect()
        };
        let snap = q.snapshot(1);
        assert_eq!(keys(&snap), ["b"], "capped at the limit");
        assert_eq!(snap.queued_count, 2);
        assert_eq!(snap.processing, ["a"]);
        assert_eq!(snap.processing_count, 1);
        assert_eq!(snap.waiting_count, 2);
        assert_eq!(
            snap.waiting,
            [WaitingKey {
                key: "d",
                retries: 2,
                ready_in: ms(5)
            }]
        );
        tokio::time::advance(ms(1000)).await;
        let snap = q.snapshot(10);
        assert_eq!(
            snap.waiting,
            [WaitingKey {
                key: "e",
                retries: 0,
                ready_in: ms(1000)
            }]
        );
        assert_eq!(keys(&snap), ["b", "c", "d"]);
        assert_eq!(
            snap.queued[2],
            QueuedKey {
                key: "d",
                priority: Priority::Fresh,
                reasons: vec!["retry after a failed sync".into()],
                more: 0,
                // Moved into the queue when the timer task ran, i.e. after the whole advance.
                queued_for: Duration::ZERO,
            },
            "two failures, one reason"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn get_waits_for_an_add() {
        let q = queue::<&str>();
        let worker = tokio::spawn({
            let q = q.clone();
            async move { q.get().await }
        });
        tokio::time::sleep(ms(100)).await;
        assert!(!worker.is_finished(), "nothing was added yet");
        q.add("foo");
        assert_eq!(worker.await.unwrap(), Some("foo"));
    }

    #[tokio::test(start_paused = true)]
    async fn re_add_while_processing_is_redelivered_after_done() {
        let q = queue::<&str>();
        q.add("foo");
        assert_eq!(q.get().await, Some("foo"));
        q.add("foo");
        q.add("foo");
        assert_eq!(q.len(), 0, "an in-flight key is not queued a second time");

        let second = tokio::spawn({
            let q = q.clone();
            async move {
                let key = q.get().await;
                q.done(&"foo");
                key
            }
        });
        tokio::time::sleep(ms(100)).await;
        assert!(
            !second.is_finished(),
            "a second worker must not get foo while the first still has it"
        );
        q.done(&"foo");
        assert_eq!(second.await.unwrap(), Some("foo"));
        assert!(q.is_empty(), "the two adds collapsed into one redelivery");
    }

    #[tokio::test(start_paused = true)]
    async fn done_for_a_key_not_in_flight_is_ignored() {
        let q = queue::<&str>();
        q.add("foo");
        q.done(&"foo"); // caller bug: must not duplicate foo in the queue
        assert_eq!(q.len(), 1);
        assert_eq!(q.get().await, Some("foo"));
        assert!(q.is_empty());
    }

    /// Tracks which keys are in flight and fails if one is handed out twice concurrently.
    #[derive(Default)]
    struct InFlight {
        keys: Mutex<HashSet<u32>>,
        processed: Mutex<HashMap<u32, usize>>,
    }

    impl InFlight {
        fn start(&self, key: u32) {
            assert!(
                self.keys.lock().unwrap().insert(key),
                "key {key} handed to two workers at once"
            );
            *self.processed.lock().unwrap().entry(key).or_default() += 1;
        }
        fn finish(&self, key: u32) {
            self.keys.lock().unwrap().remove(&key);
        }
    }

    /// client-go's TestBasic: `keys` producers each add their key 50 times, 1ms apart, while
    /// `workers` consumers take 3ms per key. With more workers than keys, idle workers are
    /// always waiting, so any re-add of an in-flight key that reached the queue would be
    /// grabbed at once.
    async fn many_workers_never_share_a_key(keys: u32, workers: usize, drain: bool) {
        let q = queue::<u32>();
        let seen = Arc::new(InFlight::default());
        let producers: Vec<_> = (0..keys)
            .map(|i| {
                let q = q.clone();
                tokio::spawn(async move {
                    for _ in 0..50 {
                        q.add(i);
                        tokio::time::sleep(ms(1)).await;
                    }
                })
            })
            .collect();
        let consumers: Vec<_> = (0..workers)
            .map(|_| {
                let (q, seen) = (q.clone(), Arc::clone(&seen));
                tokio::spawn(async move {
                    while let Some(key) = q.get().await {
                        assert_ne!(key, 999, "got a key added after shutdown");
                        seen.start(key);
                        tokio::time::sleep(ms(3)).await;
                        seen.finish(key);
                        q.done(&key);
                    }
                })
            })
            .collect();
        for p in producers {
            p.await.unwrap();
        }
        if drain {
            q.shut_down_with_drain().await;
        } else {
            q.shut_down();
        }
        q.add(999);
        for c in consumers {
            c.await.unwrap();
        }
        assert_eq!(q.len(), 0);
        let processed = seen.processed.lock().unwrap();
        assert_eq!(processed.len(), keys as usize, "every key was processed");
        // 50 adds of each key collapse: far fewer syncs than adds, but at least one.
        assert!(
            processed.values().all(|&n| (1..50).contains(&n)),
            "{processed:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn many_workers_never_share_a_key_shut_down() {
        many_workers_never_share_a_key(50, 10, false).await;
        many_workers_never_share_a_key(5, 10, false).await;
    }

    #[tokio::test(start_paused = true)]
    async fn many_workers_never_share_a_key_shut_down_with_drain() {
        many_workers_never_share_a_key(50, 10, true).await;
        many_workers_never_share_a_key(5, 10, true).await;
    }

    #[tokio::test(start_paused = true)]
    async fn add_while_processing_redelivers_exactly_once_more() {
        let q = queue::<u32>();
        for i in 0..50 {
            q.add(i);
        }
        let seen = Arc::new(InFlight::default());
        let consumers: Vec<_> = (0..10)
            .map(|_| {
                let (q, seen) = (q.clone(), Arc::clone(&seen));
                tokio::spawn(async move {
                    while let Some(key) = q.get().await {
                        seen.start(key);
                        let first_time = seen.processed.lock().unwrap()[&key] == 1;
                        if first_time {
                            q.add(key); // e.g. an informer event arriving mid-sync
                        }
                        tokio::task::yield_now().await;
                        seen.finish(key);
                        q.done(&key);
                    }
                })
            })
            .collect();
        // Let the workers empty the queue, then stop them.
        tokio::time::sleep(ms(100)).await;
        q.shut_down_with_drain().await;
        for c in consumers {
            c.await.unwrap();
        }
        let processed = seen.processed.lock().unwrap();
        assert_eq!(processed.len(), 50);
        assert!(processed.values().all(|&n| n == 2), "{processed:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn add_after_fires_after_the_delay() {
        let q = queue::<&str>();
        q.add_after("foo", ms(50));
        settle().await;
        assert_eq!(q.len(), 0, "not before 50ms");
        tokio::time::sleep(ms(49)).await;
        assert_eq!(q.len(), 0, "not at 49ms");
        tokio::time::sleep(ms(11)).await;
        assert_eq!(q.len(), 1, "added by 60ms");
        assert_eq!(q.get().await, Some("foo"));
        q.done(&"foo");
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert_eq!(q.len(), 0, "added only once");
    }

    #[tokio::test(start_paused = true)]
    async fn add_after_zero_adds_immediately() {
        let q = queue::<&str>();
        q.add_after("foo", Duration::ZERO);
        assert_eq!(q.len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn add_after_dedupes_and_the_shorter_delay_wins() {
        let q = queue::<&str>();
        // A longer delay does not postpone the pending one...
        q.add_after("foo", ms(50));
        q.add_after("foo", ms(70));
        tokio::time::sleep(ms(60)).await;
        assert_eq!(q.len(), 1);
        assert_eq!(q.get().await, Some("foo"));
        q.done(&"foo");
        tokio::time::sleep(ms(20)).await;
        assert_eq!(q.len(), 0, "the 70ms entry was merged, not kept");

        // ...and a shorter one brings it forward.
        q.add_after("foo", ms(50));
        q.add_after("foo", ms(30));
        settle().await;
        assert_eq!(q.len(), 0);
        tokio::time::sleep(ms(40)).await;
        assert_eq!(q.len(), 1, "fired at 30ms");
        assert_eq!(q.get().await, Some("foo"));
        q.done(&"foo");
        tokio::time::sleep(ms(20)).await;
        assert_eq!(q.len(), 0, "the 50ms entry was merged, not kept");
    }

    #[tokio::test(start_paused = true)]
    async fn add_after_fires_in_ready_order() {
        let q = queue::<&str>();
        q.add_after("foo", Duration::from_secs(1));
        q.add_after("bar", ms(50));
        tokio::time::sleep(ms(60)).await;
        assert_eq!(q.len(), 1);
        assert_eq!(q.get().await, Some("bar"));
        q.add_after("baz", Duration::from_secs(2));
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(q.len(), 1);
        assert_eq!(q.get().await, Some("foo"));
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(q.get().await, Some("baz"));

        // All due at once: still in ready order, not insertion order.
        q.add_after("a", ms(1000));
        q.add_after("b", ms(500));
        q.add_after("c", ms(250));
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(q.len(), 3);
        assert_eq!(q.get().await, Some("c"));
        assert_eq!(q.get().await, Some("b"));
        assert_eq!(q.get().await, Some("a"));
    }

    #[tokio::test(start_paused = true)]
    async fn rate_limited_delays_come_from_the_limiter() {
        let q = WorkQueue::new(
            "test",
            ItemExponentialFailureRateLimiter::new(ms(1), Duration::from_secs(1)),
            None,
        );
        let now = Instant::now();
        q.add_rate_limited("one");
        assert_eq!(q.waiting_ready_at(&"one"), Some(now + ms(1)));
        q.add_rate_limited("one"); // 2ms: the pending 1ms entry wins
        assert_eq!(q.waiting_ready_at(&"one"), Some(now + ms(1)));
        assert_eq!(q.num_requeues(&"one"), 2);
        q.add_rate_limited("two");
        assert_eq!(q.waiting_ready_at(&"two"), Some(now + ms(1)));
        q.forget(&"one");
        assert_eq!(q.num_requeues(&"one"), 0);
        assert_eq!(q.num_requeues(&"two"), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn rate_limited_backoff_doubles_from_5ms_to_the_1000s_cap() {
        let q = queue::<String>();
        let key = "ns/rs".to_string();
        let mut expected = ms(5);
        for attempt in 0..20 {
            let start = Instant::now();
            q.add_rate_limited(key.clone());
            assert_eq!(q.get().await.as_ref(), Some(&key));
            assert_eq!(start.elapsed(), expected, "attempt {attempt}");
            q.done(&key);
            expected = (expected * 2).min(Duration::from_secs(1000));
        }
        assert_eq!(expected, Duration::from_secs(1000), "the cap was reached");
        assert_eq!(q.num_requeues(&key), 20);

        q.forget(&key);
        assert_eq!(q.num_requeues(&key), 0);
        let start = Instant::now();
        q.add_rate_limited(key.clone());
        q.get().await;
        assert_eq!(start.elapsed(), ms(5), "forget resets the backoff");
    }

    #[tokio::test(start_paused = true)]
    async fn shut_down_drains_then_get_returns_none() {
        let q = queue::<&str>();
        q.add("a");
        q.add("b");
        q.add_after("late", ms(10));
        q.shut_down();
        assert!(q.shutting_down());
        q.add("c");
        q.add_after("d", Duration::ZERO);
        assert_eq!(q.get().await, Some("a"));
        assert_eq!(q.get().await, Some("b"));
        assert_eq!(q.get().await, None);
        tokio::time::sleep(ms(100)).await;
        assert_eq!(q.get().await, None, "delayed keys are dropped at shutdown");
        q.shut_down(); // idempotent
    }

    #[tokio::test(start_paused = true)]
    async fn shut_down_wakes_parked_workers() {
        let q = queue::<&str>();
        let workers: Vec<_> = (0..3)
            .map(|_| {
                let q = q.clone();
                tokio::spawn(async move { q.get().await })
            })
            .collect();
        settle().await;
        q.shut_down();
        for w in workers {
            assert_eq!(w.await.unwrap(), None);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn shut_down_with_drain_waits_for_in_flight_keys() {
        let q = queue::<&str>();
        q.add("foo");
        q.add("bar");
        let first = q.get().await.unwrap();
        let second = q.get().await.unwrap();
        let finished = Arc::new(AtomicBool::new(false));
        let drain = tokio::spawn({
            let (q, finished) = (q.clone(), Arc::clone(&finished));
            async move {
                q.shut_down_with_drain().await;
                finished.store(true, Ordering::SeqCst);
            }
        });
        settle().await;
        assert_eq!(q.get().await, None, "nothing left to hand out");
        q.done(&first);
        settle().await;
        assert!(!finished.load(Ordering::SeqCst), "bar is still in flight");
        q.done(&second);
        drain.await.unwrap();
        assert!(finished.load(Ordering::SeqCst));
    }

    #[tokio::test(start_paused = true)]
    async fn shut_down_releases_a_draining_waiter() {
        let q = queue::<&str>();
        q.add("foo");
        q.get().await.unwrap();
        let drain = tokio::spawn({
            let q = q.clone();
            async move { q.shut_down_with_drain().await }
        });
        tokio::time::sleep(ms(100)).await;
        assert!(!drain.is_finished(), "foo was never done");
        q.shut_down();
        drain.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn drain_hands_out_a_key_dirtied_while_in_flight() {
        let q = queue::<&str>();
        q.add("foo");
        let gotten = q.get().await.unwrap();
        q.add("foo");
        let drain = tokio::spawn({
            let q = q.clone();
            async move { q.shut_down_with_drain().await }
        });
        settle().await;
        assert_eq!(q.get().await, None, "foo is in flight, not queued");
        q.done(&gotten);
        assert_eq!(
            q.get().await,
            Some("foo"),
            "the dirty copy is still delivered"
        );
        q.done(&"foo");
        assert_eq!(q.get().await, None);
        drain.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn get_is_cancel_safe() {
        let q = queue::<&str>();
        // A worker that gives up waiting must not swallow the wake-up meant for the next one.
        // `impatient` parks first, so it is the one `add` wakes; it is then cancelled before
        // it can run.
        let impatient = {
            let q = q.clone();
            tokio::spawn(async move { tokio::time::timeout(ms(10), q.get()).await })
        };
        settle().await;
        let waiting = tokio::spawn({
            let q = q.clone();
            async move { q.get().await }
        });
        settle().await;
        q.add("foo");
        impatient.abort();
        let _ = impatient.await;
        assert_eq!(waiting.await.unwrap(), Some("foo"));
    }

    fn approx(actual: Option<f64>, expected: f64) {
        let actual = actual.expect("metric present");
        assert!((actual - expected).abs() < 1e-9, "{actual} != {expected}");
    }

    #[tokio::test(start_paused = true)]
    async fn metrics_follow_client_go() {
        let registry = Registry::new();
        let metrics = WorkQueueMetrics::new(&registry).unwrap();
        let q = WorkQueue::new("rs", default_controller_rate_limiter(), Some(metrics));
        let get = |name: &str| sample(&registry, name, "rs");

        q.add("foo");
        assert_eq!(get("workqueue_adds_total"), Some(1.0));
        assert_eq!(get("workqueue_depth"), Some(1.0));

        tokio::time::sleep(ms(50)).await;
        let key = q.get().await.unwrap();
        approx(get("workqueue_queue_duration_seconds_sum"), 0.05);
        assert_eq!(get("workqueue_queue_duration_seconds_count"), Some(1.0));
        assert_eq!(get("workqueue_depth"), Some(0.0));

        // Re-adding while processing counts once, and the key is "in the queue" again.
        for _ in 0..5 {
            q.add(key);
        }
        assert_eq!(get("workqueue_adds_total"), Some(2.0));
        assert_eq!(get("workqueue_depth"), Some(1.0));

        tokio::time::sleep(ms(25)).await;
        q.done(&key);
        approx(get("workqueue_work_duration_seconds_sum"), 0.025);
        assert_eq!(get("workqueue_work_duration_seconds_count"), Some(1.0));
        assert_eq!(get("workqueue_depth"), Some(1.0));

        // The redelivery waited from the re-add (t=50ms) to now (t=75ms).
        let key = q.get().await.unwrap();
        approx(get("workqueue_queue_duration_seconds_sum"), 0.05 + 0.025);
        assert_eq!(get("workqueue_queue_duration_seconds_count"), Some(2.0));

        // Gauges are refreshed every 500ms from the first hand-out (t=50ms): at t=550ms foo has
        // run for 475ms.
        assert_eq!(get("workqueue_unfinished_work_seconds"), Some(0.0));
        tokio::time::sleep(ms(476)).await;
        approx(get("workqueue_unfinished_work_seconds"), 0.475);
        approx(get("workqueue_longest_running_processor_seconds"), 0.475);
        q.done(&key);
        approx(get("workqueue_work_duration_seconds_sum"), 0.025 + 0.476);
        tokio::time::sleep(ms(500)).await;
        assert_eq!(get("workqueue_unfinished_work_seconds"), Some(0.0));
        // Nothing processing: the gauges showed zero once and the tick stopped, so an idle queue's
        // task sleeps until the next hand-out.
        assert_eq!(q.inner.lock().unfinished_tick, None);

        // Every delayed or rate-limited add is a retry, even with zero delay.
        q.add_after("bar", ms(10));
        q.add_after("bar", Duration::ZERO);
        q.add_rate_limited("baz");
        assert_eq!(get("workqueue_retries_total"), Some(3.0));
        q.shut_down();
        q.add_after("bar", ms(10));
        assert_eq!(
            get("workqueue_retries_total"),
            Some(3.0),
            "not after shutdown"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn metrics_are_labelled_per_queue_and_stop_after_shutdown() {
        let registry = Registry::new();
        let metrics = WorkQueueMetrics::new(&registry).unwrap();
        let rs = WorkQueue::new(
            "replicaset",
            default_controller_rate_limiter(),
            Some(metrics.clone()),
        );
        let ds = WorkQueue::new(
            "daemonset",
            default_controller_rate_limiter(),
            Some(metrics),
        );
        rs.add("a");
        rs.add("b");
        ds.add("c");
        assert_eq!(
            sample(&registry, "workqueue_depth", "replicaset"),
            Some(2.0)
        );
        assert_eq!(sample(&registry, "workqueue_depth", "daemonset"), Some(1.0));

        // In flight across shutdown: the periodic gauges are no longer refreshed.
        rs.get().await.unwrap();
        rs.shut_down();
        ds.get().await.unwrap();
        tokio::time::sleep(ms(1001)).await;
        assert_eq!(
            sample(&registry, "workqueue_unfinished_work_seconds", "replicaset"),
            Some(0.0)
        );
        approx(
            sample(&registry, "workqueue_unfinished_work_seconds", "daemonset"),
            1.0,
        );
    }

    #[tokio::test(start_paused = true)]
    async fn dropping_the_queue_ends_its_timer_task() {
        let registry = Registry::new();
        let metrics = WorkQueueMetrics::new(&registry).unwrap();
        let runtime = tokio::runtime::Handle::current().metrics();
        let before = runtime.num_alive_tasks();
        let q = WorkQueue::new("q", default_controller_rate_limiter(), Some(metrics));
        q.add_after("x", Duration::from_secs(3600));
        settle().await;
        assert_eq!(runtime.num_alive_tasks(), before + 1);
        drop(q);
        settle().await;
        assert_eq!(runtime.num_alive_tasks(), before);
    }

    // ---- wake reasons and priorities ----

    fn queue_with<K>(priorities: Priorities) -> WorkQueue<K>
    where
        K: Clone + Eq + Hash + Send + Sync + Debug + 'static,
    {
        queue().with_priorities(priorities)
    }

    fn on(max_low_wait: Duration) -> Priorities {
        Priorities::On { max_low_wait }
    }

    /// Takes everything queued, marking each key done, in hand-out order.
    async fn take_all<K>(q: &WorkQueue<K>) -> Vec<K>
    where
        K: Clone + Eq + Hash + Send + Sync + Debug + 'static,
    {
        let mut out = Vec::new();
        while !q.is_empty() {
            let Some(key) = q.get().await else { break };
            q.done(&key);
            out.push(key);
        }
        out
    }

    #[tokio::test(start_paused = true)]
    async fn fresh_keys_go_before_low_ones_fifo_within_each() {
        let q = queue::<&str>(); // priorities on by default
        q.add_woken("low1", Wake::low("initial list"));
        q.add("fresh1");
        q.add_woken("low2", Wake::low("initial list"));
        q.add_woken("fresh2", Wake::fresh("pod deleted"));
        q.add_woken("low3", Wake::low("resync"));
        q.add_woken("fresh1", Wake::low("resync")); // a low add never lowers a fresh key
        assert_eq!(
            take_all(&q).await,
            ["fresh1", "fresh2", "low1", "low2", "low3"]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_fresh_add_upgrades_a_queued_low_key() {
        let q = queue::<&str>();
        q.add_woken("a", Wake::low("initial list"));
        q.add_woken("b", Wake::low("initial list"));
        q.add("c");
        q.add_woken("b", Wake::fresh("spec changed"));
        assert_eq!(q.len(), 3, "an upgrade does not queue the key twice");
        let (key, woken) = q.get_woken().await.unwrap();
        assert_eq!(key, "c");
        assert_eq!(woken.priority, Priority::Fresh);
        let (key, woken) = q.get_woken().await.unwrap();
        assert_eq!(key, "b", "upgraded: before the low key queued ahead of it");
        assert_eq!(woken.priority, Priority::Fresh);
        assert_eq!(woken.reasons, ["initial list", "spec changed"]);
        let (key, woken) = q.get_woken().await.unwrap();
        assert_eq!((key, woken.priority), ("a", Priority::Low));
    }

    #[tokio::test(start_paused = true)]
    async fn a_stream_of_fresh_keys_cannot_starve_a_low_key() {
        const SYNC: Duration = Duration::from_millis(100);
        let registry = Registry::new();
        let metrics = WorkQueueMetrics::new(&registry).unwrap();
        let q = WorkQueue::new("rs", default_controller_rate_limiter(), Some(metrics))
            .with_priorities(on(Duration::from_secs(1)));
        let start = Instant::now();
        q.add_woken("low".to_string(), Wake::low("initial list"));
        q.add("fresh-0".to_string());
        q.add("fresh-1".to_string());
        // One worker; every sync a new fresh key arrives, so fresh keys are always waiting.
        let mut next = 2;
        let (low_at, woken) = loop {
            assert!(next < 100, "the low key was starved");
            let (key, woken) = q.get_woken().await.unwrap();
            if key == "low" {
                break (start.elapsed(), woken);
            }
            q.add(format!("fresh-{next}"));
            next += 1;
            tokio::time::sleep(SYNC).await;
            q.done(&key);
        };
        assert!(
            (Duration::from_secs(1)..=Duration::from_secs(1) + 2 * SYNC).contains(&low_at),
            "handed out after {low_at:?}: fresh keys first, but not past max_low_wait + two hand-outs"
        );
        assert_eq!(woken.waited, low_at);
        assert_eq!(woken.priority, Priority::Low);
        assert!(
            q.len() >= 2,
            "fresh keys were still waiting: it went ahead of them"
        );
        assert_eq!(
            sample(&registry, "workqueue_low_priority_promoted_total", "rs"),
            Some(1.0)
        );
    }

    /// The scenario priorities exist for: a large initial list (200 low keys, 100 ms a sync, one
    /// worker: 20 s of work) has entirely aged when a user's change comes at t = 10 s. Strict
    /// aging would hand it out after the remaining 100 low keys; the 1:1 share within 2 hand-outs.
    #[tokio::test(start_paused = true)]
    async fn a_fresh_key_is_not_queued_behind_an_aged_backlog() {
        const SYNC: Duration = Duration::from_millis(100);
        let registry = Registry::new();
        let metrics = WorkQueueMetrics::new(&registry).unwrap();
        let q = WorkQueue::new("rs", default_controller_rate_limiter(), Some(metrics));
        let start = Instant::now();
        for i in 0..200 {
            q.add_woken(format!("low-{i}"), Wake::low("initial list"));
        }
        let mut handed_out = Vec::new();
        let mut fresh_added_at = None;
        while !q.is_empty() {
            let key = q.get().await.unwrap();
            handed_out.push(key.clone());
            tokio::time::sleep(SYNC).await;
            q.done(&key);
            if fresh_added_at.is_none() && start.elapsed() >= Duration::from_secs(10) {
                assert_eq!(start.elapsed(), Duration::from_secs(10));
                assert!(
                    q.snapshot(1000)
                        .queued
                        .iter()
                        .all(|k| k.queued_for >= Priorities::DEFAULT_MAX_LOW_WAIT),
                    "every low key still queued has aged"
                );
                q.add_woken("scaled".to_string(), Wake::fresh("spec.replicas changed"));
                fresh_added_at = Some(handed_out.len());
            }
        }
        let added_at = fresh_added_at.unwrap();
        assert_eq!(added_at, 100);
        let taken = handed_out.iter().position(|k| k == "scaled").unwrap();
        assert!(
            taken < added_at + 2,
            "handed out {} hand-outs after it was added",
            taken - added_at + 1
        );
        assert_eq!(handed_out.len(), 201, "and the backlog still drains");
    }

    #[tokio::test(start_paused = true)]
    async fn aged_low_and_fresh_keys_alternate_one_to_one() {
        let registry = Registry::new();
        let metrics = WorkQueueMetrics::new(&registry).unwrap();
        let q = WorkQueue::new("rs", default_controller_rate_limiter(), Some(metrics))
            .with_priorities(on(Duration::from_secs(1)));
        for k in ["low-1", "low-2", "low-3", "low-4"] {
            q.add_woken(k, Wake::low("initial list"));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        for k in ["fresh-1", "fresh-2", "fresh-3"] {
            q.add(k);
        }
        q.add_woken("young-low", Wake::low("resync")); // not aged: after every fresh key
        let expected = [
            "low-1",
            "fresh-1",
            "low-2",
            "fresh-2",
            "low-3",
            "fresh-3",
            "low-4",
            "young-low",
        ];
        let snapshot: Vec<_> = q.snapshot(10).queued.into_iter().map(|k| k.key).collect();
        assert_eq!(snapshot, expected, "the snapshot shows the hand-out order");
        assert_eq!(take_all(&q).await, expected);
        assert_eq!(
            sample(&registry, "workqueue_low_priority_promoted_total", "rs"),
            Some(3.0),
            "low-1..3 went while fresh keys waited; low-4 had no one to overtake"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn priorities_off_is_one_fifo_and_still_records_reasons() {
        let q = queue_with::<&str>(Priorities::Off);
        q.add_woken("low1", Wake::low("initial list"));
        q.add("fresh1");
        q.add_woken("low2", Wake::low("resync"));
        q.add_woken("low2", Wake::fresh("pod added")); // no move: FIFO
        q.add("fresh2");
        let snap = q.snapshot(10);
        let priorities: Vec<_> = snap.queued.iter().map(|k| (k.key, k.priority)).collect();
        assert_eq!(
            priorities,
            [
                ("low1", Priority::Low),
                ("fresh1", Priority::Fresh),
                ("low2", Priority::Fresh),
                ("fresh2", Priority::Fresh),
            ]
        );
        let (key, woken) = q.get_woken().await.unwrap();
        assert_eq!((key, woken.reasons), ("low1", vec!["initial list".into()]));
        tokio::time::sleep(Duration::from_secs(60)).await; // aging plays no part either
        assert_eq!(take_all(&q).await, ["fresh1", "low2", "fresh2"]);
    }

    #[tokio::test(start_paused = true)]
    async fn reasons_are_coalesced_deduped_and_bounded() {
        let q = queue::<&str>();
        q.add("a");
        tokio::time::sleep(ms(30)).await;
        for round in 0..3 {
            for i in 0..12 {
                q.add_woken("a", Wake::low(format!("event {i}")));
            }
            q.add("a");
            if round == 0 {
                assert_eq!(q.snapshot(1).queued[0].more, 5, "events 7..=11");
            }
        }
        assert_eq!(q.len(), 1);
        tokio::time::sleep(ms(20)).await;
        let (key, woken) = q.get_woken().await.unwrap();
        assert_eq!(key, "a");
        let expected: Vec<Cow<'static, str>> = std::iter::once("added".to_string())
            .chain((0..7).map(|i| format!("event {i}")))
            .map(Cow::from)
            .collect();
        assert_eq!(woken.reasons, expected, "first distinct reasons, in order");
        assert_eq!(woken.more, 3 * 5, "events 7..=11, three times");
        assert_eq!(woken.priority, Priority::Fresh);
        assert_eq!(woken.waited, ms(50), "from the first add");
        q.done(&"a");
        q.add_woken("a", Wake::low("resync"));
        let (_, woken) = q.get_woken().await.unwrap();
        assert_eq!(
            woken.reasons,
            ["resync"],
            "a hand-out takes its reasons along"
        );
        assert_eq!((woken.more, woken.priority), (0, Priority::Low));
    }

    #[tokio::test(start_paused = true)]
    async fn reasons_added_while_processing_go_to_the_next_hand_out() {
        let q = queue::<&str>();
        q.add_woken("a", Wake::fresh("spec changed"));
        let (_, woken) = q.get_woken().await.unwrap();
        assert_eq!(woken.reasons, ["spec changed"]);
        tokio::time::sleep(ms(10)).await;
        q.add_woken("a", Wake::low("resync"));
        q.add_woken("a", Wake::low("resync"));
        tokio::time::sleep(ms(40)).await;
        q.add("b");
        q.done(&"a");
        // Back in the queue as low (its only add since the hand-out was), so b goes first.
        assert_eq!(q.get().await, Some("b"));
        let (key, woken) = q.get_woken().await.unwrap();
        assert_eq!(key, "a");
        assert_eq!(woken.reasons, ["resync"]);
        assert_eq!(woken.priority, Priority::Low);
        assert_eq!(woken.waited, ms(40), "since the add during processing");
    }

    #[tokio::test(start_paused = true)]
    async fn delayed_adds_carry_their_wake() {
        let q = queue::<&str>();
        q.add_after_woken("a", ms(50), Wake::low("periodic recheck"));
        q.add_after_woken("a", ms(80), Wake::low("resync")); // merged into the 50 ms one
        q.add_after("b", ms(50));
        q.add_rate_limited("c"); // 5 ms
        q.add_after_woken("d", Duration::ZERO, Wake::low("now"));
        let (key, woken) = q.get_woken().await.unwrap();
        assert_eq!((key, woken.reasons), ("d", vec!["now".into()]));
        let (key, woken) = q.get_woken().await.unwrap();
        assert_eq!(key, "c");
        assert_eq!(woken.reasons, ["retry after a failed sync"]);
        tokio::time::sleep(ms(60)).await;
        let (key, woken) = q.get_woken().await.unwrap();
        assert_eq!(key, "b", "fresh, although it became ready with a");
        assert_eq!(woken.reasons, ["requeue after 50ms"]);
        let (key, woken) = q.get_woken().await.unwrap();
        assert_eq!(key, "a");
        assert_eq!(woken.reasons, ["periodic recheck", "resync"]);
        assert_eq!(woken.priority, Priority::Low);
        assert_eq!(
            woken.waited,
            ms(15),
            "from when the delay ended (50 ms) to now (65 ms)"
        );
        tokio::time::sleep(ms(100)).await;
        assert!(q.is_empty(), "the merged 80 ms add does not fire again");
    }

    #[tokio::test(start_paused = true)]
    async fn the_snapshot_lists_keys_in_hand_out_order_with_priorities() {
        let q = queue_with::<&str>(on(ms(100)));
        q.add_woken("old-low", Wake::low("initial list"));
        tokio::time::sleep(ms(60)).await;
        q.add("fresh");
        q.add_woken("young-low", Wake::low("resync"));
        let order = |q: &WorkQueue<&'static str>| -> Vec<(&str, Priority)> {
            q.snapshot(10)
                .queued
                .into_iter()
                .map(|k| (k.key, k.priority))
                .collect()
        };
        assert_eq!(
            order(&q),
            [
                ("fresh", Priority::Fresh),
                ("old-low", Priority::Low),
                ("young-low", Priority::Low)
            ]
        );
        tokio::time::sleep(ms(40)).await;
        assert_eq!(order(&q)[0], ("old-low", Priority::Low), "aged: now first");
        assert_eq!(q.snapshot(10).queued[0].queued_for, ms(100));
        assert_eq!(take_all(&q).await, ["old-low", "fresh", "young-low"]);
    }

    #[tokio::test(start_paused = true)]
    async fn depth_by_priority_follows_adds_upgrades_and_hand_outs() {
        let registry = Registry::new();
        let metrics = WorkQueueMetrics::new(&registry).unwrap();
        let q = WorkQueue::new("rs", default_controller_rate_limiter(), Some(metrics));
        let depth = |p: &str| {
            let labels = format!("name=\"rs\",priority=\"{p}\"");
            sample_with(&registry, "workqueue_depth_by_priority", &labels)
        };
        let both = || (depth("fresh"), depth("low"));
        q.add_woken("a", Wake::low("initial list"));
        q.add_woken("b", Wake::low("initial list"));
        q.add("c");
        assert_eq!(both(), (Some(1.0), Some(2.0)));
        q.add_woken("b", Wake::fresh("spec changed"));
        q.add_woken("b", Wake::fresh("again")); // already fresh: no move
        assert_eq!(both(), (Some(2.0), Some(1.0)));
        assert_eq!(sample(&registry, "workqueue_depth", "rs"), Some(3.0));
        assert_eq!(q.get().await, Some("c"));
        assert_eq!(q.get().await, Some("b"));
        assert_eq!(both(), (Some(0.0), Some(1.0)));
        // Dirty while processing counts too (as workqueue_depth does), and can be upgraded.
        q.add_woken("b", Wake::low("resync"));
        assert_eq!(both(), (Some(0.0), Some(2.0)));
        q.add("b");
        assert_eq!(both(), (Some(1.0), Some(1.0)));
        q.done(&"b");
        assert_eq!(q.get().await, Some("b"), "requeued fresh: before a");
        assert_eq!(q.get().await, Some("a"));
        assert_eq!(both(), (Some(0.0), Some(0.0)));
        assert_eq!(sample(&registry, "workqueue_depth", "rs"), Some(0.0));
        assert_eq!(
            sample(&registry, "workqueue_low_priority_promoted_total", "rs"),
            Some(0.0),
            "nothing aged"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn shut_down_still_hands_out_queued_keys_in_priority_order() {
        let q = queue::<&str>();
        q.add_woken("low", Wake::low("initial list"));
        q.add("fresh");
        q.shut_down();
        q.add("late");
        assert_eq!(q.get().await, Some("fresh"));
        assert_eq!(q.get().await, Some("low"));
        assert_eq!(q.get_woken().await, None);
    }
}
