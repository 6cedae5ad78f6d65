//! The live view in a real browser: a manager with its HTTP address runs a Deployment through a rollout,
//! then headless Chromium loads `/debug/controllers` (preselecting the Deployment) and the test checks
//! that the rendered page shows the new ReplicaSet in the Deployment's tree, the queue activity (syncs
//! counted) and the decisions, and that `mini-kcm explain` tells the same story on the command line.
//! A rollout whose status writes meet 409 Conflicts (the test keeps relabelling the Deployment) shows
//! them as routine retries, counted apart and not as failures. A DaemonSet on nodes that are tainted,
//! tainted after their pod started, left out by its nodeSelector, or refused a pod by a quota, shows
//! each state in its node grid.
//! It saves the browser's screenshots (the Deployment, the DaemonSet) under the target folder, and into
//! docs/images/live-view.png and live-view-daemonset.png (which docs/live-view.md shows) when
//! `MINI_KCM_UPDATE_SCREENSHOT=1`.
//!
//! Needs Debian's `chromium` (deploy/live-view/ensure-chromium.sh). Without it the test fails where
//! `MINI_KCM_REQUIRE_CHROMIUM` is set (.ci/run sets it, after installing it) and is skipped, saying why,
//! elsewhere.

// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod, Taint};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use mini_kcm_e2e::in_cluster_kit::is_ready;
use mini_kcm_e2e::{
    TIMEOUT, TestManager, daemon_set, deployment_of, deployments, mini_kcm_binary, pod_quota,
    replica_sets, repo_path, runs_here, wait_deployment_complete,
};
use mini_kcm_manager::Kinds;
use mini_kcm_manager::ObjectView;
use mini_kcm_runtime::api::kinds::ApiFamily;
use mini_kcm_runtime::observability::decisions::{
    Decision, NodeMap, NodePlacement, Outcome, RoutineRetry,
};
use mini_kcm_runtime::observability::inspect::{ControllerView, ManagerView};
use mini_kcm_testkit::nodes::{self, NodeSpec};
use mini_kcm_testkit::{PlaneConfig, PlaneInfo, TestNamespace, shared_plane};
use serde_json::json;

const REVISION: &str = "deployment.kubernetes.io/revision";
/// The node label the DaemonSet test's nodes carry and its DaemonSet selects; its value is the test's
/// namespace (the plane is shared by the tests of this binary; its own nodes lack the label).
const NODE_LABEL: &str = "minikcm.dev/e2e-test";

fn plane() -> &'static PlaneInfo {
    shared_plane(PlaneConfig::default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_shows_a_rollout_its_queue_activity_and_decisions() {
    let Some(chromium) = chromium() else {
        return;
    };
    let family = ApiFamily::Apps;
    let ns = TestNamespace::create(plane(), "live-view").await;
    let manager = TestManager::start(&ns, Kinds::Apps).await;
    let addr = manager.metrics_addr;

    // A rollout: revision 1 completes, then a template change makes revision 2 replace it.
    deployments(&ns, family)
        .create(&PostParams::default(), &deployment_of("web", 3, family))
        .await
        .unwrap();
    wait_deployment_complete(&ns, family, "web", 3).await;
    let change = json!({"spec": {"template": {"metadata": {"annotations": {"tour": "v2"}}}}});
    deployments(&ns, family)
        .patch("web", &PatchParams::default(), &Patch::Merge(&change))
        .await
        .unwrap();
    wait_deployment_complete(&ns, family, "web", 3).await;
    let new_rs = replica_sets(&ns, family)
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .find(|rs| {
            rs.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(REVISION))
                .is_some_and(|r| r == "2")
        })
        .and_then(|rs| rs.metadata.name)
        .expect("a ReplicaSet of revision 2");

    // The JSON first: the new ReplicaSet's sync that created its pods filed a decision with a plan
    // (filed when that sync returned, long before the rollout completed; waited for all the same).
    let decisions_path = format!(
        "/debug/controllers/decisions?controller=replicaset&namespace={}&name={new_rs}",
        ns.name
    );
    let decisions: Vec<Decision> = wait_for_json(&manager, &decisions_path, |d: &Vec<Decision>| {
        d.iter().any(|d| !d.plan.is_empty())
    })
    .await;
    let planned = decisions.iter().find(|d| !d.plan.is_empty()).unwrap();
    println!(
        "decision on {new_rs}: plan {:?}, reasons {:?}",
        planned.plan, planned.reasons
    );
    let object_path = format!(
        "/debug/controllers/object?kind=Deployment&family=apps&namespace={}&name=web",
        ns.name
    );
    // The Deployment itself: revision 2, not paused, its generation observed, and its conditions
    // (Progressing turns NewReplicaSetAvailable in a status write after the counts that completed it).
    let view: ObjectView = wait_for_json(&manager, &object_path, |v: &ObjectView| {
        v.conditions.iter().any(|c| {
            c.type_ == "Progressing" && c.reason.as_deref() == Some("NewReplicaSetAvailable")
        })
    })
    .await;
    assert!(view.found && view.controller_running, "{view:?}");
    assert_eq!(view.paused, Some(false), "{view:?}");
    assert_eq!(view.revision.as_deref(), Some("2"), "{view:?}");
    assert!(
        view.generation.is_some() && view.observed_generation == view.generation,
        "{view:?}"
    );
    assert!(
        view.conditions.iter().any(|c| c.type_ == "Available"
            && c.status == "True"
            && c.reason.as_deref() == Some("MinimumReplicasAvailable")),
        "{view:?}"
    );
    let new_entry = view
        .replica_sets
        .iter()
        .find(|rs| rs.name == new_rs)
        .unwrap_or_else(|| panic!("{new_rs} in the object view: {view:?}"));
    assert_eq!(new_entry.owner.as_deref(), Some("Deployment/web"));
    assert_eq!(new_entry.pods.len(), 3, "{new_entry:?}");
    assert!(
        new_entry
            .pods
            .iter()
            .all(|p| p.pod_template_hash == new_entry.pod_template_hash
                && p.owner.as_deref() == Some(&format!("ReplicaSet/{new_rs}"))),
        "{new_entry:?}"
    );
    let state: ManagerView = get_json(&manager, "/debug/controllers/state").await;
    let synced = |controller: &str| {
        state
            .controllers
            .iter()
            .filter(|c| c.controller == controller)
            .map(|c| c.syncs.total)
            .sum::<u64>()
    };
    assert!(
        synced("deployment") > 0 && synced("replicaset") > 0,
        "{state:?}"
    );

    // The page, rendered by the browser.
    let url = format!(
        "http://{addr}/debug/controllers?kind=Deployment&family=apps&namespace={}&name=web",
        ns.name
    );
    let dom = chromium_output(&chromium, &["--dump-dom"], &url).await;
    let dom = String::from_utf8_lossy(&dom);
    // What the script rendered (the script's own text, after it, holds the same markup as templates).
    let dom = dom.split("<script>").next().unwrap();
    assert!(
        dom.contains("<div id=\"status\" class=\"muted\">updated "),
        "the page did not load its data:\n{dom}"
    );
    let tree = dom
        .split("id=\"rs-tree\"")
        .nth(1)
        .unwrap_or_else(|| panic!("no ReplicaSet tree in the page:\n{dom}"));
    assert!(
        tree.contains(&new_rs),
        "the tree does not show {new_rs}:\n{dom}"
    );
    assert!(
        dom.contains("id=\"object-revision\">2<") && dom.contains("id=\"object-paused\">false<"),
        "the page does not show revision 2, not paused:\n{dom}"
    );
    let conditions = dom
        .split("id=\"object-conditions\"")
        .nth(1)
        .unwrap_or_else(|| panic!("no conditions on the page:\n{dom}"));
    assert!(
        conditions.contains("NewReplicaSetAvailable")
            && conditions.contains("MinimumReplicasAvailable"),
        "the page's conditions lack Progressing or Available:\n{dom}"
    );
    let sync_counts: Vec<u64> = dom
        .split("syncs-total\">")
        .skip(1)
        .filter_map(|rest| rest.split('<').next()?.parse().ok())
        .collect();
    assert!(
        sync_counts.iter().any(|&n| n > 0),
        "no sync counted on the page ({sync_counts:?}):\n{dom}"
    );
    // Every controller row counts its routine retries apart, in grey with the reasons on hover.
    assert_eq!(
        dom.matches("class=\"n syncs-routine\"><span class=\"routine\" title=\"write conflict: ")
            .count(),
        state.controllers.len(),
        "a controller row without its routine-retry count:\n{dom}"
    );
    assert!(
        dom.contains("class=\"decision") && dom.contains("<span class=\"label\">plan</span>"),
        "no decision with a plan on the page:\n{dom}"
    );
    assert!(
        dom.contains(&format!("ReplicaSet {}/{new_rs}", ns.name)),
        "no decision about {new_rs} in the decision log:\n{dom}"
    );

    // The rollout timeline: the manager's points (JSON), then the SVG the page drew from them, series
    // by series: revision 1 scaled 3 → 0, revision 2 up to 3 replicas and 3 ready, the limits of
    // `replicas` 3 with maxSurge 1 and maxUnavailable 0 (4 and 3), and hoverable decision marks.
    let old_rs = view
        .replica_sets
        .iter()
        .find(|rs| rs.revision.as_deref() == Some("1"))
        .map(|rs| rs.name.clone())
        .unwrap_or_else(|| panic!("a ReplicaSet of revision 1: {view:?}"));
    let last = view
        .rollout
        .last()
        .unwrap_or_else(|| panic!("no rollout point: {view:?}"));
    assert!(
        last.replica_sets
            .iter()
            .any(|r| r.name == new_rs && r.replicas == 3 && r.ready == 3)
            && !last.replica_sets.iter().any(|r| r.name == old_rs),
        "{:?}",
        view.rollout
    );
    assert!(
        view.rollout.iter().any(|p| p.decision.is_some()),
        "{:?}",
        view.rollout
    );
    let timeline = dom
        .split("id=\"rollout-timeline\"")
        .nth(1)
        .and_then(|rest| rest.split("</svg>").next())
        .unwrap_or_else(|| panic!("no rollout timeline on the page:\n{dom}"));
    let values = |attrs: &str| -> Vec<Option<i64>> {
        let rest = timeline
            .split(&format!("{attrs} data-values=\""))
            .nth(1)
            .unwrap_or_else(|| panic!("no series {attrs} in the timeline:\n{timeline}"));
        rest.split('"')
            .next()
            .unwrap()
            .split(',')
            .map(|n| n.parse().ok())
            .collect()
    };
    let new_replicas = values(&format!("data-series=\"replicas\" data-rs=\"{new_rs}\""));
    let new_ready = values(&format!("data-series=\"ready\" data-rs=\"{new_rs}\""));
    let old_replicas = values(&format!("data-series=\"replicas\" data-rs=\"{old_rs}\""));
    assert_eq!(new_replicas.last(), Some(&Some(3)), "{timeline}");
    assert_eq!(new_ready.last(), Some(&Some(3)), "{timeline}");
    assert!(
        old_replicas.contains(&Some(3)) && old_replicas.last() == Some(&Some(0)),
        "revision 1 does not go from 3 to 0: {old_replicas:?}"
    );
    assert!(
        values("data-series=\"surge-limit\"")
            .iter()
            .all(|n| *n == Some(4)),
        "{timeline}"
    );
    assert!(
        values("data-series=\"unavailable-limit\"")
            .iter()
            .all(|n| *n == Some(3)),
        "{timeline}"
    );
    assert!(
        timeline.contains("class=\"decision-mark\"") && timeline.contains("<title>#"),
        "no hoverable decision mark in the timeline:\n{timeline}"
    );

    let png = chromium_output(
        &chromium,
        &[
            "--screenshot",
            "--window-size=1280,1900",
            "--hide-scrollbars",
        ],
        &url,
    )
    .await;
    save_screenshot(&png, "live-view.png");

    // The same story on the command line.
    let explain = tokio::process::Command::new(mini_kcm_binary())
        .args([
            "explain",
            "deployment/web",
            "-n",
            &ns.name,
            "--manager-addr",
        ])
        .arg(addr.to_string())
        .output()
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&explain.stdout);
    println!("mini-kcm explain:\n{text}");
    assert!(
        explain.status.success(),
        "{}",
        String::from_utf8_lossy(&explain.stderr)
    );
    assert!(
        text.starts_with(&format!("Deployment {}/web (apps)", ns.name)),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.trim_start().starts_with(&new_rs) && l.contains("revision 2")),
        "{text}"
    );
    assert!(text.contains("queue:"), "{text}");
    assert!(text.contains("paused:       false    revision 2"), "{text}");
    assert!(
        text.contains("Progressing True (NewReplicaSetAvailable)"),
        "{text}"
    );
    assert!(
        text.contains(&format!("Decisions of ReplicaSet {new_rs}")) && text.contains("plan:"),
        "{text}"
    );

    manager.stop().await;
}

/// A rollout whose writes meet 409 Conflicts: the test relabels the Deployment again and again while it
/// rolls, so the controller's status writes (guarded by the resourceVersion it read from its cache) are
/// refused now and then. Each such sync is retried and the rollout completes; the state counts the
/// conflicts as routine retries, not failures, and the page, the object view and `explain` show no
/// failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conflicts_during_a_rollout_are_routine_retries_not_failures() {
    let Some(chromium) = chromium() else {
        return;
    };
    let family = ApiFamily::Apps;
    let ns = TestNamespace::create(plane(), "live-view-conflicts").await;
    let manager = TestManager::start(&ns, Kinds::Apps).await;
    let api = deployments(&ns, family);
    api.create(&PostParams::default(), &deployment_of("busy", 3, family))
        .await
        .unwrap();
    wait_deployment_complete(&ns, family, "busy", 3).await;

    // Roll to a new revision and relabel the Deployment after every answer, until the manager has
    // counted a conflict; a rollout that completed without one is followed by the next.
    let conflicts = |state: &ManagerView| -> u64 {
        deployment_controller(state)
            .syncs
            .routine
            .iter()
            .filter(|r| r.reason == RoutineRetry::Conflict)
            .map(|r| r.count)
            .sum()
    };
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    let mut revision = 1;
    let mut pokes = 0u64;
    // Whether the last answer showed a rollout under way (the first loop starts one).
    let mut rolling = false;
    let state = loop {
        let state: ManagerView = get_json(&manager, "/debug/controllers/state").await;
        if conflicts(&state) > 0 {
            break state;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no conflict counted within {TIMEOUT:?} ({pokes} relabellings, {revision} revisions): {state:?}"
        );
        if !rolling {
            revision += 1;
            let change = json!({"spec": {"template": {"metadata": {"annotations": {"rev": revision.to_string()}}}}});
            api.patch("busy", &PatchParams::default(), &Patch::Merge(&change))
                .await
                .unwrap();
        }
        pokes += 1;
        let poke = json!({"metadata": {"labels": {"poke": pokes.to_string()}}});
        let d = api
            .patch("busy", &PatchParams::default(), &Patch::Merge(&poke))
            .await
            .unwrap();
        rolling = !rollout_complete(&d, 3);
    };
    println!(
        "{} conflict(s) after {pokes} relabellings and {} revision(s)",
        conflicts(&state),
        revision - 1
    );
    wait_deployment_complete(&ns, family, "busy", 3).await;

    // The JSON: the conflicts are routine retries, not failures, and say why.
    let state: ManagerView = get_json(&manager, "/debug/controllers/state").await;
    let deployment = deployment_controller(&state);
    assert!(
        deployment.syncs.routine_retries >= conflicts(&state) && conflicts(&state) > 0,
        "{deployment:?}"
    );
    let conflict = deployment
        .syncs
        .routine
        .iter()
        .find(|r| r.reason == RoutineRetry::Conflict)
        .unwrap();
    assert!(conflict.why.contains("409 Conflict"), "{conflict:?}");
    for c in &state.controllers {
        assert_eq!(
            c.syncs.failed, 0,
            "a healthy rollout has no failure, only routine retries: {c:?}"
        );
    }
    // A sync that decided before its conflict is filed as retried, never as failed.
    let decisions: Vec<Decision> = get_json(
        &manager,
        &format!(
            "/debug/controllers/decisions?namespace={}&limit=1000",
            ns.name
        ),
    )
    .await;
    assert!(
        !decisions.iter().any(|d| matches!(
            d.outcome,
            mini_kcm_runtime::observability::decisions::Outcome::Failed { .. }
        )),
        "{decisions:?}"
    );

    // The page: the conflicts in the routine column (grey, why on hover), 0 in the failed column.
    let url = format!(
        "http://{}/debug/controllers?kind=Deployment&family=apps&namespace={}&name=busy",
        manager.metrics_addr, ns.name
    );
    let dom = chromium_output(&chromium, &["--dump-dom"], &url).await;
    let dom = String::from_utf8_lossy(&dom);
    let dom = dom.split("<script>").next().unwrap();
    let row = dom
        .split("<tr><td>deployment/apps")
        .nth(1)
        .and_then(|rest| rest.split("</tr>").next())
        .unwrap_or_else(|| panic!("no row of deployment/apps:\n{dom}"));
    assert!(
        row.contains("<td class=\"n syncs-failed \">0</td>"),
        "the failed column is not a plain 0:\n{row}"
    );
    let routine = row
        .split("class=\"n syncs-routine\"><span class=\"routine\" title=\"")
        .nth(1)
        .unwrap_or_else(|| panic!("no routine-retry cell:\n{row}"));
    let (tip, count) = routine.split_once("\">").unwrap();
    let count: u64 = count.split('<').next().unwrap().parse().unwrap();
    assert!(count > 0, "no routine retry on the page:\n{row}");
    assert!(
        tip.contains("write conflict: ")
            && tip.contains("409 Conflict")
            && tip.contains("Not failures"),
        "the tooltip does not say why:\n{tip}"
    );
    assert!(
        !dom.contains("class=\"decision failed\"") && !dom.contains("<span class=\"bad\">failed: "),
        "a failure on the page:\n{dom}"
    );
    // A decision filed as retried, or a write refused with a conflict, is shown grey, saying routine.
    let retried = decisions.iter().any(|d| {
        matches!(
            d.outcome,
            mini_kcm_runtime::observability::decisions::Outcome::Retried { .. }
        )
    });
    let conflicting_write = decisions
        .iter()
        .any(|d| d.writes.iter().any(|w| w.routine.is_some()));
    println!("retried decisions: {retried}, conflicting writes: {conflicting_write}");
    assert!(
        !retried || dom.contains("class=\"routine outcome-retried\""),
        "{dom}"
    );
    assert!(
        !conflicting_write || dom.contains("write conflict (routine, retried): "),
        "{dom}"
    );

    // `explain` shows no failure either.
    let explain = tokio::process::Command::new(mini_kcm_binary())
        .args([
            "explain",
            "deployment/busy",
            "-n",
            &ns.name,
            "--manager-addr",
        ])
        .arg(manager.metrics_addr.to_string())
        .output()
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&explain.stdout);
    println!("mini-kcm explain deployment/busy:\n{text}");
    assert!(
        explain.status.success(),
        "{}",
        String::from_utf8_lossy(&explain.stderr)
    );
    assert!(
        !text.contains("FAILED") && !text.contains("failed sync"),
        "{text}"
    );

    manager.stop().await;
}

/// The Deployment controller of the apps family in `state`.
fn deployment_controller(state: &ManagerView) -> &ControllerView {
    state
        .controllers
        .iter()
        .find(|c| c.controller == "deployment" && c.family == "apps")
        .unwrap_or_else(|| panic!("no deployment controller: {state:?}"))
}

/// The Deployment's rollout of `replicas` is done: observed, all updated and available, none extra.
fn rollout_complete(d: &mini_kcm_runtime::api::kinds::DeploymentObject, replicas: i32) -> bool {
    d.status.as_ref().is_some_and(|s| {
        s.observed_generation == d.metadata.generation
            && s.updated_replicas == Some(replicas)
            && s.available_replicas == Some(replicas)
            && s.replicas == Some(replicas)
    })
}

/// A DaemonSet on nodes of every kind the node grid tells apart: two that run its pod (green), one
/// tainted `NoSchedule` before (grey: not tolerated), one tainted after its pod started (red: the pod
/// may stay, no new one would be placed), the plane's own nodes, which lack the label its
/// `nodeSelector` asks for (grey), and one whose pod a ResourceQuota refuses (amber: should run one,
/// has none). The JSON, the page and `explain` show each; the screenshot is the docs' DaemonSet picture.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_node_grid_shows_taints_node_selectors_and_missing_pods() {
    let Some(chromium) = chromium() else {
        return;
    };
    let ns = TestNamespace::create(plane(), "live-view-ds").await;
    // Room for three daemon pods in the namespace: the fourth node's is refused.
    pod_quota(&ns, "three-pods", 3).await;
    let manager = TestManager::start(&ns, Kinds::Apps).await;
    let addr = manager.metrics_addr;
    let dedicated = || Taint {
        key: "dedicated".into(),
        value: Some("gpu".into()),
        effect: "NoSchedule".into(),
        time_added: None,
    };

    // The nodes it may run on (node-late-taint is tainted only once its pod runs), and one tainted
    // before the DaemonSet exists.
    let mut nodes = TestNodes::new(&ns);
    let a = nodes.add("a", |n| n).await;
    let b = nodes.add("b", |n| n).await;
    let tainted = nodes
        .add("tainted", |n| n.taint("dedicated", "gpu", "NoSchedule"))
        .await;
    let late = nodes.add("late-taint", |n| n).await;

    // The DaemonSet, selecting the test's nodes only (the plane's own lack the label).
    let mut ds = daemon_set("agent");
    ds.spec.template.spec.as_mut().unwrap().node_selector =
        Some(BTreeMap::from([(NODE_LABEL.to_string(), ns.name.clone())]));
    ns.api::<DaemonSet>()
        .create(&PostParams::default(), &ds)
        .await
        .unwrap();

    // One Ready daemon pod on each of node-a, node-b and node-late-taint, and none elsewhere: the
    // quota's three pods are used.
    let running = [a.as_str(), b.as_str(), late.as_str()];
    let pods = ns
        .wait_for_list(
            &ns.api::<Pod>(),
            Default::default(),
            "one Ready daemon pod on each of node-a, node-b and node-late-taint",
            TIMEOUT,
            |pods: &[Pod]| {
                pods.len() == running.len()
                    && running.iter().all(|node| {
                        pods.iter().any(|p| {
                            p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node)
                                && is_ready(p)
                        })
                    })
            },
        )
        .await;
    let pod_on = |node: &str| {
        pods.iter()
            .find(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node))
            .and_then(|p| p.metadata.name.clone())
            .unwrap()
    };
    let late_pod = pod_on(&late);

    // node-late-taint is tainted like node-tainted now that its pod runs: NoSchedule evicts nothing, so
    // the pod stays, though the node should no longer run one. The manager sees it before the last node
    // comes.
    nodes::set_taints(&ns.client, &late, &[dedicated()])
        .await
        .unwrap();
    let ds_path = format!(
        "/debug/controllers/object?kind=ds&namespace={}&name=agent",
        ns.name
    );
    wait_for_json(&manager, &ds_path, |v: &ObjectView| {
        v.node_map.as_ref().is_some_and(|m| {
            m.nodes
                .iter()
                .any(|n| n.node == late && !n.should_run && n.pods == [late_pod.clone()])
        })
    })
    .await;

    // The last node: it should run a pod, which the quota (3 pods, all used) refuses.
    let over = nodes.add("over-quota", |n| n).await;
    let state_of = |m: &NodeMap, node: &str| -> NodePlacement {
        m.nodes
            .iter()
            .find(|n| n.node == node)
            .cloned()
            .unwrap_or_else(|| panic!("{node} not in the node map: {m:?}"))
    };
    // Wait for the manager to see it (once kwok has it Ready), count it in the DaemonSet's desired pods
    // (node-a, node-b and node-over-quota) and fail to create its pod.
    let refused = |d: &Decision| match &d.outcome {
        Outcome::Failed { error } => error.contains(&over) && error.contains("exceeded quota"),
        _ => false,
    };
    let view: ObjectView = wait_for_json(&manager, &ds_path, |v: &ObjectView| {
        let wanted = v
            .node_map
            .as_ref()
            .is_some_and(|m| m.nodes.iter().any(|n| n.node == over && n.should_run));
        wanted && v.desired == Some(3) && v.decisions.iter().any(refused)
    })
    .await;
    let map = view.node_map.clone().unwrap();
    println!("node map: {map:#?}");
    assert_eq!(map.omitted, 0, "{map:?}");
    // Green: node-a and node-b run their pod.
    for node in [&a, &b] {
        let n = state_of(&map, node);
        assert!(
            n.should_run && n.pods == [pod_on(node)] && n.why.is_none(),
            "{n:?}"
        );
    }
    // Grey: node-tainted, whose taint the pod does not tolerate.
    let n = state_of(&map, &tainted);
    assert!(
        !n.should_run
            && n.pods.is_empty()
            && n.why.as_deref() == Some("node does not tolerate taint dedicated=gpu:NoSchedule"),
        "{n:?}"
    );
    // Red: node-late-taint should not run one, but keeps the pod it had.
    let n = state_of(&map, &late);
    assert!(
        !n.should_run
            && n.pods == [late_pod.clone()]
            && n.why.as_deref() == Some("node does not tolerate taint dedicated=gpu:NoSchedule"),
        "{n:?}"
    );
    // Amber: node-over-quota should run one and has none.
    let n = state_of(&map, &over);
    assert!(
        n.should_run
            && n.pods.is_empty()
            && n.why.as_deref() == Some("no daemon pod here yet: one is to be created"),
        "{n:?}"
    );
    // Grey: the plane's own nodes, which the nodeSelector leaves out.
    let plane_nodes: Vec<&NodePlacement> = map
        .nodes
        .iter()
        .filter(|n| !nodes.names.contains(&n.node))
        .collect();
    assert!(
        plane_nodes.iter().any(|n| n.node.starts_with("kwok-node-")),
        "{map:?}"
    );
    for n in &plane_nodes {
        assert!(
            !n.should_run
                && n.pods.is_empty()
                && n.why.as_deref()
                    == Some(
                        "nodeSelector or required node affinity does not match the node's labels"
                    ),
            "{n:?}"
        );
    }
    // Every test node once, besides the plane's.
    assert_eq!(
        map.nodes.len(),
        nodes.names.len() + plane_nodes.len(),
        "{map:?}"
    );
    // Its pods: the three that run, none on node-over-quota.
    assert_eq!(view.pods.len(), running.len(), "{:?}", view.pods);
    for node in running {
        assert!(
            view.pods
                .iter()
                .any(|p| p.name == pod_on(node) && p.node.as_deref() == Some(node)),
            "{:?}",
            view.pods
        );
    }
    // The quota's refusals are real failures: counted as failed syncs, filed as failed decisions.
    let state: ManagerView = get_json(&manager, "/debug/controllers/state").await;
    let daemonset = state
        .controllers
        .iter()
        .find(|c| c.controller == "daemonset" && c.family == "apps")
        .unwrap_or_else(|| panic!("no daemonset controller: {state:?}"));
    assert!(daemonset.syncs.failed > 0, "{daemonset:?}");
    let failed = view.decisions.iter().find(|d| refused(d)).unwrap();
    assert!(failed.plan.iter().any(|p| p.contains(&over)), "{failed:?}");

    // The page: each node's square in its colour, the table's reasons, the failures in red.
    let ds_url = format!(
        "http://{addr}/debug/controllers?kind=DaemonSet&family=apps&namespace={}&name=agent",
        ns.name
    );
    let dom = chromium_output(&chromium, &["--dump-dom"], &ds_url).await;
    let dom = String::from_utf8_lossy(&dom);
    let dom = dom.split("<script>").next().unwrap();
    let node_map = dom
        .split("Node → pod map")
        .nth(1)
        .unwrap_or_else(|| panic!("no node map on the page:\n{dom}"));
    assert!(
        node_map.contains("id=\"node-grid\""),
        "no node grid:\n{dom}"
    );
    let square = |node: &str, state: &str, pods: &str, fill: &str| {
        let cell = node_map
            .split(&format!("<g class=\"node-cell\" data-node=\"{node}\" "))
            .nth(1)
            .and_then(|rest| rest.split("</g>").next())
            .unwrap_or_else(|| panic!("no grid square for {node}:\n{dom}"));
        assert!(
            cell.starts_with(&format!("data-state=\"{state}\" data-pods=\"{pods}\""))
                && cell.contains(&format!("fill=\"{fill}\"")),
            "the square of {node} is not {state} ({fill}) with pods {pods:?}:\n{cell}"
        );
    };
    const GREEN: &str = "#2e7d32";
    const AMBER: &str = "#f9a825";
    const GREY: &str = "#bdbdbd";
    const RED: &str = "#b00020";
    square(&a, "runs", &pod_on(&a), GREEN);
    square(&b, "runs", &pod_on(&b), GREEN);
    square(&tainted, "not-wanted", "", GREY);
    square(&late, "extra", &late_pod, RED);
    square(&over, "missing", "", AMBER);
    for n in &plane_nodes {
        square(&n.node, "not-wanted", "", GREY);
    }
    assert!(
        node_map.contains("node does not tolerate taint dedicated=gpu:NoSchedule")
            && node_map.contains("nodeSelector or required node affinity does not match")
            && node_map.contains("no daemon pod here yet"),
        "the table lacks a reason:\n{dom}"
    );
    let row = dom
        .split("<tr><td>daemonset/apps")
        .nth(1)
        .and_then(|rest| rest.split("</tr>").next())
        .unwrap_or_else(|| panic!("no row of daemonset/apps:\n{dom}"));
    assert!(
        row.contains("<td class=\"n syncs-failed bad\">"),
        "the failed syncs are not red:\n{row}"
    );
    assert!(
        dom.contains("class=\"decision failed\"") && dom.contains("exceeded quota"),
        "no refused creation among the decisions:\n{dom}"
    );
    let png = chromium_output(
        &chromium,
        &[
            "--screenshot",
            "--window-size=1280,1500",
            "--hide-scrollbars",
        ],
        &ds_url,
    )
    .await;
    save_screenshot(&png, "live-view-daemonset.png");

    let explain = tokio::process::Command::new(mini_kcm_binary())
        .args(["explain", "ds/agent", "-n", &ns.name, "--manager-addr"])
        .arg(manager.metrics_addr.to_string())
        .output()
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&explain.stdout);
    println!("mini-kcm explain ds/agent:\n{text}");
    assert!(text.contains("Node → pod map"), "{text}");
    let line = |node: &str| {
        text.lines()
            .find(|l| l.trim_start().starts_with(&format!("{node} ")))
            .unwrap_or_else(|| panic!("no line for {node}:\n{text}"))
            .to_string()
    };
    assert!(line(&a).contains(" yes "), "{text}");
    assert!(
        line(&late).contains(" no ") && line(&late).contains("agent-"),
        "{text}"
    );
    assert!(
        line(&tainted).contains(" no ") && line(&tainted).contains("dedicated"),
        "{text}"
    );
    assert!(
        line(&over).contains(" yes ") && line(&over).contains("no daemon pod here yet"),
        "{text}"
    );
    assert!(
        plane_nodes
            .iter()
            .all(|n| line(&n.node).contains(" no ") && line(&n.node).contains("nodeSelector")),
        "{text}"
    );
    assert!(
        text.contains(&format!("FAILED: creating a pod on node {over}"))
            && text.contains("exceeded quota: three-pods"),
        "{text}"
    );

    manager.stop().await;
    nodes.delete().await;
}

/// The simulated nodes of the DaemonSet test, named `node-<suffix>` (short, for the screenshot; only
/// this test of the binary, whose plane is its own, creates nodes) and labelled `NODE_LABEL=<namespace>`;
/// deleted at the end.
struct TestNodes {
    client: kube::Client,
    namespace: String,
    names: Vec<String>,
}

impl TestNodes {
    fn new(ns: &TestNamespace) -> Self {
        TestNodes {
            client: ns.client.clone(),
            namespace: ns.name.clone(),
            names: Vec::new(),
        }
    }

    /// Creates one more selected node, shaped by `shape` (e.g. a taint); returns its name.
    async fn add(&mut self, suffix: &str, shape: impl FnOnce(NodeSpec) -> NodeSpec) -> String {
        let name = format!("node-{suffix}");
        let spec = shape(NodeSpec::named(&name).label(NODE_LABEL, &self.namespace));
        nodes::create(&self.client, &spec).await.unwrap();
        self.names.push(name.clone());
        name
    }

    async fn delete(self) {
        let api: Api<Node> = Api::all(self.client.clone());
        for name in &self.names {
            let _ = api.delete(name, &DeleteParams::default()).await;
        }
    }
}

/// The `chromium` command, or `None` (skipping) when it is missing and not required.
/// Keeps a screenshot under the target folder, and in docs/images when `MINI_KCM_UPDATE_SCREENSHOT=1`.
fn save_screenshot(png: &[u8], name: &str) {
    assert!(
        png.starts_with(b"\x89PNG"),
        "the screenshot {name} is not a PNG"
    );
    let artifact = repo_path(&format!("target/live-view/{name}"));
    std::fs::create_dir_all(artifact.parent().unwrap()).unwrap();
    std::fs::write(&artifact, png).unwrap();
    println!("screenshot: {} ({} bytes)", artifact.display(), png.len());
    if std::env::var_os("MINI_KCM_UPDATE_SCREENSHOT").is_some_and(|v| v == "1") {
        std::fs::write(repo_path(&format!("docs/images/{name}")), png).unwrap();
        println!("updated docs/images/{name}");
    }
}

fn chromium() -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("chromium"))
            .find(|candidate| candidate.is_file())
    });
    let missing = found.is_none().then(|| {
        "chromium is not on PATH (deploy/live-view/ensure-chromium.sh installs it)".to_string()
    });
    runs_here("MINI_KCM_REQUIRE_CHROMIUM", missing);
    found
}

/// Runs headless Chromium on `url` with `args` and returns what it printed (`--dump-dom`) or the
/// screenshot it wrote (`--screenshot`). Virtual time lets the page's script fetch and render a few
/// refreshes before the DOM is taken; the fetches themselves are real.
async fn chromium_output(chromium: &Path, args: &[&str], url: &str) -> Vec<u8> {
    let profile = tempdir("live-view-chromium");
    let screenshot = profile.join("shot.png");
    let mut command = tokio::process::Command::new(chromium);
    command
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--virtual-time-budget=4000",
        ])
        .arg(format!(
            "--user-data-dir={}",
            profile.join("profile").display()
        ))
        .kill_on_drop(true);
    for arg in args {
        if *arg == "--screenshot" {
            command.arg(format!("--screenshot={}", screenshot.display()));
        } else {
            command.arg(arg);
        }
    }
    let output = tokio::time::timeout(Duration::from_secs(120), command.arg(url).output())
        .await
        .expect("chromium did not finish within 120 s")
        .unwrap();
    assert!(
        output.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let result = if args.contains(&"--screenshot") {
        std::fs::read(&screenshot).unwrap_or_else(|e| {
            panic!(
                "chromium wrote no screenshot ({e}): {}",
                String::from_utf8_lossy(&output.stderr)
            )
        })
    } else {
        output.stdout
    };
    let _ = std::fs::remove_dir_all(&profile);
    result
}

fn tempdir(prefix: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("{prefix}-{}-{}", std::process::id(), rand_suffix()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

/// GETs `path` from the manager and parses the JSON body.
async fn get_json<T: serde::de::DeserializeOwned>(manager: &TestManager, path: &str) -> T {
    let body = manager.get(path).await;
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"))
}

/// Polls `path` until `done` holds for its JSON (an HTTP endpoint has no watch), within [`TIMEOUT`].
async fn wait_for_json<T: serde::de::DeserializeOwned + std::fmt::Debug>(
    manager: &TestManager,
    path: &str,
    done: impl Fn(&T) -> bool,
) -> T {
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    loop {
        let value: T = get_json(manager, path).await;
        if done(&value) {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{path} did not reach the expected state within {TIMEOUT:?}; last: {value:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
