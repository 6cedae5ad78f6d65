//! Leader election with real processes: two `mini-kcm run` replicas (the built binary, leader election
//! on with kube-controller-manager's timing) against a real local control plane.
//!
//! The leader is frozen (SIGSTOP, as a stalled node or a long GC pause would) in the middle of a
//! rollout of a `minikcm.dev` Deployment. The standby must take over after the lease expires and finish
//! the rollout; the API server's audit log must show that the two replicas never wrote at the same time:
//! every write of the old leader was received before the new leader acquired the lease, and none of the
//! new leader's before it. When the old leader is thawed, its fence refuses every write and it exits
//! non-zero. Every observed state is also checked: no ReplicaSet ever owns more live pods than the
//! largest `spec.replicas` it has had (no duplicate creations across the hand-over).

// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::DeploymentSpec;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use mini_kcm_runtime::api::kinds::{
    ApiFamily, DeploymentObject, ReplicaSetObject, WorkloadKind, controller_uid,
};
use mini_kcm_testkit::{PlaneConfig, PlaneInfo, TestNamespace, shared_plane};
use serde_json::{Value, json};

const TIMEOUT: Duration = Duration::from_secs(120);
const LEASE_DURATION: Duration = Duration::from_secs(15);
const RETRY_PERIOD: Duration = Duration::from_secs(2);

fn plane() -> &'static PlaneInfo {
    shared_plane(PlaneConfig::default())
}

/// One `mini-kcm run` process.
struct Replica {
    name: &'static str,
    child: tokio::process::Child,
    metrics_port: u16,
}

impl Replica {
    fn start(ns: &TestNamespace, name: &'static str) -> Self {
        let metrics_port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .unwrap()
            .port();
        let log = std::fs::File::create(ns.plane.log_dir.join(format!("{}-{name}.log", ns.name)))
            .unwrap();
        let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_mini-kcm"))
            .arg("--log-format=json")
            .arg("run")
            .arg("--kubeconfig")
            .arg(&ns.plane.kubeconfig)
            .args(["--kinds", "copies", "--namespace", &ns.name])
            .args([
                "--leader-elect",
                "--leader-elect-resource-namespace",
                &ns.name,
            ])
            .arg(format!("--metrics-addr=127.0.0.1:{metrics_port}"))
            .env("POD_NAME", name)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        Replica {
            name,
            child,
            metrics_port,
        }
    }

    fn signal(&self, signal: i32) {
        let pid = self.child.id().unwrap();
        // SAFETY: kill(2) on our own child's pid; no memory is shared.
        let rc = unsafe { libc::kill(i32::try_from(pid).unwrap(), signal) };
        assert_eq!(rc, 0, "kill({pid}, {signal})");
    }

    /// `GET path` on the replica's metrics address: (status code, body).
    async fn get(&self, path: &str) -> Option<(u16, String)> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", self.metrics_port))
            .await
            .ok()?;
        let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.ok()?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.ok()?;
        let code = answer.split_whitespace().nth(1)?.parse().ok()?;
        Some((code, answer))
    }

    async fn wait_ready(&self) {
        let started = Instant::now();
        while self.get("/readyz").await.map(|(code, _)| code) != Some(200) {
            assert!(
                started.elapsed() < TIMEOUT,
                "{} never became ready",
                self.name
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    async fn leader_metric(&self) -> Option<String> {
        let (_, body) = self.get("/metrics").await?;
        body.lines()
            .find(|l| l.starts_with("leader_election_master_status{"))
            .and_then(|l| l.rsplit(' ').next())
            .map(str::to_string)
    }
}

fn template(image: &str) -> PodTemplateSpec {
    mini_kcm_fixtures::pod_template("web", image)
}

fn holder(lease: Option<&Lease>) -> Option<String> {
    lease?
        .spec
        .as_ref()?
        .holder_identity
        .clone()
        .filter(|h| !h.is_empty())
}

/// Writes (create, update, patch, delete) to the test namespace's workloads and pods, by the replica
/// whose identity starts with `replica`, from the audit log: their receive times.
fn controller_writes(plane: &PlaneInfo, namespace: &str, replica: &str) -> Vec<Timestamp> {
    let text = std::fs::read_to_string(plane.audit_log()).unwrap();
    text.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|event| event["stage"] == "ResponseComplete")
        .filter(|event| {
            matches!(
                event["verb"].as_str(),
                Some("create" | "update" | "patch" | "delete")
            )
        })
        .filter(|event| event["objectRef"]["namespace"] == namespace)
        .filter(|event| event["objectRef"]["resource"] != "leases")
        .filter(|event| {
            event["userAgent"]
                .as_str()
                .is_some_and(|ua| ua.contains(&format!("({replica}_")))
        })
        .filter_map(|event| event["requestReceivedTimestamp"].as_str()?.parse().ok())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_leader_is_replaced_and_never_writes_again() {
    let ns = TestNamespace::create(plane(), "leader").await;
    mini_kcm_crds::install(&ns.client).await.unwrap();
    let mut replicas = [
        Replica::start(&ns, "replica-a"),
        Replica::start(&ns, "replica-b"),
    ];
    // Both sync their caches (standby included), exactly one leads.
    for replica in &replicas {
        replica.wait_ready().await;
    }
    let leases: Api<Lease> = ns.api();
    let lease = ns
        .wait_for(&leases, "mini-kcm", "a lease holder", TIMEOUT, |l| {
            holder(l).is_some()
        })
        .await;
    let first = holder(lease.as_ref()).unwrap();
    let (leader_index, standby_index) = if first.starts_with("replica-a_") {
        (0, 1)
    } else {
        (1, 0)
    };
    let (leader, standby) = (&replicas[leader_index], &replicas[standby_index]);
    let (leader_name, standby_name) = (leader.name, standby.name);
    assert!(first.starts_with(&format!("{}_", leader.name)), "{first}");
    let started = Instant::now();
    while leader.leader_metric().await.as_deref() != Some("1") {
        assert!(started.elapsed() < TIMEOUT, "leader metric never became 1");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(standby.leader_metric().await.as_deref(), Some("0"));

    // A Deployment copy, reconciled by the leader.
    let resource = WorkloadKind::Deployment.api_resource(ApiFamily::Copies);
    let deployments: Api<DeploymentObject> =
        Api::namespaced_with(ns.client.clone(), &ns.name, &resource);
    let mut d = DeploymentObject::new(
        "web",
        &resource,
        DeploymentSpec {
            replicas: Some(6),
            selector: LabelSelector {
                match_labels: Some(BTreeMap::from([("app".into(), "web".into())])),
                ..Default::default()
            },
            template: template("pause:1"),
            ..Default::default()
        },
    );
    d.metadata.namespace = Some(ns.name.clone());
    deployments
        .create(&PostParams::default(), &d)
        .await
        .unwrap();
    let complete = |generation: i64| {
        move |d: Option<&DeploymentObject>| {
            d.and_then(|d| d.status.as_ref()).is_some_and(|s| {
                s.observed_generation == Some(generation)
                    && s.updated_replicas == Some(6)
                    && s.available_replicas == Some(6)
                    && s.replicas == Some(6)
            })
        }
    };
    ns.wait_for_with(
        &deployments,
        resource.clone(),
        "web",
        "6 available",
        TIMEOUT,
        complete(1),
    )
    .await;

    // Watch every state from here on: no ReplicaSet owns more live pods than its largest spec.
    let violations = Arc::new(Mutex::new(Vec::<String>::new()));
    let rs_resource = WorkloadKind::ReplicaSet.api_resource(ApiFamily::Copies);
    let replica_sets: Api<ReplicaSetObject> =
        Api::namespaced_with(ns.client.clone(), &ns.name, &rs_resource);
    let pods: Api<Pod> = ns.api();
    let checker = {
        let violations = violations.clone();
        let rs_store = Arc::new(Mutex::new(BTreeMap::<String, (String, i32)>::new()));
        let rs_stream = watcher(replica_sets.clone(), watcher::Config::default())
            .default_backoff()
            .applied_objects();
        let pod_stream = watcher(pods.clone(), watcher::Config::default())
            .default_backoff()
            .applied_objects();
        let live_pods = Arc::new(Mutex::new(BTreeMap::<String, Option<String>>::new()));
        tokio::spawn(async move {
            use futures::StreamExt;
            let mut merged = std::pin::pin!(futures::stream::select(
                rs_stream.map(|r| r.map(either_rs)),
                pod_stream.map(|p| p.map(either_pod)),
            ));
            while let Some(item) = merged.next().await {
                match item {
                    Ok(Seen::ReplicaSet(rs)) => {
                        let uid = rs.metadata.uid.clone().unwrap_or_default();
                        let spec = rs.spec.replicas.unwrap_or(1);
                        let mut store = rs_store.lock().unwrap();
                        let entry = store
                            .entry(uid)
                            .or_insert((rs.metadata.name.clone().unwrap_or_default(), spec));
                        entry.1 = entry.1.max(spec);
                    }
                    Ok(Seen::Pod(pod)) => {
                        let name = pod.metadata.name.clone().unwrap_or_default();
                        let live = pod.metadata.deletion_timestamp.is_none();
                        let mut pods = live_pods.lock().unwrap();
                        if live {
                            pods.insert(name, controller_uid(&pod.metadata).map(str::to_string));
                        } else {
                            pods.remove(&name);
                        }
                    }
                    Err(_) => continue,
                }
                let store = rs_store.lock().unwrap();
                let pods = live_pods.lock().unwrap();
                for (uid, (name, max_spec)) in store.iter() {
                    let owned = pods
                        .values()
                        .filter(|owner| owner.as_deref() == Some(uid))
                        .count();
                    if owned > usize::try_from(*max_spec).unwrap_or(0) {
                        violations.lock().unwrap().push(format!(
                            "ReplicaSet {name} owns {owned} live pods, its largest spec was {max_spec}"
                        ));
                    }
                }
            }
        })
    };

    // Freeze the leader and start a rollout: the standby must take over and finish it.
    leader.signal(libc::SIGSTOP);
    let frozen = Instant::now();
    deployments
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"template": {"spec": {"containers": [
                {"name": "main", "image": "pause:2"}
            ]}}}})),
        )
        .await
        .unwrap();
    let lease = ns
        .wait_for(
            &leases,
            "mini-kcm",
            "the standby to take over",
            TIMEOUT,
            |l| holder(l).is_some_and(|h| h.starts_with(&format!("{}_", standby.name))),
        )
        .await
        .unwrap();
    let takeover = frozen.elapsed();
    // The standby takes over a lease duration after it last saw a renewal (at most a retry period late),
    // plus the API calls around it on a loaded machine (see TAKEOVER_BOUND in tests/e2e/in_cluster.rs).
    let bound = LEASE_DURATION + RETRY_PERIOD + Duration::from_secs(2);
    assert!(
        takeover <= bound,
        "takeover took {takeover:?} (bound {bound:?})"
    );
    println!(
        "takeover after the leader froze: {:.1}s",
        takeover.as_secs_f64()
    );
    let acquired = lease.spec.as_ref().unwrap().acquire_time.clone().unwrap().0;
    ns.wait_for_with(
        &deployments,
        resource.clone(),
        "web",
        "the rollout to finish",
        TIMEOUT,
        complete(2),
    )
    .await;
    assert_eq!(standby.leader_metric().await.as_deref(), Some("1"));

    // Thaw the old leader: it must notice that its lease is gone, write nothing, and exit non-zero.
    leader.signal(libc::SIGCONT);
    let status = tokio::time::timeout(TIMEOUT, replicas[leader_index].child.wait())
        .await
        .expect("the old leader did not exit after losing its lease")
        .unwrap();
    assert!(!status.success(), "the old leader exited with {status}");

    // Let a few more syncs happen, then read the audit log.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let old_writes = controller_writes(ns.plane, &ns.name, leader_name);
    let new_writes = controller_writes(ns.plane, &ns.name, standby_name);
    assert!(!old_writes.is_empty(), "the first leader wrote nothing?");
    assert!(!new_writes.is_empty(), "the new leader wrote nothing?");
    let late: Vec<_> = old_writes.iter().filter(|t| **t >= acquired).collect();
    assert!(
        late.is_empty(),
        "the old leader wrote after the new one acquired the lease at {acquired}: {late:?}"
    );
    let early: Vec<_> = new_writes.iter().filter(|t| **t < acquired).collect();
    assert!(
        early.is_empty(),
        "the standby wrote before it acquired the lease at {acquired}: {early:?}"
    );
    println!(
        "writes: old leader {} (all before {acquired}), new leader {} (all after)",
        old_writes.len(),
        new_writes.len()
    );
    checker.abort();
    let violations = violations.lock().unwrap();
    assert!(violations.is_empty(), "{violations:#?}");
}

enum Seen {
    ReplicaSet(Box<ReplicaSetObject>),
    Pod(Box<Pod>),
}

fn either_rs(rs: ReplicaSetObject) -> Seen {
    Seen::ReplicaSet(Box::new(rs))
}

fn either_pod(pod: Pod) -> Seen {
    Seen::Pod(Box::new(pod))
}
