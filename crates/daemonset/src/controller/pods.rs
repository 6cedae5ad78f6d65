//! Executing a plan: upstream's `syncNodes` — create one pod per node that needs one, delete the pods that
//! must go.
//!
//! The controller never binds a pod: each pod is made from the current template with a required node
//! affinity `matchFields metadata.name In [<node>]` ([`pod_template_for_node`]), and the scheduler binds it.
//! Expectations are set before any call (so the events of our own writes are counted, never mistaken for
//! someone else's), creations go out in slow-start batches (1, 2, 4, …; a batch with a failure ends them, so
//! a namespace out of quota costs one failed request, not 250) and deletions all at once. At most
//! [`BURST_REPLICAS`](crate::BURST_REPLICAS) of each per sync.

use std::sync::atomic::{AtomicUsize, Ordering};

use futures::future::join_all;
use k8s_openapi::api::core::v1::{ObjectReference, PodTemplateSpec};
use mini_kcm_runtime::api::api_errors::is_not_found;
use mini_kcm_runtime::observability::events::object_reference;
use mini_kcm_runtime::pods::control::{PodWriteError, PodWriteErrors};
use mini_kcm_runtime::pods::slow_start::slow_start_batch;

use super::DaemonSetController;
use super::error::SyncError;
use super::snapshot::Snapshot;
use crate::affinity::{create_pod_template, pod_template_for_node};
use crate::update::template_generation;

impl DaemonSetController {
    /// Creates a pod on each of `nodes_needing_pods` and deletes `pods_to_delete` (pod names in the
    /// DaemonSet's namespace), each list capped at the burst. Returns every error, joined.
    ///
    /// upstream: syncNodes
    pub(crate) async fn sync_nodes(
        &self,
        snapshot: &Snapshot<'_>,
        pods_to_delete: &[String],
        nodes_needing_pods: &[String],
    ) -> Result<(), SyncError> {
        let key = snapshot.key;
        let burst = crate::BURST_REPLICAS;
        let create_count = nodes_needing_pods.len().min(burst);
        let delete_count = pods_to_delete.len().min(burst);
        self.expectations
            .set_expectations(key, create_count, delete_count);
        let regarding = object_reference(snapshot.ds, &self.core.resource);
        let mut errors = Vec::new();

        if create_count > 0 {
            // A generation annotation that does not parse is ignored: pods are told apart by the hash.
            let generation = template_generation(snapshot.ds).ok().flatten();
            let template =
                create_pod_template(&snapshot.ds.spec.template, generation, snapshot.hash);
            let attempted = AtomicUsize::new(0);
            let (created, error) =
                slow_start_batch(create_count, self.core.initial_batch_size(), |index| {
                    attempted.fetch_add(1, Ordering::Relaxed);
                    self.create_on_node(snapshot, &template, &nodes_needing_pods[index], &regarding)
                })
                .await;
            // Creations never attempted will never be observed: stop waiting for them. (Failed ones were
            // already subtracted one by one.)
            let skipped = create_count.saturating_sub(attempted.load(Ordering::Relaxed));
            if skipped > 0 {
                self.expectations.lower_expectations(key, skipped, 0);
            }
            if let Some(error) = error {
                tracing::warn!(
                    created,
                    wanted = create_count,
                    skipped,
                    "creating daemon pods failed: {error}"
                );
                errors.push(error);
            }
        }

        let regarding = &regarding;
        let deletions = pods_to_delete[..delete_count]
            .iter()
            .map(|name| async move { self.delete_pod(snapshot, name, regarding).await });
        errors.extend(
            join_all(deletions)
                .await
                .into_iter()
                .filter_map(Result::err),
        );

        if errors.is_empty() {
            Ok(())
        } else {
            Err(PodWriteErrors(errors).into())
        }
    }

    async fn create_on_node(
        &self,
        snapshot: &Snapshot<'_>,
        template: &PodTemplateSpec,
        node_name: &str,
        regarding: &ObjectReference,
    ) -> Result<(), PodWriteError> {
        let pinned = pod_template_for_node(template, node_name);
        match self
            .pod_control
            .create(snapshot.key, &pinned, &snapshot.owner, regarding)
            .await
        {
            Ok(()) => {
                tracing::debug!(node = node_name, "created daemon pod");
                Ok(())
            }
            Err(e) => {
                // This creation will never be observed.
                self.expectations.creation_observed(snapshot.key);
                Err(PodWriteError::Create {
                    node: Some(node_name.to_string()),
                    error: e,
                })
            }
        }
    }

    async fn delete_pod(
        &self,
        snapshot: &Snapshot<'_>,
        name: &str,
        regarding: &ObjectReference,
    ) -> Result<(), PodWriteError> {
        match self
            .pod_control
            .delete(snapshot.key, &snapshot.owner.namespace, name, regarding)
            .await
        {
            Ok(()) => Ok(()),
            Err(e) => {
                // The informer will not observe this deletion: stop waiting for it.
                self.expectations.deletion_observed(snapshot.key);
                if is_not_found(&e) {
                    Ok(())
                } else {
                    Err(PodWriteError::Delete {
                        pod: name.to_string(),
                        error: e,
                    })
                }
            }
        }
    }
}
