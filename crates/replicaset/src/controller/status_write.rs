//! The status write: only when the computed status differs from the stored one and is not left to the
//! pending sync (`mini_kcm_runtime::api::status_writes`), with one retry on a fresh read (upstream's
//! `updateReplicaSetStatus`).

use k8s_openapi::api::apps::v1::ReplicaSetStatus;
use mini_kcm_runtime::api::kinds::{ReplicaSetObject, StatusWithSelector};
use mini_kcm_runtime::api::tracked_api::TrackedApi;

use crate::status::status_changed;

/// Writes `new` (with `observedGeneration`) through the status subresource, unless nothing changed or
/// `defer` says the pending sync will write a newer one.
/// Uses the cached object's resourceVersion; on failure reads the ReplicaSet fresh and retries once
/// (upstream's `statusUpdateRetries = 1`). Returns the ReplicaSet as stored.
pub(super) async fn update_status(
    api: &TrackedApi<ReplicaSetObject>,
    rs: &ReplicaSetObject,
    mut new: StatusWithSelector<ReplicaSetStatus>,
    defer: impl FnOnce() -> bool,
) -> Result<ReplicaSetObject, kube::Error> {
    if !status_changed(rs, &new) || defer() {
        return Ok(rs.clone());
    }
    new.observed_generation = rs.metadata.generation;
    let name = rs.metadata.name.clone().unwrap_or_default();
    let mut target = rs.clone();
    for attempt in 0..=1 {
        target.status = Some(new.clone());
        tracing::debug!(
            replicas = new.replicas,
            ready = new.ready_replicas,
            available = new.available_replicas,
            "updating status"
        );
        match api.replace_status(&name, &target).await {
            Ok(stored) => return Ok(stored),
            Err(e) if attempt == 0 => {
                tracing::debug!(error = %e, "status update failed; retrying once with a fresh read");
                target = api.get(&name).await?;
            }
            Err(e) => return Err(e),
        }
    }
    unreachable!("the loop returns on its last attempt")
}
