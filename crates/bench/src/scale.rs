//! `--scenarios scale`: what each side costs as the number of cached pods grows, and where the per-pod
//! cost leads at a large cluster's 150 000 pods.
//!
//! The population is made by the bench itself, once, with no controller running: ReplicaSets of 10 pods,
//! and their pods created directly with the ReplicaSet's labels and a controller reference (as the
//! replicaset controller would have made them), unthrottled; the plane's scheduler binds them and kwok
//! makes them Ready. It is reused by both sides and grown from one size to the next (only the additional
//! ReplicaSets and pods are created), so neither side pays for populating and both cache the same world.
//!
//! Per size, round and side: every ReplicaSet's status is made stale (ready and available written as 0,
//! as if its pods' readiness had changed while no controller ran), so that each side faces the same
//! first work, one status write per ReplicaSet. The side starts cold, as a new leader does; measured are
//! the times from its start until its log says its caches are synced, until its first write (a watch sees
//! the first status restored) and until every status is restored. Then a settle window, after which the
//! steady `VmRSS` and `RssAnon` are read. Then pod events: the bench changes an annotation on up to
//! [`POD_EVENTS`] pods, one update event each, which every side handles as it handles kwok's status
//! updates (its ReplicaSet is synced, nothing is written); their CPU is measured from the first change
//! until the side is idle again, less its idle rate. At the largest size only, a forced relist: the
//! plane's `expire_watches` (the API server stops, etcd is compacted, the API server starts again, every
//! watch gets `410 Gone`), with the peak RSS from just before it until the side has relisted and is idle
//! again, against the steady RSS.
//!
//! Whether a side has seen a run of events is told the same way for both, from outside: after the events
//! (or the relist) the bench deletes one pod and waits until the side has created its replacement. Pod
//! events arrive in order on one watch, so by then the side has received every earlier one.

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant};

use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher::{self, Event};
use kube::{Api, ResourceExt};
use mini_kcm_local_plane::{LocalPlane, ManagedProcess, PlaneInfo, REPLACED_CONTROLLERS};
use serde_json::{Value, json};

use crate::audit::BENCH_USER_PREFIX;
use crate::error::BenchError;
use crate::report::{RelistRun, ScaleFit, ScaleReport, ScaleRun, ScaleSize, side_color};
use crate::run::{
    Context, create_namespace, delete_namespace, explain, launch, replica_set_done, typed,
};
use crate::scenario::{ROLE_LABEL, ROLE_WORKLOAD, pod_template, replica_set};
use crate::side::{self, ClientLimits, Side};
use crate::stats::{linear_fit, median};
use crate::svg::{Series, line_chart};
use crate::usage::{self, Sampler, Usage};
use crate::watch::{is_ready, wait_all_done};

pub(crate) const PODS_PER_REPLICA_SET: u32 = 10;
/// The pods a kwok node of the plane takes (`nodes.rs` of local-plane gives each node this capacity).
const PODS_PER_NODE: u32 = 1000;
/// Pod update events per run (fewer at sizes below it: each pod is changed once).
const POD_EVENTS: u32 = 2000;
/// Where the fitted lines are projected: 5 000 nodes of 30 pods.
pub(crate) const PROJECTED_PODS: u32 = 150_000;
/// Requests of the bench's own client in flight while it populates and changes pods.
const CONCURRENCY: usize = 64;
/// How often the log and the sentinel's replacement are polled.
const POLL: Duration = Duration::from_millis(50);
/// A side is idle again once it has used at most its idle rate plus [`QUIET_SLACK`] CPU seconds over
/// a window this long.
const QUIET_WINDOW: Duration = Duration::from_millis(500);
const QUIET_SLACK: f64 = 0.02;
/// The ReplicaSet whose pod the sentinel deletes.
const SENTINEL_REPLICA_SET: &str = "rs-1";
const NAMESPACE: &str = "bench-scale";
const TOUCH_ANNOTATION: &str = "bench.minikcm.dev/touched";
const MIB: f64 = 1024.0 * 1024.0;

/// The nodes a plane needs to hold `pods` pods, with one node to spare.
pub(crate) fn nodes_for(pods: u32) -> u32 {
    pods.div_ceil(PODS_PER_NODE).saturating_add(1)
}

/// ReplicaSets per requested size, ascending, without repeats.
fn replica_set_counts(pods: &[u32]) -> Vec<u32> {
    let mut counts: Vec<u32> = pods
        .iter()
        .map(|p| p.div_ceil(PODS_PER_REPLICA_SET).max(1))
        .collect();
    counts.sort_unstable();
    counts.dedup();
    counts
}

/// What becomes of the population at the end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cleanup {
    /// Delete it and wait until it is gone: other scenarios follow.
    Wait,
    /// Leave it: the plane stops next (deleting 50 000 pods takes the plane minutes).
    Leave,
}

/// Every size in turn: grow the population to it, then run each side `rounds` times.
pub(crate) async fn run(
    ctx: &Context,
    plane: &mut LocalPlane,
    rounds: u32,
    baseline: Side,
    cleanup: Cleanup,
) -> Result<ScaleReport, BenchError> {
    let timeout = ctx.sizes.timeout;
    let counts = replica_set_counts(&ctx.sizes.scale_pods);
    let largest = counts.last().copied().unwrap_or_default();
    create_namespace(&ctx.client, NAMESPACE, timeout).await?;
    let replica_sets: Api<ReplicaSet> = Api::namespaced(ctx.client.clone(), NAMESPACE);
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), NAMESPACE);
    let mut sizes = Vec::new();
    let mut runs = Vec::new();
    let mut have = 0u32;
    for &count in &counts {
        let total = count.saturating_mul(PODS_PER_REPLICA_SET);
        eprintln!(
            "bench: scale: populating {total} pods ({} more ReplicaSets of {PODS_PER_REPLICA_SET}, pods created by the bench, no controller) ...",
            count.saturating_sub(have)
        );
        let begun = Instant::now();
        populate(&replica_sets, &pods, have, count).await?;
        // The plane binds and readies fewer pods a second as it fills (measured on 2 cores: 60 a second
        // up to 3 000 pods, 20 from 10 000 to 30 000), so the wait grows with the pods added.
        let added = count
            .saturating_sub(have)
            .saturating_mul(PODS_PER_REPLICA_SET);
        let populating = timeout.max(Duration::from_millis(u64::from(added).saturating_mul(100)));
        wait_all_done(
            pods.clone(),
            Some(format!("{ROLE_LABEL}={ROLE_WORKLOAD}")),
            total as usize,
            is_ready,
            populating,
            "the population's pods to be Ready",
        )
        .await?;
        have = count;
        let size = ScaleSize {
            pods: total,
            replica_sets: count,
            populate_seconds: begun.elapsed().as_secs_f64(),
            plane_rss_bytes: plane_rss(plane.info()),
        };
        eprintln!(
            "bench: scale: {total} pods Ready in {:.1}s; plane RSS: {}",
            size.populate_seconds,
            size.plane_rss_bytes
                .iter()
                .map(|(name, bytes)| format!("{name} {:.0} MiB", *bytes as f64 / MIB))
                .collect::<Vec<_>>()
                .join(", ")
        );
        sizes.push(size);
        for round in 1..=rounds {
            for side in [Side::MiniKcm, baseline] {
                eprintln!(
                    "bench: scale {total} pods, round {round}/{rounds}: {} ...",
                    side.name()
                );
                let run = one_run(ctx, plane, side, round, count, count == largest).await?;
                eprintln!(
                    "bench:   caches synced {:.2}s, first write {:.2}s, statuses restored {:.2}s; steady RSS {:.1} MiB ({:.1} anonymous); {:.3} CPU s per 1000 pod events{}",
                    run.caches_synced_seconds,
                    run.first_write_seconds,
                    run.statuses_restored_seconds,
                    run.steady_rss_bytes as f64 / MIB,
                    run.steady_anon_rss_bytes as f64 / MIB,
                    run.cpu_seconds_per_1000_pod_events,
                    run.relist.as_ref().map_or(String::new(), |r| format!(
                        "; relist in {:.1}s, peak {:.1} MiB ({:.2}× steady)",
                        r.seconds,
                        r.peak_rss_bytes as f64 / MIB,
                        r.peak_over_steady
                    ))
                );
                runs.push(run);
            }
        }
    }
    if cleanup == Cleanup::Wait {
        // Later scenarios of this invocation must not cache the population.
        eprintln!("bench: scale: deleting the population ...");
        delete_namespace(&ctx.client, NAMESPACE, timeout).await?;
    }
    let fits = [Side::MiniKcm, baseline]
        .into_iter()
        .filter_map(|side| fit(&runs, side))
        .collect();
    Ok(ScaleReport {
        pods_per_replica_set: PODS_PER_REPLICA_SET,
        nodes: ctx.sizes.nodes,
        limits: ClientLimits::UNTHROTTLED,
        settle_seconds: ctx.sizes.settle.as_secs_f64(),
        sizes,
        runs,
        fits,
    })
}

/// `VmRSS` of every process of the plane.
fn plane_rss(plane: &PlaneInfo) -> BTreeMap<String, u64> {
    plane
        .pids
        .iter()
        .filter_map(|(name, pid)| Some((name.clone(), usage::read(*pid)?.rss_bytes)))
        .collect()
}

/// Creates ReplicaSets `rs-<from+1>` to `rs-<to>` and their pods.
async fn populate(
    replica_sets: &Api<ReplicaSet>,
    pods: &Api<Pod>,
    from: u32,
    to: u32,
) -> Result<(), BenchError> {
    let at_once = CONCURRENCY / PODS_PER_REPLICA_SET as usize;
    futures::stream::iter((from.saturating_add(1)..=to).map(Ok))
        .try_for_each_concurrent(at_once, |i| async move {
            let name = format!("rs-{i}");
            let object: ReplicaSet = typed(replica_set(&name, PODS_PER_REPLICA_SET))?;
            let created = replica_sets
                .create(&PostParams::default(), &object)
                .await
                .map_err(|e| BenchError::kube("creating a ReplicaSet", e))?;
            let uid = created.metadata.uid.clone().ok_or_else(|| {
                BenchError::io(
                    "creating a ReplicaSet",
                    std::io::Error::other("the answer has no uid"),
                )
            })?;
            let creates = (1..=PODS_PER_REPLICA_SET).map(|j| {
                let object = owned_pod(&name, &uid, j);
                async move {
                    let pod: Pod = typed(object)?;
                    pods.create(&PostParams::default(), &pod)
                        .await
                        .map_err(|e| BenchError::kube("creating a pod", e))?;
                    Ok::<_, BenchError>(())
                }
            });
            futures::future::try_join_all(creates).await.map(|_| ())
        })
        .await
}

/// Pod `j` of ReplicaSet `name`: its template, and the controller reference its controller would set.
fn owned_pod(name: &str, uid: &str, j: u32) -> Value {
    let template = pod_template(name, ROLE_WORKLOAD, 1);
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": format!("{name}-{j}"),
            "labels": template["metadata"]["labels"],
            "ownerReferences": [{
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": name,
                "uid": uid,
                "controller": true,
                "blockOwnerDeletion": true,
            }],
        },
        "spec": template["spec"],
    })
}

/// Writes every ReplicaSet's status as a controller finds it after its pods' readiness changed while
/// none ran: counted, observed, but none ready or available.
async fn make_stale(api: &Api<ReplicaSet>) -> Result<(), BenchError> {
    let listed = api
        .list(&Default::default())
        .await
        .map_err(|e| BenchError::kube("listing the ReplicaSets", e))?;
    futures::stream::iter(listed.items.iter().map(Ok))
        .try_for_each_concurrent(CONCURRENCY, |rs| async move {
            let want = rs.spec.replicas.unwrap_or(1);
            let stale = json!({ "status": {
                "replicas": want,
                "fullyLabeledReplicas": want,
                "readyReplicas": 0,
                "availableReplicas": 0,
                "observedGeneration": rs.metadata.generation,
            } });
            api.patch_status(
                &rs.name_any(),
                &PatchParams::default(),
                &Patch::Merge(stale),
            )
            .await
            .map(|_| ())
            .map_err(|e| BenchError::kube("making a status stale", e))
        })
        .await
}

/// The line of a side's log that says all its controllers' caches are synced, once there is one:
/// mini-kcm logs it once; kube-controller-manager logs "Waiting for caches to sync", then "Caches are
/// synced", once per controller (the last of these).
fn caches_synced(side: Side, log: &str) -> Option<&str> {
    match side {
        Side::Upstream => {
            let waiting = log.matches("Waiting for caches to sync").count();
            let synced: Vec<&str> = log
                .lines()
                .filter(|l| l.contains("Caches are synced"))
                .collect();
            (waiting >= REPLACED_CONTROLLERS.len() && synced.len() >= waiting)
                .then(|| synced.last().copied())
                .flatten()
        }
        _ => log.lines().find(|l| l.contains("caches synced")),
    }
}

/// Seconds since midnight of a log line's own timestamp: kube-controller-manager's klog header
/// `I1127 18:37:19.491389` (local time), mini-kcm's `2026-11-27T18:37:17.565301Z` (UTC). The log is
/// polled, so this is more exact than the moment the bench reads the line.
fn time_of_day(side: Side, line: &str) -> Option<f64> {
    let stamp = match side {
        Side::Upstream => line.split_whitespace().nth(1)?,
        _ => line.split_once('T')?.1.split(['Z', ' ']).next()?,
    };
    let mut parts = stamp.split(':');
    let hours: f64 = parts.next()?.parse().ok()?;
    let minutes: f64 = parts.next()?.parse().ok()?;
    let seconds: f64 = parts.next()?.parse().ok()?;
    Some(hours * 3600.0 + minutes * 60.0 + seconds)
}

/// Seconds since midnight now, in the clock of `side`'s log (see [`time_of_day`]).
fn time_of_day_now(side: Side) -> f64 {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64();
    let offset = if side == Side::Upstream {
        local_utc_offset_seconds()
    } else {
        0.0
    };
    (since_epoch + offset).rem_euclid(DAY)
}

const DAY: f64 = 86_400.0;

/// The local time zone's offset from UTC (klog writes local time).
fn local_utc_offset_seconds() -> f64 {
    // SAFETY: `time` and `localtime_r` only write the `tm` given to them.
    unsafe {
        let now = libc::time(std::ptr::null_mut());
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&now, &mut tm).is_null() {
            return 0.0;
        }
        tm.tm_gmtoff as f64
    }
}

/// The statuses being restored, watched from before the side starts so that its first write is seen as
/// it happens.
struct Restored {
    stream: BoxStream<'static, Result<Event<ReplicaSet>, watcher::Error>>,
    done: HashSet<String>,
}

impl Restored {
    async fn listed(api: Api<ReplicaSet>, timeout: Duration) -> Result<Self, BenchError> {
        let config = watcher::Config::default().labels(&format!("{ROLE_LABEL}={ROLE_WORKLOAD}"));
        let mut restored = Restored {
            stream: watcher::watcher(api, config).boxed(),
            done: HashSet::new(),
        };
        let listing = async {
            while let Some(event) = restored.stream.next().await {
                match event {
                    Ok(Event::InitApply(rs)) if replica_set_done(&rs) => {
                        restored.done.insert(rs.name_any());
                    }
                    Ok(Event::InitDone) => return true,
                    _ => {}
                }
            }
            false
        };
        match tokio::time::timeout(timeout, listing).await {
            Ok(true) => Ok(restored),
            _ => Err(BenchError::Timeout {
                what: "the ReplicaSets to be listed".into(),
                waited: timeout,
            }),
        }
    }

    /// Until `count` statuses are restored: (the first restored, the last).
    async fn all(
        mut self,
        count: usize,
        timeout: Duration,
    ) -> Result<(Instant, Instant), BenchError> {
        let mut first = None;
        let wait = async {
            while let Some(event) = self.stream.next().await {
                let rs = match event {
                    Ok(Event::Apply(rs) | Event::InitApply(rs)) => rs,
                    _ => continue,
                };
                if !replica_set_done(&rs) {
                    self.done.remove(&rs.name_any());
                    continue;
                }
                first.get_or_insert_with(Instant::now);
                self.done.insert(rs.name_any());
                if self.done.len() >= count {
                    return true;
                }
            }
            false
        };
        match tokio::time::timeout(timeout, wait).await {
            Ok(true) => Ok((first.unwrap_or_else(Instant::now), Instant::now())),
            _ => Err(BenchError::Timeout {
                what: format!(
                    "{count} ReplicaSet statuses to be restored ({} so far)",
                    self.done.len()
                ),
                waited: timeout,
            }),
        }
    }
}

async fn one_run(
    ctx: &Context,
    plane: &mut LocalPlane,
    side: Side,
    round: u32,
    replica_sets: u32,
    relist: bool,
) -> Result<ScaleRun, BenchError> {
    let pods = replica_sets.saturating_mul(PODS_PER_REPLICA_SET);
    let rs_api: Api<ReplicaSet> = Api::namespaced(ctx.client.clone(), NAMESPACE);
    make_stale(&rs_api).await?;
    let restored = Restored::listed(rs_api, ctx.sizes.timeout).await?;
    let name = format!("{NAMESPACE}-{pods}-{}-r{round}", side.name());
    let user = format!("{BENCH_USER_PREFIX}scale-{pods}:{}:{round}", side.name());
    let launch = launch(ctx, &name, &user, ClientLimits::UNTHROTTLED)?;
    let started = Instant::now();
    let mut process = side::start(side, &ctx.plane, &launch)?;
    let measured = measure(
        ctx,
        &process,
        &launch.log,
        side,
        started,
        restored,
        replica_sets,
    )
    .await;
    let mut run = match measured {
        Ok(run) => run,
        Err(error) => return Err(explain(error, &mut process, &launch)),
    };
    run.round = round;
    run.pods = pods;
    if relist {
        match measure_relist(
            ctx,
            plane,
            &process,
            run.steady_rss_bytes,
            run.idle_cpu_per_second,
        )
        .await
        {
            Ok(relisted) => run.relist = Some(relisted),
            Err(error) => return Err(explain(error, &mut process, &launch)),
        }
    }
    process.stop(Duration::from_secs(10)).await;
    Ok(run)
}

/// Start-up, steady memory and the pod events of one side.
async fn measure(
    ctx: &Context,
    process: &ManagedProcess,
    log: &std::path::Path,
    side: Side,
    started: Instant,
    restored: Restored,
    replica_sets: u32,
) -> Result<ScaleRun, BenchError> {
    let timeout = ctx.sizes.timeout;
    let pid = process.pid();
    let count = replica_sets as usize;
    let started_at_of_day = time_of_day_now(side) - started.elapsed().as_secs_f64();
    let synced = async {
        let deadline = started + timeout;
        loop {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            if let Some(line) = caches_synced(side, &text) {
                let seen = started.elapsed().as_secs_f64();
                // The line's own time, unless it cannot be read or lies outside the run.
                return Ok(time_of_day(side, line)
                    .map(|at| (at - started_at_of_day).rem_euclid(DAY))
                    .filter(|at| *at <= seen)
                    .unwrap_or(seen));
            }
            if Instant::now() >= deadline {
                return Err(BenchError::Timeout {
                    what: format!("{} to log that its caches are synced", side.name()),
                    waited: timeout,
                });
            }
            tokio::time::sleep(POLL).await;
        }
    };
    let (synced, restored) = tokio::join!(synced, restored.all(count, timeout));
    let synced_seconds: f64 = synced?;
    let (first_write, all_restored) = restored?;
    let at_restored = read(pid)?;
    tokio::time::sleep(ctx.sizes.settle).await;
    let settled = read(pid)?;
    let settle = ctx.sizes.settle.as_secs_f64();
    let idle_rate = if settle > 0.0 {
        (settled.cpu_seconds - at_restored.cpu_seconds).max(0.0) / settle
    } else {
        0.0
    };

    // Pod events: one annotation change on each of up to POD_EVENTS pods.
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), NAMESPACE);
    // One page: the names of the first pods are all it needs, at any size.
    let first_page = ListParams::default()
        .labels(&format!("{ROLE_LABEL}={ROLE_WORKLOAD}"))
        .limit(POD_EVENTS);
    let names: Vec<String> = pods
        .list_metadata(&first_page)
        .await
        .map_err(|e| BenchError::kube("listing the pods", e))?
        .items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| p.name_any())
        .take(POD_EVENTS as usize)
        .collect();
    let events = u32::try_from(names.len()).unwrap_or(u32::MAX);
    let touch = json!({ "metadata": { "annotations": {
        TOUCH_ANNOTATION: format!("{}-{}", side.name(), started.elapsed().as_millis())
    } } });
    let before = read(pid)?;
    let events_begun = Instant::now();
    futures::stream::iter(names.iter().map(Ok))
        .try_for_each_concurrent(CONCURRENCY, |name| {
            let (pods, touch) = (&pods, &touch);
            async move {
                pods.patch(name, &PatchParams::default(), &Patch::Merge(touch))
                    .await
                    .map(|_| ())
                    .map_err(|e| BenchError::kube("changing a pod", e))
            }
        })
        .await?;
    replace_one(&pods, Instant::now() + timeout).await?;
    let after = quiet(pid, idle_rate, Instant::now() + timeout).await?;
    let window = events_begun.elapsed().as_secs_f64();
    let events_cpu = (after.cpu_seconds - before.cpu_seconds - idle_rate * window).max(0.0);
    let seconds = |at: Instant| at.duration_since(started).as_secs_f64();
    Ok(ScaleRun {
        side,
        round: 0,
        pods: 0,
        caches_synced_seconds: synced_seconds,
        first_write_seconds: seconds(first_write),
        statuses_restored_seconds: seconds(all_restored),
        startup_cpu_seconds: at_restored.cpu_seconds,
        steady_rss_bytes: settled.rss_bytes,
        steady_anon_rss_bytes: settled.anon_rss_bytes,
        idle_cpu_per_second: idle_rate,
        pod_events: events,
        events_seconds: window,
        events_cpu_seconds: events_cpu,
        cpu_seconds_per_1000_pod_events: if events > 0 {
            events_cpu / f64::from(events) * 1000.0
        } else {
            0.0
        },
        relist: None,
    })
}

/// Every watch expires; the side relists. Peak RSS from just before until it is idle again.
async fn measure_relist(
    ctx: &Context,
    plane: &mut LocalPlane,
    process: &ManagedProcess,
    steady_rss: u64,
    idle_rate: f64,
) -> Result<RelistRun, BenchError> {
    let pid = process.pid();
    let timeout = ctx.sizes.timeout;
    // `5` resets the kernel's high-water mark to the current RSS (Linux ≥ 4.0): VmHWM is then the exact
    // peak of the relist, not of the start-up. The 200 ms samples stand in where that is refused.
    let hwm_reset = std::fs::write(format!("/proc/{pid}/clear_refs"), "5").is_ok();
    if !hwm_reset {
        eprintln!("bench: scale: cannot reset VmHWM of {pid}; the relist peak is sampled only");
    }
    let sampler = Sampler::start(pid, Duration::from_millis(200));
    eprintln!("bench: scale: expiring every watch (the API server restarts) ...");
    let begun = Instant::now();
    plane.expire_watches().await?;
    replace_one(
        &Api::namespaced(ctx.client.clone(), NAMESPACE),
        Instant::now() + timeout,
    )
    .await?;
    let seconds = begun.elapsed().as_secs_f64();
    let after = quiet(pid, idle_rate, Instant::now() + timeout).await?;
    let sampled = sampler.max_rss_bytes();
    drop(sampler);
    let peak = if hwm_reset {
        after.peak_rss_bytes.max(sampled)
    } else {
        sampled
    };
    Ok(RelistRun {
        seconds,
        peak_rss_bytes: peak,
        rss_after_bytes: after.rss_bytes,
        peak_over_steady: if steady_rss > 0 {
            peak as f64 / steady_rss as f64
        } else {
            0.0
        },
    })
}

fn read(pid: u32) -> Result<Usage, BenchError> {
    usage::read(pid).ok_or_else(|| {
        BenchError::io(
            format!("reading /proc/{pid}"),
            std::io::Error::other("the process is gone"),
        )
    })
}

/// Deletes a pod of [`SENTINEL_REPLICA_SET`] and waits until the side has created its replacement: by
/// then it has received every pod event before the delete. Requests failing right after the API
/// server's restart are retried until `deadline`.
async fn replace_one(pods: &Api<Pod>, deadline: Instant) -> Result<(), BenchError> {
    let selector = format!("app={SENTINEL_REPLICA_SET}");
    let params = ListParams::default().labels(&selector);
    let live = |list: &kube::api::ObjectList<kube::api::PartialObjectMeta<Pod>>| -> Vec<String> {
        list.items
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .map(|p| p.name_any())
            .collect()
    };
    let victim = loop {
        match pods.list_metadata(&params).await {
            Ok(list) => {
                if let Some(name) = live(&list).into_iter().next() {
                    break name;
                }
            }
            Err(e) if Instant::now() >= deadline => {
                return Err(BenchError::kube("listing the sentinel's pods", e));
            }
            Err(_) => {}
        }
        if Instant::now() >= deadline {
            return Err(BenchError::Timeout {
                what: format!("a pod of {SENTINEL_REPLICA_SET} to delete"),
                waited: Duration::ZERO,
            });
        }
        tokio::time::sleep(POLL).await;
    };
    loop {
        match pods.delete(&victim, &DeleteParams::default()).await {
            Ok(_) => break,
            // An earlier attempt got through before its answer was lost.
            Err(kube::Error::Api(status)) if status.is_not_found() => break,
            Err(e) if Instant::now() >= deadline => {
                return Err(BenchError::kube("deleting the sentinel pod", e));
            }
            Err(_) => tokio::time::sleep(POLL).await,
        }
    }
    let want = PODS_PER_REPLICA_SET as usize;
    loop {
        if let Ok(list) = pods.list_metadata(&params).await {
            let replaced = live(&list).iter().filter(|n| **n != victim).count();
            if replaced >= want {
                return Ok(());
            }
        }
        if Instant::now() >= deadline {
            return Err(BenchError::Timeout {
                what: format!("the side to replace pod {victim}"),
                waited: Duration::ZERO,
            });
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Waits until the process has used no more than its idle rate (plus a little) over [`QUIET_WINDOW`];
/// returns the last reading.
async fn quiet(pid: u32, idle_rate: f64, deadline: Instant) -> Result<Usage, BenchError> {
    let allowed = idle_rate * QUIET_WINDOW.as_secs_f64() + QUIET_SLACK;
    let mut last = read(pid)?;
    loop {
        tokio::time::sleep(QUIET_WINDOW).await;
        let now = read(pid)?;
        if now.cpu_seconds - last.cpu_seconds <= allowed {
            return Ok(now);
        }
        if Instant::now() >= deadline {
            return Err(BenchError::Timeout {
                what: "the side to be idle again".into(),
                waited: QUIET_WINDOW,
            });
        }
        last = now;
    }
}

/// The least-squares lines of one side's steady RSS and anonymous RSS over every run.
fn fit(runs: &[ScaleRun], side: Side) -> Option<ScaleFit> {
    let of = |read: fn(&ScaleRun) -> u64| -> Vec<(f64, f64)> {
        runs.iter()
            .filter(|r| r.side == side)
            .map(|r| (f64::from(r.pods), read(r) as f64))
            .collect()
    };
    let (rss_slope, rss_at_0) = linear_fit(&of(|r| r.steady_rss_bytes))?;
    let (anon_slope, anon_at_0) = linear_fit(&of(|r| r.steady_anon_rss_bytes))?;
    let at = f64::from(PROJECTED_PODS);
    Some(ScaleFit {
        side,
        rss_bytes_per_pod: rss_slope,
        rss_intercept_bytes: rss_at_0,
        anon_rss_bytes_per_pod: anon_slope,
        anon_rss_intercept_bytes: anon_at_0,
        projected_pods: PROJECTED_PODS,
        projected_rss_bytes: rss_at_0 + rss_slope * at,
        projected_anon_rss_bytes: anon_at_0 + anon_slope * at,
    })
}

/// How a number is read from a run.
type Reader = fn(&ScaleRun) -> f64;

/// The sides in the order they ran.
fn sides(report: &ScaleReport) -> Vec<Side> {
    let mut seen = Vec::new();
    for run in &report.runs {
        if !seen.contains(&run.side) {
            seen.push(run.side);
        }
    }
    seen
}

/// The median of one number over the rounds of one side at one size.
fn median_of(
    report: &ScaleReport,
    side: Side,
    pods: u32,
    read: impl Fn(&ScaleRun) -> f64,
) -> Option<f64> {
    let values: Vec<f64> = report
        .runs
        .iter()
        .filter(|r| r.side == side && r.pods == pods)
        .map(read)
        .collect();
    median(&values)
}

/// The table: per size and side, medians of the rounds; then the fitted lines and their projection,
/// and the plane's own memory per size.
pub(crate) fn table(report: &ScaleReport) -> String {
    let show =
        |v: Option<f64>, decimals: usize| v.map_or("-".to_string(), |v| format!("{v:.decimals$}"));
    let mut out = format!(
        "\nscale: ReplicaSets of {} pods made by the bench, Ready via kwok, on {} nodes; each side started cold with every ReplicaSet status stale ({}), measured after a {:.0} s settle (medians)\n",
        report.pods_per_replica_set,
        report.nodes,
        report.limits.describe(),
        report.settle_seconds
    );
    out.push_str(&format!(
        "{:>7} {:<10} {:>11} {:>12} {:>10} {:>11} {:>10} {:>15} {:>22}\n",
        "pods",
        "side",
        "synced (s)",
        "1st write (s)",
        "all (s)",
        "RSS (MiB)",
        "anon (MiB)",
        "CPU s/1000 ev",
        "relist peak (MiB, ×)"
    ));
    for size in &report.sizes {
        for side in sides(report) {
            let of = |read: fn(&ScaleRun) -> f64| median_of(report, side, size.pods, read);
            let relist = {
                let peak = of(|r| {
                    r.relist
                        .as_ref()
                        .map_or(f64::NAN, |l| l.peak_rss_bytes as f64 / MIB)
                });
                let ratio = of(|r| r.relist.as_ref().map_or(f64::NAN, |l| l.peak_over_steady));
                match (peak, ratio) {
                    (Some(p), Some(r)) => format!("{p:.1} ({r:.2}×)"),
                    _ => "-".into(),
                }
            };
            out.push_str(&format!(
                "{:>7} {:<10} {:>11} {:>12} {:>10} {:>11} {:>10} {:>15} {:>22}\n",
                size.pods,
                side.name(),
                show(of(|r| r.caches_synced_seconds), 2),
                show(of(|r| r.first_write_seconds), 2),
                show(of(|r| r.statuses_restored_seconds), 2),
                show(of(|r| r.steady_rss_bytes as f64 / MIB), 1),
                show(of(|r| r.steady_anon_rss_bytes as f64 / MIB), 1),
                show(of(|r| r.cpu_seconds_per_1000_pod_events), 3),
                relist,
            ));
        }
    }
    if report.fits.is_empty() {
        out.push_str("(one size only: no per-pod slope)\n");
    } else {
        out.push_str(&format!(
            "least squares over the sizes, projected to {PROJECTED_PODS} pods:\n{:<10} {:>14} {:>14} {:>20} {:>15} {:>20}\n",
            "side", "RSS KiB/pod", "RSS at 0 MiB", "RSS projected MiB", "anon KiB/pod", "anon projected MiB"
        ));
        for f in &report.fits {
            out.push_str(&format!(
                "{:<10} {:>14.2} {:>14.1} {:>20.0} {:>15.2} {:>20.0}\n",
                f.side.name(),
                f.rss_bytes_per_pod / 1024.0,
                f.rss_intercept_bytes / MIB,
                f.projected_rss_bytes / MIB,
                f.anon_rss_bytes_per_pod / 1024.0,
                f.projected_anon_rss_bytes / MIB,
            ));
        }
    }
    out.push_str("the plane's RSS (MiB) once the pods were Ready:\n");
    for size in &report.sizes {
        out.push_str(&format!(
            "{:>7} pods: {}\n",
            size.pods,
            size.plane_rss_bytes
                .iter()
                .map(|(name, bytes)| format!("{name} {:.0}", *bytes as f64 / MIB))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    out
}

/// The plot: steady RSS and anonymous RSS against pods, measured (dots, medians of the rounds) and
/// fitted (dashed, out to the projection).
pub(crate) fn plot(report: &ScaleReport) -> String {
    let mut series = Vec::new();
    for side in sides(report) {
        let color = side_color(side);
        let readers: [(&str, Reader, bool); 2] = [
            ("RSS", |r| r.steady_rss_bytes as f64 / MIB, false),
            ("anon RSS", |r| r.steady_anon_rss_bytes as f64 / MIB, true),
        ];
        for (what, read, light) in readers {
            let points: Vec<(f64, f64)> = report
                .sizes
                .iter()
                .filter_map(|s| Some((f64::from(s.pods), median_of(report, side, s.pods, read)?)))
                .collect();
            // Anonymous memory in the same colour, thinner by being half transparent.
            let color = if light {
                format!("{color}80")
            } else {
                color.to_string()
            };
            series.push(Series {
                label: format!("{} {what}", side.name()),
                color: color.clone(),
                dashed: false,
                points,
                markers: true,
            });
            if let Some(f) = report.fits.iter().find(|f| f.side == side) {
                let (slope, at_0) = if light {
                    (f.anon_rss_bytes_per_pod, f.anon_rss_intercept_bytes)
                } else {
                    (f.rss_bytes_per_pod, f.rss_intercept_bytes)
                };
                let at = |pods: f64| (at_0 + slope * pods) / MIB;
                let end = f64::from(f.projected_pods);
                series.push(Series {
                    label: format!("{} {what} fit", side.name()),
                    color,
                    dashed: true,
                    points: vec![(0.0, at(0.0)), (end, at(end))],
                    markers: false,
                });
            }
        }
    }
    line_chart(
        &format!("scale: steady memory against cached pods, fitted to {PROJECTED_PODS}"),
        "pods cached",
        "MiB",
        &series,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(side: Side, pods: u32, rss_mib: f64) -> ScaleRun {
        ScaleRun {
            side,
            round: 1,
            pods,
            caches_synced_seconds: 1.0,
            first_write_seconds: 1.5,
            statuses_restored_seconds: 3.0,
            startup_cpu_seconds: 1.0,
            steady_rss_bytes: (rss_mib * MIB) as u64,
            steady_anon_rss_bytes: (rss_mib / 2.0 * MIB) as u64,
            idle_cpu_per_second: 0.0,
            pod_events: 100,
            events_seconds: 1.0,
            events_cpu_seconds: 0.1,
            cpu_seconds_per_1000_pod_events: 1.0,
            relist: None,
        }
    }

    #[test]
    fn sizes_round_up_to_whole_replica_sets_in_order() {
        assert_eq!(replica_set_counts(&[60, 20, 25, 20]), [2, 3, 6]);
        assert_eq!(replica_set_counts(&[1]), [1]);
        assert_eq!(nodes_for(30_000), 31);
        assert_eq!(nodes_for(60), 2);
    }

    #[test]
    fn the_fit_is_per_side_and_projects_to_150_000_pods() {
        // mini-kcm: 10 MiB + 4 KiB per pod; upstream: 50 MiB + 16 KiB per pod.
        let line = |at_0: f64, kib: f64, pods: u32| at_0 + kib * f64::from(pods) / 1024.0;
        let runs: Vec<ScaleRun> = [1000, 3000]
            .into_iter()
            .flat_map(|pods| {
                [
                    run(Side::MiniKcm, pods, line(10.0, 4.0, pods)),
                    run(Side::Upstream, pods, line(50.0, 16.0, pods)),
                ]
            })
            .collect();
        let ours = fit(&runs, Side::MiniKcm).unwrap();
        assert!((ours.rss_bytes_per_pod - 4096.0).abs() < 1.0, "{ours:?}");
        let projected = ours.projected_rss_bytes / MIB;
        assert!(
            (projected - line(10.0, 4.0, 150_000)).abs() < 0.01,
            "{projected}"
        );
        let theirs = fit(&runs, Side::Upstream).unwrap();
        assert!(
            (theirs.anon_rss_bytes_per_pod - 8192.0).abs() < 1.0,
            "{theirs:?}"
        );
        // One size: no slope.
        assert!(fit(&runs[..2], Side::MiniKcm).is_none());
    }

    #[test]
    fn the_table_and_plot_show_every_size_and_side() {
        let runs: Vec<ScaleRun> = [20, 60]
            .into_iter()
            .flat_map(|pods| {
                [
                    run(Side::MiniKcm, pods, 20.0),
                    run(Side::Upstream, pods, 80.0),
                ]
            })
            .collect();
        let fits = [Side::MiniKcm, Side::Upstream]
            .into_iter()
            .filter_map(|side| fit(&runs, side))
            .collect();
        let report = ScaleReport {
            pods_per_replica_set: 10,
            nodes: 5,
            limits: ClientLimits::UNTHROTTLED,
            settle_seconds: 1.0,
            sizes: [20, 60]
                .into_iter()
                .map(|pods| ScaleSize {
                    pods,
                    replica_sets: pods / 10,
                    populate_seconds: 1.0,
                    plane_rss_bytes: BTreeMap::from([("etcd".to_string(), 100 << 20)]),
                })
                .collect(),
            runs,
            fits,
        };
        let table = table(&report);
        assert_eq!(
            table.lines().filter(|l| l.contains("mini-kcm")).count(),
            3,
            "{table}"
        );
        assert!(table.contains("etcd 100"), "{table}");
        let svg = plot(&report);
        assert!(svg.contains("upstream anon RSS fit"), "{svg}");
        // Two measured sizes per line, four measured lines.
        assert_eq!(svg.matches("<circle").count(), 8);
    }

    #[test]
    fn upstream_is_synced_once_every_controller_says_so() {
        let waiting = "I1127 18:37:19.100000 1 x] \"Waiting for caches to sync\"\n".repeat(3);
        assert_eq!(caches_synced(Side::Upstream, &waiting), None);
        let two = format!(
            "{waiting}{}",
            "I1127 18:37:19.200000 1 x] \"Caches are synced\"\n".repeat(2)
        );
        assert_eq!(caches_synced(Side::Upstream, &two), None);
        let three = format!("{two}I1127 18:37:19.491389 1 x] \"Caches are synced\"\n");
        let line = caches_synced(Side::Upstream, &three).unwrap();
        let at = time_of_day(Side::Upstream, line).unwrap();
        assert!(
            (at - (18.0 * 3600.0 + 37.0 * 60.0 + 19.491389)).abs() < 1e-6,
            "{at}"
        );
        let ours = "2026-11-27T18:37:17.565301Z  INFO mini_kcm_manager: caches synced\n";
        let line = caches_synced(Side::MiniKcm, ours).unwrap();
        let at = time_of_day(Side::MiniKcm, line).unwrap();
        assert!(
            (at - (18.0 * 3600.0 + 37.0 * 60.0 + 17.565301)).abs() < 1e-6,
            "{at}"
        );
        assert_eq!(
            caches_synced(
                Side::MiniKcm,
                "INFO x: waiting for the informer caches to sync"
            ),
            None
        );
    }
}
