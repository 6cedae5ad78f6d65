//! The kind half of the demo, on a real kind cluster (the real `kind` CLI, kubeadm, systemd, containerd and
//! kubelets in Docker containers), with the node image built on this machine
//! (deploy/kind/node-image/build.sh) and no registry:
//! - `DEMO_ENV=kind bash deploy/demo/tour.sh`, every step, as a user runs it: it builds what is missing,
//!   creates the cluster from deploy/kind/cluster.yaml (plus an audit log, for the checks below), loads
//!   mini-kcm's image, installs deploy/in-cluster and hands apps/v1 over from kube-controller-manager;
//! - then the in-cluster proofs of tests/e2e/real_node.rs, on kind, with mini-kcm now managing apps/v1
//!   (its own Deployment included): both replicas Ready through their real probes, one lease holder (and
//!   only it reports itself master, read on its secure port with a metrics reader's token through
//!   `kubectl port-forward`; `/healthz` through the API server's pod proxy), `kubectl logs` in JSON
//!   without colour, the leader pod deleted and the lease taken over in time with no duplicate pod and no
//!   write of the old leader afterwards (the API server's audit log), and a rolling update of mini-kcm's
//!   own Deployment while another Deployment is scaled;
//! - teardown: the cluster deleted, no container, network or volume left behind.
//!
//! It runs wherever the test runs as root (it installs what the host lacks: deploy/kind/ensure-host.sh);
//! elsewhere it skips, saying why, unless MINI_KCM_REQUIRE_KIND is set (.ci/run sets it), and
//! MINI_KCM_KIND=0 skips it on purpose. docs/kind.md has its times, cold and cached.

// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::DeploymentSpec;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use mini_kcm_e2e::in_cluster_kit::{
    DuplicateWatch, IMAGE, METRICS_READER, SYSTEM_NAMESPACE, assert_json_logs,
    assert_no_write_after, build_image, docker, https_get, service_account_with_role,
    start_own_rollout, wait_complete_in, wait_own_rollout, wait_replicas_and_leader, wait_takeover,
};
use mini_kcm_e2e::{repo_path, runs_here, selector};
use mini_kcm_local_plane::{Binaries, VersionSet};
use mini_kcm_runtime::api::kinds::{ApiFamily, DeploymentObject, WorkloadKind};
use mini_kcm_testkit::{PlaneInfo, TestNamespace};
use serde_json::{Value, json};

const CLUSTER: &str = "mini-kcm-e2e";
/// The same image under another tag, for the rolling update of mini-kcm's own Deployment.
const ROLLED_IMAGE: &str = "mini-kcm:rolled";
/// `--leader-elect-lease-duration` (15 s) + `--leader-elect-retry-period` (2 s) + API calls (2 s).
const TAKEOVER_BOUND: Duration = Duration::from_secs(15 + 2 + 2);
/// Real containers on 2 cores shared by four nodes: pods start in seconds, not milliseconds.
const POD_TIMEOUT: Duration = Duration::from_secs(180);
/// Building the node image and mini-kcm's, creating the cluster, then the tour's 13 steps.
const TOUR_TIMEOUT: Duration = Duration::from_secs(60 * 60);
/// Where the control-plane node keeps the audit policy and log (mounted into kube-apiserver's pod).
const AUDIT_DIR: &str = "/var/log/kubernetes";

#[test]
fn the_cluster_configuration_is_what_the_tour_expects() {
    let config = cluster_config();
    assert_eq!(config["kind"], "Cluster");
    assert_eq!(config["apiVersion"], "kind.x-k8s.io/v1alpha4");
    let roles: Vec<&str> = config["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["role"].as_str().unwrap())
        .collect();
    // env/kind.sh takes "<cluster>-worker3" out and back in: three workers, one control plane.
    assert_eq!(roles, ["control-plane", "worker", "worker", "worker"]);
    let env = std::fs::read_to_string(repo_path("deploy/demo/env/kind.sh")).unwrap();
    assert!(env.contains("SPARE_NODE=$KIND_CLUSTER-worker3"), "{env}");
    // Kubernetes 1.36+ kubelets refuse cgroup v1 unless told; the patch must reach every node.
    let patches: Vec<Value> = config["kubeadmConfigPatches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| serde_norway::from_str(p.as_str().unwrap()).unwrap())
        .collect();
    assert!(
        patches
            .iter()
            .any(|p| p["kind"] == "KubeletConfiguration" && p["failCgroupV1"] == false),
        "no KubeletConfiguration patch with failCgroupV1: false in {patches:?}"
    );
    assert!(
        config["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|n| n.get("kubeadmConfigPatches").is_none()),
        "a node-level patch would replace the cluster-wide one for that node"
    );
}

#[test]
fn every_script_of_the_kind_cluster_parses() {
    let scripts = [
        "deploy/kind/ensure-host.sh",
        "deploy/kind/node-image/build.sh",
        "deploy/kind/node-image/pod-network",
        "deploy/kind/runc-without-sys-resource",
        "deploy/image/ensure-docker.sh",
    ];
    for script in scripts {
        let output = Command::new("bash")
            .arg("-n")
            .arg(repo_path(script))
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{script} does not parse: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

/// The runc wrapper, run as containerd and Docker run it, in front of a stand-in runc that records what
/// it was given: it removes CAP_SYS_RESOURCE (and nothing else) from what runc starts where the host's
/// bounding set lacks it, and changes nothing where the host has it.
#[test]
fn the_runc_wrapper_drops_only_cap_sys_resource_and_only_where_the_host_lacks_it() {
    let dir = std::env::temp_dir().join(format!("mini-kcm-runc-wrapper-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let bundle = dir.join("bundle");
    std::fs::create_dir_all(&bundle).unwrap();
    let caps = json!(["CAP_NET_ADMIN", "CAP_SYS_RESOURCE", "CAP_SYS_ADMIN"]);
    let all = json!({"bounding": caps, "effective": caps, "permitted": caps, "inheritable": caps, "ambient": caps});
    std::fs::write(
        bundle.join("config.json"),
        json!({"ociVersion": "1.0.2", "process": {"args": ["/pause"], "capabilities": all}})
            .to_string(),
    )
    .unwrap();
    let process = dir.join("process.json");
    std::fs::write(
        &process,
        json!({"args": ["sh"], "capabilities": all}).to_string(),
    )
    .unwrap();
    let fake = dir.join("runc");
    std::fs::write(
        &fake,
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$@\" > {0}/args\ncp {0}/bundle/config.json {0}/seen-config.json\ncp {0}/process.json {0}/seen-process.json\n",
            dir.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();

    let host_lacks_it = !host_bounding_set_has(24);
    let expected: Vec<&str> = if host_lacks_it {
        vec!["CAP_NET_ADMIN", "CAP_SYS_ADMIN"]
    } else {
        vec!["CAP_NET_ADMIN", "CAP_SYS_RESOURCE", "CAP_SYS_ADMIN"]
    };
    let wrapper = repo_path("deploy/kind/runc-without-sys-resource");
    let run = |args: &[&str]| {
        let output = Command::new(&wrapper)
            .args(args)
            .env("RUNC", &fake)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "the wrapper failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let passed = std::fs::read_to_string(dir.join("args")).unwrap();
        assert_eq!(
            passed.lines().collect::<Vec<_>>(),
            args,
            "runc must get the same arguments"
        );
    };
    let capabilities = |file: &str, pointer: &str| -> Vec<Vec<String>> {
        let value: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join(file)).unwrap()).unwrap();
        [
            "bounding",
            "effective",
            "permitted",
            "inheritable",
            "ambient",
        ]
        .iter()
        .map(|set| {
            value
                .pointer(&format!("{pointer}/capabilities/{set}"))
                .unwrap()
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c.as_str().unwrap().to_string())
                .collect()
        })
        .collect()
    };

    let bundle_arg = bundle.to_string_lossy().into_owned();
    run(&[
        "--root",
        "/run/runc",
        "--log-format",
        "json",
        "create",
        "--bundle",
        &bundle_arg,
        "c1",
    ]);
    for set in capabilities("seen-config.json", "/process") {
        assert_eq!(
            set, expected,
            "create: host lacks CAP_SYS_RESOURCE: {host_lacks_it}"
        );
    }
    let process_arg = process.to_string_lossy().into_owned();
    run(&["exec", "--process", &process_arg, "--detach", "c1"]);
    for set in capabilities("seen-process.json", "") {
        assert_eq!(
            set, expected,
            "exec: host lacks CAP_SYS_RESOURCE: {host_lacks_it}"
        );
    }
    // Other commands pass through untouched.
    run(&["state", "c1"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The tour and the in-cluster proofs on a real kind cluster; see the module header.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tour_and_the_in_cluster_proofs_run_on_a_real_kind_cluster() {
    if std::env::var_os("MINI_KCM_KIND").is_some_and(|v| v == "0") {
        println!("SKIPPED: MINI_KCM_KIND=0 (the kind cluster takes 10-30 minutes; docs/kind.md)");
        return;
    }
    // SAFETY: geteuid has no preconditions.
    let missing = (unsafe { libc::geteuid() } != 0).then(|| {
        "the kind cluster needs root (Docker, debootstrap, chroot; docs/kind.md)".to_string()
    });
    if !runs_here("MINI_KCM_REQUIRE_KIND", missing) {
        return;
    }
    let started = Instant::now();
    let work = std::env::temp_dir().join(format!("mini-kcm-kind-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(work.join("audit")).unwrap();
    let kind = host_ready();
    let cluster = ClusterGuard {
        kind: kind.clone(),
        keep: std::env::var_os("MINI_KCM_KIND_KEEP").is_some(),
    };
    // Left over from an interrupted run: start clean.
    cluster.delete();
    let before = DockerState::capture();

    for line in build_image() {
        println!("{line}");
    }
    docker(&["tag", IMAGE, ROLLED_IMAGE]).unwrap();

    // The tour, as a user runs it, on deploy/kind/cluster.yaml plus an audit log.
    let config = work.join("cluster.yaml");
    std::fs::write(&config, audited_cluster_config(&work.join("audit"))).unwrap();
    let tour = run_tour(&work, &kind, &config);
    println!(
        "the tour completed in {:.0}s (with every build it needed)",
        tour.as_secs_f64()
    );

    // The in-cluster proofs, on the cluster the tour leaves: mini-kcm manages apps/v1 now.
    let kubeconfig = work.join("kubeconfig");
    let (config_text, _) = run(&kind, &["get", "kubeconfig", "--name", CLUSTER]);
    std::fs::write(&kubeconfig, config_text).unwrap();
    let binaries = Binaries::ensure(&VersionSet::selected().unwrap())
        .await
        .unwrap();
    let info: &'static PlaneInfo = Box::leak(Box::new(PlaneInfo {
        state_dir: work.clone(),
        kubeconfig: kubeconfig.clone(),
        log_dir: work.join("logs"),
        bin_dir: binaries.dir().to_path_buf(),
        server: String::new(),
        pids: Default::default(),
        ports: Default::default(),
        nodes: Vec::new(),
        kubernetes_version: VersionSet::selected().unwrap().kubernetes,
        startup_seconds: 0.0,
        real_node: None,
    }));
    in_cluster_proofs(info, &kind).await;

    // Teardown: nothing of the cluster is left.
    drop(cluster);
    let after = DockerState::capture();
    before.assert_same_as(&after);
    println!("kind test done in {:.0}s", started.elapsed().as_secs_f64());
    let _ = std::fs::remove_dir_all(&work);
}

async fn in_cluster_proofs(info: &'static PlaneInfo, kind: &Path) {
    let ns = TestNamespace::create(info, "kind").await;
    every_pod_address_is_in_its_nodes_pod_cidr(&ns.client).await;
    let pods: Api<Pod> = Api::namespaced(ns.client.clone(), SYSTEM_NAMESPACE);
    // One leader: the lease names one replica, and only that one reports itself master.
    let (replicas, first_holder, leader) = wait_replicas_and_leader(
        &ns,
        "both mini-kcm replicas Running and Ready",
        POD_TIMEOUT,
        |_| true,
    )
    .await;
    let scraper = service_account_with_role(&ns, "scraper", Some(METRICS_READER)).await;
    for pod in &replicas {
        healthz_through_the_pod_proxy(&ns.client, &pod.name_any()).await;
        let status = master_status(info, &pod.name_any(), &scraper).await;
        let expected = if pod.name_any() == leader.name_any() {
            1.0
        } else {
            0.0
        };
        println!("{}: leader_election_master_status {status}", pod.name_any());
        assert_eq!(status, expected, "{}", pod.name_any());
    }

    // `kubectl logs`: one JSON object per line, no colour codes.
    assert_json_logs(info, &leader.name_any());

    // An apps/v1 Deployment, reconciled by mini-kcm (kube-controller-manager's controllers are off).
    let image = node_image();
    let deployments: Api<DeploymentObject> = Api::namespaced_with(
        ns.client.clone(),
        &ns.name,
        &WorkloadKind::Deployment.api_resource(ApiFamily::Apps),
    );
    deployments
        .create(&PostParams::default(), &web_deployment(&image))
        .await
        .unwrap();
    wait_complete_in(ApiFamily::Apps, &ns, &deployments, "web", 3, "1").await;

    // The leader pod is deleted: the other replica takes over in time, and nothing is done twice.
    let duplicates = DuplicateWatch::start_in(ApiFamily::Apps, &ns).await;
    let deleted = Instant::now();
    let deleted_at = Timestamp::now();
    pods.delete(&leader.name_any(), &DeleteParams::default())
        .await
        .unwrap();
    let acquired = wait_takeover(&ns, &first_holder, deleted, deleted_at, TAKEOVER_BOUND).await;
    set_version(&deployments, "v2").await;
    wait_complete_in(ApiFamily::Apps, &ns, &deployments, "web", 3, "2").await;
    duplicates.assert_none();
    let audit_log = info.state_dir.join("audit.log");
    let (audit, _) = run(
        "docker".as_ref(),
        &[
            "exec",
            &format!("{CLUSTER}-control-plane"),
            "cat",
            &format!("{AUDIT_DIR}/audit.log"),
        ],
    );
    std::fs::write(&audit_log, audit).unwrap();
    assert_no_write_after(&audit_log, &leader.name_any(), acquired);

    // A rolling update of mini-kcm itself (another image tag), while a Deployment keeps being reconciled.
    // mini-kcm manages apps/v1 here, so it rolls out its own Deployment, handing the lease over on the way.
    run(
        kind,
        &["load", "docker-image", ROLLED_IMAGE, "--name", CLUSTER],
    );
    start_own_rollout(&ns, ROLLED_IMAGE).await;
    deployments
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 5}})),
        )
        .await
        .unwrap();
    wait_complete_in(ApiFamily::Apps, &ns, &deployments, "web", 5, "2").await;
    wait_own_rollout(&ns, ROLLED_IMAGE, POD_TIMEOUT, TAKEOVER_BOUND).await;
    // The new leader reconciles: another rollout completes.
    set_version(&deployments, "v3").await;
    wait_complete_in(ApiFamily::Apps, &ns, &deployments, "web", 5, "3").await;

    // Every pod of the test ran on a worker (the control plane is tainted), as real containers.
    let nodes: Api<Node> = Api::all(ns.client.clone());
    let workers: Vec<String> = nodes
        .list(&Default::default())
        .await
        .unwrap()
        .iter()
        .map(ResourceExt::name_any)
        .filter(|n| n.contains("-worker"))
        .collect();
    for pod in ns.api::<Pod>().list(&Default::default()).await.unwrap() {
        let node = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default();
        assert!(workers.contains(&node), "{} runs on {node}", pod.name_any());
    }
}

/// The tour takes a worker out and lets it register again, when it may get another pod CIDR: a pod left
/// with an address outside its node's CIDR would be unreachable from the other nodes (the pod network
/// stops such sandboxes so that the kubelet starts them again in the new range).
async fn every_pod_address_is_in_its_nodes_pod_cidr(client: &kube::Client) {
    let cidrs: std::collections::HashMap<String, String> = Api::<Node>::all(client.clone())
        .list(&Default::default())
        .await
        .unwrap()
        .iter()
        .filter_map(|n| Some((n.name_any(), n.spec.as_ref()?.pod_cidr.clone()?)))
        .collect();
    let pods = Api::<Pod>::all(client.clone())
        .list(&Default::default())
        .await
        .unwrap();
    let mut checked = 0;
    for pod in &pods {
        let spec = pod.spec.as_ref().unwrap();
        let status = pod.status.as_ref();
        let (Some(node), Some(ip)) = (
            spec.node_name.as_ref(),
            status.and_then(|s| s.pod_ip.as_ref()),
        ) else {
            continue;
        };
        if spec.host_network == Some(true)
            || status.and_then(|s| s.phase.as_deref()) != Some("Running")
        {
            continue;
        }
        // A pod of a node that has left (step 10) waits for the pod garbage collector.
        let Some(cidr) = cidrs.get(node) else {
            continue;
        };
        assert!(
            ipv4_in_cidr(ip, cidr),
            "{}/{} on {node} has {ip}, outside the node's pod CIDR {cidr}",
            pod.namespace().unwrap_or_default(),
            pod.name_any()
        );
        checked += 1;
    }
    println!("{checked} running pods, each with an address in its node's pod CIDR ({cidrs:?})");
    assert!(checked > 0, "no running pod with a pod network address");
}

fn ipv4_in_cidr(ip: &str, cidr: &str) -> bool {
    let (net, bits) = cidr.split_once('/').unwrap();
    let bits: u32 = bits.parse().unwrap();
    let ip = u32::from(ip.parse::<std::net::Ipv4Addr>().unwrap());
    let net = u32::from(net.parse::<std::net::Ipv4Addr>().unwrap());
    let mask = u32::MAX.checked_shl(32 - bits).unwrap_or(0);
    ip & mask == net & mask
}

/// deploy/kind/cluster.yaml, parsed.
fn cluster_config() -> Value {
    let text = std::fs::read_to_string(repo_path("deploy/kind/cluster.yaml")).unwrap();
    serde_norway::from_str(&text).unwrap()
}

/// deploy/kind/cluster.yaml plus an audit log of every write (Metadata level) on the control plane, so
/// the test can tell which replica wrote what and when: the policy is mounted from `dir` into the node.
fn audited_cluster_config(dir: &Path) -> String {
    std::fs::write(
        dir.join("policy.yaml"),
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n\
         - level: None\n  verbs: [get, list, watch]\n- level: Metadata\n",
    )
    .unwrap();
    let mut config = cluster_config();
    let control_plane = config["nodes"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|n| n["role"] == "control-plane")
        .unwrap();
    control_plane["extraMounts"] = json!([{
        "hostPath": dir.to_string_lossy(),
        "containerPath": AUDIT_DIR,
    }]);
    let patch = format!(
        "kind: ClusterConfiguration\napiServer:\n  extraArgs:\n  - name: audit-log-path\n    value: {AUDIT_DIR}/audit.log\n  - name: audit-policy-file\n    value: {AUDIT_DIR}/policy.yaml\n  extraVolumes:\n  - name: audit\n    hostPath: {AUDIT_DIR}\n    mountPath: {AUDIT_DIR}\n    pathType: DirectoryOrCreate\n"
    );
    config["kubeadmConfigPatches"]
        .as_array_mut()
        .unwrap()
        .push(Value::String(patch));
    serde_norway::to_string(&config).unwrap()
}

/// deploy/kind/ensure-host.sh: the host's packages, Docker with the runc wrapper, the kind CLI (its path).
fn host_ready() -> PathBuf {
    let (out, _) = run(
        "bash".as_ref(),
        &[&repo_path("deploy/kind/ensure-host.sh").to_string_lossy()],
    );
    PathBuf::from(out.lines().last().unwrap().trim())
}

/// Runs the tour with DEMO_ENV=kind, printing its output as it goes; panics unless it completes.
fn run_tour(work: &Path, kind: &Path, config: &Path) -> Duration {
    let started = Instant::now();
    let mut child = Command::new("bash")
        .arg("-c")
        .arg("exec bash \"$0\" 2>&1")
        .arg(repo_path("deploy/demo/tour.sh"))
        .env("DEMO_ENV", "kind")
        .env("DEMO_PAUSE", "0")
        .env("DEMO_TIMEOUT", "180")
        .env("DEMO_WORK", work.join("tour"))
        .env("KIND", kind)
        .env("KIND_CLUSTER", CLUSTER)
        .env("KIND_CONFIG", config)
        .env_remove("KUBECONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    let pid = child.id();
    let stdout = child.stdout.take().unwrap();
    let watchdog = std::thread::spawn(move || {
        let deadline = Instant::now() + TOUR_TIMEOUT;
        loop {
            std::thread::park_timeout(Duration::from_secs(5));
            // The tour ended (its group is gone), or its time is up: stop the whole group.
            let alive = unsafe { libc::kill(-(pid as i32), 0) } == 0;
            if !alive {
                return false;
            }
            if Instant::now() > deadline {
                unsafe { libc::kill(-(pid as i32), libc::SIGKILL) };
                return true;
            }
        }
    });
    let mut output = String::new();
    for line in BufReader::new(stdout).lines() {
        let Ok(line) = line else { break };
        println!("tour | {line}");
        output.push_str(&line);
        output.push('\n');
    }
    let status = child.wait().unwrap();
    watchdog.thread().unpark();
    let timed_out = watchdog.join().unwrap();
    assert!(
        !timed_out,
        "the tour did not finish within {TOUR_TIMEOUT:?}"
    );
    assert!(status.success(), "the tour failed ({status})");
    assert!(
        output.contains("mini-kcm tour complete (13 steps"),
        "the tour did not report 13 steps complete"
    );
    started.elapsed()
}

/// Runs a program, panicking with its output when it fails; its standard output and error.
fn run(program: &Path, args: &[&str]) -> (String, String) {
    let output = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running {} {args:?}: {e}", program.display()));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success(),
        "{} {args:?} failed:\n{stdout}\n{stderr}",
        program.display()
    );
    (stdout, stderr)
}

/// The image every node has: the sandbox (pause) image of its containerd.
fn node_image() -> String {
    let (out, _) = run(
        "docker".as_ref(),
        &[
            "exec",
            &format!("{CLUSTER}-control-plane"),
            "sed",
            "-n",
            "-E",
            r#"s/^ *sandbox_image *= *"(.*)"/\1/p"#,
            "/etc/containerd/config.toml",
        ],
    );
    out.trim().to_string()
}

fn web_deployment(image: &str) -> DeploymentObject {
    let mut d = DeploymentObject::new(
        "web",
        &WorkloadKind::Deployment.api_resource(ApiFamily::Apps),
        DeploymentSpec {
            replicas: Some(3),
            selector: selector("web"),
            template: serde_json::from_value(json!({
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "terminationGracePeriodSeconds": 1,
                    "containers": [{
                        "name": "main", "image": image, "imagePullPolicy": "IfNotPresent",
                        "env": [{"name": "VERSION", "value": "v1"}]
                    }]
                }
            }))
            .unwrap(),
            ..Default::default()
        },
    );
    d.status = None;
    d
}

async fn set_version(deployments: &Api<DeploymentObject>, version: &str) {
    deployments
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"template": {"spec": {"containers": [
                {"name": "main", "env": [{"name": "VERSION", "value": version}]}
            ]}}}})),
        )
        .await
        .unwrap();
}

/// The replica's `/healthz` on its secure port through the API server's proxy to the pod (which proves
/// the control plane reaches the pod network of every worker). Only the always-allowed paths answer
/// there: the API server does not pass the caller's token on, so the request arrives anonymous.
async fn healthz_through_the_pod_proxy(client: &kube::Client, pod: &str) {
    let request = http::Request::get(format!(
        "/api/v1/namespaces/{SYSTEM_NAMESPACE}/pods/https:{pod}:10257/proxy/healthz"
    ))
    .body(Vec::new())
    .unwrap();
    let body = client
        .request_text(request)
        .await
        .unwrap_or_else(|e| panic!("{pod}: /healthz through the pod proxy: {e}"));
    assert_eq!(body.trim(), "ok", "{pod}: /healthz");
}

/// `leader_election_master_status` of a replica, read on its secure port through `kubectl port-forward`
/// with a metrics reader's token.
async fn master_status(info: &PlaneInfo, pod: &str, token: &str) -> f64 {
    let mut forward = Command::new(info.bin_dir.join("kubectl"))
        .arg("--kubeconfig")
        .arg(&info.kubeconfig)
        .args(["port-forward", "--namespace", SYSTEM_NAMESPACE])
        .arg(format!("pod/{pod}"))
        .arg(":10257")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    // "Forwarding from 127.0.0.1:PORT -> 10257". The pipe stays open until kubectl is killed: it prints
    // a line for each connection, and a Go program writing to a closed stdout dies of SIGPIPE.
    let mut line = String::new();
    let mut stdout = BufReader::new(forward.stdout.take().unwrap());
    stdout.read_line(&mut line).unwrap();
    let port = line
        .split("127.0.0.1:")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|port| port.parse::<u16>().ok())
        .unwrap_or_else(|| panic!("{pod}: kubectl port-forward said {line:?}"));
    let answer = https_get(
        std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        "/metrics",
        Some(token),
    )
    .await;
    let _ = forward.kill();
    let _ = forward.wait();
    drop(stdout);
    let (status, body) = answer.unwrap_or_else(|| panic!("{pod}: /metrics does not answer"));
    assert_eq!(status, 200, "{pod}: /metrics: {body}");
    let samples: Vec<f64> = body
        .lines()
        .filter(|l| l.starts_with("leader_election_master_status"))
        .filter_map(|l| l.rsplit(' ').next()?.parse().ok())
        .collect();
    assert_eq!(samples.len(), 1, "{pod}: samples {samples:?}");
    samples[0]
}

/// Whether this process's capability bounding set holds capability `bit`.
fn host_bounding_set_has(bit: u32) -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let hex = status
        .lines()
        .find_map(|l| l.strip_prefix("CapBnd:"))
        .unwrap()
        .trim();
    (u64::from_str_radix(hex, 16).unwrap() >> bit) & 1 == 1
}

/// Deletes the cluster when dropped (also when the test fails), unless MINI_KCM_KIND_KEEP is set.
struct ClusterGuard {
    kind: PathBuf,
    keep: bool,
}

impl ClusterGuard {
    /// Deletes the cluster, and kind's network when no other cluster uses it (kind keeps it for the
    /// next cluster; this test leaves nothing).
    fn delete(&self) {
        let _ = Command::new(&self.kind)
            .args(["delete", "cluster", "--name", CLUSTER])
            .output();
        let _ = Command::new("docker")
            .args(["network", "rm", "kind"])
            .output();
    }
}

impl Drop for ClusterGuard {
    fn drop(&mut self) {
        if self.keep {
            println!("MINI_KCM_KIND_KEEP: the cluster {CLUSTER} keeps running");
            return;
        }
        self.delete();
    }
}

/// What kind leaves in Docker: containers, networks and volumes.
#[derive(Debug, PartialEq)]
struct DockerState {
    containers: Vec<String>,
    networks: Vec<String>,
    volumes: Vec<String>,
}

impl DockerState {
    fn capture() -> Self {
        let list = |args: &[&str]| -> Vec<String> {
            let mut names: Vec<String> = docker(args)
                .unwrap()
                .lines()
                .map(str::to_string)
                .filter(|l| !l.is_empty())
                .collect();
            names.sort();
            names
        };
        DockerState {
            containers: list(&["ps", "-a", "--format", "{{.Names}}"]),
            networks: list(&["network", "ls", "--format", "{{.Name}}"]),
            volumes: list(&["volume", "ls", "--format", "{{.Name}}"]),
        }
    }

    fn assert_same_as(&self, after: &DockerState) {
        assert_eq!(
            self, after,
            "Docker objects left behind by the kind cluster"
        );
    }
}
