//! A work queue with client-go semantics, for controllers.
//!
//! Controllers never act on events directly: event handlers put the object's key in a
//! [`WorkQueue`], and a few workers take keys out and reconcile. The queue makes that safe and
//! cheap: a key is never processed by two workers at once, repeated events for one key collapse
//! into one reconcile, failed keys come back after a growing delay ([`RateLimiter`]), and the
//! standard `workqueue_*` Prometheus metrics are kept ([`WorkQueueMetrics`]).
//!
//! This is a Rust rendering of `k8s.io/client-go/util/workqueue` (queue, delaying queue,
//! rate-limiting queue, default rate limiters, metrics). See `docs/work-queue.md` for the
//! guarantees, the rate-limiting numbers and the metric list.
//!
//! All timing uses Tokio's clock, so tests can run with paused time.
//!
//! Where to start reading: `queue.rs` ([`WorkQueue`]: `add`, `get`, `done`, and the delayed and
//! rate-limited adds), then `rate_limiter.rs` (the per-key exponential backoff and the overall token
//! bucket of [`default_controller_rate_limiter`]); `delaying.rs` holds the keys added with a delay.

// The public surface is the list of `pub use` below; this keeps every other `pub` from claiming more.
#![warn(unreachable_pub)]

mod delaying;
mod metrics;
mod queue;
mod rate_limiter;

pub use metrics::WorkQueueMetrics;
pub use queue::{QueueSnapshot, WaitingKey, WorkQueue};
pub use rate_limiter::{
    BucketRateLimiter, MaxOfRateLimiter, RateLimiter, controller_rate_limiter,
    default_controller_rate_limiter,
};
