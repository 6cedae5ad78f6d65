//! The ReplicaSet controller: keeps `spec.replicas` pods running for every ReplicaSet, like
//! kube-controller-manager v1.37's `replicaset-controller`.
//!
//! Where to start reading: `controller/sync.rs` (`sync_replica_set`, upstream's `syncReplicaSet`), which
//! reads the caches, claims pods, asks `plan` what to do and executes it; `controller/handlers.rs` turns
//! informer events into keys. The runtime's `ControllerCore` runs it (workers, the prologue of each sync,
//! what becomes of a key afterwards). The API is [`NEW_CONTROLLER`], which the manager's descriptor
//! table calls; everything else is private.
//!
//! Laid out like every controller crate of mini-kcm: the pure decisions at the top, the controller that
//! executes them under `controller/`:
//! - `plan`: how many pods to create, which to delete and why (`ReplicaPlan`);
//! - `status`: the status the ReplicaSet should have;
//! - `controller`: handlers (informer events → keys, expectation bookkeeping), the sync (snapshot from
//!   the caches, claim pods, plan, execute) and the status write.
//!
//! One controller instance manages one API family (`apps/v1` or the `minikcm.dev` copies); both share the
//! pod informer.

// The public surface is the list of `pub use` below; this keeps every other `pub` from claiming more.
#![warn(unreachable_pub)]

mod controller;
mod plan;
mod status;

/// Builds one ReplicaSet controller instance: the manager's descriptor table calls it.
pub const NEW_CONTROLLER: mini_kcm_runtime::controller::NewController =
    mini_kcm_runtime::controller::new_controller::<controller::ReplicaSetController>;

/// Upstream's `BurstReplicas`: at most this many pods are created or deleted in one sync.
pub(crate) const BURST_REPLICAS: usize = 500;

/// The `reportingController` of our events, as upstream.
pub(crate) const EVENT_COMPONENT: &str = "replicaset-controller";
