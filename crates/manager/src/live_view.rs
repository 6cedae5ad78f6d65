//! The data behind the live view at `/debug/controllers` (see `docs/live-view.md`): what every controller
//! instance holds right now (queue, expectations, sync counts), the informers' caches, and the decision
//! log, and one object at a time (`crate::object_view`). Served as JSON by `crate::http`, read by the
//! page (`live_view/page.html`) and by `mini-kcm explain`.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use mini_kcm_runtime::api::kinds::{
    ApiFamily, CONTROLLER_UID_INDEX, DaemonSetObject, DeploymentObject, POD_CONTROLLER_INDEX,
    ReplicaSetObject, WorkloadKind, pod_informer, workload_informer,
};
use mini_kcm_runtime::controller::{Controller, ObjectKey};
use mini_kcm_runtime::informers::{Informer, SharedInformers};
use mini_kcm_runtime::observability::decisions::{DecidedBy, DecisionFilter, DecisionLog};
use mini_kcm_runtime::observability::inspect::ManagerView;
use mini_kcm_runtime::switches::safeties::{Safeties, SwitchedOff};

use crate::object_view::{
    ConditionEntry, KeyQueueState, ObjectQuery, ObjectView, PodEntry, ReplicaSetEntry, ViewedKind,
    deployment_facts,
};

/// The live view's HTML page: server-rendered shell plus a small script that polls the JSON endpoints.
pub(crate) const PAGE: &str = include_str!("live_view/page.html");

/// Decisions an object view carries: all the log keeps of one object (32 by default), newest first.
const OBJECT_DECISIONS: usize = 32;

/// Why an object query cannot be answered.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ObjectQueryError {
    #[error("unknown kind {0:?}: use Deployment, ReplicaSet or DaemonSet")]
    UnknownKind(String),
    #[error("unknown family {0:?}: use apps or copies")]
    UnknownFamily(String),
}

/// What the endpoints look at. The HTTP server starts before the controllers exist (so `/healthz`
/// answers during the first list): until [`LiveView::attach`] they show no controller.
#[derive(Clone)]
pub(crate) struct LiveView {
    pub decisions: DecisionLog,
    running: Arc<OnceLock<Running>>,
    /// Safety mechanisms switched off by a learner, shown as a banner on every view.
    switched_off: Vec<SwitchedOff>,
    watch_delay: Duration,
}

pub(crate) struct Running {
    pub controllers: Vec<Arc<dyn Controller>>,
    pub informers: SharedInformers,
}

impl LiveView {
    pub(crate) fn new(decisions: DecisionLog, safeties: &Safeties, watch_delay: Duration) -> Self {
        LiveView {
            decisions,
            running: Arc::default(),
            switched_off: SwitchedOff::list(safeties),
            watch_delay,
        }
    }

    /// Makes the built controllers and their informers visible (once).
    pub(crate) fn attach(&self, running: Running) {
        let _ = self.running.set(running);
    }

    /// Controllers, queues, expectations and informers right now.
    pub(crate) fn state(&self) -> ManagerView {
        let (controllers, informers) = match self.running.get() {
            Some(running) => (
                running.controllers.iter().map(|c| c.inspect()).collect(),
                running.informers.views(),
            ),
            None => (Vec::new(), Vec::new()),
        };
        ManagerView {
            controllers,
            informers,
            decision_log: self.decisions.is_enabled(),
            switched_off: self.switched_off.clone(),
            watch_delay_ms: u64::try_from(self.watch_delay.as_millis()).unwrap_or(u64::MAX),
        }
    }

    pub(crate) fn decisions(
        &self,
        filter: &DecisionFilter,
    ) -> Vec<mini_kcm_runtime::observability::decisions::Decision> {
        self.decisions.recent(filter)
    }

    /// One object with what it owns in the caches, its queue state, expectations and decisions.
    pub(crate) fn object(&self, query: &ObjectQuery) -> Result<ObjectView, ObjectQueryError> {
        let kind = ViewedKind::parse(&query.kind)
            .ok_or_else(|| ObjectQueryError::UnknownKind(query.kind.clone()))?;
        let family = match query.family.as_deref().unwrap_or("apps") {
            "apps" | "" => ApiFamily::Apps,
            "copies" => ApiFamily::Copies,
            other => return Err(ObjectQueryError::UnknownFamily(other.to_string())),
        };
        let namespace = match query.namespace.as_deref() {
            Some(ns) if !ns.is_empty() => ns.to_string(),
            _ => "default".to_string(),
        };
        let key = ObjectKey::new(namespace.clone(), query.name.clone());
        let decisions = self.decisions.recent(&DecisionFilter {
            controller: Some(kind.controller().into()),
            family: Some(family.label().into()),
            kind: Some(kind.kind().into()),
            namespace: Some(namespace.clone()),
            name: Some(query.name.clone()),
            after: None,
            limit: Some(OBJECT_DECISIONS),
        });
        let mut view = ObjectView {
            kind: kind.kind().into(),
            family: family.label().into(),
            namespace,
            name: query.name.clone(),
            controller_running: false,
            found: false,
            uid: None,
            desired: None,
            generation: None,
            observed_generation: None,
            paused: None,
            revision: None,
            conditions: Vec::new(),
            queue: KeyQueueState::Idle,
            expectations: None,
            replica_sets: Vec::new(),
            pods: Vec::new(),
            pods_omitted: 0,
            node_map: None,
            rollout: Vec::new(),
            decisions,
        };
        let Some(running) = self.running.get() else {
            return Ok(view);
        };
        let Some(controller) = running
            .controllers
            .iter()
            .map(|c| c.inspect())
            .find(|c| c.controller == kind.controller() && c.family == family.label())
        else {
            return Ok(view);
        };
        // The controller runs, so the informers below exist already (it created them with the same
        // types): asking for them does not start a new watch.
        view.controller_running = true;
        let key_text = key.to_string();
        view.queue = KeyQueueState::find(&controller, &key_text);
        view.expectations = controller
            .expectations
            .into_iter()
            .find(|e| e.key == key_text);
        let informers = &running.informers;
        let pods = pod_informer(informers);
        match kind {
            ViewedKind::Deployment => {
                let deployments: Informer<DeploymentObject> =
                    workload_informer(informers, WorkloadKind::Deployment, family);
                let Some(d) = deployments.get(key.namespace(), key.name()) else {
                    return Ok(view);
                };
                view.found = true;
                view.uid = d.metadata.uid.clone();
                view.desired = Some(d.spec.replicas.unwrap_or(1));
                view.generation = d.metadata.generation;
                view.observed_generation = d.status.as_ref().and_then(|s| s.observed_generation);
                (view.paused, view.revision, view.conditions) = deployment_facts(&d);
                let replica_sets: Informer<ReplicaSetObject> =
                    workload_informer(informers, WorkloadKind::ReplicaSet, family);
                let uid = view.uid.clone().unwrap_or_default();
                view.replica_sets = replica_sets
                    .by_index(CONTROLLER_UID_INDEX, &uid)
                    .iter()
                    .map(|rs| {
                        let rs_uid = rs.metadata.uid.as_deref().unwrap_or_default();
                        ReplicaSetEntry::of(rs, &pods.by_index(POD_CONTROLLER_INDEX, rs_uid))
                    })
                    .collect();
                ReplicaSetEntry::sort(&mut view.replica_sets);
                let by = DecidedBy {
                    controller: "deployment",
                    family: family.label(),
                    kind: WorkloadKind::Deployment.kind(),
                };
                view.rollout = self.decisions.rollout(by, &key);
            }
            ViewedKind::ReplicaSet => {
                let replica_sets: Informer<ReplicaSetObject> =
                    workload_informer(informers, WorkloadKind::ReplicaSet, family);
                let Some(rs) = replica_sets.get(key.namespace(), key.name()) else {
                    return Ok(view);
                };
                view.found = true;
                view.uid = rs.metadata.uid.clone();
                view.desired = Some(rs.spec.replicas.unwrap_or(1));
                view.generation = rs.metadata.generation;
                view.observed_generation = rs.status.as_ref().and_then(|s| s.observed_generation);
                view.conditions =
                    ConditionEntry::list(rs.status.as_ref().and_then(|s| s.conditions.as_ref()));
                let uid = view.uid.clone().unwrap_or_default();
                (view.pods, view.pods_omitted) =
                    PodEntry::list(&pods.by_index(POD_CONTROLLER_INDEX, &uid));
            }
            ViewedKind::DaemonSet => {
                let daemon_sets: Informer<DaemonSetObject> =
                    workload_informer(informers, WorkloadKind::DaemonSet, family);
                let Some(ds) = daemon_sets.get(key.namespace(), key.name()) else {
                    return Ok(view);
                };
                view.found = true;
                view.uid = ds.metadata.uid.clone();
                view.desired = ds.status.as_ref().map(|s| s.desired_number_scheduled);
                view.generation = ds.metadata.generation;
                view.observed_generation = ds.status.as_ref().and_then(|s| s.observed_generation);
                view.conditions =
                    ConditionEntry::list(ds.status.as_ref().and_then(|s| s.conditions.as_ref()));
                let uid = view.uid.clone().unwrap_or_default();
                (view.pods, view.pods_omitted) =
                    PodEntry::list(&pods.by_index(POD_CONTROLLER_INDEX, &uid));
                let by = DecidedBy {
                    controller: "daemonset",
                    family: family.label(),
                    kind: WorkloadKind::DaemonSet.kind(),
                };
                view.node_map = self
                    .decisions
                    .node_map(by, &key)
                    .map(|m| m.as_ref().clone());
            }
        }
        Ok(view)
    }
}
