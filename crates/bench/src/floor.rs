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

use std::time::{Duration, Instant};

use futures::TryStreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

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
    open_connections(&pods).await?;
    let ready = ReadySeries::start(ctx.client.clone(), &namespace, selector(rev), timeout).await?;
    let origin = Instant::now();
    let done = async {
        tokio::try_join!(
            create_pods(&pods, new),
            delete_pods(&pods, old),
            wait_ready(&pods, rev, expected, timeout),
        )
    };
    let outcome = done.await.map(|_| origin.elapsed().as_secs_f64());
    let ready_pods = ready.finish(origin);
    delete_namespace(&ctx.client, &namespace, timeout).await?;
    Ok(FloorRun {
        round,
        namespace,
        seconds_to_done: outcome?,
        ready_pods,
    })
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
