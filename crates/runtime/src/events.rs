//! Kubernetes events, as the upstream controllers emit them (same reasons and messages).
//!
//! Publishing an event is an API call; a sync must not wait for it. [`EventRecorder`] queues events on a
//! bounded channel and one background task publishes them (through kube's `Recorder`, which also
//! aggregates repeats into a series). If the channel is full, the event is dropped with a warning, like
//! client-go's broadcaster does under pressure.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use tokio::sync::mpsc;

const QUEUE_LENGTH: usize = 1000;

/// Sends events for one controller (the `reportingController`, e.g. `replicaset-controller`).
#[derive(Clone)]
pub struct EventRecorder {
    tx: mpsc::Sender<(Event, ObjectReference)>,
}

impl EventRecorder {
    /// Starts the publishing task. Must be called inside a tokio runtime.
    pub fn new(client: Client, controller: &str) -> Self {
        let (tx, mut rx) = mpsc::channel::<(Event, ObjectReference)>(QUEUE_LENGTH);
        let recorder = Recorder::new(
            client,
            Reporter {
                controller: controller.to_string(),
                instance: std::env::var("POD_NAME").ok(),
            },
        );
        tokio::spawn(async move {
            while let Some((event, regarding)) = rx.recv().await {
                if let Err(e) = recorder.publish(&event, &regarding).await {
                    tracing::debug!(error = %e, reason = %event.reason, "could not publish an event");
                }
            }
        });
        EventRecorder { tx }
    }

    /// A recorder that drops everything (unit tests).
    pub fn disabled() -> Self {
        let (tx, _) = mpsc::channel(1);
        EventRecorder { tx }
    }

    /// A Normal event about `regarding`. `related` names the other object involved (e.g. the pod a
    /// ReplicaSet created); it also keeps events about different pods apart, since kube's recorder folds
    /// events with the same reason, regarding and related object into one series.
    pub fn normal(
        &self,
        regarding: &ObjectReference,
        related: Option<ObjectReference>,
        reason: &str,
        action: &str,
        note: String,
    ) {
        self.send(EventType::Normal, regarding, related, reason, action, note);
    }

    /// A Warning event; see [`EventRecorder::normal`].
    pub fn warning(
        &self,
        regarding: &ObjectReference,
        related: Option<ObjectReference>,
        reason: &str,
        action: &str,
        note: String,
    ) {
        self.send(EventType::Warning, regarding, related, reason, action, note);
    }

    fn send(
        &self,
        type_: EventType,
        regarding: &ObjectReference,
        related: Option<ObjectReference>,
        reason: &str,
        action: &str,
        note: String,
    ) {
        let event = Event {
            type_,
            reason: reason.to_string(),
            note: Some(note),
            action: action.to_string(),
            secondary: related,
        };
        if let Err(mpsc::error::TrySendError::Full(_)) =
            self.tx.try_send((event, regarding.clone()))
        {
            tracing::warn!(reason, "event queue full; dropping an event");
        }
    }
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
