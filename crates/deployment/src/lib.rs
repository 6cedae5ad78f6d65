//! The Deployment controller of mini-kcm, faithful to kube-controller-manager v1.36.
//!
//! Laid out like every controller crate of mini-kcm: the pure decisions at the top, the controller that
//! executes them under [`controller`] (handlers, `syncDeployment`, and the writes of a rollout).
//!
//! Every other module is pure over k8s-openapi types (through the [`DeploymentObject`] and
//! [`ReplicaSetObject`] aliases, so the same code serves `apps/v1` and the `minikcm.dev/v1` copies): no
//! function talks to the API server, reads a clock or a cache. The current time is always a parameter
//! and every write is returned as a value (an updated object, or a list of [`ScaleStep`]s) for the
//! controller to execute. That keeps the arithmetic of kube-controller-manager v1.36 testable against
//! upstream's own unit-test tables.
//!
//! The modules follow the concepts of upstream's `pkg/controller/deployment`, listed bottom-up (each
//! uses only modules above it):
//! - [`accessors`]: reading fields with upstream's defaults;
//! - [`strategy`]: maxSurge / maxUnavailable resolved against the replica count;
//! - [`hash`]: the `pod-template-hash` of a pod template;
//! - [`annotations`]: the revision and replica-count annotations and their bookkeeping;
//! - [`replica_sets`]: which ReplicaSets are new / old / active, sort orders, template equality, sums;
//! - [`scale`]: one scaling step and the ReplicaSet write it implies;
//! - [`conditions`]: the Available / Progressing / ReplicaFailure conditions;
//! - [`progress`]: complete, progressing, timed out;
//! - [`status`]: the status calculation and the progress-deadline requeue;
//! - [`new_replica_set`](mod@new_replica_set): building the new ReplicaSet of a rollout and syncing an existing one;
//! - [`rolling`]: the rolling-update plans for the new and the old ReplicaSets;
//! - [`proportional`]: proportional scaling of all active ReplicaSets on a scaling event or while paused;
//! - [`recreate`]: the Recreate strategy's checks;
//! - [`history`]: revision-history cleanup.
//!
//! Quantities in this crate follow upstream's types: replica counts are `i32` and revisions `i64`.

pub mod accessors;
pub mod annotations;
pub mod conditions;
pub mod controller;
pub mod hash;
pub mod history;
pub mod new_replica_set;
pub mod progress;
pub mod proportional;
pub mod recreate;
pub mod replica_sets;
pub mod rolling;
pub mod scale;
pub mod status;
pub mod strategy;

use mini_kcm_runtime::int_or_percent::IntOrPercentError;
pub use mini_kcm_runtime::kinds::{DeploymentObject, ReplicaSetObject};

pub use annotations::{
    DESIRED_REPLICAS_ANNOTATION, LAST_APPLIED_CONFIG_ANNOTATION, MAX_REPLICAS_ANNOTATION,
    MAX_REV_HISTORY_LENGTH_IN_CHARS, POD_TEMPLATE_HASH_LABEL, REVISION_ANNOTATION,
    REVISION_HISTORY_ANNOTATION, ROLLBACK_TO_ANNOTATION,
    copy_deployment_annotations_to_replica_set, last_revision, max_revision,
    replicas_annotations_need_update, revision, rollback_to, set_deployment_revision,
    set_new_replica_set_annotations, set_replicas_annotations,
};
pub use conditions::{
    get_deployment_condition, new_deployment_condition, remove_deployment_condition,
    set_deployment_condition,
};
pub use controller::{DeploymentController, DeploymentOptions};
pub use hash::compute_hash;
pub use history::replica_sets_to_clean_up;
pub use new_replica_set::{
    ExistingNewReplicaSet, generate_replica_set_name, new_replica_set,
    sync_existing_new_replica_set,
};
pub use progress::{deployment_complete, deployment_progressing, deployment_timed_out};
pub use proportional::{
    find_active_or_latest, get_proportion, get_replica_sets_delta, is_saturated, is_scaling_event,
    plan_proportional_scale,
};
pub use recreate::old_pods_running;
pub use replica_sets::{
    equal_ignore_hash, filter_active, find_new_replica_set, find_old_replica_sets,
};
pub use replica_sets::{
    get_actual_replica_count_for_replica_sets, get_available_replica_count_for_replica_sets,
    get_ready_replica_count_for_replica_sets, get_replica_count_for_replica_sets,
};
pub use rolling::{
    OldReplicaSetsPlan, new_rs_new_replicas, reconcile_new_replica_set, reconcile_old_replica_sets,
};
pub use scale::{ScaleStep, scale_replica_set};
pub use status::{
    ProgressRequeue, calculate_status, check_paused_conditions, deployment_status_equal,
    requeue_after_for_progress, rollout_status, status_needs_write, with_status_selector,
};
pub use strategy::{max_surge, max_unavailable, min_available, resolve_fenceposts};

/// What a decision can fail on. Upstream's validation keeps both out of stored objects; they can only
/// come from objects that bypassed it (or from a CRD copy whose schema is looser).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
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
