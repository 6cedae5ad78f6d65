//! The new ReplicaSet of a rollout: building it for creation, and keeping an existing one in step
//! with its Deployment (upstream's `getNewReplicaSet`, minus the API calls).
//!
//! A created ReplicaSet is named `<deployment>-<hash>` (deterministic, so a retried create collides
//! with itself instead of duplicating), and its labels, selector and pod template carry
//! `pod-template-hash: <hash>` so its pods never match another ReplicaSet of the Deployment. If the
//! name is taken by a ReplicaSet that is not ours with this template, the controller bumps
//! `status.collisionCount`, which changes the hash, and retries on the next sync.

use k8s_openapi::api::apps::v1::ReplicaSetSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use k8s_openapi::jiff::Timestamp;
use kube::discovery::ApiResource;

use crate::accessors::{name, rs_template};
use crate::annotations::{
    MAX_REV_HISTORY_LENGTH_IN_CHARS, POD_TEMPLATE_HASH_LABEL, REVISION_ANNOTATION, max_revision,
    set_deployment_revision, set_new_replica_set_annotations,
};
use crate::conditions::{
    CONDITION_FALSE, CONDITION_TRUE, PROGRESSING, get_deployment_condition, messages,
    new_deployment_condition, reasons, set_deployment_condition,
};
use crate::hash::compute_hash;
use crate::progress::has_progress_deadline;
use crate::replica_sets::equal_ignore_hash;
use crate::rolling::new_rs_new_replicas;
use crate::{DeploymentObject, Error, ReplicaSetObject};

/// The longest object name (a DNS-1123 subdomain).
pub(crate) const DNS1123_SUBDOMAIN_MAX_LENGTH: usize = 253;

/// `<deployment>-<hash>`, the Deployment name truncated so the whole stays a valid object name.
pub(crate) fn generate_replica_set_name(deployment: &str, hash: &str) -> String {
    let max_prefix = DNS1123_SUBDOMAIN_MAX_LENGTH.saturating_sub(1 + hash.len());
    // Names are ASCII; `get` only fails on a char boundary, which cannot happen then.
    let prefix = match deployment.get(..max_prefix) {
        Some(truncated) if deployment.len() > max_prefix && max_prefix > 0 => truncated,
        _ => deployment,
    };
    format!("{prefix}-{hash}")
}

/// The revision the new ReplicaSet must carry: one above every old ReplicaSet's. Revisions are
/// annotations anyone can write; at `i64::MAX` Go's sum wraps to a negative revision, here it saturates
/// (the new ReplicaSet then shares the top revision: rollback by revision gets ambiguous, nothing panics).
pub(crate) fn new_revision(old_rss: &[&ReplicaSetObject]) -> i64 {
    max_revision(old_rss).saturating_add(1)
}

/// The ReplicaSet to create for the Deployment's current template.
///
/// `old_rss` are all old ReplicaSets (they size the new one under maxSurge and give its revision);
/// `controller_ref` is the Deployment's controller owner reference; `rs_resource` the ReplicaSet kind
/// of the Deployment's API family. Sized by [`new_rs_new_replicas`], annotated with the Deployment's
/// copyable annotations, the revision and the desired/max replicas.
pub(crate) fn new_replica_set(
    d: &DeploymentObject,
    old_rss: &[&ReplicaSetObject],
    controller_ref: OwnerReference,
    rs_resource: &ApiResource,
) -> Result<ReplicaSetObject, Error> {
    let collision_count = d.status.as_ref().and_then(|s| s.collision_count);
    let hash = compute_hash(&d.spec.template, collision_count);

    let mut template = d.spec.template.clone();
    let labels = template
        .metadata
        .get_or_insert_with(Default::default)
        .labels
        .get_or_insert_with(Default::default);
    labels.insert(POD_TEMPLATE_HASH_LABEL.to_string(), hash.clone());
    let labels = labels.clone();
    let mut selector = d.spec.selector.clone();
    selector
        .match_labels
        .get_or_insert_with(Default::default)
        .insert(POD_TEMPLATE_HASH_LABEL.to_string(), hash.clone());

    let spec = ReplicaSetSpec {
        replicas: Some(0),
        min_ready_seconds: d.spec.min_ready_seconds,
        selector,
        template: Some(template),
    };
    let mut rs = ReplicaSetObject::new(
        &generate_replica_set_name(name(&d.metadata), &hash),
        rs_resource,
        spec,
    );
    rs.metadata.namespace = d.metadata.namespace.clone();
    rs.metadata.owner_references = Some(vec![controller_ref]);
    rs.metadata.labels = Some(labels);

    let all: Vec<&ReplicaSetObject> = old_rss.iter().copied().chain([&rs]).collect();
    let replicas = new_rs_new_replicas(d, &all, &rs)?;
    rs.spec.replicas = Some(replicas);
    set_new_replica_set_annotations(
        d,
        &mut rs,
        new_revision(old_rss),
        false,
        MAX_REV_HISTORY_LENGTH_IN_CHARS,
    );
    Ok(rs)
}

/// Whether the ReplicaSet that already has the new ReplicaSet's name is ours and has the
/// Deployment's template (a create that raced our own earlier create). Otherwise the name is a hash
/// collision: see [`bump_collision_count`].
pub(crate) fn is_own_new_replica_set(d: &DeploymentObject, existing: &ReplicaSetObject) -> bool {
    let ours = mini_kcm_runtime::api::kinds::controller_uid(&existing.metadata)
        .is_some_and(|uid| Some(uid) == d.metadata.uid.as_deref());
    ours && equal_ignore_hash(&d.spec.template, &rs_template(existing))
}

/// A hash collision: `status.collisionCount` + 1 (absent → 1); write the status and retry.
pub(crate) fn bump_collision_count(d: &mut DeploymentObject) {
    let status = d.status.get_or_insert_with(Default::default);
    status.collision_count = Some(status.collision_count.unwrap_or(0).saturating_add(1));
}

/// Records the new ReplicaSet `rs_name` on the Deployment after its create: the revision annotation
/// and, for a ReplicaSet we created (`created`, not found already existing) with a progress deadline,
/// Progressing True `NewReplicaSetCreated`. True when the Deployment must be written (upstream writes
/// through the status subresource, annotation included).
pub(crate) fn record_new_replica_set(
    d: &mut DeploymentObject,
    rs_name: &str,
    revision: i64,
    created: bool,
    now: Timestamp,
) -> bool {
    let mut changed = set_deployment_revision(d, &revision.to_string());
    if created && has_progress_deadline(d) {
        let c = new_deployment_condition(
            PROGRESSING,
            CONDITION_TRUE,
            reasons::NEW_REPLICA_SET,
            &messages::created_new_replica_set(rs_name),
            now,
        );
        set_deployment_condition(d.status.get_or_insert_with(Default::default), c);
        changed = true;
    }
    changed
}

/// Records a failed create (other than a collision or a terminating namespace): with a progress
/// deadline, Progressing False `ReplicaSetCreateError` (write the status, ignoring its error). Returns
/// the message of the Warning event to emit either way.
pub(crate) fn record_create_failure(
    d: &mut DeploymentObject,
    rs_name: &str,
    error: &str,
    now: Timestamp,
) -> String {
    let message = messages::failed_to_create_replica_set(rs_name, error);
    if has_progress_deadline(d) {
        let c = new_deployment_condition(
            PROGRESSING,
            CONDITION_FALSE,
            reasons::FAILED_RS_CREATE,
            &message,
            now,
        );
        set_deployment_condition(d.status.get_or_insert_with(Default::default), c);
    }
    message
}

/// What keeping an existing new ReplicaSet in step with its Deployment requires.
#[derive(Debug, Clone)]
pub(crate) enum ExistingNewReplicaSet {
    /// Its annotations (copied ones, revision) or minReadySeconds are stale: update the ReplicaSet and
    /// use the result as the new ReplicaSet. The Deployment catches up on a later sync.
    UpdateReplicaSet(ReplicaSetObject),
    /// The ReplicaSet is current; the Deployment's revision annotation and/or its Progressing condition
    /// (True `FoundNewReplicaSet`, when a deadline is set and no Progressing condition exists yet)
    /// changed: write this Deployment (upstream: through the status subresource).
    UpdateDeployment(DeploymentObject),
    /// Nothing to write.
    UpToDate,
}

/// Brings an existing new ReplicaSet and its Deployment in step (revision, copied annotations,
/// minReadySeconds), one write at a time, as upstream.
pub(crate) fn sync_existing_new_replica_set(
    d: &DeploymentObject,
    existing: &ReplicaSetObject,
    old_rss: &[&ReplicaSetObject],
    now: Timestamp,
) -> ExistingNewReplicaSet {
    let mut rs = existing.clone();
    let annotations_changed = set_new_replica_set_annotations(
        d,
        &mut rs,
        new_revision(old_rss),
        true,
        MAX_REV_HISTORY_LENGTH_IN_CHARS,
    );
    let min_ready_changed =
        rs.spec.min_ready_seconds.unwrap_or(0) != d.spec.min_ready_seconds.unwrap_or(0);
    if annotations_changed || min_ready_changed {
        rs.spec.min_ready_seconds = d.spec.min_ready_seconds;
        return ExistingNewReplicaSet::UpdateReplicaSet(rs);
    }

    let mut updated = d.clone();
    // The ReplicaSet's revision is the reliable one; the Deployment copies it.
    let revision = rs
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(REVISION_ANNOTATION))
        .cloned()
        .unwrap_or_default();
    let mut changed = set_deployment_revision(&mut updated, &revision);
    let status = updated.status.get_or_insert_with(Default::default);
    if has_progress_deadline(d) && get_deployment_condition(status, PROGRESSING).is_none() {
        // A Deployment that had no deadline before: start its progress clock at the first sighting.
        let c = new_deployment_condition(
            PROGRESSING,
            CONDITION_TRUE,
            reasons::FOUND_NEW_RS,
            &messages::found_new_replica_set(name(&rs.metadata)),
            now,
        );
        set_deployment_condition(status, c);
        changed = true;
    }
    if changed {
        ExistingNewReplicaSet::UpdateDeployment(updated)
    } else {
        ExistingNewReplicaSet::UpToDate
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::annotations::{DESIRED_REPLICAS_ANNOTATION, MAX_REPLICAS_ANNOTATION};
    use crate::testutil::{deployment, rs_for, ts, with_annotations};

    #[test]
    fn the_revision_after_i64_max_saturates() {
        let top = with_annotations(
            crate::testutil::rs("top", 0),
            &[(
                crate::annotations::REVISION_ANNOTATION,
                "9223372036854775807",
            )],
        );
        assert_eq!(new_revision(&[&top]), i64::MAX);
    }

    fn owner(d: &DeploymentObject) -> OwnerReference {
        OwnerReference {
            api_version: "apps/v1".into(),
            kind: "Deployment".into(),
            name: d.metadata.name.clone().unwrap(),
            uid: d.metadata.uid.clone().unwrap(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    }

    fn rs_resource() -> ApiResource {
        ApiResource {
            group: "apps".into(),
            version: "v1".into(),
            api_version: "apps/v1".into(),
            kind: "ReplicaSet".into(),
            plural: "replicasets".into(),
        }
    }

    #[test]
    fn generate_replica_set_name_table() {
        // Mirrors upstream TestGenerateReplicaSetName.
        let cases = [
            (
                "my-deployment".to_string(),
                "abcde12345".to_string(),
                "my-deployment-abcde12345".to_string(),
            ),
            (
                "a".repeat(242),
                "abcde12345".to_string(),
                format!("{}-abcde12345", "a".repeat(242)),
            ),
            (
                "b".repeat(250),
                "abcde12345".to_string(),
                format!("{}-abcde12345", "b".repeat(242)),
            ),
            (
                "d".repeat(252),
                "h".repeat(252),
                format!("{}-{}", "d".repeat(252), "h".repeat(252)),
            ),
        ];
        for (deployment, hash, want) in cases {
            assert_eq!(generate_replica_set_name(&deployment, &hash), want);
        }
    }

    #[test]
    fn new_replica_set_is_labelled_owned_sized_and_annotated() {
        let mut d = deployment("web", 10, 3, 2);
        d.spec.min_ready_seconds = Some(5);
        d.metadata.annotations = Some(BTreeMap::from([(
            "kubernetes.io/change-cause".into(),
            "v2".into(),
        )]));
        let old = with_annotations(
            rs_for(&deployment("web", 10, 3, 2), "web-old", 10, Some("x")),
            &[(REVISION_ANNOTATION, "4")],
        );
        let mut old_template = old.spec.template.clone().unwrap();
        old_template.spec.as_mut().unwrap().containers[0].image = Some("old".into());
        let mut old = old;
        old.spec.template = Some(old_template);

        let rs = new_replica_set(&d, &[&old], owner(&d), &rs_resource()).unwrap();
        let hash = compute_hash(&d.spec.template, None);
        assert_eq!(
            rs.metadata.name.as_deref(),
            Some(format!("web-{hash}").as_str())
        );
        assert_eq!(rs.metadata.namespace.as_deref(), Some("default"));
        assert_eq!(rs.types.as_ref().unwrap().kind, "ReplicaSet");
        assert_eq!(
            rs.metadata.labels.as_ref().unwrap()[POD_TEMPLATE_HASH_LABEL],
            hash
        );
        assert_eq!(
            rs.spec.selector.match_labels.as_ref().unwrap()[POD_TEMPLATE_HASH_LABEL],
            hash
        );
        assert_eq!(
            rs.spec.selector.match_labels.as_ref().unwrap()["foo"],
            "bar"
        );
        let template = rs.spec.template.as_ref().unwrap();
        assert_eq!(
            template.metadata.as_ref().unwrap().labels.as_ref().unwrap()[POD_TEMPLATE_HASH_LABEL],
            hash
        );
        assert!(equal_ignore_hash(template, &d.spec.template));
        assert_eq!(
            rs.metadata.owner_references.as_ref().unwrap()[0].uid,
            "uid-web"
        );
        assert_eq!(rs.spec.min_ready_seconds, Some(5));
        // 10 old + surge 3 = 13: room for 3.
        assert_eq!(rs.spec.replicas, Some(3));
        let a = rs.metadata.annotations.as_ref().unwrap();
        assert_eq!(a[REVISION_ANNOTATION], "5");
        assert_eq!(a[DESIRED_REPLICAS_ANNOTATION], "10");
        assert_eq!(a[MAX_REPLICAS_ANNOTATION], "13");
        assert_eq!(a["kubernetes.io/change-cause"], "v2");
        assert!(is_own_new_replica_set(&d, &rs));

        // A collision changes the name.
        bump_collision_count(&mut d);
        assert_eq!(d.status.as_ref().unwrap().collision_count, Some(1));
        let retry = new_replica_set(&d, &[&old], owner(&d), &rs_resource()).unwrap();
        assert_ne!(retry.metadata.name, rs.metadata.name);
        let mut foreign = rs.clone();
        foreign.metadata.owner_references = None;
        assert!(!is_own_new_replica_set(&d, &foreign));
    }

    #[test]
    fn existing_new_replica_set_sync_order() {
        let now = ts("2024-01-01T00:00:00Z");
        let mut d = deployment("web", 3, 1, 1);
        d.spec.progress_deadline_seconds = Some(600);
        let old = with_annotations(
            rs_for(&deployment("other", 3, 1, 1), "web-old", 0, None),
            &[(REVISION_ANNOTATION, "2")],
        );

        // First the ReplicaSet gets its revision.
        let current = rs_for(&d, "web-new", 3, Some("abc"));
        let ExistingNewReplicaSet::UpdateReplicaSet(updated) =
            sync_existing_new_replica_set(&d, &current, &[&old], now)
        else {
            panic!("expected a ReplicaSet update");
        };
        assert_eq!(
            updated.metadata.annotations.as_ref().unwrap()[REVISION_ANNOTATION],
            "3"
        );

        // Then the Deployment copies it and gets FoundNewReplicaSet.
        let ExistingNewReplicaSet::UpdateDeployment(dep) =
            sync_existing_new_replica_set(&d, &updated, &[&old], now)
        else {
            panic!("expected a Deployment update");
        };
        assert_eq!(
            dep.metadata.annotations.as_ref().unwrap()[REVISION_ANNOTATION],
            "3"
        );
        let c = get_deployment_condition(dep.status.as_ref().unwrap(), PROGRESSING).unwrap();
        assert_eq!(c.reason.as_deref(), Some(reasons::FOUND_NEW_RS));
        assert_eq!(
            c.message.as_deref(),
            Some("Found new replica set \"web-new\"")
        );

        // Then nothing.
        assert!(matches!(
            sync_existing_new_replica_set(&dep, &updated, &[&old], now),
            ExistingNewReplicaSet::UpToDate
        ));

        // minReadySeconds follows the Deployment.
        let mut slower = dep.clone();
        slower.spec.min_ready_seconds = Some(10);
        let ExistingNewReplicaSet::UpdateReplicaSet(r) =
            sync_existing_new_replica_set(&slower, &updated, &[&old], now)
        else {
            panic!("expected a ReplicaSet update");
        };
        assert_eq!(r.spec.min_ready_seconds, Some(10));
    }

    #[test]
    fn created_and_failed_conditions() {
        let now = ts("2024-01-01T00:00:00Z");
        let mut d = deployment("web", 3, 1, 1);
        d.spec.progress_deadline_seconds = Some(600);
        assert!(record_new_replica_set(&mut d, "web-abc", 1, true, now));
        let c = get_deployment_condition(d.status.as_ref().unwrap(), PROGRESSING).unwrap();
        assert_eq!(
            c.message.as_deref(),
            Some("Created new replica set \"web-abc\"")
        );
        assert!(!record_new_replica_set(&mut d, "web-abc", 1, false, now));
        let msg = record_create_failure(&mut d, "web-abc", "quota exceeded", now);
        assert_eq!(
            msg,
            "Failed to create new replica set \"web-abc\": quota exceeded"
        );
        let c = get_deployment_condition(d.status.as_ref().unwrap(), PROGRESSING).unwrap();
        assert_eq!(
            (c.status.as_deref().unwrap_or_default(), c.reason.as_deref()),
            (CONDITION_FALSE, Some(reasons::FAILED_RS_CREATE))
        );
    }
}
