//! Prometheus metrics for work queues, named exactly like client-go's (`workqueue_*`, label
//! `name`), so dashboards and alerts written for kube-controller-manager work unchanged.
//!
//! Two more families are ours, for the priorities ([`Priority`]): the depth split by priority
//! (label `priority="fresh"|"low"`, summing to `workqueue_depth`) and a counter of aged low keys
//! handed out while fresh keys were waiting (the starvation bound at work).
//!
//! [`WorkQueueMetrics`] owns the metric families and is registered once per process; every
//! queue gets its own children through its `name` label. The per-queue bookkeeping (when a key
//! was added, when its processing started) lives in [`Recorder`], which the queue keeps under
//! its own lock so the numbers always agree with the queue's state.

use std::collections::HashMap;
use std::hash::Hash;

use prometheus::{
    Counter, CounterVec, Gauge, GaugeVec, Histogram, HistogramOpts, HistogramVec, Opts, Registry,
};
use tokio::time::Instant;

use crate::wake::Priority;

/// The metric families shared by all queues of a process.
///
/// Cheap to clone (the families are reference counted). Registering twice on the same
/// registry fails with `AlreadyReg`, so create it once and hand clones to each queue.
#[derive(Clone)]
pub struct WorkQueueMetrics {
    depth: GaugeVec,
    adds: CounterVec,
    queue_duration: HistogramVec,
    work_duration: HistogramVec,
    unfinished_work: GaugeVec,
    longest_running: GaugeVec,
    retries: CounterVec,
    depth_by_priority: GaugeVec,
    low_promoted: CounterVec,
}

impl std::fmt::Debug for WorkQueueMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkQueueMetrics").finish_non_exhaustive()
    }
}

impl WorkQueueMetrics {
    /// Creates the seven client-go `workqueue_*` families and our two priority families, and
    /// registers them on `registry`.
    pub fn new(registry: &Registry) -> Result<Self, prometheus::Error> {
        // client-go: ExponentialBuckets(10e-9, 10, 10), i.e. 10ns .. 10s.
        let buckets = prometheus::exponential_buckets(1e-8, 10.0, 10)?;
        let labels = &["name"];
        let metrics = Self {
            depth: GaugeVec::new(
                Opts::new("workqueue_depth", "Current depth of workqueue"),
                labels,
            )?,
            adds: CounterVec::new(
                Opts::new(
                    "workqueue_adds_total",
                    "Total number of adds handled by workqueue",
                ),
                labels,
            )?,
            queue_duration: HistogramVec::new(
                HistogramOpts::new(
                    "workqueue_queue_duration_seconds",
                    "How long in seconds an item stays in workqueue before being requested.",
                )
                .buckets(buckets.clone()),
                labels,
            )?,
            work_duration: HistogramVec::new(
                HistogramOpts::new(
                    "workqueue_work_duration_seconds",
                    "How long in seconds processing an item from workqueue takes.",
                )
                .buckets(buckets),
                labels,
            )?,
            unfinished_work: GaugeVec::new(
                Opts::new(
                    "workqueue_unfinished_work_seconds",
                    "How many seconds of work has done that is in progress and hasn't been \
                     observed by work_duration. Large values indicate stuck threads. One can \
                     deduce the number of stuck threads by observing the rate at which this \
                     increases.",
                ),
                labels,
            )?,
            longest_running: GaugeVec::new(
                Opts::new(
                    "workqueue_longest_running_processor_seconds",
                    "How many seconds has the longest running processor for workqueue been \
                     running.",
                ),
                labels,
            )?,
            retries: CounterVec::new(
                Opts::new(
                    "workqueue_retries_total",
                    "Total number of retries handled by workqueue",
                ),
                labels,
            )?,
            depth_by_priority: GaugeVec::new(
                Opts::new(
                    "workqueue_depth_by_priority",
                    "Current depth of workqueue by the priority of the keys (fresh or low); sums \
                     to workqueue_depth.",
                ),
                &["name", "priority"],
            )?,
            low_promoted: CounterVec::new(
                Opts::new(
                    "workqueue_low_priority_promoted_total",
                    "Aged low-priority keys (ready for max_low_wait) handed out while fresh \
                     keys were waiting.",
                ),
                labels,
            )?,
        };
        registry.register(Box::new(metrics.depth.clone()))?;
        registry.register(Box::new(metrics.adds.clone()))?;
        registry.register(Box::new(metrics.queue_duration.clone()))?;
        registry.register(Box::new(metrics.work_duration.clone()))?;
        registry.register(Box::new(metrics.unfinished_work.clone()))?;
        registry.register(Box::new(metrics.longest_running.clone()))?;
        registry.register(Box::new(metrics.retries.clone()))?;
        registry.register(Box::new(metrics.depth_by_priority.clone()))?;
        registry.register(Box::new(metrics.low_promoted.clone()))?;
        Ok(metrics)
    }

    /// The children labelled `name = queue_name`, plus empty bookkeeping for one queue.
    pub(crate) fn recorder<K>(&self, queue_name: &str) -> Recorder<K> {
        let l = &[queue_name];
        Recorder {
            depth: self.depth.with_label_values(l),
            adds: self.adds.with_label_values(l),
            queue_duration: self.queue_duration.with_label_values(l),
            work_duration: self.work_duration.with_label_values(l),
            unfinished_work: self.unfinished_work.with_label_values(l),
            longest_running: self.longest_running.with_label_values(l),
            retries: self.retries.with_label_values(l),
            depth_fresh: self
                .depth_by_priority
                .with_label_values(&[queue_name, Priority::Fresh.as_str()]),
            depth_low: self
                .depth_by_priority
                .with_label_values(&[queue_name, Priority::Low.as_str()]),
            low_promoted: self.low_promoted.with_label_values(l),
            add_times: HashMap::new(),
            processing_start: HashMap::new(),
        }
    }
}

/// One queue's metric children and the timestamps needed to compute durations.
///
/// The queue calls these hooks while holding its lock, at the same points client-go does.
pub(crate) struct Recorder<K> {
    depth: Gauge,
    adds: Counter,
    queue_duration: Histogram,
    work_duration: Histogram,
    unfinished_work: Gauge,
    longest_running: Gauge,
    retries: Counter,
    depth_fresh: Gauge,
    depth_low: Gauge,
    low_promoted: Counter,
    /// When each queued key was first marked dirty; the queue latency runs from here.
    add_times: HashMap<K, Instant>,
    /// When each in-flight key was handed to a worker.
    processing_start: HashMap<K, Instant>,
}

impl<K: Eq + Hash + Clone> Recorder<K> {
    fn depth_of(&self, priority: Priority) -> &Gauge {
        match priority {
            Priority::Fresh => &self.depth_fresh,
            Priority::Low => &self.depth_low,
        }
    }

    /// A key became dirty (a real add, not a collapsed duplicate).
    pub(crate) fn add(&mut self, key: &K, priority: Priority, now: Instant) {
        self.adds.inc();
        self.depth.inc();
        self.depth_of(priority).inc();
        // Keep the earliest time: a key re-added while processing has waited since then.
        self.add_times.entry(key.clone()).or_insert(now);
    }

    /// A dirty key's priority went from low to fresh.
    pub(crate) fn upgrade(&self) {
        self.depth_low.dec();
        self.depth_fresh.inc();
    }

    /// A key was handed to a worker; `promoted`: an aged low key, handed out while fresh keys
    /// were waiting.
    pub(crate) fn get(&mut self, key: &K, priority: Priority, promoted: bool, now: Instant) {
        self.depth.dec();
        self.depth_of(priority).dec();
        if promoted {
            self.low_promoted.inc();
        }
        self.processing_start.insert(key.clone(), now);
        if let Some(added) = self.add_times.remove(key) {
            self.queue_duration
                .observe(now.saturating_duration_since(added).as_secs_f64());
        }
    }

    /// A worker finished a key.
    pub(crate) fn done(&mut self, key: &K, now: Instant) {
        if let Some(started) = self.processing_start.remove(key) {
            self.work_duration
                .observe(now.saturating_duration_since(started).as_secs_f64());
        }
    }

    /// A delayed or rate-limited add was requested.
    pub(crate) fn retry(&self) {
        self.retries.inc();
    }

    /// Recomputes the two "work in progress" gauges from the in-flight start times.
    pub(crate) fn update_unfinished_work(&self, now: Instant) {
        let mut total = 0.0;
        let mut oldest: f64 = 0.0;
        for started in self.processing_start.values() {
            let age = now.saturating_duration_since(*started).as_secs_f64();
            total += age;
            oldest = oldest.max(age);
        }
        self.unfinished_work.set(total);
        self.longest_running.set(oldest);
    }
}

#[cfg(test)]
pub(crate) mod test_support {
    use prometheus::{Encoder, Registry, TextEncoder};

    /// Reads one sample back from the registry's text exposition, e.g.
    /// `sample(&r, "workqueue_adds_total", "rs")`. The text format is used (not the data model)
    /// so this works whether or not the prometheus `protobuf` feature is enabled elsewhere.
    pub(crate) fn sample(registry: &Registry, metric: &str, queue: &str) -> Option<f64> {
        let text = exposition(registry);
        let prefix = format!("{metric}{{name=\"{queue}\"}} ");
        text.lines()
            .find_map(|line| line.strip_prefix(&prefix))
            .map(|v| v.parse().expect("number"))
    }

    /// Like [`sample`], for a series with more labels, e.g.
    /// `sample_with(&r, "workqueue_depth_by_priority", r#"name="rs",priority="low""#)`.
    pub(crate) fn sample_with(registry: &Registry, metric: &str, labels: &str) -> Option<f64> {
        let text = exposition(registry);
        let prefix = format!("{metric}{{{labels}}} ");
        text.lines()
            .find_map(|line| line.strip_prefix(&prefix))
            .map(|v| v.parse().expect("number"))
    }

    /// The registry rendered in the Prometheus text format.
    pub(crate) fn exposition(registry: &Registry) -> String {
        let mut buf = Vec::new();
        TextEncoder::new()
            .encode(&registry.gather(), &mut buf)
            .expect("encode");
        String::from_utf8(buf).expect("utf8")
    }
}

#[cfg(test)]
mod tests {
    use super::test_support::{exposition, sample, sample_with};
    use super::*;
    use std::time::Duration;

    #[test]
    fn registers_once_with_client_go_names_and_buckets() {
        let registry = Registry::new();
        let m = WorkQueueMetrics::new(&registry).unwrap();
        assert!(
            WorkQueueMetrics::new(&registry).is_err(),
            "second registration must fail"
        );
        let r = m.recorder::<u32>("q");
        r.retry();
        let mut names: Vec<_> = registry
            .gather()
            .iter()
            .map(|f| f.name().to_string())
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                "workqueue_adds_total",
                "workqueue_depth",
                "workqueue_depth_by_priority",
                "workqueue_longest_running_processor_seconds",
                "workqueue_low_priority_promoted_total",
                "workqueue_queue_duration_seconds",
                "workqueue_retries_total",
                "workqueue_unfinished_work_seconds",
                "workqueue_work_duration_seconds",
            ]
        );
        let text = exposition(&registry);
        let buckets: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("workqueue_work_duration_seconds_bucket"))
            .collect();
        // 10 finite buckets (1e-8 .. 10) plus +Inf.
        assert_eq!(buckets.len(), 11, "{buckets:?}");
        assert!(buckets[0].contains("le=\"0.00000001\""), "{}", buckets[0]);
        assert!(buckets[9].contains("le=\"10\""), "{}", buckets[9]);
        assert_eq!(sample(&registry, "workqueue_retries_total", "q"), Some(1.0));
    }

    #[test]
    fn recorder_tracks_depth_latency_and_unfinished_work() {
        let registry = Registry::new();
        let m = WorkQueueMetrics::new(&registry).unwrap();
        let mut r = m.recorder::<&str>("q");
        let t0 = Instant::now();
        r.add(&"a", Priority::Fresh, t0);
        r.add(&"b", Priority::Fresh, t0);
        assert_eq!(sample(&registry, "workqueue_depth", "q"), Some(2.0));
        r.get(
            &"a",
            Priority::Fresh,
            false,
            t0 + Duration::from_millis(250),
        );
        assert_eq!(sample(&registry, "workqueue_depth", "q"), Some(1.0));
        assert_eq!(
            sample(&registry, "workqueue_queue_duration_seconds_sum", "q"),
            Some(0.25)
        );
        r.update_unfinished_work(t0 + Duration::from_millis(1250));
        assert_eq!(
            sample(&registry, "workqueue_unfinished_work_seconds", "q"),
            Some(1.0)
        );
        r.get(
            &"b",
            Priority::Fresh,
            false,
            t0 + Duration::from_millis(750),
        );
        r.update_unfinished_work(t0 + Duration::from_millis(1250));
        assert_eq!(
            sample(&registry, "workqueue_unfinished_work_seconds", "q"),
            Some(1.5)
        );
        assert_eq!(
            sample(
                &registry,
                "workqueue_longest_running_processor_seconds",
                "q"
            ),
            Some(1.0)
        );
        r.done(&"a", t0 + Duration::from_millis(2250));
        r.done(&"b", t0 + Duration::from_millis(2250));
        assert_eq!(
            sample(&registry, "workqueue_work_duration_seconds_count", "q"),
            Some(2.0)
        );
        assert_eq!(
            sample(&registry, "workqueue_work_duration_seconds_sum", "q"),
            Some(3.5)
        );
        r.update_unfinished_work(t0 + Duration::from_millis(3000));
        assert_eq!(
            sample(&registry, "workqueue_unfinished_work_seconds", "q"),
            Some(0.0)
        );
    }

    #[test]
    fn depth_by_priority_sums_to_depth_and_promotions_count() {
        let registry = Registry::new();
        let m = WorkQueueMetrics::new(&registry).unwrap();
        let mut r = m.recorder::<&str>("q");
        let by = |p: &str| {
            sample_with(
                &registry,
                "workqueue_depth_by_priority",
                &format!("name=\"q\",priority=\"{p}\""),
            )
        };
        let t0 = Instant::now();
        assert_eq!(
            (by("fresh"), by("low")),
            (Some(0.0), Some(0.0)),
            "exported from the start"
        );
        r.add(&"a", Priority::Low, t0);
        r.add(&"b", Priority::Low, t0);
        r.add(&"c", Priority::Fresh, t0);
        assert_eq!((by("fresh"), by("low")), (Some(1.0), Some(2.0)));
        r.upgrade();
        assert_eq!((by("fresh"), by("low")), (Some(2.0), Some(1.0)));
        assert_eq!(sample(&registry, "workqueue_depth", "q"), Some(3.0));
        r.get(&"a", Priority::Low, true, t0);
        assert_eq!((by("fresh"), by("low")), (Some(2.0), Some(0.0)));
        assert_eq!(
            sample(&registry, "workqueue_low_priority_promoted_total", "q"),
            Some(1.0)
        );
        r.get(&"b", Priority::Fresh, false, t0);
        assert_eq!((by("fresh"), by("low")), (Some(1.0), Some(0.0)));
        assert_eq!(
            sample(&registry, "workqueue_low_priority_promoted_total", "q"),
            Some(1.0)
        );
    }
}
