//! A controller without a server, for the controllers' unit tests: built on caches filled by hand
//! (`cache_insert`, or [`RecordedApi::feed`]) with a client that reaches a [`RecordedApi`], so a test
//! drives its handlers and a whole sync and asserts the API calls it made (upstream's fake clientset);
//! and the keys its handlers queued, to check who was woken.

use std::sync::Arc;

use super::core::built;
use super::{ControllerCore, ControllerOptions, ObjectKey, Reconcile};
use crate::informers::SharedInformers;
use crate::kinds::ApiFamily;
use crate::metrics::ControllerMetrics;
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
