//! The ReplicaSet controller on a real control plane, for `apps/v1` ReplicaSets and for the
//! `minikcm.dev` copies (every scenario runs once per family). kube-controller-manager runs without its
//! own workload controllers; each test runs mini-kcm's manager scoped to its own namespace.

// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Pod, ResourceQuota};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use mini_kcm_e2e::{
    TIMEOUT, TestManager, app_selector, controller_uid, family_resource, has_available_replicas,
    is_active, pod_quota, pod_template, replica_set, replica_sets,
};
use mini_kcm_manager::Kinds;
use mini_kcm_runtime::api::kinds::{ApiFamily, ReplicaSetObject};
use mini_kcm_testkit::{PlaneConfig, PlaneInfo, TestNamespace, shared_plane};
use serde_json::json;

fn plane() -> &'static PlaneInfo {
    shared_plane(PlaneConfig::default())
}

fn kinds(family: ApiFamily) -> Kinds {
    match family {
        ApiFamily::Apps => Kinds::Apps,
        ApiFamily::Copies => Kinds::Copies,
    }
}

use mini_kcm_e2e::for_both_families;

for_both_families!(
    scales_up_and_down,
    replaces_a_deleted_pod,
    adopts_a_matching_orphan,
    releases_a_pod_whose_labels_stop_matching,
    never_touches_a_pod_owned_by_another_controller,
    deleting_the_replica_set_garbage_collects_its_pods,
    reports_replica_failure_when_pods_are_rejected,
    a_scale_up_writes_correlated_events,
    a_status_the_next_sync_supersedes_is_left_to_it,
    a_pod_turning_ready_is_what_woke_the_sync,
);

async fn setup(prefix: &str, family: ApiFamily) -> (TestNamespace, TestManager) {
    let ns = TestNamespace::create(plane(), &format!("{prefix}-{}", family.label())).await;
    let manager = TestManager::start(&ns, kinds(family)).await;
    (ns, manager)
}

/// Waits until the ReplicaSet reports `replicas` available pods for its current generation.
async fn wait_available(
    ns: &TestNamespace,
    family: ApiFamily,
    name: &str,
    replicas: i32,
) -> ReplicaSetObject {
    ns.wait_for_with(
        &replica_sets(ns, family),
        family_resource(family),
        name,
        &format!("{replicas} available replicas"),
        TIMEOUT,
        |rs| has_available_replicas(rs, replicas),
    )
    .await
    .unwrap_or_else(|| panic!("{name} vanished"))
}

/// Waits until exactly `count` active pods labelled `app=<app>` exist, all controlled by `owner_uid`.
async fn wait_owned_pods(ns: &TestNamespace, app: &str, owner_uid: &str, count: usize) -> Vec<Pod> {
    ns.wait_for_list(
        &ns.api::<Pod>(),
        watcher::Config::default().labels(&app_selector(app)),
        &format!("{count} active pods of {app} owned by {owner_uid}"),
        TIMEOUT,
        |pods| {
            let active: Vec<_> = pods.iter().filter(|p| is_active(p)).collect();
            active.len() == count
                && active
                    .iter()
                    .all(|p| controller_uid(p).as_deref() == Some(owner_uid))
        },
    )
    .await
    .into_iter()
    .filter(is_active)
    .collect()
}

async fn scale(ns: &TestNamespace, family: ApiFamily, name: &str, replicas: i32) {
    replica_sets(ns, family)
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": replicas}})),
        )
        .await
        .unwrap_or_else(|e| panic!("scaling {name}: {e}"));
}

async fn scales_up_and_down(family: ApiFamily) {
    let (ns, manager) = setup("rs-scale", family).await;
    let api = replica_sets(&ns, family);
    let created = api
        .create(&PostParams::default(), &replica_set("web", 3, family))
        .await
        .unwrap();
    let uid = created.metadata.uid.clone().unwrap();
    wait_available(&ns, family, "web", 3).await;
    wait_owned_pods(&ns, "web", &uid, 3).await;
    // The decision log tells why, with the numbers (filed when the sync ends, before its pods show up).
    let decisions = manager.decisions(&ns.name, "web").await;
    let created = decisions
        .iter()
        .find(|d| d.plan.iter().any(|p| p.starts_with("creating 3 pod(s)")))
        .unwrap_or_else(|| panic!("no decision to create 3 pods: {decisions:#?}"));
    assert_eq!(
        created.plan,
        ["creating 3 pod(s) in slow-start batches 1, 2"]
    );
    assert_eq!(created.reasons, ["too few replicas: 0 active of 3 desired"]);
    assert_eq!(created.writes.len(), 3, "{created:#?}");
    assert!(
        created
            .writes
            .iter()
            .all(|w| w.verb == "create" && w.error.is_none())
    );
    assert_eq!(created.kind, "ReplicaSet");

    scale(&ns, family, "web", 6).await;
    wait_available(&ns, family, "web", 6).await;
    wait_owned_pods(&ns, "web", &uid, 6).await;

    scale(&ns, family, "web", 1).await;
    let rs = wait_available(&ns, family, "web", 1).await;
    wait_owned_pods(&ns, "web", &uid, 1).await;
    let decisions = manager.decisions(&ns.name, "web").await;
    let deleted = decisions
        .iter()
        .find(|d| {
            d.reasons
                .iter()
                .any(|r| r == "too many replicas: 6 active of 1 desired")
        })
        .unwrap_or_else(|| panic!("no decision to delete 5 pods: {decisions:#?}"));
    assert_eq!(
        deleted.plan.len(),
        5,
        "one line per pod, with its rank: {deleted:#?}"
    );
    assert!(
        deleted
            .plan
            .iter()
            .all(|p| p.contains("ranked first because"))
    );
    assert_eq!(
        deleted.writes.iter().filter(|w| w.verb == "delete").count(),
        5
    );
    let status = rs.status.unwrap();
    assert_eq!(status.ready_replicas, Some(1));
    assert_eq!(status.fully_labeled_replicas, Some(1));

    scale(&ns, family, "web", 0).await;
    wait_available(&ns, family, "web", 0).await;
    wait_owned_pods(&ns, "web", &uid, 0).await;
    manager.stop().await;
}

async fn replaces_a_deleted_pod(family: ApiFamily) {
    let (ns, manager) = setup("rs-replace", family).await;
    let created = replica_sets(&ns, family)
        .create(&PostParams::default(), &replica_set("web", 2, family))
        .await
        .unwrap();
    let uid = created.metadata.uid.clone().unwrap();
    let pods = wait_owned_pods(&ns, "web", &uid, 2).await;
    let victim = pods[0].metadata.name.clone().unwrap();
    ns.api::<Pod>()
        .delete(&victim, &DeleteParams::default())
        .await
        .unwrap();
    let replaced = ns
        .wait_for_list(
            &ns.api::<Pod>(),
            watcher::Config::default().labels(&app_selector("web")),
            "a replacement pod",
            TIMEOUT,
            |pods| {
                let active: Vec<_> = pods.iter().filter(|p| is_active(p)).collect();
                active.len() == 2
                    && active
                        .iter()
                        .all(|p| p.metadata.name.as_deref() != Some(&victim))
            },
        )
        .await;
    assert!(
        replaced
            .iter()
            .filter(|p| is_active(p))
            .all(|p| controller_uid(p).as_deref() == Some(&uid))
    );
    wait_available(&ns, family, "web", 2).await;
    manager.stop().await;
}

fn bare_pod(name: &str, app: &str) -> Pod {
    let template = pod_template(app);
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: template.metadata.and_then(|m| m.labels),
            ..Default::default()
        },
        spec: template.spec,
        ..Default::default()
    }
}

async fn adopts_a_matching_orphan(family: ApiFamily) {
    let (ns, manager) = setup("rs-adopt", family).await;
    let pods = ns.api::<Pod>();
    pods.create(&PostParams::default(), &bare_pod("orphan", "web"))
        .await
        .unwrap();
    let created = replica_sets(&ns, family)
        .create(&PostParams::default(), &replica_set("web", 2, family))
        .await
        .unwrap();
    let uid = created.metadata.uid.clone().unwrap();
    let owned = wait_owned_pods(&ns, "web", &uid, 2).await;
    assert!(
        owned
            .iter()
            .any(|p| p.metadata.name.as_deref() == Some("orphan")),
        "the orphan was adopted rather than a second pod created: {:?}",
        owned.iter().map(|p| &p.metadata.name).collect::<Vec<_>>()
    );
    let orphan = pods.get("orphan").await.unwrap();
    let reference = orphan.metadata.owner_references.unwrap().remove(0);
    assert_eq!(reference.controller, Some(true));
    assert_eq!(reference.block_owner_deletion, Some(true));
    assert_eq!(reference.api_version, family_resource(family).api_version);
    manager.stop().await;
}

async fn releases_a_pod_whose_labels_stop_matching(family: ApiFamily) {
    let (ns, manager) = setup("rs-release", family).await;
    let created = replica_sets(&ns, family)
        .create(&PostParams::default(), &replica_set("web", 2, family))
        .await
        .unwrap();
    let uid = created.metadata.uid.clone().unwrap();
    let owned = wait_owned_pods(&ns, "web", &uid, 2).await;
    let moved = owned[0].metadata.name.clone().unwrap();
    let pods = ns.api::<Pod>();
    pods.patch(
        &moved,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": "elsewhere"}}})),
    )
    .await
    .unwrap();
    // Released (no controller any more), and replaced so that two pods match again.
    ns.wait_for(
        &pods,
        &moved,
        "the relabelled pod to be released",
        TIMEOUT,
        |p| p.is_some_and(|p| controller_uid(p).is_none()),
    )
    .await;
    let now_owned = wait_owned_pods(&ns, "web", &uid, 2).await;
    assert!(
        now_owned
            .iter()
            .all(|p| p.metadata.name.as_deref() != Some(&moved))
    );
    manager.stop().await;
}

async fn never_touches_a_pod_owned_by_another_controller(family: ApiFamily) {
    let (ns, manager) = setup("rs-foreign", family).await;
    // A real owner, so the garbage collector leaves the pod alone.
    let owner = ns
        .api::<ConfigMap>()
        .create(
            &PostParams::default(),
            &ConfigMap {
                metadata: ObjectMeta {
                    name: Some("other-controller".into()),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let foreign_ref = OwnerReference {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: "other-controller".into(),
        uid: owner.metadata.uid.clone().unwrap(),
        controller: Some(true),
        block_owner_deletion: None,
    };
    let mut foreign = bare_pod("foreign", "web");
    foreign.metadata.owner_references = Some(vec![foreign_ref.clone()]);
    let pods = ns.api::<Pod>();
    let before = pods.create(&PostParams::default(), &foreign).await.unwrap();

    let created = replica_sets(&ns, family)
        .create(&PostParams::default(), &replica_set("web", 2, family))
        .await
        .unwrap();
    let uid = created.metadata.uid.clone().unwrap();
    wait_available(&ns, family, "web", 2).await;
    // Two pods of its own, besides the foreign one.
    ns.wait_for_list(
        &pods,
        watcher::Config::default().labels(&app_selector("web")),
        "2 owned pods beside the foreign one",
        TIMEOUT,
        |all| {
            all.iter()
                .filter(|p| is_active(p) && controller_uid(p).as_deref() == Some(uid.as_str()))
                .count()
                == 2
                && all
                    .iter()
                    .any(|p| p.metadata.name.as_deref() == Some("foreign"))
        },
    )
    .await;
    // Scale down to 0: the foreign pod must survive with its owner reference untouched.
    scale(&ns, family, "web", 0).await;
    wait_available(&ns, family, "web", 0).await;
    ns.wait_for_list(
        &pods,
        watcher::Config::default().labels(&app_selector("web")),
        "only the foreign pod left",
        TIMEOUT,
        |all| {
            let active: Vec<_> = all.iter().filter(|p| is_active(p)).collect();
            active.len() == 1 && active[0].metadata.name.as_deref() == Some("foreign")
        },
    )
    .await;
    let after = pods.get("foreign").await.unwrap();
    assert_eq!(after.metadata.uid, before.metadata.uid);
    assert_eq!(after.metadata.owner_references, Some(vec![foreign_ref]));
    assert!(after.metadata.deletion_timestamp.is_none());
    manager.stop().await;
}

async fn deleting_the_replica_set_garbage_collects_its_pods(family: ApiFamily) {
    let (ns, manager) = setup("rs-gc", family).await;
    let api = replica_sets(&ns, family);
    let created = api
        .create(&PostParams::default(), &replica_set("web", 3, family))
        .await
        .unwrap();
    let uid = created.metadata.uid.clone().unwrap();
    wait_owned_pods(&ns, "web", &uid, 3).await;
    api.delete("web", &DeleteParams::background())
        .await
        .unwrap();
    ns.wait_for_list(
        &ns.api::<Pod>(),
        watcher::Config::default().labels(&app_selector("web")),
        "the garbage collector to delete every pod",
        TIMEOUT,
        |pods| pods.is_empty(),
    )
    .await;
    manager.stop().await;
}

async fn reports_replica_failure_when_pods_are_rejected(family: ApiFamily) {
    let (ns, manager) = setup("rs-quota", family).await;
    // A quota of 2 pods: the API server rejects the third creation (upstream's "exceeded quota" e2e).
    pod_quota(&ns, "two-pods", 2).await;

    let api = replica_sets(&ns, family);
    let created_at = std::time::Instant::now();
    let created = api
        .create(&PostParams::default(), &replica_set("web", 3, family))
        .await
        .unwrap();
    let uid = created.metadata.uid.clone().unwrap();
    let failed = ns
        .wait_for_with(
            &api,
            family_resource(family),
            "web",
            "a ReplicaFailure condition",
            TIMEOUT,
            |rs| {
                rs.and_then(|rs| rs.status.as_ref())
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|cs| {
                        cs.iter()
                            .any(|c| c.type_.as_deref() == Some("ReplicaFailure"))
                    })
            },
        )
        .await
        .unwrap();
    let condition = failed
        .status
        .unwrap()
        .status
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_.as_deref() == Some("ReplicaFailure"))
        .unwrap();
    assert_eq!(condition.status.as_deref(), Some("True"));
    assert_eq!(condition.reason.as_deref(), Some("FailedCreate"));
    assert!(
        condition
            .message
            .clone()
            .unwrap_or_default()
            .contains("exceeded quota"),
        "{condition:?}"
    );
    wait_owned_pods(&ns, "web", &uid, 2).await;

    // A Warning event like upstream's.
    ns.wait_for_list(
        &ns.api::<k8s_openapi::api::core::v1::Event>(),
        watcher::Config::default(),
        "a FailedCreate warning event",
        TIMEOUT,
        |events| {
            events.iter().any(|e| {
                e.reason.as_deref() == Some("FailedCreate")
                    && e.type_.as_deref() == Some("Warning")
                    && e.message
                        .as_deref()
                        .is_some_and(|m| m.starts_with("Error creating: "))
            })
        },
    )
    .await;

    // No hot loop: the failing key backs off exponentially (5 ms, 10 ms, 20 ms, ...), so t seconds after
    // the first failure it can have been retried about log2(t / 5 ms) times, not hundreds. Let a couple
    // of seconds pass, then compare (a few extra for syncs triggered by events, e.g. the status write).
    let retries = format!(
        "workqueue_retries_total{{name=\"{}\"}}",
        family.queue_name("replicaset")
    );
    while created_at.elapsed() < Duration::from_secs(2) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let elapsed = created_at.elapsed();
    let seen = manager.metric(&retries).await;
    let bound = (elapsed.as_secs_f64() / 0.005).log2() + 4.0;
    assert!(seen >= 1.0, "the failing key was never retried");
    assert!(
        seen <= bound,
        "{seen} retries in {elapsed:?} (bound {bound:.1}): not backing off"
    );

    // Lifting the quota lets the controller finish and clears the condition. The key is in backoff by
    // now and a quota is not something the controller watches; touching the ReplicaSet syncs it at once.
    ns.api::<ResourceQuota>()
        .delete("two-pods", &DeleteParams::default())
        .await
        .unwrap();
    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {"touched": "after-quota"}}})),
    )
    .await
    .unwrap();
    ns.wait_for_with(
        &api,
        family_resource(family),
        "web",
        "the condition to clear and 3 pods",
        TIMEOUT,
        |rs| {
            rs.and_then(|rs| rs.status.as_ref()).is_some_and(|s| {
                s.replicas == 3
                    && s.conditions.as_ref().is_none_or(|cs| {
                        cs.iter()
                            .all(|c| c.type_.as_deref() != Some("ReplicaFailure"))
                    })
            })
        },
    )
    .await;
    manager.stop().await;
}

/// A scale-up of 20 pods writes upstream's correlated events: 9 `Created pod: …` Events and one
/// `(combined from similar events): …` Event whose count is patched, the counts summing to the 20
/// creations (20 is within the spam filter's burst of 25, so nothing is skipped).
async fn a_scale_up_writes_correlated_events(family: ApiFamily) {
    const PODS: i32 = 20;
    let (ns, manager) = setup("rs-events", family).await;
    let created = replica_sets(&ns, family)
        .create(&PostParams::default(), &replica_set("web", PODS, family))
        .await
        .unwrap();
    let uid = created.metadata.uid.clone().unwrap();
    wait_owned_pods(&ns, "web", &uid, PODS as usize).await;
    let count = |e: &k8s_openapi::api::core::v1::Event| e.count.unwrap_or(1);
    let about_rs = |e: &&k8s_openapi::api::core::v1::Event| {
        e.involved_object.uid.as_deref() == Some(uid.as_str())
            && e.reason.as_deref() == Some("SuccessfulCreate")
    };
    let events = ns
        .wait_for_list(
            &ns.api::<k8s_openapi::api::core::v1::Event>(),
            watcher::Config::default(),
            &format!("SuccessfulCreate events counting {PODS} creations"),
            TIMEOUT,
            |events| events.iter().filter(about_rs).map(count).sum::<i32>() >= PODS,
        )
        .await;
    let created: Vec<_> = events.iter().filter(about_rs).collect();
    assert_eq!(created.iter().map(|e| count(e)).sum::<i32>(), PODS);
    assert_eq!(
        created.len(),
        10,
        "9 single events and one combined: {created:#?}"
    );
    let combined: Vec<_> = created
        .iter()
        .filter(|e| {
            e.message
                .as_deref()
                .is_some_and(|m| m.starts_with("(combined from similar events): Created pod: "))
        })
        .collect();
    assert_eq!(combined.len(), 1, "{created:#?}");
    assert_eq!(count(combined[0]), PODS - 9);
    for e in &created {
        assert_eq!(e.type_.as_deref(), Some("Normal"));
        assert_eq!(
            e.source.as_ref().and_then(|s| s.component.as_deref()),
            Some("replicaset-controller")
        );
    }
    manager.stop().await;
}

/// The roles of the in-cluster manifests are all the manager needs: it runs with only the service
/// account of `deploy/in-cluster` (`kubectl kustomize` of the base, whose ClusterRole covers the copies,
/// and of `overlays/apps`, whose ClusterRole covers apps/v1) and manages both families (watch, create and
/// delete pods, adopt by patch, write status, events).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_is_sufficient() {
    let ns = TestNamespace::create(plane(), "rbac").await;
    mini_kcm_e2e::apply_access_objects(
        ns.plane,
        &["deploy/in-cluster", "deploy/in-cluster/overlays/apps"],
    );
    let token = mini_kcm_e2e::service_account_token(&ns.client).await;
    let mut config = mini_kcm_local_plane::config_from_kubeconfig(&ns.plane.kubeconfig)
        .await
        .unwrap();
    config.auth_info = kube::config::AuthInfo {
        token: Some(token.into()),
        ..Default::default()
    };
    let manager = TestManager::start_as(
        &ns,
        mini_kcm_manager::ManagerOptions {
            kinds: Kinds::Both,
            ..Default::default()
        },
        Some(config),
    )
    .await;
    let pods = ns.api::<Pod>();
    for family in [ApiFamily::Apps, ApiFamily::Copies] {
        let app = format!("web-{}", family.label());
        pods.create(
            &PostParams::default(),
            &bare_pod(&format!("orphan-{}", family.label()), &app),
        )
        .await
        .unwrap();
        let created = replica_sets(&ns, family)
            .create(&PostParams::default(), &replica_set(&app, 2, family))
            .await
            .unwrap();
        let uid = created.metadata.uid.clone().unwrap();
        wait_available(&ns, family, &app, 2).await;
        let owned = wait_owned_pods(&ns, &app, &uid, 2).await;
        assert!(
            owned
                .iter()
                .any(|p| p.metadata.name.as_deref() == Some(&format!("orphan-{}", family.label())))
        );
        scale(&ns, family, &app, 1).await;
        wait_owned_pods(&ns, &app, &uid, 1).await;
    }
    ns.wait_for_list(
        &ns.api::<k8s_openapi::api::core::v1::Event>(),
        watcher::Config::default(),
        "SuccessfulCreate and SuccessfulDelete events",
        TIMEOUT,
        |events| {
            let has = |reason: &str| events.iter().any(|e| e.reason.as_deref() == Some(reason));
            has("SuccessfulCreate") && has("SuccessfulDelete")
        },
    )
    .await;
    for family in [ApiFamily::Apps, ApiFamily::Copies] {
        rbac_rolls_out_a_deployment(&ns, family).await;
        rbac_rolls_out_a_daemon_set(&ns, family).await;
    }
    manager.stop().await;
}

/// A Deployment rolled to a new template with no history kept: ReplicaSets created, scaled (update),
/// adopted (patch) and deleted, Deployment status and annotations written.
async fn rbac_rolls_out_a_deployment(ns: &TestNamespace, family: ApiFamily) {
    use k8s_openapi::api::apps::v1::DeploymentSpec;
    use mini_kcm_runtime::api::kinds::{DeploymentObject, WorkloadKind};
    let resource = WorkloadKind::Deployment.api_resource(family);
    let api: kube::Api<DeploymentObject> =
        kube::Api::namespaced_with(ns.client.clone(), &ns.name, &resource);
    let name = format!("deploy-{}", family.label());
    let mut d = DeploymentObject::new(
        &name,
        &resource,
        DeploymentSpec {
            replicas: Some(2),
            revision_history_limit: Some(0),
            selector: mini_kcm_e2e::selector(&name),
            template: pod_template(&name),
            ..Default::default()
        },
    );
    d.status = None;
    api.create(&PostParams::default(), &d).await.unwrap();
    for revision in ["1", "2"] {
        if revision == "2" {
            api.patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"template": {"spec": {"containers": [
                    {"name": "main", "image": "registry.k8s.io/pause:rbac"}
                ]}}}})),
            )
            .await
            .unwrap();
        }
        ns.wait_for_with(
            &api,
            resource.clone(),
            &name,
            &format!("revision {revision} complete"),
            TIMEOUT,
            |d| {
                d.is_some_and(|d| {
                    let s = d.status.clone().unwrap_or_default();
                    d.metadata
                        .annotations
                        .as_ref()
                        .and_then(|a| a.get("deployment.kubernetes.io/revision"))
                        .is_some_and(|r| r == revision)
                        && s.observed_generation == d.metadata.generation
                        && s.updated_replicas == Some(2)
                        && s.available_replicas == Some(2)
                        && s.replicas == Some(2)
                })
            },
        )
        .await;
    }
    ns.wait_for_list_with(
        &replica_sets(ns, family),
        family_resource(family),
        watcher::Config::default().labels(&app_selector(&name)),
        "the old ReplicaSet deleted (revisionHistoryLimit 0)",
        TIMEOUT,
        |rss| rss.len() == 1,
    )
    .await;
}

/// A DaemonSet on the plane's nodes rolled to a new template with no history kept: ControllerRevisions
/// created, labelled and deleted, pods created and deleted, DaemonSet status written.
async fn rbac_rolls_out_a_daemon_set(ns: &TestNamespace, family: ApiFamily) {
    use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSetSpec};
    use mini_kcm_runtime::api::kinds::{DaemonSetObject, WorkloadKind};
    let resource = WorkloadKind::DaemonSet.api_resource(family);
    let api: kube::Api<DaemonSetObject> =
        kube::Api::namespaced_with(ns.client.clone(), &ns.name, &resource);
    let name = format!("ds-{}", family.label());
    let mut ds = DaemonSetObject::new(
        &name,
        &resource,
        DaemonSetSpec {
            revision_history_limit: Some(0),
            selector: mini_kcm_e2e::selector(&name),
            template: pod_template(&name),
            ..Default::default()
        },
    );
    ds.status = None;
    api.create(&PostParams::default(), &ds).await.unwrap();
    for round in 0..2 {
        if round == 1 {
            api.patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"template": {"spec": {"containers": [
                    {"name": "main", "image": "registry.k8s.io/pause:rbac"}
                ]}}}})),
            )
            .await
            .unwrap();
        }
        ns.wait_for_with(
            &api,
            resource.clone(),
            &name,
            "every node's pod updated and ready",
            TIMEOUT,
            |ds| {
                ds.is_some_and(|ds| {
                    let s = ds.status.clone().unwrap_or_default();
                    s.observed_generation == ds.metadata.generation
                        && s.desired_number_scheduled > 0
                        && s.number_ready == s.desired_number_scheduled
                        && s.updated_number_scheduled == Some(s.desired_number_scheduled)
                })
            },
        )
        .await;
    }
    ns.wait_for_list(
        &ns.api::<ControllerRevision>(),
        watcher::Config::default().labels(&app_selector(&name)),
        "only the current ControllerRevision (revisionHistoryLimit 0)",
        TIMEOUT,
        |revisions| revisions.len() == 1,
    )
    .await;
}

/// A status write that the next sync is about to supersede is skipped and counted, and the status still
/// ends right. Forty pods are created in slow-start batches (1, 2, 4, 8, 16, 9), so the first pods' watch
/// events arrive while the creating sync still runs: its status write (`replicas: 0`) is left to the
/// sync those events queued. Without the deferral the counter stays 0.
async fn a_status_the_next_sync_supersedes_is_left_to_it(family: ApiFamily) {
    let (ns, manager) = setup("rs-defer", family).await;
    replica_sets(&ns, family)
        .create(&PostParams::default(), &replica_set("web", 40, family))
        .await
        .unwrap();
    let rs = wait_available(&ns, family, "web", 40).await;
    assert_eq!(rs.status.unwrap_or_default().ready_replicas, Some(40));
    let deferred = manager
        .metric("replicaset_controller_status_writes_deferred_total")
        .await;
    assert!(
        deferred >= 1.0,
        "no status write was left to a pending sync while 40 pods started"
    );
    manager.stop().await;
}

/// What woke a sync is filed with its decision: a pod turning Ready wakes its ReplicaSet, and the
/// decision of that sync says so. A sync that only refreshes the status files no decision, so the
/// ReplicaSet is held in deletion by a finalizer: each of its syncs then decides to skip ("being
/// deleted"), and the pod, Ready only seconds after its creation, turns Ready meanwhile. The queue's
/// priority metrics are on /metrics too.
async fn a_pod_turning_ready_is_what_woke_the_sync(family: ApiFamily) {
    const HOLD: &str = "minikcm.dev/e2e-hold";
    let (ns, manager) = setup("rs-woken", family).await;
    let api = replica_sets(&ns, family);
    let mut rs = replica_set("woken", 1, family);
    rs.metadata.finalizers = Some(vec![HOLD.into()]);
    if let Some(template) = rs.spec.template.as_mut() {
        template.metadata.get_or_insert_default().annotations = Some(BTreeMap::from([(
            "minikcm.dev/ready-after".to_string(),
            "6s".to_string(),
        )]));
    }
    let created = api.create(&PostParams::default(), &rs).await.unwrap();
    let uid = created.metadata.uid.clone().unwrap();
    let pods = wait_owned_pods(&ns, "woken", &uid, 1).await;
    let pod = pods[0].metadata.name.clone().unwrap();
    let ready = |p: &Pod| {
        p.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
    };
    assert!(!ready(&pods[0]), "{pod} is Ready too early for this test");
    api.delete("woken", &DeleteParams::background())
        .await
        .unwrap();

    let expected = format!("pod {pod} became Ready (update)");
    let deadline = std::time::Instant::now() + TIMEOUT;
    let woken = loop {
        let decisions = manager.decisions(&ns.name, "woken").await;
        if let Some(d) = decisions.iter().find(|d| d.woken_by.contains(&expected)) {
            break d.clone();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no decision woken by {expected:?}: {decisions:#?}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert!(
        woken.skipped.iter().any(|s| s.contains("being deleted")),
        "{woken:#?}"
    );
    assert!(woken.waited_ms >= 0.0);

    // Priorities are on by default, and their metrics are exported for this family's queue.
    let metrics = manager.get("/metrics").await;
    let queue = family.queue_name("replicaset");
    for family_name in [
        "workqueue_depth_by_priority",
        "workqueue_low_priority_promoted_total",
    ] {
        assert!(
            metrics
                .lines()
                .any(|l| l.starts_with(family_name) && l.contains(&format!("name=\"{queue}\""))),
            "{family_name} for {queue} missing from /metrics"
        );
    }

    // Let the ReplicaSet go, so the namespace can.
    api.patch(
        "woken",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    manager.stop().await;
}
