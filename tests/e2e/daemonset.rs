//! The DaemonSet controller on a real control plane, for `apps/v1` DaemonSets and the `minikcm.dev`
//! copies (every scenario once per family). kube-controller-manager runs without its own workload
//! controllers (its node-lifecycle and taint-eviction controllers do run); the real scheduler binds the
//! daemon pods; kwok simulates the nodes and their kubelets. Each test runs mini-kcm's manager scoped to its
//! own namespace.
//!
//! Nodes are cluster-wide and the plane is shared by parallel tests, so every test creates its own nodes,
//! labelled with its namespace's name, and its DaemonSets select them with a `nodeSelector` on that label;
//! the nodes are deleted at the end.

// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::apps::v1::{
    ControllerRevision, DaemonSetSpec, DaemonSetUpdateStrategy, RollingUpdateDaemonSet,
};
use k8s_openapi::api::core::v1::{Event, Node, Pod, Taint};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use mini_kcm_e2e::{
    TIMEOUT, TestManager, app_selector, check_every_state, daemon_sets, for_both_families,
    is_active, pinned_node, pod_template, selector,
};
use mini_kcm_manager::Kinds;
use mini_kcm_runtime::api::kinds::{ApiFamily, DaemonSetObject, WorkloadKind};
use mini_kcm_testkit::nodes::{self, NodeSpec};
use mini_kcm_testkit::{PlaneConfig, PlaneInfo, TestNamespace, shared_plane};
use serde_json::json;

/// The node label a test's DaemonSets select on; its value is the test's namespace.
const NODE_LABEL: &str = "minikcm.dev/e2e-test";
const HASH: &str = "controller-revision-hash";
const GENERATION: &str = "pod-template-generation";
const READY_AFTER: &str = "minikcm.dev/ready-after";

fn plane() -> &'static PlaneInfo {
    shared_plane(PlaneConfig::default())
}

for_both_families!(
    places_one_pod_per_selected_node_and_follows_node_changes,
    keeps_off_tainted_nodes_and_leaves_no_execute_nodes,
    replaces_a_failed_pod,
    rolling_update_never_exceeds_max_unavailable,
    surge_update_keeps_every_node_served,
    on_delete_keeps_old_pods_until_they_are_deleted,
    rollback_reuses_the_old_revision,
    adopts_and_deduplicates_a_copy_of_the_current_revision,
    a_template_generation_annotation_does_not_stop_a_rollout,
);

async fn setup(prefix: &str, family: ApiFamily) -> (TestNamespace, TestManager) {
    let ns = TestNamespace::create(plane(), &format!("{prefix}-{}", family.label())).await;
    let kinds = match family {
        ApiFamily::Apps => Kinds::Apps,
        ApiFamily::Copies => Kinds::Copies,
    };
    let manager = TestManager::start(&ns, kinds).await;
    (ns, manager)
}

// ---- nodes ----

/// The simulated nodes of one test, named `<namespace>-<suffix>` and labelled `NODE_LABEL=<namespace>`.
struct TestNodes {
    client: kube::Client,
    namespace: String,
    names: Vec<String>,
}

impl TestNodes {
    /// Creates `count` nodes selected by the test's DaemonSets (suffixes `n1`, `n2`, …).
    async fn create(ns: &TestNamespace, count: usize) -> Self {
        let mut nodes = TestNodes {
            client: ns.client.clone(),
            namespace: ns.name.clone(),
            names: Vec::new(),
        };
        for i in 1..=count {
            nodes.add(&format!("n{i}"), |spec| spec).await;
        }
        nodes
    }

    /// Creates one more selected node, shaped by `shape` (e.g. a taint); returns its name.
    async fn add(&mut self, suffix: &str, shape: impl FnOnce(NodeSpec) -> NodeSpec) -> String {
        let name = format!("{}-{suffix}", self.namespace);
        let spec = shape(NodeSpec::named(&name).label(NODE_LABEL, &self.namespace));
        nodes::create(&self.client, &spec).await.unwrap();
        self.names.push(name.clone());
        name
    }

    fn name(&self, index: usize) -> &str {
        &self.names[index]
    }

    async fn delete(self) {
        let api: Api<Node> = Api::all(self.client.clone());
        for name in &self.names {
            let _ = api.delete(name, &DeleteParams::default()).await;
        }
    }
}

// ---- DaemonSets ----

/// A DaemonSet `web` of `family` whose pods go to the test's nodes, with the given update strategy.
fn daemon_set(
    ns: &TestNamespace,
    family: ApiFamily,
    strategy: Option<DaemonSetUpdateStrategy>,
) -> DaemonSetObject {
    let mut template = pod_template("web");
    if let Some(spec) = template.spec.as_mut() {
        spec.node_selector = Some(BTreeMap::from([(NODE_LABEL.to_string(), ns.name.clone())]));
    }
    let mut ds = DaemonSetObject::new(
        "web",
        &WorkloadKind::DaemonSet.api_resource(family),
        DaemonSetSpec {
            selector: selector("web"),
            template,
            update_strategy: strategy,
            ..Default::default()
        },
    );
    ds.status = None;
    ds
}

fn rolling(max_unavailable: i32, max_surge: i32) -> Option<DaemonSetUpdateStrategy> {
    Some(DaemonSetUpdateStrategy {
        type_: Some("RollingUpdate".into()),
        rolling_update: Some(RollingUpdateDaemonSet {
            max_unavailable: Some(IntOrString::Int(max_unavailable)),
            max_surge: Some(IntOrString::Int(max_surge)),
        }),
    })
}

/// Pods take a second to become Ready, so updates go in observable steps.
fn with_slow_readiness(ds: &mut DaemonSetObject) {
    ds.spec
        .template
        .metadata
        .get_or_insert_with(Default::default)
        .annotations = Some(BTreeMap::from([(
        READY_AFTER.to_string(),
        "1s".to_string(),
    )]));
}

async fn create(ns: &TestNamespace, family: ApiFamily, ds: &DaemonSetObject) -> DaemonSetObject {
    daemon_sets(ns, family)
        .create(&PostParams::default(), ds)
        .await
        .unwrap()
}

async fn patch(ns: &TestNamespace, family: ApiFamily, body: serde_json::Value) {
    daemon_sets(ns, family)
        .patch("web", &PatchParams::default(), &Patch::Merge(body))
        .await
        .unwrap();
}

fn image(tag: &str) -> serde_json::Value {
    json!({"spec": {"template": {"spec": {"containers": [
        {"name": "main", "image": format!("registry.k8s.io/pause:{tag}")}
    ]}}}})
}

/// Waits until the DaemonSet's status says: this generation was processed, `nodes` nodes want the pod,
/// each runs one that is up to date and available, and no pod runs where it should not.
async fn wait_rolled_out(ns: &TestNamespace, family: ApiFamily, nodes: i32) -> DaemonSetObject {
    wait_rolled_out_within(ns, family, nodes, TIMEOUT).await
}

async fn wait_rolled_out_within(
    ns: &TestNamespace,
    family: ApiFamily,
    nodes: i32,
    timeout: Duration,
) -> DaemonSetObject {
    ns.wait_for_with(
        &daemon_sets(ns, family),
        WorkloadKind::DaemonSet.api_resource(family),
        "web",
        &format!("an up-to-date, available daemon pod on each of {nodes} nodes"),
        timeout,
        |ds| {
            ds.is_some_and(|ds| {
                let s = ds.status.clone().unwrap_or_default();
                s.observed_generation == ds.metadata.generation
                    && s.desired_number_scheduled == nodes
                    && s.current_number_scheduled == nodes
                    && s.number_ready == nodes
                    && s.updated_number_scheduled.unwrap_or(0) == nodes
                    && s.number_available.unwrap_or(0) == nodes
                    && s.number_misscheduled == 0
            })
        },
    )
    .await
    .unwrap()
}

// ---- pods ----

fn bound_node(pod: &Pod) -> Option<&str> {
    pod.spec.as_ref()?.node_name.as_deref()
}

fn label<'p>(pod: &'p Pod, key: &str) -> Option<&'p str> {
    pod.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Waits until the DaemonSet's pods (label `app=web`) satisfy `condition`; returns them.
async fn wait_pods(ns: &TestNamespace, what: &str, condition: impl Fn(&[Pod]) -> bool) -> Vec<Pod> {
    ns.wait_for_list(
        &ns.api::<Pod>(),
        watcher::Config::default().labels(&app_selector("web")),
        what,
        TIMEOUT,
        condition,
    )
    .await
}

/// The active pods by the node they are pinned to.
fn active_by_node(pods: &[Pod]) -> BTreeMap<String, Vec<&Pod>> {
    let mut by_node: BTreeMap<String, Vec<&Pod>> = BTreeMap::new();
    for pod in pods.iter().filter(|p| is_active(p)) {
        by_node
            .entry(pinned_node(pod).unwrap_or_default())
            .or_default()
            .push(pod);
    }
    by_node
}

/// Exactly one active, Ready pod pinned and bound to each of `nodes`, and no other active pod.
fn one_ready_pod_on_each(pods: &[Pod], nodes: &[&str]) -> bool {
    let by_node = active_by_node(pods);
    by_node.len() == nodes.len()
        && nodes.iter().all(|node| {
            by_node.get(*node).is_some_and(|on_node| {
                on_node.len() == 1 && is_ready(on_node[0]) && bound_node(on_node[0]) == Some(*node)
            })
        })
}

/// Watches the DaemonSet's pods and records a violation whenever `invariant` (given the pods) returns one.
/// Returns once the watch has listed, with the task and the violations seen so far.
async fn watch_invariant(
    ns: &TestNamespace,
    invariant: impl Fn(&[Arc<Pod>]) -> Option<String> + Send + 'static,
) -> (tokio::task::JoinHandle<()>, Arc<Mutex<Vec<String>>>) {
    let violations = Arc::new(Mutex::new(Vec::<String>::new()));
    let (reader, writer) = reflector::store();
    let stream = reflector(
        writer,
        watcher(
            ns.api::<Pod>(),
            watcher::Config::default().labels(&app_selector("web")),
        ),
    )
    .default_backoff();
    let task = {
        let violations = violations.clone();
        let reader = reader.clone();
        tokio::spawn(check_every_state(stream, move || {
            if let Some(violation) = invariant(&reader.state()) {
                violations.lock().unwrap().push(violation);
            }
        }))
    };
    reader.wait_until_ready().await.unwrap();
    (task, violations)
}

// ---- ControllerRevisions ----

/// The DaemonSet's revisions (controlled by `ds_uid`), waited for until `condition` holds.
async fn wait_revisions(
    ns: &TestNamespace,
    ds_uid: &str,
    what: &str,
    condition: impl Fn(&[&ControllerRevision]) -> bool,
) -> Vec<ControllerRevision> {
    let owned = |all: &[ControllerRevision]| -> Vec<ControllerRevision> {
        all.iter()
            .filter(|r| mini_kcm_runtime::api::kinds::controller_uid(&r.metadata) == Some(ds_uid))
            .cloned()
            .collect()
    };
    let all = ns
        .wait_for_list(
            &ns.api::<ControllerRevision>(),
            watcher::Config::default(),
            what,
            TIMEOUT,
            |all| condition(&owned(all).iter().collect::<Vec<_>>()),
        )
        .await;
    owned(&all)
}

fn revision_hash(revision: &ControllerRevision) -> String {
    revision.metadata.labels.as_ref().unwrap()[HASH].clone()
}

// ---- scenarios ----

async fn places_one_pod_per_selected_node_and_follows_node_changes(family: ApiFamily) {
    let (ns, manager) = setup("ds-placement", family).await;
    let mut nodes = TestNodes::create(&ns, 3).await;
    let created = create(&ns, family, &daemon_set(&ns, family, None)).await;
    wait_rolled_out(&ns, family, 3).await;
    let names: Vec<&str> = nodes.names.iter().map(String::as_str).collect();
    let pods = wait_pods(&ns, "one Ready pod on each node", |pods| {
        one_ready_pod_on_each(pods, &names)
    })
    .await;
    for pod in pods.iter().filter(|p| is_active(p)) {
        let node = pinned_node(pod).unwrap();
        assert_eq!(
            bound_node(pod),
            Some(node.as_str()),
            "the scheduler bound the pod to the node its affinity names"
        );
        let owner = &pod.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(owner.uid, created.metadata.uid.clone().unwrap());
        assert_eq!(owner.controller, Some(true));
        assert!(label(pod, HASH).is_some_and(|h| !h.is_empty()));
        if family == ApiFamily::Apps {
            // The API server keeps the template generation of apps/v1 DaemonSets.
            assert_eq!(label(pod, GENERATION), Some("1"));
        }
        let tolerations = pod.spec.as_ref().unwrap().tolerations.clone().unwrap();
        assert!(
            tolerations
                .iter()
                .any(|t| t.key.as_deref() == Some("node.kubernetes.io/unschedulable")),
            "daemon pods get the default daemon tolerations: {tolerations:?}"
        );
    }

    // A new selected node gets a pod.
    let fourth = nodes.add("n4", |spec| spec).await;
    let names: Vec<&str> = nodes.names.iter().map(String::as_str).collect();
    wait_pods(&ns, "a pod on the new node too", |pods| {
        one_ready_pod_on_each(pods, &names)
    })
    .await;
    wait_rolled_out(&ns, family, 4).await;

    // A node relabelled out of the nodeSelector loses its pod; the others keep theirs.
    let leaving = nodes.name(0).to_string();
    nodes::set_labels(
        &ns.client,
        &leaving,
        &BTreeMap::from([(NODE_LABEL.to_string(), None)]),
    )
    .await
    .unwrap();
    let staying = [nodes.name(1), nodes.name(2), fourth.as_str()];
    wait_pods(&ns, "no pod left on the relabelled node", |pods| {
        one_ready_pod_on_each(pods, &staying)
    })
    .await;
    wait_rolled_out(&ns, family, 3).await;

    // A deleted node no longer counts (its pod is left to the pod garbage collector, as upstream). The
    // node event itself must wake the DaemonSet: the garbage collector's deletion of the pod, which would
    // too, comes only after its 40 s quarantine.
    Api::<Node>::all(ns.client.clone())
        .delete(&fourth, &DeleteParams::default())
        .await
        .unwrap();
    wait_rolled_out_within(&ns, family, 2, Duration::from_secs(20)).await;
    nodes.delete().await;
    manager.stop().await;
}

async fn keeps_off_tainted_nodes_and_leaves_no_execute_nodes(family: ApiFamily) {
    let (ns, manager) = setup("ds-taints", family).await;
    let mut nodes = TestNodes::create(&ns, 2).await;
    create(&ns, family, &daemon_set(&ns, family, None)).await;
    wait_rolled_out(&ns, family, 2).await;

    // The tainted node is created before the plain one: by the time the controller sees the plain node,
    // its cache holds the tainted one too, so the sync that serves the plain node also judged the tainted.
    let tainted = nodes
        .add("tainted", |spec| {
            spec.taint("dedicated", "other", "NoSchedule")
        })
        .await;
    let plain = nodes.add("plain", |spec| spec).await;
    let serving = [nodes.name(0), nodes.name(1), plain.as_str()];
    let pods = wait_pods(&ns, "a pod on the new untainted node", |pods| {
        one_ready_pod_on_each(pods, &serving)
    })
    .await;
    wait_rolled_out(&ns, family, 3).await;
    assert!(
        pods.iter()
            .all(|p| pinned_node(p).as_deref() != Some(tainted.as_str())),
        "no pod for the NoSchedule-tainted node"
    );

    // A NoExecute taint the pod does not tolerate: the pod leaves and is not recreated.
    let evicted = nodes.name(0).to_string();
    nodes::set_taints(
        &ns.client,
        &evicted,
        &[Taint {
            key: "evict".into(),
            value: Some("now".into()),
            effect: "NoExecute".into(),
            time_added: None,
        }],
    )
    .await
    .unwrap();
    let remaining = [nodes.name(1), plain.as_str()];
    wait_pods(&ns, "no pod left on the NoExecute node", |pods| {
        one_ready_pod_on_each(pods, &remaining)
    })
    .await;
    wait_rolled_out(&ns, family, 2).await;
    nodes.delete().await;
    manager.stop().await;
}

async fn replaces_a_failed_pod(family: ApiFamily) {
    let (ns, manager) = setup("ds-failed", family).await;
    let nodes = TestNodes::create(&ns, 2).await;
    create(&ns, family, &daemon_set(&ns, family, None)).await;
    wait_rolled_out(&ns, family, 2).await;
    let names = [nodes.name(0), nodes.name(1)];
    let pods = wait_pods(&ns, "one Ready pod on each node", |pods| {
        one_ready_pod_on_each(pods, &names)
    })
    .await;
    let victim = pods
        .iter()
        .find(|p| is_active(p) && pinned_node(p).as_deref() == Some(nodes.name(0)))
        .unwrap();
    let victim_name = victim.metadata.name.clone().unwrap();
    let victim_uid = victim.metadata.uid.clone().unwrap();

    // The kubelet reports the pod failed.
    ns.api::<Pod>()
        .patch_status(
            &victim_name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Failed"}})),
        )
        .await
        .unwrap();
    wait_pods(&ns, "the failed pod replaced", |pods| {
        pods.iter()
            .all(|p| p.metadata.uid.as_deref() != Some(&victim_uid))
            && one_ready_pod_on_each(pods, &names)
    })
    .await;
    ns.wait_for_list(
        &ns.api::<Event>(),
        watcher::Config::default(),
        "a FailedDaemonPod event",
        TIMEOUT,
        |events| {
            events.iter().any(|e| {
                e.reason.as_deref() == Some("FailedDaemonPod")
                    && e.message
                        .as_deref()
                        .is_some_and(|m| m.contains(&victim_name))
            })
        },
    )
    .await;
    wait_rolled_out(&ns, family, 2).await;
    nodes.delete().await;
    manager.stop().await;
}

async fn rolling_update_never_exceeds_max_unavailable(family: ApiFamily) {
    let (ns, manager) = setup("ds-rolling", family).await;
    let nodes = TestNodes::create(&ns, 3).await;
    let max_unavailable = 1;
    let mut ds = daemon_set(&ns, family, rolling(max_unavailable, 0));
    with_slow_readiness(&mut ds);
    create(&ns, family, &ds).await;
    wait_rolled_out(&ns, family, 3).await;
    let names: Vec<String> = nodes.names.clone();
    wait_pods(&ns, "one Ready pod on each node", |pods| {
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        one_ready_pod_on_each(pods, &names)
    })
    .await;

    // From now on, on every state the pod watch delivers: no node runs two pods, and at most
    // maxUnavailable nodes lack a Ready pod.
    let watched = names.clone();
    let (watch, violations) = watch_invariant(&ns, move |pods| {
        let pods: Vec<Pod> = pods.iter().map(|p| (**p).clone()).collect();
        let by_node = active_by_node(&pods);
        if let Some((node, on_node)) = by_node.iter().find(|(_, on_node)| on_node.len() > 1) {
            return Some(format!("{} active pods on {node}", on_node.len()));
        }
        let serving = watched
            .iter()
            .filter(|node| {
                by_node
                    .get(node.as_str())
                    .is_some_and(|on_node| on_node.iter().any(|p| is_ready(p)))
            })
            .count();
        let unavailable = watched.len() - serving;
        (unavailable > max_unavailable as usize)
            .then(|| format!("{unavailable} nodes without a Ready pod"))
    })
    .await;
    patch(&ns, family, image("3.9")).await;
    wait_rolled_out(&ns, family, 3).await;
    let pods = wait_pods(&ns, "only new pods left", |pods| {
        pods.iter().filter(|p| is_active(p)).all(|p| {
            p.spec.as_ref().unwrap().containers[0].image.as_deref()
                == Some("registry.k8s.io/pause:3.9")
        })
    })
    .await;
    watch.abort();
    let violations = violations.lock().unwrap().clone();
    assert!(
        violations.is_empty(),
        "maxUnavailable {max_unavailable} broken during the update: {violations:?}"
    );
    let hashes: BTreeSet<&str> = pods
        .iter()
        .filter(|p| is_active(p))
        .filter_map(|p| label(p, HASH))
        .collect();
    assert_eq!(hashes.len(), 1, "every pod has the new hash: {hashes:?}");
    nodes.delete().await;
    manager.stop().await;
}

/// A DaemonSet created with `deprecated.daemonset.template.generation` (as one copied from an apps/v1
/// object carries it) still rolls out a new template: apps/v1's API server bumps the annotation, and the
/// copies' controller ignores it (nothing bumps it on a CRD).
async fn a_template_generation_annotation_does_not_stop_a_rollout(family: ApiFamily) {
    let (ns, manager) = setup("ds-generation", family).await;
    let nodes = TestNodes::create(&ns, 2).await;
    let mut ds = daemon_set(&ns, family, rolling(1, 0));
    ds.metadata.annotations = Some(BTreeMap::from([(
        "deprecated.daemonset.template.generation".to_string(),
        "1".to_string(),
    )]));
    create(&ns, family, &ds).await;
    wait_rolled_out(&ns, family, 2).await;
    patch(&ns, family, image("3.9")).await;
    wait_rolled_out(&ns, family, 2).await;
    let names = nodes.names.clone();
    wait_pods(&ns, "a pod of the new template on each node", |pods| {
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        one_ready_pod_on_each(pods, &names)
            && pods.iter().filter(|p| is_active(p)).all(|p| {
                p.spec.as_ref().unwrap().containers[0].image.as_deref()
                    == Some("registry.k8s.io/pause:3.9")
            })
    })
    .await;
    nodes.delete().await;
    manager.stop().await;
}

async fn surge_update_keeps_every_node_served(family: ApiFamily) {
    let (ns, manager) = setup("ds-surge", family).await;
    let nodes = TestNodes::create(&ns, 3).await;
    let max_surge = 1;
    let mut ds = daemon_set(&ns, family, rolling(0, max_surge));
    with_slow_readiness(&mut ds);
    create(&ns, family, &ds).await;
    wait_rolled_out(&ns, family, 3).await;
    let names: Vec<String> = nodes.names.clone();
    wait_pods(&ns, "one Ready pod on each node", |pods| {
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        one_ready_pod_on_each(pods, &names)
    })
    .await;

    // On every state: each node keeps a Ready pod, and at most maxSurge nodes run a second one.
    let watched = names.clone();
    let (watch, violations) = watch_invariant(&ns, move |pods| {
        let pods: Vec<Pod> = pods.iter().map(|p| (**p).clone()).collect();
        let by_node = active_by_node(&pods);
        let unserved: Vec<&String> = watched
            .iter()
            .filter(|node| {
                !by_node
                    .get(node.as_str())
                    .is_some_and(|on_node| on_node.iter().any(|p| is_ready(p)))
            })
            .collect();
        if !unserved.is_empty() {
            return Some(format!("no Ready pod on {unserved:?}"));
        }
        let surged = by_node.values().filter(|on_node| on_node.len() > 1).count();
        (surged > max_surge as usize).then(|| format!("{surged} nodes run two pods"))
    })
    .await;
    patch(&ns, family, image("3.9")).await;
    wait_rolled_out(&ns, family, 3).await;
    wait_pods(&ns, "only new pods, one per node", |pods| {
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        one_ready_pod_on_each(pods, &names)
            && pods.iter().filter(|p| is_active(p)).all(|p| {
                p.spec.as_ref().unwrap().containers[0].image.as_deref()
                    == Some("registry.k8s.io/pause:3.9")
            })
    })
    .await;
    watch.abort();
    let violations = violations.lock().unwrap().clone();
    assert!(
        violations.is_empty(),
        "the surge update left a node unserved or surged too much: {violations:?}"
    );
    nodes.delete().await;
    manager.stop().await;
}

async fn on_delete_keeps_old_pods_until_they_are_deleted(family: ApiFamily) {
    let (ns, manager) = setup("ds-ondelete", family).await;
    let nodes = TestNodes::create(&ns, 2).await;
    let strategy = Some(DaemonSetUpdateStrategy {
        type_: Some("OnDelete".into()),
        rolling_update: None,
    });
    let created = create(&ns, family, &daemon_set(&ns, family, strategy)).await;
    let uid = created.metadata.uid.clone().unwrap();
    wait_rolled_out(&ns, family, 2).await;
    let names = [nodes.name(0), nodes.name(1)];
    let before = wait_pods(&ns, "one Ready pod on each node", |pods| {
        one_ready_pod_on_each(pods, &names)
    })
    .await;
    let old_hash = label(&before[0], HASH).unwrap().to_string();

    patch(&ns, family, image("3.9")).await;
    // The new generation is processed (a second revision exists, the status counts no pod as updated)...
    wait_revisions(&ns, &uid, "a second revision", |revisions| {
        revisions.len() == 2
    })
    .await;
    ns.wait_for_with(
        &daemon_sets(&ns, family),
        WorkloadKind::DaemonSet.api_resource(family),
        "web",
        "generation 2 observed with no pod updated",
        TIMEOUT,
        |ds| {
            ds.is_some_and(|ds| {
                let s = ds.status.clone().unwrap_or_default();
                ds.metadata.generation == Some(2)
                    && s.observed_generation == Some(2)
                    && s.updated_number_scheduled.unwrap_or(0) == 0
                    && s.current_number_scheduled == 2
            })
        },
    )
    .await;
    // ...and the old pods are untouched.
    let after = ns
        .api::<Pod>()
        .list(&kube::api::ListParams::default().labels(&app_selector("web")))
        .await
        .unwrap()
        .items;
    let uids = |pods: &[Pod]| -> BTreeSet<String> {
        pods.iter()
            .filter(|p| is_active(p))
            .filter_map(|p| p.metadata.uid.clone())
            .collect()
    };
    assert_eq!(uids(&after), uids(&before), "OnDelete replaced a pod");

    // A deleted pod comes back from the new template; the other stays old.
    let victim = before
        .iter()
        .find(|p| is_active(p) && pinned_node(p).as_deref() == Some(nodes.name(0)))
        .unwrap();
    ns.api::<Pod>()
        .delete(
            victim.metadata.name.as_deref().unwrap(),
            &DeleteParams::default(),
        )
        .await
        .unwrap();
    let pods = wait_pods(
        &ns,
        "the deleted pod replaced from the new template",
        |pods| {
            one_ready_pod_on_each(pods, &names)
                && pods
                    .iter()
                    .filter(|p| is_active(p))
                    .any(|p| label(p, HASH) != Some(old_hash.as_str()))
        },
    )
    .await;
    for pod in pods.iter().filter(|p| is_active(p)) {
        let on_victim_node = pinned_node(pod).as_deref() == Some(nodes.name(0));
        assert_eq!(
            label(pod, HASH) != Some(old_hash.as_str()),
            on_victim_node,
            "only the recreated pod has the new hash"
        );
    }
    nodes.delete().await;
    manager.stop().await;
}

async fn rollback_reuses_the_old_revision(family: ApiFamily) {
    let (ns, manager) = setup("ds-rollback", family).await;
    let nodes = TestNodes::create(&ns, 2).await;
    let created = create(&ns, family, &daemon_set(&ns, family, None)).await;
    let uid = created.metadata.uid.clone().unwrap();
    wait_rolled_out(&ns, family, 2).await;
    let first = wait_revisions(&ns, &uid, "the first revision", |r| r.len() == 1).await;
    let first = first[0].clone();
    assert_eq!(first.revision, Some(1));

    patch(&ns, family, image("3.9")).await;
    wait_rolled_out(&ns, family, 2).await;
    wait_revisions(&ns, &uid, "a second revision", |r| r.len() == 2).await;

    // Back to the first template: its revision becomes the newest, no third one appears.
    patch(&ns, family, image("3.10")).await;
    wait_rolled_out(&ns, family, 2).await;
    let revisions = wait_revisions(&ns, &uid, "the first revision renumbered to 3", |r| {
        r.iter()
            .any(|r| r.metadata.name == first.metadata.name && r.revision == Some(3))
    })
    .await;
    assert_eq!(
        revisions.len(),
        2,
        "the rollback reused the first revision: {:?}",
        revisions
            .iter()
            .map(|r| (r.metadata.name.clone(), r.revision))
            .collect::<Vec<_>>()
    );
    let names = [nodes.name(0), nodes.name(1)];
    let first_hash = revision_hash(&first);
    wait_pods(&ns, "pods of the first revision again", |pods| {
        one_ready_pod_on_each(pods, &names)
            && pods
                .iter()
                .filter(|p| is_active(p))
                .all(|p| label(p, HASH) == Some(first_hash.as_str()))
    })
    .await;
    nodes.delete().await;
    manager.stop().await;
}

async fn adopts_and_deduplicates_a_copy_of_the_current_revision(family: ApiFamily) {
    let (ns, manager) = setup("ds-dedup", family).await;
    let nodes = TestNodes::create(&ns, 2).await;
    let created = create(&ns, family, &daemon_set(&ns, family, None)).await;
    let uid = created.metadata.uid.clone().unwrap();
    wait_rolled_out(&ns, family, 2).await;
    let original = wait_revisions(&ns, &uid, "the first revision", |r| r.len() == 1).await;
    let original = original[0].clone();
    let names = [nodes.name(0), nodes.name(1)];
    let active_uids = |pods: &[Pod]| -> BTreeSet<String> {
        pods.iter()
            .filter(|p| is_active(p))
            .filter_map(|p| p.metadata.uid.clone())
            .collect()
    };
    let before = wait_pods(&ns, "one Ready pod on each node", |pods| {
        one_ready_pod_on_each(pods, &names)
    })
    .await;

    // An orphan revision of the same template, numbered higher, matching the selector: the controller
    // adopts it, keeps it (the higher number wins), relabels the pods to its hash and deletes the original.
    let mut labels = original.metadata.labels.clone().unwrap();
    labels.insert(HASH.to_string(), "duplicate".to_string());
    let duplicate = ControllerRevision {
        metadata: kube::api::ObjectMeta {
            name: Some("web-duplicate".into()),
            labels: Some(labels),
            ..Default::default()
        },
        data: original.data.clone(),
        revision: Some(5),
    };
    ns.api::<ControllerRevision>()
        .create(&PostParams::default(), &duplicate)
        .await
        .unwrap();
    let revisions = wait_revisions(&ns, &uid, "only the adopted duplicate left", |r| {
        r.len() == 1 && r[0].metadata.name.as_deref() == Some("web-duplicate")
    })
    .await;
    assert_eq!(revisions[0].revision, Some(5));
    let pods = wait_pods(&ns, "the pods relabelled to the kept revision", |pods| {
        one_ready_pod_on_each(pods, &names)
            && pods
                .iter()
                .filter(|p| is_active(p))
                .all(|p| label(p, HASH) == Some("duplicate"))
    })
    .await;
    assert_eq!(
        active_uids(&pods),
        active_uids(&before),
        "relabelled in place, not replaced"
    );
    wait_rolled_out(&ns, family, 2).await;
    nodes.delete().await;
    manager.stop().await;
}
