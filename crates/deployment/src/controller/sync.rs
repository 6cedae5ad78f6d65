//! One sync of one Deployment (upstream's `syncDeployment`), in upstream's order. The runtime's core has
//! already skipped a key whose caches lag behind our own writes and forgotten a Deployment that is gone.
//!
//! 1. an empty selector selects every pod: refuse (`SelectingAll`);
//! 2. claim ReplicaSets (adopt orphans that match, release ours that stopped matching);
//! 3. being deleted: only the status;
//! 4. record pause / resume in the Progressing condition;
//! 5. paused: scale and clean up only (never a new ReplicaSet);
//! 6. a rollback was asked for (`deprecated.deployment.rollback.to`): roll back;
//! 7. `spec.replicas` changed: scale (proportionally during a rollout);
//! 8. otherwise roll out: Recreate or RollingUpdate.

use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;
use mini_kcm_runtime::api::kinds::{
    CONTROLLER_UID_INDEX, DeploymentObject, POD_CONTROLLER_INDEX, ReplicaSetObject,
    orphan_index_value,
};
use mini_kcm_runtime::api::selector::Selector;
use mini_kcm_runtime::api::tracked_api::TrackedApi;
use mini_kcm_runtime::controller::ownership::{OwnerInfo, claim};
use mini_kcm_runtime::controller::{ObjectKey, Requeue};
use mini_kcm_runtime::observability::decisions;
use mini_kcm_runtime::observability::events::object_reference;
use mini_kcm_runtime::pods::cached::CachedPod;

use super::DeploymentController;
use super::error::SyncError;
use super::rollout::Rollout;
use crate::accessors::{RECREATE_STRATEGY, ROLLING_UPDATE_STRATEGY, strategy_type};
use crate::annotations::rollback_to;
use crate::conditions::{event_reasons, messages};
use crate::hash::selects_on_pod_template_hash;
use crate::proportional::is_scaling_event;
use crate::status::{check_paused_conditions, refused_for_pod_template_hash};

impl DeploymentController {
    /// One sync of one Deployment; the steps are in the module header.
    ///
    /// upstream: syncDeployment
    pub(crate) async fn sync_deployment(
        &self,
        key: &ObjectKey,
        cached: Arc<DeploymentObject>,
    ) -> Result<Requeue, SyncError> {
        let d: DeploymentObject = (*cached).clone();
        let d_api = self.core.own_api(key);
        let rs_api = self
            .core
            .api_with::<ReplicaSetObject>(key, &self.rs_resource, "ReplicaSet");
        let regarding = object_reference(&d, &self.core.resource);

        let selector = match Selector::from_label_selector(&d.spec.selector) {
            Ok(selector) if !selector.is_empty() => selector,
            Ok(_) => {
                decisions::skip("refused: an empty selector selects every pod");
                self.core.recorder.warning(
                    &regarding,
                    None,
                    "SelectingAll",
                    "Select",
                    "This deployment is selecting all pods. A non-empty selector is required."
                        .into(),
                );
                let mut rollout = Rollout::new(self, key, d, Vec::new(), d_api, rs_api);
                return rollout
                    .observe_generation_only()
                    .await
                    .map(|()| Requeue::Never);
            }
            Err(e) => {
                tracing::error!(error = %e, "invalid selector; not syncing");
                return Ok(Requeue::Never);
            }
        };

        if selects_on_pod_template_hash(&d.spec.selector) {
            // A deliberate difference: upstream creates ReplicaSets without bound here.
            tracing::warn!("the selector uses pod-template-hash; not rolling out");
            decisions::skip(
                "refused: the selector uses pod-template-hash, which would select nothing the controller creates",
            );
            self.core.recorder.warning(
                &regarding,
                None,
                event_reasons::SELECTOR_USES_POD_TEMPLATE_HASH,
                "Select",
                messages::SELECTOR_USES_POD_TEMPLATE_HASH.into(),
            );
            let refused = refused_for_pod_template_hash(&d, Timestamp::now());
            let mut rollout = Rollout::new(self, key, d, Vec::new(), d_api, rs_api);
            return rollout
                .write_deployment(refused)
                .await
                .map(|()| Requeue::Never);
        }

        let rss = self
            .claim_replica_sets(&d, &d_api, &rs_api, &selector)
            .await?;
        let mut rollout = Rollout::new(self, key, d, rss, d_api, rs_api);

        if rollout.d.metadata.deletion_timestamp.is_some() {
            decisions::skip("being deleted: status only");
            return rollout.sync_status_only().await.map(|()| Requeue::Never);
        }

        let mut paused_check = rollout.d.clone();
        if check_paused_conditions(&mut paused_check, Timestamp::now()) {
            rollout.write_deployment(paused_check).await?;
        }

        if rollout.d.spec.paused == Some(true) {
            decisions::reason("paused: scaling and cleanup only, no rollout");
            return rollout
                .sync_scale_and_status()
                .await
                .map(|()| Requeue::Never);
        }
        if rollback_to(&rollout.d).is_some() {
            return rollout.rollback().await.map(|()| Requeue::Never);
        }
        let (new_rs, old_rss) = rollout.new_and_old(false).await?;
        let old_refs: Vec<&ReplicaSetObject> = old_rss.iter().collect();
        if is_scaling_event(&rollout.d, new_rs.as_ref(), &old_refs) {
            decisions::reason(format_args!(
                "scaling event: spec.replicas is now {} while the ReplicaSets' desired-replicas annotation differs",
                crate::accessors::deployment_replicas(&rollout.d)
            ));
            return rollout
                .sync_scale_and_status()
                .await
                .map(|()| Requeue::Never);
        }
        match strategy_type(&rollout.d) {
            RECREATE_STRATEGY => {
                let pods = self.pods_by_replica_set(&rollout.rss);
                rollout.rollout_recreate(&pods).await
            }
            ROLLING_UPDATE_STRATEGY => rollout.rollout_rolling().await,
            other => Err(SyncError::UnexpectedStrategy(other.to_string())),
        }
    }

    /// The Deployment's ReplicaSets after adoption and release: its own plus the namespace's orphans,
    /// from the index, claimed by the selector.
    ///
    /// upstream: getReplicaSetsForDeployment
    async fn claim_replica_sets(
        &self,
        d: &DeploymentObject,
        d_api: &TrackedApi<DeploymentObject>,
        rs_api: &TrackedApi<ReplicaSetObject>,
        selector: &Selector,
    ) -> Result<Vec<ReplicaSetObject>, SyncError> {
        let namespace = d.metadata.namespace.as_deref().unwrap_or_default();
        let uid = d.metadata.uid.clone().unwrap_or_default();
        let mut candidates = self.replica_sets.by_index(CONTROLLER_UID_INDEX, &uid);
        candidates.extend(
            self.replica_sets
                .by_index(CONTROLLER_UID_INDEX, &orphan_index_value(namespace)),
        );
        let owner = OwnerInfo::of(d, &self.core.resource);
        let recheck = || self.core.objects.recheck(d_api, d);
        let matches = |rs: &ReplicaSetObject| selector.matches_meta(&rs.metadata);
        let claimed = claim(rs_api, &owner, candidates, matches, recheck).await?;
        Ok(claimed
            .claimed
            .into_iter()
            .map(Arc::unwrap_or_clone)
            .collect())
    }

    /// Pods of the Deployment's ReplicaSets, with their ReplicaSet's UID (for Recreate).
    ///
    /// upstream: getPodMapForDeployment
    fn pods_by_replica_set(&self, rss: &[ReplicaSetObject]) -> Vec<(String, Arc<CachedPod>)> {
        rss.iter()
            .filter_map(|rs| rs.metadata.uid.clone())
            .flat_map(|uid| {
                self.pods
                    .by_index(POD_CONTROLLER_INDEX, &uid)
                    .into_iter()
                    .map(move |pod| (uid.clone(), pod))
            })
            .collect()
    }
}
