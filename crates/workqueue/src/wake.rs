//! Why a key was queued and how urgent it is: [`Wake`] goes in with an add, [`Woken`] comes out
//! with the hand-out.
//!
//! The queue coalesces keys, so one sync may answer many adds. It keeps what those adds said, in
//! bounded memory: the first [`MAX_REASONS`] distinct reasons and a count of the rest. A key's
//! priority is [`Priority::Fresh`] as soon as one of its adds is; only keys whose every add was
//! [`Priority::Low`] (an initial list, a relist, a periodic resync) may wait behind fresh ones.

use std::borrow::Cow;
use std::time::Duration;

/// How many distinct reasons a key keeps between two hand-outs. The rest are only counted: a
/// burst of events must not grow the queue's memory.
pub const MAX_REASONS: usize = 8;

/// How urgent an add is. Ordered: `Low < Fresh`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Priority {
    /// Nothing suggests the object changed: the key comes from an initial list, a relist or a
    /// periodic resync. Handed out after fresh keys (unless it has waited too long).
    Low,
    /// Something happened: an event, a requested recheck, a retry. The default.
    #[default]
    Fresh,
}

impl Priority {
    /// The metric label value: `"fresh"` or `"low"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Priority::Fresh => "fresh",
            Priority::Low => "low",
        }
    }
}

/// What an add says about itself: why the key was queued, and how urgent it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wake {
    /// A few words for people and logs, e.g. `"pod ns/web-1 deleted"`. Static strings cost no
    /// allocation.
    pub reason: Cow<'static, str>,
    pub priority: Priority,
}

impl Wake {
    /// An urgent add ([`Priority::Fresh`]).
    pub fn fresh(reason: impl Into<Cow<'static, str>>) -> Self {
        Self {
            reason: reason.into(),
            priority: Priority::Fresh,
        }
    }

    /// An add that may wait behind fresh ones ([`Priority::Low`]).
    pub fn low(reason: impl Into<Cow<'static, str>>) -> Self {
        Self {
            reason: reason.into(),
            priority: Priority::Low,
        }
    }
}

/// What woke a sync: handed out with the key by [`WorkQueue::get_woken`](crate::WorkQueue::get_woken).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Woken {
    /// The distinct reasons of the adds since the key was last handed out, first seen first, at
    /// most [`MAX_REASONS`].
    pub reasons: Vec<Cow<'static, str>>,
    /// Adds whose reason was not kept because `reasons` was full (repeats included).
    pub more: usize,
    /// `Fresh` if any of those adds was.
    pub priority: Priority,
    /// From the first of those adds to the hand-out.
    pub waited: Duration,
}

/// The reasons and priority gathered for one key between two hand-outs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Gathered {
    reasons: Vec<Cow<'static, str>>,
    more: usize,
    priority: Priority,
}

impl Gathered {
    pub(crate) fn new(wake: Wake) -> Self {
        Self {
            reasons: vec![wake.reason],
            more: 0,
            priority: wake.priority,
        }
    }

    pub(crate) fn priority(&self) -> Priority {
        self.priority
    }

    /// Folds one more add in. Returns true if it raised the priority from `Low` to `Fresh`.
    pub(crate) fn note(&mut self, wake: Wake) -> bool {
        self.note_reason(wake.reason);
        self.raise(wake.priority)
    }

    /// Folds in everything another gathering holds (two delayed adds of one key that fire once).
    /// Returns true if it raised the priority.
    pub(crate) fn merge(&mut self, other: Gathered) -> bool {
        for reason in other.reasons {
            self.note_reason(reason);
        }
        self.more = self.more.saturating_add(other.more);
        self.raise(other.priority)
    }

    fn note_reason(&mut self, reason: Cow<'static, str>) {
        if self.reasons.contains(&reason) {
            return;
        }
        if self.reasons.len() < MAX_REASONS {
            self.reasons.push(reason);
        } else {
            self.more = self.more.saturating_add(1);
        }
    }

    fn raise(&mut self, priority: Priority) -> bool {
        let raised = priority > self.priority;
        self.priority = self.priority.max(priority);
        raised
    }

    pub(crate) fn reasons(&self) -> (&[Cow<'static, str>], usize) {
        (&self.reasons, self.more)
    }

    pub(crate) fn into_woken(self, waited: Duration) -> Woken {
        Woken {
            reasons: self.reasons,
            more: self.more,
            priority: self.priority,
            waited,
        }
    }
}

/// What one call brings to a key: a single add's wake, or the merged wakes of delayed adds.
/// Keeps the common case (an add to a key that is already queued) free of allocation.
#[derive(Debug)]
pub(crate) enum Incoming {
    One(Wake),
    Many(Gathered),
}

impl Incoming {
    pub(crate) fn priority(&self) -> Priority {
        match self {
            Incoming::One(wake) => wake.priority,
            Incoming::Many(gathered) => gathered.priority,
        }
    }

    /// Folds into what the key already gathered. Returns true if that raised its priority.
    pub(crate) fn fold_into(self, gathered: &mut Gathered) -> bool {
        match self {
            Incoming::One(wake) => gathered.note(wake),
            Incoming::Many(other) => gathered.merge(other),
        }
    }

    pub(crate) fn into_gathered(self) -> Gathered {
        match self {
            Incoming::One(wake) => Gathered::new(wake),
            Incoming::Many(gathered) => gathered,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_deduped_and_bounded_and_fresh_wins() {
        let mut g = Gathered::new(Wake::low("resync"));
        assert!(!g.note(Wake::low("resync")), "a repeat changes nothing");
        assert_eq!(g.priority(), Priority::Low);
        assert!(g.note(Wake::fresh("pod added")), "fresh raises low");
        assert!(!g.note(Wake::low("relist")), "low never lowers fresh");
        assert_eq!(g.priority(), Priority::Fresh);
        for i in 0..10 {
            g.note(Wake::fresh(format!("event {i}")));
        }
        g.note(Wake::fresh("resync")); // kept already: not counted as more
        g.note(Wake::fresh("event 9")); // dropped before: counted again
        let (reasons, more) = g.reasons();
        assert_eq!(reasons.len(), MAX_REASONS);
        assert_eq!(
            reasons[..4],
            ["resync", "pod added", "relist", "event 0"].map(Cow::from)
        );
        assert_eq!(more, 6, "events 5..=9 and the repeat of 9");
    }

    #[test]
    fn merge_keeps_order_counts_and_the_higher_priority() {
        let mut a = Gathered::new(Wake::low("a"));
        let mut b = Gathered::new(Wake::low("b"));
        b.note(Wake::fresh("a"));
        assert!(a.merge(b));
        let woken = a.into_woken(Duration::from_secs(1));
        assert_eq!(woken.reasons, ["a", "b"].map(Cow::from));
        assert_eq!(woken.priority, Priority::Fresh);
        assert_eq!(woken.more, 0);
        assert_eq!(woken.waited, Duration::from_secs(1));
    }
}
