//! The backoff on deleting failed daemon pods (upstream `failedPodsBackoff`, a client-go
//! `flowcontrol.Backoff` of 1 s doubling up to 15 min, keyed by DaemonSet UID, observed generation and node).
//!
//! Why: a kubelet that rejects a daemon pod (e.g. a host port in use) fails it at once; deleting and
//! recreating it immediately would make the controller and the kubelet fight in a hot loop. So after a
//! failed pod is deleted on a node, the next failed pod there is only deleted once the delay has passed,
//! each deletion doubling the delay. An entry idle for more than twice the maximum starts again from the
//! initial delay, and [`FailedPodBackoff::gc`] (run every [`BACKOFF_GC_INTERVAL`]) forgets such entries.
//!
//! Times are `tokio::time::Instant`s passed in by the caller, so tests can pause and advance the clock.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

use crate::DaemonSetObject;

/// First delay after a failed pod was deleted on a node.
pub(crate) const FAILED_POD_BACKOFF_INITIAL: Duration = Duration::from_secs(1);
/// The delay never grows beyond this.
pub(crate) const FAILED_POD_BACKOFF_MAX: Duration = Duration::from_secs(15 * 60);
/// How often the controller should call [`FailedPodBackoff::gc`] (upstream `BackoffGCInterval`).
pub(crate) const BACKOFF_GC_INTERVAL: Duration = Duration::from_secs(60);

/// The backoff key of a DaemonSet on a node: `<uid>/<status.observedGeneration>/<node>`. The generation is
/// part of it, so a template change (once observed) starts a fresh backoff.
pub(crate) fn failed_pods_backoff_key(ds: &DaemonSetObject, node_name: &str) -> String {
    let uid = ds.metadata.uid.as_deref().unwrap_or_default();
    let observed_generation = ds
        .status
        .as_ref()
        .and_then(|s| s.observed_generation)
        .unwrap_or(0);
    format!("{uid}/{observed_generation}/{node_name}")
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    delay: Duration,
    last_update: Instant,
}

/// Per-key exponential backoff, as client-go's `Backoff` without jitter.
#[derive(Debug, Clone)]
pub(crate) struct FailedPodBackoff {
    initial: Duration,
    max: Duration,
    entries: HashMap<String, Entry>,
}

impl Default for FailedPodBackoff {
    fn default() -> Self {
        Self::new(FAILED_POD_BACKOFF_INITIAL, FAILED_POD_BACKOFF_MAX)
    }
}

impl FailedPodBackoff {
    pub(crate) fn new(initial: Duration, max: Duration) -> Self {
        Self {
            initial,
            max,
            entries: HashMap::new(),
        }
    }

    /// An entry idle for longer than twice the maximum is stale: it neither delays nor keeps growing.
    fn expired(&self, entry: &Entry, now: Instant) -> bool {
        now.saturating_duration_since(entry.last_update) > self.max * 2
    }

    /// The current delay of `key` (zero if none).
    pub(crate) fn get(&self, key: &str) -> Duration {
        self.entries.get(key).map_or(Duration::ZERO, |e| e.delay)
    }

    /// Records a deletion at `now`: a new (or stale) key starts at the initial delay, otherwise the delay
    /// doubles, capped at the maximum.
    pub(crate) fn next(&mut self, key: &str, now: Instant) {
        let delay = match self.entries.get(key) {
            Some(entry) if !self.expired(entry, now) => (entry.delay * 2).min(self.max),
            _ => self.initial,
        };
        self.entries.insert(
            key.to_owned(),
            Entry {
                delay,
                last_update: now,
            },
        );
    }

    /// Whether less than the current delay has passed since the last [`FailedPodBackoff::next`] of `key`
    /// (upstream `IsInBackOffSinceUpdate`).
    pub(crate) fn is_in_backoff_since_update(&self, key: &str, now: Instant) -> bool {
        self.entries.get(key).is_some_and(|entry| {
            !self.expired(entry, now)
                && now.saturating_duration_since(entry.last_update) < entry.delay
        })
    }

    #[cfg(test)]
    /// Forgets `key`.
    pub(crate) fn reset(&mut self, key: &str) {
        self.entries.remove(key);
    }

    /// Forgets every stale entry (idle for more than twice the maximum).
    pub(crate) fn gc(&mut self, now: Instant) {
        let max = self.max;
        self.entries
            .retain(|_, e| now.saturating_duration_since(e.last_update) <= max * 2);
    }

    #[cfg(test)]
    /// Number of keys tracked.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_fixtures::new_ds;
    use k8s_openapi::api::apps::v1::DaemonSetStatus;

    #[test]
    fn key_has_uid_observed_generation_and_node() {
        let mut ds = new_ds("foo");
        assert_eq!(failed_pods_backoff_key(&ds, "node-0"), "uid-foo/0/node-0");
        ds.status = Some(DaemonSetStatus {
            observed_generation: Some(3),
            ..Default::default()
        });
        assert_eq!(failed_pods_backoff_key(&ds, "node-0"), "uid-foo/3/node-0");
    }

    /// Mirrors the backoff part of upstream `TestDaemonKillFailedPodsBackoff`, with paused tokio time.
    #[tokio::test(start_paused = true)]
    async fn backoff_waits_out_the_delay() {
        let mut backoff = FailedPodBackoff::default();
        let key = "uid/0/node-0";
        assert!(!backoff.is_in_backoff_since_update(key, Instant::now()));
        assert_eq!(backoff.get(key), Duration::ZERO);

        backoff.next(key, Instant::now());
        let initial = backoff.get(key);
        assert_eq!(initial, FAILED_POD_BACKOFF_INITIAL);
        assert!(backoff.is_in_backoff_since_update(key, Instant::now()));

        tokio::time::advance(initial - Duration::from_nanos(1)).await;
        assert!(backoff.is_in_backoff_since_update(key, Instant::now()));
        assert_eq!(
            backoff.get(key),
            initial,
            "waiting does not raise the delay"
        );

        tokio::time::advance(Duration::from_nanos(1)).await;
        assert!(!backoff.is_in_backoff_since_update(key, Instant::now()));

        backoff.next(key, Instant::now());
        assert_eq!(backoff.get(key), Duration::from_secs(2));
        backoff.next(key, Instant::now());
        assert_eq!(backoff.get(key), Duration::from_secs(4));
    }

    #[tokio::test(start_paused = true)]
    async fn delay_is_capped_and_resets_after_long_idle() {
        let mut backoff = FailedPodBackoff::default();
        let key = "k";
        for _ in 0..20 {
            backoff.next(key, Instant::now());
        }
        assert_eq!(backoff.get(key), FAILED_POD_BACKOFF_MAX);

        // Exactly twice the maximum idle is not yet stale.
        tokio::time::advance(FAILED_POD_BACKOFF_MAX * 2).await;
        backoff.gc(Instant::now());
        assert_eq!(backoff.len(), 1);
        tokio::time::advance(Duration::from_nanos(1)).await;
        assert!(!backoff.is_in_backoff_since_update(key, Instant::now()));
        backoff.next(key, Instant::now());
        assert_eq!(
            backoff.get(key),
            FAILED_POD_BACKOFF_INITIAL,
            "stale entry restarts"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn gc_forgets_stale_entries_only() {
        let mut backoff = FailedPodBackoff::default();
        backoff.next("old", Instant::now());
        tokio::time::advance(FAILED_POD_BACKOFF_MAX * 2).await;
        backoff.next("fresh", Instant::now());
        tokio::time::advance(BACKOFF_GC_INTERVAL).await;
        backoff.gc(Instant::now());
        assert_eq!(backoff.get("old"), Duration::ZERO);
        assert_eq!(backoff.get("fresh"), FAILED_POD_BACKOFF_INITIAL);
        assert_eq!(backoff.len(), 1);
        backoff.reset("fresh");
        assert!(backoff.is_empty());
    }
}
