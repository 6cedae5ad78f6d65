//! The keys ready to hand out, and the order they go out in.
//!
//! With [`Priorities::Off`] this is client-go's FIFO. With [`Priorities::On`] there are two lanes,
//! each FIFO: keys with a [`Priority::Fresh`] add go before keys whose every add was
//! [`Priority::Low`], so a user's change made right after a start does not wait behind the
//! initial list's no-op syncs. Strict priority can starve (controller-runtime#3496: a busy
//! stream of fresh keys kept initial-list keys from ever being synced), so low keys age: one that
//! has been ready for `max_low_wait` is "aged", and aged low keys share the hand-outs with fresh
//! keys 1:1 (see [`Ready::pop`] for the exact rule). A share, not absolute priority: with strict
//! aging, a backlog longer than `max_low_wait` (a big initial list) ages entirely and the queue
//! turns back into a FIFO for fresh changes, the very case the priorities are for.

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
    /// Fresh keys first, but a low key ready for `max_low_wait` is "aged", and while aged low keys
    /// and fresh keys both wait they alternate 1:1 (oldest aged low key, oldest fresh key, ...).
    /// The bound: a low key waits at most `max_low_wait` before it gets at least every other
    /// hand-out (shared, oldest first, with older aged low keys), and fresh keys keep at least
    /// every other hand-out whatever the backlog. (`Duration::ZERO` makes every low key aged, i.e.
    /// a 1:1 interleave of the two lanes: use `Off` for a plain FIFO.)
    On { max_low_wait: Duration },
}

impl Priorities {
    /// How long a low key may be passed over entirely by fresh ones: 5 s.
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
    /// An aged low key handed out while fresh keys were waiting (its turn in the 1:1 share).
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
    /// When aged low keys and fresh keys both wait, whether an aged low key goes next: true iff
    /// the previous hand-out was a fresh key (or there was none yet).
    low_next: bool,
}

impl<K> Ready<K> {
    pub(crate) fn new(mode: Priorities) -> Self {
        Self {
            mode,
            main: BTreeMap::new(),
            low: BTreeMap::new(),
            slots: HashMap::new(),
            next_seq: 0,
            low_next: true,
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

    /// Whether `key` has been ready for at least `max_low_wait` (never with priorities off).
    fn is_aged(&self, key: &K, now: Instant) -> bool {
        let Priorities::On { max_low_wait } = self.mode else {
            return false;
        };
        self.slots
            .get(key)
            .is_some_and(|s| now.saturating_duration_since(s.since) >= max_low_wait)
    }

    /// Takes the next key. Each lane is FIFO (the low lane is also in aging order), and:
    ///
    /// * no aged low key waiting: the oldest fresh key, else the oldest low key (a non-aged low
    ///   key goes only when no fresh key waits);
    /// * an aged low key and a fresh key both waiting: the lane that did not get the previous
    ///   hand-out (the low lane if there was none), so the two alternate 1:1;
    /// * only one lane waiting: that lane.
    ///
    /// Hence while an aged low key waits no two hand-outs in a row are fresh, and while a fresh key
    /// waits no two in a row are low: a low key waits at most `max_low_wait` before aged low keys
    /// get at least every other hand-out, and fresh keys keep at least half of them.
    pub(crate) fn pop(&mut self, now: Instant) -> Option<Popped<K>> {
        let aged = self
            .low
            .values()
            .next()
            .is_some_and(|k| self.is_aged(k, now));
        let take_low = self.main.is_empty() || (aged && self.low_next);
        let key = if take_low {
            self.low.pop_first()?.1
        } else {
            self.main.pop_first()?.1
        };
        let promoted = take_low && aged && !self.main.is_empty();
        self.low_next = !take_low;
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
        // Aged low keys are a prefix of the low lane (it is in `since` order). Past `limit` of them
        // the rest does not show anyway.
        let aged_count = self
            .low
            .values()
            .take(limit)
            .take_while(|k| self.is_aged(k, now))
            .count();
        let mut aged = self.low.values().take(aged_count).peekable();
        let mut fresh = self.main.values().peekable();
        let mut low_next = self.low_next;
        // `pop`'s rule, replayed: nothing ages further during the replay.
        let shared = std::iter::from_fn(move || {
            let take_low = fresh.peek().is_none() || (aged.peek().is_some() && low_next);
            low_next = !take_low;
            if take_low { aged.next() } else { fresh.next() }
        });
        shared
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
    fn an_aged_low_key_shares_hand_outs_with_fresh_ones_oldest_first() {
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
    fn aged_low_and_fresh_alternate_and_the_previous_hand_out_decides() {
        let t0 = Instant::now();
        let at = t0 + ms(100);
        let mut r = on(ms(100));
        for k in ["l1", "l2", "l3", "l4"] {
            r.push(k, Priority::Low, t0);
        }
        for k in ["f1", "f2"] {
            r.push(k, Priority::Fresh, t0);
        }
        r.push("young", Priority::Low, t0 + ms(1));
        let expected = ["l1", "f1", "l2", "f2", "l3", "l4", "young"];
        let order: Vec<_> = r.ordered(at, 10).into_iter().map(|(k, _)| *k).collect();
        assert_eq!(order, expected, "the snapshot replays the rule");
        let popped: Vec<_> = std::iter::from_fn(|| r.pop(at))
            .map(|p| (p.key, p.promoted))
            .collect();
        assert_eq!(
            popped,
            [
                ("l1", true),
                ("f1", false),
                ("l2", true),
                ("f2", false),
                ("l3", false),
                ("l4", false),
                ("young", false)
            ]
        );
        // The last hand-out was low: a fresh key arriving among aged low keys goes next.
        r.push("l5", Priority::Low, t0);
        r.push("l6", Priority::Low, t0);
        r.push("f3", Priority::Fresh, at);
        let order: Vec<_> = r.ordered(at, 10).into_iter().map(|(k, _)| *k).collect();
        assert_eq!(order, ["f3", "l5", "l6"]);
        assert_eq!(drain(&mut r, at), order);
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
