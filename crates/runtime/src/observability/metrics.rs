//! The metrics every controller reports beside its work queue's: one value per controller kind,
//! shared by the controller instances of both API families (their queues are told apart by name), and
//! the one histogram only the ReplicaSet controller has (`sorting_deletion_age_ratio`).

use mini_kcm_workqueue::WorkQueueMetrics;
use prometheus::Registry;

use crate::api::status_writes::STATUS_WRITES_DEFERRED;
use crate::controller::consistency::StaleSyncSkips;
use crate::controller::worker::SYNC_PANICS;
use crate::observability::events::EVENTS_DROPPED;

pub use crate::observability::counter::Counter;

/// One controller kind's metrics, shared by its instances of both API families; clones update the
/// same series.
#[derive(Clone)]
pub struct ControllerMetrics {
    /// Upstream's `<subsystem>_stale_sync_skips_total`.
    pub stale_sync_skips: StaleSyncSkips,
    /// `<subsystem>_sync_panics_total` (see `crate::controller::worker`).
    pub sync_panics: Counter,
    /// `<subsystem>_events_dropped_total` (see `crate::observability::events`).
    pub events_dropped: Counter,
    /// `<subsystem>_status_writes_deferred_total` (see `crate::api::status_writes`).
    pub status_writes_deferred: Counter,
    /// The work queue metrics (client-go names), if exported.
    pub queue: Option<WorkQueueMetrics>,
    /// Upstream's `replicaset_controller_sorting_deletion_age_ratio`, for the controller that ranks
    /// pods to delete ([`ControllerMetrics::with_sorting_deletion_age_ratio`]).
    pub sorting_deletion_age_ratio: Option<prometheus::Histogram>,
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
            sorting_deletion_age_ratio: None,
        })
    }

    /// Adds `<subsystem>_sorting_deletion_age_ratio`: for each ready pod a scale-down chose after
    /// ranking, its age over the youngest ready pod's, with upstream's help text and buckets
    /// (0.25 × 2ⁿ, six of them).
    pub fn with_sorting_deletion_age_ratio(
        mut self,
        registry: &Registry,
        subsystem: &str,
    ) -> Result<Self, prometheus::Error> {
        let histogram = prometheus::Histogram::with_opts(
            prometheus::HistogramOpts::new(
                "sorting_deletion_age_ratio",
                "The ratio of chosen deleted pod's ages to the current youngest pod's age (at the time). \
                 Should be <2. The intent of this metric is to measure the rough efficacy of the sorting \
                 (and deletion) of pods when a replicaset scales down. This only considers Ready pods when \
                 calculating and reporting.",
            )
            .subsystem(subsystem)
            .buckets(prometheus::exponential_buckets(0.25, 2.0, 6)?),
        )?;
        registry.register(Box::new(histogram.clone()))?;
        self.sorting_deletion_age_ratio = Some(histogram);
        Ok(self)
    }

    /// Metrics registered nowhere (unit tests).
    pub fn unregistered() -> Self {
        ControllerMetrics {
            stale_sync_skips: StaleSyncSkips::unregistered(),
            sync_panics: Counter::unregistered(),
            events_dropped: Counter::unregistered(),
            status_writes_deferred: Counter::unregistered(),
            queue: None,
            sorting_deletion_age_ratio: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_age_ratio_histogram_has_upstreams_name_and_buckets() {
        let registry = Registry::new();
        let metrics = ControllerMetrics::new(&registry, "replicaset_controller", None)
            .and_then(|m| m.with_sorting_deletion_age_ratio(&registry, "replicaset_controller"))
            .unwrap();
        metrics
            .sorting_deletion_age_ratio
            .as_ref()
            .unwrap()
            .observe(1.0);
        let families = registry.gather();
        let family = families
            .iter()
            .find(|f| f.name() == "replicaset_controller_sorting_deletion_age_ratio")
            .expect("registered");
        let histogram = family.get_metric()[0].get_histogram();
        let bounds: Vec<f64> = histogram
            .get_bucket()
            .iter()
            .map(|b| b.upper_bound())
            .collect();
        assert_eq!(bounds, [0.25, 0.5, 1.0, 2.0, 4.0, 8.0]);
        assert_eq!(histogram.get_sample_count(), 1);
        // The other controllers do not get it.
        assert!(
            ControllerMetrics::unregistered()
                .sorting_deletion_age_ratio
                .is_none()
        );
    }
}
