//! The plane's floor: how fast the plane alone does a scenario's pod work, with no controller at all.
//!
//! A controller's time to done is its own reaction time plus the plane's: the API server and etcd
//! storing pods, the scheduler binding them, kwok making them Ready, all on the same cores. To tell
//! the two apart, each round also runs the scenario's pod work with no controller: the benchmark
//! itself creates (and, for the rolling scenarios, deletes) the very pods a controller would, all at
//! once, as fast as the plane takes them, with no slow start, no `maxSurge`/`maxUnavailable` and no
//! status to write. A controller that has to get those pods written should not be done sooner (up to
//! the plane's scatter between runs, which can put a run just under it), so whatever the controllers
//! differ by is the time each spends above the floor.
//!
//! The floor's pod writes and watches go through the controllers' own transport, on a thread of their
//! own ([`FloorClient`]): mini-kcm's client (TLS, HTTP/2, `TCP_NODELAY`, no rate limit) and its shared
//! informers for pods and nodes (protobuf, as the controllers cache them), with no handler and no
//! controller behind them. That thread's CPU is the CPU floor: what creating and deleting those pods and
//! receiving their events costs with no controller logic at all, so a controller's CPU reads as the
//! floor plus what its syncs, status writes and events add.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use futures::TryStreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

use mini_kcm_runtime::api::client::{ControllerClientOptions, RequestBudget, controller_client};
use mini_kcm_runtime::api::kinds::{node_informer, pod_informer};
use mini_kcm_runtime::informers::SharedInformers;
use tokio::sync::oneshot;

use crate::BenchError;
use crate::report::FloorRun;
use crate::run::{Context, create_namespace, delete_namespace, typed};
use crate::scenario::{REV_LABEL, ROLE_LABEL, ROLE_WORKLOAD, Scenario, Sizes, pod_template};
use crate::watch::{ReadySeries, is_ready, wait_all_done};

/// Requests in flight at once: more than a controller's slow-start batches keep in flight for most of
/// a run, so that the floor is bound by the plane rather than by this client.
const CONCURRENCY: usize = 64;

/// The pod work a controller does in a scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PodWork {
    /// Make `pods` pods Ready.
    Create { pods: u32 },
    /// Replace `pods` Ready pods with as many pods of a new revision.
    Replace { pods: u32 },
    /// One pod on every node, each pinned to its node as the DaemonSet controller pins them.
    OnEveryNode,
}

impl PodWork {
    fn of(scenario: Scenario, sizes: &Sizes) -> Self {
        match scenario {
            Scenario::ScaleUp => PodWork::Create { pods: sizes.pods },
            Scenario::Steady => PodWork::Create {
                pods: sizes.steady_pods(),
            },
            Scenario::RollingUpdate => PodWork::Replace { pods: sizes.pods },
            Scenario::ConcurrentRollouts => PodWork::Replace {
                pods: sizes.rollouts.saturating_mul(sizes.pods_per_rollout),
            },
            Scenario::Daemonset => PodWork::OnEveryNode,
            // The fresh change is a scale by one: one pod.
            Scenario::FreshUnderLoad | Scenario::Failover => PodWork::Create { pods: 1 },
            // Not run with a floor: the population is made once, outside any timing (scale.rs).
            Scenario::Scale => PodWork::Create { pods: 0 },
        }
    }
}

/// Runs the floor of `scenario` in a fresh namespace and deletes it afterwards.
pub(crate) async fn run_floor(
    ctx: &Context,
    scenario: Scenario,
    round: u32,
) -> Result<FloorRun, BenchError> {
    let namespace = format!("bench-{}-floor-r{round}", scenario.name());
    let timeout = ctx.sizes.timeout;
    create_namespace(&ctx.client, &namespace, timeout).await?;
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &namespace);
    let (new, old) = match PodWork::of(scenario, &ctx.sizes) {
        PodWork::Create { pods: count } => (numbered(count, 1), Vec::new()),
        PodWork::OnEveryNode => {
            let nodes: Api<Node> = Api::all(ctx.client.clone());
            let names: Vec<String> = nodes
                .list_metadata(&ListParams::default())
                .await
                .map_err(|e| BenchError::kube("listing the nodes", e))?
                .items
                .iter()
                .map(|n| n.name_any())
                .collect();
            let pinned = names
                .iter()
                .enumerate()
                .map(|(i, node)| pod(&format!("agent-{i}"), 1, Some(node)))
                .collect();
            (pinned, Vec::new())
        }
        PodWork::Replace { pods: count } => {
            // The revision being replaced, Ready before the clock starts (a controller's rollout
            // starts from a complete Deployment too).
            let old = numbered(count, 1);
            let names = old.iter().map(name_of).collect();
            create_pods(&pods, old).await?;
            wait_ready(&pods, 1, count as usize, timeout).await?;
            (numbered(count, 2), names)
        }
    };
    let rev = if old.is_empty() { 1 } else { 2 };
    let expected = new.len();
    let client =
        FloorClient::start(ctx.plane.kubeconfig.clone(), namespace.clone(), timeout).await?;
    let ready = ReadySeries::start(ctx.client.clone(), &namespace, rev, timeout).await?;
    let origin = Instant::now();
    let (written, cost) = client.write(new, old);
    let done = async { tokio::try_join!(written, wait_ready(&pods, rev, expected, timeout)) };
    let outcome = done.await.map(|_| origin.elapsed().as_secs_f64());
    let pod_events = ready.pod_events();
    let ready_pods = ready.finish(origin);
    let (cpu_seconds, wakeups) = cost.finish()?;
    delete_namespace(&ctx.client, &namespace, timeout).await?;
    Ok(FloorRun {
        round,
        namespace,
        seconds_to_done: outcome?,
        cpu_seconds,
        wakeups,
        pod_events,
        ready_pods,
    })
}

/// The floor's client: a thread with a current-thread runtime (as `mini-kcm run` has), mini-kcm's
/// client and its pod and node informers, synced and with its connections open, waiting for the pods
/// to write.
struct FloorClient {
    work: oneshot::Sender<(Vec<Value>, Vec<String>)>,
    written: oneshot::Receiver<Result<(), BenchError>>,
    cost: FloorCost,
}

/// The floor client's thread once its writes are under way: stopping it says what it cost.
struct FloorCost {
    stop: oneshot::Sender<()>,
    thread: std::thread::JoinHandle<Result<(f64, u64), BenchError>>,
}

impl FloorClient {
    async fn start(
        kubeconfig: PathBuf,
        namespace: String,
        timeout: Duration,
    ) -> Result<Self, BenchError> {
        let (synced_tx, synced_rx) = oneshot::channel();
        let (work_tx, work_rx) = oneshot::channel();
        let (written_tx, written_rx) = oneshot::channel();
        let (stop_tx, stop_rx) = oneshot::channel();
        let thread = std::thread::Builder::new()
            .name("floor-client".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| BenchError::io("starting the floor client's runtime", e))?;
                runtime.block_on(floor_client(
                    kubeconfig, namespace, synced_tx, work_rx, written_tx, stop_rx,
                ))
            })
            .map_err(|e| BenchError::io("starting the floor client's thread", e))?;
        let cost = FloorCost {
            stop: stop_tx,
            thread,
        };
        match tokio::time::timeout(timeout, synced_rx).await {
            Ok(Ok(Ok(()))) => Ok(FloorClient {
                work: work_tx,
                written: written_rx,
                cost,
            }),
            Ok(Ok(Err(e))) => Err(e),
            // The thread ended without a word: its own error says why.
            Ok(Err(_)) => Err(cost.finish().err().unwrap_or_else(|| {
                BenchError::io("the floor client", std::io::Error::other("ended early"))
            })),
            Err(_) => Err(BenchError::Timeout {
                what: "the floor client's informers to sync".into(),
                waited: timeout,
            }),
        }
    }

    /// Hands over the pods to create and delete: a future that ends when all are written, and the
    /// thread to stop once the floor is done.
    fn write(
        self,
        create: Vec<Value>,
        delete: Vec<String>,
    ) -> (
        impl std::future::Future<Output = Result<(), BenchError>>,
        FloorCost,
    ) {
        let _ = self.work.send((create, delete));
        let written = async move {
            self.written.await.unwrap_or_else(|_| {
                Err(BenchError::io(
                    "the floor client",
                    std::io::Error::other("ended before writing its pods"),
                ))
            })
        };
        (written, self.cost)
    }
}

impl FloorCost {
    /// Stops the thread: its CPU seconds and wake-ups from the hand-over until now.
    fn finish(self) -> Result<(f64, u64), BenchError> {
        let _ = self.stop.send(());
        self.thread.join().unwrap_or_else(|_| {
            Err(BenchError::io(
                "the floor client",
                std::io::Error::other("its thread panicked"),
            ))
        })
    }
}

/// The floor client's thread (see [`FloorClient`]).
async fn floor_client(
    kubeconfig: PathBuf,
    namespace: String,
    synced: oneshot::Sender<Result<(), BenchError>>,
    work: oneshot::Receiver<(Vec<Value>, Vec<String>)>,
    written: oneshot::Sender<Result<(), BenchError>>,
    stop: oneshot::Receiver<()>,
) -> Result<(f64, u64), BenchError> {
    let setup = async {
        let config = mini_kcm_local_plane::config_from_kubeconfig(&kubeconfig).await?;
        let options = ControllerClientOptions {
            name: "bench-floor".into(),
            identity: "bench".into(),
            budget: RequestBudget::unlimited(),
            metrics: None,
            fence: None,
        };
        let client = controller_client(config, &options)
            .map_err(|e| BenchError::kube("building the floor's client", e))?;
        // Every pod and node event of the plane reaches this cache, as it reaches a controller's.
        let informers = SharedInformers::new(client.clone(), None);
        let _pods = pod_informer(&informers);
        let _nodes = node_informer(&informers);
        informers.start().await;
        let pods: Api<Pod> = Api::namespaced(client, &namespace);
        open_connections(&pods).await?;
        Ok::<_, BenchError>((informers, pods))
    };
    let (_informers, pods) = match setup.await {
        Ok(ready) => {
            let _ = synced.send(Ok(()));
            ready
        }
        Err(e) => {
            let _ = synced.send(Err(e));
            return Ok((0.0, 0));
        }
    };
    let Ok((create, delete)) = work.await else {
        return Ok((0.0, 0));
    };
    let before = crate::usage::this_thread();
    let result = tokio::try_join!(create_pods(&pods, create), delete_pods(&pods, delete));
    let _ = written.send(result.map(|_| ()));
    // The watches go on receiving the pods' events until the floor is done.
    let _ = stop.await;
    let after = crate::usage::this_thread();
    match (before, after) {
        (Some((cpu_before, wakeups_before)), Some((cpu_after, wakeups_after))) => Ok((
            (cpu_after - cpu_before).max(0.0),
            wakeups_after.saturating_sub(wakeups_before),
        )),
        _ => Err(BenchError::io(
            "reading /proc/thread-self",
            std::io::Error::other("not readable"),
        )),
    }
}

fn selector(rev: u32) -> String {
    format!("{ROLE_LABEL}={ROLE_WORKLOAD},{REV_LABEL}={rev}")
}

fn numbered(count: u32, rev: u32) -> Vec<Value> {
    (1..=count)
        .map(|i| pod(&format!("pod-{rev}-{i}"), rev, None))
        .collect()
}

/// A pod of the scenarios' template; `node` pins it with the node affinity the DaemonSet controller
/// writes (the scheduler still binds it).
fn pod(name: &str, rev: u32, node: Option<&str>) -> Value {
    let template = pod_template("floor", ROLE_WORKLOAD, rev);
    let mut spec = template["spec"].clone();
    if let Some(node) = node {
        spec["affinity"] = json!({ "nodeAffinity": { "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{ "matchFields": [
                { "key": "metadata.name", "operator": "In", "values": [node] }
            ] }]
        } } });
    }
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": name, "labels": template["metadata"]["labels"] },
        "spec": spec,
    })
}

/// Opens the connections the timed requests will use, as a running controller has them open: the
/// floor should not time TLS handshakes that no controller pays mid-run.
async fn open_connections(api: &Api<Pod>) -> Result<(), BenchError> {
    let lists = (0..CONCURRENCY).map(|_| async {
        api.list_metadata(&ListParams::default().limit(1))
            .await
            .map_err(|e| BenchError::kube("listing pods", e))
    });
    futures::future::try_join_all(lists).await.map(|_| ())
}

fn name_of(pod: &Value) -> String {
    pod["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

async fn create_pods(api: &Api<Pod>, pods: Vec<Value>) -> Result<(), BenchError> {
    futures::stream::iter(pods.into_iter().map(Ok))
        .try_for_each_concurrent(CONCURRENCY, |object| async move {
            let pod: Pod = typed(object)?;
            api.create(&PostParams::default(), &pod)
                .await
                .map_err(|e| BenchError::kube("creating a pod", e))?;
            Ok(())
        })
        .await
}

async fn delete_pods(api: &Api<Pod>, names: Vec<String>) -> Result<(), BenchError> {
    futures::stream::iter(names.into_iter().map(Ok))
        .try_for_each_concurrent(CONCURRENCY, |name| async move {
            api.delete(&name, &DeleteParams::default())
                .await
                .map_err(|e| BenchError::kube(format!("deleting pod {name}"), e))?;
            Ok(())
        })
        .await
}

async fn wait_ready(
    api: &Api<Pod>,
    rev: u32,
    expected: usize,
    timeout: Duration,
) -> Result<(), BenchError> {
    wait_all_done(
        api.clone(),
        Some(selector(rev)),
        expected,
        is_ready,
        timeout,
        "the plane to make the pods Ready",
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floor_pods_carry_the_scenario_labels_and_a_pin_when_asked() {
        let free = pod("pod-2-1", 2, None);
        assert_eq!(free["metadata"]["labels"][REV_LABEL], "2");
        assert_eq!(free["metadata"]["labels"][ROLE_LABEL], ROLE_WORKLOAD);
        assert!(free["spec"].get("affinity").is_none());
        let pinned: Pod = typed(pod("agent-0", 1, Some("kwok-node-3"))).unwrap();
        let term = &pinned
            .spec
            .unwrap()
            .affinity
            .unwrap()
            .node_affinity
            .unwrap()
            .required_during_scheduling_ignored_during_execution
            .unwrap()
            .node_selector_terms[0];
        let field = &term.match_fields.as_ref().unwrap()[0];
        assert_eq!(field.key, "metadata.name");
        assert_eq!(
            field.values.as_deref(),
            Some(&["kwok-node-3".to_string()][..])
        );
    }

    #[test]
    fn rolling_scenarios_replace_all_their_pods_and_the_others_create_them() {
        let sizes = Sizes::of(crate::Size::Full);
        let work = |scenario| PodWork::of(scenario, &sizes);
        assert_eq!(work(Scenario::ScaleUp), PodWork::Create { pods: 500 });
        assert_eq!(work(Scenario::Steady), PodWork::Create { pods: 10_000 });
        assert_eq!(
            work(Scenario::RollingUpdate),
            PodWork::Replace { pods: 500 }
        );
        // 20 rollouts of 25 pods.
        assert_eq!(
            work(Scenario::ConcurrentRollouts),
            PodWork::Replace { pods: 500 }
        );
        assert_eq!(work(Scenario::Daemonset), PodWork::OnEveryNode);
        let names: Vec<String> = numbered(3, 2).iter().map(name_of).collect();
        assert_eq!(names, ["pod-2-1", "pod-2-2", "pod-2-3"]);
    }
}
