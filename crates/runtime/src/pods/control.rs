//! Creating and deleting pods for a controller (upstream's `RealPodControl`), with the same events.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ObjectReference, Pod, PodTemplateSpec};
use kube::Client;
use kube::api::ObjectMeta;

use crate::api::api_errors::{error_message, is_namespace_terminating, is_not_found};
use crate::api::tracked_api::TrackedApi;
use crate::controller::consistency::ConsistencyStore;
use crate::controller::key::ObjectKey;
use crate::controller::ownership::OwnerInfo;
use crate::observability::events::EventRecorder;
use crate::pods::cached::CachedPod;

/// The longest name (and so `generateName` prefix) the API server accepts for a pod.
const MAX_NAME_LENGTH: usize = 253;

/// Why a pod could not be made from a template.
#[derive(Debug, thiserror::Error)]
pub enum PodControlError {
    /// The template has no labels; upstream refuses to create such a pod too.
    #[error("unable to create pods, no labels")]
    NoLabels,
    /// The create request failed: refused by the API server, or not answered.
    #[error(transparent)]
    Api(#[from] kube::Error),
}

impl PodControlError {
    /// The API server refused because the namespace is being deleted: not a controller failure.
    pub(crate) fn is_namespace_terminating(&self) -> bool {
        matches!(self, PodControlError::Api(e) if is_namespace_terminating(e))
    }

    /// The message upstream puts in events and conditions (the API server's own text).
    pub fn message(&self) -> String {
        match self {
            PodControlError::Api(kube::Error::Api(status)) => status.message.clone(),
            other => other.to_string(),
        }
    }
}

/// A pod write of a controller's sync that failed, as its error message and event say it: the API
/// server's message is part of it (several are reported together, see [`PodWriteErrors`]), so the error
/// is not also a source.
#[derive(Debug, thiserror::Error)]
pub enum PodWriteError {
    /// A pod creation failed.
    #[error("creating a pod{}: {}", on_node(.node.as_deref()), .error.message())]
    Create {
        /// The node the pod was pinned to (DaemonSets).
        node: Option<String>,
        /// Why it failed.
        error: PodControlError,
    },
    /// A pod deletion failed.
    #[error("deleting pod {pod}: {}", error_message(.error))]
    Delete {
        /// The pod's name.
        pod: String,
        /// The API error of the delete.
        error: kube::Error,
    },
}

fn on_node(node: Option<&str>) -> String {
    node.map(|n| format!(" on node {n}")).unwrap_or_default()
}

/// Several failed pod writes of one sync, reported together (upstream aggregates them the same way).
#[derive(Debug, thiserror::Error)]
#[error("{}", join(.0))]
pub struct PodWriteErrors(pub Vec<PodWriteError>);

fn join(errors: &[PodWriteError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// Creates and deletes pods on behalf of one controller, with an event on the owner for each; the writes
/// go through a [`TrackedApi`], which records them for the owner's next sync. Expectations stay with the caller: they are counted
/// before the writes go out, and each controller keeps its own kind of them.
#[derive(Clone)]
pub struct PodControl {
    client: Client,
    recorder: EventRecorder,
    consistency: ConsistencyStore,
}

impl PodControl {
    /// Pod writes through `client` (the controller's own), each with an event through `recorder` and
    /// recorded in `consistency` for read-your-own-writes.
    pub fn new(client: Client, recorder: EventRecorder, consistency: ConsistencyStore) -> Self {
        PodControl {
            client,
            recorder,
            consistency,
        }
    }

    /// Creates a pod from `template`, controlled by `owner` (whose key is `owner_key`). Events:
    /// `SuccessfulCreate` / `FailedCreate`. A namespace being deleted refuses every creation: that is
    /// not a failure (`Ok`, no event), as upstream.
    pub async fn create(
        &self,
        owner_key: &ObjectKey,
        template: &PodTemplateSpec,
        owner: &OwnerInfo,
        regarding: &ObjectReference,
    ) -> Result<(), PodControlError> {
        let result = async {
            let pod = pod_from_template(template, owner)?;
            // The answer is decoded as the pod cache keeps pods (`CachedPod`): only its metadata is
            // read, and decoding the whole pod would cost a pod watch event's work again.
            Ok::<_, PodControlError>(self.api(owner_key).create(&pod).await?)
        }
        .await;
        match &result {
            Ok(pod) => self.recorder.normal(
                regarding,
                Some(pod_reference(pod)),
                "SuccessfulCreate",
                "Create",
                format!(
                    "Created pod: {}",
                    pod.metadata.name.as_deref().unwrap_or_default()
                ),
            ),
            Err(e) if e.is_namespace_terminating() => {}
            Err(e) => self.recorder.warning(
                regarding,
                None,
                "FailedCreate",
                "Create",
                format!("Error creating: {}", e.message()),
            ),
        }
        match result {
            Ok(_) => Ok(()),
            Err(e) if e.is_namespace_terminating() => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Deletes a pod (default grace period) of the owner with `owner_key`. Events: `SuccessfulDelete` /
    /// `FailedDelete` (none for NotFound, which callers treat as done once they stopped expecting the
    /// deletion).
    pub async fn delete(
        &self,
        owner_key: &ObjectKey,
        namespace: &str,
        name: &str,
        regarding: &ObjectReference,
    ) -> Result<(), kube::Error> {
        let result = self.api(owner_key).delete(name).await;
        match &result {
            Ok(_) => self.recorder.normal(
                regarding,
                Some(named_pod_reference(namespace, name)),
                "SuccessfulDelete",
                "Delete",
                format!("Deleted pod: {name}"),
            ),
            Err(e) if is_not_found(e) => {}
            Err(e) => self.recorder.warning(
                regarding,
                Some(named_pod_reference(namespace, name)),
                "FailedDelete",
                "Delete",
                format!("Error deleting: {}", error_message(e)),
            ),
        }
        result.map(|_| ())
    }

    /// Pods in the owner's namespace, written for the owner (module `crate::api::tracked_api`).
    fn api(&self, owner_key: &ObjectKey) -> TrackedApi<CachedPod> {
        TrackedApi::namespaced(
            self.client.clone(),
            "pod",
            owner_key,
            self.consistency.clone(),
        )
    }
}

fn pod_reference(pod: &CachedPod) -> ObjectReference {
    ObjectReference {
        uid: pod.metadata.uid.clone(),
        ..named_pod_reference(
            pod.metadata.namespace.as_deref().unwrap_or_default(),
            pod.metadata.name.as_deref().unwrap_or_default(),
        )
    }
}

fn named_pod_reference(namespace: &str, name: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        namespace: Some(namespace.into()),
        name: Some(name.into()),
        ..Default::default()
    }
}

/// The pod a controller creates from its template: template labels, annotations, finalizers and spec,
/// `generateName: <owner>-`, and the owner's controller reference.
pub(crate) fn pod_from_template(
    template: &PodTemplateSpec,
    owner: &OwnerInfo,
) -> Result<Pod, PodControlError> {
    let template_meta = template.metadata.clone().unwrap_or_default();
    let labels: BTreeMap<String, String> = template_meta.labels.unwrap_or_default();
    if labels.is_empty() {
        return Err(PodControlError::NoLabels);
    }
    Ok(Pod {
        metadata: ObjectMeta {
            generate_name: Some(generate_name_prefix(&owner.name)),
            namespace: Some(owner.namespace.clone()),
            labels: Some(labels),
            annotations: template_meta.annotations,
            finalizers: template_meta.finalizers,
            owner_references: Some(vec![owner.controller_reference()]),
            ..Default::default()
        },
        spec: template.spec.clone(),
        status: None,
    })
}

/// `<owner>-`, unless that is too long to be a valid name prefix, then the owner name itself.
pub(crate) fn generate_name_prefix(owner_name: &str) -> String {
    let prefix = format!("{owner_name}-");
    if prefix.len() > MAX_NAME_LENGTH {
        owner_name.to_string()
    } else {
        prefix
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Container, PodSpec};

    fn owner(name: &str) -> OwnerInfo {
        OwnerInfo {
            api_version: "minikcm.dev/v1".into(),
            kind: "ReplicaSet".into(),
            name: name.into(),
            namespace: "ns".into(),
            uid: "uid-1".into(),
            deleting: false,
        }
    }

    fn template(labels: &[(&str, &str)]) -> PodTemplateSpec {
        PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                annotations: Some(BTreeMap::from([("a".to_string(), "b".to_string())])),
                name: Some("ignored".into()),
                ..Default::default()
            }),
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "c".into(),
                    image: Some("img".into()),
                    ..Default::default()
                }],
                ..Default::default()
            }),
        }
    }

    /// Mirrors upstream's TestCreatePodsWithGenerateName.
    #[test]
    fn pods_get_generate_name_labels_and_a_controller_reference() {
        let pod = pod_from_template(&template(&[("app", "web")]), &owner("web-123")).unwrap();
        assert_eq!(pod.metadata.generate_name.as_deref(), Some("web-123-"));
        assert_eq!(pod.metadata.name, None);
        assert_eq!(pod.metadata.labels.unwrap()["app"], "web");
        assert_eq!(pod.metadata.annotations.unwrap()["a"], "b");
        let refs = pod.metadata.owner_references.unwrap();
        assert_eq!(refs.len(), 1);
        assert_eq!(refs[0].controller, Some(true));
        assert_eq!(refs[0].block_owner_deletion, Some(true));
        assert_eq!(refs[0].api_version, "minikcm.dev/v1");
        assert!(pod.spec.is_some());
    }

    #[test]
    fn pods_without_labels_are_refused() {
        let err = pod_from_template(&template(&[]), &owner("x")).unwrap_err();
        assert_eq!(err.to_string(), "unable to create pods, no labels");
    }

    #[test]
    fn overlong_owner_names_are_used_as_the_prefix() {
        let long = "a".repeat(253);
        assert_eq!(generate_name_prefix(&long), long);
        assert_eq!(generate_name_prefix("short"), "short-");
    }
}
