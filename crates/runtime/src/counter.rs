//! The shape of the per-controller counters (`<subsystem>_sync_panics_total`,
//! `<subsystem>_events_dropped_total`, `<subsystem>_status_writes_deferred_total`): one `IntCounter`
//! named under the controller's metrics subsystem, or registered nowhere in unit tests. Kept apart from
//! `crate::metrics`, which bundles the counters.

/// A counter `<subsystem>_<name>` registered in `registry` (the per-controller counters' shape).
pub(crate) fn register_counter(
    registry: &prometheus::Registry,
    subsystem: &str,
    name: &str,
    help: &str,
) -> Result<prometheus::IntCounter, prometheus::Error> {
    let counter =
        prometheus::IntCounter::with_opts(prometheus::Opts::new(name, help).subsystem(subsystem))?;
    registry.register(Box::new(counter.clone()))?;
    Ok(counter)
}

/// A counter registered nowhere (unit tests).
pub(crate) fn unregistered_counter() -> prometheus::IntCounter {
    prometheus::IntCounter::new("unregistered", "unregistered")
        .unwrap_or_else(|_| unreachable!("static metric options are valid"))
}
