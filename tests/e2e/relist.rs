//! Full lists both ways the runtime makes them, each on a plane of this test's own: with the API
//! server's watch-list on (its default: lists streamed as a watch's initial events, KEP-3157) and off
//! (`--feature-gates=WatchList=false`: the API server refuses the stream, the informers list in pages).
//! Either way the manager's caches sync, every watch forced to expire (the plane's `expire_watches`)
//! is followed by a relist that brings the caches up to date, each informer shows the mode and the
//! content type (protobuf for pods and nodes, JSON for the rest) it used in
//! the live view, and the API server's audit log shows the requests that mode makes: a streamed list
//! without `resourceVersion=0` (a consistent read), and without watch-list one refused stream per
//! informer, not one per relist.
//!
//! Also here: the controllers' HTTP/2 transport against an API server that sends GOAWAY at random and
//! is restarted mid-rollout.
//!
//! Also here, ignored (run by hand): `relist_memory`, a `mini-kcm run` process's peak memory during a
//! forced relist of thousands of pods against its steady memory.

// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};
use mini_kcm_e2e::{
    TestManager, deployment_of, deployments, pod_template, repo_path, rolling_update,
    wait_deployment_complete, wait_generation_observed,
};
use mini_kcm_local_plane::{Binaries, Component, LocalPlane, PlaneOptions, VersionSet};
use mini_kcm_manager::Kinds;
use mini_kcm_runtime::api::client::{ControllerClientOptions, RequestBudget, controller_client};
use mini_kcm_runtime::api::kinds::ApiFamily;
use mini_kcm_testkit::TestNamespace;
use serde_json::Value;

/// Bare pods in the test's namespace: enough to make a list, few enough to stay quick.
const PODS: usize = 20;

async fn plane(
    extra_apiserver_args: &[&str],
) -> (LocalPlane, &'static mini_kcm_testkit::PlaneInfo) {
    let binaries = Binaries::ensure(&VersionSet::selected().unwrap())
        .await
        .unwrap();
    let mut options = PlaneOptions::new(binaries);
    options.nodes = 1;
    options.extra_apiserver_args = extra_apiserver_args.iter().map(|a| a.to_string()).collect();
    let plane = LocalPlane::start(options).await.unwrap();
    let info: &'static _ = Box::leak(Box::new(plane.info().clone()));
    (plane, info)
}

async fn create_pod(ns: &TestNamespace, name: &str) {
    let template = pod_template("relist");
    let pod = Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: template.metadata.and_then(|m| m.labels),
            ..Default::default()
        },
        spec: template.spec,
        ..Default::default()
    };
    ns.api::<Pod>()
        .create(&PostParams::default(), &pod)
        .await
        .unwrap();
}

/// The manager's informers as its live view shows them (none while it is not serving yet).
async fn informers(manager: &TestManager) -> Vec<Value> {
    let Some(body) = http_get(manager.metrics_addr, "/debug/controllers/state").await else {
        return Vec::new();
    };
    let state: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
    state["informers"].as_array().cloned().unwrap_or_default()
}

/// Waits until every informer is synced, has made at least `lists` lists, and the pod cache holds
/// `pods` pods; returns the informers.
async fn wait_for_lists(manager: &TestManager, lists: u64, pods: usize) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let informers = informers(manager).await;
        let done = !informers.is_empty()
            && informers.iter().all(|i| {
                i["synced"] == Value::Bool(true) && i["lists"].as_u64().unwrap_or(0) >= lists
            })
            && informers
                .iter()
                .any(|i| i["kind"] == "Pod" && i["objects"].as_u64() == Some(pods as u64));
        if done {
            return informers;
        }
        assert!(
            Instant::now() < deadline,
            "the informers did not reach {lists} lists with {pods} pods: {informers:#?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The audited requests of mini-kcm's informers that asked for a streamed list: (URI, response code),
/// one per request.
fn streamed_list_requests(audit_log: &std::path::Path) -> Vec<(String, i64)> {
    let log = std::fs::read_to_string(audit_log).unwrap();
    let mut seen = std::collections::BTreeMap::new();
    for line in log.lines() {
        let Ok(entry) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let uri = entry["requestURI"].as_str().unwrap_or_default();
        let agent = entry["userAgent"].as_str().unwrap_or_default();
        // kube-controller-manager's informers stream lists too.
        let ours = agent.starts_with("mini-kcm/") && agent.ends_with("shared-informers");
        if !uri.contains("sendInitialEvents=true") || !ours {
            continue;
        }
        let code = entry["responseStatus"]["code"].as_i64().unwrap_or(0);
        let id = entry["auditID"].as_str().unwrap_or_default().to_string();
        // A watch is audited when it starts and when it ends; keep the latest code.
        seen.insert(id, (uri.to_string(), code));
    }
    seen.into_values().collect()
}

/// One plane at a time: two would make each other slow on a small machine.
static ONE_PLANE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Syncs, a forced relist, and the mode shown and audited, on a plane started with `flags`.
async fn lists_and_relists(flags: &[&str], mode: &str) {
    let _one = ONE_PLANE_AT_A_TIME.lock().await;
    let (mut plane, info) = plane(flags).await;
    let ns = TestNamespace::create(info, "relist").await;
    for i in 0..PODS {
        create_pod(&ns, &format!("before-{i}")).await;
    }
    let manager = TestManager::start(&ns, Kinds::Apps).await;
    let synced = wait_for_lists(&manager, 1, PODS).await;
    for informer in &synced {
        assert_eq!(informer["list_mode"], mode, "{informer:#?}");
        // Pods and nodes in protobuf (the default content type), the rest in JSON; either list mode.
        let protobuf = matches!(informer["kind"].as_str(), Some("Pod" | "Node"));
        let expected = if protobuf { "protobuf" } else { "json" };
        assert_eq!(informer["content_type"], expected, "{informer:#?}");
    }

    plane.expire_watches().await.unwrap();
    create_pod(&ns, "after").await;
    let relisted = wait_for_lists(&manager, 2, PODS + 1).await;
    for informer in &relisted {
        assert_eq!(informer["list_mode"], mode, "{informer:#?}");
    }

    let requests = streamed_list_requests(&info.audit_log());
    assert!(!requests.is_empty(), "no streamed list was asked for");
    assert!(
        requests
            .iter()
            .all(|(uri, _)| !uri.contains("resourceVersion=0")),
        "every streamed list is a consistent read: {requests:#?}"
    );
    if mode == "paged" {
        assert!(
            requests.iter().all(|(_, code)| *code == 422),
            "{requests:#?}"
        );
        assert_eq!(
            requests.len(),
            relisted.len(),
            "one refused stream per informer, not one per relist: {requests:#?}"
        );
    } else {
        // While the API server restarts, a request may meet a 429 (its storage still starting); never
        // a refusal.
        assert!(
            requests.iter().all(|(_, code)| *code != 422),
            "{requests:#?}"
        );
        let served = requests.iter().filter(|(_, code)| *code == 200).count();
        assert!(
            served >= 2 * relisted.len(),
            "a streamed list per informer before and after the expiry: {requests:#?}"
        );
    }
    manager.stop().await;
    plane.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_are_streamed_where_the_api_server_has_watch_list() {
    lists_and_relists(&[], "streaming").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_are_paged_where_the_api_server_refuses_watch_list() {
    lists_and_relists(&["--feature-gates=WatchList=false"], "paged").await;
}

/// The HTTP version the controllers' transport ends up speaking to the plane's API server.
async fn negotiated_version(info: &mini_kcm_testkit::PlaneInfo) -> http::Version {
    let config = mini_kcm_local_plane::config_from_kubeconfig(&info.kubeconfig)
        .await
        .unwrap();
    let options = ControllerClientOptions {
        name: "transport-check".into(),
        identity: "test".into(),
        budget: RequestBudget::unlimited(),
        metrics: None,
        fence: None,
    };
    let client = controller_client(config, &options).unwrap();
    let request = http::Request::get("/version")
        .body(kube::client::Body::empty())
        .unwrap();
    client.send(request).await.unwrap().version()
}

/// The controllers' clients over HTTP/2 against an API server that closes connections with GOAWAY
/// after a random 2 % of its requests (`--goaway-chance`, the most it allows), and that is restarted
/// gracefully mid-rollout (GOAWAY on every connection). A request left hanging on a closing connection
/// would stall a worker, a lost write would leave a rollout short: each state is reached anyway, with
/// enough requests that GOAWAYs certainly came (at 2 %, none in 400 requests has odds of 0.03 %).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controllers_keep_working_across_goaways_and_an_api_server_restart() {
    let _one = ONE_PLANE_AT_A_TIME.lock().await;
    let (mut plane, info) = plane(&["--goaway-chance=0.02"]).await;
    assert_eq!(negotiated_version(info).await, http::Version::HTTP_2);
    let ns = TestNamespace::create(info, "goaway").await;
    let manager = TestManager::start(&ns, Kinds::Apps).await;
    let family = ApiFamily::Apps;
    let deployments = deployments(&ns, family);
    let mut web = deployment_of("web", 50, family);
    rolling_update(&mut web, 10, 10);
    deployments
        .create(&PostParams::default(), &web)
        .await
        .unwrap();
    wait_deployment_complete(&ns, family, "web", 50).await;

    // A new template, and the API server restarted while the rollout is under way.
    let new_template = serde_json::json!({ "spec": { "template": { "metadata": {
        "annotations": { "minikcm.dev/step": "2" } } } } });
    deployments
        .patch("web", &PatchParams::default(), &Patch::Merge(&new_template))
        .await
        .unwrap();
    wait_generation_observed(&ns, family, "web", "the new template seen").await;
    plane.restart(Component::ApiServer).await.unwrap();
    wait_deployment_complete(&ns, family, "web", 50).await;

    // And back down, with the connections made after the restart.
    let scale = serde_json::json!({ "spec": { "replicas": 10 } });
    deployments
        .patch("web", &PatchParams::default(), &Patch::Merge(&scale))
        .await
        .unwrap();
    wait_deployment_complete(&ns, family, "web", 10).await;

    let requests = manager.metric("rest_client_requests_total").await;
    assert!(
        requests >= 400.0,
        "only {requests} requests: too few to meet a GOAWAY"
    );
    manager.stop().await;
    plane.stop().await;
}

/// `VmRSS`, `RssAnon` and `VmHWM` of `pid`, in MiB.
fn memory_mib(pid: u32) -> (f64, f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib = |key: &str| -> f64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
            .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
            .unwrap_or_else(|| panic!("no {key} in /proc/{pid}/status"))
    };
    (
        kib("VmRSS") / 1024.0,
        kib("RssAnon") / 1024.0,
        kib("VmHWM") / 1024.0,
    )
}

/// A GET on a plain-HTTP address; the body.
async fn http_get(addr: std::net::SocketAddr, path: &str) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\n\r\n").as_bytes())
        .await
        .ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.ok()?;
    let (head, body) = answer.split_once("\r\n\r\n")?;
    (head.split_whitespace().nth(1) == Some("200")).then(|| body.to_string())
}

/// Waits until every informer of `process` (serving at `addr`) is synced with at least `lists` lists.
async fn wait_for_process_lists(
    process: &mut tokio::process::Child,
    addr: std::net::SocketAddr,
    lists: u64,
) {
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let state = http_get(addr, "/debug/controllers/state")
            .await
            .and_then(|body| serde_json::from_str::<Value>(&body).ok());
        if let Some(informers) = state.as_ref().and_then(|s| s["informers"].as_array())
            && !informers.is_empty()
            && informers.iter().all(|i| {
                i["synced"] == Value::Bool(true) && i["lists"].as_u64().unwrap_or(0) >= lists
            })
        {
            return;
        }
        if let Ok(Some(status)) = process.try_wait() {
            panic!("mini-kcm run ended: {status}");
        }
        assert!(
            Instant::now() < deadline,
            "no {lists} lists within 10 minutes: {:#?}",
            state.map(|s| s["informers"].clone())
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The relist's memory, measured: a `mini-kcm run` process (`--kinds apps`) caches
/// `MINI_KCM_RELIST_PODS` bare pods (5 000 by default; Pending for a scheduler nobody runs, so nothing
/// but the API server and the cache work), then every watch is forced to expire and the process
/// relists. Prints its steady `VmRSS`/`RssAnon` before the expiry, its peak (`VmHWM`, reset before the
/// expiry through `/proc/<pid>/clear_refs`), the peak of its `RssAnon` (sampled) and its `VmRSS`
/// after; fails when either peak exceeds 1.25× its steady value (docs/informers.md has the numbers).
/// `MINI_KCM_RELIST_BINARY` picks another build (e.g. one without the change);
/// `MINI_KCM_RELIST_APISERVER_FLAGS` adds API server flags (`--feature-gates=WatchList=false`: paged
/// lists).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement of minutes with thousands of pods; run by hand"]
async fn relist_memory() {
    use futures::StreamExt;
    let _one = ONE_PLANE_AT_A_TIME.lock().await;
    let pods: usize = std::env::var("MINI_KCM_RELIST_PODS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(5000);
    let binary = std::env::var("MINI_KCM_RELIST_BINARY")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| mini_kcm_e2e::mini_kcm_binary());
    let flags = std::env::var("MINI_KCM_RELIST_APISERVER_FLAGS").unwrap_or_default();
    let flags: Vec<&str> = flags.split_whitespace().collect();
    let (mut plane, info) = plane(&flags).await;
    let ns = TestNamespace::create(info, "relist-memory").await;

    let started = Instant::now();
    let api = ns.api::<Pod>();
    futures::stream::iter(0..pods)
        .for_each_concurrent(32, |i| {
            let api = api.clone();
            async move {
                let template = pod_template("relist-memory");
                let mut spec = template.spec.unwrap();
                spec.scheduler_name = Some("nobody".into());
                let pod = Pod {
                    metadata: ObjectMeta {
                        name: Some(format!("pod-{i}")),
                        labels: template.metadata.and_then(|m| m.labels),
                        ..Default::default()
                    },
                    spec: Some(spec),
                    ..Default::default()
                };
                api.create(&PostParams::default(), &pod).await.unwrap();
            }
        })
        .await;
    println!(
        "{pods} pods created in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap();
    let mut process = tokio::process::Command::new(&binary)
        .arg("run")
        .arg(format!("--kubeconfig={}", info.kubeconfig.display()))
        .arg("--kinds=apps")
        // The expiry stops the API server for longer than a lease's renew deadline.
        .arg("--leader-elect=false")
        .arg(format!("--metrics-addr={addr}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(repo_path("target/relist-memory.log")).unwrap())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let pid = process.id().unwrap();
    wait_for_process_lists(&mut process, addr, 1).await;
    // The first syncs are done in moments (no workload object), then the allocator settles.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let (steady, steady_anon, first_peak) = memory_mib(pid);
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").unwrap();
    // The kernel keeps no peak of the anonymous part alone: sample it.
    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = {
        let sampling = sampling.clone();
        tokio::spawn(async move {
            let mut peak_anon: f64 = 0.0;
            while sampling.load(Ordering::Relaxed) {
                peak_anon = peak_anon.max(memory_mib(pid).1);
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            peak_anon
        })
    };

    let expired = Instant::now();
    plane.expire_watches().await.unwrap();
    wait_for_process_lists(&mut process, addr, 2).await;
    let relisted = expired.elapsed();
    tokio::time::sleep(Duration::from_secs(2)).await;
    sampling.store(false, Ordering::Relaxed);
    let peak_anon = sampler.await.unwrap();
    let (after, after_anon, peak) = memory_mib(pid);
    println!(
        "{} with {pods} pods{}: steady VmRSS {steady:.1} MiB (RssAnon {steady_anon:.1}, first list's \
         peak {first_peak:.1}); relist peak VmHWM {peak:.1} MiB = {:.2}× steady (RssAnon sampled \
         every 10 ms: peak {peak_anon:.1} MiB = {:.2}× steady); VmRSS after {after:.1} MiB (RssAnon \
         {after_anon:.1}); relisted {:.1} s after the expiry began",
        binary.display(),
        if flags.is_empty() {
            String::new()
        } else {
            format!(" (API server {})", flags.join(" "))
        },
        peak / steady,
        peak_anon / steady_anon,
        relisted.as_secs_f64()
    );
    process.kill().await.unwrap();
    plane.stop().await;
    // The resident set counts the executable's pages too (most of it for a debug build with few
    // objects): the anonymous part is what a second copy of the world would grow.
    assert!(
        peak <= 1.25 * steady,
        "the relist's peak exceeds 1.25× steady"
    );
    assert!(
        peak_anon <= 1.25 * steady_anon,
        "the relist's anonymous peak exceeds 1.25× steady"
    );
}
