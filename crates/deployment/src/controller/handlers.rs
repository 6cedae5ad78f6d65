//! Informer events → Deployment keys (upstream's add/update/delete handlers of deployments, ReplicaSets
//! and pods).

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use mini_kcm_runtime::informers::Change;
use mini_kcm_runtime::kinds::{DeploymentObject, ReplicaSetObject, controller_ref};
use mini_kcm_runtime::selector::Selector;

use super::DeploymentController;
use crate::accessors::strategy_type;

impl DeploymentController {
    pub(crate) fn register_handlers(&self) {
        let c = self.clone();
        self.inner
            .deployments
            .add_handler(move |change: &Change<DeploymentObject>| {
                // Every change (spec, status, even deletion) is worth a sync.
                let d = match change {
                    Change::Added(d) | Change::Deleted(d) => d,
                    Change::Updated { new, .. } => new,
                };
                c.enqueue(d);
            });
        let c = self.clone();
        self.inner
            .replica_sets
            .add_handler(move |change: &Change<ReplicaSetObject>| c.on_replica_set(change));
        let c = self.clone();
        self.inner.pods.add_handler(move |change: &Change<Pod>| {
            if let Change::Deleted(pod) = change {
                c.pod_deleted(pod);
            }
        });
    }

    fn on_replica_set(&self, change: &Change<ReplicaSetObject>) {
        match change {
            Change::Added(rs) => {
                if let Some(reference) = controller_ref(&rs.metadata) {
                    if let Some(d) = self.resolve(rs.metadata.namespace.as_deref(), reference) {
                        self.enqueue(&d);
                    }
                    return;
                }
                // An orphan: every Deployment that selects it may adopt it.
                for d in self.deployments_selecting(rs) {
                    self.enqueue(&d);
                }
            }
            Change::Updated { old, new } => {
                if old.metadata.resource_version == new.metadata.resource_version {
                    return;
                }
                let old_ref = controller_ref(&old.metadata);
                let new_ref = controller_ref(&new.metadata);
                if old_ref != new_ref
                    && let Some(d) =
                        old_ref.and_then(|r| self.resolve(old.metadata.namespace.as_deref(), r))
                {
                    self.enqueue(&d);
                }
                if let Some(reference) = new_ref {
                    if let Some(d) = self.resolve(new.metadata.namespace.as_deref(), reference) {
                        self.enqueue(&d);
                    }
                    return;
                }
                if old.metadata.labels != new.metadata.labels || old_ref != new_ref {
                    for d in self.deployments_selecting(new) {
                        self.enqueue(&d);
                    }
                }
            }
            Change::Deleted(rs) => {
                if let Some(d) = controller_ref(&rs.metadata)
                    .and_then(|r| self.resolve(rs.metadata.namespace.as_deref(), r))
                {
                    self.enqueue(&d);
                }
            }
        }
    }

    /// A Recreate rollout waits until no old pod runs: each pod deletion may be the last one.
    fn pod_deleted(&self, pod: &Pod) {
        let Some(rs_ref) = controller_ref(&pod.metadata) else {
            return;
        };
        if rs_ref.kind != self.inner.rs_resource.kind
            || rs_ref.api_version != self.inner.rs_resource.api_version
        {
            return;
        }
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let Some(rs) = self.inner.replica_sets.get(namespace, &rs_ref.name) else {
            return;
        };
        if let Some(d) = controller_ref(&rs.metadata).and_then(|r| self.resolve(Some(namespace), r))
            && strategy_type(&d) == crate::accessors::RECREATE_STRATEGY
        {
            self.enqueue(&d);
        }
    }

    /// The Deployment a controller reference points at, if it is one of ours (kind, group, name, UID).
    fn resolve(
        &self,
        namespace: Option<&str>,
        reference: &OwnerReference,
    ) -> Option<Arc<DeploymentObject>> {
        if reference.kind != self.inner.resource.kind
            || reference.api_version.split('/').next() != Some(self.inner.resource.group.as_str())
        {
            return None;
        }
        let d = self
            .inner
            .deployments
            .get(namespace.unwrap_or_default(), &reference.name)?;
        (d.metadata.uid.as_deref() == Some(reference.uid.as_str())).then_some(d)
    }

    /// Deployments in the ReplicaSet's namespace whose non-empty selector matches its labels.
    fn deployments_selecting(&self, rs: &ReplicaSetObject) -> Vec<Arc<DeploymentObject>> {
        let Some(labels) = rs.metadata.labels.as_ref().filter(|l| !l.is_empty()) else {
            return Vec::new();
        };
        let namespace = rs.metadata.namespace.as_deref().unwrap_or_default();
        self.inner
            .deployments
            .list_namespace(namespace)
            .into_iter()
            .filter(|d| {
                Selector::from_label_selector(&d.spec.selector)
                    .is_ok_and(|s| !s.is_empty() && s.matches(labels))
            })
            .collect()
    }

    pub(crate) fn enqueue(&self, d: &DeploymentObject) {
        self.inner.queue.add(key_of(&d.metadata));
    }
}

pub(crate) fn key_of(meta: &kube::api::ObjectMeta) -> String {
    format!(
        "{}/{}",
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default()
    )
}
