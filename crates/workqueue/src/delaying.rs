//! The waiting room for keys added with a delay (client-go's `delaying_queue.go`).
//!
//! Keys sit here, ordered by the instant they become ready, until the queue's timer task moves
//! them into the main queue. Each key appears at most once: adding a key that is already waiting
//! keeps whichever ready time is *earlier*, so a quick retry is never postponed by an older,
//! longer backoff, and a long delay never hides a short one. What the merged adds said (their
//! [`Wake`](crate::Wake)s) is merged too, and travels with the key into the queue.

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;

use tokio::time::Instant;

use crate::wake::Gathered;

/// Delayed keys, indexed both by ready time (to find the next one) and by key (to dedupe).
#[derive(Debug)]
pub(crate) struct Waiting<K> {
    /// `(ready_at, seq)` -> key. `seq` breaks ties first-in first-out and keeps entries unique.
    by_time: BTreeMap<(Instant, u64), K>,
    by_key: HashMap<K, Entry>,
    next_seq: u64,
}

/// One waiting key: its place in `by_time` and the wakes of its delayed adds.
#[derive(Debug)]
struct Entry {
    slot: (Instant, u64),
    wakes: Gathered,
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
    /// Schedules `key` for `ready_at` with `wakes`, or, if it is already waiting, merges the wakes
    /// and moves it earlier if it was waiting for longer.
    ///
    /// Returns true when this changed the earliest ready time, i.e. the timer must be re-armed.
    pub(crate) fn insert(&mut self, key: K, ready_at: Instant, wakes: Gathered) -> bool {
        let wakes = match self.by_key.remove(&key) {
            Some(mut entry) => {
                entry.wakes.merge(wakes);
                if entry.slot.0 <= ready_at {
                    self.by_key.insert(key, entry);
                    return false;
                }
                self.by_time.remove(&entry.slot);
                entry.wakes
            }
            None => wakes,
        };
        let slot = (ready_at, self.next_seq);
        self.next_seq = self.next_seq.wrapping_add(1);
        self.by_time.insert(slot, key.clone());
        self.by_key.insert(key, Entry { slot, wakes });
        self.by_time.first_key_value().map(|(s, _)| *s) == Some(slot)
    }

    /// Removes and returns the earliest key whose ready time is not after `now`, with its wakes.
    pub(crate) fn pop_ready(&mut self, now: Instant) -> Option<(K, Gathered)> {
        let (&(ready_at, _), _) = self.by_time.first_key_value()?;
        if ready_at > now {
            return None;
        }
        let (_, key) = self.by_time.pop_first()?;
        let entry = self.by_key.remove(&key)?;
        Some((key, entry.wakes))
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
        self.by_key.get(key).map(|e| e.slot.0)
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.by_key.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wake::{Priority, Wake};
    use std::time::Duration;

    fn wake(reason: &'static str) -> Gathered {
        Gathered::new(Wake::low(reason))
    }

    fn key<K>(popped: Option<(K, Gathered)>) -> Option<K> {
        popped.map(|(k, _)| k)
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn pops_in_ready_order_only_when_due() {
        let t0 = Instant::now();
        let mut w = Waiting::default();
        assert!(w.insert("foo", t0 + ms(1000), wake("r")));
        assert!(w.insert("bar", t0 + ms(500), wake("r")));
        assert!(w.insert("baz", t0 + ms(250), wake("r")));
        assert_eq!(w.next_ready_at(), Some(t0 + ms(250)));
        assert_eq!(key(w.pop_ready(t0 + ms(249))), None);
        assert_eq!(key(w.pop_ready(t0 + ms(2000))), Some("baz"));
        assert_eq!(key(w.pop_ready(t0 + ms(2000))), Some("bar"));
        assert_eq!(key(w.pop_ready(t0 + ms(2000))), Some("foo"));
        assert_eq!(key(w.pop_ready(t0 + ms(2000))), None);
        assert_eq!(w.next_ready_at(), None);
    }

    #[test]
    fn shorter_delay_wins_and_longer_is_ignored() {
        let t0 = Instant::now();
        let mut w = Waiting::default();
        assert!(w.insert("foo", t0 + ms(50), wake("r")));
        assert!(
            !w.insert("foo", t0 + ms(70), wake("r")),
            "later time must not move it"
        );
        assert_eq!(w.ready_at(&"foo"), Some(t0 + ms(50)));
        assert!(
            w.insert("foo", t0 + ms(30), wake("r")),
            "earlier time re-arms the timer"
        );
        assert_eq!(w.ready_at(&"foo"), Some(t0 + ms(30)));
        assert_eq!(w.len(), 1);
        assert_eq!(key(w.pop_ready(t0 + ms(40))), Some("foo"));
        assert_eq!(
            key(w.pop_ready(t0 + ms(100))),
            None,
            "no stale second entry"
        );
    }

    #[test]
    fn equal_times_are_fifo_and_clear_empties() {
        let t0 = Instant::now();
        let mut w = Waiting::default();
        w.insert("a", t0, wake("r"));
        assert!(
            !w.insert("b", t0, wake("r")),
            "same time as the head does not re-arm"
        );
        assert_eq!(key(w.pop_ready(t0)), Some("a"));
        assert_eq!(key(w.pop_ready(t0)), Some("b"));
        w.insert("c", t0, wake("r"));
        w.clear();
        assert_eq!(w.len(), 0);
        assert_eq!(w.next_ready_at(), None);
    }

    #[test]
    fn merged_adds_merge_their_wakes() {
        let t0 = Instant::now();
        let mut w = Waiting::default();
        w.insert("foo", t0 + ms(50), wake("resync"));
        w.insert("foo", t0 + ms(70), Gathered::new(Wake::fresh("recheck"))); // later: merged
        w.insert("foo", t0 + ms(30), wake("resync")); // earlier: moved, wakes kept
        let (_, wakes) = w.pop_ready(t0 + ms(30)).expect("due");
        let woken = wakes.into_woken(Duration::ZERO);
        assert_eq!(woken.reasons, ["resync", "recheck"]);
        assert_eq!(woken.priority, Priority::Fresh);
    }
}
