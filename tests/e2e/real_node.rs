//! The real node of the local plane, and the in-cluster install proven on it as real pods:
//! - `LocalPlane` with a real node: Ready, tainted and labelled, beside the simulated nodes; a second real
//!   node on the same host is refused, a second plane without one starts and keeps working;
//! - `kubectl apply -k deploy/in-cluster/overlays/local-plane` (the real manifests plus a toleration and a
//!   node selector), with the image of deploy/image/build.sh imported into the node's containerd: both
//!   replicas Running and Ready through their real probes, exactly one lease holder, a copy Deployment and
//!   DaemonSet reconciled (their pods on the simulated nodes), `kubectl logs` in JSON without colour codes,
//!   the secure port through its Service from pods on the real node (no token: 403 as
//!   `system:anonymous`; a service account without a role: 403; with `mini-kcm-metrics-reader`: 200 on
//!   `/metrics` and 403 on `/debug/controllers`; `/healthz` open), the leader pod deleted and the lease handed
//!   over in time with no duplicate pod and no write of the old leader afterwards, and a rolling update
//!   of mini-kcm's own Deployment while a copy Deployment keeps being reconciled;
//! - stopping the plane leaves no process, mount, network namespace, link, cgroup or iptables rule.
//!
//! Needs root, containerd, runc, the CNI plug-ins (deploy/real-node/ensure-runtime.sh) and Docker (to
//! build the image). Without them it fails where `MINI_KCM_REQUIRE_REAL_NODE` is set (.ci/run sets it,
//! after installing them) and is skipped, saying why, elsewhere.

// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod, Service};
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use mini_kcm_e2e::in_cluster_kit::{
    DuplicateWatch, IMAGE, IMAGE_ARCHIVE, METRICS_READER, SYSTEM_NAMESPACE, assert_json_logs,
    assert_no_write_after, build_image, copy_deployment, docker, https_get, node_of,
    service_account_with_role, start_own_rollout, wait_complete, wait_own_rollout,
    wait_replicas_and_leader, wait_takeover,
};
use mini_kcm_e2e::{TIMEOUT, kubectl, pod_template, repo_path, runs_here, selector};
use mini_kcm_local_plane::{
    Binaries, LocalPlane, NODE_TOOLS_IMAGE, PlaneError, PlaneOptions, REAL_NODE_CGROUP_ROOT,
    REAL_NODE_NAME, REAL_NODE_TAINT, RealNodeOptions, UpstreamWorkloadControllers, VersionSet,
};
use mini_kcm_runtime::api::kinds::{ApiFamily, DeploymentObject, WorkloadKind};
use mini_kcm_testkit::{PlaneInfo, TestNamespace};
use serde_json::json;

/// The same image under another tag, for the rolling update of mini-kcm's own Deployment.
const ROLLED_IMAGE: &str = "mini-kcm:rolled";
const ROLLED_ARCHIVE: &str = "target/image/mini-kcm-rolled.tar";
/// The defaults of `--leader-elect-lease-duration` (15 s) and `--leader-elect-retry-period` (2 s), plus
/// the allowance for API calls that tests/e2e/in_cluster.rs measured on this machine (2 s).
const TAKEOVER_BOUND: Duration = Duration::from_secs(15 + 2 + 2);
/// Pods on the real node start real processes; image unpacking and probes take longer than on kwok.
const POD_TIMEOUT: Duration = Duration::from_secs(120);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_cluster_install_runs_as_real_pods_and_the_node_leaves_nothing_behind() {
    let missing = runtime_available()
        .err()
        .map(|reason| format!("the real node cannot run here: {reason}"));
    if !runs_here("MINI_KCM_REQUIRE_REAL_NODE", missing) {
        return;
    }
    for line in build_image() {
        println!("{line}");
    }
    docker(&["tag", IMAGE, ROLLED_IMAGE]).unwrap();
    let rolled_archive = repo_path(ROLLED_ARCHIVE);
    docker(&[
        "save",
        "--output",
        &rolled_archive.to_string_lossy(),
        ROLLED_IMAGE,
    ])
    .unwrap();

    let before = HostState::capture();
    let binaries = Binaries::ensure(&VersionSet::selected().unwrap())
        .await
        .unwrap();
    let mut options = PlaneOptions::new(binaries.clone());
    options.nodes = 2;
    // kube-controller-manager reconciles apps/v1 (mini-kcm's own Deployment), as in a real cluster;
    // mini-kcm's pods reconcile the copies.
    options.upstream_workload_controllers = UpstreamWorkloadControllers::Enabled;
    options.real_node = Some(RealNodeOptions {
        images: vec![repo_path(IMAGE_ARCHIVE), rolled_archive.clone()],
    });
    let started = Instant::now();
    let plane = LocalPlane::start(options).await.unwrap();
    let info: &'static PlaneInfo = Box::leak(Box::new(plane.info().clone()));
    let node = info.real_node.clone().unwrap();
    println!(
        "plane with a real node ready in {:.1}s; the real node took {:.1}s (imports: {:?})",
        started.elapsed().as_secs_f64(),
        node.startup_seconds,
        node.imports
    );
    println!("memory of the real node: {}", real_node_rss(&node.pids));

    // A second real node on this host is refused; a second plane without one runs beside.
    let mut second_options = PlaneOptions::new(binaries.clone());
    second_options.nodes = 1;
    second_options.real_node = Some(RealNodeOptions::default());
    let refused = LocalPlane::start(second_options).await.unwrap_err();
    assert!(
        matches!(refused, PlaneError::RealNodeInUse { .. }),
        "{refused}"
    );
    let mut beside_options = PlaneOptions::new(binaries);
    beside_options.nodes = 1;
    let mut beside = LocalPlane::start(beside_options).await.unwrap();

    let ns = TestNamespace::create(info, "real-node").await;
    let nodes: Api<Node> = Api::all(ns.client.clone());
    let real = nodes.get(REAL_NODE_NAME).await.unwrap();
    let (taint_key, taint_value) = REAL_NODE_TAINT;
    assert!(
        real.spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .is_some_and(|ts| ts.iter().any(|t| t.key == taint_key
                && t.value.as_deref() == Some(taint_value)
                && t.effect == "NoSchedule")),
        "the real node is not tainted: {:?}",
        real.spec
    );
    assert_eq!(
        real.labels().get(taint_key).map(String::as_str),
        Some(taint_value)
    );
    let runtime = real
        .status
        .as_ref()
        .and_then(|s| s.node_info.as_ref())
        .map(|n| n.container_runtime_version.clone())
        .unwrap_or_default();
    assert!(runtime.starts_with("containerd://"), "runtime {runtime}");

    // The install, as a user runs it.
    let overlay = repo_path("deploy/in-cluster/overlays/local-plane");
    kubectl(info, &["apply", "-k", &overlay.to_string_lossy()], None);
    let pods: Api<Pod> = Api::namespaced(ns.client.clone(), SYSTEM_NAMESPACE);
    // Exactly one leader: the lease names one replica, and only that one reports itself master.
    let (replicas, first_holder, leader) = wait_replicas_and_leader(
        &ns,
        "both mini-kcm replicas Running and Ready on the real node",
        POD_TIMEOUT,
        |p| node_of(p) == REAL_NODE_NAME,
    )
    .await;
    // /metrics is read as a scraper bound to the manifests' metrics-reader role.
    let scraper = service_account_with_role(&ns, "scraper", Some(METRICS_READER)).await;
    service_account_with_role(&ns, "nobody", None).await;
    let mut statuses = Vec::new();
    for pod in &replicas {
        statuses.push((pod.name_any(), master_status(pod, &scraper).await));
    }
    println!("lease holder {first_holder}; leader_election_master_status {statuses:?}");
    for (name, status) in &statuses {
        let expected = if *name == leader.name_any() { 1.0 } else { 0.0 };
        assert_eq!(*status, expected, "{name}: master status {status}");
    }

    // `kubectl logs`: one JSON object per line, no colour codes.
    assert_json_logs(info, &leader.name_any());

    // The secure port through the Service, from inside the cluster: pods on the real node, each with its
    // own service account's token (or none), ask for a path; the API server's RBAC decides.
    let services: Api<Service> = Api::namespaced(ns.client.clone(), SYSTEM_NAMESPACE);
    let cluster_ip = services
        .get("mini-kcm-metrics")
        .await
        .unwrap()
        .spec
        .and_then(|s| s.cluster_ip)
        .unwrap();
    let service = format!("{cluster_ip}:10257");
    const TOKEN: &str = "/var/run/secrets/kubernetes.io/serviceaccount/token";
    for (pod, account, path, with_token, expected, says) in [
        ("healthz-open", None, "/healthz", false, 200, "ok"),
        (
            "metrics-anonymous",
            None,
            "/metrics",
            false,
            403,
            "system:anonymous",
        ),
        (
            "metrics-no-role",
            Some("nobody"),
            "/metrics",
            true,
            403,
            ":nobody\" cannot get path",
        ),
        (
            "metrics-reader",
            Some("scraper"),
            "/metrics",
            true,
            200,
            "leader_election_master_status",
        ),
        (
            "debug-reader",
            Some("scraper"),
            "/debug/controllers",
            true,
            403,
            "cannot get path",
        ),
    ] {
        let mut command = vec!["/https-get", &service, path];
        if with_token {
            command.push(TOKEN);
        }
        let answer = run_on_real_node(&ns, pod, account, &command).await;
        // The pod's log holds https-get's stdout ("HTTP <status>", then the body) and its stderr line.
        let status = answer
            .lines()
            .find(|l| l.starts_with("HTTP "))
            .unwrap_or_default();
        println!("{pod}: {path} -> {status}");
        assert!(
            status == format!("HTTP {expected}") && answer.contains(says),
            "{pod}: {path} answered, expected {expected} saying {says:?}:\n{answer}"
        );
    }

    // The copies are reconciled by the pods: a Deployment and a DaemonSet, their pods on kwok nodes.
    let deployments: Api<DeploymentObject> = Api::namespaced_with(
        ns.client.clone(),
        &ns.name,
        &WorkloadKind::Deployment.api_resource(ApiFamily::Copies),
    );
    deployments
        .create(&PostParams::default(), &copy_deployment("web", 3))
        .await
        .unwrap();
    wait_complete(&ns, &deployments, "web", 3, "1").await;
    // In a namespace of its own: the duplicate watch below counts the pods of every controller in `ns`.
    let ds_ns = TestNamespace::create(info, "real-node-ds").await;
    let daemon_sets: Api<DynamicObject> = Api::namespaced_with(
        ds_ns.client.clone(),
        &ds_ns.name,
        &WorkloadKind::DaemonSet.api_resource(ApiFamily::Copies),
    );
    let daemon_set = DynamicObject::new(
        "agent",
        &WorkloadKind::DaemonSet.api_resource(ApiFamily::Copies),
    )
    .data(json!({
        "spec": {"selector": selector("agent"), "template": pod_template("agent")}
    }));
    daemon_sets
        .create(&PostParams::default(), &daemon_set)
        .await
        .unwrap();
    ds_ns
        .wait_for_with(
            &daemon_sets,
            WorkloadKind::DaemonSet.api_resource(ApiFamily::Copies),
            "agent",
            "the DaemonSet copy ready on both simulated nodes (not on the tainted real node)",
            TIMEOUT,
            |d| {
                d.is_some_and(|d| {
                    let status = &d.data["status"];
                    status["desiredNumberScheduled"] == 2 && status["numberReady"] == 2
                })
            },
        )
        .await;
    let mut test_pods = ns
        .api::<Pod>()
        .list(&Default::default())
        .await
        .unwrap()
        .items;
    test_pods.extend(
        ds_ns
            .api::<Pod>()
            .list(&Default::default())
            .await
            .unwrap()
            .items,
    );
    for pod in test_pods {
        assert!(
            node_of(&pod).starts_with("kwok-node-"),
            "{} runs on {}",
            pod.name_any(),
            node_of(&pod)
        );
    }

    // The leader pod is deleted: the other replica takes over in time, and nothing is done twice.
    let duplicates = DuplicateWatch::start(&ns).await;
    let deleted = Instant::now();
    let deleted_at = Timestamp::now();
    pods.delete(&leader.name_any(), &DeleteParams::default())
        .await
        .unwrap();
    let acquired = wait_takeover(&ns, &first_holder, deleted, deleted_at, TAKEOVER_BOUND).await;
    deployments
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"template": {"spec": {"containers": [
                {"name": "main", "image": "registry.k8s.io/pause:after-handover"}
            ]}}}})),
        )
        .await
        .unwrap();
    wait_complete(&ns, &deployments, "web", 3, "2").await;
    duplicates.assert_none();
    assert_no_write_after(&info.audit_log(), &leader.name_any(), acquired);

    // A rolling update of mini-kcm itself (another image tag), while a copy keeps being reconciled.
    start_own_rollout(&ns, ROLLED_IMAGE).await;
    deployments
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 5}})),
        )
        .await
        .unwrap();
    wait_complete(&ns, &deployments, "web", 5, "2").await;
    wait_own_rollout(&ns, ROLLED_IMAGE, POD_TIMEOUT, TAKEOVER_BOUND).await;
    // The new leader reconciles: another rollout of the copy completes.
    deployments
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"template": {"spec": {"containers": [
                {"name": "main", "image": "registry.k8s.io/pause:after-rollout"}
            ]}}}})),
        )
        .await
        .unwrap();
    wait_complete(&ns, &deployments, "web", 5, "3").await;

    // Teardown: nothing of the real node is left; the plane beside still works.
    let leftovers = plane.stop().await;
    assert!(leftovers.is_empty(), "teardown problems: {leftovers:?}");
    let after = HostState::capture();
    before.assert_same_as(&after);
    beside.check_running().unwrap();
    let beside_client = beside.client().await.unwrap();
    let beside_nodes: Api<Node> = Api::all(beside_client);
    assert_eq!(
        beside_nodes
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .len(),
        1
    );
    beside.stop().await;
    let _ = std::fs::remove_file(&rolled_archive);
}

/// Why the real node cannot run here, if it cannot.
fn runtime_available() -> Result<(), String> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let root = status
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .is_some_and(|l| l.split_whitespace().nth(2) == Some("0"));
    if !root {
        return Err("not running as root".into());
    }
    for tool in ["containerd", "ctr", "runc", "iptables", "cc"] {
        let found = std::process::Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .is_ok_and(|o| o.status.success());
        if !found {
            return Err(format!(
                "{tool} is missing (deploy/real-node/ensure-runtime.sh installs it)"
            ));
        }
    }
    if !Path::new("/usr/lib/cni/bridge").exists() {
        return Err("the CNI plug-ins are missing (deploy/real-node/ensure-runtime.sh)".into());
    }
    docker(&["info", "--format", "{{.ServerVersion}}"])
        .map(|_| ())
        .map_err(|e| format!("no Docker daemon to build the image (docker info: {e})"))
}

/// `leader_election_master_status` of a replica, read from its pod address (the host reaches the pod
/// network through the bridge).
async fn master_status(pod: &Pod, token: &str) -> f64 {
    let ip = pod.status.as_ref().and_then(|s| s.pod_ip.clone()).unwrap();
    let addr: SocketAddr = format!("{ip}:10257").parse().unwrap();
    let (status, body) = https_get(addr, "/metrics", Some(token))
        .await
        .unwrap_or_else(|| panic!("{}: /metrics does not answer on {addr}", pod.name_any()));
    assert_eq!(status, 200, "{body}");
    let samples: Vec<f64> = body
        .lines()
        .filter(|l| l.starts_with("leader_election_master_status"))
        .filter_map(|l| l.rsplit(' ').next()?.parse().ok())
        .collect();
    assert_eq!(samples.len(), 1, "{}: samples {samples:?}", pod.name_any());
    samples[0]
}

/// Runs `command` in the node-tools image as a pod on the real node until it ends (as `service_account`
/// when given, its token mounted); returns its log.
async fn run_on_real_node(
    ns: &TestNamespace,
    name: &str,
    service_account: Option<&str>,
    command: &[&str],
) -> String {
    let (key, value) = REAL_NODE_TAINT;
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "serviceAccountName": service_account.unwrap_or("default"),
            "nodeSelector": {key: value},
            "tolerations": [{"key": key, "operator": "Equal", "value": value, "effect": "NoSchedule"}],
            "containers": [{
                "name": "main",
                "image": NODE_TOOLS_IMAGE,
                "imagePullPolicy": "Never",
                "command": command,
            }],
        },
    }))
    .unwrap();
    let pods: Api<Pod> = ns.api();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let done = ns
        .wait_for(&pods, name, "the pod to finish", POD_TIMEOUT, |p| {
            p.and_then(|p| p.status.as_ref())
                .and_then(|s| s.phase.as_deref())
                .is_some_and(|phase| phase == "Succeeded" || phase == "Failed")
        })
        .await
        .unwrap();
    let (log, _) = kubectl(ns.plane, &["logs", "--namespace", &ns.name, name], None);
    let phase = done.status.and_then(|s| s.phase).unwrap_or_default();
    assert_eq!(phase, "Succeeded", "{name} failed; its log:\n{log}");
    pods.delete(name, &DeleteParams::default()).await.unwrap();
    log
}

/// Resident memory of the real node's components (containerd, kubelet, kube-proxy), from /proc.
fn real_node_rss(pids: &std::collections::BTreeMap<String, u32>) -> String {
    let mut total = 0u64;
    let mut parts = Vec::new();
    for (name, pid) in pids {
        let kib = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("VmRSS:"))
                    .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            })
            .unwrap_or(0);
        total += kib;
        parts.push(format!("{name} {} MiB", kib / 1024));
    }
    format!("{} MiB RSS ({})", total / 1024, parts.join(", "))
}

/// What a real node may leave on the host, captured before it starts and after it stops.
#[derive(Debug, PartialEq, Eq)]
struct HostState {
    /// Processes of the real node: kubelet, kube-proxy, the sandboxes, anything naming a real-node path.
    processes: BTreeSet<String>,
    /// Mount points below any plane's real-node folder.
    mounts: BTreeSet<String>,
    /// Network namespaces by handle (`ip netns`) and network links.
    netns: BTreeSet<String>,
    links: BTreeSet<String>,
    /// The pods' cgroups.
    cgroups: BTreeSet<PathBuf>,
    /// iptables and ip6tables rules and user chains.
    iptables: BTreeSet<String>,
}

impl HostState {
    fn capture() -> Self {
        let processes = std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(Result::ok)
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .filter(|pid| *pid != std::process::id())
            .filter_map(|pid| {
                let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
                let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
                let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
                let comm = comm.trim();
                let ours = cmdline.contains("/real-node/")
                    || ["kubelet", "kube-proxy", "pause", "http-get"].contains(&comm);
                ours.then(|| format!("{pid} {cmdline}"))
            })
            .collect();
        let mounts = std::fs::read_to_string("/proc/self/mountinfo")
            .unwrap()
            .lines()
            .filter_map(|l| l.split(' ').nth(4))
            .filter(|m| m.contains("/real-node/"))
            .map(str::to_string)
            .collect();
        let lines = |program: &str, args: &[&str]| -> BTreeSet<String> {
            std::process::Command::new(program)
                .args(args)
                .output()
                .map(|o| {
                    String::from_utf8_lossy(&o.stdout)
                        .lines()
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default()
        };
        let links = lines("ip", &["-o", "link", "show"])
            .into_iter()
            .filter_map(|l| l.split(':').nth(1).map(|n| n.trim().to_string()))
            .collect();
        let netns = lines("ip", &["netns", "list"]);
        let cgroups = std::fs::read_dir("/sys/fs/cgroup")
            .unwrap()
            .filter_map(Result::ok)
            .map(|e| e.path().join(REAL_NODE_CGROUP_ROOT.trim_start_matches('/')))
            .chain(std::iter::once(
                Path::new("/sys/fs/cgroup").join(REAL_NODE_CGROUP_ROOT.trim_start_matches('/')),
            ))
            .filter(|p| p.exists())
            .collect();
        let iptables = ["iptables-save", "ip6tables-save"]
            .iter()
            .flat_map(|save| {
                lines(save, &[])
                    .into_iter()
                    .filter(|l| {
                        l.starts_with("-A ") || l.starts_with(":KUBE") || l.starts_with(":CNI")
                    })
                    .map(move |l| format!("{save}: {l}"))
            })
            .collect();
        HostState {
            processes,
            mounts,
            netns,
            links,
            cgroups,
            iptables,
        }
    }

    fn assert_same_as(&self, after: &HostState) {
        assert_eq!(self.processes, after.processes, "processes left behind");
        assert_eq!(self.mounts, after.mounts, "mounts left behind");
        assert_eq!(self.netns, after.netns, "network namespaces left behind");
        assert_eq!(self.links, after.links, "network links left behind");
        assert_eq!(self.cgroups, after.cgroups, "cgroups left behind");
        assert_eq!(self.iptables, after.iptables, "iptables rules left behind");
    }
}
