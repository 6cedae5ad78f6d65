//! The DaemonSet controller of mini-kcm, deciding as kube-controller-manager v1.37 does: which nodes should
//! run a daemon pod, what the pods look like, which revision is current, what a rolling update deletes or
//! creates, how failed pods are backed off, and what the status says.
//!
//! Where to start reading: `controller/sync.rs` (`sync_daemon_set`, upstream's `syncDaemonSet`; the
//! runtime's `ControllerCore` runs it and handles "stale cache" and "gone" first) reads a snapshot of
//! the caches (`controller/snapshot.rs`), settles the revisions (`controller/revision_writes.rs`), then `manage`s
//! the pods per node and, for a RollingUpdate, `update_daemon_set`s them; each step asks a pure module
//! below what to do.
//!
//! The API is [`NEW_CONTROLLER`], which the manager's descriptor table calls, plus
//! [`revision_data`] for the cross-check against upstream's encoding; everything else is private.
//!
//! The crate has two layers:
//! - the **pure decision logic** (every module but `controller`): functions on k8s-openapi objects (the
//!   DaemonSet is `DaemonSetObject`, shared by `apps/v1` and the CRD copy `minikcm.dev/v1`) that return
//!   plans; none of them talks to the API server, records events or touches a queue, so each is unit-tested
//!   against upstream's cases and says which upstream step it stands for;
//! - the **controller** (`controller/`), which runs on the shared informers (DaemonSets of one family,
//!   pods, nodes, ControllerRevisions), turns events into keys, and in each sync reads a snapshot from the
//!   caches, asks the pure modules what to do, and does it: claims pods and revisions, creates and deletes
//!   pods and revisions, records events and writes the status.
//!
//! Pure modules, in the order a sync uses them:
//! - `placement`: which nodes should run (and keep running) a daemon pod, precomputed once per sync;
//! - `history`: ControllerRevision data, names, matching, deduplication and cleanup;
//! - `manage`: the per-node create/delete plan of `manage` (failed pods, duplicates, surge pairs);
//! - `update`: the rolling-update arithmetic and plans (maxUnavailable and maxSurge paths);
//! - `affinity`: the pod template created for a node (node affinity, tolerations, revision labels);
//! - `backoff`: the per-node failed-pod backoff;
//! - `status`: the status counts, when to write them and when to look again.

// The public surface is the list of `pub use` below; this keeps every other `pub` from claiming more.
#![warn(unreachable_pub)]

mod affinity;
mod backoff;
mod controller;
mod history;
mod manage;
mod placement;
mod status;
#[cfg(test)]
mod test_fixtures;
mod update;

use mini_kcm_runtime::api::kinds::DaemonSetObject;

/// Builds one DaemonSet controller instance: the manager's descriptor table calls it.
pub const NEW_CONTROLLER: mini_kcm_runtime::controller::NewController =
    mini_kcm_runtime::controller::new_controller::<controller::DaemonSetController>;

/// The bytes of a ControllerRevision's `data` for a DaemonSet, public for the cross-check against
/// upstream's own encoding (`tests/revision_data_crosscheck.rs`).
pub use history::revision_data;

/// Label on pods and ControllerRevisions naming the revision a pod was made from (upstream
/// `apps.DefaultDaemonSetUniqueLabelKey`, equal to `ControllerRevisionHashLabelKey`); public for the live
/// view, which groups a DaemonSet's pods by it.
pub const REVISION_HASH_LABEL: &str = "controller-revision-hash";

/// Label on pods carrying the DaemonSet's template generation, kept for pods made before revisions existed
/// (upstream `extensions.DaemonSetTemplateGenerationKey`).
pub(crate) const TEMPLATE_GENERATION_LABEL: &str = "pod-template-generation";

/// Annotation on the DaemonSet in which the API server keeps the template generation (upstream
/// `apps.DeprecatedTemplateGeneration`).
pub(crate) const TEMPLATE_GENERATION_ANNOTATION: &str = "deprecated.daemonset.template.generation";

/// At most this many pods are created, and at most this many deleted, by one sync (upstream `BurstReplicas`).
pub(crate) const BURST_REPLICAS: usize = 250;

/// Event reason for a failed daemon pod that is being deleted.
pub(crate) const FAILED_DAEMON_POD_REASON: &str = "FailedDaemonPod";
/// Event reason for a succeeded daemon pod that is being deleted.
pub(crate) const SUCCEEDED_DAEMON_POD_REASON: &str = "SucceededDaemonPod";
/// Event reason for a DaemonSet whose selector is `{}`.
pub(crate) const SELECTING_ALL_REASON: &str = "SelectingAll";
