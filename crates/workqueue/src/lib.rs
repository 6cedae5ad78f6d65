//! A work queue with client-go semantics, for controllers.
//!
//! Controllers never act on events directly: event handlers put the object's key in a
//! [`WorkQueue`], and a few workers take keys out and reconcile. The queue makes that safe and
//! cheap: a key is never processed by two workers at once, repeated events for one key collapse
//! into one reconcile, failed keys come back after a growing delay ([`RateLimiter`]), and the
//! standard `workqueue_*` Prometheus metrics are kept ([`WorkQueueMetrics`]).
//!
//! Beyond client-go, each add may say why the key was queued and how urgent it is ([`Wake`]):
//! a worker learns what woke its sync ([`WorkQueue::get_woken`] returns a [`Woken`]), and keys
//! with a fresh add go before keys queued only by an initial list, relist or resync; those age,
//! and aged ones share the hand-outs 1:1 with fresh ones, so neither side starves ([`Priorities`]).
//!
//! This is a Rust rendering of `k8s.io/client-go/util/workqueue` (queue, delaying queue,
//! rate-limiting queue, default rate limiters, metrics). See `docs/work-queue.md` for the
//! guarantees, the rate-limiting numbers and the metric list.
//!
//! All timing uses Tokio's clock, so tests can run with paused time.
//!
//! Where to start reading: `queue.rs` ([`WorkQueue`]: `add`, `get`, `done`, and the delayed and
//! rate-limited adds), then `rate_limiter.rs` (the per-key exponential backoff and the overall token
//! bucket of [`default_controller_rate_limiter`]); `delaying.rs` holds the keys added with a delay,
//! `ready.rs` the keys ready to hand out and their order (priorities and aging), `wake.rs` what
//! the adds said ([`Wake`], [`Woken`]).

// The public surface is the list of `pub use` below; this keeps every other `pub` from claiming more.
#![warn(unreachable_pub)]

mod delaying;
mod metrics;
mod queue;
mod rate_limiter;
mod ready;
mod wake;

pub use metrics::WorkQueueMetrics;
pub use queue::{QueueSnapshot, QueuedKey, WaitingKey, WorkQueue};
pub use rate_limiter::{
    BucketRateLimiter, MaxOfRateLimiter, RateLimiter, controller_rate_limiter,
    default_controller_rate_limiter,
};
pub use ready::Priorities;
pub use wake::{MAX_REASONS, Priority, Wake, Woken};
