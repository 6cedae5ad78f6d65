//! Objects as the controllers decode them: [`Workload`] for ReplicaSets, Deployments and DaemonSets
//! of either API family, and [`metadata_without_managed_fields`], which their decoding and the pod
//! cache's share.
//!
//! Why not kube's `Object<Spec, Status>` as it is: its `metadata` is k8s-openapi's `ObjectMeta`,
//! whose `managedFields` decode into a `serde_json::Value` tree per entry (a map allocation per node
//! of every field path), on every watch event and every write's response, and the informers dropped
//! them right after. No controller reads them, so `Workload` skips them while decoding: serde passes
//! over their JSON without allocating anything. In the unthrottled rolling update that tree building
//! was about 6 % of mini-kcm's CPU samples (`perf`, docs/performance.md).
//!
//! Writing an object back without `managedFields` keeps the stored ones: the API server only resets
//! them when a request sets them (to an empty list), never when they are absent.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kube::Resource;
use kube::core::{ApiResource, DynamicResourceScope, TypeMeta};
use serde::{Deserialize, Serialize};

/// A workload object of either family: kube's `Object<Spec, Status>` in JSON and in Rust (the same
/// fields, `new`, `Resource`), decoded without `metadata.managedFields`.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct Workload<P, U> {
    /// `apiVersion` and `kind`; a watch event's object has them, a list's items may not.
    #[serde(flatten, default)]
    pub types: Option<TypeMeta>,
    /// `metadata`, decoded without `managedFields`.
    #[serde(default, deserialize_with = "metadata_without_managed_fields")]
    pub metadata: ObjectMeta,
    /// `spec`: the desired state.
    pub spec: P,
    /// `status`: the observed state; `None` when the object has none yet (never serialized then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<U>,
}

impl<P, U> Workload<P, U> {
    /// A new object of the kind `ar` describes, with a name and a spec (kube's `Object::new`).
    pub fn new(name: &str, ar: &ApiResource, spec: P) -> Self {
        Workload {
            types: Some(TypeMeta {
                api_version: ar.api_version.clone(),
                kind: ar.kind.clone(),
            }),
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..ObjectMeta::default()
            },
            spec,
            status: None,
        }
    }
}

/// The kind comes from the `ApiResource` at run time: the same Rust type serves `apps/v1` and the copies.
impl<P, U> Resource for Workload<P, U> {
    type DynamicType = ApiResource;
    type Scope = DynamicResourceScope;

    fn group(dt: &ApiResource) -> Cow<'_, str> {
        Cow::Borrowed(&dt.group)
    }

    fn version(dt: &ApiResource) -> Cow<'_, str> {
        Cow::Borrowed(&dt.version)
    }

    fn kind(dt: &ApiResource) -> Cow<'_, str> {
        Cow::Borrowed(&dt.kind)
    }

    fn plural(dt: &ApiResource) -> Cow<'_, str> {
        Cow::Borrowed(&dt.plural)
    }

    fn api_version(dt: &ApiResource) -> Cow<'_, str> {
        Cow::Borrowed(&dt.api_version)
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// Decodes an `ObjectMeta` without `managedFields` and `selfLink` (which no server sets any more):
/// serde skips their JSON. For `#[serde(deserialize_with = ...)]` on a `metadata` field.
pub(crate) fn metadata_without_managed_fields<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<ObjectMeta, D::Error> {
    MetaProjection::deserialize(deserializer).map(ObjectMeta::from)
}

/// `ObjectMeta`'s fields but those two.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct MetaProjection {
    #[serde(default)]
    annotations: Option<BTreeMap<String, String>>,
    #[serde(default)]
    creation_timestamp: Option<Time>,
    #[serde(default)]
    deletion_grace_period_seconds: Option<i64>,
    #[serde(default)]
    deletion_timestamp: Option<Time>,
    #[serde(default)]
    finalizers: Option<Vec<String>>,
    #[serde(default)]
    generate_name: Option<String>,
    #[serde(default)]
    generation: Option<i64>,
    #[serde(default)]
    labels: Option<BTreeMap<String, String>>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    owner_references: Option<Vec<OwnerReference>>,
    #[serde(default)]
    resource_version: Option<String>,
    #[serde(default)]
    uid: Option<String>,
}

impl From<MetaProjection> for ObjectMeta {
    fn from(m: MetaProjection) -> Self {
        ObjectMeta {
            annotations: m.annotations,
            creation_timestamp: m.creation_timestamp,
            deletion_grace_period_seconds: m.deletion_grace_period_seconds,
            deletion_timestamp: m.deletion_timestamp,
            finalizers: m.finalizers,
            generate_name: m.generate_name,
            generation: m.generation,
            labels: m.labels,
            name: m.name,
            namespace: m.namespace,
            owner_references: m.owner_references,
            resource_version: m.resource_version,
            uid: m.uid,
            managed_fields: None,
            self_link: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::{ReplicaSetSpec, ReplicaSetStatus};
    use serde_json::json;

    use super::*;

    type ReplicaSet = Workload<ReplicaSetSpec, ReplicaSetStatus>;

    fn stored_replica_set() -> serde_json::Value {
        json!({
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {
                "name": "web-1", "namespace": "ns", "uid": "u1", "resourceVersion": "7",
                "generation": 2, "labels": {"app": "web"}, "annotations": {"a": "b"},
                "creationTimestamp": "2026-11-26T10:00:00Z",
                "finalizers": ["f"], "generateName": "web-",
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                                      "uid": "d1", "controller": true}],
                "selfLink": "/apis/apps/v1/namespaces/ns/replicasets/web-1",
                "managedFields": [{"manager": "kube-controller-manager", "operation": "Update",
                                   "fieldsType": "FieldsV1",
                                   "fieldsV1": {"f:status": {"f:replicas": {}}}}]
            },
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}}}},
            "status": {"replicas": 3, "readyReplicas": 1}
        })
    }

    /// Every metadata field but `managedFields` and `selfLink` decodes as k8s-openapi's own decoding
    /// does (fails if the projection forgets a field).
    #[test]
    fn metadata_decodes_whole_but_managed_fields() {
        let ours: ReplicaSet = serde_json::from_value(stored_replica_set()).unwrap();
        let theirs: k8s_openapi::api::apps::v1::ReplicaSet =
            serde_json::from_value(stored_replica_set()).unwrap();
        let mut expected = theirs.metadata;
        assert!(expected.managed_fields.is_some());
        expected.managed_fields = None;
        expected.self_link = None;
        assert_eq!(ours.metadata, expected);
        assert_eq!(ours.spec, theirs.spec);
        assert_eq!(ours.status, theirs.status);
    }

    /// Written as kube's `Object` writes: type fields at the top, no status when there is none.
    #[test]
    fn serializes_like_kubes_object() {
        let ar = ApiResource {
            group: "minikcm.dev".into(),
            version: "v1".into(),
            api_version: "minikcm.dev/v1".into(),
            kind: "ReplicaSet".into(),
            plural: "replicasets".into(),
        };
        let spec = ReplicaSetSpec {
            replicas: Some(2),
            ..ReplicaSetSpec::default()
        };
        let ours = Workload::<ReplicaSetSpec, ReplicaSetStatus>::new("web-1", &ar, spec.clone());
        let kubes = kube::api::Object::<ReplicaSetSpec, ReplicaSetStatus>::new("web-1", &ar, spec);
        assert_eq!(
            serde_json::to_value(&ours).unwrap(),
            serde_json::to_value(&kubes).unwrap()
        );
        assert_eq!(ReplicaSet::plural(&ar), "replicasets");
    }
}
