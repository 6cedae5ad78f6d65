//! A schedule: the faults one run injects, each at a point counted in the run itself (the `n`-th write
//! the controllers send, the `n`-th sync). A run without faults is the scenario's baseline; a schedule
//! is replayed exactly, since a run is deterministic.

use std::fmt;

/// How a write fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Failure {
    /// `409 Conflict`, not applied.
    Conflict,
    /// `504 Timeout`, not applied.
    TimeoutLost,
    /// `504 Timeout`, but applied: the controller cannot tell.
    TimeoutPersisted,
    /// `403` from a ResourceQuota: this pod creation and every other one until the sync ends.
    Quota,
}

impl Failure {
    /// Every way a write fails.
    pub const ALL: [Failure; 4] = [
        Failure::Conflict,
        Failure::TimeoutLost,
        Failure::TimeoutPersisted,
        Failure::Quota,
    ];
}

/// One fault of a schedule.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Fault {
    /// The process dies as it is about to send its `write`-th write (counted from 0).
    CrashBefore {
        /// Which write.
        write: usize,
    },
    /// The process dies right after its `write`-th write was applied, before it reads the answer.
    CrashAfter {
        /// Which write.
        write: usize,
    },
    /// The `write`-th write fails.
    Fail {
        /// Which write.
        write: usize,
        /// How.
        how: Failure,
    },
    /// The `sync`-th sync runs on a cache of `resource` that lacks its last `lag` events (they arrive
    /// right after the sync).
    Stale {
        /// Which sync (counted from 0).
        sync: usize,
        /// The resource whose cache lags (`apps/v1/replicasets`, ...).
        resource: String,
        /// How many of its most recent events are held back.
        lag: usize,
    },
    /// Before the `sync`-th sync, the watch of `resource` breaks: its pending events are lost, and
    /// after the sync the informer relists instead.
    Relist {
        /// Which sync.
        sync: usize,
        /// The resource whose watch breaks.
        resource: String,
    },
}

impl Fault {
    /// The write it acts on, if it acts on a write.
    pub fn write(&self) -> Option<usize> {
        match self {
            Fault::CrashBefore { write }
            | Fault::CrashAfter { write }
            | Fault::Fail { write, .. } => Some(*write),
            Fault::Stale { .. } | Fault::Relist { .. } => None,
        }
    }

    /// The sync it acts on, if it acts on a sync.
    pub fn sync(&self) -> Option<usize> {
        match self {
            Fault::Stale { sync, .. } | Fault::Relist { sync, .. } => Some(*sync),
            _ => None,
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::CrashBefore { write } => write!(f, "crash before write {write}"),
            Fault::CrashAfter { write } => write!(f, "crash after write {write}"),
            Fault::Fail { write, how } => write!(f, "write {write} fails: {how:?}"),
            Fault::Stale {
                sync,
                resource,
                lag,
            } => write!(f, "sync {sync} sees {resource} {lag} event(s) late"),
            Fault::Relist { sync, resource } => {
                write!(f, "sync {sync}: the {resource} watch breaks and relists")
            }
        }
    }
}

/// The faults of one run.
pub type Schedule = Vec<Fault>;

/// A schedule for people: its faults, `;`-separated (`none` for the baseline).
pub fn describe(schedule: &[Fault]) -> String {
    if schedule.is_empty() {
        return "none".to_string();
    }
    schedule
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}
