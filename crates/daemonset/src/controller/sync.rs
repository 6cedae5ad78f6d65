//! One sync of one DaemonSet (upstream's `syncDaemonSet`), in upstream's order. The runtime's core has
//! already skipped a key whose caches lag behind our own writes and forgotten a DaemonSet that is gone.
//!
//! 1. an empty selector: refuse (`SelectingAll`); being deleted: stop (no status: its pods and revisions
//!    may be going away under us);
//! 2. read the snapshot: every node, the DaemonSet's pods (its own plus the namespace's orphans, from the pod
//!    index) claimed by the selector, and its placement rules parsed once;
//! 3. construct the history: claim the revisions, find or create the current one (its hash labels new pods);
//! 4. if the expectations are satisfied: manage (create missing pods, delete failed, surplus and misplaced
//!    ones), then, if manage had nothing to do and the strategy is RollingUpdate, one rolling-update step;
//!    then clean up old revisions;
//! 5. write the status (`observedGeneration` only if step 4 ran); ask to sync again when pods become
//!    available or a failed pod's backoff ends.
//!
//! Cost: O(pods of the DaemonSet + orphans of its namespace + revisions of the DaemonSet + nodes), and the
//! nodes are only read, never copied: there is no node-to-pod table to maintain between syncs, the mapping
//! is rebuilt from the snapshot each time.

use std::sync::Arc;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::jiff::Timestamp;
use mini_kcm_runtime::api::kinds::pods_for_owner;
use mini_kcm_runtime::api::selector::Selector;
use mini_kcm_runtime::api::tracked_api::TrackedApi;
use mini_kcm_runtime::controller::expectations::waiting_reason;
use mini_kcm_runtime::controller::ownership::{OwnerInfo, claim};
use mini_kcm_runtime::controller::{ObjectKey, Requeue};
use mini_kcm_runtime::observability::decisions;
use mini_kcm_runtime::observability::events::object_reference;
use mini_kcm_runtime::pods::cached::CachedPod;

use super::DaemonSetController;
use super::error::SyncError;
use super::revision_writes::History;
use super::snapshot::Snapshot;
use crate::manage::{ManageContext, group_pods_by_node, node_map, plan_manage};
use crate::update::{plan_rolling_update, without_unmaintained_template_generation};
use crate::{DaemonSetObject, REVISION_HASH_LABEL, SELECTING_ALL_REASON};

impl DaemonSetController {
    /// One sync of one DaemonSet, in upstream's order (docs/daemonset.md, "One sync").
    ///
    /// upstream: syncDaemonSet
    pub(crate) async fn sync_daemon_set(
        &self,
        key: &ObjectKey,
        ds: Arc<DaemonSetObject>,
    ) -> Result<Requeue, SyncError> {
        let started = std::time::Instant::now();
        let ds = without_unmaintained_template_generation(ds, self.core.options.family);
        let selector = match Selector::from_label_selector(&ds.spec.selector) {
            Ok(selector) if !selector.is_empty() => selector,
            Ok(_) => {
                self.core.recorder.warning(
                    &object_reference(ds.as_ref(), &self.core.resource),
                    None,
                    SELECTING_ALL_REASON,
                    "Select",
                    "This daemon set is selecting all pods. A non-empty selector is required."
                        .into(),
                );
                return Ok(Requeue::Never);
            }
            Err(e) => {
                // The API server validates selectors; a bad one here would fail every sync alike.
                tracing::error!(error = %e, "invalid selector; not syncing");
                return Ok(Requeue::Never);
            }
        };
        if ds.metadata.deletion_timestamp.is_some() {
            tracing::debug!("DaemonSet is being deleted; nothing to do");
            return Ok(Requeue::Never);
        }

        // In name order, whatever order the cache lists them in: the pods a sync creates, and which
        // nodes a rolling update picks first, are then the same for the same state (upstream's are
        // in Go map order).
        let mut nodes = self.nodes.list();
        nodes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let placement = self.placements.get(&ds);
        let owner = OwnerInfo::of(ds.as_ref(), &self.core.resource);
        let ds_api = self.core.own_api(key);
        let mut pods = self
            .claim_pods(key, &ds, &owner, &selector, &ds_api)
            .await?;
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
        let needs_sync = self.expectations.satisfied_expectations(key);
        let update_result = if needs_sync {
            self.update_daemon_set(&snapshot, &old, &pods).await
        } else {
            decisions::skip(waiting_reason(self.expectations.get(key)));
            Ok(Requeue::Never)
        };
        let status_result = self.update_status(&snapshot, &ds_api, needs_sync).await;
        tracing::debug!(elapsed = ?started.elapsed(), "synced");
        match (update_result, status_result) {
            (Err(e), Err(status_error)) => {
                tracing::warn!(error = %status_error, "updating the status failed too");
                Err(e)
            }
            (Err(e), Ok(_)) | (Ok(_), Err(e)) => Err(e),
            (Ok(manage), Ok(status)) => Ok(manage.or_earlier(status)),
        }
    }

    /// Upstream's `updateDaemonSet`: manage, one rolling-update step, history cleanup. Returns when to
    /// look again for a failed pod's backoff.
    async fn update_daemon_set(
        &self,
        snapshot: &Snapshot<'_>,
        old_revisions: &[Arc<k8s_openapi::api::apps::v1::ControllerRevision>],
        pods: &[Arc<CachedPod>],
    ) -> Result<Requeue, SyncError> {
        let (manage_acted, requeue) = self.manage(snapshot).await?;
        // The rolling update plans on the same snapshot, so only when manage changed nothing in it (upstream
        // re-reads the cache, which is the same thing once the expectations are satisfied). A manage that
        // acted brings events, and with them the next sync.
        if !manage_acted
            && self.expectations.satisfied_expectations(snapshot.key)
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
        self.cleanup_history(snapshot, old_revisions, pods).await?;
        Ok(requeue)
    }

    /// Upstream's `manage`: the per-node plan executed by `sync_nodes`, with the failed-pod events. Returns
    /// whether any pod was to be created or deleted, and when a failed pod's backoff ends.
    ///
    /// upstream: manage
    async fn manage(&self, snapshot: &Snapshot<'_>) -> Result<(bool, Requeue), SyncError> {
        let plan = {
            let ctx = ManageContext::new(
                snapshot.ds,
                snapshot.hash,
                Timestamp::now(),
                tokio::time::Instant::now(),
            );
            let mut backoff = self.backoff();
            plan_manage(
                &ctx,
                snapshot.placement,
                snapshot.nodes,
                &snapshot.node_to_pods,
                &mut backoff,
            )
        };
        let regarding = object_reference(snapshot.ds, &self.core.resource);
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
            self.core.recorder.record(
                event.event_type,
                &regarding,
                related,
                event.reason,
                "Delete",
                event.message,
            );
        }
        let acted = !plan.nodes_needing_pods.is_empty() || !plan.pods_to_delete.is_empty();
        if acted {
            describe_pod_changes(&plan.nodes_needing_pods, &plan.pods_to_delete);
        }
        self.sync_nodes(snapshot, &plan.pods_to_delete, &plan.nodes_needing_pods)
            .await?;
        Ok((
            acted,
            Requeue::after(plan.requeue_after, "a failed pod's backoff ends"),
        ))
    }

    /// The DaemonSet's pods after adoption and release: its own plus the namespace's orphans, from the pod
    /// index, claimed by the selector. Terminal pods are claimed too (manage deletes them).
    async fn claim_pods(
        &self,
        key: &ObjectKey,
        ds: &DaemonSetObject,
        owner: &OwnerInfo,
        selector: &Selector,
        ds_api: &TrackedApi<DaemonSetObject>,
    ) -> Result<Vec<Arc<CachedPod>>, SyncError> {
        let candidates = pods_for_owner(&self.pods, &owner.namespace, &owner.uid);
        let pods_api = self.core.api::<CachedPod>(key, "pod");
        let matches = |pod: &CachedPod| selector.matches_meta(&pod.metadata);
        let claimed = claim(&pods_api, owner, candidates, matches, || {
            self.core.objects.recheck(ds_api, ds)
        })
        .await
        .map_err(SyncError::ClaimPods)?;
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
