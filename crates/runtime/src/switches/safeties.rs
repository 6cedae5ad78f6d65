//! The safety mechanisms a learner may switch off (`mini-kcm up --without MECHANISM`), to watch on a real
//! plane the failure each one prevents (docs/tour-breaking.md).
//!
//! Every controller reads the same [`Safeties`] from its options, and each mechanism reads its switch in
//! exactly one place, where it is built:
//!
//! | mechanism | read in | switched off |
//! | --- | --- | --- |
//! | [`Safety::Expectations`] | `crate::controller::expectations` (`satisfied_expectations`) | a sync acts although its own creations and deletions are not yet in the cache |
//! | [`Safety::SlowStart`] | `crate::pods::slow_start::initial_batch_size` | every pod of a sync is created in one batch |
//! | [`Safety::AdoptionRecheck`] | `crate::controller::Owners::recheck` | orphans are adopted on the cached owner's word alone |
//! | [`Safety::ReadYourOwnWrites`] | `crate::controller::ControllerCore::new` (the consistency store) | a sync runs while the cache lags the controller's own writes |
//!
//! Nothing here is a flag of `mini-kcm run`: a real cluster must never run without them.

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// One safety mechanism of the controllers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Safety {
    /// Wait until the cache shows the pods a sync created or deleted (upstream `ControllerExpectations`).
    Expectations,
    /// Create pods in batches of 1, 2, 4, ... and stop at the first failing batch (`slowStartBatch`).
    SlowStart,
    /// Read the owner fresh from the API server before adopting an orphan (`RecheckDeletionTimestamp`).
    AdoptionRecheck,
    /// Skip a sync while the cache has not yet shown the controller's own writes (KEP-5647).
    ReadYourOwnWrites,
}

impl Safety {
    /// Every mechanism, in declaration order (the order error messages list them in).
    pub const ALL: [Safety; 4] = [
        Safety::Expectations,
        Safety::SlowStart,
        Safety::AdoptionRecheck,
        Safety::ReadYourOwnWrites,
    ];

    /// The name `--without` takes.
    pub fn name(self) -> &'static str {
        match self {
            Safety::Expectations => "expectations",
            Safety::SlowStart => "slow-start",
            Safety::AdoptionRecheck => "adoption-recheck",
            Safety::ReadYourOwnWrites => "read-your-own-writes",
        }
    }

    /// What may go wrong without it, in a few words (the start-up warning and the live view's banner).
    pub fn risk(self) -> &'static str {
        match self {
            Safety::Expectations => {
                "a sync may act again before the cache shows the pods it just created or deleted: duplicate pods"
            }
            Safety::SlowStart => {
                "all pods of a sync are created at once: a namespace over quota gets every doomed request"
            }
            Safety::AdoptionRecheck => {
                "orphans may be adopted by an owner that is being deleted (or is gone), then deleted with it"
            }
            Safety::ReadYourOwnWrites => {
                "a sync may run while the cache lags its own writes: stale writes rejected with conflicts"
            }
        }
    }
}

impl fmt::Display for Safety {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Safety {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Safety::ALL
            .into_iter()
            .find(|safety| safety.name() == s.trim())
            .ok_or_else(|| {
                let names: Vec<&str> = Safety::ALL.iter().map(|s| s.name()).collect();
                format!(
                    "unknown safety mechanism {s:?}: use one of {}",
                    names.join(", ")
                )
            })
    }
}

/// Which safety mechanisms are switched off; by default none (the only setting `mini-kcm run` knows).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Safeties {
    off: BTreeSet<Safety>,
}

impl Safeties {
    /// Every mechanism on.
    pub fn all_on() -> Self {
        Self::default()
    }

    /// Every mechanism but those in `off`.
    pub fn without(off: impl IntoIterator<Item = Safety>) -> Self {
        Safeties {
            off: off.into_iter().collect(),
        }
    }

    /// Whether `safety` is in force (not switched off).
    pub fn is_on(&self, safety: Safety) -> bool {
        !self.off.contains(&safety)
    }

    /// The mechanisms switched off, in a fixed order.
    pub fn switched_off(&self) -> impl Iterator<Item = Safety> + '_ {
        self.off.iter().copied()
    }
}

/// A switched-off mechanism as the live view shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SwitchedOff {
    /// Its `--without` name, e.g. `slow-start` ([`Safety::name`]).
    pub mechanism: String,
    /// What may go wrong without it ([`Safety::risk`]).
    pub risk: String,
}

impl SwitchedOff {
    /// One entry per mechanism `safeties` switch off, in [`Safeties::switched_off`]'s order.
    pub fn list(safeties: &Safeties) -> Vec<SwitchedOff> {
        safeties
            .switched_off()
            .map(|s| SwitchedOff {
                mechanism: s.name().to_string(),
                risk: s.risk().to_string(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back_and_unknown_ones_are_refused() {
        for safety in Safety::ALL {
            assert_eq!(safety.name().parse::<Safety>(), Ok(safety));
        }
        let error = "expectation".parse::<Safety>().unwrap_err();
        assert!(error.contains("expectations, slow-start"), "{error}");
    }

    #[test]
    fn everything_is_on_unless_switched_off() {
        let all = Safeties::all_on();
        assert!(Safety::ALL.iter().all(|s| all.is_on(*s)));
        let some = Safeties::without([Safety::SlowStart, Safety::Expectations]);
        assert!(!some.is_on(Safety::SlowStart) && !some.is_on(Safety::Expectations));
        assert!(some.is_on(Safety::AdoptionRecheck));
        let names: Vec<&str> = some.switched_off().map(Safety::name).collect();
        assert_eq!(names, ["expectations", "slow-start"]);
    }
}
