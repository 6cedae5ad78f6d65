//! A controller without a server, for the controllers' unit tests: built on caches filled by hand
//! (`cache_insert`) with a client that reaches no server, so a test drives its handlers and syncs and sees
//! every API call it attempts fail; and the keys its handlers queued, to check who was woken.

use std::sync::Arc;

use super::core::built;
use super::{ControllerCore, ControllerOptions, ObjectKey, Reconcile};
use crate::client::unreachable_client;
use crate::informers::SharedInformers;
use crate::kinds::ApiFamily;
use crate::metrics::ControllerMetrics;

/// One instance of `R`, its handlers registered, on caches filled by hand and a client that reaches no
/// server.
///
/// # Panics
/// If the unreachable client cannot be built (a broken TLS set-up): tests only.
pub fn offline_controller<R: Reconcile>() -> Arc<R> {
    offline_controller_with(ControllerOptions::new(ApiFamily::Apps, 1))
}

/// [`offline_controller`] with other options (e.g. a feature gate turned over).
///
/// # Panics
/// If the unreachable client cannot be built (a broken TLS set-up): tests only.
pub fn offline_controller_with<R: Reconcile>(options: ControllerOptions) -> Arc<R> {
    let client = unreachable_client().expect("a client for loopback's discard port");
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
