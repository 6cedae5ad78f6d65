//! The skeleton every controller shares, so the ReplicaSet, Deployment and DaemonSet controllers differ
//! only where their algorithms differ.
//!
//! A controller here is upstream's shape: event handlers map informer events to [`ObjectKey`]s of the
//! objects it manages (finding owners through [`Owners`]; [`Owners::to_wake`] routes a child's event;
//! [`wake`] says why, in words, and how urgently), a work queue hands each key to one worker at a time
//! (`crate::controller::worker::run_workers`), and a sync reads a snapshot from the caches, decides (pure code in the
//! controller's crate) and writes.
//!
//! [`ControllerCore`] holds what every controller has and runs it: the workers, the prologue of each
//! sync ("object gone" handled once) and, through `crate::controller::worker`, the one decision of what becomes of
//! a key afterwards. A controller implements [`Reconcile`] (its sync of an existing object, plus what it
//! keeps beside the core) and is thereby a [`Controller`], the trait the manager runs every controller
//! through, built from its descriptor table (one entry per controller, like kube-controller-manager's).
//!
//! Beside the skeleton, what keeps a sync from acting twice or on what is not its own:
//! [`expectations`] (the creations and deletions a sync waits to see), [`consistency`] (the
//! resourceVersions of its own writes its caches must show first) and [`ownership`] (claiming and
//! releasing children, upstream's `ClaimPods`); [`worker`] is the loop around each sync.

pub mod consistency;
mod core;
pub mod expectations;
// Its own module, so the bookkeeping keyed by it (expectations, decisions) does not depend on the skeleton.
pub(crate) mod key;
#[cfg(any(test, feature = "testing"))]
pub mod offline;
mod owners;
pub mod ownership;
mod pod_events;
mod to_wake;
pub mod wake;
pub mod worker;

use futures::future::BoxFuture;

use crate::observability::inspect::ControllerView;

pub use core::{
    ControllerCore, ControllerKind, ControllerOptions, NewController, Reconcile, Requeue,
    SyncKeyError, new_controller, sync_key,
};
pub use key::ObjectKey;
pub use owners::Owners;
pub use pod_events::{PodEventRules, PodExpectations};
pub use to_wake::ToWake;

/// What the manager needs from a controller instance once it is built on the shared informers.
pub trait Controller: Send + Sync {
    /// Runs the workers until [`Controller::shut_down`] (the queue drains, in-flight syncs finish).
    fn run(&self) -> BoxFuture<'static, ()>;

    /// Stops handing out keys.
    fn shut_down(&self);

    /// Syncs the next key ready in its queue as one of its workers would (the same bookkeeping around
    /// the sync), and returns it; `None` when no key is ready. For a simulation that runs controllers
    /// one sync at a time instead of [`Controller::run`].
    #[cfg(feature = "testing")]
    fn step(&self) -> BoxFuture<'static, Option<ObjectKey>>;

    /// How many keys are ready, and how soon the earliest delayed one will be (a simulation advances
    /// its clock by that much when nothing else is left to do).
    #[cfg(feature = "testing")]
    fn queued(&self) -> (usize, Option<std::time::Duration>);

    /// Its queue, expectations and sync counts right now (the live view; see `crate::observability::inspect`).
    fn inspect(&self) -> ControllerView;
}
