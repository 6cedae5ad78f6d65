//! The rest of the cluster around the controllers: the API server's state (the recorded API), and what
//! the scheduler, the kubelets, the garbage collector and users do to it. All of it writes without a
//! request ([`RecordedApi::put`], [`RecordedApi::remove`]), so none of it is the controllers' and no
//! fault touches it.
//!
//! The cluster acts in steps the run chooses (`crate::run`): one step does everything pending at once,
//! in a fixed order — terminating pods leave (their grace period is not waited for), dependents of
//! vanished owners are collected, unbound pods are bound, bound pods start and become Ready. Pods are
//! Ready as soon as they run (no probes) and leave one cluster step after their deletion.
//!
//! The cluster's clock starts in 2020, in the past of the controllers' own clock (they read the wall
//! clock): every pod has been Ready for years when a controller looks, so `minReadySeconds` and
//! progress deadlines are not exercised here (the e2e tests on the real plane cover them).

use mini_kcm_runtime::recorded_api::RecordedApi;
use serde_json::{Value, json};

use crate::objects::{
    self, DAEMON_SETS, DEPLOYMENTS, NODES, PODS, REPLICA_SETS, REVISIONS, is_terminating,
};

/// How an object is deleted (`kubectl delete --cascade=...`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    /// The object goes at once; the garbage collector then deletes its dependents.
    Background,
    /// Its dependents lose their reference to it first, and stay.
    Orphan,
    /// The object is marked deleted (`foregroundDeletion` finalizer) until its dependents are gone.
    Foreground,
}

/// What a user does to the cluster.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Creates (or replaces) an object.
    Put(Value),
    /// Merges a patch into an object (`kubectl patch --type merge`).
    Patch {
        /// Its resource (`crate::objects::DEPLOYMENTS`, ...).
        resource: &'static str,
        /// Its namespace (empty for a node).
        namespace: &'static str,
        /// Its name.
        name: &'static str,
        /// The merge patch.
        patch: Value,
    },
    /// Deletes an object.
    Delete {
        /// Its resource.
        resource: &'static str,
        /// Its namespace (empty for a node).
        namespace: &'static str,
        /// Its name.
        name: &'static str,
        /// What becomes of its dependents.
        propagation: Propagation,
    },
    /// Deletes the `n`-th (by name) of the pods a label selects, as an eviction or a user would.
    DeletePod {
        /// The label and its value.
        label: (&'static str, &'static str),
        /// Which of the selected pods, by name.
        n: usize,
    },
}

/// The cluster's state and its non-controller actors.
pub struct Cluster {
    /// The API server's state, shared with the controllers' client.
    pub api: RecordedApi,
    /// Seconds since the simulation began, as the cluster writes times.
    seconds: u64,
}

impl Cluster {
    /// An empty cluster whose pod deletions are graceful (the kubelet finishes them).
    pub fn new() -> Self {
        let api = RecordedApi::new();
        api.graceful_pod_deletion();
        let cluster = Cluster { api, seconds: 0 };
        cluster.api.set_time(cluster.now());
        cluster
    }

    /// The simulated time, as RFC 3339.
    pub fn now(&self) -> String {
        let (h, m, s) = (
            self.seconds / 3600,
            (self.seconds / 60) % 60,
            self.seconds % 60,
        );
        let day = 1 + h / 24;
        format!("2020-01-{day:02}T{:02}:{m:02}:{s:02}Z", h % 24)
    }

    /// Sets the clock to `elapsed` since the simulation began (the run's simulated time).
    pub fn set_clock(&mut self, elapsed: std::time::Duration) {
        self.seconds = elapsed.as_secs();
        self.api.set_time(self.now());
    }

    /// Does what a user asked.
    pub fn act(&self, action: &Action) {
        match action {
            Action::Put(object) => {
                self.api.put(object.clone());
            }
            Action::Patch {
                resource,
                namespace,
                name,
                patch,
            } => {
                if let Some(mut object) = self.api.object(resource, namespace, name) {
                    objects::merge(&mut object, patch);
                    self.api.put(object);
                }
            }
            Action::Delete {
                resource,
                namespace,
                name,
                propagation,
            } => self.delete(resource, namespace, name, *propagation),
            Action::DeletePod { label, n } => {
                let mut selected: Vec<Value> = self
                    .api
                    .objects(PODS)
                    .into_iter()
                    .filter(|p| !is_terminating(p))
                    .filter(|p| {
                        objects::labels(p).get(label.0).map(String::as_str) == Some(label.1)
                    })
                    .collect();
                selected.sort_by(|a, b| objects::name(a).cmp(objects::name(b)));
                if let Some(pod) = selected.get(*n) {
                    self.delete(
                        PODS,
                        objects::namespace(pod),
                        objects::name(pod),
                        Propagation::Background,
                    );
                }
            }
        }
    }

    fn delete(&self, resource: &str, namespace: &str, name: &str, propagation: Propagation) {
        let Some(object) = self.api.object(resource, namespace, name) else {
            return;
        };
        if resource == PODS {
            self.mark_deleted(object);
            return;
        }
        match propagation {
            Propagation::Background => {
                self.api.remove(resource, namespace, name);
            }
            Propagation::Orphan => {
                let owner = objects::uid(&object).to_string();
                for dependent in self.dependents_of(&owner) {
                    let mut freed = dependent.clone();
                    let kept: Vec<Value> = freed
                        .pointer("/metadata/ownerReferences")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter(|r| r.get("uid").and_then(Value::as_str) != Some(owner.as_str()))
                        .cloned()
                        .collect();
                    freed["metadata"]["ownerReferences"] = json!(kept);
                    self.api.put(freed);
                }
                self.api.remove(resource, namespace, name);
            }
            Propagation::Foreground => {
                let mut marked = object;
                marked["metadata"]["deletionTimestamp"] = json!(self.now());
                marked["metadata"]["finalizers"] = json!(["foregroundDeletion"]);
                self.api.put(marked);
            }
        }
    }

    /// Marks a pod deleted, with the default grace period.
    fn mark_deleted(&self, mut pod: Value) {
        if is_terminating(&pod) {
            return;
        }
        pod["metadata"]["deletionTimestamp"] = json!(self.now());
        pod["metadata"]["deletionGracePeriodSeconds"] = json!(30);
        self.api.put(pod);
    }

    /// Objects whose owner references name `owner` (a UID).
    fn dependents_of(&self, owner: &str) -> Vec<Value> {
        [PODS, REPLICA_SETS, REVISIONS]
            .into_iter()
            .flat_map(|resource| self.api.objects(resource))
            .filter(|o| objects::owner_refs(o).iter().any(|r| r.uid == owner))
            .collect()
    }

    /// Whether an owner reference names an object that exists with that UID.
    fn owner_exists(&self, owner: &objects::OwnerRef, namespace: &str) -> bool {
        objects::resource_of_kind(&owner.kind).is_none_or(|resource| {
            self.api
                .object(resource, namespace, &owner.name)
                .is_some_and(|o| objects::uid(&o) == owner.uid)
        })
    }

    /// One step of the scheduler, the kubelets and the garbage collector: everything pending, at
    /// once. Returns how many objects changed (0: the cluster is at rest).
    pub fn step(&self) -> usize {
        let mut changes = 0;
        let nodes = self.api.objects(NODES);
        // The kubelets finish terminating pods; pods of vanished nodes are collected.
        for pod in self.api.objects(PODS) {
            let node_gone = objects::pod_node(&pod).is_some_and(|n| {
                pod.pointer("/spec/nodeName").is_some()
                    && !nodes.iter().any(|node| objects::name(node) == n)
            });
            if is_terminating(&pod) || node_gone {
                self.api
                    .remove(PODS, objects::namespace(&pod), objects::name(&pod));
                changes += 1;
            }
        }
        // The garbage collector: dependents of vanished owners, and of owners deleted in the
        // foreground; such an owner goes once its dependents are gone.
        for resource in [PODS, REPLICA_SETS, REVISIONS] {
            for object in self.api.objects(resource) {
                let namespace = objects::namespace(&object).to_string();
                let orphaned = objects::owner_refs(&object).iter().any(|owner| {
                    !self.owner_exists(owner, &namespace)
                        || objects::resource_of_kind(&owner.kind)
                            .and_then(|r| self.api.object(r, &namespace, &owner.name))
                            .is_some_and(|o| is_terminating(&o))
                });
                if !orphaned {
                    continue;
                }
                if resource == PODS {
                    if !is_terminating(&object) {
                        self.mark_deleted(object);
                        changes += 1;
                    }
                } else {
                    self.api
                        .remove(resource, &namespace, objects::name(&object));
                    changes += 1;
                }
            }
        }
        for resource in [DEPLOYMENTS, REPLICA_SETS, DAEMON_SETS] {
            for owner in self.api.objects(resource) {
                if is_terminating(&owner) && self.dependents_of(objects::uid(&owner)).is_empty() {
                    self.api
                        .remove(resource, objects::namespace(&owner), objects::name(&owner));
                    changes += 1;
                }
            }
        }
        // The scheduler binds, the kubelets start pods and report them Ready.
        for pod in self.api.objects(PODS) {
            if is_terminating(&pod) {
                continue;
            }
            let mut changed = pod.clone();
            if pod.pointer("/spec/nodeName").is_none() {
                let Some(node) = objects::pod_node(&pod).or_else(|| self.least_busy_node(&nodes))
                else {
                    continue;
                };
                changed["spec"]["nodeName"] = json!(node);
            }
            if !objects::is_ready(&pod) {
                changed["status"] = json!({
                    "phase": "Running",
                    "startTime": self.now(),
                    "conditions": [
                        {"type": "PodScheduled", "status": "True", "lastTransitionTime": self.now()},
                        {"type": "Ready", "status": "True", "lastTransitionTime": self.now()},
                        {"type": "ContainersReady", "status": "True", "lastTransitionTime": self.now()},
                    ],
                });
            }
            if changed != pod {
                self.api.put(changed);
                changes += 1;
            }
        }
        changes
    }

    /// The schedulable node with the fewest pods (by name on a tie), for a pod not pinned to one.
    fn least_busy_node(&self, nodes: &[Value]) -> Option<String> {
        let pods = self.api.objects(PODS);
        nodes
            .iter()
            .filter(|n| n.pointer("/spec/unschedulable").and_then(Value::as_bool) != Some(true))
            .map(|n| {
                let name = objects::name(n).to_string();
                let load = pods
                    .iter()
                    .filter(|p| p.pointer("/spec/nodeName").and_then(Value::as_str) == Some(&name))
                    .count();
                (load, name)
            })
            .min()
            .map(|(_, name)| name)
    }
}

impl Default for Cluster {
    fn default() -> Self {
        Cluster::new()
    }
}
