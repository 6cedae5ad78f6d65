//! One sync of one ReplicaSet (upstream's `syncReplicaSet`). The runtime's core has already skipped a
//! key whose caches lag behind our own writes and forgotten a ReplicaSet that is gone; then:
//!
//! 1. read the ReplicaSet's candidate pods (owned + namespace orphans, from the pod index);
//! 2. claim: keep / adopt / release pods by the selector;
//! 3. if the expectations are satisfied and the ReplicaSet is not being deleted: plan and execute
//!    creations or deletions;
//! 4. compute and write the status (unless an event during the sync already queued the next one, see
//!    `mini_kcm_runtime::api::status_writes`); ask to sync again when Ready pods become available.

use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::jiff::Timestamp;
use mini_kcm_runtime::api::api_errors::{error_message, is_not_found};
use mini_kcm_runtime::api::kinds::{
    CONTROLLER_UID_INDEX, POD_CONTROLLER_INDEX, ReplicaSetObject, controller_uid, pods_for_owner,
};
use mini_kcm_runtime::api::selector::Selector;
use mini_kcm_runtime::controller::expectations::waiting_reason;
use mini_kcm_runtime::controller::ownership::{OwnerInfo, claim};
use mini_kcm_runtime::controller::{ObjectKey, Requeue, wake};
use mini_kcm_runtime::observability::decisions;
use mini_kcm_runtime::observability::events::object_reference;
use mini_kcm_runtime::pods::cached::CachedPod;
use mini_kcm_runtime::pods::ranking::{
    is_pod_active, is_pod_terminating, next_availability_check_since_evaluation,
};
use mini_kcm_runtime::pods::slow_start::{describe_batches, slow_start_batch};
use mini_kcm_runtime::switches::features::Feature;

use super::ReplicaSetController;
use super::error::SyncError;
use super::status_write::update_status;
use crate::BURST_REPLICAS;
use crate::plan::{ReplicaPlan, deletion_age_ratios, plan_replicas};
use crate::status::{ManageFailure, calculate_status};

impl ReplicaSetController {
    /// One sync of one ReplicaSet; the steps are in the module header.
    ///
    /// upstream: syncReplicaSet
    pub(crate) async fn sync_replica_set(
        &self,
        key: &ObjectKey,
        rs: Arc<ReplicaSetObject>,
    ) -> Result<Requeue, SyncError> {
        let started = std::time::Instant::now();
        let namespace = key.namespace();
        let needs_sync = self.expectations.satisfied_expectations(key);
        let selector = match Selector::from_label_selector(&rs.spec.selector) {
            Ok(selector) => selector,
            Err(e) => {
                // The API server validates selectors; a bad one here would fail every sync alike.
                tracing::error!(error = %e, "invalid selector; not syncing");
                return Ok(Requeue::Never);
            }
        };

        // Snapshot: this ReplicaSet's pods and the namespace's orphans.
        let uid = rs.metadata.uid.clone().unwrap_or_default();
        let candidates = pods_for_owner(&self.pods, namespace, &uid);
        let labels_match = |pod: &CachedPod| selector.matches_meta(&pod.metadata);
        // Counted only with the DeploymentReplicaSetTerminatingReplicas gate on, as upstream.
        let features = &self.core.options.features;
        let terminating = features
            .enabled(Feature::DeploymentReplicaSetTerminatingReplicas)
            .then(|| {
                candidates
                    .iter()
                    .filter(|p| is_pod_terminating(p))
                    .filter(|p| {
                        controller_uid(&p.metadata) == Some(uid.as_str()) && labels_match(p)
                    })
                    .count()
            });
        let active: Vec<Arc<CachedPod>> = candidates
            .into_iter()
            .filter(|p| is_pod_active(p))
            .collect();
        let owner = OwnerInfo::of(rs.as_ref(), &self.core.resource);
        let pods_api = self.core.api::<CachedPod>(key, "pod");
        let sets_api = self.core.own_api(key);
        let recheck_owner = || self.core.objects.recheck(&sets_api, &rs);
        let claimed = claim(&pods_api, &owner, active, labels_match, recheck_owner)
            .await?
            .claimed;

        let desired = usize::try_from(rs.spec.replicas.unwrap_or(1)).unwrap_or(0);
        decisions::observe("desired", desired);
        decisions::observe("active", claimed.len());
        if let Some(terminating) = terminating {
            decisions::observe("terminating", terminating);
        }
        let mut failure = None;
        if !needs_sync {
            decisions::skip(waiting_reason(self.expectations.get(key)));
        } else if owner.deleting {
            decisions::skip("the ReplicaSet is being deleted (no creations, no deletions)");
        } else {
            let plan = plan_replicas(
                desired,
                &claimed,
                || self.related_pods(&rs),
                BURST_REPLICAS,
                Timestamp::now(),
                features.enabled(Feature::PodDeletionCost),
            );
            // Upstream observes it only when the pods were ranked (not all of them go).
            if let (ReplicaPlan::Delete { pods, .. }, Some(histogram)) =
                (&plan, &self.core.metrics.sorting_deletion_age_ratio)
                && pods.len() < claimed.len()
            {
                for ratio in deletion_age_ratios(&claimed, pods, Timestamp::now()) {
                    histogram.observe(ratio);
                }
            }
            failure = self.execute(key, &rs, &owner, plan).await;
        }

        let now = Timestamp::now();
        let status = calculate_status(
            &rs,
            self.core.options.family,
            &claimed,
            terminating,
            failure.as_ref(),
            now,
        );
        let stored = update_status(&sets_api, &rs, status, || {
            self.core.status_writes.defer(key)
        })
        .await
        .map_err(SyncError::Status)?;
        tracing::debug!(elapsed = ?started.elapsed(), "synced");
        if let Some(failure) = failure {
            return Err(failure.into());
        }

        // Pods that are Ready but not yet available become so at a known moment: sync again then.
        let min_ready = stored.spec.min_ready_seconds.unwrap_or(0);
        let stored_status = stored.status.unwrap_or_default();
        if min_ready > 0 && stored_status.ready_replicas != stored_status.available_replicas {
            let fallback = Duration::from_secs(u64::try_from(min_ready).unwrap_or(0));
            let delay = next_availability_check_since_evaluation(
                claimed.iter().map(AsRef::as_ref),
                min_ready,
                now,
                Timestamp::now(),
            )
            .unwrap_or(fallback);
            return Ok(Requeue::After(delay, wake::POD_BECOMES_AVAILABLE));
        }
        Ok(Requeue::Never)
    }

    /// Active pods of every ReplicaSet sharing this one's controller (a Deployment's ReplicaSets), for
    /// ranking deletions by crowding on nodes. Empty when the ReplicaSet has no controller.
    fn related_pods(&self, rs: &ReplicaSetObject) -> Vec<Arc<CachedPod>> {
        let Some(controller) = controller_uid(&rs.metadata) else {
            return Vec::new();
        };
        // A pod has at most one controller, so the siblings' pod lists do not overlap.
        let mut related = Vec::new();
        for sibling in self.core.objects.by_index(CONTROLLER_UID_INDEX, controller) {
            if let Some(sibling_uid) = sibling.metadata.uid.as_deref() {
                related.extend(self.pods.by_index(POD_CONTROLLER_INDEX, sibling_uid));
            }
        }
        related
    }

    /// Carries out a plan; returns the failure for the `ReplicaFailure` condition, if any.
    ///
    /// upstream: manageReplicas (its writes)
    async fn execute(
        &self,
        key: &ObjectKey,
        rs: &ReplicaSetObject,
        owner: &OwnerInfo,
        plan: ReplicaPlan,
    ) -> Option<ManageFailure> {
        let regarding = object_reference(rs, &self.core.resource);
        match plan {
            ReplicaPlan::Steady => None,
            ReplicaPlan::Create {
                count,
                active,
                desired,
            } => {
                decisions::reason(format_args!(
                    "too few replicas: {active} active of {desired} desired"
                ));
                let first_batch = self.core.initial_batch_size();
                decisions::plan(format_args!(
                    "creating {count} pod(s) {}",
                    describe_batches(count, first_batch)
                ));
                self.expectations.expect_creations(key, count);
                let template = rs.spec.template.clone().unwrap_or_default();
                let (created, error) = slow_start_batch(count, first_batch, |_| {
                    self.pod_control.create(key, &template, owner, &regarding)
                })
                .await;
                // Creations never attempted (or failed) will not be observed: stop waiting for them.
                for _ in created..count {
                    self.expectations.creation_observed(key);
                }
                error.map(|e| {
                    tracing::warn!(created, wanted = count, error = %e, "creating pods failed");
                    ManageFailure {
                        reason: "FailedCreate",
                        message: e.message(),
                    }
                })
            }
            ReplicaPlan::Delete {
                pods,
                active,
                desired,
            } => {
                decisions::reason(format_args!(
                    "too many replicas: {active} active of {desired} desired"
                ));
                let pod_keys = pods
                    .iter()
                    .map(|(p, _)| ObjectKey::of(&p.metadata))
                    .collect();
                // Expect the deletions before issuing them, so their events are counted exactly once.
                self.expectations.expect_deletions(key, pod_keys);
                let regarding = &regarding;
                let deletions = pods.iter().map(|(pod, why)| async move {
                    let pod_name = pod.metadata.name.as_deref().unwrap_or_default();
                    decisions::plan(format_args!(
                        "deleting {pod_name}: ranked first because {why}"
                    ));
                    self.delete_one(key, pod, regarding).await
                });
                let first_error = join_all(deletions).await.into_iter().find_map(Result::err);
                first_error.map(|e| ManageFailure {
                    reason: "FailedDelete",
                    message: error_message(&e),
                })
            }
        }
    }

    async fn delete_one(
        &self,
        key: &ObjectKey,
        pod: &CachedPod,
        regarding: &ObjectReference,
    ) -> Result<(), kube::Error> {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        match self
            .pod_control
            .delete(key, namespace, name, regarding)
            .await
        {
            Ok(()) => Ok(()),
            Err(e) => {
                // The informer will not observe this deletion: stop waiting for it.
                self.expectations
                    .deletion_observed(key, &ObjectKey::of(&pod.metadata));
                if is_not_found(&e) { Ok(()) } else { Err(e) }
            }
        }
    }
}
