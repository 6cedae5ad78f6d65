//! The metrics every controller reports beside its work queue's: one value per controller kind,
//! shared by the controller instances of both API families (their queues are told apart by name).

use mini_kcm_workqueue::WorkQueueMetrics;
use prometheus::Registry;

use crate::consistency::StaleSyncSkips;
use crate::events::EVENTS_DROPPED;
use crate::status_writes::STATUS_WRITES_DEFERRED;
use crate::worker::SYNC_PANICS;

pub use crate::counter::Counter;

#[derive(Clone)]
pub struct ControllerMetrics {
    /// Upstream's `<subsystem>_stale_sync_skips_total`.
    pub stale_sync_skips: StaleSyncSkips,
    /// `<subsystem>_sync_panics_total` (see `crate::worker`).
    pub sync_panics: Counter,
    /// `<subsystem>_events_dropped_total` (see `crate::events`).
    pub events_dropped: Counter,
    /// `<subsystem>_status_writes_deferred_total` (see `crate::status_writes`).
    pub status_writes_deferred: Counter,
    /// The work queue metrics (client-go names), if exported.
    pub queue: Option<WorkQueueMetrics>,
}

impl ControllerMetrics {
    /// Registers the controller's own metrics under `subsystem` (e.g. `replicaset_controller`).
    pub fn new(
        registry: &Registry,
        subsystem: &str,
        queue: Option<WorkQueueMetrics>,
    ) -> Result<Self, prometheus::Error> {
        Ok(ControllerMetrics {
            stale_sync_skips: StaleSyncSkips::register(registry, subsystem)?,
            sync_panics: Counter::register(registry, subsystem, &SYNC_PANICS)?,
            events_dropped: Counter::register(registry, subsystem, &EVENTS_DROPPED)?,
            status_writes_deferred: Counter::register(
                registry,
                subsystem,
                &STATUS_WRITES_DEFERRED,
            )?,
            queue,
        })
    }

    /// Metrics registered nowhere (unit tests).
    pub fn unregistered() -> Self {
        ControllerMetrics {
            stale_sync_skips: StaleSyncSkips::unregistered(),
            sync_panics: Counter::unregistered(),
            events_dropped: Counter::unregistered(),
            status_writes_deferred: Counter::unregistered(),
            queue: None,
        }
    }
}
