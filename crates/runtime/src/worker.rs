//! The worker loop every controller shares: take a key, sync it, then forget it on success or requeue
//! it with rate-limited backoff on failure (upstream's `processNextWorkItem`).

use std::fmt::Display;
use std::future::Future;

/// An error a sync returns. `is_expected` marks routine retries (e.g. the cache has not caught up with
/// our own writes yet), logged at debug rather than warn.
pub trait SyncFailure: Display {
    fn is_expected(&self) -> bool {
        false
    }
}

use mini_kcm_workqueue::WorkQueue;
use tracing::Instrument;

/// Runs `workers` concurrent workers over `queue` until it is shut down and drained. The queue guarantees
/// one key is never synced by two workers at once. With `max_retries`, a key that failed that many
/// times in a row is dropped until its next event (the Deployment controller's rule); otherwise failures
/// are retried forever with backoff (ReplicaSet, DaemonSet).
pub async fn run_workers<F, Fut, E>(
    controller: &'static str,
    queue: WorkQueue<String>,
    workers: usize,
    max_retries: Option<usize>,
    sync: F,
) where
    F: Fn(String) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<(), E>> + Send + 'static,
    E: SyncFailure + Send + 'static,
{
    // A JoinSet aborts the workers if this future is dropped: a controller that is cancelled (or
    // crashes) stops all of its work, as a dying process would.
    let mut handles = tokio::task::JoinSet::new();
    for _ in 0..workers.max(1) {
        let queue = queue.clone();
        let sync = sync.clone();
        handles.spawn(async move {
            while let Some(key) = queue.get().await {
                let span = tracing::info_span!("sync", controller, key = %key);
                let result = sync(key.clone()).instrument(span.clone()).await;
                match result {
                    Ok(()) => queue.forget(&key),
                    Err(e) => {
                        let retries = queue.num_requeues(&key);
                        if max_retries.is_some_and(|max| retries >= max) {
                            span.in_scope(|| {
                                tracing::warn!(error = %e, retries, "sync failed too often; dropping the key until its next change")
                            });
                            queue.forget(&key);
                        } else {
                            span.in_scope(|| {
                                if e.is_expected() {
                                    tracing::debug!(error = %e, retries, "requeued with backoff");
                                } else {
                                    tracing::warn!(error = %e, retries, "sync failed; requeued with backoff");
                                }
                            });
                            queue.add_rate_limited(key.clone());
                        }
                    }
                }
                queue.done(&key);
            }
        });
    }
    while let Some(result) = handles.join_next().await {
        if let Err(e) = result {
            tracing::error!(controller, error = %e, "a worker panicked");
        }
    }
}
