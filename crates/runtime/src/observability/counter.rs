//! The per-controller counters (`<subsystem>_sync_panics_total`, `<subsystem>_events_dropped_total`,
//! `<subsystem>_status_writes_deferred_total`): one shape, [`Counter`], named under the controller's
//! metrics subsystem by the [`CounterSpec`] of the module that counts, or registered nowhere in unit
//! tests. `crate::observability::metrics` bundles them.

/// A counter's name (after the subsystem) and help text, kept beside the code that counts.
pub(crate) struct CounterSpec {
    pub(crate) name: &'static str,
    pub(crate) help: &'static str,
}

/// One per-controller counter. Clones count into the same value.
#[derive(Clone)]
pub struct Counter(prometheus::IntCounter);

impl Counter {
    /// The counter `<subsystem>_<spec.name>`, registered in `registry`.
    pub(crate) fn register(
        registry: &prometheus::Registry,
        subsystem: &str,
        spec: &CounterSpec,
    ) -> Result<Self, prometheus::Error> {
        let counter = prometheus::IntCounter::with_opts(
            prometheus::Opts::new(spec.name, spec.help).subsystem(subsystem),
        )?;
        registry.register(Box::new(counter.clone()))?;
        Ok(Counter(counter))
    }

    /// A counter registered nowhere (unit tests).
    pub(crate) fn unregistered() -> Self {
        Counter(
            prometheus::IntCounter::new("unregistered", "unregistered")
                .unwrap_or_else(|_| unreachable!("static metric options are valid")),
        )
    }

    pub(crate) fn inc(&self) {
        self.0.inc();
    }

    /// The count so far.
    pub fn get(&self) -> u64 {
        self.0.get()
    }
}
