//! The DaemonSet controller's decisions, as kube-controller-manager v1.36 makes them: which nodes should run a
//! daemon pod, what the pods look like, which revision is current, what a rolling update deletes or creates, how
//! failed pods are backed off, and what the status says.
//!
//! The crate has two layers:
//! - the **pure decision logic** (every module but [`controller`]): functions on k8s-openapi objects (the
//!   DaemonSet is [`DaemonSetObject`], shared by `apps/v1` and the CRD copy `minikcm.dev/v1`) that return
//!   plans; none of them talks to the API server, records events or touches a queue, so each is unit-tested
//!   against upstream's cases and says which upstream step it stands for;
//! - the **[`controller`]** ([`DaemonSetController`]), which runs on the shared informers (DaemonSets of one
//!   family, pods, nodes, ControllerRevisions), turns events into keys, and in each sync reads a snapshot
//!   from the caches, asks the pure modules what to do, and does it: claims pods and revisions, creates and
//!   deletes pods and revisions, records events and writes the status.
//!
//! Pure modules, in the order a sync uses them:
//! - [`placement`]: which nodes should run (and keep running) a daemon pod, precomputed once per sync;
//! - [`history`]: ControllerRevision data, names, matching, deduplication and cleanup;
//! - [`manage`]: the per-node create/delete plan of `manage` (failed pods, duplicates, surge pairs);
//! - [`update`]: the rolling-update arithmetic and plans (maxUnavailable and maxSurge paths);
//! - [`affinity`]: the pod template created for a node (node affinity, tolerations, revision labels);
//! - [`backoff`]: the per-node failed-pod backoff;
//! - [`status`]: the status counts, when to write them and when to look again.

pub mod affinity;
pub mod backoff;
pub mod controller;
pub mod history;
pub mod manage;
pub mod placement;
pub mod status;
pub mod update;

pub use mini_kcm_runtime::kinds::DaemonSetObject;

pub use controller::{DaemonSetController, DaemonSetOptions, EVENT_COMPONENT, SyncError};

pub use affinity::{
    TargetNodeError, create_pod_template, get_target_node_name, pod_template_for_node,
    replace_daemon_set_pod_node_name_node_affinity,
};
pub use backoff::{
    BACKOFF_GC_INTERVAL, FAILED_POD_BACKOFF_INITIAL, FAILED_POD_BACKOFF_MAX, FailedPodBackoff,
    failed_pods_backoff_key,
};
pub use history::{
    DEFAULT_REVISION_HISTORY_LIMIT, DedupPlan, HistoryError, PartitionedHistories, build_revision,
    dedup_histories, find_matching_history, live_hashes, max_revision, relabel_pod_patch,
    revision_create_body, revision_data, revision_hash, revision_history_limit, revision_matches,
    revision_name, revisions_to_clean_up, with_hash_label,
};
pub use manage::{
    DaemonPodEvent, ManageContext, ManagePlan, NodePlan, cmp_oldest_first, group_pods_by_node,
    plan_manage, plan_node, unscheduled_pods_without_node,
};
pub use placement::{
    DaemonPlacement, NodeDecision, add_or_update_daemon_pod_tolerations,
    node_should_run_daemon_pod, toleration_tolerates_taint,
};
pub use status::{StatusCounts, StatusReport, calculate_status, status_to_store};
pub use update::{
    NodePods, RollingUpdatePlan, UpdateContext, UpdateError, UpdateLimits, allows_surge,
    get_unavailable_numbers, is_pod_updated, plan_max_unavailable, plan_rolling_update, plan_surge,
    surge_count, template_generation, unavailable_count,
};

/// Label on pods and ControllerRevisions naming the revision a pod was made from (upstream
/// `apps.DefaultDaemonSetUniqueLabelKey`, equal to `ControllerRevisionHashLabelKey`).
pub const REVISION_HASH_LABEL: &str = "controller-revision-hash";

/// Label on pods carrying the DaemonSet's template generation, kept for pods made before revisions existed
/// (upstream `extensions.DaemonSetTemplateGenerationKey`).
pub const TEMPLATE_GENERATION_LABEL: &str = "pod-template-generation";

/// Annotation on the DaemonSet in which the API server keeps the template generation (upstream
/// `apps.DeprecatedTemplateGeneration`).
pub const TEMPLATE_GENERATION_ANNOTATION: &str = "deprecated.daemonset.template.generation";

/// At most this many pods are created, and at most this many deleted, by one sync (upstream `BurstReplicas`).
pub const BURST_REPLICAS: usize = 250;

/// Event reason for a failed daemon pod that is being deleted.
pub const FAILED_DAEMON_POD_REASON: &str = "FailedDaemonPod";
/// Event reason for a succeeded daemon pod that is being deleted.
pub const SUCCEEDED_DAEMON_POD_REASON: &str = "SucceededDaemonPod";
/// Event reason for a DaemonSet whose selector is `{}`.
pub const SELECTING_ALL_REASON: &str = "SelectingAll";
