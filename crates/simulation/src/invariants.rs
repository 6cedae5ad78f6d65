//! The properties every run must keep, as named predicates, from upstream's guarantees:
//!
//! | invariant | when | what |
//! | --- | --- | --- |
//! | `no-duplicate-pods` | each pod creation | a ReplicaSet's creation never finds the API already holding as many live pods as the larger of its cached and current `spec.replicas` (plus creations that timed out but persisted) |
//! | `no-excess-deletions` | each pod deletion | a ReplicaSet never deletes a live pod when the API holds no more than the smaller of its cached and current `spec.replicas` |
//! | `adopt-only-live-owners` | each adoption of a pod or ReplicaSet (a patch) | a new controller reference names an owner that exists with that UID and is not being deleted (a DaemonSet's adoption of ControllerRevisions is not checked) |
//! | `read-your-own-writes` | each update | a controller never updates an object from a version older than its own last write of it (mini-kcm's Deployment controller has the guard too, upstream's not) |
//! | `slow-start` | each sync | a sync refused by a quota sends at most one more refused creation than it had successes (batches of 1, 2, 4, ...) |
//! | `surge-bound` | each step | once a Deployment's generation is observed, its ReplicaSets' `spec.replicas` add up to at most `replicas + maxSurge` (Recreate: `replicas`), as upstream counts |
//! | `unavailability-bound` | each step | once a rolling Deployment has `replicas - maxUnavailable` available pods, it keeps them until a user acts (on anything) |
//! | `daemon-pods-per-node` | each step | at most one live pod per DaemonSet and node; two only while surging (an old and a new revision), plus creations that timed out but were applied |
//! | `one-controller` | each step | no pod or ReplicaSet has two controller references |
//! | `observed-generation-monotonic` | each step | no workload's `status.observedGeneration` goes back |
//! | `steady-state` | at rest | the state the controllers must reach once faults stop (see [`steady_state`]) |
//! | `converges` | at the end | the run comes to rest within its bounds of steps and simulated time, and every object decodes as its informer's kind |

use std::collections::{BTreeMap, BTreeSet};

use mini_kcm_runtime::recorded_api::{
    Intercept, Reaction, RecordedApi, RecordedRequest, Stored, Verb, WatchEvent,
};
use serde_json::Value;

use crate::objects::{self, DAEMON_SETS, DEPLOYMENTS, NODES, PODS, REPLICA_SETS, is_terminating};
use crate::schedule::{Failure, Fault};

/// A broken invariant: which, at which step of the run, and what was seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The invariant's name (see the module header).
    pub invariant: &'static str,
    /// The run's step when it was seen.
    pub step: usize,
    /// What was seen.
    pub detail: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "step {}: {}: {}", self.step, self.invariant, self.detail)
    }
}

/// What the run knows while it runs, shared with the API's interceptor: the faults still to inject at
/// writes, and the history some invariants need.
#[derive(Default)]
pub(crate) struct Monitor {
    /// The run's current step.
    pub step: usize,
    /// Writes the controllers have sent so far (events excluded).
    pub writes: usize,
    /// Each write, as `verb resource` (what a baseline offers faults at).
    pub write_log: Vec<String>,
    /// The faults of the schedule that act on writes.
    pub faults: Vec<Fault>,
    /// Violations so far.
    pub violations: Vec<Violation>,
    /// A quota refuses pod creations until the current sync ends.
    quota: bool,
    /// Pod creations refused and served in the current sync.
    refused_creations: usize,
    served_creations: usize,
    /// Per owner UID, pod creations or deletions that failed but were applied.
    persisted_failures: BTreeMap<String, i64>,
    /// Per controller and object, the resourceVersion of the controller's own last write (this
    /// process).
    own_writes: BTreeMap<(String, String), u64>,
    /// Writes applied but answered with an error (object, resourceVersion): the controller cannot
    /// know them.
    unanswered: BTreeSet<(String, u64)>,
    /// The controller syncing now (`deployment`, `replicaset`, `daemonset`).
    pub syncing: &'static str,
    /// Per ReplicaSet UID, `spec.replicas` as the process's cache holds it.
    pub cached_replicas: BTreeMap<String, i64>,
    /// Per workload UID, the highest `observedGeneration` seen.
    observed: BTreeMap<String, i64>,
    /// Rolling Deployments (by UID) that have reached `replicas - maxUnavailable` available pods.
    armed: BTreeSet<String>,
}

impl Monitor {
    /// A monitor for a run whose schedule holds `faults` (those acting on writes are used).
    pub fn new(faults: Vec<Fault>) -> Self {
        Monitor {
            faults: faults.into_iter().filter(|f| f.write().is_some()).collect(),
            ..Monitor::default()
        }
    }

    /// The interceptor's decision on one write, after checking the write-time invariants.
    pub fn on_write(&mut self, request: &RecordedRequest, stored: &Stored<'_>) -> Intercept {
        let index = self.writes;
        self.writes += 1;
        self.write_log.push(format!(
            "{} {}",
            request.action().split(' ').next().unwrap_or_default(),
            request.resource
        ));
        self.check_write(request, stored);
        let creation = request.verb == Verb::Create && request.resource == "pods";
        let fault = self
            .faults
            .iter()
            .find(|f| f.write() == Some(index))
            .cloned();
        let decision = match fault {
            Some(Fault::CrashBefore { .. }) => Intercept::CrashBefore,
            Some(Fault::CrashAfter { .. }) => Intercept::CrashAfter,
            Some(Fault::Fail { how, .. }) => match how {
                Failure::Conflict => Intercept::Refuse(Reaction::Conflict),
                Failure::TimeoutLost => Intercept::Refuse(Reaction::Timeout),
                Failure::TimeoutPersisted => {
                    if let Some(owner) = self.pod_owner(request, stored) {
                        *self.persisted_failures.entry(owner).or_default() += 1;
                    }
                    // Applied, but the controller never learns its version: not its own write for
                    // read-your-own-writes, which records versions from answers only (upstream's
                    // daemon_controller.go:1259-1268, `WroteAt` after a successful status write).
                    if let Some(object) = written_object(request) {
                        self.unanswered
                            .insert((object, stored.resource_version() + 1));
                    }
                    Intercept::ServeThenFail(Reaction::Timeout)
                }
                Failure::Quota if creation => {
                    self.quota = true;
                    Intercept::Refuse(Reaction::QuotaExceeded)
                }
                Failure::Quota => Intercept::Serve,
            },
            _ if self.quota && creation => Intercept::Refuse(Reaction::QuotaExceeded),
            _ => Intercept::Serve,
        };
        if creation {
            match decision {
                Intercept::Refuse(Reaction::QuotaExceeded) => self.refused_creations += 1,
                Intercept::Serve => self.served_creations += 1,
                _ => {}
            }
        }
        decision
    }

    /// The UID of the ReplicaSet or DaemonSet owning the pod a request creates or deletes.
    fn pod_owner(&self, request: &RecordedRequest, stored: &Stored<'_>) -> Option<String> {
        if request.resource != "pods" {
            return None;
        }
        let pod = match request.verb {
            Verb::Create => request.body.clone()?,
            Verb::Delete => stored
                .get(
                    PODS,
                    request.namespace.as_deref()?,
                    request.name.as_deref()?,
                )?
                .clone(),
            _ => return None,
        };
        objects::controller_of(&pod).map(|owner| owner.uid)
    }

    /// Ends a sync: what it wrote (`written`: the watch events of its writes) becomes its
    /// controller's own; the quota's refusals are judged against slow start, then lifted.
    pub fn end_sync(&mut self, what: &str, written: &[WatchEvent]) {
        for event in written {
            let object = format!(
                "{} {}/{}",
                event.resource,
                objects::namespace(&event.object),
                objects::name(&event.object)
            );
            let version = objects::resource_version(&event.object);
            if !self.unanswered.contains(&(object.clone(), version)) {
                self.own_writes
                    .insert((self.syncing.to_string(), object), version);
            }
        }
        if self.quota && self.refused_creations > self.served_creations + 1 {
            let detail = format!(
                "{what}: {} pod creations refused by the quota after {} served",
                self.refused_creations, self.served_creations
            );
            self.violate("slow-start", detail);
        }
        self.quota = false;
        self.refused_creations = 0;
        self.served_creations = 0;
    }

    /// A new process: nothing it writes is its own yet, nothing is cached.
    pub fn restarted(&mut self) {
        self.own_writes.clear();
        self.cached_replicas.clear();
        self.quota = false;
        // It lists everything, the pods of writes whose answers were lost included.
        self.persisted_failures.clear();
    }

    /// Records what the process's caches were just given.
    pub fn cached(&mut self, resource: &str, object: &Value, deleted: bool) {
        if resource != REPLICA_SETS {
            return;
        }
        let uid = objects::uid(object).to_string();
        if deleted {
            self.cached_replicas.remove(&uid);
        } else {
            self.cached_replicas
                .insert(uid, objects::spec_replicas(object));
        }
    }

    fn violate(&mut self, invariant: &'static str, detail: String) {
        self.violations.push(Violation {
            invariant,
            step: self.step,
            detail,
        });
    }

    fn check_write(&mut self, request: &RecordedRequest, stored: &Stored<'_>) {
        let namespace = request.namespace.clone().unwrap_or_default();
        // Pod counts of a ReplicaSet, against what its controller may have acted on.
        if request.resource == "pods" && matches!(request.verb, Verb::Create | Verb::Delete) {
            let pod = match request.verb {
                Verb::Create => request.body.clone(),
                _ => request
                    .name
                    .as_deref()
                    .and_then(|n| stored.get(PODS, &namespace, n))
                    .cloned(),
            };
            let owner = pod.as_ref().and_then(objects::controller_of);
            if let (Some(pod), Some(owner)) = (pod, owner)
                && owner.kind == "ReplicaSet"
                && let Some(rs) = stored.get(REPLICA_SETS, &namespace, &owner.name)
                && objects::uid(rs) == owner.uid
            {
                let live = stored
                    .list(PODS)
                    .filter(|p| !is_terminating(p))
                    .filter(|p| objects::controller_of(p).is_some_and(|o| o.uid == owner.uid))
                    .count() as i64;
                let current = objects::spec_replicas(rs);
                let cached = self
                    .cached_replicas
                    .get(&owner.uid)
                    .copied()
                    .unwrap_or(current);
                let tolerance = self
                    .persisted_failures
                    .get(&owner.uid)
                    .copied()
                    .unwrap_or(0);
                if request.verb == Verb::Create
                    && live >= current.max(cached).saturating_add(tolerance)
                {
                    let detail = format!(
                        "ReplicaSet {} creates a pod with {live} live (spec.replicas {current}, cached {cached})",
                        owner.name
                    );
                    self.violate("no-duplicate-pods", detail);
                }
                if request.verb == Verb::Delete
                    && !is_terminating(&pod)
                    && live <= current.min(cached).saturating_sub(tolerance)
                {
                    let detail = format!(
                        "ReplicaSet {} deletes pod {} with {live} live (spec.replicas {current}, cached {cached})",
                        owner.name,
                        objects::name(&pod)
                    );
                    self.violate("no-excess-deletions", detail);
                }
            }
        }
        // Adoptions: a controller reference added by a patch.
        if request.verb == Verb::Patch
            && matches!(request.resource.as_str(), "pods" | "replicasets")
            && let Some(name) = request.name.as_deref()
        {
            let resource = if request.resource == "pods" {
                PODS
            } else {
                REPLICA_SETS
            };
            let before = stored
                .get(resource, &namespace, name)
                .and_then(objects::controller_of);
            for added in added_controller_refs(request.body.as_ref()) {
                if before.as_ref().is_some_and(|b| b.uid == added.uid) {
                    continue;
                }
                let owner = objects::resource_of_kind(&added.kind)
                    .and_then(|r| stored.get(r, &namespace, &added.name))
                    .filter(|o| objects::uid(o) == added.uid);
                let problem = match owner {
                    None => Some("is gone"),
                    Some(o) if is_terminating(o) => Some("is being deleted"),
                    Some(_) => None,
                };
                if let Some(problem) = problem {
                    let detail = format!(
                        "{} {name} adopted by {} {}, which {problem}",
                        request.resource, added.kind, added.name
                    );
                    self.violate("adopt-only-live-owners", detail);
                }
            }
        }
        // Updates built on a version older than the controller's own last write of the object.
        if request.verb == Verb::Update
            && let Some(object) = written_object(request)
            && let Some(version) = request
                .body
                .as_ref()
                .and_then(|b| b.pointer("/metadata/resourceVersion"))
                .and_then(Value::as_str)
                .and_then(|v| v.parse::<u64>().ok())
            && let Some(own) = self
                .own_writes
                .get(&(self.syncing.to_string(), object.clone()))
            && version < *own
        {
            let detail = format!(
                "the {} controller updates {object} from version {version}, older than its own write {own}",
                self.syncing
            );
            self.violate("read-your-own-writes", detail);
        }
    }

    /// The invariants of the state, after a step. `user_changed`: a user acted in this step (a
    /// Deployment's availability may drop then).
    pub fn check_state(&mut self, api: &RecordedApi, user_changed: bool) {
        let pods = api.objects(PODS);
        let replica_sets = api.objects(REPLICA_SETS);
        for object in pods.iter().chain(&replica_sets) {
            let controllers = objects::owner_refs(object)
                .iter()
                .filter(|r| r.controller)
                .count();
            if controllers > 1 {
                let detail = format!("{} has {controllers} controllers", objects::name(object));
                self.violate("one-controller", detail);
            }
        }
        for workload in [DEPLOYMENTS, REPLICA_SETS, DAEMON_SETS]
            .into_iter()
            .flat_map(|r| api.objects(r))
        {
            let seen = self
                .observed
                .entry(objects::uid(&workload).to_string())
                .or_insert(0);
            let now = objects::observed_generation(&workload);
            if now < *seen {
                let detail = format!("{} went from {seen} to {now}", objects::name(&workload));
                *seen = now;
                self.violate("observed-generation-monotonic", detail);
            } else {
                *seen = now;
            }
        }
        for deployment in api.objects(DEPLOYMENTS) {
            self.check_deployment(&deployment, &replica_sets, &pods, user_changed);
        }
        for daemon_set in api.objects(DAEMON_SETS) {
            let surges = rolling_number(&daemon_set, "maxSurge", 1, 0, true) > 0;
            let uid = objects::uid(&daemon_set);
            // Per node, the live pods' revisions (`controller-revision-hash`).
            let mut per_node: BTreeMap<String, Vec<String>> = BTreeMap::new();
            for pod in pods.iter().filter(|p| !is_terminating(p)) {
                if objects::controller_of(pod).is_some_and(|o| o.uid == uid)
                    && let Some(node) = objects::pod_node(pod)
                {
                    let revision = objects::labels(pod)
                        .get("controller-revision-hash")
                        .cloned()
                        .unwrap_or_default();
                    per_node.entry(node).or_default().push(revision);
                }
            }
            // A creation that timed out although applied is retried once the cache lags (its
            // expectation was lowered on the error: upstream's daemon_controller.go:1102-1104), so it
            // may leave one pod too many until the next sync removes it.
            let tolerance = self.persisted_failures.get(uid).copied().unwrap_or(0);
            for (node, revisions) in per_node {
                let distinct: BTreeSet<&String> = revisions.iter().collect();
                // Two pods on a node only while surging: an old one and its replacement.
                let limit = if surges && distinct.len() > 1 { 2 } else { 1 };
                let count = i64::try_from(revisions.len()).unwrap_or(i64::MAX);
                if count > limit + tolerance {
                    let detail = format!(
                        "DaemonSet {} has {count} live pods on {node} (revisions {revisions:?})",
                        objects::name(&daemon_set)
                    );
                    self.violate("daemon-pods-per-node", detail);
                }
            }
        }
    }

    fn check_deployment(
        &mut self,
        deployment: &Value,
        replica_sets: &[Value],
        pods: &[Value],
        user_changed: bool,
    ) {
        let uid = objects::uid(deployment).to_string();
        let replicas = objects::spec_replicas(deployment);
        let recreate = deployment
            .pointer("/spec/strategy/type")
            .and_then(Value::as_str)
            == Some("Recreate");
        let owned: Vec<&Value> = replica_sets
            .iter()
            .filter(|rs| objects::controller_of(rs).is_some_and(|o| o.uid == uid))
            .collect();
        let observed = objects::observed_generation(deployment) == objects::generation(deployment);
        let paused = deployment.pointer("/spec/paused").and_then(Value::as_bool) == Some(true);
        let surge = if recreate {
            0
        } else {
            rolling_number(deployment, "maxSurge", replicas, 25, true)
        };
        let sum = owned.iter().fold(0i64, |sum, rs| {
            sum.saturating_add(objects::spec_replicas(rs))
        });
        if observed && !paused && sum > replicas.saturating_add(surge) {
            let detail = format!(
                "Deployment {}: its ReplicaSets want {sum} pods, replicas {replicas} + maxSurge {surge}",
                objects::name(deployment)
            );
            self.violate("surge-bound", detail);
        }
        if recreate {
            return;
        }
        let unavailable = rolling_number(deployment, "maxUnavailable", replicas, 25, false);
        let floor = replicas.saturating_sub(unavailable);
        let owned_uids: BTreeSet<&str> = owned.iter().map(|rs| objects::uid(rs)).collect();
        let available = pods
            .iter()
            .filter(|p| !is_terminating(p) && objects::is_ready(p))
            .filter(|p| {
                objects::controller_of(p).is_some_and(|o| owned_uids.contains(o.uid.as_str()))
            })
            .count() as i64;
        if user_changed {
            self.armed.remove(&uid);
        }
        if available >= floor {
            self.armed.insert(uid);
        } else if self.armed.remove(&uid) {
            let detail = format!(
                "Deployment {}: {available} available, below replicas {replicas} - maxUnavailable {unavailable}",
                objects::name(deployment)
            );
            self.violate("unavailability-bound", detail);
        }
    }
}

/// A rolling update's `maxSurge` or `maxUnavailable` of `workload` resolved against `total`: a
/// percentage rounds up for the surge and down for unavailability, as upstream resolves them.
fn rolling_number(
    workload: &Value,
    field: &str,
    total: i64,
    default_percent: i64,
    up: bool,
) -> i64 {
    let value = workload
        .pointer(&format!("/spec/strategy/rollingUpdate/{field}"))
        .or_else(|| workload.pointer(&format!("/spec/updateStrategy/rollingUpdate/{field}")));
    let percent = |p: i64| {
        let scaled = total.saturating_mul(p);
        if up {
            (scaled + 99) / 100
        } else {
            scaled / 100
        }
    };
    match value {
        Some(Value::Number(n)) => n.as_i64().unwrap_or(0),
        Some(Value::String(s)) => s
            .strip_suffix('%')
            .and_then(|p| p.parse::<i64>().ok())
            .map_or(0, percent),
        _ => percent(default_percent),
    }
}

/// The controller references a patch or a body adds (`ownerReferences` values of a JSON patch, or in a
/// merge patch's metadata).
fn added_controller_refs(body: Option<&Value>) -> Vec<objects::OwnerRef> {
    let Some(body) = body else {
        return Vec::new();
    };
    let values: Vec<&Value> = match body {
        Value::Array(ops) => ops
            .iter()
            .filter(|op| op.get("op").and_then(Value::as_str) != Some("test"))
            .filter(|op| {
                op.get("path")
                    .and_then(Value::as_str)
                    .is_some_and(|p| p.starts_with("/metadata/ownerReferences"))
            })
            .filter_map(|op| op.get("value"))
            .collect(),
        _ => body
            .pointer("/metadata/ownerReferences")
            .into_iter()
            .collect(),
    };
    values
        .into_iter()
        .flat_map(objects::owner_refs_in)
        .filter(|r| r.controller)
        .collect()
}

/// `apiVersion/plural namespace/name` of the object a write changes (`None` for a creation).
fn written_object(request: &RecordedRequest) -> Option<String> {
    let name = request.name.as_deref()?;
    if request.verb == Verb::Create {
        return None;
    }
    let group_version = if request.plural() == "pods" {
        "v1"
    } else {
        "apps/v1"
    };
    Some(format!(
        "{group_version}/{} {}/{name}",
        request.plural(),
        request.namespace.as_deref().unwrap_or_default()
    ))
}

/// Why the cluster is not in the state the controllers must bring it to once nothing changes any
/// more (empty when it is): every Deployment rolled out (one ReplicaSet of its template with all the
/// pods, Ready, status complete) unless paused, every ReplicaSet with its number of live pods and a
/// true status, every DaemonSet with one current pod on each node that should run it and a true
/// status, no orphan a live owner would adopt.
pub fn steady_state(api: &RecordedApi) -> Vec<String> {
    let mut problems = Vec::new();
    let pods: Vec<Value> = api
        .objects(PODS)
        .into_iter()
        .filter(|p| !is_terminating(p))
        .collect();
    let replica_sets = api.objects(REPLICA_SETS);
    let live_pods_of = |uid: &str| -> Vec<&Value> {
        pods.iter()
            .filter(|p| objects::controller_of(p).is_some_and(|o| o.uid == uid))
            .collect()
    };
    for rs in replica_sets.iter().filter(|rs| !is_terminating(rs)) {
        let name = objects::name(rs);
        let want = objects::spec_replicas(rs);
        let live = live_pods_of(objects::uid(rs));
        if live.len() as i64 != want {
            problems.push(format!(
                "ReplicaSet {name}: {} live pods, wants {want}",
                live.len()
            ));
        }
        problems.extend(status_problems(
            "ReplicaSet",
            rs,
            &["replicas", "readyReplicas", "availableReplicas"],
            want,
        ));
        problems.extend(unobserved("ReplicaSet", rs));
        for orphan in pods.iter().filter(|p| objects::controller_of(p).is_none()) {
            if objects::selector_matches(rs.pointer("/spec/selector"), &objects::labels(orphan)) {
                problems.push(format!(
                    "pod {} is an orphan ReplicaSet {name} selects",
                    objects::name(orphan)
                ));
            }
        }
    }
    for deployment in api
        .objects(DEPLOYMENTS)
        .iter()
        .filter(|d| !is_terminating(d))
    {
        problems.extend(deployment_problems(deployment, &replica_sets, &pods));
    }
    let nodes = api.objects(NODES);
    for daemon_set in api
        .objects(DAEMON_SETS)
        .iter()
        .filter(|d| !is_terminating(d))
    {
        problems.extend(daemon_set_problems(daemon_set, &nodes, &pods));
    }
    problems
}

fn deployment_problems(deployment: &Value, replica_sets: &[Value], pods: &[Value]) -> Vec<String> {
    let mut problems = Vec::new();
    let name = objects::name(deployment);
    let uid = objects::uid(deployment);
    let replicas = objects::spec_replicas(deployment);
    problems.extend(unobserved("Deployment", deployment));
    if deployment.pointer("/spec/paused").and_then(Value::as_bool) == Some(true) {
        return problems;
    }
    let template_images = objects::images(deployment.pointer("/spec/template/spec"));
    let owned: Vec<&Value> = replica_sets
        .iter()
        .filter(|rs| objects::controller_of(rs).is_some_and(|o| o.uid == uid))
        .collect();
    let current: Vec<&&Value> = owned
        .iter()
        .filter(|rs| objects::images(rs.pointer("/spec/template/spec")) == template_images)
        .collect();
    if current.len() != 1 {
        problems.push(format!(
            "Deployment {name}: {} ReplicaSets of its template",
            current.len()
        ));
    }
    for rs in &owned {
        let want = if current.iter().any(|c| objects::uid(c) == objects::uid(rs)) {
            replicas
        } else {
            0
        };
        if objects::spec_replicas(rs) != want {
            problems.push(format!(
                "Deployment {name}: ReplicaSet {} has {} replicas, should have {want}",
                objects::name(rs),
                objects::spec_replicas(rs)
            ));
        }
    }
    let owned_uids: BTreeSet<&str> = owned.iter().map(|rs| objects::uid(rs)).collect();
    let its_pods = pods
        .iter()
        .filter(|p| objects::controller_of(p).is_some_and(|o| owned_uids.contains(o.uid.as_str())))
        .filter(|p| objects::images(p.get("spec")) == template_images && objects::is_ready(p))
        .count() as i64;
    if its_pods != replicas {
        problems.push(format!(
            "Deployment {name}: {its_pods} ready pods of its template, wants {replicas}"
        ));
    }
    problems.extend(status_problems(
        "Deployment",
        deployment,
        &[
            "replicas",
            "updatedReplicas",
            "readyReplicas",
            "availableReplicas",
        ],
        replicas,
    ));
    problems
}

/// The counters among `fields` of `object`'s status that are not `want`.
fn status_problems(kind: &str, object: &Value, fields: &[&str], want: i64) -> Vec<String> {
    fields
        .iter()
        .filter_map(|field| {
            let have = objects::status_number(object, field);
            (have != want).then(|| {
                format!(
                    "{kind} {}: status.{field} {have} != {want}",
                    objects::name(object)
                )
            })
        })
        .collect()
}

/// That `object`'s generation is not observed yet, if it is not.
fn unobserved(kind: &str, object: &Value) -> Option<String> {
    (objects::observed_generation(object) != objects::generation(object))
        .then(|| format!("{kind} {}: generation not observed", objects::name(object)))
}

fn daemon_set_problems(daemon_set: &Value, nodes: &[Value], pods: &[Value]) -> Vec<String> {
    let mut problems = Vec::new();
    let name = objects::name(daemon_set);
    let uid = objects::uid(daemon_set);
    let template_images = objects::images(daemon_set.pointer("/spec/template/spec"));
    let selector = daemon_set.pointer("/spec/template/spec/nodeSelector");
    let eligible: Vec<&str> = nodes
        .iter()
        .filter(|node| !is_terminating(node))
        .filter(|node| {
            let labels = objects::labels(node);
            selector
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
                .all(|(k, v)| labels.get(k).map(String::as_str) == v.as_str())
        })
        .filter(|node| {
            !node
                .pointer("/spec/taints")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .any(|t| {
                    matches!(
                        t.get("effect").and_then(Value::as_str),
                        Some("NoSchedule" | "NoExecute")
                    )
                })
        })
        .map(objects::name)
        .collect();
    let its_pods: Vec<&Value> = pods
        .iter()
        .filter(|p| objects::controller_of(p).is_some_and(|o| o.uid == uid))
        .collect();
    for node in &eligible {
        let on_node: Vec<&&Value> = its_pods
            .iter()
            .filter(|p| objects::pod_node(p).as_deref() == Some(*node))
            .collect();
        let current = on_node
            .iter()
            .filter(|p| objects::images(p.get("spec")) == template_images && objects::is_ready(p))
            .count();
        if on_node.len() != 1 || current != 1 {
            problems.push(format!(
                "DaemonSet {name}: node {node} has {} pods, {current} current and ready",
                on_node.len()
            ));
        }
    }
    for pod in &its_pods {
        if let Some(node) = objects::pod_node(pod)
            && !eligible.contains(&node.as_str())
        {
            problems.push(format!(
                "DaemonSet {name}: pod {} on node {node}, which should not run it",
                objects::name(pod)
            ));
        }
    }
    let want = eligible.len() as i64;
    problems.extend(status_problems(
        "DaemonSet",
        daemon_set,
        &[
            "desiredNumberScheduled",
            "currentNumberScheduled",
            "updatedNumberScheduled",
            "numberReady",
            "numberAvailable",
        ],
        want,
    ));
    problems.extend(unobserved("DaemonSet", daemon_set));
    problems
}
