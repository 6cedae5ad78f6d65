//! Builders for the unit tests, shaped like upstream's test helpers (`newDeployment`, `rs`, ...).

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{
    DeploymentSpec, DeploymentStrategy, ReplicaSetSpec, ReplicaSetStatus, RollingUpdateDeployment,
};
use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, OwnerReference, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;
use kube::api::ObjectMeta;
use mini_kcm_runtime::api::kinds::{ApiFamily, WorkloadKind};
use mini_kcm_runtime::controller::offline::{flushed_events, offline_controller, stored, sync};
use mini_kcm_runtime::controller::{ObjectKey, Requeue, SyncKeyError};
use mini_kcm_runtime::pods::cached::CachedPod;
use mini_kcm_runtime::recorded_api::RecordedApi;

use crate::controller::{DeploymentController, SyncError};
use crate::{DeploymentObject, ReplicaSetObject};

pub(crate) fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

/// Upstream's `newDeployment`: RollingUpdate with integer maxSurge / maxUnavailable, one container.
pub(crate) fn deployment(
    name: &str,
    replicas: i32,
    max_surge: i32,
    max_unavailable: i32,
) -> DeploymentObject {
    deployment_with(
        name,
        replicas,
        Some(IntOrString::Int(max_surge)),
        Some(IntOrString::Int(max_unavailable)),
    )
}

pub(crate) fn deployment_with(
    name: &str,
    replicas: i32,
    max_surge: Option<IntOrString>,
    max_unavailable: Option<IntOrString>,
) -> DeploymentObject {
    let labels = BTreeMap::from([("foo".to_string(), "bar".to_string())]);
    DeploymentObject {
        types: None,
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some("default".to_string()),
            uid: Some(format!("uid-{name}")),
            annotations: Some(BTreeMap::new()),
            ..Default::default()
        },
        spec: DeploymentSpec {
            replicas: Some(replicas),
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                ..Default::default()
            },
            strategy: Some(DeploymentStrategy {
                type_: Some("RollingUpdate".to_string()),
                rolling_update: Some(RollingUpdateDeployment {
                    max_surge,
                    max_unavailable,
                }),
            }),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "app".to_string(),
                        image: Some("foo/bar".to_string()),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
            },
            ..Default::default()
        },
        status: None,
    }
}

pub(crate) fn recreate(mut d: DeploymentObject) -> DeploymentObject {
    d.spec.strategy = Some(DeploymentStrategy {
        type_: Some("Recreate".to_string()),
        rolling_update: None,
    });
    d
}

/// Upstream's `rs(name, replicas, nil, noTimestamp)`: no template, no status.
pub(crate) fn rs(name: &str, replicas: i32) -> ReplicaSetObject {
    ReplicaSetObject {
        types: None,
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some("default".to_string()),
            ..Default::default()
        },
        spec: ReplicaSetSpec {
            replicas: Some(replicas),
            ..Default::default()
        },
        status: None,
    }
}

/// `rs` with a creation timestamp.
pub(crate) fn rs_at(name: &str, replicas: i32, created: &str) -> ReplicaSetObject {
    let mut r = rs(name, replicas);
    r.metadata.creation_timestamp = Some(Time(ts(created)));
    r
}

/// Sets status.replicas and status.availableReplicas (ready = available).
pub(crate) fn with_status(
    mut r: ReplicaSetObject,
    replicas: i32,
    available: i32,
) -> ReplicaSetObject {
    r.status = Some(From::from(ReplicaSetStatus {
        replicas,
        ready_replicas: Some(available),
        available_replicas: Some(available),
        ..Default::default()
    }));
    r
}

pub(crate) fn with_available(mut r: ReplicaSetObject, available: i32) -> ReplicaSetObject {
    r.status
        .get_or_insert_with(Default::default)
        .available_replicas = Some(available);
    r
}

pub(crate) fn with_annotations(
    mut r: ReplicaSetObject,
    pairs: &[(&str, &str)],
) -> ReplicaSetObject {
    let a = r.metadata.annotations.get_or_insert_with(BTreeMap::new);
    for (k, v) in pairs {
        a.insert(k.to_string(), v.to_string());
    }
    r
}

pub(crate) fn with_uid(mut r: ReplicaSetObject, uid: &str) -> ReplicaSetObject {
    r.metadata.uid = Some(uid.to_string());
    r
}

/// A ReplicaSet carrying the Deployment's template (optionally with a hash label).
pub(crate) fn rs_for(
    d: &DeploymentObject,
    name: &str,
    replicas: i32,
    hash: Option<&str>,
) -> ReplicaSetObject {
    let mut template = d.spec.template.clone();
    if let Some(h) = hash {
        template
            .metadata
            .get_or_insert_with(Default::default)
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(crate::POD_TEMPLATE_HASH_LABEL.to_string(), h.to_string());
    }
    let mut r = with_uid(rs(name, replicas), &format!("uid-{name}"));
    r.spec.template = Some(template);
    r
}

// ---- controller tests: the controller on a recorded API ----

/// The Deployment kind of `apps/v1`, as the recorded API stores it.
pub(crate) fn deployments() -> kube::discovery::ApiResource {
    WorkloadKind::Deployment.api_resource(ApiFamily::Apps)
}

/// The ReplicaSet kind of `apps/v1`, as the recorded API stores it.
pub(crate) fn replica_sets() -> kube::discovery::ApiResource {
    WorkloadKind::ReplicaSet.api_resource(ApiFamily::Apps)
}

/// A Deployment controller (`apps/v1`) on caches filled by the test and a recorded API, as upstream's
/// `fixture` with its fake clientset.
pub(crate) struct Fixture {
    pub(crate) api: RecordedApi,
    pub(crate) c: Arc<DeploymentController>,
}

impl Fixture {
    pub(crate) fn new() -> Self {
        let api = RecordedApi::new();
        let c = offline_controller(&api);
        Fixture { api, c }
    }

    /// `d` in the API and the Deployment cache; returns the stored copy.
    pub(crate) fn add_deployment(&self, d: &DeploymentObject) -> DeploymentObject {
        stored(
            &self.api,
            d,
            &deployments(),
            &self.c.core.objects,
            &deployments(),
        )
    }

    /// `rs` in the API and the ReplicaSet cache; returns the stored copy.
    pub(crate) fn add_replica_set(&self, rs: &ReplicaSetObject) -> ReplicaSetObject {
        stored(
            &self.api,
            rs,
            &replica_sets(),
            &self.c.replica_sets,
            &replica_sets(),
        )
    }

    /// A pod in the cache only: the Deployment controller never writes pods.
    pub(crate) fn add_pod(&self, pod: CachedPod) {
        self.c.pods.cache_insert(pod);
    }

    /// One sync of `default/<name>`, prologue included.
    pub(crate) async fn sync(&self, name: &str) -> Result<Requeue, SyncKeyError<SyncError>> {
        sync(self.c.as_ref(), &ObjectKey::new("default", name)).await
    }

    /// [`Fixture::sync`], which must succeed (`what` says why it should); its requeue is not checked.
    pub(crate) async fn run(&self, name: &str, what: &str) {
        if let Err(e) = self.sync(name).await {
            panic!("{what}: the sync of {name} failed: {e:?}");
        }
    }

    /// The Deployment cache catches up with the API, as its watch would.
    pub(crate) fn feed_deployments(&self) {
        self.api.feed(&self.c.core.objects, &deployments());
    }

    /// The ReplicaSet cache catches up with the API (creations, updates and deletions).
    pub(crate) fn feed_replica_sets(&self) {
        self.api.feed(&self.c.replica_sets, &replica_sets());
    }

    /// The Deployment as the API has it now.
    pub(crate) fn stored_deployment(&self, name: &str) -> Option<DeploymentObject> {
        self.api.get(&deployments(), "default", name)
    }

    /// The ReplicaSet as the API has it now.
    pub(crate) fn stored_replica_set(&self, name: &str) -> Option<ReplicaSetObject> {
        self.api.get(&replica_sets(), "default", name)
    }

    /// Every request but the event recorder's (reads included), as `verb resource name`.
    pub(crate) fn calls(&self) -> Vec<String> {
        self.api.calls()
    }

    /// The writes' bodies of `verb resource` on `name`, in order (e.g. every update of one ReplicaSet).
    pub(crate) fn bodies(&self, action: &str) -> Vec<serde_json::Value> {
        self.api
            .writes()
            .into_iter()
            .filter(|r| r.action() == action)
            .filter_map(|r| r.body)
            .collect()
    }

    /// The reasons of the events written, once the recorder has written all it was given.
    pub(crate) async fn events(&self) -> Vec<String> {
        flushed_events(&self.api, &self.c.core.recorder).await
    }
}

/// The controller reference `d` puts on its ReplicaSets.
pub(crate) fn controller_ref(d: &DeploymentObject) -> OwnerReference {
    mini_kcm_fixtures::controller_ref(
        "Deployment",
        d.metadata.name.as_deref().unwrap_or_default(),
        d.metadata.uid.as_deref().unwrap_or_default(),
    )
}

/// A ReplicaSet of `d` as the controller would have created it: `d`'s template with a
/// `pod-template-hash` label (in its labels and selector too), controlled by `d`, the given revision.
pub(crate) fn new_rs(
    d: &DeploymentObject,
    name: &str,
    replicas: i32,
    revision: i64,
) -> ReplicaSetObject {
    let mut r = rs_for(d, name, replicas, Some(&format!("h-{name}")));
    let labels = r
        .spec
        .template
        .as_ref()
        .and_then(|t| t.metadata.as_ref())
        .and_then(|m| m.labels.clone());
    r.metadata.labels = labels.clone();
    r.spec.selector = LabelSelector {
        match_labels: labels,
        ..Default::default()
    };
    r.metadata.owner_references = Some(vec![controller_ref(d)]);
    with_annotations(
        r,
        &[(crate::REVISION_ANNOTATION, revision.to_string().as_str())],
    )
}

/// [`new_rs`] of an earlier template of `d` (its image tagged with the ReplicaSet's name): an old
/// ReplicaSet.
pub(crate) fn old_rs(
    d: &DeploymentObject,
    name: &str,
    replicas: i32,
    revision: i64,
) -> ReplicaSetObject {
    let mut earlier = d.clone();
    if let Some(spec) = earlier.spec.template.spec.as_mut() {
        spec.containers[0].image = Some(format!("foo/bar:{name}"));
    }
    new_rs(&earlier, name, replicas, revision)
}

/// The Deployment's revision annotation set to `revision`.
pub(crate) fn at_revision(mut d: DeploymentObject, revision: i64) -> DeploymentObject {
    d.metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(crate::REVISION_ANNOTATION.to_string(), revision.to_string());
    d
}
