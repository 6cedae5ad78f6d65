//! The Deployment controller on a real control plane, for `apps/v1` Deployments and the
//! `minikcm.dev` copies (every scenario once per family). mini-kcm runs both its Deployment and
//! ReplicaSet controllers, scoped to each test's namespace; kube-controller-manager runs neither.

// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::ResourceQuota;

use k8s_openapi::api::apps::v1::DeploymentStrategy;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use mini_kcm_e2e::denied_writes::{DeniedWrites, manager_config};
use mini_kcm_e2e::{
    TIMEOUT, TestManager, app_selector, check_every_state, controller_uid, deployment_of,
    deployments, for_both_families, is_active, progressing_reason, replica_sets, rolling_update,
    wait_deployment, wait_deployment_complete, wait_progressing,
};
use mini_kcm_manager::{Kinds, ManagerOptions};
use mini_kcm_runtime::api::kinds::{ApiFamily, ReplicaSetObject, WorkloadKind};
use mini_kcm_testkit::{PlaneConfig, PlaneInfo, TestNamespace, shared_plane};
use serde_json::json;

const REVISION: &str = "deployment.kubernetes.io/revision";
const HASH: &str = "pod-template-hash";

fn plane() -> &'static PlaneInfo {
    shared_plane(PlaneConfig::default())
}

for_both_families!(
    becomes_available_with_one_labelled_replica_set,
    rolling_update_keeps_surge_and_availability_bounds,
    recreate_never_runs_old_and_new_pods_together,
    a_stuck_rollout_exceeds_its_progress_deadline,
    scaling_mid_rollout_is_proportional,
    pause_holds_the_rollout_and_resume_completes_it,
    rollback_reuses_the_old_replica_set,
    revision_history_limit_deletes_old_replica_sets,
    orphaned_replica_set_is_adopted_again,
    foreground_deletion_waits_for_every_child,
    a_manager_killed_mid_rollout_is_replaced_within_the_bounds,
    replicas_of_i32_max_do_not_wedge_the_deployment,
    a_deployment_dropped_after_failing_writes_converges_by_resync,
);

/// A Deployment selecting on pod-template-hash would never own what it creates (upstream's controllers
/// create ReplicaSets without bound). On apps/v1 mini-kcm refuses to roll it out and says why; the copies'
/// CRD rejects such a selector outright (crates/crds/tests/install.rs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_selector_on_pod_template_hash_is_refused_not_run_away() {
    let family = ApiFamily::Apps;
    let (ns, manager) = setup("deploy-hash-selector", family).await;
    let mut d = deployment_of("web", 2, family);
    let with_hash = |labels: &mut Option<BTreeMap<String, String>>| {
        labels
            .get_or_insert_with(BTreeMap::new)
            .insert(HASH.to_string(), "x".to_string());
    };
    with_hash(&mut d.spec.selector.match_labels);
    if let Some(metadata) = d.spec.template.metadata.as_mut() {
        with_hash(&mut metadata.labels);
    }
    deployments(&ns, family)
        .create(&PostParams::default(), &d)
        .await
        .unwrap();
    let d = wait_progressing(&ns, family, "web", "SelectorUsesPodTemplateHash").await;
    let status = d.status.unwrap().status;
    assert_eq!(status.observed_generation, d.metadata.generation);
    // The refusal is written by the sync that would otherwise have created the first ReplicaSet.
    let created = replica_sets(&ns, family)
        .list(&Default::default())
        .await
        .unwrap();
    assert!(
        created.items.is_empty(),
        "no ReplicaSet: {:?}",
        created.items.len()
    );
    manager.stop().await;
}

async fn setup(prefix: &str, family: ApiFamily) -> (TestNamespace, TestManager) {
    let ns = TestNamespace::create(plane(), &format!("{prefix}-{}", family.label())).await;
    let kinds = match family {
        ApiFamily::Apps => Kinds::Apps,
        ApiFamily::Copies => Kinds::Copies,
    };
    let manager = TestManager::start(&ns, kinds).await;
    (ns, manager)
}

/// The Deployment's ReplicaSets (owned by it), waited for until `condition` holds.
async fn wait_replica_sets(
    ns: &TestNamespace,
    family: ApiFamily,
    d_uid: &str,
    what: &str,
    condition: impl Fn(&[&ReplicaSetObject]) -> bool,
) -> Vec<ReplicaSetObject> {
    let owned = |all: &[ReplicaSetObject]| -> Vec<ReplicaSetObject> {
        all.iter()
            .filter(|rs| mini_kcm_runtime::api::kinds::controller_uid(&rs.metadata) == Some(d_uid))
            .cloned()
            .collect()
    };
    let all = ns
        .wait_for_list_with(
            &replica_sets(ns, family),
            WorkloadKind::ReplicaSet.api_resource(family),
            watcher::Config::default(),
            what,
            TIMEOUT,
            |all| {
                let owned = owned(all);
                condition(&owned.iter().collect::<Vec<_>>())
            },
        )
        .await;
    owned(&all)
}

fn replicas_of(rs: &ReplicaSetObject) -> i32 {
    rs.spec.replicas.unwrap_or(0)
}

fn image(tag: &str) -> serde_json::Value {
    json!({"spec": {"template": {"spec": {"containers": [{"name": "main", "image": format!("registry.k8s.io/pause:{tag}")}]}}}})
}

async fn patch(ns: &TestNamespace, family: ApiFamily, name: &str, body: serde_json::Value) {
    deployments(ns, family)
        .patch(name, &PatchParams::default(), &Patch::Merge(body))
        .await
        .unwrap();
}

async fn becomes_available_with_one_labelled_replica_set(family: ApiFamily) {
    let (ns, manager) = setup("deploy-basic", family).await;
    let created = deployments(&ns, family)
        .create(&PostParams::default(), &deployment_of("web", 3, family))
        .await
        .unwrap();
    let d = wait_deployment_complete(&ns, family, "web", 3).await;
    let uid = created.metadata.uid.unwrap();
    let rss = wait_replica_sets(&ns, family, &uid, "one ReplicaSet", |rss| rss.len() == 1).await;
    let rs = &rss[0];
    let hash = rs.metadata.labels.as_ref().unwrap()[HASH].clone();
    assert_eq!(
        rs.metadata.name.as_deref(),
        Some(format!("web-{hash}").as_str())
    );
    assert_eq!(rs.spec.selector.match_labels.as_ref().unwrap()[HASH], hash);
    let template_labels = rs
        .spec
        .template
        .as_ref()
        .unwrap()
        .metadata
        .as_ref()
        .unwrap()
        .labels
        .clone()
        .unwrap();
    assert_eq!(template_labels[HASH], hash);
    assert_eq!(rs.metadata.annotations.as_ref().unwrap()[REVISION], "1");
    assert_eq!(d.metadata.annotations.as_ref().unwrap()[REVISION], "1");
    // As upstream: the controller's bookkeeping never bumps the generation (apps/v1 writes the revision
    // annotation with the status), and its writes carry its name as field manager.
    assert_eq!(d.metadata.generation, Some(1), "generation after create");
    // The controllers' types skip managedFields while decoding: read the stored ReplicaSet whole.
    let whole: kube::Api<kube::api::DynamicObject> = kube::Api::namespaced_with(
        ns.client.clone(),
        &ns.name,
        &WorkloadKind::ReplicaSet.api_resource(family),
    );
    let stored = whole
        .get(rs.metadata.name.as_deref().unwrap())
        .await
        .unwrap();
    let managers: BTreeSet<&str> = stored
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter_map(|f| f.manager.as_deref())
        .collect();
    assert!(
        managers.contains("mini-kcm"),
        "field managers: {managers:?}"
    );
    patch(&ns, family, "web", image("3.9")).await;
    let d = wait_deployment_complete(&ns, family, "web", 3).await;
    assert_eq!(
        d.metadata.generation,
        Some(2),
        "generation after one image change"
    );
    let available = d
        .status
        .unwrap()
        .status
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_.as_deref() == Some("Available"))
        .unwrap();
    assert_eq!(available.status.as_deref(), Some("True"));
    assert_eq!(
        available.reason.as_deref(),
        Some("MinimumReplicasAvailable")
    );
    manager.stop().await;
}

/// A 6-replica Deployment (maxSurge 2, maxUnavailable 1) whose pods take a second to become Ready, so
/// a rollout goes in several observable steps; once it is available, starts watching the bounds and
/// changes the image. Returns the replicas, the Deployment's UID and the watch.
async fn start_watched_rollout(ns: &TestNamespace, family: ApiFamily) -> (i32, String, Bounds) {
    let (replicas, surge, unavailable) = (6, 2, 1);
    let mut d = deployment_of("web", replicas, family);
    rolling_update(&mut d, surge, unavailable);
    d.spec.template.metadata.as_mut().unwrap().annotations = Some(BTreeMap::from([(
        "minikcm.dev/ready-after".to_string(),
        "1s".to_string(),
    )]));
    let created = deployments(ns, family)
        .create(&PostParams::default(), &d)
        .await
        .unwrap();
    let uid = created.metadata.uid.clone().unwrap();
    wait_deployment_complete(ns, family, "web", replicas).await;
    let bounds = Bounds::watch(ns, family, &uid, replicas, surge, unavailable).await;
    patch(ns, family, "web", image("3.9")).await;
    (replicas, uid, bounds)
}

async fn rolling_update_keeps_surge_and_availability_bounds(family: ApiFamily) {
    let (ns, manager) = setup("deploy-rolling", family).await;
    let (replicas, uid, bounds) = start_watched_rollout(&ns, family).await;
    let lines = |d: &mini_kcm_runtime::observability::decisions::Decision| {
        d.plan.iter().chain(&d.reasons).cloned().collect::<Vec<_>>()
    };
    // The log keeps an object's newest 32 decisions, and a loaded machine makes many (each routine
    // retry on a lagging cache is one): read the creation's while the rollout runs.
    let created = |d: &mini_kcm_runtime::observability::decisions::Decision| {
        lines(d)
            .iter()
            .any(|l| l.starts_with("created new ReplicaSet "))
    };
    wait_decision(&ns, &manager, "web", "the new ReplicaSet created", created).await;
    let early = manager.decisions(&ns.name, "web").await;
    wait_deployment_complete(&ns, family, "web", replicas).await;
    let rss = wait_replica_sets(&ns, family, &uid, "old ReplicaSet scaled to 0", |rss| {
        rss.len() == 2 && rss.iter().filter(|rs| replicas_of(rs) == 0).count() == 1
    })
    .await;
    bounds.assert_never_broken();
    let new_rs = rss.iter().find(|rs| replicas_of(rs) == replicas).unwrap();
    assert_eq!(new_rs.metadata.annotations.as_ref().unwrap()[REVISION], "2");

    // The decision log shows the rollout's steps with the numbers they rest on.
    let decisions = manager.decisions(&ns.name, "web").await;
    let new_name = new_rs.metadata.name.clone().unwrap();
    let all: Vec<String> = early.iter().chain(&decisions).flat_map(lines).collect();
    let has = |needle: &str| all.iter().any(|l| l.contains(needle));
    assert!(
        has(&format!(
            "created new ReplicaSet {new_name} (pod-template-hash"
        )),
        "{all:#?}"
    );
    assert!(
        has("room to surge: ") && has("replicas + maxSurge (6 + 2 = 8)"),
        "{all:#?}"
    );
    assert!(
        has("minAvailable 5 (replicas 6 − maxUnavailable 1)"),
        "{all:#?}"
    );
    assert!(
        has(&format!("Scaled up replica set {new_name}")),
        "{all:#?}"
    );
    manager.stop().await;
}

/// Watches a Deployment's ReplicaSets and pods and records every state that breaks the rolling-update
/// bounds: Σ spec.replicas ≤ replicas + maxSurge, and Ready pods ≥ replicas − maxUnavailable.
struct Bounds {
    violations: Arc<Mutex<Vec<String>>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Bounds {
    async fn watch(
        ns: &TestNamespace,
        family: ApiFamily,
        uid: &str,
        replicas: i32,
        surge: i32,
        unavailable: i32,
    ) -> Self {
        let violations = Arc::new(Mutex::new(Vec::<String>::new()));
        let writer = reflector::store::Writer::new(WorkloadKind::ReplicaSet.api_resource(family));
        let rs_ready = writer.as_reader();
        let rs_watch = {
            let violations = violations.clone();
            let uid = uid.to_string();
            let reader = writer.as_reader();
            let stream = reflector(
                writer,
                watcher(replica_sets(ns, family), watcher::Config::default()),
            )
            .default_backoff();
            tokio::spawn(check_every_state(stream, move || {
                let total: i32 = reader
                    .state()
                    .iter()
                    .filter(|rs| {
                        mini_kcm_runtime::api::kinds::controller_uid(&rs.metadata)
                            == Some(uid.as_str())
                    })
                    .map(|rs| replicas_of(rs))
                    .sum();
                if total > replicas + surge {
                    violations.lock().unwrap().push(format!(
                        "sum of spec.replicas {total} > {}",
                        replicas + surge
                    ));
                }
            }))
        };
        let (pods_ready, writer) = reflector::store();
        let pod_watch = {
            let violations = violations.clone();
            let reader = pods_ready.clone();
            let stream = reflector(
                writer,
                watcher(
                    ns.api::<Pod>(),
                    watcher::Config::default().labels(&app_selector("web")),
                ),
            )
            .default_backoff();
            tokio::spawn(check_every_state(stream, move || {
                let ready = reader
                    .state()
                    .iter()
                    .filter(|p| is_active(p) && is_ready(p))
                    .count() as i32;
                if ready < replicas - unavailable {
                    violations
                        .lock()
                        .unwrap()
                        .push(format!("{ready} ready pods < {}", replicas - unavailable));
                }
            }))
        };
        // Both watches have listed before the caller changes anything.
        rs_ready.wait_until_ready().await.unwrap();
        pods_ready.wait_until_ready().await.unwrap();
        Bounds {
            violations,
            tasks: vec![rs_watch, pod_watch],
        }
    }

    fn assert_never_broken(self) {
        for task in &self.tasks {
            task.abort();
        }
        let violations = self.violations.lock().unwrap().clone();
        assert!(
            violations.is_empty(),
            "rolling-update bounds broken: {violations:?}"
        );
    }
}

async fn a_manager_killed_mid_rollout_is_replaced_within_the_bounds(family: ApiFamily) {
    let (ns, first) = setup("deploy-restart", family).await;
    let (replicas, uid, bounds) = start_watched_rollout(&ns, family).await;
    // Crash the manager once the rollout is under way (a second ReplicaSet with pods).
    wait_replica_sets(&ns, family, &uid, "the rollout under way", |rss| {
        rss.len() == 2 && rss.iter().all(|rs| replicas_of(rs) > 0)
    })
    .await;
    first.kill().await;
    let kinds = match family {
        ApiFamily::Apps => Kinds::Apps,
        ApiFamily::Copies => Kinds::Copies,
    };
    let second = TestManager::start(&ns, kinds).await;
    wait_deployment_complete(&ns, family, "web", replicas).await;
    wait_replica_sets(&ns, family, &uid, "the old ReplicaSet scaled to 0", |rss| {
        rss.len() == 2 && rss.iter().filter(|rs| replicas_of(rs) == 0).count() == 1
    })
    .await;
    bounds.assert_never_broken();
    second.stop().await;
}

fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

async fn recreate_never_runs_old_and_new_pods_together(family: ApiFamily) {
    let (ns, manager) = setup("deploy-recreate", family).await;
    let mut d = deployment_of("web", 3, family);
    d.spec.strategy = Some(DeploymentStrategy {
        type_: Some("Recreate".into()),
        rolling_update: None,
    });
    deployments(&ns, family)
        .create(&PostParams::default(), &d)
        .await
        .unwrap();
    wait_deployment_complete(&ns, family, "web", 3).await;

    let overlaps = Arc::new(Mutex::new(Vec::<String>::new()));
    let (listed, writer) = reflector::store();
    let watch = {
        let overlaps = overlaps.clone();
        let reader = listed.clone();
        let stream = reflector(
            writer,
            watcher(
                ns.api::<Pod>(),
                watcher::Config::default().labels(&app_selector("web")),
            ),
        )
        .default_backoff();
        tokio::spawn(check_every_state(stream, move || {
            // Every pod present (terminating included: it may still run) by template hash.
            let hashes: BTreeSet<String> = reader
                .state()
                .iter()
                .filter_map(|p| p.metadata.labels.as_ref()?.get(HASH).cloned())
                .collect();
            if hashes.len() > 1 {
                overlaps.lock().unwrap().push(format!("{hashes:?}"));
            }
        }))
    };
    listed.wait_until_ready().await.unwrap();
    patch(&ns, family, "web", image("3.9")).await;
    wait_deployment_complete(&ns, family, "web", 3).await;
    watch.abort();
    let overlaps = overlaps.lock().unwrap().clone();
    assert!(
        overlaps.is_empty(),
        "old and new pods existed together: {overlaps:?}"
    );
    manager.stop().await;
}

async fn a_stuck_rollout_exceeds_its_progress_deadline(family: ApiFamily) {
    let (ns, manager) = setup("deploy-deadline", family).await;
    let mut d = deployment_of("web", 2, family);
    d.spec.progress_deadline_seconds = Some(3);
    deployments(&ns, family)
        .create(&PostParams::default(), &d)
        .await
        .unwrap();
    wait_deployment_complete(&ns, family, "web", 2).await;
    // A new template whose pods never become Ready.
    patch(
        &ns,
        family,
        "web",
        json!({"spec": {"template": {"metadata": {"labels": {"app": "web", "minikcm.dev/kwok-behaviour": "never-ready"}}}}}),
    )
    .await;
    let d = wait_progressing(&ns, family, "web", "ProgressDeadlineExceeded").await;
    let condition = d
        .status
        .unwrap()
        .status
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_.as_deref() == Some("Progressing"))
        .unwrap();
    assert_eq!(condition.status.as_deref(), Some("False"));
    assert!(
        condition
            .message
            .unwrap()
            .ends_with("has timed out progressing.")
    );
    manager.stop().await;
}

async fn scaling_mid_rollout_is_proportional(family: ApiFamily) {
    // Upstream's e2e "deployment should support proportional scaling".
    let (ns, manager) = setup("deploy-proportional", family).await;
    let mut d = deployment_of("web", 10, family);
    rolling_update(&mut d, 3, 2);
    let created = deployments(&ns, family)
        .create(&PostParams::default(), &d)
        .await
        .unwrap();
    let uid = created.metadata.uid.unwrap();
    wait_deployment_complete(&ns, family, "web", 10).await;
    patch(
        &ns,
        family,
        "web",
        json!({"spec": {"template": {"metadata": {"labels": {"app": "web", "minikcm.dev/kwok-behaviour": "never-ready"}}}}}),
    )
    .await;
    let sizes = |rss: &[&ReplicaSetObject]| -> Vec<i32> {
        let mut v: Vec<i32> = rss.iter().map(|rs| replicas_of(rs)).collect();
        v.sort_unstable();
        v
    };
    wait_replica_sets(&ns, family, &uid, "old 8 / new 5", |rss| {
        sizes(rss) == vec![5, 8]
    })
    .await;
    patch(&ns, family, "web", json!({"spec": {"replicas": 30}})).await;
    wait_replica_sets(&ns, family, &uid, "old 20 / new 13", |rss| {
        sizes(rss) == vec![13, 20]
    })
    .await;
    manager.stop().await;
}

async fn pause_holds_the_rollout_and_resume_completes_it(family: ApiFamily) {
    let (ns, manager) = setup("deploy-pause", family).await;
    let created = deployments(&ns, family)
        .create(&PostParams::default(), &deployment_of("web", 2, family))
        .await
        .unwrap();
    let uid = created.metadata.uid.unwrap();
    wait_deployment_complete(&ns, family, "web", 2).await;
    patch(&ns, family, "web", json!({"spec": {"paused": true}})).await;
    patch(&ns, family, "web", image("3.9")).await;
    // The controller has seen the new template (generation observed) and says it is paused...
    wait_deployment(
        &ns,
        family,
        "web",
        "the paused condition for the new generation",
        |d| {
            d.status.as_ref().and_then(|s| s.observed_generation) == d.metadata.generation
                && progressing_reason(d).as_deref() == Some("DeploymentPaused")
        },
    )
    .await;
    // ...and created no new ReplicaSet. A scale while paused still applies.
    patch(&ns, family, "web", json!({"spec": {"replicas": 3}})).await;
    let rss = wait_replica_sets(&ns, family, &uid, "the one ReplicaSet scaled to 3", |rss| {
        rss.len() == 1 && replicas_of(rss[0]) == 3
    })
    .await;
    assert_eq!(rss.len(), 1);
    patch(&ns, family, "web", json!({"spec": {"paused": false}})).await;
    wait_deployment_complete(&ns, family, "web", 3).await;
    wait_replica_sets(
        &ns,
        family,
        &uid,
        "a second ReplicaSet after resuming",
        |rss| rss.len() == 2,
    )
    .await;
    manager.stop().await;
}

async fn rollback_reuses_the_old_replica_set(family: ApiFamily) {
    let (ns, manager) = setup("deploy-rollback", family).await;
    let created = deployments(&ns, family)
        .create(&PostParams::default(), &deployment_of("web", 2, family))
        .await
        .unwrap();
    let uid = created.metadata.uid.unwrap();
    wait_deployment_complete(&ns, family, "web", 2).await;
    let first = wait_replica_sets(&ns, family, &uid, "revision 1", |rss| rss.len() == 1).await;
    let first_uid = first[0].metadata.uid.clone().unwrap();
    patch(&ns, family, "web", image("3.9")).await;
    wait_deployment_complete(&ns, family, "web", 2).await;

    // The legacy rollback request: back to revision 1.
    patch(
        &ns,
        family,
        "web",
        json!({"metadata": {"annotations": {"deprecated.deployment.rollback.to": "1"}}}),
    )
    .await;
    // The controller clears the request (and changes the template, a new generation).
    wait_deployment(
        &ns,
        family,
        "web",
        "the rollback request to be handled",
        |d| {
            !d.metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key("deprecated.deployment.rollback.to"))
        },
    )
    .await;
    let d = wait_deployment_complete(&ns, family, "web", 2).await;
    let rss = wait_replica_sets(
        &ns,
        family,
        &uid,
        "revision 1's ReplicaSet scaled back up",
        |rss| {
            rss.len() == 2
                && rss.iter().any(|rs| {
                    rs.metadata.uid.as_deref() == Some(first_uid.as_str()) && replicas_of(rs) == 2
                })
        },
    )
    .await;
    let reused = rss
        .iter()
        .find(|rs| rs.metadata.uid.as_deref() == Some(first_uid.as_str()))
        .unwrap();
    assert_eq!(
        reused.metadata.annotations.as_ref().unwrap()[REVISION],
        "3",
        "the revision is bumped"
    );
    let annotations = d.metadata.annotations.unwrap_or_default();
    assert!(
        !annotations.contains_key("deprecated.deployment.rollback.to"),
        "the request is cleared"
    );
    // Its pods are the ReplicaSet's own.
    let pods = ns.api::<Pod>().list(&Default::default()).await.unwrap();
    assert_eq!(
        pods.items
            .iter()
            .filter(|p| is_active(p) && controller_uid(p).as_deref() == Some(first_uid.as_str()))
            .count(),
        2
    );
    manager.stop().await;
}

async fn revision_history_limit_deletes_old_replica_sets(family: ApiFamily) {
    let (ns, manager) = setup("deploy-history", family).await;
    let mut d = deployment_of("web", 1, family);
    d.spec.revision_history_limit = Some(1);
    let created = deployments(&ns, family)
        .create(&PostParams::default(), &d)
        .await
        .unwrap();
    let uid = created.metadata.uid.unwrap();
    wait_deployment_complete(&ns, family, "web", 1).await;
    for tag in ["3.8", "3.9", "3.7"] {
        patch(&ns, family, "web", image(tag)).await;
        wait_deployment_complete(&ns, family, "web", 1).await;
    }
    let rss = wait_replica_sets(
        &ns,
        family,
        &uid,
        "the new ReplicaSet and 1 old one",
        |rss| rss.len() == 2,
    )
    .await;
    let revisions: BTreeSet<String> = rss
        .iter()
        .map(|rs| rs.metadata.annotations.as_ref().unwrap()[REVISION].clone())
        .collect();
    assert_eq!(
        revisions,
        BTreeSet::from(["3".to_string(), "4".to_string()])
    );
    manager.stop().await;
}

async fn orphaned_replica_set_is_adopted_again(family: ApiFamily) {
    let (ns, manager) = setup("deploy-orphan", family).await;
    let api = deployments(&ns, family);
    let created = api
        .create(&PostParams::default(), &deployment_of("web", 2, family))
        .await
        .unwrap();
    let uid = created.metadata.uid.unwrap();
    wait_deployment_complete(&ns, family, "web", 2).await;
    let rss = wait_replica_sets(&ns, family, &uid, "one ReplicaSet", |rss| rss.len() == 1).await;
    let rs_uid = rss[0].metadata.uid.clone().unwrap();
    let pods_before: BTreeSet<String> = ns
        .api::<Pod>()
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|p| p.metadata.uid)
        .collect();

    api.delete("web", &DeleteParams::orphan()).await.unwrap();
    ns.wait_for_with(
        &api,
        WorkloadKind::Deployment.api_resource(family),
        "web",
        "the Deployment to be gone",
        TIMEOUT,
        |d| d.is_none(),
    )
    .await;
    ns.wait_for_list_with(
        &replica_sets(&ns, family),
        WorkloadKind::ReplicaSet.api_resource(family),
        watcher::Config::default(),
        "the ReplicaSet orphaned",
        TIMEOUT,
        |rss| {
            rss.len() == 1
                && mini_kcm_runtime::api::kinds::controller_uid(&rss[0].metadata).is_none()
        },
    )
    .await;
    let again = api
        .create(&PostParams::default(), &deployment_of("web", 2, family))
        .await
        .unwrap();
    let new_uid = again.metadata.uid.unwrap();
    let rss = wait_replica_sets(
        &ns,
        family,
        &new_uid,
        "the same ReplicaSet re-adopted",
        |rss| rss.len() == 1,
    )
    .await;
    assert_eq!(rss[0].metadata.uid.as_deref(), Some(rs_uid.as_str()));
    wait_deployment_complete(&ns, family, "web", 2).await;
    let pods_after: BTreeSet<String> = ns
        .api::<Pod>()
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|p| p.metadata.uid)
        .collect();
    assert_eq!(pods_before, pods_after, "no pod was recreated");
    manager.stop().await;
}

/// A finalizer the test puts on one pod, as a kubelet that takes its time to stop a container: the pod
/// stays, terminating, after the garbage collector deletes it, which holds the foreground deletion of its
/// owners open long enough to look at it.
const HOLD: &str = "minikcm.dev/e2e-hold";

/// Whether the object's reference to its controller asks a foreground deletion of the owner to wait.
fn blocks_owner_deletion(meta: &kube::api::ObjectMeta, owner_uid: &str) -> bool {
    meta.owner_references.iter().flatten().any(|r| {
        r.controller == Some(true) && r.uid == owner_uid && r.block_owner_deletion == Some(true)
    })
}

/// Waiting for its children, foreground-deleted.
fn deleting_in_foreground(meta: &kube::api::ObjectMeta) -> bool {
    meta.deletion_timestamp.is_some()
        && meta
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == "foregroundDeletion")
}

/// The UIDs a watch of `api` shows from its initial list on (returns once that list is in), until the
/// task is aborted: a pod or ReplicaSet created and deleted between two looks is still recorded.
async fn record_uids<K>(
    api: kube::Api<K>,
) -> (Arc<Mutex<BTreeSet<String>>>, tokio::task::JoinHandle<()>)
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
{
    use futures::StreamExt;
    let seen = Arc::new(Mutex::new(BTreeSet::new()));
    let (listed, listed_rx) = tokio::sync::oneshot::channel();
    let task = {
        let seen = seen.clone();
        tokio::spawn(async move {
            let mut listed = Some(listed);
            let mut stream =
                std::pin::pin!(watcher(api, watcher::Config::default()).default_backoff());
            while let Some(event) = stream.next().await {
                match event {
                    Ok(
                        watcher::Event::Apply(o)
                        | watcher::Event::InitApply(o)
                        | watcher::Event::Delete(o),
                    ) => {
                        if let Some(uid) = o.meta().uid.clone() {
                            seen.lock().unwrap().insert(uid);
                        }
                    }
                    Ok(watcher::Event::InitDone) => {
                        if let Some(listed) = listed.take() {
                            let _ = listed.send(());
                        }
                    }
                    _ => {}
                }
            }
        })
    };
    listed_rx.await.unwrap();
    (seen, task)
}

/// Waits until the manager has filed a decision about `name` that satisfies `condition`.
async fn wait_decision(
    ns: &TestNamespace,
    manager: &TestManager,
    name: &str,
    what: &str,
    condition: impl Fn(&mini_kcm_runtime::observability::decisions::Decision) -> bool,
) {
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    loop {
        let decisions = manager.decisions(&ns.name, name).await;
        if decisions.iter().any(&condition) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no decision about {name}: {what}: {decisions:#?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `propagationPolicy: Foreground` on a Deployment: the garbage collector deletes the ReplicaSet in the
/// foreground too, and that its pods; each owner stays, with a deletionTimestamp and the
/// `foregroundDeletion` finalizer, while a child whose controller reference has `blockOwnerDeletion: true`
/// (as mini-kcm writes them) exists. Meanwhile the controllers only report: the ReplicaSet controller
/// replaces none of the deleted pods and writes the falling count, the Deployment controller syncs only
/// its status. One pod is held by a finalizer; once released, every object is gone.
async fn foreground_deletion_waits_for_every_child(family: ApiFamily) {
    let (ns, manager) = setup("deploy-foreground", family).await;
    let api = deployments(&ns, family);
    let created = api
        .create(&PostParams::default(), &deployment_of("web", 3, family))
        .await
        .unwrap();
    let uid = created.metadata.uid.unwrap();
    wait_deployment_complete(&ns, family, "web", 3).await;
    let rss = wait_replica_sets(&ns, family, &uid, "one ReplicaSet", |rss| rss.len() == 1).await;
    let rs_name = rss[0].metadata.name.clone().unwrap();
    let rs_uid = rss[0].metadata.uid.clone().unwrap();
    assert!(
        blocks_owner_deletion(&rss[0].metadata, &uid),
        "the ReplicaSet's controller reference does not block its owner's deletion: {:?}",
        rss[0].metadata.owner_references
    );
    let pods = ns
        .api::<Pod>()
        .list(&Default::default())
        .await
        .unwrap()
        .items;
    assert_eq!(pods.len(), 3);
    for pod in &pods {
        assert!(
            blocks_owner_deletion(&pod.metadata, &rs_uid),
            "{:?} does not block its ReplicaSet's deletion: {:?}",
            pod.metadata.name,
            pod.metadata.owner_references
        );
    }
    let pods_before: BTreeSet<String> =
        pods.iter().filter_map(|p| p.metadata.uid.clone()).collect();
    let held = pods[0].metadata.name.clone().unwrap();
    let (pods_seen, pod_recorder) = record_uids(ns.api::<Pod>()).await;
    let (rss_seen, rs_recorder) = record_uids(replica_sets(&ns, family)).await;
    ns.api::<Pod>()
        .patch(
            &held,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": [HOLD]}})),
        )
        .await
        .unwrap();

    api.delete("web", &DeleteParams::foreground())
        .await
        .unwrap();
    // The other pods deleted, the held one terminating: the ReplicaSet has no active pod left, and
    // reports so (the status write of a sync that replaced none).
    ns.wait_for_list(
        &ns.api::<Pod>(),
        watcher::Config::default(),
        "only the held pod left, terminating",
        TIMEOUT,
        |pods| {
            pods.len() == 1
                && pods[0].metadata.name.as_deref() == Some(held.as_str())
                && pods[0].metadata.deletion_timestamp.is_some()
        },
    )
    .await;
    ns.wait_for_with(
        &replica_sets(&ns, family),
        WorkloadKind::ReplicaSet.api_resource(family),
        &rs_name,
        "the ReplicaSet deleted in the foreground, reporting no replica",
        TIMEOUT,
        |rs| {
            rs.is_some_and(|rs| {
                deleting_in_foreground(&rs.metadata)
                    && rs.status.as_ref().is_some_and(|s| s.replicas == 0)
            })
        },
    )
    .await;
    ns.wait_for_with(
        &api,
        WorkloadKind::Deployment.api_resource(family),
        "web",
        "the Deployment deleted in the foreground, its status synced to no replica",
        TIMEOUT,
        |d| {
            d.is_some_and(|d| {
                deleting_in_foreground(&d.metadata)
                    && d.status.as_ref().is_some_and(|s| {
                        s.replicas.unwrap_or(0) == 0 && s.available_replicas.unwrap_or(0) == 0
                    })
            })
        },
    )
    .await;
    // What the controllers decided while their objects were being deleted (a decision is filed when
    // its sync ends, just after the status write waited for above).
    wait_decision(
        &ns,
        &manager,
        &rs_name,
        "a ReplicaSet sync that saw it being deleted and created nothing",
        |d| {
            d.skipped
                .iter()
                .any(|s| s.contains("the ReplicaSet is being deleted"))
                && d.writes.iter().all(|w| w.verb != "create")
        },
    )
    .await;
    wait_decision(
        &ns,
        &manager,
        "web",
        "a Deployment sync that saw it being deleted",
        |d| d.kind == "Deployment" && d.skipped.iter().any(|s| s == "being deleted: status only"),
    )
    .await;

    // Released, the last pod goes, then the ReplicaSet, then the Deployment.
    ns.api::<Pod>()
        .patch(
            &held,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
    ns.wait_for_with(
        &api,
        WorkloadKind::Deployment.api_resource(family),
        "web",
        "the Deployment gone",
        TIMEOUT,
        |d| d.is_none(),
    )
    .await;
    assert!(
        replica_sets(&ns, family)
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert!(
        ns.api::<Pod>()
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    pod_recorder.abort();
    rs_recorder.abort();
    // A pod may have been replaced once while the deletion began: the pod informer can deliver the
    // garbage collector's first pod deletions before the ReplicaSet informer delivers the
    // ReplicaSet's deletionTimestamp, and a sync on that older ReplicaSet replaces them (upstream's
    // controller has the same window). Every pod, a replacement included, is gone above, and the
    // decision that saw the deletion created none; what must never happen is a new ReplicaSet.
    let replaced = pods_seen.lock().unwrap().difference(&pods_before).count();
    if replaced > 0 {
        println!("{replaced} pod(s) replaced before the ReplicaSet's deletion reached the cache");
    }
    assert_eq!(
        *rss_seen.lock().unwrap(),
        BTreeSet::from([rs_uid]),
        "a ReplicaSet was created during the deletion"
    );
    manager.stop().await;
}

/// `replicas: 2147483647` with `maxSurge: 1` overflowed `replicas + maxSurge` (a panic in debug builds,
/// which is how `cargo test` builds), and the panic wedged the key: patched back to 2 replicas the
/// Deployment never converged. A ResourceQuota caps the pods at 5 meanwhile.
async fn replicas_of_i32_max_do_not_wedge_the_deployment(family: ApiFamily) {
    let (ns, manager) = setup("deploy-huge", family).await;
    let quota: ResourceQuota = serde_json::from_value(json!({
        "metadata": {"name": "pods"},
        "spec": {"hard": {"pods": "5"}},
    }))
    .unwrap();
    ns.api::<ResourceQuota>()
        .create(&PostParams::default(), &quota)
        .await
        .unwrap();
    let mut d = deployment_of("huge", i32::MAX, family);
    rolling_update(&mut d, 1, 0);
    let created = deployments(&ns, family)
        .create(&PostParams::default(), &d)
        .await
        .unwrap();
    let uid = created.metadata.uid.unwrap();
    // The surge limit saturates at i32::MAX (Go's wraps negative and would never grow the ReplicaSet).
    wait_replica_sets(&ns, family, &uid, "a ReplicaSet sized 2147483647", |rss| {
        rss.len() == 1 && replicas_of(rss[0]) == i32::MAX
    })
    .await;
    ns.wait_for_list(
        &ns.api::<Pod>(),
        watcher::Config::default().labels(&app_selector("huge")),
        "the pods the quota allows",
        TIMEOUT,
        |pods| pods.iter().filter(|p| is_active(p)).count() == 5,
    )
    .await;

    patch(&ns, family, "huge", json!({"spec": {"replicas": 2}})).await;
    wait_deployment_complete(&ns, family, "huge", 2).await;
    for controller in ["deployment_controller", "replicaset_controller"] {
        assert_eq!(
            manager
                .metric(&format!("{controller}_sync_panics_total"))
                .await,
            0.0,
            "{controller} panicked"
        );
    }
    manager.stop().await;
}

/// The Deployment controller drops a key after 15 failed syncs in a row (as upstream). With the
/// manager's writes denied long enough for that (a ValidatingAdmissionPolicy on its user), the
/// Deployment must still converge once writes are allowed again, with nobody touching it: the
/// informers' periodic resync (here every 4-8 s) hands the key back. Without the resync this fails:
/// the key is dropped about 9 s into the outage and nothing ever enqueues it again.
async fn a_deployment_dropped_after_failing_writes_converges_by_resync(family: ApiFamily) {
    let ns = TestNamespace::create(plane(), &format!("deploy-drop-{}", family.label())).await;
    let denied = DeniedWrites::deny(&ns, family).await;

    let kinds = match family {
        ApiFamily::Apps => Kinds::Apps,
        ApiFamily::Copies => Kinds::Copies,
    };
    let manager = TestManager::start_as(
        &ns,
        ManagerOptions {
            kinds,
            // Resync every 4-8 s instead of 12-24 h.
            min_resync_period: Duration::from_secs(4),
            // Retries at most 1 s apart: the 15 failures that drop the key take about 9 s.
            deployment_max_retry_delay: Duration::from_secs(1),
            ..Default::default()
        },
        Some(manager_config(&ns).await),
    )
    .await;
    deployments(&ns, family)
        .create(&PostParams::default(), &deployment_of("web", 2, family))
        .await
        .unwrap();

    // The outage: the writes stay denied well past the ~9 s it takes to drop the key.
    tokio::time::sleep(Duration::from_secs(25)).await;
    let queue = format!(
        "workqueue_retries_total{{name=\"{}\"",
        family.queue_name("deployment")
    );
    let retries = manager.metric(&queue).await;
    assert!(retries >= 15.0, "only {retries} failed syncs were retried");
    let replica_sets_made = replica_sets(&ns, family)
        .list(&Default::default())
        .await
        .unwrap();
    assert!(
        replica_sets_made.items.is_empty(),
        "a write got through the policy"
    );

    denied.allow().await;
    let allowed_at = tokio::time::Instant::now();
    wait_deployment_complete(&ns, family, "web", 2).await;
    eprintln!(
        "converged {:.1}s after the manager's writes were allowed again ({retries} retries while denied)",
        allowed_at.elapsed().as_secs_f64()
    );
    manager.stop().await;
}
