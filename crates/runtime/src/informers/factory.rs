//! The registry that makes informers shared: one per (kind, scope).

use std::any::Any;
use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;

use crate::pods::cached::CachedPod;

use super::backoff::{RetryBudget, WatchBackoff, with_watch_backoff};
use super::content_type::{ContentType, WireFormat, json_after_a_refusal};
use super::list_mode::{ListMode, consistent_stream_client, list_and_watch};
use super::protobuf_watch::{ProtobufDecoding, protobuf_decoding};
use super::watch_delay::delayed;
use super::{Indexer, Informer};
use crate::observability::inspect::InformerView;

/// A kind an informer can watch: how to build its `Api` for the whole cluster or one namespace (kube's
/// constructors differ between static and dynamic kinds), what the cache keeps of an object, and
/// whether it can be read in protobuf. The watch decodes the kind itself: pods are watched as
/// `CachedPod`, whose decoding reads only the fields the controllers read (`crate::pods::cached`), in
/// JSON or protobuf alike (`crate::protobuf`).
pub trait Watched: Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static {
    /// The kind's API in `namespace`, or across the whole cluster with `None` (cluster-scoped kinds
    /// ignore `namespace`).
    fn scoped_api(
        client: Client,
        namespace: Option<&str>,
        dyntype: &Self::DynamicType,
    ) -> Api<Self>;

    /// What the cache keeps of a decoded object (from the watch, or put in the cache by hand). By
    /// default all of it but `managedFields`, which are large and which no controller reads.
    fn cached(mut self) -> Self {
        self.meta_mut().managed_fields = None;
        self
    }

    /// How to list and watch the kind in protobuf (`crate::protobuf`), for the kinds that have a protobuf
    /// decoding; by default none: JSON only.
    fn protobuf() -> Option<ProtobufDecoding<Self>> {
        None
    }
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

watched_namespaced!(k8s_openapi::api::apps::v1::ControllerRevision);

impl Watched for CachedPod {
    fn scoped_api(client: Client, namespace: Option<&str>, _: &()) -> Api<Self> {
        match namespace {
            Some(ns) => Api::namespaced(client, ns),
            None => Api::all(client),
        }
    }

    fn cached(self) -> Self {
        self.trimmed()
    }

    fn protobuf() -> Option<ProtobufDecoding<Self>> {
        Some(protobuf_decoding())
    }
}

impl Watched for k8s_openapi::api::core::v1::Node {
    fn scoped_api(client: Client, _: Option<&str>, _: &()) -> Api<Self> {
        Api::all(client)
    }

    /// Metadata, taints and `unschedulable`: what a DaemonSet's placement reads (the same as the
    /// protobuf decoding keeps; the status, with its heartbeats and images, is not kept).
    fn cached(self) -> Self {
        crate::protobuf::messages::cached_node(self)
    }

    fn protobuf() -> Option<ProtobufDecoding<Self>> {
        Some(protobuf_decoding())
    }
}

impl<P, U> Watched for crate::api::object::Workload<P, U>
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
    /// `client`, asking for streamed lists as consistent reads (`list_mode`).
    stream_client: Client,
    namespace: Option<String>,
    /// The resync period of every informer of this factory (`None`: no resync).
    resync_period: Option<Duration>,
    /// Streamed lists first (`with_streamed_lists`).
    streamed_lists: bool,
    /// Protobuf for the kinds that have it, or JSON for all (`with_content_type`).
    content_type: ContentType,
    /// How late every watch event reaches the caches (`with_watch_delay`; zero but for learners).
    watch_delay: Duration,
    informers: Arc<Mutex<HashMap<String, Box<dyn Any + Send + Sync>>>>,
    /// How to view each informer (`crate::observability::inspect`), in creation order.
    views: Arc<Mutex<Vec<InformerViewFn>>>,
    /// Watches of informers created since the last `start`.
    pending: Arc<Mutex<Vec<Pending>>>,
    /// Per informer (`apiVersion/plural`), how to hand it an event in JSON (`SharedInformers::deliver`).
    #[cfg(feature = "testing")]
    deliverers: Arc<Mutex<HashMap<String, Deliverer>>>,
    /// Per informer, how to forget its handlers (`SharedInformers::clear_handlers`).
    #[cfg(feature = "testing")]
    clearers: Arc<Mutex<Vec<HandlerClearer>>>,
    /// The running watches; aborted when the last handle of this factory is dropped, so a stopped
    /// manager leaves no watch behind.
    running: Arc<Mutex<tokio::task::JoinSet<()>>>,
}

type InformerViewFn = Box<dyn Fn() -> InformerView + Send + Sync>;

/// Hands an informer one event; returns how many of its objects did not decode as the informer's kind.
#[cfg(feature = "testing")]
type Deliverer = Arc<dyn Fn(SimulatedEvent) -> usize + Send + Sync>;

/// Forgets an informer's handlers (`SharedInformers::clear_handlers`).
#[cfg(feature = "testing")]
type HandlerClearer = Box<dyn Fn() + Send + Sync>;

/// A watch event in JSON, for a simulation that decides when each informer sees what
/// ([`SharedInformers::deliver`]).
#[cfg(feature = "testing")]
#[derive(Debug, Clone)]
pub enum SimulatedEvent {
    /// A created or changed object (`ADDED`, `MODIFIED`).
    Apply(serde_json::Value),
    /// A deleted object, as it was at its deletion (`DELETED`).
    Delete(serde_json::Value),
    /// A full list (the first, or after the watch restarted).
    List(Vec<serde_json::Value>),
}

/// An informer not yet running: its watch future and a way to wait for its first list.
struct Pending {
    kind: String,
    run: futures::future::BoxFuture<'static, ()>,
    synced: futures::future::BoxFuture<'static, ()>,
}

impl SharedInformers {
    /// A factory watching through `client` the whole cluster, or only `namespace` (`--namespace`):
    /// no resync, streamed lists, protobuf where the kind has it, no watch delay.
    pub fn new(client: Client, namespace: Option<String>) -> Self {
        SharedInformers {
            stream_client: consistent_stream_client(client.clone()),
            client,
            namespace,
            resync_period: None,
            streamed_lists: true,
            content_type: ContentType::default(),
            watch_delay: Duration::ZERO,
            informers: Arc::default(),
            views: Arc::default(),
            pending: Arc::default(),
            running: Arc::default(),
            #[cfg(feature = "testing")]
            deliverers: Arc::default(),
            #[cfg(feature = "testing")]
            clearers: Arc::default(),
        }
    }

    /// Gives every informer of this factory a periodic resync, jittered as kube-controller-manager does:
    /// one period drawn once per factory, uniformly in `[min, 2 × min)` (its `ResyncPeriod` is called
    /// once per informer factory, so all informers of a factory share the draw). A zero `min` disables
    /// the resync. Call before requesting informers.
    pub fn with_min_resync_period(mut self, min: Duration) -> Self {
        self.resync_period = jittered_resync_period(min, rand::random::<f64>());
        self
    }

    /// Whether informers start with a streamed list (client-go's `WatchListClient` gate, on by
    /// default); off, every informer lists in pages, as against an API server that refuses streams.
    /// Call before requesting informers.
    pub fn with_streamed_lists(mut self, on: bool) -> Self {
        self.streamed_lists = on;
        self
    }

    /// What informers ask for (kube-controller-manager's `--kube-api-content-type`): protobuf (the
    /// default) for the kinds that have a protobuf decoding, or JSON for all (`content_type`). Call
    /// before requesting informers.
    pub fn with_content_type(mut self, content_type: ContentType) -> Self {
        self.content_type = content_type;
        self
    }

    /// Hands every watch event to the caches `delay` after it arrived (`super::watch_delay`): caches that
    /// lag on purpose, for learners (`mini-kcm up --watch-delay`) and tests. Call before requesting
    /// informers.
    pub fn with_watch_delay(mut self, delay: Duration) -> Self {
        self.watch_delay = delay;
        self
    }

    /// The informer for `K` (described by `dyntype`), created on first request with `indexers`. Later
    /// requests return the same informer; their indexers must be a subset of the first request's (the
    /// shared kinds' indexers are declared in one place, see `crate::api::kinds`).
    pub(crate) fn informer<K>(
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
        // Every list is a consistent read, streamed or paged (`list_mode`): served from the API server's
        // watch cache once it has caught up with etcd (KEP-3157/4988), as client-go's relist after a 410
        // is. A list answered at `resourceVersion=0` may come from a lagging cache and show the past,
        // which would turn objects created since then into deletions here.
        let mode = if self.streamed_lists {
            ListMode::default()
        } else {
            ListMode::paged()
        };
        let kind = K::kind(dyntype).into_owned();
        let json = {
            let streaming = K::scoped_api(
                self.stream_client.clone(),
                self.namespace.as_deref(),
                dyntype,
            );
            let paged = K::scoped_api(self.client.clone(), self.namespace.as_deref(), dyntype);
            let (kind, mode) = (kind.clone(), mode.clone());
            move || list_and_watch(streaming, paged, kind, mode)
        };
        // Protobuf where asked for and the kind has it (`content_type`), JSON after a refusal.
        let (events, wire) = match (self.content_type, K::protobuf()) {
            (ContentType::Protobuf, Some(decoding)) => {
                let wire = WireFormat::protobuf();
                let url = K::scoped_api(self.client.clone(), self.namespace.as_deref(), dyntype)
                    .resource_url()
                    .to_string();
                let protobuf =
                    decoding.list_and_watch(self.client.clone(), url, kind.clone(), mode.clone());
                let events = json_after_a_refusal(protobuf, json, kind.clone(), wire.clone());
                (events, wire)
            }
            _ => (json(), WireFormat::json()),
        };
        // The informer makes each decoded object what the cache keeps (`K::cached`). Failed requests are
        // retried within 2 s, and at once after a 410, under the process's retry budget (`backoff`).
        let events = with_watch_backoff(events, WatchBackoff::new(), RetryBudget::process());
        let events = delayed(events, self.watch_delay);
        let informer = Informer::new(
            events,
            kind,
            indexers(),
            self.resync_period,
            K::cached,
            mode,
            wire,
        );
        let viewed = informer.clone();
        let resource = id.clone();
        self.views
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(Box::new(move || viewed.view(&resource)));
        #[cfg(feature = "testing")]
        self.deliverers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(id.clone(), deliverer(informer.clone()));
        #[cfg(feature = "testing")]
        {
            let cleared = informer.clone();
            self.clearers
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(Box::new(move || cleared.clear_handlers()));
        }
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

    /// The resources of every informer created so far, as `apiVersion/plural` (`apps/v1/replicasets`,
    /// `v1/pods`), sorted.
    #[cfg(feature = "testing")]
    pub fn resources(&self) -> Vec<String> {
        let mut resources: Vec<String> = self
            .deliverers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .keys()
            .cloned()
            .collect();
        resources.sort();
        resources
    }

    /// Hands the informer of `resource` (`apiVersion/plural`) one event as its watch would (cache,
    /// then handlers), instead of a watch: for a simulation, which never calls [`SharedInformers::start`].
    /// Returns `None` when no informer watches that resource, else how many of the event's objects
    /// did not decode as the informer's kind (dropped, as a watch drops them: a simulation's own
    /// mistake, which it should report).
    #[cfg(feature = "testing")]
    pub fn deliver(&self, resource: &str, event: SimulatedEvent) -> Option<usize> {
        let deliverer = self
            .deliverers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(resource)
            .cloned();
        deliverer.map(|deliver| deliver(event))
    }

    /// Forgets every informer's handlers, for a simulation done with this process's controllers (their
    /// handlers hold them, and they hold the informers: without this, neither is ever freed).
    #[cfg(feature = "testing")]
    pub fn clear_handlers(&self) {
        for clear in self
            .clearers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
        {
            clear();
        }
    }

    /// Every informer's cache at a glance, in creation order.
    pub fn views(&self) -> Vec<InformerView> {
        self.views
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .map(|view| view())
            .collect()
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

/// How to hand `informer` a [`SimulatedEvent`]: decoded into its kind, then applied as a watch event.
#[cfg(feature = "testing")]
fn deliverer<K: Watched>(informer: Informer<K>) -> Deliverer {
    use kube::runtime::watcher::Event;
    Arc::new(move |event| {
        let failed = std::cell::Cell::new(0);
        let decode = |value: serde_json::Value| {
            let decoded = serde_json::from_value::<K>(value).ok();
            if decoded.is_none() {
                failed.set(failed.get() + 1);
            }
            decoded
        };
        let events: Vec<Event<K>> = match event {
            SimulatedEvent::Apply(value) => decode(value).map(Event::Apply).into_iter().collect(),
            SimulatedEvent::Delete(value) => decode(value).map(Event::Delete).into_iter().collect(),
            SimulatedEvent::List(values) => std::iter::once(Event::Init)
                .chain(values.into_iter().filter_map(decode).map(Event::InitApply))
                .chain(std::iter::once(Event::InitDone))
                .collect(),
        };
        informer.deliver(events);
        failed.get()
    })
}

/// `min × (1 + unit)` for `unit` in `[0, 1)`; `None` for a zero `min`.
fn jittered_resync_period(min: Duration, unit: f64) -> Option<Duration> {
    if min.is_zero() {
        return None;
    }
    // Absurd flag values (beyond what a Duration holds) mean "never", not a panic.
    Duration::try_from_secs_f64(min.as_secs_f64() * (1.0 + unit.clamp(0.0, 1.0))).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::kinds::pod_informer;

    /// A server that speaks JSON only, as for an aggregated API without protobuf: 406 to a request
    /// accepting protobuf only, a streamed list of pod `a` in JSON otherwise. Records each request's
    /// Accept header.
    fn json_only_server() -> (Client, Arc<Mutex<Vec<String>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
            let accept = request
                .headers()
                .get(http::header::ACCEPT)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_string();
            let streamed = request.uri().to_string().contains("sendInitialEvents=true");
            log.lock().unwrap().push(accept.clone());
            let (code, body) = if accept.starts_with(crate::protobuf::PROTOBUF) {
                (
                    406,
                    r#"{"kind":"Status","code":406,"reason":"NotAcceptable"}"#.to_string(),
                )
            } else if streamed {
                let pod = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"namespace":"ns","name":"a","resourceVersion":"5"}}"#;
                let end = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"resourceVersion":"6","annotations":{"k8s.io/initial-events-end":"true"}}}"#;
                (
                    200,
                    format!(
                        "{{\"type\":\"ADDED\",\"object\":{pod}}}\n{{\"type\":\"BOOKMARK\",\"object\":{end}}}\n"
                    ),
                )
            } else {
                (200, String::new())
            };
            async move {
                http::Response::builder()
                    .status(code)
                    .header(http::header::CONTENT_TYPE, "application/json")
                    .body(kube::client::Body::from(body.into_bytes()))
                    .map_err(|e| Box::new(e) as tower::BoxError)
            }
        });
        (Client::new(service, "default"), seen)
    }

    #[tokio::test]
    async fn a_server_refusing_protobuf_is_read_in_json_and_the_view_says_so() {
        let (client, accepts) = json_only_server();
        let informers = SharedInformers::new(client, None);
        let pods = pod_informer(&informers);
        tokio::time::timeout(Duration::from_secs(10), informers.start())
            .await
            .expect("the pod informer synced in JSON");
        assert!(pods.get("ns", "a").is_some());
        assert_eq!(informers.views()[0].content_type, "json (protobuf refused)");
        let accepts = accepts.lock().unwrap();
        assert!(
            accepts[0].starts_with(crate::protobuf::PROTOBUF),
            "{accepts:?}"
        );
        assert!(
            accepts[1..].iter().all(|a| !a.contains("protobuf")),
            "one refusal, then JSON only: {accepts:?}"
        );
    }

    #[tokio::test]
    async fn with_json_asked_for_no_protobuf_request_is_made() {
        let (client, accepts) = json_only_server();
        let informers = SharedInformers::new(client, None).with_content_type(ContentType::Json);
        let pods = pod_informer(&informers);
        tokio::time::timeout(Duration::from_secs(10), informers.start())
            .await
            .expect("the pod informer synced");
        assert!(pods.get("ns", "a").is_some());
        assert_eq!(informers.views()[0].content_type, "json");
        assert!(
            accepts
                .lock()
                .unwrap()
                .iter()
                .all(|a| !a.contains("protobuf"))
        );
    }

    #[test]
    fn resync_periods_are_jittered_between_min_and_twice_min() {
        let twelve_hours = Duration::from_secs(12 * 3600);
        assert_eq!(
            jittered_resync_period(twelve_hours, 0.0),
            Some(twelve_hours)
        );
        assert_eq!(
            jittered_resync_period(twelve_hours, 0.5),
            Some(Duration::from_secs(18 * 3600))
        );
        let near_max = jittered_resync_period(twelve_hours, 0.999_999).unwrap();
        assert!(near_max < 2 * twelve_hours && near_max > twelve_hours);
        assert_eq!(jittered_resync_period(Duration::ZERO, 0.3), None);
        assert_eq!(jittered_resync_period(Duration::MAX, 0.5), None);
    }
}
