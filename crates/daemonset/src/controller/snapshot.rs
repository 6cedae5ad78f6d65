//! [`Snapshot`]: what one DaemonSet sync read from the caches, shared by its steps (manage, history,
//! pod writes, status).

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use mini_kcm_runtime::controller::ObjectKey;
use mini_kcm_runtime::controller::ownership::OwnerInfo;
use mini_kcm_runtime::pods::cached::CachedPod;

use crate::DaemonSetObject;
use crate::placement::DaemonPlacement;

/// What one sync read from the caches, shared by its steps.
pub(crate) struct Snapshot<'a> {
    pub(crate) key: &'a ObjectKey,
    pub(crate) ds: &'a DaemonSetObject,
    pub(crate) owner: OwnerInfo,
    pub(crate) placement: &'a DaemonPlacement,
    pub(crate) nodes: &'a [Arc<Node>],
    /// Claimed pods by target node, without terminal pods that are being deleted.
    pub(crate) node_to_pods: BTreeMap<String, Vec<&'a CachedPod>>,
    /// The current revision's hash: the label of new pods.
    pub(crate) hash: &'a str,
}
