//! A controller without a server, for the controllers' unit tests: built on caches filled by hand
//! (`cache_insert`, or [`RecordedApi::feed`]) with a client that reaches a [`RecordedApi`], so a test
//! drives its handlers and a whole sync and asserts the API calls it made (upstream's fake clientset);
//! and the keys its handlers queued, to check who was woken.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Resource;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::core::{built, sync_key};
use super::{ControllerCore, ControllerOptions, ObjectKey, Reconcile, Requeue, SyncKeyError};
use crate::api::kinds::ApiFamily;
use crate::informers::{Informer, SharedInformers};
use crate::observability::events::EventRecorder;
use crate::observability::metrics::ControllerMetrics;
use crate::recorded_api::RecordedApi;

/// One instance of `R` (`apps/v1`, one worker), its handlers registered, on caches filled by hand and a
/// client whose requests `api` answers and records.
pub fn offline_controller<R: Reconcile>(api: &RecordedApi) -> Arc<R> {
    offline_controller_with(api, ControllerOptions::new(ApiFamily::Apps, 1))
}

/// [`offline_controller`] with other options (the other API family, a feature gate turned over).
pub fn offline_controller_with<R: Reconcile>(
    api: &RecordedApi,
    options: ControllerOptions,
) -> Arc<R> {
    let client = api.client();
    let informers = SharedInformers::new(client.clone(), None);
    built(
        &informers,
        client,
        options,
        ControllerMetrics::unregistered(),
    )
}

/// One sync of `key`, prologue included, as a worker runs it. The future is put on the heap: a whole
/// sync's is large for a test thread's stack in a debug build.
pub async fn sync<R: Reconcile>(
    controller: &R,
    key: &ObjectKey,
) -> Result<Requeue, SyncKeyError<R::Error>> {
    Box::pin(sync_key(controller, key)).await
}

/// Stores `object` (of type `dt`) in `api` and puts the stored copy, read back as the cache keeps it
/// (`C`: the same kind, or its cached view such as `CachedPod` for a `Pod`), into `cache`, as the
/// watch would deliver it; returns that copy. The cache and the API then agree on UIDs and
/// resourceVersions, so a write guarded by the cached resourceVersion succeeds.
///
/// # Panics
/// If the API does not return what it was given as a `C` (a test's mistake).
pub fn stored<K, C>(
    api: &RecordedApi,
    object: &K,
    dt: &K::DynamicType,
    cache: &Informer<C>,
    cache_dt: &C::DynamicType,
) -> C
where
    K: Resource + Serialize,
    C: Resource + Clone + std::fmt::Debug + DeserializeOwned + Send + Sync + 'static,
{
    api.insert_with(object, dt);
    let meta = object.meta();
    let copy: C = api
        .get(
            cache_dt,
            meta.namespace.as_deref().unwrap_or_default(),
            meta.name.as_deref().unwrap_or_default(),
        )
        .expect("the recorded API returns what it was given");
    cache.cache_insert(copy.clone());
    copy
}

/// The reason of the marker event [`flushed_events`] records.
const FLUSHED: &str = "TestEventsFlushed";

/// The reasons of the events `api` has received (since its requests were last cleared), once
/// `recorder` has written everything it was given: it writes in the background and in order, so a
/// marker event recorded last (about an object of its own, which no aggregation touches) is awaited,
/// with a bounded number of yields.
///
/// # Panics
/// If the recorder does not write the marker within the bound.
pub async fn flushed_events(api: &RecordedApi, recorder: &EventRecorder) -> Vec<String> {
    static MARKERS: AtomicUsize = AtomicUsize::new(0);
    let marker = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("ConfigMap".into()),
        namespace: Some("default".into()),
        name: Some(format!(
            "events-flushed-{}",
            MARKERS.fetch_add(1, Ordering::Relaxed)
        )),
        uid: Some("events-flushed".into()),
        ..Default::default()
    };
    let markers = |api: &RecordedApi| api.events().iter().filter(|r| *r == FLUSHED).count();
    let before = markers(api);
    recorder.normal(&marker, None, FLUSHED, "Test", "flushed".into());
    let mut flushed = false;
    for _ in 0..100_000 {
        if markers(api) > before {
            flushed = true;
            break;
        }
        tokio::task::yield_now().await;
    }
    assert!(flushed, "the event recorder did not write its events");
    api.events().into_iter().filter(|r| r != FLUSHED).collect()
}

/// Every key queued so far, as `namespace/name`, sorted; the queue is left empty.
pub async fn drain_queue<K: kube::Resource>(core: &ControllerCore<K>) -> Vec<String> {
    let mut keys = Vec::new();
    while !core.queue.is_empty() {
        let Some(key) = core.queue.get().await else {
            break;
        };
        core.queue.done(&key);
        keys.push(key.to_string());
    }
    keys.sort();
    keys
}

/// A key from upstream's `namespace/name` spelling (a name alone: the empty namespace).
pub fn key(key: &str) -> ObjectKey {
    let (namespace, name) = key.split_once('/').unwrap_or(("", key));
    ObjectKey::new(namespace, name)
}
