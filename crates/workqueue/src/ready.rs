//! The keys ready to hand out, and the order they go out in.
//!
//! With [`Priorities::Off`] this is client-go's FIFO. With [`Priorities::On`] there are two lanes,
//! each FIFO: keys with a [`Priority::Fresh`] add go before keys whose every add was
//! [`Priority::Low`], so a user's change made right after a start does not wait behind the
//! initial list's no-op syncs. Strict priority can starve (controller-runtime#3496: a busy
//! stream of fresh keys kept initial-list keys from ever being synced), so a low key that has
//! been ready for `max_low_wait` goes before the fresh lane, oldest first.

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;
use std::time::Duration;

use tokio::time::Instant;

use crate::wake::Priority;

/// Whether a queue hands fresh keys out before low-priority ones. See
/// [`WorkQueue::with_priorities`](crate::WorkQueue::with_priorities).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Priorities {
    /// One FIFO, whatever the priority (client-go's queue). Reasons are still recorded.
    Off,
    /// Fresh keys first; a low key ready for `max_low_wait` goes before them (oldest first), so no
    /// key waits much longer than that behind fresh ones. (`Duration::ZERO` would make every low
    /// key "aged", i.e. low keys first: use `Off` for a plain FIFO.)
    On { max_low_wait: Duration },
}

impl Priorities {
    /// How long a low key may be passed over by fresh ones: 5 s.
    pub const DEFAULT_MAX_LOW_WAIT: Duration = Duration::from_secs(5);
}

impl Default for Priorities {
    /// `On` with [`DEFAULT_MAX_LOW_WAIT`](Self::DEFAULT_MAX_LOW_WAIT).
    fn default() -> Self {
        Priorities::On {
            max_low_wait: Self::DEFAULT_MAX_LOW_WAIT,
        }
    }
}

/// Where a ready key sits.
#[derive(Debug, Clone, Copy)]
struct Slot {
    seq: u64,
    priority: Priority,
    /// When it became ready (the aging clock starts here).
    since: Instant,
}

/// A key handed out by [`Ready::pop`].
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Popped<K> {
    pub(crate) key: K,
    pub(crate) priority: Priority,
    /// A low key that went before waiting fresh keys because it had aged.
    pub(crate) promoted: bool,
}

/// Ready keys in hand-out order. Each key appears once.
#[derive(Debug)]
pub(crate) struct Ready<K> {
    mode: Priorities,
    /// `seq` -> key: fresh keys, or every key when priorities are off. `seq` grows with each push,
    /// so map order is arrival order.
    main: BTreeMap<u64, K>,
    /// `seq` -> key: low keys when priorities are on.
    low: BTreeMap<u64, K>,
    slots: HashMap<K, Slot>,
    next_seq: u64,
}

impl<K> Ready<K> {
    pub(crate) fn new(mode: Priorities) -> Self {
        Self {
            mode,
            main: BTreeMap::new(),
            low: BTreeMap::new(),
            slots: HashMap::new(),
            next_seq: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }
}

impl<K: Eq + Hash + Clone> Ready<K> {
    fn in_low_lane(&self, priority: Priority) -> bool {
        matches!(self.mode, Priorities::On { .. }) && priority == Priority::Low
    }

    fn lane(&mut self, priority: Priority) -> &mut BTreeMap<u64, K> {
        if self.in_low_lane(priority) {
            &mut self.low
        } else {
            &mut self.main
        }
    }

    /// Appends `key` to its lane. The caller guarantees it is not here yet (a key is queued once);
    /// if it is, it only moves to the back.
    pub(crate) fn push(&mut self, key: K, priority: Priority, now: Instant) {
        self.remove(&key);
        let seq = self.next_seq;
        self.next_seq = self.next_seq.wrapping_add(1);
        self.lane(priority).insert(seq, key.clone());
        self.slots.insert(
            key,
            Slot {
                seq,
                priority,
                since: now,
            },
        );
    }

    fn remove(&mut self, key: &K) -> Option<Slot> {
        let slot = self.slots.remove(key)?;
        self.lane(slot.priority).remove(&slot.seq);
        Some(slot)
    }

    /// A fresh add reached a queued low key: it joins the back of the fresh lane (it became
    /// urgent now). No-op for a key that is not here or already fresh.
    pub(crate) fn upgrade(&mut self, key: &K, now: Instant) {
        if self
            .slots
            .get(key)
            .is_none_or(|s| s.priority != Priority::Low)
        {
            return;
        }
        if self.in_low_lane(Priority::Low) {
            self.push(key.clone(), Priority::Fresh, now);
        } else if let Some(slot) = self.slots.get_mut(key) {
            slot.priority = Priority::Fresh; // one lane: the key keeps its place
        }
    }

    /// The oldest low key, if it has been ready for at least `max_low_wait`.
    fn aged_low(&self, now: Instant) -> Option<u64> {
        let Priorities::On { max_low_wait } = self.mode else {
            return None;
        };
        let (&seq, key) = self.low.first_key_value()?;
        let since = self.slots.get(key)?.since;
        (now.saturating_duration_since(since) >= max_low_wait).then_some(seq)
    }

    /// Takes the next key: an aged low key, else the oldest fresh key, else the oldest low key.
    pub(crate) fn pop(&mut self, now: Instant) -> Option<Popped<K>> {
        let (key, promoted) = match self.aged_low(now) {
            Some(seq) => (self.low.remove(&seq)?, !self.main.is_empty()),
            None => match self.main.pop_first() {
                Some((_, key)) => (key, false),
                None => (self.low.pop_first()?.1, false),
            },
        };
        let slot = self.slots.remove(&key)?;
        Some(Popped {
            key,
            priority: slot.priority,
            promoted,
        })
    }

    /// The first `limit` keys in the order [`pop`](Self::pop) would hand them out if they were all
    /// taken at `now`, with their priorities.
    pub(crate) fn ordered(&self, now: Instant, limit: usize) -> Vec<(&K, Priority)> {
        let aged = |key: &K| {
            let Priorities::On { max_low_wait } = self.mode else {
                return false;
            };
            self.slots
                .get(key)
                .is_some_and(|s| now.saturating_duration_since(s.since) >= max_low_wait)
        };
        // Aged low keys are a prefix of the low lane (it is in `since` order). Past `limit` of them
        // the rest does not show anyway.
        let aged_count = self
            .low
            .values()
            .take(limit)
            .take_while(|k| aged(k))
            .count();
        self.low
            .values()
            .take(aged_count)
            .chain(self.main.values())
            .chain(self.low.values().skip(aged_count))
            .take(limit)
            .filter_map(|k| Some((k, self.slots.get(k)?.priority)))
            .collect()
    }

    /// Switches the ordering rule; keys already here keep their arrival order.
    pub(crate) fn set_mode(&mut self, mode: Priorities) {
        let mut keys: Vec<(K, Slot)> = self.slots.drain().collect();
        keys.sort_by_key(|(_, slot)| slot.seq);
        self.main.clear();
        self.low.clear();
        self.mode = mode;
        for (key, slot) in keys {
            self.lane(slot.priority).insert(slot.seq, key.clone());
            self.slots.insert(key, slot);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn on(max_low_wait: Duration) -> Ready<&'static str> {
        Ready::new(Priorities::On { max_low_wait })
    }

    fn drain(r: &mut Ready<&'static str>, now: Instant) -> Vec<&'static str> {
        std::iter::from_fn(|| r.pop(now).map(|p| p.key)).collect()
    }

    #[test]
    fn fresh_before_low_and_fifo_within_each() {
        let t0 = Instant::now();
        let mut r = on(ms(5000));
        r.push("low1", Priority::Low, t0);
        r.push("fresh1", Priority::Fresh, t0);
        r.push("low2", Priority::Low, t0);
        r.push("fresh2", Priority::Fresh, t0);
        assert_eq!(r.len(), 4);
        let order: Vec<_> = r.ordered(t0, 10).into_iter().map(|(k, _)| *k).collect();
        assert_eq!(order, ["fresh1", "fresh2", "low1", "low2"]);
        assert_eq!(drain(&mut r, t0), order);
        assert_eq!(r.len(), 0);
    }

    #[test]
    fn upgrade_moves_a_low_key_to_the_back_of_the_fresh_lane() {
        let t0 = Instant::now();
        let mut r = on(ms(5000));
        r.push("a", Priority::Low, t0);
        r.push("b", Priority::Low, t0);
        r.push("c", Priority::Fresh, t0);
        r.upgrade(&"b", t0);
        r.upgrade(&"c", t0); // already fresh: stays first
        r.upgrade(&"zzz", t0); // not here: ignored
        assert_eq!(r.len(), 3);
        let popped = r.pop(t0);
        assert_eq!(
            popped,
            Some(Popped {
                key: "c",
                priority: Priority::Fresh,
                promoted: false
            })
        );
        assert_eq!(
            r.pop(t0).map(|p| (p.key, p.priority)),
            Some(("b", Priority::Fresh))
        );
        assert_eq!(
            r.pop(t0).map(|p| (p.key, p.priority)),
            Some(("a", Priority::Low))
        );
    }

    #[test]
    fn an_aged_low_key_goes_before_fresh_ones_oldest_first() {
        let t0 = Instant::now();
        let mut r = on(ms(100));
        r.push("old", Priority::Low, t0);
        r.push("older-fresh", Priority::Fresh, t0);
        r.push("young", Priority::Low, t0 + ms(50));
        r.push("fresh", Priority::Fresh, t0 + ms(60));
        let at = t0 + ms(100);
        let order: Vec<_> = r.ordered(at, 10).into_iter().map(|(k, _)| *k).collect();
        assert_eq!(order, ["old", "older-fresh", "fresh", "young"]);
        assert_eq!(
            r.pop(at),
            Some(Popped {
                key: "old",
                priority: Priority::Low,
                promoted: true
            })
        );
        assert_eq!(drain(&mut r, at), ["older-fresh", "fresh", "young"]);
        // Aged but nothing fresh to overtake: not a promotion.
        r.push("alone", Priority::Low, t0);
        assert!(r.pop(at).is_some_and(|p| !p.promoted));
    }

    #[test]
    fn off_is_one_fifo_and_switching_keeps_arrival_order() {
        let t0 = Instant::now();
        let mut r = Ready::new(Priorities::Off);
        r.push("low", Priority::Low, t0);
        r.push("fresh", Priority::Fresh, t0);
        r.push("low2", Priority::Low, t0);
        r.upgrade(&"low2", t0);
        let order: Vec<_> = r.ordered(t0, 10);
        assert_eq!(
            order,
            [
                (&"low", Priority::Low),
                (&"fresh", Priority::Fresh),
                (&"low2", Priority::Fresh)
            ]
        );
        r.set_mode(Priorities::default());
        let order: Vec<_> = r.ordered(t0, 2).into_iter().map(|(k, _)| *k).collect();
        assert_eq!(order, ["fresh", "low2"]);
        r.set_mode(Priorities::Off);
        assert_eq!(drain(&mut r, t0), ["low", "fresh", "low2"]);
    }
}
