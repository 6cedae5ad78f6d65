//! The opt-in kwok pod behaviours of `deploy/kwok/stages.yaml`, on the real plane (no workload
//! controllers needed: bare pods, bound by the real scheduler).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{ObjectMeta, PostParams};
use mini_kcm_e2e::pod_template;
use mini_kcm_testkit::{PlaneConfig, PlaneInfo, TestNamespace, shared_plane};

const TIMEOUT: Duration = Duration::from_secs(60);
const BEHAVIOUR: &str = "minikcm.dev/kwok-behaviour";
const READY_AFTER: &str = "minikcm.dev/ready-after";

fn plane() -> &'static PlaneInfo {
    shared_plane(PlaneConfig::default())
}

fn pod(name: &str, labels: &[(&str, &str)], annotations: &[(&str, &str)]) -> Pod {
    let template = pod_template(name);
    let mut all_labels = template.metadata.and_then(|m| m.labels).unwrap_or_default();
    all_labels.extend(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(all_labels),
            annotations: Some(
                annotations
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect::<BTreeMap<_, _>>(),
            ),
            ..Default::default()
        },
        spec: template.spec,
        ..Default::default()
    }
}

fn condition(pod: &Pod, type_: &str) -> Option<String> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| c.status.clone())
}

fn phase(pod: Option<&Pod>) -> Option<&str> {
    pod?.status.as_ref()?.phase.as_deref()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_pods_become_running_and_ready_at_once() {
    let ns = TestNamespace::create(plane(), "kwok-default").await;
    let pods = ns.api::<Pod>();
    pods.create(&PostParams::default(), &pod("plain", &[], &[]))
        .await
        .unwrap();
    let ready = ns
        .wait_for(&pods, "plain", "a Running, Ready pod", TIMEOUT, |p| {
            phase(p) == Some("Running")
                && p.and_then(|p| condition(p, "Ready")).as_deref() == Some("True")
        })
        .await
        .unwrap();
    let node = ready.spec.and_then(|s| s.node_name).unwrap_or_default();
    assert!(
        ns.plane.nodes.contains(&node),
        "bound by the scheduler to a kwok node, got {node:?}"
    );
    assert!(
        ready.status.and_then(|s| s.pod_ip).is_some(),
        "kwok assigns a pod IP"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_ready_pods_run_but_stay_unready_while_delayed_pods_turn_ready() {
    let ns = TestNamespace::create(plane(), "kwok-never-ready").await;
    let pods = ns.api::<Pod>();
    pods.create(
        &PostParams::default(),
        &pod("never", &[(BEHAVIOUR, "never-ready")], &[]),
    )
    .await
    .unwrap();
    pods.create(
        &PostParams::default(),
        &pod("later", &[], &[(READY_AFTER, "2s")]),
    )
    .await
    .unwrap();
    ns.wait_for(&pods, "never", "a Running but unready pod", TIMEOUT, |p| {
        phase(p) == Some("Running")
            && p.and_then(|p| condition(p, "Ready")).as_deref() == Some("False")
    })
    .await;
    let later = ns
        .wait_for(
            &pods,
            "later",
            "the delayed pod to become Ready",
            TIMEOUT,
            |p| p.and_then(|p| condition(p, "Ready")).as_deref() == Some("True"),
        )
        .await
        .unwrap();
    // The delay is honoured: Ready came at least 2 s after creation (timestamps have 1 s resolution).
    let created = later.metadata.creation_timestamp.clone().unwrap().0;
    let ready_at = later
        .status
        .and_then(|s| s.conditions)
        .and_then(|cs| cs.into_iter().find(|c| c.type_ == "Ready"))
        .and_then(|c| c.last_transition_time)
        .unwrap()
        .0;
    let delay = ready_at.as_second() - created.as_second();
    assert!(delay >= 2, "ready after {delay}s, expected the 2s delay");
    // The never-ready pod, created first, is still not Ready after the delayed one turned Ready.
    let never = pods.get("never").await.unwrap();
    assert_eq!(condition(&never, "Ready").as_deref(), Some("False"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_pods_end_in_phase_failed() {
    let ns = TestNamespace::create(plane(), "kwok-fail").await;
    let pods = ns.api::<Pod>();
    pods.create(
        &PostParams::default(),
        &pod("crash", &[(BEHAVIOUR, "fail")], &[]),
    )
    .await
    .unwrap();
    let failed = ns
        .wait_for(&pods, "crash", "phase Failed", TIMEOUT, |p| {
            phase(p) == Some("Failed")
        })
        .await
        .unwrap();
    let exit_code = failed
        .status
        .and_then(|s| s.container_statuses)
        .and_then(|cs| cs.into_iter().next())
        .and_then(|c| c.state)
        .and_then(|s| s.terminated)
        .map(|t| t.exit_code);
    assert_eq!(exit_code, Some(1));
}
