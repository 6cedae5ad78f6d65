//! `/metrics/slis`: component-base's health-check SLIs, on a registry of their own as upstream's.
//!
//! Every evaluation of `/healthz`, `/livez` or `/readyz` records each of its checks:
//! `kubernetes_healthcheck{name,type}` is the last result (1 passed, 0 failed) and
//! `kubernetes_healthchecks_total{name,type,status}` counts results, `type` being the endpoint. Upstream
//! records in the same place (its health handler), so the series appear once a probe or a person asked.
//! `DELETE /metrics/slis` resets them, as upstream's `SLIMetricsWithReset`.

use std::time::SystemTime;

use prometheus::{CounterVec, Gauge, GaugeVec, Opts, Registry};

/// The SLI registry and its two metrics. Clones record into the same values.
#[derive(Clone)]
pub(crate) struct HealthSlis {
    pub(crate) registry: Registry,
    last: GaugeVec,
    total: CounterVec,
}

impl HealthSlis {
    pub(crate) fn new(started: SystemTime) -> Result<Self, prometheus::Error> {
        let registry = Registry::new();
        let last = GaugeVec::new(
            Opts::new(
                "kubernetes_healthcheck",
                "This metric records the result of a single healthcheck.",
            ),
            &["name", "type"],
        )?;
        let total = CounterVec::new(
            Opts::new(
                "kubernetes_healthchecks_total",
                "This metric records the results of all healthcheck.",
            ),
            &["name", "type", "status"],
        )?;
        // Upstream registers the process start time beside them.
        let start = Gauge::new(
            "process_start_time_seconds",
            "Start time of the process since unix epoch in seconds.",
        )?;
        start.set(
            started
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap_or_default()
                .as_secs_f64(),
        );
        registry.register(Box::new(last.clone()))?;
        registry.register(Box::new(total.clone()))?;
        registry.register(Box::new(start))?;
        Ok(HealthSlis {
            registry,
            last,
            total,
        })
    }

    /// Records one check `name` of endpoint `kind` (`healthz`, `livez`, `readyz`).
    pub(crate) fn observe(&self, name: &str, kind: &str, passed: bool) {
        self.last
            .with_label_values(&[name, kind])
            .set(if passed { 1.0 } else { 0.0 });
        let status = if passed { "success" } else { "error" };
        self.total.with_label_values(&[name, kind, status]).inc();
    }

    pub(crate) fn reset(&self) {
        self.last.reset();
        self.total.reset();
    }
}
