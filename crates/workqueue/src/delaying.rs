//! The waiting room for keys added with a delay (client-go's `delaying_queue.go`).
//!
//! Keys sit here, ordered by the instant they become ready, until the queue's timer task moves
//! them into the main queue. Each key appears at most once: adding a key that is already waiting
//! keeps whichever ready time is *earlier*, so a quick retry is never postponed by an older,
//! longer backoff, and a long delay never hides a short one.

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;

use tokio::time::Instant;

/// Delayed keys, indexed both by ready time (to find the next one) and by key (to dedupe).
#[derive(Debug)]
pub(crate) struct Waiting<K> {
    /// `(ready_at, seq)` -> key. `seq` breaks ties first-in first-out and keeps entries unique.
    by_time: BTreeMap<(Instant, u64), K>,
    by_key: HashMap<K, (Instant, u64)>,
    next_seq: u64,
}

impl<K> Default for Waiting<K> {
    fn default() -> Self {
        Self {
            by_time: BTreeMap::new(),
            by_key: HashMap::new(),
            next_seq: 0,
        }
    }
}

impl<K: Eq + Hash + Clone> Waiting<K> {
    /// Schedules `key` for `ready_at`, or moves it earlier if it is already waiting for longer.
    ///
    /// Returns true when this changed the earliest ready time, i.e. the timer must be re-armed.
    pub(crate) fn insert(&mut self, key: K, ready_at: Instant) -> bool {
        if let Some(&(existing, seq)) = self.by_key.get(&key) {
            if existing <= ready_at {
                return false;
            }
            self.by_time.remove(&(existing, seq));
        }
        let slot = (ready_at, self.next_seq);
        self.next_seq = self.next_seq.wrapping_add(1);
        self.by_time.insert(slot, key.clone());
        self.by_key.insert(key, slot);
        self.by_time.first_key_value().map(|(s, _)| *s) == Some(slot)
    }

    /// Removes and returns the earliest key whose ready time is not after `now`.
    pub(crate) fn pop_ready(&mut self, now: Instant) -> Option<K> {
        let (&(ready_at, _), _) = self.by_time.first_key_value()?;
        if ready_at > now {
            return None;
        }
        let (_, key) = self.by_time.pop_first()?;
        self.by_key.remove(&key);
        Some(key)
    }

    /// When the next key becomes ready, if any is waiting.
    pub(crate) fn next_ready_at(&self) -> Option<Instant> {
        self.by_time.first_key_value().map(|(&(t, _), _)| t)
    }

    /// The first `limit` waiting keys in ready order, with their ready times, and how many wait in all.
    pub(crate) fn earliest(&self, limit: usize) -> (Vec<(K, Instant)>, usize) {
        let first = self
            .by_time
            .iter()
            .take(limit)
            .map(|(&(t, _), key)| (key.clone(), t))
            .collect();
        (first, self.by_key.len())
    }

    /// Drops everything (used at shutdown: delayed keys would be refused anyway).
    pub(crate) fn clear(&mut self) {
        self.by_time.clear();
        self.by_key.clear();
    }

    #[cfg(test)]
    pub(crate) fn ready_at(&self, key: &K) -> Option<Instant> {
        self.by_key.get(key).map(|&(t, _)| t)
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.by_key.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn pops_in_ready_order_only_when_due() {
        let t0 = Instant::now();
        let mut w = Waiting::default();
        assert!(w.insert("foo", t0 + ms(1000)));
        assert!(w.insert("bar", t0 + ms(500)));
        assert!(w.insert("baz", t0 + ms(250)));
        assert_eq!(w.next_ready_at(), Some(t0 + ms(250)));
        assert_eq!(w.pop_ready(t0 + ms(249)), None);
        assert_eq!(w.pop_ready(t0 + ms(2000)), Some("baz"));
        assert_eq!(w.pop_ready(t0 + ms(2000)), Some("bar"));
        assert_eq!(w.pop_ready(t0 + ms(2000)), Some("foo"));
        assert_eq!(w.pop_ready(t0 + ms(2000)), None);
        assert_eq!(w.next_ready_at(), None);
    }

    #[test]
    fn shorter_delay_wins_and_longer_is_ignored() {
        let t0 = Instant::now();
        let mut w = Waiting::default();
        assert!(w.insert("foo", t0 + ms(50)));
        assert!(!w.insert("foo", t0 + ms(70)), "later time must not move it");
        assert_eq!(w.ready_at(&"foo"), Some(t0 + ms(50)));
        assert!(
            w.insert("foo", t0 + ms(30)),
            "earlier time re-arms the timer"
        );
        assert_eq!(w.ready_at(&"foo"), Some(t0 + ms(30)));
        assert_eq!(w.len(), 1);
        assert_eq!(w.pop_ready(t0 + ms(40)), Some("foo"));
        assert_eq!(w.pop_ready(t0 + ms(100)), None, "no stale second entry");
    }

    #[test]
    fn equal_times_are_fifo_and_clear_empties() {
        let t0 = Instant::now();
        let mut w = Waiting::default();
        w.insert("a", t0);
        assert!(!w.insert("b", t0), "same time as the head does not re-arm");
        assert_eq!(w.pop_ready(t0), Some("a"));
        assert_eq!(w.pop_ready(t0), Some("b"));
        w.insert("c", t0);
        w.clear();
        assert_eq!(w.len(), 0);
        assert_eq!(w.next_ready_at(), None);
    }
}
