//! One benchmark: a plane, then every scenario, round after round, mini-kcm then upstream, each in a
//! fresh namespace with the other side stopped.
//!
//! A run: create the namespace, start the side's controller process, wait until all three controllers
//! have acted on small probe objects (so start-up is not timed as scenario time), run the scenario
//! (timed from the create or update until the status says done, while counting Ready pods of the new
//! revision), let it settle, read CPU and memory, stop the process, delete the namespace and wait until
//! it is gone (so the next run's informers do not cache leftovers).

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, Resource};
use mini_kcm_local_plane::{ManagedProcess, PlaneInfo};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::BenchError;
use crate::audit::{AuditTail, BENCH_USER_PREFIX, totals};
use crate::body_bytes::BodyBytes;
use crate::report::RunResult;
use crate::scenario::{
    ROLE_LABEL, ROLE_PROBE, ROLE_WORKLOAD, Scenario, Sizes, daemon_set, deployment,
    new_revision_patch, replica_set,
};
use crate::side::{self, ClientLimits, Launch, Side};
use crate::usage::{self, Sampler, Usage};
use crate::watch::{ReadySeries, wait_all_done, wait_namespace_gone};

/// Concurrent creates and patches of the benchmark's own client (it is not rate limited).
const CLIENT_CONCURRENCY: usize = 16;

/// Everything runs share.
pub(crate) struct Context {
    pub plane: PlaneInfo,
    pub client: Client,
    pub sizes: Sizes,
    pub mini_kcm_binary: PathBuf,
    pub other_mini_kcm_binary: Option<PathBuf>,
    pub work_dir: PathBuf,
    pub audit: Arc<Mutex<AuditTail>>,
}

/// Follows the audit log on a thread of its own until dropped.
pub(crate) struct AuditFollower {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl AuditFollower {
    pub(crate) fn start(audit: Arc<Mutex<AuditTail>>) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let thread = std::thread::spawn(move || {
            while !stopping.load(Ordering::Relaxed) {
                if let Ok(mut tail) = audit.lock()
                    && let Err(e) = tail.drain()
                {
                    eprintln!("bench: reading the audit log: {e}");
                }
                // Polling a file: reading it once a second keeps the backlog small.
                std::thread::sleep(Duration::from_secs(1));
            }
        });
        AuditFollower {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for AuditFollower {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The user whose requests are one run's.
pub(crate) fn run_user(scenario: Scenario, side: Side, round: u32) -> String {
    format!(
        "{BENCH_USER_PREFIX}{}:{}:{round}",
        scenario.name(),
        side.name()
    )
}

/// One side in one round. Request counts are filled in later (`fill_requests`), once the audit log has
/// caught up.
pub(crate) async fn run_side(
    ctx: &Context,
    scenario: Scenario,
    side: Side,
    round: u32,
    limits: ClientLimits,
) -> Result<RunResult, BenchError> {
    let namespace = format!("bench-{}-{}-r{round}", scenario.name(), side.name());
    let user = run_user(scenario, side, round);
    let timeout = ctx.sizes.timeout;
    create_namespace(&ctx.client, &namespace, timeout).await?;

    let launch = launch(ctx, &namespace, &user, limits)?;
    let bodies_before = BodyBytes::read(&ctx.client).await;
    let started = Instant::now();
    let mut process = side::start(side, &ctx.plane, &launch)?;
    let pid = process.pid();
    let sampler = Sampler::start(pid, Duration::from_millis(200));

    let outcome = async {
        wait_for_controllers(ctx, &namespace).await?;
        let startup_seconds = started.elapsed().as_secs_f64();
        let timed = drive(ctx, scenario, &namespace, pid).await?;
        let at_done = usage::read(pid);
        tokio::time::sleep(ctx.sizes.settle).await;
        let settled = usage::read(pid);
        Ok::<_, BenchError>((startup_seconds, timed, at_done, settled))
    }
    .await;
    let (startup_seconds, timed, at_done, settled) = match outcome {
        Ok(values) => values,
        Err(error) => return Err(explain(error, &mut process, &launch)),
    };
    let (Some(at_done), Some(settled)) = (at_done, settled) else {
        return Err(explain(
            BenchError::Io {
                context: format!("reading /proc/{pid}"),
                source: std::io::Error::other("the process is gone"),
            },
            &mut process,
            &launch,
        ));
    };
    process.stop(Duration::from_secs(10)).await;
    let bodies = match (bodies_before, BodyBytes::read(&ctx.client).await) {
        (Some(before), Some(after)) => Some(before.until(after)),
        _ => None,
    };
    let sampled_peak = sampler.max_rss_bytes();
    drop(sampler);

    delete_namespace(&ctx.client, &namespace, timeout).await?;

    Ok(RunResult {
        side,
        round,
        namespace,
        user,
        startup_seconds,
        seconds_to_done: timed.seconds,
        plane_floor_seconds: None,
        plane_floor_cpu_seconds: None,
        cpu_seconds: settled.cpu_seconds,
        timed_cpu_seconds: timed.cpu_seconds,
        timed_wakeups: timed.wakeups,
        wakeups: settled.wakeups,
        pod_events: timed.pod_events,
        write_body_bytes: bodies.map(|b| b.bytes),
        write_bodies: bodies.map(|b| b.writes),
        idle_cpu_seconds: (settled.cpu_seconds - at_done.cpu_seconds).max(0.0),
        settle_seconds: ctx.sizes.settle.as_secs_f64(),
        peak_rss_bytes: settled.peak_rss_bytes.max(sampled_peak),
        steady_rss_bytes: settled.rss_bytes,
        steady_anon_rss_bytes: settled.anon_rss_bytes,
        requests_total: 0,
        requests_writes: 0,
        requests: BTreeMap::new(),
        ready_pods: timed.ready_pods,
    })
}

/// How one process of a run starts: a kubeconfig impersonating `user` and a log, both named `name` in the
/// work folder, and the client limits.
pub(crate) fn launch(
    ctx: &Context,
    name: &str,
    user: &str,
    limits: ClientLimits,
) -> Result<Launch, BenchError> {
    let kubeconfig = ctx.work_dir.join(format!("{name}.kubeconfig"));
    side::write_impersonating_kubeconfig(&ctx.plane, user, &kubeconfig)?;
    Ok(Launch {
        mini_kcm_binary: ctx.mini_kcm_binary.clone(),
        other_mini_kcm_binary: ctx.other_mini_kcm_binary.clone(),
        kubeconfig,
        limits,
        log: ctx.work_dir.join(format!("{name}.log")),
    })
}

/// Adds the audit-log counts of the run's user.
pub(crate) fn fill_requests(run: &mut RunResult, audit: &AuditTail) {
    run.requests = audit.requests_of(&run.user);
    let (total, writes) = totals(&run.requests);
    run.requests_total = total;
    run.requests_writes = writes;
}

/// A failed run's error, with the controller's log tail if it has exited.
pub(crate) fn explain(
    error: BenchError,
    process: &mut ManagedProcess,
    launch: &Launch,
) -> BenchError {
    match process.check_running() {
        Err(exited) => BenchError::Plane(exited),
        Ok(()) => BenchError::Run {
            log: launch.log.clone(),
            source: Box::new(error),
        },
    }
}

pub(crate) async fn create_namespace(
    client: &Client,
    name: &str,
    timeout: Duration,
) -> Result<(), BenchError> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let namespace: Namespace = typed(json!({ "metadata": { "name": name } }))?;
    namespaces
        .create(&PostParams::default(), &namespace)
        .await
        .map_err(|e| BenchError::kube(format!("creating namespace {name}"), e))?;
    // Pods are rejected until the plane's service-account controller has made `default`.
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), name);
    wait_all_done(
        accounts,
        None,
        1,
        |_| true,
        timeout,
        "the default ServiceAccount",
    )
    .await
}

/// Deletes a run's namespace and waits until it is gone (so the next run's informers do not cache
/// leftovers).
pub(crate) async fn delete_namespace(
    client: &Client,
    name: &str,
    timeout: Duration,
) -> Result<(), BenchError> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .delete(name, &DeleteParams::default())
        .await
        .map_err(|e| BenchError::kube(format!("deleting namespace {name}"), e))?;
    wait_namespace_gone(client.clone(), name, timeout).await
}

/// A Deployment with no pods (deployment and replicaset controllers) and a DaemonSet on no node
/// (daemonset controller): each controller has synced its caches once it has written their status.
async fn wait_for_controllers(ctx: &Context, namespace: &str) -> Result<(), BenchError> {
    let probe = Some(format!("{ROLE_LABEL}={ROLE_PROBE}"));
    create(ctx, namespace, deployment("probe", ROLE_PROBE, 0, 1)).await?;
    create(
        ctx,
        namespace,
        daemon_set(
            "probe",
            ROLE_PROBE,
            Some(BTreeMap::from([("bench.minikcm.dev/none", "true")])),
        ),
    )
    .await?;
    let timeout = ctx.sizes.timeout;
    let observed = |generation: Option<i64>, observed: Option<i64>| {
        observed.is_some_and(|o| o >= generation.unwrap_or(1))
    };
    let (deployments, replica_sets, daemon_sets) = apis(ctx, namespace);
    wait_all_done(
        deployments,
        probe.clone(),
        1,
        |d: &Deployment| {
            observed(
                d.metadata.generation,
                d.status.as_ref().and_then(|s| s.observed_generation),
            )
        },
        timeout,
        "the deployment controller to start",
    )
    .await?;
    wait_all_done(
        replica_sets,
        probe.clone(),
        1,
        |r: &ReplicaSet| {
            observed(
                r.metadata.generation,
                r.status.as_ref().and_then(|s| s.observed_generation),
            )
        },
        timeout,
        "the replicaset controller to start",
    )
    .await?;
    wait_all_done(
        daemon_sets,
        probe,
        1,
        |d: &DaemonSet| {
            observed(
                d.metadata.generation,
                d.status.as_ref().and_then(|s| s.observed_generation),
            )
        },
        timeout,
        "the daemonset controller to start",
    )
    .await
}

fn apis(ctx: &Context, namespace: &str) -> (Api<Deployment>, Api<ReplicaSet>, Api<DaemonSet>) {
    (
        Api::namespaced(ctx.client.clone(), namespace),
        Api::namespaced(ctx.client.clone(), namespace),
        Api::namespaced(ctx.client.clone(), namespace),
    )
}

/// The timed part of a run, from just before the create or update until done, and what the side's
/// process spent in it.
pub(crate) struct TimedPart {
    pub seconds: f64,
    pub ready_pods: Vec<(f64, f64)>,
    /// Events of the scenario's pods in it (what each controller's pod watch delivered).
    pub pod_events: u64,
    pub cpu_seconds: f64,
    pub wakeups: u64,
}

/// The clock of the timed part: the ready-pods watch, and the process's usage at the start.
struct Timing {
    origin: Instant,
    ready: ReadySeries,
    pid: u32,
    at_start: Option<Usage>,
}

impl Timing {
    async fn start(ctx: &Context, namespace: &str, rev: u32, pid: u32) -> Result<Self, BenchError> {
        let ready =
            ReadySeries::start(ctx.client.clone(), namespace, rev, ctx.sizes.timeout).await?;
        let at_start = usage::read(pid);
        Ok(Timing {
            origin: Instant::now(),
            ready,
            pid,
            at_start,
        })
    }

    fn finish(self) -> TimedPart {
        let seconds = self.origin.elapsed().as_secs_f64();
        let at_done = usage::read(self.pid);
        let pod_events = self.ready.pod_events();
        let (cpu_seconds, wakeups) = match (self.at_start, at_done) {
            (Some(start), Some(done)) => (
                (done.cpu_seconds - start.cpu_seconds).max(0.0),
                done.wakeups.saturating_sub(start.wakeups),
            ),
            _ => (0.0, 0),
        };
        TimedPart {
            seconds,
            ready_pods: self.ready.finish(self.origin),
            pod_events,
            cpu_seconds,
            wakeups,
        }
    }
}

/// The scenario itself, timed (see [`TimedPart`]); `pid` is the side's controller process.
async fn drive(
    ctx: &Context,
    scenario: Scenario,
    namespace: &str,
    pid: u32,
) -> Result<TimedPart, BenchError> {
    let sizes = &ctx.sizes;
    let timeout = sizes.timeout;
    let workloads = Some(format!("{ROLE_LABEL}={ROLE_WORKLOAD}"));
    let (deployments, replica_sets, daemon_sets) = apis(ctx, namespace);
    let clock = |rev: u32| Timing::start(ctx, namespace, rev, pid);
    let deployments_done = |count: u32| {
        wait_all_done(
            deployments.clone(),
            workloads.clone(),
            count as usize,
            deployment_done,
            timeout,
            "the Deployments to complete",
        )
    };
    let names = |prefix: &str, count: u32| -> Vec<String> {
        (1..=count).map(|i| format!("{prefix}-{i}")).collect()
    };
    match scenario {
        Scenario::ScaleUp => {
            let timing = clock(1).await?;
            create(
                ctx,
                namespace,
                deployment("web", ROLE_WORKLOAD, sizes.pods, 1),
            )
            .await?;
            deployments_done(1).await?;
            Ok(timing.finish())
        }
        Scenario::RollingUpdate => {
            create(
                ctx,
                namespace,
                deployment("web", ROLE_WORKLOAD, sizes.pods, 1),
            )
            .await?;
            deployments_done(1).await?;
            let timing = clock(2).await?;
            patch(&deployments, &["web".to_string()], new_revision_patch(2)).await?;
            deployments_done(1).await?;
            Ok(timing.finish())
        }
        Scenario::Daemonset => {
            let timing = clock(1).await?;
            create(ctx, namespace, daemon_set("agents", ROLE_WORKLOAD, None)).await?;
            let nodes = sizes.nodes;
            wait_all_done(
                daemon_sets,
                workloads,
                1,
                move |d: &DaemonSet| daemon_set_done(d, nodes),
                timeout,
                "the DaemonSet to be available on every node",
            )
            .await?;
            Ok(timing.finish())
        }
        Scenario::Steady => {
            let timing = clock(1).await?;
            let objects = names("rs", sizes.steady_replica_sets)
                .into_iter()
                .map(|name| replica_set(&name, sizes.steady_pods_per_replica_set));
            create_all(ctx, namespace, objects).await?;
            wait_all_done(
                replica_sets,
                workloads,
                sizes.steady_replica_sets as usize,
                replica_set_done,
                timeout,
                "the ReplicaSets to be ready",
            )
            .await?;
            Ok(timing.finish())
        }
        Scenario::ConcurrentRollouts => {
            let apps = names("app", sizes.rollouts);
            let objects = apps
                .iter()
                .map(|name| deployment(name, ROLE_WORKLOAD, sizes.pods_per_rollout, 1));
            create_all(ctx, namespace, objects).await?;
            deployments_done(sizes.rollouts).await?;
            let timing = clock(2).await?;
            patch(&deployments, &apps, new_revision_patch(2)).await?;
            deployments_done(sizes.rollouts).await?;
            Ok(timing.finish())
        }
        Scenario::FreshUnderLoad | Scenario::Failover | Scenario::Scale => Err(BenchError::io(
            scenario.name(),
            std::io::Error::other("runs through a module of its own, not as one side's scenario"),
        )),
    }
}

/// Complete as `kubectl rollout status` means it, and every replica available.
pub(crate) fn deployment_done(d: &Deployment) -> bool {
    let want = d.spec.replicas.unwrap_or(1);
    let Some(status) = &d.status else {
        return false;
    };
    status.observed_generation >= d.metadata.generation
        && status.replicas.unwrap_or(0) == want
        && status.updated_replicas.unwrap_or(0) == want
        && status.ready_replicas.unwrap_or(0) == want
        && status.available_replicas.unwrap_or(0) == want
}

pub(crate) fn replica_set_done(r: &ReplicaSet) -> bool {
    let want = r.spec.replicas.unwrap_or(1);
    let Some(status) = &r.status else {
        return false;
    };
    status.observed_generation >= r.metadata.generation
        && status.replicas == want
        && status.ready_replicas.unwrap_or(0) == want
        && status.available_replicas.unwrap_or(0) == want
}

/// Scheduled on all `nodes`, every pod updated and available.
pub(crate) fn daemon_set_done(d: &DaemonSet, nodes: u32) -> bool {
    let Some(status) = &d.status else {
        return false;
    };
    let desired = status.desired_number_scheduled;
    status.observed_generation >= d.metadata.generation
        && i64::from(desired) == i64::from(nodes)
        && status.updated_number_scheduled.unwrap_or(0) == desired
        && status.number_available.unwrap_or(0) == desired
        && status.number_ready == desired
}

pub(crate) fn typed<K: DeserializeOwned>(value: Value) -> Result<K, BenchError> {
    serde_json::from_value(value)
        .map_err(|e| BenchError::io("building an object", std::io::Error::other(e)))
}

/// Creates one apps/v1 object given as JSON.
async fn create(ctx: &Context, namespace: &str, object: Value) -> Result<(), BenchError> {
    let kind = object["kind"].as_str().unwrap_or_default().to_string();
    let (deployments, replica_sets, daemon_sets) = apis(ctx, namespace);
    match kind.as_str() {
        "Deployment" => create_typed(&deployments, object).await,
        "ReplicaSet" => create_typed(&replica_sets, object).await,
        _ => create_typed(&daemon_sets, object).await,
    }
}

async fn create_typed<K>(api: &Api<K>, object: Value) -> Result<(), BenchError>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug,
{
    let object: K = typed(object)?;
    api.create(&PostParams::default(), &object)
        .await
        .map_err(|e| BenchError::kube("creating a workload", e))?;
    Ok(())
}

pub(crate) async fn create_all(
    ctx: &Context,
    namespace: &str,
    objects: impl Iterator<Item = Value>,
) -> Result<(), BenchError> {
    futures::stream::iter(objects.map(Ok))
        .try_for_each_concurrent(CLIENT_CONCURRENCY, |object| create(ctx, namespace, object))
        .await
}

async fn patch(api: &Api<Deployment>, names: &[String], body: Value) -> Result<(), BenchError> {
    futures::stream::iter(names)
        .map(|name| {
            let body = body.clone();
            async move {
                api.patch(name, &PatchParams::default(), &Patch::Merge(&body))
                    .await
                    .map(|_| ())
                    .map_err(|e| BenchError::kube(format!("patching Deployment {name}"), e))
            }
        })
        .buffer_unordered(CLIENT_CONCURRENCY)
        .try_collect::<Vec<()>>()
        .await
        .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deployment_is_done_when_its_status_matches_the_current_spec() {
        let mut d: Deployment = typed(deployment("web", ROLE_WORKLOAD, 3, 1)).unwrap();
        d.metadata.generation = Some(2);
        assert!(!deployment_done(&d));
        d.status = Some(
            typed(json!({
                "observedGeneration": 2, "replicas": 3, "updatedReplicas": 3,
                "readyReplicas": 3, "availableReplicas": 3
            }))
            .unwrap(),
        );
        assert!(deployment_done(&d));
        // Old pods still around, or the new generation not yet seen: not done.
        d.status.as_mut().unwrap().replicas = Some(4);
        assert!(!deployment_done(&d));
        d.status.as_mut().unwrap().replicas = Some(3);
        d.metadata.generation = Some(3);
        assert!(!deployment_done(&d));
    }

    #[test]
    fn a_daemon_set_is_done_on_every_node() {
        let mut d: DaemonSet = typed(daemon_set("agents", ROLE_WORKLOAD, None)).unwrap();
        d.metadata.generation = Some(1);
        d.status = Some(typed(json!({
            "observedGeneration": 1, "desiredNumberScheduled": 5, "currentNumberScheduled": 5,
            "numberMisscheduled": 0, "updatedNumberScheduled": 5, "numberAvailable": 5, "numberReady": 5
        })).unwrap());
        assert!(daemon_set_done(&d, 5));
        assert!(!daemon_set_done(&d, 6));
        d.status.as_mut().unwrap().number_available = Some(4);
        assert!(!daemon_set_done(&d, 5));
    }

    #[test]
    fn run_users_carry_the_bench_prefix() {
        let user = run_user(Scenario::Steady, Side::Upstream, 2);
        assert_eq!(user, "minikcm-bench:steady:upstream:2");
    }
}
