//! Ownership: which children (pods, ReplicaSets) belong to which controller, and adopting or releasing
//! them (upstream's `ControllerRefManager`).
//!
//! A controller owns a child through an owner reference with `controller: true`. Each sync *claims* the
//! candidates: it keeps its own children that still match its selector, adopts orphans that match, and
//! releases children whose labels no longer match. Children controlled by someone else are never touched.
//!
//! Adoption and release are JSON patches, because CRD children (the `minikcm.dev` copies) reject strategic
//! merge patches. Each patch carries `test` operations (the child's UID, and the owner references or
//! resourceVersion it was computed from), so it fails instead of clobbering a concurrent change. A failed
//! adoption reads the child again and tries once more if it still qualifies (an orphan's status changes
//! often, and upstream's UID-only precondition would not stop it); a failed release leaves the child to
//! the next sync, which retries from fresh cache.

use std::fmt::Debug;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::Resource;
use kube::api::{ObjectMeta, Patch};
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::api::api_errors::{is_invalid, is_not_found};
use crate::api::kinds::controller_ref;
use crate::api::tracked_api::TrackedApi;
use crate::controller::key::ObjectKey;
use crate::observability::decisions;

/// The owner side of a claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerInfo {
    /// The owner's `apiVersion` (e.g. `apps/v1`), as its children's owner references carry it.
    pub api_version: String,
    /// The owner's `kind` (e.g. `ReplicaSet`), as its children's owner references carry it.
    pub kind: String,
    /// The owner's `metadata.name`, as its children's owner references carry it.
    pub name: String,
    /// The owner's namespace: only children in it can be adopted.
    pub namespace: String,
    /// The owner's UID: a child whose controller reference has it is the owner's.
    pub uid: String,
    /// The owner has a deletionTimestamp: it releases nothing and adopts nothing.
    pub deleting: bool,
}

impl OwnerInfo {
    /// The owner side of `owner`, whose kind `dyntype` names (absent metadata reads as empty).
    pub fn of<K: Resource>(owner: &K, dyntype: &K::DynamicType) -> Self {
        let meta = owner.meta();
        OwnerInfo {
            api_version: K::api_version(dyntype).into_owned(),
            kind: K::kind(dyntype).into_owned(),
            name: meta.name.clone().unwrap_or_default(),
            namespace: meta.namespace.clone().unwrap_or_default(),
            uid: meta.uid.clone().unwrap_or_default(),
            deleting: meta.deletion_timestamp.is_some(),
        }
    }

    /// The owner reference a controller puts on its children.
    pub fn controller_reference(&self) -> OwnerReference {
        OwnerReference {
            api_version: self.api_version.clone(),
            kind: self.kind.clone(),
            name: self.name.clone(),
            uid: self.uid.clone(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    }
}

/// What a claim does with one candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ClaimAction {
    /// Ours and matching: claimed (even while the owner is being deleted).
    Keep,
    /// An orphan that matches: adopt it.
    Adopt,
    /// Ours but no longer matching: release it.
    Release,
    /// Not ours to touch (another controller's, or an orphan we may not adopt), or ours but not
    /// matching while we are being deleted.
    Ignore,
}

/// Decides what to do with one candidate (pure; the heart of upstream's `ClaimObject`).
pub(crate) fn claim_action(
    owner: &OwnerInfo,
    child: &ObjectMeta,
    selector_matches: bool,
) -> ClaimAction {
    match controller_ref(child) {
        Some(r) if r.uid != owner.uid => ClaimAction::Ignore,
        Some(_) if selector_matches => ClaimAction::Keep,
        Some(_) if owner.deleting => ClaimAction::Ignore,
        Some(_) => ClaimAction::Release,
        None => {
            let same_namespace = child.namespace.as_deref().unwrap_or_default() == owner.namespace;
            if owner.deleting
                || !selector_matches
                || child.deletion_timestamp.is_some()
                || !same_namespace
            {
                ClaimAction::Ignore
            } else {
                ClaimAction::Adopt
            }
        }
    }
}

/// The result of a claim pass.
#[derive(Debug)]
pub struct Claimed<K> {
    /// Children the owner controls after the pass (kept and adopted).
    pub claimed: Vec<Arc<K>>,
    /// Names adopted in this pass.
    pub adopted: Vec<String>,
    /// Names released in this pass.
    pub released: Vec<String>,
}

/// Why a claim pass failed.
#[derive(Debug, thiserror::Error)]
pub enum ClaimError {
    /// The live re-check of the owner before the first adoption refused: nothing is adopted this pass.
    #[error("cannot adopt for {owner}")]
    CannotAdopt {
        /// The owner that may not adopt.
        owner: ObjectKey,
        /// Why the re-check refused.
        #[source]
        reason: AdoptionRefused,
    },
    /// A child's adoption or release patch failed, other than with NotFound (a child gone is skipped).
    #[error("{action} {child} failed")]
    Patch {
        /// `adopting` or `releasing`.
        action: &'static str,
        /// The child's name.
        child: String,
        /// The API error of the patch.
        #[source]
        source: kube::Error,
    },
}

/// Why the live re-check of an owner refused adoption.
#[derive(Debug, thiserror::Error)]
pub enum AdoptionRefused {
    /// The GET of the owner failed (NotFound included: the owner was deleted).
    #[error("reading the owner")]
    Read(#[source] kube::Error),
    /// The owner was deleted and re-created under the same name since the cache read.
    #[error("the original {kind} is gone: got uid {got:?}, wanted {wanted:?}")]
    Replaced {
        /// The owner's kind.
        kind: String,
        /// The UID the API server has now.
        got: Option<String>,
        /// The UID of the cached owner.
        wanted: Option<String>,
    },
    /// The owner has a deletionTimestamp on the API server (the cache may not show it yet).
    #[error("the {kind} is being deleted")]
    Deleting {
        /// The owner's kind.
        kind: String,
    },
}

/// Claims `candidates` for `owner` (see the module docs). `matches` is the owner's selector;
/// `can_adopt` is the live re-check of the owner (a fresh GET: is it still there, same UID, not being
/// deleted?), run at most once, before the first adoption. `api` is the children's API in the owner's
/// namespace, through which the adoptions and releases are recorded as the owner's writes. Returns the
/// claimed children, or the first error after trying every candidate.
///
/// upstream: ClaimObject (claimPods / ClaimPods, ClaimReplicaSets, ClaimControllerRevisions)
pub async fn claim<K, M>(
    api: &TrackedApi<K>,
    owner: &OwnerInfo,
    candidates: Vec<Arc<K>>,
    matches: M,
    can_adopt: impl AsyncFnOnce() -> Result<(), AdoptionRefused>,
) -> Result<Claimed<K>, ClaimError>
where
    K: Resource + Clone + Debug + DeserializeOwned + 'static,
    M: Fn(&K) -> bool,
{
    let mut outcome = Claimed {
        claimed: Vec::new(),
        adopted: Vec::new(),
        released: Vec::new(),
    };
    let mut first_error = None;
    // The re-check runs once, before the first adoption; a refusal stops every adoption of this pass.
    let mut adoption_checked = false;
    let mut adoption_refused = false;
    let mut can_adopt = Some(can_adopt);
    // Most children are kept, pass after pass; the few that need a write are written in name order, so
    // the writes of a pass are the same whatever order the cache lists the candidates in.
    let mut to_write = Vec::new();
    for child in candidates {
        match claim_action(owner, child.meta(), matches(&child)) {
            ClaimAction::Keep => outcome.claimed.push(child),
            ClaimAction::Ignore => {}
            action => to_write.push((action, child)),
        }
    }
    to_write.sort_by(|(_, a), (_, b)| a.meta().name.cmp(&b.meta().name));
    for (action, child) in to_write {
        let meta = child.meta();
        let name = || meta.name.clone().unwrap_or_default();
        match action {
            ClaimAction::Keep | ClaimAction::Ignore => {}
            ClaimAction::Adopt => {
                let name = name();
                if !adoption_checked {
                    adoption_checked = true;
                    if let Some(check) = can_adopt.take()
                        && let Err(reason) = check().await
                    {
                        adoption_refused = true;
                        first_error.get_or_insert(ClaimError::CannotAdopt {
                            owner: ObjectKey::new(owner.namespace.clone(), owner.name.clone()),
                            reason,
                        });
                    }
                }
                if adoption_refused {
                    continue;
                }
                let result = match adopt(api, &name, meta, owner).await {
                    // The orphan changed since the cache read (a status update, say): judge it again
                    // as it is now, and adopt it if it still qualifies. Upstream's patch carries only a
                    // UID precondition, so such a change never stops its adoption either.
                    Err(e) if is_invalid(&e) => readopt(api, &name, owner, &matches).await,
                    other => other.map(Some),
                };
                match result {
                    Ok(None) => {}
                    Ok(Some(adopted)) => {
                        decisions::plan(format_args!(
                            "adopted orphan {name}: its labels match the selector and it has no controller"
                        ));
                        outcome.adopted.push(name);
                        outcome.claimed.push(Arc::new(adopted));
                    }
                    Err(e) if is_not_found(&e) => {}
                    Err(source) => {
                        first_error.get_or_insert(ClaimError::Patch {
                            action: "adopting",
                            child: name,
                            source,
                        });
                    }
                }
            }
            ClaimAction::Release => {
                let name = name();
                let Some(release) = release_patch(meta, &owner.uid) else {
                    continue;
                };
                match patch(api, &name, release).await {
                    Ok(_) => {
                        decisions::plan(format_args!(
                            "released {name}: its labels no longer match the selector"
                        ));
                        outcome.released.push(name);
                    }
                    // Gone, or changed under us (a failed `test`): either way not ours to count now.
                    Err(e) if is_not_found(&e) || is_invalid(&e) => {}
                    Err(source) => {
                        first_error.get_or_insert(ClaimError::Patch {
                            action: "releasing",
                            child: name,
                            source,
                        });
                    }
                }
            }
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(outcome),
    }
}

/// Patches `owner`'s controller reference onto the child.
///
/// upstream: AdoptPod, AdoptReplicaSet
async fn adopt<K>(
    api: &TrackedApi<K>,
    name: &str,
    child: &ObjectMeta,
    owner: &OwnerInfo,
) -> Result<K, kube::Error>
where
    K: Resource + Clone + Debug + DeserializeOwned + 'static,
{
    patch(api, name, adopt_patch(child, owner)).await
}

/// The second and last attempt at adopting a child whose guarded patch failed: reads it fresh and
/// adopts it if it is still an orphan that matches; `Ok(None)` if it is gone or no longer qualifies,
/// `Ok(Some)` with the child if it is ours now (adopted here, or already by a concurrent sync).
async fn readopt<K, M>(
    api: &TrackedApi<K>,
    name: &str,
    owner: &OwnerInfo,
    matches: &M,
) -> Result<Option<K>, kube::Error>
where
    K: Resource + Clone + Debug + DeserializeOwned + 'static,
    M: Fn(&K) -> bool,
{
    let Some(fresh) = api.get_opt(name).await? else {
        return Ok(None);
    };
    match claim_action(owner, fresh.meta(), matches(&fresh)) {
        ClaimAction::Adopt => adopt(api, name, fresh.meta(), owner).await.map(Some),
        ClaimAction::Keep => Ok(Some(fresh)),
        ClaimAction::Release | ClaimAction::Ignore => Ok(None),
    }
}

async fn patch<K>(api: &TrackedApi<K>, name: &str, ops: serde_json::Value) -> Result<K, kube::Error>
where
    K: Resource + Clone + Debug + DeserializeOwned + 'static,
{
    let ops: json_patch::Patch = serde_json::from_value(ops).map_err(kube::Error::SerdeError)?;
    api.patch(name, &Patch::<()>::Json(ops)).await
}

/// JSON patch adding `owner`'s controller reference, guarded by the child's UID and by the owner
/// references (or, when there are none, the resourceVersion) it was computed from.
pub(crate) fn adopt_patch(child: &ObjectMeta, owner: &OwnerInfo) -> serde_json::Value {
    let reference = owner.controller_reference();
    let mut ops = vec![json!({"op": "test", "path": "/metadata/uid", "value": child.uid})];
    match &child.owner_references {
        Some(existing) if !existing.is_empty() => {
            ops.push(json!({"op": "test", "path": "/metadata/ownerReferences", "value": existing}));
            ops.push(
                json!({"op": "add", "path": "/metadata/ownerReferences/-", "value": reference}),
            );
        }
        _ => {
            ops.push(json!({"op": "test", "path": "/metadata/resourceVersion", "value": child.resource_version}));
            ops.push(
                json!({"op": "add", "path": "/metadata/ownerReferences", "value": [reference]}),
            );
        }
    }
    serde_json::Value::Array(ops)
}

/// JSON patch removing the owner reference with `owner_uid`, guarded by the child's UID and the position
/// of that reference. `None` if the child has no such reference.
///
/// upstream: ReleasePod, ReleaseReplicaSet (their patch)
pub(crate) fn release_patch(child: &ObjectMeta, owner_uid: &str) -> Option<serde_json::Value> {
    let index = child
        .owner_references
        .as_ref()?
        .iter()
        .position(|r| r.uid == owner_uid)?;
    let path = format!("/metadata/ownerReferences/{index}");
    Some(json!([
        {"op": "test", "path": "/metadata/uid", "value": child.uid},
        {"op": "test", "path": format!("{path}/uid"), "value": owner_uid},
        {"op": "remove", "path": path},
    ]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recorded_api::{Reaction, RecordedApi, Verb};
    use k8s_openapi::api::core::v1::Pod;

    fn owner(deleting: bool) -> OwnerInfo {
        OwnerInfo {
            api_version: "apps/v1".into(),
            kind: "ReplicaSet".into(),
            name: "rs".into(),
            namespace: "ns".into(),
            uid: "owner-uid".into(),
            deleting,
        }
    }

    fn child(controller: Option<&str>) -> ObjectMeta {
        ObjectMeta {
            name: Some("pod".into()),
            namespace: Some("ns".into()),
            uid: Some("child-uid".into()),
            resource_version: Some("7".into()),
            owner_references: controller.map(|uid| {
                vec![OwnerReference {
                    api_version: "apps/v1".into(),
                    kind: "ReplicaSet".into(),
                    name: "x".into(),
                    uid: uid.into(),
                    controller: Some(true),
                    block_owner_deletion: Some(true),
                }]
            }),
            ..Default::default()
        }
    }

    /// Mirrors upstream's TestClaimPods table: the decision for every kind of candidate.
    #[test]
    fn claim_decisions() {
        let live = owner(false);
        let dying = owner(true);
        // Ours.
        assert_eq!(
            claim_action(&live, &child(Some("owner-uid")), true),
            ClaimAction::Keep
        );
        assert_eq!(
            claim_action(&dying, &child(Some("owner-uid")), true),
            ClaimAction::Keep
        );
        assert_eq!(
            claim_action(&live, &child(Some("owner-uid")), false),
            ClaimAction::Release
        );
        assert_eq!(
            claim_action(&dying, &child(Some("owner-uid")), false),
            ClaimAction::Ignore
        );
        // Someone else's: never touched, matching or not.
        assert_eq!(
            claim_action(&live, &child(Some("other")), true),
            ClaimAction::Ignore
        );
        assert_eq!(
            claim_action(&live, &child(Some("other")), false),
            ClaimAction::Ignore
        );
        // Orphans.
        assert_eq!(claim_action(&live, &child(None), true), ClaimAction::Adopt);
        assert_eq!(
            claim_action(&live, &child(None), false),
            ClaimAction::Ignore
        );
        assert_eq!(
            claim_action(&dying, &child(None), true),
            ClaimAction::Ignore
        );
        let mut terminating = child(None);
        terminating.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ));
        assert_eq!(claim_action(&live, &terminating, true), ClaimAction::Ignore);
        let mut elsewhere = child(None);
        elsewhere.namespace = Some("other-ns".into());
        assert_eq!(claim_action(&live, &elsewhere, true), ClaimAction::Ignore);
        // A non-controller owner reference does not make a child ours or theirs.
        let mut shared = child(None);
        shared.owner_references = Some(vec![OwnerReference {
            controller: Some(false),
            uid: "someone".into(),
            ..Default::default()
        }]);
        assert_eq!(claim_action(&live, &shared, true), ClaimAction::Adopt);
    }

    #[test]
    fn adopt_patch_is_guarded_and_sets_a_blocking_controller_reference() {
        let patch = adopt_patch(&child(None), &owner(false));
        assert_eq!(
            patch,
            json!([
                {"op": "test", "path": "/metadata/uid", "value": "child-uid"},
                {"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
                {"op": "add", "path": "/metadata/ownerReferences", "value": [{
                    "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "owner-uid",
                    "controller": true, "blockOwnerDeletion": true
                }]},
            ])
        );
        let mut with_refs = child(None);
        with_refs.owner_references = Some(vec![OwnerReference {
            uid: "someone".into(),
            controller: Some(false),
            ..Default::default()
        }]);
        let patch = adopt_patch(&with_refs, &owner(false));
        assert_eq!(patch[1]["path"], "/metadata/ownerReferences");
        assert_eq!(patch[2]["path"], "/metadata/ownerReferences/-");
        // It must apply to the child as the API server would apply it.
        let mut doc = serde_json::to_value(k8s_openapi::api::core::v1::Pod {
            metadata: with_refs,
            ..Default::default()
        })
        .unwrap();
        let ops: json_patch::Patch = serde_json::from_value(patch).unwrap();
        json_patch::patch(&mut doc, &ops).unwrap();
        assert_eq!(doc["metadata"]["ownerReferences"][1]["uid"], "owner-uid");
    }

    /// Mirrors upstream's TestGeneratePatchBytesForDelete: only our reference is removed.
    #[test]
    fn release_patch_removes_only_our_reference() {
        let mut meta = child(Some("owner-uid"));
        meta.owner_references.as_mut().unwrap().insert(
            0,
            OwnerReference {
                uid: "first".into(),
                ..Default::default()
            },
        );
        let patch = release_patch(&meta, "owner-uid").unwrap();
        let mut doc = serde_json::to_value(k8s_openapi::api::core::v1::Pod {
            metadata: meta.clone(),
            ..Default::default()
        })
        .unwrap();
        let ops: json_patch::Patch = serde_json::from_value(patch).unwrap();
        json_patch::patch(&mut doc, &ops).unwrap();
        assert_eq!(
            doc["metadata"]["ownerReferences"].as_array().unwrap().len(),
            1
        );
        assert_eq!(doc["metadata"]["ownerReferences"][0]["uid"], "first");
        assert!(release_patch(&meta, "not-an-owner").is_none());
    }

    /// `claim` of the cached `pod` (resourceVersion 7, an orphan) against an API that has `stored`;
    /// the first `failing_patches` patches are refused as a failed `test` would be. Returns the claim
    /// and the requests, as `verb resource name`.
    async fn claim_one(
        stored: Pod,
        failing_patches: usize,
    ) -> (Result<Claimed<Pod>, ClaimError>, Vec<String>) {
        let recorded = RecordedApi::new();
        recorded.insert(&stored);
        if failing_patches > 0 {
            recorded.react_times(failing_patches, Verb::Patch, "pods", Reaction::Invalid);
        }
        let api = TrackedApi::<Pod>::namespaced(
            recorded.client(),
            "pod",
            &ObjectKey::new("ns", "rs"),
            crate::controller::consistency::ConsistencyStore::default(),
        );
        let cached = Pod {
            metadata: child(None),
            ..Default::default()
        };
        let result = claim(
            &api,
            &owner(false),
            vec![Arc::new(cached)],
            |_| true,
            async || Ok(()),
        )
        .await;
        let seen = recorded.requests().iter().map(|r| r.action()).collect();
        (result, seen)
    }

    /// The pod as the API server has it after a change the cache has not shown (resourceVersion 8).
    fn changed(controller: Option<&str>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                resource_version: Some("8".into()),
                ..child(controller)
            },
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn an_orphan_changed_since_the_cache_read_is_read_again_and_adopted() {
        // The first patch's guard (resourceVersion 7) fails against the stored 8.
        let (result, seen) = claim_one(changed(None), 0).await;
        let claimed = result.expect("adopted on the second attempt");
        assert_eq!(claimed.adopted, ["pod"]);
        assert_eq!(claimed.claimed.len(), 1);
        assert_eq!(
            claimed.claimed[0]
                .metadata
                .owner_references
                .as_ref()
                .unwrap()[0]
                .uid,
            "owner-uid"
        );
        assert_eq!(seen, ["patch pods pod", "get pods pod", "patch pods pod"]);
    }

    #[tokio::test]
    async fn an_orphan_adopted_by_another_controller_meanwhile_is_left_alone() {
        let (result, seen) = claim_one(changed(Some("someone-else")), 0).await;
        let claimed = result.expect("not ours: no error, nothing claimed");
        assert!(claimed.adopted.is_empty() && claimed.claimed.is_empty());
        assert_eq!(seen, ["patch pods pod", "get pods pod"]);
    }

    #[tokio::test]
    async fn a_second_failed_adoption_is_an_error_for_the_next_sync() {
        let (result, seen) = claim_one(changed(None), 2).await;
        assert!(matches!(
            result,
            Err(ClaimError::Patch {
                action: "adopting",
                ..
            })
        ));
        assert_eq!(seen.len(), 3, "one retry, not more: {seen:?}");
    }
}
