//! `--scenarios fresh-under-load`: how long a user's change waits behind the initial flood of a start.
//!
//! When a controller-manager starts (or fails over, or relists), every object is queued at once. If the
//! statuses went stale while no controller ran, every one of those initial syncs writes, at the client's
//! QPS: 1 000 Deployments at 20 writes per second are 50 s of queue. A user's scale made at that moment
//! waits behind all of it in a FIFO queue (upstream's client-go queue); mini-kcm's work queue hands
//! fresh changes out before the initial list's keys (docs/work-queue.md, "Priorities and wake reasons").
//!
//! One population serves every run: Deployments created once by mini-kcm, which then stops. Each run
//! makes every Deployment's status stale (ready and available replicas written as 0, as if their pods'
//! readiness had changed while no controller ran), starts one side, and as soon as the side has written
//! its first restored status (its caches are synced and the flood has begun), scales one Deployment that
//! no run has touched by one. Measured per run: from the start to that first write, from the scale until
//! the scaled Deployment is complete with its new size (the fresh change), and from the start until
//! every Deployment is complete again (the flood's end). Sides: mini-kcm, mini-kcm with
//! `--work-queue-priorities=false`, and the baseline (upstream).

use std::collections::HashSet;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Patch, PatchParams};
use kube::runtime::watcher::{self, Event};
use kube::{Api, ResourceExt};
use serde_json::json;

use crate::error::BenchError;
use crate::report::{FreshReport, FreshRun};
use crate::run::{
    Context, create_all, create_namespace, delete_namespace, deployment_done, launch, run_user,
};
use crate::scenario::{ROLE_LABEL, ROLE_WORKLOAD, Scenario, deployment};
use crate::side::{self, ClientLimits, Side};
use crate::stats::median;

/// Concurrent requests of the bench's own client while it makes statuses stale.
const STALE_CONCURRENCY: usize = 32;

/// The sides this scenario compares: mini-kcm with and without priorities, and the baseline.
pub(crate) fn sides(baseline: Side) -> [Side; 3] {
    [Side::MiniKcm, Side::MiniKcmNoPriority, baseline]
}

/// Populates once, then runs every side `rounds` times.
pub(crate) async fn run(
    ctx: &Context,
    rounds: u32,
    baseline: Side,
    limits: ClientLimits,
) -> Result<FreshReport, BenchError> {
    let sizes = &ctx.sizes;
    let (count, pods) = (sizes.fresh_deployments, sizes.fresh_pods_per_deployment);
    let namespace = "bench-fresh-under-load".to_string();
    eprintln!(
        "bench: fresh-under-load: populating {count} Deployments of {pods} pods (mini-kcm, unthrottled) ..."
    );
    let populated = Instant::now();
    create_namespace(&ctx.client, &namespace, sizes.timeout).await?;
    let process = start(ctx, Side::MiniKcm, &namespace, 0, ClientLimits::UNTHROTTLED)?;
    let objects = (1..=count).map(|i| deployment(&format!("app-{i}"), ROLE_WORKLOAD, pods, 1));
    create_all(ctx, &namespace, objects).await?;
    let api: Api<Deployment> = Api::namespaced(ctx.client.clone(), &namespace);
    watch_until_all_done(&api, count as usize, None, sizes.timeout).await?;
    process.stop(Duration::from_secs(10)).await;
    eprintln!(
        "bench: fresh-under-load: populated in {:.1}s",
        populated.elapsed().as_secs_f64()
    );

    let mut runs = Vec::new();
    let mut next = 0u32;
    for round in 1..=rounds {
        for side in sides(baseline) {
            next += 1;
            // Each run scales a Deployment no earlier run touched, so every run starts alike.
            let scaled = format!("app-{}", next.min(count));
            make_stale(&api).await?;
            eprintln!(
                "bench: fresh-under-load round {round}/{rounds}: {} ...",
                side.name()
            );
            let run = one_run(ctx, &api, &namespace, side, round, &scaled, limits).await?;
            eprintln!(
                "bench:   first write {:.2}s, fresh change {:.2}s, every Deployment done {:.2}s",
                run.first_write_seconds, run.fresh_change_seconds, run.flood_done_seconds
            );
            runs.push(run);
        }
    }
    delete_namespace(&ctx.client, &namespace, sizes.timeout).await?;
    Ok(FreshReport {
        deployments: count,
        pods_per_deployment: pods,
        limits,
        runs,
    })
}

fn start(
    ctx: &Context,
    side: Side,
    namespace: &str,
    round: u32,
    limits: ClientLimits,
) -> Result<mini_kcm_local_plane::ManagedProcess, BenchError> {
    let name = format!("{namespace}-{}-r{round}", side.name());
    let user = run_user(Scenario::FreshUnderLoad, side, round);
    side::start(side, &ctx.plane, &launch(ctx, &name, &user, limits)?)
}

/// Writes 0 ready and available replicas into every Deployment's status: what a controller finds after
/// its pods' readiness changed while none ran, and must write back.
async fn make_stale(api: &Api<Deployment>) -> Result<(), BenchError> {
    let listed = api
        .list(&Default::default())
        .await
        .map_err(|e| BenchError::kube("listing the Deployments", e))?;
    let stale = json!({ "status": { "readyReplicas": 0, "availableReplicas": 0 } });
    futures::stream::iter(listed.items.iter().map(Ok))
        .try_for_each_concurrent(STALE_CONCURRENCY, |d| {
            let stale = stale.clone();
            async move {
                api.patch_status(&d.name_any(), &PatchParams::default(), &Patch::Merge(stale))
                    .await
                    .map(|_| ())
                    .map_err(|e| BenchError::kube("making a status stale", e))
            }
        })
        .await
}

async fn one_run(
    ctx: &Context,
    api: &Api<Deployment>,
    namespace: &str,
    side: Side,
    round: u32,
    scaled: &str,
    limits: ClientLimits,
) -> Result<FreshRun, BenchError> {
    let started = Instant::now();
    let process = start(ctx, side, namespace, round, limits)?;
    let count = ctx.sizes.fresh_deployments as usize;
    let new_size = i32::try_from(ctx.sizes.fresh_pods_per_deployment)
        .unwrap_or(i32::MAX)
        .saturating_add(1);
    let target = Target {
        api: api.clone(),
        name: scaled.to_string(),
        replicas: new_size,
    };
    let result = watch_until_all_done(api, count, Some(target), ctx.sizes.timeout).await;
    process.stop(Duration::from_secs(10)).await;
    let times = result?;
    let (Some(first), Some(fresh)) = (times.first_done, times.target_done) else {
        return Err(BenchError::io(
            "fresh-under-load",
            std::io::Error::other("the run ended without its first write or its fresh change"),
        ));
    };
    Ok(FreshRun {
        side,
        round,
        scaled: scaled.to_string(),
        first_write_seconds: (first - started).as_secs_f64(),
        fresh_change_seconds: fresh.as_secs_f64(),
        flood_done_seconds: (times.all_done - started).as_secs_f64(),
    })
}

/// The Deployment to scale at the first restored status, and its new size.
struct Target {
    api: Api<Deployment>,
    name: String,
    replicas: i32,
}

struct Times {
    first_done: Option<Instant>,
    /// From the scale until the target was complete with its new size.
    target_done: Option<Duration>,
    all_done: Instant,
}

/// Watches the Deployments until `count` of them are complete (the target with its new size), scaling
/// the target when the first one completes.
async fn watch_until_all_done(
    api: &Api<Deployment>,
    count: usize,
    mut target: Option<Target>,
    timeout: Duration,
) -> Result<Times, BenchError> {
    let config = watcher::Config::default().labels(&format!("{ROLE_LABEL}={ROLE_WORKLOAD}"));
    let mut stream = std::pin::pin!(watcher::watcher(api.clone(), config));
    let mut done: HashSet<String> = HashSet::new();
    let mut first_done = None;
    let mut scaled_at: Option<Instant> = None;
    let mut target_done = None;
    let wait = async {
        while let Some(event) = stream.next().await {
            let object = match event {
                Ok(Event::Apply(object) | Event::InitApply(object)) => object,
                Ok(_) => continue,
                Err(e) => {
                    eprintln!("bench: fresh-under-load: watch error (retrying): {e}");
                    continue;
                }
            };
            let name = object.name_any();
            let is_target = target.as_ref().is_some_and(|t| t.name == name);
            let complete = deployment_done(&object)
                && (!is_target
                    || scaled_at.is_some()
                        && object.spec.replicas == target.as_ref().map(|t| t.replicas));
            if !complete {
                done.remove(&name);
                continue;
            }
            done.insert(name);
            if first_done.is_none() {
                first_done = Some(Instant::now());
                if let Some(t) = &target {
                    let scale = json!({ "spec": { "replicas": t.replicas } });
                    t.api
                        .patch(&t.name, &PatchParams::default(), &Patch::Merge(scale))
                        .await
                        .map_err(|e| {
                            BenchError::kube("scaling the fresh change's Deployment", e)
                        })?;
                    scaled_at = Some(Instant::now());
                }
            }
            if is_target && let Some(at) = scaled_at {
                target_done.get_or_insert(at.elapsed());
            }
            if done.len() >= count && (target.is_none() || target_done.is_some()) {
                return Ok(());
            }
        }
        Ok(())
    };
    match tokio::time::timeout(timeout, wait).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(e),
        Err(_) => {
            return Err(BenchError::Timeout {
                what: format!("{count} Deployments to be complete ({} so far)", done.len()),
                waited: timeout,
            });
        }
    }
    target.take();
    Ok(Times {
        first_done,
        target_done,
        all_done: Instant::now(),
    })
}

/// The table: per side, medians and the worst of the rounds.
pub(crate) fn table(report: &FreshReport) -> String {
    let mut out = format!(
        "\nfresh-under-load: {} Deployments of {} pods with stale statuses at the start ({}); one scaled at the first write\n",
        report.deployments,
        report.pods_per_deployment,
        report.limits.describe()
    );
    out.push_str(&format!(
        "{:<28} {:>16} {:>24} {:>20}\n",
        "side", "first write (s)", "fresh change p50/max (s)", "all done p50 (s)"
    ));
    let mut seen: Vec<Side> = Vec::new();
    for run in &report.runs {
        if !seen.contains(&run.side) {
            seen.push(run.side);
        }
    }
    for side in seen {
        let of = |f: fn(&FreshRun) -> f64| -> Vec<f64> {
            report
                .runs
                .iter()
                .filter(|r| r.side == side)
                .map(f)
                .collect()
        };
        let fresh = of(|r| r.fresh_change_seconds);
        let worst = fresh.iter().copied().fold(f64::NAN, f64::max);
        let show = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}"));
        out.push_str(&format!(
            "{:<28} {:>16} {:>24} {:>20}\n",
            side.name(),
            show(median(&of(|r| r.first_write_seconds))),
            format!("{} / {}", show(median(&fresh)), show(Some(worst))),
            show(median(&of(|r| r.flood_done_seconds))),
        ));
    }
    out
}
