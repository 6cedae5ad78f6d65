//! One sync of one DaemonSet (upstream's `syncDaemonSet`), in upstream's order:
//!
//! 1. skip while the caches have not caught up with our own writes (read-your-own-writes);
//! 2. a DaemonSet that is gone: forget it; an empty selector: refuse (`SelectingAll`); being deleted: stop
//!    (no status: its pods and revisions may be going away under us);
//! 3. read the snapshot: every node, the DaemonSet's pods (its own plus the namespace's orphans, from the pod
//!    index) claimed by the selector, and its placement rules parsed once;
//! 4. construct the history: claim the revisions, find or create the current one (its hash labels new pods);
//! 5. if the expectations are satisfied: manage (create missing pods, delete failed, surplus and misplaced
//!    ones), then, if manage had nothing to do and the strategy is RollingUpdate, one rolling-update step;
//!    then clean up old revisions;
//! 6. write the status (`observedGeneration` only if step 5 ran) and requeue for pods about to become
//!    available.
//!
//! Cost: O(pods of the DaemonSet + orphans of its namespace + revisions of the DaemonSet + nodes), and the
//! nodes are only read, never copied: there is no node-to-pod table to maintain between syncs, the mapping
//! is rebuilt from the snapshot each time.

use std::sync::Arc;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use mini_kcm_runtime::controller::ObjectKey;
use mini_kcm_runtime::decisions;
use mini_kcm_runtime::events::object_reference;
use mini_kcm_runtime::expectations::waiting_reason;
use mini_kcm_runtime::kinds::pods_for_owner;
use mini_kcm_runtime::ownership::{OwnerInfo, claim};
use mini_kcm_runtime::pods::cached::CachedPod;
use mini_kcm_runtime::selector::Selector;

use super::DaemonSetController;
use super::error::SyncError;
use super::history::History;
use super::snapshot::Snapshot;
use crate::manage::{ManageContext, group_pods_by_node, node_map, plan_manage};
use crate::update::{plan_rolling_update, without_unmaintained_template_generation};
use crate::{DaemonSetObject, REVISION_HASH_LABEL, SELECTING_ALL_REASON};

impl DaemonSetController {
    /// One sync of one DaemonSet, in upstream's order (docs/daemonset.md, "One sync").
    ///
    /// upstream: syncDaemonSet
    pub(crate) async fn sync(&self, key: &ObjectKey) -> Result<(), SyncError> {
        let s = &self.inner;
        let started = std::time::Instant::now();
        if !s.consistency.is_ready(key) {
            s.metrics
                .stale_sync_skips
                .inc(&s.resource.group, "daemonsets");
            return Err(SyncError::StaleCache);
        }
        let namespace = key.namespace();
        let Some(ds) = s.daemon_sets.get(namespace, key.name()) else {
            tracing::debug!("DaemonSet has been deleted; forgetting its expectations");
            s.consistency.clear(key);
            s.expectations.delete_expectations(key);
            s.status_writes.forget(key);
            return Ok(());
        };
        let ds = without_unmaintained_template_generation(ds, s.options.family);
        let selector = match Selector::from_label_selector(&ds.spec.selector) {
            Ok(selector) if !selector.is_empty() => selector,
            Ok(_) => {
                s.recorder.warning(
                    &object_reference(ds.as_ref(), &s.resource),
                    None,
                    SELECTING_ALL_REASON,
                    "Select",
                    "This daemon set is selecting all pods. A non-empty selector is required."
                        .into(),
                );
                return Ok(());
            }
            Err(e) => {
                // The API server validates selectors; a bad one here would fail every sync alike.
                tracing::error!(error = %e, "invalid selector; not syncing");
                return Ok(());
            }
        };
        if ds.metadata.deletion_timestamp.is_some() {
            tracing::debug!("DaemonSet is being deleted; nothing to do");
            return Ok(());
        }

        let nodes = s.nodes.list();
        let placement = s.placements.get(&ds);
        let owner = OwnerInfo::of(ds.as_ref(), &s.resource);
        let ds_api: Api<DaemonSetObject> =
            Api::namespaced_with(s.client.clone(), namespace, &s.resource);
        let mut pods = self.claim_pods(&ds, &owner, &selector, &ds_api).await?;
        let History { current, old } = self
            .construct_history(key, &ds, &owner, &selector, &ds_api, &mut pods)
            .await?;
        let hash = current
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(REVISION_HASH_LABEL))
            .map_or("", String::as_str);

        let snapshot = Snapshot {
            key,
            ds: &ds,
            owner,
            placement: &placement,
            nodes: &nodes,
            node_to_pods: group_pods_by_node(pods.iter().map(AsRef::as_ref), false),
            hash,
        };
        // Waiting for earlier creations or deletions to show up: only the status, and without claiming
        // that this generation was processed.
        let needs_sync = s.expectations.satisfied_expectations(key);
        let update_result = if needs_sync {
            self.update_daemon_set(&snapshot, &old, &pods).await
        } else {
            decisions::skip(waiting_reason(s.expectations.get(key)));
            Ok(())
        };
        let status_result = self.update_status(&snapshot, &ds_api, needs_sync).await;
        tracing::debug!(elapsed = ?started.elapsed(), "synced");
        match (update_result, status_result) {
            (Err(e), Err(status_error)) => {
                tracing::warn!(error = %status_error, "updating the status failed too");
                Err(e)
            }
            (Err(e), Ok(())) | (Ok(()), Err(e)) => Err(e),
            (Ok(()), Ok(())) => Ok(()),
        }
    }

    /// Upstream's `updateDaemonSet`: manage, one rolling-update step, history cleanup.
    async fn update_daemon_set(
        &self,
        snapshot: &Snapshot<'_>,
        old_revisions: &[Arc<k8s_openapi::api::apps::v1::ControllerRevision>],
        pods: &[Arc<CachedPod>],
    ) -> Result<(), SyncError> {
        let s = &self.inner;
        let manage_acted = self.manage(snapshot).await?;
        // The rolling update plans on the same snapshot, so only when manage changed nothing in it (upstream
        // re-reads the cache, which is the same thing once the expectations are satisfied). A manage that
        // acted brings events, and with them the next sync.
        if !manage_acted
            && s.expectations.satisfied_expectations(snapshot.key)
            && is_rolling_update(snapshot.ds)
        {
            let plan = plan_rolling_update(
                snapshot.ds,
                snapshot.placement,
                snapshot.nodes,
                &snapshot.node_to_pods,
                snapshot.hash,
                Timestamp::now(),
            )?;
            if !plan.pods_to_delete.is_empty() || !plan.nodes_needing_pods.is_empty() {
                decisions::reason(
                    "rolling update: the current revision's pods replace old ones within maxUnavailable / maxSurge",
                );
                describe_pod_changes(&plan.nodes_needing_pods, &plan.pods_to_delete);
            }
            self.sync_nodes(snapshot, &plan.pods_to_delete, &plan.nodes_needing_pods)
                .await?;
        }
        self.cleanup_history(snapshot, old_revisions, pods).await
    }

    /// Upstream's `manage`: the per-node plan executed by `sync_nodes`, with the failed-pod events and the
    /// backoff requeue. Returns whether any pod was to be created or deleted.
    ///
    /// upstream: manage
    async fn manage(&self, snapshot: &Snapshot<'_>) -> Result<bool, SyncError> {
        let s = &self.inner;
        let plan = {
            let ctx = ManageContext::new(
                snapshot.ds,
                snapshot.hash,
                Timestamp::now(),
                tokio::time::Instant::now(),
            );
            let mut backoff = s.backoff();
            plan_manage(
                &ctx,
                snapshot.placement,
                snapshot.nodes,
                &snapshot.node_to_pods,
                &mut backoff,
            )
        };
        let regarding = object_reference(snapshot.ds, &s.resource);
        if decisions::recording() {
            let map = node_map(snapshot.placement, snapshot.nodes, &snapshot.node_to_pods);
            decisions::observe("nodes", map.len());
            decisions::observe(
                "nodes that should run a pod",
                map.iter().filter(|n| n.should_run).count(),
            );
            decisions::nodes(map);
        }
        for event in plan.events {
            decisions::reason(format_args!("{}: {}", event.reason, event.message));
            // The pod as the related object tells readers which pod (upstream names it only in the
            // message); correlation ignores it, as upstream's.
            let related = Some(ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                namespace: Some(snapshot.owner.namespace.clone()),
                name: Some(event.pod),
                ..Default::default()
            });
            if event.event_type == "Warning" {
                s.recorder
                    .warning(&regarding, related, event.reason, "Delete", event.message);
            } else {
                s.recorder
                    .normal(&regarding, related, event.reason, "Delete", event.message);
            }
        }
        if let Some(delay) = plan.requeue_after {
            s.queue.add_after(snapshot.key.clone(), delay);
        }
        let acted = !plan.nodes_needing_pods.is_empty() || !plan.pods_to_delete.is_empty();
        if acted {
            describe_pod_changes(&plan.nodes_needing_pods, &plan.pods_to_delete);
        }
        self.sync_nodes(snapshot, &plan.pods_to_delete, &plan.nodes_needing_pods)
            .await?;
        Ok(acted)
    }

    /// The DaemonSet's pods after adoption and release: its own plus the namespace's orphans, from the pod
    /// index, claimed by the selector. Terminal pods are claimed too (manage deletes them).
    async fn claim_pods(
        &self,
        ds: &DaemonSetObject,
        owner: &OwnerInfo,
        selector: &Selector,
        ds_api: &Api<DaemonSetObject>,
    ) -> Result<Vec<Arc<CachedPod>>, SyncError> {
        let s = &self.inner;
        let candidates = pods_for_owner(&s.pods, &owner.namespace, &owner.uid);
        let pods_api: Api<CachedPod> = Api::namespaced(s.client.clone(), &owner.namespace);
        let matches = |pod: &CachedPod| selector.matches_meta(&pod.metadata);
        let claimed = claim(&pods_api, owner, candidates, matches, || {
            s.daemon_sets.recheck(ds_api, ds)
        })
        .await
        .map_err(|source| SyncError::Claim {
            what: "pods",
            source,
        })?;
        Ok(claimed.claimed)
    }
}

/// RollingUpdate is the API default; only an explicit `OnDelete` (or an unknown type) leaves pods alone.
fn is_rolling_update(ds: &DaemonSetObject) -> bool {
    ds.spec
        .update_strategy
        .as_ref()
        .and_then(|s| s.type_.as_deref())
        .is_none_or(|t| t == "RollingUpdate")
}

/// The plan lines of a manage pass or rolling-update step.
fn describe_pod_changes(create_on: &[String], delete: &[String]) {
    const SHOWN: usize = 10;
    let list = |names: &[String]| {
        let mut shown = names[..names.len().min(SHOWN)].join(", ");
        if names.len() > SHOWN {
            shown.push_str(&format!(" and {} more", names.len() - SHOWN));
        }
        shown
    };
    if !create_on.is_empty() {
        decisions::plan(format_args!(
            "creating daemon pods on {} node(s) that should run one and have none: {}",
            create_on.len(),
            list(create_on)
        ));
    }
    if !delete.is_empty() {
        decisions::plan(format_args!(
            "deleting {} daemon pod(s): {}",
            delete.len(),
            list(delete)
        ));
    }
}
