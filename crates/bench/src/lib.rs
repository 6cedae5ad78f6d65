//! `mini-kcm bench`: mini-kcm and upstream's kube-controller-manager side by side on one local plane.
//!
//! One plane is started with no workload controllers. For each scenario and round, mini-kcm
//! (`mini-kcm run --kinds apps`) and kube-controller-manager (only its deployment, replicaset and
//! daemonset controllers) run one after the other with the same client limits, each in a fresh
//! namespace with the other stopped. Reported per scenario and side: time from the create or update
//! until the status says done, API requests per client from the audit log, CPU seconds, peak and
//! steady RSS. Each round also measures the plane's floor: the scenario's pod work with no
//! controller (`floor`). Output: a table of medians and ratios on stdout, `bench.json` and one SVG
//! plot per scenario (ready pods over time). See docs/performance.md.
//!
//! Where to start reading: [`run`] (below), then `run.rs` (a plane, every scenario round after round, each
//! side in turn), `scenario.rs` (what each scenario creates and when it is done), `side.rs` (how each
//! controller process starts) and `report.rs` (medians, ratios, the table, JSON and plots). Three scenarios
//! named only by name run in modules of their own: `fresh.rs`, `failover.rs` and `scale.rs` (memory and
//! CPU per cached pod, projected to 150 000 pods).

// The public surface is the list of `pub` items below; this keeps every other `pub` from claiming more.
#![warn(unreachable_pub)]

mod audit;
mod body_bytes;
mod error;
mod failover;
mod floor;
mod fresh;
mod report;
mod run;
mod scale;
mod scenario;
mod side;
mod stats;
mod svg;
mod usage;
mod watch;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use clap::Args;
use mini_kcm_local_plane::{
    Binaries, LocalPlane, PlaneOptions, UpstreamWorkloadControllers, VersionSet,
};

pub use error::BenchError;
pub use report::{
    FailoverReport, FailoverRun, FreshReport, FreshRun, RelistRun, Report, RunResult, ScaleFit,
    ScaleReport, ScaleRun, ScaleSize, ScenarioResult,
};
pub use scenario::{Scenario, Size, Sizes};
pub use side::{ClientLimits, Side};

/// The command line of `mini-kcm bench`.
#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
    /// Rounds per scenario; each round runs the plane's floor (unless turned off), mini-kcm, then
    /// upstream.
    #[arg(long, default_value_t = 2)]
    pub rounds: u32,
    /// Which scenarios to run (comma-separated).
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = Scenario::ALL)]
    pub scenarios: Vec<Scenario>,
    /// `small`: seconds per run (CI smoke test); `full`: the sizes of docs/performance.md.
    #[arg(long, value_enum, default_value_t = Size::Small)]
    pub size: Size,
    /// Where bench.json, the SVG plots, controller logs and kubeconfigs go.
    #[arg(long, default_value = "target/bench")]
    pub out: PathBuf,
    /// Requests per second of each controller client, both sides (0: unthrottled). The steady
    /// scenario always runs unthrottled.
    #[arg(long, default_value_t = 20.0)]
    pub kube_api_qps: f32,
    /// Burst of each controller client, both sides.
    #[arg(long, default_value_t = 30)]
    pub kube_api_burst: u32,
    /// What mini-kcm is compared with: upstream's kube-controller-manager, mini-kcm itself without
    /// its decision log (to measure what the log costs), or another mini-kcm build
    /// (`--baseline-binary`).
    #[arg(long, value_enum, default_value_t = Side::Upstream)]
    pub baseline: Side,
    /// The executable of the `other-mini-kcm` baseline, e.g. a build with another allocator or
    /// profile, run in the same invocation as the one benchmarked.
    #[arg(long)]
    pub baseline_binary: Option<PathBuf>,
    /// The mini-kcm binary to benchmark (default: this executable).
    #[arg(long)]
    pub mini_kcm_binary: Option<PathBuf>,
    /// Pods of the steady scenario instead of the size's (10 per ReplicaSet, rounded up): a mid size
    /// such as 3 000 measures the RSS per cached pod in a fraction of the full run's time.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub steady_pods: Option<u32>,
    /// Pods cached at each size of the scale scenario (comma-separated; 10 per ReplicaSet, rounded
    /// up), instead of the size's (100,300 / 1000,5000,10000).
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..))]
    pub scale_pods: Option<Vec<u32>>,
    /// Also run each scenario's pod work with no controller, once per round (the plane's floor:
    /// the time no controller can beat, see docs/performance.md).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub plane_floor: bool,
}

/// Runs the benchmark, prints progress on stderr and the table on stdout, writes the files.
pub async fn run(args: BenchArgs) -> Result<Report, BenchError> {
    if args.rounds == 0 || args.scenarios.is_empty() || args.baseline == Side::MiniKcm {
        return Err(BenchError::NothingToRun);
    }
    if (args.baseline == Side::OtherMiniKcm) != args.baseline_binary.is_some() {
        return Err(BenchError::BaselineBinary);
    }
    let begun = Instant::now();
    let load_average_start = load_average();
    let mut sizes = Sizes::of(args.size);
    if let Some(pods) = args.steady_pods {
        sizes.set_steady_pods(pods);
    }
    if let Some(pods) = &args.scale_pods {
        sizes.scale_pods = pods.clone();
    }
    if args.scenarios.contains(&Scenario::Scale) {
        // Enough kwok nodes for the largest population (the DaemonSet scenario then covers them all).
        let largest = sizes.scale_pods.iter().copied().max().unwrap_or_default();
        sizes.nodes = sizes.nodes.max(scale::nodes_for(largest));
    }
    let limits = if args.kube_api_qps <= 0.0 {
        ClientLimits::UNTHROTTLED
    } else {
        ClientLimits {
            qps: args.kube_api_qps,
            burst: args.kube_api_burst,
        }
    };
    let mini_kcm_binary = match args.mini_kcm_binary.clone() {
        Some(path) => path,
        None => std::env::current_exe()
            .map_err(|e| BenchError::io("finding the mini-kcm executable", e))?,
    };
    let work_dir = args.out.join("runs");
    std::fs::create_dir_all(&work_dir)
        .map_err(|e| BenchError::io(format!("creating {}", work_dir.display()), e))?;

    eprintln!(
        "bench: starting a plane with {} nodes and no workload controllers",
        sizes.nodes
    );
    let binaries = Binaries::ensure(&VersionSet::selected()?).await?;
    let mut options = PlaneOptions::new(binaries);
    options.nodes = sizes.nodes as usize;
    options.upstream_workload_controllers = UpstreamWorkloadControllers::Disabled;
    let mut plane = LocalPlane::start(options).await?;
    let info = plane.info().clone();
    eprintln!(
        "bench: plane ready in {:.1}s ({})",
        info.startup_seconds,
        info.state_dir.display()
    );
    let audit = Arc::new(Mutex::new(
        audit::AuditTail::open_at_end(&info.audit_log())
            .map_err(|e| BenchError::io("opening the audit log", e))?,
    ));
    let follower = run::AuditFollower::start(audit.clone());
    let ctx = run::Context {
        client: plane.client().await?,
        plane: info.clone(),
        sizes: sizes.clone(),
        mini_kcm_binary,
        other_mini_kcm_binary: args.baseline_binary.clone(),
        work_dir,
        audit: audit.clone(),
    };

    if args.plane_floor && cfg!(debug_assertions) {
        eprintln!(
            "bench: warning: this is a debug build; the floor's client runs in this process, so its CPU \
             is a debug build's (several times a release build's): run the bench from a release build"
        );
    }
    let runs_per_round = if args.plane_floor { 3 } else { 2 };
    let total_runs = args.scenarios.len() as u32 * args.rounds * runs_per_round;
    let mut done_runs = 0u32;
    let mut scenarios = Vec::new();
    let mut fresh_under_load = None;
    let mut failover = None;
    let mut scale = None;
    for &scenario in &args.scenarios {
        if scenario == Scenario::FreshUnderLoad {
            // Its own runs: one population, three sides (see fresh.rs).
            fresh_under_load = Some(fresh::run(&ctx, args.rounds, args.baseline, limits).await?);
            done_runs += args.rounds * runs_per_round;
            continue;
        }
        if scenario == Scenario::Failover {
            // Its own runs: two replicas per side (see failover.rs).
            failover = Some(failover::run(&ctx, args.rounds, args.baseline).await?);
            done_runs += args.rounds * runs_per_round;
            continue;
        }
        if scenario == Scenario::Scale {
            // Its own runs: one population grown size by size, and a forced relist (see scale.rs).
            let last = args.scenarios.last() == Some(&scenario);
            let cleanup = if last {
                scale::Cleanup::Leave
            } else {
                scale::Cleanup::Wait
            };
            scale = Some(scale::run(&ctx, &mut plane, args.rounds, args.baseline, cleanup).await?);
            done_runs += args.rounds * runs_per_round;
            continue;
        }
        let scenario_limits = if scenario.unthrottled() {
            ClientLimits::UNTHROTTLED
        } else {
            limits
        };
        let mut runs = Vec::new();
        let mut plane_floor = Vec::new();
        for round in 1..=args.rounds {
            let mut floor_seconds = None;
            let mut floor_cpu_seconds = None;
            if args.plane_floor {
                done_runs += 1;
                eprintln!(
                    "bench: [{done_runs}/{total_runs}] {} round {round}/{}: plane floor (no controller) ...",
                    scenario.name(),
                    args.rounds,
                );
                let floor = floor::run_floor(&ctx, scenario, round).await?;
                eprintln!(
                    "bench: [{done_runs}/{total_runs}]   done in {:.2}s, the client's CPU {:.2}s, {} wake-ups for {} pod events",
                    floor.seconds_to_done, floor.cpu_seconds, floor.wakeups, floor.pod_events
                );
                floor_seconds = Some(floor.seconds_to_done);
                floor_cpu_seconds = Some(floor.cpu_seconds);
                plane_floor.push(floor);
            }
            for side in [Side::MiniKcm, args.baseline] {
                done_runs += 1;
                eprintln!(
                    "bench: [{done_runs}/{total_runs}] {} round {round}/{}: {} ...",
                    scenario.name(),
                    args.rounds,
                    side.name()
                );
                let mut result =
                    run::run_side(&ctx, scenario, side, round, scenario_limits).await?;
                result.plane_floor_seconds = floor_seconds;
                result.plane_floor_cpu_seconds = floor_cpu_seconds;
                eprintln!(
                    "bench: [{done_runs}/{total_runs}]   started in {:.1}s, done in {:.2}s, CPU {:.2}s ({:.2}s until done, {} wake-ups for {} pod events), peak RSS {:.0} MiB, steady RSS {:.0} MiB ({:.1} MiB anonymous)",
                    result.startup_seconds,
                    result.seconds_to_done,
                    result.cpu_seconds,
                    result.timed_cpu_seconds,
                    result.timed_wakeups,
                    result.pod_events,
                    result.peak_rss_bytes as f64 / 1048576.0,
                    result.steady_rss_bytes as f64 / 1048576.0,
                    result.steady_anon_rss_bytes as f64 / 1048576.0
                );
                runs.push(result);
            }
        }
        scenarios.push(ScenarioResult {
            scenario,
            description: scenario.describe(&sizes),
            limits: scenario_limits,
            runs,
            plane_floor,
            summary: Vec::new(),
        });
    }
    drop(follower);
    {
        let mut tail = ctx.audit.lock().map_err(|_| {
            BenchError::io("reading the audit log", std::io::Error::other("poisoned"))
        })?;
        tail.drain()
            .map_err(|e| BenchError::io("reading the audit log", e))?;
        for scenario in &mut scenarios {
            for run in &mut scenario.runs {
                run::fill_requests(run, &tail);
            }
            scenario.summary = report::summarize(&scenario.runs, args.baseline);
        }
    }
    plane.stop().await;

    let report = Report {
        command: std::env::args().collect::<Vec<_>>().join(" "),
        size: args.size,
        sizes,
        rounds: args.rounds,
        baseline: args.baseline,
        limits,
        kubernetes_version: info.kubernetes_version.clone(),
        mini_kcm_version: env!("CARGO_PKG_VERSION").to_string(),
        cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
        load_average_start,
        load_average_end: load_average(),
        plane_startup_seconds: info.startup_seconds,
        total_seconds: begun.elapsed().as_secs_f64(),
        scenarios,
        fresh_under_load,
        failover,
        scale,
    };
    let mut files = report::write_files(&report, &args.out)?;
    if let Some(scale) = &report.scale {
        let path = args.out.join("scale.svg");
        std::fs::write(&path, scale::plot(scale))
            .map_err(|e| BenchError::io(format!("writing {}", path.display()), e))?;
        files.push(path);
    }
    print!("{}", report::table(&report));
    if let Some(fresh) = &report.fresh_under_load {
        print!("{}", fresh::table(fresh));
    }
    if let Some(failover) = &report.failover {
        print!("{}", failover::table(failover));
    }
    if let Some(scale) = &report.scale {
        print!("{}", scale::table(scale));
    }
    for file in files {
        eprintln!("bench: wrote {}", file.display());
    }
    Ok(report)
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}
