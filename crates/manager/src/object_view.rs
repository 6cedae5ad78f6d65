//! One workload object as its controller sees it, for `/debug/controllers/object` and `mini-kcm explain`:
//! what it owns in the informer caches (a Deployment's ReplicaSets and their pods and its rollout
//! timeline, a ReplicaSet's pods, a DaemonSet's pods and the node → pod map of its last sync), where its key is in the work queue, what
//! its controller still expects to observe, and its recent decisions.
//!
//! Why a separate view: the state page shows every controller at once and caps its lists; a person
//! debugging one rollout wants everything about one object, including the ownership chain (owner
//! references, `pod-template-hash`) that explains which pods a controller counts.
//!
//! The types are plain serde data, so the CLI deserializes what the manager serves. The tree is read from
//! the caches (what the controller decides on), not from the API server, and lists at most
//! [`LIST_LIMIT`] pods per owner with the full count beside them.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{DaemonSetCondition, DeploymentCondition, ReplicaSetCondition};
use kube::api::ObjectMeta;
use mini_kcm_runtime::api::kinds::{DeploymentObject, ReplicaSetObject, controller_ref};
use mini_kcm_runtime::observability::decisions::{Decision, NodeMap, RolloutPoint, RoutineRetry};
use mini_kcm_runtime::observability::inspect::{ControllerView, ExpectationView, LIST_LIMIT};
use mini_kcm_runtime::pods::cached::CachedPod;
use mini_kcm_runtime::pods::ranking::is_pod_ready;
use serde::{Deserialize, Serialize};

/// `?kind=&family=&namespace=&name=`: which object to show.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ObjectQuery {
    /// `Deployment`, `ReplicaSet` or `DaemonSet` (case-insensitive; `deploy`, `rs`, `ds` too).
    pub kind: String,
    /// `apps` (default) or `copies`.
    #[serde(default)]
    pub family: Option<String>,
    #[serde(default)]
    pub namespace: Option<String>,
    pub name: String,
}

/// The workload kinds an object view is about, with the controller that syncs each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ViewedKind {
    Deployment,
    ReplicaSet,
    DaemonSet,
}

impl ViewedKind {
    /// Reads `Deployment`, `deployments`, `deploy`, `rs`, `ds`, ... (as kubectl's short names).
    pub(crate) fn parse(text: &str) -> Option<Self> {
        match text.to_ascii_lowercase().as_str() {
            "deployment" | "deployments" | "deploy" => Some(ViewedKind::Deployment),
            "replicaset" | "replicasets" | "rs" => Some(ViewedKind::ReplicaSet),
            "daemonset" | "daemonsets" | "ds" => Some(ViewedKind::DaemonSet),
            _ => None,
        }
    }

    pub fn kind(self) -> &'static str {
        match self {
            ViewedKind::Deployment => "Deployment",
            ViewedKind::ReplicaSet => "ReplicaSet",
            ViewedKind::DaemonSet => "DaemonSet",
        }
    }

    /// The controller's name in views and decisions.
    pub(crate) fn controller(self) -> &'static str {
        match self {
            ViewedKind::Deployment => "deployment",
            ViewedKind::ReplicaSet => "replicaset",
            ViewedKind::DaemonSet => "daemonset",
        }
    }
}

/// Everything about one object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ObjectView {
    pub kind: String,
    pub family: String,
    pub namespace: String,
    pub name: String,
    /// Whether the manager runs the controller of this kind and family (otherwise the rest is empty).
    pub controller_running: bool,
    /// Whether the object is in the informer cache (a deleted object keeps its decisions for a while).
    pub found: bool,
    pub uid: Option<String>,
    /// Desired replicas (Deployment, ReplicaSet) or desired scheduled pods (DaemonSet, from its status).
    pub desired: Option<i32>,
    pub generation: Option<i64>,
    pub observed_generation: Option<i64>,
    /// A Deployment's `spec.paused` (`None` for other kinds).
    #[serde(default)]
    pub paused: Option<bool>,
    /// A Deployment's `deployment.kubernetes.io/revision`: the revision of its newest ReplicaSet.
    #[serde(default)]
    pub revision: Option<String>,
    /// `status.conditions` (a Deployment's Available and Progressing, a ReplicaSet's ReplicaFailure...).
    #[serde(default)]
    pub conditions: Vec<ConditionEntry>,
    /// Where the object's key is in its controller's work queue.
    pub queue: KeyQueueState,
    /// Pod creations and deletions its controller still waits to observe (ReplicaSet, DaemonSet).
    pub expectations: Option<ExpectationView>,
    /// A Deployment's ReplicaSets (owned by it), newest revision first.
    pub replica_sets: Vec<ReplicaSetEntry>,
    /// A ReplicaSet's or DaemonSet's own pods (a Deployment's are under its ReplicaSets).
    pub pods: Vec<PodEntry>,
    /// Pods owned beyond [`LIST_LIMIT`], counted only.
    pub pods_omitted: usize,
    /// A DaemonSet's node → pod map from its last sync that computed one.
    pub node_map: Option<NodeMap>,
    /// A Deployment's rollout timeline (what its syncs saw, oldest first), for the live view's picture.
    #[serde(default)]
    pub rollout: Vec<RolloutPoint>,
    /// Its newest decisions, newest first.
    pub decisions: Vec<Decision>,
}

/// Where a key is in a work queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum KeyQueueState {
    /// Not in the queue: nothing to do until an event arrives.
    Idle,
    /// Waiting for a worker, at its priority (`fresh` or `low`), for what queued it.
    Queued {
        #[serde(default)]
        priority: String,
        #[serde(default)]
        reasons: Vec<String>,
    },
    /// A worker syncs it now.
    InFlight,
    /// Waiting for a delay: a backoff after `retries` failures, or a requested recheck (0 retries).
    Waiting {
        retries: usize,
        next_attempt_in_ms: u64,
        /// The last of those failures was a routine retry, and why (`None`: a real failure).
        #[serde(default)]
        routine: Option<RoutineRetry>,
    },
    /// The queue holds more keys than a view lists, and this one is not among those listed.
    Unknown,
}

impl KeyQueueState {
    /// Finds `key` (`namespace/name`) in a controller's queue view.
    pub(crate) fn find(view: &ControllerView, key: &str) -> Self {
        let queue = &view.queue;
        if queue.in_flight.iter().any(|k| k == key) {
            return KeyQueueState::InFlight;
        }
        if let Some(w) = queue.waiting.iter().find(|w| w.key == key) {
            return KeyQueueState::Waiting {
                retries: w.retries,
                next_attempt_in_ms: w.next_attempt_in_ms,
                routine: w.routine,
            };
        }
        if let Some(q) = queue.queued.iter().find(|q| q.key == key) {
            return KeyQueueState::Queued {
                priority: q.priority.clone(),
                reasons: q.reasons.clone(),
            };
        }
        let truncated = queue.queued.len() < queue.queued_count
            || queue.in_flight.len() < queue.in_flight_count
            || queue.waiting.len() < queue.waiting_count;
        if truncated {
            KeyQueueState::Unknown
        } else {
            KeyQueueState::Idle
        }
    }

    /// A few words for people.
    pub fn describe(&self) -> String {
        match self {
            KeyQueueState::Idle => "idle (not queued)".into(),
            KeyQueueState::Queued { priority, reasons } => {
                let why = if reasons.is_empty() {
                    String::new()
                } else {
                    format!(" (woken by: {})", reasons.join("; "))
                };
                format!("queued at {priority} priority, waiting for a worker{why}")
            }
            KeyQueueState::InFlight => "in flight (a worker syncs it now)".into(),
            KeyQueueState::Waiting {
                retries: 0,
                next_attempt_in_ms,
                ..
            } => format!("waiting: recheck in {}", seconds(*next_attempt_in_ms)),
            KeyQueueState::Waiting {
                retries,
                next_attempt_in_ms,
                routine: Some(reason),
            } => format!(
                "routine retry ({}, not a failure) after {retries} unfinished sync{}: next attempt in {}",
                reason.label(),
                if *retries == 1 { "" } else { "s" },
                seconds(*next_attempt_in_ms)
            ),
            KeyQueueState::Waiting {
                retries,
                next_attempt_in_ms,
                routine: None,
            } => format!(
                "in backoff after {retries} failed sync{}: next attempt in {}",
                if *retries == 1 { "" } else { "s" },
                seconds(*next_attempt_in_ms)
            ),
            KeyQueueState::Unknown => "unknown (the queue is longer than the view lists)".into(),
        }
    }
}

fn seconds(ms: u64) -> String {
    format!("{:.1}s", ms as f64 / 1000.0)
}

/// One condition of `status.conditions`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConditionEntry {
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    pub reason: Option<String>,
    pub message: Option<String>,
}

/// Each kind has its own condition type with the same four fields.
macro_rules! condition_entry_from {
    ($($condition:ty),*) => {$(
        impl From<&$condition> for ConditionEntry {
            fn from(c: &$condition) -> Self {
                ConditionEntry {
                    type_: c.type_.clone().unwrap_or_default(),
                    status: c.status.clone().unwrap_or_default(),
                    reason: c.reason.clone(),
                    message: c.message.clone(),
                }
            }
        }
    )*};
}
condition_entry_from!(DeploymentCondition, ReplicaSetCondition, DaemonSetCondition);

impl ConditionEntry {
    /// The entries of `conditions` (a missing list is an empty one).
    pub fn list<'a, C: 'a>(conditions: Option<&'a Vec<C>>) -> Vec<ConditionEntry>
    where
        ConditionEntry: From<&'a C>,
    {
        conditions
            .map(|cs| cs.iter().map(ConditionEntry::from).collect())
            .unwrap_or_default()
    }
}

/// What a view shows of a Deployment itself: paused, its revision and its conditions.
pub(crate) fn deployment_facts(
    d: &DeploymentObject,
) -> (Option<bool>, Option<String>, Vec<ConditionEntry>) {
    let paused = Some(d.spec.paused == Some(true));
    let revision = d
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(REVISION_ANNOTATION).cloned());
    let conditions = ConditionEntry::list(d.status.as_ref().and_then(|s| s.conditions.as_ref()));
    (paused, revision, conditions)
}

/// One ReplicaSet of a Deployment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplicaSetEntry {
    pub name: String,
    pub pod_template_hash: Option<String>,
    /// `deployment.kubernetes.io/revision`.
    pub revision: Option<String>,
    /// `spec.replicas`.
    pub replicas: i32,
    /// `status.replicas`, `readyReplicas`, `availableReplicas`.
    pub current: i32,
    pub ready: i32,
    pub available: i32,
    /// Its controller owner reference, `Kind/name`.
    pub owner: Option<String>,
    pub pods: Vec<PodEntry>,
    pub pods_omitted: usize,
}

/// One pod.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PodEntry {
    pub name: String,
    /// Its controller owner reference, `Kind/name`.
    pub owner: Option<String>,
    pub pod_template_hash: Option<String>,
    /// Its `controller-revision-hash` label (a DaemonSet's pods: which template revision made it).
    #[serde(default)]
    pub controller_revision_hash: Option<String>,
    pub node: Option<String>,
    pub phase: Option<String>,
    pub ready: bool,
    /// Being deleted (`deletionTimestamp` set).
    pub deleting: bool,
}

// The controllers' own names, so the view reads what they write.
use mini_kcm_daemonset::REVISION_HASH_LABEL;
use mini_kcm_deployment::{POD_TEMPLATE_HASH_LABEL as HASH_LABEL, REVISION_ANNOTATION};

/// `Kind/name` of the controller owner reference.
pub(crate) fn owner_of(meta: &ObjectMeta) -> Option<String> {
    controller_ref(meta).map(|r| format!("{}/{}", r.kind, r.name))
}

fn label(meta: &ObjectMeta, key: &str) -> Option<String> {
    meta.labels.as_ref()?.get(key).cloned()
}

impl PodEntry {
    pub(crate) fn of(pod: &CachedPod) -> Self {
        PodEntry {
            name: pod.metadata.name.clone().unwrap_or_default(),
            owner: owner_of(&pod.metadata),
            pod_template_hash: label(&pod.metadata, HASH_LABEL),
            controller_revision_hash: label(&pod.metadata, REVISION_HASH_LABEL),
            node: pod.spec.as_ref().and_then(|s| s.node_name.clone()),
            phase: pod.status.as_ref().and_then(|s| s.phase.clone()),
            ready: is_pod_ready(pod),
            deleting: pod.metadata.deletion_timestamp.is_some(),
        }
    }

    /// The first [`LIST_LIMIT`] of `pods` by name, and how many were left out.
    pub(crate) fn list(pods: &[Arc<CachedPod>]) -> (Vec<PodEntry>, usize) {
        let mut entries: Vec<PodEntry> = pods.iter().map(|p| PodEntry::of(p)).collect();
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        let omitted = entries.len().saturating_sub(LIST_LIMIT);
        entries.truncate(LIST_LIMIT);
        (entries, omitted)
    }
}

impl ReplicaSetEntry {
    /// The entry of `rs` with its pods.
    pub(crate) fn of(rs: &ReplicaSetObject, pods: &[Arc<CachedPod>]) -> Self {
        let status = rs.status.as_ref();
        let (pods, pods_omitted) = PodEntry::list(pods);
        ReplicaSetEntry {
            name: rs.metadata.name.clone().unwrap_or_default(),
            pod_template_hash: label(&rs.metadata, HASH_LABEL),
            revision: rs
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(REVISION_ANNOTATION).cloned()),
            replicas: rs.spec.replicas.unwrap_or(1),
            current: status.map_or(0, |s| s.replicas),
            ready: status.and_then(|s| s.ready_replicas).unwrap_or(0),
            available: status.and_then(|s| s.available_replicas).unwrap_or(0),
            owner: owner_of(&rs.metadata),
            pods,
            pods_omitted,
        }
    }

    /// Newest revision first (a missing or unparsable revision last), then by name.
    pub(crate) fn sort(entries: &mut [ReplicaSetEntry]) {
        let revision = |e: &ReplicaSetEntry| {
            e.revision
                .as_deref()
                .and_then(|r| r.parse::<i64>().ok())
                .unwrap_or(i64::MIN)
        };
        entries.sort_by(|a, b| {
            revision(b)
                .cmp(&revision(a))
                .then_with(|| a.name.cmp(&b.name))
        });
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use mini_kcm_runtime::observability::inspect::{QueueView, QueuedView, SyncView, WaitingView};
    use serde_json::json;

    fn pod(name: &str, hash: &str, ready: bool) -> Arc<CachedPod> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {
                    "name": name,
                    "labels": {"pod-template-hash": hash},
                    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                        "name": format!("web-{hash}"), "uid": "u1", "controller": true}],
                },
                "spec": {"nodeName": "kwok-node-1", "containers": []},
                "status": {"phase": "Running", "conditions": [
                    {"type": "Ready", "status": if ready { "True" } else { "False" }}]},
            }))
            .unwrap(),
        )
    }

    fn rs(name: &str, revision: &str) -> ReplicaSetObject {
        serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {
                "name": name,
                "labels": {"pod-template-hash": name.trim_start_matches("web-")},
                "annotations": {"deployment.kubernetes.io/revision": revision},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment",
                    "name": "web", "uid": "d1", "controller": true}],
            },
            "spec": {"replicas": 2, "selector": {}},
            "status": {"replicas": 2, "readyReplicas": 1, "availableReplicas": 1},
        }))
        .unwrap()
    }

    #[test]
    fn a_replica_set_entry_shows_its_ownership_chain_and_pods() {
        let pods = [
            pod("web-abc-2", "abc", false),
            pod("web-abc-1", "abc", true),
        ];
        let entry = ReplicaSetEntry::of(&rs("web-abc", "3"), &pods);
        assert_eq!(entry.owner.as_deref(), Some("Deployment/web"));
        assert_eq!(entry.pod_template_hash.as_deref(), Some("abc"));
        assert_eq!(entry.revision.as_deref(), Some("3"));
        assert_eq!((entry.replicas, entry.ready, entry.available), (2, 1, 1));
        let names: Vec<&str> = entry.pods.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["web-abc-1", "web-abc-2"]);
        assert!(entry.pods[0].ready && !entry.pods[1].ready);
        assert_eq!(entry.pods[0].owner.as_deref(), Some("ReplicaSet/web-abc"));
        assert_eq!(entry.pods[0].node.as_deref(), Some("kwok-node-1"));

        let mut entries = vec![
            ReplicaSetEntry::of(&rs("web-old", "2"), &[]),
            ReplicaSetEntry::of(&rs("web-new", "10"), &[]),
        ];
        ReplicaSetEntry::sort(&mut entries);
        assert_eq!(entries[0].name, "web-new", "revision 10 sorts before 2");
    }

    #[test]
    fn a_deployment_shows_paused_its_revision_and_conditions() {
        let d: DeploymentObject = serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "generation": 4,
                "annotations": {"deployment.kubernetes.io/revision": "3"}},
            "spec": {"paused": true, "selector": {}, "template": {}},
            "status": {"observedGeneration": 4, "conditions": [
                {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
                 "message": "Deployment has minimum availability."},
                {"type": "Progressing", "status": "Unknown", "reason": "DeploymentPaused",
                 "message": "Deployment is paused"},
            ]},
        }))
        .unwrap();
        let (paused, revision, conditions) = deployment_facts(&d);
        assert_eq!(paused, Some(true));
        assert_eq!(revision.as_deref(), Some("3"));
        assert_eq!(
            conditions[1],
            ConditionEntry {
                type_: "Progressing".into(),
                status: "Unknown".into(),
                reason: Some("DeploymentPaused".into()),
                message: Some("Deployment is paused".into()),
            }
        );
        assert_eq!(conditions.len(), 2);
        // The JSON the page and `explain` read: `type`, as in the API.
        assert_eq!(
            serde_json::to_value(&conditions[0]).unwrap()["type"],
            "Available"
        );

        let bare: DeploymentObject = serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"selector": {}, "template": {}},
        }))
        .unwrap();
        assert_eq!(deployment_facts(&bare), (Some(false), None, Vec::new()));

        let rs: ReplicaSetObject = serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web-abc"},
            "spec": {"selector": {}},
            "status": {"replicas": 0, "conditions": [{"type": "ReplicaFailure", "status": "True",
                "reason": "FailedCreate", "message": "exceeded quota"}]},
        }))
        .unwrap();
        let listed = ConditionEntry::list(rs.status.as_ref().and_then(|s| s.conditions.as_ref()));
        assert_eq!(listed[0].reason.as_deref(), Some("FailedCreate"));
    }

    fn controller_with(queue: QueueView) -> ControllerView {
        ControllerView {
            controller: "replicaset".into(),
            family: "apps".into(),
            kind: "ReplicaSet".into(),
            workers: 1,
            queue,
            syncs: SyncView {
                total: 0,
                failed: 0,
                routine_retries: 0,
                routine: Vec::new(),
                last_minute: 0,
            },
            expectations: Vec::new(),
        }
    }

    #[test]
    fn a_key_is_found_in_its_queue_state() {
        let queue = QueueView {
            queued: vec![QueuedView {
                key: "ns/a".into(),
                priority: "low".into(),
                reasons: vec!["initial list".into()],
                more: 0,
                queued_for_ms: 20,
            }],
            queued_count: 1,
            in_flight: vec!["ns/b".into()],
            in_flight_count: 1,
            waiting: vec![
                WaitingView {
                    key: "ns/c".into(),
                    retries: 3,
                    next_attempt_in_ms: 1500,
                    routine: None,
                },
                WaitingView {
                    key: "ns/d".into(),
                    retries: 1,
                    next_attempt_in_ms: 5,
                    routine: Some(RoutineRetry::Conflict),
                },
            ],
            waiting_count: 2,
        };
        let view = controller_with(queue.clone());
        assert_eq!(
            KeyQueueState::find(&view, "ns/a").describe(),
            "queued at low priority, waiting for a worker (woken by: initial list)"
        );
        assert_eq!(KeyQueueState::find(&view, "ns/b"), KeyQueueState::InFlight);
        let waiting = KeyQueueState::find(&view, "ns/c");
        assert_eq!(
            waiting.describe(),
            "in backoff after 3 failed syncs: next attempt in 1.5s"
        );
        // A routine retry is not called a failure.
        assert_eq!(
            KeyQueueState::find(&view, "ns/d").describe(),
            "routine retry (write conflict, not a failure) after 1 unfinished sync: next attempt in 0.0s"
        );
        assert_eq!(KeyQueueState::find(&view, "ns/z"), KeyQueueState::Idle);
        let longer = controller_with(QueueView {
            queued_count: 500,
            ..queue
        });
        assert_eq!(KeyQueueState::find(&longer, "ns/z"), KeyQueueState::Unknown);
    }

    #[test]
    fn kinds_read_like_kubectl() {
        assert_eq!(ViewedKind::parse("deploy"), Some(ViewedKind::Deployment));
        assert_eq!(
            ViewedKind::parse("ReplicaSet"),
            Some(ViewedKind::ReplicaSet)
        );
        assert_eq!(ViewedKind::parse("ds"), Some(ViewedKind::DaemonSet));
        assert_eq!(ViewedKind::parse("pod"), None);
    }
}
