//! Event correlation, with the rules and constants of client-go's `EventCorrelator`.
//!
//! Without it a scale-up of 500 pods writes 500 Events. Upstream folds them, in three steps applied
//! to every event before it is written:
//! 1. **aggregation**: events that share source, object, type and reason but differ in message are
//!    counted per group; from the 10th distinct message within 10 minutes on, they are replaced by one
//!    event `"(combined from similar events): <message>"`;
//! 2. **logging**: an event seen before (same key) becomes a PATCH of the existing Event's count,
//!    last timestamp and message instead of a new Event;
//! 3. **spam filter**: a token bucket per source, object and type (burst 25, one token per 5 minutes)
//!    skips what exceeds it (the count keeps growing, so the next write carries the skipped ones).
//!
//! Pure (the caller passes the time), so the tables are unit-tested with paused tokio time.
//!
//! client-go keys its tables with strings that join the fields (source, object, type, reason, message);
//! here a key is a 64-bit hash of the same fields ([`Fingerprint`]), so an entry costs a few words
//! instead of two copies of a 200-byte string. A collision would need two of at most a few thousand
//! live keys to share a hash (odds below 10⁻¹¹) and would only merge two events' counts.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::Duration;

use tokio::time::Instant;

/// client-go's `maxLruCacheEntries`: the size of each table.
const CACHE_ENTRIES: usize = 4096;
/// client-go's `defaultAggregateMaxEvents`.
const AGGREGATE_MAX_EVENTS: usize = 10;
/// client-go's `defaultAggregateIntervalInSeconds`.
const AGGREGATE_INTERVAL: Duration = Duration::from_secs(600);
/// client-go's `defaultSpamBurst`.
const SPAM_BURST: f64 = 25.0;
/// client-go's `defaultSpamQPS` (one event per 5 minutes).
const SPAM_REFILL_PER_SECOND: f64 = 1.0 / 300.0;
/// The message prefix of an aggregated event (client-go's `EventAggregatorByReasonMessageFunc`).
pub(crate) const COMBINED_PREFIX: &str = "(combined from similar events): ";

/// What the correlator needs to know about an event (the fields client-go's keys are made of).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct EventIdentity {
    /// The reporting component (`source.component`).
    pub component: String,
    pub kind: String,
    pub api_version: String,
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// `Normal` or `Warning`.
    pub type_: String,
    pub reason: String,
    pub message: String,
}

impl EventIdentity {
    /// client-go's keys, each the one before plus more fields: object, then type (the spam filter's),
    /// reason (the aggregator's), message (a series of identical events).
    fn object_key(&self) -> Fingerprint {
        Fingerprint::of(&[
            &self.component,
            &self.kind,
            &self.namespace,
            &self.name,
            &self.uid,
            &self.api_version,
        ])
    }
    fn spam_key(&self) -> Fingerprint {
        self.object_key().and(&self.type_)
    }
    fn aggregate_key(&self) -> Fingerprint {
        self.spam_key().and(&self.reason)
    }
    fn event_key(&self) -> Fingerprint {
        self.aggregate_key().and(&self.message)
    }
}

/// A table key: a hash of the fields client-go joins into its key string (see the module header).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Fingerprint(u64);

impl Fingerprint {
    fn of(fields: &[&str]) -> Self {
        // `str`'s Hash writes a terminator after the bytes, so ("ab", "c") and ("a", "bc") differ.
        let mut hasher = DefaultHasher::new();
        fields.hash(&mut hasher);
        Fingerprint(hasher.finish())
    }

    /// This key with one more field.
    fn and(self, field: &str) -> Self {
        let mut hasher = DefaultHasher::new();
        self.0.hash(&mut hasher);
        field.hash(&mut hasher);
        Fingerprint(hasher.finish())
    }
}

/// The write to make for one recorded event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Correlated {
    /// Create a new Event named `<object name>.<name_suffix>` with count 1.
    Create { message: String, series: SeriesId },
    /// Patch the Event that `series` created: new count, message and last timestamp.
    Patch {
        message: String,
        count: i32,
        series: SeriesId,
    },
    /// The spam filter skipped it (its count is carried by the next write of the same series).
    Skip,
}

/// Names the Event a series of writes goes to: the publisher remembers the name it created under it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct SeriesId(pub Fingerprint);

/// A map that forgets its least recently used entry beyond its capacity (client-go's LRU caches).
struct Lru<K, V> {
    entries: HashMap<K, (V, u64)>,
    by_use: BTreeMap<u64, K>,
    tick: u64,
    capacity: usize,
}

impl<K: Hash + Eq + Clone, V> Lru<K, V> {
    fn new(capacity: usize) -> Self {
        Lru {
            entries: HashMap::new(),
            by_use: BTreeMap::new(),
            tick: 0,
            capacity,
        }
    }

    /// The entry for `key`, created by `default` if missing; marks it used.
    fn entry(&mut self, key: &K, default: impl FnOnce() -> V) -> &mut V {
        self.tick = self.tick.wrapping_add(1);
        let tick = self.tick;
        if let Some((_, used)) = self.entries.get_mut(key) {
            self.by_use.remove(used);
            *used = tick;
        } else {
            if self.entries.len() >= self.capacity
                && let Some((_, oldest)) = self.by_use.pop_first()
            {
                self.entries.remove(&oldest);
            }
            self.entries.insert(key.clone(), (default(), tick));
        }
        self.by_use.insert(tick, key.clone());
        match self.entries.get_mut(key) {
            Some((value, _)) => value,
            None => unreachable!("inserted above"),
        }
    }
}

struct TokenBucket {
    tokens: f64,
    refilled: Instant,
}

struct AggregateGroup {
    /// The distinct messages seen, as fingerprints.
    messages: HashSet<Fingerprint>,
    last: Option<Instant>,
}

/// The correlator's tables (client-go's spam filter, aggregator and logger caches).
pub(crate) struct EventCorrelator {
    spam: Lru<Fingerprint, TokenBucket>,
    aggregates: Lru<Fingerprint, AggregateGroup>,
    /// Per series: how many events it has counted so far (0: never written).
    counts: Lru<Fingerprint, i32>,
}

impl Default for EventCorrelator {
    fn default() -> Self {
        Self::new()
    }
}

impl EventCorrelator {
    pub(crate) fn new() -> Self {
        EventCorrelator {
            spam: Lru::new(CACHE_ENTRIES),
            aggregates: Lru::new(CACHE_ENTRIES),
            counts: Lru::new(CACHE_ENTRIES),
        }
    }

    /// Decides the write for `event`, recorded at `now`.
    pub(crate) fn correlate(&mut self, event: &EventIdentity, now: Instant) -> Correlated {
        // 1. aggregation
        let aggregate_key = event.aggregate_key();
        let group = self.aggregates.entry(&aggregate_key, || AggregateGroup {
            messages: HashSet::new(),
            last: None,
        });
        if group
            .last
            .is_some_and(|last| now.saturating_duration_since(last) > AGGREGATE_INTERVAL)
        {
            group.messages.clear();
        }
        group.messages.insert(Fingerprint::of(&[&event.message]));
        group.last = Some(now);
        let (message, series_key) = if group.messages.len() < AGGREGATE_MAX_EVENTS {
            (event.message.clone(), event.event_key())
        } else {
            // Like upstream, forget one message so the group stays at the threshold.
            if let Some(any) = group.messages.iter().next().copied() {
                group.messages.remove(&any);
            }
            (format!("{COMBINED_PREFIX}{}", event.message), aggregate_key)
        };

        // 2. logging: count the series (even if the spam filter skips this write)
        let count = self.counts.entry(&series_key, || 0);
        *count = count.saturating_add(1);
        let count = *count;

        // 3. spam filter
        let bucket = self.spam.entry(&event.spam_key(), || TokenBucket {
            tokens: SPAM_BURST,
            refilled: now,
        });
        let elapsed = now.saturating_duration_since(bucket.refilled).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * SPAM_REFILL_PER_SECOND).min(SPAM_BURST);
        bucket.refilled = now;
        if bucket.tokens < 1.0 {
            return Correlated::Skip;
        }
        bucket.tokens -= 1.0;

        let series = SeriesId(series_key);
        if count > 1 {
            Correlated::Patch {
                message,
                count,
                series,
            }
        } else {
            Correlated::Create { message, series }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(type_: &str, reason: &str, message: &str) -> EventIdentity {
        EventIdentity {
            component: "replicaset-controller".into(),
            kind: "ReplicaSet".into(),
            api_version: "apps/v1".into(),
            namespace: "ns".into(),
            name: "web".into(),
            uid: "u1".into(),
            type_: type_.into(),
            reason: reason.into(),
            message: message.into(),
        }
    }

    fn created(n: usize) -> EventIdentity {
        event(
            "Normal",
            "SuccessfulCreate",
            &format!("Created pod: web-{n}"),
        )
    }

    #[derive(Default, Debug, PartialEq)]
    struct Writes {
        creates: usize,
        patches: usize,
        skips: usize,
        /// The last count written per series.
        counts: HashMap<SeriesId, i32>,
    }

    fn run(
        correlator: &mut EventCorrelator,
        events: impl Iterator<Item = EventIdentity>,
    ) -> Writes {
        let mut writes = Writes::default();
        for e in events {
            match correlator.correlate(&e, Instant::now()) {
                Correlated::Create { series, .. } => {
                    writes.creates += 1;
                    writes.counts.insert(series, 1);
                }
                Correlated::Patch { series, count, .. } => {
                    writes.patches += 1;
                    writes.counts.insert(series, count);
                }
                Correlated::Skip => writes.skips += 1,
            }
        }
        writes
    }

    #[tokio::test(start_paused = true)]
    async fn scale_up_of_500_writes_10_creates_and_15_patches_like_upstream() {
        let mut c = EventCorrelator::new();
        let w = run(&mut c, (0..500).map(created));
        assert_eq!((w.creates, w.patches, w.skips), (10, 15, 475));
    }

    #[tokio::test(start_paused = true)]
    async fn counts_of_a_scale_up_within_the_burst_sum_to_its_pods() {
        let mut c = EventCorrelator::new();
        let w = run(&mut c, (0..20).map(created));
        assert_eq!(w.creates, 10);
        assert_eq!(w.counts.values().sum::<i32>(), 20);
    }

    #[tokio::test(start_paused = true)]
    async fn the_tenth_distinct_message_is_combined() {
        let mut c = EventCorrelator::new();
        for n in 0..9 {
            assert!(matches!(
                c.correlate(&created(n), Instant::now()),
                Correlated::Create { .. }
            ));
        }
        match c.correlate(&created(9), Instant::now()) {
            Correlated::Create { message, .. } => {
                assert_eq!(
                    message,
                    "(combined from similar events): Created pod: web-9"
                )
            }
            other => panic!("expected a combined create, got {other:?}"),
        }
        match c.correlate(&created(10), Instant::now()) {
            Correlated::Patch { message, count, .. } => {
                assert_eq!(
                    message,
                    "(combined from similar events): Created pod: web-10"
                );
                assert_eq!(count, 2);
            }
            other => panic!("expected a patch, got {other:?}"),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn identical_events_patch_the_count() {
        let mut c = EventCorrelator::new();
        let e = event("Warning", "FailedCreate", "quota exceeded");
        assert!(matches!(
            c.correlate(&e, Instant::now()),
            Correlated::Create { .. }
        ));
        assert!(matches!(
            c.correlate(&e, Instant::now()),
            Correlated::Patch { count: 2, .. }
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn types_and_objects_have_their_own_buckets() {
        let mut c = EventCorrelator::new();
        run(&mut c, (0..100).map(created));
        // The Normal bucket is empty; a Warning about the same object still goes out.
        let warning = event("Warning", "FailedCreate", "forbidden");
        assert!(matches!(
            c.correlate(&warning, Instant::now()),
            Correlated::Create { .. }
        ));
        let mut other = created(0);
        other.name = "other".into();
        other.uid = "u2".into();
        assert!(matches!(
            c.correlate(&other, Instant::now()),
            Correlated::Create { .. }
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn the_bucket_refills_one_event_per_five_minutes() {
        let mut c = EventCorrelator::new();
        run(&mut c, (0..25).map(created));
        assert_eq!(c.correlate(&created(25), Instant::now()), Correlated::Skip);
        tokio::time::advance(Duration::from_secs(299)).await;
        assert_eq!(c.correlate(&created(26), Instant::now()), Correlated::Skip);
        tokio::time::advance(Duration::from_secs(301)).await;
        // The skipped ones are carried in the count of the next write.
        match c.correlate(&created(27), Instant::now()) {
            Correlated::Patch { count, .. } => assert_eq!(count, 28 - 9),
            other => panic!("expected a patch, got {other:?}"),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn aggregation_restarts_after_ten_quiet_minutes() {
        let mut c = EventCorrelator::new();
        run(&mut c, (0..5).map(created));
        tokio::time::advance(Duration::from_secs(601)).await;
        let w = run(&mut c, (5..14).map(created));
        // 9 new distinct messages: none combined since the group restarted.
        assert_eq!(w.creates, 9);
    }

    #[test]
    fn fingerprints_keep_field_boundaries() {
        assert_ne!(Fingerprint::of(&["ab", "c"]), Fingerprint::of(&["a", "bc"]));
        assert_ne!(
            Fingerprint::of(&["a"]).and("bc"),
            Fingerprint::of(&["a"]).and("b").and("c")
        );
        let e = created(1);
        assert_ne!(e.aggregate_key(), created(2).aggregate_key().and("x"));
        assert_eq!(e.event_key(), created(1).event_key());
        assert_ne!(e.event_key(), created(2).event_key());
        assert_eq!(e.aggregate_key(), created(2).aggregate_key());
    }

    #[test]
    fn the_lru_forgets_the_least_recently_used() {
        let mut lru = Lru::new(2);
        *lru.entry(&"a", || 0) += 1;
        *lru.entry(&"b", || 0) += 1;
        *lru.entry(&"a", || 0) += 1;
        *lru.entry(&"c", || 0) += 1;
        assert_eq!(*lru.entry(&"a", || 0), 2);
        assert_eq!(*lru.entry(&"b", || 0), 0, "b was evicted");
    }
}
