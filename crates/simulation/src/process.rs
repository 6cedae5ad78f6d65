//! One mini-kcm process: the three controllers for `apps/v1`, built from the same descriptors the
//! manager uses (`NEW_CONTROLLER`), on one set of shared informers whose watches the simulation plays:
//! each informer is handed the API's watch events when the run decides, in the API's order (never
//! reordered within a resource), some held back to make a stale view, or replaced by a relist.
//!
//! A crash is the end of a `Process`: the next one starts from nothing (empty caches, expectations,
//! queues, read-your-own-writes records) and lists everything, as a restarted manager does.

use std::collections::BTreeMap;
use std::sync::Arc;

use mini_kcm_runtime::api::kinds::ApiFamily;
use mini_kcm_runtime::controller::{Controller, ControllerOptions, NewController};
use mini_kcm_runtime::informers::{SharedInformers, SimulatedEvent};
use mini_kcm_runtime::observability::metrics::ControllerMetrics;
use mini_kcm_runtime::recorded_api::{RecordedApi, WatchEvent};
use mini_kcm_runtime::switches::safeties::Safeties;

/// The controllers of a process, in the order the run offers them a sync.
const CONTROLLERS: [(&str, NewController); 3] = [
    ("deployment", mini_kcm_deployment::NEW_CONTROLLER),
    ("replicaset", mini_kcm_replicaset::NEW_CONTROLLER),
    ("daemonset", mini_kcm_daemonset::NEW_CONTROLLER),
];

/// A running process: its controllers and how far each informer has been told the API's changes.
pub struct Process {
    informers: SharedInformers,
    controllers: Vec<(&'static str, Arc<dyn Controller>)>,
    /// Per watched resource, the index in the API's watch log of its first event not yet delivered.
    cursors: BTreeMap<String, usize>,
    /// The controller offered the next sync first (round robin, so no controller starves another).
    next: usize,
    /// Objects an informer could not decode (the simulation's own mistake: the run reports it).
    pub undecodable: usize,
}

impl Drop for Process {
    /// The controllers' handlers hold the controllers, which hold the informers: a process ends by
    /// breaking that circle (a crashed or finished one would stay in memory).
    fn drop(&mut self) {
        self.informers.clear_handlers();
    }
}

impl Process {
    /// Starts a process on `api` with `safeties`, its informers given their first list.
    pub fn start(api: &RecordedApi, safeties: &Safeties) -> (Self, Vec<WatchEvent>) {
        let client = api.client();
        let informers = SharedInformers::new(client.clone(), None);
        let mut options = ControllerOptions::new(ApiFamily::Apps, 1);
        options.safeties = safeties.clone();
        let controllers = CONTROLLERS
            .iter()
            .map(|(name, build)| {
                let controller = build(
                    &informers,
                    client.clone(),
                    options.clone(),
                    ControllerMetrics::unregistered(),
                );
                (*name, controller)
            })
            .collect();
        let mut process = Process {
            informers,
            controllers,
            cursors: BTreeMap::new(),
            next: 0,
            undecodable: 0,
        };
        let listed = process.relist_all(api);
        (process, listed)
    }

    /// Gives every informer a full list of its resource (as after a restart), skipping every event
    /// before it. Returns the listed objects as events, for the run's record of what caches hold.
    fn relist_all(&mut self, api: &RecordedApi) -> Vec<WatchEvent> {
        let end = api.watch_log_len();
        let mut listed = Vec::new();
        for resource in self.informers.resources() {
            listed.extend(self.relist(api, &resource, end));
        }
        listed
    }

    /// Gives the informer of `resource` a full list, skipping its events before `end`.
    pub fn relist(&mut self, api: &RecordedApi, resource: &str, end: usize) -> Vec<WatchEvent> {
        let objects = api.objects(resource);
        self.undecodable += self
            .informers
            .deliver(resource, SimulatedEvent::List(objects.clone()))
            .unwrap_or(0);
        self.cursors.insert(resource.to_string(), end);
        objects
            .into_iter()
            .map(|object| WatchEvent {
                resource: resource.to_string(),
                deleted: false,
                object,
            })
            .collect()
    }

    /// Delivers every pending event but the last `held[resource]` of each resource, in order; returns
    /// what was delivered.
    pub fn deliver(
        &mut self,
        api: &RecordedApi,
        held: &BTreeMap<String, usize>,
    ) -> Vec<WatchEvent> {
        let start = self.cursors.values().min().copied().unwrap_or(0);
        let log = api.watch_log(start);
        let end = start + log.len();
        let mut delivered = Vec::new();
        for (resource, cursor) in self.cursors.iter_mut() {
            let pending: Vec<(usize, &WatchEvent)> = log
                .iter()
                .enumerate()
                .map(|(i, e)| (start + i, e))
                .filter(|(i, e)| *i >= *cursor && e.resource == *resource)
                .collect();
            let keep_back = held.get(resource).copied().unwrap_or(0).min(pending.len());
            let (now, later) = pending.split_at(pending.len() - keep_back);
            for (_, event) in now {
                let simulated = if event.deleted {
                    SimulatedEvent::Delete(event.object.clone())
                } else {
                    SimulatedEvent::Apply(event.object.clone())
                };
                self.undecodable += self.informers.deliver(resource, simulated).unwrap_or(0);
                delivered.push((*event).clone());
            }
            *cursor = later.first().map_or(end, |(i, _)| *i);
        }
        delivered
    }

    /// Whether some controller has a key ready to sync.
    pub fn has_work(&self) -> bool {
        self.controllers.iter().any(|(_, c)| c.queued().0 > 0)
    }

    /// How soon the earliest delayed key of any controller is due.
    pub fn next_delayed(&self) -> Option<std::time::Duration> {
        self.controllers
            .iter()
            .filter_map(|(_, c)| c.queued().1)
            .min()
    }

    /// The next controller (round robin) with a key ready: its index and name.
    pub fn next_to_sync(&self) -> Option<(usize, &'static str)> {
        (0..self.controllers.len())
            .map(|offset| (self.next + offset) % self.controllers.len())
            .find(|i| self.controllers[*i].1.queued().0 > 0)
            .map(|i| (i, self.controllers[i].0))
    }

    /// Runs one sync of controller `index` (from [`Process::next_to_sync`]); returns the key synced.
    pub async fn sync(&mut self, index: usize) -> Option<String> {
        let (name, controller) = self.controllers.get(index)?;
        let key = controller.step().await;
        self.next = (index + 1) % self.controllers.len();
        key.map(|key| format!("{name} {key}"))
    }
}
