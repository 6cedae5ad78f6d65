//! The one way a controller writes: an API of one kind, in one owner's namespace, on the controller's own
//! client, that records every write where the next sync and the decision log need it.
//!
//! A write a sync makes must be remembered twice. Read-your-own-writes (`crate::controller::consistency`) needs the
//! resourceVersion the server gave the written object, under the key of the owner whose sync wrote it,
//! so that owner's next sync waits until the caches show it; a forgotten record lets that sync act on a
//! cache without the write — the double creation or stale status KEP-5647 exists to prevent. And the
//! sync's decision (`crate::observability::decisions`, what `mini-kcm explain` shows) lists each write with its outcome.
//! Upstream wires the first as an `OnWrite` callback into its pod control and calls `WroteAt` by hand for
//! other kinds; here every write of every kind goes through [`TrackedApi`], which does both, so no call
//! site records anything and none can forget to (`tests/architecture` checks that the controller crates
//! build no other API).

use std::fmt::Debug;

use either::Either;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::core::Status;
use kube::{Api, Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::controller::consistency::ConsistencyStore;
use crate::controller::key::ObjectKey;
use crate::observability::decisions;

/// An API of `K` in the owner's namespace whose writes are recorded for that owner (module header).
/// Reads (`get`) go through it too, uncached and unrecorded.
pub struct TrackedApi<K> {
    api: Api<K>,
    client: Client,
    /// The collection's URL, for creations whose body is not a `K` (a trimmed pod, a revision with its
    /// raw data).
    collection: String,
    /// How the decision log names the kind (`pod`, `ReplicaSet`).
    noun: &'static str,
    owner: ObjectKey,
    consistency: ConsistencyStore,
}

impl<K> TrackedApi<K>
where
    K: Resource + Clone + Debug + DeserializeOwned + 'static,
{
    /// Writes of a kind with a static type (`Pod`, `ControllerRevision`) for `owner`, in the owner's
    /// namespace.
    pub(crate) fn namespaced(
        client: Client,
        noun: &'static str,
        owner: &ObjectKey,
        consistency: ConsistencyStore,
    ) -> Self
    where
        K: Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>,
    {
        let api = Api::namespaced(client.clone(), owner.namespace());
        TrackedApi::from_api(api, client, &(), noun, owner, consistency)
    }

    /// Writes of a kind whose type is known at run time (`dt`: either API family), for `owner`, in the
    /// owner's namespace.
    pub(crate) fn namespaced_with(
        client: Client,
        dt: &K::DynamicType,
        noun: &'static str,
        owner: &ObjectKey,
        consistency: ConsistencyStore,
    ) -> Self
    where
        K: Resource<Scope = kube::core::DynamicResourceScope>,
    {
        let api = Api::namespaced_with(client.clone(), owner.namespace(), dt);
        TrackedApi::from_api(api, client, dt, noun, owner, consistency)
    }

    fn from_api(
        api: Api<K>,
        client: Client,
        dt: &K::DynamicType,
        noun: &'static str,
        owner: &ObjectKey,
        consistency: ConsistencyStore,
    ) -> Self {
        TrackedApi {
            api,
            collection: K::url_path(dt, Some(owner.namespace())),
            client,
            noun,
            owner: owner.clone(),
            consistency,
        }
    }

    /// The object as the API server has it now.
    pub async fn get(&self, name: &str) -> Result<K, kube::Error> {
        self.api.get(name).await
    }

    /// [`TrackedApi::get`], `None` if it does not exist.
    pub async fn get_opt(&self, name: &str) -> Result<Option<K>, kube::Error> {
        self.api.get_opt(name).await
    }

    /// Creates an object from `body` (a `K`, or anything serialised as one) and returns it as stored.
    pub async fn create(&self, body: &impl Serialize) -> Result<K, kube::Error> {
        let body = serde_json::to_vec(body).map_err(kube::Error::SerdeError)?;
        self.create_raw(body).await
    }

    /// [`TrackedApi::create`] with the body already serialised (bytes that must reach the server as
    /// they are, such as a ControllerRevision's data).
    pub async fn create_raw(&self, body: Vec<u8>) -> Result<K, kube::Error> {
        let named = name_in(&body);
        let result = async {
            let request = kube::core::Request::new(&self.collection)
                .create(&PostParams::default(), body)
                .map_err(kube::Error::BuildRequest)?;
            self.client.request::<K>(request).await
        }
        .await;
        let name = match &result {
            Ok(created) => created.meta().name.clone().unwrap_or_default(),
            Err(_) => named,
        };
        self.recorded("create", &name, result)
    }

    /// Replaces the object (not its status) with `object`, guarded by the resourceVersion it carries.
    pub async fn replace(&self, name: &str, object: &K) -> Result<K, kube::Error>
    where
        K: Serialize,
    {
        let result = self.api.replace(name, &PostParams::default(), object).await;
        self.recorded("update", name, result)
    }

    /// Replaces the object's status with `object`'s, guarded by the resourceVersion it carries.
    pub async fn replace_status(&self, name: &str, object: &K) -> Result<K, kube::Error>
    where
        K: Serialize,
    {
        let result = self
            .api
            .replace_status(name, &PostParams::default(), object)
            .await;
        self.recorded("update status of", name, result)
    }

    /// Patches the object.
    pub async fn patch<P: Serialize + Debug>(
        &self,
        name: &str,
        patch: &Patch<P>,
    ) -> Result<K, kube::Error> {
        let result = self.api.patch(name, &PatchParams::default(), patch).await;
        self.recorded("patch", name, result)
    }

    /// Deletes the object (default propagation). An object the server returns (still being deleted, or
    /// as it was at its deletion) is recorded: the next sync waits until the caches show the deletion.
    pub async fn delete(&self, name: &str) -> Result<Either<K, Status>, kube::Error> {
        let result = self.api.delete(name, &DeleteParams::default()).await;
        decisions::wrote_api(
            "delete",
            format_args!("{} {name}", self.noun),
            result.as_ref().err(),
        );
        if let Ok(Either::Left(object)) = &result {
            self.consistency.record_write(&self.owner, object);
        }
        result
    }

    /// Notes the write in the decision and, if it succeeded, for read-your-own-writes.
    fn recorded(
        &self,
        verb: &'static str,
        name: &str,
        result: Result<K, kube::Error>,
    ) -> Result<K, kube::Error> {
        decisions::wrote_api(
            verb,
            format_args!("{} {name}", self.noun),
            result.as_ref().err(),
        );
        if let Ok(object) = &result {
            self.consistency.record_write(&self.owner, object);
        }
        result
    }
}

/// The name, or else the `generateName` prefix, of a serialised object (for a failed creation's log).
fn name_in(body: &[u8]) -> String {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(body) else {
        return String::new();
    };
    ["/metadata/name", "/metadata/generateName"]
        .iter()
        .find_map(|pointer| value.pointer(pointer).and_then(|v| v.as_str()))
        .unwrap_or_default()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recorded_api::{Reaction, RecordedApi, Verb};
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    fn config_map(name: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    /// Every successful write, of each verb, holds the owner's sync back until the cache reaches the
    /// written resourceVersion; a failed one does not.
    #[tokio::test]
    async fn every_successful_write_is_recorded_for_the_owner() {
        let recorded = RecordedApi::new();
        let seen = Arc::new(AtomicU64::new(0));
        let consistency = ConsistencyStore::default();
        let cache = seen.clone();
        consistency.track_with::<ConfigMap>(Arc::new(move || cache.load(Ordering::SeqCst)));
        let owner = ObjectKey::new("ns", "owner");
        let api: TrackedApi<ConfigMap> =
            TrackedApi::namespaced(recorded.client(), "ConfigMap", &owner, consistency.clone());

        let created = api.create(&config_map("a")).await.unwrap();
        let mut last = rv(&created);
        for step in ["update", "status", "patch", "delete"] {
            assert!(
                !consistency.is_ready(&owner),
                "{step}: the last write is not seen yet"
            );
            seen.store(last, Ordering::SeqCst);
            assert!(consistency.is_ready(&owner), "{step}: seen");
            last = match step {
                "update" => rv(&api
                    .replace("a", &api.get("a").await.unwrap())
                    .await
                    .unwrap()),
                "status" => rv(&api
                    .replace_status("a", &api.get("a").await.unwrap())
                    .await
                    .unwrap()),
                "patch" => rv(&api
                    .patch("a", &Patch::Merge(serde_json::json!({"data": {"k": "v"}})))
                    .await
                    .unwrap()),
                _ => match api.delete("a").await.unwrap() {
                    Either::Left(object) => rv(&object),
                    Either::Right(_) => unreachable!("the recorded API returns the object"),
                },
            };
        }
        assert!(
            !consistency.is_ready(&owner),
            "the deletion is not seen yet"
        );
        seen.store(last, Ordering::SeqCst);
        assert!(consistency.is_ready(&owner));

        recorded.react(Verb::Create, "configmaps", Reaction::Conflict);
        api.create(&config_map("b")).await.unwrap_err();
        assert!(
            consistency.is_ready(&owner),
            "a failed write records nothing"
        );
        assert_eq!(
            recorded.actions(),
            [
                "create configmaps",
                "update configmaps a",
                "update configmaps/status a",
                "patch configmaps a",
                "delete configmaps a",
                "create configmaps",
            ]
        );
    }

    fn rv(object: &ConfigMap) -> u64 {
        object
            .metadata
            .resource_version
            .as_deref()
            .and_then(|rv| rv.parse().ok())
            .unwrap_or(0)
    }

    #[test]
    fn a_failed_creation_is_named_by_its_prefix() {
        assert_eq!(name_in(br#"{"metadata":{"generateName":"web-"}}"#), "web-");
        assert_eq!(name_in(br#"{"metadata":{"name":"a"}}"#), "a");
        assert_eq!(name_in(b"not json"), "");
    }
}
