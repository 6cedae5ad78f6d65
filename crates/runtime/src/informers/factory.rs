//! The registry that makes informers shared: one per (kind, scope).

use std::any::Any;
use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};

use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;

use super::{Indexer, Informer};

/// A kind an informer can watch: knows how to build its `Api` for the whole cluster or one namespace
/// (kube's constructors differ between static and dynamic kinds).
pub trait Watched: Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static {
    fn scoped_api(
        client: Client,
        namespace: Option<&str>,
        dyntype: &Self::DynamicType,
    ) -> Api<Self>;
}

macro_rules! watched_namespaced {
    ($($t:ty),*) => {$(
        impl Watched for $t {
            fn scoped_api(client: Client, namespace: Option<&str>, _: &()) -> Api<Self> {
                match namespace {
                    Some(ns) => Api::namespaced(client, ns),
                    None => Api::all(client),
                }
            }
        }
    )*};
}

watched_namespaced!(
    k8s_openapi::api::core::v1::Pod,
    k8s_openapi::api::apps::v1::ControllerRevision
);

impl Watched for k8s_openapi::api::core::v1::Node {
    fn scoped_api(client: Client, _: Option<&str>, _: &()) -> Api<Self> {
        Api::all(client)
    }
}

impl<P, U> Watched for kube::api::Object<P, U>
where
    P: Clone + Debug + DeserializeOwned + Send + Sync + 'static,
    U: Clone + Default + Debug + DeserializeOwned + Send + Sync + 'static,
{
    fn scoped_api(
        client: Client,
        namespace: Option<&str>,
        dyntype: &kube::discovery::ApiResource,
    ) -> Api<Self> {
        match namespace {
            Some(ns) => Api::namespaced_with(client, ns, dyntype),
            None => Api::all_with(client, dyntype),
        }
    }
}

/// Hands out one [`Informer`] per kind, so every controller asking for the same kind shares one watch and
/// one cache. Scope is the whole cluster, or one namespace (`--namespace`).
#[derive(Clone)]
pub struct SharedInformers {
    client: Client,
    namespace: Option<String>,
    informers: Arc<Mutex<HashMap<String, Box<dyn Any + Send + Sync>>>>,
    /// Watches of informers created since the last `start`.
    pending: Arc<Mutex<Vec<Pending>>>,
    /// The running watches; aborted when the last handle of this factory is dropped, so a stopped
    /// manager leaves no watch behind.
    running: Arc<Mutex<tokio::task::JoinSet<()>>>,
}

/// An informer not yet running: its watch future and a way to wait for its first list.
struct Pending {
    kind: String,
    run: futures::future::BoxFuture<'static, ()>,
    synced: futures::future::BoxFuture<'static, ()>,
}

impl SharedInformers {
    pub fn new(client: Client, namespace: Option<String>) -> Self {
        SharedInformers {
            client,
            namespace,
            informers: Arc::default(),
            pending: Arc::default(),
            running: Arc::default(),
        }
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// The informer for `K` (described by `dyntype`), created on first request with `indexers`. Later
    /// requests return the same informer; their indexers must be a subset of the first request's (the
    /// shared kinds' indexers are declared in one place, see `crate::kinds`).
    pub fn informer<K>(
        &self,
        dyntype: &K::DynamicType,
        indexers: impl FnOnce() -> Vec<Indexer<K>>,
    ) -> Informer<K>
    where
        K: Watched,
    {
        let id = format!("{}/{}", K::api_version(dyntype), K::plural(dyntype));
        let mut informers = self
            .informers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(existing) = informers
            .get(&id)
            .and_then(|b| b.downcast_ref::<Informer<K>>())
        {
            return existing.clone();
        }
        let api = K::scoped_api(self.client.clone(), self.namespace.as_deref(), dyntype);
        let informer = Informer::new(api, K::kind(dyntype).into_owned(), indexers());
        informers.insert(id, Box::new(informer.clone()));
        let synced = informer.clone();
        self.pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(Pending {
                kind: informer.kind().to_string(),
                run: Box::pin(informer.clone().run()),
                synced: Box::pin(async move { synced.wait_for_sync().await }),
            });
        informer
    }

    /// Starts the watch of every informer created so far (call after all controllers registered their
    /// handlers) and waits until each has its first full list in the cache.
    pub async fn start(&self) {
        let pending: Vec<Pending> = std::mem::take(
            &mut *self
                .pending
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        let mut synced = Vec::new();
        {
            let mut running = self
                .running
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            for p in pending {
                tracing::debug!(kind = %p.kind, "starting informer");
                running.spawn(p.run);
                synced.push(p.synced);
            }
        }
        futures::future::join_all(synced).await;
    }
}
