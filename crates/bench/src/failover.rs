//! `--scenarios failover`: what a warm standby is worth when the leader crashes.
//!
//! kube-controller-manager starts its informers only after it wins the Lease, so a new leader lists
//! every object before it can act (kubernetes#141221 asks for warm standby informers). mini-kcm's
//! standby keeps its caches synced and starts no worker until it leads.
//!
//! Per side and round, in a namespace of its own: replica A starts with leader election on (its own
//! Lease in that namespace) and, once it leads, creates the population (Deployments of some pods, so
//! both replicas cache them); replica B starts and is waited for until it is ready to take over (mini-kcm:
//! its caches are synced; kube-controller-manager: it is trying to acquire the Lease, which is all its
//! standby does). Then A is killed with SIGKILL and one Deployment is scaled by one at once. Measured
//! from the kill: when the Lease could first be taken (the last renewal plus its duration, which no
//! controller can beat), when B holds it, B's first write for the change (the ReplicaSet scaled), and
//! the change fully reconciled (the Deployment complete with its new size). Both sides run unthrottled
//! (the question is the hand-over, not the client's QPS) with upstream's Lease timing (15 s, 10 s, 2 s).

use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube::api::{Patch, PatchParams};
use mini_kcm_local_plane::ManagedProcess;
use serde_json::json;

use crate::error::BenchError;
use crate::report::{FailoverReport, FailoverRun};
use crate::run::{
    Context, create_all, create_namespace, delete_namespace, deployment_done, launch, run_user,
};
use crate::scenario::{ROLE_WORKLOAD, Scenario, deployment};
use crate::side::{self, ClientLimits, Side};
use crate::stats::median;

/// How often the Lease, the log files and the objects are polled while waiting.
const POLL: Duration = Duration::from_millis(50);

/// Every side, `rounds` times.
pub(crate) async fn run(
    ctx: &Context,
    rounds: u32,
    baseline: Side,
) -> Result<FailoverReport, BenchError> {
    let mut runs = Vec::new();
    for round in 1..=rounds {
        for side in [Side::MiniKcm, baseline] {
            eprintln!(
                "bench: failover round {round}/{rounds}: {} ...",
                side.name()
            );
            let run = one_run(ctx, side, round).await?;
            eprintln!(
                "bench:   from the kill: Lease free {:.2}s, taken {:.2}s, first write {:.2}s, reconciled {:.2}s",
                run.lease_expired_seconds,
                run.lease_taken_seconds,
                run.first_write_seconds,
                run.reconciled_seconds
            );
            runs.push(run);
        }
    }
    Ok(FailoverReport {
        deployments: ctx.sizes.failover_deployments,
        pods_per_deployment: ctx.sizes.failover_pods_per_deployment,
        runs,
    })
}

/// One replica of `side`, leader-elected on the Lease `lease` in `namespace`.
fn start_replica(
    ctx: &Context,
    side: Side,
    round: u32,
    namespace: &str,
    replica: &str,
) -> Result<(ManagedProcess, std::path::PathBuf), BenchError> {
    let name = format!("{namespace}-{replica}");
    let user = run_user(Scenario::Failover, side, round);
    let launch = launch(ctx, &name, &user, ClientLimits::UNTHROTTLED)?;
    let process = side::start_leader_elected(side, &ctx.plane, &launch, namespace, namespace)?;
    Ok((process, launch.log))
}

async fn one_run(ctx: &Context, side: Side, round: u32) -> Result<FailoverRun, BenchError> {
    let sizes = &ctx.sizes;
    let timeout = sizes.timeout;
    let namespace = format!("bench-failover-{}-r{round}", side.name());
    create_namespace(&ctx.client, &namespace, timeout).await?;
    let leases: Api<Lease> = Api::namespaced(ctx.client.clone(), &namespace);
    let deployments: Api<Deployment> = Api::namespaced(ctx.client.clone(), &namespace);
    let replica_sets: Api<ReplicaSet> = Api::namespaced(ctx.client.clone(), &namespace);

    let (leader, _) = start_replica(ctx, side, round, &namespace, "a")?;
    let (leases_ref, lease_name) = (&leases, namespace.as_str());
    let first_holder = wait_for(timeout, "replica a to lead", move || async move {
        holder(leases_ref, lease_name).await
    })
    .await?;
    let (count, pods) = (
        sizes.failover_deployments,
        sizes.failover_pods_per_deployment,
    );
    let objects = (1..=count).map(|i| deployment(&format!("app-{i}"), ROLE_WORKLOAD, pods, 1));
    create_all(ctx, &namespace, objects).await?;
    let deployments_ref = &deployments;
    wait_for(
        timeout,
        "the population to be complete",
        move || async move {
            let listed = deployments_ref
                .list(&Default::default())
                .await
                .map_err(|e| BenchError::kube("listing the Deployments", e))?;
            let done = listed.items.iter().filter(|d| deployment_done(d)).count();
            Ok((done >= count as usize).then_some(()))
        },
    )
    .await?;

    let (standby, standby_log) = start_replica(ctx, side, round, &namespace, "b")?;
    let ready_line = match side {
        Side::Upstream => "Attempting to acquire leader lease",
        _ => "caches synced",
    };
    let standby_log_ref = standby_log.as_path();
    wait_for(timeout, "replica b to stand by", move || async move {
        Ok(log_contains(standby_log_ref, ready_line).then_some(()))
    })
    .await?;

    // The crash, and the user's change at once.
    let lease = leases
        .get(&namespace)
        .await
        .map_err(|e| BenchError::kube("reading the Lease", e))?;
    let lease_free_at = lease_expiry(&lease);
    let killed = Instant::now();
    let killed_wall = SystemTime::now();
    leader.kill();
    let target = "app-1";
    let new_size = i32::try_from(pods).unwrap_or(i32::MAX).saturating_add(1);
    deployments
        .patch(
            target,
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "replicas": new_size } })),
        )
        .await
        .map_err(|e| BenchError::kube("scaling the Deployment", e))?;

    let mut taken = None;
    let mut first_write = None;
    let deadline = killed + timeout;
    let reconciled = loop {
        if taken.is_none()
            && let Some(holder) = holder(&leases, &namespace).await?
            && holder != first_holder
        {
            taken = Some(killed.elapsed());
        }
        if first_write.is_none() {
            let rss = replica_sets
                .list(&Default::default())
                .await
                .map_err(|e| BenchError::kube("listing the ReplicaSets", e))?;
            if rss.items.iter().any(|rs| {
                rs.metadata
                    .name
                    .as_deref()
                    .is_some_and(|n| n.starts_with(target))
                    && rs.spec.replicas == Some(new_size)
            }) {
                first_write = Some(killed.elapsed());
            }
        }
        let d = deployments
            .get(target)
            .await
            .map_err(|e| BenchError::kube("reading the Deployment", e))?;
        if deployment_done(&d) && d.spec.replicas == Some(new_size) {
            break killed.elapsed();
        }
        if Instant::now() >= deadline {
            return Err(BenchError::Timeout {
                what: "the change to be reconciled after the kill".into(),
                waited: timeout,
            });
        }
        tokio::time::sleep(POLL).await;
    };
    standby.stop(Duration::from_secs(10)).await;
    delete_namespace(&ctx.client, &namespace, timeout).await?;

    let lease_expired = lease_free_at
        .and_then(|at| at.duration_since(killed_wall).ok())
        .unwrap_or_default();
    let seconds = |d: Option<Duration>| d.unwrap_or(reconciled).as_secs_f64();
    Ok(FailoverRun {
        side,
        round,
        lease_expired_seconds: lease_expired.as_secs_f64(),
        lease_taken_seconds: seconds(taken),
        first_write_seconds: seconds(first_write),
        reconciled_seconds: reconciled.as_secs_f64(),
    })
}

/// The Lease's holder (the Lease is named after the namespace), if it has one.
async fn holder(leases: &Api<Lease>, name: &str) -> Result<Option<String>, BenchError> {
    let lease = leases
        .get_opt(name)
        .await
        .map_err(|e| BenchError::kube("reading the Lease", e))?;
    Ok(lease
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
        .filter(|h| !h.is_empty()))
}

/// The last renewal plus the Lease's duration, as wall-clock time.
fn lease_expiry(lease: &Lease) -> Option<SystemTime> {
    let spec = lease.spec.as_ref()?;
    let renewed = spec.renew_time.as_ref()?.0;
    let duration = u64::try_from(spec.lease_duration_seconds?).ok()?;
    let renewed = SystemTime::UNIX_EPOCH
        + Duration::from_micros(u64::try_from(renewed.as_microsecond()).ok()?);
    Some(renewed + Duration::from_secs(duration))
}

fn log_contains(log: &Path, needle: &str) -> bool {
    std::fs::read_to_string(log).is_ok_and(|text| text.contains(needle))
}

/// Polls `check` every [`POLL`] until it gives a value, or fails after `timeout`.
async fn wait_for<T, F, Fut>(timeout: Duration, what: &str, mut check: F) -> Result<T, BenchError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Option<T>, BenchError>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check().await? {
            return Ok(value);
        }
        if Instant::now() >= deadline {
            return Err(BenchError::Timeout {
                what: what.to_string(),
                waited: timeout,
            });
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The table: per side, medians of the rounds, and the controller's share above the Lease.
pub(crate) fn table(report: &FailoverReport) -> String {
    let mut out = format!(
        "\nfailover: SIGKILL of the leader of two replicas caching {} Deployments of {} pods, one scaled at once; seconds from the kill (medians)\n",
        report.deployments, report.pods_per_deployment
    );
    out.push_str(&format!(
        "{:<12} {:>12} {:>12} {:>14} {:>12} {:>24} {:>25}\n",
        "side",
        "Lease free",
        "Lease taken",
        "first write",
        "reconciled",
        "reconciled − Lease free",
        "reconciled − Lease taken"
    ));
    for side in [
        Side::MiniKcm,
        Side::Upstream,
        Side::MiniKcmNoDecisionLog,
        Side::OtherMiniKcm,
    ] {
        let runs: Vec<&FailoverRun> = report.runs.iter().filter(|r| r.side == side).collect();
        if runs.is_empty() {
            continue;
        }
        let of =
            |f: fn(&FailoverRun) -> f64| median(&runs.iter().map(|r| f(r)).collect::<Vec<_>>());
        let show = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}"));
        out.push_str(&format!(
            "{:<12} {:>12} {:>12} {:>14} {:>12} {:>24} {:>25}\n",
            side.name(),
            show(of(|r| r.lease_expired_seconds)),
            show(of(|r| r.lease_taken_seconds)),
            show(of(|r| r.first_write_seconds)),
            show(of(|r| r.reconciled_seconds)),
            show(of(|r| r.reconciled_seconds - r.lease_expired_seconds)),
            show(of(|r| r.reconciled_seconds - r.lease_taken_seconds)),
        ));
    }
    out
}
