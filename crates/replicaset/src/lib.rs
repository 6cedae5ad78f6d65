//! The ReplicaSet controller: keeps `spec.replicas` pods running for every ReplicaSet, like
//! kube-controller-manager v1.36's `replicaset-controller`.
//!
//! The controller is split the way the docs explain it:
//! - [`handlers`](crate::handlers): informer events → which ReplicaSet keys to sync, and expectation
//!   bookkeeping (a pod creation or deletion we were waiting for has been observed);
//! - [`sync`](crate::sync): one sync of one ReplicaSet: read a consistent snapshot from the caches, claim
//!   pods, compute a [`plan::ReplicaPlan`], execute it, write the status;
//! - [`plan`](crate::plan): the pure decision (how many pods to create, which to delete and why);
//! - [`status`](crate::status): the pure status computation and the status write.
//!
//! One controller instance manages one API family (`apps/v1` or the `minikcm.dev` copies); both share the
//! pod informer.

mod controller;
mod handlers;
pub mod plan;
pub mod status;
mod sync;

pub use controller::{ReplicaSetController, ReplicaSetOptions};

/// Upstream's `BurstReplicas`: at most this many pods are created or deleted in one sync.
pub const BURST_REPLICAS: usize = 500;

/// The `reportingController` of our events, as upstream.
pub const EVENT_COMPONENT: &str = "replicaset-controller";

#[cfg(test)]
mod tests;
