//! The metrics every controller reports beside its work queue's: one value per controller kind,
//! shared by the controller instances of both API families (their queues are told apart by name).

use mini_kcm_workqueue::WorkQueueMetrics;
use prometheus::Registry;

use crate::consistency::StaleSyncSkips;
use crate::counter::{register_counter, unregistered_counter};
use crate::events::EventDrops;
use crate::status_writes::{DEFERRED_COUNTER_HELP, DEFERRED_COUNTER_NAME};
use crate::worker::SyncPanics;

#[derive(Clone)]
pub struct ControllerMetrics {
    /// Upstream's `<subsystem>_stale_sync_skips_total`.
    pub stale_sync_skips: StaleSyncSkips,
    /// `<subsystem>_sync_panics_total` (see `crate::worker`).
    pub sync_panics: SyncPanics,
    /// `<subsystem>_events_dropped_total` (see `crate::events`).
    pub events_dropped: EventDrops,
    /// `<subsystem>_status_writes_deferred_total` (see `crate::status_writes`).
    pub status_writes_deferred: prometheus::IntCounter,
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
            sync_panics: SyncPanics::register(registry, subsystem)?,
            events_dropped: EventDrops::register(registry, subsystem)?,
            status_writes_deferred: register_counter(
                registry,
                subsystem,
                DEFERRED_COUNTER_NAME,
                DEFERRED_COUNTER_HELP,
            )?,
            queue,
        })
    }

    /// Metrics registered nowhere (unit tests).
    pub fn unregistered() -> Self {
        ControllerMetrics {
            stale_sync_skips: StaleSyncSkips::unregistered(),
            sync_panics: SyncPanics::unregistered(),
            events_dropped: EventDrops::unregistered(),
            status_writes_deferred: unregistered_counter(),
            queue: None,
        }
    }
}
