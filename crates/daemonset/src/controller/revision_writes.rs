//! The ControllerRevision writes of a sync (upstream's `constructHistory`, `snapshot`, `dedupCurHistories`
//! and `cleanupHistory`); the decisions are in [`crate::history`].
//!
//! Revisions are always `apps/v1` objects, also for the `minikcm.dev` DaemonSets: their controller owner
//! reference names the DaemonSet of whichever family, which is what claiming and the handlers go by.
//!
//! The current revision's data must be byte-identical to what upstream would write, because "current" is
//! decided by comparing bytes. So it is created from a raw JSON body ([`revision_create_body`]) rather than
//! from a serialized object, and later changes to a revision (the hash label, the revision number) are
//! merge patches that leave `data` untouched.

use std::collections::HashSet;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::ControllerRevision;
use kube::api::Patch;
use mini_kcm_runtime::api::api_errors::{is_already_exists, is_not_found};
use mini_kcm_runtime::api::kinds::{CONTROLLER_UID_INDEX, orphan_index_value};
use mini_kcm_runtime::api::selector::Selector;
use mini_kcm_runtime::api::tracked_api::TrackedApi;
use mini_kcm_runtime::controller::ObjectKey;
use mini_kcm_runtime::controller::ownership::{OwnerInfo, claim};
use mini_kcm_runtime::pods::cached::CachedPod;
use serde_json::json;

use super::DaemonSetController;
use super::error::{HistoryFailure, SyncError};
use super::snapshot::Snapshot;
use crate::history::{
    build_revision, dedup_histories, live_hashes, max_revision, relabel_pod_patch,
    revision_create_body, revision_data, revision_history_limit, revision_matches, revision_number,
    revisions_to_clean_up,
};
use crate::manage::group_pods_by_node;
use crate::{DaemonSetObject, REVISION_HASH_LABEL};

/// The DaemonSet's revisions once the current one exists.
pub(crate) struct History {
    pub(crate) current: Arc<ControllerRevision>,
    pub(crate) old: Vec<Arc<ControllerRevision>>,
}

impl DaemonSetController {
    /// Claims the DaemonSet's revisions, labels unlabelled ones, and finds (deduplicating and renumbering)
    /// or creates the current one. Pods relabelled by the deduplication are replaced in `pods` by their
    /// new versions.
    pub(crate) async fn construct_history(
        &self,
        key: &ObjectKey,
        ds: &DaemonSetObject,
        owner: &OwnerInfo,
        selector: &Selector,
        ds_api: &TrackedApi<DaemonSetObject>,
        pods: &mut [Arc<CachedPod>],
    ) -> Result<History, SyncError> {
        let api = self
            .core
            .api::<ControllerRevision>(key, "ControllerRevision");
        let mut candidates = self.revisions.by_index(CONTROLLER_UID_INDEX, &owner.uid);
        candidates.extend(
            self.revisions
                .by_index(CONTROLLER_UID_INDEX, &orphan_index_value(&owner.namespace)),
        );
        let matches = |revision: &ControllerRevision| selector.matches_meta(&revision.metadata);
        let claimed = claim(&api, owner, candidates, matches, || {
            self.core.objects.recheck(ds_api, ds)
        })
        .await
        .map_err(HistoryFailure::from)?
        .claimed;

        let mut revisions = Vec::with_capacity(claimed.len());
        for revision in claimed {
            revisions.push(self.ensure_hash_label(&api, revision).await?);
        }
        let data = revision_data(ds).map_err(HistoryFailure::from)?;
        let (current, old): (Vec<_>, Vec<_>) = revisions
            .into_iter()
            .partition(|revision| revision_matches(&data, revision));
        // Revisions are user-writable; Go's int64 sum wraps at the top, saturate instead.
        let next_revision = max_revision(old.iter().map(AsRef::as_ref)).saturating_add(1);

        let current = match current.as_slice() {
            [] => Arc::new(
                self.snapshot(&api, ds, &data, next_revision, owner, ds_api)
                    .await?,
            ),
            [only] => only.clone(),
            several => self.dedup(key, &api, several, pods).await?,
        };
        let current = if revision_number(&current) < next_revision {
            // The template went back to an old revision's (a rollback): that revision becomes the newest.
            let name = current.metadata.name.clone().unwrap_or_default();
            tracing::info!(
                revision = %name,
                from = revision_number(&current),
                to = next_revision,
                "the current template matches an older revision; renumbering it"
            );
            let patch = json!({
                "metadata": {"resourceVersion": current.metadata.resource_version},
                "revision": next_revision,
            });
            let renumbered = api
                .patch(&name, &Patch::Merge(&patch))
                .await
                .map_err(|source| HistoryFailure::RenumberRevision {
                    name: name.clone(),
                    source,
                })?;
            Arc::new(renumbered)
        } else {
            current
        };
        Ok(History { current, old })
    }

    /// Revisions without the hash label get their name as the label (upstream does so rather than
    /// recompute a hash, so hash collisions cannot matter for them).
    async fn ensure_hash_label(
        &self,
        api: &TrackedApi<ControllerRevision>,
        revision: Arc<ControllerRevision>,
    ) -> Result<Arc<ControllerRevision>, SyncError> {
        let labelled = revision
            .metadata
            .labels
            .as_ref()
            .is_some_and(|l| l.contains_key(REVISION_HASH_LABEL));
        if labelled {
            return Ok(revision);
        }
        let name = revision.metadata.name.clone().unwrap_or_default();
        let patch = json!({
            "metadata": {
                "resourceVersion": revision.metadata.resource_version,
                "labels": {REVISION_HASH_LABEL: name},
            }
        });
        let stored = api
            .patch(&name, &Patch::Merge(&patch))
            .await
            .map_err(|source| HistoryFailure::LabelRevision {
                name: name.clone(),
                source,
            })?;
        Ok(Arc::new(stored))
    }

    /// Upstream's `snapshot`: creates the revision of the current template. On a name clash with a revision
    /// of another template, bumps the DaemonSet's `status.collisionCount` (the next sync then picks another
    /// name) and fails this sync.
    async fn snapshot(
        &self,
        api: &TrackedApi<ControllerRevision>,
        ds: &DaemonSetObject,
        data: &[u8],
        revision_number: i64,
        owner: &OwnerInfo,
        ds_api: &TrackedApi<DaemonSetObject>,
    ) -> Result<ControllerRevision, SyncError> {
        let revision = build_revision(ds, data, revision_number, owner.controller_reference())
            .map_err(HistoryFailure::from)?;
        let name = revision.metadata.name.clone().unwrap_or_default();
        let body = revision_create_body(&revision, data).map_err(HistoryFailure::from)?;
        match api.create_raw(body).await {
            Ok(created) => {
                tracing::info!(revision = %name, number = revision_number, "created ControllerRevision");
                Ok(created)
            }
            Err(e) if is_already_exists(&e) => {
                let existing =
                    api.get(&name)
                        .await
                        .map_err(|source| HistoryFailure::ReadRevision {
                            name: name.clone(),
                            source,
                        })?;
                if revision_matches(data, &existing) {
                    // Ours from an earlier sync whose result the cache had not shown yet.
                    return Ok(existing);
                }
                self.bump_collision_count(ds, ds_api, &name).await
            }
            Err(source) => Err(HistoryFailure::CreateRevision {
                name: name.clone(),
                source,
            }
            .into()),
        }
    }

    async fn bump_collision_count(
        &self,
        ds: &DaemonSetObject,
        ds_api: &TrackedApi<DaemonSetObject>,
        revision_name: &str,
    ) -> Result<ControllerRevision, SyncError> {
        let ds_name = ds.metadata.name.as_deref().unwrap_or_default();
        let mut fresh =
            ds_api
                .get(ds_name)
                .await
                .map_err(|source| HistoryFailure::ReadDaemonSet {
                    name: ds_name.to_string(),
                    source,
                })?;
        let cached = ds.status.as_ref().and_then(|s| s.collision_count);
        let status = fresh.status.get_or_insert_with(Default::default);
        if status.collision_count != cached {
            // Another sync already bumped it; ours used a stale count. Retry with the fresh one.
            return Err(HistoryFailure::StaleCollisionCount {
                cached,
                fresh: status.collision_count,
            }
            .into());
        }
        let count = cached.unwrap_or(0).saturating_add(1);
        status.collision_count = Some(count);
        ds_api
            .replace_status(ds_name, &fresh)
            .await
            .map_err(|source| HistoryFailure::BumpCollisionCount {
                name: ds_name.to_string(),
                source,
            })?;
        tracing::info!(
            revision = revision_name,
            count,
            "hash collision: bumped the DaemonSet's collisionCount"
        );
        Err(HistoryFailure::HashCollision {
            name: revision_name.to_string(),
            count,
        }
        .into())
    }

    /// Upstream's `dedupCurHistories` for two or more revisions of the current template: keep the newest,
    /// relabel every pod to its hash, delete the others.
    ///
    /// The relabelled pods replace their old versions in `pods`, so the rest of the sync sees them with the
    /// kept hash. (Upstream re-reads a cache that may not show the relabelling yet, and a rolling update
    /// in that window takes the pods for old ones and replaces them.)
    async fn dedup(
        &self,
        key: &ObjectKey,
        api: &TrackedApi<ControllerRevision>,
        current: &[Arc<ControllerRevision>],
        pods: &mut [Arc<CachedPod>],
    ) -> Result<Arc<ControllerRevision>, SyncError> {
        let refs: Vec<&ControllerRevision> = current.iter().map(AsRef::as_ref).collect();
        let Some(plan) = dedup_histories(&refs) else {
            unreachable!("dedup is only called with two or more revisions")
        };
        let keep_hash = plan.keep_hash().to_string();
        let pods_api = self.core.api::<CachedPod>(key, "pod");
        let to_relabel: HashSet<String> = plan
            .pods_to_relabel(pods.iter().map(AsRef::as_ref))
            .into_iter()
            .collect();
        for pod in pods.iter_mut() {
            let Some(pod_name) = pod
                .metadata
                .name
                .as_ref()
                .filter(|n| to_relabel.contains(*n))
            else {
                continue;
            };
            let patched = pods_api
                .patch(pod_name, &Patch::Merge(&relabel_pod_patch(&keep_hash)))
                .await
                .map_err(|source| HistoryFailure::RelabelPod {
                    name: pod_name.clone(),
                    source,
                })?;
            *pod = Arc::new(patched);
        }
        for duplicate in &plan.delete {
            let name = duplicate.metadata.name.as_deref().unwrap_or_default();
            tracing::info!(revision = name, keep = %keep_hash, "deleting a duplicate ControllerRevision");
            match api.delete(name).await {
                Ok(_) => {}
                Err(e) if is_not_found(&e) => {}
                Err(source) => {
                    return Err(HistoryFailure::DeleteRevision {
                        name: name.to_string(),
                        source,
                    }
                    .into());
                }
            }
        }
        let keep_name = plan.keep.metadata.name.clone();
        Ok(current
            .iter()
            .find(|r| r.metadata.name == keep_name)
            .cloned()
            .unwrap_or_else(|| Arc::new(plan.keep.clone())))
    }

    /// Upstream's `cleanupHistory`: old revisions beyond `revisionHistoryLimit` go, oldest first, except
    /// those whose hash a pod still carries (deleted terminal pods included).
    pub(crate) async fn cleanup_history(
        &self,
        snapshot: &Snapshot<'_>,
        old: &[Arc<ControllerRevision>],
        pods: &[Arc<CachedPod>],
    ) -> Result<(), SyncError> {
        let limit = revision_history_limit(snapshot.ds);
        if old.len() <= usize::try_from(limit).unwrap_or(0) {
            return Ok(());
        }
        let with_deleted_terminal = group_pods_by_node(pods.iter().map(AsRef::as_ref), true);
        let live = live_hashes(with_deleted_terminal.values().flatten().copied());
        let old_refs: Vec<&ControllerRevision> = old.iter().map(AsRef::as_ref).collect();
        let api = self
            .core
            .api::<ControllerRevision>(snapshot.key, "ControllerRevision");
        for revision in revisions_to_clean_up(&old_refs, &live, limit) {
            let name = revision.metadata.name.as_deref().unwrap_or_default();
            tracing::info!(
                revision = name,
                number = revision_number(revision),
                limit,
                "deleting an old ControllerRevision"
            );
            match api.delete(name).await {
                Ok(_) => {}
                Err(e) if is_not_found(&e) => {}
                Err(e) => return Err(SyncError::Cleanup(e)),
            }
        }
        Ok(())
    }
}
