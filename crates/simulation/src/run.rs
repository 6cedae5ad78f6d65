//! One run: a scenario under a schedule of faults, step by step, on a single thread with simulated time,
//! so the same scenario and schedule always make the same run.
//!
//! Each step is one of, in this order of preference: a user operation whose time has come (one timed
//! to happen mid-rollout); one sync of a controller with a key ready (round robin over the three);
//! one step of the rest of the cluster (`crate::cluster`); the next user operation, once all is at
//! rest; moving the clock to the next delayed key (also once all else is at rest: a retry still acts).
//! Before each step the process's informers are given
//! the API's new events (less those a `Stale` fault holds back for this sync). After each step the
//! state's invariants are checked (`crate::invariants`); the run ends at rest, where the steady state
//! must hold, or at its bounds, which is a failure to converge.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use mini_kcm_runtime::recorded_api::WatchEvent;
use mini_kcm_runtime::switches::safeties::Safeties;

use crate::cluster::Cluster;
use crate::invariants::{Monitor, Violation, steady_state};
use crate::process::Process;
use crate::scenarios::Scenario;
use crate::schedule::Fault;

/// Steps a run may take before it counts as not converging.
const MAX_STEPS: usize = 1_500;
/// Simulated time a run may wait for delayed keys before it counts as not converging.
const MAX_WAIT: Duration = Duration::from_secs(3_600);

/// What one run did and found.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Steps taken.
    pub steps: usize,
    /// Each write the controllers sent, as `verb resource` (a baseline's offer of write faults).
    pub writes: Vec<String>,
    /// Per sync, the events of each resource its caches were given just before it (a baseline's
    /// offer of stale views).
    pub syncs: Vec<BTreeMap<String, usize>>,
    /// Process restarts after crashes.
    pub restarts: usize,
    /// Broken invariants, in order.
    pub violations: Vec<Violation>,
    /// Each step, for people reading a failing schedule.
    pub trace: Vec<String>,
    /// Every change the API made, as `resource namespace/name resourceVersion` (`deleted` after a
    /// deletion): two runs of one schedule must make the same.
    pub changes: Vec<String>,
}

/// Runs `scenario` under `schedule` with `safeties`.
///
/// # Panics
/// If the single-threaded runtime cannot be built (out of resources).
pub fn run(scenario: &Scenario, schedule: &[Fault], safeties: &Safeties) -> Report {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime");
    runtime.block_on(run_on(scenario, schedule, safeties))
}

fn lock(monitor: &Mutex<Monitor>) -> MutexGuard<'_, Monitor> {
    monitor.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Lets the process's background tasks (the event recorder, the queues' timers) run.
async fn settle() {
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
}

fn record(monitor: &Mutex<Monitor>, events: &[WatchEvent]) {
    let mut monitor = lock(monitor);
    for event in events {
        monitor.cached(&event.resource, &event.object, event.deleted);
    }
}

async fn run_on(scenario: &Scenario, schedule: &[Fault], safeties: &Safeties) -> Report {
    let mut cluster = Cluster::new();
    for object in &scenario.objects {
        cluster.api.put(object.clone());
    }
    let monitor = Arc::new(Mutex::new(Monitor::new(schedule.to_vec())));
    let intercepting = Arc::clone(&monitor);
    cluster
        .api
        .intercept(move |request, stored| lock(&intercepting).on_write(request, stored));
    let (mut process, listed) = Process::start(&cluster.api, safeties);
    record(&monitor, &listed);

    let mut report = Report::default();
    let mut operations = scenario.operations.iter().peekable();
    let mut since_operation = 0;
    let mut waited = Duration::ZERO;
    let mut at_rest = false;
    // The events of each resource the caches were given since the last sync (what the next sync's
    // caches may lag by).
    let mut given: BTreeMap<String, usize> = BTreeMap::new();
    while report.steps < MAX_STEPS {
        lock(&monitor).step = report.steps;
        let sync = report.syncs.len();
        let faults: Vec<&Fault> = schedule.iter().filter(|f| f.sync() == Some(sync)).collect();
        let mut held = BTreeMap::new();
        for fault in &faults {
            match fault {
                Fault::Stale { resource, lag, .. } => {
                    held.insert(resource.clone(), *lag);
                }
                Fault::Relist { resource, .. } => {
                    // Lost if the sync happens (below); delivered at once if it does not.
                    held.insert(resource.clone(), usize::MAX);
                }
                _ => {}
            }
        }
        let mut delivered = process.deliver(&cluster.api, &held);
        if !held.is_empty() && !process.has_work() {
            // Nothing to sync on the lagging cache: the held events come now.
            delivered.extend(process.deliver(&cluster.api, &BTreeMap::new()));
        }
        record(&monitor, &delivered);
        for event in &delivered {
            *given.entry(event.resource.clone()).or_default() += 1;
        }
        let mut user_changed = false;
        let timed = operations
            .peek()
            .is_some_and(|op| op.after_steps.is_some_and(|n| since_operation >= n));
        if timed {
            if let Some(operation) = operations.next() {
                cluster.act(&operation.action);
                report.trace.push(format!("user: {:?}", operation.action));
                since_operation = 0;
                user_changed = true;
            }
        } else if process.next_to_sync().is_some() {
            report.syncs.push(std::mem::take(&mut given));
            let (index, controller) = process.next_to_sync().unwrap_or((0, "none"));
            let log_before = cluster.api.watch_log_len();
            lock(&monitor).syncing = controller;
            let synced = process.sync(index).await.unwrap_or_default();
            settle().await;
            let written = cluster.api.watch_log(log_before);
            lock(&monitor).end_sync(&synced, &written);
            let wrote: Vec<String> = written
                .iter()
                .map(|e| {
                    let kind = e.resource.rsplit('/').next().unwrap_or_default();
                    let what = if e.deleted { "gone" } else { "written" };
                    format!("{kind} {} {what}", crate::objects::name(&e.object))
                })
                .collect();
            report
                .trace
                .push(format!("sync {sync}: {synced} ({})", wrote.join(", ")));
            if cluster.api.is_down() {
                report.trace.push("crash: a new process starts".to_string());
                cluster.api.bring_up();
                lock(&monitor).restarted();
                let (restarted, listed) = Process::start(&cluster.api, safeties);
                process = restarted;
                record(&monitor, &listed);
                report.restarts += 1;
            } else {
                for fault in &faults {
                    if let Fault::Relist { resource, .. } = fault {
                        let listed =
                            process.relist(&cluster.api, resource, cluster.api.watch_log_len());
                        record(&monitor, &listed);
                    }
                }
            }
        } else if cluster.step() > 0 {
            report.trace.push("cluster".to_string());
        } else if let Some(operation) = operations.next() {
            cluster.act(&operation.action);
            report.trace.push(format!("user: {:?}", operation.action));
            since_operation = 0;
            user_changed = true;
        } else if let Some(delay) = process.next_delayed().filter(|_| waited < MAX_WAIT) {
            // Delayed keys run before rest is declared: a retry after a failed write still acts.
            let delay = delay.max(Duration::from_millis(1));
            tokio::time::advance(delay).await;
            waited += delay;
            cluster.set_clock(waited);
            settle().await;
            // Not how long: the controllers compute some delays from the wall clock (a progress
            // deadline's requeue), which differs between runs by the time a run takes.
            report
                .trace
                .push("wait for the next delayed key".to_string());
        } else {
            at_rest = steady_state(&cluster.api).is_empty();
            break;
        }
        report.steps += 1;
        since_operation += 1;
        lock(&monitor).check_state(&cluster.api, user_changed);
    }
    let mut monitor = lock(&monitor);
    if !at_rest {
        let problems = steady_state(&cluster.api).join("; ");
        let (invariant, detail) = if report.steps >= MAX_STEPS {
            (
                "converges",
                format!("no rest after {MAX_STEPS} steps: {problems}"),
            )
        } else if waited >= MAX_WAIT {
            (
                "converges",
                format!("no rest after {MAX_WAIT:?} of simulated time: {problems}"),
            )
        } else {
            ("steady-state", format!("at rest, but: {problems}"))
        };
        monitor.violations.push(Violation {
            invariant,
            step: report.steps,
            detail,
        });
    }
    if process.undecodable > 0 {
        monitor.violations.push(Violation {
            invariant: "converges",
            step: report.steps,
            detail: format!(
                "{} objects did not decode as their informer's kind (the simulation's mistake)",
                process.undecodable
            ),
        });
    }
    report.changes = cluster
        .api
        .watch_log(0)
        .iter()
        .map(|e| {
            format!(
                "{} {}/{} {}{}",
                e.resource,
                crate::objects::namespace(&e.object),
                crate::objects::name(&e.object),
                crate::objects::resource_version(&e.object),
                if e.deleted { " deleted" } else { "" }
            )
        })
        .collect();
    report.writes = std::mem::take(&mut monitor.write_log);
    report.violations = std::mem::take(&mut monitor.violations);
    report
}
