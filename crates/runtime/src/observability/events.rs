//! Kubernetes events, as the upstream controllers emit them: core/v1 Events (the API of client-go's
//! `record.EventRecorder`, which kube-controller-manager's workload controllers use), with the same
//! reasons, messages and correlation.
//!
//! Publishing an event is an API call; a sync must not wait for it. [`EventRecorder`] correlates each
//! event on the spot (see [`crate::observability::event_correlation`]: a burst of similar events becomes a few Events
//! whose counts are patched) and queues the resulting write on a bounded channel; one background task
//! makes the writes, retrying transient failures like client-go's broadcaster (12 tries, 10 s apart).
//! The writes draw from the controller's request budget with lower priority than its other requests:
//! a write waits until the budget has tokens to spare, but no longer than [`EVENT_PATIENCE`] after the
//! event was recorded, then takes its turn like any request. Upstream's event writes take their turn
//! with the pod creations they report, so a burst of creations beyond half the client's burst is
//! spaced out by its own events, and the status write that follows waits behind them.
//! Correlation keeps the queue short; if it still fills, the write is dropped, counted in
//! `<controller>_events_dropped_total` and logged.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use tokio::sync::mpsc;

use crate::api::api_errors::is_not_found;
use crate::api::client::RequestBudget;
use crate::observability::counter::{Counter, CounterSpec};
use crate::observability::event_correlation::{
    Correlated, EventCorrelator, EventIdentity, SeriesId,
};

/// client-go's `maxQueuedEvents`.
const QUEUE_LENGTH: usize = 1000;
/// client-go's `maxTriesPerEvent`.
const MAX_TRIES: u32 = 12;
/// client-go's `defaultSleepDuration` between tries.
const RETRY_SLEEP: Duration = Duration::from_secs(10);
/// How many series names the publisher remembers (like the correlator's tables).
const REMEMBERED_SERIES: usize = 4096;
/// How long after it was recorded an event write stops waiting for spare tokens. The publisher writes
/// in order, so one busy period delays the events recorded in it by about this much, the later ones
/// having spent their patience while queued.
pub(crate) const EVENT_PATIENCE: Duration = Duration::from_secs(1);

/// `<subsystem>_events_dropped_total`: event writes dropped because the publisher's queue was full.
pub(crate) const EVENTS_DROPPED: CounterSpec = CounterSpec {
    name: "events_dropped_total",
    help: "Number of event writes dropped because the event queue was full.",
};

/// One write for the publisher.
struct EventWrite {
    /// When the event happened (its timestamps and name, as upstream's recorder stamps them).
    recorded: Time,
    /// The same moment on the monotonic clock: the write's patience runs from it.
    recorded_at: tokio::time::Instant,
    series: SeriesId,
    /// The count to write (1: a new Event).
    count: i32,
    type_: &'static str,
    reason: String,
    action: String,
    message: String,
    regarding: ObjectReference,
    related: Option<ObjectReference>,
}

/// An Event's `type`: the API server knows exactly these two.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Something went as intended (e.g. `SuccessfulCreate`).
    Normal,
    /// Something went wrong and may need attention (e.g. `FailedCreate`).
    Warning,
}

impl EventType {
    /// The `type` as written in the Event: `Normal` or `Warning`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// Sends events for one controller (the event source's component, e.g. `replicaset-controller`).
#[derive(Clone)]
pub struct EventRecorder {
    component: Arc<str>,
    correlator: Arc<Mutex<EventCorrelator>>,
    tx: mpsc::Sender<EventWrite>,
    dropped: Counter,
}

impl EventRecorder {
    /// Starts the publishing task, which writes through `client` once `budget` (the client's) has
    /// tokens to spare. Must be called inside a tokio runtime. Drops (queue full) are counted in
    /// `dropped`.
    pub fn new(client: Client, budget: RequestBudget, controller: &str, dropped: Counter) -> Self {
        let (tx, rx) = mpsc::channel::<EventWrite>(QUEUE_LENGTH);
        tokio::spawn(publish(client, budget, controller.to_string(), rx));
        Self::with_sender(controller, tx, dropped)
    }

    fn with_sender(controller: &str, tx: mpsc::Sender<EventWrite>, dropped: Counter) -> Self {
        EventRecorder {
            component: controller.into(),
            correlator: Arc::new(Mutex::new(EventCorrelator::new())),
            tx,
            dropped,
        }
    }

    /// A Normal event about `regarding`; see [`EventRecorder::record`].
    pub fn normal(
        &self,
        regarding: &ObjectReference,
        related: Option<ObjectReference>,
        reason: &str,
        action: &str,
        note: String,
    ) {
        self.record(EventType::Normal, regarding, related, reason, action, note);
    }

    /// A Warning event; see [`EventRecorder::record`].
    pub fn warning(
        &self,
        regarding: &ObjectReference,
        related: Option<ObjectReference>,
        reason: &str,
        action: &str,
        note: String,
    ) {
        self.record(EventType::Warning, regarding, related, reason, action, note);
    }

    /// An event of `type_` about `regarding`. `related` names the other object involved (e.g. the pod
    /// a ReplicaSet created); it is written in the Event's `related` field but, as upstream, takes no
    /// part in correlation. `action` goes to the Event's `action` field.
    pub fn record(
        &self,
        type_: EventType,
        regarding: &ObjectReference,
        related: Option<ObjectReference>,
        reason: &str,
        action: &str,
        message: String,
    ) {
        let identity = EventIdentity {
            component: self.component.to_string(),
            kind: regarding.kind.clone().unwrap_or_default(),
            api_version: regarding.api_version.clone().unwrap_or_default(),
            namespace: regarding.namespace.clone().unwrap_or_default(),
            name: regarding.name.clone().unwrap_or_default(),
            uid: regarding.uid.clone().unwrap_or_default(),
            type_: type_.as_str().to_string(),
            reason: reason.to_string(),
            message,
        };
        let decision = match self.correlator.lock() {
            Ok(mut correlator) => correlator.correlate(&identity, tokio::time::Instant::now()),
            // A panic while holding the lock left the tables half-updated; events are best effort.
            Err(poisoned) => poisoned
                .into_inner()
                .correlate(&identity, tokio::time::Instant::now()),
        };
        let (series, count, message) = match decision {
            Correlated::Create { message, series } => (series, 1, message),
            Correlated::Patch {
                message,
                count,
                series,
            } => (series, count, message),
            Correlated::Skip => {
                tracing::debug!(reason, "event skipped by the spam filter");
                return;
            }
        };
        let write = EventWrite {
            recorded: Time(k8s_openapi::jiff::Timestamp::now()),
            recorded_at: tokio::time::Instant::now(),
            series,
            count,
            type_: type_.as_str(),
            reason: identity.reason,
            action: action.to_string(),
            message,
            regarding: regarding.clone(),
            related,
        };
        if let Err(mpsc::error::TrySendError::Full(_)) = self.tx.try_send(write) {
            self.dropped.inc();
            tracing::warn!(
                reason,
                dropped = self.dropped.get(),
                "event queue full; dropping an event write"
            );
        }
    }
}

/// The background task: makes each write, remembering which Event each series created.
async fn publish(
    client: Client,
    budget: RequestBudget,
    component: String,
    mut rx: mpsc::Receiver<EventWrite>,
) {
    let mut names: HashMap<SeriesId, String> = HashMap::new();
    while let Some(write) = rx.recv().await {
        if names.len() >= REMEMBERED_SERIES && !names.contains_key(&write.series) {
            // Forgotten series start a new Event on their next write, as after an LRU eviction.
            names.clear();
        }
        let mut tries = 0;
        loop {
            budget
                .wait_for_spare_tokens(write.recorded_at + EVENT_PATIENCE)
                .await;
            match write_once(&client, &component, &write, &mut names).await {
                Ok(()) => break,
                Err(e) if is_final(&e) => {
                    tracing::debug!(error = %e, reason = %write.reason, "server rejected an event");
                    break;
                }
                Err(e) => {
                    tries += 1;
                    if tries >= MAX_TRIES {
                        tracing::warn!(error = %e, reason = %write.reason, "could not write an event; giving up");
                        break;
                    }
                    // Like client-go, spread the first retry so clients do not retry in step.
                    let delay = if tries == 1 {
                        RETRY_SLEEP.mul_f64(rand::random::<f64>())
                    } else {
                        RETRY_SLEEP
                    };
                    tracing::debug!(error = %e, ?delay, "could not write an event; retrying");
                    tokio::time::sleep(delay).await;
                }
            }
        }
    }
}

/// Errors the API server will give again: not worth a retry (client-go retries only transport errors).
fn is_final(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(_))
}

async fn write_once(
    client: &Client,
    component: &str,
    write: &EventWrite,
    names: &mut HashMap<SeriesId, String>,
) -> Result<(), kube::Error> {
    let namespace = write
        .regarding
        .namespace
        .clone()
        .filter(|ns| !ns.is_empty())
        .unwrap_or_else(|| "default".to_string());
    let api: Api<Event> = Api::namespaced(client.clone(), &namespace);
    let happened = write.recorded.clone();
    if write.count > 1
        && let Some(name) = names.get(&write.series)
    {
        let patch = serde_json::json!({
            "count": write.count,
            "lastTimestamp": happened,
            "message": write.message,
        });
        match api
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => return Ok(()),
            // Deleted meanwhile (e.g. expired): start a new Event, as client-go does.
            Err(e) if is_not_found(&e) => {}
            Err(e) => return Err(e),
        }
    }
    let name = event_name(
        write.regarding.name.as_deref().unwrap_or_default(),
        &happened,
    );
    let event = Event {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(namespace),
            ..ObjectMeta::default()
        },
        involved_object: write.regarding.clone(),
        related: write.related.clone(),
        reason: Some(write.reason.clone()),
        message: Some(write.message.clone()),
        action: Some(write.action.clone()),
        type_: Some(write.type_.to_string()),
        count: Some(write.count),
        first_timestamp: Some(happened.clone()),
        last_timestamp: Some(happened),
        source: Some(EventSource {
            component: Some(component.to_string()),
            host: None,
        }),
        reporting_component: Some(component.to_string()),
        reporting_instance: std::env::var("POD_NAME").ok(),
        ..Event::default()
    };
    api.create(&PostParams::default(), &event).await?;
    names.insert(write.series, name);
    Ok(())
}

/// `<object name>.<nanoseconds in hex>`, as client-go names events; shortened to stay a valid name.
fn event_name(object_name: &str, now: &Time) -> String {
    let suffix = format!(".{:x}", now.0.as_nanosecond());
    let keep = 253usize.saturating_sub(suffix.len());
    let prefix: String = object_name.chars().take(keep).collect();
    format!("{prefix}{suffix}")
}

/// The reference an event is about.
pub fn object_reference<K: kube::Resource>(
    object: &K,
    dyntype: &K::DynamicType,
) -> ObjectReference {
    let meta = object.meta();
    ObjectReference {
        api_version: Some(K::api_version(dyntype).into_owned()),
        kind: Some(K::kind(dyntype).into_owned()),
        name: meta.name.clone(),
        namespace: meta.namespace.clone(),
        uid: meta.uid.clone(),
        resource_version: meta.resource_version.clone(),
        field_path: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::client::{ClientRateLimit, RateLimitLayer};
    use tower::Layer;

    /// A client drawing from `budget` whose API server answers every request with an Event and
    /// reports each request's method, path and arrival on the channel.
    fn recording_client(
        budget: &RequestBudget,
    ) -> (
        Client,
        mpsc::UnboundedReceiver<(String, tokio::time::Instant)>,
    ) {
        let (tx, rx) = mpsc::unbounded_channel();
        let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
            let _ = tx.send((
                format!("{} {}", request.method(), request.uri().path()),
                tokio::time::Instant::now(),
            ));
            let event = serde_json::json!({
                "apiVersion": "v1", "kind": "Event",
                "metadata": {"name": "web.1", "namespace": "ns"}, "involvedObject": {}
            });
            async move {
                Ok::<_, std::convert::Infallible>(
                    http::Response::builder()
                        .status(201)
                        .header("content-type", "application/json")
                        .body(kube::client::Body::from(
                            serde_json::to_vec(&event).unwrap_or_default(),
                        ))
                        .unwrap(),
                )
            }
        });
        let client = Client::new(RateLimitLayer::from_budget(budget).layer(service), "ns");
        (client, rx)
    }

    fn replica_set() -> ObjectReference {
        ObjectReference {
            api_version: Some("apps/v1".into()),
            kind: Some("ReplicaSet".into()),
            namespace: Some("ns".into()),
            name: Some("web".into()),
            uid: Some("uid-1".into()),
            ..Default::default()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn an_event_write_lets_the_controllers_requests_go_first() {
        let budget = RequestBudget::new(ClientRateLimit {
            qps: 10.0,
            burst: 10,
        });
        let (client, mut seen) = recording_client(&budget);
        let recorder = EventRecorder::new(
            client.clone(),
            budget,
            "replicaset-controller",
            Counter::unregistered(),
        );
        let start = tokio::time::Instant::now();
        // With the bucket full, an event goes at once.
        recorder.normal(
            &replica_set(),
            None,
            "SuccessfulCreate",
            "Create",
            "Created pod: web-a".into(),
        );
        let (request, at) = seen.recv().await.unwrap();
        assert_eq!(request, "POST /api/v1/namespaces/ns/events");
        assert_eq!(at, start);
        // The controller spends the rest of the burst; the next event waits until half of it is back
        // (5 tokens at 10 per second), while a controller request made meanwhile is not held up.
        let events: Api<Event> = Api::namespaced(client, "ns");
        for _ in 0..9 {
            events.get("web.1").await.unwrap();
            seen.recv().await.unwrap();
        }
        recorder.normal(
            &replica_set(),
            None,
            "SuccessfulCreate",
            "Create",
            "Created pod: web-b".into(),
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
        events.get("web.1").await.unwrap();
        let (request, at) = seen.recv().await.unwrap();
        assert_eq!(
            (request.as_str(), at - start),
            (
                "GET /api/v1/namespaces/ns/events/web.1",
                Duration::from_millis(100)
            )
        );
        let (request, at) = seen.recv().await.unwrap();
        assert_eq!(request, "POST /api/v1/namespaces/ns/events");
        assert_eq!(at - start, Duration::from_millis(600));
    }

    #[test]
    fn event_names_follow_client_go_and_stay_valid() {
        let now = Time(k8s_openapi::jiff::Timestamp::from_nanosecond(255).unwrap());
        assert_eq!(event_name("web", &now), "web.ff");
        assert!(event_name(&"a".repeat(300), &now).len() <= 253);
    }
}
