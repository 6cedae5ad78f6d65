//! The writing half of a Deployment sync: every step here executes a pure plan of this crate (new
//! ReplicaSet, scale steps, cleanup, status) and keeps the in-memory view (`d`, `rss`) current with what
//! the API server returned, as upstream passes updated objects along within one sync.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::DeploymentStatus;
use k8s_openapi::jiff::Timestamp;
use kube::api::Patch;
use mini_kcm_runtime::api::api_errors::{error_message, is_already_exists, is_not_found};
use mini_kcm_runtime::api::kinds::{
    ApiFamily, DeploymentObject, ReplicaSetObject, StatusWithSelector,
};
use mini_kcm_runtime::api::tracked_api::TrackedApi;
use mini_kcm_runtime::controller::ownership::OwnerInfo;
use mini_kcm_runtime::controller::{ObjectKey, Requeue};
use mini_kcm_runtime::observability::decisions;
use mini_kcm_runtime::observability::events::{EventType, object_reference};
use mini_kcm_runtime::pods::cached::CachedPod;
use serde_json::json;

use super::DeploymentController;
use super::error::SyncError;
use crate::accessors::{deployment_replicas, name};
use crate::annotations::{
    POD_TEMPLATE_HASH_LABEL, clear_rollback_to, last_revision, revision, rollback_to,
    set_deployment_annotations_to,
};
use crate::conditions::{PROGRESSING, get_deployment_condition, messages, reason, reasons};
use crate::history::replica_sets_to_clean_up;
use crate::new_replica_set::{
    ExistingNewReplicaSet, bump_collision_count, is_own_new_replica_set, new_replica_set,
    record_create_failure, record_new_replica_set, sync_existing_new_replica_set,
};
use crate::progress::deployment_complete;
use crate::proportional::plan_proportional_scale;
use crate::recreate::{old_pods_running, scale_down_old_replica_sets_for_recreate};
use crate::replica_sets::{
    equal_ignore_hash, find_new_replica_set, find_old_replica_sets,
    get_available_replica_count_for_replica_sets, get_replica_count_for_replica_sets,
};
use crate::rolling::{reconcile_new_replica_set, reconcile_old_replica_sets};
use crate::scale::{
    SCALING_REPLICA_SET_REASON, ScaleStep, scale_replica_set, scaling_event_message,
};
use crate::status::{
    calculate_status, requeue_after_for_progress, rollout_status, status_as_written,
    status_needs_write,
};
use crate::strategy::{max_surge, max_unavailable};

pub(crate) struct Rollout<'a> {
    c: &'a DeploymentController,
    /// The Deployment's key (whose writes the APIs record; a status write may be left to its next sync).
    key: &'a ObjectKey,
    /// The Deployment as last read or written.
    pub(crate) d: DeploymentObject,
    /// Its claimed ReplicaSets as last read or written.
    pub(crate) rss: Vec<ReplicaSetObject>,
    d_api: TrackedApi<DeploymentObject>,
    rs_api: TrackedApi<ReplicaSetObject>,
}

impl<'a> Rollout<'a> {
    pub(crate) fn new(
        c: &'a DeploymentController,
        key: &'a ObjectKey,
        d: DeploymentObject,
        rss: Vec<ReplicaSetObject>,
        d_api: TrackedApi<DeploymentObject>,
        rs_api: TrackedApi<ReplicaSetObject>,
    ) -> Self {
        Rollout {
            c,
            key,
            d,
            rss,
            d_api,
            rs_api,
        }
    }

    fn d_name(&self) -> String {
        name(&self.d.metadata).to_string()
    }

    fn event(&self, type_: EventType, reason: &str, note: String) {
        let regarding = object_reference(&self.d, &self.c.core.resource);
        self.c
            .core
            .recorder
            .record(type_, &regarding, None, reason, reason, note);
    }

    // ---- new and old ReplicaSets ----

    /// Upstream's `getAllReplicaSetsAndSyncRevision`: the new ReplicaSet (created when `create` and
    /// missing) and the old ones; the new one's revision and annotations brought up to date.
    pub(crate) async fn new_and_old(
        &mut self,
        create: bool,
    ) -> Result<(Option<ReplicaSetObject>, Vec<ReplicaSetObject>), SyncError> {
        let refs: Vec<&ReplicaSetObject> = self.rss.iter().collect();
        let (_, all_old) = find_old_replica_sets(&self.d, &refs);
        let old: Vec<ReplicaSetObject> = all_old.into_iter().cloned().collect();
        let existing = find_new_replica_set(&self.d, &refs).cloned();
        let new = match existing {
            Some(existing) => Some(self.sync_existing(existing, &old).await?),
            None if create => Some(self.create_new(&old).await?),
            None => None,
        };
        Ok((new, old))
    }

    async fn sync_existing(
        &mut self,
        existing: ReplicaSetObject,
        old: &[ReplicaSetObject],
    ) -> Result<ReplicaSetObject, SyncError> {
        let old_refs: Vec<&ReplicaSetObject> = old.iter().collect();
        match sync_existing_new_replica_set(&self.d, &existing, &old_refs, Timestamp::now()) {
            ExistingNewReplicaSet::UpdateReplicaSet(rs) => {
                let (from, to) = (revision(&existing.metadata), revision(&rs.metadata));
                if let (Ok(from), Ok(to)) = (from, to)
                    && from != to
                {
                    // A rollback (or a template changed back): no new ReplicaSet, the old one is
                    // found by its template and becomes the newest revision.
                    decisions::plan(format_args!(
                        "ReplicaSet {} has the current template: its revision {from} becomes {to}",
                        name(&existing.metadata)
                    ));
                }
                self.replace_rs(rs).await
            }
            ExistingNewReplicaSet::UpdateDeployment(d) => {
                self.write_deployment(d).await?;
                Ok(existing)
            }
            ExistingNewReplicaSet::UpToDate => Ok(existing),
        }
    }

    async fn create_new(
        &mut self,
        old: &[ReplicaSetObject],
    ) -> Result<ReplicaSetObject, SyncError> {
        let old_refs: Vec<&ReplicaSetObject> = old.iter().collect();
        let owner = OwnerInfo::of(&self.d, &self.c.core.resource).controller_reference();
        let rs = new_replica_set(&self.d, &old_refs, owner, &self.c.rs_resource)?;
        let rs_name = name(&rs.metadata).to_string();
        let revision_of_new = revision(&rs.metadata).unwrap_or(0);
        let (created_rs, created) = match self.rs_api.create(&rs).await {
            Ok(created_rs) => (created_rs, true),
            Err(e) if is_already_exists(&e) => {
                // Already exists: our own earlier create whose event we have not seen, or a hash
                // collision with a ReplicaSet of another template.
                let found = self
                    .rs_api
                    .get(&rs_name)
                    .await
                    .map_err(SyncError::ReadNewReplicaSet)?;
                if is_own_new_replica_set(&self.d, &found) {
                    (found, false)
                } else {
                    let mut bumped = self.d.clone();
                    bump_collision_count(&mut bumped);
                    let count = bumped.status.as_ref().and_then(|s| s.collision_count);
                    decisions::reason(format_args!(
                        "hash collision: {rs_name} exists with another template; collisionCount becomes {}",
                        count.unwrap_or(0)
                    ));
                    self.write_deployment(bumped).await?;
                    return Err(SyncError::HashCollision {
                        replica_set: rs_name,
                    });
                }
            }
            Err(e) => {
                let message = error_message(&e);
                let mut failed = self.d.clone();
                let note = record_create_failure(&mut failed, &rs_name, &message, Timestamp::now());
                self.event(EventType::Warning, "ReplicaSetCreateError", note);
                // The create error matters more than a failed status write.
                let _ = self.write_deployment(failed).await;
                return Err(SyncError::CreateReplicaSet {
                    name: rs_name,
                    source: e,
                });
            }
        };
        if created {
            let replicas = created_rs.spec.replicas.unwrap_or(0);
            decisions::plan(format_args!(
                "created new ReplicaSet {rs_name} (pod-template-hash {}) for the current template, with {replicas} replicas",
                created_rs
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(POD_TEMPLATE_HASH_LABEL))
                    .map_or("?", String::as_str)
            ));
            if replicas > 0 {
                self.event(
                    EventType::Normal,
                    SCALING_REPLICA_SET_REASON,
                    messages::scaled_up_new_replica_set(&rs_name, replicas),
                );
            }
        }
        // Also when it already existed (our earlier create, not yet in the cache): later steps of this
        // sync must see it.
        if !self
            .rss
            .iter()
            .any(|r| r.metadata.uid == created_rs.metadata.uid)
        {
            self.rss.push(created_rs.clone());
        }
        let mut recorded = self.d.clone();
        if record_new_replica_set(
            &mut recorded,
            &rs_name,
            revision_of_new,
            created,
            Timestamp::now(),
        ) {
            self.write_deployment(recorded).await?;
        }
        Ok(created_rs)
    }

    // ---- writes ----

    async fn replace_rs(&mut self, rs: ReplicaSetObject) -> Result<ReplicaSetObject, SyncError> {
        let rs_name = name(&rs.metadata).to_string();
        let stored = self.rs_api.replace(&rs_name, &rs).await.map_err(|source| {
            SyncError::UpdateReplicaSet {
                name: rs_name.clone(),
                source,
            }
        })?;
        if let Some(slot) = self.rss.iter_mut().find(|r| name(&r.metadata) == rs_name) {
            *slot = stored.clone();
        }
        Ok(stored)
    }

    /// Executes scale steps in order (upstream's `scaleReplicaSetAndRecordEvent`); returns whether any
    /// ReplicaSet's size changed. Stops at the first failure.
    async fn execute(&mut self, steps: Vec<ScaleStep>) -> Result<bool, SyncError> {
        let mut scaled = false;
        for step in steps {
            let Some(rs) = self
                .rss
                .iter()
                .find(|r| name(&r.metadata) == step.name)
                .cloned()
            else {
                continue;
            };
            let Some(updated) = scale_replica_set(&rs, step.to, &self.d, step.force) else {
                continue;
            };
            let from = rs.spec.replicas.unwrap_or(0);
            self.replace_rs(updated).await?;
            if let Some(message) = scaling_event_message(&step.name, from, step.to) {
                decisions::plan(&message);
                self.event(EventType::Normal, SCALING_REPLICA_SET_REASON, message);
                scaled = true;
            }
        }
        Ok(scaled)
    }

    /// Writes what differs between `desired` and the Deployment: its annotations (the revision
    /// bookkeeping) and its status. The status always gets the selector this family stores (a copy's,
    /// whatever `desired` carries), so no write erases or keeps a stale one.
    ///
    /// apps/v1: one update of the status subresource carrying both, as upstream: the API server's status
    /// strategy keeps the annotations and does not bump `metadata.generation` (a write of the main
    /// resource would, so every rollout would show two generations). Copies: a CRD's status subresource
    /// ignores metadata, so annotations go through a patch of the object itself (which does not bump a
    /// custom resource's generation either), then the status.
    pub(crate) async fn write_deployment(
        &mut self,
        desired: DeploymentObject,
    ) -> Result<(), SyncError> {
        let d_name = self.d_name();
        let current = self.d.metadata.annotations.clone().unwrap_or_default();
        let wanted = desired.metadata.annotations.clone().unwrap_or_default();
        let new_status = self.as_written(desired.status.clone().unwrap_or_default().status);
        let annotations_changed = current != wanted;
        if self.c.core.options.family == ApiFamily::Apps {
            if !annotations_changed && !status_needs_write(self.d.status.as_ref(), &new_status) {
                return Ok(());
            }
            let mut target = self.d.clone();
            target.metadata.annotations = desired.metadata.annotations.clone();
            target.status = Some(new_status);
            return self.replace_status(target).await;
        }
        if annotations_changed {
            let mut changes: BTreeMap<String, Option<String>> = BTreeMap::new();
            for (k, v) in &wanted {
                if current.get(k) != Some(v) {
                    changes.insert(k.clone(), Some(v.clone()));
                }
            }
            for k in current.keys().filter(|k| !wanted.contains_key(*k)) {
                changes.insert(k.clone(), None);
            }
            let patch = json!({"metadata": {
                "resourceVersion": self.d.metadata.resource_version,
                "annotations": changes,
            }});
            self.d = self
                .d_api
                .patch(&d_name, &Patch::Merge(&patch))
                .await
                .map_err(SyncError::UpdateAnnotations)?;
        }
        if status_needs_write(self.d.status.as_ref(), &new_status) {
            let mut target = self.d.clone();
            target.status = Some(new_status);
            self.replace_status(target).await?;
        }
        Ok(())
    }

    /// One update of the status subresource with `target` (for apps/v1, its annotations too).
    async fn replace_status(&mut self, target: DeploymentObject) -> Result<(), SyncError> {
        let d_name = self.d_name();
        self.d = self
            .d_api
            .replace_status(&d_name, &target)
            .await
            .map_err(SyncError::UpdateStatus)?;
        Ok(())
    }

    /// A Deployment selecting everything: only mark the generation as observed (and, for a copy, keep
    /// the selector current; `write_deployment` writes nothing when neither changed).
    pub(crate) async fn observe_generation_only(&mut self) -> Result<(), SyncError> {
        let mut d = self.d.clone();
        let generation = d.metadata.generation;
        let status = d.status.get_or_insert_with(Default::default);
        if status.observed_generation.unwrap_or(0) < generation.unwrap_or(0) {
            status.observed_generation = generation;
        }
        self.write_deployment(d).await
    }

    /// `status` as this family stores it (see [`status_as_written`]).
    fn as_written(&self, status: DeploymentStatus) -> StatusWithSelector<DeploymentStatus> {
        let options = &self.c.core.options;
        status_as_written(&self.d, options.family, &options.features, status)
    }

    // ---- status ----

    fn all_refs<'b>(
        new: Option<&'b ReplicaSetObject>,
        old: &'b [ReplicaSetObject],
    ) -> Vec<&'b ReplicaSetObject> {
        old.iter().chain(new).collect()
    }

    /// The new and old ReplicaSets as this sync last read or wrote them, without writing anything
    /// (after [`Rollout::new_and_old`] has synced revisions once, the later steps of a sync only need
    /// to see their own scale writes).
    fn current(&self) -> (Option<ReplicaSetObject>, Vec<ReplicaSetObject>) {
        let refs: Vec<&ReplicaSetObject> = self.rss.iter().collect();
        let (_, old) = find_old_replica_sets(&self.d, &refs);
        let new = find_new_replica_set(&self.d, &refs).cloned();
        (new, old.into_iter().cloned().collect())
    }

    /// Notes what this sync leaves behind as a point of the live view's rollout timeline: the
    /// Deployment's bounds and each active ReplicaSet's `spec.replicas` and ready pods (new one first).
    /// Not part of the algorithm; a first reading may skip it.
    fn note_rollout_point(&self, new: Option<&ReplicaSetObject>, old: &[ReplicaSetObject]) {
        if !decisions::recording() {
            return;
        }
        let replica_sets = new
            .into_iter()
            .chain(old)
            .map(|rs| decisions::ReplicaSetPoint {
                name: name(&rs.metadata).to_string(),
                replicas: rs.spec.replicas.unwrap_or(0),
                ready: rs
                    .status
                    .as_ref()
                    .and_then(|s| s.ready_replicas)
                    .unwrap_or(0),
            })
            .filter(|p| p.replicas > 0 || p.ready > 0)
            .collect();
        decisions::rollout_point(decisions::RolloutPoint {
            at_ms: 0,
            replicas: deployment_replicas(&self.d),
            max_surge: max_surge(&self.d),
            max_unavailable: max_unavailable(&self.d),
            replica_sets,
            decision: None,
        });
    }

    /// Upstream's `syncDeploymentStatus`: counts and Available, no progress evaluation.
    async fn sync_deployment_status(&mut self) -> Result<(), SyncError> {
        let (new, old) = self.current();
        self.note_rollout_point(new.as_ref(), &old);
        let all = Self::all_refs(new.as_ref(), &old);
        let status = calculate_status(&all, new.as_ref(), &self.d, Timestamp::now());
        let status = self.as_written(status);
        self.write_status(status).await
    }

    /// Upstream's `syncRolloutStatus`: counts, Available and Progressing; when nothing changed, ask to
    /// sync again when the progress deadline passes instead.
    async fn sync_rollout_status(&mut self) -> Result<Requeue, SyncError> {
        let (new, old) = self.current();
        self.note_rollout_point(new.as_ref(), &old);
        let all = Self::all_refs(new.as_ref(), &old);
        let now = Timestamp::now();
        let status = self.as_written(rollout_status(&all, new.as_ref(), &self.d, now));
        let timed_out = |s: &DeploymentStatus| {
            get_deployment_condition(s, PROGRESSING)
                .is_some_and(|c| reason(c) == reasons::TIMED_OUT)
        };
        if timed_out(&status) && !self.d.status.as_ref().is_some_and(|s| timed_out(s)) {
            decisions::reason(format_args!(
                "progress deadline exceeded: no progress for {}s; Progressing becomes False (ProgressDeadlineExceeded)",
                self.d.spec.progress_deadline_seconds.unwrap_or(600)
            ));
        }
        if !status_needs_write(self.d.status.as_ref(), &status) {
            let delay = requeue_after_for_progress(&self.d, &status, now).queue_delay();
            return Ok(Requeue::after(delay, "the progress deadline passes"));
        }
        self.write_status(status).await?;
        Ok(Requeue::Never)
    }

    /// Writes a recomputed status (nothing else about the Deployment changed) if it differs from the
    /// stored one, unless an event during this sync already queued the next sync, which will write a
    /// newer one (see `mini_kcm_runtime::api::status_writes`).
    async fn write_status(
        &mut self,
        status: StatusWithSelector<DeploymentStatus>,
    ) -> Result<(), SyncError> {
        if !status_needs_write(self.d.status.as_ref(), &status)
            || self.c.core.status_writes.defer(self.key)
        {
            return Ok(());
        }
        let mut d = self.d.clone();
        d.status = Some(status);
        self.write_deployment(d).await
    }

    pub(crate) async fn sync_status_only(&mut self) -> Result<(), SyncError> {
        self.new_and_old(false).await?;
        self.sync_deployment_status().await
    }

    // ---- strategies ----

    /// Upstream's `sync`: proportional scaling (scaling event or paused), cleanup when paused, status.
    pub(crate) async fn sync_scale_and_status(&mut self) -> Result<(), SyncError> {
        let (new, old) = self.new_and_old(false).await?;
        let old_refs: Vec<&ReplicaSetObject> = old.iter().collect();
        let steps = plan_proportional_scale(&self.d, new.as_ref(), &old_refs);
        if !steps.is_empty() {
            decisions::reason(format_args!(
                "{} replicas wanted: spreading the difference over the active ReplicaSets in proportion to their size",
                deployment_replicas(&self.d)
            ));
        }
        self.execute(steps).await?;
        if self.d.spec.paused == Some(true) && rollback_to(&self.d).is_none() {
            self.cleanup(&old).await?;
        }
        self.sync_deployment_status().await
    }

    /// One RollingUpdate step: grow the new ReplicaSet within maxSurge, else shrink old ones within
    /// maxUnavailable; clean up once the rollout is complete; write the status.
    ///
    /// upstream: rolloutRolling
    pub(crate) async fn rollout_rolling(&mut self) -> Result<Requeue, SyncError> {
        let (new, old) = self.new_and_old(true).await?;
        let Some(new) = new else {
            return Err(SyncError::NoNewReplicaSet);
        };
        let all = Self::all_refs(Some(&new), &old);
        decisions::observe("replicas", deployment_replicas(&self.d));
        decisions::observe("maxSurge", max_surge(&self.d));
        decisions::observe("maxUnavailable", max_unavailable(&self.d));
        decisions::observe(
            "pods (spec.replicas over all ReplicaSets)",
            get_replica_count_for_replica_sets(&all),
        );
        decisions::observe(
            "available",
            get_available_replica_count_for_replica_sets(&all),
        );
        let plan = reconcile_new_replica_set(&self.d, &all, &new)?;
        if let Some(why) = plan.explain() {
            decisions::reason(why);
        }
        if let Some(step) = plan.step
            && self.execute(vec![step]).await?
        {
            return self.sync_rollout_status().await;
        }
        // What the step above may have changed.
        let (new, old) = self.current();
        let Some(new) = new else {
            return self.sync_rollout_status().await;
        };
        let all = Self::all_refs(Some(&new), &old);
        let active_old: Vec<&ReplicaSetObject> =
            crate::replica_sets::filter_active(&old.iter().collect::<Vec<_>>());
        let plan = reconcile_old_replica_sets(&self.d, &all, &active_old, &new);
        if let Some(why) = plan.explain() {
            decisions::reason(why);
        }
        // Upstream swallows a failed old-ReplicaSet step: "not scaled", and the status sync goes on.
        let executed = self.execute(plan.steps).await;
        if plan.scaled && executed.is_ok() {
            return self.sync_rollout_status().await;
        }
        let status = calculate_status(&all, Some(&new), &self.d, Timestamp::now());
        if deployment_complete(&self.d, &status) {
            self.cleanup(&old).await?;
        }
        self.sync_rollout_status().await
    }

    pub(crate) async fn rollout_recreate(
        &mut self,
        pods: &[(String, Arc<CachedPod>)],
    ) -> Result<Requeue, SyncError> {
        let (new, old) = self.new_and_old(false).await?;
        let old_refs: Vec<&ReplicaSetObject> = old.iter().collect();
        let scale_down = scale_down_old_replica_sets_for_recreate(&old_refs);
        if !scale_down.is_empty() {
            decisions::reason(
                "Recreate: every old ReplicaSet goes to 0 before the new one gets pods",
            );
        }
        if self.execute(scale_down).await? {
            return self.sync_rollout_status().await;
        }
        let old_refs: Vec<&ReplicaSetObject> = old.iter().collect();
        let pod_refs = pods.iter().map(|(uid, pod)| (uid.as_str(), pod.as_ref()));
        if old_pods_running(new.as_ref(), &old_refs, pod_refs) {
            decisions::skip("Recreate: old pods still running; new ones wait until they are gone");
            return self.sync_rollout_status().await;
        }
        let (new, old) = if new.is_none() {
            self.new_and_old(true).await?
        } else {
            (new, old)
        };
        if let Some(new) = &new {
            let step = ScaleStep {
                name: name(&new.metadata).to_string(),
                from: new.spec.replicas.unwrap_or(0),
                to: deployment_replicas(&self.d),
                force: false,
            };
            self.execute(vec![step]).await?;
        }
        let all = Self::all_refs(new.as_ref(), &old);
        let status = calculate_status(&all, new.as_ref(), &self.d, Timestamp::now());
        if deployment_complete(&self.d, &status) {
            self.cleanup(&old).await?;
        }
        self.sync_rollout_status().await
    }

    /// Upstream's `rollback`: the template of the ReplicaSet with the requested revision (0 = the
    /// previous one) becomes the Deployment's, and the rollback request is cleared.
    pub(crate) async fn rollback(&mut self) -> Result<(), SyncError> {
        let (new, old) = self.new_and_old(true).await?;
        let all = Self::all_refs(new.as_ref(), &old);
        let mut target = rollback_to(&self.d).unwrap_or(0);
        if target == 0 {
            target = last_revision(&all);
            if target == 0 {
                self.event(
                    EventType::Warning,
                    "DeploymentRollbackRevisionNotFound",
                    "Unable to find last revision.".into(),
                );
                return self.clear_rollback().await;
            }
        }
        let found = all
            .iter()
            .find(|rs| revision(&rs.metadata).ok() == Some(target))
            .map(|rs| (*rs).clone());
        let Some(rs) = found else {
            self.event(
                EventType::Warning,
                "DeploymentRollbackRevisionNotFound",
                "Unable to find the revision to rollback to.".into(),
            );
            return self.clear_rollback().await;
        };
        let template = crate::accessors::rs_template(&rs).into_owned();
        let mut d = self.d.clone();
        if equal_ignore_hash(&d.spec.template, &template) {
            self.event(
                EventType::Warning,
                "DeploymentRollbackTemplateUnchanged",
                messages::rollback_template_unchanged(&self.d_name()),
            );
        } else {
            crate::replica_sets::set_from_replica_set_template(&mut d, &template);
            set_deployment_annotations_to(&mut d, &rs);
            decisions::plan(format_args!(
                "rolling back to revision {target}: the template of ReplicaSet {} becomes the Deployment's",
                name(&rs.metadata)
            ));
            self.event(
                EventType::Normal,
                "DeploymentRollback",
                messages::rolled_back(&self.d_name(), target),
            );
        }
        clear_rollback_to(&mut d);
        self.replace_deployment(d).await
    }

    async fn clear_rollback(&mut self) -> Result<(), SyncError> {
        let mut d = self.d.clone();
        clear_rollback_to(&mut d);
        self.replace_deployment(d).await
    }

    /// A full update of the Deployment (spec and metadata), as a rollback needs.
    async fn replace_deployment(&mut self, d: DeploymentObject) -> Result<(), SyncError> {
        let d_name = self.d_name();
        self.d = self
            .d_api
            .replace(&d_name, &d)
            .await
            .map_err(SyncError::UpdateDeployment)?;
        Ok(())
    }

    /// Deletes the oldest fully scaled-down ReplicaSets beyond `revisionHistoryLimit`.
    async fn cleanup(&mut self, old: &[ReplicaSetObject]) -> Result<(), SyncError> {
        let old_refs: Vec<&ReplicaSetObject> = old.iter().collect();
        let doomed: Vec<String> = replica_sets_to_clean_up(&self.d, &old_refs)
            .into_iter()
            .map(|rs| name(&rs.metadata).to_string())
            .collect();
        for rs_name in doomed {
            decisions::plan(format_args!(
                "deleting old ReplicaSet {rs_name}: beyond revisionHistoryLimit {}",
                self.d.spec.revision_history_limit.unwrap_or(10)
            ));
            match self.rs_api.delete(&rs_name).await {
                Ok(_) => self.rss.retain(|r| name(&r.metadata) != rs_name),
                Err(e) if is_not_found(&e) => {}
                Err(source) => {
                    return Err(SyncError::DeleteReplicaSet {
                        name: rs_name,
                        source,
                    });
                }
            }
        }
        Ok(())
    }
}
