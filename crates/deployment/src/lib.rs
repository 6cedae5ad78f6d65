//! The Deployment controller of mini-kcm, faithful to kube-controller-manager v1.37.
//!
//! Where to start reading: `controller/sync.rs` (`sync_deployment`, upstream's `syncDeployment`) picks
//! the strategy, and `controller/rollout.rs` executes it (`rollout_rolling`, `rollout_recreate`,
//! `rollback`, `sync_scale_and_status`); each step there asks a pure module below what to do. The
//! runtime's `ControllerCore` runs it (workers, the prologue of each sync, what becomes of a key after).
//!
//! The API is [`NEW_CONTROLLER`], which the manager's descriptor table calls, plus
//! the few annotation helpers `mini-kcm rollout` shares with the controller; everything else is private.
//!
//! Laid out like every controller crate of mini-kcm: the pure decisions at the top, the controller that
//! executes them under `controller/` (handlers, the sync, and the writes of a rollout). Every pure module
//! works on k8s-openapi types (through the `DeploymentObject` and `ReplicaSetObject` aliases, so the same
//! code serves `apps/v1` and the `minikcm.dev/v1` copies): no function talks to the API server, reads a
//! clock or a cache. The current time is always a parameter and every write is returned as a value (an
//! updated object, or a list of `ScaleStep`s) for the controller to execute. That keeps the arithmetic
//! testable against upstream's own unit-test tables.
//!
//! The pure modules follow the concepts of upstream's `pkg/controller/deployment`, listed bottom-up (each
//! uses only modules above it):
//! - `accessors`: reading fields with upstream's defaults;
//! - `strategy`: maxSurge / maxUnavailable resolved against the replica count;
//! - `hash`: the `pod-template-hash` of a pod template;
//! - `annotations`: the revision and replica-count annotations and their bookkeeping;
//! - `replica_sets`: which ReplicaSets are new / old / active, sort orders, template equality, sums;
//! - `scale`: one scaling step and the ReplicaSet write it implies;
//! - `conditions`: the Available / Progressing / ReplicaFailure conditions;
//! - `progress`: complete, progressing, timed out;
//! - `status`: the status calculation and the progress-deadline requeue;
//! - `new_replica_set`: building the new ReplicaSet of a rollout and syncing an existing one;
//! - `rolling`: the rolling-update plans for the new and the old ReplicaSets;
//! - `proportional`: proportional scaling of all active ReplicaSets on a scaling event or while paused;
//! - `recreate`: the Recreate strategy's checks;
//! - `history`: revision-history cleanup.
//!
//! Quantities in this crate follow upstream's types: replica counts are `i32` and revisions `i64`.

// The public surface is the list of `pub use` below; this keeps every other `pub` from claiming more.
#![warn(unreachable_pub)]
// Docs link private items where that is where the reader should go: `cargo doc --document-private-items`.
#![allow(rustdoc::private_intra_doc_links)]

mod accessors;
mod annotations;
mod conditions;
mod controller;
mod hash;
mod history;
mod new_replica_set;
mod progress;
mod proportional;
mod recreate;
mod replica_sets;
mod rolling;
mod scale;
mod status;
mod strategy;

use mini_kcm_runtime::api::int_or_percent::IntOrPercentError;
use mini_kcm_runtime::api::kinds::{DeploymentObject, ReplicaSetObject};

/// Builds one Deployment controller instance: the manager's descriptor table calls it.
pub const NEW_CONTROLLER: mini_kcm_runtime::controller::NewController =
    mini_kcm_runtime::controller::new_controller::<controller::DeploymentController>;

// What `mini-kcm rollout` reads and compares as the controller does.
pub use annotations::{
    LAST_APPLIED_CONFIG_ANNOTATION, POD_TEMPLATE_HASH_LABEL, REVISION_ANNOTATION, revision,
    skip_copy_annotation,
};
pub use replica_sets::equal_ignore_hash;

/// What a decision can fail on. Upstream's validation keeps both out of stored objects; they can only
/// come from objects that bypassed it (or from a CRD copy whose schema is looser).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Error {
    /// `maxSurge` / `maxUnavailable` is neither an integer nor an `"N%"` string (or is absent where
    /// upstream requires it).
    #[error(transparent)]
    InvalidIntOrPercent(#[from] IntOrPercentError),
    /// A strategy type other than `RollingUpdate` and `Recreate`.
    #[error("deployment type {0} isn't supported")]
    UnsupportedStrategy(String),
}

#[cfg(test)]
mod testutil;
