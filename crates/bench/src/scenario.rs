//! The scenarios, their sizes, and the workloads each one creates and changes.
//!
//! Every object a scenario creates carries `bench.minikcm.dev/role: workload`, and every pod template
//! `bench.minikcm.dev/rev: <n>`: the rolling scenarios change the template by bumping `rev`, and the
//! ready-pods series counts the Ready pods of the revision being rolled out.

use std::collections::BTreeMap;
use std::time::Duration;

use clap::ValueEnum;
use serde::Serialize;
use serde_json::{Value, json};

pub(crate) const ROLE_LABEL: &str = "bench.minikcm.dev/role";
pub(crate) const REV_LABEL: &str = "bench.minikcm.dev/rev";
/// Objects whose status is waited for as the scenario's end.
pub(crate) const ROLE_WORKLOAD: &str = "workload";
/// The small objects that show each controller has started (see `run::wait_for_controllers`).
pub(crate) const ROLE_PROBE: &str = "probe";

/// What a scenario does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scenario {
    /// One Deployment from 0 to N pods, until it is complete and available.
    ScaleUp,
    /// A Deployment of N pods gets a new template (maxSurge 25 %, maxUnavailable 25 %), until done.
    RollingUpdate,
    /// A DaemonSet on every node, until all its pods are updated and available.
    Daemonset,
    /// Many pods in many ReplicaSets, until all are ready; then idle CPU and steady RSS after settling.
    Steady,
    /// Many Deployments get a new template at the same time, until all are done.
    ConcurrentRollouts,
    /// A start with every Deployment's status stale, and one scale made at the first write: how long
    /// that fresh change waits behind the initial flood (`fresh.rs`; not in the default list).
    FreshUnderLoad,
    /// Two leader-elected replicas; the leader is killed and a Deployment scaled at once: how long until
    /// the standby has reconciled the change (`failover.rs`; not in the default list).
    Failover,
    /// Memory, CPU per pod event, start-up and a forced relist at growing numbers of cached pods, and
    /// the memory per pod fitted and projected (`scale.rs`; not in the default list).
    Scale,
}

impl Scenario {
    pub const ALL: [Scenario; 5] = [
        Scenario::ScaleUp,
        Scenario::RollingUpdate,
        Scenario::Daemonset,
        Scenario::Steady,
        Scenario::ConcurrentRollouts,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Scenario::ScaleUp => "scale-up",
            Scenario::RollingUpdate => "rolling-update",
            Scenario::Daemonset => "daemonset",
            Scenario::Steady => "steady",
            Scenario::ConcurrentRollouts => "concurrent-rollouts",
            Scenario::FreshUnderLoad => "fresh-under-load",
            Scenario::Failover => "failover",
            Scenario::Scale => "scale",
        }
    }

    /// What was measured, with the sizes, for the table and the plot titles.
    pub fn describe(self, sizes: &Sizes) -> String {
        match self {
            Scenario::ScaleUp => format!("0→{} pods, one Deployment", sizes.pods),
            Scenario::RollingUpdate => {
                format!("rolling update of {} pods (25%/25%)", sizes.pods)
            }
            Scenario::Daemonset => format!("DaemonSet on {} nodes", sizes.nodes),
            Scenario::Steady => format!(
                "{} pods in {} ReplicaSets",
                sizes.steady_pods(),
                sizes.steady_replica_sets
            ),
            Scenario::ConcurrentRollouts => format!(
                "{} concurrent rollouts of {} pods",
                sizes.rollouts, sizes.pods_per_rollout
            ),
            Scenario::FreshUnderLoad => format!(
                "a scale during the initial flood of {} stale Deployments",
                sizes.fresh_deployments
            ),
            Scenario::Failover => format!(
                "a scale at the leader's crash, {} pods cached",
                sizes
                    .failover_deployments
                    .saturating_mul(sizes.failover_pods_per_deployment)
            ),
            Scenario::Scale => format!(
                "{} pods cached",
                sizes
                    .scale_pods
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }

    /// The steady scenario creates its pods unthrottled: what it measures is the settled state, and at
    /// 20 requests per second creating 10 000 pods alone would take over eight minutes per run.
    pub fn unthrottled(self) -> bool {
        self == Scenario::Steady
    }
}

/// How big the scenarios are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Size {
    /// Seconds per run: the CI smoke test.
    Small,
    /// The sizes of issue 11 (about 40 minutes per round on a 2-core machine).
    Full,
}

/// The sizes of one `Size`.
#[derive(Debug, Clone, Serialize)]
pub struct Sizes {
    /// Pods of the scale-up and rolling-update Deployments.
    pub pods: u32,
    /// Simulated nodes of the plane (the DaemonSet runs on all of them).
    pub nodes: u32,
    pub steady_replica_sets: u32,
    pub steady_pods_per_replica_set: u32,
    pub rollouts: u32,
    pub pods_per_rollout: u32,
    /// Deployments of the fresh-under-load population, and their pods each.
    pub fresh_deployments: u32,
    pub fresh_pods_per_deployment: u32,
    /// Deployments of the failover population, and their pods each.
    pub failover_deployments: u32,
    pub failover_pods_per_deployment: u32,
    /// The sizes of the scale scenario, in pods (each rounded up to whole ReplicaSets of 10).
    pub scale_pods: Vec<u32>,
    /// How long a run idles after its scenario is done before steady RSS and idle CPU are read.
    #[serde(serialize_with = "seconds")]
    pub settle: Duration,
    /// The bound of each wait (controllers ready, scenario done, namespace gone).
    #[serde(serialize_with = "seconds")]
    pub timeout: Duration,
}

fn seconds<S: serde::Serializer>(duration: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(duration.as_secs_f64())
}

impl Sizes {
    pub fn of(size: Size) -> Self {
        match size {
            Size::Small => Sizes {
                pods: 20,
                nodes: 5,
                steady_replica_sets: 6,
                steady_pods_per_replica_set: 10,
                rollouts: 4,
                pods_per_rollout: 5,
                fresh_deployments: 40,
                fresh_pods_per_deployment: 2,
                failover_deployments: 5,
                failover_pods_per_deployment: 2,
                scale_pods: vec![100, 300],
                settle: Duration::from_secs(1),
                timeout: Duration::from_secs(180),
            },
            Size::Full => Sizes {
                pods: 500,
                nodes: 20,
                steady_replica_sets: 1000,
                steady_pods_per_replica_set: 10,
                rollouts: 20,
                pods_per_rollout: 25,
                fresh_deployments: 1000,
                fresh_pods_per_deployment: 10,
                failover_deployments: 100,
                failover_pods_per_deployment: 50,
                scale_pods: vec![1000, 5000, 10_000],
                settle: Duration::from_secs(30),
                timeout: Duration::from_secs(1200),
            },
        }
    }

    /// Sets the steady scenario's pods, keeping its pods per ReplicaSet (the last ReplicaSets may
    /// round the total up).
    pub(crate) fn set_steady_pods(&mut self, pods: u32) {
        let per_replica_set = self.steady_pods_per_replica_set.max(1);
        self.steady_replica_sets = pods.div_ceil(per_replica_set);
    }

    pub(crate) fn steady_pods(&self) -> u32 {
        self.steady_replica_sets
            .saturating_mul(self.steady_pods_per_replica_set)
    }
}

fn labels(app: &str, role: &str) -> Value {
    json!({ "app": app, ROLE_LABEL: role })
}

/// The pod template of every workload: one pause container, no grace period.
pub(crate) fn pod_template(app: &str, role: &str, rev: u32) -> Value {
    let mut template_labels = labels(app, role);
    template_labels[REV_LABEL] = json!(rev.to_string());
    json!({
        "metadata": { "labels": template_labels },
        "spec": {
            "containers": [{ "name": "app", "image": "registry.k8s.io/pause:3.10" }],
            "terminationGracePeriodSeconds": 0,
        }
    })
}

/// A Deployment of `replicas` pods with upstream's default rolling strategy written out.
pub(crate) fn deployment(name: &str, role: &str, replicas: u32, rev: u32) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": { "name": name, "labels": labels(name, role) },
        "spec": {
            "replicas": replicas,
            "selector": { "matchLabels": labels(name, role) },
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": { "maxSurge": "25%", "maxUnavailable": "25%" }
            },
            "template": pod_template(name, role, rev),
        }
    })
}

pub(crate) fn replica_set(name: &str, replicas: u32) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": { "name": name, "labels": labels(name, ROLE_WORKLOAD) },
        "spec": {
            "replicas": replicas,
            "selector": { "matchLabels": labels(name, ROLE_WORKLOAD) },
            "template": pod_template(name, ROLE_WORKLOAD, 1),
        }
    })
}

/// A DaemonSet; `node_selector` restricts it (the probe selects no node at all).
pub(crate) fn daemon_set(
    name: &str,
    role: &str,
    node_selector: Option<BTreeMap<&str, &str>>,
) -> Value {
    let mut template = pod_template(name, role, 1);
    if let Some(selector) = node_selector {
        template["spec"]["nodeSelector"] = json!(selector);
    }
    json!({
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": { "name": name, "labels": labels(name, role) },
        "spec": {
            "selector": { "matchLabels": labels(name, role) },
            "updateStrategy": { "type": "RollingUpdate", "rollingUpdate": { "maxUnavailable": 1 } },
            "template": template,
        }
    })
}

/// The merge patch that rolls a Deployment to template revision `rev`.
pub(crate) fn new_revision_patch(rev: u32) -> Value {
    json!({ "spec": { "template": { "metadata": { "labels": { REV_LABEL: rev.to_string() } } } } })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steady_pods_override_rounds_up_to_whole_replica_sets() {
        let mut sizes = Sizes::of(Size::Full);
        sizes.set_steady_pods(3000);
        assert_eq!(sizes.steady_replica_sets, 300);
        assert_eq!(sizes.steady_pods(), 3000);
        sizes.set_steady_pods(3005);
        assert_eq!(sizes.steady_replica_sets, 301);
        assert_eq!(sizes.steady_pods(), 3010);
    }

    #[test]
    fn selectors_do_not_include_the_revision() {
        let d = deployment("web", ROLE_WORKLOAD, 3, 1);
        assert_eq!(d["spec"]["selector"]["matchLabels"].get(REV_LABEL), None);
        assert_eq!(d["spec"]["template"]["metadata"]["labels"][REV_LABEL], "1");
        assert_eq!(
            new_revision_patch(2)["spec"]["template"]["metadata"]["labels"][REV_LABEL],
            "2"
        );
    }

    #[test]
    fn the_probe_daemon_set_selects_no_node() {
        let ds = daemon_set(
            "probe",
            ROLE_PROBE,
            Some(BTreeMap::from([("bench.minikcm.dev/none", "true")])),
        );
        assert_eq!(
            ds["spec"]["template"]["spec"]["nodeSelector"]["bench.minikcm.dev/none"],
            "true"
        );
    }

    #[test]
    fn full_sizes_are_the_issue_sizes() {
        let full = Sizes::of(Size::Full);
        assert_eq!(full.steady_pods(), 10_000);
        assert_eq!(full.steady_replica_sets, 1000);
        assert_eq!(full.rollouts, 20);
    }
}
