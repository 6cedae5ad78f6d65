//! Event-driven waits (watches, never fixed sleeps) and the ready-pods series of a run.

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;

use crate::BenchError;
use crate::scenario::{REV_LABEL, ROLE_LABEL, ROLE_WORKLOAD};

/// Waits until exactly `expected` objects match `selector` (all objects if `None`) and `done` holds for all of them.
pub(crate) async fn wait_all_done<K>(
    api: Api<K>,
    selector: Option<String>,
    expected: usize,
    done: impl Fn(&K) -> bool,
    timeout: Duration,
    what: &str,
) -> Result<(), BenchError>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    let mut states: HashMap<String, bool> = HashMap::new();
    let mut listing: HashMap<String, bool> = HashMap::new();
    let mut listed = false;
    let mut config = watcher::Config::default();
    if let Some(selector) = &selector {
        config = config.labels(selector);
    }
    let mut stream = std::pin::pin!(watcher::watcher(api, config));
    let wait = async {
        while let Some(event) = stream.next().await {
            match event {
                Ok(Event::Init) => listing.clear(),
                Ok(Event::InitApply(object)) => {
                    listing.insert(object.name_any(), done(&object));
                }
                Ok(Event::InitDone) => {
                    states = std::mem::take(&mut listing);
                    listed = true;
                }
                Ok(Event::Apply(object)) => {
                    states.insert(object.name_any(), done(&object));
                }
                Ok(Event::Delete(object)) => {
                    states.remove(&object.name_any());
                }
                // The watcher retries by itself; a persistent failure ends in the timeout.
                Err(_) => continue,
            }
            if listed && states.len() == expected && states.values().all(|d| *d) {
                return true;
            }
        }
        false
    };
    match tokio::time::timeout(timeout, wait).await {
        Ok(true) => Ok(()),
        _ => Err(BenchError::Timeout {
            what: what.to_string(),
            waited: timeout,
        }),
    }
}

/// Waits until the namespace no longer exists.
pub(crate) async fn wait_namespace_gone(
    client: Client,
    name: &str,
    timeout: Duration,
) -> Result<(), BenchError> {
    let api: Api<Namespace> = Api::all(client);
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut present = true;
    let mut listed = false;
    let mut stream = std::pin::pin!(watcher::watcher(api, config));
    let wait = async {
        while let Some(event) = stream.next().await {
            match event {
                Ok(Event::Init) => {
                    present = false;
                    listed = false;
                }
                Ok(Event::InitApply(_)) | Ok(Event::Apply(_)) => present = true,
                Ok(Event::Delete(_)) => present = false,
                Ok(Event::InitDone) => listed = true,
                Err(_) => continue,
            }
            // Only a complete list (or a later event) says whether it is still there.
            if listed && !present {
                return true;
            }
        }
        false
    };
    match tokio::time::timeout(timeout, wait).await {
        Ok(true) => Ok(()),
        _ => Err(BenchError::Timeout {
            what: format!("namespace {name} to be deleted"),
            waited: timeout,
        }),
    }
}

/// Counts, over time, the Ready pods of one template revision in a namespace, and every event of the
/// scenario's pods (all revisions) after its first list: the pod events each controller's watch receives.
#[derive(Debug)]
pub(crate) struct ReadySeries {
    points: Arc<Mutex<Vec<(Instant, u32)>>>,
    events: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl ReadySeries {
    /// Starts watching the workload pods of `namespace` (those of [`ROLE_WORKLOAD`]) and returns once
    /// the initial list is in, so nothing after it is missed; Ready counts those of revision `rev`.
    pub(crate) async fn start(
        client: Client,
        namespace: &str,
        rev: u32,
        timeout: Duration,
    ) -> Result<Self, BenchError> {
        let api: Api<Pod> = Api::namespaced(client, namespace);
        let points = Arc::new(Mutex::new(Vec::new()));
        let events = Arc::new(AtomicU64::new(0));
        let (recorded, counted) = (points.clone(), events.clone());
        let (listed_tx, listed_rx) = tokio::sync::oneshot::channel();
        let rev = rev.to_string();
        let task = tokio::spawn(async move {
            let mut listed_tx = Some(listed_tx);
            let mut ready: HashMap<String, bool> = HashMap::new();
            let mut last_count: Option<u32> = None;
            let selector = format!("{ROLE_LABEL}={ROLE_WORKLOAD}");
            let stream = watcher::watcher(api, watcher::Config::default().labels(&selector));
            let mut stream = std::pin::pin!(stream);
            let of_rev = |pod: &Pod| pod.labels().get(REV_LABEL) == Some(&rev);
            while let Some(event) = stream.next().await {
                match event {
                    Ok(Event::Init) => ready.clear(),
                    Ok(Event::InitApply(pod)) => {
                        if of_rev(&pod) {
                            ready.insert(pod.name_any(), is_ready(&pod));
                        }
                    }
                    Ok(Event::Apply(pod)) => {
                        counted.fetch_add(1, Ordering::Relaxed);
                        if of_rev(&pod) {
                            ready.insert(pod.name_any(), is_ready(&pod));
                        }
                    }
                    Ok(Event::Delete(pod)) => {
                        counted.fetch_add(1, Ordering::Relaxed);
                        ready.remove(&pod.name_any());
                    }
                    Ok(Event::InitDone) => {
                        if let Some(tx) = listed_tx.take() {
                            let _ = tx.send(());
                        }
                    }
                    Err(_) => continue,
                }
                if listed_tx.is_some() {
                    continue;
                }
                let count =
                    u32::try_from(ready.values().filter(|r| **r).count()).unwrap_or(u32::MAX);
                if last_count != Some(count) {
                    last_count = Some(count);
                    if let Ok(mut points) = recorded.lock() {
                        points.push((Instant::now(), count));
                    }
                }
            }
        });
        match tokio::time::timeout(timeout, listed_rx).await {
            Ok(Ok(())) => Ok(ReadySeries {
                points,
                events,
                task,
            }),
            _ => {
                task.abort();
                Err(BenchError::Timeout {
                    what: "the pod watch to list".into(),
                    waited: timeout,
                })
            }
        }
    }

    /// Pod events seen so far (after the first list).
    pub(crate) fn pod_events(&self) -> u64 {
        self.events.load(Ordering::Relaxed)
    }

    /// Stops watching; the points as (seconds since `origin`, ready pods), starting at `origin`.
    pub(crate) fn finish(self, origin: Instant) -> Vec<(f64, f64)> {
        self.task.abort();
        let points = self.points.lock().map(|p| p.clone()).unwrap_or_default();
        let mut series = Vec::with_capacity(points.len() + 1);
        let mut before = 0.0;
        for (at, count) in points {
            match at.checked_duration_since(origin) {
                Some(after) => series.push((after.as_secs_f64(), f64::from(count))),
                None => before = f64::from(count),
            }
        }
        series.insert(0, (0.0, before));
        series
    }
}

/// Ready and not being deleted.
pub(crate) fn is_ready(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|conditions| {
                conditions
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "True")
            })
}
