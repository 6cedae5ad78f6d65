//! The bad-input catalogue: malformed and edge-case objects of all three kinds, on both families, each with
//! the outcome it must reach. An object is either refused by the API server (apps/v1 and the copy alike,
//! the message naming the same field), or accepted and its trouble surfaced as upstream surfaces it (a
//! `FailedCreate` Warning event, a `ReplicaFailure` or `Progressing` condition), or accepted and reconciled
//! to a definite state. Meanwhile a normal Deployment in the same manager scales 0 → 3 and rolls out, and
//! afterwards the manager must be idle: no sync panicked, the workqueues go quiet, and only the keys of
//! objects whose pods are refused wait in a backoff, with retries bounded by the exponential backoff.
//!
//! A plane of its own (the catalogue installs a ResourceQuota and runs two managers at once); the two
//! families run in parallel, each in its own namespace with its own manager.

// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use futures::future::join_all;
use k8s_openapi::api::core::v1::{Event, Node, ResourceQuota};
use kube::Api;
use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use kube::discovery::ApiResource;
use kube::runtime::watcher;
use mini_kcm_e2e::{
    TIMEOUT, TestManager, deployment_of, deployments, for_both_families, replica_sets,
    wait_deployment_complete,
};
use mini_kcm_manager::Kinds;
use mini_kcm_runtime::api::kinds::{ApiFamily, WorkloadKind};
use mini_kcm_testkit::{PlaneConfig, PlaneInfo, TestNamespace, shared_plane};
use serde_json::{Value, json};

fn plane() -> &'static PlaneInfo {
    shared_plane(PlaneConfig::default())
}

for_both_families!(bad_input_is_refused_or_surfaced_and_the_manager_stays_quiet);

/// `--feature-gates` refuses what kube-controller-manager refuses: the list of gates it accepts
/// (`crates/runtime/data/kcm-feature-gates.txt`) is checked against the built kube-controller-manager of the
/// pinned version, each gate tried once (a locked one at the other value), and names it dropped refused.
#[tokio::test]
async fn feature_gate_names_are_those_kube_controller_manager_accepts() {
    use mini_kcm_local_plane::{Binaries, VersionSet};
    use mini_kcm_runtime::switches::features::{
        FeatureGates, KUBE_CONTROLLER_MANAGER_GATES, kube_controller_manager_gate,
    };
    let (pinned, selected) = (
        VersionSet::pinned().unwrap(),
        VersionSet::selected().unwrap(),
    );
    if pinned != selected {
        eprintln!(
            "skipped: the gate list is kube-controller-manager {}'s, the plane is {}",
            pinned.kubernetes, selected.kubernetes
        );
        return;
    }
    let kcm = Binaries::ensure(&pinned)
        .await
        .unwrap()
        .path("kube-controller-manager");
    // What kube-controller-manager says of `--feature-gates=NAME=VALUE` (it stops at the missing
    // kubeconfig when it accepts the flag).
    let answer = |gate: String| {
        let kcm = kcm.clone();
        async move {
            let out = tokio::process::Command::new(&kcm)
                .arg(format!("--feature-gates={gate}"))
                .arg("--kubeconfig=/nonexistent")
                .output()
                .await
                .unwrap();
            (gate, String::from_utf8_lossy(&out.stderr).into_owned())
        }
    };
    let mut probes = Vec::new();
    for line in KUBE_CONTROLLER_MANAGER_GATES
        .lines()
        .filter(|l| !l.starts_with('#'))
    {
        let name = line.split_whitespace().next().unwrap().to_string();
        let value = match kube_controller_manager_gate(&name).unwrap() {
            Some(locked) => !locked,
            None => true,
        };
        probes.push(format!("{name}={value}"));
    }
    assert!(
        probes.len() > 200,
        "the list has every gate: {}",
        probes.len()
    );
    let removed = ["LogarithmicScaleDown=true", "JobPodReplacementPolicy=true"];
    probes.extend(removed.iter().map(|g| g.to_string()));
    let mut answers = Vec::new();
    for chunk in probes.chunks(8) {
        answers.extend(join_all(chunk.iter().cloned().map(&answer)).await);
    }
    for (gate, said) in answers {
        let ours = FeatureGates::parse(&gate)
            .map(|_| ())
            .map_err(|e| e.to_string());
        if said.contains("unrecognized feature gate") || said.contains("feature is locked to") {
            let refused =
                ours.expect_err(&format!("kube-controller-manager refuses {gate}: {said}"));
            assert!(
                said.contains(&refused),
                "{gate}: ours {refused:?}, upstream {said}"
            );
        } else {
            // A foreign gate whose dependencies are off is refused upstream; here it is a known name,
            // ignored like every gate only other controllers consult (their dependencies are not
            // modelled: docs/versions-and-gates.md).
            assert!(
                said.contains("/nonexistent")
                    || said.contains("depends on features that are disabled"),
                "{gate}: upstream said {said}"
            );
            assert!(
                ours.is_ok(),
                "{gate} is known upstream, refused here: {ours:?}"
            );
        }
    }
}

/// The priority class no pod template may name: the Priority admission plugin refuses such pods.
const MISSING_PRIORITY_CLASS: &str = "no-such-priority";
/// The workqueue's per-key backoff (`default_controller_rate_limiter`): 5 ms doubling per failure.
const BACKOFF_BASE: Duration = Duration::from_millis(5);
/// The quiet window: no add and no retry in any of this family's queues for this long.
const QUIET: Duration = Duration::from_secs(10);
/// How long the manager may take to go quiet after the catalogue settled.
const QUIET_WITHIN: Duration = Duration::from_secs(120);

/// What the catalogue expects of one object.
enum Outcome {
    /// Both families refuse it; the message names this field.
    Rejected(&'static str),
    /// apps/v1 refuses it, validating the pod template (the message names the field `apps`); a copy's
    /// schema cannot express the rule (docs/crds.md), so the copy is accepted and every pod creation is
    /// refused naming the pod's field `pods`: `FailedCreate` events, and `ReplicaFailure` on ReplicaSets
    /// and Deployments.
    RefusedForPodsOnCopies {
        apps: &'static str,
        pods: &'static str,
    },
    /// apps/v1 refuses it as above; on a copy Deployment already its ReplicaSet copy is refused (the
    /// ReplicaSet's own labels are the template's), naming `field`: Warning `ReplicaSetCreateError` and
    /// Progressing False with that reason on the Deployment, as upstream reports a refused ReplicaSet.
    RefusedForReplicaSetsOnCopies {
        apps: &'static str,
        field: &'static str,
    },
    /// Both families accept it and pod validation or admission refuses its pods with a message containing
    /// this text (a quota, a missing priority class, what only pod validation checks): surfaced as above, on
    /// both families.
    PodsRefused(&'static str),
    /// Accepted, and the object reaches this state (`what`, checked on the object's JSON and the plane's
    /// node count), its generation observed.
    Reaches(&'static str, fn(&Value, usize) -> bool),
    /// A Deployment selecting on `pod-template-hash`: the copy's CRD refuses it (CEL); apps/v1 accepts it
    /// and the controller refuses to run it: Warning `SelectorUsesPodTemplateHash`, Progressing False, no
    /// ReplicaSet (upstream creates ReplicaSets without bound).
    SelectorOnPodTemplateHash,
}

/// A check of an object's JSON, given the plane's node count.
type StateCheck = Box<dyn Fn(&Value, usize) -> bool + Send + Sync>;

struct Case {
    name: &'static str,
    kind: WorkloadKind,
    /// Overlaid (JSON merge) on a valid spec selecting `app: <name>`.
    spec: Value,
    outcome: Outcome,
}

fn case(name: &'static str, kind: WorkloadKind, spec: Value, outcome: Outcome) -> Case {
    Case {
        name,
        kind,
        spec,
        outcome,
    }
}

/// A container with `extra` fields overlaid, as the only container of a template.
fn containers(extra: Value) -> Value {
    let mut container = json!({"name": "main", "image": "registry.k8s.io/pause:3.10"});
    merge(&mut container, extra);
    json!({"template": {"spec": {"containers": [container]}}})
}

fn status(object: &Value) -> &Value {
    &object["status"]
}

fn observed(object: &Value) -> bool {
    status(object)["observedGeneration"] == object["metadata"]["generation"]
}

fn int(object: &Value, field: &str) -> i64 {
    status(object)[field].as_i64().unwrap_or(0)
}

/// `(status, reason)` of the condition of `type_`.
fn condition<'a>(object: &'a Value, type_: &str) -> Option<(&'a str, &'a str)> {
    status(object)["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
        .map(|c| {
            (
                c["status"].as_str().unwrap_or(""),
                c["reason"].as_str().unwrap_or(""),
            )
        })
}

/// A Deployment (or ReplicaSet) whose `n` replicas are all available, generation observed.
fn available(object: &Value, n: i64) -> bool {
    observed(object)
        && int(object, "replicas") == n
        && int(object, "availableReplicas") == n
        && (object["kind"] != "Deployment" || int(object, "updatedReplicas") == n)
}

/// A DaemonSet serving every node of the plane, all ready (and, when `available`, available).
fn serving_every_node(object: &Value, nodes: usize, available: bool) -> bool {
    let nodes = nodes as i64;
    observed(object)
        && int(object, "desiredNumberScheduled") == nodes
        && int(object, "currentNumberScheduled") == nodes
        && int(object, "numberReady") == nodes
        && int(object, "numberAvailable") == if available { nodes } else { 0 }
}

fn catalogue() -> Vec<Case> {
    use Outcome::*;
    use WorkloadKind::{DaemonSet as Ds, Deployment as D, ReplicaSet as Rs};
    vec![
        // ---- refused by the API server, apps/v1 and copies alike ----
        case(
            "r-d-negative-replicas",
            D,
            json!({"replicas": -1}),
            Rejected("spec.replicas"),
        ),
        case(
            "r-rs-negative-min-ready",
            Rs,
            json!({"minReadySeconds": -1}),
            Rejected("spec.minReadySeconds"),
        ),
        case(
            "r-rs-selector-mismatch",
            Rs,
            json!({"template": {"metadata": {"labels": {"app": "other"}}}}),
            Rejected("`selector` does not match template `labels`"),
        ),
        case(
            "r-ds-empty-selector",
            Ds,
            json!({"selector": {"matchLabels": null}}),
            Rejected("empty selector is invalid for daemonset"),
        ),
        case(
            "r-d-surge-and-unavailable-0",
            D,
            json!({"strategy": {"rollingUpdate": {"maxSurge": 0, "maxUnavailable": 0}}}),
            Rejected("spec.strategy.rollingUpdate.maxUnavailable"),
        ),
        case(
            "r-d-surge-abc-percent",
            D,
            json!({"strategy": {"rollingUpdate": {"maxSurge": "abc%"}}}),
            Rejected("spec.strategy.rollingUpdate.maxSurge"),
        ),
        case(
            "r-d-deadline-not-above-min-ready",
            D,
            json!({"minReadySeconds": 10, "progressDeadlineSeconds": 10}),
            Rejected("spec.progressDeadlineSeconds"),
        ),
        case(
            "r-d-recreate-with-rolling-update",
            D,
            json!({"strategy": {"type": "Recreate", "rollingUpdate": {"maxSurge": 1}}}),
            Rejected("spec.strategy.rollingUpdate"),
        ),
        case(
            "r-d-no-containers",
            D,
            json!({"template": {"spec": {"containers": []}}}),
            Rejected("spec.template.spec.containers"),
        ),
        case(
            "r-rs-restart-never",
            Rs,
            json!({"template": {"spec": {"restartPolicy": "Never"}}}),
            Rejected("spec.template.spec.restartPolicy"),
        ),
        case(
            "r-rs-container-name",
            Rs,
            containers(json!({"name": "Not_A_Label"})),
            Rejected("spec.template.spec.containers[0].name"),
        ),
        case(
            "r-ds-toleration-operator",
            Ds,
            json!({"template": {"spec": {"tolerations": [{"key": "k", "operator": "Above", "value": "v"}]}}}),
            Rejected("spec.template.spec.tolerations[0].operator"),
        ),
        case(
            "r-ds-affinity-operator",
            Ds,
            json!({"template": {"spec": {"affinity": {"nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "k", "operator": "Near", "values": ["v"]}]}]}}}}}}),
            Rejected("matchExpressions[0].operator"),
        ),
        case(
            "r-ds-unavailable-0-no-surge",
            Ds,
            json!({"updateStrategy": {"rollingUpdate": {"maxUnavailable": 0}}}),
            Rejected("spec.updateStrategy.rollingUpdate.maxUnavailable"),
        ),
        case(
            "r-d-template-hash-selector",
            D,
            json!({"selector": {"matchLabels": {"pod-template-hash": "x"}},
                   "template": {"metadata": {"labels": {"pod-template-hash": "x"}}}}),
            SelectorOnPodTemplateHash,
        ),
        // ---- what only the pod template's validation checks: apps/v1 refuses the object, a copy is
        // ---- accepted and its pods (or its ReplicaSet) are refused; or both accept (the image) ----
        case(
            "p-rs-requests-over-limits",
            Rs,
            containers(json!({"resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}})),
            RefusedForPodsOnCopies {
                apps: "spec.template.spec.containers[0].resources.requests",
                pods: "spec.containers[0].resources.requests",
            },
        ),
        case(
            "p-rs-negative-memory",
            Rs,
            containers(json!({"resources": {"requests": {"memory": "-1Mi"}}})),
            RefusedForPodsOnCopies {
                apps: "spec.template.spec.containers[0].resources.requests[memory]",
                pods: "spec.containers[0].resources.requests[memory]",
            },
        ),
        case(
            "p-d-image-whitespace",
            D,
            containers(json!({"image": " registry.k8s.io/pause:3.10"})),
            // Only pod validation checks the image's whitespace; apps/v1 accepts the template too.
            PodsRefused("spec.containers[0].image"),
        ),
        case(
            "p-d-label-key",
            D,
            json!({"template": {"metadata": {"labels": {"bad key!": "x"}}}}),
            RefusedForReplicaSetsOnCopies {
                apps: "spec.template.labels",
                field: "metadata.labels",
            },
        ),
        case(
            "p-rs-host-port-host-network",
            Rs,
            json!({"template": {"spec": {"hostNetwork": true, "containers": [{
                "name": "main", "image": "registry.k8s.io/pause:3.10",
                "ports": [{"containerPort": 8080, "hostPort": 80}]}]}}}),
            RefusedForPodsOnCopies {
                apps: "spec.template.spec.containers[0].ports[0].hostPort",
                pods: "spec.containers[0].ports[0].hostPort",
            },
        ),
        case(
            "p-ds-unknown-volume",
            Ds,
            containers(json!({"volumeMounts": [{"name": "data", "mountPath": "/data"}]})),
            RefusedForPodsOnCopies {
                apps: "spec.template.spec.containers[0].volumeMounts[0].name",
                pods: "spec.containers[0].volumeMounts[0].name",
            },
        ),
        case(
            "p-ds-port-out-of-range",
            Ds,
            containers(json!({"ports": [{"containerPort": 70000}]})),
            RefusedForPodsOnCopies {
                apps: "spec.template.spec.containers[0].ports[0].containerPort",
                pods: "spec.containers[0].ports[0].containerPort",
            },
        ),
        // ---- pod admission: both accept, the pods are refused (the quota, a missing priority class) ----
        case(
            "q-rs-exceeds-quota",
            Rs,
            containers(json!({"resources": {"requests": {"cpu": "10m"}}})),
            PodsRefused("exceeded quota"),
        ),
        case(
            "q-d-missing-priority-class",
            D,
            json!({"template": {"spec": {"priorityClassName": MISSING_PRIORITY_CLASS}}}),
            PodsRefused("no PriorityClass with name no-such-priority"),
        ),
        case(
            "q-ds-missing-priority-class",
            Ds,
            json!({"template": {"spec": {"priorityClassName": MISSING_PRIORITY_CLASS}}}),
            PodsRefused("no PriorityClass with name no-such-priority"),
        ),
        // ---- accepted edge cases, each with the state it must reach ----
        case(
            "e-d-zero",
            D,
            json!({"replicas": 0}),
            Reaches("no pods, generation observed", |d, _| available(d, 0)),
        ),
        case(
            "e-d-surge-all",
            D,
            json!({"replicas": 2, "strategy": {"rollingUpdate": {"maxSurge": "100%", "maxUnavailable": "100%"}}}),
            Reaches("2 available", |d, _| available(d, 2)),
        ),
        case(
            "e-d-surge-huge",
            D,
            json!({"replicas": 2, "strategy": {"rollingUpdate": {"maxSurge": "10000%", "maxUnavailable": 0}}}),
            Reaches("2 available", |d, _| available(d, 2)),
        ),
        case(
            "e-d-min-ready-huge",
            D,
            json!({"minReadySeconds": 2_000_000_000, "progressDeadlineSeconds": 2_147_483_647}),
            Reaches("1 ready, 0 available, Available False", |d, _| {
                observed(d)
                    && int(d, "readyReplicas") == 1
                    && int(d, "availableReplicas") == 0
                    && condition(d, "Available").is_some_and(|(s, _)| s == "False")
            }),
        ),
        case(
            "e-d-deadline-1s",
            D,
            // Running but never Ready (a kwok behaviour): the 1 s deadline surely passes.
            json!({"progressDeadlineSeconds": 1,
                   "template": {"metadata": {"labels": {"minikcm.dev/kwok-behaviour": "never-ready"}}}}),
            Reaches("Progressing False ProgressDeadlineExceeded", |d, _| {
                observed(d)
                    && condition(d, "Progressing") == Some(("False", "ProgressDeadlineExceeded"))
            }),
        ),
        case(
            "e-d-paused-rollback",
            D,
            json!({"paused": true}),
            Reaches(
                "no ReplicaSet, Progressing Unknown DeploymentPaused, the rollback request left",
                |d, _| {
                    observed(d)
                        && d["metadata"]["annotations"]["deprecated.deployment.rollback.to"] == "1"
                        && int(d, "replicas") == 0
                        && condition(d, "Progressing") == Some(("Unknown", "DeploymentPaused"))
                },
            ),
        ),
        case(
            "e-d-history-0",
            D,
            json!({"revisionHistoryLimit": 0}),
            Reaches("1 available", |d, _| available(d, 1)),
        ),
        case(
            "e-d-recreate",
            D,
            json!({"strategy": {"type": "Recreate", "rollingUpdate": null}}),
            Reaches("1 available", |d, _| available(d, 1)),
        ),
        case(
            "e-d-not-in",
            D,
            json!({"selector": {"matchLabels": null, "matchExpressions": [
                {"key": "app", "operator": "In", "values": ["e-d-not-in"]},
                {"key": "tier", "operator": "DoesNotExist"}]}}),
            Reaches("1 available", |d, _| available(d, 1)),
        ),
        case(
            "e-rs-zero",
            Rs,
            json!({"replicas": 0}),
            Reaches("no pods, generation observed", |rs, _| available(rs, 0)),
        ),
        case(
            "e-rs-min-ready-huge",
            Rs,
            json!({"minReadySeconds": 2_000_000_000}),
            Reaches("1 ready, 0 available", |rs, _| {
                observed(rs) && int(rs, "readyReplicas") == 1 && int(rs, "availableReplicas") == 0
            }),
        ),
        case(
            "e-rs-exists-and-in",
            Rs,
            json!({"selector": {"matchLabels": null, "matchExpressions": [
                {"key": "app", "operator": "Exists"},
                {"key": "app", "operator": "In", "values": ["e-rs-exists-and-in"]}]}}),
            Reaches("1 available", |rs, _| available(rs, 1)),
        ),
        case(
            "e-ds-no-node",
            Ds,
            json!({"template": {"spec": {"nodeSelector": {"nowhere": "true"}}}}),
            Reaches("0 desired", |ds, _| {
                observed(ds) && int(ds, "desiredNumberScheduled") == 0
            }),
        ),
        case(
            "e-ds-tolerate-all",
            Ds,
            json!({"template": {"spec": {"tolerations": [{"operator": "Exists"}]}}}),
            Reaches("every node served", |ds, nodes| {
                serving_every_node(ds, nodes, true)
            }),
        ),
        case(
            "e-ds-on-delete-no-node",
            Ds,
            json!({"updateStrategy": {"type": "OnDelete", "rollingUpdate": null},
                   "template": {"spec": {"nodeSelector": {"nowhere": "true"}}}}),
            Reaches("0 desired", |ds, _| {
                observed(ds) && int(ds, "desiredNumberScheduled") == 0
            }),
        ),
        case(
            "e-ds-unavailable-all",
            Ds,
            json!({"updateStrategy": {"rollingUpdate": {"maxUnavailable": "100%"}}}),
            Reaches("every node served", |ds, nodes| {
                serving_every_node(ds, nodes, true)
            }),
        ),
        case(
            "e-ds-surge-all",
            Ds,
            json!({"updateStrategy": {"rollingUpdate": {"maxSurge": "100%", "maxUnavailable": 0}}}),
            Reaches("every node served", |ds, nodes| {
                serving_every_node(ds, nodes, true)
            }),
        ),
        case(
            "e-ds-min-ready-huge",
            Ds,
            json!({"minReadySeconds": 2_000_000_000}),
            Reaches("every node served, none available", |ds, nodes| {
                serving_every_node(ds, nodes, false)
            }),
        ),
    ]
}

/// The full object for `case` as `resource` (its family's kind): a valid spec selecting `app: <name>`,
/// overlaid with the case's.
fn object(case: &Case, resource: &ApiResource) -> DynamicObject {
    let mut spec = json!({
        "selector": {"matchLabels": {"app": case.name}},
        "template": {"metadata": {"labels": {"app": case.name}},
                     "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]}},
    });
    if case.kind != WorkloadKind::DaemonSet {
        spec["replicas"] = json!(1);
    }
    merge(&mut spec, case.spec.clone());
    let mut metadata = json!({"name": case.name});
    if case.name == "e-d-paused-rollback" {
        // A rollback request on a paused Deployment: paused wins, as upstream.
        metadata["annotations"] = json!({"deprecated.deployment.rollback.to": "1"});
    }
    serde_json::from_value(json!({
        "apiVersion": resource.api_version, "kind": resource.kind,
        "metadata": metadata, "spec": spec,
    }))
    .unwrap()
}

/// The message of a refusal (422 Invalid, or 400 when apps/v1 cannot decode the input).
fn refusal(result: &kube::Result<DynamicObject>) -> Option<String> {
    match result {
        Err(kube::Error::Api(status)) if matches!(status.code, 400 | 422) => {
            Some(status.message.clone())
        }
        _ => None,
    }
}

/// A Warning event the object must get (a Deployment's `FailedCreate`: on one of its ReplicaSets, which
/// create its pods).
struct ExpectedEvent {
    object: &'static str,
    kind: WorkloadKind,
    reason: &'static str,
    message: String,
}

impl ExpectedEvent {
    fn seen_in(&self, events: &[Event]) -> bool {
        events.iter().any(|e| {
            let about = e.involved_object.name.as_deref().unwrap_or("");
            let about_it = match self.kind {
                // The Deployment's pods are created by its ReplicaSet, which gets the event.
                WorkloadKind::Deployment if self.reason == "FailedCreate" => {
                    about.starts_with(&format!("{}-", self.object))
                }
                _ => about == self.object,
            };
            about_it
                && e.type_.as_deref() == Some("Warning")
                && e.reason.as_deref() == Some(self.reason)
                && e.message
                    .as_deref()
                    .is_some_and(|m| m.contains(&self.message))
        })
    }
}

/// Expects `case`'s pods to be refused with `message`: a FailedCreate Warning event, and on ReplicaSets
/// and Deployments a ReplicaFailure condition saying it.
fn pods_refused<'a>(
    case: &'a Case,
    message: String,
    events: &mut Vec<ExpectedEvent>,
    waits: &mut Vec<(&'a Case, String, StateCheck)>,
) {
    events.push(ExpectedEvent {
        object: case.name,
        kind: case.kind,
        reason: "FailedCreate",
        message: message.clone(),
    });
    if case.kind != WorkloadKind::DaemonSet {
        waits.push((
            case,
            format!("ReplicaFailure True FailedCreate naming {message:?}"),
            Box::new(move |o: &Value, _: usize| {
                status(o)["conditions"].as_array().is_some_and(|cs| {
                    cs.iter().any(|c| {
                        c["type"] == "ReplicaFailure"
                            && c["status"] == "True"
                            && c["reason"] == "FailedCreate"
                            && c["message"].as_str().is_some_and(|m| m.contains(&message))
                    })
                })
            }),
        ));
    }
}

/// The catalogue on one family, as the module says.
async fn bad_input_is_refused_or_surfaced_and_the_manager_stays_quiet(family: ApiFamily) {
    let started = Instant::now();
    let ns = TestNamespace::create(plane(), &format!("bad-input-{}", family.label())).await;
    let kinds = match family {
        ApiFamily::Apps => Kinds::Apps,
        ApiFamily::Copies => Kinds::Copies,
    };
    // A quota that admits no pod with resource requests (scope NotBestEffort): only the quota case's
    // template has requests that pass validation, so nothing else is affected.
    let quotas = ns.api::<ResourceQuota>();
    quotas
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "no-requests"},
                "spec": {"hard": {"pods": "0"}, "scopes": ["NotBestEffort"]},
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    ns.wait_for(
        &quotas,
        "no-requests",
        "the quota controller to compute usage",
        TIMEOUT,
        |q| {
            q.and_then(|q| q.status.as_ref())
                .is_some_and(|s| s.used.is_some())
        },
    )
    .await;
    let nodes = Api::<Node>::all(ns.client.clone())
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .len();
    let manager = TestManager::start(&ns, kinds).await;

    // The normal Deployment, at 0 replicas for now.
    deployments(&ns, family)
        .create(&PostParams::default(), &deployment_of("web", 0, family))
        .await
        .unwrap();

    // The whole catalogue at once.
    let cases = catalogue();
    let created_at = Instant::now();
    let results = join_all(cases.iter().map(|case| {
        let resource = case.kind.api_resource(family);
        let api: Api<DynamicObject> = Api::namespaced_with(ns.client.clone(), &ns.name, &resource);
        let object = object(case, &resource);
        async move { api.create(&PostParams::default(), &object).await }
    }))
    .await;

    // Refusals at creation, and what must happen to the accepted objects.
    let mut wrong = Vec::new();
    let mut waits: Vec<(&Case, String, StateCheck)> = Vec::new();
    let mut events = Vec::new();
    // The objects whose keys retry with backoff (their pods are refused).
    let mut failing = Vec::new();
    let (mut rejected, mut surfaced, mut reached) = (0, 0, 0);
    for (case, result) in cases.iter().zip(&results) {
        let accepted = result.is_ok();
        let refused = refusal(result);
        let expect_refusal = |field: &str, wrong: &mut Vec<String>| match &refused {
            Some(message) if message.contains(field) => {}
            Some(message) => wrong.push(format!(
                "{}: refused without naming {field:?}: {message}",
                case.name
            )),
            None => wrong.push(format!(
                "{}: not refused as expected: {result:?}",
                case.name
            )),
        };
        match (&case.outcome, family) {
            (Outcome::Rejected(field), _)
            | (Outcome::RefusedForPodsOnCopies { apps: field, .. }, ApiFamily::Apps)
            | (Outcome::RefusedForReplicaSetsOnCopies { apps: field, .. }, ApiFamily::Apps) => {
                expect_refusal(field, &mut wrong);
                rejected += 1;
            }
            (Outcome::SelectorOnPodTemplateHash, ApiFamily::Copies) => {
                expect_refusal("pod-template-hash", &mut wrong);
                rejected += 1;
            }
            _ if !accepted => wrong.push(format!("{}: refused: {result:?}", case.name)),
            (Outcome::RefusedForPodsOnCopies { pods, .. }, ApiFamily::Copies) => {
                pods_refused(case, pods.to_string(), &mut events, &mut waits);
                failing.push(case);
                surfaced += 1;
            }
            (Outcome::RefusedForReplicaSetsOnCopies { field, .. }, ApiFamily::Copies) => {
                events.push(ExpectedEvent {
                    object: case.name,
                    kind: case.kind,
                    reason: "ReplicaSetCreateError",
                    message: field.to_string(),
                });
                let field = field.to_string();
                waits.push((
                    case,
                    format!("Progressing False ReplicaSetCreateError naming {field:?}"),
                    Box::new(move |o: &Value, _: usize| {
                        status(o)["conditions"].as_array().is_some_and(|cs| {
                            cs.iter().any(|c| {
                                c["type"] == "Progressing"
                                    && c["status"] == "False"
                                    && c["reason"] == "ReplicaSetCreateError"
                                    && c["message"].as_str().is_some_and(|m| m.contains(&field))
                            })
                        })
                    }),
                ));
                failing.push(case);
                surfaced += 1;
            }
            (Outcome::PodsRefused(text), _) => {
                pods_refused(case, text.to_string(), &mut events, &mut waits);
                failing.push(case);
                surfaced += 1;
            }
            (Outcome::SelectorOnPodTemplateHash, ApiFamily::Apps) => {
                events.push(ExpectedEvent {
                    object: case.name,
                    kind: case.kind,
                    reason: "SelectorUsesPodTemplateHash",
                    message: "pod-template-hash".into(),
                });
                waits.push((
                    case,
                    "Progressing False SelectorUsesPodTemplateHash".into(),
                    Box::new(|o: &Value, _: usize| {
                        observed(o)
                            && condition(o, "Progressing")
                                == Some(("False", "SelectorUsesPodTemplateHash"))
                    }),
                ));
                surfaced += 1;
            }
            (Outcome::Reaches(what, check), _) => {
                let check = *check;
                waits.push((case, (*what).to_string(), Box::new(check)));
                reached += 1;
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} wrong outcomes:\n{}",
        wrong.len(),
        wrong.join("\n")
    );

    // Meanwhile: the normal Deployment scales 0 → 3 and rolls out a new template.
    let normal = async {
        let api = deployments(&ns, family);
        api.patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await
        .unwrap();
        wait_deployment_complete(&ns, family, "web", 3).await;
        api.patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"spec": {"template": {"metadata": {"annotations": {"rollout": "2"}}}}}),
            ),
        )
        .await
        .unwrap();
        wait_deployment_complete(&ns, family, "web", 3).await;
        let owned = replica_sets(&ns, family)
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|rs| {
                rs.metadata
                    .name
                    .as_deref()
                    .is_some_and(|n| n.starts_with("web-"))
            })
            .count();
        assert_eq!(owned, 2, "the rollout made a second ReplicaSet");
    };
    let states = join_all(waits.iter().map(|(case, what, check)| {
        let resource = case.kind.api_resource(family);
        let api: Api<DynamicObject> = Api::namespaced_with(ns.client.clone(), &ns.name, &resource);
        let ns = &ns;
        async move {
            ns.wait_for_with(
                &api,
                resource,
                case.name,
                &format!("{}: {what}", case.name),
                TIMEOUT,
                |o| o.is_some_and(|o| check(&serde_json::to_value(o).unwrap(), nodes)),
            )
            .await
        }
    }));
    let expected_events = events
        .iter()
        .map(|e| format!("{} {} {:?}", e.object, e.reason, e.message))
        .collect::<Vec<_>>()
        .join(", ");
    let event_api = ns.api::<Event>();
    let events_what = format!("the Warning events: {expected_events}");
    let warnings = ns.wait_for_list(
        &event_api,
        watcher::Config::default(),
        &events_what,
        TIMEOUT,
        |seen| events.iter().all(|e| e.seen_in(seen)),
    );
    let ((), _, _) = futures::join!(normal, states, warnings);
    let settled = created_at.elapsed();

    // An update both families refuse: a changed selector (immutable in apps/v1; a CEL transition rule on
    // the copies), on a Deployment already reconciled.
    let resource = WorkloadKind::Deployment.api_resource(family);
    let api: Api<DynamicObject> = Api::namespaced_with(ns.client.clone(), &ns.name, &resource);
    let changed = api
        .patch(
            "e-d-zero",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {
                "selector": {"matchLabels": {"tier": "x"}},
                "template": {"metadata": {"labels": {"tier": "x"}}}}})),
        )
        .await;
    let message = refusal(&changed).unwrap_or_else(|| panic!("a changed selector: {changed:?}"));
    assert!(
        message.contains("spec.selector") && message.contains("field is immutable"),
        "a changed selector refused without naming spec.selector: {message}"
    );
    rejected += 1;

    // Deployments that must have no ReplicaSet: paused from the start, and the pod-template-hash one.
    let rs_names: BTreeSet<String> = replica_sets(&ns, family)
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|rs| rs.metadata.name)
        .collect();
    for none in ["e-d-paused-rollback", "r-d-template-hash-selector"] {
        assert!(
            !rs_names.iter().any(|n| n.starts_with(&format!("{none}-"))),
            "{none} has a ReplicaSet: {rs_names:?}"
        );
    }

    // Quiet: no add and no retry in this family's queues for a whole window.
    let queues: Vec<String> = ["deployment", "replicaset", "daemonset"]
        .iter()
        .map(|c| family.queue_name(c))
        .collect();
    let sample = |text: &str, metric: &str| -> f64 {
        text.lines()
            .filter(|l| l.starts_with(&format!("{metric}{{")))
            .filter(|l| queues.iter().any(|q| l.contains(&format!("name=\"{q}\""))))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    let quiet_from = Instant::now();
    let mut last = (f64::NAN, f64::NAN);
    let mut quiet_since = Instant::now();
    let mut cpu_at_quiet_start = process_cpu();
    let (quiet_after, quiet_cpu) = loop {
        let metrics = manager.get("/metrics").await;
        let now = (
            sample(&metrics, "workqueue_adds_total"),
            sample(&metrics, "workqueue_retries_total"),
        );
        if now != last {
            last = now;
            quiet_since = Instant::now();
            cpu_at_quiet_start = process_cpu();
        } else if quiet_since.elapsed() >= QUIET {
            let cpu = process_cpu().saturating_sub(cpu_at_quiet_start);
            break (
                quiet_since.duration_since(quiet_from),
                cpu.as_secs_f64() / quiet_since.elapsed().as_secs_f64(),
            );
        }
        assert!(
            quiet_from.elapsed() < QUIET_WITHIN,
            "the manager never went quiet for {QUIET:?}: adds/retries still growing ({now:?})"
        );
        // Sampling counters at a fixed rate: the quantity measured is activity over time.
        tokio::time::sleep(Duration::from_millis(500)).await;
    };

    let metrics = manager.get("/metrics").await;
    let panics: f64 = metrics
        .lines()
        .filter(|l| !l.starts_with('#') && l.contains("sync_panics_total"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    // Keys in a backoff: only those of objects whose pods are refused, and each retried no more often
    // than the exponential backoff allows since the catalogue was created: failure n waits 5 ms · 2^(n-1),
    // so after t at most log2(t / 5 ms) + 1 failures; +3 for syncs that events trigger besides (a status
    // write, a refused pod's event). A hot loop would show hundreds.
    let elapsed = created_at.elapsed();
    let bound = (elapsed.as_secs_f64() / BACKOFF_BASE.as_secs_f64()).log2() + 4.0;
    let state: Value =
        serde_json::from_str(&manager.get("/debug/controllers/state").await).unwrap();
    let backing_off: Vec<(String, u64)> = state["controllers"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| {
            c["queue"]["waiting"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter(|w| w["retries"].as_u64().unwrap_or(0) > 0)
        .map(|w| {
            let key = w["key"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| w["key"].to_string());
            (key, w["retries"].as_u64().unwrap_or(0))
        })
        .collect();
    println!(
        "{}: {} cases ({rejected} refused by the API server, {surfaced} surfaced as events/conditions, {reached} \
         reached their state); settled {:.1}s after creation; quiet (no add, no retry for {}s) {:.1}s later, \
         the test process using {:.0}% of a core meanwhile (both families' managers and watches); adds {}, retries {}; keys in backoff {backing_off:?} (bound {bound:.1} retries after {:.0}s); \
         panics {panics}; test {:.1}s",
        family.label(),
        cases.len() + 1,
        settled.as_secs_f64(),
        QUIET.as_secs(),
        quiet_after.as_secs_f64(),
        quiet_cpu * 100.0,
        last.0,
        last.1,
        elapsed.as_secs_f64(),
        started.elapsed().as_secs_f64(),
    );
    assert_eq!(panics, 0.0, "syncs panicked");
    // The key a failing case retries under: its own, or its ReplicaSet's (`<deployment>-<hash>`).
    let retries_under = |case: &Case, key: &str| {
        let name = key.rsplit('/').next().unwrap_or(key);
        name == case.name
            || (case.kind == WorkloadKind::Deployment
                && name.starts_with(&format!("{}-", case.name)))
    };
    for case in &failing {
        // Still retried, not given up on: ReplicaSet and DaemonSet keys are retried without limit (as
        // upstream). A Deployment key whose ReplicaSet is refused may be dropped after 15 failures (as
        // upstream), which takes about 160 s of backoff: so it is not required here.
        let deployment_key = matches!(case.outcome, Outcome::RefusedForReplicaSetsOnCopies { .. });
        assert!(
            deployment_key || backing_off.iter().any(|(key, _)| retries_under(case, key)),
            "{}: its pods are refused, but no key of it waits in a backoff",
            case.name
        );
    }
    for (key, retries) in &backing_off {
        assert!(
            failing.iter().any(|case| retries_under(case, key)),
            "{key} is backing off, but its object's pods are not refused"
        );
        assert!(
            (*retries as f64) <= bound,
            "{key}: {retries} retries in {elapsed:?} (bound {bound:.1}): not backing off"
        );
    }
    manager.stop().await;
}

/// CPU time (user + system) the test process has used so far: the managers run inside it.
fn process_cpu() -> Duration {
    // SAFETY: getrusage only writes the struct it is given.
    let usage = unsafe {
        let mut usage = std::mem::zeroed::<libc::rusage>();
        assert_eq!(libc::getrusage(libc::RUSAGE_SELF, &mut usage), 0);
        usage
    };
    let time = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    time(usage.ru_utime) + time(usage.ru_stime)
}

/// Overlays `patch`'s fields onto `base` (a JSON merge, `null` removing the field).
fn merge(base: &mut Value, patch: Value) {
    match (base, patch) {
        (Value::Object(base), Value::Object(patch)) => {
            for (key, value) in patch {
                if value.is_null() {
                    base.remove(&key);
                } else {
                    merge(base.entry(key).or_insert(Value::Null), value);
                }
            }
        }
        (base, patch) => *base = patch,
    }
}
