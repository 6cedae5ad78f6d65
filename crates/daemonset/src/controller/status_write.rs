//! The status write of a sync (upstream's `updateDaemonSetStatus` / `storeDaemonSetStatus`): counts from
//! [`calculate_status`], written only when they or `observedGeneration` changed, through the status
//! subresource with one retry after a fresh read (or left to the sync an event during this one already
//! queued, see `mini_kcm_runtime::api::status_writes`); then the moment to look again: when the next Ready pod
//! becomes available (any daemon pod, surged ones included), if `minReadySeconds` is set.

use std::time::Instant;

use k8s_openapi::jiff::Timestamp;
use mini_kcm_runtime::api::tracked_api::TrackedApi;

use mini_kcm_runtime::controller::{Requeue, wake};

use super::DaemonSetController;
use super::error::SyncError;
use super::snapshot::Snapshot;
use crate::DaemonSetObject;
use crate::status::{StatusCounts, calculate_status, status_to_store};

/// Upstream's `StatusUpdateRetries`: one more attempt after a failed write.
const STATUS_UPDATE_RETRIES: usize = 1;

impl DaemonSetController {
    /// Computes the status from the snapshot and writes it if it changed, unless the pending sync will.
    /// `observedGeneration` is raised only with `update_observed_generation` (the sync was allowed to act
    /// on this generation).
    pub(crate) async fn update_status(
        &self,
        snapshot: &Snapshot<'_>,
        ds_api: &TrackedApi<DaemonSetObject>,
        update_observed_generation: bool,
    ) -> Result<Requeue, SyncError> {
        let evaluated = Instant::now();
        let report = calculate_status(
            snapshot.ds,
            snapshot.placement,
            snapshot.nodes,
            &snapshot.node_to_pods,
            snapshot.hash,
            Timestamp::now(),
        );
        let due = status_to_store(snapshot.ds, &report.counts, update_observed_generation);
        if let Some(status) = due.filter(|_| !self.core.status_writes.defer(snapshot.key)) {
            tracing::debug!(counts = ?report.counts, "updating status");
            store_status(
                ds_api,
                snapshot.ds,
                status,
                &report.counts,
                update_observed_generation,
            )
            .await
            .map_err(SyncError::Status)?;
        }
        // Ready pods become available at a known moment: look again then (a surged pod's availability is
        // what lets the rolling update delete the old one), or after upstream's minReadySeconds fallback.
        let next = match (report.next_availability, report.requeue_after) {
            (Some(next), Some(fallback)) => Some(next.min(fallback)),
            (next, fallback) => next.or(fallback),
        };
        Ok(Requeue::after(
            next.map(|delay| delay.saturating_sub(evaluated.elapsed())),
            wake::POD_BECOMES_AVAILABLE,
        ))
    }
}

/// PUTs `status` on the cached DaemonSet; if that fails, reads the DaemonSet fresh, applies the counts
/// to its status and tries once more. Returns the DaemonSet as stored.
async fn store_status(
    api: &TrackedApi<DaemonSetObject>,
    ds: &DaemonSetObject,
    status: k8s_openapi::api::apps::v1::DaemonSetStatus,
    counts: &StatusCounts,
    update_observed_generation: bool,
) -> Result<DaemonSetObject, kube::Error> {
    let name = ds.metadata.name.clone().unwrap_or_default();
    let mut target = ds.clone();
    target.status = Some(status);
    let mut attempt = 0;
    loop {
        match api.replace_status(&name, &target).await {
            Ok(stored) => return Ok(stored),
            Err(e) if attempt >= STATUS_UPDATE_RETRIES => return Err(e),
            Err(e) => {
                tracing::debug!(error = %e, "status update failed; retrying once with a fresh read");
                attempt += 1;
                let fresh = api.get(&name).await?;
                // The counts go onto the fresh status; the generation they answer is the one this sync read.
                let mut as_read = fresh.clone();
                as_read.metadata.generation = ds.metadata.generation;
                match status_to_store(&as_read, counts, update_observed_generation) {
                    None => return Ok(fresh),
                    Some(status) => {
                        target = fresh;
                        target.status = Some(status);
                    }
                }
            }
        }
    }
}
