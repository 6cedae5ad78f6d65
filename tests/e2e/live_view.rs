//! The live view in a real browser: a manager with its HTTP address runs a Deployment through a rollout,
//! then headless Chromium loads `/debug/controllers` (preselecting the Deployment) and the test checks
//! that the rendered page shows the new ReplicaSet in the Deployment's tree, the queue activity (syncs
//! counted) and the decisions, and that `mini-kcm explain` tells the same story on the command line; then
//! the same for a DaemonSet's node → pod map.
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

use k8s_openapi::api::apps::v1::DaemonSet;
use kube::api::{Patch, PatchParams, PostParams};
use mini_kcm_e2e::{
    TIMEOUT, TestManager, daemon_set, deployment_of, deployments, mini_kcm_binary, replica_sets,
    repo_path, runs_here, wait_deployment_complete,
};
use mini_kcm_manager::Kinds;
use mini_kcm_manager::ObjectView;
use mini_kcm_runtime::decisions::Decision;
use mini_kcm_runtime::inspect::ManagerView;
use mini_kcm_runtime::kinds::ApiFamily;
use mini_kcm_testkit::{PlaneConfig, PlaneInfo, TestNamespace, shared_plane};
use serde_json::json;

const REVISION: &str = "deployment.kubernetes.io/revision";

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

    // A DaemonSet: the node → pod map of its last sync, in the JSON, on the page and in explain.
    let daemon_sets = ns.api::<DaemonSet>();
    daemon_sets
        .create(&PostParams::default(), &daemon_set("agent"))
        .await
        .unwrap();
    let ds = ns
        .wait_for(
            &daemon_sets,
            "agent",
            "every daemon pod ready",
            TIMEOUT,
            |ds| {
                ds.and_then(|ds| ds.status.as_ref()).is_some_and(|s| {
                    s.desired_number_scheduled > 0 && s.number_ready == s.desired_number_scheduled
                })
            },
        )
        .await
        .unwrap();
    let nodes = ds.status.unwrap().desired_number_scheduled as usize;
    let ds_path = format!(
        "/debug/controllers/object?kind=ds&namespace={}&name=agent",
        ns.name
    );
    let view: ObjectView = wait_for_json(&manager, &ds_path, |v: &ObjectView| {
        v.node_map.as_ref().is_some_and(|m| {
            m.nodes
                .iter()
                .filter(|n| n.should_run && n.pods.len() == 1)
                .count()
                == nodes
        })
    })
    .await;
    let map = view.node_map.unwrap();
    assert_eq!(view.pods.len(), nodes, "{:?}", view.pods);
    for pod in &view.pods {
        let node = pod.node.as_deref().unwrap();
        let placed = map.nodes.iter().find(|n| n.node == node).unwrap();
        assert_eq!(placed.pods, std::slice::from_ref(&pod.name), "{map:?}");
    }
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
    for placed in &map.nodes {
        assert!(
            node_map.contains(&placed.node) && node_map.contains(&placed.pods[0]),
            "{} and its pod not in the page's node map:\n{dom}",
            placed.node
        );
        // The grid: the node's square says it runs its one daemon pod.
        let cell = format!(
            "data-node=\"{}\" data-state=\"runs\" data-pods=\"{}\"",
            placed.node, placed.pods[0]
        );
        assert!(
            node_map.contains(&cell),
            "no grid square {cell} on the page:\n{dom}"
        );
    }
    assert!(
        node_map.contains("id=\"node-grid\""),
        "no node grid:\n{dom}"
    );
    let png = chromium_output(
        &chromium,
        &[
            "--screenshot",
            "--window-size=1280,1400",
            "--hide-scrollbars",
        ],
        &ds_url,
    )
    .await;
    save_screenshot(&png, "live-view-daemonset.png");
    let explain = tokio::process::Command::new(mini_kcm_binary())
        .args(["explain", "ds/agent", "-n", &ns.name, "--manager-addr"])
        .arg(addr.to_string())
        .output()
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&explain.stdout);
    println!("mini-kcm explain ds/agent:\n{text}");
    assert!(text.contains("Node → pod map"), "{text}");
    assert_eq!(
        text.lines()
            .filter(|l| map
                .nodes
                .iter()
                .any(|n| l.trim_start().starts_with(&n.node) && l.contains(" yes ")))
            .count(),
        nodes,
        "{text}"
    );

    manager.stop().await;
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
