//! The workload kinds and their two API families.
//!
//! Every controller handles `apps/v1` objects and their CRD copies in `minikcm.dev/v1` with ONE code
//! path: objects are [`Workload<Spec, Status>`](crate::api::object::Workload) (spec and status types from
//! k8s-openapi, identical in both families) and the family only decides the runtime [`ApiResource`].
//! The one difference is `status.selector` of the scalable kinds, which only the copies store: see
//! [`StatusWithSelector`].

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::apps::v1::{
    DaemonSetSpec, DaemonSetStatus, DeploymentSpec, DeploymentStatus, ReplicaSetSpec,
    ReplicaSetStatus,
};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::discovery::ApiResource;
use serde::{Deserialize, Serialize};

use crate::api::object::Workload;
use crate::api::selector::label_selector_string;
use crate::informers::{Indexer, Informer, SharedInformers};
use crate::pods::cached::CachedPod;

/// A ReplicaSet of either family.
pub type ReplicaSetObject = Workload<ReplicaSetSpec, StatusWithSelector<ReplicaSetStatus>>;
/// A Deployment of either family.
pub type DeploymentObject = Workload<DeploymentSpec, StatusWithSelector<DeploymentStatus>>;

/// The status of a scalable kind (ReplicaSet, Deployment): the apps/v1 status plus the copies' extra
/// `status.selector`, the pods' label selector in string form.
///
/// Why it exists: a CRD's scale subresource can only *point* at a string field for its selector
/// (`labelSelectorPath: .status.selector`), while apps/v1 computes it in its scale endpoint. Without it a
/// HorizontalPodAutoscaler on a copy fails (`SelectorRequired`). The controllers write it with every status
/// write, and must *see* the stored value to repair a copy whose status lacks it (written by an older
/// version or by someone else) even when no count changed; k8s-openapi's status types would drop the
/// field on reading and erase it on writing. Hence a wrapper used as the objects' status type, so every
/// read and write carries it, rather than a separate patch: the status stays typed, and the counts read as
/// before through `Deref`. apps/v1 objects never have it: `None` is never serialized, and the controllers
/// compute `None` for them ([`ApiFamily::status_selector`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StatusWithSelector<S> {
    /// The apps/v1 status (counts, conditions, observedGeneration...), at the same level in JSON.
    #[serde(flatten)]
    pub status: S,
    /// `status.selector` of a copy; `None` for apps/v1 and for copies that never got it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
}

impl<S> StatusWithSelector<S> {
    /// Wraps `status` with `selector` as `status.selector`.
    pub fn new(status: S, selector: Option<String>) -> Self {
        Self { status, selector }
    }
}

/// A status without a selector (apps/v1, or a copy's status before the controller adds it).
impl<S> From<S> for StatusWithSelector<S> {
    fn from(status: S) -> Self {
        Self::new(status, None)
    }
}

impl<S> std::ops::Deref for StatusWithSelector<S> {
    type Target = S;
    fn deref(&self) -> &S {
        &self.status
    }
}

impl<S> std::ops::DerefMut for StatusWithSelector<S> {
    fn deref_mut(&mut self) -> &mut S {
        &mut self.status
    }
}
/// A DaemonSet of either family.
pub type DaemonSetObject = Workload<DaemonSetSpec, DaemonSetStatus>;

/// The group of the CRD copies.
pub const COPIES_GROUP: &str = "minikcm.dev";

/// Which API family a controller instance manages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ApiFamily {
    /// The built-in `apps/v1` kinds (as kube-controller-manager).
    Apps,
    /// The CRD copies in `minikcm.dev/v1`, safe to run beside kube-controller-manager.
    Copies,
}

impl ApiFamily {
    /// The API group: `apps` or [`COPIES_GROUP`].
    pub fn group(self) -> &'static str {
        match self {
            ApiFamily::Apps => "apps",
            ApiFamily::Copies => COPIES_GROUP,
        }
    }

    /// The work queue name of `controller` (`replicaset`, `deployment`, `daemonset`): upstream's name for
    /// `apps/v1`, so dashboards built for kube-controller-manager work; `<name>-copies` for the copies.
    pub fn queue_name(self, controller: &str) -> String {
        match self {
            ApiFamily::Apps => controller.to_string(),
            ApiFamily::Copies => format!("{controller}-copies"),
        }
    }

    /// What `status.selector` of a ReplicaSet or Deployment of this family with `selector` should hold: for
    /// the copies, upstream's string form ([`label_selector_string`]), which their scale subresource reports;
    /// for apps/v1 nothing (the field does not exist there). An invalid selector (which the copies' CEL
    /// validation should have rejected) gets none either: the scale subresource then reports no selector,
    /// as apps/v1's refuses one it cannot parse.
    pub fn status_selector(self, selector: &LabelSelector) -> Option<String> {
        match self {
            ApiFamily::Apps => None,
            ApiFamily::Copies => label_selector_string(Some(selector)).ok(),
        }
    }

    /// Short name for logs and metrics labels.
    pub fn label(self) -> &'static str {
        match self {
            ApiFamily::Apps => "apps",
            ApiFamily::Copies => "copies",
        }
    }
}

/// The three workload kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WorkloadKind {
    /// `ReplicaSet`.
    ReplicaSet,
    /// `Deployment`.
    Deployment,
    /// `DaemonSet`.
    DaemonSet,
}

impl WorkloadKind {
    /// The `kind` as the API writes it, e.g. `ReplicaSet`.
    pub fn kind(self) -> &'static str {
        match self {
            WorkloadKind::ReplicaSet => "ReplicaSet",
            WorkloadKind::Deployment => "Deployment",
            WorkloadKind::DaemonSet => "DaemonSet",
        }
    }

    /// The resource name in API paths, e.g. `replicasets`.
    pub fn plural(self) -> &'static str {
        match self {
            WorkloadKind::ReplicaSet => "replicasets",
            WorkloadKind::Deployment => "deployments",
            WorkloadKind::DaemonSet => "daemonsets",
        }
    }

    /// The runtime type information of this kind in `family`.
    pub fn api_resource(self, family: ApiFamily) -> ApiResource {
        let group = family.group();
        ApiResource {
            group: group.to_string(),
            version: "v1".to_string(),
            api_version: format!("{group}/v1"),
            kind: self.kind().to_string(),
            plural: self.plural().to_string(),
        }
    }
}

/// Pods indexed by their controller: the controller's UID for owned pods, `orphan/<namespace>` for pods
/// without a controller. A sync reads its owned pods plus the namespace's orphans, never every pod.
pub const POD_CONTROLLER_INDEX: &str = "pod-controller";
/// Pods indexed by `spec.nodeName` (DaemonSet: pods per node; ReplicaSet: related pods on a node).
pub const POD_NODE_INDEX: &str = "pod-node";
/// Workload objects (ReplicaSets, ControllerRevisions) indexed by their controller's UID, and orphans
/// under `orphan/<namespace>` (so a Deployment claims from its own ReplicaSets plus the orphans).
pub const CONTROLLER_UID_INDEX: &str = "controller-uid";

/// The index value under which a pod's controller files it.
pub(crate) fn pod_controller_index_value(pod: &CachedPod) -> String {
    match controller_uid(&pod.metadata) {
        Some(uid) => uid.to_string(),
        None => orphan_index_value(pod.metadata.namespace.as_deref().unwrap_or_default()),
    }
}

/// The index value of objects in `namespace` without a controller: `orphan/<namespace>` (see
/// [`POD_CONTROLLER_INDEX`] and [`CONTROLLER_UID_INDEX`]).
pub fn orphan_index_value(namespace: &str) -> String {
    format!("orphan/{namespace}")
}

/// The UID of the controller owner reference (`controller: true`), if any.
pub fn controller_uid(meta: &kube::api::ObjectMeta) -> Option<&str> {
    controller_ref(meta).map(|r| r.uid.as_str())
}

/// The controller owner reference (`controller: true`), if any.
pub fn controller_ref(
    meta: &kube::api::ObjectMeta,
) -> Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference> {
    meta.owner_references
        .as_ref()?
        .iter()
        .find(|r| r.controller == Some(true))
}

/// The one shared pod informer, with the indexes every controller uses.
pub fn pod_informer(informers: &SharedInformers) -> Informer<CachedPod> {
    informers.informer::<CachedPod>(&(), || {
        vec![
            Indexer::new(POD_CONTROLLER_INDEX, |p: &CachedPod| {
                vec![pod_controller_index_value(p)]
            }),
            Indexer::new(POD_NODE_INDEX, |p: &CachedPod| {
                p.spec
                    .as_ref()
                    .and_then(|s| s.node_name.clone())
                    .into_iter()
                    .collect()
            }),
        ]
    })
}

/// The one shared informer of a workload kind in a family, indexed by controller UID.
pub fn workload_informer<P, U>(
    informers: &SharedInformers,
    kind: WorkloadKind,
    family: ApiFamily,
) -> Informer<Workload<P, U>>
where
    P: Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + Sync + 'static,
    U: Clone + Default + std::fmt::Debug + serde::de::DeserializeOwned + Send + Sync + 'static,
{
    informers.informer::<Workload<P, U>>(&kind.api_resource(family), || {
        vec![Indexer::new(CONTROLLER_UID_INDEX, |o: &Workload<P, U>| {
            vec![match controller_uid(&o.metadata) {
                Some(uid) => uid.to_string(),
                None => orphan_index_value(o.metadata.namespace.as_deref().unwrap_or_default()),
            }]
        })]
    })
}

/// The one shared ControllerRevision informer (DaemonSet history; always `apps/v1`, whichever family owns
/// the revision), indexed like the workload kinds: by controller UID, orphans under `orphan/<namespace>`.
pub fn controller_revision_informer(informers: &SharedInformers) -> Informer<ControllerRevision> {
    informers.informer::<ControllerRevision>(&(), || {
        vec![Indexer::new(
            CONTROLLER_UID_INDEX,
            |r: &ControllerRevision| {
                vec![match controller_uid(&r.metadata) {
                    Some(uid) => uid.to_string(),
                    None => orphan_index_value(r.metadata.namespace.as_deref().unwrap_or_default()),
                }]
            },
        )]
    })
}

/// The one shared Node informer (cluster-scoped even when the manager watches one namespace).
pub fn node_informer(informers: &SharedInformers) -> Informer<Node> {
    informers.informer::<Node>(&(), Vec::new)
}

/// Owned pods of `owner_uid` plus the orphans of `namespace`: the candidates a controller claims from.
pub fn pods_for_owner(
    pods: &Informer<CachedPod>,
    namespace: &str,
    owner_uid: &str,
) -> Vec<std::sync::Arc<CachedPod>> {
    let mut candidates = pods.by_index(POD_CONTROLLER_INDEX, owner_uid);
    candidates.extend(pods.by_index(POD_CONTROLLER_INDEX, &orphan_index_value(namespace)));
    candidates
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_differ_only_in_group() {
        let apps = WorkloadKind::ReplicaSet.api_resource(ApiFamily::Apps);
        let copies = WorkloadKind::ReplicaSet.api_resource(ApiFamily::Copies);
        assert_eq!(apps.api_version, "apps/v1");
        assert_eq!(copies.api_version, "minikcm.dev/v1");
        assert_eq!(apps.kind, copies.kind);
        assert_eq!(apps.plural, copies.plural);
    }

    #[test]
    fn apps_queues_keep_upstreams_names() {
        assert_eq!(ApiFamily::Apps.queue_name("replicaset"), "replicaset");
        assert_eq!(
            ApiFamily::Copies.queue_name("daemonset"),
            "daemonset-copies"
        );
    }

    #[test]
    fn only_copies_get_a_status_selector() {
        let selector = LabelSelector {
            match_labels: Some([("app".to_string(), "web".to_string())].into()),
            ..Default::default()
        };
        assert_eq!(ApiFamily::Apps.status_selector(&selector), None);
        assert_eq!(
            ApiFamily::Copies.status_selector(&selector).as_deref(),
            Some("app=web")
        );
        let invalid = LabelSelector {
            match_labels: Some([("app".to_string(), "-bad".to_string())].into()),
            ..Default::default()
        };
        assert_eq!(ApiFamily::Copies.status_selector(&invalid), None);
    }

    /// The selector sits beside the apps/v1 fields in JSON, is read back, and is absent when `None`
    /// (an apps/v1 status written by us never has it).
    #[test]
    fn status_with_selector_round_trips_as_flat_json() {
        let json = serde_json::json!({
            "replicas": 3,
            "readyReplicas": 2,
            "observedGeneration": 4,
            "conditions": [{"type": "ReplicaFailure", "status": "True"}],
            "selector": "app=web",
        });
        let status: StatusWithSelector<ReplicaSetStatus> =
            serde_json::from_value(json.clone()).unwrap();
        assert_eq!(status.replicas, 3);
        assert_eq!(status.ready_replicas, Some(2));
        assert_eq!(status.observed_generation, Some(4));
        assert_eq!(status.selector.as_deref(), Some("app=web"));
        assert_eq!(serde_json::to_value(&status).unwrap(), json);

        let apps: StatusWithSelector<DeploymentStatus> =
            serde_json::from_value(serde_json::json!({"replicas": 1, "updatedReplicas": 1}))
                .unwrap();
        assert_eq!(apps.selector, None);
        let written = serde_json::to_value(&apps).unwrap();
        assert_eq!(
            written,
            serde_json::json!({"replicas": 1, "updatedReplicas": 1})
        );

        let mut rs = ReplicaSetObject::new(
            "web",
            &WorkloadKind::ReplicaSet.api_resource(ApiFamily::Copies),
            ReplicaSetSpec::default(),
        );
        rs.status = Some(StatusWithSelector::new(
            ReplicaSetStatus {
                replicas: 1,
                ..Default::default()
            },
            Some("app=web".into()),
        ));
        let object = serde_json::to_value(&rs).unwrap();
        assert_eq!(
            object["status"],
            serde_json::json!({"replicas": 1, "selector": "app=web"})
        );
        let back: ReplicaSetObject = serde_json::from_value(object).unwrap();
        assert_eq!(back.status, rs.status);
    }
}
