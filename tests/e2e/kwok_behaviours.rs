//! The kwok pod behaviours of `deploy/kwok/stages.yaml`, on the real plane (no workload controllers
//! needed: bare pods, bound by the real scheduler): the opt-in behaviours, and the kubelet rules (stages
//! `kubelet-*`, on unless `MINI_KCM_KUBELET_RULES=off`) that report pods as a kubelet would.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, Probe, TCPSocketAction};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
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

fn ready_condition(pod: &Pod) -> Option<&k8s_openapi::api::core::v1::PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
}

fn waiting_reasons(pod: Option<&Pod>) -> Vec<String> {
    pod.and_then(|p| p.status.as_ref())
        .and_then(|s| s.container_statuses.as_ref())
        .map(|cs| {
            cs.iter()
                .filter_map(|c| c.state.as_ref()?.waiting.as_ref()?.reason.clone())
                .collect()
        })
        .unwrap_or_default()
}

fn with_image(mut pod: Pod, image: &str) -> Pod {
    if let Some(spec) = pod.spec.as_mut() {
        spec.containers[0].image = Some(image.into());
    }
    pod
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_with_unpullable_images_stay_pending_in_image_pull_backoff() {
    let ns = TestNamespace::create(plane(), "kwok-image-pull").await;
    let pods = ns.api::<Pod>();
    // The missing images of upstream's e2e suites (the default pattern of the kubelet rules).
    for (name, image) in [
        ("tag-404", "webserver:404"),
        ("non-existent", "foo:non-existent"),
    ] {
        pods.create(
            &PostParams::default(),
            &with_image(pod(name, &[], &[]), image),
        )
        .await
        .unwrap();
    }
    for name in ["tag-404", "non-existent"] {
        ns.wait_for(&pods, name, "ErrImagePull first", TIMEOUT, |p| {
            waiting_reasons(p) == ["ErrImagePull"] || waiting_reasons(p) == ["ImagePullBackOff"]
        })
        .await;
        let backing_off = ns
            .wait_for(&pods, name, "Pending in ImagePullBackOff", TIMEOUT, |p| {
                phase(p) == Some("Pending") && waiting_reasons(p) == ["ImagePullBackOff"]
            })
            .await
            .unwrap();
        let ready = ready_condition(&backing_off).unwrap();
        assert_eq!(ready.status, "False");
        assert_eq!(ready.reason.as_deref(), Some("ContainersNotReady"));
        assert!(
            backing_off.status.and_then(|s| s.pod_ip).is_some(),
            "the sandbox has an IP"
        );
    }
    // A pullable image created afterwards turns Ready; the unpullable ones still are not.
    pods.create(&PostParams::default(), &pod("pullable", &[], &[]))
        .await
        .unwrap();
    ns.wait_for(&pods, "pullable", "a Ready pod", TIMEOUT, |p| {
        p.and_then(|p| condition(p, "Ready")).as_deref() == Some("True")
    })
    .await;
    for name in ["tag-404", "non-existent"] {
        let pod = pods.get(name).await.unwrap();
        assert_eq!(phase(Some(&pod)), Some("Pending"), "{name}");
        assert_eq!(condition(&pod, "Ready").as_deref(), Some("False"), "{name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_probes_delay_ready_by_their_initial_delay() {
    const INITIAL_DELAY: i32 = 4;
    let ns = TestNamespace::create(plane(), "kwok-probe").await;
    let pods = ns.api::<Pod>();
    let mut probed = pod("probed", &[], &[]);
    if let Some(spec) = probed.spec.as_mut() {
        spec.containers[0].readiness_probe = Some(Probe {
            tcp_socket: Some(TCPSocketAction {
                port: IntOrString::Int(80),
                ..Default::default()
            }),
            initial_delay_seconds: Some(INITIAL_DELAY),
            ..Default::default()
        });
    }
    pods.create(&PostParams::default(), &probed).await.unwrap();
    // First Running but not Ready: the probe has not run yet.
    ns.wait_for(&pods, "probed", "Running, not yet Ready", TIMEOUT, |p| {
        phase(p) == Some("Running")
            && p.and_then(|p| condition(p, "Ready")).as_deref() == Some("False")
    })
    .await;
    let ready = ns
        .wait_for(
            &pods,
            "probed",
            "Ready after the probe's delay",
            TIMEOUT,
            |p| p.and_then(|p| condition(p, "Ready")).as_deref() == Some("True"),
        )
        .await
        .unwrap();
    let started = ready
        .status
        .as_ref()
        .and_then(|s| s.start_time.clone())
        .unwrap()
        .0;
    let ready_at = ready_condition(&ready)
        .and_then(|c| c.last_transition_time.clone())
        .unwrap()
        .0;
    let delay = ready_at.as_second() - started.as_second();
    assert!(
        delay >= i64::from(INITIAL_DELAY),
        "Ready {delay}s after start, expected at least initialDelaySeconds = {INITIAL_DELAY}"
    );
    // Ready as a kubelet reports it: no leftover ContainersNotReady reason (with it, the rule's selector
    // kept matching, and each re-evaluation by kwok rewrote lastTransitionTime, restarting minReadySeconds
    // for the pod's owner), containers still running.
    let ready_condition_now = ready_condition(&ready).unwrap();
    assert_eq!(ready_condition_now.reason, None, "{ready_condition_now:?}");
    let statuses = ready
        .status
        .clone()
        .and_then(|s| s.container_statuses)
        .unwrap();
    assert!(statuses.iter().all(|c| c.ready), "{statuses:?}");
    assert!(
        statuses
            .iter()
            .all(|c| c.state.as_ref().is_some_and(|s| s.running.is_some())),
        "{statuses:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_marked_not_ready_after_a_node_outage_turn_ready_again() {
    let ns = TestNamespace::create(plane(), "kwok-ready-again").await;
    let pods = ns.api::<Pod>();
    pods.create(&PostParams::default(), &pod("survivor", &[], &[]))
        .await
        .unwrap();
    pods.create(
        &PostParams::default(),
        &pod("still-unready", &[(BEHAVIOUR, "never-ready")], &[]),
    )
    .await
    .unwrap();
    let mut running = ns
        .wait_for(&pods, "survivor", "a Ready pod", TIMEOUT, |p| {
            p.and_then(|p| condition(p, "Ready")).as_deref() == Some("True")
        })
        .await
        .unwrap();
    // What the node-lifecycle controller writes when a node stops reporting (MarkPodsNotReady): the Ready
    // condition False, no reason, through the status subresource; containers still ready.
    let conditions = running
        .status
        .as_mut()
        .and_then(|s| s.conditions.as_mut())
        .unwrap();
    for c in conditions.iter_mut().filter(|c| c.type_ == "Ready") {
        c.status = "False".into();
        c.reason = None;
        c.message = None;
    }
    let marked = pods
        .replace_status("survivor", &PostParams::default(), &running)
        .await
        .unwrap();
    assert_eq!(condition(&marked, "Ready").as_deref(), Some("False"));
    // The node is Ready (kwok heartbeats it), so its kubelet reports the pod Ready again.
    ns.wait_for(&pods, "survivor", "Ready again", TIMEOUT, |p| {
        p.and_then(|p| condition(p, "Ready")).as_deref() == Some("True")
    })
    .await;
    // A pod whose containers are not ready is not made Ready by that rule.
    let unready = pods.get("still-unready").await.unwrap();
    assert_eq!(condition(&unready, "Ready").as_deref(), Some("False"));
}
