//! The worker loop every controller shares: take a key, sync it, then decide in one place what becomes
//! of the key (upstream's `processNextWorkItem` and `handleErr`; controller-runtime's `reconcileHandler`):
//!
//! - success: forget its failures, and queue it again after the delay the sync asked for, if any, with
//!   the sync's reason (what the next sync shows as having woken it);
//! - a failure that no retry can help: forget it;
//! - any other failure: requeue it with rate-limited backoff, or drop it after `max_retries` failures
//!   in a row (a delay the sync asked for before failing is superseded by the retry).
//!
//! It also decides, in one place ([`SyncFailure::routine`]), which failures are **routine retries**: a
//! write conflict, or a cache that has not yet seen the controller's own writes. They are requeued like
//! any failure, but logged at debug, counted apart from real failures (the live view's *routine* column,
//! `crate::observability::inspect::SyncView`) and filed in the decision log as `retried`, not `failed`.
//!
//! A sync that panics is treated like a failed sync: the panic is caught, logged with the key, its
//! message, where it happened and a backtrace, counted in `<controller>_sync_panics_total`, and the key
//! is requeued with backoff. Without that, the worker task would die before `done`, the key would stay
//! "processing" forever (later events only mark it dirty) and the pool would lose a worker. Upstream's
//! controllers crash the whole process on a panic and rely on a restart; a panic here must not silently
//! stop an object either, but it need not stop every other object.

use std::backtrace::Backtrace;
use std::cell::RefCell;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Once};

use futures::FutureExt;
use mini_kcm_workqueue::{Wake, Woken, WorkQueue};
use tracing::Instrument;

use crate::api::api_errors::is_namespace_terminating;
use crate::controller::Requeue;
use crate::controller::key::ObjectKey;
use crate::observability::counter::{Counter, CounterSpec};
use crate::observability::decisions::{DecidedBy, DecisionLog, Outcome as Filed, RoutineRetry};
use crate::observability::inspect::{SyncEnd, SyncStats};

/// An error a sync returns. The three controllers' errors follow the same rules, decided from the API
/// server's answer found in the error's chain of sources ([`SyncFailure::api_error`]).
pub trait SyncFailure: std::error::Error {
    /// Whether the failure is a routine retry, and why (the one place that decides it; see
    /// [`RoutineRetry`]): a write conflict here (the retry reads fresher objects), a stale cache in the
    /// sync's prologue (`crate::controller::core::SyncKeyError`). A routine retry is logged at debug
    /// rather than warn, counted apart from failures and not filed as a failed decision.
    fn routine(&self) -> Option<RoutineRetry> {
        self.api_error().and_then(RoutineRetry::of_api_error)
    }

    /// The failure ends the key's retries at once, without a warning (upstream's Deployment controller
    /// forgets a key whose namespace is being deleted: no write there can succeed, and the deletion
    /// brings the final event).
    fn forgets_the_key(&self) -> bool {
        self.api_error().is_some_and(is_namespace_terminating)
    }

    /// The API server's answer behind the failure: the first `kube::Error` in its chain of sources.
    fn api_error(&self) -> Option<&kube::Error> {
        let mut next = self.source();
        while let Some(error) = next {
            if let Some(api) = error.downcast_ref::<kube::Error>() {
                return Some(api);
            }
            next = error.source();
        }
        None
    }
}

/// An error and its sources, `outer: inner: innermost`, as logs and the decision log show a failure.
/// Our messages never repeat their source (`tests/architecture/error_messages.rs`); a source whose text
/// the line already shows (some of kube's and hyper's errors print their own) is left out.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut next = error.source();
    while let Some(source) = next {
        let source_text = source.to_string();
        if !text.contains(&source_text) {
            text.push_str(": ");
            text.push_str(&source_text);
        }
        next = source.source();
    }
    text
}

/// `<subsystem>_sync_panics_total`: syncs that panicked (each one was caught and its key requeued).
pub(crate) const SYNC_PANICS: CounterSpec = CounterSpec {
    name: "sync_panics_total",
    help: "Number of syncs that panicked; each key was requeued with rate-limited backoff.",
};

/// How one sync ended.
enum Outcome<E> {
    Synced(Requeue),
    Failed(E),
    Panicked(CaughtPanic),
}

/// What is known about a caught panic.
struct CaughtPanic {
    message: String,
    /// `file:line:column`, from the panic hook (absent if another hook replaced ours).
    location: Option<String>,
    backtrace: Option<Backtrace>,
}

/// What a pool of workers serves and reports to.
pub struct Workers {
    /// The controller instance (its name labels logs and decisions).
    pub by: DecidedBy,
    /// The queue the workers take keys from, and put failed or requeued keys back on.
    pub queue: WorkQueue<ObjectKey>,
    /// How many keys are synced at once.
    pub count: usize,
    /// With `Some(n)`, a key that failed `n` times in a row is dropped until its next event (the
    /// Deployment controller's rule; the informers' periodic resync brings it back); otherwise failures
    /// are retried forever with backoff (ReplicaSet, DaemonSet).
    pub max_retries: Option<usize>,
    /// `<subsystem>_sync_panics_total`: one per panicking sync caught.
    pub panics: Counter,
    /// Sync counts for the live view.
    pub stats: SyncStats,
    /// Where each sync's decision is filed (see `crate::observability::decisions`).
    pub decisions: DecisionLog,
}

/// Runs the workers until the queue is shut down and drained. The queue guarantees one key is never
/// synced by two workers at once. A panicking sync counts as a failure (see the module header).
pub async fn run_workers<F, Fut, E>(workers: Workers, sync: F)
where
    F: Fn(ObjectKey) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<Requeue, E>> + Send + 'static,
    E: SyncFailure + Send + 'static,
{
    install_panic_recorder();
    let workers = Arc::new(workers);
    // A JoinSet aborts the workers if this future is dropped: a controller that is cancelled stops all of
    // its work, as a dying process would.
    let mut handles = tokio::task::JoinSet::new();
    for _ in 0..workers.count.max(1) {
        let w = workers.clone();
        let sync = sync.clone();
        handles.spawn(async move {
            while let Some((key, woken)) = w.queue.get_woken().await {
                work_on(&w, key, woken, &sync).await;
            }
        });
    }
    while let Some(result) = handles.join_next().await {
        if let Err(e) = result {
            // Only reachable if the bookkeeping itself panics (or the task is cancelled).
            tracing::error!(controller = workers.by.controller, error = %e, "a worker stopped unexpectedly");
        }
    }
}

/// One key through a worker: its sync (a panic caught), then [`handle_outcome`], the sync counts and its
/// decision filed, then `done`. The manager's workers and a simulation stepping one sync at a time
/// (`Controller::step`) both go through here.
pub(crate) async fn work_on<F, Fut, E>(w: &Workers, key: ObjectKey, woken: Woken, sync: &F)
where
    F: Fn(ObjectKey) -> Fut,
    Fut: Future<Output = Result<Requeue, E>>,
    E: SyncFailure,
{
    let controller = w.by.controller;
    let span = tracing::info_span!("sync", controller, key = %key);
    // What queued the key since its last sync, and how long it waited, go with its decision.
    let draft = w.decisions.start(w.by, &key, woken);
    // Boxed: a sync's future is large (in debug builds especially), and moving it into the
    // draft's scope and `catch_unwind` by value would copy it through the worker's stack.
    let run = Box::pin(sync(key.clone()).instrument(span.clone()));
    let run = async {
        match &draft {
            Some(draft) => draft.scope(run).await,
            None => run.await,
        }
    };
    // The sync future is dropped right after a panic and nothing it touched is read
    // afterwards except through locks that tolerate poisoning: unwinding through it is safe.
    let outcome = match AssertUnwindSafe(run).catch_unwind().await {
        Ok(Ok(requeue)) => Outcome::Synced(requeue),
        Ok(Err(e)) => Outcome::Failed(e),
        Err(payload) => Outcome::Panicked(caught(payload.as_ref())),
    };
    let failure =
        span.in_scope(|| handle_outcome(&w.queue, &key, outcome, w.max_retries, &w.panics));
    w.stats
        .record(&key, failure.as_ref().map_or(SyncEnd::Done, Failure::end));
    if let Some(draft) = draft {
        // A routine retry is not a decision gone wrong: filed as `retried`, if at all.
        let filed = match failure {
            None => Filed::Done,
            Some(Failure {
                message,
                routine: Some(reason),
            }) => Filed::Retried {
                reason,
                error: message,
            },
            Some(Failure { message, .. }) => Filed::Failed { error: message },
        };
        w.decisions.file(draft, filed);
    }
    w.queue.done(&key);
}

/// What a failed sync reports beyond the queue: its message, and whether it was a routine retry.
#[derive(Debug)]
struct Failure {
    message: String,
    routine: Option<RoutineRetry>,
}

impl Failure {
    /// How the sync counts in the live view's sync counts.
    fn end(&self) -> SyncEnd {
        self.routine.map_or(SyncEnd::Failed, SyncEnd::Routine)
    }
}

/// The one place that decides what becomes of `key` after its sync (the module header): forget it,
/// requeue it after a delay, requeue it with backoff, or drop it. Never calls `done`: the caller always
/// does. Returns the failure, if the sync failed (a failure that forgets the key at once is not one:
/// nothing is wrong).
fn handle_outcome<E: SyncFailure>(
    queue: &WorkQueue<ObjectKey>,
    key: &ObjectKey,
    outcome: Outcome<E>,
    max_retries: Option<usize>,
    panics: &Counter,
) -> Option<Failure> {
    let retries = queue.num_requeues(key);
    let mut routine = None;
    let error = match outcome {
        Outcome::Synced(requeue) => {
            queue.forget(key);
            match requeue {
                Requeue::Never => {}
                // Upstream requeues a Deployment whose deadline has just passed rate-limited, not at once.
                Requeue::After(delay, why) if delay.is_zero() => {
                    queue.add_rate_limited_woken(key.clone(), Wake::fresh(why));
                }
                Requeue::After(delay, why) => {
                    tracing::debug!(?delay, why, "requeued after a delay the sync asked for");
                    queue.add_after_woken(key.clone(), delay, Wake::fresh(why));
                }
            }
            return None;
        }
        Outcome::Failed(e) if e.forgets_the_key() => {
            tracing::debug!(error = %error_chain(&e), "sync failed for good; forgetting the key");
            queue.forget(key);
            return None;
        }
        Outcome::Failed(e) => {
            let error = error_chain(&e);
            routine = e.routine();
            if let Some(reason) = routine {
                tracing::debug!(%error, retries, reason = reason.label(), "sync failed (routine retry)");
            } else {
                tracing::warn!(%error, retries, "sync failed");
            }
            error
        }
        Outcome::Panicked(panic) => {
            panics.inc();
            tracing::error!(
                panic = %panic.message,
                location = panic.location.as_deref().unwrap_or("unknown"),
                retries,
                backtrace = %panic
                    .backtrace
                    .as_ref()
                    .map(ToString::to_string)
                    .unwrap_or_default(),
                "sync panicked; the key is requeued with backoff"
            );
            format!("panic: {}", panic.message)
        }
    };
    if max_retries.is_some_and(|max| retries >= max) {
        tracing::warn!(%error, retries, "sync failed too often; dropping the key until its next change or resync");
        queue.forget(key);
    } else if let Some(reason) = routine {
        // Its next sync says it was a routine retry, not a retry after a failure.
        queue.add_rate_limited_woken(key.clone(), Wake::fresh(reason.wake_reason()));
    } else {
        queue.add_rate_limited(key.clone());
    }
    Some(Failure {
        message: error,
        routine,
    })
}

thread_local! {
    /// Filled by the panic hook on the panicking thread, read by `caught` on the same thread right
    /// after `catch_unwind` returns (a future's panic unwinds out of the `poll` that caught it).
    static LAST_PANIC: RefCell<Option<(String, Backtrace)>> = const { RefCell::new(None) };
}

/// Chains a panic hook (once per process) that records where a panic happened and its backtrace, so the
/// worker can log them with the key. The previous hook still runs (stderr output is unchanged).
fn install_panic_recorder() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let location = info
                .location()
                .map(|l| format!("{}:{}:{}", l.file(), l.line(), l.column()))
                .unwrap_or_default();
            // Panics are rare; a full backtrace is worth its cost when one happens.
            let backtrace = Backtrace::force_capture();
            LAST_PANIC.with(|last| *last.borrow_mut() = Some((location, backtrace)));
            previous(info);
        }));
    });
}

fn caught(payload: &(dyn std::any::Any + Send)) -> CaughtPanic {
    let message = payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic payload".to_string());
    let (location, backtrace) = match LAST_PANIC.with(|last| last.borrow_mut().take()) {
        Some((location, backtrace)) => (Some(location), Some(backtrace)),
        None => (None, None),
    };
    CaughtPanic {
        message,
        location,
        backtrace,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::fmt::Display;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use mini_kcm_workqueue::default_controller_rate_limiter;

    #[derive(Debug)]
    struct Never;
    impl Display for Never {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("never")
        }
    }
    impl std::error::Error for Never {}
    impl SyncFailure for Never {}

    /// Waits (on paused time, so instantly) until `synced` holds `key`, or fails after an hour of
    /// virtual time.
    fn key(name: &str) -> ObjectKey {
        ObjectKey::new("ns", name)
    }

    fn workers(queue: &WorkQueue<ObjectKey>, panics: &Counter, log: &DecisionLog) -> Workers {
        Workers {
            by: DecidedBy {
                controller: "test",
                family: "apps",
                kind: "ReplicaSet",
            },
            queue: queue.clone(),
            count: 1,
            max_retries: Some(15),
            panics: panics.clone(),
            stats: SyncStats::default(),
            decisions: log.clone(),
        }
    }

    async fn wait_synced(synced: &Arc<Mutex<Vec<String>>>, key: &str) {
        tokio::time::timeout(Duration::from_secs(3600), async {
            while !synced.lock().unwrap().iter().any(|k| k == key) {
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        })
        .await
        .unwrap_or_else(|_| panic!("{key} was never synced successfully"));
    }

    #[tokio::test(start_paused = true)]
    async fn a_panicking_sync_is_retried_and_the_worker_survives() {
        let queue: WorkQueue<ObjectKey> =
            WorkQueue::new("test", default_controller_rate_limiter(), None);
        let log = DecisionLog::new(Default::default());
        let calls: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
        let synced: Arc<Mutex<Vec<String>>> = Arc::default();
        let panics = Counter::unregistered();
        let sync = {
            let calls = calls.clone();
            let synced = synced.clone();
            move |key: ObjectKey| {
                let calls = calls.clone();
                let synced = synced.clone();
                async move {
                    let key = key.to_string();
                    let n = {
                        let mut calls = calls.lock().unwrap();
                        let n = calls.entry(key.clone()).or_default();
                        *n += 1;
                        *n
                    };
                    tokio::task::yield_now().await;
                    if key == "ns/flaky" && n == 1 {
                        crate::observability::decisions::plan("about to blow up");
                        panic!("first sync of {key} blows up");
                    }
                    synced.lock().unwrap().push(key);
                    Ok::<Requeue, Never>(Requeue::Never)
                }
            }
        };
        // One worker: if the panic killed it, nothing would ever be synced again.
        let workers = tokio::spawn(run_workers(workers(&queue, &panics, &log), sync));

        queue.add(key("flaky"));
        wait_synced(&synced, "ns/flaky").await;
        assert_eq!(
            calls.lock().unwrap()["ns/flaky"],
            2,
            "one panic, then one retry"
        );
        assert_eq!(panics.get(), 1);
        // The retry succeeded, so the backoff was reset.
        assert_eq!(queue.num_requeues(&key("flaky")), 0);

        // The same worker keeps serving other keys, and the panicked key is not stuck "processing".
        queue.add(key("other"));
        wait_synced(&synced, "ns/other").await;
        queue.add(key("flaky"));
        tokio::time::timeout(Duration::from_secs(3600), async {
            while calls.lock().unwrap()["ns/flaky"] < 3 {
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        })
        .await
        .expect("the key that panicked can be synced again");
        assert_eq!(panics.get(), 1);
        assert!(!workers.is_finished(), "the worker pool is still running");
        // The panicked sync's decision was filed with its failure.
        let filed = log.recent(&Default::default());
        assert_eq!(filed.len(), 1, "{filed:?}");
        assert_eq!(filed[0].plan, ["about to blow up"]);
        assert!(
            matches!(&filed[0].outcome, crate::observability::decisions::Outcome::Failed { error } if error.contains("blows up")),
            "{filed:?}"
        );

        queue.shut_down();
        workers.await.unwrap();
    }

    /// A sync's failure whose source is the API server's answer `code` (`reason`).
    #[derive(Debug)]
    struct ApiFailure(kube::Error);
    impl ApiFailure {
        fn new(code: u16, reason: &str) -> Self {
            let status = kube::core::Status::failure("the server said no", reason).with_code(code);
            ApiFailure(kube::Error::Api(Box::new(status)))
        }
    }
    impl Display for ApiFailure {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("updating the status")
        }
    }
    impl std::error::Error for ApiFailure {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }
    impl SyncFailure for ApiFailure {}

    type KeyError = crate::controller::SyncKeyError<ApiFailure>;

    #[test]
    fn conflicts_and_stale_caches_are_the_routine_retries() {
        let failed = |code, reason| KeyError::Failed(ApiFailure::new(code, reason));
        assert_eq!(
            failed(409, "Conflict").routine(),
            Some(RoutineRetry::Conflict)
        );
        assert_eq!(
            KeyError::StaleCache { kind: "ReplicaSet" }.routine(),
            Some(RoutineRetry::StaleCache)
        );
        // A name clash is a 409 too, but no retry reads it away: a failure.
        assert_eq!(failed(409, "AlreadyExists").routine(), None);
        assert_eq!(failed(503, "ServiceUnavailable").routine(), None);
        assert_eq!(failed(403, "Forbidden").routine(), None);
        assert_eq!(Never.routine(), None, "no API answer: not routine");
    }

    #[tokio::test(start_paused = true)]
    async fn routine_retries_are_counted_and_filed_apart_from_failures() {
        let queue: WorkQueue<ObjectKey> =
            WorkQueue::new("routine", default_controller_rate_limiter(), None);
        let log = DecisionLog::new(Default::default());
        let panics = Counter::unregistered();
        let w = workers(&queue, &panics, &log);
        let stats = w.stats.clone();
        let calls: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
        let synced: Arc<Mutex<Vec<String>>> = Arc::default();
        let sync = {
            let calls = calls.clone();
            let synced = synced.clone();
            move |key: ObjectKey| {
                let calls = calls.clone();
                let synced = synced.clone();
                async move {
                    let key = key.to_string();
                    let first = {
                        let mut calls = calls.lock().unwrap();
                        let n = calls.entry(key.clone()).or_default();
                        *n += 1;
                        *n == 1
                    };
                    if first {
                        match key.as_str() {
                            // Decided, wrote, then met a conflict: filed as a routine retry.
                            "ns/conflicted" => {
                                crate::observability::decisions::plan("scale web-1 to 2");
                                return Err(KeyError::Failed(ApiFailure::new(409, "Conflict")));
                            }
                            // Held back before deciding anything: only counted.
                            "ns/stale" => return Err(KeyError::StaleCache { kind: "ReplicaSet" }),
                            "ns/broken" => {
                                return Err(KeyError::Failed(ApiFailure::new(
                                    503,
                                    "ServiceUnavailable",
                                )));
                            }
                            _ => {}
                        }
                    }
                    synced.lock().unwrap().push(key);
                    Ok(Requeue::Never)
                }
            }
        };
        let running = tokio::spawn(run_workers(w, sync));
        for name in ["conflicted", "stale", "broken"] {
            queue.add(key(name));
            wait_synced(&synced, &format!("ns/{name}")).await;
        }
        let view = stats.view();
        assert_eq!(
            (view.total, view.failed, view.routine_retries),
            (6, 1, 2),
            "{view:?}"
        );
        let by_reason: Vec<_> = view.routine.iter().map(|r| (r.reason, r.count)).collect();
        assert_eq!(
            by_reason,
            [(RoutineRetry::Conflict, 1), (RoutineRetry::StaleCache, 1)]
        );
        let filed: Vec<(String, crate::observability::decisions::Outcome)> = log
            .recent(&Default::default())
            .into_iter()
            .map(|d| (d.name.clone(), d.outcome.clone()))
            .collect();
        assert_eq!(filed.len(), 2, "{filed:?}");
        assert!(
            filed.iter().any(|(name, outcome)| name == "conflicted"
                && matches!(outcome, Filed::Retried { reason: RoutineRetry::Conflict, error }
                    if error.contains("updating the status"))),
            "{filed:?}"
        );
        assert!(
            filed
                .iter()
                .any(|(name, outcome)| name == "broken" && matches!(outcome, Filed::Failed { .. })),
            "{filed:?}"
        );
        queue.shut_down();
        running.await.unwrap();
    }

    #[derive(Debug)]
    struct NamespaceGone;
    impl Display for NamespaceGone {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("namespace is being terminated")
        }
    }
    impl std::error::Error for NamespaceGone {}
    impl SyncFailure for NamespaceGone {
        fn forgets_the_key(&self) -> bool {
            true
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_failure_that_forgets_the_key_is_not_retried() {
        let queue: WorkQueue<ObjectKey> =
            WorkQueue::new("forget", default_controller_rate_limiter(), None);
        let panics = Counter::unregistered();
        queue.add(key("web"));
        let key = queue.get().await.unwrap();
        handle_outcome(
            &queue,
            &key,
            Outcome::Failed(NamespaceGone),
            Some(15),
            &panics,
        );
        queue.done(&key);
        assert_eq!(queue.num_requeues(&key), 0);
        // Nothing comes back, even after the longest backoff.
        tokio::time::advance(Duration::from_secs(2000)).await;
        assert!(queue.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_success_forgets_failures_and_honours_the_requeue_it_asked_for() {
        let queue: WorkQueue<ObjectKey> =
            WorkQueue::new("requeue", default_controller_rate_limiter(), None);
        let panics = Counter::unregistered();
        queue.add(key("web"));
        let web = queue.get().await.unwrap();
        // A failure first: the key comes back with backoff and counts one retry.
        handle_outcome(&queue, &web, Outcome::Failed(Never), None, &panics);
        queue.done(&web);
        assert_eq!(queue.num_requeues(&web), 1);
        let web = queue.get().await.unwrap();
        // Then a success asking to look again in 30 s: the failures are forgotten and the key waits.
        let asked = Requeue::After(Duration::from_secs(30), "a pod becomes available");
        handle_outcome::<Never>(&queue, &web, Outcome::Synced(asked), None, &panics);
        queue.done(&web);
        assert_eq!(queue.num_requeues(&web), 0);
        tokio::time::advance(Duration::from_secs(29)).await;
        assert!(queue.is_empty(), "not before the delay");
        tokio::time::advance(Duration::from_secs(2)).await;
        let again = tokio::time::timeout(Duration::from_secs(1), queue.get_woken()).await;
        let (again, woken) = again.ok().flatten().expect("the key came back");
        assert_eq!(again, key("web"));
        // The next sync is told why: the sync's own reason.
        assert_eq!(woken.reasons, ["a pod becomes available"]);
        // Nothing asked: nothing comes back.
        handle_outcome::<Never>(
            &queue,
            &key("web"),
            Outcome::Synced(Requeue::Never),
            None,
            &panics,
        );
        queue.done(&key("web"));
        tokio::time::advance(Duration::from_secs(2000)).await;
        assert!(queue.is_empty());
    }

    #[test]
    fn the_earlier_of_two_requeues_wins() {
        let after = |s, why| Requeue::After(Duration::from_secs(s), why);
        assert_eq!(after(5, "a").or_earlier(after(3, "b")), after(3, "b"));
        assert_eq!(after(3, "a").or_earlier(after(3, "b")), after(3, "a"));
        assert_eq!(Requeue::Never.or_earlier(after(3, "b")), after(3, "b"));
        assert_eq!(after(5, "a").or_earlier(Requeue::Never), after(5, "a"));
        assert_eq!(Requeue::after(None, "a"), Requeue::Never);
    }

    #[tokio::test(start_paused = true)]
    async fn a_panic_is_reported_with_its_message_and_location() {
        install_panic_recorder();
        let outcome = AssertUnwindSafe(async { panic!("boom {}", 7) })
            .catch_unwind()
            .await;
        let payload = outcome.expect_err("the future panicked");
        let panic = caught(payload.as_ref());
        assert_eq!(panic.message, "boom 7");
        assert!(
            panic
                .location
                .as_deref()
                .unwrap_or_default()
                .contains("worker.rs"),
            "{:?}",
            panic.location
        );
        assert!(panic.backtrace.is_some());
    }
}
