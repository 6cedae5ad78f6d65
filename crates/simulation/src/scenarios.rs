//! The named scenarios: a starting cluster and what users do to it, each a path through one of the
//! controllers' algorithms (slow start and deletion ranking, rolling updates with numbers and
//! percentages, Recreate, rollback, pause and resume, proportional scaling mid-rollout, DaemonSet
//! updates with surge or unavailability and node changes, adoption, release and orphans).

use serde_json::{Value, json};

use crate::cluster::{Action, Propagation};
use crate::objects::{DAEMON_SETS, DEPLOYMENTS, NODES, REPLICA_SETS};

/// The namespace every scenario's objects live in.
const NAMESPACE: &str = "sim";

/// A starting cluster and the users' operations on it.
pub struct Scenario {
    /// Its name (the exploration's table and `--scenario` use it).
    pub name: &'static str,
    /// What it exercises.
    pub about: &'static str,
    /// The objects the cluster starts with.
    pub objects: Vec<Value>,
    /// What users do, in order.
    pub operations: Vec<Operation>,
}

/// One user operation, and when it happens.
pub struct Operation {
    /// `None`: once the cluster is at rest; `Some(n)`: `n` steps after the previous operation, even
    /// mid-rollout.
    pub after_steps: Option<usize>,
    /// What the user does.
    pub action: Action,
}

fn at_rest(action: Action) -> Operation {
    Operation {
        after_steps: None,
        action,
    }
}

fn after(steps: usize, action: Action) -> Operation {
    Operation {
        after_steps: Some(steps),
        action,
    }
}

fn node(name: &str, labels: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    })
}

fn nodes(count: usize) -> Vec<Value> {
    (1..=count)
        .map(|i| node(&format!("node-{i}"), json!({"pool": "a"})))
        .collect()
}

fn template(app: &str, image: &str) -> Value {
    json!({
        "metadata": {"labels": {"app": app}},
        "spec": {
            "containers": [{"name": "main", "image": image}],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "schedulerName": "default-scheduler",
        },
    })
}

fn deployment(name: &str, replicas: i64, strategy: Value) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"app": name}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": template(name, "app:v1"),
            "strategy": strategy,
            "minReadySeconds": 0,
            "revisionHistoryLimit": 10,
            "progressDeadlineSeconds": 600,
        },
    })
}

fn rolling(surge: Value, unavailable: Value) -> Value {
    json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable}})
}

fn replica_set(name: &str, replicas: i64) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"app": "web"}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": template("web", "app:v1"),
            "minReadySeconds": 0,
        },
    })
}

fn daemon_set(name: &str, surge: i64, unavailable: i64, node_selector: Option<Value>) -> Value {
    let mut ds = json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"app": name}},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": template(name, "agent:v1"),
            "updateStrategy": {"type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable}},
            "minReadySeconds": 0,
            "revisionHistoryLimit": 10,
        },
    });
    if let Some(selector) = node_selector {
        ds["spec"]["template"]["spec"]["nodeSelector"] = selector;
    }
    ds
}

fn orphan_pod(name: &str) -> Value {
    let mut pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"app": "web"}},
    });
    pod["spec"] = template("web", "app:v1")["spec"].clone();
    pod
}

fn patch(resource: &'static str, name: &'static str, patch: Value) -> Action {
    let namespace = if resource == NODES { "" } else { NAMESPACE };
    Action::Patch {
        resource,
        namespace,
        name,
        patch,
    }
}

fn image(resource: &'static str, name: &'static str, image: &str) -> Action {
    patch(
        resource,
        name,
        json!({"spec": {"template": {"spec": {"containers": [{"name": "main", "image": image}]}}}}),
    )
}

fn scale(resource: &'static str, name: &'static str, replicas: i64) -> Action {
    patch(resource, name, json!({"spec": {"replicas": replicas}}))
}

/// Every named scenario.
pub fn all() -> Vec<Scenario> {
    vec![
        Scenario {
            name: "replicaset-scale",
            about: "a ReplicaSet created with 5 replicas (slow start), scaled to 2 (deletion ranking), one pod evicted, then scaled to 4",
            objects: [nodes(2), vec![replica_set("web", 5)]].concat(),
            operations: vec![
                at_rest(scale(REPLICA_SETS, "web", 2)),
                at_rest(Action::DeletePod {
                    label: ("app", "web"),
                    n: 0,
                }),
                at_rest(scale(REPLICA_SETS, "web", 4)),
            ],
        },
        Scenario {
            name: "deployment-rolling",
            about: "a rolling update of 4 replicas, maxSurge 1, maxUnavailable 1",
            objects: [
                nodes(2),
                vec![deployment("web", 4, rolling(json!(1), json!(1)))],
            ]
            .concat(),
            operations: vec![at_rest(image(DEPLOYMENTS, "web", "app:v2"))],
        },
        Scenario {
            name: "deployment-rolling-percent",
            about: "a rolling update of 5 replicas, maxSurge 40%, maxUnavailable 20%",
            objects: [
                nodes(2),
                vec![deployment("web", 5, rolling(json!("40%"), json!("20%")))],
            ]
            .concat(),
            operations: vec![at_rest(image(DEPLOYMENTS, "web", "app:v2"))],
        },
        Scenario {
            name: "deployment-recreate",
            about: "a Recreate update of 3 replicas: every old pod gone before a new one",
            objects: [
                nodes(2),
                vec![deployment("web", 3, json!({"type": "Recreate"}))],
            ]
            .concat(),
            operations: vec![at_rest(image(DEPLOYMENTS, "web", "app:v2"))],
        },
        Scenario {
            name: "deployment-rollback",
            about: "3 replicas updated to v2, then back to v1 (the old ReplicaSet scaled up again)",
            objects: [
                nodes(2),
                vec![deployment("web", 3, rolling(json!(1), json!(0)))],
            ]
            .concat(),
            operations: vec![
                at_rest(image(DEPLOYMENTS, "web", "app:v2")),
                at_rest(image(DEPLOYMENTS, "web", "app:v1")),
            ],
        },
        Scenario {
            name: "deployment-pause-resume",
            about: "a paused Deployment updated and scaled, then resumed",
            objects: [
                nodes(2),
                vec![deployment("web", 3, rolling(json!(1), json!(1)))],
            ]
            .concat(),
            operations: vec![
                at_rest(patch(DEPLOYMENTS, "web", json!({"spec": {"paused": true}}))),
                at_rest(image(DEPLOYMENTS, "web", "app:v2")),
                at_rest(scale(DEPLOYMENTS, "web", 5)),
                at_rest(patch(
                    DEPLOYMENTS,
                    "web",
                    json!({"spec": {"paused": false}}),
                )),
            ],
        },
        Scenario {
            name: "deployment-proportional",
            about: "6 replicas (maxSurge 2, maxUnavailable 1) updated, scaled to 9 mid-rollout, updated again mid-rollout",
            objects: [
                nodes(2),
                vec![deployment("web", 6, rolling(json!(2), json!(1)))],
            ]
            .concat(),
            operations: vec![
                at_rest(image(DEPLOYMENTS, "web", "app:v2")),
                after(4, scale(DEPLOYMENTS, "web", 9)),
                after(4, image(DEPLOYMENTS, "web", "app:v3")),
            ],
        },
        Scenario {
            name: "daemonset-surge",
            about: "a DaemonSet on 3 nodes updated with maxSurge 1, maxUnavailable 0",
            objects: [nodes(3), vec![daemon_set("agent", 1, 0, None)]].concat(),
            operations: vec![at_rest(image(DAEMON_SETS, "agent", "agent:v2"))],
        },
        Scenario {
            name: "daemonset-unavailable",
            about: "a DaemonSet on 3 nodes updated with maxUnavailable 1",
            objects: [nodes(3), vec![daemon_set("agent", 0, 1, None)]].concat(),
            operations: vec![at_rest(image(DAEMON_SETS, "agent", "agent:v2"))],
        },
        Scenario {
            name: "daemonset-nodes",
            about: "a DaemonSet with a node selector as nodes are added, labelled, tainted NoExecute and removed",
            objects: vec![
                node("node-1", json!({"pool": "a"})),
                node("node-2", json!({"pool": "a"})),
                node("node-3", json!({})),
                daemon_set("agent", 0, 1, Some(json!({"pool": "a"}))),
            ],
            operations: vec![
                at_rest(Action::Put(node("node-4", json!({"pool": "a"})))),
                at_rest(patch(
                    NODES,
                    "node-3",
                    json!({"metadata": {"labels": {"pool": "a"}}}),
                )),
                at_rest(patch(
                    NODES,
                    "node-1",
                    json!({"spec": {"taints": [{"key": "gone", "value": "x", "effect": "NoExecute"}]}}),
                )),
                at_rest(Action::Delete {
                    resource: NODES,
                    namespace: "",
                    name: "node-2",
                    propagation: Propagation::Background,
                }),
            ],
        },
        Scenario {
            name: "adoption",
            about: "orphans adopted by a new ReplicaSet, one released by relabelling, the ReplicaSet deleted with orphans and its pods adopted by another",
            objects: [
                nodes(2),
                vec![
                    orphan_pod("web-a"),
                    orphan_pod("web-b"),
                    replica_set("web", 3),
                ],
            ]
            .concat(),
            operations: vec![
                at_rest(Action::Patch {
                    resource: crate::objects::PODS,
                    namespace: NAMESPACE,
                    name: "web-a",
                    patch: json!({"metadata": {"labels": {"app": "other"}}}),
                }),
                at_rest(Action::Delete {
                    resource: REPLICA_SETS,
                    namespace: NAMESPACE,
                    name: "web",
                    propagation: Propagation::Orphan,
                }),
                at_rest(Action::Put(replica_set("web-2", 2))),
            ],
        },
        Scenario {
            name: "adoption-by-deleted-owner",
            about: "an orphan appears as its would-be owner is deleted in the foreground",
            objects: [nodes(2), vec![replica_set("web", 2)]].concat(),
            operations: vec![
                at_rest(Action::Put(orphan_pod("web-x"))),
                after(
                    0,
                    Action::Delete {
                        resource: REPLICA_SETS,
                        namespace: NAMESPACE,
                        name: "web",
                        propagation: Propagation::Foreground,
                    },
                ),
            ],
        },
    ]
}

/// The scenario named `name`.
pub fn named(name: &str) -> Option<Scenario> {
    all().into_iter().find(|s| s.name == name)
}
